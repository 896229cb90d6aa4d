"""A relayed message ends as the producer's fold ended it: its timing included.

`MessageCompleted.timing` (what the fold measured: time to first byte and token, each
part's start and end, the total, the output rate) is not part of the event's JSON, so
the relay carries it beside the final entry. Every kind of reader (from the start, a late
joiner, a reader on another worker, one that resumes after a checkpoint, a turn's reader)
must get the producer's own final event, message and timing both.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis_support import REDIS_SERVER, SKIP_REASON, RedisServer
from support import REAL

from streamfold import Event, MessageCompleted, StreamFolder, ToolResult, event_to_json, fold
from streamfold.record import split_frames
from streamfold.recording import detect_recording

if REDIS_SERVER is None:
    pytest.skip(SKIP_REASON, allow_module_level=True)
if importlib.util.find_spec("redis") is None:
    pytest.skip("redis-py is not installed", allow_module_level=True)

from streamfold.relay import (  # after the skips: needs redis-py
    Relay,
    RelayConfig,
    Relayed,
    RelayError,
    Snapshot,
    TurnRelayed,
)

RECORDINGS = [
    "anthropic/code-execution-bash-thinking.sse",
    "openai-chat/tool-calls-parallel-interleaved-args.sse",
    "gemini/function-call-thought-signature.sse",
    "bedrock/text-then-tool-use-nova.eventstream",
    "groq/error-mid-stream-tool-use-failed.sse",  # ends with a provider error
]
TURN_FIRST, TURN_SECOND = "anthropic/thinking-then-tool-use.sse", "anthropic/text-basic.sse"


def config() -> RelayConfig:
    return RelayConfig(
        prefix=f"test-{uuid.uuid4().hex[:8]}:",
        checkpoint_every=3,
        lease_ttl=0.6,
        poll=0.1,
        start_timeout=10.0,
    )


def chunks_of(rel: str) -> list[bytes]:
    data = (REAL / rel).read_bytes()
    kind, _provider = detect_recording(data)
    assert kind is not None and kind != "objects"
    return split_frames(data, kind)


def whole(event: Event | Snapshot) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A final event as a reader sees it: the message (JSON) and the timing beside it."""
    assert isinstance(event, MessageCompleted), f"expected message_completed, got {event}"
    return event.message.model_dump(mode="json"), event.timing


async def drain(items: AsyncIterator[Relayed], first: list[Relayed] | None = None) -> list[Relayed]:
    out = list(first or [])
    async for item in items:
        out.append(item)
    return out


@pytest.mark.parametrize("rel", RECORDINGS)
async def test_every_reader_ends_with_the_producers_final_event_timing_included(
    redis_server: RedisServer, rel: str
) -> None:
    chunks = chunks_of(rel)
    stream = f"s-{uuid.uuid4().hex[:10]}"
    cfg = config()
    async with (
        Relay.from_url(redis_server.url, cfg) as worker_a,
        Relay.from_url(redis_server.url, cfg) as worker_b,
    ):
        producer = worker_a.producer(stream)
        await producer.start()
        from_start = asyncio.create_task(drain(worker_b.subscribe(stream)))
        produced: list[Event] = []
        late: asyncio.Task[list[Relayed]] | None = None
        resumed: asyncio.Task[list[Relayed]] | None = None
        half = len(chunks) // 2
        for i, chunk in enumerate(chunks):
            if i == half:
                items = worker_b.subscribe(stream)
                first = await anext(items)  # joined here: a snapshot of the message so far
                assert isinstance(first.event, Snapshot)
                late = asyncio.create_task(drain(items, [first]))
                checkpoint = await worker_b.checkpoint(stream)
                assert checkpoint is not None and checkpoint.seq > 0
                resumed = asyncio.create_task(drain(worker_b.subscribe(stream, checkpoint.id)))
            produced += await producer.feed(chunk)
            await asyncio.sleep(0.001)  # chunks arrive over time: the timing is not all zeros
        produced += await producer.close()
        assert late is not None and resumed is not None
        end = produced[-1]
        assert isinstance(end, MessageCompleted) and end.message == producer.message
        expected = whole(end)
        timing = expected[1]
        assert timing is not None and timing["total_s"] > 0 and timing["parts"]

        after_end_here = await drain(worker_a.subscribe(stream))  # this worker's tail
        after_end_there = await drain(worker_b.subscribe(stream))  # another worker
        readers = {
            "from the start": await asyncio.wait_for(from_start, 20),
            "late joiner": await asyncio.wait_for(late, 20),
            "resumed after a checkpoint": await asyncio.wait_for(resumed, 20),
            "after the end, same worker": after_end_here,
            "after the end, another worker": after_end_there,
        }
        for who, items in readers.items():
            last = items[-1]
            assert not last.synthetic, who
            assert whole(last.event) == expected, who


async def test_a_turns_readers_get_each_responses_timing(redis_server: RedisServer) -> None:
    from streamfold.ui import to_ui_message_stream

    first, second = chunks_of(TURN_FIRST), chunks_of(TURN_SECOND)
    turn_id = f"t-{uuid.uuid4().hex[:10]}"
    folders = [StreamFolder(), StreamFolder()]
    async with Relay.from_url(redis_server.url, config()) as relay:
        early = asyncio.create_task(drain_turn(relay.subscribe_turn(turn_id)))
        async with relay.turn(turn_id) as turn:
            message = await turn.respond(paced(first), folder=folders[0])
            call = message.tool_calls[0]
            await turn.tool_result(
                ToolResult(tool_call_id=call.call_id, name=call.name, content="v1.2.3")
            )
            await turn.respond(paced(second), folder=folders[1])
        late = await drain_turn(relay.subscribe_turn(turn_id))
        expected = [
            (m.model_dump(mode="json"), f.timing.as_dict())
            for m, f in zip(turn.messages, folders, strict=True)
        ]
        for timing in (t for _m, t in expected):
            # pump starts the clock before the first chunk, as afold does
            assert timing["time_to_first_byte_s"] is not None and timing["total_s"] > 0
        for items in (await asyncio.wait_for(early, 20), late):
            ends = [
                whole(i.item.event)
                for i in items
                if isinstance(i.item, Relayed) and isinstance(i.item.event, MessageCompleted)
            ]
            assert ends == expected

        # The UI stream of a relayed turn tells the last response's timing, as a local one.
        chunks = list(to_ui_message_stream(e for item in late for e in item.events()))
        finish = next(c for c in chunks if c["type"] == "finish")
        assert finish["messageMetadata"]["timing"]["total"] == expected[1][1]["total_s"]


async def test_pump_counts_the_wait_for_the_first_chunk(redis_server: RedisServer) -> None:
    chunks = chunks_of(TURN_SECOND)

    async def slow_provider() -> AsyncIterator[bytes]:
        await asyncio.sleep(0.3)  # the provider thinks before its first byte
        for chunk in chunks:
            yield chunk

    stream = f"s-{uuid.uuid4().hex[:10]}"
    async with Relay.from_url(redis_server.url, config()) as relay:
        await relay.publish(stream, slow_provider())
        items = await drain(relay.subscribe(stream))
    _message, timing = whole(items[-1].event)
    assert timing is not None and timing["time_to_first_byte_s"] >= 0.3


async def test_a_failed_fold_ends_with_what_was_measured(redis_server: RedisServer) -> None:
    chunks = chunks_of(TURN_FIRST)

    async def broken() -> AsyncIterator[bytes]:
        for chunk in chunks[: len(chunks) // 2]:
            yield chunk
        raise ConnectionResetError("the provider went away")

    stream = f"s-{uuid.uuid4().hex[:10]}"
    async with Relay.from_url(redis_server.url, config()) as relay:
        with pytest.raises(ConnectionResetError):
            await relay.publish(stream, broken())
        items = await drain(relay.subscribe(stream))
    message, timing = whole(items[-1].event)
    assert message["status"] == "error"
    assert timing is not None and timing["time_to_first_token_s"] is not None
    assert timing["total_s"] is None  # the message never finished


async def test_a_timing_on_another_entry_is_refused(redis_server: RedisServer) -> None:
    stream = f"s-{uuid.uuid4().hex[:10]}"
    async with Relay.from_url(redis_server.url, config()) as relay:
        events_key = relay.keys(stream)[0]
        events = list(fold(chunks_of(TURN_SECOND)))
        started, end = json.dumps(event_to_json(events[0])), json.dumps(event_to_json(events[-1]))
        assert events[0].type == "usage_updated" and end.startswith('{"type": "message_completed"')
        await relay.redis.xadd(events_key, {"e": started, "timing": "{}"}, id="0-1")
        with pytest.raises(RelayError, match=r"got '\{\}' on a usage_updated entry"):
            await drain(relay.subscribe(stream, after=0))
        await relay.redis.xadd(events_key, {"e": end, "timing": "[1"}, id="0-2")
        with pytest.raises(RelayError, match="expected a timing"):
            await drain(relay.subscribe(stream, after=1))


def paced(chunks: list[bytes]) -> AsyncIterator[bytes]:
    async def source() -> AsyncIterator[bytes]:
        for chunk in chunks:
            await asyncio.sleep(0.002)
            yield chunk

    return source()


async def drain_turn(items: AsyncIterator[TurnRelayed]) -> list[TurnRelayed]:
    return [item async for item in items]
