"""The pydantic base every streamfold model shares, and the JSON-value check for options."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Self, TypeVar, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo

from .errors import InvalidModelError, OptionsError, StreamfoldError

JsonValue = Any
"""A value JSON can hold: None, bool, int, finite float, str, list, str-keyed dict."""


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
        for key, item in value.items():
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
        for item in value:
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


def _check_json_object_field(value: object, info: ValidationInfo) -> dict[str, Any]:
    return check_json_object(value, info.field_name or "mapping")


JsonObject = Annotated[dict[str, Any], BeforeValidator(_check_json_object_field)]
"""An ordered str-keyed mapping of JSON values; anything else is rejected, not converted."""


def _translate(model: str, exc: ValidationError) -> StreamfoldError:
    problems: list[str] = []
    for err in exc.errors():
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, StreamfoldError):
            return original
        loc = ".".join(str(p) for p in err["loc"]) or "(value)"
        problems.append(f"{loc}: {err['msg']}, got {err['input']!r}")
    return InvalidModelError(model, problems)


_M = TypeVar("_M")
_new_object: Callable[[type[_M]], _M] = object.__new__
_set_attribute = object.__setattr__
# BaseModel's slots, set through their descriptors (cheaper than object.__setattr__).
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


class _AllFieldsSet(set[str]):
    """The fields set of every model `trusted` builds: all the class's fields, one set per
    class, so read-only (a change raises TypeError; a copy is a plain set, which is what
    pydantic's model_copy changes). One object less per model for the garbage collector,
    which walks every live fold's objects when thousands are in flight."""

    __slots__ = ()

    def _read_only(self, *args: object) -> None:
        raise TypeError(
            "model_fields_set of a streamfold-built model is shared by its class: expected "
            "no change to it, got one (copy it first)"
        )

    add = discard = remove = update = clear = _read_only
    difference_update = intersection_update = symmetric_difference_update = _read_only
    __ior__ = __iand__ = __isub__ = __ixor__ = _read_only  # type: ignore[assignment]

    def pop(self) -> str:
        raise TypeError("model_fields_set of a streamfold-built model is shared: read-only")

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return set, (list(self),)


# Each model's field names in declaration order, and the set of them `trusted` gives
# every model it builds (filled as each class is created).
_FIELD_ORDER: dict[type[BaseModel], tuple[str, ...]] = {}
_ALL_FIELDS: dict[type[BaseModel], _AllFieldsSet] = {}


class StreamfoldModel(BaseModel):
    """Frozen, strict-shaped pydantic model whose validation errors are streamfold errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _FIELD_ORDER[cls] = tuple(cls.__pydantic_fields__)
        _ALL_FIELDS[cls] = _AllFieldsSet(cls.__pydantic_fields__)

    @classmethod
    def trusted(cls, **fields: Any) -> Self:
        """`model_construct(**fields)` at a quarter of its cost, for values already checked.

        A fold builds a few models per part (the part, its display item, a tool call's
        copy with its slot index) from values its decoder type-checked; model_construct
        spends most of its time on generality they do not need (defaults, aliases, extra
        fields). Given every field in declaration order, this is the object
        model_construct gives (tests/test_model.py compares them), but for its
        fields set: the class's shared, read-only one; given anything else, it is
        model_construct.
        """
        if tuple(fields) != _FIELD_ORDER[cls]:
            return cast(Self, cls.model_construct(**fields))
        model = _new_object(cls)
        _set_attribute(model, "__dict__", fields)
        _set_fields_set(model, _ALL_FIELDS[cls])
        _set_extra(model, None)
        _set_private(model, None)
        return model

    def replaced(self, **update: Any) -> Self:
        """`model_copy(update=update)` without its cost: `update` is already checked."""
        fields = self.__dict__.copy()
        fields.update(update)
        fields_set = self.__pydantic_fields_set__
        if not update.keys() <= fields_set:
            fields_set = fields_set | update.keys()  # a plain set: this model's own
        model = _new_object(type(self))
        _set_attribute(model, "__dict__", fields)
        _set_fields_set(model, fields_set)
        _set_extra(model, None)
        _set_private(model, None)
        return model

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _translate(type(self).__name__, exc) from exc

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """Validate `obj` into this model, raising a streamfold error on bad input."""
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _translate(cls.__name__, exc) from exc

    @classmethod
    def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
        """Parse JSON into this model, raising a streamfold error on bad input."""
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            raise _translate(cls.__name__, exc) from exc
