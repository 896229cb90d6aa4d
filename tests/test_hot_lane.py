"""The SSE hot lane gives exactly what the framer and decode() give.

The hot lane reads the common delta events straight from the bytes. Every stream here is
folded twice, with and without it, split at arbitrary points (so events straddle the
pieces), lenient and strict, with tight limits and live partial arguments: events, errors
and the final message must not differ. The event pools mix events the lane takes with
look-alikes it must leave to the full path (escapes, bad UTF-8, raw control characters,
other spacing, a closed or unknown block, a delta of another kind...).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import (
    HOT_LANE_AFTER,
    HOT_LANE_AHEAD,
    HOT_LANE_OPTIONS,
    assert_hot_lane_same,
    count_grow_texts,
    decoded_payloads,
    hot_lane_from,
    hot_lane_off,
    read,
    recordings,
    split_at,
    types_of,
)
from support import (
    sse_event as sse,
)

from streamfold import PartDelta, StreamFolder, event_to_json, fold
from streamfold.framing import SSEDecoder
from streamfold.limits import Limits
from streamfold.providers import anthropic


@pytest.fixture(autouse=True)
def _lane_from_the_first_event() -> Iterator[None]:
    """These streams are short: the lane starts at once (assert_hot_lane_same also folds
    with the shipped start)."""
    with hot_lane_from(0):
        yield


def _delta(index: Any, body: str) -> bytes:
    return sse(
        "content_block_delta",
        '{"type":"content_block_delta","index":' + str(index) + ',"delta":' + body + "}",
    )


def _text(index: Any, raw: str) -> bytes:
    return _delta(index, '{"type":"text_delta","text":"' + raw + '"}')


def _start(index: int, block: dict[str, Any]) -> bytes:
    return sse(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


_MESSAGE_START = sse(
    "message_start",
    {
        "type": "message_start",
        "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}},
    },
)

_ANTHROPIC_EVENTS: list[bytes] = [
    _MESSAGE_START,
    _start(0, {"type": "text", "text": ""}),
    _start(1, {"type": "thinking", "thinking": "", "signature": ""}),
    _start(2, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
    _start(3, {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}),
    _start(0, {"type": "text", "text": "again"}),
    _text(0, "Hello"),
    _text(0, " world, naïve ☃ 😀"),
    _text(0, ""),
    _text(0, 'esc \\"q\\" \\n \\t \\u00e9 \\ud83d\\ude00 \\/'),
    _text(0, "bad escape \\x"),
    _text(0, "lone \\ud800"),
    _text(0, 'raw " quote'),
    _text(0, "trailing backslash \\"),
    _text(0, "raw\ttab").replace(b"\\t", b"\t"),
    _text(0, "raw\u0001ctl"),
    _text(0, "x") + b"\x00",
    _text(0, "bad utf8 ").replace(b"utf8 ", b"utf8 \xff\xfe"),
    _text(0, "cut utf8 ").replace(b"utf8 ", b"utf8 \xe2\x98"),
    _text("00", "leading zero"),
    _text("0.0", "float index"),
    _text(-1, "negative"),
    _text(9, "unknown block"),
    _text(1, "text into thinking"),
    _text(12345678901234, "huge index"),
    _delta(0, '{"type":"text_delta","text":"a","text":"dup"}'),
    _delta(0, '{"type":"text_delta","text":"a","extra":1}'),
    _delta(0, '{"text":"reordered","type":"text_delta"}'),
    sse(
        "content_block_delta",
        '{"type": "content_block_delta", "index": 0, "delta": '
        '{"type": "text_delta", "text": "spaced"}}',
    ),
    sse(
        None,
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"no'
        ' event line"}}',
    ),
    b'event: content_block_delta\ndata:{"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"no space"}}\n\n',
    b'event: content_block_delta\nid: 7\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"with id"}}\n\n',
    b'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"crlf"}}\r\n\r\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"two data lines"}}\ndata: {}\n\n',
    b": a comment\n\n",
    b"\n",
    _delta(1, '{"type":"thinking_delta","thinking":"Let me think"}'),
    _delta(1, '{"type":"thinking_delta","thinking":"more \\"thought\\""}'),
    _delta(1, '{"type":"signature_delta","signature":"c2ln"}'),
    _delta(0, '{"type":"thinking_delta","thinking":"thinking into text"}'),
    _delta(2, '{"type":"input_json_delta","partial_json":"{\\"a\\": "}'),
    _delta(2, '{"type":"input_json_delta","partial_json":"[1, \\"x\\""}'),
    _delta(2, '{"type":"input_json_delta","partial_json":""}'),
    _delta(2, '{"type":"input_json_delta","partial_json":"]}"}'),
    _delta(3, '{"type":"input_json_delta","partial_json":"{\\"query\\": \\"q\\"}"}'),
    _delta(2, '{"type":"text_delta","text":"text into a tool"}'),
    sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
    sse("content_block_stop", {"type": "content_block_stop", "index": 2}),
    sse("ping", {"type": "ping"}),
    sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 5},
        },
    ),
    sse("error", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
    sse("message_stop", {"type": "message_stop"}),
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"unterminated',
]

_OPENING = (
    _MESSAGE_START
    + _start(0, {"type": "text", "text": ""})
    + _start(1, {"type": "thinking", "thinking": ""})
    + _start(2, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}})
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.sampled_from(range(len(_ANTHROPIC_EVENTS))), max_size=30),
    cuts=st.lists(st.integers(0, 4000), max_size=6),
    opening=st.booleans(),
    options=HOT_LANE_OPTIONS,
    named=st.booleans(),
)
def test_anthropic_hot_lane_equals_full_path(
    picks: list[int], cuts: list[int], opening: bool, options: dict[str, Any], named: bool
) -> None:
    data = (_OPENING if opening else b"") + b"".join(_ANTHROPIC_EVENTS[i] for i in picks)
    assert_hot_lane_same(split_at(data, cuts), "anthropic" if named else None, **options)


@pytest.mark.parametrize("rel", recordings("anthropic", "openai-chat", "openai-responses"))
def test_recordings_hot_lane_equals_full_path(rel: str) -> None:
    data = read(rel)
    for size in (7, 61, 4096):
        pieces = [data[at : at + size] for at in range(0, len(data), size)]
        assert_hot_lane_same(pieces, None)
    # As a live connection delivers it: one event per piece (each ending its buffer).
    events = [piece for piece in re.split(rb"(?<=\n\n)", data) if piece]
    assert b"".join(events) == data
    assert_hot_lane_same(events, None)
    assert_hot_lane_same([data], None, strict=True)


def test_hot_lane_takes_the_common_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: on a real recording the lane takes nearly every delta, and decode()
    sees only the rest."""
    data = read("anthropic/thinking-signature.sse")
    decoded = decoded_payloads(monkeypatch, anthropic.AnthropicDecoder)
    deltas = sum(type(e) is PartDelta for e in fold([data], "anthropic"))
    assert deltas > 20
    # decode() saw only the signature deltas: every text, thinking and input delta was
    # taken from the bytes.
    assert types_of(decoded).count("content_block_delta") == data.count(b'"signature_delta"')
    assert "message_stop" in types_of(decoded)


@settings(max_examples=300, deadline=None)
@given(
    picks=st.lists(st.sampled_from(range(len(_ANTHROPIC_EVENTS))), max_size=20),
    cuts=st.lists(st.integers(0, 3000), max_size=8),
    take=st.lists(st.booleans(), min_size=10, max_size=10),
)
def test_take_at_boundary_loses_and_repeats_nothing(
    picks: list[int], cuts: list[int], take: list[bool]
) -> None:
    """Framing alone: feeding pieces, or taking them at a boundary and feeding the bytes
    back, gives the same events."""
    data = b"".join(_ANTHROPIC_EVENTS[i] for i in picks)
    plain = SSEDecoder()
    expected = [e for piece in split_at(data, cuts) for e in plain.feed(piece)] + plain.close()
    framer = SSEDecoder()
    got = []
    for n, piece in enumerate(split_at(data, cuts)):
        taken = framer.take_at_boundary(piece) if take[n % len(take)] else None
        if taken is None:
            got.extend(framer.feed(piece))
            continue
        events, rest = taken
        got.extend(events)
        # Hand the rest back at an arbitrary event end, as the hot lane does.
        end = rest.find(b"\n\n")
        got.extend(framer.feed(rest[: end + 2] if end >= 0 else rest))
        if end >= 0:
            got.extend(framer.feed(rest[end + 2 :]))
    got.extend(framer.close())
    assert got == expected


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


@pytest.mark.parametrize("cut", [0.3, 0.5, 0.8])
def test_anthropic_hot_lane_state_saves_and_restores(cut: float) -> None:
    """A fold saved while the lane holds a block (its last prefix) restores in a fresh
    folder and continues exactly as the uninterrupted fold."""
    data = read("anthropic/thinking-signature.sse")
    pieces = [data[at : at + 700] for at in range(0, len(data), 700)]
    half = int(len(pieces) * cut)
    folder = StreamFolder("anthropic")
    events = [e for piece in pieces[:half] for e in folder.feed(piece)]
    decoder = folder._decoder
    assert isinstance(decoder, anthropic.AnthropicDecoder) and decoder._hot is not None
    restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    events += [e for piece in pieces[half:] for e in restored.feed(piece)] + restored.close()
    whole = list(fold(pieces, "anthropic"))
    assert [event_to_json(e) for e in events] == [event_to_json(e) for e in whole]


def _tool_json(index: int, raw: str) -> bytes:
    return _delta(index, '{"type":"input_json_delta","partial_json":"' + raw + '"}')


_RUN_BREAKERS = {
    "bad utf-8": _text(0, "bad ").replace(b"bad ", b"bad \xff"),
    "cut utf-8": _text(0, "cut ").replace(b"cut ", b"cut \xe2\x98"),
    "bad escape": _text(0, "bad \\x escape"),
    "lone surrogate": _text(0, "lone \\ud800"),
    "raw control": _text(0, "raw\u0001ctl"),
    "escaped quote": _text(0, 'fine \\"q\\" \\u00e9 \\n'),
    "trailing backslash": _text(0, "ends \\\\"),
    "other block": _text(9, "unknown"),
    "other kind": _delta(0, '{"type":"thinking_delta","thinking":"into text"}'),
    "spacing": sse(
        "content_block_delta",
        '{"type": "content_block_delta", "index": 0, "delta": '
        '{"type": "text_delta", "text": "spaced"}}',
    ),
}


@pytest.mark.parametrize("breaker", sorted(_RUN_BREAKERS))
@pytest.mark.parametrize(
    "options",
    [{}, {"strict": True}, {"limits": Limits(max_part_chars=70)}],
    ids=["lenient", "strict", "limit-mid-run"],
)
def test_a_run_with_any_event_in_the_middle_folds_as_the_full_path(
    breaker: str, options: dict[str, Any]
) -> None:
    """The lane takes a run of one block's events in one accumulator call; an event in
    the middle that the run may not take (or that passes the size limit) ends it there,
    with every event before it delivered."""
    before = b"".join(_text(0, f"piece {n} ") for n in range(8))
    after = b"".join(_text(0, f"more {n} ") for n in range(8))
    data = _OPENING + before + _RUN_BREAKERS[breaker] + after
    for cuts in ([], [len(_OPENING) + 100], [len(data) // 2, len(data) - 30]):
        assert_hot_lane_same(split_at(data, cuts), "anthropic", **options)


def test_tool_input_runs_with_live_arguments_fold_as_the_full_path() -> None:
    """A tool_use run with partial_arguments on: the changes per delta are the same."""
    pieces = ['{\\"city\\": \\"Par', "is\\", '\\"days\\": [1, ', "2]", ", \\n", '\\"x\\": null}']
    data = _OPENING + b"".join(_tool_json(2, p) for p in pieces)
    assert_hot_lane_same([data], "anthropic", partial_arguments=True)
    assert_hot_lane_same([data], "anthropic")


def test_runs_are_taken_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: on a real recording, runs of several deltas reach the accumulator
    in one grow_texts call, escaped text included."""
    sizes = count_grow_texts(monkeypatch)
    data = read("anthropic/thinking-signature.sse")
    list(fold([data], "anthropic"))
    assert max(sizes) > 20
    escaped = _OPENING + b"".join(_text(0, f'q \\"{n}\\" \\n') for n in range(5))
    sizes.clear()
    list(fold([escaped], "anthropic"))
    assert sizes == [4]  # the first is taken alone: a live stream's chunk holds one event
