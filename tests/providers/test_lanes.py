"""The decoders' lanes against their full paths, for every provider that has them.

The SSE hot lane (Anthropic, Chat, Responses) reads the common delta events straight from
the bytes; the fast paths (object_text, the Responses readers) read decoded payloads before
the full checks. Each stream here is folded with and without them: every recording, in
pieces of every size; generated streams; and, for the hot lane, a byte-level fuzz: real
recordings and generated streams get random byte edits (a flipped byte, a byte removed,
one of the bytes JSON and SSE care about inserted), anywhere, including inside the events
the lane reads straight from their bytes. Whatever the edit makes of the stream, the fold
with the lane must give the same events, error and message as without it.
`STREAMFOLD_FUZZ_EXAMPLES` raises the number of fuzz examples for a long local run. The
event pools that build look-alikes by hand are with each provider's decoder tests.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import (
    INDEX,
    RESPONSES_DELTA_FAMILY,
    DeltaShape,
    assert_fast_same,
    assert_hot_lane_same,
    chat_delta_kind,
    chat_shapes,
    decoded_payloads,
    read,
    recordings,
    reshape_chat_sse,
    reshape_responses,
    responses_delta_shapes,
    split_at,
    sse_payloads,
)

from streamfold import fold
from streamfold.limits import Limits
from streamfold.providers.openai_responses import OpenAIResponsesDecoder

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.generate import generate
from streamfold.providers.openai_chat import OpenAIChatDecoder


def _generated(provider: str, workload: str) -> bytes:
    return generate(provider, workload, 60).sse


_STREAMS: list[tuple[str, bytes]] = [
    ("anthropic", read("anthropic/thinking-signature.sse")),
    ("anthropic", read("anthropic/web-search-citations.sse")),
    ("anthropic", _generated("anthropic", "mixed")),
    ("openai-chat", read("openai-chat/tool-calls-parallel-interleaved-args.sse")),
    ("openai-chat", read("openai-chat/text-long-nano.sse")),
    ("openai-chat", _generated("openai-chat", "mixed")),
    ("openai-chat", read("deepseek/reasoner-reasoning-content.sse")),
    # Layouts with fields repeated in every chunk: Snowflake's, Writer's, Perplexity's.
    *(
        ("openai-chat", reshape_chat_sse(_generated("openai-chat", "mixed"), template, 8))
        for name, template in chat_shapes().items()
        if name in ("snowflake text", "writer text", "perplexity search text")
    ),
    ("openai-responses", read("openai-responses/reasoning-summary.sse")),
    ("openai-responses", read("openai-responses/function-call-reasoning-usage.sse")),
    ("openai-responses", _generated("openai-responses", "mixed")),
]

# Every Responses delta shape the recordings hold (another key order, no sequence number,
# no padding, no event line, logprobs, ...), found by reading them.
_SHAPES = responses_delta_shapes()
_SHAPE_IDS = [shape.name for shape in _SHAPES]
# The Responses recordings of every server (xAI, DeepSeek, OpenRouter, Azure, OpenAI).
_RESPONSES_RECORDINGS = sorted(e["file"] for e in INDEX if e.get("api") == "responses")

# The generated stream re-written onto each shape: in the byte fuzz too.
_STREAMS += [
    ("openai-responses", reshape_responses(_generated("openai-responses", "mixed"), shape))
    for shape in _SHAPES
]

# Bytes that matter to JSON and SSE, and two that are not UTF-8 or not allowed raw.
_INTERESTING = b'"\\}{],:\n\r 0159-.eE\x00\x1f\x7f\xc3\xff'

_EDIT = st.tuples(
    st.floats(0, 1, exclude_max=True),  # where, as a fraction of the stream
    st.sampled_from(["flip", "delete", "insert"]),
    st.integers(0, 255),
    st.sampled_from(list(_INTERESTING)),
)

_EXAMPLES = int(os.environ.get("STREAMFOLD_FUZZ_EXAMPLES", "300"))


def _mutate(data: bytes, edits: list[tuple[float, str, int, int]]) -> bytes:
    buf = bytearray(data)
    for where, kind, value, interesting in edits:
        at = int(where * len(buf))
        if kind == "flip" and buf:
            buf[at] = value
        elif kind == "delete" and buf:
            del buf[at]
        else:
            buf.insert(at, interesting)
    return bytes(buf)


@pytest.mark.usefixtures("lane_from_the_first_event")
@settings(
    max_examples=_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    stream=st.sampled_from(range(len(_STREAMS))),
    edits=st.lists(_EDIT, min_size=1, max_size=3),
    cuts=st.lists(st.integers(0, 20_000), max_size=4),
    named=st.booleans(),
    strict=st.booleans(),
)
def test_a_mutated_stream_folds_the_same_with_the_hot_lane(
    stream: int,
    edits: list[tuple[float, str, int, int]],
    cuts: list[int],
    named: bool,
    strict: bool,
) -> None:
    provider, data = _STREAMS[stream]
    mutated = _mutate(data, edits)
    assert_hot_lane_same(split_at(mutated, cuts), provider if named else None, strict=strict)


# Every recording of the providers with an SSE hot lane, in pieces of every size and one
# event per piece: the same with the lane as without.


@pytest.mark.usefixtures("lane_from_the_first_event")
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


# The decoders' fast paths (object_text, the Responses _FAST readers) against their full
# paths: every recording and generated streams, the same events and error.


@pytest.mark.parametrize("rel", recordings())
@pytest.mark.parametrize("strict", [False, True])
def test_recordings_fast_equals_full(rel: str, strict: bool) -> None:
    assert_fast_same([read(rel)], None, strict=strict)


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses"])
@pytest.mark.parametrize("workload", ["mixed", "bigargs"])
def test_generated_fast_equals_full(provider: str, workload: str) -> None:
    stream = generate(provider, workload, 300)
    assert_fast_same([stream.sse], provider)
    assert_fast_same(list(stream.dicts), provider)


# Every Responses delta shape: the lane gives what the full path gives, and takes the
# deltas written in it (all but those carrying logprobs, the full path's by design).


def _live(data: bytes) -> list[bytes]:
    return [piece for piece in re.split(rb"(?<=\n\n)", data) if piece]


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("rel", _RESPONSES_RECORDINGS)
def test_responses_recordings_of_every_server_hot_lane_equals_full_path(rel: str) -> None:
    data = read(rel).replace(b"\r\n", b"\n")
    for size in (7, 61, 4096):
        assert_hot_lane_same([data[at : at + size] for at in range(0, len(data), size)], None)
    assert_hot_lane_same(_live(data), "openai-responses")
    assert_hot_lane_same([data], None, strict=True)


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("shape", _SHAPES, ids=_SHAPE_IDS)
@pytest.mark.parametrize("workload", ["mixed", "bigargs"])
def test_every_responses_shape_hot_lane_equals_full_path(shape: DeltaShape, workload: str) -> None:
    data = reshape_responses(generate("openai-responses", workload, 200).sse, shape)
    for size in (97, 4096, 65536):
        assert_hot_lane_same([data[at : at + size] for at in range(0, len(data), size)], None)
    assert_hot_lane_same(_live(data), "openai-responses")
    assert_hot_lane_same([data], "openai-responses", strict=True)
    # Limits passed in the middle of a run, live arguments.
    small = Limits(max_part_chars=400, max_tool_argument_chars=120)
    assert_hot_lane_same([data], "openai-responses", limits=small)
    assert_hot_lane_same([data], "openai-responses", limits=small, strict=True)
    assert_hot_lane_same([data], "openai-responses", partial_arguments=True)


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("shape", [s for s in _SHAPES if not s.logprobs], ids=lambda s: s.name)
def test_hot_lane_takes_every_responses_shape(
    shape: DeltaShape, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not vacuous: live, every delta event of every shape is the lane's (decode() sees
    none of them); in 64 KiB pieces, at most the one each piece cuts."""
    data = reshape_responses(generate("openai-responses", "mixed", 2000).sse, shape)
    deltas = sum(data.count(b'"type":"' + kind.encode() + b'"') for kind in RESPONSES_DELTA_FAMILY)
    decoded = decoded_payloads(monkeypatch, OpenAIResponsesDecoder)
    list(fold(_live(data), "openai-responses"))
    assert deltas >= 2000
    assert not [p for p in decoded if p.get("type") in RESPONSES_DELTA_FAMILY]
    assert decoded  # the other events are still decode()'s
    decoded.clear()
    pieces = [data[at : at + 65536] for at in range(0, len(data), 65536)]
    list(fold(pieces, "openai-responses"))
    assert len([p for p in decoded if p.get("type") in RESPONSES_DELTA_FAMILY]) <= len(pieces)


# Every Chat delta shape (each layout found in the recordings, and the built ones of
# servers not recorded), re-written onto generated streams, with thinking first or none.

_SHAPES = chat_shapes()
_SHAPE_STREAM = generate("openai-chat", "mixed", 150).sse


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("shape", list(_SHAPES))
@pytest.mark.parametrize("thinking", [0, 20])
def test_every_chat_shape_folds_the_same_with_the_lanes(shape: str, thinking: int) -> None:
    data = reshape_chat_sse(_SHAPE_STREAM, _SHAPES[shape], thinking)
    for size in (61, 4096, 65536):
        pieces = [data[at : at + size] for at in range(0, len(data), size)]
        assert_hot_lane_same(pieces, "openai-chat")
    events = [piece for piece in re.split(rb"(?<=\n\n)", data) if piece]
    assert_hot_lane_same(events, None)
    assert_hot_lane_same([data], "openai-chat", strict=True)
    assert_hot_lane_same([data[:3000], data[3000:]], "openai-chat", partial_arguments=True)
    assert_fast_same([data], "openai-chat")
    assert_fast_same(sse_payloads(data), "openai-chat")
    assert_fast_same(sse_payloads(data), "openai-chat", strict=True)


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("shape", list(_SHAPES))
def test_the_lanes_take_the_deltas_of_every_chat_shape(
    monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """Not vacuous: whatever the layout, decode() sees the chunks that open or end
    something, and few of the plain deltas (those before a shape is learned), as SSE in
    pieces, one event per piece, and as decoded dicts."""
    data = reshape_chat_sse(_SHAPE_STREAM, _SHAPES[shape], 20)
    payloads = sse_payloads(data)
    plain = sum(chat_delta_kind(payload) is not None for payload in payloads)
    other = len(payloads) - plain
    assert plain > 100
    decoded = decoded_payloads(monkeypatch, OpenAIChatDecoder)
    live = [piece for piece in re.split(rb"(?<=\n\n)", data) if piece]
    for pieces in ([data[at : at + 65536] for at in range(0, len(data), 65536)], live, payloads):
        decoded.clear()
        list(fold(pieces, "openai-chat"))
        # A shape is learned from its second chunk; each call (3) and the thinking and
        # the text learn theirs, and the text's once more as a chunk of a call ends it.
        assert len(decoded) - other <= 14, [chat_delta_kind(p) for p in decoded]
