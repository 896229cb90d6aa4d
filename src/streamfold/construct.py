"""Models built from values already checked, and the JSON-value check they rely on.

Compiled (the pydantic model classes are not: see _build.py): the fold builds a few models
per part and per message, and checks the raw JSON a usage report carries; done in
interpreted code, the calls cost more than the work. `_model` re-exports the check.
"""

from __future__ import annotations

import math
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from .errors import OptionsError, preview
from .limits import MAX_JSON_DEPTH

# A key in an error path shows as its repr cut to this: a key can be megabytes long.
_KEY_PREVIEW_CHARS = 60


def _check_json(value: object, path: str, depth: int = 1) -> None:
    """Raise OptionsError, naming where, unless `value` is a JSON value at most
    MAX_JSON_DEPTH deep (`depth`: the level `value` sits at).

    Walk the value instead of relying on pydantic's JsonValue: that one converts tuples to
    lists silently, and DESIGN.md forbids silent conversion. Iterative, with the depth
    bounded: the input chooses how deep it nests, and a recursive walk of a value 70,000
    deep overflows the C stack compiled (a crash, not an exception) and raises
    RecursionError interpreted. The walk keeps the recursive walk's order, so the problem
    named is the first in document order.
    """
    _check_json_item(value, path, depth)
    if not isinstance(value, list | dict):
        return
    # One iterator per open container, innermost last: (its members, its depth).
    stack: list[tuple[Any, int]] = [(_members(value, path), depth)]
    while stack:
        members, level = stack[-1]
        member = next(members, None)
        if member is None:
            stack.pop()
            continue
        item, item_path = member
        _check_json_item(item, item_path, level + 1)
        if isinstance(item, list | dict):
            stack.append((_members(item, item_path), level + 1))


def _members(value: Any, path: str) -> Any:
    """(item, path) for each member of a list or dict, lazily: a path is built as its
    member is reached, and a non-str key raises then (after the members before it)."""
    if isinstance(value, list):
        return ((item, f"{path}[{i}]") for i, item in enumerate(value))
    return ((item, f"{path}[{_key_text(key, path)}]") for key, item in value.items())


def _key_text(key: object, path: str) -> str:
    if not isinstance(key, str):
        raise OptionsError(
            f"{path}: expected str keys, got key {preview(key)} of type {type(key).__name__}"
        )
    return preview(key, _KEY_PREVIEW_CHARS)


def _check_json_item(value: object, path: str, depth: int) -> None:
    """Raise OptionsError unless `value` is a JSON scalar, or a list or dict no deeper
    than MAX_JSON_DEPTH (its members are the walk's to check)."""
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise OptionsError(
                f"{path}: expected a JSON value, got {value!r} (JSON has no {value})"
            )
        return
    if isinstance(value, list | dict):
        if depth > MAX_JSON_DEPTH:
            raise OptionsError(
                f"{path}: expected a JSON value at most {MAX_JSON_DEPTH} levels deep, "
                "got one nested deeper"
            )
        return
    raise OptionsError(
        f"{path}: expected a JSON value (None, bool, int, float, str, list, dict), "
        f"got {type(value).__name__} {preview(value)}"
    )


def _plain_json(value: Any) -> bool:
    """True when `value` is JSON made of exact built-in types (what a JSON parser gives),
    at most MAX_JSON_DEPTH deep.

    The quick answer for nearly every value; False sends it to `_check_json`, which
    accepts subclasses too and says what is wrong and where (building each path on the
    way costs more than the walk). Iterative, as `_check_json` is, for the same reason.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is not dict and kind is not list:
        return False
    # The containers still to walk, a level below the one that held them: made only when
    # a member is a container (one call, no list, for a dict of scalars).
    nested: list[tuple[Any, int]] | None = None
    container: Any = value
    depth = 1
    while True:
        if type(container) is dict:
            members: dict[Any, Any] = container  # (typed: compiled, a dict's own walk)
            for key, item in members.items():
                if type(key) is not str:
                    return False
                # A string, int, bool or null member without more (most of them).
                kind = type(item)
                if kind is str or kind is int or kind is bool or item is None:
                    continue
                if kind is dict or kind is list:
                    if nested is None:
                        nested = []
                    nested.append((item, depth + 1))
                elif kind is not float or not math.isfinite(item):
                    return False
        else:
            items: list[Any] = container
            for item in items:
                kind = type(item)
                if kind is str or kind is int or kind is bool or item is None:
                    continue
                if kind is dict or kind is list:
                    if nested is None:
                        nested = []
                    nested.append((item, depth + 1))
                elif kind is not float or not math.isfinite(item):
                    return False
        if not nested:
            return True
        container, depth = nested.pop()
        if depth > MAX_JSON_DEPTH:
            return False


def check_json_value(value: object, name: str) -> None:
    """Raise OptionsError unless `value` is a JSON value at most MAX_JSON_DEPTH deep (a
    list or dict is the first level)."""
    if not _plain_json(value):
        _check_json(value, name)


def check_json_object(value: object, name: str = "options") -> dict[str, Any]:
    """Return `value` if it is a str-keyed dict of JSON values at most MAX_JSON_DEPTH
    deep (the dict is the first level), else raise OptionsError."""
    if type(value) is dict and _plain_json(value):
        return value
    if not isinstance(value, dict):
        raise OptionsError(f"{name}: expected a dict with str keys, got {type(value).__name__}")
    _check_json(value, name)
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
