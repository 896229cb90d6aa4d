"""A request that names no recording gets its API's default: the first recording whose
answer is plain text, so each non-beta SDK's first request reads a text answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import bedrock_client, serve_in_thread
from support import read

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
from streamfold.serve import Library, create_app

pytestmark = [
    pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def bundled() -> Iterator[str]:
    """serve with no directory: the recordings bundled with streamfold."""
    with serve_in_thread(create_app(speed=0)) as url:
        yield url


def test_anthropic_reads_text_by_default(bundled: str) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=bundled, api_key="test", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    answer = client.messages.create(model="m", max_tokens=9, messages=messages)  # type: ignore[list-item]
    assert [block.type for block in answer.content] == ["text"]
    assert answer.content[0].text  # type: ignore[union-attr]
    with client.messages.stream(model="m", max_tokens=9, messages=messages) as stream:  # type: ignore[arg-type]
        assert stream.get_final_text()


def test_openai_reads_text_by_default(bundled: str) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{bundled}/v1", api_key="test", max_retries=0)
    chat = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert chat.choices[0].message.content and not chat.choices[0].message.tool_calls
    response = client.responses.create(model="m", input="hi")
    assert response.output_text
    assert [item.type for item in response.output] == ["message"]


def test_gemini_reads_text_by_default(bundled: str) -> None:
    from google import genai
    from google.genai import types

    options = types.HttpOptions(base_url=bundled)
    client = genai.Client(api_key="test", http_options=options)
    try:
        answer = client.models.generate_content(model="gemini-test", contents="hi")
        assert answer.text and not answer.function_calls
    finally:
        client.close()


def test_bedrock_invoke_reads_text_by_default(bundled: str) -> None:
    client = bedrock_client(bundled)
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 9,
        "messages": [{"role": "user", "content": "hi"}],
    }
    answer = client.invoke_model(modelId="anthropic.claude", body=json.dumps(body))
    content = json.loads(answer["body"].read())["content"]
    assert [block["type"] for block in content] == ["text"] and content[0]["text"]


def test_the_default_is_picked_by_a_rule(tmp_path: Path) -> None:
    # In path order: a tool call, a cut stream, then text; the text is the default.
    (tmp_path / "anthropic").mkdir()
    (tmp_path / "anthropic" / "a-tool.sse").write_bytes(read("anthropic/tool-use-single.sse"))
    whole = read("anthropic/text-basic.sse")
    (tmp_path / "anthropic" / "b-cut.sse").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "anthropic" / "c-text.sse").write_bytes(whole)
    assert Library(tmp_path).default("anthropic").name == "anthropic/c-text.sse"
    with serve_in_thread(create_app(tmp_path, speed=0)) as url:
        request = {"model": "m", "max_tokens": 9, "messages": [], "stream": True}
        answer = httpx.post(f"{url}/v1/messages", json=request)
        assert answer.headers["x-streamfold-recording"] == "anthropic/c-text.sse"
    # Without any text answer, the first recording is the default still.
    (tmp_path / "anthropic" / "c-text.sse").unlink()
    assert Library(tmp_path).default("anthropic").name == "anthropic/a-tool.sse"
