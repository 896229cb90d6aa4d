"""The JSON form of events read back: anything else is a typed error saying what arrived."""

from __future__ import annotations

from typing import Any

import pytest

from streamfold import EventJSONError, UsageError, event_from_json, event_to_json, fold
from streamfold.parts import ContentPart

ANTHROPIC_TEXT = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","role":"assistant",'
    b'"model":"c","content":[],"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def test_every_event_comes_back_from_its_json() -> None:
    events = list(fold([ANTHROPIC_TEXT], "anthropic"))
    assert {event.type for event in events} >= {"part_started", "part_delta", "part_completed"}
    for event in events:
        assert event_from_json(event_to_json(event)) == event


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (["part_started"], "expected an event object, got list"),
        ({"type": "part_exploded"}, "expected a streamfold event type, got 'part_exploded'"),
        ({"type": "part_started", "index": 0}, "malformed part_started event (KeyError"),
        (
            {"type": "part_marked", "index": "0", "utterance": "answer", "explicit": True},
            "malformed",
        ),
        ({"type": "usage_updated", "usage": {"input_tokens": "many"}}, "malformed usage_updated"),
    ],
)
def test_what_is_not_an_event_is_refused_with_what_arrived(data: Any, said: str) -> None:
    with pytest.raises(EventJSONError) as caught:
        event_from_json(data)
    assert said in str(caught.value)
    assert isinstance(caught.value, UsageError)


def test_a_part_comes_back_as_its_own_type() -> None:
    part = ContentPart(type="text", content="x")
    data = {"type": "part_started", "index": 3, "part_type": "text", "part": part.model_dump()}
    started = event_from_json(data)
    assert started.type == "part_started" and started.index == 3 and started.part == part
