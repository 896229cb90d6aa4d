"""Round trip on every recording: decode -> Message -> JSON -> Message -> encode -> SDK types.

Each recording's Message is replayed to the provider it came from, as the assistant turn of
a history (user prompt, the turn, the results of its tool calls). The request must validate
against the official SDK request types (unknown keys rejected) and keep every signature,
item id and utterance marker. Then across providers: what cannot carry over is dropped with
a ReplayWarning, never sent malformed.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from anthropic.types import MessageParam, TextBlockParam, ToolParam
from anthropic.types.beta import BetaMessageParam
from encode_support import roundtrip_message, target_recordings, validate, validate_json
from google.genai import types as genai
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from openai.types.responses import ResponseInputItemParam

from streamfold import ContentPart, Message, ToolCall, ToolResult, utterance_inferred
from streamfold.encoding import EncodeError, ReplayWarning, check_replayable, encode

TOOLS = [{"name": "lookup", "description": "Look it up", "parameters": {"type": "object"}}]

# Built-in items the API emits with fields its own SDK request types do not define: they
# go back whole (as the API wants them), so they are checked for shape by hand instead.
# web_search_call action.sources[] of type "api" ({"type": "api", "name": ...}): the SDK's
# ActionSearchSource only knows {"type": "url", "url"}.
SDK_GAPS = {("openai-responses/web-search-reasoning.sse", "web_search_call")}

# Blocks of beta features (MCP connector, compaction) exist only in the SDK's beta types.
ANTHROPIC_BETA = {"anthropic/compaction.sse", "anthropic/mcp-tool-use-thinking.sse"}


def history(message: Message) -> list[Message]:
    """A user prompt, the recorded turn, and a result for each of its tool calls."""
    out = [Message.user("hi"), message]
    results = [
        ToolResult(tool_call_id=c.call_id, name=c.name, content="42")
        for c in message.tool_calls
        if c.call_id
    ]
    if results:
        out.append(Message.tool(results))
    return out


def encode_quiet(messages: Any, provider: str, **params: Any) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayWarning)  # nothing of its own is dropped
        return encode(messages, provider, **params)


# --- Anthropic ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rel", target_recordings("anthropic"))
def test_anthropic_roundtrip(rel: str) -> None:
    message = roundtrip_message(rel)
    assert check_replayable(message, "anthropic") == []
    body = encode_quiet(history(message), "anthropic", model="m", max_tokens=1024, tools=TOOLS)
    json.dumps(body)
    for entry in body["messages"]:
        validate(BetaMessageParam if rel in ANTHROPIC_BETA else MessageParam, entry)
    for tool in body["tools"]:
        validate(ToolParam, tool)
    turn = body["messages"][1]
    assert turn["role"] == "assistant"
    blocks = turn["content"]
    expected = [
        item
        for item in message.stream_order()
        if not (isinstance(item, ContentPart) and item.type == "text" and not item.content)
    ]
    assert len(blocks) == len(expected)
    for block, item in zip(blocks, expected, strict=True):
        if isinstance(item, ToolCall):
            assert block == {
                "type": "tool_use",
                "id": item.call_id,
                "name": item.name,
                "input": item.arguments,
                **({"caller": item.metadata["caller"]} if "caller" in item.metadata else {}),
            }
        elif item.type == "thinking":
            assert block == {
                "type": "thinking",
                "thinking": item.content,
                "signature": item.options["signature"],
            }
        elif item.type == "unsupported":
            assert block == item.options["block"]  # redacted thinking, server blocks: whole
        else:
            assert block["type"] == "text" and block["text"] == item.content
    if message.tool_calls:
        answer = body["messages"][2]
        assert answer["role"] == "user"
        assert [b["tool_use_id"] for b in answer["content"]] == [
            c.call_id for c in message.tool_calls
        ]


def test_anthropic_recordings_exist() -> None:
    assert len(target_recordings("anthropic")) == 18


# --- OpenAI Chat -------------------------------------------------------------------------------


@pytest.mark.parametrize("rel", target_recordings("openai-chat"))
def test_chat_roundtrip(rel: str) -> None:
    message = roundtrip_message(rel)
    droppable = [p for p in check_replayable(message, "openai-chat") if p.droppable]
    assert all(p.code == "not_replayable" for p in droppable)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        body = encode(history(message), "openai-chat", model="m", tools=TOOLS)
    # Thinking and executed-tool blocks have no Chat field: each is named in a warning.
    assert len([w for w in caught if w.category is ReplayWarning]) == len(droppable)
    for entry in body["messages"]:
        validate(ChatCompletionMessageParam, entry)
    for tool in body["tools"]:
        validate(ChatCompletionToolParam, tool)
    turn = body["messages"][1]
    assert turn["role"] == "assistant"
    calls = turn.get("tool_calls", [])
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        (c.call_id, c.name) for c in message.tool_calls
    ]
    for sent, call in zip(calls, message.tool_calls, strict=True):
        assert json.loads(sent["function"]["arguments"]) == call.arguments
    answer = "".join(
        p.content or "" for p in message.content if p.type == "text" and "refusal" not in p.options
    )
    content = turn.get("content", "")
    sent_text = content if isinstance(content, str) else "".join(p["text"] for p in content)
    assert sent_text == answer
    sent_ids = [m["tool_call_id"] for m in body["messages"][2:]]
    assert sent_ids == [c.call_id for c in message.tool_calls]


# --- OpenAI Responses ------------------------------------------------------------------------


@pytest.mark.parametrize("rel", target_recordings("openai-responses"))
def test_responses_roundtrip(rel: str) -> None:
    message = roundtrip_message(rel)
    assert check_replayable(message, "openai-responses") == []
    body = encode_quiet(history(message), "openai-responses", model="m", tools=TOOLS)
    for item in body["input"]:
        if (rel, item.get("type")) in SDK_GAPS:
            assert item in [p.options.get("block") for p in message.content]
            continue
        validate(ResponseInputItemParam, item)
    ids = {item.get("id") for item in body["input"]}
    for part in message.content:
        if "id" in part.options:
            assert part.options["id"] in ids  # reasoning, message and built-in item ids
        if part.type == "thinking" and "encrypted_content" in part.options:
            item = next(i for i in body["input"] if i.get("id") == part.options["id"])
            assert item["encrypted_content"] == part.options["encrypted_content"]
        if part.type == "text" and "utterance" in part.options and not utterance_inferred(part):
            item = next(i for i in body["input"] if i.get("id") == part.options["id"])
            assert (
                item["phase"]
                == {"narration": "commentary", "answer": "final_answer"}[part.options["utterance"]]
            )
    for call in message.tool_calls:
        item = next(i for i in body["input"] if i.get("call_id") == call.call_id)
        assert item["id"] == call.metadata["item_id"]


def test_responses_phase_recording_keeps_narration() -> None:
    message = roundtrip_message("openai-responses/phase-reasoning-function-call.sse")
    body = encode_quiet([message], "openai-responses")
    kinds = [(i["type"], i.get("phase")) for i in body["input"]]
    assert kinds == [("reasoning", None), ("message", "commentary"), ("function_call", None)]


# --- Gemini --------------------------------------------------------------------------------------


def _signatures(message: Message) -> list[str]:
    out: list[str] = []
    for item in message.stream_order():
        if isinstance(item, ToolCall):
            sig = item.metadata.get("thought_signature")
        elif item.type == "unsupported":
            sig = item.options["block"].get("thoughtSignature")
        else:
            sig = item.options.get("signature")
        if sig:
            out.append(sig)
    return out


@pytest.mark.parametrize("rel", target_recordings("gemini"))
def test_gemini_roundtrip(rel: str) -> None:
    message = roundtrip_message(rel)
    assert check_replayable(message, "gemini") == []
    body = encode_quiet(history(message), "gemini", tools=TOOLS)
    for content in body["contents"]:
        validate_json(genai.Content, content)
    validate_json(list[genai.Tool], body["tools"])
    turn = body["contents"][1]
    assert turn["role"] == "model"
    sent = [p["thoughtSignature"] for p in turn["parts"] if "thoughtSignature" in p]
    assert sent == _signatures(message)
    assert [p["functionCall"]["name"] for p in turn["parts"] if "functionCall" in p] == [
        c.name for c in message.tool_calls
    ]
    if message.tool_calls:
        responses = body["contents"][2]["parts"]
        assert [r["functionResponse"]["name"] for r in responses] == [
            c.name for c in message.tool_calls
        ]


# --- across providers -------------------------------------------------------------------------


def _anthropic_thinking_tool_use() -> Message:
    message = roundtrip_message("anthropic/thinking-then-tool-use.sse")
    assert [type(i).__name__ for i in message.stream_order()] == ["ContentPart", "ToolCall"]
    return message


def test_anthropic_turn_to_chat_drops_the_signature_and_validates() -> None:
    message = _anthropic_thinking_tool_use()
    with pytest.warns(ReplayWarning, match="thinking"):
        body = encode(history(message), "openai-chat", model="gpt-4o")
    text = json.dumps(body)
    assert message.content[0].options["signature"] not in text
    assert message.content[0].content not in text
    for entry in body["messages"]:
        validate(ChatCompletionMessageParam, entry)
    call = message.tool_calls[0]
    assert body["messages"][1] == {
        "role": "assistant",
        "tool_calls": [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": "fixed_version", "arguments": "{}"},
            }
        ],
    }
    assert body["messages"][2] == {"role": "tool", "tool_call_id": call.call_id, "content": "42"}


def test_anthropic_turn_to_responses_drops_the_signature_and_validates() -> None:
    message = _anthropic_thinking_tool_use()
    with pytest.warns(ReplayWarning, match="foreign_signature"):
        body = encode(history(message), "openai-responses", model="gpt-5")
    assert message.content[0].options["signature"] not in json.dumps(body)
    for item in body["input"]:
        validate(ResponseInputItemParam, item)
    call = message.tool_calls[0]
    # No item id: the Anthropic tool_use id is the call id, not a Responses item id.
    assert body["input"][1] == {
        "type": "function_call",
        "call_id": call.call_id,
        "name": "fixed_version",
        "arguments": "{}",
    }
    assert body["input"][2] == {
        "type": "function_call_output",
        "call_id": call.call_id,
        "output": "42",
    }


@pytest.mark.parametrize("target", ["openai-chat", "openai-responses", "gemini"])
def test_anthropic_turn_elsewhere_in_strict_mode_raises(target: str) -> None:
    message = _anthropic_thinking_tool_use()
    with pytest.raises(EncodeError, match=r"messages\[1\]"):
        encode(history(message), target, strict=True)


def test_server_blocks_do_not_cross_providers() -> None:
    message = roundtrip_message("anthropic/web-search-thinking-citations.sse")
    with pytest.warns(ReplayWarning):
        body = encode([Message.user("weather?"), message], "openai-responses")
    assert "server_tool_use" not in json.dumps(body)
    assert "web_search_tool_result" not in json.dumps(body)
    for item in body["input"]:
        validate(ResponseInputItemParam, item)
    assert all(i.get("role") in ("user", "assistant") for i in body["input"])


def test_responses_turn_to_anthropic_drops_reasoning_and_foreign_items() -> None:
    message = roundtrip_message("openai-responses/web-search-reasoning.sse")
    with pytest.warns(ReplayWarning) as caught:
        body = encode([Message.user("q"), message], "anthropic", max_tokens=10, model="m")
    codes = " ".join(str(w.message) for w in caught)
    assert "foreign_signature" in codes and "web_search_call" in codes
    for entry in body["messages"]:
        validate(MessageParam, entry)
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text"]


def test_gemini_turn_to_anthropic_keeps_no_gemini_signature() -> None:
    message = roundtrip_message("gemini/function-call-thought-signature.sse")
    body = encode_quiet(history(message), "anthropic", max_tokens=10, model="m")
    assert message.tool_calls[0].metadata["thought_signature"] not in json.dumps(body)
    for entry in body["messages"]:
        validate(MessageParam, entry)


def test_anthropic_system_validates() -> None:
    body = encode_quiet(
        [Message.system("be brief"), "hi"], "anthropic", instructions="first", model="m"
    )
    for block in body["system"]:
        validate(TextBlockParam, block)
    assert [b["text"] for b in body["system"]] == ["first", "be brief"]
