"""The hostile-input property of tests/reliability/test_fuzz.py on Bedrock InvokeModel streams.

The invoke wire adds two layers to the Anthropic events it carries (base64 chunks in
eventstream messages, and Bedrock's metrics trailer), so each is mutated: the Anthropic
events before they are wrapped, the chunk wrappers and the trailer, and the bytes. Folded
as bytes (in pieces) and as boto3's decoded events, only StreamfoldErrors may escape,
and nothing completed before a fault may be lost.
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invoke_support import INVOKE_SOURCES, METRICS, eventstream_message, invoke_bytes
from reliability.test_fuzz import (
    EXAMPLES,
    Chooser,
    Corrupt,
    HypothesisChooser,
    Mode,
    Stream,
    check_bounded,
    draw_mode,
    hostile_value,
    mutate_bytes,
    mutate_events,
    parse,
    run_fold,
    split,
)

_HEADERS = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}

_settings = settings(
    max_examples=max(100, EXAMPLES // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _mode(rel: str, c: Chooser) -> Mode:
    return replace(draw_mode(rel, c), provider=c.choice([None, "bedrock-invoke"]))


def _inner(payload: Any, c: Chooser, stream: Stream) -> bytes:
    """One Anthropic event's bytes, its message_stop given the (maybe hostile) trailer."""
    if isinstance(payload, Corrupt):
        return bytes(payload)
    if isinstance(payload, dict) and payload.get("type") == "message_stop":
        metrics: Any = {"inputTokenCount": 12, "outputTokenCount": 34, "invocationLatency": 5}
        if c.integer(0, 3) == 0:
            metrics = hostile_value(c, stream)
        payload = {**payload, METRICS: metrics}
    return json.dumps(payload).encode() if not isinstance(payload, str) else payload.encode()


def _wrapper(inner: bytes, c: Chooser, stream: Stream) -> tuple[Any, Any]:
    """The chunk event on the wire (base64) and from boto3 (bytes); now and then hostile."""
    wire: Any = {"chunk": {"bytes": base64.b64encode(inner).decode()}}
    boto: Any = {"chunk": {"bytes": inner}}
    if c.integer(0, 11) == 0:
        spot = c.integer(0, 2)
        value = hostile_value(c, stream)
        if spot == 0:
            wire = boto = {"chunk": {"bytes": value}}
        elif spot == 1:
            wire = boto = {"chunk": value}
        else:
            wire = boto = {c.choice(["chunk", "throttlingException", "x"]): value}
    return wire, boto


def wrap(stream: Stream, c: Chooser) -> tuple[bytes, list[Any]]:
    """The (mutated) Anthropic events as invoke bytes and as boto3's decoded events."""
    frames: list[bytes] = []
    decoded: list[Any] = []
    for ev in stream.events:
        wire, boto = _wrapper(_inner(ev.payload, c, stream), c, stream)
        (name, body), *_ = wire.items()
        headers = dict(_HEADERS)
        if name != "chunk":
            headers = {":exception-type": name, ":message-type": "exception"}
        frames.append(eventstream_message(headers, json.dumps(body).encode()))
        decoded.append(boto)
    return b"".join(frames), decoded


@_settings
@given(rel=st.sampled_from(INVOKE_SOURCES), data=st.data())
def test_invoke_event_mutations_only_raise_streamfold_errors(rel: str, data: st.DataObject) -> None:
    c = HypothesisChooser(data)
    stream, done = mutate_events(parse(rel), c)
    raw, decoded = wrap(stream, c)
    mode = _mode(rel, c)
    check_bounded(run_fold(split(raw, c), mode), len(raw))
    check_bounded(run_fold(decoded, mode), len(raw))
    data.draw(st.just([*done, repr(mode)]), label="mutations")


@_settings
@given(rel=st.sampled_from(INVOKE_SOURCES), data=st.data())
def test_invoke_byte_mutations_only_raise_streamfold_errors(rel: str, data: st.DataObject) -> None:
    c = HypothesisChooser(data)
    raw, done = mutate_bytes(invoke_bytes(rel), c)
    mode = _mode(rel, c)
    check_bounded(run_fold(split(raw, c), mode), len(raw))
    data.draw(st.just([*done, repr(mode)]), label="mutations")


def test_the_unmutated_wrap_folds_as_the_recording() -> None:
    # The harness itself: with no mutation, the wrapped stream is a whole message.
    class Never(Chooser):
        def integer(self, lo: int, hi: int) -> int:
            return hi  # never 0: no hostile trailer or wrapper

    for rel in INVOKE_SOURCES:
        raw, decoded = wrap(parse(rel), Never())
        outcome = run_fold([raw])
        assert outcome.error is None, rel
        assert outcome.message.metadata["end_marker"] is True
        assert run_fold(decoded).message == outcome.message
