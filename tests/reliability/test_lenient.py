"""Strict and lenient modes: out-of-spec streams are repaired and counted, or raise.

Lenient (the default) repairs what an out-of-spec server sends (repeated ids, missing
indexes, deltas before their starts, duplicated events) and counts each repair in
metadata["repairs"]; strict raises StreamProtocolError for the same input. Broken data (a
value of the wrong type) raises in both modes. On a good stream the two modes agree.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from support import (
    ALL_RECORDINGS,
    assert_golden,
    final_message,
    read,
)

from streamfold import ContentPart, Message, StreamProtocolError, ToolCall, fold

ALL = ALL_RECORDINGS


def _golden_name(rel: str) -> str:
    return rel.removesuffix(".eventstream") + ".ndjson" if rel.endswith(".eventstream") else rel


def _fold(chunks: list[Any], provider: str | None = None, *, strict: bool = False) -> Message:
    return final_message(list(fold(chunks, provider, strict=strict)))


def _summary(message: Message) -> list[tuple[Any, ...]]:
    """The message's parts in stream order, compactly."""
    out: list[tuple[Any, ...]] = []
    for part in message.stream_order():
        if isinstance(part, ToolCall):
            out.append(("call", part.call_id, part.name, part.arguments))
        elif part.type == "unsupported":
            out.append(("unsupported", part.options.get("type")))
        else:
            out.append((part.type, part.content))
    return out


def _text_length(message: Message) -> int:
    return sum(len(p.content or "") for p in message.content if p.type in ("text", "thinking"))


# --- 1. strict changes nothing on a good stream -----------------------------------------


@pytest.mark.parametrize("rel", ALL)
def test_every_recording_folds_strict_to_its_golden(rel: str) -> None:
    message = _fold([read(rel)], strict=True)
    assert "repairs" not in message.metadata
    assert_golden(_golden_name(rel), message)


# --- 2. every event of a real recording sent twice ----------------------------------------


def _frames(rel: str, data: bytes) -> list[bytes]:
    """The recording's events as byte strings, in order (they join back to `data`)."""
    if rel.endswith(".eventstream"):
        frames, at = [], 0
        while at < len(data):
            (length,) = struct.unpack(">I", data[at : at + 4])  # the prelude's total length
            frames.append(data[at : at + length])
            at += length
        return frames
    if rel.endswith(".ndjson"):
        return data.splitlines(keepends=True)
    return [f for f in re.split(rb"(?<=\n\n)|(?<=\r\n\r\n)", data) if f]


def _doubled(rel: str) -> bytes:
    data = read(rel)
    frames = _frames(rel, data)
    assert b"".join(frames) == data
    return b"".join(frame + frame for frame in frames)


def _numbered(rel: str) -> bool:
    """Every event carries a sequence_number (Responses): a repeat can be recognised."""
    return all(b'"sequence_number"' in f for f in _frames(rel, read(rel)) if b"data: {" in f)


_ENDS = ("response.completed", "response.incomplete", "response.failed", "error")


def _events_before_the_end(rel: str) -> int:
    """Responses events before the one that ends the message (each repeat is seen)."""
    count = 0
    for frame in _frames(rel, read(rel)):
        match = re.search(rb"^data: (\{.*)$", frame, re.MULTILINE)
        if match is None:
            continue
        if json.loads(match[1])["type"] in _ENDS:
            return count
        count += 1
    raise AssertionError(f"{rel} never ends")


@pytest.mark.parametrize("rel", ALL)
def test_every_event_sent_twice(rel: str) -> None:
    original = _fold([read(rel)])
    message = _fold([_doubled(rel)])
    repairs = message.metadata.pop("repairs", None)
    # What a repeat cannot change: how and why the message ended, and its usage (running
    # totals are replaced, Bedrock's one-off report is taken once).
    assert (message.status, message.stop_reason, message.raw_stop_reason) == (
        original.status,
        original.stop_reason,
        original.raw_stop_reason,
    )
    assert message.usage == original.usage
    provider = original.metadata["provider"]
    if provider == "openai-responses" and _numbered(rel):
        # Each repeat has the sequence_number of the event it repeats: dropped, so the
        # message is the original's, with one repair per repeated event.
        assert message == original
        assert repairs == {"duplicate_event": _events_before_the_end(rel)}
        return
    # Elsewhere a repeated text delta looks like a new one (no ids, no sequence numbers):
    # the text comes out twice, chunk by chunk.
    assert _text_length(message) == 2 * _text_length(original)
    if provider != "gemini":
        # Starts, stops and calls are matched by their block index, item id or call id.
        # (A whole Gemini functionCall with no id twice is two calls.)
        calls = [(c.call_id, c.name) for c in message.tool_calls]
        assert calls == [(c.call_id, c.name) for c in original.tool_calls]
    if provider in ("anthropic", "bedrock", "openai-responses"):
        assert repairs  # repeated starts and stops are recognised and counted
    if repairs:
        with pytest.raises(StreamProtocolError):
            _fold([_doubled(rel)], strict=True)
    else:
        # Nothing recognisable as a repeat: strict folds the same message.
        assert _fold([_doubled(rel)], strict=True) == message


def test_what_a_repeat_leaves_per_provider() -> None:
    """The repairs a doubled stream is counted as, for one recording of each provider."""
    expected = {
        "anthropic/thinking-then-tool-use.sse": {
            "duplicate_message_start": 1,
            "duplicate_block_start": 2,
            "duplicate_block_stop": 2,
        },
        "bedrock/tool-call.ndjson": {
            "duplicate_block_start": 1,
            "duplicate_block_stop": 1,
            "duplicate_metadata": 1,
        },
        "openai-responses/text.sse": {
            "duplicate_item_added": 1,
            "duplicate_content_part_added": 1,
            "duplicate_content_part_done": 1,
            "duplicate_item_done": 1,
        },
        "gemini/function-call-streamed-args.sse": {
            "duplicate_call_start": 2,
            "end_for_unknown_call": 2,
        },
        "mistral/tool-call-single-chunk.sse": {"arguments_after_finish": 1},
        "openai-chat/tool-calls-parallel.sse": None,
        "ollama/generate-gpt-oss-thinking.ndjson": None,
    }
    for rel, repairs in expected.items():
        assert _fold([_doubled(rel)]).metadata.get("repairs") == repairs, rel


def test_a_streamed_gemini_call_sent_twice_is_one_call() -> None:
    rel = "gemini/function-call-streamed-args.sse"
    original = _fold([read(rel)])
    message = _fold([_doubled(rel)])
    assert [c.name for c in message.tool_calls] == [c.name for c in original.tool_calls]
    # The streamed string values came twice, and read twice.
    for ours, theirs in zip(message.tool_calls, original.tool_calls, strict=True):
        assert isinstance(ours.arguments, dict) and isinstance(theirs.arguments, dict)
        assert ours.arguments["location"] == theirs.arguments["location"] * 2


# --- 3. hand-written out-of-spec streams, per decoder ------------------------------------


@dataclass(frozen=True)
class Case:
    provider: str
    name: str
    events: list[dict[str, Any]]
    parts: list[tuple[Any, ...]]  # _summary of the lenient message
    repairs: dict[str, int]
    check: Callable[[Message], None] | None = None

    @property
    def id(self) -> str:
        return f"{self.provider}: {self.name}"


# Anthropic -------------------------------------------------------------------------------


def _a_start(usage: dict[str, int] | None = None) -> dict[str, Any]:
    message = {"id": "msg_1", "model": "claude-test", "usage": usage or {"input_tokens": 10}}
    return {"type": "message_start", "message": message}


def _a_block(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _a_delta(index: int, **delta: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _a_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def _a_end(reason: str = "end_turn") -> list[dict[str, Any]]:
    return [
        {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]


A_TEXT = {"type": "text", "text": ""}
A_THINKING = {"type": "thinking", "thinking": ""}
A_TOOL = {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}}


def _a_text(index: int, text: str) -> dict[str, Any]:
    return _a_delta(index, type="text_delta", text=text)


def _a_json(index: int, text: str) -> dict[str, Any]:
    return _a_delta(index, type="input_json_delta", partial_json=text)


def _usage_kept(message: Message) -> None:
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (10, 5)


ANTHROPIC = [
    Case(
        "anthropic",
        "a text delta before its block's start",
        [_a_start(), _a_text(0, "Hel"), _a_block(0, A_TEXT), _a_text(0, "lo"), _a_stop(0)],
        [("text", "Hello")],
        {"delta_before_block_start": 1},
    ),
    Case(
        "anthropic",
        "tool input before its block's start (the start names the call)",
        [_a_start(), _a_json(0, '{"q": 1}'), _a_block(0, A_TOOL), _a_stop(0), *_a_end("tool_use")],
        [("call", "toolu_1", "get", {"q": 1})],
        {"delta_before_block_start": 1},
    ),
    Case(
        "anthropic",
        "deltas for a block that never starts",
        [_a_start(), _a_text(3, "orphan"), _a_stop(3), *_a_end()],
        [("text", "orphan")],
        {"delta_before_block_start": 1},
    ),
    Case(
        "anthropic",
        "deltas for a block that never starts nor stops",
        [_a_start(), _a_text(3, "orphan"), *_a_end()],
        [("text", "orphan")],
        {"delta_before_block_start": 1},
    ),
    Case(
        "anthropic",
        "a start repeated",
        [_a_start(), _a_block(0, A_TEXT), _a_block(0, A_TEXT), _a_text(0, "Hi"), _a_stop(0)],
        [("text", "Hi")],
        {"duplicate_block_start": 1},
    ),
    Case(
        "anthropic",
        "a stop repeated",
        [_a_start(), _a_block(0, A_TEXT), _a_text(0, "Hi"), _a_stop(0), _a_stop(0), *_a_end()],
        [("text", "Hi")],
        {"duplicate_block_stop": 1},
    ),
    Case(
        "anthropic",
        "a stop for a block never started",
        [_a_start(), _a_block(0, A_TEXT), _a_text(0, "Hi"), _a_stop(0), _a_stop(4), *_a_end()],
        [("text", "Hi")],
        {"stop_for_unknown_block": 1},
    ),
    Case(
        "anthropic",
        "a delta after its block stopped",
        [_a_start(), _a_block(0, A_TEXT), _a_text(0, "Hi"), _a_stop(0), _a_text(0, "!"), *_a_end()],
        [("text", "Hi")],
        {"delta_after_block_stop": 1},
    ),
    Case(
        "anthropic",
        "every block numbered 0 (a used index)",
        [
            _a_start(),
            _a_block(0, A_THINKING),
            _a_delta(0, type="thinking_delta", thinking="hmm"),
            _a_stop(0),
            _a_block(0, A_TEXT),
            _a_text(0, "Answer"),
            _a_stop(0),
            *_a_end(),
        ],
        [("thinking", "hmm"), ("text", "Answer")],
        {"reused_block_index": 1},
    ),
    Case(
        "anthropic",
        "a new block on an open index (no stop in between)",
        [
            _a_start(),
            _a_block(0, A_TEXT),
            _a_text(0, "Calling"),
            _a_block(0, A_TOOL),
            _a_json(0, "{}"),
            _a_stop(0),
            *_a_end("tool_use"),
        ],
        [("text", "Calling"), ("call", "toolu_1", "get", {})],
        {"reused_block_index": 1},
    ),
    Case(
        "anthropic",
        "text deltas on a thinking block's index",
        [
            _a_start(),
            _a_block(0, A_THINKING),
            _a_delta(0, type="thinking_delta", thinking="hmm"),
            _a_text(0, "Answer"),
            _a_stop(0),
            *_a_end(),
        ],
        [("thinking", "hmm"), ("text", "Answer")],
        {"delta_type_mismatch": 1},
    ),
    Case(
        "anthropic",
        "message_start repeated after the usage grew",
        [
            _a_start({"input_tokens": 10, "output_tokens": 1}),
            _a_block(0, A_TEXT),
            _a_text(0, "Hi"),
            _a_stop(0),
            _a_end()[0],
            _a_start({"input_tokens": 10, "output_tokens": 1}),
            _a_end()[1],
        ],
        [("text", "Hi")],
        {"duplicate_message_start": 1},
        _usage_kept,
    ),
]


# Bedrock ---------------------------------------------------------------------------------


def _b_text(index: int, text: str) -> dict[str, Any]:
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"text": text}}}


def _b_tool_start(index: int, call_id: str, name: str) -> dict[str, Any]:
    start = {"toolUse": {"toolUseId": call_id, "name": name}}
    return {"contentBlockStart": {"contentBlockIndex": index, "start": start}}


def _b_input(index: int, text: str) -> dict[str, Any]:
    delta = {"toolUse": {"input": text}}
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": delta}}


def _b_stop(index: int) -> dict[str, Any]:
    return {"contentBlockStop": {"contentBlockIndex": index}}


B_STOP = {"messageStop": {"stopReason": "end_turn"}}
B_METADATA = {"metadata": {"usage": {"inputTokens": 3, "outputTokens": 4}}}
B_START = {"messageStart": {"role": "assistant"}}


def _usage_once(message: Message) -> None:
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (3, 4)


BEDROCK = [
    Case(
        "bedrock",
        "tool input before its start",
        [B_START, _b_input(0, '{"q": 1}'), _b_tool_start(0, "t1", "get"), _b_stop(0), B_STOP],
        [("call", "t1", "get", {"q": 1})],
        {"delta_before_block_start": 1},
    ),
    Case(
        "bedrock",
        "tool input for a block that never starts",
        [B_START, _b_input(0, "{}"), _b_stop(0), B_STOP, B_METADATA],
        [("call", None, None, {})],
        {"delta_before_block_start": 1},
    ),
    Case(
        "bedrock",
        "a tool result before its start",
        [
            B_START,
            {
                "contentBlockDelta": {
                    "contentBlockIndex": 0,
                    "delta": {"toolResult": [{"text": "r"}]},
                }
            },
            {
                "contentBlockStart": {
                    "contentBlockIndex": 0,
                    "start": {"toolResult": {"toolUseId": "t1"}},
                }
            },
            _b_stop(0),
            B_STOP,
            B_METADATA,
        ],
        [("unsupported", "toolResult")],
        {"delta_before_block_start": 1},
    ),
    Case(
        "bedrock",
        "a start repeated",
        [
            B_START,
            _b_tool_start(0, "t1", "get"),
            _b_tool_start(0, "t1", "get"),
            _b_input(0, "{}"),
            _b_stop(0),
            B_STOP,
        ],
        [("call", "t1", "get", {})],
        {"duplicate_block_start": 1},
    ),
    Case(
        "bedrock",
        "a stop repeated",
        [B_START, _b_text(0, "Hi"), _b_stop(0), _b_stop(0), B_STOP, B_METADATA],
        [("text", "Hi")],
        {"duplicate_block_stop": 1},
    ),
    Case(
        "bedrock",
        "a delta after its block stopped",
        [B_START, _b_text(0, "Hi"), _b_stop(0), _b_text(0, "!"), B_STOP, B_METADATA],
        [("text", "Hi")],
        {"delta_after_block_stop": 1},
    ),
    Case(
        "bedrock",
        "every tool block numbered 0 (a used index)",
        [
            B_START,
            _b_tool_start(0, "t1", "get"),
            _b_input(0, '{"a": 1}'),
            _b_stop(0),
            _b_tool_start(0, "t2", "put"),
            _b_input(0, '{"b": 2}'),
            _b_stop(0),
            B_STOP,
        ],
        [("call", "t1", "get", {"a": 1}), ("call", "t2", "put", {"b": 2})],
        {"reused_block_index": 1},
    ),
    Case(
        "bedrock",
        "reasoning on a text block's index",
        [
            B_START,
            _b_text(0, "Hi"),
            {
                "contentBlockDelta": {
                    "contentBlockIndex": 0,
                    "delta": {"reasoningContent": {"text": "hmm"}},
                }
            },
            _b_stop(0),
            B_STOP,
        ],
        [("text", "Hi"), ("thinking", "hmm")],
        {"delta_type_mismatch": 1},
    ),
    Case(
        "bedrock",
        "the usage report repeated before messageStop",
        [B_START, _b_text(0, "Hi"), _b_stop(0), B_METADATA, B_METADATA, B_STOP],
        [("text", "Hi")],
        {"duplicate_metadata": 1},
        _usage_once,
    ),
    Case(
        "bedrock",
        "messageStop repeated",
        [B_START, _b_text(0, "Hi"), _b_stop(0), B_STOP, B_STOP, B_METADATA],
        [("text", "Hi")],
        {"duplicate_message_stop": 1},
        _usage_once,
    ),
]


# OpenAI Responses ------------------------------------------------------------------------

R_CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}
R_COMPLETED = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}


def _r_added(item: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def _r_done(item: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def _r_text(item_id: str | None, text: str) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "response.output_text.delta", "content_index": 0}
    if item_id is not None:
        event["item_id"] = item_id
    event["delta"] = text
    return event


def _r_part_added(item_id: str) -> dict[str, Any]:
    return {
        "type": "response.content_part.added",
        "item_id": item_id,
        "content_index": 0,
        "part": {"type": "output_text", "text": ""},
    }


def _r_args(item_id: str, text: str) -> dict[str, Any]:
    return {"type": "response.function_call_arguments.delta", "item_id": item_id, "delta": text}


R_MSG = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
R_MSG_DONE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hi"}],
}
R_CALL_DONE = {
    "id": "fc_1",
    "type": "function_call",
    "call_id": "call_1",
    "name": "get",
    "arguments": '{"q": 1}',
}


def _numbered_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


_R_PLAIN = _numbered_events(
    [
        R_CREATED,
        _r_added(R_MSG),
        _r_part_added("msg_1"),
        _r_text("msg_1", "Hi"),
        _r_done(R_MSG_DONE),
    ]
)

RESPONSES = [
    Case(
        "openai-responses",
        "an event repeated (same sequence_number)",
        [*_R_PLAIN[:4], _R_PLAIN[3], *_R_PLAIN[4:], {**R_COMPLETED, "sequence_number": 5}],
        [("text", "Hi")],
        {"duplicate_event": 1},
    ),
    Case(
        "openai-responses",
        "a delta before its item is added",
        [R_CREATED, _r_text("msg_1", "Hi"), _r_added(R_MSG), _r_done(R_MSG_DONE), R_COMPLETED],
        [("text", "Hi")],
        {"event_before_item_added": 1},
    ),
    Case(
        "openai-responses",
        "arguments for a call only ever done, never added",
        [R_CREATED, _r_args("fc_1", '{"q": 1}'), _r_done(R_CALL_DONE), R_COMPLETED],
        [("call", "call_1", "get", {"q": 1})],
        {"event_before_item_added": 1, "item_done_before_added": 1},
    ),
    Case(
        "openai-responses",
        "text for an item never added nor done",
        [R_CREATED, _r_text("msg_9", "orphan"), R_COMPLETED],
        [("text", "orphan")],
        {"event_before_item_added": 1},
    ),
    Case(
        "openai-responses",
        "output_item.added repeated",
        [
            R_CREATED,
            _r_added(R_MSG),
            _r_added(R_MSG),
            _r_text("msg_1", "Hi"),
            _r_done(R_MSG_DONE),
            R_COMPLETED,
        ],
        [("text", "Hi")],
        {"duplicate_item_added": 1},
    ),
    Case(
        "openai-responses",
        "output_item.done repeated",
        [
            R_CREATED,
            _r_added(R_MSG),
            _r_text("msg_1", "Hi"),
            _r_done(R_MSG_DONE),
            _r_done(R_MSG_DONE),
            R_COMPLETED,
        ],
        [("text", "Hi")],
        {"duplicate_item_done": 1},
    ),
    Case(
        "openai-responses",
        "content_part.added repeated",
        [
            R_CREATED,
            _r_added(R_MSG),
            _r_part_added("msg_1"),
            _r_part_added("msg_1"),
            _r_text("msg_1", "Hi"),
            _r_done(R_MSG_DONE),
            R_COMPLETED,
        ],
        [("text", "Hi")],
        {"duplicate_content_part_added": 1},
    ),
    Case(
        "openai-responses",
        "a delta after its item is done",
        [
            R_CREATED,
            _r_added(R_MSG),
            _r_text("msg_1", "Hi"),
            _r_done(R_MSG_DONE),
            _r_text("msg_1", "!"),
            R_COMPLETED,
        ],
        [("text", "Hi")],
        {"event_after_item_done": 1},
    ),
    Case(
        "openai-responses",
        "a delta with no item_id (the latest item)",
        [R_CREATED, _r_added(R_MSG), _r_text(None, "Hi"), _r_done(R_MSG_DONE), R_COMPLETED],
        [("text", "Hi")],
        {"missing_item_id": 1},
    ),
    Case(
        "openai-responses",
        "a finished item's id used again",
        [
            R_CREATED,
            _r_added(R_MSG),
            _r_text("msg_1", "Hi"),
            _r_done(R_MSG_DONE),
            _r_added(R_MSG, 1),
            _r_text("msg_1", "again"),
            _r_done({**R_MSG_DONE, "content": [{"type": "output_text", "text": "again"}]}, 1),
            R_COMPLETED,
        ],
        [("text", "Hi"), ("text", "again")],
        {"reused_item_id": 1},
    ),
]


# OpenAI Chat -----------------------------------------------------------------------------


def _c_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]}


def _c_call(index: int | None, call_id: str | None, name: str | None, args: str) -> dict[str, Any]:
    fragment: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        fragment["index"] = index
    if call_id is not None:
        fragment["id"] = call_id
        fragment["type"] = "function"
    if name is not None:
        fragment["function"]["name"] = name
    return {"tool_calls": [fragment]}


CHAT = [
    Case(
        "openai-chat",
        "argument fragments after finish_reason",
        [
            _c_chunk(_c_call(0, "call_1", "get", "{}"), "tool_calls"),
            _c_chunk(_c_call(0, None, None, "}")),
        ],
        [("call", "call_1", "get", {})],
        {"arguments_after_finish": 1},
    ),
    Case(
        "openai-chat",
        "one id for two calls to different functions",
        [
            _c_chunk(_c_call(0, "call_0", "get", '{"a": 1}')),
            _c_chunk(_c_call(0, "call_0", "put", '{"b": 2}')),
            _c_chunk({}, "tool_calls"),
        ],
        [("call", "call_0", "get", {"a": 1}), ("call", "call_0", "put", {"b": 2})],
        {"reused_tool_call_id": 1},
    ),
]


# Gemini ----------------------------------------------------------------------------------


def _g_call(call: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"functionCall": call}]}}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


G_START = _g_call({"name": "getWeather", "willContinue": True})
G_ARGS = _g_call(
    {"partialArgs": [{"jsonPath": "$.location", "stringValue": "Boston"}], "willContinue": True}
)
G_END = _g_call({})

GEMINI = [
    Case(
        "gemini",
        "a streamed call's end marker repeated",
        [G_START, G_ARGS, G_END, G_END],
        [("call", "getWeather_0", "getWeather", {"location": "Boston"})],
        {"end_for_unknown_call": 1},
    ),
    Case(
        "gemini",
        "a streamed call's start repeated",
        [G_START, G_START, G_ARGS, G_END],
        [("call", "getWeather_0", "getWeather", {"location": "Boston"})],
        {"duplicate_call_start": 1},
    ),
    Case(
        "gemini",
        "partialArgs with no call streaming",
        [G_ARGS, G_END],
        [("call", "None_0", None, {"location": "Boston"})],
        {"delta_before_call_start": 1},
    ),
]


# Ollama ----------------------------------------------------------------------------------


def _o_calls(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    tool_calls = [
        {"id": call_id, "function": {"name": name, "arguments": args}}
        for call_id, name, args in calls
    ]
    message = {"role": "assistant", "content": "", "tool_calls": tool_calls}
    return {"model": "m", "message": message, "done": False}


O_DONE = {"model": "m", "message": {"role": "assistant", "content": ""}, "done": True}

OLLAMA = [
    Case(
        "ollama",
        "a tool call repeated under its id",
        [_o_calls(("call_a", "get", {"q": 1})), _o_calls(("call_a", "get", {"q": 1})), O_DONE],
        [("call", "call_a", "get", {"q": 1})],
        {"duplicate_tool_call": 1},
    ),
    Case(
        "ollama",
        "two different calls under one id",
        [_o_calls(("call_a", "get", {"q": 1}), ("call_a", "put", {"q": 2})), O_DONE],
        [("call", "call_a", "get", {"q": 1}), ("call", "call_a", "put", {"q": 2})],
        {"reused_tool_call_id": 1},
    ),
]

CASES = [*ANTHROPIC, *BEDROCK, *RESPONSES, *CHAT, *GEMINI, *OLLAMA]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_lenient_repairs_and_counts(case: Case) -> None:
    message = _fold(case.events, case.provider)
    assert message.metadata["repairs"] == case.repairs
    assert _summary(message) == case.parts
    if case.check is not None:
        case.check(message)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_strict_raises(case: Case) -> None:
    with pytest.raises(StreamProtocolError) as info:
        _fold(case.events, case.provider, strict=True)
    assert info.value.provider == case.provider
    assert str(info.value).startswith("expected")
    assert info.value.partial is not None


def test_every_decoder_has_cases() -> None:
    assert {c.provider for c in CASES} == {
        "anthropic",
        "bedrock",
        "openai-responses",
        "openai-chat",
        "gemini",
        "ollama",
    }


# --- 4. broken data raises in both modes --------------------------------------------------

BROKEN = [
    ("anthropic", [_a_start(), _a_block(0, A_TEXT), _a_delta(0, type="text_delta", text=3)]),
    ("anthropic", [_a_start(), _a_delta(7, type="text_delta", text=["x"])]),  # before start too
    ("anthropic", [_a_start(), _a_block(0, "text")]),  # type: ignore[arg-type]
    ("bedrock", [B_START, {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": 5}}}]),
    ("bedrock", [B_START, _b_input(0, {"q": 1})]),  # type: ignore[arg-type]
    ("openai-responses", [R_CREATED, _r_added(R_MSG), _r_text("msg_1", 5)]),  # type: ignore[arg-type]
    ("openai-responses", [R_CREATED, {**_r_text("msg_1", "x"), "item_id": 7}]),
    ("openai-chat", [_c_chunk({"tool_calls": {"index": 0}})]),
    ("gemini", [_g_call({"name": 3})]),
    ("ollama", [{"message": {"content": ["x"]}, "done": False}]),
]


@pytest.mark.parametrize(("provider", "events"), BROKEN)
@pytest.mark.parametrize("strict", [False, True])
def test_broken_data_raises_in_both_modes(
    provider: str, events: list[dict[str, Any]], strict: bool
) -> None:
    with pytest.raises(StreamProtocolError, match="expected"):
        _fold(events, provider, strict=strict)


def test_the_lenient_default_is_what_fold_does() -> None:
    events = [_a_start(), _a_text(0, "Hi"), *_a_end()]
    assert _fold(events, "anthropic") == _fold(events, "anthropic", strict=False)
    assert isinstance(_fold(events, "anthropic").content[0], ContentPart)
