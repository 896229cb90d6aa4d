"""The adapters to other libraries' types: every recording there and back.

What comes back from `from_x(to_x(message))` must equal the recording's Message with the
losses the adapter's docstring lists applied (the functions `*_kept` below, one per
target): a loss nobody listed fails. The target libraries' own models validate every
object on the way (the adapters build with model_validate), and `from_x` reads the
object's JSON dict as it reads the object.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from pydantic import TypeAdapter
from pydantic_ai.messages import ModelResponse
from support import ALL_RECORDINGS, read

import streamfold
from streamfold import ContentPart, Message, ToolCall, Usage
from streamfold.interop import langchain as to_langchain
from streamfold.interop import pydantic_ai as to_pydantic_ai
from streamfold.interop._common import mark_utterances
from streamfold.parts import INFERRED_OPTION

MESSAGES = {rel: streamfold.fold_message(read(rel)) for rel in ALL_RECORDINGS}


def _unmarked(part: ContentPart) -> ContentPart:
    options = {k: v for k, v in part.options.items() if k not in ("utterance", INFERRED_OPTION)}
    return part.model_copy(update={"options": options})


def _message(
    order: list[ContentPart | ToolCall],
    *,
    status: Any,
    stop_reason: Any,
    raw_stop_reason: Any,
    usage: Usage | None,
    metadata: dict[str, Any],
) -> Message:
    """The Message a reader builds: calls indexed by place, text marked by the fold's rule."""
    content: list[ContentPart] = []
    calls: list[ToolCall] = []
    for i, item in enumerate(mark_utterances(order, status, stop_reason)):
        if isinstance(item, ToolCall):
            calls.append(item.model_copy(update={"index": i}))
        else:
            content.append(item)
    return Message(
        role="assistant",
        content=content,
        tool_calls=calls,
        status=status,
        stop_reason=stop_reason,
        raw_stop_reason=raw_stop_reason,
        usage=usage,
        metadata=metadata,
    )


def _zeroed(usage: Usage | None, *names: str) -> Usage | None:
    """The usage as a total, with the counts `names` reading 0 when not reported."""
    if usage is None:
        return None
    zeros = {name: getattr(usage, name) or 0 for name in names}
    return usage.model_copy(update={**zeros, "cumulative": True})


# --- the narration rule the readers share ---------------------------------------------------


@pytest.mark.parametrize("rel", ALL_RECORDINGS)
def test_mark_utterances_is_the_folds_rule(rel: str) -> None:
    # The readers mark text by this function; on every recording it gives the fold's markers.
    message = MESSAGES[rel]
    order = message.stream_order()
    unmarked = [
        _unmarked(x) if isinstance(x, ContentPart) and x.options.get(INFERRED_OPTION) else x
        for x in order
    ]
    assert mark_utterances(unmarked, message.status, message.stop_reason) == order


# --- pydantic-ai -----------------------------------------------------------------------------


def pydantic_ai_kept(message: Message) -> Message:
    """Lost: usage counts not reported read 0; the usage is a total."""
    names = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
             "reasoning_tokens")  # fmt: skip
    return message.model_copy(update={"usage": _zeroed(message.usage, *names)})


@pytest.mark.parametrize("rel", ALL_RECORDINGS)
def test_pydantic_ai_round_trip(rel: str) -> None:
    message = MESSAGES[rel]
    response = to_pydantic_ai.to_model_response(message)
    assert isinstance(response, ModelResponse)
    back = to_pydantic_ai.from_model_response(response)
    assert back == pydantic_ai_kept(message)
    as_json = TypeAdapter(ModelResponse).dump_python(response, mode="json")
    assert to_pydantic_ai.from_model_response(json.loads(json.dumps(as_json))) == back


def test_pydantic_ai_parts_are_the_ones_pydantic_ai_users_expect() -> None:
    response = to_pydantic_ai.to_model_response(
        MESSAGES["anthropic/web-search-thinking-citations.sse"]
    )
    kinds = [part.part_kind for part in response.parts]
    assert kinds[:4] == ["thinking", "builtin-tool-call", "builtin-tool-return", "text"]
    thinking, search, found, text = response.parts[:4]
    assert thinking.signature  # type: ignore[union-attr]
    assert search.tool_name == found.tool_name == "web_search"  # type: ignore[union-attr]
    assert search.args == {"query": "San Francisco weather today"}  # type: ignore[union-attr]
    assert search.tool_call_id == found.tool_call_id  # type: ignore[union-attr]
    assert text.provider_details == {"utterance": "narration", INFERRED_OPTION: True}
    answers = [p for p in response.parts if p.part_kind == "text"]
    assert answers[-1].provider_details == {"utterance": "answer", INFERRED_OPTION: True}
    cited = next(p for p in answers if p.citations)
    assert cited.citations[0].sources[0].kind == "web"  # type: ignore[union-attr]
    assert cited.citations[0].sources[0].excerpts  # the cited text  # type: ignore[union-attr]
    assert response.finish_reason == "stop"
    assert response.provider_details is not None
    assert response.provider_details["finish_reason"] == "end_turn"
    assert response.usage.input_tokens == 22397

    calls = to_pydantic_ai.to_model_response(MESSAGES["openai-chat/tool-calls-parallel.sse"])
    tool_calls = [p for p in calls.parts if p.part_kind == "tool-call"]
    assert len(tool_calls) == 2 and calls.finish_reason == "tool_call"


# --- LangChain -------------------------------------------------------------------------------


def langchain_kept(message: Message) -> Message:
    """Lost: input and output counts not reported read 0; the usage is a total."""
    usage = _zeroed(message.usage, "input_tokens", "output_tokens")
    return message.model_copy(update={"usage": usage})


@pytest.mark.parametrize("rel", ALL_RECORDINGS)
def test_langchain_round_trip(rel: str) -> None:
    message = MESSAGES[rel]
    ai_message = to_langchain.to_ai_message(message)
    assert isinstance(ai_message, AIMessage)
    back = to_langchain.from_ai_message(ai_message)
    assert back == langchain_kept(message)
    assert to_langchain.from_ai_message(json.loads(ai_message.model_dump_json())) == back


def test_langchain_message_holds_standard_blocks_tool_calls_and_usage() -> None:
    message = MESSAGES["anthropic/thinking-then-tool-use.sse"]
    ai_message = to_langchain.to_ai_message(message)
    assert [b["type"] for b in ai_message.content_blocks] == ["reasoning", "tool_call"]
    assert ai_message.content_blocks[0]["extras"]["signature"]  # type: ignore[typeddict-item]
    assert [(c["id"], c["name"], c["args"]) for c in ai_message.tool_calls] == [
        (c.call_id, c.name, c.arguments) for c in message.tool_calls
    ]
    assert ai_message.usage_metadata is not None and message.usage is not None
    assert ai_message.usage_metadata["input_tokens"] == message.usage.input_tokens
    assert ai_message.response_metadata["finish_reason"] == "tool_use"


def test_langchain_reads_a_chat_models_own_message() -> None:
    # What ChatOpenAI gives: a string and tool_calls, the finish reason in response_metadata.
    ai_message = AIMessage(
        content="Looking it up.",
        tool_calls=[{"id": "call_1", "name": "search", "args": {"q": "x"}}],
        response_metadata={"finish_reason": "tool_calls", "model_name": "gpt-test"},
        usage_metadata={"input_tokens": 5, "output_tokens": 7, "total_tokens": 12},
        id="run-1",
    )
    message = to_langchain.from_ai_message(ai_message)
    assert [p.content for p in message.content] == ["Looking it up."]
    assert streamfold.is_narration(message)
    assert message.stop_reason == "tool_use" and message.status == "complete"
    assert message.tool_calls[0].arguments == {"q": "x"}
    assert message.usage is not None and message.usage.output_tokens == 7
    assert message.metadata == {"id": "run-1", "model": "gpt-test"}
