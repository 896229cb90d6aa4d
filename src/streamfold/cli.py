"""The `streamfold` command: replay recorded streams, a demo, a replay server, a recorder.

    streamfold replay FILE [--speed X] [--jsonl | --display | --message] [--provider P]
                           [--output module:Model [--output-tool NAME]]
    streamfold demo [NAME]
    streamfold serve [DIR] [--host H] [--port N] [--speed X] [--max-body N] [--allow-host H]
    streamfold record OUT [--jsonl | --display | --message]   (reads the stream on stdin)

Pacing: a recording made with `streamfold.record` replays with its recorded timing; any
other replays one event every `EVENT_INTERVAL` seconds (20 ms) at `--speed 1`. `--speed 2`
is twice as fast, `--speed 0` does not wait at all.

`--output module:Model` folds the answer's JSON (the text after the last tool call, or
the arguments of the tool call `--output-tool` names) as structured output: the terminal
shows the typed value filling in, `--jsonl` adds the output's events. The module is
imported (the current directory first on the path), as the user asked on the command
line; anything there that is not a pydantic model or a type pydantic validates is refused.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .arguments import no_events_error
from .display import MarkedInOrder, display_items_for
from .errors import NoEventsError, StreamfoldError, UsageError
from .events import (
    Event,
    MessageCompleted,
    PartCompleted,
    PartMarked,
    ProviderErrored,
)
from .events_json import event_to_json
from .fold import StreamFolder
from .framing import StreamFormat
from .message import ToolCall
from .parts import ContentPart
from .providers import PROVIDERS, canonical_provider
from .record import arrival_times, check_speed, load_timing, schedule
from .recording import bundled_recordings
from .timing import StreamTiming, replay_clock

EXIT_OK = 0
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

DEMO = "anthropic/thinking-then-tool-use.sse"
"""The bundled recording `streamfold demo` replays: thinking, then a tool call."""

_KNOWN = "a recorded stream from anthropic, openai-chat, openai-responses, gemini, bedrock, ollama"


# --- JSON shapes ----------------------------------------------------------------------


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- sinks: where the events of a replay go ---------------------------------------------


class _JsonlSink:
    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def start(self, title: str, total_bytes: int) -> None:
        pass

    def progress(self, nbytes: int) -> None:
        pass

    def handle(self, event: Event) -> None:
        self.out.write(_dumps(event_to_json(event)) + "\n")
        self.out.flush()

    def finish(self) -> None:
        self.out.flush()


# What `replay --display` ends with (MessageCompleted.timing's keys; see streamfold.timing).
_TIMING_SUMMARY = ("time_to_first_token_s", "output_tokens_per_s", "total_s")


class _DisplaySink(_JsonlSink):
    """Each part's display items once final: a text part's wait for its marker."""

    def __init__(self, out: IO[str]) -> None:
        super().__init__(out)
        self.done = MarkedInOrder()

    def handle(self, event: Event) -> None:
        if isinstance(event, PartCompleted):
            self._write(self.done.completed(event.index, event.part))
        elif isinstance(event, PartMarked):
            self._write(self.done.marked(event.index, event.utterance, event.explicit))
        elif isinstance(event, ProviderErrored | MessageCompleted):
            self._write(self.done.flush())
        if isinstance(event, MessageCompleted):
            # Last, how fast the stream came: a line of its own, after every display item.
            timing = event.timing
            if timing is not None:
                line = {key: timing.get(key) for key in _TIMING_SUMMARY}
                self.out.write(_dumps({"type": "timing", **line}) + "\n")
                self.out.flush()

    def _write(self, parts: Sequence[ContentPart | ToolCall]) -> None:
        for part in parts:
            for item in display_items_for(part, "assistant"):
                self.out.write(_dumps(item.model_dump(mode="json")) + "\n")
        self.out.flush()


class _MessageSink(_JsonlSink):
    def handle(self, event: Event) -> None:
        if isinstance(event, MessageCompleted):
            self.out.write(event.message.model_dump_json(indent=2) + "\n")
            self.out.flush()


# --- recordings -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    """A stream to replay: its name (for messages), bytes, framing, provider and timing."""

    name: str
    data: bytes
    format: StreamFormat
    provider: str
    timing: list[tuple[int, float]] | None = None


def open_source(path: str, provider: str | None = None) -> Source:
    """Read a recording (or stdin for "-"); UsageError with a one-line reason if unusable."""
    from .recording import detect_recording

    name = "<stdin>" if path == "-" else path
    timing = None
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        file = Path(path)
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise UsageError(f"{name}: cannot read: {exc.strerror or exc}") from None
        timing = load_timing(file)
    kind, detected = detect_recording(data)
    if kind is None:
        raise UsageError(f"{name}: empty stream: expected {_KNOWN}")
    chosen = canonical_provider(provider) if provider else detected
    if chosen is None:
        raise UsageError(
            f"{name}: not a recognisable stream: expected {_KNOWN}, got {kind} events "
            "that match none"
        )
    return Source(name=name, data=data, format=kind, provider=chosen, timing=timing)


def provenance_line(rel: str, directory: Path | None = None) -> str | None:
    """`source: repo path (license), model` for a bundled recording, from PROVENANCE.md."""
    base = directory or bundled_recordings()
    try:
        text = (base / "PROVENANCE.md").read_text(encoding="utf-8")
    except OSError:
        return None
    for row in text.splitlines():
        if not row.startswith(f"| `{rel}`"):
            continue
        cells = [cell.strip().strip("`") for cell in row.strip("|").split("|")]
        if len(cells) < 9:
            return None
        _, api, repo, source_path, commit, license_, _, model = cells[:8]
        return f"recorded: {model} ({api}); from {repo} {source_path} @ {commit}, {license_}"
    return None


# --- replay -----------------------------------------------------------------------------


def make_sink(mode: str, out: IO[str]) -> Any:
    """The view or JSON sink for an output mode: live, jsonl, display, message."""
    if mode == "jsonl":
        return _JsonlSink(out)
    if mode == "display":
        return _DisplaySink(out)
    if mode == "message":
        return _MessageSink(out)
    from .live import make_view

    return make_view(out)


def run(
    chunks: Iterable[tuple[float, bytes]],
    provider: str | None,
    sink: Any,
    *,
    title: str = "",
    total_bytes: int = 0,
    sleep: Callable[[float], None] = time.sleep,
    arrivals: Sequence[float] | None = None,
    output: Any = None,
    output_tool: str | None = None,
) -> None:
    """Fold paced (wait, chunk) pairs into `sink`, keeping what arrived if interrupted.

    `arrivals`: the recorded arrival time of each chunk, which the timing then reads
    (else the clock's: how the replay came, at its speed). `output`, `output_tool`: the
    structured output, as for `fold`."""
    clock, arrive = replay_clock(list(arrivals or ()))
    folder = StreamFolder(
        provider,
        timing=StreamTiming(clock, 0.0) if arrivals else None,
        output=output,
        output_tool=output_tool,
    )
    sink.start(title, total_bytes)
    try:
        for n, (wait, chunk) in enumerate(chunks):
            if wait > 0:
                sleep(wait)
            if arrivals:
                arrive(n)
            for event in folder.feed(chunk):
                sink.handle(event)
            sink.progress(len(chunk))
            if folder.finished:
                break
        closing = folder.close()
        for event in closing:
            sink.handle(event)
    except KeyboardInterrupt:
        for event in folder.cancel():
            sink.handle(event)
        raise
    finally:
        sink.finish()


def _no_events(exc: NoEventsError, name: str, note: str = "") -> UsageError:
    # Bytes that frame no event at all (any text is SSE with no events) are no recording,
    # even under --provider: the fold refuses them, said here in the command's terms.
    again = no_events_error(
        exc.nbytes, exc.start, objects=exc.objects, expected=_KNOWN, framing=exc.framing
    )
    return UsageError(f"{name}: {again}{note}")


def replay(
    source: Source,
    *,
    mode: str = "live",
    speed: float = 1.0,
    out: IO[str] | None = None,
    title: str | None = None,
    faults: str | None = None,
    output: Any = None,
    output_tool: str | None = None,
) -> None:
    """Replay a recording into the terminal view or one of the JSON outputs; `faults`
    (`cut_after_events=3,stall=2`, see `streamfold.testing.Faults`) play on the way.

    `output`, `output_tool`: fold the answer's JSON as structured output (as for `fold`)."""
    stream = out or sys.stdout
    if faults:
        steps, arrivals = _faulted_steps(source, faults, speed)
    else:
        steps = schedule(source.data, source.format, speed=speed, timing=source.timing)
        # The timing reads the recorded arrival times (the pace at speed 1), whatever the
        # speed.
        arrivals = arrival_times(source.data, source.format, source.timing)
    heading = title if title is not None else f"{source.name} · {source.provider}"
    sink = make_sink(mode, stream)
    if not _is_live(sink) and _isatty(sys.stderr) and not _isatty(stream):
        # Output goes to a pipe or file: show progress on the terminal's stderr instead.
        sink = _StderrProgress(sink, sys.stderr)
    try:
        run(
            steps,
            source.provider,
            sink,
            title=heading,
            total_bytes=len(source.data),
            arrivals=arrivals,
            output=output,
            output_tool=output_tool,
        )
    except NoEventsError as exc:
        raise _no_events(exc, source.name) from None
    except StreamfoldError as exc:
        raise UsageError(f"{source.name}: {exc}") from None


def _faulted_steps(
    source: Source, spec: str, speed: float
) -> tuple[list[tuple[float, bytes]], list[float]]:
    """The (wait, chunk) steps of a replay with faults played, and their arrival times."""
    import itertools

    from .testing.replayer import faulted_chunks
    from .testing.scenario import Faults

    chunks, _ = faulted_chunks(
        source.data, source.format, source.provider, Faults.parse(spec), timing=source.timing
    )
    check_speed(speed)
    steps = [(chunk.wait / speed if speed else 0.0, chunk.data) for chunk in chunks]
    return steps, list(itertools.accumulate(chunk.wait for chunk in chunks))


def load_output(spec: str) -> Any:
    """The type `--output module:Model` names: a pydantic model, a TypeAdapter, or another
    type pydantic validates (`Items = list[Product]` in the module); UsageError else."""
    import importlib

    from pydantic import BaseModel, TypeAdapter

    module_name, colon, attr = spec.partition(":")
    if not colon or not _dotted(module_name) or not _dotted(attr):
        raise UsageError(
            f"--output: expected module:Model (e.g. myapp.schemas:Answer), got {spec!r}"
        )
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the user's own modules
    try:
        value: Any = importlib.import_module(module_name)
    except Exception as exc:  # the module's own code may raise anything while importing
        raise UsageError(
            f"--output: expected an importable module {module_name!r}, got "
            f"{type(exc).__name__}: {exc}"
        ) from None
    for name in attr.split("."):
        if not hasattr(value, name):
            raise UsageError(f"--output: expected {module_name!r} to define {attr!r}, it does not")
        value = getattr(value, name)
    if isinstance(value, TypeAdapter):
        return value
    if isinstance(value, type) and issubclass(value, BaseModel):
        return value
    if _is_type(value):
        try:
            return TypeAdapter(value)
        except Exception as exc:  # pydantic's schema errors are of several kinds
            raise UsageError(
                f"--output: expected a type pydantic validates, got {spec} = {value!r} "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            ) from None
    raise UsageError(
        f"--output: expected a pydantic model or a type pydantic validates, got {spec} = "
        f"{_describe(value)}"
    )


def _dotted(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def _is_type(value: Any) -> bool:
    """A class or a typing construct (list[X], X | None, Annotated[...], a TypedDict...)."""
    import types
    import typing

    if isinstance(value, type):
        return True
    if isinstance(value, types.GenericAlias | types.UnionType):
        return True
    return typing.get_origin(value) is not None


def _describe(value: Any) -> str:
    kind = type(value).__name__
    text = repr(value)
    return f"{text[:80]}… ({kind})" if len(text) > 80 else f"{text} ({kind})"


def _isatty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _is_live(sink: Any) -> bool:
    from .live import LiveView

    return isinstance(sink, LiveView)


class _StderrProgress:
    """Wraps a sink: a one-line `events · bytes` status on stderr, redrawn at most 10/s."""

    def __init__(self, inner: Any, err: IO[str]) -> None:
        self.inner = inner
        self.err = err
        self.events = 0
        self.bytes = 0
        self.total = 0
        self.drawn = 0.0

    def start(self, title: str, total_bytes: int) -> None:
        self.total = total_bytes
        self.inner.start(title, total_bytes)

    def progress(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.inner.progress(nbytes)
        now = time.monotonic()
        if now - self.drawn >= 0.1:
            self.drawn = now
            self.err.write(f"\r\x1b[2K⋯ {self.events} events · {self.bytes}/{self.total} bytes")
            self.err.flush()

    def handle(self, event: Event) -> None:
        self.events += 1
        self.inner.handle(event)

    def finish(self) -> None:
        self.inner.finish()
        if self.drawn:
            self.err.write("\r\x1b[2K")
            self.err.flush()


def _stdin_chunks() -> Iterable[tuple[float, bytes]]:
    fd = sys.stdin.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        yield 0.0, chunk


# --- commands ---------------------------------------------------------------------------


def _mode(args: argparse.Namespace) -> str:
    if args.jsonl:
        return "jsonl"
    if args.display:
        return "display"
    if args.message:
        return "message"
    return "live"


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed: expected a number, got {text!r}") from None
    try:
        return check_speed(value)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _byte_count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a number of bytes, got {text!r}")
    return int(text)


def _add_output(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--jsonl", action="store_true", help="print one JSON event per line")
    group.add_argument(
        "--display", action="store_true", help="print display items (JSON lines) as parts end"
    )
    group.add_argument("--message", action="store_true", help="print the final Message as JSON")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `streamfold` command."""
    parser = argparse.ArgumentParser(
        prog="streamfold",
        description="Fold LLM provider streams into complete messages. "
        "With no command, replays the bundled demo.",
    )
    sub = parser.add_subparsers(dest="command")

    rp = sub.add_parser("replay", help="replay a recorded stream (file or - for stdin)")
    rp.add_argument("file", help="a .sse, .ndjson or .eventstream recording, or - for stdin")
    rp.add_argument(
        "--speed",
        type=_speed,
        default=1.0,
        help="1 (default): recorded timing, else one event per 20 ms; 0: no waiting; 2: 2x",
    )
    rp.add_argument("--provider", help=f"override detection ({', '.join(PROVIDERS)})")
    rp.add_argument(
        "--fault",
        default=None,
        metavar="SPEC",
        help="play faults on the way: cut_after_events=N, cut_after_bytes=N, stall=S "
        "(after stall_after_events=N), ttft=S, tokens_per_second=R, error_frame=KIND",
    )
    rp.add_argument(
        "--output",
        metavar="MODULE:MODEL",
        help="fold the answer's JSON as this pydantic model (or type), shown as it fills in",
    )
    rp.add_argument(
        "--output-tool",
        metavar="NAME",
        help="with --output: the tool call whose arguments are the output (default: the "
        "answer's text)",
    )
    _add_output(rp)

    dp = sub.add_parser("demo", help="replay a recording bundled with streamfold")
    dp.add_argument("name", nargs="?", default=DEMO, help=f"bundled recording (default {DEMO})")
    dp.add_argument("--speed", type=_speed, default=1.0, help="as for replay")
    dp.add_argument("--list", action="store_true", help="list the bundled recordings")
    _add_output(dp)

    sp = sub.add_parser("serve", help="serve recordings as OpenAI / Anthropic / Gemini APIs")
    sp.add_argument("dir", nargs="?", default=None, help="recordings directory (default: bundled)")
    sp.add_argument("--host", default="127.0.0.1")
    sp.add_argument("--port", type=int, default=8765)
    sp.add_argument("--speed", type=_speed, default=1.0, help="pacing, as for replay")
    sp.add_argument("--redis", default=None, help="Redis URL: resumable replays on the demo page")
    sp.add_argument(
        "--scenario",
        default=None,
        metavar="FILE",
        help="answer the API requests from this scenario's turns (TOML or JSON; see "
        "streamfold.testing): matched on the request, with their faults",
    )
    sp.add_argument(
        "--record",
        choices=("none", "new", "all"),
        default="none",
        help="with --scenario and --upstream: new forwards a request no turn answers to the "
        "upstream and records it as a turn (all: every request); secrets are not written",
    )
    sp.add_argument(
        "--upstream", default=None, metavar="URL", help="the real API for --record (https://...)"
    )
    sp.add_argument(
        "--redact",
        action="append",
        default=None,
        metavar="NAME",
        help="a header or body field never written when recording (repeatable)",
    )
    sp.add_argument(
        "--max-body",
        type=_byte_count,
        default=None,
        help="largest request body in bytes (default 1 MiB); a larger one gets 413",
    )
    sp.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this Host name (repeatable; '*' for any). Otherwise "
        "only localhost / 127.0.0.1 / [::1] and the --host address are answered, wherever "
        "it is bound (0.0.0.0 too): a web page elsewhere could point its own DNS name at "
        "this machine and read the answers (DNS rebinding)",
    )

    rc = sub.add_parser("record", help="record the stream on stdin to OUT while showing it")
    rc.add_argument("out", help="file to write (a .timing.json sidecar is written beside it)")
    rc.add_argument("--provider", help="override detection")
    _add_output(rc)
    return parser


def _bundled_names(base: Path) -> list[str]:
    return sorted(
        p.relative_to(base).as_posix()
        for p in base.rglob("*")
        if p.is_file() and p.suffix in (".sse", ".ndjson", ".eventstream")
    )


def _bundled(base: Path, name: str) -> str:
    """A bundled recording by path, path without suffix, file name, or file stem."""
    names = _bundled_names(base)
    for rel in names:
        stem = rel.rsplit(".", 1)[0]
        if name in (rel, stem, rel.rsplit("/", 1)[-1], stem.rsplit("/", 1)[-1]):
            return rel
    raise UsageError(f"demo: no bundled recording named {name!r}; expected one of {names}")


def _demo(args: argparse.Namespace, out: IO[str]) -> int:
    base = bundled_recordings()
    if args.list:
        out.writelines(f"{rel}\n" for rel in _bundled_names(base))
        return EXIT_OK
    rel = _bundled(base, args.name)
    source = open_source(str(base / rel))
    mode = _mode(args)
    if mode == "live":
        line = provenance_line(rel, base)
        title = f"streamfold demo · {rel} · {source.provider}"
        if line:
            title += f"\n{line}"
    else:
        title = ""
    replay(source, mode=mode, speed=args.speed, out=out, title=title)
    return EXIT_OK


def _record(args: argparse.Namespace, out: IO[str]) -> int:
    from .record import tee

    provider = canonical_provider(args.provider) if args.provider else None
    # The request was sent by whatever writes to stdin, at a moment this process cannot
    # know: the timing starts at the first byte read, not at this process's start-up.
    events = tee((chunk for _, chunk in _stdin_chunks()), args.out, provider, from_first_chunk=True)
    sink = make_sink(_mode(args), out)
    sink.start(f"recording to {args.out}", 0)
    try:
        for event in events:
            sink.handle(event)
    except NoEventsError as exc:
        # What replay would refuse is refused here too (the bytes stay in the file, as
        # they arrived).
        raise _no_events(exc, "<stdin>", f" (kept as received in {args.out})") from None
    except UsageError:
        raise
    except StreamfoldError as exc:
        raise UsageError(f"<stdin>: {exc}") from None
    finally:
        events.close()
        sink.finish()
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        args_list = ["demo"]
    parser = build_parser()
    args = parser.parse_args(args_list)
    out = sys.stdout
    try:
        if args.command == "replay":
            if args.output_tool is not None and args.output is None:
                raise UsageError("--output-tool: expected --output module:Model with it")
            output = load_output(args.output) if args.output is not None else None
            source = open_source(args.file, args.provider)
            replay(
                source,
                mode=_mode(args),
                speed=args.speed,
                out=out,
                faults=args.fault,
                output=output,
                output_tool=args.output_tool,
            )
            return EXIT_OK
        if args.command == "demo":
            return _demo(args, out)
        if args.command == "record":
            return _record(args, out)
        if args.command == "serve":
            from .serve import run_server
            from .web.guard import DEFAULT_MAX_BODY

            run_server(
                args.dir,
                host=args.host,
                port=args.port,
                speed=args.speed,
                redis_url=args.redis,
                max_body=DEFAULT_MAX_BODY if args.max_body is None else args.max_body,
                allow_hosts=args.allow_host,
                scenario=args.scenario,
                record=args.record,
                upstream=args.upstream,
                redact=args.redact,
            )
            return EXIT_OK
        parser.print_help()
        return EXIT_ERROR
    except StreamfoldError as exc:
        message = " ".join(str(exc).split())
        sys.stderr.write(f"streamfold: error: {message}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("streamfold: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as other filters do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
