"""The Responses SSE hot lane gives exactly what the framer and decode() give.

Every stream here is folded twice, with and without the lane, split at arbitrary points,
lenient and strict, with tight limits and live partial arguments: events, errors and the
final message must not differ. The event pool mixes the delta events the lane takes (text,
refusal, reasoning text, summary, tool arguments; numbered or not, with or without
logprobs and obfuscation) with look-alikes it must leave to the full path: duplicate, out
of order, malformed or oddly written sequence numbers, unknown items, closed or ended
parts, a reused item id, other key orders or spacing, extra or repeated keys, non-empty
logprobs, escapes, bad UTF-8, raw control characters, and the events that close parts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import (
    HOT_LANE_OPTIONS,
    INDEX,
    attributes,
    count_grow_texts,
    decoded_payloads,
    fold_outcome,
    hot_lane_from,
    hot_lane_off,
    read,
    split_at,
    types_of,
)
from support import (
    sse_event as sse,
)

from streamfold import PartDelta, StreamFolder, StreamfoldError, fold
from streamfold.limits import Limits
from streamfold.providers.openai_responses import decode as openai_responses


@pytest.fixture(autouse=True)
def _lane_from_the_first_event() -> Iterator[None]:
    """These streams are short: the lane starts at once (assert_hot_lane_same also folds
    with the shipped start)."""
    with hot_lane_from(0):
        yield


_TEXT = "response.output_text.delta"
_SUMMARY = "response.reasoning_summary_text.delta"
_ARGUMENTS = "response.function_call_arguments.delta"

# The fields between the sequence number and the delta, per part, as OpenAI writes them.
_MSG = ',"item_id":"msg_1","output_index":0,"content_index":0'
_REFUSAL = ',"item_id":"msg_1","output_index":0,"content_index":1'
_CLOSED = ',"item_id":"msg_1","output_index":0,"content_index":2'
_RS = ',"item_id":"rs_1","output_index":1,"summary_index":0'
_RS_TEXT = ',"item_id":"rs_2","output_index":5,"content_index":0'
_FC = ',"item_id":"fc_1","output_index":2'
_MCP = ',"item_id":"mcp_1","output_index":3'
_CUSTOM = ',"item_id":"ct_1","output_index":4'
_LOGPROBS = ',"logprobs":[]'
_OBFUSCATION = ',"obfuscation":"Zx9q"'
_OPENAI = _LOGPROBS + _OBFUSCATION


def _delta(
    kind: str,
    number: object,
    fields: str,
    text: str,
    tail: str = _OPENAI,
    name: str | None = "",
) -> bytes:
    """A delta event written the way OpenAI writes it (`number` None: none)."""
    numbered = "" if number is None else f',"sequence_number":{number}'
    body = '{"type":"' + kind + '"' + numbered + fields + ',"delta":"' + text + '"' + tail + "}"
    return sse(kind if name == "" else name, body)


def _event(kind: str, number: int, **fields: Any) -> bytes:
    return sse(kind, {"type": kind, "sequence_number": number, **fields})


def _added(number: int, index: int, item: dict[str, Any]) -> bytes:
    return _event("response.output_item.added", number, output_index=index, item=item)


def _part(number: int, kind: str, item_id: str, index: int, part: dict[str, Any]) -> bytes:
    return _event(
        f"response.content_part.{kind}",
        number,
        item_id=item_id,
        output_index=0,
        content_index=index,
        part=part,
    )


def _summary_part(number: int, kind: str, index: int) -> bytes:
    return _event(
        f"response.reasoning_summary_part.{kind}",
        number,
        item_id="rs_1",
        output_index=1,
        summary_index=index,
        part={"type": "summary_text", "text": ""},
    )


_MESSAGE = {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant"}
_TEXT_PART = {"type": "output_text", "text": "", "annotations": []}

# Each builds its event from the next sequence number n.
_OPENING: list[Callable[[int], bytes]] = [
    lambda n: _event(
        "response.created",
        n,
        response={"id": "resp_1", "object": "response", "status": "in_progress", "output": []},
    ),
    lambda n: _added(n, 0, {**_MESSAGE, "content": []}),
    lambda n: _part(n, "added", "msg_1", 0, _TEXT_PART),
    lambda n: _part(n, "added", "msg_1", 1, {"type": "refusal", "refusal": ""}),
    lambda n: _part(n, "added", "msg_1", 2, _TEXT_PART),
    lambda n: _part(n, "done", "msg_1", 2, {**_TEXT_PART, "text": "closed"}),
    lambda n: _added(n, 1, {"type": "reasoning", "id": "rs_1", "summary": []}),
    lambda n: _summary_part(n, "added", 0),
    lambda n: _added(n, 5, {"type": "reasoning", "id": "rs_2", "summary": []}),
    lambda n: _event(
        "response.content_part.added",
        n,
        item_id="rs_2",
        output_index=5,
        content_index=0,
        part={"type": "reasoning_text", "text": ""},
    ),
    lambda n: _added(
        n, 2, {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}
    ),
    lambda n: _added(n, 3, {"type": "mcp_call", "id": "mcp_1", "name": "t", "arguments": ""}),
    lambda n: _added(
        n, 4, {"type": "custom_tool_call", "id": "ct_1", "call_id": "c2", "name": "g", "input": ""}
    ),
]

# Taken: every delta kind a fast path takes, numbered or not, with any tail OpenAI writes.
_TAKEN: list[Callable[[int], bytes]] = [
    lambda n: _delta(_TEXT, n, _MSG, "Hello"),
    lambda n: _delta(_TEXT, n, _MSG, " world, naïve ☃ 😀"),
    lambda n: _delta(_TEXT, n, _MSG, ""),
    lambda n: _delta(_TEXT, n, _MSG, 'esc \\"q\\" \\n \\t \\u00e9 \\ud83d\\ude00 \\/ \\\\'),
    lambda n: _delta(_TEXT, n, _MSG, "no obfuscation", _LOGPROBS),
    lambda n: _delta(_TEXT, n, _MSG, "no logprobs", _OBFUSCATION),
    lambda n: _delta(_TEXT, n, _MSG, "bare", ""),
    lambda n: _delta(_TEXT, None, _MSG, "unnumbered", ""),
    lambda n: _delta(_TEXT, None, _MSG, "unnumbered, padded"),
    lambda n: _delta(_TEXT, n, _MSG, "empty padding", _LOGPROBS + ',"obfuscation":""'),
    lambda n: _delta(_TEXT, n, _MSG, "odd padding", _LOGPROBS + ',"obfuscation":" !#[]~"'),
    lambda n: _delta(_TEXT, n, _MSG.replace('index":0,"c', 'index":7,"c'), "moved item"),
    lambda n: _delta("response.refusal.delta", n, _REFUSAL, "I can't", _OBFUSCATION),
    lambda n: _delta(_SUMMARY, n, _RS, "Thinking", _OBFUSCATION),
    lambda n: _delta(_SUMMARY, n, _RS, "\\n\\n**Plan**", _OBFUSCATION),
    lambda n: _delta("response.reasoning_text.delta", n, _RS_TEXT, "raw thought", ""),
    lambda n: _delta(_ARGUMENTS, n, _FC, '{\\"a\\": ', _OBFUSCATION),
    lambda n: _delta(_ARGUMENTS, n, _FC, "12345", _OBFUSCATION),
    lambda n: _delta(_ARGUMENTS, n, _FC, "", _OBFUSCATION),
    lambda n: _delta(_ARGUMENTS, n, _FC, ', \\"b\\": [true]}', _OBFUSCATION),
    lambda n: _delta(_ARGUMENTS, n, _MCP, '{\\"q\\": 1}', _OBFUSCATION),
]

# Look-alikes the full path takes without ending the stream (lenient; strict may raise).
_LOOK_ALIKES: list[Callable[[int], bytes]] = [
    # Sequence numbers decode() calls duplicates, or that it reads as no number.
    lambda n: _delta(_TEXT, n - 1, _MSG, "the last number again"),
    lambda n: _delta(_TEXT, n - 5, _MSG, "an old number"),
    lambda n: _delta(_TEXT, 3, _MSG, "number 3"),
    lambda n: _delta(_TEXT, n + 1, _MSG, "one ahead"),
    lambda n: _delta(_TEXT, n + 2, _MSG, "ahead of a gap"),
    lambda n: _delta(_TEXT, n + 2000, _MSG, "far ahead"),
    lambda n: _delta(_TEXT, f"{n}.0", _MSG, "fraction"),
    lambda n: _delta(_TEXT, f"{n}e0", _MSG, "exponent"),
    lambda n: _delta(_TEXT, -n, _MSG, "negative"),
    lambda n: _delta(_TEXT, "-0", _MSG, "minus zero"),
    lambda n: _delta(_TEXT, 10**30 + n, _MSG, "huge"),
    lambda n: _delta(_TEXT, "null", _MSG, "null number"),
    lambda n: _delta(_TEXT, f'"{n}"', _MSG, "string number"),
    lambda n: _delta(_TEXT, f" {n}", _MSG, "spaced number"),
    # Parts the fast paths do not grow.
    lambda n: _delta(_TEXT, n, _MSG.replace("msg_1", "msg_9"), "unknown item"),
    lambda n: _delta(_TEXT, n, _CLOSED, "closed part"),
    lambda n: _delta(_TEXT, n, _MSG.replace('"content_index":0', '"summary_index":0'), "s0"),
    lambda n: _delta(_TEXT, n, _MSG.replace('"content_index":0', '"summary_index":1'), "s1"),
    lambda n: _delta(_SUMMARY, n, _RS.replace("summary_index", "content_index"), "c0"),
    lambda n: _delta(_TEXT, n, _MSG.replace("content_index", "x"), "no content index"),
    lambda n: _delta(_TEXT, n, _MSG.replace('"content_index":0', '"content_index":null'), "nul"),
    lambda n: _delta(_TEXT, n, ',"item_id":"msg_1","content_index":0', "no output index"),
    lambda n: _delta(_TEXT, n, _MSG.replace("msg_1", "msg_\\u0031"), "escaped id"),
    lambda n: _delta(_TEXT, n, _MSG.replace("msg_1", "fc_1"), "text into a call"),
    lambda n: _delta(_SUMMARY, n, _RS.replace("rs_1", "msg_1"), "summary into a message"),
    lambda n: _delta(_SUMMARY, n, _RS.replace('x":0', 'x":1'), "summary part 1"),
    lambda n: _delta(_ARGUMENTS, n, _CUSTOM, "custom input", _OBFUSCATION),
    lambda n: _delta(_ARGUMENTS, n, _FC.replace("fc_1", "msg_1"), "into a message"),
    lambda n: _delta("response.mcp_call_arguments.delta", n, _MCP, "{}", _OBFUSCATION),
    # Written another way.
    lambda n: _delta(_TEXT, n, ',"output_index":0,"item_id":"msg_1","content_index":0', "order"),
    lambda n: sse(
        _TEXT,
        '{"type":"response.output_text.delta","item_id":"msg_1","sequence_number":'
        + str(n)
        + ',"output_index":0,"content_index":0,"delta":"number after id"}',
    ),
    lambda n: sse(
        _TEXT,
        '{"sequence_number":'
        + str(n)
        + ',"type":"response.output_text.delta","content_index":0,"delta":"xai",'
        '"item_id":"msg_1","output_index":0,"logprobs":[]}',
    ),
    lambda n: sse(
        _TEXT,
        '{"type":"response.output_text.delta","content_index":0,"delta":"sorted",'
        '"item_id":"msg_1","logprobs":[],"obfuscation":"x","output_index":0,'
        '"sequence_number":' + str(n) + "}",
    ),
    lambda n: sse(
        _TEXT,
        '{"type": "response.output_text.delta", "sequence_number": '
        + str(n)
        + ', "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "spaced"}',
    ),
    lambda n: _delta(_TEXT, n, _MSG, "extra field", _OPENAI + ',"extra":1'),
    lambda n: _delta(_TEXT, n, _MSG, "repeated key", _OPENAI + ',"delta":"again"'),
    lambda n: _delta(_TEXT, n, _MSG, "padding first", _OBFUSCATION + _LOGPROBS),
    lambda n: _delta(
        _TEXT,
        n,
        _MSG,
        "logprobs",
        ',"logprobs":[{"token":"x","logprob":-0.1,"bytes":[120],"top_logprobs":[]}]',
    ),
    lambda n: _delta(_TEXT, n, _MSG, "null logprobs", ',"logprobs":null'),
    lambda n: _delta(_TEXT, n, _MSG, "escaped padding", _LOGPROBS + ',"obfuscation":"a\\u0041"'),
    lambda n: _delta(_TEXT, n, _MSG, "non-ascii padding", _LOGPROBS + ',"obfuscation":"é"'),
    lambda n: _delta(_TEXT, n, _MSG, "padded", _OPENAI + "   "),
    lambda n: _delta(_TEXT, n, _MSG, "other event name", name=_SUMMARY),
    lambda n: _delta(_TEXT, n, _MSG, "no event line", name=None),
    lambda n: _delta(_TEXT, n, _MSG, "longer name", name=_TEXT + "s"),
    lambda n: _delta(_TEXT, n, _MSG, "no space").replace(b"data: ", b"data:"),
    lambda n: _delta(_TEXT, n, _MSG, "with id").replace(b"\ndata", b"\nid: 7\ndata"),
    lambda n: _delta(_TEXT, n, _MSG, "crlf").replace(b"\n", b"\r\n"),
    lambda n: b": a comment\n\n",
    lambda n: b"\n",
]

# Events that open, close or end parts and items (the hot part among them).
_CHANGES: list[Callable[[int], bytes]] = [
    lambda n: _event(
        "response.output_text.done", n, item_id="msg_1", output_index=0, content_index=0, text="x"
    ),
    lambda n: _part(n, "done", "msg_1", 0, {**_TEXT_PART, "text": "done"}),
    lambda n: _part(n, "added", "msg_1", 0, _TEXT_PART),
    lambda n: _event("response.output_item.done", n, output_index=0, item={**_MESSAGE}),
    lambda n: _added(n, 0, {**_MESSAGE, "content": []}),
    lambda n: _summary_part(n, "done", 0),
    lambda n: _summary_part(n, "added", 1),
    lambda n: _event(
        "response.function_call_arguments.done", n, item_id="fc_1", output_index=2, arguments="{}"
    ),
    lambda n: _event(
        "response.output_item.done",
        n,
        output_index=2,
        item={"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f"},
    ),
    lambda n: _added(
        n, 2, {"type": "function_call", "id": "fc_1", "call_id": "c3", "name": "h", "arguments": ""}
    ),
]


def _unnamed(make: Callable[[int], bytes]) -> Callable[[int], bytes]:
    return lambda n: make(n).split(b"\n", 1)[1]


# The same without their event lines: with no event boundary the lane could stop at in
# between, one of them and the next arrive in one run of the framer.
_CHANGES += [_unnamed(make) for make in _CHANGES]
_LOOK_ALIKES += _CHANGES

# Events that end the stream: invalid JSON or framing (an error), the message's end.
_ENDINGS: list[Callable[[int], bytes]] = [
    lambda n: _delta(_TEXT, f"0{n}", _MSG, "leading zero"),
    lambda n: _delta(_TEXT, n, _MSG.replace('"content_index":0', '"content_index":00'), "00"),
    lambda n: _delta(_TEXT, n, _MSG.replace('"output_index":0', '"output_index":00'), "00"),
    lambda n: _delta(_TEXT, n, _MSG.replace("msg_1", "msg_\xff"), "bad utf8 id"),
    lambda n: _delta(_TEXT, n, _MSG, "bad escape \\x"),
    lambda n: _delta(_TEXT, n, _MSG, 'raw " quote'),
    lambda n: _delta(_TEXT, n, _MSG, "trailing backslash \\"),
    lambda n: _delta(_TEXT, n, _MSG, "lone \\ud800"),
    lambda n: _delta(_TEXT, n, _MSG, "raw\ttab"),
    lambda n: _delta(_TEXT, n, _MSG, "raw\u0001control"),
    lambda n: _delta(_TEXT, n, _MSG, "bad utf8 ").replace(b"utf8 ", b"utf8 \xff\xfe"),
    lambda n: _delta(_TEXT, n, _MSG, "cut utf8 ").replace(b"utf8 ", b"utf8 \xe2\x98"),
    lambda n: _delta(_TEXT, n, _MSG, "surrogate utf8 ").replace(b"utf8 ", b"utf8 \xed\xa0\x80"),
    lambda n: _delta(_TEXT, n, _MSG, "padding utf8", _LOGPROBS + ',"obfuscation":"ab"').replace(
        b'"ab"', b'"a\xffb"'
    ),
    lambda n: _delta(_TEXT, n, _MSG, "bad padding", _LOGPROBS + ',"obfuscation":"\\x"'),
    lambda n: _delta(_TEXT, n, _MSG, "quote padding", _LOGPROBS + ',"obfuscation":"a"b"'),
    lambda n: _delta(_TEXT, n, _MSG, "tab padding", _LOGPROBS + ',"obfuscation":"\t"'),
    lambda n: _delta(_TEXT, n, _MSG, "two data lines")[:-1] + b"data: {}\n\n",
    lambda n: b"data: [DONE]\n\n",
    lambda n: _event("error", n, code="server_error", message="busy"),
    lambda n: _event(
        "response.completed", n, response={"id": "resp_1", "status": "completed", "output": []}
    ),
    lambda n: _delta(_TEXT, n, _MSG, "unterminated")[:-3],
]

_EVENTS = _TAKEN + _LOOK_ALIKES + _ENDINGS
# A third of the picks among the taken events, a third among the look-alikes, a third
# among all (so a stream meets an ending now and then).
_PICKS = st.lists(
    st.one_of(
        st.integers(0, len(_TAKEN) - 1),
        st.integers(len(_TAKEN), len(_TAKEN) + len(_LOOK_ALIKES) - 1),
        st.integers(0, len(_EVENTS) - 1),
    ),
    max_size=40,
)


def _outcome(chunks: list[bytes], provider: str | None, **options: Any) -> tuple[Any, ...]:
    """Every event, the error if any, the final snapshot, and the decoder's own state but
    the lane's (what decode() records must not differ either)."""
    run = fold(list(chunks), provider, **options)
    events: list[str] = []
    error = None
    try:
        for event in run:
            events.append(repr(event))
    except StreamfoldError as exc:
        error = (type(exc).__name__, str(exc), {k: repr(v) for k, v in vars(exc).items()})
    decoder = attributes(run.folder._decoder) if run.folder._decoder is not None else {}
    state = {
        # A set's order depends on what was added and removed, not on what it holds.
        k: repr(sorted(v) if isinstance(v, set) else v)
        for k, v in decoder.items()
        if not k.startswith("_hot")
    }
    return events, error, repr(run.snapshot()), state


def _assert_same(chunks: list[bytes], provider: str | None, **options: Any) -> None:
    """The fold with the lane gives exactly what it gives without it, decoder state and all."""
    hot = _outcome(chunks, provider, **options)
    with hot_lane_off():
        full = _outcome(chunks, provider, **options)
    assert hot == full


def _stream(picks: list[int], opening: bool) -> bytes:
    events = (_OPENING if opening else []) + [_EVENTS[i] for i in picks]
    return b"".join(make(n) for n, make in enumerate(events))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=_PICKS,
    cuts=st.lists(st.integers(0, 8000), max_size=6),
    opening=st.booleans(),
    options=HOT_LANE_OPTIONS,
    named=st.booleans(),
    patient=st.booleans(),
)
def test_responses_hot_lane_equals_full_path(
    picks: list[int],
    cuts: list[int],
    opening: bool,
    options: dict[str, Any],
    named: bool,
    patient: bool,
) -> None:
    data = _stream(picks, opening)
    provider = "openai-responses" if named else None
    # Patient: the lane never stops for the stream, however many look-alikes it declines.
    misses = 10**9 if patient else openai_responses._HOT_MISSES
    with mock.patch.object(openai_responses, "_HOT_MISSES", misses):
        _assert_same(split_at(data, cuts), provider, **options)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.integers(0, len(_TAKEN) - 1), min_size=5, max_size=30),
    cuts=st.lists(st.integers(0, 6000), max_size=4),
    options=HOT_LANE_OPTIONS,
)
def test_responses_hot_lane_equals_full_path_on_taken_events(
    picks: list[int], cuts: list[int], options: dict[str, Any]
) -> None:
    """Runs of events the lane takes, so most are taken."""
    data = _stream(picks, True)
    _assert_same(split_at(data, cuts), "openai-responses", **options)


@settings(max_examples=300, deadline=None)
@given(
    numbers=st.lists(st.one_of(st.integers(10, 40), st.none()), max_size=40),
    parts=st.lists(st.sampled_from([0, 13, 16, 20]), min_size=1, max_size=4),
    cuts=st.lists(st.integers(0, 8000), max_size=3),
)
def test_responses_hot_lane_reads_sequence_numbers_as_decode_does(
    numbers: list[int | None], parts: list[int], cuts: list[int]
) -> None:
    """Deltas the lane takes, numbered in any order (gaps, repeats, filled gaps, none)."""
    opening = b"".join(make(n) for n, make in enumerate(_OPENING))
    events: list[Callable[[Any], bytes]] = [
        _TAKEN[parts[i % len(parts)]] for i in range(len(numbers))
    ]
    data = opening + b"".join(make(n) for n, make in zip(numbers, events, strict=True))
    _assert_same(split_at(data, cuts), "openai-responses")


@pytest.mark.parametrize("taken", [0, 12, 13, 15, 16, 20])
def test_every_two_changes_between_taken_events(taken: int) -> None:
    """Two events that open, close or end parts or items (a part closed and opened again,
    an item finished and added again under its id...) between events the lane takes."""
    for first in _CHANGES:
        for second in _CHANGES:
            data = _stream([], True) + b"".join(
                make(n)
                for n, make in enumerate(
                    [_TAKEN[taken], first, second] + [_TAKEN[taken]] * 2, len(_OPENING)
                )
            )
            _assert_same([data], "openai-responses")


_RESPONSES = sorted(e["file"] for e in INDEX if e.get("api") == "responses")


@pytest.mark.parametrize("rel", _RESPONSES)
def test_responses_recordings_hot_lane_equals_full_path(rel: str) -> None:
    data = read(rel)
    for size in (7, 61, 4096):
        pieces = [data[at : at + size] for at in range(0, len(data), size)]
        _assert_same(pieces, None)
        _assert_same(pieces, "openai-responses", strict=True)
    _assert_same([data], "openai-responses", partial_arguments=True)
    _assert_same([data], "openai-responses", limits=Limits(max_part_chars=300))


@pytest.mark.parametrize(
    "rel",
    [
        "openai-responses/reasoning-summary.sse",
        "openai-responses/function-call-reasoning-usage.sse",
        "openai-responses/mcp-list-tools-and-call.sse",
        "openai-responses/text.sse",
        "azure-openai/responses-tool-call.sse",
    ],
)
def test_hot_lane_takes_the_common_events(rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: on real recordings the lane takes every text, summary and argument
    delta (numbered or not), and decode() sees only the other events."""
    data = read(rel)
    decoded = decoded_payloads(monkeypatch, openai_responses.OpenAIResponsesDecoder)
    deltas = sum(type(e) is PartDelta for e in fold([data], "openai-responses"))
    hot = sum(data.count(b"event: " + kind.encode() + b"\n") for kind in openai_responses._FAST)
    assert deltas >= hot > 5
    assert not [kind for kind in types_of(decoded) if kind in openai_responses._FAST]
    assert "response.completed" in types_of(decoded)


def test_hot_lane_takes_events_cut_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """In small pieces, only the events a piece ends inside go through decode()."""
    data = read("openai-responses/reasoning-summary.sse")
    decoded = decoded_payloads(monkeypatch, openai_responses.OpenAIResponsesDecoder)
    pieces = [data[at : at + 997] for at in range(0, len(data), 997)]
    list(fold(pieces, "openai-responses"))
    assert 0 < sum(kind.endswith(".delta") for kind in types_of(decoded)) <= len(pieces)


def test_hot_lane_stops_for_streams_written_another_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """xAI writes the sequence number first: the lane declines a few deltas, then stops
    for the stream, so the framer takes the rest in long runs."""
    data = read("xai/responses-reasoning-summary.sse")
    calls: list[int] = []
    original = openai_responses.OpenAIResponsesDecoder.sse_shortcut

    def counting(self: Any, buffer: bytes, pos: int, grow: Any, out: list[Any]) -> int:
        calls.append(pos)
        return original(self, buffer, pos, grow, out)

    monkeypatch.setattr(openai_responses.OpenAIResponsesDecoder, "sse_shortcut", counting)
    pieces = [data[at : at + 4096] for at in range(0, len(data), 4096)]
    folder = StreamFolder("openai-responses")
    for piece in pieces:
        folder.feed(piece)
    folder.close()
    assert folder.snapshot().text
    assert len(calls) < openai_responses._HOT_MISSES + 10 < data.count(b".delta\ndata: ")
    assert folder._decoder is not None and folder._decoder.sse_hot_head is None


@pytest.mark.parametrize("rel", ["openai-responses/reasoning-summary.sse"])
def test_hot_lane_state_saves_and_restores(rel: str) -> None:
    """The lane's state is plain data: a fold saved mid-run and restored ends the same."""
    data = read(rel)
    pieces = [data[at : at + 512] for at in range(0, len(data), 512)]
    expected = fold_outcome(pieces, "openai-responses")
    for cut in (len(pieces) // 3, len(pieces) // 2):
        folder = StreamFolder("openai-responses")
        events = [repr(e) for piece in pieces[:cut] for e in folder.feed(piece)]
        decoder = folder._decoder
        assert isinstance(decoder, openai_responses.OpenAIResponsesDecoder)
        assert decoder._hot is not None  # saved with the lane's part
        restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
        events += [repr(e) for piece in pieces[cut:] for e in restored.feed(piece)]
        events += [repr(e) for e in restored.close()]
        assert (events, None, repr(restored.snapshot())) == expected


@pytest.mark.parametrize("taken", range(len(_TAKEN)))
def test_every_look_alike_between_taken_events(taken: int) -> None:
    """Each look-alike (and ending) right after an event the lane took, then that event
    again, then the look-alike twice (what the first one opened, the second may find):
    the lane must see what the look-alikes changed, and decline them."""
    for other in range(len(_TAKEN), len(_EVENTS)):
        data = _stream([taken, other, taken, other, other, taken], True)
        _assert_same([data], "openai-responses")
        _assert_same([data], "openai-responses", strict=True)


def _text_event(text: str) -> Callable[[int], bytes]:
    return lambda n: _delta(_TEXT, n, _MSG, text)


_RUN_BREAKERS: dict[str, Callable[[int], bytes]] = {
    "bad utf-8": lambda n: _delta(_TEXT, n, _MSG, "bad ").replace(b"bad ", b"bad \xff"),
    "bad escape": _text_event("bad \\x escape"),
    "lone surrogate": _text_event("lone \\ud800"),
    "escaped": _text_event('fine \\"q\\" \\u00e9 \\n'),
    "duplicate number": lambda n: _delta(_TEXT, n - 2, _MSG, "dup"),
    "skipped number": lambda n: _delta(_TEXT, n + 3, _MSG, "ahead"),
    "no number": lambda n: _delta(_TEXT, None, _MSG, "unnumbered"),
    "other part": lambda n: _delta(_SUMMARY, n, _RS, "summary"),
    "no obfuscation": lambda n: _delta(_TEXT, n, _MSG, "plain", tail=_LOGPROBS),
    "empty": _text_event(""),
}


@pytest.mark.parametrize("breaker", sorted(_RUN_BREAKERS))
@pytest.mark.parametrize(
    "options",
    [{}, {"strict": True}, {"limits": Limits(max_part_chars=60)}],
    ids=["lenient", "strict", "limit-mid-run"],
)
def test_a_run_with_any_event_in_the_middle_folds_as_the_full_path(
    breaker: str, options: dict[str, Any]
) -> None:
    """The lane takes a run of one part's consecutively numbered events in one
    accumulator call; an event in the middle that the run may not take (or that passes
    the size limit) ends it there, decoder state and all."""
    run = [_text_event(f"piece {k} ") for k in range(8)]
    more = [_text_event(f"more {k} ") for k in range(8)]
    events = [*_OPENING, *run, _RUN_BREAKERS[breaker], *more]
    data = b"".join(make(n) for n, make in enumerate(events))
    opening = sum(len(make(n)) for n, make in enumerate(_OPENING))
    for cuts in ([], [opening + 150], [len(data) // 2, len(data) - 40]):
        _assert_same(split_at(data, cuts), "openai-responses", **options)


def test_runs_are_taken_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: runs of several deltas, escaped text included, reach the accumulator
    in one grow_texts call."""
    sizes = count_grow_texts(monkeypatch)
    run = [_text_event(f'q \\"{k}\\" \\n') for k in range(6)]
    data = b"".join(make(n) for n, make in enumerate([*_OPENING, *run]))
    list(fold([data], "openai-responses"))
    assert sizes == [5]  # the first is taken alone: a live stream's chunk holds one event
    sizes.clear()
    list(fold([read("openai-responses/reasoning-summary.sse")], "openai-responses"))
    assert max(sizes) > 20


def test_a_run_of_an_item_whose_id_holds_percent_signs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run formats each event's prefix from a template: an id with `%d` or `%%` in it
    must still be matched byte for byte."""
    item_id = "m%d%s%%1"
    fields = f',"item_id":"{item_id}","output_index":0,"content_index":0'
    opening: list[Callable[[int], bytes]] = [
        _OPENING[0],
        lambda n: _added(n, 0, {**_MESSAGE, "id": item_id, "content": []}),
        lambda n: _part(n, "added", item_id, 0, _TEXT_PART),
    ]
    run = [lambda n, k=k: _delta(_TEXT, n, fields, f"piece {k} ") for k in range(6)]
    data = b"".join(make(n) for n, make in enumerate([*opening, *run]))
    _assert_same([data], "openai-responses")
    sizes = count_grow_texts(monkeypatch)
    events = list(fold([data], "openai-responses"))
    assert sizes == [5]
    assert "".join(e.content for e in events if type(e) is PartDelta) == "".join(
        f"piece {k} " for k in range(6)
    )
