"""Values nested far past any sane depth at the doors that take a JSON value from a caller:
the models (`ContentPart`, `ToolCall`, `Message`, `MessageDelta`), `event_from_json`, and
the LangChain and pydantic-ai adapters.

Compiled, a recursive walk of a value 70,000 deep runs past the C stack and kills the
process (SIGSEGV); interpreted, it raises RecursionError from about 1,000 deep. Each door
is tried in a child process running the same build, so a crash is a failed test, not a
lost run: the child reports, per door, the class of what was raised.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import IMPORTED_FROM

from streamfold import ContentPart, Message, MessageDelta, OptionsError, StreamfoldError, ToolCall
from streamfold.construct import _check_json, _plain_json, check_json_object
from streamfold.limits import MAX_JSON_DEPTH

# Each door, given `deep` (a list nested DEPTH deep) where it keeps a JSON value.
_CHILD = """
import json, sys
import streamfold as sf
from streamfold import ContentPart, Message, MessageDelta, ToolCall, event_from_json

depth = int(sys.argv[1])
deep = 1
for _ in range(depth):
    deep = [deep]
part = {"type": "text", "content": "x", "options": {"a": deep}}


def langchain():
    from langchain_core.messages import AIMessage
    from streamfold.interop.langchain import from_ai_message

    call = {"name": "f", "args": {"a": deep}, "id": "c1"}
    return from_ai_message(AIMessage(content="", tool_calls=[call]))


def pydantic_ai():
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from streamfold.interop.pydantic_ai import from_model_response

    return from_model_response(ModelResponse(parts=[ToolCallPart(tool_name="f", args={"a": deep})]))


doors = {
    "ContentPart": lambda: ContentPart(**part),
    "ContentPart.model_validate": lambda: ContentPart.model_validate(part),
    "ToolCall": lambda: ToolCall(arguments={"a": deep}, status="complete"),
    "ToolCall.metadata": lambda: ToolCall(metadata={"a": deep}),
    "Message": lambda: Message(role="assistant", metadata={"a": deep}),
    "Message.content": lambda: Message(role="assistant", content=[part]),
    "MessageDelta": lambda: MessageDelta(metadata={"a": deep}),
    "MessageDelta.content": lambda: MessageDelta(content=[part]),
    "event_from_json.part_started": lambda: event_from_json(
        {"type": "part_started", "index": 0, "part_type": "text", "part": part}
    ),
    "event_from_json.part_delta": lambda: event_from_json(
        {"type": "part_delta", "index": 0, "part_type": "text", "options": {"a": deep}}
    ),
    "event_from_json.provider_errored": lambda: event_from_json(
        {
            "type": "provider_errored",
            "message": "m",
            "raw": {"a": deep},
            "partial": {"role": "assistant"},
        }
    ),
    "event_from_json.message_completed": lambda: event_from_json(
        {"type": "message_completed", "message": {"role": "assistant", "content": [part]}}
    ),
    "langchain.from_ai_message": langchain,
    "pydantic_ai.from_model_response": pydantic_ai,
}
for name, door in doors.items():
    try:
        door()
    except sf.StreamfoldError as exc:
        text = str(exc)
        print(json.dumps([name, "typed", type(exc).__name__, len(text)]), flush=True)
    except BaseException as exc:
        print(json.dumps([name, "untyped", type(exc).__name__, 0]), flush=True)
    else:
        print(json.dumps([name, "accepted", "", 0]), flush=True)
"""

DOORS = 14


def _run(depth: int) -> list[list[object]]:
    env = {**os.environ, "PYTHONPATH": IMPORTED_FROM}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(depth)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (
        f"the child died (exit {done.returncode}) after {done.stdout[-500:]!r}: "
        f"{done.stderr[-2000:]}"
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("depth", [70_000, 2_000, MAX_JSON_DEPTH])
def test_a_value_nested_past_the_bound_is_a_typed_error_at_every_door(depth: int) -> None:
    results = _run(depth)
    assert len(results) == DOORS
    for name, verdict, error, length in results:
        assert verdict == "typed", f"{name}: {verdict} {error}"
        assert isinstance(length, int) and length < 2_000, f"{name}: an error text of {length}"


def test_a_value_within_the_bound_is_accepted_at_every_door() -> None:
    """Not vacuous: the same doors accept the same value less deep, so what they refuse
    above is its depth (counted from the field: the options or metadata dict is level 1).
    The adapters hold the SDKs' objects to a lower bound of their own (a typed error)."""
    assert [name for name, verdict, _, _ in _run(100) if verdict != "accepted"] == []
    for name, verdict, error, _ in _run(MAX_JSON_DEPTH - 1):
        if name.startswith(("langchain.", "pydantic_ai.")):
            assert verdict in ("accepted", "typed"), f"{name}: {verdict} {error}"
        else:
            assert verdict == "accepted", f"{name}: {verdict} {error}"


def test_the_bound_is_where_the_checks_say() -> None:
    deepest: object = 1
    for _ in range(MAX_JSON_DEPTH - 1):
        deepest = [deepest]
    assert check_json_object({"a": deepest}) == {"a": deepest}  # the dict is the first level
    assert _plain_json({"a": deepest})
    with pytest.raises(OptionsError, match=f"at most {MAX_JSON_DEPTH} levels deep"):
        check_json_object({"a": [deepest]})
    assert not _plain_json({"a": [deepest]})
    with pytest.raises(OptionsError, match="levels deep"):
        _check_json({"a": [deepest]}, "v")


def test_the_first_problem_in_document_order_is_the_one_named() -> None:
    """The iterative walk names what the recursive one named: the first bad member."""
    value = {"a": [1, {"b": float("nan")}], "c": object(), "d": {1: 2}}
    with pytest.raises(OptionsError, match=r"^options\['a'\]\[1\]\['b'\]: .*nan"):
        check_json_object(value)
    del value["a"]
    with pytest.raises(OptionsError, match=r"^options\['c'\]: .*got object"):
        check_json_object(value)
    del value["c"]
    with pytest.raises(OptionsError, match=r"^options\['d'\]: expected str keys, got key 1"):
        check_json_object(value)


def test_a_huge_key_or_value_gives_a_bounded_error() -> None:
    big = "k" * 10_000_000
    for value in ({big: [float("inf")]}, {"a": {5: big}}, {"a": bytes(10_000_000)}):
        with pytest.raises(OptionsError) as raised:
            check_json_object(value)
        assert len(str(raised.value)) < 1_000
    with pytest.raises(StreamfoldError) as raised_model:
        ContentPart(type="text", content=[big])
    assert len(str(raised_model.value)) < 1_000
    for build in (
        lambda: ToolCall(arguments=[big]),
        lambda: Message(content=big),
        lambda: MessageDelta(status=big),
    ):
        with pytest.raises(StreamfoldError) as raised_model:
            build()
        assert len(str(raised_model.value)) < 1_000
