"""Decoded dicts, SDK objects and str chunks are held to what bytes are held to.

Limits apply as the input arrives; whatever a payload holds (a lone surrogate, NaN,
nesting a thousand deep), only typed errors escape, with provider, raw event, position
and `.partial`; and an error's own text never raises.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from streamfold import (
    Limits,
    StreamfoldError,
    StreamLimitError,
    StreamProtocolError,
    fold_message,
)
from streamfold.accumulator import SKIPPED_OTHER
from streamfold.errors import preview
from streamfold.fold import StreamFolder

MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
}
TEXT_START = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "text", "text": ""},
}
TOOL_START = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
}
STOP = [
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    {"type": "message_stop"},
]


def text_delta(text: str, index: int = 0) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }


def json_delta(text: str) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": text},
    }


def deep(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def feed_all(chunks: list[Any], provider: str | None = "anthropic", **options: Any) -> Any:
    """Feed chunk by chunk (the door a live consumer takes); the error, or the message."""
    folder = StreamFolder(provider, **options)
    try:
        for chunk in chunks:
            folder.feed(chunk)
        folder.close()
    except StreamfoldError as exc:
        return exc
    return folder.snapshot()


def both_doors(chunks: list[Any], provider: str | None = "anthropic", **options: Any) -> list[Any]:
    """The outcome through feed() and through fold() (whose dict lane is fold_objects)."""
    outcomes = [feed_all(chunks, provider, **options)]
    try:
        outcomes.append(fold_message(chunks, provider, **options))
    except StreamfoldError as exc:
        outcomes.append(exc)
    return outcomes


def assert_protocol_error(exc: Any) -> StreamProtocolError:
    assert isinstance(exc, StreamProtocolError), exc
    assert exc.partial is not None and exc.provider is not None and exc.position is not None
    str(exc)  # the text never raises
    return exc


# --- limits ----------------------------------------------------------------------------------


@pytest.mark.parametrize("lane", [True, False])
def test_decoded_input_past_max_bytes_stops_as_it_arrives(lane: bool) -> None:
    # Many parts each within max_part_chars (or events the fold skips): only max_bytes
    # can stop them, and it must stop them before the input is taken whole.
    limits = Limits(max_bytes=50_000)
    chunks: list[Any] = [MESSAGE_START]
    for index in range(40):
        chunks.append({**TEXT_START, "index": index})
        if lane:
            chunks.append(text_delta("x" * 2000, index))  # the dict lane's delta
        else:  # an event the lane does not take counts its JSON size
            chunks.append({"type": "made_up", "pad": "x" * 2000})
        chunks.append({"type": "content_block_stop", "index": index})
    for outcome in both_doors(chunks, limits=limits):
        assert isinstance(outcome, StreamLimitError), outcome
        assert outcome.limit == "max_bytes" and outcome.partial is not None
        assert len(outcome.partial.content) < 40


def test_dicts_within_max_bytes_fold_as_before() -> None:
    chunks = [MESSAGE_START, TEXT_START, text_delta("hello"), *STOP]
    size = len(json.dumps(chunks))
    for outcome in both_doors(chunks, limits=Limits(max_bytes=size)):
        assert outcome.status == "complete" and outcome.text == "hello"


def test_sdk_objects_count_against_max_bytes() -> None:
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    events = [adapter.validate_python(e) for e in [MESSAGE_START, TEXT_START]]
    events += [adapter.validate_python(text_delta("y" * 1000)) for _ in range(100)]
    for outcome in both_doors(events, limits=Limits(max_bytes=20_000)):
        assert isinstance(outcome, StreamLimitError) and outcome.limit == "max_bytes"
        assert outcome.partial is not None and len(outcome.partial.text) <= 20_000


@pytest.mark.parametrize("door", ["dicts", "bytes"])
def test_deltas_for_a_block_never_started_are_checked_at_once(door: str) -> None:
    chunks: list[Any] = [MESSAGE_START] + [text_delta("a" * 1000, index=7) for _ in range(200)]
    if door == "bytes":
        chunks = [f"event: {c['type']}\ndata: {json.dumps(c)}\n\n".encode() for c in chunks]
    folder = StreamFolder("anthropic", limits=Limits(max_part_chars=5000))
    with pytest.raises(StreamLimitError) as raised:
        for chunk in chunks:
            folder.feed(chunk)
    assert raised.value.limit == "max_part_chars" and raised.value.actual == 6000
    assert raised.value.partial is not None


def test_deltas_for_many_blocks_never_started_are_held_to_max_parts() -> None:
    chunks = [MESSAGE_START] + [text_delta("a", index=i) for i in range(1, 50)]
    outcome = feed_all(chunks, limits=Limits(max_parts=10))
    assert isinstance(outcome, StreamLimitError) and outcome.limit == "max_parts"


def test_responses_events_for_an_item_never_added_are_checked_at_once() -> None:
    delta = {"type": "response.output_text.delta", "item_id": "msg_x", "output_index": 0}
    delta |= {"content_index": 0, "delta": "b" * 1000}
    chunks = [{"type": "response.created", "response": {"id": "r", "status": "in_progress"}}]
    folder = StreamFolder("openai-responses", limits=Limits(max_part_chars=5000))
    with pytest.raises(StreamLimitError) as raised:
        for chunk in chunks + [delta] * 10:
            folder.feed(chunk)
    assert raised.value.limit == "max_part_chars" and raised.value.partial is not None


def test_skipped_event_types_are_bounded() -> None:
    chunks = [MESSAGE_START, *({"type": f"made_up_{i}"} for i in range(5000))]
    chunks += [{"type": "x" * 10_000}, {"type": "message_stop"}]
    message = fold_message(chunks, "anthropic")
    skipped = message.metadata["skipped_events"]
    assert len(skipped) <= 65 and sum(skipped.values()) == 5001
    assert skipped[SKIPPED_OTHER] == 5001 - 64
    assert all(len(name) <= 100 for name in skipped)


# --- untyped escapes ---------------------------------------------------------------------


def test_a_lone_surrogate_in_tool_arguments_is_a_protocol_error() -> None:
    chunks = [MESSAGE_START, TOOL_START, json_delta('{"a": "\ud800"}'), *STOP]
    for outcome in both_doors(chunks):
        assert_protocol_error(outcome)
        outcome.partial.model_dump_json()  # what was kept serialises


def test_a_lone_surrogate_outside_the_text_is_a_protocol_error() -> None:
    start = {**MESSAGE_START, "message": {"id": "msg_\udc00", "usage": {}}}
    for outcome in both_doors([start, TEXT_START, text_delta("x"), *STOP]):
        assert_protocol_error(outcome)


def test_a_str_chunk_with_a_lone_surrogate_is_a_protocol_error() -> None:
    head = f"event: message_start\ndata: {json.dumps(MESSAGE_START)}\n\n"
    event = 'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    event += '"content_block":{"type":"text","text":"\ud83d"}}\n\n'
    assert_protocol_error(feed_all([head, event]))


def test_an_sdk_object_with_a_lone_surrogate_is_a_protocol_error() -> None:
    from anthropic.types import RawContentBlockDeltaEvent

    event = RawContentBlockDeltaEvent.model_validate(json_delta('{"a": "\ud800"}'))
    outcome = feed_all([MESSAGE_START, TOOL_START, event, *STOP])
    assert_protocol_error(outcome)


@pytest.mark.parametrize(
    ("provider", "payload"),
    [
        ("anthropic", {"type": "content_block_delta", "index": deep(1200), "delta": {}}),
        ("anthropic", {"type": deep(1200)}),
        ("bedrock", {"contentBlockDelta": {"contentBlockIndex": deep(1200), "delta": {}}}),
        ("gemini", {"candidates": deep(1200)}),
        ("ollama", {"model": "m", "message": deep(1200)}),
        ("openai-responses", {"type": "error", "error": deep(1200)}),
        ("openai-chat", {"id": "c", "object": "chat.completion.chunk", "choices": [deep(1200)]}),
    ],
)
def test_a_payload_nested_a_thousand_deep_is_a_protocol_error(provider: str, payload: Any) -> None:
    for outcome in both_doors([payload], provider):
        assert_protocol_error(outcome)


def test_an_error_text_never_raises() -> None:
    exc = StreamProtocolError("bad", provider="p", raw=deep(5000), position=1)
    assert "..." in str(exc)
    assert len(preview("x" * 10**6)) < 400
    assert preview({"a": [1, (2,)], "b": "é"}) == repr({"a": [1, (2,)], "b": "é"})


@pytest.mark.parametrize("door", ["dicts", "bytes"])
def test_nan_in_the_wire_json_is_a_protocol_error(door: str) -> None:
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}, "x": "NAN"},
    }
    chunks: list[Any] = [MESSAGE_START, TEXT_START, text_delta("kept"), *STOP[:1]]
    chunks.append({**start, "index": 1})
    if door == "bytes":
        lines = [f"event: {c['type']}\ndata: {json.dumps(c)}\n\n" for c in chunks]
        chunks = ["".join(lines).replace('"NAN"', "NaN").encode()]
    else:
        chunks[-1]["content_block"]["x"] = float("nan")
    outcome = assert_protocol_error(feed_all(chunks))
    assert outcome.partial.text == "kept"


def test_nan_where_no_model_checks_it_is_a_protocol_error() -> None:
    # Usage and grounding metadata are kept as they came, unchecked: a NaN there used to
    # be kept, and the message then read back with null in its place.
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    text = {**chunk, "choices": [{"index": 0, "delta": {"content": "kept"}}]}
    usage = {**chunk, "choices": [], "usage": {"prompt_tokens": 1, "extra": "NAN"}}
    lines = [f"data: {json.dumps(c)}\n\n" for c in (text, usage)]
    wire = "".join(lines).replace('"NAN"', "NaN").encode()
    usage["usage"]["extra"] = math.inf
    for chunks in ([wire], [text, usage]):
        outcome = assert_protocol_error(feed_all(chunks, "openai-chat"))
        assert outcome.partial.text == "kept"


def test_a_dict_that_is_not_plain_json_folds_as_the_json_it_stands_for() -> None:
    # A tuple, bytes: kept as they were, the message read back different (or not at all).
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    text = {**chunk, "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    usage = {**chunk, "choices": [], "usage": {"prompt_tokens": 1, "x": [(2, 3), b"\xff"]}}
    for message in both_doors([text, usage], "openai-chat"):
        assert message.usage.raw["x"] == [[2, 3], "/w=="]
        assert type(message).model_validate_json(message.model_dump_json()) == message
    # A key JSON cannot have is refused, as bytes could not carry it.
    usage["usage"]["x"] = {1: "one"}
    for outcome in both_doors([text, usage], "openai-chat"):
        assert_protocol_error(outcome)


def _responses_stream(delta: dict[str, Any]) -> list[dict[str, Any]]:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    return [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", **where, "part": part},
        {"type": "response.output_text.delta", **where, **delta},
    ]


def test_an_sdk_object_holding_an_integer_past_any_float_is_a_protocol_error() -> None:
    from openai._models import construct_type
    from openai.types.responses import ResponseStreamEvent

    logprob = {"token": "hi", "logprob": -1.0, "top_logprobs": []}
    events = _responses_stream({"delta": "hi", "logprobs": [logprob]})
    objects = [construct_type(type_=ResponseStreamEvent, value=e) for e in events]
    # What a server's 1e400 would be, had the SDK kept it as the integer it read.
    object.__setattr__(objects[-1].logprobs[0], "logprob", 10**400)
    for outcome in both_doors(objects, "openai-responses"):
        assert_protocol_error(outcome)


def test_what_a_lane_delta_keeps_beside_its_text_counts_against_max_bytes() -> None:
    logprobs = [{"token": "x", "logprob": -0.5, "bytes": [120], "top_logprobs": []}] * 500
    events = _responses_stream({"delta": "x", "logprobs": logprobs})
    events += events[-1:] * 20
    for outcome in both_doors(events, "openai-responses", limits=Limits(max_bytes=100_000)):
        assert isinstance(outcome, StreamLimitError) and outcome.limit == "max_bytes"


@pytest.mark.parametrize("door", ["dicts", "bytes"])
def test_a_citation_streamed_into_a_part_is_held_to_max_depth(door: str) -> None:
    # A part's start had its citations checked; one that came in a later delta was not,
    # and the message could then not be read back from its JSON.
    citation = {"type": "char_location", "cited_text": "x", "document_index": 0}
    citation |= {"start_char_index": 0, "end_char_index": 1, "deep": deep(150)}
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "citations_delta", "citation": citation},
    }
    chunks: list[Any] = [MESSAGE_START, TEXT_START, text_delta("kept"), delta, *STOP]
    if door == "bytes":
        chunks = [f"event: {c['type']}\ndata: {json.dumps(c)}\n\n".encode() for c in chunks]
    outcome = feed_all(chunks)
    assert isinstance(outcome, StreamLimitError) and outcome.limit == "max_depth"
    assert outcome.partial.text == "kept"


def test_a_restored_fold_keeps_checking_held_deltas_against_its_limits() -> None:
    limits = Limits(max_part_chars=5000)
    folder = StreamFolder("anthropic", limits=limits)
    for chunk in [MESSAGE_START, text_delta("a" * 3000, index=7)]:
        folder.feed(chunk)
    restored = StreamFolder.restore(folder.save_state())
    with pytest.raises(StreamLimitError) as raised:
        restored.feed(text_delta("a" * 3000, index=7))
    assert raised.value.limit == "max_part_chars" and raised.value.actual == 6000
