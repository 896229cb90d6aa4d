"""The SDKs' stream helpers (`chat.completions.stream()`, `responses.stream()`,
`messages.stream()`) fold: their events, read from `streamfold serve` by the real SDK, give
the Message the recording gives, and it agrees with the helper's own final object. A
helper's manager given unentered is a UsageError that says to enter it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from server_support import serve_in_thread
from support import REAL, read

from serve.test_serve import (
    ANTHROPIC,
    CHAT,
    RESPONSES,
    _anthropic_check,
    _chat_check,
    _pick,
    _responses_check,
    assert_same_fold,
)
from streamfold import UsageError, afold_message, fold_message

pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
from streamfold.serve import create_app  # noqa: E402

pytestmark = [
    # The non-beta anthropic SDK types do not know beta blocks (mcp_tool_use...); dumping
    # such an event warns but keeps every field.
    pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning"),
]

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


@pytest.fixture(scope="module")
def chat_client(base_url: str) -> Iterator[Any]:
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key="test", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def claude(base_url: str) -> Iterator[Any]:
    with anthropic.Anthropic(base_url=base_url, api_key="test", max_retries=0) as client:
        yield client


def _without_end_marker(message: Any) -> Any:
    # The SDK swallows `data: [DONE]`, the Chat Completions stream's end marker.
    metadata = {k: v for k, v in message.metadata.items() if k != "end_marker"}
    return message.model_copy(update={"metadata": metadata})


@pytest.mark.parametrize("rec", CHAT)
def test_chat_completions_stream_helper_events_fold(chat_client: Any, rec: str) -> None:
    direct = fold_message(read(rec))
    with chat_client.chat.completions.stream(
        model="gpt-test", messages=HI, extra_headers=_pick(rec)
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    # The helper's own events, not the raw chunks: a ChunkEvent wraps each chunk, and the
    # others (content.delta, tool_calls.function.arguments.done...) repeat them.
    kinds = {event.type for event in events}
    assert "chunk" in kinds and len(kinds) > 1, kinds
    folded = fold_message(events)
    assert folded.metadata["end_marker"] is False
    assert_same_fold(_without_end_marker(folded), _without_end_marker(direct))
    _chat_check(final, folded)


@pytest.mark.parametrize("rec", RESPONSES)
def test_responses_stream_helper_events_fold(chat_client: Any, rec: str) -> None:
    direct = fold_message(read(rec))
    with chat_client.responses.stream(
        model="gpt-test", input="hi", extra_headers=_pick(rec)
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    folded = fold_message(events)
    assert_same_fold(folded, direct)
    _responses_check(final, folded)


@pytest.mark.parametrize("rec", ANTHROPIC)
def test_anthropic_messages_stream_helper_events_fold(claude: Any, rec: str) -> None:
    direct = fold_message(read(rec))
    with claude.messages.stream(
        model="claude-test", max_tokens=100, messages=HI, extra_headers=_pick(rec)
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    # The helper's synthesized events (text, thinking, input_json...) are among them.
    assert {event.type for event in events} & {"text", "thinking", "input_json"}
    folded = fold_message(events)
    assert_same_fold(folded, direct)
    _anthropic_check(final, folded)


async def test_chat_completions_stream_helper_folds_with_afold(base_url: str) -> None:
    rec = CHAT[0]
    direct = fold_message(read(rec))
    async with (
        openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="test", max_retries=0) as client,
        client.chat.completions.stream(
            model="gpt-test", messages=HI, extra_headers=_pick(rec)
        ) as stream,
    ):
        folded = await afold_message(stream)
    assert_same_fold(_without_end_marker(folded), _without_end_marker(direct))


def test_an_unentered_stream_manager_is_a_usage_error_naming_it(
    chat_client: Any, claude: Any
) -> None:
    managers = [
        chat_client.chat.completions.stream(model="gpt-test", messages=HI),
        chat_client.responses.stream(model="gpt-test", input="hi"),
        claude.messages.stream(model="claude-test", max_tokens=10, messages=HI),
    ]
    for manager in managers:
        name = type(manager).__name__
        with pytest.raises(UsageError, match=rf"got the SDK's {name} before it was entered"):
            fold_message(manager)
