"""UI messages (what `useChat` keeps and sends back) to streamfold history and back, judged
by the `ai` package's own code: `readUIMessageStream` builds from streamfold's stream the
UIMessage `dump_ui_messages` writes, `validateUIMessages` accepts every dump, and
`convertToModelMessages` reads the same history from it as `load_ui_messages` does."""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from record.test_recordings import READY
from support import final_message, fold_bytes, read

from streamfold import ContentPart, Message, ToolCall, ToolResult, Usage, encode
from streamfold.encoding import origin
from streamfold.ui import (
    UI_ID_KEY,
    UIMessagesError,
    dump_ui_messages,
    encode_sse,
    load_ui_messages,
    to_ui_message_stream,
)

JS = Path(__file__).parent.parent / "js"
SOURCES = ("source-url", "source-document")


def _node(script: str, payload: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None or not (JS / "node_modules" / "ai").is_dir():
        pytest.skip("node and the `ai` package (tests/js: npm ci) are needed to judge")
    run = subprocess.run(
        [node, script], cwd=JS, input=json.dumps(payload), capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert run.returncode == 0, f"{script} failed:\n{run.stderr}"
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def _comparable(ui: dict[str, Any]) -> dict[str, Any]:
    """A UIMessage without what a stream has and a stored message cannot: the fold's
    timing, and where the source parts stand (a stream sends a source when its citation
    arrives, often after its text; a stored message's sources go with their text)."""
    ui = json.loads(json.dumps(ui))
    meta = ui.get("metadata") or {}
    meta.pop("timing", None)
    for step in meta.get("steps", []):
        step.pop("timing", None)
    sources = sorted((p for p in ui["parts"] if p["type"] in SOURCES), key=json.dumps)
    ui["parts"] = [p for p in ui["parts"] if p["type"] not in SOURCES]
    ui["sources"] = sources
    return ui


def _recorded(rel: str) -> Message:
    return final_message(fold_bytes(read(rel)))


def _turn(message: Message) -> list[Message]:
    """A user's question, the recorded response, and, when it called tools, the app's
    results (one of them an error) and a closing answer."""
    history = [Message.user("What now?"), message]
    results = [
        ToolResult(
            tool_call_id=call.call_id or "", name=call.name, content=f"result {i}", is_error=i == 1
        )
        for i, call in enumerate(message.tool_calls)
    ]
    if results:
        history += [Message.tool(results), Message.assistant("All done.")]
    return history


# --- readUIMessageStream builds what dump writes ------------------------------------------


def test_dump_is_what_the_ai_reader_builds_from_the_stream() -> None:
    """Every recording, and a two-step loop with the app's tool results between: the
    UIMessage dump writes equals the one the package's reader builds from the live stream."""
    loop_first = fold_bytes(read("anthropic/thinking-then-tool-use.sse"))
    loop_second = fold_bytes(read("anthropic/text-basic.sse"))
    first = final_message(loop_first)
    results = [ToolResult(tool_call_id=c.call_id or "", name=c.name, content="18 C") for c in
               first.tool_calls]  # fmt: skip
    assert results, "the loop's first response calls a tool"
    streams = {rel: [fold_bytes(read(rel))] for rel in READY}
    streams["loop"] = [loop_first, results, loop_second]
    histories = {rel: [_recorded(rel)] for rel in READY}
    histories["loop"] = [first, Message.tool(results), final_message(loop_second)]

    bodies = {}
    for name, pieces in streams.items():
        items = [item for piece in pieces for item in piece]
        body = encode_sse(to_ui_message_stream(items, message_id=f"ui-{name}"))
        bodies[name] = b"".join(body).decode()
    built = _node("read-ui-stream.mjs", bodies)

    for name, history in histories.items():
        for message in history:
            message.metadata[UI_ID_KEY] = f"ui-{name}"
        (dumped,) = dump_ui_messages(history)
        assert built[name]["errors"] == [] or history[-1].status == "error", built[name]
        assert _comparable(dumped) == _comparable(built[name]["message"]), name

    loop = built["loop"]["message"]
    tools = [p for p in loop["parts"] if p["type"].startswith("tool-")]
    assert [(t["state"], t["output"]) for t in tools] == [("output-available", "18 C")]
    assert [p["type"] for p in loop["parts"]].count("step-start") == 2
    assert len(loop["metadata"]["steps"]) == 2


# --- validateUIMessages and convertToModelMessages -----------------------------------------


def _neutral_model(model: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """convertToModelMessages' output as (role, items), texts of a message joined. Tools
    the provider ran are left out: streamfold's history holds them as the provider's own
    blocks (see test_tools_the_provider_ran_are_its_tool_calls_and_results)."""
    out = []
    ran = {p["toolCallId"] for m in model for p in m["content"] if isinstance(p, dict)
           and p.get("providerExecuted")}  # fmt: skip
    for message in model:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        items: list[tuple[Any, ...]] = []
        for part in content:
            kind = part["type"]
            if part.get("toolCallId") in ran:
                continue
            if kind == "text":
                items.append(("text", part["text"]))
            elif kind == "reasoning":
                items.append(("thinking", part["text"]))
            elif kind == "file":
                items.append(("file", part["mediaType"], part["data"]))
            elif kind == "tool-call":
                items.append(("call", part["toolCallId"], part["toolName"], part["input"]))
            elif kind == "tool-result":
                output = part["output"]
                items.append(("result", part["toolCallId"], output["type"], output["value"]))
        out.append((message["role"], _join_texts(items)))
    return out


def _neutral_history(history: list[Message]) -> list[tuple[Any, ...]]:
    out = []
    for message in history:
        items: list[tuple[Any, ...]] = []
        for item in message.stream_order():
            if isinstance(item, ToolCall):
                items.append(("call", item.call_id, item.name, item.arguments))
            elif item.type in ("text", "thinking"):
                items.append((item.type, item.content or ""))
            elif item.type in ("image", "file"):
                data = f"data:{item.options['media']};base64,{item.content}"
                items.append(("file", item.options["media"], data))
            elif item.type in ("image_url", "file_url"):
                items.append(("file", item.options["media"], item.content))
            # unsupported: streamfold's own data part; the package leaves data parts to the app
        for result in message.tool_results:
            if result.is_error:
                items.append(("result", result.tool_call_id, "error-text", result.content))
            elif "output" in result.options:
                items.append(("result", result.tool_call_id, "json", result.options["output"]))
            else:
                items.append(("result", result.tool_call_id, "text", result.content))
        if message.role == "system":
            items = [("text", "".join(i[1] for i in items))]
        out.append((message.role, _join_texts(items)))
    return [m for m in out if m[1] or m[0] != "assistant"]


def _join_texts(items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    joined: list[tuple[Any, ...]] = []
    for item in items:
        if item[0] == "text" and joined and joined[-1][0] == "text":
            joined[-1] = ("text", joined[-1][1] + item[1])
        else:
            joined.append(item)
    return joined


def _by_hand() -> list[Message]:
    """What a chat holds besides responses: a system prompt, a user's files, an answer
    that asked for approval and was denied, a JSON tool output."""
    call = ToolCall(call_id="call-1", name="delete_file", arguments={"path": "/tmp/x"},
                    index=1, status="complete")  # fmt: skip
    lookup = ToolCall(call_id="call-2", name="lookup", arguments={"q": "x"}, index=2,
                      status="complete")  # fmt: skip
    return [
        Message.system("Be brief."),
        Message.user(
            [
                ContentPart.text("Look at these."),
                ContentPart.image("iVBORw0KGgo=", media="image/png"),
                ContentPart.file_url("https://example.com/a.pdf", media="application/pdf"),
            ]
        ),
        Message.assistant([ContentPart.narration("Deleting it.")], [call, lookup]),
        Message.tool(
            [
                ToolResult(
                    tool_call_id="call-1",
                    name="delete_file",
                    content="No thanks.",
                    is_error=True,
                    options={"approval": {"id": "ap-1", "approved": False, "reason": "No thanks."}},
                ),
                ToolResult(
                    tool_call_id="call-2",
                    name="lookup",
                    content='{"hits": 3}',
                    options={"output": {"hits": 3}},
                ),
            ]
        ),
        Message.assistant([ContentPart.answer("I did not delete it; 3 hits.")]),
    ]


def test_the_ai_package_accepts_every_dump_and_reads_the_same_history() -> None:
    histories = {rel: _turn(_recorded(rel)) for rel in READY}
    histories["by hand"] = _by_hand()
    dumps = {name: dump_ui_messages(history) for name, history in histories.items()}
    judged = _node("ui-messages.mjs", dumps)
    for name, ui in dumps.items():
        verdict = judged[name]
        assert verdict["valid"], (name, verdict["invalid"])
        assert verdict["convertError"] is None, (name, verdict["convertError"])
        loaded = load_ui_messages(json.dumps(ui))
        assert _neutral_model(verdict["model"]) == _neutral_history(loaded), name
    tool_message = judged["by hand"]["model"][3]
    assert tool_message["role"] == "tool"
    answers = {(p["type"], p.get("toolCallId", p.get("approvalId"))): p for p in
               tool_message["content"]}  # fmt: skip
    assert answers[("tool-approval-response", "ap-1")]["approved"] is False
    denied = answers[("tool-result", "call-1")]
    assert denied["output"] == {"type": "error-text", "value": "No thanks."}
    assert answers[("tool-result", "call-2")]["output"] == {"type": "json", "value": {"hits": 3}}


# --- back to any provider -------------------------------------------------------------------

# Recordings whose citations do not survive: a UI text part keeps where each cited piece
# stands and its sources, not the provider's citation objects (Anthropic's encrypted index,
# a Responses annotation's offsets), so the next request carries the text without them.
_CITED = {
    "anthropic/web-search-citations.sse",
    "anthropic/web-search-thinking-citations.sse",
    "openai-responses/web-search-annotations.sse",
    "openai-responses/file-search-annotations.sse",
}


@pytest.mark.parametrize("rel", READY)
def test_loaded_history_encodes_as_the_original(rel: str) -> None:
    """The request to the recording's own provider (thinking signatures, encrypted
    reasoning, tool calls and results, ids) and to the others is the same from the history
    read back from its UI messages as from the history itself."""
    history = _turn(_recorded(rel))
    back = load_ui_messages(json.dumps(dump_ui_messages(history)))
    # A response with nothing in it (a failed one) is no message in the browser's list,
    # nor in what the package sends on.
    source = origin(history[1])
    history = [m for m in history if m.role != "assistant" or m.content or m.tool_calls]
    targets = {"anthropic", "openai-chat", "openai-responses", "gemini"}
    if source in targets and rel not in _CITED:
        targets.add(source)
    elif source in targets:
        targets.discard(source)
    for target in sorted(targets):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = _encoded(history, target)
            got = _encoded(back, target)
        assert got == expected, (rel, target)


def _encoded(history: list[Message], target: str) -> Any:
    try:
        return encode(history, target)
    except Exception as exc:  # the same refusal either way
        return type(exc).__name__, str(exc)


def test_a_signature_and_a_tool_result_survive_the_browser() -> None:
    history = _turn(_recorded("anthropic/thinking-then-tool-use.sse"))
    back = load_ui_messages(json.dumps(dump_ui_messages(history)))
    request = encode(back, "anthropic")
    blocks = request["messages"][1]["content"]
    thinking = [b for b in blocks if b["type"] == "thinking"]
    assert thinking and thinking[0]["signature"] == history[1].content[0].options["signature"]
    results = request["messages"][2]["content"]
    assert [r["type"] for r in results] == ["tool_result"]
    assert results[0]["tool_use_id"] == history[1].tool_calls[0].call_id


def test_ids_and_steps_come_back() -> None:
    history = _by_hand()
    ui = dump_ui_messages(history)
    assert [m["role"] for m in ui] == ["system", "user", "assistant"]
    back = load_ui_messages(ui)
    assert [m.role for m in back] == ["system", "user", "assistant", "tool", "assistant"]
    again = dump_ui_messages(back)
    assert [m["id"] for m in again] == [m["id"] for m in ui]
    assert again == ui


# --- hostile input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ("{", "expected JSON text"),
        ({"id": "x"}, "expected a list"),
        ([{"id": 1, "role": "user", "parts": []}], "message 0"),
        ([{"id": "a", "role": "robot", "parts": []}], "role"),
        ([{"id": "a", "role": "user", "parts": [{"type": "text", "text": 3}]}], "part 0"),
        (
            [
                {
                    "id": "a",
                    "role": "assistant",
                    "parts": [{"type": "tool-x", "toolCallId": "c", "state": "done"}],
                }
            ],
            "state",
        ),
        (
            [
                {
                    "id": "a",
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "text": "hi", "providerMetadata": {"streamfold": [1]}}
                    ],
                }
            ],
            "providerMetadata.streamfold",
        ),
        (
            [
                {
                    "id": "a",
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "text",
                            "text": "hi",
                            "providerMetadata": {
                                "streamfold": {"citations": [{"start": 5, "end": 1}]}
                            },
                        }
                    ],
                }
            ],
            "citation ranges",
        ),
        ("[" * 5000 + "]" * 5000, "JSON"),
        (
            [
                {
                    "id": "a",
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool-web_search",
                            "toolCallId": "c",
                            "state": "output-available",
                            "input": {},
                            "output": {},
                            "providerExecuted": True,
                            "callProviderMetadata": {"streamfold": {"provider_block": {}}},
                            "resultProviderMetadata": {
                                "streamfold": {"provider_block": {}, "after": -1}
                            },
                        }
                    ],
                }
            ],
            "after to be a count of parts",
        ),
    ],
)
def test_bad_ui_messages_are_refused_with_a_reason(payload: Any, says: str) -> None:
    with pytest.raises(UIMessagesError, match=says) as info:
        load_ui_messages(payload if isinstance(payload, str) else json.dumps(payload))
    assert len(str(info.value)) < 2000


def test_the_size_of_ui_messages_is_not_trusted() -> None:
    text = json.dumps([{"id": "a", "role": "user", "parts": [{"type": "text", "text": "x" * 100}]}])
    with pytest.raises(UIMessagesError, match="at most 50 bytes"):
        load_ui_messages(text, max_bytes=50)
    assert load_ui_messages(text)[0].text == "x" * 100


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "role", "parts", "type", "text", "state", "toolCallId",
                         "input", "output", "providerMetadata", "streamfold", "metadata",
                         "steps", "approval", "url", "mediaType", "data", "provider_block",
                         "after"]), inner, max_size=5),
    max_leaves=30,
)  # fmt: skip
_PART_TYPES = ["text", "reasoning", "file", "step-start", "tool-x", "dynamic-tool",
               "source-url", "data-provider-block", "data-x"]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.fixed_dictionaries(
            {"id": st.text(max_size=3), "role": st.sampled_from(["user", "assistant", "system"]),
             "parts": st.lists(st.dictionaries(st.sampled_from(["type", "text", "toolCallId",
                 "state", "input", "output", "url", "mediaType", "data", "toolName",
                 "providerMetadata", "errorText", "providerExecuted", "callProviderMetadata",
                 "resultProviderMetadata"]), _JSON, max_size=6).map(
                 lambda d: d) | st.sampled_from(_PART_TYPES).map(lambda t: {"type": t}),
                 max_size=5)},
            optional={"metadata": _JSON},
        ),
        max_size=3,
    )
)  # fmt: skip
def test_anything_is_history_or_a_clear_refusal(value: list[dict[str, Any]]) -> None:
    try:
        history = load_ui_messages(value)
    except UIMessagesError:
        return
    assert all(isinstance(m, Message) for m in history)


# --- tools the provider ran ------------------------------------------------------------------

# Each recording's tools the provider ran, as convertToModelMessages gives them: the call
# (id, name, input) and its result's model output, read off the recordings by hand.
_RAN = {
    "anthropic/code-execution-bash-thinking.sse": [
        (
            "srvtoolu_01MwXaweAHve88x6s3Fc8x6Q",
            "bash_code_execution",
            {"command": 'echo "65465-6544 * 65464-6+1.02255" | bc -l'},
            {
                "type": "json",
                "value": {
                    "type": "bash_code_execution_result",
                    "stdout": "-428330955.97745\n",
                    "stderr": "",
                    "return_code": 0,
                    "content": [],
                },
            },
        )
    ],
    "anthropic/text-editor-code-execution.sse": [
        (
            "srvtoolu_01Xd8YZU6yAcvd5JbLCTRfFi",
            "text_editor_code_execution",
            {"command": "create", "path": "/tmp/hello.txt", "file_text": "Hello, world!"},
            {
                "type": "json",
                "value": {
                    "type": "text_editor_code_execution_create_result",
                    "is_file_update": False,
                },
            },
        ),
        (
            "srvtoolu_01F3VxYFjEyogm8Ynuc75zfs",
            "text_editor_code_execution",
            {"command": "view", "path": "/tmp/hello.txt"},
            {
                "type": "error-json",
                "value": "Tool response parsing error for view: Failed to parse tool response "
                "as JSON: unexpected character: line 1 column 1 (char 0)",
            },
        ),
        (
            "srvtoolu_01UZ1EtACaBJ87pPA9guaxHU",
            "text_editor_code_execution",
            {"command": "view", "path": "/tmp/hello.txt"},
            {
                "type": "json",
                "value": {
                    "type": "text_editor_code_execution_view_result",
                    "file_type": "text",
                    "content": "Hello, world!",
                    "num_lines": 1,
                    "start_line": 1,
                    "total_lines": 1,
                },
            },
        ),
    ],
    "gemini/code-execution.sse": [
        (
            "8xju7mua",
            "code_execution",
            {
                "language": "PYTHON",
                "code": "result = 65465 - 6544 * 65464 - 6 + 1.02255\nprint(result)",
            },
            {"type": "json", "value": {"outcome": "OUTCOME_OK", "output": "-428330955.97745\n"}},
        )
    ],
    "openai-responses/web-search-reasoning.sse": [
        (
            "ws_00a60507bf41223d0068c9d30021d081a0962d80d50c12e317",
            "web_search",
            {"type": "search", "query": "weather: San Francisco, CA"},
            {
                "type": "json",
                "value": {
                    "status": "completed",
                    "sources": [{"type": "api", "name": "oai-weather"}],
                },
            },
        )
    ],
}


def test_tools_the_provider_ran_are_its_tool_calls_and_results() -> None:
    """The package reads a tool the provider ran as a provider-executed tool call with
    its result in the assistant's own message, not a result the app must send."""
    dumps = {rel: dump_ui_messages(_turn(_recorded(rel))) for rel in _RAN}
    judged = _node("ui-messages.mjs", dumps)
    for rel, expected in _RAN.items():
        verdict = judged[rel]
        assert verdict["valid"], (rel, verdict["invalid"])
        model = verdict["model"]
        assert [m["role"] for m in model] == ["user", "assistant"], rel
        content = model[1]["content"]
        calls = [p for p in content if p["type"] == "tool-call"]
        assert [(c["toolCallId"], c["toolName"], c["input"], c["providerExecuted"])
                for c in calls] == [(i, n, a, True) for i, n, a, _ in expected]  # fmt: skip
        results = {p["toolCallId"]: p for p in content if p["type"] == "tool-result"}
        assert [results[i]["output"] for i, *_ in expected] == [o for *_, o in expected], rel
        # Each result right after its call when it came right after it.
        kinds = [(p["type"], p.get("toolCallId")) for p in content if "toolCallId" in p]
        if rel != "anthropic/text-editor-code-execution.sse":
            assert kinds == [(k, i) for i, *_ in expected for k in ("tool-call", "tool-result")]


def test_an_mcp_tool_the_provider_ran_is_a_dynamic_tool() -> None:
    """A tool of the provider's MCP server is none of the app's tools: a dynamic-tool part,
    named inside, its result the server's."""
    for rel, call_id, done in (
        ("anthropic/mcp-tool-use-thinking.sse", "mcptoolu_01FZmJ5UspaX5BB9uU339UT1", list),
        ("openai-responses/mcp-list-tools-and-call.sse",
         "mcp_00b9cc7a23d047270068faa0e67fb0819fa9e21302c398e9ac", dict),
    ):  # fmt: skip
        (_, ui) = dump_ui_messages(_turn(_recorded(rel)))
        (tool,) = [p for p in ui["parts"] if p["type"] == "dynamic-tool"]
        assert (tool["toolName"], tool["toolCallId"], tool["state"], tool["providerExecuted"]) == (
            "ask_question", call_id, "output-available", True,
        )  # fmt: skip
        assert tool["input"]["repoName"] == "pydantic/pydantic-ai"
        assert isinstance(tool["output"], done)


@pytest.mark.parametrize(
    "rel",
    [
        "anthropic/text-editor-code-execution.sse",  # two calls, then their two results
        "anthropic/web-search-pause-turn.sse",  # the last call has no result yet
        "gemini/code-execution.sse",
        "bedrock/server-tool-code-execution-nova2.ndjson",
        "openai-responses/mcp-list-tools-and-call.sse",  # a block that is no tool stays data
        "openai-responses/code-interpreter-reasoning.sse",
    ],
)
def test_the_provider_blocks_come_back_exactly(rel: str) -> None:
    """The blocks of the tools the provider ran come back from the browser's message as
    they were, each in its place."""
    message = _recorded(rel)
    (_, ui) = dump_ui_messages([Message.user("What now?"), message])
    assert any(p.get("providerExecuted") for p in ui["parts"]), rel
    (_, back) = load_ui_messages(json.dumps([{"id": "u", "role": "user", "parts": []}, ui]))
    assert back.stream_order() == message.stream_order()


@pytest.mark.parametrize("rel", sorted(_CITED))
def test_a_cited_answer_with_server_tools_goes_back_to_its_provider(rel: str) -> None:
    """A cited answer comes back without the provider's citation objects, but the rest of
    the request to its own provider (the searches it ran, their results, the text) is the
    one the history makes without them."""
    message = _recorded(rel)
    bare = message.model_copy(
        update={"content": [p.model_copy(update={"citations": []}) for p in message.content]}
    )
    history = [Message.user("What now?"), message]
    back = load_ui_messages(json.dumps(dump_ui_messages(history)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert encode(back, origin(message)) == encode([history[0], bare], origin(message))


def test_every_token_count_comes_back() -> None:
    """The usage `finish` sends is the one history read back holds, each count in place
    (the counts the UI sees and the ones read back share one table)."""
    usage = Usage(input_tokens=11, output_tokens=7, cache_read_tokens=5, cache_write_tokens=3,
                  reasoning_tokens=2)  # fmt: skip
    counts = set(Usage.model_fields) - {"raw", "cumulative"}
    assert {k for k, v in usage.model_dump().items() if v} == counts  # every count is set
    answer = Message.assistant("Done.").model_copy(update={"usage": usage})
    (_, ui) = dump_ui_messages([Message.user("Go."), answer])
    assert ui["metadata"]["usage"] == {"inputTokens": 11, "outputTokens": 7,
                                       "cacheReadTokens": 5, "cacheWriteTokens": 3,
                                       "reasoningTokens": 2, "totalTokens": 18}  # fmt: skip
    (_, back) = load_ui_messages(json.dumps([{"id": "u", "role": "user", "parts": []}, ui]))
    assert back.usage == usage


def test_tools_the_provider_ran_in_two_steps_come_back_in_each() -> None:
    """Two responses of one turn, each with tools the provider ran: one UI message of two
    steps, each step's blocks back in its own response."""
    first = _recorded("anthropic/web-search-pause-turn.sse")
    second = _recorded("anthropic/code-execution-bash-thinking.sse")
    (_, ui) = dump_ui_messages([Message.user("What now?"), first, second])
    assert [p["type"] for p in ui["parts"]].count("step-start") == 2
    ran = [p for p in ui["parts"] if p.get("providerExecuted")]
    assert len(ran) == 12  # eleven searches (the last unanswered), then the code it ran
    (_, *back) = load_ui_messages(json.dumps([{"id": "u", "role": "user", "parts": []}, ui]))
    assert [m.stream_order() for m in back] == [first.stream_order(), second.stream_order()]
