"""The Anthropic Messages decoder: recordings, the official SDK as a reference, bad input;
its SSE hot lane and fast path, which must give exactly what the full path gives."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import (
    HOT_LANE_OPTIONS,
    assert_fast_same,
    assert_hot_lane_same,
    count_grow_texts,
    decoded_payloads,
    final_message,
    fold_bytes,
    read,
    recordings,
    split_at,
    sse_event,
    streamed_display_items,
    types_of,
    without_inferred_marker,
)

import streamfold
from streamfold import (
    ContentPart,
    Message,
    PartCompleted,
    PartDelta,
    ProviderErrored,
    StreamFolder,
    StreamProtocolError,
    ToolCall,
    event_to_json,
    extract_display_items,
    fold,
)
from streamfold.framing import SSEDecoder
from streamfold.limits import Limits
from streamfold.providers import anthropic

ANTHROPIC = recordings("anthropic")

# The non-beta SDK types predate these block types; its stream helper then misreads them.
BETA_ONLY_BLOCKS = {"anthropic/compaction.sse", "anthropic/mcp-tool-use-thinking.sse"}


# --- helpers -------------------------------------------------------------------------


def payloads(data: bytes) -> list[dict[str, Any]]:
    """The JSON payload of every SSE event in `data`."""
    framer = SSEDecoder()
    frames = [*framer.feed(data), *framer.close()]
    return [json.loads(f.data) for f in frames]


def sse(*events: dict[str, Any]) -> bytes:
    """SSE bytes for the given payloads, named by their type as Anthropic does."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def fold_events(*events: dict[str, Any]) -> Message:
    return final_message(list(streamfold.fold([sse(*events)], "anthropic")))


def message_start(**usage: Any) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "usage": usage or {"input_tokens": 10, "output_tokens": 1},
        },
    }


def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **d: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str | None = "end_turn", **usage: Any) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": usage or {"output_tokens": 5},
    }


MESSAGE_STOP = {"type": "message_stop"}


def text_block(index: int, text: str) -> list[dict[str, Any]]:
    return [
        start(index, {"type": "text", "text": ""}),
        delta(index, type="text_delta", text=text),
        stop(index),
    ]


def event_offsets(data: bytes) -> list[int]:
    """Byte offsets where each SSE event after the first begins."""
    return [m.start() + 2 for m in re.finditer(rb"\n\n(?=event:)", data)]


def block_stops(data: bytes) -> set[int]:
    return {p["index"] for p in payloads(data) if p["type"] == "content_block_stop"}


def block_starts(data: bytes) -> int:
    return sum(1 for p in payloads(data) if p["type"] == "content_block_start")


def protocol_error(data: bytes, *, strict: bool = False) -> StreamProtocolError:
    with pytest.raises(StreamProtocolError) as info:
        list(streamfold.fold([data], "anthropic", strict=strict))
    return info.value


# --- 1. goldens, checked feature by feature -----------------------------------------
# (tests/record/test_recordings.py compares every recording with its golden and checks chunking.)


def test_recordings_are_all_anthropic_and_complete() -> None:
    assert len(ANTHROPIC) == 18
    for rel in ANTHROPIC:
        message = final_message(fold_bytes(read(rel)))
        assert message.metadata["provider"] == "anthropic"
        assert message.status == "complete"
        assert "skipped_events" not in message.metadata  # ping is known, not skipped


def test_redacted_thinking_keeps_its_place_and_data() -> None:
    data = read("anthropic/redacted-thinking.sse")
    message = final_message(fold_bytes(data))
    starts = [p["content_block"] for p in payloads(data) if p["type"] == "content_block_start"]
    assert [p.type for p in message.content] == ["unsupported", "unsupported", "text"]
    for part, block in zip(message.content[:2], starts[:2], strict=True):
        assert part.options == {"type": "redacted_thinking", "block": block}
        assert part.content is None


def test_thinking_signature_and_tool_arguments() -> None:
    message = final_message(fold_bytes(read("anthropic/thinking-then-tool-use.sse")))
    thinking, call = message.stream_order()
    assert isinstance(thinking, ContentPart) and thinking.type == "thinking"
    assert thinking.content is not None and thinking.content.startswith("The user wants me to")
    assert str(thinking.options["signature"]).startswith("EoQDCm0IDhgC")
    assert isinstance(call, ToolCall)
    assert call.call_id == "toolu_01825dXWLSoJwCst1qTsiWdb"
    assert call.name == "fixed_version"
    assert call.arguments == {}  # the input streamed as one empty partial_json
    assert call.metadata == {"caller": {"type": "direct"}}
    assert message.stop_reason == "tool_use" and message.raw_stop_reason == "tool_use"
    assert message.usage is not None and message.usage.reasoning_tokens == 53


def test_server_tool_use_replays_with_parsed_input() -> None:
    message = final_message(fold_bytes(read("anthropic/web-search-citations.sse")))
    server = message.content[0]
    assert server.type == "unsupported"
    assert server.options["type"] == "server_tool_use"
    assert server.options["id"] == "srvtoolu_01NcU4XNwyxWK6a9tcJZ8wGY"
    assert server.options["name"] == "web_search"
    assert server.options["block"] == {
        "type": "server_tool_use",
        "id": "srvtoolu_01NcU4XNwyxWK6a9tcJZ8wGY",
        "name": "web_search",
        "input": {"query": "top world news today"},
    }
    result = message.content[1]
    assert result.options["type"] == "web_search_tool_result"
    assert result.options["tool_use_id"] == server.options["id"]
    assert isinstance(result.options["block"], dict) and result.options["block"]["content"]


def test_mcp_tool_use_input_is_parsed() -> None:
    message = final_message(fold_bytes(read("anthropic/mcp-tool-use-thinking.sse")))
    use, result = message.content[1], message.content[2]
    assert use.options["type"] == "mcp_tool_use"
    block = use.options["block"]
    assert isinstance(block, dict)
    assert block["server_name"] == "deepwiki"
    assert block["input"] == {
        "repoName": "pydantic/pydantic-ai",
        "question": "What is this repository about? What are its main features and purpose?",
    }
    assert result.options["type"] == "mcp_tool_result"


def test_web_search_citations_map_to_citation_objects() -> None:
    data = read("anthropic/web-search-citations.sse")
    message = final_message(fold_bytes(data))
    raw = [p["delta"]["citation"] for p in payloads(data) if p.get("delta", {}).get("citation")]
    mapped = [c for part in message.content for c in part.citations]
    assert len(mapped) == len(raw) == 9
    for citation, wire in zip(mapped, raw, strict=True):
        assert citation.metadata == {"raw": wire}
        assert citation.cited_text == wire["cited_text"]
        assert citation.source is not None
        assert citation.source.type == "web"
        assert citation.source.url == wire["url"]
        assert citation.source.title == wire["title"]
    cited = message.content[6]
    assert cited.content is not None and cited.content.startswith("European leaders")
    assert len(cited.citations) == 2


def test_compaction_block_keeps_summary() -> None:
    message = final_message(fold_bytes(read("anthropic/compaction.sse")))
    compaction = message.content[0]
    assert compaction.options["type"] == "compaction"
    block = compaction.options["block"]
    assert isinstance(block, dict)
    assert str(block["content"]).startswith("The user provided a very long context")
    assert message.text == "Hello! 👋"
    # message_delta's running totals replace message_start's (cache read 55096 -> 0).
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.cache_read_tokens) == (181, 0)
    assert message.usage.raw["iterations"][0]["cache_read_input_tokens"] == 55096


def test_pause_turn() -> None:
    message = final_message(fold_bytes(read("anthropic/web-search-pause-turn.sse")))
    assert (message.status, message.stop_reason, message.raw_stop_reason) == (
        "complete",
        "pause",
        "pause_turn",
    )


# --- 2. differential: the official SDK's own accumulator ------------------------------


def _sdk_blocks(sdk_message: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in sdk_message.content:
        kind = block.type
        if kind == "text":
            citations = [c.to_dict() for c in (block.citations or [])]
            out.append({"type": "text", "text": block.text, "citations": citations})
        elif kind == "thinking":
            out.append({"type": kind, "thinking": block.thinking, "signature": block.signature})
        elif kind == "tool_use":
            out.append({"type": kind, "id": block.id, "name": block.name, "input": block.input})
        else:
            dumped = block.model_dump(mode="json", exclude_unset=True, warnings=False)
            out.append({k: v for k, v in dumped.items() if v is not None})
    return out


def _our_blocks(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in message.stream_order():
        if isinstance(item, ToolCall):
            out.append(
                {"type": "tool_use", "id": item.call_id, "name": item.name, "input": item.arguments}
            )
        elif item.type == "text":
            citations = [c.metadata["raw"] for c in item.citations]
            out.append({"type": "text", "text": item.content, "citations": citations})
        elif item.type == "thinking":
            signature = item.options.get("signature", "")
            out.append({"type": "thinking", "thinking": item.content, "signature": signature})
        else:
            block = item.options["block"]
            assert isinstance(block, dict)
            out.append({k: v for k, v in block.items() if v is not None})
    return out


def _sdk_summary(sdk_message: Any) -> dict[str, Any]:
    usage = sdk_message.usage
    return {
        "id": sdk_message.id,
        "model": sdk_message.model,
        "stop_reason": sdk_message.stop_reason,
        "usage": (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens,
        ),
    }


def _our_summary(message: Message) -> dict[str, Any]:
    usage = message.usage
    assert usage is not None
    return {
        "id": message.metadata["id"],
        "model": message.metadata["model"],
        "stop_reason": message.raw_stop_reason,
        "usage": (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        ),
    }


def _sdk_accumulate(rel: str, beta: bool) -> Any:
    pytest.importorskip("anthropic")
    from anthropic._models import construct_type

    if beta:
        from anthropic.lib.streaming import _beta_messages as streaming
        from anthropic.types.beta import BetaRawMessageStreamEvent as EventType
    else:
        from anthropic.lib.streaming import _messages as streaming
        from anthropic.types import RawMessageStreamEvent as EventType
    extra: dict[str, Any] = {}
    if "request_headers" in inspect.signature(streaming.accumulate_event).parameters:
        extra["request_headers"] = _http().Headers()
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    for payload in payloads(read(rel)):
        event = construct_type(type_=EventType, value=payload)
        snapshot = streaming.accumulate_event(
            event=event, current_snapshot=snapshot, json_bufs=json_bufs, **extra
        )
    return snapshot


# Where the non-beta SDK is wrong, and why: its types predate these blocks, so
# `construct_type` reads them as text blocks; the compaction summary (a compaction_delta,
# read as a text_delta into a non-text block) and the mcp_tool_use input (not in its
# TRACKS_TOOL_INPUT) are dropped. The beta accumulator knows them and agrees with us.
SDK_ERRORS: dict[str, tuple[int, str]] = {
    "anthropic/compaction.sse": (0, "content"),
    "anthropic/mcp-tool-use-thinking.sse": (1, "input"),
}


@pytest.mark.parametrize("beta", [False, True], ids=["messages", "beta"])
@pytest.mark.parametrize("rel", ANTHROPIC)
def test_sdk_accumulator_agrees(rel: str, beta: bool) -> None:
    sdk_message = _sdk_accumulate(rel, beta)
    ours = final_message(fold_bytes(read(rel)))
    assert _our_summary(ours) == _sdk_summary(sdk_message)
    theirs, mine = _sdk_blocks(sdk_message), _our_blocks(ours)
    assert len(theirs) == len(mine)
    if not beta and rel in SDK_ERRORS:
        index, key = SDK_ERRORS[rel]
        # Document the SDK's error exactly, then compare everything else.
        assert theirs[index].get(key) in (None, {}, "")
        assert mine[index][key]
        theirs[index] = {k: v for k, v in theirs[index].items() if k not in (key, "text")}
        theirs[index].pop("citations", None)
        mine[index] = {k: v for k, v in mine[index].items() if k != key}
        # The misread block keeps its wire fields (as extras) but reads as a text block.
        assert {k: v for k, v in theirs[index].items() if k != "type"} == {
            k: v for k, v in mine[index].items() if k != "type"
        }
        del theirs[index], mine[index]
    assert mine == theirs


# --- 3. the SDK's event objects fold to the same Message ------------------------------


def _http() -> Any:
    # anthropic 2.x speaks httpx2; older releases speak httpx.
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


def _client(data: bytes) -> Any:
    anthropic = pytest.importorskip("anthropic")
    http = _http()

    def handler(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    return anthropic.Anthropic(
        api_key="test",
        max_retries=0,
        http_client=http.Client(transport=http.MockTransport(handler)),
    )


REQUEST: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "hi"}],
}


def _apis(rel: str) -> list[str]:
    return ["beta"] if rel in BETA_ONLY_BLOCKS else ["messages", "beta"]


@pytest.mark.parametrize(("rel", "api"), [(rel, api) for rel in ANTHROPIC for api in _apis(rel)])
def test_sdk_stream_helper_events_fold_the_same(rel: str, api: str) -> None:
    data = read(rel)
    expected = final_message(fold_bytes(data))
    client = _client(data)
    messages = client.beta.messages if api == "beta" else client.messages
    with messages.stream(**REQUEST) as stream:
        events = list(stream)
    # The helper's synthesized events (text, thinking, signature, input_json, citation,
    # compaction, snapshots on *_stop) are accepted and add nothing.
    kinds = {e.type for e in events}
    assert kinds > {"message_start", "content_block_start", "message_stop"}
    assert streamfold.fold_message(events) == expected
    raw_events = list(messages.create(**REQUEST, stream=True))
    assert streamfold.fold_message(raw_events) == expected


@pytest.mark.parametrize("rel", ANTHROPIC)
def test_sdk_event_models_fold_the_same(rel: str) -> None:
    pytest.importorskip("anthropic")
    from anthropic._models import construct_type
    from anthropic.types.beta import BetaRawMessageStreamEvent

    models = [construct_type(type_=BetaRawMessageStreamEvent, value=p) for p in payloads(read(rel))]
    assert all(hasattr(m, "model_dump") for m in models)
    assert streamfold.fold_message(models) == final_message(fold_bytes(read(rel)))


def test_sdk_synthesized_events_alone_change_nothing() -> None:
    events = [
        message_start(),
        *text_block(0, "hi"),
        {"type": "text", "text": "hi", "snapshot": "hi"},
        {"type": "thinking", "thinking": "x", "snapshot": "x"},
        {"type": "signature", "signature": "sig"},
        {"type": "input_json", "partial_json": "{", "snapshot": {}},
        {"type": "citation", "citation": {}, "snapshot": []},
        {"type": "compaction", "content": "c"},
        message_delta(),
        {"type": "message_stop", "message": {"content": [{"type": "text", "text": "hi"}]}},
    ]
    message = fold_events(*events)
    assert message.text == "hi"
    assert [p.type for p in message.content] == ["text"]
    assert "skipped_events" not in message.metadata


# --- 4. bad input --------------------------------------------------------------------


@pytest.mark.parametrize("rel", ANTHROPIC)
def test_truncated_at_every_event_keeps_completed_blocks(rel: str) -> None:
    data = read(rel)
    final = final_message(fold_bytes(data)).stream_order()
    offsets = event_offsets(data)
    if len(offsets) > 80:  # the big recordings: every 7th boundary, and the last ones
        offsets = sorted({*offsets[::7], *offsets[-3:]})
    for cut in offsets:
        head = data[:cut]
        message = final_message(fold_bytes(head))
        assert message.status == "incomplete", cut
        order = message.stream_order()
        assert len(order) == block_starts(head)
        for index in block_stops(head):
            # The same part; the answer marker comes only with the end of the message.
            same = order[index] == final[index]
            assert same or order[index] == without_inferred_marker(final[index]), (cut, index)


def test_truncated_mid_tool_arguments_keeps_raw_text() -> None:
    events = [
        message_start(),
        *text_block(0, "calling"),
        start(1, {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}}),
        delta(1, type="input_json_delta", partial_json='{"city": "Par'),
    ]
    message = fold_events(*events)
    assert message.status == "incomplete"
    assert message.text == "calling"
    (call,) = message.tool_calls
    assert call.status == "incomplete"
    assert call.arguments == '{"city": "Par'
    assert "arguments_error" in call.metadata


def test_truncated_mid_server_tool_input_keeps_the_block() -> None:
    block = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    message = fold_events(
        message_start(), start(0, block), delta(0, type="input_json_delta", partial_json='{"q')
    )
    assert message.status == "incomplete"
    (part,) = message.content
    assert part.options["block"] == block
    assert part.options["input_json"] == '{"q'
    assert "input_error" in part.options


def test_truncated_after_message_delta_is_incomplete_but_knows_why() -> None:
    data = read("anthropic/thinking-then-tool-use.sse")
    head = data[: data.index(b"event: message_stop")]
    message = final_message(fold_bytes(head))
    assert message.status == "incomplete"
    assert message.stop_reason == "tool_use"
    assert message.tool_calls[0].arguments == {}


def _after_block(data: bytes, n: int) -> int:
    """Offset just after the n-th content_block_stop event (1-based)."""
    at = -1
    for _ in range(n):
        at = data.index(b"event: content_block_stop", at + 1)
    return data.index(b"\n\n", at) + 2


def _inject(
    data: bytes, at: int, payload: bytes, name: str | None = "content_block_delta"
) -> bytes:
    line = b"" if name is None else b"event: " + name.encode() + b"\n"
    return data[:at] + line + b"data: " + payload + b"\n\n" + data[at:]


def _assert_partial_holds(error: StreamProtocolError, data: bytes, blocks: int) -> None:
    assert isinstance(error.partial, Message)
    full = final_message(fold_bytes(data)).stream_order()
    assert error.partial.stream_order()[:blocks] == full[:blocks]
    assert error.partial.status == "incomplete"


# Out of order but recoverable: strict raises, lenient (the default) repairs and counts.
OUT_OF_ORDER = {
    "delta before its start": b'{"type":"content_block_delta","index":2,'
    b'"delta":{"type":"text_delta","text":"x"}}',
    "delta for a block never started": b'{"type":"content_block_delta","index":99,'
    b'"delta":{"type":"text_delta","text":"x"}}',
    "delta after its stop": b'{"type":"content_block_delta","index":0,'
    b'"delta":{"type":"thinking_delta","thinking":"x"}}',
    "block started twice": b'{"type":"content_block_start","index":1,'
    b'"content_block":{"type":"text","text":""}}',
    "stop for a block never started": b'{"type":"content_block_stop","index":7}',
}

# Broken data: a protocol error in every mode.
BAD_EVENTS = {
    "start without index": b'{"type":"content_block_start","content_block":{"type":"text"}}',
    "start without content_block": b'{"type":"content_block_start","index":5}',
    "index of the wrong type": b'{"type":"content_block_start","index":"5",'
    b'"content_block":{"type":"text","text":""}}',
    "content_block of the wrong type": b'{"type":"content_block_start","index":5,'
    b'"content_block":"text"}',
    "block type missing": b'{"type":"content_block_start","index":5,"content_block":{}}',
    "delta missing": b'{"type":"content_block_delta","index":1}',
    "message_start without message": b'{"type":"message_start"}',
    "usage of the wrong type": b'{"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":"many"}}',
    "stop_reason of the wrong type": b'{"type":"message_delta","delta":{"stop_reason":1},'
    b'"usage":{"output_tokens":1}}',
    "event without a type": b'{"index":1}',
}


def _inject_case(case: str, payload: bytes) -> bytes:
    data = read("anthropic/thinking-then-tool-use.sse")
    at = _after_block(data, 1)  # thinking block 0 complete, tool_use block 1 not started
    if case == "block started twice":
        at = data.index(b"event: content_block_delta", at)  # tool_use block 1 is open
    return _inject(data, at, payload, json.loads(payload).get("type"))


@pytest.mark.parametrize("case", [*OUT_OF_ORDER, *BAD_EVENTS])
def test_protocol_errors_are_typed_and_keep_the_partial(case: str) -> None:
    data = read("anthropic/thinking-then-tool-use.sse")
    error = protocol_error(_inject_case(case, {**OUT_OF_ORDER, **BAD_EVENTS}[case]), strict=True)
    assert error.provider == "anthropic"
    assert error.raw is not None
    assert str(error).startswith("expected")
    _assert_partial_holds(error, data, 1)


@pytest.mark.parametrize("case", list(BAD_EVENTS))
def test_broken_events_raise_when_lenient_too(case: str) -> None:
    data = read("anthropic/thinking-then-tool-use.sse")
    error = protocol_error(_inject_case(case, BAD_EVENTS[case]))
    _assert_partial_holds(error, data, 1)


# What lenient makes of each OUT_OF_ORDER case: the repairs counted, and the text parts
# added to the original message's (a stray delta opens an implicit part of its kind).
REPAIRED = {
    "delta before its start": ({"delta_before_block_start": 1}, ["x"]),
    "delta for a block never started": ({"delta_before_block_start": 1}, ["x"]),
    "delta after its stop": ({"delta_after_block_stop": 1}, []),
    "stop for a block never started": ({"stop_for_unknown_block": 1}, []),
}


@pytest.mark.parametrize("case", list(REPAIRED))
def test_out_of_order_events_are_repaired_when_lenient(case: str) -> None:
    original = final_message(fold_bytes(read("anthropic/thinking-then-tool-use.sse")))
    message = final_message(fold_bytes(_inject_case(case, OUT_OF_ORDER[case])))
    repairs, extra_text = REPAIRED[case]
    assert message.metadata.pop("repairs") == repairs
    assert message.status == "complete"
    assert message.tool_calls == original.tool_calls
    assert message.content[: len(original.content)] == original.content
    assert [p.content for p in message.content[len(original.content) :]] == extra_text


def test_a_second_start_on_an_open_index_starts_a_new_block_when_lenient() -> None:
    original = final_message(fold_bytes(read("anthropic/thinking-then-tool-use.sse")))
    data = _inject_case("block started twice", OUT_OF_ORDER["block started twice"])
    message = final_message(fold_bytes(data))
    repairs = message.metadata["repairs"]
    assert repairs.pop("reused_block_index") == 1
    # The tool_use block is ended by the new start; its input deltas then land in a
    # nameless call beside the new text block: every byte kept, the id and name not.
    assert set(repairs) == {"delta_type_mismatch"}
    assert message.content[0] == original.content[0]
    first, stray = message.tool_calls
    (want,) = original.tool_calls
    assert (first.call_id, first.name) == (want.call_id, want.name)
    assert (stray.call_id, stray.name, stray.arguments) == (None, None, want.arguments)


DELTA_MISMATCHES = [
    ("text", {"type": "text", "text": ""}, {"type": "thinking_delta", "thinking": "x"}),
    ("text", {"type": "text", "text": ""}, {"type": "signature_delta", "signature": "x"}),
    ("text", {"type": "text", "text": ""}, {"type": "input_json_delta", "partial_json": "{"}),
    ("thinking", {"type": "thinking", "thinking": ""}, {"type": "text_delta", "text": "x"}),
    ("thinking", {"type": "thinking", "thinking": ""}, {"type": "citations_delta", "citation": {}}),
    (
        "tool_use",
        {"type": "tool_use", "id": "t", "name": "n", "input": {}},
        {"type": "text_delta", "text": "x"},
    ),
    ("redacted", {"type": "redacted_thinking", "data": "abc"}, {"type": "text_delta", "text": "x"}),
    (
        "result",
        {"type": "web_search_tool_result", "tool_use_id": "s", "content": []},
        {"type": "input_json_delta", "partial_json": "{"},
    ),
    ("compaction", {"type": "compaction", "content": None}, {"type": "text_delta", "text": "x"}),
    ("text", {"type": "text", "text": ""}, {"type": "text_delta", "text": 3}),
    ("text", {"type": "text", "text": ""}, {"type": "citations_delta", "citation": "c"}),
]


@pytest.mark.parametrize(("label", "block", "bad"), DELTA_MISMATCHES)
def test_delta_that_does_not_fit_its_block(
    label: str, block: dict[str, Any], bad: dict[str, Any]
) -> None:
    data = sse(message_start(), *text_block(0, "kept"), start(1, block), delta(1, **bad))
    error = protocol_error(data, strict=True)
    assert "expected" in str(error)
    assert isinstance(error.partial, Message)
    assert error.partial.content[0].content == "kept"
    assert error.partial.content[0].type == "text"


@pytest.mark.parametrize(("label", "block", "bad"), DELTA_MISMATCHES)
def test_delta_that_does_not_fit_its_block_when_lenient(
    label: str, block: dict[str, Any], bad: dict[str, Any]
) -> None:
    data = sse(message_start(), *text_block(0, "kept"), start(1, block), delta(1, **bad))
    data += sse(stop(1), message_delta(), MESSAGE_STOP)
    if not isinstance(bad.get("text", ""), str) or bad.get("citation") == "c":
        protocol_error(data)  # a value of the wrong type is broken data, not disorder
        return
    message = final_message(fold_bytes(data))
    assert message.metadata["repairs"] == {"delta_type_mismatch": 1}
    assert message.content[0].content == "kept"
    # The delta grew an implicit part of the kind it grows, after the block it missed.
    stray = message.stream_order()[-1]
    kind = bad["type"]
    if kind == "input_json_delta":
        assert isinstance(stray, ToolCall) and stray.arguments == "{"
    else:
        assert isinstance(stray, ContentPart)
        want = {"thinking_delta": "thinking", "signature_delta": "thinking"}.get(kind, "text")
        assert stray.type == want
        assert stray.content == bad.get("text", bad.get("thinking", ""))
        if kind == "signature_delta":
            assert stray.options == {"signature": "x"}
        if kind == "citations_delta":
            assert len(stray.citations) == 1


def test_mismatch_message_names_block_and_delta() -> None:
    data = sse(message_start(), *text_block(0, "a"), start(1, {"type": "text", "text": ""}))
    error = protocol_error(data + sse(delta(1, type="thinking_delta", thinking="x")), strict=True)
    assert "text block at index 1" in str(error) and "thinking_delta" in str(error)


def test_broken_json_is_a_protocol_error() -> None:
    data = read("anthropic/thinking-then-tool-use.sse")
    error = protocol_error(_inject(data, _after_block(data, 1), b'{"type": pi', "ping"))
    assert "invalid JSON" in str(error)


def test_broken_json_keeps_the_partial() -> None:
    data = read("anthropic/thinking-then-tool-use.sse")
    error = protocol_error(_inject(data, _after_block(data, 1), b'{"type": pi', "ping"))
    _assert_partial_holds(error, data, 1)


def test_error_event_ends_with_status_error() -> None:
    data = read("anthropic/web-fetch-thinking.sse")
    at = _after_block(data, 2)  # thinking and server_tool_use done
    # Cut inside the web_fetch result's start: error arrives with block 3 never begun.
    error_event = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    events = list(streamfold.fold([_inject(data[:at], at, error_event, "error")]))
    (errored,) = [e for e in events if isinstance(e, ProviderErrored)]
    assert errored.error_type == "overloaded_error"
    assert errored.message == "Overloaded"
    message = final_message(events)
    assert message.status == "error"
    assert message.stop_reason == "error"
    assert message.metadata["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    full = final_message(fold_bytes(data)).stream_order()
    assert message.stream_order() == full[:2]
    assert errored.partial.stream_order() == full[:2]


def test_error_event_mid_block_keeps_the_open_part() -> None:
    events = [
        message_start(),
        *text_block(0, "first"),
        start(1, {"type": "text", "text": ""}),
        delta(1, type="text_delta", text="half"),
        {"type": "error", "error": {"type": "api_error", "message": "boom"}},
        *text_block(2, "never seen"),
    ]
    message = fold_events(*events)
    assert message.status == "error"
    assert [p.content for p in message.content] == ["first", "half"]
    assert message.metadata["error"] == {"type": "api_error", "message": "boom"}


def test_unknown_events_and_delta_types_are_skipped() -> None:
    events = [
        message_start(),
        {"type": "brand_new_event", "x": 1},
        start(0, {"type": "text", "text": ""}),
        delta(0, type="text_delta", text="hi"),
        delta(0, type="sparkle_delta", sparkle="*"),
        stop(0),
        message_delta(),
        MESSAGE_STOP,
    ]
    message = fold_events(*events)
    assert message.text == "hi"
    assert message.status == "complete"
    assert message.metadata["skipped_events"] == {
        "brand_new_event": 1,
        "content_block_delta.sparkle_delta": 1,
    }


def test_never_a_bare_exception_on_garbage() -> None:
    garbage: list[dict[str, Any]] = [
        {"type": "content_block_delta", "index": 0, "delta": None},
        {"type": "content_block_delta", "index": 0, "delta": {"type": 5}},
        {"type": "content_block_start", "index": True, "content_block": {"type": "text"}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": 1}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": 1, "name": "n", "input": {}},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": "", "citations": {}},
        },
        {"type": "message_start", "message": {"id": 1}},
        {"type": "message_start", "message": {"usage": []}},
        {"type": "message_delta", "delta": []},
        {"type": "content_block_stop"},
        {"type": 3},
    ]
    for event in garbage:
        with pytest.raises(StreamProtocolError):
            list(streamfold.fold([sse(message_start(), event)], "anthropic"))


# --- message-level behaviour (synthetic streams) ---------------------------------------

STOP_REASONS = [
    ("end_turn", "stop", "complete"),
    ("stop_sequence", "stop", "complete"),
    ("tool_use", "tool_use", "complete"),
    ("max_tokens", "length", "length"),
    ("model_context_window_exceeded", "length", "length"),
    ("pause_turn", "pause", "complete"),
    ("refusal", "refusal", "content_filtered"),
    ("something_new", "other", "complete"),
]


@pytest.mark.parametrize(("raw", "reason", "status"), STOP_REASONS)
def test_stop_reasons(raw: str, reason: str, status: str) -> None:
    message = fold_events(message_start(), *text_block(0, "x"), message_delta(raw), MESSAGE_STOP)
    assert (message.raw_stop_reason, message.stop_reason, message.status) == (raw, reason, status)


def test_stop_sequence_and_details_go_to_metadata() -> None:
    md = {
        "type": "message_delta",
        "delta": {
            "stop_reason": "refusal",
            "stop_sequence": None,
            "stop_details": {"type": "refusal", "category": "cyber", "explanation": None},
        },
        "usage": {"output_tokens": 3},
    }
    message = fold_events(message_start(), md, MESSAGE_STOP)
    assert message.metadata["stop_details"] == md["delta"]["stop_details"]
    assert "stop_sequence" not in message.metadata
    md2 = message_delta("stop_sequence")
    md2["delta"]["stop_sequence"] = "###"
    message = fold_events(message_start(), md2, MESSAGE_STOP)
    assert message.metadata["stop_sequence"] == "###"


def test_usage_is_cumulative_and_keeps_message_start_counts() -> None:
    events = [
        message_start(
            input_tokens=50,
            output_tokens=1,
            cache_read_input_tokens=7,
            cache_creation_input_tokens=3,
        ),
        *text_block(0, "x"),
        message_delta("end_turn", output_tokens=40),
        message_delta("end_turn", output_tokens=42, cache_read_input_tokens=None),
        MESSAGE_STOP,
    ]
    usage = fold_events(*events).usage
    assert usage is not None and usage.cumulative
    assert (usage.input_tokens, usage.output_tokens) == (50, 42)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (7, 3)
    events[-3] = message_delta("end_turn", output_tokens=40, input_tokens=60)
    usage = fold_events(*events).usage
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (60, 42)


def test_message_stop_without_message_delta_is_complete() -> None:
    message = fold_events(message_start(), *text_block(0, "x"), MESSAGE_STOP)
    assert message.status == "complete" and message.stop_reason is None


def test_tool_input_given_whole_at_start() -> None:
    block = {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}
    message = fold_events(message_start(), start(0, block), stop(0), MESSAGE_STOP)
    (call,) = message.tool_calls
    assert call.arguments == {"a": 1} and call.status == "complete"


def test_thinking_signature_in_pieces_and_empty_thinking() -> None:
    events = [
        message_start(),
        start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, type="signature_delta", signature="abc"),
        delta(0, type="signature_delta", signature="def"),
        stop(0),
        start(1, {"type": "thinking", "thinking": "", "signature": ""}),
        stop(1),
        MESSAGE_STOP,
    ]
    signed, unsigned = fold_events(*events).content
    assert signed.type == "thinking" and signed.content == ""
    assert signed.options == {"signature": "abcdef"}
    assert unsigned.options == {}  # an empty signature is not replayable: not kept


def test_compaction_delta_fields_replace() -> None:
    events = [
        message_start(),
        start(0, {"type": "compaction", "content": None}),
        delta(0, type="compaction_delta", content="summary", encrypted_content="enc"),
        stop(0),
        MESSAGE_STOP,
    ]
    (part,) = fold_events(*events).content
    assert part.options["block"] == {
        "type": "compaction",
        "content": "summary",
        "encrypted_content": "enc",
    }


def test_unknown_block_type_replays_whole() -> None:
    block = {"type": "container_upload", "file_id": "file_1"}
    with_input = {"type": "future_tool_use", "id": "f1", "name": "x", "input": {}}
    events = [
        message_start(),
        start(0, block),
        stop(0),
        start(1, with_input),
        delta(1, type="input_json_delta", partial_json='{"k": '),
        delta(1, type="input_json_delta", partial_json="[1]}"),
        stop(1),
        MESSAGE_STOP,
    ]
    first, second = fold_events(*events).content
    assert first.options == {"type": "container_upload", "block": block}
    assert second.options["block"] == {**with_input, "input": {"k": [1]}}


DOCUMENT_CITATIONS = [
    (
        {
            "type": "char_location",
            "cited_text": "the sky is blue",
            "document_index": 0,
            "document_title": "Facts",
            "start_char_index": 4,
            "end_char_index": 19,
            "file_id": None,
        },
        {"type": "document", "title": "Facts", "document_id": None, "url": None},
        {"document_index": 0, "start_char_index": 4, "end_char_index": 19},
    ),
    (
        {
            "type": "page_location",
            "cited_text": "p",
            "document_index": 1,
            "document_title": None,
            "start_page_number": 2,
            "end_page_number": 3,
            "file_id": "file_9",
        },
        {"type": "document", "title": None, "document_id": "file_9", "url": None},
        {"document_index": 1, "start_page_number": 2, "end_page_number": 3},
    ),
    (
        {
            "type": "content_block_location",
            "cited_text": "c",
            "document_index": 2,
            "document_title": "Doc",
            "start_block_index": 0,
            "end_block_index": 1,
        },
        {"type": "document", "title": "Doc", "document_id": None, "url": None},
        {"document_index": 2, "start_block_index": 0, "end_block_index": 1},
    ),
    (
        {
            "type": "search_result_location",
            "cited_text": "s",
            "source": "https://example.com/a",
            "title": "A",
            "search_result_index": 0,
            "start_block_index": 0,
            "end_block_index": 2,
        },
        {"type": "web", "title": "A", "document_id": None, "url": "https://example.com/a"},
        {"search_result_index": 0, "start_block_index": 0, "end_block_index": 2},
    ),
    (
        {
            "type": "search_result_location",
            "cited_text": "s",
            "source": "kb://policy-7",
            "title": None,
            "search_result_index": 3,
            "start_block_index": 1,
            "end_block_index": 2,
        },
        {"type": "document", "title": None, "document_id": "kb://policy-7", "url": None},
        {"search_result_index": 3, "start_block_index": 1, "end_block_index": 2},
    ),
]


@pytest.mark.parametrize(("wire", "source", "locations"), DOCUMENT_CITATIONS)
def test_citation_types(
    wire: dict[str, Any], source: dict[str, Any], locations: dict[str, Any]
) -> None:
    events = [
        message_start(),
        start(0, {"type": "text", "text": "", "citations": []}),
        delta(0, type="citations_delta", citation=wire),
        delta(0, type="text_delta", text="cited"),
        stop(0),
        MESSAGE_STOP,
    ]
    (part,) = fold_events(*events).content
    (citation,) = part.citations
    assert citation.cited_text == wire["cited_text"]
    assert citation.metadata == {"raw": wire}
    assert citation.source is not None
    got = citation.source.model_dump()
    assert {k: got[k] for k in source} == source
    assert citation.source.metadata == locations
    # Anthropic's indexes point into the source, not into this part's text.
    assert citation.start_index is None and citation.end_index is None


def test_citations_on_the_start_block_are_kept() -> None:
    wire = {
        "type": "web_search_result_location",
        "cited_text": "t",
        "url": "https://x.test",
        "title": "X",
        "encrypted_index": "e",
    }
    events = [
        message_start(),
        start(0, {"type": "text", "text": "whole", "citations": [wire]}),
        stop(0),
        MESSAGE_STOP,
    ]
    (part,) = fold_events(*events).content
    assert part.content == "whole"
    assert [c.metadata["raw"] for c in part.citations] == [wire]


# --- 5. display items ----------------------------------------------------------------


def _without_stop_reason(items: list[Any]) -> list[Any]:
    out = []
    for item in items:
        content = {k: v for k, v in item.content.items() if k != "stop_reason"}
        out.append((item.type, item.message_type, content))
    return out


@pytest.mark.parametrize("rel", ANTHROPIC)
def test_display_items_stream_at_each_block_stop(rel: str) -> None:
    events = fold_bytes(read(rel))
    completed = [e for e in events if isinstance(e, PartCompleted)]
    assert completed and all(e.explicit for e in completed)
    streamed = streamed_display_items(events)
    final = extract_display_items(final_message(events), order="stream")
    assert _without_stop_reason(streamed) == _without_stop_reason(final)


def test_display_items_of_a_cut_stream() -> None:
    data = read("anthropic/thinking-then-tool-use.sse")
    # Cut after the tool_use block started, before its input: its end is inferred.
    events = fold_bytes(data[: data.index(b"event: content_block_delta", _after_block(data, 1))])
    completed = [e for e in events if isinstance(e, PartCompleted)]
    assert [e.explicit for e in completed] == [True, False]
    streamed = [item for e in completed for item in e.display_items]
    final = extract_display_items(final_message(events), order="stream")
    assert _without_stop_reason(streamed) == _without_stop_reason(final)


def test_no_warnings_from_decoding() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for rel in ANTHROPIC:
            fold_bytes(read(rel))


# The SSE hot lane gives exactly what the framer and decode() give.
#
# The hot lane reads the common delta events straight from the bytes. Every stream here is
# folded twice, with and without it, split at arbitrary points (so events straddle the
# pieces), lenient and strict, with tight limits and live partial arguments: events, errors
# and the final message must not differ. The event pools mix events the lane takes with
# look-alikes it must leave to the full path (escapes, bad UTF-8, raw control characters,
# other spacing, a closed or unknown block, a delta of another kind...).


def _delta(index: Any, body: str) -> bytes:
    return sse_event(
        "content_block_delta",
        '{"type":"content_block_delta","index":' + str(index) + ',"delta":' + body + "}",
    )


def _text(index: Any, raw: str) -> bytes:
    return _delta(index, '{"type":"text_delta","text":"' + raw + '"}')


def _start(index: int, block: dict[str, Any]) -> bytes:
    return sse_event(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


_MESSAGE_START = sse_event(
    "message_start",
    {
        "type": "message_start",
        "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}},
    },
)


_ANTHROPIC_EVENTS: list[bytes] = [
    _MESSAGE_START,
    _start(0, {"type": "text", "text": ""}),
    _start(1, {"type": "thinking", "thinking": "", "signature": ""}),
    _start(2, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
    _start(3, {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}),
    _start(0, {"type": "text", "text": "again"}),
    _text(0, "Hello"),
    _text(0, " world, naïve ☃ 😀"),
    _text(0, ""),
    _text(0, 'esc \\"q\\" \\n \\t \\u00e9 \\ud83d\\ude00 \\/'),
    _text(0, "bad escape \\x"),
    _text(0, "lone \\ud800"),
    _text(0, 'raw " quote'),
    _text(0, "trailing backslash \\"),
    _text(0, "raw\ttab").replace(b"\\t", b"\t"),
    _text(0, "raw\u0001ctl"),
    _text(0, "x") + b"\x00",
    _text(0, "bad utf8 ").replace(b"utf8 ", b"utf8 \xff\xfe"),
    _text(0, "cut utf8 ").replace(b"utf8 ", b"utf8 \xe2\x98"),
    _text("00", "leading zero"),
    _text("0.0", "float index"),
    _text(-1, "negative"),
    _text(9, "unknown block"),
    _text(1, "text into thinking"),
    _text(12345678901234, "huge index"),
    _delta(0, '{"type":"text_delta","text":"a","text":"dup"}'),
    _delta(0, '{"type":"text_delta","text":"a","extra":1}'),
    _delta(0, '{"text":"reordered","type":"text_delta"}'),
    sse_event(
        "content_block_delta",
        '{"type": "content_block_delta", "index": 0, "delta": '
        '{"type": "text_delta", "text": "spaced"}}',
    ),
    sse_event(
        None,
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"no'
        ' event line"}}',
    ),
    b'event: content_block_delta\ndata:{"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"no space"}}\n\n',
    b'event: content_block_delta\nid: 7\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"with id"}}\n\n',
    b'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"crlf"}}\r\n\r\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"two data lines"}}\ndata: {}\n\n',
    b": a comment\n\n",
    b"\n",
    _delta(1, '{"type":"thinking_delta","thinking":"Let me think"}'),
    _delta(1, '{"type":"thinking_delta","thinking":"more \\"thought\\""}'),
    _delta(1, '{"type":"signature_delta","signature":"c2ln"}'),
    _delta(0, '{"type":"thinking_delta","thinking":"thinking into text"}'),
    _delta(2, '{"type":"input_json_delta","partial_json":"{\\"a\\": "}'),
    _delta(2, '{"type":"input_json_delta","partial_json":"[1, \\"x\\""}'),
    _delta(2, '{"type":"input_json_delta","partial_json":""}'),
    _delta(2, '{"type":"input_json_delta","partial_json":"]}"}'),
    _delta(3, '{"type":"input_json_delta","partial_json":"{\\"query\\": \\"q\\"}"}'),
    _delta(2, '{"type":"text_delta","text":"text into a tool"}'),
    sse_event("content_block_stop", {"type": "content_block_stop", "index": 0}),
    sse_event("content_block_stop", {"type": "content_block_stop", "index": 2}),
    sse_event("ping", {"type": "ping"}),
    sse_event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 5},
        },
    ),
    sse_event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
    sse_event("message_stop", {"type": "message_stop"}),
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"unterminated',
]


_OPENING = (
    _MESSAGE_START
    + _start(0, {"type": "text", "text": ""})
    + _start(1, {"type": "thinking", "thinking": ""})
    + _start(2, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}})
)


@pytest.mark.usefixtures("lane_from_the_first_event")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.sampled_from(range(len(_ANTHROPIC_EVENTS))), max_size=30),
    cuts=st.lists(st.integers(0, 4000), max_size=6),
    opening=st.booleans(),
    options=HOT_LANE_OPTIONS,
    named=st.booleans(),
)
def test_anthropic_hot_lane_equals_full_path(
    picks: list[int], cuts: list[int], opening: bool, options: dict[str, Any], named: bool
) -> None:
    data = (_OPENING if opening else b"") + b"".join(_ANTHROPIC_EVENTS[i] for i in picks)
    assert_hot_lane_same(split_at(data, cuts), "anthropic" if named else None, **options)


@pytest.mark.usefixtures("lane_from_the_first_event")
def test_hot_lane_takes_the_common_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: on a real recording the lane takes nearly every delta, and decode()
    sees only the rest."""
    data = read("anthropic/thinking-signature.sse")
    decoded = decoded_payloads(monkeypatch, anthropic.AnthropicDecoder)
    deltas = sum(type(e) is PartDelta for e in fold([data], "anthropic"))
    assert deltas > 20
    # decode() saw only the signature deltas: every text, thinking and input delta was
    # taken from the bytes.
    assert types_of(decoded).count("content_block_delta") == data.count(b'"signature_delta"')
    assert "message_stop" in types_of(decoded)


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("cut", [0.3, 0.5, 0.8])
def test_anthropic_hot_lane_state_saves_and_restores(cut: float) -> None:
    """A fold saved while the lane holds a block (its last prefix) restores in a fresh
    folder and continues exactly as the uninterrupted fold."""
    data = read("anthropic/thinking-signature.sse")
    pieces = [data[at : at + 700] for at in range(0, len(data), 700)]
    half = int(len(pieces) * cut)
    folder = StreamFolder("anthropic")
    events = [e for piece in pieces[:half] for e in folder.feed(piece)]
    decoder = folder._decoder
    assert isinstance(decoder, anthropic.AnthropicDecoder) and decoder._hot is not None
    restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    events += [e for piece in pieces[half:] for e in restored.feed(piece)] + restored.close()
    whole = list(fold(pieces, "anthropic"))
    assert [event_to_json(e) for e in events] == [event_to_json(e) for e in whole]


def _tool_json(index: int, raw: str) -> bytes:
    return _delta(index, '{"type":"input_json_delta","partial_json":"' + raw + '"}')


_RUN_BREAKERS = {
    "bad utf-8": _text(0, "bad ").replace(b"bad ", b"bad \xff"),
    "cut utf-8": _text(0, "cut ").replace(b"cut ", b"cut \xe2\x98"),
    "bad escape": _text(0, "bad \\x escape"),
    "lone surrogate": _text(0, "lone \\ud800"),
    "raw control": _text(0, "raw\u0001ctl"),
    "escaped quote": _text(0, 'fine \\"q\\" \\u00e9 \\n'),
    "trailing backslash": _text(0, "ends \\\\"),
    "other block": _text(9, "unknown"),
    "other kind": _delta(0, '{"type":"thinking_delta","thinking":"into text"}'),
    "spacing": sse_event(
        "content_block_delta",
        '{"type": "content_block_delta", "index": 0, "delta": '
        '{"type": "text_delta", "text": "spaced"}}',
    ),
}


@pytest.mark.usefixtures("lane_from_the_first_event")
@pytest.mark.parametrize("breaker", sorted(_RUN_BREAKERS))
@pytest.mark.parametrize(
    "options",
    [{}, {"strict": True}, {"limits": Limits(max_part_chars=70)}],
    ids=["lenient", "strict", "limit-mid-run"],
)
def test_a_run_with_any_event_in_the_middle_folds_as_the_full_path(
    breaker: str, options: dict[str, Any]
) -> None:
    """The lane takes a run of one block's events in one accumulator call; an event in
    the middle that the run may not take (or that passes the size limit) ends it there,
    with every event before it delivered."""
    before = b"".join(_text(0, f"piece {n} ") for n in range(8))
    after = b"".join(_text(0, f"more {n} ") for n in range(8))
    data = _OPENING + before + _RUN_BREAKERS[breaker] + after
    for cuts in ([], [len(_OPENING) + 100], [len(data) // 2, len(data) - 30]):
        assert_hot_lane_same(split_at(data, cuts), "anthropic", **options)


@pytest.mark.usefixtures("lane_from_the_first_event")
def test_tool_input_runs_with_live_arguments_fold_as_the_full_path() -> None:
    """A tool_use run with partial_arguments on: the changes per delta are the same."""
    pieces = ['{\\"city\\": \\"Par', "is\\", '\\"days\\": [1, ', "2]", ", \\n", '\\"x\\": null}']
    data = _OPENING + b"".join(_tool_json(2, p) for p in pieces)
    assert_hot_lane_same([data], "anthropic", partial_arguments=True)
    assert_hot_lane_same([data], "anthropic")


@pytest.mark.usefixtures("lane_from_the_first_event")
def test_runs_are_taken_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: on a real recording, runs of several deltas reach the accumulator
    in one grow_texts call, escaped text included."""
    sizes = count_grow_texts(monkeypatch)
    data = read("anthropic/thinking-signature.sse")
    list(fold([data], "anthropic"))
    assert max(sizes) > 20
    escaped = _OPENING + b"".join(_text(0, f'q \\"{n}\\" \\n') for n in range(5))
    sizes.clear()
    list(fold([escaped], "anthropic"))
    assert sizes == [4]  # the first is taken alone: a live stream's chunk holds one event


# The fast path (object_text) gives exactly what the full path gives: deltas drawn from
# the cases object_text must tell apart.


def _block_payload(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta_payload(index: Any, delta: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta, **extra}


_ANTHROPIC_PAYLOAD_OPENING = [
    {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": []}},
    _block_payload(0, {"type": "text", "text": ""}),
    _block_payload(1, {"type": "thinking", "thinking": ""}),
    _block_payload(2, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
]


_ANTHROPIC_PAYLOADS = [
    _delta_payload(0, {"type": "text_delta", "text": "a"}),
    _delta_payload(0, {"type": "text_delta", "text": ""}),
    _delta_payload(1, {"type": "thinking_delta", "thinking": "b"}),
    _delta_payload(2, {"type": "input_json_delta", "partial_json": '{"x": '}),
    _delta_payload(2, {"type": "input_json_delta", "partial_json": "1}"}),
    _delta_payload(2, {"type": "input_json_delta", "partial_json": ""}),
    _delta_payload(0, {"type": "thinking_delta", "thinking": "wrong block"}),
    _delta_payload(1, {"type": "text_delta", "text": "wrong block"}),
    _delta_payload(0, {"type": "input_json_delta", "partial_json": "{}"}),
    _delta_payload(1, {"type": "signature_delta", "signature": "sig"}),
    _delta_payload(0, {"type": "text_delta", "text": 5}),
    _delta_payload(0, {"type": "text_delta"}),
    _delta_payload(0, {"text": "no type"}),
    _delta_payload(0, "not a delta"),
    _delta_payload(True, {"type": "thinking_delta", "thinking": "index True"}),  # hashes as 1
    _delta_payload(1.0, {"type": "thinking_delta", "thinking": "index 1.0"}),
    _delta_payload("0", {"type": "text_delta", "text": "index str"}),
    _delta_payload([0], {"type": "text_delta", "text": "index list"}),
    _delta_payload(9, {"type": "text_delta", "text": "unknown block"}),
    _delta_payload(0, {"type": "text_delta", "text": "extra"}, extra=1),
    {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "no index"}},
    {"type": "content_block_delta", "index": 0},
    {"index": 0, "delta": {"type": "text_delta", "text": "no type"}},
    {"type": ["content_block_delta"], "index": 0},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_stop", "index": 2},
    _block_payload(0, {"type": "text", "text": "again"}),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picks=st.lists(st.sampled_from(range(len(_ANTHROPIC_PAYLOADS))), max_size=25))
def test_anthropic_fast_equals_full(picks: list[int]) -> None:
    events = _ANTHROPIC_PAYLOAD_OPENING + [_ANTHROPIC_PAYLOADS[i] for i in picks]
    for strict in (False, True):
        assert_fast_same(events, "anthropic", strict=strict)


def test_an_sse_error_line_ends_the_message_with_the_servers_error() -> None:
    # llama.cpp's server (its Messages endpoint too) reports a failure on an `error:` line
    # whose object's `type` names the error: before, skipped as an unknown event type, the
    # message ended merely cut and the reason was lost.
    data = read("anthropic/text-basic.sse")
    cut = data[: data.index(b"event: content_block_stop")]
    error = b'error: {"code":500,"message":"CUDA error: out of memory","type":"server_error"}\n\n'
    for provider in (None, "anthropic"):
        message = final_message(fold_bytes(cut + error, provider=provider))
        assert (message.status, message.stop_reason) == ("error", "error")
        assert message.metadata["error"] == {
            "type": "server_error",
            "message": "CUDA error: out of memory",
        }
        assert message.text  # the text before the failure is kept
