"""Recording live streams with `streamfold.record` and pacing recordings back out."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import IMPORTED_FROM, REAL, message_json, read

from streamfold import (
    MessageCompleted,
    PartCompleted,
    SSEDecoder,
    fold_message,
    load_recording,
)
from streamfold.errors import UsageError
from streamfold.record import (
    EVENT_INTERVAL,
    atee,
    load_timing,
    schedule,
    split_frames,
    tee,
    timing_path,
)

RECORDINGS = [
    "anthropic/thinking-then-tool-use.sse",
    "anthropic/web-search-citations.sse",
    "openai-chat/tool-calls-parallel.sse",
    "openai-responses/reasoning-summary.sse",
    "gemini/function-call-thought-signature.sse",
    "bedrock/thinking-signature-claude.eventstream",
    "bedrock/text-nova-micro.ndjson",
    "ollama/generate-gpt-oss-thinking.ndjson",
]


def _chunks(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, at = [], 0
    while at < len(data):
        step = rng.randint(1, 700)
        out.append(data[at : at + step])
        at += step
    return out


@pytest.mark.parametrize("rec", RECORDINGS)
def test_tee_writes_a_recording_that_folds_the_same(rec: str, tmp_path: Path) -> None:
    data = read(rec)
    chunks = _chunks(data, len(rec))
    target = tmp_path / Path(rec).name
    live = list(tee(chunks, target))
    assert target.read_bytes() == data
    original = fold_message(data)
    assert live[-1] == MessageCompleted(message=original)
    assert fold_message(load_recording(target)) == original
    # The timing sidecar: one mark per chunk, ending where the file ends, times rising.
    marks = load_timing(target)
    assert marks is not None
    assert [end for end, _ in marks] == list(itertools.accumulate(len(c) for c in chunks))
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(marks))
    assert json.loads(timing_path(target).read_text())["version"] == 1


@pytest.mark.parametrize("rec", RECORDINGS[:4])
async def test_atee_async_stream(rec: str, tmp_path: Path) -> None:
    data = read(rec)

    async def stream() -> AsyncIterator[bytes]:
        for chunk in _chunks(data, 7):
            yield chunk

    target = tmp_path / "live.sse"
    final = None
    async for event in atee(stream(), target):
        if isinstance(event, MessageCompleted):
            final = event.message
    assert final == fold_message(data)
    assert fold_message(load_recording(target)) == final


async def test_atee_left_early_cancels_at_once_and_keeps_the_file(tmp_path: Path) -> None:
    data = read(RECORDINGS[0])
    closed = anyio.Event()

    async def stream() -> AsyncIterator[bytes]:
        try:
            for chunk in _chunks(data, 7):
                yield chunk
        finally:
            closed.set()

    target = tmp_path / "cut.sse"
    teed = atee(stream(), target)
    async for event in teed:
        if isinstance(event, PartCompleted):
            break
    assert teed.snapshot().status == "cancelled"  # before anything is awaited
    kept = target.read_bytes()
    assert kept and data.startswith(kept)
    assert load_timing(target) is not None  # the file was closed: its timing is written
    with anyio.fail_after(10):  # a bound, not a timing assertion
        await closed.wait()  # the async source is closed by a task on the loop


def _decoded_events(data: bytes) -> list[dict[str, Any]]:
    decoder = SSEDecoder()
    frames = [*decoder.feed(data), *decoder.close()]
    return [json.loads(f.data) for f in frames if f.data != b"[DONE]"]


@pytest.mark.parametrize(
    "rec", ["anthropic/thinking-then-tool-use.sse", "openai-responses/function-call.sse"]
)
def test_tee_of_decoded_events_writes_sse(rec: str, tmp_path: Path) -> None:
    events = _decoded_events(read(rec))
    target = tmp_path / "decoded.sse"
    from_objects = fold_message(events)
    assert list(tee(events, target))[-1] == MessageCompleted(message=from_objects)
    assert target.read_bytes().startswith(f"event: {events[0]['type']}\ndata: ".encode())
    assert fold_message(load_recording(target)) == from_objects


def test_tee_keeps_what_arrived_when_stopped_early(tmp_path: Path) -> None:
    data = read("anthropic/web-search-citations.sse")
    chunks = _chunks(data, 3)
    target = tmp_path / "cut.sse"
    teed = tee(chunks, target)
    for i, _ in enumerate(teed):
        if i == 20:
            break
    teed.close()
    written = target.read_bytes()
    assert 0 < len(written) < len(data)
    assert data.startswith(written)
    assert teed.snapshot().status == "cancelled"
    marks = load_timing(target)
    assert marks is not None and marks[-1][0] == len(written)


def test_tee_records_the_tail_after_the_message_ended(tmp_path: Path) -> None:
    # One chunk per event: the fold is over at message_stop / [DONE], yet the bytes that
    # follow it belong to the recording.
    for rec in ("openai-chat/tool-call-single-mini.sse", "anthropic/text-basic.sse"):
        data = read(rec) + b"\n"
        target = tmp_path / Path(rec).name
        recording = load_recording(REAL / rec)
        list(tee([*split_frames(data, recording.format)], target))
        assert target.read_bytes() == data


def test_tee_without_timing_and_bad_chunks(tmp_path: Path) -> None:
    target = tmp_path / "plain.sse"
    list(tee([read("anthropic/text-basic.sse")], target, timing=False))
    assert not timing_path(target).exists()
    with pytest.raises(UsageError, match="expected bytes, str, a dict"):
        list(tee([1.5], tmp_path / "bad.sse"))


# --- pacing ---------------------------------------------------------------------------


@pytest.mark.parametrize("rec", RECORDINGS)
def test_split_frames_cuts_after_each_event(rec: str) -> None:
    recording = load_recording(REAL / rec)
    pieces = split_frames(recording.data, recording.format)
    assert b"".join(pieces) == recording.data
    # Fed one frame at a time, the fold gives the same message.
    assert fold_message(iter(pieces), recording.provider) == fold_message(recording.data)
    if recording.format == "sse":
        decoder = SSEDecoder()
        frames = [*decoder.feed(recording.data), *decoder.close()]
        assert len(pieces) >= len(frames)


def test_schedule_speeds() -> None:
    data = read("openai-chat/tool-call-single-mini.sse")
    instant = schedule(data, "sse", speed=0)
    assert all(wait == 0 for wait, _ in instant)
    steady = schedule(data, "sse", speed=1)
    assert [w for w, _ in steady][1:] == [EVENT_INTERVAL] * (len(steady) - 1)
    double = schedule(data, "sse", speed=2)
    assert [w for w, _ in double][1:] == [EVENT_INTERVAL / 2] * (len(double) - 1)
    with pytest.raises(UsageError):
        schedule(data, "sse", speed=-1)


def test_schedule_follows_recorded_timing(tmp_path: Path) -> None:
    data = read("anthropic/text-basic.sse")
    marks = [(100, 0.5), (400, 0.75), (len(data), 1.75)]
    steps = schedule(data, "sse", speed=2, timing=marks)
    assert [chunk for _, chunk in steps] == [data[:100], data[100:400], data[400:]]
    assert [wait for wait, _ in steps] == [0.25, 0.125, 0.5]
    # Timing that does not cover the file is ignored: the file changed since.
    assert len(schedule(data, "sse", speed=1, timing=[(10, 0.1)])) > 3


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = IMPORTED_FROM
    return env


def test_record_command_and_replay_of_the_recording(tmp_path: Path) -> None:
    rec = "openai-responses/function-call.sse"
    target = tmp_path / "out" / "recorded.sse"
    done = subprocess.run(
        [sys.executable, "-m", "streamfold", "record", str(target), "--message"],
        input=read(rec),
        capture_output=True,
        env=_env(),
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert target.read_bytes() == read(rec)
    assert timing_path(target).exists()
    replayed = subprocess.run(
        [sys.executable, "-m", "streamfold", "replay", str(target), "--message"],
        capture_output=True,
        env=_env(),
        timeout=30,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stderr
    assert message_json(replayed.stdout) == message_json(done.stdout)
    assert message_json(done.stdout) == message_json(fold_message(read(rec)))


def _record(target: Path, data: bytes, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamfold", "record", str(target), "--message", *extra],
        input=data.decode("latin-1"),
        capture_output=True,
        text=True,
        encoding="latin-1",
        env=_env(),
        timeout=30,
        check=False,
    )


def test_record_to_a_directory_exits_2_with_one_line(tmp_path: Path) -> None:
    done = _record(tmp_path, read("anthropic/text-basic.sse"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"streamfold: error: {tmp_path}: cannot write")


# Bytes that frame no event: any text is SSE, whose unknown lines are ignored.
NOT_A_STREAM = b"hello\nthis is not a stream\n" + bytes(range(1, 256)) * 4


@pytest.mark.parametrize("provider", [[], ["--provider", "anthropic"]])
def test_record_refuses_bytes_that_replay_would_refuse(provider: list[str], tmp_path: Path) -> None:
    target = tmp_path / "noise.sse"
    done = _record(target, NOT_A_STREAM, *provider)
    assert done.returncode == 2
    assert done.stdout == ""  # no empty message shown as if something was recorded
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "without a single event" in done.stderr and str(target) in done.stderr
    assert target.read_bytes() == NOT_A_STREAM  # kept as received
    replayed = subprocess.run(
        [sys.executable, "-m", "streamfold", "replay", str(target), "--message", *provider],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=30,
        check=False,
    )
    assert replayed.returncode == 2 and replayed.stdout == ""


def test_record_command_times_from_the_first_byte(tmp_path: Path) -> None:
    """`curl ... | streamfold record`: the wait before the first byte is the writer's (the
    server's, or curl's start-up), not this stream's; the recording's clock and the fold's
    start at the first byte read, and the gaps between the chunks are kept."""
    frames = split_frames(read("anthropic/text-basic.sse"), "sse")
    groups = [b"".join(frames[:2]), b"".join(frames[2:-2]), b"".join(frames[-2:])]
    target = tmp_path / "late.sse"
    with subprocess.Popen(
        [sys.executable, "-m", "streamfold", "record", str(target), "--display"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    ) as recorder:
        assert recorder.stdin is not None
        try:
            deadline = time.monotonic() + 60
            while not target.exists():  # the recorder started up and reads its stdin
                assert time.monotonic() < deadline and recorder.poll() is None
                time.sleep(0.02)
            time.sleep(0.6)  # the first byte comes late
            for n, group in enumerate(groups):
                if n:
                    time.sleep(0.3)
                recorder.stdin.write(group)
                recorder.stdin.flush()
            out, err = recorder.communicate(timeout=60)  # (closes stdin: the end)
        finally:
            recorder.kill()
    assert recorder.returncode == 0, err
    marks = load_timing(target)
    assert marks is not None and target.read_bytes() == b"".join(groups)
    assert [end for end, _ in marks] == list(itertools.accumulate(map(len, groups)))
    first, second, third = (seconds for _, seconds in marks)
    assert first == 0.0  # the first byte, not the recorder's start
    # A sleep never runs early, but the recorder may read the first group late (a loaded
    # machine) and so stamp the next gap short of the sleep: 0.1 s of slack, far from the
    # 0.6 s late start a clock from start-up would add.
    assert 0.2 <= second < 0.3 + 1.0 and 0.5 <= third < 0.6 + 2.0
    *_, timing_line = (json.loads(line) for line in out.decode().splitlines())
    assert timing_line["type"] == "timing"
    # The first text is in the second group: its time is the gap, not the late start.
    assert 0.2 <= timing_line["time_to_first_token_s"] < 0.3 + 1.0
