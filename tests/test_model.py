"""`StreamfoldModel.trusted` and `.replaced`: the objects model_construct and model_copy give.

The fold builds its parts, display items, messages and usage with them (a quarter
of model_construct's cost); anything pydantic does with a model (equality, repr,
dumps, copies, validation of a dump, hashing of a frozen model) must not tell them apart.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamfold import ContentPart, Message, ToolCall, Usage, fold
from streamfold._model import StreamfoldModel
from streamfold.display import DisplayItem
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


@given(index=st.integers(0, 10**6), status=st.sampled_from(["incomplete", "complete"]))
def test_replaced_is_model_copy(index: int, status: str) -> None:
    call = ToolCall(call_id="c", name="f", arguments={"a": [1]}, metadata={"k": 1})
    _same(call.replaced(index=index), call.model_copy(update={"index": index}))
    both = {"index": index, "status": status}
    _same(call.replaced(**both), call.model_copy(update=both))
    # The original is untouched, and the copy shares nothing mutable it did not before.
    assert call.index is None
    assert call.replaced(index=index).metadata is call.model_copy().metadata


def test_a_folded_message_is_the_validated_one() -> None:
    """Every model a fold builds trusted is one validation would accept unchanged."""
    from support import read

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
