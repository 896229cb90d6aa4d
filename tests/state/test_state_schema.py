"""The saved state is a closed schema: a tampered state is refused with one typed error,
never executed, imported, or accepted to fail later; an authenticated one needs its key."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ALL_RECORDINGS, read, recordings

import streamfold.state
from streamfold import (
    Message,
    MessageCompleted,
    StreamFolder,
    StreamfoldError,
    UsageError,
    event_to_json,
    fold,
)
from streamfold.providers import PROVIDERS, decoder_class

ALL = ALL_RECORDINGS


def _state_at(rel: str, cut: int, **options: Any) -> dict[str, Any]:
    folder = StreamFolder(**options)
    folder.feed(read(rel)[:cut])
    saved: dict[str, Any] = json.loads(json.dumps(folder.save_state()))
    return saved


def _anthropic_state(cut: int = 700) -> dict[str, Any]:
    """Anthropic tool use, cut at 700 (after message_start) or 900 (inside the call)."""
    return _state_at("anthropic/tool-use-single.sse", cut)


def _places(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value in a JSON tree (dict keys and list items)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key)
            yield from _places(value, (*path, key))
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield (*path, n)
            yield from _places(value, (*path, n))


def _replaced(state: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(state)
    node: Any = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return out


def _evil_nodes(target: Path) -> list[Any]:
    """The issue's reproductions, and the same calls in every tag the old format knew."""
    popen = "streamfold.relay:asyncio.events.subprocess.Popen"
    fileio = "streamfold.state:importlib.resources.abc.io.FileIO"
    touch = {"$": "list", "id": 999, "v": ["touch", str(target / "PWNED")]}
    return [
        {"$": "ntuple", "c": popen, "v": [touch]},
        {"$": "ntuple", "c": fileio, "v": [str(target / "victim.txt"), "w"]},
        {"$": "obj", "id": 998, "c": popen, "a": {}},
        {"$": "model", "c": "streamfold.relay:asyncio.events.subprocess.Popen", "v": {}},
        {"c": popen, "v": [touch], "args": ["touch", str(target / "PWNED")]},
    ]


def test_a_tampered_state_runs_nothing_anywhere_it_is_put(tmp_path: Path) -> None:
    """The issue's code execution: the command and the file truncation, put in place of
    every value of a saved state (and as the old format's root), have no effect: refused
    with a typed error, or (in a field that holds any JSON, a provider block) kept as the
    inert data it is."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    state = _anthropic_state()
    refused: list[dict[str, Any]] = []
    anywhere: list[dict[str, Any]] = []
    for node in _evil_nodes(tmp_path):
        refused.append({**state, "root": node})
        refused.append({**state, "root": {"$": "obj", "id": 0, "c": "x", "a": {"_head": node}}})
        refused.extend(_replaced(state, (name,), node) for name in state)
        anywhere.extend(_replaced(state, place, node) for place in _places(state))
    modules = set(sys.modules)
    for bad in refused:
        with pytest.raises(UsageError):
            StreamFolder.restore(bad)
    for bad in anywhere:
        with contextlib.suppress(streamfold.StateError):
            StreamFolder.restore(bad)
    assert not (tmp_path / "PWNED").exists()
    assert victim.read_text() == "keep me"
    assert set(sys.modules) == modules


def test_the_old_formats_reproduction_is_refused(tmp_path: Path) -> None:
    """Verbatim from the issue (on a state of the old format's shape)."""
    state = _anthropic_state()
    state["root"] = {"$": "obj", "id": 0, "c": "streamfold.fold:StreamFolder", "a": {}}
    state["root"]["a"]["_head"] = {
        "$": "ntuple",
        "c": "streamfold.relay:asyncio.events.subprocess.Popen",
        "v": [{"$": "list", "id": 999, "v": ["touch", str(tmp_path / "PWNED")]}],
    }
    state["streamfold_state"] = 2
    with pytest.raises(UsageError):
        StreamFolder.restore(state)
    state["streamfold_state"] = streamfold.state.STATE_VERSION
    with pytest.raises(streamfold.StateError):
        StreamFolder.restore(state)
    assert not (tmp_path / "PWNED").exists()


def test_a_restore_imports_nothing() -> None:
    """Restoring the state of every provider leaves sys.modules as it was (the state
    module imports every decoder itself; a state only picks one by name)."""
    states = [_state_at(rel, len(read(rel)) // 2) for rel in ALL[:: max(1, len(ALL) // 12)]]
    states.append(_state_at("gemini/" + _first("gemini"), 400))
    states.append(_state_at("ollama/" + _first("ollama"), 400))
    modules = set(sys.modules)
    for state in states:
        StreamFolder.restore(state)
    assert set(sys.modules) == modules


def _first(provider: str) -> str:
    return recordings(provider)[0].split("/", 1)[1]


def test_deep_nesting_is_a_typed_error_not_a_recursion_error() -> None:
    state = _anthropic_state()
    deep: Any = []
    for _ in range(400):
        deep = [deep]
    for place in [("root",), ("folder", "accumulator", "metadata"), ("folder", "decoder")]:
        bad = _replaced(state, place, deep)
        with pytest.raises(streamfold.StateError, match="levels deep"):
            StreamFolder.restore(bad)


def test_a_fold_a_state_cannot_hold_is_a_typed_error_at_save() -> None:
    deep: Any = {"x": 1}
    for _ in range(250):
        deep = {"a": deep}
    folder = StreamFolder()
    folder.feed(deep)  # no provider recognised yet: held as it came
    with pytest.raises(UsageError, match="save_state: expected a fold a state can hold"):
        folder.save_state()


@pytest.mark.parametrize("version", [2.0, "3", True, None, 2, 4])
def test_only_this_format_number_is_read(version: Any) -> None:
    state = _anthropic_state()
    state["streamfold_state"] = version
    with pytest.raises(streamfold.StateError, match=r"of version 3, got"):
        StreamFolder.restore(state)


def test_wrong_types_are_refused_at_restore_naming_the_field() -> None:
    state = _anthropic_state(900)
    cases: dict[tuple[Any, ...], tuple[Any, str]] = {
        ("folder", "position"): ("7", "folder.position"),
        ("folder", "bytes"): (-1, "folder.bytes"),
        ("folder", "accumulator", "slots", 0, "chunks"): ([1, 2], "folder.accumulator.slots[0]"),
        ("folder", "accumulator", "open", 0, "slot"): (99, "folder.accumulator.open[0].slot"),
        ("folder", "decoder", "blocks", 0, "block", "key"): ({"a": 1}, "folder.decoder.blocks"),
        ("folder", "decoder", "usage_raw"): ([], "folder.decoder.usage_raw"),
        ("folder", "provider"): ("OpenAI", "folder.provider"),
        ("folder", "sse", "buffer"): ("not base64!", "folder.sse.buffer"),
        ("folder", "limits", "max_bytes"): (1, "folder.bytes"),  # less than already read
        ("folder", "limits", "max_part_chars"): (2.0, "folder.limits.max_part_chars"),
        # What JSON (and so a message) cannot hold: refused here, not at the next dump.
        ("folder", "accumulator", "metadata"): ({"a": "\ud800"}, "folder.accumulator.metadata.a"),
        ("folder", "accumulator", "usage"): (float("nan"), "folder.accumulator.usage"),
        ("folder", "choice"): (2**300, "folder.choice"),
        # The fold's own limits: depth (128) and part size.
        ("folder", "accumulator", "metadata", "x"): (_deep(150), "folder.accumulator.metadata"),
        ("folder", "limits", "max_parts"): (0, "folder.accumulator.slots"),
        # More bytes held than were ever read.
        ("folder", "sse", "data"): (["eHh4eA=="] * 400, "folder.bytes"),
    }
    for place, (value, field) in cases.items():
        bad = _replaced(state, place, value)
        with pytest.raises(streamfold.StateError) as info:
            StreamFolder.restore(bad)
        assert info.value.field.startswith(field), (place, info.value.field)
        assert field in str(info.value)
    # Text past the part's limit (max_tool_argument_chars for a call's arguments).
    bad = _replaced(state, ("folder", "limits", "max_tool_argument_chars"), 3)
    bad = _replaced(bad, ("folder", "accumulator", "slots", 0, "chunks"), ["ab", "cd"])
    with pytest.raises(streamfold.StateError, match="at most 3 characters") as info:
        StreamFolder.restore(bad)
    assert info.value.field == "folder.accumulator.slots[0].chunks"


def test_hmac_right_key_only() -> None:
    folder = StreamFolder()
    data = read("anthropic/tool-use-single.sse")
    folder.feed(data[:700])
    signed = json.loads(json.dumps(folder.save_state(key=b"secret")))
    restored = StreamFolder.restore(signed, key=b"secret")
    assert restored.feed(data[700:]) + restored.close()
    assert StreamFolder.restore(signed, key="secret")  # a str key is its UTF-8 bytes
    with pytest.raises(streamfold.StateError, match="HMAC"):
        StreamFolder.restore(signed, key=b"other")
    with pytest.raises(streamfold.StateError, match="HMAC"):
        StreamFolder.restore(json.loads(json.dumps(folder.save_state())), key=b"secret")
    tampered = copy.deepcopy(signed)
    tampered["folder"]["position"] += 1
    with pytest.raises(streamfold.StateError, match="HMAC"):
        StreamFolder.restore(tampered, key=b"secret")
    for mac in [None, 1, "", signed["mac"].upper()]:
        with pytest.raises(streamfold.StateError, match="HMAC"):
            StreamFolder.restore({**signed, "mac": mac}, key=b"secret")
    with pytest.raises(UsageError, match="key"):
        folder.save_state(key=b"")


def test_resume_at_every_event_of_every_recording() -> None:
    """Saved and restored (through JSON) after every event, chained, every recording
    folds as it does uninterrupted, with live arguments too."""
    for rel in ALL:
        data = read(rel)
        if rel.endswith(".eventstream"):
            pieces = [data[at : at + 97] for at in range(0, len(data), 97)]
        else:
            ends = [n + 1 for n in range(len(data)) if data[n : n + 1] == b"\n"]
            pieces = [data[a:b] for a, b in zip([0, *ends], [*ends, len(data)], strict=True)]
        for options in ({}, {"partial_arguments": True}):
            folder = StreamFolder(**options)
            events = []
            for piece in pieces:
                events += folder.feed(piece)
                folder = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
            events += folder.close()
            whole = [event_to_json(e) for e in fold([data], **options)]
            assert [event_to_json(e) for e in events] == whole, (rel, options)


# --- any field, any JSON value -----------------------------------------------------------


@functools.cache
def _saved_states() -> list[tuple[str, int, dict[str, Any]]]:
    """States of every recording: cut after an event and inside events, one with live
    arguments (partial_arguments), the rest without."""
    out = []
    for rel in ALL:
        data = read(rel)
        size = len(data)
        event_end = data.find(b"\n\n", size // 3) + 2  # (mid-event cuts hold buffers)
        for cut in sorted({size // 4, max(event_end, 1), size // 2, (3 * size) // 4}):
            options = {"partial_arguments": True} if cut == size // 2 else {}
            out.append((rel, cut, _state_at(rel, cut, **options)))
    return out


def _deep(depth: int) -> Any:
    value: Any = "x"
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["", "x" * 100_000, "\ud800", "anthropic", "sse", "text", "tool_call"])
    | st.integers(min_value=150, max_value=500).map(_deep)
)
_JSON = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def _resume_or_refuse(state: dict[str, Any], rel: str, cut: int) -> None:
    try:
        folder = StreamFolder.restore(state)
    except StreamfoldError as exc:
        assert isinstance(exc, streamfold.StateError), repr(exc)
        assert str(exc)  # its text never raises
        return
    folder.snapshot()
    try:
        events = folder.feed(read(rel)[cut:]) + folder.close()
    except StreamfoldError as exc:
        assert str(exc)
        return
    final = [e for e in events if isinstance(e, MessageCompleted)]
    if folder.finished and final:
        message = final[-1].message
        assert Message.model_validate_json(message.model_dump_json()) == message


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_any_field_changed_to_any_json_is_refused_or_resumes(data: st.DataObject) -> None:
    """Change one field anywhere in the saved state of a recording (or drop it, or add
    one): restore refuses with StateError, or the fold resumes and ends as any fold does
    (a message, or a typed stream error): never another exception."""
    rel, cut, state = data.draw(st.sampled_from(_saved_states()))
    places = list(_places(state))
    place = data.draw(st.sampled_from(places))
    how = data.draw(st.sampled_from(["replace", "replace", "replace", "drop", "add"]))
    if how == "replace":
        changed = _replaced(state, place, data.draw(_JSON))
    else:
        changed = copy.deepcopy(state)
        node: Any = changed
        for step in place[:-1]:
            node = node[step]
        if how == "drop":
            del node[place[-1]]
        elif isinstance(node, dict):
            node["extra_field"] = data.draw(_JSON)
        else:
            node.append(data.draw(_JSON))
    _resume_or_refuse(changed, rel, cut)


def test_an_unchanged_state_resumes_identically() -> None:
    """The control for the property above: no change, the same fold."""
    for rel, cut, state in _saved_states()[::7]:
        options = {"partial_arguments": True} if cut == len(read(rel)) // 2 else {}
        before = StreamFolder(**options).feed(read(rel)[:cut])
        folder = StreamFolder.restore(state)
        after = folder.feed(read(rel)[cut:]) + folder.close()
        whole = [event_to_json(e) for e in fold([read(rel)], **options)]
        assert [event_to_json(e) for e in before + after] == whole, rel


# --- every attribute of every box is saved, or rebuilt on purpose --------------------------


def _box_attributes(cls: type) -> set[str]:
    compiled = getattr(cls, "__mypyc_attrs__", None)
    if compiled is not None:  # compiled with mypyc: every attribute, inherited ones too
        return set(compiled) - {"__weakref__", "__dict__"}
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    names: set[str] = set()
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update([slots] if isinstance(slots, str) else slots)
    if "__slots__" not in cls.__dict__:
        names.update(vars(cls()))  # the attributes its constructor sets
    return names - {"__weakref__", "__dict__"}


def _boxes() -> list[tuple[type, type, dict[str, str], set[str]]]:
    """(box, its state model, attribute -> field where the names differ, attributes not
    saved: the fold's settings given to from_state, caches and values derived again)."""
    from streamfold import (
        accumulator,
        accumulator_state,
        eventstream,
        eventstream_state,
        framing,
        framing_state,
    )
    from streamfold.fold_state import FoldState
    from streamfold.providers.anthropic import decode as anthropic
    from streamfold.providers.anthropic import state as anthropic_state
    from streamfold.providers.bedrock import decode as bedrock
    from streamfold.providers.bedrock import state as bedrock_state
    from streamfold.providers.bedrock_invoke import decode as bedrock_invoke
    from streamfold.providers.bedrock_invoke import state as bedrock_invoke_state
    from streamfold.providers.gemini import decode as gemini
    from streamfold.providers.gemini import state as gemini_state
    from streamfold.providers.messagedelta import decode as messagedelta
    from streamfold.providers.messagedelta import state as messagedelta_state
    from streamfold.providers.ollama import decode as ollama
    from streamfold.providers.ollama import state as ollama_state
    from streamfold.providers.openai_chat import decode as openai_chat
    from streamfold.providers.openai_chat import state as openai_chat_state
    from streamfold.providers.openai_responses import decode as openai_responses
    from streamfold.providers.openai_responses import state as openai_responses_state

    # limits: the fold's, set by the fold; other_choices: saved by the decoders that have
    # choices (openai-chat, gemini), always empty in the others.
    settings_ = {"choice", "strict", "limits", "other_choices"}
    return [
        (
            StreamFolder,
            FoldState,
            {"_acc": "accumulator", "_framer": "sse", "_decoder_options": "choice"},
            # timing: when chunks arrived, on this process's clock: a restore starts anew;
            # _start: the input's first bytes, quoted only by the error for input without an
            # event (after a restore, that error gives their count, not their start);
            # _output: a fold with output= refuses save_state (its validation is not saved).
            {"timing", "_start", "_output"},
        ),
        (framing.SSEDecoder, framing_state.SSEState, {}, {"_parked"}),  # joined to the buffer
        (framing.NDJSONDecoder, framing_state.NDJSONState, {}, {"_parked"}),
        # _last_head, _last_headers: the last message's headers, a cache (parsed anew after a
        # restore)
        (
            eventstream.EventStreamFramer,
            eventstream_state.EventStreamState,
            {},
            {"_last_head", "_last_headers"},
        ),
        (
            accumulator.Accumulator,
            accumulator_state.AccumulatorState,
            {},
            # _completed: the event already emitted, for the timing to add itself to
            {"limits", "provider", "strict", "_completed"},
        ),
        (
            accumulator.Slot,
            accumulator_state.SlotState,
            {"start": "part", "done": "complete", "scanner": "scanning"},
            {"index", "kind", "limit", "size", "has_content"},
        ),
        (
            anthropic.AnthropicDecoder,
            anthropic_state.AnthropicState,
            {},
            {"_hot", "_hot_head", "_early_chars", *settings_},  # held sizes: from early
        ),
        (anthropic._Block, anthropic_state.AnthropicBlockState, {}, set()),
        (bedrock.BedrockDecoder, bedrock_state.BedrockState, {}, {"_hot_head", *settings_}),
        (bedrock._Block, bedrock_state.BedrockBlockState, {}, set()),
        (
            bedrock_invoke.BedrockInvokeDecoder,
            bedrock_invoke_state.BedrockInvokeState,
            {},
            # _unwrapped(_from): the chunk the dict lane unwrapped, handed to decode() for
            # the same payload: never held from one payload to the next
            {"_hot_head", "_unwrapped", "_unwrapped_from", *settings_},
        ),
        (gemini.GeminiDecoder, gemini_state.GeminiState, {}, {"_hot_head", "_pending", *settings_}),
        (gemini._TextPart, gemini_state.GeminiTextState, {}, {"byte_ends", "char_ends"}),
        (gemini._StreamedCall, gemini_state.GeminiCallState, {}, set()),
        (gemini._ArgsWriter, gemini_state.GeminiArgsState, {}, set()),
        (gemini._Growable, gemini_state.GeminiGrowable, {}, set()),
        (ollama.OllamaDecoder, ollama_state.OllamaState, {}, {"_hot_head", *settings_}),
        (
            messagedelta.MessageDeltaDecoder,
            messagedelta_state.MessageDeltaState,
            {},
            {"_hot_head", *settings_},
        ),
        (
            openai_chat.OpenAIChatDecoder,
            openai_chat_state.OpenAIChatState,
            {},
            {
                *("_hot_credit", "_hot_head", "_hot_seen", "_hot_shapes", "_hot_version"),
                # the dict lane's copy of the metadata, read again when its version moves
                *("_seen_version", "_named", "_fingerprint", "_tier", *settings_),
                # what the full path last folded whole, for the lanes to skip its repeats:
                # None after a restore, the lanes decline until it folds them again
                *("_usage_folded", "_citations_folded"),
            },
        ),
        (openai_chat._Call, openai_chat_state.ChatCallState, {}, set()),
        (
            openai_responses.OpenAIResponsesDecoder,
            openai_responses_state.OpenAIResponsesState,
            {},
            {
                *(
                    "_hot",
                    "_hot_head",
                    "_hot_misses",
                    "_hot_shape",
                    "_kind",
                    "_noted",
                    "_early_chars",
                ),
                *("_last_delta", *settings_),  # the fast paths' cache of lookups
            },
        ),
        (openai_responses._Item, openai_responses_state.ResponsesItemState, {}, set()),
        (openai_responses._Part, openai_responses_state.ResponsesPartState, {}, set()),
    ]


def test_every_attribute_of_every_box_is_saved_or_rebuilt_on_purpose() -> None:
    """A box that gains an attribute fails here until its state model saves it (a field
    of the same name, without the underscore) or the list above says it is rebuilt: an
    attribute neither saved nor listed would come back as its initial value."""
    listed = {box for box, *_ in _boxes()}
    assert {decoder_class(name) for name in PROVIDERS} <= listed  # a new decoder too
    for box, model, renamed, rebuilt in _boxes():
        for name in sorted(_box_attributes(box) - rebuilt):
            field = renamed.get(name, name.lstrip("_"))
            assert field in model.model_fields, f"{box.__qualname__}.{name}: not in {model}"
