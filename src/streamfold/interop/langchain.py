"""Messages as LangChain's `AIMessage`, and back (`streamfold[langchain]`).

`to_ai_message(message)` gives an `AIMessage` (validated by its pydantic model) whose
content is LangChain's standard content blocks, in the streamed order:
- text: a `text` block (the Responses item id as its `id`), its citations as `citation`
  annotations (url, title, offsets, cited text; streamfold's whole citation in their
  `extras`), its other options (the narration / answer marker among them) in `extras`;
- thinking: a `reasoning` block, its signature and other options in `extras`;
- tool calls: `tool_call` blocks, and the same calls in `tool_calls` (the call's metadata
  in the block's `extras`);
- tools the provider ran: `server_tool_call` and `server_tool_result` blocks; any other
  opaque block (redacted thinking, compaction...) a `non_standard` block. The provider's
  block is in `extras` (or the `value`), so it goes back whole.
Usage is `usage_metadata` (cache reads and writes, reasoning tokens in its details); the
provider's finish reason is `response_metadata["finish_reason"]`, the model its
`model_name`, the message id the AIMessage's `id`; the rest (status, stop reason, raw
usage, metadata) is in `response_metadata["streamfold"]`.

`from_ai_message(...)` reads an AIMessage (or its dict) through its `content_blocks`, so
one a LangChain chat model made (OpenAI's or Anthropic's native content) reads too; text
without a marker is marked by the fold's rule.

What a round trip (`from_ai_message(to_ai_message(message))`) loses:
- a usage count that was not reported reads 0, and the usage is a total (`cumulative`);
- a tool call without an id gets `call_<n>`.
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.messages import AIMessage
except ImportError:  # pragma: no cover - depends on the installed extras
    from ._common import missing_library

    raise missing_library("langchain", "langchain-core", "langchain") from None

from pydantic import ValidationError

from ..errors import InteropError
from ..message import Message, Status, StopReason, ToolCall, Usage
from ..parts import Citation, ContentPart
from ..providers.anthropic.decode import _STOP as ANTHROPIC_STOP
from ..providers.openai_chat.decode import _FINISH as CHAT_FINISH
from ._common import (
    build_message,
    check_message,
    described,
    dict_field,
    is_tool_activity,
    read_object,
    saved_end,
)

__all__ = ["from_ai_message", "to_ai_message"]

_OURS = "response_metadata['streamfold']"

# What LangChain's own code raises on content it did not check (besides ValidationError).
_LANGCHAIN_ERRORS = (TypeError, ValueError, KeyError, AttributeError)

# A provider's finish reason as LangChain's chat models pass it on (OpenAI's or Anthropic's).
_FINISH: dict[str, tuple[StopReason, Status]] = {**CHAT_FINISH, **ANTHROPIC_STOP}


def to_ai_message(message: Message) -> AIMessage:
    """The Message as a LangChain `AIMessage` (see the module docstring)."""
    message = check_message("to_ai_message", message)
    blocks: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for i, item in enumerate(message.stream_order()):
        if isinstance(item, ToolCall):
            call = {
                "type": "tool_call",
                "id": item.call_id or f"call_{i}",
                "name": item.name or "",
                "args": item.arguments if isinstance(item.arguments, dict) else {},
            }
            calls.append(dict(call))
            if item.metadata:
                call["extras"] = dict(item.metadata)
            blocks.append(call)
        else:
            blocks.append(_block(item))
    usage = message.usage
    meta = {k: v for k, v in message.metadata.items() if k not in ("id", "model")}
    response_metadata: dict[str, Any] = {
        "finish_reason": message.raw_stop_reason,
        "streamfold": {
            "status": message.status,
            "stop_reason": message.stop_reason,
            "usage": None if usage is None else usage.raw,
            "metadata": meta,
        },
    }
    model = message.metadata.get("model")
    if isinstance(model, str):
        response_metadata["model_name"] = model
    data: dict[str, Any] = {
        "content": blocks,
        "tool_calls": calls,
        "response_metadata": response_metadata,
    }
    message_id = message.metadata.get("id")
    if isinstance(message_id, str):
        data["id"] = message_id
    if usage is not None:
        data["usage_metadata"] = _usage_metadata(usage)
    try:
        return AIMessage.model_validate(data)
    except ValidationError as exc:  # a value LangChain's model refuses
        raise InteropError("to_ai_message", "a Message LangChain can hold", str(exc)) from None


def _usage_metadata(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
        "total_tokens": usage.total_tokens,
    }
    inputs = {"cache_read": usage.cache_read_tokens, "cache_creation": usage.cache_write_tokens}
    details_in = {k: v for k, v in inputs.items() if v is not None}
    if details_in:
        out["input_token_details"] = details_in
    if usage.reasoning_tokens is not None:
        out["output_token_details"] = {"reasoning": usage.reasoning_tokens}
    return out


def _citation(citation: Citation) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "citation"}
    source = citation.source
    for key, value in (
        ("url", source.url if source else None),
        ("title", source.title if source else None),
        ("start_index", citation.start_index),
        ("end_index", citation.end_index),
        ("cited_text", citation.cited_text),
    ):
        if value is not None:
            out[key] = value
    out["extras"] = {"streamfold": citation.model_dump(mode="json")}
    return out


def _block(part: ContentPart) -> dict[str, Any]:
    options = dict(part.options)
    if part.type == "unsupported":
        block = options.get("block")
        block = block if isinstance(block, dict) else {}
        if is_tool_activity(part):
            name, args = block.get("name"), block.get("input", block.get("arguments"))
            return {
                "type": "server_tool_call",
                "id": str(block.get("id", options.get("id", ""))),
                "name": name if isinstance(name, str) else str(options.get("type")),
                "args": args if isinstance(args, dict) else {},
                "extras": options,
            }
        result_of = block.get("tool_use_id")
        if isinstance(result_of, str):
            failed = isinstance(block.get("content"), dict) and "error_code" in block["content"]
            return {
                "type": "server_tool_result",
                "tool_call_id": result_of,
                "status": "error" if failed else "success",
                "output": block.get("content"),
                "extras": options,
            }
        return {"type": "non_standard", "value": options}
    if part.type not in ("text", "thinking"):
        return {"type": "non_standard", "value": {"part": part.model_dump(mode="json")}}
    out: dict[str, Any]
    if part.type == "thinking":
        out = {"type": "reasoning", "reasoning": part.content or ""}
    else:
        out = {"type": "text", "text": part.content or ""}
        if part.citations:
            out["annotations"] = [_citation(c) for c in part.citations]
    if isinstance(options.get("id"), str):
        out["id"] = options.pop("id")
    if options:
        out["extras"] = options
    return out


def from_ai_message(message: AIMessage | dict[str, Any]) -> Message:
    """A LangChain `AIMessage` (or its dict) as a Message."""
    message = read_object(
        "from_ai_message",
        "a LangChain AIMessage",
        AIMessage,
        message,
        AIMessage.model_validate,
        _LANGCHAIN_ERRORS,
    )
    response = message.response_metadata or {}
    ours = dict_field("from_ai_message", response.get("streamfold"), _OURS)
    raw_stop = response.get("finish_reason", response.get("stop_reason"))
    raw_stop = raw_stop if isinstance(raw_stop, str) else None
    unknown: tuple[StopReason | None, Status] = (None, "complete")
    stop_read, status_read = _FINISH.get(raw_stop or "", unknown)
    status, stop = saved_end("from_ai_message", ours, status_read, stop_read)
    metadata = dict_field("from_ai_message", ours.get("metadata"), f"{_OURS}['metadata']")
    if message.id is not None:
        metadata["id"] = message.id
    if isinstance(response.get("model_name"), str):
        metadata["model"] = response["model_name"]
    try:
        blocks = message.content_blocks
    except _LANGCHAIN_ERRORS as exc:
        # LangChain's own reading of content it did not check when the message was built.
        raise InteropError(
            "from_ai_message", "content LangChain can read as content blocks", f"{exc!r}"[:200]
        ) from None
    order: list[ContentPart | ToolCall] = []
    for block in blocks:
        item = _item(dict(block))
        if item is not None:
            order.append(item)
    return build_message(
        order,
        status=status,
        stop_reason=stop,
        raw_stop_reason=raw_stop,
        usage=_usage(message, ours),
        metadata=metadata,
    )


def _usage(message: AIMessage, ours: dict[str, Any]) -> Usage | None:
    usage = message.usage_metadata
    if usage is None:
        return None
    inputs: dict[str, Any] = dict(usage.get("input_token_details") or {})
    outputs: dict[str, Any] = dict(usage.get("output_token_details") or {})
    raw = ours.get("usage")
    return Usage(
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cache_read_tokens=inputs.get("cache_read"),
        cache_write_tokens=inputs.get("cache_creation"),
        reasoning_tokens=outputs.get("reasoning"),
        raw=raw if isinstance(raw, dict) else {},
        cumulative=True,
    )


def _item(block: dict[str, Any]) -> ContentPart | ToolCall | None:
    kind = block.get("type")
    extras = dict_field("from_ai_message", block.get("extras"), f"a {kind} block's extras")
    if kind == "non_standard":
        value = block.get("value")
        if isinstance(value, dict) and isinstance(value.get("part"), dict):
            return ContentPart.model_validate(value["part"])
        extras = dict(value) if isinstance(value, dict) else {}
    if isinstance(extras.get("block"), dict) and isinstance(extras.get("type"), str):
        return ContentPart(type="unsupported", options=extras)  # a provider's block, whole
    if kind == "tool_call":
        return ToolCall(
            call_id=block.get("id"),
            name=block.get("name"),
            arguments=block.get("args") or {},
            status="complete",
            metadata=extras,
        )
    if kind not in ("text", "reasoning"):
        return None  # a block no provider stream carries (media, a server tool's own form)
    if isinstance(block.get("id"), str):
        extras["id"] = block["id"]
    if kind == "reasoning":
        return ContentPart(type="thinking", content=block.get("reasoning", ""), options=extras)
    annotations = block.get("annotations", [])
    if not isinstance(annotations, list):
        raise InteropError("from_ai_message", "a text block's annotations as a list",
                           described(annotations))  # fmt: skip
    citations = [_from_citation(a) for a in annotations]
    return ContentPart(
        type="text",
        content=block.get("text", ""),
        options=extras,
        citations=[c for c in citations if c is not None],
    )


def _from_citation(annotation: Any) -> Citation | None:
    if not isinstance(annotation, dict) or annotation.get("type") != "citation":
        return None
    extras = annotation.get("extras")
    if isinstance(extras, dict) and isinstance(extras.get("streamfold"), dict):
        return Citation.model_validate(extras["streamfold"])
    url, title = annotation.get("url"), annotation.get("title")
    return Citation.model_validate(
        {
            "cited_text": annotation.get("cited_text"),
            "source": {"type": "web", "url": url, "title": title} if url or title else None,
            "start_index": annotation.get("start_index"),
            "end_index": annotation.get("end_index"),
        }
    )
