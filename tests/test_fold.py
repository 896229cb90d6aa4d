"""The fold pipeline: input kinds, provider detection, typed errors, and early ends."""

from __future__ import annotations

import json

import pytest
from support import REAL, final_message, read, streamed_display_items

from streamfold import (
    MessageCompleted,
    PartCompleted,
    StreamFolder,
    StreamProtocolError,
    UsageError,
    extract_display_items,
    fold,
    fold_message,
    load_recording,
)

THINKING_TOOL = "anthropic/thinking-then-tool-use.sse"


def sse_payloads(rel: str) -> list[dict[str, object]]:
    from streamfold import SSEDecoder

    decoder = SSEDecoder()
    events = decoder.feed(read(rel)) + decoder.close()
    return [json.loads(e.data) for e in events if e.data != b"[DONE]"]


def test_bytes_str_and_dicts_fold_to_the_same_message() -> None:
    data = read(THINKING_TOOL)
    from_bytes = fold_message([data])
    from_str = fold_message(data.decode())
    from_dicts = fold_message(sse_payloads(THINKING_TOOL))
    assert from_bytes == from_str == from_dicts
    assert from_bytes.metadata["provider"] == "anthropic"


def test_a_recording_folds_directly() -> None:
    recording = load_recording(REAL / THINKING_TOOL)
    assert recording.provider == "anthropic"
    assert fold_message(recording) == fold_message([read(THINKING_TOOL)])


def test_streamed_display_items_equal_the_final_messages() -> None:
    # Each part's items when it completes, a text part's restated when its marker comes.
    for rel in ["anthropic/thinking-then-tool-use.sse", "anthropic/web-search-citations.sse"]:
        events = list(fold([read(rel)]))
        streamed = streamed_display_items(events)
        final = extract_display_items(final_message(events), order="stream")
        assert streamed == final
        assert any(i.content.get("utterance") == "narration" for i in final) == (
            rel == "anthropic/web-search-citations.sse"
        )


def test_unknown_provider_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"expected one of .*got 'acme'"):
        fold_message([b""], provider="acme")


def test_unsupported_chunk_type_is_a_usage_error() -> None:
    folder = StreamFolder()
    with pytest.raises(UsageError, match="got int"):
        folder.feed(42)


def test_mixing_bytes_and_objects_is_a_usage_error() -> None:
    folder = StreamFolder()
    folder.feed(b"data: ")
    with pytest.raises(UsageError, match="got a decoded object"):
        folder.feed({"type": "ping"})


def test_feed_after_close_is_a_usage_error() -> None:
    folder = StreamFolder("anthropic")
    folder.close()
    with pytest.raises(UsageError, match="after"):
        folder.feed(b"data: {}\n\n")


def test_stream_from_no_known_provider_is_a_protocol_error() -> None:
    with pytest.raises(StreamProtocolError, match="match none"):
        fold_message([b'data: {"hello": "world"}\n\n'])


def test_broken_json_keeps_the_completed_parts_in_the_error() -> None:
    data = read(THINKING_TOOL)
    cut = data.index(b"event: content_block_start", data.index(b"content_block_stop"))
    broken = data[:cut] + b'event: content_block_start\ndata: {"type": "content_blo\n\n'
    with pytest.raises(StreamProtocolError, match="invalid JSON") as info:
        fold_message([broken])
    error = info.value
    assert error.provider == "anthropic"
    assert error.position is not None and error.position > 1
    assert error.partial is not None
    assert error.partial.content[0].type == "thinking"
    assert error.partial.content[0].options["signature"]


def test_empty_input_gives_an_empty_incomplete_message() -> None:
    message = fold_message([b""], provider="anthropic")
    assert (message.status, message.content, message.tool_calls) == ("incomplete", [], [])


def test_consumer_that_stops_early_sees_a_cancelled_snapshot() -> None:
    data = read(THINKING_TOOL)
    stream = fold(data[i : i + 20] for i in range(0, len(data), 20))
    for event in stream:
        if isinstance(event, PartCompleted):
            break
    stream.close()
    snapshot = stream.snapshot()
    assert snapshot.status == "cancelled"
    assert snapshot.content[0].type == "thinking"


def test_fold_stops_reading_after_the_message_completes() -> None:
    data = read(THINKING_TOOL)
    seen: list[bytes] = []

    def chunks() -> object:
        yield data
        seen.append(b"asked for more")
        yield b"garbage that would not parse"

    events = list(fold(chunks()))  # type: ignore[arg-type]
    assert isinstance(events[-1], MessageCompleted)
    assert seen == []


def test_stream_cut_inside_the_last_event_is_incomplete_not_an_error() -> None:
    data = read(THINKING_TOOL)
    cut = data.index(b'"type":"tool_use"') + 10
    message = fold_message([data[:cut]])
    assert message.status == "incomplete"
    assert message.metadata["truncated_tail"] is True
    assert message.content[0].type == "thinking"
    assert message.content[0].options["signature"]


def test_whole_last_event_without_blank_line_still_counts() -> None:
    data = read(THINKING_TOOL).rstrip(b"\r\n")
    assert fold_message([data]) == fold_message([read(THINKING_TOOL)])


@pytest.mark.parametrize(
    ("payload", "provider"),
    [
        ({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}, "gemini"),
        ({"error": "model 'x' not found"}, "ollama"),
        (
            {"type": "error", "code": "server_error", "message": "boom", "param": None},
            "openai-responses",
        ),
        ({"type": "message_start", "message": {}}, "anthropic"),
        ({"messageStart": {"role": "assistant"}}, "bedrock"),
        ({"hello": "world"}, None),
    ],
)
def test_detection_of_streams_that_open_with_an_error(
    payload: dict[str, object], provider: str | None
) -> None:
    from streamfold import detect_provider

    assert detect_provider(payload) == provider


def test_streams_that_open_with_an_error_fold_to_status_error() -> None:
    gemini = {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
    message = fold_message([f"data: {json.dumps(gemini)}\n\n"])
    assert (message.status, message.metadata["provider"]) == ("error", "gemini")
    ollama = fold_message([b'{"error": "model not found"}\n'])
    assert (ollama.status, ollama.metadata["provider"]) == ("error", "ollama")
