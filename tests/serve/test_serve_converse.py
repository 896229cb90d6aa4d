"""`streamfold serve` as Bedrock's Converse API: botocore's `converse_stream` and `converse`,
and pydantic-ai's BedrockConverseModel, read the `bedrock` recordings from a real server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_support import bedrock_client, serve_in_thread
from support import REAL, read

from streamfold import Message, fold_message

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
pytest.importorskip("botocore.session")
from botocore.exceptions import ClientError

from streamfold.serve import create_app

MODEL = "amazon.nova-micro-v1:0"
QUESTION = [{"role": "user", "content": [{"text": "What is the temperature in Paris?"}]}]
RECORDINGS = [
    "bedrock/text-nova-micro.eventstream",
    "bedrock/text-nova-micro.ndjson",
    "bedrock/text-then-tool-use-nova.eventstream",
    "bedrock/text-then-tool-use-nova.ndjson",
    "bedrock/thinking-signature-claude.eventstream",
    "bedrock/redacted-thinking-claude.ndjson",
]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


def _client(base_url: str, recording: str | None = None) -> Any:
    return bedrock_client(
        base_url, None if recording is None else {"x-streamfold-recording": recording}
    )


def _same(via: Message, direct: Message) -> None:
    assert via.content == direct.content
    assert via.tool_calls == direct.tool_calls
    assert (via.status, via.stop_reason, via.raw_stop_reason) == (
        direct.status,
        direct.stop_reason,
        direct.raw_stop_reason,
    )
    # (botocore's parser keeps the fields its model knows of `usage`: `raw` may differ)
    assert via.usage is not None and direct.usage is not None
    assert via.usage.model_dump(exclude={"raw"}) == direct.usage.model_dump(exclude={"raw"})


@pytest.mark.parametrize("rec", RECORDINGS)
def test_converse_stream_answers_botocore(base_url: str, rec: str) -> None:
    response = _client(base_url, rec).converse_stream(modelId=MODEL, messages=QUESTION)
    _same(fold_message(response["stream"]), fold_message(read(rec)))


@pytest.mark.parametrize("rec", RECORDINGS)
def test_converse_answers_the_folded_message(base_url: str, rec: str) -> None:
    direct = fold_message(read(rec))
    response = _client(base_url, rec).converse(modelId=MODEL, messages=QUESTION)
    blocks = response["output"]["message"]["content"]
    assert [b["text"] for b in blocks if "text" in b] == [
        p.content for p in direct.content if p.type == "text"
    ]
    calls = [b["toolUse"] for b in blocks if "toolUse" in b]
    assert [(c["toolUseId"], c["name"], c["input"]) for c in calls] == [
        (c.call_id, c.name, c.arguments) for c in direct.tool_calls
    ]
    assert response["stopReason"] == direct.raw_stop_reason
    assert direct.usage is not None
    assert response["usage"]["inputTokens"] == direct.usage.input_tokens
    assert response["usage"]["outputTokens"] == direct.usage.output_tokens


def test_converse_refuses_a_tool_result_without_its_call(base_url: str) -> None:
    result = {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "21 C"}]}}
    history = [*QUESTION, {"role": "assistant", "content": [{"text": "Let me see."}]}]
    client = _client(base_url, "bedrock/text-nova-micro.eventstream")
    for call in (client.converse, client.converse_stream):
        with pytest.raises(ClientError) as refused:
            call(modelId=MODEL, messages=[*history, {"role": "user", "content": [result]}])
        error = refused.value.response["Error"]
        assert error["Code"] == "ValidationException"
        assert "toolUseId 'tooluse_1'" in error["Message"]
    use = {"toolUse": {"toolUseId": "tooluse_1", "name": "get_temperature", "input": {}}}
    history[1] = {"role": "assistant", "content": [use]}
    answer = client.converse(
        modelId=MODEL, messages=[*history, {"role": "user", "content": [result]}]
    )
    assert answer["output"]["message"]["content"][0]["text"]


def test_converse_refuses_an_unknown_content_block(base_url: str) -> None:
    # botocore refuses it before sending; a client of the REST API can send it.
    body = {"messages": [{"role": "user", "content": [{"tool_call": {"name": "x"}}]}]}
    answer = httpx.post(f"{base_url}/model/{MODEL}/converse", json=body)
    assert answer.status_code == 400
    refusal = answer.json()
    assert refusal["__type"] == "ValidationException"
    assert 'Unknown parameter in messages[0].content[0]: "tool_call"' in refusal["message"]


async def test_pydantic_ais_bedrock_converse_model_round_trip(base_url: str) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import ModelRequest, ToolCallPart, ToolReturnPart
    from pydantic_ai.direct import model_request
    from pydantic_ai.models.bedrock import BedrockConverseModel
    from pydantic_ai.providers.bedrock import BedrockProvider

    client = _client(base_url, "bedrock/text-then-tool-use-nova.eventstream")
    model = BedrockConverseModel(MODEL, provider=BedrockProvider(bedrock_client=client))
    question = ModelRequest.user_text_prompt("What is the temperature in Paris?")
    answer = await model_request(model, [question])
    calls = [part for part in answer.parts if isinstance(part, ToolCallPart)]
    assert [(c.tool_name, c.args) for c in calls] == [("get_temperature", {"city": "Paris"})]
    results = ModelRequest(
        parts=[
            ToolReturnPart(tool_name=c.tool_name, content="21 C", tool_call_id=c.tool_call_id)
            for c in calls
        ]
    )
    follow_up = await model_request(model, [question, answer, results])  # refused: raises
    assert any(isinstance(part, ToolCallPart) for part in follow_up.parts)
