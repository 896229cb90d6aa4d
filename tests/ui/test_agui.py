"""AG-UI: every recording and an agent loop as AG-UI runs, judged by the protocol's own
code: each event read back by `ag-ui-protocol`'s event models, and each run played by the
TypeScript client's HttpAgent (its SSE parser, its event-sequence checks, its message
builder), whose messages must hold what the fold holds."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from record.test_recordings import READY
from starlette.applications import Starlette
from starlette.testclient import TestClient
from support import final_message, fold_bytes, read

from streamfold import Message, ToolCall, ToolResult, fold
from streamfold.agui import (
    CUSTOM_MARKED,
    AGUIEncoder,
    encode_agui_sse,
    to_agui_events,
)
from streamfold.web import ui_routes

ag_ui = pytest.importorskip("ag_ui.core")
JS = Path(__file__).parent.parent / "js"
LOOP_FIRST = "anthropic/thinking-then-tool-use.sse"
LOOP_SECOND = "anthropic/text-basic.sse"


def _sse(items: list[Any], run_id: str = "run") -> str:
    events = to_agui_events(items, thread_id="thread", run_id=run_id)
    return b"".join(encode_agui_sse(events)).decode()


def _events(body: str) -> list[Any]:
    """The body's events, read back by the package's own models (the discriminated union
    of every event type: a wrong field or type fails here)."""
    from pydantic import TypeAdapter

    reader = TypeAdapter(ag_ui.Event)
    lines = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
    return [reader.validate_json(line) for line in lines]


def _loop() -> tuple[list[Any], Message, list[ToolResult], Message]:
    first_events = fold_bytes(read(LOOP_FIRST))
    first = final_message(first_events)
    results = [ToolResult(tool_call_id=c.call_id or "", name=c.name, content="v1.2.3") for c in
               first.tool_calls]  # fmt: skip
    second_events = fold_bytes(read(LOOP_SECOND))
    return [*first_events, *results, *second_events], first, results, final_message(second_events)


@pytest.fixture(scope="module")
def client_runs() -> dict[str, Any]:
    """Every recording's run, and the loop's, played by the AG-UI TypeScript client."""
    node = shutil.which("node")
    if node is None or not (JS / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("node and @ag-ui/client (tests/js: npm ci) are needed to judge")
    runs = {rel: _sse(fold_bytes(read(rel))) for rel in READY}
    runs["loop"] = _sse(_loop()[0])
    payload = {name: {"body": body, "threadId": "thread", "runId": "run"} for name, body in
               runs.items()}  # fmt: skip
    done = subprocess.run(
        [node, "read-agui.mjs"], cwd=JS, input=json.dumps(payload), capture_output=True,
        text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("rel", READY)
def test_the_client_builds_what_the_fold_holds(rel: str, client_runs: dict[str, Any]) -> None:
    message = final_message(fold_bytes(read(rel)))
    run = client_runs[rel]
    assert run["error"] is None, run["error"]
    types = run["events"]
    assert types[0] == "RUN_STARTED" and types[1] == "STEP_STARTED"
    assert types[-2:] == ["STEP_FINISHED", "RUN_ERROR" if message.status == "error" else
                          "RUN_FINISHED"]  # fmt: skip
    messages = run["messages"]

    texts = [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]
    expected_texts = [p.content for p in message.content if p.type == "text" and p.content]
    assert texts == expected_texts
    reasoning = [m for m in messages if m["role"] == "reasoning"]
    thinking = [p for p in message.content if p.type == "thinking"]
    assert [m["content"] for m in reasoning] == [p.content or "" for p in thinking]
    for got, part in zip(reasoning, thinking, strict=True):
        secret = next((part.options[k] for k in ("signature", "encrypted_content",
                       "redacted_data") if part.options.get(k)), None)  # fmt: skip
        assert got.get("encryptedValue") == secret
    calls = [c for m in messages if m["role"] == "assistant" for c in m.get("toolCalls", [])]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        (c.call_id, c.name) for c in message.tool_calls
    ]
    for got_call, call in zip(calls, message.tool_calls, strict=True):
        text = got_call["function"]["arguments"]
        if call.metadata.get("type") == "custom_tool_call":
            assert call.arguments == {"input": text}  # free text, as the model wrote it
        elif isinstance(call.arguments, dict):
            assert json.loads(text) == call.arguments


def test_the_loop_is_one_run_of_steps_with_the_tool_result(client_runs: dict[str, Any]) -> None:
    items, first, results, second = _loop()
    run = client_runs["loop"]
    assert run["error"] is None, run["error"]
    types = run["events"]
    assert types.count("STEP_STARTED") == types.count("STEP_FINISHED") == 2
    assert types.index("TOOL_CALL_RESULT") < types.index("STEP_STARTED", 2)
    tool_messages = [m for m in run["messages"] if m["role"] == "tool"]
    assert [(m["toolCallId"], m["content"]) for m in tool_messages] == [
        (r.tool_call_id, r.content) for r in results
    ]
    assert run["messages"][-1]["content"] == second.text

    events = _events(_sse(items))
    finished = events[-1]
    assert finished.type == "RUN_FINISHED"
    assert finished.outcome.type == "success" and not finished.outcome.pending_tool_call_ids
    assert [u.output_tokens for u in finished.usage] == [
        first.usage.output_tokens if first.usage else None,
        second.usage.output_tokens if second.usage else None,
    ]
    marks = [e.value for e in events if e.type == "CUSTOM" and e.name == CUSTOM_MARKED]
    assert [m["utterance"] for m in marks][-1] == "answer"


def test_a_call_left_for_the_app_or_the_user_says_so_in_the_outcome() -> None:
    items = fold_bytes(read(LOOP_FIRST))
    call_id = final_message(items).tool_calls[0].call_id
    assert call_id is not None
    (waiting,) = [e for e in _events(_sse(items)) if e.type == "RUN_FINISHED"]
    assert waiting.outcome.type == "success"
    assert waiting.outcome.pending_tool_call_ids == [call_id]

    encoder = AGUIEncoder(thread_id="thread", run_id="run")
    out = encoder.start()
    for event in items:
        out += encoder.feed(event)
    encoder.approval_request(call_id, "approval-1")
    (interrupted,) = [e for e in encoder.close() if e.type == "RUN_FINISHED"]
    (interrupt,) = interrupted.outcome.interrupts
    assert interrupted.outcome.type == "interrupt"
    assert (interrupt.id, interrupt.tool_call_id) == ("approval-1", call_id)


def test_a_cancelled_response_finishes_the_run_as_cancelled() -> None:
    from streamfold import StreamFolder

    folder = StreamFolder(provider="anthropic")
    data = read("anthropic/text-basic.sse")
    events = folder.feed(data[: len(data) // 2]) + folder.cancel()
    assert final_message(events).status == "cancelled"
    types = [e.type for e in _events(_sse(events))]
    (finished,) = [e for e in _events(_sse(events)) if e.type == "RUN_FINISHED"]
    assert finished.outcome.type == "cancelled"
    assert types.count("TEXT_MESSAGE_START") == types.count("TEXT_MESSAGE_END")


def test_errors_end_the_run_as_errors() -> None:
    provider_error = fold_bytes(read("openai-responses/error-insufficient-quota-failed.sse"))
    (error,) = [e for e in _events(_sse(provider_error)) if e.type == "RUN_ERROR"]
    assert "quota" in error.message

    data = read("anthropic/text-basic.sse")
    cut = data.index(b"\n\n", data.index(b"text_delta")) + 2  # after the first text delta
    broken = fold([data[:cut], b"event: content_block_delta\ndata: {not json\n\n"],
                  provider="anthropic")  # fmt: skip
    events = _events(_sse(broken))  # type: ignore[arg-type]
    assert events[-1].type == "RUN_ERROR" and events[-1].code == "StreamProtocolError"
    starts = [e.message_id for e in events if e.type == "TEXT_MESSAGE_START"]
    ends = [e.message_id for e in events if e.type == "TEXT_MESSAGE_END"]
    assert starts and starts == ends  # the part already open ends before the error


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(Exception, match="expected str thread_id"):
        AGUIEncoder(thread_id=1, run_id="r")  # type: ignore[arg-type]
    encoder = AGUIEncoder(thread_id="t", run_id="r")
    with pytest.raises(Exception, match="expected a ToolResult"):
        encoder.tool_result(ToolCall(call_id="c"))  # type: ignore[arg-type]


def test_the_agui_route_runs_a_recording() -> None:
    app = Starlette(routes=ui_routes(speed=0))
    client = TestClient(app)
    names = [r["name"] for r in client.get("/ui-recordings").json()["recordings"]]
    run_input = {"threadId": "t1", "runId": "r1", "messages": [], "tools": [], "context": [],
                 "state": None, "forwardedProps": {"recording": names[0]}}  # fmt: skip
    response = client.post("/agui", json=run_input)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response.text)
    assert events[0].type == "RUN_STARTED" and events[0].run_id == "r1"
    assert events[-1].type in ("RUN_FINISHED", "RUN_ERROR")

    bad = client.post("/agui", json={"threadId": 3})
    assert bad.status_code == 400 and "RunAgentInput" in bad.json()["error"]["message"]
    missing = client.post("/agui?recording=nope", json=run_input | {"forwardedProps": {}})
    assert missing.status_code == 404
