"""httpx transports that answer the official SDKs from recordings, in the test's process.

    import httpx, openai
    from streamfold.testing import ReplayTransport, Scenario

    transport = ReplayTransport(Scenario.load("tests/scenarios/weather.toml"), speed=0)
    client = openai.OpenAI(api_key="test", http_client=httpx.Client(transport=transport))

One class serves both HTTP libraries the SDKs build on, `httpx` and `httpx2` (the current
anthropic and google-genai SDKs accept only `httpx2` clients; openai takes either): it
answers each request with a response of the request's own library. The routes are those
of `streamfold serve` (`/v1/chat/completions`, `/v1/responses`, `/v1/messages`,
`/v1beta/models/{model}:streamGenerateContent`, ...), whatever the host: no port, no
server. Claude on Bedrock through the anthropic SDK's `AnthropicBedrock` (an
httpx2 client) is answered too; boto3's `bedrock-runtime` client is botocore's, not httpx:
point it at `streamfold serve` (`endpoint_url=`) instead.

The answer comes from a `Scenario` (matched turn by turn), or, with a directory of
recordings (`ReplayTransport(recordings="dir")`), as `serve` answers: the recording named
by the `x-streamfold-recording` header, else the API's default.

A request no turn matches is a miss (`NoTurnMatched`). With `on_miss="respond"` (the
default) the SDK gets a 404 in the API's own error shape holding the miss's message (the
request, and the nearest turns with why each did not match), with `x-should-retry: false`:
no SDK retries it, so the test fails at once with the message in the SDK's error. The miss
is also kept in `transport.misses`, and `transport.check()` raises the first one: for a
test whose app swallows errors. With `on_miss="raise"` the transport raises
`NoTurnMatched` itself: the openai SDK and plain httpx let it through as it is; the
anthropic SDK wraps any transport exception in `APIConnectionError` (the miss its
`__cause__`) and retries it, so use `max_retries=0` there.

Waits (recorded pacing, `Faults.stall`, `ttft`, `tokens_per_second`) are divided by
`speed` (0: none at all); the sync transport sleeps with `time.sleep`, the async one with
`anyio.sleep`. The async transport works out each answer (the request check, the turn's
choice, a recording read from disk) in a worker thread, so the app's other tasks run
meanwhile (asyncio or trio); concurrent requests still meet the turns in arrival order.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio

from ..errors import UsageError

try:
    import httpx
    import httpx2
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise UsageError(
        "streamfold's replay transports need httpx and httpx2 (the SDKs' HTTP clients): "
        "pip install 'streamfold[testing]'"
    ) from exc

from ..errors import UsageError
from ..record import check_speed
from .record import RecordHook, RecordMode, attach_recorder, check_record_mode
from .replayer import Chunk, Replayer, Reply, WireRequest
from .scenario import Faults, NoTurnMatched, Scenario

OnMiss = Literal["respond", "raise"]


class _Transport:
    """What the sync and async transports share: the replayer and the conversions."""

    def __init__(
        self,
        scenario: Scenario | str | Path | None = None,
        *,
        recordings: str | Path | None = None,
        faults: Faults | str | None = None,
        speed: float = 1.0,
        on_miss: OnMiss = "respond",
        check_requests: bool = True,
        record: RecordMode = "none",
        upstream: Any = None,
        redact: Any = None,
    ) -> None:
        self.speed = check_speed(speed)
        self.replayer = Replayer(
            scenario,
            recordings=recordings,
            faults=faults,
            on_miss=on_miss,
            check_requests=check_requests,
        )
        # Record on miss (streamfold.testing.record): None while replaying only.
        self.recording: RecordHook | None = None
        if check_record_mode("ReplayTransport", record) != "none":
            attach_recorder(self, _scenario_file(self.scenario), record, upstream=upstream,
                            redact=redact)  # fmt: skip

    @property
    def scenario(self) -> Scenario | None:
        """The scenario answering (None when answering from a recordings directory)."""
        return self.replayer.scenario

    @property
    def misses(self) -> list[NoTurnMatched]:
        """The requests no turn answered, in order."""
        return self.replayer.misses

    def check(self) -> None:
        """Raise the first miss (NoTurnMatched), if any request went unanswered."""
        if self.misses:
            raise self.misses[0]

    def _wire(self, request: httpx.Request | httpx2.Request, body: bytes) -> WireRequest:
        return WireRequest(
            method=request.method,
            path=request.url.path,
            query=dict(request.url.params),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
        )

    def _response(
        self,
        request: httpx.Request | httpx2.Request,
        reply: Reply,
        stream: Any,
    ) -> httpx.Response | httpx2.Response:
        if isinstance(request, httpx2.Request):
            return httpx2.Response(reply.status, headers=reply.headers, stream=stream)
        return httpx.Response(reply.status, headers=reply.headers, stream=stream)


def _broken(request: httpx.Request | httpx2.Request, reply: Reply) -> Exception:
    """What the request's library raises when a server drops the connection mid-body."""
    message = f"streamfold replay: connection dropped after {reply.sent_description()}"
    if isinstance(request, httpx2.Request):
        return httpx2.RemoteProtocolError(message)
    return httpx.RemoteProtocolError(message)


class _SyncStream(httpx.SyncByteStream, httpx2.SyncByteStream):
    def __init__(self, request: Any, reply: Reply, speed: float) -> None:
        self._request = request
        self._reply = reply
        self._speed = speed

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._reply.chunks:
            wait = chunk.wait / self._speed if self._speed else 0.0
            if wait > 0:
                time.sleep(wait)
            if chunk.data:
                yield chunk.data
        if self._reply.drop:
            raise _broken(self._request, self._reply)


class _AsyncStream(httpx.AsyncByteStream, httpx2.AsyncByteStream):
    def __init__(self, request: Any, reply: Reply, speed: float) -> None:
        self._request = request
        self._reply = reply
        self._speed = speed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._reply.chunks:
            wait = chunk.wait / self._speed if self._speed else 0.0
            if wait > 0:
                await anyio.sleep(wait)
            if chunk.data:
                yield chunk.data
        if self._reply.drop:
            raise _broken(self._request, self._reply)


class ReplayTransport(_Transport, httpx.BaseTransport, httpx2.BaseTransport):
    """A sync httpx / httpx2 transport answering from a scenario or recordings directory.

    `faults` apply to every answer (a turn's own fill the fields they set); see the module
    docstring for `on_miss` and `speed`. `check_requests`: refuse a body the real API
    would refuse (400 in its error shape), as `serve` does.
    """

    def handle_request(self, request: Any) -> Any:
        """Answer one request (an `httpx.Request` or an `httpx2.Request`)."""
        wire = self._wire(request, request.read())
        recording = self.recording
        if recording is not None and recording.mode == "all":
            return recording.forward(self, request)
        reply = self.replayer.answer(wire)
        if recording is not None and reply.miss is not None:
            return recording.forward(self, request, reply.miss)
        return self._response(request, reply, _SyncStream(request, reply, self.speed))


class AsyncReplayTransport(_Transport, httpx.AsyncBaseTransport, httpx2.AsyncBaseTransport):
    """The async twin of `ReplayTransport`: its waits are `anyio.sleep`s, and each answer
    is worked out in a worker thread, off the event loop (asyncio or trio)."""

    async def handle_async_request(self, request: Any) -> Any:
        """Answer one request (an `httpx.Request` or an `httpx2.Request`)."""
        wire = self._wire(request, await request.aread())
        recording = self.recording
        if recording is not None and recording.mode == "all":
            return await recording.aforward(self, request)
        reply = await self._answer(wire)
        if recording is not None and reply.miss is not None:
            return await recording.aforward(self, request, reply.miss)
        return self._response(request, reply, _AsyncStream(request, reply, self.speed))

    async def _answer(self, wire: WireRequest) -> Reply:
        """The replayer's answer, off the event loop, in the order the requests came
        (`Replayer.aanswer`)."""
        return await self.replayer.aanswer(wire)


def _scenario_file(scenario: Scenario | None) -> Path | None:
    """The file a scenario was loaded from, where recorded turns are added (None: built in
    Python, its recorded turns kept in memory)."""
    if scenario is None:
        raise UsageError("record: expected a scenario to add the recorded turns to, got none")
    path = Path(scenario.name)
    return path if path.suffix in (".toml", ".json") else None


__all__ = ["AsyncReplayTransport", "Chunk", "OnMiss", "ReplayTransport"]
