"""Request bodies checked as the real APIs check them, before a replay answers.

The schema of each API is the official SDK's own request type, validated with pydantic:

    chat       openai.types.chat.completion_create_params.CompletionCreateParamsBase
    responses  openai.types.responses.response_create_params.ResponseCreateParamsBase
    messages   anthropic.types.message_create_params.MessageCreateParamsBase
               (the beta one when the request sends `anthropic-beta`)
    invoke     the same, for Claude on Bedrock (the model is in the path)
    gemini     google.genai.types: Content, Tool, ToolConfig, GenerationConfig, ...
    converse   Bedrock's Converse input shape, as botocore's service model publishes it

On top of the types, the rules they cannot say, which the real APIs enforce: a tool result
answers a call of an earlier assistant turn (Chat Completions: the `tool_calls` just
before; Responses: a call item earlier in `input`, unless the history lives on the server;
Messages: a `tool_use` of the previous assistant message; Gemini: a `functionCall` of the
previous model turn; Converse: a `toolUse` of the previous assistant message). The types
alone already refuse an unknown content type, a thinking block without its signature and
a reasoning item without its id.

`check_request(api, body)` raises `RequestInvalid(message, param)`, with the path of the
offending field in the API's own notation and previews of bounded length.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from ..errors import preview

Api = Literal["chat", "responses", "messages", "gemini", "invoke", "converse"]

_PREVIEW = 80  # characters of a value quoted in an error message


class RequestInvalid(Exception):
    """A request body the real API would refuse with a 400; `param` is the field's path."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def check_request(api: Api, body: dict[str, Any], *, beta: bool = False) -> None:
    """Refuse (RequestInvalid) a body the API's request schema or rules refuse."""
    if api == "chat":
        _validate(_openai_chat(), body, _dotted_brackets, "openai")
        _chat_tool_results(body)
    elif api == "responses":
        _validate(_openai_responses(), _responses_relaxed(body), _dotted_brackets, "openai")
        _responses_tool_results(body)
    elif api in ("messages", "invoke"):
        if api == "invoke":
            body = {**body, "model": "bedrock"}  # Bedrock names the model in the path
        adapter = _anthropic_beta() if beta else _anthropic()
        _validate(adapter, body, _dotted, "anthropic")
        _anthropic_tool_results(body)
    elif api == "converse":
        _converse_check(body)
    else:
        _gemini_check(body)


def prepare() -> None:
    """Import the SDKs and build every schema now (seconds on a busy machine), so the
    first request does not wait for them: a server calls this as it starts."""
    _openai_chat()
    _openai_responses()
    _anthropic()
    _anthropic_beta()
    _gemini_fields()
    _converse_shape()
    _nullable_fields()


# --- the schemas (built once: the SDKs are imported only then) -----------------------


# Each is None when its SDK is not installed (the `serve` extra installs them all): the
# rules below still hold then, the types are not checked.


@functools.cache
def _openai_chat() -> Any:
    try:
        from openai.types.chat.completion_create_params import CompletionCreateParamsBase
    except ImportError:
        return None
    from pydantic import TypeAdapter

    return TypeAdapter(CompletionCreateParamsBase)


@functools.cache
def _openai_responses() -> Any:
    try:
        from openai.types.responses.response_create_params import ResponseCreateParamsBase
    except ImportError:
        return None
    from pydantic import TypeAdapter

    return TypeAdapter(ResponseCreateParamsBase)


@functools.cache
def _anthropic() -> Any:
    try:
        from anthropic.types.message_create_params import MessageCreateParamsBase
    except ImportError:
        return None
    from pydantic import TypeAdapter

    return TypeAdapter(MessageCreateParamsBase)


@functools.cache
def _anthropic_beta() -> Any:
    try:
        from anthropic.types.beta.message_create_params import MessageCreateParamsBase
    except ImportError:
        return None
    from pydantic import TypeAdapter

    return TypeAdapter(MessageCreateParamsBase)


@functools.cache
def _gemini_fields() -> dict[str, Any]:
    """The GenerateContentRequest's fields (REST names) and the SDK type of each."""
    try:
        from google.genai import types
    except ImportError:
        return {}
    from pydantic import TypeAdapter

    return {
        "contents": TypeAdapter(list[types.Content]),
        "systemInstruction": TypeAdapter(types.Content),
        "tools": TypeAdapter(list[types.Tool]),
        "toolConfig": TypeAdapter(types.ToolConfig),
        "safetySettings": TypeAdapter(list[types.SafetySetting]),
        "generationConfig": TypeAdapter(types.GenerationConfig),
        "cachedContent": TypeAdapter(str),
    }


def _responses_relaxed(body: dict[str, Any]) -> dict[str, Any]:
    """The body with what the SDK's request type requires but the API fills in itself.

    An assistant message sent back in `input` needs no `id` nor `status` (clients such as
    langchain-openai leave them out and the API answers); the SDK types one with output
    parts as `ResponseOutputMessageParam`, which requires both. Likewise an output item's
    `status` (the server's own), and a field the types require but allow to be null
    (`Required[Optional[...]]`: a function tool's `strict`, a code interpreter call's
    `outputs`): left out, they are taken as completed and null.
    """
    nullable_items, nullable_tools = _nullable_fields()
    relaxed = dict(body)
    items = body.get("input")
    if isinstance(items, list):
        relaxed["input"] = [_with_nulls(_as_message(item), nullable_items) for item in items]
    tools = body.get("tools")
    if isinstance(tools, list):
        relaxed["tools"] = [_with_nulls(tool, nullable_tools) for tool in tools]
    return relaxed


def _as_message(item: Any) -> Any:
    if (
        isinstance(item, dict)
        and item.get("role") == "assistant"
        and item.get("type", "message") == "message"
        and isinstance(item.get("content"), list)
    ):
        return {"type": "message", "id": "msg", "status": "completed", **item}
    return item


def _with_nulls(item: Any, nullable: dict[str, tuple[str, ...]]) -> Any:
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        return item
    fields = nullable.get(item["type"], ())
    if not fields:
        return item
    filled = {name: "completed" if name == "status" else None for name in fields}
    return {**filled, **item}


@functools.cache
def _nullable_fields() -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """The Responses input items' and tools' required-but-nullable fields (and required
    `status`), by `type`, read from the SDK's types."""
    try:
        from openai.types.responses.response_input_item_param import ResponseInputItemParam
        from openai.types.responses.tool_param import ToolParam
    except ImportError:
        return {}, {}
    return _required_nullable(ResponseInputItemParam), _required_nullable(ToolParam)


def _required_nullable(union: Any) -> dict[str, tuple[str, ...]]:
    import typing

    import typing_extensions as te

    found: dict[str, tuple[str, ...]] = {}
    for member in typing.get_args(union):
        if not te.is_typeddict(member):
            continue
        hints = te.get_type_hints(member, include_extras=True)
        fields: list[str] = []
        for name, hint in hints.items():
            origin: Any = te.get_origin(hint)
            if origin is not te.Required:
                continue
            inner = typing.get_args(hint)[0]
            origin = te.get_origin(inner)
            if origin is te.Annotated:
                inner = typing.get_args(inner)[0]
            if type(None) in typing.get_args(inner) or name == "status":
                fields.append(name)
        kind = hints.get("type")
        if kind is None or not fields:
            continue
        origin = te.get_origin(kind)
        if origin is te.Required or origin is te.NotRequired:
            kind = typing.get_args(kind)[0]
        for tag in typing.get_args(kind):
            if isinstance(tag, str):
                found[tag] = tuple(fields)
    return found


@functools.cache
def _converse_shape() -> Any:
    try:
        import botocore.session  # type: ignore[import-untyped]
    except ImportError:
        return None
    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    return model.operation_model("Converse").input_shape


# --- validation, and an error message a person can read ------------------------------


def _validate(
    adapter: Any, body: dict[str, Any], path_of: Callable[[Sequence[Any]], str], api: str
) -> None:
    from pydantic import ValidationError

    if adapter is None:
        return
    try:
        _drain(adapter.validate_python(body), ())
    except _NestedInvalid as exc:
        raise _invalid(exc.errors, body, path_of, api) from None
    except ValidationError as exc:
        raise _invalid(exc.errors(), body, path_of, api) from None


class _NestedInvalid(Exception):
    def __init__(self, errors: list[Any]) -> None:
        super().__init__("invalid")
        self.errors = errors


def _drain(value: Any, loc: tuple[Any, ...]) -> None:
    """Run the validation pydantic defers: the SDKs type lists as `Iterable`, which it
    checks lazily, item by item as they are read. Errors get the path from the root."""
    from pydantic import ValidationError

    if isinstance(value, dict):
        for key, item in value.items():
            _drain(item, (*loc, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _drain(item, (*loc, index))
    elif isinstance(value, Iterator):  # pydantic's ValidatorIterator
        try:
            for index, item in enumerate(value):
                _drain(item, (*loc, index))
        except ValidationError as exc:
            errors = [{**error, "loc": (*loc, *error["loc"])} for error in exc.errors()]
            raise _NestedInvalid(errors) from None


def _real_path(body: Any, loc: Sequence[Any]) -> tuple[Any, ...]:
    """The path in the body of an error's `loc`, without pydantic's union member names."""
    path: list[Any] = []
    here = body
    last = len(loc) - 1
    for number, step in enumerate(loc):
        inside = (isinstance(here, dict) and isinstance(step, str) and step in here) or (
            isinstance(here, list) and isinstance(step, int) and 0 <= step < len(here)
        )
        if number == last:
            pass  # the field itself, there or missing (never a member's name)
        elif inside:
            here = here[step]
        elif isinstance(step, str) and isinstance(here, dict | list):
            continue  # a union member's name: not a place in the body
        else:
            here = None
        path.append(step)
    return tuple(path)


def _is_tag(error: Any) -> bool:
    """A union member refused on its tag (`type` or `role` literal): not the one meant."""
    loc = error["loc"]
    return error["type"] == "literal_error" and bool(loc) and loc[-1] in ("type", "role")


def _invalid(
    errors: list[Any], body: Any, path_of: Callable[[Sequence[Any]], str], api: str
) -> RequestInvalid:
    # A union's members each report why they did not fit. Those refused on their tag were
    # not what the client meant; of the rest, the deepest error is the one to show.
    # When the deepest refusal is a tag, no member has it: the tag itself is unknown.
    tags = [tuple(e["loc"][:-1]) for e in errors if _is_tag(e)]
    meant = [e for e in errors if not _is_tag(e) and not any(e["loc"][: len(t)] == t for t in tags)]
    depth = max((len(_real_path(body, e["loc"])) for e in errors if _is_tag(e)), default=-1)
    if meant and max(len(_real_path(body, e["loc"])) for e in meant) >= depth:
        error = max(meant, key=lambda e: len(_real_path(body, e["loc"])))
        path = _real_path(body, error["loc"])
        param = path_of(path)
        if error["type"] == "missing":
            if api == "openai":
                return RequestInvalid(f"Missing required parameter: {param!r}.", param)
            return RequestInvalid(f"{param}: Field required", param)
        if error["type"] == "extra_forbidden":
            field = path[-1] if path else ""
            where = path_of(path[:-1])
            return RequestInvalid(
                f"Invalid JSON payload received. Unknown name {preview(field, _PREVIEW)} "
                f"at {where!r}: Cannot find field.",
                param,
            )
        message = str(error["msg"])
        got = preview(error.get("input"), _PREVIEW)
        return RequestInvalid(f"{param}: {message} (got {got})", param)
    # The tag is unknown: name the ones that exist.
    deepest = max((e for e in errors if _is_tag(e)), key=lambda e: len(_real_path(body, e["loc"])))
    path = _real_path(body, deepest["loc"])
    expected = sorted(
        {
            str(e.get("ctx", {}).get("expected", ""))
            for e in errors
            if _is_tag(e) and _real_path(body, e["loc"]) == path
        }
    )
    param = path_of(path)
    got = preview(deepest.get("input"), _PREVIEW)
    supported = ", ".join(expected)
    if len(supported) > 600:
        supported = supported[:600] + "..."
    return RequestInvalid(
        f"Invalid value: {got} at {param!r}. Supported values are: {supported}.", param
    )


def _dotted_brackets(path: Sequence[Any]) -> str:
    """OpenAI's notation: `messages[1].content[0].type`."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            out += ("." if out else "") + preview(step, _PREVIEW).strip("'\"")
    return out


def _dotted(path: Sequence[Any]) -> str:
    """Anthropic's notation: `messages.1.content.0.signature`."""
    return ".".join(preview(step, _PREVIEW).strip("'\"") for step in path)


# --- the rules the types cannot say: a tool result answers an earlier call -----------


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _chat_tool_results(body: dict[str, Any]) -> None:
    messages = _items(body.get("messages"))
    calls: set[Any] | None = None  # the ids the last assistant turn called; None: no turn
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            calls = {
                call.get("id")
                for call in _items(message.get("tool_calls"))
                if isinstance(call, dict)
            }
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not calls:
                raise RequestInvalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'.",
                    f"messages[{index}].role",
                )
            if call_id not in calls:
                raise RequestInvalid(
                    f"Invalid parameter: 'tool_call_id' of {preview(call_id, _PREVIEW)} not "
                    "found in 'tool_calls' of the preceding message.",
                    f"messages[{index}].tool_call_id",
                )
        else:
            calls = None  # a tool message must follow its call, nothing else between


_OUTPUT_OF = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "computer_call_output": "computer_call",
}


def _responses_tool_results(body: dict[str, Any]) -> None:
    if body.get("previous_response_id") or body.get("conversation"):
        return  # the calls may be in the history the server keeps
    items = _items(body.get("input"))
    if any(isinstance(item, dict) and item.get("type") == "item_reference" for item in items):
        return  # a referenced item may be the call
    seen: set[Any] = set()  # the call ids so far (an output may answer a call of any kind)
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if isinstance(kind, str) and kind.endswith("_call") and "call_id" in item:
            seen.add(item.get("call_id"))
        elif kind in _OUTPUT_OF:
            call_id = item.get("call_id")
            if call_id not in seen:
                kind_name = str(kind).removesuffix("_output").replace("_", " ")
                raise RequestInvalid(
                    f"No tool call found for {kind_name} output with call_id "
                    f"{preview(call_id, _PREVIEW)}.",
                    f"input[{index}].call_id",
                )


def _anthropic_tool_results(body: dict[str, Any]) -> None:
    used: set[Any] = set()  # the tool_use ids of the last assistant message
    for index, message in enumerate(_items(body.get("messages"))):
        if not isinstance(message, dict):
            continue
        blocks = [b for b in _items(message.get("content")) if isinstance(b, dict)]
        if message.get("role") == "assistant":
            used = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
            continue
        for number, block in enumerate(_items(message.get("content"))):
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            if block.get("tool_use_id") not in used:
                where = f"messages.{index}.content.{number}"
                raise RequestInvalid(
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{preview(block.get('tool_use_id'), _PREVIEW)}. Each `tool_result` block "
                    "must have a corresponding `tool_use` block in the previous message.",
                    where,
                )


def _gemini_check(body: dict[str, Any]) -> None:
    from pydantic import ValidationError

    for name, adapter in _gemini_fields().items():
        if name not in body:
            continue
        try:
            adapter.validate_python(body[name])
        except ValidationError as exc:
            errors = [{**e, "loc": (name, *e["loc"])} for e in exc.errors()]
            raise _invalid(errors, body, _dotted_brackets, "gemini") from None
    called: set[Any] = set()  # the functions the previous model turn called
    for index, content in enumerate(_items(body.get("contents"))):
        if not isinstance(content, dict):
            continue
        parts = [p for p in _items(content.get("parts")) if isinstance(p, dict)]
        if content.get("role") == "model":
            called = {
                p["functionCall"].get("name")
                for p in parts
                if isinstance(p.get("functionCall"), dict)
            }
            continue
        for number, part in enumerate(parts):
            response = part.get("functionResponse")
            if isinstance(response, dict) and response.get("name") not in called:
                raise RequestInvalid(
                    "Please ensure that function response turn comes immediately after a "
                    f"function call turn: {preview(response.get('name'), _PREVIEW)} at "
                    f"'contents[{index}].parts[{number}]' answers no call of the previous "
                    "model turn.",
                    f"contents[{index}].parts[{number}]",
                )
        called = set()


def _converse_check(body: dict[str, Any]) -> None:
    shape = _converse_shape()
    if shape is not None:
        from botocore.validate import ParamValidator  # type: ignore[import-untyped]

        report = ParamValidator().validate({**body, "modelId": "bedrock"}, shape)
        if report.has_errors():
            text = " ".join(report.generate_report().split())
            if len(text) > 600:  # it quotes unknown names, which the client chose
                text = text[:600] + "... (more)"
            errors = getattr(report, "_errors", None) or [(None, None)]  # (kind, path, ...)
            where = errors[0][1]
            param = str(where).lstrip(".") if where else None
            raise RequestInvalid(f"Validation error: {text}", param)
    used: set[Any] = set()  # the toolUse ids of the last assistant message
    for index, message in enumerate(_items(body.get("messages"))):
        if not isinstance(message, dict):
            continue
        blocks = [b for b in _items(message.get("content")) if isinstance(b, dict)]
        if message.get("role") == "assistant":
            used = {
                b["toolUse"].get("toolUseId") for b in blocks if isinstance(b.get("toolUse"), dict)
            }
            continue
        for number, block in enumerate(blocks):
            result = block.get("toolResult")
            if isinstance(result, dict) and result.get("toolUseId") not in used:
                where = f"messages.{index}.content.{number}"
                raise RequestInvalid(
                    f"The toolResult block at {where} has toolUseId "
                    f"{preview(result.get('toolUseId'), _PREVIEW)}, which no toolUse block of "
                    "the previous assistant turn has.",
                    where,
                )


__all__ = ["RequestInvalid", "check_request", "prepare"]
