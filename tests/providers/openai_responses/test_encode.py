"""OpenAI Responses encoder: reasoning items, phase, call items, outputs, params."""

from __future__ import annotations

import warnings

import pytest
from encode_support import validate
from openai.types.responses import FunctionToolParam, ResponseInputItemParam

from streamfold import ContentPart, Message, ToolCall, ToolResult
from streamfold.encoding import ReplayWarning, check_replayable, encode


def responses(messages: object, **params: object) -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayWarning)
        return encode(messages, "openai-responses", **params)


def turn() -> Message:
    return Message(
        role="assistant",
        content=[
            ContentPart.thinking("first", id="rs_1", type="summary_text"),
            ContentPart.thinking("second", id="rs_1", type="summary_text", encrypted_content="gA"),
            ContentPart.narration("Checking.", id="msg_1"),
            ContentPart.answer("Done.", id="msg_2"),
        ],
        tool_calls=[
            ToolCall(
                call_id="call_1",
                name="f",
                arguments={"a": 1},
                index=3,
                metadata={"item_id": "fc_1"},
            )
        ],
        metadata={"provider": "openai-responses"},
    )


def test_items_in_stream_order_with_ids_encrypted_content_and_phase() -> None:
    items = responses([turn()])["input"]
    assert items == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "first"},
                {"type": "summary_text", "text": "second"},
            ],
            "encrypted_content": "gA",
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            "phase": "commentary",
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"a": 1}',
            "id": "fc_1",
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_2",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
            "phase": "final_answer",
        },
    ]
    for item in items:  # type: ignore[attr-defined]
        validate(ResponseInputItemParam, item)


def test_raw_reasoning_text_and_empty_reasoning_placeholder() -> None:
    message = Message.assistant(
        [
            ContentPart.thinking("raw", id="rs_1", type="reasoning_text"),
            ContentPart.thinking("", id="rs_2", type="reasoning", encrypted_content="gB"),
        ]
    )
    items = responses([message])["input"]
    assert items == [
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": [
            {"type": "reasoning_text", "text": "raw"}
        ]},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gB"},
    ]  # fmt: skip
    for item in items:  # type: ignore[attr-defined]
        validate(ResponseInputItemParam, item)


def test_text_without_item_id_goes_as_an_easy_message_with_its_phase() -> None:
    items = responses([Message.assistant([ContentPart.narration("one moment")])])["input"]
    assert items == [
        {"type": "message", "role": "assistant", "content": "one moment", "phase": "commentary"}
    ]
    validate(ResponseInputItemParam, items[0])  # type: ignore[index]


def test_thinking_without_item_id_is_left_out() -> None:
    message = Message.assistant([ContentPart.thinking("t"), ContentPart.text("a")])
    assert [p.code for p in check_replayable(message, "openai-responses")] == [
        "reasoning_without_id"
    ]
    with pytest.warns(ReplayWarning, match="reasoning_without_id"):
        items = encode([message], "openai-responses")["input"]
    assert items == [{"type": "message", "role": "assistant", "content": "a"}]


def test_function_call_output_and_custom_tool_call_output() -> None:
    custom = ToolCall(
        call_id="c2",
        name="sql",
        arguments={"input": "SELECT 1"},
        status="complete",
        metadata={"type": "custom_tool_call", "item_id": "ctc_1"},
    )
    history = [
        "q",
        Message.assistant("", [ToolCall(call_id="c1", name="f", arguments={}), custom]),
        Message.tool(
            [
                ToolResult(tool_call_id="c1", content="42"),
                ToolResult(tool_call_id="c2", content=[ContentPart.text("1 row")]),
            ]
        ),
    ]
    items = responses(history)["input"]
    assert items == [
        {"role": "user", "content": "q"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {
            "type": "custom_tool_call",
            "call_id": "c2",
            "name": "sql",
            "input": "SELECT 1",
            "id": "ctc_1",
        },
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {
            "type": "custom_tool_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "1 row"}],
        },
    ]
    for item in items:  # type: ignore[attr-defined]
        validate(ResponseInputItemParam, item)


def test_built_in_items_go_back_whole() -> None:
    block = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    part = ContentPart(
        type="unsupported", options={"type": "web_search_call", "id": "ws_1", "block": block}
    )
    items = responses([Message.assistant([part])])["input"]
    assert items == [block]


def test_user_parts_and_params() -> None:
    message = Message.user(
        [
            ContentPart.text("look"),
            ContentPart.image("iVBOR", media="image/png"),
            ContentPart.file_url("https://x/a.pdf"),
        ]
    )
    body = responses(
        [Message.system("sys"), message],
        instructions=["a", "b"],
        model="gpt-5",
        tools=[{"name": "f", "parameters": {"type": "object"}, "strict": False}],
        tool_choice={"name": "f"},
        response_format={"type": "json_schema", "name": "r", "schema": {}, "strict": False},
        text={"verbosity": "low"},
    )
    assert body["instructions"] == "a\n\nb"
    assert body["input"] == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBOR",
                    "detail": "auto",
                },
                {"type": "input_file", "file_url": "https://x/a.pdf"},
            ],
        },
    ]
    assert body["tools"] == [
        {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False}
    ]
    validate(FunctionToolParam, body["tools"][0])  # type: ignore[index]
    assert body["tool_choice"] == {"type": "function", "name": "f"}
    assert body["text"] == {
        "verbosity": "low",
        "format": {"type": "json_schema", "name": "r", "schema": {}, "strict": False},
    }
    for item in body["input"]:  # type: ignore[attr-defined]
        validate(ResponseInputItemParam, item)


# --- tools the caller runs: the call item back, its result as the matching *_output ---------


def _client_turn(kind: str, arguments: dict[str, object]) -> Message:
    call = ToolCall(
        call_id="call_9",
        name=kind.removesuffix("_call"),
        arguments=arguments,
        index=0,
        status="complete",
        metadata={"item_id": "it_9", "type": kind, "item_fields": {"status": "completed"}},
    )
    return Message(role="assistant", tool_calls=[call], metadata={"provider": "openai-responses"})


SCREENSHOT = ContentPart.image("iVBORw0KGgo=", media="image/png")


@pytest.mark.parametrize(
    ("kind", "arguments", "result", "output"),
    [
        (
            "computer_call",
            {"action": {"type": "screenshot"}, "pending_safety_checks": []},
            ToolResult(tool_call_id="call_9", content=[SCREENSHOT]),
            {
                "type": "computer_call_output",
                "call_id": "call_9",
                "output": {
                    "type": "computer_screenshot",
                    "image_url": "data:image/png;base64,iVBORw0KGgo=",
                },
            },
        ),
        (
            "local_shell_call",
            {"action": {"type": "exec", "command": ["ls"], "env": {}}},
            ToolResult(tool_call_id="call_9", content="a.py\n"),
            {"type": "local_shell_call_output", "id": "call_9", "output": "a.py\n"},
        ),
        (
            "shell_call",
            {"action": {"commands": ["ls"]}},
            ToolResult(tool_call_id="call_9", content="a.py\n"),
            {
                "type": "shell_call_output",
                "call_id": "call_9",
                "output": [
                    {"stdout": "a.py\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
                ],
            },
        ),
        (
            "apply_patch_call",
            {"operation": {"type": "delete_file", "path": "a.py"}},
            ToolResult(tool_call_id="call_9", content="no such file", is_error=True),
            {
                "type": "apply_patch_call_output",
                "call_id": "call_9",
                "status": "failed",
                "output": "no such file",
            },
        ),
    ],
)
def test_client_run_calls_go_back_with_their_outputs(
    kind: str, arguments: dict[str, object], result: ToolResult, output: dict[str, object]
) -> None:
    history = [Message.user("go"), _client_turn(kind, arguments), Message.tool([result])]
    assert check_replayable(history, "openai-responses") == []
    body = responses(history)
    call_item, output_item = body["input"][1:]  # type: ignore[index]
    assert call_item == {
        "type": kind,
        "call_id": "call_9",
        "status": "completed",
        **arguments,
        "id": "it_9",
    }
    assert output_item == output
    validate(ResponseInputItemParam, call_item)
    validate(ResponseInputItemParam, output_item)


def test_a_recorded_client_call_goes_back_as_it_came() -> None:
    from providers.openai_responses.test_decode import (
        CLIENT_ITEMS,
        _client_item,
        _completed,
        _created,
    )
    from streamfold import fold_message

    item = CLIENT_ITEMS["computer_call"]
    message = fold_message([_created(), *_client_item("computer_call", **item), _completed()])
    body = responses([Message.user("go"), message])
    assert body["input"][1] == {  # type: ignore[index]
        "type": "computer_call",
        "call_id": "call_computer_call",
        "status": "completed",
        **item,
        "id": "it_computer_call",
    }


def test_a_computer_result_needs_a_screenshot() -> None:
    history = [
        Message.user("go"),
        _client_turn("computer_call", {"action": {"type": "screenshot"}}),
        Message.tool([ToolResult(tool_call_id="call_9", content="done")]),
    ]
    (problem,) = check_replayable(history, "openai-responses")
    assert problem.code == "computer_output_without_screenshot" and problem.message_index == 2


# --- MCP approval: a pause the caller answers ---------------------------------------------

_APPROVAL = "openai-responses/mcp-approval-request.sse"
_REQUEST_ID = "mcpr_00b9cc7a23d047270068faa0e67fb0819fa9e21302c398e9ac"


@pytest.mark.parametrize(("approve", "reason"), [(True, ""), (False, "not that repository")])
def test_an_approval_request_is_answered_with_an_approval_response(
    approve: bool, reason: str
) -> None:
    from support import read

    from streamfold import fold_message

    turn = fold_message([read(_APPROVAL)])
    answer = ToolResult(tool_call_id=_REQUEST_ID, content=reason, options={"approve": approve})
    assert (
        check_replayable([Message.user("?"), turn, Message.tool([answer])], "openai-responses")
        == []
    )
    body = responses([Message.user("?"), turn, Message.tool([answer])])
    items = body["input"]
    assert isinstance(items, list)
    # The request goes back as it came, then its answer in the SDK's McpApprovalResponse shape.
    assert items[-2]["type"] == "mcp_approval_request" and items[-2]["id"] == _REQUEST_ID
    expected = {
        "type": "mcp_approval_response",
        "approval_request_id": _REQUEST_ID,
        "approve": approve,
    }
    if reason:
        expected["reason"] = reason
    assert items[-1] == expected
    for item in items:
        validate(ResponseInputItemParam, item)
    # `streamfold serve` takes it as the API would.
    from streamfold.web.api_requests import check_request

    check_request("responses", {**body, "model": "o4-mini"})


def test_an_approval_answer_must_say_approve_or_not() -> None:
    from support import read

    from streamfold import fold_message

    turn = fold_message([read(_APPROVAL)])
    unsure = Message.tool([ToolResult(tool_call_id=_REQUEST_ID, content="ok")])
    (problem,) = check_replayable([Message.user("?"), turn, unsure], "openai-responses")
    assert problem.code == "approval_without_decision" and problem.message_index == 2
    assert 'options["approve"] True or False, got null' in problem.reason
