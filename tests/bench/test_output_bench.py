"""The typed-output benchmark runs at tiny sizes and every implementation folds right.

Timing is never asserted (shared, noisy machines): this keeps the harness from rotting and
checks that every implementation that is installed gave `Catalog.model_validate_json` of
the whole answer, having shown partial values on the way.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import output_bench  # noqa: E402


def test_the_workload_is_the_answer_cut_into_deltas() -> None:
    w = output_bench.make_workload(3_000, seed=7)
    assert "".join(w.deltas) == w.text
    assert 3_000 <= len(w.text) < 3_000 + 2 * output_bench.OBJECT_BYTES
    assert all(1 <= len(d) < 2 * output_bench.BYTES_PER_DELTA for d in w.deltas)
    assert w.expected == output_bench.Catalog.model_validate_json(w.text)
    # The SSE chunks carry the same text, one delta an event, between a role chunk and a stop.
    contents = []
    for chunk in w.chunks[1:-2]:
        payload = json.loads(chunk.decode().removeprefix("data: "))
        contents.append(payload["choices"][0]["delta"]["content"])
    assert contents == w.deltas
    assert w.chunks[-1] == b"data: [DONE]\n\n"


def test_every_installed_implementation_folds_right(tmp_path: Path) -> None:
    out = tmp_path / "output.json"
    plot = tmp_path / "output.svg"
    result = output_bench.main(
        ["--sizes", "600,2500", "--budget", "5", "--json", str(out), "--plot", str(plot)]
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert plot.read_text().lstrip().startswith("<?xml")
    rows = {(r["impl"], r["size"]): r for r in result["rows"]}
    assert len(rows) == len(output_bench.IMPLS) * 2
    for impl in output_bench.IMPLS:
        installed = all(importlib.util.find_spec(m) is not None for m in impl.needs)
        if impl is output_bench.IMPLS[0]:
            installed = output_bench.supports_output()
        for size in (600, 2500):
            row = rows[(impl.name, size)]
            if not installed:
                assert row["status"] == "missing"
                continue
            assert row["status"] == "ok", (impl.name, size, row["note"])
            assert row["seconds"] > 0
            assert row["partials"] >= impl.min_partials
