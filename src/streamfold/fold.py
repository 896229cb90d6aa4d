"""The synchronous pipeline: chunks (bytes, str, dicts, SDK objects) in, events out.

framing -> JSON -> provider decoder -> accumulator. Pure: no I/O; the clock is read only
by the timing (streamfold.timing), after a chunk that moved something.
"""

from __future__ import annotations

import base64
import contextlib
import inspect
import math
import re
import types
from collections.abc import Generator, Iterable, Iterator
from typing import Any, ClassVar, Final

import jiter
from mypy_extensions import mypyc_attr
from pydantic import ValidationError
from pydantic_core import to_json

from .accumulator import Accumulator, Slot
from .arguments import (
    check_bool,
    check_count,
    check_instance,
    check_provider,
    check_role,
    check_source,
    check_timing,
    no_events_error,
)
from .construct import _plain_json
from .deltas import ClosePart, Delta, GrowPart, OpenPart
from .errors import (
    ChoiceError,
    OutputValidationError,
    StateError,
    StreamfoldError,
    StreamLimitError,
    StreamProtocolError,
    UsageError,
    preview,
)
from .events import Event, MessageCompleted
from .eventstream import EventStreamFramer, EventStreamMessage, eventstream_payload
from .eventstream_state import EventStreamState
from .fold_state import FoldState, HeldEvent, HeldFault, LimitsState
from .framing import (
    NDJSONDecoder,
    SSEDecoder,
    SSEEvent,
    StreamFormat,
    sniff_format,
)
from .framing_state import NDJSONState, SSEState
from .limits import DEFAULT_LIMITS, Limits
from .message import Message, MessageDelta
from .output import OutputFolder, output_adapter
from .parts import ContentPart
from .providers import (
    PROVIDERS,
    canonical_provider,
    decoder_class,
    detect_provider,
    registered_providers,
)
from .providers.base import Decoder
from .providers.messagedelta import MessageDeltaDecoder
from .recording import Recording
from .state_schema import validation_error
from .telemetry import check_request
from .timing import Clock, StreamTiming

# How many events may pass before a stream that names no provider is given up on.
_DETECT_WITHIN = 16
# fold_objects: no part grown by the dict lane since the last full-path event.
_NO_PART: Final = object()
# What a decoder raises on a payload of the wrong shape (its contract is typed errors,
# so these become StreamProtocolError): RecursionError from a value nested past the
# interpreter's limit, UnicodeEncodeError (a ValueError) from a lone surrogate.
_MALFORMED = (
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
    ValueError,
    RecursionError,
    OverflowError,  # an integer past any float, where the SDK or a decoder wants one
    # A registered decoder's stray next() past its end: left to escape, it ends the fold's
    # generator (Python makes it a RuntimeError there, the compiled build an AssertionError).
    StopIteration,
)
# A lone surrogate: text no UTF-8 wire can carry (jiter refuses it in bytes).
_SURROGATE = re.compile("[\\ud800-\\udfff]")  # escapes: mypyc takes no surrogate literal
# str.isascii, held: compiled, `text.isascii()` looks the method up on every call (mypyc
# has no primitive for it), a third of the dict lane's own time per delta.
_is_ascii: Final = str.isascii
# The module of the openai SDK's chat stream helper events (`chat.completions.stream()`).
_OPENAI_CHAT_HELPER = "openai.lib.streaming.chat"
# How much of the input's start the error for input without an event quotes.
_START_BYTES = 200
# A generator object's type, and the code flag that makes one awaitable
# (types.coroutine): what check_source looks for in a generator.
_GENERATOR: Final = types.GeneratorType
_ITERABLE_COROUTINE: Final = inspect.CO_ITERABLE_COROUTINE
# Metadata a fold records whether or not it understood any event of its stream.
_UNLEARNED_METADATA = frozenset({"provider", "skipped_events", "truncated_tail"})


class StreamFolder:
    """Feed a provider stream piece by piece; get events; read `snapshot()` at any time."""

    # The SSE hot lane starts after this many events: a short stream (most real ones are
    # a few dozen events, nearly all of them starts, stops and metadata) is framed in one
    # run and never pays for the lane's tries; a long one loses nothing that matters.
    hot_lane_after: ClassVar[int] = 32
    # ... or at once, when the bytes at hand hold at least this many events: a stream read
    # in large pieces (a replay, a proxy's buffer, a fast server) then takes the lane from
    # its first delta, and a short one is still framed in one run.
    hot_lane_ahead: ClassVar[int] = 64
    # ... and never for bytes at hand this short at the stream's start: framed in one run,
    # without the search for their events' ends, which reads every byte (~1 us a KiB) and
    # costs what the lane would save on the few events after hot_lane_after (the real
    # recordings' instruction counts: none folds slower below 16 KiB; at 32 KiB the
    # delta-dense ones do, by up to a third).
    hot_lane_short: ClassVar[int] = 16384

    # The parameters are `Any` so that a wrong type reaches check_arguments (one
    # UsageError on both builds) instead of the compiled build's own TypeError.
    def __init__(
        self,
        provider: Any = None,
        *,
        choice: Any = 0,
        strict: Any = False,
        role: Any = "assistant",
        limits: Any = DEFAULT_LIMITS,
        partial_arguments: Any = False,
        timing: Any = None,
        output: Any = None,
        output_tool: Any = None,
    ) -> None:
        _check_folder_arguments(
            "StreamFolder", provider, choice, strict, role, limits, partial_arguments, timing
        )
        # The structured output's box (streamfold.output): it sees the events and adds its own.
        self._output = _output_folder("StreamFolder", output, output_tool)
        self._decoder_options: dict[str, Any] = {"choice": choice, "strict": strict}
        # When the chunks arrived (streamfold.timing): noted after each feed() that moved
        # something, held by the final message. Not saved: a restored fold starts a new one
        # (another process has another clock).
        self.timing = StreamTiming() if timing is None else timing
        self._limits = limits
        self._bytes = 0
        self._provider = canonical_provider(provider) if provider else None
        self._decoder: Decoder | None = (
            self._new_decoder(self._provider) if self._provider else None
        )
        self._acc = Accumulator(
            role=role,
            provider=self._provider,
            strict=strict,
            limits=limits,
            partial_arguments=partial_arguments,
        )
        self._format: StreamFormat | None = None
        self._framer: Any = None
        self._head = b""
        # Events held until the provider is known.
        self._undetected: list[tuple[Any, str | None]] = []
        self._position = 0
        self._closed = False
        # A broken stream's error, held while the events before it (from the same chunk)
        # go to the caller; the next feed() or close() raises it (see _feed_bytes).
        self._fault: StreamProtocolError | None = None
        # The input's first bytes, kept for the error that says no event was found in it.
        self._start = b""

    @property
    def provider(self) -> str | None:
        """The provider, as given or as detected (None until known)."""
        return self._provider

    @property
    def events_seen(self) -> int:
        """How many events (frames, or decoded objects) the fold has taken so far."""
        return self._position

    @property
    def finished(self) -> bool:
        """True once MessageCompleted was emitted; later input is ignored."""
        return self._acc.finished

    def snapshot(self) -> Message:
        """The message so far."""
        return self._acc.snapshot()

    @property
    def output(self) -> Any:
        """The structured output (`output=`): the latest partial value while it streams, the
        validated value once `OutputCompleted` went out; None before any, or after it failed."""
        return None if self._output is None else self._output.value

    @property
    def output_error(self) -> OutputValidationError | None:
        """Why the structured output failed (`OutputFailed`), or None."""
        return None if self._output is None else self._output.error

    def partial_arguments(self, index: Any) -> Any:
        """The tool call at slot `index`: its arguments parsed so far (`partial_arguments=True`).

        See `Accumulator.partial_arguments`; for a snapshot's ToolCall, use
        `streamfold.partial_json.partial_arguments(call)`.
        """
        return self._acc.partial_arguments(index)

    def save_state(self, *, key: Any = None) -> dict[str, Any]:  # Any: see __init__
        """The fold's whole state as JSON-ready data, to restore later or elsewhere.

        With `key`, the state carries an HMAC-SHA256 that `restore(state, key=key)` checks.
        """
        from .state import dump_state

        if self._output is not None:
            raise UsageError(
                "save_state: expected a fold without output= (a state does not hold the "
                "output's validation), got one with it"
            )
        try:
            state = self.to_state()
        except ValidationError as exc:
            # A value the fold holds but a state may not (an undetected event nested
            # past the state's depth bound): said as what it is, not pydantic's error.
            error = validation_error(exc)
            raise UsageError(
                f"save_state: expected a fold a state can hold, got {error.field}: {error.problem}"
            ) from None
        return dump_state(state, key=key)

    @classmethod
    def restore(
        cls,
        state: Any,
        *,
        key: Any = None,  # Any: see __init__
        max_size: Any = None,
        limits: Any = None,
    ) -> StreamFolder:
        """A folder that continues exactly where the one that saved `state` stopped.

        `state` is what `save_state` returned, or its JSON text. It is validated whole
        first; anything wrong raises `StateError` naming the field. With `key`, a state
        without the right HMAC is refused. A state measuring more than `max_size`
        (default `streamfold.state.MAX_STATE_SIZE`, 256 MiB: JSON text by its length, a
        dict by the characters of its strings and keys plus one per value) is refused
        before anything else is read. The fold keeps the limits it was saved with, and
        what the state holds must be within them; with `limits`, a state whose limits
        pass any of these is refused (an unsigned state chooses its own).
        """
        from .state import load_state

        if limits is not None and not isinstance(limits, Limits):
            raise UsageError(
                f"restore: expected limits to be a Limits or None, got {type(limits).__name__}"
            )
        model = load_state(state, FoldState, key=key, max_size=max_size)
        if limits is not None:
            saved = model.limits.model_dump()
            for name, most in limits.as_dict().items():
                if saved[name] > most:
                    raise StateError(
                        f"folder.limits.{name}",
                        f"expected at most {most} (restore's limits), got {saved[name]}",
                    )
        try:
            return cls.from_state(model)
        except StateError as exc:
            raise exc.within("folder") from None
        except StreamfoldError as exc:
            raise StateError("folder", str(exc)) from None

    def to_state(self) -> FoldState:
        """This fold as saved-state data (see `save_state` for the JSON)."""
        framer = self._framer.to_state() if self._framer is not None else None
        return FoldState(
            provider=self._provider,
            choice=self._decoder_options["choice"],
            strict=self._decoder_options["strict"],
            limits=LimitsState(**self._limits.as_dict()),
            bytes=self._bytes,
            format=self._format,
            sse=framer if isinstance(framer, SSEState) else None,
            ndjson=framer if isinstance(framer, NDJSONState) else None,
            eventstream=framer if isinstance(framer, EventStreamState) else None,
            head=self._head,
            undetected=[HeldEvent(payload=p, event=e) for p, e in self._undetected],
            position=self._position,
            closed=self._closed,
            fault=None if self._fault is None else HeldFault.of(self._fault),
            decoder=None
            if self._decoder is None
            else self._decoder.to_state().model_dump(mode="json"),
            accumulator=self._acc.to_state(),
        )

    @classmethod
    def from_state(cls, state: FoldState) -> StreamFolder:
        """The fold `state` describes, every field checked against the others first."""
        limits = Limits(**state.limits.model_dump())
        if state.bytes > limits.max_bytes:
            raise StateError("bytes", f"expected at most {limits.max_bytes} (max_bytes)")
        provider = state.provider
        if provider is not None and provider not in PROVIDERS:
            raise StateError("provider", f"expected one of {', '.join(PROVIDERS)}")
        framers = {"sse": state.sse, "ndjson": state.ndjson, "eventstream": state.eventstream}
        for name, framer in framers.items():
            if (framer is not None) != (state.format == name):
                raise StateError(name, f"expected a {name} framer exactly when format is {name}")
        held = len(state.head) + sum(
            len(framer.buffer) + sum(map(len, getattr(framer, "data", ())))
            for framer in (state.sse, state.ndjson, state.eventstream)
            if framer is not None
        )
        if held > state.bytes:
            raise StateError("bytes", f"expected at least the {held} bytes the framing holds")
        if state.head and (state.format is not None or sniff_format(state.head) is not None):
            raise StateError("head", "expected bytes only before the framing is known")
        if state.decoder is None:
            if provider is not None and state.format != "eventstream":
                raise StateError("decoder", f"expected the state of the {provider} decoder")
        elif provider is None or state.undetected:
            raise StateError("decoder", "expected no decoder before the provider is known")
        if len(state.undetected) >= _DETECT_WITHIN:
            raise StateError("undetected", f"expected fewer than {_DETECT_WITHIN} events")
        folder = cls(limits=limits)
        folder._decoder_options = {"choice": state.choice, "strict": state.strict}
        folder._provider = provider
        if state.decoder is not None:
            assert provider is not None
            kind = decoder_class(provider)
            try:
                decoder_state = kind.state_model.model_validate(state.decoder)
            except ValidationError as exc:
                raise validation_error(exc).within("decoder") from None
            try:
                folder._decoder = kind.from_state(
                    decoder_state, choice=state.choice, strict=state.strict
                )
            except StateError as exc:
                raise exc.within("decoder") from None
            folder._decoder.limits = limits  # as _new_decoder gives them
        try:
            folder._acc = Accumulator.from_state(
                state.accumulator,
                provider=provider if folder._decoder is not None else None,
                strict=state.strict,
                limits=limits,
            )
        except StateError as exc:
            raise exc.within("accumulator") from None
        folder._bytes = state.bytes
        folder._format = state.format
        try:
            if state.sse is not None:
                folder._framer = SSEDecoder.from_state(state.sse)
            elif state.ndjson is not None:
                folder._framer = NDJSONDecoder.from_state(state.ndjson)
            elif state.eventstream is not None:
                folder._framer = EventStreamFramer.from_state(state.eventstream)
        except StateError as exc:
            raise exc.within(str(state.format)) from None
        folder._head = state.head
        folder._undetected = [(held.payload, held.event) for held in state.undetected]
        folder._position = state.position
        folder._closed = state.closed
        if state.fault is not None:
            if not state.closed:
                raise StateError("fault", "expected a held fault only in a closed fold")
            folder._fault = state.fault.rebuilt()
            folder._fault.partial = folder._acc.snapshot()
        return folder

    def feed(self, chunk: Any) -> list[Event]:
        """Feed one chunk: bytes, str, a decoded event dict, an SDK object, or a MessageDelta.

        A bare ContentPart is a delta too (see providers/messagedelta/).

        A stream that breaks inside a chunk of bytes: the events before the fault are
        returned, and the next feed() or close() raises its StreamProtocolError.
        """
        events = self._feed_timed(chunk)
        if self._output is not None:
            events = self._output.take(events)
        return events

    def _feed_timed(self, chunk: Any) -> list[Event]:
        """feed() before the structured output's box sees the events."""
        timing = self.timing
        if timing._chunks is not None:  # telemetry on: each chunk's arrival
            timing._chunk_arrived()
        events = self._feed(chunk)
        acc = self._acc
        # StreamTiming._changed, inline (once per chunk): then the clock, rarely.
        if (
            timing._first_token is None
            or acc.finished
            or len(acc._slots) != timing._seen
            or len(acc._open) != timing._open
        ):
            timing._note(acc)  # before the events go: the last one holds the timing
        return events

    def _feed(self, chunk: Any) -> list[Event]:
        if self._closed:
            if self._fault is not None:
                raise self._fault
            raise UsageError("StreamFolder.feed: expected a chunk before close(), got one after")
        if self._acc.finished:
            return []
        if type(chunk) is bytes:  # the common chunk, before the general checks
            return self._feed_bytes(chunk)
        if isinstance(chunk, bytes | bytearray | memoryview):
            return self._feed_bytes(bytes(chunk))
        if isinstance(chunk, str):
            try:
                data = chunk.encode("utf-8")
            except UnicodeEncodeError:
                # A lone surrogate has no UTF-8 form: its bytes (as surrogatepass writes
                # them) are then what bytes holding one are, refused by the JSON parser.
                data = chunk.encode("utf-8", "surrogatepass")
            return self._feed_bytes(data)
        if isinstance(chunk, dict):
            return self._feed_object(chunk)
        if isinstance(chunk, MessageDelta | ContentPart):
            return self._feed_delta(chunk)
        dump = getattr(chunk, "model_dump", None)
        if callable(dump):
            if type(chunk).__module__.startswith(_OPENAI_CHAT_HELPER):
                # The openai SDK's `chat.completions.stream()` events: a ChunkEvent wraps
                # the raw chunk (and a snapshot of the whole message so far, which is not
                # dumped: that would cost the message's size per chunk); the others
                # (content.delta, tool_calls.function.arguments.done...) repeat the chunks.
                inner = getattr(chunk, "chunk", None)
                if inner is None or getattr(chunk, "type", None) != "chunk":
                    return []
                chunk = inner
            try:
                payload = _sdk_payload(chunk)
            except _MALFORMED as exc:
                # An SDK object holding what JSON cannot (a lone surrogate, nesting past
                # the interpreter's limit): as broken as the bytes that would carry it.
                raise self._attach(
                    StreamProtocolError(
                        f"expected an SDK event that dumps to JSON, got a {type(chunk).__name__} "
                        f"that does not ({type(exc).__name__}: {exc})",
                        raw=type(chunk).__name__,
                        position=self._position + 1,
                    )
                ) from None
            return self._feed_object(payload)
        raise UsageError(
            "StreamFolder.feed: expected bytes, str, a dict or an object with model_dump(), "
            f"got {type(chunk).__name__}"
        )

    @property
    def folding_objects(self) -> bool:
        """True when decoded event dicts are being folded with the provider known."""
        return self._format == "objects" and self._decoder is not None and not self._closed

    def fold_objects(self, source: Iterable[Any]) -> Generator[Event, None, None]:
        """Feed every chunk of `source` and yield the events, until the message finishes.

        The same as `feed()` chunk by chunk, but each decoded event dict goes straight
        from decode() to the accumulator in this one loop (the steps of feed() cost
        several times the work). The common delta takes the decoder's lane
        (`Decoder.object_text`) and grows its open part through the accumulator's
        `text_slot`, one call each. Needs `folding_objects`; other chunks take `feed()`.
        The timing is told of the events that are not the lane's common delta.
        """
        decoder = self._decoder
        if decoder is None or not self.folding_objects:
            raise UsageError("StreamFolder.fold_objects: expected a fold of decoded dicts")
        output = self._output
        if output is not None:
            # Each event through the structured output's box; the loop below runs with
            # the box set aside, so a fold without one pays nothing for it per event.
            self._output = None
            passed: list[Event] = []
            try:
                for folded in self.fold_objects(source):
                    output.take_one(folded, passed)
                    yield from passed
                    passed.clear()
            finally:
                self._output = output
            return
        acc = self._acc
        timing = self.timing
        decode = decoder.decode
        # The decoder's own lane for the common delta dicts (Decoder.object_text), if any.
        lane = type(decoder).object_text is not Decoder.object_text
        # The part the last lane delta grew, and its slot: valid until an event takes the
        # full path (only that opens, closes or finishes anything).
        last_key: Any = _NO_PART
        take: Slot | None = None
        out: list[Event] = []
        max_bytes = self._limits.max_bytes
        for payload in source:
            if acc.finished:
                return
            if type(payload) is not dict:
                last_key = _NO_PART
                yield from self.feed(payload)
                continue
            self._position += 1
            if timing._chunks is not None:  # telemetry on: each chunk's arrival
                timing._chunk_arrived()
            event: Event | None = None
            deltas: list[Delta]
            try:
                hit = decoder.object_text(payload) if lane else None
                if hit is not None:
                    key, text = hit
                    # _take_lane_text, its common case inline: one len per delta.
                    taken = self._bytes + len(text)
                    self._bytes = taken
                    if taken > max_bytes or not _is_ascii(text):
                        self._take_lane_text(text, 0)
                    if key is not last_key and key != last_key:  # (keys may be built anew)
                        take = acc.text_slot(key)
                        last_key = key if take is not None else _NO_PART
                        # A part's first lane text: maybe the stream's first token.
                        if timing._first_token is None and text and take is not None:
                            timing._text_arrived()
                    if take is not None:
                        event = take.take_text(text)
                    else:
                        # Not open in the accumulator: apply() decides, as after decode().
                        deltas = [GrowPart(key, text)]
                else:
                    payload = self._take_object(payload)
                    deltas = decode(payload, None)
            except StreamfoldError as exc:
                raise self._attach(exc, payload) from None
            except _MALFORMED as exc:
                raise self._malformed(exc, payload) from exc
            if event is not None:
                yield event
                continue
            last_key = _NO_PART
            if len(deltas) == 1:
                delta = deltas[0]
                if (
                    type(delta) is GrowPart
                    and delta.options is None
                    and not delta.citations
                    and delta.content is not None
                ):
                    try:
                        grown = acc.grow_text(delta.key, delta.content, out)
                    except StreamfoldError as exc:
                        raise self._attach(exc, payload) from None
                    if grown:
                        if timing._first_token is None and delta.content:
                            timing._text_arrived()
                        yield out.pop()
                        continue
            # Not the lane's delta: timed once folded, before its events go out.
            events = self._apply(deltas, payload)
            if timing._changed(acc):
                timing._note(acc)
            yield from events

    def close(self) -> list[Event]:
        """The input ended: flush the framing and finish the message."""
        if self._closed:
            if self._fault is not None:
                raise self._fault
            return []
        self._closed = True
        events: list[Event] = []
        if self._framer is None and self._head:
            # Too little input to tell its framing: treat it as SSE, the common case.
            events.extend(self._start_framing("sse", self._head))
        if self._framer is not None and not self._acc.finished:
            try:
                for frame in self._framer.close():
                    events.extend(self._last_frame(frame))
                if getattr(self._framer, "truncated", False):
                    self._acc.note_truncated_tail()
            except StreamfoldError as exc:
                raise self._attach(exc) from None
        if self._undetected and not self._acc.finished:
            reported = next((p for p, e in self._undetected if e == "error"), None)
            if reported is not None:
                raise self._server_error(reported)
            raise self._attach(
                StreamProtocolError(
                    f"expected events from a known provider ({', '.join(registered_providers())}"
                    f"), got {len(self._undetected)} event(s) that match none",
                    raw=self._undetected[0][0],
                    position=0,
                )
            )
        if not self._acc.finished and (self._position == 0 or self._provider is None):
            # Not one event understood (a file name, a file's text, an SDK's text, no
            # input at all): an empty message would hide the mistake.
            error = no_events_error(
                self._bytes, self._start, objects=self._format == "objects", framing=self._format
            )
            error.partial = self._acc.snapshot()
            raise error
        if self._decoder is not None and not self._acc.finished:
            self._check_choice()
            try:
                held = self._decoder.close()
            except StreamfoldError as exc:
                raise self._attach(exc) from None
            except _MALFORMED as exc:
                raise self._malformed(exc, None) from exc
            events.extend(self._apply(held, None))
        if self._acc._skipped and not self._acc.finished:
            self._check_understood()
        events.extend(self._acc.close())
        self.timing._note(self._acc)
        if self._output is not None:
            events = self._output.take(events)
        return events

    def _check_understood(self) -> None:
        """A stream whose events were skipped as unknown and taught the message nothing is
        not this provider's (a wrong `provider=`): an error, not an empty message."""
        message = self._acc.snapshot()
        learned = (
            message.content
            or message.tool_calls
            or message.tool_results
            or message.usage is not None
            or message.stop_reason is not None
            or not _UNLEARNED_METADATA.issuperset(message.metadata)
        )
        if not learned:
            skipped = message.metadata["skipped_events"]
            raise self._attach(
                StreamProtocolError(
                    f"expected events in {self._provider}'s format, got {sum(skipped.values())} "
                    f"that match none of its event types ({', '.join(list(skipped)[:5])})"
                )
            )

    def _check_choice(self) -> None:
        """A `choice=` the stream does not hold (choice 3 of a one-choice stream), its
        events all skipped as another choice's: an error naming the choices there are."""
        decoder = self._decoder
        if decoder is None or not decoder.other_choices:
            return
        choice = self._decoder_options["choice"]
        message = self._acc.snapshot()
        if message.content or message.tool_calls or message.tool_results or message.stop_reason:
            return
        error = ChoiceError(choice, sorted(decoder.other_choices))
        error.partial = message
        raise error

    def cancel(self) -> list[Event]:
        """The consumer gave up: finish with status cancelled, keeping all received."""
        self._closed = True
        events: list[Event] = []
        if self._decoder is not None and not self._acc.finished:
            # What the decoder still holds (a server tool's buffered input) is part of
            # "everything received"; a broken remainder must not stop the cancel.
            with contextlib.suppress(StreamfoldError):
                parts = (OpenPart, GrowPart, ClosePart)
                for delta in self._decoder.close():
                    if isinstance(delta, parts):
                        # One at a time: a delta that fails keeps the events before it.
                        events.extend(self._acc.apply(delta))
        events += self._acc.cancel()
        self.timing._note(self._acc)
        if self._output is not None:
            events = self._output.take(events)
        return events

    # --- bytes -------------------------------------------------------------------------

    def _feed_bytes(self, data: bytes) -> list[Event]:
        if self._bytes == 0:
            self._start = data[:_START_BYTES]  # for the error if no event is ever found
        self._bytes += len(data)
        if self._bytes > self._limits.max_bytes:
            raise self._attach(self._too_long())
        if self._format == "objects":
            raise UsageError("StreamFolder.feed: expected decoded objects, got bytes after them")
        if self._framer is None:
            head = self._head + data
            kind = sniff_format(head)
            if kind is None:
                self._head = head
                return []
            self._head = b""
            return self._start_framing(kind, head)
        events: list[Event] = []
        try:
            decoder = self._decoder
            framer = self._framer
            # Narrowed to the class, the framer's methods are direct calls compiled.
            if (
                decoder is not None
                and decoder.sse_hot_head is not None
                and type(framer) is SSEDecoder
            ):
                taken = framer.take_at_boundary(data)
                if taken is not None:
                    frames, buffer = taken
                    if frames:
                        self._fold_frames(frames, events)
                    if buffer and not self._acc.finished:
                        self._fold_sse_hot(decoder, framer, buffer, events)
                    return events
            frames = framer.feed(data)
            if decoder is not None and type(framer) is EventStreamFramer:
                self._fold_messages(decoder, frames, events)
            elif self._decoder is not None and self._format != "eventstream":
                self._fold_frames(frames, events)
            else:
                for frame in frames:
                    events.extend(self._frame(frame))
                    if self._acc.finished:
                        break
        except StreamfoldError as exc:
            error = self._attach(exc)
            if not events or not isinstance(error, StreamProtocolError):
                raise error from None
            # The events before the fault are the caller's, whatever the chunking: they
            # are returned, and the fold, closed to more input, raises the fault next.
            self._fault = error
            self._closed = True
        return events

    def _fold_sse_hot(
        self, decoder: Decoder, framer: SSEDecoder, buffer: bytes, events: list[Event]
    ) -> None:
        """The hot lane: SSE bytes that begin at an event boundary.

        The decoder takes the runs of plain delta events straight from the bytes (see
        `Decoder.sse_shortcut`); every other event goes through the framer and
        `_fold_frames`, a run at a time, up to the next event the decoder might take.
        Events, positions, state and errors are the same as the framer's path gives.

        It pays compiled as well as interpreted: with the lane off, the compiled build
        folds 10k-delta mixed streams 1.85-2.55x slower buffered and 1.54-2.26x slower one
        event per chunk (Anthropic, Chat, Responses; CPU-time medians of 7, lane on and
        off interleaved in one process): the framer's line split and a full JSON parse
        per delta are what it saves, and no compiler removes those.
        """
        grower = self._acc
        size = len(buffer)
        pos = 0
        while self._position < self.hot_lane_after:
            if size - pos <= self.hot_lane_short:
                self._fold_run(framer, buffer[pos:], events)
                return
            # The ends of the whole events at hand, up to hot_lane_ahead of them (found one
            # by one: bytes.count(b"\n\n") reads a 64 KiB piece at 0.75 ns a byte).
            ends: list[int] = []
            end = pos
            while len(ends) < self.hot_lane_ahead:
                end = buffer.find(b"\n\n", end) + 2
                if end < 2:
                    break
                ends.append(end)
            if len(ends) >= self.hot_lane_ahead:
                break
            # Not yet: the events up to the start of the lane, framed in one run.
            wait = self.hot_lane_after - self._position
            end = ends[wait - 1] if len(ends) > wait else size
            if self._fold_run(framer, buffer[pos:end], events) or end >= size:
                return
            pos = end
        while True:
            before = len(events)
            try:
                pos = decoder.sse_shortcut(buffer, pos, grower, events)
            finally:
                # One event per event taken (the hot lane never takes [DONE]).
                self._position += len(events) - before
            if pos >= size:
                return
            # Frame the events up to the next one the lane might take; all of the rest
            # when there is none (or the decoder turned its lane off for this stream).
            found = decoder.sse_next_hot(buffer, pos)
            end = size if found < 0 else found
            if self._fold_run(framer, buffer[pos:end], events) or found < 0:
                return
            pos = end

    def _fold_run(self, framer: SSEDecoder, data: bytes, events: list[Event]) -> bool:
        """Frame and fold `data` the usual way (the hot lane's run of other events); True
        when the message finished in it."""
        frames = framer.feed(data)
        if frames:
            self._fold_frames(frames, events)
        return self._acc.finished

    def _fold_frames(self, frames: list[Any], events: list[Event]) -> None:
        """SSE / NDJSON frames with the provider known: _frame -> _payload -> _decode ->
        _apply in one loop, for speed (a few calls less per event).

        Every step and error is the same as theirs: the same position count, the same
        typed errors attached with the same payload (the caller attaches once more, as it
        does for _frame), the same stop once the message finished.
        """
        assert self._decoder is not None
        acc = self._acc
        decode = self._decoder.decode
        loads = jiter.from_json
        sse = self._format == "sse"
        name: str | None = None
        for frame in frames:
            self._position += 1
            if sse:
                event: SSEEvent = frame  # (typed: its fields read natively, compiled)
                raw = event.data
                if raw == b"[DONE]":
                    events.extend(self._done())
                    if acc.finished:
                        break
                    continue
                name = event.event
            else:
                raw = frame
            try:
                payload = loads(raw, allow_inf_nan=False)
            except ValueError as exc:
                if name == "error":
                    raise self._server_error(raw) from None
                raise _json_error(exc, raw, self._position) from None
            if type(payload) is not dict:
                events.extend(self._payload(payload, name))  # raises the typed error
                continue
            try:
                deltas = decode(payload, name)
            except StreamfoldError as exc:
                raise self._attach(exc, payload) from None
            except _MALFORMED as exc:
                raise self._malformed(exc, payload) from exc
            try:
                for delta in deltas:
                    events.extend(acc.apply(delta))  # (a direct call, compiled)
            except StreamfoldError as exc:
                raise self._attach(exc, payload) from None
            if acc.finished:
                break

    def _fold_messages(
        self, decoder: Decoder, messages: list[EventStreamMessage], events: list[Event]
    ) -> None:
        """Eventstream messages with the provider known: _frame -> _payload -> _decode ->
        _apply in one loop, the decoder's dict lane (`Decoder.object_text`) first, as
        fold_objects takes it: Bedrock InvokeModel's chunks wrap one Anthropic event each,
        nearly all of them the common delta, which the lane grows in one call instead of
        the family's full decode() and the accumulator's apply. The same positions,
        events, typed errors and stop once the message finished as _frame's.
        """
        acc = self._acc
        lane = type(decoder).object_text is not Decoder.object_text
        for message in messages:
            self._position += 1
            payload = eventstream_payload(message)
            try:
                hit = decoder.object_text(payload) if lane else None
                if hit is not None:
                    if acc.grow_text(hit[0], hit[1], events):
                        continue
                    deltas: list[Delta] = [GrowPart(hit[0], hit[1])]
                else:
                    deltas = decoder.decode(payload, None)
            except StreamfoldError as exc:
                raise self._attach(exc, payload) from None
            except _MALFORMED as exc:
                raise self._malformed(exc, payload) from exc
            events.extend(self._apply(deltas, payload))
            if acc.finished:
                break

    def _start_framing(self, kind: StreamFormat, head: bytes) -> list[Event]:
        self._format = kind
        self._bytes -= len(head)  # counted when it arrived; it is fed again below
        if kind == "sse":
            self._framer = SSEDecoder()
        elif kind == "ndjson":
            self._framer = NDJSONDecoder()
        else:
            self._framer = EventStreamFramer()
            if self._provider is None:
                self._provider = "bedrock"
        return self._feed_bytes(head)

    def _server_error(self, reported: Any) -> StreamProtocolError:
        """The error for a failure the server reported in an SSE error event that no
        decoder could read (not JSON, or before any event of a known provider): its text
        is in the error's reason and in the partial message's metadata["provider_error"]."""
        if isinstance(reported, bytes):
            text: Any = reported.decode("utf-8", "replace")
            shown = preview(text)
        else:
            text = reported
            message = reported.get("message") if isinstance(reported, dict) else None
            shown = preview(message if isinstance(message, str) else reported)
        self._acc.note_provider_error(text)
        error = StreamProtocolError(
            f"expected the stream to go on, got the server's error event: {shown}",
            raw=reported,
        )
        self._attach(error)
        return error

    def _last_frame(self, frame: Any) -> list[Event]:
        # A frame the stream never terminated. Whole, it counts (a last SSE event without
        # its blank line); cut mid-JSON, the stream was truncated, not corrupted: drop it
        # and let the message end incomplete.
        # A server's error line in plain text counts whole (llama.cpp's `error:` field may
        # hold any text); one cut before or inside its JSON was truncated like any other.
        data = frame.data if isinstance(frame, SSEEvent) else frame
        server_text = (
            isinstance(frame, SSEEvent)
            and frame.event == "error"
            and frame.data.strip()[:1] not in (b"", b"{", b"[")
        )
        if isinstance(data, bytes) and data != b"[DONE]" and not server_text:
            try:
                jiter.from_json(data, allow_inf_nan=False)
            except ValueError:
                self._acc.note_truncated_tail()
                return []
        return self._frame(frame)

    def _frame(self, frame: Any) -> list[Event]:
        self._position += 1
        if isinstance(frame, SSEEvent):
            if frame.data == b"[DONE]":
                return self._done()
            if frame.event == "error":
                try:
                    payload = jiter.from_json(frame.data, allow_inf_nan=False)
                except ValueError:
                    raise self._server_error(frame.data) from None
                return self._payload(payload, "error")
            return self._payload(_parse_json(frame.data, self._position), frame.event)
        if isinstance(frame, bytes):
            return self._payload(_parse_json(frame, self._position), None)
        return self._payload(eventstream_payload(frame), None)

    # --- objects -----------------------------------------------------------------------

    def _feed_object(self, payload: dict[str, Any]) -> list[Event]:
        if self._format not in (None, "objects"):
            raise UsageError(
                f"StreamFolder.feed: expected {self._format} bytes, got a decoded object"
            )
        self._format = "objects"
        self._position += 1
        decoder = self._decoder
        if decoder is not None:
            # The decoder's lane first, as fold_objects takes it: the same count.
            try:
                hit = decoder.object_text(payload)
                if hit is not None:
                    self._take_lane_text(hit[1], len(hit[1]))
                    return self._apply([GrowPart(hit[0], hit[1])], payload)
                payload = self._take_object(payload)
            except StreamfoldError as exc:
                raise self._attach(exc, payload) from None
            except _MALFORMED as exc:
                raise self._malformed(exc, payload) from exc
            return self._decode(payload, None)
        try:
            payload = self._take_object(payload)
        except StreamfoldError as exc:
            raise self._attach(exc, payload) from None
        return self._payload(payload, None)

    def _take_lane_text(self, text: str, size: int) -> None:
        """Count a plain text delta of decoded input (`size`: its characters, unless
        already counted) against max_bytes; refuse text no wire could carry."""
        self._bytes += size
        if self._bytes > self._limits.max_bytes:
            raise self._too_long()
        if not _is_ascii(text):
            lone = _SURROGATE.search(text)
            if lone is not None:
                raise StreamProtocolError(
                    "expected text that UTF-8 can carry, got a lone surrogate at "
                    f"character {lone.start()} of the delta's text"
                )

    def _take_object(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Count any other decoded event (its JSON size in UTF-8 bytes) against max_bytes,
        and give it as the JSON it stands for. A payload JSON cannot hold (a lone
        surrogate, NaN, an object of no JSON type, nesting deeper than the bytes door
        parses) is refused as the bytes holding it would be. One that is not plain JSON
        (a tuple, a non-str key, bytes or a datetime as boto3 gives them) is read back from
        its JSON, as the wire would have carried it: a message holds JSON types only."""
        try:
            data = to_json(payload, bytes_mode="base64")
            if not _plain_json(payload):
                payload = _as_json(payload)
        except (ValueError, RecursionError) as exc:  # (PydanticSerializationError too)
            deep = isinstance(exc, RecursionError) or "depth" in str(exc)
            raise StreamProtocolError(
                "expected a JSON object per event, got one JSON cannot hold ("
                + ("nested too deep" if deep else str(exc))
                + ")"
            ) from None
        self._bytes += len(data)
        if self._bytes > self._limits.max_bytes:
            raise self._too_long()
        return payload

    def _take_delta(self, chunk: MessageDelta | ContentPart) -> None:
        """Count one of streamfold's own deltas (its JSON size) against max_bytes."""
        try:
            size = len(to_json(chunk))
        except (ValueError, RecursionError) as exc:  # a lone surrogate, a value too deep
            raise StreamProtocolError(
                f"expected a {type(chunk).__name__} JSON can hold, got one it cannot ({exc})"
            ) from None
        self._bytes += size
        if self._bytes > self._limits.max_bytes:
            raise self._too_long()

    def _too_long(self) -> StreamLimitError:
        return StreamLimitError(
            "max_bytes", self._limits.max_bytes, self._bytes, "the stream is too long"
        )

    def _feed_delta(self, chunk: MessageDelta | ContentPart) -> list[Event]:
        if self._format not in (None, "objects"):
            raise UsageError(
                f"StreamFolder.feed: expected {self._format} bytes, got a {type(chunk).__name__}"
            )
        if self._decoder is None:
            self._use_provider("streamfold")
            # Dicts held for detection: with a MessageDelta after them, they are its JSON.
            held, self._undetected = self._undetected, []
            events = [e for payload, name in held for e in self._decode(payload, name)]
            return events + self._feed_delta(chunk)
        decoder = self._decoder
        if not isinstance(decoder, MessageDeltaDecoder):
            raise UsageError(
                f"StreamFolder.feed: expected {self._provider} events, got a "
                f"{type(chunk).__name__} (streamfold's own deltas fold as provider 'streamfold')"
            )
        self._format = "objects"
        self._position += 1
        try:
            self._take_delta(chunk)
            if isinstance(chunk, MessageDelta):
                deltas = decoder.decode_delta(chunk)
            else:
                deltas = decoder.decode_part(chunk)
        except StreamfoldError as exc:
            raise self._attach(exc, chunk) from None
        return self._apply(deltas, chunk)

    # --- decoding ----------------------------------------------------------------------

    def _done(self) -> list[Event]:
        if self._decoder is None:
            return []
        self._check_choice()
        if self._acc._skipped and not self._acc.finished:
            self._check_understood()
        try:
            deltas = self._decoder.done()
        except StreamfoldError as exc:
            raise self._attach(exc, "[DONE]") from None
        except _MALFORMED as exc:
            raise self._malformed(exc, None) from exc
        return self._apply(deltas, "[DONE]")

    def _payload(self, payload: Any, event: str | None) -> list[Event]:
        if not isinstance(payload, dict):
            raise self._attach(
                StreamProtocolError(
                    f"expected a JSON object per event, got {type(payload).__name__}",
                    raw=payload,
                    position=self._position,
                )
            )
        if self._decoder is None:
            provider = detect_provider(payload, event)
            if provider is None:
                self._undetected.append((payload, event))
                if len(self._undetected) >= _DETECT_WITHIN:
                    raise self._attach(
                        StreamProtocolError(
                            f"expected a recognisable provider event within {_DETECT_WITHIN} "
                            "events, got none",
                            raw=self._undetected[0][0],
                            position=1,
                        )
                    )
                return []
            self._use_provider(provider)
            held, self._undetected = self._undetected, []
            events: list[Event] = []
            for old_payload, old_event in held:
                events.extend(self._decode(old_payload, old_event))
            events.extend(self._decode(payload, event))
            return events
        return self._decode(payload, event)

    def _use_provider(self, provider: str) -> None:
        self._provider = provider
        self._decoder = self._new_decoder(provider)
        self._acc.provider = provider
        self._acc._metadata.setdefault("provider", provider)

    def _new_decoder(self, provider: str) -> Decoder:
        options = self._decoder_options
        decoder = decoder_class(provider)(choice=options["choice"], strict=options["strict"])
        decoder.limits = self._limits  # what it holds back is checked as it arrives
        return decoder

    def _decode(self, payload: dict[str, Any], event: str | None) -> list[Event]:
        assert self._decoder is not None
        try:
            deltas = self._decoder.decode(payload, event)
        except StreamfoldError as exc:
            raise self._attach(exc, payload) from None
        except _MALFORMED as exc:
            raise self._malformed(exc, payload) from exc
        return self._apply(deltas, payload)

    def _malformed(self, exc: Exception, payload: dict[str, Any] | None) -> StreamfoldError:
        # A payload whose fields have the wrong shape: the decoder's contract is typed
        # errors only, so name what broke instead of leaking a bare KeyError.
        return self._attach(
            StreamProtocolError(
                f"malformed {self._provider} event: {type(exc).__name__}: {exc}",
                raw=payload,
            ),
            payload,
        )

    def _apply(self, deltas: list[Delta], raw: Any) -> list[Event]:
        try:
            return self._acc.apply_all(deltas)
        except StreamfoldError as exc:
            raise self._attach(exc, raw) from None

    def _attach(self, exc: StreamfoldError, raw: Any = None) -> StreamfoldError:
        if isinstance(exc, ChoiceError):
            return exc  # the caller's choice=, not the stream, is at fault
        if isinstance(exc, UsageError):
            # A model refused a value the stream carried (NaN, a non-str key...): the
            # stream is broken, not the caller's use, so it gets provider, raw event,
            # position and partial like any broken stream.
            exc = StreamProtocolError(f"malformed {self._provider} event: {exc}", raw=raw)
        if isinstance(exc, StreamLimitError):
            exc.partial = self._acc.snapshot()
        if isinstance(exc, StreamProtocolError):
            if exc.provider is None:
                exc.provider = self._provider
            if exc.raw is None:
                exc.raw = raw
            if exc.position is None:
                exc.position = self._position
            exc.partial = self._acc.snapshot()
        return exc


def _check_folder_arguments(
    function: str,
    provider: Any,
    choice: Any,
    strict: Any,
    role: Any,
    limits: Any,
    partial_arguments: Any,
    timing: Any,
) -> None:
    """Refuse a wrong-typed argument with one UsageError (see streamfold.arguments); the
    common right types are told apart here, without a call into the interpreted checks."""
    if provider is not None and type(provider) is not str:
        check_provider(function, provider)
    if type(choice) is not int or choice < 0:
        check_count(function, "choice", choice)
    if type(strict) is not bool:
        check_bool(function, "strict", strict)
    if type(partial_arguments) is not bool:
        check_bool(function, "partial_arguments", partial_arguments)
    if role != "assistant":
        check_role(function, role)
    if type(limits) is not Limits:
        check_instance(function, "limits", limits, Limits, "a streamfold.Limits")
    if timing is not None and not isinstance(timing, StreamTiming):
        check_instance(function, "timing", timing, StreamTiming, "None or a StreamTiming")


def _parse_json(data: bytes, position: int) -> Any:
    try:
        # NaN and Infinity are no JSON: refused here, never stored in a message that
        # could not then be written back as JSON.
        return jiter.from_json(data, allow_inf_nan=False)
    except ValueError as exc:
        raise _json_error(exc, data, position) from None


def _json_error(exc: ValueError, data: bytes, position: int) -> StreamProtocolError:
    return StreamProtocolError(
        f"expected JSON in the event data, got invalid JSON ({exc})",
        raw=data,
        position=position,
    )


def _as_json(value: Any) -> Any:
    """`value` as the JSON it stands for (a decoded dict that is not plain JSON): tuples
    and sets as lists, bytes as standard base64 (how the wire carries boto3's blobs, and
    what the Bedrock decoders read), other types as pydantic writes them (a datetime,
    an enum); ValueError for a non-str key or a float JSON has not."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"a key of type {type(key).__name__}, not a string")
            out[str(key)] = _as_json(item)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [_as_json(item) for item in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode()
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value}, which JSON has not")
        return float(value)
    return jiter.from_json(to_json(value))


def _sdk_payload(obj: Any) -> dict[str, Any]:
    # SDK objects: dump with wire names (camelCase for google-genai) and only the fields
    # the server sent, so the decoder sees what it would have seen on the wire.
    try:
        payload = obj.model_dump(mode="json", by_alias=True, exclude_unset=True, warnings=False)
    except TypeError:
        payload = obj.model_dump()
    if not isinstance(payload, dict):
        raise UsageError(
            f"StreamFolder.feed: expected model_dump() to give a dict, got {type(payload).__name__}"
        )
    return payload


class _LoopEvents:
    """A fold's events as a `for` loop holds them: when the loop lets go (a break, an
    exception in its body), the events end, and the fold is cancelled at once.

    The events' own generator cannot do this in the compiled build: a compiled generator
    runs no `finally` when it is freed, and takes no weak reference.
    """

    def __init__(self, events: Generator[Event, None, None]) -> None:
        self._events = events

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        # One step of a for loop: compiled, `next()` is a lookup of the builtin and a
        # generic call (~400 instructions an event, a tenth of a dict delta's); this
        # calls the generator's own next directly.
        for event in self._events:
            return event
        raise StopIteration

    def __del__(self) -> None:
        self._events.close()  # nothing to do once they have ended


# Compiled, it still takes the interpreted Tee (record.py), which folds as it records.
@mypyc_attr(allow_interpreted_subclasses=True)
class Fold:
    """Iterate the events of a stream; `snapshot()` reads the message so far at any time.

    A consumer that stops early gets status cancelled, with everything received, and the
    source is closed (its `close()`, if it has one): at `close()`, or as soon as the
    `for` loop that iterates the fold lets go of it (a break, an exception in the loop
    body; CPython frees the loop's iterator then, even while the fold itself lives on).
    """

    def __init__(self, chunks: Iterable[Any], folder: StreamFolder) -> None:
        self._chunks = chunks
        self.folder = folder
        self._events = self._run()

    def __iter__(self) -> Iterator[Event]:
        # The loop holds the events through their own object, which ends them when the
        # loop lets go of it: at once, instead of when the garbage collector runs.
        return _LoopEvents(self._events)

    def __next__(self) -> Event:
        for event in self._events:  # not next(): see _LoopEvents.__next__
            return event
        raise StopIteration

    def __aiter__(self) -> Any:
        # `async for` over fold(): without this, a bare TypeError that does not say what to do.
        raise UsageError(
            "fold: expected `for event in fold(...)`, got `async for`: for an async stream, "
            "use afold() (`async for event in afold(...)`)"
        )

    @property
    def timing(self) -> StreamTiming:
        """When the chunks arrived, so far (see streamfold.timing)."""
        return self.folder.timing

    def snapshot(self) -> Message:
        """The message so far (status cancelled if the consumer stopped early)."""
        return self.folder.snapshot()

    def partial_arguments(self, index: Any) -> Any:
        """The tool call at slot `index`: its arguments parsed so far (`partial_arguments=True`)."""
        return self.folder.partial_arguments(index)

    @property
    def output(self) -> Any:
        """The structured output (`output=`): the latest partial value, then the final one."""
        return self.folder.output

    @property
    def output_error(self) -> OutputValidationError | None:
        """Why the structured output failed (it was sent as `OutputFailed`), or None."""
        return self.folder.output_error

    def close(self) -> None:
        """Stop early: the message keeps everything received, with status cancelled."""
        self._events.close()
        if not self.folder.finished:
            # The events were never read: closing the generator ran none of its code.
            self.folder.cancel()
            _close_source(self._chunks)

    def _run(self) -> Generator[Event, None, None]:
        folder = self.folder
        acc = folder._acc  # its finished attribute: no property call per chunk
        folder.timing.start()  # the wait for the first chunk counts
        try:
            source = iter(self._chunks)
            for chunk in source:
                yield from folder.feed(chunk)
                if acc.finished:
                    break
                if type(chunk) is dict and folder.folding_objects:
                    # Decoded event dicts, the provider known: the rest in one loop.
                    yield from folder.fold_objects(source)
                    break
            if not folder.finished:
                yield from folder.close()
        except GeneratorExit:
            # The consumer stopped reading: what arrived is kept, marked cancelled.
            folder.cancel()
            raise
        except Exception as exc:  # the stream broke, or its source: telemetry records it
            folder.timing._failed(folder.snapshot, exc)
            raise
        finally:
            # The fold is over: release the source (an HTTP response, an SDK stream)
            # instead of leaving it half read.
            _close_source(self._chunks)


def _close_source(chunks: Any) -> None:
    """Close a fold's source, if it can be: a source that fails to close changes nothing."""
    if type(chunks) is list:
        return  # (no close; getattr would build and drop an AttributeError to say so)
    close = getattr(chunks, "close", None)
    if callable(close):
        try:  # (not contextlib.suppress: its methods are interpreted Python)
            close()
        except Exception:
            return


def _source(
    chunks: Any, provider: Any, function: str, *, asynchronous: bool = False
) -> tuple[Any, Any]:
    if type(chunks) is list:
        return chunks, provider  # the common case
    if type(chunks) is _GENERATOR and not chunks.gi_code.co_flags & _ITERABLE_COROUTINE:
        # A plain generator (httpx's iter_bytes, a caller's own): nothing check_source
        # refuses, and its checks (interpreted, ABC instance checks) were a microsecond
        # of a short stream's fold.
        return chunks, provider
    if isinstance(chunks, Recording):
        return chunks, provider or chunks.provider
    if isinstance(chunks, bytes | bytearray | str | dict | MessageDelta | ContentPart):
        return [chunks], provider
    # A source that is no stream (a path, an awaitable, an async source given to fold):
    # a UsageError saying what to pass, not the bare TypeError of iter().
    check_source(function, chunks, asynchronous=asynchronous)
    return chunks, provider


def fold(
    chunks: Any,
    provider: Any = None,
    *,
    choice: Any = 0,
    strict: Any = False,
    limits: Any = DEFAULT_LIMITS,
    partial_arguments: Any = False,
    started_at: Any = None,
    clock: Any = None,
    request: Any = None,
    output: Any = None,
    output_tool: Any = None,
) -> Fold:
    """Fold a stream into events. `chunks`: an iterable of bytes, str, dicts or SDK objects.

    streamfold's own MessageDeltas (and bare ContentParts) fold too, as provider
    `streamfold` (see providers/messagedelta/).

    `partial_arguments`: scan each tool call's argument JSON as it streams; every
    PartDelta of a tool call then carries `arguments_changes` (see
    `streamfold.partial_json`), at a cost per delta that does not grow with the text.

    Timing (`Fold.timing`, and `MessageCompleted.timing` at the end, not in the Message; see
    `streamfold.timing`) is measured from `started_at` (a reading of `clock`, by default
    `time.monotonic()`, taken when the request was sent), else from the first read.

    `request`: a `streamfold.telemetry.RequestInfo` (the requested model, the server's
    address and port), which telemetry records when it is on; the stream itself names only
    the model that answered.

    `output`: a type pydantic validates (a model, `list[Model]`, any annotation) or a
    `TypeAdapter`: the answer's JSON (the text after the last tool call; with
    `output_tool="name"`, that tool call's arguments) is parsed as it streams, and the
    events include `OutputPartial`, `OutputItem` (each complete element of a top-level
    list), then `OutputCompleted` or `OutputFailed` before `MessageCompleted`; the value
    is also `Fold.output` (see docs/concepts/structured-output.md).

    Arguments of the wrong type raise UsageError (on both builds), as does a source that
    is no stream (a path, an awaitable, an async iterable: see `afold`); input in which
    not one event is found raises NoEventsError.
    """
    if (clock is not None and not callable(clock)) or (
        started_at is not None and (type(started_at) is not float or not math.isfinite(started_at))
    ):
        started_at = check_timing("fold", clock, started_at)
    _check_folder_arguments(
        "fold", provider, choice, strict, "assistant", limits, partial_arguments, None
    )
    box = _output_folder("fold", output, output_tool)
    source, provider = _source(chunks, provider, "fold")
    folder = StreamFolder(
        provider,
        choice=choice,
        strict=strict,
        limits=limits,
        partial_arguments=partial_arguments,
        timing=_timing_for(clock, started_at, provider, request),
    )
    folder._output = box
    return Fold(source, folder)


def _output_folder(function: str, output: Any, output_tool: Any) -> OutputFolder | None:
    """The structured output's box for `output=` / `output_tool=`, both checked (None for
    a fold without output)."""
    if output is None:
        if output_tool is not None:
            raise UsageError(
                f"{function}: expected output= with output_tool= (the type its arguments "
                f"are), got output_tool={preview(output_tool, 80)} alone"
            )
        return None
    if output_tool is not None and (type(output_tool) is not str or not output_tool):
        raise UsageError(
            f"{function}: expected output_tool to be a tool name (a non-empty str) or None, "
            f"got {preview(output_tool, 80)}"
        )
    return OutputFolder(output_adapter(function, output), output_tool)


def _timing_for(
    clock: Clock | None, started_at: float | None, provider: Any, request: Any
) -> StreamTiming:
    """A fold's timing, holding what telemetry reports of it besides the stream: the
    provider name as the caller gave it and the request (a RequestInfo, checked here)."""
    timing = StreamTiming(clock, started_at)
    if isinstance(provider, str):
        timing._named = provider
    if request is not None:
        timing._request = check_request(request)
    return timing


def fold_message(
    chunks: Any,
    provider: Any = None,
    *,
    choice: Any = 0,
    strict: Any = False,
    limits: Any = DEFAULT_LIMITS,
    partial_arguments: Any = False,
    started_at: Any = None,
    clock: Any = None,
    request: Any = None,
) -> Message:
    """Fold a stream and return only the final Message."""
    final: Message | None = None
    for event in fold(
        chunks,
        provider,
        choice=choice,
        strict=strict,
        limits=limits,
        partial_arguments=partial_arguments,
        started_at=started_at,
        clock=clock,
        request=request,
    ):
        if isinstance(event, MessageCompleted):
            final = event.message
    assert final is not None  # a fold always ends with MessageCompleted
    return final


def fold_output(
    chunks: Any,
    output: Any,
    provider: Any = None,
    *,
    output_tool: Any = None,
    choice: Any = 0,
    strict: Any = False,
    limits: Any = DEFAULT_LIMITS,
    started_at: Any = None,
    clock: Any = None,
    request: Any = None,
) -> Any:
    """Fold a stream and return only its structured output, validated as `output`.

    Raises OutputValidationError (with the raw text and pydantic's errors) when the
    output is not a valid value; `fold(..., output=...)` gives the Message as well.
    """
    folded = fold(
        chunks,
        provider,
        choice=choice,
        strict=strict,
        limits=limits,
        started_at=started_at,
        clock=clock,
        request=request,
        output=output,
        output_tool=output_tool,
    )
    for _ in folded:
        pass
    error = folded.output_error
    if error is not None:
        raise error
    return folded.output
