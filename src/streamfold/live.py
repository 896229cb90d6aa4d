"""Terminal views of a fold: a rich Live view for terminals, plain text for pipes.

Finished parts print once and scroll up; parts still being written update in place below
them, with a status line (events, bytes, seconds). A finished text part waits below until
it is known to be narration or the answer (a tool starts, or the message ends), and the
parts after it wait behind it, so they print in order. Thinking is dimmed, narration marked,
tool calls show their arguments pretty-printed once complete, and the stop reason and
usage close the message. Without a terminal (or without rich) the same parts print as
plain text when they complete, with no cursor movement.

With structured output (`replay --output module:Model`) the typed value shows below the
open parts as it fills in (its JSON, the newest lines when it is taller than the screen,
drawn at most 30 times a second whatever the number of deltas), and prints whole, or its
validation error, before the message's footer.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any, Protocol, assert_never

from .display import MarkedInOrder
from .events import (
    Event,
    MessageCompleted,
    OutputCompleted,
    OutputFailed,
    OutputItem,
    OutputPartial,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    ProviderErrored,
    UsageUpdated,
)
from .message import Message, ToolCall, Usage
from .parts import ContentPart, put_utterance, utterance

# (text, rich style) segments; a plain view ignores the style.
Line = list[tuple[str, str]]

_UNSUPPORTED_PREVIEW = 300


class View(Protocol):
    """What the CLI drives: events in, terminal output out."""

    def start(self, title: str, total_bytes: int) -> None:
        """The replay begins."""

    def progress(self, nbytes: int) -> None:
        """`nbytes` more bytes of the stream were read."""

    def handle(self, event: Event) -> None:
        """Show one fold event."""

    def finish(self) -> None:
        """The replay is over (normally or not): leave the terminal clean."""


@dataclass
class _Open:
    """A part being written: what its start carried plus the deltas so far."""

    start: ContentPart | ToolCall
    chunks: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)


def _json_block(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _output_json(value: Any) -> str:
    """A structured output value as indented JSON (a partial model: the fields it has)."""
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return _json_block(to_jsonable_python(value))
    except PydanticSerializationError:
        return repr(value)


def output_lines(value: Any, *, done: bool, tail: int | None = None) -> list[Line]:
    """The typed output's block: a header, then its JSON (the last `tail` lines only)."""
    text = _output_json(value).splitlines()
    header = "typed output" if done else "typed output · partial"
    if tail is not None and len(text) > tail:
        text = ["…", *text[-tail:]]
    return [[(header, "bold green" if done else "green")], *[[(t, "")] for t in text]]


def output_error_lines(error: Any) -> list[Line]:
    """The typed output failed validation: why, as the error says."""
    return [[("typed output · failed", "bold red")], [(str(error), "red")]]


def _header(part: ContentPart | ToolCall, done: bool) -> Line | None:
    if isinstance(part, ToolCall):
        head: Line = [("⚙ tool call ", "bold yellow"), (part.name or "?", "bold")]
        if part.call_id:
            head.append((f"  {part.call_id}", "dim"))
        if done and isinstance(part.arguments, str) and part.arguments.strip():
            head.append(("  (arguments are not valid JSON)", "bold red"))
        return head
    if part.type == "thinking":
        head = [("✻ thinking", "dim bold")]
        if part.options.get("signature"):
            head.append(("  (signed)", "dim"))
        return head
    if part.type == "text":
        if utterance(part) == "narration":
            return [("▸ narration", "cyan")]
        return None
    if part.type == "unsupported":
        kind = part.options.get("type")
        head = [(f"▪ {kind if isinstance(kind, str) else 'provider block'}", "magenta")]
        block = part.options.get("block")
        if isinstance(block, dict) and isinstance(block.get("name"), str):
            head.append((f" {block['name']}", "bold magenta"))
        return head
    return [(f"▪ {part.type}", "magenta")]


def _body(part: ContentPart | ToolCall, text: str | None, done: bool) -> tuple[str, str]:
    """The part's body text and style; `text` is the streamed text so far (None: none)."""
    if isinstance(part, ToolCall):
        if done and isinstance(part.arguments, dict):
            return _json_block(part.arguments), "yellow"
        return text or "", "dim yellow" if not done else "yellow"
    if part.type == "thinking":
        return text or "", "dim italic"
    if part.type == "text":
        return text or "", "italic cyan" if utterance(part) == "narration" else ""
    if part.type == "unsupported":
        block = part.options.get("block")
        if not done or block is None:
            return "", "magenta"
        if isinstance(block, dict) and isinstance(block.get("input"), dict):
            # A server-side tool call (web search, MCP...): its input, like a tool call's.
            return _json_block(block["input"]), "magenta"
        if isinstance(block, dict):
            block = {k: v for k, v in block.items() if k not in ("type", "name")}
        shown = json.dumps(block, ensure_ascii=False)
        if len(shown) > _UNSUPPORTED_PREVIEW:
            shown = shown[:_UNSUPPORTED_PREVIEW] + "…"
        return shown, "dim magenta"
    return (text or "")[:_UNSUPPORTED_PREVIEW], "magenta"


def part_lines(part: ContentPart | ToolCall, text: str | None, done: bool) -> list[Line]:
    """How a part shows: an optional header line, then its body."""
    lines: list[Line] = []
    head = _header(part, done)
    if head is not None:
        lines.append(head)
    body, style = _body(part, text, done)
    if body:
        lines.append([(body, style)])
    return lines


def completed_lines(part: ContentPart | ToolCall) -> list[Line]:
    """The lines of a finished part."""
    text = part.arguments if isinstance(part, ToolCall) else part.content
    return part_lines(part, text if isinstance(text, str) else None, done=True)


def usage_text(usage: Usage | None) -> str:
    """One line of token counts, e.g. `usage: 598 in · 92 out (53 reasoning)`."""
    if usage is None:
        return "usage: not reported"
    parts = [f"{usage.input_tokens if usage.input_tokens is not None else '?'} in"]
    out = f"{usage.output_tokens if usage.output_tokens is not None else '?'} out"
    if usage.reasoning_tokens:
        out += f" ({usage.reasoning_tokens} reasoning)"
    parts.append(out)
    if usage.cache_read_tokens:
        parts.append(f"{usage.cache_read_tokens} cache read")
    if usage.cache_write_tokens:
        parts.append(f"{usage.cache_write_tokens} cache write")
    return "usage: " + " · ".join(parts)


def footer_lines(message: Message) -> list[Line]:
    """The end of a message: stop reason and status, then usage."""
    stop: str = message.stop_reason or "none"
    if message.raw_stop_reason and message.raw_stop_reason != message.stop_reason:
        stop += f" ({message.raw_stop_reason})"
    ok = message.status == "complete"
    return [
        [("─" * 3 + " ", "dim"), (f"stop: {stop}", "bold" if ok else "bold red"),
         (f" · status: {message.status}", "dim" if ok else "bold red")],
        [(usage_text(message.usage), "green")],
    ]  # fmt: skip


def error_lines(event: ProviderErrored) -> list[Line]:
    """A provider's in-stream error."""
    kind = f" ({event.error_type})" if event.error_type else ""
    return [[(f"✖ provider error{kind}: {event.message}", "bold red")]]


class _Parts:
    """The parts of a fold, fed by events: those being written, and finished ones held."""

    def __init__(self) -> None:
        self.open: dict[int, _Open] = {}
        # Finished parts not printed yet: a text part waits for its narration / answer
        # marker, and the parts after it wait behind it.
        self.done = MarkedInOrder()
        # The structured output: its latest value (live: it grows in place), and the lines
        # to print for good once it is complete or failed.
        self.output: Any = None
        self.has_output = False
        self.output_final: list[Line] | None = None

    def feed(self, event: Event) -> list[Line] | None:
        """Track `event`; return the lines to print for good (parts ended), else None."""
        if isinstance(event, PartStarted):
            start = event.part
            first = start.arguments if isinstance(start, ToolCall) else start.content
            self.open[event.index] = _Open(
                start=start, chunks=[first] if isinstance(first, str) and first else []
            )
            return None
        if isinstance(event, PartDelta):
            state = self.open.get(event.index)
            if state is not None:
                if event.content:
                    state.chunks.append(event.content)
                if event.options:
                    state.options.update(event.options)
            return None
        if isinstance(event, PartCompleted):
            self.open.pop(event.index, None)
            return _shown(self.done.completed(event.index, event.part))
        if isinstance(event, PartMarked):
            state = self.open.get(event.index)
            if state is not None and isinstance(state.start, ContentPart):
                inferred = not event.explicit
                state.start = put_utterance(state.start, event.utterance, inferred=inferred)
            return _shown(self.done.marked(event.index, event.utterance, event.explicit))
        if isinstance(event, ProviderErrored):
            return [*(_shown(self.done.flush()) or []), *error_lines(event)]
        if isinstance(event, MessageCompleted):
            lines = _shown(self.done.flush()) or []
            if self.output_final is not None:
                lines = [*lines, *([[]] if lines else []), *self.output_final]
                self.output_final = None
            self.has_output = False
            self.open.clear()
            return [*lines, *([[]] if lines else []), *footer_lines(event.message)]
        if isinstance(event, UsageUpdated):
            return None
        if isinstance(event, OutputPartial):
            # Kept, not drawn: serialising the value at each delta would cost its size
            # each time; the live view draws it at most 30 times a second.
            self.output, self.has_output = event.value, True
            return None
        if isinstance(event, OutputCompleted):
            self.output, self.has_output = event.value, False
            self.output_final = output_lines(event.value, done=True)
            return None
        if isinstance(event, OutputFailed):
            self.has_output = False
            self.output_final = output_error_lines(event.error)
            return None
        if isinstance(event, OutputItem):
            return None  # the element is in the partial value
        assert_never(event)

    def growing(self, tail: int | None = None) -> list[list[Line]]:
        """The lines of each part not printed yet, in slot order; `tail` keeps only the
        last characters of a part being written."""
        held = self.done.held.items()
        out: list[tuple[int, list[Line]]] = [(i, completed_lines(p)) for i, p in held]
        for index, state in self.open.items():
            text = "".join(state.chunks)
            if tail is not None and len(text) > tail:
                # Only the end of a long part fits on screen: do not re-wrap all of it.
                text = "…" + text[-tail:]
            out.append((index, part_lines(state.start, text, done=False)))
        blocks = [lines for _, lines in sorted(out, key=lambda entry: entry[0])]
        if self.has_output:
            rows = None if tail is None else max(3, tail // 80)
            blocks.append(output_lines(self.output, done=False, tail=rows))
        elif self.output_final is not None:
            blocks.append(self.output_final)
        return blocks


def _shown(parts: list[ContentPart | ToolCall]) -> list[Line] | None:
    """The lines of finished parts, a blank line between two; None for nothing to print."""
    lines: list[Line] = []
    for part in parts:
        shown = completed_lines(part)
        if shown and lines:
            lines.append([])
        lines.extend(shown)
    return lines or None


class PlainView:
    """Plain text: each part prints when it completes; no colour, no cursor movement."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stdout
        self.parts = _Parts()
        self._printed = 0

    def start(self, title: str, total_bytes: int) -> None:
        """Print the title."""
        self._write([[(title, "")]])

    def progress(self, nbytes: int) -> None:
        """Plain output shows no progress line."""

    def handle(self, event: Event) -> None:
        """Print finished parts, errors and the footer."""
        lines = self.parts.feed(event)
        if lines:
            self._write(lines)

    def finish(self) -> None:
        """Flush the output."""
        self.out.flush()

    def _write(self, lines: list[Line]) -> None:
        if self._printed:
            self.out.write("\n")
        self._printed += 1
        for line in lines:
            self.out.write("".join(text for text, _ in line) + "\n")
        self.out.flush()


class LiveView:
    """A rich Live view: finished parts scroll up, open parts update in place."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console: Any = console or Console(highlight=False)
        self.parts = _Parts()
        self.live: Any = None
        self.events = 0
        self.bytes = 0
        self.total = 0
        self.title = ""
        self.started = time.monotonic()
        self._printed = 0
        self._drawn = 0.0

    def start(self, title: str, total_bytes: int) -> None:
        """Print the title and start the live area."""
        from rich.live import Live

        self.title = title
        self.total = total_bytes
        self.started = time.monotonic()
        self._print([[(title, "bold")]])
        self.live = Live(
            self._render(),
            console=self.console,
            refresh_per_second=20,
            transient=True,
            auto_refresh=False,
        )
        self.live.start()

    def progress(self, nbytes: int) -> None:
        """Count bytes read and redraw."""
        self.bytes += nbytes
        self._refresh()

    def handle(self, event: Event) -> None:
        """Print finished parts above the live area; redraw the open ones."""
        self.events += 1
        lines = self.parts.feed(event)
        if lines:
            self._print(lines)
        self._refresh(force=bool(lines))

    def finish(self) -> None:
        """Stop the live area (it disappears: everything finished was printed above it)."""
        if self.live is not None:
            self.live.update(self._status(), refresh=True)
            self.live.stop()
            self.live = None

    def _refresh(self, force: bool = False) -> None:
        if self.live is None:
            return
        now = time.monotonic()
        # At --speed 0 events come faster than a terminal can show: redraw 30 times a second.
        if force or now - self._drawn >= 1 / 30:
            self._drawn = now
            self.live.update(self._render(), refresh=True)

    def _print(self, lines: list[Line]) -> None:
        if self._printed:
            self.console.print()
        self._printed += 1
        for line in lines:
            self.console.print(_text(line))

    def _status(self) -> Any:
        from rich.text import Text

        seconds = time.monotonic() - self.started
        done = f"{_size(self.bytes)}/{_size(self.total)}" if self.total else _size(self.bytes)
        return Text(f"⋯ {self.events} events · {done} · {seconds:.1f} s", style="dim")

    def _render(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        # Only the tail of the open parts fits: keep the status line and the newest lines.
        room = max(3, self.console.height - 2)
        width = max(20, self.console.width)
        rows: list[Any] = []
        for lines in self.parts.growing(tail=room * width):
            for line in lines:
                rows.extend(_text(line).wrap(self.console, width))
            rows.append(Text(""))
        if len(rows) > room:
            rows = rows[-room:]
        elif rows and self._printed:
            rows.insert(0, Text(""))
        return Group(*rows, self._status())


def _text(line: Line) -> Any:
    from rich.text import Text

    text = Text()
    for chunk, style in line:
        text.append(chunk, style=style or None)
    return text


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def make_view(out: IO[str] | None = None, *, live: bool | None = None) -> View:
    """A LiveView when writing to a terminal and rich is installed, else a PlainView."""
    stream = out or sys.stdout
    if live is None:
        isatty = getattr(stream, "isatty", None)
        live = bool(isatty and isatty())
    if live:
        try:
            from rich.console import Console
        except ImportError:
            return PlainView(stream)
        return LiveView(Console(file=stream, highlight=False))
    return PlainView(stream)
