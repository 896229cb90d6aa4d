"""A local replay server: recorded streams served as the OpenAI, Anthropic and Gemini APIs.

Point a real SDK client at it (`base_url="http://127.0.0.1:8765/v1"`) and it streams a
recording back, paced like the original (see `streamfold.record`), so code that consumes
provider streams can be exercised offline, in tests, without a key.

    POST /v1/chat/completions                                  openai-chat recordings
    POST /v1/responses                                         openai-responses recordings
    POST /v1/messages                                          anthropic recordings
    POST /v1beta/models/{model}:streamGenerateContent          gemini recordings
    POST /v1beta/models/{model}:generateContent                (also under /v1/models/...)
    POST /model/{modelId}/invoke-with-response-stream          anthropic recordings, as Claude
    POST /model/{modelId}/invoke                               on Bedrock (bedrock-invoke too)
    POST /model/{modelId}/converse-stream                      bedrock (Converse) recordings
    POST /model/{modelId}/converse
    GET  /recordings                                           what is served, by API

The recording is chosen by the `x-streamfold-recording: <name>` header or the
`recording=<name>` query parameter (its path relative to the directory, with or without
suffix, or its file name; a name several APIs share means the endpoint's own), else the
API's default: the first recording of that API, in path order, whose answer is plain text
(so a first request reads text), or its first if none is. A recording is read at each
request, and only while it is a file inside the directory (a link to elsewhere is
refused). When the request does not ask to stream, the folded Message is sent in that
API's non-streaming shape (ChatCompletion, Response, Anthropic Message,
GenerateContentResponse).

The request body is checked as the real API checks it (`streamfold.web.api_requests`: the
official SDK's request types, and the rule that a tool result answers an earlier call), so
an app whose follow-up request is broken gets the API's 400 here too; otherwise the
prompt is ignored: the answer is the recording. Errors use each API's error body and
status code.

Every request passes `streamfold.web.guard.RequestGuard` first: JSON bodies only (415), at
most `max_body` bytes (413), and, by default, only loopback Host names (403), so a web
page elsewhere can neither post to it nor reach it by rebinding its DNS name.

Needs the `serve` extra (starlette, uvicorn).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any, Literal

import jiter

from .errors import StreamfoldError, UsageError
from .eventstream import encode_message
from .fold import fold_message
from .framing import SSEDecoder
from .interop._common import from_provider, meta_str, own_block, tokens
from .message import Message, ToolCall
from .providers.bedrock_invoke import invoke_stream
from .record import EVENT_INTERVAL, check_speed
from .recording import bundled_recordings

try:
    import anyio  # starlette's own
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise UsageError(
        "streamfold serve needs starlette and uvicorn: pip install 'streamfold[serve]'"
    ) from exc

from .web import DemoRecording, _paced, find_recordings
from .web.api_requests import RequestInvalid, check_request
from .web.api_requests import prepare as prepare_request_checks
from .web.guard import (
    DEFAULT_MAX_BODY,
    LOOPBACK_HOSTS,
    RequestGuard,
    RequestRefused,
    plain_error,
    read_json,
)

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
    500: "server_error",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    500: "api_error",
}
_BEDROCK_ERRORS = {
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    500: "InternalServerException",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    500: "INTERNAL",
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
    from .interop.openai import to_chat_completion

    return to_chat_completion(message, model=model).model_dump(mode="json", exclude_unset=True)


def response_object(message: Message, model: str) -> dict[str, Any]:
    """The Message as an OpenAI Responses `Response`."""
    from .interop.openai import to_response

    return to_response(message, model=model).model_dump(mode="json", exclude_unset=True)


def anthropic_message(message: Message, model: str) -> dict[str, Any]:
    """The Message as an Anthropic Messages API `Message`."""
    from .interop.anthropic import to_message

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


class ReplayServer:
    """The replay server's state: the recordings and the pacing."""

    def __init__(self, directory: str | Path | None = None, *, speed: float = 1.0) -> None:
        self.library = Library(directory if directory is not None else bundled_recordings())
        self.speed = check_speed(speed)

    async def _body(self, request: Request, api: Api) -> dict[str, Any]:
        try:
            body = await read_json(request)
        except RequestRefused as exc:
            raise ApiError(exc.status, exc.message) from None
        if not isinstance(body, dict):
            raise ApiError(400, f"expected a JSON object body, got {type(body).__name__}")
        missing = [name for name in _REQUIRED[api] if body.get(name) is None]
        if missing:
            raise ApiError(400, f"missing required field(s): {', '.join(missing)}")
        # As the real API would: an app whose follow-up request is broken learns it here.
        beta = "anthropic-beta" in request.headers or "anthropic_beta" in body
        try:
            # In a worker thread: a body of many small blocks takes a second or so to
            # check (measured: 20,000 blocks, 0.6-1 s), and the other clients wait not.
            await anyio.to_thread.run_sync(functools.partial(check_request, api, body, beta=beta))
        except RequestInvalid as exc:
            raise ApiError(400, exc.message, param=exc.param) from None
        return body

    def _entry(self, request: Request, api: Api) -> Entry:
        wanted = request.headers.get(RECORDING_HEADER) or request.query_params.get("recording")
        if api == "invoke":
            # A recorded invoke stream is served as it is; else an Anthropic one, wrapped.
            with contextlib.suppress(LookupError, UsageError):
                return self.library.find("bedrock-invoke", wanted)
        try:
            return self.library.find(API_PROVIDER[api], wanted)
        except LookupError as exc:
            raise ApiError(404, str(exc), "recording_not_found") from None
        except UsageError as exc:
            raise ApiError(400, str(exc), "recording_mismatch") from None

    def _read(self, entry: Entry) -> bytes:
        try:
            return entry.read()
        except LookupError as exc:
            raise ApiError(404, str(exc), "recording_not_found") from None

    async def _json_array(self, data: bytes) -> AsyncIterator[bytes]:
        # Gemini without alt=sse streams one JSON array, an element per chunk.
        frames = _gemini_frames(data)
        gap = EVENT_INTERVAL / self.speed if self.speed else 0.0
        yield b"["
        for i, frame in enumerate(frames):
            if i and gap:
                await anyio.sleep(gap)
            yield (b"\n," if i else b"") + frame
        yield b"]"

    async def handle(self, request: Request, api: Api, stream: bool | None = None) -> Response:
        """Answer one API request from a recording."""
        try:
            body = await self._body(request, api)
            entry = self._entry(request, api)
            data = self._read(entry)
            if stream is None:
                stream = body.get("stream") is True
            model = str(body.get("model") or request.path_params.get("model") or "streamfold")
            if stream:
                if api == "invoke":
                    return self._invoke_stream(entry, data)
                if api == "converse":
                    return self._converse_stream(entry, data)
                if api == "gemini" and request.query_params.get("alt") != "sse":
                    return StreamingResponse(self._json_array(data), media_type="application/json")
                return StreamingResponse(
                    _paced(entry, self.speed, data),
                    media_type=_SSE_TYPE if entry.format == "sse" else "application/x-ndjson",
                    headers={"cache-control": "no-cache", "x-streamfold-recording": entry.name},
                )
            try:
                message = fold_message(data, entry.provider)
            except StreamfoldError as exc:
                raise ApiError(500, f"recording {entry.name!r} does not fold: {exc}") from None
            return JSONResponse(
                ENCODERS[api](message, model),
                headers={"x-streamfold-recording": entry.name},
            )
        except ApiError as exc:
            refusal = error_body(api, exc.status, exc.message, exc.code, exc.param)
            return JSONResponse(refusal, exc.status)

    def _invoke_stream(self, entry: Entry, data: bytes) -> Response:
        """InvokeModelWithResponseStream's answer: the binary eventstream."""
        if entry.provider != "bedrock-invoke":
            try:
                # (_gemini_frames: the data of each SSE event, whichever API's.)
                data = invoke_stream(jiter.from_json(frame) for frame in _gemini_frames(data))
            except (ValueError, StreamfoldError) as exc:
                raise ApiError(500, f"recording {entry.name!r} is not JSON events: {exc}") from None
            entry = dataclasses.replace(entry, format="eventstream")
        return StreamingResponse(
            _paced(entry, self.speed, data),
            media_type="application/vnd.amazon.eventstream",
            # What the chunks' bytes hold (boto3's response["contentType"]).
            headers={
                "x-amzn-bedrock-content-type": "application/json",
                "cache-control": "no-cache",
                "x-streamfold-recording": entry.name,
            },
        )

    def _converse_stream(self, entry: Entry, data: bytes) -> Response:
        """ConverseStream's answer: the binary eventstream (a recorded one as it is; boto3's
        event dicts, one a line, framed as Bedrock frames them)."""
        if entry.format != "eventstream":
            frames = bytearray()
            for line in data.splitlines():
                if not line.strip():
                    continue
                try:
                    event = jiter.from_json(line)
                    ((name, payload),) = event.items()
                except (ValueError, AttributeError) as exc:
                    raise ApiError(
                        500, f"recording {entry.name!r} is not Converse events: {exc}"
                    ) from None
                headers = {
                    ":event-type": str(name),
                    ":content-type": "application/json",
                    ":message-type": "event",
                }
                frames += encode_message(headers, json.dumps(payload).encode())
            data = bytes(frames)
            entry = dataclasses.replace(entry, format="eventstream")
        return StreamingResponse(
            _paced(entry, self.speed, data),
            media_type="application/vnd.amazon.eventstream",
            headers={"cache-control": "no-cache", "x-streamfold-recording": entry.name},
        )

    async def converse(self, request: Request) -> Response:
        """POST /model/{modelId}/converse-stream or /model/{modelId}/converse."""
        streaming = request.url.path.endswith("/converse-stream")
        return await self.handle(request, "converse", stream=streaming)

    async def invoke(self, request: Request) -> Response:
        """POST /model/{modelId}/invoke-with-response-stream or /model/{modelId}/invoke."""
        streaming = request.url.path.endswith("/invoke-with-response-stream")
        return await self.handle(request, "invoke", stream=streaming)

    async def chat(self, request: Request) -> Response:
        """POST /v1/chat/completions."""
        return await self.handle(request, "chat")

    async def responses(self, request: Request) -> Response:
        """POST /v1/responses."""
        return await self.handle(request, "responses")

    async def messages(self, request: Request) -> Response:
        """POST /v1/messages."""
        return await self.handle(request, "messages")

    async def gemini(self, request: Request) -> Response:
        """POST /v1beta/models/{model}:streamGenerateContent or :generateContent."""
        target = request.path_params["target"]
        model, _, method = target.rpartition(":")
        request.path_params["model"] = model
        if method == "streamGenerateContent":
            return await self.handle(request, "gemini", stream=True)
        if method == "generateContent":
            return await self.handle(request, "gemini", stream=False)
        return JSONResponse(
            error_body("gemini", 404, f"unknown method {method!r}; expected "
                       "streamGenerateContent or generateContent"),
            404,
        )  # fmt: skip

    async def listing(self, request: Request) -> Response:
        """GET /recordings: the recordings served, by provider."""
        by_provider: dict[str, list[str]] = {}
        for entry in self.library.entries:
            by_provider.setdefault(entry.provider, []).append(entry.name)
        # Names relative to the directory: where it is on this machine is not the client's.
        return JSONResponse({"recordings": by_provider})


def _api_of(path: str) -> Api | None:
    """The API of a request path (the routes below), None for the demo and relay routes."""
    if path in ("/v1/chat/completions", "/chat/completions"):
        return "chat"
    if path in ("/v1/responses", "/responses"):
        return "responses"
    if path == "/v1/messages":
        return "messages"
    if path.startswith(("/v1beta/models/", "/v1/models/")):
        return "gemini"
    if path.startswith("/model/"):
        return "invoke"
    return None


def _refusal_body(path: str, status: int, message: str) -> dict[str, Any]:
    """A request the guard refused, in the error shape of the API at `path`."""
    api = _api_of(path)
    if api is None:
        return plain_error(path, status, message)
    return error_body(api, status, message)


def create_app(
    directory: str | Path | None = None,
    *,
    speed: float = 1.0,
    redis_url: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    allowed_hosts: Collection[str] | None = LOOPBACK_HOSTS,
) -> Starlette:
    """The replay server as a Starlette app (recordings from `directory`, default bundled).

    Request bodies are refused past `max_body` bytes; only requests whose Host header
    names one of `allowed_hosts` are served (None: any host).
    """
    server = ReplayServer(directory, speed=speed)
    prepare_request_checks()  # once per process; a first request then answers at once
    routes = [
        Route("/v1/chat/completions", server.chat, methods=["POST"]),
        Route("/chat/completions", server.chat, methods=["POST"]),
        Route("/v1/responses", server.responses, methods=["POST"]),
        Route("/responses", server.responses, methods=["POST"]),
        Route("/v1/messages", server.messages, methods=["POST"]),
        Route("/v1beta/models/{target}", server.gemini, methods=["POST"]),
        Route("/v1/models/{target}", server.gemini, methods=["POST"]),
        Route("/model/{model}/invoke-with-response-stream", server.invoke, methods=["POST"]),
        Route("/model/{model}/invoke", server.invoke, methods=["POST"]),
        Route("/model/{model}/converse-stream", server.converse, methods=["POST"]),
        Route("/model/{model}/converse", server.converse, methods=["POST"]),
        Route("/recordings", server.listing, methods=["GET"]),
    ]
    from .web import ui_routes  # the demo page: /, /ui/*, /ui-recordings, /ui-stream, /agui

    routes.extend(ui_routes(directory, speed=speed))
    lifespan = None
    if redis_url is not None:
        from .relay import Relay
        from .web.relay_routes import relay_lifespan, relay_routes

        relay = Relay.from_url(redis_url)
        routes.extend(relay_routes(relay, directory, speed=speed))
        lifespan = relay_lifespan(relay)  # a stopping worker ends its replays as cancelled
    guard = Middleware(
        RequestGuard,
        max_body=max_body,
        allowed_hosts=allowed_hosts,
        error_body=_refusal_body,
        aws_signed_paths=("/model/",),  # Bedrock's routes: botocore may send no Content-Type
    )
    app = Starlette(routes=routes, middleware=[guard], lifespan=lifespan)
    app.state.replay = server
    return app


def served_hosts(host: str, allow: Collection[str] = ()) -> frozenset[str] | None:
    """The Host names a server bound to `host` answers (None: any, when `allow` has "*").

    The loopback names, the address or name it is bound to, and `allow`, wherever it is
    bound: a page on another site can point its own DNS name at any address the browser
    reaches (the machine itself, or the LAN for `0.0.0.0`) and read the answers, unless the
    server refuses that name. So the names clients use are allowed by hand (--allow-host).
    """
    import ipaddress

    if "*" in allow:
        return None
    names = set(LOOPBACK_HOSTS) | set(allow)
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        names.add(host)  # a name the server was told to bind: chosen by its user
    else:
        if not address.is_unspecified:  # 0.0.0.0 and :: are no name a client sends
            names.add(str(address))
    return frozenset(name.lower() for name in names)


def _is_loopback(host: str) -> bool:
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run_server(
    directory: str | Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    speed: float = 1.0,
    redis_url: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    allow_hosts: Collection[str] = (),
) -> None:
    """Serve recordings with uvicorn until interrupted."""
    import uvicorn

    app = create_app(
        directory,
        speed=speed,
        redis_url=redis_url,
        max_body=max_body,
        allowed_hosts=served_hosts(host, allow_hosts),
    )
    library: Library = app.state.replay.library
    counts: dict[str, int] = {}
    for entry in library.entries:
        counts[entry.provider] = counts.get(entry.provider, 0) + 1
    summary = ", ".join(f"{n} {p}" for p, n in sorted(counts.items())) or "none"
    print(f"streamfold serve: {library.directory} ({summary}) on http://{host}:{port}")
    if not _is_loopback(host) and not allow_hosts:
        print(
            "streamfold serve: answering only loopback Host names and the bound address; "
            "add --allow-host NAME for each name clients use to reach this machine"
        )
    uvicorn.run(app, host=host, port=port, log_level="warning")
