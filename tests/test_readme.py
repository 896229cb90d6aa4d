"""The README's examples, run as written (against `streamfold serve`, the recordings and a real
Redis), and its set-up commands, the ones CI runs."""

from __future__ import annotations

import asyncio
import re
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import serve_in_thread
from support import REAL, read

from streamfold import MessageCompleted, fold_message, utterance

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def _block(first_line: str) -> str:
    (block,) = [b for b in BLOCKS if first_line in b.splitlines()[0]]
    return block


def test_every_example_is_run_here() -> None:
    # A new example needs a test below (the docs' examples are run in tests/test_docs.py).
    assert [b.splitlines()[0] for b in BLOCKS] == [
        "import httpx",
        "from streamfold.relay import Relay",
    ]


def test_the_set_up_commands_are_the_ones_ci_runs() -> None:
    # A newcomer copies these two lines; CI runs the test command verbatim.
    section = README.split("## Set-up (a fresh machine with Python 3.11)\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    demo, tests = re.findall(r"```sh\n(.*?)\n```", section, re.S)
    assert demo == (
        "python3.11 -m venv .venv && .venv/bin/pip install -e '.[cli]'"
        " && .venv/bin/python -m streamfold demo"
    )
    assert tests == (
        "python3.11 -m venv .venv && .venv/bin/pip install -e '.[test]'"
        " && .venv/bin/python -m pytest"
    )
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_set_up_section_names_every_program_the_tests_look_for() -> None:
    # A test that looks a program up (shutil.which) is skipped without it: a newcomer must
    # read which programs those are before running the test command.
    section = README.split("## Set-up (a fresh machine with Python 3.11)\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    looked_up = {
        name
        for path in (ROOT / "tests").rglob("*.py")
        for name in re.findall(r'shutil\.which\("([^"]+)"\)', path.read_text())
    }
    assert looked_up, "no program looked up: the pattern no longer finds shutil.which calls"
    missing = sorted(name for name in looked_up if f"`{name}`" not in section)
    assert missing == [], f"the set-up section does not name {missing}"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    pytest.importorskip("uvicorn")
    from streamfold.serve import create_app

    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


_REQUESTS = {
    "gemini": ("/v1beta/models/m:streamGenerateContent?alt=sse", {"contents": []}),
    "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [], "stream": True}),
    "openai-chat": ("/v1/chat/completions", {"model": "m", "messages": [], "stream": True}),
}


@pytest.mark.parametrize(
    "rec",
    [
        "gemini/text-2.0-flash.sse",  # its first piece came with the part's start
        "openai-chat/tool-call-single-mini.sse",  # tool arguments are not live text
        "anthropic/code-execution-bash-thinking.sse",  # narration, then the answer
    ],
)
def test_the_first_example_prints_the_text_live(
    rec: str, base_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path, body = _REQUESTS[rec.split("/")[0]]
    sep = "&" if "?" in path else "?"
    stored: list[Any] = []
    restyled: list[int] = []
    history: list[Any] = []
    namespace = {
        "url": f"{base_url}{path}{sep}recording={rec}",
        "body": body,
        "headers": {},
        "store": stored.extend,
        "restyle": restyled.append,
        "history": history,
    }
    exec(_block("import httpx"), namespace)
    printed = capsys.readouterr().out
    (message,) = history
    assert message == fold_message(read(rec))
    assert printed == "".join(p.content or "" for p in message.content if p.type == "text")
    assert restyled == [
        i
        for i, p in enumerate(message.stream_order())
        if getattr(p, "type", None) == "text" and utterance(p) == "narration"  # type: ignore[arg-type]
    ]
    assert stored  # the display items, part by part
    if rec.startswith("gemini"):
        assert printed.startswith("The capital of France is Paris")
    if rec.startswith("openai-chat"):
        assert printed == "" and message.tool_calls


def test_the_relay_example(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    from redis_support import REDIS_SERVER, SKIP_REASON, RedisServer

    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    server = RedisServer(tmp_path)
    server.start()
    rec = "anthropic/web-search-citations.sse"

    class ProviderResponse:  # what httpx's response gives: the provider's bytes
        async def aiter_bytes(self) -> AsyncIterator[bytes]:
            data = read(rec)
            for at in range(0, len(data), 4096):
                yield data[at : at + 4096]

    block = _block("from streamfold.relay import Relay").replace(
        "redis://127.0.0.1:6379/0", server.url
    )
    # The example's `async for` runs in a coroutine, as in a request handler.
    code = (
        "async def example():\n"
        + textwrap.indent(block, "    ")
        + "    await relay.aclose()\n"  # a test closes what the example leaves open
        + "    return item\n"
    )
    namespace: dict[str, Any] = {
        "asyncio": asyncio,
        "chat_id": "chat-1",
        "provider_response": ProviderResponse(),
        "last_seen_id": None,
    }
    try:
        exec(code, namespace)
        last = asyncio.run(namespace["example"]())
    finally:
        server.stop(kill=True)
    assert isinstance(last.event, MessageCompleted)
    assert last.event.message == fold_message(read(rec))
