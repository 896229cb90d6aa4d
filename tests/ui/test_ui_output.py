"""The structured output on the UI message stream: one `data-output` part, read by the `ai`
package's own reader (as `useChat` reads it), replaced in place as the value grows."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from output_support import OUTPUT_RECORDINGS, CityLocation, OutputRecording
from support import read

from streamfold import OutputPartial, UsageError, event_to_json, fold
from streamfold.ui import (
    DATA_OUTPUT,
    OUTPUT_PART_ID,
    OUTPUT_RATIO,
    UIMessageStreamEncoder,
    encode_chunk,
    encode_sse,
    to_ui_message_stream,
)

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "tests" / "js"
sys.path.insert(0, str(ROOT))

from benchmarks.output_bench import Catalog, make_workload  # noqa: E402


def _chunks(r: OutputRecording, **encoder: Any) -> list[dict[str, Any]]:
    events = fold([read(r.rel)], output=r.model, output_tool=r.output_tool)
    if not encoder:
        return list(to_ui_message_stream(events))
    enc = UIMessageStreamEncoder(**encoder)
    out = enc.start()
    for event in events:
        out.extend(enc.feed(event))
    return [*out, *enc.close()]


def _read_with_ai(streams: dict[str, bytes]) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the `ai` package's reader cannot run")
    if not (JS / "node_modules" / "ai").is_dir():
        pytest.skip(f"{JS}/node_modules is missing: run `npm ci` there")
    run = subprocess.run(
        [node, "read-ui-stream.mjs"],
        cwd=JS,
        input=json.dumps({k: v.decode() for k, v in streams.items()}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"the node reader failed:\n{run.stderr}"
    result: dict[str, Any] = json.loads(run.stdout)
    return result


@pytest.fixture(scope="module")
def read_back() -> dict[str, Any]:
    """Each structured-output recording's UI stream, every change sent, read by `ai`."""
    streams = {
        r.rel: b"".join(encode_sse(_chunks(r, output_ratio=None))) for r in OUTPUT_RECORDINGS
    }
    return _read_with_ai(streams)


@pytest.mark.parametrize("r", OUTPUT_RECORDINGS, ids=[r.rel for r in OUTPUT_RECORDINGS])
def test_the_ai_reader_holds_the_final_value_in_one_data_part(
    r: OutputRecording, read_back: dict[str, Any]
) -> None:
    ui = read_back[r.rel]
    assert ui["errors"] == []
    assert ui["valid"], ui.get("invalid")
    sent = [c for c in _chunks(r, output_ratio=None) if c["type"] == DATA_OUTPUT]
    # Every change went out, the complete value last, all under one id...
    assert len(sent) >= 2 and ui["chunks"].count(DATA_OUTPUT) == len(sent)
    assert [c["data"]["state"] for c in sent] == ["partial"] * (len(sent) - 1) + ["complete"]
    # ...and the reader replaced the part each time: one part, the final value.
    parts = [p for p in ui["message"]["parts"] if p["type"] == DATA_OUTPUT]
    expected = r.model.model_validate(r.expected).model_dump(mode="json", by_alias=True)
    data = {"state": "complete", "value": expected}
    assert parts == [{"type": DATA_OUTPUT, "id": OUTPUT_PART_ID, "data": data}]
    # The answer's JSON text still went out as its own part.
    kinds = {p["type"] for p in ui["message"]["parts"]}
    assert ("text" in kinds) if r.output_tool is None else ("tool-json" in kinds)


def test_each_partial_is_what_the_fold_showed_then() -> None:
    r = next(r for r in OUTPUT_RECORDINGS if r.rel == "anthropic/json-output-format.sse")
    sent = [c["data"] for c in _chunks(r, output_ratio=None) if c["type"] == DATA_OUTPUT]
    # A partial value is live (it grows in place): its JSON as it was when it came.
    shown = [
        event_to_json(e)["value"]
        for e in fold([read(r.rel)], output=r.model)
        if isinstance(e, OutputPartial)
    ]
    assert len(shown) > 50
    assert [d["value"] for d in sent[:-1]] == shown


def test_partial_values_stay_within_the_ratio_of_the_answers_bytes() -> None:
    # A 100 KB answer in 5,000 deltas: every change sent would be ~250 MB on the wire.
    w = make_workload(100_000)
    partials = sum(1 for e in fold(iter(w.chunks), output=Catalog) if isinstance(e, OutputPartial))
    # Encoded as the fold goes (a partial value grows in place after its event).
    chunks = list(to_ui_message_stream(fold(iter(w.chunks), output=Catalog)))
    sent = [c for c in chunks if c["type"] == DATA_OUTPUT]
    sent_partial = [c for c in sent if c["data"]["state"] == "partial"]
    wire = sum(len(encode_chunk(c)) for c in sent_partial)
    assert wire <= 1.01 * OUTPUT_RATIO * len(w.text.encode())  # the chunk's few bytes aside
    assert 20 <= len(sent_partial) < partials // 10  # many updates, far fewer than changes
    assert sent[-1]["data"] == {"state": "complete", "value": w.expected.model_dump(mode="json")}
    # While the answer is short, every change goes out: the first ones are all there.
    every = list(to_ui_message_stream(fold(iter(w.chunks), output=Catalog), output_ratio=None))
    first = [c for c in every if c["type"] == DATA_OUTPUT][:10]
    assert sent_partial[:10] == first


def test_a_failed_output_goes_out_as_failed_with_its_reason() -> None:
    r = next(r for r in OUTPUT_RECORDINGS if r.rel.startswith("openai-chat/"))
    events = fold([read(r.rel)], output=CityLocation)  # the answer is a Location
    chunks = list(to_ui_message_stream(events))
    last = [c for c in chunks if c["type"] == DATA_OUTPUT][-1]
    assert last["data"]["state"] == "failed" and last["data"]["value"] is None
    assert "CityLocation" in last["data"]["error"] and "country" in last["data"]["error"]
    ui = _read_with_ai({"failed": b"".join(encode_sse(chunks))})["failed"]
    assert ui["errors"] == [] and ui["valid"]
    (part,) = [p for p in ui["message"]["parts"] if p["type"] == DATA_OUTPUT]
    assert part["data"] == last["data"]


@pytest.mark.parametrize("ratio", [0, -1.0, "8", float("nan"), True])
def test_a_bad_output_ratio_is_refused(ratio: Any) -> None:
    with pytest.raises(UsageError, match="output_ratio"):
        UIMessageStreamEncoder(output_ratio=ratio)


def test_a_fold_without_output_sends_no_data_output() -> None:
    r = OUTPUT_RECORDINGS[0]
    chunks = list(to_ui_message_stream(fold([read(r.rel)])))
    assert not [c for c in chunks if c["type"] == DATA_OUTPUT]
