"""The Gemini / Vertex decoder: recordings against the google-genai SDK, and hand-made streams."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from google.genai import types
from pydantic import ValidationError
from support import final_message, fold_bytes, read, recordings

from streamfold import Message, ToolCall, fold
from streamfold.errors import StreamProtocolError
from streamfold.events import PartCompleted, ProviderErrored
from streamfold.providers import detect_provider

GEMINI = recordings("gemini")


def payloads(rel: str) -> list[dict[str, Any]]:
    """The JSON payload of every `data:` line of a recording."""
    lines = read(rel).decode().splitlines()
    return [json.loads(line[5:]) for line in lines if line.startswith("data:")]


def sdk_chunks(rel: str) -> tuple[list[types.GenerateContentResponse], list[dict[str, Any]]]:
    """Each payload as the SDK's GenerateContentResponse, and the payloads it could take.

    The installed SDK forbids fields it does not know (usageMetadata.serviceTier, sent by
    the live API): those are dropped, and the second list holds the payloads as dropped.
    """
    objects, accepted = [], []
    for payload in payloads(rel):
        payload = copy.deepcopy(payload)
        while True:
            try:
                objects.append(types.GenerateContentResponse.model_validate(payload))
                break
            except ValidationError as exc:
                extra = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
                assert extra, exc
                for loc in extra:
                    node: Any = payload
                    for step in loc[:-1]:
                        node = node[step]
                    del node[loc[-1]]
        accepted.append(payload)
    return objects, accepted


def message_of(rel: str) -> Message:
    return final_message(fold_bytes(read(rel)))


def fold_dicts(chunks: list[dict[str, Any]], provider: str | None = "gemini") -> Message:
    return final_message(list(fold(chunks, provider)))


def signatures(message: Message) -> list[str]:
    """Every thought signature in the message, in stream order."""
    found = []
    for entry in message.stream_order():
        options = entry.metadata if isinstance(entry, ToolCall) else entry.options
        if "signature" in options:
            found.append(options["signature"])
        elif "thought_signature" in options:
            found.append(options["thought_signature"])
        elif isinstance(options.get("block"), dict) and "thoughtSignature" in options["block"]:
            found.append(options["block"]["thoughtSignature"])
    return found


# --- the SDK differential --------------------------------------------------------------


@pytest.mark.parametrize("rel", GEMINI)
def test_detects_gemini_from_the_first_chunk(rel: str) -> None:
    assert detect_provider(payloads(rel)[0]) == "gemini"


@pytest.mark.parametrize("rel", GEMINI)
def test_matches_the_sdk(rel: str) -> None:
    message = message_of(rel)
    objects, _ = sdk_chunks(rel)
    text, thoughts, calls, sigs = [], [], [], []
    finish = usage = None
    for chunk in objects:
        candidate = chunk.candidates[0] if chunk.candidates else None
        if candidate is not None and candidate.content and candidate.content.parts:
            for part in candidate.content.parts:
                if part.text is not None:
                    (thoughts if part.thought else text).append(part.text)
                if part.function_call is not None and part.function_call.name:
                    calls.append((part.function_call.name, part.function_call.args or {}))
                if part.thought_signature is not None:
                    sigs.append(base64.b64encode(part.thought_signature).decode())
        if candidate is not None and candidate.finish_reason is not None:
            finish = candidate.finish_reason.value
        if chunk.usage_metadata is not None:
            usage = chunk.usage_metadata
    answer = [p.content for p in message.content if p.type == "text"]
    thinking = [p.content for p in message.content if p.type == "thinking"]
    assert "".join(answer) == "".join(text)
    assert "".join(thinking) == "".join(thoughts)
    assert signatures(message) == sigs
    assert message.raw_stop_reason == finish
    if "streamed-args" in rel:
        # The SDK leaves Vertex's streamed partialArgs as they came: only names compare.
        assert [c.name for c in message.tool_calls] == [name for name, _ in calls]
    else:
        assert [(c.name, c.arguments) for c in message.tool_calls] == calls
    assert usage is not None and message.usage is not None
    wire = usage.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw = {k: v for k, v in message.usage.raw.items() if k in wire}
    assert raw == wire
    thoughts_count = usage.thoughts_token_count or 0
    assert message.usage.input_tokens == (usage.prompt_token_count or 0) + (
        usage.tool_use_prompt_token_count or 0
    )
    assert message.usage.output_tokens == (usage.candidates_token_count or 0) + thoughts_count
    assert message.usage.reasoning_tokens == (thoughts_count or None)
    assert message.usage.cache_read_tokens == (usage.cached_content_token_count or None)
    assert message.usage.input_tokens + message.usage.output_tokens == usage.total_token_count
    assert message.metadata["id"] == objects[-1].response_id
    assert message.metadata["model"] == objects[-1].model_version


@pytest.mark.parametrize("rel", GEMINI)
def test_sdk_objects_fold_like_the_wire(rel: str) -> None:
    objects, accepted = sdk_chunks(rel)
    from_objects = final_message(list(fold(objects)))  # the provider is detected too
    assert from_objects == fold_dicts(accepted)
    if accepted == payloads(rel):
        assert from_objects == message_of(rel)


def test_streamed_arguments_are_rebuilt() -> None:
    message = message_of("gemini/function-call-streamed-args.sse")
    assert [(c.call_id, c.name, c.arguments) for c in message.tool_calls] == [
        ("getWeather_0", "getWeather", {"location": "Boston"}),
        ("getWeather_1", "getWeather", {"location": "San Francisco"}),
    ]
    assert message.stop_reason == "tool_use"
    assert message.tool_calls[0].metadata["thought_signature"].startswith("CiMBjz1r")
    assert "thought_signature" not in message.tool_calls[1].metadata


def test_grounding_citations_index_the_text() -> None:
    for rel, count in (
        ("gemini/google-search-grounding.sse", 9),
        ("gemini/url-context.sse", 1),
        ("gemini/file-search-toolcall-toolresponse.sse", 1),
    ):
        message = message_of(rel)
        cited = [(p, c) for p in message.content for c in p.citations]
        assert len(cited) == count, rel
        for part, citation in cited:
            assert part.content is not None
            assert part.content[citation.start_index : citation.end_index] == citation.cited_text
            assert citation.source is not None
        assert "grounding_metadata" in message.metadata
    search = message_of("gemini/google-search-grounding.sse")
    first, second = search.content[0].citations[:2]
    assert first.source is not None and first.source.type == "web"
    assert (first.metadata["start_byte"], first.start_index) == (235, 235)
    # Gemini counts UTF-8 bytes: the four degree signs in the first segment (two bytes
    # each) put the second one 4 characters before its byte offset.
    assert (second.metadata["start_byte"], second.start_index) == (376, 372)
    files = message_of("gemini/file-search-toolcall-toolresponse.sse")
    source = files.content[2].citations[0].source
    assert source is not None and source.type == "document"
    assert source.document_id == "fileSearchStores/testfilesearchgroundingstre-p2hcv3cs2i69"
    assert "url_context_metadata" in message_of("gemini/url-context.sse").metadata


def test_server_side_parts_replay_whole() -> None:
    message = message_of("gemini/code-execution.sse")
    first = payloads("gemini/code-execution.sse")[0]["candidates"][0]["content"]["parts"][0]
    code, result = message.content[0], message.content[1]
    assert code.type == result.type == "unsupported"
    assert code.options == {"type": "executableCode", "block": first, "id": "8xju7mua"}
    assert result.options["type"] == "codeExecutionResult"
    assert message.stop_reason == "stop"  # code execution is not a client tool call


# --- hand-made streams ---------------------------------------------------------------


def chunk(*parts: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **top}


def test_same_function_twice_gets_two_ids() -> None:
    call = {"functionCall": {"name": "lookup", "args": {"q": "a"}}}
    message = fold_dicts(
        [
            chunk(call),
            chunk({"functionCall": {"name": "lookup", "args": {"q": "b"}}}, finish="STOP"),
        ]
    )
    ids = [c.call_id for c in message.tool_calls]
    assert ids == ["lookup_0", "lookup_1"]
    assert [c.arguments for c in message.tool_calls] == [{"q": "a"}, {"q": "b"}]
    assert all(c.metadata["generated_id"] for c in message.tool_calls)
    assert (message.status, message.stop_reason) == ("complete", "tool_use")
    # Two calls in one chunk, and ids from the wire.
    message = fold_dicts(
        [
            chunk(
                {"functionCall": {"name": "f", "id": "x1", "args": {}}},
                {"functionCall": {"name": "f", "id": "x2", "args": {}}},
            )
        ]
    )
    assert [c.call_id for c in message.tool_calls] == ["x1", "x2"]
    assert "generated_id" not in message.tool_calls[0].metadata


def test_signatures_stay_on_their_part() -> None:
    message = fold_dicts(
        [
            chunk({"text": "plan", "thought": True}),
            chunk({"text": "", "thought": True, "thoughtSignature": "c2lnMA=="}),
            chunk({"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "c2lnMQ=="}),
            chunk({"functionCall": {"name": "g", "args": {}}}),
            chunk({"text": "Done"}),
            chunk({"text": " now."}),
            chunk({"text": "", "thoughtSignature": "c2lnMg=="}, finish="STOP"),
        ]
    )
    assert [(p.type, p.content, p.options) for p in message.content] == [
        ("thinking", "plan", {}),
        ("thinking", "", {"signature": "c2lnMA=="}),
        # The turn ends in tool use (the calls): its text is narration, inferred.
        ("text", "Done now.", {"utterance": "narration", "utterance_inferred": True}),
        (
            "text",
            "",
            {"signature": "c2lnMg==", "utterance": "narration", "utterance_inferred": True},
        ),
    ]
    assert message.tool_calls[0].metadata["thought_signature"] == "c2lnMQ=="
    assert "thought_signature" not in message.tool_calls[1].metadata
    # Stream order survives: thinking, thinking, call, call, text, text.
    kinds = [getattr(e, "type", "call") for e in message.stream_order()]
    assert kinds == ["thinking", "thinking", "call", "call", "text", "text"]


def test_a_signed_text_chunk_starts_a_part_that_later_chunks_grow() -> None:
    message = fold_dicts(
        [
            chunk({"text": "A"}),
            chunk({"text": "B", "thoughtSignature": "czE="}),
            chunk({"text": "C"}),
            chunk({"text": "D", "thoughtSignature": "czI="}),
        ]
    )
    assert [(p.content, p.options.get("signature")) for p in message.content] == [
        ("A", None),
        ("BC", "czE="),
        ("D", "czI="),
    ]


def test_url_safe_signatures_from_sdk_objects_are_made_standard() -> None:
    part = {"text": "x", "thoughtSignature": "ab-_"}
    assert fold_dicts([chunk(part)]).content[0].options["signature"] == "ab+/"


def test_text_parts_close_when_another_kind_begins() -> None:
    events = list(
        fold(
            [
                chunk({"text": "a"}),
                chunk({"text": "b"}),
                chunk({"executableCode": {"code": "1"}}),
                chunk({"text": "c"}),
            ],
            "gemini",
        )
    )
    done = [(e.index, e.explicit) for e in events if isinstance(e, PartCompleted)]
    assert done == [(0, False), (1, True), (2, False)]


def test_inline_data_becomes_an_image_part() -> None:
    message = fold_dicts([chunk({"inlineData": {"mimeType": "image/png", "data": "iVBO_-=="}})])
    part = message.content[0]
    assert (part.type, part.content, part.options) == ("image", "iVBO/+==", {"media": "image/png"})


def test_streamed_arguments_nested_values_and_escapes() -> None:
    def partial(path: str, **value: Any) -> dict[str, Any]:
        args = [{"jsonPath": path, **value}]
        return chunk({"functionCall": {"partialArgs": args, "willContinue": True}})

    message = fold_dicts(
        [
            chunk({"functionCall": {"name": "book", "id": "c1", "willContinue": True}}),
            partial("$.trip.from", stringValue='Sa"n ', willContinue=True),
            partial("$.trip.from", stringValue="José"),
            partial("$.trip.stops[0]", numberValue=2),
            partial("$.trip.stops[1]", numberValue=2.5),
            partial("$.flags['direct only']", boolValue=True),
            partial("$.note", nullValue="NULL_VALUE"),
            chunk({"functionCall": {}}, finish="STOP"),
        ]
    )
    call = message.tool_calls[0]
    assert call.arguments == {
        "trip": {"from": 'Sa"n José', "stops": [2, 2.5]},
        "flags": {"direct only": True},
        "note": None,
    }
    assert call.status == "complete"


def test_streamed_arguments_out_of_order_are_rebuilt_at_the_end() -> None:
    def partial(path: str, value: str) -> dict[str, Any]:
        args = [{"jsonPath": path, "stringValue": value}]
        return chunk({"functionCall": {"partialArgs": args, "willContinue": True}})

    message = fold_dicts(
        [
            chunk({"functionCall": {"name": "f", "willContinue": True}}),
            partial("$.a.x", "1"),
            partial("$.b", "2"),
            partial("$.a.y", "3"),  # back into "a", already closed in the text
            chunk({"functionCall": {}}),
        ]
    )
    assert message.tool_calls[0].arguments == {"a": {"x": "1", "y": "3"}, "b": "2"}


def test_cut_streamed_call_keeps_its_text_and_is_incomplete() -> None:
    message = fold_dicts(
        [
            chunk({"functionCall": {"name": "f", "willContinue": True}}),
            chunk(
                {
                    "functionCall": {
                        "partialArgs": [
                            {"jsonPath": "$.city", "stringValue": "Par", "willContinue": True}
                        ],
                        "willContinue": True,
                    }
                }
            ),
        ]
    )
    call = message.tool_calls[0]
    assert message.status == "incomplete"
    assert (call.status, call.arguments) == ("incomplete", '{"city":"Par')
    assert "arguments_error" in call.metadata


# --- stop reasons, usage, errors -------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "stop", "status"),
    [
        ("STOP", "stop", "complete"),
        ("MAX_TOKENS", "length", "length"),
        ("SAFETY", "content_filter", "content_filtered"),
        ("RECITATION", "content_filter", "content_filtered"),
        ("PROHIBITED_CONTENT", "content_filter", "content_filtered"),
        ("BLOCKLIST", "content_filter", "content_filtered"),
        ("SPII", "content_filter", "content_filtered"),
        ("IMAGE_SAFETY", "content_filter", "content_filtered"),
        ("MALFORMED_FUNCTION_CALL", "error", "error"),
        ("UNEXPECTED_TOOL_CALL", "error", "error"),
        ("OTHER", "other", "complete"),
        ("FINISH_REASON_UNSPECIFIED", "other", "complete"),
        ("SOMETHING_NEW", "other", "complete"),
    ],
)
def test_finish_reasons(reason: str, stop: str, status: str) -> None:
    message = fold_dicts([chunk({"text": "hi"}), chunk({"text": "!"}, finish=reason)])
    assert (message.stop_reason, message.status, message.raw_stop_reason) == (stop, status, reason)
    assert message.content[0].content == "hi!"


def test_stop_with_a_tool_call_is_tool_use() -> None:
    message = fold_dicts([chunk({"functionCall": {"name": "f"}}, finish="STOP")])
    assert (message.stop_reason, message.raw_stop_reason) == ("tool_use", "STOP")
    assert message.tool_calls[0].arguments == {}


def test_prompt_feedback_block() -> None:
    feedback = {"blockReason": "SAFETY", "safetyRatings": []}
    message = fold_dicts([{"promptFeedback": feedback, "responseId": "r"}], provider=None)
    assert (message.status, message.stop_reason, message.raw_stop_reason) == (
        "content_filtered",
        "content_filter",
        "SAFETY",
    )
    assert message.metadata["prompt_feedback"] == feedback


def test_usage_is_a_running_total() -> None:
    def usage(prompt: int, out: int | None, **more: Any) -> dict[str, Any]:
        counts = {"promptTokenCount": prompt, **more}
        if out is not None:
            counts["candidatesTokenCount"] = out
        return {"usageMetadata": counts}

    message = fold_dicts(
        [
            chunk({"text": "a"}, **usage(10, 1)),
            chunk({"text": "b"}, **usage(10, 2, thoughtsTokenCount=5, cachedContentTokenCount=4)),
            chunk({"text": "c"}, usageMetadata={"trafficType": "ON_DEMAND"}),
        ]
    )
    assert message.usage is not None
    assert (
        message.usage.input_tokens,
        message.usage.output_tokens,
        message.usage.reasoning_tokens,
        message.usage.cache_read_tokens,
        message.usage.cumulative,
    ) == (10, 7, 5, 4, True)


def test_error_in_the_stream() -> None:
    error = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    events = list(fold([chunk({"text": "part"}), error], "gemini"))
    reported = [e for e in events if isinstance(e, ProviderErrored)]
    assert len(reported) == 1 and reported[0].error_type == "UNAVAILABLE"
    message = final_message(events)
    assert (message.status, message.stop_reason) == ("error", "error")
    assert message.content[0].content == "part"
    assert message.metadata["error"] == {"type": "UNAVAILABLE", "message": "overloaded"}


def test_truncated_stream_keeps_what_arrived() -> None:
    raw = read("gemini/thought-parts-signature.sse")
    inside = raw.index(b"Special Situations")
    # Cut between two events: the message so far, incomplete.
    message = final_message(fold_bytes(raw[: raw.rindex(b"data:", 0, inside)]))
    assert message.status == "incomplete"
    assert message.stop_reason is None
    assert [p.type for p in message.content] == ["thinking", "text"]
    assert message.content[1].options["signature"].startswith("CiIB0e2K")
    assert message.content[1].content is not None
    assert message.content[1].content.endswith("block out")
    # Cut inside an event: the fragment is dropped, the same message so far, incomplete.
    cut_inside = final_message(fold_bytes(raw[:inside]))
    assert cut_inside.metadata["truncated_tail"] is True
    assert cut_inside.status == "incomplete"
    assert cut_inside.content == message.content


def test_broken_json_is_a_protocol_error_with_the_partial() -> None:
    data = b'data: {"candidates": [{"content": {"parts": [{"text": "ok"}]}}]}\n\ndata: {"cand\n\n'
    with pytest.raises(StreamProtocolError) as info:
        fold_bytes(data)
    assert info.value.partial is not None
    assert info.value.partial.content[0].content == "ok"


BAD = [
    ({"candidates": {"index": 0}}, "candidates"),
    ({"candidates": ["x"]}, "candidates[0]"),
    ({"candidates": [{"index": "0"}]}, "candidate.index"),
    ({"candidates": [{"content": []}]}, "candidate.content"),
    ({"candidates": [{"content": {"parts": {"text": "a"}}}]}, "candidate.content.parts"),
    ({"candidates": [{"content": {"parts": ["a"]}}]}, "content.parts[]"),
    ({"candidates": [{"content": {"parts": [{"text": 1}]}}]}, "part.text"),
    ({"candidates": [{"content": {"parts": [{"text": "a", "thought": "yes"}]}}]}, "part.thought"),
    ({"candidates": [{"content": {"parts": [{"text": "a", "thoughtSignature": 5}]}}]}, "Signature"),
    ({"candidates": [{"content": {"parts": [{"functionCall": "f"}]}}]}, "part.functionCall"),
    ({"candidates": [{"content": {"parts": [{"functionCall": {"name": 3}}]}}]}, "name"),
    (
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": []}}]}}]},
        "functionCall.args",
    ),
    (
        {
            "candidates": [
                {
                    "content": {
                        "parts": [
                            {"functionCall": {"name": "f", "willContinue": True, "partialArgs": 1}}
                        ]
                    }
                }
            ]
        },
        "partialArgs",
    ),
    (
        {
            "candidates": [
                {
                    "content": {
                        "parts": [
                            {
                                "functionCall": {
                                    "name": "f",
                                    "willContinue": True,
                                    "partialArgs": [{"jsonPath": "location", "stringValue": "x"}],
                                }
                            }
                        ]
                    }
                }
            ]
        },
        "JSON path",
    ),
    ({"candidates": [{"finishReason": 1}]}, "finishReason"),
    ({"candidates": [{"groundingMetadata": "g"}]}, "groundingMetadata"),
    ({"usageMetadata": []}, "usageMetadata"),
    ({"usageMetadata": {"promptTokenCount": "3"}}, "promptTokenCount"),
    ({"candidates": [], "responseId": 7}, "responseId"),
    ({"promptFeedback": {"blockReason": 2}}, "blockReason"),
    ({"candidates": [{"content": {"parts": [{"inlineData": {"data": 1}}]}}]}, "inlineData.data"),
]


@pytest.mark.parametrize(("payload", "named"), BAD)
def test_wrong_field_types_are_protocol_errors(payload: dict[str, Any], named: str) -> None:
    good = chunk({"text": "before"})
    with pytest.raises(StreamProtocolError) as info:
        fold_dicts([good, payload])
    assert named in str(info.value)
    assert info.value.partial is not None
    assert info.value.partial.content[0].content == "before"


def test_grounding_with_wrong_types_is_a_protocol_error() -> None:
    grounding = {
        "groundingSupports": [{"segment": {"endIndex": "2"}, "groundingChunkIndices": [0]}]
    }
    payload = {
        "candidates": [{"content": {"parts": [{"text": "b"}]}, "groundingMetadata": grounding}]
    }
    with pytest.raises(StreamProtocolError, match=r"segment\.endIndex"):
        fold_dicts([chunk({"text": "a"}), payload])
