"""The live demo page: recordings replayed through the UI message stream, rendered in a browser.

    GET  /                     the page (plain HTML/JS/CSS, no build step)
    GET  /ui/app.js, /ui/style.css
    GET  /ui-recordings        {"recordings": [{"name", "provider"}, ...]}
    GET  /ui-stream?recording=<name>&speed=<f>[&output=json[&output_tool=<name>]]
    POST /ui-stream            the same (a `useChat` DefaultChatTransport can point here)
    POST /agui?recording=<name>&speed=<f>
                               an AG-UI run (the body: the protocol's RunAgentInput; the
                               recording there too, as `forwardedProps.recording`); a
                               loop's name plays the loop as one run, a step per response

`/ui-stream` folds the recording as it is paced out (as recorded, or an event every
`EVENT_INTERVAL` seconds, divided by `speed`; 0 sends at once) and answers with the Vercel AI
SDK UI message stream (see `streamfold.ui`). With `output=json` the answer's JSON (the
text after the last tool call, or the arguments of the tool call named `output_tool`) is
also folded as structured output, any JSON value (`fold(..., output=Any)`: no type is
imported on a request's word), and sent as the `data-output` part the page shows filling
in. Needs starlette (the `serve` extra).
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..aio import afold
from ..errors import StreamfoldError, UsageError, preview
from ..events import Event
from ..framing import StreamFormat
from ..message import Message, ToolResult
from ..record import (
    TIMING_SUFFIX,
    arrival_times,
    check_speed,
    parse_timing,
    schedule,
    split_frames,
    timing_path,
)
from ..recording import bundled_recordings, detect_recording
from ..timing import replay_clock
from ..ui import UI_MESSAGE_STREAM_HEADERS, aencode_sse, ato_ui_message_stream

try:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    from .guard import RequestRefused, read_json
except (ImportError, UsageError):  # pragma: no cover - depends on the installed extras
    # The recordings' finder and the replay core (streamfold.testing's transports) need
    # no server; the page's routes do, and say so when asked for.
    _HAS_STARLETTE = False
else:
    _HAS_STARLETTE = True

_SUFFIXES = (".sse", ".ndjson", ".jsonl", ".eventstream")
_ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "relay.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class DemoRecording:
    """A recording the page can replay: its name (relative path), file, provider, framing."""

    name: str
    path: Path
    provider: str
    format: StreamFormat
    root: Path
    """The recordings directory, resolved: the file must still be inside it when read."""

    def names(self) -> tuple[str, ...]:
        """The names a request may use for it: the path, without suffix, the file name."""
        stem = self.name.rsplit(".", 1)[0]
        return (self.name, stem, self.path.name, self.path.name.rsplit(".", 1)[0])

    def read(self) -> bytes:
        """The recording's bytes as they are now; LookupError if it is gone or escaped."""
        return _read_inside(self.root, self.path, self.name)

    def timing(self) -> list[tuple[int, float]] | None:
        """Its recorded timing; None (paced per event) without a good sidecar inside root.

        The pacing is not worth failing a replay for, nor telling a client about.
        """
        sidecar = timing_path(self.path)
        if not sidecar.exists():
            return None
        try:
            # Read as the recording is: inside root, not through a link, and a FIFO or
            # other special file put there cannot block the open (the server would hang).
            return parse_timing(_read_inside(self.root, sidecar, self.name), TIMING_SUFFIX)
        except (LookupError, UsageError):
            return None


def _read_inside(root: Path, path: Path, name: str) -> bytes:
    """The bytes of `path` if, links resolved now, it is a regular file inside `root`.

    Checked at every read, not once at start-up: a file replaced later by a link to
    elsewhere (/etc/passwd) is refused, not served.
    """
    try:
        real = path.resolve(strict=True)
        if real.is_relative_to(root):
            # O_NOFOLLOW: the resolved file cannot be swapped for a link before it opens;
            # O_NONBLOCK: a FIFO put in its place cannot hang the open.
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
            with os.fdopen(os.open(real, flags), "rb") as file:
                if stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                    return file.read()
    except OSError:
        pass
    raise LookupError(
        f"recording {name!r} is not served: it is no longer a file inside the recordings "
        "directory (links to elsewhere are refused)"
    )


def find_recordings(directory: str | Path) -> list[DemoRecording]:
    """The recorded streams under `directory` (recursively) whose provider is known.

    A file is a recording only where it really is inside `directory` (a symbolic link is
    followed only to a file inside it).
    """
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"{root}: expected a directory of recordings, got none")
    real_root = root.resolve()
    found: list[DemoRecording] = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in _SUFFIXES or path.name.endswith(TIMING_SUFFIX):
            continue
        name = path.relative_to(root).as_posix()
        try:
            kind, provider = detect_recording(_read_inside(real_root, path, name))
        except LookupError:
            continue
        if kind is not None and provider is not None:
            found.append(DemoRecording(name, path, provider, kind, real_root))
    return found


_bundled = bundled_recordings  # the default recordings of the demo (and relay) routes

LOOP_SUFFIX = ".loop.json"
_MAX_LOOP_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class DemoLoop:
    """An agent loop the page can play (`<name>.loop.json` among the recordings): the
    responses (recordings, or messages written in the file, streamed as the provider's
    own events) and the app's tool results between them."""

    name: str
    provider: str
    steps: tuple[DemoRecording | ToolResult | Message, ...]

    def names(self) -> tuple[str, ...]:
        return (self.name,)


def find_loops(directory: str | Path, recordings: list[DemoRecording]) -> list[DemoLoop]:
    """The loops under `directory`: each step checked now (its recordings among those
    found, its results and messages valid); a file that is not a loop is refused by name."""
    from pydantic import BaseModel, ConfigDict, ValidationError

    class _Step(BaseModel):
        model_config = ConfigDict(extra="forbid")
        recording: str | None = None
        tool_result: ToolResult | None = None
        message: Message | None = None

    class _Loop(BaseModel):
        model_config = ConfigDict(extra="forbid")
        provider: str
        about: str = ""
        steps: list[_Step]

    root = Path(directory)
    by_name = {name: r for r in recordings for name in r.names()}
    loops: list[DemoLoop] = []
    for path in sorted(root.rglob(f"*{LOOP_SUFFIX}")):
        name = path.relative_to(root).as_posix().removesuffix(LOOP_SUFFIX)
        try:
            raw = _read_inside(root.resolve(), path, name)
            if len(raw) > _MAX_LOOP_BYTES:
                raise UsageError(f"expected at most {_MAX_LOOP_BYTES} bytes, got {len(raw)}")
            loop = _Loop.model_validate_json(raw)
            steps: list[DemoRecording | ToolResult | Message] = []
            for n, step in enumerate(loop.steps):
                given = [v for v in (step.recording, step.tool_result, step.message) if v]
                if len(given) != 1:
                    raise UsageError(f"step {n}: expected one of recording, tool_result, message")
                if step.recording is not None:
                    if step.recording not in by_name:
                        raise UsageError(f"step {n}: no recording {step.recording!r} here")
                    steps.append(by_name[step.recording])
                else:
                    steps.append(given[0])  # type: ignore[arg-type]
        except (ValidationError, UsageError, StreamfoldError, LookupError) as exc:
            raise UsageError(f"{path}: expected a demo loop, got: {exc}") from None
        loops.append(DemoLoop(name, loop.provider, tuple(steps)))
    return loops


async def _loop_steps(
    loop: DemoLoop, speed: float
) -> AsyncIterator[tuple[AsyncIterator[bytes], str] | ToolResult]:
    """The loop as it plays: each response as (its chunks, paced, and its provider), each
    tool result in its place, after the pause of the app running its tool."""
    import anyio

    from ..streams import to_stream

    for step in loop.steps:
        if isinstance(step, ToolResult):
            if speed:
                await anyio.sleep(0.4 / speed)  # the app running its tool
            yield step
            continue
        if isinstance(step, Message):
            data = b"".join(to_stream(step, loop.provider, piece=12))
            chunks = split_frames(data, "sse" if loop.provider != "bedrock" else "eventstream")

            async def paced(chunks: list[bytes] = chunks) -> AsyncIterator[bytes]:
                for chunk in chunks:
                    if speed:
                        await anyio.sleep(0.02 / speed)
                    yield chunk

            yield paced(), loop.provider
        else:
            yield _paced(step, speed), step.provider


async def _loop_events(loop: DemoLoop, speed: float) -> AsyncIterator[Event | ToolResult]:
    """The loop as the page's stream takes it: each response folded as it is paced out,
    each tool result in its place."""
    async for step in _loop_steps(loop, speed):
        if isinstance(step, ToolResult):
            yield step
            continue
        source, provider = step
        async for event in afold(source, provider):
            yield event


def _asset(name: str) -> str:
    return (resources.files(__name__) / name).read_text(encoding="utf-8")


def _speed(raw: str | None, default: float) -> float:
    if raw is None or raw == "":
        return default
    try:
        speed = float(raw)
    except ValueError:
        raise UsageError(f"speed: expected a number, got {raw!r}") from None
    return check_speed(speed)


async def _paced(
    recording: DemoRecording,
    speed: float,
    data: bytes | None = None,
    arrive: Callable[[int], None] | None = None,
) -> AsyncIterator[bytes]:
    """The recording's bytes (`data` if already read) in chunks, paced as `speed` says;
    `arrive(n)` is told before chunk n goes (a replay clock's, see streamfold.timing)."""
    import anyio

    if data is None:
        data = recording.read()
    timing = recording.timing()
    for n, (wait, chunk) in enumerate(schedule(data, recording.format, speed=speed, timing=timing)):
        if wait > 0:
            await anyio.sleep(wait)
        if arrive is not None:
            arrive(n)
        yield chunk


_OUTPUT_TOOL_MAX = 200


def _output(raw: Any, tool: Any) -> tuple[bool, str | None]:
    """Whether the request asked for the structured output, and the tool that holds it."""
    if raw is None or raw == "":
        if tool not in (None, ""):
            raise UsageError("output_tool: expected output=json with it, got no output")
        return False, None
    if raw != "json":
        raise UsageError(f"output: expected 'json', got {preview(raw, 40)}")
    if tool is None or tool == "":
        return True, None
    if type(tool) is not str or len(tool) > _OUTPUT_TOOL_MAX:
        raise UsageError(
            f"output_tool: expected a tool name (a str of at most {_OUTPUT_TOOL_MAX} "
            f"characters), got {preview(tool, 40)}"
        )
    return True, tool


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message}}, status)


def ui_routes(recordings_dir: str | Path | None = None, *, speed: float = 1.0) -> list[Route]:
    """The demo page's routes, replaying the recordings of `recordings_dir` (default bundled)."""
    if not _HAS_STARLETTE:  # pragma: no cover - depends on the installed extras
        raise UsageError(
            "the streamfold demo page needs starlette: pip install 'streamfold[serve]'"
        )
    directory = recordings_dir if recordings_dir is not None else _bundled()
    catalog = find_recordings(directory)
    loops = {loop.name: loop for loop in find_loops(directory, catalog)}
    by_name = {r.name: r for r in catalog}
    default_speed = speed

    async def page(request: Request) -> Response:
        return Response(_asset("index.html"), media_type="text/html; charset=utf-8")

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _ASSETS:
            return _error(404, f"no asset {name!r}")
        return Response(
            _asset(name), media_type=_ASSETS[name], headers={"cache-control": "no-cache"}
        )

    async def listing(request: Request) -> Response:
        listed: list[dict[str, Any]] = [{"name": r.name, "provider": r.provider} for r in catalog]
        listed += [{"name": n, "provider": "agent loops", "loop": True} for n in loops]
        return JSONResponse({"recordings": listed})

    async def stream(request: Request) -> Response:
        wanted = request.query_params.get("recording")
        asked: dict[str, Any] = dict(request.query_params)
        if wanted is None and request.method == "POST":
            try:
                body = await read_json(request)
            except RequestRefused as exc:
                return _error(exc.status, exc.message)
            if isinstance(body, dict) and isinstance(body.get("recording"), str):
                wanted = body["recording"]
                asked = {k: body.get(k) for k in ("output", "output_tool")}
        if not wanted:
            return _error(400, "expected ?recording=<name> (see /ui-recordings)")
        loop = loops.get(wanted)
        if loop is not None:
            # An agent loop: every response a step of one UI message, the tool results
            # between them.
            try:
                pace = _speed(request.query_params.get("speed"), default_speed)
            except UsageError as exc:
                return _error(400, str(exc))
            body_loop = aencode_sse(ato_ui_message_stream(_loop_events(loop, pace)))
            headers = {**UI_MESSAGE_STREAM_HEADERS, "x-streamfold-recording": loop.name}
            return StreamingResponse(body_loop, headers=headers)
        recording = by_name.get(wanted)
        if recording is None:
            return _error(404, f"no recording named {wanted!r} (see /ui-recordings)")
        try:
            pace = _speed(request.query_params.get("speed"), default_speed)
            typed, output_tool = _output(asked.get("output"), asked.get("output_tool"))
            data = recording.read()
        except UsageError as exc:
            return _error(400, str(exc))
        except LookupError as exc:
            return _error(404, str(exc))
        # The timing in the finish bar is the recording's, whatever the speed.
        clock, arrive = replay_clock(arrival_times(data, recording.format, recording.timing()))
        events = afold(
            _paced(recording, pace, data, arrive),
            recording.provider,
            clock=clock,
            started_at=0.0,
            output=Any if typed else None,
            output_tool=output_tool,
        )
        body_bytes = aencode_sse(ato_ui_message_stream(events))
        headers = {**UI_MESSAGE_STREAM_HEADERS, "x-streamfold-recording": recording.name}
        return StreamingResponse(body_bytes, headers=headers)

    async def agui(request: Request) -> Response:
        # An AG-UI agent's run: the body is the protocol's RunAgentInput (checked with the
        # package's own model); the recording (or loop) is `?recording=` or
        # `forwardedProps.recording`.
        try:
            from ag_ui.core import RunAgentInput
            from pydantic import ValidationError

            from ..agui import aencode_agui_sse, ato_agui_events
        except ImportError:
            return _error(
                501, "AG-UI needs the ag-ui-protocol package: pip install 'streamfold[agui]'"
            )
        try:
            body = await read_json(request)
        except RequestRefused as exc:
            return _error(exc.status, exc.message)
        try:
            run = RunAgentInput.model_validate(body)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(body)'}: {e['msg']}" for e in exc.errors()[:5]
            )
            return _error(400, f"expected an AG-UI RunAgentInput: {problems}")
        forwarded = run.forwarded_props if isinstance(run.forwarded_props, dict) else {}
        wanted = request.query_params.get("recording") or forwarded.get("recording")
        if not isinstance(wanted, str) or not wanted:
            return _error(
                400, "expected ?recording=<name> or forwardedProps.recording (see /ui-recordings)"
            )
        loop = loops.get(wanted)
        recording = by_name.get(wanted)
        if recording is None and loop is None:
            return _error(404, f"no recording named {wanted!r} (see /ui-recordings)")
        try:
            pace = _speed(request.query_params.get("speed"), default_speed)
            data = recording.read() if recording is not None else b""
        except UsageError as exc:
            return _error(400, str(exc))
        except LookupError as exc:
            return _error(404, str(exc))
        events: AsyncIterator[Event | ToolResult]
        if loop is not None:
            # An agent loop: one run, a step per response, the tool results between them.
            events = _loop_events(loop, pace)
        else:
            assert recording is not None
            events = afold(_paced(recording, pace, data), recording.provider)
        agui_events = ato_agui_events(events, thread_id=run.thread_id, run_id=run.run_id)
        name = loop.name if loop is not None else wanted
        headers = {"cache-control": "no-cache", "x-accel-buffering": "no",
                   "x-streamfold-recording": name}  # fmt: skip
        return StreamingResponse(
            aencode_agui_sse(agui_events), media_type="text/event-stream", headers=headers
        )

    return [
        Route("/", page, methods=["GET"]),
        Route("/ui/{name}", asset, methods=["GET"]),
        Route("/ui-recordings", listing, methods=["GET"]),
        Route("/ui-stream", stream, methods=["GET", "POST"]),
        Route("/agui", agui, methods=["POST"]),
    ]


__all__ = ["DemoRecording", "find_recordings", "ui_routes"]
