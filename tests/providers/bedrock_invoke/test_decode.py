"""Bedrock InvokeModelWithResponseStream: Claude's Messages events in base64 chunks.

Every real Anthropic recording, wrapped as Bedrock wraps it (tests/invoke_support.py),
must fold to the message the Anthropic API stream folds to, from the bytes and from
boto3's decoded events, under any split and cut; Nova's events decode as ConverseStream's;
other families are refused by name, never folded to an empty "incomplete".
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invoke_support import (
    INVOKE_SOURCES,
    METRICS,
    boto3_events,
    chunk_frame,
    claude_events,
    exception_frame,
    invoke_bytes,
)
from support import REAL, fold_outcome, read, split_at

from streamfold import (
    Message,
    StreamFolder,
    StreamProtocolError,
    fold_message,
    load_recording,
)

# What only the invoke fold knows: Bedrock's trailer, and which provider it came from.
_INVOKE_ONLY = (
    "provider",
    "invoke_format",
    "invocation_metrics",
    "latency_ms",
    "first_byte_latency_ms",
)


def _plain(message: Message) -> dict[str, Any]:
    """The message without what tells the invoke fold from the Anthropic one."""
    data = message.model_dump(mode="json")
    for key in _INVOKE_ONLY:
        data["metadata"].pop(key, None)
    return data


def _anthropic(events: Any) -> Message:
    return fold_message(list(events), "anthropic")


def _hihi() -> list[dict[str, Any]]:
    """The smallest whole answer: one text block "hihi", end_turn."""
    return [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]


# --- every recording, every door -------------------------------------------------------


@pytest.mark.parametrize("rel", INVOKE_SOURCES)
@pytest.mark.parametrize("provider", [None, "bedrock-invoke", "bedrock-invoke-model"])
def test_invoke_bytes_fold_as_the_anthropic_stream(rel: str, provider: str | None) -> None:
    message = fold_message([invoke_bytes(rel)], provider)
    assert message.metadata["provider"] == "bedrock-invoke"
    assert _plain(message) == _plain(fold_message([read(rel)], "anthropic"))
    assert message.content or message.tool_calls


@pytest.mark.parametrize("rel", INVOKE_SOURCES)
def test_boto3_decoded_events_fold_as_the_bytes(rel: str) -> None:
    assert fold_message(boto3_events(rel)) == fold_message([invoke_bytes(rel)])


@pytest.mark.parametrize("rel", INVOKE_SOURCES)
def test_a_saved_invoke_recording_is_detected(rel: str, tmp_path: Any) -> None:
    path = tmp_path / "claude.eventstream"
    path.write_bytes(invoke_bytes(rel))
    recording = load_recording(path)
    assert recording.provider == "bedrock-invoke"
    assert fold_message(recording) == fold_message([invoke_bytes(rel)])


def test_the_minimal_stream_is_a_whole_answer() -> None:
    data = b"".join(chunk_frame(event) for event in _hihi())
    message = fold_message([data])
    assert (message.status, message.text, message.stop_reason) == ("complete", "hihi", "stop")
    assert message.metadata["end_marker"] is True


def test_an_explicit_converse_provider_names_the_invoke_one() -> None:
    data = b"".join(chunk_frame(event) for event in _hihi())
    with pytest.raises(StreamProtocolError, match="provider='bedrock-invoke'"):
        fold_message([data], "bedrock")


def test_the_invocation_metrics_become_metadata() -> None:
    rel = "anthropic/tool-use-single.sse"
    message = fold_message([invoke_bytes(rel)])
    metrics = claude_events(rel)[-1][METRICS]
    assert message.metadata["invocation_metrics"] == metrics
    assert (message.metadata["latency_ms"], message.metadata["first_byte_latency_ms"]) == (
        2345,
        456,
    )
    assert message.usage == fold_message([read(rel)], "anthropic").usage  # the model's own


def test_the_metrics_are_the_usage_when_the_model_reported_none() -> None:
    events = [{k: v for k, v in e.items() if k != "usage"} for e in _hihi()]
    events[0] = {"type": "message_start", "message": {"id": "msg_1"}}
    events[-1] = {"type": "message_stop", METRICS: {"inputTokenCount": 7, "outputTokenCount": 2}}
    usage = fold_message([b"".join(chunk_frame(e) for e in events)]).usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (7, 2)


@pytest.mark.parametrize(
    "metrics", [[1], {"inputTokenCount": "7"}, {"outputTokenCount": True}, "x"]
)
def test_broken_metrics_are_a_protocol_error(metrics: Any) -> None:
    events = _hihi()
    events[-1] = {"type": "message_stop", METRICS: metrics}
    with pytest.raises(StreamProtocolError, match=METRICS) as caught:
        fold_message([b"".join(chunk_frame(e) for e in events)])
    assert caught.value.partial.text == "hihi"


# --- splits, cuts, faults ----------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rel=st.sampled_from(INVOKE_SOURCES), data=st.data())
def test_any_split_gives_the_same_events(rel: str, data: st.DataObject) -> None:
    raw = invoke_bytes(rel)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=40))
    whole = fold_outcome([raw], None)
    assert whole[1] is None  # no error
    assert fold_outcome(split_at(raw, cuts), None) == whole


def test_byte_by_byte_gives_the_same_events() -> None:
    raw = invoke_bytes("anthropic/thinking-signature.sse")
    whole = fold_outcome([raw], None)
    assert whole[1] is None  # no error
    assert fold_outcome([raw[i : i + 1] for i in range(len(raw))], None) == whole


@pytest.mark.parametrize(
    "rel", ["anthropic/thinking-then-tool-use.sse", "anthropic/compaction.sse"]
)
def test_a_cut_keeps_every_event_before_it(rel: str) -> None:
    events = claude_events(rel)
    frames = [chunk_frame(event, n) for n, event in enumerate(events)]
    for k in range(1, len(frames)):
        whole = b"".join(frames[:k])
        expected = _plain(_anthropic(events[:k]))
        assert _plain(fold_message([whole])) == expected
        cut = fold_message([whole + frames[k][: len(frames[k]) // 2]])
        assert cut.metadata.pop("truncated_tail") is True
        assert _plain(cut) == expected
        assert (cut.status, cut.metadata["end_marker"]) == ("incomplete", False)


def test_an_exception_frame_is_a_provider_error_with_the_message_so_far() -> None:
    events = claude_events("anthropic/thinking-then-tool-use.sse")
    data = b"".join(chunk_frame(e) for e in events[:6])
    data += exception_frame("throttlingException", "Too many requests, please wait.")
    message = fold_message([data])
    before = _anthropic(events[:6])
    assert message.status == "error"
    assert message.content == before.content and message.content
    assert "Too many requests" in json.dumps(message.metadata)
    assert "throttlingException" in json.dumps(message.metadata)


def test_an_exception_before_any_chunk_is_a_provider_error() -> None:
    message = fold_message([exception_frame("modelStreamErrorException", "boom")])
    assert message.status == "error"
    assert "boom" in json.dumps(message.metadata)


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        ({"bytes": "not base64!"}, "expected chunk.bytes to be base64"),
        ({"bytes": base64.b64encode(b"{nope").decode()}, "expected JSON in chunk.bytes"),
        ({"bytes": base64.b64encode(b"[1]").decode()}, "expected a JSON object"),
        ({"bytes": 12}, "expected a chunk with bytes"),
        ({"p": "abc"}, "expected a chunk with bytes"),
    ],
)
def test_a_broken_chunk_is_a_protocol_error_after_the_events_before_it(
    chunk: dict[str, Any], expected: str
) -> None:
    good = [{"chunk": {"bytes": json.dumps(e).encode()}} for e in _hihi()[:4]]
    with pytest.raises(StreamProtocolError, match=expected) as caught:
        fold_message([*good, {"chunk": chunk}])
    assert caught.value.provider == "bedrock-invoke"
    assert caught.value.partial.text == "hihi"


def test_a_fold_restored_mid_stream_carries_on() -> None:
    raw = invoke_bytes("anthropic/web-search-citations.sse")
    folder = StreamFolder()
    folder.feed(raw[: len(raw) // 2])
    restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    restored.feed(raw[len(raw) // 2 :])
    restored.close()
    assert restored.snapshot() == fold_message([raw])


# --- other model families ----------------------------------------------------------------


def _nova_events() -> list[dict[str, Any]]:
    lines = (REAL / "bedrock" / "text-then-tool-use-nova.ndjson").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_nova_invoke_events_fold_as_its_converse_stream() -> None:
    events = _nova_events()
    data = b"".join(chunk_frame(event) for event in events)
    message = fold_message([data])
    converse = fold_message(events, "bedrock")
    assert message.metadata.pop("provider") == "bedrock-invoke"
    assert message.metadata.pop("invoke_format") == "bedrock"
    assert converse.metadata.pop("provider") == "bedrock"
    assert message == converse
    assert message.tool_calls


@pytest.mark.parametrize(
    ("event", "family"),
    [
        ({"generation": "Hi", "prompt_token_count": 9, "stop_reason": None}, "Meta Llama"),
        ({"outputs": [{"text": "Hi", "stop_reason": None}]}, "Mistral"),
        ({"is_finished": False, "event_type": "text-generation", "text": "Hi"}, "Cohere"),
        ({"outputText": "Hi", "index": 0, "completionReason": None}, "Amazon Titan"),
        ({"choices": [{"index": 0, "text": "Hi", "stop_reason": None}]}, "OpenAI-style"),
        ({"completion": "Hi", "stop_reason": None}, "Text Completions"),
        ({"something": "else"}, "unknown model family"),
    ],
)
def test_other_families_are_refused_by_name(event: dict[str, Any], family: str) -> None:
    with pytest.raises(StreamProtocolError, match=family) as caught:
        fold_message([chunk_frame(event)])
    assert caught.value.provider == "bedrock-invoke"


def test_a_protocol_error_message_keeps_its_code() -> None:
    events = [{"chunk": {"bytes": json.dumps(e).encode()}} for e in _hihi()[:4]]
    error = {"error": {"errorCode": "InternalFailure", "message": "the stream broke"}}
    message = fold_message([*events, error])
    assert (message.status, message.text) == ("error", "hihi")
    assert "InternalFailure" in json.dumps(message.metadata)


def test_a_claude_stream_may_open_with_a_ping_or_an_error() -> None:
    ping = {"type": "ping"}
    assert fold_message([chunk_frame(e) for e in [ping, *_hihi()]]).text == "hihi"
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    message = fold_message([chunk_frame(error)])
    assert message.status == "error"
    assert "overloaded_error" in json.dumps(message.metadata)
