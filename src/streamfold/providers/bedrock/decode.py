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
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Literal

import jiter

from ...deltas import (
    ClosePart,
    Delta,
    EndMessage,
    GrowPart,
    OpenPart,
    ReportError,
    SkipEvent,
    UpdateMessage,
)
from ...errors import StateError
from ...message import Status, StopReason, ToolCall, Usage
from ...parts import Citation, CitationSource, ContentPart
from ..base import Decoder
from ..fields import check, describe, optional
from .state import BedrockBlockAt, BedrockBlockState, BedrockState, BlockKind

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


@dataclass(slots=True)
class _Block:
    """What the decoder knows of one contentBlockIndex."""

    kind: BlockKind | None = None
    # The accumulator's key: the index, or (index, n) for a block that reused an index.
    key: Hashable = None
    opened: bool = False  # a part was opened for it
    stopped: bool = False
    # Opaque blocks (replayed whole) are assembled here and handed over at their end.
    start: dict[str, Any] = field(default_factory=dict)
    chunks: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    # The contentBlockStart's `start`, to tell a repeated start from a new block.
    origin: dict[str, Any] | None = None
    # Lenient: toolUse input that came before its contentBlockStart.
    early: list[str] = field(default_factory=list)
    # Lenient: implicit parts for deltas of another kind than the block's, by kind.
    strays: dict[str, _Block] = field(default_factory=dict)

    def to_state(self) -> BedrockBlockState:
        """This as saved-state data."""
        return BedrockBlockState(
            kind=self.kind,
            key=self.key,
            opened=self.opened,
            stopped=self.stopped,
            start=self.start,
            chunks=self.chunks,
            results=self.results,
            origin=self.origin,
            early=self.early,
            strays={kind: stray.to_state() for kind, stray in self.strays.items()},
        )

    @classmethod
    def from_state(cls, state: BedrockBlockState) -> _Block:
        """The block this describes."""
        return cls(
            kind=state.kind,
            key=state.key,
            opened=state.opened,
            stopped=state.stopped,
            start=dict(state.start),
            chunks=list(state.chunks),
            results=[dict(result) for result in state.results],
            origin=state.origin,
            early=list(state.early),
            strays={kind: cls.from_state(stray) for kind, stray in state.strays.items()},
        )


class BedrockDecoder(Decoder):
    """Decode Bedrock ConverseStream events into neutral deltas."""

    provider = "bedrock"

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        self._blocks: dict[int, _Block] = {}
        self._stopped = False  # messageStop seen
        self._metadata_seen = False
        self._ended = False
        self._restarts = 0

    state_model = BedrockState

    def to_state(self) -> BedrockState:
        """This decoder as saved-state data."""
        return BedrockState(
            blocks=[
                BedrockBlockAt(index=index, block=block.to_state())
                for index, block in self._blocks.items()
            ],
            stopped=self._stopped,
            metadata_seen=self._metadata_seen,
            ended=self._ended,
            restarts=self._restarts,
        )

    @classmethod
    def from_state(
        cls, state: BedrockState, *, choice: int = 0, strict: bool = False
    ) -> BedrockDecoder:
        """The decoder `state` describes."""
        decoder = cls(choice=choice, strict=strict)
        for n, at in enumerate(state.blocks):
            if at.index in decoder._blocks:
                raise StateError(f"blocks[{n}].index", "expected each index once")
            decoder._blocks[at.index] = _Block.from_state(at.block)
        decoder._stopped = state.stopped
        decoder._metadata_seen = state.metadata_seen
        decoder._ended = state.ended
        decoder._restarts = state.restarts
        return decoder

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
        if name == "chunk":
            # Not skipped: a whole InvokeModel answer would fold to an empty message.
            raise self.protocol_error(
                "expected ConverseStream events, got an InvokeModelWithResponseStream chunk: "
                "fold it with provider='bedrock-invoke' (or no provider)",
                {name: body},
            )
        return [SkipEvent(name)]

    def _index(self, body: dict[str, Any], event: str) -> int:
        index = body.get("contentBlockIndex")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise self.protocol_error(
                f"expected {event}.contentBlockIndex to be a non-negative integer, "
                f"got {describe(index)}",
                {event: body},
            )
        return index

    def _block(self, index: int) -> _Block:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block(key=index)
        return block

    def _after_stop(self, index: int, event: str, kind: str, raw: Any) -> list[Delta]:
        reason = (
            f"expected {event} for an open content block, got one for block {index} "
            "after its contentBlockStop"
        )
        return self.repair(kind, reason, raw)

    def _block_start(self, body: dict[str, Any]) -> list[Delta]:
        raw = {"contentBlockStart": body}
        index = self._index(body, "contentBlockStart")
        start = check(self, body.get("start"), dict, "contentBlockStart.start", raw)
        block = self._block(index)
        out: list[Delta] = []
        if block.stopped or block.kind is not None:
            if not block.stopped and start == block.origin:
                return self.repair(
                    "duplicate_block_start",
                    f"expected one contentBlockStart per block, got a second for block {index}",
                    raw,
                )
            # A new block on a used index: the old one ends, the new one gets its own key.
            if block.stopped:
                out = self._after_stop(index, "contentBlockStart", "reused_block_index", raw)
            else:
                out = self.repair(
                    "reused_block_index",
                    f"expected one contentBlockStart per block, got a second for block {index}",
                    raw,
                )
                out.extend(self._flush_early(block))
                block.stopped = True
                out.extend(self._close(block, explicit=False))
            self._restarts += 1
            block = self._blocks[index] = _Block(key=(index, self._restarts))
        out.extend(self._start_block(index, block, start, raw))
        # toolUse input (or results) that came before this start.
        out.extend(self._flush_early(block))
        return out

    def _start_block(
        self, index: int, block: _Block, start: dict[str, Any], raw: Any
    ) -> list[Delta]:
        if "toolUse" in start:
            tool = check(self, start["toolUse"], dict, "contentBlockStart.start.toolUse", raw)
            call_id = check(self, tool.get("toolUseId"), str, "toolUse.toolUseId", raw)
            name = check(self, tool.get("name"), str, "toolUse.name", raw)
            if tool.get("type") == "server_tool_use":
                # Bedrock runs this tool itself (e.g. Nova's code interpreter): not a call
                # for the client, but a block to send back whole with the history.
                block.kind = "server_tool_use"
                block.origin = start
                block.start = dict(tool)
                return [self._open(block, self._server_tool_part(block, final=False))]
            block.kind = "tool_call"
            block.origin = start
            metadata = {"type": tool["type"]} if isinstance(tool.get("type"), str) else {}
            call = ToolCall.model_construct(
                call_id=call_id,
                name=name,
                arguments="",
                index=None,
                status="incomplete",
                metadata=metadata,
            )
            return [self._open(block, call)]
        if "toolResult" in start:
            result = check(
                self, start["toolResult"], dict, "contentBlockStart.start.toolResult", raw
            )
            check(self, result.get("toolUseId"), str, "toolResult.toolUseId", raw)
            block.kind = "tool_result"
            block.origin = start
            block.start = dict(result)
            return [self._open(block, self._tool_result_part(block))]
        kinds = ", ".join(sorted(start)) or "nothing"
        return [SkipEvent(f"contentBlockStart.{kinds}")]

    def _block_delta(self, body: dict[str, Any]) -> list[Delta]:
        raw = {"contentBlockDelta": body}
        index = self._index(body, "contentBlockDelta")
        delta = check(self, body.get("delta"), dict, "contentBlockDelta.delta", raw)
        block = self._block(index)
        if block.stopped:
            return self._after_stop(index, "contentBlockDelta", "delta_after_block_stop", raw)
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
        block = self._block(index)
        if block.stopped:
            raw = {"contentBlockStop": body}
            return self._after_stop(index, "contentBlockStop", "duplicate_block_stop", raw)
        # Only empty deltas (or none) arrived: there is no part to end.
        out = self._flush_early(block)
        block.stopped = True
        out.extend(self._close(block, explicit=True))
        return out

    def _message_stop(self, body: dict[str, Any]) -> list[Delta]:
        raw = {"messageStop": body}
        reason = check(self, body.get("stopReason"), str, "messageStop.stopReason", raw)
        stop_reason, status = _STOP_REASONS.get(reason, ("other", "complete"))
        metadata: dict[str, Any] = {}
        extra = body.get("additionalModelResponseFields")
        if extra is not None:
            metadata["additional_model_response_fields"] = extra
        if self._stopped:
            return self.repair(
                "duplicate_message_stop", "expected one messageStop, got a second", raw
            )
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
            counts = check(self, body["usage"], dict, "metadata.usage", raw)
            for key in _USAGE_FIELDS:
                optional(self, counts, key, int, raw, "metadata.usage.")
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
            metrics = check(self, body["metrics"], dict, "metadata.metrics", raw)
            if "latencyMs" in metrics:
                metadata["latency_ms"] = metrics["latencyMs"]
        for key, name in (
            ("trace", "trace"),
            ("performanceConfig", "performance_config"),
            ("serviceTier", "service_tier"),
        ):
            if body.get(key) is not None:
                metadata[name] = body[key]
        if self._metadata_seen:
            # A repeat would count its usage twice (Bedrock's usage is not a running total).
            return self.repair(
                "duplicate_metadata", "expected one metadata event, got a second", raw
            )
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

    def _claim(
        self, index: int, block: _Block, kind: BlockKind, raw: Any, out: list[Delta]
    ) -> _Block:
        """The block a delta of `kind` grows: this one, or (lenient) an implicit one beside it."""
        if block.kind is None:
            block.kind = kind
        elif block.kind != kind:
            out.extend(
                self.repair(
                    "delta_type_mismatch",
                    f"expected a {_describe(block.kind)} delta for block {index}, got a "
                    f"{_describe(kind)} delta",
                    raw,
                )
            )
            stray = block.strays.get(kind)
            if stray is None:
                stray = block.strays[kind] = _Block(kind=kind, key=(block.key, kind))
            return stray
        return block

    def _text(self, index: int, block: _Block, text: Any, raw: Any) -> list[Delta]:
        text = check(self, text, str, "contentBlockDelta.delta.text", raw)
        if not text:
            return []
        out: list[Delta] = []
        block = self._claim(index, block, "text", raw, out)
        if not block.opened:
            out.append(self._open(block, _part("text")))
        out.append(GrowPart(block.key, content=text))
        return out

    def _reasoning(self, index: int, block: _Block, value: Any, raw: Any) -> list[Delta]:
        reasoning = check(self, value, dict, "contentBlockDelta.delta.reasoningContent", raw)
        out: list[Delta] = []
        if "redactedContent" in reasoning:
            data = reasoning["redactedContent"]
            if isinstance(data, bytes | bytearray):
                # boto3 hands the blob over decoded; the wire (and the JSON kept) has it in
                # base64.
                data = base64.b64encode(data).decode("ascii")
            data = check(self, data, str, "reasoningContent.redactedContent", raw)
            redacted = self._claim(index, block, "redacted", raw, out)
            redacted.chunks.append(data)
            if not redacted.opened:
                out.append(self._open(redacted, self._redacted_part(redacted)))
        text = reasoning.get("text")
        signature = reasoning.get("signature")
        if text is not None:
            text = check(self, text, str, "reasoningContent.text", raw)
        if signature is not None:
            signature = check(self, signature, str, "reasoningContent.signature", raw)
        if not text and not signature:
            # An empty reasoning delta (gpt-oss sends them) says nothing: no part, no delta.
            return out
        block = self._claim(index, block, "thinking", raw, out)
        if not block.opened:
            out.append(self._open(block, _part("thinking")))
        out.append(
            GrowPart(
                block.key,
                content=text or None,
                options={"signature": signature} if signature else None,
            )
        )
        return out

    def _tool_input(self, index: int, block: _Block, value: Any, raw: Any) -> list[Delta]:
        tool = check(self, value, dict, "contentBlockDelta.delta.toolUse", raw)
        fragment = check(self, tool.get("input"), str, "contentBlockDelta.delta.toolUse.input", raw)
        if block.kind == "server_tool_use":
            block.chunks.append(fragment)
            return []
        if block.kind == "tool_call":
            return [GrowPart(block.key, content=fragment)] if fragment else []
        reason = (
            f"expected a contentBlockStart with toolUse before toolUse deltas for block "
            f"{index}, got {_describe(block.kind)}"
        )
        if block.kind is None:
            # Held until the start comes (or the block stops without one).
            out = self.repair("delta_before_block_start", reason, raw)
            block.early.append(fragment)
            return out
        out = self.repair("delta_type_mismatch", reason, raw)
        stray = self._stray_call(block, out)
        if fragment:
            out.append(GrowPart(stray.key, content=fragment))
        return out

    def _tool_result(self, index: int, block: _Block, value: Any, raw: Any) -> list[Delta]:
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise self.protocol_error(
                "expected contentBlockDelta.delta.toolResult to be a list of objects, got "
                f"{describe(value)}",
                raw,
            )
        out: list[Delta] = []
        if block.kind != "tool_result":
            reason = (
                f"expected a contentBlockStart with toolResult before toolResult deltas for "
                f"block {index}, got {_describe(block.kind)}"
            )
            if block.kind is None:
                # Kept in the block's results until its start (or its stop) comes.
                out = self.repair("delta_before_block_start", reason, raw)
            else:
                out = self.repair("delta_type_mismatch", reason, raw)
                block = self._stray_result(block, out)
        for item in value:
            text = item.get("text")
            last = block.results[-1] if block.results else None
            if isinstance(text, str) and len(item) == 1 and last is not None and "text" in last:
                # Text arrives in pieces: grow the previous text entry, as the block is sent
                # back with one text entry.
                last["text"] = last["text"] + text
            else:
                block.results.append(dict(item))
        return out

    def _citation(self, index: int, block: _Block, value: Any, raw: Any) -> list[Delta]:
        data = check(self, value, dict, "contentBlockDelta.delta.citation", raw)
        out: list[Delta] = []
        block = self._claim(index, block, "text", raw, out)
        if not block.opened:
            out.append(self._open(block, _part("text")))
        out.append(GrowPart(block.key, citations=(_citation(data),)))
        return out

    # --- parts -------------------------------------------------------------------------

    def _open(self, block: _Block, part: ContentPart | ToolCall) -> OpenPart:
        block.opened = True
        # A server tool use is a tool Bedrock runs: the text before it is narration.
        return OpenPart(block.key, part, block.kind == "server_tool_use")

    def _stray_call(self, block: _Block, out: list[Delta]) -> _Block:
        """A nameless tool call beside `block`, for toolUse input its start never named."""
        stray = block.strays.get("tool_call")
        if stray is None:
            stray = block.strays["tool_call"] = _Block(kind="tool_call", key=(block.key, "tool"))
        if not stray.opened:
            out.append(self._open(stray, ToolCall(call_id=None, name=None, arguments="")))
        return stray

    def _stray_result(self, block: _Block, out: list[Delta]) -> _Block:
        """A toolResult block beside `block`, for results its start never announced."""
        stray = block.strays.get("tool_result")
        if stray is None:
            stray = block.strays["tool_result"] = _Block(
                kind="tool_result", key=(block.key, "tool_result")
            )
        if not stray.opened:
            out.append(self._open(stray, self._tool_result_part(stray)))
        return stray

    def _flush_early(self, block: _Block) -> list[Delta]:
        """Hand over what came before a start that is here now, or that never came."""
        out: list[Delta] = []
        if block.early:
            text = "".join(block.early)
            block.early = []
            if block.kind == "server_tool_use":
                block.chunks.insert(0, text)
            else:
                if block.kind is None:
                    block.kind = "tool_call"
                    out.append(self._open(block, ToolCall(call_id=None, name=None, arguments="")))
                target = block if block.kind == "tool_call" else self._stray_call(block, out)
                if text:
                    out.append(GrowPart(target.key, content=text))
        if block.results and block.kind is None:
            block.kind = "tool_result"
            out.append(self._open(block, self._tool_result_part(block)))
        elif block.results and block.kind != "tool_result":
            stray = self._stray_result(block, out)
            stray.results.extend(block.results)
            block.results = []
        return out

    def _close(self, block: _Block, *, explicit: bool) -> list[Delta]:
        """Close a block and the implicit parts that grew beside it."""
        return [
            self._close_one(one, explicit=explicit)
            for one in (block, *block.strays.values())
            if one.opened
        ]

    def _close_one(self, block: _Block, *, explicit: bool) -> ClosePart:
        final: ContentPart | None = None
        if block.kind == "redacted":
            final = self._redacted_part(block)
        elif block.kind == "server_tool_use":
            final = self._server_tool_part(block, final=True)
        elif block.kind == "tool_result":
            final = self._tool_result_part(block)
        block.opened = False
        return ClosePart(block.key, explicit=explicit, final=final)

    def _flush_open(self) -> list[Delta]:
        # A message that ends (error, cut-off) with opaque blocks still open: hand over what
        # was assembled; the accumulator closes the rest itself.
        out: list[Delta] = []
        for block in list(self._blocks.values()):
            out.extend(self._flush_early(block))
            for one in (block, *block.strays.values()):
                if one.opened and one.kind in ("redacted", "server_tool_use", "tool_result"):
                    one.stopped = True
                    out.append(self._close_one(one, explicit=False))
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
                tool["input"] = (
                    jiter.from_json(text.encode(), allow_inf_nan=False) if text.strip() else {}
                )
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
