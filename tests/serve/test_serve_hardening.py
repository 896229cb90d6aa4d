"""`streamfold serve` from outside: a special file among the recordings, loose Host
headers, AWS's Content-Type exception off Bedrock's routes, and a server bound to 0.0.0.0."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import serve_in_thread
from support import REAL, read

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
from streamfold.serve import create_app, served_hosts
from streamfold.web.guard import LOOPBACK_HOSTS, host_name

REQUEST = {"model": "m", "max_tokens": 5, "messages": [], "stream": True}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


# --- a FIFO named as a timing sidecar -----------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_as_timing_sidecar_does_not_freeze_the_server(tmp_path: Path) -> None:
    (tmp_path / "anthropic").mkdir()
    recording = tmp_path / "anthropic" / "text-basic.sse"
    whole = read("anthropic/text-basic.sse")
    recording.write_bytes(whole)
    fifo = recording.with_name(recording.name + ".timing.json")
    os.mkfifo(fifo)
    try:
        with serve_in_thread(create_app(tmp_path, speed=1)) as url:
            # Paced per event instead: the whole recording, in time, and the server answers.
            with httpx.stream("POST", f"{url}/v1/messages", json=REQUEST, timeout=10) as answer:
                assert answer.status_code == 200
                assert b"".join(answer.iter_bytes()) == whole
            ui = httpx.get(
                f"{url}/ui-stream",
                params={"recording": "anthropic/text-basic.sse", "speed": "0"},
                timeout=10,
            )
            assert ui.status_code == 200
            assert httpx.get(f"{url}/recordings", timeout=10).status_code == 200
    finally:
        # A server blocked opening the FIFO (as it was) is let go: a writer opens it.
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


# --- Host headers -------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["[::1]evil.com", "localhost:evil", "127.0.0.1:80:80", "::1"])
def test_a_loose_host_header_is_refused(base_url: str, host: str) -> None:
    answer = httpx.get(f"{base_url}/recordings", headers={"host": host})
    assert answer.status_code == 403
    assert "not served here" in answer.json()["error"]["message"]
    chat = httpx.post(
        f"{base_url}/v1/chat/completions",
        json={"model": "m", "messages": []},
        headers={"host": host},
    )
    assert chat.status_code == 403 and chat.json()["error"]["type"] == "permission_error"


def test_host_parsing_is_strict() -> None:
    assert host_name("[::1]evil.com") is None
    assert host_name("localhost:evil") is None
    assert host_name("localhost:123456") is None
    assert host_name("a b") is None
    assert host_name("LocalHost:8765") == "localhost"
    assert host_name("[::1]:1234") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1"
    assert host_name("localhost:") == "localhost"  # an empty port is allowed by RFC 3986


# --- AWS SigV4 and the Content-Type rule -----------------------------------------------

SIGNED = {
    "authorization": "AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/bedrock/aws4_request, "
    "SignedHeaders=host, Signature=00"
}


def test_the_aws_exception_holds_on_bedrocks_routes_only(base_url: str) -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for path, body in [
        ("/v1/chat/completions", chat),
        ("/v1/messages", {**chat, "max_tokens": 5}),
        ("/ui-stream", {"recording": "anthropic/text-basic.sse"}),
    ]:
        answer = httpx.post(base_url + path, content=httpx_json(body), headers=SIGNED)
        assert answer.status_code == 415, path
    invoke = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
    }
    answer = httpx.post(
        f"{base_url}/model/anthropic.claude/invoke", content=httpx_json(invoke), headers=SIGNED
    )
    assert answer.status_code == 200 and answer.json()["type"] == "message"


def httpx_json(body: object) -> bytes:
    import json

    return json.dumps(body).encode()


# --- bound to 0.0.0.0 -------------------------------------------------------------------


def test_any_binding_answers_loopback_names_unless_more_are_allowed() -> None:
    assert served_hosts("0.0.0.0") == LOOPBACK_HOSTS
    assert served_hosts("::") == LOOPBACK_HOSTS
    assert served_hosts("0.0.0.0", ["Dev.Box"]) == LOOPBACK_HOSTS | {"dev.box"}
    assert served_hosts("0.0.0.0", ["*"]) is None
    # An address in Host is no DNS name a page can rebind: the bound one is answered.
    assert served_hosts("192.0.2.7") == LOOPBACK_HOSTS | {"192.0.2.7"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _cli_server(*args: str) -> Iterator[str]:
    """`streamfold serve --host 0.0.0.0 ...` in its own process; yields its loopback URL."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "streamfold", "serve", str(REAL), "--speed", "0"]
    process = subprocess.Popen(
        [*command, "--host", "0.0.0.0", "--port", str(port), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[0].decode()
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{url}/recordings", timeout=2)
                break
            assert time.monotonic() < deadline, "serve did not start within 60 s"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def test_bound_to_any_address_only_loopback_names_are_answered() -> None:
    with _cli_server() as url:
        foreign = httpx.get(f"{url}/recordings", headers={"host": "attacker.example"})
        assert foreign.status_code == 403
        assert "--allow-host" in foreign.json()["error"]["message"]
        assert httpx.get(f"{url}/recordings", headers={"host": "localhost:1"}).is_success
    with _cli_server("--allow-host", "replay.lan") as url:
        assert httpx.get(f"{url}/recordings", headers={"host": "replay.lan:80"}).is_success
        assert (
            httpx.get(f"{url}/recordings", headers={"host": "attacker.example"}).status_code == 403
        )


def test_the_help_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    from streamfold.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "0.0.0.0" in help_text and "DNS rebinding" in help_text
