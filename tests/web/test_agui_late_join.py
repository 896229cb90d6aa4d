"""AG-UI's late joiner: the MESSAGES_SNAPSHOT the encoder builds is what the protocol's own
client builds from the events. Every recording, and an agent loop, played twice through
`@ag-ui/client`'s HttpAgent: once as the events, once as RUN_STARTED, a snapshot of the
run so far, and the rest; the agent's messages must be equal, to the byte."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from record.test_recordings import READY
from support import final_message, fold_bytes, read

from streamfold import MessageCompleted, ToolResult

ag_ui = pytest.importorskip("ag_ui.core")
from streamfold.agui import AGUIEncoder, encode_agui_sse, to_agui_events  # noqa: E402

JS = Path(__file__).parent.parent / "js"
USER = {"id": "user-1", "role": "user", "content": "Go on."}


def _loop() -> list[Any]:
    first = fold_bytes(read("anthropic/thinking-then-tool-use.sse"))
    results = [ToolResult(tool_call_id=c.call_id or "", name=c.name, content="v1.2.3")
               for c in final_message(first).tool_calls]  # fmt: skip
    return [*first, *results, *fold_bytes(read("anthropic/text-basic.sse"))]


def _late(items: list[Any], cut: int) -> str:
    """The run as a reader that came after `cut` items gets it: the start, a snapshot of
    the chat it sent and the run so far, then the rest."""
    encoder = AGUIEncoder(thread_id="thread", run_id="run")
    out = encoder.start()
    for item in items[:cut]:
        encoder.tool_result(item) if isinstance(item, ToolResult) else encoder.feed(item)
    out.append(encoder.snapshot([ag_ui.UserMessage.model_validate(USER)]))
    for item in items[cut:]:
        out += encoder.tool_result(item) if isinstance(item, ToolResult) else encoder.feed(item)
    out += encoder.close()
    return b"".join(encode_agui_sse(out)).decode()


def _at_a_step_boundary(items: list[Any]) -> list[int]:
    """Where a late joiner may be cut in: after a response's end or a tool result (a part
    being written goes live from its start: the client refuses content for a message it
    was not told began)."""
    ends = (ToolResult, MessageCompleted)
    return [n + 1 for n, item in enumerate(items) if isinstance(item, ends)]


def test_a_snapshot_builds_what_the_events_build() -> None:
    node = shutil.which("node")
    if node is None or not (JS / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("node and @ag-ui/client (tests/js: npm ci) are needed to judge")
    cases: dict[str, list[Any]] = {rel: fold_bytes(read(rel)) for rel in READY}
    cases["loop"] = _loop()
    runs: dict[str, Any] = {}
    for name, items in cases.items():
        whole = b"".join(encode_agui_sse(to_agui_events(items, thread_id="thread", run_id="run")))
        runs[f"{name} whole"] = {"body": whole.decode()}
        for cut in _at_a_step_boundary(items):
            runs[f"{name} late {cut}"] = {"body": _late(items, cut)}
    for run in runs.values():
        run.update(threadId="thread", runId="run", initialMessages=[USER])
    done = subprocess.run(
        [node, "read-agui.mjs"], cwd=JS, input=json.dumps(runs), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    read_back = json.loads(done.stdout)
    assert len(read_back) > len(cases) + 1  # a late join of the loop after each step at least
    for name in runs:
        got = read_back[name]
        assert got["error"] is None, (name, got["error"])
        whole = read_back[f"{name.split(' ')[0]} whole"]
        assert got["messages"] == whole["messages"], name
        assert got["messages"][0] == USER
        if " late " in name:
            assert got["events"][:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
