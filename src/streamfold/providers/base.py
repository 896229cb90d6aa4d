"""What every provider decoder is: a stateful, pure translator of provider events."""

from __future__ import annotations

from typing import Any, ClassVar

from ..deltas import Delta, EndMessage, Repair
from ..errors import StreamProtocolError


class Decoder:
    """Base class of provider decoders: one provider event in, neutral deltas out.

    `decode()` gets each event's parsed JSON payload (a dict) and, for server-sent events,
    the SSE event name. It does no I/O. A broken protocol raises StreamProtocolError; an
    unknown event type yields `SkipEvent`.
    """

    provider: ClassVar[str] = "unknown"

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        self.choice = choice
        self.strict = strict

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one provider event into neutral deltas."""
        raise NotImplementedError

    def done(self) -> list[Delta]:
        """The `data: [DONE]` sentinel arrived (OpenAI-style streams)."""
        return [EndMessage()]

    def close(self) -> list[Delta]:
        """The input ended; return anything the decoder still holds."""
        return []

    def protocol_error(self, reason: str, raw: Any = None) -> StreamProtocolError:
        """A StreamProtocolError naming this provider."""
        return StreamProtocolError(reason, provider=self.provider, raw=raw)

    def repair(self, kind: str, reason: str, raw: Any = None) -> list[Delta]:
        """An out-of-spec but recoverable event: raise when strict, else count the repair.

        `reason` is the strict error's message ("expected X, got Y"); `kind` is the short
        snake_case name the lenient fold counts in metadata["repairs"]. The caller makes
        the repair itself (drops a duplicate, opens an implicit part...).
        """
        if self.strict:
            raise self.protocol_error(reason, raw)
        return [Repair(kind)]
