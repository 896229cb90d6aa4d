"""The replay transports under the official SDKs: openai (Chat and Responses), anthropic
and google-genai, sync and async, streaming and not, on httpx and httpx2 clients."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import REAL

from streamfold import fold_message
from streamfold.record import split_frames
from streamfold.testing import (
    AsyncReplayTransport,
    Faults,
    Match,
    MessageAnswer,
    NoTurnMatched,
    ReplayTransport,
    Scenario,
    Turn,
)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")
genai = pytest.importorskip("google.genai")

CHAT_TOOL = REAL / "openai-chat" / "tool-call-single-mini.sse"
CHAT_TEXT = REAL / "openai-chat" / "text-include-usage.sse"
MESSAGES_TEXT = REAL / "anthropic" / "text-basic.sse"
RESPONSES_TEXT = REAL / "openai-responses" / "text.sse"
GEMINI_TEXT = REAL / "gemini" / "text-2.0-flash.sse"
USER = [{"role": "user", "content": "What is the capital of the UK?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_capital",
            "parameters": {"type": "object", "properties": {"country": {"type": "string"}}},
        },
    }
]


def _text(path: Path, provider: str) -> str:
    return fold_message(path.read_bytes(), provider).text or ""


def _openai(transport: Any, *, lib: Any = httpx, retries: int = 0) -> Any:
    return openai.OpenAI(
        api_key="test",
        base_url="http://replay.test/v1",
        http_client=lib.Client(transport=transport),
        max_retries=retries,
    )


def _anthropic(transport: Any, *, retries: int = 0) -> Any:
    return anthropic.Anthropic(
        api_key="test",
        base_url="http://replay.test",
        http_client=httpx2.Client(transport=transport),
        max_retries=retries,
    )


def _scenario(*turns: Turn) -> Scenario:
    return Scenario(turns, root=REAL)


# --- the SDKs, from recordings --------------------------------------------------------


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_openai_chat_streams_and_answers_whole_on_both_http_libraries(lib: Any) -> None:
    scenario = _scenario(Turn(recording="openai-chat/text-include-usage.sse"))
    client = _openai(ReplayTransport(scenario, speed=0), lib=lib)
    whole = client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert whole.choices[0].message.content == streamed == _text(CHAT_TEXT, "openai-chat")


def test_openai_responses_stream_folds_in_the_sdk() -> None:
    scenario = _scenario(Turn(match=Match(api="responses"), recording="openai-responses/text.sse"))
    client = _openai(ReplayTransport(scenario, speed=0))
    with client.responses.stream(model="gpt-4o", input="Capital of France?") as stream:
        final = stream.get_final_response()
    assert final.output_text == _text(RESPONSES_TEXT, "openai-responses")
    assert client.responses.create(model="gpt-4o", input="x").output_text == final.output_text


def test_anthropic_sync_stream_and_message() -> None:
    scenario = _scenario(Turn(recording="anthropic/text-basic.sse"))
    client = _anthropic(ReplayTransport(scenario, speed=0))
    args: dict[str, Any] = {"model": "claude-x", "max_tokens": 64, "messages": USER}
    with client.messages.stream(**args) as stream:
        streamed = stream.get_final_message()
    whole = client.messages.create(**args)
    expected = _text(MESSAGES_TEXT, "anthropic")
    assert streamed.content[0].text == whole.content[0].text == expected


async def test_async_openai_and_anthropic_stream() -> None:
    scenario = _scenario(
        Turn(match=Match(api="chat"), recording="openai-chat/text-include-usage.sse"),
        Turn(match=Match(api="messages"), recording="anthropic/text-basic.sse"),
    )
    transport = AsyncReplayTransport(scenario, speed=0)
    oa = openai.AsyncOpenAI(
        api_key="t", base_url="http://r/v1", http_client=httpx2.AsyncClient(transport=transport)
    )
    stream = await oa.chat.completions.create(model="m", messages=USER, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == _text(CHAT_TEXT, "openai-chat")
    an = anthropic.AsyncAnthropic(
        api_key="t", base_url="http://r", http_client=httpx2.AsyncClient(transport=transport)
    )
    async with an.messages.stream(model="c", max_tokens=9, messages=USER) as s:
        message = await s.get_final_message()
    assert message.content[0].text == _text(MESSAGES_TEXT, "anthropic")
    assert scenario.used == [1, 1]


def _gemini(transport: Any, async_transport: Any) -> Any:
    from google.genai import types

    options = types.HttpOptions(
        base_url="http://replay.test",
        httpx_client=httpx2.Client(transport=transport),
        httpx_async_client=httpx2.AsyncClient(transport=async_transport),
    )
    return genai.Client(api_key="test", http_options=options)


async def test_google_genai_sync_and_async_stream_and_not() -> None:
    scenario = _scenario(Turn(recording="gemini/text-2.0-flash.sse"))
    client = _gemini(ReplayTransport(scenario, speed=0), AsyncReplayTransport(scenario, speed=0))
    expected = _text(GEMINI_TEXT, "gemini")
    whole = client.models.generate_content(model="gemini-2.0-flash", contents="Capital?")
    streamed = "".join(
        c.text or ""
        for c in client.models.generate_content_stream(model="gemini-2.0-flash", contents="?")
    )
    awhole = await client.aio.models.generate_content(model="gemini-2.0-flash", contents="?")
    astream = await client.aio.models.generate_content_stream(
        model="gemini-2.0-flash", contents="?"
    )
    astreamed = "".join([c.text or "" async for c in astream])
    assert whole.text == streamed == awhole.text == astreamed == expected
    assert scenario.used == [4]


# --- scenarios: the conversation ------------------------------------------------------


def test_a_two_step_tool_loop_through_the_openai_sdk() -> None:
    scenario = _scenario(
        Turn(
            name="asks for the tool",
            match=Match(user="capital of the UK", tool_result=False, tools=["get_capital"]),
            recording="openai-chat/tool-call-single-mini.sse",
        ),
        Turn(
            name="answers from the result",
            match=Match(tool_result="get_capital"),
            message=MessageAnswer(text="London is the capital of the UK."),
        ),
    )
    client = _openai(ReplayTransport(scenario, speed=0))
    messages: list[Any] = list(USER)
    first = client.chat.completions.create(model="m", messages=messages, tools=TOOLS, stream=True)
    chunks = list(first)
    call = fold_message(
        b"".join(f"data: {c.model_dump_json()}\n\n".encode() for c in chunks), "openai-chat"
    ).tool_calls[0]
    assert (call.name, call.arguments) == ("get_capital", {"country": "UK"})
    messages.append(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": '{"country": "UK"}'},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call.call_id, "content": "London"})
    second = client.chat.completions.create(model="m", messages=messages, tools=TOOLS, stream=True)
    answer = "".join(c.choices[0].delta.content or "" for c in second if c.choices)
    assert answer == "London is the capital of the UK."
    assert scenario.used == [1, 1]


def test_a_broken_follow_up_gets_the_apis_400_as_from_serve() -> None:
    # A tool result that answers no call: the real API refuses it, so does the replay.
    scenario = _scenario(Turn(message=MessageAnswer(text="never")))
    client = _openai(ReplayTransport(scenario, speed=0))
    bad = [*USER, {"role": "tool", "tool_call_id": "call_nowhere", "content": "x"}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=bad)
    assert "must be a response to a preceding message with 'tool_calls'" in str(caught.value)


# --- a miss -----------------------------------------------------------------------------


MISS_SCENARIO = (
    Turn(name="weather", match=Match(user="weather"), recording="anthropic/text-basic.sse"),
    Turn(match=Match(api="messages", tool_result=True), recording="anthropic/text-basic.sse"),
)


def _check_miss_message(text: str, api: str, model: str, index: int = 0) -> None:
    assert f"request #{index} to {api!r}, model {model!r}" in text
    assert "last user message 'What is the capital of the UK?'" in text
    assert "turn 0 ('weather'): user: expected text holding 'weather'" in text


def test_a_miss_fails_the_sdk_call_at_once_with_the_nearest_turns_and_why() -> None:
    transport = ReplayTransport(_scenario(*MISS_SCENARIO), speed=0)
    started = time.monotonic()
    with pytest.raises(anthropic.NotFoundError) as caught:
        # Retries allowed: a miss is not retried (the test would wait seconds if it were).
        _anthropic(transport, retries=2).messages.create(
            model="claude-x", max_tokens=8, messages=USER
        )
    _check_miss_message(str(caught.value), "messages", "claude-x")
    assert "turn 1: tool_result: expected a tool result, got none" in str(caught.value)
    with pytest.raises(openai.NotFoundError) as again:
        _openai(transport, retries=2).chat.completions.create(model="gpt", messages=USER)
    assert time.monotonic() - started < 2
    _check_miss_message(str(again.value), "chat", "gpt", index=1)
    assert "turn 1: api: expected 'messages', got 'chat'" in str(again.value)
    assert [miss.request.index for miss in transport.misses] == [0, 1]
    with pytest.raises(NoTurnMatched, match="capital of the UK"):
        transport.check()


async def test_a_miss_fails_the_async_sdk_stream_with_the_message() -> None:
    transport = AsyncReplayTransport(_scenario(*MISS_SCENARIO), speed=0)
    client = anthropic.AsyncAnthropic(
        api_key="t", base_url="http://r", http_client=httpx2.AsyncClient(transport=transport)
    )
    with pytest.raises(anthropic.NotFoundError) as caught:
        async with client.messages.stream(model="claude-x", max_tokens=8, messages=USER) as s:
            await s.get_final_message()
    _check_miss_message(str(caught.value), "messages", "claude-x")


def test_on_miss_raise_reaches_the_test_itself_or_as_the_cause() -> None:
    # openai lets an exception that is no HTTP error through; anthropic wraps it (and
    # would retry it: max_retries=0).
    scenario = _scenario(*MISS_SCENARIO)
    transport = ReplayTransport(scenario, speed=0, on_miss="raise")
    with pytest.raises(NoTurnMatched) as caught:
        _openai(transport, retries=2).chat.completions.create(model="gpt", messages=USER)
    _check_miss_message(str(caught.value), "chat", "gpt")
    with pytest.raises(anthropic.APIConnectionError) as wrapped:
        _anthropic(transport).messages.create(model="claude-x", max_tokens=8, messages=USER)
    assert isinstance(wrapped.value.__cause__, NoTurnMatched)
    assert len(transport.misses) == 2


# --- faults -----------------------------------------------------------------------------


def test_a_429_turn_is_retried_by_the_openai_sdk_then_the_next_folds() -> None:
    scenario = _scenario(
        Turn(match=Match(user="UK"), times=1, faults=Faults(status=429, retry_after=0.01)),
        Turn(match=Match(user="UK"), recording="openai-chat/text-include-usage.sse"),
    )
    client = _openai(ReplayTransport(scenario, speed=0), retries=1)
    raw = client.chat.completions.with_raw_response.create(model="m", messages=USER)
    assert raw.retries_taken == 1
    assert raw.parse().choices[0].message.content == _text(CHAT_TEXT, "openai-chat")
    assert scenario.used == [1, 1]


def test_a_429_turn_is_retried_by_the_anthropic_sdk_then_the_next_streams() -> None:
    scenario = _scenario(
        Turn(times=1, faults=Faults(status=429, retry_after=0.01)),
        Turn(recording="anthropic/text-basic.sse"),
    )
    client = _anthropic(ReplayTransport(scenario, speed=0), retries=1)
    with client.messages.stream(model="c", max_tokens=9, messages=USER) as stream:
        message = stream.get_final_message()
    assert message.content[0].text == _text(MESSAGES_TEXT, "anthropic")
    assert scenario.used == [1, 1]


@pytest.mark.parametrize(
    ("status", "error"),
    [(429, "RateLimitError"), (500, "InternalServerError"), (529, "APIStatusError")],
)
def test_a_status_fault_without_retries_is_the_apis_own_error(status: int, error: str) -> None:
    scenario = _scenario(Turn(faults=Faults(status=status, error_message="slow down")))
    with pytest.raises(anthropic.APIStatusError) as caught:
        _anthropic(ReplayTransport(scenario, speed=0)).messages.create(
            model="c", max_tokens=9, messages=USER
        )
    assert caught.value.status_code == status
    assert isinstance(caught.value, getattr(anthropic, error))
    expected = {429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}[status]
    assert caught.value.body == {
        "type": "error",
        "error": {"type": expected, "message": "slow down"},
    }


def test_a_stream_cut_after_events_breaks_the_openai_sdks_iteration() -> None:
    scenario = _scenario(
        Turn(recording="openai-chat/text-include-usage.sse", faults=Faults(cut_after_events=3))
    )
    client = _openai(ReplayTransport(scenario, speed=0))
    stream = client.chat.completions.create(model="m", messages=USER, stream=True)
    seen = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream:
            seen.append(chunk)
    assert len(seen) == 3


def test_anthropics_overloaded_error_event_mid_stream_is_the_sdks_error() -> None:
    faults = Faults(cut_after_events=3, error_frame="overloaded_error", error_message="busy")
    scenario = _scenario(Turn(recording="anthropic/text-basic.sse", faults=faults))
    client = _anthropic(ReplayTransport(scenario, speed=0))
    events = []
    with (
        pytest.raises(anthropic.APIStatusError) as caught,
        client.messages.stream(model="c", max_tokens=9, messages=USER) as stream,
    ):
        events.extend(stream)
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
    }
    # message_start, content_block_start, then a ping (the SDK yields it not): the error.
    assert [event.type for event in events] == ["message_start", "content_block_start"]


def test_a_responses_failed_event_folds_as_the_providers_error() -> None:
    faults = Faults(cut_after_events=4, error_frame="response.failed")
    scenario = _scenario(Turn(recording="openai-responses/text.sse", faults=faults))
    with httpx.Client(transport=ReplayTransport(scenario, speed=0)) as client:
        body = {"model": "m", "input": "x", "stream": True}
        data = client.post("http://r/v1/responses", json=body).content
    assert data.count(b"response.failed") == 2  # its event name and its type
    assert fold_message(data, "openai-responses").status == "error"


def test_a_stream_ended_short_folds_as_incomplete() -> None:
    recorded = MESSAGES_TEXT.read_bytes()
    cut = len(b"".join(split_frames(recorded, "sse")[:4])) + 10  # inside the fifth event
    faults = Faults(cut_after_bytes=cut, cut="end")
    scenario = _scenario(Turn(recording="anthropic/text-basic.sse", faults=faults))
    transport = ReplayTransport(scenario, speed=0)
    with httpx.Client(transport=transport) as client:
        body = {"model": "c", "max_tokens": 9, "messages": USER, "stream": True}
        data = client.post("http://r/v1/messages", json=body).content
    assert data == recorded[:cut]
    assert fold_message(data, "anthropic").status == "incomplete"


def test_transport_faults_apply_to_every_turn_and_a_turns_own_win() -> None:
    scenario = _scenario(
        Turn(match=Match(user="first"), recording="openai-chat/text-include-usage.sse"),
        Turn(faults=Faults(status=500), recording="openai-chat/text-include-usage.sse"),
    )
    client = _openai(ReplayTransport(scenario, speed=0, faults="status=503"))
    with pytest.raises(openai.APIStatusError) as first:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "first"}])
    with pytest.raises(openai.APIStatusError) as second:
        client.chat.completions.create(model="m", messages=USER)
    assert (first.value.status_code, second.value.status_code) == (503, 500)


# --- pacing -----------------------------------------------------------------------------


async def test_the_async_transport_really_waits_and_speed_scales_the_waits() -> None:
    faults = Faults(ttft=0.3, stall=0.3, stall_after_events=2)
    scenario = _scenario(Turn(recording="anthropic/text-basic.sse", faults=faults))
    body = {"model": "c", "max_tokens": 9, "messages": USER, "stream": True}
    timings = []
    for speed in (1.0, 0.0):
        transport = AsyncReplayTransport(scenario, speed=speed)
        async with httpx.AsyncClient(transport=transport) as client:
            started = time.monotonic()
            async with client.stream("POST", "http://r/v1/messages", json=body) as response:
                arrivals = [time.monotonic() - started async for _ in response.aiter_raw()]
        timings.append(arrivals)
    slow, fast = timings
    assert slow[0] >= 0.3 and slow[2] - slow[1] >= 0.3
    assert fast[-1] < 0.25  # speed 0: no wait at all


def test_tokens_per_second_paces_the_sync_transport() -> None:
    faults = Faults(tokens_per_second=50)
    scenario = _scenario(Turn(recording="openai-chat/text-include-usage.sse", faults=faults))
    client = _openai(ReplayTransport(scenario))
    events = CHAT_TEXT.read_bytes().count(b"\n\n")
    started = time.monotonic()
    list(client.chat.completions.create(model="m", messages=USER, stream=True))
    assert time.monotonic() - started >= (events - 1) / 50


def test_a_non_streaming_answer_waits_and_its_cut_breaks_the_sdks_read() -> None:
    scenario = _scenario(
        Turn(times=1, recording="openai-chat/text-include-usage.sse", faults=Faults(ttft=0.3)),
        Turn(recording="openai-chat/text-include-usage.sse", faults=Faults(cut_after_bytes=50)),
    )
    client = _openai(ReplayTransport(scenario))
    started = time.monotonic()
    whole = client.chat.completions.create(model="m", messages=USER)
    assert time.monotonic() - started >= 0.3
    assert whole.choices[0].message.content == _text(CHAT_TEXT, "openai-chat")
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=USER)


def test_a_recordings_own_timing_paces_the_replay(tmp_path: Path) -> None:
    data = CHAT_TEXT.read_bytes()
    (tmp_path / "chat.sse").write_bytes(data)
    # Two chunks: the first half at once, the rest 0.4 s later (as if so recorded).
    half = len(data) // 2
    marks = {"version": 1, "chunks": [[half, 0.0], [len(data), 0.4]]}
    (tmp_path / "chat.sse.timing.json").write_text(json.dumps(marks))
    scenario = Scenario([Turn(recording="chat.sse")], root=tmp_path)
    body = {"model": "m", "messages": USER, "stream": True}
    seconds = []
    for speed in (1.0, 4.0):
        with httpx.Client(transport=ReplayTransport(scenario, speed=speed)) as client:
            started = time.monotonic()
            with client.stream("POST", "http://r/v1/chat/completions", json=body) as response:
                arrivals = [(time.monotonic() - started, len(c)) for c in response.iter_raw()]
        assert [size for _, size in arrivals] == [half, len(data) - half]
        seconds.append(arrivals[1][0])
    assert seconds[0] >= 0.4  # as recorded
    assert 0.1 <= seconds[1] < 0.4  # four times faster


def test_claude_on_bedrock_through_the_anthropic_sdks_bedrock_client() -> None:
    # AnthropicBedrock is an httpx2 client (botocore's Bedrock clients are not: use serve).
    scenario = _scenario(Turn(match=Match(api="invoke"), recording="anthropic/text-basic.sse"))
    client = anthropic.AnthropicBedrock(
        aws_access_key="test",
        aws_secret_key="test",
        aws_region="us-east-1",
        http_client=httpx2.Client(transport=ReplayTransport(scenario, speed=0)),
        max_retries=0,
    )
    args: dict[str, Any] = {"model": "anthropic.claude-x", "max_tokens": 9, "messages": USER}
    with client.messages.stream(**args) as stream:
        streamed = stream.get_final_message()
    whole = client.messages.create(**args)
    expected = _text(MESSAGES_TEXT, "anthropic")
    assert streamed.content[0].text == whole.content[0].text == expected
    assert scenario.used == [2]


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_the_sdks_wait_the_retry_after_a_429_turn_asks(sdk: str) -> None:
    # retry-after-ms (with retry-after) is what both SDKs read first: a 0.6 s wait, not
    # their own backoff (0.5 s at most for a first retry, with jitter below it).
    scenario = _scenario(
        Turn(times=1, faults=Faults(status=429, retry_after=0.6)),
        Turn(message=MessageAnswer(text="ok")),
    )
    transport = ReplayTransport(scenario, speed=0)
    started = time.monotonic()
    if sdk == "openai":
        answer = _openai(transport, retries=1).chat.completions.create(model="m", messages=USER)
        text = answer.choices[0].message.content
    else:
        message = _anthropic(transport, retries=1).messages.create(
            model="c", max_tokens=9, messages=USER
        )
        text = message.content[0].text
    assert text == "ok"
    assert time.monotonic() - started >= 0.6
