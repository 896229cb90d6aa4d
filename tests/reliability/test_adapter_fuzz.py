"""Hostile objects at the adapters' door: `streamfold.interop.*.from_*`.

The SDKs build their response objects from the wire without validating them (openai's
and anthropic's `construct_type`), and LangChain's and pydantic-ai's objects can be built
the same way (`model_construct`, a dataclass): an adapter cannot trust that an object of
the right class holds what its type says. Each recording's folded Message is written with
the adapter (`to_*`), its JSON form mutated at the value level with the object fuzz's
hostile values (wrong types, lone surrogates, NaN, integers past any size, nesting
thousands deep, bytes, sets, objects whose repr raises), then handed back to `from_*` as
the library's own object built without validation, and as the plain dict.

The property: only an `InteropError` escapes (with a bounded text that never raises), and
a Message that comes back can be written as JSON and read again.

`STREAMFOLD_ADAPTER_FUZZ_EXAMPLES` sets the number of examples per adapter.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ALL_RECORDINGS, read

from reliability.test_fuzz import Chooser, HypothesisChooser, _get, _paths, parse, provider_of
from reliability.test_object_fuzz import _copy, _short, object_value
from streamfold import InteropError, Message, StreamfoldError, fold_message

EXAMPLES = int(os.environ.get("STREAMFOLD_ADAPTER_FUZZ_EXAMPLES", "150"))


@dataclass(frozen=True)
class Adapter:
    """One adapter's door: the recordings it writes, how, and how the library builds its
    object from a dict without validating it."""

    providers: tuple[str, ...]
    write: Callable[[Message], Any]  # the adapter's to_*: the library's object
    dump: Callable[[Any], Any]  # the object's JSON form
    construct: Callable[[Any], Any]  # the object from that form, unvalidated
    read: Callable[[Any], Message]  # the adapter's from_*


def _openai_chat() -> Adapter:
    from openai._models import construct_type
    from openai.types.chat import ChatCompletion

    from streamfold.interop.openai import from_chat_completion, to_chat_completion

    return Adapter(
        ("openai-chat",),
        to_chat_completion,
        lambda obj: obj.model_dump(mode="json"),
        lambda data: construct_type(type_=ChatCompletion, value=data),
        from_chat_completion,
    )


def _openai_responses() -> Adapter:
    from openai._models import construct_type
    from openai.types.responses import Response

    from streamfold.interop.openai import from_response, to_response

    return Adapter(
        ("openai-responses",),
        to_response,
        lambda obj: obj.model_dump(mode="json"),
        lambda data: construct_type(type_=Response, value=data),
        from_response,
    )


def _anthropic() -> Adapter:
    from anthropic._models import construct_type
    from anthropic.types import Message as AnthropicMessage

    from streamfold.interop.anthropic import from_message, to_message

    return Adapter(
        ("anthropic",),
        to_message,
        lambda obj: obj.model_dump(mode="json"),
        lambda data: construct_type(type_=AnthropicMessage, value=data),
        from_message,
    )


def _pydantic_ai() -> Adapter:
    from typing import get_args

    from pydantic_ai import messages
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse

    from streamfold.interop.pydantic_ai import from_model_response, to_model_response

    # Each part class by its `part_kind`, as pydantic-ai's discriminated union reads them.
    kinds: dict[str, type] = {}

    def collect(hint: Any) -> None:
        kind = getattr(hint, "part_kind", None)
        if isinstance(hint, type) and isinstance(kind, str):
            kinds.setdefault(kind, hint)
        for inner in get_args(hint):
            collect(inner)

    collect(messages.ModelResponsePart)

    def built(cls: type, fields: dict[str, Any]) -> Any:
        # A dataclass filled as it stands, past its validation (as `model_construct` does).
        obj = object.__new__(cls)
        obj.__dict__.update(fields)
        return obj

    def construct(data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = dict(data)
        parts = fields.get("parts")
        if isinstance(parts, list):
            fields["parts"] = [
                built(kinds[p["part_kind"]], p)
                if isinstance(p, dict) and p.get("part_kind") in kinds
                else p
                for p in parts
            ]
        return built(ModelResponse, fields)

    return Adapter(
        ("anthropic", "openai-chat", "openai-responses", "gemini"),
        to_model_response,
        lambda obj: ModelMessagesTypeAdapter.dump_python([obj], mode="json")[0],
        construct,
        from_model_response,
    )


def _langchain() -> Adapter:
    from langchain_core.messages import AIMessage

    from streamfold.interop.langchain import from_ai_message, to_ai_message

    return Adapter(
        # Every provider: the blocks are LangChain's translation of Anthropic's and OpenAI's
        # native content, and written by the adapter for the others.
        ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock", "ollama"),
        to_ai_message,
        lambda obj: obj.model_dump(mode="json"),
        lambda data: AIMessage.model_construct(**data) if isinstance(data, dict) else data,
        from_ai_message,
    )


ADAPTERS: dict[str, Callable[[], Adapter]] = {
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
    "anthropic": _anthropic,
    "pydantic-ai": _pydantic_ai,
    "langchain": _langchain,
}


@cache
def adapter(name: str) -> Adapter:
    return ADAPTERS[name]()


@cache
def written(name: str) -> list[tuple[str, Any]]:
    """Each recording the adapter writes, as (name, the object's JSON form)."""
    door = adapter(name)
    out: list[tuple[str, Any]] = []
    for rel in ALL_RECORDINGS:
        if rel.endswith(".eventstream") or provider_of(rel) not in door.providers:
            continue
        try:
            message = fold_message(read(rel))
        except StreamfoldError:
            continue
        try:
            out.append((rel, door.dump(door.write(message))))
        except InteropError:
            continue  # a Message the library cannot hold: the writer said so
    return out


def mutate(data: Any, c: Chooser) -> list[str]:
    """1-3 value-level mutations of the object's JSON form, in place; say which."""
    stream = parse(c.choice(ALL_RECORDINGS))  # (only for its strings)
    done: list[str] = []
    for _ in range(c.integer(1, 3)):
        paths = _paths(data) if isinstance(data, dict | list) else []
        if not paths:
            break
        path = c.choice(paths)
        *parent, last = path
        container = _get(data, tuple(parent))
        if c.integer(0, 4) == 0 and isinstance(container, dict):
            del container[last]
            done.append(f"remove {list(path)}")
            continue
        container[last] = object_value(c, stream)
        done.append(f"{list(path)} := {_short(container[last])}")
    return done


def check_door(door: Adapter, value: Any) -> None:
    try:
        message = door.read(value)
    except InteropError as exc:
        assert len(str(exc)) <= 2_000
        return
    # A Message that came back can be written as JSON and read again.
    text = message.model_dump_json()
    assert Message.model_validate(json.loads(text)) == message


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_every_recording_reads_back_through_the_door(name: str) -> None:
    door = adapter(name)
    cases = written(name)
    assert cases, f"no recording written by the {name} adapter"
    for _rel, data in cases:
        check_door(door, door.construct(_copy(data)))
        check_door(door, _copy(data))


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_hostile_objects_only_raise_interop_errors(name: str) -> None:
    door = adapter(name)
    cases = written(name)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
        print_blob=True,
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        chooser = HypothesisChooser(data)
        rel, written_form = chooser.choice(cases)
        value = _copy(written_form)
        done = mutate(value, chooser)
        as_object = chooser.boolean()
        data.draw(st.just((rel, done, "object" if as_object else "dict")), label="case")
        if as_object:
            try:
                value = door.construct(value)
            except Exception:
                return  # the library itself refuses to build it: no object reaches us
        check_door(door, value)

    run()
