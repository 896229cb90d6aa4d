"""Helpers the encoder tests share: strict validation against the official SDK types."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import pydantic
from support import entry, read, recordings

from streamfold import Message, fold_message

# Which encoder replays the Message folded from a recording, by the recording's API.
API_TARGET = {
    "messages": "anthropic",
    "chat-completions": "openai-chat",
    "responses": "openai-responses",
    "gemini": "gemini",
}


def target_recordings(target: str) -> list[str]:
    """The recordings whose Message a `target` encoder replays as its own history."""
    return [r for r in recordings() if API_TARGET.get(entry(r)["api"]) == target]


def roundtrip_message(rel: str) -> Message:
    """decode -> Message -> JSON -> Message."""
    folded = fold_message([read(rel)])
    return Message.model_validate_json(folded.model_dump_json())


@cache
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    # extra="forbid": a key the SDK type does not know is an error, not silently ignored.
    # Wrapped in a list: pydantic refuses `config` on a bare TypedDict, not on a container.
    return pydantic.TypeAdapter(list[tp], config=pydantic.ConfigDict(extra="forbid"))


def _materialize(value: Any) -> Any:
    # Iterable[...] fields validate lazily: walk them so every nested item is checked.
    if isinstance(value, dict):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_materialize(v) for v in value]
    if isinstance(value, Iterator):
        return [_materialize(v) for v in value]
    return value


def validate(tp: Any, value: Any) -> Any:
    """Validate `value` (plain JSON) against an SDK TypedDict type, nested items included."""
    json.dumps(value)
    return _materialize(_adapter(tp).validate_python([value]))[0]


def validate_json(tp: Any, value: Any) -> Any:
    """Validate through JSON (for pydantic models whose bytes fields are base64 on the wire)."""
    return pydantic.TypeAdapter(tp).validate_json(json.dumps(value))
