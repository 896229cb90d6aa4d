"""Narration and answer on every provider; every character of a part through a PartDelta."""

from __future__ import annotations

import json
from collections import defaultdict

import jiter
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ALL_RECORDINGS, final_message, fold_bytes, read, recordings
from test_fold import _dicts  # the JSON payloads of a recording

from streamfold import (
    ContentPart,
    Event,
    Message,
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    ToolCall,
    encode,
    event_to_json,
    extract_display_items,
    fold,
    fold_message,
    is_narration,
    to_ui_message_stream,
    utterance,
    utterance_inferred,
)
from streamfold.accumulator import Accumulator
from streamfold.deltas import ClosePart, EndMessage, GrowPart, OpenPart, UpdateMessage
from streamfold.relay import event_from_json

ALL = ALL_RECORDINGS
TEXT_FILES = [rel for rel in recordings() if rel.endswith((".sse", ".ndjson"))]


def _texts(message: Message) -> list[tuple[str | None, bool, str]]:
    """Each text part's marker, whether it was inferred, and its opening words."""
    return [
        (utterance(p), utterance_inferred(p), (p.content or "")[:30])
        for p in message.content
        if p.type == "text" and p.content
    ]


# --- 1. markers by one rule, on every provider ----------------------------------------------


def test_anthropic_text_before_a_server_tool_is_narration() -> None:
    message = fold_message(read("anthropic/code-execution-bash-thinking.sse"))
    assert _texts(message) == [
        ("narration", True, "I'll calculate that expression"),
        ("answer", True, "Following the standard **order"),
    ]
    assert not is_narration(message)


def test_a_second_search_makes_its_preamble_narration() -> None:
    message = fold_message(read("anthropic/web-search-citations.sse"))
    marked = _texts(message)
    assert marked[0] == ("narration", True, "Let me search for more specifi")
    assert {m for m, _, _ in marked[1:]} == {"answer"}


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        # A turn that ends in tool use (or a pause) is all narration, on every provider.
        ("anthropic/web-search-pause-turn.sse", {"narration"}),
        ("anthropic/text-then-tool-use-no-args.sse", {"narration"}),
        ("bedrock/text-then-tool-use-nova.ndjson", {"narration"}),
        # Text after the last tool of a finished turn is the answer.
        ("gemini/code-execution.sse", {"answer"}),
        ("gemini/text-2.0-flash.sse", {"answer"}),
        ("openai-responses/web-search-annotations.sse", {"answer"}),
        ("openai-chat/text-gpt5.sse", {"answer"}),
        ("ollama/generate-deepseek-v3.1.ndjson", {"answer"}),
        ("groq/compound-web-search-executed-tools.sse", {"answer"}),
        ("deepseek/chat-finish-length.sse", {"answer"}),
    ],
)
def test_markers_by_how_the_turn_ends(rel: str, expected: set[str]) -> None:
    message = fold_message(read(rel))
    assert {m for m, _, _ in _texts(message)} == expected
    assert all(inferred for _, inferred, _ in _texts(message))
    assert is_narration(message) == (expected == {"narration"})


@pytest.mark.parametrize("rel", ALL)
def test_every_text_of_a_finished_turn_is_marked(rel: str) -> None:
    message = final_message(fold_bytes(read(rel)))
    texts = [p for p in message.content if p.type == "text"]
    if message.status in ("complete", "length"):
        assert all(utterance(p) is not None for p in texts), rel
    # A turn that stopped for a tool is not over, with text before the tool or without.
    assert is_narration(message) == (
        message.stop_reason in ("tool_use", "pause")
        or (bool(texts) and utterance(texts[-1]) == "narration")
    )


def test_the_providers_own_marker_wins_and_is_explicit() -> None:
    events = fold_bytes(read("openai-responses/phase-reasoning-function-call.sse"))
    message = final_message(events)
    (text,) = [p for p in message.content if p.type == "text"]
    assert (utterance(text), utterance_inferred(text)) == ("narration", False)
    marks = [e for e in events if isinstance(e, PartMarked)]
    (started,) = [
        e
        for e in events
        if isinstance(e, PartStarted) and isinstance(e.part, ContentPart) and e.part.type == "text"
    ]
    assert marks == [PartMarked(index=started.index, utterance="narration", explicit=True)]
    assert events.index(marks[0]) == events.index(started) + 1  # known at the start


def test_an_explicit_answer_is_not_overwritten_by_a_later_tool() -> None:
    acc = Accumulator()
    events = acc.apply_all(
        [
            OpenPart("t", ContentPart.answer("")),
            GrowPart("t", "Here it is."),
            ClosePart("t"),
            OpenPart("c", ToolCall(call_id="c1", name="f", arguments="")),
            ClosePart("c"),
            UpdateMessage(status="complete", stop_reason="tool_use"),
            EndMessage(),
        ]
    )
    assert [e for e in events if isinstance(e, PartMarked)] == [
        PartMarked(index=0, utterance="answer", explicit=True)
    ]
    assert utterance(final_message(events).content[0]) == "answer"


def test_a_cut_turn_leaves_the_text_after_the_last_tool_unmarked() -> None:
    data = read("anthropic/code-execution-bash-thinking.sse")
    cut = data.index(b" the standard **order")
    message = final_message(fold_bytes(data[:cut]))
    assert message.status == "incomplete"
    assert _texts(message)[0][0] == "narration"
    assert [utterance(p) for p in message.content if p.type == "text"][-1] is None


def test_cancelled_turn_leaves_its_answer_unmarked() -> None:
    acc = Accumulator()
    acc.apply_all([OpenPart("t", ContentPart.text("")), GrowPart("t", "So far")])
    events = acc.cancel()
    assert not [e for e in events if isinstance(e, PartMarked)]
    assert utterance(final_message(events).content[0]) is None


def test_the_marker_is_an_event_the_moment_a_tool_starts() -> None:
    events = fold_bytes(read("anthropic/code-execution-bash-thinking.sse"))
    mark = events.index(PartMarked(index=1, utterance="narration", explicit=False))
    # Before the server tool's start (slot 2), after the text's end (slot 1).
    tool_start = next(
        i for i, e in enumerate(events) if isinstance(e, PartStarted) and e.index == 2
    )
    text_end = next(
        i for i, e in enumerate(events) if isinstance(e, PartCompleted) and e.index == 1
    )
    assert text_end < mark < tool_start
    # The answer's marker at the end, before its part completes and the message does.
    answer = events.index(PartMarked(index=4, utterance="answer", explicit=False))
    assert answer < len(events) - 1 and isinstance(events[-1], MessageCompleted)


def test_display_items_carry_the_marker() -> None:
    message = fold_message(read("anthropic/code-execution-bash-thinking.sse"))
    texts = [i.content for i in extract_display_items(message, "stream") if i.type == "text"]
    assert [t["utterance"] for t in texts] == ["narration", "answer"]


def test_only_provider_markers_go_back_unless_asked() -> None:
    inferred = fold_message(read("anthropic/code-execution-bash-thinking.sse"))
    body = encode([inferred], "openai-responses")
    assert all("phase" not in item for item in body["input"])
    asked = encode([inferred], "openai-responses", inferred_utterances=True)
    assert [i["phase"] for i in asked["input"] if "phase" in i] == ["commentary", "final_answer"]
    said = fold_message(read("openai-responses/phase-reasoning-function-call.sse"))
    body = encode([said], "openai-responses")
    assert [i["phase"] for i in body["input"] if "phase" in i] == ["commentary"]


def test_part_marked_round_trips_through_json() -> None:
    event = PartMarked(index=3, utterance="narration", explicit=False)
    data = json.loads(json.dumps(event_to_json(event)))
    assert data == {"type": "part_marked", "index": 3, "utterance": "narration", "explicit": False}
    assert event_from_json(data) == event


def test_the_ui_stream_carries_the_marker_on_the_text_part() -> None:
    events = fold_bytes(read("anthropic/code-execution-bash-thinking.sse"))
    chunks = list(to_ui_message_stream(events))
    ends = [c for c in chunks if c["type"] == "text-end"]
    meta = [c["providerMetadata"]["streamfold"] for c in ends]
    assert [(m["utterance"], m["utterance_inferred"]) for m in meta] == [
        ("narration", True),
        ("answer", True),
    ]
    # The narration's end waits for its marker, and comes before the tool the provider ran.
    at = chunks.index(ends[0])
    assert chunks[at + 1]["type"] == "tool-input-start"
    assert chunks[at + 1]["providerExecuted"] is True


# --- 2. PartStarted never carries content: every character arrives in a PartDelta ----------


def _check_contract(events: list[Event], label: str) -> None:
    texts: dict[int, list[str]] = defaultdict(list)
    for e in events:
        if isinstance(e, PartStarted):
            carried = e.part.arguments if isinstance(e.part, ToolCall) else e.part.content
            assert not carried, f"{label}: PartStarted {e.index} carries {carried!r}"
            if isinstance(e.part, ContentPart):
                assert not e.part.citations, label
        elif isinstance(e, PartDelta) and e.content:
            texts[e.index].append(e.content)
    message = final_message(events)
    for index, part in enumerate(message.stream_order()):
        streamed = "".join(texts.get(index, []))
        if isinstance(part, ToolCall):
            if part.metadata.get("type") == "custom_tool_call":  # free text, kept as input
                assert streamed == (part.arguments or {}).get("input", ""), label  # type: ignore[union-attr]
            elif isinstance(part.arguments, dict):
                assert (jiter.from_json(streamed.encode()) if streamed.strip() else {}) == (
                    part.arguments
                ), f"{label}: slot {index}"
            else:
                assert streamed == (part.arguments or ""), f"{label}: slot {index}"
        elif part.type != "unsupported":  # a provider block is whole, in its options
            assert streamed == (part.content or ""), f"{label}: slot {index}"


@pytest.mark.parametrize("rel", ALL)
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_character_arrives_in_a_part_delta_bytes(rel: str, data: st.DataObject) -> None:
    raw = read(rel)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=40))
    _check_contract(fold_bytes(raw, cuts), rel)


@pytest.mark.parametrize("rel", TEXT_FILES)
def test_every_character_arrives_in_a_part_delta_str_and_dicts(rel: str) -> None:
    _check_contract(list(fold(read(rel).decode())), rel)
    _check_contract(list(fold(_dicts(rel))), rel)


def test_every_character_arrives_in_a_part_delta_sdk_objects() -> None:
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk
    from openai.types.responses import ResponseStreamEvent
    from providers.gemini.test_decode import sdk_chunks

    kinds = {"openai-chat": ChatCompletionChunk, "openai-responses": ResponseStreamEvent}
    checked = 0
    for provider, kind in kinds.items():
        for rel in recordings(provider):
            objects = [construct_type(type_=kind, value=p) for p in _dicts(rel)]  # type: ignore[arg-type]
            _check_contract(list(fold(objects, provider)), rel)
            checked += 1
    for rel in recordings("gemini"):
        objects, _ = sdk_chunks(rel)
        _check_contract(list(fold(objects)), rel)
        checked += 1
    from anthropic._models import construct_type as anthropic_construct
    from anthropic.types.beta import BetaRawMessageStreamEvent

    for rel in recordings("anthropic"):
        events = [
            anthropic_construct(type_=BetaRawMessageStreamEvent, value=p)  # type: ignore[arg-type]
            for p in _dicts(rel)
            if p.get("type") != "ping"
        ]
        _check_contract(list(fold(events, "anthropic")), rel)
        checked += 1
    assert checked >= 40


def test_gemini_first_piece_is_a_delta() -> None:
    events = fold_bytes(read("gemini/text-2.0-flash.sse"))
    printed = "".join(e.content or "" for e in events if isinstance(e, PartDelta))
    assert printed.startswith("The capital of France is Paris")


def test_the_ui_stream_ends_a_cut_turns_text_without_a_marker() -> None:
    data = read("anthropic/code-execution-bash-thinking.sse")
    cut = data.index(b"event: message_delta")  # the answer's block ended, the turn did not
    chunks = list(to_ui_message_stream(fold_bytes(data[:cut])))
    starts = [c["id"] for c in chunks if c["type"] == "text-start"]
    ends = [c for c in chunks if c["type"] == "text-end"]
    assert [c["id"] for c in ends] == starts  # every text part ends, in order
    assert "utterance" not in ends[-1].get("providerMetadata", {}).get("streamfold", {})
    assert chunks.index(ends[-1]) < [c["type"] for c in chunks].index("finish")
