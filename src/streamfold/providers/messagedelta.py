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
  (`grow_after_part_end`; an error when strict). Every other part completes when the
  message does (`explicit=False`).
- The message ends where the input ends: complete (its end marker seen) when some delta
  carried a final status (anything but "incomplete"), cut with status incomplete otherwise.
  Deltas after the final status still count, as they do in `merge_deltas`.
- A tool call's id and name are its first fragment's; its arguments are text that
  concatenates, or one JSON object sent whole (a dict); a dict after text (or text after
  a dict) is a repair (`tool_arguments_replaced`, the later one dropped; an error when
  strict), where `merge_deltas` would replace.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from ..deltas import ClosePart, Delta, EndMessage, GrowPart, OpenPart, UpdateMessage
from ..errors import StreamfoldError
from ..message import MessageDelta, ToolCall
from ..parts import ContentPart
from .base import Decoder


class MessageDeltaDecoder(Decoder):
    """MessageDelta objects, their JSON dicts, or bare ContentParts in; neutral deltas out."""

    provider = "streamfold"

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
        # A delta carried a final status: the end of the input completes the message.
        self.final = False

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """One MessageDelta's JSON object (`MessageDelta.model_dump(mode="json")`)."""
        try:
            delta = MessageDelta.model_validate(payload)
        except (StreamfoldError, ValidationError) as exc:
            raise self.protocol_error(
                f"expected a MessageDelta as JSON, got an object that is not one: {exc}", payload
            ) from None
        return self.decode_delta(delta)

    def decode_delta(self, delta: MessageDelta) -> list[Delta]:
        """One MessageDelta: its parts and fragments by slot, then its message-level news."""
        out: list[Delta] = []
        self._start(delta.role, out)
        for index, part in enumerate(delta.content):
            if part is not None:
                self._grow_part(index, part, out)
                self.last_part = index
        closing: list[int] = []
        for call in delta.tool_calls:
            index = self.last_slot + 1 if call.index is None else call.index
            self._grow_call(index, call, out)
            if call.status == "complete":
                closing.append(index)
        closing.extend(delta.completed)
        out.extend(ClosePart(index) for index in closing)
        if delta.status != "incomplete":
            self.final = True
        if (
            delta.status != "incomplete"
            or delta.usage is not None
            or delta.stop_reason is not None
            or delta.raw_stop_reason is not None
            or delta.metadata
        ):
            out.append(
                UpdateMessage(
                    status=None if delta.status == "incomplete" else delta.status,
                    stop_reason=delta.stop_reason,
                    raw_stop_reason=delta.raw_stop_reason,
                    usage=delta.usage,
                    metadata=delta.metadata or None,
                )
            )
        return out

    def decode_part(self, part: ContentPart) -> list[Delta]:
        """A bare ContentPart: it grows the last part when of the same type, else opens the next."""
        out: list[Delta] = []
        self._start("assistant", out)
        last = self.last_part
        index = last if last >= 0 and self.kinds.get(last) == part.type else self.last_slot + 1
        self._grow_part(index, part, out)
        self.last_part = index
        return out

    def done(self) -> list[Delta]:
        """`data: [DONE]`: the message ends here if a final status came, else at the input's end."""
        return [EndMessage()] if self.final else []

    def close(self) -> list[Delta]:
        """The input ended: the message is whole if a delta gave it a final status."""
        return [EndMessage()] if self.final else []

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

    def _grow_call(self, index: int, call: ToolCall, out: list[Delta]) -> None:
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
