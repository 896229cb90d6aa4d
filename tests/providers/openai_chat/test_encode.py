"""OpenAI Chat encoder: assistant turns, refusals, media parts, what Chat cannot carry."""

from __future__ import annotations

import pytest
from encode_support import validate
from openai.types.chat import ChatCompletionMessageParam

from streamfold import ContentPart, Message, ToolCall, ToolResult
from streamfold.encoding import EncodeError, ReplayWarning, check_replayable, encode


def test_assistant_turn_with_refusal_text_and_calls() -> None:
    message = Message(
        role="assistant",
        content=[ContentPart.text("Sure."), ContentPart.text("No.", refusal=True)],
        tool_calls=[ToolCall(call_id="c1", name="f", arguments={"x": "é"})],
    )
    (turn,) = encode([message])["messages"]
    assert turn == {
        "role": "assistant",
        "content": "Sure.",
        "refusal": "No.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": "é"}'}}
        ],
    }
    validate(ChatCompletionMessageParam, turn)


def test_unparsed_arguments_go_back_as_their_raw_text() -> None:
    call = ToolCall(call_id="c1", name="f", arguments='{"a": 1', metadata={"arguments_error": "x"})
    (turn,) = encode([Message.assistant("", [call])])["messages"]
    assert turn["tool_calls"][0]["function"]["arguments"] == '{"a": 1'


def test_custom_tool_call_keeps_its_free_text_input() -> None:
    call = ToolCall(
        call_id="c1",
        name="grammar",
        arguments={"input": "SELECT 1"},
        status="complete",
        metadata={"type": "custom_tool_call"},
    )
    (turn,) = encode([Message.assistant("", [call])])["messages"]
    assert turn["tool_calls"] == [
        {"id": "c1", "type": "custom", "custom": {"name": "grammar", "input": "SELECT 1"}}
    ]
    validate(ChatCompletionMessageParam, turn)


def test_user_media_parts() -> None:
    message = Message.user(
        [
            ContentPart.text("see"),
            ContentPart.image("iVBOR", media="png", detail="high"),
            ContentPart.image_url("https://x/a.png", detail="low"),
            ContentPart.file("JVBER", filename="a.pdf"),
        ]
    )
    (turn,) = encode([message])["messages"]
    assert turn["content"] == [
        {"type": "text", "text": "see"},
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64,iVBOR", "detail": "high"},
        },
        {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}},
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,JVBER", "filename": "a.pdf"},
        },
    ]
    validate(ChatCompletionMessageParam, turn)


def test_base64_image_without_media_raises_with_the_index() -> None:
    with pytest.raises(EncodeError, match=r"messages\[1\]: a base64 image part needs a media"):
        encode(["hi", Message.user([ContentPart.image("abc")])])


def test_thinking_is_left_out_with_a_warning_and_raises_in_strict_mode() -> None:
    message = Message.assistant([ContentPart.thinking("t", signature="s"), ContentPart.text("a")])
    assert [p.code for p in check_replayable(message, "openai-chat")] == ["not_replayable"]
    with pytest.warns(ReplayWarning, match="thinking"):
        assert encode([message])["messages"] == [{"role": "assistant", "content": "a"}]
    with pytest.raises(EncodeError, match=r"messages\[0\]: not_replayable"):
        encode([message], strict=True)


def test_tool_call_without_id_raises() -> None:
    with pytest.raises(EncodeError, match=r"messages\[0\]: tool_call_without_id"):
        encode([Message.assistant("", [ToolCall(name="f", arguments={})])])


def test_tool_result_without_its_call_raises() -> None:
    history = [
        Message.assistant("", [ToolCall(call_id="c1", name="f", arguments={})]),
        Message.tool([ToolResult(tool_call_id="c9", content="x")]),
    ]
    problems = check_replayable(history, "openai-chat")
    assert [(p.code, p.message_index) for p in problems] == [("tool_result_without_call", 1)]
    with pytest.raises(EncodeError, match=r"messages\[1\]: tool_result_without_call"):
        encode(history)


def test_tool_result_parts_become_text_parts() -> None:
    history = [
        Message.assistant("", [ToolCall(call_id="c1", name="f", arguments={})]),
        Message.tool([ToolResult(tool_call_id="c1", content=[ContentPart.text("a")])]),
    ]
    assert encode(history)["messages"][1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "a",
    }


def test_encoded_body_is_plain_json_and_provider_aliases_work() -> None:
    assert encode("hi", "openai") == encode("hi", "azure-openai") == encode("hi")
    with pytest.raises(EncodeError, match="to encode for"):
        encode("hi", "bedrock")
