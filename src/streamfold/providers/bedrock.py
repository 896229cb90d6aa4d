"""Amazon Bedrock ConverseStream: the `{event type: payload}` dicts boto3 yields.

The binary `application/vnd.amazon.eventstream` framing is `streamfold.eventstream`; it
turns each message into the same dict shape, so this decoder serves both the bytes and
boto3's already-decoded events.

Bedrock announces only tool blocks (`contentBlockStart`); text and reasoning blocks begin
with their first delta, so a part opens on the first delta for a new `contentBlockIndex`
that carries something. Every block ends with an explicit `contentBlockStop`. The usage
(`metadata`) may arrive after `messageStop`, so the message ends once both were seen.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal

import jiter

from ..deltas import (
    ClosePart,
    Delta,
    EndMessage,
    GrowPart,
    OpenPart,
    ReportError,
    SkipEvent,
    UpdateMessage,
)
from ..message import Status, StopReason, ToolCall, Usage
from ..parts import Citation, CitationSource, ContentPart
from .base import Decoder

# The documented in-stream exceptions of ConverseStream (boto3 raises them; the wire and
# decoded recordings carry them as events).
EXCEPTION_EVENTS = frozenset(
    {
        "internalServerException",
        "modelStreamErrorException",
        "validationException",
        "throttlingException",
        "serviceUnavailableException",
    }
)

_STOP_REASONS: dict[str, tuple[StopReason, Status]] = {
    "end_turn": ("stop", "complete"),
    "stop_sequence": ("stop", "complete"),
    "tool_use": ("tool_use", "complete"),
    "max_tokens": ("length", "length"),
    "model_context_window_exceeded": ("length", "length"),
    "guardrail_intervened": ("content_filter", "content_filtered"),
    "content_filtered": ("content_filter", "content_filtered"),
}

_USAGE_FIELDS = (
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "cacheReadInputTokens",
    "cacheWriteInputTokens",
)

BlockKind = Literal["text", "thinking", "redacted", "tool_call", "server_tool_use", "tool_result"]


@dataclass(slots=True)
class _Block:
    """What the decoder knows of one contentBlockIndex."""

    kind: BlockKind | None = None
    opened: bool = False  # a part was opened for it
    stopped: bool = False
    # Opaque blocks (replayed whole) are assembled here and handed over at their end.
    start: dict[str, Any] = field(default_factory=dict)
    chunks: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)


class BedrockDecoder(Decoder):
    """Decode Bedrock ConverseStream events into neutral deltas."""

    provider = "bedrock"

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        self._blocks: dict[int, _Block] = {}
        self._stopped = False  # messageStop seen
        self._metadata_seen = False
        self._ended = False

    # --- entry points ------------------------------------------------------------------

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one ConverseStream event (`{event type: body}`) into neutral deltas."""
        deltas: list[Delta] = []
        for name, body in payload.items():
            deltas.extend(self._event(name, body))
        return deltas

    def close(self) -> list[Delta]:
        """The input ended: hand over the opaque blocks still being assembled."""
        return [] if self._ended else self._flush_open()

    # --- events ------------------------------------------------------------------------

    def _event(self, name: str, body: Any) -> list[Delta]:
        if name in EXCEPTION_EVENTS or name.endswith("Exception") or name == "error":
            return self._exception(name, body)
        if not isinstance(body, dict):
            raise self.protocol_error(
                f"expected {name} to carry a JSON object, got {type(body).__name__}",
                {name: body},
            )
        if name == "messageStart":
            return []
        if name == "contentBlockStart":
            return self._block_start(body)
        if name == "contentBlockDelta":
            return self._block_delta(body)
        if name == "contentBlockStop":
            return self._block_stop(body)
        if name == "messageStop":
            return self._message_stop(body)
        if name == "metadata":
            return self._metadata(body)
        return [SkipEvent(name)]

    def _index(self, body: dict[str, Any], event: str) -> int:
        index = body.get("contentBlockIndex")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise self.protocol_error(
                f"expected {event}.contentBlockIndex to be a non-negative integer, got {index!r}",
                {event: body},
            )
        return index

    def _live_block(self, index: int, event: str, body: dict[str, Any]) -> _Block:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block()
        elif block.stopped:
            raise self.protocol_error(
                f"expected {event} for an open content block, got one for block {index} "
                "after its contentBlockStop",
                {event: body},
            )
        return block

    def _block_start(self, body: dict[str, Any]) -> list[Delta]:
        raw = {"contentBlockStart": body}
        index = self._index(body, "contentBlockStart")
        start = body.get("start")
        if not isinstance(start, dict):
            raise self.protocol_error(
                f"expected contentBlockStart.start to be an object, got {type(start).__name__}",
                raw,
            )
        block = self._live_block(index, "contentBlockStart", body)
        if block.kind is not None:
            raise self.protocol_error(
                f"expected one contentBlockStart per block, got a second for block {index}",
                raw,
            )
        if "toolUse" in start:
            tool = _object(self, start["toolUse"], "contentBlockStart.start.toolUse", raw)
            call_id = _string(self, tool.get("toolUseId"), "toolUse.toolUseId", raw)
            name = _string(self, tool.get("name"), "toolUse.name", raw)
            if tool.get("type") == "server_tool_use":
                # Bedrock runs this tool itself (e.g. Nova's code interpreter): not a call
                # for the client, but a block to send back whole with the history.
                block.kind = "server_tool_use"
                block.start = dict(tool)
                return [self._open(index, block, self._server_tool_part(block, final=False))]
            block.kind = "tool_call"
            metadata = {"type": tool["type"]} if isinstance(tool.get("type"), str) else {}
            call = ToolCall.model_construct(
                call_id=call_id,
                name=name,
                arguments="",
                index=None,
                status="incomplete",
                metadata=metadata,
            )
            return [self._open(index, block, call)]
        if "toolResult" in start:
            result = _object(self, start["toolResult"], "contentBlockStart.start.toolResult", raw)
            _string(self, result.get("toolUseId"), "toolResult.toolUseId", raw)
            block.kind = "tool_result"
            block.start = dict(result)
            return [self._open(index, block, self._tool_result_part(block))]
        kinds = ", ".join(sorted(start)) or "nothing"
        return [SkipEvent(f"contentBlockStart.{kinds}")]

    def _block_delta(self, body: dict[str, Any]) -> list[Delta]:
        raw = {"contentBlockDelta": body}
        index = self._index(body, "contentBlockDelta")
        delta = body.get("delta")
        if not isinstance(delta, dict):
            raise self.protocol_error(
                f"expected contentBlockDelta.delta to be an object, got {type(delta).__name__}",
                raw,
            )
        block = self._live_block(index, "contentBlockDelta", body)
        out: list[Delta] = []
        for member, value in delta.items():
            if member == "text":
                out.extend(self._text(index, block, value, raw))
            elif member == "reasoningContent":
                out.extend(self._reasoning(index, block, value, raw))
            elif member == "toolUse":
                out.extend(self._tool_input(index, block, value, raw))
            elif member == "toolResult":
                out.extend(self._tool_result(index, block, value, raw))
            elif member == "citation":
                out.extend(self._citation(index, block, value, raw))
            else:
                out.append(SkipEvent(f"contentBlockDelta.{member}"))
        return out

    def _block_stop(self, body: dict[str, Any]) -> list[Delta]:
        index = self._index(body, "contentBlockStop")
        block = self._live_block(index, "contentBlockStop", body)
        block.stopped = True
        if not block.opened:
            # Only empty deltas (or none) arrived: there is no part to end.
            return []
        return [self._close(index, block, explicit=True)]

    def _message_stop(self, body: dict[str, Any]) -> list[Delta]:
        raw = {"messageStop": body}
        reason = body.get("stopReason")
        if not isinstance(reason, str):
            raise self.protocol_error(
                f"expected messageStop.stopReason to be a string, got {reason!r}", raw
            )
        stop_reason, status = _STOP_REASONS.get(reason, ("other", "complete"))
        metadata: dict[str, Any] = {}
        extra = body.get("additionalModelResponseFields")
        if extra is not None:
            metadata["additional_model_response_fields"] = extra
        self._stopped = True
        out: list[Delta] = [
            UpdateMessage(
                status=status,
                stop_reason=stop_reason,
                raw_stop_reason=reason,
                metadata=metadata or None,
            )
        ]
        if self._metadata_seen:
            out.extend(self._end())
        return out

    def _metadata(self, body: dict[str, Any]) -> list[Delta]:
        raw = {"metadata": body}
        usage: Usage | None = None
        if "usage" in body:
            counts = _object(self, body["usage"], "metadata.usage", raw)
            for key in _USAGE_FIELDS:
                value = counts.get(key)
                if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                    raise self.protocol_error(
                        f"expected metadata.usage.{key} to be an integer, got {value!r}", raw
                    )
            usage = Usage.model_construct(
                input_tokens=counts.get("inputTokens"),
                output_tokens=counts.get("outputTokens"),
                cache_read_tokens=counts.get("cacheReadInputTokens"),
                cache_write_tokens=counts.get("cacheWriteInputTokens"),
                reasoning_tokens=None,
                raw=dict(counts),
                cumulative=False,
            )
        metadata: dict[str, Any] = {}
        if body.get("metrics") is not None:
            metrics = _object(self, body["metrics"], "metadata.metrics", raw)
            if "latencyMs" in metrics:
                metadata["latency_ms"] = metrics["latencyMs"]
        for key, name in (
            ("trace", "trace"),
            ("performanceConfig", "performance_config"),
            ("serviceTier", "service_tier"),
        ):
            if body.get(key) is not None:
                metadata[name] = body[key]
        self._metadata_seen = True
        out: list[Delta] = [UpdateMessage(usage=usage, metadata=metadata or None)]
        if self._stopped:
            out.extend(self._end())
        return out

    def _exception(self, name: str, body: Any) -> list[Delta]:
        if isinstance(body, dict):
            message = body.get("message") or body.get("Message") or ""
            error_type = body.get("errorCode") if name == "error" else name
        else:
            message, error_type = body, name
        out = self._flush_open()
        self._ended = True
        out.append(
            ReportError(
                error_type=str(error_type) if error_type is not None else name,
                message=message if isinstance(message, str) else str(message),
                raw={name: body},
            )
        )
        return out

    # --- block contents ----------------------------------------------------------------

    def _claim(self, index: int, block: _Block, kind: BlockKind, raw: Any) -> None:
        if block.kind is None:
            block.kind = kind
        elif block.kind != kind:
            raise self.protocol_error(
                f"expected a {_describe(block.kind)} delta for block {index}, got a "
                f"{_describe(kind)} delta",
                raw,
            )

    def _text(self, index: int, block: _Block, text: Any, raw: Any) -> list[Delta]:
        text = _string(self, text, "contentBlockDelta.delta.text", raw)
        if not text:
            return []
        self._claim(index, block, "text", raw)
        out: list[Delta] = []
        if not block.opened:
            out.append(self._open(index, block, _part("text")))
        out.append(GrowPart(index, content=text))
        return out

    def _reasoning(self, index: int, block: _Block, value: Any, raw: Any) -> list[Delta]:
        reasoning = _object(self, value, "contentBlockDelta.delta.reasoningContent", raw)
        out: list[Delta] = []
        if "redactedContent" in reasoning:
            data = reasoning["redactedContent"]
            if isinstance(data, bytes | bytearray):
                # boto3 hands the blob over decoded; the wire (and the JSON kept) has it in
                # base64.
                data = base64.b64encode(data).decode("ascii")
            data = _string(self, data, "reasoningContent.redactedContent", raw)
            self._claim(index, block, "redacted", raw)
            block.chunks.append(data)
            if not block.opened:
                out.append(self._open(index, block, self._redacted_part(block)))
        text = reasoning.get("text")
        signature = reasoning.get("signature")
        if text is not None:
            text = _string(self, text, "reasoningContent.text", raw)
        if signature is not None:
            signature = _string(self, signature, "reasoningContent.signature", raw)
        if not text and not signature:
            # An empty reasoning delta (gpt-oss sends them) says nothing: no part, no delta.
            return out
        self._claim(index, block, "thinking", raw)
        if not block.opened:
            out.append(self._open(index, block, _part("thinking")))
        out.append(
            GrowPart(
                index,
                content=text or None,
                options={"signature": signature} if signature else None,
            )
        )
        return out

    def _tool_input(self, index: int, block: _Block, value: Any, raw: Any) -> list[Delta]:
        tool = _object(self, value, "contentBlockDelta.delta.toolUse", raw)
        fragment = _string(self, tool.get("input"), "contentBlockDelta.delta.toolUse.input", raw)
        if block.kind == "server_tool_use":
            block.chunks.append(fragment)
            return []
        if block.kind != "tool_call":
            raise self.protocol_error(
                f"expected a contentBlockStart with toolUse before toolUse deltas for block "
                f"{index}, got {_describe(block.kind)}",
                raw,
            )
        return [GrowPart(index, content=fragment)] if fragment else []

    def _tool_result(self, index: int, block: _Block, value: Any, raw: Any) -> list[Delta]:
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise self.protocol_error(
                "expected contentBlockDelta.delta.toolResult to be a list of objects, got "
                f"{value!r}",
                raw,
            )
        if block.kind != "tool_result":
            raise self.protocol_error(
                f"expected a contentBlockStart with toolResult before toolResult deltas for "
                f"block {index}, got {_describe(block.kind)}",
                raw,
            )
        for item in value:
            text = item.get("text")
            last = block.results[-1] if block.results else None
            if isinstance(text, str) and len(item) == 1 and last is not None and "text" in last:
                # Text arrives in pieces: grow the previous text entry, as the block is sent
                # back with one text entry.
                last["text"] = last["text"] + text
            else:
                block.results.append(dict(item))
        return []

    def _citation(self, index: int, block: _Block, value: Any, raw: Any) -> list[Delta]:
        data = _object(self, value, "contentBlockDelta.delta.citation", raw)
        self._claim(index, block, "text", raw)
        out: list[Delta] = []
        if not block.opened:
            out.append(self._open(index, block, _part("text")))
        out.append(GrowPart(index, citations=(_citation(data),)))
        return out

    # --- parts -------------------------------------------------------------------------

    def _open(self, index: int, block: _Block, part: ContentPart | ToolCall) -> OpenPart:
        block.opened = True
        return OpenPart(index, part)

    def _close(self, index: int, block: _Block, *, explicit: bool) -> ClosePart:
        final: ContentPart | None = None
        if block.kind == "redacted":
            final = self._redacted_part(block)
        elif block.kind == "server_tool_use":
            final = self._server_tool_part(block, final=True)
        elif block.kind == "tool_result":
            final = self._tool_result_part(block)
        block.opened = False
        return ClosePart(index, explicit=explicit, final=final)

    def _flush_open(self) -> list[Delta]:
        # A message that ends (error, cut-off) with opaque blocks still open: hand over what
        # was assembled; the accumulator closes the rest itself.
        out: list[Delta] = []
        for index, block in self._blocks.items():
            if block.opened and block.kind in ("redacted", "server_tool_use", "tool_result"):
                block.stopped = True
                out.append(self._close(index, block, explicit=False))
        return out

    def _end(self) -> list[Delta]:
        out = self._flush_open()
        self._ended = True
        out.append(EndMessage())
        return out

    def _redacted_part(self, block: _Block) -> ContentPart:
        data = "".join(block.chunks)
        return _opaque("redactedContent", {"reasoningContent": {"redactedContent": data}}, id=None)

    def _server_tool_part(self, block: _Block, *, final: bool) -> ContentPart:
        tool = dict(block.start)
        options: dict[str, Any] = {}
        if final or block.chunks:
            text = "".join(block.chunks)
            try:
                tool["input"] = jiter.from_json(text.encode()) if text.strip() else {}
            except ValueError as exc:
                # Keep the raw text, as for a cut-off tool call.
                tool["input"] = text
                options["arguments_error"] = f"expected JSON input, got {text[:80]!r}: {exc}"
        return _opaque(
            str(tool.get("type")),
            {"toolUse": tool},
            id=tool.get("toolUseId"),
            name=tool.get("name"),
            **options,
        )

    def _tool_result_part(self, block: _Block) -> ContentPart:
        result = dict(block.start)
        result["content"] = [dict(item) for item in block.results]
        kind = result.get("type")
        return _opaque(
            kind if isinstance(kind, str) else "toolResult",
            {"toolResult": result},
            id=None,
            tool_use_id=result.get("toolUseId"),
        )


# --- helpers ---------------------------------------------------------------------------


def _part(kind: Literal["text", "thinking"]) -> ContentPart:
    return ContentPart.model_construct(type=kind, content="", options={}, citations=[])


def _opaque(
    kind: str, block: dict[str, Any], *, id: Any, name: Any = None, **extra: Any
) -> ContentPart:
    options: dict[str, Any] = {"type": kind}
    if isinstance(id, str):
        options["id"] = id
    if isinstance(name, str):
        options["name"] = name
    options.update(extra)
    options["block"] = block
    return ContentPart.model_construct(
        type="unsupported", content=None, options=options, citations=[]
    )


def _describe(kind: BlockKind | None) -> str:
    return {
        None: "nothing",
        "text": "text",
        "thinking": "reasoningContent",
        "redacted": "reasoningContent.redactedContent",
        "tool_call": "toolUse",
        "server_tool_use": "server toolUse",
        "tool_result": "toolResult",
    }[kind]


def _object(decoder: Decoder, value: Any, what: str, raw: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise decoder.protocol_error(
            f"expected {what} to be an object, got {type(value).__name__}", raw
        )
    return value


def _string(decoder: Decoder, value: Any, what: str, raw: Any) -> str:
    if not isinstance(value, str):
        raise decoder.protocol_error(f"expected {what} to be a string, got {value!r}", raw)
    return value


def _citation(data: dict[str, Any]) -> Citation:
    """A Bedrock CitationsDelta as a Citation (the location kept in metadata)."""
    pieces = data.get("sourceContent")
    cited: str | None = None
    if isinstance(pieces, list):
        texts = [
            p["text"] for p in pieces if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        cited = "".join(texts) if texts else None
    location = data.get("location")
    web = location.get("web") if isinstance(location, dict) else None
    title = data.get("title")
    source = data.get("source")
    url = web.get("url") if isinstance(web, dict) else None
    source_metadata: dict[str, Any] = {}
    if isinstance(source, str):
        source_metadata["source"] = source
    metadata: dict[str, Any] = {}
    if location is not None:
        metadata["location"] = location
    return Citation(
        cited_text=cited,
        source=CitationSource(
            type="web" if web is not None else "document",
            title=title if isinstance(title, str) else None,
            url=url if isinstance(url, str) else None,
            metadata=source_metadata,
        ),
        metadata=metadata,
    )
