"""The per-part shortcuts give what the full checks give: depth limits, events, errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import read, recordings

from streamfold import accumulator, fold
from streamfold._model import json_depth_over
from streamfold.accumulator import Accumulator
from streamfold.deltas import ClosePart, GrowPart, OpenPart
from streamfold.errors import StreamLimitError
from streamfold.events import PartCompleted, PartStarted
from streamfold.limits import Limits
from streamfold.message import ToolCall
from streamfold.parts import Citation, ContentPart


def _reference_depth_over(value: object, limit: int) -> int | None:
    """json_depth_over as it was written before the per-part work (a generator walk)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return depth
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return None


_VALUES: list[object] = [
    None,
    "x",
    {},
    [],
    (),
    {"a": 1},
    [{}, []],
    {"a": {"b": [1, 2, {"c": 3}]}, "d": "x"},
    [[[[]]], {"k": ({"t": [1]},)}],
    ({"a": [1]}, [2]),
]


@pytest.mark.parametrize("value", _VALUES)
@pytest.mark.parametrize("limit", [0, 1, 2, 3, 4, 128])
def test_json_depth_over_matches_the_reference(value: object, limit: int) -> None:
    assert json_depth_over(value, limit) == _reference_depth_over(value, limit)


class _Dict(dict[str, Any]):
    """A dict subclass: a container to the walk, not an exact JSON type."""


_NESTED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=2),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=2), inner, max_size=3)
        | st.dictionaries(st.text(max_size=2), inner, max_size=2).map(_Dict)
    ),
    max_leaves=15,
)


@settings(max_examples=500, deadline=None)
@given(value=_NESTED, limit=st.integers(0, 6))
def test_json_depth_over_matches_the_reference_for_any_value(value: object, limit: int) -> None:
    # The quick answer for values at most two deep must never differ from the walk.
    assert json_depth_over(value, limit) == _reference_depth_over(value, limit)


_PARTS: list[ContentPart | ToolCall] = [
    ContentPart(type="text", content=""),
    ContentPart(type="thinking", content="", options={"signature": "s"}),
    ContentPart(type="text", content="", options={"nested": {"a": [1]}}),
    ContentPart(type="text", content="", options={"list": []}),
    ContentPart(type="text", content="", citations=[Citation()]),
    ContentPart(type="text", content="", citations=[Citation(metadata={"raw": {"a": 1}})]),
    ToolCall(call_id="c", name="f", arguments=""),
    ToolCall(call_id="c", name="f", arguments="", metadata={"caller": "x"}),
    ToolCall(call_id="c", name="f", arguments="", metadata={"caller": {"type": "direct"}}),
    ToolCall(call_id="c", name="f", arguments={"a": 1}, status="complete"),
    ToolCall(call_id="c", name="f", arguments=None),
]


def _reference_check(part: ContentPart | ToolCall, limit: int) -> int | None:
    if isinstance(part, ContentPart):
        return _reference_depth_over([part.options, [c.metadata for c in part.citations]], limit)
    return _reference_depth_over([part.arguments, part.metadata], limit)


@pytest.mark.parametrize("part", _PARTS)
@pytest.mark.parametrize("limit", [0, 1, 2, 3, 4, 128])
def test_part_start_depth_check_matches_the_full_walk(
    part: ContentPart | ToolCall, limit: int
) -> None:
    acc = Accumulator(limits=Limits(max_depth=limit))
    depth = _reference_check(part, limit)
    if depth is None:
        events = acc.apply(OpenPart(0, part))
        assert isinstance(events[0], PartStarted)
        completed = acc.apply(ClosePart(0, True, part))
        assert isinstance(completed[0], PartCompleted)
        return
    expected = StreamLimitError("max_depth", limit, depth, "the start of part 0 is nested too deep")
    with pytest.raises(StreamLimitError) as caught:
        acc.apply(OpenPart(0, part))
    assert str(caught.value) == str(expected)


def _anthropic(kind: str) -> list[dict[str, Any]]:
    block: dict[str, Any] = {
        "text": {"type": "text", "text": ""},
        "thinking": {"type": "thinking", "thinking": ""},
        "tool": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
    }[kind]
    return [
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
    ]


@pytest.mark.parametrize("kind", ["text", "thinking", "tool"])
@pytest.mark.parametrize(
    ("limit", "refused"),
    # 0: message_start's metadata (a dict, depth 1) is refused before any part starts.
    [
        (0, "message metadata is nested too deep"),
        (1, "the start of part 0 is nested too deep"),
        (2, None),
    ],
)
def test_tiny_max_depth_still_refuses_a_part_start(
    kind: str, limit: int, refused: str | None
) -> None:
    # Every part start is checked as [options, citations] / [arguments, metadata]: depth 2.
    if refused is None:
        events = list(fold(_anthropic(kind), "anthropic", limits=Limits(max_depth=limit)))
        assert events[-1].type == "message_completed"
        return
    with pytest.raises(StreamLimitError, match=refused):
        list(fold(_anthropic(kind), "anthropic", limits=Limits(max_depth=limit)))


def test_part_events_are_the_named_tuples_they_were() -> None:
    events = list(fold(_anthropic("text"), "anthropic"))
    started = next(e for e in events if isinstance(e, PartStarted))
    completed = next(e for e in events if isinstance(e, PartCompleted))
    assert started == PartStarted(index=0, part=started.part)
    assert started.type == "part_started"
    assert completed == PartCompleted(
        index=0, part=completed.part, display_items=completed.display_items, explicit=True
    )
    assert completed.type == "part_completed"


def test_shared_empty_buffers_stay_empty_after_real_folds() -> None:
    """Completed slots share one empty chunk list and option map, and a slot shares one
    empty citation list until its first citation: none may ever be written to (a write
    would leak into every other fold)."""
    for rel in recordings("anthropic", "openai-responses", "gemini", "perplexity"):
        list(fold([read(rel)]))
    assert accumulator._RELEASED_CHUNKS == []
    assert accumulator._RELEASED_STREAMED == {}
    assert accumulator._NO_CITATIONS == []


def test_a_completed_part_keeps_no_growth_buffers() -> None:
    acc = Accumulator(provider="test")
    acc.apply(OpenPart("k", ContentPart(type="text", content="")))
    acc.apply(GrowPart("k", content="see "))
    acc.apply(GrowPart("k", citations=(Citation(cited_text="x", start_index=0, end_index=1),)))
    [done] = acc.apply(ClosePart("k"))
    slot = acc._slots[0]
    assert slot.start is done.part and slot.chunks == [] and slot.streamed == {}
    assert done.part.content == "see " and len(done.part.citations) == 1
    assert acc.snapshot().content == [done.part]
