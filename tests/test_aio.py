"""The async layer runs on asyncio and on trio, and a cancelled consumer keeps a snapshot:
afold cancelled at every await point keeps what a cut stream keeps."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
import trio
from reliability.test_truncation import check_open_part, reference
from support import read, without_inferred_marker

from streamfold import (
    ContentPart,
    Message,
    MessageCompleted,
    NoEventsError,
    PartCompleted,
    PartStarted,
    afold,
    afold_message,
    fold,
    fold_message,
    utterance,
)
from streamfold.events import Event
from streamfold.fold import StreamFolder

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


# --- cancelling afold at every await point, on asyncio and on trio --------------------------
#
# afold is cancelled at every await point (while it waits for input, while the consumer
# holds an event, between chunks of a sync source) on asyncio and on trio, and the snapshot
# must keep every part received, marked cancelled.


CANCEL_RECORDINGS = [
    "anthropic/thinking-then-tool-use.sse",
    "anthropic/text-then-tool-use-no-args.sse",
    "openai-chat/tool-calls-parallel.sse",
    "openai-responses/custom-tool-call.sse",
    "gemini/function-call-streamed-args.sse",
    "bedrock/text-then-tool-use-nova.eventstream",
    "ollama/generate-gpt-oss-thinking.ndjson",
]


CHUNK = 23  # bytes per chunk: many chunks per event, and events split across chunks


async def chunks(data: bytes, size: int = CHUNK) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        await anyio.sleep(0)  # an await point between chunks
        yield data[start : start + size]


@dataclass
class Cancelled:
    received: list[Event]
    snapshot: Message
    finished_before: bool  # the fold had already folded the end when the cancel landed


async def cancel_after(data: bytes, k: int, where: str) -> Cancelled:
    """Fold `data`; after the consumer got `k` events, cancel at the given await point."""
    received: list[Event] = []
    finished_before = False
    source: Any = (
        chunks(data)
        if where != "sync-source"
        else [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    )
    async with afold(source) as stream:
        with anyio.CancelScope() as scope:
            async for event in stream:
                received.append(event)
                if len(received) == k:
                    finished_before = stream.folder.finished
                    scope.cancel()
                    if where == "consumer":
                        # The cancellation lands here, in the consumer, with the fold
                        # suspended at a yield: leaving `async with` closes it.
                        await anyio.sleep(0)
                    # Otherwise it lands on the fold's next await: waiting for input.
    return Cancelled(received, stream.snapshot(), finished_before)


def check_cancelled_at(rel: str, k: int, where: str, result: Cancelled) -> None:
    ref = reference(rel)
    snap = result.snapshot
    label = f"{rel}: cancelled {where} after {k} events"
    if result.finished_before or snap.status != "cancelled":
        # The fold had folded the end already, or reached it with no await left for the
        # cancellation to land on (a Gemini stream ends when its input does): it is whole.
        assert snap == ref.final, label
        return
    assert snap.status == "cancelled", label
    assert snap.stop_reason == "cancelled", label
    received = {e.index: e.part for e in result.received if isinstance(e, PartCompleted)}
    started = {e.index for e in result.received if isinstance(e, PartStarted)}
    order = snap.stream_order()
    wholes = ref.final.stream_order()
    assert len(started) <= len(order) <= len(wholes), label
    for index, part in enumerate(order):
        here = f"{label}, slot {index}"
        if index in received:
            # The same part; its marker may have come after (or, cut, never).
            bare = without_inferred_marker
            assert bare(part) == bare(received[index]) == bare(wholes[index]), here
            if isinstance(part, ContentPart):
                assert utterance(part) in (None, utterance(wholes[index])), here  # type: ignore[arg-type]
        elif part != wholes[index]:
            # Open when cancelled: closed as it stood, a prefix of what its events carried.
            check_open_part(part, wholes[index], ref.streamed[index], here)


def run_all_cuts(rel: str, backend: str) -> int:
    """Cancel at every k and every await point; return how many runs were checked."""
    data = read(rel)
    total = len(list(fold([data])))
    # Every k for a short stream; about 40 spread over a long one (each run folds anew).
    ks = sorted({*range(1, min(total, 12)), *range(1, total, max(1, total // 40))})
    runs = 0

    async def main() -> None:
        nonlocal runs
        for k in ks:
            for where in ("source", "consumer", "sync-source"):
                result = await cancel_after(data, k, where)
                if k > len(result.received):
                    continue  # the stream had fewer events than k
                check_cancelled_at(rel, k, where, result)
                runs += 1

    if backend == "asyncio":
        asyncio.run(main())
    else:
        trio.run(main)
    return runs


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("rel", CANCEL_RECORDINGS)
def test_cancel_afold_at_every_await_point(rel: str, backend: str) -> None:
    assert run_all_cuts(rel, backend) > 0


@pytest.mark.parametrize(
    "rel",
    [
        "anthropic/compaction.sse",
        "anthropic/web-search-citations.sse",
        "openai-responses/custom-tool-call.sse",
        "bedrock/server-tool-code-execution-nova2.eventstream",
    ],
)
def test_cancel_keeps_what_a_cut_keeps(rel: str) -> None:
    # Cancelled or cut at the same event boundary, a fold has received the same bytes, so
    # it must hold the same parts (only the status differs). Today cancel drops what the
    # decoder buffers: Anthropic compaction text and streamed server-tool input, Bedrock
    # server-tool input, Responses custom-tool input (parsed as JSON instead).
    data = read(rel)
    ref = reference(rel)
    for step in ref.steps:
        if step.finished:
            break
        cut, cancelled = StreamFolder(ref.provider), StreamFolder(ref.provider)
        cut.feed(data[: step.offset])
        with contextlib.suppress(NoEventsError):  # cut before its first event
            cut.close()
        cancelled.feed(data[: step.offset])
        cancelled.cancel()
        where = f"{rel} at byte {step.offset}"
        assert cancelled.snapshot().stream_order() == cut.snapshot().stream_order(), where
