"""The building blocks of the saved-state models each box declares beside itself.

A saved state is data, never code: each box (framer, decoder, accumulator, the fold)
says what it needs to resume as a strict, closed pydantic model built from these, and
rebuilds itself from a validated one with its own constructor. Nothing here names a
class or a module; `streamfold.state` holds the envelope that puts the boxes together.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Hashable
from typing import Annotated, Any, TypeAlias

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    PlainSerializer,
    ValidationError,
)
from pydantic_core import CoreSchema

from .construct import check_json_value
from .errors import OptionsError, StateError, preview
from .limits import MAX_JSON_DEPTH, json_depth_over


class BoxState(BaseModel):
    """A box's saved state: strict types, no extra fields, immutable once validated."""

    # Built on first use: a fold that never saves pays nothing at import.
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, defer_build=True)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[BaseModel], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        # Every list and dict of a state stops at its first bad member: pydantic would
        # otherwise record one error per member, and a state of a million bad entries
        # took gigabytes and half a minute to refuse (a StateError names the first one
        # only). A copy: the schemas of the public models inside (Message, ContentPart)
        # are shared with those models, which keep reporting every error.
        schema = copy.deepcopy(handler(source))
        _fail_fast(schema)
        return schema


def _fail_fast(schema: Any) -> None:
    """Set fail_fast on every list, tuple, set and dict schema inside `schema` (a core
    schema: dicts and lists; iterative, as the schema of a model can nest deep)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            kind = node.get("type")
            if isinstance(kind, str) and kind in _SEQUENCES:
                node["fail_fast"] = True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


_SEQUENCES = frozenset({"list", "tuple", "set", "frozenset", "dict"})


# Counters and sizes: whole numbers, never negative, never past what a fold can reach.
Count = Annotated[int, Field(ge=0, le=2**62)]
# Numbers a provider chose (indexes, sequence numbers): any int JSON can carry sensibly.
Number = Annotated[int, Field(ge=-(2**62), le=2**62)]


def _json_value(value: object) -> object:
    if json_depth_over(value, MAX_JSON_DEPTH) is not None:
        raise ValueError(f"expected a JSON value at most {MAX_JSON_DEPTH} deep")
    try:
        check_json_value(value, "value")
    except OptionsError as exc:
        raise ValueError(str(exc)) from None
    return value


def _json_object(value: object) -> object:
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return _json_value(value)


# A JSON value a box keeps as it came (a provider block, options, a raw event): checked,
# not converted. The depth is MAX_JSON_DEPTH, the bound of every JSON value streamfold
# keeps (streamfold.state checks the whole document against it before any model sees it).
Json = Annotated[Any, BeforeValidator(_json_value)]
JsonObject = Annotated[dict[str, Any], BeforeValidator(_json_object)]


def _bytes_in(value: object) -> bytes:
    if type(value) is bytes:  # a model built in this process
        return value
    if not isinstance(value, str):
        raise ValueError("expected base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("expected base64 text (no other characters)") from None


# Bytes (a framer's buffer), written as base64 text.
Bytes = Annotated[
    bytes,
    BeforeValidator(_bytes_in),
    PlainSerializer(lambda b: base64.b64encode(b).decode("ascii"), return_type=str),
]


def _key_in(value: object) -> Hashable:
    return _key(value, 0)


def _key(value: object, depth: int) -> Hashable:
    if type(value) is int or type(value) is str:
        return value
    if type(value) is list and depth < 4:
        return tuple(_key(item, depth + 1) for item in value)
    if type(value) is tuple and depth < 4:  # a model built in this process
        return tuple(_key(item, depth + 1) for item in value)
    raise ValueError("expected a part key (an int, a str, or a list of them, at most 4 deep)")


def _key_out(key: Hashable) -> Any:
    return [_key_out(item) for item in key] if isinstance(key, tuple) else key


# A decoder's name for a part (Hashable in the fold): an int, a str, or a tuple of keys,
# written as a list.
Key: TypeAlias = Annotated[
    Hashable, BeforeValidator(_key_in), PlainSerializer(_key_out, return_type=Any)
]


def validation_error(exc: ValidationError) -> StateError:
    """The one StateError for a state model's validation errors: the first one's field."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    field = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in first["loc"])
    got = f", got {preview(first['input'], 80)}" if "input" in first else ""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return StateError(field.replace(".[", "["), first["msg"] + got + more)
