"""The events a fold yields: part lifecycle, usage, provider errors, the finished Message."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .display import DisplayItem
from .message import Message, ToolCall, Usage
from .parts import Citation, ContentPart, PartType


@dataclass(frozen=True, slots=True, kw_only=True)
class PartStarted:
    """A part or tool call began at slot `index` of the message."""

    type: Literal["part_started"] = field(default="part_started", init=False)
    index: int
    part: ContentPart | ToolCall


@dataclass(frozen=True, slots=True, kw_only=True)
class PartDelta:
    """More of the part at `index`: content (argument text for a tool call), options, citations."""

    type: Literal["part_delta"] = field(default="part_delta", init=False)
    index: int
    part_type: PartType | Literal["tool_call"]
    content: str | None = None
    options: Mapping[str, Any] | None = None
    citations: tuple[Citation, ...] = ()

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


@dataclass(frozen=True, slots=True, kw_only=True)
class PartCompleted:
    """The part at `index` is finished; `explicit` says whether the wire said so."""

    type: Literal["part_completed"] = field(default="part_completed", init=False)
    index: int
    part: ContentPart | ToolCall
    display_items: tuple[DisplayItem, ...]
    explicit: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageUpdated:
    """The running usage changed."""

    type: Literal["usage_updated"] = field(default="usage_updated", init=False)
    usage: Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderErrored:
    """The provider reported an error in the stream; `partial` is the message so far."""

    type: Literal["provider_errored"] = field(default="provider_errored", init=False)
    error_type: str | None
    message: str
    raw: Any
    partial: Message


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageCompleted:
    """The fold is over: the final Message, whatever its status."""

    type: Literal["message_completed"] = field(default="message_completed", init=False)
    message: Message


Event = PartStarted | PartDelta | PartCompleted | UsageUpdated | ProviderErrored | MessageCompleted
