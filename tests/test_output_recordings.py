"""Every recording with structured output folds to its typed value, live and at the end,
whole and byte by byte, on every provider that has such a recording."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from output_support import OUTPUT_RECORDINGS, OutputRecording
from support import entry, fold_bytes, read

from streamfold import (
    Event,
    OutputCompleted,
    OutputPartial,
    event_to_json,
    fold,
    fold_output,
)

IDS = [r.rel for r in OUTPUT_RECORDINGS]


def _output_events(events: list[Event]) -> list[dict[str, Any]]:
    """The output's events as JSON (a partial value is live: serialised when it came)."""
    return [e for e in (event_to_json(ev) for ev in events) if e["type"].startswith("output_")]


def _fold(r: OutputRecording, pieces: list[int] | None = None) -> list[dict[str, Any]]:
    data = read(r.rel)
    if pieces is None:
        chunks = [data]
    else:
        cuts = [0, *pieces, len(data)]
        chunks = [data[a:b] for a, b in itertools.pairwise(cuts) if a < b]
    out: list[dict[str, Any]] = []
    for event in fold(chunks, output=r.model, output_tool=r.output_tool):
        out.extend(_output_events([event]))
    return out


def test_every_provider_with_structured_output_has_a_recording() -> None:
    providers = set()
    for r in OUTPUT_RECORDINGS:
        if r.rel.endswith(".eventstream"):
            continue
        e = entry(r.rel)
        providers.add(f"{e['provider']}/{e['api']}")
    assert providers == {
        "openai/chat-completions",
        "openai/responses",
        "anthropic/messages",
        "google/gemini",
        "bedrock/bedrock-converse",
    }


@pytest.mark.parametrize("r", OUTPUT_RECORDINGS, ids=IDS)
def test_folds_to_the_hand_checked_value_live_and_at_the_end(r: OutputRecording) -> None:
    events = _fold(r)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "output_completed"
    assert "output_partial" in kinds  # seen live, before the end
    assert "output_failed" not in kinds
    final = events[-1]["value"]
    assert final == r.model.model_validate(r.expected).model_dump(mode="json", by_alias=True)
    assert fold_output([read(r.rel)], output=r.model, output_tool=r.output_tool) == (
        r.model.model_validate(r.expected)
    )
    # Each partial value is a view of the final one: every key it holds, the final holds,
    # and a text it holds is the start of the final's.
    for e in events:
        if e["type"] == "output_partial":
            _assert_prefix_of(e["value"], final)


def _assert_prefix_of(partial: Any, final: Any) -> None:
    if isinstance(partial, dict):
        assert isinstance(final, dict)
        for key, value in partial.items():
            assert key in final
            _assert_prefix_of(value, final[key])
    elif isinstance(partial, list):
        assert isinstance(final, list) and len(partial) <= len(final)
        for a, b in zip(partial, final, strict=False):
            _assert_prefix_of(a, b)
    elif isinstance(partial, str):
        assert isinstance(final, str) and final.startswith(partial)
    else:
        assert partial == final or partial is None


@pytest.mark.parametrize("r", OUTPUT_RECORDINGS, ids=IDS)
def test_byte_by_byte_gives_the_same_output_events(r: OutputRecording) -> None:
    whole = _fold(r)
    data = read(r.rel)
    one_by_one = _fold(r, list(range(1, len(data))))
    # Split finer, a value may show at more steps; the steps it shows whole are the same.
    assert one_by_one[-1] == whole[-1]
    seen = [json.dumps(e, sort_keys=True) for e in one_by_one]
    for e in whole:
        if e["type"] == "output_item":
            assert json.dumps(e, sort_keys=True) in seen


def test_tool_as_output_leaves_the_narration_out() -> None:
    # The narration before the output tool ("I'll invoke...") is no part of the output.
    r = next(r for r in OUTPUT_RECORDINGS if r.output_tool is not None)
    message = next(
        e.message for e in fold_bytes(read(r.rel)) if type(e).__name__ == "MessageCompleted"
    )
    assert message.content[0].content == "I'll invoke the JSON response tool."
    events = list(fold([read(r.rel)], output=r.model, output_tool=r.output_tool))
    partials = [e for e in events if isinstance(e, OutputPartial)]
    assert partials and all(isinstance(e.value, r.model) for e in partials)
    done = [n for n, e in enumerate(events) if isinstance(e, OutputCompleted)]
    assert len(done) == 1 and done[0] < len(events) - 1  # as the tool call completed
    assert events[done[0]].value == r.model.model_validate(r.expected)  # type: ignore[attr-defined]
