"""The caller's arguments, checked at the public doors: one UsageError for a wrong type.

Interpreted on both builds: the compiled functions take these parameters as `Any` and call
these checks, so a wrong type is refused here, in the same words, before mypyc's own
argument check could raise a bare TypeError (and where the interpreted build used to take
`strict='yes'` as true).
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

from .errors import NoEventsError, UsageError, preview

ROLES = ("assistant", "user", "system", "tool")

# What a fold takes, for the errors that say what to pass instead.
STREAM_KINDS = (
    "a provider stream: an iterable of bytes or str (SSE, NDJSON, AWS eventstream), "
    "decoded event dicts, the SDK's stream event objects, or MessageDeltas"
)
# A fold's own classes: their events are no input for another fold.
_FOLDS = frozenset({"Fold", "AsyncFold", "Tee", "AsyncTee"})
# The most of a wrong argument's value an error quotes.
_VALUE_CHARS = 40
# The most of an input's start an error quotes.
_START_CHARS = 60


def describe(value: Any) -> str:
    """What arrived, for an error: its type, and a scalar's value (cut short)."""
    if value is None:
        return "null"
    if isinstance(value, bool | int | float | str | bytes):
        return f"{type(value).__name__} {preview(value, _VALUE_CHARS)}"
    return type(value).__name__


def check_bool(function: str, name: str, value: Any) -> bool:
    """`value` if it is a bool (True or False, not a truthy string or a number)."""
    if type(value) is not bool:
        raise UsageError(f"{function}: {name}: expected True or False, got {describe(value)}")
    return value


def check_count(function: str, name: str, value: Any, *, minimum: int = 0) -> int:
    """`value` if it is an int (not a bool) of at least `minimum`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"{function}: {name}: expected an int, got {describe(value)}")
    if value < minimum:
        raise UsageError(f"{function}: {name}: expected at least {minimum}, got {describe(value)}")
    return int(value)


def check_provider(function: str, value: Any) -> str | None:
    """`value` if it is None or a str (whether it names a provider is checked after)."""
    if value is not None and not isinstance(value, str):
        raise UsageError(
            f"{function}: provider: expected a provider name (str) or None, got {describe(value)}"
        )
    return value


def check_role(function: str, value: Any) -> str:
    """`value` if it is one of the message roles."""
    if not isinstance(value, str) or value not in ROLES:
        raise UsageError(
            f"{function}: role: expected one of {', '.join(ROLES)}, got {describe(value)}"
        )
    return value


def check_instance(function: str, name: str, value: Any, kind: type, what: str) -> Any:
    """`value` if it is an instance of `kind` (`what` names it in the error)."""
    if not isinstance(value, kind):
        raise UsageError(f"{function}: {name}: expected {what}, got {describe(value)}")
    return value


def check_started_at(function: str, value: Any) -> float | None:
    """`value` if it is None or a finite number (a reading of the fold's clock)."""
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise UsageError(
            f"{function}: started_at: expected None or a reading of the clock (a finite "
            f"number), got {describe(value)}"
        )
    return float(value)


def check_clock(function: str, value: Any) -> Any:
    """`value` if it is None or callable (it is called with no arguments for a reading)."""
    if value is not None and not callable(value):
        raise UsageError(
            f"{function}: clock: expected None or a function that returns the time, "
            f"got {describe(value)}"
        )
    return value


def check_timing(function: str, clock: Any, started_at: Any) -> float | None:
    """Check a fold's `clock` and `started_at`; `started_at` as a float (or None)."""
    check_clock(function, clock)
    return check_started_at(function, started_at)


def check_path(function: str, value: Any) -> str | os.PathLike[str]:
    """`value` if it is a file name: a str or a path (os.PathLike)."""
    if not isinstance(value, str | os.PathLike) or (isinstance(value, str) and not value):
        raise UsageError(
            f"{function}: path: expected a file name (str or pathlib.Path), got {describe(value)}"
        )
    return value


def check_key(function: str, key: Any) -> bytes | None:
    """A state key as bytes: None, non-empty bytes, or a non-empty str UTF-8 can write."""
    if key is None:
        return None
    if isinstance(key, bytes | bytearray) and key:
        return bytes(key)
    if isinstance(key, str) and key:
        try:
            return key.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                f"{function}: expected text UTF-8 can write, got a str holding a lone surrogate"
            ) from None
    raise UsageError(f"{function}: expected non-empty bytes or str, got {describe(key)}")


def check_names(function: str, name: str, value: Any) -> list[str]:
    """`value` as a list of str: an iterable of names, not a str (whose letters it would be)."""
    if isinstance(value, str | bytes):
        raise UsageError(
            f"{function}: {name}: expected a list of names, got {describe(value)} "
            f"(write [{value!r:.40}] for one)"
        )
    try:
        names = list(value)
    except TypeError:
        raise UsageError(
            f"{function}: {name}: expected a list of names, got {describe(value)}"
        ) from None
    for item in names:
        if not isinstance(item, str):
            raise UsageError(f"{function}: {name}: expected names (str), got {describe(item)}")
    return names


# --- what a fold reads -----------------------------------------------------------------


def check_source(function: str, chunks: Any, *, asynchronous: bool) -> None:
    """Refuse, with what to do instead, a source a fold cannot read: a path, an awaitable,
    an SDK helper not entered, an async source given to `fold` (or a non-iterable)."""
    kind = type(chunks)
    if kind.__module__.startswith("streamfold.") and kind.__name__ in _FOLDS:
        raise UsageError(
            f"{function}: expected {STREAM_KINDS}, got a fold ({kind.__name__}), whose events are "
            "a fold's output: pass the stream's own chunks"
        )
    if isinstance(chunks, os.PathLike):
        raise UsageError(
            f"{function}: expected {STREAM_KINDS}, got a path ({type(chunks).__name__}); "
            "to fold a recorded file, pass its bytes: Path(...).read_bytes(), or "
            "streamfold.load_recording(path)"
        )
    if inspect.isawaitable(chunks):
        if inspect.iscoroutine(chunks):
            chunks.close()  # never awaited: it must not warn so
        hint = (
            "await it first: afold(await client.create(..., stream=True))"
            if asynchronous
            else "await it and pass the result to afold()"
        )
        raise UsageError(
            f"{function}: expected {STREAM_KINDS}, got an awaitable "
            f"({type(chunks).__name__}) that has not been awaited: {hint}"
        )
    helper = _unentered_helper(chunks)
    if helper is not None:
        raise UsageError(
            f"{function}: expected {STREAM_KINDS}, got the SDK's {helper} before it was "
            f"entered: fold the stream it gives, `with ... as stream: {function}(stream)`"
        )
    if asynchronous:
        if not isinstance(chunks, AsyncIterable | Iterable):
            raise UsageError(
                f"{function}: expected {STREAM_KINDS} (sync or async), got "
                f"{type(chunks).__name__}, which is not iterable"
            )
        return
    if isinstance(chunks, AsyncIterable | AsyncIterator) and not isinstance(chunks, Iterable):
        raise UsageError(
            f"{function}: expected {STREAM_KINDS}, got an async iterable "
            f"({type(chunks).__name__}): fold it with afold() or afold_message()"
        )
    if not isinstance(chunks, Iterable):
        raise UsageError(
            f"{function}: expected {STREAM_KINDS}, got {type(chunks).__name__}, "
            "which is not iterable"
        )


def _unentered_helper(chunks: Any) -> str | None:
    """The name of an SDK stream manager (`client.chat.completions.stream(...)` and its
    kin, which are context managers, not streams), else None."""
    kind = type(chunks)
    module = kind.__module__ or ""
    if module.split(".")[0] in {"openai", "anthropic"} and kind.__name__.endswith("StreamManager"):
        return kind.__name__
    return None


def no_events_error(
    nbytes: int, start: bytes, *, objects: bool, expected: str = "", framing: str | None = None
) -> NoEventsError:
    """The error for input in which not one event was found: what arrived, and what to
    pass instead (shared by `fold` and the command line's `replay` and `record`)."""
    text = _no_events_text(nbytes, start, objects, expected or STREAM_KINDS, framing)
    error = NoEventsError(text)
    error.nbytes, error.start, error.objects, error.framing = nbytes, start, objects, framing
    return error


def _no_events_text(
    nbytes: int, start: bytes, objects: bool, wanted: str, framing: str | None
) -> str:
    if nbytes == 0 and not objects:
        return f"expected {wanted}, got input without a single event in it: no input at all"
    if objects:
        return f"expected {wanted}, got objects without a single event in them"
    quoted = preview(start[:_START_CHARS])
    text = start.decode("utf-8", "replace")
    if framing == "eventstream":
        hint = "an AWS eventstream cut before the end of its first message"
    elif nbytes <= len(start) and "\n" not in text.strip() and _looks_like_a_path(text.strip()):
        hint = (
            "a str or bytes chunk is the stream's own text, not the name of a file: to fold a "
            "file, pass its bytes (Path(name).read_bytes()) or load_recording(name)"
        )
    elif "data:" not in text and "{" not in text:
        hint = (
            "text without SSE or JSON events: to fold an SDK's stream, pass the stream "
            "itself (its events), not its text (the anthropic SDK's `text_stream`)"
        )
    else:
        hint = "no provider's event (an SSE event, a JSON line, an eventstream message) in it"
    return (
        f"expected {wanted}, got input without a single event in it: {nbytes} byte(s) "
        f"starting {quoted}; {hint}"
    )


def _looks_like_a_path(text: str) -> bool:
    if not text or len(text) > 4096:
        return False
    return (
        text.startswith(("/", "./", "../", "~"))
        or (len(text) > 2 and text[1] == ":" and text[2] in "\\/")
        or os.path.splitext(text)[1].lower()
        in {".sse", ".jsonl", ".ndjson", ".json", ".txt", ".bin", ".eventstream", ".log"}
    )
