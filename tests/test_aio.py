"""The async layer runs on asyncio and on trio, and a cancelled consumer keeps a snapshot."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio
import pytest
import trio
from support import read

from streamfold import Message, MessageCompleted, PartCompleted, afold, afold_message, fold_message

# A ResourceWarning from a finaliser (trio's, for an async generator abandoned to the
# garbage collector) reaches pytest as an unraisable exception: an error here as well.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")

REL = "anthropic/thinking-then-tool-use.sse"


async def byte_stream(data: bytes, size: int = 7) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        await anyio.sleep(0)
        yield data[start : start + size]


async def test_afold_on_asyncio_equals_the_sync_fold() -> None:
    data = read(REL)
    assert await afold_message(byte_stream(data)) == fold_message([data])


async def test_afold_accepts_a_sync_iterable() -> None:
    data = read(REL)
    assert await afold_message([data[:100], data[100:]]) == fold_message([data])


def test_afold_on_trio_equals_the_sync_fold() -> None:
    data = read(REL)
    result: list[Message] = []

    async def main() -> None:
        result.append(await afold_message(byte_stream(data)))

    trio.run(main)
    assert result == [fold_message([data])]


async def _cancel_after_first_part() -> Message:
    data = read(REL)
    stream = afold(byte_stream(data, 3))
    with anyio.CancelScope() as scope:
        async for event in stream:
            if isinstance(event, PartCompleted):
                # The cancellation lands on the fold's next await: waiting for input.
                scope.cancel()
    return stream.snapshot()


async def test_leaving_an_async_with_block_early_marks_cancelled() -> None:
    async with afold(byte_stream(read(REL), 5)) as stream:
        async for event in stream:
            if isinstance(event, PartCompleted):
                break
    snapshot = stream.snapshot()
    assert snapshot.status == "cancelled"
    assert snapshot.content[0].type == "thinking"


async def test_cancelled_consumer_on_asyncio_keeps_a_cancelled_snapshot() -> None:
    snapshot = await _cancel_after_first_part()
    assert snapshot.status == "cancelled"
    assert snapshot.content[0].type == "thinking"
    assert snapshot.content[0].options["signature"]


def test_cancelled_consumer_on_trio_keeps_a_cancelled_snapshot() -> None:
    result: list[Message] = []

    async def main() -> None:
        result.append(await _cancel_after_first_part())

    trio.run(main)
    assert result[0].status == "cancelled"
    assert result[0].content[0].type == "thinking"


async def test_aclose_mid_stream_marks_cancelled() -> None:
    stream = afold(byte_stream(read(REL), 5))
    async for event in stream:
        if isinstance(event, PartCompleted):
            break
    await stream.aclose()
    assert stream.snapshot().status == "cancelled"


async def test_completed_stream_is_not_marked_cancelled() -> None:
    stream = afold(byte_stream(read(REL)))
    events = [event async for event in stream]
    assert isinstance(events[-1], MessageCompleted)
    await stream.aclose()
    assert stream.snapshot().status == "complete"


async def test_source_is_closed_once_the_message_completes() -> None:
    data = read(REL)
    closed: list[bool] = []

    async def source() -> AsyncIterator[bytes]:
        try:
            yield data
            yield b"trailing bytes nobody needs"
        finally:
            closed.append(True)

    events = [event async for event in afold(source())]
    assert isinstance(events[-1], MessageCompleted)
    assert closed == [True]


# --- however the consumer leaves: cancelled at once, the source closed, on both backends ---

BACKENDS = ["asyncio", "trio"]


class Source:
    """An async generator source over a recording that notes when it is closed."""

    def __init__(self, data: bytes, size: int = 5) -> None:
        self.data = data
        self.size = size
        self.closed = anyio.Event()
        self.chunks = self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        try:
            for start in range(0, len(self.data), self.size):
                await anyio.sleep(0)
                yield self.data[start : start + self.size]
        finally:
            self.closed.set()

    async def wait_closed(self) -> None:
        # A bound, not a timing assertion: a source never closed fails here.
        with anyio.fail_after(10):
            await self.closed.wait()


def on(backend: str, test: Callable[[], Awaitable[None]]) -> None:
    anyio.run(test, backend=backend)


def check_cancelled(snapshot: Message) -> None:
    assert snapshot.status == "cancelled"
    assert snapshot.content[0].type == "thinking"
    assert snapshot.content[0].options["signature"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_out_of_async_for_cancels_at_once_and_closes_the_source(backend: str) -> None:
    async def main() -> None:
        source = Source(read(REL))
        stream = afold(source.chunks)
        async for event in stream:
            if isinstance(event, PartCompleted):
                break
        check_cancelled(stream.snapshot())  # before anything is awaited
        await source.wait_closed()

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_in_the_loop_body_cancels_at_once_and_closes_the_source(backend: str) -> None:
    async def main() -> None:
        source = Source(read(REL))
        stream = afold(source.chunks)
        with pytest.raises(LookupError):
            async for event in stream:
                if isinstance(event, PartCompleted):
                    raise LookupError("the consumer failed")
        check_cancelled(stream.snapshot())
        await source.wait_closed()

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_consumer_cancelled_while_busy_in_its_loop_body_cancels_at_once(backend: str) -> None:
    async def main() -> None:
        source = Source(read(REL))
        stream = afold(source.chunks)
        with anyio.CancelScope() as scope:
            async for event in stream:
                if isinstance(event, PartCompleted):
                    scope.cancel()
                    # The consumer's own await: the cancellation lands here, in the body.
                    await anyio.sleep(1)
        assert scope.cancelled_caught
        check_cancelled(stream.snapshot())
        await source.wait_closed()

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_consumer_cancelled_while_the_fold_waits_closes_the_source_at_once(backend: str) -> None:
    async def main() -> None:
        source = Source(read(REL), 3)
        stream = afold(source.chunks)
        with anyio.CancelScope() as scope:
            async for event in stream:
                if isinstance(event, PartCompleted):
                    scope.cancel()  # lands on the fold's next await: waiting for input
        check_cancelled(stream.snapshot())
        assert source.closed.is_set()

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_aclose_cancels_and_closes_the_source_at_once(backend: str) -> None:
    async def main() -> None:
        source = Source(read(REL))
        stream = afold(source.chunks)
        events = aiter(stream)
        while not isinstance(await anext(events), PartCompleted):
            pass
        await stream.aclose()
        check_cancelled(stream.snapshot())
        assert source.closed.is_set()
        del events

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_leaving_async_with_cancels_and_closes_the_source_at_once(backend: str) -> None:
    async def main() -> None:
        source = Source(read(REL))
        async with afold(source.chunks) as stream:
            async for event in stream:
                if isinstance(event, PartCompleted):
                    break
        check_cancelled(stream.snapshot())
        assert source.closed.is_set()

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_source_with_an_async_close_is_closed_with_its_iterator(backend: str) -> None:
    # The shape of the SDKs' AsyncStream: iterating it opens a generator; close() is async.
    class Stream:
        def __init__(self) -> None:
            self.inner = Source(read(REL))
            self.closed = False

        def __aiter__(self) -> AsyncIterator[bytes]:
            return self.inner.chunks

        async def close(self) -> None:
            await anyio.sleep(0)
            self.closed = True

    async def main() -> None:
        stream = Stream()
        async with afold(stream) as folding:
            async for event in folding:
                if isinstance(event, PartCompleted):
                    break
        check_cancelled(folding.snapshot())
        assert stream.inner.closed.is_set() and stream.closed

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_over_a_sync_source_closes_it_at_once(backend: str) -> None:
    closed: list[bool] = []
    data = read(REL)

    def chunks() -> Iterator[bytes]:
        try:
            for start in range(0, len(data), 5):
                yield data[start : start + 5]
        finally:
            closed.append(True)

    async def main() -> None:
        stream = afold(chunks())
        async for event in stream:
            if isinstance(event, PartCompleted):
                break
        check_cancelled(stream.snapshot())
        assert closed == [True]

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_source_that_raises_is_not_a_cancel(backend: str) -> None:
    data = read(REL)

    async def main() -> None:
        async def broken() -> AsyncIterator[bytes]:
            yield data[:600]
            raise ConnectionError("connection reset")

        stream = afold(broken())
        with pytest.raises(ConnectionError):
            async for _ in stream:
                pass
        assert stream.snapshot().status == "incomplete"

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_completed_fold_is_not_cancelled_by_leaving_its_loop(backend: str) -> None:
    async def main() -> None:
        source = Source(read(REL))
        stream = afold(source.chunks)
        async for event in stream:
            if isinstance(event, MessageCompleted):
                break
        assert stream.snapshot().status == "complete"
        assert source.closed.is_set()

    on(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("with_block", [False, True])
def test_a_run_that_ends_as_the_loop_is_left_ends_cleanly(backend: str, with_block: bool) -> None:
    # The close scheduled when the loop lets go may find the event loop shutting down.
    async def main() -> None:
        stream = afold(source.chunks)
        async with contextlib.AsyncExitStack() as stack:
            if with_block:
                await stack.enter_async_context(stream)
            async for event in stream:
                if isinstance(event, PartCompleted):
                    break
        check_cancelled(stream.snapshot())

    for _ in range(20):
        source = Source(read(REL))
        on(backend, main)
        assert source.closed.is_set()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_source_only_the_fold_held_is_closed_before_the_run_ends(backend: str) -> None:
    # Nothing else holds the source: left to the garbage collector inside the run, trio
    # would warn (an error here) that the async generator was never closed.
    data = read(REL)
    closed: list[bool] = []

    async def chunks() -> AsyncIterator[bytes]:
        try:
            for start in range(0, len(data), 5):
                await anyio.sleep(0)
                yield data[start : start + 5]
        finally:
            closed.append(True)

    async def main() -> None:
        with anyio.CancelScope() as scope:
            stream = afold(chunks())
            async for event in stream:
                if isinstance(event, PartCompleted):
                    scope.cancel()
                    await anyio.sleep(0)
        check_cancelled(stream.snapshot())

    for _ in range(20):
        on(backend, main)
    assert closed == [True] * 20
