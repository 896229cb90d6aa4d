"""OpenAI Chat Completions, encoded: a Message history as the request body `encode()` returns.

The ActiveAgent seed's Chat transforms, behaviour by behaviour, minus its silent losses:
instructions become developer message(s); consecutive same-role messages merge (tool
messages never, and a merge that would lose a field does not happen); tools, tool_choice
and response_format take the nested Chat form (`strict: false` survives); a lone text part
becomes a string, empty content goes; parameters equal to the API default go;
`web_search_options` stays when set. Chat has no field for thinking, signatures or other
providers' blocks: those are left out with a ReplayWarning (see encode.check_replayable).
"""

from __future__ import annotations

from typing import Any

from ... import encoding as _enc
from ...message import Message, ToolCall
from ...parts import ContentPart

# Request parameters whose value equals the API default are left out (the seed's cleanup).
CHAT_DEFAULTS: dict[str, Any] = {
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "temperature": 1,
    "top_p": 1,
    "n": 1,
    "logprobs": False,
    "stream": False,
    "store": False,
    "parallel_tool_calls": True,
}

_CHAT_MERGED_KEYS = frozenset({"role", "content", "tool_calls"})


def _chat_fate(message: Message, item: ContentPart | ToolCall) -> str | None:
    """Why Chat cannot carry this part of the message (None: it can)."""
    if isinstance(item, ToolCall):
        return None if message.role == "assistant" else "a tool call outside an assistant turn"
    if item.type == "unsupported":
        return None if item.options.get("native") else f"a {item.options.get('type')!r} block"
    if item.type == "thinking":
        return "thinking (Chat has no field for it; its signature cannot go back)"
    if item.type == "text":
        return None
    if message.role == "user" and item.type in ("image", "image_url", "file"):
        return None
    return f"a {item.type} part in a {message.role} message"


def replay_problems(history: list[Message]) -> list[_enc.Problem]:
    """What OpenAI Chat cannot carry: thinking, foreign blocks, media outside user turns."""
    problems: list[_enc.Problem] = []
    for mi, message in enumerate(history):
        for pi, item in enumerate(message.stream_order()):
            why = _chat_fate(message, item)
            if why is not None:
                problems.append(_enc.dropped(message, "openai-chat", mi, pi, why))
    return problems


def encode_request(
    history: list[Message], params: _enc.RequestParams, skip: frozenset[_enc.PartRef]
) -> dict[str, Any]:
    """The Chat Completions request body for `history` and the common params."""
    messages = chat_instructions(params.instructions)
    for mi, message in enumerate(history):
        messages.extend(chat_messages(message, mi, skip, params.strict))
    body: dict[str, Any] = dict(params.extra)
    body["messages"] = merge_chat_messages(messages)
    if params.tools:
        body["tools"] = [chat_tool(t) for t in params.tools]
    if params.tool_choice is not None:
        body["tool_choice"] = chat_tool_choice(params.tool_choice)
    if params.response_format is not None:
        body["response_format"] = chat_response_format(params.response_format)
    return cleanup_chat_request(body, CHAT_DEFAULTS)


def chat_instructions(instructions: list[str]) -> list[dict[str, Any]]:
    """Instructions as developer messages: several become parts of one developer message."""
    if len(instructions) > 1:
        return [{"role": "developer", "content": [_chat_text(i) for i in instructions]}]
    return [{"role": "developer", "content": [_chat_text(i)]} for i in instructions]


def _chat_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def chat_messages(
    message: Message, mi: int, skip: frozenset[_enc.PartRef], strict: bool = False
) -> list[dict[str, Any]]:
    """One Message as Chat message dicts (a tool message gives one per result)."""
    extra: dict[str, Any] = dict(message.metadata.get("extra") or {})
    if message.role == "tool":
        out = []
        for result in message.tool_results:
            content: str | list[dict[str, Any]]
            if isinstance(result.content, str):
                content = result.content
            else:
                content = [_chat_text(p.content or "") for p in result.content if p.type == "text"]
                if len(content) != len(result.content):
                    _enc_drop(strict, mi, "non-text parts of a tool result (Chat tool "
                              "messages hold text only)")  # fmt: skip
            out.append(
                {"role": "tool", "tool_call_id": result.tool_call_id, "content": content, **extra}
            )
        return out
    role = str(message.metadata.get("role") or message.role)
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    refusals: list[str] = []
    for pi, item in enumerate(message.stream_order()):
        if (mi, pi) in skip:
            continue
        if isinstance(item, ToolCall):
            calls.append(chat_tool_call(item))
        elif item.type == "text" and item.options.get("refusal") and role == "assistant":
            refusals.append(item.content or "")
        else:
            parts.append(chat_content_part(item, mi))
    msg: dict[str, Any] = {"role": role, "content": parts}
    if isinstance(message.metadata.get("name"), str):
        msg["name"] = message.metadata["name"]
    if refusals:
        msg["refusal"] = "".join(refusals)
    if calls:
        msg["tool_calls"] = calls
    msg.update(extra)
    return [msg]


def _enc_drop(strict: bool, mi: int, what: str) -> None:
    if strict:
        raise _enc.EncodeError(f"openai-chat cannot carry {what}", index=mi)
    import warnings

    warnings.warn(f"messages[{mi}]: left out {what}", _enc.ReplayWarning, stacklevel=4)


def chat_content_part(part: ContentPart, mi: int) -> dict[str, Any]:
    """A content part as a Chat content part (text, image_url, file, or a native part)."""
    if part.type == "unsupported":
        block: dict[str, Any] = part.options["block"]
        return dict(block)
    if part.type == "text":
        return _chat_text(part.content or "")
    if part.type in ("image", "image_url"):
        url = part.content or ""
        if part.type == "image":
            url = _enc.data_url(part, mi)
        image: dict[str, Any] = {"url": url}
        if isinstance(part.options.get("detail"), str):
            image["detail"] = part.options["detail"]
        return {"type": "image_url", "image_url": image}
    # a base64 file (the only other part _chat_fate lets through)
    file: dict[str, Any] = {"file_data": _enc.data_url(part, mi, "application/pdf")}
    if isinstance(part.options.get("filename"), str):
        file["filename"] = part.options["filename"]
    return {"type": "file", "file": file}


def chat_tool_call(call: ToolCall) -> dict[str, Any]:
    """A ToolCall as a Chat tool_calls entry (custom tools keep their free-text input)."""
    if call.metadata.get("type") == "custom_tool_call" and isinstance(call.arguments, dict):
        return {
            "id": call.call_id,
            "type": "custom",
            "custom": {"name": call.name, "input": str(call.arguments.get("input", ""))},
        }
    return {
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.name or "", "arguments": _enc.arguments_text(call)},
    }


def content_to_array(content: Any) -> list[Any]:
    """Content as a list of parts, for merging (the seed's content_to_array)."""
    if isinstance(content, str):
        return [_chat_text(content)]
    if isinstance(content, list):
        return [_chat_text(p) if isinstance(p, str) else p for p in content]
    if content is None:
        return []
    return [content]


def merge_content(first: Any, second: Any) -> list[Any]:
    """Two messages' content as one list of parts, never joined into one string."""
    return content_to_array(first) + content_to_array(second)


def _mergeable(first: dict[str, Any], second: dict[str, Any]) -> bool:
    if first["role"] != second["role"] or first["role"] == "tool":
        return False
    for key in (first.keys() & second.keys()) - _CHAT_MERGED_KEYS:
        # A field both carry (a name, a refusal, a pass-through field) would have to
        # lose one value: keep the messages apart instead.
        if key != "name" or first[key] != second[key]:
            return False
    return True


def merge_chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge consecutive same-role messages (never tool messages, never losing a field)."""
    grouped: list[dict[str, Any]] = []
    for msg in messages:
        if grouped and _mergeable(grouped[-1], msg):
            last = grouped[-1]
            merged = {
                **last,
                **msg,
                "content": merge_content(last.get("content"), msg.get("content")),
            }
            calls = [*last.get("tool_calls", []), *msg.get("tool_calls", [])]
            if calls:
                merged["tool_calls"] = calls
            grouped[-1] = merged
        else:
            grouped.append(dict(msg))
    return grouped


def simplify_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A lone plain text part becomes a string; empty content is removed."""
    out = []
    for msg in messages:
        simplified = dict(msg)
        content = simplified.get("content")
        if isinstance(content, list) and len(content) == 1:
            part = content[0]
            if (
                isinstance(part, dict)
                and part.get("type") == "text"
                and set(part)
                == {
                    "type",
                    "text",
                }
            ):
                simplified["content"] = part["text"]
        if simplified.get("content") == [] or (
            "content" in simplified and simplified["content"] is None
        ):
            del simplified["content"]
        out.append(simplified)
    return out


def cleanup_chat_request(body: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Drop parameters equal to their API default, simplify messages, keep web search on."""
    web_search = body.get("web_search_options")
    cleaned = {
        k: v for k, v in body.items() if not (k in defaults and _enc.same_value(v, defaults[k]))
    }
    if "messages" in cleaned:
        cleaned["messages"] = simplify_messages(cleaned["messages"])
    if web_search is not None and web_search is not False:
        # An empty object is how Chat turns web search on: it is never a default to drop.
        cleaned["web_search_options"] = web_search if isinstance(web_search, dict) else {}
    return cleaned


def chat_tool(tool: _enc.Tool) -> dict[str, Any]:
    """A tool in the nested Chat form (a native tool passes through)."""
    if tool.native is not None:
        return tool.native
    function: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    if tool.parameters is not None:
        function["parameters"] = tool.parameters
    if tool.strict is not None:
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


def chat_tool_choice(choice: _enc.ToolChoice) -> Any:
    """tool_choice in the Chat form: "auto" / "required" / "none" / the nested function."""
    if choice.mode == "native":
        return choice.native
    if choice.mode == "function":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


def chat_response_format(fmt: _enc.ResponseFormat) -> dict[str, Any]:
    """response_format in the Chat form (json_schema nested, `strict: false` kept)."""
    if fmt.native is not None:
        return fmt.native
    if fmt.type != "json_schema":
        return {"type": fmt.type}
    schema: dict[str, Any] = {}
    for key, value in (
        ("name", fmt.name),
        ("description", fmt.description),
        ("schema", fmt.schema),
        ("strict", fmt.strict),
    ):
        if value is not None:
            schema[key] = value
    return {"type": "json_schema", "json_schema": schema}
