"""AG-UI (the Agent User Interaction Protocol): streamfold events as the events an AG-UI
front-end (CopilotKit, the `@ag-ui/client` agents) reads, built with the `ag-ui-protocol`
package's own types and encoder (`pip install 'streamfold[agui]'`).

    events, tool results ─▶ AGUIEncoder ─▶ AG-UI events ─▶ encode_agui_sse ─▶ `data: {...}`

A run is `RUN_STARTED`, a step per response (`STEP_STARTED` / `STEP_FINISHED`, an agent
loop's responses one after another), then `RUN_FINISHED`, or `RUN_ERROR` when the provider
or the fold failed. In a step:

    text          TEXT_MESSAGE_START / _CONTENT / _END, a message per text part
    thinking      REASONING_START, REASONING_MESSAGE_START / _CONTENT / _END, REASONING_END;
                  a signature or encrypted reasoning as REASONING_ENCRYPTED_VALUE
    tool call     TOOL_CALL_START (its parent message the step's last text, if any) /
                  TOOL_CALL_ARGS / TOOL_CALL_END
    tool result   TOOL_CALL_RESULT (the app ran the tool: a ToolResult among the events)
    the rest      CUSTOM `streamfold.part`: a provider's block the protocol has no room
                  for (server tools, citations' sources), and `streamfold.marked`:
                  a text message's narration / answer marker, as soon as it is known

`RUN_FINISHED` says how the run ended: `success` (with the calls still waiting for the
app's result), `interrupt` when a call waits for the user's approval, `cancelled` when the
last response was cancelled; and each response's token usage.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final, assert_never

from .drive import adrive, drive
from .errors import UsageError
from .events import (
    Event,
    MessageCompleted,
    OutputCompleted,
    OutputFailed,
    OutputItem,
    OutputPartial,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    ProviderErrored,
    UsageUpdated,
)
from .message import Message, ToolCall, ToolResult

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent

CUSTOM_PART: Final = "streamfold.part"
"""The CUSTOM event name for a part the protocol has no room for: value `{messageId, part}`."""

CUSTOM_MARKED: Final = "streamfold.marked"
"""The CUSTOM event name for a text message's marker: value `{messageId, utterance, explicit}`."""

_ENCRYPTED_KEYS: Final = ("signature", "encrypted_content", "redacted_data")


def _core() -> Any:
    try:
        import ag_ui.core as core
    except ImportError:  # pragma: no cover - the extra is part of the test install
        raise UsageError(
            "AG-UI: expected the ag-ui-protocol package (pip install 'streamfold[agui]'), "
            "got none installed"
        ) from None
    return core


class AGUIEncoder:
    """Sans-IO: streamfold events (and the app's tool results) in, AG-UI events out.

    Call `start()` once, `feed(event)` per event, `tool_result(result)` when the app ran a
    tool, then `close()` (or `fail(exc)` when the fold raised).
    """

    def __init__(self, *, thread_id: str, run_id: str, id_prefix: str | None = None) -> None:
        if not isinstance(thread_id, str) or not isinstance(run_id, str):
            raise UsageError(
                f"AGUIEncoder: expected str thread_id and run_id, got "
                f"{type(thread_id).__name__} and {type(run_id).__name__}"
            )
        if id_prefix is not None and not isinstance(id_prefix, str):
            raise UsageError(
                f"AGUIEncoder: expected id_prefix= a str or None, got {type(id_prefix).__name__}"
            )
        self._core = _core()
        self.thread_id = thread_id
        self.run_id = run_id
        # The messages' ids: the run's by default; a relayed turn's own id, so every
        # reader of the turn (and a snapshot it gets) names the same message alike.
        self.id_prefix = run_id if id_prefix is None else id_prefix
        self._messages: list[dict[str, Any]] = []  # the run's messages, as a client holds them
        self._started = False
        self._finished = False
        self._step = 0
        self._step_open = False
        self._open: dict[int, tuple[str, str]] = {}  # slot index -> (kind, message/call id)
        self._argued: set[str] = set()  # calls whose argument text went out
        self._last_text: str | None = None  # the step's latest text message (a call's parent)
        self._last: Message | None = None
        self._usage: list[Any] = []
        self._pending: dict[str, str | None] = {}  # calls waiting for the app -> approval id
        self._error: tuple[str, str | None] | None = None
        self._aborted = False

    def _id(self, index: int) -> str:
        return f"{self.id_prefix}-{self._step}-{index}"

    def start(self) -> list[BaseEvent]:
        """`RUN_STARTED`; empty after the first call."""
        return self._start()

    def feed(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events one streamfold event gives."""
        return self._record(self._feed(event))

    def tool_result(self, result: ToolResult) -> list[BaseEvent]:
        """The app ran a tool: `TOOL_CALL_RESULT` (an error result's text, as the package
        carries errors in the content)."""
        return self._record(self._tool_result(result))

    def fail(self, error: BaseException | str) -> list[BaseEvent]:
        """The fold raised: open parts end, `RUN_ERROR`."""
        return self._record(self._fail(error))

    def close(self) -> list[BaseEvent]:
        """The events ended: open parts and the step end, then `RUN_FINISHED` (or
        `RUN_ERROR` when the provider reported an error)."""
        return self._record(self._close())

    def abort(self) -> list[BaseEvent]:
        """The user stopped the run: open parts and the step end, then `RUN_FINISHED` with
        the outcome `cancelled`, whatever the last response's status."""
        self._aborted = True
        return self.close()

    def messages(self) -> list[Any]:
        """The run's messages so far, as an AG-UI client builds them from the events given
        out (the package's AssistantMessage, ReasoningMessage and ToolMessage, in order):
        a late joiner's `MESSAGES_SNAPSHOT`. Parts still being written are in it as far
        as they went."""
        core = self._core
        kinds = {"assistant": core.AssistantMessage, "reasoning": core.ReasoningMessage,
                 "tool": core.ToolMessage}  # fmt: skip
        out = []
        for message in self._messages:
            data = dict(message)
            if isinstance(data.get("content"), list):
                data["content"] = "".join(data["content"])
            if "tool_calls" in data:
                data["tool_calls"] = [
                    {**c, "function": {**c["function"],
                                       "arguments": "".join(c["function"]["arguments"])}}
                    for c in data["tool_calls"]
                ]  # fmt: skip
            out.append(kinds[data["role"]].model_validate(data))
        return out

    def snapshot(self, history: Iterable[Any] = ()) -> BaseEvent:
        """`MESSAGES_SNAPSHOT`: `history` (the messages the client sent, its
        RunAgentInput's: a client replaces its whole list with a snapshot, so they must
        be in it) then the run's messages so far."""
        event: BaseEvent = self._core.MessagesSnapshotEvent(messages=[*history, *self.messages()])
        return event

    def _start(self) -> list[BaseEvent]:
        if self._started:
            return []
        self._started = True
        return [self._core.RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]

    def _feed(self, event: Event) -> list[BaseEvent]:
        if self._finished:
            return []
        core = self._core
        out = self._start()
        if isinstance(event, PartStarted):
            out += self._start_step()
            out += self._part_started(event.index, event.part)
        elif isinstance(event, PartDelta):
            kind, ident = self._open.get(event.index, ("", ""))
            if event.content and kind == "text":
                out.append(core.TextMessageContentEvent(message_id=ident, delta=event.content))
            elif event.content and kind == "reasoning":
                out.append(core.ReasoningMessageContentEvent(message_id=ident, delta=event.content))
            elif event.content and kind == "tool":
                self._argued.add(ident)
                out.append(core.ToolCallArgsEvent(tool_call_id=ident, delta=event.content))
        elif isinstance(event, PartCompleted):
            out += self._part_completed(event.index, event.part)
        elif isinstance(event, PartMarked):
            ident = self._id(event.index)
            value = {"messageId": ident, "utterance": event.utterance, "explicit": event.explicit}
            out.append(core.CustomEvent(name=CUSTOM_MARKED, value=value))
        elif isinstance(event, UsageUpdated):
            pass  # each response's final usage goes out with RUN_FINISHED
        elif isinstance(event, ProviderErrored):
            self._error = (event.message, event.error_type)
        elif isinstance(event, OutputPartial | OutputItem | OutputCompleted | OutputFailed):
            pass  # the structured output's text already went out as its part's deltas
        elif isinstance(event, MessageCompleted):
            out += self._start_step()  # a response with no parts is a step all the same
            self._end_step(event.message)
            out += self._close_open()
            if self._step_open:
                self._step_open = False
                out.append(core.StepFinishedEvent(step_name=self._step_name()))
        else:
            assert_never(event)
        return out

    def _tool_result(self, result: ToolResult) -> list[BaseEvent]:
        if self._finished:
            return []
        if not isinstance(result, ToolResult):
            raise UsageError(f"tool_result: expected a ToolResult, got {type(result).__name__}")
        self._pending.pop(result.tool_call_id, None)
        content = result.content
        text = (
            content
            if isinstance(content, str)
            else "".join(p.content or "" for p in content if p.type == "text")
        )
        return [
            *self._start(),
            self._core.ToolCallResultEvent(
                message_id=f"{self.id_prefix}-result-{result.tool_call_id}",
                tool_call_id=result.tool_call_id,
                content=text,
                role="tool",
            ),
        ]

    def approval_request(self, tool_call_id: str, approval_id: str) -> list[BaseEvent]:
        """A call waits for the user's approval: the run will finish as an `interrupt`."""
        self._pending[tool_call_id] = approval_id
        return []

    def _fail(self, error: BaseException | str) -> list[BaseEvent]:
        if self._finished:
            return []
        out = self._start() + self._close_open()
        self._finished = True
        out.append(self._core.RunErrorEvent(message=str(error) or type(error).__name__,
                                            code=type(error).__name__))  # fmt: skip
        return out

    def _close(self) -> list[BaseEvent]:
        if self._finished:
            return []
        core = self._core
        out = self._start() + self._close_open()
        if self._step_open:
            self._step_open = False
            out.append(core.StepFinishedEvent(step_name=self._step_name()))
        self._finished = True
        if self._error is not None:
            message, code = self._error
            out.append(core.RunErrorEvent(message=message, code=code, usage=self._usage or None))
            return out
        out.append(
            core.RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                outcome=self._outcome(),
                usage=self._usage or None,
            )
        )
        return out

    # --- internals -------------------------------------------------------------------

    def _record(self, out: list[BaseEvent]) -> list[BaseEvent]:
        """Apply the events given out to the run's messages, as an AG-UI client does
        (@ag-ui/client's defaultApplyEvents): what `messages()` returns."""
        core = self._core
        messages = self._messages
        for event in out:
            if isinstance(event, core.TextMessageStartEvent | core.ReasoningMessageStartEvent):
                if _find(messages, event.message_id) is None:
                    message = {"id": event.message_id, "role": event.role, "content": []}
                    messages.append(message)
            elif isinstance(
                event, core.TextMessageContentEvent | core.ReasoningMessageContentEvent
            ):
                found = _find(messages, event.message_id)
                if found is not None:  # pieces, joined when asked: no copy per delta
                    found["content"].append(event.delta)
            elif isinstance(event, core.ReasoningEncryptedValueEvent):
                found = _find(messages, event.entity_id)
                if found is not None and event.subtype == "message":
                    found["encrypted_value"] = event.encrypted_value
            elif isinstance(event, core.ToolCallStartEvent):
                if _call(messages, event.tool_call_id) is None:
                    found = _find(messages, event.parent_message_id)
                    parent = found
                    if found is None or found["role"] != "assistant":
                        parent = {"id": event.tool_call_id if found else
                                  event.parent_message_id or event.tool_call_id,
                                  "role": "assistant"}  # fmt: skip
                        messages.append(parent)
                    assert parent is not None
                    call = {"id": event.tool_call_id, "type": "function",
                            "function": {"name": event.tool_call_name,
                                         "arguments": []}}  # fmt: skip
                    parent.setdefault("tool_calls", []).append(call)
            elif isinstance(event, core.ToolCallArgsEvent):
                argued = _call(messages, event.tool_call_id)
                if argued is not None:
                    argued["function"]["arguments"].append(event.delta)
            elif isinstance(event, core.ToolCallResultEvent):
                tool = {"id": event.message_id, "role": "tool", "content": event.content,
                        "tool_call_id": event.tool_call_id}  # fmt: skip
                at = next((n for n, m in enumerate(messages) if m["role"] == "assistant" and
                           any(c["id"] == event.tool_call_id for c in m.get("tool_calls", []))),
                          None)  # fmt: skip
                if at is None:
                    messages.append(tool)
                else:  # after the call's message and the results already under it
                    at += 1
                    while at < len(messages) and messages[at]["role"] == "tool":
                        at += 1
                    messages.insert(at, tool)
        return out

    def _step_name(self) -> str:
        return f"response-{self._step}"

    def _start_step(self) -> list[BaseEvent]:
        if self._step_open:
            return []
        if self._last is not None:
            self._step += 1
        self._step_open = True
        self._last_text = None
        return [self._core.StepStartedEvent(step_name=self._step_name())]

    def _end_step(self, message: Message) -> None:
        self._last = message
        usage = message.usage
        if usage is not None:
            self._usage.append(
                self._core.TokenUsage(
                    provider=_str(message.metadata.get("provider")),
                    model=_str(message.metadata.get("model")),
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    total_tokens=usage.total_tokens,
                    reasoning_tokens=usage.reasoning_tokens,
                    cached_input_tokens=usage.cache_read_tokens,
                    cache_write_input_tokens=usage.cache_write_tokens,
                )
            )
        for call in message.tool_calls:
            if call.call_id is not None and message.stop_reason == "tool_use":
                self._pending.setdefault(call.call_id, None)

    def _outcome(self) -> Any:
        core = self._core
        last = self._last
        if self._aborted or (last is not None and last.status == "cancelled"):
            return core.RunFinishedCancelledOutcome(type="cancelled")
        asked = [(call, approval) for call, approval in self._pending.items() if approval]
        if asked:
            interrupts = [
                core.Interrupt(id=approval, reason="tool_approval", tool_call_id=call)
                for call, approval in asked
            ]
            return core.RunFinishedInterruptOutcome(type="interrupt", interrupts=interrupts)
        pending = list(self._pending) or None
        return core.RunFinishedSuccessOutcome(type="success", pending_tool_call_ids=pending)

    def _part_started(self, index: int, part: Any) -> list[BaseEvent]:
        core = self._core
        ident = self._id(index)
        if isinstance(part, ToolCall):
            call_id = part.call_id or ident
            self._open[index] = ("tool", call_id)
            out: list[BaseEvent] = [
                core.ToolCallStartEvent(
                    tool_call_id=call_id,
                    tool_call_name=part.name or "unknown",
                    parent_message_id=self._last_text,
                )
            ]
            if isinstance(part.arguments, str) and part.arguments:
                self._argued.add(call_id)
                out.append(core.ToolCallArgsEvent(tool_call_id=call_id, delta=part.arguments))
            return out
        if part.type == "text":
            self._open[index] = ("text", ident)
            self._last_text = ident
            out = [core.TextMessageStartEvent(message_id=ident, role="assistant")]
            if part.content:
                out.append(core.TextMessageContentEvent(message_id=ident, delta=part.content))
            return out
        if part.type == "thinking":
            self._open[index] = ("reasoning", ident)
            out = [
                core.ReasoningStartEvent(message_id=ident),
                core.ReasoningMessageStartEvent(message_id=ident, role="reasoning"),
            ]
            if part.content:
                out.append(core.ReasoningMessageContentEvent(message_id=ident, delta=part.content))
            return out
        return []  # files and provider blocks go whole when they complete

    def _part_completed(self, index: int, part: Any) -> list[BaseEvent]:
        core = self._core
        kind, ident = self._open.pop(index, ("", self._id(index)))
        out: list[BaseEvent] = []
        if isinstance(part, ToolCall):
            call_id = ident if kind == "tool" else part.call_id or ident
            out += [] if kind == "tool" else [
                core.ToolCallStartEvent(tool_call_id=call_id, tool_call_name=part.name or "unknown",
                                        parent_message_id=self._last_text)
            ]  # fmt: skip
            if call_id not in self._argued and isinstance(part.arguments, dict):
                # A call with no argument text on the wire ({} sent whole): the front-end
                # reads the arguments as JSON text.
                text = json.dumps(part.arguments, ensure_ascii=False, separators=(",", ":"))
                out.append(core.ToolCallArgsEvent(tool_call_id=call_id, delta=text))
            self._argued.discard(call_id)
            out.append(core.ToolCallEndEvent(tool_call_id=call_id))
            return out
        if kind == "text":
            out.append(core.TextMessageEndEvent(message_id=ident))
        elif kind == "reasoning":
            out.append(core.ReasoningMessageEndEvent(message_id=ident))
            for key in _ENCRYPTED_KEYS:
                value = part.options.get(key)
                if isinstance(value, str) and value:
                    out.append(core.ReasoningEncryptedValueEvent(
                        subtype="message", entity_id=ident, encrypted_value=value))  # fmt: skip
                    break
            out.append(core.ReasoningEndEvent(message_id=ident))
        if part.type not in ("text", "thinking") or part.citations:
            value = {
                "messageId": ident,
                "part": part.model_dump(mode="json", exclude_defaults=True),
            }
            out.append(core.CustomEvent(name=CUSTOM_PART, value=value))
        return out

    def _close_open(self) -> list[BaseEvent]:
        # A cut response: the parts still open end, so a front-end stops showing them as
        # being written (a call's arguments are what arrived).
        core = self._core
        out: list[BaseEvent] = []
        for _index, (kind, ident) in sorted(self._open.items()):
            if kind == "text":
                out.append(core.TextMessageEndEvent(message_id=ident))
            elif kind == "reasoning":
                out.append(core.ReasoningMessageEndEvent(message_id=ident))
                out.append(core.ReasoningEndEvent(message_id=ident))
            elif kind == "tool":
                out.append(core.ToolCallEndEvent(tool_call_id=ident))
        self._open.clear()
        return out


def _find(messages: list[dict[str, Any]], ident: str | None) -> dict[str, Any] | None:
    if ident is None:
        return None
    return next((m for m in messages if m["id"] == ident), None)


def _call(messages: list[dict[str, Any]], ident: str) -> dict[str, Any] | None:
    calls = (c for m in messages for c in m.get("tool_calls", ()) if c["id"] == ident)
    return next(calls, None)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def to_agui_events(
    events: Iterable[Event | ToolResult], *, thread_id: str, run_id: str
) -> Iterator[BaseEvent]:
    """streamfold events (several responses and the app's tool results between them: an
    agent loop) as one AG-UI run; a StreamfoldError from the events is `RUN_ERROR`."""
    return drive(AGUIEncoder(thread_id=thread_id, run_id=run_id), events)


def ato_agui_events(
    events: AsyncIterable[Event | ToolResult], *, thread_id: str, run_id: str
) -> AsyncIterator[BaseEvent]:
    """Async `to_agui_events`: over `async for` events (an `afold`, say)."""
    return adrive(AGUIEncoder(thread_id=thread_id, run_id=run_id), events)


def encode_agui_sse(events: Iterable[BaseEvent]) -> Iterator[bytes]:
    """The SSE bytes of AG-UI events, written by the package's own `EventEncoder`."""
    from ag_ui.encoder import EventEncoder

    encoder = EventEncoder()
    for event in events:
        yield encoder.encode(event).encode()


async def aencode_agui_sse(events: AsyncIterable[BaseEvent]) -> AsyncIterator[bytes]:
    """Async `encode_agui_sse`."""
    from ag_ui.encoder import EventEncoder

    encoder = EventEncoder()
    async for event in events:
        yield encoder.encode(event).encode()


__all__ = [
    "CUSTOM_MARKED",
    "CUSTOM_PART",
    "AGUIEncoder",
    "aencode_agui_sse",
    "ato_agui_events",
    "encode_agui_sse",
    "to_agui_events",
]
