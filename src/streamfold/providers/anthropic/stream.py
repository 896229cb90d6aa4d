"""A Message as the Anthropic Messages API streams it (SSE, `event:` named, one a chunk).

A thinking signature goes only back to the provider that issued it (Anthropic, or Claude
on Bedrock); another provider's is left out, as `encode` leaves it out.

What the stream cannot carry (a ReplayWarning, or an EncodeError with `strict=True`):
images and files, and another provider's opaque blocks; citations without a web page URL
or an Anthropic citation of their own. Left out without a word: part options but a
thinking signature (and the tool calls' `caller`, from Anthropic itself), explicit
narration / answer markers (the fold infers them again), usage counts the API has no
field for (reasoning tokens).
"""

from __future__ import annotations

from typing import Any

from ...message import ToolCall
from ...parts import Citation, ContentPart
from ..streaming import StreamWriter, arguments_text, own_block, part_kind, sse

_STOP_WORD = {
    "stop": "end_turn",
    "tool_use": "tool_use",
    "length": "max_tokens",
    "pause": "pause_turn",
    "refusal": "refusal",
    "content_filter": "refusal",
}
# Blocks whose input streams as input_json_delta after a start with an empty input.
_INPUT_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})


def error_event(error_type: str, message: str) -> bytes:
    """The `event: error` the API sends mid-stream (e.g. `overloaded_error`)."""
    return sse({"type": "error", "error": {"type": error_type, "message": message}}, "error")


def stream_events(writer: StreamWriter) -> list[dict[str, Any]]:
    """The message's events, in order, as dicts (the SSE data of each)."""
    message = writer.message
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": writer.meta("id", "msg_streamfold"),
                "type": "message",
                "role": "assistant",
                "model": writer.meta("model", writer.model),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _usage(writer, start=True),
            },
        }
    ]
    index = 0
    for position, item in enumerate(message.stream_order()):
        block = _block_events(writer, position, item, index)
        if block:
            events.extend(block)
            index += 1
    if message.status in ("incomplete", "cancelled"):
        return events  # cut before its end: no stop reason, no message_stop
    if message.status == "error":
        return events  # (the error event follows, see `to_stream_chunks`)
    delta: dict[str, Any] = {"stop_reason": _stop_word(writer), "stop_sequence": None}
    extra: dict[str, Any] = {}
    if writer.native:
        for key in ("stop_sequence", "stop_details", "container"):
            if message.metadata.get(key) is not None:
                delta[key] = message.metadata[key]
        if message.metadata.get("context_management") is not None:
            extra["context_management"] = message.metadata["context_management"]
    events.append({"type": "message_delta", "delta": delta, "usage": _usage(writer), **extra})
    events.append({"type": "message_stop"})
    return events


def to_stream_chunks(writer: StreamWriter) -> list[bytes]:
    """The message as the API's SSE stream: one event a chunk."""
    chunks = [sse(event, str(event["type"])) for event in stream_events(writer)]
    if writer.message.status == "error":
        chunks.append(error_event(*writer.error("api_error", "the stream failed")))
    return chunks


def _stop_word(writer: StreamWriter) -> str:
    message = writer.message
    if writer.native and message.raw_stop_reason:
        return message.raw_stop_reason
    return _STOP_WORD.get(message.stop_reason or "stop", "end_turn")


def _usage(writer: StreamWriter, *, start: bool = False) -> dict[str, Any]:
    raw = writer.native_raw_usage()
    if raw is not None:
        return raw
    usage = writer.message.usage
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    out: dict[str, Any] = {
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
    }
    if usage.cache_write_tokens is not None:
        out["cache_creation_input_tokens"] = usage.cache_write_tokens
    if usage.cache_read_tokens is not None:
        out["cache_read_input_tokens"] = usage.cache_read_tokens
    return out


def _block_events(
    writer: StreamWriter, position: int, item: ContentPart | ToolCall, index: int
) -> list[dict[str, Any]]:
    """One content block as the events that stream it (start, deltas, stop); [] if left out."""
    deltas: list[dict[str, Any]] = []
    if isinstance(item, ToolCall):
        start: dict[str, Any] = {"type": "tool_use", "id": item.call_id or f"toolu_{position}",
                                 "name": item.name or "", "input": {}}  # fmt: skip
        if writer.native:
            start.update({k: v for k, v in item.metadata.items() if k == "caller"})
        deltas = [
            {"type": "input_json_delta", "partial_json": text}
            for text in writer.pieces(arguments_text(item))
        ]
    elif item.type == "text":
        start = {"type": "text", "text": ""}
        deltas = [
            {"type": "citations_delta", "citation": cited}
            for c in item.citations
            if (cited := _citation(writer, position, c)) is not None
        ]
        deltas.extend({"type": "text_delta", "text": t} for t in writer.pieces(item.content or ""))
    elif item.type == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": t} for t in writer.pieces(item.content or "")
        ]
        signature = writer.signature(item.options)
        if signature is not None:
            deltas.append({"type": "signature_delta", "signature": signature})
    else:
        block = own_block(writer, item)
        if block is None:
            writer.drop(position, part_kind(item), "an Anthropic stream has no block for it")
            return []
        start = block
        if block.get("type") in _INPUT_BLOCKS and isinstance(block.get("input"), dict):
            start = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": text}
                for text in writer.pieces(arguments_text(ToolCall(arguments=block["input"])))
            ]
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def _citation(writer: StreamWriter, position: int, citation: Citation) -> dict[str, Any] | None:
    raw = citation.metadata.get("raw")
    if writer.native and isinstance(raw, dict):
        return raw
    source = citation.source
    if source is not None and source.url:
        return {
            "type": "web_search_result_location",
            "url": source.url,
            "title": source.title,
            "cited_text": citation.cited_text or "",
            "encrypted_index": "",
        }
    writer.drop(position, "a citation", "an Anthropic citation needs a web page URL")
    return None
