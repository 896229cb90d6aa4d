"""Size limits: a hostile or broken stream must not grow a fold without bound."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """The most a fold accepts; past any of these it raises StreamLimitError at once.

    Part sizes count characters (str length), not bytes: they are checked on every delta
    and encoding each one to count bytes would cost more than the check is worth.
    """

    max_bytes: int = 64 * MiB
    """Bytes of raw input (SSE, NDJSON, eventstream; a str chunk as UTF-8). Decoded dicts
    and SDK objects count the same way, as they arrive: an event's JSON size in UTF-8
    bytes, except a plain text delta (the dict lane's: text for an open part), which
    counts the characters of its text, all that a fold keeps of it (a lower bound)."""
    max_parts: int = 10_000
    """Parts and tool calls in one message."""
    max_part_chars: int = 32 * MiB
    """Characters of one part's text, or of one streamed option such as a signature."""
    max_tool_argument_chars: int = 16 * MiB
    """Characters of one tool call's argument text."""
    max_depth: int = 128
    """Nesting of a JSON value kept in the message (a provider block, tool arguments,
    metadata): deeper values could not be stored and read back."""


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
