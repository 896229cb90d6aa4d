"""The quick JSON check (`_plain_json`) never accepts what the full walk refuses.

check_json_object takes a value whose every part is an exact built-in JSON type without
the full walk; anything else goes through `_check_json`, which also says what is wrong
and where. So the quick check must only ever say True for values the walk accepts.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamfold._model import _check_json, _plain_json, check_json_object
from streamfold.errors import OptionsError


class _Str(str):
    pass


class _Dict(dict[str, Any]):
    pass


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.builds(_Str, st.text(max_size=3)),
    st.just(b"bytes"),
    st.just(object()),
    st.builds(complex, st.integers(), st.integers()),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.one_of(st.text(max_size=3), st.integers(), st.builds(_Str, st.text(max_size=2)))
    return st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children),
        st.dictionaries(keys, children, max_size=4),
        st.builds(_Dict, st.dictionaries(st.text(max_size=2), children, max_size=3)),
        st.frozensets(st.integers(), max_size=2),
    )


_VALUES = st.recursive(_SCALARS, _containers, max_leaves=20)


def _walk_accepts(value: Any) -> bool:
    try:
        _check_json(value, "v")
    except OptionsError:
        return False
    return True


@given(_VALUES)
def test_the_quick_check_accepts_only_what_the_walk_accepts(value: Any) -> None:
    if _plain_json(value):
        assert _walk_accepts(value)


@given(st.dictionaries(st.text(max_size=3), _VALUES, max_size=4))
def test_check_json_object_is_the_walk(value: dict[str, Any]) -> None:
    """Same verdict, and the same error text, as the walk alone."""
    try:
        _check_json(value, "options")
    except OptionsError as exc:
        with pytest.raises(OptionsError) as raised:
            check_json_object(value)
        assert str(raised.value) == str(exc)
    else:
        assert check_json_object(value) is value


def test_the_quick_check_says_true_for_parsed_json() -> None:
    """Not vacuous: what a JSON parser gives takes the quick way."""
    value = {"a": [1, 2.5, None, True, {"b": "c"}], "d": {"e": []}}
    assert _plain_json(value)
    assert not _plain_json({"x": math.nan})
    assert not _plain_json({"x": (1,)})
    assert not _plain_json({1: "int key"})
