"""OpenTelemetry: a GenAI span and the GenAI client metrics for every fold, through the
SDK's in-memory span exporter and metric reader, over every recording."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.metrics import MeterProvider as MeterProviderAPI
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from support import ALL_RECORDINGS, read
from test_timing import _claiming_output_tokens

from streamfold import (
    ContentPart,
    Message,
    MessageCompleted,
    MessageDelta,
    StreamProtocolError,
    UsageError,
    afold,
    afold_message,
    fold,
    fold_message,
    telemetry,
)
from streamfold.record import split_frames
from streamfold.recording import detect_recording
from streamfold.telemetry import RequestInfo
from streamfold.timing import replay_clock

STEP = 0.125


def _instrument() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    """instrument() with the SDK's providers, each with its in-memory exporter / reader."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    telemetry.instrument(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    return spans, reader


@pytest.fixture
def otel() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    try:
        yield _instrument()
    finally:
        telemetry.uninstrument()


def _timed_fold(rel: str) -> tuple[Message, dict[str, Any]]:
    """The recording event by event, event n arriving n * STEP seconds in."""
    data = read(rel)
    kind, _ = detect_recording(data)
    assert kind is not None
    frames = split_frames(data, kind)
    clock, arrive = replay_clock([n * STEP for n in range(len(frames))])

    def arriving() -> Iterator[bytes]:
        for n, frame in enumerate(frames):
            arrive(n)
            yield frame

    *_, completed = fold(arriving(), clock=clock, started_at=0.0)
    assert isinstance(completed, MessageCompleted) and completed.timing is not None
    return completed.message, completed.timing


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    if data is None:
        return out
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "streamfold"
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(
                    (metric.unit, point) for point in metric.data.data_points
                )
    return out


@pytest.mark.parametrize("rel", ALL_RECORDINGS)
def test_a_span_and_metrics_per_fold(
    rel: str, otel: tuple[InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    spans, reader = otel
    message, timing = _timed_fold(rel)
    [span] = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    model = message.metadata.get("model")
    assert span.kind is SpanKind.CLIENT
    assert span.name == (f"chat {model}" if model else "chat")
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == telemetry.PROVIDER_NAMES.get(
        message.metadata["provider"], message.metadata["provider"]
    )
    assert attributes.get("gen_ai.response.model") == model
    assert attributes.get("gen_ai.request.model") == model
    assert attributes.get("gen_ai.response.id") == message.metadata.get("id")
    reason = message.raw_stop_reason or message.stop_reason
    assert attributes.get("gen_ai.response.finish_reasons") == ((reason,) if reason else None)
    usage = message.usage
    for name, value in (
        ("gen_ai.usage.input_tokens", usage and usage.input_tokens),
        ("gen_ai.usage.output_tokens", usage and usage.output_tokens),
        ("gen_ai.usage.cache_read.input_tokens", usage and usage.cache_read_tokens),
        ("gen_ai.usage.cache_creation.input_tokens", usage and usage.cache_write_tokens),
        ("gen_ai.usage.reasoning.output_tokens", usage and usage.reasoning_tokens),
    ):
        assert attributes.get(name) == value, name
    assert attributes["gen_ai.response.time_to_first_chunk"] == timing["time_to_first_byte_s"]
    assert span.end_time is not None and span.start_time is not None
    assert (span.end_time - span.start_time) / 1e9 == pytest.approx(timing["total_s"], abs=1e-6)
    if message.status in ("error", "cancelled", "incomplete"):
        assert span.status.status_code is StatusCode.ERROR
        assert attributes["error.type"]
        if message.status != "error":
            assert attributes["error.type"] == message.status
    else:
        assert span.status.status_code is StatusCode.UNSET
        assert "error.type" not in attributes

    points = _points(reader)
    [(unit, duration)] = points["gen_ai.client.operation.duration"]
    assert unit == "s"
    assert duration.sum == pytest.approx(timing["total_s"])
    assert duration.explicit_bounds == tuple(telemetry.DURATION_BUCKETS)
    assert duration.attributes["gen_ai.operation.name"] == "chat"
    tokens = {
        p.attributes["gen_ai.token.type"]: p.sum
        for unit, p in points.get("gen_ai.client.token.usage", [])
        if unit == "{token}"
    }
    expected = {"input": usage and usage.input_tokens, "output": usage and usage.output_tokens}
    assert tokens == {k: v for k, v in expected.items() if v is not None}
    [(unit, first)] = points["gen_ai.client.operation.time_to_first_chunk"]
    assert unit == "s" and first.sum == pytest.approx(timing["time_to_first_byte_s"])
    # The time per output chunk: once per chunk after the first (each STEP after the one
    # before), up to the chunk that finished the message.
    chunks = round(timing["total_s"] / STEP) + 1
    per_chunk = points.get("gen_ai.client.operation.time_per_output_chunk", [])
    if chunks > 1:
        [(unit, point)] = per_chunk
        assert unit == "s" and point.count == chunks - 1
        assert point.sum == pytest.approx(timing["total_s"])
        assert (point.min, point.max) == (STEP, STEP)
        assert point.explicit_bounds == tuple(telemetry.PER_CHUNK_BUCKETS)
    else:
        assert per_chunk == []


def test_nothing_is_recorded_when_not_instrumented() -> None:
    spans, reader = _instrument()
    assert telemetry.is_instrumented()
    telemetry.uninstrument()
    assert not telemetry.is_instrumented()
    fold_message(read("anthropic/text-basic.sse"))
    assert spans.get_finished_spans() == ()
    assert _points(reader) == {}


def test_a_cancelled_fold_is_recorded_once(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, _ = otel
    run = fold(split_frames(read("anthropic/text-basic.sse"), "sse"))
    for _ in run:
        break
    run.close()
    [span] = spans.get_finished_spans()
    assert run.snapshot().status == "cancelled"
    assert span.attributes is not None
    assert span.attributes["gen_ai.response.finish_reasons"] == ("cancelled",)
    assert span.attributes["error.type"] == "cancelled"
    assert span.status.status_code is StatusCode.ERROR


def test_the_global_providers_by_default() -> None:
    """Without arguments the API's global providers (no-op here): folds still finish."""
    telemetry.instrument()
    try:
        assert fold_message(read("anthropic/text-basic.sse")).status == "complete"
    finally:
        telemetry.uninstrument()


def test_a_token_count_no_float_holds_records_no_time_per_token(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    """A stream can claim any token count: one past what OpenTelemetry carries (a signed
    64-bit integer; the SDK's histogram raises OverflowError past ~1e308) is left off the
    span and out of the metrics, and the fold finishes; the input count still goes."""
    from test_timing import _claiming_output_tokens, _timed

    spans, reader = otel
    stream, clock = _timed(_claiming_output_tokens(10**400))
    run = fold(stream, "anthropic", clock=clock, started_at=0.0)
    message = [e for e in run if e.type == "message_completed"][-1].message
    assert message.usage is not None and message.usage.output_tokens == 10**400
    (span,) = spans.get_finished_spans()
    assert span.attributes is not None
    assert "gen_ai.usage.output_tokens" not in span.attributes
    assert span.attributes["gen_ai.usage.input_tokens"] == 1
    data = reader.get_metrics_data()
    assert data is not None
    token_kinds = [
        point.attributes["gen_ai.token.type"]
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "gen_ai.client.token.usage"
        for point in metric.data.data_points
        if point.attributes is not None
    ]
    assert token_kinds == ["input"]


# --- the conventions' names, as the installed semantic-conventions release has them ------


def test_the_names_are_the_installed_conventions() -> None:
    """Every name and well-known value used is one opentelemetry-semantic-conventions
    ships (the docs name the release followed, `telemetry.SEMCONV_VERSION`)."""
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as ga
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as gm
    from opentelemetry.semconv.attributes import error_attributes, server_attributes

    assert {name for name, *_ in telemetry.HISTOGRAMS.values()} == {
        gm.GEN_AI_CLIENT_TOKEN_USAGE,
        gm.GEN_AI_CLIENT_OPERATION_DURATION,
        gm.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
        gm.GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK,
    }
    well_known = {v.value for v in ga.GenAiProviderNameValues}
    assert set(telemetry.PROVIDER_NAMES.values()) <= well_known
    assert {value for _, value in telemetry.HOST_PROVIDERS} <= well_known
    spans, _ = _instrument()
    try:
        fold_message(
            read("groq/reasoning-tool-call.sse"),
            "groq",
            request=RequestInfo(model="m", server_address="api.groq.com", server_port=443),
        )
        run = fold(read("anthropic/text-basic.sse"))
        next(iter(run))
        run.close()
    finally:
        telemetry.uninstrument()
    known = {
        value for name, value in vars(ga).items() if name.startswith("GEN_AI_") and "." in value
    } | {
        error_attributes.ERROR_TYPE,
        server_attributes.SERVER_ADDRESS,
        server_attributes.SERVER_PORT,
    }
    for span in spans.get_finished_spans():
        assert set(span.attributes or {}) <= known


# --- the provider, the request -----------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "named", "expected"),
    [
        ("groq/reasoning-tool-call.sse", "groq", "groq"),
        ("mistral/text.sse", "mistral", "mistral_ai"),
        ("deepseek/reasoner-tool-call.sse", "deepseek", "deepseek"),
        ("xai/chat-reasoning-content-tool-call.sse", "xai", "x_ai"),
        ("xai/responses-reasoning-summary.sse", "xai-responses", "x_ai"),
        ("azure-openai/chat-model-router.sse", "azure-openai", "azure.ai.openai"),
        ("azure-openai/responses-tool-call.sse", "azure-openai-responses", "azure.ai.openai"),
        ("perplexity/sonar-citations.sse", "perplexity", "perplexity"),
        ("gemini/function-call-thought-signature.sse", "vertex", "gcp.vertex_ai"),
        ("gemini/function-call-thought-signature.sse", "google", "gcp.gen_ai"),
        ("gemini/function-call-thought-signature.sse", None, "gcp.gemini"),
        ("openrouter/reasoning-details-claude.sse", "openrouter", "openrouter"),
        ("groq/reasoning-tool-call.sse", None, "openai"),
    ],
)
def test_the_provider_is_the_well_known_value_of_the_name_given(
    rel: str,
    named: str | None,
    expected: str,
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, reader = otel
    fold_message(read(rel), named)
    [span] = spans.get_finished_spans()
    assert (span.attributes or {})["gen_ai.provider.name"] == expected
    [(_, duration)] = _points(reader)["gen_ai.client.operation.duration"]
    assert duration.attributes["gen_ai.provider.name"] == expected


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("api.groq.com", "groq"),
        ("my-deployment.openai.azure.com", "azure.ai.openai"),
        ("api.mistral.ai", "mistral_ai"),
        ("api.x.ai", "x_ai"),
        ("localhost", "openai"),
    ],
)
def test_an_openai_compatible_stream_is_told_apart_by_its_server(
    address: str, expected: str, otel: tuple[InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    spans, _ = otel
    fold_message(read("groq/reasoning-tool-call.sse"), request=RequestInfo(server_address=address))
    [span] = spans.get_finished_spans()
    assert (span.attributes or {})["gen_ai.provider.name"] == expected


def test_the_request_facts_are_recorded(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, reader = otel
    rel = "openai-chat/tool-call-single-mini.sse"
    request = RequestInfo.from_url(
        "https://api.openai.com/v1/chat/completions", model="gpt-4o-mini"
    )
    assert (request.server_address, request.server_port) == ("api.openai.com", 443)
    message = fold_message(read(rel), request=request)
    answered = message.metadata["model"]
    assert answered != "gpt-4o-mini"  # the stream names a dated snapshot
    [span] = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert span.name == "chat gpt-4o-mini"
    assert attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert attributes["gen_ai.response.model"] == answered
    assert attributes["server.address"] == "api.openai.com"
    assert attributes["server.port"] == 443
    for name, points in _points(reader).items():
        for _, point in points:
            assert point.attributes["gen_ai.request.model"] == "gpt-4o-mini", name
            assert point.attributes["server.address"] == "api.openai.com", name
            assert point.attributes["server.port"] == 443, name
    http = RequestInfo.from_url("http://localhost:8080/v1/messages")
    assert (http.server_address, http.server_port, http.model) == ("localhost", 8080, None)


async def test_afold_takes_the_request_too(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, _ = otel
    await afold_message([read("anthropic/text-basic.sse")], request=RequestInfo(model="claude"))
    [span] = spans.get_finished_spans()
    assert (span.attributes or {})["gen_ai.request.model"] == "claude"


@pytest.mark.parametrize(
    "make",
    [
        lambda: fold([b""], request={"model": "m"}),
        lambda: fold([b""], request="gpt-4o"),
        lambda: afold([b""], request=5),
        lambda: RequestInfo(model=5),  # type: ignore[arg-type]
        lambda: RequestInfo(server_address=b"host"),  # type: ignore[arg-type]
        lambda: RequestInfo(server_port="443"),  # type: ignore[arg-type]
        lambda: RequestInfo(server_port=True),
        lambda: RequestInfo(server_port=70000),
        lambda: RequestInfo(input_messages="hi"),  # type: ignore[arg-type]
        lambda: RequestInfo(input_messages=[{"role": "user"}]),  # type: ignore[list-item]
        lambda: RequestInfo.from_url("no host"),
        lambda: RequestInfo.from_url("http://h:99999/"),
        lambda: RequestInfo.from_url(5),  # type: ignore[arg-type]
        lambda: telemetry.instrument(capture_content="yes"),  # type: ignore[arg-type]
    ],
)
def test_a_wrong_request_is_a_usage_error(make: Any) -> None:
    with pytest.raises(UsageError) as caught:
        make()
    assert "expected" in str(caught.value) and "got" in str(caught.value)


# --- a fold that does not end well is marked -----------------------------------------------


def test_a_fold_that_raises_records_its_span(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, reader = otel
    data = read("anthropic/text-basic.sse")
    broken = data[: len(data) // 2] + b"data: {not json}\n\n"
    with pytest.raises(StreamProtocolError):
        list(fold([broken], request=RequestInfo(model="claude")))
    [span] = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == "StreamProtocolError"
    assert span.status.status_code is StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]
    [(_, duration)] = _points(reader)["gen_ai.client.operation.duration"]
    assert duration.attributes["error.type"] == "StreamProtocolError"


def test_a_source_that_raises_is_recorded_and_closing_after_adds_nothing(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, _ = otel
    frames = split_frames(read("anthropic/text-basic.sse"), "sse")

    def network() -> Iterator[bytes]:
        yield from frames[:3]
        raise ConnectionResetError("peer reset")

    run = fold(network())
    with pytest.raises(ConnectionResetError):
        list(run)
    run.close()  # the fold is over: no second span, as cancelled
    [span] = spans.get_finished_spans()
    assert (span.attributes or {})["error.type"] == "ConnectionResetError"


async def test_an_async_fold_that_raises_records_its_span(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, _ = otel
    frames = split_frames(read("anthropic/text-basic.sse"), "sse")

    async def network() -> AsyncIterator[bytes]:
        for frame in frames[:3]:
            yield frame
        raise ConnectionResetError("peer reset")

    with pytest.raises(ConnectionResetError):
        await afold_message(network())
    [span] = spans.get_finished_spans()
    assert (span.attributes or {})["error.type"] == "ConnectionResetError"
    assert span.status.status_code is StatusCode.ERROR


def test_a_cut_stream_is_marked_incomplete(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, _ = otel
    frames = split_frames(read("anthropic/text-basic.sse"), "sse")
    message = fold_message(frames[: len(frames) // 2])
    assert message.status == "incomplete"
    [span] = spans.get_finished_spans()
    assert (span.attributes or {})["error.type"] == "incomplete"
    assert span.status.status_code is StatusCode.ERROR


# --- content: off by default, opt-in ------------------------------------------------------


def test_content_is_not_recorded_by_default(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, _ = otel
    question = Message(role="user", content=[ContentPart.text("What is 2+2?")])
    fold_message(read("anthropic/text-basic.sse"), request=RequestInfo(input_messages=[question]))
    [span] = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert "gen_ai.input.messages" not in attributes
    assert "gen_ai.output.messages" not in attributes
    text = json.dumps({k: str(v) for k, v in attributes.items()})
    assert "2+2" not in text


def test_content_is_recorded_when_asked() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.instrument(tracer_provider=tracer_provider, capture_content=True)
    try:
        question = Message(role="user", content=[ContentPart.text("What is 2+2?")])
        message = fold_message(
            read("anthropic/thinking-then-tool-use.sse"),
            request=RequestInfo(input_messages=[question]),
        )
    finally:
        telemetry.uninstrument()
    [span] = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert json.loads(str(attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 2+2?"}]}
    ]
    [output] = json.loads(str(attributes["gen_ai.output.messages"]))
    assert output["role"] == "assistant" and output["finish_reason"] == "tool_call"
    kinds = [part["type"] for part in output["parts"]]
    assert kinds[0] == "reasoning" and kinds[-1] == "tool_call"
    [call] = message.tool_calls
    assert output["parts"][-1] == {
        "type": "tool_call",
        "id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
    }


# --- telemetry never changes what a fold returns or raises ------------------------------


def _deltas_claiming(provider: Any) -> list[MessageDelta]:
    return [
        MessageDelta(
            role="assistant", content=[ContentPart.text("hi")], metadata={"provider": provider}
        ),
        MessageDelta(status="complete", stop_reason="stop"),
    ]


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param(lambda: _claiming_output_tokens(-(10**400)), id="usage -10**400"),
        pytest.param(lambda: _claiming_output_tokens(2**64), id="usage 2**64"),
        pytest.param(lambda: _deltas_claiming("no-such-provider"), id="unknown provider"),
        pytest.param(lambda: _deltas_claiming("x" * 100_000), id="huge provider name"),
        pytest.param(lambda: _deltas_claiming(["not", "a", "name"]), id="provider not a str"),
    ],
)
def test_what_a_stream_claims_never_breaks_an_instrumented_fold(
    chunks: Any, otel: tuple[InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    spans, _ = otel
    on = fold_message(chunks())
    telemetry.uninstrument()
    off = fold_message(chunks())
    assert on == off
    [span] = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert len(str(attributes["gen_ai.provider.name"])) <= 256


class _Raising(SpanProcessor):
    """A span processor whose end hook fails, as a broken exporter chain does."""

    def on_end(self, span: Any) -> None:
        raise RuntimeError("exporter down")


class _RaisingHistogram(Histogram):
    def __init__(self, name: str, unit: str = "", description: str = "") -> None:
        super().__init__(name, unit, description)

    def record(self, amount: Any, attributes: Any = None, context: Any = None) -> None:
        raise RuntimeError("metric reader down")


class _RaisingMeter(Meter):
    """A meter whose histograms fail on record (an SDK plug-in gone wrong)."""

    def create_histogram(self, name: str, *args: Any, **kwargs: Any) -> Histogram:
        return _RaisingHistogram(name)

    def create_counter(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def create_up_down_counter(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def create_observable_counter(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def create_observable_gauge(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def create_observable_up_down_counter(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class _RaisingMeterProvider(MeterProviderAPI):
    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> Meter:
        return _RaisingMeter(name)


@pytest.mark.parametrize("broken", ["span processor", "metrics"])
def test_a_failing_exporter_or_reader_never_breaks_a_fold(
    broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    tracer_provider = TracerProvider()
    if broken == "span processor":
        tracer_provider.add_span_processor(_Raising())
        meter_provider: Any = MeterProvider(metric_readers=[InMemoryMetricReader()])
    else:
        meter_provider = _RaisingMeterProvider()
    data = read("anthropic/thinking-then-tool-use.sse")
    frames = split_frames(data, "sse")
    expected = fold_message(data)
    monkey = pytest.MonkeyPatch()
    monkey.setattr(telemetry, "_logged", False)
    telemetry.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        with caplog.at_level(logging.WARNING, logger="streamfold.telemetry"):
            assert fold_message(data) == expected
            assert fold_message(data) == expected
            run = fold(frames)
            next(iter(run))
            run.close()  # cancelled: recorded, and the failure swallowed
            with pytest.raises(StreamProtocolError):  # the fold's own error, unchanged
                fold_message([data[:200] + b"data: {not json}\n\n"])
    finally:
        telemetry.uninstrument()
        monkey.undo()
    logged = [r for r in caplog.records if r.name == "streamfold.telemetry"]
    assert len(logged) == 1  # once, not per fold
    assert logged[0].exc_info is not None and "down" in str(logged[0].exc_info[1])
