"""An agent loop's turn through the relay routes, with the real components: a real
redis-server, two workers (two apps, each its own Relay, on one Redis) serving over HTTP,
the bundled demo loop played as the turn; the turn's UI message stream read by the `ai`
package's own reader, its AG-UI run by `@ag-ui/client`'s HttpAgent over HTTP (a reader
there from the start and one that joins late), and a stop sent to the other worker."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from redis_support import REDIS_SERVER, SKIP_REASON, RedisServer
from server_support import serve_in_thread

pytest.importorskip("redis")
pytest.importorskip("ag_ui.core")
pytest.importorskip("starlette")

from streamfold.message import ToolResult
from streamfold.recording import bundled_recordings
from streamfold.relay import Relay, RelayConfig, TurnCompleted
from streamfold.ui import encode_sse, to_ui_message_stream

if REDIS_SERVER is None:
    pytest.skip(SKIP_REASON, allow_module_level=True)

JS = Path(__file__).parent.parent / "js"
LOOP = "loops/fixed-version"
SPEED = 0.1  # the loop in about 10 s: the first response 3 s, the tool 4 s, the answer 3 s


def _node_ready() -> str:
    node = shutil.which("node")
    needed = [JS / "node_modules" / "ai", JS / "node_modules" / "@ag-ui" / "client"]
    if node is None or not all(p.is_dir() for p in needed):
        pytest.skip("node, the ai package and @ag-ui/client (tests/js: npm ci) are needed")
    return node


def _config() -> RelayConfig:
    # Both workers share it: the same key prefix, so they see the same turns.
    return RelayConfig(
        prefix=f"test-{uuid.uuid4().hex[:8]}:", checkpoint_every=4, lease_ttl=2.0, poll=0.1
    )


@contextlib.contextmanager
def _worker(redis_url: str, config: RelayConfig) -> Iterator[str]:
    """One worker: uvicorn on a free port with the relay routes (the bundled recordings and
    loops), its own Relay, on its own thread and event loop."""
    from starlette.applications import Starlette

    from streamfold.web.relay_routes import relay_lifespan, relay_routes

    relay = Relay.from_url(redis_url, config)
    app = Starlette(routes=relay_routes(relay), lifespan=relay_lifespan(relay))
    with serve_in_thread(app) as url:
        yield url


def _loop() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((bundled_recordings() / f"{LOOP}.loop.json").read_text())
    return data


def _wait_for_step(
    redis_url: str, config: RelayConfig, turn: str, step: int, *, ended: bool = False
) -> None:
    """Until the turn has begun its step `step` (`ended`: until that response ended), read
    through a Relay of the test's own."""

    async def watch() -> None:
        async with Relay.from_url(redis_url, config) as relay:
            async for item in relay.subscribe_turn(turn):
                event = getattr(item.item, "event", None)
                done = getattr(event, "type", None) == "message_completed"
                if item.step > step or (item.step == step and (done or not ended)):
                    return

    asyncio.run(asyncio.wait_for(watch(), 30))


def _turn_items(redis_url: str, config: RelayConfig, turn: str) -> list[Any]:
    async def read() -> list[Any]:
        async with Relay.from_url(redis_url, config) as relay:
            return [item async for item in relay.subscribe_turn(turn)]

    return asyncio.run(asyncio.wait_for(read(), 30))


def _agui_reader(node: str) -> subprocess.Popen[str]:
    """An HttpAgent run, started now (node takes a while to start), told where to go later."""
    return subprocess.Popen(
        [node, "read-agui.mjs"], cwd=JS, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _go(reader: subprocess.Popen[str], runs: dict[str, Any]) -> None:
    assert reader.stdin is not None
    reader.stdin.write(json.dumps(runs))
    reader.stdin.close()
    reader.stdin = None  # communicate() then reads the answer alone


def _result(reader: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        out, err = reader.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.communicate()
    assert reader.returncode == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def _read_ui_streams(node: str, bodies: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [node, "read-ui-stream.mjs"], cwd=JS, input=json.dumps(bodies), capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _get(url: str) -> str:
    import httpx

    with httpx.Client(timeout=60) as http:
        response = http.get(url)
        assert response.status_code == 200, response.text
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        return response.text


def _plain_ui_stream(turn: str) -> str:
    """The loop as the page's own (non-relay) stream folds it, as one UI message."""
    from streamfold.web import _bundled, _loop_events, find_loops, find_recordings

    directory = _bundled()
    loop = {x.name: x for x in find_loops(directory, find_recordings(directory))}[LOOP]

    async def events() -> list[Any]:
        return [event async for event in _loop_events(loop, 0)]

    chunks = to_ui_message_stream(asyncio.run(events()), message_id=turn)
    return b"".join(encode_sse(chunks)).decode()


def _untimed(message: dict[str, Any]) -> dict[str, Any]:
    """The UIMessage without the `timing` a local fold measures on its own clock (the
    relay's fold ran elsewhere, at another pace): everything else must be equal."""
    metadata = dict(message["metadata"])
    metadata.pop("timing", None)
    metadata["steps"] = [{k: v for k, v in s.items() if k != "timing"} for s in metadata["steps"]]
    return {**message, "metadata": metadata}


USER = {"id": "user-1", "role": "user", "content": "Which version is fixed?"}


def test_a_turn_reaches_early_and_late_readers_on_either_worker(
    redis_server: RedisServer,
) -> None:
    import httpx

    node = _node_ready()
    loop = _loop()
    result = loop["steps"][1]["tool_result"]
    answer = loop["steps"][2]["message"]["content"][0]["content"]
    config = _config()
    early_agui, late_agui = _agui_reader(node), _agui_reader(node)
    with (
        _worker(redis_server.url, config) as a,
        _worker(redis_server.url, config) as b,
        httpx.Client() as http,
        ThreadPoolExecutor(2) as pool,
    ):
        started = http.post(f"{a}/relay/turn/start", json={"loop": LOOP, "speed": SPEED})
        assert started.status_code == 200, started.text
        turn = started.json()["id"]
        # From the start: the UI stream on the other worker, AG-UI on this one.
        early_ui = pool.submit(_get, f"{b}/relay/turn/ui-stream/{turn}")
        run = {"threadId": "thread", "runId": "run-early", "initialMessages": [USER]}
        _go(early_agui, {"early": {"url": f"{a}/relay/turn/agui/{turn}", **run}})
        # Late: while the answer is being written, after the first response and the tool.
        _wait_for_step(redis_server.url, config, turn, 2)
        late_ui = pool.submit(_get, f"{a}/relay/turn/ui-stream/{turn}")
        run = {"threadId": "thread", "runId": "run-late", "initialMessages": [USER]}
        _go(late_agui, {"late": {"url": f"{b}/relay/turn/agui/{turn}", **run}})
        early, late = _result(early_agui)["early"], _result(late_agui)["late"]
        bodies = {"early": early_ui.result(), "late": late_ui.result()}
        # After the end: a reader gets it all as one snapshot, then the run's end.
        after = http.post(f"{b}/relay/turn/agui/{turn}")
        assert after.status_code == 200
        assert "MESSAGES_SNAPSHOT" in after.text and "RUN_FINISHED" in after.text
        # Misuse is refused, saying what was expected.
        refused = http.post(f"{a}/relay/turn/agui/{turn}", json={"threadId": 1})
        assert refused.status_code == 400 and "RunAgentInput" in refused.text
        assert http.post(f"{a}/relay/turn/agui/not%20an%20id").status_code == 400
        assert http.get(f"{b}/relay/turn/ui-stream/not%20an%20id").status_code == 400
        unknown = http.post(f"{a}/relay/turn/start", json={"loop": "loops/none"})
        assert unknown.status_code == 404 and "no loop named" in unknown.text

    # AG-UI: both runs are valid to the client (its event-order checks) and leave the same
    # messages: the chat's own first, then the loop's.
    assert early["error"] is None and late["error"] is None, (early["error"], late["error"])
    assert early["snapshot"] is None  # there from the start: the run as it went
    assert early["events"].count("STEP_STARTED") == 2
    assert late["events"][:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STEP_STARTED"]
    assert late["events"].count("STEP_STARTED") == 1  # only the answer's step went live
    assert late["events"].count("TOOL_CALL_RESULT") == 0  # it was in the snapshot
    assert early["outcome"] == late["outcome"] == "success"
    assert late["messages"] == early["messages"]
    messages = early["messages"]
    assert messages[0] == USER
    assert late["snapshot"] == [m["id"] for m in messages[: len(late["snapshot"])]]
    tool = [m for m in messages if m["role"] == "tool"]
    assert [(m["toolCallId"], m["content"]) for m in tool] == [
        (result["tool_call_id"], result["content"])
    ]
    assert messages[-1]["role"] == "assistant" and messages[-1]["content"] == answer
    assert any(m["role"] == "reasoning" for m in messages)

    # The UI message stream: the same UIMessage for a reader there from the start, one
    # that came late, and the page's own stream of the same loop without the relay.
    bodies["plain"] = _plain_ui_stream(turn)
    read = _read_ui_streams(node, bodies)
    for name in ("early", "late", "plain"):
        assert read[name]["errors"] == [] and read[name]["valid"], (name, read[name])
    plain = _untimed(read["plain"]["message"])
    assert _untimed(read["early"]["message"]) == plain
    assert _untimed(read["late"]["message"]) == plain
    parts = read["plain"]["message"]["parts"]
    assert [p["type"] for p in parts].count("step-start") == 2
    outputs = [p for p in parts if p.get("state") == "output-available"]
    assert [p["output"] for p in outputs] == [result["content"]]


@pytest.mark.parametrize("when", ["in-a-response", "while-the-tool-runs"])
def test_a_stop_sent_to_the_other_worker_ends_the_turn_cancelled_for_every_reader(
    redis_server: RedisServer, when: str
) -> None:
    import httpx

    node = _node_ready()
    config = _config()
    agui = _agui_reader(node)
    with (
        _worker(redis_server.url, config) as a,
        _worker(redis_server.url, config) as b,
        httpx.Client() as http,
        ThreadPoolExecutor(2) as pool,
    ):
        started = http.post(f"{a}/relay/turn/start", json={"loop": LOOP, "speed": SPEED})
        turn = started.json()["id"]
        ui = pool.submit(_get, f"{b}/relay/turn/ui-stream/{turn}")
        _go(agui, {"run": {"url": f"{a}/relay/turn/agui/{turn}", "threadId": "t", "runId": "r"}})
        # The first response under way, or over (the app running its tool, 4 s).
        _wait_for_step(redis_server.url, config, turn, 0, ended=when != "in-a-response")
        stopped = http.post(f"{b}/relay/turn/stop/{turn}")
        assert stopped.status_code == 202 and stopped.json() == {"id": turn, "stopping": True}
        run = _result(agui)["run"]
        body = ui.result()
        items = _turn_items(redis_server.url, config, turn)

    # The turn: the first response (cut, if it was being written), then its end; no tool
    # result, no second response after the stop.
    assert {i.step for i in items} == {0, 1}
    assert not any(isinstance(i.item, ToolResult) for i in items)
    end = items[-1].item
    assert isinstance(end, TurnCompleted) and end.status == "cancelled"
    last = [i.item.event for i in items if hasattr(i.item, "event")][-1]
    assert last.type == "message_completed"
    assert last.message.status == ("cancelled" if when == "in-a-response" else "complete")
    # Every reader heard it: the AG-UI run finished cancelled, the UI stream ended with
    # `abort` (useChat shows the message stopped).
    assert run["error"] is None and run["outcome"] == "cancelled", run
    read = _read_ui_streams(node, {"ui": body})["ui"]
    assert read["errors"] == [] and read["chunks"][-1] == "abort"
    assert read["message"]["parts"].count({"type": "step-start"}) == 1


def _sse_events(lines: Iterator[str], until: Any) -> list[dict[str, Any]]:
    """The events of an SSE body, up to where `until(events so far)` is true (then the
    reader hangs up) or the body's end."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in lines:
        if line == "":
            if current:
                events.append(current)
                current = {}
                if until(events):
                    break
        elif ":" in line:
            name, _, value = line.partition(":")
            current[name] = value.removeprefix(" ")
    return events


def _read_events(url: str, until: Any, after: str | None = None) -> list[dict[str, Any]]:
    import httpx

    headers = {"Last-Event-ID": after} if after else {}
    with httpx.Client(timeout=60) as http, http.stream("GET", url, headers=headers) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        return _sse_events(r.iter_lines(), until)


def _place(event: dict[str, Any]) -> tuple[int, int | None]:
    """An item's step and, for a response's, its entry's number: `<step>:0-<seq>`."""
    step, _, entry = event["id"].partition(":")
    return int(step), int(entry.split("-")[1]) if entry else None


def _unbroken(events: list[dict[str, Any]]) -> None:
    """Every item once, none missing: within a response the numbers follow one another
    (a snapshot, at a response's first item alone, stands for those it covers)."""
    for before, after in itertools.pairwise(events):
        (step, seq), (next_step, next_seq) = _place(before), _place(after)
        if next_step == step:
            assert seq is not None and next_seq == seq + 1, (before, after)
            assert after["event"] != "snapshot", after
        else:
            assert next_step == step + 1, (before, after)
            assert before["event"] in ("message_completed", "tool_result"), before
            assert after["event"] in ("snapshot", "tool_result", "turn_completed"), after


def test_an_event_source_reader_of_a_turn_resumes_on_the_other_worker_with_its_last_id(
    redis_server: RedisServer,
) -> None:
    import httpx

    loop = _loop()
    result = loop["steps"][1]["tool_result"]
    answer = loop["steps"][2]["message"]["content"][0]["content"]
    config = _config()
    whole = lambda events: False  # noqa: E731 - to the body's end
    with (
        _worker(redis_server.url, config) as a,
        _worker(redis_server.url, config) as b,
        httpx.Client() as http,
        ThreadPoolExecutor(1) as pool,
    ):
        started = http.post(f"{a}/relay/turn/start", json={"loop": LOOP, "speed": SPEED})
        assert started.status_code == 200, started.text
        turn = started.json()["id"]
        # A reader there from the start that never lets go: what every reader must see.
        watching = pool.submit(_read_events, f"{a}/relay/turn/events/{turn}", whole)
        # The reader under test hangs up in the first response, after a few of its items,
        first = _read_events(f"{a}/relay/turn/events/{turn}", lambda events: len(events) == 6)
        # reconnects to the other worker with its last id, hangs up after the tool's
        # result (the app's own step, between the responses),
        second = _read_events(
            f"{b}/relay/turn/events/{turn}",
            lambda events: events[-1]["event"] == "tool_result",
            after=first[-1]["id"],
        )
        # and comes back to the first worker, the id in the query string this time.
        third = _read_events(f"{a}/relay/turn/events/{turn}?after={second[-1]['id']}", whole)
        reference = watching.result()
        # Past the end there is nothing more, on either worker: 204 stops an EventSource.
        for worker in (a, b):
            end = {"Last-Event-ID": third[-1]["id"]}
            over = http.get(f"{worker}/relay/turn/events/{turn}", headers=end)
            assert over.status_code == 204, over.text
        # Misuse is refused, saying what was expected.
        bad = http.get(f"{b}/relay/turn/events/{turn}", headers={"Last-Event-ID": "x"})
        assert bad.status_code == 400 and "after=" in bad.text
        huge = {"Last-Event-ID": "9" * 30}  # no such step, nor one Redis could index
        bad = http.get(f"{b}/relay/turn/events/{turn}", headers=huge)
        assert bad.status_code == 400 and "an id this turn gave" in bad.text, bad.text
        assert http.get(f"{a}/relay/turn/events/not%20an%20id").status_code == 400

    resumed = first + second + third
    assert {_place(e)[0] for e in first} == {0}  # it left in the first response
    assert _place(second[0])[0] == 0  # and came back in it, where it left
    assert second[-1]["id"] == "1" and _place(third[0])[0] == 2
    _unbroken(reference)
    _unbroken(resumed)
    # What it got after it first came is what the reader that stayed got: the same items,
    # under the same ids (the answer's first item may be a snapshot for either).
    assert third[-1] == reference[-1]
    seen = {e["id"]: e for e in reference if e["event"] != "snapshot"}
    for event in resumed[1:]:
        if event["event"] != "snapshot":
            assert seen[event["id"]] == event
    assert json.loads(third[-1]["data"]) == {"type": "turn_completed", "status": "complete"}
    tool = [json.loads(e["data"]) for e in resumed if e["event"] == "tool_result"]
    assert [(t["type"], t["tool_call_id"], t["content"]) for t in tool] == [
        ("tool_result", result["tool_call_id"], result["content"])
    ]
    ended = [json.loads(e["data"]) for e in resumed if e["event"] == "message_completed"]
    assert len(ended) == 2
    texts = [p["content"] for p in ended[1]["message"]["content"] if p["type"] == "text"]
    assert texts == [answer]


def test_an_event_source_reader_of_a_lost_turn_ends_incomplete_once(
    redis_server: RedisServer,
) -> None:
    import httpx

    config = _config()
    turn = uuid.uuid4().hex
    recording = (bundled_recordings() / "anthropic/text-basic.sse").read_bytes()

    async def abandon() -> None:
        async with Relay.from_url(redis_server.url, config) as relay:
            lost = relay.turn(turn)
            await lost.respond([recording], provider="anthropic")
            await lost._stop_beat()  # the worker died: no heartbeat, no end

    asyncio.run(abandon())
    with _worker(redis_server.url, config) as a, httpx.Client(timeout=30) as http:
        events = _read_events(f"{a}/relay/turn/events/{turn}", lambda events: False)
        # The reader's own end for a turn nobody ends; reconnecting after it, 204 at once
        # (not a second wait for the lease and a second end: an EventSource would loop).
        again = http.get(
            f"{a}/relay/turn/events/{turn}", headers={"Last-Event-ID": events[-1]["id"]}
        )
    assert [e["event"] for e in events].count("message_completed") == 1
    assert events[-1]["event"] == "turn_completed" and events[-1]["id"] == "1"
    end = json.loads(events[-1]["data"])
    assert end == {"type": "turn_completed", "status": "incomplete", "synthetic": True}
    assert again.status_code == 204 and again.elapsed.total_seconds() < config.lease_ttl
