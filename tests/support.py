"""Shared test helpers: the recorded fixtures and golden Messages."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

import streamfold
from streamfold import (
    ContentPart,
    DisplayItem,
    Event,
    Message,
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartMarked,
    StreamFolder,
    StreamfoldError,
    fold,
)
from streamfold.fold import Fold
from streamfold.limits import Limits

# Where the streamfold under test is imported from (src/, or an installed compiled wheel):
# a subprocess given it as PYTHONPATH runs the same build.
IMPORTED_FROM = str(Path(streamfold.__file__).resolve().parent.parent)

TESTS = Path(__file__).parent
REAL = TESTS / "fixtures" / "real"
GOLDEN = TESTS / "golden"
INDEX: list[dict[str, Any]] = json.loads((REAL / "INDEX.json").read_text())

# Set STREAMFOLD_UPDATE_GOLDEN=1 to (re)write goldens; then check each by hand against
# its raw stream before committing it.
UPDATE = os.environ.get("STREAMFOLD_UPDATE_GOLDEN") == "1"


def recordings(*dirs: str) -> list[str]:
    """Relative paths (as in INDEX.json) of the recordings under the given provider dirs."""
    return sorted(e["file"] for e in INDEX if not dirs or e["file"].split("/")[0] in dirs)


# The binary Bedrock twins of the NDJSON recordings (not in INDEX.json), relative paths.
EVENTSTREAMS = sorted(str(p.relative_to(REAL)) for p in (REAL / "bedrock").glob("*.eventstream"))
# Every recording, text and binary.
ALL_RECORDINGS = [*recordings(), *EVENTSTREAMS]


def entry(rel: str) -> dict[str, Any]:
    """The INDEX.json entry of a recording."""
    return next(e for e in INDEX if e["file"] == rel)


def read(rel: str) -> bytes:
    """The raw bytes of a recording."""
    return (REAL / rel).read_bytes()


def message_json(message: Message | dict[str, Any] | str | bytes) -> dict[str, Any]:
    """A Message as JSON (nothing left out: the timing is the final event's, not the
    Message's, so a replay and a live fold of the same bytes give the same JSON)."""
    if isinstance(message, Message):
        data: dict[str, Any] = json.loads(message.model_dump_json())
    elif isinstance(message, str | bytes):
        data = json.loads(message)
    else:
        data = json.loads(json.dumps(message))
    return data


def replayed(rel: str) -> Fold:
    """A recording folded as `streamfold replay` and the demo page fold it: event by event,
    timed by its recorded arrival times (an event every EVENT_INTERVAL without a sidecar)."""
    from streamfold.record import arrival_times, schedule
    from streamfold.recording import detect_recording
    from streamfold.timing import replay_clock

    data = read(rel)
    kind, _ = detect_recording(data)
    assert kind is not None
    clock, arrive = replay_clock(arrival_times(data, kind))

    def chunks() -> Iterator[bytes]:
        for n, (_, chunk) in enumerate(schedule(data, kind, speed=0)):
            arrive(n)
            yield chunk

    return fold(chunks(), clock=clock, started_at=0.0)


def golden_path(rel: str) -> Path:
    return GOLDEN / (rel + ".json")


def assert_golden(rel: str, message: Message) -> None:
    """Compare a folded Message with its committed golden JSON (or write it when updating)."""
    path = golden_path(rel)
    actual = message_json(message)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
        return
    assert path.exists(), f"no golden for {rel}: run with STREAMFOLD_UPDATE_GOLDEN=1 and check it"
    expected = json.loads(path.read_text())
    assert actual == expected


def final_message(events: list[Event]) -> Message:
    """The Message of the last MessageCompleted event."""
    done = [e for e in events if isinstance(e, MessageCompleted)]
    assert len(done) == 1, f"expected one MessageCompleted, got {len(done)}"
    return done[0].message


def fold_bytes(
    data: bytes, pieces: list[int] | None = None, provider: str | None = None
) -> list[Event]:
    """Fold `data` split at the given cut points (None: whole)."""
    if pieces is None:
        chunks = [data]
    else:
        cuts = [0, *sorted(set(p for p in pieces if 0 < p < len(data))), len(data)]
        chunks = [data[a:b] for a, b in itertools.pairwise(cuts)]
    return list(fold(chunks, provider))


def coalesce(events: list[Event]) -> list[tuple[Any, ...]]:
    """Part events with adjacent deltas of one part merged, for chunking comparisons."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, PartDelta):
            if out and out[-1][0] == "delta" and out[-1][1] == e.index:
                _, index, content, options = out[-1]
                merged_options = dict(options)
                for k, v in (e.options or {}).items():
                    merged_options[k] = merged_options.get(k, "") + v if isinstance(v, str) else v
                out[-1] = ("delta", index, (content or "") + (e.content or ""), merged_options)
            else:
                out.append(("delta", e.index, e.content, dict(e.options or {})))
        else:
            out.append((e.type, repr(e)))
    return out


# --- the SSE hot lane: folds with and without it must be the same -------------


@contextlib.contextmanager
def hot_lane_off() -> Iterator[None]:
    """Every decoder's SSE hot lane switched off: the framer and decode() take all.

    A compiled fold reads `sse_hot_head` natively, past the class attribute set here: the
    lane is also told to start never (hot_lane_from), which a compiled fold does read.
    """
    from streamfold.providers import anthropic, openai_chat, openai_responses

    classes = [
        anthropic.AnthropicDecoder,
        openai_chat.OpenAIChatDecoder,
        openai_responses.OpenAIResponsesDecoder,
    ]
    saved = [cls.__dict__.get("sse_hot_head") for cls in classes]
    try:
        for cls in classes:
            cls.sse_hot_head = None
        with hot_lane_from(sys.maxsize):
            yield
    finally:
        for cls, head in zip(classes, saved, strict=True):
            if head is None:
                with contextlib.suppress(AttributeError):
                    del cls.sse_hot_head
            else:
                cls.sse_hot_head = head


# --- the decoders' fast paths: folds with and without them must be the same ---------


@contextlib.contextmanager
def full_path_only() -> Iterator[None]:
    """The decoders' fast paths switched off: their full paths alone."""
    from streamfold.providers import anthropic, openai_chat
    from streamfold.providers.base import Decoder
    from streamfold.providers.bedrock_invoke import decode as bedrock_invoke
    from streamfold.providers.openai_responses import decode as openai_responses

    saved = (
        openai_chat.OpenAIChatDecoder.object_text,
        anthropic.AnthropicDecoder.object_text,
        dict(openai_responses._FAST),
        bedrock_invoke.BedrockInvokeDecoder.object_text,
    )
    with hot_lane_off():  # the hot lane reads bytes the fast paths would have read
        try:
            # The base's object_text: the fold then takes no dict lane (in either build:
            # it compares the class attribute, where a compiled call would not see it).
            openai_chat.OpenAIChatDecoder.object_text = Decoder.object_text  # type: ignore[method-assign]
            anthropic.AnthropicDecoder.object_text = Decoder.object_text  # type: ignore[method-assign]
            openai_responses._FAST.clear()
            bedrock_invoke.BedrockInvokeDecoder.object_text = Decoder.object_text  # type: ignore[method-assign]
            yield
        finally:
            bedrock_invoke.BedrockInvokeDecoder.object_text = saved[3]  # type: ignore[method-assign]
            openai_chat.OpenAIChatDecoder.object_text = saved[0]  # type: ignore[method-assign]
            anthropic.AnthropicDecoder.object_text = saved[1]  # type: ignore[method-assign]
            openai_responses._FAST.update(saved[2])


def _fast_outcome(run: Callable[[], list[Any]]) -> tuple[list[str], str | None]:
    events: list[str] = []
    try:
        for event in run():
            events.append(repr(event))
    except StreamfoldError as exc:
        return events, f"{type(exc).__name__}: {exc}"
    return events, None


def assert_fast_same(chunks: list[Any], provider: str | None, **options: Any) -> None:
    """The fold as shipped and with the full paths alone: the same events and error."""

    def run() -> list[Any]:
        return list(fold(list(chunks), provider, **options))

    fast = _fast_outcome(run)
    with full_path_only():
        full = _fast_outcome(run)
    assert fast == full


def reference_depth_over(value: object, limit: int) -> int | None:
    """json_depth_over as it was written before the per-part work (a generator walk): the
    reference its shortcuts are held to."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return depth
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return None


def attributes(obj: object) -> dict[str, Any]:
    """An object's attributes by name, in either build (a compiled class has no __dict__;
    mypyc lists its attributes in __mypyc_attrs__)."""
    names = getattr(type(obj), "__mypyc_attrs__", None)
    if names is None:
        return dict(vars(obj))
    missing = object()
    found = {
        name: getattr(obj, name, missing)
        for name in names
        if name not in ("__dict__", "__weakref__")
    }
    return {name: value for name, value in found.items() if value is not missing}


def fold_outcome(chunks: list[Any], provider: str | None, **options: Any) -> tuple[Any, ...]:
    """Every event, the error if any (type, text, every attribute), the final snapshot."""
    events: list[str] = []
    run = fold(list(chunks), provider, **options)
    try:
        for event in run:
            events.append(repr(event))
    except StreamfoldError as exc:
        details = {k: repr(v) for k, v in vars(exc).items()}
        return events, type(exc).__name__, str(exc), details
    return events, None, repr(run.snapshot())


# The shipped StreamFolder.hot_lane_after, hot_lane_ahead and hot_lane_short (the
# hot-lane tests set them meanwhile).
HOT_LANE_AFTER = StreamFolder.hot_lane_after
HOT_LANE_AHEAD = StreamFolder.hot_lane_ahead
HOT_LANE_SHORT = StreamFolder.hot_lane_short


@contextlib.contextmanager
def hot_lane_from(events: int, ahead: int = sys.maxsize, short: int = 0) -> Iterator[None]:
    """The hot lane starting after `events` events (StreamFolder.hot_lane_after), or at
    once when the bytes at hand hold `ahead` events (never, by default); bytes at hand
    no longer than `short` before then are framed whole (none, by default: the test
    streams are short)."""
    saved = StreamFolder.hot_lane_after, StreamFolder.hot_lane_ahead, StreamFolder.hot_lane_short
    StreamFolder.hot_lane_after, StreamFolder.hot_lane_ahead = events, ahead
    StreamFolder.hot_lane_short = short
    try:
        yield
    finally:
        (
            StreamFolder.hot_lane_after,
            StreamFolder.hot_lane_ahead,
            StreamFolder.hot_lane_short,
        ) = saved


def assert_hot_lane_same(chunks: list[Any], provider: str | None, **options: Any) -> None:
    """The fold with the hot lane gives exactly what it gives without it: the lane from
    the first event (the test streams are short), from the third, and as shipped."""
    with hot_lane_off():
        full = fold_outcome(chunks, provider, **options)
    shipped = (HOT_LANE_AFTER, HOT_LANE_AHEAD, HOT_LANE_SHORT)
    for start, ahead, short in ((0, sys.maxsize, 0), (3, sys.maxsize, 0), shipped):
        with hot_lane_from(start, ahead, short):
            assert fold_outcome(chunks, provider, **options) == full, f"lane from {start}"


def sse_event(name: str | None, data: bytes | str | dict[str, Any]) -> bytes:
    """One SSE event: an event line (if named), a data line, a blank line."""
    if isinstance(data, dict):
        data = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    if isinstance(data, str):
        data = data.encode()
    head = b"" if name is None else b"event: " + name.encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


# Fold options the hot-lane equivalence tests draw from: lenient, strict, live arguments,
# limits small enough to be passed in the middle of a run.
HOT_LANE_OPTIONS = st.sampled_from(
    [
        {},
        {"strict": True},
        {"partial_arguments": True},
        {"limits": Limits(max_part_chars=40, max_tool_argument_chars=12)},
        {"strict": True, "limits": Limits(max_part_chars=40)},
    ]
)


def decoded_payloads(monkeypatch: Any, decoder_class: type[Any]) -> list[Any]:
    """The payloads `decoder_class.decode()` sees from now on (it still decodes them)."""
    seen: list[Any] = []
    original = decoder_class.decode

    def counting(self: Any, payload: Any, event: Any = None) -> Any:
        seen.append(payload)
        return original(self, payload, event)

    monkeypatch.setattr(decoder_class, "decode", counting)
    return seen


def types_of(payloads: list[Any]) -> list[Any]:
    """Each payload's `type` field."""
    return [payload.get("type") for payload in payloads]


def count_grow_texts(monkeypatch: Any) -> list[int]:
    """Record the length of every run the hot lane hands to Accumulator.grow_texts (the
    list fills as folds run; the method still does its work). Compiled, the lanes call
    grow_texts directly, past a patched class attribute: the test is skipped there (the
    batching is the same source either way)."""
    import streamfold
    from streamfold.accumulator import Accumulator

    if streamfold.is_compiled():
        pytest.skip("compiled, the hot lanes call Accumulator.grow_texts directly: unpatchable")

    sizes: list[int] = []
    original = Accumulator.grow_texts

    def counting(self: Accumulator, key: Any, texts: list[str], out: list[Any]) -> bool:
        sizes.append(len(texts))
        return original(self, key, texts, out)

    monkeypatch.setattr(Accumulator, "grow_texts", counting)
    return sizes


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    """`data` cut at the given offsets (any order, repeats and out-of-range allowed)."""
    points = sorted({min(max(c, 0), len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a] or [data]


def streamed_display_items(events: list[Event]) -> list[DisplayItem]:
    """The display items of each PartCompleted, in slot order, a text part's with the
    marker a later PartMarked gave it: what a UI that stores items as parts complete
    (and restyles them on PartMarked) ends up with."""
    items: dict[int, list[DisplayItem]] = {}
    for e in events:
        if isinstance(e, PartCompleted):
            items[e.index] = list(e.display_items)
        elif isinstance(e, PartMarked) and e.index in items:
            items[e.index] = [
                i.model_copy(update={"content": {**i.content, "utterance": e.utterance}})
                for i in items[e.index]
            ]
    return [i for index in sorted(items) for i in items[index]]


def without_inferred_marker(part: Any) -> Any:
    """A part as it was before streamfold inferred its narration / answer marker."""
    if not isinstance(part, ContentPart) or part.options.get("utterance_inferred") is not True:
        return part
    options = {
        k: v for k, v in part.options.items() if k not in ("utterance", "utterance_inferred")
    }
    return part.model_copy(update={"options": options})
