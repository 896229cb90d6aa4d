"""What a scenario matches on, read from an API request body, API by API.

The body has been checked first (`streamfold.web.api_requests`, the SDKs' own request
types), so the readers here only look for what is there and skip what is not theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .scenario import Api, ApiRequest, ToolResultRef


def read_request(
    api: Api, body: Mapping[str, Any], *, model: str | None = None, stream: bool = False
) -> ApiRequest:
    """The request as a turn matches it: model, last user message, tool results, tools.

    `model`: the one the path names (Gemini, Bedrock), else the body's.
    """
    if api in ("chat", "responses", "messages", "invoke") and isinstance(body.get("model"), str):
        model = model or body["model"]
    if api == "chat":
        user, results, tools = _chat(body)
    elif api == "responses":
        user, results, tools = _responses(body)
    elif api in ("messages", "invoke"):
        user, results, tools = _anthropic(body)
    elif api == "gemini":
        user, results, tools = _gemini(body)
    else:
        user, results, tools = _converse(body)
    return ApiRequest(
        api=api,
        model=model,
        stream=stream,
        last_user=user,
        tool_results=tuple(results),
        tools=tuple(tools),
        body=body,
    )


Read = tuple[str | None, list[ToolResultRef], list[str]]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _texts(content: Any, kinds: tuple[str, ...] = ("text",)) -> str | None:
    """A message content's text: a string as it is, else its text blocks joined."""
    if isinstance(content, str):
        return content
    texts = [
        block["text"]
        for block in _list(content)
        if isinstance(block, dict)
        and block.get("type", "text") in kinds
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


def _last_user(messages: list[dict[str, Any]], kinds: tuple[str, ...] = ("text",)) -> str | None:
    """The text of the last user message that has some."""
    for message in reversed(messages):
        if message.get("role") == "user":
            text = _texts(message.get("content"), kinds)
            if text is not None:
                return text
    return None


def _chat(body: Mapping[str, Any]) -> Read:
    messages = [m for m in _list(body.get("messages")) if isinstance(m, dict)]
    user = _last_user(messages)
    names: dict[str, str] = {}
    for message in messages:
        for call in _list(message.get("tool_calls")):
            call = _dict(call)
            name = _str(
                _dict(call.get("function")).get("name") or _dict(call.get("custom")).get("name")
            )
            if isinstance(call.get("id"), str) and name:
                names[call["id"]] = name
    results: list[ToolResultRef] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        call_id = _str(message.get("tool_call_id"))
        results.insert(0, ToolResultRef(call_id, names.get(call_id or "")))
    tools = []
    for tool in _list(body.get("tools")):
        tool = _dict(tool)
        name = _str(_dict(tool.get(tool.get("type") or "function")).get("name"))
        if name:
            tools.append(name)
    return user, results, tools


_RESPONSES_OUTPUTS = ("function_call_output", "custom_tool_call_output", "mcp_approval_response")


def _responses(body: Mapping[str, Any]) -> Read:
    items = body.get("input")
    if isinstance(items, str):
        return items, [], _responses_tools(body)
    entries = [item for item in _list(items) if isinstance(item, dict)]
    said = [item for item in entries if item.get("type", "message") == "message"]
    user = _last_user(said, ("input_text", "text"))
    names = {
        item["call_id"]: item["name"]
        for item in entries
        if isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str)
    }
    results: list[ToolResultRef] = []
    for item in reversed(entries):
        kind = item.get("type", "message")
        if kind == "message":
            break  # the results answer the calls after the last message
        if kind in _RESPONSES_OUTPUTS:
            call_id = _str(item.get("call_id") or item.get("approval_request_id"))
            results.insert(0, ToolResultRef(call_id, names.get(call_id or "")))
    return user, results, _responses_tools(body)


def _responses_tools(body: Mapping[str, Any]) -> list[str]:
    tools = []
    for tool in _list(body.get("tools")):
        tool = _dict(tool)
        name = _str(tool.get("name")) or _str(tool.get("server_label")) or _str(tool.get("type"))
        if name:
            tools.append(name)
    return tools


def _anthropic(body: Mapping[str, Any]) -> Read:
    messages = [m for m in _list(body.get("messages")) if isinstance(m, dict)]
    user = _last_user(messages)
    names: dict[str, str] = {}
    for message in messages:
        for block in _list(message.get("content")):
            block = _dict(block)
            is_call = block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use")
            if is_call and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
                names[block["id"]] = block["name"]
    results: list[ToolResultRef] = []
    if messages and messages[-1].get("role") == "user":
        for block in _list(messages[-1].get("content")):
            block = _dict(block)
            if block.get("type") == "tool_result":
                call_id = _str(block.get("tool_use_id"))
                results.append(ToolResultRef(call_id, names.get(call_id or "")))
    tools = [_str(_dict(tool).get("name")) for tool in _list(body.get("tools"))]
    return user, results, [name for name in tools if name]


def _gemini(body: Mapping[str, Any]) -> Read:
    contents = [c for c in _list(body.get("contents")) if isinstance(c, dict)]
    user = None
    for content in reversed(contents):
        if content.get("role", "user") == "user":
            texts = [
                part["text"]
                for part in _list(content.get("parts"))
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            ]
            if texts:
                user = "\n".join(texts)
                break
    results: list[ToolResultRef] = []
    if contents and contents[-1].get("role", "user") == "user":
        for part in _list(contents[-1].get("parts")):
            response = _dict(_dict(part).get("functionResponse"))
            if response:
                results.append(ToolResultRef(_str(response.get("id")), _str(response.get("name"))))
    tools = []
    for tool in _list(body.get("tools")):
        for declaration in _list(_dict(tool).get("functionDeclarations")):
            name = _str(_dict(declaration).get("name"))
            if name:
                tools.append(name)
    return user, results, tools


def _converse(body: Mapping[str, Any]) -> Read:
    messages = [m for m in _list(body.get("messages")) if isinstance(m, dict)]
    user = None
    for message in reversed(messages):
        if message.get("role") == "user":
            texts = [
                block["text"]
                for block in _list(message.get("content"))
                if isinstance(block, dict) and isinstance(block.get("text"), str)
            ]
            if texts:
                user = "\n".join(texts)
                break
    names: dict[str, str] = {}
    for message in messages:
        for block in _list(message.get("content")):
            use = _dict(_dict(block).get("toolUse"))
            if isinstance(use.get("toolUseId"), str) and isinstance(use.get("name"), str):
                names[use["toolUseId"]] = use["name"]
    results: list[ToolResultRef] = []
    if messages and messages[-1].get("role") == "user":
        for block in _list(messages[-1].get("content")):
            result = _dict(_dict(block).get("toolResult"))
            if result:
                call_id = _str(result.get("toolUseId"))
                results.append(ToolResultRef(call_id, names.get(call_id or "")))
    tools = []
    for tool in _list(_dict(body.get("toolConfig")).get("tools")):
        name = _str(_dict(_dict(tool).get("toolSpec")).get("name"))
        if name:
            tools.append(name)
    return user, results, tools


__all__ = ["read_request"]
