"""`streamfold serve` as Bedrock's InvokeModel: botocore and the anthropic SDK's Bedrock
client, pointed at a uvicorn server on a loopback port, read Claude's recordings from it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from invoke_support import invoke_bytes
from server_support import bedrock_client, serve_in_thread
from support import REAL, read

from streamfold import Message, fold_message

pytest.importorskip("uvicorn")
pytest.importorskip("botocore.session")
from botocore.exceptions import ClientError

from streamfold.serve import create_app

MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"
RECORDINGS = [
    "anthropic/thinking-then-tool-use.sse",
    "anthropic/web-search-citations.sse",
    "anthropic/redacted-thinking.sse",
]
BODY = {
    "anthropic_version": "bedrock-2023-05-31",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "What version?"}],
}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


def _client(base_url: str, recording: str | None = None) -> Any:
    """botocore's bedrock-runtime client (boto3's, without boto3), dummy credentials."""
    return bedrock_client(
        base_url, None if recording is None else {"x-streamfold-recording": recording}
    )


def _as_anthropic(message: Message) -> Message:
    """The fold without what only Bedrock (or the provider name) says."""
    only = ("provider", "invoke_format", "invocation_metrics")
    metadata = {k: v for k, v in message.metadata.items() if k not in only}
    return message.model_copy(update={"metadata": metadata})


@pytest.mark.parametrize("rec", RECORDINGS)
def test_botocore_streams_claude_from_an_anthropic_recording(base_url: str, rec: str) -> None:
    response = _client(base_url, rec).invoke_model_with_response_stream(
        modelId=MODEL, body=json.dumps(BODY), contentType="application/json"
    )
    assert response["contentType"] == "application/json"  # what each chunk's bytes hold
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["content-type"] == "application/vnd.amazon.eventstream"
    message = fold_message(response["body"])  # botocore's EventStream, as boto3 hands it over
    direct = fold_message([read(rec)], "anthropic")
    assert message.metadata["provider"] == "bedrock-invoke"
    assert _as_anthropic(message) == _as_anthropic(direct)
    assert direct.usage is not None
    assert message.metadata["invocation_metrics"] == {
        "inputTokenCount": direct.usage.input_tokens,
        "outputTokenCount": direct.usage.output_tokens,
    }


def test_botocore_without_a_content_type_is_served(base_url: str) -> None:
    # boto3 callers often leave contentType out: botocore then says application/json.
    response = _client(base_url).invoke_model_with_response_stream(
        modelId=MODEL, body=json.dumps(BODY)
    )
    assert fold_message(response["body"]).status == "complete"


def test_botocore_invoke_answers_the_folded_message(base_url: str) -> None:
    rec = RECORDINGS[0]
    response = _client(base_url, rec).invoke_model(modelId=MODEL, body=json.dumps(BODY))
    answer = json.loads(response["body"].read())
    direct = fold_message([read(rec)], "anthropic")
    from anthropic.types import Message as AnthropicMessage

    parsed = AnthropicMessage.model_validate(answer)
    assert [b.type for b in parsed.content] == ["thinking", "tool_use"]
    assert parsed.stop_reason == direct.raw_stop_reason == "tool_use"
    assert parsed.content[0].signature == direct.content[0].options["signature"]  # type: ignore[union-attr]


def test_a_request_bedrock_would_refuse_is_a_validation_exception(base_url: str) -> None:
    body = {k: v for k, v in BODY.items() if k != "anthropic_version"}
    with pytest.raises(ClientError) as caught:
        _client(base_url).invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(body))
    error = caught.value.response["Error"]
    assert error["Code"] == "ValidationException"
    assert "anthropic_version" in error["Message"]
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_a_recording_of_another_api_is_refused_by_name(base_url: str) -> None:
    client = _client(base_url, "openai-chat/text-include-usage.sse")
    with pytest.raises(ClientError) as caught:
        client.invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(BODY))
    assert "openai-chat" in caught.value.response["Error"]["Message"]


def test_a_recorded_invoke_stream_is_served_as_it_is(tmp_path: Path) -> None:
    data = invoke_bytes(RECORDINGS[1])
    (tmp_path / "claude.eventstream").write_bytes(data)
    with serve_in_thread(create_app(tmp_path, speed=0)) as url:
        response = _client(url, "claude").invoke_model_with_response_stream(
            modelId=MODEL, body=json.dumps(BODY)
        )
        assert fold_message(response["body"]) == fold_message([data])


def test_the_anthropic_sdks_bedrock_client_reads_the_stream(base_url: str) -> None:
    from anthropic import AnthropicBedrock

    rec = RECORDINGS[0]
    client = AnthropicBedrock(
        aws_access_key="streamfold",
        aws_secret_key="streamfold",
        aws_region="us-east-1",
        base_url=base_url,
        default_headers={"x-streamfold-recording": rec},
    )
    with client.messages.stream(model=MODEL, max_tokens=256, messages=BODY["messages"]) as stream:
        events = list(stream)
        final = stream.get_final_message()
    message = fold_message(events)  # the SDK's event objects: Anthropic's own events
    assert _as_anthropic(message) == _as_anthropic(fold_message([read(rec)], "anthropic"))
    assert [b.type for b in final.content] == ["thinking", "tool_use"]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 415),  # what a page elsewhere may send without a preflight
        ({"authorization": "Bearer x"}, 415),
        ({"authorization": "AWS4-HMAC-SHA256 Credential=x", "content-type": "text/plain"}, 415),
        ({"authorization": "AWS4-HMAC-SHA256 Credential=x"}, 200),  # botocore, untyped
        ({"content-type": "application/json", "host": "evil.example"}, 403),
    ],
)
def test_the_guard_holds_on_the_invoke_routes(
    base_url: str, headers: dict[str, str], status: int
) -> None:
    url = f"{base_url}/model/{MODEL}/invoke"
    response = httpx.post(url, content=json.dumps(BODY).encode(), headers=headers)
    assert response.status_code == status
    if status != 200:
        assert set(response.json()) == {"__type", "message"}  # Bedrock's error shape


def test_a_recorded_invoke_stream_answers_invoke_with_its_blocks(tmp_path: Path) -> None:
    rec = "anthropic/redacted-thinking.sse"
    (tmp_path / "claude.eventstream").write_bytes(invoke_bytes(rec))
    with serve_in_thread(create_app(tmp_path, speed=0)) as url:
        response = _client(url, "claude").invoke_model(modelId=MODEL, body=json.dumps(BODY))
    answer = json.loads(response["body"].read())
    kinds = [block["type"] for block in answer["content"]]
    assert "redacted_thinking" in kinds  # Claude's own blocks, sent back as they came
    assert kinds == [b["type"] for b in _blocks(rec)]
    assert answer["stop_reason"] == fold_message([read(rec)]).raw_stop_reason


def _blocks(rec: str) -> list[dict[str, Any]]:
    """The content blocks of a recording, as its content_block_start events name them."""
    events = [
        json.loads(line[6:])
        for line in read(rec).decode().splitlines()
        if line.startswith("data: ")
    ]
    return [e["content_block"] for e in events if e.get("type") == "content_block_start"]
