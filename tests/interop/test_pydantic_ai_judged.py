"""`interop.pydantic_ai` judged by pydantic-ai's own models.

pydantic-ai's `AnthropicModel`, `OpenAIChatModel`, `OpenAIResponsesModel`, `GoogleModel` and
`BedrockConverseModel` each stream a real recording from `streamfold serve` and build their
own `ModelResponse`.
For the same recording:

(a) `to_model_response(fold_message(recording))` equals pydantic-ai's own response, but for
    the differences in `DIFFERENCES` (docs/adapters/pydantic-ai.md lists the same, with the
    same reasons);
(b) the next request each model builds from a history holding ours equals the request it
    builds from a history holding its own (captured at the server's HTTP end): thinking
    with its signature, reasoning with its encrypted content and item id, Gemini's thought
    signatures, Bedrock's redacted reasoning, tool calls and their results;
(c) `from_model_response` on pydantic-ai's own response gives the folded Message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from server_support import bedrock_client, serve_in_thread
from support import REAL

from streamfold import fold_message

pytest.importorskip("pydantic_ai")
pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")
pytest.importorskip("botocore.session")

from pydantic_ai.exceptions import ModelAPIError  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters  # noqa: E402
from pydantic_ai.usage import RequestUsage  # noqa: E402

from streamfold.interop.pydantic_ai import from_model_response, to_model_response  # noqa: E402
from streamfold.serve import create_app  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning"),
    # pydantic-ai warns of a retired model name; the recordings' models are what they are.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:pydantic_ai"),
    pytest.mark.filterwarnings("ignore:.*deprecated by its provider"),
]

# --- which model reads which recording -----------------------------------------------------

ANTHROPIC = [
    "anthropic/text-basic.sse",
    "anthropic/thinking-signature.sse",
    "anthropic/thinking-adaptive-multi-text.sse",
    "anthropic/thinking-then-tool-use.sse",
    "anthropic/text-then-tool-use-no-args.sse",
    "anthropic/tool-use-single.sse",
    "anthropic/redacted-thinking.sse",
]
CHAT = [
    "openai-chat/text-gpt5.sse",
    "openai-chat/text-include-usage.sse",
    "openai-chat/tool-call-single-mini.sse",
    "openai-chat/tool-calls-parallel.sse",
    "openai-chat/tool-calls-parallel-interleaved-args.sse",
    "openai-chat/tool-call-long-args.sse",
    "groq/tool-call.sse",
    "groq/reasoning-tool-call.sse",
    "deepseek/reasoner-reasoning-content.sse",
    "deepseek/reasoner-tool-call.sse",
    "deepseek/chat-finish-length.sse",
    "mistral/text.sse",
    "mistral/tool-call-single-chunk.sse",
    "alibaba/qwen-tool-call.sse",
    "azure-openai/chat-model-router.sse",
    "xai/chat-reasoning-content-tool-call.sse",
    "zai/glm-thinking-reasoning-content.sse",
    "openrouter/reasoning-details-claude.sse",
]
RESPONSES = [
    "openai-responses/text.sse",
    "openai-responses/logprobs.sse",
    "openai-responses/background-mode.sse",
    "openai-responses/function-call.sse",
    "openai-responses/function-call-reasoning-usage.sse",
    "openai-responses/reasoning-summary.sse",
    "openai-responses/phase-reasoning-function-call.sse",
    "azure-openai/responses-tool-call.sse",
    "xai/responses-reasoning-summary.sse",
]
GEMINI = [
    "gemini/text-2.0-flash.sse",
    "gemini/thought-parts-signature.sse",
    "gemini/function-call-thought-signature.sse",
    "gemini/function-call-streamed-args.sse",
    "gemini/vertex-text-flex.sse",
]
# The Converse stream names no model: each recording is asked of the model that made it,
# as pydantic-ai's BedrockConverseModel decides by the model's name what it sends back
# (a Claude model's thinking signatures and redacted reasoning; others' thinking as text).
_CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
_NOVA = "amazon.nova-micro-v1:0"
BEDROCK = {
    "bedrock/text-nova-micro.eventstream": _NOVA,
    "bedrock/text-nova-micro.ndjson": _NOVA,
    "bedrock/text-then-tool-use-nova.eventstream": _NOVA,
    "bedrock/text-then-tool-use-nova.ndjson": _NOVA,
    "bedrock/tool-call.ndjson": _NOVA,
    "bedrock/thinking-signature-claude.eventstream": _CLAUDE,
    "bedrock/thinking-signature-claude.ndjson": _CLAUDE,
    "bedrock/reasoning-signature.ndjson": _CLAUDE,
    "bedrock/redacted-thinking-claude.eventstream": _CLAUDE,
    "bedrock/redacted-thinking-claude.ndjson": _CLAUDE,
    "bedrock/reasoning-empty-text-delta-gpt-oss.eventstream": "openai.gpt-oss-120b-1:0",
    "bedrock/reasoning-empty-text-delta-gpt-oss.ndjson": "openai.gpt-oss-120b-1:0",
    "bedrock/server-tool-code-execution-nova2.eventstream": "amazon.nova-2-lite-v1:0",
    "bedrock/server-tool-code-execution-nova2.ndjson": "amazon.nova-2-lite-v1:0",
}
CASES = (
    [("anthropic", r) for r in ANTHROPIC]
    + [("chat", r) for r in CHAT]
    + [("responses", r) for r in RESPONSES]
    + [("google", r) for r in GEMINI]
    + [("bedrock", r) for r in BEDROCK]
)

# Anthropic's web search and web fetch: the next request only is judged (the parts hold
# the tool's blocks whole where pydantic-ai's hold its own shape of them, see the docs).
SERVER_TOOLS = ["anthropic/web-search-pause-turn.sse", "anthropic/web-fetch-thinking.sse"]
SERVER_CASES = [("anthropic", r) for r in SERVER_TOOLS]

# Where the two responses differ, and why. The docs' adapter page lists the same.
DIFFERENCES = {
    "timestamp, request_timestamp, duration, provider_url": (
        "when and where a request was made: a fold of a file has neither"
    ),
    "metadata": "streamfold's own (status, raw usage and metadata, each part's options); "
    "pydantic-ai never sends it to a model",
    "provider_details beyond finish_reason": (
        "pydantic-ai copies some response fields (timestamp, service tier); streamfold keeps "
        "them in metadata['streamfold']['metadata']"
    ),
    "usage.details": "pydantic-ai copies the raw counters, and derives Gemini's per-modality "
    "counts from them; streamfold keeps them whole in metadata['streamfold']['usage']",
    "tool-call args": "a dict where pydantic-ai keeps the streamed JSON text (args_as_dict() "
    "is equal)",
    "Gemini tool_call_id": "Gemini sends no call id: pydantic-ai makes a random one, "
    "streamfold a stable <name>_<n>",
    "Chat Completions thinking id": "pydantic-ai names the field the reasoning came in "
    "(reasoning / reasoning_content) and sends it back in that field; the fold does not keep "
    "which, so OpenAIChatModel sends streamfold's back as <think> text",
    "Chat Completions thinking provider_details": "OpenRouter's reasoning format: streamfold "
    "keeps it in metadata['streamfold']['parts']",
    "xAI output_tokens": "xAI's completion_tokens leave the reasoning out; streamfold counts "
    "it in, as every other provider does, pydantic-ai copies xAI's",
    "Gemini streamed function call arguments": "pydantic-ai's GoogleModel reads a call whose "
    "arguments Gemini streams in pieces (partialArgs) as {}; streamfold keeps them",
    "Bedrock model_name, canonical_system": "the Converse stream names no model: "
    "BedrockConverseModel writes the one it asked for, and `anthropic` as a Claude model's "
    "canonical system; streamfold writes neither, and BedrockConverseModel sends the "
    "signatures back as it sends its own",
}
# Recordings pydantic-ai's models read nothing of: not judged here.
#  - openai-responses/custom-tool-call.sse: OpenAIResponsesModel drops a custom tool call it
#    was given no tool for (its response has no parts).
_STREAMED_ARGS = {"gemini/function-call-streamed-args.sse"}

_USAGE_FIELDS = {f.name for f in dataclasses.fields(RequestUsage)} - {"details"}
_UNTIMED = ("timestamp", "request_timestamp", "duration", "provider_url", "metadata")


def _view(response: ModelResponse, kind: str, recording: str) -> dict[str, Any]:
    """The response as JSON without what `DIFFERENCES` names."""
    data: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
    for key in _UNTIMED:
        data.pop(key, None)
    details = data.get("provider_details") or {}
    data["provider_details"] = {"finish_reason": details.get("finish_reason")}
    data["usage"] = {k: v for k, v in data["usage"].items() if k in _USAGE_FIELDS}
    if recording.startswith("xai/") and kind == "chat":
        data["usage"].pop("output_tokens")
    if kind == "bedrock":
        data.pop("model_name")
        data.pop("canonical_system")
    for part, original in zip(data["parts"], response.parts, strict=True):
        part.pop("timestamp", None)
        if part["part_kind"] in ("tool-call", "builtin-tool-call"):
            part["args"] = original.args_as_dict()  # type: ignore[union-attr]
            if kind == "google":
                part.pop("tool_call_id")
            if recording in _STREAMED_ARGS:
                part.pop("args")
        if part["part_kind"] == "thinking" and kind == "chat":
            part.pop("id")
            part.pop("provider_details")
    return data


# --- the server, and capturing what each model sends -------------------------------------


class Capture:
    """An ASGI wrapper that keeps each request's body under its `x-capture` header."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.bodies: dict[str, dict[str, Any]] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        key = dict(scope["headers"]).get(b"x-capture")
        if key is not None:
            self.bodies[key.decode()] = json.loads(body)
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Capture]]:
    capture = Capture(create_app(REAL, speed=0))
    with serve_in_thread(capture) as url:
        yield url, capture


Closer = Callable[[], Awaitable[None]]


def _model(kind: str, base_url: str, headers: dict[str, str]) -> tuple[Model, Closer]:
    """pydantic-ai's own model for `kind`, its SDK client pointed at the server."""
    if kind == "bedrock":
        return _bedrock(base_url, headers)
    if kind in ("chat", "responses"):
        from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = openai.AsyncOpenAI(
            base_url=f"{base_url}/v1", api_key="test", max_retries=0, default_headers=headers
        )
        provider = OpenAIProvider(openai_client=client)
        model: Model = (
            OpenAIChatModel("gpt-5", provider=provider)
            if kind == "chat"
            else OpenAIResponsesModel("gpt-5", provider=provider)
        )
        return model, client.close
    if kind == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        claude = anthropic.AsyncAnthropic(
            base_url=base_url, api_key="test", max_retries=0, default_headers=headers
        )
        model = AnthropicModel(
            "claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=claude)
        )
        return model, claude.close
    from google.genai import types
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    gemini = genai.Client(
        api_key="test", http_options=types.HttpOptions(base_url=base_url, headers=headers)
    )

    async def close() -> None:
        await gemini.aio.aclose()
        gemini.close()

    return GoogleModel("gemini-2.5-pro", provider=GoogleProvider(client=gemini)), close


def _bedrock(base_url: str, headers: dict[str, str]) -> tuple[Model, Closer]:
    from pydantic_ai.models.bedrock import BedrockConverseModel
    from pydantic_ai.providers.bedrock import BedrockProvider

    client = bedrock_client(base_url, headers)
    model_id = BEDROCK[headers["x-streamfold-recording"]]

    async def close() -> None:
        client.close()

    return BedrockConverseModel(model_id, provider=BedrockProvider(bedrock_client=client)), close


async def _stream(
    kind: str, base_url: str, recording: str, history: list[ModelMessage], capture: str = ""
) -> ModelResponse:
    headers = {"x-streamfold-recording": recording}
    if capture:
        headers["x-capture"] = capture
    model, close = _model(kind, base_url, headers)
    try:
        params = ModelRequestParameters(native_tools=_native_tools(recording))
        async with model.request_stream(history, None, params) as stream:
            async for _ in stream:
                pass
        return stream.get()
    finally:
        await close()


PROMPT = ModelRequest(parts=[UserPromptPart("hi")])


def _next_turn(response: ModelResponse) -> list[ModelMessage]:
    """A history holding `response` and what an agent sends after it: each tool call's
    result, or the user's next word."""
    returns = [
        ToolReturnPart(tool_name=p.tool_name, content="42", tool_call_id=p.tool_call_id)
        for p in response.parts
        if p.part_kind == "tool-call"
    ]
    follow = (
        ModelRequest(parts=returns) if returns else ModelRequest(parts=[UserPromptPart("go on")])
    )
    return [PROMPT, response, follow]


def _native_tools(recording: str) -> list[Any]:
    """The provider-run tools a recording used, turned on as an app would: pydantic-ai's
    models read a provider-run tool's blocks only for a tool they were given."""
    if recording not in SERVER_TOOLS:
        return []
    from pydantic_ai.native_tools import WebFetchTool, WebSearchTool

    return [WebSearchTool(), WebFetchTool()]


async def _request_from(
    kind: str, base_url: str, recording: str, capture: Capture, response: ModelResponse, key: str
) -> dict[str, Any]:
    # The server may refuse the follow-up; the request it got is what is compared.
    with contextlib.suppress(ModelAPIError):
        await _stream(kind, base_url, recording, _next_turn(response), capture=key)
    return capture.bodies.pop(key)


def _normalized(body: dict[str, Any], ids: list[str]) -> Any:
    """The request with tool call arguments parsed (pydantic-ai sends its own streamed text
    as it came, ours re-serialized) and the tool call ids numbered in order."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: json.loads(v) if k == "arguments" and isinstance(v, str) else walk(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str) and value in ids:
            return f"<call {ids.index(value)}>"
        return value

    return walk(body)


def _call_ids(response: ModelResponse) -> list[str]:
    return [p.tool_call_id for p in response.parts if p.part_kind == "tool-call"]


# --- the tests -------------------------------------------------------------------------------


@pytest.fixture
async def judged(
    request: pytest.FixtureRequest, server: tuple[str, Capture]
) -> AsyncIterator[tuple[str, str, ModelResponse, ModelResponse]]:
    kind, recording = request.param
    base_url, _ = server
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = await _stream(kind, base_url, recording, [PROMPT])
    with (REAL / recording).open("rb") as stream:
        ours = to_model_response(fold_message(stream))
    yield kind, recording, theirs, ours


@pytest.mark.parametrize("judged", CASES, indirect=True, ids=[f"{k}:{r}" for k, r in CASES])
async def test_response_equals_pydantic_ais_own(
    judged: tuple[str, str, ModelResponse, ModelResponse],
) -> None:
    kind, recording, theirs, ours = judged
    mine, own = _view(ours, kind, recording), _view(theirs, kind, recording)
    assert [p["part_kind"] for p in mine["parts"]] == [p["part_kind"] for p in own["parts"]]
    for got, want in zip(mine["parts"], own["parts"], strict=True):
        assert got == want
    assert mine == own


@pytest.mark.parametrize(
    "judged", CASES + SERVER_CASES, indirect=True, ids=[f"{k}:{r}" for k, r in CASES + SERVER_CASES]
)
async def test_next_request_equals_the_one_from_pydantic_ais_own(
    judged: tuple[str, str, ModelResponse, ModelResponse], server: tuple[str, Capture]
) -> None:
    kind, recording, theirs, ours = judged
    base_url, capture = server
    theirs = _without_listed_differences(theirs, ours, kind, recording)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from_theirs = await _request_from(kind, base_url, recording, capture, theirs, "theirs")
        from_ours = await _request_from(kind, base_url, recording, capture, ours, "ours")
    assert _normalized(from_ours, _call_ids(ours)) == _normalized(from_theirs, _call_ids(theirs))
    # What only the provider can read goes back as it goes from pydantic-ai's own: each
    # signature and encrypted content.
    sent, own = json.dumps(from_ours), json.dumps(from_theirs)
    for secret in _secrets(theirs):
        assert (secret in sent) == (secret in own)


def _without_listed_differences(
    theirs: ModelResponse, ours: ModelResponse, kind: str, recording: str
) -> ModelResponse:
    """pydantic-ai's own response with the listed differences that change the next request
    made as in ours: a Chat Completions thinking part without the name of its field (sent
    back in <think> tags, not in that field), and Gemini's streamed arguments as they came."""
    parts = list(theirs.parts)
    for i, part in enumerate(parts):
        if kind == "chat" and part.part_kind == "thinking":
            parts[i] = dataclasses.replace(part, id=None)
        if recording in _STREAMED_ARGS and part.part_kind == "tool-call":
            mine = ours.parts[i]
            assert mine.part_kind == "tool-call"
            parts[i] = dataclasses.replace(part, args=mine.args_as_dict())
    return dataclasses.replace(theirs, parts=parts)


def _secrets(response: ModelResponse) -> list[str]:
    found: list[str] = []
    for part in response.parts:
        signature = getattr(part, "signature", None)
        if isinstance(signature, str):
            found.append(signature)
        thought = (part.provider_details or {}).get("thought_signature")
        if isinstance(thought, str):
            found.append(thought)
    return found


def test_differences_are_the_documented_ones() -> None:
    page = (REAL.parents[2] / "docs" / "adapters" / "pydantic-ai.md").read_text()
    for reason in DIFFERENCES:
        assert reason in page, reason
    assert re.search(r"PROVIDER_NAMES", page)


@pytest.mark.parametrize("judged", CASES, indirect=True, ids=[f"{k}:{r}" for k, r in CASES])
async def test_pydantic_ais_own_response_reads_back(
    judged: tuple[str, str, ModelResponse, ModelResponse],
) -> None:
    """`from_model_response` on the response pydantic-ai built itself gives the fold's
    text, thinking (with its signature or encrypted content) and tool calls."""
    kind, recording, theirs, _ = judged
    with (REAL / recording).open("rb") as stream:
        folded = fold_message(stream)
    # OpenRouter's reasoning signature: pydantic-ai's OpenAIChatModel does not keep it.
    secrets = ("encrypted_content",) if kind == "chat" else ("signature", "encrypted_content")
    back = from_model_response(theirs)
    assert [(p.type, p.content) for p in back.content] == [
        (p.type, p.content) for p in folded.content
    ]
    assert [{k: p.options.get(k) for k in secrets} for p in back.content] == [
        {k: p.options.get(k) for k in secrets} for p in folded.content
    ]
    calls = [(c.name, c.arguments) for c in back.tool_calls]
    if recording not in _STREAMED_ARGS:
        assert calls == [(c.name, c.arguments) for c in folded.tool_calls]
    assert back.stop_reason == folded.stop_reason
    if kind == "bedrock":
        # Nova's code execution and Claude's redacted reasoning: the Converse blocks whole.
        assert [p.options for p in back.content if p.type == "unsupported"] == [
            p.options for p in folded.content if p.type == "unsupported"
        ]
