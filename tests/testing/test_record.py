"""Record on miss: requests forwarded to a real `streamfold serve` by the official SDKs'
clients, their answers kept as recordings with timing, and no secret in any byte written.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import serve_in_thread
from support import REAL

from streamfold import UsageError, fold_message, load_recording
from streamfold.record import load_timing
from streamfold.testing import AsyncReplayTransport, ReplayTransport, Scenario
from streamfold.testing.record import RecordedTurn, Recorder, match_of, read_api_request

pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")
from streamfold.serve import create_app  # noqa: E402

CHAT = REAL / "openai-chat" / "tool-call-single-mini.sse"
MESSAGES = REAL / "anthropic" / "text-basic.sse"
# The timing the upstream paces the chat recording by: the first chunk after 0.3 s, then
# one every 0.01 s (written below): what the recorded arrival times must show again.
FIRST_BYTE_S = 0.3
GAP_S = 0.01


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real serve whose chat recording has timing, paced at speed 1."""
    directory = tmp_path_factory.mktemp("upstream")
    (directory / "chat").mkdir()
    (directory / "messages").mkdir()
    shutil.copy(CHAT, directory / "chat" / CHAT.name)
    shutil.copy(MESSAGES, directory / "messages" / MESSAGES.name)
    data = CHAT.read_bytes()
    cuts = [i + 2 for i in range(len(data)) if data[i : i + 2] == b"\n\n"]
    marks = [[cut, round(FIRST_BYTE_S + n * GAP_S, 6)] for n, cut in enumerate(cuts)]
    assert marks[-1][0] == len(data)
    (directory / "chat" / (CHAT.name + ".timing.json")).write_text(
        json.dumps({"version": 1, "chunks": marks})
    )
    with serve_in_thread(create_app(directory, speed=1)) as url:
        yield url


def _written(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def test_a_streamed_answer_reaches_the_caller_as_it_arrives_and_is_recorded(
    upstream: str, tmp_path: Path
) -> None:
    turns: list[RecordedTurn] = []
    recorder = Recorder(httpx.HTTPTransport(), tmp_path, on_turn=turns.append)
    client = openai.OpenAI(
        api_key="test", base_url=upstream + "/v1", http_client=httpx.Client(transport=recorder)
    )
    with client:
        _ask_and_read(client, turns, tmp_path)


def _ask_and_read(client: Any, turns: list[RecordedTurn], tmp_path: Path) -> None:
    sent = time.monotonic()
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
        stream=True,
    )
    chunks = iter(stream)
    next(chunks)
    first = time.monotonic() - sent
    # The caller reads the first chunk while the rest is still on its way: nothing written.
    assert _written(tmp_path) == {}
    for _ in chunks:
        pass
    total = time.monotonic() - sent
    data = CHAT.read_bytes()
    events = data.count(b"\n\n")
    assert first >= FIRST_BYTE_S
    assert total >= FIRST_BYTE_S + (events - 1) * GAP_S

    [turn] = turns
    assert turn.file.name == "001-chat.sse"
    assert turn.file.read_bytes() == data  # the upstream's bytes, as they came
    assert turn.match == {
        "api": "chat",
        "model": "gpt-4o-mini",
        "user": "Weather in Paris?",
        "tool_result": False,
        "tools": ["get_weather"],
    }
    # The arrival times: the first chunk after the upstream's 0.3 s, the last after all of
    # its gaps; the offsets cover the file.
    timing = load_timing(turn.file)
    assert timing is not None
    assert timing[-1][0] == len(data)
    assert FIRST_BYTE_S <= timing[0][1] < first + 0.05
    assert timing[-1][1] >= FIRST_BYTE_S + (events - 1) * GAP_S
    assert [s for _, s in timing] == sorted(s for _, s in timing)
    # It is a recording streamfold reads, folding to the upstream's Message.
    assert fold_message(load_recording(turn.file)) == fold_message(load_recording(CHAT))


def test_a_plain_request_is_recorded_as_a_stream_and_answered_folded(
    upstream: str, tmp_path: Path
) -> None:
    recorder = Recorder(httpx.HTTPTransport(), tmp_path)
    client = openai.OpenAI(
        api_key="test", base_url=upstream + "/v1", http_client=httpx.Client(transport=recorder)
    )
    with client:
        completion = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather?"}]
        )
    [turn] = recorder.turns
    # The upstream was asked for its stream: the recording is that stream, timed.
    assert turn.file.name == "001-chat.sse"
    assert turn.file.read_bytes() == CHAT.read_bytes()
    assert load_timing(turn.file) is not None
    # The caller got the plain answer: the stream folded, as a replay answers it.
    expected = fold_message(load_recording(CHAT))
    [call] = completion.choices[0].message.tool_calls or []
    assert call.function.name == expected.tool_calls[0].name
    assert json.loads(call.function.arguments) == expected.tool_calls[0].arguments
    assert completion.usage is not None
    assert completion.usage.completion_tokens == expected.usage.output_tokens


async def test_an_async_httpx2_client_records_through_an_async_upstream(
    upstream: str, tmp_path: Path
) -> None:
    recorder = Recorder(httpx2.AsyncHTTPTransport(), tmp_path)
    async with httpx2.AsyncClient(transport=recorder) as http:
        client = anthropic.AsyncAnthropic(api_key="test", base_url=upstream, http_client=http)
        async with client.messages.stream(
            model="claude-haiku-4-5",
            max_tokens=50,
            messages=[{"role": "user", "content": "A list, please"}],
        ) as stream:
            message = await stream.get_final_message()
    [turn] = recorder.turns
    assert turn.file.read_bytes() == MESSAGES.read_bytes()
    assert turn.match == {
        "api": "messages",
        "model": "claude-haiku-4-5",
        "user": "A list, please",
        "tool_result": False,
    }
    assert fold_message(load_recording(turn.file)).text == message.content[0].text


def test_a_caller_that_stops_early_still_leaves_the_whole_answer(
    upstream: str, tmp_path: Path
) -> None:
    recorder = Recorder(httpx.HTTPTransport(), tmp_path)
    with (
        httpx.Client(transport=recorder) as http,
        http.stream(
            "POST",
            upstream + "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        ) as response,
    ):
        next(response.iter_raw())
    [turn] = recorder.turns
    assert turn.file.read_bytes() == CHAT.read_bytes()


def test_an_error_answer_passes_through_unrecorded(upstream: str, tmp_path: Path) -> None:
    recorder = Recorder(httpx.HTTPTransport(), tmp_path)
    client = openai.OpenAI(
        api_key="test",
        base_url=upstream + "/v1",
        http_client=httpx.Client(transport=recorder),
        max_retries=0,
    )
    with client, pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="m", messages=[{"role": "nobody", "content": "x"}])
    assert recorder.turns == [] and _written(tmp_path) == {}


# Each secret, in each place a key travels; and each again in the prompt, where only
# masking by value can catch it.
SECRETS = {
    "authorization": "sk-openai-0001-secret",
    "x-api-key": "sk-ant-0002-secret",
    "api-key": "azure-0003-secret",
    "x-goog-api-key": "goog-0004-secret",
    "cookie": "session-0005-secret",
    "x-org-token": "org-0006-secret",  # a header the caller names
    "key": "goog-0007-query-secret",  # Gemini's ?key=
    "account_pin": "pin-0008-body-secret",  # a body field the caller names
}


def _secret_client(base_url: str, transport: Any) -> Any:
    return openai.OpenAI(
        api_key=SECRETS["authorization"],
        base_url=base_url,
        http_client=httpx.Client(transport=transport),
        default_headers={
            "x-api-key": SECRETS["x-api-key"],
            "api-key": SECRETS["api-key"],
            "x-goog-api-key": SECRETS["x-goog-api-key"],
            "cookie": f"session={SECRETS['cookie']}; theme=dark",
            "x-org-token": SECRETS["x-org-token"],
        },
        default_query={"key": SECRETS["key"]},
    )


def _leaks(directory: Path) -> list[tuple[str, str]]:
    """Which secret is in which file written under `directory`."""
    return [
        (name, where)
        for name, secret in SECRETS.items()
        for where, data in _written(directory).items()
        if secret.encode() in data
    ]


PROMPT = "Remember these: " + " ".join(SECRETS.values())


def test_no_secret_reaches_any_byte_written(upstream: str, tmp_path: Path) -> None:
    path = tmp_path / "secrets.toml"
    path.write_text(HAND_WRITTEN)
    transport = ReplayTransport(
        Scenario.load(path), speed=0, record="new", redact=["X-Org-Token", "account_pin"]
    )
    assert transport.recording is not None
    turns = transport.recording.recorder.turns
    client = _secret_client(upstream + "/v1", transport)
    prompt = PROMPT
    with client:
        for stream in (True, False):
            answer = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": prompt}],
                stream=stream,
                extra_body={"metadata": {"account_pin": SECRETS["account_pin"]}},
            )
            if stream:
                for _ in answer:  # type: ignore[union-attr]
                    pass
    transport.recording.close()
    assert len(turns) == 2
    written = _written(tmp_path)
    assert set(written) == {
        "secrets.toml",
        "secrets/001-chat.sse",
        "secrets/001-chat.sse.timing.json",
        "secrets/002-chat.sse",
        "secrets/002-chat.sse.timing.json",
    }
    assert _leaks(tmp_path) == []
    # The turn matches the prompt masked; what it keeps of the request, redacted too.
    recorded = tomllib.loads(path.read_text())["turns"][1]
    assert recorded["match"]["user"].startswith("Remember these: *")
    request = turns[0].request
    assert request["body"]["metadata"] == {"account_pin": "<redacted>"}
    assert request["headers"] == {}


async def _echoing_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A server that repeats the request's key and prompt in its streamed answer (as a
    careless proxy or a model asked to repeat them would)."""
    assert scope["type"] == "http"
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    said = json.loads(body)["messages"][0]["content"] + " " + headers["authorization"]
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": said}}],
    }
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    start = {"type": "http.response.start", "status": 200}
    await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
    for event in (chunk, end):
        data = f"data: {json.dumps(event)}\n\n".encode()
        await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def test_a_secret_the_upstream_echoes_is_masked_in_the_recording(tmp_path: Path) -> None:
    path = tmp_path / "echo.toml"
    transport = ReplayTransport(Scenario([], root=tmp_path, name=str(path)), record="new")
    prompt = "Repeat my key: " + SECRETS["x-api-key"]
    with serve_in_thread(_echoing_app) as url, _secret_client(url + "/v1", transport) as client:
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": prompt}], stream=True
        )
        said = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert transport.recording is not None
    transport.recording.close()
    # The app got the answer as it was sent; the file has the secrets masked, by as many
    # bytes: the timing's offsets still end at the file's end.
    assert said == f"{prompt} Bearer {SECRETS['authorization']}"
    assert _leaks(tmp_path) == []
    recording = tmp_path / "echo" / "001-chat.sse"
    # (the header's whole value is masked: "Bearer <key>")
    assert b"*" * len(f"Bearer {SECRETS['authorization']}") in recording.read_bytes()
    timing = load_timing(recording)
    assert timing is not None and timing[-1][0] == len(recording.read_bytes())


def test_what_a_recorded_turn_matches_from_each_api() -> None:
    anthropic_body = {
        "model": "claude",
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "w"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1"}]},
        ],
        "tools": [{"name": "w", "input_schema": {}}],
    }
    assert _match("/v1/messages", anthropic_body) == {
        "api": "messages",
        "model": "claude",
        "user": "Weather in Paris?",
        "tool_result": "tu_1",
        "tools": ["w"],
    }
    gemini_body = {
        "contents": [
            {"role": "user", "parts": [{"text": "Hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "w", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "w", "response": {}}}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "w"}]}],
    }
    assert _match("/v1beta/models/gemini-2.5-flash:streamGenerateContent", gemini_body) == {
        "api": "gemini",
        "model": "gemini-2.5-flash",
        "user": "Hi",
        "tool_result": "w",
        "tools": ["w"],
    }
    responses_body = {
        "model": "gpt-5",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
        "tools": [{"type": "function", "name": "w"}],
    }
    assert _match("/v1/responses", responses_body) == {
        "api": "responses",
        "model": "gpt-5",
        "user": "Hi",
        "tool_result": "c1",
        "tools": ["w"],
    }
    converse_body = {
        "messages": [
            {"role": "user", "content": [{"text": "Hi"}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t9", "name": "w"}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": "t9", "content": []}}]},
        ],
        "toolConfig": {"tools": [{"toolSpec": {"name": "w"}}]},
    }
    assert _match("/model/amazon.nova-micro-v1:0/converse-stream", converse_body) == {
        "api": "converse",
        "model": "amazon.nova-micro-v1:0",
        "user": "Hi",
        "tool_result": "t9",
        "tools": ["w"],
    }


def _match(path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = read_api_request(path, body)
    assert request is not None
    return match_of(request)


@pytest.mark.parametrize(
    ("upstream", "redact", "expected"),
    [
        ("https://api.openai.com", None, "upstream: expected an httpx or httpx2 transport"),
        (None, None, r"upstream: expected an httpx or httpx2 transport \(.*\), got null"),
        ("transport", "authorization", "redact: expected a list of header or field names"),
        ("transport", [""], r"redact: expected names \(non-empty str\), got str ''"),
    ],
)
def test_wrong_arguments_are_refused_with_what_was_expected(
    upstream: Any, redact: Any, expected: str, tmp_path: Path
) -> None:
    with contextlib.ExitStack() as stack:
        if upstream == "transport":
            upstream = stack.enter_context(httpx.HTTPTransport())
        with pytest.raises(UsageError, match=expected):
            Recorder(upstream, tmp_path, redact=redact)


# --- through the replay transports ------------------------------------------------------

HAND_WRITTEN = """\
# A turn written by hand: a greeting answered from the scenario itself.
[[turns]]
name = "greeting"
match = { api = "chat", user = "hello" }
message = { text = "Hello from the scenario." }
"""


def _weather(client: Any, stream: bool) -> Any:
    return client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
        stream=stream,
    )


def _hello(client: Any) -> str:
    completion = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello there"}]
    )
    return str(completion.choices[0].message.content)


def test_a_miss_is_recorded_as_a_turn_and_replayed_without_the_upstream(
    upstream: str, tmp_path: Path
) -> None:
    path = tmp_path / "weather.toml"
    path.write_text(HAND_WRITTEN)
    transport = ReplayTransport(Scenario.load(path), speed=0, record="new")
    client = openai.OpenAI(
        api_key="test", base_url=upstream + "/v1", http_client=httpx.Client(transport=transport)
    )
    with client:
        assert _hello(client) == "Hello from the scenario."  # a turn answers: not forwarded
        recorded = [chunk.model_dump() for chunk in _weather(client, stream=True)]
        # Asked again in the same run, the recorded turn answers it.
        again = [chunk.model_dump() for chunk in _weather(client, stream=True)]
    transport.recording.close()  # type: ignore[union-attr]
    assert again == recorded
    assert transport.misses == []
    assert [n for n in transport.scenario.used] == [1, 2]  # type: ignore[union-attr]

    # The file keeps the hand-written turn as it was, and the recorded one after it.
    text = path.read_text()
    assert text.startswith(HAND_WRITTEN)
    turns = tomllib.loads(text)["turns"]
    assert turns[1] == {
        "name": "recorded 2",
        "match": {
            "api": "chat",
            "model": "gpt-4o-mini",
            "user": "Weather in Paris?",
            "tool_result": False,
            "tools": ["get_weather"],
        },
        "recording": "weather/001-chat.sse",
    }
    assert (tmp_path / "weather" / "001-chat.sse").read_bytes() == CHAT.read_bytes()

    # The next run: no upstream at all (a port nothing listens on), every answer replayed.
    replay = ReplayTransport(Scenario.load(path), speed=0)
    offline = openai.OpenAI(
        api_key="test",
        base_url="http://127.0.0.1:9/v1",
        http_client=httpx.Client(transport=replay),
        max_retries=0,
    )
    with offline:
        assert _hello(offline) == "Hello from the scenario."
        assert [chunk.model_dump() for chunk in _weather(offline, stream=True)] == recorded
        plain = _weather(offline, stream=False)
    assert replay.misses == []
    expected = fold_message(load_recording(CHAT)).tool_calls[0].name
    assert plain.choices[0].message.tool_calls[0].function.name == expected


async def test_record_all_re_records_the_scenario(upstream: str, tmp_path: Path) -> None:
    path = tmp_path / "again.toml"
    path.write_text(HAND_WRITTEN)
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "007-chat.sse").write_bytes(b"stale")
    transport = AsyncReplayTransport(Scenario.load(path), speed=0, record="all")
    async with httpx2.AsyncClient(transport=transport) as http:
        client = openai.AsyncOpenAI(api_key="test", base_url=upstream + "/v1", http_client=http)
        completion = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hello there"}]
        )
    await transport.recording.aclose()  # type: ignore[union-attr]
    # Forwarded although a turn matched: the upstream's answer, not the scenario's.
    assert completion.choices[0].message.tool_calls is not None
    turns = tomllib.loads(path.read_text())["turns"]
    assert [turn["name"] for turn in turns] == ["recorded 1"]
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == [
        "001-chat.sse",
        "001-chat.sse.timing.json",
    ]


def test_a_record_mode_that_is_none_of_the_three_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r'record: expected "none", "new" or "all", got str'):
        ReplayTransport(Scenario([]), record="yes")  # type: ignore[arg-type]


def test_google_genai_is_recorded_plain_and_streamed_and_its_key_is_not_written(
    tmp_path: Path,
) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    gemini = REAL / "gemini" / "text-2.0-flash.sse"
    directory = tmp_path / "upstream"
    (directory / "gemini").mkdir(parents=True)
    shutil.copy(gemini, directory / "gemini" / gemini.name)
    path = tmp_path / "gemini.toml"
    transport = ReplayTransport(Scenario([], root=tmp_path, name=str(path)), record="new")
    key = "AIza-0009-gemini-secret"
    with serve_in_thread(create_app(directory, speed=0)) as url:
        options = types.HttpOptions(base_url=url, httpx_client=httpx2.Client(transport=transport))
        client = genai.Client(api_key=key, http_options=options)
        whole = client.models.generate_content(model="gemini-2.0-flash", contents="Capital?")
        streamed = "".join(
            chunk.text or ""
            for chunk in client.models.generate_content_stream(
                model="gemini-2.0-flash", contents="Capital, streamed?"
            )
        )
    assert transport.recording is not None
    transport.recording.close()
    expected = fold_message(load_recording(gemini)).text
    assert whole.text == streamed == expected
    # The plain request was asked as a stream: both answers are the recording's bytes.
    turns = tomllib.loads(path.read_text())["turns"]
    assert [turn["match"]["user"] for turn in turns] == ["Capital?", "Capital, streamed?"]
    assert [turn["recording"] for turn in turns] == [
        "gemini/001-gemini.sse",
        "gemini/002-gemini.sse",
    ]
    for turn in turns:
        assert (tmp_path / turn["recording"]).read_bytes() == gemini.read_bytes()
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert key.encode() not in written

    # Offline, the same requests replay from the recorded turns.
    replay = ReplayTransport(Scenario.load(path), speed=0)
    options = types.HttpOptions(
        base_url="http://127.0.0.1:9", httpx_client=httpx2.Client(transport=replay)
    )
    offline = genai.Client(api_key="test", http_options=options)
    again = offline.models.generate_content(model="gemini-2.0-flash", contents="Capital?")
    assert again.text == expected and replay.misses == []


def test_serve_records_a_miss_from_its_upstream_and_replays_it_next_time(
    upstream: str, tmp_path: Path
) -> None:
    path = tmp_path / "served.toml"
    path.write_text(HAND_WRITTEN)
    recording = create_app(scenario=path, speed=0, record="new", upstream=upstream)
    with serve_in_thread(recording) as url:
        client = openai.OpenAI(api_key="sk-served-0010-secret", base_url=url + "/v1")
        with client:
            assert _hello(client) == "Hello from the scenario."
            recorded = [chunk.model_dump() for chunk in _weather(client, stream=True)]
    turns = tomllib.loads(path.read_text())["turns"]
    assert [turn["name"] for turn in turns] == ["greeting", "recorded 2"]
    assert (tmp_path / turns[1]["recording"]).read_bytes() == CHAT.read_bytes()
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"sk-served-0010-secret" not in written

    with serve_in_thread(create_app(scenario=path, speed=0)) as url:
        client = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0)
        with client:
            assert [chunk.model_dump() for chunk in _weather(client, stream=True)] == recorded


def test_serve_record_needs_a_scenario_and_an_upstream() -> None:
    with pytest.raises(UsageError, match="expected a scenario and an upstream base URL"):
        create_app(record="new", upstream="https://api.openai.com")


def test_the_serve_command_records_with_a_scenario_and_an_upstream_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from streamfold.cli import build_parser, main

    args = build_parser().parse_args(
        ["serve", "--scenario", "app.toml", "--record", "new", "--upstream", "https://x"]
    )
    assert (args.record, args.upstream, args.redact) == ("new", "https://x", None)
    # Without a scenario the command stops before serving, saying what it needs.
    assert main(["serve", "--record", "new", "--upstream", "https://api.openai.com"]) != 0
    assert "expected a scenario and an upstream base URL" in capsys.readouterr().err
