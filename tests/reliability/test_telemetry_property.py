"""Turning telemetry on never changes what a fold returns or raises.

The property, over the real recordings mutated as tests/reliability/test_fuzz.py mutates
them (events reordered, dropped, corrupted, given hostile values; bytes cut and spliced),
plus token counts no 64-bit integer or float holds and provider names no registry knows:
a fold with `telemetry.instrument()` on (the real SDK, its in-memory span exporter and
metric reader) gives the same Message JSON as the fold with it off, or raises the same
error type with the same partial Message; and some chunks folded, then cancelled, the same.
Each instrumented fold records exactly one span.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support import ALL_RECORDINGS, read

from reliability.test_fuzz import (
    Chooser,
    HypothesisChooser,
    Stream,
    _get,
    _paths,
    _touch,
    as_dicts,
    draw_mode,
    mutate_bytes,
    mutate_events,
    parse,
    render,
    split,
)
from streamfold import MessageCompleted, StreamfoldError, fold, telemetry
from streamfold.fold import StreamFolder

EXAMPLES = int(os.environ.get("STREAMFOLD_FUZZ_EXAMPLES", "300"))

# Counts a stream may claim that OpenTelemetry cannot carry (a signed 64-bit integer; the
# SDK's histogram turns them to float: OverflowError past ~1e308).
_HUGE = [-(10**400), 10**400, 2**64, -(2**63) - 1, 2**63, -1]
_NAMES = ["no-such-provider", "", "x" * 5000, "GROQ ", "azure-openai", "\u2028"]


def _claim_hostile_counts(stream: Stream, c: Chooser) -> list[str]:
    """Put a huge count (or a strange provider name) in place of some values."""
    done: list[str] = []
    for _ in range(c.integer(0, 3)):
        candidates = [
            n for n, ev in enumerate(stream.events) if isinstance(ev.payload, dict | list)
        ]
        if not candidates:
            break
        n = c.choice(candidates)
        ev = _touch(stream.events[n])  # (a copy: the parsed recording is shared)
        paths = [p for p in _paths(ev.payload) if isinstance(_get(ev.payload, p), int | str)]
        if not paths:
            continue
        path = c.choice(paths)
        value: Any = (
            c.choice(_HUGE) if isinstance(_get(ev.payload, path), int) else c.choice(_NAMES)
        )
        _get(ev.payload, path[:-1])[path[-1]] = value
        stream.events[n] = ev
        done.append(f"{n}{list(path)} = {str(value)[:20]}")
    return done


def _outcome(chunks: list[Any], mode: Any) -> tuple[str, str | None]:
    """What a fold gives: the final Message's JSON, or the error's type and partial JSON."""
    run = fold(list(chunks), mode.provider, strict=mode.strict, limits=mode.limits)
    try:
        events = list(run)
    except StreamfoldError as exc:
        partial = getattr(exc, "partial", None) or run.snapshot()
        return type(exc).__name__, partial.model_dump_json()
    end = events[-1]
    assert isinstance(end, MessageCompleted)
    return "ok", end.message.model_dump_json()


def _cancelled(chunks: list[Any], mode: Any, upto: int) -> str:
    """Some chunks folded by hand, then cancelled: the Message's JSON (or the error's)."""
    folder = StreamFolder(mode.provider, strict=mode.strict, limits=mode.limits)
    try:
        for chunk in chunks[:upto]:
            folder.feed(chunk)
        folder.cancel()
    except StreamfoldError as exc:
        return type(exc).__name__
    return folder.snapshot().model_dump_json()


def _on(spans: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.instrument(
        tracer_provider=tracer_provider,
        meter_provider=MeterProvider(metric_readers=[reader]),
        capture_content=True,  # the content's JSON is recorded too: it must not break
    )


def _compare(chunks: list[Any], mode: Any, upto: int) -> None:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    off = _outcome(chunks, mode)
    off_cancelled = _cancelled(chunks, mode, upto)
    _on(spans, reader)
    try:
        on = _outcome(chunks, mode)
        spans_after_fold = len(spans.get_finished_spans())
        on_cancelled = _cancelled(chunks, mode, upto)
        reader.get_metrics_data()  # the metrics collect (the SDK turns points to numbers)
    finally:
        telemetry.uninstrument()
    assert on == off
    assert on_cancelled == off_cancelled
    assert spans_after_fold == 1  # the fold recorded itself once, whatever its end
    for span in spans.get_finished_spans():
        json.dumps(dict(span.attributes or {}), default=list)  # (attributes stay plain)


_settings = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)


@_settings
@given(rel=st.sampled_from(ALL_RECORDINGS), data=st.data())
def test_event_mutations_fold_the_same_with_telemetry_on(rel: str, data: st.DataObject) -> None:
    c = HypothesisChooser(data)
    stream, done = mutate_events(parse(rel), c)
    done += _claim_hostile_counts(stream, c)
    data.draw(st.just(done), label="mutations")
    mode = draw_mode(rel, c)
    chunks: list[Any] = split(render(stream), c)
    if c.boolean():
        dicts = as_dicts(stream)
        if dicts:
            chunks = list(dicts)
    _compare(chunks, mode, c.integer(0, len(chunks)))


@_settings
@given(rel=st.sampled_from(ALL_RECORDINGS), data=st.data())
def test_byte_mutations_fold_the_same_with_telemetry_on(rel: str, data: st.DataObject) -> None:
    c = HypothesisChooser(data)
    raw, done = mutate_bytes(read(rel), c)
    data.draw(st.just(done), label="mutations")
    mode = draw_mode(rel, c)
    chunks = split(raw, c)
    _compare(list(chunks), mode, c.integer(0, len(chunks)))
