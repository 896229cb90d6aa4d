"""Shared test helpers: the recorded fixtures and golden Messages."""

from __future__ import annotations

import contextlib
import dataclasses
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


# --- the Responses delta shapes servers send ---------------------------------------------

# The delta events the Responses lanes take, by family: a shape is found, and applied, per
# family (text and summary deltas name their part with an index; argument deltas do not).
RESPONSES_DELTA_FAMILY = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "text",
    "response.reasoning_text.delta": "text",
    "response.reasoning_summary_text.delta": "text",
    "response.function_call_arguments.delta": "arguments",
}
# The fields a delta's own content decides; any other field's value is the server's.
_RESPONSES_OWN = frozenset(
    {"type", "sequence_number", "item_id", "output_index", "content_index", "summary_index"}
    | {"delta", "obfuscation"}
)
_RESPONSES_INDEXES = ("content_index", "summary_index")


@dataclasses.dataclass(frozen=True)
class DeltaShape:
    """How one server writes one family of Responses delta events: the keys in order
    ("index" standing for content_index or summary_index), whether an event line names
    each event, and the other fields' values (JSON) from the first event of that shape."""

    family: str
    keys: tuple[str, ...]
    named: bool
    extras: tuple[tuple[str, str], ...]
    source: str

    @property
    def name(self) -> str:
        """A test id: where it was first found, its family, its key order."""
        line = "named" if self.named else "unnamed"
        return f"{self.source}:{self.family}:{line}:{','.join(self.keys)}"

    @property
    def logprobs(self) -> bool:
        """Whether its deltas carry logprobs (the full path's to read, by design)."""
        return any(key == "logprobs" and value not in ("[]", "null") for key, value in self.extras)


def sse_blocks(data: bytes) -> Iterator[tuple[str | None, bytes]]:
    """Each SSE event of LF-only bytes: its event name (None: no event line), its data."""
    for block in data.split(b"\n\n"):
        name: str | None = None
        lines: list[bytes] = []
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode()
            elif line.startswith(b"data:"):
                lines.append(line[5:].removeprefix(b" "))
        if lines:
            yield name, b"\n".join(lines)


def responses_delta_shapes() -> list[DeltaShape]:
    """Every distinct delta shape the Responses recordings hold (found by reading them)."""
    found: dict[tuple[Any, ...], DeltaShape] = {}
    for rel in sorted(e["file"] for e in INDEX if e.get("api") == "responses"):
        for name, data in sse_blocks(read(rel).replace(b"\r\n", b"\n")):
            try:
                payload = json.loads(data)
            except ValueError:
                continue
            family = (
                RESPONSES_DELTA_FAMILY.get(payload.get("type")) if type(payload) is dict else None
            )
            if family is None:
                continue
            keys = tuple("index" if k in _RESPONSES_INDEXES else k for k in payload)
            extras = tuple(
                (k, json.dumps(v, separators=(",", ":"), ensure_ascii=False))
                for k, v in payload.items()
                if k not in _RESPONSES_OWN
            )
            shape = DeltaShape(family, keys, name is not None, extras, rel.removesuffix(".sse"))
            found.setdefault((family, keys, shape.named, shape.logprobs), shape)
    return list(found.values())


def reshape_responses(sse: bytes, shape: DeltaShape) -> bytes:
    """A Responses stream with every delta event of the shape's family re-written onto it
    (key order, event line, the other fields' values; padding made up per event); with
    no sequence numbers anywhere if the shape has none."""
    out: list[bytes] = []
    numbered = "sequence_number" in shape.keys
    extras = dict(shape.extras)
    for n, (name, data) in enumerate(sse_blocks(sse)):
        payload = json.loads(data)
        if not numbered:
            payload.pop("sequence_number", None)
        if RESPONSES_DELTA_FAMILY.get(payload.get("type")) != shape.family:
            out.append(sse_event(name, payload))
            continue
        index = next((k for k in _RESPONSES_INDEXES if k in payload), None)
        fields: dict[str, Any] = {}
        for key in shape.keys:
            if key == "index":
                if index is not None:
                    fields[index] = payload[index]
            elif key == "obfuscation":
                fields[key] = payload.get(key, "pad0123456789"[: n % 14])
            elif key in extras:
                fields[key] = json.loads(extras[key])
            elif key in payload:
                fields[key] = payload[key]
        out.append(sse_event(payload["type"] if shape.named else None, fields))
    return b"".join(out)


# --- Chat chunk shapes ---------------------------------------------------------------
#
# Servers imitating Chat Completions send the same chunk in many layouts: their own key
# order, extra fields (null or not), fields repeated in every delta. The lanes must give
# the full path's result on every one, and take the plain ones on every one.

# The delta fields a chunk grows a part with.
_CHAT_GROWING = ("content", "reasoning_content", "reasoning", "reasoning_details", "tool_calls")


def chat_delta_kind(payload: Any) -> str | None:
    """What a Chat chunk grows, when it is a plain delta: "text", "reasoning" or "args"
    (an argument fragment of a started call); None for any other chunk."""
    if not isinstance(payload, dict):
        return None
    choices = payload.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    delta = choice.get("delta")
    if not isinstance(delta, dict) or choice.get("finish_reason") is not None:
        return None
    if isinstance(delta.get("content"), str) and delta["content"]:
        return "text"
    calls = delta.get("tool_calls")
    if isinstance(calls, list) and len(calls) == 1 and isinstance(calls[0], dict):
        function = calls[0].get("function")
        if not calls[0].get("id") and isinstance(function, dict) and function.get("arguments"):
            return "args"
        return None
    for name in ("reasoning_content", "reasoning"):
        if isinstance(delta.get(name), str) and delta[name]:
            return "reasoning"
    return None


def _chat_signature(payload: dict[str, Any]) -> str:
    def keys(obj: dict[str, Any]) -> str:
        return ",".join(k if obj[k] is not None else f"{k}=null" for k in obj)

    choice = payload["choices"][0]
    return f"{keys(payload)} | {keys(choice)} | {keys(choice['delta'])}"


def chat_recorded_shapes() -> dict[str, dict[str, Any]]:
    """One template chunk per distinct delta shape of the Chat recordings, found by
    reading them: the key order of the chunk, its choice and its delta, and which fields
    are null. Named by the recording and what the delta grows."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for e in INDEX:
        if e.get("api") != "chat-completions":
            continue
        for line in read(e["file"]).split(b"\n"):
            if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                continue
            try:
                payload = json.loads(line[5:])
            except ValueError:
                continue
            kind = chat_delta_kind(payload)
            if kind is not None:
                signature = f"{kind}: {_chat_signature(payload)}"
                found.setdefault(signature, (f"{e['file']} {kind}", payload))
    return dict(sorted(found.values(), key=lambda named: named[0]))


# Shapes of servers with no recording here, built from what they are known to send.
_WRITER_EXTRAS: dict[str, Any] = {
    "role": "assistant",
    "tool_calls": None,
    "graph_data": {"sources": None, "status": None, "subqueries": None},
    "llm_data": None,
    "image_data": None,
    "translation_data": None,
    "web_search_data": None,
    "refusal": None,
}
CHAT_BUILT_SHAPES: dict[str, dict[str, Any]] = {
    # Snowflake Cortex: role, refusal and tool_calls repeated in every delta, logprobs an
    # object.
    "snowflake text": {
        "id": "5b0c1d2e-0000-4000-8000-000000000001",
        "object": "chat.completion.chunk",
        "created": 1759436804,
        "model": "claude-3-7-sonnet",
        "choices": [
            {
                "index": 0,
                "delta": {"content": "Hi", "role": "assistant", "refusal": "", "tool_calls": []},
                "logprobs": {"content": [], "refusal": []},
                "finish_reason": None,
            }
        ],
        "usage": None,
    },
    # Writer (Palmyra): a copy of the delta as `message`, and many null fields.
    "writer text": {
        "id": "b1f1b7a0-0000-4000-8000-000000000002",
        "object": "chat.completion.chunk",
        "choices": [
            {
                "index": 0,
                "finish_reason": None,
                "message": {"content": "Hi", **_WRITER_EXTRAS},
                "delta": {"content": "Hi", **_WRITER_EXTRAS},
                "logprobs": None,
            }
        ],
        "created": 1759436804,
        "model": "palmyra-x5",
        "usage": None,
        "system_fingerprint": "v1",
        "service_tier": None,
    },
    # Perplexity with search results: citations, search results and usage in every chunk.
    "perplexity search text": {
        "id": "58cb9740-0000-4000-8000-000000000003",
        "model": "sonar",
        "created": 1759436804,
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
        "citations": ["https://a.example/1", "https://b.example/2"],
        "search_results": [
            {"title": "A", "url": "https://a.example/1", "date": "2025-01-01"},
            {"title": "B", "url": "https://b.example/2", "date": None},
        ],
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}],
    },
}


def chat_shapes() -> dict[str, dict[str, Any]]:
    """Every Chat delta shape: those found in the recordings, and those built."""
    return {**chat_recorded_shapes(), **CHAT_BUILT_SHAPES}


def _reshape_delta(delta: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    # The template's fields in its order, then this delta's fields it lacks. The text the
    # template grows with is not this delta's: null in its place (a list of them, such as
    # tool_calls, is left out: servers send none with a delta of another kind).
    out: dict[str, Any] = {}
    for name, value in template.items():
        if name in delta:
            out[name] = delta[name]
        elif name in _CHAT_GROWING and value:
            if not isinstance(value, list):
                out[name] = None
        else:
            out[name] = value
    for name, value in delta.items():
        out.setdefault(name, value)
    return out


def reshape_chat(payload: Any, template: dict[str, Any]) -> Any:
    """A Chat chunk in the layout of `template`: the template's top-level fields in its
    order and with its values, no others (but this chunk's choices, and its usage when it
    has one); a plain delta's choice and delta laid out as the template's, with the
    template's values but this delta's fields and the choice's index. Other chunks keep
    their choices as they are; anything else is returned as it is."""
    if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
        return payload
    choices = payload["choices"]
    if chat_delta_kind(payload) is not None:
        like = template["choices"][0]
        choice = choices[0]
        delta = _reshape_delta(choice["delta"], like["delta"])
        laid: dict[str, Any] = {}
        for name, value in like.items():
            if name == "delta":
                laid[name] = delta
            elif name == "message" and isinstance(value, dict):
                laid[name] = {**value, "content": delta.get("content")}  # a copy of the delta
            elif name in ("index", "finish_reason"):
                laid[name] = choice.get(name, value)
            else:
                laid[name] = value
        for name, value in choice.items():
            laid.setdefault(name, value)
        choices = [laid]
    out: dict[str, Any] = {}
    for name, value in template.items():
        if name == "choices":
            out[name] = choices
        elif name == "usage" and payload.get("usage") is not None:
            out[name] = payload["usage"]
        else:
            out[name] = value
    if payload.get("usage") is not None:
        out.setdefault("usage", payload["usage"])
    return out


def reshape_chat_sse(sse: bytes, template: dict[str, Any], reasoning_first: int = 0) -> bytes:
    """Every `data:` chunk of a Chat SSE stream re-written by `reshape_chat`, compact; the
    first `reasoning_first` text deltas become reasoning deltas (in the template's
    reasoning field, else reasoning_content) before that."""
    like = template["choices"][0]["delta"]
    field = next((k for k in ("reasoning_content", "reasoning") if k in like), "reasoning_content")
    lines = []
    for line in sse.split(b"\n"):
        if line.startswith(b"data: ") and line[6:] != b"[DONE]":
            chunk = json.loads(line[6:])
            if reasoning_first and chat_delta_kind(chunk) == "text":
                reasoning_first -= 1
                chunk["choices"][0]["delta"] = {field: chunk["choices"][0]["delta"]["content"]}
            chunk = reshape_chat(chunk, template)
            line = b"data: " + json.dumps(chunk, separators=(",", ":"), ensure_ascii=False).encode()
        lines.append(line)
    return b"\n".join(lines)


def sse_payloads(sse: bytes) -> list[Any]:
    """The decoded payloads of an SSE stream's `data:` lines (one line an event)."""
    return [
        json.loads(line[5:])
        for line in sse.split(b"\n")
        if line.startswith(b"data:") and line[5:].strip() != b"[DONE]"
    ]
