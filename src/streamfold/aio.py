"""The async layer: `afold` over an async (or sync) stream, on asyncio or trio via anyio.

The only module that imports anyio; all the work is done by the synchronous StreamFolder.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable
from typing import Any

import anyio

from .events import Event, MessageCompleted
from .fold import StreamFolder, _source
from .limits import DEFAULT_LIMITS, Limits
from .message import Message


class AsyncFold:
    """Async-iterate the events of a stream; `snapshot()` reads the message so far.

    If the consumer is cancelled while the fold waits for input, or leaves an
    `async with afold(...)` block early, the snapshot keeps everything received, with
    status cancelled.
    """

    def __init__(self, chunks: AsyncIterable[Any] | Iterable[Any], folder: StreamFolder) -> None:
        self._chunks = chunks
        self.folder = folder
        self._events = self._run()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    async def __anext__(self) -> Event:
        return await self._events.__anext__()

    async def __aenter__(self) -> AsyncFold:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def snapshot(self) -> Message:
        """The message so far."""
        return self.folder.snapshot()

    def partial_arguments(self, index: int) -> Any:
        """The tool call at slot `index`: its arguments parsed so far (`partial_arguments=True`)."""
        return self.folder.partial_arguments(index)

    async def aclose(self) -> None:
        """Stop early: the message keeps everything received, with status cancelled."""
        await self._events.aclose()
        if not self.folder.finished:
            self.folder.cancel()

    async def _run(self) -> AsyncGenerator[Event, None]:
        folder = self.folder
        try:
            if isinstance(self._chunks, AsyncIterable):
                async for chunk in self._chunks:
                    for event in folder.feed(chunk):
                        yield event
                    if folder.finished:
                        # The message is over: release the source (an HTTP response, an
                        # SDK stream) instead of leaving it half read.
                        aclose = getattr(self._chunks, "aclose", None)
                        if callable(aclose):
                            await aclose()
                        return
            else:
                for chunk in self._chunks:
                    for event in folder.feed(chunk):
                        yield event
                    if folder.finished:
                        return
                    # A sync source must not starve the event loop.
                    await anyio.lowlevel.checkpoint()
            for event in folder.close():
                yield event
        except (GeneratorExit, anyio.get_cancelled_exc_class()):
            folder.cancel()
            raise


def afold(
    chunks: AsyncIterable[Any] | Iterable[Any] | Any,
    provider: str | None = None,
    *,
    choice: int = 0,
    strict: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    partial_arguments: bool = False,
) -> AsyncFold:
    """Fold an async stream into events (bytes, str, dicts or SDK objects).

    `partial_arguments`: as for `fold`, tool-call PartDeltas carry `arguments_changes`.
    """
    source, provider = _source(chunks, provider)
    return AsyncFold(
        source,
        StreamFolder(
            provider,
            choice=choice,
            strict=strict,
            limits=limits,
            partial_arguments=partial_arguments,
        ),
    )


async def afold_message(
    chunks: AsyncIterable[Any] | Iterable[Any] | Any,
    provider: str | None = None,
    *,
    choice: int = 0,
    strict: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    partial_arguments: bool = False,
) -> Message:
    """Fold an async stream and return only the final Message."""
    final: Message | None = None
    async for event in afold(
        chunks,
        provider,
        choice=choice,
        strict=strict,
        limits=limits,
        partial_arguments=partial_arguments,
    ):
        if isinstance(event, MessageCompleted):
            final = event.message
    assert final is not None  # a fold always ends with MessageCompleted
    return final
