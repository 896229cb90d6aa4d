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

With a scenario (`streamfold serve --scenario app.toml`, see `streamfold.testing`), its
turns answer instead: each request is matched on its API, model, index, last user message,
tool results and tools, and a request no turn matches gets a 404 naming the nearest turns.
Each answer is worked out in a worker thread, and concurrent requests meet the turns in
the order they came (a request that takes long to check holds up the ones after it).
Faults are asked for per request by the `x-streamfold-fault` header or the `fault` query
parameter (`status=429,retry_after=1`, `cut_after_events=3`, `stall=2`, `ttft=0.5`, ...;
see `streamfold.testing.Faults`), or written on a scenario's turn.

Every request passes `streamfold.web.guard.RequestGuard` first: JSON bodies only (415), at
most `max_body` bytes (413), and, by default, only loopback Host names (403), so a web
page elsewhere can neither post to it nor reach it by rebinding its DNS name.

Needs the `serve` extra (starlette, uvicorn).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Collection
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from .errors import UsageError
from .record import EVENT_INTERVAL, check_speed
from .recording import bundled_recordings

try:
    import anyio  # starlette's own
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise UsageError(
        "streamfold serve needs starlette and uvicorn: pip install 'streamfold[serve]'"
    ) from exc

from .testing.replayer import FAULT_HEADER, Replayer, Reply, WireRequest
from .testing.scenario import Scenario
from .web import _paced
from .web.api_requests import prepare as prepare_request_checks
from .web.guard import (
    DEFAULT_MAX_BODY,
    LOOPBACK_HOSTS,
    RequestGuard,
    RequestRefused,
    plain_error,
    read_json,
)

# The routing, checks and answers are the replay core's (streamfold.testing's transports
# answer from it too); its public names stay importable from here (see __all__).
from .web.replay_api import (
    API_PROVIDER,
    ENCODERS,
    RECORDING_HEADER,
    Api,
    ApiError,
    Entry,
    Library,
    _gemini_frames,
    anthropic_message,
    chat_completion,
    check_body,
    converse_data,
    converse_response,
    error_body,
    find_entry,
    folded_answer,
    gemini_response,
    invoke_data,
    is_beta,
    read_entry,
    response_object,
    wanted_recording,
)
from .web.replay_api import SSE_TYPE as _SSE_TYPE


class ReplayServer:
    """The replay server's state: the recordings (or a scenario) and the pacing."""

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        speed: float = 1.0,
        scenario: str | Path | Scenario | None = None,
        record: str = "none",
        upstream: str | None = None,
        redact: Collection[str] | None = None,
    ) -> None:
        self.library = Library(directory if directory is not None else bundled_recordings())
        self.speed = check_speed(speed)
        # A scenario answers every API request; else a request asking for faults goes
        # through the same replay core, its recordings the library's.
        self.replayer = (
            Replayer(scenario) if scenario is not None else Replayer(library=self.library)
        )
        # Record on miss (streamfold.testing.record): None while replaying only.
        self.recording = _record_hook(self.replayer, record, upstream, redact)
        self.upstream = upstream

    @property
    def scenario(self) -> Scenario | None:
        """The scenario answering (None: the recordings directory)."""
        return self.replayer.scenario

    def _replays(self, request: Request) -> bool:
        return self.replayer.scenario is not None or bool(
            request.headers.get(FAULT_HEADER) or request.query_params.get("fault")
        )

    async def _replay(self, request: Request) -> Response:
        """Answer from the replay core (a scenario's turn, faults), paced as `speed` says."""
        raw = await request.body()
        wire = WireRequest(
            method=request.method,
            path=request.url.path,
            query=dict(request.query_params),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=raw,
        )
        recording = self.recording
        if recording is not None and recording.mode == "all":
            return await self._forward(request, raw)
        # In a worker thread (the request checks take a while on a big body, see _body),
        # and in arrival order: concurrent requests meet a scenario's turns as they came.
        reply = await self.replayer.aanswer(wire)
        if recording is not None and reply.miss is not None:
            return await self._forward(request, raw, reply.miss)
        if not _streams(reply):
            return Response(reply.body(), reply.status, headers=reply.headers)
        if reply.drop:
            return _CutStream(reply, self.speed)
        return StreamingResponse(
            _reply_chunks(reply, self.speed), reply.status, headers=reply.headers
        )

    async def _forward(self, request: Request, raw: bytes, miss: Any = None) -> Response:
        """Answer from the upstream, recorded as a turn of the scenario (record on miss)."""
        import httpx

        assert self.recording is not None and self.upstream is not None
        url = self.upstream.rstrip("/") + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        dropped = ("host", "content-length")
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in dropped]
        outgoing = httpx.Request(request.method, url, headers=headers, content=raw)
        response = await self.recording.aforward(self.replayer, outgoing, miss)
        if response.is_stream_consumed or not isinstance(response.stream, httpx.AsyncByteStream):
            return Response(response.content, response.status_code, headers=response.headers)
        return StreamingResponse(
            response.aiter_raw(),
            response.status_code,
            headers=dict(response.headers),
            background=BackgroundTask(response.aclose),
        )

    async def _body(self, request: Request, api: Api) -> dict[str, Any]:
        try:
            body = await read_json(request)
        except RequestRefused as exc:
            raise ApiError(exc.status, exc.message) from None
        # As the real API would: an app whose follow-up request is broken learns it here.
        beta = is_beta(api, request.headers, body if isinstance(body, dict) else {})
        # In a worker thread: a body of many small blocks takes a second or so to
        # check (measured: 20,000 blocks, 0.6-1 s), and the other clients wait not.
        checked: dict[str, Any] = await anyio.to_thread.run_sync(
            functools.partial(check_body, api, body, beta=beta)
        )
        return checked

    def _entry(self, request: Request, api: Api) -> Entry:
        wanted = wanted_recording(request.headers, request.query_params)
        return find_entry(self.library, api, wanted)

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
        """Answer one API request from a recording (or the scenario's turn)."""
        if self._replays(request):
            return await self._replay(request)
        try:
            body = await self._body(request, api)
            entry = self._entry(request, api)
            data = read_entry(entry)
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
            return JSONResponse(
                folded_answer(api, entry.provider, data, entry.name, model),
                headers={"x-streamfold-recording": entry.name},
            )
        except ApiError as exc:
            refusal = error_body(api, exc.status, exc.message, exc.code, exc.param)
            return JSONResponse(refusal, exc.status)

    def _invoke_stream(self, entry: Entry, data: bytes) -> Response:
        """InvokeModelWithResponseStream's answer: the binary eventstream."""
        entry, data = invoke_data(entry, data)
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
        entry, data = converse_data(entry, data)
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


def _streams(reply: Reply) -> bool:
    """True if a reply is a stream (sent paced, chunk by chunk), not one JSON body."""
    kind = reply.headers.get("content-type", "")
    return reply.drop or len(reply.chunks) > 1 or not kind.startswith("application/json")


async def _reply_chunks(reply: Reply, speed: float) -> AsyncIterator[bytes]:
    """A reply's chunks, each after its wait (divided by `speed`; 0: none)."""
    for chunk in reply.chunks:
        wait = chunk.wait / speed if speed else 0.0
        if wait > 0:
            await anyio.sleep(wait)
        if chunk.data:
            yield chunk.data


# True in a request's task once a fault has cut its response on purpose.
_CUT: ContextVar[bool] = ContextVar("streamfold_serve_cut", default=False)
_log = logging.getLogger("streamfold.serve")


class _CutStream(StreamingResponse):
    """A reply whose connection a fault drops: its chunks sent, the response is left
    unfinished, so the server closes the connection mid-body and the client reads an
    incomplete body, as from a server that died. An exception would do the same, with
    a traceback on the console that looks like a crash of the app."""

    def __init__(self, reply: Reply, speed: float) -> None:
        super().__init__(_reply_chunks(reply, speed), reply.status, headers=reply.headers)
        self.sent = reply.sent_description()

    async def stream_response(self, send: Any) -> None:
        """Send the head and the chunks, and not the body's end."""
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await super().__call__(scope, receive, send)
        _CUT.set(True)  # (here, not in the streaming task: the server's task sees it)
        _log.info("streamfold serve: a fault dropped the connection after %s", self.sent)


class _QuietCut(logging.Filter):
    """Keeps uvicorn's "returned without completing response" error off the console for
    a response a fault cut on purpose (only there: any other is a real error)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_CUT.get() and "without completing response" in record.getMessage())


def _quiet_cuts() -> None:
    """Install the `_QuietCut` filter on uvicorn's error logger, once per process."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietCut) for f in logger.filters):
        logger.addFilter(_QuietCut())


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
    scenario: str | Path | Scenario | None = None,
    record: str = "none",
    upstream: str | None = None,
    redact: Collection[str] | None = None,
) -> Starlette:
    """The replay server as a Starlette app (recordings from `directory`, default bundled).

    Request bodies are refused past `max_body` bytes; only requests whose Host header
    names one of `allowed_hosts` are served (None: any host). With a `scenario` (a
    `streamfold.testing.Scenario` or its file), its turns answer the API requests; with
    `record="new"` (or `"all"`) and an `upstream` base URL (`https://api.openai.com`), a
    request no turn answers (or every one) is forwarded there and recorded as a turn
    (`streamfold.testing.record`; `redact`: more header or body field names never written).
    """
    server = ReplayServer(
        directory, speed=speed, scenario=scenario, record=record, upstream=upstream, redact=redact
    )
    prepare_request_checks()  # once per process; a first request then answers at once
    _quiet_cuts()
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
    if server.recording is not None:
        lifespan = _closing_upstream(server.recording, lifespan)
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


def _closing_upstream(hook: Any, inner: Any) -> Any:
    """A lifespan closing the record hook's upstream connections when the server stops
    (around `inner`, the app's other lifespan, if any)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        try:
            if inner is None:
                yield None
            else:
                async with inner(app) as state:
                    yield state
        finally:
            await hook.aclose()

    return lifespan


def _record_hook(replayer: Replayer, record: str, upstream: str | None, redact: Any) -> Any:
    """The record-on-miss hook of a serve with a scenario (None: replay only)."""
    from .testing.record import RecordHook, check_record_mode

    if check_record_mode("serve", record) == "none":
        return None
    scenario = replayer.scenario
    if scenario is None or not isinstance(upstream, str) or not upstream:
        given = "a scenario" if scenario is not None else "no scenario"
        raise UsageError(
            f"serve: record={record!r}: expected a scenario and an upstream base URL "
            f"(https://api.openai.com), got {given} and upstream {upstream!r:.80}"
        )
    import httpx

    path = Path(scenario.name)
    file = path if path.suffix in (".toml", ".json") else None
    hook = RecordHook(
        scenario, file, record, async_upstream=httpx.AsyncHTTPTransport(), redact=redact
    )
    if hook.mode == "all":
        hook.recorder.restart()
    return hook


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
    scenario: str | Path | None = None,
    record: str = "none",
    upstream: str | None = None,
    redact: Collection[str] | None = None,
) -> None:
    """Serve recordings (or a scenario's turns) with uvicorn until interrupted; `record`,
    `upstream`, `redact`: record on miss, as `create_app` says."""
    import uvicorn

    app = create_app(
        directory,
        speed=speed,
        redis_url=redis_url,
        max_body=max_body,
        allowed_hosts=served_hosts(host, allow_hosts),
        scenario=scenario,
        record=record,
        upstream=upstream,
        redact=redact,
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


__all__ = [
    "API_PROVIDER",
    "ENCODERS",
    "RECORDING_HEADER",
    "Api",
    "ApiError",
    "Entry",
    "Library",
    "ReplayServer",
    "anthropic_message",
    "chat_completion",
    "converse_response",
    "create_app",
    "error_body",
    "gemini_response",
    "response_object",
    "run_server",
    "served_hosts",
]
