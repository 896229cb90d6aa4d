"""Resumable streams over a real redis-server: join late, resume by id, crashes, restarts, scale.

Every test compares what a consumer got with a plain in-process fold of the same chunks:
the snapshot must equal the fold's snapshot after exactly the events it covers, and the
events after it must be the fold's events from there on (as `event_to_json` gives them).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser_support import ARTIFACTS, missing, open_page
from redis_support import REDIS_SERVER, SKIP_REASON, RedisServer
from server_support import serve_in_thread
from support import IMPORTED_FROM, REAL

from streamfold import (
    Event,
    Message,
    MessageCompleted,
    NoEventsError,
    StreamFolder,
    ToolResult,
    UsageError,
    event_to_json,
    fold,
)
from streamfold.record import split_frames
from streamfold.recording import detect_recording

if REDIS_SERVER is None:
    pytest.skip(SKIP_REASON, allow_module_level=True)
if importlib.util.find_spec("redis") is None:
    pytest.skip(
        "redis-py is not installed (pip install 'streamfold[relay]')", allow_module_level=True
    )

from streamfold.relay import (  # after the skips: needs redis-py
    Relay,
    RelayBusy,
    RelayConfig,
    Relayed,
    RelayNotFound,
    Snapshot,
    event_from_json,
)

RECORDINGS = [
    "anthropic/code-execution-bash-thinking.sse",  # thinking, text, server blocks, text
    "anthropic/thinking-then-tool-use.sse",
    "openai-chat/tool-calls-parallel-interleaved-args.sse",
    "gemini/function-call-thought-signature.sse",
    "bedrock/text-then-tool-use-nova.eventstream",
    "groq/error-mid-stream-tool-use-failed.sse",  # ends with a provider error
]
SRC = IMPORTED_FROM  # the streamfold under test, for the subprocesses


def fast_config(**changes: Any) -> RelayConfig:
    """Short timings, and a prefix of its own so tests never share keys."""
    options: dict[str, Any] = {
        "prefix": f"test-{uuid.uuid4().hex[:8]}:",
        "checkpoint_every": 3,
        "lease_ttl": 0.6,
        "poll": 0.1,
        "start_timeout": 10.0,
        "reconnect_timeout": 15.0,
    }
    options.update(changes)
    return RelayConfig(**options)


@pytest.fixture
async def relay(redis_server: RedisServer) -> AsyncIterator[Relay]:
    async with Relay.from_url(redis_server.url, fast_config()) as r:
        yield r


# --- the reference: a plain fold, chunk by chunk -----------------------------------------


@dataclass
class Reference:
    chunks: list[bytes]
    events: list[dict[str, Any]]  # event_to_json of every event, in order
    snapshots: dict[int, dict[str, Any]]  # events so far -> the fold's snapshot then
    final: dict[str, Any]

    def check(self, items: list[Relayed], *, joined: bool = True) -> int:
        """Assert `items` (a Snapshot then events, or just events) are exactly the fold's.
        Returns the seq the items started from."""
        assert items, "no items"
        start = 0
        rest = items
        if joined:
            first = items[0]
            assert isinstance(first.event, Snapshot), f"expected a snapshot, got {first.event}"
            start = first.seq
            assert start in self.snapshots, f"a snapshot at {start} is not at a chunk boundary"
            assert first.event.message.model_dump(mode="json") == self.snapshots[start]
            rest = items[1:]
        got = [event_to_json(item.event) for item in rest]  # type: ignore[arg-type]
        assert got == self.events[start:]
        assert [item.seq for item in rest] == list(range(start + 1, len(self.events) + 1))
        ids = [f"0-{n}" for n in range(start + 1, len(self.events) + 1)]
        assert [item.id for item in rest] == ids
        return start


def reference(rel: str) -> Reference:
    data = (REAL / rel).read_bytes()
    kind, _provider = detect_recording(data)
    assert kind is not None and kind != "objects"
    chunks = split_frames(data, kind)
    folder = StreamFolder()
    events: list[Event] = []
    snapshots = {0: folder.snapshot().model_dump(mode="json")}
    for chunk in chunks:
        events.extend(folder.feed(chunk))
        # The first state with that many events: a chunk that gives none changes nothing
        # a consumer sees (the producer checkpoints only with events).
        snapshots.setdefault(len(events), folder.snapshot().model_dump(mode="json"))
    events.extend(folder.close())
    final = events[-1]
    assert isinstance(final, MessageCompleted)
    return Reference(
        chunks, [event_to_json(e) for e in events], snapshots, final.message.model_dump(mode="json")
    )


async def drain(items: AsyncIterator[Relayed], first: list[Relayed] | None = None) -> list[Relayed]:
    out = list(first or [])
    async for item in items:
        out.append(item)
    return out


def sid() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


# --- the JSON shape ---------------------------------------------------------------------


def test_events_round_trip_through_their_json() -> None:
    count = 0
    for path in sorted(REAL.rglob("*")):
        if path.suffix not in (".sse", ".ndjson", ".eventstream") or ".timing" in path.name:
            continue
        data = path.read_bytes()
        kind, provider = detect_recording(data)
        if kind is None or provider is None:
            continue
        for event in fold([data], provider):
            shape = event_to_json(event)
            back = event_to_json(event_from_json(json.loads(json.dumps(shape))))
            assert back == shape
            count += 1
    assert count > 1000


def test_missing_extra_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    with pytest.raises(UsageError, match=r"pip install 'streamfold\[relay\]'"):
        Relay.from_url("redis://127.0.0.1:1")


def test_config_is_checked() -> None:
    with pytest.raises(UsageError, match="checkpoint_every"):
        RelayConfig(maxlen=10, checkpoint_every=6)
    with pytest.raises(UsageError, match="lease_ttl"):
        RelayConfig(lease_ttl=0)


# --- join late, resume by id -------------------------------------------------------------


@pytest.mark.parametrize("rel", RECORDINGS)
async def test_join_late_at_every_point(relay: Relay, rel: str) -> None:
    ref = reference(rel)
    stream = sid()
    producer = relay.producer(stream)
    await producer.start()
    n = len(ref.chunks)
    points = sorted({0, 1, n // 3, n // 2, (2 * n) // 3, n - 1})
    tasks = []
    for i, chunk in enumerate(ref.chunks):
        if i in points:
            items = relay.subscribe(stream)
            first = await anext(items)  # joined here: the snapshot is read before going on
            tasks.append(asyncio.create_task(drain(items, [first])))
        await producer.feed(chunk)
    await producer.close()
    tasks.append(asyncio.create_task(drain(relay.subscribe(stream))))  # after the end
    results = await asyncio.wait_for(asyncio.gather(*tasks), 30)
    starts = [ref.check(items) for items in results]
    assert starts == sorted(starts)
    # The joins really saw different checkpoints (one every 3 events).
    assert len(set(starts)) >= min(3, len(ref.events) // relay.config.checkpoint_every)
    for items in results:
        last = items[-1]
        assert isinstance(last.event, MessageCompleted) and not last.synthetic
        assert last.event.message.model_dump(mode="json") == ref.final
        # A Snapshot plus the events after it rebuilds the UI's view: its events() start
        # every part it holds.
        snap = items[0].event
        assert isinstance(snap, Snapshot)
        assert [e.index for e in snap.events() if e.type == "part_started"] == list(
            range(len(snap.message.stream_order()))
        )


async def test_subscriber_that_comes_first_waits_for_the_producer(relay: Relay) -> None:
    ref = reference(RECORDINGS[1])
    stream = sid()
    waiting = asyncio.create_task(drain(relay.subscribe(stream)))
    await asyncio.sleep(0.2)
    await relay.publish(stream, ref.chunks)  # at once: the waiter may see it done already
    items = await asyncio.wait_for(waiting, 20)
    ref.check(items)


@pytest.mark.parametrize("rel", RECORDINGS[:4])
async def test_reconnect_with_last_id_gets_exactly_what_was_missed(relay: Relay, rel: str) -> None:
    ref = reference(rel)
    stream = sid()
    producer = relay.producer(stream)
    await producer.start()
    half = len(ref.chunks) // 2
    produced = 0
    for chunk in ref.chunks[:1]:
        produced += len(await producer.feed(chunk))
    # A consumer reads a few items and drops its connection (a page reload, say).
    seen: list[Relayed] = []
    items = relay.subscribe(stream)
    seen.append(await asyncio.wait_for(anext(items), 10))
    for chunk in ref.chunks[1:half]:
        produced += len(await producer.feed(chunk))
    for _ in range(min(3, produced - seen[0].seq)):
        seen.append(await asyncio.wait_for(anext(items), 10))
    await items.aclose()  # type: ignore[attr-defined]
    for chunk in ref.chunks[half:]:
        await producer.feed(chunk)
    await producer.close()
    # It comes back with the id of the last item it saw: no snapshot, only what it missed.
    rest = await drain(relay.subscribe(stream, after=seen[-1].id))
    assert not any(isinstance(item.event, Snapshot) for item in rest)
    ref.check(seen + rest)
    # By seq too, from every point; and after the end there is nothing left.
    for k in (0, 1, len(ref.events) // 2, len(ref.events) - 1):
        again = await drain(relay.subscribe(stream, after=k))
        assert [event_to_json(i.event) for i in again] == ref.events[k:]  # type: ignore[arg-type]
    assert await drain(relay.subscribe(stream, after=f"0-{len(ref.events)}")) == []


async def test_resume_after_a_trim_starts_over_from_a_snapshot(redis_server: RedisServer) -> None:
    # 600 deltas through a stream capped at ~100 entries: the ones a consumer missed are gone.
    chunks = [
        {"id": "c1", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        *({"id": "c1", "object": "chat.completion.chunk", "model": "m",
           "choices": [{"index": 0, "delta": {"content": f"w{i} "}}]} for i in range(600)),
        {"id": "c1", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]  # fmt: skip
    async with Relay.from_url(
        redis_server.url, fast_config(maxlen=100, checkpoint_every=40)
    ) as relay:
        stream = sid()
        producer = relay.producer(stream, provider="openai-chat")
        await producer.start()
        for chunk in chunks[:5]:
            await producer.feed(chunk)
        seen = [item async for item in _take(relay.subscribe(stream), 3)]
        for chunk in chunks[5:]:
            await producer.feed(chunk)
        await producer.close()
        rest = await drain(relay.subscribe(stream, after=seen[-1].id))
        assert isinstance(rest[0].event, Snapshot)
        assert rest[0].seq > seen[-1].seq + 1  # really a gap, bridged by the snapshot
        final = rest[-1].event
        assert isinstance(final, MessageCompleted)
        assert final.message.text == "".join(f"w{i} " for i in range(600))
        stream_len = await relay.redis.xlen(relay.keys(stream)[0])
        assert stream_len < 300


async def _take(items: AsyncIterator[Relayed], n: int) -> AsyncIterator[Relayed]:
    for _ in range(n):
        yield await anext(items)
    await items.aclose()  # type: ignore[attr-defined]


async def test_one_producer_per_stream_id(relay: Relay) -> None:
    stream = sid()
    producer = relay.producer(stream)
    await producer.start()
    with pytest.raises(RelayBusy, match="another worker"):
        await relay.producer(stream).start()
    with pytest.raises(NoEventsError):  # closed without a chunk: its readers see the error
        await producer.close()
    with pytest.raises(RelayBusy, match="already exists"):
        await relay.producer(stream).start()
    await relay.delete(stream)
    await relay.publish(stream, reference(RECORDINGS[1]).chunks)


async def test_unknown_stream_is_not_found(redis_server: RedisServer) -> None:
    async with Relay.from_url(redis_server.url, fast_config(start_timeout=0.3)) as relay:
        with pytest.raises(RelayNotFound, match="never started, or expired"):
            await drain(relay.subscribe(sid()))


async def test_a_source_that_raises_ends_the_stream_with_status_error(relay: Relay) -> None:
    ref = reference(RECORDINGS[0])

    async def broken() -> AsyncIterator[bytes]:
        for chunk in ref.chunks[:10]:
            yield chunk
        raise OSError("connection reset by the provider")

    stream = sid()
    with pytest.raises(OSError, match="connection reset"):
        await relay.publish(stream, broken())
    items = await drain(relay.subscribe(stream))
    final = items[-1].event
    assert isinstance(final, MessageCompleted) and not items[-1].synthetic
    assert final.message.status == "error"
    assert final.message.metadata["error"]["message"] == "connection reset by the provider"
    assert await relay.redis.exists(relay.keys(stream)[2]) == 0  # the lease is gone
    assert await relay.redis.ttl(relay.keys(stream)[0]) > 0  # the stream will expire


async def test_finished_streams_expire(redis_server: RedisServer) -> None:
    async with Relay.from_url(redis_server.url, fast_config(expire_after=0.5)) as relay:
        stream = sid()
        await relay.publish(stream, reference(RECORDINGS[1]).chunks)
        events_key, checkpoint_key, lease_key = relay.keys(stream)
        assert await relay.redis.pttl(events_key) > 0
        assert await relay.redis.exists(lease_key) == 0
        deadline = time.monotonic() + 5
        while await relay.redis.exists(events_key, checkpoint_key) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await relay.redis.exists(events_key, checkpoint_key) == 0


# --- separate processes -----------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import asyncio, json, sys
    from streamfold.record import split_frames
    from streamfold.recording import detect_recording
    from streamfold.relay import Relay, RelayConfig, Snapshot
    from streamfold import event_to_json

    role, url, config, stream, arg = sys.argv[1:6]
    config = RelayConfig(**json.loads(config))

    async def main():
        async with Relay.from_url(url, config) as relay:
            if role == "produce":
                path, pace = arg.split("|")
                data = open(path, "rb").read()
                kind, _ = detect_recording(data)

                async def paced():
                    for chunk in split_frames(data, kind):
                        await asyncio.sleep(float(pace))
                        print("chunk", flush=True)
                        yield chunk

                await relay.publish(stream, paced())
            else:
                with open(arg, "w") as out:
                    async for item in relay.subscribe(stream):
                        event = item.event
                        if isinstance(event, Snapshot):
                            message = event.message.model_dump(mode="json")
                            shape = {"type": "snapshot", "message": message}
                        else:
                            shape = event_to_json(event)
                        out.write(json.dumps({"id": item.id, "seq": item.seq,
                                              "synthetic": item.synthetic, "event": shape}) + "\\n")
                        out.flush()

    asyncio.run(main())
    """
)


def _config_json(config: RelayConfig) -> str:
    return json.dumps(
        {
            "prefix": config.prefix,
            "checkpoint_every": config.checkpoint_every,
            "lease_ttl": config.lease_ttl,
            "poll": config.poll,
            "start_timeout": config.start_timeout,
        }
    )


def _reap(*procs: subprocess.Popen[bytes]) -> None:
    """Kill what still runs and close every pipe (communicate() reads them to the end)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def _spawn(script: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _read_items(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _check_lines(ref: Reference, lines: list[dict[str, Any]]) -> int:
    assert lines[0]["event"]["type"] == "snapshot"
    start: int = lines[0]["seq"]
    assert lines[0]["event"]["message"] == ref.snapshots[start]
    assert [line["event"] for line in lines[1:]] == ref.events[start:]
    assert [line["seq"] for line in lines[1:]] == list(range(start + 1, len(ref.events) + 1))
    return start


def test_producers_and_consumers_in_separate_processes(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    config = fast_config()
    conf = _config_json(config)
    streams = {sid(): rel for rel in RECORDINGS[:3]}
    procs: list[subprocess.Popen[bytes]] = []
    outputs: dict[str, list[Path]] = {s: [] for s in streams}
    try:
        # Consumers that come before their producer, two per stream...
        for stream in streams:
            for n in range(2):
                out = tmp_path / f"{stream}-early{n}.jsonl"
                outputs[stream].append(out)
                procs.append(_spawn(script, "consume", redis_server.url, conf, stream, str(out)))
        producers = [
            _spawn(script, "produce", redis_server.url, conf, stream, f"{REAL / rel}|0.03")
            for stream, rel in streams.items()
        ]
        procs.extend(producers)
        # ...and one that joins mid-stream, once its producer has sent a few chunks.
        for producer, stream in zip(producers, streams, strict=True):
            assert producer.stdout is not None
            for _ in range(10):
                producer.stdout.readline()
            out = tmp_path / f"{stream}-late.jsonl"
            outputs[stream].append(out)
            procs.append(_spawn(script, "consume", redis_server.url, conf, stream, str(out)))
        for proc in procs:
            _out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err.decode()
    finally:
        _reap(*procs)
    for stream, rel in streams.items():
        ref = reference(rel)
        starts = [_check_lines(ref, _read_items(path)) for path in outputs[stream]]
        assert starts[2] > 0  # the late one started from a real snapshot


# --- a producer that dies -----------------------------------------------------------------


def test_producer_crash_ends_consumers_incomplete(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    config = fast_config()
    conf = _config_json(config)
    rel = RECORDINGS[0]
    ref = reference(rel)
    stream = sid()
    early = tmp_path / "early.jsonl"
    late = tmp_path / "late.jsonl"
    consumer = _spawn(script, "consume", redis_server.url, conf, stream, str(early))
    producer = _spawn(script, "produce", redis_server.url, conf, stream, f"{REAL / rel}|0.05")
    try:
        assert producer.stdout is not None
        for _ in range(len(ref.chunks) // 2):
            producer.stdout.readline()
        producer.send_signal(signal.SIGKILL)  # no goodbye: only the lease can tell
        producer.wait(timeout=10)
        late_consumer = _spawn(script, "consume", redis_server.url, conf, stream, str(late))
        for proc in (consumer, late_consumer):
            _out, err = proc.communicate(timeout=30)  # bounded: never waits forever
            assert proc.returncode == 0, err.decode()
    finally:
        _reap(consumer, producer)
    finals = []
    for path in (early, late):
        lines = _read_items(path)
        end = lines[-1]
        assert end["synthetic"] is True
        assert end["event"]["type"] == "message_completed"
        message = end["event"]["message"]
        assert message["status"] == "incomplete"
        assert message["metadata"]["error"]["type"] == "relay_producer_lost"
        body = lines[:-1]
        start = body[0]["seq"]
        assert [line["event"] for line in body[1:]] == ref.events[start : body[-1]["seq"]]
        # Every part the fold had by the last published event, exactly: the producer
        # publishes per chunk, so that is a chunk boundary of the reference.
        upto = end["seq"]
        assert 0 < upto < len(ref.events)
        expected = ref.snapshots[upto]
        assert message["content"] == expected["content"]
        assert message["tool_calls"] == expected["tool_calls"]
        assert message["metadata"]["model"] == expected["metadata"]["model"]
        finals.append(message)
    assert finals[0] == finals[1]


# --- Redis restarts between events ---------------------------------------------------------


async def test_redis_restart_between_events(tmp_path: Path) -> None:
    # AOF with fsync on every write, so the stream outlives the restart (without
    # persistence a restarted Redis is empty: consumers already reading still finish, but
    # late joiners could only see what was written after it).
    server = RedisServer(tmp_path / "aof", persistent=True)
    server.start()
    try:
        ref = reference(RECORDINGS[0])
        stream = sid()
        config = fast_config(lease_ttl=1.0)
        async with Relay.from_url(server.url, config) as relay:
            published: list[int] = []

            async def paced() -> AsyncIterator[bytes]:
                for chunk in ref.chunks:
                    await asyncio.sleep(0.02)
                    yield chunk
                    published.append(1)

            producing = asyncio.create_task(relay.publish(stream, paced()))
            early = asyncio.create_task(drain(relay.subscribe(stream)))
            while len(published) < len(ref.chunks) // 3:
                await asyncio.sleep(0.01)
            await asyncio.to_thread(server.stop, kill=True)
            assert not producing.done()
            await asyncio.sleep(0.5)  # both clients hit a dead socket and back off
            await asyncio.to_thread(server.start)
            late = asyncio.create_task(drain(relay.subscribe(stream)))
            await asyncio.wait_for(producing, 30)
            results = await asyncio.wait_for(asyncio.gather(early, late), 30)
            assert relay.retries > 0  # both sides really lost the connection and retried
        assert ref.check(results[0]) == 0
        ref.check(results[1])
        for items in results:
            assert not items[-1].synthetic
    finally:
        server.stop()


# --- many streams at once -------------------------------------------------------------------


async def test_fifty_streams_with_three_consumers_each(redis_server: RedisServer) -> None:
    # The benchmark (benchmarks/relay_bench.py) runs 1,000 x 10; this is the same at 50 x 3.
    refs = [reference(rel) for rel in RECORDINGS[:4]]
    async with Relay.from_url(redis_server.url, fast_config(checkpoint_every=8)) as relay:
        jobs = []
        for n in range(50):
            ref = refs[n % len(refs)]
            stream = sid()

            async def paced(ref: Reference = ref) -> AsyncIterator[bytes]:
                for chunk in ref.chunks:
                    await asyncio.sleep(0.005)
                    yield chunk

            async def consumer(stream: str = stream, delay: float = 0.0) -> list[Relayed]:
                await asyncio.sleep(delay)
                return await drain(relay.subscribe(stream))

            jobs.append((ref, [consumer(stream, d) for d in (0.0, 0.03, 0.08)]))
            jobs.append((None, [relay.publish(stream, paced())]))
        flat = [c for _, cs in jobs for c in cs]
        results = await asyncio.wait_for(asyncio.gather(*flat), 60)
    at = 0
    checked = 0
    for ref, coros in jobs:
        for items in results[at : at + len(coros)]:
            if ref is not None:
                ref.check(items)
                checked += 1
        at += len(coros)
    assert checked == 150


# --- the demo page through the relay -----------------------------------------------------

PAGE_RECORDING = "anthropic/code-execution-bash-thinking.sse"  # thinking, text, tool, text


@contextlib.contextmanager
def _worker(redis_url: str, config: RelayConfig) -> Iterator[str]:
    """One 'worker': a uvicorn server on a free 127.0.0.1 port with the page, its routes and
    the relay routes, on its own thread and event loop, with its own Redis client."""
    from starlette.applications import Starlette

    from streamfold.web import ui_routes
    from streamfold.web.relay_routes import relay_lifespan, relay_routes

    relay = Relay.from_url(redis_url, config)
    routes = [*ui_routes(REAL), *relay_routes(relay, REAL)]
    # The lifespan closes the relay's connections when the worker stops, on its own loop.
    with serve_in_thread(Starlette(routes=routes, lifespan=relay_lifespan(relay))) as url:
        yield url


def _sse_events(lines: Iterator[str], limit: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in lines:
        if line == "":
            if current:
                events.append(current)
                current = {}
                if len(events) >= limit:
                    break
        elif ":" in line:
            name, _, value = line.partition(":")
            current[name] = value.removeprefix(" ")
    return events


def test_event_source_route_resumes_with_last_event_id(redis_server: RedisServer) -> None:
    import httpx

    ref = reference(PAGE_RECORDING)
    config = fast_config(checkpoint_every=4, lease_ttl=2.0)  # the workers share Redis keys
    a_worker, b_worker = _worker(redis_server.url, config), _worker(redis_server.url, config)
    with a_worker as a, b_worker as b, httpx.Client() as http:
        started = http.post(f"{a}/relay/start", json={"recording": PAGE_RECORDING, "speed": 0})
        assert started.status_code == 200
        stream = started.json()["id"]
        with http.stream("GET", f"{a}/relay/events/{stream}", timeout=20) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            first = _sse_events(response.iter_lines(), 6)
        assert first[0]["event"] == "snapshot"
        seen = [json.loads(e["data"]) for e in first[1:]]
        start = int(first[0]["id"].split("-")[1])
        assert seen == ref.events[start : start + 5]
        # The browser's EventSource reconnects to any worker with the last id it saw.
        headers = {"Last-Event-ID": first[-1]["id"]}
        with http.stream("GET", f"{b}/relay/events/{stream}", headers=headers, timeout=20) as r:
            rest = _sse_events(r.iter_lines(), 10_000)
        assert [json.loads(e["data"]) for e in rest] == ref.events[start + 5 :]
        assert rest[-1]["event"] == "message_completed"
        # After the end there is nothing more: 204 tells an EventSource to stop.
        over = http.get(f"{b}/relay/events/{stream}", headers={"Last-Event-ID": rest[-1]["id"]})
        assert over.status_code == 204
        assert http.get(f"{b}/relay/ui-stream/not%20an%20id").status_code == 400


def test_relay_start_refuses_a_deeply_nested_body_with_400(redis_server: RedisServer) -> None:
    import httpx

    with _worker(redis_server.url, fast_config()) as url, httpx.Client() as http:
        deep = "[" * 100_000 + "]" * 100_000
        headers = {"content-type": "application/json"}
        refused = http.post(f"{url}/relay/start", content=deep, headers=headers)
        assert refused.status_code == 400
        assert "not valid JSON" in refused.json()["error"]["message"]
        # The worker is unharmed, and a start with the recording in the query alone still works.
        started = http.post(f"{url}/relay/start?recording={PAGE_RECORDING}&speed=0")
        assert started.status_code == 200, started.text


@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_page_reload_mid_stream_resumes_on_any_worker(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    ref = reference(PAGE_RECORDING)
    final = ref.final
    texts = [p["content"] or "" for p in final["content"] if p["type"] == "text"]
    # The code the provider ran is one part on the page: its call's block and its result's.
    results = [p for p in final["content"] if p["type"] == "unsupported"
               and p["options"]["type"] == "bash_code_execution_tool_result"]  # fmt: skip
    assert len(results) == 1
    parts = len(final["content"]) + len(final["tool_calls"]) - len(results)
    assert len(texts) >= 2
    streaming_with_a_part = """() => document.body.dataset.stream === 'streaming'
        && document.querySelector('.part') !== null"""

    config = fast_config(checkpoint_every=4, lease_ttl=2.0)  # the workers share Redis keys
    with (
        _worker(redis_server.url, config) as a,
        _worker(redis_server.url, config) as b,
        sync_playwright() as pw,
        open_page(pw, tmp_path / "profile") as (page, errors),
    ):
        page.goto(f"{a}/")
        page.wait_for_selector(f'#recording option[value="{PAGE_RECORDING}"]', state="attached")
        page.wait_for_selector("#relay", state="visible")  # the relay is there
        page.select_option("#recording", PAGE_RECORDING)
        page.select_option("#speed", "0.1")  # about 7 s of streaming
        page.check("#relay")
        page.click("#replay")
        page.wait_for_function("new URL(location.href).searchParams.has('relay')")
        stream = page.evaluate("new URL(location.href).searchParams.get('relay')")
        page.wait_for_function(streaming_with_a_part, timeout=15_000)

        # Reload mid-stream on the same worker: the message so far, then the rest.
        page.reload()
        page.wait_for_function(streaming_with_a_part, timeout=15_000)
        # And again, landing on the other worker (a load balancer's choice).
        page.goto(f"{b}/?relay={stream}")
        page.wait_for_function(streaming_with_a_part, timeout=15_000)

        page.wait_for_selector('#status[data-state="done"]', timeout=30_000)
        shown = page.eval_on_selector_all(".part.text", "els => els.map(e => e.streamfoldText)")
        assert shown == texts  # every text whole, each once
        assert page.eval_on_selector_all(".part", "els => els.length") == parts
        assert page.evaluate("document.body.dataset.relay") == stream
        assert "stop" in page.inner_text("#finish")
        assert errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "ui-demo-relay.png"), full_page=True)


def test_serve_mounts_the_relay_routes_when_given_a_redis_url() -> None:
    pytest.importorskip("redis")
    from streamfold.serve import create_app

    plain = {getattr(r, "path", "") for r in create_app(speed=0).routes}
    relayed = {
        getattr(r, "path", "")
        for r in create_app(speed=0, redis_url="redis://127.0.0.1:1/0").routes
    }
    assert relayed > plain
    assert any("relay" in path for path in relayed - plain)


# --- a flaky Redis and a dying producer ------------------------------------------------------


async def test_redis_restarted_empty_late_joiners_get_the_whole_message(tmp_path: Path) -> None:
    # No persistence: the restart loses every key. The producer publishes nothing while
    # Redis is down, so no write of its fails: it must see its checkpoint gone by itself.
    server = RedisServer(tmp_path / "empty")
    server.start()
    try:
        ref = reference(RECORDINGS[0])
        stream = sid()
        third = len(ref.chunks) // 3
        config = fast_config(start_timeout=5.0)
        # Late joiners on another worker: what Redis holds, not what this worker's tail does.
        async with (
            Relay.from_url(server.url, config) as relay,
            Relay.from_url(server.url, config) as other,
        ):
            producer = relay.producer(stream)
            await producer.start()
            for chunk in ref.chunks[:third]:
                await producer.feed(chunk)
            early_items: list[Relayed] = []
            early = asyncio.create_task(_collect(relay.subscribe(stream), early_items))
            while not early_items:
                await asyncio.sleep(0.01)
            # Down for longer than a lease: the lease is gone when Redis is back, and the
            # reader must not take that for a dead producer.
            await _restart_empty(server, outage=2 * relay.config.lease_ttl)
            # A late joiner while the producer is quiet: the message so far, whole.
            during = await drain(_until_seq(other.subscribe(stream), producer.seq))
            assert isinstance(during[0].event, Snapshot)
            assert during[0].seq == producer.seq
            assert during[0].event.message.model_dump(mode="json") == ref.snapshots[producer.seq]
            await _restart_empty(server)  # again, just before the last write
            for chunk in ref.chunks[third:-1]:
                await producer.feed(chunk)
            while early_items[-1].seq < producer.seq:  # it has read all there is
                await asyncio.sleep(0.01)
            await _restart_empty(server)  # and before the batch that ends the message
            await producer.feed(ref.chunks[-1])
            assert producer.finished
            await asyncio.wait_for(early, 30)
            after = await asyncio.wait_for(drain(other.subscribe(stream)), 30)
        ref.check(early_items)
        # After the end: a snapshot, then exactly the events after it, the last the final
        # message. Which checkpoint Redis holds depends on where the heartbeat fell against
        # the last restart: one the producer wrote again at a chunk boundary, or, if the
        # last batch found it lost, the one written just before the end (the final
        # message, incomplete; the events after it then are the MessageCompleted alone).
        assert isinstance(after[0].event, Snapshot) and after[-1].seq == len(ref.events)
        final = after[-1].event
        assert isinstance(final, MessageCompleted) and not after[-1].synthetic
        assert final.message.model_dump(mode="json") == ref.final
        if after[0].seq == len(ref.events) - 1:
            incomplete = final.message.model_copy(update={"status": "incomplete"})
            assert after[0].event.message == incomplete and len(after) == 2
        else:
            ref.check(after)
    finally:
        server.stop()


async def _restart_empty(server: RedisServer, outage: float = 0.0) -> None:
    await asyncio.to_thread(server.stop, kill=True)
    await asyncio.sleep(outage)
    await asyncio.to_thread(server.start)


async def _collect(items: AsyncIterator[Relayed], into: list[Relayed]) -> None:
    async for item in items:
        into.append(item)


async def _until_seq(items: AsyncIterator[Relayed], seq: int) -> AsyncIterator[Relayed]:
    """The items up to the one covering `seq` (a snapshot or an event), then stop reading."""
    async for item in items:
        yield item
        if item.seq >= seq:
            break
    await items.aclose()  # type: ignore[attr-defined]


def test_producer_crash_is_noticed_from_its_lease_alone(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    # The reader's own lease_ttl is an hour: if it waited a grace period of its own after
    # the producer's lease expired, it would still be waiting. Redis did not restart, so
    # a lease that was there and is gone expired unrenewed: the producer is lost at once.
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    config = fast_config()
    ref = reference(RECORDINGS[0])
    stream = sid()
    producer = _spawn(
        script,
        "produce",
        redis_server.url,
        _config_json(config),
        stream,
        f"{REAL / RECORDINGS[0]}|0.05",
    )

    async def read() -> list[Relayed]:
        reader_config = dataclasses.replace(config, lease_ttl=3600.0)
        async with Relay.from_url(redis_server.url, reader_config) as relay:
            items = relay.subscribe(stream)
            first = [await anext(items)]
            assert producer.stdout is not None
            for _ in range(len(ref.chunks) // 2):
                await asyncio.to_thread(producer.stdout.readline)
            producer.send_signal(signal.SIGKILL)  # no goodbye: only the lease can tell
            return await asyncio.wait_for(drain(items, first), 30)

    try:
        items = asyncio.run(read())
    finally:
        _reap(producer)
    end = items[-1]
    assert end.synthetic and isinstance(end.event, MessageCompleted)
    assert end.event.message.status == "incomplete"
    assert end.event.message.metadata["error"]["type"] == "relay_producer_lost"
    assert 0 < end.seq < len(ref.events)


def _serve_process(redis_url: str) -> tuple[subprocess.Popen[bytes], str]:
    """`streamfold serve` with the relay routes in a process of its own (uvicorn, with its
    lifespan and signal handling), once it answers."""
    import httpx
    from redis_support import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "streamfold", "serve", str(REAL), "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--redis", redis_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(400):
        assert process.poll() is None, process.communicate()[1].decode()
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/relay/info", timeout=1).status_code == 200:
                return process, url
        time.sleep(0.05)
    process.kill()
    raise AssertionError("streamfold serve did not answer")


def test_a_worker_stopped_with_sigterm_ends_its_replays_as_cancelled(
    redis_server: RedisServer,
) -> None:
    import httpx

    server, url = _serve_process(redis_server.url)
    try:
        started = httpx.post(
            f"{url}/relay/start", json={"recording": PAGE_RECORDING, "speed": 0.05}, timeout=10
        )
        assert started.status_code == 200, started.text
        stream = started.json()["id"]

        async def read() -> list[Relayed]:
            async with Relay.from_url(redis_server.url) as relay:  # serve's own config
                items = relay.subscribe(stream)
                seen = [await anext(items) for _ in range(3)]
                server.send_signal(signal.SIGTERM)  # a graceful stop of the worker
                return await asyncio.wait_for(drain(items, seen), 60)

        items = asyncio.run(read())
        server.wait(timeout=30)
    finally:
        server.kill()
        server.communicate(timeout=10)
    end = items[-1]
    assert isinstance(end.event, MessageCompleted)
    assert not end.synthetic  # the producer said so itself, not its lease
    assert end.event.message.status == "cancelled"
    assert [item.seq for item in items[1:]] == list(range(items[0].seq + 1, end.seq + 1))


def test_redis_gone_for_good_ends_every_reader_with_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import gc

    import httpx

    caplog.set_level(logging.WARNING)
    server = RedisServer(tmp_path / "gone")
    server.start()
    try:
        config = fast_config(reconnect_timeout=1.0)
        with _worker(server.url, config) as a, httpx.Client(timeout=30) as http:
            started = http.post(
                f"{a}/relay/start", json={"recording": PAGE_RECORDING, "speed": 0.05}
            )
            stream = started.json()["id"]
            with (
                http.stream("GET", f"{a}/relay/events/{stream}") as events,
                http.stream("GET", f"{a}/relay/ui-stream/{stream}") as ui,
            ):
                event_lines, ui_lines = events.iter_lines(), ui.iter_lines()
                assert _sse_events(event_lines, 2)[0]["event"] == "snapshot"
                assert _sse_events(ui_lines, 1)
                server.stop(kill=True)  # and it never comes back
                last_event = _sse_events(event_lines, 10_000)[-1]
                ui_data = [e["data"] for e in _sse_events(ui_lines, 10_000)]
            for _ in range(400):  # until the producer has given up too
                if any("stopped" in r.getMessage() for r in caplog.records):
                    break
                time.sleep(0.05)
        gc.collect()  # an unretrieved task error is logged when the task is collected
    finally:
        server.stop()
    assert last_event["event"] == "error" and "id" not in last_event
    error = json.loads(last_event["data"])["error"]
    assert error["type"] == "RelayUnavailable"
    assert ui_data[-1] == "[DONE]", ui_data
    ui_chunks = [json.loads(data) for data in ui_data[:-1]]
    assert any(c["type"] == "error" and "Redis" in c["errorText"] for c in ui_chunks)
    assert any("stopped" in r.getMessage() for r in caplog.records)  # told, as a warning
    unhandled = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert unhandled == []


async def test_a_cancelled_publish_ends_the_message_as_cancelled(relay: Relay) -> None:
    ref = reference(RECORDINGS[0])
    stream = sid()
    fed: list[bytes] = []

    async def slow() -> AsyncIterator[bytes]:
        for chunk in ref.chunks:
            fed.append(chunk)
            yield chunk
            if len(fed) >= len(ref.chunks) // 2:
                await asyncio.Event().wait()  # a provider gone quiet

    publishing = asyncio.create_task(relay.publish(stream, slow()))
    items = relay.subscribe(stream)
    first = await anext(items)
    while len(fed) < len(ref.chunks) // 2:
        await asyncio.sleep(0.01)
    publishing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await publishing
    got = await asyncio.wait_for(drain(items, [first]), 30)
    end = got[-1]
    assert isinstance(end.event, MessageCompleted) and not end.synthetic
    assert end.event.message.status == "cancelled"
    assert await relay.redis.exists(relay.keys(stream)[2]) == 0  # the lease is gone


# --- fan-out: many readers in one worker -------------------------------------------------


async def _command_calls(redis: Any) -> dict[str, int]:
    """How many times Redis ran each command since CONFIG RESETSTAT (lower-case names)."""
    stats = await redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


async def _reader_connections(redis: Any, name: str) -> int:
    return sum(1 for client in await redis.client_list() if client.get("name") == name)


async def test_readers_of_one_stream_share_one_read_of_redis(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "fanout")
    server.start()
    try:
        ref = reference(RECORDINGS[0])
        stream = sid()
        config = fast_config()
        n = len(ref.chunks)
        points = sorted({0, n // 3, (2 * n) // 3})
        async with (
            Relay.from_url(server.url, config) as producing,
            Relay.from_url(server.url, config, client_name="fanout-readers") as reading,
        ):
            producer = producing.producer(stream)
            await producer.start()
            await producing.redis.config_resetstat()
            joined: list[asyncio.Task[list[Relayed]]] = []
            resumed: asyncio.Task[list[Relayed]] | None = None
            resumed_after = 0
            for i, chunk in enumerate(ref.chunks):
                if i in points:
                    # Five tabs open at once: each gets a snapshot then every event.
                    subs = [reading.subscribe(stream) for _ in range(5)]
                    firsts = await asyncio.gather(*(anext(s) for s in subs))
                    joined += [
                        asyncio.create_task(drain(s, [f]))
                        for s, f in zip(subs, firsts, strict=True)
                    ]
                if i == points[-1]:  # a reconnect with its last id, mid-stream
                    resumed_after = max(0, producer.seq - 2)
                    items = reading.subscribe(stream, after=f"0-{resumed_after}")
                    resumed = asyncio.create_task(drain(items))
                await producer.feed(chunk)
            await producer.close()
            results = await asyncio.wait_for(asyncio.gather(*joined), 30)
            assert resumed is not None
            again = await asyncio.wait_for(resumed, 30)
            calls = await _command_calls(producing.redis)
            connections = await _reader_connections(producing.redis, "fanout-readers")
        starts = [ref.check(items) for items in results]
        assert starts == sorted(starts)
        assert [i.seq for i in again] == list(range(resumed_after + 1, len(ref.events) + 1))
        assert [event_to_json(i.event) for i in again] == ref.events[resumed_after:]  # type: ignore[arg-type]
        # Fifteen readers and a resume: a snapshot read once per moment readers joined
        # (one reading for five at once), and the entries the worker's tail already
        # holds never read again; one blocked connection for the live tail of them all.
        assert calls.get("hmget", 0) <= len(points)
        assert calls.get("xrange", 0) <= len(points) + 1
        assert connections <= 3
    finally:
        server.stop()


def _long_chat(deltas: int) -> tuple[list[dict[str, Any]], str]:
    """An OpenAI Chat stream of `deltas` text deltas, as dict chunks, and its text."""
    words = [f"w{n} " for n in range(deltas)]
    chunks: list[dict[str, Any]] = [
        {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": word}, "finish_reason": None}
        ]}
        for word in words
    ]  # fmt: skip
    chunks.append(
        {"id": "c1", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    )  # fmt: skip
    return chunks, "".join(words)


async def test_a_slow_reader_holds_up_no_one_and_its_queue_stays_bounded(
    redis_server: RedisServer,
) -> None:
    config = fast_config(maxlen=100, checkpoint_every=20, batch=16)
    chunks, text = _long_chat(300)
    stream = sid()
    async with Relay.from_url(redis_server.url, config) as relay:
        producer = relay.producer(stream, provider="openai-chat")
        await producer.start()
        slow = relay.subscribe(stream)
        slow_items = [await anext(slow)]
        first_live = asyncio.create_task(anext(slow))  # following the live tail
        fast = asyncio.create_task(drain(relay.subscribe(stream)))
        await producer.feed(chunks[0])
        slow_items.append(await asyncio.wait_for(first_live, 10))
        for chunk in chunks[1:]:  # and now it reads nothing for a while
            await producer.feed(chunk)
        await producer.close()
        fast_items = await asyncio.wait_for(fast, 30)  # done while the slow one sleeps
        assert fast_items[-1].event.type == "message_completed"
        # What the worker queued for the slow reader is bounded: past `maxlen` entries it
        # was dropped, and the reader told to re-read from Redis.
        followed = relay._tail().streams[relay.keys(stream)[0]]
        (inbox,) = followed.readers
        assert inbox.overflow and inbox.pending <= inbox.limit == config.maxlen
        slow_items += await asyncio.wait_for(drain(slow), 30)
    for items in (slow_items, fast_items):
        # The last snapshot (the slow reader's entries were trimmed: it gets a new one),
        # then every event after it once, in order.
        start = max(n for n, item in enumerate(items) if isinstance(item.event, Snapshot))
        seqs = [item.seq for item in items[start:]]
        assert seqs == list(range(seqs[0], seqs[-1] + 1)), "a gap or a repeat"
        final = items[-1].event
        assert isinstance(final, MessageCompleted)
        assert final.message.content[0].content == text


async def test_readers_cancelled_while_others_go_on(relay: Relay) -> None:
    ref = reference(RECORDINGS[1])
    stream = sid()
    producer = relay.producer(stream)
    await producer.start()
    subs = [relay.subscribe(stream) for _ in range(8)]
    firsts = await asyncio.gather(*(anext(s) for s in subs))
    tasks = [asyncio.create_task(drain(s, [f])) for s, f in zip(subs, firsts, strict=True)]
    half = len(ref.chunks) // 2
    for chunk in ref.chunks[:half]:
        await producer.feed(chunk)
    for task in tasks[::2]:
        task.cancel()
    for chunk in ref.chunks[half:]:
        await producer.feed(chunk)
    await producer.close()
    done = await asyncio.wait_for(asyncio.gather(*tasks[1::2]), 30)
    for items in done:
        ref.check(items)
    for task in tasks[::2]:
        assert task.cancelled()
    tail = relay._tail()
    assert relay.keys(stream)[0] not in tail.streams  # the last reader to leave unfollows
    assert not tail.starting


async def test_many_streams_many_readers_in_one_worker(redis_server: RedisServer) -> None:
    refs = [reference(rel) for rel in RECORDINGS[:4]]
    config = fast_config()
    streams = [sid() for _ in range(12)]
    async with (
        Relay.from_url(redis_server.url, config) as producing,
        Relay.from_url(redis_server.url, config, client_name="many-readers") as reading,
    ):

        async def produce(n: int) -> None:
            async with producing.producer(streams[n]) as producer:
                for chunk in refs[n % len(refs)].chunks:
                    await producer.feed(chunk)
                    await asyncio.sleep(0.002 * (n % 3))

        async def read(n: int, delay: float) -> list[Relayed]:
            await asyncio.sleep(delay)
            return await drain(reading.subscribe(streams[n]))

        readers = [(n, 0.01 * r) for n in range(len(streams)) for r in range(5)]
        reads = asyncio.gather(*(read(n, delay) for n, delay in readers))
        await asyncio.gather(*(produce(n) for n in range(len(streams))))
        results = await asyncio.wait_for(reads, 30)
        connections = await _reader_connections(producing.redis, "many-readers")
    for (n, _delay), items in zip(readers, results, strict=True):
        refs[n % len(refs)].check(items)
    assert connections <= 3  # sixty readers of twelve streams: not one connection each


async def test_producers_starting_together_share_round_trips(tmp_path: Path) -> None:
    # A worker that starts many answers at once (a burst of chats) must not make each
    # producer wait its turn for a pooled connection to take its lease.
    server = RedisServer(tmp_path / "burst")
    server.start()
    try:
        async with Relay.from_url(server.url, fast_config()) as relay:
            producers = [relay.producer(sid()) for _ in range(200)]
            before = (await relay.redis.info("stats"))["total_reads_processed"]
            await asyncio.gather(*(p.start() for p in producers))
            reads = (await relay.redis.info("stats"))["total_reads_processed"] - before
            for producer in producers:
                await producer.cancel()  # (closed without a chunk, each would be an error)
        assert reads < len(producers)  # Redis read fewer requests than there are producers
    finally:
        server.stop()


async def test_thousands_of_readers_are_woken_in_turns(relay: Relay) -> None:
    # One reply for thousands of readers must not hold the event loop for all of them
    # at once: on a busy machine that turn outlasts the client's socket timeout, and a
    # Redis reply that arrived meanwhile is timed out unread.
    stream = sid()
    producer = relay.producer(stream, provider="openai-chat")
    await producer.start()
    chunks, _text = _long_chat(1)
    readers = 2_000
    subs = [relay.subscribe(stream) for _ in range(readers)]
    await asyncio.gather(*(anext(s) for s in subs))  # each has its snapshot
    got: list[int] = []
    waiting = [asyncio.create_task(anext(s)) for s in subs]  # each follows the tail
    for task in waiting:
        task.add_done_callback(lambda _t: got.append(1))
    await asyncio.sleep(0.05)
    seen: list[int] = []  # how many readers have their event, each time that changes

    async def watch() -> None:
        for _ in range(1_000_000):  # one turn of the loop per step
            await asyncio.sleep(0)
            if got and (not seen or len(got) != seen[-1]):
                seen.append(len(got))
            if len(got) == readers:
                return

    watching = asyncio.create_task(watch())
    await producer.feed(chunks[0])
    await asyncio.wait_for(watching, 30)
    assert seen[-1] == readers
    assert len(seen) > 1 and seen[0] < readers  # not all in the same turn
    for sub in subs:
        await sub.aclose()
    await producer.cancel()  # (one chunk, no whole event: closed, it would be an error)


async def test_a_reader_arms_a_timer_per_poll_not_per_event(relay: Relay) -> None:
    # A reader waits for its next entries with a deadline (the poll, for its liveness
    # check). Arming and cancelling a timer for every event it is handed was a sixth of a
    # busy worker's CPU; one timer, moved on when it fires early, serves all the waits.
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if getattr(callback, "__name__", "") == "_expire":
            armed.append(when)
        return call_at(when, callback, *args, **kwargs)

    loop.call_at = counting  # type: ignore[method-assign]
    try:
        chunks, text = _long_chat(200)
        stream = sid()
        got: list[Relayed] = []
        reading = asyncio.create_task(_collect(relay.subscribe(stream), got))

        async def paced() -> AsyncIterator[dict[str, Any]]:
            for chunk in chunks:
                await asyncio.sleep(0.002)
                yield chunk

        began = time.monotonic()
        message = await relay.publish(stream, paced())
        await asyncio.wait_for(reading, 30)
        took = time.monotonic() - began
    finally:
        del loop.call_at
    assert message.text == text
    final = got[-1].event
    assert isinstance(final, MessageCompleted) and final.message.text == text
    events = sum(1 for item in got if not isinstance(item.event, Snapshot))
    assert events > 150  # handed over one or a few at a time: as many waits, nearly
    # One timer a poll (the first, and each that fired early and was moved on), not one
    # a wait; with slack for a loaded machine.
    assert len(armed) <= took / relay.config.poll + 5, (len(armed), events, took)


# --- stopping on time --------------------------------------------------------------------


async def _sse_until(lines: AsyncIterator[str], kind: str | None) -> list[dict[str, Any]]:
    """SSE events from `lines` until one of type `kind` (None: to the end of the body)."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    async for line in lines:
        if line == "":
            if current:
                events.append(current)
                if kind is not None and current.get("event") == kind:
                    return events
                current = {}
        elif ":" in line:
            name, _, value = line.partition(":")
            current[name] = value.removeprefix(" ")
    return events


def test_sigterm_with_readers_connected_cancels_at_once_and_exits(
    redis_server: RedisServer,
) -> None:
    import httpx

    server, url = _serve_process(redis_server.url)
    elsewhere = sid()  # a stream another worker produces, read through this one
    timings: dict[str, float] = {}

    async def scenario() -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]], list[str]]:
        async with (
            Relay.from_url(redis_server.url) as relay,
            relay.producer(elsewhere) as other,
            httpx.AsyncClient(timeout=30) as http,
        ):
            await other.feed(reference(PAGE_RECORDING).chunks[0])
            started = await http.post(
                f"{url}/relay/start", json={"recording": PAGE_RECORDING, "speed": 0.02}
            )
            assert started.status_code == 200, started.text
            stream = started.json()["id"]
            async with (
                http.stream("GET", f"{url}/relay/events/{stream}") as own,
                http.stream("GET", f"{url}/relay/ui-stream/{stream}") as ui,
                http.stream("GET", f"{url}/relay/events/{elsewhere}") as other_sse,
                http.stream("GET", f"{url}/relay/ui-stream/{elsewhere}") as other_ui,
            ):
                own_lines, ui_lines = own.aiter_lines(), ui.aiter_lines()
                other_lines, other_ui_lines = other_sse.aiter_lines(), other_ui.aiter_lines()
                assert (await _sse_until(own_lines, "snapshot"))[-1]["event"] == "snapshot"
                assert (await _sse_until(other_lines, "snapshot"))[-1]["event"] == "snapshot"
                assert await anext(ui_lines)
                assert await anext(other_ui_lines)
                signalled = time.monotonic()
                server.send_signal(signal.SIGTERM)  # a graceful stop, readers connected
                own_events = await asyncio.wait_for(_sse_until(own_lines, None), 20)
                timings["cancelled"] = time.monotonic() - signalled
                ui_rest = await asyncio.wait_for(_sse_until(ui_lines, None), 20)
                other_events = await asyncio.wait_for(_sse_until(other_lines, None), 20)
                other_ui_rest = await asyncio.wait_for(_sse_until(other_ui_lines, None), 20)
                await asyncio.to_thread(server.wait, 20)
                timings["exited"] = time.monotonic() - signalled
            other_ui_data = [e["data"] for e in other_ui_rest]
            return own_events, [e["data"] for e in ui_rest], other_events, other_ui_data

    try:
        own_events, ui_data, other_events, other_ui_data = asyncio.run(scenario())
    finally:
        server.kill()
        server.communicate(timeout=10)
    # The replay's readers hear that it was cancelled, at once, from the producer itself.
    end = json.loads(own_events[-1]["data"])
    assert end["type"] == "message_completed" and "synthetic" not in end
    assert end["message"]["status"] == "cancelled"
    assert ui_data[-1] == "[DONE]", ui_data
    assert any(json.loads(d).get("type") == "finish" for d in ui_data[:-1])
    # The reader of another worker's stream is let go without an error: its EventSource
    # reconnects (with its last id) to a worker that is still running.
    assert all(e.get("event") != "error" for e in other_events)
    # Its page sees a dropped connection, not an end, and follows the stream anew.
    assert "[DONE]" not in other_ui_data
    assert all(json.loads(d)["type"] not in ("error", "finish") for d in other_ui_data)
    assert timings["cancelled"] < 5, timings
    assert timings["exited"] < 10, timings


@pytest.mark.parametrize("outage", ["refused", "hangs"])
async def test_redis_down_ends_every_reader_within_the_reconnect_timeout(
    tmp_path: Path, outage: str
) -> None:
    # Worker a produces and has a reader; worker b has a reader. The reader on a shares its
    # relay's pipeline with the producer, whose write is being retried when the reader
    # asks: it must not wait for that write's retries and then for its own. A Redis that
    # hangs (SIGSTOP: connections accepted, never answered) must be given up on as soon
    # as one that refuses.
    server = RedisServer(tmp_path / outage)
    server.start()
    config = fast_config(reconnect_timeout=3.0, poll=0.5, lease_ttl=30.0)
    chunks, _ = _long_chat(5_000)
    stream = sid()
    down_at = 0.0
    ended: dict[str, tuple[float, str]] = {}
    try:
        async with Relay.from_url(server.url, config) as a, Relay.from_url(server.url, config) as b:

            async def paced() -> AsyncIterator[dict[str, Any]]:
                for chunk in chunks:
                    await asyncio.sleep(0.02)
                    yield chunk

            async def read(relay: Relay, name: str, ready: asyncio.Event) -> None:
                try:
                    async for item in relay.subscribe(stream):
                        if item.seq >= 5:
                            ready.set()
                    outcome = "ended"
                except Exception as exc:
                    outcome = type(exc).__name__
                ended[name] = (time.monotonic() - down_at, outcome)

            producing = asyncio.create_task(a.publish(stream, paced()))
            readers = []
            for relay, name in ((a, "a, the producer's worker"), (b, "b")):
                ready = asyncio.Event()
                readers.append(asyncio.create_task(read(relay, name, ready)))
                await asyncio.wait_for(ready.wait(), 20)
            assert server.process is not None
            down_at = time.monotonic()
            if outage == "hangs":
                server.process.send_signal(signal.SIGSTOP)
            else:
                await asyncio.to_thread(server.stop, kill=True)
            await asyncio.wait_for(asyncio.gather(*readers), 60)
            with pytest.raises(Exception) as raised:
                await asyncio.wait_for(producing, 60)
            if outage == "hangs":
                server.process.send_signal(signal.SIGCONT)
    finally:
        if server.process is not None:
            server.process.send_signal(signal.SIGCONT)
        server.stop(kill=True)
    assert raised.type.__name__ == "RelayUnavailable"
    for name, (after, outcome) in ended.items():
        assert outcome == "RelayUnavailable", (name, outcome)
        # reconnect_timeout plus one poll, and some slack for a loaded machine
        assert after <= config.reconnect_timeout + config.poll + 1.0, (name, ended)


# --- the relay's other doors -------------------------------------------------------------


@contextlib.contextmanager
def _capped_worker(redis_url: str, config: RelayConfig, **options: Any) -> Iterator[str]:
    """A worker with the relay routes alone, `relay_routes(**options)`."""
    from starlette.applications import Starlette

    from streamfold.web.relay_routes import relay_lifespan, relay_routes

    relay = Relay.from_url(redis_url, config)
    routes = relay_routes(relay, REAL, **options)
    with serve_in_thread(Starlette(routes=routes, lifespan=relay_lifespan(relay))) as url:
        yield url


def test_relay_start_is_capped_per_worker(redis_server: RedisServer) -> None:
    import httpx

    slow = {"recording": PAGE_RECORDING, "speed": 0.01}  # the slowest: a replay lasts minutes
    with (
        _capped_worker(redis_server.url, fast_config()) as url,
        httpx.Client(timeout=30) as http,
    ):
        accepted = [http.post(f"{url}/relay/start", json=slow) for _ in range(64)]
        assert [r.status_code for r in accepted] == [200] * 64
        refused = http.post(f"{url}/relay/start", json=slow)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert "64 replays" in refused.json()["error"]["message"]
    # A slot frees when its replay ends.
    with (
        _capped_worker(redis_server.url, fast_config(), max_replays=1) as url,
        httpx.Client(timeout=30) as http,
    ):
        fast = http.post(f"{url}/relay/start", json={**slow, "speed": 0})
        assert fast.status_code == 200
        with http.stream("GET", f"{url}/relay/events/{fast.json()['id']}") as events:
            assert _sse_events(events.iter_lines(), 10_000)[-1]["event"] == "message_completed"
        for _ in range(100):  # its task ends just after its last write
            again = http.post(f"{url}/relay/start", json=slow)
            if again.status_code == 200:
                break
            time.sleep(0.02)
        assert again.status_code == 200
        assert http.post(f"{url}/relay/start", json=slow).status_code == 503
    from streamfold.web.relay_routes import relay_routes

    for wrong in (0, True, "64"):
        with pytest.raises(UsageError, match="max_replays"):
            relay_routes(Relay.from_url(redis_server.url), REAL, max_replays=wrong)


async def test_publish_with_a_registered_provider(relay: Relay) -> None:
    import streamfold

    class LineChat(streamfold.Decoder):  # the docs' example: no to_state of its own
        provider = "relaylines"

        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self.started = False

        def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Any]:
            if payload["ev"] == "say":
                start = (
                    []
                    if self.started
                    else [streamfold.OpenPart("answer", streamfold.ContentPart(type="text"))]
                )
                self.started = True
                return [*start, streamfold.GrowPart("answer", payload["text"])]
            return [streamfold.UpdateMessage(status="complete"), streamfold.EndMessage()]

    chunks = [
        b'{"ev": "say", "text": "Hel"}\n',
        b'{"ev": "say", "text": "lo"}\n',
        b'{"ev": "end"}\n',
    ]
    streamfold.register_provider("relaylines", LineChat)
    try:
        stream = sid()
        reading = asyncio.create_task(drain(relay.subscribe(stream)))
        message = await relay.publish(stream, chunks, provider="relaylines")
        items = await asyncio.wait_for(reading, 10)
        # Detected from its first event too: the decoder is made mid-stream.
        detected = sid()
        streamfold.unregister_provider("relaylines")
        streamfold.register_provider(
            "relaylines", LineChat, detect=lambda payload, event: "ev" in payload
        )
        assert (await relay.publish(detected, chunks)).text == "Hello"
        checkpoint = await relay.checkpoint(detected, state=True)
    finally:
        streamfold.unregister_provider("relaylines")
    assert message.text == "Hello" and message.status == "complete"
    end = items[-1]
    assert isinstance(end.event, MessageCompleted) and not end.synthetic
    assert end.event.message == message
    assert checkpoint is not None and checkpoint.state is None  # its decoder saves none
    with pytest.raises(UsageError, match="cannot save its state"):
        checkpoint.folder()


async def test_stop_cancels_its_messages_and_lets_other_readers_go(
    redis_server: RedisServer,
) -> None:
    import httpx
    from starlette.applications import Starlette

    from streamfold.relay import RelayStopped
    from streamfold.web.relay_routes import relay_routes

    ref = reference(RECORDINGS[0])
    mine, theirs = sid(), sid()
    config = fast_config(lease_ttl=30.0)  # only stop() can end these readers quickly
    async with (
        Relay.from_url(redis_server.url, config) as other,
        other.producer(theirs) as elsewhere,
    ):
        relay = Relay.from_url(redis_server.url, config)
        producer = relay.producer(mine)
        await producer.feed(ref.chunks[0])
        await elsewhere.feed(ref.chunks[0])
        own_items, other_items = relay.subscribe(mine), relay.subscribe(theirs)
        first = [await anext(own_items)], [await anext(other_items)]
        reading = asyncio.gather(
            drain(own_items, first[0]), drain(other_items, first[1]), return_exceptions=True
        )
        await asyncio.sleep(0.2)  # both readers wait on the live tail
        began = time.monotonic()
        await relay.stop()
        own, let_go = await asyncio.wait_for(reading, 5)
        assert time.monotonic() - began < 2
        # The reader of the message it published hears it ended cancelled, from the
        # producer itself; the reader of another worker's message is let go.
        assert isinstance(own, list)
        end = own[-1]
        assert isinstance(end.event, MessageCompleted) and not end.synthetic
        assert end.event.message.status == "cancelled"
        assert isinstance(let_go, RelayStopped)
        # Nothing new starts on a stopped relay; the routes say so with 503 and retry-after.
        with pytest.raises(RelayStopped):
            await anext(relay.subscribe(theirs))
        with pytest.raises(RelayStopped):
            await relay.producer(sid()).start()
        app = Starlette(routes=relay_routes(relay, REAL))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            started = await http.post("/relay/start", json={"recording": PAGE_RECORDING})
            events = await http.get(f"/relay/events/{theirs}")
        for response in (started, events):
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            assert "stopped" in response.json()["error"]["message"]
        await relay.aclose()


@pytest.mark.parametrize("outage", ["refused", "hangs"])
def test_redis_down_ends_every_page_reader_within_the_reconnect_timeout(
    tmp_path: Path, outage: str
) -> None:
    import httpx

    server = RedisServer(tmp_path / outage)
    server.start()
    config = fast_config(reconnect_timeout=3.0, poll=0.5, lease_ttl=30.0)
    ended: dict[str, tuple[float, str]] = {}

    async def scenario(a: str, b: str) -> None:
        async with httpx.AsyncClient(timeout=60) as http:
            started = await http.post(
                f"{a}/relay/start", json={"recording": PAGE_RECORDING, "speed": 0.05}
            )
            stream = started.json()["id"]
            async with (
                http.stream("GET", f"{a}/relay/events/{stream}") as on_a,
                http.stream("GET", f"{b}/relay/events/{stream}") as on_b,
            ):
                readers = {"a, the producer's worker": on_a.aiter_lines(), "b": on_b.aiter_lines()}
                for lines in readers.values():
                    await _sse_until(lines, "snapshot")
                assert server.process is not None
                down_at = time.monotonic()
                if outage == "hangs":
                    server.process.send_signal(signal.SIGSTOP)
                else:
                    await asyncio.to_thread(server.stop, kill=True)

                async def last(name: str, lines: AsyncIterator[str]) -> None:
                    events = await _sse_until(lines, "error")
                    ended[name] = (time.monotonic() - down_at, events[-1].get("data", ""))

                await asyncio.wait_for(
                    asyncio.gather(*(last(n, lines) for n, lines in readers.items())), 60
                )
            if outage == "hangs":
                server.process.send_signal(signal.SIGCONT)

    try:
        with _worker(server.url, config) as a, _worker(server.url, config) as b:
            asyncio.run(scenario(a, b))
    finally:
        if server.process is not None:
            server.process.send_signal(signal.SIGCONT)
        server.stop(kill=True)
    assert len(ended) == 2
    for name, (after, data) in ended.items():
        assert json.loads(data)["error"]["type"] == "RelayUnavailable", (name, data)
        # reconnect_timeout plus one poll, and some slack for a loaded machine
        assert after <= config.reconnect_timeout + config.poll + 1.0, (name, ended)


# --- stop: any worker can end a stream; a reader that leaves cannot ---------------------


def _silent_after(chunks: list[bytes], closed: list[str]) -> AsyncIterator[bytes]:
    """A provider's response that sends `chunks` and then goes quiet (a model thinking):
    `closed` records that whoever read it closed it (the HTTP request's end)."""

    async def source() -> AsyncIterator[bytes]:
        try:
            for chunk in chunks:
                yield chunk
            await asyncio.Event().wait()  # never set: only a close ends this
        finally:
            closed.append("closed")

    return source()


async def _until_events(items: AsyncIterator[Relayed], count: int) -> list[Relayed]:
    got: list[Relayed] = []
    async for item in items:
        got.append(item)
        if not isinstance(item.event, Snapshot) and item.seq >= count:
            break
    return got


@pytest.mark.parametrize("quiet", [True, False], ids=["provider-silent", "provider-streaming"])
async def test_a_stop_from_another_worker_ends_the_stream_for_every_reader(
    redis_server: RedisServer, quiet: bool
) -> None:
    ref = reference(RECORDINGS[0])
    half = len(ref.chunks) // 2
    closed: list[str] = []
    config = fast_config()
    async with (
        Relay.from_url(redis_server.url, config) as worker_a,
        Relay.from_url(redis_server.url, config) as worker_b,
    ):
        stream = sid()
        if quiet:
            source = _silent_after(ref.chunks[:half], closed)
        else:

            async def streaming() -> AsyncIterator[bytes]:
                # A provider still sending: the stop is seen in the producer's next write.
                try:
                    for chunk in ref.chunks[:half]:
                        yield chunk
                    while True:
                        await asyncio.sleep(0.01)
                        yield b": keep-alive\n\n"
                finally:
                    closed.append("closed")

            source = streaming()
        producing = asyncio.create_task(worker_a.publish(stream, source))
        reader_a = worker_a.subscribe(stream)
        reader_b = worker_b.subscribe(stream)
        # What arrived is kept: the message is a fold of those chunks, cancelled there.
        folder = StreamFolder()
        arrived = sum(len(folder.feed(chunk)) for chunk in ref.chunks[:half])
        (cancelled,) = [e for e in folder.cancel() if isinstance(e, MessageCompleted)]
        # Once every chunk sent so far is published, the provider goes quiet (or sends
        # only keep-alives): then the stop comes, from the other worker.
        seen = await asyncio.wait_for(_until_events(reader_b, arrived), 20)
        assert seen

        assert await worker_b.request_stop(stream) is True
        message = await asyncio.wait_for(producing, 20)

        assert closed == ["closed"]  # the source (the provider's response) was closed
        assert message.status == "cancelled"
        assert message.content and message.content == cancelled.message.content
        assert message.tool_calls == cancelled.message.tool_calls
        for reader in (reader_a, reader_b):
            items = await asyncio.wait_for(drain(reader), 20)
            final = items[-1].event
            assert isinstance(final, MessageCompleted) and not items[-1].synthetic
            assert final.message.status == "cancelled"
            assert final.message.model_dump(mode="json") == message.model_dump(mode="json")
        # The stored end is the same for a reader that comes later.
        late = await drain(worker_b.subscribe(stream))
        assert isinstance(late[-1].event, MessageCompleted)
        assert late[-1].event.message.status == "cancelled"
        assert await worker_b.request_stop(stream) is False  # over: nothing to stop


async def test_a_reader_that_leaves_stops_nothing(relay: Relay) -> None:
    ref = reference(RECORDINGS[1])

    async def paced() -> AsyncIterator[bytes]:
        for chunk in ref.chunks:
            await asyncio.sleep(0.005)
            yield chunk

    stream = sid()
    producing = asyncio.create_task(relay.publish(stream, paced()))
    reader = relay.subscribe(stream)
    await asyncio.wait_for(_until_events(reader, 2), 20)
    await reader.aclose()  # type: ignore[attr-defined]  # the browser tab closed
    message = await asyncio.wait_for(producing, 20)
    assert message.status == "complete"
    assert message.model_dump(mode="json") == ref.final


async def test_a_stop_asked_before_the_stream_starts_does_not_stop_it(relay: Relay) -> None:
    ref = reference(RECORDINGS[1])
    stream = sid()
    assert await relay.request_stop(stream) is False
    message = await relay.publish(stream, ref.chunks)
    assert message.status == "complete"


async def test_a_stop_is_not_the_callers_cancellation(relay: Relay) -> None:
    # A producer's own task cancelled (the worker shutting down) still raises to its owner.
    closed: list[str] = []
    ref = reference(RECORDINGS[1])
    stream = sid()
    producing = asyncio.create_task(relay.publish(stream, _silent_after(ref.chunks[:3], closed)))
    await asyncio.wait_for(_until_events(relay.subscribe(stream), 1), 20)
    producing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await producing
    items = await drain(relay.subscribe(stream))
    assert isinstance(items[-1].event, MessageCompleted)
    assert items[-1].event.message.status == "cancelled"


def test_the_stop_route_stops_a_replay_on_another_worker(redis_server: RedisServer) -> None:
    import httpx

    config = fast_config(checkpoint_every=4, lease_ttl=2.0)
    a_worker, b_worker = _worker(redis_server.url, config), _worker(redis_server.url, config)
    with a_worker as a, b_worker as b, httpx.Client(timeout=20) as http:
        # A slow replay: it is still running when the stop comes.
        started = http.post(f"{a}/relay/start", json={"recording": PAGE_RECORDING, "speed": 0.02})
        stream = started.json()["id"]
        with http.stream("GET", f"{a}/relay/events/{stream}") as response:
            first = _sse_events(response.iter_lines(), 2)
        assert first
        stopped = http.post(f"{b}/relay/stop/{stream}")
        assert stopped.status_code == 202 and stopped.json() == {"id": stream, "stopping": True}
        with http.stream("GET", f"{b}/relay/events/{stream}") as response:
            events = _sse_events(response.iter_lines(), 100_000)
        assert events[-1]["event"] == "message_completed"
        assert json.loads(events[-1]["data"])["message"]["status"] == "cancelled"
        assert http.post(f"{b}/relay/stop/not%20an%20id").status_code == 400


# --- a turn: an agent loop's responses and the tool results between them ---------------

TURN_FIRST, TURN_SECOND = "anthropic/thinking-then-tool-use.sse", "anthropic/text-basic.sse"


def _paced_chunks(chunks: list[bytes], wait: float = 0.002) -> AsyncIterator[bytes]:
    async def source() -> AsyncIterator[bytes]:
        for chunk in chunks:
            await asyncio.sleep(wait)
            yield chunk

    return source()


def _turn_parts(items: list[Any]) -> list[Any]:
    """A turn's items as what they say: each response's final Message, each tool result,
    the end (checked: every response's items are a Snapshot then events to its end)."""
    from streamfold.relay import TurnCompleted

    out: list[Any] = []
    for item in items:
        inner = item.item
        if isinstance(inner, Relayed) and isinstance(inner.event, MessageCompleted):
            out.append(inner.event.message.model_dump(mode="json"))
        elif isinstance(inner, ToolResult):
            out.append(inner)
        elif isinstance(inner, TurnCompleted):
            out.append(inner.status)
    return out


async def test_a_turn_reaches_every_reader_and_a_late_joiner_gets_the_loop_so_far(
    redis_server: RedisServer,
) -> None:
    first, second = reference(TURN_FIRST), reference(TURN_SECOND)
    call = first.final["tool_calls"][0]
    result = ToolResult(tool_call_id=call["call_id"], name=call["name"], content="v1.2.3")
    config = fast_config()
    async with (
        Relay.from_url(redis_server.url, config) as worker_a,
        Relay.from_url(redis_server.url, config) as worker_b,
    ):
        turn_id = sid()
        early = asyncio.create_task(drain(worker_b.subscribe_turn(turn_id)))
        mid: asyncio.Task[list[Any]] | None = None
        async with worker_a.turn(turn_id) as turn:
            await turn.respond(_paced_chunks(first.chunks))
            await turn.tool_result(result)
            # Joins while the second response is being written.
            mid = asyncio.create_task(drain(worker_b.subscribe_turn(turn_id)))
            await turn.respond(_paced_chunks(second.chunks))
        late = await drain(worker_a.subscribe_turn(turn_id))
        expected = [first.final, result, second.final, "complete"]
        for items in (await asyncio.wait_for(early, 20), await mid, late):
            assert _turn_parts(items) == expected
            assert [i.step for i in items if not isinstance(i.item, Relayed)] == [1, 3]
            # Each response: a snapshot, then exactly its events from there on.
            for step, ref in ((0, first), (2, second)):
                relayed = [i.item for i in items if i.step == step]
                ref.check(relayed)

        # The loop as one UI message: two steps, the tool's output between them.
        from streamfold.ui import to_ui_message_stream

        chunks = list(to_ui_message_stream(e for item in late for e in item.events()))
        types = [c["type"] for c in chunks]
        assert types.count("start-step") == 2
        assert types.index("tool-output-available") < types.index("start-step", 2)

        # Resuming after the tool result: the second response and the end, nothing before.
        resumed = await drain(worker_b.subscribe_turn(turn_id, after="1"))
        assert _turn_parts(resumed) == [second.final, "complete"]
        middle = [i for i in late if i.step == 2][3]
        after_middle = await drain(worker_b.subscribe_turn(turn_id, after=middle.id))
        assert [i.id for i in after_middle] == [i.id for i in late][late.index(middle) + 1 :]
        with pytest.raises(UsageError, match="after="):
            await drain(worker_b.subscribe_turn(turn_id, after="x"))


async def test_a_stop_ends_the_turn_from_any_worker(redis_server: RedisServer) -> None:
    from streamfold.relay import RelayStopped

    first, second = reference(TURN_FIRST), reference(TURN_SECOND)
    call = first.final["tool_calls"][0]
    closed: list[str] = []
    config = fast_config()
    async with (
        Relay.from_url(redis_server.url, config) as worker_a,
        Relay.from_url(redis_server.url, config) as worker_b,
    ):
        turn_id = sid()
        reader = asyncio.create_task(drain(worker_b.subscribe_turn(turn_id)))
        stopped_message: Message | None = None
        async with worker_a.turn(turn_id) as turn:
            await turn.respond(first.chunks)
            await turn.tool_result(ToolResult(tool_call_id=call["call_id"], content="ok"))
            answering = asyncio.create_task(turn.respond(_silent_after(second.chunks[:4], closed)))
            await asyncio.sleep(0.2)
            assert await worker_b.request_stop(turn_id) is True
            stopped_message = await asyncio.wait_for(answering, 20)
            with pytest.raises(RelayStopped):
                await turn.respond(second.chunks)
        assert closed == ["closed"]
        assert stopped_message.status == "cancelled"
        items = await asyncio.wait_for(reader, 20)
        parts = _turn_parts(items)
        assert parts[-1] == "cancelled"
        assert parts[-2]["status"] == "cancelled"  # the response it stopped
        assert await worker_b.request_stop(turn_id) is False


async def test_a_second_start_of_a_running_turn_leaves_its_stop_request(relay: Relay) -> None:
    # Another worker trying the same turn id is refused, and takes nothing of the turn
    # that runs: the stop asked of it is still there for its heartbeat to see.
    turn_id = sid()
    turn = relay.turn(turn_id)
    await turn.start()
    assert await relay.request_stop(turn_id) is True
    with pytest.raises(RelayBusy, match="being produced by another worker"):
        await relay.turn(turn_id).start()
    assert await relay.redis.exists(relay.stop_key(turn_id)) == 1
    for _ in range(200):  # within a heartbeat (lease_ttl / 3)
        if turn.stop_requested:
            break
        await asyncio.sleep(0.01)
    assert turn.stop_requested
    await turn.close("cancelled")


async def test_a_lost_turn_producer_ends_its_readers_incomplete(relay: Relay) -> None:
    from streamfold.relay import TurnCompleted

    turn_id = sid()
    turn = relay.turn(turn_id)
    await turn.respond(reference(TURN_FIRST).chunks)
    await turn._stop_beat()  # the worker died: no heartbeat, no end
    items = await asyncio.wait_for(drain(relay.subscribe_turn(turn_id)), 20)
    end = items[-1].item
    assert isinstance(end, TurnCompleted) and end.synthetic and end.status == "incomplete"


async def test_a_write_between_checkpoints_costs_its_xadds_and_one_exists(tmp_path: Path) -> None:
    """Per batch of events the producer asks Redis two things (is the checkpoint still
    there, was a stop requested) in a single EXISTS: a command per event is the cost."""
    server = RedisServer(tmp_path / "commands")
    server.start()
    try:
        ref = reference(RECORDINGS[0])
        # No checkpoint and no heartbeat inside the measured feeds.
        config = fast_config(checkpoint_every=5000, lease_ttl=60.0)
        async with Relay.from_url(server.url, config) as relay:
            producer = relay.producer(sid())
            await producer.start()
            await relay.redis.config_resetstat()
            writes = 0
            for chunk in ref.chunks:
                writes += bool(await producer.feed(chunk))
            calls = await _command_calls(relay.redis)
            assert calls["xadd"] == producer.seq
            assert calls["exists"] == writes
            await producer.close()
            items = await drain(relay.subscribe(producer.stream_id, after=0))
            assert [event_to_json(i.event) for i in items] == ref.events  # type: ignore[arg-type]
    finally:
        server.stop()
