"""A stream cut short: every event boundary of every recording, and offsets inside events.

A cut at an event boundary (SSE: after a blank line; NDJSON: after a line; eventstream:
after a message) is folded from scratch and compared with a reference: one StreamFolder
fed the same events piece by piece, observed after each piece. The cut fold must
- raise nothing;
- if the end event was already in the prefix (the wire said the message is over: the
  reference finished), equal the whole stream's final Message exactly;
- otherwise have the status the stream had reached (the reference snapshot's status:
  `incomplete` until a stop reason arrived; a provider that reports its stop reason
  before its end event, such as Anthropic's message_delta or a Chat finish_reason chunk,
  has reached complete / length / ... already, and a cut after it keeps that status);
- hold exactly the parts started before the cut, every part completed before the cut
  equal to the same part of the whole fold, and every part still open a prefix of the
  whole fold's part (content text, tool-call argument text).
A cut inside an event lands between two boundaries: the fold sits between the two
references and never raises.
"""

from __future__ import annotations

import bisect
import re
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ALL_RECORDINGS, read, without_inferred_marker

from streamfold import (
    ContentPart,
    Message,
    MessageCompleted,
    NoEventsError,
    PartCompleted,
    PartDelta,
    PartStarted,
    ToolCall,
    fold,
    utterance,
)
from streamfold.events import Event
from streamfold.fold import StreamFolder

ALL = ALL_RECORDINGS

_BLANK = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)")


def boundaries(rel: str) -> list[int]:
    """Byte offsets where an event ends (0 and the stream's end included)."""
    data = read(rel)
    if rel.endswith(".eventstream"):
        offsets, at = [0], 0
        while at < len(data):
            at += struct.unpack_from(">I", data, at)[0]
            offsets.append(at)
    elif rel.endswith(".ndjson"):
        offsets = [0, *(m.end() for m in re.finditer(rb"\n", data))]
    else:
        offsets = [0, *(m.end() for m in _BLANK.finditer(data))]
    if offsets[-1] != len(data):
        offsets.append(len(data))
    return offsets


@dataclass
class Step:
    """The reference fold after the stream's first `offset` bytes."""

    offset: int
    started: int  # parts started so far
    completed: dict[int, ContentPart | ToolCall]
    status: str
    finished: bool


@dataclass
class Reference:
    provider: str
    final: Message
    steps: list[Step]
    streamed: dict[int, str]  # per slot: the text (argument text) its events carried


@cache
def reference(rel: str) -> Reference:
    """Feed the recording event by event into one folder; record what it holds after each."""
    data = read(rel)
    folder = StreamFolder()
    events: list[Event] = []
    steps: list[Step] = []
    started = 0
    completed: dict[int, ContentPart | ToolCall] = {}
    offsets = boundaries(rel)
    for a, b in zip([0, *offsets], offsets, strict=False):
        for ev in folder.feed(data[a:b]) if b > a else []:
            events.append(ev)
            if isinstance(ev, PartStarted):
                started += 1
            elif isinstance(ev, PartCompleted):
                completed[ev.index] = ev.part
        status = folder.snapshot().status
        steps.append(Step(b, started, dict(completed), status, folder.finished))
    events.extend(folder.close())
    final = events[-1]
    assert isinstance(final, MessageCompleted)
    streamed: dict[int, list[str]] = {}
    for ev in events:
        if isinstance(ev, PartStarted):
            start = ev.part.arguments if isinstance(ev.part, ToolCall) else ev.part.content
            streamed[ev.index] = [start] if isinstance(start, str) else []
        elif isinstance(ev, PartDelta) and ev.content is not None:
            streamed[ev.index].append(ev.content)
    provider = final.message.metadata["provider"]
    assert isinstance(provider, str)
    texts = {i: "".join(chunks) for i, chunks in streamed.items()}
    return Reference(provider, final.message, steps, texts)


def fold_prefix(data: bytes, provider: str | None) -> Message:
    try:
        events = list(fold([data], provider))
    except NoEventsError as exc:
        # Cut before its first event: an error, not a silent empty message; the message
        # it holds is the one a cut keeps (nothing).
        assert exc.partial is not None and exc.partial.stream_order() == []
        return exc.partial
    last = events[-1]
    assert isinstance(last, MessageCompleted)
    return last.message


def check_open_part(part: ContentPart | ToolCall, whole: Any, streamed: str, where: str) -> None:
    """A part the cut left open: the same kind as the whole one, its text a prefix of the
    text its events streamed (not of the whole part's: a built-in Responses item streams
    its code, then its final item replaces it)."""
    assert type(part) is type(whole), where
    if isinstance(part, ToolCall):
        assert isinstance(whole, ToolCall)
        assert (part.call_id, part.name) == (whole.call_id, whole.name), where
        arguments = part.arguments
        if part.metadata.get("type") == "custom_tool_call" and isinstance(arguments, dict):
            arguments = arguments.get("input")  # free text, carried as {"input": text}
        if part.status == "complete":
            # Arguments that parse are a closed JSON object: nothing could follow them.
            assert part.arguments == whole.arguments, where
        else:
            assert isinstance(arguments, str), where
            assert streamed.startswith(arguments), where
    else:
        assert part.type == whole.type, where
        assert streamed.startswith(part.content or ""), where


def check_cut(message: Message, ref: Reference, before: Step, after: Step, where: str) -> None:
    """The fold of a cut stream sits between the reference steps around the cut."""
    if before.finished:
        assert message == ref.final, where
        return
    order = message.stream_order()
    assert before.started <= len(order) <= after.started, where
    assert message.status in (before.status, after.status), where
    wholes = ref.final.stream_order()
    for index, part in enumerate(order):
        here = f"{where}, slot {index}"
        if index in before.completed:
            # The same part; its marker may come later (a tool, the end) or, cut, never.
            bare = without_inferred_marker
            assert bare(part) == bare(before.completed[index]) == bare(wholes[index]), here
            if isinstance(part, ContentPart):
                assert utterance(part) in (None, utterance(wholes[index])), here
        elif index in after.completed and part == after.completed[index]:
            continue  # the cut event was whole after all (an SSE event missing its blank line)
        else:
            check_open_part(part, wholes[index], ref.streamed[index], here)


@pytest.mark.parametrize("rel", ALL)
def test_cut_at_every_event_boundary(rel: str) -> None:
    ref = reference(rel)
    data = read(rel)
    assert fold_prefix(data, ref.provider) == ref.final
    for step in ref.steps:
        message = fold_prefix(data[: step.offset], ref.provider)
        where = f"{rel} cut at byte {step.offset}"
        check_cut(message, ref, step, step, where)
        if not step.finished:
            assert message.status == step.status, where
            assert len(message.stream_order()) == step.started, where


# Which event gives a cut stream its status. Where the end event itself carries the stop
# (Anthropic's stop_reason is held from message_delta until message_stop; Responses'
# response.completed; Ollama's done line), a stream cut before it is incomplete. Where the
# stop reason comes first (a Chat finish_reason chunk, then the usage chunk and [DONE];
# Bedrock's messageStop, then metadata; Gemini's finishReason, with no end event after it),
# a stream cut after it keeps the final status.
END_CARRIES_STATUS = {"anthropic", "openai-responses", "ollama"}
STOP_BEFORE_END = {"openai-chat", "bedrock", "gemini"}


@pytest.mark.parametrize("rel", ALL)
def test_which_event_gives_a_cut_stream_its_status(rel: str) -> None:
    ref = reference(rel)
    reached = [s for s in ref.steps if s.status != "incomplete" and not s.finished]
    assert ref.provider in END_CARRIES_STATUS | STOP_BEFORE_END
    if ref.provider in END_CARRIES_STATUS:
        assert reached == [], "a cut before the end event must read incomplete"
    for step in reached:
        # A stop reason before the end event is already the final status, unless the
        # provider reports an error after it (openrouter/error-finish-length: length, then
        # an error chunk).
        assert step.status == ref.final.status or ref.final.status == "error"
    seen = False
    for step in ref.steps:  # once reached, the status stays
        seen = seen or step.status != "incomplete"
        assert (step.status != "incomplete") == seen


@pytest.mark.parametrize(
    "stream",
    [
        b'data: {"type":"message_start","message":{"id":"m","model":"x","role":"assistant"}}'
        b'\n\ndata: {"type":"content_block_start","index":0,"content_block":'
        b'{"type":"tool_use","id":"t1","name":"delete_files","input":{}}}\n\n',
        b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        b'{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":'
        b'{"name":"delete_files","arguments":""}}]}}]}\n\n',
    ],
    ids=["anthropic", "openai-chat"],
)
def test_a_call_cut_before_its_arguments_reads_incomplete(stream: bytes) -> None:
    # The stream was cut right after the call started: nothing says it takes no arguments,
    # yet it reads status complete with arguments {} (an agent loop would run it).
    message = fold_prefix(stream, None)
    assert message.status == "incomplete"
    assert [call.status for call in message.tool_calls] == ["incomplete"]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(rel=st.sampled_from(ALL), data=st.data())
def test_cut_inside_an_event(rel: str, data: st.DataObject) -> None:
    ref = reference(rel)
    raw = read(rel)
    cut = data.draw(st.integers(0, len(raw)), label="cut")
    offsets = [s.offset for s in ref.steps]
    k = bisect.bisect_right(offsets, cut) - 1
    before = ref.steps[k]
    after = ref.steps[min(k + 1, len(ref.steps) - 1)]
    message = fold_prefix(raw[:cut], ref.provider)
    check_cut(message, ref, before, after, f"{rel} cut at byte {cut}")


ERROR_EVENTS = [
    rel
    for rel in ALL
    if rel.endswith(".sse") and re.search(rb"^(event: error|error:)", read(rel), re.MULTILINE)
]


@pytest.mark.parametrize("rel", ERROR_EVENTS)
def test_a_cut_inside_a_server_error_event_reads_as_any_cut(rel: str) -> None:
    # A stream cut after `event: error` (or inside an `error:` line's JSON) was cut, not
    # failed: the message ends incomplete, as at a cut anywhere else. Every byte of the
    # event that names the error.
    ref = reference(rel)
    raw = read(rel)
    start = re.search(rb"^(event: error|error:)", raw, re.MULTILINE)
    assert start is not None
    end = raw.index(b"\n\n", start.start())
    offsets = [s.offset for s in ref.steps]
    for cut in range(start.start(), end + 1):
        k = bisect.bisect_right(offsets, cut) - 1
        before = ref.steps[k]
        after = ref.steps[min(k + 1, len(ref.steps) - 1)]
        message = fold_prefix(raw[:cut], ref.provider)
        check_cut(message, ref, before, after, f"{rel} cut at byte {cut}")
