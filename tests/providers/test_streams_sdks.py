"""The official SDKs read `to_stream`'s bytes as their provider's own stream.

Each SDK gets the bytes through a real httpx transport (`MockTransport` serves them as a
streamed body) or through its own stream parser (botocore's eventstream parser for
Bedrock), and its own accumulator builds the message: openai's
`ChatCompletionStreamState` (`chat.completions.stream`) and `ResponseStreamState`
(`responses.stream`), anthropic's `MessageStream` (`messages.stream`, also on
`AnthropicBedrock`), google-genai's response parsing (`generate_content_stream`), the
ollama client's `chat(stream=True)`. What it built must hold what streamfold's fold of the
same bytes holds: the text, the thinking, the tool calls and the stop reason.
"""

from __future__ import annotations

import importlib
import json
import warnings
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stream_support import messages
from support import ALL_RECORDINGS, read

from streamfold import Message, ReplayWarning, fold_message, to_stream

MESSAGES = {rel: fold_message(read(rel)) for rel in ALL_RECORDINGS}
# The streams an SDK's helper reads to the end: a turn that finished (a cut or failed one
# raises or stops early in the SDK, as it should; the faults tests show those).
FINISHED = [rel for rel, m in MESSAGES.items() if m.status in ("complete", "length")]


def _http2() -> Any:
    """anthropic and google-genai 2.x speak httpx2; older releases speak httpx."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:  # pragma: no cover - depends on the installed SDKs
        return httpx


def _transport(http: Any, chunks: list[bytes], content_type: str) -> Any:
    def handler(request: Any) -> Any:
        return http.Response(200, headers={"content-type": content_type}, content=iter(chunks))

    return http.MockTransport(handler)


def _stream(message: Message, provider: str) -> tuple[list[bytes], Message]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReplayWarning)
        chunks = to_stream(message, provider)
    return chunks, fold_message(chunks, provider)


def _ours(message: Message) -> dict[str, Any]:
    return {
        "text": "".join(
            p.content or ""
            for p in message.content
            if p.type == "text" and not p.options.get("refusal")
        ),
        "thinking": "".join(p.content or "" for p in message.content if p.type == "thinking"),
        "calls": [(c.name, c.arguments) for c in message.tool_calls],
    }


# --- openai ---------------------------------------------------------------------------------


def _openai(chunks: list[bytes]) -> Any:
    import openai

    transport = _transport(httpx, chunks, "text/event-stream")
    return openai.OpenAI(api_key="test", max_retries=0,
                         http_client=httpx.Client(transport=transport))  # fmt: skip


def chat_judge(message: Message) -> None:
    import openai

    chunks, ours = _stream(message, "openai-chat")
    client = _openai(chunks)
    with client.chat.completions.stream(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        try:
            final = stream.get_final_completion()
        except openai.LengthFinishReasonError as cut:  # its way of saying "length"
            final = cut.completion
    choice = final.choices[0]
    calls = [(c.function.name, json.loads(c.function.arguments or "{}"))
             for c in choice.message.tool_calls or []]  # fmt: skip
    theirs = {
        "text": choice.message.content or "",
        # (DeepSeek's reasoning_content: the SDK keeps unknown fields as extras.)
        "thinking": ours_thinking_seen(choice.message),
        "calls": calls,
    }
    assert theirs == {**_ours(ours), "thinking": theirs["thinking"]}
    assert choice.finish_reason == ours.raw_stop_reason
    # The annotations, one list for the message, as the fold's citations.
    urls = [a.url_citation.url for a in choice.message.annotations or []]
    assert urls == [c.source.url for p in ours.content for c in p.citations if c.source]


def ours_thinking_seen(sdk_message: Any) -> str:
    extra = getattr(sdk_message, "model_extra", None) or {}
    value = extra.get("reasoning_content")
    return value if isinstance(value, str) else ""


def responses_judge(message: Message) -> None:
    chunks, ours = _stream(message, "openai-responses")
    client = _openai(chunks)
    with client.responses.stream(model="gpt-test", input="hi") as stream:
        # (get_final_response wants response.completed; a cut turn ends in .incomplete.)
        ends = [e.response for e in stream if e.type in ("response.completed",
                                                          "response.incomplete")]  # fmt: skip
    final = ends[-1]
    text = thinking = ""
    calls: list[tuple[str, Any]] = []
    for item in final.output:
        if item.type == "message":
            text += "".join(c.text for c in item.content if c.type == "output_text")
        elif item.type == "reasoning":
            thinking += "".join(s.text for s in item.summary)
            thinking += "".join(c.text for c in item.content or [])
        elif item.type == "function_call":
            calls.append((item.name, json.loads(item.arguments or "{}")))
        elif item.type == "custom_tool_call":
            calls.append((item.name, {"input": item.input}))
    assert final.status == {"complete": "completed", "length": "incomplete"}[ours.status]
    ours_calls = [(n, a) for n, a in _ours(ours)["calls"]]
    expected = {**_ours(ours), "calls": ours_calls}
    assert {"text": text, "thinking": thinking, "calls": calls} == {
        **expected,
        "calls": [c for c in expected["calls"] if _is_responses_call(c, ours)],
    }


def _is_responses_call(call: tuple[Any, Any], message: Message) -> bool:
    """function and custom tool calls (items the caller runs are other item types)."""
    for c in message.tool_calls:
        if (c.name, c.arguments) == call:
            return c.metadata.get("type") in (None, "custom_tool_call", "function_call")
    return False


# --- anthropic ------------------------------------------------------------------------------


def _anthropic_final(client: Any) -> Any:
    with client.beta.messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        return stream.get_final_message()


def _anthropic_seen(final: Any) -> dict[str, Any]:
    text = "".join(b.text for b in final.content if b.type == "text")
    thinking = "".join(b.thinking for b in final.content if b.type == "thinking")
    calls = [(b.name, b.input) for b in final.content if b.type == "tool_use"]
    return {"text": text, "thinking": thinking, "calls": calls}


def anthropic_judge(message: Message) -> None:
    import anthropic

    chunks, ours = _stream(message, "anthropic")
    http = _http2()
    client = anthropic.Anthropic(api_key="test", max_retries=0, http_client=http.Client(
        transport=_transport(http, chunks, "text/event-stream")))  # fmt: skip
    final = _anthropic_final(client)
    assert _anthropic_seen(final) == _ours(ours)
    assert final.stop_reason == ours.raw_stop_reason
    signatures = [b.signature for b in final.content if b.type == "thinking"]
    assert signatures == [p.options.get("signature", "") for p in ours.content
                          if p.type == "thinking"]  # fmt: skip


def bedrock_invoke_judge(message: Message) -> None:
    import anthropic

    chunks, ours = _stream(message, "bedrock-invoke")
    http = _http2()
    client = anthropic.AnthropicBedrock(
        aws_access_key="test", aws_secret_key="test", aws_region="us-east-1", max_retries=0,
        http_client=http.Client(
            transport=_transport(http, chunks, "application/vnd.amazon.eventstream")),
    )  # fmt: skip
    final = _anthropic_final(client)
    assert _anthropic_seen(final) == _ours(ours)
    assert final.stop_reason == ours.raw_stop_reason


# --- google-genai ---------------------------------------------------------------------------


def gemini_judge(message: Message) -> None:
    from google import genai
    from google.genai import types

    chunks, ours = _stream(message, "gemini")
    http = _http2()
    transport = _transport(http, chunks, "text/event-stream")
    options = types.HttpOptions(httpx_client=http.Client(transport=transport))
    client = genai.Client(api_key="test", http_options=options)
    text = thinking = ""
    calls: list[tuple[Any, Any]] = []
    finish = None
    for chunk in client.models.generate_content_stream(model="gemini-test", contents="hi"):
        candidate = (chunk.candidates or [None])[0]
        if candidate is None:
            continue
        finish = candidate.finish_reason or finish
        for part in (candidate.content.parts if candidate.content else None) or []:
            if part.function_call is not None:
                calls.append((part.function_call.name, part.function_call.args or {}))
            elif part.text is not None and part.thought:
                thinking += part.text
            elif part.text is not None:
                text += part.text
    assert {"text": text, "thinking": thinking, "calls": calls} == _ours(ours)
    assert finish is not None and finish.value == ours.raw_stop_reason


# --- botocore -------------------------------------------------------------------------------


def bedrock_judge(message: Message) -> None:
    from botocore import eventstream, parsers, session

    chunks, ours = _stream(message, "bedrock")
    operation = (
        session.get_session().get_service_model("bedrock-runtime").operation_model("ConverseStream")
    )
    shape = operation.output_shape.members["stream"]
    parser = parsers.EventStreamJSONParser()
    events = []
    for chunk in chunks:
        buffer = eventstream.EventStreamBuffer()
        buffer.add_data(chunk)  # one eventstream message a chunk
        (one,) = list(buffer)
        events.append(parser.parse(one.to_response_dict(), shape))
    text = thinking = ""
    inputs: dict[int, str] = {}
    names: dict[int, str] = {}
    stop = None
    for event in events:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            tool = start["start"].get("toolUse")
            if tool is not None and tool.get("type", "tool_use") == "tool_use":
                names[start["contentBlockIndex"]] = tool["name"]
        elif "contentBlockDelta" in event:
            body = event["contentBlockDelta"]
            delta = body["delta"]
            text += delta.get("text", "")
            thinking += delta.get("reasoningContent", {}).get("text", "")
            if "toolUse" in delta:
                at = body["contentBlockIndex"]
                inputs[at] = inputs.get(at, "") + delta["toolUse"]["input"]
        elif "messageStop" in event:
            stop = event["messageStop"]["stopReason"]
    calls = [(names[at], json.loads(inputs.get(at) or "{}")) for at in sorted(names)]
    assert {"text": text, "thinking": thinking, "calls": calls} == _ours(ours)
    cited = [e["contentBlockDelta"]["delta"]["citation"] for e in events
             if "citation" in e.get("contentBlockDelta", {}).get("delta", {})]  # fmt: skip
    assert [c.get("title") for c in cited] == [
        c.source.title for p in ours.content for c in p.citations if c.source is not None
    ]
    assert stop == ours.raw_stop_reason


# --- ollama ---------------------------------------------------------------------------------


def ollama_judge(message: Message) -> None:
    import ollama

    chunks, ours = _stream(message, "ollama")
    client = ollama.Client(host="http://ollama.test",
                           transport=_transport(httpx, chunks, "application/x-ndjson"))  # fmt: skip
    text = thinking = ""
    calls: list[tuple[Any, Any]] = []
    done = None
    for part in client.chat(model="llama-test", messages=[{"role": "user", "content": "hi"}],
                            stream=True):  # fmt: skip
        text += part.message.content or ""
        thinking += part.message.thinking or ""
        calls.extend((c.function.name, dict(c.function.arguments))
                     for c in part.message.tool_calls or [])  # fmt: skip
        done = part.done_reason or done
    assert {"text": text, "thinking": thinking, "calls": calls} == _ours(ours)
    assert done == ours.raw_stop_reason


JUDGES: dict[str, Callable[[Message], None]] = {
    "openai-chat": chat_judge,
    "openai-responses": responses_judge,
    "anthropic": anthropic_judge,
    "bedrock-invoke": bedrock_invoke_judge,
    "gemini": gemini_judge,
    "bedrock": bedrock_judge,
    "ollama": ollama_judge,
}


# What an SDK cannot read, whoever writes it: the openai SDK's chat stream helper builds a
# custom tool call's `custom` as a dict, then reads `tool_call.custom.name` from it
# (openai 3.63, lib/_parsing/_completions.py) and raises AttributeError.
SDK_CANNOT = {("openai-responses/custom-tool-call.sse", "openai-chat")}


@pytest.mark.parametrize("provider", sorted(JUDGES))
@pytest.mark.parametrize("rel", FINISHED)
def test_the_official_sdk_reads_every_recordings_message(rel: str, provider: str) -> None:
    if (rel, provider) in SDK_CANNOT:
        with pytest.raises(AttributeError, match="'dict' object has no attribute 'name'"):
            JUDGES[provider](MESSAGES[rel])
        return
    JUDGES[provider](MESSAGES[rel])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), provider=st.sampled_from(sorted(JUDGES)))
def test_the_official_sdk_reads_generated_messages(data: st.DataObject, provider: str) -> None:
    message = data.draw(messages().filter(lambda m: m.status in ("complete", "length")))
    JUDGES[provider](message)
