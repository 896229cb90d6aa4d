"""Size limits: a hostile or broken stream must not grow a fold without bound."""

from __future__ import annotations

from dataclasses import dataclass

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
