"""The error classes: one root, caller misuse apart from broken provider streams."""

from __future__ import annotations

from typing import Any

# A raw event can be large (a whole image); error messages show only its start.
_RAW_PREVIEW_CHARS = 300
# Containers nested deeper than this show as `...`: a hostile payload nested a thousand
# deep must not make an error's text raise RecursionError.
_PREVIEW_DEPTH = 20
# The most of a protocol error's reason that is kept: each decoder previews what it quotes,
# and this is the backstop for one that did not.
_REASON_CHARS = 1_000


# The most of a saved state's field path an error keeps.
_FIELD_CHARS = 300


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "... (more)"


def preview(raw: object, limit: int = _RAW_PREVIEW_CHARS) -> str:
    """Return repr(raw) cut to `limit` characters, so a payload cannot flood a log.

    Built piece by piece up to the limit, never whole: neither the size of `raw` nor its
    nesting can make this slow or make it raise.
    """
    pieces: list[str] = []
    _preview_into(raw, pieces, limit + 1, _PREVIEW_DEPTH)
    text = "".join(pieces)
    if len(text) > limit:
        return text[:limit] + "... (more)"
    return text


def _preview_into(value: object, out: list[str], budget: int, depth: int) -> int:
    """Append repr(value), or its start, to `out`; the budget left after it."""
    if budget <= 0:
        return budget
    if isinstance(value, dict | list | tuple):
        if depth <= 0:
            out.append("...")
            return budget - 3
        is_dict = isinstance(value, dict)
        brackets = "{}" if is_dict else "[]" if isinstance(value, list) else "()"
        out.append(brackets[0])
        budget -= 1
        items: Any = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        for n, (key, item) in enumerate(items):
            if budget <= 0:
                return budget
            if n:
                out.append(", ")
                budget -= 2
            if is_dict:
                budget = _preview_into(key, out, budget, depth - 1)
                out.append(": ")
                budget -= 2
            budget = _preview_into(item, out, budget, depth - 1)
        if brackets == "()" and len(value) == 1:
            out.append(",")  # (x,): a tuple, as repr shows it
        out.append(brackets[1])
        return budget - 1
    if isinstance(value, str | bytes | bytearray):
        value = value[:budget]  # the start is all that can show
    try:
        text = repr(value)
    except Exception:  # an object whose repr fails (or recurses) is still named
        text = f"<{type(value).__name__} object>"
    out.append(text[:budget])
    return budget - len(text)


class StreamfoldError(Exception):
    """Root of every error streamfold raises on purpose."""


class UsageError(StreamfoldError, ValueError):
    """The caller passed something streamfold cannot accept, or called it out of order."""


class StateError(UsageError):
    """A saved state that cannot be restored: malformed, tampered with, unauthenticated,
    or from another version. `field` is the path of the offending field in the state."""

    def __init__(self, field: str, problem: str) -> None:
        # Both cut: a path can hold a key, and a problem a value, megabytes long.
        self.field = _cut(field, _FIELD_CHARS)
        self.problem = _cut(problem, _REASON_CHARS)
        super().__init__(f"restore state: {self.field or '(the state)'}: {self.problem}")

    def within(self, prefix: str) -> StateError:
        """The same error, its field path under `prefix`."""
        return StateError(f"{prefix}.{self.field}" if self.field else prefix, self.problem)


class FrozenEventError(UsageError, AttributeError):
    """An attribute of an event was set or deleted: events are immutable."""


class EventJSONError(UsageError):
    """An object that is not the JSON form of an event (`event_from_json`)."""


class InvalidModelError(UsageError):
    """A model constructor (ContentPart, Message, ...) got a value of the wrong shape."""

    def __init__(self, model: str, problems: list[str]) -> None:
        self.model = model
        self.problems = problems
        super().__init__(f"invalid {model}: " + "; ".join(problems))


class OptionsError(UsageError):
    """A part's options had a non-str key or a value JSON cannot hold."""


class PartMergeError(UsageError):
    """Two content parts of different types were merged."""


class InteropError(UsageError):
    """An adapter (`streamfold.interop.*`) got something that is not the type it reads."""

    def __init__(self, function: str, expected: str, got: str) -> None:
        self.function = function
        self.expected = expected
        self.got = got
        super().__init__(f"{function}: expected {expected}, got {got}")


class IncompleteMessageError(UsageError):
    """A MessageDelta that has not finished was turned into a Message."""


class ToolArgumentsError(StreamfoldError):
    """A complete tool call's arguments are not a JSON object; the raw text is kept."""

    def __init__(self, call_id: str | None, name: str | None, raw: str, reason: str) -> None:
        self.call_id = call_id
        self.name = name
        self.raw = raw
        super().__init__(
            f"tool call {call_id!r} ({name!r}): expected arguments to be a JSON object, "
            f"got {preview(raw)}: {reason}"
        )


class StreamProtocolError(StreamfoldError):
    """The provider's stream broke its own protocol.

    Carries the provider, the offending raw event, its position in the stream, and
    (once the fold attaches it) the partial Message folded before the fault.
    """

    def __init__(
        self,
        reason: str,
        *,
        provider: str | None = None,
        raw: Any = None,
        position: int | None = None,
    ) -> None:
        if len(reason) > _REASON_CHARS:  # a value pasted whole into the reason: its start
            reason = reason[:_REASON_CHARS] + "... (more)"
        self.reason = reason
        self.provider = provider
        self.raw = raw
        self.position = position
        self.partial: Any = None  # the Message so far; set by the fold
        super().__init__(reason)

    def __str__(self) -> str:
        where = []
        if self.provider is not None:
            where.append(f"provider {self.provider}")
        if self.position is not None:
            where.append(f"event #{self.position}")
        head = f"{self.reason}" + (f" ({', '.join(where)})" if where else "")
        if self.raw is not None:
            head += f"; raw event: {preview(self.raw)}"
        return head


class NoEventsError(StreamProtocolError, UsageError):
    """Input in which not one event was understood: a file name or a file's text given as
    the stream, an SDK's text instead of its events, an empty iterable, or a stream cut
    before its first event. A UsageError (the common cause) and a StreamProtocolError (a
    handler for broken streams still sees it); the text says what arrived and what to pass.
    `nbytes`: the bytes that arrived; `start`: their first bytes; `objects`: True when
    decoded objects arrived instead; `framing`: the framing the bytes were read as, if any."""

    nbytes: int = 0
    start: bytes = b""
    objects: bool = False
    framing: str | None = None


class ChoiceError(UsageError):
    """`choice=` named a choice (an OpenAI `n`, a Gemini candidate) the stream does not hold."""

    def __init__(self, choice: int, available: list[int]) -> None:
        self.choice = choice
        self.available = available
        self.partial: Any = None  # the Message so far; set by the fold
        names = ", ".join(map(str, available))
        super().__init__(
            f"choice: expected one of the choices the stream holds ({names}), got {choice}"
        )


class StreamLimitError(StreamfoldError):
    """A stream exceeded one of the fold's size limits; `partial` holds the message so far."""

    def __init__(self, limit: str, maximum: int, actual: int, what: str) -> None:
        self.limit = limit
        self.maximum = maximum
        self.actual = actual
        self.partial: Any = None  # the Message so far; set by the fold
        super().__init__(f"{what}: expected at most {maximum} ({limit}), got {actual}")


class OutputValidationError(StreamfoldError):
    """A fold's structured output (`fold(..., output=Model)`) is not a valid value.

    `text`: the output's raw JSON text as it arrived (None when no part held any);
    `errors`: pydantic's errors (`ValidationError.errors()`), empty when the text is not
    JSON at all; `reason`: what went wrong, in words. The Message is complete regardless.
    """

    def __init__(self, reason: str, text: str | None, errors: list[Any] | None = None) -> None:
        self.reason = _cut(reason, _REASON_CHARS)
        self.text = text
        self.errors: list[Any] = errors or []
        shown = "no output text" if text is None else preview(text)
        super().__init__(f"structured output: {self.reason} (the text: {shown})")

    def __eq__(self, other: object) -> bool:
        # By value, as the OutputFailed event that carries it is.
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, OutputValidationError)
        return (self.reason, self.text, self.errors) == (other.reason, other.text, other.errors)

    def __hash__(self) -> int:
        return hash((self.reason, self.text))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason, self.text, self.errors))
