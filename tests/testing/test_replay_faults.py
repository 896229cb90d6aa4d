"""`streamfold replay --fault`: the stream faults of a scenario turn, on a file's replay."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support import REAL

from streamfold.cli import main

CHAT_TEXT = REAL / "openai-chat" / "text-include-usage.sse"


def _message(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["replay", str(CHAT_TEXT), "--speed", "0", "--message", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_replay_cut_after_events_folds_incomplete(capsys: pytest.CaptureFixture[str]) -> None:
    whole = _message(capsys)
    cut = _message(capsys, "--fault", "cut_after_events=4")
    assert whole["status"] == "complete" and cut["status"] == "incomplete"
    # Four events: the role, then three pieces of text (counted by hand in the recording).
    assert cut["content"] == [
        {"type": "text", "content": "The capital of", "options": {}, "citations": []}
    ]


def test_replay_stall_waits_at_speed_one(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    args = ["replay", str(CHAT_TEXT), "--jsonl", "--fault", "tokens_per_second=1000,stall=0.5"]
    assert main(args) == 0
    assert time.monotonic() - started >= 0.5
    assert capsys.readouterr().out.count("\n") > 3


def test_replay_refuses_a_status_fault(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["replay", str(CHAT_TEXT), "--fault", "status=429"]) == 2
    assert "status 429 is an HTTP answer before any stream" in capsys.readouterr().err


def test_replay_ends_with_the_providers_error_event(capsys: pytest.CaptureFixture[str]) -> None:
    recording = str(REAL / "anthropic" / "text-basic.sse")
    spec = "cut_after_events=5,error_frame=overloaded_error,error_message=busy"
    assert main(["replay", recording, "--speed", "0", "--message", "--fault", spec]) == 0
    message = json.loads(capsys.readouterr().out)
    assert message["status"] == "error"
    assert message["metadata"]["error"] == {"type": "overloaded_error", "message": "busy"}
    # Five events: message_start, content_block_start, ping, then "-" and " Captain".
    assert message["content"][0]["content"] == "- Captain"
