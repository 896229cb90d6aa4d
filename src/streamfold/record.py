"""Record live provider streams into replayable files, and pace recordings back out.

A recording is the provider's stream exactly as it arrived (`.sse`, `.ndjson`,
`.eventstream`), so `load_recording` reads it like any other. Its timing goes in a
sidecar next to it, `<file>.timing.json`:

    {"version": 1, "chunks": [[end_offset, seconds], ...]}

one pair per chunk received: the byte offset where the chunk ended in the file and the
seconds since the stream was opened (with `from_first_chunk=True`, as `streamfold record`
does: since the first chunk arrived). `streamfold replay` and `streamfold serve` use it to
pace a replay as the original arrived; without it they pace by a fixed delay per event
(`EVENT_INTERVAL`).

    from streamfold.record import tee

    for event in tee(response.iter_bytes(), "fixtures/answer.sse"):
        ...                      # the events of `fold`, while the file is written

Decoded chunks (dicts, or SDK objects with `model_dump()`) are written as SSE frames,
`event: <type>` (when the payload has a string "type") and `data: <json>`, which folds
the same way.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import AsyncIterable, Generator, Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from .aio import AsyncFold
from .arguments import check_bool, check_path, check_provider, check_source, describe
from .errors import UsageError
from .events import Event
from .fold import Fold, StreamFolder, _close_source
from .framing import StreamFormat

TIMING_SUFFIX = ".timing.json"
TIMING_VERSION = 1

EVENT_INTERVAL = 0.02
"""Seconds between events at speed 1 when a recording has no timing: 50 events a second,
about the pace at which a fast model streams tokens."""

MAX_RECORDED_SECONDS = 24 * 3600.0
"""The latest a timing mark may be: no model answers for a day."""

MIN_SPEED = 0.01
MAX_SPEED = 1000.0
"""A replay's speed is 0 (no waiting) or from MIN_SPEED to MAX_SPEED: a speed near 0
would turn each wait into hours (5e-324 makes it infinite) and stall the replay."""

_SSE_EVENT_END = re.compile(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)")


# The framings a recording can have (StreamFormat's values, "objects" apart).
_FORMATS = ("sse", "ndjson", "eventstream")


def timing_path(path: str | Path) -> Path:
    """The timing sidecar of a recording: `<file>.timing.json`."""
    return Path(str(check_path("timing_path", path)) + TIMING_SUFFIX)


def _as_bytes(chunk: Any) -> bytes:
    if isinstance(chunk, bytes | bytearray | memoryview):
        return bytes(chunk)
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    payload: Any = chunk
    if not isinstance(chunk, dict):
        dump = getattr(chunk, "model_dump", None)
        if not callable(dump):
            raise UsageError(
                "tee: expected bytes, str, a dict or an object with model_dump(), "
                f"got {type(chunk).__name__}"
            )
        from .fold import _sdk_payload

        payload = _sdk_payload(chunk)
    head = f"event: {payload['type']}\n" if isinstance(payload.get("type"), str) else ""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"{head}data: {data}\n\n".encode()


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


class _Writer:
    """Writes a recording and its timing sidecar; both are complete even if cut short."""

    def __init__(self, path: str | Path, timing: bool, *, from_first_chunk: bool = False) -> None:
        self.path = Path(path)
        self.timing = timing
        self.offset = 0
        self.marks: list[list[float]] = []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.file: IO[bytes] = self.path.open("wb")
        except OSError as exc:
            raise UsageError(
                f"{self.path}: cannot write a recording there: {_reason(exc)}"
            ) from None
        # The clock starts now (the stream was opened), or at the first chunk.
        self.start: float | None = None if from_first_chunk else time.monotonic()

    def write(self, chunk: Any) -> None:
        data = _as_bytes(chunk)
        if not data:
            return
        now = time.monotonic()  # (its arrival: before the time the file takes)
        if self.start is None:
            self.start = now
        self.file.write(data)
        # Flushed per chunk: a recording cut short by a crash still holds what arrived.
        self.file.flush()
        self.offset += len(data)
        self.marks.append([self.offset, round(now - self.start, 6)])

    def close(self) -> None:
        if self.file.closed:
            return
        self.file.close()
        if self.timing:
            body = {"version": TIMING_VERSION, "chunks": self.marks}
            sidecar = timing_path(self.path)
            try:
                sidecar.write_text(json.dumps(body) + "\n")
            except OSError as exc:
                raise UsageError(f"{sidecar}: cannot write the timing: {_reason(exc)}") from None

    def __enter__(self) -> _Writer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Tee(Fold):
    """Iterate the events of a stream while every chunk of it is written to a recording.

    Unlike `fold`, it keeps reading after the message completed, so what the provider
    sends after its end event (a trailing blank line, `data: [DONE]`) is recorded too.
    Stopping early keeps what arrived, in the file and in `snapshot()` (status cancelled).
    `from_first_chunk`: the clocks (the sidecar's, the fold's timing) start at the first
    chunk, not when the iteration starts.
    """

    def __init__(
        self,
        chunks: Iterable[Any],
        path: str | Path,
        provider: str | None,
        timing: bool,
        *,
        from_first_chunk: bool = False,
    ) -> None:
        self.path = Path(path)
        self._timing = timing
        self._from_first_chunk = from_first_chunk
        super().__init__(chunks, StreamFolder(provider))

    def _run(self) -> Generator[Event, None, None]:
        folder = self.folder
        if not self._from_first_chunk:
            folder.timing.start()  # the wait for the first chunk counts, as in fold()
        with _Writer(self.path, self._timing, from_first_chunk=self._from_first_chunk) as writer:
            try:
                for chunk in self._chunks:
                    # Written before it is folded: a chunk that breaks the fold is kept.
                    writer.write(chunk)
                    folder.timing.start()  # (from_first_chunk: on its arrival, not its fold)
                    if not folder.finished:
                        yield from folder.feed(chunk)
                if not folder.finished:
                    yield from folder.close()
            except GeneratorExit:
                folder.cancel()
                raise
            finally:
                _close_source(self._chunks)


class AsyncTee(AsyncFold):
    """The async `Tee`: async-iterate the events while the stream is recorded.

    A consumer that leaves early is handled as by `AsyncFold`; the file keeps what arrived.
    """

    def __init__(
        self,
        chunks: AsyncIterable[Any] | Iterable[Any],
        path: str | Path,
        provider: str | None,
        timing: bool,
    ) -> None:
        super().__init__(chunks, StreamFolder(provider))
        self.path = Path(path)
        self._timing = timing
        self._writer: _Writer | None = None

    async def _read(self) -> Any:
        if self._writer is None:
            self._writer = _Writer(self.path, self._timing)
        return await super()._read()

    def _fold_chunk(self, chunk: Any) -> list[Event]:
        assert self._writer is not None  # opened by the first read
        # Written before it is folded: a chunk that breaks the fold is kept.
        self._writer.write(chunk)
        return [] if self.folder.finished else self.folder.feed(chunk)

    def _ends_with_the_message(self) -> bool:
        return False  # what the provider sends after its end event is recorded too

    def _ended(self) -> None:
        if self._writer is not None:
            self._writer.close()


def tee(
    chunks: Iterable[Any],
    path: str | Path,
    provider: str | None = None,
    *,
    timing: bool = True,
    from_first_chunk: bool = False,
) -> Tee:
    """Fold a live stream into events while writing it to a recording (and its timing).

    `from_first_chunk`: time from the first chunk, not from the first read: for a stream
    whose request another process sent, whose start this one cannot know (`curl ... |
    streamfold record`: the wait before the first byte would be this process's start-up).
    """
    _check_tee("tee", chunks, path, provider, timing, asynchronous=False)
    check_bool("tee", "from_first_chunk", from_first_chunk)
    return Tee(chunks, path, provider, timing, from_first_chunk=from_first_chunk)


def atee(
    chunks: AsyncIterable[Any] | Iterable[Any],
    path: str | Path,
    provider: str | None = None,
    *,
    timing: bool = True,
) -> AsyncTee:
    """Async `tee`: fold an async stream into events while writing it to a recording."""
    _check_tee("atee", chunks, path, provider, timing, asynchronous=True)
    return AsyncTee(chunks, path, provider, timing)


def _check_tee(
    function: str, chunks: Any, path: Any, provider: Any, timing: Any, *, asynchronous: bool
) -> None:
    check_source(function, chunks, asynchronous=asynchronous)
    check_path(function, path)
    check_provider(function, provider)
    check_bool(function, "timing", timing)


def load_timing(path: str | Path) -> list[tuple[int, float]] | None:
    """The timing sidecar of a recording as (end offset, seconds) pairs; None if absent."""
    sidecar = timing_path(path)
    try:
        raw = sidecar.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"{sidecar}: expected a timing sidecar (JSON), got {exc}") from None
    return parse_timing(raw, sidecar)


def parse_timing(raw: bytes, source: str | Path = "timing") -> list[tuple[int, float]]:
    """A timing sidecar's bytes as (end offset, seconds) pairs; UsageError naming `source`
    if they are not one (for a reader that opens the file itself, guarded)."""
    sidecar = source
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"{sidecar}: expected a timing sidecar (JSON), got {exc}") from None
    marks = body.get("chunks") if isinstance(body, dict) else None
    # Seconds past MAX_RECORDED_SECONDS (or Infinity, NaN) would stall a replay for good.
    if not isinstance(marks, list) or not all(
        isinstance(m, list)
        and len(m) == 2
        and isinstance(m[0], int)
        and isinstance(m[1], int | float)
        and 0 <= m[1] <= MAX_RECORDED_SECONDS
        for m in marks
    ):
        raise UsageError(
            f"{sidecar}: expected {{'version': 1, 'chunks': [[offset, seconds], ...]}}, "
            "got another shape"
        )
    return [(int(m[0]), float(m[1])) for m in marks]


def split_frames(data: bytes, format: StreamFormat) -> list[bytes]:
    """Cut a recorded stream after each event; the pieces join back into `data`."""
    cuts: list[int] = []
    if format == "sse":
        cuts = [m.end() for m in _SSE_EVENT_END.finditer(data)]
    elif format == "ndjson":
        cuts = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    elif format == "eventstream":
        at = 0
        while at + 4 <= len(data):
            length = int.from_bytes(data[at : at + 4], "big")
            if length < 16:
                break
            at += length
            cuts.append(min(at, len(data)))
    pieces: list[bytes] = []
    start = 0
    for cut in cuts:
        if cut > start:
            pieces.append(data[start:cut])
            start = cut
    if start < len(data):
        pieces.append(data[start:])
    return pieces


def check_speed(speed: float) -> float:
    """`speed` if a replay can use it (see MIN_SPEED); UsageError naming the range if not."""
    if not isinstance(speed, int | float) or isinstance(speed, bool):
        raise UsageError(f"speed: expected a number, got {describe(speed)}")
    if speed == 0 or MIN_SPEED <= speed <= MAX_SPEED:  # False for NaN
        return speed
    raise UsageError(
        f"speed: expected 0 (no waiting) or a number from {MIN_SPEED:g} to {MAX_SPEED:g}, "
        f"got {speed!r}"
    )


def schedule(
    data: bytes,
    format: StreamFormat,
    *,
    speed: float = 1.0,
    timing: list[tuple[int, float]] | None = None,
) -> list[tuple[float, bytes]]:
    """(seconds to wait, chunk) pairs that replay a recording at `speed` (0: no waiting).

    With timing marks the chunks and gaps are those recorded; without, one chunk per
    event, `EVENT_INTERVAL` apart.
    """
    check_speed(speed)
    if not isinstance(data, bytes | bytearray):
        raise UsageError(f"schedule: data: expected the recording's bytes, got {describe(data)}")
    if format not in _FORMATS:
        raise UsageError(
            f"schedule: format: expected one of {', '.join(_FORMATS)}, got {describe(format)}"
        )
    if timing and timing[-1][0] == len(data):
        out: list[tuple[float, bytes]] = []
        start, before = 0, 0.0
        for end, seconds in timing:
            if end <= start:
                continue
            wait = max(0.0, seconds - before) / speed if speed else 0.0
            out.append((wait, data[start:end]))
            start, before = end, seconds
        return out
    wait = EVENT_INTERVAL / speed if speed else 0.0
    return [(0.0 if i == 0 else wait, piece) for i, piece in enumerate(split_frames(data, format))]


def arrival_times(
    data: bytes, format: StreamFormat, timing: list[tuple[int, float]] | None = None
) -> list[float]:
    """When each chunk of `schedule(data, format, timing=timing)` arrived at speed 1, in
    seconds from the start: what a replay's timing reads (`streamfold.timing`)."""
    return list(itertools.accumulate(wait for wait, _ in schedule(data, format, timing=timing)))


__all__ = [
    "EVENT_INTERVAL",
    "AsyncTee",
    "Tee",
    "arrival_times",
    "atee",
    "check_speed",
    "load_timing",
    "parse_timing",
    "schedule",
    "split_frames",
    "tee",
    "timing_path",
]
