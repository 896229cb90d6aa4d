"""The events a fold yields: part lifecycle, usage, provider errors, the finished Message.

Events are immutable, keyword-only classes tagged with a `type` literal, equal by value
and matched by field (`case PartDelta(index=i, content=text)`); they are not tuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, NoReturn

from .display import DisplayItem
from .errors import FrozenEventError, OutputValidationError
from .message import Message, ToolCall, Usage
from .partial_json import Change
from .parts import Citation, ContentPart, PartType, Utterance

# The form, measured (a PartDelta built and read, per event): mypyc compiles the
# `object.__setattr__(self, ...)` stores below to direct field writes, so this plain
# __slots__ class costs ~30 ns compiled, against ~120 ns for the named tuple it replaces and
# ~900 ns for a frozen dataclass (whose generated __init__ stays interpreted); `Final`
# attributes are as fast compiled but assignable interpreted. Interpreted, no keyword-only
# immutable class is near a tuple built with tuple.__new__: the keyword call and the stores
# past __setattr__ cost ~300-400 ns each.


class _Event:
    """What every event shares: immutable, equal by value, shown by field."""

    __slots__ = ()
    # The fields, in order: `case PartDelta(i, kind)` matches them, and ==, hash and repr use them.
    __match_args__: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise FrozenEventError(
            f"{type(self).__name__} is immutable: expected no assignment, got one to {name!r}"
        )

    def __delattr__(self, name: str) -> NoReturn:
        raise FrozenEventError(
            f"{type(self).__name__} is immutable: expected no deletion, got one of {name!r}"
        )

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self.__match_args__])

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Event)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        # The fields by name: copy and pickle cannot set them one by one on an immutable event.
        return (_rebuild, (type(self), dict(zip(self.__match_args__, self._values(), strict=True))))


def _rebuild(cls: type[_Event], fields: dict[str, Any]) -> _Event:
    return cls(**fields)


class PartStarted(_Event):
    """A part or tool call began at slot `index` of the message.

    It carries the part's identity and kind (type, ids, options such as a signature),
    never its content: every character, and a tool call's argument text, arrives in
    PartDeltas, also when the provider sent the part whole.
    """

    __match_args__ = ("index", "part")
    __slots__ = __match_args__
    type: Final[Literal["part_started"]] = "part_started"
    index: int
    part: ContentPart | ToolCall

    def __init__(self, *, index: int, part: ContentPart | ToolCall) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "part", part)


class PartDelta(_Event):
    """More of the part at `index`: content (argument text for a tool call), options, citations.

    `arguments_changes`: with `fold(..., partial_arguments=True)`, what this delta's
    argument text added to the tool call's parsed arguments (see
    `streamfold.partial_json`); empty otherwise.
    """

    __match_args__ = ("index", "part_type", "content", "options", "citations", "arguments_changes")
    __slots__ = __match_args__
    type: Final[Literal["part_delta"]] = "part_delta"
    index: int
    part_type: PartType | Literal["tool_call"]
    content: str | None
    options: Mapping[str, Any] | None
    citations: tuple[Citation, ...]
    arguments_changes: tuple[Change, ...]

    def __init__(
        self,
        *,
        index: int,
        part_type: PartType | Literal["tool_call"],
        content: str | None = None,
        options: Mapping[str, Any] | None = None,
        citations: tuple[Citation, ...] = (),
        arguments_changes: tuple[Change, ...] = (),
    ) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "part_type", part_type)
        object.__setattr__(self, "content", content)
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "citations", citations)
        object.__setattr__(self, "arguments_changes", arguments_changes)

    def as_part(self) -> ContentPart | ToolCall:
        """This delta as a part (or tool-call fragment) that `merge_part` accepts."""
        if self.part_type == "tool_call":
            return ToolCall.model_construct(
                call_id=None,
                name=None,
                arguments=self.content,
                index=self.index,
                status="incomplete",
                metadata=dict(self.options or {}),
            )
        return ContentPart.model_construct(
            type=self.part_type,
            content=self.content,
            options=dict(self.options or {}),
            citations=list(self.citations),
        )


class PartCompleted(_Event):
    """The part at `index` is finished; `explicit` says whether the wire said so."""

    __match_args__ = ("index", "part", "display_items", "explicit")
    __slots__ = __match_args__
    type: Final[Literal["part_completed"]] = "part_completed"
    index: int
    part: ContentPart | ToolCall
    display_items: tuple[DisplayItem, ...]
    explicit: bool

    def __init__(
        self,
        *,
        index: int,
        part: ContentPart | ToolCall,
        display_items: tuple[DisplayItem, ...],
        explicit: bool,
    ) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "part", part)
        object.__setattr__(self, "display_items", display_items)
        object.__setattr__(self, "explicit", explicit)


class PartMarked(_Event):
    """The text part at `index` is narration (the turn goes on) or the answer.

    Emitted the moment the marker is known: at the part's start when the provider says
    so (`explicit`), else when a tool part starts after it or when the message ends
    (inferred). The part may be complete already: a UI restyles what it has shown.
    """

    __match_args__ = ("index", "utterance", "explicit")
    __slots__ = __match_args__
    type: Final[Literal["part_marked"]] = "part_marked"
    index: int
    utterance: Utterance
    explicit: bool

    def __init__(self, *, index: int, utterance: Utterance, explicit: bool) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "utterance", utterance)
        object.__setattr__(self, "explicit", explicit)


class UsageUpdated(_Event):
    """The running usage changed."""

    __match_args__ = ("usage",)
    __slots__ = __match_args__
    type: Final[Literal["usage_updated"]] = "usage_updated"
    usage: Usage

    def __init__(self, *, usage: Usage) -> None:
        object.__setattr__(self, "usage", usage)


class ProviderErrored(_Event):
    """The provider reported an error in the stream; `partial` is the message so far."""

    __match_args__ = ("error_type", "message", "raw", "partial")
    __slots__ = __match_args__
    type: Final[Literal["provider_errored"]] = "provider_errored"
    error_type: str | None
    message: str
    raw: Any
    partial: Message

    def __init__(self, *, error_type: str | None, message: str, raw: Any, partial: Message) -> None:
        object.__setattr__(self, "error_type", error_type)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "raw", raw)
        object.__setattr__(self, "partial", partial)


class MessageCompleted(_Event):
    """The fold is over: the final Message, whatever its status.

    `timing`: when the stream's chunks arrived (`StreamTiming.as_dict()`, see
    streamfold.timing), or None (a fold restored finished, an event read back without
    one). Wall-clock facts differ on every run, so they are not the Message's and take no
    part in the event's equality, hash, repr, JSON (`event_to_json`) or
    `case MessageCompleted(m)` matching: two folds of the same bytes give equal events.
    """

    __match_args__ = ("message",)
    __slots__ = ("message", "timing")
    type: Final[Literal["message_completed"]] = "message_completed"
    message: Message
    timing: dict[str, Any] | None

    def __init__(self, *, message: Message, timing: dict[str, Any] | None = None) -> None:
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "timing", timing)

    def _timed(self, timing: dict[str, Any]) -> None:
        """The fold's timing, once its last chunk was timed (before the event goes out)."""
        object.__setattr__(self, "timing", timing)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), {"message": self.message, "timing": self.timing}))


class OutputPartial(_Event):
    """The structured output (`fold(..., output=Model)`) so far, each time it changed.

    `value`: the partial value, validated as far as it arrived (see
    docs/concepts/structured-output.md for the rule); `changes`: what this delta added to
    the output's JSON (`streamfold.partial_json` changes, paths from the output's root).
    `value` is live: the next event may grow the lists it holds in place (that is what
    keeps the cost per delta flat); copy it to keep a snapshot. `changes` are not shared.
    """

    __match_args__ = ("value", "changes")
    __slots__ = __match_args__
    type: Final[Literal["output_partial"]] = "output_partial"
    value: Any
    changes: tuple[Change, ...]

    def __init__(self, *, value: Any, changes: tuple[Change, ...] = ()) -> None:
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "changes", changes)


class OutputItem(_Event):
    """Element `index` of a top-level list output is complete, validated as the element type."""

    __match_args__ = ("index", "value")
    __slots__ = __match_args__
    type: Final[Literal["output_item"]] = "output_item"
    index: int
    value: Any

    def __init__(self, *, index: int, value: Any) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "value", value)


class OutputCompleted(_Event):
    """The structured output, whole and fully validated (as `validate_json` of its text)."""

    __match_args__ = ("value",)
    __slots__ = __match_args__
    type: Final[Literal["output_completed"]] = "output_completed"
    value: Any

    def __init__(self, *, value: Any) -> None:
        object.__setattr__(self, "value", value)


class OutputFailed(_Event):
    """The structured output is not a valid value: `error` says why (its raw text, pydantic's
    errors). The fold goes on: the Message is complete all the same."""

    __match_args__ = ("error",)
    __slots__ = __match_args__
    type: Final[Literal["output_failed"]] = "output_failed"
    error: OutputValidationError

    def __init__(self, *, error: OutputValidationError) -> None:
        object.__setattr__(self, "error", error)


Event = (
    PartStarted
    | PartDelta
    | PartCompleted
    | PartMarked
    | UsageUpdated
    | ProviderErrored
    | MessageCompleted
    | OutputPartial
    | OutputItem
    | OutputCompleted
    | OutputFailed
)
