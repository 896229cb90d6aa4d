"""Builds of streamfold side by side in one run: `python -m benchmarks.compare`.

    python -m benchmarks.compare --compiled-python /tmp/venv-bench/bin/python \\
        --sizes 1000,10000,100000 --baseline benchmarks/results/BASE.json --json out.json

A compiled build (the mypyc wheel installed in a virtual environment) and the interpreted
source cannot be imported by one process, so this driver runs each cell (one provider,
workload and input at every size, streamfold beside its floor) in a fresh worker process
of each build in turn, the first build of each cell alternating, so what else loads the
machine falls on both builds alike. Each worker times its own floor: every ratio is to a
floor measured in the same process, a minute from the other build's. Samples are timed
with the worker's CPU time (`--wall-time` for wall time): on a machine shared with other
work, wall time also counts the waits for a core. Then the real
recordings and the concurrent streams, per build the same way, then the peers once (they
do not run streamfold). Every row carries its build's name and what
`streamfold.is_compiled()` said in the process that measured it.

The targets are judged on the compiled build and printed as a table, the interpreted
build beside it; a target not met is a finding, never an error. `--baseline` compares the
interpreted build with a saved run of this driver (its multiples of the floor, cell by
cell: the floor absorbs the machine's load between the two runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import concurrency, run, shapes
from .generate import PROVIDERS, WORKLOADS, generate
from .run import Row

ROOT = run.ROOT

# Targets for the compiled build.
LIVE_RATIO = 1.3  # one SSE event per chunk, to the floor fed the same pieces
BUFFERED_RATIO = 1.0  # the same bytes in 64 KiB pieces
DICT_RATIO = 3.0
RECORDINGS_RATIO = 3.0  # median over the real recordings
GROWTH = 11.0  # t(100k)/t(10k)
DICT_GROWTH_SLACK = 1.1  # dicts: at most the dict floor's own growth plus 10%
MEMORY_RATIO = 1.5
KIB_PER_STREAM = 20.0  # each of 10,000 concurrent streams, in flight
BASELINE_SLACK = 1.1  # the interpreted build against the saved baseline
# The ratio targets hold from this size on (smaller runs judge every size they have).
JUDGED_FROM = 10_000

INPUTS = ("sse", "live", "dicts")


@dataclass
class Build:
    """One streamfold to measure: an interpreter, and the source it runs (None: the
    streamfold installed in that interpreter's environment)."""

    name: str
    python: str
    src: str | None
    expect_compiled: bool | None = None
    # Filled in from the first worker.
    compiled: bool | None = None
    streamfold_file: str = ""


# --- the worker ------------------------------------------------------------------------


def _impls(provider: str, workload: str, inp: str, sizes: list[int]) -> list[run.Impl]:
    """The implementations of one cell: the floor of its input and streamfold on it."""
    if inp == "live":
        return list(run._LIVE_CONNECTION)
    impls = [impl for impl in run._subject_impls() if impl.input == inp]
    if inp == "sse" and workload == "bigargs":
        # The incremental partial arguments only: the jiter re-parse reference measures
        # jiter, not the build, and takes seconds a run.
        impls.append(run._LIVE_INCREMENTAL)
    return impls


def work(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job in this process; what it measured, as JSON-able data."""
    import streamfold

    is_compiled = getattr(streamfold, "is_compiled", None)
    out: dict[str, Any] = {
        "compiled": is_compiled() if is_compiled is not None else None,
        "streamfold_file": streamfold.__file__,
    }
    kind = job["kind"]
    if job.get("cpu_time"):
        run.use_cpu_time()
    if kind in ("cell", "peers"):
        timing = {k: job[k] for k in ("repeats", "budget", "memory", "warmup_s")}
        provider, workload, sizes = job["provider"], job["workload"], job["sizes"]
        rows: list[Row] = []
        streams = {n: generate(provider, workload, n, job["seed"]) for n in sizes}
        if kind == "cell":
            # The floor and streamfold sampled in turn: their ratio is the cell's figure.
            impls = _impls(provider, workload, job["input"], sizes)
            rows += run.measure_side_by_side(impls, streams, **timing)
        else:
            impls = [i for i in run._subject_impls() if i.kind == "floor"]
            impls += run.peer_impls(provider, workload, sizes, rows)
            for impl in impls:
                rows += run.measure_impl(impl, streams, **timing)
        run._relate(rows)
        out["rows"] = [asdict(r) for r in rows]
    elif kind == "shapes":
        # Every recorded shape of one provider on one input, floor and streamfold in turn.
        timing = {k: job[k] for k in ("repeats", "budget", "warmup_s")}
        found = [s for s in shapes.find_shapes() if s.provider == job["provider"]]
        rows = shapes.measure(
            found, job["sizes"], inputs=(job["input"],), seed=job["seed"], log=lambda _: None,
            **timing,
        )  # fmt: skip
        out["rows"] = [asdict(r) for r in rows]
    elif kind == "recordings":
        out["recordings"] = run.recordings(
            job["repeats"], job["loop_s"], lambda _: None, job["warmup_s"]
        )
    elif kind == "concurrency":
        out["concurrency"] = concurrency.measure(**job["options"])
    else:
        raise ValueError(f"unknown job kind {kind!r}")
    return out


def _spawn(build: Build, job: dict[str, Any]) -> dict[str, Any]:
    """`work(job)` in a fresh process of `build`."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # an installed build must not pick up a source tree
    if build.src is not None:
        env["PYTHONPATH"] = build.src
    done = subprocess.run(
        [build.python, "-m", "benchmarks.compare", "--worker", json.dumps(job)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {build.name} worker failed on {job}:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    if build.compiled is None:
        build.compiled, build.streamfold_file = result["compiled"], result["streamfold_file"]
        if build.expect_compiled is not None and build.compiled != build.expect_compiled:
            state = "compiled" if build.compiled else "interpreted"
            raise RuntimeError(
                f"the {build.name} build ({build.python}) runs a streamfold that is {state}: "
                f"{build.streamfold_file}"
            )
    return result


# --- the driver ------------------------------------------------------------------------


def compare(
    builds: list[Build],
    sizes: list[int],
    *,
    repeats: int = 5,
    budget: float = 60.0,
    memory: bool = True,
    providers: tuple[str, ...] = PROVIDERS,
    workloads: tuple[str, ...] = WORKLOADS,
    inputs: tuple[str, ...] = INPUTS,
    peers: bool = True,
    peer_sizes: list[int] | None = None,
    recordings: bool = True,
    streams: int | None = 10_000,
    seed: int = 0,
    smoke: bool = False,
    cpu_time: bool = True,
    processes: int = 1,
    cells: bool = True,
    shape_table: bool = False,
    shape_sizes: list[int] | None = None,
    log: Callable[[str], None] = print,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every cell in each build, alternating; the merged results. Each cell runs in
    `processes` worker processes per build (see `across_processes`). `shape_table`: the
    recorded delta shapes too (`benchmarks.shapes`), each provider and input a cell;
    `cells=False` leaves out the generated workloads' cells."""
    timing = {
        "repeats": repeats,
        "budget": budget,
        "memory": memory,
        "warmup_s": 0.0 if smoke else run.WARMUP_S,
    }
    jobs: list[dict[str, Any]] = [
        {
            "kind": "cell",
            "provider": p,
            "workload": w,
            "input": i,
            "sizes": sizes,
            "seed": seed,
            **timing,
        }
        for p in providers
        for w in workloads
        for i in inputs
        if cells
    ]
    if shape_table:
        jobs += [
            {
                "kind": "shapes",
                "provider": p,
                "input": i,
                "sizes": shape_sizes or sizes,
                "seed": seed,
                **timing,
            }
            for p in providers
            for i in shapes.INPUTS
            if i in inputs
        ]
    if recordings:
        jobs.append({"kind": "recordings", "loop_s": 0.0 if smoke else 0.02, **timing})
    if streams:
        options = {
            "streams": streams,
            "n": 20 if smoke else 100,
            "repeats": min(repeats, 3),
            "seed": seed,
            "single_runs": 2 if smoke else None,
        }
        jobs.append({"kind": "concurrency", "options": options})
    out: dict[str, Any] = {
        "meta": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "sizes": sizes,
            "peer_sizes": peer_sizes or sizes,
            "repeats": repeats,
            "budget_s": budget,
            "clock": "process_time" if cpu_time else "perf_counter",
            "processes_per_cell": processes,
            "versions": run._versions(),
            "harness_commit": run._commit(),
            "loadavg_start": _loadavg(),
        },
        "builds": [],
        "rows": [],
        "shapes": shapes.as_json([s for s in shapes.find_shapes() if s.provider in providers])
        if shape_table
        else [],
        "shape_rows": [],
        "recordings": {},
        "concurrency": {},
    }
    started = time.time()

    def merge(build: Build, result: dict[str, Any], into: str = "rows") -> None:
        for r in result.get("rows", []):
            r.update(build=build.name, compiled=result["compiled"])
            out[into].append(r)
        if "recordings" in result:
            out["recordings"][build.name] = result["recordings"]
        if "concurrency" in result:
            out["concurrency"][build.name] = result["concurrency"]
        out["builds"] = [asdict(b) for b in builds]
        if checkpoint is not None:
            checkpoint(out)

    for job in jobs:
        job["cpu_time"] = cpu_time
    for turn, job in enumerate(jobs):
        # Who goes first alternates: neither build always runs on a machine the other
        # has just warmed (or loaded).
        order = builds[turn % len(builds) :] + builds[: turn % len(builds)]
        rounds = processes if job["kind"] in ("cell", "shapes") else 1
        results: dict[str, list[dict[str, Any]]] = {build.name: [] for build in order}
        label = "/".join(str(job[k]) for k in ("provider", "workload", "input") if k in job)
        for round_ in range(rounds):
            for build in order:
                worker = f", process {round_ + 1}/{rounds}" if rounds > 1 else ""
                log(f"  [{turn + 1}/{len(jobs)}] {job['kind']} {label} ({build.name}{worker})")
                results[build.name].append(_spawn(build, job))
        for build in order:
            done = results[build.name]
            if len(done) > 1:
                done[0]["rows"] = across_processes([d["rows"] for d in done])
            merge(build, done[0], "shape_rows" if job["kind"] == "shapes" else "rows")
    if peers:
        # The peers run no streamfold: once, with their floors, in the first build.
        for p in providers:
            for w in workloads:
                log(f"  peers {p}/{w} ({builds[0].name})")
                job = {
                    "cpu_time": cpu_time,
                    "kind": "peers",
                    "provider": p,
                    "workload": w,
                    "sizes": peer_sizes or sizes,
                    "seed": seed,
                    **timing,
                }
                merge(builds[0], _spawn(builds[0], job))
    out["meta"]["seconds"] = round(time.time() - started, 1)
    out["meta"]["loadavg_end"] = _loadavg()
    return out


def across_processes(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One cell measured by several worker processes, as one row per implementation and
    size: the median of the processes' times and of their ratios, every sample kept.

    A process is a unit of its own on a shared machine: where its memory lands and what
    its neighbours do then move the floor as much as streamfold (the same dict floor has
    measured 150 ns a delta in one process and 600 in the next), and sampling in turn
    within a process does not even that out. Each process's ratio is to its own floor.
    """
    merged: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rows in runs:
        for r in rows:
            key = (r["provider"], r["workload"], r["impl"], r["kind"], r["input"], r["n"])
            merged.setdefault(key, []).append(r)
    out: list[dict[str, Any]] = []
    for same in merged.values():
        bad = [r for r in same if r["status"] != "ok"]
        if bad:  # a wrong fold in any process is the cell's finding
            out.append(dict(bad[0], runs=sum(r["runs"] for r in same)))
            continue
        ratios = [r["ratio"] for r in same if r["ratio"] is not None]
        peak = _median_of(same, "peak_bytes")
        out.append(
            dict(
                same[0],
                runs=sum(r["runs"] for r in same),
                median_s=_median_of(same, "median_s"),
                ns_per_delta=_median_of(same, "ns_per_delta"),
                ratio=statistics.median(ratios) if ratios else None,
                process_ratios=ratios,
                peak_bytes=None if peak is None else round(peak),
                memory_ratio=_median_of(same, "memory_ratio"),
                samples_s=[t for r in same for t in r["samples_s"]],
            )
        )
    return out


def _median_of(rows: list[dict[str, Any]], field: str) -> float | None:
    values = [r[field] for r in rows if r.get(field) is not None]
    return statistics.median(values) if values else None


def _loadavg() -> list[float] | None:
    with contextlib.suppress(OSError):
        return list(os.getloadavg())
    return None


# --- the targets -----------------------------------------------------------------------


@dataclass
class Target:
    """One target, judged on one build: the worst value measured against its limit."""

    what: str
    limit: float
    worst: float | None  # None: not measured
    met: bool | None
    detail: str


def _judge(what: str, limit: float, values: list[tuple[str, float | None]]) -> Target:
    known = [(k, v) for k, v in values if v is not None]
    if not known:
        return Target(what, limit, None, None, "not measured")
    worst = max(v for _, v in known)
    detail = ", ".join(f"{k} {v:.2f}" for k, v in known)
    missing = [k for k, v in values if v is None]
    if missing:
        detail += "; not measured: " + ", ".join(missing)
    return Target(what, limit, worst, worst <= limit and not missing, detail)


def _label(r: Row) -> str:
    return f"{r.provider}/{r.workload}/{run._size(r.n)}"


def _args(r: Row) -> str:
    return " +args" if r.impl == run._LIVE_INCREMENTAL.name else ""


def targets(
    saved: dict[str, Any], build: str, baseline: dict[str, Any] | None = None
) -> list[Target]:
    """Each target, judged on the rows, recordings and concurrency of one build."""
    rows = [Row(**r) for r in saved["rows"] if r["build"] == build]
    sizes = saved["meta"]["sizes"]
    judged = [n for n in sizes if n >= JUDGED_FROM] or sizes
    mid, big = (sizes[-2], sizes[-1]) if len(sizes) > 1 else (None, sizes[-1])
    ours = [r for r in rows if r.kind == "streamfold"]

    def ratios(impl: str, inp: str) -> list[tuple[str, float | None]]:
        return [
            (_label(r), r.ratio)
            for r in ours
            if r.impl == impl and r.input == inp and r.n in judged
        ]

    at = "/".join(run._size(n) for n in judged)
    out = [
        _judge(
            f"one SSE event per chunk ≤ {LIVE_RATIO}x floor, N={at}",
            LIVE_RATIO,
            ratios("streamfold", "live"),
        ),
        _judge(
            f"SSE in 64 KiB pieces ≤ {BUFFERED_RATIO}x floor, N={at}",
            BUFFERED_RATIO,
            ratios("streamfold", "sse"),
        ),
        _judge(f"dicts ≤ {DICT_RATIO}x floor, N={at}", DICT_RATIO, ratios("streamfold", "dicts")),
    ]
    recorded = [e["ratio"] for e in saved["recordings"].get(build, []) if e.get("ratio")]
    out.append(
        _judge(
            f"real recordings: median ≤ {RECORDINGS_RATIO}x floor",
            RECORDINGS_RATIO,
            [(f"{len(recorded)} files, median", statistics.median(recorded) if recorded else None)],
        )
    )
    by: dict[tuple[str, str, str, str], dict[int, Row]] = {}
    for r in rows:
        by.setdefault((r.provider, r.workload, r.impl, r.input), {})[r.n] = r
    grow: list[tuple[str, float | None]] = []
    dict_grow: list[tuple[str, float | None]] = []
    for (provider, workload, impl, inp), per_n in by.items():
        if impl == "floor" or impl not in {r.impl for r in ours}:
            continue
        growth = run._growth(per_n, mid, big)
        if inp != "dicts":
            any_row = next(iter(per_n.values()))
            grow.append((f"{provider}/{workload}/{inp}{_args(any_row)}", growth))
            continue
        floor = run._growth(by.get((provider, workload, "floor", "dicts"), {}), mid, big)
        dict_grow.append((f"{provider}/{workload}", growth / floor if growth and floor else None))
    step = f"t({run._size(big)})/t({run._size(mid or big)})"
    out.append(_judge(f"{step} ≤ {GROWTH:g} (SSE, live, live arguments)", GROWTH, grow))
    out.append(
        _judge(
            f"dicts: {step} ≤ the dict floor's +{DICT_GROWTH_SLACK - 1:.0%} (ours / floor's)",
            DICT_GROWTH_SLACK,
            dict_grow,
        )
    )
    out.append(
        _judge(
            f"peak memory at N={run._size(big)} ≤ {MEMORY_RATIO}x the floor's",
            MEMORY_RATIO,
            [
                (f"{r.provider}/{r.workload}/{r.input}{_args(r)}", r.memory_ratio)
                for r in ours
                if r.n == big
            ],
        )
    )
    conc = saved["concurrency"].get(build)
    kib = None if conc is None else conc["streamfold"]["bytes_per_stream_in_flight"] / 1024
    label = (
        "not run"
        if conc is None
        else (
            f"{conc['streams']:,} streams; over the floor consumer "
            f"{conc['overhead_bytes_per_stream'] / 1024:.1f}, KiB/stream"
        )
    )
    out.append(
        _judge(f"concurrent streams ≤ {KIB_PER_STREAM:g} KiB each", KIB_PER_STREAM, [(label, kib)])
    )
    if baseline is not None and not any(r.compiled for r in rows):
        out.append(_against_baseline(rows, baseline))
    return out


def _against_baseline(rows: list[Row], baseline: dict[str, Any]) -> Target:
    """The interpreted build's multiples of the floor over the baseline's, cell by cell."""
    interpreted = [b["name"] for b in baseline["builds"] if not b["compiled"]]
    build = "interpreted" if "interpreted" in interpreted else interpreted[0]
    base = {
        (r["provider"], r["workload"], r["impl"], r["input"], r["n"]): r["ratio"]
        for r in baseline["rows"]
        if r["kind"] == "streamfold" and r["build"] == build and r.get("ratio")
    }
    values: list[tuple[str, float | None]] = []
    for r in rows:
        was = base.get((r.provider, r.workload, r.impl, r.input, r.n))
        if r.kind == "streamfold" and was and r.ratio:
            values.append((f"{_label(r)}/{r.input}", r.ratio / was))
    return _judge(
        f"interpreted ≤ baseline +{BASELINE_SLACK - 1:.0%} (x floor, now / then)",
        BASELINE_SLACK,
        values,
    )


def judged_build(saved: dict[str, Any]) -> str:
    """The build the targets are for: the compiled one, else the first."""
    compiled = [b["name"] for b in saved["builds"] if b["compiled"]]
    return compiled[0] if compiled else saved["builds"][0]["name"]


def targets_report(saved: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    """The targets as a pass/fail table: the judged build, the others beside it."""
    judged = judged_build(saved)
    names = [judged] + [b["name"] for b in saved["builds"] if b["name"] != judged]
    per_build = {name: targets(saved, name, baseline) for name in names}
    width = max(len(t.what) for t in per_build[judged]) + 2
    head = f"{'target':{width}}{'limit':>7}  " + "".join(f"{n[:12]:>13}" for n in names)
    lines = [f"Targets, judged on the {judged} build (worst value measured):", head]
    findings = []
    for i, target in enumerate(per_build[judged]):
        mark = {True: "met", False: "NOT MET", None: "n/a"}[target.met]
        cells = ""
        for name in names:
            others = per_build[name]
            t = others[i] if i < len(others) and others[i].what == target.what else None
            cells += run._fmt(t.worst if t else None, ".2f", 13)
        lines.append(f"{target.what:{width}}{target.limit:>7g}  {cells}  {mark}")
        if target.met is False:
            findings.append(f"  NOT MET: {target.what}: {target.detail}")
    # The baseline target is the interpreted build's alone.
    for name in names[1:]:
        for t in per_build[name][len(per_build[judged]) :]:
            mark = {True: "met", False: "NOT MET", None: "n/a"}[t.met]
            lines.append(f"{t.what:{width}}{t.limit:>7g}  {'':13}{t.worst or 0:13.2f}  {mark}")
            if t.met is False:
                findings.append(f"  NOT MET ({name}): {t.what}: {t.detail}")
    wrong = [r for r in saved["rows"] if r["kind"] == "peer" and r["status"] in ("wrong", "error")]
    timed = {r["impl"] for r in saved["rows"] if r["kind"] == "peer" and r["status"] == "ok"}
    lines.append(
        f"peers checked before timing: {len(timed)} timed, "
        + (f"{len(wrong)} wrong or failing" if wrong else "none wrong")
    )
    findings += [f"  peer {r['impl']} {r['provider']}/{r['workload']}: {r['note']}" for r in wrong]
    if findings:
        lines += ["", "Findings (the details of each target not met):", *findings]
    return "\n".join(lines)


def targets_markdown(saved: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    """The targets as a Markdown table: limit, the worst value of each build, met or not."""
    judged = judged_build(saved)
    names = [judged] + [b["name"] for b in saved["builds"] if b["name"] != judged]
    per_build = {name: {t.what: t for t in targets(saved, name, baseline)} for name in names}
    lines = [
        "| target | limit | " + " | ".join(names) + " | met |",
        "|---|--:|" + "--:|" * len(names) + "---|",
    ]
    seen: list[str] = []
    for name in names:
        seen += [what for what in per_build[name] if what not in seen]
    for what in seen:
        first = next(per_build[n][what] for n in names if what in per_build[n])
        worst = [per_build[n].get(what) for n in names]
        cells = [run._fmt(t.worst if t else None, ".2f", 0).strip() for t in worst]
        mark = {True: "met", False: "**not met**", None: "-"}[first.met]
        lines.append(f"| {what} | {first.limit:g} | " + " | ".join(cells) + f" | {mark} |")
    return "\n".join(lines)


# --- output ----------------------------------------------------------------------------


def rows_by_build(saved: dict[str, Any]) -> list[Row]:
    """The rows, each implementation named with its build (the peers run in one)."""
    rows = []
    for r in saved["rows"]:
        row = Row(**r)
        if row.kind != "peer":
            row.impl = f"{row.impl} [{row.build}]"
        rows.append(row)
    return rows


def summary(saved: dict[str, Any], n: int | None = None) -> str:
    """The README's table: streamfold per build and the best peer, as multiples of the
    floor, one SSE event per chunk, SSE in 64 KiB pieces and dicts, mixed workload."""
    sizes = saved["meta"]["sizes"]
    n = n or sizes[-1]
    cells: dict[tuple[str, str, str, int], float | None] = {}
    peers: dict[str, set[str]] = {}
    for r in saved["rows"]:
        if r["workload"] == "mixed" and r["status"] == "ok":
            who = r["impl"] if r["kind"] == "peer" else f"{r['impl']} {r['build']}"
            cells[(r["provider"], who, r["input"], r["n"])] = r["ratio"]
            if r["kind"] == "peer":
                peers.setdefault(r["provider"], set()).add(r["impl"])
    sizes_text = " / ".join(run._size(m) for m in sizes if m >= JUDGED_FROM) or run._size(n)
    shown = [m for m in sizes if m >= JUDGED_FROM] or [n]
    lines = [
        f"| mixed stream, N = {sizes_text} | one SSE event per chunk | SSE, 64 KiB pieces "
        "| decoded dicts |",
        "|---|--:|--:|--:|",
    ]

    def span(provider: str, who: str, inp: str) -> str:
        values = [cells.get((provider, who, inp, m)) for m in shown]
        return " / ".join("-" if v is None else f"{v:.2f}x" for v in values)

    names = {b["name"]: b["compiled"] for b in saved["builds"]}
    for provider in PROVIDERS:
        if not any(k[0] == provider for k in cells):
            continue
        for build in sorted(names, key=lambda b: not names[b]):  # compiled first
            who = f"streamfold {build}"
            lines.append(
                f"| {provider}, streamfold {build} | {span(provider, who, 'live')} "
                f"| {span(provider, who, 'sse')} | {span(provider, who, 'dicts')} |"
            )
        best = _best_peer(cells, provider, peers.get(provider, set()), shown)
        if best is not None:
            lines.append(
                f"| {provider}, best peer: {best} | - | {span(provider, best, 'sse')} "
                f"| {span(provider, best, 'dicts')} |"
            )
    return "\n".join(lines)


def _best_peer(
    cells: dict[tuple[str, str, str, int], float | None],
    provider: str,
    peers: set[str],
    sizes: list[int],
) -> str | None:
    """The peer whose worst multiple of its floor, over `sizes`, is the smallest."""
    scored = []
    for peer in peers:
        ratios = [
            v
            for (p, who, _, m), v in cells.items()
            if p == provider and who == peer and m in sizes and v
        ]
        if ratios:
            scored.append((max(ratios), peer))
    return min(scored)[1] if scored else None


def report(saved: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    """Everything a run measured, as text."""
    sizes = sorted({r["n"] for r in saved["rows"]})
    parts = [run.table(rows_by_build(saved), sizes)] if sizes else []
    for b in saved["builds"]:
        parts.append(f"build {b['name']}: compiled={b['compiled']} ({b['streamfold_file']})")
    for name, entries in saved["recordings"].items():
        ok = sorted(e["ratio"] for e in entries if e.get("ratio"))
        if ok:
            parts.append(
                f"real recordings [{name}]: {len(ok)} files, streamfold/floor median "
                f"{statistics.median(ok):.2f}x ({ok[0]:.2f}x to {ok[-1]:.2f}x)"
            )
    for name, conc in saved["concurrency"].items():
        parts.append(f"[{name}] " + concurrency.report(conc))
    if saved["rows"]:
        parts += ["", summary(saved), "", targets_report(saved, baseline)]
    if saved.get("shape_rows"):
        parts += ["", shapes_report(saved)]
    return "\n".join(parts)


def shapes_report(saved: dict[str, Any]) -> str:
    """The shapes table of the judged build and its targets (met or not, never raised)."""
    build = judged_build(saved)
    rows = saved["shape_rows"]
    lines = [f"Delta shapes of the real recordings, {build} build, x floor:", ""]
    lines.append(shapes.table(saved["shapes"], rows, build))
    lines += ["", f"Shape targets ({build}):"]
    lines += [f"- {t}" for t in shapes.targets(rows, build)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure the builds side by side (or re-print a saved run), print the targets."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument(
        "--compiled-python", help="an interpreter whose environment holds the compiled wheel"
    )
    parser.add_argument(
        "--interpreted-python", default=sys.executable, help="default: this interpreter"
    )
    parser.add_argument(
        "--src", default=str(ROOT / "src"), help="the interpreted build's source (default src/)"
    )
    parser.add_argument(
        "--build",
        action="append",
        default=[],
        metavar="NAME=PYTHON[:SRC]",
        help="one more build: an interpreter, and the source it runs (else its installed one)",
    )
    parser.add_argument("--no-interpreted", action="store_true", help="only the other builds")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--peer-sizes", help="the peers' sizes (default --sizes)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per median (default 5)")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per cell and size")
    parser.add_argument(
        "--processes",
        type=int,
        default=3,
        help="worker processes per cell and build; a cell's ratio is their median (default 3)",
    )
    parser.add_argument("--provider", action="append", choices=PROVIDERS)
    parser.add_argument("--workload", action="append", choices=WORKLOADS)
    parser.add_argument("--input", action="append", choices=INPUTS)
    parser.add_argument("--streams", type=int, default=10_000, help="concurrent streams (0: none)")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--no-recordings", action="store_true")
    parser.add_argument(
        "--shapes", action="store_true", help="the delta shapes of the real recordings too"
    )
    parser.add_argument("--shape-sizes", help="the shapes' sizes (default --sizes)")
    parser.add_argument(
        "--no-cells", action="store_true", help="leave out the generated workloads' cells"
    )
    parser.add_argument("--smoke", action="store_true", help="no warm-up, tiny loops (the tests)")
    parser.add_argument("--baseline", type=Path, help="a saved run to hold the interpreted to")
    parser.add_argument("--json", type=Path, help="write the merged results here")
    parser.add_argument("--show", type=Path, help="print a saved run again")
    parser.add_argument("--markdown", action="store_true", help="with --show: the README table")
    parser.add_argument(
        "--wall-time", action="store_true", help="time with wall time, not the workers' CPU time"
    )
    parser.add_argument("--note", default="", help="saved with the run: what was measured")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    if args.worker:
        print(json.dumps(work(json.loads(args.worker))))
        return {}
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    if args.show:
        saved: dict[str, Any] = json.loads(args.show.read_text())
        shown = f"{summary(saved)}\n\n{targets_markdown(saved, baseline)}" if saved["rows"] else ""
        if saved.get("shape_rows"):
            shown += f"\n\n{shapes_report(saved)}" if shown else shapes_report(saved)
        print(shown if args.markdown else report(saved, baseline))
        return saved

    builds = (
        []
        if args.no_interpreted
        else [Build("interpreted", args.interpreted_python, args.src, expect_compiled=False)]
    )
    for spec in args.build:
        name, _, where = spec.partition("=")
        python, _, src = where.partition(":")
        builds.append(Build(name, python, src or None))
    if args.compiled_python:
        builds.append(Build("compiled", args.compiled_python, None, expect_compiled=True))
    if not builds:
        parser.error("no build to measure")
    log: Callable[[str], None] = (
        (lambda _: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    )
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

    def checkpoint(out: dict[str, Any]) -> None:
        if args.json:  # a long run that breaks keeps what it measured
            args.json.write_text(json.dumps(out, indent=1))

    saved = compare(
        builds,
        [int(s) for s in args.sizes.split(",")],
        repeats=args.repeats,
        budget=args.budget,
        memory=not args.no_memory,
        providers=tuple(args.provider or PROVIDERS),
        workloads=tuple(args.workload or WORKLOADS),
        inputs=tuple(args.input or INPUTS),
        peers=not args.no_peers,
        peer_sizes=[int(s) for s in args.peer_sizes.split(",")] if args.peer_sizes else None,
        recordings=not args.no_recordings,
        streams=args.streams,
        smoke=args.smoke,
        cpu_time=not args.wall_time,
        processes=args.processes,
        cells=not args.no_cells,
        shape_table=args.shapes,
        shape_sizes=[int(s) for s in args.shape_sizes.split(",")] if args.shape_sizes else None,
        log=log,
        checkpoint=checkpoint,
    )
    saved["meta"]["baseline"] = str(args.baseline) if args.baseline else None
    saved["meta"]["note"] = args.note
    checkpoint(saved)
    print(report(saved, baseline))
    return saved


if __name__ == "__main__":
    main()
