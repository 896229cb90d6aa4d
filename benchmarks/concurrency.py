"""Many streams folded at once in one asyncio process (streamfold.afold).

Each stream is the same generated Anthropic "mixed" stream, delivered one SSE event per
chunk (as a live connection delivers it) by an async source that yields to the loop
between chunks, so all streams interleave. Measured:

- memory per in-flight stream: every stream is held at its midpoint (half its events
  fed) and tracemalloc's current size is divided by the number of streams; the same for
  a floor consumer (split + loads + append, same async source), and the difference is
  streamfold's overhead per stream;
- throughput: deltas per second folding all streams concurrently, against folding one
  stream at a time through the same async path.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from streamfold import MessageCompleted, afold

from .floor import _ANTHROPIC_KEY, _loads
from .generate import Stream, generate

Consumer = Callable[[AsyncIterator[bytes]], Awaitable[Any]]


def _events(stream: Stream) -> list[bytes]:
    # One chunk per SSE event, blank line included.
    return [block + b"\n\n" for block in stream.sse.split(b"\n\n") if block]


async def _source(
    chunks: list[bytes], hold: asyncio.Event | None = None, arrived: list[int] | None = None
) -> AsyncIterator[bytes]:
    half = len(chunks) // 2
    for i, chunk in enumerate(chunks):
        if hold is not None and arrived is not None and i == half:
            arrived[0] += 1
            await hold.wait()
        yield chunk
        await asyncio.sleep(0)


async def _streamfold(source: AsyncIterator[bytes]) -> Any:
    final = None
    async for event in afold(source, "anthropic"):
        if type(event) is MessageCompleted:
            final = event.message
    return final


async def _floor(source: AsyncIterator[bytes]) -> Any:
    # The SSE floor, fed chunk by chunk (each chunk is whole events here): per-part lists,
    # joined at the end.
    parts: dict[Any, list[str]] = {}
    for_key = _ANTHROPIC_KEY
    async for chunk in source:
        for line in chunk.split(b"\n"):
            if line[:5] == b"data:":
                ev = _loads(line[5:])
                if ev["type"] == "content_block_delta":
                    delta = ev["delta"]
                    key = (ev["index"], delta["type"])
                    chunks = parts.get(key)
                    if chunks is None:
                        chunks = parts[key] = []
                    chunks.append(delta[for_key[delta["type"]]])
    return {key: "".join(chunks) for key, chunks in parts.items()}


async def _run_all(consumer: Consumer, chunks: list[bytes], streams: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(consumer(_source(chunks)) for _ in range(streams)))
    return time.perf_counter() - start


async def _memory_at_midpoint(consumer: Consumer, chunks: list[bytes], streams: int) -> float:
    hold = asyncio.Event()
    arrived = [0]
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tasks = [
        asyncio.ensure_future(consumer(_source(chunks, hold, arrived))) for _ in range(streams)
    ]
    while arrived[0] < streams:
        await asyncio.sleep(0.001)
    gc.collect()
    current = tracemalloc.get_traced_memory()[0]
    hold.set()
    await asyncio.gather(*tasks)
    tracemalloc.stop()
    return (current - base) / streams


# A server folding thousands of streams at once may raise the collector's thresholds:
# CPython's cyclic garbage collector otherwise walks every live fold's objects again and
# again as the streams' state grows (see the README: this, not the fold, is what costs
# the concurrent throughput).
TUNED_GC_THRESHOLDS = (100_000, 20, 100)


def measure(
    streams: int = 10_000,
    n: int = 100,
    repeats: int = 3,
    seed: int = 0,
    single_runs: int | None = None,
    gc_thresholds: tuple[int, int, int] | None = None,
) -> dict[str, Any]:
    """Per-stream memory and aggregate vs single-stream throughput, for streamfold and floor.

    `gc_thresholds`: run with `gc.set_threshold(*gc_thresholds)` (restored after).
    """
    saved = gc.get_threshold()
    if gc_thresholds is not None:
        gc.set_threshold(*gc_thresholds)
    try:
        return _measure(streams, n, repeats, seed, single_runs, gc_thresholds)
    finally:
        gc.set_threshold(*saved)


def _measure(
    streams: int,
    n: int,
    repeats: int,
    seed: int,
    single_runs: int | None,
    gc_thresholds: tuple[int, int, int] | None,
) -> dict[str, Any]:
    stream = generate("anthropic", "mixed", n, seed)
    chunks = _events(stream)
    out: dict[str, Any] = {
        "streams": streams,
        "deltas_per_stream": n,
        "chunks": len(chunks),
        "gc_thresholds": list(gc_thresholds or gc.get_threshold()),
    }
    # A check: every stream folds to the expected text.
    message = asyncio.run(_streamfold(_source(chunks)))
    text = "".join(p.content or "" for p in message.content if p.type == "text")
    out["correct"] = text == stream.expected.text
    for name, consumer in (("streamfold", _streamfold), ("floor", _floor)):
        k_single = single_runs or max(20, 2000 // n)
        singles, many = [], []
        for _ in range(repeats):

            async def one_at_a_time(consumer: Consumer = consumer, k: int = k_single) -> float:
                start = time.perf_counter()
                for _ in range(k):
                    await consumer(_source(chunks))
                return time.perf_counter() - start

            gc.collect()
            singles.append(asyncio.run(one_at_a_time()) / k_single)
            gc.collect()
            many.append(asyncio.run(_run_all(consumer, chunks, streams)))
        single = statistics.median(singles)
        aggregate = statistics.median(many)
        per_stream_bytes = asyncio.run(_memory_at_midpoint(consumer, chunks, streams))
        out[name] = {
            "single_stream_deltas_per_s": n / single,
            "aggregate_deltas_per_s": n * streams / aggregate,
            "throughput_ratio": (n * streams / aggregate) / (n / single),
            "bytes_per_stream_in_flight": per_stream_bytes,
            "wall_s": aggregate,
        }
    out["overhead_bytes_per_stream"] = (
        out["streamfold"]["bytes_per_stream_in_flight"] - out["floor"]["bytes_per_stream_in_flight"]
    )
    return out


def report(result: dict[str, Any]) -> str:
    """The concurrency measures as lines of text."""
    lines = [
        f"{result['streams']} concurrent anthropic streams of {result['deltas_per_stream']} "
        f"deltas ({result['chunks']} chunks each), one asyncio loop; gc thresholds "
        f"{tuple(result.get('gc_thresholds', ()))}; correct: {result['correct']}",
        f"{'':12} {'single Δ/s':>12} {'aggregate Δ/s':>14} {'ratio':>6} {'KiB/stream':>11}",
    ]
    for name in ("streamfold", "floor"):
        r = result[name]
        lines.append(
            f"{name:12} {r['single_stream_deltas_per_s']:12,.0f} "
            f"{r['aggregate_deltas_per_s']:14,.0f} {r['throughput_ratio']:6.2f} "
            f"{r['bytes_per_stream_in_flight'] / 1024:11.1f}"
        )
    lines.append(
        f"streamfold overhead per stream over the floor: "
        f"{result['overhead_bytes_per_stream'] / 1024:.1f} KiB"
    )
    return "\n".join(lines)


def measure_in_fresh_process(**options: Any) -> dict[str, Any]:
    """`measure(**options)` in a new interpreter.

    The harness runs this after minutes of folding 100k-delta streams: that process's
    heap (and the collector's view of it) is not that of a server folding many streams,
    and moved the ratio by up to 0.2 between runs. A fresh process measures the single
    stream and the 10,000 concurrent ones alike.
    """
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.concurrency", "--options", json.dumps(options)],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the concurrency measure failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> None:
    """`python -m benchmarks.concurrency [--options JSON]`: measure() as JSON on stdout."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.concurrency")
    parser.add_argument("--options", default="{}", help="measure()'s keyword arguments")
    options = json.loads(parser.parse_args(argv).options)
    if options.get("gc_thresholds") is not None:
        options["gc_thresholds"] = tuple(options["gc_thresholds"])
    print(json.dumps(measure(**options)))


if __name__ == "__main__":
    main()
