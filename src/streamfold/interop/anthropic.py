"""Messages as the anthropic SDK's `Message`, and back (`streamfold[anthropic]`).

`to_message(message)` builds an `anthropic.types.Message`, validated by the SDK's model;
`from_message(...)` reads one (or a dict of its JSON form) back into the Message its
stream folds to: it is turned into the events that stream would have carried and folded
by the Anthropic decoder. `streamfold serve` answers `"stream": false` Messages requests
(and Bedrock's InvokeModel) with `to_message`.

What a round trip (`from_message(to_message(message))`) loses, because the target has no
place for it:
- opaque blocks from another provider (Gemini's executed code, a Responses built-in
  item...) and blocks the SDK's models do not know are left out (blocks only its beta
  models know make a `BetaMessage`); fields of a block the SDK's model drops or leaves
  null; so are citations from
  another provider, and part options other than the signature;
- a thinking part without a signature gets an empty one;
- a tool call's metadata other than its `caller`; a call without an id gets
  `toolu_<n>`;
- the status: a cut, cancelled or failed turn, and a stop reason the API has no name for
  (`error`, `cancelled`, `other`), read as a turn cut before its end (status incomplete);
  `content_filter` reads as `refusal`;
- usage: reasoning tokens and the raw usage (it becomes the Message's); a count that was
  not reported reads 0;
- metadata other than the id and model.
"""

from __future__ import annotations

from typing import Any

try:
    from anthropic.types import ContentBlock
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types.beta import BetaContentBlock, BetaMessage
except ImportError:  # pragma: no cover - depends on the installed extras
    from ._common import missing_library

    raise missing_library("anthropic", "anthropic", "anthropic") from None

import json

from pydantic import TypeAdapter, ValidationError

from ..errors import InteropError
from ..message import Message, ToolCall, Usage
from ._common import (
    check_message,
    fold_events,
    from_provider,
    meta_str,
    model_json,
    own_block,
    read_model,
    tokens,
)

__all__ = ["from_message", "to_message"]

_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "tool_use": "tool_use",
    "length": "max_tokens",
    "pause": "pause_turn",
    "refusal": "refusal",
    "content_filter": "refusal",
}

_CONTENT_BLOCK: TypeAdapter[Any] = TypeAdapter(ContentBlock)
_BETA_BLOCK: TypeAdapter[Any] = TypeAdapter(BetaContentBlock)

# Blocks whose input streams as input_json_delta after a start with an empty input.
_INPUT_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def _valid(adapter: TypeAdapter[Any], block: dict[str, Any]) -> bool:
    try:
        adapter.validate_python(block)
    except ValidationError:
        return False
    return True


def to_message(message: Message, *, model: str = "") -> AnthropicMessage | BetaMessage:
    """The Message as an `anthropic.types.Message` (`model` when the message names none).

    A message holding blocks only the beta API has (MCP tool use, container uploads...)
    is a `BetaMessage`, as the SDK's `client.beta.messages` returns it.
    """
    message = check_message("to_message", message)
    native = from_provider(message, "anthropic")
    beta = False
    content: list[dict[str, Any]] = []
    for i, entry in enumerate(message.stream_order()):
        if isinstance(entry, ToolCall):
            content.append(_tool_use(entry, i, native))
            continue
        block = own_block(entry, "anthropic", message)
        if block is not None:
            if _valid(_CONTENT_BLOCK, block):
                content.append(block)
            elif _valid(_BETA_BLOCK, block):
                content.append(block)
                beta = True
        elif entry.type == "thinking":
            signature = entry.options.get("signature")
            content.append(
                {
                    "type": "thinking",
                    "thinking": entry.content or "",
                    "signature": signature if isinstance(signature, str) else "",
                }
            )
        elif entry.type == "text":
            cited = [
                c.metadata["raw"]
                for c in entry.citations
                if native and isinstance(c.metadata.get("raw"), dict)
            ]
            content.append(
                {"type": "text", "text": entry.content or "", "citations": cited or None}
            )
    if from_provider(message, "anthropic") and message.raw_stop_reason:
        stop: str | None = message.raw_stop_reason
    else:
        stop = _ANTHROPIC_STOP.get(message.stop_reason or "")
    if message.status in ("incomplete", "cancelled", "error"):
        stop = None  # the turn did not end: the API's stop_reason is null until it does
    usage = message.usage or Usage()
    model_class = BetaMessage if beta else AnthropicMessage
    return model_class.model_validate(
        {
            "id": meta_str(message, "id", "msg_streamfold"),
            "type": "message",
            "role": "assistant",
            "model": meta_str(message, "model", model),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": tokens(usage.input_tokens),
                "output_tokens": tokens(usage.output_tokens),
                "cache_creation_input_tokens": usage.cache_write_tokens,
                "cache_read_input_tokens": usage.cache_read_tokens,
            },
        }
    )


def _tool_use(call: ToolCall, i: int, native: bool) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_use",
        "id": call.call_id or f"toolu_{i}",
        "name": call.name or "",
        "input": call.arguments if isinstance(call.arguments, dict) else {},
    }
    caller = call.metadata.get("caller")
    if native and caller is not None:
        block["caller"] = caller
    return block


def from_message(message: AnthropicMessage | BetaMessage | dict[str, Any]) -> Message:
    """An `anthropic.types.Message` (a `BetaMessage`, or the JSON dict of either) as the
    Message its stream folds to.

    A message without a stop reason reads as a stream cut after its last block.
    """
    parsed: AnthropicMessage | BetaMessage
    if isinstance(message, BetaMessage):
        parsed = read_model("from_message", BetaMessage, message)
    else:
        try:
            parsed = read_model("from_message", AnthropicMessage, message)
        except InteropError as first:
            if not isinstance(message, dict):
                raise
            try:  # the beta API's blocks (MCP tool use...)
                parsed = BetaMessage.model_validate(message)
            except ValidationError:
                raise first from None

    data = model_json("from_message", parsed)
    start = {k: v for k, v in data.items() if k not in ("content", "stop_reason", "usage")}
    start["usage"] = {"input_tokens": data["usage"].get("input_tokens", 0), "output_tokens": 0}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**start, "content": [], "stop_reason": None}}
    ]
    for index, block in enumerate(data.get("content") or []):
        events.extend(_block_events(index, block))
    stop = data.get("stop_reason")
    delta = {"stop_reason": stop, "stop_sequence": data.get("stop_sequence")}
    events.append({"type": "message_delta", "delta": delta, "usage": data["usage"]})
    if stop is not None:  # else a turn that has not ended: a stream cut before its end
        events.append({"type": "message_stop"})
    return fold_events("from_message", events, "anthropic")


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    """One content block as the events that stream it (start, deltas, stop)."""
    kind = block.get("type")
    deltas: list[dict[str, Any]] = []
    start = block
    if kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "citations_delta", "citation": c} for c in block.get("citations", [])]
        deltas.append({"type": "text_delta", "text": block.get("text", "")})
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": block.get("thinking", "")},
            {"type": "signature_delta", "signature": block.get("signature", "")},
        ]
    elif kind in _INPUT_BLOCKS:
        start = {**block, "input": {}}
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
        deltas = [{"type": "input_json_delta", "partial_json": arguments}]
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]
