"""Events are immutable, keyword-only value classes tagged by `type`: not tuples."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from streamfold import (
    ContentPart,
    Event,
    FrozenEventError,
    Message,
    MessageCompleted,
    OutputCompleted,
    OutputFailed,
    OutputItem,
    OutputPartial,
    OutputValidationError,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    ProviderErrored,
    ToolCall,
    Usage,
    UsageError,
    UsageUpdated,
)

MESSAGE = Message(role="assistant", content=[ContentPart.text("hi")])

# One of each event, built from its fields by name, with those fields.
SAMPLES: list[tuple[type[Any], dict[str, Any]]] = [
    (PartStarted, {"index": 0, "part": ContentPart.text("")}),
    (
        PartDelta,
        {
            "index": 1,
            "part_type": "tool_call",
            "content": '{"a"',
            "options": {"k": "v"},
            "citations": (),
            "arguments_changes": (("add", ("a",), ""),),
        },
    ),
    (
        PartCompleted,
        {
            "index": 2,
            "part": ToolCall(call_id="c", name="f"),
            "display_items": (),
            "explicit": True,
        },
    ),
    (PartMarked, {"index": 3, "utterance": "narration", "explicit": False}),
    (UsageUpdated, {"usage": Usage(input_tokens=5)}),
    (
        ProviderErrored,
        {"error_type": "overloaded", "message": "busy", "raw": {}, "partial": MESSAGE},
    ),
    (MessageCompleted, {"message": MESSAGE}),
    (OutputPartial, {"value": {"a": [1]}, "changes": (("set", ("a", 0), 1),)}),
    (OutputItem, {"index": 0, "value": {"a": 1}}),
    (OutputCompleted, {"value": [{"a": 1}]}),
    (OutputFailed, {"error": OutputValidationError("expected JSON", "{", [{"type": "x"}])}),
]
IDS = [cls.__name__ for cls, _ in SAMPLES]


@pytest.mark.parametrize(("cls", "fields"), SAMPLES, ids=IDS)
def test_an_event_cannot_be_changed(cls: type[Any], fields: dict[str, Any]) -> None:
    event = cls(**fields)
    for name in [*fields, "type", "other"]:
        with pytest.raises(FrozenEventError, match=f"{cls.__name__} is immutable.*'{name}'"):
            setattr(event, name, None)
        with pytest.raises(FrozenEventError, match="deletion"):
            delattr(event, name)
    assert {name: getattr(event, name) for name in fields} == fields
    # The conventional types too: caller misuse, and a read-only attribute.
    assert issubclass(FrozenEventError, UsageError)
    assert issubclass(FrozenEventError, AttributeError)


@pytest.mark.parametrize(("cls", "fields"), SAMPLES, ids=IDS)
def test_an_event_is_built_by_keyword_only(cls: type[Any], fields: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        cls(*fields.values())
    with pytest.raises(TypeError):
        cls(**fields, type=cls.type)  # the tag is the class's, never an argument
    assert cls(**fields).type == cls.type


@pytest.mark.parametrize(("cls", "fields"), SAMPLES, ids=IDS)
def test_an_event_is_not_a_tuple(cls: type[Any], fields: dict[str, Any]) -> None:
    event = cls(**fields)
    assert not isinstance(event, tuple)
    with pytest.raises(TypeError):
        event[0]
    with pytest.raises(TypeError):
        len(event)
    with pytest.raises(TypeError):
        _first, *_rest = event
    assert event != tuple(fields.values())
    assert not hasattr(event, "_replace")
    assert not hasattr(event, "count")


@pytest.mark.parametrize(("cls", "fields"), SAMPLES, ids=IDS)
def test_events_are_equal_by_value(cls: type[Any], fields: dict[str, Any]) -> None:
    event = cls(**fields)
    same = cls(**copy.deepcopy(fields))
    assert event == same
    if _hashable(fields):
        assert hash(event) == hash(same)
    first = next(iter(fields))
    assert event != cls(**{**fields, first: _other(fields[first])})
    # Another event type never equals it, whatever its fields.
    for other_cls, other_fields in SAMPLES:
        if other_cls is not cls:
            assert event != other_cls(**other_fields)


@pytest.mark.parametrize(("cls", "fields"), SAMPLES, ids=IDS)
def test_copies_and_pickles_are_equal_events(cls: type[Any], fields: dict[str, Any]) -> None:
    event = cls(**fields)
    for twin in (copy.copy(event), copy.deepcopy(event), pickle.loads(pickle.dumps(event))):
        assert type(twin) is cls
        assert twin == event


def test_the_repr_names_every_field() -> None:
    event = PartDelta(index=0, part_type="text", content="hi")
    assert repr(event) == (
        "PartDelta(index=0, part_type='text', content='hi', options=None, citations=(), "
        "arguments_changes=())"
    )
    assert eval(repr(PartMarked(index=1, utterance="answer", explicit=True))) == PartMarked(
        index=1, utterance="answer", explicit=True
    )


def _describe(event: Event) -> str:
    match event:
        case PartDelta(index, "text", content):
            return f"text {index}: {content}"
        case PartDelta(part_type="tool_call", content=text):
            return f"arguments: {text}"
        case PartMarked(index=index, utterance="narration"):
            return f"narration {index}"
        case PartStarted() | PartCompleted() | PartMarked():
            return event.type
        case MessageCompleted(message=Message(status=status)):
            return f"done: {status}"
        case _:
            return "other"


def test_events_match_by_position_and_by_keyword() -> None:
    assert _describe(PartDelta(index=0, part_type="text", content="hi")) == "text 0: hi"
    assert _describe(PartDelta(index=0, part_type="tool_call", content="{")) == "arguments: {"
    assert _describe(PartMarked(index=2, utterance="narration", explicit=True)) == "narration 2"
    assert _describe(PartMarked(index=2, utterance="answer", explicit=True)) == "part_marked"
    assert _describe(MessageCompleted(message=MESSAGE)) == "done: complete"
    assert _describe(UsageUpdated(usage=Usage())) == "other"


def _hashable(fields: dict[str, Any]) -> bool:
    try:
        hash(tuple(fields.values()))
    except TypeError:
        return False
    return True


def _other(value: Any) -> Any:
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "!"
    if isinstance(value, Usage):
        return Usage(input_tokens=6)
    if isinstance(value, Message):
        return Message(role="assistant", content=[])
    return ContentPart.text("other")
