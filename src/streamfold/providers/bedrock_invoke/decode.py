"""Amazon Bedrock InvokeModelWithResponseStream: each model family's own stream, wrapped.

The wire is the binary `vnd.amazon.eventstream` of ConverseStream, but every event is a
`chunk` whose `bytes` (base64 on the wire; boto3 hands them over decoded) hold one event
of the model's own streaming format. This decoder unwraps them and hands each to the
decoder of that format, chosen by the first one: Anthropic Messages events for Claude
(everything then comes out exactly as on the Anthropic API), ConverseStream-shaped
events for Amazon Nova. Other families (Llama, Mistral, Cohere, Titan...) are refused by
name: their text would otherwise be skipped into an empty "incomplete" message.

The last chunk carries Bedrock's `amazon-bedrock-invocationMetrics` beside the model's
event: it becomes `metadata["invocation_metrics"]` (and the usage, when the model's own
events reported none).
"""

from __future__ import annotations

import binascii
from collections.abc import Hashable
from typing import Any

import jiter
from pydantic import ValidationError

from ...deltas import Delta, EndMessage, ReportError, SkipEvent, UpdateMessage
from ...errors import StateError, StreamProtocolError, preview
from ...message import Usage
from ...state_schema import validation_error
from .. import detect_provider
from ..anthropic.decode import AnthropicDecoder
from ..base import Decoder
from ..bedrock.decode import BedrockDecoder
from .state import BedrockInvokeState

_METRICS = "amazon-bedrock-invocationMetrics"
# invocationMetrics counts -> Usage fields.
_METRIC_USAGE = (
    ("inputTokenCount", "input_tokens"),
    ("outputTokenCount", "output_tokens"),
    ("cacheReadInputTokenCount", "cache_read_tokens"),
    ("cacheWriteInputTokenCount", "cache_write_tokens"),
)
# The families decoded, by the format detect_provider sees in their first event.
_FAMILIES: dict[str, type[Decoder]] = {"anthropic": AnthropicDecoder, "bedrock": BedrockDecoder}
# A key of a first event -> the family that streams it (for a refusal that names it).
_FOREIGN_FAMILIES = (
    ("generation", "Meta Llama"),
    ("outputs", "Mistral (7B / Mixtral / Small)"),
    ("choices", "an OpenAI-style completion (Mistral Large, AI21 Jamba, DeepSeek, gpt-oss)"),
    ("event_type", "Cohere Command"),
    ("is_finished", "Cohere Command"),
    ("generations", "Cohere Command"),
    ("outputText", "Amazon Titan Text"),
    ("completion", "Anthropic Claude Text Completions (the legacy prompt API)"),
)


class BedrockInvokeDecoder(Decoder):
    """Decode InvokeModelWithResponseStream `{"chunk": {"bytes": ...}}` events."""

    provider = "bedrock-invoke"
    state_model = BedrockInvokeState

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        # The decoder of the model family's own events, chosen by the first chunk.
        self._inner: Decoder | None = None
        self._usage_seen = False  # the model's own events reported usage
        # The last chunk object_text unwrapped and left to decode(): its payload and the
        # family's event, so decode() does not unwrap it again (a cache, not state: it is
        # only read for the very payload object it was made from).
        self._unwrapped_from: dict[str, Any] | None = None
        self._unwrapped: dict[str, Any] = {}

    def to_state(self) -> BedrockInvokeState:
        """This decoder as saved-state data: the family's decoder's state inside."""
        inner = self._inner
        return BedrockInvokeState(
            family=None if inner is None else inner.provider,  # type: ignore[arg-type]
            inner=None if inner is None else inner.to_state().model_dump(mode="json"),
            usage_seen=self._usage_seen,
        )

    @classmethod
    def from_state(
        cls, state: BedrockInvokeState, *, choice: int = 0, strict: bool = False
    ) -> BedrockInvokeDecoder:
        """The decoder `state` describes."""
        if (state.family is None) != (state.inner is None):
            raise StateError("inner", "expected the family's decoder state exactly with a family")
        decoder = cls(choice=choice, strict=strict)
        decoder._usage_seen = state.usage_seen
        if state.family is not None:
            family = _FAMILIES[state.family]
            try:
                inner = family.state_model.model_validate(state.inner)
            except ValidationError as exc:
                raise validation_error(exc).within("inner") from None
            try:
                decoder._inner = family.from_state(inner, choice=choice, strict=strict)
            except StateError as exc:
                raise exc.within("inner") from None
        return decoder

    def object_text(self, payload: dict[str, Any]) -> tuple[Hashable, str] | None:
        """The dict lane (see `Decoder.object_text`): a chunk whose event the family's
        decoder takes on its own lane. Nearly every chunk of a stream is one; without the
        lane each went through the family's full decode() and the accumulator's apply
        (3-6x the same events as Anthropic SSE)."""
        self._unwrapped_from = None
        inner_decoder = self._inner
        if inner_decoder is None or len(payload) != 1:
            return None
        body = payload.get("chunk")
        if type(body) is not dict:
            return None
        try:
            inner = self._unwrap(body, payload)
        except StreamProtocolError:
            return None  # decode() raises it, with the payload as the fold will have it
        if _METRICS not in inner:
            hit = inner_decoder.object_text(inner)
            if hit is not None:
                return hit
        self._unwrapped_from = payload
        self._unwrapped = inner
        return None

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one invoke event (`{"chunk": {...}}` or an exception) into deltas."""
        out: list[Delta] = []
        if payload is self._unwrapped_from:  # object_text unwrapped it already
            self._unwrapped_from = None
            return self._family(self._unwrapped, payload)
        for name, body in payload.items():
            if name == "chunk":
                out.extend(self._chunk(body, payload))
            elif name.endswith("Exception") or name == "error":
                out.extend(self._exception(name, body, payload))
            else:
                out.append(SkipEvent(name))
        return out

    def close(self) -> list[Delta]:
        """The input ended: whatever the family's decoder still holds."""
        return [] if self._inner is None else self._inner.close()

    def _chunk(self, body: Any, raw: dict[str, Any]) -> list[Delta]:
        return self._family(self._unwrap(body, raw), raw)

    def _unwrap(self, body: Any, raw: dict[str, Any]) -> dict[str, Any]:
        """The family's event a chunk carries: its bytes, base64-decoded, as JSON."""
        data = body.get("bytes") if isinstance(body, dict) else None
        if isinstance(data, str):
            try:
                data = binascii.a2b_base64(data, strict_mode=True)
            except (binascii.Error, ValueError) as exc:
                raise self.protocol_error(
                    f"expected chunk.bytes to be base64, got {data[:40]!r} ({exc})", raw
                ) from None
        elif not isinstance(data, bytes | bytearray):
            raise self.protocol_error(
                f"expected a chunk with bytes (base64 text or bytes), got {preview(body)}", raw
            )
        try:
            inner = jiter.from_json(data if type(data) is bytes else bytes(data))
        except ValueError as exc:
            raise self.protocol_error(
                f"expected JSON in chunk.bytes, got invalid JSON ({exc})", raw
            ) from None
        if not isinstance(inner, dict):
            raise self.protocol_error(
                f"expected a JSON object in chunk.bytes, got {type(inner).__name__}", raw
            )
        return inner

    def _family(self, inner: dict[str, Any], raw: dict[str, Any]) -> list[Delta]:
        """The deltas of the family's event (and of Bedrock's metrics beside it)."""
        metrics = inner.pop(_METRICS, None)
        deltas: list[Delta] = []
        if self._inner is not None:
            deltas = self._inner.decode(inner) if inner else []
        elif inner:
            self._inner = self._choose(inner)
            # Which format the chunks carry: an encoder tells Claude's blocks from Nova's.
            deltas = [UpdateMessage(metadata={"invoke_format": self._inner.provider})]
            deltas.extend(self._inner.decode(inner))
        for delta in deltas:
            if type(delta) is UpdateMessage and delta.usage is not None:
                self._usage_seen = True
        if metrics is None:
            return deltas
        # Before the message ends: the trailer rides on the family's last event.
        update = self._metrics(metrics, raw)
        ends = [i for i, delta in enumerate(deltas) if type(delta) is EndMessage]
        at = ends[0] if ends else len(deltas)
        return [*deltas[:at], update, *deltas[at:]]

    def _choose(self, inner: dict[str, Any]) -> Decoder:
        """The decoder of the family whose event this is, or a refusal naming the family."""
        found = detect_provider(inner)
        if found is None and inner.get("type") in ("ping", "error"):
            found = "anthropic"  # events only the Anthropic format has, too plain to detect
        family = _FAMILIES.get(found or "")
        if family is None:
            name = next((n for key, n in _FOREIGN_FAMILIES if key in inner), None)
            what = f"{name}'s stream" if name else "an unknown model family's stream"
            raise self.protocol_error(
                "expected Anthropic Claude (Messages events) or Amazon Nova (ConverseStream "
                f"events) inside the invoke chunks, got {what} (keys: "
                f"{preview(list(inner)[:6])[1:-1]}), which streamfold does not decode: stream it "
                "with ConverseStream (provider='bedrock')",
                inner,
            )
        return family(choice=self.choice, strict=self.strict)

    def _metrics(self, metrics: Any, raw: dict[str, Any]) -> UpdateMessage:
        if not isinstance(metrics, dict) or not all(
            type(value) is int for value in metrics.values()
        ):
            raise self.protocol_error(
                f"expected {_METRICS} to be an object of integers, got {preview(metrics)}", raw
            )
        metadata: dict[str, Any] = {"invocation_metrics": metrics}
        if "invocationLatency" in metrics:
            metadata["latency_ms"] = metrics["invocationLatency"]
        if "firstByteLatency" in metrics:
            metadata["first_byte_latency_ms"] = metrics["firstByteLatency"]
        usage = None
        if not self._usage_seen and "outputTokenCount" in metrics:
            counts = {field: metrics.get(key) for key, field in _METRIC_USAGE}
            usage = Usage.trusted(
                **counts, reasoning_tokens=None, raw=dict(metrics), cumulative=False
            )
        return UpdateMessage(usage=usage, metadata=metadata)

    def _exception(self, name: str, body: Any, raw: dict[str, Any]) -> list[Delta]:
        """An exception frame: the family's decoder closes what it holds, then the error."""
        if isinstance(self._inner, AnthropicDecoder):
            # Said as the Anthropic API says an in-stream error, so its decoder ends the
            # message as it would there.
            fields = body if isinstance(body, dict) else {"message": body}
            text = fields.get("message") or fields.get("Message") or ""
            code = fields.get("errorCode") if name == "error" else name
            kind = code if isinstance(code, str) else name
            error = {"type": kind, "message": text if isinstance(text, str) else str(text)}
            deltas = self._inner.decode({"type": "error", "error": error})
            return [
                ReportError(d.error_type, d.message, raw) if type(d) is ReportError else d
                for d in deltas
            ]
        converse = self._inner if isinstance(self._inner, BedrockDecoder) else None
        return (converse or BedrockDecoder(strict=self.strict)).decode({name: body})
