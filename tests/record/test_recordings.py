"""Every recorded stream: its golden Message, and the same result however the bytes are split."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import (
    ALL_RECORDINGS,
    EVENTSTREAMS,
    GOLDEN,
    REAL,
    assert_golden,
    coalesce,
    entry,
    final_message,
    fold_bytes,
    read,
    recordings,
)

from streamfold import NoEventsError, load_recording
from streamfold.providers import decoder_class


def _provider_of(rel: str) -> str:
    if rel.endswith(".eventstream"):
        return "bedrock"
    e = entry(rel)
    if e["api"] == "responses":
        return "openai-responses"
    if e["provider"] in ("google", "google-vertex"):
        return "gemini"
    if e["provider"] in ("anthropic", "bedrock", "ollama"):
        return str(e["provider"])
    return "openai-chat"


def _implemented(rel: str) -> bool:
    try:
        decoder_class(_provider_of(rel))
    except ImportError:
        return False
    return True


# The binary Bedrock recordings are not in INDEX.json: each is the same stream as its
# .ndjson twin, so it must fold to the twin's golden.
ALL = ALL_RECORDINGS
READY = ALL


def test_every_recording_has_a_decoder_and_a_golden() -> None:
    assert len(recordings()) == 89
    assert len(EVENTSTREAMS) == 7
    assert all(_implemented(rel) for rel in ALL)
    assert all((GOLDEN / (_golden_name(rel) + ".json")).exists() for rel in ALL)


def _golden_name(rel: str) -> str:
    return rel.removesuffix(".eventstream") + ".ndjson" if rel.endswith(".eventstream") else rel


@pytest.mark.parametrize("rel", READY)
def test_recording_matches_golden(rel: str) -> None:
    message = final_message(fold_bytes(read(rel)))
    assert message.metadata.get("provider") == _provider_of(rel)
    assert_golden(_golden_name(rel), message)


@pytest.mark.parametrize("rel", READY)
def test_load_recording_detects_provider(rel: str) -> None:
    recording = load_recording(REAL / rel)
    assert recording.provider == _provider_of(rel)


@pytest.mark.parametrize("rel", READY)
def test_byte_by_byte_equals_whole(rel: str) -> None:
    data = read(rel)
    whole = fold_bytes(data)
    one_by_one = fold_bytes(data, list(range(len(data))))
    assert final_message(one_by_one) == final_message(whole)
    assert coalesce(one_by_one) == coalesce(whole)


@pytest.mark.parametrize("rel", READY)
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_split_equals_whole(rel: str, data: st.DataObject) -> None:
    raw = read(rel)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=40))
    whole = fold_bytes(raw)
    split = fold_bytes(raw, cuts)
    assert final_message(split) == final_message(whole)
    assert coalesce(split) == coalesce(whole)


# --- the end marker: a finished stream told from a cut one ------------------------------

# What each provider's stream ends with, as it shows in the bytes of its last event.
END_MARKERS = {
    "anthropic": (b"message_stop",),
    "openai-chat": (b"[DONE]",),
    "openai-responses": (b"response.completed", b"response.incomplete", b"response.failed"),
    "gemini": (b"finishReason",),
    "bedrock": (b"messageStop", b'"metadata"'),
    "ollama": (b'"done": true', b'"done":true'),
}


def _event_ends(data: bytes, ndjson: bool) -> list[int]:
    ends: list[int] = []
    end = 0
    sep = b"\n" if ndjson else (b"\r\n\r\n" if b"\r\n" in data else b"\n\n")
    while (found := data.find(sep, end)) >= 0:
        end = found + len(sep)
        if data[:found].strip():
            ends.append(end)
    return ends


@pytest.mark.parametrize("rel", recordings())
def test_the_end_marker_is_recorded_and_a_cut_before_it_is_not(rel: str) -> None:
    # Folded a whole event at a time: every prefix that stops before the provider's end
    # marker says end_marker False (whatever its status), every prefix with it says True.
    data = read(rel)
    whole = final_message(fold_bytes(data))
    if whole.status == "error":
        assert whole.metadata["end_marker"] is False  # the stream ended on an error
        return
    assert whole.metadata["end_marker"] is True
    provider = _provider_of(rel)
    ends = _event_ends(data, rel.endswith(".ndjson"))
    start = 0
    marked = []
    for end in ends:
        try:
            message = final_message(fold_bytes(data[:end]))
        except NoEventsError:
            marked.append(False)  # cut before its first event (a keep-alive comment only)
            start = end
            continue
        marked.append(message.metadata["end_marker"])
        if message.metadata["end_marker"] and marked.count(True) == 1:
            # The event that ended the stream is the provider's marker.
            last_event = data[start:end]
            assert any(m in last_event for m in END_MARKERS[provider]), last_event[:200]
        start = end
    assert True in marked
    first = marked.index(True)
    assert marked == [False] * first + [True] * (len(marked) - first)
