"""The UI message stream: every recording read back by the `ai` package's own reader (node),
plus the encoder's edge cases and the demo routes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record.test_recordings import READY
from starlette.applications import Starlette
from starlette.testclient import TestClient
from support import REAL, final_message, fold_bytes, read, replayed

from streamfold import (
    ContentPart,
    Message,
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartStarted,
    ProviderErrored,
    StreamProtocolError,
    ToolCall,
    Usage,
    afold,
    fold,
    utterance,
)
from streamfold.ui import (
    DATA_BLOCK,
    UI_MESSAGE_STREAM_HEADERS,
    aencode_sse,
    ato_ui_message_stream,
    encode_sse,
    to_ui_message_stream,
)
from streamfold.web import ui_routes

JS = Path(__file__).parent.parent / "js"


def _sse(rel: str) -> bytes:
    return b"".join(encode_sse(to_ui_message_stream(fold_bytes(read(rel)))))


@pytest.fixture(scope="module")
def ai_reader() -> dict[str, Any]:
    """Every ready recording's SSE, read in one node run by the `ai` package (as useChat)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the `ai` package's reader cannot run")
    if not (JS / "node_modules" / "ai").is_dir():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail(f"{JS}/node_modules is missing and npm is not installed: run `npm ci`")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=JS, capture_output=True, text=True
        )
        assert done.returncode == 0, f"npm ci in {JS} failed:\n{done.stderr}"
    streams = {rel: _sse(rel).decode() for rel in READY}
    run = subprocess.run(
        [node, "read-ui-stream.mjs"],
        cwd=JS,
        input=json.dumps(streams),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"the node reader failed:\n{run.stderr}"
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def _ui_parts(ui: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = ui["parts"]
    if kind == "tool":
        return [p for p in parts if p["type"].startswith("tool-") or p["type"] == "dynamic-tool"]
    return [p for p in parts if p["type"] == kind]


def _meta(part: dict[str, Any], key: str = "providerMetadata") -> dict[str, Any]:
    value: dict[str, Any] = (part.get(key) or {}).get("streamfold", {})
    return value


def _text_runs(message: Message) -> list[list[ContentPart]]:
    """The message's text parts, those next to each other in the stream with the same
    options (the same marker) grouped: each group reads as one text."""
    runs: list[list[ContentPart]] = []
    previous: ContentPart | ToolCall | None = None
    for item in message.stream_order():
        if isinstance(item, ContentPart) and item.type == "text":
            if (
                isinstance(previous, ContentPart)
                and previous.type == "text"
                and previous.options == item.options
            ):
                runs[-1].append(item)
            else:
                runs.append([item])
        previous = item
    return runs


def _run_options(run: list[ContentPart]) -> dict[str, Any]:
    options = dict(run[0].options)
    if len(run) > 1 and any(p.citations for p in run):
        options["citations"] = _cited_ranges(run)
    return options


def _source_names(part: ContentPart) -> set[str]:
    names = set()
    for c in part.citations:
        source = c.source
        if source is None:
            continue
        if source.url is not None and source.type != "document":
            names.add(source.url)
        elif source.document_id is not None or source.title is not None:
            names.add(source.title or source.document_id or "document")
        elif source.url is not None:
            names.add(source.url)
    return names


def _cited_ranges(run: list[ContentPart]) -> list[dict[str, Any]]:
    ranges, at = [], 0
    for part in run:
        size = len(part.content or "")
        if part.citations:
            ranges.append({"start": at, "end": at + size})
        at += size
    return ranges


@pytest.mark.parametrize("rel", READY)
def test_ai_sdk_reads_the_same_message(rel: str, ai_reader: dict[str, Any]) -> None:
    message = final_message(fold_bytes(read(rel)))
    got = ai_reader[rel]
    ui = got["message"]
    assert ui is not None, got["errors"]
    assert got["valid"], got["invalid"]
    assert ui["role"] == "assistant"

    # Errors: only the provider's own, reported in-stream.
    if message.status == "error":
        error = message.metadata["error"]
        assert len(got["errors"]) == 1
        assert str(error["message"]) in got["errors"][0]
    else:
        assert got["errors"] == []

    runs = _text_runs(message)
    ui_texts = _ui_parts(ui, "text")
    assert [t["text"] for t in ui_texts] == ["".join(p.content or "" for p in r) for r in runs]
    assert all(t["state"] == "done" for t in ui_texts)
    ui_options = [_meta(t) for t in ui_texts]
    # Each cited piece names its sources by the ids of the source chunks sent for them.
    names = {
        s["sourceId"]: s["url"] if s["type"] == "source-url" else s["title"]
        for s in ui["parts"]
        if s["type"] in ("source-url", "source-document")
    }
    for meta, run in zip(ui_options, runs, strict=True):
        cited = [p for p in run if p.citations] if len(run) > 1 else []
        for place, part in zip(meta.get("citations", []), cited, strict=True):
            assert {names[i] for i in place.pop("sourceIds")} == _source_names(part)
    assert ui_options == [_run_options(r) for r in runs]

    thinking = [p for p in message.content if p.type == "thinking"]
    ui_reasoning = _ui_parts(ui, "reasoning")
    assert [r["text"] for r in ui_reasoning] == [p.content or "" for p in thinking]
    # The options (signature included, whole) arrive on reasoning-end.
    assert [_meta(r) for r in ui_reasoning] == [p.options for p in thinking]

    ui_tools = [t for t in _ui_parts(ui, "tool") if not t.get("providerExecuted")]
    assert [(t["type"], t["toolCallId"], t["state"], t["input"]) for t in ui_tools] == [
        (f"tool-{c.name}", c.call_id, "input-available", c.arguments) for c in message.tool_calls
    ]
    assert [_meta(t, "callProviderMetadata") for t in ui_tools] == [
        c.metadata for c in message.tool_calls
    ]

    # The provider's own blocks, each once: a tool it ran holds its call's block and its
    # result's (when that came apart), the others are data parts.
    ran = [t for t in _ui_parts(ui, "tool") if t.get("providerExecuted")]
    calls = [_meta(t, "callProviderMetadata")["provider_block"] for t in ran]
    results = [_meta(t, "resultProviderMetadata").get("provider_block") for t in ran]
    data = [b["data"] for b in _ui_parts(ui, DATA_BLOCK)]
    blocks = [p.options for p in message.content if p.type == "unsupported"]
    sent = calls + [r for r in results if r is not None] + data
    assert sorted(map(json.dumps, sent)) == sorted(map(json.dumps, blocks))
    assert all(t["state"] in ("input-available", "output-available", "output-error") for t in ran)

    urls = {
        c.source.url
        for p in message.content
        for c in p.citations
        if c.source is not None and c.source.url is not None and c.source.type != "document"
    }
    ui_urls = [s["url"] for s in _ui_parts(ui, "source-url")]
    assert sorted(ui_urls) == sorted(urls)  # each source once
    docs = [s for s in _ui_parts(ui, "source-document")]
    assert all(d["title"] for d in docs)

    # Stream order survives: parts, tool calls and blocks in the order they were streamed.
    # A tool the provider ran stands where its call's block did; its result is in it.
    kinds = {"text": "text", "reasoning": "thinking", DATA_BLOCK: "unsupported"}
    ui_order = [
        kinds.get(p["type"], "unsupported" if p.get("providerExecuted") else "tool")
        for p in ui["parts"]
        if p["type"] in kinds or p["type"].startswith("tool-") or p["type"] == "dynamic-tool"
    ]
    events = [e for e in fold_bytes(read(rel)) if isinstance(e, PartStarted)]
    in_tools = {json.dumps(r) for r in results if r is not None}
    done = {
        e.index: e.part
        for e in fold_bytes(read(rel))
        if isinstance(e, PartCompleted) and isinstance(e.part, ContentPart)
    }
    stream_order = [
        "tool" if isinstance(e.part, ToolCall) else e.part.type
        for e in events
        if isinstance(e.part, ToolCall)
        or (
            e.part.type in ("text", "thinking", "unsupported")
            and json.dumps(done[e.index].options) not in in_tools
        )
    ]
    # Each run of joined text parts once.
    skip = [n for run in runs for n in [0] + [1] * (len(run) - 1)]
    texts = iter(skip)
    stream_order = [k for k in stream_order if k != "text" or not next(texts)]
    assert ui_order == stream_order

    metadata = ui["metadata"]
    assert metadata["status"] == message.status
    assert metadata.get("stopReason") == message.stop_reason
    assert metadata.get("rawStopReason") == message.raw_stop_reason
    if message.usage is not None:
        assert metadata["usage"]["inputTokens"] == message.usage.input_tokens
        assert metadata["usage"].get("outputTokens") == message.usage.output_tokens
        assert metadata["usage"]["totalTokens"] == message.usage.total_tokens
    assert got["chunks"][:2] == ["start", "start-step"]
    assert got["chunks"][-2:] == ["finish-step", "finish"]


def test_a_recording_with_a_signature_and_a_tool_call(ai_reader: dict[str, Any]) -> None:
    # A check that the comparisons above compare something.
    rel = "anthropic/thinking-then-tool-use.sse"
    ui = ai_reader[rel]["message"]
    (reasoning,) = _ui_parts(ui, "reasoning")
    assert reasoning["text"].startswith("The user wants me to")
    assert len(_meta(reasoning)["signature"]) > 100
    (tool,) = _ui_parts(ui, "tool")
    assert tool["type"] == "tool-fixed_version"
    assert tool["toolCallId"].startswith("toolu_")


# --- the encoder, event by event ---------------------------------------------------------


def _chunks(events: list[Any]) -> list[dict[str, Any]]:
    return list(to_ui_message_stream(events))


def _message(**kw: Any) -> Message:
    return Message.model_construct(
        role="assistant",
        content=kw.get("content", []),
        tool_calls=kw.get("tool_calls", []),
        tool_results=[],
        status=kw.get("status", "complete"),
        usage=kw.get("usage"),
        stop_reason=kw.get("stop_reason", "stop"),
        raw_stop_reason=kw.get("raw_stop_reason"),
        metadata=kw.get("metadata", {}),
    )


def test_text_and_thinking_chunks() -> None:
    thinking = ContentPart.thinking("hmm", signature="sig-ab")
    text = ContentPart.narration("Looking.")
    chunks = _chunks(
        [
            PartStarted(index=0, part=ContentPart.thinking("")),
            PartDelta(index=0, part_type="thinking", content="hmm"),
            PartDelta(index=0, part_type="thinking", options={"signature": "sig-"}),
            PartDelta(index=0, part_type="thinking", options={"signature": "ab"}),
            PartCompleted(index=0, part=thinking, display_items=(), explicit=True),
            PartStarted(index=1, part=ContentPart.narration("Look")),
            PartDelta(index=1, part_type="text", content="ing."),
            PartCompleted(index=1, part=text, display_items=(), explicit=True),
            MessageCompleted(
                message=_message(
                    content=[thinking, text],
                    usage=Usage(input_tokens=3, output_tokens=4),
                    raw_stop_reason="end_turn",
                    metadata={"provider": "anthropic", "model": "m", "id": "msg_1"},
                )
            ),
        ]
    )
    assert chunks == [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "part-0"},
        {"type": "reasoning-delta", "id": "part-0", "delta": "hmm"},
        {
            "type": "reasoning-end",
            "id": "part-0",
            "providerMetadata": {"streamfold": {"signature": "sig-ab"}},
        },
        {
            "type": "text-start",
            "id": "part-1",
            "providerMetadata": {"streamfold": {"utterance": "narration"}},
        },
        {"type": "text-delta", "id": "part-1", "delta": "Look"},
        {"type": "text-delta", "id": "part-1", "delta": "ing."},
        {
            "type": "text-end",
            "id": "part-1",
            "providerMetadata": {"streamfold": {"utterance": "narration"}},
        },
        {"type": "finish-step"},
        {
            "type": "finish",
            "finishReason": "stop",
            "messageMetadata": {
                "status": "complete",
                "stopReason": "stop",
                "rawStopReason": "end_turn",
                "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7},
                "provider": "anthropic",
                "model": "m",
                "responseId": "msg_1",
            },
        },
    ]


def test_tool_call_chunks_and_bad_arguments() -> None:
    good = ToolCall(call_id="c1", name="get", arguments={"q": 1}, status="complete")
    bad = ToolCall.model_construct(
        call_id="c2",
        name="put",
        arguments='{"q": ',
        index=1,
        status="incomplete",
        metadata={"arguments_error": "cut off"},
    )
    chunks = _chunks(
        [
            PartStarted(index=0, part=ToolCall(call_id="c1", name="get", arguments="")),
            PartDelta(index=0, part_type="tool_call", content='{"q":'),
            PartDelta(index=0, part_type="tool_call", content=" 1}"),
            PartStarted(index=1, part=ToolCall(call_id="c2", name="put", arguments='{"q": ')),
            PartCompleted(index=0, part=good, display_items=(), explicit=False),
            PartCompleted(index=1, part=bad, display_items=(), explicit=False),
            MessageCompleted(message=_message(tool_calls=[good, bad], stop_reason="tool_use")),
        ]
    )
    assert chunks[2:9] == [
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "get"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"q":'},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": " 1}"},
        {"type": "tool-input-start", "toolCallId": "c2", "toolName": "put"},
        {"type": "tool-input-delta", "toolCallId": "c2", "inputTextDelta": '{"q": '},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "get", "input": {"q": 1}},
        {
            "type": "tool-input-error",
            "toolCallId": "c2",
            "toolName": "put",
            "input": '{"q": ',
            "errorText": "cut off",
        },
    ]
    assert chunks[-1]["finishReason"] == "tool-calls"


def test_a_provider_error_is_an_error_chunk_then_finish() -> None:
    partial = _message(status="error", stop_reason="error")
    chunks = _chunks(
        [
            PartStarted(index=0, part=ContentPart.text("Hel")),
            ProviderErrored(
                error_type="overloaded_error", message="Overloaded", raw={}, partial=partial
            ),
            PartCompleted(index=0, part=ContentPart.text("Hel"), display_items=(), explicit=False),
            MessageCompleted(message=partial),
        ]
    )
    types = [c["type"] for c in chunks]
    assert types == ["start", "start-step", "text-start", "text-delta", "error", "text-end",
                     "finish-step", "finish"]  # fmt: skip
    assert chunks[4]["errorText"] == "overloaded_error: Overloaded"
    assert chunks[-1]["finishReason"] == "error"


def test_a_broken_stream_ends_its_open_parts_and_reports_the_error() -> None:
    raw = read("anthropic/text-basic.sse")
    first_delta = raw.index(b"event: content_block_delta")
    cut = raw.index(b"\n\n", first_delta) + 2  # the end of the first text delta's event
    broken = raw[:cut] + b"event: content_block_delta\ndata: {not json\n\n"
    chunks = list(to_ui_message_stream(fold([broken[:cut], broken[cut:]], "anthropic")))
    types = [c["type"] for c in chunks]
    assert types[:3] == ["start", "start-step", "text-start"]
    assert types[-4:] == ["text-end", "error", "finish-step", "finish"]
    assert chunks[-1] == {"type": "finish", "finishReason": "error"}
    with pytest.raises(StreamProtocolError):
        list(fold([broken], "anthropic"))


def test_unsupported_and_file_parts() -> None:
    block = ContentPart(type="unsupported", options={"type": "server_tool_use", "block": {"a": 1}})
    image = ContentPart.image("aGk=", media="image/png")
    chunks = _chunks(
        [
            PartStarted(index=0, part=block),
            PartCompleted(index=0, part=block, display_items=(), explicit=True),
            PartStarted(index=1, part=image),
            PartCompleted(index=1, part=image, display_items=(), explicit=True),
        ]
    )
    assert chunks[2] == {
        "type": DATA_BLOCK,
        "id": "part-0",
        "data": {"type": "server_tool_use", "block": {"a": 1}},
    }
    assert chunks[3] == {
        "type": "file",
        "url": "data:image/png;base64,aGk=",
        "mediaType": "image/png",
        "providerMetadata": {"streamfold": {"media": "image/png"}},
    }
    # No MessageCompleted: the events just ended.
    assert chunks[-2:] == [{"type": "finish-step"}, {"type": "finish"}]


def test_two_messages_are_two_steps_with_distinct_ids() -> None:
    rel = "anthropic/text-basic.sse"
    events = [*fold_bytes(read(rel)), *fold_bytes(read(rel))]
    chunks = _chunks(events)
    types = [c["type"] for c in chunks]
    assert types.count("start") == 1 and types.count("finish") == 1
    assert types.count("start-step") == 2 and types.count("finish-step") == 2
    ids = {c["id"] for c in chunks if c["type"] == "text-start"}
    assert ids == {"part-0", "part-1-0"}


def test_sse_encoding() -> None:
    body = b"".join(
        encode_sse([{"type": "start"}, {"type": "text-delta", "id": "p", "delta": "é\n"}])
    )
    assert body == (
        b'data: {"type":"start"}\n\n'
        b'data: {"type":"text-delta","id":"p","delta":"\xc3\xa9\\n"}\n\n'
        b"data: [DONE]\n\n"
    )
    assert UI_MESSAGE_STREAM_HEADERS["x-vercel-ai-ui-message-stream"] == "v1"
    assert UI_MESSAGE_STREAM_HEADERS["content-type"] == "text/event-stream"


async def test_async_equals_sync() -> None:
    rel = "openai-chat/tool-call-single-mini.sse"
    if not (REAL / rel).exists():
        rel = READY[0]
    # One clock for both (the timing in `finish` is each fold's own): the same bytes out.
    sync = b"".join(encode_sse(to_ui_message_stream(fold([read(rel)], clock=lambda: 0.0))))
    chunks = ato_ui_message_stream(afold([read(rel)], clock=lambda: 0.0))
    body = b"".join([piece async for piece in aencode_sse(chunks)])
    assert body == sync


# --- the demo routes ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(Starlette(routes=ui_routes(REAL, speed=0)))


def test_stream_route(client: TestClient) -> None:
    rel = "anthropic/thinking-then-tool-use.sse"
    response = client.get("/ui-stream", params={"recording": rel, "speed": "0"})
    assert response.status_code == 200
    for key, value in UI_MESSAGE_STREAM_HEADERS.items():
        assert response.headers[key] == value
    # Folded as the route folds it: the timing is the recording's, whatever the speed.
    expected = b"".join(encode_sse(to_ui_message_stream(replayed(rel))))
    assert response.content == expected
    assert b'"timing":{"timeToFirstToken":0.06,' in expected  # the fourth event, 60 ms in
    posted = client.post("/ui-stream", json={"recording": rel, "messages": []})
    assert posted.content == expected


def test_stream_route_errors(client: TestClient) -> None:
    assert client.get("/ui-stream").status_code == 400
    assert client.get("/ui-stream", params={"recording": "../../etc/passwd"}).status_code == 404
    bad = client.get("/ui-stream", params={"recording": READY[0], "speed": "fast"})
    assert bad.status_code == 400
    assert "speed" in bad.json()["error"]["message"]


def test_page_and_listing(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/ui/app.js" in page.text
    assert client.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/ui/style.css").status_code == 200
    assert client.get("/ui/nope.js").status_code == 404
    names = {r["name"] for r in client.get("/ui-recordings").json()["recordings"]}
    assert set(READY) <= names


def test_bundled_recordings_are_the_default() -> None:
    bundled = TestClient(Starlette(routes=ui_routes()))
    names = {r["name"] for r in bundled.get("/ui-recordings").json()["recordings"]}
    assert "anthropic/text-basic.sse" in names


# --- joined text parts, whatever the order of events -----------------------------------------

_TEXT_OPS = st.lists(
    st.tuples(
        st.sampled_from(["text", "narration", "answer", "tool", "thinking"]),
        st.text("ab.", max_size=3),
        st.booleans(),  # close it before the next part starts
    ),
    min_size=1,
    max_size=7,
)


@settings(max_examples=200, deadline=None)
@given(ops=_TEXT_OPS, end=st.sampled_from(["end", "cut", "stop-tool"]))
def test_joined_text_parts_keep_every_character_in_order_once(
    ops: list[tuple[str, str, bool]], end: str
) -> None:
    from streamfold import Accumulator
    from streamfold.deltas import ClosePart, EndMessage, GrowPart, OpenPart, UpdateMessage

    acc = Accumulator()
    events: list[Any] = []
    open_keys: list[int] = []
    for key, (kind, text, close) in enumerate(ops):
        start: ContentPart | ToolCall
        if kind == "tool":
            start = ToolCall(call_id=f"c{key}", name="f", arguments="")
        elif kind == "thinking":
            start = ContentPart.thinking("")
        elif kind == "text":
            start = ContentPart.text("")
        else:  # a provider's own marker, said at the start
            start = ContentPart.text("", options={"utterance": kind})
        events += acc.apply(OpenPart(key, start))
        events += acc.apply(GrowPart(key, content="{}" if kind == "tool" else text))
        if close:
            events += acc.apply(ClosePart(key))
        else:
            open_keys.append(key)
    if end == "cut":
        events += acc.close()
    else:
        for key in open_keys:
            events += acc.apply(ClosePart(key))
        events += acc.apply(UpdateMessage(status="complete", stop_reason="stop"))
        events += acc.apply(EndMessage())
    message = final_message(events)
    chunks = _chunks(events)

    texts: dict[str, str] = {}
    ended: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        if chunk["type"] == "text-start":
            assert chunk["id"] not in texts
            texts[chunk["id"]] = ""
        elif chunk["type"] == "text-delta":
            assert chunk["id"] in texts and chunk["id"] not in ended
            texts[chunk["id"]] += chunk["delta"]
        elif chunk["type"] == "text-end":
            assert chunk["id"] in texts and chunk["id"] not in ended
            ended[chunk["id"]] = _meta(chunk)
    assert set(ended) == set(texts)  # every text part ends, once
    # Every character once, in order; each UI text a run of adjacent parts with one marker.
    in_order = [p.content or "" for p in message.content if p.type == "text"]
    assert "".join(texts.values()) == "".join(in_order)
    slots = [(n, p) for n, p in enumerate(message.stream_order()) if isinstance(p, ContentPart)]
    text_slots = [(n, p) for n, p in slots if p.type == "text"]
    firsts = [int(pid.removeprefix("part-")) for pid in texts]
    for at, (first, (pid, joined)) in enumerate(zip(firsts, texts.items(), strict=True)):
        upto = firsts[at + 1] if at + 1 < len(firsts) else len(message.stream_order())
        run = [(n, p) for n, p in text_slots if first <= n < upto]
        assert [n for n, _ in run] == list(range(first, first + len(run)))  # adjacent
        assert joined == "".join(p.content or "" for _, p in run)
        assert {utterance(p) for _, p in run} == {ended[pid].get("utterance")}
