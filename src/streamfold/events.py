"""The events a fold yields: part lifecycle, usage, provider errors, the finished Message.

Events are immutable named tuples, tagged with a `type` literal: one is made for every
delta of every stream, and a tuple costs a third of a frozen dataclass to build.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from .display import DisplayItem
from .message import Message, ToolCall, Usage
from .partial_json import Change
from .parts import Citation, ContentPart, PartType, Utterance


class PartStarted(NamedTuple):
    """A part or tool call began at slot `index` of the message.

    It carries the part's identity and kind (type, ids, options such as a signature),
    never its content: every character, and a tool call's argument text, arrives in
    PartDeltas, also when the provider sent the part whole.
    """

    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose: the slot index
    part: ContentPart | ToolCall
    type: Literal["part_started"] = "part_started"


class PartDelta(NamedTuple):
    """More of the part at `index`: content (argument text for a tool call), options, citations.

    `arguments_changes`: with `fold(..., partial_arguments=True)`, what this delta's
    argument text added to the tool call's parsed arguments (see
    `streamfold.partial_json`); empty otherwise.
    """

    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose: the slot index
    part_type: PartType | Literal["tool_call"]
    content: str | None = None
    options: Mapping[str, Any] | None = None
    citations: tuple[Citation, ...] = ()
    type: Literal["part_delta"] = "part_delta"
    # Last, after `type`: the positional fields before it keep their places.
    arguments_changes: tuple[Change, ...] = ()

    def as_part(self) -> ContentPart | ToolCall:
        """This delta as a part (or tool-call fragment) that `merge_part` accepts."""
        if self.part_type == "tool_call":
            return ToolCall.model_construct(
                call_id=None,
                name=None,
                arguments=self.content,
                index=self.index,
                status="incomplete",
                metadata=dict(self.options or {}),
            )
        return ContentPart.model_construct(
            type=self.part_type,
            content=self.content,
            options=dict(self.options or {}),
            citations=list(self.citations),
        )


class PartCompleted(NamedTuple):
    """The part at `index` is finished; `explicit` says whether the wire said so."""

    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose: the slot index
    part: ContentPart | ToolCall
    display_items: tuple[DisplayItem, ...]
    explicit: bool
    type: Literal["part_completed"] = "part_completed"


class PartMarked(NamedTuple):
    """The text part at `index` is narration (the turn goes on) or the answer.

    Emitted the moment the marker is known: at the part's start when the provider says
    so (`explicit`), else when a tool part starts after it or when the message ends
    (inferred). The part may be complete already: a UI restyles what it has shown.
    """

    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose: the slot index
    utterance: Utterance
    explicit: bool
    type: Literal["part_marked"] = "part_marked"


class UsageUpdated(NamedTuple):
    """The running usage changed."""

    usage: Usage
    type: Literal["usage_updated"] = "usage_updated"


class ProviderErrored(NamedTuple):
    """The provider reported an error in the stream; `partial` is the message so far."""

    error_type: str | None
    message: str
    raw: Any
    partial: Message
    type: Literal["provider_errored"] = "provider_errored"


class MessageCompleted(NamedTuple):
    """The fold is over: the final Message, whatever its status."""

    message: Message
    type: Literal["message_completed"] = "message_completed"


Event = (
    PartStarted
    | PartDelta
    | PartCompleted
    | PartMarked
    | UsageUpdated
    | ProviderErrored
    | MessageCompleted
)
