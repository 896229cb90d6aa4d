"""`streamfold serve` with a scenario, and faults asked for by header or query parameter:
the same turns and faults as the in-process transports, over HTTP, to the real SDKs."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import serve_in_thread
from support import REAL

from streamfold import fold_message
from streamfold.record import split_frames
from streamfold.testing import Match, MessageAnswer, Scenario, Turn

pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
from streamfold.serve import create_app  # noqa: E402

USER = [{"role": "user", "content": "What is the capital of the UK?"}]
CHAT_TEXT = REAL / "openai-chat" / "text-include-usage.sse"

SCENARIO = """
[[turns]]
match = { api = "chat", user = "UK", tool_result = false }
recording = "openai-chat/tool-call-single-mini.sse"

[[turns]]
match = { tool_result = "get_capital" }
message = { text = "London." }

[[turns]]
match = { api = "messages" }
times = 1
faults = { status = 529, retry_after = 0.01 }

[[turns]]
match = { api = "messages" }
recording = "anthropic/text-basic.sse"
"""


@pytest.fixture(scope="module")
def scenario_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("scenario") / "app.toml"
    # The recordings are found relative to the file: point it at the fixtures by a link.
    (path.parent / "openai-chat").symlink_to(REAL / "openai-chat")
    (path.parent / "anthropic").symlink_to(REAL / "anthropic")
    path.write_text(SCENARIO)
    with serve_in_thread(create_app(REAL, speed=0, scenario=path)) as url:
        yield url


@pytest.fixture(scope="module")
def recordings_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=1)) as url:
        yield url


def test_serve_answers_a_tool_loop_from_a_scenario_file(scenario_url: str) -> None:
    client = openai.OpenAI(api_key="t", base_url=f"{scenario_url}/v1", max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_capital", "parameters": {}}}]
    first = client.chat.completions.create(model="m", messages=USER, tools=tools, stream=True)
    calls = [c.choices[0].delta.tool_calls for c in first if c.choices]
    call = next(tc[0] for tc in calls if tc and tc[0].id)
    follow = [
        *USER,
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "get_capital", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "London"},
    ]
    second = client.chat.completions.create(model="m", messages=follow, tools=tools)
    assert second.choices[0].message.content == "London."
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "turn 0: user: expected text holding 'UK', got 'hi'" in str(caught.value)
    assert "turn 1: tool_result: expected a result for 'get_capital', got none" in str(caught.value)


def test_serve_scenario_529_then_success_through_the_anthropic_sdks_retry(
    scenario_url: str,
) -> None:
    client = anthropic.Anthropic(api_key="t", base_url=scenario_url, max_retries=1)
    raw = client.messages.with_raw_response.create(model="c", max_tokens=9, messages=USER)
    assert raw.retries_taken == 1
    expected = fold_message((REAL / "anthropic/text-basic.sse").read_bytes(), "anthropic")
    assert raw.parse().content[0].text == expected.text


def _cut_after_two_events(url: str) -> None:
    """The openai SDK streams a recording the header cuts after two events: it gets those
    two chunks, then its connection error."""
    client = openai.OpenAI(api_key="t", base_url=f"{url}/v1", max_retries=0)
    stream = client.chat.completions.create(
        model="m",
        messages=USER,
        stream=True,
        extra_headers={
            "x-streamfold-recording": "openai-chat/text-include-usage.sse",
            "x-streamfold-fault": "cut_after_events=2",
        },
    )
    seen = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream:
            seen.append(chunk)
    assert len(seen) == 2


def test_a_fault_header_cuts_a_recording_served_from_a_directory(recordings_url: str) -> None:
    _cut_after_two_events(recordings_url)


def test_a_fault_query_parameter_answers_429_with_retry_after(recordings_url: str) -> None:
    response = httpx.post(
        f"{recordings_url}/v1/messages?fault=status%3D429%2Cretry_after%3D3",
        json={"model": "c", "max_tokens": 9, "messages": USER},
    )
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json()["error"]["type"] == "rate_limit_error"


def test_a_fault_header_stalls_the_stream_at_serves_speed(recordings_url: str) -> None:
    started = time.monotonic()
    arrivals = []
    with httpx.stream(
        "POST",
        f"{recordings_url}/v1/chat/completions",
        json={"model": "m", "messages": USER, "stream": True},
        headers={
            "x-streamfold-recording": "openai-chat/text-include-usage.sse",
            "x-streamfold-fault": "ttft=0.4,tokens_per_second=1000",
        },
    ) as response:
        arrivals = [time.monotonic() - started for _ in response.iter_raw()]
    assert arrivals[0] >= 0.4
    assert arrivals[-1] - arrivals[0] < 0.4  # a thousand events a second after the first


def test_a_bad_fault_header_is_the_apis_400(recordings_url: str) -> None:
    response = httpx.post(
        f"{recordings_url}/v1/chat/completions",
        json={"model": "m", "messages": USER},
        headers={"x-streamfold-fault": "explode=1"},
    )
    assert response.status_code == 400
    assert "a name among status" in response.json()["error"]["message"]


def test_create_app_takes_a_scenario_built_in_python() -> None:
    scenario = Scenario([Turn(match=Match(user="UK"), message=MessageAnswer(text="London"))])
    with serve_in_thread(create_app(REAL, speed=0, scenario=scenario)) as url:
        client = openai.OpenAI(api_key="t", base_url=f"{url}/v1", max_retries=0)
        answer = client.chat.completions.create(model="m", messages=USER)
    assert answer.choices[0].message.content == "London"
    assert scenario.used == [1]


def test_cli_serve_has_a_scenario_option() -> None:
    from streamfold.cli import build_parser

    args = build_parser().parse_args(["serve", "--scenario", "app.toml"])
    assert Path(args.scenario) == Path("app.toml")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_dropped_connection_reaches_the_sdks_without_a_traceback_on_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A cut the test asked for is no crash: uvicorn logs none of it as an application
    # error (nor its traceback), and streamfold says in one line what it cut.
    caplog.set_level(logging.INFO, logger="streamfold.serve")
    server_log = _Records()
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        # (after the start: uvicorn's logging setup replaces the handlers it names)
        logging.getLogger("uvicorn.error").addHandler(server_log)
        try:
            _cut_after_two_events(url)
            whole = anthropic.Anthropic(api_key="t", base_url=url, max_retries=0)
            with pytest.raises(anthropic.APIConnectionError):
                whole.messages.create(
                    model="c",
                    max_tokens=9,
                    messages=USER,
                    extra_headers={"x-streamfold-fault": "cut_after_bytes=40"},
                )
            # The server still answers.
            again = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": USER})
            assert again.status_code == 200
        finally:
            logging.getLogger("uvicorn.error").removeHandler(server_log)
    logged = [(r.levelname, r.getMessage(), r.exc_info) for r in server_log.records]
    assert not [entry for entry in logged if entry[0] in ("ERROR", "CRITICAL")], logged
    two_events = sum(len(event) for event in split_frames(CHAT_TEXT.read_bytes(), "sse")[:2])
    cuts = [r.getMessage() for r in caplog.records if r.name == "streamfold.serve"]
    assert cuts == [
        f"streamfold serve: a fault dropped the connection after {two_events} bytes of the body",
        "streamfold serve: a fault dropped the connection after 40 bytes of the body",
    ]


def test_an_unfinished_response_that_no_fault_cut_is_still_logged_as_an_error() -> None:
    create_app(REAL, speed=0)  # installs the filter that quiets the faults' cuts

    async def unfinished(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"half", "more_body": True})

    server_log = _Records()
    with serve_in_thread(unfinished) as url:
        logging.getLogger("uvicorn.error").addHandler(server_log)
        try:
            with pytest.raises(httpx.RemoteProtocolError):
                httpx.get(url)
        finally:
            logging.getLogger("uvicorn.error").removeHandler(server_log)
    errors = [r.getMessage() for r in server_log.records if r.levelname == "ERROR"]
    assert errors == ["ASGI callable returned without completing response."]


def test_concurrent_requests_meet_the_turns_in_the_order_they_came() -> None:
    # Turns used once each, matching any request: the n-th request to arrive gets turn n,
    # though each answer is worked out in a worker thread of its own. The first request's
    # check is slow (many blocks: a good part of a second), the others' quick: answered as
    # their threads finish, the later ones would take the first turns.
    import json
    import socket
    from urllib.parse import urlsplit

    turns = [Turn(message=MessageAnswer(text=f"answer {n}"), times=1) for n in range(12)]
    many = [{"type": "text", "text": f"block {n}"} for n in range(20_000)]
    with serve_in_thread(create_app(REAL, speed=0, scenario=Scenario(turns))) as url:
        parts = urlsplit(url)
        sockets = []
        for n in range(12):
            blocks = many if n == 0 else [{"type": "text", "text": f"q{n}"}]
            body = json.dumps(
                {"model": "c", "max_tokens": 9, "messages": [{"role": "user", "content": blocks}]}
            ).encode()
            head = (
                f"POST /v1/messages HTTP/1.1\r\nHost: {parts.hostname}\r\n"
                "Content-Type: application/json\r\nConnection: close\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
            sock.sendall(head + body)  # whole, before the next request is sent
            sockets.append(sock)
            time.sleep(0.1)  # read by the server before the next one comes
        answers = {}
        for n, sock in enumerate(sockets):
            with sock:
                reply = b""
                while chunk := sock.recv(65536):
                    reply += chunk
            status, _, rest = reply.partition(b"\r\n")
            assert b" 200 " in status, reply[:300]
            answers[n] = json.loads(rest.partition(b"\r\n\r\n")[2])["content"][0]["text"]
    assert answers == {n: f"answer {n}" for n in range(12)}
