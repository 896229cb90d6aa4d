"""InvokeModel's dict lane (BedrockInvokeDecoder.object_text, which the fold takes for
eventstream messages and decoded dicts alike) against the full path: every Anthropic
recording as Bedrock streams it, generated streams, and the invoke fuzz's mutated streams
(events and bytes), folded with and without the lane, give the same events, error and
message."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invoke_support import INVOKE_SOURCES, boto3_events, chunk_frame, invoke_bytes
from reliability.test_fuzz import (
    EXAMPLES,
    HypothesisChooser,
    mutate_bytes,
    mutate_events,
    parse,
    split,
)
from support import assert_fast_same

from providers.bedrock_invoke.test_fuzz import wrap

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.generate import generate


@pytest.mark.parametrize("rel", INVOKE_SOURCES)
@pytest.mark.parametrize("strict", [False, True])
def test_recordings_lane_equals_full_path(rel: str, strict: bool) -> None:
    data = invoke_bytes(rel)
    for provider in (None, "bedrock-invoke"):
        assert_fast_same([data], provider, strict=strict)
        # One message a chunk, as a live connection delivers them, and byte by byte.
        cut = [data[i : i + 97] for i in range(0, len(data), 97)]
        assert_fast_same(cut, provider, strict=strict)
    assert_fast_same(boto3_events(rel), "bedrock-invoke", strict=strict)


@pytest.mark.parametrize("workload", ["mixed", "bigargs"])
def test_generated_lane_equals_full_path(workload: str) -> None:
    events = [e for e in generate("anthropic", workload, 300).dicts if e["type"] != "ping"]
    data = b"".join(chunk_frame(event, n) for n, event in enumerate(events))
    assert_fast_same([data], "bedrock-invoke")
    assert_fast_same([data[i : i + 4096] for i in range(0, len(data), 4096)], "bedrock-invoke")


@settings(
    max_examples=max(100, EXAMPLES // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rel=st.sampled_from(INVOKE_SOURCES), data=st.data())
def test_mutated_invoke_streams_fold_the_same_with_the_lane(rel: str, data: st.DataObject) -> None:
    c = HypothesisChooser(data)
    stream, done = mutate_events(parse(rel), c)
    raw, decoded = wrap(stream, c)
    strict = c.integer(0, 1) == 1
    assert_fast_same([raw], "bedrock-invoke", strict=strict)
    assert_fast_same(decoded, "bedrock-invoke", strict=strict)
    data.draw(st.just(done), label="mutations")


@settings(
    max_examples=max(100, EXAMPLES // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rel=st.sampled_from(INVOKE_SOURCES), data=st.data())
def test_byte_mutated_invoke_streams_fold_the_same_with_the_lane(
    rel: str, data: st.DataObject
) -> None:
    c = HypothesisChooser(data)
    raw, done = mutate_bytes(invoke_bytes(rel), c)
    assert_fast_same(split(raw, c), "bedrock-invoke")
    data.draw(st.just(done), label="mutations")


def test_a_chunk_wrapper_written_otherwise_folds_the_same_with_the_lane() -> None:
    # Escapes, other keys or whitespace in the wrapper: the same message either way.
    import base64
    import json

    from invoke_support import claude_events, eventstream_message

    headers = {":event-type": "chunk", ":content-type": "application/json"}
    headers[":message-type"] = "event"
    for form in ('{{"bytes":"{}"}}', '{{ "bytes": "{}", "p": "ab" }}', '{{"p":"x","bytes":"{}"}}'):
        frames = []
        for event in claude_events("anthropic/text-basic.sse"):
            b64 = base64.b64encode(json.dumps(event, separators=(",", ":")).encode()).decode()
            frames.append(eventstream_message(headers, form.format(b64).encode()))
        assert_fast_same([b"".join(frames)], "bedrock-invoke")
    escaped = b64.replace("/", "\\/") if "/" in b64 else b64
    assert_fast_same(
        [eventstream_message(headers, ('{"bytes":"' + escaped + '"}').encode())], "bedrock-invoke"
    )
