"""serve's `POST /agui` plays a demo loop as one AG-UI run, read over HTTP by the
protocol's own client (`@ag-ui/client`'s HttpAgent: its SSE parser, its event-order
checks, its message builder): a step per response, the app's tool result between them."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from server_support import serve_in_thread

pytest.importorskip("ag_ui.core")
pytest.importorskip("starlette")

from streamfold.agui import encode_agui_sse, to_agui_events
from streamfold.recording import bundled_recordings
from streamfold.web import _bundled, _loop_events, find_loops, find_recordings, ui_routes

JS = Path(__file__).parent.parent / "js"
LOOP = "loops/fixed-version"
USER = {"id": "user-1", "role": "user", "content": "Which version is fixed?"}


def _plain_body() -> str:
    """The loop's events run through `to_agui_events` here, without the route."""
    directory = _bundled()
    loop = {x.name: x for x in find_loops(directory, find_recordings(directory))}[LOOP]

    async def events() -> list[Any]:
        return [event async for event in _loop_events(loop, 0)]

    run = to_agui_events(asyncio.run(events()), thread_id="thread", run_id="run")
    return b"".join(encode_agui_sse(run)).decode()


def test_the_agui_route_plays_a_loop_as_one_run_of_steps() -> None:
    import httpx
    from starlette.applications import Starlette

    node = shutil.which("node")
    if node is None or not (JS / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("node and @ag-ui/client (tests/js: npm ci) are needed")
    loop = json.loads((bundled_recordings() / f"{LOOP}.loop.json").read_text())
    result = loop["steps"][1]["tool_result"]
    answer = loop["steps"][2]["message"]["content"][0]["content"]
    run = {"threadId": "thread", "runId": "run", "initialMessages": [USER]}
    with serve_in_thread(Starlette(routes=ui_routes(speed=0))) as url:
        runs = {
            "route": {"url": f"{url}/agui?recording={LOOP}", **run},
            "plain": {"body": _plain_body(), **run},
        }
        done = subprocess.run(
            [node, "read-agui.mjs"], cwd=JS, input=json.dumps(runs), capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        with httpx.Client() as http:
            body = {"threadId": "t", "runId": "r", "state": None, "messages": [], "tools": [],
                    "context": [], "forwardedProps": {"recording": "loops/none"}}  # fmt: skip
            unknown = http.post(f"{url}/agui", json=body)
            named = http.post(f"{url}/agui", json=body | {"forwardedProps": {"recording": LOOP}})
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)
    got = read["route"]
    assert got["error"] is None and got["outcome"] == "success", got
    events = got["events"]
    assert events[0] == "RUN_STARTED" and events[-1] == "RUN_FINISHED"
    assert events.count("STEP_STARTED") == 2 and events.count("TOOL_CALL_RESULT") == 1
    steps = [n for n, e in enumerate(events) if e == "STEP_STARTED"]
    assert events.index("STEP_FINISHED") < events.index("TOOL_CALL_RESULT") < steps[1]
    messages = got["messages"]
    assert messages[0] == USER
    assert any(m["role"] == "reasoning" for m in messages)
    tool = [m for m in messages if m["role"] == "tool"]
    assert [(m["toolCallId"], m["content"]) for m in tool] == [
        (result["tool_call_id"], result["content"])
    ]
    assert messages[-1]["role"] == "assistant" and messages[-1]["content"] == answer
    # The route's run is the one the encoder makes of the same events.
    assert got["messages"] == read["plain"]["messages"]
    assert got["events"] == read["plain"]["events"]
    # The loop named in forwardedProps plays too; an unknown name is refused, saying so.
    assert named.status_code == 200 and named.text.count('"STEP_STARTED"') == 2
    assert named.headers["x-streamfold-recording"] == LOOP
    assert unknown.status_code == 404 and "loops/none" in unknown.text
