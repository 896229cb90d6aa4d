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

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import jiter

from ..deltas import (
    ClosePart,
    Delta,
    EndMessage,
    GrowPart,
    OpenPart,
    ReportError,
    SkipEvent,
    UpdateMessage,
)
from ..message import Status, StopReason, ToolCall, Usage
from ..parts import Citation, CitationSource, ContentPart
from .base import Decoder

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

T = TypeVar("T")

BlockKind = Literal["text", "thinking", "tool_use", "buffered", "compaction", "opaque"]


@dataclass(slots=True)
class _Block:
    """What the decoder must remember about one content block."""

    kind: BlockKind
    type: str
    block: dict[str, Any]
    open: bool = True
    # buffered blocks (server_tool_use, mcp_tool_use): their input JSON, joined at stop.
    json_chunks: list[str] = field(default_factory=list)
    # A non-empty input_json_delta arrived (else tool_use keeps its start's input).
    got_json: bool = False


class AnthropicDecoder(Decoder):
    """Decode Anthropic Messages stream events (raw, or the SDK's stream helper events)."""

    provider = "anthropic"

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        self._blocks: dict[int, _Block] = {}
        # The running usage dict: message_start's, overwritten field by field by the
        # cumulative totals of message_delta (None in a later report keeps the earlier).
        self._usage_raw: dict[str, Any] = {}
        self._status: Status | None = None
        self._ended = False

    # --- dispatch ------------------------------------------------------------------

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one Anthropic stream event into neutral deltas."""
        kind = payload.get("type")
        if kind is None:
            kind = event or None
        if not isinstance(kind, str):
            raise self.protocol_error(
                f"expected an event with a string 'type', got {_describe(kind)}", payload
            )
        if kind == "content_block_delta":
            return self._block_delta(payload)
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
        return [SkipEvent(kind)]

    def close(self) -> list[Delta]:
        """The input ended early: close the blocks this decoder was still buffering."""
        return [] if self._ended else self._flush_open()

    # --- message events ------------------------------------------------------------

    def _message_start(self, payload: dict[str, Any]) -> list[Delta]:
        message = _field(self, payload, "message", dict)
        metadata: dict[str, Any] = {}
        for key in ("id", "model"):
            value = message.get(key)
            if value is not None:
                metadata[key] = _check(self, value, str, f"message.{key}", payload)
        usage_raw = message.get("usage")
        usage: Usage | None = None
        if usage_raw is not None:
            usage_raw = _check(self, usage_raw, dict, "message.usage", payload)
            self._usage_raw = dict(usage_raw)
            usage = self._usage(payload)
        return [UpdateMessage(usage=usage, metadata=metadata or None)]

    def _message_delta(self, payload: dict[str, Any]) -> list[Delta]:
        delta = payload.get("delta")
        delta = {} if delta is None else _check(self, delta, dict, "delta", payload)
        raw_stop = delta.get("stop_reason")
        stop_reason: StopReason | None = None
        if raw_stop is not None:
            raw_stop = _check(self, raw_stop, str, "delta.stop_reason", payload)
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
            usage_raw = _check(self, usage_raw, dict, "usage", payload)
            # Running totals: a field left out (or null) keeps its message_start value.
            self._usage_raw.update((k, v) for k, v in usage_raw.items() if v is not None)
            usage = self._usage(payload)
        # The status waits for message_stop: a stream cut after message_delta is not
        # known to be complete.
        return [
            UpdateMessage(
                stop_reason=stop_reason,
                raw_stop_reason=raw_stop,
                usage=usage,
                metadata=metadata or None,
            )
        ]

    def _message_stop(self) -> list[Delta]:
        deltas = self._flush_open()
        deltas.append(UpdateMessage(status=self._status or "complete"))
        deltas.append(EndMessage())
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
        fields: dict[str, int | None] = {}
        for wire, name in _USAGE_FIELDS:
            value = self._usage_raw.get(wire)
            fields[name] = None if value is None else _check(self, value, int, f"usage.{wire}", raw)
        details = self._usage_raw.get("output_tokens_details")
        thinking = details.get("thinking_tokens") if isinstance(details, dict) else None
        if thinking is not None:
            thinking = _check(self, thinking, int, "usage.output_tokens_details", raw)
        return Usage(
            **fields, reasoning_tokens=thinking, raw=dict(self._usage_raw), cumulative=True
        )

    # --- content blocks ------------------------------------------------------------

    def _block_start(self, payload: dict[str, Any]) -> list[Delta]:
        index = _index(self, payload)
        block = _field(self, payload, "content_block", dict)
        btype = _check(self, block.get("type"), str, "content_block.type", payload)
        if index in self._blocks:
            state = "is still open" if self._blocks[index].open else "has already stopped"
            raise self.protocol_error(
                f"expected a new content block index, got a second content_block_start for "
                f"index {index}, which {state}",
                payload,
            )
        part: ContentPart | ToolCall
        if btype == "text":
            text = _optional(self, block, "text", str, payload)
            citations = _optional(self, block, "citations", list, payload) or []
            self._blocks[index] = _Block("text", btype, block)
            part = ContentPart(
                type="text",
                content=text if text is not None else "",
                citations=[_citation(self, c, payload) for c in citations],
            )
        elif btype == "thinking":
            thinking = _optional(self, block, "thinking", str, payload)
            signature = _optional(self, block, "signature", str, payload)
            self._blocks[index] = _Block("thinking", btype, block)
            # An empty signature is not replayable: only a non-empty one is an option.
            part = ContentPart(
                type="thinking",
                content=thinking if thinking is not None else "",
                options={"signature": signature} if signature else {},
            )
        elif btype == "tool_use":
            call_id = _optional(self, block, "id", str, payload)
            name = _optional(self, block, "name", str, payload)
            _optional(self, block, "input", dict, payload)
            self._blocks[index] = _Block("tool_use", btype, block)
            extra = {k: v for k, v in block.items() if k not in ("type", "id", "name", "input")}
            part = ToolCall(call_id=call_id, name=name, arguments="", metadata=extra)
        else:
            if btype == "compaction":
                kind: BlockKind = "compaction"
            elif btype in _BUFFERED_TYPES or isinstance(block.get("input"), dict):
                kind = "buffered"
            else:
                kind = "opaque"
            self._blocks[index] = _Block(kind, btype, dict(block))
            part = _opaque_part(block)
        return [OpenPart(index, part)]

    def _block_delta(self, payload: dict[str, Any]) -> list[Delta]:
        index = _index(self, payload)
        delta = _field(self, payload, "delta", dict)
        dtype = _check(self, delta.get("type"), str, "delta.type", payload)
        blk = self._open_block(index, f"a {dtype}", payload)
        wants = _DELTA_KIND.get(dtype)
        if wants is None:
            # A delta type newer than this decoder: counted, never fatal.
            return [SkipEvent(f"content_block_delta.{dtype}")]
        fits = {
            "text": blk.kind == "text",
            "thinking": blk.kind == "thinking",
            "tool input": blk.kind in ("tool_use", "buffered"),
            "compaction": blk.kind == "compaction",
        }[wants]
        if not fits:
            raise self.protocol_error(
                f"expected a delta that fits the {blk.type} block at index {index}, got a "
                f"{dtype} (which only grows {wants} blocks)",
                payload,
            )
        if dtype == "text_delta":
            return [GrowPart(index, content=_field(self, delta, "text", str, payload))]
        if dtype == "thinking_delta":
            return [GrowPart(index, content=_field(self, delta, "thinking", str, payload))]
        if dtype == "signature_delta":
            signature = _field(self, delta, "signature", str, payload)
            return [GrowPart(index, options={"signature": signature})]
        if dtype == "citations_delta":
            citation = _citation(self, delta.get("citation"), payload)
            return [GrowPart(index, citations=(citation,))]
        if dtype == "input_json_delta":
            chunk = _field(self, delta, "partial_json", str, payload)
            if chunk:
                blk.got_json = True
            if blk.kind == "buffered":
                blk.json_chunks.append(chunk)
                return []
            return [GrowPart(index, content=chunk)]
        # compaction_delta: like the SDK, each field it carries replaces the block's.
        blk.block.update((k, v) for k, v in delta.items() if k != "type")
        return []

    def _block_stop(self, payload: dict[str, Any]) -> list[Delta]:
        index = _index(self, payload)
        blk = self._open_block(index, "a content_block_stop", payload)
        return [self._close_block(index, blk, explicit=True)]

    def _open_block(self, index: int, what: str, payload: dict[str, Any]) -> _Block:
        blk = self._blocks.get(index)
        if blk is None:
            raise self.protocol_error(
                f"expected {what} for a started content block, got one for index {index}, "
                "which was never started (no content_block_start)",
                payload,
            )
        if not blk.open:
            raise self.protocol_error(
                f"expected {what} for an open content block, got one for index {index}, "
                "after its content_block_stop",
                payload,
            )
        return blk

    def _close_block(self, index: int, blk: _Block, *, explicit: bool) -> ClosePart:
        blk.open = False
        if blk.kind == "buffered":
            return ClosePart(index, explicit, _opaque_part(*_with_input(blk)))
        if blk.kind == "compaction":
            return ClosePart(index, explicit, _opaque_part(blk.block))
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
                return ClosePart(index, explicit, final)
        return ClosePart(index, explicit)

    def _flush_open(self) -> list[Delta]:
        # Blocks whose final form lives in this decoder (buffered input, compaction)
        # must be closed here; the accumulator infers the end of the others itself.
        return [
            self._close_block(index, blk, explicit=False)
            for index, blk in self._blocks.items()
            if blk.open and blk.kind in ("buffered", "compaction")
        ]


# --- helpers ---------------------------------------------------------------------------


def _with_input(blk: _Block) -> tuple[dict[str, Any], dict[str, Any]]:
    """The buffered block with its streamed input parsed, and extra options on failure."""
    text = "".join(blk.json_chunks)
    block = dict(blk.block)
    if not text.strip():
        return block, {}
    try:
        value = jiter.from_json(text.encode())
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
    raw = _check(dec, raw, dict, "citation", payload)
    ctype = raw.get("type")
    cited = raw.get("cited_text")
    title = raw.get("title")
    locations = {k: raw[k] for k in _LOCATION_KEYS if k in raw}
    source: CitationSource | None = None
    if ctype == "web_search_result_location":
        source = CitationSource(
            type="web", title=_str_or_none(title), url=_str_or_none(raw.get("url"))
        )
    elif ctype in _DOCUMENT_LOCATIONS:
        # Indexes point into the cited document, not into this part's text: they stay
        # in the source's metadata, and start_index / end_index stay unset.
        source = CitationSource(
            type="document",
            title=_str_or_none(raw.get("document_title")),
            document_id=_str_or_none(raw.get("file_id")),
            metadata=locations,
        )
    elif ctype == "search_result_location":
        where = _str_or_none(raw.get("source"))
        is_url = where is not None and where.startswith(("http://", "https://"))
        source = CitationSource(
            type="web" if is_url else "document",
            title=_str_or_none(title),
            url=where if is_url else None,
            document_id=None if is_url else where,
            metadata=locations,
        )
    return Citation(cited_text=_str_or_none(cited), source=source, metadata={"raw": raw})


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _describe(value: Any) -> str:
    if value is None:
        return "none"
    text = json.dumps(value) if isinstance(value, str | int | float | bool) else ""
    return f"{type(value).__name__} {text}".strip()


_TYPE_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer"}


def _check(dec: Decoder, value: Any, kind: type[T], name: str, raw: Any) -> T:
    """`value` if it has type `kind` (bools are not integers), else a protocol error."""
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise dec.protocol_error(
        f"expected {name} to be {_TYPE_NAMES.get(kind, kind.__name__)}, got {_describe(value)}",
        raw,
    )


def _field(dec: Decoder, obj: dict[str, Any], key: str, kind: type[T], raw: Any = None) -> T:
    """A required field of type `kind`."""
    return _check(dec, obj.get(key), kind, key, obj if raw is None else raw)


def _optional(dec: Decoder, obj: dict[str, Any], key: str, kind: type[T], raw: Any) -> T | None:
    """An optional field: None when absent or null, else it must have type `kind`."""
    value = obj.get(key)
    return None if value is None else _check(dec, value, kind, f"content_block.{key}", raw)


def _index(dec: Decoder, payload: dict[str, Any]) -> int:
    return _check(dec, payload.get("index"), int, "index", payload)
