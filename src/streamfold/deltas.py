"""Neutral deltas: what a provider decoder hands the accumulator.

A decoder turns one provider event into a list of these (one is built per delta, so
they must be cheap). They name a part by a
decoder-chosen `key` (Anthropic's block index, a Responses item id, a Chat tool-call
index...); the accumulator gives each part its slot index in the message.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final, Literal, NamedTuple

from .message import Role, Status, StopReason, ToolCall, Usage
from .parts import Citation, ContentPart


class OpenPart(NamedTuple):
    """A part or tool call begins; `part` holds whatever the start event carried.

    `tool`: an opaque part that is tool activity the provider runs itself (a server tool
    block, a built-in tool item, executable code): like a ToolCall, it makes the text
    before it narration.
    """

    key: Hashable
    part: ContentPart | ToolCall
    tool: bool = False


class GrowPart:
    """More of an open part: content text (argument text for a tool call), options, citations.

    Options in `STREAMED_OPTIONS` (the signature) concatenate; others replace. For a tool
    call, options merge into its metadata.
    """

    # A plain class, built by position: decoders make one for nearly every event, and it
    # costs what the named tuple built with tuple.__new__ did interpreted (~85 ns) and a
    # quarter of that compiled.
    __slots__ = ("citations", "content", "key", "options")

    def __init__(
        self,
        key: Hashable,
        content: str | None = None,
        options: Mapping[str, Any] | None = None,
        citations: tuple[Citation, ...] = (),
    ) -> None:
        self.key = key
        self.content = content
        self.options = options
        self.citations = citations

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GrowPart):
            return NotImplemented
        return (self.key, self.content, self.options, self.citations) == (
            other.key,
            other.content,
            other.options,
            other.citations,
        )

    def __repr__(self) -> str:
        return (
            f"GrowPart({self.key!r}, content={self.content!r}, options={self.options!r}, "
            f"citations={self.citations!r})"
        )


class ClosePart(NamedTuple):
    """A part ended. `explicit` says the wire said so; `final` replaces what was accumulated."""

    key: Hashable
    explicit: bool = True
    final: ContentPart | ToolCall | None = None


class UpdateMessage(NamedTuple):
    """Message-level news: status, stop reason, usage, metadata (merged key by key).

    `role`: the message's role, for a stream that says it (the fold's role otherwise).
    """

    status: Status | None = None
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    usage: Usage | None = None
    metadata: Mapping[str, Any] | None = None
    role: Role | None = None


class ReportError(NamedTuple):
    """The provider reported an error in the stream; the fold ends with status error."""

    error_type: str | None
    message: str
    raw: Any = None


class EndMessage(NamedTuple):
    """The wire said the message is over (message_stop, response.completed, [DONE], ...)."""

    end: Literal["end"] = "end"


class SkipEvent(NamedTuple):
    """An event type the decoder does not know; counted in the message metadata."""

    event_type: str


class Repair(NamedTuple):
    """A lenient decoder fixed an out-of-spec event; counted in metadata["repairs"]."""

    kind: str


Delta = (
    OpenPart | GrowPart | ClosePart | UpdateMessage | ReportError | EndMessage | SkipEvent | Repair
)


# The compiled decoders build the deltas every stream has through these: a named tuple's
# own constructor is interpreted Python (collections.namedtuple writes its __new__), which
# costs ~3x a compiled call and tuple.__new__. Each gives what its class called with the
# same arguments gives (tests/test_deltas.py compares them).
_new_tuple: Final = tuple.__new__

END_MESSAGE: Final = EndMessage()
"""The one EndMessage (a tuple: nothing in it can change)."""


def open_part(key: Hashable, part: ContentPart | ToolCall, tool: bool = False) -> OpenPart:
    """`OpenPart(key, part, tool)`, compiled."""
    return _new_tuple(OpenPart, (key, part, tool))


def close_part(
    key: Hashable, explicit: bool = True, final: ContentPart | ToolCall | None = None
) -> ClosePart:
    """`ClosePart(key, explicit, final)`, compiled."""
    return _new_tuple(ClosePart, (key, explicit, final))


def update_message(
    *,
    status: Status | None = None,
    stop_reason: StopReason | None = None,
    raw_stop_reason: str | None = None,
    usage: Usage | None = None,
    metadata: Mapping[str, Any] | None = None,
    role: Role | None = None,
) -> UpdateMessage:
    """`UpdateMessage(...)`, compiled."""
    return _new_tuple(UpdateMessage, (status, stop_reason, raw_stop_reason, usage, metadata, role))
