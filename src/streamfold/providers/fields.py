"""The field checks every decoder shares: a value of the JSON type a field must have, or a
StreamProtocolError that says what was expected and what arrived.

Compiled with the decoders (the hot paths call them per delta): the common answer, a
value of the right type, costs one test.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from .base import Decoder

T = TypeVar("T")

# How an error names the type a field must have.
TYPE_NAMES: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
}

_PREVIEW = 40  # characters of a string shown in an error
_PREVIEW_BITS = 128  # an integer wider than this is named by its width, not its digits


def describe(value: Any) -> str:
    """What arrived, for an error message: its type, and a scalar's value (a string cut short)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        cut = len(value) > _PREVIEW
        return f"str {json.dumps(value[:_PREVIEW])}{'...' if cut else ''}"
    if isinstance(value, bool | int | float):
        if isinstance(value, int) and value.bit_length() > _PREVIEW_BITS:
            return f"int of {value.bit_length()} bits"  # (its digits could fill a log)
        return f"{type(value).__name__} {json.dumps(value)}"
    return type(value).__name__


def check(dec: Decoder, value: Any, kind: type[T], name: str, raw: Any) -> T:
    """`value` if it has type `kind` (bools are not integers), else the decoder's protocol error."""
    if type(value) is kind:  # the common answer, in one test (True is a bool, not an int)
        return value
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise dec.protocol_error(
        f"expected {name} to be {TYPE_NAMES.get(kind, kind.__name__)}, got {describe(value)}",
        raw,
    )


def required(dec: Decoder, obj: dict[str, Any], key: str, kind: type[T], raw: Any = None) -> T:
    """A required field of type `kind` (the error carries `raw`, or `obj` when not given)."""
    return check(dec, obj.get(key), kind, key, obj if raw is None else raw)


def event_field(dec: Decoder, event: dict[str, Any], key: str, kind: type[T]) -> T:
    """A required field of an event, named in the error after the event's type
    (`response.output_text.delta.delta`)."""
    value = event.get(key)
    if type(value) is kind:
        return value
    kind_of_event = event.get("type")
    if not isinstance(kind_of_event, str) or len(kind_of_event) > _PREVIEW:
        kind_of_event = "event"  # (the name is the server's: a long one would flood the error)
    return check(dec, value, kind, f"{kind_of_event}.{key}", event)


def optional(
    dec: Decoder,
    obj: dict[str, Any] | None,
    key: str,
    kind: type[T],
    raw: Any = None,
    prefix: str = "",
) -> T | None:
    """An optional field: None when it (or `obj`) is absent or null, else it must have type
    `kind`. `prefix` names where the field is, in the error (e.g. "content_block.")."""
    if obj is None:
        return None
    value = obj.get(key)
    if value is None or type(value) is kind:  # (the name below is only for the error)
        return value
    return check(dec, value, kind, prefix + key, obj if raw is None else raw)


def text_or_none(value: Any) -> str | None:
    """`value` if it is a string, else None: for fields read leniently."""
    return value if isinstance(value, str) else None


def int_or_none(value: Any) -> int | None:
    """`value` if it is an integer (not a bool), else None: for fields read leniently."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
