"""A Message as Gemini's `streamGenerateContent?alt=sse` streams it: SSE events with no
name, each a whole `GenerateContentResponse` holding the next piece of the answer.

Carried: text and thought parts (in pieces, a `thoughtSignature` Gemini issued on the
first piece of the part it signs: another provider's is left out), function calls
(whole: the Gemini API sends no argument deltas; an id the fold generated is left out, as
the API leaves it out), inline images and files, Gemini's
own opaque parts (executed code, its results, tool calls and responses), grounding and
URL-context metadata (the citations come back from them), usage, finish reason, response
id and model version.

Not carried: another provider's opaque blocks, URL-only images or files, and a call whose
arguments are not whole yet (a cut stream's) (a ReplayWarning, or an EncodeError with
`strict=True`); the split between two text parts
next to each other with no signature on the second (they join, as Gemini's would);
citations from another provider (Gemini cites through its grounding metadata); part
options other than the signature.
"""

from __future__ import annotations

from typing import Any

from ...message import ToolCall
from ..streaming import StreamWriter, own_block, part_kind, sse

_FINISH_WORD = {
    "stop": "STOP",
    "tool_use": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "refusal": "SAFETY",
    "pause": "STOP",
    "error": "OTHER",
    "other": "OTHER",
}
# Metadata the fold keeps from the candidate, by wire name.
_CANDIDATE_META = (
    ("groundingMetadata", "grounding_metadata"),
    ("urlContextMetadata", "url_context_metadata"),
    ("citationMetadata", "citation_metadata"),
    ("finishMessage", "finish_message"),
)
_STATUS_WORD = {
    400: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_event(code: int, message: str, status: str | None = None) -> bytes:
    """The error object Gemini sends in place of a chunk (`{"error": {code, message,
    status}}`), e.g. 503 UNAVAILABLE when the model is overloaded mid-stream."""
    word = status if status is not None else _STATUS_WORD.get(code, "UNKNOWN")
    return sse({"error": {"code": code, "message": message, "status": word}})


def _signature(writer: StreamWriter, options: dict[str, Any]) -> str | None:
    return writer.signature(options, "signature", "thought_signature", "thoughtSignature")


def to_stream_chunks(writer: StreamWriter) -> list[bytes]:
    """The message as Gemini's SSE stream: one GenerateContentResponse a chunk."""
    message = writer.message
    head: dict[str, Any] = {"modelVersion": writer.meta("model", writer.model)}
    response_id = message.metadata.get("id")
    if isinstance(response_id, str):
        head["responseId"] = response_id
    parts: list[dict[str, Any]] = []
    for position, item in enumerate(message.stream_order()):
        parts.extend(_parts(writer, position, item))
    # (A stream cut before any part still had its first chunk: never an empty stream.)
    chunks = [_chunk(head, [part]) for part in parts] or [_chunk(head, [])]
    if message.status in ("incomplete", "cancelled"):
        return [sse(chunk) for chunk in chunks]
    if message.status == "error" and not (writer.native and message.raw_stop_reason):
        out = [sse(chunk) for chunk in chunks]
        out.append(error_event(500, writer.error("", "the stream failed")[1]))
        return out
    last = _chunk(head, [])
    candidate = last["candidates"][0]
    candidate["finishReason"] = _finish_word(writer)
    if writer.native:
        for wire, name in _CANDIDATE_META:
            if message.metadata.get(name) is not None:
                candidate[wire] = message.metadata[name]
        if message.metadata.get("prompt_feedback") is not None:
            last["promptFeedback"] = message.metadata["prompt_feedback"]
    usage = _usage(writer)
    if usage is not None:
        last["usageMetadata"] = usage
    if chunks:
        # Gemini sends the finish reason with the last piece of the answer.
        candidate["content"] = chunks.pop()["candidates"][0]["content"]
    chunks.append(last)
    return [sse(chunk) for chunk in chunks]


def _chunk(head: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    return {"candidates": [candidate], **head}


def _finish_word(writer: StreamWriter) -> str:
    message = writer.message
    if writer.native and message.raw_stop_reason:
        return message.raw_stop_reason
    return _FINISH_WORD.get(message.stop_reason or "stop", "STOP")


def _usage(writer: StreamWriter) -> dict[str, Any] | None:
    raw = writer.native_raw_usage()
    if raw is not None:
        return raw
    usage = writer.message.usage
    if usage is None:
        return None
    thoughts = usage.reasoning_tokens or 0
    meta: dict[str, Any] = {
        "promptTokenCount": usage.input_tokens or 0,
        # Gemini counts the thoughts apart from the candidates; a Usage's output holds both.
        "candidatesTokenCount": max(0, (usage.output_tokens or 0) - thoughts),
        "totalTokenCount": usage.total_tokens,
    }
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    if usage.cache_read_tokens:
        meta["cachedContentTokenCount"] = usage.cache_read_tokens
    return meta


def _parts(writer: StreamWriter, position: int, item: Any) -> list[dict[str, Any]]:
    """The wire parts of one part of the message (a text part in pieces)."""
    if isinstance(item, ToolCall):
        call: dict[str, Any] = {"name": item.name or ""}
        if isinstance(item.arguments, dict):
            call["args"] = item.arguments
        elif item.arguments:
            writer.drop(position, part_kind(item), "Gemini sends a call's arguments whole")
            return []
        if item.call_id and item.metadata.get("generated_id") is not True:
            call["id"] = item.call_id
        part: dict[str, Any] = {"functionCall": call}
        signature = _signature(writer, item.metadata)
        if signature is not None:
            part["thoughtSignature"] = signature
        return [part]
    if item.type in ("text", "thinking"):
        signature = _signature(writer, item.options)
        pieces = writer.pieces(item.content or "")
        out: list[dict[str, Any]] = []
        for n, piece in enumerate(pieces):
            wire: dict[str, Any] = {"text": piece}
            if item.type == "thinking":
                wire["thought"] = True
            if n == 0 and signature is not None:
                wire["thoughtSignature"] = signature
            out.append(wire)
        return out
    if item.type in ("image", "file") and item.content is not None:
        blob: dict[str, Any] = {"data": item.content}
        media = item.options.get("media")
        if isinstance(media, str):
            blob["mimeType"] = media
        inline: dict[str, Any] = {"inlineData": blob}
        signature = _signature(writer, item.options)
        if signature is not None:
            inline["thoughtSignature"] = signature
        return [inline]
    block = own_block(writer, item)
    if block is None:
        writer.drop(position, part_kind(item), "a Gemini stream has no part for it")
        return []
    return [block]
