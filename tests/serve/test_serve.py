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
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

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


JSON = {"content-type": "application/json"}


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


SDKClient = TypeVar("SDKClient")
Closing = Callable[[Any], Any]


@pytest.fixture
async def closing() -> AsyncIterator[Callable[[SDKClient], SDKClient]]:
    """Keeps the SDK clients a test makes and closes them after it: a client left to the
    garbage collector closes its sockets in a finalizer, at whatever moment it runs."""
    clients: list[Any] = []

    def keep(client: SDKClient) -> SDKClient:
        clients.append(client)
        return client

    yield keep
    for client in clients:
        aio = getattr(client, "aio", None)  # google-genai: the async client is apart
        if aio is not None:
            await aio.aclose()
            client.close()
        else:
            await client.close()


@needs["anthropic"]
@pytest.mark.parametrize("rec", ANTHROPIC)
async def test_anthropic_sdk(base_url: str, rec: str, closing: Closing) -> None:
    import anthropic

    client = closing(anthropic.AsyncAnthropic(base_url=base_url, api_key="test", max_retries=0))
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
async def test_openai_chat_sdk(base_url: str, rec: str, closing: Closing) -> None:
    import openai

    client = closing(openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="test", max_retries=0))
    request: dict[str, Any] = {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "extra_headers": _pick(rec),
    }
    direct = fold_message(read(rec))
    async with await client.chat.completions.create(
        stream=True, stream_options={"include_usage": True}, **request
    ) as stream:
        via_sdk = await afold_message(stream)
    # The SDK swallows `data: [DONE]`, the stream's end marker: its chunks never carry it.
    assert via_sdk.metadata.pop("end_marker") is False
    assert direct.metadata["end_marker"] is True
    unmarked = {k: v for k, v in direct.metadata.items() if k != "end_marker"}
    assert_same_fold(via_sdk, direct.model_copy(update={"metadata": unmarked}))

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
async def test_openai_responses_sdk(base_url: str, rec: str, closing: Closing) -> None:
    import openai

    client = closing(openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="test", max_retries=0))
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


# --- non-streaming answers: the interop adapters' objects ------------------------------

WHOLE = [
    *(("/v1/messages", rec) for rec in ANTHROPIC),
    *(("/v1/chat/completions", rec) for rec in CHAT),
    *(("/v1/responses", rec) for rec in RESPONSES),
]


@pytest.mark.parametrize(("path", "rec"), WHOLE)
def test_a_non_streaming_answer_is_the_adapters_object(base_url: str, path: str, rec: str) -> None:
    # The SDK clients parse an answer without validating it; here the SDK's models judge
    # the body strictly, and reading it back gives what the adapter gives for the fold.
    from streamfold.interop import anthropic as sf_anthropic
    from streamfold.interop import openai as sf_openai

    request = {"model": "m", "max_tokens": 5, "messages": [], "input": "hi", "stream": False}
    answer = httpx.post(f"{base_url}{path}", json=request, headers=_pick(rec))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    direct = fold_message(read(rec))
    if path == "/v1/messages":
        from anthropic.types.beta import BetaMessage

        expected = sf_anthropic.to_message(direct, model="m")
        assert type(expected).model_validate(body) == expected  # a beta block makes a BetaMessage
        assert isinstance(expected, BetaMessage) == (rec == "anthropic/mcp-tool-use-thinking.sse")
        assert sf_anthropic.from_message(body) == sf_anthropic.from_message(expected)
    elif path == "/v1/chat/completions":
        from openai.types.chat import ChatCompletion

        ChatCompletion.model_validate(body)
        expected_chat = sf_openai.to_chat_completion(direct, model="m")
        assert sf_openai.from_chat_completion(body) == sf_openai.from_chat_completion(expected_chat)
    else:
        from openai.types.responses import Response

        Response.model_validate(body, strict=True)
        expected_response = sf_openai.to_response(direct, model="m")
        assert sf_openai.from_response(body) == sf_openai.from_response(expected_response)


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
    # Gemini's candidates count leaves the thoughts out (a Usage's output counts them), and
    # its total counts them once: the recording's own numbers.
    thoughts = direct.usage.reasoning_tokens or 0
    assert sdk.usage_metadata.candidates_token_count == direct.usage.output_tokens - thoughts
    assert (sdk.usage_metadata.thoughts_token_count or 0) == thoughts
    assert sdk.usage_metadata.total_token_count == direct.usage.raw["totalTokenCount"]


@needs["gemini"]
@pytest.mark.parametrize("rec", GEMINI)
async def test_gemini_sdk(base_url: str, rec: str, closing: Closing) -> None:
    from google import genai
    from google.genai import types

    client = closing(
        genai.Client(
            api_key="test",
            http_options=types.HttpOptions(base_url=base_url, headers=_pick(rec)),
        )
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


async def test_openai_errors(base_url: str, closing: Closing) -> None:
    import openai

    client = closing(openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="test", max_retries=0))
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


async def test_anthropic_errors(base_url: str, closing: Closing) -> None:
    import anthropic

    client = closing(anthropic.AsyncAnthropic(base_url=base_url, api_key="test", max_retries=0))
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


async def test_gemini_errors(base_url: str, closing: Closing) -> None:
    from google import genai
    from google.genai import errors, types

    client = closing(
        genai.Client(
            api_key="test", http_options=types.HttpOptions(base_url=base_url, headers=_pick("nope"))
        )
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
    invalid = httpx.post(base_url + path, content=b"{not json", headers=JSON)
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
    with warnings.catch_warnings():
        response = httpx.post(
            f"{base_url}/v1/chat/completions",
            json={"model": "m", "messages": [], "stream": True},
        )
    # The default: the first chat recording whose answer is plain text.
    default = response.headers["x-streamfold-recording"]
    assert default in listing["openai-chat"]
    assert fold_message(read(default)).content[0].type == "text"


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
    client.close()
    _gemini_check(whole, fold_message(read(rec)))
    # The thought signature rides back on the part that carried it.
    parts = whole.candidates[0].content.parts  # type: ignore[index,union-attr]
    assert [p for p in parts if p.thought_signature]


# --- a hostile client ---------------------------------------------------------------------

API_PATHS = [
    ("/v1/chat/completions", "openai"),
    ("/v1/responses", "openai"),
    ("/v1/messages", "anthropic"),
    ("/v1beta/models/gemini-test:generateContent", "gemini"),
]
CHAT_REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def assert_api_error(response: httpx.Response, shape: str, status: int) -> str:
    """The response is `status` with the error body of that API; returns its message."""
    assert response.status_code == status
    body = response.json()
    if shape == "openai":
        assert set(body["error"]) == {"message", "type", "param", "code"}
        return str(body["error"]["message"])
    if shape == "anthropic":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
        return str(body["error"]["message"])
    if shape == "gemini":
        assert body["error"]["code"] == status and isinstance(body["error"]["status"], str)
        return str(body["error"]["message"])
    assert set(body) == {"error"}  # the demo routes: {"error": {"message": ...}}
    return str(body["error"]["message"])


def _still_serves(base_url: str) -> None:
    response = httpx.post(f"{base_url}/v1/chat/completions", json=CHAT_REQUEST)
    assert response.status_code == 200
    assert response.json()["object"] == "chat.completion"


@pytest.mark.parametrize(("path", "shape"), API_PATHS)
def test_a_body_past_the_limit_is_refused_with_413(base_url: str, path: str, shape: str) -> None:
    big = b'{"model": "m", "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    declared = httpx.post(base_url + path, content=big, headers=JSON)
    assert "at most 1048576 bytes" in assert_api_error(declared, shape, 413)

    # Sent chunked, without a Content-Length: counted as it arrives, refused all the same.
    def pieces() -> Iterator[bytes]:
        for start in range(0, len(big), 64 * 1024):
            yield big[start : start + 64 * 1024]

    chunked = httpx.post(base_url + path, content=pieces(), headers=JSON)
    assert "at most 1048576 bytes" in assert_api_error(chunked, shape, 413)
    _still_serves(base_url)


def test_the_body_limit_is_configurable() -> None:
    with serve_in_thread(create_app(REAL, speed=0, max_body=64)) as url:
        refused = httpx.post(f"{url}/v1/chat/completions", json={**CHAT_REQUEST, "x": "y" * 64})
        assert "at most 64 bytes" in assert_api_error(refused, "openai", 413)
        small = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": []})
        assert small.status_code == 200


@pytest.mark.parametrize(("path", "shape"), [*API_PATHS, ("/ui-stream", "plain")])
def test_a_deeply_nested_body_is_a_400(base_url: str, path: str, shape: str) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    response = httpx.post(base_url + path, content=deep, headers=JSON)
    assert "not valid JSON" in assert_api_error(response, shape, 400)
    wrapped = b'{"model": "m", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    response = httpx.post(base_url + path, content=wrapped, headers=JSON)
    assert_api_error(response, shape, 400)
    _still_serves(base_url)


@pytest.mark.parametrize(("path", "shape"), [*API_PATHS, ("/ui-stream", "plain")])
def test_only_json_bodies_are_served(base_url: str, path: str, shape: str) -> None:
    # What a page on another site may post without asking the server first (CORS-simple).
    body = json.dumps({**CHAT_REQUEST, "max_tokens": 5, "contents": [], "recording": "x"})
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"content-type": content_type} if content_type else {}
        response = httpx.post(base_url + path, content=body, headers=headers)
        message = assert_api_error(response, shape, 415)
        assert "application/json" in message
    form = httpx.post(base_url + path, files={"file": ("a.json", body.encode())})
    assert "multipart/form-data" in assert_api_error(form, shape, 415)
    charset = httpx.post(
        f"{base_url}/v1/chat/completions",
        content=json.dumps(CHAT_REQUEST),
        headers={"content-type": "Application/JSON; charset=utf-8"},
    )
    assert charset.status_code == 200


@pytest.mark.parametrize(("path", "shape"), [*API_PATHS, ("/ui-recordings", "plain")])
def test_a_foreign_host_name_is_refused(base_url: str, path: str, shape: str) -> None:
    # DNS rebinding: a page on attacker.example whose name now points at 127.0.0.1.
    method = "GET" if path == "/ui-recordings" else "POST"
    foreign = httpx.request(
        method, base_url + path, json=CHAT_REQUEST, headers={"host": "attacker.example:8765"}
    )
    assert "'attacker.example:8765'" in assert_api_error(foreign, shape, 403)
    for host in ("localhost:8765", "LOCALHOST", "127.0.0.1", "[::1]:1234"):
        ok = httpx.get(f"{base_url}/recordings", headers={"host": host})
        assert ok.status_code == 200, host


def test_more_host_names_can_be_allowed() -> None:
    from streamfold.serve import served_hosts

    app = create_app(REAL, speed=0, allowed_hosts={"replay.internal"})
    with serve_in_thread(app) as url:
        assert httpx.get(f"{url}/recordings", headers={"host": "replay.internal:80"}).is_success
        assert httpx.get(f"{url}/recordings", headers={"host": "localhost"}).status_code == 403
    assert served_hosts("127.0.0.1") == {"localhost", "127.0.0.1", "::1"}
    assert served_hosts("::1", ["dev.box"]) == {"localhost", "127.0.0.1", "::1", "dev.box"}
    assert served_hosts("0.0.0.0", ["*"]) is None


def test_no_answer_tells_where_the_recordings_are(base_url: str) -> None:
    listing = httpx.get(f"{base_url}/recordings")
    missing = httpx.post(
        f"{base_url}/v1/chat/completions", json=CHAT_REQUEST, headers=_pick("no/such.sse")
    )
    assert missing.status_code == 404
    for response in (listing, missing):
        assert str(REAL) not in response.text
        assert str(REAL.resolve()) not in response.text
    assert "anthropic/text-basic.sse" in listing.json()["recordings"]["anthropic"]


def test_a_name_several_apis_share_means_the_endpoints_own(base_url: str) -> None:
    # mistral/text.sse (openai-chat) comes first in path order; openai-responses/text.sse too.
    responses = httpx.post(
        f"{base_url}/v1/responses", json={"model": "m", "input": "hi"}, headers=_pick("text.sse")
    )
    assert responses.status_code == 200
    assert responses.headers["x-streamfold-recording"] == "openai-responses/text.sse"
    chat = httpx.post(f"{base_url}/v1/chat/completions", json=CHAT_REQUEST, headers=_pick("text"))
    assert chat.headers["x-streamfold-recording"] == "mistral/text.sse"


@pytest.fixture
def own_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A recordings directory of one recording, and a secret file outside it."""
    directory = tmp_path / "recordings"
    (directory / "anthropic").mkdir(parents=True)
    (directory / "anthropic" / "text-basic.sse").write_bytes(read("anthropic/text-basic.sse"))
    secret = tmp_path / "secret.sse"
    # Outside the directory, and itself a stream a client could fold.
    secret.write_bytes(read("anthropic/text-basic.sse").replace(b"Hello", b"SECRET-XYZ"))
    return directory, secret


def test_a_recording_swapped_for_a_link_outside_is_not_served(own_dir: tuple[Path, Path]) -> None:
    directory, secret = own_dir
    recording = directory / "anthropic" / "text-basic.sse"
    (directory / "anthropic" / "linked.sse").symlink_to(secret)  # there at start-up
    request = {"model": "m", "max_tokens": 5, "messages": [], "stream": True}
    with serve_in_thread(create_app(directory, speed=0)) as url:
        listing = httpx.get(f"{url}/recordings").json()["recordings"]
        assert listing == {"anthropic": ["anthropic/text-basic.sse"]}
        assert httpx.post(f"{url}/v1/messages", json=request).status_code == 200

        recording.unlink()
        recording.symlink_to(secret)  # replaced after start-up
        for stream in (True, False):
            answer = httpx.post(f"{url}/v1/messages", json={**request, "stream": stream})
            assert "links to elsewhere" in assert_api_error(answer, "anthropic", 404)
            assert b"SECRET" not in answer.content
        ui = httpx.get(f"{url}/ui-stream", params={"recording": "anthropic/text-basic.sse"})
        assert "links to elsewhere" in assert_api_error(ui, "plain", 404)
        assert b"SECRET" not in ui.content

        recording.unlink()
        recording.symlink_to(directory / "anthropic" / ".." / "anthropic" / "other.sse")
        (directory / "anthropic" / "other.sse").write_bytes(read("anthropic/text-basic.sse"))
        inside = httpx.post(f"{url}/v1/messages", json=request)  # a link inside is followed
        assert inside.status_code == 200 and b"SECRET" not in inside.content


def test_a_stalling_speed_is_refused(base_url: str) -> None:
    from streamfold.errors import UsageError
    from streamfold.record import check_speed

    rec = "anthropic/text-basic.sse"
    for speed in ("5e-324", "0.001", "1e9", "inf", "nan", "-1"):
        response = httpx.get(f"{base_url}/ui-stream", params={"recording": rec, "speed": speed})
        assert "speed: expected 0 (no waiting) or a number from 0.01 to 1000" in (
            assert_api_error(response, "plain", 400)
        )
        with pytest.raises(UsageError):
            check_speed(float(speed))
    with pytest.raises(UsageError):
        create_app(REAL, speed=5e-324)
    assert [check_speed(s) for s in (0, 0.01, 1, 1000)] == [0, 0.01, 1, 1000]
    fine = httpx.get(f"{base_url}/ui-stream", params={"recording": rec, "speed": "0"})
    assert fine.status_code == 200


def test_a_timing_sidecar_cannot_stall_or_leak(own_dir: tuple[Path, Path]) -> None:
    directory, secret = own_dir
    recording = directory / "anthropic" / "text-basic.sse"
    sidecar = recording.with_name(recording.name + ".timing.json")
    request = {"model": "m", "max_tokens": 5, "messages": [], "stream": True}
    whole = read("anthropic/text-basic.sse")
    with serve_in_thread(create_app(directory, speed=1)) as url:
        # Each sidecar is refused and the replay paced per event instead: the whole
        # recording, no stall, nothing about the files in the answer.
        outside = secret.with_name("outside.timing.json")  # followed, it would wait 22 h
        outside.write_text(json.dumps({"version": 1, "chunks": [[len(whole), 80_000.0]]}))
        sidecar.symlink_to(outside)
        infinite = json.dumps({"version": 1, "chunks": [[5, 0.0], [len(whole), float("inf")]]})
        for content in (None, infinite, "{not json"):
            if content is not None:
                sidecar.unlink()
                sidecar.write_text(content)
            with httpx.stream("POST", f"{url}/v1/messages", json=request, timeout=30) as answer:
                assert answer.status_code == 200
                assert b"".join(answer.iter_bytes()) == whole
            ui = httpx.get(
                f"{url}/ui-stream",
                params={"recording": "anthropic/text-basic.sse", "speed": "0"},
            )
            assert ui.status_code == 200 and b".timing.json" not in ui.content
            assert str(directory).encode() not in ui.content


async def test_sdks_read_the_refusals(base_url: str, closing: Closing) -> None:
    import anthropic
    import openai
    from google import genai
    from google.genai import errors, types

    huge = "x" * (2 * 1024 * 1024)
    chat = closing(openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="test", max_retries=0))
    with pytest.raises(openai.APIStatusError) as too_large:
        await chat.chat.completions.create(model="m", messages=[{"role": "user", "content": huge}])
    assert too_large.value.status_code == 413 and "at most" in too_large.value.message

    claude = closing(anthropic.AsyncAnthropic(base_url=base_url, api_key="test", max_retries=0))
    with pytest.raises(anthropic.APIStatusError) as refused:
        await claude.messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": huge}]
        )
    assert refused.value.status_code == 413
    assert refused.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]

    foreign = {"host": "attacker.example"}
    gemini = closing(
        genai.Client(
            api_key="test", http_options=types.HttpOptions(base_url=base_url, headers=foreign)
        )
    )
    with pytest.raises(errors.ClientError) as denied:
        await gemini.aio.models.generate_content(model="gemini-test", contents="hi")
    assert (denied.value.code, denied.value.status) == (403, "PERMISSION_DENIED")


async def test_an_absurd_content_length_is_a_413() -> None:
    from streamfold.web.guard import RequestGuard

    async def never(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the handler must not run")

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"host", b"localhost"), (b"content-type", b"application/json"),
               (b"content-length", b"9" * 5000)]  # fmt: skip
    scope = {"type": "http", "method": "POST", "path": "/x", "headers": headers}
    await RequestGuard(never)(scope, receive, send)
    assert sent[0]["status"] == 413


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
