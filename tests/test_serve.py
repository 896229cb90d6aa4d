"""`streamfold serve` under real SDK clients: a uvicorn server on a free loopback port.

Each official client (openai, anthropic, google-genai) streams a recording from the server;
its events folded with `afold` must give the Message that folding the file gives, and the
SDK's own accumulated result must agree on text, tool calls and usage. Non-streaming
requests parse into the SDK's response types; bad requests raise the SDK's error classes.
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_support import serve_in_thread
from support import REAL, read

from streamfold import Message, ToolCall, afold_message, fold_message

uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
from streamfold.serve import create_app  # noqa: E402

pytestmark = [
    # The non-beta anthropic SDK types do not know beta blocks (mcp_tool_use...); dumping
    # such an event warns but keeps every field.
    pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning"),
    # google-genai's aiohttp session subclass warns on import; not ours to fix.
    pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning"),
]


def _has(module: str) -> bool:
    return importlib.util.find_spec(f"streamfold.providers.{module}") is not None


needs = {
    name: pytest.mark.skipif(not _has(name), reason=f"{name} decoder not written yet")
    for name in ("anthropic", "openai_chat", "openai_responses", "gemini")
}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


def _pick(rec: str) -> dict[str, str]:
    return {"x-streamfold-recording": rec}


def assert_same_fold(via_sdk: Message, direct: Message) -> None:
    """The same Message. Checked field by field first, for a readable failure.

    Metadata could in principle differ (an SDK object dumps only the fields its model
    kept), but for every recording here it does not: the whole Message is equal.
    """
    assert via_sdk.content == direct.content
    assert via_sdk.tool_calls == direct.tool_calls
    assert via_sdk.status == direct.status
    assert via_sdk.stop_reason == direct.stop_reason
    assert via_sdk.raw_stop_reason == direct.raw_stop_reason
    assert (via_sdk.usage is None) == (direct.usage is None)
    if direct.usage is not None:
        assert via_sdk.usage is not None
        fields = ("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens")
        for field in fields:
            assert getattr(via_sdk.usage, field) == getattr(direct.usage, field), field
    for key in ("id", "model", "provider"):
        assert via_sdk.metadata.get(key) == direct.metadata.get(key), key
    assert via_sdk == direct


def _texts(message: Message) -> list[str]:
    return [p.content or "" for p in message.content if p.type == "text"]


def _calls(message: Message) -> list[tuple[str | None, str | None, Any]]:
    return [(c.call_id, c.name, c.arguments) for c in message.tool_calls]


# --- anthropic ------------------------------------------------------------------------

ANTHROPIC = [
    "anthropic/thinking-then-tool-use.sse",
    "anthropic/text-then-tool-use-no-args.sse",
    "anthropic/mcp-tool-use-thinking.sse",
    "anthropic/web-search-citations.sse",
]


def _anthropic_check(sdk: Any, direct: Message) -> None:
    assert [b.text for b in sdk.content if b.type == "text"] == _texts(direct)
    thinking = [b for b in sdk.content if b.type == "thinking"]
    assert [b.thinking for b in thinking] == [
        p.content for p in direct.content if p.type == "thinking"
    ]
    assert [b.signature for b in thinking] == [
        p.options.get("signature") for p in direct.content if p.type == "thinking"
    ]
    assert [(b.id, b.name, b.input) for b in sdk.content if b.type == "tool_use"] == _calls(direct)
    assert direct.usage is not None
    assert sdk.usage.input_tokens == direct.usage.input_tokens
    assert sdk.usage.output_tokens == direct.usage.output_tokens
    assert sdk.stop_reason == direct.raw_stop_reason


def _block_types(message: Message) -> list[str]:
    kinds: list[str] = []
    for entry in message.stream_order():
        if isinstance(entry, ToolCall):
            kinds.append("tool_use")
        elif entry.type == "unsupported":
            kinds.append(str(entry.options["type"]))
        else:
            kinds.append(entry.type)
    return kinds


@needs["anthropic"]
@pytest.mark.parametrize("rec", ANTHROPIC)
async def test_anthropic_sdk(base_url: str, rec: str) -> None:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="test", max_retries=0)
    request: dict[str, Any] = {
        "model": "claude-test",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "extra_headers": _pick(rec),
    }
    direct = fold_message(read(rec))
    async with await client.messages.create(stream=True, **request) as stream:
        assert_same_fold(await afold_message(stream), direct)

    async with client.messages.stream(**request) as helper:
        _anthropic_check(await helper.get_final_message(), direct)

    whole = await client.messages.create(**request)
    assert isinstance(whole, anthropic.types.Message)
    _anthropic_check(whole, direct)
    # Opaque blocks (server tools, MCP) go back whole and in place.
    assert [b.type for b in whole.content] == _block_types(direct)


# --- openai chat ----------------------------------------------------------------------

CHAT = [
    "openai-chat/tool-call-single-mini.sse",
    "openai-chat/text-include-usage.sse",
    "openai-chat/tool-calls-parallel.sse",
]


def _chat_check(sdk: Any, direct: Message) -> None:
    choice = sdk.choices[0]
    assert (choice.message.content or None) == direct.text
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == (
        _calls(direct)
    )
    assert choice.finish_reason == direct.raw_stop_reason
    if direct.usage is not None:
        assert sdk.usage.prompt_tokens == direct.usage.input_tokens
        assert sdk.usage.completion_tokens == direct.usage.output_tokens


@needs["openai_chat"]
@pytest.mark.parametrize("rec", CHAT)
async def test_openai_chat_sdk(base_url: str, rec: str) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="test", max_retries=0)
    request: dict[str, Any] = {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "extra_headers": _pick(rec),
    }
    direct = fold_message(read(rec))
    async with await client.chat.completions.create(
        stream=True, stream_options={"include_usage": True}, **request
    ) as stream:
        assert_same_fold(await afold_message(stream), direct)

    async with client.chat.completions.stream(**request) as helper:
        _chat_check(await helper.get_final_completion(), direct)

    whole = await client.chat.completions.create(**request)
    assert isinstance(whole, openai.types.chat.ChatCompletion)
    _chat_check(whole, direct)


# --- openai responses -----------------------------------------------------------------

RESPONSES = [
    "openai-responses/function-call.sse",
    "openai-responses/text.sse",
    "openai-responses/reasoning-summary.sse",
    "openai-responses/function-call-reasoning-usage.sse",
    "openai-responses/phase-reasoning-function-call.sse",
    "deepseek/responses-reasoning-text-function-call.sse",
    "openai-responses/web-search-annotations.sse",
]


def _responses_check(sdk: Any, direct: Message) -> None:
    texts = [
        c.text
        for item in sdk.output
        if item.type == "message"
        for c in item.content
        if c.type == "output_text"
    ]
    assert texts == _texts(direct)
    calls = [
        (i.call_id, i.name, json.loads(i.arguments))
        for i in sdk.output
        if i.type == "function_call"
    ]
    assert calls == _calls(direct)
    reasoning = [
        text.text
        for item in sdk.output
        if item.type == "reasoning"
        for text in [*item.summary, *(item.content or [])]
    ]
    assert sorted(reasoning) == sorted(
        p.content for p in direct.content if p.type == "thinking" and p.content
    )
    assert direct.usage is not None
    assert sdk.usage.input_tokens == direct.usage.input_tokens
    assert sdk.usage.output_tokens == direct.usage.output_tokens
    assert sdk.usage.output_tokens_details.reasoning_tokens == (direct.usage.reasoning_tokens or 0)


@needs["openai_responses"]
@pytest.mark.parametrize("rec", RESPONSES)
async def test_openai_responses_sdk(base_url: str, rec: str) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="test", max_retries=0)
    request: dict[str, Any] = {"model": "gpt-test", "input": "hi", "extra_headers": _pick(rec)}
    direct = fold_message(read(rec))
    async with await client.responses.create(stream=True, **request) as stream:
        assert_same_fold(await afold_message(stream), direct)

    async with client.responses.stream(**request) as helper:
        _responses_check(await helper.get_final_response(), direct)

    whole = await client.responses.create(**request)
    assert isinstance(whole, openai.types.responses.Response)
    _responses_check(whole, direct)
    assert whole.status == "completed"


# --- gemini (google-genai's own client, base_url pointed at the server) ---------------

GEMINI = [
    "gemini/text-2.0-flash.sse",
    "gemini/function-call-thought-signature.sse",
    "gemini/thought-parts-signature.sse",
]


def _gemini_check(sdk: Any, direct: Message) -> None:
    parts = sdk.candidates[0].content.parts or []
    texts = [p.text for p in parts if p.text is not None and not p.thought]
    # Gemini splits text over chunks; a folded text part is their concatenation.
    assert "".join(texts) == "".join(_texts(direct))
    calls = [(p.function_call.name, p.function_call.args) for p in parts if p.function_call]
    assert calls == [(c.name, c.arguments) for c in direct.tool_calls]
    assert direct.usage is not None
    assert sdk.usage_metadata.prompt_token_count == direct.usage.input_tokens
    assert sdk.usage_metadata.candidates_token_count == direct.usage.output_tokens


@needs["gemini"]
@pytest.mark.parametrize("rec", GEMINI)
async def test_gemini_sdk(base_url: str, rec: str) -> None:
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key="test",
        http_options=types.HttpOptions(base_url=base_url, headers=_pick(rec)),
    )
    direct = fold_message(read(rec))
    stream = await client.aio.models.generate_content_stream(model="gemini-test", contents="hi")
    try:
        assert_same_fold(await afold_message(stream), direct)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]

    whole = await client.aio.models.generate_content(model="gemini-test", contents="hi")
    assert isinstance(whole, types.GenerateContentResponse)
    _gemini_check(whole, direct)


# --- errors ---------------------------------------------------------------------------


async def test_openai_errors(base_url: str) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="test", max_retries=0)
    messages: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.NotFoundError) as missing:
        await client.chat.completions.create(
            model="m", messages=messages, extra_headers=_pick("no/such.sse")
        )
    assert "no recording named 'no/such.sse'" in missing.value.message
    with pytest.raises(openai.BadRequestError) as wrong_api:
        await client.responses.create(
            model="m", input="hi", extra_headers=_pick("anthropic/text-basic.sse")
        )
    assert "anthropic stream" in wrong_api.value.message
    with pytest.raises(openai.BadRequestError) as no_model:
        await client.chat.completions.create(
            model="m", messages=messages, extra_body={"model": None}
        )
    assert no_model.value.status_code == 400


async def test_anthropic_errors(base_url: str) -> None:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="test", max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as missing:
        await client.messages.create(
            model="m",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers=_pick("nope"),
        )
    assert missing.value.body == {
        "type": "error",
        "error": {"type": "not_found_error", "message": missing.value.body["error"]["message"]},
    }
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.create(
            model="m",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers=_pick("openai-chat/text-gpt5.sse"),
        )


async def test_gemini_errors(base_url: str) -> None:
    from google import genai
    from google.genai import errors, types

    client = genai.Client(
        api_key="test", http_options=types.HttpOptions(base_url=base_url, headers=_pick("nope"))
    )
    with pytest.raises(errors.ClientError) as missing:
        await client.aio.models.generate_content(model="gemini-test", contents="hi")
    assert missing.value.code == 404
    assert missing.value.status == "NOT_FOUND"


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/v1/chat/completions", "openai"),
        ("/v1/responses", "openai"),
        ("/v1/messages", "anthropic"),
        ("/v1beta/models/gemini-test:generateContent", "gemini"),
    ],
)
def test_bad_requests_get_provider_error_bodies(base_url: str, path: str, shape: str) -> None:
    invalid = httpx.post(base_url + path, content=b"{not json")
    empty = httpx.post(base_url + path, json={})
    for response in (invalid, empty):
        assert response.status_code == 400
        body = response.json()
        if shape == "openai":
            assert set(body["error"]) >= {"message", "type", "code"}
            assert body["error"]["type"] == "invalid_request_error"
        elif shape == "anthropic":
            assert body["type"] == "error"
            assert body["error"]["type"] == "invalid_request_error"
        else:
            assert body["error"]["code"] == 400
            assert body["error"]["status"] == "INVALID_ARGUMENT"
    assert "not valid JSON" in json.dumps(invalid.json())
    assert "missing required field" in json.dumps(empty.json())


def test_sse_stream_shape_and_selection_by_query(base_url: str) -> None:
    rec = "anthropic/text-basic.sse"
    with httpx.stream(
        "POST",
        f"{base_url}/v1/messages?recording=text-basic",
        json={"model": "m", "max_tokens": 5, "messages": [], "stream": True},
    ) as response:
        body = b"".join(response.iter_bytes())
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-streamfold-recording"] == rec
    assert body == read(rec)
    assert b"event: message_start" in body


def test_listing_and_default_recording(base_url: str) -> None:
    listing = httpx.get(f"{base_url}/recordings").json()["recordings"]
    assert "anthropic/text-basic.sse" in listing["anthropic"]
    first_chat = listing["openai-chat"][0]
    with warnings.catch_warnings():
        response = httpx.post(
            f"{base_url}/v1/chat/completions",
            json={"model": "m", "messages": [], "stream": True},
        )
    assert response.headers["x-streamfold-recording"] == first_chat


def test_gemini_without_alt_sse_streams_a_json_array(base_url: str) -> None:
    rec = "gemini/text-2.0-flash.sse"
    response = httpx.post(
        f"{base_url}/v1beta/models/gemini-test:streamGenerateContent?recording={rec}",
        json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    )
    assert response.status_code == 200
    chunks = response.json()
    assert isinstance(chunks, list) and chunks
    # The same chunks as the SSE stream, as objects: folding them gives the same Message.
    assert fold_message(chunks, "gemini") == fold_message(read(rec))


@needs["gemini"]
def test_gemini_sync_client(base_url: str) -> None:
    from google import genai
    from google.genai import types

    rec = "gemini/function-call-thought-signature.sse"
    client = genai.Client(
        api_key="test", http_options=types.HttpOptions(base_url=base_url, headers=_pick(rec))
    )
    chunks = list(client.models.generate_content_stream(model="gemini-test", contents="hi"))
    assert_same_fold(fold_message(chunks), fold_message(read(rec)))
    whole = client.models.generate_content(model="gemini-test", contents="hi")
    _gemini_check(whole, fold_message(read(rec)))
    # The thought signature rides back on the part that carried it.
    parts = whole.candidates[0].content.parts  # type: ignore[index,union-attr]
    assert [p for p in parts if p.thought_signature]


def test_a_call_the_client_runs_goes_out_as_its_item() -> None:
    from openai.types.responses import Response

    from streamfold.serve import response_object

    item = {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "call_1",
        "action": {"type": "screenshot"},
        "pending_safety_checks": [],
        "status": "completed",
    }
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    ]
    message = fold_message(events, "openai-responses")
    body = response_object(message, "m")
    assert body["output"] == [{**item, "id": "cu_1"}]
    assert Response.model_validate(body).output[0].type == "computer_call"
