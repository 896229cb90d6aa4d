"""streamfold's own deltas as a provider: MessageDeltas (or their JSON) in, neutral deltas out.

The seed's reducer, `merge_deltas`, as a stream: each MessageDelta becomes the neutral
deltas that grow the same parts in the accumulator, so a fold of MessageDeltas gives the
events, display items, markers and limits of any provider, and the Message that
`to_message(merge_deltas(deltas))` gives. How the two fit:

- A delta's `content[i]` and a tool-call fragment with `index=i` address slot i. Slots
  open in the order they first appear, which must be their index order: a new slot below
  one already seen cannot be placed (the fold's events already numbered the slots after
  it), so it is a repair (`slot_out_of_order`; an error when strict) and takes the next
  place. Unused indices leave no hole: the fold numbers its slots densely.
- A tool-call fragment without an index is a new call in the next slot.
- A part completes (`explicit=True`) when a delta names its slot in `completed`, or a tool
  call's fragment has status "complete"; growing it afterwards is a repair
  (`delta_after_part_end`; an error when strict). Every other part completes when the
  message does (`explicit=False`).
- The message ends where the input ends (or at `data: [DONE]`): whole when a delta gave
  it a normal end (status complete, length or content_filtered); cut otherwise, with the
  status the deltas gave (incomplete, error, cancelled). Deltas after the final status
  still count, as they do in `merge_deltas`. But a delta with status "error" whose
  metadata holds `error: {"type", "message"}` (as a fold's Message records a provider's
  error) ends the message there, with a ProviderErrored event.
- A tool call's id and name are its first fragment's (a later fragment's are not
  read); its arguments are text that
  concatenates, or one JSON object sent whole (a dict); a dict after text (or text after
  a dict) is a repair (`tool_arguments_replaced`, the later one dropped; an error when
  strict), where `merge_deltas` would replace.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from ...deltas import (
    ClosePart,
    Delta,
    EndMessage,
    GrowPart,
    OpenPart,
    ReportError,
    UpdateMessage,
)
from ...errors import StateError, StreamfoldError, UsageError
from ...events import Event, MessageCompleted, PartCompleted, PartDelta, PartStarted
from ...message import MessageDelta, Role, Status, ToolCall, forward_status, merge_tool_call
from ...parts import STREAMED_OPTIONS, ContentPart, merge_part
from ..base import Decoder
from .state import MessageDeltaState, SlotArguments, SlotKind

# Statuses of a message that ended normally, not cut (see forward_status).
_WHOLE = frozenset({"complete", "length", "content_filtered"})


def _slot_index(item: tuple[int, Any]) -> int:
    return item[0]


class MessageDeltaDecoder(Decoder):
    """MessageDelta objects, their JSON dicts, or bare ContentParts in; neutral deltas out."""

    provider = "streamfold"
    state_model = MessageDeltaState

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        # Each slot's kind by the stream's own slot index: a part type, or "tool_call".
        self.kinds: dict[int, str] = {}
        # The highest slot index seen (-1: none): a new slot must come after it.
        self.last_slot = -1
        # The slot a bare ContentPart of the same type grows (-1: none yet).
        self.last_part = -1
        # Tool-call slots whose arguments have begun: True when they came whole (a dict).
        self.arguments_whole: dict[int, bool] = {}
        # Whether the first delta (which names the role) has been read.
        self.started = False
        # The status the deltas gave so far: at the input's end, a normal one (complete,
        # length, content_filtered) says the message is whole; error or cancelled, cut.
        self.status: Status = "incomplete"

    def to_state(self) -> MessageDeltaState:
        """This decoder as saved-state data."""
        return MessageDeltaState(
            kinds=[SlotKind(index=i, kind=k) for i, k in self.kinds.items()],
            last_slot=self.last_slot,
            last_part=self.last_part,
            arguments_whole=[
                SlotArguments(index=i, whole=w) for i, w in self.arguments_whole.items()
            ],
            started=self.started,
            status=self.status,
        )

    @classmethod
    def from_state(
        cls, state: MessageDeltaState, *, choice: int = 0, strict: bool = False
    ) -> MessageDeltaDecoder:
        """The decoder `state` describes, its slot indexes checked against each other."""
        decoder = cls(choice=choice, strict=strict)
        decoder.kinds = {slot.index: slot.kind for slot in state.kinds}
        if len(decoder.kinds) != len(state.kinds):
            raise StateError("kinds", "expected each slot index once")
        if decoder.kinds and max(decoder.kinds) > state.last_slot:
            raise StateError("last_slot", "expected at least the highest slot in kinds")
        if state.last_part != -1 and state.last_part not in decoder.kinds:
            raise StateError("last_part", "expected -1 or a slot in kinds")
        for n, arguments in enumerate(state.arguments_whole):
            if decoder.kinds.get(arguments.index) != "tool_call":
                raise StateError(f"arguments_whole[{n}]", "expected a tool-call slot in kinds")
            decoder.arguments_whole[arguments.index] = arguments.whole
        decoder.last_slot = state.last_slot
        decoder.last_part = state.last_part
        decoder.started = state.started
        decoder.status = state.status
        return decoder

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """One MessageDelta's JSON object (`MessageDelta.model_dump(mode="json")`)."""
        try:
            delta = MessageDelta.model_validate(payload)
        except (StreamfoldError, ValidationError) as exc:
            raise self.protocol_error(
                f"expected a MessageDelta as JSON, got an object that is not one: {exc}", payload
            ) from None
        except RecursionError:
            # A decoded dict never went through a JSON parser's depth limit; the
            # accumulator's max_depth applies to what validates.
            raise self.protocol_error(
                "expected a MessageDelta as JSON, got an object nested too deep to validate",
                payload,
            ) from None
        return self.decode_delta(delta)

    def decode_delta(self, delta: MessageDelta) -> list[Delta]:
        """One MessageDelta: its parts and fragments by slot, then its message-level news."""
        out: list[Delta] = []
        first = not self.started
        self._start(delta.role, out)
        # As merge_delta: a later delta's raw stop reason counts when not empty.
        raw_stop_reason = delta.raw_stop_reason if first else delta.raw_stop_reason or None
        items: list[tuple[int, ContentPart | ToolCall]] = [
            (index, part) for index, part in enumerate(delta.content) if part is not None
        ]
        unplaced: list[ToolCall] = []
        if delta.tool_calls:
            for call in delta.tool_calls:
                if call.index is None:
                    unplaced.append(call)
                else:
                    items.append((call.index, call))
            # One delta's parts and calls open in slot order, whichever list holds them.
            items.sort(key=_slot_index)
        closing: list[int] = []
        for index, item in items:
            if isinstance(item, ContentPart):
                self._grow_part(index, item, out)
                self.last_part = index
            else:
                self._grow_call(index, item, closing, out)
        for call in unplaced:
            self._grow_call(self.last_slot + 1, call, closing, out)
        closing.extend(delta.completed)
        out.extend(ClosePart(index) for index in closing)
        self.status = forward_status(self.status, delta.status)
        if (
            delta.status != "incomplete"
            or delta.usage is not None
            or delta.stop_reason is not None
            or raw_stop_reason is not None
            or delta.metadata
        ):
            out.append(
                UpdateMessage(
                    status=None if delta.status == "incomplete" else delta.status,
                    stop_reason=delta.stop_reason,
                    raw_stop_reason=raw_stop_reason,
                    usage=delta.usage,
                    metadata=delta.metadata or None,
                )
            )
        error = delta.metadata.get("error") if delta.status == "error" else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            # The error a fold's Message records: reported as the provider's own was.
            kind = error.get("type")
            out.append(
                ReportError(kind if isinstance(kind, str) else None, error["message"], delta)
            )
        return out

    def decode_part(self, part: ContentPart) -> list[Delta]:
        """A bare ContentPart: it grows the last part when of the same type, else opens the next.

        It names no role: the message keeps the fold's.
        """
        out: list[Delta] = []
        last = self.last_part
        index = last if last >= 0 and self.kinds.get(last) == part.type else self.last_slot + 1
        self._grow_part(index, part, out)
        self.last_part = index
        return out

    def done(self) -> list[Delta]:
        """`data: [DONE]`: the end of the message, as the end of the input is."""
        return self.close()

    def close(self) -> list[Delta]:
        """The input ended: the message is whole if the deltas gave it a normal end."""
        return [EndMessage()] if self.status in _WHOLE else []

    # --- internals -------------------------------------------------------------------

    def _start(self, role: Any, out: list[Delta]) -> None:
        if not self.started:
            self.started = True
            out.append(UpdateMessage(role=role))

    def _slot(self, index: int, kind: str, raw: Any, out: list[Delta]) -> bool:
        """Check slot `index` can take a `kind`; True when it is new (the caller opens it)."""
        if index < 0:
            raise self.protocol_error(f"expected a slot index >= 0, got {index}", raw)
        known = self.kinds.get(index)
        if known is not None:
            if known != kind:
                # merge_part raises here too: the text would be lost.
                raise self.protocol_error(
                    f"expected a {known} at slot {index} (a slot keeps its kind), got a {kind}",
                    raw,
                )
            return False
        if index < self.last_slot:
            out.extend(
                self.repair(
                    "slot_out_of_order",
                    f"expected a new slot after slot {self.last_slot} (slots open in index "
                    f"order), got a new slot {index}",
                    raw,
                )
            )
        self.kinds[index] = kind
        self.last_slot = max(self.last_slot, index)
        return True

    def _grow_part(self, index: int, part: ContentPart, out: list[Delta]) -> None:
        if self._slot(index, part.type, part, out):
            # PartStarted carries identity and kind; every character comes in a PartDelta.
            out.append(OpenPart(index, ContentPart.trusted(type=part.type)))
        if part.content is not None or part.options or part.citations:
            out.append(GrowPart(index, part.content, part.options or None, tuple(part.citations)))

    def _grow_call(self, index: int, call: ToolCall, closing: list[int], out: list[Delta]) -> None:
        if call.status == "complete":
            closing.append(index)
        if self._slot(index, "tool_call", call, out):
            out.append(OpenPart(index, ToolCall.trusted(call_id=call.call_id, name=call.name)))
        arguments = call.arguments
        text: str | None = None
        if arguments is not None:
            whole = isinstance(arguments, dict)
            # A whole object goes as its JSON text: every piece of a call is a PartDelta.
            text = json.dumps(arguments, ensure_ascii=False) if whole else str(arguments)
            before = self.arguments_whole.get(index)
            if before is None:
                self.arguments_whole[index] = whole
            elif whole or before:
                out.extend(
                    self.repair(
                        "tool_arguments_replaced",
                        f"expected argument text to append to tool call {index}, got "
                        "arguments that would replace what it has",
                        call,
                    )
                )
                text = None
        if text is not None or call.metadata:
            out.append(GrowPart(index, text, call.metadata or None))


def events_to_deltas(events: Iterable[Event]) -> list[MessageDelta]:
    """streamfold's own deltas for a whole fold's events: folding them gives the same Message.

    The other direction of the door: a service folds a provider's stream and sends these
    (as `model_dump(mode="json")` lines) to a client that folds them again. Each part's
    start and deltas become a delta at its slot; a part that ended explicitly is named in
    `completed`; the Message's status, usage, stop reason and metadata come last. A part
    whose final form is more than its deltas (a done event that adds an id) gets the
    difference before it completes; one whose final form no delta can reach (a provider's
    transient option dropped, text rewritten) is sent whole where it started.
    """
    events = list(events)
    finished = next((e.message for e in events if isinstance(e, MessageCompleted)), None)
    if finished is None:
        raise UsageError(
            "events_to_deltas: expected the events of a whole fold, got no MessageCompleted"
        )
    role = finished.role
    # Each slot's deltas merged, and what completing it adds (None: nothing; a slot
    # missing here goes whole).
    merged: dict[int, ContentPart | ToolCall] = {}
    rests: dict[int, ContentPart | ToolCall | None] = {}
    finals: dict[int, ContentPart | ToolCall] = {}
    for event in events:
        if isinstance(event, PartStarted | PartDelta):
            merged[event.index] = _merged(merged.get(event.index), _fragment(event))
        elif isinstance(event, PartCompleted):
            finals[event.index] = event.part
            with contextlib.suppress(UsageError):
                rests[event.index] = _rest(merged.get(event.index), event.part, event.index)
    deltas: list[MessageDelta] = []
    for event in events:
        if isinstance(event, PartStarted | PartDelta):
            index = event.index
            if index in rests:
                deltas.append(_at(index, _fragment(event), role=role))
            elif isinstance(event, PartStarted) and index in finals:
                deltas.append(_at(index, _whole(finals[index], index), role=role))
        elif isinstance(event, PartCompleted):
            rest = rests.get(event.index)
            completed = [event.index] if event.explicit else []
            if rest is not None or completed:
                at = _at(event.index, rest, role=role)
                deltas.append(at.model_copy(update={"completed": completed}))
        elif isinstance(event, MessageCompleted):
            deltas.append(
                MessageDelta.model_construct(
                    role=role,
                    status=finished.status,
                    usage=finished.usage,
                    stop_reason=finished.stop_reason,
                    raw_stop_reason=finished.raw_stop_reason,
                    metadata=finished.metadata,
                )
            )
            break
    return deltas


def _fragment(event: PartStarted | PartDelta) -> ContentPart | ToolCall:
    """The part (or tool-call fragment) a start or delta event adds to its slot."""
    part = event.part if isinstance(event, PartStarted) else event.as_part()
    if isinstance(part, ToolCall):
        return part.replaced(index=event.index, status="incomplete")
    return part


def _whole(final: ContentPart | ToolCall, index: int) -> ContentPart | ToolCall:
    """A final part as one delta: a tool call's parsed arguments sent whole."""
    if isinstance(final, ToolCall):
        return final.replaced(index=index, status="incomplete")
    return final


def _at(index: int, part: ContentPart | ToolCall | None, *, role: Role) -> MessageDelta:
    """A delta holding `part` at slot `index` (nothing for None)."""
    if part is None:
        return MessageDelta.model_construct(role=role)
    if isinstance(part, ToolCall):
        return MessageDelta.model_construct(role=role, tool_calls=[part])
    return MessageDelta.model_construct(role=role, content=[*([None] * index), part])


def _merged(before: ContentPart | ToolCall | None, part: ContentPart | ToolCall) -> Any:
    if before is None:
        return part
    if isinstance(before, ToolCall) and isinstance(part, ToolCall):
        return merge_tool_call(before, part)
    if isinstance(before, ContentPart) and isinstance(part, ContentPart):
        return merge_part(before, part)
    raise UsageError(f"events_to_deltas: expected one kind per slot, got {before!r} then {part!r}")


_MISSING = object()


def _unreachable(index: int, what: str) -> UsageError:
    return UsageError(
        f"events_to_deltas: expected each part's final form to extend its deltas, got "
        f"part {index} whose {what} no delta can reach"
    )


def _suffix(before: str | None, final: str | None, index: int, what: str) -> str | None:
    """What `final` adds to `before` (None: nothing); text cannot shrink."""
    if final == before:
        return None
    if before is None:
        return final
    if final is None or not final.startswith(before):
        raise _unreachable(index, what)
    return final[len(before) :]


def _added_options(
    before: Mapping[str, Any], final: Mapping[str, Any], index: int, what: str
) -> dict[str, Any]:
    """The options (or metadata) a delta must carry to turn `before` into `final`."""
    if not before.keys() <= final.keys():
        raise _unreachable(index, f"{what} ({', '.join(before.keys() - final.keys())} gone)")
    added: dict[str, Any] = {}
    for key, value in final.items():
        old = before.get(key, _MISSING)
        if old == value:
            continue
        if key in STREAMED_OPTIONS and isinstance(old, str) and isinstance(value, str):
            rest = _suffix(old, value, index, f"option {key!r}")
            added[key] = rest
        else:
            added[key] = value
    return added


def _rest(
    before: ContentPart | ToolCall | None, final: ContentPart | ToolCall, index: int
) -> ContentPart | ToolCall | None:
    """What a delta must add to `before` (the merged deltas) to give the `final` part."""
    if isinstance(final, ToolCall):
        if before is None:
            before = ToolCall.trusted(call_id=final.call_id, name=final.name)
        if not isinstance(before, ToolCall):
            raise _unreachable(index, "kind")
        if (before.call_id, before.name) != (final.call_id, final.name):
            raise _unreachable(index, "id or name")
        arguments = _added_arguments(before.arguments, final.arguments, index)
        metadata = _added_options(before.metadata, final.metadata, index, "metadata")
        if arguments is None and not metadata:
            return None
        return ToolCall.trusted(index=index, arguments=arguments, metadata=metadata)
    if before is None:
        return final
    if not isinstance(before, ContentPart) or before.type != final.type:
        raise _unreachable(index, "kind")
    content = _suffix(before.content, final.content, index, "content")
    options = _added_options(before.options, final.options, index, "options")
    if final.citations[: len(before.citations)] != before.citations:
        raise _unreachable(index, "citations")
    citations = final.citations[len(before.citations) :]
    if content is None and not options and not citations:
        return None
    return ContentPart.trusted(
        type=final.type, content=content, options=options, citations=citations
    )


def _added_arguments(before: Any, final: Any, index: int) -> str | dict[str, Any] | None:
    """The argument text (or whole object) that turns `before` into `final`."""
    if not isinstance(final, dict):
        return _suffix(before, final, index, "arguments")
    if before is None or (isinstance(before, str) and not before.strip()):
        return final if final or before is None else None
    try:
        parsed = json.loads(before) if isinstance(before, str) else before
    except ValueError:
        parsed = _MISSING
    if parsed != final:
        raise _unreachable(index, "arguments")
    return None
