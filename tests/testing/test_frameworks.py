"""The replay transports under the frameworks that take an httpx client: pydantic-ai's
Agent (OpenAIChatModel, AnthropicModel) and LangChain's ChatOpenAI / ChatAnthropic, each
through a two-step tool loop: the tool called, its result sent, the final answer."""

from __future__ import annotations

from typing import Any

import pytest
from support import REAL

from streamfold.testing import (
    AsyncReplayTransport,
    Match,
    MessageAnswer,
    ReplayTransport,
    Scenario,
    Turn,
)

httpx2 = pytest.importorskip("httpx2")


def _loop(first: str, tool: str, api: str) -> Scenario:
    """The model calls `tool` (a recording), then answers from its result."""
    return Scenario(
        [
            Turn(
                name="calls the tool",
                match=Match(api=api, tool_result=False, tools=[tool]),  # type: ignore[arg-type]
                recording=first,
            ),
            Turn(
                name="answers",
                match=Match(api=api, tool_result=tool),  # type: ignore[arg-type]
                message=MessageAnswer(text=f"The tool {tool} said: done."),
            ),
        ],
        root=REAL,
    )


# --- pydantic-ai ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
async def test_pydantic_ai_agent_tool_loop_over_openai_chat(stream: bool) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    scenario = _loop("openai-chat/tool-call-single-mini.sse", "get_capital", "chat")
    client = httpx2.AsyncClient(transport=AsyncReplayTransport(scenario, speed=0))
    provider = OpenAIProvider(api_key="test", http_client=client)
    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=provider))
    calls: list[str] = []

    @agent.tool_plain
    def get_capital(country: str) -> str:
        calls.append(country)
        return "London"

    if stream:
        async with agent.run_stream("What is the capital of the UK?") as run:
            output = await run.get_output()
    else:
        output = (await agent.run("What is the capital of the UK?")).output
    assert output == "The tool get_capital said: done."
    assert calls == ["UK"]
    assert scenario.used == [1, 1]


async def test_pydantic_ai_agent_tool_loop_over_anthropic() -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    scenario = _loop("anthropic/thinking-then-tool-use.sse", "fixed_version", "messages")
    client = httpx2.AsyncClient(transport=AsyncReplayTransport(scenario, speed=0))
    provider = AnthropicProvider(api_key="test", http_client=client)
    agent = Agent(AnthropicModel("claude-sonnet-5-5", provider=provider))
    calls: list[str] = []

    @agent.tool_plain
    def fixed_version() -> str:
        calls.append("called")
        return "1.2.3"

    result = await agent.run("Which version fixed the bug?")
    assert result.output == "The tool fixed_version said: done."
    assert calls == ["called"]
    assert scenario.used == [1, 1]


# --- LangChain --------------------------------------------------------------------------


def _langchain_loop(model: Any, tool: Any, question: str) -> tuple[Any, Any]:
    from langchain_core.messages import HumanMessage, ToolMessage

    bound = model.bind_tools([tool])
    history: list[Any] = [HumanMessage(question)]
    first = bound.invoke(history)
    history.append(first)
    for call in first.tool_calls:
        history.append(ToolMessage(str(tool.invoke(call["args"])), tool_call_id=call["id"]))
    return first, bound.invoke(history)


def test_langchain_chat_openai_tool_loop() -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_core.tools import tool

    @tool
    def get_capital(country: str) -> str:
        """The capital of a country."""
        return "London"

    scenario = _loop("openai-chat/tool-call-single-mini.sse", "get_capital", "chat")
    model = langchain_openai.ChatOpenAI(
        model="gpt-4o-mini",
        api_key="test",
        http_client=httpx2.Client(transport=ReplayTransport(scenario, speed=0)),
        max_retries=0,
    )
    first, answer = _langchain_loop(model, get_capital, "What is the capital of the UK?")
    assert first.tool_calls[0]["args"] == {"country": "UK"}
    assert answer.content == "The tool get_capital said: done."
    assert scenario.used == [1, 1]


async def test_langchain_chat_openai_streams_on_the_async_transport() -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    scenario = Scenario([Turn(recording="openai-chat/text-include-usage.sse")], root=REAL)
    model = langchain_openai.ChatOpenAI(
        model="gpt-4o-mini",
        api_key="test",
        http_async_client=httpx2.AsyncClient(transport=AsyncReplayTransport(scenario, speed=0)),
    )
    text = "".join([str(chunk.content) async for chunk in model.astream("Capital of Mexico?")])
    assert text == "The capital of Mexico is Mexico City."


def test_langchain_chat_anthropic_tool_loop() -> None:
    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    anthropic = pytest.importorskip("anthropic")
    from langchain_core.tools import tool

    @tool
    def fixed_version() -> str:
        """The version that fixed the bug."""
        return "1.2.3"

    scenario = _loop("anthropic/thinking-then-tool-use.sse", "fixed_version", "messages")
    model = langchain_anthropic.ChatAnthropic(
        model="claude-sonnet-5-5", api_key="test", max_tokens=1024
    )
    # ChatAnthropic takes no http_client: it builds its SDK client once, on first use, as
    # a cached property; the SDK client on the transport goes there first.
    model.__dict__["_client"] = anthropic.Anthropic(
        api_key="test",
        http_client=httpx2.Client(transport=ReplayTransport(scenario, speed=0)),
        max_retries=0,
    )
    first, answer = _langchain_loop(model, fixed_version, "Which version fixed the bug?")
    assert first.tool_calls[0]["name"] == "fixed_version"
    assert answer.content == "The tool fixed_version said: done."
    assert scenario.used == [1, 1]
