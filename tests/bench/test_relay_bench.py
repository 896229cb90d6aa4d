"""The relay benchmark runs at tiny sizes, both phases, and reports every figure.

Timing is never asserted (shared, noisy machines): this keeps the harness from rotting and
checks that every reader of both kinds got every event of its stream, without a gap.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from redis_support import REDIS_SERVER, SKIP_REASON

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

if REDIS_SERVER is None:
    pytest.skip(SKIP_REASON, allow_module_level=True)
for needed in ("redis", "orjson"):
    if importlib.util.find_spec(needed) is None:
        pytest.skip(f"{needed} is not installed", allow_module_level=True)

from benchmarks import relay_bench  # noqa: E402

FIGURES = (
    "deliveries_per_cpu_s",
    "latency_median_ms",
    "latency_p99_ms",
    "redis_memory_per_stream_bytes",
    "reader_connections",
)


def test_both_readers_get_every_event_and_every_figure_is_reported(tmp_path: Path) -> None:
    out = tmp_path / "relay.json"
    args = ["--streams", "3", "--readers", "2", "--procs", "1", "--pace", "0.001"]
    result = relay_bench.main([*args, "--stagger", "0.001", "--json", str(out)])
    assert json.loads(out.read_text()) == result
    hiredis = importlib.util.find_spec("hiredis") is not None
    assert ("Hiredis" in result["parser"]) == hiredis  # which parser, said
    for mode in relay_bench.MODES:
        phase = result[mode]
        assert phase["failures"] == 0, phase["failure_samples"]
        assert phase["events_published"] > 0
        assert phase["deliveries"] == phase["deliveries_expected"]
        assert phase["deliveries_expected"] == phase["events_published"] * 2
        for figure in FIGURES:
            if mode == "pubsub" and figure == "redis_memory_per_stream_bytes":
                assert phase[figure] == 0  # pub/sub keeps nothing
                continue
            assert phase[figure] is not None and phase[figure] > 0, figure
    # The bare consumer blocks a connection per reader; the relay's readers share a few.
    assert result["bare"]["reader_connections"] == 3 * 2
    assert set(result["ratios"]) == {"deliveries_per_cpu_s", "latency_median_ms", "latency_p99_ms"}
    assert set(result["ratios_pubsub"]) == set(result["ratios"])
    # The pub/sub floor: one subscriber connection per reader process, whatever the readers.
    assert result["pubsub"]["reader_connections"] == 1
