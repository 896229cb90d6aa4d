"""The saved state of the Accumulator and its slots (accumulator.py)."""

from __future__ import annotations

from pydantic import Field

from .message import Message, Role, Status, StopReason, ToolCall, Usage
from .parts import Citation, ContentPart
from .state_schema import BoxState, Count, JsonObject, Key


class SlotState(BoxState):
    """One slot: an open part as it started and what grew it, or a complete one as built.

    The scanner of `partial_arguments` is not saved: it is rebuilt from the text.
    """

    part: ContentPart | None = None
    call: ToolCall | None = None
    complete: bool = False
    # The text so far (a part's content, a call's argument text): none is no content yet.
    chunks: list[str] = Field(default_factory=list)
    options: JsonObject = Field(default_factory=dict)
    streamed: dict[str, list[str]] = Field(default_factory=dict)
    citations: list[Citation] = Field(default_factory=list)
    scanning: bool = False


class OpenSlot(BoxState):
    """An open part: the decoder's key for it and its slot's index."""

    key: Key
    slot: Count


class AccumulatorState(BoxState):
    """What an Accumulator needs to resume (its provider, strictness and limits are the
    fold's, given to `from_state`)."""

    role: Role = "assistant"
    scan_arguments: bool = False
    slots: list[SlotState] = Field(default_factory=list)
    open: list[OpenSlot] = Field(default_factory=list)
    closed_keys: list[Key] = Field(default_factory=list)
    status: Status = "incomplete"
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    usage: Usage | None = None
    metadata: JsonObject = Field(default_factory=dict)
    skipped: dict[str, Count] = Field(default_factory=dict)
    repairs: dict[str, Count] = Field(default_factory=dict)
    finished: bool = False
    final: Message | None = None
    # The text slots still waiting for a narration / answer marker, in stream order.
    unmarked: list[Count] = Field(default_factory=list)
