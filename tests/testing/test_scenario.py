"""Scenario files (TOML and JSON, checked by a closed model), what a turn matches on as
read from each API's requests sent by the official SDKs, and the order turns answer in."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import REAL

from streamfold import fold_message
from streamfold.errors import StreamfoldError, UsageError
from streamfold.testing import (
    Faults,
    Match,
    MessageAnswer,
    NoTurnMatched,
    ReplayTransport,
    Scenario,
    ScenarioError,
    Turn,
    read_request,
)
from streamfold.testing.scenario import ToolCallAnswer

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")
genai = pytest.importorskip("google.genai")

SCENARIO = """
# The app asks, the model calls a tool, the app answers with its result.
[[turns]]
name = "calls get_capital"
match = { api = "chat", user_regex = "capital of the (UK|United Kingdom)", tool_result = false }
recording = "recordings/tool.sse"

[[turns]]
name = "answers"
match = { tool_result = "get_capital", tools = ["get_capital"] }
message = { text = "London." }

[[turns]]
match = { user = "busy" }
times = 1
faults = { status = 429, retry_after = 0 }

[[turns]]
match = { user = "busy" }
message = { role = "assistant", content = [{ type = "text", content = "Now free." }] }
"""


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    (tmp_path / "recordings").mkdir()
    source = REAL / "openai-chat" / "tool-call-single-mini.sse"
    (tmp_path / "recordings" / "tool.sse").write_bytes(source.read_bytes())
    path = tmp_path / "app.toml"
    path.write_text(SCENARIO)
    return path


def _openai(transport: Any, retries: int = 0) -> Any:
    return openai.OpenAI(
        api_key="t",
        base_url="http://r/v1",
        http_client=httpx.Client(transport=transport),
        max_retries=retries,
    )


TOOLS = [{"type": "function", "function": {"name": "get_capital", "parameters": {}}}]


def test_a_toml_scenario_answers_a_tool_loop_and_a_retry(scenario_file: Path) -> None:
    scenario = Scenario.load(scenario_file)
    assert scenario.path == scenario_file
    assert [turn.name for turn in scenario.turns] == ["calls get_capital", "answers", None, None]
    client = _openai(ReplayTransport(scenario, speed=0), retries=1)
    question = [{"role": "user", "content": "The capital of the United Kingdom?"}]
    first = client.chat.completions.create(model="m", messages=question, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_capital"
    follow_up = [
        *question,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "London"},
    ]
    second = client.chat.completions.create(model="m", messages=follow_up, tools=TOOLS)
    assert second.choices[0].message.content == "London."
    busy = client.chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "are you busy?"}]
    )
    assert busy.retries_taken == 1
    assert busy.parse().choices[0].message.content == "Now free."
    assert scenario.used == [1, 1, 1, 1]
    assert scenario.unused() == []
    # What the app sent, as the turns read it: the follow-up carried the tool's result.
    assert [r.index for r in scenario.seen] == [0, 1, 2, 3]
    assert scenario.seen[1].tool_results[0].call_id == call.id
    assert scenario.seen[1].tool_results[0].name == "get_capital"
    assert scenario.seen[1].body["messages"][-1]["content"] == "London"
    assert scenario.seen[2].last_user == scenario.seen[3].last_user == "are you busy?"


def test_a_json_scenario_is_the_same_shape(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"turns": [{"match": {"user": "hi"}, "message": {"text": "yo"}}]}))
    scenario = Scenario.load(path)
    assert scenario.turns == [Turn(match=Match(user="hi"), message=MessageAnswer(text="yo"))]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[turns]]\nrecordng = 'a.sse'", "turns.0.recordng: Extra inputs are not permitted"),
        ("[[turns]]\nmatch = { user_regex = '(' }", "turns.0.match.user_regex"),
        ("[[turns]]\nmatch = { api = 'chats' }\nrecording = 'a'", "turns.0.match.api"),
        ("[[turns]]\nrecording = 'a'\nmessage = { text = 'b' }", "got both"),
        ("[[turns]]\nmatch = { user = 'x' }", "expected a recording, a message or faults"),
        ("[[turns]]\nfaults = { status = 200 }", "turns.0.faults.status"),
        ("[[turns]\n", "expected TOML"),
        ("turns = 3", "turns: Input should be a valid list"),
    ],
)
def test_a_bad_scenario_file_names_the_file_and_the_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        Scenario.load(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert expected in str(caught.value)
    assert isinstance(caught.value, UsageError) and isinstance(caught.value, StreamfoldError)


def test_a_missing_scenario_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="expected a scenario file"):
        Scenario.load(tmp_path / "absent.toml")


def test_faults_parse_a_header_value() -> None:
    assert Faults.parse("status=429, retry_after=0.5") == Faults(status=429, retry_after=0.5)
    assert Faults.parse("cut_after_events=3;cut=end") == Faults(cut_after_events=3, cut="end")
    with pytest.raises(ScenarioError, match="a name among status"):
        Faults.parse("statu=429")
    with pytest.raises(ScenarioError, match="status"):
        Faults.parse("status=99")


def test_a_turns_times_and_index_and_the_miss_after_them() -> None:
    scenario = Scenario(
        [
            Turn(match=Match(index=0), message=MessageAnswer(text="first")),
            Turn(times=1, message=MessageAnswer(text="second")),
        ]
    )
    client = _openai(ReplayTransport(scenario, speed=0))
    ask = [{"role": "user", "content": "hi"}]
    texts = [client.chat.completions.create(model="m", messages=ask) for _ in range(2)]
    assert [t.choices[0].message.content for t in texts] == ["first", "second"]
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="m", messages=ask)
    assert "turn 0: index: expected 0, got 2" in str(caught.value)
    assert "turn 1: times: answered its 1 request(s) already" in str(caught.value)
    scenario.reset()
    assert client.chat.completions.create(model="m", messages=ask).choices[0].message.content == (
        "first"
    )


def test_a_miss_message_is_bounded_for_a_huge_prompt() -> None:
    scenario = Scenario([Turn(match=Match(user="x" * 10), message=MessageAnswer(text="y"))])
    transport = ReplayTransport(scenario, speed=0, on_miss="raise")
    huge = "é" * 200_000
    with httpx.Client(transport=transport) as client, pytest.raises(NoTurnMatched) as caught:
        client.post(
            "http://r/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": huge}]},
        )
    assert len(str(caught.value)) < 1000


# --- what a turn matches on, in each API's requests as the SDKs send them ---------------


class _Capture:
    """Records each request body the SDK sends, then answers from the scenario."""

    def __init__(self, scenario: Scenario) -> None:
        self.inner = ReplayTransport(scenario, speed=0)
        self.bodies: list[dict[str, Any]] = []

    def handle_request(self, request: Any) -> Any:
        self.bodies.append(json.loads(request.read()))
        return self.inner.handle_request(request)


def test_responses_tool_loop_matches_on_the_function_call_output() -> None:
    scenario = Scenario(
        [
            Turn(match=Match(tool_result=False), recording="openai-responses/function-call.sse"),
            Turn(match=Match(tool_result="get_capital"), message=MessageAnswer(text="Paris.")),
        ],
        root=REAL,
    )
    client = _openai(ReplayTransport(scenario, speed=0))
    tools = [{"type": "function", "name": "get_capital", "parameters": {}, "strict": False}]
    first = client.responses.create(model="m", input="Capital of France?", tools=tools)
    call = next(item for item in first.output if item.type == "function_call")
    second = client.responses.create(
        model="m",
        tools=tools,
        input=[
            {"role": "user", "content": "Capital of France?"},
            call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "Paris"},
        ],
    )
    assert second.output_text == "Paris."
    assert scenario.used == [1, 1]


def test_anthropic_tool_loop_reads_the_tool_result_and_its_tools() -> None:
    scenario = Scenario(
        [
            Turn(
                match=Match(tool_result=False, tools=["fixed_version"]),
                recording="anthropic/thinking-then-tool-use.sse",
            ),
            Turn(match=Match(tool_result="fixed_version"), message=MessageAnswer(text="1.2.3")),
        ],
        root=REAL,
    )
    capture = _Capture(scenario)
    client = anthropic.Anthropic(
        api_key="t", base_url="http://r", http_client=httpx2.Client(transport=capture)
    )
    tools = [{"name": "fixed_version", "input_schema": {"type": "object"}}]
    ask = [{"role": "user", "content": "Which version fixed it?"}]
    with client.messages.stream(model="c", max_tokens=99, messages=ask, tools=tools) as s:
        first = s.get_final_message()
    use = next(block for block in first.content if block.type == "tool_use")
    follow = [
        *ask,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "1"}],
        },
    ]
    second = client.messages.create(model="c", max_tokens=99, messages=follow, tools=tools)
    assert second.content[0].text == "1.2.3"
    read = read_request("messages", capture.bodies[1])
    assert read.last_user == "Which version fixed it?"
    assert [(r.call_id, r.name) for r in read.tool_results] == [(use.id, "fixed_version")]
    assert read.tools == ("fixed_version",)


def test_gemini_tool_loop_reads_the_function_response() -> None:
    from google.genai import types

    scenario = Scenario(
        [
            Turn(
                match=Match(api="gemini", tool_result=False),
                recording="gemini/function-call-thought-signature.sse",
            ),
            Turn(match=Match(tool_result="get_country"), message=MessageAnswer(text="France.")),
        ],
        root=REAL,
    )
    capture = _Capture(scenario)
    client = genai.Client(
        api_key="t",
        http_options=types.HttpOptions(
            base_url="http://r", httpx_client=httpx2.Client(transport=capture)
        ),
    )
    tool = types.Tool(function_declarations=[types.FunctionDeclaration(name="get_country")])
    config = types.GenerateContentConfig(
        tools=[tool], automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)
    )
    ask = types.Content(role="user", parts=[types.Part(text="Where is Paris?")])
    first = client.models.generate_content(model="g", contents=[ask], config=config)
    call_part = first.candidates[0].content.parts[-1]
    assert call_part.function_call.name == "get_country"
    answer = types.Part.from_function_response(name="get_country", response={"r": "France"})
    second = client.models.generate_content(
        model="g",
        contents=[ask, first.candidates[0].content, types.Content(role="user", parts=[answer])],
        config=config,
    )
    assert second.text == "France."
    read = read_request("gemini", capture.bodies[1], model="g")
    assert read.last_user == "Where is Paris?"
    assert [r.name for r in read.tool_results] == ["get_country"]
    assert read.tools == ("get_country",)


def test_chat_read_request_names_the_results_calls() -> None:
    body = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "1"},
            {"role": "tool", "tool_call_id": "c2", "content": "2"},
        ],
        "tools": TOOLS,
    }
    read = read_request("chat", body)
    assert read.model == "m" and read.last_user == "a\nb"
    assert [(r.call_id, r.name) for r in read.tool_results] == [("c1", "f"), ("c2", "g")]
    assert read.tools == ("get_capital",)
    later = {**body, "messages": [*body["messages"], {"role": "user", "content": "c"}]}
    assert read_request("chat", later).tool_results == ()  # answered already: a new question


def test_a_recording_of_another_api_is_a_500_naming_the_turn() -> None:
    scenario = Scenario([Turn(recording="anthropic/text-basic.sse")], root=REAL, name="s.toml")
    client = _openai(ReplayTransport(scenario, speed=0))
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert re.search(
        r"s\.toml: 'anthropic/text-basic\.sse' holds anthropic events; a request to 'chat'",
        str(caught.value),
    )
    assert fold_message((REAL / "anthropic/text-basic.sse").read_bytes(), "anthropic").text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_scenario_message_calls_a_tool_on_every_api_shape(stream: bool) -> None:
    answer = MessageAnswer(
        text="Let me look.",
        tool_calls=[ToolCallAnswer(name="get_capital", arguments={"country": "UK"}, id="c9")],
    )
    scenario = Scenario([Turn(message=answer)])
    client = _openai(ReplayTransport(scenario, speed=0))
    ask = [{"role": "user", "content": "UK?"}]
    if stream:
        chunks = client.chat.completions.create(model="m", messages=ask, tools=TOOLS, stream=True)
        data = b"".join(f"data: {c.model_dump_json()}\n\n".encode() for c in chunks)
        message = fold_message(data, "openai-chat")
        text, call = message.text, message.tool_calls[0]
        got = (call.call_id, call.name, call.arguments, message.stop_reason)
    else:
        whole = client.chat.completions.create(model="m", messages=ask, tools=TOOLS)
        choice = whole.choices[0]
        tc = choice.message.tool_calls[0]
        text = choice.message.content
        got = (tc.id, tc.function.name, json.loads(tc.function.arguments), choice.finish_reason)
    assert text == "Let me look."
    assert got[:3] == ("c9", "get_capital", {"country": "UK"})
    assert got[3] in ("tool_use", "tool_calls")


def test_a_message_answers_stop_reason_is_checked() -> None:
    with pytest.raises(ScenarioError, match="stop_reason"):
        MessageAnswer(text="x", stop_reason="finished")  # type: ignore[arg-type]
    with pytest.raises(ScenarioError, match=r"tool_calls\.0\.name"):
        MessageAnswer.model_validate({"tool_calls": [{"arguments": {}}]})


def test_threads_sharing_a_transport_draw_each_turn_its_times() -> None:
    from concurrent.futures import ThreadPoolExecutor

    scenario = Scenario(
        [Turn(times=5, message=MessageAnswer(text=str(n))) for n in range(4)],
        name="pool",
    )
    client = _openai(ReplayTransport(scenario, speed=0))
    ask = [{"role": "user", "content": "n?"}]

    def one(_: int) -> str:
        return client.chat.completions.create(model="m", messages=ask).choices[0].message.content

    with ThreadPoolExecutor(8) as pool:
        answers = sorted(pool.map(one, range(20)))
    assert answers == sorted(str(n) for n in range(4) for _ in range(5))
    assert scenario.used == [5, 5, 5, 5] and scenario.requests == 20


def test_a_missing_recording_fails_at_once_naming_the_scenario_and_file(tmp_path: Path) -> None:
    scenario = Scenario([Turn(recording="gone.sse")], root=tmp_path, name="app.toml")
    client = _openai(ReplayTransport(scenario, speed=0), retries=2)
    started = time.monotonic()
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert time.monotonic() - started < 2  # not retried
    assert "app.toml: recording 'gone.sse'" in str(caught.value)
    assert scenario.requests == 1
