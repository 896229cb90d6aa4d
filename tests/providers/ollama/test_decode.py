"""Ollama decoder: /api/generate recordings and hand-written /api/chat lines."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import coalesce, final_message, fold_bytes, read, recordings

from streamfold import (
    ContentPart,
    Message,
    PartCompleted,
    StreamProtocolError,
    detect_provider,
    fold,
    fold_message,
)
from streamfold.deltas import ClosePart, EndMessage, GrowPart, OpenPart
from streamfold.providers.ollama import OllamaDecoder

OLLAMA = recordings("ollama")
MODEL = "qwen3:8b"


def _lines(rel: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read(rel).decode().splitlines() if line.strip()]


def chat(
    content: str = "",
    *,
    thinking: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    done: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """One /api/chat stream line, shaped as Ollama sends it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "model": MODEL,
        "created_at": "2025-06-01T10:00:00.000000001Z",
        "message": message,
        "done": done,
        **extra,
    }


def final(reason: str | None = "stop", **extra: Any) -> dict[str, Any]:
    line = chat(
        done=True,
        total_duration=900,
        load_duration=100,
        prompt_eval_count=12,
        prompt_eval_duration=200,
        eval_count=34,
        eval_duration=500,
        **extra,
    )
    if reason is not None:
        line["done_reason"] = reason
    return line


def _ndjson(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)


THINK_THEN_ANSWER = [
    chat(thinking="Let me"),
    chat(thinking=" think."),
    chat("The answer"),
    chat(" is 4."),
    final(),
]


# --- recordings and detection ------------------------------------------------------------


@pytest.mark.parametrize("rel", OLLAMA)
def test_every_line_of_the_recordings_is_detected(rel: str) -> None:
    assert all(detect_provider(line) == "ollama" for line in _lines(rel))


def test_chat_lines_are_detected() -> None:
    assert all(detect_provider(line) == "ollama" for line in THINK_THEN_ANSWER)


def test_generate_thinking_then_text_gives_two_parts() -> None:
    message = final_message(fold_bytes(read("ollama/generate-gpt-oss-thinking.ndjson")))
    thinking, text = message.content
    assert thinking.type == "thinking"
    assert thinking.content is not None and thinking.content.startswith('User asks: "Describe')
    assert thinking.content.endswith('"fluffy, quick, timid" or similar.')
    assert (text.type, text.content) == ("text", "Fluffy, swift, gentle.")
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (81, 53)
    assert message.metadata["model"] == "gpt-oss:120b"
    assert message.metadata["created_at"] == "2025-08-23T11:02:35.981493063Z"
    assert message.metadata["total_duration"] == 602776194


def test_generate_text_only() -> None:
    message = final_message(fold_bytes(read("ollama/generate-deepseek-v3.1.ndjson")))
    assert [p.type for p in message.content] == ["text"]
    assert message.text == "Fluffy, hoppy, twitchy."
    assert (message.status, message.stop_reason, message.raw_stop_reason) == (
        "complete",
        "stop",
        "stop",
    )


# --- /api/chat ---------------------------------------------------------------------------


def test_chat_thinking_then_text_gives_two_parts_and_thinking_is_closed_by_text() -> None:
    events = list(fold(THINK_THEN_ANSWER, "ollama"))
    message = final_message(events)
    assert message.content == [
        ContentPart.thinking("Let me think."),
        ContentPart.text("The answer is 4.", utterance="answer", utterance_inferred=True),
    ]
    completed = [e for e in events if isinstance(e, PartCompleted)]
    # The thinking part ends when text begins (inferred), before the message ends.
    assert [(e.index, e.explicit) for e in completed] == [(0, False), (1, False)]
    assert events.index(completed[0]) < next(
        i for i, e in enumerate(events) if getattr(e, "content", None) == "The answer"
    )
    assert message.metadata == {
        "provider": "ollama",
        "model": MODEL,
        "created_at": "2025-06-01T10:00:00.000000001Z",
        "total_duration": 900,
        "load_duration": 100,
        "prompt_eval_duration": 200,
        "eval_duration": 500,
        "end_marker": True,  # done: true
    }
    assert message.usage is not None
    assert message.usage.raw == {"prompt_eval_count": 12, "eval_count": 34}


def test_thinking_and_content_in_one_line_keep_their_order() -> None:
    message = fold_message([chat("answer", thinking="thought"), final()], "ollama")
    assert [(p.type, p.content) for p in message.content] == [
        ("thinking", "thought"),
        ("text", "answer"),
    ]


def test_thinking_after_text_opens_a_new_part() -> None:
    message = fold_message(
        [chat(thinking="a"), chat("b"), chat(thinking="c"), chat("d"), final()], "ollama"
    )
    assert [(p.type, p.content) for p in message.content] == [
        ("thinking", "a"),
        ("text", "b"),
        ("thinking", "c"),
        ("text", "d"),
    ]


def test_empty_fields_make_no_part() -> None:
    decoder = OllamaDecoder()
    first = decoder.decode(chat("", thinking=""))
    assert len(first) == 1  # only the model / created_at metadata
    assert decoder.decode(chat("", thinking="")) == []


def test_tool_calls_arrive_whole_and_get_stable_ids() -> None:
    weather = {"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
    events = list(
        fold(
            [
                chat("Checking."),
                chat(tool_calls=[weather, {"function": {"name": "get_time", "arguments": {}}}]),
                final(),
            ],
            "ollama",
        )
    )
    message = final_message(events)
    first, second = message.tool_calls
    assert (first.call_id, first.name, first.arguments) == (
        "call_0_get_weather",
        "get_weather",
        {"city": "Paris", "days": 2},
    )
    assert (second.call_id, second.name, second.arguments) == ("call_1_get_time", "get_time", {})
    assert first.metadata["generated_id"] is True
    assert first.status == second.status == "complete"
    # Text, then the two calls, in streamed order; the calls' ends are on the wire.
    assert [type(p).__name__ for p in message.stream_order()] == [
        "ContentPart",
        "ToolCall",
        "ToolCall",
    ]
    ends = [(e.index, e.explicit) for e in events if isinstance(e, PartCompleted)]
    assert ends == [(0, False), (1, True), (2, True)]
    # Ollama says "stop" for a tool-calling turn; the normalised reason says tools.
    assert (message.stop_reason, message.raw_stop_reason, message.status) == (
        "tool_use",
        "stop",
        "complete",
    )


def test_tool_call_ids_and_indexes_from_the_server_are_kept() -> None:
    call = {
        "id": "call_abc",
        "function": {"index": 3, "name": "lookup", "arguments": '{"q": "x"}'},
    }
    message = fold_message([chat(tool_calls=[call]), final()], "ollama")
    (tool,) = message.tool_calls
    assert (tool.call_id, tool.arguments, tool.metadata) == ("call_abc", {"q": "x"}, {"index": 3})


def test_tool_call_arguments_keep_unicode_and_nesting() -> None:
    args = {"text": "café ☕", "nested": {"list": [1, 2.5, None, True]}}
    message = fold_message(
        [chat(tool_calls=[{"function": {"name": "f", "arguments": args}}]), final()], "ollama"
    )
    assert message.tool_calls[0].arguments == args


def test_decoder_deltas_for_a_tool_call() -> None:
    decoder = OllamaDecoder()
    decoder.decode(chat())
    out = decoder.decode(chat(tool_calls=[{"function": {"name": "f", "arguments": {"a": 1}}}]))
    assert len(out) == 2
    opened, closed = out
    assert isinstance(opened, OpenPart)
    assert opened.key == ("tool", 0)
    assert closed == ClosePart(("tool", 0), explicit=True)


@pytest.mark.parametrize(
    ("reason", "stop_reason", "status"),
    [
        ("stop", "stop", "complete"),
        ("length", "length", "length"),
        ("load", "other", "complete"),
        ("unload", "other", "complete"),
        ("something_new", "other", "complete"),
        (None, "stop", "complete"),
    ],
)
def test_done_reasons(reason: str | None, stop_reason: str, status: str) -> None:
    message = fold_message([chat("hi"), final(reason)], "ollama")
    assert (message.stop_reason, message.status, message.raw_stop_reason) == (
        stop_reason,
        status,
        reason,
    )


def test_done_ends_the_message_and_later_lines_are_ignored() -> None:
    decoder = OllamaDecoder()
    out = decoder.decode(final())
    assert isinstance(out[-1], EndMessage)
    message = fold_message([chat("a"), final(), chat("late")], "ollama")
    assert message.text == "a"


def test_text_in_the_final_line_is_kept() -> None:
    line = final()
    line["message"]["content"] = "tail"
    message = fold_message([chat("head "), line], "ollama")
    assert message.text == "head tail"


def test_an_error_line_ends_with_status_error_keeping_parts() -> None:
    message = fold_message(
        [chat(thinking="hmm"), chat("part"), {"error": "model runner has unexpectedly stopped"}],
        "ollama",
    )
    assert message.status == "error"
    assert message.metadata["error"] == {
        "type": None,
        "message": "model runner has unexpectedly stopped",
    }
    assert [p.content for p in message.content] == ["hmm", "part"]


def test_chat_stream_split_anywhere_folds_the_same() -> None:
    data = _ndjson(
        [
            chat(thinking="Ünïcödé "),
            chat("→ answer"),
            chat(tool_calls=[{"function": {"name": "f", "arguments": {"x": "ü"}}}]),
            final(),
        ]
    )
    whole = fold_bytes(data)
    assert final_message(fold_bytes(data, list(range(len(data))))) == final_message(whole)
    assert coalesce(fold_bytes(data, list(range(len(data))))) == coalesce(whole)


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(0, 2000), max_size=30))
def test_chat_stream_any_split(cuts: list[int]) -> None:
    data = _ndjson(THINK_THEN_ANSWER)
    assert final_message(fold_bytes(data, cuts)) == final_message(fold_bytes(data))


# --- bad input ---------------------------------------------------------------------------


def test_truncated_stream_is_incomplete_with_parts_so_far() -> None:
    lines = read("ollama/generate-gpt-oss-thinking.ndjson").split(b"\n")
    message = final_message(fold_bytes(b"\n".join(lines[:40]) + b"\n"))
    assert message.status == "incomplete"
    assert message.stop_reason is None
    assert message.usage is None
    assert [p.type for p in message.content] == ["thinking", "text"]
    assert message.text == "Fluffy,"


def test_a_line_cut_in_half_ends_incomplete_with_parts_so_far() -> None:
    lines = read("ollama/generate-gpt-oss-thinking.ndjson").split(b"\n")
    message = final_message(fold_bytes(b"\n".join(lines[:40]) + b"\n" + lines[40][:25]))
    assert message.status == "incomplete"
    assert message.metadata["truncated_tail"] is True
    assert [p.type for p in message.content] == ["thinking", "text"]
    assert message.text == "Fluffy,"


def test_broken_json_mid_stream_is_a_protocol_error_with_the_partial() -> None:
    data = _ndjson(THINK_THEN_ANSWER[:3]) + b'{"model": "x", "message": {oops}\n'
    with pytest.raises(StreamProtocolError, match="invalid JSON") as info:
        fold_bytes(data)
    partial = info.value.partial
    assert isinstance(partial, Message)
    assert [p.content for p in partial.content] == ["Let me think.", "The answer"]


def _with(path: str, value: Any) -> dict[str, Any]:
    line = chat("x")
    target = line
    *parents, last = path.split(".")
    for key in parents:
        target = target[key]
    target[last] = value
    return line


BAD_LINES: list[tuple[dict[str, Any], str]] = [
    (_with("message", "hello"), "message to be an object"),
    (_with("message.content", 5), "message.content to be a string"),
    (_with("message.thinking", ["a"]), "message.thinking to be a string"),
    (_with("message.tool_calls", {"function": {}}), "message.tool_calls to be a list"),
    (_with("message.tool_calls", ["f"]), "message.tool_calls[] to be an object"),
    (_with("message.tool_calls", [{"function": None}]), "function to be an object"),
    (_with("message.tool_calls", [{"function": {"arguments": {}}}]), "function.name"),
    (
        _with("message.tool_calls", [{"function": {"name": "f", "arguments": [1]}}]),
        "arguments to be an object",
    ),
    (_with("done", "yes"), "done to be true or false"),
    ({"model": "m", "response": 1, "done": False}, "response to be a string"),
    ({"model": "m", "response": "", "thinking": 2, "done": False}, "thinking to be a string"),
    ({**final(), "eval_count": "34"}, "eval_count to be an integer"),
    ({**final(), "done_reason": 1}, "done_reason to be a string"),
    ({"error": 500}, "error to be a string"),
]


@pytest.mark.parametrize(("bad", "says"), BAD_LINES)
def test_wrong_field_types_are_protocol_errors_with_the_partial(
    bad: dict[str, Any], says: str
) -> None:
    with pytest.raises(StreamProtocolError) as info:
        fold_message([chat("kept"), bad], "ollama")
    assert says in str(info.value)
    assert info.value.provider == "ollama"
    partial = info.value.partial
    assert isinstance(partial, Message)
    assert partial.text == "kept"


def test_decoder_grows_text_without_rejoining() -> None:
    decoder = OllamaDecoder()
    decoder.decode(chat())
    assert decoder.decode(chat("a")) == [
        OpenPart(("text", 0), ContentPart.text("")),
        GrowPart(("text", 0), content="a"),
    ]
    assert decoder.decode(chat("b")) == [GrowPart(("text", 0), content="b")]
