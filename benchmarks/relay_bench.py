"""Many relayed streams, many readers each: `python -m benchmarks.relay_bench [--quick]`.

Starts its own redis-server (127.0.0.1, a free port, no persistence) and runs, by default,
1,000 streams with 10 consumers each:

- one producer process publishes every stream (`Relay.publish`): a real recording, one
  event per chunk, `--pace` seconds apart (20 ms: a brisk model), stream i starting at
  i x `--stagger`;
- `--procs` consumer processes share the 10 x 1,000 subscriptions; each consumer joins its
  stream a random 0-300 ms after the stream starts (so most start from a snapshot), reads
  to MessageCompleted, and checks the final Message and that its seqs have no gap.

Reported: events published per second, events delivered per second (all consumers), and
the added latency per event: from the producer's publish (its wall clock, stored in the
entry) to the consumer's receipt, for events published after the consumer joined (live
ones, not the catch-up), median and p99. The machine is shared by Redis, the producer
and the consumers (2 cores here), so these are end-to-end numbers under full load.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
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

    return RelayConfig(prefix=prefix, checkpoint_every=16, lease_ttl=10.0, poll=1.0)


def produce(url: str, prefix: str, streams: int, t0: float, pace: float, stagger: float) -> None:
    from streamfold.relay import Relay

    sources = [_chunks(rel)[0] for rel in RECORDINGS]

    async def one(relay: Relay, n: int) -> int:
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

    async def main() -> None:
        async with Relay.from_url(url, _config(prefix), max_connections=128) as relay:
            counts = await asyncio.gather(*(one(relay, n) for n in range(streams)))
        print(json.dumps({"events": sum(counts), "end": time.time()}), flush=True)

    asyncio.run(main())


def consume(
    url: str, prefix: str, jobs: list[tuple[int, int]], t0: float, stagger: float, out: str
) -> None:
    from streamfold import MessageCompleted
    from streamfold.relay import Relay, Snapshot

    finals = [_chunks(rel)[1] for rel in RECORDINGS]
    latencies: list[float] = []
    delivered = 0
    failures: list[str] = []

    async def one(relay: Relay, stream: int, reader: int) -> None:
        nonlocal delivered
        rng = random.Random(stream * 100 + reader)
        await asyncio.sleep(max(0.0, t0 + stream * stagger + rng.uniform(0, 0.3) - time.time()))
        joined = time.time()
        last = None
        async for item in relay.subscribe(f"bench-{stream}"):
            now = time.time()
            if isinstance(item.event, Snapshot):
                last = item.seq
                continue
            if last is not None and item.seq != last + 1:
                failures.append(f"stream {stream}: seq {item.seq} after {last}")
            last = item.seq
            delivered += 1
            if item.published_at is not None and item.published_at >= joined:
                latencies.append(now - item.published_at)
            if isinstance(item.event, MessageCompleted):
                expected = finals[stream % len(finals)]
                if item.event.message.model_dump(mode="json") != expected:
                    failures.append(f"stream {stream} reader {reader}: wrong final message")

    async def main() -> None:
        async with Relay.from_url(url, _config(prefix), max_connections=128) as relay:
            await asyncio.gather(*(one(relay, s, r) for s, r in jobs))

    asyncio.run(main())
    Path(out).write_text(
        json.dumps(
            {
                "delivered": delivered,
                "failures": failures[:20],
                "failed": len(failures),
                "latencies": latencies,
                "end": time.time(),
            }
        )
    )


def run(streams: int, readers: int, procs: int, pace: float, stagger: float) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests"))
    from redis_support import RedisServer

    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis", maxclients=4096)
        server.start()
        try:
            prefix = f"bench{int(time.time())}:"
            t0 = time.time() + 3.0  # every process is up and imported by then
            jobs = [(s, r) for s in range(streams) for r in range(readers)]
            outs = [str(Path(tmp) / f"consumer{i}.json") for i in range(procs)]
            consumers = [
                ctx.Process(
                    target=consume,
                    args=(server.url, prefix, jobs[i::procs], t0, stagger, outs[i]),
                )
                for i in range(procs)
            ]
            reader_end, writer_end = ctx.Pipe(duplex=False)
            producer = ctx.Process(
                target=_produce_to_pipe,
                args=(writer_end, server.url, prefix, streams, t0, pace, stagger),
            )
            for process in (*consumers, producer):
                process.start()
            produced = json.loads(reader_end.recv())
            for process in (*consumers, producer):
                process.join(timeout=600)
            results = [json.loads(Path(out).read_text()) for out in outs]
        finally:
            server.stop()
    load_before = [round(x, 2) for x in os.getloadavg()]
    latencies = sorted(x for r in results for x in r["latencies"])
    delivered = sum(r["delivered"] for r in results)
    end = max(r["end"] for r in results)
    return {
        "streams": streams,
        "consumers_per_stream": readers,
        "consumer_processes": procs,
        "pace_s": pace,
        "events_published": produced["events"],
        "publish_seconds": round(produced["end"] - t0, 2),
        "published_per_s": round(produced["events"] / (produced["end"] - t0)),
        "events_delivered": delivered,
        "delivered_per_s": round(delivered / (end - t0)),
        "failures": sum(r["failed"] for r in results),
        "failure_samples": [f for r in results for f in r["failures"]][:5],
        "live_latency_samples": len(latencies),
        "latency_median_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "latency_p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2)
        if latencies
        else None,
        "cpus": os.cpu_count(),
        "load_average_at_end": load_before,
        "hiredis": importlib.util.find_spec("hiredis") is not None,
    }


def _produce_to_pipe(pipe: Any, *args: Any) -> None:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        produce(*args)
    pipe.send(buffer.getvalue().strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--consumers", type=int, default=10, help="consumers per stream")
    parser.add_argument("--procs", type=int, default=2, help="consumer processes")
    parser.add_argument("--pace", type=float, default=0.02, help="seconds between events")
    parser.add_argument("--stagger", type=float, default=0.002, help="seconds between starts")
    parser.add_argument("--quick", action="store_true", help="50 streams x 3 consumers")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()
    if args.quick:
        args.streams, args.consumers = 50, 3
    result = run(args.streams, args.consumers, args.procs, args.pace, args.stagger)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
