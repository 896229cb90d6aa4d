"""The demo page plays an agent loop in a real browser: the steps, the app's tool result
under its call, and the answer apart from the narration."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import ARTIFACTS, missing, open_page
from server_support import serve_in_thread

from streamfold.recording import bundled_recordings

LOOP = "loops/fixed-version"

if missing() is not None:
    pytest.skip(str(missing()), allow_module_level=True)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    from starlette.applications import Starlette

    from streamfold.web import ui_routes

    with serve_in_thread(Starlette(routes=ui_routes())) as url:  # the bundled ones
        yield url


def test_the_page_plays_a_loop_step_by_step(base_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    loop = json.loads((bundled_recordings() / f"{LOOP}.loop.json").read_text())
    result = loop["steps"][1]["tool_result"]
    answer = loop["steps"][2]["message"]["content"][0]["content"]

    with sync_playwright() as pw, open_page(pw, tmp_path / "profile") as (page, errors):
        page.goto(f"{base_url}/")
        page.wait_for_selector(f'#recording option[value="{LOOP}"]', state="attached")
        page.select_option("#recording", LOOP)
        page.select_option("#speed", "1")
        page.click("#replay")

        # The call is shown before its result arrives, and the result lands under it.
        page.wait_for_selector(".part.tool", timeout=15_000)
        page.wait_for_selector('.part.tool[data-result="done"]', timeout=15_000)
        shown = page.inner_text(".part.tool .tool-output pre")
        assert shown == result["content"]
        page.wait_for_selector('#status[data-state="done"]', timeout=30_000)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "ui-demo-loop.png"), full_page=True)

        # Two steps (a rule between them), the reasoning and the call in the first, the
        # answer in the second, marked as the answer.
        kinds = page.eval_on_selector_all(
            "#message > *", "nodes => nodes.map(n => n.tagName === 'HR' ? 'step' : n.className)"
        )
        assert [k for k in kinds if k == "step"] == ["step"]
        before, after = kinds[: kinds.index("step")], kinds[kinds.index("step") + 1 :]
        assert any("reasoning" in k for k in before) and any("tool" in k for k in before)
        assert any("text" in k and "answer" in k for k in after)
        text = page.eval_on_selector(".part.text.answer", "n => n.streamfoldText")
        assert text == answer
        assert errors == []
