"""`streamfold replay --output module:Model`: the typed value in the terminal as it fills in,
and a clear refusal of anything that is not a pydantic model or type."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from output_support import OUTPUT_RECORDINGS, Characters
from support import REAL, read
from test_cli import _screen_text, run_in_pty

from streamfold import UsageError, fold
from streamfold.cli import load_output, main
from streamfold.live import LiveView, PlainView

CHARACTERS = next(r for r in OUTPUT_RECORDINGS if r.rel == "anthropic/json-output-format.sse")
TOOL = next(r for r in OUTPUT_RECORDINGS if r.output_tool is not None)
EXPECTED = Characters.model_validate(CHARACTERS.expected).model_dump(mode="json", by_alias=True)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _block_after(out: str, header: str) -> object:
    """The JSON printed under `header` (up to the next blank line)."""
    lines = out.split(header + "\n", 1)[1].split("\n\n", 1)[0]
    return json.loads(lines)


def test_replay_prints_the_typed_value(capsys: pytest.CaptureFixture[str]) -> None:
    rec = str(REAL / CHARACTERS.rel)
    code, out, err = _run(
        ["replay", rec, "--speed", "0", "--output", "output_support:Characters"], capsys
    )
    assert code == 0, err
    assert _block_after(out, "typed output") == EXPECTED
    # Before the footer, after the answer's own text.
    assert out.index("typed output") < out.index("─── stop: stop")


def test_replay_takes_the_output_from_the_named_tool(capsys: pytest.CaptureFixture[str]) -> None:
    rec = str(REAL / TOOL.rel)
    args = ["replay", rec, "--speed", "0", "--output", "output_support:Elements"]
    code, out, err = _run([*args, "--output-tool", "json"], capsys)
    assert code == 0, err
    assert _block_after(out, "typed output") == TOOL.expected
    # Without the tool's name the answer is the text after the tool: there is none.
    code, out, err = _run(args, capsys)
    assert code == 0, err
    assert "typed output · failed" in out and "expected an answer text part" in out


def test_replay_jsonl_has_the_output_events(capsys: pytest.CaptureFixture[str]) -> None:
    rec = str(REAL / CHARACTERS.rel)
    args = ["replay", rec, "--speed", "0", "--jsonl", "--output", "output_support:Characters"]
    code, out, _ = _run(args, capsys)
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds.count("output_partial") > 50 and kinds.count("output_completed") == 1
    assert next(e for e in events if e["type"] == "output_completed")["value"] == EXPECTED


def test_a_value_that_fails_validation_prints_why(capsys: pytest.CaptureFixture[str]) -> None:
    rec = str(REAL / "openai-chat/structured-output-json-schema.sse")
    args = ["replay", rec, "--speed", "0", "--output", "output_support:CityLocation"]
    code, out, _ = _run(args, capsys)
    assert code == 0  # the Message is complete all the same
    assert "typed output · failed" in out
    assert "CityLocation" in out and "country: Field required" in out


def test_the_live_view_draws_the_partial_value_as_it_grows() -> None:
    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, width=100, height=40)
    view = LiveView(console)
    view.start("title", 0)
    seen: list[str] = []
    # One SSE event a chunk, as a replay feeds them: a partial value grows in place, so it
    # is drawn before the next chunk is folded.
    chunks = [e + b"\n\n" for e in read(CHARACTERS.rel).split(b"\n\n") if e]
    try:
        for event in fold(chunks, output=Characters):
            view.handle(event)
            if type(event).__name__ == "OutputPartial":
                lines = [
                    "".join(t for t, _ in line)
                    for block in view.parts.growing(tail=40 * 100)
                    for line in block
                ]
                seen.append("\n".join(lines))
    finally:
        view.finish()
    partial = [s for s in seen if "typed output · partial" in s]
    assert len(partial) == len(seen) > 50
    assert '"name": "Theron Ironheart"' in partial[len(partial) // 4]
    assert '"name": "Rook Shadowstep"' not in partial[len(partial) // 4]
    assert '"name": "Rook Shadowstep"' in partial[-1]
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert "typed output" in printed and "Behind his cocky smile" in printed


def test_the_plain_view_prints_the_value_once() -> None:
    out = io.StringIO()
    view = PlainView(out)
    view.start("title", 0)
    for event in fold([read(CHARACTERS.rel)], output=Characters):
        view.handle(event)
    view.finish()
    text = out.getvalue()
    assert text.count("typed output") == 1 and "partial" not in text
    assert _block_after(text, "typed output") == EXPECTED


def test_live_replay_under_a_terminal_shows_the_output() -> None:
    rec = str(REAL / CHARACTERS.rel)
    raw = run_in_pty(["replay", rec, "--speed", "8", "--output", "tests.output_support:Characters"])
    screen = _screen_text(raw)
    assert "typed output · partial" in screen  # drawn while it grew
    assert "typed output" in screen and "Rook Shadowstep" in screen


# --- what --output accepts and refuses ---------------------------------------------------


def test_load_output_accepts_models_adapters_and_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_schemas.py").write_text(
        "from pydantic import TypeAdapter\n"
        "from output_support import Character, Characters\n"
        "Many = list[Character]\n"
        "Adapter = TypeAdapter(Characters)\n"
        "class Box:\n"
        "    Inner = Characters\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_output("my_schemas:Characters") is Characters
    assert load_output("my_schemas:Box.Inner") is Characters
    many = load_output("my_schemas:Many")
    assert many.validate_json('[{"name": "a", "class": "b", "description": "c"}]')[0].name == "a"
    assert load_output("my_schemas:Adapter").validate_json('{"characters": []}') == Characters(
        characters=[]
    )


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("output_support", "expected module:Model"),
        ("output_support:", "expected module:Model"),
        ("a b:C", "expected module:Model"),
        ("no_such_module_here:X", "expected an importable module 'no_such_module_here'"),
        ("output_support:Nope", "expected 'output_support' to define 'Nope'"),
        ("output_support:OUTPUT_RECORDINGS", "expected a pydantic model or a type"),
        ("json:dumps", "expected a pydantic model or a type"),
        ("os:sep", "expected a pydantic model or a type"),
        ("io:StringIO", "expected a type pydantic validates"),
    ],
)
def test_load_output_refuses_what_is_no_model(spec: str, says: str) -> None:
    with pytest.raises(UsageError, match="--output: ") as caught:
        load_output(spec)
    assert says in str(caught.value)


def test_a_module_that_fails_to_import_is_refused_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken_schemas.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rec = str(REAL / CHARACTERS.rel)
    code, out, err = _run(["replay", rec, "--output", "broken_schemas:Model"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("streamfold: error: --output: ") and "RuntimeError: boom at import" in err
    assert "Traceback" not in err


def test_output_tool_without_output_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    rec = str(REAL / TOOL.rel)
    code, out, err = _run(["replay", rec, "--output-tool", "json"], capsys)
    assert code == 2 and out == ""
    assert "--output-tool: expected --output module:Model with it" in err
