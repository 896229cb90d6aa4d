"""The one command: `python -m benchmarks.run [--quick] [--json out.json]`.

For each provider (Anthropic, OpenAI Chat, OpenAI Responses), workload (mixed, bigargs)
and size N, in one process, side by side: the SSE and dict floors, streamfold from SSE
bytes and from dicts (every event produced, final Message), streamfold plus a live
partial-arguments view (bigargs), and each installed peer. Every implementation's result
is checked against the generator's expected result before it is timed; a wrong result is
reported, never timed. Then the real recordings, then many concurrent streams.

Columns: ns per delta (median of the runs / N), the ratio to the floor of the same input
(SSE floor for SSE inputs, dict floor for dict inputs), growth t(100k)/t(10k) (10 is
linear), peak memory (tracemalloc, a separate untimed pass) and its ratio to the floor's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import concurrency
from .floor import JSON_LIBRARY, Result, dict_floor, sse_floor, sse_floor_chunks
from .generate import PROVIDERS, WORKLOADS, Stream, generate
from .peers import PEERS
from .subject import (
    event_chunks,
    streamfold_dicts,
    streamfold_sse,
    streamfold_sse_chunks,
    streamfold_sse_live_args,
    streamfold_sse_live_args_incremental,
)

Runner = Callable[[], Result]

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real"

# Targets from the issue.
SSE_RATIO = 1.3
DICT_RATIO = 3.0
GROWTH = 11.0
MEMORY_RATIO = 1.5


@dataclass
class Impl:
    """One implementation measured on one stream."""

    name: str
    input: str  # "sse" or "dicts"
    checks: tuple[str, ...]
    prepare: Callable[[Stream], Runner]
    kind: str = "peer"  # floor / streamfold / peer
    note: str = ""


@dataclass
class Row:
    """One measurement: an implementation on one (provider, workload, N)."""

    provider: str
    workload: str
    impl: str
    kind: str
    input: str
    n: int
    status: str  # ok / wrong / missing / skipped / error
    runs: int = 0
    median_s: float | None = None
    ns_per_delta: float | None = None
    ratio: float | None = None
    peak_bytes: int | None = None
    memory_ratio: float | None = None
    note: str = ""
    samples_s: list[float] = field(default_factory=list)
    # Which build of streamfold measured it: a name (benchmarks.compare's) and what
    # `streamfold.is_compiled()` said in that process.
    build: str = ""
    compiled: bool | None = None
    # benchmarks.compare with --processes: each worker process's ratio to its own floor
    # (the row's ratio is their median).
    process_ratios: list[float] = field(default_factory=list)


def _subject_impls() -> list[Impl]:
    full = ("text", "thinking", "signature", "tools")
    return [
        Impl("floor", "sse", full, lambda s: lambda: sse_floor(s.provider, s.sse), "floor"),
        Impl("floor", "dicts", full, lambda s: lambda: dict_floor(s.provider, s.dicts), "floor"),
        Impl(
            "streamfold",
            "sse",
            full,
            lambda s: lambda: streamfold_sse(s.provider, s.sse),
            "streamfold",
        ),
        Impl(
            "streamfold",
            "dicts",
            full,
            lambda s: lambda: streamfold_dicts(s.provider, s.dicts),
            "streamfold",
        ),
    ]


_LIVE = Impl(
    "streamfold + live args (jiter on prefix)",
    "sse",
    ("text", "tools"),
    lambda s: lambda: streamfold_sse_live_args(s.provider, s.sse),
    "streamfold",
    "the consumer re-parses the prefix per delta (the reference; its growth is not judged)",
)
_LIVE_INCREMENTAL = Impl(
    "streamfold + live args (incremental)",
    "sse",
    ("text", "tools"),
    lambda s: lambda: streamfold_sse_live_args_incremental(s.provider, s.sse),
    "streamfold",
    "fold(partial_arguments=True): the consumer mirrors each delta's arguments_changes",
)


# A live connection: one SSE event per piece, as a server flushes each event (the rows
# above read 64 KiB pieces); the floor is fed the same pieces.
_LIVE_CONNECTION = tuple(
    Impl(
        name,
        "live",
        ("text", "thinking", "signature", "tools"),
        lambda s, fold_pieces=fold_pieces: functools.partial(
            fold_pieces, s.provider, event_chunks(s.sse)
        ),
        name,
    )
    for name, fold_pieces in (("floor", sse_floor_chunks), ("streamfold", streamfold_sse_chunks))
)


def check(result: Result, stream: Stream, fields: tuple[str, ...]) -> str | None:
    """None when `result` holds what `stream` should fold to (in `fields`), else why not."""
    expected = stream.expected
    if "text" in fields and result.text != expected.text:
        return f"text differs ({len(result.text)} vs {len(expected.text)} chars)"
    if "thinking" in fields and (result.thinking or None) != expected.thinking:
        return "thinking differs"
    if "signature" in fields and (result.signature or None) != expected.signature:
        return "signature differs"
    if "tools" in fields:
        want = {k: json.loads(v) for k, v in expected.tools.items()}
        got = {}
        for k, v in result.tools.items():
            try:
                got[k] = json.loads(v) if isinstance(v, str) else v
            except ValueError:
                return f"tool {k} arguments are not JSON"
        if got != want:
            return "tool arguments differ"
    return None


# What the samples are timed with: wall time, or with `use_cpu_time()` this process's CPU
# time. On a machine shared with other work, wall time also counts the waits for a core
# (at a load average of 8 on 2 cores, medians of one cell moved 2-5x between sizes).
clock: Callable[[], float] = time.perf_counter


def use_cpu_time() -> None:
    """Time every sample from now on with this process's CPU time."""
    global clock
    clock = time.process_time


# A sample lasts at least this long: a shorter run is repeated in a loop and the sample
# is its mean, so timer resolution and the cache sweep of the gc.collect() before each
# sample do not make up a small stream's time (the recordings are timed the same way).
MIN_SAMPLE_S = 0.02
# Before the samples, the run is repeated for this long: the first run pays for imports
# and compiled patterns, and CPython specializes the hot code over the next few (a 1k
# Responses fold: 17.8 ms, 2.2 ms, then 1.4-1.5 ms, steady at 1.3 ms from the eighth).
# The loop of a sample is sized from a warm run, not from the first.
WARMUP_S = 0.1


def _warm_up(run: Runner, seconds: float = WARMUP_S) -> float:
    """Repeat `run` for `seconds` (at least once); the seconds one warm run takes."""
    deadline = clock() + seconds
    last = _time(run)
    while clock() < deadline:
        last = _time(run)
    return last


def _time(run: Runner, loops: int = 1) -> float:
    """Seconds one run takes: the mean of `loops` runs in a row, after a collection."""
    gc.collect()
    start = clock()
    for _ in range(loops):
        run()
    return (clock() - start) / loops


def _peak(run: Runner) -> int:
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _projected(history: list[tuple[int, float]], n: int) -> float | None:
    """A guess at one run's seconds at size n from the smaller sizes (None: no history)."""
    if not history:
        return None
    n1, t1 = history[-1]
    scale = n / n1
    if len(history) >= 2:
        n0, t0 = history[-2]
        # Observed exponent between the last two sizes (1 = linear), never below linear.
        growth = (t1 / t0) if t0 > 0 else 1.0
        exponent = max(1.0, _log(growth) / _log(n1 / n0))
        return t1 * scale**exponent
    return t1 * scale


def _log(x: float) -> float:
    import math

    return math.log(x) if x > 0 else 0.0


def _checked_run(impl: Impl, stream: Stream, row: Row) -> tuple[Runner, float] | None:
    """The run of `impl` on `stream` and the seconds its first (checked) run took; None,
    with the row's status and note saying why, if it breaks or folds the stream wrong."""
    try:
        run = impl.prepare(stream)
        # Imports and inputs move to the permanent generation: a collection then
        # scans only what the fold itself allocates, whatever was imported before.
        gc.collect()
        gc.freeze()
        start = clock()
        result = run()  # the checked run (the first of the warm-up)
        first = clock() - start
        problem = check(result, stream, impl.checks)
        del result
    except Exception as exc:  # a peer that breaks on a stream is reported, not fatal
        row.status = "error"
        row.note = f"{type(exc).__name__}: {exc}"[:200]
        return None
    if problem is not None:
        row.status = "wrong"
        row.note = problem
        return None
    return run, first


def _new_row(impl: Impl, stream: Stream, n: int) -> Row:
    row = Row(stream.provider, stream.workload, impl.name, impl.kind, impl.input, n, "ok")
    row.note = impl.note
    return row


def _finish_row(row: Row, samples: list[float], repeats: int) -> None:
    row.runs = len(samples)
    row.samples_s = samples
    row.median_s = statistics.median(samples)
    row.ns_per_delta = row.median_s * 1e9 / row.n
    if row.runs < repeats:
        row.note = (row.note + "; " if row.note else "") + f"only {row.runs} run(s): slow"


def measure_impl(
    impl: Impl,
    streams: dict[int, Stream],
    *,
    repeats: int,
    budget: float,
    memory: bool,
    warmup_s: float = WARMUP_S,
) -> list[Row]:
    """Check, then time (median of `repeats`), then measure peak memory, at each size."""
    rows: list[Row] = []
    history: list[tuple[int, float]] = []
    for n, stream in sorted(streams.items()):
        row = _new_row(impl, stream, n)
        rows.append(row)
        guess = _projected(history, n)
        if guess is not None and guess > budget:
            row.status = "skipped"
            row.note = f"one run projected at {guess:.0f} s (budget {budget:.0f} s)"
            continue
        checked = _checked_run(impl, stream, row)
        if checked is None:
            continue
        run, first = checked
        runs = max(1, min(repeats, int(budget // max(first, 1e-9))))
        if runs == 1:
            samples = [first]  # too slow for more: the checked run is the one sample
        else:
            warm = _warm_up(run, warmup_s)
            runs = max(1, min(repeats, int(budget // max(warm, 1e-9))))
            loops = max(1, int(MIN_SAMPLE_S / max(warm, 1e-9)))
            samples = [_time(run, loops) for _ in range(runs)]
        _finish_row(row, samples, repeats)
        history.append((n, statistics.median(samples)))
        if memory and statistics.median(samples) * 5 < budget:
            row.peak_bytes = _peak(run)
    return rows


def measure_side_by_side(
    impls: list[Impl],
    streams: dict[int, Stream],
    *,
    repeats: int,
    budget: float,
    memory: bool,
    warmup_s: float = WARMUP_S,
) -> list[Row]:
    """`measure_impl` for the implementations of one cell (a floor and streamfold), their
    samples taken in turn at each size (floor, streamfold, floor, ...): a slower spell of
    a shared machine (another process's burst, its cache traffic) then falls on each of
    them alike instead of on whichever ran during it, and their ratio holds."""
    rows: list[Row] = []
    for n, stream in sorted(streams.items()):
        ready: list[tuple[Row, Runner, int]] = []
        runs = repeats
        for impl in impls:
            row = _new_row(impl, stream, n)
            rows.append(row)
            checked = _checked_run(impl, stream, row)
            if checked is None:
                continue
            run = checked[0]
            warm = _warm_up(run, warmup_s)
            runs = max(1, min(runs, int(budget // max(warm, 1e-9))))
            ready.append((row, run, max(1, int(MIN_SAMPLE_S / max(warm, 1e-9)))))
        taken: list[list[float]] = [[] for _ in ready]
        for _ in range(runs):
            for (_, run, loops), samples in zip(ready, taken, strict=True):
                samples.append(_time(run, loops))
        for (row, run, _), samples in zip(ready, taken, strict=True):
            _finish_row(row, samples, repeats)
            if memory and statistics.median(samples) * 5 < budget:
                row.peak_bytes = _peak(run)
    return rows


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def benchmark(
    sizes: list[int],
    *,
    repeats: int,
    budget: float,
    memory: bool = True,
    providers: tuple[str, ...] = PROVIDERS,
    workloads: tuple[str, ...] = WORKLOADS,
    peers: bool = True,
    seed: int = 0,
    log: Callable[[str], None] = print,
    warmup_s: float = WARMUP_S,
) -> list[Row]:
    """Every implementation on every generated stream."""
    rows: list[Row] = []
    for provider in providers:
        for workload in workloads:
            streams = {n: generate(provider, workload, n, seed) for n in sizes}
            impls = _subject_impls()
            if workload == "bigargs":
                impls.extend((_LIVE, _LIVE_INCREMENTAL))
            if peers:
                impls.extend(peer_impls(provider, workload, sizes, rows))
            group: list[Row] = []
            for impl in impls:
                log(f"  {provider}/{workload}: {impl.name} ({impl.input})")
                group.extend(
                    measure_impl(
                        impl,
                        streams,
                        repeats=repeats,
                        budget=budget,
                        memory=memory,
                        warmup_s=warmup_s,
                    )
                )
            _relate(group)
            rows.extend(group)
    return rows


def peer_impls(provider: str, workload: str, sizes: list[int], missing: list[Row]) -> list[Impl]:
    """The installed peers that fold this provider's workload; a row per size in `missing`
    for each peer whose package is not installed."""
    impls = []
    for peer in PEERS:
        if provider not in peer.providers or workload not in peer.workloads:
            continue
        if not _installed(peer.module):
            missing.extend(
                Row(provider, workload, peer.name, "peer", peer.input, n, "missing",
                    note=f"{peer.module} not installed (pip install -e '.[bench]')")
                for n in sizes
            )  # fmt: skip
            continue
        impls.append(Impl(peer.name, peer.input, peer.checks, peer.prepare, "peer", peer.note))
    return impls


def _relate(rows: list[Row]) -> None:
    """Fill in each row's ratios to the floor of the same input and size."""
    floors = {(r.input, r.n): r for r in rows if r.kind == "floor" and r.median_s}
    for r in rows:
        floor = floors.get((r.input, r.n))
        if floor is None or r.median_s is None or floor.median_s is None:
            continue
        r.ratio = r.median_s / floor.median_s
        if r.peak_bytes is not None and floor.peak_bytes:
            r.memory_ratio = r.peak_bytes / floor.peak_bytes


# --- real recordings -------------------------------------------------------------------


_API = {"messages": "anthropic", "chat-completions": "openai-chat", "responses": "openai-responses"}


def _real_recordings() -> list[tuple[str, str]]:
    index = json.loads((REAL / "INDEX.json").read_text())
    return sorted(
        (entry["file"], _API[entry["api"]])
        for entry in index
        if entry.get("format") == "sse" and entry.get("api") in _API
    )


def recordings(
    repeats: int,
    loop_s: float = 0.02,
    log: Callable[[str], None] = print,
    warmup_s: float = WARMUP_S,
) -> list[dict[str, Any]]:
    """Floor vs streamfold on each real SSE recording of the three providers' APIs."""
    out = []
    for rel, provider in _real_recordings():
        data = (REAL / rel).read_bytes()
        entry: dict[str, Any] = {"file": rel, "provider": provider, "bytes": len(data)}
        try:
            floor_result = sse_floor(provider, data)
        except Exception as exc:
            floor_result = None
            entry["floor_note"] = f"floor cannot read it: {type(exc).__name__}"
        try:
            ours = streamfold_sse(provider, data)
        except Exception as exc:
            entry["status"] = f"error: {type(exc).__name__}: {exc}"[:200]
            out.append(entry)
            continue
        entry["text_matches_floor"] = (
            None if floor_result is None else ours.text == (floor_result.text)
        )
        # Tiny streams: time a loop of enough folds to last `loop_s`, median of `repeats`.
        impls: list[tuple[str, Runner]] = [
            ("streamfold", functools.partial(streamfold_sse, provider, data))
        ]
        if floor_result is not None:
            impls.insert(0, ("floor", functools.partial(sse_floor, provider, data)))
        for name, run in impls:
            once = _warm_up(run, warmup_s)
            loops = max(1, int(loop_s / max(once, 1e-7)))
            samples = []
            for _ in range(repeats):
                gc.collect()
                start = clock()
                for _ in range(loops):
                    run()
                samples.append((clock() - start) / loops)
            entry[f"{name}_us"] = statistics.median(samples) * 1e6
        if "floor_us" in entry:
            entry["ratio"] = entry["streamfold_us"] / entry["floor_us"]
        entry["status"] = "ok"
        out.append(entry)
    log(f"  {len(out)} recordings")
    return out


def live(
    n: int,
    repeats: int,
    providers: tuple[str, ...] = PROVIDERS,
    log: Callable[[str], None] = print,
    warmup_s: float = WARMUP_S,
) -> list[dict[str, Any]]:
    """Floor vs streamfold on each provider's mixed stream as a live connection delivers
    it, one SSE event per piece (the tables above read 64 KiB pieces)."""
    full = ("text", "thinking", "signature", "tools")
    out = []
    for provider in providers:
        stream = generate(provider, "mixed", n)
        pieces = event_chunks(stream.sse)
        entry: dict[str, Any] = {"provider": provider, "n": n, "chunks": len(pieces)}
        impls = (
            ("floor", functools.partial(sse_floor_chunks, provider, pieces)),
            ("streamfold", functools.partial(streamfold_sse_chunks, provider, pieces)),
        )
        for name, run in impls:
            problem = check(run(), stream, full)
            if problem is not None:
                entry["status"] = f"{name}: {problem}"
                break
            warm = _warm_up(run, warmup_s)
            loops = max(1, int(MIN_SAMPLE_S / max(warm, 1e-9)))
            median = statistics.median(_time(run, loops) for _ in range(repeats))
            entry[f"{name}_ns_per_delta"] = median * 1e9 / n
        else:
            entry["status"] = "ok"
            entry["ratio"] = entry["streamfold_ns_per_delta"] / entry["floor_ns_per_delta"]
        out.append(entry)
    log(f"  {len(out)} live streams")
    return out


def telemetry_cost(
    repeats: int,
    providers: tuple[str, ...] = PROVIDERS,
    n: int = 1000,
    log: Callable[[str], None] = print,
    warmup_s: float = WARMUP_S,
) -> list[dict[str, Any]]:
    """µs per fold of each provider's mixed stream of `n` deltas: OpenTelemetry off (never
    instrumented, then after `uninstrument()`) and on (`instrument()` with the SDK's
    providers and in-memory reader / exporter: a span and four histograms per fold)."""
    from streamfold import telemetry

    sdk = _installed("opentelemetry.sdk")
    out = []
    for provider in providers:
        stream = generate(provider, "mixed", n)
        run = functools.partial(streamfold_sse, provider, stream.sse)
        entry: dict[str, Any] = {"provider": provider, "n": n}

        def timed(run: Runner = run) -> float:
            warm = _warm_up(run, warmup_s)
            loops = max(1, int(MIN_SAMPLE_S / max(warm, 1e-9)))
            return statistics.median(_time(run, loops) for _ in range(repeats)) * 1e6

        entry["off_us"] = timed()
        if sdk:
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )

            tracer_provider = TracerProvider()
            tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
            meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
            telemetry.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
            try:
                entry["on_us"] = timed()
            finally:
                telemetry.uninstrument()
        entry["off_again_us"] = timed()
        out.append(entry)
    log(f"  {len(out)} telemetry cells")
    return out


def telemetry_report(entries: list[dict[str, Any]]) -> str:
    """The OpenTelemetry table: µs per fold, off, on, and off again after uninstrument()."""
    lines = ["OpenTelemetry, µs per fold (mixed stream), off / instrument() / uninstrument():"]
    lines.append(f"  {'provider':18}{'N':>8}{'off':>10}{'on':>10}{'off again':>11}")
    for e in entries:
        on = e.get("on_us")
        lines.append(
            f"  {e['provider']:18}{e['n']:>8}{e['off_us']:>10,.1f}"
            f"{_fmt(on, ',.1f', 10)}{e['off_again_us']:>11,.1f}"
        )
    return "\n".join(lines)


def live_report(entries: list[dict[str, Any]]) -> str:
    """The live-connection table: ns per delta, floor and streamfold, and their ratio."""
    lines = ["One SSE event per chunk (a live connection), mixed workload:"]
    lines.append(f"  {'provider':18}{'N':>8}{'floor ns/Δ':>13}{'streamfold ns/Δ':>17}{'ratio':>8}")
    for e in entries:
        if e.get("status") != "ok":
            lines.append(f"  {e['provider']:18}{e['n']:>8}  {e.get('status')}")
            continue
        lines.append(
            f"  {e['provider']:18}{e['n']:>8}{e['floor_ns_per_delta']:>13,.0f}"
            f"{e['streamfold_ns_per_delta']:>17,.0f}{e['ratio']:>8.2f}"
        )
    return "\n".join(lines)


# --- output ----------------------------------------------------------------------------


def _fmt(value: float | None, spec: str, width: int) -> str:
    return f"{value:{spec}}".rjust(width) if value is not None else "-".rjust(width)


def table(rows: list[Row], sizes: list[int]) -> str:
    """The side-by-side table: one line per implementation and input."""
    big, mid = sizes[-1], sizes[-2] if len(sizes) > 1 else None
    head = (
        f"{'implementation':42} {'in':5} "
        + " ".join(f"{_size(n) + ' ns/Δ':>11}" for n in sizes)
        + " "
        + " ".join(f"{'x fl ' + _size(n):>9}" for n in sizes)
        + f" {'growth':>7} {'peak MiB':>9} {'x fl mem':>8}  note"
    )
    lines: list[str] = []
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.provider, r.workload), []).append(r)
    for (provider, workload), group in groups.items():
        lines.append("")
        lines.append(f"== {provider} / {workload}")
        lines.append(head)
        by_impl: dict[tuple[str, str], dict[int, Row]] = {}
        for r in group:
            by_impl.setdefault((r.impl, r.input), {})[r.n] = r
        for (impl, inp), per_n in by_impl.items():
            line = f"{impl[:42]:42} {inp:5} "
            line += " ".join(_fmt(per_n[n].ns_per_delta if n in per_n else None, ",.0f", 11)
                             for n in sizes)  # fmt: skip
            line += " " + " ".join(
                _fmt(per_n[n].ratio if n in per_n else None, ".2f", 9) for n in sizes
            )
            growth = _growth(per_n, mid, big)
            line += " " + _fmt(growth, ".1f", 7)
            last = per_n.get(big)
            peak = last.peak_bytes / 2**20 if last and last.peak_bytes else None
            line += " " + _fmt(peak, ".2f", 9)
            line += " " + _fmt(last.memory_ratio if last else None, ".2f", 8)
            notes: list[str] = []
            for r in per_n.values():
                for note in [*r.note.split("; "), r.status if r.status != "ok" else ""]:
                    if note and note not in notes:
                        notes.append(note)
            line += "  " + "; ".join(notes)
            lines.append(line.rstrip())
    return "\n".join(lines)


def markdown(rows: list[Row], sizes: list[int], title: str = "") -> str:
    """The same table as Markdown, one per workload, for the READMEs."""
    big, mid = sizes[-1], sizes[-2] if len(sizes) > 1 else None
    head = (
        "| implementation | in | "
        + " | ".join(f"ns/Δ {_size(n)}" for n in sizes)
        + " | "
        + " | ".join(f"x floor {_size(n)}" for n in sizes)
        + f" | t({_size(big)})/t({_size(mid or big)}) | peak MiB {_size(big)} | x floor mem |"
    )
    rule = "|---|---|" + "--:|" * (2 * len(sizes) + 3)
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.provider, r.workload), []).append(r)
    lines: list[str] = []
    for (provider, workload), group in groups.items():
        lines += ["", f"**{provider} / {workload}**{title}", "", head, rule]
        by_impl: dict[tuple[str, str], dict[int, Row]] = {}
        for r in group:
            by_impl.setdefault((r.impl, r.input), {})[r.n] = r
        for (impl, inp), per_n in by_impl.items():
            last = per_n.get(big)
            cells = [impl, inp]
            cells += [_fmt(per_n[n].ns_per_delta if n in per_n else None, ",.0f", 0) for n in sizes]
            cells += [_fmt(per_n[n].ratio if n in per_n else None, ".2f", 0) for n in sizes]
            cells.append(_fmt(_growth(per_n, mid, big), ".1f", 0))
            peak = last.peak_bytes / 2**20 if last and last.peak_bytes else None
            cells.append(_fmt(peak, ".2f", 0))
            cells.append(_fmt(last.memory_ratio if last else None, ".2f", 0))
            lines.append("| " + " | ".join(c.strip() for c in cells) + " |")
    return "\n".join(lines)


def _size(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def _growth(per_n: dict[int, Row], mid: int | None, big: int) -> float | None:
    if mid is None or mid not in per_n or big not in per_n:
        return None
    a, b = per_n[mid].median_s, per_n[big].median_s
    return b / a if a and b else None


def targets(rows: list[Row], sizes: list[int]) -> list[tuple[str, bool | None, str]]:
    """Each target of the issue: (what, met?, the measured values)."""
    out: list[tuple[str, bool | None, str]] = []
    mid, big = (sizes[-2], sizes[-1]) if len(sizes) > 1 else (None, sizes[-1])
    ours = [r for r in rows if r.kind == "streamfold"]

    def judge(what: str, values: list[tuple[str, float | None]], limit: float) -> None:
        known = [(k, v) for k, v in values if v is not None]
        if not known:
            out.append((what, None, "not measured"))
            return
        worst = max(v for _, v in known)
        detail = ", ".join(f"{k} {v:.2f}" for k, v in known)
        out.append((what, worst <= limit and len(known) == len(values), detail))

    def rows_of(name: str, inp: str) -> list[Row]:
        return [r for r in ours if r.impl == name and r.input == inp]

    judge(
        f"SSE -> Message ≤ {SSE_RATIO}x SSE floor (every workload, every N)",
        [
            (f"{r.provider}/{r.workload}/{_size(r.n)}", r.ratio)
            for r in rows_of("streamfold", "sse")
        ],
        SSE_RATIO,
    )
    judge(
        f"dicts -> Message ≤ {DICT_RATIO}x dict floor",
        [(f"{r.provider}/{r.workload}/{_size(r.n)}", r.ratio)
         for r in rows_of("streamfold", "dicts")],
        DICT_RATIO,
    )  # fmt: skip
    growth_rows: list[tuple[str, float | None]] = []
    by: dict[tuple[str, str, str, str], dict[int, Row]] = {}
    for r in ours:
        by.setdefault((r.provider, r.workload, r.impl, r.input), {})[r.n] = r
    for (provider, workload, impl, inp), per_n in by.items():
        if impl == _LIVE.name:
            continue  # the re-parse reference: it grows by design
        label = f"{provider}/{workload}/{inp}" + (" live" if "live" in impl else "")
        growth = _growth(per_n, mid, big)
        if growth is None and len(sizes) > 2 and mid is not None:
            # The largest size was skipped as too slow: judge the step below it.
            growth = _growth(per_n, sizes[-3], mid)
            label += f" ({_size(mid)}/{_size(sizes[-3])}; {_size(big)} skipped)"
        growth_rows.append((label, growth))
    judge(
        f"t({_size(big)})/t({_size(mid or big)}) ≤ {GROWTH:g} (incl. bigargs live)",
        growth_rows,
        GROWTH,
    )
    judge(
        f"peak memory at N={_size(big)} ≤ {MEMORY_RATIO}x the floor's",
        [(f"{r.provider}/{r.workload}/{r.input}", r.memory_ratio)
         for r in ours if r.n == big and "live" not in r.impl],
        MEMORY_RATIO,
    )  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmarks, print the table, optionally write it as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="N = 1k, 10k; 5 runs; short budget")
    parser.add_argument("--json", type=Path, help="write the table and metadata here")
    parser.add_argument("--sizes", help="comma-separated N (default 1000,10000,100000)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per median (default 5)")
    parser.add_argument("--budget", type=float, help="seconds one implementation may take at one N")
    parser.add_argument("--provider", action="append", choices=PROVIDERS)
    parser.add_argument("--workload", action="append", choices=WORKLOADS)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--no-recordings", action="store_true")
    parser.add_argument("--no-live", action="store_true", help="no one-event-per-chunk runs")
    parser.add_argument(
        "--shapes", action="store_true", help="the delta shapes of the real recordings too"
    )
    parser.add_argument(
        "--streams", type=int, help="concurrent streams (default 10000; quick 1000)"
    )
    parser.add_argument("--no-concurrency", action="store_true")
    parser.add_argument("--no-telemetry", action="store_true", help="no OpenTelemetry cells")
    parser.add_argument(
        "--cpu-time", action="store_true", help="time with CPU time (a machine shared with others)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny loops everywhere (the test suite's run)"
    )
    parser.add_argument("--show", type=Path, help="print the table of a saved --json file")
    parser.add_argument(
        "--markdown", action="store_true", help="with --show: the tables as Markdown"
    )
    args = parser.parse_args(argv)
    if args.show:
        return show(args.show, as_markdown=args.markdown)

    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [1000, 10000] if args.quick else [1000, 10000, 100000]
    )  # fmt: skip
    budget = args.budget if args.budget is not None else (10.0 if args.quick else 60.0)
    streams = args.streams if args.streams is not None else (1000 if args.quick else 10000)
    log: Callable[[str], None] = (lambda _: None) if args.quiet else (
        lambda s: print(s, file=sys.stderr, flush=True)
    )  # fmt: skip
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

    started = time.time()
    if args.cpu_time:
        use_cpu_time()
    warmup = 0.0 if args.smoke else WARMUP_S
    log(
        f"benchmarks: N = {sizes}, {args.repeats} runs, "
        f"budget {budget:g} s per implementation and N"
    )
    rows = benchmark(
        sizes,
        repeats=args.repeats,
        budget=budget,
        memory=not args.no_memory,
        providers=tuple(args.provider or PROVIDERS),
        workloads=tuple(args.workload or WORKLOADS),
        peers=not args.no_peers,
        log=log,
        warmup_s=warmup,
    )
    print(table(rows, sizes))
    goals = targets(rows, sizes)
    print("\nTargets:")
    for what, met, detail in goals:
        mark = "n/a " if met is None else ("MET " if met else "NOT ")
        print(f"  {mark} {what}\n        {detail}")

    real: list[dict[str, Any]] = []
    if not args.no_recordings:
        log("real recordings")
        real = recordings(args.repeats, 0.0 if args.smoke else 0.02, log, warmup)
        ok = [e for e in real if e.get("ratio") is not None]
        if ok:
            ratios = sorted(e["ratio"] for e in ok)
            total = sum(e["streamfold_us"] for e in ok) / sum(e["floor_us"] for e in ok)
            print(
                f"\nReal recordings ({len(ok)} SSE files of the three APIs): streamfold/floor "
                f"median {statistics.median(ratios):.2f}x, min {ratios[0]:.2f}x, "
                f"max {ratios[-1]:.2f}x, over all {total:.2f}x; text equal to the floor's: "
                f"{sum(bool(e.get('text_matches_floor')) for e in ok)}/{len(ok)}"
            )

    live_entries: list[dict[str, Any]] = []
    if not args.no_live:
        log("live connections")
        live_entries = live(
            40 if args.smoke else 10_000,
            args.repeats,
            tuple(args.provider or PROVIDERS),
            log,
            warmup,
        )
        print("\n" + live_report(live_entries))

    shape_out: dict[str, Any] = {"shapes": [], "shape_rows": []}
    if args.shapes:
        from . import shapes

        log("delta shapes of the real recordings")
        found = [s for s in shapes.find_shapes() if s.provider in (args.provider or PROVIDERS)]
        shape_rows = shapes.measure(
            found, sizes, repeats=args.repeats, budget=budget, warmup_s=warmup, log=log
        )
        shape_out = {
            "shapes": shapes.as_json(found),
            "shape_rows": [asdict(r) for r in shape_rows],
        }
        print("\n" + shapes.table(shape_out["shapes"], shape_out["shape_rows"]))
        print("\n".join(shapes.targets(shape_out["shape_rows"])))

    otel: list[dict[str, Any]] = []
    if not args.no_telemetry:
        log("telemetry")
        otel = telemetry_cost(
            args.repeats, tuple(args.provider or PROVIDERS), 40 if args.smoke else 1000, log, warmup
        )
        print("\n" + telemetry_report(otel))

    conc: dict[str, Any] | None = None
    if not args.no_concurrency:
        log(f"concurrency: {streams} streams")
        conc = concurrency.measure_in_fresh_process(
            streams=streams,
            n=20 if args.smoke else 100,
            repeats=min(args.repeats, 3),
            single_runs=2 if args.smoke else None,
        )
        print("\n" + concurrency.report(conc))
        print(
            f"  targets: overhead ≤ 20 KiB/stream: "
            f"{'MET' if conc['overhead_bytes_per_stream'] <= 20 * 1024 else 'NOT'}; "
            f"aggregate ≥ 0.7x single: "
            f"{'MET' if conc['streamfold']['throughput_ratio'] >= 0.7 else 'NOT'}"
        )
        # The same with the collector's thresholds raised, as a server with thousands of
        # streams in flight may set them: the throughput it loses is mostly collection.
        log("concurrency: the same with gc thresholds raised")
        conc["tuned_gc"] = concurrency.measure_in_fresh_process(
            streams=streams,
            n=20 if args.smoke else 100,
            repeats=min(args.repeats, 3),
            single_runs=2 if args.smoke else None,
            gc_thresholds=concurrency.TUNED_GC_THRESHOLDS,
        )
        print("\n" + concurrency.report(conc["tuned_gc"]))

    meta = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start_end": None,
        "json_library": JSON_LIBRARY,
        "sizes": sizes,
        "repeats": args.repeats,
        "budget_s": budget,
        "clock": clock.__name__,  # perf_counter (wall time) or process_time (CPU time)
        "seconds": round(time.time() - started, 1),
        "versions": _versions(),
        "streamfold_commit": _commit(),
    }
    with contextlib.suppress(OSError):
        meta["loadavg_start_end"] = os.getloadavg()
    out = {
        "meta": meta,
        "rows": [asdict(r) for r in rows],
        "targets": [{"target": w, "met": m, "detail": d} for w, m, d in goals],
        "recordings": real,
        "live": live_entries,
        **shape_out,
        "telemetry": otel,
        "concurrency": conc,
    }
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
        log(f"wrote {args.json}")
    return out


def show(path: Path, as_markdown: bool = False) -> dict[str, Any]:
    """Print the table and targets of a saved run."""
    saved: dict[str, Any] = json.loads(path.read_text())
    rows = [Row(**r) for r in saved["rows"]]
    sizes = saved["meta"]["sizes"]
    print(markdown(rows, sizes) if as_markdown else table(rows, sizes))
    print("\nTargets:")
    for what, met, detail in targets(rows, sizes):
        mark = "n/a " if met is None else ("MET " if met else "NOT ")
        print(f"  {mark} {what}\n        {detail}")
    if saved.get("live"):
        print("\n" + live_report(saved["live"]))
    if saved.get("shape_rows"):
        from . import shapes

        print("\n" + shapes.table(saved["shapes"], saved["shape_rows"]))
        print("\n".join(shapes.targets(saved["shape_rows"])))
    if saved.get("concurrency"):
        print("\n" + concurrency.report(saved["concurrency"]))
        if saved["concurrency"].get("tuned_gc"):
            print("\n" + concurrency.report(saved["concurrency"]["tuned_gc"]))
    return saved


def _commit() -> str | None:
    """The checked-out commit, with "+dirty" when src/ has uncommitted changes."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return None
    return (head + "+dirty" if dirty else head) or None


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("streamfold", "orjson", "jiter", "pydantic", "pydantic-ai-slim", "anthropic",
                 "openai", "langchain-core", "litellm"):  # fmt: skip
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "missing"
    return out


if __name__ == "__main__":
    main()
