"""Messages, tool calls, usage, MessageDelta merging, and display items (the Sagents seed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamfold import (
    Citation,
    CitationSource,
    ContentPart,
    DisplayItem,
    IncompleteMessageError,
    InvalidModelError,
    Message,
    MessageDelta,
    ToolArgumentsError,
    ToolCall,
    ToolResult,
    Usage,
    UsageError,
    extract_display_items,
    is_narration,
    merge_delta,
    merge_deltas,
    merge_usage,
    to_message,
)

# --- Sagents DisplayHelpers examples -----------------------------------------------------


def test_display_items_assistant_text_and_tool_calls() -> None:
    message = Message.assistant(
        [ContentPart.text("Let me search...")],
        tool_calls=[
            ToolCall(call_id="1", name="search", arguments={"q": "elixir"}, status="complete"),
            ToolCall(call_id="2", name="weather", arguments={"city": "NYC"}, status="complete"),
        ],
    )
    assert extract_display_items(message) == [
        DisplayItem(type="text", message_type="assistant", content={"text": "Let me search..."}),
        DisplayItem(
            type="tool_call",
            message_type="assistant",
            content={"call_id": "1", "name": "search", "arguments": {"q": "elixir"}},
        ),
        DisplayItem(
            type="tool_call",
            message_type="assistant",
            content={"call_id": "2", "name": "weather", "arguments": {"city": "NYC"}},
        ),
    ]


def test_display_items_tool_results() -> None:
    message = Message.tool(
        [
            ToolResult(tool_call_id="1", name="search", content="Found...", is_error=False),
            ToolResult(tool_call_id="2", name="weather", content="Sunny", is_error=False),
        ]
    )
    assert [item.model_dump() for item in extract_display_items(message)] == [
        {
            "type": "tool_result",
            "message_type": "tool",
            "content": {
                "tool_call_id": "1",
                "name": "search",
                "content": "Found...",
                "is_error": False,
            },
        },
        {
            "type": "tool_result",
            "message_type": "tool",
            "content": {
                "tool_call_id": "2",
                "name": "weather",
                "content": "Sunny",
                "is_error": False,
            },
        },
    ]


def test_display_items_skip_images_files_unsupported_and_mark_utterance() -> None:
    message = Message(
        role="assistant",
        content=[
            ContentPart.thinking("hmm", signature="sig"),
            ContentPart.image("b64", media="image/png"),
            ContentPart.narration("Checking."),
            ContentPart(type="unsupported", options={"type": "redacted_thinking"}),
            ContentPart.file_url("https://x.example/a.pdf"),
            ContentPart.text("Done."),
        ],
    )
    assert [(i.type, i.content) for i in extract_display_items(message)] == [
        ("thinking", {"text": "hmm"}),
        ("text", {"text": "Checking.", "utterance": "narration"}),
        ("text", {"text": "Done."}),
    ]


@pytest.mark.parametrize("status", ["length", "cancelled", "content_filtered", "error"])
def test_only_the_last_item_of_an_abnormal_message_carries_the_stop_reason(status: str) -> None:
    message = Message(
        role="assistant",
        content=[ContentPart.text("a"), ContentPart.text("b")],
        status=status,  # type: ignore[arg-type]
        stop_reason="length" if status == "length" else None,
    )
    items = extract_display_items(message)
    assert "stop_reason" not in items[0].content
    assert items[-1].content["stop_reason"] == ("length" if status == "length" else status)


def test_display_order_stream_interleaves_tool_calls() -> None:
    message = Message(
        role="assistant",
        content=[ContentPart.thinking("t"), ContentPart.text("before"), ContentPart.text("after")],
        tool_calls=[ToolCall(call_id="c", name="f", arguments={}, status="complete", index=2)],
    )
    assert [i.type for i in extract_display_items(message)] == [
        "thinking",
        "text",
        "text",
        "tool_call",
    ]
    assert [i.type for i in extract_display_items(message, order="stream")] == [
        "thinking",
        "text",
        "tool_call",
        "text",
    ]


# --- models -------------------------------------------------------------------------------


def test_tool_call_arguments_must_be_str_or_dict() -> None:
    with pytest.raises(InvalidModelError, match=r"arguments: expected str .* or dict .*got list"):
        ToolCall(arguments=[1, 2])  # type: ignore[arg-type]


def test_complete_tool_call_parses_arguments() -> None:
    call = ToolCall(call_id="c1", name="f", arguments='{"a": [1]}', status="complete")
    assert call.arguments == {"a": [1]}
    assert ToolCall(call_id="c", name="f", arguments="", status="complete").arguments == {}


def test_bad_tool_arguments_name_the_call_and_keep_the_raw_text() -> None:
    with pytest.raises(ToolArgumentsError, match=r"'c1' \('lookup'\)") as info:
        ToolCall(call_id="c1", name="lookup", arguments='{"q": ', status="complete")
    assert info.value.raw == '{"q": '
    with pytest.raises(ToolArgumentsError, match="it is a list"):
        ToolCall(call_id="c2", name="f", arguments="[1]", status="complete")


def test_unknown_role_and_status_are_clear_errors() -> None:
    with pytest.raises(InvalidModelError, match="role"):
        Message(role="robot")  # type: ignore[arg-type]
    with pytest.raises(InvalidModelError, match="status"):
        Message(role="user", status="done")  # type: ignore[arg-type]


def test_is_narration_of_a_message_reads_its_last_text_part() -> None:
    narrating = Message.assistant([ContentPart.text("a"), ContentPart.narration("Checking.")])
    assert is_narration(narrating)
    answered = Message.assistant([ContentPart.narration("Checking."), ContentPart.text("Done.")])
    assert not is_narration(answered)
    assert not is_narration(Message.assistant([ContentPart.thinking("t")]))


def test_is_narration_of_a_tool_turn_without_text_says_the_turn_goes_on() -> None:
    call = ToolCall(call_id="c1", name="get", arguments={}, status="complete")
    calling = Message.assistant([ContentPart.thinking("t")], tool_calls=[call])
    assert not is_narration(calling)  # no stop reason: nothing says the turn goes on
    assert is_narration(calling.model_copy(update={"stop_reason": "tool_use"}))
    assert is_narration(Message(role="assistant", stop_reason="pause"))
    assert not is_narration(Message(role="assistant", stop_reason="stop"))


def test_usage_adds_unless_cumulative() -> None:
    a = Usage(input_tokens=10, output_tokens=1)
    b = Usage(output_tokens=5, reasoning_tokens=2)
    added = merge_usage(a, b)
    assert added is not None
    assert (added.input_tokens, added.output_tokens, added.reasoning_tokens) == (10, 6, 2)
    running = Usage(input_tokens=10, output_tokens=40, cumulative=True)
    assert merge_usage(added, running) == running
    assert merge_usage(None, a) == a
    assert merge_usage(a, None) == a


# --- MessageDelta ------------------------------------------------------------------------


def test_merge_delta_parts_by_slot_and_tool_calls_by_index() -> None:
    d1 = MessageDelta(content=[ContentPart.thinking("Let me "), None])
    d2 = MessageDelta(
        content=[ContentPart.thinking("think", signature="S1"), None, ContentPart.text("Hi")],
        tool_calls=[ToolCall(call_id="call_1", name="f", arguments='{"a"', index=1)],
    )
    d3 = MessageDelta(
        content=[ContentPart(type="thinking", options={"signature": "S2"})],
        tool_calls=[ToolCall(call_id="call_1", name="f", arguments=": 1}", index=1)],
        status="complete",
        usage=Usage(input_tokens=3, output_tokens=4),
    )
    merged = merge_deltas([d1, d2, d3])
    assert merged.content[0] == ContentPart.thinking("Let me think", signature="S1S2")
    assert merged.content[1] is None
    assert len(merged.tool_calls) == 1
    call = merged.tool_calls[0]
    assert (call.call_id, call.name, call.arguments) == ("call_1", "f", '{"a": 1}')
    message = to_message(merged)
    assert [p.type for p in message.content] == ["thinking", "text"]
    assert message.tool_calls[0].arguments == {"a": 1}
    assert message.tool_calls[0].status == "complete"
    assert [type(x).__name__ for x in message.stream_order()] == [
        "ContentPart",
        "ToolCall",
        "ContentPart",
    ]


def test_status_only_moves_forward() -> None:
    done = merge_deltas([MessageDelta(status="length"), MessageDelta(status="incomplete")])
    assert done.status == "length"
    assert merge_deltas(
        [MessageDelta(status="length"), MessageDelta(status="complete")]
    ).status == ("length")
    assert merge_deltas([MessageDelta(status="complete"), MessageDelta(status="error")]).status == (
        "error"
    )


def test_to_message_of_incomplete_delta_raises() -> None:
    with pytest.raises(IncompleteMessageError, match="got status 'incomplete'"):
        to_message(MessageDelta(content=[ContentPart.text("x")]))


def test_to_message_with_bad_arguments_names_the_call() -> None:
    delta = MessageDelta(
        tool_calls=[ToolCall(call_id="call_9", name="calc", arguments="{oops", index=0)],
        status="complete",
    )
    with pytest.raises(ToolArgumentsError, match="'call_9' \\('calc'\\)") as info:
        to_message(delta)
    assert info.value.raw == "{oops"


def test_merge_deltas_of_nothing_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="at least one"):
        merge_deltas([])


# --- Hypothesis ------------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
options = st.dictionaries(st.text(max_size=6), json_values, max_size=3)
citation = st.builds(
    Citation,
    cited_text=st.none() | st.text(max_size=10),
    source=st.none()
    | st.builds(
        CitationSource,
        type=st.sampled_from(["web", "document", "place"]),
        url=st.none() | st.text(max_size=10),
    ),
    start_index=st.none() | st.integers(0, 100),
    end_index=st.none() | st.integers(0, 100),
)
part_types = st.sampled_from(
    ["text", "image_url", "image", "file", "file_url", "thinking", "unsupported"]
)
parts = st.builds(
    ContentPart,
    type=part_types,
    content=st.none() | st.text(max_size=20),
    options=options,
    citations=st.lists(citation, max_size=2),
)
incomplete_calls = st.builds(
    ToolCall,
    call_id=st.none() | st.text(max_size=6),
    name=st.none() | st.text(max_size=6),
    arguments=st.none() | st.text(max_size=10),
    index=st.none() | st.integers(0, 10),
    metadata=options,
)
complete_calls = st.builds(
    ToolCall,
    call_id=st.text(max_size=6),
    name=st.text(max_size=6),
    arguments=st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    index=st.none() | st.integers(0, 10),
    status=st.just("complete"),
)
results = st.builds(
    ToolResult,
    tool_call_id=st.text(max_size=6),
    name=st.none() | st.text(max_size=6),
    content=st.text(max_size=10) | st.lists(parts, max_size=2),
    is_error=st.booleans(),
    is_interrupt=st.booleans(),
    options=options,
)
usages = st.builds(
    Usage,
    input_tokens=st.none() | st.integers(0, 10**6),
    output_tokens=st.none() | st.integers(0, 10**6),
    cache_read_tokens=st.none() | st.integers(0, 10**6),
    reasoning_tokens=st.none() | st.integers(0, 10**6),
    raw=options,
    cumulative=st.booleans(),
)
statuses = st.sampled_from(
    ["incomplete", "complete", "length", "cancelled", "content_filtered", "error"]
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(parts, max_size=4),
    tool_calls=st.lists(incomplete_calls | complete_calls, max_size=3),
    tool_results=st.lists(results, max_size=2),
    status=statuses,
    usage=st.none() | usages,
    stop_reason=st.none() | st.sampled_from(["stop", "tool_use", "length", "other"]),
    raw_stop_reason=st.none() | st.text(max_size=8),
    metadata=options,
)


@settings(max_examples=100)
@given(messages)
def test_any_message_round_trips_through_json(message: Message) -> None:
    assert Message.model_validate_json(message.model_dump_json()) == message


def _delta_for(kind: str) -> st.SearchStrategy[MessageDelta]:
    # Deltas of one stream agree on each slot's part type, as a real stream does.
    slot_types = ["thinking", "text", "text", "thinking"]

    def part_of(kind: str) -> st.SearchStrategy[ContentPart]:
        return st.builds(
            ContentPart,
            type=st.just(kind),
            content=st.none() | st.text(max_size=5),
            options=st.dictionaries(
                st.sampled_from(["signature", "id", "utterance"]), st.text(max_size=4)
            ),
            citations=st.lists(citation, max_size=1),
        )

    content = st.integers(0, 4).flatmap(
        lambda n: st.tuples(*[st.none() | part_of(slot_types[j]) for j in range(n)]).map(list)
    )
    fragment = st.builds(
        ToolCall,
        call_id=st.none() | st.sampled_from(["a", "b"]),
        name=st.none() | st.sampled_from(["f", "g"]),
        arguments=st.none() | st.text(max_size=5),
        index=st.sampled_from([4, 5, None]),
        metadata=st.dictionaries(st.sampled_from(["sig", "x"]), st.text(max_size=3), max_size=1),
    )
    return st.builds(
        MessageDelta,
        role=st.just(kind),
        content=content,
        tool_calls=st.lists(fragment, max_size=2),
        status=statuses,
        usage=st.none() | usages,
        stop_reason=st.none() | st.sampled_from(["stop", "length"]),
        raw_stop_reason=st.none() | st.text(max_size=4),
        metadata=st.dictionaries(st.sampled_from(["id", "model"]), st.text(max_size=4)),
    )


@settings(max_examples=150)
@given(st.lists(_delta_for("assistant"), min_size=2, max_size=8), st.data())
def test_merge_deltas_equals_merging_two_halves(
    deltas: list[MessageDelta], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(deltas) - 1))
    whole = merge_deltas(deltas)
    halves = merge_delta(merge_deltas(deltas[:cut]), merge_deltas(deltas[cut:]))
    assert halves == whole
