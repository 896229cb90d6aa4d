"""Stream timing: when the chunks of a fold arrived, in `Fold.timing` and `MessageCompleted.timing`.

Each fold here gets its own clock: the recorded arrival times through `replay_clock`, or
the real monotonic clock (the default) for a replay at speed 1.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import jiter
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import ALL_RECORDINGS, REAL, read, replayed

import streamfold.timing
from streamfold import (
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartStarted,
    ToolCall,
    afold,
    fold,
)
from streamfold.cli import main
from streamfold.record import load_timing, schedule, split_frames, tee
from streamfold.recording import detect_recording
from streamfold.timing import StreamTiming, replay_clock

# How close a replay at speed 1 comes to the time to first token it recorded (docs/api/timing.md,
# "Timing"): a sleep may run late on a loaded machine, never early.
REPLAY_TOLERANCE_S = 0.25

STEP = 0.125  # seconds between the events of a scripted stream (exact in binary)


def _events(rel: str) -> list[bytes]:
    data = read(rel)
    kind, _ = detect_recording(data)
    assert kind is not None
    return split_frames(data, kind)


def _timed(chunks: list[Any]) -> tuple[Iterator[Any], Any]:
    """The chunks, chunk n arriving at n * STEP seconds, and the clock that says so."""
    clock, arrive = replay_clock([n * STEP for n in range(len(chunks))])

    def arriving() -> Iterator[Any]:
        for n, chunk in enumerate(chunks):
            arrive(n)
            yield chunk

    return arriving(), clock


def _gives_content(event: Any) -> bool:
    """A delta with text, or a part that completed holding content it never streamed (a
    tool call's input sent whole, or empty: `{}`)."""
    if isinstance(event, PartDelta):
        return bool(event.content)
    if isinstance(event, PartCompleted):
        if isinstance(event.part, ToolCall):
            return event.part.arguments not in (None, "")
        return bool(event.part.content)
    return False


def _by_events(chunks: list[Any]) -> dict[str, Any]:
    """The timing read off the events as each chunk gives them (n * STEP each)."""
    events_of: list[tuple[float, Any]] = []
    stream, clock = _timed(chunks)
    run = fold(stream, clock=clock, started_at=0.0)
    for event in run:
        events_of.append((clock(), event))
    first_token = next((t for t, e in events_of if _gives_content(e)), None)

    starts = {e.index: t for t, e in events_of if isinstance(e, PartStarted)}
    ends = {e.index: t for t, e in events_of if isinstance(e, PartCompleted)}
    completed = next(e for _, e in events_of if isinstance(e, MessageCompleted))
    final, timing = completed.message, completed.timing
    assert "timing" not in final.metadata  # the Message holds no wall-clock fact
    assert timing == run.timing.as_dict()
    return {
        "timing": timing,
        "first_token": first_token,
        "total": events_of[-1][0],
        "parts": [{"index": i, "start_s": starts[i], "end_s": ends.get(i)} for i in sorted(starts)],
        "message": final,
    }


@pytest.mark.parametrize("rel", ALL_RECORDINGS)
def test_timing_is_when_the_chunks_arrived(rel: str) -> None:
    seen = _by_events(_events(rel))
    timing = seen["timing"]
    assert timing["time_to_first_byte_s"] == 0.0
    assert timing["time_to_first_token_s"] == seen["first_token"]
    assert timing["total_s"] == seen["total"]
    assert timing["parts"] == seen["parts"]
    message = seen["message"]
    tokens = message.usage.output_tokens if message.usage else None
    assert timing["output_tokens"] == tokens
    if (
        tokens is not None
        and seen["first_token"] is not None
        and seen["total"] > seen["first_token"]
    ):
        rate = tokens / (seen["total"] - seen["first_token"])
        assert timing["output_tokens_per_s"] == pytest.approx(rate, rel=1e-3)
    else:
        assert timing["output_tokens_per_s"] is None


def _payloads(rel: str) -> list[Any]:
    out = []
    for line in read(rel).splitlines():
        data = line[5:].strip() if line.startswith(b"data:") else line.strip()
        if data.startswith(b"{"):
            out.append(jiter.from_json(data))
    return out


DICT_RECORDINGS = [rel for rel in ALL_RECORDINGS if rel.endswith((".sse", ".ndjson"))]


@pytest.mark.parametrize("rel", DICT_RECORDINGS)
def test_decoded_dicts_time_as_their_bytes_do(rel: str) -> None:
    """The dict lane (fold_objects) notes the same moments as the bytes, event by event."""
    payloads = _payloads(rel)
    frames = [f for f in _events(rel) if jiter.from_json(_data(f) or b"null") is not None]
    dicts = _by_events(payloads)["timing"]
    frames_timing = _by_events(frames)["timing"]
    assert len(frames) == len(payloads)
    assert dicts == frames_timing


def _data(frame: bytes) -> bytes | None:
    for line in frame.splitlines():
        if line.startswith(b"data:"):
            data = line[5:].strip()
            return data if data.startswith(b"{") else None
    return frame.strip() if frame.strip().startswith(b"{") else None


@pytest.mark.parametrize(
    "rel", ["anthropic/thinking-then-tool-use.sse", "gemini/function-call-streamed-args.sse"]
)
def test_afold_times_as_fold_does(rel: str) -> None:
    chunks = _events(rel)
    expected = _by_events(chunks)["timing"]

    async def main_() -> dict[str, Any]:
        clock, arrive = replay_clock([n * STEP for n in range(len(chunks))])

        async def arriving() -> AsyncIterator[bytes]:
            for n, chunk in enumerate(chunks):
                arrive(n)
                yield chunk

        run = afold(arriving(), clock=clock, started_at=0.0)
        async for event in run:
            if isinstance(event, MessageCompleted):
                assert event.timing is not None
                return dict(event.timing)
        raise AssertionError("no MessageCompleted")

    assert anyio.run(main_) == expected


def test_a_consumer_that_stops_gets_the_timing_so_far() -> None:
    chunks = _events("anthropic/thinking-then-tool-use.sse")
    stream, clock = _timed(chunks)
    run = fold(stream, clock=clock, started_at=0.0)
    for event in run:
        if isinstance(event, PartDelta) and event.content:
            break
    message = run.snapshot()
    assert message.status == "cancelled"
    timing = run.timing.as_dict()
    assert timing["time_to_first_token_s"] == timing["total_s"] == run.timing.total_s
    assert timing["parts"][-1]["end_s"] == timing["total_s"]  # cut where it stopped


def test_started_at_counts_from_the_request() -> None:
    chunks = _events("anthropic/text-basic.sse")
    stream, clock = _timed(chunks)
    run = fold(stream, clock=clock, started_at=-0.5)  # the request went 0.5 s earlier
    list(run)
    assert run.timing.time_to_first_byte_s == 0.5


def test_the_timing_attribute_is_read_only() -> None:
    run = fold(read("anthropic/text-basic.sse"))
    with pytest.raises(AttributeError):
        run.timing.time_to_first_token_s = 1.0  # type: ignore[misc]
    assert isinstance(run.timing, StreamTiming)


def test_replay_display_ends_with_the_recorded_timing(capsys: pytest.CaptureFixture[str]) -> None:
    rel = "anthropic/thinking-then-tool-use.sse"
    assert main(["replay", str(REAL / rel), "--display", "--speed", "0"]) == 0
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    # No sidecar: an event every EVENT_INTERVAL (20 ms); the first text is the fourth event.
    run = replayed(rel)
    list(run)
    assert last == {
        "type": "timing",
        "time_to_first_token_s": run.timing.time_to_first_token_s,
        "output_tokens_per_s": run.timing.output_tokens_per_s,
        "total_s": run.timing.total_s,
    }
    assert last["time_to_first_token_s"] == 0.06


def test_a_recording_replayed_at_speed_1_keeps_its_time_to_first_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Record a stream whose first token comes 0.4 s in, replay it at speed 1 with the
    real clock: the time to first token is the recorded one, within REPLAY_TOLERANCE_S."""
    frames = _events("anthropic/text-basic.sse")
    first_text = next(
        n for n, f in enumerate(frames) if b"text_delta" in f and b'"text":""' not in f
    )

    def live() -> Iterator[bytes]:
        for n, frame in enumerate(frames):
            if n == first_text:
                time.sleep(0.4)
            yield frame

    path = tmp_path / "slow.sse"
    recorded = tee(live(), path)
    list(recorded)
    recorded_ttft = recorded.timing.time_to_first_token_s
    assert recorded_ttft is not None and recorded_ttft >= 0.4

    data = path.read_bytes()

    def paced() -> Iterator[bytes]:
        for wait, chunk in schedule(data, "sse", speed=1, timing=load_timing(path)):
            if wait > 0:
                time.sleep(wait)
            yield chunk

    replayed = fold(paced())
    list(replayed)
    ttft = replayed.timing.time_to_first_token_s
    assert ttft is not None
    assert abs(ttft - recorded_ttft) <= REPLAY_TOLERANCE_S


def _claiming_output_tokens(count: int) -> list[dict[str, Any]]:
    """An Anthropic stream (as decoded dicts) whose usage claims `count` output tokens."""
    return [
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [],
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": count},
        },
        {"type": "message_stop"},
    ]


def test_a_token_count_no_float_holds_gives_no_rate() -> None:
    """A stream may claim any count: past ~1e308 the rate (and the time per token) would
    raise OverflowError out of the fold; they are None instead."""
    stream, clock = _timed(_claiming_output_tokens(10**400))
    run = fold(stream, "anthropic", clock=clock, started_at=0.0)
    completed = [e for e in run if isinstance(e, MessageCompleted)][-1]
    message = completed.message
    assert message.usage is not None and message.usage.output_tokens == 10**400
    assert run.timing.total_s is not None and run.timing.time_to_first_token_s is not None
    assert run.timing.total_s > run.timing.time_to_first_token_s  # a rate would be computed
    assert run.timing.output_tokens_per_s is None
    assert completed.timing is not None and completed.timing["output_tokens_per_s"] is None
    # A count a float holds still gives its rate.
    stream, clock = _timed(_claiming_output_tokens(1000))
    run = fold(stream, "anthropic", clock=clock, started_at=0.0)
    list(run)
    assert run.timing.output_tokens_per_s is not None and run.timing.output_tokens_per_s > 0


# Times to check the quick rounding against: whole and half microseconds, a few floats
# either side of each (the ties round cares about), and times past its quick range.
_HALVES = [k / 2e6 for k in (0, 1, 2, 3, 5, 2**20 + 1, 2**37 - 1, 2**37 + 1, 2**45 + 1)]
_NEAR = [math.nextafter(t, t + d) for t in _HALVES for d in (-1.0, 1.0)]


@pytest.mark.parametrize(
    "seconds", [*_HALVES, *_NEAR, 0.1234565, 1.0000005, 68719.4767355, 1e9, 1e300, math.inf]
)
def test_times_round_to_the_microsecond_as_round_does(seconds: float) -> None:
    assert streamfold.timing._round_us(seconds) == round(seconds, 6)


@given(st.floats(min_value=0.0, max_value=1e12, allow_nan=False))
def test_any_time_rounds_to_the_microsecond_as_round_does(seconds: float) -> None:
    rounded = streamfold.timing._round_us(seconds)
    assert rounded == round(seconds, 6)
    assert math.copysign(1.0, rounded) == 1.0  # (0.0, never -0.0)


# --- two folds of the same bytes are equal ------------------------------------------------


@pytest.mark.parametrize(
    "rel", ["anthropic/thinking-then-tool-use.sse", "gemini/function-call-thought-signature.sse"]
)
def test_two_folds_of_the_same_bytes_are_equal_with_nothing_patched(rel: str) -> None:
    """The same bytes, arriving at once and then slowly on the real clock: equal Messages
    and equal events; the timing, different, is the final event's and the fold's."""
    frames = _events(rel)

    def slowly() -> Iterator[bytes]:
        for frame in frames:
            time.sleep(0.002)
            yield frame

    fast_run, slow_run = fold(list(frames)), fold(slowly())
    fast, slow = list(fast_run), list(slow_run)
    assert fast == slow
    fast_end, slow_end = fast[-1], slow[-1]
    assert isinstance(fast_end, MessageCompleted) and isinstance(slow_end, MessageCompleted)
    assert fast_end.message.model_dump_json() == slow_end.message.model_dump_json()
    assert "timing" not in slow_end.message.metadata
    # The timing is kept where it belongs: on the fold and on the final event.
    assert slow_end.timing == slow_run.timing.as_dict() != fast_end.timing
    assert slow_run.timing.total_s is not None and slow_run.timing.total_s >= 0.002 * len(frames)
    assert fast_end == slow_end
    assert "timing" not in repr(slow_end)
    match slow_end:
        case MessageCompleted(message):
            assert message is slow_end.message


def test_the_final_event_keeps_its_timing_through_pickle_and_copy() -> None:
    import copy
    import pickle

    *_, end = fold(read("anthropic/text-basic.sse"))
    assert isinstance(end, MessageCompleted) and end.timing is not None
    for again in (pickle.loads(pickle.dumps(end)), copy.deepcopy(end)):
        assert isinstance(again, MessageCompleted)
        assert again == end and again.timing == end.timing
