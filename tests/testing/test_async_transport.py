"""The async replay transport keeps the event loop free: the answer (the request check,
the turn's choice, a recording read from disk) is worked out in a worker thread, on
asyncio and on trio, with its errors and misses as they were."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import httpx
import pytest
import sniffio
from support import REAL

from streamfold import fold_message
from streamfold.testing import (
    AsyncReplayTransport,
    Match,
    MessageAnswer,
    NoTurnMatched,
    Scenario,
    Turn,
)
from streamfold.web import api_requests

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")

USER = [{"role": "user", "content": "What is the capital of the UK?"}]
MESSAGES_TEXT = REAL / "anthropic" / "text-basic.sse"


async def _longest_gap_while(work: Any) -> tuple[float, float]:
    """(the seconds `work()` took, the longest gap between 1 ms ticks of another task
    meanwhile): a loop that `work` blocks ticks once, after it."""
    gaps: list[float] = []
    done = anyio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(tick)
        await anyio.sleep(0.02)
        gaps.clear()
        started = time.perf_counter()
        await work()
        took = time.perf_counter() - started
        done.set()
    return took, max(gaps, default=took)


async def test_the_loop_keeps_ticking_while_a_first_request_is_checked() -> None:
    # The check's schema is built on a first request, and a body of many blocks takes a
    # while to check: together a few hundred ms that a loop running the check would lose
    # whole (its longest gap about the request's time; off the loop, a small part of it).
    api_requests._anthropic.cache_clear()
    blocks = [{"type": "text", "text": f"block {n}"} for n in range(20_000)]
    message = {"role": "user", "content": blocks}
    body = {"model": "claude-x", "max_tokens": 64, "stream": True, "messages": [message]}
    content = json.dumps(body).encode()
    scenario = Scenario([Turn(recording="anthropic/text-basic.sse")], root=REAL)
    transport = AsyncReplayTransport(scenario, speed=0)
    async with httpx2.AsyncClient(transport=transport, base_url="http://replay.test") as client:

        async def request() -> None:
            response = await client.post("/v1/messages", content=content)
            assert response.status_code == 200, response.text[:300]
            assert fold_message(response.content, "anthropic").text == _text()

        took, gap = await _longest_gap_while(request)
    assert took > 0.05, f"the check took {took * 1000:.0f} ms: too quick to tell"
    assert gap < took / 2, f"longest gap {gap * 1000:.0f} ms in a {took * 1000:.0f} ms request"


def _text() -> str:
    return fold_message(MESSAGES_TEXT.read_bytes(), "anthropic").text or ""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_anthropic_and_openai_sdks_stream_on_asyncio_and_trio(backend: str) -> None:
    # anyio.run, not the anyio plugin: pytest-asyncio's auto mode would run the test on
    # asyncio whatever the plugin's backend said.
    scenario = Scenario(
        [
            Turn(match=Match(api="messages"), recording="anthropic/text-basic.sse"),
            Turn(match=Match(api="responses"), message=MessageAnswer(text="Paris.")),
        ],
        root=REAL,
    )
    transport = AsyncReplayTransport(scenario, speed=0)

    async def app() -> None:
        assert sniffio.current_async_library() == backend
        an = anthropic.AsyncAnthropic(
            api_key="t", base_url="http://r", http_client=httpx2.AsyncClient(transport=transport)
        )
        async with an.messages.stream(model="c", max_tokens=9, messages=USER) as stream:
            message = await stream.get_final_message()
        assert message.content[0].text == _text()
        http = httpx.AsyncClient(transport=transport)
        oa = openai.AsyncOpenAI(api_key="t", base_url="http://r/v1", http_client=http)
        response = await oa.responses.create(model="gpt-4o", input="Capital of France?")
        assert response.output_text == "Paris."
        await an.close()
        await oa.close()

    anyio.run(app, backend=backend)
    assert scenario.used == [1, 1]


async def test_concurrent_requests_meet_the_turns_in_the_order_they_came() -> None:
    # Turns used once each, matching any request: the n-th request to arrive gets turn n,
    # though each answer is worked out in a worker thread of its own.
    turns = [Turn(message=MessageAnswer(text=f"answer {n}"), times=1) for n in range(12)]
    transport = AsyncReplayTransport(Scenario(turns), speed=0)
    answers: dict[int, str] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://r") as client:

        async def ask(n: int) -> None:
            body = {"model": "m", "messages": [{"role": "user", "content": f"q{n}"}]}
            response = await client.post("/v1/chat/completions", json=body)
            answers[n] = response.json()["choices"][0]["message"]["content"]

        async with anyio.create_task_group() as tasks:
            for n in range(12):
                tasks.start_soon(ask, n)
                await anyio.sleep(0)  # each request reaches the transport before the next
    assert answers == {n: f"answer {n}" for n in range(12)}


async def test_a_miss_raised_by_the_async_transport_is_the_same_error() -> None:
    scenario = Scenario([Turn(match=Match(user="weather"), message=MessageAnswer(text="x"))])
    transport = AsyncReplayTransport(scenario, speed=0, on_miss="raise")
    client = openai.AsyncOpenAI(
        api_key="t", base_url="http://r/v1", http_client=httpx.AsyncClient(transport=transport)
    )
    with pytest.raises(NoTurnMatched) as caught:
        await client.chat.completions.create(model="gpt", messages=USER)
    assert "last user message 'What is the capital of the UK?'" in str(caught.value)
    assert transport.misses == [caught.value]
    refused = await httpx.AsyncClient(transport=transport).post(
        "http://r/v1/chat/completions", json={"model": "gpt", "messages": "nope"}
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["param"].startswith("messages")


def test_the_scenario_models_are_importable_from_the_package() -> None:
    # A scenario written in Python names them all (a message's tool calls: ToolCallAnswer).
    import streamfold.testing
    from streamfold.testing import scenario

    models = set(scenario.__all__) - {"API_NAMES"}
    assert models <= set(streamfold.testing.__all__)
    for name in models:
        assert getattr(streamfold.testing, name) is getattr(scenario, name)
