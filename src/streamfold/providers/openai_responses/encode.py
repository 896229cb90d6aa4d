"""OpenAI Responses, encoded: a Message history as the request body `encode()` returns.

An assistant Message goes back as the items it was streamed as, in order: each reasoning
item (its thinking parts regrouped by item id) with its id and encrypted_content; each
message item with its id, its text parts and `phase` from the utterance marker (narration
-> commentary, answer -> final_answer); function_call / custom_tool_call items with their
call_id and item id; built-in tool items whole. Text without an item id goes as an easy
input message (phase kept). Thinking without a reasoning item id, or folded from another
provider, is left out with a ReplayWarning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import encoding as _enc
from ...message import Message, ToolCall, ToolResult, pending_approvals
from ...parts import ContentPart
from ...parts import utterance as _utterance
from ...parts import utterance_inferred as _utterance_inferred
from ..fields import describe
from .decode import CLIENT_CALL_INPUTS

_PHASE_OF = {"narration": "commentary", "answer": "final_answer"}

# The item type a tool result answers with an mcp_approval_response.
APPROVAL_REQUEST = "mcp_approval_request"

_USER_PARTS = frozenset({"text", "image", "image_url", "file", "file_url"})


def replay_problems(history: list[Message]) -> list[_enc.Problem]:
    """What Responses cannot take back: thinking without a reasoning item id, foreign blocks."""
    problems: list[_enc.Problem] = []
    call_types: dict[str, str] = {}
    for mi, message in enumerate(history):
        call_types.update(_call_types(message))
        for result in message.tool_results:
            kind = call_types.get(result.tool_call_id)
            if kind == APPROVAL_REQUEST and not isinstance(result.options.get("approve"), bool):
                problems.append(
                    _enc.Problem(
                        "approval_without_decision",
                        f"the answer to MCP approval request {describe(result.tool_call_id)} goes "
                        "back"
                        " as an mcp_approval_response, which needs the caller's decision: "
                        'expected options["approve"] True or False, got '
                        f"{describe(result.options.get('approve'))}",
                        mi,
                    )
                )
            if (
                kind == "computer_call"
                and not isinstance(result.options.get("output"), dict)
                and _result_image(result) is None
            ):
                problems.append(
                    _enc.Problem(
                        "computer_output_without_screenshot",
                        f"the result of computer call {result.tool_call_id!r} goes back as a "
                        "computer_call_output, which needs a screenshot: give it an image part "
                        '(or options["output"])',
                        mi,
                    )
                )
        foreign = _enc.foreign(message, "openai-responses")
        for pi, item in enumerate(message.stream_order()):
            if isinstance(item, ToolCall):
                if message.role != "assistant":
                    problems.append(
                        _enc.dropped(message, "openai-responses", mi, pi, "a tool call here")
                    )
                continue
            problem = _responses_problem(message, item, foreign, mi, pi)
            if problem is not None:
                problems.append(problem)
    return problems


def _responses_problem(
    message: Message, part: ContentPart, foreign: bool, mi: int, pi: int
) -> _enc.Problem | None:
    if part.type == "thinking":
        if message.role != "assistant":
            return _enc.dropped(message, "openai-responses", mi, pi, "thinking outside a turn")
        if foreign:
            return _enc.Problem(
                "foreign_signature",
                "a reasoning item needs an OpenAI reasoning id and encrypted_content; "
                f"thinking folded from {_enc.origin(message)} has neither",
                mi,
                pi,
                True,
            )
        if not isinstance(part.options.get("id"), str):
            return _enc.Problem(
                "reasoning_without_id",
                "a thinking part without its reasoning item id cannot go back",
                mi,
                pi,
                True,
            )
        return None
    if part.type == "unsupported":
        if part.options.get("native") or (
            not foreign and isinstance(part.options.get("block"), dict)
        ):
            return None
        return _enc.dropped(
            message, "openai-responses", mi, pi, f"a {part.options.get('type')!r} block"
        )
    if part.type == "text" or (message.role != "assistant" and part.type in _USER_PARTS):
        return None
    return _enc.dropped(message, "openai-responses", mi, pi, f"a {part.type} part here")


def encode_request(
    history: list[Message], params: _enc.RequestParams, skip: frozenset[_enc.PartRef]
) -> dict[str, Any]:
    """The Responses request body: `input` items, instructions, tools, text.format."""
    items: list[dict[str, Any]] = []
    call_types: dict[str, str] = {}  # call id -> item type, for its output's item type
    for mi, message in enumerate(history):
        call_types.update(_call_types(message))
        items.extend(responses_items(message, mi, skip, call_types, params.inferred_utterances))
    body: dict[str, Any] = dict(params.extra)
    if params.instructions:
        body["instructions"] = "\n\n".join(params.instructions)
    body["input"] = items
    if params.tools:
        body["tools"] = [responses_tool(t) for t in params.tools]
    if params.tool_choice is not None:
        body["tool_choice"] = responses_tool_choice(params.tool_choice)
    if params.response_format is not None:
        text = body.get("text")
        body["text"] = {
            **(text if isinstance(text, dict) else {}),
            "format": responses_format(params.response_format),
        }
    return body


def responses_items(
    message: Message,
    mi: int,
    skip: frozenset[_enc.PartRef],
    call_types: Mapping[str, str] | None = None,
    inferred: bool = False,
) -> list[dict[str, Any]]:
    """One Message as Responses input items (`inferred`: with inferred markers as phase)."""
    if message.role == "tool":
        return [_call_output(r, mi, call_types or {}) for r in message.tool_results]
    kept = [(pi, x) for pi, x in enumerate(message.stream_order()) if (mi, pi) not in skip]
    if message.role != "assistant":
        role = str(message.metadata.get("role") or message.role)
        content = [_input_part(p, mi) for _, p in kept if isinstance(p, ContentPart)]
        if not content:
            return []
        plain = len(content) == 1 and set(content[0]) == {"type", "text"}
        return [{"role": role, "content": content[0]["text"] if plain else content}]
    foreign = _enc.foreign(message, "openai-responses")
    items: list[dict[str, Any]] = []
    open_id: tuple[str, str] | None = None  # (kind, id) of the item the last part grew
    for _, part in kept:
        if isinstance(part, ToolCall):
            items.append(call_item(part, foreign))
            open_id = None
        elif part.type == "thinking":
            item_id = str(part.options["id"])
            if open_id != ("reasoning", item_id):
                items.append({"type": "reasoning", "id": item_id, "summary": []})
                open_id = ("reasoning", item_id)
            _grow_reasoning(items[-1], part)
        elif part.type == "unsupported":
            items.append(dict(part.options["block"]))
            open_id = None
        else:
            text_id = part.options.get("id")
            if foreign or not isinstance(text_id, str):
                items.append(_easy_message(part, inferred))
                open_id = None
                continue
            if open_id != ("message", text_id):
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "id": text_id,
                        "status": "completed",
                        "content": [],
                    }
                )
                open_id = ("message", text_id)
                phase = _phase(part, inferred)
                if phase is not None:
                    items[-1]["phase"] = phase
            items[-1]["content"].append(_output_part(part))
    return items


def _phase(part: ContentPart, inferred: bool) -> str | None:
    """The part's phase: its provider's marker; an inferred one only when asked for."""
    marker = _utterance(part)
    if marker is not None and (inferred or not _utterance_inferred(part)):
        return _PHASE_OF[marker]
    phase = part.options.get("phase")
    return phase if phase in ("commentary", "final_answer") else None


def _grow_reasoning(item: dict[str, Any], part: ContentPart) -> None:
    kind = part.options.get("type")
    text = part.content or ""
    if kind == "reasoning_text":
        item.setdefault("content", []).append({"type": "reasoning_text", "text": text})
    elif kind != "reasoning" or text:
        item["summary"].append({"type": "summary_text", "text": text})
    encrypted = part.options.get("encrypted_content")
    if isinstance(encrypted, str):
        item["encrypted_content"] = encrypted


def _easy_message(part: ContentPart, inferred: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "message", "role": "assistant", "content": part.content or ""}
    phase = _phase(part, inferred)
    if phase is not None:
        item["phase"] = phase
    return item


def _output_part(part: ContentPart) -> dict[str, Any]:
    if part.options.get("refusal"):
        return {"type": "refusal", "refusal": part.content or ""}
    annotations = [c.metadata.get("annotation") for c in part.citations]
    return {
        "type": "output_text",
        "text": part.content or "",
        "annotations": [a for a in annotations if isinstance(a, dict)],
    }


def call_item(call: ToolCall, foreign: bool = False) -> dict[str, Any]:
    """A tool call as the Responses item it was: function_call, custom_tool_call, or an
    item the caller runs (computer_call...) rebuilt from its arguments and item fields."""
    item: dict[str, Any]
    kind = call.metadata.get("type")
    if kind in CLIENT_CALL_INPUTS and isinstance(call.arguments, dict):
        # The item as streamed: its other fields, then its input.
        fields = call.metadata.get("item_fields")
        item = {"type": kind, "call_id": call.call_id}
        item.update(fields if isinstance(fields, dict) else {"status": "completed"})
        item.update(call.arguments)
    elif kind == "custom_tool_call" and isinstance(call.arguments, dict):
        item = {
            "type": "custom_tool_call",
            "call_id": call.call_id,
            "name": call.name or "",
            "input": str(call.arguments.get("input", "")),
        }
    else:
        item = {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name or "",
            "arguments": _enc.arguments_text(call),
        }
    item_id = call.metadata.get("item_id")
    if not foreign and isinstance(item_id, str):
        item["id"] = item_id
    return item


def _call_types(message: Message) -> dict[str, str]:
    """The item type of each call a message made that is not a function call (and of each
    MCP approval request it is waiting on: answered by a tool result too)."""
    types = {
        call.call_id: kind
        for call in message.tool_calls
        if call.call_id
        and isinstance(kind := call.metadata.get("type"), str)
        and (kind == "custom_tool_call" or kind in CLIENT_CALL_INPUTS)
    }
    if message.role == "assistant":
        types.update(dict.fromkeys(pending_approvals(message.content), APPROVAL_REQUEST))
    return types


def _call_output(result: ToolResult, mi: int, call_types: Mapping[str, str]) -> dict[str, Any]:
    kind = call_types.get(result.tool_call_id)
    if kind == APPROVAL_REQUEST:
        return _approval_response(result)
    if kind in CLIENT_CALL_INPUTS:
        return _client_output(str(kind), result, mi)
    output: str | list[dict[str, Any]]
    if isinstance(result.content, str):
        output = result.content
    else:
        output = [_input_part(p, mi) for p in result.content if p.type in _USER_PARTS]
    kind = "custom_tool_call_output" if kind == "custom_tool_call" else "function_call_output"
    return {"type": kind, "call_id": result.tool_call_id, "output": output}


def _approval_response(result: ToolResult) -> dict[str, Any]:
    """The mcp_approval_response answering an approval request: `options["approve"]` is
    the decision (anything but True refuses: no tool runs on a guess); the result's text,
    when there is any, goes as the reason."""
    item: dict[str, Any] = {
        "type": "mcp_approval_response",
        "approval_request_id": result.tool_call_id,
        "approve": result.options.get("approve") is True,
    }
    reason = _enc.result_text(result)
    if reason:
        item["reason"] = reason
    return item


def _client_output(kind: str, result: ToolResult, mi: int) -> dict[str, Any]:
    """The *_output item for a call the caller ran. `result.options["output"]`, when set,
    is sent as the item's output as it is (a shell's several commands, say)."""
    call_id = result.tool_call_id
    native = result.options.get("output")
    text = _enc.result_text(result)
    if kind == "computer_call":
        item: dict[str, Any] = {
            "type": "computer_call_output",
            "call_id": call_id,
            "output": native if isinstance(native, dict) else _screenshot(result, mi),
        }
        checks = result.options.get("acknowledged_safety_checks")
        if isinstance(checks, list):
            item["acknowledged_safety_checks"] = checks
        return item
    if kind == "local_shell_call":
        # This item names its call by `id` (the call's id), not `call_id`.
        return {"type": "local_shell_call_output", "id": call_id, "output": text}
    if kind == "shell_call":
        outcome = {"type": "exit", "exit_code": 1 if result.is_error else 0}
        output = native if isinstance(native, list) else [
            {"stdout": "" if result.is_error else text,
             "stderr": text if result.is_error else "", "outcome": outcome}
        ]  # fmt: skip
        return {"type": "shell_call_output", "call_id": call_id, "output": output}
    status = "failed" if result.is_error else "completed"
    return {"type": "apply_patch_call_output", "call_id": call_id, "status": status, "output": text}


def _screenshot(result: ToolResult, mi: int) -> dict[str, Any]:
    """A computer call's output: the result's first image (check_replayable wants one)."""
    image = _result_image(result)
    url = "" if image is None else _input_part(image, mi)["image_url"]
    return {"type": "computer_screenshot", "image_url": url}


def _result_image(result: ToolResult) -> ContentPart | None:
    if isinstance(result.content, str):
        return None
    return next((p for p in result.content if p.type in ("image", "image_url")), None)


def _input_part(part: ContentPart, mi: int) -> dict[str, Any]:
    out: dict[str, Any]
    if part.type == "unsupported":
        return dict(part.options["block"])
    if part.type == "text":
        out = {"type": "input_text", "text": part.content or ""}
    elif part.type in ("image", "image_url"):
        url = _enc.data_url(part, mi) if part.type == "image" else part.content or ""
        detail = part.options.get("detail")
        out = {"type": "input_image", "image_url": url, "detail": detail or "auto"}
    elif part.type == "file":
        out = {"type": "input_file", "file_data": _enc.data_url(part, mi, "application/pdf")}
        if isinstance(part.options.get("filename"), str):
            out["filename"] = part.options["filename"]
    else:  # file_url
        out = {"type": "input_file", "file_url": part.content or ""}
    breakpoint_ = part.options.get("prompt_cache_breakpoint")
    if isinstance(breakpoint_, dict):
        out["prompt_cache_breakpoint"] = breakpoint_
    return out


def responses_tool(tool: _enc.Tool) -> dict[str, Any]:
    """A function tool in the flat Responses form (strict null means the API default)."""
    if tool.native is not None:
        return tool.native
    out: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    out["parameters"] = tool.parameters
    out["strict"] = tool.strict
    return out


def responses_tool_choice(choice: _enc.ToolChoice) -> Any:
    """tool_choice: "auto" / "required" / "none" / {"type": "function", "name": ...}."""
    if choice.mode == "native":
        return choice.native
    if choice.mode == "function":
        return {"type": "function", "name": choice.name}
    return choice.mode


def responses_format(fmt: _enc.ResponseFormat) -> dict[str, Any]:
    """response_format as text.format (json_schema flat, `strict: false` kept)."""
    if fmt.native is not None:
        return fmt.native
    if fmt.type != "json_schema":
        return {"type": fmt.type}
    out: dict[str, Any] = {"type": "json_schema"}
    for key, value in (
        ("name", fmt.name),
        ("description", fmt.description),
        ("schema", fmt.schema),
        ("strict", fmt.strict),
    ):
        if value is not None:
            out[key] = value
    return out
