"""The documentation site keeps up with the code: a page per provider, every public name,
every example run as written.

CI builds the site with `mkdocs build --strict` (a broken link or reference fails it);
these checks need no docs dependency, and catch what a strict build cannot: a provider or
a public name added without its page, an example that no longer runs, a file named that
is gone.

An example that cannot run here (none today) says so on the line before its fence:
`<!-- not run: <the reason> -->`. Every other Python block is run by a test below.
"""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import REAL, read

import streamfold
from streamfold import MessageCompleted, fold_message, is_narration, utterance

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
NAV = (ROOT / "mkdocs.yml").read_text()
PAGES = {str(page.relative_to(DOCS)): page.read_text() for page in sorted(DOCS.rglob("*.md"))}
_FENCE = re.compile(
    r"^(<!-- not run: (?P<reason>.*?) -->\n)?```python\n(?P<code>.*?)^```", re.M | re.S
)
# "page: first line" -> the block's code, and why it is not run (None: it is run).
BLOCKS: dict[str, tuple[str, str | None]] = {
    f"{page}: {m['code'].splitlines()[0]}": (m["code"], m["reason"])
    for page, text in PAGES.items()
    for m in _FENCE.finditer(text)
}
README = (ROOT / "README.md").read_text()
README_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_every_provider_has_a_page_in_the_nav() -> None:
    missing = [
        name
        for name in streamfold.registered_providers()
        if not (DOCS / "providers" / f"{name}.md").is_file() or f"providers/{name}.md" not in NAV
    ]
    assert missing == []


def test_every_public_name_is_in_the_api_reference() -> None:
    # Each API page renders a name with `::: streamfold.<name>` (or `::: <module>.<name>`).
    pages = "\n".join(page.read_text() for page in (DOCS / "api").glob("*.md"))
    documented = set(re.findall(r"^::: streamfold(?:\.\w+)*\.(\w+)$", pages, re.M))
    assert sorted(set(streamfold.__all__) - documented) == []


def _block(key: str) -> str:
    code, not_run = BLOCKS[key]
    assert not_run is None, f"{key} is marked not run: {not_run}"
    return code


# The README's examples, repeated in the docs: tests/test_readme.py runs them.
AS_IN_THE_README = ["index.md: import httpx", "relay.md: from streamfold.relay import Relay"]


# The test files of docs/testing.md: pytest runs them (tests/testing/test_testing_page.py).
TESTING_PAGE = [
    f"testing.md: # {name}"
    for name in ("test_weather.py", "test_frameworks.py", "test_claude.py", "test_retry.py")
] + ["testing.md: # test_cut.py", "testing.md: # test_async_weather.py"]


def test_every_python_block_is_run_or_says_why_not() -> None:
    # A new example needs a test below, or a `<!-- not run: ... -->` line with a reason.
    runnable = sorted(key for key, (_, not_run) in BLOCKS.items() if not_run is None)
    assert runnable == sorted(
        [
            *AS_IN_THE_README,
            "api/interop.md: from streamfold.interop.pydantic_ai import from_model_response, "
            "to_model_response",
            "api/timing.md: from streamfold import telemetry",
            "api/timing.md: from streamfold.telemetry import RequestInfo",
            "api/timing.md: sent_at = time.monotonic()",
            "api/streams.md: import streamfold",
            "cli.md: from streamfold.record import tee",
            "concepts/narration.md: for event in streamfold.fold(chunks):",
            "concepts/pipeline.md: for event in streamfold.fold(chunks):            "
            "# an iterable of chunks",
            "concepts/pipeline.md: recording = streamfold.load_recording("
            '"tests/fixtures/real/anthropic/thinking-then-tool-use.sse")',
            "concepts/resuming.md: folder = streamfold.StreamFolder()",
            "concepts/structured-output.md: from pydantic import BaseModel",
            "live-ui.md: from starlette.responses import StreamingResponse",
            "live-ui.md: from streamfold import ToolResult, fold",
            "agent-loops.md: from streamfold import ToolResult, fold",
            "agent-loops.md: from streamfold.agui import AGUIEncoder, encode_agui_sse",
            "live-ui.md: from streamfold import encode",
            "providers/index.md: class LineChat(streamfold.Decoder):",
            "providers/streamfold.md: CP = streamfold.ContentPart",
            "relay.md: # app.py",
            # tests/testing/test_testing_page.py runs these, with their scenario files.
            *TESTING_PAGE,
            'relay.md: async with relay.turn("chat-42/turn-7") as turn:          # worker A',
        ]
    )
    assert all(reason.strip() for _, reason in BLOCKS.values() if reason is not None)
    # Every fenced Python block was seen (a fence the pattern missed would go unrun).
    assert len(BLOCKS) == sum(text.count("```python\n") for text in PAGES.values())


@pytest.mark.parametrize("key", AS_IN_THE_README)
def test_the_readme_examples_in_the_docs_are_the_readmes(key: str) -> None:
    assert _block(key) in README_BLOCKS


def test_every_file_named_is_there() -> None:
    # Pages and the README name test files, sources and benchmark results: after a move,
    # the text moves too.
    texts = {"README.md": README, **{f"docs/{page}": text for page, text in PAGES.items()}}
    named = {
        (where, path)
        for where, text in texts.items()
        for path in re.findall(r"(?<![\w/.])((?:tests|src|benchmarks|fuzz)/[\w./-]*\w)", text)
        if "*" not in path
    }
    assert sorted((where, path) for where, path in named if not (ROOT / path).exists()) == []


def test_the_to_stream_example(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {}
    exec(_block("api/streams.md: import streamfold"), namespace)
    assert capsys.readouterr().out == "error\n"
    # Four events kept, then the error event: Anthropic's own.
    assert namespace["broken"][:4] == namespace["chunks"][:4]
    assert namespace["broken"][4].startswith(b"event: error\n")


def test_the_recording_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {"streamfold": streamfold}
    exec(
        _block(
            "concepts/pipeline.md: recording = streamfold.load_recording("
            '"tests/fixtures/real/anthropic/thinking-then-tool-use.sse")'
        ),
        namespace,
    )
    message = namespace["message"]
    assert [type(p).__name__ for p in message.stream_order()] == ["ContentPart", "ToolCall"]
    assert message.stop_reason == "tool_use" and not is_narration(message.content[0])


def test_the_entry_points_example() -> None:
    rec = "anthropic/code-execution-bash-thinking.sse"
    data = read(rec)

    async def achunks() -> AsyncIterator[bytes]:
        yield data

    block = _block(
        "concepts/pipeline.md: for event in streamfold.fold(chunks):            "
        "# an iterable of chunks"
    )
    # The example's `async for` runs in a coroutine, as in a request handler.
    code = "async def example():\n" + textwrap.indent(block, "    ") + "    return locals()\n"
    namespace: dict[str, Any] = {
        "streamfold": streamfold,
        "chunks": [data],
        "achunks": achunks(),
        "chunk": data,
    }
    exec(code, namespace)
    names = asyncio.run(namespace["example"]())
    assert names["message"] == fold_message(read(rec))
    assert isinstance(names["event"], MessageCompleted)
    assert names["events"][-1].message == names["message"]
    assert names["folder"].snapshot() == names["message"]


def test_the_narration_example(capsys: pytest.CaptureFixture[str]) -> None:
    rec = "anthropic/code-execution-bash-thinking.sse"
    restyled: list[int] = []
    namespace: dict[str, Any] = {
        "streamfold": streamfold,
        "chunks": [read(rec)],
        "restyle": restyled.append,
    }
    exec(_block("concepts/narration.md: for event in streamfold.fold(chunks):"), namespace)
    message = fold_message(read(rec))
    assert capsys.readouterr().out == "".join(
        p.content or "" for p in message.content if p.type == "text"
    )
    assert restyled == [
        i
        for i, p in enumerate(message.stream_order())
        if getattr(p, "type", None) == "text" and utterance(p) == "narration"  # type: ignore[arg-type]
    ]
    assert restyled  # the recording has narration


def test_the_resume_example() -> None:
    data = read("anthropic/thinking-then-tool-use.sse")
    namespace: dict[str, Any] = {
        "streamfold": streamfold,
        "first_half": data[: len(data) // 2],
        "second_half": data[len(data) // 2 :],
        "secret": b"a key of the caller's",
    }
    exec(_block("concepts/resuming.md: folder = streamfold.StreamFolder()"), namespace)
    assert namespace["state"]["mac"]
    last = namespace["events"][-1]
    assert isinstance(last, MessageCompleted) and last.message == fold_message(data)


def test_the_structured_output_example(capsys: pytest.CaptureFixture[str]) -> None:
    cities = '[{"name": "Istanbul", "country": "Turkey"}, {"name": "Moscow", "country": "Russia"}]'
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [
        {**head, "choices": [{"index": 0, "delta": {"content": cities[i : i + 9]}}]}
        for i in range(0, len(cities), 9)
    ]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    namespace: dict[str, Any] = {"chunks": chunks}
    exec(_block("concepts/structured-output.md: from pydantic import BaseModel"), namespace)
    assert capsys.readouterr().out == "0: Istanbul, Turkey\n1: Moscow, Russia\n"
    assert [city.name for city in namespace["cities"]] == ["Istanbul", "Moscow"]


def test_the_tee_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = read("openai-chat/tool-call-single-mini.sse")

    class Response:
        def iter_bytes(self) -> Iterator[bytes]:
            yield from (data[at : at + 100] for at in range(0, len(data), 100))

    monkeypatch.chdir(tmp_path)
    (tmp_path / "fixtures").mkdir()
    namespace: dict[str, Any] = {"response": Response()}
    exec(_block("cli.md: from streamfold.record import tee"), namespace)
    assert isinstance(namespace["event"], MessageCompleted)
    assert (tmp_path / "fixtures" / "answer.sse").read_bytes() == data


def test_the_live_ui_example() -> None:
    pytest.importorskip("starlette")
    data = read("anthropic/thinking-then-tool-use.sse")

    class ProviderResponse:
        async def aiter_bytes(self) -> AsyncIterator[bytes]:
            yield data

    namespace: dict[str, Any] = {"provider_response": ProviderResponse()}
    exec(_block("live-ui.md: from starlette.responses import StreamingResponse"), namespace)

    async def body() -> bytes:
        response = await namespace["chat"](None)
        return b"".join([chunk async for chunk in response.body_iterator])

    text = asyncio.run(body()).decode()
    assert '"type":"reasoning-delta"' in text.replace(" ", "")
    assert text.rstrip().endswith("data: [DONE]")


def test_the_agent_loop_ui_example() -> None:
    namespace: dict[str, Any] = {
        "first_response_bytes": [read("anthropic/thinking-then-tool-use.sse")],
        "second_response_bytes": [read("anthropic/text-basic.sse")],
        "run_tool": lambda call: f"{call.name} ran",
    }
    exec(_block("live-ui.md: from streamfold import ToolResult, fold"), namespace)
    chunks = [
        json.loads(line[6:])
        for line in b"".join(namespace["body"]).decode().splitlines()
        if line.startswith("data: {")
    ]
    types = [c["type"] for c in chunks]
    assert types.count("start-step") == 2 and types.count("finish-step") == 2
    output = chunks[types.index("tool-output-available")]
    assert output == {
        "type": "tool-output-available",
        "toolCallId": namespace["call"].call_id,
        "output": "fixed_version ran",
    }
    assert types.index("tool-output-available") < types.index("start-step", 2)


def test_the_agent_loop_agui_example() -> None:
    pytest.importorskip("ag_ui")
    namespace: dict[str, Any] = {
        "first_response_bytes": [read("anthropic/thinking-then-tool-use.sse")],
        "second_response_bytes": [read("anthropic/text-basic.sse")],
        "run_tool": lambda call: f"{call.name} ran",
    }
    exec(_block("agent-loops.md: from streamfold import ToolResult, fold"), namespace)
    types = [
        json.loads(line[6:])["type"]
        for line in b"".join(namespace["body"]).decode().splitlines()
        if line.startswith("data: ")
    ]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert types.count("STEP_STARTED") == 2
    assert types.index("TOOL_CALL_RESULT") < types.index("STEP_STARTED", 2)


def test_the_agent_loop_late_joiner_example() -> None:
    pytest.importorskip("ag_ui")
    from ag_ui.core import UserMessage

    from streamfold import ToolResult, fold

    first = list(fold([read("anthropic/thinking-then-tool-use.sse")], provider="anthropic"))
    call = first[-1].message.tool_calls[0]
    result = ToolResult(tool_call_id=call.call_id, name=call.name, content="3.2.1")
    second = list(fold([read("anthropic/text-basic.sse")], provider="anthropic"))
    namespace: dict[str, Any] = {
        "ToolResult": ToolResult,
        "so_far": [*first, result],
        "rest": second,
        "history": [UserMessage(id="user-1", content="Which version?")],
    }
    exec(_block("agent-loops.md: from streamfold.agui import AGUIEncoder, encode_agui_sse"),
         namespace)  # fmt: skip
    events = [
        json.loads(line[6:])
        for line in b"".join(namespace["body"]).decode().splitlines()
        if line.startswith("data: ")
    ]
    types = [e["type"] for e in events]
    assert types[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STEP_STARTED"]
    assert types[-1] == "RUN_FINISHED" and types.count("STEP_STARTED") == 1
    snapshot = events[1]["messages"]
    assert [m["role"] for m in snapshot] == ["user", "reasoning", "assistant", "tool"]
    assert snapshot[2]["toolCalls"][0]["id"] == call.call_id
    assert snapshot[3] == {"id": f"run-1-result-{call.call_id}", "role": "tool",
                           "content": "3.2.1", "toolCallId": call.call_id}  # fmt: skip


def test_the_ui_messages_example() -> None:
    history = [
        streamfold.Message.user("Weather in Paris?"),
        streamfold.fold_message(
            [read("anthropic/thinking-then-tool-use.sse")], provider="anthropic"
        ),
    ]
    from streamfold.ui import dump_ui_messages

    namespace: dict[str, Any] = {"request_body": {"messages": dump_ui_messages(history)}}
    exec(_block("live-ui.md: from streamfold import encode"), namespace)
    signature = history[1].content[0].options["signature"]
    assert namespace["body"]["messages"][1]["content"][0]["signature"] == signature
    assert namespace["stored"] == namespace["request_body"]["messages"]


def test_the_bring_your_own_provider_example() -> None:
    class Response:
        def iter_bytes(self) -> Iterator[bytes]:
            yield b'{"ev": "say", "text": "Hel"}\n{"ev": "say", "te'
            yield b'xt": "lo"}\n{"ev": "tick"}\n{"ev": "end"}\n'

    block = _block("providers/index.md: class LineChat(streamfold.Decoder):").replace(
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


def test_the_message_delta_example() -> None:
    namespace: dict[str, Any] = {"streamfold": streamfold}
    exec(_block("providers/streamfold.md: CP = streamfold.ContentPart"), namespace)
    last = namespace["event"]
    assert isinstance(last, MessageCompleted) and last.message == namespace["message"]
    assert last.message.status == "complete"
    thinking, text = last.message.content
    assert (thinking.content, thinking.options["signature"], text.content) == ("th", "SIG", "Hello")
    events = list(streamfold.fold(namespace["deltas"]))
    done = [(e.index, e.explicit) for e in events if isinstance(e, streamfold.PartCompleted)]
    assert done == [(0, True), (1, False)]  # slot 0 named in `completed`, slot 1 at the end


def test_the_adapters_example() -> None:
    pytest.importorskip("pydantic_ai")
    rec = "anthropic/web-search-thinking-citations.sse"
    namespace: dict[str, Any] = {"streamfold": streamfold, "recording": read(rec)}
    exec(
        _block(
            "api/interop.md: from streamfold.interop.pydantic_ai import from_model_response, "
            "to_model_response"
        ),
        namespace,
    )
    kinds = [part.part_kind for part in namespace["response"].parts]
    assert {"thinking", "text", "builtin-tool-call", "builtin-tool-return"} <= set(kinds)


def test_the_timing_example(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("uvicorn")
    import time

    import httpx
    from server_support import serve_in_thread

    import streamfold.timing
    from streamfold.serve import create_app

    rec = "anthropic/code-execution-bash-thinking.sse"
    with serve_in_thread(create_app(REAL, speed=0)) as base_url:
        namespace: dict[str, Any] = {
            "streamfold": streamfold,
            "httpx": httpx,
            "time": time,
            "url": f"{base_url}/v1/messages?recording={rec}",
            "body": {"model": "m", "max_tokens": 9, "messages": [], "stream": True},
            "headers": {},
        }
        exec(_block("api/timing.md: sent_at = time.monotonic()"), namespace)
    timing = namespace["timing"]
    run = namespace["run"]
    assert timing == run.timing.as_dict()
    first, total = timing["time_to_first_token_s"], timing["total_s"]
    assert 0 < timing["time_to_first_byte_s"] <= first <= total  # the request counts
    assert capsys.readouterr().out.split() == [str(first), str(run.timing.output_tokens_per_s)]


def test_the_telemetry_example() -> None:
    pytest.importorskip("opentelemetry")
    import streamfold.telemetry

    try:
        exec(_block("api/timing.md: from streamfold import telemetry"), {})
        assert streamfold.telemetry.is_instrumented()
        assert fold_message(read("anthropic/text-basic.sse")).status == "complete"
    finally:
        streamfold.telemetry.uninstrument()


def test_the_demo_app_example() -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("redis")
    namespace: dict[str, Any] = {}
    exec(_block("relay.md: # app.py"), namespace)
    assert namespace["app"].routes


def test_the_turn_example(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    from redis_support import REDIS_SERVER, SKIP_REASON, RedisServer

    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    from streamfold import ToolResult
    from streamfold.relay import Relay, TurnCompleted

    class Response:
        def __init__(self, rel: str) -> None:
            self.data = read(rel)

        async def aiter_bytes(self) -> AsyncIterator[bytes]:
            yield self.data

    block = _block('relay.md: async with relay.turn("chat-42/turn-7") as turn:          # worker A')
    code = "async def example():\n" + textwrap.indent(block, "    ") + "\n    return item\n"
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:

        async def run() -> Any:
            async with Relay.from_url(server.url) as relay:
                namespace: dict[str, Any] = {
                    "relay": relay,
                    "response_1": Response("anthropic/thinking-then-tool-use.sse"),
                    "response_2": Response("anthropic/text-basic.sse"),
                    "run_tool": lambda call: ToolResult(tool_call_id=call.call_id, content="ok"),
                }
                exec(code, namespace)
                return await namespace["example"]()

        last = asyncio.run(run())
    finally:
        server.stop()
    assert isinstance(last.item, TurnCompleted) and last.item.status == "complete"
    assert last.step == 2 + 1  # two responses and a tool result, then the end


def test_the_request_info_example() -> None:
    """Through a real server: the request's facts and the provider named reach the span."""
    pytest.importorskip("uvicorn")
    pytest.importorskip("opentelemetry.sdk")
    import httpx
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from server_support import serve_in_thread

    import streamfold.telemetry
    from streamfold.serve import create_app

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    rec = "groq/reasoning-tool-call.sse"
    streamfold.telemetry.instrument(tracer_provider=tracer_provider)
    try:
        with serve_in_thread(create_app(REAL, speed=0)) as base_url:
            url = f"{base_url}/v1/chat/completions?recording={rec}"
            namespace: dict[str, Any] = {
                "streamfold": streamfold,
                "httpx": httpx,
                "url": url,
                "body": {"model": "asked-model", "messages": [], "stream": True},
                "headers": {},
            }
            exec(_block("api/timing.md: from streamfold.telemetry import RequestInfo"), namespace)
    finally:
        streamfold.telemetry.uninstrument()
    assert namespace["message"] == fold_message(read(rec))
    [span] = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    host, port = base_url.split("//")[1].split(":")
    assert attributes["gen_ai.provider.name"] == "groq"
    assert attributes["gen_ai.request.model"] == "asked-model"
    assert (attributes["server.address"], attributes["server.port"]) == (host, int(port))
