"""The demo page in a real browser: a recording replayed live, parts shown as they complete."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import ARTIFACTS, missing, open_page
from server_support import serve_in_thread
from support import REAL, fold_bytes, read, replayed

from streamfold import ContentPart, MessageCompleted, utterance

RECORDING = "anthropic/code-execution-bash-thinking.sse"  # thinking, text, server tool, text
SPEED = "0.25"  # 35 events, 80 ms apart: about 3 s of streaming

if missing() is not None:
    pytest.skip(str(missing()), allow_module_level=True)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """A real uvicorn server on a free 127.0.0.1 port, serving the demo routes."""
    from starlette.applications import Starlette

    from streamfold.web import ui_routes

    with serve_in_thread(Starlette(routes=ui_routes(REAL))) as url:
        yield url


def test_page_renders_a_replay_live(base_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    events = fold_bytes(read(RECORDING))
    message = next(e.message for e in events if isinstance(e, MessageCompleted))
    texts = [p.content or "" for p in message.content if p.type == "text"]
    assert len(texts) >= 2 and any(p.type == "thinking" for p in message.content)

    with sync_playwright() as pw, open_page(pw, tmp_path / "profile") as (page, errors):
        page.goto(f"{base_url}/")
        page.wait_for_selector(f'#recording option[value="{RECORDING}"]', state="attached")
        page.select_option("#recording", RECORDING)
        page.select_option("#speed", SPEED)
        page.click("#replay")

        # A finished part is on screen while the stream is still going.
        page.wait_for_function(
            """() => document.querySelector('#status').dataset.state === 'streaming'
                    && document.querySelector('.part[data-state="done"]') !== null""",
            timeout=15_000,
        )
        assert page.get_attribute("#status", "data-state") == "streaming"
        first = page.query_selector('.part[data-state="done"]')
        assert first is not None and first.is_visible()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "ui-demo-streaming.png"), full_page=True)

        page.wait_for_selector('#status[data-state="done"]', timeout=30_000)
        # Each text part whole (the page keeps its raw text), then shown as Markdown.
        shown = page.eval_on_selector_all(".part.text", "els => els.map(e => e.streamfoldText)")
        assert shown == texts
        # Narration set apart from the answer, as streamfold marked them.
        marks = page.eval_on_selector_all(
            ".part.text",
            "els => els.map(e => ['narration', 'answer'].filter(c => e.classList.contains(c)))",
        )
        assert marks == [[utterance(p)] for p in message.content if p.type == "text"]
        assert marks[0] == ["narration"] and marks[-1] == ["answer"]
        visible = page.inner_text("#message")
        assert "Final Answer" in visible and "###" not in visible
        assert page.query_selector(".part.text table") is not None
        assert page.eval_on_selector_all('.part[data-state="streaming"]', "els => els.length") == 0
        reasoning = page.query_selector("details.part.reasoning")
        assert reasoning is not None
        assert reasoning.evaluate("e => e.open") is False  # collapsed once done
        assert "signed" in (reasoning.inner_text() or "")
        # The code the provider ran, its result under it.
        ran = page.query_selector(".part.tool.provider")
        assert ran is not None and ran.get_attribute("data-result") == "done"
        assert "run by the provider" in ran.inner_text()
        assert "-428330955.97745" in ran.inner_text()
        finish = page.inner_text("#finish")
        assert "stop" in finish and "claude" in finish
        # The recording's own timing, whatever the speed of the replay.
        timing = replayed(RECORDING)
        list(timing)
        first, rate = timing.timing.time_to_first_token_s, timing.timing.output_tokens_per_s
        assert first is not None and rate is not None
        assert "first token" in finish and f"{first:.2f} s" in finish
        assert "tokens/s" in finish and f"{rate:.1f}" in finish
        assert errors == []

        page.screenshot(path=str(ARTIFACTS / "ui-demo.png"), full_page=True)


def test_a_cut_stream_is_not_shown_as_done(tmp_path: Path) -> None:
    """A stream that stops before its end (a producer that died) shows `incomplete`."""
    from playwright.sync_api import sync_playwright
    from starlette.applications import Starlette

    from streamfold.web import ui_routes

    whole = read("anthropic/text-basic.sse")
    cut = whole[: whole.index(b"event: content_block_stop")]  # mid-answer, no message_stop
    directory = tmp_path / "recordings" / "anthropic"
    directory.mkdir(parents=True)
    (directory / "cut.sse").write_bytes(cut)
    message = next(e.message for e in fold_bytes(cut) if isinstance(e, MessageCompleted))
    assert message.status == "incomplete" and message.text

    app = Starlette(routes=ui_routes(directory.parent))
    with (
        serve_in_thread(app) as url,
        sync_playwright() as pw,
        open_page(pw, tmp_path / "profile") as (page, errors),
    ):
        page.goto(f"{url}/?recording=anthropic/cut.sse&speed=0&autoplay")
        page.wait_for_selector('#status:not([data-state="streaming"]):not([data-state="idle"])')
        assert page.get_attribute("#status", "data-state") == "incomplete"
        assert "incomplete" in page.inner_text("#status")
        assert "incomplete" in page.inner_text("#finish")  # the status, beside the finish
        shown = page.eval_on_selector_all(".part.text", "els => els.map(e => e.streamfoldText)")
        assert shown == [message.text]  # what came is kept, and shown as far as it came
        assert errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "ui-demo-incomplete.png"), full_page=True)


@pytest.mark.parametrize(
    "rel", ["anthropic/web-search-citations.sse", "anthropic/web-search-thinking-citations.sse"]
)
def test_a_cited_answer_reads_as_one_text_with_its_markers(
    base_url: str, rel: str, tmp_path: Path
) -> None:
    """Anthropic sends a text block per cited sentence, and lone ". " blocks between: the
    page shows one text with one badge, each cited piece followed by its sources' numbers."""
    from playwright.sync_api import sync_playwright

    from streamfold.ui import to_ui_message_stream

    events = fold_bytes(read(rel))
    message = next(e.message for e in events if isinstance(e, MessageCompleted))
    # The text parts, those next to each other joined (what the page must show).
    runs: list[list[ContentPart]] = []
    previous: object = None
    for item in message.stream_order():
        if isinstance(item, ContentPart) and item.type == "text":
            if isinstance(previous, ContentPart) and previous.type == "text":
                runs[-1].append(item)
            else:
                runs.append([item])
        previous = item
    assert max(len(r) for r in runs) > 5  # the recording splits its answer
    # Each source numbered as it first arrives on the stream (the page's list order).
    numbers: dict[str, int] = {}
    for chunk in to_ui_message_stream(events):
        if chunk["type"] in ("source-url", "source-document"):
            numbers.setdefault(chunk["url"] if "url" in chunk else chunk["title"], len(numbers) + 1)

    with sync_playwright() as pw, open_page(pw, tmp_path / "profile") as (page, errors):
        page.goto(f"{base_url}/?recording={rel}&speed=0&autoplay")
        page.wait_for_selector('#status[data-state="done"]', timeout=30_000)
        shown = page.eval_on_selector_all(".part.text", "els => els.map(e => e.streamfoldText)")
        assert shown == ["".join(p.content or "" for p in run) for run in runs]
        badges = page.eval_on_selector_all(
            ".part.text",
            "els => els.map(e => [...e.querySelectorAll('.badge')].map(b => b.textContent))",
        )
        assert badges == [[utterance(run[0])] for run in runs]
        assert badges[-1] == ["answer"]
        visible = page.eval_on_selector_all(".part.text .body", "els => els.map(e => e.innerText)")
        assert not [line for text in visible for line in text.splitlines() if line.strip() == "."]
        answer = visible[-1]
        for part in runs[-1]:
            if not part.citations:
                continue
            cited = [c.source.url for c in part.citations if c.source and c.source.url]
            marks = "".join(f"[{numbers[url]}]" for url in dict.fromkeys(cited))
            tail = (part.content or "").rstrip()[-12:]
            assert tail + marks in answer, (tail, marks)
        assert errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "ui-demo-citations.png"), full_page=True)
