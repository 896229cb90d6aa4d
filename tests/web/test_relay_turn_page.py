"""The demo page plays an agent loop through the relay in a real browser: the turn runs on
one worker, a reload mid-turn lands on the other, and the page shows the loop whole, once:
its two steps, the app's tool result under its call, the answer apart."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

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


def test_a_relayed_loop_survives_a_reload_on_the_other_worker(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    loop = json.loads((bundled_recordings() / f"{LOOP}.loop.json").read_text())
    result = loop["steps"][1]["tool_result"]
    answer = loop["steps"][2]["message"]["content"][0]["content"]
    server = RedisServer(tmp_path / "redis")
    server.start()
    config = RelayConfig(prefix=f"test-{uuid.uuid4().hex[:8]}:", lease_ttl=2.0, poll=0.1)
    try:
        with (
            _worker(server.url, config) as a,
            _worker(server.url, config) as b,
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
    finally:
        server.stop()
