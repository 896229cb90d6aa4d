"""The replay server's pure core: routes, request checks, recordings and answers.

`streamfold serve` (over HTTP) and `streamfold.testing`'s transports (inside a test's
process) answer the same requests the same way from here: which API a path is, whether a
body is one the real API would take, which recording answers, and the API's own shapes
for a folded answer and for an error. Nothing here does I/O but reading a recording.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import jiter

from ..errors import StreamfoldError, UsageError
from ..eventstream import encode_message
from ..fold import fold_message
from ..framing import SSEDecoder
from ..interop._common import from_provider, meta_str, own_block, tokens
from ..message import Message, ToolCall
from ..providers.bedrock_invoke import invoke_stream
from . import DemoRecording, find_recordings
from .api_requests import RequestInvalid, check_request

Api = Literal["chat", "responses", "messages", "gemini", "invoke", "converse"]

API_PROVIDER: dict[Api, str] = {
    "chat": "openai-chat",
    "responses": "openai-responses",
    "messages": "anthropic",
    "gemini": "gemini",
    "invoke": "anthropic",  # Claude on Bedrock streams the Messages events, wrapped
    "converse": "bedrock",
}

RECORDING_HEADER = "x-streamfold-recording"
_SSE_TYPE = "text/event-stream; charset=utf-8"


# --- the recordings -------------------------------------------------------------------


Entry = DemoRecording
"""A servable recording: its name (relative path), file, provider and framing."""


class Library:
    """The recordings of a directory (searched recursively), by provider, in path order."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.entries: list[Entry] = find_recordings(self.directory)
        self._defaults: dict[str, Entry] = {}

    def default(self, provider: str) -> Entry:
        """The recording served when a request names none: the first of `provider` whose
        answer is plain text, else its first. LookupError if it has none.

        A client's first request (any SDK, beta or not) then reads a text answer, not a
        tool call or a beta block it may not know. Chosen once, at the first request.
        """
        chosen = self._defaults.get(provider)
        if chosen is not None:
            return chosen
        own = [entry for entry in self.entries if entry.provider == provider]
        if not own:
            raise LookupError(f"no {provider} recording is served (see /recordings)")
        chosen = next((entry for entry in own if _is_plain_text(entry)), own[0])
        self._defaults[provider] = chosen
        return chosen

    def find(self, provider: str, wanted: str | None) -> Entry:
        """The recording asked for (or the default of `provider`); UsageError if none fits.

        A name several APIs' recordings share (`text.sse`) means the one of `provider`.
        """
        if wanted:
            named = [entry for entry in self.entries if wanted in entry.names()]
            for entry in named:
                if entry.provider == provider:
                    return entry
            if named:
                raise UsageError(
                    f"recording {wanted!r} is a {named[0].provider} stream; "
                    f"this endpoint serves {provider} recordings"
                )
            raise LookupError(f"no recording named {wanted!r} (see /recordings)")
        return self.default(provider)


def _is_plain_text(entry: Entry) -> bool:
    """True if the recording folds to a finished answer of text parts alone."""
    try:
        message = fold_message(entry.read(), entry.provider)
    except (LookupError, StreamfoldError):
        return False
    return (
        message.status == "complete"
        and message.stop_reason == "stop"
        and not message.tool_calls
        and bool(message.content)
        and all(part.type == "text" and part.content for part in message.content)
    )


# --- errors ---------------------------------------------------------------------------

_OPENAI_TYPES = {
    400: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "requests",  # (its `code`: rate_limit_exceeded)
    500: "server_error",
    503: "server_error",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_BEDROCK_ERRORS = {
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def error_body(
    api: Api, status: int, message: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The error body each API sends for a failed request (`param`: OpenAI's field path)."""
    if api in ("chat", "responses"):
        return {
            "error": {
                "message": message,
                "type": _OPENAI_TYPES.get(status, "invalid_request_error"),
                "param": param,
                "code": code,
            }
        }
    if api in ("invoke", "converse"):
        return {"__type": _BEDROCK_ERRORS.get(status, "ValidationException"), "message": message}
    if api == "messages":
        return {
            "type": "error",
            "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message},
        }
    return {
        "error": {
            "code": status,
            "message": message,
            "status": _GEMINI_STATUS.get(status, "UNKNOWN"),
        }
    }


class ApiError(Exception):
    """A request the server refuses; becomes the API's error response."""

    def __init__(
        self, status: int, message: str, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param


# --- Message -> non-streaming response shapes -----------------------------------------
# OpenAI's and Anthropic's are the SDK objects of streamfold.interop, sent as the fields
# the adapter set (a null the API sends stays); Gemini's is here.


def _args_object(call: ToolCall) -> dict[str, Any]:
    return call.arguments if isinstance(call.arguments, dict) else {}


def chat_completion(message: Message, model: str) -> dict[str, Any]:
    """The Message as an OpenAI ChatCompletion."""
    from ..interop.openai import to_chat_completion

    return to_chat_completion(message, model=model).model_dump(mode="json", exclude_unset=True)


def response_object(message: Message, model: str) -> dict[str, Any]:
    """The Message as an OpenAI Responses `Response`."""
    from ..interop.openai import to_response

    return to_response(message, model=model).model_dump(mode="json", exclude_unset=True)


def anthropic_message(message: Message, model: str) -> dict[str, Any]:
    """The Message as an Anthropic Messages API `Message`."""
    from ..interop.anthropic import to_message

    return to_message(message, model=model).model_dump(mode="json", exclude_unset=True)


_GEMINI_FINISH = {
    "stop": "STOP",
    "tool_use": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "refusal": "SAFETY",
    "error": "OTHER",
    "other": "OTHER",
}


def _gemini_signature(options: dict[str, Any]) -> str | None:
    for key in ("thought_signature", "thoughtSignature", "signature"):
        value = options.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def gemini_response(message: Message, model: str) -> dict[str, Any]:
    """The Message as a Gemini `GenerateContentResponse`."""
    parts: list[dict[str, Any]] = []
    for entry in message.stream_order():
        part: dict[str, Any]
        if isinstance(entry, ToolCall):
            call: dict[str, Any] = {"name": entry.name or "", "args": _args_object(entry)}
            if entry.call_id and not entry.call_id.startswith("streamfold"):
                call["id"] = entry.call_id
            part = {"functionCall": call}
            signature = _gemini_signature(entry.metadata)
        else:
            block = own_block(entry, "gemini", message)
            if block is not None:
                parts.append(block)
                continue
            if entry.type not in ("text", "thinking"):
                continue
            part = {"text": entry.content or ""}
            if entry.type == "thinking":
                part["thought"] = True
            signature = _gemini_signature(entry.options)
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)
    if from_provider(message, "gemini") and message.raw_stop_reason:
        finish = message.raw_stop_reason
    else:
        finish = _GEMINI_FINISH.get(message.stop_reason or "stop", "STOP")
    result: dict[str, Any] = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
        ],
        "modelVersion": meta_str(message, "model", model),
    }
    response_id = message.metadata.get("id")
    if isinstance(response_id, str):
        result["responseId"] = response_id
    if message.usage is not None:
        usage = message.usage
        meta: dict[str, Any] = {
            "promptTokenCount": tokens(usage.input_tokens),
            # A Usage's output counts the thoughts; Gemini's candidates count leaves them
            # out (they come as thoughtsTokenCount) and its total holds them once.
            "candidatesTokenCount": max(
                0, tokens(usage.output_tokens) - tokens(usage.reasoning_tokens)
            ),
            "totalTokenCount": usage.total_tokens,
        }
        if usage.reasoning_tokens:
            meta["thoughtsTokenCount"] = usage.reasoning_tokens
        if usage.cache_read_tokens:
            meta["cachedContentTokenCount"] = usage.cache_read_tokens
        result["usageMetadata"] = meta
    return result


_CONVERSE_STOP = {
    "stop": "end_turn",
    "tool_use": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filtered",
    "refusal": "content_filtered",
    "pause": "end_turn",
    "error": "end_turn",
    "other": "end_turn",
}


def converse_response(message: Message, model: str) -> dict[str, Any]:
    """The Message as Bedrock's Converse response (`output`, `stopReason`, `usage`)."""
    content: list[dict[str, Any]] = []
    for entry in message.stream_order():
        if isinstance(entry, ToolCall):
            content.append(
                {
                    "toolUse": {
                        "toolUseId": entry.call_id or "",
                        "name": entry.name or "",
                        "input": _args_object(entry),
                    }
                }
            )
            continue
        block = own_block(entry, "bedrock", message)
        if block is not None:
            content.append(block)
        elif entry.type == "text":
            content.append({"text": entry.content or ""})
        elif entry.type == "thinking":
            reasoning: dict[str, Any] = {"text": entry.content or ""}
            signature = entry.options.get("signature")
            if isinstance(signature, str) and signature:
                reasoning["signature"] = signature
            content.append({"reasoningContent": {"reasoningText": reasoning}})
    if from_provider(message, "bedrock") and message.raw_stop_reason:
        stop = message.raw_stop_reason
    else:
        stop = _CONVERSE_STOP.get(message.stop_reason or "stop", "end_turn")
    usage = message.usage
    result: dict[str, Any] = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {
            "inputTokens": tokens(usage.input_tokens) if usage else 0,
            "outputTokens": tokens(usage.output_tokens) if usage else 0,
            "totalTokens": usage.total_tokens if usage else 0,
        },
        "metrics": {"latencyMs": 0},
    }
    if usage is not None and usage.cache_read_tokens:
        result["usage"]["cacheReadInputTokens"] = usage.cache_read_tokens
    return result


ENCODERS = {
    "chat": chat_completion,
    "responses": response_object,
    "messages": anthropic_message,
    "gemini": gemini_response,
    "invoke": anthropic_message,  # InvokeModel answers Claude's Messages response
    "converse": converse_response,
}


# --- the app ----------------------------------------------------------------------------

_REQUIRED: dict[Api, tuple[str, ...]] = {
    "chat": ("model", "messages"),
    "responses": ("model", "input"),
    "messages": ("model", "messages", "max_tokens"),
    "gemini": ("contents",),
    "invoke": ("anthropic_version", "messages", "max_tokens"),
    "converse": ("messages",),
}


def _gemini_frames(data: bytes) -> list[bytes]:
    decoder = SSEDecoder()
    return [event.data for event in [*decoder.feed(data), *decoder.close()]]


def route(path: str) -> tuple[Api, bool | None, str | None] | None:
    """The API a POST to `path` calls, whether the path itself says to stream (None: the
    body's `stream` says), and the model the path names; None for a path of no API."""
    if path in ("/v1/chat/completions", "/chat/completions"):
        return "chat", None, None
    if path in ("/v1/responses", "/responses"):
        return "responses", None, None
    if path == "/v1/messages":
        return "messages", None, None
    for prefix in ("/v1beta/models/", "/v1/models/"):
        if path.startswith(prefix):
            model, _, method = path[len(prefix) :].rpartition(":")
            if method == "streamGenerateContent":
                return "gemini", True, model
            if method == "generateContent":
                return "gemini", False, model
            raise ApiError(
                404,
                f"unknown method {method!r}; expected streamGenerateContent or generateContent",
            )
    if path.startswith("/model/"):
        model, _, action = path[len("/model/") :].rpartition("/")
        streams = {"invoke-with-response-stream": True, "invoke": False}
        if action in streams:
            return "invoke", streams[action], model
        if action in ("converse-stream", "converse"):
            return "converse", action == "converse-stream", model
    return None


def parse_json_body(raw: bytes) -> Any:
    """A request body's JSON; ApiError 400 if it is not JSON."""
    try:
        # jiter stops at a fixed depth (a ValueError), far below Python's recursion limit.
        return jiter.from_json(raw, allow_inf_nan=False) if raw else None
    except ValueError as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None


def check_body(api: Api, body: Any, *, beta: bool = False, full: bool = True) -> dict[str, Any]:
    """`body` if the API would take it; ApiError 400 (the API's message and field) if not.

    `full`: check it against the SDK's request types and the tool-result rules too
    (`streamfold.web.api_requests`), as the real API does, not only the required fields.
    """
    if not isinstance(body, dict):
        raise ApiError(400, f"expected a JSON object body, got {type(body).__name__}")
    missing = [name for name in _REQUIRED[api] if body.get(name) is None]
    if missing:
        raise ApiError(400, f"missing required field(s): {', '.join(missing)}")
    if full:
        try:
            check_request(api, body, beta=beta)
        except RequestInvalid as exc:
            raise ApiError(400, exc.message, param=exc.param) from None
    return body


def is_beta(api: Api, headers: Mapping[str, str], body: Mapping[str, Any]) -> bool:
    """True if an Anthropic request asks for a beta (its request type is the beta one)."""
    return api in ("messages", "invoke") and (
        "anthropic-beta" in headers or "anthropic_beta" in body
    )


def wanted_recording(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The recording a request names (header, else query parameter), None if none."""
    return headers.get(RECORDING_HEADER) or query.get("recording") or None


def find_entry(library: Library, api: Api, wanted: str | None) -> Entry:
    """The recording that answers a request to `api` (ApiError 404/400 if none fits)."""
    if api == "invoke":
        # A recorded invoke stream is served as it is; else an Anthropic one, wrapped.
        try:
            return library.find("bedrock-invoke", wanted)
        except (LookupError, UsageError):
            pass
    try:
        return library.find(API_PROVIDER[api], wanted)
    except LookupError as exc:
        raise ApiError(404, str(exc), "recording_not_found") from None
    except UsageError as exc:
        raise ApiError(400, str(exc), "recording_mismatch") from None


def read_entry(entry: Entry) -> bytes:
    """A recording's bytes now; ApiError 404 if it is gone."""
    try:
        return entry.read()
    except LookupError as exc:
        raise ApiError(404, str(exc), "recording_not_found") from None


def gemini_array(data: bytes) -> list[bytes]:
    """A Gemini SSE stream as the JSON array Gemini streams without `alt=sse`: one piece
    an element (the first holds `[`, the last the `]`)."""
    frames = _gemini_frames(data)
    pieces = [(b"[" if i == 0 else b"\n,") + frame for i, frame in enumerate(frames)]
    if not pieces:
        return [b"[]"]
    pieces[-1] += b"]"
    return pieces


def invoke_data(entry: Entry, data: bytes) -> tuple[Entry, bytes]:
    """InvokeModelWithResponseStream's bytes: a recorded invoke stream as it is, else an
    Anthropic one wrapped in Bedrock's eventstream (ApiError 500 if it is not JSON)."""
    if entry.provider == "bedrock-invoke":
        return entry, data
    try:
        # (_gemini_frames: the data of each SSE event, whichever API's.)
        data = invoke_stream(jiter.from_json(frame) for frame in _gemini_frames(data))
    except (ValueError, StreamfoldError) as exc:
        raise ApiError(500, f"recording {entry.name!r} is not JSON events: {exc}") from None
    return dataclasses.replace(entry, format="eventstream"), data


def converse_data(entry: Entry, data: bytes) -> tuple[Entry, bytes]:
    """ConverseStream's bytes: a recorded eventstream as it is; boto3's event dicts, one a
    line, framed as Bedrock frames them (ApiError 500 if they are not Converse events)."""
    if entry.format == "eventstream":
        return entry, data
    frames = bytearray()
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            event = jiter.from_json(line)
            ((name, payload),) = event.items()
        except (ValueError, AttributeError) as exc:
            raise ApiError(500, f"recording {entry.name!r} is not Converse events: {exc}") from None
        headers = {
            ":event-type": str(name),
            ":content-type": "application/json",
            ":message-type": "event",
        }
        frames += encode_message(headers, json.dumps(payload).encode())
    return dataclasses.replace(entry, format="eventstream"), bytes(frames)


def folded_answer(api: Api, provider: str, data: bytes, name: str, model: str) -> dict[str, Any]:
    """A recorded stream, folded, in the API's non-streaming shape (ApiError 500 if the
    recording does not fold)."""
    try:
        message = fold_message(data, provider)
    except StreamfoldError as exc:
        raise ApiError(500, f"recording {name!r} does not fold: {exc}") from None
    return ENCODERS[api](message, model)


SSE_TYPE = _SSE_TYPE
EVENTSTREAM_TYPE = "application/vnd.amazon.eventstream"
