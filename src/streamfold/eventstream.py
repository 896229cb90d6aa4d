"""AWS `application/vnd.amazon.eventstream` framing, as Bedrock ConverseStream sends it.

Each message: a 12-byte prelude (total length, headers length, CRC32 of those 8 bytes),
the headers, the payload, and a CRC32 of everything before it. Incremental like the
other framers: any split of the bytes gives the same messages.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from typing import Any, NoReturn

import jiter

from .errors import StateError, StreamProtocolError, UsageError
from .eventstream_state import EventStreamState

_PRELUDE = 12
_CRC = 4
# The AWS limits: a message is at most 16 MiB, its headers at most 128 KiB.
_MAX_MESSAGE = 16 * 1024 * 1024
_MAX_HEADERS = 128 * 1024

HeaderValue = bool | int | bytes | str | uuid.UUID


class EventStreamMessage:
    """One eventstream message: its headers and raw payload (immutable)."""

    # A plain class, not a dataclass: compiled, a dataclass's generated __init__ stays
    # interpreted Python (3,400 instructions a frame, a tenth of the framing); these
    # stores compile to direct field writes.
    __slots__ = ("headers", "payload")
    headers: dict[str, HeaderValue]
    payload: bytes

    def __init__(self, headers: dict[str, HeaderValue], payload: bytes) -> None:
        object.__setattr__(self, "headers", headers)
        object.__setattr__(self, "payload", payload)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"EventStreamMessage is immutable: cannot assign to {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"EventStreamMessage is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not EventStreamMessage:
            return NotImplemented
        return self.headers == other.headers and self.payload == other.payload

    __hash__ = None  # type: ignore[assignment]  # (its headers are a dict)

    def __repr__(self) -> str:
        return f"EventStreamMessage(headers={self.headers!r}, payload={self.payload!r})"


def _u32(data: bytes, at: int) -> int:
    # The big-endian unsigned 32-bit integer at `at`. Compiled, four byte reads and
    # shifts; struct.unpack_from is a module attribute lookup, a look in its format cache
    # and a tuple each call. Past the end: IndexError, as struct.error was.
    return (data[at] << 24) | (data[at + 1] << 16) | (data[at + 2] << 8) | data[at + 3]


def _u16(data: bytes, at: int) -> int:
    return (data[at] << 8) | data[at + 1]


def _error(reason: str, raw: bytes) -> StreamProtocolError:
    return StreamProtocolError(reason, provider="bedrock", raw=raw[:64])


def _parse_headers(data: bytes, raw: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    pos = 0
    end = len(data)
    try:
        while pos < end:
            name_len = data[pos]
            name = data[pos + 1 : pos + 1 + name_len].decode("utf-8")
            pos += 1 + name_len
            kind = data[pos]
            pos += 1
            value: HeaderValue
            if kind == 0:
                value = True
            elif kind == 1:
                value = False
            elif kind == 2:  # the integers are signed, big-endian
                number = data[pos]
                value = number - 0x100 if number & 0x80 else number
                pos += 1
            elif kind == 3:
                number = _u16(data, pos)
                value = number - 0x10000 if number & 0x8000 else number
                pos += 2
            elif kind == 4:
                number = _u32(data, pos)
                value = number - (1 << 32) if number & 0x80000000 else number
                pos += 4
            elif kind == 5 or kind == 8:  # long, timestamp (ms since the epoch)
                number = (_u32(data, pos) << 32) | _u32(data, pos + 4)
                value = number - (1 << 64) if number >> 63 else number
                pos += 8
            elif kind == 6 or kind == 7:
                length = _u16(data, pos)
                pos += 2
                blob = data[pos : pos + length]
                if len(blob) != length:
                    raise _error("expected a header value, got the end of the headers", raw)
                value = blob.decode("utf-8") if kind == 7 else blob
                pos += length
            elif kind == 9:
                value = uuid.UUID(bytes=data[pos : pos + 16])
                pos += 16
            else:
                raise _error(f"expected a header value type 0-9, got {kind}", raw)
            headers[name] = value
    except (IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, StreamProtocolError):
            raise
        raise _error(f"expected well-formed eventstream headers, got {exc}", raw) from None
    if pos != end:
        raise _error("expected the headers to fill their declared length exactly", raw)
    return headers


class EventStreamFramer:
    """Incremental decoder of AWS eventstream messages, checking both CRCs."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._closed = False
        # Set by close() when it dropped the bytes of a message the stream cut short.
        self.truncated = False
        # The last headers parsed, as bytes and as parsed: a stream's messages nearly all
        # carry the same headers (":event-type chunk" or "contentBlockDelta", the content
        # type, ":message-type event"), and parsing them was a third of the framing.
        self._last_head = b""
        self._last_headers: dict[str, HeaderValue] = {}

    def to_state(self) -> EventStreamState:
        """This framer as saved-state data."""
        return EventStreamState(
            buffer=bytes(self._buffer), closed=self._closed, truncated=self.truncated
        )

    @classmethod
    def from_state(cls, state: EventStreamState) -> EventStreamFramer:
        """The framer `state` describes (it holds less than one message)."""
        if len(state.buffer) >= _MAX_MESSAGE:
            raise StateError("buffer", f"expected less than one message ({_MAX_MESSAGE} bytes)")
        framer = cls()
        framer._buffer = bytearray(state.buffer)
        framer._closed = state.closed
        framer.truncated = state.truncated
        return framer

    def feed(self, data: bytes) -> list[EventStreamMessage]:
        """Feed bytes; return the messages they complete.

        A broken message raises StreamProtocolError, but never at the cost of the
        messages before it: those are returned first, and the broken one, left at the
        head of the buffer, raises at the next feed() or close(). So every split of the
        bytes gives the same messages before the same error.
        """
        if self._closed:
            raise UsageError("EventStreamFramer.feed: expected bytes before close(), got after")
        self._buffer += data
        return self._take()

    def close(self) -> list[EventStreamMessage]:
        """End of stream. A cut-off last message is dropped (the fold reports incomplete);
        a broken one raises."""
        self._closed = True
        self._take()  # whole messages were all taken by feed(): only a fault is left to find
        self.truncated = bool(self._buffer)
        self._buffer.clear()
        return []

    def _take(self) -> list[EventStreamMessage]:
        messages: list[EventStreamMessage] = []
        buffer = self._buffer
        start = 0
        try:
            while len(buffer) - start >= _PRELUDE:
                total = self._check_prelude(buffer, start)
                if len(buffer) - start < total:
                    break
                messages.append(self._message(bytes(buffer[start : start + total])))
                start += total
        except StreamProtocolError:
            if not messages:
                raise
        finally:
            del buffer[:start]
        return messages

    @staticmethod
    def _check_prelude(buffer: bytearray, start: int) -> int:
        """The total length of the message at `start`, its prelude checked."""
        head = bytes(buffer[start : start + _PRELUDE])
        total, headers_len, prelude_crc = _u32(head, 0), _u32(head, 4), _u32(head, 8)
        prelude = head[:8]
        if zlib.crc32(prelude) != prelude_crc:
            raise _error(
                f"expected prelude CRC32 {prelude_crc:#010x}, computed {zlib.crc32(prelude):#010x}",
                prelude,
            )
        if total > _MAX_MESSAGE or headers_len > _MAX_HEADERS:
            raise _error(
                f"expected a message under 16 MiB with headers under 128 KiB, got "
                f"{total} bytes with {headers_len} of headers",
                prelude,
            )
        if total < _PRELUDE + headers_len + _CRC:
            raise _error(f"expected a message length of at least 16, got {total}", prelude)
        return total

    def _message(self, raw: bytes) -> EventStreamMessage:
        """One whole message, its CRC and headers checked."""
        total = len(raw)
        headers_len = _u32(raw, 4)
        message_crc = _u32(raw, total - _CRC)
        computed = zlib.crc32(raw[: total - _CRC])
        if computed != message_crc:
            raise _error(
                f"expected message CRC32 {message_crc:#010x}, computed {computed:#010x}", raw
            )
        head = raw[_PRELUDE : _PRELUDE + headers_len]
        if head == self._last_head:
            headers = dict(self._last_headers)  # each message its own dict, as parsed
        else:
            headers = _parse_headers(head, raw)
            self._last_head = head
            self._last_headers = dict(headers)
        return EventStreamMessage(headers, raw[_PRELUDE + headers_len : total - _CRC])


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One eventstream message with string headers, both CRCs computed (what a server sends)."""
    head = bytearray()
    for name, value in headers.items():
        key, text = name.encode(), value.encode()
        head += bytes([len(key)]) + key + b"\x07" + struct.pack(">H", len(text)) + text
    prelude = struct.pack(">II", _PRELUDE + len(head) + len(payload) + _CRC, len(head))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def eventstream_payload(message: EventStreamMessage) -> dict[str, Any]:
    """A message as the dict boto3 yields: `{event type: payload}` (exceptions likewise)."""
    kind = message.headers.get(":message-type", "event")
    if kind == "event":
        name = message.headers.get(":event-type")
    elif kind == "exception":
        name = message.headers.get(":exception-type")
    else:
        # A protocol-level error message: its code is free-form (not an event type the
        # decoder could tell from an event), so it goes under one known key.
        code = message.headers.get(":error-code")
        text = message.headers.get(":error-message", "")
        return {"error": {"errorCode": None if code is None else str(code), "message": str(text)}}
    if not isinstance(name, str):
        raise _error(f"expected an :event-type header, got {name!r}", message.payload)
    try:
        body = jiter.from_json(message.payload, allow_inf_nan=False) if message.payload else {}
    except ValueError as exc:
        raise _error(
            f"expected a JSON payload, got invalid JSON ({exc})", message.payload
        ) from None
    return {name: body}
