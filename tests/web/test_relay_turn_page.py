"""The demo page plays an agent loop through the relay in a real browser: the turn runs on
one worker, a reload mid-turn lands on the other, and the page shows the loop whole, once:
its two steps, the app's tool result under its call, the answer apart."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from browser_support import ARTIFACTS, missing, open_page
from redis_support import REDIS_SERVER, SKIP_REASON, RedisServer
from server_support import serve_in_thread

from streamfold.recording import bundled_recordings

pytest.importorskip("redis")
if REDIS_SERVER is None:
    pytest.skip(SKIP_REASON, allow_module_level=True)
if missing() is not None:
    pytest.skip(str(missing()), allow_module_level=True)

from streamfold.relay import Relay, RelayConfig

LOOP = "loops/fixed-version"


@contextlib.contextmanager
def _worker(redis_url: str, config: RelayConfig) -> Iterator[str]:
    from starlette.applications import Starlette

    from streamfold.web import ui_routes
    from streamfold.web.relay_routes import relay_lifespan, relay_routes

    relay = Relay.from_url(redis_url, config)
    app = Starlette(routes=[*ui_routes(), *relay_routes(relay)], lifespan=relay_lifespan(relay))
    with serve_in_thread(app) as url:
        yield url


@contextlib.contextmanager
def _two_workers(tmp_path: Path) -> Iterator[tuple[RedisServer, RelayConfig, str, str]]:
    """A redis-server of the test's own and two workers on it, the page and the relay
    routes on each: (the server, the relay's config, worker a's URL, worker b's URL)."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    config = RelayConfig(prefix=f"test-{uuid.uuid4().hex[:8]}:", lease_ttl=2.0, poll=0.1)
    try:
        with _worker(server.url, config) as a, _worker(server.url, config) as b:
            yield server, config, a, b
    finally:
        server.stop()


def test_a_relayed_loop_survives_a_reload_on_the_other_worker(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    loop = json.loads((bundled_recordings() / f"{LOOP}.loop.json").read_text())
    result = loop["steps"][1]["tool_result"]
    answer = loop["steps"][2]["message"]["content"][0]["content"]
    with (
        _two_workers(tmp_path) as (_, _, a, b),
        sync_playwright() as pw,
        open_page(pw, tmp_path / "profile") as (page, errors),
    ):
        page.goto(f"{a}/")
        page.wait_for_selector(f'#recording option[value="{LOOP}"]', state="attached")
        page.wait_for_selector("#relay", state="visible")
        page.select_option("#recording", LOOP)
        page.select_option("#speed", "0.1")  # about 10 s: the tool alone takes 4
        page.check("#relay")
        page.click("#replay")
        page.wait_for_function("new URL(location.href).searchParams.get('turn') === '1'")
        turn = page.evaluate("new URL(location.href).searchParams.get('relay')")
        page.wait_for_selector(".part.tool", timeout=15_000)  # the first step is in

        # A reload mid-turn, landing on the other worker: the loop so far, then the rest.
        page.goto(f"{b}/?relay={turn}&turn=1")
        page.wait_for_selector(".part.tool", timeout=15_000)
        page.wait_for_selector('#status[data-state="done"]', timeout=30_000)
        shown = page.inner_text(".part.tool .tool-output pre")
        assert shown == result["content"]
        kinds = page.eval_on_selector_all(
            "#message > *",
            "nodes => nodes.map(n => n.tagName === 'HR' ? 'step' : n.className)",
        )
        assert [k for k in kinds if k == "step"] == ["step"]  # two steps, once each
        assert len([k for k in kinds if "tool" in k]) == 1
        after = kinds[kinds.index("step") + 1 :]
        assert any("text" in k and "answer" in k for k in after)
        assert page.eval_on_selector(".part.text.answer", "n => n.streamfoldText") == answer
        assert errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "ui-demo-relay-loop.png"), full_page=True)


def _turn_end(redis_url: str, config: RelayConfig, turn: str) -> tuple[Any, Any]:
    """The turn's end and its last response's final message, read from Redis."""

    async def read() -> list[Any]:
        async with Relay.from_url(redis_url, config) as relay:
            return [item async for item in relay.subscribe_turn(turn)]

    # Its own thread: Playwright's sync API runs an event loop on this one.
    with ThreadPoolExecutor(1) as pool:
        items = pool.submit(asyncio.run, asyncio.wait_for(read(), 30)).result()
    events = [getattr(i.item, "event", i.item) for i in items]
    ended = [e.message for e in events if getattr(e, "type", None) == "message_completed"]
    assert ended, [getattr(e, "type", None) for e in events]
    return items[-1].item, ended[-1]


@pytest.mark.parametrize("when", ["in-the-answer", "in-the-first-response"])
def test_the_stop_button_ends_a_relayed_turn_stopped_on_every_worker(
    tmp_path: Path, when: str
) -> None:
    from playwright.sync_api import sync_playwright

    loop = json.loads((bundled_recordings() / f"{LOOP}.loop.json").read_text())
    answer = loop["steps"][2]["message"]["content"][0]["content"]
    # A text part being written: in the answer (after the step's rule), or in the first
    # response (its thinking or its text, before any tool result).
    writing = {
        "in-the-answer": "document.querySelector('hr.step ~ .part.text[data-state=streaming]')",
        "in-the-first-response": "!document.querySelector('hr.step') && document.querySelector("
        "'.part[data-state=streaming]')",
    }[when]
    with (
        _two_workers(tmp_path) as (server, config, a, b),
        sync_playwright() as pw,
        open_page(pw, tmp_path / "profile") as (page, errors),
    ):
        page.goto(f"{a}/")
        page.wait_for_selector(f'#recording option[value="{LOOP}"]', state="attached")
        page.wait_for_selector("#relay", state="visible")
        assert page.is_hidden("#stop")  # nothing relayed to stop yet
        page.select_option("#recording", LOOP)
        page.select_option("#speed", "0.1")  # about 10 s: the answer alone takes 3
        page.check("#relay")
        page.click("#replay")
        page.wait_for_function("new URL(location.href).searchParams.get('turn') === '1'")
        turn = page.evaluate("new URL(location.href).searchParams.get('relay')")
        # The page follows the turn from the other worker: the stop goes there.
        page.goto(f"{b}/?relay={turn}&turn=1")
        page.wait_for_function(writing, timeout=20_000)
        page.click("#stop")
        page.wait_for_selector('#status[data-state="stopped"]', timeout=15_000)
        assert page.inner_text("#status") == "stopped"
        assert page.is_hidden("#stop")  # over: nothing left to stop
        shown = page.eval_on_selector_all(".part.text", "ns => ns.map(n => n.streamfoldText)")
        steps = page.eval_on_selector_all("hr.step", "ns => ns.length")
        end, message = _turn_end(server.url, config, turn)
        # Long after the loop would have ended, nothing more has come.
        page.wait_for_timeout(1_500)
        assert page.eval_on_selector_all("hr.step", "ns => ns.length") == steps
        assert page.inner_text("#status") == "stopped"
        assert errors == []

    assert end.status == "cancelled" and message.status == "cancelled"
    if when == "in-the-answer":
        assert steps == 1
        assert answer.startswith(shown[-1]) and shown[-1] != answer  # cut where it was
    else:
        assert steps == 0  # no tool result, no answer after the cut response
        assert all(answer != text for text in shown)


@contextlib.contextmanager
def _balancer(first: str, then: str, cut_after: int) -> Iterator[tuple[str, list[Any]]]:
    """A load balancer in front of two workers, for the browser's EventSource: its first
    connection goes to `first` and drops after `cut_after` events (the connection lost),
    every later one goes to `then`. Yields its URL and the (worker, Last-Event-ID) of each
    connection, as the browser sent them."""
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, Response, StreamingResponse
    from starlette.routing import Route

    seen: list[tuple[str, str | None]] = []

    async def page(request: Request) -> Response:
        return HTMLResponse("<!doctype html><title>an EventSource reader</title>")

    async def events(request: Request) -> Response:
        worker = then if seen else first
        last = request.headers.get("last-event-id")
        seen.append((worker, last))
        client = httpx.AsyncClient(timeout=60)
        asked = client.build_request(
            "GET", f"{worker}{request.url.path}", headers={"last-event-id": last} if last else {}
        )
        upstream = await client.send(asked, stream=True)
        if upstream.status_code != 200:
            content = await upstream.aread()
            await client.aclose()
            return Response(content, status_code=upstream.status_code)

        async def body() -> Any:
            try:
                # The browser reconnects 100 ms after a drop (its default is about 3 s).
                yield b"retry: 100\n\n"
                count = 0
                async for line in upstream.aiter_lines():
                    yield line.encode() + b"\n"
                    count += line == ""
                    if worker == first and count == cut_after:
                        return  # the connection drops, mid-turn
            finally:
                await upstream.aclose()
                await client.aclose()

        return StreamingResponse(body(), media_type="text/event-stream")

    routes = [Route("/", page), Route("/relay/turn/events/{id}", events)]
    with serve_in_thread(Starlette(routes=routes)) as url:
        yield url, seen


READ_IN_THE_BROWSER = """([path, kinds]) => new Promise((resolve, reject) => {
    const got = [];
    const source = new EventSource(path);
    for (const kind of kinds) {
        source.addEventListener(kind, (e) => {
            got.push({id: e.lastEventId, event: kind, data: e.data});
        });
    }
    // A drop: the EventSource reconnects on its own (CONNECTING). The turn's end, then the
    // 204 its reconnection gets: CLOSED, it is over.
    source.onerror = () => { if (source.readyState === EventSource.CLOSED) resolve(got); };
    setTimeout(() => {
        source.close();
        reject(new Error(`not over: ${JSON.stringify(got.slice(-2))}`));
    }, 60000);
})"""


def test_the_browsers_event_source_resumes_a_turn_on_the_other_worker(tmp_path: Path) -> None:
    import typing

    import httpx
    from playwright.sync_api import sync_playwright

    from streamfold.events import Event
    from web.test_relay_turn_routes import _read_events, _unbroken

    kinds = [c.type for c in typing.get_args(Event)]
    kinds += ["snapshot", "tool_result", "turn_completed"]
    with (
        _two_workers(tmp_path) as (_, _, a, b),
        _balancer(a, b, cut_after=6) as (balancer, seen),
        httpx.Client(timeout=30) as http,
        ThreadPoolExecutor(1) as pool,
        sync_playwright() as pw,
        open_page(pw, tmp_path / "profile") as (page, errors),
    ):
        page.goto(f"{balancer}/")
        started = http.post(f"{a}/relay/turn/start", json={"loop": LOOP, "speed": 0.1})
        turn = started.json()["id"]
        path = f"/relay/turn/events/{turn}"
        watching = pool.submit(_read_events, f"{a}{path}", lambda events: False)
        got = page.evaluate(READ_IN_THE_BROWSER, [path, kinds])
        reference = watching.result()
        assert errors == []

    # The browser's own reconnections: to the other worker with the id it saw last, then
    # once more after the turn's end, which the 204 ended.
    assert seen == [(a, None), (b, got[5]["id"]), (b, got[-1]["id"])]
    assert got[5]["id"].startswith("0:")  # dropped in the first response
    _unbroken(got)  # every item once, none missing, across the drop
    assert len({e["id"] for e in got}) == len(got)
    same = {e["id"]: e for e in reference if e["event"] != "snapshot"}
    assert all(same[e["id"]] == e for e in got if e["event"] != "snapshot")
    assert got[-1] == reference[-1]
    assert json.loads(got[-1]["data"]) == {"type": "turn_completed", "status": "complete"}
    assert [e["event"] for e in got].count("tool_result") == 1


def test_the_stop_button_ends_a_relayed_stream_stopped(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    recording = "anthropic/thinking-then-tool-use.sse"  # about 3 s at 0.1x
    with _two_workers(tmp_path) as (server, config, a, b):

        async def read(stream: str) -> list[Any]:
            async with Relay.from_url(server.url, config) as relay:
                return [item.event async for item in relay.subscribe(stream)]

        with sync_playwright() as pw, open_page(pw, tmp_path / "profile") as (page, errors):
            page.goto(f"{a}/")
            page.wait_for_selector(f'#recording option[value="{recording}"]', state="attached")
            page.wait_for_selector("#relay", state="visible")
            page.select_option("#recording", recording)
            page.select_option("#speed", "0.1")
            page.check("#relay")
            page.click("#replay")
            page.wait_for_function("new URL(location.href).searchParams.has('relay')")
            stream = page.evaluate("new URL(location.href).searchParams.get('relay')")
            page.goto(f"{b}/?relay={stream}")  # the stop goes to the worker not producing it
            page.wait_for_selector(".part[data-state=streaming]", timeout=20_000)
            page.click("#stop")
            page.wait_for_selector('#status[data-state="stopped"]', timeout=15_000)
            assert page.inner_text("#status") == "stopped"
            assert page.is_hidden("#stop")
            assert errors == []
        with ThreadPoolExecutor(1) as pool:
            events = pool.submit(asyncio.run, asyncio.wait_for(read(stream), 30)).result()
    assert events[-1].type == "message_completed" and events[-1].message.status == "cancelled"
