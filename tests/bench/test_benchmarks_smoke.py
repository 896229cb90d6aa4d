"""The benchmark harness runs at tiny N and every implementation folds correctly.

Timing is never asserted (shared, noisy machines); this only keeps the harness from
rotting: generators, floors, streamfold, every installed peer, recordings, concurrency.
"""

from __future__ import annotations

import gc
import itertools
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import concurrency, run  # noqa: E402
from benchmarks.floor import dict_floor, sse_floor  # noqa: E402
from benchmarks.generate import PROVIDERS, WORKLOADS, count_deltas, generate  # noqa: E402


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_generator_is_seeded_and_counts_its_deltas(provider: str, workload: str) -> None:
    a = generate(provider, workload, 300, seed=1)
    b = generate(provider, workload, 300, seed=1)
    c = generate(provider, workload, 300, seed=2)
    assert a.sse == b.sse
    assert a.sse != c.sse
    assert count_deltas(a) == 300
    # The SSE bytes and the dicts are the same stream.
    assert sse_floor(provider, a.sse) == dict_floor(provider, a.dicts)
    for args in a.expected.tools.values():
        json.loads(args)


def test_check_rejects_a_wrong_result() -> None:
    stream = generate("anthropic", "mixed", 200)
    good = sse_floor("anthropic", stream.sse)
    assert run.check(good, stream, ("text", "thinking", "signature", "tools")) is None
    good.text += "x"
    assert run.check(good, stream, ("text",)) == "text differs (1001 vs 1000 chars)".replace(
        "1001", str(len(good.text))
    ).replace("1000", str(len(good.text) - 1))


def test_side_by_side_takes_the_samples_in_turn_and_reports_a_wrong_fold() -> None:
    stream = generate("anthropic", "mixed", 200)
    full = ("text", "thinking", "signature", "tools")
    order: list[str] = []

    def timed(name: str, wrong: bool = False) -> run.Impl:
        def prepare(s: Any) -> run.Runner:
            def one() -> Any:
                order.append(name)
                result = sse_floor(s.provider, s.sse)
                if wrong:
                    result.text += "x"
                return result

            return one

        return run.Impl(name, "sse", full, prepare, "floor")

    rows = run.measure_side_by_side(
        [timed("a"), timed("b"), timed("bad", wrong=True)],
        {200: stream},
        repeats=3,
        budget=5,
        memory=False,
        warmup_s=0,
    )
    assert [(r.impl, r.status, r.runs) for r in rows] == [
        ("a", "ok", 3),
        ("b", "ok", 3),
        ("bad", "wrong", 0),
    ]
    # Each one checked and warmed up, then the samples (each a loop of runs) in turn.
    spells = [name for name, _ in itertools.groupby(order)]
    assert spells == ["a", "b", "bad", "a", "b", "a", "b", "a", "b"]


def test_a_cell_measured_by_several_processes_is_their_median_and_keeps_a_wrong_fold() -> None:
    from benchmarks import compare

    def row(impl: str, ratio: float, seconds: float, status: str = "ok") -> dict[str, Any]:
        kind = "floor" if impl == "floor" else "streamfold"
        return asdict(
            run.Row("anthropic", "mixed", impl, kind, "dicts", 100, status, runs=5,
                    median_s=seconds, ns_per_delta=seconds * 1e7, ratio=ratio,
                    peak_bytes=int(seconds * 1e6), samples_s=[seconds] * 5)
        )  # fmt: skip

    # Three processes: the floor moved 2x between them, streamfold with it.
    runs = [
        [row("floor", 1.0, 0.001), row("streamfold", 2.0, 0.002)],
        [row("floor", 1.0, 0.004), row("streamfold", 1.5, 0.006)],
        [row("floor", 1.0, 0.002), row("streamfold", 4.0, 0.008)],
    ]
    floor, ours = compare.across_processes(runs)
    assert (ours["impl"], ours["process_ratios"]) == ("streamfold", [2.0, 1.5, 4.0])
    # The median of the ratios, not the ratio of the median times (0.006 / 0.002 = 3).
    assert ours["ratio"] == 2.0 and ours["median_s"] == 0.006 and ours["runs"] == 15
    assert floor["median_s"] == 0.002 and ours["peak_bytes"] == 6000
    assert len(ours["samples_s"]) == 15 and run.Row(**ours).ratio == 2.0

    # A wrong fold in one process is the cell's result, whatever the others timed.
    runs[1][1] = row("streamfold", 1.0, 0.001, status="wrong")
    assert compare.across_processes(runs)[1]["status"] == "wrong"


def test_whole_harness_at_tiny_n(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "clock", run.clock)  # --cpu-time changes it: restored after
    out = tmp_path / "bench.json"
    result = run.main(
        [
            "--sizes", "40,120", "--repeats", "1", "--budget", "30",
            "--streams", "20", "--json", str(out), "--quiet", "--smoke", "--cpu-time",
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert "Targets:" in printed and "concurrent anthropic streams" in printed
    rows = result["rows"]
    assert json.loads(out.read_text())["rows"] == rows
    assert result["meta"]["clock"] == "process_time"
    measured = {(r["provider"], r["workload"], r["impl"], r["input"]) for r in rows}
    for provider in PROVIDERS:
        for workload in WORKLOADS:
            for impl, inp in (("floor", "sse"), ("floor", "dicts"),
                              ("streamfold", "sse"), ("streamfold", "dicts")):  # fmt: skip
                assert (provider, workload, impl, inp) in measured
        # The live partial-arguments rows: the re-parse reference and the incremental mode.
        for impl in ("streamfold + live args (jiter on prefix)",
                     "streamfold + live args (incremental)"):  # fmt: skip
            assert (provider, "bigargs", impl, "sse") in measured
    # Every implementation that ran produced the expected text, thinking and tool
    # arguments; a peer may only be missing (package not installed), never wrong.
    bad = [r for r in rows if r["status"] not in ("ok", "missing")]
    assert bad == []
    assert all(r["median_s"] is not None for r in rows if r["status"] == "ok")
    live = result["live"]
    assert [e["provider"] for e in live] == list(PROVIDERS)
    assert all(e["status"] == "ok" and e["chunks"] > 40 for e in live)
    assert "One SSE event per chunk" in printed
    assert result["concurrency"]["correct"] is True
    assert result["concurrency"]["tuned_gc"]["correct"] is True
    recordings = result["recordings"]
    assert recordings and all(e["status"] == "ok" for e in recordings)
    assert all(e["text_matches_floor"] is not False for e in recordings)


def test_concurrency_folds_every_stream() -> None:
    result = concurrency.measure(streams=10, n=30, repeats=1, single_runs=2)
    assert result["correct"] is True
    for name in ("streamfold", "floor"):
        assert result[name]["aggregate_deltas_per_s"] > 0


def test_concurrency_with_gc_thresholds_restores_them() -> None:
    before = gc.get_threshold()
    result = concurrency.measure(
        streams=10, n=30, repeats=1, single_runs=2, gc_thresholds=(12_345, 11, 12)
    )
    assert result["gc_thresholds"] == [12_345, 11, 12]
    assert result["correct"] is True
    assert gc.get_threshold() == before


def test_compare_runs_two_builds_cell_by_cell_and_plots_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import compare, plot

    # The interpreted build against itself: the same workers a compiled build would get.
    out = tmp_path / "compare.json"
    src = str(ROOT / "src")
    saved = compare.main(
        [
            "--src", src, "--build", f"again={sys.executable}:{src}",
            "--sizes", "40,120", "--repeats", "1", "--budget", "30", "--streams", "20",
            "--processes", "2",
            "--provider", "anthropic", "--workload", "mixed", "--smoke", "--quiet",
            "--json", str(out),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert json.loads(out.read_text()) == saved
    assert [(b["name"], b["compiled"]) for b in saved["builds"]] == [
        ("interpreted", False),
        ("again", False),
    ]
    rows = saved["rows"]
    for build in ("interpreted", "again"):
        for inp in compare.INPUTS:
            cell = {(r["impl"], r["n"]) for r in rows if (r["build"], r["input"]) == (build, inp)}
            assert cell >= {("floor", 40), ("streamfold", 40), ("floor", 120), ("streamfold", 120)}
        assert saved["recordings"][build] and saved["concurrency"][build]["correct"] is True
    # Every row says which build measured it; only the peers' come from one build alone.
    assert all(r["compiled"] is False for r in rows)
    assert {r["build"] for r in rows if r["kind"] == "peer"} == {"interpreted"}
    assert [r for r in rows if r["status"] not in ("ok", "missing")] == []
    assert all(r["ratio"] is not None for r in rows if r["status"] == "ok")
    # Each cell twice per build, one ratio per process; recordings and peers once.
    ours = [r for r in rows if r["kind"] == "streamfold" and r["status"] == "ok"]
    assert {len(r["process_ratios"]) for r in ours} == {2}
    assert saved["meta"]["processes_per_cell"] == 2
    # The targets are printed as a table, each met or not, and never fail the run.
    assert "Targets, judged on the interpreted build" in printed
    assert "one SSE event per chunk ≤ 1.3x floor" in printed
    assert "| anthropic, streamfold interpreted |" in printed

    # A saved run held to itself as the baseline: every cell's ratio to itself is 1.
    baseline = compare.targets(saved, "interpreted", saved)[-1]
    assert baseline.what.startswith("interpreted ≤ baseline")
    assert baseline.worst == pytest.approx(1.0) and baseline.met is True

    # A saved run prints again, its two tables as Markdown for the READMEs.
    compare.main(["--show", str(out), "--markdown"])
    shown = capsys.readouterr().out
    assert "| anthropic, streamfold again |" in shown and "| target | limit |" in shown

    figure = plot.main([str(out), "-o", str(tmp_path / "plot.svg")])
    svg = figure.read_text()
    assert svg.startswith("<?xml") and "streamfold interpreted" in svg and "anthropic" in svg
    lines = plot.series(saved, "mixed")["anthropic"]
    assert [n for n, _ in lines[("streamfold again", "live")]] == [40, 120]
    assert [n for n, _ in lines[("floor", "sse")]] == [40, 120]  # one build's floor, once


def test_compare_refuses_a_build_that_is_not_what_it_claims(tmp_path: Path) -> None:
    from benchmarks import compare

    # This interpreter runs the source interpreted: as the compiled build it is refused.
    claimed = compare.Build("compiled", sys.executable, str(ROOT / "src"), expect_compiled=True)
    with pytest.raises(RuntimeError, match="runs a streamfold that is interpreted"):
        compare.compare([claimed], [40], peers=False, recordings=False, streams=0,
                        inputs=("dicts",), providers=("anthropic",), workloads=("mixed",),
                        repeats=1, smoke=True, log=lambda _: None)  # fmt: skip


def test_hot_lane_benchmark_folds_the_same_either_way_and_restores_the_lane(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamfold
    from benchmarks import hot_lane
    from streamfold.fold import StreamFolder
    from streamfold.providers.anthropic import AnthropicDecoder
    from streamfold.providers.base import Decoder
    from streamfold.providers.openai_responses import OpenAIResponsesDecoder

    before = (
        StreamFolder.hot_lane_after,
        StreamFolder.hot_lane_ahead,
        AnthropicDecoder.sse_hot_head,
    )
    sse = generate("anthropic", "mixed", 200).sse
    pieces = hot_lane.live_pieces(sse)
    assert b"".join(pieces) == sse
    on = streamfold.fold_message(pieces, provider="anthropic")
    with hot_lane.lane_off():
        assert StreamFolder.hot_lane_after == StreamFolder.hot_lane_ahead == sys.maxsize
        off = streamfold.fold_message(pieces, provider="anthropic")
    assert on.content == off.content
    assert (
        StreamFolder.hot_lane_after,
        StreamFolder.hot_lane_ahead,
        AnthropicDecoder.sse_hot_head,
    ) == before
    monkeypatch.setattr(sys, "argv", ["hot_lane", "60"])
    hot_lane.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("compiled: ") and len(lines) == 10  # 3 providers x 3 inputs
    assert all("off / on" in line for line in lines[1:])
    assert [line.split()[1] for line in lines[1:4]] == ["buffered", "live", "dicts"]
    # The dict lane off folds the same, and comes back on.
    dicts = generate("openai-responses", "mixed", 200).dicts
    lane = OpenAIResponsesDecoder.object_text
    with hot_lane.dict_lane_off():
        assert OpenAIResponsesDecoder.object_text is Decoder.object_text
        off = streamfold.fold_message(dicts, provider="openai-responses")
    assert OpenAIResponsesDecoder.object_text is lane
    assert streamfold.fold_message(dicts, provider="openai-responses").content == off.content
