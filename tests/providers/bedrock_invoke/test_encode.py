"""encode(..., provider="bedrock-invoke"): the InvokeModel body for Claude on Bedrock."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from anthropic._base_client import FinalRequestOptions
from anthropic.lib.bedrock._client import _prepare_options
from anthropic.types.beta.message_create_params import MessageCreateParamsNonStreaming
from encode_support import validate
from invoke_support import INVOKE_SOURCES, invoke_bytes

from streamfold import Message, fold_message
from streamfold.encoding import ReplayWarning, check_replayable, encode

PARAMS: dict[str, Any] = {
    "instructions": "Be brief.",
    "tools": [{"name": "f", "description": "d", "parameters": {"type": "object"}}],
    "max_tokens": 64,
}


def _history(message: Message) -> list[Any]:
    return ["What version?", message, {"role": "user", "content": "thanks"}]


@pytest.mark.parametrize("rel", INVOKE_SOURCES)
def test_a_claude_answer_goes_back_to_bedrock_whole(rel: str) -> None:
    message = fold_message([invoke_bytes(rel)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayWarning)  # nothing (signatures...) left out
        body = encode(_history(message), "bedrock-invoke", model="anthropic.claude", **PARAMS)
    assert check_replayable(message, "bedrock-invoke") == []
    assert body["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in body and "stream" not in body  # Bedrock takes them from the URL
    # The Anthropic API's body for the same history, but for those keys.
    plain = encode(_history(message), "anthropic", model="anthropic.claude", **PARAMS)
    assert {**body, "model": plain["model"]} == {
        **plain,
        "anthropic_version": body["anthropic_version"],
    }
    validate(MessageCreateParamsNonStreaming, plain)  # beta types: compaction blocks too


def test_the_sdks_bedrock_client_sends_the_body_as_it_is() -> None:
    message = fold_message([invoke_bytes("anthropic/thinking-then-tool-use.sse")])
    body = encode(_history(message), "bedrock-invoke", **PARAMS)
    request = {**body, "model": "anthropic.claude-haiku-4-5-20251001-v1:0", "stream": True}
    options = _prepare_options(
        FinalRequestOptions.construct(method="post", url="/v1/messages", json_data=request), {}
    )
    assert (
        options.url == "/model/anthropic.claude-haiku-4-5-20251001-v1:0/invoke-with-response-stream"
    )
    assert options.json_data == body
    json.dumps(body, allow_nan=False)


def test_the_caller_may_name_another_anthropic_version() -> None:
    body = encode(["hi"], "bedrock-invoke", max_tokens=8, anthropic_version="bedrock-2099-01-01")
    assert body["anthropic_version"] == "bedrock-2099-01-01"


def test_a_nova_answer_is_foreign_to_claude() -> None:
    text = '{"messageStart":{"role":"assistant"}}'
    nova = fold_message(
        [
            {"chunk": {"bytes": text.encode()}},
            {
                "chunk": {
                    "bytes": b'{"contentBlockDelta":{"contentBlockIndex":0,"delta":'
                    b'{"reasoningContent":{"text":"hm","signature":"sig"}}}}'
                }
            },
            {"chunk": {"bytes": b'{"messageStop":{"stopReason":"end_turn"}}'}},
        ]
    )
    assert nova.metadata["invoke_format"] == "bedrock"
    codes = [p.code for p in check_replayable(nova, "bedrock-invoke")]
    assert codes == ["foreign_signature"]
