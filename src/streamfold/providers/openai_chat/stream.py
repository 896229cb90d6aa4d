"""A Message as OpenAI Chat Completions streams it (and the servers that speak it): SSE
`chat.completion.chunk`s, the usage in a last chunk of its own, then `data: [DONE]`.

Carried: text, refusals, thinking (`reasoning_content` as DeepSeek sends it, or OpenRouter's
`reasoning_details` when it has a signature, a summary flag or an id; its encrypted
reasoning as a `reasoning.encrypted` detail; a signature only from a Chat server), tool
calls (function and custom), web page citations (`url_citation` annotations), Groq's
executed tools, usage, finish reason, id, model, `created` and the chunk fields the fold
keeps (`system_fingerprint`, ...).

Not carried: the order of text against tool calls and refusals beyond what the wire can
say (adjacent text parts join into one, and the refusal is a text of its own, as a
server's would be); which text a citation belongs to (the message's annotations are one
list, on its first text, their spans in the whole text); images, files and another provider's
opaque blocks (a ReplayWarning, or an EncodeError with `strict=True`); citations without
a URL; part options but the thinking ones above; other tool call metadata.
"""

from __future__ import annotations

import time
from typing import Any

from ...message import ToolCall
from ...parts import Citation, ContentPart
from ..streaming import StreamWriter, arguments_text, own_block, part_kind, sse
from .decode import _META_FIELDS

_FINISH_WORD = {
    "stop": "stop",
    "tool_use": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
    "refusal": "stop",
    "error": "error",
}
_FINISH_WORDS = frozenset(
    {"stop", "length", "tool_calls", "content_filter", "function_call", "model_length", "error"}
)
# The thinking options a reasoning_details entry carries.
_DETAIL_OPTIONS = ("format", "id")


def error_event(error_type: str, message: str, code: str | None = None) -> bytes:
    """The error chunk OpenAI (and compatible servers: vLLM, OpenRouter) send mid-stream:
    `data: {"error": {...}}` in the API's error shape."""
    error = {"message": message, "type": error_type, "param": None, "code": code}
    return sse({"error": error})


def to_stream_chunks(writer: StreamWriter) -> list[bytes]:
    """The message as the Chat Completions SSE stream: one chunk an event."""
    message = writer.message
    head = _head(writer)
    chunks: list[dict[str, Any]] = [_chunk(head, {"role": "assistant", "content": ""})]
    calls = 0
    detail = 0
    # The message's text is one string on the wire (the SDK's `message.content`), and its
    # annotations one list: they go in one delta before the first text, their spans moved
    # into the whole text (the openai SDK's stream helper raises on a second delta of them).
    notes: list[dict[str, Any]] = []
    placed = False
    length = 0
    for position, item in enumerate(message.stream_order()):
        if isinstance(item, ContentPart) and item.type == "text":
            if item.options.get("refusal") is True:
                text = item.content or ""
                chunks.extend(_chunk(head, {"refusal": t}) for t in writer.pieces(text))
                continue
            if not placed:
                chunks.append(_chunk(head, {"annotations": notes}))  # (filled below)
                placed = True
            notes.extend(
                n for c in item.citations if (n := _annotation(writer, position, c, length))
            )
            text = item.content or ""
            length += len(text)
            chunks.extend(_chunk(head, {"content": t}) for t in writer.pieces(text))
        elif isinstance(item, ToolCall):
            chunks.extend(_call_chunks(writer, head, item, calls, position))
            calls += 1
        elif item.type == "thinking":
            chunks.extend(_thinking_chunks(writer, head, item, detail))
            detail += 1
        else:
            block = own_block(writer, item)
            kind = item.options.get("type")
            if block is not None and kind == "reasoning.encrypted":
                chunks.append(_chunk(head, {"reasoning_details": [block]}))
            elif block is not None and kind == "executed_tool":
                chunks.append(_chunk(head, {"executed_tools": [block]}))
            else:
                reason = "a Chat Completions stream has no field for it"
                writer.drop(position, part_kind(item), reason)
    chunks = [c for c in chunks if c["choices"][0]["delta"] != {"annotations": []}]
    out = [sse(chunk) for chunk in chunks]
    if message.status in ("incomplete", "cancelled"):
        return out  # cut: no finish_reason, no [DONE]
    if message.status != "error" or (writer.native and message.raw_stop_reason):
        extra: dict[str, Any] = {}
        native_finish = message.metadata.get("native_finish_reason")
        if writer.native and native_finish is not None:
            extra["native_finish_reason"] = native_finish
        out.append(sse(_chunk(head, {}, _finish_word(writer), **extra)))
    usage = _usage(writer)
    if usage is not None:
        out.append(sse({**head, "choices": [], "usage": usage}))
    if message.status == "error":
        raw_error = message.metadata.get("provider_error")
        if writer.native and isinstance(raw_error, dict):
            out.append(sse({"error": raw_error}))  # the server's own error object
        else:
            out.append(error_event(*writer.error("server_error", "the stream failed")))
        return out
    out.append(b"data: [DONE]\n\n")
    return out


def _head(writer: StreamWriter) -> dict[str, Any]:
    message = writer.message
    created = message.metadata.get("created")
    head: dict[str, Any] = {
        "id": writer.meta("id", "chatcmpl-streamfold"),
        "object": "chat.completion.chunk",
        "created": created if isinstance(created, int) else int(time.time()),
        "model": writer.meta("model", writer.model),
    }
    if writer.native:
        for name in _META_FIELDS:
            if message.metadata.get(name) is not None:
                head[name] = message.metadata[name]
        upstream = message.metadata.get("upstream_provider")
        if isinstance(upstream, str):
            head["provider"] = upstream  # OpenRouter's name for the upstream provider
        if isinstance(message.metadata.get("x_groq"), dict):
            head["x_groq"] = message.metadata["x_groq"]
    return head


def _chunk(
    head: dict[str, Any], delta: dict[str, Any], finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, **extra}
    return {**head, "choices": [choice]}


def _finish_word(writer: StreamWriter) -> str:
    message = writer.message
    if writer.native and message.raw_stop_reason in _FINISH_WORDS:
        return str(message.raw_stop_reason)
    return _FINISH_WORD.get(message.stop_reason or "stop", "stop")


def _usage(writer: StreamWriter) -> dict[str, Any] | None:
    raw = writer.native_raw_usage()
    if raw is not None:
        return raw
    usage = writer.message.usage
    if usage is None:
        return None
    prompt, completion = usage.input_tokens or 0, usage.output_tokens or 0
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if usage.cache_read_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
    if usage.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


def _call_chunks(
    writer: StreamWriter, head: dict[str, Any], call: ToolCall, index: int, position: int
) -> list[dict[str, Any]]:
    call_id = call.call_id or f"call_{position}"
    text = arguments_text(call)
    if call.metadata.get("type") == "custom_tool_call":
        raw = call.arguments.get("input") if isinstance(call.arguments, dict) else call.arguments
        custom = {"name": call.name or "", "input": raw if isinstance(raw, str) else text}
        fragment = {"index": index, "id": call_id, "type": "custom", "custom": custom}
        return [_chunk(head, {"tool_calls": [fragment]})]
    first = {"index": index, "id": call_id, "type": "function",
             "function": {"name": call.name or "", "arguments": ""}}  # fmt: skip
    out = [_chunk(head, {"tool_calls": [first]})]
    out.extend(
        _chunk(head, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        for piece in writer.pieces(text)
        if piece
    )
    return out


def _thinking_chunks(
    writer: StreamWriter, head: dict[str, Any], part: ContentPart, index: int
) -> list[dict[str, Any]]:
    options = part.options
    signature = writer.signature(options)
    signed = signature is not None
    extra = {k: options[k] for k in _DETAIL_OPTIONS if isinstance(options.get(k), str)}
    summary = options.get("summary") is True
    if not (signed or extra or summary):
        return [_chunk(head, {"reasoning_content": t}) for t in writer.pieces(part.content or "")]
    kind, field = ("reasoning.summary", "summary") if summary else ("reasoning.text", "text")
    details = [
        {"type": kind, field: t, "index": index, **extra}
        for t in writer.pieces(part.content or "")
        if t
    ]
    if signed:
        details.append({"type": "reasoning.text", "text": "", "signature": signature,
                        "index": index, **extra})  # fmt: skip
    return [_chunk(head, {"reasoning_details": [d]}) for d in details]


def _annotation(
    writer: StreamWriter, position: int, citation: Citation, shift: int
) -> dict[str, Any] | None:
    source = citation.source
    if source is None or not source.url:
        writer.drop(position, "a citation", "a url_citation needs the page's URL")
        return None
    body: dict[str, Any] = {"url": source.url, "title": source.title or ""}
    if citation.start_index is not None:
        body["start_index"] = citation.start_index + shift
    if citation.end_index is not None:
        body["end_index"] = citation.end_index + shift
    if writer.native:
        body.update(citation.metadata)
    return {"type": "url_citation", "url_citation": body}
