"""The pydantic base every streamfold model shares, and the JSON-value check for options."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo

from .construct import ALL_FIELDS, FIELD_ORDER, replaced, trusted
from .construct import check_json_object as check_json_object  # (the models' modules use it)
from .errors import InvalidModelError, StreamfoldError, preview

JsonValue = Any
"""A value JSON can hold: None, bool, int, finite float, str, list, str-keyed dict."""


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
        # A preview: the input can be megabytes long, or nested too deep for repr.
        problems.append(f"{loc}: {err['msg']}, got {preview(err['input'])}")
    return InvalidModelError(model, problems)


def _key_error(model: str, exc: TypeError) -> StreamfoldError:
    # pydantic-core passes an object's members to a nested model as keywords: a dict with a
    # key that is not a str (input from outside, never a bug of ours) fails there as a bare
    # TypeError before any validator can name it.
    return InvalidModelError(model, [f"(value): expected objects with str keys ({exc})"])


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


class StreamfoldModel(BaseModel):
    """Frozen, strict-shaped pydantic model whose validation errors are streamfold errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        FIELD_ORDER[cls] = tuple(cls.__pydantic_fields__)
        ALL_FIELDS[cls] = _AllFieldsSet(cls.__pydantic_fields__)

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
        return trusted(cls, fields)

    def replaced(self, **update: Any) -> Self:
        """`model_copy(update=update)` without its cost: `update` is already checked."""
        return replaced(self, update)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _translate(type(self).__name__, exc) from exc
        except TypeError as exc:
            raise _key_error(type(self).__name__, exc) from exc

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """Validate `obj` into this model, raising a streamfold error on bad input."""
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _translate(cls.__name__, exc) from exc
        except TypeError as exc:
            raise _key_error(cls.__name__, exc) from exc

    @classmethod
    def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
        """Parse JSON into this model, raising a streamfold error on bad input."""
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            raise _translate(cls.__name__, exc) from exc
