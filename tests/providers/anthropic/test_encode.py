"""Anthropic encoder: block order, signatures, tool results, media, cache_control, params."""

from __future__ import annotations

import warnings

import pytest
from anthropic.types import MessageParam
from encode_support import validate

from streamfold import ContentPart, Message, ToolCall, ToolResult
from streamfold.encoding import EncodeError, ReplayWarning, check_replayable, encode

SIG = "EqQBCkYIBxgCKkB"
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy"}


def redacted() -> ContentPart:
    return ContentPart(type="unsupported", options={"type": "redacted_thinking", "block": REDACTED})


def interleaved() -> Message:
    """thinking, redacted thinking, text, tool_use, thinking(after server block), text."""
    server = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}
    return Message(
        role="assistant",
        content=[
            ContentPart.thinking("plan", signature=SIG),
            redacted(),
            ContentPart.text("Looking."),
            ContentPart(type="unsupported", options={"type": "server_tool_use", "block": server}),
            ContentPart.thinking("", signature="S2"),
        ],
        tool_calls=[ToolCall(call_id="toolu_1", name="f", arguments={"q": 1}, index=5)],
        metadata={"provider": "anthropic"},
    )


def encode_anthropic(messages: object, **params: object) -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayWarning)
        return encode(messages, "anthropic", model="m", max_tokens=100, **params)


def test_blocks_go_back_in_stream_order_with_signatures() -> None:
    body = encode_anthropic(["q", interleaved()])
    blocks = body["messages"][1]["content"]  # type: ignore[index]
    assert blocks == [
        {"type": "thinking", "thinking": "plan", "signature": SIG},
        REDACTED,
        {"type": "text", "text": "Looking."},
        {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
        {"type": "thinking", "thinking": "", "signature": "S2"},  # empty text, signed: kept
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": 1}},
    ]
    validate(MessageParam, body["messages"][1])  # type: ignore[index]


def test_thinking_without_signature_is_left_out_with_a_warning() -> None:
    message = Message.assistant([ContentPart.thinking("hmm"), ContentPart.text("hi")])
    (problem,) = check_replayable(message, "anthropic")
    assert (problem.code, problem.part, problem.droppable) == ("empty_signature", 0, True)
    with pytest.warns(ReplayWarning, match="empty_signature"):
        body = encode(["q", message], "anthropic")
    assert body["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}


def test_thinking_with_empty_signature_raises_in_strict_mode() -> None:
    message = Message.assistant([ContentPart.thinking("hmm", signature=""), ContentPart.text("a")])
    with pytest.raises(EncodeError, match=r"messages\[1\]: empty_signature"):
        encode(["q", message], "anthropic", strict=True)


def test_thinking_after_a_tool_use_is_out_of_order() -> None:
    message = Message(
        role="assistant",
        content=[ContentPart.thinking("late", signature=SIG)],
        tool_calls=[ToolCall(call_id="t1", name="f", arguments={}, index=0)],
    )
    assert [p.code for p in check_replayable(message, "anthropic")] == ["thinking_out_of_order"]
    with pytest.raises(EncodeError, match="thinking_out_of_order"):
        encode(["q", message], "anthropic")


def test_two_calls_on_one_slot_are_out_of_order() -> None:
    calls = [ToolCall(call_id=f"t{i}", name="f", arguments={}, index=0) for i in (1, 2)]
    message = Message(role="assistant", content=[ContentPart.text("x")], tool_calls=calls)
    assert "thinking_out_of_order" in [p.code for p in check_replayable(message, "anthropic")]


def test_tool_call_without_id_raises_even_when_not_strict() -> None:
    message = Message.assistant("", [ToolCall(name="f", arguments={})])
    with pytest.raises(EncodeError, match=r"messages\[1\]: tool_call_without_id"):
        encode(["q", message], "anthropic")


def test_tool_results_become_one_user_turn_before_the_next_user_text() -> None:
    calls = [ToolCall(call_id="a", name="f", arguments={}), ToolCall(call_id="b", name="f")]
    body = encode_anthropic(
        [
            "q",
            Message.assistant("", calls),
            Message.tool([ToolResult(tool_call_id="a", content="1")]),
            Message.tool([ToolResult(tool_call_id="b", content="boom", is_error=True)]),
            "and then?",
        ]
    )
    turn = body["messages"][2]  # type: ignore[index]
    assert turn == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "1"},
            {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": True},
            {"type": "text", "text": "and then?"},
        ],
    }
    validate(MessageParam, turn)


def test_tool_result_with_parts_and_cache_control() -> None:
    result = ToolResult(
        tool_call_id="a",
        content=[ContentPart.text("see"), ContentPart.image("iVBOR", media="png")],
        options={"cache_control": True},
    )
    body = encode_anthropic(
        ["q", Message.assistant("", [ToolCall(call_id="a", name="f")]), Message.tool([result])]
    )
    block = body["messages"][2]["content"][0]  # type: ignore[index]
    assert block == {
        "type": "tool_result",
        "tool_use_id": "a",
        "content": [
            {"type": "text", "text": "see"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"},
            },
        ],
        "cache_control": {"type": "ephemeral"},
    }


def test_images_and_documents_as_base64_or_url_sources() -> None:
    message = Message.user(
        [
            ContentPart.text("look", cache_control={"type": "ephemeral", "ttl": "1h"}),
            ContentPart.image("R0lG", media="image/gif"),
            ContentPart.image_url("https://x/a.png"),
            ContentPart.image_url("data:image/webp;base64,UklG"),
            ContentPart.file("JVBER", filename="a.pdf"),
            ContentPart.file_url("https://x/a.pdf", cache_control=True),
        ]
    )
    body = encode_anthropic([message])
    assert body["messages"][0]["content"] == [  # type: ignore[index]
        {"type": "text", "text": "look", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/webp", "data": "UklG"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"},
            "title": "a.pdf",
        },
        {
            "type": "document",
            "source": {"type": "url", "url": "https://x/a.pdf"},
            "cache_control": {"type": "ephemeral"},
        },
    ]
    validate(MessageParam, body["messages"][0])  # type: ignore[index]


def test_base64_image_without_media_raises_with_the_index() -> None:
    with pytest.raises(EncodeError, match=r"messages\[0\]: a base64 image needs a media"):
        encode([Message.user([ContentPart.image("abc")])], "anthropic")


def test_system_from_system_messages_and_instructions() -> None:
    body = encode_anthropic([Message.system("sys"), "hi"], instructions=["a", "b"])
    assert body["system"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
        {"type": "text", "text": "sys"},
    ]
    assert encode_anthropic([Message.system("only"), "hi"])["system"] == "only"
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_tools_tool_choice_and_output_format() -> None:
    body = encode_anthropic(
        "hi",
        tools=[
            {"name": "f", "description": "d", "parameters": {"type": "object"}},
            {"type": "function", "function": {"name": "g"}},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
        tool_choice="required",
        response_format={"type": "json_schema", "name": "r", "schema": {"type": "object"}},
    )
    assert body["tools"] == [
        {"name": "f", "description": "d", "input_schema": {"type": "object"}},
        {"name": "g", "input_schema": {"type": "object", "properties": {}}},
        {"type": "web_search_20250305", "name": "web_search"},
    ]
    assert body["tool_choice"] == {"type": "any"}
    assert body["output_config"] == {
        "format": {"type": "json_schema", "schema": {"type": "object"}}
    }
    assert encode_anthropic("hi", tool_choice={"name": "f"})["tool_choice"] == {
        "type": "tool",
        "name": "f",
    }


def test_json_object_has_no_anthropic_form() -> None:
    with pytest.raises(EncodeError, match="json_schema"):
        encode("hi", "anthropic", response_format="json_object")


def test_foreign_opaque_blocks_are_left_out() -> None:
    executed = ContentPart(
        type="unsupported", options={"type": "executed_tool", "block": {"name": "search"}}
    )
    message = Message(
        role="assistant",
        content=[executed, ContentPart.text("done")],
        metadata={"provider": "openai-chat"},
    )
    with pytest.warns(ReplayWarning, match="executed_tool"):
        body = encode(["q", message], "anthropic")
    assert body["messages"][1]["content"] == [{"type": "text", "text": "done"}]
