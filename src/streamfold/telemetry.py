"""OpenTelemetry for every fold: a GenAI span and the GenAI client metrics.

    from streamfold import telemetry

    telemetry.instrument()        # every fold / afold from now on (the global providers)
    telemetry.uninstrument()      # off again

`pip install 'streamfold[otel]'` (opentelemetry-api). Everything goes through the
OpenTelemetry API, so the application's own tracer and meter providers (and their
exporters) decide where it goes; `instrument(tracer_provider=..., meter_provider=...)`
names others. Off, nothing is recorded and nothing is paid but one None check per chunk
and per finished fold.

Names and values follow the GenAI semantic conventions as `opentelemetry-semantic-conventions`
0.66b2 ships them (schema 1.44.0; `SEMCONV_VERSION`): `gen_ai.*` attributes and the
`gen_ai.client.*` metrics with their units.

Each fold gives one span, `chat {request model}` (kind CLIENT, from the fold's start to
its end), whether it completed, was cut, cancelled, failed by the provider or raised:
`gen_ai.operation.name` ("chat"), `gen_ai.provider.name` (the convention's well-known
value for the provider named: `fold(..., provider="groq")` gives `groq`, `"azure-openai"`
`azure.ai.openai`; else for the server's address; else for the provider detected),
`gen_ai.request.model`, `server.address`, `server.port` (from `request=RequestInfo(...)`;
without one, the request model is the model that answered), `gen_ai.response.model`,
`gen_ai.response.id`, `gen_ai.response.finish_reasons`, the `gen_ai.usage.*` counts,
`gen_ai.response.time_to_first_chunk`. A fold that did not end well gets `error.type` and
an ERROR status: the provider's error type, `cancelled` (the consumer stopped),
`incomplete` (the input ended before the message: a cut stream), or the class of the
exception the fold raised. Message content (`gen_ai.input.messages`,
`gen_ai.output.messages`) is recorded only with `instrument(capture_content=True)`.

The metrics: `gen_ai.client.token.usage` ({token}, by `gen_ai.token.type`),
`gen_ai.client.operation.duration` (s, with `error.type` when set),
`gen_ai.client.operation.time_to_first_chunk` (s) and
`gen_ai.client.operation.time_per_output_chunk` (s, once per chunk after the first: the
time from the previous chunk's arrival to its own).

Telemetry never changes what a fold returns or raises: a failure inside it (a value
OpenTelemetry cannot carry, an exporter or reader that raises) is caught and logged once
on the `streamfold.telemetry` logger.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from . import timing as _timing
from .errors import UsageError
from .providers.fields import describe

if TYPE_CHECKING:
    from .message import Message
    from .timing import StreamTiming

__all__ = ["RequestInfo", "instrument", "is_instrumented", "uninstrument"]

SCOPE = "streamfold"
SEMCONV_VERSION = "0.66b2"
"""The opentelemetry-semantic-conventions release whose GenAI names this module follows."""
SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"

_log = logging.getLogger("streamfold.telemetry")

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

# The _Instruments field of each metric: its name, unit, description (the convention's)
# and buckets.
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
        "Time to receive the first chunk, measured from when the client issues the generation "
        "request to when the first chunk is received in the response stream.",
        DURATION_BUCKETS,
    ),
    "time_per_output_chunk": (
        "gen_ai.client.operation.time_per_output_chunk",
        "s",
        "Time per output chunk, recorded for each chunk received after the first one, "
        "measured as the time elapsed from the end of the previous chunk to the end of the "
        "current chunk.",
        PER_CHUNK_BUCKETS,
    ),
}

# Provider names and aliases (as `fold(provider=...)` takes them, and the canonical names
# a fold detects) as `gen_ai.provider.name` names them: the convention's well-known values
# (GenAiProviderNameValues). A name without one is reported as given.
PROVIDER_NAMES = {
    "anthropic": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "openai": "openai",
    "chat": "openai",
    "responses": "openai",
    "azure-openai": "azure.ai.openai",
    "azure-openai-responses": "azure.ai.openai",
    "xai": "x_ai",
    "xai-responses": "x_ai",
    "deepseek": "deepseek",
    "deepseek-responses": "deepseek",
    "groq": "groq",
    "mistral": "mistral_ai",
    "perplexity": "perplexity",
    "gemini": "gcp.gemini",
    "google": "gcp.gen_ai",
    "vertex": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "bedrock-converse": "aws.bedrock",
    "bedrock-invoke": "aws.bedrock",
    "bedrock-invoke-model": "aws.bedrock",
}

# Server addresses (host, or the end of one) of the providers with a well-known value:
# an OpenAI-compatible stream folded without a provider name is told apart by its server.
HOST_PROVIDERS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    (".openai.azure.com", "azure.ai.openai"),
    ("api.anthropic.com", "anthropic"),
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    (".amazonaws.com", "aws.bedrock"),
)

# The longest string a stream may put in an attribute (a model name, an error type, a
# provider name): what a stream claims is bounded, as in error messages.
_MAX_TEXT = 256
# The range of an OpenTelemetry integer (signed 64-bit).
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What the stream does not say about its request: given to `fold(..., request=...)`
    (and `afold`), recorded by telemetry when it is on.

    `model`: the model asked for (`gen_ai.request.model`; the stream names the one that
    answered). `server_address`, `server_port`: where the request went (`server.address`,
    `server.port`). `input_messages`: the request's messages, recorded only with
    `instrument(capture_content=True)`. `RequestInfo.from_url(url, model=...)` reads the
    address and port from the request's URL.
    """

    model: str | None = None
    server_address: str | None = None
    server_port: int | None = None
    input_messages: Sequence[Message] | None = None

    def __post_init__(self) -> None:
        from .message import Message

        for name in ("model", "server_address"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise UsageError(f"RequestInfo: expected {name} as a str, got {describe(value)}")
        port = self.server_port
        if port is not None and (
            type(port) is not int or not 0 < port < 65536  # (bool is not a port)
        ):
            raise UsageError(
                f"RequestInfo: expected server_port as an int from 1 to 65535, got {describe(port)}"
            )
        messages = self.input_messages
        if messages is not None:
            if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
                raise UsageError(
                    "RequestInfo: expected input_messages as a list of Messages, "
                    f"got {describe(messages)}"
                )
            for n, message in enumerate(messages):
                if not isinstance(message, Message):
                    raise UsageError(
                        f"RequestInfo: expected input_messages[{n}] as a Message, "
                        f"got {describe(message)}"
                    )

    @classmethod
    def from_url(
        cls, url: str, *, model: str | None = None, input_messages: Sequence[Message] | None = None
    ) -> RequestInfo:
        """The request's address and port read from its URL (the scheme's default port)."""
        if not isinstance(url, str):
            raise UsageError(f"RequestInfo.from_url: expected a URL (str), got {describe(url)}")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise UsageError(
                f"RequestInfo.from_url: expected a URL, got {describe(url)}: {exc}"
            ) from None
        if not parts.hostname:
            raise UsageError(
                f"RequestInfo.from_url: expected a URL with a host, got {describe(url)}"
            )
        if port is None:
            port = {"https": 443, "http": 80}.get(parts.scheme)
        return cls(
            model=model,
            server_address=parts.hostname,
            server_port=port,
            input_messages=input_messages,
        )


def check_request(request: Any) -> RequestInfo:
    """`fold(..., request=...)`'s argument, refused with a UsageError unless a RequestInfo."""
    if not isinstance(request, RequestInfo):
        raise UsageError(
            f"request: expected a streamfold.telemetry.RequestInfo, got {describe(request)}"
        )
    return request


@dataclass(frozen=True, slots=True)
class _Instruments:
    tracer: Any
    token_usage: Any
    duration: Any
    time_to_first_chunk: Any
    time_per_output_chunk: Any
    capture_content: bool

    def finished(self, timing: StreamTiming, message: Message) -> None:
        """A fold that finished (whatever its status): never raises."""
        _guarded(self._record, timing, message, None)

    def failed(self, timing: StreamTiming, partial: Message, error: BaseException) -> None:
        """A fold that raised `error` (its message so far `partial`): never raises."""
        _guarded(self._record, timing, partial, error)

    def _record(self, timing: StreamTiming, message: Message, error: BaseException | None) -> None:
        request = timing._request
        metadata = message.metadata
        response_model = _text(metadata.get("model"))
        request_model = response_model
        common: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _provider_name(
                timing._named, request, metadata.get("provider")
            ),
        }
        if request is not None:
            if request.model is not None:
                request_model = request.model[:_MAX_TEXT]
            if request.server_address is not None:
                common["server.address"] = request.server_address[:_MAX_TEXT]
            if request.server_port is not None:
                common["server.port"] = request.server_port
        if request_model is not None:
            common["gen_ai.request.model"] = request_model
        if response_model is not None:
            common["gen_ai.response.model"] = response_model
        error_type = _error_type(message, error)
        attributes = dict(common)
        response_id = _text(metadata.get("id"))
        if response_id is not None:
            attributes["gen_ai.response.id"] = response_id
        reason = _text(message.raw_stop_reason or message.stop_reason)
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
        if self.capture_content:
            if request is not None and request.input_messages is not None:
                attributes["gen_ai.input.messages"] = json.dumps(
                    [_message_json(m) for m in request.input_messages], ensure_ascii=False
                )
            attributes["gen_ai.output.messages"] = json.dumps(
                [_message_json(message)], ensure_ascii=False
            )
        total = timing.total_s
        if total is None:  # raised before the end: until now
            start = timing._start
            total = 0.0 if start is None else max(0.0, timing._clock() - start)
        end = time.time_ns()
        name = f"chat {request_model}" if request_model is not None else "chat"
        from opentelemetry.trace import SpanKind, Status, StatusCode

        span = self.tracer.start_span(
            name,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=end - int(total * 1e9),
        )
        try:
            if error is not None:
                span.record_exception(error)
            if error_type is not None:
                span.set_status(Status(StatusCode.ERROR, error_type))
        finally:
            span.end(end_time=end)

        metric = dict(common)
        if error_type is not None:
            metric["error.type"] = error_type
        self.duration.record(total, metric)
        if usage is not None:
            for kind, value in (("input", usage.input_tokens), ("output", usage.output_tokens)):
                if _countable(value) and value is not None and value >= 0:
                    self.token_usage.record(value, {**common, "gen_ai.token.type": kind})
        if first_chunk is not None:
            self.time_to_first_chunk.record(first_chunk, common)
        arrivals = timing._chunks
        if arrivals:
            for before, after in itertools.pairwise(arrivals):
                self.time_per_output_chunk.record(max(0.0, after - before), common)


# Whether a failure inside telemetry was logged (once a process: a broken exporter
# must not flood the log with one line per fold).
_logged = False


def _guarded(record: Any, timing: StreamTiming, message: Message, error: Any) -> None:
    """Record, and swallow whatever recording raises: telemetry never changes what a fold
    returns or raises. The first failure is logged (with its traceback), the rest not."""
    global _logged
    try:
        record(timing, message, error)
    except Exception:
        if not _logged:
            _logged = True
            _log.warning(
                "streamfold telemetry failed to record a fold (the fold is unaffected; "
                "later failures are not logged)",
                exc_info=True,
            )


def _text(value: Any) -> str | None:
    """A string the stream gave, bounded; None for anything else."""
    return value[:_MAX_TEXT] if isinstance(value, str) and value else None


def _provider_name(named: str | None, request: RequestInfo | None, detected: Any) -> str:
    """`gen_ai.provider.name`: the well-known value of the name the caller gave, unless a
    generic one (`openai`: any compatible server speaks it) where the server's address
    says more; else of the provider in the message (detected, or what a MessageDelta
    stream claims); a name without a well-known value as given."""
    key = named.strip().lower()[:_MAX_TEXT] if isinstance(named, str) else None
    if key is not None and key not in _GENERIC:
        return PROVIDER_NAMES.get(key, key)
    if request is not None and request.server_address is not None:
        host = request.server_address.strip().lower().rstrip(".")
        for known, value in HOST_PROVIDERS:
            if host.endswith(known) if known.startswith(".") else host == known:
                return value
            if not known.startswith(".") and host.endswith("." + known):
                return value
    if key is not None:
        return PROVIDER_NAMES[key]
    provider = _text(detected)
    if provider is None:
        return "unknown"
    provider = provider.strip().lower()
    return PROVIDER_NAMES.get(provider, provider)


# The names any OpenAI-compatible server answers to: the server's address says more.
_GENERIC = frozenset({"openai-chat", "openai-responses", "openai", "chat", "responses"})


def _error_type(message: Message, error: BaseException | None) -> str | None:
    """`error.type`: the exception the fold raised (its class), the error the provider
    ended the stream with (its type, else `provider_error`), `cancelled`, `incomplete`
    (a cut stream); None for a message that ended well."""
    if error is not None:
        return type(error).__qualname__
    status = message.status
    if status == "error":
        error_info = message.metadata.get("error")
        if isinstance(error_info, dict):
            kind = _text(error_info.get("type")) or _text(error_info.get("code"))
            if kind is not None:
                return kind
        return "provider_error"
    if status == "cancelled":
        return "cancelled"
    if status == "incomplete":
        return "incomplete"
    return None


def _countable(count: Any) -> bool:
    """Whether a token count goes on the span and into the histogram: a stream can claim
    any number, and OpenTelemetry carries a signed 64-bit integer (the SDK raises
    OverflowError on an int past it)."""
    return type(count) is int and _INT64_MIN <= count <= _INT64_MAX


# streamfold's stop reasons as the convention's finish reasons.
_FINISH_REASONS = {"tool_use": "tool_call", "content_filter": "content_filter"}


def _message_json(message: Message) -> dict[str, Any]:
    """A Message as the convention's message JSON (role, parts, finish_reason)."""
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if part.type == "text":
            parts.append({"type": "text", "content": part.content or ""})
        elif part.type == "thinking":
            parts.append({"type": "reasoning", "content": part.content or ""})
        else:
            parts.append({"type": part.type, "content": part.content})
    for call in message.tool_calls:
        parts.append(
            {
                "type": "tool_call",
                "id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    for result in message.tool_results:
        content = result.content
        parts.append(
            {
                "type": "tool_call_response",
                "id": result.tool_call_id,
                "response": content
                if isinstance(content, str)
                else [p.model_dump(mode="json") for p in content],
            }
        )
    out: dict[str, Any] = {"role": message.role, "parts": parts}
    if message.role == "assistant":
        reason = message.stop_reason or "stop"
        out["finish_reason"] = _FINISH_REASONS.get(reason, reason)
    return out


def instrument(
    *, tracer_provider: Any = None, meter_provider: Any = None, capture_content: bool = False
) -> None:
    """Record a span and the GenAI metrics for every fold that ends from now on.

    Without arguments, the global tracer and meter providers (whatever the application
    set up; the API's no-op ones if none). `capture_content`: also record the messages
    (`gen_ai.output.messages`, and `gen_ai.input.messages` from the fold's RequestInfo);
    off by default, as the convention asks (they may hold personal data). Calling it
    again replaces the instruments.
    """
    if not isinstance(capture_content, bool):
        raise UsageError(
            f"instrument: expected capture_content as a bool, got {describe(capture_content)}"
        )
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        raise UsageError(
            "streamfold.telemetry needs the OpenTelemetry API: pip install 'streamfold[otel]'"
        ) from None
    tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider, schema_url=SCHEMA_URL)
    meter = metrics.get_meter(SCOPE, meter_provider=meter_provider, schema_url=SCHEMA_URL)
    histograms = {
        field: meter.create_histogram(
            name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets
        )
        for field, (name, unit, description, buckets) in HISTOGRAMS.items()
    }
    instruments = _Instruments(tracer=tracer, capture_content=capture_content, **histograms)
    _timing._on_finish = instruments.finished
    _timing._on_fail = instruments.failed


def uninstrument() -> None:
    """Stop recording: folds finish as if `instrument()` had never been called."""
    _timing._on_finish = None
    _timing._on_fail = None


def is_instrumented() -> bool:
    """True between `instrument()` and `uninstrument()`."""
    return _timing._on_finish is not None
