"""The saved state of a StreamFolder (fold.py): its own fields and each of its boxes'."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from .accumulator_state import AccumulatorState
from .errors import StreamProtocolError, preview
from .eventstream_state import EventStreamState
from .framing import StreamFormat
from .framing_state import NDJSONState, SSEState
from .state_schema import BoxState, Bytes, Count, Json, JsonObject


class LimitsState(BoxState):
    """The fold's Limits (every field of it)."""

    max_bytes: Count
    max_parts: Count
    max_part_chars: Count
    max_tool_argument_chars: Count
    max_depth: Count


class HeldEvent(BoxState):
    """An event held until the provider is known: its payload and SSE event name."""

    payload: JsonObject
    event: str | None = None


class HeldFault(BoxState):
    """A fault met inside a chunk of bytes: the fold raises it at its next feed() or close()."""

    reason: str
    provider: str | None = None
    position: Count | None = None
    raw_bytes: Bytes | None = None  # the raw event, when it was bytes
    raw: Json = None  # else the raw event as JSON (or its preview, when JSON cannot hold it)

    @classmethod
    def of(cls, error: StreamProtocolError) -> HeldFault:
        """The state of a held fault."""
        raw = error.raw
        if type(raw) is bytes:
            return cls(
                reason=error.reason, provider=error.provider, position=error.position, raw_bytes=raw
            )
        try:
            return cls(
                reason=error.reason, provider=error.provider, position=error.position, raw=raw
            )
        except ValidationError:
            return cls(
                reason=error.reason,
                provider=error.provider,
                position=error.position,
                raw=preview(raw),
            )

    def rebuilt(self) -> StreamProtocolError:
        """The fault this state describes."""
        raw = self.raw_bytes if self.raw_bytes is not None else self.raw
        return StreamProtocolError(
            self.reason, provider=self.provider, raw=raw, position=self.position
        )


class FoldState(BoxState):
    """What a StreamFolder needs to resume: its own fields and each box's state.

    `decoder` is the state of the decoder of `provider` (its model is that decoder
    class's `state_model`, picked by the name from the registry); the framer's is the
    one field of `sse`, `ndjson`, `eventstream` that `format` names.
    """

    provider: str | None = None
    choice: Count = 0
    strict: bool = False
    limits: LimitsState
    bytes: Count = 0
    format: StreamFormat | None = None
    sse: SSEState | None = None
    ndjson: NDJSONState | None = None
    eventstream: EventStreamState | None = None
    head: Bytes = b""
    undetected: list[HeldEvent] = Field(default_factory=list)
    position: Count = 0
    closed: bool = False
    fault: HeldFault | None = None
    decoder: dict[str, Any] | None = None
    accumulator: AccumulatorState
