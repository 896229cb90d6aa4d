"""Faults as each provider sends them: its own mid-stream error event, as bytes, and cuts.

A test that needs a stream to fail the way the provider fails it takes the chunks of a
recording (or of `streamfold.to_stream`), keeps the first N events and ends them with the
provider's error event (`fail_after`), or cuts them after N events or N bytes
(`cut_after_events`, `cut_after_bytes`). Each error event is the shape the provider's API
sends and its official SDK reads as its own error:

    anthropic          event: error, {"type": "error", "error": {"type": "overloaded_error", ...}}
                       (anthropic SDK: APIStatusError from the stream)
    openai-responses   event: error (ResponseErrorEvent: code, message, param), or
                       response.failed (the response, status failed, with its error)
    openai-chat        data: {"error": {"message", "type", "param", "code"}}, as OpenAI, vLLM
                       and OpenRouter send it (openai SDK: APIError)
    gemini             data: {"error": {"code": 503, "message", "status": "UNAVAILABLE"}}
                       (google-genai: errors.ServerError / ClientError by code)
    bedrock            an eventstream message of `:message-type: exception`,
    bedrock-invoke     `:exception-type: throttlingException` (modelStreamErrorException,
                       internalServerException, ...) (botocore: EventStreamError)
    ollama             {"error": "..."} as a line (ollama client: ResponseError)

streamfold's own fold reads each one as the provider's error (`ProviderErrored`, status
"error").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..arguments import check_count, describe
from ..errors import UsageError
from ..providers import canonical_provider
from ..providers.anthropic.stream import error_event as anthropic_error
from ..providers.bedrock.stream import error_event as bedrock_exception
from ..providers.gemini.stream import error_event as gemini_error
from ..providers.ollama.stream import error_event as ollama_error
from ..providers.openai_chat.stream import error_event as chat_error
from ..providers.openai_responses.stream import error_event as responses_error
from ..providers.openai_responses.stream import failed_event as responses_failed

__all__ = [
    "ERROR_FORMS",
    "anthropic_error",
    "bedrock_exception",
    "chat_error",
    "cut_after_bytes",
    "cut_after_events",
    "error_event",
    "fail_after",
    "gemini_error",
    "ollama_error",
    "responses_error",
    "responses_failed",
]

ERROR_FORMS: dict[str, tuple[str, ...]] = {
    "anthropic": ("overloaded_error", "api_error", "rate_limit_error"),
    "openai-responses": ("error", "response.failed"),
    "openai-chat": ("server_error", "rate_limit_exceeded"),
    "gemini": ("UNAVAILABLE", "INTERNAL", "RESOURCE_EXHAUSTED"),
    "bedrock": (
        "throttlingException",
        "modelStreamErrorException",
        "internalServerException",
        "serviceUnavailableException",
        "validationException",
    ),
    "ollama": ("error",),
}
"""The error each provider's `error_event` writes, by `kind` (the first is the default)."""
ERROR_FORMS["bedrock-invoke"] = ERROR_FORMS["bedrock"]

_MESSAGES = {
    "overloaded_error": "Overloaded",
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit",
    "rate_limit_exceeded": "Rate limit reached for requests",
    "throttlingException": "Too many requests, please wait before trying again.",
    "modelStreamErrorException": "The model stream failed.",
    "serviceUnavailableException": "The service is unavailable. Try again later.",
    "UNAVAILABLE": "The model is overloaded. Please try again later.",
    "RESOURCE_EXHAUSTED": "Resource has been exhausted (e.g. check quota).",
}
_SEQUENCE = re.compile(rb'"sequence_number":\s*(\d+)')
_GEMINI_CODES = {"UNAVAILABLE": 503, "INTERNAL": 500, "RESOURCE_EXHAUSTED": 429}


def error_event(
    provider: str,
    kind: str | None = None,
    message: str | None = None,
    *,
    sequence_number: int = 0,
) -> bytes:
    """The provider's own mid-stream error event, as bytes (one chunk).

    `kind` picks the error (see `ERROR_FORMS`: Anthropic's error type, Responses' `error`
    or `response.failed`, Gemini's status, Bedrock's exception...); `message` its text;
    `sequence_number` the Responses event's place in its stream (a reader takes a number
    already seen for a repeated event: `fail_after` gives the next one).
    """
    if not isinstance(provider, str):
        raise UsageError(f"error_event: expected a provider name, got {describe(provider)}")
    target = canonical_provider(provider)
    forms = ERROR_FORMS.get(target)
    if forms is None:
        raise UsageError(
            f"error_event: expected one of {', '.join(sorted(ERROR_FORMS))} (or an alias), "
            f"got {provider!r}"
        )
    if kind is None:
        kind = forms[0]
    if not isinstance(kind, str) or (kind not in forms and target != "anthropic"):
        raise UsageError(
            f"error_event: expected a {target} error kind ({', '.join(forms)}), "
            f"got {describe(kind)}"
        )
    if message is not None and not isinstance(message, str):
        raise UsageError(f"error_event: expected message to be a str, got {describe(message)}")
    check_count("error_event", "sequence_number", sequence_number)
    text = message if message is not None else _MESSAGES.get(kind, "Internal server error")
    if target == "anthropic":
        return anthropic_error(kind, text)
    if target == "openai-responses":
        if kind == "response.failed":
            return responses_failed("server_error", text, sequence_number=sequence_number)
        return responses_error("server_error", text, sequence_number)
    if target == "openai-chat":
        return chat_error(kind, text, kind)
    if target == "gemini":
        return gemini_error(_GEMINI_CODES.get(kind, 500), text, kind)
    if target in ("bedrock", "bedrock-invoke"):
        return bedrock_exception(kind, text)
    return ollama_error(text)


def cut_after_events(chunks: Iterable[bytes], events: int) -> list[bytes]:
    """The first `events` chunks (one event a chunk, as `to_stream` and recordings give)."""
    count = check_count("cut_after_events", "events", events)
    return _chunks("cut_after_events", chunks)[:count]


def cut_after_bytes(chunks: Iterable[bytes], size: int) -> list[bytes]:
    """The chunks up to `size` bytes in all: the last one kept is cut where the size ends
    (inside an event, a UTF-8 character or an eventstream frame, as a dropped connection
    cuts it)."""
    count = check_count("cut_after_bytes", "size", size)
    out: list[bytes] = []
    left = count
    for chunk in _chunks("cut_after_bytes", chunks):
        if left <= 0:
            break
        out.append(chunk[:left])
        left -= len(chunk)
    return out


def fail_after(
    chunks: Iterable[bytes],
    events: int,
    provider: str,
    kind: str | None = None,
    message: str | None = None,
) -> list[bytes]:
    """The first `events` chunks, then the provider's error event (`error_event`; a
    Responses one numbered after the last event kept)."""
    kept = cut_after_events(chunks, events)
    numbers = [int(n) for chunk in kept for n in _SEQUENCE.findall(chunk)]
    following = max(numbers) + 1 if numbers else 0
    return [*kept, error_event(provider, kind, message, sequence_number=following)]


def _chunks(function: str, chunks: Iterable[bytes]) -> list[bytes]:
    if isinstance(chunks, bytes | str) or not isinstance(chunks, Iterable):
        raise UsageError(f"{function}: expected a list of byte chunks, got {describe(chunks)}")
    out = list(chunks)
    for chunk in out:
        if not isinstance(chunk, bytes):
            raise UsageError(f"{function}: expected byte chunks, got {describe(chunk)}")
    return out
