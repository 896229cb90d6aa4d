"""`StreamfoldModel.trusted` and `.replaced`: the objects model_construct and model_copy give;
`json_depth_over` and the quick JSON check (`_plain_json`) against the full walks.

The fold builds its parts, display items, messages and usage with them (a quarter
of model_construct's cost); anything pydantic does with a model (equality, repr,
dumps, copies, validation of a dump, hashing of a frozen model) must not tell them apart.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import read, reference_depth_over

from streamfold import ContentPart, Message, MessageDelta, ToolCall, Usage, construct, fold
from streamfold._model import StreamfoldModel
from streamfold.construct import _check_json, _plain_json, check_json_object
from streamfold.display import DisplayItem
from streamfold.errors import InvalidModelError, OptionsError
from streamfold.limits import json_depth_over
from streamfold.parts import Citation, CitationSource

_EXAMPLES: list[tuple[type[StreamfoldModel], dict[str, Any]]] = [
    (
        ContentPart,
        {"type": "text", "content": "hi", "options": {"a": [1]}, "citations": []},
    ),
    (
        ToolCall,
        {
            "call_id": "c",
            "name": "f",
            "arguments": {"x": 1},
            "index": 2,
            "status": "complete",
            "metadata": {"m": None},
        },
    ),
    (
        Usage,
        {
            "input_tokens": 1,
            "output_tokens": 2,
            "cache_read_tokens": None,
            "cache_write_tokens": 0,
            "reasoning_tokens": None,
            "raw": {"input_tokens": 1},
            "cumulative": True,
        },
    ),
    (DisplayItem, {"type": "text", "message_type": "assistant", "content": {"text": "x"}}),
    (
        Citation,
        {
            "cited_text": "c",
            "source": CitationSource(type="web", url="https://example.com"),
            "start_index": 0,
            "end_index": 1,
            "confidence": None,
            "metadata": {},
        },
    ),
    (
        Message,
        {
            "role": "assistant",
            "content": [ContentPart.text("a")],
            "tool_calls": [],
            "tool_results": [],
            "status": "complete",
            "usage": None,
            "stop_reason": "stop",
            "raw_stop_reason": "end_turn",
            "metadata": {"provider": "anthropic"},
        },
    ),
]


def _same(a: StreamfoldModel, b: StreamfoldModel, *, whole: bool = True) -> None:
    assert type(a) is type(b)
    assert a == b
    assert a.__dict__ == b.__dict__
    assert list(a.__dict__) == list(b.__dict__)
    assert a.model_fields_set == b.model_fields_set
    assert a.__pydantic_extra__ == b.__pydantic_extra__
    assert a.__pydantic_private__ == b.__pydantic_private__
    assert repr(a) == repr(b)
    assert a.model_dump_json() == b.model_dump_json()
    assert a.model_dump(exclude_unset=True) == b.model_dump(exclude_unset=True)
    if whole:  # every required field given: its dump validates back to the same
        assert type(a).model_validate(a.model_dump()) == b


@pytest.mark.parametrize(("cls", "fields"), _EXAMPLES, ids=lambda x: getattr(x, "__name__", ""))
def test_trusted_is_model_construct(cls: type[StreamfoldModel], fields: dict[str, Any]) -> None:
    _same(cls.trusted(**fields), cls.model_construct(**fields))
    # The pipeline's compiled modules call the function behind the method directly.
    _same(construct.trusted(cls, dict(fields)), cls.model_construct(**fields))


@pytest.mark.parametrize(("cls", "fields"), _EXAMPLES, ids=lambda x: getattr(x, "__name__", ""))
def test_trusted_with_fewer_or_reordered_fields_is_still_model_construct(
    cls: type[StreamfoldModel], fields: dict[str, Any]
) -> None:
    names = list(fields)
    fewer = {k: fields[k] for k in names[1:]}
    reordered = {k: fields[k] for k in reversed(names)}
    for given_fields in (fewer, reordered, {}):
        if cls is Message and "role" not in given_fields:
            continue  # role has no default: model_construct leaves it unset too
        _same(cls.trusted(**given_fields), cls.model_construct(**given_fields), whole=False)
        built = construct.trusted(cls, dict(given_fields))
        _same(built, cls.model_construct(**given_fields), whole=False)


@given(index=st.integers(0, 10**6), status=st.sampled_from(["incomplete", "complete"]))
def test_replaced_is_model_copy(index: int, status: str) -> None:
    call = ToolCall(call_id="c", name="f", arguments={"a": [1]}, metadata={"k": 1})
    _same(call.replaced(index=index), call.model_copy(update={"index": index}))
    _same(construct.replaced(call, {"index": index}), call.model_copy(update={"index": index}))
    both = {"index": index, "status": status}
    _same(call.replaced(**both), call.model_copy(update=both))
    # The original is untouched, and the copy shares nothing mutable it did not before.
    assert call.index is None
    assert call.replaced(index=index).metadata is call.model_copy().metadata


def test_a_folded_message_is_the_validated_one() -> None:
    """Every model a fold builds trusted is one validation would accept unchanged."""

    for rel in ("anthropic/web-search-citations.sse", "openai-responses/function-call.sse"):
        for event in fold([read(rel)]):
            if event.type == "message_completed":
                message = event.message
                assert Message.model_validate(message.model_dump()) == message
                assert Message.model_validate_json(message.model_dump_json()) == message


def test_trusted_models_share_their_class_fields_set_read_only() -> None:
    """One fields set per class (one object less per model for the collector), so a change
    to it raises; copies (copy, deepcopy, pickle, model_copy) get a plain set of their own
    and work as pydantic's do."""
    import copy
    import pickle

    a = ToolCall.trusted(
        call_id="a", name="f", arguments={"x": 1}, index=0, status="complete", metadata={}
    )
    b = ToolCall.trusted(
        call_id="b", name="f", arguments={"x": 2}, index=1, status="complete", metadata={}
    )
    assert a.model_fields_set is b.model_fields_set
    assert a.model_fields_set == set(ToolCall.model_fields)
    for change in (
        lambda s: s.add("x"),
        lambda s: s.discard("index"),
        lambda s: s.remove("index"),
        lambda s: s.update({"x"}),
        lambda s: s.clear(),
        lambda s: s.pop(),
        lambda s: s.difference_update({"index"}),
    ):
        with pytest.raises(TypeError, match=r"read-only|no change"):
            change(a.model_fields_set)
    assert a.model_fields_set == set(ToolCall.model_fields)
    for copied in (
        copy.copy(a),
        copy.deepcopy(a),
        pickle.loads(pickle.dumps(a)),
        a.model_copy(update={"index": 5}),
        a.model_copy(update={"index": 5}, deep=True),
    ):
        assert type(copied.model_fields_set) is set
        copied.model_fields_set.add("probe")  # its own: the shared one is untouched
        assert "probe" not in a.model_fields_set
    assert a.model_copy(update={"index": 5}).index == 5
    assert a.model_dump(exclude_unset=True) == a.model_dump()
    # replaced() keeps the shared set when every field was set already.
    assert a.replaced(index=3).model_fields_set is a.model_fields_set


# --- json_depth_over: the one-pass walk the per-part checks use, against the reference ------


_VALUES: list[object] = [
    None,
    "x",
    {},
    [],
    (),
    {"a": 1},
    [{}, []],
    {"a": {"b": [1, 2, {"c": 3}]}, "d": "x"},
    [[[[]]], {"k": ({"t": [1]},)}],
    ({"a": [1]}, [2]),
]


@pytest.mark.parametrize("value", _VALUES)
@pytest.mark.parametrize("limit", [0, 1, 2, 3, 4, 128])
def test_json_depth_over_matches_the_reference(value: object, limit: int) -> None:
    assert json_depth_over(value, limit) == reference_depth_over(value, limit)


class _Dict(dict[str, Any]):
    """A dict subclass: a container to the walk, not an exact JSON type."""


_NESTED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=2),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=2), inner, max_size=3)
        | st.dictionaries(st.text(max_size=2), inner, max_size=2).map(_Dict)
    ),
    max_leaves=15,
)


@settings(max_examples=500, deadline=None)
@given(value=_NESTED, limit=st.integers(0, 6))
def test_json_depth_over_matches_the_reference_for_any_value(value: object, limit: int) -> None:
    # The quick answer for values at most two deep must never differ from the walk.
    assert json_depth_over(value, limit) == reference_depth_over(value, limit)


# --- The quick JSON check (`_plain_json`) never accepts what the full walk refuses --------
#
# check_json_object takes a value whose every part is an exact built-in JSON type without
# the full walk; anything else goes through `_check_json`, which also says what is wrong
# and where. So the quick check must only ever say True for values the walk accepts.


class _Str(str):
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


_JSON_LIKE = st.recursive(_SCALARS, _containers, max_leaves=20)


def _walk_accepts(value: Any) -> bool:
    try:
        _check_json(value, "v")
    except OptionsError:
        return False
    return True


@given(_JSON_LIKE)
def test_the_quick_check_accepts_only_what_the_walk_accepts(value: Any) -> None:
    if _plain_json(value):
        assert _walk_accepts(value)


@given(st.dictionaries(st.text(max_size=3), _JSON_LIKE, max_size=4))
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


@pytest.mark.parametrize(
    ("cls", "value"),
    [
        (Message, {1: 2}),
        (Message, {"role": "assistant", "content": [{1: "text"}]}),
        (Message, {"role": "assistant", "usage": {1: 2}}),
        (Message, {"role": "assistant", "tool_calls": [{("a",): 1}]}),
        (MessageDelta, {1: 2}),
        (ContentPart, {None: "text"}),
    ],
)
def test_an_object_with_a_key_that_is_not_a_str_is_a_typed_error(
    cls: type[StreamfoldModel], value: dict[Any, Any]
) -> None:
    # pydantic-core gives a nested model's members as keywords: a bare TypeError before.
    with pytest.raises(InvalidModelError, match="expected objects with str keys"):
        cls.model_validate(value)
