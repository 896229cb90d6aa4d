"""Anthropic Messages, encoded: a Message history as the request body `encode()` returns.

System messages and instructions become `system`. An assistant turn's blocks go back in
`stream_order()`: thinking with its signature, redacted_thinking, text, tool_use and the
server's own blocks (server_tool_use, *_tool_result, compaction, ...) exactly as streamed.
A thinking part without a signature, or with another provider's, is left out with a
ReplayWarning (strict mode raises). Tool messages become user turns of tool_result blocks,
merged with the user turn that follows (tool results first, as the API requires).
"""

from __future__ import annotations

import warnings
from typing import Any

from ... import encoding as _enc
from ...message import Message, ToolCall
from ...parts import ContentPart

# Citation fields the request accepts, per citation type (responses add e.g. file_id).
_CITATION_KEYS: dict[str, frozenset[str]] = {
    "char_location": frozenset(
        {"type", "cited_text", "document_index", "document_title", "start_char_index",
         "end_char_index"}
    ),
    "page_location": frozenset(
        {"type", "cited_text", "document_index", "document_title", "start_page_number",
         "end_page_number"}
    ),
    "content_block_location": frozenset(
        {"type", "cited_text", "document_index", "document_title", "start_block_index",
         "end_block_index"}
    ),
    "web_search_result_location": frozenset(
        {"type", "cited_text", "encrypted_index", "title", "url"}
    ),
    "search_result_location": frozenset(
        {"type", "cited_text", "search_result_index", "source", "title", "start_block_index",
         "end_block_index"}
    ),
}  # fmt: skip

# ToolCall metadata an Anthropic tool_use block takes back.
_TOOL_USE_KEYS = ("caller",)

_MEDIA_PARTS = frozenset({"image", "image_url", "file", "file_url"})


def replay_problems(history: list[Message]) -> list[_enc.Problem]:
    """What Anthropic would reject: unsigned or foreign thinking, thinking after tool_use."""
    problems: list[_enc.Problem] = []
    for mi, message in enumerate(history):
        slots = [tc.index for tc in message.tool_calls if tc.index is not None]
        if len(slots) != len(set(slots)):
            problems.append(
                _enc.Problem(
                    "thinking_out_of_order",
                    "two tool calls claim the same slot: the streamed block order is lost",
                    mi,
                )
            )
        after_tool_use = False
        for pi, item in enumerate(message.stream_order()):
            problem = _anthropic_problem(message, item, mi, pi, after_tool_use)
            if problem is not None:
                problems.append(problem)
            if isinstance(item, ToolCall):
                after_tool_use = True
    return problems


def _anthropic_problem(
    message: Message, item: ContentPart | ToolCall, mi: int, pi: int, after_tool_use: bool
) -> _enc.Problem | None:
    if isinstance(item, ToolCall):
        if message.role != "assistant":
            return _enc.dropped(
                message, "anthropic", mi, pi, "a tool call outside an assistant turn"
            )
        return _enc.arguments_problem(item, mi, pi)
    foreign = _enc.foreign(message, "anthropic")
    is_thinking = item.type == "thinking" or (
        item.type == "unsupported" and item.options.get("type") == "redacted_thinking"
    )
    if item.type == "thinking":
        if message.role != "assistant":
            return _enc.dropped(message, "anthropic", mi, pi, "thinking outside an assistant turn")
        signature = item.options.get("signature")
        if foreign:
            why = "a thinking signature another provider issued" if signature else "thinking"
            return _enc.Problem(
                "foreign_signature",
                f"anthropic cannot verify {why} (folded from {_enc.origin(message)})",
                mi,
                pi,
                True,
            )
        if not isinstance(signature, str) or not signature:
            return _enc.Problem(
                "empty_signature",
                "a thinking part without a signature is rejected by Anthropic",
                mi,
                pi,
                True,
            )
    elif item.type == "unsupported":
        native = item.options.get("native")
        if not isinstance(item.options.get("block"), dict) or (foreign and not native):
            return _enc.dropped(
                message, "anthropic", mi, pi, f"a {item.options.get('type')!r} block"
            )
    elif item.type in _MEDIA_PARTS and message.role == "assistant":
        return _enc.dropped(
            message, "anthropic", mi, pi, f"a {item.type} part in an assistant turn"
        )
    if is_thinking and after_tool_use:
        return _enc.Problem(
            "thinking_out_of_order",
            "a thinking block after a tool_use block: the turn ended at the tool_use",
            mi,
            pi,
        )
    return None


def encode_request(
    history: list[Message], params: _enc.RequestParams, skip: frozenset[_enc.PartRef]
) -> dict[str, Any]:
    """The Anthropic Messages request body for `history` and the common params."""
    system: list[dict[str, Any]] = [{"type": "text", "text": i} for i in params.instructions]
    messages: list[dict[str, Any]] = []
    for mi, message in enumerate(history):
        if message.role == "system":
            system.extend(
                anthropic_block(p, mi, message) for p in message.content if p.type == "text"
            )
            if any(p.type != "text" for p in message.content):
                _drop(params.strict, mi, "non-text parts of a system message")
            continue
        entry = anthropic_message(message, mi, skip, params.strict)
        if entry is None:
            continue
        if messages and entry["role"] == "user" and messages[-1]["role"] == "user":
            last = messages[-1]
            blocks = [*_as_blocks(last["content"]), *_as_blocks(entry["content"])]
            # tool_result blocks must open the user turn that answers a tool_use.
            blocks.sort(key=lambda b: b.get("type") != "tool_result")
            messages[-1] = {"role": "user", "content": blocks}
        else:
            messages.append(entry)
    body: dict[str, Any] = dict(params.extra)
    if system:
        plain = len(system) == 1 and set(system[0]) == {"type", "text"}
        body["system"] = system[0]["text"] if plain else system
    body["messages"] = messages
    if params.tools:
        body["tools"] = [anthropic_tool(t) for t in params.tools]
    if params.tool_choice is not None:
        body["tool_choice"] = anthropic_tool_choice(params.tool_choice)
    fmt = params.response_format
    if fmt is not None and fmt.type != "text":
        body["output_config"] = {
            **(body.get("output_config") or {}),
            "format": anthropic_output_format(fmt),
        }
    return body


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _drop(strict: bool, mi: int, what: str) -> None:
    if strict:
        raise _enc.EncodeError(f"anthropic cannot carry {what}", index=mi)
    warnings.warn(f"messages[{mi}]: left out {what}", _enc.ReplayWarning, stacklevel=4)


def anthropic_message(
    message: Message, mi: int, skip: frozenset[_enc.PartRef], strict: bool = False
) -> dict[str, Any] | None:
    """One Message as an Anthropic message (a tool message: a user turn of tool_results)."""
    if message.role == "tool":
        results = [anthropic_tool_result(r, mi) for r in message.tool_results]
        return {"role": "user", "content": results} if results else None
    blocks: list[dict[str, Any]] = []
    for pi, item in enumerate(message.stream_order()):
        if (mi, pi) in skip:
            continue
        if isinstance(item, ToolCall):
            blocks.append(anthropic_tool_use(item, message))
        elif item.type == "text" and not item.content and not item.citations:
            continue  # Anthropic rejects empty text blocks
        else:
            blocks.append(anthropic_block(item, mi, message))
    if not blocks:
        return None
    role = "assistant" if message.role == "assistant" else "user"
    return {"role": role, "content": blocks}


def anthropic_tool_use(call: ToolCall, message: Message) -> dict[str, Any]:
    """A ToolCall as a tool_use block (its `caller` kept when it came from Anthropic)."""
    block: dict[str, Any] = {
        "type": "tool_use",
        "id": call.call_id,
        "name": call.name or "",
        "input": _enc.call_arguments(call),
    }
    if not _enc.foreign(message, "anthropic"):
        for key in _TOOL_USE_KEYS:
            if key in call.metadata:
                block[key] = call.metadata[key]
    return block


def anthropic_block(part: ContentPart, mi: int, message: Message | None = None) -> dict[str, Any]:
    """A content part as an Anthropic content block."""
    block: dict[str, Any]
    if part.type == "unsupported":
        return dict(part.options["block"])
    if part.type == "thinking":
        return {
            "type": "thinking",
            "thinking": part.content or "",
            "signature": part.options["signature"],
        }
    if part.type == "text":
        block = {"type": "text", "text": part.content or ""}
        if message is not None and not _enc.foreign(message, "anthropic"):
            cited = [_citation_param(c.metadata.get("raw")) for c in part.citations]
            if cited and all(c is not None for c in cited):
                block["citations"] = cited
    elif part.type in ("image", "image_url"):
        block = {"type": "image", "source": _source(part, mi, "image")}
    else:  # file, file_url
        block = {"type": "document", "source": _source(part, mi, "document")}
        title = part.options.get("title", part.options.get("filename"))
        if isinstance(title, str):
            block["title"] = title
    control = _enc.cache_control(part)
    if control is not None:
        block["cache_control"] = control
    return block


def _citation_param(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    keys = _CITATION_KEYS.get(str(raw.get("type")))
    if keys is None:
        return None
    return {k: v for k, v in raw.items() if k in keys}


def _source(part: ContentPart, mi: int, kind: str) -> dict[str, Any]:
    content = part.content or ""
    if part.type in ("image_url", "file_url"):
        inline = _enc.split_data_url(content)
        if inline is None:
            return {"type": "url", "url": content}
        return {"type": "base64", "media_type": inline[0], "data": inline[1]}
    default = "application/pdf" if kind == "document" else None
    media = _enc.media_type(part, default)
    inline = _enc.split_data_url(content)
    if inline is not None:
        media, content = inline[0], inline[1]
    if media is None:
        raise _enc.EncodeError(
            "a base64 image needs a media option (e.g. media='image/png') for Anthropic",
            index=mi,
        )
    return {"type": "base64", "media_type": media, "data": content}


def anthropic_tool_result(result: Any, mi: int) -> dict[str, Any]:
    """A ToolResult as a tool_result block (is_error only when set, cache_control kept)."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.tool_call_id}
    if isinstance(result.content, str):
        block["content"] = result.content
    else:
        block["content"] = [anthropic_block(p, mi) for p in result.content if p.type != "thinking"]
    if result.is_error:
        block["is_error"] = True
    control = result.options.get("cache_control")
    if control is True:
        control = {"type": "ephemeral"}
    if isinstance(control, dict):
        block["cache_control"] = control
    return block


def anthropic_tool(tool: _enc.Tool) -> dict[str, Any]:
    """A tool in Anthropic's form: name, description, input_schema (native tools pass)."""
    if tool.native is not None:
        return tool.native
    out: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    out["input_schema"] = tool.parameters or {"type": "object", "properties": {}}
    if tool.strict is not None:
        out["strict"] = tool.strict
    return out


def anthropic_tool_choice(choice: _enc.ToolChoice) -> Any:
    """tool_choice: auto, any (for "required"), none, or one tool by name."""
    if choice.mode == "native":
        return choice.native
    if choice.mode == "function":
        return {"type": "tool", "name": choice.name}
    return {"type": {"auto": "auto", "required": "any", "none": "none"}[choice.mode]}


def anthropic_output_format(fmt: _enc.ResponseFormat) -> dict[str, Any]:
    """A json_schema response format as output_config.format (json_object has no match)."""
    if fmt.native is not None:
        return fmt.native
    if fmt.type != "json_schema" or fmt.schema is None:
        raise _enc.EncodeError(
            f"response_format: Anthropic takes a json_schema with a schema, got {fmt.type!r}"
        )
    return {"type": "json_schema", "schema": fmt.schema}
