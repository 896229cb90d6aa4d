"""An error's text is bounded, whatever value the stream put where.

Every value of every event of every recording (each distinct place once: the event's type
and the value's path) is replaced by a value far larger than any message should show: a
long string, an integer of thousands of digits, a long list. Whatever the fold then says,
it says it in a bounded number of characters: a hostile server cannot flood a log through
streamfold's errors, and only StreamfoldErrors escape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from invoke_support import INVOKE_SOURCES, chunk_payload, eventstream_message
from support import read

from reliability.test_fuzz import ALL, Corrupt, Stream, parse, render
from streamfold import StreamfoldError, fold
from streamfold.framing import SSEDecoder
from streamfold.limits import Limits

# The most characters an error's text may have: its own words, plus previews of what
# arrived (errors.preview: 300 characters each).
MAX_ERROR_CHARS = 2_000

# Far above that, and under the limits the fold is given (a value over a limit is refused
# by the limit, which says so briefly: that is tested elsewhere).
LONG_STRING = "x" * 5_000
LONG_DIGITS = b"7" * 5_000  # more digits than int() turns into text by default (4,300)
LONG_LIST = list(range(1_500))
_PLACEHOLDER = "\x00placeholder\x00"

LIMITS = Limits(max_bytes=1 << 30)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value in a payload, containers included (not the payload itself)."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for n, item in enumerate(value[:3]):  # the first few elements stand for the rest
            yield from _paths(item, (*path, n))


def _shape(path: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple("[]" if isinstance(step, int) else step for step in path)


def _replaced(payload: Any, path: tuple[Any, ...], value: Any) -> Any:
    copy = json.loads(json.dumps(payload))
    target = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return copy


def _payload_bytes(payload: Any) -> bytes:
    data = json.dumps(payload, separators=(",", ":")).encode()
    return data.replace(json.dumps(_PLACEHOLDER).encode(), LONG_DIGITS)


def _places(stream: Stream) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """(event number, path) for each distinct (event type, path shape) of the stream."""
    seen: set[tuple[Any, ...]] = set()
    for n, event in enumerate(stream.events):
        if not event.is_json or not isinstance(event.payload, dict):
            continue
        kind = (event.name, event.payload.get("type"), tuple(sorted(event.headers.items())))
        for path in _paths(event.payload):
            key = (kind, _shape(path))
            if key not in seen:
                seen.add(key)
                yield n, path


def _check(chunks: list[bytes], provider: str | None, where: str) -> None:
    try:
        for _ in fold(chunks, provider, limits=LIMITS):
            pass
    except StreamfoldError as exc:
        text = str(exc)
        assert len(text) <= MAX_ERROR_CHARS, f"{where}: a {len(text):,}-character error"
    # Anything else escapes the test as the untyped error it is.


KINDS = ("string", "digits", "list")


def _mutated(rel: str) -> Iterator[tuple[str, bytes]]:
    """The recording with one place made huge, for each place; the kind of huge value
    turns with the place, so every kind meets every kind of field across the recordings."""
    stream = parse(rel)
    for count, (n, path) in enumerate(_places(stream)):
        event = stream.events[n]
        kind = KINDS[count % len(KINDS)]
        value: Any = {"string": LONG_STRING, "list": LONG_LIST}.get(kind, _PLACEHOLDER)
        payload = Corrupt(_payload_bytes(_replaced(event.payload, path, value)))
        events = list(stream.events)
        events[n] = type(event)(None, event.name, payload, True, dict(event.headers))
        where = f"{rel} event {n} at {list(path)}: a long {kind}"
        yield where, render(Stream(rel, stream.kind, b"", events))


@pytest.mark.parametrize("rel", ALL)
def test_a_huge_value_anywhere_gives_a_bounded_error(rel: str) -> None:
    for where, data in _mutated(rel):
        _check([data], None, where)


def _invoke_events(rel: str) -> list[dict[str, Any]]:
    decoder = SSEDecoder()
    events = [json.loads(e.data) for e in [*decoder.feed(read(rel)), *decoder.close()]]
    return [e for e in events if e.get("type") != "ping"]


@pytest.mark.parametrize("rel", INVOKE_SOURCES[:3])
def test_a_huge_value_in_a_bedrock_invoke_frame_gives_a_bounded_error(rel: str) -> None:
    # The invoke stream's own fields: the chunk's bytes and padding, and the invocation
    # metrics Bedrock adds to the last event.
    events = _invoke_events(rel)
    last = {**events[-1], "amazon-bedrock-invocationMetrics": {"inputTokenCount": 1}}
    headers = {":event-type": "chunk", ":content-type": "application/json",
               ":message-type": "event"}  # fmt: skip
    frames = [eventstream_message(headers, json.dumps(chunk_payload(e)).encode()) for e in events]
    cases: list[tuple[str, bytes]] = []
    for value in (LONG_STRING, LONG_LIST, _PLACEHOLDER, 5):
        for field in ("bytes", "p"):
            body = _payload_bytes({**chunk_payload(events[0]), field: value})
            cases.append((f"chunk.{field}", eventstream_message(headers, body)))
        for field in ("inputTokenCount", "invocationLatency"):
            metrics = {"amazon-bedrock-invocationMetrics": {field: value}}
            inner = _payload_bytes({**last, **metrics})
            chunk = {"bytes": __import__("base64").b64encode(inner).decode()}
            cases.append(
                (f"metrics.{field}", eventstream_message(headers, json.dumps(chunk).encode()))
            )
    for where, frame in cases:
        _check([*frames[:-1], frame], "bedrock-invoke", f"{rel}: {where}")
