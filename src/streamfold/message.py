"""Messages, tool calls, usage, and the MessageDelta merge rules of Elixir LangChain."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal

import jiter
from pydantic import Field, field_validator, model_validator

from ._model import JsonObject, StreamfoldModel
from .errors import (
    IncompleteMessageError,
    InvalidModelError,
    ToolArgumentsError,
    UsageError,
    preview,
)
from .parts import ContentPart, merge_part, parts_to_string, utterance

Role = Literal["system", "user", "assistant", "tool"]
Status = Literal["incomplete", "complete", "length", "cancelled", "content_filtered", "error"]
StopReason = Literal[
    "stop",
    "tool_use",
    "length",
    "content_filter",
    "pause",
    "approval",
    "refusal",
    "error",
    "cancelled",
    "other",
]

# "Status only moves forward": a later status replaces an earlier one unless it ranks lower,
# so an error after `complete` sticks and a trailing `complete` cannot hide `length`.
_STATUS_RANK: dict[str, int] = {
    "incomplete": 0,
    "complete": 1,
    "length": 2,
    "content_filtered": 2,
    "cancelled": 3,
    "error": 3,
}


def forward_status(current: Status, later: Status) -> Status:
    """Return the status after `later` arrives: it never moves back."""
    return later if _STATUS_RANK[later] >= _STATUS_RANK[current] else current


def parse_tool_arguments(call_id: str | None, name: str | None, raw: str) -> dict[str, Any]:
    """Parse a complete tool call's argument text; empty text means no arguments."""
    if not raw.strip():
        return {}
    try:
        data = raw.encode()
    except UnicodeEncodeError as exc:
        # A lone surrogate (from a decoded dict, or an SDK object): no JSON text holds one.
        raise ToolArgumentsError(call_id, name, raw, f"not UTF-8 text ({exc.reason})") from None
    return parse_tool_arguments_json(call_id, name, data)


def parse_tool_arguments_json(call_id: str | None, name: str | None, data: bytes) -> dict[str, Any]:
    """`parse_tool_arguments` for text already encoded (UTF-8, not blank).

    The caller may drop the text once encoded: an error decodes it back (the same text).
    """
    try:
        value = jiter.from_json(data, allow_inf_nan=False)
    except ValueError as exc:
        raise ToolArgumentsError(call_id, name, data.decode(), str(exc)) from None
    if not isinstance(value, dict):
        raise ToolArgumentsError(call_id, name, data.decode(), f"it is a {type(value).__name__}")
    return value


class ToolCall(StreamfoldModel):
    """A call the model asked for: arguments are text while streaming, a dict once complete."""

    call_id: str | None = None
    name: str | None = None
    arguments: str | JsonObject | None = None
    index: int | None = None
    status: Literal["incomplete", "complete"] = "incomplete"
    metadata: JsonObject = Field(default_factory=dict)

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_shape(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str | dict):
            raise InvalidModelError(
                "ToolCall",
                [
                    "arguments: expected str (while streaming) or dict (once complete), "
                    f"got {type(value).__name__} {preview(value)}"
                ],
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _parse_complete_arguments(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("status") == "complete":
            args = data.get("arguments")
            if args is None or isinstance(args, str):
                data = {
                    **data,
                    "arguments": parse_tool_arguments(
                        data.get("call_id"), data.get("name"), args or ""
                    ),
                }
        return data


class ToolResult(StreamfoldModel):
    """The answer to a tool call, sent back to the model in a tool message."""

    tool_call_id: str
    name: str | None = None
    content: str | list[ContentPart] = ""
    is_error: bool = False
    is_interrupt: bool = False
    options: JsonObject = Field(default_factory=dict)


class Usage(StreamfoldModel):
    """Token counts. A `cumulative` usage is a running total: it replaces, never adds."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    raw: JsonObject = Field(default_factory=dict)
    cumulative: bool = False

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (None counts as 0)."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def merge_usage(current: Usage | None, later: Usage | None) -> Usage | None:
    """Combine usage reports: a cumulative one replaces the running usage, others add to it."""
    if later is None:
        return current
    if current is None or later.cumulative:
        return later
    return Usage.trusted(
        input_tokens=_add(current.input_tokens, later.input_tokens),
        output_tokens=_add(current.output_tokens, later.output_tokens),
        cache_read_tokens=_add(current.cache_read_tokens, later.cache_read_tokens),
        cache_write_tokens=_add(current.cache_write_tokens, later.cache_write_tokens),
        reasoning_tokens=_add(current.reasoning_tokens, later.reasoning_tokens),
        raw={**current.raw, **later.raw},
        cumulative=current.cumulative,
    )


class Message(StreamfoldModel):
    """A complete (or cut-short) message: parts, tool calls, results, status and usage.

    Tool calls carry their slot index in the streamed order; content parts fill the other
    slots in order, so `stream_order()` rebuilds interleaved blocks exactly as streamed.
    """

    role: Role
    content: list[ContentPart] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_results: list[ToolResult] = Field(default_factory=list)
    status: Status = "complete"
    usage: Usage | None = None
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    metadata: JsonObject = Field(default_factory=dict)

    @classmethod
    def system(cls, text: str) -> Message:
        """Build a system message holding one text part."""
        return cls(role="system", content=[ContentPart.text(text)])

    @classmethod
    def user(cls, content: str | list[ContentPart]) -> Message:
        """Build a user message from a string or a list of parts."""
        parts = [ContentPart.text(content)] if isinstance(content, str) else content
        return cls(role="user", content=parts)

    @classmethod
    def assistant(
        cls, content: str | list[ContentPart] = "", tool_calls: list[ToolCall] | None = None
    ) -> Message:
        """Build a complete assistant message."""
        if isinstance(content, str):
            parts = [ContentPart.text(content)] if content else []
        else:
            parts = content
        return cls(role="assistant", content=parts, tool_calls=tool_calls or [])

    @classmethod
    def tool(cls, results: list[ToolResult]) -> Message:
        """Build a tool message carrying tool results."""
        return cls(role="tool", tool_results=results)

    @property
    def text(self) -> str | None:
        """The message's text parts joined by a blank line, or None."""
        return parts_to_string(self.content)

    def stream_order(self) -> list[ContentPart | ToolCall]:
        """Parts and tool calls in the order they were streamed."""
        return list(_stream_order(self.content, self.tool_calls))


def _stream_order(
    content: list[ContentPart], tool_calls: list[ToolCall]
) -> Iterator[ContentPart | ToolCall]:
    placed = sorted((tc for tc in tool_calls if tc.index is not None), key=lambda tc: tc.index or 0)
    unplaced = [tc for tc in tool_calls if tc.index is None]
    parts = iter(content)
    slot = 0
    pending = 0
    for part in parts:
        while pending < len(placed) and (placed[pending].index or 0) <= slot:
            yield placed[pending]
            pending += 1
            slot += 1
        yield part
        slot += 1
    yield from placed[pending:]
    yield from unplaced


# Stop reasons of a turn that goes on: the caller runs a tool, the provider paused it, or
# the provider waits for the caller to approve a tool it would run (an MCP approval request).
TURN_GOES_ON: frozenset[str] = frozenset({"tool_use", "pause", "approval"})


def settled_stop_reason(
    stop_reason: StopReason | None,
    status: Status,
    tool_calls: Iterable[ToolCall],
    content: Iterable[ContentPart] = (),
) -> StopReason | None:
    """The stop reason an agent loop acts on, whatever word the provider used for it.

    A normally finished message holding a client tool call stops with `tool_use`: some
    providers say "stop" (or nothing) when the model asked for tools (OpenRouter's
    o3-mini, Ollama, Gemini), and a loop reading that would show the call as the answer. A
    call whose arguments did not parse counts too, as on providers that say "tool_calls"
    then: the model asked for a tool, and the call's `arguments_error` says what is wrong.
    Else, one holding an MCP approval request no call in it answered stops
    with `approval`: the provider waits for the caller's decision (Responses says
    "completed"). The provider's own word stays in `raw_stop_reason`. Any other reason
    (length, pause, refusal...) says more than "the model stopped" and stands.
    """
    if status != "complete" or stop_reason not in (None, "stop"):
        return stop_reason
    for _ in tool_calls:
        return "tool_use"
    if pending_approvals(content):
        return "approval"
    return stop_reason


def pending_approvals(content: Iterable[ContentPart]) -> list[str]:
    """The ids of the MCP approval requests among `content` that no MCP call in it answers
    (Responses `mcp_approval_request` items, kept as unsupported parts)."""
    requested: list[str] = []
    answered: set[Any] = set()
    for part in content:
        if part.type != "unsupported":
            continue
        kind = part.options.get("type")
        if kind == "mcp_approval_request":
            request_id = part.options.get("id")
            if isinstance(request_id, str):
                requested.append(request_id)
        elif kind == "mcp_call":
            block = part.options.get("block")
            if isinstance(block, dict):
                answered_id = block.get("approval_request_id")
                if isinstance(answered_id, str):  # (any JSON from the wire: a list too)
                    answered.add(answered_id)
    return [r for r in requested if r not in answered]


def is_narration(item: ContentPart | Message) -> bool:
    """True for a narration part; for a message, True while the turn is not over: its last
    text part is narration, or it has no text and stopped to use a tool (or paused, or
    waits for an approval)."""
    if isinstance(item, ContentPart):
        return utterance(item) == "narration"
    last_text = next((p for p in reversed(item.content) if p.type == "text"), None)
    if last_text is None:
        return item.stop_reason in TURN_GOES_ON
    return utterance(last_text) == "narration"


class MessageDelta(StreamfoldModel):
    """A piece of a streamed message, as in Elixir LangChain's MessageDelta.

    `content` is indexed by slot: entry i merges into slot i, None leaves it alone. A tool
    call fragment's `index` is its slot in the same numbering (leave a None hole in
    `content` there), and fragments with the same index merge. `completed` names slots
    the producer has finished: a fold completes those parts at once (explicitly) instead
    of when the message ends; merging only collects the names.
    """

    role: Role = "assistant"
    content: list[ContentPart | None] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    status: Status = "incomplete"
    usage: Usage | None = None
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    metadata: JsonObject = Field(default_factory=dict)
    completed: list[int] = Field(default_factory=list)


def merge_tool_call(primary: ToolCall, fragment: ToolCall) -> ToolCall:
    """Merge a streamed tool-call fragment: first id and name kept, argument text appended."""
    args: str | dict[str, Any] | None
    if isinstance(primary.arguments, str) and isinstance(fragment.arguments, str):
        args = primary.arguments + fragment.arguments
    elif fragment.arguments is None:
        args = primary.arguments
    else:
        args = fragment.arguments
    return ToolCall.model_construct(
        call_id=primary.call_id or fragment.call_id,
        name=primary.name or fragment.name,
        arguments=args,
        index=primary.index if primary.index is not None else fragment.index,
        status="complete" if "complete" in (primary.status, fragment.status) else "incomplete",
        metadata={**primary.metadata, **fragment.metadata},
    )


def _merge_tool_calls(calls: list[ToolCall], fragments: list[ToolCall]) -> list[ToolCall]:
    # By index only: matching by id as well would make the result depend on how the deltas
    # were grouped (an id can arrive after its call was first seen). Matching a provider's
    # fragments by id is its decoder's job.
    merged = list(calls)
    for fragment in fragments:
        at = None
        if fragment.index is not None:
            at = next((i for i, c in enumerate(merged) if c.index == fragment.index), None)
        if at is None:
            merged.append(fragment)
        else:
            merged[at] = merge_tool_call(merged[at], fragment)
    return merged


def merge_delta(primary: MessageDelta | None, delta: MessageDelta) -> MessageDelta:
    """Merge `delta` into the `primary` delta accumulated so far."""
    if primary is None:
        # Fragments of one call inside a single delta merge too, so the result does not
        # depend on whether this delta came first.
        calls = _merge_tool_calls([], delta.tool_calls)
        if len(calls) == len(delta.tool_calls):
            return delta
        return delta.model_copy(update={"tool_calls": calls})
    content = list(primary.content)
    for i, part in enumerate(delta.content):
        if part is None:
            continue
        if i >= len(content):
            content.extend([None] * (i + 1 - len(content)))
        content[i] = merge_part(content[i], part)
    return MessageDelta.model_construct(
        role=primary.role,
        content=content,
        tool_calls=_merge_tool_calls(primary.tool_calls, delta.tool_calls)
        if delta.tool_calls
        else primary.tool_calls,
        status=forward_status(primary.status, delta.status),
        usage=merge_usage(primary.usage, delta.usage),
        stop_reason=delta.stop_reason or primary.stop_reason,
        raw_stop_reason=delta.raw_stop_reason or primary.raw_stop_reason,
        metadata={**primary.metadata, **delta.metadata} if delta.metadata else primary.metadata,
        completed=_union(primary.completed, delta.completed),
    )


def _union(first: list[int], later: list[int]) -> list[int]:
    """`first`, then the items of `later` it does not hold, in order."""
    if not later:
        return first
    merged = list(first)
    seen = set(first)
    for i in later:
        if i not in seen:
            seen.add(i)
            merged.append(i)
    return merged


def merge_deltas(deltas: Iterable[MessageDelta]) -> MessageDelta:
    """Merge a sequence of deltas, first to last; at least one is required."""
    merged: MessageDelta | None = None
    for delta in deltas:
        merged = merge_delta(merged, delta)
    if merged is None:
        raise UsageError("merge_deltas: expected at least one MessageDelta, got none")
    return merged


def complete_tool_call(call: ToolCall) -> ToolCall:
    """Return the call marked complete with its argument text parsed (ToolArgumentsError if bad)."""
    if call.status == "complete" and not isinstance(call.arguments, str):
        return call
    args = call.arguments
    parsed = (
        args
        if isinstance(args, dict)
        else parse_tool_arguments(call.call_id, call.name, args or "")
    )
    return ToolCall.model_construct(
        call_id=call.call_id,
        name=call.name,
        arguments=parsed,
        index=call.index,
        status="complete",
        metadata=call.metadata,
    )


def to_message(delta: MessageDelta) -> Message:
    """Turn a finished delta into a Message: holes dropped, tool arguments parsed."""
    if delta.status == "incomplete":
        raise IncompleteMessageError(
            "to_message: expected a delta with a final status (complete, length, ...), "
            "got status 'incomplete'; merge the rest of the stream first"
        )
    calls = [complete_tool_call(tc) for tc in delta.tool_calls]
    content = [p for p in delta.content if p is not None]
    return Message(
        role=delta.role,
        content=content,
        tool_calls=calls,
        status=delta.status,
        usage=delta.usage,
        stop_reason=settled_stop_reason(delta.stop_reason, delta.status, calls, content),
        raw_stop_reason=delta.raw_stop_reason,
        metadata=delta.metadata,
    )
