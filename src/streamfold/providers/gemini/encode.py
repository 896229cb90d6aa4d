"""Gemini, encoded: a Message history as the generateContent request body `encode()` returns.

`contents` with roles user / model, `systemInstruction` from system messages and
instructions. A model turn's parts go back in stream order, each thought signature on the
part that carried it (text, thought, functionCall, or inside an opaque part's block); a
signed empty part stays a part of its own. Tool messages become one user turn of
functionResponse parts (consecutive tool messages join, as Gemini wants one response per
call of the turn). Call ids streamfold generated (metadata["generated_id"]) are not sent.
Signatures and blocks folded from another provider are left out with a ReplayWarning.
"""

from __future__ import annotations

from typing import Any

from ... import encoding as _enc
from ...message import Message, ToolCall, ToolResult
from ...parts import ContentPart


def replay_problems(history: list[Message]) -> list[_enc.Problem]:
    """What Gemini cannot take back: another provider's thinking and blocks, bad arguments."""
    problems: list[_enc.Problem] = []
    names: dict[str, str] = {}
    for mi, message in enumerate(history):
        foreign = _enc.foreign(message, "gemini")
        for pi, item in enumerate(message.stream_order()):
            problem: _enc.Problem | None = None
            if isinstance(item, ToolCall):
                if item.call_id and item.name:
                    names[item.call_id] = item.name
                problem = _enc.arguments_problem(item, mi, pi)
            elif item.type == "thinking" and (foreign or message.role != "assistant"):
                signed = (
                    "a thought signature another provider issued"
                    if item.options.get("signature")
                    else "thinking"
                )
                problem = _enc.Problem(
                    "foreign_signature",
                    f"gemini cannot verify {signed} (folded from {_enc.origin(message)})",
                    mi,
                    pi,
                    True,
                )
            elif item.type == "unsupported" and not (
                item.options.get("native")
                or (not foreign and isinstance(item.options.get("block"), dict))
            ):
                what = f"a {item.options.get('type')!r} block"
                problem = _enc.dropped(message, "gemini", mi, pi, what)
            if problem is not None:
                problems.append(problem)
        for result in message.tool_results:
            if not result.name and result.tool_call_id not in names:
                problems.append(
                    _enc.Problem(
                        "tool_result_without_call",
                        f"tool result {result.tool_call_id!r} has no name and follows no call "
                        "with its id: Gemini needs the function name",
                        mi,
                    )
                )
    return problems


def encode_request(
    history: list[Message], params: _enc.RequestParams, skip: frozenset[_enc.PartRef]
) -> dict[str, Any]:
    """The generateContent request body for `history` and the common params."""
    system: list[dict[str, Any]] = [{"text": i} for i in params.instructions]
    contents: list[dict[str, Any]] = []
    calls: dict[str, ToolCall] = {}
    for mi, message in enumerate(history):
        for call in message.tool_calls:
            if call.call_id:
                calls[call.call_id] = call
        if message.role == "system":
            system.extend(gemini_part(p, mi, True) for p in message.content if p.type == "text")
            continue
        if message.role == "tool":
            parts = [gemini_function_response(r, calls) for r in message.tool_results]
            if contents and contents[-1].get("_tool"):
                contents[-1]["parts"].extend(parts)
            elif parts:
                contents.append({"role": "user", "parts": parts, "_tool": True})
            continue
        entry = gemini_content(message, mi, skip)
        if entry is not None:
            contents.append(entry)
    body: dict[str, Any] = {
        "contents": [{k: v for k, v in c.items() if k != "_tool"} for c in contents]
    }
    if system:
        body["systemInstruction"] = {"parts": system}
    if params.tools:
        declarations = [gemini_function(t) for t in params.tools if t.native is None]
        tools: list[dict[str, Any]] = []
        if declarations:
            tools.append({"functionDeclarations": declarations})
        tools.extend(t.native for t in params.tools if t.native is not None)
        body["tools"] = tools
    if params.tool_choice is not None:
        body["toolConfig"] = gemini_tool_config(params.tool_choice)
    if params.response_format is not None:
        config = body.get("generationConfig") or params.extra.get("generationConfig") or {}
        body["generationConfig"] = {**config, **gemini_response_format(params.response_format)}
    for key, value in params.extra.items():
        body.setdefault(key, value)
    return body


def gemini_content(
    message: Message, mi: int, skip: frozenset[_enc.PartRef]
) -> dict[str, Any] | None:
    """A user or assistant Message as a Content (role user / model)."""
    own = not _enc.foreign(message, "gemini")
    parts: list[dict[str, Any]] = []
    for pi, item in enumerate(message.stream_order()):
        if (mi, pi) in skip:
            continue
        if isinstance(item, ToolCall):
            parts.append(gemini_function_call(item, own))
            continue
        part = gemini_part(item, mi, own)
        if part.get("text") == "" and "thoughtSignature" not in part:
            continue  # an empty unsigned text part carries nothing
        parts.append(part)
    if not parts:
        return None
    return {"role": "model" if message.role == "assistant" else "user", "parts": parts}


def gemini_part(part: ContentPart, mi: int, own: bool) -> dict[str, Any]:
    """A content part as a Gemini Part (the signature only when Gemini issued it)."""
    out: dict[str, Any]
    if part.type == "unsupported":
        return dict(part.options["block"])
    if part.type in ("text", "thinking"):
        out = {"text": part.content or ""}
        if part.type == "thinking":
            out["thought"] = True
    elif part.type in ("image", "file"):
        inline = _enc.split_data_url(part.content or "")
        if inline is not None:
            mime, data = inline
        else:
            mime = _enc.media_type(part) or ""
            data = part.content or ""
        if not mime:
            raise _enc.EncodeError(
                f"a base64 {part.type} part needs a media option (e.g. media='image/png')",
                index=mi,
            )
        out = {"inlineData": {"mimeType": mime, "data": data}}
    else:  # image_url, file_url
        url = part.content or ""
        inline = _enc.split_data_url(url)
        if inline is not None:
            out = {"inlineData": {"mimeType": inline[0], "data": inline[1]}}
        else:
            out = {"fileData": {"fileUri": url}}
            url_mime = _enc.media_type(part)
            if url_mime is not None:
                out["fileData"]["mimeType"] = url_mime
    signature = part.options.get("signature")
    if own and isinstance(signature, str) and signature:
        out["thoughtSignature"] = signature
    return out


def gemini_function_call(call: ToolCall, own: bool) -> dict[str, Any]:
    """A ToolCall as a functionCall part, its thought signature kept when Gemini issued it."""
    body: dict[str, Any] = {"name": call.name or "", "args": _enc.call_arguments(call)}
    if call.call_id and not call.metadata.get("generated_id"):
        body["id"] = call.call_id
    out: dict[str, Any] = {"functionCall": body}
    signature = call.metadata.get("thought_signature")
    if own and isinstance(signature, str) and signature:
        out["thoughtSignature"] = signature
    return out


def gemini_function_response(result: ToolResult, calls: dict[str, ToolCall]) -> dict[str, Any]:
    """A ToolResult as a functionResponse part ({"output": ...} or {"error": ...})."""
    call = calls.get(result.tool_call_id)
    name = result.name or (call.name if call is not None else None) or ""
    text = _enc.result_text(result)
    body: dict[str, Any] = {
        "name": name,
        "response": {"error" if result.is_error else "output": text},
    }
    if call is None or not call.metadata.get("generated_id"):
        body["id"] = result.tool_call_id
    return {"functionResponse": body}


def gemini_function(tool: _enc.Tool) -> dict[str, Any]:
    """A common-form tool as a FunctionDeclaration (the schema as full JSON Schema)."""
    out: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    if tool.parameters is not None:
        out["parametersJsonSchema"] = tool.parameters
    return out


def gemini_tool_config(choice: _enc.ToolChoice) -> dict[str, Any]:
    """tool_choice as toolConfig.functionCallingConfig (AUTO / ANY / NONE / one name)."""
    if choice.mode == "native":
        return dict(choice.native)
    if choice.mode == "function":
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice.name]}}
    mode = {"auto": "AUTO", "required": "ANY", "none": "NONE"}[choice.mode]
    return {"functionCallingConfig": {"mode": mode}}


def gemini_response_format(fmt: _enc.ResponseFormat) -> dict[str, Any]:
    """response_format as generationConfig fields (responseMimeType, responseJsonSchema)."""
    if fmt.native is not None:
        return fmt.native
    if fmt.type == "text":
        return {"responseMimeType": "text/plain"}
    out: dict[str, Any] = {"responseMimeType": "application/json"}
    if fmt.type == "json_schema" and fmt.schema is not None:
        out["responseJsonSchema"] = fmt.schema
    return out
