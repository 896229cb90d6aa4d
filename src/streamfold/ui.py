"""The Vercel AI SDK "UI message stream" (v1): streamfold events as the chunks `useChat` reads.

    events ─▶ UIMessageStreamEncoder ─▶ chunks (dicts) ─▶ encode_sse ─▶ `data: {...}\\n\\n` bytes

The chunk shapes follow `UIMessageChunk` / `uiMessageChunkSchema` of the `ai` npm package
(v6). A message is `start`, `start-step`, its parts, `finish-step`, `finish`, then
`data: [DONE]`. Every part gets an id from its slot index (`part-3`), so it is stable
however the bytes were split.

    text          text-start / text-delta / text-end
    thinking      reasoning-start / reasoning-delta / reasoning-end
    tool call     tool-input-start / tool-input-delta / tool-input-available
                  (tool-input-error when the arguments are not a JSON object)
    citations     source-url (web pages, places) / source-document, once per source
    image, file   file (a URL, or a data: URL for base64 content)
    unsupported   data-provider-block, data = the part's options (the whole provider block)
    typed output  data-output, id `output`, data = {"state": "partial" | "complete" |
                  "failed", "value", "error"} (`fold(..., output=Model)`; see below)
    provider err  error
    the end       finish: finishReason, and messageMetadata (status, stop reason, usage, model)

Part options (narration markers, thinking signatures, ids, encrypted reasoning) travel as
`providerMetadata: {"streamfold": <options>}` on the start and end chunks; the end chunk
carries the final options (a streamed signature whole).

Consecutive text parts of one utterance (Anthropic splits a cited answer into a text block
per cited sentence, with lone ". " blocks between) are one text part on the wire: the
first's id, their text in order, one end whose options say `citations`, a list of
`{"start", "end", "sourceIds"}` placing each cited piece in the joined text.

A text part's marker (`utterance`: narration or answer, `utterance_inferred` when
streamfold worked it out) is often known only after the part is complete, when a tool
starts or the message ends: its `text-end` waits for it, so the marker always arrives on
the text part. Usage updates are not sent as
they come: the final usage is in `finish`.

The structured output of a fold with `output=` (its `OutputPartial`, `OutputCompleted`,
`OutputFailed` events) goes out as one data part, `data-output` with id `output`, which the
AI SDK's reader replaces in place each time it comes again (data parts of one type and id
are reconciled): `message.parts` holds the latest value, as JSON (`state` "partial", then
"complete" with the fully validated value, or "failed" with the error and no value). The
answer's JSON text still goes out as its text (or tool input) part, delta by delta. A
partial value is sent whole, so sending every change would put the square of the
answer's size on the wire: partial values go out while the bytes sent for them stay
within `output_ratio` (8) times the answer's text so far (every change of a short answer,
then an update each time the text grew by about a seventh), and the complete value
always.
`output_ratio=None` sends every change.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Final, assert_never

from pydantic_core import PydanticSerializationError, to_jsonable_python

from .errors import StreamfoldError, UsageError, preview
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
from .parts import INFERRED_OPTION, Citation, ContentPart, utterance

UIMessageChunk = dict[str, Any]
"""One chunk of the UI message stream, as the JSON object sent on a `data:` line."""

UI_MESSAGE_STREAM_HEADERS: Final[dict[str, str]] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""The response headers of a UI message stream (the SDK's, less `connection`, which an
ASGI server manages itself and HTTP/2 forbids)."""

METADATA_KEY: Final = "streamfold"
"""The providerMetadata namespace that carries part options."""

DATA_BLOCK: Final = "data-provider-block"
"""The data chunk type for parts the protocol has no room for (server tool blocks...)."""

DATA_OUTPUT: Final = "data-output"
"""The data chunk type of the structured output (`fold(..., output=Model)`), id `output`."""

OUTPUT_PART_ID: Final = "output"
"""The id of the structured output's data part: one per UI message, replaced as it grows."""

OUTPUT_RATIO: Final = 8.0
"""Partial output values go out while their bytes stay within this times the text so far."""

_FINISH_REASONS: Final[dict[str, str]] = {
    "stop": "stop",
    "tool_use": "tool-calls",
    "length": "length",
    "content_filter": "content-filter",
    "refusal": "content-filter",
    "error": "error",
    "pause": "other",
    "approval": "other",
    "cancelled": "other",
    "other": "other",
}
_STATUS_FINISH: Final[dict[str, str]] = {
    "complete": "stop",
    "length": "length",
    "content_filtered": "content-filter",
    "error": "error",
}
_DONE: Final = b"data: [DONE]\n\n"


# The keys of a text part's marker, apart from its other options when parts are joined.
_MARKER_KEYS = frozenset({"utterance", INFERRED_OPTION})


def _unmarked(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k not in _MARKER_KEYS}


class _TextRun:
    """Consecutive text parts sent as one UI text part (see the module docstring)."""

    __slots__ = ("citations", "explicit", "first", "last", "marker", "open", "options", "size")

    def __init__(self, first: int, part: ContentPart) -> None:
        self.first = first  # slot index of its first part (its id) ...
        self.last = first  # ... and of its latest
        self.open = True  # its latest part is still streaming
        self.options = _unmarked(part.options)  # the first part's, without a marker
        self.marker = utterance(part)  # said at the start (Responses phase), or later
        self.explicit = self.marker is not None and part.options.get(INFERRED_OPTION) is not True
        self.size = 0  # characters of text so far, to place the cited pieces
        self.citations: list[dict[str, Any]] = []

    def joins(self, index: int, part: ContentPart) -> bool:
        """Whether text part `index`, starting now, continues this run."""
        return (
            not self.open
            and index == self.last + 1
            and _unmarked(part.options) == self.options
            and utterance(part) in (None, self.marker)
        )


def _provider_metadata(options: dict[str, Any]) -> dict[str, Any]:
    return {"providerMetadata": {METADATA_KEY: options}} if options else {}


def _usage(usage: Usage) -> dict[str, int]:
    fields = {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cacheReadTokens": usage.cache_read_tokens,
        "cacheWriteTokens": usage.cache_write_tokens,
        "reasoningTokens": usage.reasoning_tokens,
    }
    out = {k: v for k, v in fields.items() if v is not None}
    out["totalTokens"] = usage.total_tokens
    return out


def finish_reason(message: Message) -> str:
    """The protocol's finishReason for a message (stop, tool-calls, length, content-filter...)."""
    if message.stop_reason is not None:
        return _FINISH_REASONS.get(message.stop_reason, "other")
    return _STATUS_FINISH.get(message.status, "other")


def message_metadata(message: Message, timing: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The `messageMetadata` sent with `finish`: status, stop reason, usage, model, ids,
    and `timing` (`MessageCompleted.timing`, when the fold had one)."""
    meta: dict[str, Any] = {"status": message.status}
    if message.stop_reason is not None:
        meta["stopReason"] = message.stop_reason
    if message.raw_stop_reason is not None:
        meta["rawStopReason"] = message.raw_stop_reason
    if message.usage is not None:
        meta["usage"] = _usage(message.usage)
    for key, name in (("provider", "provider"), ("model", "model"), ("id", "responseId")):
        value = message.metadata.get(key)
        if value is not None:
            meta[name] = value
    error = message.metadata.get("error")
    if error is not None:
        meta["error"] = error
    if timing is not None:
        # Seconds, and output tokens a second (see streamfold.timing); None when unknown.
        meta["timing"] = {
            "timeToFirstToken": timing.get("time_to_first_token_s"),
            "outputTokensPerSecond": timing.get("output_tokens_per_s"),
            "total": timing.get("total_s"),
        }
    return meta


class UIMessageStreamEncoder:
    """Sans-IO: streamfold events in, UI message stream chunks out.

    Call `start()` once, `feed(event)` per event, then `close()` (or `fail(exc)` when the
    fold raised). Several messages in a row (an agent loop) become several steps of one
    UI message; `finish` describes the last.

    `output_ratio`: partial structured-output values go out while their bytes stay within
    this many times the text so far (see the module's docstring); None sends every change.
    Feed the events as the fold gives them: a partial value grows in place afterwards.
    """

    def __init__(
        self, *, message_id: str | None = None, output_ratio: float | None = OUTPUT_RATIO
    ) -> None:
        if output_ratio is not None and (
            type(output_ratio) not in (int, float) or not output_ratio > 0
        ):
            raise UsageError(
                "UIMessageStreamEncoder: expected output_ratio to be a number > 0 or None, "
                f"got {preview(output_ratio, 40)}"
            )
        self.message_id = message_id
        self.output_ratio = output_ratio
        self._text_seen = 0  # characters of part deltas so far: the output's text and more
        self._output_sent = 0  # their estimate for the partial values sent so far
        self._started = False
        self._finished = False
        self._step = 0
        self._step_open = False
        self._open: dict[int, str] = {}  # slot index -> the kind of part open on the wire
        self._tool_ids: dict[int, str] = {}  # slot index -> toolCallId sent
        self._held: dict[int, UIMessageChunk] = {}  # run's first slot -> its end, awaiting a marker
        self._runs: dict[int, _TextRun] = {}  # slot index of a text part -> its run, until sent
        self._tail: _TextRun | None = None  # the run the next text part may continue
        self._held_at: dict[int, int] = {}  # slot index of a text part -> its held run's first
        self._sources: dict[tuple[str, str], str] = {}
        self._last: Message | None = None
        self._last_timing: Mapping[str, Any] | None = None
        self._errored = False

    def part_id(self, index: int) -> str:
        """The id of the part at slot `index` in the current step."""
        return f"part-{index}" if self._step == 0 else f"part-{self._step}-{index}"

    def start(self) -> list[UIMessageChunk]:
        """The opening chunks (`start`, `start-step`); empty after the first call."""
        if self._started:
            return []
        self._started = True
        start: UIMessageChunk = {"type": "start"}
        if self.message_id is not None:
            start["messageId"] = self.message_id
        return [start, *self._start_step()]

    def feed(self, event: Event) -> list[UIMessageChunk]:
        """The chunks one event gives."""
        if self._finished:
            return []
        out = self.start()
        if isinstance(event, PartStarted):
            out.extend(self._start_step())
            out.extend(self._part_started(event))
        elif isinstance(event, PartDelta):
            self._text_seen += len(event.content or "")
            out.extend(self._part_delta(event))
        elif isinstance(event, PartCompleted):
            out.extend(self._part_completed(event))
        elif isinstance(event, PartMarked):
            out.extend(self._part_marked(event))
        elif isinstance(event, UsageUpdated):
            pass  # the final usage goes out with `finish`
        elif isinstance(event, OutputPartial):
            out.extend(self._output_partial(event))
        elif isinstance(event, OutputCompleted):
            out.append(_output_chunk({"state": "complete", "value": _jsonable(event.value)}))
        elif isinstance(event, OutputFailed):
            data = {"state": "failed", "value": None, "error": str(event.error)}
            out.append(_output_chunk(data))
        elif isinstance(event, OutputItem):
            pass  # the element is in the partial values, and the text went out as deltas
        elif isinstance(event, ProviderErrored):
            self._errored = True
            label = f"{event.error_type}: " if event.error_type else ""
            out.append({"type": "error", "errorText": f"{label}{event.message}"})
        elif isinstance(event, MessageCompleted):
            self._last = event.message
            self._last_timing = event.timing
            out.extend(self._end_open())
            out.extend(self._finish_step())
        else:
            assert_never(event)
        return out

    def _output_partial(self, event: OutputPartial) -> list[UIMessageChunk]:
        # A value's JSON is about as long as the text it came from, so the text seen stands
        # for its size: serialising only what the budget allows keeps the cost linear.
        size = self._text_seen
        ratio = self.output_ratio
        if ratio is not None and self._output_sent + size > ratio * size:
            return []
        self._output_sent += size
        return [_output_chunk({"state": "partial", "value": _jsonable(event.value)})]

    def fail(self, error: BaseException | str) -> list[UIMessageChunk]:
        """The fold raised: end the open parts, send an `error`, and finish."""
        if self._finished:
            return []
        out = self.start()
        out.extend(self._end_open())
        out.append({"type": "error", "errorText": str(error) or type(error).__name__})
        self._errored = True
        out.extend(self._finish_step())
        out.extend(self._finish())
        return out

    def close(self) -> list[UIMessageChunk]:
        """The events ended: the closing chunks (`finish-step` if a step is open, `finish`)."""
        if self._finished:
            return []
        out = self.start()
        out.extend(self._end_open())
        out.extend(self._finish_step())
        out.extend(self._finish())
        return out

    # --- internals -------------------------------------------------------------------

    def _start_step(self) -> list[UIMessageChunk]:
        if self._step_open:
            return []
        if self._last is not None:
            self._step += 1  # a new message after a finished one: the next step
            self._tool_ids.clear()
        self._step_open = True
        return [{"type": "start-step"}]

    def _finish_step(self) -> list[UIMessageChunk]:
        if not self._step_open:
            return []
        self._step_open = False
        return [{"type": "finish-step"}]

    def _finish(self) -> list[UIMessageChunk]:
        self._finished = True
        finish: UIMessageChunk = {"type": "finish"}
        if self._last is not None:
            finish["finishReason"] = finish_reason(self._last)
            finish["messageMetadata"] = message_metadata(self._last, self._last_timing)
        elif self._errored:
            finish["finishReason"] = "error"
        return [finish]

    def _end_open(self) -> list[UIMessageChunk]:
        # The message is over: text ends still waiting for a marker go out without one (a
        # cut turn's answer is not known to be one). Parts the wire left open when the
        # stream broke end too, so a UI stops showing them as being written; an open tool
        # call has no input to offer, so it stays.
        self._tail = None
        for run in sorted({id(r): r for r in self._runs.values()}.values(), key=_first):
            self._end_run(run)
        self._runs.clear()
        out = [self._held[index] for index in sorted(self._held)]
        self._held.clear()
        self._held_at.clear()
        for index, kind in self._open.items():
            if kind == "reasoning":
                out.append({"type": "reasoning-end", "id": self.part_id(index)})
        self._open.clear()
        return out

    def _run_end(self, run: _TextRun) -> UIMessageChunk:
        options = dict(run.options)
        if run.marker is not None:
            options["utterance"] = run.marker
            if not run.explicit:
                options[INFERRED_OPTION] = True
        if run.last > run.first and run.citations:
            options["citations"] = run.citations
        return {"type": "text-end", "id": self.part_id(run.first), **_provider_metadata(options)}

    def _end_run(self, run: _TextRun) -> None:
        """The run can grow no more: its end is held until it is sent (by marker, or
        when the message ends, without one)."""
        self._held[run.first] = self._run_end(run)
        for index in range(run.first, run.last + 1):
            self._runs.pop(index, None)
            self._held_at[index] = run.first

    def _leave_tail(self) -> list[UIMessageChunk]:
        """Another part started: the tail run can grow no more. A finished one with its
        marker goes out; one still open goes when its part completes."""
        run = self._tail
        self._tail = None
        if run is None or run.open:
            return []
        if run.marker is None:
            self._end_run(run)  # held: its marker comes later
            return []
        for index in range(run.first, run.last + 1):
            self._runs.pop(index, None)
        return [self._run_end(run)]

    def _part_started(self, event: PartStarted) -> list[UIMessageChunk]:
        part = event.part
        pid = self.part_id(event.index)
        tail = self._tail
        if (
            tail is not None
            and isinstance(part, ContentPart)
            and part.type == "text"
            and tail.joins(event.index, part)
        ):
            # The text goes on in the run's part: no start, its deltas under the run's id.
            tail.last = event.index
            tail.open = True
            self._runs[event.index] = tail
            self._open[event.index] = "text"
            out = []
            if part.content:
                out.append({"type": "text-delta", "id": self.part_id(tail.first),
                            "delta": part.content})  # fmt: skip
            out.extend(self._sources_of(part.citations))
            return out
        out = self._leave_tail()
        if isinstance(part, ToolCall):
            self._open[event.index] = "tool"
            out += [
                {
                    "type": "tool-input-start",
                    "toolCallId": self._call_id(part, event.index),
                    "toolName": part.name or "unknown",
                    **_provider_metadata(dict(part.metadata)),
                }
            ]
            if isinstance(part.arguments, str) and part.arguments:
                out.append(
                    {
                        "type": "tool-input-delta",
                        "toolCallId": self._call_id(part, event.index),
                        "inputTextDelta": part.arguments,
                    }
                )
            return out
        kind = {"text": "text", "thinking": "reasoning"}.get(part.type)
        if kind is None:
            return out + self._sources_of(part.citations)  # emitted whole when it completes
        self._open[event.index] = kind
        if kind == "text":
            self._tail = self._runs[event.index] = _TextRun(event.index, part)
        out.append({"type": f"{kind}-start", "id": pid, **_provider_metadata(dict(part.options))})
        if part.content:
            out.append({"type": f"{kind}-delta", "id": pid, "delta": part.content})
        out.extend(self._sources_of(part.citations))
        return out

    def _part_delta(self, event: PartDelta) -> list[UIMessageChunk]:
        kind = self._open.get(event.index)
        out: list[UIMessageChunk] = []
        if event.content and kind in ("text", "reasoning"):
            run = self._runs.get(event.index) if kind == "text" else None
            index = event.index if run is None else run.first
            out.append({"type": f"{kind}-delta", "id": self.part_id(index), "delta": event.content})
        elif event.content and kind == "tool":
            out.append(
                {
                    "type": "tool-input-delta",
                    "toolCallId": self._tool_ids.get(event.index, ""),
                    "inputTextDelta": event.content,
                }
            )
        out.extend(self._sources_of(event.citations))
        return out

    def _part_completed(self, event: PartCompleted) -> list[UIMessageChunk]:
        part = event.part
        index = event.index
        kind = self._open.pop(index, None)
        pid = self.part_id(index)
        if isinstance(part, ToolCall):
            call_id = self._call_id(part, index)
            out: list[UIMessageChunk] = []
            if kind != "tool":  # never started on the wire (cannot happen with the accumulator)
                out.append({"type": "tool-input-start", "toolCallId": call_id,
                            "toolName": part.name or "unknown"})  # fmt: skip
            metadata = {k: v for k, v in part.metadata.items() if k != "arguments_error"}
            if isinstance(part.arguments, dict):
                out.append(
                    {
                        "type": "tool-input-available",
                        "toolCallId": call_id,
                        "toolName": part.name or "unknown",
                        "input": part.arguments,
                        **_provider_metadata(metadata),
                    }
                )
            else:
                error = part.metadata.get("arguments_error")
                out.append(
                    {
                        "type": "tool-input-error",
                        "toolCallId": call_id,
                        "toolName": part.name or "unknown",
                        "input": part.arguments or "",
                        "errorText": str(error or "the tool arguments are incomplete"),
                        **_provider_metadata(metadata),
                    }
                )
            return out
        out = []
        run = self._runs.get(index) if part.type == "text" else None
        if run is not None:
            self._text_completed(run, index, part)
            if run is not self._tail:  # another part started meanwhile: it can grow no more
                out.extend(self._release(run))
        elif part.type in ("text", "thinking"):
            kind = "text" if part.type == "text" else "reasoning"
            end = {"type": f"{kind}-end", "id": pid, **_provider_metadata(dict(part.options))}
            if part.type == "text" and utterance(part) is None:
                self._held[index] = end  # until its marker is known (see _part_marked)
            else:
                out.append(end)
        elif part.type == "unsupported":
            out.append({"type": DATA_BLOCK, "id": pid, "data": dict(part.options)})
        else:
            file = _file_chunk(part)
            if file is not None:
                out.append(file)
        out.extend(self._sources_of(part.citations))
        return out

    def _text_completed(self, run: _TextRun, index: int, part: ContentPart) -> None:
        run.open = False
        if index == run.first:
            run.options = _unmarked(part.options)  # its final options (a whole signature)
        marker = utterance(part)
        if marker is not None:
            run.marker, run.explicit = marker, part.options.get(INFERRED_OPTION) is not True
        start = run.size
        run.size += len(part.content or "")
        if part.citations:
            # Each source once per piece (a sentence can cite two passages of one page).
            ids = list(dict.fromkeys(i for i in map(self._source_id, part.citations) if i))
            run.citations.append({"start": start, "end": run.size, "sourceIds": ids})

    def _release(self, run: _TextRun) -> list[UIMessageChunk]:
        """A run that can grow no more, complete: its end now if its marker is known."""
        if run.marker is None:
            self._end_run(run)
            return []
        for index in range(run.first, run.last + 1):
            self._runs.pop(index, None)
        return [self._run_end(run)]

    def _part_marked(self, event: PartMarked) -> list[UIMessageChunk]:
        run = self._runs.get(event.index)
        if run is not None:
            # Still growing, or its last part still open: the marker goes with its end.
            if run.marker is None or (event.explicit and not run.explicit):
                run.marker, run.explicit = event.utterance, event.explicit
            return []
        # A text part still open gets its marker with its end (in the part's options).
        end = self._held.pop(self._held_at.pop(event.index, event.index), None)
        if end is None:
            return []
        marker: dict[str, Any] = {"utterance": event.utterance}
        if not event.explicit:
            marker[INFERRED_OPTION] = True
        options = dict(end.get("providerMetadata", {}).get(METADATA_KEY, {}))
        options.update(marker)
        return [{**end, **_provider_metadata(options)}]

    def _call_id(self, call: ToolCall, index: int) -> str:
        known = self._tool_ids.get(index)
        if known is None:
            known = call.call_id or f"call-{self.part_id(index)}"
            self._tool_ids[index] = known
        return known

    def _sources_of(self, citations: Iterable[Citation]) -> list[UIMessageChunk]:
        out: list[UIMessageChunk] = []
        for citation in citations:
            chunk = self._source(citation)
            if chunk is not None:
                out.append(chunk)
        return out

    def _source_id(self, citation: Citation) -> str | None:
        key = _source_key(citation)
        return None if key is None else self._sources.get(key)

    def _source(self, citation: Citation) -> UIMessageChunk | None:
        source = citation.source
        key = _source_key(citation)
        if source is None or key is None:
            return None
        if key in self._sources:
            return None
        source_id = f"source-{len(self._sources)}"
        self._sources[key] = source_id
        meta: dict[str, Any] = dict(source.metadata)
        if key[0] == "url":
            chunk: UIMessageChunk = {"type": "source-url", "sourceId": source_id, "url": key[1]}
            if source.title is not None:
                chunk["title"] = source.title
        else:
            media = meta.get("media_type") or meta.get("mediaType") or meta.get("mime_type")
            chunk = {
                "type": "source-document",
                "sourceId": source_id,
                "mediaType": media if isinstance(media, str) else "application/octet-stream",
                "title": source.title or source.document_id or "document",
            }
            if source.document_id is not None:
                meta["document_id"] = source.document_id
            if source.url is not None:
                meta["url"] = source.url
        chunk.update(_provider_metadata(meta))
        return chunk


def _output_chunk(data: dict[str, Any]) -> UIMessageChunk:
    return {"type": DATA_OUTPUT, "id": OUTPUT_PART_ID, "data": data}


def _jsonable(value: Any) -> Any:
    """The output value as JSON data (a partial model holds only the fields that arrived)."""
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError:
        return repr(value)


def _first(run: _TextRun) -> int:
    return run.first


def _source_key(citation: Citation) -> tuple[str, str] | None:
    """What makes a cited source one source-url / source-document chunk."""
    source = citation.source
    if source is None:
        return None
    if source.url is not None and source.type != "document":
        return ("url", source.url)
    if source.document_id is not None or source.title is not None:
        return ("document", source.document_id or source.title or "")
    if source.url is not None:
        return ("url", source.url)
    return None


def _file_chunk(part: ContentPart) -> UIMessageChunk | None:
    if part.content is None:
        return None
    media = part.options.get("media")
    default = "image/*" if part.type in ("image", "image_url") else "application/octet-stream"
    media_type = media if isinstance(media, str) else default
    if part.type in ("image", "file"):
        url = part.content if part.content.startswith("data:") else (
            f"data:{media_type};base64,{part.content}"
        )  # fmt: skip
    else:
        url = part.content
    return {"type": "file", "url": url, "mediaType": media_type,
            **_provider_metadata(dict(part.options))}  # fmt: skip


def to_ui_message_stream(
    events: Iterable[Event],
    *,
    message_id: str | None = None,
    output_ratio: float | None = OUTPUT_RATIO,
) -> Iterator[UIMessageChunk]:
    """Turn streamfold events into UI message stream chunks (a StreamfoldError becomes `error`).

    `output_ratio`: see `UIMessageStreamEncoder` (None: every structured-output change).
    """
    encoder = UIMessageStreamEncoder(message_id=message_id, output_ratio=output_ratio)
    yield from encoder.start()
    iterator = iter(events)
    while True:
        try:
            event = next(iterator)
        except StopIteration:
            break
        except StreamfoldError as exc:
            yield from encoder.fail(exc)
            return
        yield from encoder.feed(event)
    yield from encoder.close()


async def ato_ui_message_stream(
    events: AsyncIterable[Event],
    *,
    message_id: str | None = None,
    output_ratio: float | None = OUTPUT_RATIO,
) -> AsyncIterator[UIMessageChunk]:
    """Async `to_ui_message_stream`: over `async for` events (an `afold`, say)."""
    encoder = UIMessageStreamEncoder(message_id=message_id, output_ratio=output_ratio)
    for chunk in encoder.start():
        yield chunk
    iterator = aiter(events)
    while True:
        try:
            event = await anext(iterator)
        except StopAsyncIteration:
            break
        except StreamfoldError as exc:
            for chunk in encoder.fail(exc):
                yield chunk
            return
        for chunk in encoder.feed(event):
            yield chunk
    for chunk in encoder.close():
        yield chunk


def encode_chunk(chunk: UIMessageChunk) -> bytes:
    """One chunk as an SSE event: `data: <json>` and a blank line."""
    body = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return b"data: " + body.encode() + b"\n\n"


def encode_sse(chunks: Iterable[UIMessageChunk]) -> Iterator[bytes]:
    """The SSE bytes of a UI message stream, ending with `data: [DONE]`."""
    for chunk in chunks:
        yield encode_chunk(chunk)
    yield _DONE


async def aencode_sse(chunks: AsyncIterable[UIMessageChunk]) -> AsyncIterator[bytes]:
    """Async `encode_sse`."""
    async for chunk in chunks:
        yield encode_chunk(chunk)
    yield _DONE


__all__ = [
    "DATA_BLOCK",
    "METADATA_KEY",
    "UI_MESSAGE_STREAM_HEADERS",
    "UIMessageChunk",
    "UIMessageStreamEncoder",
    "aencode_sse",
    "ato_ui_message_stream",
    "encode_chunk",
    "encode_sse",
    "finish_reason",
    "message_metadata",
    "to_ui_message_stream",
]
