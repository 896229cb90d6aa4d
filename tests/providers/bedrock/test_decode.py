"""Bedrock ConverseStream decoder: recordings, tool calls, reasoning, errors, bad input."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from support import REAL, final_message, fold_bytes, read, recordings

from streamfold import (
    ContentPart,
    Message,
    ProviderErrored,
    StreamProtocolError,
    ToolCall,
    detect_provider,
    fold,
    fold_message,
)
from streamfold.deltas import ClosePart, EndMessage, GrowPart, OpenPart, SkipEvent, UpdateMessage
from streamfold.providers.bedrock import BedrockDecoder

BEDROCK = recordings("bedrock")
EVENTSTREAMS = sorted(p.name for p in (REAL / "bedrock").glob("*.eventstream"))


def _lines(rel: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read(rel).decode().splitlines() if line.strip()]


def _fold(events: list[dict[str, Any]], *, strict: bool = False) -> Message:
    return fold_message(events, "bedrock", strict=strict)


def _start(index: int = 0) -> dict[str, Any]:
    return {"messageStart": {"role": "assistant"}}


def _text(index: int, text: str) -> dict[str, Any]:
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"text": text}}}


def _reasoning(index: int, **fields: Any) -> dict[str, Any]:
    return {
        "contentBlockDelta": {"contentBlockIndex": index, "delta": {"reasoningContent": fields}}
    }


def _stop(index: int) -> dict[str, Any]:
    return {"contentBlockStop": {"contentBlockIndex": index}}


def _end(reason: str = "end_turn") -> list[dict[str, Any]]:
    return [
        {"messageStop": {"stopReason": reason}},
        {"metadata": {"usage": {"inputTokens": 3, "outputTokens": 4}, "metrics": {"latencyMs": 9}}},
    ]


# --- recordings --------------------------------------------------------------------------


@pytest.mark.parametrize("rel", BEDROCK)
def test_detect_provider_on_the_first_event(rel: str) -> None:
    assert detect_provider(_lines(rel)[0]) == "bedrock"


@pytest.mark.parametrize("rel", BEDROCK)
def test_boto3_dicts_fold_like_the_bytes(rel: str) -> None:
    # boto3 yields these dicts; fed as objects they must give the bytes' Message.
    assert fold_message(_lines(rel)) == final_message(fold_bytes(read(rel)))


@pytest.mark.parametrize("rel", BEDROCK)
def test_matches_a_naive_join_of_the_raw_deltas(rel: str) -> None:
    """Differential: an independent, obvious fold of the recording agrees with the decoder."""
    blocks: dict[int, dict[str, list[Any]]] = {}
    last: dict[str, Any] = {}
    for line in _lines(rel):
        ((kind, body),) = line.items()
        last[kind] = body
        if kind != "contentBlockDelta":
            continue
        block = blocks.setdefault(body["contentBlockIndex"], {})
        for member, value in body["delta"].items():
            if member == "reasoningContent":
                for key, piece in value.items():
                    block.setdefault("reasoning." + key, []).append(piece)
            elif member == "toolUse":
                block.setdefault("input", []).append(value["input"])
            elif member == "toolResult":
                block.setdefault("result", []).extend(value)
            else:
                block.setdefault(member, []).append(value)
    live = [i for i in sorted(blocks) if any(any(v) for v in blocks[i].values())]
    message = final_message(fold_bytes(read(rel)))
    parts = message.stream_order()
    assert len(parts) == len(live)
    for part, index in zip(parts, live, strict=True):
        block = blocks[index]
        if "text" in block:
            assert isinstance(part, ContentPart)
            assert (part.type, part.content) == ("text", "".join(block["text"]))
        if "reasoning.text" in block or "reasoning.signature" in block:
            assert isinstance(part, ContentPart)
            assert part.type == "thinking"
            assert part.content == "".join(block.get("reasoning.text", []))
            signature = "".join(block.get("reasoning.signature", [])) or None
            assert part.options.get("signature") == signature
        if "reasoning.redactedContent" in block:
            assert isinstance(part, ContentPart)
            assert part.options["block"] == {
                "reasoningContent": {"redactedContent": "".join(block["reasoning.redactedContent"])}
            }
        if "input" in block:
            expected = json.loads("".join(block["input"]))
            if isinstance(part, ToolCall):
                assert part.arguments == expected
            else:
                assert part.options["block"]["toolUse"]["input"] == expected
        if "result" in block:
            assert isinstance(part, ContentPart)
            assert part.options["block"]["toolResult"]["content"] == block["result"]
    usage = last["metadata"]["usage"]
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (
        usage["inputTokens"],
        usage["outputTokens"],
    )
    assert message.raw_stop_reason == last["messageStop"]["stopReason"]
    assert message.metadata["latency_ms"] == last["metadata"]["metrics"]["latencyMs"]


def _botocore_events(data: bytes) -> list[tuple[dict[str, Any], bytes, dict[str, Any]]]:
    """Each message as botocore frames it (headers, payload) and parses it for boto3."""
    eventstream = pytest.importorskip("botocore.eventstream")
    parsers = pytest.importorskip("botocore.parsers")
    session = pytest.importorskip("botocore.session").get_session()
    operation = session.get_service_model("bedrock-runtime").operation_model("ConverseStream")
    shape = operation.output_shape.members["stream"]
    parser = parsers.EventStreamJSONParser()
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(data)
    return [
        (dict(m.headers), bytes(m.payload), parser.parse(m.to_response_dict(), shape))
        for m in buffer
    ]


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_differential_against_botocore(name: str) -> None:
    """botocore's own eventstream framer and ConverseStream parser (when installed).

    Our framer must split the bytes into the same headers and payloads, and folding the
    events boto3 would yield (padding dropped, redactedContent as bytes) must give the
    same Message as folding the bytes.
    """
    from streamfold.eventstream import EventStreamFramer

    data = (REAL / "bedrock" / name).read_bytes()
    theirs = _botocore_events(data)
    ours = EventStreamFramer().feed(data)
    assert [(m.headers, m.payload) for m in ours] == [(h, p) for h, p, _ in theirs]
    from_boto3 = fold_message([parsed for _, _, parsed in theirs])
    from_bytes = final_message(fold_bytes(data))
    assert from_boto3.usage is not None and from_bytes.usage is not None
    # botocore drops members its service model does not know yet (usage.serverToolUsage).
    assert from_boto3.usage.raw.items() <= from_bytes.usage.raw.items()
    assert from_boto3.usage.model_copy(update={"raw": {}}) == from_bytes.usage.model_copy(
        update={"raw": {}}
    )
    assert from_boto3.model_copy(update={"usage": None}) == from_bytes.model_copy(
        update={"usage": None}
    )


def test_tool_call_ids_names_and_input() -> None:
    message = final_message(fold_bytes(read("bedrock/text-then-tool-use-nova.ndjson")))
    (call,) = message.tool_calls
    assert call.call_id == "tooluse_lAG_zP8QRHmSYOwZzzaCqA"
    assert call.name == "get_temperature"
    assert call.arguments == {"city": "Paris"}
    assert call.status == "complete"
    assert message.stop_reason == "tool_use"
    assert message.status == "complete"
    assert [type(p).__name__ for p in message.stream_order()] == ["ContentPart", "ToolCall"]


def test_tool_input_in_fragments_is_joined_then_parsed() -> None:
    message = final_message(fold_bytes(read("bedrock/tool-call.ndjson")))
    (call,) = message.tool_calls
    assert (call.call_id, call.name, call.arguments) == (
        "tool-use-id",
        "test-tool",
        {"value": "Sparkle Day"},
    )


def test_usage_before_message_stop_is_kept() -> None:
    # tool-call.ndjson sends metadata first, then messageStop.
    message = final_message(fold_bytes(read("bedrock/tool-call.ndjson")))
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (125, 45)


def test_usage_after_message_stop_is_kept() -> None:
    events = list(fold(_lines("bedrock/text-nova-micro.ndjson")))
    message = final_message(events)
    assert message.usage is not None
    assert message.usage.raw["totalTokens"] == 95
    assert message.usage.total_tokens == 95


def test_reasoning_signature_stays_on_its_thinking_part() -> None:
    message = final_message(fold_bytes(read("bedrock/thinking-signature-claude.ndjson")))
    thinking, text = message.content
    assert thinking.type == "thinking"
    assert thinking.content is not None and thinking.content.startswith("The user has greeted")
    assert thinking.options["signature"].startswith("Eu0CCkgIBxABGAIqQJDccbDQ")
    assert thinking.options["signature"].endswith("o471iEYAQ==")
    assert "signature" not in text.options


def test_a_signature_in_pieces_concatenates() -> None:
    message = _fold(
        [
            _start(),
            _reasoning(0, text="hm"),
            _reasoning(0, signature="AB"),
            _reasoning(0, signature="CD"),
            _stop(0),
            *_end(),
        ]
    )
    assert message.content == [ContentPart.thinking("hm", signature="ABCD")]


def test_a_thinking_part_with_only_a_signature_is_kept() -> None:
    message = _fold([_start(), _reasoning(0, signature="SIG"), _stop(0), *_end()])
    assert message.content == [ContentPart.thinking("", signature="SIG")]


def test_empty_deltas_make_no_part_and_no_event() -> None:
    decoder = BedrockDecoder()
    assert decoder.decode(_text(0, "")) == []
    assert decoder.decode(_stop(0)) == []
    assert decoder.decode(_reasoning(1, text="")) == []
    assert decoder.decode(_reasoning(1, text="a")) == [
        OpenPart(1, ContentPart.thinking("")),
        GrowPart(1, content="a"),
    ]
    assert decoder.decode(_reasoning(1, text="")) == []
    assert decoder.decode(_stop(1)) == [ClosePart(1, explicit=True)]


def test_gpt_oss_empty_text_block_leaves_no_bogus_part() -> None:
    message = final_message(fold_bytes(read("bedrock/reasoning-empty-text-delta-gpt-oss.ndjson")))
    assert [p.type for p in message.content] == ["thinking", "text"]
    assert message.content[1].content == "Hello! How can I help you today?"


def test_redacted_reasoning_is_kept_whole_in_order() -> None:
    message = final_message(fold_bytes(read("bedrock/redacted-thinking-claude.ndjson")))
    first, second, text = message.content
    for part in (first, second):
        assert part.type == "unsupported"
        assert part.content is None
        assert part.options["type"] == "redactedContent"
    assert first.options["block"]["reasoningContent"]["redactedContent"].startswith("RXRrRUNr")
    assert second.options["block"]["reasoningContent"]["redactedContent"].startswith("RXFBRENr")
    assert text.type == "text"


def test_redacted_reasoning_in_two_deltas_is_joined() -> None:
    message = _fold(
        [
            _start(),
            _reasoning(0, redactedContent="AAA"),
            _reasoning(0, redactedContent="BBB"),
            _stop(0),
            *_end(),
        ]
    )
    (part,) = message.content
    assert part.options["block"] == {"reasoningContent": {"redactedContent": "AAABBB"}}


def test_redacted_content_as_bytes_from_boto3_is_kept_in_base64() -> None:
    # boto3 decodes the blob; the kept block has it as on the wire.
    message = _fold([_start(), _reasoning(0, redactedContent=b"\x00\xffsecret"), _stop(0), *_end()])
    (part,) = message.content
    encoded = part.options["block"]["reasoningContent"]["redactedContent"]
    assert encoded == base64.b64encode(b"\x00\xffsecret").decode()
    assert json.loads(message.model_dump_json()) == json.loads(
        Message.model_validate_json(message.model_dump_json()).model_dump_json()
    )


def test_server_tool_use_and_result_are_opaque_blocks_not_calls() -> None:
    message = final_message(fold_bytes(read("bedrock/server-tool-code-execution-nova2.ndjson")))
    use, result = message.content
    assert use.options["type"] == "server_tool_use"
    assert use.options["id"] == "tooluse_VQNZJRUFMoqZzszVsRd4og"
    assert use.options["block"]["toolUse"]["input"] == {"snippet": "1234 * 5678"}
    assert result.options["tool_use_id"] == "tooluse_VQNZJRUFMoqZzszVsRd4og"
    assert result.options["block"]["toolResult"]["content"][0]["json"]["stdOut"] == "7006652"
    # Only the client tool is a call to make.
    assert [c.name for c in message.tool_calls] == ["final_result"]
    assert [type(p).__name__ for p in message.stream_order()] == [
        "ContentPart",
        "ContentPart",
        "ToolCall",
    ]


def test_tool_result_text_pieces_grow_one_entry() -> None:
    message = _fold(
        [
            _start(),
            {
                "contentBlockStart": {
                    "contentBlockIndex": 0,
                    "start": {"toolResult": {"toolUseId": "t1", "status": "success"}},
                }
            },
            {
                "contentBlockDelta": {
                    "contentBlockIndex": 0,
                    "delta": {"toolResult": [{"text": "ab"}]},
                }
            },
            {
                "contentBlockDelta": {
                    "contentBlockIndex": 0,
                    "delta": {"toolResult": [{"text": "cd"}]},
                }
            },
            _stop(0),
            *_end(),
        ]
    )
    (part,) = message.content
    assert part.options["type"] == "toolResult"
    assert part.options["block"] == {
        "toolResult": {"toolUseId": "t1", "status": "success", "content": [{"text": "abcd"}]}
    }


def test_citations_attach_to_their_text_part() -> None:
    citation = {
        "title": "Doc",
        "sourceContent": [{"text": "Paris is"}, {"text": " the capital"}],
        "location": {"documentChar": {"documentIndex": 0, "start": 0, "end": 20}},
    }
    message = _fold(
        [
            _start(),
            _text(0, "Paris."),
            {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"citation": citation}}},
            _stop(0),
            *_end(),
        ]
    )
    (part,) = message.content
    assert part.content == "Paris."
    (cited,) = part.citations
    assert cited.cited_text == "Paris is the capital"
    assert cited.source is not None
    assert (cited.source.type, cited.source.title) == ("document", "Doc")
    assert cited.metadata["location"] == citation["location"]


@pytest.mark.parametrize(
    ("raw", "stop_reason", "status"),
    [
        ("end_turn", "stop", "complete"),
        ("stop_sequence", "stop", "complete"),
        ("tool_use", "tool_use", "complete"),
        ("max_tokens", "length", "length"),
        ("model_context_window_exceeded", "length", "length"),
        ("guardrail_intervened", "content_filter", "content_filtered"),
        ("content_filtered", "content_filter", "content_filtered"),
        ("something_new", "other", "complete"),
    ],
)
def test_stop_reasons(raw: str, stop_reason: str, status: str) -> None:
    message = _fold([_start(), _text(0, "x"), _stop(0), *_end(raw)])
    assert (message.stop_reason, message.status, message.raw_stop_reason) == (
        stop_reason,
        status,
        raw,
    )


def test_message_stop_extras_and_metadata_go_into_metadata() -> None:
    message = _fold(
        [
            _start(),
            {"messageStop": {"stopReason": "end_turn", "additionalModelResponseFields": {"a": 1}}},
            {
                "metadata": {
                    "usage": {
                        "inputTokens": 10,
                        "outputTokens": 2,
                        "totalTokens": 12,
                        "cacheReadInputTokens": 7,
                        "cacheWriteInputTokens": 3,
                    },
                    "metrics": {"latencyMs": 5},
                    "trace": {"promptRouter": {"invokedModelId": "m"}},
                    "serviceTier": {"type": "default"},
                }
            },
        ]
    )
    assert message.usage is not None
    assert (message.usage.cache_read_tokens, message.usage.cache_write_tokens) == (7, 3)
    assert message.metadata["additional_model_response_fields"] == {"a": 1}
    assert message.metadata["latency_ms"] == 5
    assert message.metadata["trace"] == {"promptRouter": {"invokedModelId": "m"}}
    assert message.metadata["service_tier"] == {"type": "default"}


def test_the_message_ends_once_stop_and_usage_arrived() -> None:
    decoder = BedrockDecoder()
    stop = decoder.decode({"messageStop": {"stopReason": "end_turn"}})
    assert not any(isinstance(d, EndMessage) for d in stop)
    meta = decoder.decode({"metadata": {"usage": {"inputTokens": 1, "outputTokens": 1}}})
    assert isinstance(meta[0], UpdateMessage)
    assert isinstance(meta[-1], EndMessage)


def test_message_stop_without_metadata_still_completes() -> None:
    message = _fold(
        [_start(), _text(0, "x"), _stop(0), {"messageStop": {"stopReason": "end_turn"}}]
    )
    assert (message.status, message.usage, message.text) == ("complete", None, "x")


@pytest.mark.parametrize(
    "name",
    [
        "internalServerException",
        "modelStreamErrorException",
        "validationException",
        "throttlingException",
        "serviceUnavailableException",
    ],
)
def test_exception_events_end_with_status_error_keeping_parts(name: str) -> None:
    events = list(
        fold(
            [
                _start(),
                _reasoning(0, text="thinking", signature="S"),
                _stop(0),
                _text(1, "partial"),
                {name: {"message": "went wrong", "originalStatusCode": 500}},
            ],
            "bedrock",
        )
    )
    message = final_message(events)
    assert message.status == "error"
    assert message.stop_reason == "error"
    assert message.metadata["error"] == {"type": name, "message": "went wrong"}
    assert [p.content for p in message.content] == ["thinking", "partial"]
    assert message.content[0].options["signature"] == "S"
    (errored,) = [e for e in events if isinstance(e, ProviderErrored)]
    assert errored.error_type == name


def test_an_error_keeps_an_opaque_block_still_open() -> None:
    message = _fold(
        [
            _start(),
            {
                "contentBlockStart": {
                    "contentBlockIndex": 0,
                    "start": {
                        "toolUse": {"toolUseId": "s", "name": "ci", "type": "server_tool_use"}
                    },
                }
            },
            {
                "contentBlockDelta": {
                    "contentBlockIndex": 0,
                    "delta": {"toolUse": {"input": '{"a"'}},
                }
            },
            {"throttlingException": {"message": "slow down"}},
        ]
    )
    (part,) = message.content
    assert part.options["block"]["toolUse"]["input"] == '{"a"'
    assert "arguments_error" in part.options
    assert message.status == "error"


def test_unknown_events_and_members_are_skipped_and_counted() -> None:
    message = _fold(
        [
            _start(),
            {"somethingNew": {"x": 1}},
            {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"image": {"source": {}}}}},
            _text(1, "ok"),
            _stop(1),
            *_end(),
        ]
    )
    assert message.text == "ok"
    assert message.metadata["skipped_events"] == {
        "somethingNew": 1,
        "contentBlockDelta.image": 1,
    }


def test_skip_event_is_a_delta_for_an_unknown_block_start() -> None:
    decoder = BedrockDecoder()
    out = decoder.decode(
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"image": {"format": "png"}}}}
    )
    assert out == [SkipEvent("contentBlockStart.image")]


# --- bad input ---------------------------------------------------------------------------


def test_truncated_ndjson_is_incomplete_with_parts_so_far() -> None:
    lines = read("bedrock/text-then-tool-use-nova.ndjson").split(b"\n")
    # Up to and including the tool input delta: the stream stops before contentBlockStop.
    message = final_message(fold_bytes(b"\n".join(lines[:23]) + b"\n"))
    assert message.status == "incomplete"
    assert message.text is not None and message.text.startswith("<thinking> To find")
    (call,) = message.tool_calls
    assert call.name == "get_temperature"
    assert call.arguments == {"city": "Paris"}


def test_a_line_cut_in_half_ends_incomplete_with_parts_so_far() -> None:
    lines = read("bedrock/text-then-tool-use-nova.ndjson").split(b"\n")
    message = final_message(fold_bytes(b"\n".join(lines[:23]) + b"\n" + lines[23][:30]))
    assert message.status == "incomplete"
    assert message.metadata["truncated_tail"] is True
    assert [c.name for c in message.tool_calls] == ["get_temperature"]
    assert message.text is not None and message.text.endswith("</thinking>\n")


BAD_EVENTS: list[tuple[dict[str, Any], str]] = [
    (
        {"contentBlockDelta": {"contentBlockIndex": "0", "delta": {"text": "x"}}},
        "contentBlockIndex",
    ),
    (
        {"contentBlockDelta": {"contentBlockIndex": True, "delta": {"text": "x"}}},
        "contentBlockIndex",
    ),
    ({"contentBlockDelta": {"contentBlockIndex": 0, "delta": "x"}}, "delta to be an object"),
    ({"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": 5}}}, "text to be a string"),
    (
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"reasoningContent": "x"}}},
        "reasoningContent to be an object",
    ),
    (
        {
            "contentBlockDelta": {
                "contentBlockIndex": 0,
                "delta": {"reasoningContent": {"signature": 1}},
            }
        },
        "signature to be a string",
    ),
    (
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolResult": "x"}}},
        "toolResult to be a list",
    ),
    ({"contentBlockStart": {"contentBlockIndex": 0, "start": []}}, "start to be an object"),
    (
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"name": "f"}}}},
        "toolUse.toolUseId to be a string",
    ),
    ({"contentBlockStop": {}}, "contentBlockIndex"),
    ({"messageStop": {}}, "stopReason"),
    ({"metadata": {"usage": {"inputTokens": "3"}}}, "inputTokens to be an integer"),
    ({"metadata": {"usage": []}}, "usage to be an object"),
    ({"metadata": {"metrics": 5}}, "metrics to be an object"),
    ({"messageStart": "assistant"}, "messageStart to carry a JSON object"),
]


@pytest.mark.parametrize(("bad", "says"), BAD_EVENTS)
def test_wrong_field_types_are_protocol_errors_with_the_partial(
    bad: dict[str, Any], says: str
) -> None:
    events = [_start(), _text(5, "kept"), bad]
    with pytest.raises(StreamProtocolError) as info:
        _fold(events)
    assert says in str(info.value)
    assert info.value.provider == "bedrock"
    assert info.value.partial is not None
    assert info.value.partial.text == "kept"


def test_tool_input_for_a_text_block_is_a_protocol_error_when_strict() -> None:
    bad = {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}}
    with pytest.raises(StreamProtocolError, match="contentBlockStart with toolUse") as info:
        _fold([_start(), _text(0, "kept"), bad], strict=True)
    assert info.value.partial is not None
    assert info.value.partial.text == "kept"


def test_tool_input_for_a_text_block_grows_a_nameless_call_when_lenient() -> None:
    bad = {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}}
    message = _fold([_start(), _text(0, "kept"), bad, _stop(0), *_end()])
    assert message.text == "kept"
    (call,) = message.tool_calls
    assert (call.call_id, call.name, call.arguments) == (None, None, {})
    assert message.metadata["repairs"] == {"delta_type_mismatch": 1}


def test_a_delta_after_its_block_stopped_is_a_protocol_error() -> None:
    with pytest.raises(StreamProtocolError, match="after its contentBlockStop"):
        _fold([_start(), _text(0, "a"), _stop(0), _text(0, "b")], strict=True)


def test_a_delta_after_its_block_stopped_is_dropped_when_lenient() -> None:
    message = _fold([_start(), _text(0, "a"), _stop(0), _text(0, "b"), *_end()])
    assert message.text == "a"
    assert message.status == "complete"
    assert message.metadata["repairs"] == {"delta_after_block_stop": 1}


def test_a_delta_of_another_kind_for_a_block_is_a_protocol_error() -> None:
    with pytest.raises(StreamProtocolError, match="expected a text delta for block 0"):
        _fold([_start(), _text(0, "a"), _reasoning(0, text="b")], strict=True)


def test_a_delta_of_another_kind_grows_a_part_of_its_own_when_lenient() -> None:
    message = _fold([_start(), _text(0, "a"), _reasoning(0, text="b"), _stop(0), *_end()])
    assert [(p.type, p.content) for p in message.content] == [("text", "a"), ("thinking", "b")]
    assert message.metadata["repairs"] == {"delta_type_mismatch": 1}


_TOOL_START = {
    "contentBlockStart": {
        "contentBlockIndex": 0,
        "start": {"toolUse": {"toolUseId": "a", "name": "f"}},
    }
}


def test_a_second_start_for_a_block_is_a_protocol_error() -> None:
    with pytest.raises(StreamProtocolError, match="one contentBlockStart per block"):
        _fold([_start(), _TOOL_START, _TOOL_START], strict=True)


def test_a_repeated_start_is_ignored_when_lenient() -> None:
    grow = {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}}
    message = _fold([_start(), _TOOL_START, _TOOL_START, grow, _stop(0), *_end("tool_use")])
    (call,) = message.tool_calls
    assert (call.call_id, call.name, call.arguments) == ("a", "f", {})
    assert message.metadata["repairs"] == {"duplicate_block_start": 1}


def test_broken_tool_input_keeps_the_raw_text() -> None:
    message = _fold(
        [
            _start(),
            {
                "contentBlockStart": {
                    "contentBlockIndex": 0,
                    "start": {"toolUse": {"toolUseId": "a", "name": "f"}},
                }
            },
            {
                "contentBlockDelta": {
                    "contentBlockIndex": 0,
                    "delta": {"toolUse": {"input": '{"x": '}},
                }
            },
            _stop(0),
            *_end("tool_use"),
        ]
    )
    (call,) = message.tool_calls
    assert call.arguments == '{"x": '
    assert call.status == "incomplete"
    assert "arguments_error" in call.metadata


def test_broken_json_is_a_protocol_error() -> None:
    data = read("bedrock/text-nova-micro.ndjson")
    lines = data.split(b"\n")
    broken = b"\n".join([*lines[:5], b'{"contentBlockDelta": {oops}}', *lines[5:]])
    with pytest.raises(StreamProtocolError, match="invalid JSON"):
        fold_message([broken])


def test_broken_json_carries_the_partial() -> None:
    data = read("bedrock/text-nova-micro.ndjson")
    lines = data.split(b"\n")
    broken = b"\n".join([*lines[:5], b'{"contentBlockDelta": {oops}}', *lines[5:]])
    with pytest.raises(StreamProtocolError) as info:
        fold_message([broken])
    assert info.value.partial is not None
    assert info.value.partial.text == (
        "The capital of France is Paris. Paris is not only the capital city but"
    )
    assert info.value.partial.status == "incomplete"
