"""Messages as pydantic-ai's `ModelResponse`, and back (`streamfold[pydantic-ai]`).

`to_model_response(message)` gives a `ModelResponse` validated by pydantic-ai's own type
adapter, its parts in the streamed order:
- text: a `TextPart` (the Responses item id as its `id`, its citations as pydantic-ai's
  `citations`: the source, the cited text as an excerpt, the span as a content anchor);
  its options, with the narration / answer marker (`utterance`, and
  `utterance_inferred` when streamfold inferred it), in `provider_details` (and the
  citations whole, as streamfold's JSON, under `citations`);
- thinking: a `ThinkingPart` with its `signature` and item `id`, other options in
  `provider_details`;
- tool calls: `ToolCallPart` (arguments as a dict; the call's metadata in
  `provider_details`);
- tools the provider ran (server tools, built-in items, executed code): a
  `NativeToolCallPart` (pydantic-ai's built-in tool call; the input as `args`) and its
  result a `NativeToolReturnPart` (named after the call it answers); redacted thinking
  a `ThinkingPart` holding the data as its signature, compaction a `CompactionPart`;
  any other opaque block a
  `NativeToolCallPart` named after its type. The block itself is in `provider_details`,
  so it goes back whole;
- usage as `RequestUsage` (reasoning tokens as `output_reasoning_tokens`), the finish
  reason as pydantic-ai names it, the provider's own in `provider_details["finish_reason"]`,
  and the status as `state`.
The rest of the Message (its status and stop reason, raw usage and metadata) goes in
`provider_details["streamfold"]`. `from_model_response(...)` reads a `ModelResponse` (or
its JSON dict) back; text without a marker is marked by the fold's rule.

What a round trip (`from_model_response(to_model_response(message))`) loses:
- a usage count that was not reported reads 0, and the usage is a total (`cumulative`);
- a tool call without an id gets pydantic-ai's generated one.
"""

from __future__ import annotations

from typing import Any

try:
    from pydantic_ai.messages import ModelResponse
except ImportError:  # pragma: no cover - depends on the installed extras
    from ._common import missing_library

    raise missing_library("pydantic_ai", "pydantic-ai-slim", "pydantic-ai") from None

from pydantic import TypeAdapter

from ..message import Message, Status, StopReason, ToolCall, Usage
from ..parts import Citation, ContentPart
from ._common import (
    build_message,
    check_message,
    dict_field,
    is_tool_activity,
    read_object,
    saved_end,
)

__all__ = ["from_model_response", "to_model_response"]

_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)

_FINISH: dict[str, str] = {
    "stop": "stop",
    "tool_use": "tool_call",
    "length": "length",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "error": "error",
}
_FINISH_BACK: dict[str, tuple[Status, StopReason]] = {
    "stop": ("complete", "stop"),
    "tool_call": ("complete", "tool_use"),
    "length": ("length", "length"),
    "content_filter": ("content_filtered", "content_filter"),
    "error": ("error", "error"),
}
_STATE = {"incomplete": "incomplete", "cancelled": "interrupted", "error": "interrupted"}

_NAME = "a pydantic-ai ModelResponse"
_OURS = "provider_details['streamfold']"

# Message metadata that has a field of its own on a ModelResponse.
_OWN_FIELDS = ("provider", "model", "id")


def to_model_response(message: Message) -> ModelResponse:
    """The Message as a pydantic-ai `ModelResponse` (see the module docstring)."""
    message = check_message("to_model_response", message)
    provider = message.metadata.get("provider")
    provider_name = provider if isinstance(provider, str) else None
    names: dict[str, str] = {}  # a built-in tool call's id -> its tool name, for its return
    parts = [_part(item, provider_name, names) for item in message.stream_order()]
    usage = message.usage
    meta = {k: v for k, v in message.metadata.items() if k not in _OWN_FIELDS}
    data: dict[str, Any] = {
        "kind": "response",
        "parts": parts,
        "model_name": _str(message.metadata.get("model")),
        "provider_name": provider_name,
        "provider_response_id": _str(message.metadata.get("id")),
        "finish_reason": _FINISH.get(message.stop_reason or ""),
        "state": _STATE.get(message.status, "complete"),
        "provider_details": {
            "finish_reason": message.raw_stop_reason,
            "streamfold": {
                "status": message.status,
                "stop_reason": message.stop_reason,
                "usage": None if usage is None else usage.raw,
                "metadata": meta,
            },
        },
    }
    if usage is not None:
        data["usage"] = {
            "input_tokens": usage.input_tokens or 0,
            "output_tokens": usage.output_tokens or 0,
            "cache_read_tokens": usage.cache_read_tokens or 0,
            "cache_write_tokens": usage.cache_write_tokens or 0,
            "output_reasoning_tokens": usage.reasoning_tokens or 0,
        }
    return _RESPONSE.validate_python(data)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _part(
    item: ContentPart | ToolCall, provider: str | None, names: dict[str, str]
) -> dict[str, Any]:
    if isinstance(item, ToolCall):
        call: dict[str, Any] = {
            "part_kind": "tool-call",
            "tool_name": item.name or "",
            "args": item.arguments,
            "provider_name": provider,
            "provider_details": dict(item.metadata) or None,
        }
        if item.call_id is not None:
            call["tool_call_id"] = item.call_id
        return call
    options = dict(item.options)
    if item.type == "unsupported":
        return _opaque(item, options, provider, names)
    item_id = options.pop("id", None) if isinstance(options.get("id"), str) else None
    if item.citations:
        # streamfold's own, whole, for the way back; pydantic-ai's in `citations`.
        options["citations"] = [c.model_dump(mode="json") for c in item.citations]
    if item.type == "thinking":
        signature = options.pop("signature", None)
        return {
            "part_kind": "thinking",
            "content": item.content or "",
            "id": item_id,
            "signature": signature if isinstance(signature, str) else None,
            "provider_name": provider,
            "provider_details": options or None,
        }
    # Text, and a media part (its kind kept, so it comes back as it was).
    if item.type != "text":
        options["part_type"] = item.type
    return {
        "part_kind": "text",
        "content": item.content or "",
        "id": item_id,
        "provider_name": provider,
        "provider_details": options or None,
        "citations": [_citation(c, len(item.content or "")) for c in item.citations] or None,
    }


def _citation(citation: Citation, length: int) -> dict[str, Any]:
    """A citation as pydantic-ai's: its source (the cited text as an excerpt), its span
    (when it is one pydantic-ai takes: not empty, inside the text)."""
    sources: list[dict[str, Any]] = []
    source = citation.source
    excerpts = [citation.cited_text] if citation.cited_text else []
    if source is not None and source.type == "web" and source.url is not None:
        sources.append({"kind": "web", "url": source.url, "title": source.title,
                        "excerpts": excerpts})  # fmt: skip
    elif source is not None:
        sources.append({"kind": "document", "document_id": source.document_id,
                        "title": source.title, "excerpts": excerpts})  # fmt: skip
    anchor = None
    start, end = citation.start_index, citation.end_index
    if start is not None and end is not None and 0 <= start < end <= length:
        anchor = {"kind": "content", "start": start, "end": end}
    return {"sources": sources, "anchor": anchor}


def _opaque(
    item: ContentPart, options: dict[str, Any], provider: str | None, names: dict[str, str]
) -> dict[str, Any]:
    """An opaque provider block as the pydantic-ai part closest to it, the block within."""
    block = options.get("block")
    block = block if isinstance(block, dict) else {}
    kind = str(options.get("type") or block.get("type") or "unsupported")
    common = {"provider_name": provider, "provider_details": options}
    if kind == "redacted_thinking":
        data = block.get("data")
        return {"part_kind": "thinking", "content": "", "id": kind,
                "signature": data if isinstance(data, str) else None, **common}  # fmt: skip
    if kind == "compaction":
        return {"part_kind": "compaction", "content": _str(block.get("content")), **common}
    result_of = block.get("tool_use_id", options.get("tool_use_id"))
    if isinstance(result_of, str) and not is_tool_activity(item):
        return {"part_kind": "builtin-tool-return", "tool_name": names.get(result_of, kind),
                "tool_call_id": result_of, "content": block.get("content"), **common}  # fmt: skip
    name = block.get("name")
    args = block.get("input", block.get("arguments"))
    call: dict[str, Any] = {
        "part_kind": "builtin-tool-call",
        "tool_name": name if isinstance(name, str) else kind,
        "args": args if isinstance(args, dict | str) else None,
        **common,
    }
    call_id = block.get("id", options.get("id"))
    if isinstance(call_id, str):
        call["tool_call_id"] = call_id
        names[call_id] = call["tool_name"]
    return call


def from_model_response(response: ModelResponse | dict[str, Any]) -> Message:
    """A pydantic-ai `ModelResponse` (or its JSON dict) as a Message."""
    response = read_object(
        "from_model_response", _NAME, ModelResponse, response, _RESPONSE.validate_python
    )
    details = response.provider_details or {}
    ours = dict_field("from_model_response", details.get("streamfold"), _OURS)
    status: Status
    stop: StopReason | None
    status, stop = _FINISH_BACK.get(response.finish_reason or "", ("complete", None))
    if response.state in ("incomplete", "interrupted"):
        status = "incomplete"
    status, stop = saved_end("from_model_response", ours, status, stop)
    metadata = dict_field("from_model_response", ours.get("metadata"), f"{_OURS}['metadata']")
    for key, value in (
        ("provider", response.provider_name),
        ("model", response.model_name),
        ("id", response.provider_response_id),
    ):
        if value is not None:
            metadata[key] = value
    order = [_item(part) for part in response.parts]
    raw_stop = details.get("finish_reason")
    return build_message(
        [item for item in order if item is not None],
        status=status,
        stop_reason=stop,
        raw_stop_reason=raw_stop if isinstance(raw_stop, str) else None,
        usage=_usage(response, ours),
        metadata=metadata,
    )


def _usage(response: ModelResponse, ours: dict[str, Any]) -> Usage | None:
    if "usage" in ours and ours["usage"] is None:
        return None  # the message had no usage (a ModelResponse always has one)
    usage = response.usage
    raw = ours.get("usage")
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        reasoning_tokens=usage.output_reasoning_tokens,
        raw=raw if isinstance(raw, dict) else {},
        cumulative=True,
    )


def _from_citation(citation: Any) -> Citation:
    """pydantic-ai's citation as streamfold's (its first source, its first excerpt)."""
    source = citation.sources[0] if citation.sources else None
    anchor = citation.anchor
    return Citation.model_validate(
        {
            "cited_text": source.excerpts[0] if source is not None and source.excerpts else None,
            "source": None
            if source is None
            else {
                "type": source.kind,
                "title": source.title,
                "url": getattr(source, "url", None),
                "document_id": getattr(source, "document_id", None),
            },
            "start_index": None if anchor is None else anchor.start,
            "end_index": None if anchor is None else anchor.end,
        }
    )


def _item(part: Any) -> ContentPart | ToolCall | None:
    details: dict[str, Any] = dict(part.provider_details or {})
    if isinstance(details.get("block"), dict) and isinstance(details.get("type"), str):
        return ContentPart(type="unsupported", options=details)  # an opaque block, whole
    kind = part.part_kind
    if kind == "tool-call":
        return ToolCall(
            call_id=part.tool_call_id,
            name=part.tool_name,
            arguments=part.args_as_dict(),
            status="complete",
            metadata=details,
        )
    if kind not in ("text", "thinking"):
        return None  # a part a provider's stream has no form for (a file, a native tool's)
    ours = details.pop("citations", None)
    if isinstance(ours, list):
        citations = [Citation.model_validate(c) for c in ours]
    else:
        citations = [_from_citation(c) for c in getattr(part, "citations", None) or []]
    if part.id is not None:
        details["id"] = part.id
    if kind == "thinking":
        if part.signature is not None:
            details["signature"] = part.signature
        return ContentPart(type="thinking", content=part.content, options=details)
    part_type = details.pop("part_type", "text")
    return ContentPart(type=part_type, content=part.content, options=details, citations=citations)
