"""What the providers' stream writers share: the options, the drop-or-raise rule for parts a
stream cannot carry, and the framings (SSE, NDJSON, AWS eventstream).

`streamfold.to_stream` picks the writer; each provider package's `stream.py` writes its
own events. A writer returns the stream as a list of byte chunks, one event a chunk.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..encoding import EncodeError, ReplayWarning, foreign
from ..eventstream import encode_message
from ..message import Message, ToolCall, Usage
from ..parts import ContentPart


@dataclass(slots=True)
class StreamWriter:
    """The options of one `to_stream` call and the problems met on the way.

    `native` is True when the message was folded from the target provider (or built by
    hand): then the provider's own fields the fold kept (raw usage, raw stop reason, opaque
    blocks, response metadata) are written back as they came. `events_of` names the
    provider whose events the stream carries when it is not `provider` (Claude's on
    Bedrock's invoke stream: anthropic).
    """

    message: Message
    provider: str
    model: str
    piece: int
    strict: bool
    events_of: str | None = None
    native: bool = field(init=False)

    def __post_init__(self) -> None:
        self.native = not foreign(self.message, self.events_of or self.provider)

    def drop(self, position: int | None, what: str, reason: str) -> None:
        """A part (or a field of one) the stream cannot carry: a ReplayWarning naming it, and
        left out; with `strict=True` an EncodeError instead."""
        where = f"part {position} ({what})" if position is not None else what
        text = f"to_stream: {where} is left out: {reason}"
        if self.strict:
            raise EncodeError(text, provider=self.provider)
        warnings.warn(text, ReplayWarning, stacklevel=4)

    def pieces(self, text: str) -> list[str]:
        """`text` cut into deltas of at most `piece` characters (at least one, maybe "")."""
        if not text:
            return [""]
        size = self.piece
        return [text[i : i + size] for i in range(0, len(text), size)]

    def error(self, kind: str, text: str) -> tuple[str, str]:
        """The type and text of the error the message ended with (its metadata's `error`,
        as the fold recorded it), each `kind` / `text` where it has none."""
        error = self.message.metadata.get("error")
        said_kind = error.get("type") if isinstance(error, dict) else None
        said_text = error.get("message") if isinstance(error, dict) else None
        return (said_kind if isinstance(said_kind, str) else kind,
                said_text if isinstance(said_text, str) else text)  # fmt: skip

    def meta(self, key: str, default: str) -> str:
        """A text field of the message's metadata, or `default`."""
        value = self.message.metadata.get(key)
        return value if isinstance(value, str) and value else default

    def signature(self, options: dict[str, Any], *keys: str) -> str | None:
        """A part's signature (under the first of `keys` it has), when the message came
        from the target provider: another provider's would not verify, and goes nowhere
        (as `encode` leaves it out)."""
        if not self.native:
            return None
        for key in keys or ("signature",):
            value = options.get(key)
            if isinstance(value, str) and value:
                return value
        return None

    def native_raw_usage(self) -> dict[str, Any] | None:
        """The provider's own usage object, when the message came from it."""
        usage = self.message.usage
        if self.native and usage is not None and usage.raw:
            return dict(usage.raw)
        return None


def part_kind(part: ContentPart | ToolCall) -> str:
    """How a dropped part is named in a warning."""
    if isinstance(part, ToolCall):
        return f"tool call {part.name!r}"
    kind = part.options.get("type")
    return f"{part.type} part" + (f" {kind!r}" if isinstance(kind, str) else "")


def arguments_text(call: ToolCall) -> str:
    """A call's arguments as the JSON text a stream carries (text kept as it is)."""
    if isinstance(call.arguments, dict):
        return json.dumps(call.arguments, ensure_ascii=False)
    return call.arguments or ""


def own_block(writer: StreamWriter, part: ContentPart) -> dict[str, Any] | None:
    """The provider block an opaque part holds, when it came from the target provider."""
    block = part.options.get("block")
    if part.type == "unsupported" and isinstance(block, dict) and writer.native:
        return block
    return None


def counts(usage: Usage | None) -> tuple[int, int]:
    """Input and output tokens (0 when not reported)."""
    if usage is None:
        return 0, 0
    return usage.input_tokens or 0, usage.output_tokens or 0


# JSON as ASCII, non-ASCII characters escaped: readers that split lines with
# str.splitlines (httpx's iter_lines: the ollama and google-genai clients) also split at
# U+0085, U+2028 and the other Unicode line breaks, and a raw one in a text would cut
# its event in two.


def sse(data: Any, event: str | None = None) -> bytes:
    """One SSE event (`event:` line when named), its data as compact ASCII JSON."""
    body = json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {body}\n\n".encode()


def ndjson(data: Any) -> bytes:
    """One NDJSON line (ASCII JSON)."""
    return json.dumps(data, separators=(",", ":")).encode() + b"\n"


def eventstream_event(event_type: str, payload: Any) -> bytes:
    """One AWS eventstream `event` message of JSON payload, as Bedrock frames it."""
    headers = {
        ":event-type": event_type,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return encode_message(headers, json.dumps(payload, separators=(",", ":")).encode())
