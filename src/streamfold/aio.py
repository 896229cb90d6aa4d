"""The async layer: `afold` over an async (or sync) stream, on asyncio or trio via anyio.

The only module that imports anyio; all the work is done by the synchronous StreamFolder.
`AsyncFold` is a plain async iterator, not an async generator: an abandoned async
generator is finalised only later, by the event loop (trio warns about it), so a consumer
that stopped would leave the fold unfinished until the garbage collector came by.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import sys
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Iterable, Iterator
from typing import Any

import anyio

from .arguments import check_timing
from .errors import OutputValidationError, UsageError
from .events import Event, MessageCompleted
from .fold import StreamFolder, _check_folder_arguments, _output_folder, _source, _timing_for
from .limits import DEFAULT_LIMITS
from .message import Message
from .timing import StreamTiming

# How long closing a source may take once the fold is over: a source whose close hangs
# must not hang the consumer that left (the close runs shielded from cancellation).
CLOSE_WITHIN = 5.0

# The input ended: `_read` returns this instead of raising across an await.
_END: Any = object()
# Closes started where nothing can be awaited (`_close_soon`): held until they finish.
_CLOSING: set[Any] = set()


class AsyncFold:
    """Async-iterate the events of a stream; `snapshot()` reads the message so far.

    A consumer that leaves early gets status cancelled at once, with everything received,
    and the source (its `aclose()` or `close()`, if it has one) is closed:

    - cancelled while the fold waits for input, `aclose()`, or leaving
      `async with afold(...)`: the source is closed before control returns;
    - leaving an `async for` over the fold early (a break, an exception or a cancellation
      in the loop body): the fold is cancelled when the loop lets go of its iterator,
      which CPython does at that moment, and the source is closed by a task started on
      the running event loop (nothing can be awaited there: Python calls no hook).

    A source that raises ends the fold there: the error propagates, the message stays
    unfinished, and the source is closed. A message that completes closes its source
    without reading the rest.
    """

    def __init__(self, chunks: AsyncIterable[Any] | Iterable[Any], folder: StreamFolder) -> None:
        self.folder = folder
        self._source: Any = chunks
        # The source's iterator, opened by the first read.
        self._reader: Any = None
        self._sync = not isinstance(chunks, AsyncIterable)
        self._pending: Iterator[Event] = iter(())
        # The input is done with: exhausted, failed, closed or abandoned.
        self._over = False
        # The source's async closes, started and not yet awaited (see `_finish`).
        self._closing: list[Awaitable[Any]] = []

    def __aiter__(self) -> AsyncIterator[Event]:
        return _Loop(self)

    def __iter__(self) -> Any:
        # `for` over afold(): without this, a bare TypeError that does not say what to do.
        raise UsageError(
            "afold: expected `async for event in afold(...)`, got `for`: for a sync stream "
            "outside an event loop, use fold()"
        )

    async def __anext__(self) -> Event:
        event = next(self._pending, None)
        while event is None:
            if self._over:
                raise StopAsyncIteration
            self._pending = iter(await self._step())
            event = next(self._pending, None)
        return event

    async def __aenter__(self) -> AsyncFold:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def timing(self) -> StreamTiming:
        """When the chunks arrived, so far (see streamfold.timing)."""
        return self.folder.timing

    def snapshot(self) -> Message:
        """The message so far."""
        return self.folder.snapshot()

    def partial_arguments(self, index: Any) -> Any:
        """The tool call at slot `index`: its arguments parsed so far (`partial_arguments=True`)."""
        return self.folder.partial_arguments(index)

    @property
    def output(self) -> Any:
        """The structured output (`output=`): the latest partial value, then the final one."""
        return self.folder.output

    @property
    def output_error(self) -> OutputValidationError | None:
        """Why the structured output failed (it was sent as `OutputFailed`), or None."""
        return self.folder.output_error

    async def aclose(self) -> None:
        """Stop early: the message keeps everything received, with status cancelled."""
        await self._stop(cancel=True)

    def _fold_chunk(self, chunk: Any) -> list[Event]:
        """Fold one chunk of input (AsyncTee also writes it down)."""
        return self.folder.feed(chunk)

    def _ends_with_the_message(self) -> bool:
        """True when a completed message ends the input (AsyncTee reads on to the end)."""
        return self.folder.finished

    async def _step(self) -> list[Event]:
        """Read one chunk and fold it; at the end of the input, finish the message."""
        try:
            chunk = await self._read()
        except Exception as exc:
            self.folder.timing._failed(self.folder.snapshot, exc)  # (telemetry, if on)
            await self._stop(cancel=False)
            raise
        except BaseException:  # cancelled, or interrupted: the consumer is leaving
            await self._stop(cancel=True)
            raise
        try:
            if chunk is _END:
                events = [] if self.folder.finished else self.folder.close()
            else:
                events = self._fold_chunk(chunk)
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.folder.timing._failed(self.folder.snapshot, exc)  # (telemetry, if on)
            await self._stop(cancel=False)
            raise
        if chunk is _END or self._ends_with_the_message():
            await self._stop(cancel=False)
        return events

    async def _read(self) -> Any:
        reader = self._reader
        if reader is None:
            self.folder.timing.start()  # the wait for the first chunk counts
        if self._sync:
            if reader is None:
                reader = self._reader = iter(self._source)
            else:
                # A sync source must not starve the event loop.
                await anyio.lowlevel.checkpoint()
            return next(reader, _END)
        if reader is None:
            reader = self._reader = aiter(self._source)
        try:
            return await reader.__anext__()
        except StopAsyncIteration:
            return _END

    async def _stop(self, *, cancel: bool) -> None:
        """The input is done with: cancel the message if asked, and close the source."""
        if not self._over:
            self._finish(cancel)
        await _close_all(self._closing)

    def _abandon(self) -> None:
        """The `async for` over this fold let go of it early: cancel and close at once."""
        if not self._over:
            self._finish(cancel=True)
            _close_soon(self._closing)

    def _finish(self, cancel: bool) -> None:
        """Mark the input done with (the message cancelled, if asked) and close the source:
        a sync close at once, an async one put in `_closing` for the caller to await."""
        self._over = True
        if cancel and not self.folder.finished:
            self.folder.cancel()
        self._ended()
        owners = [self._source]
        if self._reader is not None and self._reader is not self._source:
            owners.insert(0, self._reader)  # the iterator first: it reads from the source
        self._reader = self._source = None
        for owner in owners:
            close = getattr(owner, "aclose", None)
            if not callable(close):
                close = getattr(owner, "close", None)
            if callable(close):
                # A source that fails to close changes nothing in the message.
                with contextlib.suppress(Exception):
                    result = close()
                    if inspect.isawaitable(result):
                        self._closing.append(result)

    def _ended(self) -> None:
        """Called once the input is done with, however it ended (AsyncTee closes its file)."""


class _Loop:
    """What an `async for` over an AsyncFold holds: when the loop lets go of it early (a
    break, an exception or a cancellation in the loop body), the fold is cancelled.

    Python calls no hook when a loop is left, but CPython frees the loop's iterator then;
    the fold itself may live on in the consumer's variable, so it cannot tell.
    """

    __slots__ = ("_fold", "_started")

    def __init__(self, fold: AsyncFold) -> None:
        self._fold = fold
        self._started = False

    def __aiter__(self) -> _Loop:
        return self

    def __anext__(self) -> Awaitable[Event]:
        self._started = True
        return self._fold.__anext__()

    def __del__(self) -> None:
        if self._started:
            self._fold._abandon()


async def _close_all(closing: list[Awaitable[Any]]) -> None:
    """Await the source's pending closes; shielded, so a cancelled consumer's source is
    closed all the same, and bounded, so a close that hangs cannot hang the consumer."""
    with anyio.move_on_after(CLOSE_WITHIN, shield=True):
        while closing:
            with contextlib.suppress(Exception):
                await closing.pop(0)


def _close_soon(closing: list[Awaitable[Any]]) -> None:
    """Await the source's pending closes where nothing can be awaited: in a task started
    on the running event loop (trio's or asyncio's). `aclose()` takes them if first."""
    if not closing:
        return
    trio = sys.modules.get("trio")
    if trio is not None:
        with contextlib.suppress(RuntimeError):  # not in a trio task
            trio.lowlevel.current_task()
            # Released by the consumer's own code (its loop ended), in its task: the close
            # starts now, while the run still takes tasks even if the consumer returns.
            trio.lowlevel.spawn_system_task(_close_all, closing)
            return
        with contextlib.suppress(RuntimeError):  # not in a trio run, or the run is over
            token = trio.lowlevel.current_trio_token()

            def spawn() -> None:
                # Runs in trio's own loop, where an error is an internal error of trio.
                try:
                    if closing:
                        trio.lowlevel.spawn_system_task(_close_all, closing)
                except RuntimeError:  # the run is ending: its nursery takes no more tasks
                    _drop(closing)

            token.run_sync_soon(spawn)
            return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _drop(closing)
        return

    def start() -> None:
        if closing:
            task = loop.create_task(_close_all(closing))
            _CLOSING.add(task)
            task.add_done_callback(_CLOSING.discard)

    loop.call_soon(start)


def _drop(closing: list[Awaitable[Any]]) -> None:
    """No event loop to close the source on: it is left to its own finaliser."""
    for result in closing:
        close = getattr(result, "close", None)
        if callable(close):
            close()  # a close never awaited must not warn that it was never awaited
    closing.clear()


def afold(
    chunks: AsyncIterable[Any] | Iterable[Any] | Any,
    provider: Any = None,
    *,
    choice: Any = 0,
    strict: Any = False,
    limits: Any = DEFAULT_LIMITS,
    partial_arguments: Any = False,
    started_at: Any = None,
    clock: Any = None,
    request: Any = None,
    output: Any = None,
    output_tool: Any = None,
) -> AsyncFold:
    """Fold an async stream into events (bytes, str, dicts, SDK objects or MessageDeltas).

    `partial_arguments`: as for `fold`, tool-call PartDeltas carry `arguments_changes`.
    `started_at`, `clock`: the timing's, and `request` (a `telemetry.RequestInfo`) what
    telemetry records of the request, as for `fold`. `output`, `output_tool`: the
    structured output, as for `fold` (`AsyncFold.output`).
    """
    if (clock is not None and not callable(clock)) or (
        started_at is not None and (type(started_at) is not float or not math.isfinite(started_at))
    ):
        started_at = check_timing("afold", clock, started_at)
    _check_folder_arguments(
        "afold", provider, choice, strict, "assistant", limits, partial_arguments, None
    )
    box = _output_folder("afold", output, output_tool)
    source, provider = _source(chunks, provider, "afold", asynchronous=True)
    folder = StreamFolder(
        provider,
        choice=choice,
        strict=strict,
        limits=limits,
        partial_arguments=partial_arguments,
        timing=_timing_for(clock, started_at, provider, request),
    )
    folder._output = box
    return AsyncFold(source, folder)


async def afold_message(
    chunks: AsyncIterable[Any] | Iterable[Any] | Any,
    provider: Any = None,
    *,
    choice: Any = 0,
    strict: Any = False,
    limits: Any = DEFAULT_LIMITS,
    partial_arguments: Any = False,
    started_at: Any = None,
    clock: Any = None,
    request: Any = None,
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
        started_at=started_at,
        clock=clock,
        request=request,
    ):
        if isinstance(event, MessageCompleted):
            final = event.message
    assert final is not None  # a fold always ends with MessageCompleted
    return final


async def afold_output(
    chunks: AsyncIterable[Any] | Iterable[Any] | Any,
    output: Any,
    provider: Any = None,
    *,
    output_tool: Any = None,
    choice: Any = 0,
    strict: Any = False,
    limits: Any = DEFAULT_LIMITS,
    started_at: Any = None,
    clock: Any = None,
    request: Any = None,
) -> Any:
    """Fold an async stream and return only its structured output (see `fold_output`)."""
    folded = afold(
        chunks,
        provider,
        choice=choice,
        strict=strict,
        limits=limits,
        started_at=started_at,
        clock=clock,
        request=request,
        output=output,
        output_tool=output_tool,
    )
    async for _ in folded:
        pass
    error = folded.output_error
    if error is not None:
        raise error
    return folded.output
