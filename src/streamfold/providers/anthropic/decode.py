"""Anthropic Messages streams: message_start / content_block_* / message_delta / message_stop.

Each content block is one part, keyed by the block's `index`. Text and thinking stream into
text and thinking parts; `tool_use` streams its input JSON into a ToolCall. Blocks the
server runs or produces itself (server_tool_use, mcp_tool_use, every *_tool_result,
redacted_thinking, compaction, and block types this module does not know) become
`unsupported` parts holding the whole block, so they can be sent back verbatim.

The anthropic SDK's `messages.stream()` helper yields extra events (text, thinking,
signature, input_json, citation, compaction, and snapshots on content_block_stop /
message_stop) next to the raw ones; they repeat what the raw events said and are ignored.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import jiter

from ...construct import check_json_object, trusted
from ...deltas import (
    END_MESSAGE,
    ClosePart,
    Delta,
    GrowPart,
    ReportError,
    SkipEvent,
    close_part,
    open_part,
    update_message,
)
from ...errors import StateError, StreamProtocolError
from ...message import Status, StopReason, ToolCall, Usage
from ...parts import Citation, CitationSource, ContentPart
from ..base import Decoder, PartGrower, json_string_body
from ..fields import check, describe, optional, required, text_or_none
from .state import AnthropicBlockAt, AnthropicBlockState, AnthropicState, BlockKind

# stop_reason -> (normalised stop reason, status).
_STOP: dict[str, tuple[StopReason, Status]] = {
    "end_turn": ("stop", "complete"),
    "stop_sequence": ("stop", "complete"),
    "tool_use": ("tool_use", "complete"),
    "max_tokens": ("length", "length"),
    "model_context_window_exceeded": ("length", "length"),
    "pause_turn": ("pause", "complete"),
    "refusal": ("refusal", "content_filtered"),
}

# Events the SDK's stream helper synthesizes from the raw ones: nothing new in them.
_SDK_SYNTHESIZED = frozenset(
    {"text", "thinking", "signature", "input_json", "citation", "compaction"}
)

# Block types whose input streams as input_json_delta but that replay whole.
_BUFFERED_TYPES = frozenset({"server_tool_use", "mcp_tool_use"})

# Which block kind each known delta type may grow.
_DELTA_KIND: dict[str, str] = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool input",
    "compaction_delta": "compaction",
}


# The SSE hot lane: a plain delta event exactly as Anthropic's servers write it, e.g.
#   event: content_block_delta
#   data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}
# (then a blank line): the head, the block index, the delta head of the block's kind, the
# text as a JSON string body, `"}`, spaces (the servers pad each event with 0 to 15 of
# them), `}`.
_HOT_EVENT = b"event: content_block_delta\n"
_HOT_HEAD = _HOT_EVENT + b'data: {"type":"content_block_delta","index":'
_HOT_DELTA: dict[str, bytes] = {
    "text": b',"delta":{"type":"text_delta","text":"',
    "thinking": b',"delta":{"type":"thinking_delta","thinking":"',
    "tool_use": b',"delta":{"type":"input_json_delta","partial_json":"',
}
# The rest of the event when the text holds nothing JSON escapes (the common case).
_HOT_PLAIN_TAIL = re.compile(rb'([^"\\\x00-\x1f]*)"\} *\}\n\n')
_HOT_TAIL = re.compile(rb'"\} *\}\n\n')
# The rest of the event in a run: a JSON string body (plain bytes, each backslash with the
# character after it; jiter then reads the escapes, and refuses bad ones) and the tail.
_HOT_RUN_TAIL = rb'([^"\\\x00-\x1f]*(?:\\[^\x00-\x1f][^"\\\x00-\x1f]*)*)"\} *\}\n\n'
# An index as JSON writes it: digits, no leading zero; the comma within this many bytes.
_HOT_INDEX_SPAN = 12


@functools.lru_cache(maxsize=256)
def _hot_plain_event(prefix: bytes) -> Callable[[bytes, int], re.Match[bytes] | None]:
    """A whole plain event of one block: its prefix, then what _HOT_PLAIN_TAIL matches.

    Cached by prefix (a compiled pattern is no fold state): a stream's blocks, and the
    next stream's, use the same few.
    """
    return re.compile(re.escape(prefix) + _HOT_RUN_TAIL).match


# Usage fields from message_start / message_delta into Usage fields.
_USAGE_FIELDS = (
    ("input_tokens", "input_tokens"),
    ("output_tokens", "output_tokens"),
    ("cache_read_input_tokens", "cache_read_tokens"),
    ("cache_creation_input_tokens", "cache_write_tokens"),
)

_DOCUMENT_LOCATIONS = frozenset({"char_location", "page_location", "content_block_location"})
_LOCATION_KEYS = (
    "document_index",
    "start_char_index",
    "end_char_index",
    "start_page_number",
    "end_page_number",
    "start_block_index",
    "end_block_index",
    "search_result_index",
)


@dataclass(slots=True)
class _Block:
    """What the decoder must remember about one content block."""

    kind: BlockKind
    type: str
    block: dict[str, Any]
    # The accumulator's key: the index, or (index, n) for a block that reused an index.
    key: Hashable = None
    # The content_block as its start carried it (to tell a duplicated start from a new one).
    origin: dict[str, Any] | None = None
    open: bool = True
    # buffered blocks (server_tool_use, mcp_tool_use): their input JSON, joined at stop
    # (None until the first: fewer live objects per block for the garbage collector).
    json_chunks: list[str] | None = None
    # A non-empty input_json_delta arrived (else tool_use keeps its start's input).
    got_json: bool = False
    # Lenient: implicit parts for deltas that did not fit this block, by the kind they grow.
    strays: dict[str, _Block] = field(default_factory=dict)

    def to_state(self) -> AnthropicBlockState:
        """This as saved-state data."""
        return AnthropicBlockState(
            kind=self.kind,
            type=self.type,
            block=self.block,
            key=self.key,
            origin=self.origin,
            open=self.open,
            json_chunks=self.json_chunks,
            got_json=self.got_json,
            strays={kind: stray.to_state() for kind, stray in self.strays.items()},
        )

    @classmethod
    def from_state(cls, state: AnthropicBlockState) -> _Block:
        """The block this describes."""
        return cls(
            kind=state.kind,
            type=state.type,
            block=dict(state.block),
            key=state.key,
            origin=state.origin,
            open=state.open,
            json_chunks=None if state.json_chunks is None else list(state.json_chunks),
            got_json=state.got_json,
            strays={kind: cls.from_state(stray) for kind, stray in state.strays.items()},
        )


# The deltas object_text takes, by block kind: (delta type, the key of its text).
_PLAIN_DELTAS: Final[dict[str, tuple[str, str]]] = {
    "text": ("text_delta", "text"),
    "thinking": ("thinking_delta", "thinking"),
    "tool_use": ("input_json_delta", "partial_json"),
}

# A validated content_block_delta: (delta type, its value, the raw event).
_EarlyDelta = tuple[str, Any, dict[str, Any]]


class AnthropicDecoder(Decoder):
    """Decode Anthropic Messages stream events (raw, or the SDK's stream helper events)."""

    provider = "anthropic"
    state_model = AnthropicState

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        self._blocks: dict[int, _Block] = {}
        # The running usage dict: message_start's, overwritten field by field by the
        # cumulative totals of message_delta (None in a later report keeps the earlier).
        self._usage_raw: dict[str, Any] = {}
        self._status: Status | None = None
        self._ended = False
        self._started = False
        # Lenient: deltas that came before their block's start, replayed when it starts,
        # and the characters of text they hold, by index (checked as they arrive).
        self._early: dict[int, list[_EarlyDelta]] = {}
        self._early_chars: dict[int, int] = {}
        self._restarts = 0
        # The hot lane's last event prefix (head, index, delta head), its index and block.
        self._hot: tuple[bytes, int, _Block] | None = None
        self._hot_head = _HOT_EVENT  # sse_hot_head: every plain delta event starts so

    def to_state(self) -> AnthropicState:
        """This decoder as saved-state data."""
        return AnthropicState(
            blocks=[
                AnthropicBlockAt(index=index, block=blk.to_state())
                for index, blk in self._blocks.items()
            ],
            usage_raw=self._usage_raw,
            status=self._status,
            ended=self._ended,
            started=self._started,
            early=[raw for held in self._early.values() for _, _, raw in held],
            restarts=self._restarts,
        )

    @classmethod
    def from_state(
        cls, state: AnthropicState, *, choice: int = 0, strict: bool = False
    ) -> AnthropicDecoder:
        """The decoder `state` describes; held deltas are checked again as on the wire."""
        decoder = cls(choice=choice, strict=strict)
        for n, at in enumerate(state.blocks):
            if at.index in decoder._blocks:
                raise StateError(f"blocks[{n}].index", "expected each index once")
            decoder._blocks[at.index] = _Block.from_state(at.block)
        decoder._usage_raw = dict(state.usage_raw)
        decoder._status = state.status
        decoder._ended = state.ended
        decoder._started = state.started
        decoder._restarts = state.restarts
        for n, payload in enumerate(state.early):
            try:
                index = _index(decoder, payload)
                delta = required(decoder, payload, "delta", dict)
                dtype = check(decoder, delta.get("type"), str, "delta.type", payload)
                value = decoder._delta_value(dtype, delta, payload)
            except StreamProtocolError as exc:
                raise StateError(f"early[{n}]", exc.reason) from None
            decoder._early.setdefault(index, []).append((dtype, value, payload))
            # The held text's size, derived (not saved): see hold_text.
            held = len(value) if isinstance(value, str) else 0
            decoder._early_chars[index] = decoder._early_chars.get(index, 0) + held
        return decoder

    # --- dispatch ------------------------------------------------------------------

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one Anthropic stream event into neutral deltas."""
        kind = payload.get("type")
        if kind is None:
            kind = event or None
        if not isinstance(kind, str):
            raise self.protocol_error(
                f"expected an event with a string 'type', got {describe(kind)}", payload
            )
        if kind == "content_block_delta":
            fast = self.object_text(payload)
            if fast is None:
                return self._block_delta(payload)
            return [GrowPart(fast[0], fast[1])]
        if kind == "content_block_start":
            return self._block_start(payload)
        if kind == "content_block_stop":
            return self._block_stop(payload)
        if kind == "message_start":
            return self._message_start(payload)
        if kind == "message_delta":
            return self._message_delta(payload)
        if kind == "message_stop":
            return self._message_stop()
        if kind == "ping" or kind in _SDK_SYNTHESIZED:
            return []
        if kind == "error":
            return self._error(payload)
        if event == "error":
            # An SSE error event holding a server's own error object, whose `type` names
            # the error (llama.cpp's `error:` line: "server_error"), not an event.
            return self._error({"type": "error", "error": payload})
        return [SkipEvent(kind)]

    def close(self) -> list[Delta]:
        """The input ended early: close the blocks this decoder was still buffering."""
        return [] if self._ended else self._flush_open()

    # --- message events ------------------------------------------------------------

    def _message_start(self, payload: dict[str, Any]) -> list[Delta]:
        message = required(self, payload, "message", dict)
        metadata: dict[str, Any] = {}
        for key in ("id", "model"):
            value = message.get(key)
            if value is not None:
                if type(value) is not str:  # (checked, or refused by name)
                    value = check(self, value, str, f"message.{key}", payload)
                metadata[key] = value
        usage_raw = message.get("usage")
        usage: Usage | None = None
        running = self._usage_raw
        if usage_raw is not None:
            usage_raw = check(self, usage_raw, dict, "message.usage", payload)
            self._usage_raw = dict(usage_raw)
            usage = self._usage(payload)
        if self._started:
            # A repeat (checked like the first) would reset the running usage.
            self._usage_raw = running
            return self.repair(
                "duplicate_message_start", "expected one message_start, got a second", payload
            )
        self._started = True
        return [update_message(usage=usage, metadata=metadata or None)]

    def _message_delta(self, payload: dict[str, Any]) -> list[Delta]:
        delta = payload.get("delta")
        delta = {} if delta is None else check(self, delta, dict, "delta", payload)
        raw_stop = delta.get("stop_reason")
        stop_reason: StopReason | None = None
        if raw_stop is not None:
            raw_stop = check(self, raw_stop, str, "delta.stop_reason", payload)
            stop_reason, self._status = _STOP.get(raw_stop, ("other", "complete"))
        metadata: dict[str, Any] = {}
        for key in ("stop_sequence", "stop_details", "container"):
            if delta.get(key) is not None:
                metadata[key] = delta[key]
        if payload.get("context_management") is not None:
            metadata["context_management"] = payload["context_management"]
        usage: Usage | None = None
        usage_raw = payload.get("usage")
        if usage_raw is not None:
            usage_raw = check(self, usage_raw, dict, "usage", payload)
            # Running totals: a field left out (or null) keeps its message_start value.
            self._usage_raw.update((k, v) for k, v in usage_raw.items() if v is not None)
            usage = self._usage(payload)
        # The status waits for message_stop: a stream cut after message_delta is not
        # known to be complete.
        return [
            update_message(
                stop_reason=stop_reason,
                raw_stop_reason=raw_stop,
                usage=usage,
                metadata=metadata or None,
            )
        ]

    def _message_stop(self) -> list[Delta]:
        deltas = self._flush_open()
        deltas.append(update_message(status=self._status or "complete"))
        deltas.append(END_MESSAGE)
        self._ended = True
        return deltas

    def _error(self, payload: dict[str, Any]) -> list[Delta]:
        error = payload.get("error")
        error_type: str | None = None
        message = "unknown error"
        if isinstance(error, dict):
            if isinstance(error.get("type"), str):
                error_type = error["type"]
            if isinstance(error.get("message"), str):
                message = error["message"]
        elif isinstance(error, str):
            message = error
        deltas = self._flush_open()
        deltas.append(ReportError(error_type, message, payload))
        self._ended = True
        return deltas

    def _usage(self, raw: Any) -> Usage:
        fields: dict[str, Any] = {}
        for wire, name in _USAGE_FIELDS:
            value = self._usage_raw.get(wire)
            if value is not None and type(value) is not int:  # (checked, or refused by name)
                value = check(self, value, int, f"usage.{wire}", raw)
            fields[name] = value
        details = self._usage_raw.get("output_tokens_details")
        thinking = details.get("thinking_tokens") if isinstance(details, dict) else None
        if thinking is not None:
            thinking = check(self, thinking, int, "usage.output_tokens_details", raw)
        # Every count checked above, the raw totals here: built without validation.
        fields["reasoning_tokens"] = thinking
        fields["raw"] = check_json_object(dict(self._usage_raw), "raw")
        fields["cumulative"] = True
        return trusted(Usage, fields)

    # --- content blocks ------------------------------------------------------------

    def _block_start(self, payload: dict[str, Any]) -> list[Delta]:
        index = _index(self, payload)
        block = required(self, payload, "content_block", dict)
        btype = check(self, block.get("type"), str, "content_block.type", payload)
        out: list[Delta] = []
        key: Hashable = index
        old = self._blocks.get(index)
        if old is not None:
            state = "is still open" if old.open else "has already stopped"
            reason = (
                f"expected a new content block index, got a second content_block_start for "
                f"index {index}, which {state}"
            )
            if old.open and block == old.origin:
                return self.repair("duplicate_block_start", reason, payload)
            # A new block on a used index (proxies that number every block 0): the old
            # one ends here, the new one gets a key of its own.
            out = self.repair("reused_block_index", reason, payload)
            out.extend(self._close_block(old, explicit=False))
            self._restarts += 1
            key = (index, self._restarts)
        part: ContentPart | ToolCall
        if btype == "text":
            text = optional(self, block, "text", str, payload, "content_block.")
            citations = optional(self, block, "citations", list, payload, "content_block.") or []
            blk = _Block("text", btype, block)
            # Checked above (and each citation validated): trusted.
            part = trusted(
                ContentPart,
                {
                    "type": "text",
                    "content": text if text is not None else "",
                    "options": {},
                    "citations": [_citation(self, c, payload) for c in citations],
                },
            )
        elif btype == "thinking":
            thinking = optional(self, block, "thinking", str, payload, "content_block.")
            signature = optional(self, block, "signature", str, payload, "content_block.")
            blk = _Block("thinking", btype, block)
            # An empty signature is not replayable: only a non-empty one is an option.
            part = trusted(
                ContentPart,
                {
                    "type": "thinking",
                    "content": thinking if thinking is not None else "",
                    "options": {"signature": signature} if signature else {},
                    "citations": [],
                },
            )
        elif btype == "tool_use":
            call_id = optional(self, block, "id", str, payload, "content_block.")
            name = optional(self, block, "name", str, payload, "content_block.")
            optional(self, block, "input", dict, payload, "content_block.")
            blk = _Block("tool_use", btype, block)
            extra = {k: v for k, v in block.items() if k not in ("type", "id", "name", "input")}
            if extra:  # anything else the block carries: checked as JSON by validation
                part = ToolCall(call_id=call_id, name=name, arguments="", metadata=extra)
            else:
                part = trusted(
                    ToolCall,
                    {
                        "call_id": call_id,
                        "name": name,
                        "arguments": "",
                        "index": None,
                        "status": "incomplete",
                        "metadata": extra,
                    },
                )
        else:
            if btype == "compaction":
                kind: BlockKind = "compaction"
            elif btype in _BUFFERED_TYPES or isinstance(block.get("input"), dict):
                kind = "buffered"
            else:
                kind = "opaque"
            blk = _Block(kind, btype, dict(block))
            part = _opaque_part(block)
        blk.key = key
        blk.origin = block
        self._blocks[index] = blk
        # A block with input (server_tool_use, mcp_tool_use, any newer such block) is a
        # tool the server runs: the text before it is narration.
        out.append(open_part(key, part, blk.kind == "buffered"))
        self._early_chars.pop(index, None)
        for dtype, value, raw in self._early.pop(index, ()):
            out.extend(self._apply_delta(index, blk, dtype, value, raw))
        return out

    def object_text(self, payload: dict[str, Any]) -> tuple[Hashable, str] | None:
        """The common delta (text, thinking or tool input for its own open block), cheaply:
        the part's key and the text, for one GrowPart (the dict lane, see
        `Decoder.object_text`, and decode()'s own first try).

        Nearly every event of a stream is one of these; anything else (None, nothing
        changed) takes the full path with its checks and repairs, which gives the same
        result for these.
        """
        try:  # subscripts, cheaper than get(); a missing key is simply not this delta
            kind = payload["type"]
            # (A str compared as one: compiled, an unknown value takes the generic compare.)
            if type(kind) is not str or kind != "content_block_delta":
                return None
            index = payload["index"]
            delta = payload["delta"]
            blk = self._blocks[index]
        except (KeyError, TypeError):  # TypeError: an index that is no dict key
            return None
        if type(index) is not int or type(delta) is not dict or not blk.open:
            return None
        plain = _PLAIN_DELTAS.get(blk.kind)
        if plain is None:
            return None
        # (Compiled, the pair is held unboxed: compared by value, never by identity,
        # so no tuple is built for it.)
        delta_type, field = plain
        given = delta.get("type")
        if type(given) is not str or given != delta_type:
            return None
        value = delta.get(field)
        if type(value) is not str:
            return None
        if value and field == "partial_json":
            blk.got_json = True
        return blk.key, value

    def sse_shortcut(self, buffer: bytes, pos: int, grower: PartGrower, out: list[Any]) -> int:
        """The SSE hot lane (see `Decoder.sse_shortcut`): the events `object_text` takes.

        An event matches when its bytes are the hot head, the index of an open text,
        thinking or tool_use block, that kind's delta head, a JSON string body and the
        tail: then its payload is exactly {"type": "content_block_delta", "index": i,
        "delta": {"type": ..., key: text}}, for which `object_text` gives the one
        GrowPart this gives.
        """
        hot = self._hot
        blocks = self._blocks
        plain_tail = _HOT_PLAIN_TAIL.match
        escaped_tail = _HOT_TAIL.search
        size = len(buffer)
        while True:
            if hot is None or not buffer.startswith(hot[0], pos):
                # Not the last block's prefix (which starts with the head): another one's?
                if not buffer.startswith(_HOT_HEAD, pos):
                    break
                hot = self._hot_prefix(buffer, pos)
                if hot is None or not buffer.startswith(hot[0], pos):
                    break
            prefix, index, blk = hot
            if not blk.open or blocks.get(index) is not blk:
                hot = None
                break
            start = pos + len(prefix)
            plain = plain_tail(buffer, start)
            if plain is not None:
                # Text with nothing JSON escapes: it is its own bytes.
                end = plain.end()
                try:
                    text: str | None = plain.group(1).decode()
                except UnicodeDecodeError:
                    break
            else:
                # Escapes (or a broken event): the closing quote is the first `"` followed
                # by the tail; json_string_body checks the text before it (and declines
                # one that spans lines: the match was then another event's).
                tail = escaped_tail(buffer, start)
                if tail is None:
                    break
                end = tail.end()
                text = json_string_body(buffer[start : tail.start()])
            if text is None or not grower.grow_text(blk.key, text, out):
                break
            if text and blk.kind == "tool_use":
                blk.got_json = True
            pos = end
            if pos == size:
                break  # (a live stream's chunk: its one event)
            if buffer.startswith(prefix, pos):
                # More of the same block (a live stream's chunk holds one event; a
                # replayed or buffered one, long runs): the run at once.
                pos = self._hot_run(buffer, pos, prefix, blk, grower, out)
        self._hot = hot
        return pos

    def _hot_run(
        self,
        buffer: bytes,
        pos: int,
        prefix: bytes,
        blk: _Block,
        grower: PartGrower,
        out: list[Any],
    ) -> int:
        """The run of `blk`'s plain events from `pos`, one regex match each, given to the
        accumulator in one call; `pos` (nothing taken) if one holds bad UTF-8 or a bad
        escape: the event-by-event loop then takes them up to it."""
        match = _hot_plain_event(prefix)
        raw: list[bytes] = []
        end = pos
        found = match(buffer, end)
        while found is not None:
            raw.append(found.group(1))
            end = found.end()
            found = match(buffer, end)
        if not raw:
            return pos
        loads = jiter.from_json
        try:
            texts = [p.decode() if b"\\" not in p else loads(b'"' + p + b'"') for p in raw]
        except ValueError:  # bad UTF-8 or a bad escape
            return pos
        if not grower.grow_texts(blk.key, texts, out):
            return pos
        if blk.kind == "tool_use" and any(raw):
            blk.got_json = True
        return end

    def _hot_prefix(self, buffer: bytes, pos: int) -> tuple[bytes, int, _Block] | None:
        """The hot event prefix for the block whose index follows the head at `pos`."""
        at = pos + len(_HOT_HEAD)
        comma = buffer.find(b",", at, at + _HOT_INDEX_SPAN)
        if comma < 0:  # (before slicing: compiled, a slice to -1 past its start fails)
            return None
        digits = buffer[at:comma]
        if not digits.isdigit() or (digits[:1] == b"0" and len(digits) > 1):
            return None
        index = int(digits)
        blk = self._blocks.get(index)
        delta_head = None if blk is None else _HOT_DELTA.get(blk.kind)
        if blk is None or delta_head is None or not blk.open:
            return None
        return buffer[pos:comma] + delta_head, index, blk

    def _block_delta(self, payload: dict[str, Any]) -> list[Delta]:
        index = _index(self, payload)
        delta = required(self, payload, "delta", dict)
        dtype = check(self, delta.get("type"), str, "delta.type", payload)
        value = self._delta_value(dtype, delta, payload)
        blk = self._blocks.get(index)
        if blk is None:
            out = self.repair(
                "delta_before_block_start",
                f"expected a {dtype} for a started content block, got one for index {index}, "
                "which was never started (no content_block_start)",
                payload,
            )
            # Held until the block starts (or stops, or the message ends without it).
            self.hold_text(self._early_chars, index, value, dtype == "input_json_delta")
            self._early.setdefault(index, []).append((dtype, value, payload))
            return out
        if not blk.open:
            return self.repair(
                "delta_after_block_stop",
                f"expected a {dtype} for an open content block, got one for index {index}, "
                "after its content_block_stop",
                payload,
            )
        return self._apply_delta(index, blk, dtype, value, payload)

    def _delta_value(self, dtype: str, delta: dict[str, Any], payload: dict[str, Any]) -> Any:
        """What a delta carries, type-checked (wrong types raise in every mode)."""
        if dtype == "text_delta":
            return required(self, delta, "text", str, payload)
        if dtype == "thinking_delta":
            return required(self, delta, "thinking", str, payload)
        if dtype == "signature_delta":
            return required(self, delta, "signature", str, payload)
        if dtype == "citations_delta":
            return _citation(self, delta.get("citation"), payload)
        if dtype == "input_json_delta":
            return required(self, delta, "partial_json", str, payload)
        if dtype == "compaction_delta":
            return {k: v for k, v in delta.items() if k != "type"}
        return None

    def _apply_delta(
        self, index: int, blk: _Block, dtype: str, value: Any, payload: dict[str, Any]
    ) -> list[Delta]:
        wants = _DELTA_KIND.get(dtype)
        if wants is None:
            # A delta type newer than this decoder: counted, never fatal.
            return [SkipEvent(f"content_block_delta.{dtype}")]
        out: list[Delta] = []
        if not _fits(blk, wants):
            out = self.repair(
                "delta_type_mismatch",
                f"expected a delta that fits the {blk.type} block at index {index}, got a "
                f"{dtype} (which only grows {wants} blocks)",
                payload,
            )
            # Kept in an implicit part of the kind the delta grows, next to the block.
            stray = blk.strays.get(wants)
            if stray is None:
                stray, part = _implicit(wants, (blk.key, wants))
                blk.strays[wants] = stray
                out.append(open_part(stray.key, part))
            blk = stray
        key = blk.key
        if dtype in ("text_delta", "thinking_delta"):
            out.append(GrowPart(key, content=value))
        elif dtype == "signature_delta":
            out.append(GrowPart(key, options={"signature": value}))
        elif dtype == "citations_delta":
            out.append(GrowPart(key, citations=(value,)))
        elif dtype == "input_json_delta":
            if value:
                blk.got_json = True
            if blk.kind == "buffered":
                if blk.json_chunks is None:
                    blk.json_chunks = []
                blk.json_chunks.append(value)
            else:
                out.append(GrowPart(key, content=value))
        else:
            # compaction_delta: like the SDK, each field it carries replaces the block's.
            blk.block.update(value)
        return out

    def _block_stop(self, payload: dict[str, Any]) -> list[Delta]:
        index = _index(self, payload)
        blk = self._blocks.get(index)
        if blk is None and index in self._early:
            # Its deltas came (and were counted) but its start never did.
            out = self._start_implicit(index)
            blk = self._blocks.get(index)
            if blk is not None:
                out.extend(self._close_block(blk, explicit=True))
            return out
        if blk is None:
            return self.repair(
                "stop_for_unknown_block",
                f"expected a content_block_stop for a started content block, got one for "
                f"index {index}, which was never started (no content_block_start)",
                payload,
            )
        if not blk.open:
            return self.repair(
                "duplicate_block_stop",
                f"expected a content_block_stop for an open content block, got one for index "
                f"{index}, after its content_block_stop",
                payload,
            )
        return self._close_block(blk, explicit=True)

    def _start_implicit(self, index: int) -> list[Delta]:
        """Open a block that never started, of the kind its early deltas grow, and fill it."""
        early = self._early.pop(index, [])
        self._early_chars.pop(index, None)
        wants = next((w for d, _, _ in early if (w := _DELTA_KIND.get(d)) is not None), None)
        if wants is None:
            return [SkipEvent(f"content_block_delta.{d}") for d, _, _ in early]
        blk, part = _implicit(wants, index)
        self._blocks[index] = blk
        out: list[Delta] = [open_part(index, part)]
        for dtype, value, raw in early:
            out.extend(self._apply_delta(index, blk, dtype, value, raw))
        return out

    def _close_block(self, blk: _Block, *, explicit: bool) -> list[Delta]:
        """Close a block and the implicit parts that grew beside it."""
        if not blk.strays and blk.open:
            return [self._close_one(blk, explicit=explicit)]  # nearly every block
        out: list[Delta] = [self._close_one(blk, explicit=explicit)] if blk.open else []
        out.extend(self._close_one(s, explicit=explicit) for s in blk.strays.values() if s.open)
        return out

    def _close_one(self, blk: _Block, *, explicit: bool) -> ClosePart:
        blk.open = False
        key = blk.key
        if blk.kind == "buffered":
            return close_part(key, explicit, _opaque_part(*_with_input(blk)))
        if blk.kind == "compaction":
            return close_part(key, explicit, _opaque_part(blk.block))
        if blk.kind == "tool_use" and not blk.got_json:
            start_input = blk.block.get("input")
            if isinstance(start_input, dict) and start_input:
                # The start carried the whole input and no delta replaced it.
                extra = {k: v for k, v in blk.block.items() if k not in ("type", "id", "name")}
                del extra["input"]
                final = ToolCall(
                    call_id=blk.block.get("id"),
                    name=blk.block.get("name"),
                    arguments=start_input,
                    status="complete",
                    metadata=extra,
                )
                return close_part(key, explicit, final)
        return close_part(key, explicit)

    def _flush_open(self) -> list[Delta]:
        # Blocks that never started but got deltas open now, so nothing streamed is lost.
        out: list[Delta] = []
        for index in sorted(self._early):
            out.extend(self._start_implicit(index))
        # Blocks whose final form lives in this decoder (buffered input, compaction)
        # must be closed here; the accumulator infers the end of the others itself.
        for blk in list(self._blocks.values()):
            for one in (blk, *blk.strays.values()):
                if one.open and one.kind in ("buffered", "compaction"):
                    out.append(self._close_one(one, explicit=False))
        return out


# --- helpers ---------------------------------------------------------------------------


def _fits(blk: _Block, wants: str) -> bool:
    """Whether a delta that grows `wants` blocks may grow this one."""
    if wants == "tool input":
        return blk.kind in ("tool_use", "buffered")
    return blk.kind == wants


def _implicit(wants: str, key: Hashable) -> tuple[_Block, ContentPart | ToolCall]:
    """A block the wire never started, of the kind a delta grows (lenient repairs)."""
    if wants == "tool input":
        return _Block("tool_use", "tool_use", {"type": "tool_use"}, key), ToolCall(
            call_id=None, name=None, arguments=""
        )
    if wants == "compaction":
        block = {"type": "compaction"}
        return _Block("compaction", "compaction", dict(block), key), _opaque_part(block)
    part_type: Literal["text", "thinking"] = "thinking" if wants == "thinking" else "text"
    return _Block(part_type, part_type, {"type": part_type}, key), ContentPart(
        type=part_type, content=""
    )


def _with_input(blk: _Block) -> tuple[dict[str, Any], dict[str, Any]]:
    """The buffered block with its streamed input parsed, and extra options on failure."""
    text = "".join(blk.json_chunks or ())
    block = dict(blk.block)
    if not text.strip():
        return block, {}
    try:
        value = jiter.from_json(text.encode(), allow_inf_nan=False)
    except ValueError as exc:
        return block, {"input_json": text, "input_error": f"invalid JSON: {exc}"}
    if not isinstance(value, dict):
        return block, {"input_json": text, "input_error": f"expected an object, got {value!r}"}
    block["input"] = value
    return block, {}


def _opaque_part(block: dict[str, Any], extra: dict[str, Any] | None = None) -> ContentPart:
    options: dict[str, Any] = {"type": block["type"], "block": block}
    for key in ("id", "name", "tool_use_id"):
        if isinstance(block.get(key), str):
            options[key] = block[key]
    if extra:
        options.update(extra)
    return ContentPart(type="unsupported", content=None, options=options)


def _citation(dec: Decoder, raw: Any, payload: Any) -> Citation:
    """An Anthropic citation as a Citation; the raw citation stays in metadata["raw"]."""
    raw = check(dec, raw, dict, "citation", payload)
    ctype = raw.get("type")
    cited = raw.get("cited_text")
    title = raw.get("title")
    locations = {k: raw[k] for k in _LOCATION_KEYS if k in raw}
    source: CitationSource | None = None
    if ctype == "web_search_result_location":
        source = CitationSource(
            type="web", title=text_or_none(title), url=text_or_none(raw.get("url"))
        )
    elif ctype in _DOCUMENT_LOCATIONS:
        # Indexes point into the cited document, not into this part's text: they stay
        # in the source's metadata, and start_index / end_index stay unset.
        source = CitationSource(
            type="document",
            title=text_or_none(raw.get("document_title")),
            document_id=text_or_none(raw.get("file_id")),
            metadata=locations,
        )
    elif ctype == "search_result_location":
        where = text_or_none(raw.get("source"))
        is_url = where is not None and where.startswith(("http://", "https://"))
        source = CitationSource(
            type="web" if is_url else "document",
            title=text_or_none(title),
            url=where if is_url else None,
            document_id=None if is_url else where,
            metadata=locations,
        )
    return Citation(cited_text=text_or_none(cited), source=source, metadata={"raw": raw})


def _index(dec: Decoder, payload: dict[str, Any]) -> int:
    return check(dec, payload.get("index"), int, "index", payload)
