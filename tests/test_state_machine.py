"""The accumulator against a naive model, step by step; and cancellation of `afold`.

A Hypothesis state machine drives `Accumulator` with random neutral deltas (part starts,
deltas, stops, usage and status updates, provider errors, ends, cancellations, strays) and
checks after every step that its snapshot equals a model made of plain dicts and string
concatenation, that its events follow each part's lifecycle, and that after the message
ends nothing changes. Then `afold` is cancelled at every await point (while it waits for
input, while the consumer holds an event, between chunks of a sync source) on asyncio and
on trio, and the snapshot must keep every part received, marked cancelled.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
import trio
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from reliability.test_truncation import check_open_part, reference
from support import read, without_inferred_marker

from streamfold import (
    ContentPart,
    Message,
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    ProviderErrored,
    StreamProtocolError,
    ToolCall,
    Usage,
    UsageUpdated,
    afold,
    fold,
    put_utterance,
    utterance,
)
from streamfold.accumulator import Accumulator
from streamfold.deltas import (
    ClosePart,
    EndMessage,
    GrowPart,
    OpenPart,
    ReportError,
    UpdateMessage,
)
from streamfold.events import Event
from streamfold.fold import StreamFolder

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
        # The text after the last tool is the answer, unless the message was cut short.
        marks = [(e.index, e.utterance) for e in events if isinstance(e, PartMarked)]
        ended = self.status not in ("incomplete", "cancelled", "error")
        assert marks == (self.mark("answer") if ended else [])
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


# --- cancelling afold at every await point, on asyncio and on trio --------------------------

CANCEL_RECORDINGS = [
    "anthropic/thinking-then-tool-use.sse",
    "anthropic/text-then-tool-use-no-args.sse",
    "openai-chat/tool-calls-parallel.sse",
    "openai-responses/custom-tool-call.sse",
    "gemini/function-call-streamed-args.sse",
    "bedrock/text-then-tool-use-nova.eventstream",
    "ollama/generate-gpt-oss-thinking.ndjson",
]
CHUNK = 23  # bytes per chunk: many chunks per event, and events split across chunks


async def chunks(data: bytes, size: int = CHUNK) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        await anyio.sleep(0)  # an await point between chunks
        yield data[start : start + size]


@dataclass
class Cancelled:
    received: list[Event]
    snapshot: Message
    finished_before: bool  # the fold had already folded the end when the cancel landed


async def cancel_after(data: bytes, k: int, where: str) -> Cancelled:
    """Fold `data`; after the consumer got `k` events, cancel at the given await point."""
    received: list[Event] = []
    finished_before = False
    source: Any = (
        chunks(data)
        if where != "sync-source"
        else [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    )
    async with afold(source) as stream:
        with anyio.CancelScope() as scope:
            async for event in stream:
                received.append(event)
                if len(received) == k:
                    finished_before = stream.folder.finished
                    scope.cancel()
                    if where == "consumer":
                        # The cancellation lands here, in the consumer, with the fold
                        # suspended at a yield: leaving `async with` closes it.
                        await anyio.sleep(0)
                    # Otherwise it lands on the fold's next await: waiting for input.
    return Cancelled(received, stream.snapshot(), finished_before)


def check_cancelled(rel: str, k: int, where: str, result: Cancelled) -> None:
    ref = reference(rel)
    snap = result.snapshot
    label = f"{rel}: cancelled {where} after {k} events"
    if result.finished_before or snap.status != "cancelled":
        # The fold had folded the end already, or reached it with no await left for the
        # cancellation to land on (a Gemini stream ends when its input does): it is whole.
        assert snap == ref.final, label
        return
    assert snap.status == "cancelled", label
    assert snap.stop_reason == "cancelled", label
    received = {e.index: e.part for e in result.received if isinstance(e, PartCompleted)}
    started = {e.index for e in result.received if isinstance(e, PartStarted)}
    order = snap.stream_order()
    wholes = ref.final.stream_order()
    assert len(started) <= len(order) <= len(wholes), label
    for index, part in enumerate(order):
        here = f"{label}, slot {index}"
        if index in received:
            # The same part; its marker may have come after (or, cut, never).
            bare = without_inferred_marker
            assert bare(part) == bare(received[index]) == bare(wholes[index]), here
            if isinstance(part, ContentPart):
                assert utterance(part) in (None, utterance(wholes[index])), here  # type: ignore[arg-type]
        elif part != wholes[index]:
            # Open when cancelled: closed as it stood, a prefix of what its events carried.
            check_open_part(part, wholes[index], ref.streamed[index], here)


def run_all_cuts(rel: str, backend: str) -> int:
    """Cancel at every k and every await point; return how many runs were checked."""
    data = read(rel)
    total = len(list(fold([data])))
    # Every k for a short stream; about 40 spread over a long one (each run folds anew).
    ks = sorted({*range(1, min(total, 12)), *range(1, total, max(1, total // 40))})
    runs = 0

    async def main() -> None:
        nonlocal runs
        for k in ks:
            for where in ("source", "consumer", "sync-source"):
                result = await cancel_after(data, k, where)
                if k > len(result.received):
                    continue  # the stream had fewer events than k
                check_cancelled(rel, k, where, result)
                runs += 1

    if backend == "asyncio":
        asyncio.run(main())
    else:
        trio.run(main)
    return runs


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("rel", CANCEL_RECORDINGS)
def test_cancel_afold_at_every_await_point(rel: str, backend: str) -> None:
    assert run_all_cuts(rel, backend) > 0


@pytest.mark.parametrize(
    "rel",
    [
        "anthropic/compaction.sse",
        "anthropic/web-search-citations.sse",
        "openai-responses/custom-tool-call.sse",
        "bedrock/server-tool-code-execution-nova2.eventstream",
    ],
)
def test_cancel_keeps_what_a_cut_keeps(rel: str) -> None:
    # Cancelled or cut at the same event boundary, a fold has received the same bytes, so
    # it must hold the same parts (only the status differs). Today cancel drops what the
    # decoder buffers: Anthropic compaction text and streamed server-tool input, Bedrock
    # server-tool input, Responses custom-tool input (parsed as JSON instead).
    data = read(rel)
    ref = reference(rel)
    for step in ref.steps:
        if step.finished:
            break
        cut, cancelled = StreamFolder(ref.provider), StreamFolder(ref.provider)
        cut.feed(data[: step.offset])
        cut.close()
        cancelled.feed(data[: step.offset])
        cancelled.cancel()
        where = f"{rel} at byte {step.offset}"
        assert cancelled.snapshot().stream_order() == cut.snapshot().stream_order(), where
