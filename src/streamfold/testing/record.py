"""Record on miss: a request no turn answers goes to the real API, and its answer is kept.

A replay transport given `record="new"` forwards a request that matches no turn of its
scenario to an upstream (any httpx or httpx2 transport: `httpx.HTTPTransport()` reaches
the real API); with `record="all"` it forwards every request. The answer streams back to
the caller as it arrives, and when it ends it is written beside the scenario file:

    <scenario dir>/<scenario stem>/<n>-<endpoint>.sse            the bytes, as they arrived
    <scenario dir>/<scenario stem>/<n>-<endpoint>.sse.timing.json  when each chunk arrived
    <scenario dir>/<scenario stem>/<n>-<endpoint>.json           a non-streamed answer

(streamfold's own recording format: `streamfold.record`), and a turn that names it, with
what the request said that a turn matches on (endpoint, model, the last user message,
the tool results it carries, the tools it offers), is appended to the scenario. The next
run replays it without a network.

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

import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..arguments import describe
from ..errors import UsageError
from ..record import TIMING_VERSION, timing_path

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

_GEMINI_MODEL = re.compile(r"/models/([^/:]+):")
_BEDROCK_MODEL = re.compile(r"/model/([^/]+)/")


def endpoint_of(path: str) -> str:
    """The API a request path calls, by serve's routing names (chat, responses, messages,
    gemini, invoke, converse), or the path itself for another."""
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "messages"
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini"
    if path.endswith(("/invoke", "/invoke-with-response-stream")):
        return "invoke"
    if path.endswith(("/converse", "/converse-stream")):
        return "converse"
    return path


def request_facts(path: str, body: Any) -> dict[str, Any]:
    """What a turn matches on, read from a request: endpoint, model, the last user
    message's text, the ids (or names) of the tool calls whose results it carries, and
    the names of the tools it offers. Absent facts are left out."""
    endpoint = endpoint_of(path)
    facts: dict[str, Any] = {"endpoint": endpoint}
    body = body if isinstance(body, dict) else {}
    model = body.get("model")
    found = _GEMINI_MODEL.search(path) or _BEDROCK_MODEL.search(path)
    if found is not None:
        model = found.group(1)
    if isinstance(model, str):
        facts["model"] = model
    user, results = _conversation(endpoint, body)
    if user is not None:
        facts["user"] = user
    if results:
        facts["tool_results"] = results
    tools = _tool_names(endpoint, body)
    if tools:
        facts["tools"] = tools
    return facts


def _texts(content: Any, kinds: tuple[str, ...] = ("text", "input_text")) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                out.append(block)
            elif (
                isinstance(block, dict)
                and isinstance(block.get("text"), str)
                and block.get("type", "text") in kinds
            ):
                out.append(block["text"])
    return out


def _conversation(endpoint: str, body: dict[str, Any]) -> tuple[str | None, list[str]]:
    """The last user text, and the tool results that follow the last model turn."""
    user: str | None = None
    results: list[str] = []
    if endpoint == "responses":
        items = body.get("input")
        if isinstance(items, str):
            return items, []
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call_output":
                results.append(str(item.get("call_id")))
            elif item.get("role") == "user":
                texts = _texts(item.get("content"))
                if texts:
                    user, results = "\n".join(texts), []
            elif item.get("role") == "assistant" or item.get("type") == "function_call":
                results = []
        return user, results
    key = "contents" if endpoint == "gemini" else "messages"
    messages = body.get(key)
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in ("assistant", "model"):
            results = []
            continue
        if endpoint == "chat" and role == "tool":
            results.append(str(message.get("tool_call_id")))
            continue
        if role != "user":
            continue
        content = message.get("parts" if endpoint == "gemini" else "content")
        texts = _texts(content)
        if texts:
            user = "\n".join(texts)
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                results.append(str(block.get("tool_use_id")))
            elif isinstance(block.get("functionResponse"), dict):
                response = block["functionResponse"]
                results.append(str(response.get("id") or response.get("name")))
            elif isinstance(block.get("toolResult"), dict):
                results.append(str(block["toolResult"].get("toolUseId")))
    return user, results


def _tool_names(endpoint: str, body: dict[str, Any]) -> list[str]:
    tools = body.get("tools")
    if endpoint == "converse":
        config = body.get("toolConfig")
        tools = config.get("tools") if isinstance(config, dict) else None
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if endpoint == "gemini":
            declarations = tool.get("functionDeclarations") or tool.get("function_declarations")
            for declaration in declarations if isinstance(declarations, list) else []:
                if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                    names.append(declaration["name"])
            continue
        spec = tool.get("function") or tool.get("toolSpec") or tool
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            names.append(spec["name"])
    return names


# --- the recorder ------------------------------------------------------------------------


@dataclass
class RecordedTurn:
    """A turn recorded from upstream: what it matches on and the file that answers it."""

    match: dict[str, Any]
    file: Path
    stream: bool
    request: dict[str, Any] = field(default_factory=dict)

    def as_dict(self, base: Path) -> dict[str, Any]:
        """The turn as a scenario file holds it (the file relative to `base`)."""
        key = "recording" if self.stream else "response"
        return {
            "match": self.match,
            key: self.file.relative_to(base).as_posix(),
            "request": self.request,
        }


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
        function: str = "Recorder",
    ) -> None:
        self.library = _library_of(function, upstream)
        self.upstream = upstream
        self.directory = Path(directory)
        self.redaction = Redaction.of(function, redact)
        self.on_turn = on_turn
        self.turns: list[RecordedTurn] = []
        self._lock = threading.Lock()
        self._next = _first_free(self.directory)

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
        started = time.monotonic()
        response = self.upstream.handle_request(self._outgoing(request, content))
        if not 200 <= response.status_code < 300:
            return self._as_callers(request, response, content=response.read())
        tape = _Tape(self, request, content, response, started)
        stream = _stream_class(_module_of(request), asynchronous=False)(tape, response.stream)
        return self._as_callers(request, response, stream=stream)

    # -- async --------------------------------------------------------------------------

    async def handle_async_request(self, request: Any) -> Any:
        """The async `handle_request`, for an async client and an async upstream."""
        if not hasattr(self.upstream, "handle_async_request"):
            raise UsageError(
                "record: expected an async upstream transport for an async client "
                f"(httpx.AsyncHTTPTransport), got {type(self.upstream).__name__}"
            )
        content = await request.aread()
        started = time.monotonic()
        response = await self.upstream.handle_async_request(self._outgoing(request, content))
        if not 200 <= response.status_code < 300:
            return self._as_callers(request, response, content=await response.aread())
        tape = _Tape(self, request, content, response, started)
        stream = _stream_class(_module_of(request), asynchronous=True)(tape, response.stream)
        return self._as_callers(request, response, stream=stream)

    # -- a transport's life: the upstream's ----------------------------------------------

    def close(self) -> None:
        """Close the upstream transport (its connections)."""
        self.upstream.close()

    async def aclose(self) -> None:
        """Close the async upstream transport."""
        await self.upstream.aclose()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Recorder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the pieces ---------------------------------------------------------------------

    def _outgoing(self, request: Any, content: bytes) -> Any:
        """The request as the upstream's library builds it; asking for the bytes as
        sent (no compression), since the recording is the stream's own bytes."""
        headers = [(k, v) for k, v in request.headers.items() if k.lower() != "accept-encoding"]
        headers.append(("accept-encoding", "identity"))
        return self.library.Request(
            request.method, str(request.url), headers=headers, content=content
        )

    def _as_callers(
        self, request: Any, response: Any, *, stream: Any = None, content: bytes | None = None
    ) -> Any:
        """The upstream response in the caller's library: streaming through `stream`, or
        its whole `content` (an error answer, read at once)."""
        library = _module_of(request)
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        if stream is None:
            return library.Response(response.status_code, headers=headers, content=content)
        return library.Response(response.status_code, headers=headers, stream=stream)

    def _claim(self, endpoint: str, suffix: str) -> Path:
        with self._lock:
            number = self._next
            self._next += 1
        return self.directory / f"{number:03d}-{endpoint}{suffix}"

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

    def __init__(
        self, recorder: Recorder, request: Any, content: bytes, response: Any, started: float
    ) -> None:
        self.recorder = recorder
        self.started = started
        self.chunks: list[bytes] = []
        self.marks: list[list[float]] = []
        self.offset = 0
        self.written = False
        redaction = recorder.redaction
        headers = dict(request.headers.items())
        query = dict(request.url.params.multi_items())
        try:
            body: Any = json.loads(content) if content else None
        except ValueError:
            body = None
        self.secrets = redaction.secrets(headers, query, body)
        self.path = request.url.path
        self.body = body
        self.headers = {k.lower(): v for k, v in headers.items() if k.lower() in _KEPT_HEADERS}
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        self.format = _STREAM_TYPES.get(kind)

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.chunks.append(bytes(chunk))
        self.offset += len(chunk)
        self.marks.append([self.offset, round(time.monotonic() - self.started, 6)])

    def finish(self) -> None:
        """Write the answer and tell the recorder of its turn (once)."""
        if self.written:
            return
        self.written = True
        recorder = self.recorder
        redaction = recorder.redaction
        facts = request_facts(self.path, self.body)
        data = mask(b"".join(self.chunks), self.secrets)
        suffix = f".{self.format}" if self.format else ".json"
        file = recorder._claim(str(facts["endpoint"]).strip("/").replace("/", "-"), suffix)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        if self.format is not None:
            sidecar = {"version": TIMING_VERSION, "chunks": self.marks}
            timing_path(file).write_bytes(mask(json.dumps(sidecar).encode() + b"\n", self.secrets))
        facts = _masked_json(facts, self.secrets)
        request = {
            "method": "POST",
            "path": mask(self.path.encode(), self.secrets).decode(),
            "headers": _masked_json(self.headers, self.secrets),
        }
        if self.body is not None:
            request["body"] = _masked_json(redaction.body(self.body), self.secrets)
        turn = RecordedTurn(match=facts, file=file, stream=self.format is not None, request={})
        turn.request = request
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
    "RecordMode",
    "RecordedTurn",
    "Recorder",
    "Redaction",
    "check_record_mode",
    "endpoint_of",
    "mask",
    "request_facts",
]
