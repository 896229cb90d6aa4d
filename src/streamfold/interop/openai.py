"""Messages as the openai SDK's `ChatCompletion` and `Response`, and back (`streamfold[openai]`).

`to_chat_completion(message)` and `to_response(message)` build the SDK's own objects,
validated by its models; `from_chat_completion(...)` and `from_response(...)` read one (or a
dict of its JSON form) back into a Message the way a fold of the same answer streamed
would: each is turned into the events that stream would have carried and folded by the
provider's decoder, so the markers, ids, citations and usage come out as from a fold.
`streamfold serve` answers `"stream": false` requests with the `to_*` functions.

What a round trip (`from_*(to_*(message))`) loses, because the target has no place for it:

ChatCompletion:
- the parts' order: thinking (joined by a blank line, as DeepSeek's `reasoning_content`),
  then the text (joined by a blank line), then a refusal, then the tool calls;
- part options, thinking signatures, and opaque provider blocks; citations but a web
  page's URL, title and span (`url_citation`, the span moved into the joined text; a span
  not known reads as an empty one where its part starts);
- the status and stop reason beyond what `finish_reason` says (`stop`, `length`,
  `tool_calls`, `content_filter`): a cut, cancelled, failed or paused turn reads as `stop`;
- tool call metadata; a call without an id gets `call_<n>`; a custom (free-text) tool
  call reads back as a function call whose arguments are `{"input": <its text>}`;
- usage: cache writes, the raw usage (it becomes the completion's), and a count that was
  not reported reads 0;
- metadata other than the id and model.

Response:
- thinking and text from another provider than OpenAI Responses lose their item ids
  (items get `rs_<n>` / `msg_<n>` ids), opaque blocks from another provider, and items
  newer than the SDK's models, are left out; an item's fields the SDK's model drops;
- inferred narration / answer markers are inferred again (Responses carries only
  `phase`, the provider's own marker); citations keep only their annotation;
- a thinking part without text and without encrypted content is left out;
- the stop reason beyond what the response's status says (a completed one reads as
  `tool_use` after a call, else `refusal` or `stop`; a cut one as `other`); a failed
  turn's error details;
- usage: the raw usage becomes the response's, a count that was not reported reads 0;
- metadata other than the id, model and `created_at` (the time now for a message
  without one); a call's metadata other than its item id, but for a custom tool call or
  an item the caller runs (computer, shell, apply_patch).
"""

from __future__ import annotations

from typing import Any

try:
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response, ResponseOutputItem
except ImportError:  # pragma: no cover - depends on the installed extras
    from ._common import missing_library

    raise missing_library("openai", "openai", "openai") from None

import json

from pydantic import TypeAdapter, ValidationError

from ..errors import InteropError
from ..message import Message, ToolCall, Usage
from ..parts import ContentPart, utterance, utterance_inferred
from ..providers.openai_chat import chat_tool_call
from ..providers.openai_responses import CLIENT_CALL_INPUTS, call_item
from ._common import (
    check_message,
    created,
    fold_events,
    meta_str,
    model_json,
    own_block,
    read_model,
    tokens,
)

__all__ = ["from_chat_completion", "from_response", "to_chat_completion", "to_response"]

# --- ChatCompletion ----------------------------------------------------------------------

_CHAT_FINISH = {
    "stop": "stop",
    "tool_use": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
    "refusal": "content_filter",
}


# The finish reasons a ChatCompletion may say (the openai SDK's Choice.finish_reason).
_CHAT_FINISH_REASONS = frozenset(
    {"stop", "length", "tool_calls", "content_filter", "function_call"}
)


def _chat_finish(message: Message) -> str:
    """The provider's own word when it was a Chat provider's (a server that says "stop"
    with tool calls said so: the completion shows what it sent); else one from the stop
    reason."""
    raw = message.raw_stop_reason
    if message.metadata.get("provider") == "openai-chat" and raw in _CHAT_FINISH_REASONS:
        return str(raw)
    return _CHAT_FINISH.get(message.stop_reason or "stop", "stop")


def to_chat_completion(message: Message, *, model: str = "") -> ChatCompletion:
    """The Message as an openai `ChatCompletion` (`model` when the message names none)."""
    message = check_message("to_chat_completion", message)
    texts: list[str] = []
    refusals: list[str] = []
    thinking: list[str] = []
    annotations: list[dict[str, Any]] = []
    for part in message.content:
        if part.type == "thinking" and part.content:
            thinking.append(part.content)
        elif part.type == "text" and part.content and part.options.get("refusal") is True:
            refusals.append(part.content)
        elif part.type == "text" and part.content:
            # The parts join with a blank line: a citation's span moves with its part.
            offset = sum(len(text) + 2 for text in texts)
            annotations.extend(_url_citations(part, offset))
            texts.append(part.content)
    body: dict[str, Any] = {
        "role": "assistant",
        "content": "\n\n".join(texts) or None,
        "refusal": "\n\n".join(refusals) or None,
    }
    if annotations:
        body["annotations"] = annotations
    if thinking:
        # DeepSeek's field for reasoning text; OpenAI itself does not return reasoning.
        body["reasoning_content"] = "\n\n".join(thinking)
    if message.tool_calls:
        body["tool_calls"] = [
            chat_tool_call(call.model_copy(update={"call_id": call.call_id or f"call_{i}"}))
            for i, call in enumerate(message.tool_calls)
        ]
    result: dict[str, Any] = {
        "id": meta_str(message, "id", "chatcmpl-streamfold"),
        "object": "chat.completion",
        "created": created(message),
        "model": meta_str(message, "model", model),
        "choices": [
            {
                "index": 0,
                "message": body,
                "finish_reason": _chat_finish(message),
                "logprobs": None,
            }
        ],
    }
    if message.usage is not None:
        result["usage"] = _chat_usage(message.usage)
    return ChatCompletion.model_validate(result)


def _url_citations(part: ContentPart, offset: int) -> list[dict[str, Any]]:
    """A text part's web citations as Chat `url_citation` annotations (the only kind)."""
    return [
        {
            "type": "url_citation",
            "url_citation": {
                "url": c.source.url,
                "title": c.source.title or "",
                "start_index": (c.start_index or 0) + offset,
                "end_index": (c.end_index or 0) + offset,
            },
        }
        for c in part.citations
        if c.source is not None and c.source.url is not None
    ]


def _chat_usage(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": tokens(usage.input_tokens),
        "completion_tokens": tokens(usage.output_tokens),
        "total_tokens": usage.total_tokens,
    }
    if usage.cache_read_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
    if usage.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


def from_chat_completion(
    completion: ChatCompletion | dict[str, Any], *, choice: int = 0
) -> Message:
    """A `ChatCompletion` (or its JSON dict) as the Message its stream folds to."""
    completion = read_model("from_chat_completion", ChatCompletion, completion)
    data = model_json("from_chat_completion", completion)
    picked = next((c for c in data.get("choices", []) if c.get("index") == choice), None)
    if picked is None:
        indexes = [c.get("index") for c in data.get("choices", [])]
        raise InteropError("from_chat_completion", f"a choice {choice}", f"choices {indexes}")
    delta = dict(picked.get("message") or {})
    delta.pop("audio", None)  # the fold skips audio
    calls = delta.get("tool_calls")
    if isinstance(calls, list):
        delta["tool_calls"] = [_as_function(call, i) for i, call in enumerate(calls)]
    chunk: dict[str, Any] = {k: v for k, v in data.items() if k not in ("choices", "object")}
    chunk["object"] = "chat.completion.chunk"
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": picked.get("finish_reason")}]
    return fold_events("from_chat_completion", [chunk], "openai-chat", done=True)


def _as_function(call: dict[str, Any], index: int) -> dict[str, Any]:
    """A tool call as a streamed chunk's: a custom (free-text) tool's, which the fold
    skips, as a function call whose arguments are `{"input": <its text>}`."""
    custom = call.get("custom")
    if call.get("type") == "custom" and isinstance(custom, dict):
        arguments = json.dumps({"input": custom.get("input", "")}, ensure_ascii=False)
        function = {"name": custom.get("name", ""), "arguments": arguments}
        return {"index": index, "id": call.get("id"), "type": "function", "function": function}
    return {**call, "index": index}


# --- Response ----------------------------------------------------------------------------


def _annotations(part: ContentPart) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for citation in part.citations:
        raw = citation.metadata.get("annotation")  # a Responses annotation, as it came
        if isinstance(raw, dict) and isinstance(raw.get("type"), str):
            out.append(raw)
        elif citation.source is not None and citation.source.url:
            out.append(
                {
                    "type": "url_citation",
                    "url": citation.source.url,
                    "title": citation.source.title or "",
                    "start_index": citation.start_index or 0,
                    "end_index": citation.end_index or 0,
                }
            )
    return out


_RESPONSE_STATUS = {
    "complete": "completed",
    "length": "incomplete",
    "content_filtered": "incomplete",
    "error": "failed",
    "cancelled": "cancelled",
    "incomplete": "incomplete",
}


def _item_id(entry: ContentPart | ToolCall) -> str | None:
    value = (
        entry.metadata.get("item_id") if isinstance(entry, ToolCall) else entry.options.get("id")
    )
    return value if isinstance(value, str) else None


def _open_item(
    output: list[dict[str, Any]], kind: str, item_id: str | None, fresh: dict[str, Any]
) -> dict[str, Any]:
    """The output item a part belongs to: the last one if it has the part's id, else new."""
    if item_id is not None and output:
        last = output[-1]
        if last.get("type") == kind and last.get("id") == item_id:
            return last
    output.append(fresh)
    return fresh


def to_response(message: Message, *, model: str = "") -> Response:
    """The Message as an openai Responses `Response` (`model` when the message names none).

    Parts that came from one output item (same `id` option, one after the other) go back
    into one item: reasoning summaries and reasoning text into one reasoning item, text
    and refusals into one message item.
    """
    message = check_message("to_response", message)
    output: list[dict[str, Any]] = []
    for i, entry in enumerate(message.stream_order()):
        item_id = _item_id(entry)
        if isinstance(entry, ToolCall):
            kind = entry.metadata.get("type")
            if kind in CLIENT_CALL_INPUTS or kind == "custom_tool_call":
                output.append(call_item(entry))  # an item the caller runs, as it came
            else:
                output.append(
                    {
                        "type": "function_call",
                        "id": item_id or f"fc_{i}",
                        "call_id": entry.call_id or f"call_{i}",
                        "name": entry.name or "",
                        "arguments": _arguments_text(entry),
                        "status": "completed",
                    }
                )
            continue
        block = own_block(entry, "openai-responses", message)
        if block is not None and not _known_item(block):
            continue  # a newer item than the SDK's models know: it would not validate
        if block is not None:
            if block.get("id") == item_id or item_id is None:
                output.append(block)  # a whole output item (a built-in tool call...)
            else:
                fresh = {"type": "message", "id": item_id, "role": "assistant",
                         "status": "completed", "content": []}  # fmt: skip
                _open_item(output, "message", item_id, fresh)["content"].append(block)
            continue
        if entry.type == "thinking":
            _add_reasoning(output, entry, item_id or f"rs_{i}")
        elif entry.type == "text":
            fresh = {"type": "message", "id": item_id or f"msg_{i}", "role": "assistant",
                     "status": "completed", "content": []}  # fmt: skip
            item = _open_item(output, "message", item_id, fresh)
            if entry.options.get("refusal") is True:
                item["content"].append({"type": "refusal", "refusal": entry.content or ""})
            else:
                logprobs = entry.options.get("logprobs")
                item["content"].append(
                    {
                        "type": "output_text",
                        "text": entry.content or "",
                        "annotations": _annotations(entry),
                        "logprobs": logprobs if isinstance(logprobs, list) else [],
                    }
                )
            marker = utterance(entry)
            if marker is not None and not utterance_inferred(entry):  # only the provider's
                item["phase"] = "commentary" if marker == "narration" else "final_answer"
    return Response.model_validate(_response_body(message, model, output))


_OUTPUT_ITEM: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)


def _known_item(block: dict[str, Any]) -> bool:
    if block.get("type") == "output_text":
        return True  # a part of a message item, checked with its item
    try:
        _OUTPUT_ITEM.validate_python(block)
    except ValidationError:
        return False
    return True


def _arguments_text(call: ToolCall) -> str:
    if isinstance(call.arguments, dict):
        return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
    return call.arguments or ""


def _add_reasoning(output: list[dict[str, Any]], part: ContentPart, item_id: str) -> None:
    encrypted = part.options.get("encrypted_content")
    if not part.content and not isinstance(encrypted, str):
        return  # nothing a reasoning item could carry
    fresh = {"type": "reasoning", "id": item_id, "summary": []}
    item = _open_item(output, "reasoning", _item_id(part), fresh)
    if part.content:
        if part.options.get("type") == "reasoning_text":
            text = {"type": "reasoning_text", "text": part.content}
            item.setdefault("content", []).append(text)
        else:
            item["summary"].append({"type": "summary_text", "text": part.content})
    if isinstance(encrypted, str) and encrypted:
        item["encrypted_content"] = encrypted


def _response_body(message: Message, model: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    incomplete = None
    if message.status == "length":
        incomplete = {"reason": "max_output_tokens"}
    elif message.status == "content_filtered":
        incomplete = {"reason": "content_filter"}
    result: dict[str, Any] = {
        "id": meta_str(message, "id", "resp_streamfold"),
        "object": "response",
        "created_at": created(message),
        "model": meta_str(message, "model", model),
        "status": _RESPONSE_STATUS[message.status],
        "output": output,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
    }
    if message.usage is not None:
        usage = message.usage
        result["usage"] = {
            "input_tokens": tokens(usage.input_tokens),
            "input_tokens_details": {
                "cached_tokens": tokens(usage.cache_read_tokens),
                "cache_write_tokens": tokens(usage.cache_write_tokens),
            },
            "output_tokens": tokens(usage.output_tokens),
            "output_tokens_details": {"reasoning_tokens": tokens(usage.reasoning_tokens)},
            "total_tokens": usage.total_tokens,
        }
    return result


_FINAL_EVENT = {
    "completed": "response.completed",
    "cancelled": "response.completed",  # the decoder reads the cancelled status from it
    "incomplete": "response.incomplete",
    "failed": "response.failed",
}


def from_response(response: Response | dict[str, Any]) -> Message:
    """A Responses `Response` (or its JSON dict) as the Message its stream folds to.

    A response still queued or in progress reads as a stream cut there (status incomplete).
    """
    response = read_model("from_response", Response, response)
    data = model_json("from_response", response)
    output = data.get("output") or []
    events: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {**data, "output": [], "status": "in_progress"},
        }
    ]
    for i, item in enumerate(output):
        for kind in ("response.output_item.added", "response.output_item.done"):
            events.append(
                {"type": kind, "sequence_number": len(events), "output_index": i, "item": item}
            )
    final = _FINAL_EVENT.get(str(data.get("status")))
    if final is not None:
        events.append({"type": final, "sequence_number": len(events), "response": data})
    return fold_events("from_response", events, "openai-responses")
