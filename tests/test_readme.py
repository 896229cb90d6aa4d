"""The README's Python examples, run as written: against `streamfold serve` and the recordings."""

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

import streamfold
import streamfold.telemetry
import streamfold.timing
from streamfold import MessageCompleted, fold_message, is_narration, utterance

ROOT = Path(__file__).parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def _block(first_line: str) -> str:
    (block,) = [b for b in BLOCKS if first_line in b.splitlines()[0]]
    return block


def test_every_example_is_run_here() -> None:
    # A new example needs a test below.
    assert [b.splitlines()[0] for b in BLOCKS] == [
        "import httpx",
        "recording = streamfold.load_recording("
        '"tests/fixtures/real/anthropic/thinking-then-tool-use.sse")',
        "CP = streamfold.ContentPart",
        "class LineChat(streamfold.Decoder):",
        "from streamfold.interop.pydantic_ai import from_model_response, to_model_response",
        "sent_at = time.monotonic()",
        "from streamfold import telemetry",
        "from streamfold.relay import Relay",
        "# app.py",
    ]


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


def test_the_timing_example(
    base_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    import httpx

    monkeypatch.setattr(streamfold.timing, "default_clock", time.monotonic)  # a real one
    rec = "anthropic/code-execution-bash-thinking.sse"
    path, body = _REQUESTS["anthropic"]
    namespace: dict[str, Any] = {
        "streamfold": streamfold,
        "httpx": httpx,
        "time": time,
        "url": f"{base_url}{path}?recording={rec}",
        "body": body,
        "headers": {},
    }
    exec(_block("sent_at = time.monotonic()"), namespace)
    timing = namespace["timing"]
    run = namespace["run"]
    assert timing == run.timing.as_dict()
    first, total = timing["time_to_first_token_s"], timing["total_s"]
    assert 0 < timing["time_to_first_byte_s"] <= first <= total  # the request counts
    assert capsys.readouterr().out.split() == [str(first), str(run.timing.output_tokens_per_s)]


def test_the_telemetry_example() -> None:
    try:
        exec(_block("from streamfold import telemetry"), {})
        assert streamfold.telemetry.is_instrumented()
        assert fold_message(read("anthropic/text-basic.sse")).status == "complete"
    finally:
        streamfold.telemetry.uninstrument()


def test_the_recording_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {"streamfold": streamfold}
    exec(_block("recording = streamfold.load_recording("), namespace)
    message = namespace["message"]
    assert [type(p).__name__ for p in message.stream_order()] == ["ContentPart", "ToolCall"]
    assert message.stop_reason == "tool_use" and not is_narration(message.content[0])


def test_the_adapters_example() -> None:
    rec = "anthropic/web-search-thinking-citations.sse"
    namespace: dict[str, Any] = {"streamfold": streamfold, "recording": read(rec)}
    exec(_block("from streamfold.interop.pydantic_ai import"), namespace)
    kinds = [part.part_kind for part in namespace["response"].parts]
    assert {"thinking", "text", "builtin-tool-call", "builtin-tool-return"} <= set(kinds)


def test_the_message_delta_example() -> None:
    namespace: dict[str, Any] = {"streamfold": streamfold}
    exec(_block("CP = streamfold.ContentPart"), namespace)
    last = namespace["event"]
    assert isinstance(last, MessageCompleted) and last.message.status == "complete"
    thinking, text = last.message.content
    assert (thinking.content, thinking.options["signature"], text.content) == ("th", "SIG", "Hello")
    events = list(streamfold.fold(namespace["deltas"]))
    done = [(e.index, e.explicit) for e in events if isinstance(e, streamfold.PartCompleted)]
    assert done == [(0, True), (1, False)]  # slot 0 named in `completed`, slot 1 at the end


def test_the_bring_your_own_provider_example() -> None:
    class Response:
        def iter_bytes(self) -> Iterator[bytes]:
            yield b'{"ev": "say", "text": "Hel"}\n{"ev": "say", "te'
            yield b'xt": "lo"}\n{"ev": "tick"}\n{"ev": "end"}\n'

    block = _block("class LineChat(streamfold.Decoder):").replace(
        "streamfold.fold_message(response", "message = streamfold.fold_message(response"
    )
    namespace: dict[str, Any] = {"streamfold": streamfold, "response": Response()}
    try:
        exec(block, namespace)
        message = namespace["message"]
        assert message.text == "Hello" and message.status == "complete"
        assert message.metadata["skipped_events"] == {"tick": 1}
        assert streamfold.fold_message(Response().iter_bytes(), "lc") == message
    finally:
        streamfold.unregister_provider("linechat")
    assert "linechat" not in streamfold.registered_providers()


def test_the_demo_app_example(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("redis")
    namespace: dict[str, Any] = {}
    exec(_block("# app.py"), namespace)
    assert namespace["app"].routes


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
