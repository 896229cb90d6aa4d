"""Recorded streams: read a .sse / .ndjson / .eventstream file and fold it like a live one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import jiter

from .arguments import check_path
from .errors import StreamfoldError, UsageError
from .framing import NDJSONDecoder, SSEDecoder, StreamFormat, sniff_format
from .providers import detect_provider

_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Recording:
    """A recorded provider stream: its bytes, framing and provider. Iterate it to fold it."""

    data: bytes
    format: StreamFormat
    provider: str | None
    path: str | None = None

    def __iter__(self) -> Iterator[bytes]:
        for start in range(0, len(self.data), _CHUNK):
            yield self.data[start : start + _CHUNK]


def bundled_recordings() -> Path:
    """The directory of recordings shipped inside the package."""
    return Path(str(resources.files("streamfold") / "recordings"))


def detect_recording(data: bytes) -> tuple[StreamFormat | None, str | None]:
    """Sniff a stream's framing and provider from its bytes (either may be None)."""
    kind = sniff_format(data[:4096])
    if kind is None:
        return None, None
    if kind == "eventstream":
        return kind, _eventstream_provider(data)
    frames: list[tuple[bytes, str | None]]
    if kind == "sse":
        decoder = SSEDecoder()
        events = [*decoder.feed(data[: 256 * 1024]), *decoder.close()]
        frames = [(e.data, e.event) for e in events[:16]]
    else:
        ndjson = NDJSONDecoder()
        frames = [(line, None) for line in [*ndjson.feed(data[: 256 * 1024]), *ndjson.close()]]
        frames = frames[:16]
    for payload_bytes, event in frames:
        try:
            payload = jiter.from_json(payload_bytes)
        except ValueError:
            continue
        provider = detect_provider(payload, event)
        if provider is not None:
            return kind, provider
    return kind, None


def _eventstream_provider(data: bytes) -> str:
    """ConverseStream or InvokeModelWithResponseStream, by the first message's event."""
    from .eventstream import EventStreamFramer, eventstream_payload

    try:
        for message in EventStreamFramer().feed(data[: 256 * 1024])[:1]:
            return detect_provider(eventstream_payload(message)) or "bedrock"
    except StreamfoldError:
        pass  # a broken stream: the fold says how, as Bedrock's
    return "bedrock"


def load_recording(path: str | Path) -> Recording:
    """Read a recorded stream and detect its provider; raise UsageError if it is no stream."""
    file = Path(check_path("load_recording", path))
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise UsageError(f"{file}: cannot read the recording: {exc.strerror or exc}") from None
    kind, provider = detect_recording(data)
    if kind is None:
        raise UsageError(
            f"{file}: expected a recorded stream (SSE, NDJSON, eventstream), got an empty file"
        )
    if provider is None:
        raise UsageError(
            f"{file}: expected a recorded {kind} stream from a known provider, "
            "got events that match none"
        )
    return Recording(data=data, format=kind, provider=provider, path=str(file))
