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


# --- the scenario file ---------------------------------------------------------------

_USER_CHARS = 200  # of the last user message a recorded turn matches (a substring: its start)


def turn_entry(turn: RecordedTurn, scenario_dir: Path, number: int) -> dict[str, Any]:
    """A recorded turn as a scenario file's turn: its name, what it matches (the API, the
    model, the start of the last user message, the tool result it carries or that it
    carries none, the tools offered) and the recording that answers it."""
    facts = turn.match
    match: dict[str, Any] = {"api": facts["endpoint"]}
    if "model" in facts:
        match["model"] = facts["model"]
    if "user" in facts:
        match["user"] = facts["user"][:_USER_CHARS]
    results = facts.get("tool_results") or []
    # A follow-up carries the same user message as the request before it: what tells them
    # apart is the tool result (its call id: two calls of one tool differ by it).
    match["tool_result"] = results[-1] if results else False
    if "tools" in facts:
        match["tools"] = facts["tools"]
    return {
        "name": f"recorded {number}",
        "match": match,
        "recording": turn.file.relative_to(scenario_dir).as_posix(),
    }


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
        started = time.monotonic()
        response = self.upstream.handle_request(self._outgoing(request, content, self.library))
        if not 200 <= response.status_code < 300:
            return self._as_callers(request, response, content=response.read())
        tape = _Tape(self, request, content, response, started)
        stream = _stream_class(_module_of(request), asynchronous=False)(tape, response.stream)
        return self._as_callers(request, response, stream=stream)

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
        started = time.monotonic()
        outgoing = self._outgoing(request, content, self.async_library)
        response = await upstream.handle_async_request(outgoing)
        if not 200 <= response.status_code < 300:
            return self._as_callers(request, response, content=await response.aread())
        tape = _Tape(self, request, content, response, started)
        stream = _stream_class(_module_of(request), asynchronous=True)(tape, response.stream)
        return self._as_callers(request, response, stream=stream)

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

    def _outgoing(self, request: Any, content: bytes, library: Any) -> Any:
        """The request as the upstream's library builds it; asking for the bytes as
        sent (no compression), since the recording is the stream's own bytes."""
        headers = [(k, v) for k, v in request.headers.items() if k.lower() != "accept-encoding"]
        headers.append(("accept-encoding", "identity"))
        return library.Request(request.method, str(request.url), headers=headers, content=content)

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
            entry = turn_entry(turn, root, len(scenario.turns) + 1)
            if self.path is not None:
                append_turn(self.path, entry, replace=self._fresh)
            self._fresh = False
            with scenario._lock:
                scenario.turns.append(Turn.model_validate(entry))
                scenario.used.append(1)

    def close(self) -> None:
        """Close the upstream transports."""
        recorder = self.recorder
        if recorder.upstream is not recorder.async_upstream:
            recorder.close()

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
    "attach_recorder",
    "check_record_mode",
    "endpoint_of",
    "mask",
    "request_facts",
    "toml_turn",
    "turn_entry",
]
