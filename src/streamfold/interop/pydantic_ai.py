"""Messages as pydantic-ai's `ModelResponse`, and back (`streamfold[pydantic-ai]`).

`to_model_response(message)` gives the `ModelResponse` pydantic-ai's own model for the
stream's API builds (`AnthropicModel`, `OpenAIChatModel`, `OpenAIResponsesModel`,
`GoogleModel`, `BedrockConverseModel`), validated by pydantic-ai's type adapter, its parts
in the streamed order, so that the model sends it back as it sends its own:
- the provider named as pydantic-ai names it (`PROVIDER_NAMES`; `provider_name=` for
  another, such as `"google-cloud"` or `"azure"`), with its `canonical_system` where
  pydantic-ai writes one: pydantic-ai sends signatures and encrypted reasoning back only to
  the provider named on the part;
- text: a `TextPart` (the Responses item id as its `id`, its `phase` and logprobs and
  Gemini's thought signature in `provider_details`, citations as pydantic-ai's `citations`);
- thinking: a `ThinkingPart` with its `signature` (a Responses reasoning item's encrypted
  content on its first part) and item `id`; redacted thinking as pydantic-ai's
  `AnthropicModel` writes it (`id="redacted_thinking"`, the data as its signature), Bedrock's
  as its `BedrockConverseModel` does (`id="redacted_content"`);
- tool calls: `ToolCallPart` (arguments as a dict; the Responses item id as its `id`,
  Gemini's thought signature in `provider_details`);
- tools the provider ran (server tools, built-in items, executed code): a
  `NativeToolCallPart` (the input as `args`) and its result a `NativeToolReturnPart`
  (named after the call it answers; Nova's code interpreter as `code_execution`, which
  `BedrockConverseModel` sends back), compaction a `CompactionPart`; any other opaque block
  a `NativeToolCallPart` named after its type. The block itself is in `provider_details`,
  so it goes back whole;
- usage as `RequestUsage` (reasoning tokens as `output_reasoning_tokens`), the finish
  reason as pydantic-ai names it, the provider's own in `provider_details["finish_reason"]`,
  and the status as `state`.
The rest of the Message (its status and stop reason, raw usage and metadata, each part's
options such as the narration / answer marker) goes in `metadata["streamfold"]`, which
pydantic-ai never sends to a model. `from_model_response(...)` reads a `ModelResponse` (or
its JSON dict) back: the form written here, the one earlier versions wrote (streamfold's own
in `provider_details`), and one pydantic-ai's models built; text without a marker is marked
by the fold's rule. docs/adapters/pydantic-ai.md lists how the result differs from
pydantic-ai's own, measured by its own models.

What a round trip (`from_model_response(to_model_response(message))`) loses:
- a usage count that was not reported reads 0, and the usage is a total (`cumulative`);
- a tool call without an id gets pydantic-ai's generated one.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

try:
    from pydantic_ai.messages import ModelResponse
except ImportError:  # pragma: no cover - depends on the installed extras
    from ._common import missing_library

    raise missing_library("pydantic_ai", "pydantic-ai-slim", "pydantic-ai") from None

import pydantic
from pydantic import TypeAdapter

from ..errors import InteropError, StreamfoldError, preview
from ..message import Message, Status, StopReason, ToolCall, Usage
from ..parts import Citation, ContentPart, utterance, utterance_inferred
from ._common import (
    build_message,
    check_message,
    described,
    dict_field,
    is_tool_activity,
    library_call,
    read_object,
    saved_end,
)

__all__ = ["PROVIDER_NAMES", "from_model_response", "to_model_response"]

_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)

PROVIDER_NAMES: dict[str, str] = {
    "anthropic": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "gemini": "google",
    "bedrock": "bedrock",
    "ollama": "ollama",
}
"""streamfold's provider name -> the `provider_name` pydantic-ai's own model writes for it
(its `OpenAIChatModel` / `OpenAIResponsesModel` with `OpenAIProvider`, `GoogleModel` with
`GoogleProvider`, ...). A provider not listed keeps streamfold's name."""

# The providers whose `canonical_system` pydantic-ai writes on every response (it depends on
# the client: Gemini API or Google Cloud, OpenAI or Azure); pydantic-ai reads it to decide
# whether a thinking signature or encrypted reasoning may go back to that provider.
_CANONICAL = frozenset({"openai", "azure", "google", "google-cloud"})

_FINISH: dict[str, str] = {
    "stop": "stop",
    "tool_use": "tool_call",
    "length": "length",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "error": "error",
}
# The APIs whose finish reason says nothing of tool calls (Responses' `completed`,
# Gemini's `STOP`): pydantic-ai names a tool-calling turn's end `stop` there.
_NO_TOOL_FINISH = frozenset({"openai-responses", "gemini"})
# pydantic-ai's OpenAIChatModel reads the finish_reason as it came: a server that ends a
# tool-calling turn with `stop` (OpenRouter's o3-mini) gives `stop` there.
_CHAT_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_call",
    "content_filter": "content_filter",
    "function_call": "tool_call",
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
# What pydantic-ai's own validators raise, besides a ValidationError, on shapes they do
# not check (a part's kind told apart by a function of its dict).
_VALIDATOR_ERRORS = (ValueError, TypeError, KeyError, AttributeError, RecursionError)
_OURS = "metadata['streamfold']"
_OLD_OURS = "provider_details['streamfold']"

# Message metadata that has a field of its own on a ModelResponse.
_OWN_FIELDS = ("provider", "model", "id")


def to_model_response(message: Message, *, provider_name: str | None = None) -> ModelResponse:
    """The Message as a pydantic-ai `ModelResponse` (see the module docstring).

    `provider_name`: the name of the pydantic-ai provider the history goes back to, when it
    is not the one `PROVIDER_NAMES` gives for the stream's API (`"azure"`, `"google-cloud"`,
    `"deepseek"`...): pydantic-ai sends signatures and encrypted reasoning back only to the
    provider named on the parts.
    """
    message = check_message("to_model_response", message)
    if provider_name is not None and not isinstance(provider_name, str):
        raise InteropError("to_model_response", "provider_name as a str", described(provider_name))
    api = message.metadata.get("provider")
    api = api if isinstance(api, str) else None
    name = provider_name or (PROVIDER_NAMES.get(api, api) if api is not None else None)
    writer = _Writer(api, name)
    order = message.stream_order()
    parts = [writer.part(item, order, i) for i, item in enumerate(order)]
    usage = message.usage
    meta = {k: v for k, v in message.metadata.items() if k not in _OWN_FIELDS}
    stop = message.stop_reason or ""
    finish = "stop" if stop == "tool_use" and api in _NO_TOOL_FINISH else _FINISH.get(stop)
    if api == "openai-chat" and message.raw_stop_reason in _CHAT_FINISH:
        finish = _CHAT_FINISH[message.raw_stop_reason]  # what OpenAIChatModel reads
    data: dict[str, Any] = {
        "kind": "response",
        "parts": parts,
        "model_name": _str(message.metadata.get("model")),
        "provider_name": name,
        "canonical_system": name if name in _CANONICAL else None,
        "provider_response_id": _str(message.metadata.get("id")),
        "finish_reason": finish,
        "state": _state(message),
        "provider_details": {"finish_reason": message.raw_stop_reason},
        # streamfold's own, where pydantic-ai keeps it and never sends it to a model.
        "metadata": {
            "streamfold": {
                "api": api,
                "status": message.status,
                "stop_reason": message.stop_reason,
                "usage": None if usage is None else usage.raw,
                "metadata": meta,
                "parts": writer.saved,
            }
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


def _state(message: Message) -> str:
    if message.raw_stop_reason == "pause_turn" and message.stop_reason == "pause":
        # Anthropic paused a long server-tool turn: pydantic-ai's AnthropicModel marks it
        # `suspended`, and continues it on the next request rather than start a new turn.
        return "suspended"
    return _STATE.get(message.status, "complete")


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


class _Writer:
    """The parts as pydantic-ai's own model for the stream's API writes them: what that
    model sends back (signatures, item ids, Gemini's thought signatures) where it reads it,
    everything else of streamfold's in `saved` (the response's metadata)."""

    def __init__(self, api: str | None, name: str | None) -> None:
        self.api = api
        self.name = name
        self.names: dict[str, str] = {}  # a built-in tool call's id -> its tool name
        self.saved: list[dict[str, Any]] = []  # each part's streamfold form, in order

    def part(
        self, item: ContentPart | ToolCall, order: list[ContentPart | ToolCall], i: int
    ) -> dict[str, Any]:
        if isinstance(item, ToolCall):
            self.saved.append({"kind": "tool-call", "metadata": dict(item.metadata)})
            return self._call(item)
        self.saved.append(
            {
                "kind": item.type,
                "options": dict(item.options),
                "citations": [c.model_dump(mode="json") for c in item.citations],
            }
        )
        options = dict(item.options)
        if item.type == "unsupported":
            nova = _nova_code(options, self.name) if self.api == "bedrock" else None
            return nova or _opaque(item, options, self.name, self.names)
        if item.type == "thinking":
            return self._thinking(item, order, i)
        return self._text(item)

    def _call(self, item: ToolCall) -> dict[str, Any]:
        call: dict[str, Any] = {"part_kind": "tool-call", "tool_name": item.name or "",
                                "args": item.arguments}  # fmt: skip
        if item.call_id is not None:
            call["tool_call_id"] = item.call_id
        item_id = item.metadata.get("item_id")
        if self.api == "openai-responses" and isinstance(item_id, str):
            call.update(id=item_id, provider_name=self.name)
        signature = item.metadata.get("thought_signature")
        if self.api == "gemini" and isinstance(signature, str):
            call.update(provider_name=self.name, provider_details={"thought_signature": signature})
        return call

    def _thinking(
        self, item: ContentPart, order: list[ContentPart | ToolCall], i: int
    ) -> dict[str, Any]:
        options = item.options
        item_id = _str(options.get("id"))
        signature = _str(options.get("signature"))
        if self.api == "openai-responses":
            # One reasoning item, several summary parts: pydantic-ai keeps the item's
            # encrypted content on its first part; streamfold has it on the last.
            signature = None
            first = i == 0 or _item_id(order[i - 1]) != item_id or item_id is None
            if first:
                for later in order[i:]:
                    if _item_id(later) != item_id:
                        break
                    found = _str(later.options.get("encrypted_content"))  # type: ignore[union-attr]
                    signature = found or signature
        if self.api == "gemini":
            # A Gemini thought part carries no signature of its own; a signed one keeps it.
            owner = self.name if signature is not None else None
            details = None if signature is None else {"thought_signature": signature}
            return {"part_kind": "thinking", "content": item.content or "",
                    "provider_name": owner, "provider_details": details}  # fmt: skip
        if self.api == "openai-chat":
            signature = None  # OpenRouter's, which pydantic-ai's OpenAIChatModel does not read
        if self.api == "bedrock" and signature is None:
            # BedrockConverseModel names the provider only on signed reasoning (gpt-oss's
            # has none): there is nothing only it can read.
            return {"part_kind": "thinking", "content": item.content or "", "id": item_id}
        return {"part_kind": "thinking", "content": item.content or "", "id": item_id,
                "signature": signature, "provider_name": self.name}  # fmt: skip

    def _text(self, item: ContentPart) -> dict[str, Any]:
        text: dict[str, Any] = {
            "part_kind": "text",
            "content": item.content or "",
            "id": _str(item.options.get("id")),
            "citations": [_citation(c, len(item.content or "")) for c in item.citations] or None,
        }
        signature = _str(item.options.get("signature"))
        if self.api == "gemini" and signature is not None:
            text["provider_details"] = {"thought_signature": signature}
        if self.api == "openai-responses":
            details = _responses_text(item)
            if details:
                text["provider_details"] = details
        if text["id"] is not None or text["citations"] or "provider_details" in text:
            text["provider_name"] = self.name  # data only that provider reads back
        return text


def _responses_text(item: ContentPart) -> dict[str, Any]:
    """What pydantic-ai's OpenAIResponsesModel keeps of an output text: its logprobs, and
    the message's `phase` (sent back, so the model tells its commentary from its answer)."""
    details: dict[str, Any] = {}
    logprobs = item.options.get("logprobs")
    if isinstance(logprobs, list):
        details["logprobs"] = logprobs
    marker = utterance(item)
    if marker is not None and not utterance_inferred(item):  # only the provider's own
        details["phase"] = "commentary" if marker == "narration" else "final_answer"
    return details


def _item_id(item: ContentPart | ToolCall) -> str | None:
    if isinstance(item, ToolCall) or item.type != "thinking":
        return None
    return _str(item.options.get("id"))


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
        # As pydantic-ai's AnthropicModel writes it; the block is in the response's metadata.
        data = block.get("data")
        return {"part_kind": "thinking", "content": "", "id": kind, "provider_name": provider,
                "signature": data if isinstance(data, str) else None}  # fmt: skip
    redacted = _bedrock_redacted(kind, block)
    if redacted is not None:
        # As pydantic-ai's BedrockConverseModel writes it: the blob's bytes as text, which
        # it encodes back into the blob it sends.
        return {"part_kind": "thinking", "content": "", "id": "redacted_content",
                "provider_name": provider, "signature": redacted}  # fmt: skip
    if kind == "compaction":
        return {"part_kind": "compaction", "content": _str(block.get("content")), **common}
    result_of = block.get("tool_use_id", options.get("tool_use_id"))
    if isinstance(result_of, str) and not is_tool_activity(item):
        return {"part_kind": "builtin-tool-return", "tool_name": names.get(result_of, kind),
                "tool_call_id": result_of, "content": _result_content(block),
                **common}  # fmt: skip
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


_NOVA_CODE = "nova_code_interpreter"
_NOVA_RESULT = "nova_code_interpreter_result"
_CODE_EXECUTION = "code_execution"  # pydantic-ai's CodeExecutionTool.kind


def _nova_code(options: dict[str, Any], provider: str | None) -> dict[str, Any] | None:
    """Nova's code interpreter call or result as pydantic-ai's BedrockConverseModel writes
    it (which sends back only a `code_execution` part of its own provider); None for any
    other block. The block itself is in the response's metadata."""
    block = options.get("block")
    block = block if isinstance(block, dict) else {}
    use, result = block.get("toolUse"), block.get("toolResult")
    common = {"tool_name": _CODE_EXECUTION, "provider_name": provider}
    if isinstance(use, dict) and use.get("name") == _NOVA_CODE:
        args, call_id = use.get("input"), use.get("toolUseId")
        if isinstance(args, dict) and isinstance(call_id, str):
            return {"part_kind": "builtin-tool-call", "args": args, "tool_call_id": call_id,
                    **common}  # fmt: skip
    if isinstance(result, dict) and result.get("type") == _NOVA_RESULT:
        content, call_id = result.get("content"), result.get("toolUseId")
        if isinstance(content, list) and isinstance(call_id, str):
            first = content[0] if content and isinstance(content[0], dict) else {}
            status = result.get("status")
            return {"part_kind": "builtin-tool-return", "content": first.get("json"),
                    "tool_call_id": call_id, "provider_details": {} if status is None
                    else {"status": status}, **common}  # fmt: skip
    return None


def _nova_block(part: Any) -> ContentPart | None:
    """pydantic-ai's BedrockConverseModel's code execution part as the Converse block it
    read (the form the fold gives); None for any other part."""
    if part.provider_name != "bedrock" or part.tool_name != _CODE_EXECUTION:
        return None
    call_id = part.tool_call_id
    if part.part_kind == "builtin-tool-call":
        use = {"name": _NOVA_CODE, "toolUseId": call_id, "type": "server_tool_use",
               "input": part.args_as_dict()}  # fmt: skip
        options = {"type": "server_tool_use", "id": call_id, "name": _NOVA_CODE,
                   "block": {"toolUse": use}}  # fmt: skip
        return ContentPart(type="unsupported", options=options)
    result: dict[str, Any] = {"toolUseId": call_id, "type": _NOVA_RESULT,
                              "content": [{"json": part.content}]}  # fmt: skip
    status = (part.provider_details or {}).get("status")
    if status is not None:
        result["status"] = status
    options = {"type": _NOVA_RESULT, "tool_use_id": call_id, "block": {"toolResult": result}}
    return ContentPart(type="unsupported", options=options)


def _bedrock_redacted(kind: str, block: dict[str, Any]) -> str | None:
    """Bedrock's redacted reasoning as the text pydantic-ai keeps of it (boto3 hands the
    blob over as bytes, which pydantic-ai decodes as UTF-8); None for a blob that is not
    base64 of UTF-8 text, which goes as an opaque block."""
    reasoning = block.get("reasoningContent")
    data = reasoning.get("redactedContent") if isinstance(reasoning, dict) else None
    if kind != "redactedContent" or not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _result_content(block: dict[str, Any]) -> Any:
    """A provider-run tool's result as pydantic-ai's AnthropicModel keeps it, for the one it
    sends back in the SDK's form: a web fetch's page is the SDK's dump of it (with the null
    fields the stream leaves out), else the block's content as it came."""
    content = block.get("content")
    if block.get("type") != "web_fetch_tool_result":
        return content
    try:
        from anthropic.types.beta import BetaWebFetchToolResultBlock

        return BetaWebFetchToolResultBlock.model_validate(block).content.model_dump(mode="json")
    except (ImportError, pydantic.ValidationError):
        return content  # without the SDK, or a block it does not know: as it came


def from_model_response(response: ModelResponse | dict[str, Any]) -> Message:
    """A pydantic-ai `ModelResponse` (or its JSON dict) as a Message.

    Reads what `to_model_response` writes (streamfold's own in `metadata['streamfold']`,
    or in `provider_details['streamfold']` as earlier versions wrote it), and a response
    pydantic-ai's own models built."""
    if isinstance(response, ModelResponse):
        # A dataclass holds whatever it was given (pydantic-ai builds its own without
        # checking): it is read as its JSON form would be.
        given = response
        response = library_call(
            "from_model_response",
            _NAME,
            lambda: _RESPONSE.dump_python(given, mode="json", warnings=False),
        )
    checked = read_object(
        "from_model_response",
        _NAME,
        ModelResponse,
        response,
        _RESPONSE.validate_python,
        _VALIDATOR_ERRORS,
    )
    # What no JSON text can hold (a lone surrogate) or no writer can nest (past the
    # serializer's depth) is refused here, not in a Message that cannot be written.
    library_call("from_model_response", _NAME, lambda: _RESPONSE.dump_json(checked))
    try:
        return _message(checked)
    except (pydantic.ValidationError, StreamfoldError) as exc:
        if isinstance(exc, InteropError):
            raise
        raise InteropError("from_model_response", _NAME, preview(str(exc))) from None


def _message(response: ModelResponse) -> Message:
    details = dict_field("from_model_response", response.provider_details, "provider_details")
    saved = dict_field("from_model_response", response.metadata, "metadata")
    if "streamfold" in saved:
        ours = dict_field("from_model_response", saved["streamfold"], _OURS)
    else:
        ours = dict_field("from_model_response", details.get("streamfold"), _OLD_OURS)
    status: Status
    stop: StopReason | None
    status, stop = _FINISH_BACK.get(response.finish_reason or "", ("complete", None))
    if response.state in ("incomplete", "interrupted"):
        status = "incomplete"
    if response.state == "suspended":
        stop = "pause"  # a turn the provider will go on with
    status, stop = saved_end("from_model_response", ours, status, stop)
    if stop == "stop" and any(p.part_kind == "tool-call" for p in response.parts):
        # pydantic-ai names a Responses or Gemini tool-calling turn's end `stop`.
        stop = "tool_use" if "stop_reason" not in ours else stop
    metadata = dict_field("from_model_response", ours.get("metadata"), f"{_OURS}['metadata']")
    for key, value in (
        ("provider", ours.get("api", response.provider_name)),
        ("model", response.model_name),
        ("id", response.provider_response_id),
    ):
        if isinstance(value, str):
            metadata[key] = value
    kept = ours.get("parts")
    if not isinstance(kept, list) or len(kept) != len(response.parts):
        kept = [None] * len(response.parts)  # written elsewhere, or its parts since changed
    order = [_item(part, keep) for part, keep in zip(response.parts, kept, strict=True)]
    raw_stop = details.get("finish_reason")
    return build_message(
        _encrypted_last([item for item in order if item is not None]),
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


def _citations(saved: list[Any]) -> list[Citation]:
    """streamfold's citations as saved in a dict that may come from anywhere."""
    try:
        return [Citation.model_validate(c) for c in saved]
    except (pydantic.ValidationError, StreamfoldError) as exc:
        # The model's own refusal (a dict whose keys are not strings, which no JSON text
        # holds, among them), named where streamfold's data keeps it.
        raise InteropError(
            "from_model_response", f"{_OURS}['parts'] citations", preview(str(exc))
        ) from None


def _encrypted_last(order: list[ContentPart | ToolCall]) -> list[ContentPart | ToolCall]:
    """A Responses reasoning item's encrypted content on its last summary part, where the
    fold has it (pydantic-ai keeps it on the first)."""
    out = list(order)
    for i, item in enumerate(out):
        item_id = _item_id(item)
        secret = None if item_id is None else item.options.get("encrypted_content")  # type: ignore[union-attr]
        if item_id is None or secret is None:
            continue
        last = i
        while last + 1 < len(out) and _item_id(out[last + 1]) == item_id:
            last += 1
        if last != i and out[last].options.get("encrypted_content") is None:  # type: ignore[union-attr]
            first, end = out[i], out[last]
            assert isinstance(first, ContentPart) and isinstance(end, ContentPart)
            kept = {k: v for k, v in first.options.items() if k != "encrypted_content"}
            out[i] = first.model_copy(update={"options": kept})
            out[last] = end.model_copy(
                update={"options": {**end.options, "encrypted_content": secret}}
            )
    return out


def _saved(part: Any, keep: object) -> dict[str, Any] | None:
    """A part's streamfold form as `to_model_response` saved it, if it is still this part's."""
    if not isinstance(keep, dict):
        return None
    kind = keep.get("kind")
    if part.part_kind == "tool-call":
        return keep if kind == "tool-call" else None
    if kind == "tool-call":
        return None
    if kind == "unsupported":
        # Its block is read from the part itself, but for redacted thinking and Nova's code
        # execution: pydantic-ai's form of them has no room for the block.
        native = part.part_kind in ("builtin-tool-call", "builtin-tool-return")
        return keep if part.part_kind == "thinking" or native else None
    if part.part_kind in ("builtin-tool-call", "builtin-tool-return"):
        return None
    if (kind == "thinking") != (part.part_kind == "thinking"):
        return None
    return keep


def _item(part: Any, keep: object = None) -> ContentPart | ToolCall | None:
    details: dict[str, Any] = dict(part.provider_details or {})
    if isinstance(details.get("block"), dict) and isinstance(details.get("type"), str):
        return ContentPart(type="unsupported", options=details)  # an opaque block, whole
    kind = part.part_kind
    saved = _saved(part, keep)
    if kind == "tool-call":
        if saved is not None:
            details = dict_field("from_model_response", saved.get("metadata"), f"{_OURS}['parts']")
        elif part.id is not None:
            details.setdefault("item_id", part.id)  # a Responses function call's item
        return ToolCall(
            call_id=part.tool_call_id,
            name=part.tool_name,
            arguments=part.args_as_dict(),
            status="complete",
            metadata=details,
        )
    if saved is not None and saved.get("kind") == "unsupported":
        options = dict_field("from_model_response", saved.get("options"), f"{_OURS}['parts']")
        return ContentPart(type="unsupported", options=options)
    if kind in ("builtin-tool-call", "builtin-tool-return"):
        return _nova_block(part)
    if kind not in ("text", "thinking"):
        return None  # a part a provider's stream has no form for (a file, a native tool's)
    if saved is not None:
        options = dict_field("from_model_response", saved.get("options"), f"{_OURS}['parts']")
        cited = saved.get("citations")
        if not isinstance(cited, list):
            raise InteropError("from_model_response", f"{_OURS}['parts'] citations as a list",
                               described(cited))  # fmt: skip
        citations = _citations(cited)
        part_type = saved.get("kind")
        if not isinstance(part_type, str):
            raise InteropError("from_model_response", f"{_OURS}['parts'] kind as a str",
                               described(part_type))  # fmt: skip
        return ContentPart(type=part_type, content=part.content, options=options,
                           citations=citations)  # fmt: skip
    ours = details.pop("citations", None)
    if isinstance(ours, list) and all(isinstance(c, dict) and "sources" not in c for c in ours):
        citations = _citations(ours)  # streamfold's, as written before
    else:
        citations = [_from_citation(c) for c in getattr(part, "citations", None) or []]
    phase = details.pop("phase", None)  # a Responses message's, as pydantic-ai keeps it
    if phase in ("commentary", "final_answer"):
        details["utterance"] = "narration" if phase == "commentary" else "answer"
    thought = details.pop("thought_signature", None)  # Gemini's, as pydantic-ai keeps it
    if isinstance(thought, str):
        details["signature"] = thought
    if part.id is not None:
        details["id"] = part.id
    if kind == "thinking" and part.id == "redacted_thinking" and part.signature is not None:
        block = {"type": "redacted_thinking", "data": part.signature}  # as Anthropic sent it
        return ContentPart(
            type="unsupported", options={"type": "redacted_thinking", "block": block}
        )
    if kind == "thinking" and part.id == "redacted_content" and part.signature is not None:
        # Bedrock's, as its Converse stream sent it: the blob in base64.
        blob = base64.b64encode(part.signature.encode("utf-8")).decode("ascii")
        block = {"reasoningContent": {"redactedContent": blob}}
        return ContentPart(type="unsupported", options={"type": "redactedContent", "block": block})
    if kind == "thinking":
        if part.signature is not None:
            # A Responses reasoning item's encrypted content, else a signature.
            key = "encrypted_content" if (part.id or "").startswith("rs_") else "signature"
            details[key] = part.signature
        return ContentPart(type="thinking", content=part.content, options=details)
    part_type = details.pop("part_type", "text")
    return ContentPart(type=part_type, content=part.content, options=details, citations=citations)
