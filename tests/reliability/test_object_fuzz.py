"""Hostile decoded dicts and SDK objects: the fuzz that holds the bytes door, on the others.

Every recording is turned into the decoded event dicts an SDK hands over, mutated at the
event level (drop, duplicate, swap, move, truncate, replay) and the value level (replace,
delete or insert a key or an item with any value: the bytes fuzz's hostile JSON, lone
surrogates, NaN and infinities, integers past any size, nesting hundreds or thousands
deep, types JSON has not), then folded as dicts (the dict lane of `fold()`, or `feed()`
dict by dict) or as the official SDK's event objects (anthropic and openai events built
as their SDKs build them from the wire, google-genai responses). The property is the
bytes fuzz's (tests/reliability/test_fuzz.py): only StreamfoldError escapes; a StreamProtocolError
or StreamLimitError carries `.partial` and its text never raises; the events follow each
part's lifecycle; every completed part is kept; the message stays within its Limits and
within a bound of its input, and serialises.

`STREAMFOLD_OBJECT_FUZZ_EXAMPLES` sets the number of examples (300: a smoke of seconds);
`fuzz/fuzz_fold.py --objects --random N` is the long run without Hypothesis.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reliability.test_fuzz import (
    ALL,
    COUNTS,
    Chooser,
    HypothesisChooser,
    Mode,
    _deep,
    _get,
    _paths,
    _strings,
    as_dicts,
    check_bounded,
    draw_mode,
    hostile_value,
    parse,
    provider_of,
    reorder,
    run_cancel,
    run_fold,
)
from streamfold import StreamfoldError, StreamLimitError, StreamProtocolError

EXAMPLES = int(os.environ.get("STREAMFOLD_OBJECT_FUZZ_EXAMPLES", "300"))


# --- hostile values a decoded dict (never bytes) can hold -------------------------------------


class _Opaque:
    """An object of no JSON type whose repr raises: nothing may rely on either."""

    def __repr__(self) -> str:
        raise RuntimeError("repr refused")


def object_value(c: Chooser, stream: Any) -> Any:
    """Any value: the bytes fuzz's hostile JSON, or what only a decoded dict can hold."""
    kind = c.integer(0, 6)
    if kind == 0:
        return hostile_value(c, stream)
    if kind == 1:
        return c.choice(["\ud800", "a\udfffb", "\ud83d", {"\udc00": 1}, ["x", "\ud800"]])
    if kind == 2:
        return c.choice([math.nan, math.inf, -math.inf, [math.nan], {"x": -math.inf}])
    if kind == 3:
        return c.choice([10**400, -(10**400), 2**64, 2**63 - 1, -(2**63) - 1])
    if kind == 4:
        depth = c.choice([200, 300, 1200, 3000])
        return _deep(depth, c.choice([None, "x", {}, math.nan]), c.boolean())
    if kind == 5:
        return c.choice([b"\x00\xffbytes", (1, "a"), {1, 2}, {1: "int key"}, {None: 1}, _Opaque()])
    return c.choice(_strings(stream))


def _copy(value: Any) -> Any:
    """A copy of a decoded payload (json is the fastest deep copy); the value itself
    when it is no plain JSON (a mutation put something else in it)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return value


def mutate_objects(stream: Any, c: Chooser) -> tuple[list[Any], list[str]]:
    """1-4 mutations of the stream's decoded dicts; say which."""
    events: list[Any] = [_copy(d) for d in as_dicts(stream)]
    done: list[str] = []
    for _ in range(c.integer(1, 4)):
        n = len(events)
        if n == 0:
            break
        i = c.integer(0, n - 1)
        op = c.integer(0, 11)
        if op <= 5:
            done.append(reorder(events, op, i, c))  # (a duplicate is the same dict)
        elif op == 6 and c.integer(0, 9) == 0:
            events[i] = object_value(c, stream)
            done.append(f"event {i} := {_short(events[i])}")
        else:
            event = events[i]
            if not isinstance(event, dict | list) or not event:
                continue
            paths = _paths(event)
            path = c.choice(paths)
            *parent, last = path
            container = _get(event, tuple(parent))
            if op in (7, 8) and isinstance(container, dict):
                del container[last]
                done.append(f"remove {i}{list(path)}")
            elif op == 9 and isinstance(container, dict):
                key = c.choice([*_strings(stream), "\ud800", "type", "index", "delta"])
                container[key] = object_value(c, stream)
                done.append(f"insert {i}{[*parent, key]} := {_short(container[key])}")
            elif op == 10 and isinstance(container, list):
                container.insert(c.integer(0, len(container)), object_value(c, stream))
                done.append(f"insert into {i}{parent}")
            else:
                container[last] = object_value(c, stream)
                done.append(f"{i}{list(path)} := {_short(container[last])}")
    return events, done


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except (RuntimeError, RecursionError):
        return type(value).__name__
    return text if len(text) < 60 else text[:57] + "..."


def weight(value: Any) -> int:
    """About the JSON size of `value` (any Python value, any depth): the input size the
    message's size is bounded by."""
    total = 0
    stack = [value]
    while stack:  # no recursion: the value may be thousands deep
        item = stack.pop()
        if isinstance(item, dict):
            total += 2 + 2 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set):
            total += 2 + len(item)
            stack.extend(item)
        elif isinstance(item, str | bytes):
            total += len(item) + 2
        else:
            total += 8
    return total


# --- SDK objects, built as each SDK builds them from the wire ----------------------------------


@cache
def _sdk_builders() -> dict[str, Callable[[dict[str, Any]], Any]]:
    from anthropic._models import construct_type as anthropic_construct
    from anthropic.types import RawMessageStreamEvent
    from google.genai.types import GenerateContentResponse
    from openai._models import construct_type as openai_construct
    from openai.types.chat import ChatCompletionChunk
    from openai.types.responses import ResponseStreamEvent

    def gemini(payload: dict[str, Any]) -> Any:
        # google-genai validates what it reads: what it refuses never reaches a fold.
        return GenerateContentResponse._from_response(response=payload, kwargs={})

    return {
        # The anthropic and openai SDKs build stream events without validation.
        "anthropic": lambda p: anthropic_construct(type_=RawMessageStreamEvent, value=p),
        "openai-chat": lambda p: openai_construct(type_=ChatCompletionChunk, value=p),
        "openai-responses": lambda p: openai_construct(type_=ResponseStreamEvent, value=p),
        "gemini": gemini,
    }


def as_sdk_objects(provider: str, events: list[Any]) -> list[Any] | None:
    """The events as the provider's SDK hands them over; None: no SDK types for it."""
    build = _sdk_builders().get(provider)
    if build is None:
        return None
    out: list[Any] = []
    for event in events:
        if not isinstance(event, dict):
            out.append(event)
            continue
        try:
            out.append(build(_copy(event)))  # (an SDK may change what it reads)
        except Exception:
            # The SDK itself refuses it (a ValidationError, its own RuntimeError...): the
            # caller would never get an object to feed.
            continue
    return out


# --- the property --------------------------------------------------------------------------


def run_objects(chunks: list[Any], mode: Mode, size: int) -> None:
    outcome = run_fold(chunks, mode)
    error = outcome.error
    if isinstance(error, StreamProtocolError | StreamLimitError):
        assert error.partial is not None
        assert str(error)  # an error's text never raises
    check_bounded(outcome, size)


def fuzz_objects(rel: str, c: Chooser) -> list[str]:
    """One object-level mutation of `rel`, folded as dicts or as SDK objects."""
    stream = parse(rel)
    events, done = mutate_objects(stream, c)
    mode = draw_mode(rel, c)
    size = weight(events)
    provider = provider_of(rel)
    sdk = as_sdk_objects(provider, events) if c.boolean() else None
    if sdk is not None:
        run_objects(sdk, mode, size)
        COUNTS["sdk-objects"] = COUNTS.get("sdk-objects", 0) + 1
        done.append("as SDK objects")
    else:
        run_objects(events, mode, size)
        COUNTS["object-dicts"] = COUNTS.get("object-dicts", 0) + 1
    if c.integer(0, 3) == 0:
        run_cancel(events[: c.integer(0, len(events))], mode)
    return [*done, repr(mode)]


# --- the tests -----------------------------------------------------------------------------


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
    print_blob=True,
)
@given(rel=st.sampled_from(ALL), data=st.data())
def test_object_mutations_only_raise_streamfold_errors(rel: str, data: st.DataObject) -> None:
    done = fuzz_objects(rel, HypothesisChooser(data))
    data.draw(st.just(done), label="mutations")


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses", "gemini"])
def test_unmutated_sdk_objects_fold_as_their_dicts(provider: str) -> None:
    """The SDK door gives what the dict door gives, on every recording of the provider."""
    from streamfold import fold_message
    from streamfold.fold import _sdk_payload

    folded = 0
    for rel in ALL:
        if rel.endswith(".eventstream") or provider_of(rel) != provider:
            continue
        dicts = as_dicts(parse(rel))
        objects = as_sdk_objects(provider, dicts)
        assert objects is not None
        if len(objects) != len(dicts) or [_sdk_payload(o) for o in objects] != dicts:
            continue  # the SDK refuses one of the recorded events, or drops a field
        try:
            expected: Any = fold_message(dicts, provider)
        except StreamfoldError as exc:
            expected = type(exc)
        try:
            got: Any = fold_message(objects, provider)
        except StreamfoldError as exc:
            got = type(exc)
        assert got == expected, rel
        folded += 1
    assert folded


# Seeds of `fuzz_fold.py --objects --random` that failed before their fix (in order: a
# non-str key, bytes beside a lane delta, a citation 200 deep, and logprobs that grew
# after their part's options were checked, through the list the decoder shared).
FOUND = [100231, 117619, 222437, 466146]


@pytest.mark.parametrize("found", FOUND)
def test_the_seeds_the_long_run_found_pass(found: int) -> None:
    import random

    from reliability.test_fuzz import RandomChooser

    chooser = RandomChooser(random.Random(found))
    fuzz_objects(chooser.choice(ALL), chooser)
