"""`fold()` over decoded dicts (its one-loop lane) equals feeding them one by one.

The reference is `StreamFolder.feed()` chunk by chunk, then `close()`: the path every
other input takes. Streams are real recordings decoded to dicts, with events dropped,
repeated and broken, strict and lenient, with tight limits; the events, the error (type,
text, attributes) and the final snapshot must be the same.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import jiter
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import fold_outcome, read, recordings

from streamfold import (
    ContentPart,
    StreamFolder,
    StreamfoldError,
    UsageError,
    accumulator,
    providers,
)
from streamfold.accumulator import Accumulator
from streamfold.deltas import ClosePart, Delta, EndMessage, GrowPart, OpenPart
from streamfold.limits import Limits
from streamfold.providers.base import Decoder


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


def test_a_taker_kept_past_its_part_end_is_refused_before_it_writes() -> None:
    """The fold keeps a part's taker between lane deltas; one used after the part was
    completed must not write into the buffers completed parts share."""
    acc = Accumulator()
    acc.apply(OpenPart("k", ContentPart(type="text", content="")))
    slot = acc.text_slot("k")
    assert slot is not None
    assert slot.take_text("a").content == "a"
    acc.apply(ClosePart("k"))
    assert acc.text_slot("k") is None
    with pytest.raises(UsageError, match="part 0, which is complete"):
        slot.take_text("b")
    assert accumulator._RELEASED_CHUNKS == []
    assert acc.snapshot().content[0].content == "a"
