"""Record on miss: a request no turn answers goes to the real API, and its answer is kept.

A replay transport given `record="new"` forwards a request that matches no turn of its
scenario to an upstream (any httpx or httpx2 transport; by default
`httpx.HTTPTransport()`, the real API at the URL the client asked); with `record="all"`
it forwards every request. The answer streams back to the caller as it arrives, and when
it ends it is written beside the scenario file, in streamfold's recording format
(`streamfold.record`):

    scenarios/weather.toml                              the scenario: a turn is appended
    scenarios/weather/001-chat.sse                      the answer's bytes, as they came
    scenarios/weather/001-chat.sse.timing.json          when each chunk arrived

The turn matches the request on its API, model, the start of its last user message, the
tool result it carries (by call id) or that it carries none, and the tools it offers. The
next run replays it without a network. `record="all"` re-records: the scenario file's
turns are replaced and the earlier answers' files removed.

A request that does not ask to stream is asked upstream as a stream (the same body with
`"stream": true`; Gemini's `:streamGenerateContent?alt=sse`), so the recording is the
API's own stream with its timing; the caller gets it folded into the API's
non-streaming shape, as a replay of the recording answers it.

Secrets never reach a file: the headers `authorization`, `proxy-authorization`,
`x-api-key`, `api-key`, `x-goog-api-key`, `cookie` and `set-cookie`, the query parameter
`key` (Gemini's API key), and every header, query parameter or JSON body field the caller
names in `redact=` are never written; and the value each of them carried is masked
wherever else it appears in what is written (a server echoing a key in its answer, a key
repeated in a prompt) by as many `*`, so the timing's byte offsets stay true.

A response with an error status (a 429, a 500) passes through unrecorded: a rate limit of
the day is no fixture; the next run asks again.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..arguments import describe
from ..errors import UsageError
from ..record import TIMING_VERSION, timing_path
from ..recording import detect_recording
from ..web.replay_api import ApiError, folded_answer, route
from .requests import read_request
from .scenario import ApiRequest

RecordMode = Literal["none", "new", "all"]
RECORD_MODES: tuple[RecordMode, ...] = ("none", "new", "all")

SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "set-cookie",
    }
)
"""Headers never written, whatever `redact` says."""

SECRET_QUERY = frozenset({"key"})
"""Query parameters never written (Gemini takes its API key as `?key=`)."""

# Headers a turn keeps: what a person reading the scenario wants to see of the request.
_KEPT_HEADERS = frozenset({"anthropic-beta", "anthropic-version", "openai-beta"})
# Secrets shorter than this are not masked elsewhere: "1" would mask every digit.
_MIN_MASKED = 6
_STREAM_TYPES = {
    "text/event-stream": "sse",
    "application/x-ndjson": "ndjson",
    "application/jsonl": "ndjson",
    "application/vnd.amazon.eventstream": "eventstream",
}


def check_record_mode(function: str, mode: Any) -> RecordMode:
    """`mode` if it is "none", "new" or "all"; UsageError saying so if not."""
    if mode not in RECORD_MODES or not isinstance(mode, str):
        raise UsageError(
            f'{function}: record: expected "none", "new" or "all", got {describe(mode)}'
        )
    return mode  # type: ignore[return-value]


# --- redaction -------------------------------------------------------------------------


@dataclass(frozen=True)
class Redaction:
    """What never reaches a file: header, query parameter and body field names (any
    depth, any case), besides `SECRET_HEADERS` and `SECRET_QUERY`."""

    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, function: str, names: Any) -> Redaction:
        """The redaction of the names a caller gave (None: the built-in ones alone)."""
        if names is None:
            return cls()
        if isinstance(names, str | bytes) or not isinstance(names, Collection):
            raise UsageError(
                f"{function}: redact: expected a list of header or field names, "
                f"got {describe(names)}"
            )
        bad = [name for name in names if not isinstance(name, str) or not name]
        if bad:
            raise UsageError(
                f"{function}: redact: expected names (non-empty str), got {describe(bad[0])}"
            )
        return cls(frozenset(name.lower() for name in names))

    def header(self, name: str) -> bool:
        lower = name.lower()
        return lower in SECRET_HEADERS or lower in self.names

    def query(self, name: str) -> bool:
        lower = name.lower()
        return lower in SECRET_QUERY or lower in self.names

    def secrets(self, headers: Mapping[str, str], query: Mapping[str, str], body: Any) -> list[str]:
        """The values the request carried under a redacted name: masked wherever they
        appear in what is written (longest first, so a key inside a header is masked
        whole)."""
        found: set[str] = set()
        for name, value in headers.items():
            if self.header(name):
                found.add(value)
                # "Bearer sk-...": the key alone may appear elsewhere.
                found.update(value.split())
                # A cookie's values, each on its own.
                found.update(part.split("=", 1)[-1].strip() for part in value.split(";"))
        for name, value in query.items():
            if self.query(name):
                found.add(value)
        _field_values(body, self.names, found)
        return sorted((s for s in found if len(s) >= _MIN_MASKED), key=len, reverse=True)

    def body(self, value: Any) -> Any:
        """A JSON body with every named field's value replaced by "<redacted>"."""
        if isinstance(value, dict):
            return {
                key: "<redacted>" if key.lower() in self.names else self.body(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self.body(item) for item in value]
        return value


def _field_values(value: Any, names: frozenset[str], out: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key.lower() in names:
                out.update(_scalars(item))
            else:
                _field_values(item, names, out)
    elif isinstance(value, list):
        for item in value:
            _field_values(item, names, out)


def _scalars(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield json.dumps(value)
    elif isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _scalars(item)


def mask(data: bytes, secrets: list[str]) -> bytes:
    """`data` with every secret (as written, and as JSON escapes it) masked by as many
    `*`: the length, and so every byte offset after it, stays."""
    for secret in secrets:
        for form in {secret.encode(), json.dumps(secret)[1:-1].encode()}:
            if form in data:
                data = data.replace(form, b"*" * len(form))
    return data


# --- what a turn matches on ---------------------------------------------------------------


def read_api_request(path: str, body: Any) -> ApiRequest | None:
    """The request as a turn matches it (`streamfold.testing.read_request`), None for a
    path of no API a replay answers."""
    try:
        routed = route(path)
    except ApiError:
        routed = None
    if routed is None:
        return None
    api, forced, path_model = routed
    body = body if isinstance(body, dict) else {}
    stream = forced if forced is not None else body.get("stream") is True
    return read_request(api, body, model=path_model, stream=stream)


# A request that does not ask to stream is asked upstream as a stream: the recording is
# then the API's own stream, with its timing, and the caller gets that stream folded in
# the API's non-streaming shape: what a replay of the recording answers it.
_STREAM_PATHS = {
    ":generateContent": ":streamGenerateContent",
    "/invoke": "/invoke-with-response-stream",
    "/converse": "/converse-stream",
}


def as_streaming(url: str, path: str, body: Any) -> tuple[str, Any]:
    """The URL and body of `body`'s request asking for a stream instead."""
    for plain, streamed in _STREAM_PATHS.items():
        if path.endswith(plain):
            url = url.replace(path, path[: -len(plain)] + streamed, 1)
            if plain == ":generateContent":
                url += ("&" if "?" in url else "?") + "alt=sse"
            return url, body
    body = {**body, "stream": True}
    if path.endswith("/chat/completions") and "stream_options" not in body:
        body["stream_options"] = {"include_usage": True}  # the usage, as a plain answer has
    return url, body


# --- the scenario file ---------------------------------------------------------------

_USER_CHARS = 200  # of the last user message a recorded turn matches (a substring: its start)


def turn_entry(turn: RecordedTurn, scenario_dir: Path, number: int) -> dict[str, Any]:
    """A recorded turn as a scenario file's turn: its name, what it matches and the
    recording (relative to the scenario's directory) that answers it."""
    return {
        "name": f"recorded {number}",
        "match": turn.match,
        "recording": turn.file.relative_to(scenario_dir).as_posix(),
    }


def match_of(request: ApiRequest) -> dict[str, Any]:
    """What a recorded turn matches: the API, the model, the start of the last user
    message, the tool result the request carries (or that it carries none), the tools."""
    match: dict[str, Any] = {"api": request.api}
    if request.model:
        match["model"] = request.model
    if request.last_user:
        match["user"] = request.last_user[:_USER_CHARS]
    # A follow-up carries the same user message as the request before it: the tool result
    # tells them apart (by its call id, when it has one: two calls of one tool differ).
    last = request.tool_results[-1] if request.tool_results else None
    match["tool_result"] = (last.call_id or last.name or True) if last is not None else False
    if request.tools:
        match["tools"] = list(request.tools)
    return match


def append_turn(path: Path, entry: dict[str, Any], *, replace: bool = False) -> None:
    """Add a turn to a scenario file (TOML, or JSON by its suffix), creating the file if
    absent; `replace`: the file's turns are dropped first (a re-recording)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        data: dict[str, Any] = {"turns": []}
        if path.exists() and not replace:
            data = json.loads(path.read_bytes())
        data.setdefault("turns", []).append(entry)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return
    text = "" if replace or not path.exists() else path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text += "\n"
    path.write_text(text + ("\n" if text else "") + toml_turn(entry), encoding="utf-8")


def toml_turn(entry: dict[str, Any]) -> str:
    """One `[[turns]]` table in TOML: scalars first, then `[turns.<table>]` for the dicts."""
    lines = ["[[turns]]"]
    tables = []
    for key, value in entry.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, table in tables:
        lines.append(f"[turns.{key}]")
        lines.extend(f"{name} = {_toml_value(value)}" for name, value in table.items())
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007F")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise UsageError(f"toml_turn: expected str, bool, number or list, got {describe(value)}")


# --- the recorder ------------------------------------------------------------------------


@dataclass
class RecordedTurn:
    """A turn recorded from upstream: what it matches (a `Match`'s fields), the recording
    that answers it, and the request as written down (secrets redacted and masked)."""

    match: dict[str, Any]
    file: Path
    request: dict[str, Any] = field(default_factory=dict)


class Recorder:
    """Forwards requests to an upstream transport and records each answer as a turn.

    `directory`: where the answers are written; `on_turn(turn)` is told of each turn when
    its answer has ended (the scenario appends it). Thread- and task-safe: the numbering
    of the files is taken under a lock.
    """

    def __init__(
        self,
        upstream: Any,
        directory: str | Path,
        *,
        redact: Any = None,
        on_turn: Callable[[RecordedTurn], None] | None = None,
        async_upstream: Any = None,
        function: str = "Recorder",
    ) -> None:
        self.library = _library_of(function, upstream)
        self.upstream = upstream
        self.async_library = _library_of(function, async_upstream or upstream)
        self.async_upstream = async_upstream or upstream
        self.directory = Path(directory)
        self.redaction = Redaction.of(function, redact)
        self.on_turn = on_turn
        self.turns: list[RecordedTurn] = []
        self._lock = threading.Lock()
        self._next = _first_free(self.directory)

    def restart(self) -> None:
        """Number the answers from 1 again, the ones of an earlier recording removed: a
        re-recording (`record="all"`) leaves no stale file behind."""
        with self._lock:
            for path in self.directory.glob("[0-9][0-9][0-9]-*"):
                path.unlink()
            self._next = 1

    # -- sync ---------------------------------------------------------------------------

    def handle_request(self, request: Any) -> Any:
        """Forward `request` (an httpx or httpx2 Request) upstream and return its
        response (of the request's library), recorded while the caller reads it."""
        if not hasattr(self.upstream, "handle_request"):
            raise UsageError(
                "record: expected a sync upstream transport for a sync client "
                f"(httpx.HTTPTransport), got {type(self.upstream).__name__}"
            )
        content = request.read()
        tape = _Tape(self, request, content)
        response = self.upstream.handle_request(tape.outgoing(self.library))
        if not tape.records(response):
            return self._as_callers(request, response, content=response.read())
        stream = _stream_class(_module_of(request), asynchronous=False)(tape, response.stream)
        if tape.streamed:
            return self._as_callers(request, response, stream=stream)
        with contextlib.closing(stream):
            for _ in stream:
                pass  # the whole stream, folded below into the API's plain answer
        return self._as_callers(request, response, content=tape.plain_answer())

    # -- async --------------------------------------------------------------------------

    async def handle_async_request(self, request: Any) -> Any:
        """The async `handle_request`, for an async client and an async upstream."""
        upstream = self.async_upstream
        if not hasattr(upstream, "handle_async_request"):
            raise UsageError(
                "record: expected an async upstream transport for an async client "
                f"(httpx.AsyncHTTPTransport), got {type(upstream).__name__}"
            )
        content = await request.aread()
        tape = _Tape(self, request, content)
        response = await upstream.handle_async_request(tape.outgoing(self.async_library))
        if not tape.records(response):
            return self._as_callers(request, response, content=await response.aread())
        stream = _stream_class(_module_of(request), asynchronous=True)(tape, response.stream)
        if tape.streamed:
            return self._as_callers(request, response, stream=stream)
        try:
            async for _ in stream:
                pass
        finally:
            await stream.aclose()
        return self._as_callers(request, response, content=tape.plain_answer())

    # -- a transport's life: the upstream's ----------------------------------------------

    def close(self) -> None:
        """Close the upstream transport (its connections)."""
        if hasattr(self.upstream, "close"):
            self.upstream.close()

    async def aclose(self) -> None:
        """Close the async upstream transport."""
        if hasattr(self.async_upstream, "aclose"):
            await self.async_upstream.aclose()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Recorder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the pieces ---------------------------------------------------------------------

    def _as_callers(
        self, request: Any, response: Any, *, stream: Any = None, content: bytes | None = None
    ) -> Any:
        """The upstream response in the caller's library: streaming through `stream`, or
        its whole `content` (an error answer, or a stream folded into a plain answer)."""
        library = _module_of(request)
        dropped: tuple[str, ...] = ("content-encoding", "content-length", "transfer-encoding")
        if stream is None and 200 <= response.status_code < 300:
            dropped = (*dropped, "content-type")  # (a JSON answer made from a stream)
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in dropped]
        if stream is None:
            if 200 <= response.status_code < 300:
                headers.append(("content-type", "application/json"))
            return library.Response(response.status_code, headers=headers, content=content)
        return library.Response(response.status_code, headers=headers, stream=stream)

    def _claim(self, api: str, suffix: str) -> Path:
        with self._lock:
            number = self._next
            self._next += 1
        return self.directory / f"{number:03d}-{api}{suffix}"

    def _recorded(self, turn: RecordedTurn) -> None:
        with self._lock:
            self.turns.append(turn)
        if self.on_turn is not None:
            self.on_turn(turn)


def _first_free(directory: Path) -> int:
    """One past the highest number of the answers already in `directory`."""
    numbers = [
        int(path.name[:3])
        for path in directory.glob("[0-9][0-9][0-9]-*")
        if path.name[:3].isdigit()
    ]
    return max(numbers, default=0) + 1


def _module_of(thing: Any) -> Any:
    import importlib

    return importlib.import_module(type(thing).__module__.split(".")[0])


def _library_of(function: str, upstream: Any) -> Any:
    root = type(upstream).__module__.split(".")[0]
    if root not in ("httpx", "httpx2") or not (
        hasattr(upstream, "handle_request") or hasattr(upstream, "handle_async_request")
    ):
        raise UsageError(
            f"{function}: upstream: expected an httpx or httpx2 transport "
            f"(httpx.HTTPTransport()), got {describe(upstream)}"
        )
    return _module_of(upstream)


class _Tape:
    """One answer being recorded: its chunks and their arrival times, written at the end."""

    def __init__(self, recorder: Recorder, request: Any, content: bytes) -> None:
        self.recorder = recorder
        self.request = request
        self.chunks: list[bytes] = []
        self.marks: list[list[float]] = []
        self.offset = 0
        self.written = False
        self.path = request.url.path
        try:
            body: Any = json.loads(content) if content else None
        except ValueError:
            body = None
        self.body = body
        self.content = content
        headers = dict(request.headers.items())
        query = dict(request.url.params.multi_items())
        self.secrets = recorder.redaction.secrets(headers, query, body)
        self.api_request = read_api_request(self.path, body)
        # A plain request is asked as a stream (see `as_streaming`); the caller gets it
        # folded.
        self.streamed = self.api_request is None or self.api_request.stream
        self.format: str | None = None
        self.started = 0.0

    def outgoing(self, library: Any) -> Any:
        """The request as the upstream's library builds it: asking for a stream, and for
        the bytes as sent (no compression: the recording is the stream's own bytes)."""
        url, content = str(self.request.url), self.content
        if not self.streamed and isinstance(self.body, dict):
            url, body = as_streaming(url, self.path, self.body)
            content = json.dumps(body).encode()
        dropped = ("accept-encoding", "content-length")
        headers = [(k, v) for k, v in self.request.headers.items() if k.lower() not in dropped]
        headers.append(("accept-encoding", "identity"))
        self.started = time.monotonic()
        return library.Request(self.request.method, url, headers=headers, content=content)

    def records(self, response: Any) -> bool:
        """Whether the upstream's answer is recorded: a stream of an API a replay answers,
        with a success status (an error, a 429 of the day, is no fixture)."""
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        self.format = _STREAM_TYPES.get(kind)
        return (
            200 <= response.status_code < 300
            and self.api_request is not None
            and self.format is not None
        )

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.chunks.append(bytes(chunk))
        self.offset += len(chunk)
        self.marks.append([self.offset, round(time.monotonic() - self.started, 6)])

    def plain_answer(self) -> bytes:
        """The recorded stream folded into the API's non-streaming answer (as a replay
        of the recording answers it)."""
        request = self.api_request
        assert request is not None
        data = b"".join(self.chunks)
        _, provider = detect_recording(data)
        model = request.model or "streamfold"
        try:
            answer = folded_answer(request.api, provider or "", data, self.path, model)
        except ApiError as exc:
            raise UsageError(f"record: the answer of {self.path} does not fold: {exc}") from None
        return json.dumps(answer).encode()

    def finish(self) -> None:
        """Write the answer and tell the recorder of its turn (once)."""
        if self.written:
            return
        self.written = True
        request = self.api_request
        assert request is not None and self.format is not None
        recorder = self.recorder
        data = mask(b"".join(self.chunks), self.secrets)
        file = recorder._claim(request.api, f".{self.format}")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        sidecar = {"version": TIMING_VERSION, "chunks": self.marks}
        timing_path(file).write_bytes(json.dumps(sidecar).encode() + b"\n")
        kept = {k.lower(): v for k, v in self.request.headers.items() if k.lower() in _KEPT_HEADERS}
        written: dict[str, Any] = {"method": "POST", "path": self.path, "headers": kept}
        if self.body is not None:
            written["body"] = recorder.redaction.body(self.body)
        turn = RecordedTurn(
            match=_masked_json(match_of(request), self.secrets),
            file=file,
            request=_masked_json(written, self.secrets),
        )
        recorder._recorded(turn)


def _masked_json(value: Any, secrets: list[str]) -> Any:
    if not secrets:
        return value
    return json.loads(mask(json.dumps(value).encode(), secrets))


class _SyncTape:
    """The caller's response stream: upstream's chunks, each kept as it passes."""

    def __init__(self, tape: _Tape, upstream: Any) -> None:
        self.tape = tape
        self.upstream = upstream
        # One iteration of the upstream, shared by the caller's reads and by `close`,
        # which reads the rest (a transport's stream cannot be iterated twice).
        self.chunks: Iterator[bytes] = iter(upstream)

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.tape.add(chunk)
            yield chunk

    def close(self) -> None:
        try:
            # The caller may have stopped early: the rest is read, so the recording is whole.
            for chunk in self.chunks:
                self.tape.add(chunk)
        finally:
            self.upstream.close()
        self.tape.finish()


class _AsyncTape:
    """The async `_SyncTape`."""

    def __init__(self, tape: _Tape, upstream: Any) -> None:
        self.tape = tape
        self.upstream = upstream
        self.chunks: AsyncIterator[bytes] = upstream.__aiter__()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks:
            self.tape.add(chunk)
            yield chunk

    async def aclose(self) -> None:
        try:
            async for chunk in self.chunks:
                self.tape.add(chunk)
        finally:
            await self.upstream.aclose()
        self.tape.finish()


# --- the hook in the replay transports ----------------------------------------------------


class RecordHook:
    """Record on miss for the replay transports of one scenario: the recorder they share
    (one numbering of the files, one scenario file), and what they forward.

    A transport with a hook forwards every request (`mode="all"`) or those no turn answers
    (`mode="new"`); each answer recorded becomes a turn of the scenario, in memory (it
    answers the same request again in this run, and counts as used) and in its file.
    """

    def __init__(
        self,
        scenario: Any,
        path: str | Path | None,
        mode: Any,
        *,
        upstream: Any = None,
        async_upstream: Any = None,
        redact: Any = None,
    ) -> None:
        self.mode = check_record_mode("record", mode)
        self.scenario = scenario
        self.path = Path(path) if path is not None else None
        base = self.path.parent / self.path.stem if self.path is not None else None
        directory = base if base is not None else Path(scenario.root) / "recorded"
        if upstream is None and async_upstream is None:
            import httpx

            upstream, async_upstream = httpx.HTTPTransport(), httpx.AsyncHTTPTransport()
        self.recorder = Recorder(
            upstream if upstream is not None else async_upstream,
            directory,
            redact=redact,
            on_turn=self._add,
            async_upstream=async_upstream,
            function="record",
        )
        self._fresh = self.mode == "all"  # the first answer replaces the file's turns
        self._count = 0 if self._fresh else len(scenario.turns)  # the file's turns
        self._lock = threading.Lock()

    def forward(self, transport: Any, request: Any, miss: Any = None) -> Any:
        """Answer `request` from upstream, recorded (a `miss` it settles is forgotten)."""
        self._settle(transport, miss)
        return self.recorder.handle_request(request)

    async def aforward(self, transport: Any, request: Any, miss: Any = None) -> Any:
        """The async `forward`."""
        self._settle(transport, miss)
        return await self.recorder.handle_async_request(request)

    def _settle(self, transport: Any, miss: Any) -> None:
        if miss is not None:
            misses = transport.misses
            if miss in misses:
                misses.remove(miss)

    def _add(self, turn: RecordedTurn) -> None:
        from .scenario import Turn

        with self._lock:
            scenario = self.scenario
            root = self.path.parent if self.path is not None else Path(scenario.root)
            self._count += 1
            entry = turn_entry(turn, root, self._count)
            if self.path is not None:
                append_turn(self.path, entry, replace=self._fresh)
            self._fresh = False
            with scenario._lock:
                scenario.turns.append(Turn.model_validate(entry))
                scenario.used.append(1)

    def close(self) -> None:
        """Close the upstream transports (the async one in an event loop of its own)."""
        recorder = self.recorder
        if recorder.upstream is not recorder.async_upstream:
            recorder.close()
        if hasattr(recorder.async_upstream, "aclose"):
            import anyio

            # (RuntimeError: its connections belonged to a loop already closed: none left)
            with contextlib.suppress(RuntimeError):
                anyio.run(recorder.aclose)

    async def aclose(self) -> None:
        """Close the async upstream transport."""
        await self.recorder.aclose()


def attach_recorder(
    transports: Any,
    path: str | Path | None,
    mode: Any,
    *,
    upstream: Any = None,
    async_upstream: Any = None,
    redact: Any = None,
) -> RecordHook:
    """Give replay transports (one, or a sync and an async one sharing a scenario) one
    `RecordHook`: they forward what `mode` says to `upstream` (default: the real API,
    through `httpx.HTTPTransport()` / `httpx.AsyncHTTPTransport()`)."""
    group = list(transports) if isinstance(transports, list | tuple) else [transports]
    scenario = group[0].scenario
    hook = RecordHook(
        scenario, path, mode, upstream=upstream, async_upstream=async_upstream, redact=redact
    )
    if hook.mode == "all":
        hook.recorder.restart()
    for transport in group:
        transport.recording = hook
        # A miss comes back as a reply the hook can take over, not as an exception.
        transport.replayer.on_miss = "respond"
    return hook


_STREAM_CLASSES: dict[tuple[str, bool], type] = {}


def _stream_class(library: Any, *, asynchronous: bool) -> type:
    """The tape as the caller's library's own byte stream class (its Response checks)."""
    key = (library.__name__, asynchronous)
    made = _STREAM_CLASSES.get(key)
    if made is None:
        base = library.AsyncByteStream if asynchronous else library.SyncByteStream
        own = _AsyncTape if asynchronous else _SyncTape
        made = type(own.__name__, (own, base), {})
        _STREAM_CLASSES[key] = made
    return made


__all__ = [
    "RECORD_MODES",
    "SECRET_HEADERS",
    "SECRET_QUERY",
    "RecordHook",
    "RecordMode",
    "RecordedTurn",
    "Recorder",
    "Redaction",
    "append_turn",
    "as_streaming",
    "attach_recorder",
    "check_record_mode",
    "mask",
    "match_of",
    "read_api_request",
    "toml_turn",
    "turn_entry",
]
