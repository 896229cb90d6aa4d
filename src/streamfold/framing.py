"""Framing: bytes in, frames out. Server-sent events (WHATWG rules) and NDJSON.

Both are incremental: `feed()` may receive any split of the stream (inside a UTF-8
character, between CR and LF, mid-JSON) and returns the frames completed so far.
"""

from __future__ import annotations

from typing import Final, Literal

from .errors import UsageError
from .framing_state import NDJSONState, SSEState

_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"
# One-byte tests read a byte's value: `13 in data` is one memchr, where `b"\r" in data`
# first tries the bytes as an integer and builds and drops a TypeError (~150 ns a test,
# compiled or not; it was 5% of a live connection's fold).
_LF: Final = 0x0A  # b"\n"
_CR: Final = 0x0D  # b"\r"
_NUL: Final = 0x00

StreamFormat = Literal["sse", "ndjson", "eventstream", "objects"]
"""How a stream is framed; "objects" is a stream of already-parsed provider objects."""


def sniff_format(head: bytes) -> StreamFormat | None:
    """Tell the framing from the first bytes of a stream; None when there are too few."""
    if head.startswith(_BOM):
        head = head[3:]
    elif _BOM.startswith(head):
        return None  # nothing yet, or a byte-order mark begun: its first byte is no "{"
    head = head.lstrip(_WHITESPACE)
    if not head:
        return None
    first = head[:1]
    if first == b"{":
        return "ndjson"
    if first == b"\x00":
        # An AWS eventstream prelude starts with a big-endian length well under 16 MiB.
        return "eventstream"
    return "sse"


class SSEEvent:
    """One server-sent event. `data` is the raw UTF-8 bytes of its joined data lines."""

    # A plain class, built by position: one is made per event of every stream, and it costs
    # what the named tuple built with tuple.__new__ did interpreted (~85 ns) and a quarter
    # of that compiled.
    __slots__ = ("data", "event", "id", "retry")

    def __init__(
        self,
        data: bytes,
        event: str | None = None,
        id: str | None = None,
        retry: int | None = None,
    ) -> None:
        self.data = data
        self.event = event
        self.id = id
        self.retry = retry

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SSEEvent):
            return NotImplemented
        return (self.data, self.event, self.id, self.retry) == (
            other.data,
            other.event,
            other.id,
            other.retry,
        )

    def __repr__(self) -> str:
        return (
            f"SSEEvent({self.data!r}, event={self.event!r}, id={self.id!r}, retry={self.retry!r})"
        )

    @property
    def text(self) -> str:
        """The data as text."""
        return self.data.decode("utf-8", "replace")


_EVENT_NAMES: dict[bytes, str] = {}


def _event_name(value: bytes) -> str:
    name = _EVENT_NAMES.get(value)
    if name is None:
        name = value.decode("utf-8", "replace")
        if len(_EVENT_NAMES) < 256 and len(value) < 64:
            _EVENT_NAMES[value] = name  # a stream repeats a few names: decode each once
    return name


class SSEDecoder:
    """Incremental server-sent-events parser (LF, CR and CRLF line ends, comments, BOM)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._started = False
        self._closed = False
        # A chunk that ended in CR: an LF at the start of the next one belongs to it.
        self._pending_cr = False
        self._parked: list[bytes] = []

    def to_state(self) -> SSEState:
        """This framer as saved-state data (pieces parked for a line end join the buffer)."""
        return SSEState(
            buffer=self._buffer + b"".join(self._parked),
            data=list(self._data),
            event=self._event,
            id=self._id,
            retry=self._retry,
            started=self._started,
            closed=self._closed,
            pending_cr=self._pending_cr,
        )

    @classmethod
    def from_state(cls, state: SSEState) -> SSEDecoder:
        """The framer `state` describes."""
        framer = cls()
        framer._buffer = state.buffer
        framer._data = list(state.data)
        framer._event = state.event
        framer._id = state.id
        framer._retry = state.retry
        framer._started = state.started
        framer._closed = state.closed
        framer._pending_cr = state.pending_cr
        return framer

    def _take_buffer(self, data: bytes) -> bytes:
        if self._parked:
            self._parked.append(data)
            buffer = self._buffer + b"".join(self._parked)
            self._parked = []
            return buffer
        return self._buffer + data if self._buffer else data

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Feed bytes; return the events they complete."""
        if self._closed:
            raise UsageError("SSEDecoder.feed: expected bytes before close(), got a feed after")
        if not data:
            return []
        if self._pending_cr:
            self._pending_cr = False
            if data[:1] == b"\n":
                data = data[1:]
        if self._started and _LF not in data and _CR not in data:
            # No line end: park the piece, so a long line fed in small pieces costs O(n).
            self._parked.append(data)
            return []
        buffer = self._take_buffer(data)
        if not self._started:
            if len(buffer) < 3 and _BOM.startswith(buffer):
                self._buffer = buffer
                return []
            if buffer.startswith(_BOM):
                buffer = buffer[3:]
            self._started = True
        events: list[SSEEvent] = []
        if _CR not in buffer:
            # The common case, LF only: one C-level split, and the two line kinds that
            # make up nearly every stream (data lines, blank lines) handled inline.
            lines = buffer.split(b"\n")
            self._buffer = lines.pop()
            pending = self._data
            for line in lines:
                if line[:5] == b"data:":
                    pending.append(line[6:] if line[5:6] == b" " else line[5:])
                elif line[:6] == b"event:":
                    value = line[7:] if line[6:7] == b" " else line[6:]
                    name = _EVENT_NAMES.get(value)
                    self._event = _event_name(value) if name is None else name
                elif line:
                    self._line(line, events)
                    pending = self._data  # an error line may have dispatched it
                else:
                    if pending:
                        joined = pending[0] if len(pending) == 1 else b"\n".join(pending)
                        events.append(SSEEvent(joined, self._event, self._id, self._retry))
                        pending = self._data = []
                    self._event = None
                    self._retry = None
            return events
        start = 0
        end = len(buffer)
        while start < end:
            lf = buffer.find(b"\n", start)
            cr = buffer.find(b"\r", start, lf if lf != -1 else end)
            if cr != -1:
                self._line(buffer[start:cr], events)
                if cr + 1 == end:
                    self._pending_cr = True
                    start = end
                else:
                    start = cr + 2 if buffer[cr + 1 : cr + 2] == b"\n" else cr + 1
            elif lf != -1:
                self._line(buffer[start:lf], events)
                start = lf + 1
            else:
                break
        self._buffer = buffer[start:]
        return events

    def take_at_boundary(self, data: bytes) -> tuple[list[SSEEvent], bytes] | None:
        """Feed `data` up to its first event boundary; hand back the rest, unparsed.

        For a caller that reads whole events from the bytes itself (the fold's hot lane):
        gives the events completed before the boundary, and the bytes after it plus
        anything this decoder held, which then begin at an event boundary of an LF-only
        stream (`buffer.find(b"\n\n")` finds event ends). Every byte the caller does not
        take must come back through `feed()`, in order; a rest with no whole event in it
        is fed here, and the bytes handed back are then empty. None, with nothing fed,
        when `data` holds a CR or no boundary: the caller feeds it as usual.
        """
        if _CR in data or self._pending_cr or self._closed:
            return None
        if (
            data[-2:] == b"\n\n"
            and not self._buffer
            and not self._parked
            and not self._data
            and self._started
            and self._event is None
            and self._retry is None
        ):
            # A live stream's chunk: whole events, and nothing held from the last one.
            return [], data
        if _LF not in data:
            return None
        events: list[SSEEvent] = []
        if self._data or self._event is not None or self._retry is not None:
            # Inside an event: feed through its end (a blank line) the usual way.
            if not self._buffer and not self._parked and data[:1] == b"\n":
                cut = 1  # the last chunk ended a line; this one starts with a blank line
            else:
                cut = data.find(b"\n\n") + 2
                if cut < 2:
                    return None
            events = self.feed(data[:cut])
            data = data[cut:]
        elif not self._started:
            if self._buffer or data[:1] == _BOM[:1]:
                return None  # a byte-order mark may be starting: feed() strips it
            self._started = True
        # Neither the kept line start nor a parked piece ever holds a CR (feed() sees to
        # it), so the whole buffer is LF-only.
        buffer = self._take_buffer(data)
        self._buffer = b""
        if buffer.find(b"\n\n") < 0:
            # No whole event to take (small network pieces): the usual way is cheaper.
            events.extend(self.feed(buffer))
            buffer = b""
        return events, buffer

    def close(self) -> list[SSEEvent]:
        """End of stream: deliver a last event that had no trailing blank line."""
        if self._closed:
            return []
        self._closed = True
        events: list[SSEEvent] = []
        self._buffer = self._take_buffer(b"")
        if self._buffer:
            self._line(self._buffer, events)
            self._buffer = b""
        self._dispatch(events)
        return events

    def _line(self, line: bytes, events: list[SSEEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line[:5] == b"data:":
            value = line[5:]
            self._data.append(value[1:] if value[:1] == b" " else value)
            return
        if line[:1] == b":":
            return
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = _event_name(value)
        elif name == b"id":
            if _NUL not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
        elif name == b"error":
            # Not an SSE field: llama.cpp's server (and GPUStack, in front of it) reports a
            # failure mid-stream as an `error: {...}` line. Dropped as the standard says,
            # the failure would vanish and the message end as merely cut: it is read as
            # the event `event: error` + `data: {...}` would be, apart from what came
            # before it.
            if self._data or self._event is not None:
                self._dispatch(events)
            self._data.append(value)
            self._event = "error"

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            events.append(SSEEvent(data, self._event, self._id, self._retry))
        elif self._event is not None or self._retry is not None:
            # An event with no data is not dispatched (WHATWG), but its fields reset.
            pass
        self._data = []
        self._event = None
        self._retry = None


class NDJSONDecoder:
    """Incremental newline-delimited JSON framing: one JSON value per non-blank line."""

    def __init__(self) -> None:
        self._buffer = b""
        self._parked: list[bytes] = []
        self._closed = False
        # False until the first line is taken: a byte-order mark may open the stream.
        self._started = False

    def to_state(self) -> NDJSONState:
        """This framer as saved-state data (pieces parked for a line end join the buffer)."""
        return NDJSONState(
            buffer=self._buffer + b"".join(self._parked),
            closed=self._closed,
            started=self._started,
        )

    @classmethod
    def from_state(cls, state: NDJSONState) -> NDJSONDecoder:
        """The framer `state` describes."""
        framer = cls()
        framer._buffer = state.buffer
        framer._closed = state.closed
        framer._started = state.started
        return framer

    def feed(self, data: bytes) -> list[bytes]:
        """Feed bytes; return the complete, non-blank lines (without line ends)."""
        if self._closed:
            raise UsageError("NDJSONDecoder.feed: expected bytes before close(), got a feed after")
        if _LF not in data:
            self._parked.append(data)
            return []
        if self._parked:
            self._parked.append(data)
            buffer = self._buffer + b"".join(self._parked)
            self._parked = []
        else:
            buffer = self._buffer + data if self._buffer else data
        if not self._started:
            # The first line is whole in the buffer, and with it any byte-order mark.
            self._started = True
            if buffer.startswith(_BOM):
                buffer = buffer[3:]
        lines = buffer.split(b"\n")
        self._buffer = lines.pop()
        return [s for line in lines if (s := line.strip())]

    def close(self) -> list[bytes]:
        """End of stream: the last line, if it had no line end."""
        if self._closed:
            return []
        self._closed = True
        rest = self._buffer + b"".join(self._parked)
        if not self._started and rest.startswith(_BOM):
            rest = rest[3:]
        rest = rest.strip()
        self._parked = []
        self._buffer = b""
        return [rest] if rest else []
