"""The saved state of the AWS eventstream framer (eventstream.py)."""

from __future__ import annotations

from .state_schema import BoxState, Bytes


class EventStreamState(BoxState):
    """What an EventStreamFramer needs to resume: the unfinished message."""

    buffer: Bytes = b""
    closed: bool = False
    truncated: bool = False
