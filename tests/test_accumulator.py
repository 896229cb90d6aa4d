"""The accumulator: parts equal merge_part over their deltas, snapshots, ends, errors; a
state machine holding it to a naive model step by step; the shortcuts the fold takes
through it (text takers, final tool arguments from batched bytes, part-start depth checks)
give what the full checks give."""

from __future__ import annotations

import functools
import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from support import read, recordings, reference_depth_over

from streamfold import (
    Accumulator,
    ContentPart,
    Event,
    Message,
    MessageCompleted,
    MessageDelta,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    ProviderErrored,
    StreamLimitError,
    StreamProtocolError,
    ToolCall,
    Usage,
    UsageError,
    UsageUpdated,
    accumulator,
    fold,
    fold_message,
    is_narration,
    merge_deltas,
    merge_part,
    put_utterance,
    to_message,
    utterance,
)
from streamfold.deltas import (
    ClosePart,
    Delta,
    EndMessage,
    GrowPart,
    OpenPart,
    Repair,
    ReportError,
    SkipEvent,
    UpdateMessage,
)
from streamfold.errors import ToolArgumentsError
from streamfold.limits import Limits, json_depth_over
from streamfold.message import merge_tool_call, parse_tool_arguments
from streamfold.parts import Citation

# --- generated streams -------------------------------------------------------------------

chunk_text = st.text(max_size=6)
part_kinds = st.sampled_from(["text", "thinking", "tool_call"])


@st.composite
def streams(draw: st.DrawFn) -> list[Delta]:
    """A valid delta sequence: parts open, grow (interleaved), and close in any order."""
    n_parts = draw(st.integers(1, 4))
    kinds = [draw(part_kinds) for _ in range(n_parts)]
    script: list[Delta] = []
    open_keys: list[int] = []
    pending = list(range(n_parts))
    while pending or open_keys:
        choice = draw(st.integers(0, 2))
        if pending and (choice == 0 or not open_keys):
            key = pending.pop(0)
            kind = kinds[key]
            start: ContentPart | ToolCall
            if kind == "tool_call":
                start = ToolCall(call_id=f"c{key}", name="f", arguments="")
            else:
                start = ContentPart(type=kind, content=draw(st.none() | chunk_text))  # type: ignore[arg-type]
            script.append(OpenPart(key, start))
            open_keys.append(key)
        elif choice == 1 and open_keys:
            key = draw(st.sampled_from(open_keys))
            if kinds[key] == "tool_call":
                script.append(
                    GrowPart(key, content=draw(st.sampled_from(['{"a"', ": 1", "}", ""])))
                )
            else:
                options = draw(
                    st.dictionaries(st.sampled_from(["signature", "id"]), chunk_text, max_size=2)
                )
                script.append(GrowPart(key, content=draw(st.none() | chunk_text), options=options))
        elif open_keys:
            key = draw(st.sampled_from(open_keys))
            open_keys.remove(key)
            script.append(ClosePart(key, explicit=True))
    if draw(st.booleans()):
        script.append(UpdateMessage(status="complete", stop_reason="stop"))
    return script


def run(deltas: list[Delta], *, snapshots: bool = False) -> list[Event]:
    acc = Accumulator(provider="test")
    events: list[Event] = []
    for delta in deltas:
        events.extend(acc.apply(delta))
        if snapshots:
            acc.snapshot()
    return events + acc.close()


@settings(max_examples=200, deadline=None)
@given(streams())
def test_each_part_equals_merge_part_over_its_deltas(deltas: list[Delta]) -> None:
    events = run(deltas)
    started = {e.index: e.part for e in events if isinstance(e, PartStarted)}
    grown: dict[int, list[PartDelta]] = {}
    for e in events:
        if isinstance(e, PartDelta):
            grown.setdefault(e.index, []).append(e)
    completed = {e.index: e.part for e in events if isinstance(e, PartCompleted)}
    assert set(completed) == set(started)
    marks = {e.index: e for e in events if isinstance(e, PartMarked)}
    final = next(e.message for e in events if isinstance(e, MessageCompleted)).stream_order()
    for index, start in started.items():
        pieces = [d.as_part() for d in grown.get(index, [])]
        if isinstance(start, ContentPart):
            expected = functools.reduce(merge_part, pieces, start)  # type: ignore[arg-type]
            mark = marks.get(index)
            if mark is not None:  # the marker, with or after the part's end
                expected = put_utterance(expected, mark.utterance, inferred=not mark.explicit)
            assert final[index] == expected
        else:
            call = functools.reduce(merge_tool_call, pieces, start)  # type: ignore[arg-type]
            done = completed[index]
            assert isinstance(done, ToolCall)
            assert done.call_id == call.call_id
            if done.status == "complete":
                from streamfold.message import parse_tool_arguments

                assert done.arguments == parse_tool_arguments(None, None, call.arguments or "")
            else:
                assert done.arguments == call.arguments
                assert "arguments_error" in done.metadata


@settings(max_examples=100, deadline=None)
@given(streams())
def test_snapshots_do_not_disturb_the_fold(deltas: list[Delta]) -> None:
    assert run(deltas, snapshots=True) == run(deltas)


@settings(max_examples=100, deadline=None)
@given(streams(), st.data())
def test_snapshot_mid_stream_holds_everything_so_far(
    deltas: list[Delta], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(deltas)))
    acc = Accumulator()
    for delta in deltas[:cut]:
        acc.apply(delta)
    snap = acc.snapshot()
    final = acc.close()[-1]
    assert isinstance(final, MessageCompleted)
    # Every part seen so far is in the snapshot, in the same order, with no more text
    # than the final message has.
    assert len(snap.content) == len(final.message.content)
    for early, late in zip(snap.content, final.message.content, strict=True):
        assert (late.content or "").startswith(early.content or "")


def test_ordering_and_slot_indexes_survive_into_the_message() -> None:
    acc = Accumulator()
    acc.apply_all(
        [
            OpenPart(0, ContentPart.thinking("t", signature="s")),
            ClosePart(0),
            OpenPart(1, ToolCall(call_id="a", name="f", arguments="")),
            GrowPart(1, content='{"x": 1}'),
            ClosePart(1),
            OpenPart(2, ContentPart.text("after")),
            EndMessage(),
        ]
    )
    message = acc.snapshot()
    assert [type(x).__name__ for x in message.stream_order()] == [
        "ContentPart",
        "ToolCall",
        "ContentPart",
    ]
    assert message.tool_calls[0].index == 1
    assert message.tool_calls[0].arguments == {"x": 1}


def test_parts_open_at_the_end_close_with_inferred_end() -> None:
    acc = Accumulator()
    events = acc.apply_all([OpenPart("k", ContentPart.text("a")), GrowPart("k", content="b")])
    events += acc.apply(EndMessage())
    completed = [e for e in events if isinstance(e, PartCompleted)]
    assert [(c.part.content, c.explicit) for c in completed] == [("ab", False)]  # type: ignore[union-attr]
    # Ended normally with no tool after it: the answer.
    assert completed[0].display_items[0].content == {"text": "ab", "utterance": "answer"}


def test_input_that_ends_early_is_incomplete_and_keeps_its_parts() -> None:
    acc = Accumulator()
    acc.apply_all(
        [OpenPart(0, ContentPart.text("done")), ClosePart(0), OpenPart(1, ContentPart.text("half"))]
    )
    last = acc.close()[-1]
    assert isinstance(last, MessageCompleted)
    assert last.message.status == "incomplete"
    assert [p.content for p in last.message.content] == ["done", "half"]


def test_cancel_keeps_parts_with_status_cancelled() -> None:
    acc = Accumulator()
    acc.apply_all([OpenPart(0, ContentPart.text("so far"))])
    acc.cancel()
    snap = acc.snapshot()
    assert (snap.status, snap.stop_reason) == ("cancelled", "cancelled")
    assert snap.content[0].content == "so far"


def _ended(*deltas: Delta, end: str) -> Message:
    acc = Accumulator()
    acc.apply_all([OpenPart(0, ContentPart.text("so far")), *deltas])
    if end == "marker":
        events = acc.apply(EndMessage())
    else:
        events = acc.close() if end == "close" else acc.cancel()
    final = events[-1]
    assert isinstance(final, MessageCompleted)
    return final.message


def test_the_end_marker_is_recorded_by_how_the_message_ended() -> None:
    assert _ended(end="marker").metadata["end_marker"] is True
    assert _ended(end="close").metadata["end_marker"] is False
    assert _ended(end="cancel").metadata["end_marker"] is False
    acc = Accumulator()
    events = acc.apply(ReportError("overloaded_error", "Overloaded"))
    final = events[-1]
    assert isinstance(final, MessageCompleted) and acc.apply(EndMessage()) == []
    assert final.message.metadata["end_marker"] is False  # an error is no normal end


def test_an_end_marker_without_a_stop_reason_is_complete() -> None:
    message = _ended(end="marker")
    assert (message.status, message.stop_reason) == ("complete", None)
    assert _ended(end="close").status == "incomplete"
    # A provider's own "incomplete" comes with its reason, and the end marker keeps it.
    said = UpdateMessage(status="incomplete", stop_reason="other", raw_stop_reason="x")
    assert (_ended(said, end="marker").status, _ended(said, end="marker").stop_reason) == (
        "incomplete",
        "other",
    )
    length = UpdateMessage(status="length", stop_reason="length")
    assert _ended(length, end="marker").status == "length"


def test_provider_error_ends_the_fold_with_the_partial_message() -> None:
    acc = Accumulator()
    events = acc.apply_all(
        [
            OpenPart(0, ContentPart.text("kept")),
            ClosePart(0),
            ReportError("overloaded_error", "Overloaded", {"raw": 1}),
        ]
    )
    errored = [e for e in events if isinstance(e, ProviderErrored)]
    assert errored[0].error_type == "overloaded_error"
    assert errored[0].partial.content[0].content == "kept"
    final = events[-1]
    assert isinstance(final, MessageCompleted)
    assert final.message.status == "error"
    assert final.message.metadata["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert acc.apply(OpenPart(1, ContentPart.text("ignored"))) == []


def test_usage_updates_and_skipped_events_are_counted() -> None:
    acc = Accumulator()
    events = acc.apply_all(
        [
            UpdateMessage(usage=Usage(input_tokens=5, output_tokens=1)),
            SkipEvent("mystery"),
            SkipEvent("mystery"),
            UpdateMessage(usage=Usage(input_tokens=5, output_tokens=9, cumulative=True)),
        ]
    )
    usages = [e.usage for e in events if isinstance(e, UsageUpdated)]
    assert [u.output_tokens for u in usages] == [1, 9]
    assert acc.snapshot().metadata["skipped_events"] == {"mystery": 2}


def test_bad_tool_arguments_keep_the_raw_text() -> None:
    acc = Accumulator()
    events = acc.apply_all(
        [
            OpenPart(0, ToolCall(call_id="c", name="f", arguments="")),
            GrowPart(0, content='{"a": '),
            UpdateMessage(status="length"),
        ]
    )
    events += acc.close()
    call = next(e.part for e in events if isinstance(e, PartCompleted))
    assert isinstance(call, ToolCall)
    assert (call.status, call.arguments) == ("incomplete", '{"a": ')
    assert "'c' ('f')" in call.metadata["arguments_error"]


@pytest.mark.parametrize(
    ("deltas", "message"),
    [
        ([GrowPart(3, content="x")], "part 3, which was never started"),
        ([OpenPart(0, ContentPart.text("a")), OpenPart(0, ContentPart.text("b"))], "second start"),
        (
            [OpenPart(0, ContentPart.text("a")), ClosePart(0), GrowPart(0, content="x")],
            "already completed",
        ),
        ([ClosePart(9)], "never started"),
    ],
)
def test_protocol_errors_are_typed_in_strict_mode(deltas: list[Delta], message: str) -> None:
    acc = Accumulator(provider="test", strict=True)
    with pytest.raises(StreamProtocolError, match=message) as info:
        acc.apply_all(deltas)
    assert info.value.provider == "test"


def test_lenient_mode_drops_stray_events_and_counts_each_repair() -> None:
    acc = Accumulator()
    events = acc.apply_all(
        [
            GrowPart(3, content="stray"),
            OpenPart(0, ContentPart.text("a")),
            OpenPart(0, ContentPart.text("again")),
            GrowPart(0, content="b"),
            ClosePart(0),
            ClosePart(0),
            GrowPart(0, content="late"),
            Repair("decoder_fixed_something"),
            EndMessage(),
        ]
    )
    final = events[-1]
    assert isinstance(final, MessageCompleted)
    assert [p.content for p in final.message.content] == ["ab"]
    assert final.message.metadata["repairs"] == {
        "delta_for_unknown_part": 1,
        "duplicate_part_start": 1,
        "end_after_part_end": 1,
        "delta_after_part_end": 1,
        "decoder_fixed_something": 1,
    }


def test_limits_raise_at_once_and_the_partial_stays_readable() -> None:
    acc = Accumulator(limits=Limits(max_parts=2, max_part_chars=10, max_tool_argument_chars=5))
    acc.apply_all([OpenPart(0, ContentPart.text("0123456789")), ClosePart(0)])
    with pytest.raises(StreamLimitError, match="expected at most 5 \\(max_tool_argument_chars\\)"):
        acc.apply_all([OpenPart(1, ToolCall(call_id="c", name="f")), GrowPart(1, content="{}{}{}")])
    with pytest.raises(StreamLimitError, match="max_parts"):
        acc.apply(OpenPart(2, ContentPart.text("third")))
    with pytest.raises(StreamLimitError, match="max_part_chars"):
        Accumulator(limits=Limits(max_part_chars=3)).apply(OpenPart(0, ContentPart.text("long")))
    signature = Accumulator(limits=Limits(max_part_chars=3))
    signature.apply(OpenPart(0, ContentPart.thinking("", signature="ab")))
    with pytest.raises(StreamLimitError, match="option 'signature'"):
        signature.apply(GrowPart(0, options={"signature": "cd"}))
    assert acc.snapshot().content[0].content == "0123456789"


def test_a_call_the_stream_never_finished_stays_incomplete_even_when_empty() -> None:
    acc = Accumulator()
    acc.apply(OpenPart(0, ToolCall(call_id="c", name="f", arguments="")))
    final = acc.close()[-1]
    assert isinstance(final, MessageCompleted)
    call = final.message.tool_calls[0]
    assert (call.status, call.arguments) == ("incomplete", "")


def test_values_nested_past_the_depth_limit_are_refused() -> None:
    deep: object = None
    for _ in range(10):
        deep = [deep]
    acc = Accumulator(limits=Limits(max_depth=5))
    with pytest.raises(StreamLimitError, match="max_depth"):
        acc.apply(OpenPart(0, ContentPart(type="unsupported", options={"block": deep})))
    acc.apply(OpenPart(1, ContentPart(type="unsupported", options={"block": None})))
    with pytest.raises(StreamLimitError, match="max_depth"):
        acc.apply(ClosePart(1, final=ContentPart(type="unsupported", options={"block": deep})))
    assert acc.snapshot().content[0].options == {"block": None}  # still open, still kept
    acc.apply(OpenPart(2, ToolCall(call_id="c", name="f", arguments='{"a":' * 9 + "1" + "}" * 9)))
    call = acc.apply(ClosePart(2))[0].part  # type: ignore[union-attr]
    assert isinstance(call, ToolCall)
    assert call.status == "incomplete"
    assert "nested" in call.metadata["arguments_error"]
    with pytest.raises(StreamLimitError, match="message metadata is nested too deep"):
        acc.apply(UpdateMessage(metadata={"x": deep}))


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


# A text taker (the fold's dict lane keeps one between deltas) after its part ended.


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


# --- The per-part shortcuts give what the full checks give: depth limits, events, buffers --


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
        return reference_depth_over([part.options, [c.metadata for c in part.citations]], limit)
    return reference_depth_over([part.arguments, part.metadata], limit)


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


# --- The accumulator against a naive model, step by step ---------------------------------
#
# A Hypothesis state machine drives `Accumulator` with random neutral deltas (part starts,
# deltas, stops, usage and status updates, provider errors, ends, cancellations, strays) and
# checks after every step that its snapshot equals a model made of plain dicts and string
# concatenation, that its events follow each part's lifecycle, and that after the message
# ends nothing changes.


RANK = {"incomplete": 0, "complete": 1, "length": 2, "content_filtered": 2}


RANK |= {"cancelled": 3, "error": 3}


KEYS = st.sampled_from([0, 1, 2, "a", ("item", 0)])


TEXT = st.one_of(st.none(), st.text(max_size=4))


FRAGMENT = st.sampled_from(["{", "}", '"a"', ":", "1", " ", "[", "]", ",", '"b"', ""])


SIGNATURE = st.one_of(st.none(), st.text("AZaz09+/=", max_size=3))


@dataclass
class ModelPart:
    """The model's slot: a kind, a list of text chunks, options, and whether it ended."""

    key: Hashable
    tool: bool
    part_type: str
    call_id: str | None = None
    name: str | None = None
    text: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    done: ContentPart | ToolCall | None = None

    def grow(self, content: str | None, options: dict[str, Any]) -> None:
        if content is not None:
            self.text = (self.text or "") + content
        for key, value in options.items():
            before = self.options.get(key)
            if key == "signature" and isinstance(before, str) and isinstance(value, str):
                self.options[key] = before + value
            else:
                self.options[key] = value


def _parse(text: str) -> dict[str, Any] | None:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class AccumulatorMachine(RuleBasedStateMachine):
    """Random deltas into an Accumulator and into a model; they must agree at every step."""

    def __init__(self) -> None:
        super().__init__()
        self.acc = Accumulator(provider="test")
        self.strict = False
        self.parts: list[ModelPart] = []
        self.open: dict[Hashable, int] = {}
        self.status = "incomplete"
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.repairs = 0
        self.finished = False
        self.events: list[Event] = []
        self.frozen: Message | None = None
        self.waiting: list[int] = []  # text parts after the last tool: not marked yet

    @initialize(strict=st.booleans())
    def choose_mode(self, strict: bool) -> None:
        self.strict = strict
        self.acc = Accumulator(provider="test", strict=strict)

    # --- applying a delta ------------------------------------------------------------------

    def apply(self, delta: Any) -> list[Event]:
        events = self.acc.apply(delta)
        self.events.extend(events)
        return events

    def stray(self, delta: Any) -> None:
        """A delta for a part that is not open: strict raises, lenient drops and counts."""
        if self.strict:
            with pytest.raises(StreamProtocolError):
                self.acc.apply(delta)
        else:
            assert self.apply(delta) == []
            self.repairs += 1

    # --- rules -----------------------------------------------------------------------------

    @precondition(lambda self: not self.finished)
    @rule(key=KEYS, kind=st.sampled_from(["text", "thinking", "tool"]), text=TEXT, sig=SIGNATURE)
    def start(self, key: Hashable, kind: str, text: str | None, sig: str | None) -> None:
        if key in self.open:
            self.stray(OpenPart(key, ContentPart(type="text")))
            return
        index = len(self.parts)
        if kind == "tool":
            part: ContentPart | ToolCall = ToolCall(
                call_id=f"call_{index}", name="f", arguments=text or ""
            )
            model = ModelPart(key, True, "tool_call", f"call_{index}", "f", text or "")
        else:
            options = {} if sig is None else {"signature": sig}
            part = ContentPart(type=kind, content=text, options=options)  # type: ignore[arg-type]
            model = ModelPart(key, False, kind, text=text, options=dict(options))
        events = self.apply(OpenPart(key, part))
        # A tool marks the text before it narration; the start's text comes in a delta.
        marked = self.mark("narration") if kind == "tool" else []
        expected = [*([PartMarked] * len(marked)), PartStarted, *([PartDelta] if text else [])]
        assert [type(e) for e in events] == expected
        assert [(e.index, e.utterance) for e in events[: len(marked)]] == marked  # type: ignore[union-attr]
        started = events[len(marked)]
        assert isinstance(started, PartStarted) and started.index == index
        content = (
            started.part.arguments if isinstance(started.part, ToolCall) else started.part.content
        )
        assert not content  # never content: that is what PartDeltas are for
        if text:
            assert (events[-1].index, events[-1].content) == (index, text)  # type: ignore[union-attr]
        self.parts.append(model)
        self.open[key] = index
        if kind == "text":
            self.waiting.append(index)

    def mark(self, marker: str) -> list[tuple[int, str]]:
        """The model's inferred marking of the text parts waiting for one."""
        marked = [(index, marker) for index in self.waiting]
        for index in self.waiting:
            model = self.parts[index]
            model.options |= {"utterance": marker, "utterance_inferred": True}
            if model.done is not None:
                assert isinstance(model.done, ContentPart)
                model.done = put_utterance(model.done, marker, inferred=True)
        self.waiting = []
        return marked

    @precondition(lambda self: not self.finished)
    @rule(key=KEYS, text=TEXT, fragment=FRAGMENT, sig=SIGNATURE, meta=st.booleans())
    def grow(
        self, key: Hashable, text: str | None, fragment: str, sig: str | None, meta: bool
    ) -> None:
        if key not in self.open:
            self.stray(GrowPart(key, content=text))
            return
        index = self.open[key]
        model = self.parts[index]
        content = fragment if model.tool else text
        options: dict[str, Any] = {}
        if sig is not None:
            options["signature"] = sig
        if meta:
            options["seen"] = len(self.events)
        events = self.apply(GrowPart(key, content=content, options=options or None))
        assert len(events) == 1 and isinstance(events[0], PartDelta)
        assert (events[0].index, events[0].content) == (index, content)
        model.grow(content, options)

    @precondition(lambda self: not self.finished)
    @rule(key=KEYS, explicit=st.booleans(), replace=st.booleans())
    def stop(self, key: Hashable, explicit: bool, replace: bool) -> None:
        if key not in self.open:
            self.stray(ClosePart(key, explicit=explicit))
            return
        index = self.open.pop(key)
        model = self.parts[index]
        final: ContentPart | ToolCall | None = None
        if replace:
            final = (
                ToolCall(call_id="final", name="g", arguments={"x": 1}, status="complete")
                if model.tool
                else ContentPart(type="text", content="final")
            )
        events = self.apply(ClosePart(key, explicit=explicit, final=final))
        assert len(events) == 1 and isinstance(events[0], PartCompleted)
        assert (events[0].index, events[0].explicit) == (index, explicit)
        model.done = events[0].part
        self.check_done(model, index, final)

    @precondition(lambda self: not self.finished)
    @rule(
        status=st.sampled_from([None, "incomplete", "complete", "length", "content_filtered"]),
        counts=st.one_of(st.none(), st.tuples(st.integers(0, 9), st.integers(0, 9))),
        cumulative=st.booleans(),
    )
    def update(self, status: Any, counts: tuple[int, int] | None, cumulative: bool) -> None:
        usage = None
        if counts is not None:
            usage = Usage(
                input_tokens=counts[0],
                output_tokens=counts[1],
                raw={f"r{counts[0]}": counts[1]},
                cumulative=cumulative,
            )
        events = self.apply(UpdateMessage(status=status, stop_reason=None, usage=usage))
        if status is not None and RANK[status] >= RANK[self.status]:
            self.status = status
        if usage is None:
            assert events == []
            return
        if self.usage is None or cumulative:
            self.usage = {"in": counts[0], "out": counts[1], "raw": dict(usage.raw)}  # type: ignore[index]
        else:
            self.usage = {
                "in": self.usage["in"] + counts[0],  # type: ignore[index]
                "out": self.usage["out"] + counts[1],  # type: ignore[index]
                "raw": {**self.usage["raw"], **usage.raw},
            }
        assert len(events) == 1 and isinstance(events[0], UsageUpdated)

    @precondition(lambda self: not self.finished)
    @rule(how=st.sampled_from(["end", "close", "cancel", "error"]))
    def finish(self, how: str) -> None:
        open_before = list(self.open.values())
        if how == "end":
            events = self.apply(EndMessage())
            if self.status == "incomplete" and self.stop_reason is None:
                self.status = "complete"  # the end marker: a whole message, its reason unsaid
        elif how == "close":
            events = self.acc.close()
            self.events.extend(events)
        elif how == "cancel":
            events = self.acc.cancel()
            self.events.extend(events)
            self.status = "cancelled" if RANK[self.status] <= RANK["cancelled"] else self.status
            self.stop_reason = "cancelled"
        else:
            events = self.apply(ReportError("overloaded", "try later"))
            self.status = "error" if RANK[self.status] <= RANK["error"] else self.status
            self.stop_reason = "error"
        # The text after the last tool is the answer, unless the message was cut short, or
        # unless it holds a client tool call: then it stops with tool_use, whatever word the
        # provider used, the turn goes on and the text is narration.
        marks = [(e.index, e.utterance) for e in events if isinstance(e, PartMarked)]
        ended = self.status not in ("incomplete", "cancelled", "error")
        asks_for_tools = self.status == "complete" and any(model.tool for model in self.parts)
        if asks_for_tools and self.stop_reason is None:
            self.stop_reason = "tool_use"
        expected = self.mark("narration" if asks_for_tools else "answer") if ended else []
        assert marks == expected
        # Parts still open end now, in the order they opened, their end inferred.
        closing = [e for e in events if isinstance(e, PartCompleted)]
        assert [e.index for e in closing] == open_before
        assert all(not e.explicit for e in closing)
        for e in closing:
            self.parts[e.index].done = e.part
            self.check_done(self.parts[e.index], e.index, None, cut=how != "end")
        assert isinstance(events[-1], MessageCompleted)
        if how == "error":
            assert isinstance(events[-2], ProviderErrored)
        self.open.clear()
        self.finished = True
        self.frozen = self.acc.snapshot()
        assert events[-1].message == self.frozen
        assert self.frozen.metadata["end_marker"] is (how == "end")

    @precondition(lambda self: self.finished)
    @rule(key=KEYS, text=TEXT)
    def after_the_end(self, key: Hashable, text: str | None) -> None:
        # Anything after the end is ignored: no events, no change.
        for delta in (OpenPart(key, ContentPart(type="text")), GrowPart(key, content=text)):
            assert self.acc.apply(delta) == []
        assert self.acc.apply(UpdateMessage(status="error")) == []
        assert self.acc.apply(EndMessage()) == []
        assert self.acc.cancel() == []
        assert self.acc.close() == []

    # --- checks ----------------------------------------------------------------------------

    def check_done(self, model: ModelPart, index: int, final: Any, cut: bool = False) -> None:
        part = model.done
        if final is not None:
            expected = final.model_copy(update={"index": index}) if model.tool else final
            marker = model.options.get("utterance")
            if marker is not None:  # marked while open: kept
                expected = put_utterance(expected, marker, inferred=True)
            assert part == expected
            return
        if model.tool and cut and not (model.text or "").strip():
            # Cut before its arguments began: not "no arguments", just unfinished.
            assert isinstance(part, ToolCall)
            assert (part.status, part.arguments) == ("incomplete", model.text)
            return
        if model.tool:
            assert isinstance(part, ToolCall)
            parsed = _parse(model.text or "")
            if parsed is None:
                assert part.status == "incomplete"
                assert part.arguments == (model.text or "")
                assert "arguments_error" in part.metadata
            else:
                assert part.status == "complete"
                assert part.arguments == parsed
        else:
            assert isinstance(part, ContentPart)
            assert (part.type, part.content, part.options) == (
                model.part_type,
                model.text,
                model.options,
            )

    @invariant()
    def snapshot_matches_the_model(self) -> None:
        snap = self.acc.snapshot()
        if self.frozen is not None:
            assert snap == self.frozen
        order = snap.stream_order()
        assert len(order) == len(self.parts)
        for index, (part, model) in enumerate(zip(order, self.parts, strict=True)):
            if model.done is not None:
                assert part == model.done
            elif model.tool:
                assert isinstance(part, ToolCall)
                assert (part.call_id, part.name, part.index) == (model.call_id, model.name, index)
                assert part.arguments == model.text
                assert part.status == "incomplete"
                assert {k: v for k, v in part.metadata.items()} == model.options
            else:
                assert isinstance(part, ContentPart)
                assert (part.type, part.content, part.options) == (
                    model.part_type,
                    model.text,
                    model.options,
                )
        assert snap.status == self.status
        if self.stop_reason is not None:
            assert snap.stop_reason == self.stop_reason
        if self.usage is None:
            assert snap.usage is None
        else:
            assert snap.usage is not None
            got = {"in": snap.usage.input_tokens, "out": snap.usage.output_tokens}
            assert got | {"raw": snap.usage.raw} == self.usage
        repairs = snap.metadata.get("repairs", {})
        assert sum(repairs.values()) == self.repairs

    @invariant()
    def events_follow_each_parts_lifecycle(self) -> None:
        started: set[int] = set()
        completed: set[int] = set()
        marked: set[int] = set()  # each text part at most once
        ended = 0
        for e in self.events:
            assert not ended, "no event after MessageCompleted"
            if isinstance(e, PartStarted):
                assert e.index == len(started)
                started.add(e.index)
            elif isinstance(e, PartDelta):
                assert e.index in started and e.index not in completed
            elif isinstance(e, PartCompleted):
                assert e.index in started and e.index not in completed
                completed.add(e.index)
            elif isinstance(e, PartMarked):
                assert e.index in started and e.index not in marked
                marked.add(e.index)
            elif isinstance(e, MessageCompleted):
                ended += 1
        assert ended == int(self.finished)


TestAccumulatorMachine = AccumulatorMachine.TestCase


TestAccumulatorMachine.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --- the stop reason an agent loop reads ---------------------------------------------------


def _stopped(*deltas: Delta, end: str = "marker") -> list[Event]:
    acc = Accumulator()
    events = acc.apply_all(list(deltas))
    return events + (acc.apply(EndMessage()) if end == "marker" else acc.close())


def _call(key: Hashable, arguments: str) -> list[Delta]:
    return [
        OpenPart(key, ToolCall(call_id=f"c{key}", name="f", arguments="")),
        GrowPart(key, content=arguments),
    ]


@pytest.mark.parametrize("said", ["stop", None])
def test_a_finished_message_with_a_complete_call_stops_with_tool_use(said: str | None) -> None:
    # The call is still open when the message ends (closed by the end, not the wire), and
    # the text before it waits for its marker: the narration rule reads the settled
    # reason, so the text is narration, not the answer.
    update = UpdateMessage(status="complete", stop_reason=said, raw_stop_reason=said)  # type: ignore[arg-type]
    events = _stopped(
        OpenPart("t", ContentPart.text("Let me look.")),
        ClosePart("t"),
        *_call("k", '{"a": 1}'),
        update,
    )
    message = final_message_of(events)
    assert (message.stop_reason, message.raw_stop_reason) == ("tool_use", said)
    assert message.tool_calls[0].status == "complete"
    marked = [e for e in events if isinstance(e, PartMarked)]
    assert [(m.index, m.utterance) for m in marked] == [(0, "narration")]


def test_other_reasons_keep_what_the_provider_said() -> None:
    # A call whose text is no JSON object still asked for a tool (as "tool_calls" says).
    cut = _stopped(*_call("k", '{"a": '), UpdateMessage(status="complete", stop_reason="stop"))
    assert final_message_of(cut).stop_reason == "tool_use"
    assert "arguments_error" in final_message_of(cut).tool_calls[0].metadata
    length = UpdateMessage(status="length", stop_reason="length")
    assert final_message_of(_stopped(*_call("k", "{}"), length)).stop_reason == "length"
    pause = UpdateMessage(status="complete", stop_reason="pause")
    assert final_message_of(_stopped(*_call("k", "{}"), pause)).stop_reason == "pause"
    # Input that ran out: not a normal finish.
    assert final_message_of(_stopped(*_call("k", "{}"), end="close")).stop_reason is None


def final_message_of(events: list[Event]) -> Message:
    final = events[-1]
    assert isinstance(final, MessageCompleted)
    return final.message


def _chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


_CALL = {
    "index": 0,
    "id": "call_1",
    "type": "function",
    "function": {"name": "f", "arguments": "{}"},
}
_STOP_WITH_CALL: dict[str, list[Any]] = {
    "openai-chat": [
        _chat({"role": "assistant", "tool_calls": [_CALL]}),
        _chat({}, "stop"),
    ],
    "anthropic": [
        {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": []}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{}"},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ],
    "bedrock": [
        {"messageStart": {"role": "assistant"}},
        {
            "contentBlockStart": {
                "contentBlockIndex": 0,
                "start": {"toolUse": {"toolUseId": "t1", "name": "f"}},
            }
        },
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "end_turn"}},
    ],
    "streamfold": [
        MessageDelta(tool_calls=[ToolCall(call_id="c1", name="f", arguments="{}", index=0)]),
        MessageDelta(status="complete", stop_reason="stop", raw_stop_reason="stop"),
    ],
}


@pytest.mark.parametrize("provider", sorted(_STOP_WITH_CALL))
def test_every_provider_says_tool_use_for_a_stop_with_complete_calls(provider: str) -> None:
    message = fold_message(_STOP_WITH_CALL[provider], provider)
    assert message.status == "complete"
    assert [c.status for c in message.tool_calls] == ["complete"]
    assert message.stop_reason == "tool_use"
    assert message.raw_stop_reason in ("stop", "end_turn")


def test_merged_deltas_settle_the_stop_reason_as_a_fold_does() -> None:
    deltas = _STOP_WITH_CALL["streamfold"]
    assert to_message(merge_deltas(deltas)).stop_reason == "tool_use"


def _approval_request(key: Hashable, request_id: str) -> list[Delta]:
    block = {"type": "mcp_approval_request", "id": request_id, "name": "ask", "arguments": "{}"}
    options = {"type": "mcp_approval_request", "id": request_id, "block": block}
    return [OpenPart(key, ContentPart(type="unsupported", options=options), True), ClosePart(key)]


def test_a_turn_waiting_for_an_approval_stops_with_approval_and_is_narration() -> None:
    # Text after the request too: the turn goes on once the caller answers, so none of
    # its text is the answer.
    events = _stopped(
        OpenPart("t", ContentPart.text("I'll ask.")),
        ClosePart("t"),
        *_approval_request("r", "mcpr_1"),
        OpenPart("u", ContentPart.text("Waiting for your approval.")),
        ClosePart("u"),
        UpdateMessage(status="complete", stop_reason="stop", raw_stop_reason="completed"),
    )
    message = final_message_of(events)
    assert (message.stop_reason, message.raw_stop_reason) == ("approval", "completed")
    assert [utterance(p) for p in message.content if p.type == "text"] == ["narration"] * 2
    assert is_narration(message)


def test_an_approval_answered_in_the_turn_leaves_the_stop_reason() -> None:
    call = {"type": "mcp_call", "id": "mcp_1", "approval_request_id": "mcpr_1", "output": "x"}
    answered = OpenPart(
        "c", ContentPart(type="unsupported", options={"type": "mcp_call", "block": call}), True
    )
    stop = UpdateMessage(status="complete", stop_reason="stop")
    events = _stopped(*_approval_request("r", "mcpr_1"), answered, ClosePart("c"), stop)
    assert final_message_of(events).stop_reason == "stop"
    # A client call as well: tool_use, what the loop must do first.
    events = _stopped(*_approval_request("r", "mcpr_2"), *_call("k", "{}"), stop)
    assert final_message_of(events).stop_reason == "tool_use"
