"""`streamfold.testing.faults`: each provider's own mid-stream error, read as that error by
streamfold's fold (`ProviderErrored`) and by the provider's official SDK (its own error
class, or for Responses its own typed error event); and the cuts after N events or bytes.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from streamfold import Message, ProviderErrored, ToolCall, UsageError, fold, fold_message, to_stream
from streamfold.testing.faults import (
    ERROR_FORMS,
    cut_after_bytes,
    cut_after_events,
    error_event,
    fail_after,
)

MESSAGE = Message.assistant(
    "The capital of France is Paris, and it has been for a long while now.",
    tool_calls=[ToolCall(call_id="call_1", name="lookup", arguments={"city": "Paris"},
                         index=1, status="complete")],
)  # fmt: skip
FORMS = [(provider, kind) for provider, kinds in sorted(ERROR_FORMS.items()) for kind in kinds]


def _http2() -> Any:
    try:
        return importlib.import_module("httpx2")
    except ImportError:  # pragma: no cover - depends on the installed SDKs
        return httpx


def _transport(http: Any, chunks: list[bytes], content_type: str) -> Any:
    def handler(request: Any) -> Any:
        return http.Response(200, headers={"content-type": content_type}, content=iter(chunks))

    return http.MockTransport(handler)


# --- streamfold's fold ----------------------------------------------------------------------


@pytest.mark.parametrize(("provider", "kind"), FORMS)
def test_the_fold_reads_each_providers_error_event_as_that_error(provider: str, kind: str) -> None:
    chunks = fail_after(to_stream(MESSAGE, provider), 3, provider, kind, "it broke")
    events = list(fold(chunks, provider))
    errors = [e for e in events if isinstance(e, ProviderErrored)]
    assert len(errors) == 1
    error = errors[0]
    assert error.message == "it broke"
    expected = {"openai-responses": "server_error", "ollama": None}.get(provider, kind)
    assert error.error_type == expected
    message = fold_message(chunks, provider)
    assert message.status == "error" and message.stop_reason == "error"


@pytest.mark.parametrize("provider", sorted(ERROR_FORMS))
def test_the_default_error_is_the_providers_usual_one(provider: str) -> None:
    assert error_event(provider) == error_event(provider, ERROR_FORMS[provider][0])


def test_the_error_shapes_are_the_providers_own() -> None:
    anthropic = error_event("anthropic")
    assert anthropic == (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
                         b'"message":"Overloaded"}}\n\n')  # fmt: skip
    chat = json.loads(error_event("openai-chat", message="boom").removeprefix(b"data: "))
    assert chat == {"error": {"message": "boom", "type": "server_error", "param": None,
                              "code": "server_error"}}  # fmt: skip
    gemini = json.loads(error_event("gemini").removeprefix(b"data: "))
    overloaded = "The model is overloaded. Please try again later."
    assert gemini == {"error": {"code": 503, "status": "UNAVAILABLE", "message": overloaded}}
    assert json.loads(error_event("ollama", message="no")) == {"error": "no"}


# --- the official SDKs ----------------------------------------------------------------------


def _claude(client: Any) -> Any:
    return client.messages.stream(
        model="claude-test", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
    )


def _anthropic(chunks: list[bytes], kind: str) -> None:
    import anthropic

    http = _http2()
    client = anthropic.Anthropic(api_key="test", max_retries=0, http_client=http.Client(
        transport=_transport(http, chunks, "text/event-stream")))  # fmt: skip
    with pytest.raises(anthropic.APIStatusError) as caught, _claude(client) as stream:
        list(stream)
    assert caught.value.body == {"type": "error", "error": {"type": kind, "message": "it broke"}}


def _bedrock_invoke(chunks: list[bytes], kind: str) -> None:
    import anthropic

    http = _http2()
    client = anthropic.AnthropicBedrock(
        aws_access_key="test", aws_secret_key="test", aws_region="us-east-1", max_retries=0,
        http_client=http.Client(
            transport=_transport(http, chunks, "application/vnd.amazon.eventstream")),
    )  # fmt: skip
    with pytest.raises(anthropic.APIError, match="it broke"), _claude(client) as stream:
        list(stream)


def _openai_client(chunks: list[bytes]) -> Any:
    import openai

    transport = _transport(httpx, chunks, "text/event-stream")
    return openai.OpenAI(api_key="test", max_retries=0,
                         http_client=httpx.Client(transport=transport))  # fmt: skip


def _chat(chunks: list[bytes], kind: str) -> None:
    import openai

    client = _openai_client(chunks)
    with pytest.raises(openai.APIError, match="it broke") as caught:
        for _ in client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            pass
    assert caught.value.body == {"message": "it broke", "type": kind, "param": None, "code": kind}


def _responses(chunks: list[bytes], kind: str) -> None:
    client = _openai_client(chunks)
    with client.responses.stream(model="gpt-test", input="hi") as stream:
        events = list(stream)
    last = events[-1]
    # The SDK's own typed events: ResponseErrorEvent, or ResponseFailedEvent.
    if kind == "error":
        assert type(last).__name__ == "ResponseErrorEvent"
        assert (last.code, last.message) == ("server_error", "it broke")
    else:
        assert type(last).__name__ == "ResponseFailedEvent"
        assert last.response.status == "failed"
        assert last.response.error is not None and last.response.error.message == "it broke"


def _gemini(chunks: list[bytes], kind: str) -> None:
    from google import genai
    from google.genai import errors, types

    http = _http2()
    transport = _transport(http, chunks, "text/event-stream")
    options = types.HttpOptions(httpx_client=http.Client(transport=transport))
    client = genai.Client(api_key="test", http_options=options)
    expected = errors.ClientError if kind == "RESOURCE_EXHAUSTED" else errors.ServerError
    with pytest.raises(expected, match="it broke") as caught:
        list(client.models.generate_content_stream(model="gemini-test", contents="hi"))
    assert caught.value.status == kind


class _RawStream:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self) -> Any:
        return iter(self.chunks)

    def close(self) -> None:
        pass


def _bedrock(chunks: list[bytes], kind: str) -> None:
    from botocore import parsers, session
    from botocore.eventstream import EventStream
    from botocore.exceptions import EventStreamError

    operation = (
        session.get_session().get_service_model("bedrock-runtime").operation_model("ConverseStream")
    )
    shape = operation.output_shape.members["stream"]
    stream = EventStream(_RawStream(chunks), shape, parsers.EventStreamJSONParser(),
                         "ConverseStream")  # fmt: skip
    with pytest.raises(EventStreamError, match="it broke") as caught:
        list(stream)
    assert caught.value.response["Error"]["Code"] == kind


def _ollama(chunks: list[bytes], kind: str) -> None:
    import ollama

    transport = _transport(httpx, chunks, "application/x-ndjson")
    client = ollama.Client(host="http://ollama.test", transport=transport)
    with pytest.raises(ollama.ResponseError, match="it broke"):
        list(client.chat(model="llama-test", messages=[{"role": "user", "content": "hi"}],
                         stream=True))  # fmt: skip


SDKS: dict[str, Callable[[list[bytes], str], None]] = {
    "anthropic": _anthropic,
    "bedrock-invoke": _bedrock_invoke,
    "openai-chat": _chat,
    "openai-responses": _responses,
    "gemini": _gemini,
    "bedrock": _bedrock,
    "ollama": _ollama,
}


@pytest.mark.parametrize(("provider", "kind"), FORMS)
def test_the_official_sdk_raises_its_own_error_on_it(provider: str, kind: str) -> None:
    chunks = fail_after(to_stream(MESSAGE, provider), 3, provider, kind, "it broke")
    SDKS[provider](chunks, kind)


# --- cuts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", sorted(ERROR_FORMS))
def test_a_stream_cut_after_n_events_folds_as_cut(provider: str) -> None:
    chunks = to_stream(MESSAGE, provider, piece=5)
    for n in (1, 4, len(chunks) - 1):
        cut = cut_after_events(chunks, n)
        assert cut == chunks[:n]
        message = fold_message(cut, provider)
        assert message.metadata["end_marker"] is False  # the provider's end never came
        if n < 5:  # (the finish reason comes in the last events)
            assert message.status == "incomplete"
            assert MESSAGE.text is not None and (message.text or "") in MESSAGE.text


@pytest.mark.parametrize("provider", sorted(ERROR_FORMS))
def test_a_stream_cut_after_n_bytes_keeps_n_bytes(provider: str) -> None:
    chunks = to_stream(MESSAGE, provider)
    joined = b"".join(chunks)
    for size in (0, 1, len(chunks[0]) + 7, len(joined) - 3):
        cut = cut_after_bytes(chunks, size)
        assert b"".join(cut) == joined[:size]
        assert len(cut) <= len(chunks) and all(cut)
    assert cut_after_bytes(chunks, len(joined) + 10) == chunks


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: cut_after_events([b"x"], -1), "events: expected at least 0"),
        (lambda: cut_after_events(b"data", 1), "expected a list of byte chunks, got bytes"),
        (lambda: cut_after_bytes(["text"], 1), "expected byte chunks, got str"),
        (lambda: cut_after_bytes([b"x"], 1.5), "size: expected an int, got float"),
        (lambda: error_event("nobody"), "nobody"),
        (lambda: error_event("streamfold"), "expected one of anthropic"),
        (lambda: error_event("gemini", "overloaded_error"), "expected a gemini error kind"),
        (lambda: error_event("ollama", message=3), "expected message to be a str, got int"),
    ],
)
def test_misuse_is_a_usage_error(call: Callable[[], Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        call()
