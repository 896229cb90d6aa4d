"""An agent loop in one UI message stream, read by the `ai` package's own reader: steps,
the app's tool results, its data parts and metadata, a user's stop, and the narration /
answer marker across the responses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import final_message, fold_bytes, read

from streamfold import ToolResult, UsageError
from streamfold.ui import UIMessageChunk, UIMessageStreamEncoder, encode_sse
from ui.test_ui_messages import _node

FIRST, SECOND = "anthropic/text-then-tool-use-no-args.sse", "anthropic/text-basic.sse"


def _read(streams: dict[str, list[UIMessageChunk]]) -> dict[str, Any]:
    bodies = {name: b"".join(encode_sse(chunks)).decode() for name, chunks in streams.items()}
    return _node("read-ui-stream.mjs", bodies)


def _loop_chunks(*, abort_in_second: bool = False) -> list[UIMessageChunk]:
    first = fold_bytes(read(FIRST))
    call = final_message(first).tool_calls[0]
    encoder = UIMessageStreamEncoder(message_id="turn-1")
    chunks = encoder.start()
    chunks += encoder.data("status", {"phase": "thinking"}, id="status")
    for event in first:
        chunks += encoder.feed(event)
    chunks += encoder.data("status", {"phase": "running the tool"}, id="status")
    chunks += encoder.data("progress", {"percent": 50}, transient=True)
    chunks += encoder.tool_result(ToolResult(tool_call_id=call.call_id or "", content="v2"))
    chunks += encoder.metadata({"chatTitle": "Versions"})
    second = fold_bytes(read(SECOND))
    if abort_in_second:
        partial = [e for e in second if e.type != "message_completed"][:6]
        for event in partial:
            chunks += encoder.feed(event)
        return chunks + encoder.abort("the user pressed stop")
    for event in second:
        chunks += encoder.feed(event)
    chunks += encoder.data("status", {"phase": "done"}, id="status")
    return chunks + encoder.close()


def test_the_loop_reads_as_one_message_of_steps() -> None:
    got = _read({"loop": _loop_chunks(), "stopped": _loop_chunks(abort_in_second=True)})
    loop = got["loop"]
    assert loop["errors"] == [] and loop["valid"], loop
    message = loop["message"]
    kinds = [p["type"] for p in message["parts"]]
    assert kinds.count("step-start") == 2
    # The app's data part, replaced in place by id; a transient one is not kept.
    statuses = [p for p in message["parts"] if p["type"] == "data-status"]
    assert [s["data"] for s in statuses] == [{"phase": "done"}]
    assert "data-progress" not in kinds
    tool = next(p for p in message["parts"] if p["type"].startswith("tool-"))
    assert (tool["state"], tool["output"]) == ("output-available", "v2")
    # The app's metadata merged with each step's.
    assert message["metadata"]["chatTitle"] == "Versions"
    assert [s["provider"] for s in message["metadata"]["steps"]] == ["anthropic", "anthropic"]
    # Narration in the first response, the answer only in the last.
    texts = [p for p in message["parts"] if p["type"] == "text"]
    markers = [t["providerMetadata"]["streamfold"].get("utterance") for t in texts]
    assert markers == ["narration", "answer"]

    stopped = got["stopped"]
    assert "abort" in stopped["chunks"] and stopped["errors"] == []
    assert stopped["chunks"][-1] == "abort"
    parts = stopped["message"]["parts"]
    assert all(p.get("state") != "streaming" for p in parts if p["type"] in ("text", "reasoning"))


def test_app_parts_are_checked() -> None:
    encoder = UIMessageStreamEncoder()
    with pytest.raises(UsageError, match="part name"):
        encoder.data("", 1)
    with pytest.raises(UsageError):
        encoder.data("x", {"not": float("nan")})
    with pytest.raises(UsageError, match="mapping"):
        encoder.metadata(["a"])  # type: ignore[arg-type]
    assert json.dumps(encoder.metadata({"a": 1})[-1]) == (
        '{"type": "message-metadata", "messageMetadata": {"a": 1}}'
    )
    encoder.abort()
    assert encoder.data("x", 1) == [] and encoder.close() == []


def test_a_demo_loop_is_listed_and_streams_as_one_message(tmp_path: Path) -> None:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from streamfold.web import ui_routes

    client = TestClient(Starlette(routes=ui_routes(speed=0)))
    listed = client.get("/ui-recordings").json()["recordings"]
    assert {"name": "loops/fixed-version", "provider": "agent loops", "loop": True} in listed
    body = client.get("/ui-stream?recording=loops/fixed-version&speed=0").text
    got = _node("read-ui-stream.mjs", {"loop": body})["loop"]
    assert got["errors"] == [] and got["valid"], got
    parts = got["message"]["parts"]
    assert [p["type"] for p in parts].count("step-start") == 2
    tool = next(p for p in parts if p["type"].startswith("tool-"))
    assert tool["state"] == "output-available" and tool["output"] == "3.2.1"


@pytest.mark.parametrize(
    ("loop", "says"),
    [
        ('{"provider": "anthropic", "steps": [{"recording": "nope.sse"}]}', "no recording"),
        ('{"provider": "anthropic", "steps": [{}]}', "expected one of"),
        ('{"provider": "anthropic", "steps": [], "extra": 1}', "extra"),
        ("[", "expected a demo loop"),
    ],
)
def test_a_bad_demo_loop_is_refused_by_name(tmp_path: Path, loop: str, says: str) -> None:
    from streamfold.web import ui_routes

    (tmp_path / "anthropic").mkdir()
    (tmp_path / "anthropic" / "text-basic.sse").write_bytes(read(SECOND))
    (tmp_path / "bad.loop.json").write_text(loop)
    with pytest.raises(UsageError, match=says) as info:
        ui_routes(tmp_path)
    assert "bad.loop.json" in str(info.value)
