"""Gemini encoder: roles, thought signatures on their parts, function calls and responses."""

from __future__ import annotations

import warnings

import pytest
from encode_support import validate_json
from google.genai import types as genai

from streamfold import ContentPart, Message, ToolCall, ToolResult
from streamfold.encoding import EncodeError, ReplayWarning, check_replayable, encode


def gemini(messages: object, **params: object) -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayWarning)
        return encode(messages, "gemini", **params)


def test_signatures_stay_on_the_parts_that_carried_them() -> None:
    message = Message(
        role="assistant",
        content=[
            ContentPart.thinking("why", signature="QUJD"),
            ContentPart.text("so", signature="REVG"),
            ContentPart.text("", signature="R0hJ"),
        ],
        tool_calls=[
            ToolCall(
                call_id="get_0",
                name="get",
                arguments={"a": 1},
                index=1,
                metadata={"thought_signature": "SktM", "generated_id": True},
            )
        ],
        metadata={"provider": "gemini"},
    )
    body = gemini(
        [
            "q",
            message,
            Message.tool([ToolResult(tool_call_id="get_0", content="42")]),
        ]
    )
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "q"}]},
        {
            "role": "model",
            "parts": [
                {"text": "why", "thought": True, "thoughtSignature": "QUJD"},
                {"functionCall": {"name": "get", "args": {"a": 1}}, "thoughtSignature": "SktM"},
                {"text": "so", "thoughtSignature": "REVG"},
                {"text": "", "thoughtSignature": "R0hJ"},
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "get", "response": {"output": "42"}}}],
        },
    ]
    for content in body["contents"]:  # type: ignore[attr-defined]
        validate_json(genai.Content, content)


def test_parallel_results_join_one_turn_and_keep_real_ids() -> None:
    calls = [ToolCall(call_id="id_a", name="a", arguments={}), ToolCall(call_id="id_b", name="b")]
    body = gemini(
        [
            Message.assistant("", calls),
            Message.tool([ToolResult(tool_call_id="id_a", content="1")]),
            Message.tool([ToolResult(tool_call_id="id_b", content="no", is_error=True)]),
        ]
    )
    assert body["contents"][1] == {  # type: ignore[index]
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "a", "response": {"output": "1"}, "id": "id_a"}},
            {"functionResponse": {"name": "b", "response": {"error": "no"}, "id": "id_b"}},
        ],
    }


def test_result_without_name_or_call_raises() -> None:
    history = [Message.user("q"), Message.tool([ToolResult(tool_call_id="x", content="1")])]
    assert [p.code for p in check_replayable(history, "gemini")] == ["tool_result_without_call"]
    with pytest.raises(EncodeError, match=r"messages\[1\]: tool_result_without_call"):
        encode(history, "gemini")


def test_foreign_thinking_and_signatures_are_left_out() -> None:
    message = Message(
        role="assistant",
        content=[ContentPart.thinking("t", signature="anthropic-sig"), ContentPart.text("a")],
        metadata={"provider": "anthropic"},
    )
    with pytest.warns(ReplayWarning, match="foreign_signature"):
        body = encode([message], "gemini")
    assert body["contents"] == [{"role": "model", "parts": [{"text": "a"}]}]


def test_media_system_and_params() -> None:
    message = Message.user(
        [
            ContentPart.image("iVBOR", media="png"),
            ContentPart.image_url("https://x/a.png", media="image/png"),
            ContentPart.file_url("gs://b/a.pdf"),
        ]
    )
    body = gemini(
        [Message.system("sys"), message],
        instructions="first",
        tools=[{"name": "f", "parameters": {"type": "object"}}, {"googleSearch": {}}],
        tool_choice={"name": "f"},
        response_format={"type": "json_schema", "schema": {"type": "object"}},
        generationConfig={"temperature": 0.1},
    )
    assert body["systemInstruction"] == {"parts": [{"text": "first"}, {"text": "sys"}]}
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"inlineData": {"mimeType": "image/png", "data": "iVBOR"}},
                {"fileData": {"fileUri": "https://x/a.png", "mimeType": "image/png"}},
                {"fileData": {"fileUri": "gs://b/a.pdf"}},
            ],
        }
    ]
    assert body["tools"] == [
        {"functionDeclarations": [{"name": "f", "parametersJsonSchema": {"type": "object"}}]},
        {"googleSearch": {}},
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}
    }
    assert body["generationConfig"] == {
        "temperature": 0.1,
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object"},
    }
    validate_json(genai.Content, body["systemInstruction"])
    validate_json(list[genai.Tool], body["tools"])
    validate_json(genai.ToolConfig, body["toolConfig"])
    validate_json(genai.GenerationConfig, body["generationConfig"])
