"""A Message as Ollama's `/api/chat` streams it: NDJSON lines, the text in
`message.content`, the reasoning in `message.thinking`, tool calls whole in
`message.tool_calls`, and a last line with `done: true`, the `done_reason`, the token counts
and the timings.

Not carried (a ReplayWarning, or an EncodeError with `strict=True`): images, files and
opaque blocks, a tool call whose arguments are not a JSON object. Left out without a word:
signatures and every other part option, citations, cache and reasoning token counts, an
id the fold generated for a call (Ollama's calls had none), the split between two parts
of one kind next to each other (they join, as Ollama's would).
"""

from __future__ import annotations

import time
from typing import Any

from ...message import ToolCall
from ..streaming import StreamWriter, ndjson, part_kind
from .decode import _DURATIONS

_DONE_WORD = {"stop": "stop", "tool_use": "stop", "length": "length"}


def error_event(message: str) -> bytes:
    """The line Ollama sends when the generation fails mid-stream: `{"error": "..."}`."""
    return ndjson({"error": message})


def to_stream_chunks(writer: StreamWriter) -> list[bytes]:
    """The message as Ollama's NDJSON stream: one line a chunk."""
    message = writer.message
    created = writer.meta(
        "created_at", time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())
    )
    head = {"model": writer.meta("model", writer.model), "created_at": created}
    lines: list[dict[str, Any]] = []
    for position, item in enumerate(message.stream_order()):
        if isinstance(item, ToolCall):
            if not isinstance(item.arguments, dict):
                writer.drop(position, part_kind(item), "Ollama sends arguments as a JSON object")
                continue
            function: dict[str, Any] = {"name": item.name or "", "arguments": item.arguments}
            if isinstance(item.metadata.get("index"), int):
                function["index"] = item.metadata["index"]
            call: dict[str, Any] = {"function": function}
            if item.call_id and item.metadata.get("generated_id") is not True:
                call["id"] = item.call_id
            body = {"role": "assistant", "content": "", "tool_calls": [call]}
            lines.append({**head, "message": body, "done": False})
        elif item.type in ("text", "thinking"):
            field = "content" if item.type == "text" else "thinking"
            for piece in writer.pieces(item.content or ""):
                body = {"role": "assistant", "content": ""}
                body[field] = piece
                lines.append({**head, "message": body, "done": False})
        else:
            writer.drop(position, part_kind(item), "an Ollama stream has no field for it")
    if not lines:  # a stream cut before any text still had its first line
        lines.append({**head, "message": {"role": "assistant", "content": ""}, "done": False})
    out = [ndjson(line) for line in lines]
    if message.status == "error":
        out.append(error_event(writer.error("", "the generation failed")[1]))
        return out
    if message.status in ("incomplete", "cancelled"):
        return out
    last: dict[str, Any] = {**head, "message": {"role": "assistant", "content": ""}, "done": True}
    if writer.native and message.raw_stop_reason:
        last["done_reason"] = message.raw_stop_reason
    else:
        last["done_reason"] = _DONE_WORD.get(message.stop_reason or "stop", "stop")
    if writer.native:
        last.update({k: message.metadata[k] for k in _DURATIONS if k in message.metadata})
    usage = message.usage
    if usage is not None:
        if usage.input_tokens is not None:
            last["prompt_eval_count"] = usage.input_tokens
        if usage.output_tokens is not None:
            last["eval_count"] = usage.output_tokens
    out.append(ndjson(last))
    return out
