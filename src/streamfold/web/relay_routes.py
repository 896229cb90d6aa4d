"""The demo page through the Redis relay: a replay any worker can serve, and a reload resumes it.

    POST /relay/start               {"recording": <name>, "speed": <f>} -> {"id": <stream id>}
                                    this worker folds the recording in a background task and
                                    publishes it (streamfold.relay); at most `max_replays`
                                    at once per worker, more are refused with 503 and
                                    `retry-after` (each replay holds its recording and fold)
    GET  /relay/ui-stream/{id}      the UI message stream (Vercel AI SDK v1) of that stream,
                                    from any worker: the message so far (a Snapshot, as part
                                    start/delta/end chunks), then the rest live
    GET  /relay/events/{id}         the events as Server-Sent Events for an EventSource: each
                                    with `id: <entry id>`; reconnecting with `Last-Event-ID`
                                    (or `?after=<entry id>`) gets exactly the events missed.
                                    The first one, without either, is `event: snapshot`.
    POST /relay/stop/{id}           stop that stream, from any worker: its producer closes
                                    the replay (a provider's response, in an app) and ends
                                    the message cancelled; every reader gets that end.
                                    202 {"id", "stopping": whether it was still producing}
    GET  /relay/info                {"relay": true}: the page shows its "resumable" switch

An agent loop's turn (several responses and the tool results between them, see
`Relay.turn`) has routes of its own:

    POST /relay/turn/start          {"loop": <name>, "speed": <f>} -> {"id": <turn id>,
                                    "recording": <name>, "turn": true}: this worker plays
                                    the demo loop (`<name>.loop.json` among the
                                    recordings) as a turn: each response folded and
                                    published, each tool result in its place (the page's
                                    /relay/start does the same for a loop's name)
    GET  /relay/turn/ui-stream/{id} the turn as one UI message stream, from any worker:
                                    each response a step, the tool results between them
                                    (what `to_ui_message_stream` gives for the same
                                    events); a reload gets the loop so far, then the rest
    POST /relay/turn/agui/{id}      the turn as an AG-UI run (the body: the protocol's
                                    RunAgentInput, optional). A reader there from the
                                    start gets the whole run; one that joins late gets
                                    RUN_STARTED, a MESSAGES_SNAPSHOT of the loop so far
                                    (the messages it sent first), then the run from
                                    there on: every event once
    GET  /relay/turn/events/{id}    the turn as Server-Sent Events for an EventSource,
                                    as /relay/events writes a stream's: each item with
                                    `id: <its turn id>`, a response's events (a
                                    snapshot first for a reader that joins it midway),
                                    `event: tool_result` for a tool result,
                                    `event: turn_completed` last. Reconnecting with
                                    `Last-Event-ID` (or `?after=`) gets exactly the items
                                    missed, on any worker; past the turn's end, 204
    POST /relay/turn/stop/{id}      stop the turn, from any worker: the response being
                                    written ends cancelled, the turn ends cancelled

Two workers behind a load balancer, both with `relay_routes(Relay.from_url(REDIS))`: the
page starts a replay on one, puts the stream id in its URL (`?relay=<id>`), and a reload
(landing on either worker) follows the same stream from the start: its text complete, once.

Give the app `lifespan=relay_lifespan(relay)`: a worker that stops (SIGTERM, SIGINT) then
ends the replays it is still publishing as cancelled at once, and their readers on any
worker hear it at once; its readers of other workers' streams are let go (their body ends
without an end: an EventSource reconnects with its last id, the page follows anew), so the
server's graceful shutdown, which waits for open responses, is over at once. A reader
whose stream cannot be read any more (Redis unreachable for longer than
`reconnect_timeout`) gets a last event: `event: error` with `{"type": "error", "error":
{"type": <the error class>, "message": ...}}` on /relay/events (no id: reconnecting with
the last id resumes once Redis is back), an `error` chunk on /relay/ui-stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

from ..drive import adrive
from ..errors import StreamfoldError, UsageError, preview
from ..events import Event
from ..events_json import event_to_json
from ..message import ToolResult
from ..relay import (
    Relay,
    Relayed,
    RelayError,
    RelayNotFound,
    RelayProducer,
    RelayStopped,
    RelayTurn,
    Snapshot,
    TurnCompleted,
    TurnRelayed,
    _turn_after,
    _turn_keys,
)
from ..ui import (
    UI_MESSAGE_STREAM_HEADERS,
    UIMessageChunk,
    UIMessageStreamEncoder,
    aencode_sse,
    ato_ui_message_stream,
)
from . import (
    DemoLoop,
    _bundled,
    _error,
    _loop_steps,
    _paced,
    _speed,
    find_loops,
    find_recordings,
)
from .guard import RequestRefused, read_json

try:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise UsageError(
        "the streamfold demo page needs starlette: pip install 'streamfold[serve]'"
    ) from exc

_log = logging.getLogger("streamfold.relay")

DEFAULT_MAX_REPLAYS = 64
"""Replays one worker publishes at once (`relay_routes(max_replays=)`)."""
_RETRY_AFTER = "1"  # seconds: a replay slot frees as soon as one ends
_Item = TypeVar("_Item", Relayed, TurnRelayed)
_MAX_STEP = 2**62  # a turn's steps, as Redis indexes its list (a signed 64-bit integer)

SSE_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}


async def _first(items: AsyncIterator[_Item], gone: str = "stream") -> _Item | Response:
    """The first item, or the error response when the stream (or turn) is unknown."""
    try:
        return await anext(items)
    except RelayNotFound as exc:
        return _error(404, str(exc))
    except StopAsyncIteration:
        return _error(404, f"the {gone} has no more events")
    except RelayError as exc:
        return _unavailable(exc)


def _unavailable(error: RelayError) -> Response:
    """503; a stopping worker adds `retry-after`: another one (or its successor) serves."""
    response = _error(503, str(error))
    if isinstance(error, RelayStopped):
        response.headers["retry-after"] = _RETRY_AFTER
    return response


async def _events(
    first: Relayed, items: AsyncIterator[Relayed], stopped: list[RelayStopped]
) -> AsyncIterator[Event]:
    """A subscription as plain events: the first snapshot as the events that rebuild it.
    A stopped relay ends them quietly, noted in `stopped`."""
    head = first.event
    if isinstance(head, Snapshot):
        for event in head.events():
            yield event
    else:
        yield head
    try:
        async for item in items:
            if isinstance(item.event, Snapshot):
                # The reader fell more than `maxlen` events behind: its view cannot be patched.
                raise RelayError("the stream moved on too far to follow; reload to start over")
            yield item.event
    except RelayStopped as exc:
        stopped.append(exc)


async def _checked_turn(
    first: TurnRelayed, items: AsyncIterator[TurnRelayed], stopped: list[RelayStopped]
) -> AsyncIterator[TurnRelayed]:
    """A turn's subscription, checked: a response's Snapshot comes first in its step
    alone (a later one: the reader fell more than `maxlen` events behind). Ends at the
    turn's end; a stopped relay ends it quietly, noted in `stopped`."""
    seen_step = -1
    item: TurnRelayed | None = first
    try:
        while item is not None:
            inner = item.item
            snapshot = isinstance(inner, Relayed) and isinstance(inner.event, Snapshot)
            if snapshot and item.step == seen_step:
                raise RelayError("the turn moved on too far to follow; reload to start over")
            seen_step = item.step
            yield item
            if isinstance(inner, TurnCompleted):
                return
            item = await anext(items, None)
    except RelayStopped as exc:
        stopped.append(exc)


async def _turn_events(
    items: AsyncIterator[TurnRelayed], ended: list[TurnCompleted]
) -> AsyncIterator[Event | ToolResult]:
    """The turn's items as what the UI and AG-UI encoders take; its end, in `ended`."""
    async for item in items:
        if isinstance(item.item, TurnCompleted):
            ended.append(item.item)
        for event in item.events():
            yield event


class _StoppedTurn:
    """A UI message stream encoder that ends a stopped turn with `abort` (`useChat` shows
    the message as stopped, not finished), whatever response was last."""

    def __init__(self, encoder: UIMessageStreamEncoder, ended: list[TurnCompleted]) -> None:
        self.encoder = encoder
        self.ended = ended
        self.start = encoder.start
        self.feed = encoder.feed
        self.tool_result = encoder.tool_result
        self.fail = encoder.fail

    def close(self) -> list[UIMessageChunk]:
        if self.ended and self.ended[-1].status == "cancelled":
            return self.encoder.abort("stopped")
        return self.encoder.close()


async def _unless_stopped(
    body: AsyncIterator[bytes], stopped: list[RelayStopped]
) -> AsyncIterator[bytes]:
    """`body` up to the relay's stop, without the message's end that would follow it: the
    page sees a dropped connection and follows the stream anew (on a worker that runs)."""
    async for data in body:
        if stopped:
            return
        yield data


async def _asked(request: Request) -> dict[str, Any] | Response:
    """The request's JSON object (empty when there is no body: a start may come in the
    query string alone), or the refusal."""
    body: Any = {}
    if await request.body():
        try:
            body = await read_json(request)
        except RequestRefused as exc:
            return _error(exc.status, exc.message)
    return body if isinstance(body, dict) else {}


async def _run_input(request: Request) -> Any:
    """The AG-UI RunAgentInput of the body, checked with the package's own model; None
    without a body; or the refusal."""
    from ag_ui.core import RunAgentInput
    from pydantic import ValidationError

    if not await request.body():
        return None
    try:
        body = await read_json(request)
    except RequestRefused as exc:
        return _error(exc.status, exc.message)
    try:
        return RunAgentInput.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(body)'}: {e['msg']}" for e in exc.errors()[:5]
        )
        return _error(400, f"expected an AG-UI RunAgentInput: {problems}")


async def _agui_run(
    encoder: Any, items: AsyncIterator[TurnRelayed], known: int, history: list[Any]
) -> AsyncIterator[Any]:
    """A turn as an AG-UI run for a reader that came when the turn had `known` steps.
    Those before the last one (and the last one, unless it is a response) are the loop so
    far: fed to the encoder unseen, then sent as RUN_STARTED and one MESSAGES_SNAPSHOT of
    `history` and the messages they built. The rest goes out as it comes, each event once.
    A reader that came before any message gets the run as it was, from its start."""
    cut = known - 1
    caught_up = known == 0
    held: list[Any] = encoder.start()  # the run so far, until the reader is caught up
    failed: BaseException | str | None = None
    stopped_turn = False

    def join() -> list[Any]:
        if not encoder.messages():
            return held  # nothing to sum up: the events themselves, as they were
        return [held[0], encoder.snapshot(history)]  # RUN_STARTED, the loop so far

    if caught_up:
        for event in held:
            yield event
    try:
        async for item in items:
            inner = item.item
            if not caught_up and (
                item.step > cut or (item.step == cut and isinstance(inner, Relayed))
            ):
                caught_up = True
                for event in join():
                    yield event
            if isinstance(inner, TurnCompleted):
                stopped_turn = inner.status == "cancelled"
                if inner.status in ("error", "incomplete"):
                    why = "its producer was lost" if inner.synthetic else "it failed"
                    failed = f"the turn ended {inner.status}: {why}"
                break
            out: list[Any] = []
            for event in item.events():
                is_result = isinstance(event, ToolResult)
                out += encoder.tool_result(event) if is_result else encoder.feed(event)
            if caught_up:
                for event in out:
                    yield event
            else:
                held.extend(out)
    except StreamfoldError as exc:  # Redis gone for good, say: say so, last
        failed = exc
    if not caught_up:
        for event in join():
            yield event
    if failed is not None:
        last = encoder.fail(failed)
    elif stopped_turn:
        last = encoder.abort()  # stopped between responses too: the run was cancelled
    else:
        last = encoder.close()
    for event in last:
        yield event


def _sse(item: Relayed) -> bytes:
    if isinstance(item.event, Snapshot):
        kind = "snapshot"
        data: dict[str, Any] = {
            "type": "snapshot",
            "message": item.event.message.model_dump(mode="json"),
            "open": list(item.event.open),
        }
    else:
        data = event_to_json(item.event)
        kind = data["type"]
        if item.synthetic:
            data["synthetic"] = True
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"id: {item.id}\nevent: {kind}\ndata: {body}\n\n".encode()


def _turn_sse(item: TurnRelayed) -> bytes:
    """A turn's item as an EventSource event: a response's as `/relay/events` writes it,
    under the turn's id (`<step>:<entry id>`) so a reconnect resumes within the turn."""
    inner = item.item
    if isinstance(inner, Relayed):
        rest = _sse(inner).split(b"\n", 1)[1]  # its entry id: the turn's id instead
        return f"id: {item.id}\n".encode() + rest
    if isinstance(inner, ToolResult):
        data: dict[str, Any] = {"type": "tool_result", **inner.model_dump(mode="json")}
    else:
        data = {"type": inner.type, "status": inner.status}
        if inner.synthetic:
            data["synthetic"] = True
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"id: {item.id}\nevent: {data['type']}\ndata: {body}\n\n".encode()


async def _turn_over(relay: Relay, turn_id: str, after: str) -> bool:
    """True when `after` is the turn's end (or an end a reader made up for a lost
    producer, one step past the list): an EventSource that reconnects there must stop."""
    step, entry = _turn_after(after)
    if step > _MAX_STEP:  # Redis would refuse the index: the reader's id is wrong, not Redis
        raise UsageError(
            f"expected Last-Event-ID (or after=) an id this turn gave, got {preview(after)}"
        )
    if entry is not None:
        return False  # inside a response: the turn's end, at least, is still to come
    list_key = _turn_keys(relay, turn_id)[0]
    (length,) = await relay._commands(("llen", (list_key,), {}))
    if not length:
        return False  # unknown or expired: the subscription says so
    if step > length:
        return True  # after the end a reader made up: nothing is stored past it
    (last,) = await relay._commands(("lindex", (list_key, step - 1), {}))
    try:
        stored = json.loads(last) if last is not None else None
    except ValueError:
        return False  # not a step: the subscription says what it is
    return isinstance(stored, dict) and "end" in stored


def _sse_error(error: StreamfoldError) -> bytes:
    data = {"type": "error", "error": {"type": type(error).__name__, "message": str(error)}}
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: error\ndata: {body}\n\n".encode()


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _stop_on_signals(relay: Relay) -> Iterator[None]:
    """`relay.stop()` as soon as the process gets SIGTERM or SIGINT, then the handler that
    was there (the server's: it begins its graceful shutdown). The server runs the
    lifespan's shutdown only after every response has ended, and a relayed message's
    response lasts as long as the message: stopping the relay first is what ends them."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread alone: a server run on another is stopped
        return  # by whoever runs it (call relay.stop() there)
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Future[None]] = []  # held, so the task is not collected

    def begin() -> None:
        if not stopping:
            stopping.append(asyncio.ensure_future(relay.stop()))

    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        loop.call_soon_threadsafe(begin)
        chained = previous.get(signum)
        if callable(chained):
            chained(signum, frame)
        elif chained == signal.SIG_DFL:  # nobody else handles it: stop the process as usual
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    for stop_signal in _STOP_SIGNALS:
        previous[stop_signal] = signal.signal(stop_signal, handler)
    try:
        yield
    finally:
        for signum, chained in previous.items():
            if signal.getsignal(signum) is handler:
                signal.signal(signum, chained)


def relay_lifespan(relay: Relay) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A Starlette lifespan that stops `relay` on SIGTERM or SIGINT (the replays this worker
    still publishes end as cancelled at once, its readers are let go, so the server stops
    at once) and closes it at shutdown."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        try:
            with _stop_on_signals(relay):
                yield
        finally:
            await relay.aclose()

    return lifespan


def relay_routes(
    relay: Relay,
    recordings_dir: str | Path | None = None,
    *,
    speed: float = 1.0,
    max_replays: int = DEFAULT_MAX_REPLAYS,
) -> list[Route]:
    """The relay routes for the demo page, replaying the recordings of `recordings_dir`
    (at most `max_replays` at once: a replay holds its recording and its fold until it
    ends, so without a cap a slow replay per request grows the worker without bound)."""
    if isinstance(max_replays, bool) or not isinstance(max_replays, int) or max_replays < 1:
        raise UsageError(f"relay_routes: expected max_replays= an int >= 1, got {max_replays!r}")
    directory = recordings_dir if recordings_dir is not None else _bundled()
    catalog = find_recordings(directory)
    by_name = {r.name: r for r in catalog}
    loops = {loop.name: loop for loop in find_loops(directory, catalog)}
    default_speed = speed
    running: set[asyncio.Task[Any]] = set()  # the replays this worker is publishing
    starting = 0  # replays past the cap's check whose task is not running yet

    async def info(request: Request) -> Response:
        return JSONResponse({"relay": True})

    async def launch(
        publisher: RelayProducer | RelayTurn, work: Callable[[], Awaitable[Any]], what: str
    ) -> Response | None:
        """Start `publisher` (its stream or turn exists before anyone is told its id) and
        run `work` in it as a task of this worker; the refusal when the worker publishes
        `max_replays` already (503 with `retry-after`) or Redis is out of reach."""
        nonlocal starting
        if len(running) + starting >= max_replays:
            refused = _error(
                503,
                f"this worker publishes {max_replays} replays already (its max_replays); "
                f"try again in {_RETRY_AFTER} s",
            )
            refused.headers["retry-after"] = _RETRY_AFTER
            return refused
        starting += 1  # counted before the await: concurrent starts all see it
        try:
            await publisher.start()
        except RelayError as exc:
            return _unavailable(exc)
        finally:
            starting -= 1

        async def run() -> None:
            # Nobody awaits this task: its end is told to the readers (the message's last
            # event, or their own error) and to the log, never left as an unretrieved error.
            try:
                async with publisher:
                    await work()
            except StreamfoldError as exc:
                _log.warning("relay %s stopped: %s", what, exc)
            except Exception:
                _log.exception("relay %s failed", what)

        task = asyncio.create_task(run(), name=f"relay-{what.replace(' ', '-')}")
        running.add(task)
        task.add_done_callback(running.discard)
        return None

    async def start(request: Request) -> Response:
        body = await _asked(request)
        if isinstance(body, Response):
            return body
        wanted = body.get("recording") or request.query_params.get("recording")
        recording = by_name.get(wanted) if isinstance(wanted, str) else None
        loop = loops.get(wanted) if isinstance(wanted, str) else None
        if recording is None and loop is None:
            return _error(404, f"no recording named {wanted!r} (see /ui-recordings)")
        raw_speed = body.get("speed", request.query_params.get("speed"))
        try:
            pace = _speed(None if raw_speed is None else str(raw_speed), default_speed)
        except UsageError as exc:
            return _error(400, str(exc))
        if loop is not None:  # the page's loops: a turn, followed at /relay/turn/ui-stream
            return await begin_turn(loop, pace)
        assert recording is not None
        stream_id = uuid.uuid4().hex
        producer = relay.producer(stream_id, provider=recording.provider)

        async def publish() -> None:
            await producer.pump(_paced(recording, pace))

        refused = await launch(producer, publish, f"replay {stream_id}")
        if refused is not None:
            return refused
        return JSONResponse({"id": stream_id, "recording": recording.name})

    async def turn_start(request: Request) -> Response:
        body = await _asked(request)
        if isinstance(body, Response):
            return body
        wanted = body.get("loop") or request.query_params.get("loop")
        loop = loops.get(wanted) if isinstance(wanted, str) else None
        if loop is None:
            return _error(404, f"no loop named {wanted!r} (see /ui-recordings)")
        raw_speed = body.get("speed", request.query_params.get("speed"))
        try:
            pace = _speed(None if raw_speed is None else str(raw_speed), default_speed)
        except UsageError as exc:
            return _error(400, str(exc))
        return await begin_turn(loop, pace)

    async def begin_turn(loop: DemoLoop, pace: float) -> Response:
        turn_id = uuid.uuid4().hex
        turn = relay.turn(turn_id)

        async def play() -> None:
            async for step in _loop_steps(loop, pace):
                if turn.stop_requested:
                    break  # stopped: no tool result, no response after the cut one
                if isinstance(step, ToolResult):
                    await turn.tool_result(step)
                else:
                    source, provider = step
                    await turn.respond(source, provider=provider)

        refused = await launch(turn, play, f"turn {turn_id}")
        if refused is not None:
            return refused
        return JSONResponse({"id": turn_id, "recording": loop.name, "turn": True})

    async def turn_ui_stream(request: Request) -> Response:
        turn_id = request.path_params["id"]
        try:
            items = relay.subscribe_turn(turn_id)
        except UsageError as exc:
            return _error(400, str(exc))
        first = await _first(items, "turn")
        if isinstance(first, Response):
            return first
        stopped: list[RelayStopped] = []
        ended: list[TurnCompleted] = []
        events = _turn_events(_checked_turn(first, items, stopped), ended)
        encoder = _StoppedTurn(UIMessageStreamEncoder(message_id=turn_id), ended)
        body = aencode_sse(adrive(encoder, events))
        body = _unless_stopped(body, stopped)
        headers = {**UI_MESSAGE_STREAM_HEADERS, "x-streamfold-relay": turn_id}
        return StreamingResponse(body, headers=headers)

    async def turn_agui(request: Request) -> Response:
        try:
            from ..agui import AGUIEncoder, aencode_agui_sse
        except ImportError:  # pragma: no cover - the extra is part of the test install
            return _error(
                501, "AG-UI needs the ag-ui-protocol package: pip install 'streamfold[agui]'"
            )
        turn_id = request.path_params["id"]
        run = await _run_input(request)
        if isinstance(run, Response):
            return run
        try:
            items = relay.subscribe_turn(turn_id)
            # The steps the turn has when the reader comes: the loop so far is every step
            # before the last one, and the last one too unless it is a response (that one
            # is followed from its start, as a reader there from the start saw it).
            (known,) = await relay._commands(("llen", (_turn_keys(relay, turn_id)[0],), {}))
        except UsageError as exc:
            return _error(400, str(exc))
        except RelayError as exc:
            return _unavailable(exc)
        first = await _first(items, "turn")
        if isinstance(first, Response):
            return first
        thread_id = run.thread_id if run is not None else turn_id
        run_id = run.run_id if run is not None else turn_id
        history = list(run.messages) if run is not None else []
        encoder = AGUIEncoder(thread_id=thread_id, run_id=run_id, id_prefix=turn_id)
        stopped: list[RelayStopped] = []
        run_events = _agui_run(encoder, _checked_turn(first, items, stopped), int(known), history)
        headers = {**SSE_HEADERS, "x-streamfold-relay": turn_id}
        body = _unless_stopped(aencode_agui_sse(run_events), stopped)
        return StreamingResponse(body, headers=headers)

    async def turn_events(request: Request) -> Response:
        turn_id = request.path_params["id"]
        after = request.headers.get("last-event-id") or request.query_params.get("after")
        try:
            items = relay.subscribe_turn(turn_id, after=after or None)
            if after and await _turn_over(relay, turn_id, after):
                return Response(status_code=204)  # EventSource: the turn is over, stop
        except UsageError as exc:
            return _error(400, str(exc))
        except RelayError as exc:
            return _unavailable(exc)
        first = await _first(items, "turn")
        if isinstance(first, Response):
            return first

        async def body() -> AsyncIterator[bytes]:
            yield _turn_sse(first)
            if isinstance(first.item, TurnCompleted):
                return
            try:
                async for item in items:
                    yield _turn_sse(item)
            except RelayStopped:
                return  # no last word: the EventSource reconnects, with its last id, elsewhere
            except StreamfoldError as exc:  # Redis gone for good, say: say so, last
                yield _sse_error(exc)

        headers = {**SSE_HEADERS, "x-streamfold-relay": turn_id}
        return StreamingResponse(body(), headers=headers)

    async def ui_stream(request: Request) -> Response:
        try:
            items = relay.subscribe(request.path_params["id"])
        except UsageError as exc:
            return _error(400, str(exc))
        first = await _first(items)
        if isinstance(first, Response):
            return first
        stopped: list[RelayStopped] = []
        body = aencode_sse(ato_ui_message_stream(_events(first, items, stopped)))
        body = _unless_stopped(body, stopped)
        headers = {**UI_MESSAGE_STREAM_HEADERS, "x-streamfold-relay": first.id}
        return StreamingResponse(body, headers=headers)

    async def events(request: Request) -> Response:
        after = request.headers.get("last-event-id") or request.query_params.get("after")
        try:
            items = relay.subscribe(request.path_params["id"], after=after or None)
        except UsageError as exc:
            return _error(400, str(exc))
        first = await _first(items)
        if isinstance(first, Response):
            if after and first.status_code == 404 and b"no more events" in first.body:
                return Response(status_code=204)  # EventSource: the stream is over, stop
            return first

        async def body() -> AsyncIterator[bytes]:
            yield _sse(first)
            try:
                async for item in items:
                    yield _sse(item)
            except RelayStopped:
                return  # no last word: the EventSource reconnects, with its last id, elsewhere
            except StreamfoldError as exc:  # Redis gone for good, say: say so, last
                yield _sse_error(exc)

        return StreamingResponse(body(), headers=SSE_HEADERS)

    async def stop(request: Request) -> Response:
        # Any worker takes it: the producer, wherever it runs, closes its source and ends
        # the message cancelled; every reader gets that end. Closing a reader stops nothing.
        stream_id = request.path_params["id"]
        try:
            producing = await relay.request_stop(stream_id)
        except UsageError as exc:
            return _error(400, str(exc))
        except RelayError as exc:
            return _unavailable(exc)
        return JSONResponse({"id": stream_id, "stopping": producing}, status_code=202)

    return [
        Route("/relay/info", info, methods=["GET"]),
        Route("/relay/start", start, methods=["POST"]),
        Route("/relay/stop/{id}", stop, methods=["POST"]),
        Route("/relay/ui-stream/{id}", ui_stream, methods=["GET"]),
        Route("/relay/events/{id}", events, methods=["GET"]),
        Route("/relay/turn/start", turn_start, methods=["POST"]),
        Route("/relay/turn/stop/{id}", stop, methods=["POST"]),
        Route("/relay/turn/ui-stream/{id}", turn_ui_stream, methods=["GET"]),
        Route("/relay/turn/agui/{id}", turn_agui, methods=["POST"]),
        Route("/relay/turn/events/{id}", turn_events, methods=["GET"]),
    ]


__all__ = ["relay_lifespan", "relay_routes"]
