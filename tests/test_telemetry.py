"""OpenTelemetry: a GenAI span and the GenAI client metrics for every fold, through the
SDK's in-memory span exporter and metric reader, over every recording."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from support import ALL_RECORDINGS, read

from streamfold import Message, MessageCompleted, fold, fold_message, telemetry
from streamfold.record import split_frames
from streamfold.recording import detect_recording
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
