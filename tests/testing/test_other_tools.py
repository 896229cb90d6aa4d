"""What the comparison table of docs/testing.md says of vcrpy and respx, measured against a
real `streamfold serve` pacing a recorded SSE answer as its timing says.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import serve_in_thread
from support import REAL

vcr = pytest.importorskip("vcr")
respx = pytest.importorskip("respx")
openai = pytest.importorskip("openai")
pytest.importorskip("uvicorn")
from streamfold.serve import create_app  # noqa: E402

CHAT = REAL / "openai-chat" / "text-include-usage.sse"
FIRST_BYTE_S = 0.3  # the upstream's first chunk, then one every GAP_S
GAP_S = 0.05
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("paced")
    (directory / "chat").mkdir()
    shutil.copy(CHAT, directory / "chat" / CHAT.name)
    data = CHAT.read_bytes()
    cuts = [i + 2 for i in range(len(data)) if data[i : i + 2] == b"\n\n"]
    marks = [[cut, round(FIRST_BYTE_S + n * GAP_S, 6)] for n, cut in enumerate(cuts)]
    (directory / "chat" / (CHAT.name + ".timing.json")).write_text(
        json.dumps({"version": 1, "chunks": marks})
    )
    with serve_in_thread(create_app(directory, speed=1)) as url:
        yield url


def _read(url: str) -> tuple[list[bytes], float, float]:
    """The chunks of a streamed answer as an httpx client reads them, when the first came
    and how long all took."""
    started = time.monotonic()
    first = None
    chunks = []
    with httpx.Client() as client, client.stream("POST", url, json=BODY) as response:
        for chunk in response.iter_raw():
            first = time.monotonic() - started if first is None else first
            chunks.append(chunk)
    assert first is not None
    return chunks, first, time.monotonic() - started


def test_a_vcrpy_cassette_of_an_sse_answer_keeps_one_string_and_no_timing(
    upstream: str, tmp_path: Path
) -> None:
    cassette = tmp_path / "chat.yaml"
    url = upstream + "/v1/chat/completions"
    events = CHAT.read_bytes().count(b"\n\n")
    paced_s = FIRST_BYTE_S + (events - 1) * GAP_S
    # Without vcrpy: many chunks, the first after the upstream's first-byte wait.
    _read(url)  # (the server's first request warms it up)
    direct, direct_first, _ = _read(url)
    assert len(direct) >= events // 2
    assert direct_first < paced_s
    # Recording: vcrpy reads the whole answer before the client sees a byte of it.
    with vcr.use_cassette(str(cassette), record_mode="once", serializer="json"):
        live, live_first, _ = _read(url)
    assert len(live) == 1
    assert live_first >= paced_s

    [interaction] = json.loads(cassette.read_text())["interactions"]
    response = interaction["response"]
    # The whole stream, one string; nothing in the cassette says when any of it came.
    assert response["body"] == {"string": CHAT.read_text()}
    assert sorted(response) == ["body", "headers", "status"]

    with vcr.use_cassette(str(cassette), record_mode="none", serializer="json"):
        replayed, _, replayed_s = _read(url)
    assert b"".join(replayed) == CHAT.read_bytes()
    assert len(replayed) == 1  # one chunk, at once
    assert replayed_s < FIRST_BYTE_S


def test_vcrpy_records_the_openai_sdks_own_httpx2_client_the_same_way(
    upstream: str, tmp_path: Path
) -> None:
    cassette = tmp_path / "sdk.yaml"
    with vcr.use_cassette(str(cassette), record_mode="all", serializer="json"):
        client = openai.OpenAI(api_key="test", base_url=upstream + "/v1")
        with client:
            for _ in client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            ):
                pass
    [interaction] = json.loads(cassette.read_text())["interactions"]
    assert interaction["response"]["body"]["string"].encode() == CHAT.read_bytes()


def test_respx_answers_an_httpx_client_but_not_the_sdks_own_httpx2_one() -> None:
    completion = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}
        ],
    }
    base_url = "http://127.0.0.1:9/v1"  # nothing listens there
    ask = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    with respx.mock(assert_all_called=False) as mock:
        mock.post(base_url + "/chat/completions").respond(200, json=completion)
        with openai.OpenAI(
            api_key="t", base_url=base_url, max_retries=0, http_client=httpx.Client()
        ) as through_httpx:
            answer = through_httpx.chat.completions.create(**ask)  # type: ignore[call-overload]
            assert answer.choices[0].message.content == "hi"
        default = openai.OpenAI(api_key="t", base_url=base_url, max_retries=0)
        with default, pytest.raises(openai.APIConnectionError):
            default.chat.completions.create(**ask)  # type: ignore[call-overload]
