"""What every provider decoder is: a stateful, pure translator of provider events."""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any, ClassVar, Self, TypeAlias

import jiter
from mypy_extensions import mypyc_attr

from ..accumulator import Accumulator
from ..deltas import Delta, EndMessage, Repair
from ..errors import StreamLimitError, StreamProtocolError
from ..limits import DEFAULT_LIMITS, Limits
from ..state_schema import BoxState

# What the hot lane grows parts with: the fold's Accumulator (`grow_text` / `grow_texts`
# apply plain GrowPart(key, text)s, append the events to `out` and say True, or do nothing
# and say False when the part is not open). Named by its class, not a Protocol: compiled,
# a call through a Protocol is a Python-level call (~80 ns a delta on a live connection),
# through the class a direct one.
PartGrower: TypeAlias = Accumulator


# Bytes a JSON string body must not hold raw: its quote, escapes and control characters.
NOT_PLAIN = re.compile(rb'["\\\x00-\x1f]')


def starts_at(buffer: bytes, pos: int, prefix: bytes) -> bool:
    """buffer.startswith(prefix, pos), as the hot lanes test each event's head.

    Compiled, this is a direct call and a slice compare; `bytes.startswith` is a
    Python-level call that parses its arguments as a tuple (~100 ns a test).
    """
    return buffer[pos : pos + len(prefix)] == prefix


def json_string_body(raw: bytes) -> str | None:
    """The str that the JSON string literal `"` + raw + `"` stands for; None if it is not one.

    Exactly what a JSON parser gives for that string inside an event: plain UTF-8 is
    decoded as is, anything with escapes goes through jiter itself.
    """
    if NOT_PLAIN.search(raw) is None:
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return None
    try:
        value = jiter.from_json(b'"' + raw + b'"')
    except ValueError:
        return None
    return value if type(value) is str else None


# Compiled, the base still takes the decoders users write and register (interpreted
# classes); a built-in decoder's own calls stay native.
@mypyc_attr(allow_interpreted_subclasses=True)
class Decoder:
    """Base class of provider decoders: one provider event in, neutral deltas out.

    `decode()` gets each event's parsed JSON payload (a dict) and, for server-sent events,
    the SSE event name. It does no I/O. A broken protocol raises StreamProtocolError; an
    unknown event type yields `SkipEvent`.

    The contract for a decoder of your own (register it with
    `streamfold.register_provider`; the fold does the framing, the JSON, the limits and
    the events):

    - Set `provider` to the registered name. Keep `__init__(*, choice=0, strict=False)`
      and call `super().__init__(choice=choice, strict=strict)`.
    - `decode(payload, event)` returns neutral deltas (`streamfold.deltas`), naming each
      part by a key of your choosing (any hashable: a block index, an item id):
      `OpenPart(key, part)` once, with the part's identity and kind (a `ContentPart` of
      its type, or a `ToolCall` with id and name); `GrowPart(key, content, options,
      citations)` for every piece of text or argument text; `ClosePart(key)` where the
      wire says the part ended (parts still open complete with the message, their end
      inferred); `UpdateMessage` for status, stop reason, usage and metadata;
      `EndMessage()` where the wire says the message is over (without it the message
      ends cut when the input does); `ReportError` for an error the provider reports
      in the stream; `SkipEvent(type)` for an event type you do not know.
    - Raise `self.protocol_error(reason, payload)` for input that is broken, and call
      `self.repair(kind, reason)` (and make the repair) for input that is out of spec
      but recoverable: strict folds raise, lenient ones count it. A KeyError, TypeError,
      IndexError or ValueError from a malformed payload becomes a StreamProtocolError.
    - `done()` answers an SSE `data: [DONE]`; `close()` returns what is still held when
      the input ends.
    - Keep state in plain attributes (ints, strs, and lists or dicts of them), as the
      built-in decoders do: that is what a saved state can hold.
    - The hot lanes (`sse_shortcut`, `object_text`) are optional speed-ups; the defaults
      take nothing.
    """

    provider: ClassVar[str] = "unknown"
    # The model of what this decoder saves to resume (see to_state / from_state).
    state_model: ClassVar[type[BoxState]] = BoxState

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        self.choice = choice
        self.strict = strict
        # The fold's limits (the fold sets them): text a decoder holds back for a part that
        # has not started yet is checked against them as it arrives (see `hold_text`).
        self.limits: Limits = DEFAULT_LIMITS
        # The other choices (or candidates) the stream held, skipped for `choice`: the
        # fold names them when `choice` itself never came (see `note_other_choice`).
        self.other_choices: set[int] = set()
        # See sse_hot_head: a decoder with a hot lane sets its own, and may change it (or
        # turn the lane off with None) as the stream goes.
        self._hot_head: bytes | None = None

    def to_state(self) -> BoxState:
        """This decoder as saved-state data (an instance of `state_model`)."""
        raise NotImplementedError

    @classmethod
    def from_state(cls, state: Any, *, choice: int = 0, strict: bool = False) -> Self:
        """The decoder a validated `state_model` describes; StateError if inconsistent."""
        raise NotImplementedError

    @property
    def sse_hot_head(self) -> bytes | None:
        """The first bytes of every SSE event `sse_shortcut` may take; None: it takes none."""
        return self._hot_head

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one provider event into neutral deltas."""
        raise NotImplementedError

    def sse_shortcut(self, buffer: bytes, pos: int, grower: PartGrower, out: list[Any]) -> int:
        """Take the plain delta events that start at `buffer[pos]` straight from their bytes.

        The fold's hot lane: `buffer` is LF-only SSE and `pos` an event
        boundary. For each whole event, from `pos` on, that is byte for byte one this
        decoder's fast path would turn into a single GrowPart of text (its JSON written the
        provider's own way, the text a valid JSON string), call `grower.grow_text(key,
        text, out)` (or, for a run of one part's events, `grower.grow_texts(key, texts,
        out)`) and update this decoder's state exactly as decode() would. Stop at the first
        event that is anything else, or when the grower says False, and return where the
        taken events end
        (`pos` if none): the fold frames and decodes the rest as usual. Nothing may differ
        from the full path: tests/providers/test_lanes.py folds every stream both ways.

        What it buys, compiled (`python -m benchmarks.hot_lane`, mixed 10k streams): a
        fold without the lane costs 1.4-2.4x as much a delta, live or buffered.
        """
        return pos

    def object_text(self, payload: dict[str, Any]) -> tuple[Hashable, str] | None:
        """The dict lane: `(key, text)` when `decode(payload)` would give exactly
        `[GrowPart(key, text)]`, this decoder's state then updated as decode() updates it;
        None, and nothing changed, for anything else (decode() then decides).

        The fold applies the text with `grow_text`, and when the part is not open there,
        `[GrowPart(key, text)]` through the accumulator, as if decode() had given it. By
        default: None (the decoder has no such lane). What it buys, compiled
        (`python -m benchmarks.hot_lane`, mixed 10k streams): a fold of decoded dicts
        without it costs 3.9-4.9x as much a delta.
        """
        return None

    def sse_next_hot(self, buffer: bytes, pos: int) -> int:
        """Where, after `pos`, the next event `sse_shortcut` might take begins; -1: none.

        The fold frames and decodes everything before it in one run, so a precise answer
        keeps short streams (mostly events the lane leaves) from being framed an event at
        a time. By default: the next event that starts with `sse_hot_head`.
        """
        head = self.sse_hot_head
        if head is None:
            return -1
        found = buffer.find(b"\n\n" + head, pos)
        return found if found < 0 else found + 2

    def done(self) -> list[Delta]:
        """The `data: [DONE]` sentinel arrived (OpenAI-style streams)."""
        return [EndMessage()]

    def close(self) -> list[Delta]:
        """The input ended; return anything the decoder still holds."""
        return []

    def hold_text(self, held: dict[Any, int], key: Hashable, text: Any, tool_input: bool) -> None:
        """Count the text (if a str) of a delta held back for the part `key` will open
        once it starts, in `held` (characters by key). Each key becomes a part: past
        max_parts, or past the part's size limit, raise StreamLimitError at once, as the
        part itself would (not only when the held deltas are replayed)."""
        size = held.get(key)
        limits = self.limits
        if size is None:
            if len(held) >= limits.max_parts:
                raise StreamLimitError(
                    "max_parts",
                    limits.max_parts,
                    len(held) + 1,
                    "the message has too many parts (deltas held for parts not started)",
                )
            size = 0
        if type(text) is str:
            size += len(text)
        held[key] = size
        name, most = (
            ("max_tool_argument_chars", limits.max_tool_argument_chars)
            if tool_input
            else ("max_part_chars", limits.max_part_chars)
        )
        if size > most:
            raise StreamLimitError(
                name, most, size, f"the deltas held for part {key!r} (not started) grew too long"
            )

    def note_other_choice(self, index: int) -> None:
        """Remember a choice skipped for another (at most 64 kept: they name the choices
        in an error, and a hostile stream must not grow the set without bound)."""
        if len(self.other_choices) < 64:
            self.other_choices.add(index)

    def protocol_error(self, reason: str, raw: Any = None) -> StreamProtocolError:
        """A StreamProtocolError naming this provider."""
        return StreamProtocolError(reason, provider=self.provider, raw=raw)

    def repair(self, kind: str, reason: str, raw: Any = None) -> list[Delta]:
        """An out-of-spec but recoverable event: raise when strict, else count the repair.

        `reason` is the strict error's message ("expected X, got Y"); `kind` is the short
        snake_case name the lenient fold counts in metadata["repairs"]. The caller makes
        the repair itself (drops a duplicate, opens an implicit part...).
        """
        if self.strict:
            raise self.protocol_error(reason, raw)
        return [Repair(kind)]
