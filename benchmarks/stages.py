"""Where streamfold's time goes: the pipeline cut into cumulative stages.

`python -m benchmarks.stages [--n 100000] [--workload mixed]` times, per provider, the
framing alone, framing + JSON, + the provider decoder, + the accumulator, and the whole
public fold (events through the Fold generator) with the decoder's SSE hot lane off,
next to the SSE floor; each as ns per delta (median of 5, in this process's CPU time,
which a busy shared machine disturbs less than wall time). The differences between
adjacent stages are what each box costs. Last, the public fold as shipped: the hot lane
takes the common delta events straight from their bytes, skipping the boxes above.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import jiter

from streamfold.accumulator import Accumulator
from streamfold.framing import SSEDecoder
from streamfold.providers import get_decoder

from .floor import sse_floor
from .generate import PROVIDERS, WORKLOADS, generate
from .subject import chunks, streamfold_sse


def _frames(sse: bytes) -> int:
    framer = SSEDecoder()
    count = 0
    for piece in chunks(sse):
        count += len(framer.feed(piece))
    return count + len(framer.close())


def _frames_json(sse: bytes) -> int:
    framer = SSEDecoder()
    count = 0
    for piece in chunks(sse):
        for frame in framer.feed(piece):
            if frame.data != b"[DONE]":
                jiter.from_json(frame.data)
                count += 1
    return count


def _frames_json_decode(provider: str, sse: bytes, accumulate: bool) -> int:
    framer = SSEDecoder()
    decoder = get_decoder(provider)
    acc = Accumulator(provider=provider)
    count = 0
    for piece in chunks(sse):
        for frame in framer.feed(piece):
            if frame.data == b"[DONE]":
                deltas = decoder.done()
            else:
                deltas = decoder.decode(jiter.from_json(frame.data), frame.event)
            if accumulate:
                count += len(acc.apply_all(deltas))
            else:
                count += len(deltas)
    deltas = decoder.close()
    if accumulate:
        acc.apply_all(deltas)
        acc.close()
    return count


def _median_ns(run: Callable[[], Any], n: int, repeats: int) -> float:
    samples = []
    run()
    for _ in range(repeats):
        gc.collect()
        start = time.process_time()
        run()
        samples.append(time.process_time() - start)
    return statistics.median(samples) * 1e9 / n


def _without_hot_lane(provider: str, sse: bytes) -> Any:
    """The public fold with the decoder's SSE hot lane off: every event framed and decoded
    (a decoder whose `sse_hot_head` is None takes none, and the fold never tries)."""
    decoder_class = type(get_decoder(provider))
    decoder_class.sse_hot_head = None  # type: ignore[assignment]  # shadows the property
    try:
        return streamfold_sse(provider, sse)
    finally:
        del decoder_class.sse_hot_head


def stages(provider: str, workload: str, n: int, repeats: int = 5) -> list[tuple[str, float]]:
    """(stage, ns per delta), cumulative, for one generated stream."""
    stream = generate(provider, workload, n)
    sse = stream.sse
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("SSE floor (split, orjson, append, join)", lambda: sse_floor(provider, sse)),
        ("framing (SSEDecoder)", lambda: _frames(sse)),
        ("+ JSON (jiter.from_json)", lambda: _frames_json(sse)),
        ("+ decoder.decode", lambda: _frames_json_decode(provider, sse, False)),
        ("+ Accumulator.apply_all", lambda: _frames_json_decode(provider, sse, True)),
        ("public fold(), hot lane off", lambda: _without_hot_lane(provider, sse)),
        ("public fold() (StreamFolder, Fold)", lambda: streamfold_sse(provider, sse)),
    ]
    return [(name, _median_ns(run, n, repeats)) for name, run in steps]


def main(argv: list[str] | None = None) -> None:
    """Print the stage table for each provider."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stages")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--workload", default="mixed", choices=WORKLOADS)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    for provider in PROVIDERS:
        print(f"\n{provider} / {args.workload} / N={args.n}")
        previous = None
        for name, ns in stages(provider, args.workload, args.n, args.repeats):
            cumulative = not name.startswith(("SSE", "public fold() ("))
            step = f"(+{ns - previous:,.0f})" if cumulative and previous is not None else ""
            print(f"  {name:42} {ns:8,.0f} ns/Δ  {step}")
            previous = ns if cumulative else None


if __name__ == "__main__":
    main()
