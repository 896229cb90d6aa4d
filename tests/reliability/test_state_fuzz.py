"""Hostile saved states: `StreamFolder.restore` given a recording's state, mutated.

An unsigned state is input like a stream. Each recording is folded to a cut (or to its
end), saved, and the state changed: a string grown past the fold's limits, a list or dict
member repeated up to 200,000 times (as it is, or made invalid), a value replaced by the
object fuzz's hostile JSON (nesting up to 70,000 deep, huge strings, lone surrogates), a
count or a limit bumped, or the state's JSON text cut or given as text past `max_size`.

The property: `restore` raises a `StateError` (its text bounded and never raising) or
gives a fold that obeys the limits it carries (its snapshot within them, readable back
from JSON) and then folds the rest of the recording raising only `StreamfoldError`s.
Run on the compiled build too (the suite runs whole there): a crash fails the run.

`STREAMFOLD_STATE_FUZZ_EXAMPLES` sets the number of examples (default 150);
`fuzz/fuzz_fold.py --random N --states` runs it seeded, without Hypothesis.
"""

from __future__ import annotations

import copy
import json
import os
from functools import cache
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ALL_RECORDINGS, read

from reliability.test_fuzz import Chooser, HypothesisChooser, _get, _paths, check_limits
from streamfold import Limits, Message, StateError, StreamFolder, StreamfoldError

EXAMPLES = int(os.environ.get("STREAMFOLD_STATE_FUZZ_EXAMPLES", "150"))
# Text recordings only: the state of a binary eventstream fold is the same boxes.
RECORDINGS = [rel for rel in ALL_RECORDINGS if not rel.endswith(".eventstream")]
# The limits the mutated folds carry: small, so a string grown past one stays small.
_LIMITS = Limits(max_parts=40, max_part_chars=4_000, max_tool_argument_chars=2_000)
COUNTS: dict[str, int] = {"refused": 0, "resumed": 0}


@cache
def _saved(rel: str, cut_eighths: int) -> str:
    """The JSON text of `rel`'s state at a cut (eighths of the recording; 8: closed)."""
    data = read(rel)
    folder = StreamFolder(limits=_LIMITS)
    try:
        folder.feed(data[: len(data) * cut_eighths // 8])
        if cut_eighths == 8:
            folder.close()
    except StreamfoldError:
        pass  # the fold refused the recording under the small limits: its state as it is
    return json.dumps(folder.save_state())


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _hostile(c: Chooser) -> Any:
    kind = c.integer(0, 8)
    if kind == 0:
        return _deep(c.choice([150, 201, 2_000, 70_000]))
    if kind == 1:
        return "x" * c.choice([4_001, 70_000, 1_000_000])
    if kind == 2:
        return "\ud800"
    if kind == 3:
        return c.choice([-1, 0, 2**62, 2**62 + 1, 10**400])
    if kind == 4:
        return c.choice([None, True, 1.5, "", [], {}])
    if kind == 5:
        return {f"k{n}": n for n in range(c.choice([65, 1_000, 100_000]))}
    if kind == 6:
        return [c.choice([1, "a", None, {}])] * c.choice([65, 10_000, 200_000])
    if kind == 7:
        return {"type": "text", "content": "y" * c.choice([10, 5_000])}
    return c.choice(["anthropic", "text", "tool_call", "complete", "(other types)"])


def mutate_state(state: dict[str, Any], c: Chooser) -> tuple[Any, list[str]]:
    """One mutation of a saved state (changed in place, or a new value to restore)."""
    places = _paths(state)
    how = c.integer(0, 5)
    if how == 0:  # a string grown past the limits
        strings = [p for p in places if isinstance(_get(state, p), str)] or places
        place = c.choice(strings)
        grown = "z" * c.choice([2_001, 4_001, 40_000])
        _get(state, place[:-1])[place[-1]] = grown
        return state, [f"grow {place}"]
    if how == 1:  # a member repeated, as it is or made invalid
        containers = [p for p in places if isinstance(_get(state, p), list | dict)]
        if not containers:
            return state, ["none"]
        place = c.choice(containers)
        node = _get(state, place)
        times = c.choice([65, 1_000, 200_000])
        bad = c.boolean()
        if isinstance(node, list):
            member = node[0] if node and not bad else c.choice([-1, None, {"x": 1}, "a"])
            node.extend([member] * times)
        else:
            first = next(iter(node.values()), 1)
            node.update({f"m{n}": (-1 if bad else first) for n in range(times)})
        return state, [f"repeat {place} x{times} bad={bad}"]
    if how == 2:  # any value replaced by a hostile one
        place = c.choice(places)
        _get(state, place[:-1])[place[-1]] = _hostile(c)
        return state, [f"replace {place}"]
    if how == 3:  # a count or limit bumped
        numbers = [p for p in places if type(_get(state, p)) is int] or places
        place = c.choice(numbers)
        _get(state, place[:-1])[place[-1]] = c.choice([0, 1, 64, 65, 10**6, 2**62])
        return state, [f"number {place}"]
    if how == 4:  # skipped names or repairs added
        acc = state["folder"]["accumulator"]
        field = c.choice(["skipped", "repairs"])
        acc[field] = {f"e{n}": 1 for n in range(c.choice([64, 65, 100_000]))}
        return state, [f"names {field}"]
    text = json.dumps(state)  # as JSON text: cut, or past max_size
    if c.boolean():
        return text[: c.integer(0, len(text))], ["text cut"]
    return text + " " * c.integer(1, 64), ["text padded"]


def fuzz_state(rel: str, c: Chooser) -> list[str]:
    """One mutated state of `rel`, restored and (if restored) folded to the end."""
    cut = c.integer(1, 8)
    state = json.loads(_saved(rel, cut))
    mutated, done = mutate_state(state, c)
    max_size = len(_saved(rel, cut)) + 32 if done == ["text padded"] else None
    try:
        folder = StreamFolder.restore(mutated, max_size=max_size)
    except StreamfoldError as exc:
        assert isinstance(exc, StateError), repr(exc)
        assert len(str(exc)) < 2_000, str(exc)[:500]
        COUNTS["refused"] += 1
        return [*done, "refused"]
    restored_limits = _restored_limits(mutated)
    snapshot = folder.snapshot()
    check_limits(snapshot, restored_limits)
    _check_message(snapshot, restored_limits)
    data = read(rel)
    try:
        folder.feed(data[len(data) * cut // 8 :])
        folder.close()
    except StreamfoldError as exc:
        assert str(exc)  # its text never raises
    final = folder.snapshot()
    check_limits(final, restored_limits)
    _check_message(final, restored_limits)
    COUNTS["resumed"] += 1
    return [*done, "resumed"]


def _restored_limits(mutated: Any) -> Limits:
    state = json.loads(mutated) if isinstance(mutated, str) else mutated
    return Limits(**state["folder"]["limits"])


def _check_message(message: Message, limits: Limits) -> None:
    skipped = message.metadata.get("skipped_events", {})
    assert len(skipped) <= 65 and all(len(name) <= 100 for name in skipped)
    assert len(message.metadata.get("repairs", {})) <= 64
    assert Message.model_validate_json(message.model_dump_json()) == message


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rel=st.sampled_from(RECORDINGS), data=st.data())
def test_a_mutated_state_is_refused_or_resumes_within_its_limits(
    rel: str, data: st.DataObject
) -> None:
    done = fuzz_state(rel, HypothesisChooser(data))
    data.draw(st.just(done), label="mutation")


def test_the_unmutated_states_resume() -> None:
    """The control: unchanged, every state restores and folds on."""
    for rel in RECORDINGS[::5]:
        for cut in (3, 8):
            folder = StreamFolder.restore(_saved(rel, cut))
            check_limits(folder.snapshot(), _LIMITS)


def test_a_copy_of_the_state_is_not_changed_by_a_restore() -> None:
    """restore reads a state, never writes it (the fuzz reuses the cached text)."""
    state = json.loads(_saved(RECORDINGS[0], 4))
    before = copy.deepcopy(state)
    StreamFolder.restore(state)
    assert state == before
