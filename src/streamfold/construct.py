"""Models built from values already checked, and the JSON-value check they rely on.

Compiled (the pydantic model classes are not: see _build.py): the fold builds a few models
per part and per message, and checks the raw JSON a usage report carries; done in
interpreted code, the calls cost more than the work. `_model` re-exports the check.
"""

from __future__ import annotations

import math
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from .errors import OptionsError


def _check_json(value: object, path: str) -> None:
    # Walk the value instead of relying on pydantic's JsonValue: that one converts
    # tuples to lists silently, and DESIGN.md forbids silent conversion.
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise OptionsError(
                f"{path}: expected a JSON value, got {value!r} (JSON has no {value})"
            )
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise OptionsError(
                    f"{path}: expected str keys, got key {key!r} of type {type(key).__name__}"
                )
            _check_json(item, f"{path}[{key!r}]")
        return
    raise OptionsError(
        f"{path}: expected a JSON value (None, bool, int, float, str, list, dict), "
        f"got {type(value).__name__} {value!r}"
    )


def _plain_json(value: Any) -> bool:
    """True when `value` is JSON made of exact built-in types (what a JSON parser gives).

    The quick answer for nearly every value; False sends it to `_check_json`, which
    accepts subclasses too and says what is wrong and where (building each path on the
    way costs more than the walk).
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is dict:
        members: dict[Any, Any] = value  # (typed: compiled, a dict's own walk)
        for key, item in members.items():
            if type(key) is not str:
                return False
            # A string, int, bool or null member without a call (most of them).
            kind = type(item)
            if not (kind is str or kind is int or kind is bool or item is None) and (
                not _plain_json(item)
            ):
                return False
        return True
    if kind is list:
        items: list[Any] = value
        for item in items:
            kind = type(item)
            if not (kind is str or kind is int or kind is bool or item is None) and (
                not _plain_json(item)
            ):
                return False
        return True
    return False


def check_json_object(value: object, name: str = "options") -> dict[str, Any]:
    """Return `value` if it is a str-keyed dict of JSON values, else raise OptionsError."""
    if type(value) is dict and _plain_json(value):
        return value
    if not isinstance(value, dict):
        raise OptionsError(f"{name}: expected a dict with str keys, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str):
            raise OptionsError(
                f"{name}: expected str keys, got key {key!r} of type {type(key).__name__}"
            )
        _check_json(item, f"{name}[{key!r}]")
    return value


_M = TypeVar("_M", bound=BaseModel)

# Each model's field names in declaration order, and the one read-only set of them every
# model `trusted` builds shares (_model fills both as each model class is created).
FIELD_ORDER: Final[dict[type, tuple[str, ...]]] = {}
ALL_FIELDS: Final[dict[type, set[str]]] = {}

_new_object: Final = object.__new__
# BaseModel's slots, set through their descriptors (its __setattr__ refuses: frozen).
_set_dict: Final = BaseModel.__dict__["__dict__"].__set__
_set_fields_set: Final = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra: Final = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private: Final = BaseModel.__dict__["__pydantic_private__"].__set__


def trusted(cls: type[_M], fields: dict[str, Any]) -> _M:
    """`cls.model_construct(**fields)` for values already checked: see
    `StreamfoldModel.trusted`, which is this. `fields` becomes the model's own."""
    if not _in_field_order(fields, FIELD_ORDER[cls]):
        return cls.model_construct(**fields)
    return _new_model(cls, fields, ALL_FIELDS[cls])


def _in_field_order(fields: dict[str, Any], order: tuple[str, ...]) -> bool:
    """`tuple(fields) == order`, without the tuple."""
    return len(fields) == len(order) and all(name == order[at] for at, name in enumerate(fields))


def replaced(model: _M, update: dict[str, Any]) -> _M:
    """`model.model_copy(update=update)` for values already checked: see
    `StreamfoldModel.replaced`, which is this."""
    fields = model.__dict__.copy()
    fields.update(update)
    fields_set: set[str] = model.__pydantic_fields_set__
    if not update.keys() <= fields_set:
        fields_set = fields_set | update.keys()  # a plain set: this model's own
    return _new_model(type(model), fields, fields_set)


def _new_model(cls: type[_M], fields: dict[str, Any], fields_set: set[str]) -> _M:
    """A `cls` holding `fields` (its __dict__) and `fields_set`, with no extra or private
    values: what model_construct leaves, without its checks."""
    model: _M = _new_object(cls)
    _set_dict(model, fields)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model
