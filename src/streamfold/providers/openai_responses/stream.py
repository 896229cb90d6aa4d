"""A Message as the OpenAI Responses API streams it: SSE events named by their `type`, with
`sequence_number`s, from `response.created` to `response.completed` (`.incomplete`,
`.failed`).

Carried: text and refusals (message items, their ids and `phase`, annotations, logprobs),
reasoning (summary and raw `reasoning_text` parts, encrypted content, item ids), function
and custom tool calls (arguments in deltas), the items a caller runs (computer, shell,
apply_patch), the built-in tools' items (web search, code interpreter, MCP, image
generation: opaque blocks, from Responses itself), usage, status and the response fields
the fold keeps (id, model, created_at, service_tier...).

Not carried (a ReplayWarning, or an EncodeError with `strict=True`): images, files and
another provider's opaque blocks. Left out without a word: citations without a web page
URL or an annotation of their own; signatures of other providers; part options other
than the ones above; the stop reason beyond what the response status says (the fold
reads `tool_use` after a call, `refusal` after a refusal, else `stop`).
"""

from __future__ import annotations

import time
from typing import Any

from ...message import ToolCall
from ...parts import ContentPart, utterance, utterance_inferred
from ..streaming import StreamWriter, arguments_text, own_block, part_kind, sse
from .decode import _RESPONSE_METADATA, CLIENT_CALL_INPUTS
from .encode import call_item

_STATUS = {
    "complete": "completed",
    "length": "incomplete",
    "content_filtered": "incomplete",
    "error": "failed",
    "cancelled": "cancelled",
    "incomplete": "in_progress",
}
_FINAL_EVENT = {
    "completed": "response.completed",
    "cancelled": "response.completed",  # the decoder reads the status from the response
    "incomplete": "response.incomplete",
    "failed": "response.failed",
}


def error_event(code: str, message: str, sequence_number: int = 0) -> bytes:
    """The top-level `error` event (`ResponseErrorEvent`: code, message, param)."""
    event = {"type": "error", "sequence_number": sequence_number, "code": code,
             "message": message, "param": None}  # fmt: skip
    return sse(event, "error")


def failed_event(
    code: str, message: str, *, response_id: str = "resp_streamfold", sequence_number: int = 0
) -> bytes:
    """`response.failed`: the whole response (every field the SDK's `Response` requires),
    status failed, its `error` saying why."""
    response = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "model": "streamfold",
        "status": "failed",
        "output": [],
        "error": {"code": code, "message": message},
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
    }
    event = {"type": "response.failed", "sequence_number": sequence_number, "response": response}
    return sse(event, "response.failed")


class _Events:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, **fields: Any) -> None:
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})


def to_stream_chunks(writer: StreamWriter) -> list[bytes]:
    """The message as the Responses SSE stream: one event a chunk."""
    message = writer.message
    out = _Events()
    body = _response(writer, [], "in_progress")
    out.add("response.created", response=body)
    out.add("response.in_progress", response=body)
    groups = _groups(writer)
    for index, (kind, parts) in enumerate(groups):
        _item_events(writer, out, index, kind, parts)
    status = _STATUS[message.status]
    final = _FINAL_EVENT.get(status)
    said = message.metadata.get("response_status")
    if status == "failed" and writer.native and said not in (None, "failed"):
        # The stream ended in the top-level `error` event, not in a failed response.
        code, text = writer.error("server_error", "response failed")
        out.add("error", code=code, message=text, param=None)
    elif final is not None:
        out.add(final, response=_response(writer, out.items, status))
    return [sse(event, str(event["type"])) for event in out.events]


Group = tuple[str, list[tuple[int, ContentPart | ToolCall]]]


def _groups(writer: StreamWriter) -> list[Group]:
    """The parts in output items: consecutive text parts (or thinking parts) of one id go
    in one item; every call and opaque block is an item of its own."""
    groups: list[Group] = []
    for position, item in enumerate(writer.message.stream_order()):
        if isinstance(item, ToolCall):
            groups.append(("call", [(position, item)]))
            continue
        if item.type in ("text", "thinking"):
            kind = "message" if item.type == "text" else "reasoning"
            item_id = item.options.get("id") if writer.native else None
            if groups and groups[-1][0] == kind and item_id is not None:
                last = groups[-1][1][-1][1]
                if isinstance(last, ContentPart) and last.options.get("id") == item_id:
                    groups[-1][1].append((position, item))
                    continue
            groups.append((kind, [(position, item)]))
            continue
        if own_block(writer, item) is None:
            writer.drop(position, part_kind(item), "a Responses stream has no item for it")
            continue
        groups.append(("block", [(position, item)]))
    return groups


def _response(writer: StreamWriter, output: list[dict[str, Any]], status: str) -> dict[str, Any]:
    message = writer.message
    created = message.metadata.get("created_at")
    body: dict[str, Any] = {
        "id": writer.meta("id", "resp_streamfold"),
        "object": "response",
        "created_at": created if isinstance(created, int) else int(time.time()),
        "model": writer.meta("model", writer.model),
        "status": status,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
    }
    if writer.native:
        for key in _RESPONSE_METADATA:
            if key not in ("id", "model", "created_at") and message.metadata.get(key) is not None:
                body[key] = message.metadata[key]
    if status in ("in_progress",):
        return body
    if message.status == "length":
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    elif message.status == "content_filtered":
        body["incomplete_details"] = {"reason": "content_filter"}
    if status == "failed":
        code, text = writer.error("server_error", "response failed")
        body["error"] = {"code": code, "message": text}
    usage = _usage(writer)
    if usage is not None:
        body["usage"] = usage
    return body


def _usage(writer: StreamWriter) -> dict[str, Any] | None:
    raw = writer.native_raw_usage()
    if raw is not None:
        return raw
    usage = writer.message.usage
    if usage is None:
        return None
    inputs: dict[str, Any] = {"cached_tokens": usage.cache_read_tokens or 0}
    if usage.cache_write_tokens is not None:
        inputs["cache_write_tokens"] = usage.cache_write_tokens
    return {
        "input_tokens": usage.input_tokens or 0,
        "input_tokens_details": inputs,
        "output_tokens": usage.output_tokens or 0,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
        "total_tokens": usage.total_tokens,
    }


def _item_events(
    writer: StreamWriter,
    out: _Events,
    index: int,
    kind: str,
    parts: list[tuple[int, ContentPart | ToolCall]],
) -> None:
    position, first = parts[0]
    if isinstance(first, ToolCall):
        _call_events(writer, out, index, position, first)
        return
    if kind == "block":
        block = own_block(writer, first)
        assert block is not None  # (checked by _groups)
        out.add("response.output_item.added", output_index=index, item=block)
        out.add("response.output_item.done", output_index=index, item=block)
        out.items.append(block)
        return
    item_id = first.options.get("id") if writer.native else None
    if not isinstance(item_id, str):
        item_id = f"{'msg' if kind == 'message' else 'rs'}_{position}"
    if kind == "message":
        _message_events(writer, out, index, item_id, [p for _, p in parts])
    else:
        _reasoning_events(writer, out, index, item_id, [p for _, p in parts])


def _message_events(
    writer: StreamWriter, out: _Events, index: int, item_id: str, parts: list[Any]
) -> None:
    item: dict[str, Any] = {"id": item_id, "type": "message", "status": "in_progress",
                            "role": "assistant", "content": []}  # fmt: skip
    phase = _phase(writer, parts)
    if phase is not None:
        item["phase"] = phase
    out.add("response.output_item.added", output_index=index, item=dict(item))
    content: list[dict[str, Any]] = []
    where = {"item_id": item_id, "output_index": index}
    for j, part in enumerate(parts):
        text = part.content or ""
        if part.options.get("refusal") is True:
            out.add("response.content_part.added", **where, content_index=j,
                    part={"type": "refusal", "refusal": ""})  # fmt: skip
            for piece in writer.pieces(text):
                out.add("response.refusal.delta", **where, content_index=j, delta=piece)
            out.add("response.refusal.done", **where, content_index=j, refusal=text)
            done: dict[str, Any] = {"type": "refusal", "refusal": text}
        else:
            out.add("response.content_part.added", **where, content_index=j,
                    part={"type": "output_text", "text": "", "annotations": [],
                          "logprobs": []})  # fmt: skip
            logprobs = part.options.get("logprobs")
            logprobs = logprobs if isinstance(logprobs, list) and writer.native else []
            for n, piece in enumerate(writer.pieces(text)):
                out.add("response.output_text.delta", **where, content_index=j, delta=piece,
                        logprobs=logprobs if n == 0 else [])  # fmt: skip
            notes = _annotations(writer, part)
            for n, note in enumerate(notes):
                out.add("response.output_text.annotation.added", **where, content_index=j,
                        annotation_index=n, annotation=note)  # fmt: skip
            out.add("response.output_text.done", **where, content_index=j, text=text,
                    logprobs=logprobs)  # fmt: skip
            done = {"type": "output_text", "text": text, "annotations": notes,
                    "logprobs": logprobs}  # fmt: skip
        out.add("response.content_part.done", **where, content_index=j, part=done)
        content.append(done)
    final = {**item, "status": "completed", "content": content}
    out.add("response.output_item.done", output_index=index, item=final)
    out.items.append(final)


def _phase(writer: StreamWriter, parts: list[ContentPart]) -> str | None:
    """Responses' own narration / answer marker, when one was said (never an inferred one)."""
    for part in parts:
        marker = utterance(part)
        if marker is not None and not utterance_inferred(part):
            return "commentary" if marker == "narration" else "final_answer"
    return None


def _annotations(writer: StreamWriter, part: ContentPart) -> list[dict[str, Any]]:
    notes: list[dict[str, Any]] = []
    for citation in part.citations:
        own = citation.metadata.get("annotation")
        if writer.native and isinstance(own, dict):
            notes.append(own)
            continue
        source = citation.source
        if source is not None and source.url:
            notes.append({"type": "url_citation", "url": source.url, "title": source.title or "",
                          "start_index": citation.start_index or 0,
                          "end_index": citation.end_index or 0})  # fmt: skip
    return notes


def _reasoning_events(
    writer: StreamWriter, out: _Events, index: int, item_id: str, parts: list[Any]
) -> None:
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
    out.add("response.output_item.added", output_index=index, item=dict(item))
    where = {"item_id": item_id, "output_index": index}
    summary: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    encrypted: str | None = None
    for part in parts:
        secret = part.options.get("encrypted_content")
        if isinstance(secret, str) and writer.native:
            encrypted = secret
        text = part.content or ""
        if not text:
            continue
        if part.options.get("type") == "reasoning_text" and writer.native:
            j = len(content)
            out.add("response.content_part.added", **where, content_index=j,
                    part={"type": "reasoning_text", "text": ""})  # fmt: skip
            for piece in writer.pieces(text):
                out.add("response.reasoning_text.delta", **where, content_index=j, delta=piece)
            out.add("response.reasoning_text.done", **where, content_index=j, text=text)
            done = {"type": "reasoning_text", "text": text}
            out.add("response.content_part.done", **where, content_index=j, part=done)
            content.append(done)
        else:
            j = len(summary)
            out.add("response.reasoning_summary_part.added", **where, summary_index=j,
                    part={"type": "summary_text", "text": ""})  # fmt: skip
            for piece in writer.pieces(text):
                out.add("response.reasoning_summary_text.delta", **where, summary_index=j,
                        delta=piece)  # fmt: skip
            out.add("response.reasoning_summary_text.done", **where, summary_index=j, text=text)
            done = {"type": "summary_text", "text": text}
            out.add("response.reasoning_summary_part.done", **where, summary_index=j, part=done)
            summary.append(done)
    final: dict[str, Any] = {**item, "summary": summary}
    if content:
        final["content"] = content
    if encrypted is not None:
        final["encrypted_content"] = encrypted
    out.add("response.output_item.done", output_index=index, item=final)
    out.items.append(final)


def _call_events(
    writer: StreamWriter, out: _Events, index: int, position: int, call: ToolCall
) -> None:
    kind = call.metadata.get("type")
    if kind in CLIENT_CALL_INPUTS:
        item = call_item(call, foreign=not writer.native)
        item.setdefault("id", f"cu_{position}")
        out.add("response.output_item.added", output_index=index, item=item)
        out.add("response.output_item.done", output_index=index, item=item)
        out.items.append(item)
        return
    item_id = call.metadata.get("item_id") if writer.native else None
    if not isinstance(item_id, str):
        item_id = f"fc_{position}"
    call_id = call.call_id or f"call_{position}"
    where = {"item_id": item_id, "output_index": index}
    if kind == "custom_tool_call":
        raw = call.arguments.get("input") if isinstance(call.arguments, dict) else call.arguments
        text = raw if isinstance(raw, str) else arguments_text(call)
        start = {"id": item_id, "type": "custom_tool_call", "status": "in_progress",
                 "call_id": call_id, "name": call.name or "", "input": ""}  # fmt: skip
        out.add("response.output_item.added", output_index=index, item=start)
        for piece in writer.pieces(text):
            out.add("response.custom_tool_call_input.delta", **where, delta=piece)
        out.add("response.custom_tool_call_input.done", **where, input=text)
        final = {**start, "status": "completed", "input": text}
    else:
        text = arguments_text(call)
        start = {"id": item_id, "type": "function_call", "status": "in_progress",
                 "call_id": call_id, "name": call.name or "", "arguments": ""}  # fmt: skip
        out.add("response.output_item.added", output_index=index, item=start)
        for piece in writer.pieces(text):
            out.add("response.function_call_arguments.delta", **where, delta=piece)
        out.add("response.function_call_arguments.done", **where, arguments=text)
        final = {**start, "status": "completed", "arguments": text}
    out.add("response.output_item.done", output_index=index, item=final)
    out.items.append(final)
