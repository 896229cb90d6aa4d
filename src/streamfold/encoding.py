"""Messages -> provider request bodies: the one public entry point, `encode`.

`encode(messages, provider, **params)` returns the JSON body of an OpenAI Chat Completions,
OpenAI Responses, Anthropic Messages or Gemini generateContent request. This module owns
what every provider shares: the seed's shorthand messages (a bare string, `{"text": ...}`,
`{"image": url}`, `{"text": ..., "image": ...}`, `{"role": ..., "content": ...}`) turned
into `Message`s, the common tools / tool_choice / response_format forms, and
`check_replayable`, the list of what a provider would reject. Each provider module renders
the request in its own encoding section.

What cannot carry over to the target is left out with a `ReplayWarning` (or raises
`EncodeError` with `strict=True`), never sent malformed: a thinking part without a
signature (Anthropic), a signature that another provider issued, thinking on OpenAI Chat
(which has no field for it), a provider's opaque block sent to another provider.
"""

from __future__ import annotations

import importlib
import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jiter

from .arguments import check_bool
from .errors import UsageError
from .message import Message, ToolCall, ToolResult, pending_approvals
from .parts import ContentPart
from .providers import canonical_provider

ENCODERS: dict[str, str] = {
    "openai-chat": "streamfold.providers.openai_chat",
    "openai-responses": "streamfold.providers.openai_responses",
    "anthropic": "streamfold.providers.anthropic",
    "gemini": "streamfold.providers.gemini",
    "bedrock-invoke": "streamfold.providers.bedrock_invoke",
}

_ROLES = ("system", "developer", "user", "assistant", "tool")
_SHORTHAND_KEYS = frozenset({"role", "content", "text", "image"})


class EncodeError(UsageError):
    """A message cannot be encoded for the provider; `index` names the offending message."""

    def __init__(self, reason: str, *, index: int | None = None, provider: str | None = None):
        self.reason = reason
        self.index = index
        self.provider = provider
        where = f"messages[{index}]: " if index is not None else ""
        target = f" (encoding for {provider})" if provider else ""
        super().__init__(f"{where}{reason}{target}")


class ReplayWarning(UserWarning):
    """A part that cannot be replayed to the target provider was left out of the request."""


ProblemCode = Literal[
    "empty_signature",
    "foreign_signature",
    "not_replayable",
    "thinking_out_of_order",
    "tool_call_without_id",
    "tool_call_bad_arguments",
    "tool_result_without_call",
    "reasoning_without_id",
    "computer_output_without_screenshot",
    "approval_without_decision",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """Something in a message the target provider would reject.

    `part` is the position in `message.stream_order()` (None for the whole message);
    `droppable` problems are left out with a ReplayWarning, the others always raise.
    """

    code: ProblemCode
    reason: str
    message_index: int | None = None
    part: int | None = None
    droppable: bool = False

    def __str__(self) -> str:
        where = [] if self.message_index is None else [f"messages[{self.message_index}]"]
        if self.part is not None:
            where.append(f"part {self.part}")
        return (" ".join(where) + ": " if where else "") + f"{self.code}: {self.reason}"


# --- public entry points -------------------------------------------------------------------


def encode(
    messages: Any,
    provider: str = "openai-chat",
    *,
    strict: bool = False,
    instructions: str | Sequence[str] | None = None,
    tools: Sequence[Any] | None = None,
    tool_choice: Any = None,
    response_format: Any = None,
    inferred_utterances: bool = False,
    **params: Any,
) -> dict[str, Any]:
    """Encode messages (Messages or shorthands) as the provider's JSON request body.

    A narration / answer marker goes back (as Responses `phase`) only when the provider
    said it; `inferred_utterances=True` sends the markers streamfold inferred as well.
    """
    check_bool("encode", "strict", strict)
    check_bool("encode", "inferred_utterances", inferred_utterances)
    target = _target(provider)
    history = normalize_messages(messages, target)
    skip = _resolve_problems(history, target, strict)
    request = RequestParams(
        instructions=normalize_instructions(instructions),
        tools=normalize_tools(tools),
        tool_choice=normalize_tool_choice(tool_choice),
        response_format=normalize_response_format(response_format),
        extra={k: v for k, v in params.items() if v is not None},
        strict=strict,
        inferred_utterances=inferred_utterances,
    )
    module = importlib.import_module(ENCODERS[target])
    body: dict[str, Any] = module.encode_request(history, request, skip)
    _check_json_body(body)
    return body


def check_replayable(message: Message | Sequence[Message], provider: str) -> list[Problem]:
    """List what the provider would reject in a message (or a whole history, in order)."""
    target = _target(provider)
    history = [message] if isinstance(message, Message) else list(message)
    for i, item in enumerate(history):
        if not isinstance(item, Message):
            raise EncodeError(
                f"check_replayable: expected a Message, got {type(item).__name__}", index=i
            )
    module = importlib.import_module(ENCODERS[target])
    problems = common_problems(history, target)
    provider_problems: Callable[[list[Message]], list[Problem]] = module.replay_problems
    problems.extend(provider_problems(history))
    return sorted(problems, key=lambda p: (p.message_index or 0, -1 if p.part is None else p.part))


def _target(provider: str) -> str:
    target = canonical_provider(provider)
    if target not in ENCODERS:
        raise EncodeError(
            f"provider: expected one of {', '.join(ENCODERS)} to encode for, got {provider!r}"
        )
    return target


def _resolve_problems(history: list[Message], target: str, strict: bool) -> frozenset[PartRef]:
    skip: set[PartRef] = set()
    for problem in check_replayable(history, target):
        if strict or not problem.droppable or problem.part is None:
            raise EncodeError(
                f"{problem.code}: {problem.reason}",
                index=problem.message_index,
                provider=target,
            )
        warnings.warn(f"left out of the request: {problem}", ReplayWarning, stacklevel=3)
        skip.add((problem.message_index or 0, problem.part))
    return frozenset(skip)


PartRef = tuple[int, int]
"""(message index, position in stream_order()) of a part to leave out."""


def _check_json_body(body: dict[str, Any]) -> None:
    try:
        json.dumps(body, allow_nan=False)
    except (TypeError, ValueError) as exc:  # pragma: no cover - a bug in an encoder
        raise EncodeError(f"the encoded request is not plain JSON: {exc}") from None


# --- replay checks ---------------------------------------------------------------------------


def origin(message: Message) -> str | None:
    """The canonical provider a message was folded from, or None (built by hand)."""
    name = message.metadata.get("provider")
    if not isinstance(name, str):
        return None
    try:
        return canonical_provider(name)
    except UsageError:
        return name


def foreign(message: Message, target: str) -> bool:
    """True when the message came from another provider than `target`."""
    source = origin(message)
    if source == "bedrock-invoke":
        # Claude on Bedrock streams the Anthropic API's own blocks (their signatures are
        # valid on either): it is native to an Anthropic target, Nova's is not.
        source = message.metadata.get("invoke_format", source)
    return source is not None and source != target


def common_problems(history: list[Message], target: str) -> list[Problem]:
    """Problems every provider shares: call ids, and tool results matching their calls."""
    problems: list[Problem] = []
    known: set[str] = set()
    by_id = target != "gemini"  # Gemini matches results to calls by name
    for mi, message in enumerate(history):
        if message.role == "assistant":
            if target == "openai-responses":
                # An MCP approval request is answered like a call: a tool result for its id.
                known.update(pending_approvals(message.content))
            for pi, item in enumerate(message.stream_order()):
                if not isinstance(item, ToolCall):
                    continue
                if item.call_id:
                    known.add(item.call_id)
                elif by_id:
                    problems.append(
                        Problem(
                            "tool_call_without_id",
                            f"tool call {item.name!r} has no call_id; {target} needs one to "
                            "match its result",
                            mi,
                            pi,
                        )
                    )
        elif message.role == "tool":
            for result in message.tool_results:
                # A lone tool message has no history to check; Gemini checks names itself.
                if by_id and len(history) > 1 and result.tool_call_id not in known:
                    problems.append(
                        Problem(
                            "tool_result_without_call",
                            f"tool result for {result.tool_call_id!r} follows no tool call "
                            "with that id",
                            mi,
                        )
                    )
    return problems


def arguments_problem(call: ToolCall, mi: int, pi: int) -> Problem | None:
    """A problem when a call's arguments are not a JSON object (its raw text was kept)."""
    if isinstance(call.arguments, dict) or call.arguments is None:
        return None
    try:
        value = jiter.from_json(call.arguments.encode()) if call.arguments.strip() else {}
    except ValueError:
        value = None
    if isinstance(value, dict):
        return None
    return Problem(
        "tool_call_bad_arguments",
        f"tool call {call.call_id!r} ({call.name!r}) has arguments that are not a JSON "
        f"object: {call.arguments[:80]!r}",
        mi,
        pi,
    )


def call_arguments(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as a dict (complete calls hold one; streamed text is parsed)."""
    args = call.arguments
    if isinstance(args, dict):
        return args
    if not args or not args.strip():
        return {}
    value = jiter.from_json(args.encode())
    return value if isinstance(value, dict) else {}


def arguments_text(call: ToolCall) -> str:
    """A call's arguments as the JSON text OpenAI expects (raw text kept when unparsed)."""
    args = call.arguments
    if isinstance(args, str):
        return args or "{}"
    return json.dumps(args or {}, ensure_ascii=False)


def dropped(message: Message, target: str, mi: int, pi: int, what: str) -> Problem:
    """A droppable problem: the part cannot be carried over to `target`."""
    source = origin(message)
    tail = f" (folded from {source})" if source and source != target else ""
    return Problem("not_replayable", f"{target} cannot carry {what}{tail}", mi, pi, True)


# --- request parameters -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestParams:
    """The request parameters in common form, for a provider module to render."""

    instructions: list[str]
    tools: list[Tool]
    tool_choice: ToolChoice | None
    response_format: ResponseFormat | None
    extra: dict[str, Any]
    strict: bool = False
    inferred_utterances: bool = False  # send inferred narration / answer markers too


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool: a function in common form, or a provider-native tool passed through."""

    native: dict[str, Any] | None = None
    name: str = ""
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """auto / required / none, one named function, or a provider-native choice."""

    mode: Literal["auto", "required", "none", "function", "native"]
    name: str | None = None
    native: Any = None


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """text, json_object, json_schema (name, schema, strict kept even when False), or native."""

    type: str
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None
    native: dict[str, Any] | None = None


def normalize_instructions(instructions: str | Sequence[str] | None) -> list[str]:
    """Instructions as a list of strings (one string, several, or none)."""
    if instructions is None:
        return []
    if isinstance(instructions, str):
        return [instructions]
    out: list[str] = []
    for i, item in enumerate(instructions):
        if not isinstance(item, str):
            raise EncodeError(f"instructions[{i}]: expected a string, got {type(item).__name__}")
        out.append(item)
    return out


def normalize_tools(tools: Sequence[Any] | None) -> list[Tool]:
    """Tools from the common `{name, description, parameters | input_schema}` or nested forms."""
    if tools is None:
        return []
    if isinstance(tools, dict | str):
        raise EncodeError(f"tools: expected a list of tools, got {type(tools).__name__}")
    out: list[Tool] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise EncodeError(f"tools[{i}]: expected a dict, got {type(tool).__name__}")
        kind = tool.get("type")
        body: dict[str, Any] | None = None
        if kind == "function" and isinstance(tool.get("function"), dict):
            body = tool["function"]  # the nested Chat form
        elif isinstance(tool.get("name"), str) and kind in (None, "function"):
            body = tool  # the common form, or the flat Responses form
        if body is None:
            out.append(Tool(native=dict(tool)))  # a provider's own tool (web search, ...)
            continue
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise EncodeError(f"tools[{i}]: expected a function name, got {name!r}")
        params = body.get("parameters", body.get("input_schema"))
        if params is not None and not isinstance(params, dict):
            raise EncodeError(f"tools[{i}]: expected parameters to be a JSON schema dict")
        strict = body.get("strict")
        out.append(
            Tool(
                name=name,
                description=body.get("description"),
                parameters=params,
                strict=strict if isinstance(strict, bool) else None,
            )
        )
    return out


def normalize_tool_choice(choice: Any) -> ToolChoice | None:
    """tool_choice from "auto" / "required" / "none" / {name} / a provider's nested form."""
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice in ("auto", "required", "none"):
            return ToolChoice(choice)  # type: ignore[arg-type]
        if choice == "any":
            return ToolChoice("required")
        raise EncodeError(
            f"tool_choice: expected 'auto', 'required', 'none' or {{'name': ...}}, got {choice!r}"
        )
    if isinstance(choice, dict):
        kind = choice.get("type")
        function = choice.get("function")
        if kind == "function" and isinstance(function, dict):
            name = function.get("name")
        elif kind in (None, "function", "tool") and isinstance(choice.get("name"), str):
            name = choice["name"]
        elif kind in ("auto", "none") and len(choice) == 1:
            return ToolChoice(kind)
        elif kind == "any" and len(choice) == 1:
            return ToolChoice("required")
        else:
            return ToolChoice("native", native=dict(choice))
        if not isinstance(name, str) or not name:
            raise EncodeError(f"tool_choice: expected a function name, got {name!r}")
        return ToolChoice("function", name=name)
    raise EncodeError(f"tool_choice: expected a str or dict, got {type(choice).__name__}")


def normalize_response_format(fmt: Any) -> ResponseFormat | None:
    """response_format: "json_object" / {type: json_schema, ...} (flat or nested) / text."""
    if fmt is None:
        return None
    if isinstance(fmt, str):
        return ResponseFormat(type=fmt)
    if not isinstance(fmt, dict):
        raise EncodeError(f"response_format: expected a str or dict, got {type(fmt).__name__}")
    kind = fmt.get("type")
    if kind == "json_schema":
        nested = fmt.get("json_schema")
        inner: dict[str, Any] = nested if isinstance(nested, dict) else {}

        def pick(key: str) -> Any:
            # `in`, not `or`: the seed's `||` turned `strict: false` into no strict at all.
            return fmt[key] if key in fmt else inner.get(key)

        schema = pick("schema")
        if schema is not None and not isinstance(schema, dict):
            raise EncodeError("response_format: expected schema to be a dict")
        strict = pick("strict")
        return ResponseFormat(
            type="json_schema",
            name=pick("name"),
            schema=schema,
            strict=strict if isinstance(strict, bool) else None,
            description=pick("description"),
        )
    if isinstance(kind, str):
        return ResponseFormat(type=kind)
    return ResponseFormat(type="native", native=dict(fmt))


# --- messages -----------------------------------------------------------------------------


def normalize_messages(messages: Any, target: str = "openai-chat") -> list[Message]:
    """Messages and the seed's shorthands as Messages; errors name the message index."""
    if messages is None:
        return []
    if isinstance(messages, str | dict | Message):
        messages = [messages]
    if not isinstance(messages, Sequence):
        raise EncodeError(f"messages: expected a list of messages, got {type(messages).__name__}")
    return [normalize_message(m, i, target) for i, m in enumerate(messages)]


def normalize_message(message: Any, index: int = 0, target: str = "openai-chat") -> Message:
    """One message: a Message, a string (a user message), or a shorthand dict."""
    if isinstance(message, Message):
        return message
    if isinstance(message, str):
        return Message.user(message)
    if not isinstance(message, dict):
        raise EncodeError(
            f"cannot normalise a {type(message).__name__} to a message "
            "(expected a Message, a str or a dict)",
            index=index,
        )
    role = message.get("role", "user")
    if role not in _ROLES:
        raise EncodeError(
            f"unknown message role {role!r}; expected one of {', '.join(_ROLES)}", index=index
        )
    if "content" in message:
        parts = normalize_content(message["content"], index)
    else:
        parts = []
        if "text" in message:
            parts.append(_text_part(message["text"], index))
        if "image" in message:
            parts.append(_image_part(message["image"], index))
    extra = {k: v for k, v in message.items() if k not in _SHORTHAND_KEYS}
    try:
        return _build_message(role, parts, extra, index)
    except EncodeError:
        raise
    except UsageError as exc:
        raise EncodeError(str(exc), index=index) from None


def _build_message(
    role: str, parts: list[ContentPart], extra: dict[str, Any], index: int
) -> Message:
    metadata: dict[str, Any] = {}
    if role == "tool":
        call_id = extra.pop("tool_call_id", None)
        if not isinstance(call_id, str) or not call_id:
            raise EncodeError("a tool message needs a tool_call_id", index=index)
        is_error = bool(extra.pop("is_error", False))
        name = extra.pop("name", None)
        content: str | list[ContentPart] = parts
        if all(p.type == "text" and not p.options for p in parts):
            content = "\n\n".join(p.content or "" for p in parts)
        result = ToolResult(tool_call_id=call_id, name=name, content=content, is_error=is_error)
        if extra:
            metadata["extra"] = extra
        return Message(role="tool", tool_results=[result], metadata=metadata)
    calls: list[ToolCall] = []
    if "tool_calls" in extra:
        if role != "assistant":
            raise EncodeError(
                f"only assistant messages carry tool_calls, got role {role!r}", index=index
            )
        calls = [_tool_call(c, index) for c in _list(extra.pop("tool_calls"), "tool_calls", index)]
    if isinstance(extra.get("name"), str):
        metadata["name"] = extra.pop("name")
    if role == "developer":
        metadata["role"] = "developer"
        role = "system"
    if extra:
        metadata["extra"] = extra  # other request fields, passed through by OpenAI Chat
    return Message(role=role, content=parts, tool_calls=calls, metadata=metadata)


def _list(value: Any, name: str, index: int) -> list[Any]:
    if not isinstance(value, list):
        raise EncodeError(f"expected {name} to be a list, got {type(value).__name__}", index=index)
    return value


def _tool_call(raw: Any, index: int) -> ToolCall:
    if not isinstance(raw, dict):
        raise EncodeError(
            f"expected each tool call to be a dict, got {type(raw).__name__}", index=index
        )
    function = raw.get("function")
    body: dict[str, Any] = function if isinstance(function, dict) else raw
    call_id = raw.get("id", raw.get("call_id"))
    name = body.get("name")
    args = body.get("arguments", body.get("input", {}))
    if isinstance(args, str):
        try:
            args = jiter.from_json(args.encode()) if args.strip() else {}
        except ValueError as exc:
            raise EncodeError(
                f"tool call {call_id!r}: arguments are not JSON ({exc})", index=index
            ) from None
    if not isinstance(args, dict):
        raise EncodeError(f"tool call {call_id!r}: expected arguments to be an object", index=index)
    return ToolCall(call_id=call_id, name=name, arguments=args, status="complete")


def normalize_content(content: Any, index: int = 0) -> list[ContentPart]:
    """Message content (None, str, one part, or a list of parts) as ContentParts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [ContentPart.text(content)]
    if isinstance(content, ContentPart | dict):
        return [normalize_content_part(content, index)]
    if isinstance(content, list):
        return [normalize_content_part(p, index) for p in content]
    raise EncodeError(
        f"cannot normalise a {type(content).__name__} to message content "
        "(expected None, a str, a part or a list of parts)",
        index=index,
    )


def normalize_content_part(part: Any, index: int = 0) -> ContentPart:
    """One content part: a ContentPart, a string (text), or a provider-style part dict."""
    if isinstance(part, ContentPart):
        return part
    if isinstance(part, str):
        return ContentPart.text(part)
    if not isinstance(part, dict):
        raise EncodeError(
            f"cannot normalise a {type(part).__name__} to a content part "
            "(expected a ContentPart, a str or a dict)",
            index=index,
        )
    kind = part.get("type")
    options: dict[str, Any] = {}
    if "cache_control" in part:
        options["cache_control"] = part["cache_control"]
    if kind in ("text", "input_text") and isinstance(part.get("text"), str):
        return ContentPart.text(part["text"], **options)
    if kind == "image_url":
        inner = part.get("image_url")
        url = inner.get("url") if isinstance(inner, dict) else inner
        if isinstance(inner, dict) and isinstance(inner.get("detail"), str):
            options["detail"] = inner["detail"]
        return _image_part(url, index, options)
    if not isinstance(kind, str):
        raise EncodeError(f"cannot normalise a content part without a type: {part!r}", index=index)
    # A provider's own part (input_audio, an Anthropic document, ...): sent as it is.
    return ContentPart(
        type="unsupported", options={"type": kind, "block": dict(part), "native": True}
    )


def _text_part(text: Any, index: int) -> ContentPart:
    if not isinstance(text, str):
        raise EncodeError(f"expected text to be a str, got {type(text).__name__}", index=index)
    return ContentPart.text(text)


def _image_part(url: Any, index: int, options: dict[str, Any] | None = None) -> ContentPart:
    if not isinstance(url, str) or not url:
        raise EncodeError(f"expected an image URL string, got {url!r}", index=index)
    return ContentPart.image_url(url, **(options or {}))


# --- helpers the provider encoders share -------------------------------------------------------

_MEDIA = {"jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif",
          "webp": "image/webp", "pdf": "application/pdf"}  # fmt: skip


def media_type(part: ContentPart, default: str | None = None) -> str | None:
    """The part's `media` option as a MIME type ("png" -> "image/png"; a MIME type stays)."""
    media = part.options.get("media")
    if not isinstance(media, str) or not media:
        return default
    return _MEDIA.get(media.lower().lstrip("."), media)


def split_data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a `data:<type>;base64,<data>` URL, else None."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head, data


def data_url(part: ContentPart, index: int, default_media: str | None = None) -> str:
    """A base64 image or file part as a data URL (content already a data URL stays)."""
    content = part.content or ""
    if content.startswith("data:"):
        return content
    media = media_type(part, default_media)
    if media is None:
        raise EncodeError(
            f"a base64 {part.type} part needs a media option (e.g. media='image/png') or a "
            "data: URL as content",
            index=index,
        )
    return f"data:{media};base64,{content}"


def cache_control(part: ContentPart) -> dict[str, Any] | None:
    """The part's cache_control option (True means {"type": "ephemeral"})."""
    value = part.options.get("cache_control")
    if value is True:
        return {"type": "ephemeral"}
    if isinstance(value, dict):
        return value
    return None


def result_text(result: ToolResult) -> str:
    """A tool result's content as one string (text parts joined by a blank line)."""
    if isinstance(result.content, str):
        return result.content
    return "\n\n".join(p.content or "" for p in result.content if p.type == "text")


def same_value(a: Any, b: Any) -> bool:
    """Equal and of the same kind (True is not 1, but 1 is 1.0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return not (isinstance(a, float) and math.isnan(a)) and a == b
    return type(a) is type(b) and a == b
