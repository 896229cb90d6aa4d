"""Size limits: a hostile or broken stream must not grow a fold without bound."""

from __future__ import annotations

from typing import Any, final

from .errors import UsageError, preview

MiB = 1024 * 1024


# The fields, in order: the arguments Limits(...) takes, and what equality compares.
FIELDS = ("max_bytes", "max_parts", "max_part_chars", "max_tool_argument_chars", "max_depth")


@final
class Limits:
    """The most a fold accepts; past any of these it raises StreamLimitError at once.

    Part sizes count characters (str length), not bytes: they are checked on every delta
    and encoding each one to count bytes would cost more than the check is worth.

    Immutable. Each limit is an int of at least 0; anything else raises UsageError (on
    both builds: the arguments are `Any`, so the compiled build's own argument check
    cannot answer first with a bare TypeError).
    """

    # Written by hand, not as a dataclass: a compiled dataclass checks its fields' types
    # itself, in the attribute setter, and raises a bare TypeError before any check here.
    def __init__(
        self,
        max_bytes: Any = 64 * MiB,
        max_parts: Any = 10_000,
        max_part_chars: Any = 32 * MiB,
        max_tool_argument_chars: Any = 16 * MiB,
        max_depth: Any = 128,
    ) -> None:
        self._max_bytes = _limit("max_bytes", max_bytes)
        self._max_parts = _limit("max_parts", max_parts)
        self._max_part_chars = _limit("max_part_chars", max_part_chars)
        self._max_tool_argument_chars = _limit("max_tool_argument_chars", max_tool_argument_chars)
        self._max_depth = _limit("max_depth", max_depth)

    @property
    def max_bytes(self) -> int:
        """Bytes of raw input (SSE, NDJSON, eventstream; a str chunk as UTF-8). Decoded dicts
        and SDK objects count the same way, as they arrive: an event's JSON size in UTF-8
        bytes, except a plain text delta (the dict lane's: text for an open part), which
        counts the characters of its text, all that a fold keeps of it (a lower bound)."""
        return self._max_bytes

    @property
    def max_parts(self) -> int:
        """Parts and tool calls in one message."""
        return self._max_parts

    @property
    def max_part_chars(self) -> int:
        """Characters of one part's text, or of one streamed option such as a signature."""
        return self._max_part_chars

    @property
    def max_tool_argument_chars(self) -> int:
        """Characters of one tool call's argument text."""
        return self._max_tool_argument_chars

    @property
    def max_depth(self) -> int:
        """Nesting of a JSON value kept in the message (a provider block, tool arguments,
        metadata): deeper values could not be stored and read back."""
        return self._max_depth

    def as_dict(self) -> dict[str, int]:
        """The limits by name (what `Limits(**limits.as_dict())` rebuilds)."""
        return {
            "max_bytes": self._max_bytes,
            "max_parts": self._max_parts,
            "max_part_chars": self._max_part_chars,
            "max_tool_argument_chars": self._max_tool_argument_chars,
            "max_depth": self._max_depth,
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Limits):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.as_dict().values()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value}" for name, value in self.as_dict().items())
        return f"Limits({inner})"


def _limit(name: str, value: Any) -> int:
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return int(value)  # an int subclass (an IntEnum, numpy's ints are not): its value
    expected = (
        "an int of at least 0"
        if isinstance(value, int) and not isinstance(value, bool)
        else "an int"
    )
    raise UsageError(
        f"Limits: {name}: expected {expected}, got {type(value).__name__} {preview(value, 40)}"
    )


DEFAULT_LIMITS = Limits()

# The deepest JSON value streamfold keeps anywhere, whatever the Limits: about where the
# bytes door's parser (jiter) stops, so a value deeper than this could not be written and
# read back. The models' JSON check, the saved state and the dict lane refuse past it, with
# walks that never recurse (a recursive walk of a value 70,000 deep overflows the C stack).
MAX_JSON_DEPTH = 200


# How deep a JSON value nests, for max_depth: here, compiled, because the accumulator asks
# on every usage, metadata and options update (interpreted, the walk of a small usage dict
# cost more than the rest of a short stream's fixed cost per update).
def json_depth_over(value: object, limit: int) -> int | None:
    """The nesting depth of a JSON value if it passes `limit`, else None (iterative)."""
    if limit >= 2 and _at_most_two_deep(value):
        return None
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return depth
        # A plain loop: a generator here costs more than the walk of a small value.
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return None


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def _at_most_two_deep(value: object) -> bool:
    """True when `value` (exact JSON types) holds no container below its children: the
    usage, metadata and options a fold checks on every update, in a fraction of the walk
    (which builds a stack entry per container). False: the walk decides."""
    kind = type(value)
    if kind is dict:
        children: dict[Any, Any] = value  # type: ignore[assignment]
        return all(_at_most_one_deep(child) for child in children.values())
    if kind is list:
        items: list[Any] = value  # type: ignore[assignment]
        return all(_at_most_one_deep(child) for child in items)
    return kind in _SCALAR_TYPES


def _at_most_one_deep(value: object) -> bool:
    """`_at_most_two_deep` a level down: a scalar, or a container of scalars (typed for
    the compiled build's own dict and list walks)."""
    kind = type(value)
    if kind is dict:
        children: dict[Any, Any] = value  # type: ignore[assignment]
        return all(type(child) in _SCALAR_TYPES for child in children.values())
    if kind is list:
        items: list[Any] = value  # type: ignore[assignment]
        return all(type(child) in _SCALAR_TYPES for child in items)
    return kind in _SCALAR_TYPES
