"""The saved state of the SSE and NDJSON framers (framing.py): interpreted pydantic models,
apart from the framers, which are compiled."""

from __future__ import annotations

from pydantic import Field

from .state_schema import BoxState, Bytes, Number


class SSEState(BoxState):
    """What an SSEDecoder needs to resume: the unfinished line and event."""

    buffer: Bytes = b""
    data: list[Bytes] = Field(default_factory=list)
    event: str | None = None
    id: str | None = None
    retry: Number | None = None
    started: bool = False
    closed: bool = False
    pending_cr: bool = False


class NDJSONState(BoxState):
    """What an NDJSONDecoder needs to resume: the unfinished line."""

    buffer: Bytes = b""
    closed: bool = False
    # The first line was taken (a byte-order mark may open only the stream).
    started: bool = False
