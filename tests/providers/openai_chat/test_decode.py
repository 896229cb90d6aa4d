"""OpenAI Chat Completions and its imitators: recordings, the SDK, matching rules, bad input;
its SSE hot lane and fast path, which must give exactly what the full path gives."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk
from support import (
    HOT_LANE_OPTIONS,
    INDEX,
    REAL,
    assert_fast_same,
    assert_golden,
    assert_hot_lane_same,
    decoded_payloads,
    entry,
    final_message,
    fold_bytes,
    golden_path,
    read,
    split_at,
    streamed_display_items,
)
from support import recordings as all_recordings

from streamfold import (
    Event,
    Message,
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartStarted,
    ProviderErrored,
    StreamFolder,
    StreamProtocolError,
    ToolCall,
    UsageUpdated,
    encode,
    event_to_json,
    extract_display_items,
    fold,
)
from streamfold.deltas import ClosePart, GrowPart, OpenPart, ReportError, UpdateMessage
from streamfold.limits import Limits
from streamfold.providers import get_decoder
from streamfold.providers.openai_chat import OpenAIChatDecoder
from streamfold.providers.openai_chat import decode as openai_chat

DIRS = (
    "openai-chat",
    "groq",
    "mistral",
    "zai",
    "alibaba",
    "perplexity",
    "azure-openai",
    "deepseek",
    "openrouter",
    "xai",
    "llama-cpp",
)
CHAT = [r for r in all_recordings(*DIRS) if entry(r)["api"] == "chat-completions"]


# --- helpers -------------------------------------------------------------------------------


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    index: int = 0,
    **top: Any,
) -> dict[str, Any]:
    """One chat.completion.chunk with a single choice."""
    choice: dict[str, Any] = {"index": index, "delta": delta or {}, "finish_reason": finish}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [choice],
        **top,
    }


def sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    """SSE bytes for the chunks, with `data: [DONE]` unless told otherwise."""
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


def tc(
    index: int | None = None,
    call_id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> dict[str, Any]:
    """One tool_calls fragment; None fields are left out, as servers do."""
    fragment: dict[str, Any] = {}
    if index is not None:
        fragment["index"] = index
    if call_id is not None:
        fragment["id"] = call_id
        fragment["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        fragment["function"] = function
    return fragment


def run(
    *chunks: dict[str, Any], done: bool = True, choice: int = 0, strict: bool = False
) -> list[Event]:
    data = sse(*chunks, done=done)
    return list(fold([data], "openai-chat", choice=choice, strict=strict))


def message_of(*chunks: dict[str, Any], done: bool = True, choice: int = 0) -> Message:
    return final_message(run(*chunks, done=done, choice=choice))


def calls(message: Message) -> list[tuple[str | None, str | None, Any]]:
    return [(c.call_id, c.name, c.arguments) for c in message.tool_calls]


# --- 1. goldens, and what was checked by hand against each raw stream ----------------------

# Read off the raw streams by hand: first/last words of the answer, thinking, tool calls
# (id, name, arguments), usage (prompt, output, cache read, reasoning), stop reason.
HAND_CHECKED: dict[str, dict[str, Any]] = {
    "openai-chat/structured-output-json-schema.sse": {
        "text": '{"city":"San Francisco","temperature":68,"units":"f"}',
        "usage": (17, 14, None, None),
        "stop": ("stop", "stop", "complete"),
    },
    "openai-chat/text-include-usage.sse": {
        "text": "The capital of Mexico is Mexico City.",
        "usage": (14, 8, 0, 0),
        "stop": ("stop", "stop", "complete"),
    },
    "openai-chat/text-gpt5.sse": {
        "text": "Paris.",
        "usage": (13, 11, 0, 0),
        "stop": ("stop", "stop", "complete"),
    },
    "openai-chat/text-long-nano.sse": {
        "text_start": "**Holiday Name:** Harmony Day",
        "usage": (16, 300, 0, 0),
        "stop": ("stop", "stop", "complete"),
    },
    "openai-chat/tool-calls-parallel.sse": {
        "calls": [
            ("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", {}),
            ("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", {}),
        ],
        "usage": (364, 40, 0, 0),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "openai-chat/tool-calls-parallel-interleaved-args.sse": {
        "calls": [
            ("call_NS4iQj14cDFwc0BnrKqDHavt", "get_weather", {"city": "Mexico City"}),
            ("call_SkGkkGDvHQEEk0CGbnAh2AQw", "get_product_name", {}),
        ],
        "usage": (417, 44, 0, 0),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "openai-chat/tool-call-long-args.sse": {
        "calls": [
            (
                "call_CCGIWaMeYWmxOQ91orkmTvzn",
                "final_result",
                {
                    "answers": [
                        {"label": "Capital", "answer": "The capital of Mexico is Mexico City."},
                        {
                            "label": "Weather",
                            "answer": "The weather in Mexico City is currently sunny.",
                        },
                        {"label": "Product Name", "answer": "The product name is Pydantic AI."},
                    ]
                },
            )
        ],
        "usage": (448, 62, 0, 0),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "openai-chat/tool-call-single-mini.sse": {
        "calls": [("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", {"country": "UK"})],
        "usage": (53, 15, 0, 0),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "azure-openai/chat-model-router.sse": {
        "text": "Capital of Denmark.",
        "usage": (15, 78, 0, 64),
        "stop": ("stop", "stop", "complete"),
        "meta": {"id": "chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt", "model": "gpt-5-nano-2025-08-07"},
    },
    "mistral/magistral-thinking-content-chunks.sse": {
        "thinking_start": "Okay, the user is asking how to cross the street.",
        "text_start": "To cross the street safely, follow these steps:",
        "usage": (10, 232, None, None),
        "stop": ("stop", "stop", "complete"),
    },
    "mistral/text.sse": {
        "text": "Hello, world! This is a test response.",
        "usage": (13, 8, None, None),
        "stop": ("stop", "stop", "complete"),
    },
    "mistral/tool-call-single-chunk.sse": {
        "calls": [("gSIMJiOkT", "weather", {"location": "San Francisco"})],
        "usage": (124, 22, None, None),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "deepseek/reasoner-reasoning-content.sse": {
        "thinking_start": 'Hmm, the user just said "Hello".',
        "text": "Hello there! 😊 How can I help you today?",
        "usage": (6, 212, 0, 198),
        "stop": ("stop", "stop", "complete"),
    },
    "deepseek/reasoner-tool-call.sse": {
        "thinking_start": "The user is asking for the weather in San Francisco.",
        "calls": [("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", {"location": "San Francisco"})],
        "usage": (339, 83, 320, 39),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "deepseek/chat-finish-length.sse": {
        "text_start": "## **Holiday Name:** Starlight Remembrance",
        "usage": (13, 400, 0, None),
        "stop": ("length", "length", "length"),
    },
    "groq/reasoning-tool-call.sse": {
        "thinking": 'We need to call the function with correct parameter "name". '
        'Provide a name, e.g., "example".',
        "calls": [
            (
                "fc_bfb39741-3748-4def-9886-a93fc9c64a90",
                "get_something_by_name",
                {"name": "example"},
            )
        ],
        "usage": (304, 49, None, 23),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "groq/tool-call.sse": {
        "calls": [("tk85n1k4m", "weather", {})],
        "usage": (210, 15, None, None),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "groq/compound-web-search-executed-tools.sse": {
        "thinking_start": "<think>\nTo find the current weather in San Francisco,",
        "text_start": "The weather in San Francisco today is partly cloudy",
        "usage": (5003, 359, None, None),
        "stop": ("stop", "stop", "complete"),
        "types": ["thinking", "unsupported", "thinking", "text"],
    },
    "groq/error-mid-stream-tool-use-failed.sse": {
        "thinking_start": "We need to call the tool with invalid parameters first",
        "usage": None,
        "stop": ("error", None, "error"),
    },
    "xai/chat-reasoning-content-tool-call.sse": {
        "thinking": "First, the user is",
        "calls": [("call_55117580", "weather", {"location": "San Francisco"})],
        # completion_tokens 26 + reasoning 196: xAI counts reasoning apart (total 513).
        "usage": (291, 222, 290, 196),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "openrouter/error-finish-length.sse": {
        "thinking": "We need to respond to a greeting. The user",
        "usage": (43, 10, 0, 11),
        "stop": ("error", "length", "error"),
    },
    "llama-cpp/error-line-mid-stream.sse": {
        "text": "**Holiday Name:** Harmony Day\n\n**Date:** Celebrated",
        "usage": None,
        # The failure on the `error:` line, not a complete message (its [DONE] follows).
        "stop": ("error", None, "error"),
    },
    "openrouter/o3-mini-tool-call-finish-stop.sse": {
        "calls": [("call_nT8FqU2xXbLw3Yk5Rr0pHcGe", "get_weather", {"city": "Paris"})],
        "usage": (64, 83, 0, 64),
        # finish_reason "stop" with a complete call: an agent loop must run the tool.
        "stop": ("tool_use", "stop", "complete"),
    },
    "openrouter/reasoning-details-claude.sse": {
        "thinking": "This is a simple arithmetic question. 2+2 equals 4.",
        "signature_start": "Et0BCkgIChACGAIqQA2s7h7t",
        "text": "2 + 2 = 4",
        "usage": (43, 36, 0, 13),
        "stop": ("stop", "stop", "complete"),
    },
    "openrouter/web-search-annotations.sse": {
        "text": "The URL for Pydantic AI's GitHub repository is:  \n\n"
        "https://github.com/pydantic/pydantic-ai",
        "citations": 5,
        "usage": (2317, 53, 0, 0),
        "stop": ("stop", "stop", "complete"),
    },
    "zai/glm-thinking-reasoning-content.sse": {
        "thinking_start": "\n1.  **Analyze the User's Request:**",
        "text": "4",
        "usage": (13, 564, 0, 561),
        "stop": ("stop", "stop", "complete"),
    },
    "alibaba/qwen-tool-call.sse": {
        "calls": [("call_eee11723464a4b9eb8cee71d", "weather", {"location": "San Francisco"})],
        "usage": (295, 22, 0, None),
        "stop": ("tool_use", "tool_calls", "complete"),
    },
    "perplexity/sonar-citations.sse": {
        "text": "The current population of **[2][3]",
        "citations": 7,
        "usage": (10, 336, None, None),
        "stop": ("stop", "stop", "complete"),
    },
}


def test_every_chat_recording_is_covered() -> None:
    assert sorted(HAND_CHECKED) == sorted(CHAT)
    assert len(CHAT) == 28


@pytest.mark.parametrize("rel", CHAT)
def test_recording_golden_and_hand_checked_facts(rel: str) -> None:
    message = final_message(fold_bytes(read(rel)))
    assert golden_path(rel).exists()
    assert_golden(rel, message)
    facts = HAND_CHECKED[rel]
    text = "".join(
        p.content or "" for p in message.content if p.type == "text" and "refusal" not in p.options
    )
    thinking = "".join(p.content or "" for p in message.content if p.type == "thinking")
    if "text" in facts:
        assert text == facts["text"]
    if "text_start" in facts:
        assert text.startswith(facts["text_start"])
    if "thinking" in facts:
        assert thinking == facts["thinking"]
    if "thinking_start" in facts:
        assert thinking.startswith(facts["thinking_start"])
    if "signature_start" in facts:
        (part,) = [p for p in message.content if p.type == "thinking"]
        assert part.options["signature"].startswith(facts["signature_start"])
    assert calls(message) == facts.get("calls", [])
    assert all(c.status == "complete" for c in message.tool_calls)
    if "citations" in facts:
        (part,) = [p for p in message.content if p.type == "text"]
        assert len(part.citations) == facts["citations"]
    if "types" in facts:
        assert [p.type for p in message.content] == facts["types"]
    if "meta" in facts:
        assert facts["meta"].items() <= message.metadata.items()
    usage = message.usage
    if facts["usage"] is None:
        assert usage is None
    else:
        assert usage is not None
        got = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.reasoning_tokens,
        )
        assert got == facts["usage"]
    assert (message.stop_reason, message.raw_stop_reason, message.status) == facts["stop"]


# --- 2. differential against the official openai SDK's accumulator ------------------------


def _sdk_fold(rel: str) -> tuple[Any, Exception | None]:
    """Feed the recording to the SDK as its Stream would: loose construct, stop at an error."""
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for line in (REAL / rel).read_text(encoding="utf-8").splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        payload = json.loads(data)
        if payload.get("error"):
            break  # openai._streaming.Stream raises APIError here
        chunk_obj = construct_type(type_=ChatCompletionChunk, value=payload)
        try:
            state.handle_chunk(chunk_obj)  # type: ignore[arg-type]
        except Exception as exc:
            return None, exc
    return state.current_completion_snapshot, None


# Where the SDK and streamfold disagree, and why the SDK is the one that is wrong (or where
# streamfold deliberately reads more). Each entry is asserted to still disagree.
SDK_FAILS: dict[str, str] = {
    # No `index` on the tool call: accumulate_delta stores the list as given, then
    # handle_chunk indexes the snapshot's tool_calls with None -> TypeError.
    "mistral/tool-call-single-chunk.sse": "TypeError",
    # Annotations are a list of dicts without `index`: accumulate_delta raises on the
    # second annotations list (RuntimeError "Expected list delta entry to have an index").
    "openrouter/web-search-annotations.sse": "RuntimeError",
}
SDK_DIFFERS: dict[str, dict[str, str]] = {
    # The moderation chunk after the usage chunk carries no usage; the SDK sets
    # snapshot.usage = chunk.usage on every chunk, so the final usage becomes None.
    "openai-chat/text-gpt5.sse": {"usage": "SDK overwrites usage with the later null"},
    # Groq compound reports usage only in x_groq.usage, which the SDK does not read.
    "groq/compound-web-search-executed-tools.sse": {"usage": "usage only in x_groq.usage"},
    # Mistral's content is a list of typed chunks; accumulate_delta cannot add a list to
    # the initial "" and silently keeps the string: all thinking is dropped.
    "mistral/magistral-thinking-content-chunks.sse": {"thinking": "SDK drops list content"},
    # The usage rides on the same chunk as the error; openai's Stream raises APIError on
    # that chunk, so the SDK never sees the usage. streamfold keeps both.
    "openrouter/error-finish-length.sse": {"usage": "usage arrives with the error"},
}


def _sdk_view(snapshot: Any) -> dict[str, Any]:
    choice = snapshot.choices[0]
    message = choice.message
    extra = message.model_extra or {}
    thinking = extra.get("reasoning_content") or extra.get("reasoning") or ""
    usage = snapshot.usage
    return {
        "text": message.content or "",
        "thinking": thinking if isinstance(thinking, str) else "",
        "calls": [
            (t.id, t.function.name, json.loads(t.function.arguments or "{}"))
            for t in message.tool_calls or []
        ],
        "finish": choice.finish_reason,
        "usage": None if usage is None else (usage.prompt_tokens, usage.completion_tokens),
    }


def _our_view(message: Message) -> dict[str, Any]:
    usage = message.usage
    return {
        "text": "".join(p.content or "" for p in message.content if p.type == "text"),
        "thinking": "".join(p.content or "" for p in message.content if p.type == "thinking"),
        "calls": calls(message),
        "finish": message.raw_stop_reason,
        # The raw counts: output_tokens may add xAI's separately counted reasoning.
        "usage": None
        if usage is None
        else (usage.raw.get("prompt_tokens"), usage.raw.get("completion_tokens")),
    }


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic, on Mistral's list content
@pytest.mark.parametrize("rel", CHAT)
def test_against_openai_sdk_accumulator(rel: str) -> None:
    ours = _our_view(final_message(fold_bytes(read(rel))))
    snapshot, failure = _sdk_fold(rel)
    if rel in SDK_FAILS:
        assert failure is not None and type(failure).__name__ == SDK_FAILS[rel]
        return
    assert failure is None
    sdk = _sdk_view(snapshot)
    differs = SDK_DIFFERS.get(rel, {})
    for field in ours:
        if field in differs:
            assert sdk[field] != ours[field], f"{field} now agrees: drop the documented reason"
        else:
            assert sdk[field] == ours[field], field


def test_sdk_merges_parallel_calls_that_all_say_index_0() -> None:
    # Some servers number every parallel call 0 (distinct ids). The SDK merges them into
    # one call with concatenated ids, names and arguments; streamfold keeps two calls.
    chunks = [
        chunk({"tool_calls": [tc(0, "call_a", "get_weather", '{"city": "Paris"}')]}),
        chunk({"tool_calls": [tc(0, "call_b", "get_time", '{"tz": "CET"}')]}),
        chunk(finish="tool_calls"),
    ]
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=c))  # type: ignore[arg-type]
    (merged,) = state.current_completion_snapshot.choices[0].message.tool_calls or []
    assert merged.id == "call_acall_b"
    assert merged.function.name == "get_weatherget_time"
    assert calls(message_of(*chunks)) == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_time", {"tz": "CET"}),
    ]


def test_sdk_concatenates_an_id_repeated_on_every_fragment() -> None:
    chunks = [
        chunk({"tool_calls": [tc(0, "call_a", "f", '{"x"')]}),
        chunk({"tool_calls": [tc(0, "call_a", "f", ": 1}")]}),
        chunk(finish="tool_calls"),
    ]
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=c))  # type: ignore[arg-type]
    (sdk_call,) = state.current_completion_snapshot.choices[0].message.tool_calls or []
    assert (sdk_call.id, sdk_call.function.name) == ("call_acall_a", "ff")
    assert calls(message_of(*chunks)) == [("call_a", "f", {"x": 1})]


# The openai SDK's SSE reader drops an `error:` line (no SSE field), so its chunk objects
# never carry the failure the bytes report: nothing to compare.
_SDK_LOSES = {"llama-cpp/error-line-mid-stream.sse"}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("rel", [r for r in CHAT if r not in _SDK_LOSES])
def test_sdk_chunk_objects_fold_like_the_bytes(rel: str) -> None:
    objects = [
        construct_type(type_=ChatCompletionChunk, value=json.loads(line[5:]))
        for line in (REAL / rel).read_text(encoding="utf-8").splitlines()
        if line.startswith("data:") and line[5:].strip() != "[DONE]"
    ]
    from_objects = final_message(list(fold(objects, "openai-chat")))
    from_bytes = final_message(fold_bytes(read(rel)))
    # The SDK swallows `data: [DONE]`, the stream's end marker: its chunks never carry it.
    assert from_objects.metadata.pop("end_marker") is False
    from_bytes.metadata.pop("end_marker")
    assert from_objects == from_bytes


# --- 3. tool-call matching rules -------------------------------------------------------------


def test_index_0_for_every_parallel_call_with_distinct_ids() -> None:
    message = message_of(
        chunk({"tool_calls": [tc(0, "call_a", "f", "")]}),
        chunk({"tool_calls": [tc(0, arguments='{"n": ')]}),
        chunk({"tool_calls": [tc(0, arguments="1}")]}),
        chunk({"tool_calls": [tc(0, "call_b", "g", "")]}),
        chunk({"tool_calls": [tc(0, arguments='{"n": 2}')]}),
        chunk(finish="tool_calls"),
    )
    assert calls(message) == [("call_a", "f", {"n": 1}), ("call_b", "g", {"n": 2})]
    assert [c.index for c in message.tool_calls] == [0, 1]


def test_no_index_at_all() -> None:
    message = message_of(
        chunk({"tool_calls": [tc(None, "call_a", "f", '{"a": 1}')]}),
        chunk({"tool_calls": [tc(None, "call_b", "g", '{"b"')]}),
        chunk({"tool_calls": [tc(None, arguments=": 2}")]}),  # the latest call
        chunk(finish="tool_calls"),
    )
    assert calls(message) == [("call_a", "f", {"a": 1}), ("call_b", "g", {"b": 2})]


def test_no_index_no_id_but_another_function_name_is_a_new_call() -> None:
    message = message_of(
        chunk({"tool_calls": [tc(None, None, "f", "{}")]}),
        chunk({"tool_calls": [tc(None, None, "g", "{}")]}),
        chunk(finish="tool_calls"),
    )
    assert calls(message) == [(None, "f", {}), (None, "g", {})]


def test_new_id_at_used_index_is_a_new_call() -> None:
    message = message_of(
        chunk({"tool_calls": [tc(1, "call_a", "f", '{"a": 1}')]}),
        chunk({"tool_calls": [tc(1, "call_b", "f", '{"a": 2}')]}),
        chunk(finish="tool_calls"),
    )
    assert calls(message) == [("call_a", "f", {"a": 1}), ("call_b", "f", {"a": 2})]


def test_id_and_name_repeated_on_later_fragments_are_not_concatenated() -> None:
    message = message_of(
        chunk({"tool_calls": [tc(0, "call_a", "lookup", '{"q": ')]}),
        chunk({"tool_calls": [tc(0, "call_a", "lookup", '"x"')]}),
        chunk({"tool_calls": [tc(0, "call_a", "lookup", "}")]}),
        chunk(finish="tool_calls"),
    )
    assert calls(message) == [("call_a", "lookup", {"q": "x"})]


def test_name_only_on_the_first_fragment() -> None:
    message = message_of(
        chunk({"tool_calls": [tc(0, "call_a", "lookup")]}),
        chunk({"tool_calls": [tc(0, arguments='{"q"')]}),
        chunk({"tool_calls": [tc(0, arguments=': "x"}')]}),
        chunk(finish="tool_calls"),
    )
    assert calls(message) == [("call_a", "lookup", {"q": "x"})]


def test_empty_id_on_later_fragments_is_no_id() -> None:
    # Alibaba sends "id": "" on every fragment after the first.
    message = message_of(
        chunk({"tool_calls": [tc(0, "call_a", "f", "")]}),
        chunk({"tool_calls": [{"index": 0, "id": "", "function": {"arguments": "{}"}}]}),
        chunk(finish="tool_calls"),
    )
    assert calls(message) == [("call_a", "f", {})]


def test_fragments_of_an_earlier_call_after_the_next_call_started() -> None:
    events = run(
        chunk({"tool_calls": [tc(0, "call_a", "f", '{"a": ')]}),
        chunk({"tool_calls": [tc(1, "call_b", "g", '{"b": 2}')]}),
        chunk({"tool_calls": [tc(0, arguments="1}")]}),
        chunk(finish="tool_calls"),
    )
    message = final_message(events)
    assert calls(message) == [("call_a", "f", {"a": 1}), ("call_b", "g", {"b": 2})]
    # Neither call completed before finish_reason: the next call starting is no end.
    finish_at = next(
        i for i, e in enumerate(events) if isinstance(e, PartDelta) and e.content == "1}"
    )
    completed = [i for i, e in enumerate(events) if isinstance(e, PartCompleted)]
    assert completed and min(completed) > finish_at


def test_several_fragments_in_one_chunk() -> None:
    message = message_of(
        chunk(
            {
                "tool_calls": [
                    tc(0, "call_a", "f", '{"a"'),
                    tc(1, "call_b", "g", '{"b"'),
                    tc(0, arguments=": 1}"),
                    tc(1, arguments=": 2}"),
                ]
            }
        ),
        chunk(finish="tool_calls"),
    )
    assert calls(message) == [("call_a", "f", {"a": 1}), ("call_b", "g", {"b": 2})]


@st.composite
def _call_streams(draw: st.DrawFn) -> tuple[list[tuple[str, str, dict[str, Any]]], list[Any]]:
    """Parallel calls split into fragments the way some server would send them."""
    n = draw(st.integers(1, 4))
    expected = []
    for i in range(n):
        args = draw(st.dictionaries(st.sampled_from("abc"), st.integers() | st.text(max_size=5)))
        expected.append((f"call_{i}", f"fn_{i}", args))
    style = draw(st.sampled_from(["openai", "index-0", "no-index", "id-every-fragment"]))
    streams = []
    for i, (call_id, name, args) in enumerate(expected):
        text = json.dumps(args)
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        index = {"openai": i, "index-0": 0}.get(style)
        frags = [tc(index, call_id, name, pieces[0])]
        repeat = style == "id-every-fragment"
        frags += [
            tc(index, call_id if repeat else None, name if repeat else None, p) for p in pieces[1:]
        ]
        streams.append(frags)
    order: list[Any] = []
    if style in ("openai", "id-every-fragment"):
        # Fragments of different calls may interleave when each says which call it is.
        while any(streams):
            live = [s for s in streams if s]
            order.append(draw(st.sampled_from(live)).pop(0))
    else:
        order = [f for s in streams for f in s]
    # Calls come out in the order they started.
    first = [f["id"] for f in order if "id" in f]
    expected.sort(key=lambda call: first.index(call[0]))
    return expected, order


@settings(max_examples=150, deadline=None)
@given(_call_streams(), st.integers(1, 3))
def test_matching_rules_rebuild_every_call(
    case: tuple[list[tuple[str, str, dict[str, Any]]], list[Any]], per_chunk: int
) -> None:
    expected, fragments = case
    chunks = [
        chunk({"tool_calls": fragments[i : i + per_chunk]})
        for i in range(0, len(fragments), per_chunk)
    ]
    message = message_of(*chunks, chunk(finish="tool_calls"))
    assert calls(message) == expected
    assert all(c.status == "complete" for c in message.tool_calls)


def test_legacy_function_call() -> None:
    message = message_of(
        chunk({"function_call": {"name": "f", "arguments": '{"a"'}}),
        chunk({"function_call": {"arguments": ": 1}"}}),
        chunk(finish="function_call"),
    )
    assert calls(message) == [(None, "f", {"a": 1})]
    assert (message.stop_reason, message.status) == ("tool_use", "complete")


def test_argument_fragment_after_finish_is_a_protocol_error() -> None:
    with pytest.raises(StreamProtocolError, match="after finish_reason"):
        run(
            chunk({"tool_calls": [tc(0, "call_a", "f", "{")]}, finish="tool_calls"),
            chunk({"tool_calls": [tc(0, arguments="}")]}),
            strict=True,
        )


def test_argument_fragment_after_finish_is_dropped_and_counted_when_lenient() -> None:
    message = final_message(
        run(
            chunk({"tool_calls": [tc(0, "call_a", "f", "{}")]}, finish="tool_calls"),
            chunk({"tool_calls": [tc(0, arguments="}")]}),
        )
    )
    # The call completed at finish_reason; what came after cannot grow it.
    assert calls(message) == [("call_a", "f", {})]
    assert message.metadata["repairs"] == {"arguments_after_finish": 1}


def test_an_id_reused_for_another_function_is_a_new_call() -> None:
    chunks = [
        chunk({"tool_calls": [tc(0, "call_0", "f", '{"a": 1}')]}),
        chunk({"tool_calls": [tc(0, "call_0", "g", '{"b": 2}')]}),
        chunk(finish="tool_calls"),
    ]
    message = message_of(*chunks)
    assert calls(message) == [("call_0", "f", {"a": 1}), ("call_0", "g", {"b": 2})]
    assert message.metadata["repairs"] == {"reused_tool_call_id": 1}
    with pytest.raises(StreamProtocolError, match="expected a new id"):
        run(*chunks, strict=True)


# --- 4. several choices ----------------------------------------------------------------------


def _two_choices() -> list[dict[str, Any]]:
    usage = {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}
    return [
        chunk({"role": "assistant", "content": ""}, index=0),
        chunk({"role": "assistant", "content": ""}, index=1),
        chunk({"content": "Hello"}, index=0),
        chunk({"content": "Bonjour"}, index=1),
        chunk({"content": " there"}, index=0),
        chunk({"tool_calls": [tc(0, "call_1", "f", "{}")]}, index=1),
        chunk(finish="stop", index=0),
        chunk(finish="tool_calls", index=1),
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": usage},
    ]


def test_n_greater_than_1_gives_one_message_per_choice() -> None:
    first = message_of(*_two_choices())
    second = message_of(*_two_choices(), choice=1)
    assert first.text == "Hello there" and first.tool_calls == []
    assert (first.stop_reason, first.raw_stop_reason) == ("stop", "stop")
    assert second.text == "Bonjour"
    assert calls(second) == [("call_1", "f", {})]
    assert second.stop_reason == "tool_use"
    # Usage is for the whole response: both see it.
    assert first.usage == second.usage and first.usage is not None
    assert first.usage.input_tokens == 5


def test_choices_in_one_chunk() -> None:
    both = {
        "id": "x",
        "choices": [
            {"index": 1, "delta": {"content": "B"}, "finish_reason": None},
            {"index": 0, "delta": {"content": "A"}, "finish_reason": None},
        ],
    }
    assert message_of(both).text == "A"
    assert message_of(both, choice=1).text == "B"


# --- 5. bad input ----------------------------------------------------------------------------


def test_truncated_stream_is_incomplete_with_the_parts_so_far() -> None:
    data = read("openai-chat/tool-calls-parallel.sse")
    cut = data.index(b'"index":1,"function":{"arguments"')  # inside the 2nd call's args
    cut = data.rindex(b"\n\n", 0, cut) + 2
    message = final_message(fold_bytes(data[:cut]))
    assert message.status == "incomplete"
    assert [c.call_id for c in message.tool_calls] == [
        "call_q2UyBRP7eXNTzAoR8lEhjc9Z",
        "call_b51ijcpFkDiTQG1bQzsrmtW5",
    ]
    assert message.tool_calls[0].arguments == {}
    # The second call had no arguments yet: empty text parses to {}.
    assert message.stop_reason is None


def test_truncated_text_stream_keeps_the_text() -> None:
    message = message_of(
        chunk({"reasoning_content": "Let me think"}),
        chunk({"content": "The answer"}),
        done=False,
    )
    assert message.status == "incomplete"
    assert [(p.type, p.content) for p in message.content] == [
        ("thinking", "Let me think"),
        ("text", "The answer"),
    ]


def test_broken_json_raises_with_the_completed_parts() -> None:
    data = sse(chunk({"reasoning_content": "Hmm"}), chunk({"content": "Answer so far"}))
    data = data.replace(b"[DONE]", b'{"choices": [') + b"\n\n"
    with pytest.raises(StreamProtocolError) as info:
        fold_bytes(data)
    partial = info.value.partial
    assert isinstance(partial, Message)
    assert [(p.type, p.content) for p in partial.content] == [
        ("thinking", "Hmm"),
        ("text", "Answer so far"),
    ]


BAD_CHUNKS: list[tuple[dict[str, Any], str]] = [
    ({"id": "x", "object": "chat.completion.chunk"}, "choices, usage or error"),
    ({"choices": {"index": 0}}, "choices to be a list"),
    ({"choices": ["text"]}, "each choice to be an object"),
    ({"choices": [{"index": "0", "delta": {}}]}, "choice index to be an integer"),
    ({"choices": [{"index": 0, "delta": "hi"}]}, "delta to be an object"),
    ({"choices": [{"index": 0, "delta": {"content": 5}}]}, "content to be a string"),
    ({"choices": [{"index": 0, "delta": {"content": [5]}}]}, "content chunk to be an object"),
    ({"choices": [{"index": 0, "delta": {"reasoning_content": ["x"]}}]}, "reasoning_content"),
    ({"choices": [{"index": 0, "delta": {"reasoning": 1}}]}, "reasoning to be a string"),
    ({"choices": [{"index": 0, "delta": {"reasoning_details": {}}}]}, "reasoning_details"),
    ({"choices": [{"index": 0, "delta": {"refusal": {}}}]}, "refusal to be a string"),
    ({"choices": [{"index": 0, "delta": {"tool_calls": {}}}]}, "tool_calls to be a list"),
    ({"choices": [{"index": 0, "delta": {"tool_calls": [1]}}]}, "tool_calls entry"),
    (
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "0"}]}}]},
        "tool call index to be an integer",
    ),
    (
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"id": 7}]}}]},
        "id to be a string",
    ),
    (
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": "f"}]}}]},
        "function to be an object",
    ),
    (
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"name": 3}}]}}]},
        "name to be a string",
    ),
    (
        {"choices": [{"index": 0, "delta": {"tool_calls": [tc(0, "c", "f")]}}]},
        "",  # valid: the next entry is the broken one
    ),
    (
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]},
                }
            ]
        },
        "arguments to be a string fragment",
    ),
    ({"choices": [{"index": 0, "delta": {}, "finish_reason": 1}]}, "finish_reason"),
    ({"choices": [], "usage": [1]}, "usage to be an object"),
    ({"choices": [], "usage": {"prompt_tokens": "12"}}, "prompt_tokens to be an integer"),
    (
        {"choices": [], "usage": {"prompt_tokens": 1, "prompt_tokens_details": 3}},
        "prompt_tokens_details to be an object",
    ),
    ({"choices": [], "error": 42}, "error to be an object or a string"),
    ({"choices": [], "citations": "https://x"}, "citations to be a list"),
    ({"choices": [], "x_groq": "id"}, "x_groq to be an object"),
    (
        {"choices": [{"index": 0, "delta": {"annotations": [{"type": "url_citation"}]}}]},
        "url_citation to be an object",
    ),
    (
        {"choices": [{"index": 0, "delta": {"executed_tools": {"a": 1}}}]},
        "executed_tools to be a list",
    ),
]


@pytest.mark.parametrize(("payload", "expected"), [b for b in BAD_CHUNKS if b[1]])
def test_wrong_types_are_protocol_errors(payload: dict[str, Any], expected: str) -> None:
    decoder = OpenAIChatDecoder()
    with pytest.raises(StreamProtocolError) as info:
        decoder.decode(payload, None)
    assert expected in str(info.value)
    assert "expected" in info.value.reason and "got" in info.value.reason
    assert info.value.provider == "openai-chat"


@pytest.mark.parametrize(("payload", "expected"), [b for b in BAD_CHUNKS if b[1]])
def test_wrong_types_through_the_fold_keep_the_partial(
    payload: dict[str, Any], expected: str
) -> None:
    data = sse(chunk({"content": "Before"}), payload)
    with pytest.raises(StreamProtocolError) as info:
        fold_bytes(data, provider="openai-chat")
    assert expected in str(info.value)
    assert isinstance(info.value.partial, Message)
    assert info.value.partial.text == "Before"


def test_unknown_fields_are_ignored() -> None:
    message = message_of(
        chunk({"content": "Hi", "audio": None, "something_new": {"x": 1}}, extra_field=[1, 2]),
        chunk(finish="stop"),
    )
    assert message.text == "Hi" and message.status == "complete"


def test_in_stream_error_object_is_status_error_with_the_error_kept() -> None:
    events = run(
        chunk({"content": "Partial answer"}),
        {"error": {"message": "Upstream overloaded", "type": "server_error", "code": 529}},
        done=False,
    )
    (errored,) = [e for e in events if isinstance(e, ProviderErrored)]
    assert errored.error_type == "server_error"
    assert errored.message == "Upstream overloaded"
    message = final_message(events)
    assert message.status == "error" and message.stop_reason == "error"
    assert message.text == "Partial answer"
    assert message.metadata["error"] == {"type": "server_error", "message": "Upstream overloaded"}
    assert message.metadata["provider_error"]["code"] == 529


def test_groq_error_event_keeps_failed_generation() -> None:
    message = final_message(fold_bytes(read("groq/error-mid-stream-tool-use-failed.sse")))
    assert message.status == "error"
    assert message.metadata["error"]["type"] == "tool_use_failed"
    assert "get_something_by_name" in message.metadata["provider_error"]["failed_generation"]
    assert [p.type for p in message.content] == ["thinking"]


def test_error_as_a_plain_string() -> None:
    message = message_of(chunk({"content": "x"}), {"error": "boom"}, done=False)
    assert message.status == "error" and message.metadata["error"]["message"] == "boom"


# --- finish reasons, refusal, usage, reasoning, citations --------------------------------------


@pytest.mark.parametrize(
    ("reason", "stop", "status"),
    [
        ("stop", "stop", "complete"),
        ("length", "length", "length"),
        ("tool_calls", "tool_use", "complete"),
        ("function_call", "tool_use", "complete"),
        ("content_filter", "content_filter", "content_filtered"),
        ("end_of_universe", "other", "complete"),
    ],
)
def test_finish_reasons(reason: str, stop: str, status: str) -> None:
    message = message_of(chunk({"content": "x"}), chunk(finish=reason))
    assert (message.stop_reason, message.raw_stop_reason, message.status) == (stop, reason, status)


def test_finish_update_arrives_with_finish_reason_and_end_with_done() -> None:
    decoder = OpenAIChatDecoder()
    deltas = decoder.decode(chunk({"content": "x"}, finish="stop"), None)
    assert isinstance(deltas[-1], UpdateMessage) and deltas[-1].stop_reason == "stop"
    assert [type(d) for d in decoder.done()] == [type(get_decoder("openai").done()[0])]


def test_done_without_finish_reason_ends_the_stream_normally() -> None:
    # Snowflake Cortex's OpenAI-compatible stream ends with [DONE] and never says a
    # finish_reason: the message is whole (status complete), but nobody said why it ended.
    chunks = (chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}))
    message = message_of(*chunks)
    assert (message.status, message.stop_reason, message.raw_stop_reason) == (
        "complete",
        None,
        None,
    )
    assert message.text == "Hello"
    assert message.metadata["end_marker"] is True
    # The same bytes cut before [DONE]: a cut stream, told apart.
    cut = message_of(*chunks, done=False)
    assert (cut.status, cut.text, cut.metadata["end_marker"]) == ("incomplete", "Hello", False)


def test_a_cut_before_the_usage_chunk_is_visible() -> None:
    chunks = (
        chunk({"role": "assistant", "content": "Hi"}),
        chunk(finish="stop"),
        {**chunk(), "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
    )
    whole = message_of(*chunks)
    assert whole.usage is not None and whole.metadata["end_marker"] is True
    # Cut after finish_reason, before the usage chunk and [DONE]: the message is complete
    # (its end was said), but the stream did not end, so the missing usage shows.
    cut = message_of(*chunks[:2], done=False)
    assert (cut.status, cut.stop_reason, cut.usage) == ("complete", "stop", None)
    assert cut.metadata["end_marker"] is False
    # Cut after the usage chunk, before [DONE]: the usage is there, the marker is not.
    late = message_of(*chunks, done=False)
    assert late.usage == whole.usage and late.metadata["end_marker"] is False


def test_a_provider_error_is_no_end_marker() -> None:
    message = message_of(chunk({"content": "x"}), {"error": {"message": "boom"}}, done=False)
    assert message.status == "error" and message.metadata["end_marker"] is False


def test_refusal_is_a_marked_text_part() -> None:
    message = message_of(
        chunk({"role": "assistant", "content": None, "refusal": ""}),
        chunk({"refusal": "I can't help"}),
        chunk({"refusal": " with that."}),
        chunk(finish="stop"),
    )
    (part,) = message.content
    assert (part.type, part.content, part.options) == (
        "text",
        "I can't help with that.",
        {"refusal": True, "utterance": "answer", "utterance_inferred": True},
    )
    assert (message.stop_reason, message.raw_stop_reason, message.status) == (
        "refusal",
        "stop",
        "complete",
    )


def test_usage_only_last_chunk_and_cumulative_repeats() -> None:
    # Perplexity repeats the running total on every chunk: it must not add up.
    message = message_of(
        chunk({"content": "a"}, usage={"prompt_tokens": 10, "completion_tokens": 1}),
        chunk({"content": "b"}, usage={"prompt_tokens": 10, "completion_tokens": 2}),
        chunk(finish="stop", usage={"prompt_tokens": 10, "completion_tokens": 3}),
    )
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (10, 3)


def test_usage_partial_running_total_keeps_earlier_fields() -> None:
    message = message_of(
        chunk(
            {"content": "a"},
            usage={
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens_details": {"reasoning_tokens": 1},
            },
        ),
        chunk(finish="stop", usage={"completion_tokens": 7}),
    )
    usage = message.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (10, 7, 4)
    assert usage.reasoning_tokens == 1
    assert usage.raw == {"completion_tokens": 7}


def test_groq_x_groq_usage_and_top_level_usage_are_not_added() -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}
    message = message_of(
        chunk({"content": "a"}),
        chunk(finish="stop", x_groq={"id": "req_1", "usage": usage}, usage=usage),
    )
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (9, 3)
    assert message.metadata["x_groq"] == {"id": "req_1"}


def test_deepseek_cache_hit_tokens() -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 3, "prompt_cache_hit_tokens": 8}
    message = message_of(chunk(finish="stop", usage=usage))
    assert message.usage is not None and message.usage.cache_read_tokens == 8


def test_thinking_closes_when_text_begins_and_text_when_thinking_begins_again() -> None:
    events = run(
        chunk({"reasoning_content": "first thought"}),
        chunk({"content": "words"}),
        chunk({"reasoning_content": "second thought"}),
        chunk({"content": "more words"}),
        chunk(finish="stop"),
    )
    message = final_message(events)
    assert [(p.type, p.content) for p in message.content] == [
        ("thinking", "first thought"),
        ("text", "words"),
        ("thinking", "second thought"),
        ("text", "more words"),
    ]
    kinds = [
        (type(e).__name__, getattr(e, "index", None))
        for e in events
        if isinstance(e, PartStarted | PartCompleted)
    ]
    assert kinds == [
        ("PartStarted", 0),
        ("PartCompleted", 0),
        ("PartStarted", 1),
        ("PartCompleted", 1),
        ("PartStarted", 2),
        ("PartCompleted", 2),
        ("PartStarted", 3),
        ("PartCompleted", 3),
    ]
    assert all(not e.explicit for e in events if isinstance(e, PartCompleted))


def test_reasoning_content_and_reasoning_in_one_delta_are_one_text() -> None:
    message = message_of(
        chunk({"reasoning_content": "same", "reasoning": "same"}),
        chunk(finish="stop"),
    )
    assert [(p.type, p.content) for p in message.content] == [("thinking", "same")]


def test_openrouter_reasoning_details_signature_summary_and_encrypted() -> None:
    message = message_of(
        chunk(
            {
                "reasoning": "Think",
                "reasoning_details": [
                    {"type": "reasoning.text", "text": "Think", "format": "f1", "index": 0}
                ],
            }
        ),
        chunk({"reasoning_details": [{"type": "reasoning.text", "signature": "ab", "index": 0}]}),
        chunk({"reasoning_details": [{"type": "reasoning.text", "signature": "cd", "index": 0}]}),
        chunk({"reasoning_details": [{"type": "reasoning.summary", "summary": "S", "index": 1}]}),
        chunk(
            {
                "reasoning_details": [
                    {"type": "reasoning.encrypted", "data": "opaque", "id": "r1", "index": 2}
                ]
            }
        ),
        chunk({"content": "Answer"}),
        chunk(finish="stop"),
    )
    thinking, summary, encrypted, text = message.content
    assert (thinking.type, thinking.content) == ("thinking", "Think")
    assert thinking.options == {"format": "f1", "signature": "abcd"}
    assert (summary.type, summary.content, summary.options) == (
        "thinking",
        "S",
        {"summary": True},
    )
    assert encrypted.type == "unsupported"
    assert encrypted.options["type"] == "reasoning.encrypted"
    assert encrypted.options["block"]["data"] == "opaque"
    assert text.content == "Answer"


def test_signature_only_details_leave_the_plain_reasoning_text() -> None:
    message = message_of(
        chunk(
            {
                "reasoning": "Plain text",
                "reasoning_details": [{"type": "reasoning.text", "signature": "sig", "index": 0}],
            }
        ),
        chunk(finish="stop"),
    )
    (part,) = message.content
    assert (part.content, part.options) == ("Plain text", {"signature": "sig"})


def test_empty_signature_is_never_stored() -> None:
    message = message_of(
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": "", "signature": ""}]}),
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": "T"}]}),
        chunk(finish="stop"),
    )
    (part,) = message.content
    assert part.content == "T" and "signature" not in part.options


def test_mistral_content_chunks_text_and_thinking() -> None:
    message = message_of(
        chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "hm"}]}]}),
        chunk({"content": [{"type": "thinking", "thinking": []}]}),
        chunk({"content": [{"type": "text", "text": "Yes"}, {"type": "reference", "ids": [1]}]}),
        chunk(finish="stop"),
    )
    assert [(p.type, p.content) for p in message.content] == [("thinking", "hm"), ("text", "Yes")]
    assert message.metadata["skipped_events"] == {"content.reference": 1}


def test_perplexity_search_results_are_citations_on_the_text() -> None:
    results = [
        {"title": "A", "url": "https://a", "date": "2025-01-01"},
        {"title": "B", "url": "https://b"},
    ]
    top: dict[str, Any] = {"citations": ["https://a", "https://b"], "search_results": results}
    message = message_of(
        chunk({"content": "Per [1]"}, **top),
        chunk({"content": " and [2]"}, **top),
        chunk(finish="stop", **top),
    )
    (part,) = message.content
    assert [(c.source.url, c.source.title) for c in part.citations if c.source] == [
        ("https://a", "A"),
        ("https://b", "B"),
    ]
    assert [c.metadata["number"] for c in part.citations] == [1, 2]
    assert part.citations[0].source is not None
    assert part.citations[0].source.metadata == {"date": "2025-01-01"}


def test_citations_before_any_text_wait_for_the_text_part() -> None:
    message = message_of(
        {"id": "x", "choices": [], "citations": ["https://a"]},
        chunk({"content": "Text [1]"}),
        chunk(finish="stop"),
    )
    (part,) = message.content
    assert [c.source.url for c in part.citations if c.source] == ["https://a"]


def test_executed_tools_are_opaque_parts_completed_by_their_output() -> None:
    message = message_of(
        chunk({"reasoning": "search"}),
        chunk({"executed_tools": [{"index": 0, "type": "search", "arguments": "{}"}]}),
        chunk({"executed_tools": [{"index": 0, "type": "search", "output": "found"}]}),
        chunk({"content": "Done"}),
        chunk(finish="stop"),
    )
    assert [p.type for p in message.content] == ["thinking", "unsupported", "text"]
    block = message.content[1].options["block"]
    assert block == {"index": 0, "type": "search", "arguments": "{}", "output": "found"}


def test_metadata_id_model_and_extras() -> None:
    message = message_of(
        chunk(
            {"content": "x"},
            system_fingerprint="fp_1",
            service_tier="default",
            provider="Google",
        ),
        chunk(finish="stop", id="chatcmpl-other"),
    )
    meta = message.metadata
    assert meta["id"] == "chatcmpl-1" and meta["model"] == "m"
    assert meta["system_fingerprint"] == "fp_1" and meta["service_tier"] == "default"
    assert meta["upstream_provider"] == "Google"
    assert meta["provider"] == "openai-chat"


def test_detected_without_a_provider_name() -> None:
    message = final_message(fold_bytes(sse(chunk({"content": "hi"}), chunk(finish="stop"))))
    assert message.metadata["provider"] == "openai-chat" and message.text == "hi"


# --- 6. display items at the earliest point ----------------------------------------------------


def _streamed_display_items(events: list[Event]) -> list[dict[str, Any]]:
    # A text part's marker may come after it completed (Chat's at [DONE]).
    return [i.model_dump() for i in streamed_display_items(events)]


def _strip_stop_reason(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        content = {k: v for k, v in item["content"].items() if k != "stop_reason"}
        out.append({**item, "content": content})
    return out


@pytest.mark.parametrize("rel", CHAT)
def test_streamed_display_items_equal_the_final_ones(rel: str) -> None:
    events = fold_bytes(read(rel))
    final = final_message(events)
    expected = [i.model_dump() for i in extract_display_items(final, order="stream")]
    assert _streamed_display_items(events) == _strip_stop_reason(expected)


def test_each_display_item_is_emitted_before_the_next_part_grows() -> None:
    events = run(
        chunk({"reasoning_content": "thinking..."}),
        chunk({"content": "Text"}),
        chunk({"content": " more"}),
        chunk({"tool_calls": [tc(0, "call_a", "f", '{"a": 1}')]}),
        chunk({"tool_calls": [tc(1, "call_b", "g", "{}")]}),
        chunk(finish="tool_calls"),
        {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
    )
    seq = [
        (type(e).__name__, getattr(e, "index", None), getattr(e, "content", None))
        for e in events
        if isinstance(e, PartStarted | PartDelta | PartCompleted)
    ]
    # The thinking item is out before the text part starts; the text item before the
    # first tool call starts; both tool calls complete at finish_reason, before usage.
    assert seq.index(("PartCompleted", 0, None)) < seq.index(("PartStarted", 1, None))
    assert seq.index(("PartCompleted", 1, None)) < seq.index(("PartStarted", 2, None))
    assert seq.index(("PartStarted", 3, None)) < seq.index(("PartCompleted", 2, None))
    finish = [i for i, e in enumerate(events) if isinstance(e, PartCompleted)][-1]
    usage_at = next(i for i, e in enumerate(events) if isinstance(e, UsageUpdated))
    assert finish < usage_at
    completed = [e for e in events if isinstance(e, PartCompleted)]
    assert [e.display_items[0].type for e in completed] == [
        "thinking",
        "text",
        "tool_call",
        "tool_call",
    ]
    assert isinstance(events[-1], MessageCompleted)


def test_decoder_emits_closes_in_open_order() -> None:
    decoder = OpenAIChatDecoder()
    out = decoder.decode(
        chunk({"tool_calls": [tc(0, "a", "f", "{}"), tc(1, "b", "g", "{}")]}), None
    )
    out += decoder.decode(chunk(finish="tool_calls"), None)
    opened = [d.key for d in out if isinstance(d, OpenPart)]
    closed = [d.key for d in out if isinstance(d, ClosePart)]
    assert opened == closed
    assert all(isinstance(d.part, ToolCall) for d in out if isinstance(d, OpenPart))
    assert not any(isinstance(d, ReportError) for d in out)
    assert sum(isinstance(d, GrowPart) for d in out) == 2


# The SSE hot lane gives exactly what the framer and decode() give.
#
# The lane learns each stream's chunk shape from a chunk it had to leave to the full path.
# Every stream here is folded twice, with and without the lane, split at arbitrary points,
# lenient and strict, with tight limits and live partial arguments: events, errors and the
# final message must not differ. The event pools, one per key order servers use, mix chunks
# the lane takes (text, reasoning, tool-call argument fragments, with any obfuscation value)
# with look-alikes it must leave to the full path: escapes, bad UTF-8, raw control
# characters, other spacing or key order, duplicate keys, a changed id, fingerprint or
# usage, another choice, an unknown or closed call, pending citations...

# Top-level key orders of real servers: OpenAI, Azure (sorted, choices first), DeepSeek
# (no obfuscation), xAI (fingerprint after choices).
_ORDERS: dict[str, tuple[str, ...]] = {
    "openai": (
        "id",
        "object",
        "created",
        "model",
        "service_tier",
        "system_fingerprint",
        "usage",
        "choices",
        "obfuscation",
    ),
    "azure": (
        "choices",
        "created",
        "id",
        "model",
        "obfuscation",
        "object",
        "system_fingerprint",
        "usage",
    ),
    "deepseek": ("id", "object", "created", "model", "system_fingerprint", "choices", "usage"),
    "xai": ("id", "object", "created", "model", "choices", "system_fingerprint"),
    # Perplexity: its source list in every chunk; Writer: choices before the model.
    "perplexity": ("id", "model", "created", "usage", "citations", "object", "choices"),
    "writer": (
        "id",
        "object",
        "choices",
        "created",
        "model",
        "usage",
        "system_fingerprint",
        "service_tier",
    ),
}


_BASE: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1700000000,
    "model": "gpt-x",
    "service_tier": "default",
    "system_fingerprint": "fp_1",
    "usage": None,
    "obfuscation": "Ab3",
    "citations": ["https://p.example/1", "https://p.example/2"],
}


# Stands for raw bytes in the JSON text: `"RAW"` becomes `"` + raw + `"`.
_RAW = "\u2603RAW\u2603"


def _chunk(
    order: str,
    delta: dict[str, Any],
    *,
    raw: bytes | None = None,
    finish: str | None = None,
    index: int = 0,
    choice: dict[str, Any] | None = None,
    **top: Any,
) -> bytes:
    """One `data:` chunk in the key order of `order` (`top` overrides or adds fields)."""
    body: dict[str, Any] = {"index": index, "delta": delta, "logprobs": None}
    body["finish_reason"] = finish
    body.update(choice or {})
    if order == "azure":
        body = {"content_filter_results": {}, **body}
        body = dict(sorted(body.items()))
    payload: dict[str, Any] = {}
    for name in _ORDERS[order]:
        if name == "choices":
            payload[name] = [body]
        elif name in top:
            payload[name] = top.pop(name)
        else:
            payload[name] = _BASE[name]
    payload.update(top)
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if raw is not None:
        data = data.replace(json.dumps(_RAW, ensure_ascii=False).encode(), b'"' + raw + b'"')
    return b"data: " + data + b"\n\n"


def _text(order: str, raw: bytes) -> bytes:
    return _chunk(order, {"content": _RAW}, raw=raw)


def _args(order: str, index: int, raw: bytes, **fragment: Any) -> bytes:
    call = {"index": index, **fragment, "function": {"arguments": _RAW}}
    return _chunk(order, {"tool_calls": [call]}, raw=raw)


def _start(order: str, index: int, call_id: str, name: str) -> bytes:
    function = {"name": name, "arguments": ""}
    call = {"index": index, "id": call_id, "type": "function", "function": function}
    return _chunk(order, {"tool_calls": [call]})


def _pool(order: str) -> dict[str, bytes]:
    """Chunks by name: those the lane takes once it learned their shape, and look-alikes."""
    events = {
        "hello": _text(order, b"Hello"),
        "unicode": _text(order, " world, naïve ☃ 😀".encode()),
        "empty": _text(order, b""),
        "escapes": _text(order, b'esc \\"q\\" \\n \\t \\u00e9 \\ud83d\\ude00 \\/ \\\\'),
        "bad escape": _text(order, b"bad escape \\x"),
        "lone surrogate": _text(order, b"lone \\ud800"),
        "raw quote": _text(order, b'raw " quote'),
        "trailing backslash": _text(order, b"trailing backslash \\"),
        "raw tab": _text(order, b"raw\ttab"),
        "raw control": _text(order, b"raw\x01ctl"),
        "raw newline": _text(order, b"raw\nnewline"),
        "bad utf8": _text(order, b"bad utf8 \xff\xfe"),
        "cut utf8": _text(order, b"cut utf8 \xe2\x98"),
        "utf8 surrogate": _text(order, b"surrogate \xed\xa0\x80"),
        # Obfuscation values: any printable value is the same chunk; others are not.
        "obf empty": _chunk(order, {"content": "obf"}, obfuscation=""),
        "obf long": _chunk(order, {"content": "obf"}, obfuscation="Zz9 " * 20),
        "obf unicode": _chunk(order, {"content": "obf"}, obfuscation="é"),
        "obf quote": _chunk(order, {"content": "obf"}, obfuscation='q"uote'),
        "obf number": _chunk(order, {"content": "obf"}, obfuscation=7),
        "obf bad utf8": _chunk(order, {"content": "obf"}, obfuscation=_RAW, raw=b"\xff"),
        "obf raw control": _chunk(order, {"content": "obf"}, obfuscation=_RAW, raw=b"\x01"),
        # The same text with something else changed.
        "new id": _chunk(order, {"content": "new id"}, id="chatcmpl-2"),
        "new created": _chunk(order, {"content": "new created"}, created=1700000001),
        "new fingerprint": _chunk(order, {"content": "new fp"}, system_fingerprint="fp_2"),
        "no fingerprint": _chunk(order, {"content": "no fp"}, system_fingerprint=None),
        "new tier": _chunk(order, {"content": "new tier"}, service_tier="flex"),
        "with usage": _chunk(order, {"content": "with usage"}, usage={"prompt_tokens": 3}),
        "upstream": _chunk(order, {"content": "upstream"}, provider="Azure"),
        "extra field": _chunk(order, {"content": "extra field"}, x_extra=1),
        "cited": _chunk(order, {"content": "cited"}, citations=["https://a.example"]),
        "other choice": _chunk(order, {"content": "other choice"}, index=1),
        "finishing": _chunk(order, {"content": "finishing"}, finish="stop"),
        "logprobs": _chunk(order, {"content": "logprobs"}, choice={"logprobs": {"content": []}}),
        "role after": _chunk(order, {"content": "with role", "role": "assistant"}),
        "role before": _chunk(order, {"role": "assistant", "content": "role first"}),
        "refusal null": _chunk(order, {"content": "a", "refusal": None}),
        "dup first": _chunk(order, {"content": "dup"}).replace(b'"dup"', b'"a","content":"dup"'),
        "dup later": _chunk(order, {"content": "dup"}).replace(b'"dup"', b'"dup","content":"b"'),
        # A later duplicate that says what the lane's first probe says.
        "dup probe": _chunk(order, {"content": "dup"}).replace(
            b'"dup"', b'"dup","content":"hot lane probe"'
        ),
        "obf in delta": _chunk(order, {"content": "obf in delta", "obfuscation": "x"}),
        "spaced": _chunk(order, {"content": "spaced"}).replace(b'"content":"', b'"content": "'),
        "no space": _chunk(order, {"content": "no space"}).replace(b"data: ", b"data:", 1),
        "id line": _chunk(order, {"content": "id line"}).replace(b"data: ", b"id: 7\ndata: ", 1),
        "named error": _chunk(order, {"content": "named"}).replace(
            b"data: ", b"event: error\ndata: "
        ),
        "crlf": _chunk(order, {"content": "crlf"}).replace(b"\n", b"\r\n"),
        "two data lines": _chunk(order, {"content": "two lines"})[:-1] + b"data: {}\n\n",
        "trailing space": _chunk(order, {"content": "space"}).replace(b"}\n\n", b"} \n\n"),
        # Reasoning: DeepSeek's reasoning_content, Groq's and OpenRouter's reasoning.
        "reasoning content": _chunk(order, {"content": None, "reasoning_content": "Let me"}),
        "reasoning escaped": _chunk(
            order, {"content": None, "reasoning_content": _RAW}, raw=b'more \\"thought\\"'
        ),
        "reasoning": _chunk(order, {"reasoning": "plain reasoning"}),
        "reasoning channel": _chunk(order, {"reasoning": "channel", "channel": "analysis"}),
        "reasoning both": _chunk(order, {"reasoning_content": "both", "reasoning": "both"}),
        "reasoning second": _chunk(order, {"reasoning_content": "", "reasoning": "second"}),
        "reasoning details": _chunk(
            order,
            {
                "reasoning": "detail",
                "reasoning_details": [{"type": "reasoning.text", "text": "detail", "index": 0}],
            },
        ),
        # Tool calls: starts, fragments by index (the lane's), and look-alikes.
        "start 0": _start(order, 0, "call_1", "f"),
        "start 1": _start(order, 1, "call_2", "g"),
        "start 0 again": _start(order, 0, "call_3", "h"),
        "args 0": _args(order, 0, b'{\\"a\\": '),
        "args 0 escapes": _args(order, 0, b'[1, \\"x\\\\\\""'),
        "args 0 plain": _args(order, 0, b"]}"),
        "args 0 empty": _args(order, 0, b""),
        "args 0 bad escape": _args(order, 0, b"bad \\q"),
        "args 1": _args(order, 1, b'{\\"b\\": 2}'),
        "args 2": _args(order, 2, b"unknown index"),
        "args empty id": _args(order, 0, b"empty id", id=""),
        "args with id": _args(order, 0, b"with id", id="call_1"),
        "args with name": _chunk(
            order, {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "n"}}]}
        ),
        "args no index": _chunk(order, {"tool_calls": [{"function": {"arguments": "x"}}]}),
        "args str index": _chunk(
            order, {"tool_calls": [{"index": "0", "function": {"arguments": "x"}}]}
        ),
        "args number": _chunk(order, {"tool_calls": [{"index": 0, "function": {"arguments": 1}}]}),
        # Fields repeated in every delta that the full path finds empty or never reads
        # (Snowflake, OpenRouter, Groq, Writer), and look-alikes where they act or are
        # of a wrong type.
        "snowflake": _chunk(
            order, {"content": "sf", "role": "assistant", "refusal": "", "tool_calls": []}
        ),
        "snowflake args": _chunk(
            order,
            {
                "content": "",
                "role": "assistant",
                "refusal": "",
                "tool_calls": [{"index": 0, "function": {"arguments": _RAW}}],
            },
            raw=b"sf args",
        ),
        "snowflake reasoning": _chunk(
            order, {"content": None, "reasoning_content": "sf r", "tool_calls": []}
        ),
        "empty lists": _chunk(
            order,
            {
                "content": "lists",
                "reasoning_details": [],
                "annotations": [],
                "executed_tools": [],
            },
        ),
        "content list reasoning": _chunk(order, {"content": [], "reasoning": "list r"}),
        "graph data": _chunk(
            order, {"content": "graph", "graph_data": {"sources": None}, "llm_data": None}
        ),
        "writer copy": _chunk(
            order,
            {"content": _RAW},
            raw=b"copy",
            choice={"message": {"content": _RAW, "role": "assistant"}},
        ),
        "writer copy differs": _chunk(
            order, {"content": "copy"}, choice={"message": {"content": "other"}}
        ),
        "function call empty": _chunk(order, {"content": "fc", "function_call": {}}),
        "refusal list": _chunk(order, {"content": "rl", "refusal": []}),
        "tool calls string": _chunk(order, {"content": "tcs", "tool_calls": ""}),
        "reasoning list": _chunk(order, {"content": "rsl", "reasoning_content": []}),
        "details full": _chunk(
            order,
            {"content": "df", "reasoning_details": [{"type": "reasoning.text", "text": "t"}]},
        ),
        "args custom type": _args(order, 0, b"custom", type="custom"),
        "args custom body": _args(order, 0, b"custom", custom={"input": "x"}),
        "args empty list": _chunk(order, {"tool_calls": [], "content": "args empty list"}),
        # Everything else a stream holds.
        "role": _chunk(order, {"role": "assistant", "content": "", "refusal": None}),
        "refusal": _chunk(order, {"refusal": "I can't"}),
        "annotation": _chunk(
            order,
            {
                "content": "",
                "annotations": [
                    {"type": "url_citation", "url_citation": {"url": "https://b.example"}}
                ],
            },
        ),
        "citations": _chunk(order, {"content": ""}, citations=["https://c.example"]),
        "finish tools": _chunk(order, {}, finish="tool_calls"),
        "finish usage": _chunk(order, {}, finish="stop", usage={"prompt_tokens": 3}),
        "usage only": b'data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3}}\n\n',
        "error": b'data: {"error":{"type":"server_error","message":"busy"}}\n\n',
        "done": b"data: [DONE]\n\n",
        "comment": b": keep-alive\n\n",
        "blank": b"\n",
        "unterminated": _chunk(order, {"content": "unterminated"})[:-12],
    }
    return events


_POOLS = {order: _pool(order) for order in _ORDERS}


_NAMES = list(_POOLS["openai"])


# The chunks the lane takes once learned, and those that change what it may take: picked
# more often, so that learned shapes meet the state changes.
_CORE = [
    "hello",
    "unicode",
    "escapes",
    "obf long",
    "reasoning content",
    "reasoning",
    "args 0",
    "args 0 escapes",
    "args 1",
    "start 0",
    "start 1",
    "start 0 again",
    "new fingerprint",
    "refusal",
    "finish tools",
    "reasoning details",
    "citations",
    "empty",
    "dup probe",
    "obf bad utf8",
    "with usage",
    "snowflake",
    "snowflake args",
    "writer copy",
    "args custom type",
    "cited",
]


_PICK = st.one_of(st.sampled_from(_CORE), st.sampled_from(_CORE), st.sampled_from(_NAMES))


def _opening(order: str) -> bytes:
    """A stream start: the role chunk and a first text chunk (the text part is open)."""
    return _POOLS[order]["role"] + _text(order, b"Hi")


@pytest.mark.usefixtures("lane_from_the_first_event")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    order=st.sampled_from(sorted(_ORDERS)),
    picks=st.lists(_PICK, max_size=30),
    cuts=st.lists(st.integers(0, 12000), max_size=6),
    opening=st.booleans(),
    options=HOT_LANE_OPTIONS,
    named=st.booleans(),
)
def test_chat_hot_lane_equals_full_path(
    order: str,
    picks: list[str],
    cuts: list[int],
    opening: bool,
    options: dict[str, Any],
    named: bool,
) -> None:
    pool = _POOLS[order]
    data = (_opening(order) if opening else b"") + b"".join(pool[name] for name in picks)
    assert_hot_lane_same(split_at(data, cuts), "openai-chat" if named else None, **options)


@pytest.mark.usefixtures("lane_from_the_first_event")
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    order=st.sampled_from(sorted(_ORDERS)),
    runs=st.lists(st.tuples(_PICK, st.integers(1, 4)), min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 30000), max_size=4),
    options=HOT_LANE_OPTIONS,
)
def test_chat_hot_lane_runs_equal_full_path(
    order: str, runs: list[tuple[str, int]], cuts: list[int], options: dict[str, Any]
) -> None:
    """Runs of the same chunk, so that shapes are learned and then taken (and met again
    after other chunks changed the state)."""
    pool = _POOLS[order]
    data = _opening(order) + b"".join(pool[name] * n for name, n in runs)
    assert_hot_lane_same(split_at(data, cuts), "openai-chat", **options)


# Each: a shape learned, something that changes what the fast path takes, the shape again.
_SCENARIOS = [
    ["hello", "hello", "hello", "new fingerprint", "hello", "hello", "hello"],
    ["hello", "hello", "hello", "upstream", "hello", "with usage", "hello", "hello"],
    ["hello", "hello", "empty", "hello", "empty"],
    ["dup probe", "dup probe", "dup probe", "dup probe"],
    ["dup later", "dup later", "dup later", "dup first", "dup first", "dup first"],
    ["hello", "hello", "obf long", "obf empty", "obf unicode", "obf bad utf8", "obf raw control"],
    ["start 0", "args 0", "args 0 plain", "args 0", "finish tools", "args 0", "args 0 plain"],
    ["start 0", "args 0", "args 0", "args 0", "refusal", "args 0", "args 0"],
    ["start 0", "args 0", "args 0", "start 1", "args 1", "args 1", "args 0", "args 1"],
    ["start 0", "args 0", "args 0", "start 0 again", "args 0", "args 0", "args 0"],
    ["start 0", "args 0", "args 0", "args 0 empty", "args 0 bad escape", "args 0 escapes"],
    ["start 0", "args 0", "args 0", "args 2", "args with id", "args empty id", "args 0"],
    ["hello", "hello", "hello", "start 0", "args 0", "args 0", "hello", "hello", "args 0"],
    ["reasoning", "reasoning", "reasoning", "reasoning details", "reasoning", "reasoning"],
    ["reasoning content"] * 3 + ["hello", "hello", "hello", "reasoning content"] * 2,
    ["reasoning content"] * 3 + ["reasoning escaped", "citations", "reasoning content", "hello"],
    ["hello", "hello", "hello", "citations", "hello", "annotation", "hello"],
    ["new id", "hello", "new id", "new created", "hello", "new created", "hello"],
    ["hello", "hello", "hello", "other choice", "hello", "finishing", "hello"],
    ["hello", "hello", "hello", "error", "hello"],
    ["hello", "hello", "hello", "done", "hello"],
    ["hello", "hello", "hello", "finish usage", "hello", "usage only", "hello"],
    ["start 0", "args 0", "args 0", "reasoning content", "args 0", "args 0"],
    # Usage and sources repeated as folded: taken after the first; changed: not.
    ["hello", "with usage", "with usage", "with usage", "hello", "with usage", "finish usage"],
    ["hello", "cited", "cited", "cited", "citations", "cited", "cited"],
    ["snowflake", "snowflake", "snowflake", "empty lists", "graph data", "snowflake"],
    ["start 0", "snowflake args", "snowflake args", "snowflake args", "args 0", "args 0"],
    ["start 0", "snowflake args", "snowflake args", "args custom type", "snowflake args"],
    ["start 0", "args 0", "args 0", "args custom body", "args 0", "args 0"],
    ["hello", "snowflake", "snowflake", "start 0", "snowflake args", "snowflake args"],
    ["reasoning content", "snowflake reasoning", "snowflake reasoning", "snowflake reasoning"],
    ["reasoning", "content list reasoning", "content list reasoning", "snowflake"],
    ["writer copy", "writer copy", "writer copy", "writer copy differs", "writer copy"],
    ["hello", "hello", "function call empty", "hello", "hello"],
    ["hello", "hello", "refusal list", "hello"],
    ["hello", "hello", "tool calls string", "hello"],
    ["hello", "hello", "reasoning list", "hello"],
    ["hello", "hello", "details full", "hello", "hello"],
    ["start 0", "args 0", "args empty list", "args 0", "args 0"],
]


# Each a text chunk the lane must leave to the full path once the text shape is learned
# (most of them end the fold with an error, so each gets a stream of its own).
_SCENARIOS += [
    ["hello", "hello", name, "hello"]
    for name in _NAMES
    if name.startswith(("raw ", "bad ", "cut ", "lone ", "trailing ", "utf8 ", "obf "))
]


_SCENARIOS += [
    ["start 0", "args 0", "args 0", name, "args 0"] for name in _NAMES if name.startswith("args ")
]


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("order", sorted(_ORDERS))
@pytest.mark.parametrize("scenario", _SCENARIOS, ids=lambda names: "+".join(names[:3]))
def test_chat_hot_lane_state_changes(order: str, scenario: list[str]) -> None:
    pool = _POOLS[order]
    data = _opening(order) + b"".join(pool[name] for name in scenario)
    for size in (len(data), 7, 97, 301):
        pieces = [data[at : at + size] for at in range(0, len(data), size)]
        assert_hot_lane_same(pieces, "openai-chat")
    assert_hot_lane_same([data[:50], data[50:]], "openai-chat", strict=True)
    assert_hot_lane_same([data[:50], data[50:]], "openai-chat", partial_arguments=True)
    limits = Limits(max_part_chars=40, max_tool_argument_chars=12)
    assert_hot_lane_same([data[:50], data[50:]], "openai-chat", limits=limits)


_CHAT_RECORDINGS = sorted(e["file"] for e in INDEX if e.get("api") == "chat-completions")


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("rel", _CHAT_RECORDINGS)
def test_chat_recordings_hot_lane_equals_full_path(rel: str) -> None:
    data = read(rel)
    for size in (7, 61, 300, 4096):
        pieces = [data[at : at + size] for at in range(0, len(data), size)]
        assert_hot_lane_same(pieces, "openai-chat")
        assert_hot_lane_same(pieces, None)
    assert_hot_lane_same([data], "openai-chat", strict=True)
    assert_hot_lane_same([data], "openai-chat", partial_arguments=True)


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize(
    ("rel", "most"),
    [
        ("openai-chat/text-long-nano.sse", 5),
        ("openai-chat/tool-call-long-args.sse", 4),
        ("openai-chat/tool-calls-parallel-interleaved-args.sse", 7),
        ("azure-openai/chat-model-router.sse", 6),
        ("deepseek/chat-finish-length.sse", 4),
        ("deepseek/reasoner-reasoning-content.sse", 6),
        ("deepseek/reasoner-tool-call.sse", 6),
        ("zai/glm-thinking-reasoning-content.sse", 5),
        ("xai/chat-reasoning-content-tool-call.sse", 5),
    ],
)
def test_chat_hot_lane_takes_the_common_chunks(
    monkeypatch: pytest.MonkeyPatch, rel: str, most: int
) -> None:
    """Not vacuous: on real recordings the lane takes nearly every text, reasoning and
    argument chunk, and decode() sees only the few that open or end something."""
    data = read(rel)
    decoded = decoded_payloads(monkeypatch, openai_chat.OpenAIChatDecoder)
    pieces = [data[at : at + 4096] for at in range(0, len(data), 4096)]
    deltas = sum(type(e) is PartDelta for e in fold(pieces, "openai-chat"))
    assert deltas >= data.count(b"\ndata: ") - 5
    assert len(decoded) <= most
    assert decoded[-1].get("choices") == [] or decoded[-1]["choices"][0]["finish_reason"]


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[bytes]:
    """Where the decoder's method `name` (taking the bytes and an offset) was called."""
    calls: list[bytes] = []
    original = getattr(openai_chat.OpenAIChatDecoder, name)

    def counting(self: openai_chat.OpenAIChatDecoder, data: bytes, at: Any) -> Any:
        calls.append(data[at : at + 40] if type(at) is int else data)
        return original(self, data, at)

    monkeypatch.setattr(openai_chat.OpenAIChatDecoder, name, counting)
    return calls


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize(
    "changed",
    [
        # Groq compound sends a new id on every chunk; others a new timestamp.
        lambda n: {"id": f"chatcmpl-{n}"},
        lambda n: {"created": 1700000000 + n},
        # Not plain at all: a new usage in every chunk (Perplexity), text as a list of
        # content chunks (Mistral).
        lambda n: {"usage": {"completion_tokens": n}},
        lambda n: {"delta": {"content": [{"type": "text", "text": f" word{n}"}]}},
    ],
)
def test_chat_hot_lane_gives_up_when_it_cannot_pay(
    monkeypatch: pytest.MonkeyPatch, changed: Callable[[int], dict[str, Any]]
) -> None:
    """A stream whose chunks the lane cannot take: it stops learning after a few chunks
    and goes off, so the fold frames the rest as without the lane."""
    probes = _counting(monkeypatch, "_hot_probe")
    learns = _counting(monkeypatch, "_hot_learn")
    chunks = [_text("openai", b"Hi")]
    for n in range(300):
        fields = changed(n)
        delta = fields.pop("delta", {"content": f" word{n}"})
        chunks.append(_chunk("openai", delta, **fields))
    data = b"".join(chunks)
    events = fold([data[at : at + 997] for at in range(0, len(data), 997)], "openai-chat")
    text = "".join(e.content or "" for e in events if type(e) is PartDelta)
    assert text == "Hi" + "".join(f" word{n}" for n in range(300))
    assert len(probes) <= 4
    assert len(learns) <= openai_chat._HOT_CREDIT + 2
    assert_hot_lane_same(split_at(data, [5000, 20000]), "openai-chat")


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize(
    "rel", ["openai-chat/text-long-nano.sse", "deepseek/reasoner-tool-call.sse"]
)
def test_chat_hot_lane_state_saves_and_restores(rel: str) -> None:
    """A fold saved once the lane learned shapes restores and continues the same (the
    shapes are plain data)."""
    data = read(rel)
    pieces = [data[at : at + 1000] for at in range(0, len(data), 1000)]
    half = len(pieces) // 2
    folder = StreamFolder(provider="openai-chat")
    events = [e for piece in pieces[:half] for e in folder.feed(piece)]
    assert folder._decoder is not None and folder._decoder._hot_shapes  # type: ignore[attr-defined]
    restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    events += [e for piece in pieces[half:] for e in restored.feed(piece)] + restored.close()
    whole = fold(pieces, "openai-chat")
    assert [event_to_json(e) for e in events] == [event_to_json(e) for e in whole]


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("bad", [b"\x01", b"\n", b"\xff", b"\\", b'"'])
def test_a_raw_obfuscation_value_json_rejects_is_left_to_the_full_path(bad: bytes) -> None:
    """The obfuscation value the lane lets vary must still be one JSON accepts as is."""
    plain = [_chunk("openai", {"content": f"t{i}"}) for i in range(6)]
    broken = plain[0].replace(b'"obfuscation":"Ab3"', b'"obfuscation":"A' + bad + b'3"')
    assert broken != plain[0]
    data = _chunk("openai", {"role": "assistant", "content": ""}) + b"".join(plain) + broken
    assert_hot_lane_same([data], "openai-chat")
    assert_hot_lane_same([data + b"".join(plain)], "openai-chat", strict=True)


# The fast path (object_text) gives exactly what the full path gives: chunks drawn from the
# cases the fast paths must tell apart.


_CHAT_META = {"id": "c1", "model": "m", "object": "chat.completion.chunk"}


def _chat(delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    return {**_CHAT_META, "choices": [choice], **top}


def _frag(**fields: Any) -> dict[str, Any]:
    return {"tool_calls": [fields]}


_CHAT_CHUNKS = [
    _chat({"role": "assistant", "content": ""}),
    _chat({"content": "hi"}),
    _chat({"content": "", "role": None}),
    _chat({"refusal": "no"}),
    _chat({"reasoning_content": "think"}),
    _chat({"reasoning": "more"}),
    _chat({"reasoning_content": "", "reasoning": "plain"}),
    _chat({"reasoning_content": "a", "reasoning": "a"}),
    _chat({"reasoning_details": [{"type": "reasoning.text", "text": "d", "index": 1}]}),
    _chat({"reasoning_details": [{"type": "reasoning.text", "signature": "s", "index": 0}]}),
    _chat(_frag(index=0, id="call_a", type="function", function={"name": "f", "arguments": ""})),
    _chat(_frag(index=1, id="call_b", type="function", function={"name": "g", "arguments": "{"})),
    _chat(_frag(index=0, function={"arguments": '{"x": '})),
    _chat(_frag(index=1, function={"arguments": "1}"})),
    _chat(_frag(index=2, function={"arguments": "[]"})),
    _chat(_frag(index=0, id="", function={"name": "", "arguments": "2"})),
    _chat(_frag(index=0, id="call_a", function={"arguments": "3"})),
    _chat(_frag(index=0, id="call_c", function={"arguments": "4"})),
    _chat(_frag(index=0, function={"name": "h", "arguments": "5"})),
    _chat(_frag(index=True, function={"arguments": "6"})),
    _chat(_frag(index=0, function={"arguments": 7})),
    _chat(_frag(index=0, function=None)),
    _chat(_frag(function={"arguments": "8"})),
    _chat({"tool_calls": [{"index": 0, "function": {"arguments": "9"}}, {"index": 1}]}),
    _chat({"tool_calls": [{"index": 0, "function": {"arguments": "x"}}], "content": "t"}),
    _chat({}, "tool_calls"),
    _chat({}, "stop"),
    _chat({"content": "u"}, usage={"prompt_tokens": 1, "completion_tokens": 2}),
    _chat({"content": "m"}, model="other"),
    _chat({"content": "s"}, system_fingerprint="fp"),
    _chat({"content": "t"}, service_tier="flex", obfuscation="xx"),
    _chat({"content": "p"}, provider="Upstream"),
    _chat({"content": "g"}, x_groq={"id": "g"}),
    _chat({"content": "n"}, usage=None, error=None),
    _chat({"content": "c"}, citations=["https://a.example"]),
    {**_CHAT_META, "choices": [{"index": 1, "delta": {"content": "other choice"}}]},
    {**_CHAT_META, "choices": ["not a choice"]},
    {**_CHAT_META, "choices": [{"index": 0}]},
    {**_CHAT_META, "choices": [{"index": 0, "delta": "text"}]},
    _chat({"content": "r", "tool_calls": None}),
    _chat(_frag(index=0, type="function", function={"arguments": "q", "name": None})),
    _chat(_frag(index=0, function="arguments")),
    _chat({"tool_calls": ["fragment"]}),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.sampled_from(range(len(_CHAT_CHUNKS))), max_size=25),
    strict=st.booleans(),
    error_event=st.booleans(),
)
def test_chat_fast_equals_full(picks: list[int], strict: bool, error_event: bool) -> None:
    chunks = [_CHAT_CHUNKS[i] for i in picks]
    assert_fast_same(chunks, "openai-chat", strict=strict)
    # As SSE, some chunks in an event named error (which must carry an error object).
    sse = b"".join(
        (b"event: error\n" if error_event and n % 3 == 1 else b"")
        + b"data: "
        + json.dumps(chunk).encode()
        + b"\n\n"
        for n, chunk in enumerate(chunks)
    )
    assert_fast_same([sse] if sse else [], "openai-chat", strict=strict)


# A call open at index 0 (or text open), then a chunk that only looks like its next piece:
# each of the fast path's checks in turn decides. Drawn at random above, they are rare.
_CHAT_OPEN_CALL = [_CHAT_CHUNKS[10], _CHAT_CHUNKS[12]]


_CHAT_LOOK_ALIKES = [
    _chat(_frag(index=0, function={"name": "h", "arguments": "5"})),
    _chat(_frag(index=0, function={"name": "", "arguments": "5"})),
    _chat(_frag(index=0, id="call_z", function={"arguments": "5"})),
    _chat(_frag(index=0, id="", type="function", function={"arguments": "5"})),
    _chat({"tool_calls": [{"index": 0, "function": {"arguments": "5"}}], "role": "assistant"}),
    _chat({"tool_calls": [{"index": 0, "function": {"arguments": "5"}}], "refusal": "no"}),
]


@pytest.mark.parametrize("look_alike", range(len(_CHAT_LOOK_ALIKES)))
@pytest.mark.parametrize("opening", ["call", "text"])
def test_chat_look_alikes_fast_equals_full(look_alike: int, opening: str) -> None:
    chunk = _CHAT_LOOK_ALIKES[look_alike]
    start = _CHAT_OPEN_CALL if opening == "call" else [_CHAT_CHUNKS[1]]
    text_like = _chat({**chunk["choices"][0]["delta"], "content": "t"})
    for strict in (False, True):
        assert_fast_same([*start, chunk, _CHAT_CHUNKS[13]], "openai-chat", strict=strict)
        assert_fast_same([*start, text_like, _CHAT_CHUNKS[1]], "openai-chat", strict=strict)


# --- custom (free-text) tool calls ----------------------------------------------------------


def custom(
    index: int = 0, call_id: str | None = None, name: str | None = None, text: str | None = None
) -> dict[str, Any]:
    """One tool_calls fragment of a custom tool: {"type": "custom", "custom": {name, input}}."""
    body: dict[str, Any] = {}
    if name is not None:
        body["name"] = name
    if text is not None:
        body["input"] = text
    fragment: dict[str, Any] = {"index": index, "custom": body}
    if call_id is not None:
        fragment["id"] = call_id
        fragment["type"] = "custom"
    return fragment


CUSTOM_CHUNKS = [
    chunk({"role": "assistant", "content": "Running it."}),
    chunk({"tool_calls": [custom(0, "call_1", "code_exec", "")]}),
    chunk({"tool_calls": [custom(0, text="print(")]}),
    chunk({"tool_calls": [custom(0, text="'a \"quoted\" {not json')")]}),
    chunk({"tool_calls": [tc(1, "call_2", "get_weather", '{"city": ')]}),
    chunk({"tool_calls": [tc(1, arguments='"Paris"}')]}),
    chunk(finish="tool_calls"),
]
CUSTOM_INPUT = "print('a \"quoted\" {not json')"


def _assert_custom_calls(message: Message) -> None:
    first, second = message.tool_calls
    assert (first.call_id, first.name, first.arguments) == (
        "call_1",
        "code_exec",
        {"input": CUSTOM_INPUT},
    )
    assert first.metadata["type"] == "custom_tool_call"
    assert first.status == "complete"
    assert "arguments_error" not in first.metadata
    assert (second.name, second.arguments) == ("get_weather", {"city": "Paris"})
    assert "type" not in second.metadata


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, len(sse(*CUSTOM_CHUNKS))), max_size=8))
def test_a_custom_tool_call_keeps_its_name_and_free_text_from_split_bytes(cuts: list[int]) -> None:
    data = sse(*CUSTOM_CHUNKS)
    _assert_custom_calls(final_message(list(fold(split_at(data, cuts), "openai-chat"))))


def test_a_custom_tool_call_from_dicts_is_the_same_and_streams_its_text() -> None:
    events = list(fold(CUSTOM_CHUNKS, "openai-chat", partial_arguments=True))
    message = final_message(events)
    _assert_custom_calls(message)
    # Free text, not JSON: never scanned as partial arguments (no fault recorded).
    assert "partial_arguments_error" not in message.tool_calls[0].metadata
    grown = [e.content for e in events if isinstance(e, PartDelta) and e.index == 1]
    assert "".join(d for d in grown if isinstance(d, str)) == CUSTOM_INPUT
    assert_hot_lane_same([sse(*CUSTOM_CHUNKS)], "openai-chat")


def test_a_custom_tool_call_round_trips_through_encode() -> None:
    message = final_message(list(fold([sse(*CUSTOM_CHUNKS)], "openai-chat")))
    body = encode([message], provider="openai-chat", model="m")
    entry = body["messages"][-1]["tool_calls"][0]
    assert entry == {
        "id": "call_1",
        "type": "custom",
        "custom": {"name": "code_exec", "input": CUSTOM_INPUT},
    }


def test_a_custom_tool_call_cut_short_keeps_its_text_as_incomplete() -> None:
    message = final_message(list(fold([sse(*CUSTOM_CHUNKS[:4], done=False)], "openai-chat")))
    (call,) = message.tool_calls
    assert (call.name, call.arguments, call.status) == (
        "code_exec",
        {"input": CUSTOM_INPUT},
        "incomplete",
    )
    assert call.metadata["type"] == "custom_tool_call"


def test_a_custom_tool_call_resumes_from_a_saved_state() -> None:
    data = sse(*CUSTOM_CHUNKS)
    cut = data.index(b"print(") + 20  # inside the custom call's text
    folder = StreamFolder()
    folder.feed(data[:cut])
    restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    events = [*restored.feed(data[cut:]), *restored.close()]
    _assert_custom_calls(final_message(events))


@pytest.mark.parametrize(
    ("fragment", "says"),
    [
        (
            {"index": 0, "id": "c", "type": "custom", "custom": "print(1)"},
            "tool call custom to be an object",
        ),
        (
            {"index": 0, "id": "c", "type": "custom", "custom": {"input": 5}},
            "tool call custom.input to be a string",
        ),
        (
            {"index": 0, "id": "c", "type": "custom", "custom": {"name": ["x"]}},
            "tool call custom.name to be a string",
        ),
    ],
)
def test_a_malformed_custom_tool_call_is_a_protocol_error(
    fragment: dict[str, Any], says: str
) -> None:
    with pytest.raises(StreamProtocolError, match=says) as info:
        run(chunk({"content": "kept"}), chunk({"tool_calls": [fragment]}))
    assert info.value.partial is not None and info.value.partial.text == "kept"


def test_function_arguments_for_a_custom_tool_call_are_a_protocol_error() -> None:
    start = chunk({"tool_calls": [custom(0, "call_1", "code_exec", "x")]})
    wrong = chunk({"tool_calls": [tc(0, arguments='{"a": 1}')]})
    with pytest.raises(StreamProtocolError, match="expected a custom fragment for tool call"):
        run(start, wrong)
