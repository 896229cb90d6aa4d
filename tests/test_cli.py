"""The `streamfold` command: live replay under a pseudo-terminal, JSON outputs, errors, demo."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import IMPORTED_FROM, REAL, message_json, read

from streamfold import (
    MessageCompleted,
    extract_display_items,
    fold,
    fold_message,
)
from streamfold.cli import DEMO, bundled_recordings, event_to_json, main
from streamfold.display import display_items_for

_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-B]")

TEXT_RECORDINGS = [
    "anthropic/mcp-tool-use-thinking.sse",
    "openai-chat/text-include-usage.sse",
    "openai-responses/reasoning-summary.sse",
    "gemini/thought-parts-signature.sse",
    "bedrock/text-then-tool-use-nova.eventstream",
    "ollama/generate-gpt-oss-thinking.ndjson",
]
ANY_RECORDINGS = [*TEXT_RECORDINGS, "anthropic/thinking-then-tool-use.sse"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["PYTHONPATH"] = IMPORTED_FROM
    env["TERM"] = "xterm-256color"
    return env


def run_in_pty(args: list[str], cols: int = 100, rows: int = 30, timeout: float = 30) -> bytes:
    """Run `python -m streamfold ARGS` on a pseudo-terminal; return all it wrote."""
    import fcntl
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamfold", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=_env(),
        close_fds=True,
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out.extend(chunk)
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=5) == 0, out.decode(errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return bytes(out)


def _words(text: str) -> str:
    return " ".join(text.split())


def _screen_text(raw: bytes) -> str:
    return _words(_ANSI.sub(b"", raw).replace(b"\r", b"").decode("utf-8", "replace"))


def _run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- the live view ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "rec", ["anthropic/mcp-tool-use-thinking.sse", "openai-responses/reasoning-summary.sse"]
)
def test_live_replay_under_a_terminal(rec: str) -> None:
    message = fold_message(read(rec))
    raw = run_in_pty(["replay", str(REAL / rec), "--speed", "8"])
    screen = _screen_text(raw)
    # The final text printed once its part completed, whole, wrapping aside.
    assert message.text is not None
    assert _words(message.text) in screen
    for part in message.content:
        if part.type == "thinking" and part.content:
            assert _words(part.content) in screen
    assert message.usage is not None
    assert f"usage: {message.usage.input_tokens} in · {message.usage.output_tokens} out" in screen
    assert f"stop: {message.stop_reason}" in screen
    # Rich Live redrew in place (cursor up / erase line) and showed the progress line.
    assert b"\x1b[2K" in raw or b"\x1b[1A" in raw
    assert " events · " in screen


def test_live_view_shows_tool_call_arguments_pretty_printed() -> None:
    rec = "openai-chat/tool-calls-parallel.sse"
    message = fold_message(read(rec))
    screen = _ANSI.sub(b"", run_in_pty(["replay", str(REAL / rec), "--speed", "0"])).decode()
    for call in message.tool_calls:
        assert f"⚙ tool call {call.name}" in screen
        assert isinstance(call.arguments, dict)
        for line in json.dumps(call.arguments, indent=2, ensure_ascii=False).splitlines():
            assert line in screen


# --- JSON outputs match fold --------------------------------------------------------------


@pytest.mark.parametrize("rec", ANY_RECORDINGS)
def test_jsonl_is_the_fold_events(rec: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run_main(["replay", str(REAL / rec), "--jsonl", "--speed", "0"], capsys)
    assert code == 0, err
    printed = [json.loads(line) for line in out.splitlines()]
    expected = [event_to_json(e) for e in fold(read(rec))]
    assert [e["type"] for e in printed] == [e["type"] for e in expected]
    assert printed[-1]["type"] == "message_completed"
    # The replay's timing is the recorded one (tests/test_timing.py), the fold's its own.
    printed[-1]["message"] = message_json(printed[-1]["message"])
    expected[-1]["message"] = message_json(expected[-1]["message"])
    assert printed == json.loads(json.dumps(expected))
    assert printed[-1]["message"] == message_json(fold_message(read(rec)))


@pytest.mark.parametrize("rec", ANY_RECORDINGS)
def test_display_items_as_parts_complete(rec: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run_main(["replay", str(REAL / rec), "--display", "--speed", "0"], capsys)
    assert code == 0
    *printed, timing = [json.loads(line) for line in out.splitlines()]
    assert timing["type"] == "timing" and "time_to_first_token_s" in timing
    events = list(fold(read(rec)))
    # Each part's items, in stream order, as final: a text part's with its marker.
    final = next(e.message for e in events if isinstance(e, MessageCompleted))
    whole = [
        item.model_dump(mode="json")
        for part in final.stream_order()
        for item in display_items_for(part, final.role)
    ]
    assert printed == whole
    if final.status == "complete":
        whole = [i.model_dump(mode="json") for i in extract_display_items(final, "stream")]
        assert printed == whole


@pytest.mark.parametrize("rec", ANY_RECORDINGS)
def test_message_output(rec: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run_main(["replay", str(REAL / rec), "--message", "--speed", "0"], capsys)
    assert code == 0
    assert message_json(out) == message_json(fold_message(read(rec)))


def test_stdin_and_provider_override() -> None:
    rec = "anthropic/text-basic.sse"
    done = subprocess.run(
        [sys.executable, "-m", "streamfold", "replay", "-", "--message", "--speed", "0"],
        input=read(rec),
        capture_output=True,
        env=_env(),
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert message_json(done.stdout) == message_json(fold_message(read(rec)))


def test_provider_override(capsys: pytest.CaptureFixture[str]) -> None:
    rec = "openai-chat/text-include-usage.sse"
    args = ["replay", str(REAL / rec), "--message", "--speed", "0"]
    code, out, _ = _run_main([*args, "--provider", "openai"], capsys)
    assert code == 0
    assert message_json(out) == message_json(fold_message(read(rec)))
    code, out, err = _run_main([*args, "--provider", "nonsense"], capsys)
    assert code == 2
    assert out == ""
    assert "nonsense" in err


@pytest.mark.parametrize("provider", ["gemini", "openai-responses", "ollama"])
def test_replay_with_a_provider_that_matches_no_event_exits_2(
    provider: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = REAL / "anthropic/text-basic.sse"
    args = ["replay", str(path), "--message", "--speed", "0", "--provider", provider]
    code, out, err = _run_main(args, capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and str(path) in err
    assert f"expected events in {provider}'s format" in err


def test_plain_output_when_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    rec = "anthropic/mcp-tool-use-thinking.sse"
    code, out, _ = _run_main(["replay", str(REAL / rec), "--speed", "0"], capsys)
    assert code == 0
    message = fold_message(read(rec))
    assert message.text is not None and message.text in out
    assert "\x1b[" not in out
    assert "▪ mcp_tool_use" in out
    assert out.rstrip().endswith("usage: 3042 in · 354 out")


def test_replay_sets_narration_apart_in_stream_order(capsys: pytest.CaptureFixture[str]) -> None:
    rec = "anthropic/code-execution-bash-thinking.sse"
    code, out, _ = _run_main(["replay", str(REAL / rec), "--speed", "0"], capsys)
    assert code == 0
    narration, answer = [
        p.content or "" for p in fold_message(read(rec)).content[1:] if p.type == "text"
    ]
    # The narration printed under its header, once a tool showed it was narration; the
    # server tool's blocks after it, then the answer, plain: the parts in stream order.
    at = out.index("▸ narration\n" + narration)
    assert at < out.index("▪ server_tool_use") < out.index(answer.splitlines()[0])
    assert out.count("▸ narration") == 1


def test_live_replay_marks_narration_under_a_terminal() -> None:
    rec = "anthropic/web-search-citations.sse"
    screen = _screen_text(run_in_pty(["replay", str(REAL / rec), "--speed", "0"]))
    assert "▸ narration" in screen
    assert _words("Let me search for more specific breaking news stories") in screen


# --- errors -------------------------------------------------------------------------------


def _bad_files(tmp: Path) -> dict[str, Path]:
    garbage = tmp / "garbage.sse"
    garbage.write_text("hello\nthis is not a stream\n")
    binary = tmp / "binary.eventstream"
    binary.write_bytes(b"\x00\x00\x00\x20" + os.urandom(60))
    empty = tmp / "empty.sse"
    empty.write_bytes(b"")
    json_garbage = tmp / "broken.ndjson"
    json_garbage.write_text('{"model": "x", "not": "a provider"}\n{oops\n')
    return {
        "missing": tmp / "nope.sse",
        "directory": tmp,
        "garbage": garbage,
        "binary": binary,
        "empty": empty,
        "json": json_garbage,
    }


@pytest.mark.parametrize("case", ["missing", "directory", "garbage", "binary", "empty", "json"])
def test_unusable_files_exit_2_with_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _bad_files(tmp_path)[case]
    code, _out, err = _run_main(["replay", str(path), "--speed", "0"], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("streamfold: error: ")
    assert str(path) in err
    assert "Traceback" not in err


def test_error_as_a_process_has_no_traceback(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sse"
    garbage.write_text("data: {not json at all\n\n")
    for path in (tmp_path / "missing.sse", garbage):
        done = subprocess.run(
            [sys.executable, "-m", "streamfold", "replay", str(path)],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=30,
            check=False,
        )
        assert done.returncode == 2
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1, done.stderr
        assert str(path) in done.stderr and "Traceback" not in done.stderr


# --- demo ---------------------------------------------------------------------------------


def test_demo_runs_without_a_terminal() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streamfold", "demo"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    message = fold_message(read(DEMO))
    thinking = next(p.content for p in message.content if p.type == "thinking")
    assert thinking and thinking in done.stdout
    assert "⚙ tool call fixed_version" in done.stdout
    assert "recorded: claude-haiku-4-5-20251001" in done.stdout
    assert "simonw/llm-anthropic" in done.stdout
    assert "usage: 598 in · 92 out (53 reasoning)" in done.stdout
    assert "\x1b[" not in done.stdout


def test_no_arguments_runs_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "argv", ["streamfold"])
    monkeypatch.setattr("streamfold.record.EVENT_INTERVAL", 0.0)
    assert main() == 0
    assert "streamfold demo · anthropic/thinking-then-tool-use.sse" in out.getvalue()


def test_bundled_recordings_match_the_fixtures_and_provenance() -> None:
    base = bundled_recordings()
    bundled = sorted(p.relative_to(base).as_posix() for p in base.rglob("*.sse"))
    assert DEMO in bundled
    provenance = (base / "PROVENANCE.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \|", provenance, re.MULTILINE)
    assert sorted(rows) == bundled
    source_rows = (REAL / "PROVENANCE.md").read_text().splitlines()
    for rel in bundled:
        assert (base / rel).read_bytes() == read(rel)
        row = next(line for line in provenance.splitlines() if line.startswith(f"| `{rel}`"))
        assert row in source_rows


def test_demo_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run_main(["demo", "--list"], capsys)
    assert code == 0
    assert DEMO in out.splitlines()


def test_event_to_json_covers_provider_errors() -> None:
    rec = "openai-responses/error-insufficient-quota-failed.sse"
    shapes: list[dict[str, Any]] = [event_to_json(e) for e in fold(read(rec))]
    errored = [s for s in shapes if s["type"] == "provider_errored"]
    assert errored and set(errored[0]) == {"type", "error_type", "message", "raw", "partial"}
    json.dumps(shapes)


def test_a_speed_that_would_stall_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # 5e-324 makes every wait infinite; the replay would never end.
    for speed in ("5e-324", "0.001", "1e9", "inf", "nan", "-1", "fast"):
        with pytest.raises(SystemExit) as refused:
            main(["replay", str(REAL / "anthropic/text-basic.sse"), "--speed", speed])
        assert refused.value.code == 2
        assert "speed: expected" in capsys.readouterr().err


def test_serve_options() -> None:
    from streamfold.cli import build_parser

    args = build_parser().parse_args(
        ["serve", "--max-body", "4096", "--allow-host", "a.internal", "--allow-host", "b"]
    )
    assert (args.max_body, args.allow_host) == (4096, ["a.internal", "b"])
    defaults = build_parser().parse_args(["serve"])
    assert (defaults.max_body, defaults.allow_host) == (None, [])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--max-body", "-1"])
