"""The sans-IO accumulator: neutral deltas in, events out, a Message at the end.

Text arrives as many small chunks; each part keeps a list of them and joins once, when
the part completes (or a snapshot asks). Completed parts are built once and reused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterable
from typing import Any, Literal, assert_never

from .accumulator_state import AccumulatorState, OpenSlot, SlotState
from .arguments import check_bool, check_count, check_instance, check_provider, check_role
from .construct import replaced, trusted
from .deltas import (
    ClosePart,
    Delta,
    EndMessage,
    GrowPart,
    OpenPart,
    Repair,
    ReportError,
    SkipEvent,
    UpdateMessage,
)
from .display import display_items_for
from .errors import (
    StateError,
    StreamLimitError,
    StreamProtocolError,
    ToolArgumentsError,
    UsageError,
    preview,
)
from .events import (
    Event,
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    ProviderErrored,
    UsageUpdated,
)
from .limits import DEFAULT_LIMITS, Limits, json_depth_over
from .message import (
    TURN_GOES_ON,
    Message,
    Role,
    Status,
    StopReason,
    ToolCall,
    Usage,
    forward_status,
    merge_usage,
    parse_tool_arguments,
    parse_tool_arguments_json,
    settled_stop_reason,
)
from .partial_json import Change, IncrementalJSON, PartialJSONError
from .parts import (
    INFERRED_OPTION,
    STREAMED_OPTIONS,
    UTTERANCES,
    Citation,
    ContentPart,
    PartType,
    Utterance,
    put_utterance,
    utterance,
    utterance_inferred,
)


def _is_flat(values: object) -> bool:
    """A dict none of whose values is a dict or list: json_depth_over stops at the dict."""
    if not isinstance(values, dict):
        return False
    for value in values.values():  # noqa: SIM110  (a loop: once per part, no generator)
        if isinstance(value, dict | list):
            return False
    return True


def _scan(slot: Slot, scanner: IncrementalJSON, text: str) -> tuple[Change, ...]:
    """Feed a tool call's argument text to its scanner; a fault stops the scanner.

    Text that is not JSON (a custom tool's free text, a broken stream) must not break
    the fold: the fault is recorded once, in the call's metadata, and scanning stops.
    """
    try:
        return tuple(scanner.feed(text))
    except PartialJSONError as exc:
        slot.scanner = None
        slot.options["partial_arguments_error"] = str(exc)
        return exc.changes


# What a completed slot keeps instead of its buffers (never written: a completed part
# takes no more deltas).
_RELEASED_CHUNKS: list[str] = []
_RELEASED_STREAMED: dict[str, list[str]] = {}
# A slot's citations until it gets one (most never do): shared, replaced on first write.
_NO_CITATIONS: list[Citation] = []


def _brackets(text: str | bytes) -> int:
    """How many `{` and `[` the JSON text holds: a bound on its nesting depth (each level
    opens with one; strings may hold more), counted in C. Under the depth limit, the walk
    of the parsed value (several µs for a small call) cannot find anything."""
    if isinstance(text, bytes):
        return text.count(b"{") + text.count(b"[")
    return text.count("{") + text.count("[")


# metadata["skipped_events"]: at most this many event types by name (each cut to this
# many characters), then SKIPPED_OTHER counts the rest.
_SKIPPED_TYPES = 64
_SKIPPED_NAME_CHARS = 100
SKIPPED_OTHER = "(other types)"

# The most of a server's unreadable error text kept in metadata["provider_error"].
_PROVIDER_ERROR_CHARS = 4096

# Argument chunks joined and encoded at a time in a final build (see Slot._parsed_call).
_ENCODE_BATCH = 4096


def _check_counts(counts: dict[str, int], field: str, other: str | None) -> None:
    """Refuse counts by name that a fold could not have kept: more than _SKIPPED_TYPES
    names (`other`, the name of the rest, only once they are reached), a name longer than
    _SKIPPED_NAME_CHARS, or a count of zero."""
    named = len(counts) - (1 if other is not None and other in counts else 0)
    if named > _SKIPPED_TYPES or (named < _SKIPPED_TYPES and other is not None and other in counts):
        rest = f", then {other!r} for the rest" if other is not None else ""
        raise StateError(field, f"expected at most {_SKIPPED_TYPES} names{rest}, got {len(counts)}")
    for name, count in counts.items():
        if len(name) > _SKIPPED_NAME_CHARS or count < 1:
            raise StateError(
                field,
                f"expected names of at most {_SKIPPED_NAME_CHARS} characters counted at least "
                f"once, got {preview(name, 40)}: {count}",
            )


class Slot:
    """One part or tool call being assembled."""

    __slots__ = (
        "chunks",
        "citations",
        "done",
        "has_content",
        "index",
        "kind",
        "limit",
        "options",
        "scanner",
        "size",
        "start",
        "streamed",
    )

    def __init__(self, index: int, start: ContentPart | ToolCall) -> None:
        self.index = index
        self.start = start
        if isinstance(start, ToolCall):
            initial = start.arguments if isinstance(start.arguments, str) else None
            self.options: dict[str, Any] = dict(start.metadata)
            self.citations: list[Citation] = _NO_CITATIONS
        else:
            initial = start.content
            self.options = dict(start.options)
            self.citations = list(start.citations) if start.citations else _NO_CITATIONS
        self.chunks: list[str] = [] if initial is None else [initial]
        self.has_content = initial is not None
        # Streamed string options (the signature) as chunk lists, joined when built.
        self.streamed: dict[str, list[str]] = {}
        if self.options:
            for key in STREAMED_OPTIONS:
                value = self.options.get(key)
                if isinstance(value, str):
                    self.streamed[key] = [value]
        self.done: ContentPart | ToolCall | None = None
        self.kind: PartType | Literal["tool_call"] = (
            "tool_call" if isinstance(start, ToolCall) else start.type
        )
        self.size = len(initial) if initial else 0
        self.limit = 0  # set by the accumulator from its Limits
        # A tool call's argument scanner, with partial_arguments on (None: off or stopped).
        self.scanner: IncrementalJSON | None = None

    def release(self, done: ContentPart | ToolCall) -> None:
        """The part is built: drop what only its growth needed (the start model, the
        chunks, the citation and option buffers). Fewer live objects per stream is less
        for the garbage collector to walk when thousands of folds are in flight."""
        self.start = done
        self.chunks = _RELEASED_CHUNKS
        self.citations = _NO_CITATIONS
        self.streamed = _RELEASED_STREAMED
        self.scanner = None
        # Any growth now fails the size check, before it could touch the shared buffers
        # above: _too_big then says the part is complete (a taker kept past the part's end).
        self.limit = -1

    def to_state(self) -> SlotState:
        """This slot as saved-state data."""
        start = self.done if self.done is not None else self.start
        part = start if isinstance(start, ContentPart) else None
        call = start if isinstance(start, ToolCall) else None
        if self.done is not None:
            return SlotState(part=part, call=call, complete=True)
        return SlotState(
            part=part,
            call=call,
            chunks=list(self.chunks),
            options=dict(self.options),
            streamed={key: list(chunks) for key, chunks in self.streamed.items()},
            citations=list(self.citations),
            scanning=self.scanner is not None,
        )

    @classmethod
    def from_state(cls, state: SlotState, index: int, limits: Limits) -> Slot:
        """The slot `state` describes, at `index`, checked against the fold's limits."""
        start = state.part if state.call is None else state.call
        if start is None or (state.part is not None and state.call is not None):
            raise StateError("", "expected exactly one of part and call")
        slot = cls(index, start)
        limit = (
            limits.max_tool_argument_chars if isinstance(start, ToolCall) else limits.max_part_chars
        )
        # A part as it started or as it was built, held to the limits its stream was: a
        # state cannot bring in what the fold would have refused.
        if isinstance(start, ContentPart):
            if len(start.content or "") > limit:
                raise StateError("part.content", f"expected at most {limit} characters")
            for key in STREAMED_OPTIONS:
                option = start.options.get(key)
                if isinstance(option, str) and len(option) > limit:
                    raise StateError(f"part.options.{key}", f"expected at most {limit} characters")
        elif isinstance(start.arguments, str) and len(start.arguments) > limit:
            raise StateError("call.arguments", f"expected at most {limit} characters")
        if state.complete:
            slot.done = start
            slot.release(start)
            return slot
        slot.limit = limit
        slot.size = sum(map(len, state.chunks))
        if slot.size > slot.limit:
            raise StateError("chunks", f"expected at most {slot.limit} characters, got {slot.size}")
        for key, chunks in state.streamed.items():
            if key not in STREAMED_OPTIONS or not chunks:
                raise StateError(f"streamed.{key}", "expected a streamed option's chunks")
            if sum(map(len, chunks)) > slot.limit:
                raise StateError(f"streamed.{key}", f"expected at most {slot.limit} characters")
        if state.scanning and not isinstance(start, ToolCall):
            raise StateError("scanning", "expected false for a part that is not a tool call")
        slot.chunks = list(state.chunks)
        slot.has_content = bool(slot.chunks)  # (content "" is one chunk: [""])
        slot.options = dict(state.options)
        slot.streamed = {key: list(chunks) for key, chunks in state.streamed.items()}
        slot.citations = list(state.citations) if state.citations else _NO_CITATIONS
        if state.scanning:
            # Derived from the text so far: scanned again, its changes already reported.
            slot.scanner = IncrementalJSON()
            if slot.chunks:
                _scan(slot, slot.scanner, "".join(slot.chunks))
        return slot

    def grow(self, delta: GrowPart) -> None:
        if delta.content is not None:
            self.size += len(delta.content)
            if self.size > self.limit:
                self._too_big(self.size)
            self.chunks.append(delta.content)
            self.has_content = True
        if delta.options:
            for key, value in delta.options.items():
                chunks = self.streamed.get(key)
                if chunks is not None and isinstance(value, str):
                    if sum(map(len, chunks)) + len(value) > self.limit:
                        self._too_big(sum(map(len, chunks)) + len(value), key)
                    chunks.append(value)
                else:
                    self.options[key] = value
                    if key in STREAMED_OPTIONS and isinstance(value, str):
                        self.streamed[key] = [value]
                    else:
                        self.streamed.pop(key, None)
        if delta.citations:
            if self.citations is _NO_CITATIONS:
                self.citations = []
            self.citations.extend(delta.citations)

    def take_text(self, content: str) -> PartDelta:
        """Grow by plain text (no options, no citations): `grow()` for the common delta,
        and its event. Only for an open slot (see `Accumulator.text_slot`)."""
        size = self.size = self.size + len(content)
        if size > self.limit:
            self._too_big(size)
        self.chunks.append(content)
        self.has_content = True
        scanner = self.scanner
        return PartDelta(
            index=self.index,
            part_type=self.kind,
            content=content,
            arguments_changes=(
                () if scanner is None or not content else _scan(self, scanner, content)
            ),
        )

    def _too_big(self, size: int, option: str | None = None) -> None:
        if self.done is not None:
            raise UsageError(
                f"Accumulator: expected growth of an open part, got more for part "
                f"{self.index}, which is complete (a taker used after its part ended)"
            )
        what = f"part {self.index}" + (f" option {option!r}" if option else "")
        name = "max_tool_argument_chars" if isinstance(self.start, ToolCall) else "max_part_chars"
        raise StreamLimitError(name, self.limit, size, f"{what} grew too long")

    def _text(self) -> str | None:
        if not self.has_content:
            return None
        if len(self.chunks) > 1:
            # Compact, so a later snapshot or the final build does not join the same prefix.
            self.chunks[:] = ["".join(self.chunks)]
        return self.chunks[0]

    def _options(self) -> dict[str, Any]:
        options = dict(self.options)
        for key, chunks in self.streamed.items():
            if len(chunks) > 1:
                chunks[:] = ["".join(chunks)]
            options[key] = chunks[0]
        return options

    def _parsed_call(
        self, start: ToolCall, metadata: dict[str, Any], max_depth: int | None
    ) -> ToolCall:
        """The final build of a tool call whose argument text is not blank.

        Memory: the text is encoded a batch of chunks at a time, never joined
        into one str (up to 4 bytes a character, where UTF-8 takes 1 to 4), and the
        chunks go before the parse (a final build ends the slot; _close drops them
        anyway): only the bytes and the parsed value coexist. An error decodes the bytes
        back, which gives the same text.
        """
        chunks = self.chunks
        if len(chunks) == 1:
            data = chunks[0].encode()
        else:
            data = b"".join(
                [
                    "".join(chunks[at : at + _ENCODE_BATCH]).encode()
                    for at in range(0, len(chunks), _ENCODE_BATCH)
                ]
            )
        del chunks  # the list itself goes too
        self.chunks = []
        arguments: str | dict[str, Any]
        status: Literal["incomplete", "complete"]
        try:
            parsed = parse_tool_arguments_json(start.call_id, start.name, data)
            depth = None
            if max_depth is not None and _brackets(data) > max_depth:
                depth = json_depth_over(parsed, max_depth)
            if depth is not None:
                raise ToolArgumentsError(
                    start.call_id, start.name, data.decode(), f"nested {depth} deep"
                )
            arguments, status = parsed, "complete"
        except ToolArgumentsError as exc:
            # Keep the raw text: a cut-off call is still worth showing and storing.
            metadata["arguments_error"] = str(exc)
            arguments, status = exc.raw, "incomplete"
        return self._built_call(start, arguments, status, metadata)

    def _built_call(
        self, start: ToolCall, arguments: Any, status: Any, metadata: dict[str, Any]
    ) -> ToolCall:
        """The finished call: the start's id and name, this slot's index."""
        return trusted(
            ToolCall,
            {
                "call_id": start.call_id,
                "name": start.name,
                "arguments": arguments,
                "index": self.index,
                "status": status,
                "metadata": metadata,
            },
        )

    def build(
        self, *, final: bool, cut: bool = False, max_depth: int | None = None
    ) -> ContentPart | ToolCall:
        """The part as accumulated; `final` parses a tool call's arguments.

        `cut`: the stream ended without finishing this part. A JSON object that parses
        is still whole (no valid text could follow it), but empty text is not "no
        arguments": the arguments may never have started.
        """
        start = self.start
        if isinstance(start, ToolCall):
            metadata = self._options()
            if final and self.has_content and any(map(str.strip, self.chunks)):
                # Text that is not blank (so `cut` changes nothing): parsed from its bytes.
                with contextlib.suppress(UnicodeEncodeError):  # below: the same error
                    return self._parsed_call(start, metadata, max_depth)
            text = self._text()
            arguments: str | dict[str, Any] | None = text
            status: Any = "incomplete"
            if final and not (cut and not (text or "").strip()):
                try:
                    parsed = parse_tool_arguments(start.call_id, start.name, text or "")
                    depth = None
                    if max_depth is not None and _brackets(text or "") > max_depth:
                        depth = json_depth_over(parsed, max_depth)
                    if depth is not None:
                        raise ToolArgumentsError(
                            start.call_id, start.name, text or "", f"nested {depth} deep"
                        )
                    arguments, status = parsed, "complete"
                except ToolArgumentsError as exc:
                    # Keep the raw text: a cut-off call is still worth showing and storing.
                    metadata["arguments_error"] = str(exc)
            return self._built_call(start, arguments, status, metadata)
        return trusted(
            ContentPart,
            {
                "type": start.type,
                "content": self._text(),
                "options": self._options(),
                "citations": list(self.citations),
            },
        )


class Accumulator:
    """Fold neutral deltas into events and a Message; `snapshot()` at any moment."""

    # `Any`: a wrong type gets streamfold.arguments' UsageError on both builds, not the
    # compiled build's own TypeError.
    def __init__(
        self,
        *,
        role: Any = "assistant",
        provider: Any = None,
        strict: Any = False,
        limits: Any = DEFAULT_LIMITS,
        partial_arguments: Any = False,
    ) -> None:
        if (
            role != "assistant"
            or (provider is not None and type(provider) is not str)
            or type(strict) is not bool
            or type(limits) is not Limits
            or type(partial_arguments) is not bool
        ):
            _check_arguments(role, provider, strict, limits, partial_arguments)
        self.role: Role = role
        self.provider = provider
        self.strict = strict
        self.limits = limits
        # Scan each tool call's argument text as it streams; PartDelta.arguments_changes.
        self.scan_arguments = partial_arguments
        self._repairs: dict[str, int] = {}
        self._slots: list[Slot] = []
        self._open: dict[Hashable, Slot] = {}
        self._closed_keys: set[Hashable] = set()
        # Slot indices of the text parts still waiting for a narration / answer marker:
        # those after the last tool part (see _open_part and _finish).
        self._unmarked: list[int] = []
        self._status: Status = "incomplete"
        self._stop_reason: StopReason | None = None
        self._raw_stop_reason: str | None = None
        self._usage: Usage | None = None
        self._metadata: dict[str, Any] = {} if provider is None else {"provider": provider}
        self._skipped: dict[str, int] = {}
        # True once MessageCompleted has been emitted. An attribute, not a property: the
        # fold reads it for every chunk of a live stream.
        self.finished = False
        self._final: Message | None = None
        # The MessageCompleted this fold emitted (the timing adds itself to it).
        self._completed: MessageCompleted | None = None

    def to_state(self) -> AccumulatorState:
        """This accumulator as saved-state data."""
        index = {id(slot): n for n, slot in enumerate(self._slots)}
        return AccumulatorState(
            role=self.role,
            scan_arguments=self.scan_arguments,
            slots=[slot.to_state() for slot in self._slots],
            open=[OpenSlot(key=key, slot=index[id(slot)]) for key, slot in self._open.items()],
            closed_keys=list(self._closed_keys),
            status=self._status,
            stop_reason=self._stop_reason,
            raw_stop_reason=self._raw_stop_reason,
            usage=self._usage,
            metadata=dict(self._metadata),
            skipped=dict(self._skipped),
            repairs=dict(self._repairs),
            finished=self.finished,
            final=self._final,
            unmarked=list(self._unmarked),
        )

    @classmethod
    def from_state(
        cls, state: AccumulatorState, *, provider: str | None, strict: bool, limits: Limits
    ) -> Accumulator:
        """The accumulator `state` describes, checked whole against the fold's limits."""
        acc = cls(
            role=state.role,
            provider=provider,
            strict=strict,
            limits=limits,
            partial_arguments=state.scan_arguments,
        )
        if len(state.slots) > limits.max_parts:
            raise StateError("slots", f"expected at most {limits.max_parts} (max_parts)")
        for n, slot_state in enumerate(state.slots):
            try:
                acc._slots.append(Slot.from_state(slot_state, n, limits))
            except StateError as exc:
                raise exc.within(f"slots[{n}]") from None
            if slot_state.scanning and not state.scan_arguments:
                raise StateError(f"slots[{n}].scanning", "expected false: scan_arguments is off")
            slot = acc._slots[-1]
            # The values a fold keeps are held to its depth limit, as when they arrived.
            try:
                acc._check_part_depth(slot.start, "part {}", n)
                acc._check_depth(slot.options, "part {}", n)
            except StreamLimitError as exc:
                raise StateError(f"slots[{n}]", str(exc)) from None
        try:
            acc._check_depth(state.metadata, "message metadata")
            acc._check_depth(state.usage.raw if state.usage else None, "usage")
        except StreamLimitError as exc:
            raise StateError("metadata" if "metadata" in str(exc) else "usage", str(exc)) from None
        for n, entry in enumerate(state.open):
            if entry.slot >= len(acc._slots) or state.slots[entry.slot].complete:
                raise StateError(f"open[{n}].slot", "expected the index of an open slot")
            if entry.key in acc._open:
                raise StateError(f"open[{n}].key", "expected each open key once")
            acc._open[entry.key] = acc._slots[entry.slot]
        if len(acc._open) != sum(1 for slot in state.slots if not slot.complete):
            raise StateError("open", "expected every slot that is not complete to be open")
        if len({id(slot) for slot in acc._open.values()}) != len(acc._open):
            raise StateError("open", "expected each open slot under one key")
        if state.finished != (state.final is not None) or (state.finished and acc._open):
            raise StateError("final", "expected the final message exactly when finished")
        if len(state.closed_keys) > len(state.slots):
            raise StateError("closed_keys", "expected at most one key per slot")
        _check_counts(state.skipped, "skipped", SKIPPED_OTHER)
        _check_counts(state.repairs, "repairs", None)
        acc._closed_keys = set(state.closed_keys)
        acc._status = state.status
        acc._stop_reason = state.stop_reason
        acc._raw_stop_reason = state.raw_stop_reason
        acc._usage = state.usage
        acc._metadata = dict(state.metadata)
        acc._skipped = dict(state.skipped)
        acc._repairs = dict(state.repairs)
        acc.finished = state.finished
        acc._final = state.final
        for n, index in enumerate(state.unmarked):
            if not (index < len(acc._slots) and acc._slots[index].kind == "text"):
                raise StateError(f"unmarked[{n}]", "expected the index of a text slot")
        acc._unmarked = list(state.unmarked)
        if state.final is not None:
            # The final message is the one the slots and the rest make (it is built from
            # them, once): anything else in it would skip every check above.
            made = acc._message([slot.done for slot in acc._slots if slot.done is not None])
            if state.final != made:
                raise StateError("final", "expected the message the slots and fields make")
        return acc

    def apply(self, delta: Delta) -> list[Event]:
        """Apply one neutral delta and return the events it causes."""
        if self.finished:
            return []
        if isinstance(delta, GrowPart):
            content = delta.content
            if content is not None and delta.options is None and not delta.citations:
                # The common delta, just text, for an open part (else the checks below).
                events: list[Event] = []
                if self.grow_text(delta.key, content, events):
                    return events
            slot = self._open.get(delta.key)
            if slot is None:
                slot = self._slot_for(delta.key, "a delta")
                if slot is None:
                    return []
            if delta.options:
                self._check_depth(delta.options, "a delta of part {}", slot.index)
            if delta.citations:
                # Placed as a part start's are checked (see _check_part_depth): a citation
                # streamed in later is held to the same depth.
                metadata = [c.metadata for c in delta.citations]
                self._check_depth([metadata], "a citation of part {}", slot.index)
            slot.grow(delta)
            scanner = slot.scanner
            return [
                PartDelta(
                    index=slot.index,
                    part_type=slot.kind,
                    content=content,
                    options=delta.options,
                    citations=delta.citations,
                    arguments_changes=(
                        () if scanner is None or not content else _scan(slot, scanner, content)
                    ),
                )
            ]
        if isinstance(delta, OpenPart):
            return self._open_part(delta)
        if isinstance(delta, ClosePart):
            slot = self._slot_for(delta.key, "an end")
            if slot is None:
                return []
            return [self._close(delta.key, slot, delta.explicit, delta.final)]
        if isinstance(delta, UpdateMessage):
            return self._update(delta)
        if isinstance(delta, ReportError):
            return self._error(delta)
        if isinstance(delta, EndMessage):
            if self._status == "incomplete" and self._stop_reason is None:
                # The wire's end marker with no word on why it stopped (a Chat stream's
                # [DONE] without finish_reason): the message is whole, its reason unknown.
                # A provider's own "incomplete" comes with its reason and stands.
                self._status = "complete"
            return self._finish(cut=False)
        if isinstance(delta, SkipEvent):
            self._skip(delta.event_type)
            return []
        if isinstance(delta, Repair):
            self._repairs[delta.kind] = self._repairs.get(delta.kind, 0) + 1
            return []
        assert_never(delta)

    def grow_text(self, key: Hashable, content: str, out: list[Event]) -> bool:
        """`apply(GrowPart(key, content))` for an open part, its event appended to `out`.

        The way apply() takes for plain text, and the fold's hot lane's, without building
        the GrowPart. False, and nothing done, when the part is not open (or the message
        is over): apply()'s checks then decide (a repair, or an error when strict).
        """
        slot = self._open.get(key)
        if slot is None or self.finished:
            return False
        out.append(slot.take_text(content))
        return True

    def text_slot(self, key: Hashable) -> Slot | None:
        """The open part at `key`, whose `take_text(text)` is what `grow_text(key, text,
        out)` does, giving the event, for as long as the part stays open (the fold's dict
        lane keeps it between events that open or close nothing); None when the part is
        not open."""
        slot = self._open.get(key)
        if slot is None or self.finished:
            return None
        return slot

    def grow_texts(self, key: Hashable, texts: list[str], out: list[Event]) -> bool:
        """`grow_text` for each of `texts` in order, at one call's cost (the hot lane's runs).

        The same events, state and errors: a run that would pass the part's size limit,
        or whose deltas carry argument changes, goes one text at a time, so the events
        before the one that fails are in `out` when it raises.
        """
        slot = self._open.get(key)
        if slot is None or self.finished:
            return False
        if not texts:
            return True
        size = slot.size + sum(map(len, texts))
        if size > slot.limit or slot.scanner is not None:
            for text in texts:
                self.grow_text(key, text, out)
            return True
        slot.size = size
        slot.chunks += texts
        slot.has_content = True
        index = slot.index
        kind = slot.kind
        out += [PartDelta(index=index, part_type=kind, content=t) for t in texts]
        return True

    def apply_all(self, deltas: Iterable[Delta]) -> list[Event]:
        """Apply several deltas in order."""
        events: list[Event] = []
        for delta in deltas:
            events.extend(self.apply(delta))
        return events

    def close(self) -> list[Event]:
        """The input ended: finish the message with the status it has (incomplete if cut)."""
        return [] if self.finished else self._finish(cut=True)

    def cancel(self) -> list[Event]:
        """The consumer stopped reading: finish the message with status cancelled."""
        if self.finished:
            return []
        self._status = forward_status(self._status, "cancelled")
        self._stop_reason = "cancelled"
        return self._finish(cut=True)

    def note_provider_error(self, reported: object) -> None:
        """Keep a failure the server reported that no decoder could read (an SSE error
        line) in the message's metadata["provider_error"]: a string cut to 4,096
        characters; an object as it came, unless nested past the depth limit."""
        if isinstance(reported, str):
            value: Any = reported[:_PROVIDER_ERROR_CHARS]
        elif json_depth_over(reported, self.limits.max_depth) is None:
            value = reported
        else:
            value = preview(reported, _PROVIDER_ERROR_CHARS)
        self._metadata["provider_error"] = value

    def note_truncated_tail(self) -> None:
        """The input ended inside an event; its fragment was dropped."""
        self._metadata["truncated_tail"] = True

    def partial_arguments(self, index: Any) -> Any:
        """The parsed arguments of the tool call at slot `index` so far.

        With `partial_arguments` on, an open call's live partial value (owned by the
        scanner: do not mutate it; a read costs O(1), or O(the open string's length) when
        it grew since the last read); a completed call's parsed arguments (None if they
        did not parse); None for a part that is not a tool call, or when the option is off
        and the call is still open, or after the call's text stopped being JSON.
        """
        if type(index) is not int:
            check_count("partial_arguments", "index", index)
        if not 0 <= index < len(self._slots):
            return None
        slot = self._slots[index]
        if isinstance(slot.done, ToolCall):
            return slot.done.arguments if isinstance(slot.done.arguments, dict) else None
        return None if slot.scanner is None else slot.scanner.value

    def snapshot(self) -> Message:
        """The message so far, without disturbing the fold."""
        if self._final is not None:
            return self._final
        return self._message(
            [slot.build(final=False) if slot.done is None else slot.done for slot in self._slots]
        )

    # --- internals -------------------------------------------------------------------

    def _slot_for(self, key: Hashable, what: str) -> Slot | None:
        slot = self._open.get(key)
        if slot is None:
            closed = key in self._closed_keys
            if not self.strict:
                # Lenient: a duplicated or stray event is dropped, and the repair counted.
                kind = "after_part_end" if closed else "for_unknown_part"
                self._repair(f"{what.split()[-1]}_{kind}")
                return None
            state = "already completed" if closed else "never started"
            raise StreamProtocolError(
                f"expected {what} for an open part, got one for part {key!r}, which was {state}",
                provider=self.provider,
            )
        return slot

    def _skip(self, event_type: str) -> None:
        """Count an unknown event type: a stream of a million made-up types must not
        grow the message, so past _SKIPPED_TYPES names the rest share one key."""
        name = event_type[:_SKIPPED_NAME_CHARS]
        if name not in self._skipped and len(self._skipped) >= _SKIPPED_TYPES:
            name = SKIPPED_OTHER
        self._skipped[name] = self._skipped.get(name, 0) + 1

    def _repair(self, kind: str) -> None:
        self._repairs[kind] = self._repairs.get(kind, 0) + 1

    def _open_part(self, delta: OpenPart) -> list[Event]:
        if delta.key in self._open:
            if not self.strict:
                self._repair("duplicate_part_start")
                return []
            raise StreamProtocolError(
                f"expected a new part, got a second start for open part {delta.key!r}",
                provider=self.provider,
            )
        self._check_part_depth(delta.part, "the start of part {!r}", delta.key)
        if len(self._slots) >= self.limits.max_parts:
            raise StreamLimitError(
                "max_parts",
                self.limits.max_parts,
                len(self._slots) + 1,
                "the message has too many parts",
            )
        part = delta.part
        # PartStarted carries the part's identity and kind, never its content: text (or
        # argument text) that came with the start goes on in a PartDelta of its own, as if
        # it had streamed, so a consumer that prints the deltas misses nothing.
        first: GrowPart | None = None
        if isinstance(part, ContentPart):
            if part.content or part.citations:
                first = GrowPart(delta.key, part.content or None, None, tuple(part.citations))
                part = trusted(
                    ContentPart,
                    {
                        "type": part.type,
                        "content": None if part.content is None else "",
                        "options": part.options,
                        "citations": [],
                    },
                )
        elif isinstance(part.arguments, str) and part.arguments:
            first = GrowPart(delta.key, part.arguments)
            part = replaced(part, {"arguments": ""})
        slot = Slot(len(self._slots), part)
        slot.limit = (
            self.limits.max_tool_argument_chars
            if isinstance(part, ToolCall)
            else self.limits.max_part_chars
        )
        if slot.size > slot.limit:
            slot._too_big(slot.size)
        # Tool activity of any kind makes the text before it narration, the moment it starts.
        events: list[Event] = (
            self._mark_waiting("narration") if delta.tool or isinstance(part, ToolCall) else []
        )
        self._slots.append(slot)
        self._open[delta.key] = slot
        self._closed_keys.discard(delta.key)
        if isinstance(part, ToolCall) and part.index != slot.index:
            part = replaced(part, {"index": slot.index})
        events.append(PartStarted(index=slot.index, part=part))
        if isinstance(part, ContentPart) and part.type == "text":
            marker = utterance(part)
            if marker is None:
                self._unmarked.append(slot.index)
            else:
                # The provider's own marker: said at once, and never replaced.
                events.append(
                    PartMarked(
                        index=slot.index, utterance=marker, explicit=not utterance_inferred(part)
                    )
                )
        if (
            self.scan_arguments
            and isinstance(part, ToolCall)
            and not isinstance(part.arguments, dict)
            # A custom tool's input is free text, never JSON.
            and part.metadata.get("type") != "custom_tool_call"
        ):
            slot.scanner = IncrementalJSON()
        if first is not None:
            events.extend(self.apply(first))
        return events

    def mark(self, index: int, marker: Utterance, *, explicit: bool) -> list[Event]:
        """Mark the text part at slot `index` (a relay replaying a producer's PartMarked).

        An explicit marker replaces an inferred one; nothing replaces an explicit one.
        Nothing happens (no event) for a slot that is not a text part, or once finished.
        """
        if self.finished or not 0 <= index < len(self._slots):
            return []
        if self._slots[index].kind != "text" or marker not in UTTERANCES:
            return []
        event = self._mark(self._slots[index], marker, explicit)
        return [] if event is None else [event]

    def _mark(self, slot: Slot, marker: Utterance, explicit: bool) -> PartMarked | None:
        done = slot.done
        assert not isinstance(done, ToolCall)  # only text slots are marked
        options = slot.options if done is None else done.options
        if options.get("utterance") in UTTERANCES and (
            not explicit or options.get(INFERRED_OPTION) is not True
        ):
            return None  # marked already, as firmly
        if done is not None:
            # Complete (a marker known only once the message ended): rebuilt, with the
            # options put_utterance would give (the marker is one it accepts).
            options = dict(options)
        options["utterance"] = marker
        if explicit:
            options.pop(INFERRED_OPTION, None)
        else:
            options[INFERRED_OPTION] = True
        if done is not None:
            slot.done = slot.start = trusted(
                ContentPart,
                {
                    "type": done.type,
                    "content": done.content,
                    "options": options,
                    "citations": done.citations,
                },
            )
        return PartMarked(index=slot.index, utterance=marker, explicit=explicit)

    def _mark_waiting(self, marker: Utterance) -> list[Event]:
        """Mark every text part still waiting for a marker (inferred)."""
        if not self._unmarked:
            return []
        slots = self._slots
        events: list[Event] = []
        for index in self._unmarked:
            event = self._mark(slots[index], marker, False)
            if event is not None:
                events.append(event)
        self._unmarked = []
        return events

    def _closing_utterance(self) -> Utterance | None:
        """The marker of the text after the last tool, by how the message ended.

        A cut, cancelled or failed message (status incomplete, cancelled, error) leaves it
        unmarked: whether it was the answer is not known. By status, not by whether the
        wire said "end": a Gemini stream just stops after the chunk with its finishReason.
        """
        if self._status in ("incomplete", "cancelled", "error"):
            return None
        return "narration" if self._stop_reason in TURN_GOES_ON else "answer"

    def _close(
        self,
        key: Hashable,
        slot: Slot,
        explicit: bool,
        final: ContentPart | ToolCall | None = None,
        cut: bool = False,
    ) -> PartCompleted:
        if final is None:
            part = slot.build(final=True, cut=cut, max_depth=self.limits.max_depth)
        else:
            # Checked before anything changes: a refused replacement leaves the part open,
            # so a later end (or a cancel) still keeps what it had.
            self._check_part_depth(final, "part {}", slot.index)
            part = replaced(final, {"index": slot.index}) if isinstance(final, ToolCall) else final
            marker = slot.options.get("utterance") if slot.kind == "text" else None
            if marker in UTTERANCES and isinstance(part, ContentPart) and not utterance(part):
                # Marked while open: the replacement keeps the marker.
                inferred = slot.options.get(INFERRED_OPTION) is True
                part = put_utterance(part, marker, inferred=inferred)
        del self._open[key]
        self._closed_keys.add(key)
        slot.done = part
        slot.release(part)
        return PartCompleted(
            index=slot.index,
            part=part,
            display_items=tuple(display_items_for(part, self.role)),
            explicit=explicit,
        )

    def _update(self, delta: UpdateMessage) -> list[Event]:
        if delta.role is not None:
            self.role = delta.role
        if delta.status is not None:
            self._status = forward_status(self._status, delta.status)
        if delta.stop_reason is not None:
            self._stop_reason = delta.stop_reason
        if delta.raw_stop_reason is not None:
            self._raw_stop_reason = delta.raw_stop_reason
        if delta.metadata:
            self._check_depth(delta.metadata, "message metadata")
            self._metadata.update(delta.metadata)
        if delta.usage is not None:
            self._check_depth(delta.usage.raw, "usage")
            self._usage = merge_usage(self._usage, delta.usage)
            assert self._usage is not None
            return [UsageUpdated(usage=self._usage)]
        return []

    def _error(self, delta: ReportError) -> list[Event]:
        self._status = forward_status(self._status, "error")
        self._stop_reason = "error"
        self._metadata["error"] = {"type": delta.error_type, "message": delta.message}
        events: list[Event] = self._close_open(cut=True)
        events.append(
            ProviderErrored(
                error_type=delta.error_type,
                message=delta.message,
                raw=delta.raw,
                partial=self.snapshot(),
            )
        )
        events.extend(self._finish(cut=True))
        return events

    def _check_part_depth(self, part: ContentPart | ToolCall, what: str, *args: object) -> None:
        # The walk below covers [options, [citation metadata...]] (a part) or [arguments,
        # metadata] (a call): with no citations, and no dict or list inside the options or
        # metadata, the deepest container is that dict at depth 2, so a limit of 2 or more
        # passes without the walk (nearly every part start).
        if self.limits.max_depth >= 2:
            if isinstance(part, ContentPart):
                if part.citations == [] and _is_flat(part.options):
                    return
            elif not isinstance(part.arguments, dict | list) and _is_flat(part.metadata):
                return
        if isinstance(part, ContentPart):
            self._check_depth([part.options, [c.metadata for c in part.citations]], what, *args)
        else:
            self._check_depth([part.arguments, part.metadata], what, *args)

    def _check_depth(self, value: object, what: str, *args: object) -> None:
        """Refuse `value` nested past the depth limit; `what` (formatted with `args` only
        when it is said: a part start must not pay for its error message) names it."""
        depth = json_depth_over(value, self.limits.max_depth)
        if depth is not None:
            raise StreamLimitError(
                "max_depth",
                self.limits.max_depth,
                depth,
                f"{what.format(*args)} is nested too deep",
            )

    def _close_open(self, *, cut: bool) -> list[Event]:
        # A part still open when the message ends was never closed on the wire: its end
        # is inferred. `cut`: the message did not end on the wire either (input ran out,
        # the consumer cancelled, the provider failed), so the part was cut short.
        return [self._close(key, slot, False, cut=cut) for key, slot in list(self._open.items())]

    def _finish(self, *, cut: bool) -> list[Event]:
        events: list[Event] = []
        if self._status == "complete" and self._stop_reason in (None, "stop"):
            # Settled before the text waiting for its marker is marked: the narration
            # rule reads it.
            built = [slot.start if slot.done is None else slot.done for slot in self._slots]
            self._stop_reason = settled_stop_reason(
                self._stop_reason,
                self._status,
                [p for p in built if isinstance(p, ToolCall)],
                [p for p in built if isinstance(p, ContentPart)],
            )
        utterance_at_end = self._closing_utterance()
        if utterance_at_end is not None:
            events.extend(self._mark_waiting(utterance_at_end))
        events.extend(self._close_open(cut=cut))
        # Whether the provider's end-of-stream marker arrived: False for a stream that
        # was cut, cancelled or ended by an error, even one whose status is complete
        # (a Chat stream cut after finish_reason, before its usage chunk and [DONE]).
        self._metadata["end_marker"] = not cut
        message = self._message([slot.done for slot in self._slots if slot.done is not None])
        self._final = message
        self.finished = True
        completed = MessageCompleted(message=message)
        self._completed = completed  # the timing's, once it read the clock
        events.append(completed)
        return events

    def _message(self, built: list[ContentPart | ToolCall]) -> Message:
        metadata = dict(self._metadata)
        if self._skipped:
            metadata["skipped_events"] = dict(self._skipped)
        if self._repairs:
            metadata["repairs"] = dict(self._repairs)
        return trusted(
            Message,
            {
                "role": self.role,
                "content": [p for p in built if isinstance(p, ContentPart)],
                "tool_calls": [p for p in built if isinstance(p, ToolCall)],
                "tool_results": [],
                "status": self._status,
                "usage": self._usage,
                "stop_reason": self._stop_reason,
                "raw_stop_reason": self._raw_stop_reason,
                "metadata": metadata,
            },
        )


def _check_arguments(
    role: Any, provider: Any, strict: Any, limits: Any, partial_arguments: Any
) -> None:
    """Refuse a wrong-typed Accumulator argument with one UsageError."""
    check_role("Accumulator", role)
    check_provider("Accumulator", provider)
    check_bool("Accumulator", "strict", strict)
    check_instance("Accumulator", "limits", limits, Limits, "a streamfold.Limits")
    check_bool("Accumulator", "partial_arguments", partial_arguments)
