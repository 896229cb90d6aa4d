"""A saved state is refused as cheaply as it is accepted, and a restored fold obeys the
limits a fold that read the stream obeys.

An unsigned state is input like a stream: what it may carry is what a fold could have
kept (parts no larger than max_part_chars, 64 skipped event names, ...), and refusing it
must cost no more than its size (a size bound, and validation that stops at the first
bad entry instead of describing a million of them).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support import IMPORTED_FROM, read

from streamfold import Limits, StateError, StreamFolder, UsageError
from streamfold.accumulator import SKIPPED_OTHER
from streamfold.state import MAX_STATE_SIZE

MiB = 1024 * 1024


def _state(rel: str, *, close: bool = False, **options: Any) -> dict[str, Any]:
    folder = StreamFolder(**options)
    folder.feed(read(rel))
    if close:
        folder.close()
    saved: dict[str, Any] = json.loads(json.dumps(folder.save_state()))
    return saved


def _finished() -> dict[str, Any]:
    """A fold of a text and a tool call, closed: every slot complete, the final message kept."""
    return _state("anthropic/text-then-tool-use-no-args.sse", close=True)


def _open() -> dict[str, Any]:
    """A fold cut inside its text: an open slot."""
    data = read("anthropic/text-basic.sse")
    folder = StreamFolder()
    folder.feed(data[: len(data) // 2])
    saved: dict[str, Any] = json.loads(json.dumps(folder.save_state()))
    assert any(not slot["complete"] for slot in saved["folder"]["accumulator"]["slots"])
    return saved


def _refused(state: Any, field: str, **options: Any) -> StateError:
    with pytest.raises(StateError) as raised:
        StreamFolder.restore(state, **options)
    assert field in raised.value.field, raised.value
    assert len(str(raised.value)) < 1_000
    return raised.value


# --- A restored fold obeys the fold's limits ------------------------------------------


def test_the_unchanged_states_restore() -> None:
    """Not vacuous: the states the tests below change are restored as they were saved."""
    for state in (_finished(), _open()):
        assert StreamFolder.restore(state).snapshot() == StreamFolder.restore(state).snapshot()


def test_a_complete_part_past_max_part_chars_is_refused() -> None:
    state = _finished()
    limit = state["folder"]["limits"]["max_part_chars"]
    assert limit == 32 * MiB  # the default: the case as a careful user would meet it
    slot = next(s for s in state["folder"]["accumulator"]["slots"] if s["part"] is not None)
    slot["part"]["content"] = "x" * (limit + 1)
    _refused(state, "slots[0].part.content")


def test_a_complete_part_past_a_smaller_limit_is_refused_and_one_at_it_restores() -> None:
    state = _state(
        "anthropic/text-then-tool-use-no-args.sse",
        close=True,
        limits=Limits(max_part_chars=1_000),
    )
    slots = state["folder"]["accumulator"]["slots"]
    slot = next(s for s in slots if s["part"] is not None)
    at_limit = copy.deepcopy(state)
    slot["part"]["content"] = "x" * 1_001
    _refused(state, "part.content")
    # The same change at the limit fails only because the final message no longer
    # matches the slots (the next check): made to match, it restores.
    part = next(s for s in at_limit["folder"]["accumulator"]["slots"] if s["part"] is not None)
    part["part"]["content"] = "x" * 1_000
    at_limit["folder"]["accumulator"]["final"]["content"][0]["content"] = "x" * 1_000
    restored = StreamFolder.restore(at_limit)
    assert restored.snapshot().content[0].content == "x" * 1_000


def test_a_streamed_option_past_the_part_limit_is_refused() -> None:
    state = _state(
        "anthropic/thinking-signature.sse", close=True, limits=Limits(max_part_chars=2_000)
    )
    slots = state["folder"]["accumulator"]["slots"]
    slot = next(s for s in slots if s["part"] is not None and "signature" in s["part"]["options"])
    slot["part"]["options"]["signature"] = "s" * 2_001
    _refused(state, "part.options.signature")


def test_a_complete_call_with_argument_text_past_its_limit_is_refused() -> None:
    state = _state(
        "anthropic/text-then-tool-use-no-args.sse",
        close=True,
        limits=Limits(max_tool_argument_chars=100),
    )
    slot = next(s for s in state["folder"]["accumulator"]["slots"] if s["call"] is not None)
    slot["call"]["arguments"] = "a" * 101
    slot["call"]["status"] = "incomplete"
    _refused(state, "call.arguments")


def test_the_final_message_must_be_the_one_the_slots_make() -> None:
    """The final message is what `snapshot()` and `close()` give back: a state could put
    anything there (a part of 40 MiB, a million metadata entries) past every slot check."""
    state = _finished()
    final = state["folder"]["accumulator"]["final"]
    for change in (
        lambda m: m["content"][0].update(content="y" * 100),
        lambda m: m["metadata"].update(skipped_events={f"e{n}": 1 for n in range(1_000)}),
        lambda m: m["content"].append(copy.deepcopy(m["content"][0])),
        lambda m: m.update(stop_reason="error"),
        lambda m: m["metadata"].update(timing={"huge": "x" * 1_000}),
    ):
        changed = copy.deepcopy(state)
        change(changed["folder"]["accumulator"]["final"])
        _refused(changed, "final")
    assert final == state["folder"]["accumulator"]["final"]


def test_skipped_event_names_are_held_to_the_documented_64() -> None:
    state = _open()
    names = {f"event_{n}": 1 for n in range(64)}
    at_most = copy.deepcopy(state)
    at_most["folder"]["accumulator"]["skipped"] = {**names, SKIPPED_OTHER: 5}
    StreamFolder.restore(at_most)  # as a fold that met 70 unknown types keeps them
    for skipped in (
        {f"event_{n}": 1 for n in range(65)},
        {f"event_{n}": 1 for n in range(1_000_000)},
        {"event_0": 1, SKIPPED_OTHER: 1},  # the rest's name before 64 others
        {"e" * 101: 1},
        {"event": 0},
    ):
        changed = copy.deepcopy(state)
        changed["folder"]["accumulator"]["skipped"] = skipped
        _refused(changed, "accumulator.skipped")


def test_repair_names_are_bounded_too() -> None:
    state = _open()
    state["folder"]["accumulator"]["repairs"] = {f"kind_{n}": 1 for n in range(65)}
    _refused(state, "accumulator.repairs")


def test_closed_keys_are_at_most_one_per_slot() -> None:
    state = _finished()
    slots = len(state["folder"]["accumulator"]["slots"])
    state["folder"]["accumulator"]["closed_keys"] = list(range(slots + 1))
    _refused(state, "accumulator.closed_keys")


# --- A size bound, checked before anything else is read --------------------------------


def test_a_state_as_json_text_restores_as_its_dict_does() -> None:
    state = _open()
    text = json.dumps(state)
    for given in (text, text.encode()):
        assert StreamFolder.restore(given).snapshot() == StreamFolder.restore(state).snapshot()


def test_a_state_past_max_size_is_refused_before_it_is_parsed() -> None:
    state = _open()
    text = json.dumps(state)
    # Past the bound, the text is not parsed at all: not JSON either, the error is the size.
    error = _refused("{" * (len(text) + 1), "", max_size=len(text))
    assert "max_size" in str(error)
    StreamFolder.restore(text, max_size=len(text))
    _refused(text, "", max_size=len(text) - 1)
    with pytest.raises(StateError, match="JSON text"):
        StreamFolder.restore("{" * 10)


def test_a_dict_state_past_max_size_is_refused_in_its_walk() -> None:
    state = _open()
    StreamFolder.restore(state, max_size=len(json.dumps(state)))
    error = _refused(state, "", max_size=1_000)
    assert "max_size" in str(error)
    # A state of default limits holding more than the default bound is refused with it.
    big = copy.deepcopy(state)
    big["folder"]["head"] = "A" * (MAX_STATE_SIZE + 4)
    _refused(big, "", max_size=None)


@pytest.mark.parametrize("max_size", [0, -1, "10", 1.5, True])
def test_a_bad_max_size_is_a_usage_error(max_size: Any) -> None:
    with pytest.raises(UsageError, match="max_size"):
        StreamFolder.restore(_open(), max_size=max_size)


# --- Refusing costs no more than accepting ----------------------------------------------

# Measured in a child process: its peak RSS before and after the restore (a million
# errors collected by pydantic took more than a GiB, allocated outside tracemalloc's view).
_COST = """
import json, resource, sys, time
from streamfold import StreamFolder, StreamfoldError

state = json.loads(sys.stdin.read())
kind = sys.argv[1]
acc = state["folder"]["accumulator"]
slot = next(s for s in acc["slots"] if not s["complete"])
if kind == "chunks_bad":
    slot["chunks"] = [1] * 1_000_000
elif kind == "chunks_good":
    slot["chunks"] = ["a"] * 1_000_000
    slot["part"]["content"] = None
elif kind == "skipped_bad":
    acc["skipped"] = {f"e{n}": -1 for n in range(1_000_000)}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    StreamFolder.restore(state)
    outcome, text = "accepted", ""
except StreamfoldError as exc:
    outcome, text = type(exc).__name__, str(exc)
seconds = time.perf_counter() - start
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"outcome": outcome, "text": text, "seconds": seconds, "grown_kib": grown}))
"""


def _cost(kind: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_COST), kind],
        input=json.dumps(_open()),
        env={**os.environ, "PYTHONPATH": IMPORTED_FROM},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_million_bad_entries_are_refused_at_the_first_in_bounded_memory() -> None:
    accepted = _cost("chunks_good")
    assert accepted["outcome"] == "accepted"
    for kind in ("chunks_bad", "skipped_bad"):
        refused = _cost(kind)
        assert refused["outcome"] == "StateError", refused
        # A state of a few megabytes: its refusal grows the process by tens of MiB at
        # most (by more than a GiB when every entry's error was collected).
        assert refused["grown_kib"] < 128 * 1024, refused
        assert len(refused["text"]) < 300 and "more)" not in refused["text"], refused["text"]


def test_a_huge_version_key_or_value_gives_a_bounded_error() -> None:
    """Found by the saved-state fuzz: the version was quoted whole, and a path holds keys."""
    state = _open()
    huge = "x" * 1_000_000
    versioned = {**state, "streamfold_state": huge}
    keyed = copy.deepcopy(state)
    keyed["folder"]["accumulator"]["slots"][0]["streamed"] = {huge: ["a"]}
    deep_key = copy.deepcopy(state)
    deep_key["folder"]["accumulator"]["metadata"] = {huge: {"\ud800": 1}}
    for bad in (versioned, keyed, deep_key):
        with pytest.raises(StateError) as raised:
            StreamFolder.restore(bad)
        assert len(str(raised.value)) < 2_000


def test_restore_limits_refuse_a_state_that_chose_larger_ones() -> None:
    """An unsigned state carries its own limits: the restorer can hold it to its own."""
    state = _open()
    StreamFolder.restore(state, limits=Limits())  # saved with the defaults: within them
    raised = copy.deepcopy(state)
    raised["folder"]["limits"]["max_part_chars"] = 2**40
    StreamFolder.restore(raised)  # without a bound, the state's own limits hold
    error = _refused(raised, "folder.limits.max_part_chars", limits=Limits())
    assert str(32 * MiB) in str(error)
    _refused(state, "folder.limits.max_parts", limits=Limits(max_parts=1))
    with pytest.raises(UsageError, match="limits"):
        StreamFolder.restore(state, limits={"max_parts": 1})
