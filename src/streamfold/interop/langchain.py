"""Messages as LangChain's `AIMessage`, and back (`streamfold[langchain]`).

`to_ai_message(message)` gives the `AIMessage` (`output_version="v1"`) LangChain's own chat
model builds from the same answer, so that it goes back as history as the model's own:
- a message folded from Anthropic, OpenAI Chat Completions (or a compatible server) or the
  Responses API: the provider's native content (the Anthropic `Message` blocks, the
  Responses output items, the text and tool calls) translated to standard blocks by
  langchain-core's own translator for that provider, and `response_metadata` holding the
  `model_provider` LangChain's integration writes (`"anthropic"`, `"openai"`) and the end of
  the turn under its keys (`stop_reason`, `status`, `finish_reason`). Sent back by
  `ChatAnthropic`, thinking keeps its signature; by `ChatOpenAI` on the Responses API,
  reasoning items keep their id and encrypted content, message items their `phase`;
- a message from another provider: standard blocks written here (text with citations,
  `reasoning` with its signature in `extras`, `tool_call`, `server_tool_call` /
  `server_tool_result`, other opaque blocks as `non_standard`). From Gemini and Bedrock's
  Converse API under the `model_provider` their LangChain chat models write
  (`"google_genai"`, `"bedrock_converse"`), which replay the message as their own only
  under it: Gemini's executed code and its result as langchain-core's google_genai
  translator writes them, the function calls' thought signatures in `additional_kwargs`
  where `ChatGoogleGenerativeAI` reads them; Bedrock's stop reason as `stopReason`.
  From any other provider, without `model_provider`;
- tool calls also in `tool_calls`; usage in `usage_metadata` (cache reads and writes,
  reasoning tokens in its details), the model in `model_name`, the message id in `id`.
`response_metadata["streamfold"]` keeps the status, stop reason, raw usage, metadata and
the parts whole. docs/adapters/langchain.md lists how this differs from the chat models' own
messages, as measured against them.

`from_ai_message(...)` reads an AIMessage (or its dict): while its content and tool calls
are the ones `to_ai_message` wrote, the saved parts come back whole; otherwise (a message
a chat model built, or one changed) it reads the `content_blocks`, and text without a
marker is marked by the fold's rule.

What a round trip (`from_ai_message(to_ai_message(message))`) loses:
- a usage count that was not reported reads 0, and the usage is a total (`cumulative`).
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeVar, cast

try:
    from langchain_core.messages import AIMessage
except ImportError:  # pragma: no cover - depends on the installed extras
    from ._common import missing_library

    raise missing_library("langchain", "langchain-core", "langchain") from None

from pydantic import ValidationError

from ..errors import InteropError, StreamfoldError, preview
from ..message import Message, Status, StopReason, ToolCall, Usage
from ..parts import Citation, ContentPart
from ..providers.anthropic.decode import _STOP as ANTHROPIC_STOP
from ..providers.openai_chat.decode import _FINISH as CHAT_FINISH
from ._common import (
    build_message,
    check_message,
    check_tree,
    described,
    dict_field,
    from_provider,
    invalid,
    is_tool_activity,
    library_call,
    read_object,
    saved_end,
)

__all__ = ["from_ai_message", "to_ai_message"]

_OURS = "response_metadata['streamfold']"

Saved = TypeVar("Saved", ContentPart, ToolCall)

# What LangChain's own code raises on content it did not check (besides ValidationError).
_LANGCHAIN_ERRORS = (TypeError, ValueError, KeyError, AttributeError)

# The model_provider LangChain's own chat models write, by the provider streamfold folded.
_PROVIDERS = {"anthropic": "anthropic", "openai-chat": "openai", "openai-responses": "openai"}
# The model_provider of the chat models whose messages hold the standard blocks written here:
# ChatGoogleGenerativeAI and ChatBedrockConverse replay a message as their own only under it
# (a Gemini reasoning block goes back as a thought with its signature, not as answer text).
_OWN_BLOCK_PROVIDERS = {"gemini": "google_genai", "bedrock": "bedrock_converse"}
# Where langchain-google-genai keeps the function calls' thought signatures.
_GEMINI_CALL_SIGNATURES = "__gemini_function_call_thought_signatures__"

# A provider's finish reason as LangChain's chat models pass it on (OpenAI's or Anthropic's).
_FINISH: dict[str, tuple[StopReason, Status]] = {**CHAT_FINISH, **ANTHROPIC_STOP}


def to_ai_message(message: Message) -> AIMessage:
    """The Message as a LangChain `AIMessage` (see the module docstring)."""
    message = check_message("to_ai_message", message)
    calls = [_tool_call(item, i) for i, item in enumerate(message.stream_order())
             if isinstance(item, ToolCall)]  # fmt: skip
    provider = _PROVIDERS.get(str(message.metadata.get("provider")))
    blocks = None if provider is None else _translated(message, provider, calls)
    if blocks is None:
        provider = _OWN_BLOCK_PROVIDERS.get(str(message.metadata.get("provider")))
        blocks = _own_blocks(message, gemini=provider == "google_genai")
    usage = message.usage
    meta = {k: v for k, v in message.metadata.items() if k not in ("id", "model")}
    response_metadata: dict[str, Any] = {
        **_provider_metadata(message, provider),
        "output_version": "v1",
        "streamfold": {
            "status": message.status,
            "stop_reason": message.stop_reason,
            "raw_stop_reason": message.raw_stop_reason,
            "usage": None if usage is None else usage.raw,
            "metadata": meta,
            # The parts whole: what LangChain's blocks cannot hold (markers, options) comes
            # back from here, as long as the blocks are still the ones written.
            "order": [_saved(item) for item in message.stream_order()],
        },
    }
    if provider is not None:
        response_metadata["model_provider"] = provider
    model = message.metadata.get("model")
    if isinstance(model, str):
        response_metadata["model_name"] = model
    data: dict[str, Any] = {
        "content": blocks,
        "tool_calls": calls,
        "response_metadata": response_metadata,
    }
    if provider == "google_genai":
        signed = _call_signatures(message, calls)
        if signed:
            data["additional_kwargs"] = {_GEMINI_CALL_SIGNATURES: signed}
    message_id = message.metadata.get("id")
    if isinstance(message_id, str):
        data["id"] = message_id
    if usage is not None:
        data["usage_metadata"] = _usage_metadata(usage)
    try:
        return AIMessage.model_validate(data)
    except ValidationError as exc:  # a value LangChain's model refuses
        raise InteropError("to_ai_message", "a Message LangChain can hold", str(exc)) from None


def _call_signatures(message: Message, calls: list[dict[str, Any]]) -> dict[str, str]:
    """Each Gemini function call's thought signature by its call id, where
    ChatGoogleGenerativeAI keeps them (and reads them back: Gemini refuses a function call
    of a thinking model sent back without its signature)."""
    items = [item for item in message.stream_order() if isinstance(item, ToolCall)]
    return {call["id"]: item.metadata["thought_signature"]
            for item, call in zip(items, calls, strict=True)
            if isinstance(item.metadata.get("thought_signature"), str)}  # fmt: skip


def _tool_call(call: ToolCall, i: int) -> dict[str, Any]:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    if call.metadata.get("type") == "custom_tool_call" and isinstance(args.get("input"), str):
        args = {"__arg1": args["input"]}  # a free-form tool's text, as langchain-openai holds it
    return {"type": "tool_call", "id": call.call_id or f"call_{i}", "name": call.name or "",
            "args": args}  # fmt: skip


def _saved(item: ContentPart | ToolCall) -> dict[str, Any]:
    if isinstance(item, ToolCall):
        return {"call": item.model_dump(mode="json")}
    return {"part": item.model_dump(mode="json")}


def _provider_metadata(message: Message, provider: str | None) -> dict[str, Any]:
    """The end of the turn under the keys the provider's LangChain chat model writes."""
    raw = message.raw_stop_reason
    if provider == "anthropic":
        return {"stop_reason": raw, "stop_sequence": None}
    if provider == "bedrock_converse":
        return {"stopReason": raw}
    if message.metadata.get("provider") == "openai-responses":
        out: dict[str, Any] = {"status": raw} if raw is not None else {}
        if isinstance(message.metadata.get("id"), str):
            out["id"] = message.metadata["id"]
        if isinstance(message.metadata.get("model"), str):
            out["model"] = message.metadata["model"]
        return out
    return {"finish_reason": raw}


def _translated(
    message: Message, provider: str, calls: list[dict[str, Any]]
) -> list[dict[str, Any]] | None:
    """The message's v1 content blocks as LangChain's own translator for `provider` makes
    them from the provider's native content (what its chat model builds); None when the
    provider's SDK, whose models check that content, is not installed."""
    try:
        native = _native_content(message)
    except (ImportError, ValidationError, InteropError):
        # No SDK here, or parts its models refuse (a saved part edited by hand): the blocks
        # are written here instead.
        return None
    draft = AIMessage.model_construct(
        content=cast(Any, native),  # checked by LangChain's translator, as its models' are
        tool_calls=cast(Any, calls),
        invalid_tool_calls=[],
        additional_kwargs={},
        response_metadata={"model_provider": provider},
    )
    blocks = library_call("to_ai_message", "LangChain's content translator",
                          lambda: draft.content_blocks)  # fmt: skip
    out = [dict(block) for block in blocks]
    if isinstance(native, str):
        # The Chat Completions translator reads text and tool calls only: the reasoning a
        # compatible server streams (`reasoning_content`) goes first as reasoning blocks,
        # which ChatOpenAI leaves out of the next request; other opaque parts (a server's
        # executed tools) stay in the saved parts only, as the API takes no such content.
        out = [_own_block(entry) for entry in _uncarried(message)] + out
    return out


def _native_content(message: Message) -> str | list[dict[str, Any]]:
    """The content as the provider's LangChain chat model holds it before its v1 step."""
    kind = message.metadata.get("provider")
    if kind == "anthropic":
        from .anthropic import to_message

        blocks: list[dict[str, Any]] = to_message(message).model_dump(mode="json")["content"]
        for block in blocks:  # the None fields langchain-anthropic leaves out
            for key in ("citations", "caller", "encrypted_content"):
                if key in block and block[key] is None:
                    del block[key]
        return blocks
    if kind == "openai-responses":
        from .openai import to_response

        output = to_response(message).model_dump(mode="json", exclude_none=True)["output"]
        return _responses_content(_with_unknown_items(message, output))
    return "".join(p.content or "" for p in message.content if p.type == "text")


def _with_unknown_items(message: Message, output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The output items, with the provider's items `to_response` leaves out put back in
    their place (one the SDK's models refuse, as a web search call without its action; an
    empty reasoning item): LangChain holds them as they came, and they go back in the next
    request."""
    from .openai import _item_id

    ids = [item.get("id") for item in output]
    order = message.stream_order()
    for k, entry in enumerate(order):
        block = entry.options.get("block") if isinstance(entry, ContentPart) else None
        if isinstance(entry, ContentPart) and entry.type == "thinking":
            block = {"type": "reasoning", "id": entry.options.get("id"), "summary": []}
        if not (isinstance(block, dict) and from_provider(message, "openai-responses")):
            continue
        if not isinstance(block.get("id"), str) or block["id"] in ids:
            continue
        later = (_item_id(e) for e in order[k + 1 :])
        at = next((ids.index(i) for i in later if i in ids), len(output))
        output.insert(at, dict(block))
        ids.insert(at, block["id"])
    return output


def _responses_content(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses output items as langchain-openai's content (its `responses/v1` form)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if item.get("type") != "message":
            if item.get("type") == "function_call" and "async_" in item:
                item["async"] = item.pop("async_")
            out.append(item)
            continue
        for content in item.get("content", []):
            block: dict[str, Any]
            if content.get("type") == "output_text":
                annotations = [_file_index(a) for a in content.get("annotations", [])]
                block = {"type": "text", "text": content.get("text", ""),
                         "annotations": annotations, "id": item.get("id")}  # fmt: skip
            elif content.get("type") == "refusal":
                block = {"type": "refusal", "refusal": content.get("refusal", ""),
                         "id": item.get("id")}  # fmt: skip
            else:
                continue
            if item.get("phase") is not None:
                block["phase"] = item["phase"]
            out.append(block)
    return out


def _file_index(annotation: dict[str, Any]) -> dict[str, Any]:
    # langchain-core keeps `index` for merging stream chunks: langchain-openai renames it.
    if annotation.get("type") == "file_citation" and "index" in annotation:
        annotation = dict(annotation)
        annotation["file_index"] = annotation.pop("index")
    return annotation


def _uncarried(message: Message) -> list[ContentPart]:
    # Only reasoning: ChatOpenAI leaves reasoning blocks out of the next request, where an
    # opaque block (a server's executed tool) would go out as content the API refuses.
    return [p for p in message.content if p.type == "thinking"]


def _own_blocks(message: Message, *, gemini: bool = False) -> list[dict[str, Any]]:
    """Standard blocks written here, for a provider with no LangChain translator here."""
    blocks: list[dict[str, Any]] = []
    for i, item in enumerate(message.stream_order()):
        if isinstance(item, ToolCall):
            call = _tool_call(item, i)
            if item.metadata:
                call["extras"] = dict(item.metadata)
            blocks.append(call)
        elif gemini and item.type == "unsupported":
            blocks.append(_gemini_block(item))
        else:
            blocks.append(_own_block(item))
    return blocks


def _gemini_block(part: ContentPart) -> dict[str, Any]:
    """A Gemini part of its own kind as ChatGoogleGenerativeAI holds it: executed code and
    its result as the server tool blocks langchain-core's google_genai translator writes
    (they go back as Gemini's executableCode and codeExecutionResult parts); any other
    (a file search's toolCall, toolResponse) as a server tool block, which goes nowhere,
    where a `non_standard` one would be sent back raw and refused by ChatGoogleGenerativeAI.
    """
    options = dict(part.options)
    kind, block = options.get("type"), options.get("block")
    inner = block.get(str(kind)) if isinstance(block, dict) else None
    inner = inner if isinstance(inner, dict) else {}
    call_id = options.get("id", inner.get("id", ""))
    call_id = call_id if isinstance(call_id, str) else ""
    if kind == "executableCode":
        code, language = inner.get("code", ""), inner.get("language", "")
        return {"type": "server_tool_call", "id": call_id, "name": "code_interpreter",
                "args": {"code": code, "language": language}, "extras": options}  # fmt: skip
    if kind in ("codeExecutionResult", "toolResponse"):
        ok = inner.get("outcome", "OUTCOME_OK") == "OUTCOME_OK"
        extras: dict[str, Any] = {**options}
        output: Any = inner.get("output", "") if kind == "codeExecutionResult" else inner
        if kind == "codeExecutionResult":
            # The keys ChatGoogleGenerativeAI reads to send the result back.
            extras |= {"block_type": "code_execution_result", "outcome": 1 if ok else 2}
        return {"type": "server_tool_result", "tool_call_id": call_id,
                "status": "success" if ok else "error", "output": output,
                "extras": extras}  # fmt: skip
    name = inner.get("toolType", kind)
    return {"type": "server_tool_call", "id": call_id, "args": {}, "extras": options,
            "name": name if isinstance(name, str) else str(kind)}  # fmt: skip


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


def _own_block(part: ContentPart) -> dict[str, Any]:
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


_MISSING = object()
# The AIMessage fields read, and the types LangChain's model gives them.
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "content": (str, list),
    "tool_calls": list,
    "response_metadata": dict,
    "usage_metadata": (dict, type(None)),
    "id": (str, type(None)),
}


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
    # An AIMessage built without validation (model_construct) may hold anything: each field
    # read is checked as the stream doors check their input, before any of it is used.
    for field, kinds in _FIELDS.items():
        value = getattr(message, field, _MISSING)
        if not isinstance(value, kinds):
            got = "nothing" if value is _MISSING else described(value)
            raise InteropError("from_ai_message", f"an AIMessage whose {field} is as typed", got)
        check_tree("from_ai_message", value, f"the AIMessage's {field}")
    try:
        return _read(message)
    except InteropError:
        raise
    except StreamfoldError as exc:  # a saved part or a block that a Message refuses
        raise InteropError(
            "from_ai_message", "parts a Message can hold", preview(str(exc))
        ) from None


def _read(message: AIMessage) -> Message:
    response = dict_field("from_ai_message", message.response_metadata, "response_metadata")
    ours = dict_field("from_ai_message", response.get("streamfold"), _OURS)
    named = (response.get(k) for k in ("finish_reason", "stop_reason", "stopReason"))
    raw_stop = ours.get("raw_stop_reason", next((v for v in named if v is not None), None))
    raw_stop = raw_stop if isinstance(raw_stop, str) else None
    unknown: tuple[StopReason | None, Status] = (None, "complete")
    stop_read, status_read = _FINISH.get(raw_stop or "", unknown)
    status, stop = saved_end("from_ai_message", ours, status_read, stop_read)
    metadata = dict_field("from_ai_message", ours.get("metadata"), f"{_OURS}['metadata']")
    if message.id is not None:
        metadata["id"] = message.id
    if isinstance(response.get("model_name"), str):
        metadata["model"] = response["model_name"]
    end = _End(status, stop, raw_stop, _usage(message, ours), metadata)
    saved = _saved_message(message, ours.get("order"), end)
    if saved is not None:
        return saved
    # LangChain's own reading of content it did not check when the message was built.
    blocks = library_call("from_ai_message", "content LangChain can read as content blocks",
                          lambda: message.content_blocks)  # fmt: skip
    order: list[ContentPart | ToolCall] = []
    for block in blocks:
        if not isinstance(block, dict):
            raise InteropError("from_ai_message", "content blocks as dicts", described(block))
        try:
            item = _item(dict(block))
        except ValidationError as exc:  # a block's field of the wrong type
            raise invalid("from_ai_message", "a standard content block", block, exc) from None
        if item is not None:
            order.append(item)
    return _build(order, end)


def _saved_message(message: AIMessage, order: object, end: _End) -> Message | None:
    """The Message whose parts `to_ai_message` saved, when the content and tool calls are
    still the ones it wrote from them (else None: the blocks are read instead)."""
    if order is None:
        return None
    if not isinstance(order, list):
        raise InteropError("from_ai_message", f"{_OURS}['order'] as a list", described(order))
    items: list[ContentPart | ToolCall] = []
    for entry in order:
        if isinstance(entry, dict) and isinstance(entry.get("call"), dict):
            items.append(_validated(ToolCall, entry["call"]))
        elif isinstance(entry, dict) and isinstance(entry.get("part"), dict):
            items.append(_validated(ContentPart, entry["part"]))
        else:
            raise InteropError("from_ai_message", f"{_OURS}['order'] entries as saved",
                               described(entry))  # fmt: skip
    candidate = _build(items, end)
    written = to_ai_message(candidate)
    if written.content != message.content or written.tool_calls != message.tool_calls:
        return None
    return candidate


class _End(NamedTuple):
    """How the turn ended, and what else the message says besides its parts."""

    status: Status
    stop_reason: StopReason | None
    raw_stop_reason: str | None
    usage: Usage | None
    metadata: dict[str, Any]


def _build(order: list[ContentPart | ToolCall], end: _End) -> Message:
    return build_message(order, status=end.status, stop_reason=end.stop_reason,
                         raw_stop_reason=end.raw_stop_reason, usage=end.usage,
                         metadata=end.metadata)  # fmt: skip


def _validated(model: type[Saved], value: dict[str, Any]) -> Saved:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise invalid("from_ai_message", f"a saved {model.__name__}", value, exc) from None


def _usage(message: AIMessage, ours: dict[str, Any]) -> Usage | None:
    if message.usage_metadata is None:
        return None
    usage = dict_field("from_ai_message", message.usage_metadata, "usage_metadata")
    details = "usage_metadata's token details"
    inputs = dict_field("from_ai_message", usage.get("input_token_details"), details)
    outputs = dict_field("from_ai_message", usage.get("output_token_details"), details)
    raw = ours.get("usage")
    return Usage(
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
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
