"""The saved state of the MessageDelta decoder (decode.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ...message import Status
from ...state_schema import BoxState, Count

# A slot index read so far, or -1 for none.
_SlotOrNone = Annotated[int, Field(ge=-1, le=2**62)]


class SlotKind(BoxState):
    """A slot the deltas opened: its index in the stream and its kind."""

    index: Count
    kind: str


class SlotArguments(BoxState):
    """A tool-call slot whose arguments began: whole (a dict) or as text."""

    index: Count
    whole: bool


class MessageDeltaState(BoxState):
    """What a MessageDeltaDecoder needs to resume."""

    kinds: list[SlotKind] = Field(default_factory=list)
    last_slot: _SlotOrNone = -1
    last_part: _SlotOrNone = -1
    arguments_whole: list[SlotArguments] = Field(default_factory=list)
    started: bool = False
    status: Status = "incomplete"
