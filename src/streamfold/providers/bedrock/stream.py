"""A Message as Bedrock's ConverseStream sends it: AWS eventstream messages (`:event-type`
messageStart, contentBlockStart / Delta / Stop, messageStop, metadata), one a chunk.

Carried: text, reasoning (text in deltas, its signature when Bedrock issued it, redacted
reasoning), tool calls
(input JSON in deltas), Bedrock's own server-tool blocks (`toolUse` of a server tool and
its `toolResult`), stop reason, usage, latency and the metadata event's other fields.

Citations go as CitationsDelta (a web page's URL as its `web` location; another
provider's document locations are left out).

Not carried (a ReplayWarning, or an EncodeError with `strict=True`): images, files,
another provider's opaque blocks. Left out without a word: part options but the
signature, reasoning token counts, the response id and model (the stream names neither).
"""

from __future__ import annotations

import json
from typing import Any

from ...eventstream import encode_message
from ...message import ToolCall
from ...parts import Citation
from ..streaming import StreamWriter, arguments_text, eventstream_event, own_block, part_kind

_STOP_WORD = {
    "stop": "end_turn",
    "tool_use": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filtered",
    "refusal": "content_filtered",
    "pause": "end_turn",
    "other": "end_turn",
}


def error_event(exception: str, message: str) -> bytes:
    """An in-stream exception as Bedrock frames it (`:message-type: exception`), e.g.
    `throttlingException`, `modelStreamErrorException`, `internalServerException`."""
    headers = {
        ":exception-type": exception,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_message(headers, json.dumps({"message": message}).encode())


def stream_events(writer: StreamWriter) -> list[tuple[str, dict[str, Any]]]:
    """The message's events, in order: (event type, payload)."""
    message = writer.message
    events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant"})]
    index = 0
    for position, item in enumerate(message.stream_order()):
        block = _block(writer, position, item, index)
        if block:
            events.extend(block)
            events.append(("contentBlockStop", {"contentBlockIndex": index}))
            index += 1
    if message.status in ("incomplete", "cancelled", "error"):
        return events
    stop: dict[str, Any] = {"stopReason": _stop_word(writer)}
    extra = message.metadata.get("additional_model_response_fields")
    if writer.native and extra is not None:
        stop["additionalModelResponseFields"] = extra
    events.append(("messageStop", stop))
    events.append(("metadata", _metadata(writer)))
    return events


def to_stream_chunks(writer: StreamWriter) -> list[bytes]:
    """The message as ConverseStream's eventstream: one message a chunk."""
    chunks = [eventstream_event(name, body) for name, body in stream_events(writer)]
    if writer.message.status == "error":
        kind, text = writer.error("", "the stream failed")
        # Another provider's error type is no Bedrock exception: Bedrock's own word.
        exception = kind if kind.endswith("Exception") else "internalServerException"
        chunks.append(error_event(exception, text))
    return chunks


def _stop_word(writer: StreamWriter) -> str:
    message = writer.message
    if writer.native and message.raw_stop_reason:
        return message.raw_stop_reason
    return _STOP_WORD.get(message.stop_reason or "stop", "end_turn")


def _metadata(writer: StreamWriter) -> dict[str, Any]:
    message = writer.message
    raw = writer.native_raw_usage()
    usage = message.usage
    if raw is None:
        raw = {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
        if usage is not None:
            raw = {
                "inputTokens": usage.input_tokens or 0,
                "outputTokens": usage.output_tokens or 0,
                "totalTokens": usage.total_tokens,
            }
            if usage.cache_read_tokens is not None:
                raw["cacheReadInputTokens"] = usage.cache_read_tokens
            if usage.cache_write_tokens is not None:
                raw["cacheWriteInputTokens"] = usage.cache_write_tokens
    latency = message.metadata.get("latency_ms") if writer.native else None
    body: dict[str, Any] = {"usage": raw, "metrics": {"latencyMs": latency or 0}}
    if writer.native:
        for key, name in (
            ("trace", "trace"),
            ("performanceConfig", "performance_config"),
            ("serviceTier", "service_tier"),
        ):
            if message.metadata.get(name) is not None:
                body[key] = message.metadata[name]
    return body


def _citation(writer: StreamWriter, citation: Citation) -> dict[str, Any]:
    """A citation as ConverseStream's CitationsDelta (title, source, sourceContent,
    location); one from another provider points at its web page, if it names one."""
    out: dict[str, Any] = {}
    source = citation.source
    if source is not None and source.title is not None:
        out["title"] = source.title
    if source is not None and isinstance(source.metadata.get("source"), str):
        out["source"] = source.metadata["source"]
    if citation.cited_text is not None:
        out["sourceContent"] = [{"text": citation.cited_text}]
    location = citation.metadata.get("location")
    if writer.native and location is not None:
        out["location"] = location
    elif source is not None and source.url:
        out["location"] = {"web": {"url": source.url}}
    return out


def _delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})


def _block(
    writer: StreamWriter, position: int, item: Any, index: int
) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(item, ToolCall):
        start: dict[str, Any] = {"toolUseId": item.call_id or f"tooluse_{position}",
                                 "name": item.name or ""}  # fmt: skip
        if writer.native and isinstance(item.metadata.get("type"), str):
            start["type"] = item.metadata["type"]
        out = [("contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": start}})]
        out.extend(
            _delta(index, {"toolUse": {"input": piece}})
            for piece in writer.pieces(arguments_text(item))
        )
        return out
    if item.type == "text":
        cited = [_delta(index, {"citation": _citation(writer, c)}) for c in item.citations]
        return cited + [_delta(index, {"text": t}) for t in writer.pieces(item.content or "")]
    if item.type == "thinking":
        out = [
            _delta(index, {"reasoningContent": {"text": piece}})
            for piece in writer.pieces(item.content or "")
        ]
        signature = writer.signature(item.options)
        if signature is not None:
            out.append(_delta(index, {"reasoningContent": {"signature": signature}}))
        return out
    block = own_block(writer, item)
    if block is not None and len(block) == 1:
        ((kind, body),) = block.items()
        if kind == "reasoningContent":
            return [_delta(index, {"reasoningContent": body})]
        if kind == "toolUse" and isinstance(body, dict):
            head = {k: v for k, v in body.items() if k != "input"}
            text = arguments_text(ToolCall(arguments=body.get("input") or {}))
            out = [("contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": head}})]
            out.extend(_delta(index, {"toolUse": {"input": p}}) for p in writer.pieces(text))
            return out
        if kind == "toolResult" and isinstance(body, dict):
            head = {k: v for k, v in body.items() if k != "content"}
            start = {"contentBlockIndex": index, "start": {"toolResult": head}}
            content = _delta(index, {"toolResult": body.get("content", [])})
            return [("contentBlockStart", start), content]
    writer.drop(position, part_kind(item), "a ConverseStream has no block for it")
    return []
