"""The sans-IO core of a replay: an API request in, the answer (status, headers, paced
chunks) out. The transports and `serve` wait and send; this decides what.

Routing, request checks and the non-streaming shapes are `serve`'s own
(`streamfold.web.replay_api`); the answer comes from a `Scenario` turn, or, without a
scenario, from a recordings directory as `serve` chooses.
"""

from __future__ import annotations

import itertools
import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from ..errors import StreamfoldError, UsageError
from ..framing import StreamFormat
from ..message import Message
from ..record import EVENT_INTERVAL, load_timing, schedule, split_frames
from ..recording import bundled_recordings, detect_recording
from ..streams import to_stream
from ..web import DemoRecording
from ..web.replay_api import (
    API_PROVIDER,
    ENCODERS,
    EVENTSTREAM_TYPE,
    SSE_TYPE,
    Api,
    ApiError,
    Library,
    check_body,
    converse_data,
    error_body,
    find_entry,
    folded_answer,
    gemini_array,
    invoke_data,
    is_beta,
    parse_json_body,
    read_entry,
    route,
    wanted_recording,
)
from .faults import fail_after
from .requests import read_request
from .scenario import Faults, NoTurnMatched, Scenario, ScenarioError, Turn

FAULT_HEADER = "x-streamfold-fault"
"""A request header (or the `fault` query parameter) naming faults for its answer, as
`Faults.parse` reads them: `status=429,retry_after=1`."""

_DEFAULT_CODES = {429: "rate_limit_exceeded"}

# Each replayer's lock, per event loop: a replayer may outlive a loop (a test's, a server's).
_ORDER: RunVar[weakref.WeakKeyDictionary[Replayer, anyio.Lock]] = RunVar("streamfold_replay_order")


@dataclass(frozen=True, slots=True)
class WireRequest:
    """An HTTP request as the replay reads it (header names lower-case)."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a response body and the seconds to wait before it (at speed 1)."""

    wait: float
    data: bytes


@dataclass(slots=True)
class Reply:
    """An answer: status, headers and body chunks; `drop`: the connection breaks after
    the last chunk (a cut stream) instead of the body ending."""

    status: int
    headers: dict[str, str]
    chunks: list[Chunk]
    drop: bool = False
    turn: int | None = None
    """The scenario turn that answered (None: a recordings directory, or a miss)."""
    miss: NoTurnMatched | None = None

    def sent_description(self) -> str:
        """How much of the body went before the connection broke, in words."""
        sent = sum(len(chunk.data) for chunk in self.chunks)
        return f"{sent} bytes of the body"

    def body(self) -> bytes:
        """The whole body, joined."""
        return b"".join(chunk.data for chunk in self.chunks)


def _json_reply(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Reply:
    data = json.dumps(body).encode()
    return Reply(
        status,
        {"content-type": "application/json", **(headers or {})},
        [Chunk(0.0, data)],
    )


@dataclass(slots=True)
class _Stream:
    """A stream answer before faults and pacing: its bytes, framing and provider."""

    data: bytes
    format: StreamFormat
    provider: str
    name: str
    timing: list[tuple[int, float]] | None = field(default=None)


class Replayer:
    """Answers API requests from a scenario or a recordings directory (see the module)."""

    def __init__(
        self,
        scenario: Scenario | str | Path | None = None,
        *,
        recordings: str | Path | None = None,
        faults: Faults | str | None = None,
        on_miss: Literal["respond", "raise"] = "respond",
        check_requests: bool = True,
        library: Library | None = None,
    ) -> None:
        if isinstance(scenario, str | Path):
            scenario = Scenario.load(scenario)
        if scenario is not None and not isinstance(scenario, Scenario):
            raise UsageError(
                f"scenario: expected a Scenario or a scenario file's path, got {scenario!r:.80}"
            )
        if scenario is not None and (recordings is not None or library is not None):
            raise UsageError("expected a scenario or a recordings directory, got both")
        self.scenario = scenario
        self.library = library
        if scenario is None and library is None:
            self.library = Library(recordings if recordings is not None else bundled_recordings())
        if isinstance(faults, str):
            faults = Faults.parse(faults)
        self.faults = faults
        if on_miss not in ("respond", "raise"):
            raise UsageError(f"on_miss: expected 'respond' or 'raise', got {on_miss!r:.80}")
        self.on_miss = on_miss
        self.check_requests = check_requests
        self._misses: list[NoTurnMatched] = []

    @property
    def misses(self) -> list[NoTurnMatched]:
        """The requests no turn answered, in order."""
        return self.scenario.misses if self.scenario is not None else self._misses

    async def aanswer(self, request: WireRequest) -> Reply:
        """`answer`, worked out in a worker thread: the request check (the API's request
        schema, its SDK types imported and built on a first request: up to a second; a
        body of many blocks: as long) and a recording read from disk would stall the
        event loop's other tasks. Concurrent requests still meet the turns in the order
        they came: a lock of this replayer's on the loop, taken first come first served,
        as they did when answered on the loop (asyncio or trio)."""
        locks = _ORDER.get(None)
        if locks is None:
            locks = weakref.WeakKeyDictionary()
            _ORDER.set(locks)
        lock = locks.get(self)
        if lock is None:
            lock = locks[self] = anyio.Lock()
        async with lock:
            return await anyio.to_thread.run_sync(self.answer, request)

    def answer(self, request: WireRequest) -> Reply:
        """The answer to one request; raises NoTurnMatched on a miss with on_miss="raise"."""
        try:
            routed = route(request.path) if request.method.upper() == "POST" else None
        except ApiError as exc:
            return _json_reply(exc.status, error_body("gemini", exc.status, exc.message))
        if routed is None:
            message = f"no API at {request.method} {request.path}"
            return _json_reply(404, {"error": {"message": message, "type": "not_found"}})
        api, forced, path_model = routed
        try:
            return self._answer(request, api, forced, path_model)
        except ApiError as exc:
            refusal = error_body(api, exc.status, exc.message, exc.code, exc.param)
            # A scenario's own mistake (a recording missing, of another API) is a 500 the
            # SDKs would retry, for seconds, to the same end: they are told not to.
            stop = {"x-should-retry": "false"} if exc.code == "scenario" else {}
            return _json_reply(exc.status, refusal, stop)

    def _answer(
        self, request: WireRequest, api: Api, forced: bool | None, path_model: str | None
    ) -> Reply:
        body = parse_json_body(request.body)
        beta = is_beta(api, request.headers, body if isinstance(body, dict) else {})
        body = check_body(api, body, beta=beta, full=self.check_requests)
        stream = forced if forced is not None else body.get("stream") is True
        model = str(path_model or body.get("model") or "streamfold")
        faults = self._request_faults(request)
        turn_n: int | None = None
        if self.scenario is not None:
            summary = read_request(api, body, model=path_model, stream=stream)
            try:
                turn_n, turn = self.scenario.choose(summary)
            except NoTurnMatched as miss:
                if self.on_miss == "raise":
                    raise
                return self._miss_reply(api, miss)
            if turn.faults is not None:
                faults = turn.faults.over(faults)
            reply = self._turn_reply(request, api, stream, model, turn, faults)
        else:
            reply = self._library_reply(request, api, stream, model, faults)
        if faults is not None and reply.status == 200 and not stream:
            reply = _whole_body_faults(reply, faults)
        reply.turn = turn_n
        if turn_n is not None:
            reply.headers["x-streamfold-turn"] = str(turn_n)
        return reply

    def _request_faults(self, request: WireRequest) -> Faults | None:
        spec = request.headers.get(FAULT_HEADER) or request.query.get("fault")
        if not spec:
            return self.faults
        try:
            return Faults.parse(spec).over(self.faults)
        except ScenarioError as exc:
            raise ApiError(400, str(exc), "invalid_fault") from None

    def _miss_reply(self, api: Api, miss: NoTurnMatched) -> Reply:
        # 404 and x-should-retry: the SDKs neither retry it nor take it for a network
        # fault, so the test stops at once with the miss's message in the error.
        body = error_body(api, 404, str(miss), "no_turn_matched")
        reply = _json_reply(404, body, {"x-should-retry": "false"})
        reply.miss = miss
        return reply

    # --- the answer's source ---------------------------------------------------------

    def _library_reply(
        self, request: WireRequest, api: Api, stream: bool, model: str, faults: Faults | None
    ) -> Reply:
        assert self.library is not None
        entry = find_entry(self.library, api, wanted_recording(request.headers, request.query))
        if faults is not None and faults.status is not None:
            return _status_reply(api, faults)
        data = read_entry(entry)
        if not stream:
            answer = folded_answer(api, entry.provider, data, entry.name, model)
            return _json_reply(200, answer, {"x-streamfold-recording": entry.name})
        source = _Stream(data, entry.format, entry.provider, entry.name, entry.timing())
        return self._stream_reply(request, api, source, faults)

    def _turn_reply(
        self,
        request: WireRequest,
        api: Api,
        stream: bool,
        model: str,
        turn: Turn,
        faults: Faults | None,
    ) -> Reply:
        assert self.scenario is not None
        if faults is not None and faults.status is not None:
            return _status_reply(api, faults)
        message = turn.answer_message()
        if message is not None:
            if not stream:
                return _json_reply(200, ENCODERS[api](message, model))
            provider = "anthropic" if api == "invoke" else API_PROVIDER[api]
            data, format = _message_stream(message, provider, model)
            source = _Stream(data, format, provider, turn.name or "message")
            return self._stream_reply(request, api, source, faults)
        source = self._turn_recording(api, turn)
        if not stream:
            answer = folded_answer(api, source.provider, source.data, source.name, model)
            return _json_reply(200, answer, {"x-streamfold-recording": source.name})
        return self._stream_reply(request, api, source, faults)

    def _turn_recording(self, api: Api, turn: Turn) -> _Stream:
        assert self.scenario is not None and turn.recording is not None
        path = self.scenario.recording_path(turn)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ApiError(
                500, f"{self.scenario.name}: recording {turn.recording!r}: {exc}", "scenario"
            ) from None
        format, provider = detect_recording(data)
        if format is None or provider is None:
            raise ApiError(
                500,
                f"{self.scenario.name}: {turn.recording!r}: expected a recorded stream "
                "(SSE, NDJSON or eventstream of a known provider), got another file",
                "scenario",
            )
        wanted = {"invoke": ("bedrock-invoke", "anthropic")}.get(api, (API_PROVIDER[api],))
        if provider not in wanted:
            raise ApiError(
                500,
                f"{self.scenario.name}: {turn.recording!r} holds {provider} events; "
                f"a request to {api!r} reads {' or '.join(wanted)} streams",
                "scenario",
            )
        try:
            timing = load_timing(path)
        except UsageError:
            timing = None  # the pacing is not worth failing a turn for
        return _Stream(data, format, provider, turn.recording, timing)

    # --- streams, faults and pacing --------------------------------------------------

    def _stream_reply(
        self, request: WireRequest, api: Api, source: _Stream, faults: Faults | None
    ) -> Reply:
        entry = DemoRecording(
            source.name, Path(source.name), source.provider, source.format, Path(".")
        )
        headers = {"cache-control": "no-cache", "x-streamfold-recording": source.name}
        data, format, timing = source.data, source.format, source.timing
        pieces: list[bytes] | None = None
        if api == "invoke":
            entry, data = invoke_data(entry, data)
            format, timing = "eventstream", None
            headers["x-amzn-bedrock-content-type"] = "application/json"
            headers["content-type"] = EVENTSTREAM_TYPE
        elif api == "converse":
            entry, data = converse_data(entry, data)
            format, timing = "eventstream", None
            headers["content-type"] = EVENTSTREAM_TYPE
        elif api == "gemini" and request.query.get("alt") != "sse":
            pieces = gemini_array(data)
            timing = None
            headers["content-type"] = "application/json"
        else:
            headers["content-type"] = SSE_TYPE if format == "sse" else "application/x-ndjson"
        chunks = _paced_chunks(data, format, timing, pieces, faults)
        drop = False
        if faults is not None:
            chunks, drop = _apply_cut(chunks, faults, source.provider)
        return Reply(200, headers, chunks, drop=drop)


def faulted_chunks(
    data: bytes,
    format: StreamFormat,
    provider: str,
    faults: Faults,
    *,
    timing: list[tuple[int, float]] | None = None,
) -> tuple[list[Chunk], bool]:
    """A recorded stream's chunks with `faults` played (cut, stall, pacing, the provider's
    error event; waits at speed 1), and whether the connection then drops. UsageError for
    a status fault (an HTTP answer, not a stream's: `serve` and the transports play it)."""
    if faults.status is not None:
        raise UsageError(
            f"faults: status {faults.status} is an HTTP answer before any stream; expected "
            "stream faults here (cut_after_events, cut_after_bytes, stall, ttft, ...)"
        )
    try:
        chunks = _paced_chunks(data, format, timing, None, faults)
        return _apply_cut(chunks, faults, provider)
    except ApiError as exc:
        raise UsageError(exc.message) from None


def _whole_body_faults(reply: Reply, faults: Faults) -> Reply:
    """A non-streaming answer's faults: it comes after `ttft` and `stall` seconds (the
    whole generation's wait), and `cut_after_bytes` cuts its JSON (the connection drops,
    or the body ends short with `cut="end"`)."""
    wait = (faults.ttft or 0.0) + (faults.stall or 0.0)
    body = reply.body()
    cut = faults.cut_after_bytes is not None and faults.cut_after_bytes < len(body)
    if cut:
        body = body[: faults.cut_after_bytes]
    reply.chunks = [Chunk(wait, body)]
    reply.drop = cut and faults.cut == "drop"
    return reply


def _status_reply(api: Api, faults: Faults) -> Reply:
    assert faults.status is not None
    status = faults.status
    message = faults.error_message or f"streamfold replay: a {status} fault"
    body = error_body(api, status, message, _DEFAULT_CODES.get(status))
    headers: dict[str, str] = {}
    if faults.retry_after is not None:
        headers["retry-after"] = f"{faults.retry_after:g}"
        # The openai and anthropic SDKs read the milliseconds first: a fraction of a
        # second (a fast test's) survives there, not in retry-after's whole seconds.
        headers["retry-after-ms"] = f"{faults.retry_after * 1000:g}"
    if api in ("invoke", "converse"):
        headers["x-amzn-errortype"] = str(body.get("__type", ""))
    return _json_reply(status, body, headers)


def _message_stream(message: Message, provider: str, model: str) -> tuple[bytes, StreamFormat]:
    """A Message as the provider's own stream bytes (`streamfold.to_stream`)."""
    try:
        data = b"".join(to_stream(message, provider, model=model))
    except StreamfoldError as exc:
        raise ApiError(500, f"a turn's message does not stream: {exc}", "scenario") from None
    format, _ = detect_recording(data)
    return data, format or "sse"


def _event_times(
    data: bytes, events: list[bytes], timing: list[tuple[int, float]] | None
) -> list[float] | None:
    """When each event had fully arrived, from a recording's timing marks (None if the
    marks do not cover these bytes)."""
    if not timing or timing[-1][0] != len(data):
        return None
    times: list[float] = []
    end, mark = 0, 0
    for event in events:
        end += len(event)
        while mark < len(timing) - 1 and timing[mark][0] < end:
            mark += 1
        times.append(timing[mark][1])
    return times


def _paced_chunks(
    data: bytes,
    format: StreamFormat,
    timing: list[tuple[int, float]] | None,
    pieces: list[bytes] | None,
    faults: Faults | None,
) -> list[Chunk]:
    """The body as chunks with their waits: as recorded (or an event every
    EVENT_INTERVAL), or an event a chunk when faults need events (cut, stall, physics)."""
    by_event = faults is not None and (
        faults.cut_after_events is not None
        or faults.stall is not None
        or faults.ttft is not None
        or faults.tokens_per_second is not None
        or faults.error_frame is not None
    )
    if pieces is None and not by_event:
        return [Chunk(wait, chunk) for wait, chunk in schedule(data, format, timing=timing)]
    events = pieces if pieces is not None else split_frames(data, format)
    times = _event_times(data, events, timing) if pieces is None else None
    if times is not None:
        waits = [times[0], *(b - a for a, b in itertools.pairwise(times))]
    else:
        waits = [0.0 if i == 0 else EVENT_INTERVAL for i in range(len(events))]
    if faults is not None:
        if faults.tokens_per_second is not None:
            waits = [0.0 if i == 0 else 1.0 / faults.tokens_per_second for i in range(len(waits))]
        if faults.ttft is not None and waits:
            waits[0] = faults.ttft
        if faults.stall is not None and faults.stall_after_events < len(waits):
            waits[faults.stall_after_events] += faults.stall
    return [Chunk(max(0.0, wait), event) for wait, event in zip(waits, events, strict=True)]


def _apply_cut(chunks: list[Chunk], faults: Faults, provider: str) -> tuple[list[Chunk], bool]:
    """The chunks cut as the faults say, and whether the connection then drops."""
    cut = False
    if faults.cut_after_events is not None and faults.cut_after_events < len(chunks):
        chunks, cut = chunks[: faults.cut_after_events], True
    if faults.cut_after_bytes is not None:
        kept: list[Chunk] = []
        left = faults.cut_after_bytes
        for chunk in chunks:
            if left <= 0:
                cut = True
                break
            if len(chunk.data) > left:
                kept.append(Chunk(chunk.wait, chunk.data[:left]))
                cut, left = True, 0
                break
            kept.append(chunk)
            left -= len(chunk.data)
        chunks = kept
    if faults.error_frame is not None:
        # The provider's own error event ends the stream: the server closed it cleanly.
        chunks = [*chunks, Chunk(0.0, _error_frame(chunks, provider, faults))]
        return chunks, False
    return chunks, cut and faults.cut == "drop"


def _error_frame(chunks: list[Chunk], provider: str, faults: Faults) -> bytes:
    """The provider's own mid-stream error event after `chunks` (a Responses one numbered
    after the last event sent), from `streamfold.testing.faults`."""
    kind = faults.error_frame or None
    try:
        sent = [chunk.data for chunk in chunks]
        return fail_after(sent, len(sent), provider, kind, faults.error_message)[-1]
    except StreamfoldError as exc:
        raise ApiError(500, f"error_frame {kind!r}: {exc}", "scenario") from None


__all__ = ["FAULT_HEADER", "Chunk", "Replayer", "Reply", "WireRequest", "faulted_chunks"]
