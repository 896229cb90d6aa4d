"""The relay at scale, next to a bare Redis consumer: `python -m benchmarks.relay_bench`.

Two phases in one run, each on its own fresh redis-server (127.0.0.1, a free port, no
persistence), with the same producer, the same streams and the same readers; by default
1,000 streams with 10 readers each, in 2 reader processes:

- one producer process publishes every stream (`Relay.publish`): a real recording, one
  event per chunk, `--pace` seconds apart (20 ms: a brisk model), stream i starting at
  i x `--stagger`;
- the readers of stream i join it a random 0-300 ms after it starts (the same draws in
  both phases), read it to its end and check that no entry is missing;
- phase `streamfold`: each reader is a `relay.subscribe()` (a Snapshot, then the events);
  every process has one Relay, so its readers share its connection pool, its tail read
  and its parsed entries;
- phase `bare`: each reader is the least a Redis consumer can do: blocking XREAD of the
  stream's entries from the first one (redis-py asyncio, one pool per process), orjson
  per entry, nothing else. A blocked XREAD holds its connection, so this costs one
  connection per reader;
- phase `pubsub`: the tightest floor, a bare Redis pub/sub fan-out: the producer PUBLISHes
  each chunk (no fold, no history), each reader process holds one PSUBSCRIBE connection,
  parses each message once and feeds the readers in the process (an asyncio queue each).
  Pub/sub keeps nothing, so a reader gets only what is published after it joins: its
  deliveries are its live events, and its latency is the fan-out's alone.

Reported for each phase: deliveries (every reader x every event of its stream, whether it
came in a snapshot or as an entry) per CPU-second of the reader processes; the added
latency of live events (from the producer's clock stamped in the entry to the reader's
receipt, for events published after the reader joined), median and p99; Redis memory per
stream (used_memory, after the producer finished, less before it started); the number
of Redis connections the readers held; Redis's and the producer's CPU; and the redis-py
parser in use (hiredis, or the pure-Python one with `--no-hiredis`). The machine is shared
by Redis, the producer and the readers, so these are end-to-end figures under full load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = [
    "anthropic/code-execution-bash-thinking.sse",
    "anthropic/thinking-then-tool-use.sse",
    "openai-chat/tool-calls-parallel-interleaved-args.sse",
    "openai-chat/text-include-usage.sse",
]
MODES = ("streamfold", "bare", "pubsub")
_JOIN_SPREAD = 0.3  # readers join up to this long after their stream starts
_FD_HEADROOM = 200


def _chunks(rel: str) -> tuple[list[bytes], dict[str, Any]]:
    from streamfold import fold_message
    from streamfold.record import split_frames
    from streamfold.recording import detect_recording

    data = (ROOT / "tests" / "fixtures" / "real" / rel).read_bytes()
    kind, _provider = detect_recording(data)
    assert kind is not None and kind != "objects"
    chunks = split_frames(data, kind)
    return chunks, fold_message(chunks).model_dump(mode="json")


def _config(prefix: str) -> Any:
    from streamfold.relay import RelayConfig

    # A producer that falls behind its schedule on a loaded machine is waited for.
    return RelayConfig(
        prefix=prefix, checkpoint_every=16, lease_ttl=10.0, poll=1.0, start_timeout=300.0
    )


def _client_options(hiredis: bool, name: str) -> dict[str, Any]:
    options: dict[str, Any] = {"client_name": name}
    if not hiredis:
        from redis._parsers import _AsyncRESP2Parser

        options["parser_class"] = _AsyncRESP2Parser
    return options


def _parser(hiredis: bool) -> str:
    if not hiredis:
        return "_AsyncRESP2Parser (pure Python)"
    from redis.asyncio.connection import DefaultParser

    return DefaultParser.__name__


async def _connections(client: Any, name: str) -> int:
    """How many connections Redis sees under `name` (a pool keeps what it opened)."""
    return sum(1 for c in await client.client_list() if c.get("name") == name)


class _Start:
    """Every process gets ready (imported, connected), then all start at one moment."""

    def __init__(self, ctx: Any) -> None:
        self.ready = ctx.Queue()
        self.go = ctx.Event()
        self.at = ctx.Value("d", 0.0)

    async def wait(self) -> float:
        """In a child: say it is ready, wait for the others; the common start time."""
        self.ready.put(os.getpid())
        await asyncio.to_thread(self.go.wait, 900)
        return float(self.at.value)

    def release(self, processes: list[Any]) -> float:
        """In the parent: once every process is ready, start them all."""
        import queue

        ready = 0
        deadline = time.monotonic() + 900
        while ready < len(processes) and time.monotonic() < deadline:
            try:
                self.ready.get(timeout=1)
                ready += 1
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in processes):
                    raise RuntimeError("a benchmark process failed before it was ready") from None
        self.at.value = time.time() + 0.5
        self.go.set()
        return float(self.at.value)


def produce(
    url: str,
    prefix: str,
    streams: int,
    start: _Start,
    pace: float,
    stagger: float,
    hiredis: bool = True,
    mode: str = "streamfold",
) -> dict[str, Any]:
    from streamfold.relay import Relay

    sources = [_chunks(rel)[0] for rel in RECORDINGS]

    async def one(relay: Relay, n: int, t0: float) -> int:
        await asyncio.sleep(max(0.0, t0 + n * stagger - time.time()))
        chunks = sources[n % len(sources)]

        async def paced() -> Any:
            for chunk in chunks:
                yield chunk
                await asyncio.sleep(pace)

        producer = relay.producer(f"bench-{n}")
        async with producer:
            await producer.pump(paced())
        return producer.seq

    async def one_pubsub(client: Any, n: int, t0: float) -> int:
        import orjson

        await asyncio.sleep(max(0.0, t0 + n * stagger - time.time()))
        chunks = sources[n % len(sources)]
        channel = f"{prefix}bench-{n}"
        for k, chunk in enumerate(chunks):
            end = k == len(chunks) - 1
            body = {"t": time.time(), "seq": k + 1, "e": chunk.decode(), "end": end}
            await client.publish(channel, orjson.dumps(body))
            if not end:
                await asyncio.sleep(pace)
        return len(chunks)

    async def main() -> dict[str, Any]:
        options = _client_options(hiredis, "bench-producer")
        cpu = time.process_time()
        if mode == "pubsub":
            import redis.asyncio as aioredis

            pool = aioredis.BlockingConnectionPool.from_url(url, max_connections=128, **options)
            client = aioredis.Redis.from_pool(pool)
            try:
                await client.ping()
                t0 = await start.wait()
                counts = await asyncio.gather(*(one_pubsub(client, n, t0) for n in range(streams)))
            finally:
                await client.aclose()
            return {"events": sum(counts), "end": time.time(), "cpu_s": time.process_time() - cpu}
        async with Relay.from_url(url, _config(prefix), max_connections=128, **options) as relay:
            await relay.redis.ping()
            t0 = await start.wait()
            counts = await asyncio.gather(*(one(relay, n, t0) for n in range(streams)))
        return {"events": sum(counts), "end": time.time(), "cpu_s": time.process_time() - cpu}

    return asyncio.run(main())


def _join_at(t0: float, stagger: float, stream: int, reader: int) -> float:
    return t0 + stream * stagger + random.Random(stream * 100 + reader).uniform(0, _JOIN_SPREAD)


def consume(
    mode: str,
    url: str,
    prefix: str,
    jobs: list[tuple[int, int]],
    start: _Start,
    stagger: float,
    out: str,
    hiredis: bool = True,
    name: str = "bench-reader",
    max_connections: int = 10_000,
) -> None:
    """Read every (stream, reader) job in `jobs` to its end; write the figures to `out`."""
    finals = [_chunks(rel)[1] for rel in RECORDINGS]
    latencies: list[float] = []
    delivered = 0
    failures: list[str] = []

    checked: dict[int, tuple[Any, bool]] = {}

    def right(stream: int, event: Any) -> bool:
        # Every reader's final message is checked; one the readers share, once.
        known = checked.get(id(event))
        if known is None:
            expected = finals[stream % len(finals)]
            known = checked[id(event)] = (
                event,
                event.message.model_dump(mode="json") == expected,
            )
        return bool(known[1])

    def seen(stream: int, reader: int, last: int | None, seq: int) -> None:
        if last is not None and seq != last + 1:
            failures.append(f"stream {stream} reader {reader}: seq {seq} after {last}")

    async def streamfold_reader(relay: Any, stream: int, reader: int, t0: float) -> None:
        from streamfold import MessageCompleted
        from streamfold.relay import Snapshot

        nonlocal delivered
        await asyncio.sleep(max(0.0, _join_at(t0, stagger, stream, reader) - time.time()))
        joined = time.time()
        last = None
        async for item in relay.subscribe(f"bench-{stream}"):
            now = time.time()
            if not isinstance(item.event, Snapshot):
                seen(stream, reader, last, item.seq)
                if item.published_at is not None and item.published_at >= joined:
                    latencies.append(now - item.published_at)
            last = item.seq
            if isinstance(item.event, MessageCompleted) and not right(stream, item.event):
                failures.append(f"stream {stream} reader {reader}: wrong final message")
        delivered += last or 0

    async def bare_reader(client: Any, stream: int, reader: int, t0: float) -> None:
        import orjson

        nonlocal delivered
        await asyncio.sleep(max(0.0, _join_at(t0, stagger, stream, reader) - time.time()))
        joined = time.time()
        key = f"{prefix}bench-{stream}:events"
        cursor, last = "0-0", None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            reply = await client.xread({key: cursor}, count=512, block=1000)
            now = time.time()
            for _key, entries in reply or ():
                for entry_id, fields in entries:
                    event = orjson.loads(fields[b"e"])
                    published = float(fields[b"t"])
                    seq = int(entry_id.split(b"-")[1])
                    seen(stream, reader, last, seq)
                    last = seq
                    if published >= joined:
                        latencies.append(now - published)
                    cursor = entry_id
                    if event["type"] == "message_completed":
                        delivered += seq
                        return
        failures.append(f"stream {stream} reader {reader}: no end within 300 s")

    fed: dict[int, list[asyncio.Queue[Any]]] = {}  # pubsub: the readers of each stream here

    async def fan_out(pubsub: Any) -> None:
        import orjson

        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is None or message["type"] != "pmessage":
                continue
            stream = int(message["channel"].rsplit(b"-", 1)[1])
            body = orjson.loads(message["data"])  # once, for every reader here
            for queue in fed.get(stream, ()):
                queue.put_nowait(body)

    async def pubsub_reader(queue: asyncio.Queue[Any], stream: int, reader: int, t0: float) -> None:
        # Fed from the start (pub/sub keeps nothing for a reader that comes later); its
        # latency counts from when it would have joined, as the other readers' does.
        nonlocal delivered
        joined = _join_at(t0, stagger, stream, reader)
        last = None
        try:
            while True:
                body = await asyncio.wait_for(queue.get(), 300)
                now = time.time()
                seen(stream, reader, last, body["seq"])
                last = body["seq"]
                delivered += 1
                if body["t"] >= joined:
                    latencies.append(now - body["t"])
                if body["end"]:
                    return
        finally:
            fed[stream].remove(queue)

    def feed_from_the_start(stream: int) -> asyncio.Queue[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        fed.setdefault(stream, []).append(queue)
        return queue

    async def reader(read: Any, source: Any, stream: int, n: int, t0: float) -> None:
        try:
            await read(source, stream, n, t0)
        except Exception as exc:  # counted, and the other readers go on
            failures.append(f"stream {stream} reader {n}: {type(exc).__name__}: {exc}")

    async def main() -> tuple[float, int]:
        import orjson  # noqa: F401  (imported before the clock starts)
        import redis.asyncio as aioredis

        from streamfold import MessageCompleted  # noqa: F401
        from streamfold.relay import Relay

        options = _client_options(hiredis, name)
        if mode == "streamfold":
            async with Relay.from_url(url, _config(prefix), max_connections=128, **options) as r:
                await r.redis.ping()
                t0 = await start.wait()
                cpu = time.process_time()
                await asyncio.gather(*(reader(streamfold_reader, r, s, n, t0) for s, n in jobs))
                cpu = time.process_time() - cpu
                return cpu, await _connections(r.redis, name)
        if mode == "pubsub":
            subscriber = aioredis.Redis.from_url(url, **options)
            pubsub = subscriber.pubsub()
            await pubsub.psubscribe(f"{prefix}bench-*")
            queues = [feed_from_the_start(s) for s, _n in jobs]
            t0 = await start.wait()
            cpu = time.process_time()
            fanning = asyncio.create_task(fan_out(pubsub))
            await asyncio.gather(
                *(
                    reader(pubsub_reader, q, s, n, t0)
                    for q, (s, n) in zip(queues, jobs, strict=True)
                )
            )
            cpu = time.process_time() - cpu
            fanning.cancel()
            # The subscriber's connection (CLIENT LIST asks on another of the pool's).
            connections = await _connections(subscriber, name) - 1
            await pubsub.aclose()
            await subscriber.aclose()
            return cpu, connections
        # One connection per blocked reader: redis-py's plain pool, or where Redis and the
        # file-descriptor limit allow fewer, its blocking pool (readers wait for one).
        if len(jobs) <= max_connections:
            pool = aioredis.ConnectionPool.from_url(url, max_connections=len(jobs), **options)
        else:
            pool = aioredis.BlockingConnectionPool.from_url(
                url, max_connections=max_connections, timeout=None, **options
            )
        client = aioredis.Redis.from_pool(pool)
        try:
            await _warm(pool, min(len(jobs), max_connections))
            t0 = await start.wait()
            cpu = time.process_time()
            await asyncio.gather(*(reader(bare_reader, client, s, n, t0) for s, n in jobs))
            cpu = time.process_time() - cpu
            return cpu, await _connections(client, name)
        finally:
            await client.aclose()

    cpu, connections = asyncio.run(main())
    Path(out).write_text(
        json.dumps(
            {
                "delivered": delivered,
                "failures": failures[:20],
                "failed": len(failures),
                "latencies": latencies,
                "cpu_s": cpu,
                "connections": connections,
                "end": time.time(),
            }
        )
    )


async def _warm(pool: Any, count: int) -> None:
    """Open the pool's connections before the clock starts, as a worker that has been
    serving for a while has them."""
    held: list[Any] = []
    for start in range(0, count, 256):  # no more at once than Redis's listen backlog
        batch = range(start, min(count, start + 256))
        held += await asyncio.gather(*(pool.get_connection() for _ in batch))
    for connection in held:
        await pool.release(connection)


def _fd_limit() -> int:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _stream_memory(client: Any, prefix: str, streams: int) -> int:
    """What the streams' own keys (events, checkpoint, lease) take in Redis."""
    pipe = client.pipeline(transaction=False)
    for n in range(streams):
        for suffix in ("events", "checkpoint", "lease"):
            pipe.memory_usage(f"{prefix}bench-{n}:{suffix}", samples=0)
    return sum(size or 0 for size in pipe.execute())


def _redis_cpu(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def phase(
    mode: str, streams: int, readers: int, procs: int, pace: float, stagger: float, hiredis: bool
) -> dict[str, Any]:
    """One run of the producer and `procs` reader processes of `mode` on a fresh Redis."""
    import redis

    sys.path.insert(0, str(ROOT / "tests"))
    from redis_support import RedisServer

    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        maxclients = max(1000, _fd_limit() - 64)
        server = RedisServer(Path(tmp) / "redis", maxclients=maxclients)
        server.start()
        processes: list[Any] = []
        try:
            admin = redis.Redis.from_url(server.url)
            memory_before = int(admin.info("memory")["used_memory"])
            redis_cpu = _redis_cpu(admin)
            prefix = "bench:"
            start = _Start(ctx)
            jobs = [(s, r) for s in range(streams) for r in range(readers)]
            outs = [str(Path(tmp) / f"reader{i}.json") for i in range(procs)]
            consumers = [
                ctx.Process(
                    target=consume,
                    args=(mode, server.url, prefix, jobs[i::procs], start, stagger, outs[i]),
                    kwargs={
                        "hiredis": hiredis,
                        "name": f"bench-{mode}-{i}",
                        "max_connections": (maxclients - _FD_HEADROOM) // procs,
                    },
                )
                for i in range(procs)
            ]
            reader_end, writer_end = ctx.Pipe(duplex=False)
            producer = ctx.Process(
                target=_produce_to_pipe,
                args=(writer_end, server.url, prefix, streams, start, pace, stagger, hiredis, mode),
            )
            processes = [*consumers, producer]
            for process in processes:
                process.start()
            writer_end.close()  # so a producer that dies is an EOFError here, not a hang
            t0 = start.release(processes)
            produced = json.loads(reader_end.recv())
            memory = int(admin.info("memory")["used_memory"]) - memory_before
            stream_memory = _stream_memory(admin, prefix, streams)
            for process in processes:
                process.join(timeout=900)
            redis_cpu = _redis_cpu(admin) - redis_cpu
            admin.close()
            results = [json.loads(Path(out).read_text()) for out in outs]
        finally:
            for process in processes:
                if process.is_alive():
                    process.kill()  # a failed run leaves nothing behind
            server.stop()
    latencies = sorted(x for r in results for x in r["latencies"])
    delivered = sum(r["delivered"] for r in results)
    cpu = sum(r["cpu_s"] for r in results)
    end = max(r["end"] for r in results)

    def ms(seconds: float) -> float:
        return round(seconds * 1000, 2)

    return {
        "events_published": produced["events"],
        "publish_seconds": round(produced["end"] - t0, 2),
        "deliveries": delivered,
        "deliveries_expected": produced["events"] * readers,
        "failures": sum(r["failed"] for r in results),
        "failure_samples": [f for r in results for f in r["failures"]][:5],
        "reader_cpu_s": round(cpu, 2),
        "deliveries_per_cpu_s": round(delivered / cpu) if cpu else None,
        "deliveries_per_s": round(delivered / (end - t0)),
        "live_latency_samples": len(latencies),
        "latency_median_ms": ms(statistics.median(latencies)) if latencies else None,
        "latency_p99_ms": ms(latencies[int(len(latencies) * 0.99)]) if latencies else None,
        "redis_memory_per_stream_bytes": round(stream_memory / streams),
        "redis_memory_growth_per_stream_bytes": round(memory / streams),
        "reader_connections": sum(r["connections"] for r in results),
        "reader_connection_cap": (maxclients - _FD_HEADROOM) // procs * procs,
        "redis_cpu_s": round(redis_cpu, 2),
        "producer_cpu_s": round(produced["cpu_s"], 2),
        # What publishing costs the producer per event (fold, JSON, the writes): the
        # relay's own share, beside the pub/sub floor's PUBLISH of each chunk.
        "producer_cpu_us_per_event": round(produced["cpu_s"] / produced["events"] * 1e6, 1)
        if produced["events"]
        else None,
    }


def run(
    streams: int,
    readers: int,
    procs: int = 2,
    pace: float = 0.02,
    stagger: float = 0.002,
    hiredis: bool = True,
    modes: tuple[str, ...] = MODES,
) -> dict[str, Any]:
    """Every mode in turn, on the same workload; the ratios streamfold / bare."""
    result: dict[str, Any] = {
        "streams": streams,
        "readers_per_stream": readers,
        "reader_processes": procs,
        "pace_s": pace,
        "stagger_s": stagger,
        "parser": _parser(hiredis),
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }
    for mode in modes:
        result[mode] = phase(mode, streams, readers, procs, pace, stagger, hiredis)
        print(mode, json.dumps(result[mode]), file=sys.stderr, flush=True)
    names = ("deliveries_per_cpu_s", "latency_median_ms", "latency_p99_ms")
    for floor, key in (("bare", "ratios"), ("pubsub", "ratios_pubsub")):
        if "streamfold" in result and floor in result:
            ours, theirs = result["streamfold"], result[floor]
            result[key] = {
                name: round(ours[name] / theirs[name], 3) if ours[name] and theirs[name] else None
                for name in names
            }
    return result


def _produce_to_pipe(pipe: Any, *args: Any) -> None:
    pipe.send(json.dumps(produce(*args)))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--readers", type=int, default=10, help="readers per stream")
    parser.add_argument("--procs", type=int, default=2, help="reader processes")
    parser.add_argument("--pace", type=float, default=0.02, help="seconds between events")
    parser.add_argument("--stagger", type=float, default=0.002, help="seconds between starts")
    parser.add_argument("--modes", default=",".join(MODES), help="streamfold,bare,pubsub")
    parser.add_argument("--no-hiredis", action="store_true", help="the pure-Python parser")
    parser.add_argument("--quick", action="store_true", help="100 streams x 10 readers")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)
    if args.quick:
        args.streams = 100
    modes = tuple(m for m in args.modes.split(",") if m)
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: expected some of {','.join(MODES)}, got {args.modes!r}")
    result = run(
        args.streams,
        args.readers,
        args.procs,
        args.pace,
        args.stagger,
        hiredis=not args.no_hiredis,
        modes=modes,
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return result


if __name__ == "__main__":
    main()
