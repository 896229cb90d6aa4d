"""The fold pipeline: input kinds, provider detection, typed errors, and early ends; its
lanes against the step-by-step path: when the SSE hot lane starts, the fused frame loop,
and fold() over decoded dicts."""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Hashable, Iterator
from typing import Any

import jiter
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import (
    HOT_LANE_AFTER,
    HOT_LANE_AHEAD,
    REAL,
    decoded_payloads,
    final_message,
    fold_outcome,
    hot_lane_from,
    hot_lane_off,
    read,
    recordings,
    split_at,
    streamed_display_items,
    types_of,
)

from streamfold import (
    ContentPart,
    Message,
    MessageCompleted,
    NoEventsError,
    PartCompleted,
    PartStarted,
    StreamFolder,
    StreamfoldError,
    StreamProtocolError,
    UsageError,
    extract_display_items,
    fold,
    fold_message,
    load_recording,
    providers,
)
from streamfold.deltas import ClosePart, Delta, EndMessage, GrowPart, OpenPart
from streamfold.framing import sniff_format
from streamfold.limits import Limits
from streamfold.providers import anthropic
from streamfold.providers.base import Decoder

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
    folder.feed(read(THINKING_TOOL))
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


@pytest.mark.parametrize("chunks", [[], [b""], (c for c in [b"", ""])])
def test_empty_input_is_a_no_events_error_holding_the_empty_message(chunks: Any) -> None:
    # Even with the provider named: an empty message would hide a cut before the first
    # byte as well as a caller's mistake. The (empty, incomplete) message is in partial.
    with pytest.raises(
        NoEventsError, match="without a single event in it: no input at all"
    ) as info:
        fold_message(chunks, provider="anthropic")
    assert isinstance(info.value, UsageError) and isinstance(info.value, StreamProtocolError)
    partial = info.value.partial
    assert (partial.content, partial.tool_calls, partial.usage) == ([], [], None)


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


class Chunks:
    """A generator source over a recording that notes when it is closed."""

    def __init__(self, data: bytes, size: int = 20) -> None:
        self.closed = False
        self.chunks = self._chunks(data, size)

    def _chunks(self, data: bytes, size: int) -> Iterator[bytes]:
        try:
            for start in range(0, len(data), size):
                yield data[start : start + size]
        finally:
            self.closed = True


def check_cancelled(snapshot: Message) -> None:
    assert snapshot.status == "cancelled"
    assert snapshot.content[0].type == "thinking"
    assert snapshot.content[0].options["signature"]


def test_break_out_of_the_loop_cancels_at_once_and_closes_the_source() -> None:
    source = Chunks(read(THINKING_TOOL))
    stream = fold(source.chunks)
    for event in stream:
        if isinstance(event, PartCompleted):
            break
    check_cancelled(stream.snapshot())  # no close(): leaving the loop is enough
    assert source.closed
    assert list(stream) == []  # the fold is over


def test_exception_in_the_loop_body_cancels_at_once_and_closes_the_source() -> None:
    source = Chunks(read(THINKING_TOOL))
    stream = fold(source.chunks)
    with pytest.raises(LookupError):
        for event in stream:
            if isinstance(event, PartCompleted):
                raise LookupError("the consumer failed")
    check_cancelled(stream.snapshot())
    assert source.closed


def test_a_generator_consumer_that_stops_early_cancels_the_fold() -> None:
    source = Chunks(read(THINKING_TOOL))
    stream = fold(source.chunks)

    def parts() -> Iterator[PartCompleted]:
        for event in stream:
            if isinstance(event, PartCompleted):
                yield event

    consumer = parts()
    next(consumer)
    consumer.close()
    check_cancelled(stream.snapshot())
    assert source.closed


def test_close_before_reading_cancels_and_closes_the_source() -> None:
    source = Chunks(read(THINKING_TOOL))
    stream = fold(source.chunks)
    stream.close()
    assert stream.snapshot().status == "cancelled"
    assert inspect.getgeneratorstate(source.chunks) == inspect.GEN_CLOSED


def test_a_completed_fold_closes_its_source_and_is_not_cancelled() -> None:
    source = Chunks(read(THINKING_TOOL), 1 << 20)
    stream = fold(source.chunks)
    events = list(stream)
    assert isinstance(events[-1], MessageCompleted)
    stream.close()
    assert stream.snapshot().status == "complete"
    assert source.closed


@pytest.mark.parametrize(
    ("rel", "provider"),
    [
        ("anthropic/text-basic.sse", "gemini"),
        ("anthropic/text-basic.sse", "openai-responses"),
        ("openai-chat/text-include-usage.sse", "gemini"),  # ended by its [DONE]
        ("gemini/text-2.0-flash.sse", "ollama"),
        ("bedrock/text-nova-micro.ndjson", "ollama"),
    ],
)
def test_a_stream_of_which_no_event_matches_the_provider_is_an_error(
    rel: str, provider: str
) -> None:
    with pytest.raises(
        StreamProtocolError, match=f"expected events in {provider}'s format"
    ) as info:
        fold_message([read(rel)], provider)
    error = info.value
    assert error.provider == provider
    assert error.partial is not None and error.partial.content == []


@pytest.mark.parametrize(
    ("data", "provider"),
    [
        (b'event: ping\ndata: {"type": "ping"}\n\n', "anthropic"),
        (b"data: [DONE]\n\n", "openai-chat"),
        (b'data: {"candidates": []}\n\n', "gemini"),
        (b'{"model": "m", "created_at": "2025-01-01T00:00:00Z", "done": false}\n', "ollama"),
    ],
)
def test_an_empty_stream_in_the_providers_format_is_not_an_error(
    data: bytes, provider: str
) -> None:
    message = fold_message([data], provider)
    assert message.content == [] and message.status in ("incomplete", "complete")


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


# --- sniffing the framing ---------------------------------------------------------------

BOM = b"\xef\xbb\xbf"
NDJSON_RECORDINGS = [r for r in recordings("ollama", "bedrock") if r.endswith(".ndjson")]


def test_the_first_bytes_of_a_byte_order_mark_are_too_few_to_sniff() -> None:
    assert [sniff_format(BOM[:n]) for n in range(4)] == [None, None, None, None]
    assert sniff_format(BOM + b"{") == "ndjson"
    assert sniff_format(BOM + b"\n data: x") == "sse"
    assert sniff_format(b"\xef") is None
    assert sniff_format(b"\xefx") == "sse"


@pytest.mark.parametrize("rel", NDJSON_RECORDINGS)
def test_ndjson_with_a_byte_order_mark_folds_as_without_it(rel: str) -> None:
    data = read(rel)
    expected = fold_outcome([data], None)
    assert expected[1] is None  # the recording folds without an error
    assert fold_outcome([BOM + data], None) == expected
    assert fold_outcome(split_at(BOM + data, list(range(len(data) + 3))), None) == expected


@pytest.mark.parametrize("rel", NDJSON_RECORDINGS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_ndjson_with_a_byte_order_mark_folds_alike_in_any_pieces(
    rel: str, data: st.DataObject
) -> None:
    raw = read(rel)
    with_bom = BOM + raw
    small = st.lists(st.integers(1, 8), max_size=8)  # the first pieces: 1 byte and up
    cuts = list(itertools.accumulate(data.draw(small)))
    cuts += data.draw(st.lists(st.integers(0, len(with_bom)), max_size=30))
    assert fold_outcome(split_at(with_bom, cuts), None) == fold_outcome([raw], None)


# --- a broken event: the events before it are delivered, in any pieces -------------------

BREAKABLE = [
    "anthropic/thinking-then-tool-use.sse",
    "openai-chat/tool-calls-parallel.sse",
    "openai-responses/function-call-reasoning-usage.sse",
    "gemini/thought-parts-signature.sse",
    "bedrock/text-then-tool-use-nova.ndjson",
    "ollama/generate-gpt-oss-thinking.ndjson",
]


def _broken_at(data: bytes, k: int) -> bytes:
    """`data` with the JSON of its k-th event (of those that open with `{`) made invalid."""
    starts = [
        i
        for i in range(len(data))
        if data[i : i + 1] == b"{" and data[i - 1 : i] in (b" ", b":", b"\n", b"")
    ]
    at = starts[k % len(starts)]
    return data[: at + 1] + b"]" + data[at + 1 :]


@pytest.mark.parametrize("rel", BREAKABLE)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_broken_event_gives_one_outcome_in_any_pieces(rel: str, data: st.DataObject) -> None:
    broken = _broken_at(read(rel), data.draw(st.integers(0, 10_000)))
    whole = fold_outcome([broken], None)
    assert whole[1] == "StreamProtocolError"
    cuts = data.draw(st.lists(st.integers(0, len(broken)), max_size=40))
    assert fold_outcome(split_at(broken, cuts), None) == whole
    assert fold_outcome(split_at(broken, list(range(len(broken)))), None) == whole


def test_the_events_before_a_broken_event_are_returned_and_the_error_comes_next() -> None:
    data = read(THINKING_TOOL)
    last = data.rindex(b"data: {") + 6
    broken = data[: last + 1] + b"]" + data[last + 1 :]
    folder = StreamFolder()
    events = folder.feed(broken)
    assert any(isinstance(e, PartCompleted) for e in events)  # all before the fault
    with pytest.raises(StreamProtocolError, match="invalid JSON") as info:
        folder.close()
    assert info.value.partial is not None
    # Every part the caller was told of is in .partial, and nothing else.
    started = [e for e in events if isinstance(e, PartStarted)]
    assert len(info.value.partial.stream_order()) == len(started) > 0
    with pytest.raises(StreamProtocolError):
        folder.feed(b"data: {}\n\n")  # the fold takes nothing more: the fault again
    # Saved and restored (a relay checkpoints after the events it sent), the fold is the
    # same: its next call raises the same fault.
    restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    with pytest.raises(StreamProtocolError) as again:
        restored.close()
    assert (str(again.value), again.value.position) == (str(info.value), info.value.position)
    assert again.value.partial == info.value.partial


# When the fold tries the SSE hot lane: after StreamFolder.hot_lane_after events, or at once
# when hot_lane_ahead events are at hand; never with hot_lane_off().


@pytest.mark.usefixtures("lane_from_the_first_event")
def test_the_lane_starts_after_the_shipped_number_of_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A short stream is framed in one run, never taking the lane; a long one fed one
    event per chunk takes it from event HOT_LANE_AFTER on. Seen through decode(), which
    sees every delta the lane does not take (compiled, the fold calls sse_shortcut
    directly, past a patched class attribute; decode() it calls as a bound method)."""
    decoded = decoded_payloads(monkeypatch, anthropic.AnthropicDecoder)
    short = read("anthropic/text-basic.sse")
    assert short.count(b"\n\n") < HOT_LANE_AFTER
    long = read("anthropic/thinking-signature.sse")
    pieces = [event + b"\n\n" for event in long.split(b"\n\n") if event]
    with hot_lane_from(HOT_LANE_AFTER):
        list(fold([short], "anthropic"))
        assert types_of(decoded).count("content_block_delta") == short.count(
            b"event: content_block_delta"
        )
        decoded.clear()
        events = list(fold(pieces, "anthropic"))
    # Every event before HOT_LANE_AFTER went through decode(); deltas after it did not.
    first = [json.loads(p.partition(b"data: ")[2])["type"] for p in pieces[:HOT_LANE_AFTER]]
    assert types_of(decoded[:HOT_LANE_AFTER]) == first
    deltas_after = sum(b"event: content_block_delta" in p for p in pieces[HOT_LANE_AFTER:])
    assert types_of(decoded[HOT_LANE_AFTER:]).count("content_block_delta") < deltas_after
    assert len(events) > HOT_LANE_AFTER


def test_hot_lane_off_leaves_the_lane_untried(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lane-against-full-path tests compare two paths only if hot_lane_off switches
    the lane off, in the compiled build (which reads sse_hot_head natively) too: then
    every delta goes through decode()."""
    decoded = decoded_payloads(monkeypatch, anthropic.AnthropicDecoder)
    long = read("anthropic/thinking-signature.sse")
    deltas = long.count(b"event: content_block_delta")
    with hot_lane_off():
        list(fold([long], "anthropic"))
    assert types_of(decoded).count("content_block_delta") == deltas
    decoded.clear()
    with hot_lane_from(0, 0):  # the control: the same stream takes the lane at once
        list(fold([long], "anthropic"))
    assert types_of(decoded).count("content_block_delta") < deltas


def test_the_lane_starts_at_once_when_many_events_are_at_hand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long stream read in one large piece takes the lane from its first delta; the
    same stream in small pieces only after HOT_LANE_AFTER events; a short one never."""
    decoded = decoded_payloads(monkeypatch, anthropic.AnthropicDecoder)
    long = read("anthropic/thinking-signature.sse")
    assert long.count(b"\n\n") >= HOT_LANE_AHEAD
    signatures = long.count(b'"signature_delta"')
    with hot_lane_from(HOT_LANE_AFTER, HOT_LANE_AHEAD):
        list(fold([long], "anthropic"))
        assert types_of(decoded).count("content_block_delta") == signatures
        decoded.clear()
        list(fold(split_at(long, list(range(0, len(long), 300))), "anthropic"))
        # The deltas among the first HOT_LANE_AFTER events went through decode().
        first = long.split(b"\n\n")[:HOT_LANE_AFTER]
        early = sum(b"event: content_block_delta" in e for e in first)
        assert types_of(decoded).count("content_block_delta") >= early > signatures
        # A short stream in one piece: framed in one run, every delta through decode().
        decoded.clear()
        short = read("anthropic/text-basic.sse")
        assert short.count(b"\n\n") < HOT_LANE_AFTER
        list(fold([short], "anthropic"))
        assert types_of(decoded).count("content_block_delta") == short.count(
            b"event: content_block_delta"
        )


# --- StreamFolder: the fused frame loop (provider known) against the step-by-step one ------

_START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","model":"c",'
    b'"usage":{"input_tokens":1}}}\n\n'
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'
    b"\n\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}'
    b"\n\n"
)


_TAILS = [
    b"data: {not json\n\n",
    b"data: [1, 2]\n\n",
    b'data: {"type":"content_block_delta","index":"0","delta":{"type":"text_delta"}}\n\n',
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}\n\n',
    b'data: {"type":"message_delta","delta":{"stop_reason":7},"usage":{}}\n\n',
    b'data: {"type":"content_block_stop","index":0}\n\ndata: {"type":"message_stop"}\n\n'
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}\n\n',
    b"data: [DONE]\n\n",
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"m"}}\n\n',
]


def _error_details(chunks: list[bytes], provider: str | None) -> tuple[Any, ...]:
    events: list[str] = []
    try:
        for event in fold(chunks, provider):
            events.append(repr(event))
    except StreamfoldError as exc:
        details = {k: repr(v) for k, v in vars(exc).items()}
        return events, type(exc).__name__, str(exc), details, repr(exc.__cause__)
    return events, None


@pytest.mark.parametrize("tail", range(len(_TAILS)))
@pytest.mark.parametrize("split", [False, True])
def test_fused_frame_loop_equals_step_by_step(tail: int, split: bool) -> None:
    data = _START + _TAILS[tail]
    # One piece with no provider named: detected on the first event, every frame of the
    # piece goes the step-by-step way. With the provider named, the fused loop.
    reference = _error_details([data], None)
    chunks = [data[:40], data[40:]] if split else [data]
    assert _error_details(chunks, "anthropic") == reference


# --- fold() over decoded dicts (its one-loop lane) equals feeding them one by one -------
#
# The reference is `StreamFolder.feed()` chunk by chunk, then `close()`: the path every
# other input takes. Streams are real recordings decoded to dicts, with events dropped,
# repeated and broken, strict and lenient, with tight limits; the events, the error (type,
# text, attributes) and the final snapshot must be the same.


def _dicts(rel: str) -> list[Any]:
    """The JSON payloads of an SSE or NDJSON recording, in order."""
    out: list[Any] = []
    for line in read(rel).splitlines():
        data = line[5:].strip() if line.startswith(b"data:") else line.strip()
        if data.startswith(b"{"):
            out.append(jiter.from_json(data))
    return out


def _stepwise(chunks: list[Any], provider: str | None, **options: Any) -> tuple[Any, ...]:
    folder = StreamFolder(provider, **options)
    events: list[str] = []
    try:
        for chunk in chunks:
            events.extend(map(repr, folder.feed(chunk)))
            if folder.finished:
                break
        else:
            events.extend(map(repr, folder.close()))
    except StreamfoldError as exc:
        details = {k: repr(v) for k, v in vars(exc).items()}
        return events, type(exc).__name__, str(exc), details
    return events, None, repr(folder.snapshot())


_SSE_RECORDINGS = [
    rel
    for rel in recordings("anthropic", "openai-chat", "openai-responses", "gemini", "ollama")
    if rel.endswith((".sse", ".ndjson"))
]


@pytest.mark.parametrize("rel", _SSE_RECORDINGS)
def test_recording_dicts_fold_as_fed_one_by_one(rel: str) -> None:
    chunks = _dicts(rel)
    assert chunks
    for options in ({}, {"strict": True}, {"partial_arguments": True}):
        assert fold_outcome(chunks, None, **options) == _stepwise(chunks, None, **options)


_BROKEN: list[Any] = [
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}},
    {"type": "content_block_delta", "index": 7, "delta": {"type": "text_delta", "text": "x"}},
    {"type": "content_block_delta", "index": 0, "delta": "oops"},
    {"type": "message_stop"},
    {"type": 3},
    {"choices": "nope"},
    [1, 2],
    b"data: {}\n\n",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rel=st.sampled_from(
        [
            "anthropic/thinking-signature.sse",
            "openai-chat/tool-calls-parallel-interleaved-args.sse",
            "openai-responses/reasoning-summary.sse",
        ]
    ),
    edits=st.lists(
        st.tuples(
            st.integers(0, 400), st.sampled_from(["drop", "repeat", "insert"]), st.integers(0, 7)
        ),
        max_size=4,
    ),
    options=st.sampled_from(
        [{}, {"strict": True}, {"limits": Limits(max_part_chars=30, max_tool_argument_chars=20)}]
    ),
    named=st.booleans(),
)
def test_edited_dict_streams_fold_as_fed_one_by_one(
    rel: str, edits: list[tuple[int, str, int]], options: dict[str, Any], named: bool
) -> None:
    chunks = _dicts(rel)
    for at, kind, which in edits:
        at %= len(chunks) + 1
        if kind == "drop" and at < len(chunks):
            del chunks[at]
        elif kind == "repeat" and at < len(chunks):
            chunks.insert(at, chunks[at])
        else:
            chunks.insert(at, _BROKEN[which])
    provider = rel.split("/")[0] if named else None
    assert fold_outcome(chunks, provider, **options) == _stepwise(chunks, provider, **options)


def _responses_edits() -> list[tuple[str, list[Any]]]:
    """Sequence numbers out of the lane's line: a delta repeated a few events later, two
    deltas swapped (one then arrives early, the other late) and the early one repeated,
    each around several deltas."""
    base = _dicts("openai-responses/reasoning-summary.sse")
    deltas = [i for i, c in enumerate(base) if str(c.get("type", "")).endswith(".delta")]
    cases: list[tuple[str, list[Any]]] = []
    for i in (deltas[0], deltas[1], deltas[5], deltas[len(deltas) // 2]):
        repeated = list(base)
        repeated.insert(i + 3, base[i])
        cases.append((f"repeat {i} later", repeated))
        for after in (2, 4):  # the early one again: at once, or a few events later
            swapped = list(base)
            swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
            swapped.insert(i + after, base[i + 1])
            cases.append((f"swap {i}, repeat +{after}", swapped))
    return cases


@pytest.mark.parametrize(("name", "chunks"), _responses_edits(), ids=lambda x: str(x)[:24])
def test_responses_dicts_with_numbers_out_of_line_fold_as_fed_one_by_one(
    name: str, chunks: list[Any]
) -> None:
    """The Responses dict lane takes a delta only when its number is the one after the
    last with none above, and records it as decode() would: a later repeat of a delta it
    took is still a duplicate, and an early one is not taken twice."""
    for options in ({}, {"strict": True}):
        assert fold_outcome(chunks, "openai-responses", **options) == _stepwise(
            chunks, "openai-responses", **options
        )


class _LooseLaneDecoder(Decoder):
    """A decoder whose dict lane names its one part even after the part closed: the fold
    must not grow a part that is no longer open however its lane answers (it asks the
    accumulator again after every full-path event; the built-in decoders never do this)."""

    provider = "anthropic"

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        step = payload["t"]
        if step == "open":
            return [OpenPart("k", ContentPart(type="text", content=""))]
        if step == "close":
            return [ClosePart("k")]
        if step == "end":
            return [EndMessage()]
        return [GrowPart("k", payload["x"])]

    def object_text(self, payload: dict[str, Any]) -> tuple[Hashable, str] | None:
        return ("k", payload["x"]) if payload["t"] == "grow" else None


@pytest.mark.parametrize("strict", [False, True])
def test_dict_lane_never_grows_a_part_after_a_full_path_event_closed_it(
    monkeypatch: pytest.MonkeyPatch, strict: bool
) -> None:
    monkeypatch.setitem(providers._CLASSES, "anthropic", _LooseLaneDecoder)
    grow = [{"t": "grow", "x": x} for x in "abcd"]
    chunks = [{"t": "open"}, *grow[:2], {"t": "close"}, *grow[2:], {"t": "end"}]
    outcome = fold_outcome(chunks, "anthropic", strict=strict)
    assert outcome == _stepwise(chunks, "anthropic", strict=strict)
    if strict:
        assert outcome[1] == "StreamProtocolError"
    else:
        assert "'ab'" in outcome[-1] and "'abc" not in outcome[-1]
        assert "delta_after_part_end" in outcome[-1]


# --- a failure the server reports on an SSE `error:` line (llama.cpp, GPUStack) ----------

_CHUNK = (
    b'data: {"id":"c1","object":"chat.completion.chunk","model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}\n\n'
)
_ERROR = b'error: {"code":500,"message":"CUDA error: out of memory","type":"server_error"}\n\n'


@pytest.mark.parametrize("done", [b"", b"data: [DONE]\n\n"])
def test_an_error_line_ends_the_message_with_the_servers_error(done: bytes) -> None:
    # Before: dropped as an unknown SSE field, the message ended `incomplete` (or, with
    # llama.cpp's [DONE] after it, `complete`) and the server's reason was lost.
    message = fold_message([_CHUNK + _ERROR + done])
    assert (message.status, message.stop_reason, message.text) == ("error", "error", "Hel")
    assert message.metadata["error"] == {
        "type": "server_error",
        "message": "CUDA error: out of memory",
    }
    assert message.metadata["provider_error"]["code"] == 500


def test_an_error_line_the_fold_cannot_read_is_a_protocol_error_holding_its_text() -> None:
    with pytest.raises(StreamProtocolError) as info:
        fold_message([_CHUNK + b"error: upstream timed out\n\ndata: [DONE]\n\n"])
    assert "got the server's error event: 'upstream timed out'" in str(info.value)
    assert info.value.partial.text == "Hel"
    assert info.value.partial.metadata["provider_error"] == "upstream timed out"
    # Nothing but the error, no provider named: the error says what the server said.
    with pytest.raises(StreamProtocolError) as info:
        fold_message([_ERROR + b"data: [DONE]\n\n"])
    assert "'CUDA error: out of memory'" in str(info.value)
    assert info.value.partial.metadata["provider_error"]["type"] == "server_error"
