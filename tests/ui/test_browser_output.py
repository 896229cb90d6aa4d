"""The demo page shows the structured output filling in, in a real browser; the demo route's
`output=json` asks for it, and refuses what it cannot use."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import ARTIFACTS, missing, open_page
from output_support import OUTPUT_RECORDINGS
from server_support import serve_in_thread
from starlette.applications import Starlette
from starlette.testclient import TestClient
from support import REAL

from streamfold.web import ui_routes

CHARACTERS = next(r for r in OUTPUT_RECORDINGS if r.rel == "anthropic/json-output-format.sse")
TOOL = next(r for r in OUTPUT_RECORDINGS if r.output_tool is not None)
SPEED = "0.5"  # 120 events, 40 ms apart: about 5 s of streaming


def _data_output(body: str) -> list[dict[str, object]]:
    out = []
    for line in body.splitlines():
        if line.startswith("data: {"):
            chunk = json.loads(line[6:])
            if chunk["type"] == "data-output":
                out.append(chunk["data"])
    return out


@pytest.mark.parametrize("r", [CHARACTERS, TOOL], ids=lambda r: r.rel)
def test_the_route_folds_the_output_when_asked(r: object) -> None:
    from output_support import OutputRecording

    assert isinstance(r, OutputRecording)
    client = TestClient(Starlette(routes=ui_routes(REAL)))
    params = {"recording": r.rel, "speed": "0", "output": "json"}
    if r.output_tool:
        params["output_tool"] = r.output_tool
    sent = _data_output(client.get("/ui-stream", params=params).text)
    assert len(sent) >= 2 and sent[-1]["state"] == "complete"
    # Any JSON: the value as the JSON said it (aliases and all).
    assert sent[-1]["value"] == r.model.model_validate(r.expected).model_dump(by_alias=True)
    # POST takes the same fields, as a useChat transport's body.
    body = {k: v for k, v in params.items() if k != "speed"}
    posted = client.post("/ui-stream?speed=0", json=body).text
    assert _data_output(posted)[-1] == sent[-1]
    # Without output=json there is no data-output part.
    plain = client.get("/ui-stream", params={"recording": r.rel, "speed": "0"}).text
    assert _data_output(plain) == []


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"output": "model:Thing"}, "output: expected 'json'"),
        ({"output_tool": "json"}, "output_tool: expected output=json"),
        ({"output": "json", "output_tool": "x" * 201}, "output_tool: expected a tool name"),
    ],
)
def test_the_route_refuses_an_output_it_cannot_use(params: dict[str, str], says: str) -> None:
    client = TestClient(Starlette(routes=ui_routes(REAL)))
    answer = client.get("/ui-stream", params={"recording": CHARACTERS.rel, **params})
    assert answer.status_code == 400
    assert says in answer.json()["error"]["message"]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(Starlette(routes=ui_routes(REAL))) as url:
        yield url


def test_page_shows_the_output_filling_in(base_url: str, tmp_path: Path) -> None:
    if missing() is not None:
        pytest.skip(str(missing()))
    from playwright.sync_api import sync_playwright

    expected = CHARACTERS.model.model_validate(CHARACTERS.expected).model_dump(by_alias=True)
    with sync_playwright() as pw, open_page(pw, tmp_path / "profile") as (page, errors):
        page.goto(f"{base_url}/?recording={CHARACTERS.rel}&speed={SPEED}&output=json")
        page.wait_for_selector(f'#recording option[value="{CHARACTERS.rel}"]', state="attached")
        assert page.is_checked("#output")
        page.click("#replay")
        # Mid-stream: the typed value is on screen, partial, and grows.
        page.wait_for_function(
            """() => {
                const out = document.querySelector('.part.output');
                return document.querySelector('#status').dataset.state === 'streaming'
                    && out !== null && out.dataset.state === 'streaming'
                    && (out.streamfoldValue?.characters?.length ?? 0) >= 1;
            }""",
            timeout=20_000,
        )
        first = page.eval_on_selector(".part.output", "e => e.streamfoldValue")
        first_updates = int(page.get_attribute(".part.output", "data-updates") or 0)
        assert "Theron Ironheart".startswith(first["characters"][0]["name"])
        assert len(first["characters"]) < 3 or first != expected
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "ui-demo-output-streaming.png"), full_page=True)

        page.wait_for_selector('#status[data-state="done"]', timeout=30_000)
        assert page.get_attribute(".part.output", "data-state") == "done"
        assert page.eval_on_selector(".part.output", "e => e.streamfoldValue") == expected
        assert int(page.get_attribute(".part.output", "data-updates") or 0) > first_updates
        assert page.eval_on_selector_all(".part.output", "els => els.length") == 1
        shown = json.loads(page.inner_text(".part.output pre"))
        assert shown == expected
        # The JSON text itself is still shown as the answer's text part.
        assert page.query_selector(".part.text") is not None
        assert errors == []
        page.screenshot(path=str(ARTIFACTS / "ui-demo-output.png"), full_page=True)
