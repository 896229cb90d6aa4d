"""The shapes table at tiny N: every recorded delta shape is found, every generated delta
is re-written onto it, and the floor and streamfold fold each one correctly. Timing is
never asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import shapes  # noqa: E402
from benchmarks.floor import _payloads  # noqa: E402

SHAPES = shapes.find_shapes()


def test_every_delta_of_every_recording_has_a_shape_and_the_shapes_are_distinct() -> None:
    by_kind: dict[tuple[str, str], list[Any]] = {}
    for shape in SHAPES:
        by_kind.setdefault((shape.provider, shape.kind), []).append(shape.layout)
    for layouts in by_kind.values():
        assert len({json.dumps(layout) for layout in layouts}) == len(layouts)
    seen = 0
    for file, provider, events in shapes.recordings():
        kinds = shapes._Kinds(provider)
        for event in events:
            kind = kinds(event)
            if kind is None:
                continue
            seen += 1
            layout = shapes._layout(provider, event)
            assert layout in by_kind[(provider, kind)], (file, layout)
    assert seen > 1000
    # The shapes the recordings are known to hold, found by reading them.
    described = {s.name.rsplit("/", 1)[0] + " " + s.describe() for s in SHAPES}
    assert "openai-responses/text type,item_id,output_index,content_index,delta" in described
    assert (
        "openai-chat/text id,model,created,+usage,+citations,object,choices[index,delta[+role,"
        "content]]" in described
    )
    assert {s.provider for s in SHAPES} == {"anthropic", "openai-chat", "openai-responses"}


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_every_delta_of_a_shaped_stream_is_the_recorded_shape(shape: shapes.Shape) -> None:
    stream = shapes.shaped(shape, 50)
    kinds = shapes._Kinds(shape.provider)
    deltas = 0
    # The SSE bytes, as a reader decodes them, hold the same events as the dicts.
    decoded = list(_payloads(stream.sse))
    assert decoded == [payload for _, payload in stream.events]
    for payload in decoded:
        if kinds(payload) != shape.kind:
            continue
        deltas += 1
        assert list(payload) == list(shape.template)  # the same keys, in the same order
        assert shapes._layout(shape.provider, payload) == shape.layout
        for key in payload:
            if key not in shapes._OWN[shape.provider]:
                assert payload[key] == shape.template[key], key  # the recording's value
    assert deltas == 50


def test_every_shape_folds_correctly_on_every_input() -> None:
    rows = shapes.measure(SHAPES, [30, 90], repeats=1, budget=5, warmup_s=0, log=lambda _: None)
    assert {(r.workload, r.input) for r in rows} == {
        (s.name, i) for s in SHAPES for i in shapes.INPUTS
    }
    bad = [(r.workload, r.impl, r.input, r.status, r.note) for r in rows if r.status != "ok"]
    assert bad == []
    assert all(r.ratio is not None for r in rows if r.kind == "streamfold")


def test_compare_measures_the_shapes_and_plots_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import compare, plot

    out = tmp_path / "shapes.json"
    saved = compare.main(
        [
            "--src", str(ROOT / "src"), "--sizes", "40", "--repeats", "1", "--streams", "0",
            "--processes", "1", "--no-peers", "--no-recordings", "--no-cells", "--shapes",
            "--provider", "anthropic", "--smoke", "--quiet", "--json", str(out),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert saved["rows"] == [] and [r for r in saved["shape_rows"] if r["status"] != "ok"] == []
    names = {s["name"] for s in saved["shapes"]}
    assert names == {s.name for s in SHAPES if s.provider == "anthropic"}
    assert {r["workload"] for r in saved["shape_rows"]} == names
    assert "| anthropic/text/1: `type,index,delta[type,text]` |" in printed
    assert "one SSE event per chunk ≤ 1.1x floor" in printed
    compare.main(["--show", str(out), "--markdown"])
    assert "| shape (N = 40) |" in capsys.readouterr().out
    figure = plot.main([str(out), "-o", str(tmp_path / "shapes.svg")])
    svg = figure.read_text()
    assert svg.startswith("<?xml") and "anthropic/text/1" in svg
