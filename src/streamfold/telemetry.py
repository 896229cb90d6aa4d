"""OpenTelemetry for every fold: a GenAI span and the GenAI client metrics.

    from streamfold import telemetry

    telemetry.instrument()        # every fold / afold from now on (the global providers)
    telemetry.uninstrument()      # off again

`pip install 'streamfold[otel]'` (opentelemetry-api). Everything goes through the
OpenTelemetry API, so the application's own tracer and meter providers (and their
exporters) decide where it goes; `instrument(tracer_provider=..., meter_provider=...)`
names others. Off, nothing is recorded and nothing is paid but one None check when a
fold finishes.

Each fold that finishes (completed, cut, cancelled or failed by the provider) gives one
span, `chat {model}` (kind CLIENT, from the fold's start to its end), with the GenAI
semantic-convention attributes the stream carries: `gen_ai.operation.name` ("chat"),
`gen_ai.provider.name`, `gen_ai.request.model` and `gen_ai.response.model` (a stream
names only the model that answered, so both are that one), `gen_ai.response.id`,
`gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens` / `output_tokens`,
`gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`,
`gen_ai.usage.reasoning.output_tokens`, `gen_ai.response.time_to_first_chunk`; a message
that ended in a provider error gets `error.type` and an ERROR status. And the metrics,
with the convention's names, units and bucket advice:

- `gen_ai.client.token.usage` ({token}): input and output tokens (`gen_ai.token.type`);
- `gen_ai.client.operation.duration` (s): the whole stream;
- `gen_ai.client.operation.time_to_first_chunk` (s): the first chunk of the stream;
- `gen_ai.client.operation.time_per_output_chunk` (s): once per fold, the mean time per
  output token after the first token, `(total - first token) / (output tokens - 1)`:
  streamfold reads no clock per chunk, so it gives the stream's mean, not each gap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import timing as _timing
from .errors import UsageError
from .providers import canonical_provider

if TYPE_CHECKING:
    from .message import Message
    from .timing import StreamTiming

__all__ = ["instrument", "is_instrumented", "uninstrument"]

SCOPE = "streamfold"

# The convention's bucket advice (gen-ai-metrics.md).
TOKEN_BUCKETS: list[float] = [
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
]  # fmt: skip
DURATION_BUCKETS = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
]  # fmt: skip
PER_CHUNK_BUCKETS = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
]  # fmt: skip

# The _Instruments field of each metric: its name, unit, description and buckets.
HISTOGRAMS: dict[str, tuple[str, str, str, list[float]]] = {
    "token_usage": (
        "gen_ai.client.token.usage",
        "{token}",
        "Number of input and output tokens used.",
        TOKEN_BUCKETS,
    ),
    "duration": (
        "gen_ai.client.operation.duration",
        "s",
        "GenAI operation duration.",
        DURATION_BUCKETS,
    ),
    "time_to_first_chunk": (
        "gen_ai.client.operation.time_to_first_chunk",
        "s",
        "Time to receive the first chunk of the response stream.",
        DURATION_BUCKETS,
    ),
    "time_per_output_chunk": (
        "gen_ai.client.operation.time_per_output_chunk",
        "s",
        "Mean time per output token after the first, per stream.",
        PER_CHUNK_BUCKETS,
    ),
}

# streamfold's providers as `gen_ai.provider.name` names them (the well-known values);
# one without a well-known value keeps its own name.
PROVIDER_NAMES = {
    "anthropic": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "gemini": "gcp.gemini",
    "bedrock": "aws.bedrock",
    "bedrock-invoke": "aws.bedrock",
}


@dataclass(frozen=True, slots=True)
class _Instruments:
    tracer: Any
    token_usage: Any
    duration: Any
    time_to_first_chunk: Any
    time_per_output_chunk: Any

    def record(self, timing: StreamTiming, message: Message) -> None:
        """One finished fold: its span and its metrics."""
        provider = message.metadata.get("provider")
        model = message.metadata.get("model")
        common: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _provider_name(provider),
        }
        if isinstance(model, str):
            common["gen_ai.request.model"] = model
            common["gen_ai.response.model"] = model
        error_type = _error_type(message)
        attributes = dict(common)
        response_id = message.metadata.get("id")
        if isinstance(response_id, str):
            attributes["gen_ai.response.id"] = response_id
        reason = message.raw_stop_reason or message.stop_reason
        if reason is not None:
            attributes["gen_ai.response.finish_reasons"] = [reason]
        usage = message.usage
        if usage is not None:
            for name, value in (
                ("gen_ai.usage.input_tokens", usage.input_tokens),
                ("gen_ai.usage.output_tokens", usage.output_tokens),
                ("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens),
                ("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens),
                ("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens),
            ):
                if _countable(value):
                    attributes[name] = value
        first_chunk = timing.time_to_first_byte_s
        if first_chunk is not None:
            attributes["gen_ai.response.time_to_first_chunk"] = first_chunk
        if error_type is not None:
            attributes["error.type"] = error_type
        total = timing.total_s or 0.0
        end = time.time_ns()
        name = f"chat {model}" if isinstance(model, str) else "chat"
        from opentelemetry.trace import SpanKind, Status, StatusCode

        span = self.tracer.start_span(
            name,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=end - int(total * 1e9),
        )
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR, error_type))
        span.end(end_time=end)

        metric = dict(common)
        if error_type is not None:
            metric["error.type"] = error_type
        self.duration.record(total, metric)
        if usage is not None:
            for kind, value in (("input", usage.input_tokens), ("output", usage.output_tokens)):
                if _countable(value):
                    self.token_usage.record(value, {**common, "gen_ai.token.type": kind})
        if error_type is None:
            if first_chunk is not None:
                self.time_to_first_chunk.record(first_chunk, common)
            per_token = _time_per_output_token(timing)
            if per_token is not None:
                self.time_per_output_chunk.record(per_token, common)


def _provider_name(provider: Any) -> str:
    if not isinstance(provider, str):
        return "unknown"
    canonical = canonical_provider(provider)
    return PROVIDER_NAMES.get(canonical, canonical)


def _error_type(message: Message) -> str | None:
    """The error a provider ended the stream with (its type, else `provider_error`)."""
    if message.status != "error":
        return None
    error = message.metadata.get("error")
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code")
        if isinstance(kind, str) and kind:
            return kind
    return "provider_error"


# The largest integer an OpenTelemetry attribute or data point carries (signed 64-bit).
_INT64_MAX = 2**63 - 1


def _countable(count: int | None) -> bool:
    """Whether a token count goes on the span and into the histogram: a stream can claim
    any number, and OpenTelemetry carries a signed 64-bit integer (the SDK's histogram
    raises OverflowError on an int no float holds)."""
    return count is not None and count <= _INT64_MAX


def _time_per_output_token(timing: StreamTiming) -> float | None:
    tokens = timing.output_tokens
    first, total = timing.time_to_first_token_s, timing.total_s
    if tokens is None or tokens < 2 or first is None or total is None or total <= first:
        return None
    try:
        return (total - first) / (tokens - 1)
    except OverflowError:  # a token count no float holds: no time per token to record
        return None


def instrument(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Record a span and the GenAI metrics for every fold that finishes from now on.

    Without arguments, the global tracer and meter providers (whatever the application
    set up; the API's no-op ones if none). Calling it again replaces the instruments.
    """
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        raise UsageError(
            "streamfold.telemetry needs the OpenTelemetry API: pip install 'streamfold[otel]'"
        ) from None
    tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
    meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
    histograms = {
        field: meter.create_histogram(
            name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets
        )
        for field, (name, unit, description, buckets) in HISTOGRAMS.items()
    }
    instruments = _Instruments(tracer=tracer, **histograms)
    _timing._on_finish = instruments.record


def uninstrument() -> None:
    """Stop recording: folds finish as if `instrument()` had never been called."""
    _timing._on_finish = None


def is_instrumented() -> bool:
    """True between `instrument()` and `uninstrument()`."""
    return _timing._on_finish is not None
