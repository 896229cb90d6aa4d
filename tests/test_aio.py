"""The async layer runs on asyncio and on trio, and a cancelled consumer keeps a snapshot."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import trio
from support import read

from streamfold import Message, MessageCompleted, PartCompleted, afold, afold_message, fold_message

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
