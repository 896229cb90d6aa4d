"""`streamfold serve` checks each request as the real API would, seen from the real clients.

The official SDKs send broken follow-up requests (a thinking block without its signature, a
tool result answering no call, a reasoning item without its id, an unknown content type)
and get the API's own 400 error; the well-formed versions of the same histories, and the
requests langchain and pydantic-ai build from their own messages, are answered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_support import bedrock_client, serve_in_thread
from support import REAL

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
from streamfold.serve import create_app

pytestmark = [
    pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning"),
    pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


def _pick(rec: str) -> dict[str, str]:
    return {"x-streamfold-recording": rec}


# --- OpenAI Chat Completions ------------------------------------------------------------

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


def _openai(base_url: str, rec: str | None = None) -> Any:
    import openai

    headers = _pick(rec) if rec else None
    return openai.OpenAI(
        base_url=f"{base_url}/v1", api_key="test", max_retries=0, default_headers=headers
    )


def _openai_refusal(exc: Any) -> dict[str, Any]:
    """The error object of an openai.BadRequestError, checked to be OpenAI's shape."""
    assert exc.status_code == 400
    error = exc.body if "message" in exc.body else exc.body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    return dict(error)


@pytest.mark.parametrize(
    ("messages", "param", "says"),
    [
        (  # an unknown content type
            [{"role": "user", "content": [{"type": "tool_call", "text": "hi"}]}],
            "messages[0].content[0].type",
            "Invalid value: 'tool_call'",
        ),
        (  # a tool result without its call
            [
                {"role": "user", "content": "weather?"},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            ],
            "messages[1].role",
            "must be a response to a preceding message with 'tool_calls'",
        ),
        (  # a tool result answering another call
            [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_2", "content": "sunny"},
            ],
            "messages[2].tool_call_id",
            "'call_2' not found",
        ),
        (  # a tool call without its function
            [{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function"}]}],
            "messages[0].tool_calls[0].function",
            "Missing required parameter",
        ),
    ],
)
def test_openai_chat_refuses_what_the_api_refuses(
    base_url: str, messages: list[Any], param: str, says: str
) -> None:
    import openai

    client = _openai(base_url)
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="m", messages=messages, stream=stream)
        error = _openai_refusal(refused.value)
        assert error["param"] == param
        assert says in error["message"]


def test_openai_chat_answers_a_whole_tool_round(base_url: str) -> None:
    client = _openai(base_url, "openai-chat/text-include-usage.sse")
    answer = client.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
    )
    assert answer.choices[0].message.content


# --- OpenAI Responses -------------------------------------------------------------------

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
FUNCTION_CALL = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": "{}",
}


@pytest.mark.parametrize(
    ("items", "param", "says"),
    [
        (  # a reasoning item without its id
            [{k: v for k, v in REASONING.items() if k != "id"}, FUNCTION_CALL],
            "input[0].id",
            "Missing required parameter: 'input[0].id'",
        ),
        (  # a tool result without its call
            [
                {"role": "user", "content": "weather?"},
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            ],
            "input[1].call_id",
            "No tool call found for function call output with call_id 'call_1'",
        ),
        (  # an unknown content type
            [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "input[0].content[0].type",
            "Invalid value: 'text'",
        ),
    ],
)
def test_openai_responses_refuses_what_the_api_refuses(
    base_url: str, items: list[Any], param: str, says: str
) -> None:
    import openai

    client = _openai(base_url)
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="m", input=items, stream=stream)
        error = _openai_refusal(refused.value)
        assert error["param"] == param
        assert says in error["message"]


def test_openai_responses_answers_a_whole_tool_round(base_url: str) -> None:
    client = _openai(base_url, "openai-responses/text.sse")
    output = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    history = [{"role": "user", "content": "weather?"}, REASONING, FUNCTION_CALL, output]
    assert client.responses.create(model="m", input=history).output_text
    # With the history kept by the server, the call is not in the request: not refused.
    answer = client.responses.create(model="m", input=[output], previous_response_id="resp_1")
    assert answer.output_text


# --- Anthropic Messages (and Claude on Bedrock) -------------------------------------------

TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
THINKING = {"type": "thinking", "thinking": "Look it up.", "signature": "EqQB"}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}


def _turns(assistant: list[Any], user: list[Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": assistant},
        {"role": "user", "content": user},
    ]


ANTHROPIC_BAD = [
    (  # a thinking block without its signature
        _turns([{k: v for k, v in THINKING.items() if k != "signature"}, TOOL_USE], [RESULT]),
        "messages.1.content.0.signature: Field required",
    ),
    (  # a tool result without its call
        _turns([{"type": "text", "text": "Let me see."}], [RESULT]),
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: 'toolu_1'",
    ),
    (  # an unknown content type (LangChain's own block, which the API does not know)
        _turns([{"type": "tool_call", "id": "toolu_1", "name": "get_weather"}], [RESULT]),
        "Invalid value: 'tool_call' at 'messages.1.content.0.type'",
    ),
]


@pytest.mark.parametrize(("messages", "says"), ANTHROPIC_BAD)
def test_anthropic_refuses_what_the_api_refuses(
    base_url: str, messages: list[Any], says: str
) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=base_url, api_key="test", max_retries=0)
    for stream in (False, True):
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(model="m", max_tokens=9, messages=messages, stream=stream)
        body = refused.value.body
        assert isinstance(body, dict) and body["type"] == "error"
        assert set(body["error"]) == {"type", "message"}
        assert body["error"]["type"] == "invalid_request_error"
        assert says in body["error"]["message"]


def test_anthropic_answers_a_whole_tool_round(base_url: str) -> None:
    import anthropic

    client = anthropic.Anthropic(
        base_url=base_url,
        api_key="test",
        max_retries=0,
        default_headers=_pick("anthropic/text-basic.sse"),
    )
    messages = _turns([THINKING, TOOL_USE], [RESULT, {"type": "text", "text": "And?"}])
    answer = client.messages.create(model="m", max_tokens=9, messages=messages)
    assert answer.content[0].type == "text"


def test_the_beta_types_are_used_when_the_request_asks_for_a_beta(base_url: str) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=base_url, api_key="test", max_retries=0)
    mcp = {
        "type": "mcp_tool_use",
        "id": "mcptoolu_1",
        "name": "search",
        "server_name": "docs",
        "input": {},
    }
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [mcp]}]
    answer = client.beta.messages.create(
        model="m", max_tokens=9, messages=messages, betas=["mcp-client-2025-04-04"]
    )
    assert answer.content
    with pytest.raises(anthropic.BadRequestError):  # the same without the beta
        client.messages.create(model="m", max_tokens=9, messages=messages)  # type: ignore[misc,list-item]


def test_bedrock_invoke_refuses_with_bedrocks_error(base_url: str) -> None:
    from botocore.exceptions import ClientError

    client = bedrock_client(base_url)
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 9}
    bad = _turns([{"type": "text", "text": "Let me see."}], [RESULT])
    for call in (client.invoke_model, client.invoke_model_with_response_stream):
        with pytest.raises(ClientError) as refused:
            call(modelId="anthropic.claude", body=json.dumps({**body, "messages": bad}))
        error = refused.value.response["Error"]
        assert error["Code"] == "ValidationException"
        assert "unexpected `tool_use_id`" in error["Message"]
    good = _turns([THINKING, TOOL_USE], [RESULT])
    answer = client.invoke_model(
        modelId="anthropic.claude", body=json.dumps({**body, "messages": good})
    )
    assert json.loads(answer["body"].read())["type"] == "message"


# --- Gemini -----------------------------------------------------------------------------


def _gemini(base_url: str, rec: str | None = None) -> Any:
    from google import genai
    from google.genai import types

    headers = _pick(rec) if rec else None
    options = types.HttpOptions(base_url=base_url, headers=headers)
    return genai.Client(api_key="test", http_options=options)


def test_gemini_refuses_a_function_response_without_its_call(base_url: str) -> None:
    from google.genai import errors, types

    client = _gemini(base_url)
    answer = types.Part.from_function_response(name="get_weather", response={"out": "sunny"})
    contents = [
        types.Content(role="user", parts=[types.Part.from_text(text="weather?")]),
        types.Content(role="model", parts=[types.Part.from_text(text="Let me see.")]),
        types.Content(role="user", parts=[answer]),
    ]
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model="gemini-test", contents=contents)
    assert (refused.value.code, refused.value.status) == (400, "INVALID_ARGUMENT")
    assert "function response turn comes immediately after a function call turn" in str(
        refused.value.message
    )
    call = types.Part.from_function_call(name="get_weather", args={})
    contents[1] = types.Content(role="model", parts=[call])
    client = _gemini(base_url, "gemini/text-2.0-flash.sse")
    assert client.models.generate_content(model="gemini-test", contents=contents).text


def test_gemini_refuses_an_unknown_part(base_url: str) -> None:
    # The SDK refuses it before sending; a client of the REST API can send it.
    body = {"contents": [{"role": "user", "parts": [{"functionInvocation": {"name": "x"}}]}]}
    answer = httpx.post(f"{base_url}/v1beta/models/gemini-test:generateContent", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["message"] == (
        "Invalid JSON payload received. Unknown name 'functionInvocation' at "
        "'contents[0].parts[0]': Cannot find field."
    )


def test_a_refusal_quotes_a_huge_value_briefly(base_url: str) -> None:
    huge = "x" * 500_000
    messages = [{"role": "user", "content": [{"type": huge}]}]
    answer = httpx.post(
        f"{base_url}/v1/chat/completions", json={"model": "m", "messages": messages}
    )
    assert answer.status_code == 400
    assert len(answer.content) < 2_000


# --- any body: a RequestInvalid or nothing ----------------------------------------------

FUZZ_BASES: dict[str, dict[str, Any]] = {
    "chat": {
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "r"},
        ],
    },
    "responses": {
        "model": "m",
        "input": [{"role": "user", "content": "hi"}, REASONING, FUNCTION_CALL],
    },
    "messages": {"model": "m", "max_tokens": 5, "messages": _turns([THINKING, TOOL_USE], [RESULT])},
    "gemini": {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
        ],
        "generationConfig": {"temperature": 0.5},
    },
    "converse": {
        "messages": [
            {"role": "user", "content": [{"text": "hi"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}],
            },
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "t", "content": [{"text": "r"}]}}],
            },
        ]
    },
}
FUZZ_VALUES: list[Any] = [
    None, True, 0, -1, 10**30, 1.5, "", "x", [], {}, [None], {"type": "bogus"},
    {"a": {"b": [1]}}, "text", "tool_use", "assistant", [[[[[]]]]], {"type": "text"},
]  # fmt: skip


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        yield from _places(item, (*path, key))


def test_any_body_is_checked_without_an_untyped_error() -> None:
    import copy
    import random

    from streamfold.web.api_requests import RequestInvalid, check_request

    rng = random.Random(0)
    outcomes = {"accepted": 0, "refused": 0}
    for _ in range(1500):
        api = rng.choice(sorted(FUZZ_BASES))
        body = copy.deepcopy(FUZZ_BASES[api])
        for _ in range(rng.randint(1, 3)):
            places = list(_places(body))[1:]
            if not places:
                break
            path = rng.choice(places)
            parent = body
            for key in path[:-1]:
                parent = parent[key]
            if rng.random() < 0.2 and isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent[path[-1]] = copy.deepcopy(rng.choice(FUZZ_VALUES))
        try:
            check_request(api, body)  # type: ignore[arg-type]
            outcomes["accepted"] += 1
        except RequestInvalid as exc:
            outcomes["refused"] += 1
            assert len(exc.message) < 2_000
    assert outcomes["accepted"] and outcomes["refused"]
