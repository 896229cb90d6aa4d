"""The follow-up requests langchain and pydantic-ai build from their own messages pass
`streamfold serve`'s request checks, as they pass the real APIs.

Each library's own chat model reads a recorded answer holding tool calls (with thinking
and its signature, or reasoning items with encrypted content) from a real serve, then sends
the whole history back with a result for each call: the server must answer it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from server_support import serve_in_thread
from support import REAL

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
from streamfold.serve import create_app

pytestmark = [
    pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning"),
    pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning"),
    # langchain-anthropic's own note on a recorded block it does not know; not ours.
    pytest.mark.filterwarnings("ignore:Received unexpected tool content block:UserWarning"),
]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


def _pick(rec: str) -> dict[str, str]:
    return {"x-streamfold-recording": rec}


# --- langchain --------------------------------------------------------------------------

WEATHER_TOOL = {  # sent with each request: the tool definitions are checked too
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}

LANGCHAIN = [
    ("anthropic", "anthropic/thinking-then-tool-use.sse", True),
    ("chat", "openai-chat/tool-calls-parallel.sse", True),
    ("responses", "openai-responses/function-call-reasoning-usage.sse", True),
    ("responses", "openai-responses/phase-reasoning-function-call.sse", True),
    # (langchain-openai cannot add up this one's streamed chunks: read whole)
    ("responses", "openai-responses/reasoning-encrypted-parallel-function-calls.sse", False),
    # Items sent back without what the SDK types require but the API fills in itself: a
    # custom tool's result as a function_call_output, an image generation call without its
    # `result` and `status`, a code interpreter call without its `outputs`.
    ("responses", "openai-responses/custom-tool-call.sse", False),
    ("responses", "openai-responses/image-generation-partial-images.sse", False),
    ("responses", "openai-responses/code-interpreter-reasoning.sse", False),
]


def _langchain_model(base_url: str, api: str, rec: str, streaming: bool) -> Any:
    if api == "anthropic":
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(  # type: ignore[call-arg]
            model="claude-test",
            base_url=base_url,
            api_key="test",
            max_retries=0,
            streaming=streaming,
            default_headers=_pick(rec),
        )
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="gpt-test",
        base_url=f"{base_url}/v1",
        api_key="test",  # type: ignore[arg-type]
        max_retries=0,
        streaming=streaming,
        use_responses_api=api == "responses",
        default_headers=_pick(rec),
    )


@pytest.mark.parametrize(("api", "rec", "streaming"), LANGCHAIN)
def test_langchains_follow_up_is_accepted(
    base_url: str, api: str, rec: str, streaming: bool
) -> None:
    pytest.importorskip("langchain_anthropic" if api == "anthropic" else "langchain_openai")
    from langchain_core.messages import HumanMessage, ToolMessage

    model = _langchain_model(base_url, api, rec, streaming).bind_tools([WEATHER_TOOL])
    question = HumanMessage("What is the weather?")
    answer = model.invoke([question])
    results = [ToolMessage("sunny", tool_call_id=call["id"]) for call in answer.tool_calls]
    follow_up = model.invoke([question, answer, *results])  # refused: BadRequestError
    # The same recording, read again (each of these holds tool calls or server items).
    assert follow_up.content == answer.content and follow_up.tool_calls == answer.tool_calls
    assert answer.tool_calls or len(answer.content) > 1


# --- pydantic-ai ------------------------------------------------------------------------

PYDANTIC_AI = [
    ("anthropic", "anthropic/thinking-then-tool-use.sse"),
    ("chat", "openai-chat/tool-calls-parallel.sse"),
    ("responses", "openai-responses/reasoning-encrypted-parallel-function-calls.sse"),
    ("responses", "openai-responses/phase-reasoning-function-call.sse"),
    ("google", "gemini/function-call-thought-signature.sse"),
]


def _pydantic_ai_model(base_url: str, api: str, rec: str) -> tuple[Any, Any]:
    """The model and its SDK client (closed by the test: its sockets are not left to the
    garbage collector)."""
    if api == "anthropic":
        import anthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        client = anthropic.AsyncAnthropic(
            base_url=base_url, api_key="test", max_retries=0, default_headers=_pick(rec)
        )
        provider = AnthropicProvider(anthropic_client=client)
        return AnthropicModel("claude-test", provider=provider), client.close
    if api == "google":
        from google import genai
        from google.genai import types
        from pydantic_ai.models.google import GoogleModel
        from pydantic_ai.providers.google import GoogleProvider

        options = types.HttpOptions(base_url=base_url, headers=_pick(rec))
        google = genai.Client(api_key="test", http_options=options)
        return GoogleModel("gemini-test", provider=GoogleProvider(client=google)), google.aio.aclose
    import openai
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    openai_client = openai.AsyncOpenAI(
        base_url=f"{base_url}/v1", api_key="test", max_retries=0, default_headers=_pick(rec)
    )
    provider = OpenAIProvider(openai_client=openai_client)
    if api == "chat":
        return OpenAIChatModel("gpt-test", provider=provider), openai_client.close
    return OpenAIResponsesModel("gpt-test", provider=provider), openai_client.close


@pytest.mark.parametrize(("api", "rec"), PYDANTIC_AI)
async def test_pydantic_ais_follow_up_is_accepted(base_url: str, api: str, rec: str) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import ModelRequest, ToolCallPart, ToolReturnPart
    from pydantic_ai.direct import model_request
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    function = WEATHER_TOOL["function"]
    tool = ToolDefinition(
        name=function["name"],
        description=function["description"],
        parameters_json_schema=function["parameters"],
    )
    parameters = ModelRequestParameters(function_tools=[tool], allow_text_output=True)
    model, close = _pydantic_ai_model(base_url, api, rec)
    try:
        question = ModelRequest.user_text_prompt("What is the weather?")
        answer = await model_request(model, [question], model_request_parameters=parameters)
        calls = [part for part in answer.parts if isinstance(part, ToolCallPart)]
        assert calls
        results = ModelRequest(
            parts=[
                ToolReturnPart(tool_name=c.tool_name, content="sunny", tool_call_id=c.tool_call_id)
                for c in calls
            ]
        )
        history = [question, answer, results]
        follow_up = await model_request(model, history, model_request_parameters=parameters)
        assert any(isinstance(part, ToolCallPart) for part in follow_up.parts)
    finally:
        await close()
