"""The decoders' fast paths give exactly what their full paths give.

Each fold runs twice: as shipped, and with every fast path switched off (the full path
alone). Events, final Message and any error must be the same, lenient and strict.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import hot_lane_off, read, recordings

from streamfold import StreamfoldError, ToolCall, accumulator, fold
from streamfold._model import json_depth_over
from streamfold.accumulator import Accumulator
from streamfold.deltas import ClosePart, GrowPart, OpenPart
from streamfold.errors import ToolArgumentsError
from streamfold.limits import Limits
from streamfold.message import parse_tool_arguments
from streamfold.providers import anthropic, openai_chat
from streamfold.providers.openai_responses import decode as openai_responses

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.generate import generate


@contextmanager
def _full_path_only() -> Iterator[None]:
    saved = (
        openai_chat.OpenAIChatDecoder.object_text,
        anthropic.AnthropicDecoder.object_text,
        dict(openai_responses._FAST),
    )
    with hot_lane_off():  # the hot lane reads bytes the fast paths would have read
        try:
            openai_chat.OpenAIChatDecoder.object_text = lambda self, payload: None  # type: ignore[method-assign]
            anthropic.AnthropicDecoder.object_text = lambda self, payload: None  # type: ignore[method-assign]
            openai_responses._FAST.clear()
            yield
        finally:
            openai_chat.OpenAIChatDecoder.object_text = saved[0]  # type: ignore[method-assign]
            anthropic.AnthropicDecoder.object_text = saved[1]  # type: ignore[method-assign]
            openai_responses._FAST.update(saved[2])


def _outcome(run: Callable[[], list[Any]]) -> tuple[list[str], str | None]:
    events: list[str] = []
    try:
        for event in run():
            events.append(repr(event))
    except StreamfoldError as exc:
        return events, f"{type(exc).__name__}: {exc}"
    return events, None


def _assert_same(chunks: list[Any], provider: str | None, **options: Any) -> None:
    def run() -> list[Any]:
        return list(fold(list(chunks), provider, **options))

    fast = _outcome(run)
    with _full_path_only():
        full = _outcome(run)
    assert fast == full


@pytest.mark.parametrize("rel", recordings())
@pytest.mark.parametrize("strict", [False, True])
def test_recordings_fast_equals_full(rel: str, strict: bool) -> None:
    _assert_same([read(rel)], None, strict=strict)


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses"])
@pytest.mark.parametrize("workload", ["mixed", "bigargs"])
def test_generated_fast_equals_full(provider: str, workload: str) -> None:
    stream = generate(provider, workload, 300)
    _assert_same([stream.sse], provider)
    _assert_same(list(stream.dicts), provider)


# --- Anthropic: deltas drawn from the cases object_text must tell apart -----------------


def _block(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: Any, delta: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta, **extra}


_ANTHROPIC_OPENING = [
    {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": []}},
    _block(0, {"type": "text", "text": ""}),
    _block(1, {"type": "thinking", "thinking": ""}),
    _block(2, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
]
_ANTHROPIC_EVENTS = [
    _delta(0, {"type": "text_delta", "text": "a"}),
    _delta(0, {"type": "text_delta", "text": ""}),
    _delta(1, {"type": "thinking_delta", "thinking": "b"}),
    _delta(2, {"type": "input_json_delta", "partial_json": '{"x": '}),
    _delta(2, {"type": "input_json_delta", "partial_json": "1}"}),
    _delta(2, {"type": "input_json_delta", "partial_json": ""}),
    _delta(0, {"type": "thinking_delta", "thinking": "wrong block"}),
    _delta(1, {"type": "text_delta", "text": "wrong block"}),
    _delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
    _delta(1, {"type": "signature_delta", "signature": "sig"}),
    _delta(0, {"type": "text_delta", "text": 5}),
    _delta(0, {"type": "text_delta"}),
    _delta(0, {"text": "no type"}),
    _delta(0, "not a delta"),
    _delta(True, {"type": "thinking_delta", "thinking": "index True"}),  # hashes as 1
    _delta(1.0, {"type": "thinking_delta", "thinking": "index 1.0"}),
    _delta("0", {"type": "text_delta", "text": "index str"}),
    _delta([0], {"type": "text_delta", "text": "index list"}),
    _delta(9, {"type": "text_delta", "text": "unknown block"}),
    _delta(0, {"type": "text_delta", "text": "extra"}, extra=1),
    {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "no index"}},
    {"type": "content_block_delta", "index": 0},
    {"index": 0, "delta": {"type": "text_delta", "text": "no type"}},
    {"type": ["content_block_delta"], "index": 0},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_stop", "index": 2},
    _block(0, {"type": "text", "text": "again"}),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picks=st.lists(st.sampled_from(range(len(_ANTHROPIC_EVENTS))), max_size=25))
def test_anthropic_fast_equals_full(picks: list[int]) -> None:
    events = _ANTHROPIC_OPENING + [_ANTHROPIC_EVENTS[i] for i in picks]
    for strict in (False, True):
        _assert_same(events, "anthropic", strict=strict)


# --- Chat: chunks drawn from the cases the fast paths must tell apart -------------------

_CHAT_META = {"id": "c1", "model": "m", "object": "chat.completion.chunk"}


def _chat(delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    return {**_CHAT_META, "choices": [choice], **top}


def _frag(**fields: Any) -> dict[str, Any]:
    return {"tool_calls": [fields]}


_CHAT_CHUNKS = [
    _chat({"role": "assistant", "content": ""}),
    _chat({"content": "hi"}),
    _chat({"content": "", "role": None}),
    _chat({"refusal": "no"}),
    _chat({"reasoning_content": "think"}),
    _chat({"reasoning": "more"}),
    _chat({"reasoning_content": "", "reasoning": "plain"}),
    _chat({"reasoning_content": "a", "reasoning": "a"}),
    _chat({"reasoning_details": [{"type": "reasoning.text", "text": "d", "index": 1}]}),
    _chat({"reasoning_details": [{"type": "reasoning.text", "signature": "s", "index": 0}]}),
    _chat(_frag(index=0, id="call_a", type="function", function={"name": "f", "arguments": ""})),
    _chat(_frag(index=1, id="call_b", type="function", function={"name": "g", "arguments": "{"})),
    _chat(_frag(index=0, function={"arguments": '{"x": '})),
    _chat(_frag(index=1, function={"arguments": "1}"})),
    _chat(_frag(index=2, function={"arguments": "[]"})),
    _chat(_frag(index=0, id="", function={"name": "", "arguments": "2"})),
    _chat(_frag(index=0, id="call_a", function={"arguments": "3"})),
    _chat(_frag(index=0, id="call_c", function={"arguments": "4"})),
    _chat(_frag(index=0, function={"name": "h", "arguments": "5"})),
    _chat(_frag(index=True, function={"arguments": "6"})),
    _chat(_frag(index=0, function={"arguments": 7})),
    _chat(_frag(index=0, function=None)),
    _chat(_frag(function={"arguments": "8"})),
    _chat({"tool_calls": [{"index": 0, "function": {"arguments": "9"}}, {"index": 1}]}),
    _chat({"tool_calls": [{"index": 0, "function": {"arguments": "x"}}], "content": "t"}),
    _chat({}, "tool_calls"),
    _chat({}, "stop"),
    _chat({"content": "u"}, usage={"prompt_tokens": 1, "completion_tokens": 2}),
    _chat({"content": "m"}, model="other"),
    _chat({"content": "s"}, system_fingerprint="fp"),
    _chat({"content": "t"}, service_tier="flex", obfuscation="xx"),
    _chat({"content": "p"}, provider="Upstream"),
    _chat({"content": "g"}, x_groq={"id": "g"}),
    _chat({"content": "n"}, usage=None, error=None),
    _chat({"content": "c"}, citations=["https://a.example"]),
    {**_CHAT_META, "choices": [{"index": 1, "delta": {"content": "other choice"}}]},
    {**_CHAT_META, "choices": ["not a choice"]},
    {**_CHAT_META, "choices": [{"index": 0}]},
    {**_CHAT_META, "choices": [{"index": 0, "delta": "text"}]},
    _chat({"content": "r", "tool_calls": None}),
    _chat(_frag(index=0, type="function", function={"arguments": "q", "name": None})),
    _chat(_frag(index=0, function="arguments")),
    _chat({"tool_calls": ["fragment"]}),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.sampled_from(range(len(_CHAT_CHUNKS))), max_size=25),
    strict=st.booleans(),
    error_event=st.booleans(),
)
def test_chat_fast_equals_full(picks: list[int], strict: bool, error_event: bool) -> None:
    chunks = [_CHAT_CHUNKS[i] for i in picks]
    _assert_same(chunks, "openai-chat", strict=strict)
    # As SSE, some chunks in an event named error (which must carry an error object).
    sse = b"".join(
        (b"event: error\n" if error_event and n % 3 == 1 else b"")
        + b"data: "
        + json.dumps(chunk).encode()
        + b"\n\n"
        for n, chunk in enumerate(chunks)
    )
    _assert_same([sse] if sse else [], "openai-chat", strict=strict)


# A call open at index 0 (or text open), then a chunk that only looks like its next piece:
# each of the fast path's checks in turn decides. Drawn at random above, they are rare.
_CHAT_OPEN_CALL = [_CHAT_CHUNKS[10], _CHAT_CHUNKS[12]]
_CHAT_LOOK_ALIKES = [
    _chat(_frag(index=0, function={"name": "h", "arguments": "5"})),
    _chat(_frag(index=0, function={"name": "", "arguments": "5"})),
    _chat(_frag(index=0, id="call_z", function={"arguments": "5"})),
    _chat(_frag(index=0, id="", type="function", function={"arguments": "5"})),
    _chat({"tool_calls": [{"index": 0, "function": {"arguments": "5"}}], "role": "assistant"}),
    _chat({"tool_calls": [{"index": 0, "function": {"arguments": "5"}}], "refusal": "no"}),
]


@pytest.mark.parametrize("look_alike", range(len(_CHAT_LOOK_ALIKES)))
@pytest.mark.parametrize("opening", ["call", "text"])
def test_chat_look_alikes_fast_equals_full(look_alike: int, opening: str) -> None:
    chunk = _CHAT_LOOK_ALIKES[look_alike]
    start = _CHAT_OPEN_CALL if opening == "call" else [_CHAT_CHUNKS[1]]
    text_like = _chat({**chunk["choices"][0]["delta"], "content": "t"})
    for strict in (False, True):
        _assert_same([*start, chunk, _CHAT_CHUNKS[13]], "openai-chat", strict=strict)
        _assert_same([*start, text_like, _CHAT_CHUNKS[1]], "openai-chat", strict=strict)


# --- Responses: events for known, unknown, ended and mismatched items and parts ----------


def _ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"response.{kind}", **fields}


_RESP_EVENTS = [
    _ev("created", response={"id": "r1", "model": "m", "status": "in_progress"}),
    _ev(
        "output_item.added",
        output_index=0,
        item={"type": "message", "id": "msg", "role": "assistant"},
    ),
    _ev(
        "content_part.added",
        item_id="msg",
        output_index=0,
        content_index=0,
        part={"type": "output_text", "text": ""},
    ),
    _ev("output_text.delta", item_id="msg", output_index=0, content_index=0, delta="hi"),
    _ev("output_text.delta", item_id="msg", output_index=0, delta="no index"),
    _ev("output_text.delta", item_id="msg", content_index=None, delta="null index"),
    _ev("output_text.delta", item_id="msg", content_index=1, delta="other part"),
    _ev("output_text.delta", item_id="msg", content_index=0, delta=""),
    _ev("output_text.delta", item_id="msg", content_index=0, delta="lp", logprobs=[{"t": 1}]),
    _ev("output_text.delta", output_index=0, content_index=0, delta="by index"),
    _ev("output_text.delta", item_id="nope", content_index=0, delta="early"),
    _ev("output_text.delta", item_id="rs", content_index=0, delta="in reasoning"),
    _ev("refusal.delta", item_id="msg", content_index=0, delta="r"),
    _ev("reasoning_text.delta", item_id="rs", content_index=0, delta="rt"),
    _ev("output_text.done", item_id="msg", content_index=0, text="hi"),
    _ev(
        "content_part.done",
        item_id="msg",
        content_index=0,
        part={"type": "output_text", "text": "hi"},
    ),
    _ev("output_item.added", output_index=1, item={"type": "reasoning", "id": "rs", "summary": []}),
    _ev(
        "reasoning_summary_part.added",
        item_id="rs",
        summary_index=0,
        part={"type": "summary_text", "text": ""},
    ),
    _ev("reasoning_summary_text.delta", item_id="rs", summary_index=0, delta="sum"),
    _ev("reasoning_summary_text.delta", item_id="rs", summary_index=1, delta="next"),
    _ev("reasoning_summary_text.delta", item_id="msg", summary_index=0, delta="wrong item"),
    _ev(
        "reasoning_summary_part.done",
        item_id="rs",
        summary_index=0,
        part={"type": "summary_text", "text": "sum"},
    ),
    _ev(
        "output_item.added",
        output_index=2,
        item={"type": "function_call", "id": "fc", "call_id": "c", "name": "f", "arguments": ""},
    ),
    _ev("function_call_arguments.delta", item_id="fc", delta='{"a":'),
    _ev("function_call_arguments.delta", item_id="fc", delta=""),
    _ev("function_call_arguments.delta", item_id="msg", delta="1"),
    _ev("function_call_arguments.done", item_id="fc", arguments='{"a":1}'),
    _ev(
        "output_item.added",
        output_index=3,
        item={"type": "mcp_call", "id": "mc", "name": "t", "server_label": "s"},
    ),
    _ev("function_call_arguments.delta", item_id="mc", delta="{}"),
    _ev(
        "output_item.done",
        output_index=2,
        item={
            "type": "function_call",
            "id": "fc",
            "call_id": "c",
            "name": "f",
            "arguments": '{"a":1}',
        },
    ),
    _ev(
        "output_item.done",
        output_index=0,
        item={"type": "message", "id": "msg", "role": "assistant", "content": []},
    ),
    _ev(
        "content_part.done",
        item_id="rs",
        content_index=0,
        part={"type": "reasoning_text", "text": "rt"},
    ),
    _ev("output_item.done", output_index=1, item={"type": "reasoning", "id": "rs", "summary": []}),
]


# Events that end the fold (the response completes, or breaks the protocol): at most
# one, last.
_RESP_ENDINGS = [
    _ev("completed", response={"id": "r1", "model": "m", "status": "completed", "output": []}),
    _ev("output_text.delta", item_id="msg", content_index=0, delta=5),
    _ev("output_text.delta", item_id="msg", content_index=True, delta="b"),
    _ev("reasoning_summary_text.delta", item_id="rs", summary_index="0", delta="bad"),
    _ev("function_call_arguments.delta", item_id="fc", delta=None),
]

_RESP_OPENING = [
    n for n, event in enumerate(_RESP_EVENTS) if event["type"].endswith(("created", "added"))
]


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.sampled_from(range(len(_RESP_EVENTS))), max_size=25),
    numbers=st.lists(st.integers(0, 40), max_size=40),
    strict=st.booleans(),
    opened=st.booleans(),
    broken=st.none() | st.sampled_from(_RESP_ENDINGS),
)
def test_responses_fast_equals_full(
    picks: list[int],
    numbers: list[int],
    strict: bool,
    opened: bool,
    broken: dict[str, Any] | None,
) -> None:
    # Mostly with every item and part added first, so the random part is about deltas
    # for known, ended and closed parts.
    start = _RESP_OPENING if opened else []
    events = [dict(_RESP_EVENTS[i]) for i in [*start, *picks]]
    for event, number in zip(events[len(start) :], numbers, strict=False):
        event["sequence_number"] = number  # repeats are duplicates to drop
    if broken is not None:
        events.append(dict(broken))
    _assert_same(events, "openai-responses", strict=strict)


def _find(kind: str, **fields: Any) -> dict[str, Any]:
    return next(
        e
        for e in _RESP_EVENTS
        if e["type"] == f"response.{kind}" and all(e.get(k) == v for k, v in fields.items())
    )


# Orders the random draw rarely makes: a delta for a reasoning part whose done arrived
# (still the latest part, so not closed yet), a summary delta for a message item twice.
_RESP_CASES = [
    [
        _find("reasoning_text.delta", item_id="rs"),
        _find("content_part.done", item_id="rs"),
        _find("reasoning_text.delta", item_id="rs"),
    ],
    [
        _find("reasoning_summary_part.done", item_id="rs"),
        _find("reasoning_summary_text.delta", item_id="rs", summary_index=0),
    ],
    [
        _find("reasoning_summary_text.delta", item_id="msg"),
        _find("reasoning_summary_text.delta", item_id="msg"),
    ],
    [
        _find("function_call_arguments.delta", item_id="msg"),
        _find("function_call_arguments.delta", item_id="mc"),
        _find("function_call_arguments.delta", item_id="fc", delta=""),
    ],
]


@pytest.mark.parametrize("case", range(len(_RESP_CASES)))
@pytest.mark.parametrize("strict", [False, True])
def test_responses_cases_fast_equals_full(case: int, strict: bool) -> None:
    events = [dict(_RESP_EVENTS[i]) for i in _RESP_OPENING] + [dict(e) for e in _RESP_CASES[case]]
    _assert_same(events, "openai-responses", strict=strict)


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


# --- Accumulator: a tool call's final arguments, parsed from bytes encoded in batches ----

_ARG_PIECES = st.lists(
    st.sampled_from(['{"a": ', '"x', "é", "😀", "\\n", '"', "}", " ", "1", "[", "]", ",", "{"]),
    max_size=40,
)


def _final_call(chunks: list[str], *, cut: bool, max_depth: int = 128) -> Any:
    acc = Accumulator(provider="test", limits=Limits(max_depth=max_depth))
    acc.apply(OpenPart("k", ToolCall(call_id="c", name="f", arguments="")))
    for chunk in chunks:
        acc.apply(GrowPart("k", content=chunk))
    events = acc.close() if cut else acc.apply(ClosePart("k"))
    part = events[0].part
    assert isinstance(part, ToolCall)
    return part


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=_ARG_PIECES, cut=st.booleans(), batch=st.sampled_from([1, 2, 3, 4096]))
def test_final_arguments_as_from_the_joined_text(
    pieces: list[str], cut: bool, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "".join(pieces)
    with monkeypatch.context() as patch:  # undone after each example
        patch.setattr(accumulator, "_ENCODE_BATCH", batch)
        call = _final_call(pieces, cut=cut)
    if cut and not text.strip():
        assert call.arguments == text and call.status == "incomplete"
        return
    try:
        expected = parse_tool_arguments("c", "f", text)
    except ToolArgumentsError as exc:
        assert call.arguments == text
        assert call.status == "incomplete"
        assert call.metadata["arguments_error"] == str(exc)
    else:
        assert call.arguments == expected and call.status == "complete"


def test_final_arguments_too_deep_keep_the_text() -> None:
    pieces = ['{"a": ', "[[[", "1]]]", "}"]
    call = _final_call(pieces, cut=False, max_depth=2)
    assert call.arguments == "".join(pieces) and call.status == "incomplete"
    assert "nested" in call.metadata["arguments_error"]


_JSON_VALUES = st.recursive(
    st.none() | st.integers() | st.text(alphabet="ab{[]}", max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    value=st.dictionaries(st.text(max_size=2), _JSON_VALUES, max_size=3),
    limit=st.integers(2, 6),  # (a call's start is [arguments, metadata]: 2 deep)
)
def test_final_arguments_depth_limit_as_the_walk_says(value: dict[str, Any], limit: int) -> None:
    """The final build walks the parsed arguments only when the text holds more brackets
    than the limit (strings may hold some): the verdict is always the walk's."""
    text = json.dumps(value)
    too_deep = json_depth_over(value, limit)
    for pieces in ([text], [text[:1], text[1:]]):
        call = _final_call(pieces, cut=False, max_depth=limit)
        if too_deep is None:
            assert call.status == "complete" and call.arguments == value
        else:
            assert call.status == "incomplete" and call.arguments == text
            assert call.metadata["arguments_error"].endswith(f"nested {too_deep} deep")


def test_final_arguments_with_a_lone_surrogate_are_kept_as_text() -> None:
    # Not encodable: the batched path steps aside and the join-then-encode path gives
    # the arguments error any text that is no JSON gives (never a UnicodeEncodeError).
    call = _final_call(['{"a": "', "\ud83d", '"}'], cut=False)
    assert call.status == "incomplete" and call.arguments == '{"a": "\ud83d"}'
    assert "not UTF-8 text" in call.metadata["arguments_error"]
