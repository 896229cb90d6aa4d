"""Stream timing: when each chunk of a fold arrived, and what that says about the stream.

Every fold keeps a `StreamTiming` (the `timing` attribute of `fold`, `afold` and
`StreamFolder`) and gives its `as_dict()` to its last event, `MessageCompleted.timing`.
Not to the Message: wall-clock times differ on every run, and two folds of the same bytes
must give equal Messages (a test compares them, a cache keys on them, nothing patched).
Seconds, all on one monotonic clock, from the moment the fold started (the first read of
`fold` / `afold`, a StreamFolder's first chunk, or the `started_at` it was given: a
`time.monotonic()` taken before the request was sent):

- `time_to_first_byte_s`: the first chunk arrived;
- `time_to_first_token_s`: the first chunk that gave any part content (text, thinking,
  tool-call arguments);
- `parts`: for each part (by index), `start_s` and `end_s`: the chunks that opened and
  completed it;
- `total_s`: the chunk that finished the message (or the end of the input);
- `output_tokens_per_s`: the usage's output tokens over the time from the first token to
  the end (None without usage, or when they are the same moment).

A time is that of the chunk the fold was reading when the thing happened, read once per
chunk at most and only when something above changed: the clock costs nothing per delta.
A replay (`streamfold replay`, the demo page) reads the recorded arrival times. A fold
restored from a saved state starts a new timing (another process has another clock).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .parts import ContentPart

if TYPE_CHECKING:
    from .accumulator import Accumulator, Slot
    from .message import Message

Clock = Callable[[], float]

default_clock: Clock = time.monotonic
"""The clock a fold reads unless given one."""

# Told of every fold that finishes, with its timing and final message, while
# `streamfold.telemetry.instrument()` is on; None (one check a fold) while it is off.
_on_finish: Callable[[StreamTiming, Message], None] | None = None
# Told of every fold that raised (its timing, the message so far, the exception), likewise.
_on_fail: Callable[[StreamTiming, Message, BaseException], None] | None = None


@dataclass(frozen=True, slots=True)
class PartTiming:
    """When a part started and ended, in seconds from the fold's start (end None: open)."""

    index: int
    start_s: float
    end_s: float | None


class StreamTiming:
    """A fold's timing so far; read-only (the fold writes it). See the module docstring."""

    __slots__ = (
        "_chunks",
        "_clock",
        "_end",
        "_ends",
        "_first_byte",
        "_first_token",
        "_named",
        "_open",
        "_output_tokens",
        "_reported",
        "_request",
        "_seen",
        "_start",
        "_starts",
        "_waiting",
    )

    # `Any`: a wrong type gets the UsageError of streamfold.arguments on both builds.
    def __init__(self, clock: Any = None, started_at: Any = None) -> None:
        if (clock is not None and not callable(clock)) or (
            started_at is not None
            and (type(started_at) is not float or not math.isfinite(started_at))
        ):
            from .arguments import check_timing  # (interpreted: only for the odd argument)

            started_at = check_timing("StreamTiming", clock, started_at)
        self._clock: Clock = default_clock if clock is None else clock
        self._start: float | None = started_at
        self._first_byte: float | None = None
        self._first_token: float | None = None
        self._end: float | None = None
        self._starts: list[float] = []
        self._ends: list[float | None] = []
        # The parts seen (slots), the open ones among them, and those still without an end.
        self._seen = 0
        self._open = 0
        self._waiting: list[int] = []
        self._output_tokens: int | None = None
        # For telemetry, while it is on: each chunk's arrival (for the time per output
        # chunk; None while off: nothing read per chunk), the provider name the caller
        # gave (an alias such as "groq" says more than its canonical name), the caller's
        # RequestInfo, and whether this fold was reported (once: a failed fold closed
        # afterwards is not reported again as cancelled).
        self._chunks: list[float] | None = [] if _on_finish is not None else None
        self._named: str | None = None
        self._request: Any = None
        self._reported = False

    # --- read ---------------------------------------------------------------------------

    @property
    def time_to_first_byte_s(self) -> float | None:
        return self._since(self._first_byte)

    @property
    def time_to_first_token_s(self) -> float | None:
        return self._since(self._first_token)

    @property
    def total_s(self) -> float | None:
        return self._since(self._end)

    @property
    def parts(self) -> tuple[PartTiming, ...]:
        return tuple(PartTiming(*times) for times in self._part_times())

    def _part_times(self) -> list[tuple[int, float, float | None]]:
        """Each part's (index, start_s, end_s): `parts` without its objects."""
        starts, ends = self._starts, self._ends  # (one of each per part)
        return [
            (index, self._since(starts[index]) or 0.0, self._since(ends[index]))
            for index in range(len(starts))
        ]

    @property
    def output_tokens(self) -> int | None:
        """The usage's output tokens, once the message finished with usage."""
        return self._output_tokens

    @property
    def output_tokens_per_s(self) -> float | None:
        tokens, first, end = self._output_tokens, self._first_token, self._end
        if tokens is None or first is None or end is None or end <= first:
            return None
        return _rate(tokens, end - first)

    def as_dict(self) -> dict[str, Any]:
        """The timing as `MessageCompleted.timing` holds it (JSON; seconds rounded to µs)."""
        return {
            "time_to_first_byte_s": self.time_to_first_byte_s,
            "time_to_first_token_s": self.time_to_first_token_s,
            "total_s": self.total_s,
            "output_tokens": self._output_tokens,
            "output_tokens_per_s": self.output_tokens_per_s,
            "parts": [
                {"index": index, "start_s": start, "end_s": end}
                for index, start, end in self._part_times()
            ],
        }

    def __repr__(self) -> str:
        return (
            f"StreamTiming(time_to_first_token_s={self.time_to_first_token_s}, "
            f"total_s={self.total_s}, output_tokens_per_s={self.output_tokens_per_s})"
        )

    def _since(self, moment: float | None) -> float | None:
        if moment is None or self._start is None:
            return None
        return _round_us(max(0.0, moment - self._start))

    # --- written by the fold ------------------------------------------------------------

    def start(self) -> None:
        """Start the clock, unless started (or given `started_at`). `fold` and `afold` do it
        before their first read; a StreamFolder fed by hand starts at its first chunk."""
        if self._start is None:
            self._start = self._clock()

    def _changed(self, acc: Accumulator) -> bool:
        """Whether the chunk just folded may have moved anything timed (O(1): two lengths
        and two flags; the fold asks after each chunk, before `_note`)."""
        return (
            self._first_token is None
            or acc.finished
            or len(acc._slots) != self._seen
            or len(acc._open) != self._open
        )

    def _note(self, acc: Accumulator) -> None:
        """Read the clock for the chunk just folded and note what it started, filled,
        completed or finished (the accumulator's parts, by their slots)."""
        now = self._clock()
        if self._first_byte is None:
            self._first_byte = now
            if self._start is None:
                self._start = now
        slots = acc._slots
        for index in range(self._seen, len(slots)):
            self._starts.append(now)
            self._ends.append(None)
            self._waiting.append(index)
        self._seen = len(slots)
        self._open = len(acc._open)
        if self._waiting:
            filled = self._first_token is None and any(
                _has_content(slots[index]) for index in self._waiting
            )
            if filled:
                self._first_token = now
            waiting = []
            for index in self._waiting:
                if slots[index].done is None:
                    waiting.append(index)
                else:
                    self._ends[index] = now
            self._waiting = waiting
        if acc.finished and self._end is None:
            self._end = now
            final = acc._final
            if final is not None:
                usage = final.usage
                if usage is not None:
                    self._output_tokens = usage.output_tokens
                completed = acc._completed
                if completed is not None:
                    completed._timed(self.as_dict())
                if _on_finish is not None and not self._reported:
                    self._reported = True
                    _on_finish(self, final)

    def _chunk_arrived(self) -> None:
        """A chunk arrived (called only while telemetry is on: `_chunks` is a list)."""
        chunks = self._chunks
        if chunks is not None:
            chunks.append(self._clock())

    def _failed(self, snapshot: Callable[[], Message], error: BaseException) -> None:
        """The fold raised `error`: telemetry, if on, records it (the message so far from
        `snapshot`, taken only then)."""
        if _on_fail is not None and not self._reported:
            self._reported = True
            _on_fail(self, snapshot(), error)

    def _text_arrived(self) -> None:
        """The dict lane grew a part by text: the first token, if none came before."""
        if self._first_token is None:
            self._first_token = self._clock()
            if self._first_byte is None:
                self._first_byte = self._first_token


# Below this many microseconds (19 hours) a reading times 1e6 is within 2**-16 of the
# exact product: its nearest whole number is the exact one's when not near a half.
_EXACT_MICROSECONDS = 2.0**36


def _round_us(seconds: float) -> float:
    """`round(seconds, 6)` for a time (not negative), without its cost: float.__round__
    with digits prints the number in decimal and reads it back (~0.3 us); a time far
    enough from a half microsecond rounds by arithmetic to the same float (k / 1e6 is
    the double nearest to k millionths, as round gives; tests/test_timing.py compares)."""
    micro = seconds * 1e6
    if micro < _EXACT_MICROSECONDS:  # (False for NaN)
        whole = int(micro)
        rest = micro - whole  # exact
        if rest < 0.499:
            return whole / 1e6
        if rest > 0.501:
            return (whole + 1) / 1e6
    return round(seconds, 6)


def _rate(count: int, seconds: float) -> float | None:
    """count / seconds, rounded; None for a count no float holds (a stream can claim any
    number of tokens: past ~1e308, the division raises OverflowError)."""
    try:
        return round(count / seconds, 3)
    except OverflowError:
        return None


def _has_content(slot: Slot) -> bool:
    """Whether an accumulator slot got any content: its size while open; once complete,
    its built part's (what a fold restored from a saved state knows of it too)."""
    done = slot.done
    if done is None:
        return bool(slot.size)
    if isinstance(done, ContentPart):
        return bool(done.content)
    return done.arguments is not None and done.arguments != ""  # ({} too: input was empty)


def replay_clock(times: list[float]) -> tuple[Clock, Callable[[int], None]]:
    """A clock that reads recorded arrival times: `(clock, arrive)`, where `arrive(i)`
    says chunk `i` is being folded and `clock()` then gives `times[i]` (0.0 before any)."""
    current = [0.0]

    def clock() -> float:
        return current[0]

    def arrive(index: int) -> None:
        current[0] = times[index]

    return clock, arrive
