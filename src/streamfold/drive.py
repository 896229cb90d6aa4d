"""The loop both front-end protocols run over a fold's events: one driver for the UI
message stream (`streamfold.ui`) and AG-UI (`streamfold.agui`).

An encoder is sans-IO: `start()`, `feed(event)` per event or `tool_result(result)` per
result the app sent, then `close()`, or `fail(exc)` when the events raised a
StreamfoldError (the provider's stream or the fold broke: the protocol says so as its
own error, last).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Protocol, TypeVar

from .errors import StreamfoldError
from .events import Event
from .message import ToolResult

T = TypeVar("T")


class Encoder(Protocol[T]):
    """What `drive` runs: streamfold events (and the app's tool results) in, a protocol's
    items out."""

    def start(self) -> list[T]: ...
    def feed(self, event: Event) -> list[T]: ...
    def tool_result(self, result: ToolResult) -> list[T]: ...
    def fail(self, error: BaseException | str) -> list[T]: ...
    def close(self) -> list[T]: ...


def _step(encoder: Encoder[T], event: Event | ToolResult) -> list[T]:
    return encoder.tool_result(event) if isinstance(event, ToolResult) else encoder.feed(event)


def drive(encoder: Encoder[T], events: Iterable[Event | ToolResult]) -> Iterator[T]:
    """`encoder`'s items for `events`: start, each event or tool result, then close; a
    StreamfoldError raised by the events ends them with the encoder's `fail`."""
    yield from encoder.start()
    iterator = iter(events)
    while True:
        try:
            event = next(iterator)
        except StopIteration:
            break
        except StreamfoldError as exc:
            yield from encoder.fail(exc)
            return
        yield from _step(encoder, event)
    yield from encoder.close()


async def adrive(
    encoder: Encoder[T], events: AsyncIterable[Event | ToolResult]
) -> AsyncIterator[T]:
    """Async `drive`: over `async for` events (an `afold`, say)."""
    for item in encoder.start():
        yield item
    iterator = aiter(events)
    while True:
        try:
            event = await anext(iterator)
        except StopAsyncIteration:
            break
        except StreamfoldError as exc:
            for item in encoder.fail(exc):
                yield item
            return
        for item in _step(encoder, event):
            yield item
    for item in encoder.close():
        yield item


__all__ = ["Encoder", "adrive", "drive"]
