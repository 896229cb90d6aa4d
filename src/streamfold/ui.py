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
    server tool   a tool the provider ran (web search, code execution, MCP...), its call's
                  block and its result's: one tool part with providerExecuted (see below)
    unsupported   any other provider block: data-provider-block, data = the part's options
    typed output  data-output, id `output`, data = {"state": "partial" | "complete" |
                  "failed", "value", "error"} (`fold(..., output=Model)`; see below)
    provider err  error
    the end       finish: finishReason, and messageMetadata (status, stop reason, usage, model)

Part options (narration markers, thinking signatures, ids, encrypted reasoning) travel as
`providerMetadata: {"streamfold": <options>}` on the start and end chunks; the end chunk
carries the final options (a streamed signature whole).

A tool the provider ran is `tool-input-start` / `tool-input-available` (its input: the
block's input, a Responses item's query or code, Gemini's code) when its call's block
completes, then `tool-output-available` (the result block's content) or
`tool-output-error` (the provider says it failed) when its result's does, all with
`providerExecuted: true` (and `dynamic: true` for an MCP server's tool, none of the app's).
The blocks themselves travel whole, `providerMetadata.streamfold.provider_block` on the
call's chunks and on the result's, so `load_ui_messages` gives back the parts they came
from, in place. A result whose call is not in the step stays a data-provider-block.

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
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal, TypeVar, assert_never, get_args

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ._model import check_json_object
from .construct import check_json_value
from .drive import adrive, drive
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
from .limits import MAX_JSON_DEPTH, json_depth_over
from .message import Message, Status, StopReason, ToolCall, ToolResult, Usage
from .parts import INFERRED_OPTION, Citation, CitationSource, ContentPart, utterance

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
"""The data chunk type for provider blocks the protocol has no room for (a container
upload, an MCP tool list...): the tools the provider ran are tool parts."""

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


# The usage fields of `messageMetadata.usage` and the Usage fields they hold, both ways
# (`message_metadata` writes them, `load_ui_messages` reads them back).
_USAGE_FIELDS: Final = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cacheReadTokens": "cache_read_tokens",
    "cacheWriteTokens": "cache_write_tokens",
    "reasoningTokens": "reasoning_tokens",
}


def _usage(usage: Usage) -> dict[str, int]:
    fields = {key: getattr(usage, name) for key, name in _USAGE_FIELDS.items()}
    out = {k: v for k, v in fields.items() if v is not None}
    out["totalTokens"] = usage.total_tokens
    return out


# --- Tools the provider ran itself ---------------------------------------------------------
#
# A server tool arrives as `unsupported` parts holding the provider's blocks: Anthropic's
# `server_tool_use` / `mcp_tool_use` then a `*_tool_result` block (Bedrock's `toolUse` of
# type `server_tool_use` then its `toolResult`), Gemini's `executableCode` then
# `codeExecutionResult`, or one Responses item holding call and result (`web_search_call`,
# `code_interpreter_call`, `mcp_call`...). The AI SDK speaks of them as tool parts with
# `providerExecuted: true`; the blocks themselves travel whole in the part's provider
# metadata (`PROVIDER_BLOCK_KEY`), so history read back holds them exactly.

PROVIDER_BLOCK_KEY: Final = "provider_block"
"""The key, under providerMetadata.streamfold, of a provider-executed tool's own block."""

_RESULT_AFTER_KEY: Final = "after"  # parts between a call's block and its result's


class _ProviderTool:
    """What one provider block says of a tool the provider ran: a call, its result, or both."""

    __slots__ = ("call", "call_id", "dynamic", "error", "input", "name", "output", "result")

    def __init__(self, *, call: bool, result: bool, call_id: str | None, name: str = "",
                 input: Any = None, output: Any = None, error: str | None = None,
                 dynamic: bool = False) -> None:  # fmt: skip
        self.call = call
        self.result = result
        self.call_id = call_id
        self.name = name
        self.input = input
        self.output = output
        self.error = error
        self.dynamic = dynamic  # a tool not in the app's set (an MCP server's): a dynamic-tool


# Responses items that are a call the provider ran and its result in one: the tool's name
# (the AI SDK's), and the item's fields that make the input (the rest is the output).
_RESPONSES_TOOLS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "web_search_call": ("web_search", ("action",)),
    "code_interpreter_call": ("code_interpreter", ("code", "container_id")),
    "file_search_call": ("file_search", ("queries",)),
    "image_generation_call": ("image_generation", ()),
    "mcp_call": ("", ("arguments",)),
}
_RESPONSES_DONE: Final = frozenset({"completed", "failed", "incomplete"})
_RESPONSES_ITEM: Final = frozenset({"id", "type"})


def _provider_tool(options: Mapping[str, Any]) -> _ProviderTool | None:
    """The tool call or result an `unsupported` part's options hold, if any."""
    block = options.get("block")
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind in ("server_tool_use", "mcp_tool_use"):  # Anthropic
        call_id, name, args = block.get("id"), block.get("name"), block.get("input")
        if isinstance(call_id, str) and isinstance(name, str) and isinstance(args, dict):
            return _ProviderTool(call=True, result=False, call_id=call_id, name=name,
                                 input=args, dynamic=kind == "mcp_tool_use")  # fmt: skip
        return None
    if isinstance(kind, str) and kind.endswith("_tool_result"):  # Anthropic
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            return None
        content = block.get("content")
        error = None
        if block.get("is_error") is True:  # mcp_tool_result
            error = _block_text(content) or "the tool failed"
        elif isinstance(content, dict) and str(content.get("type", "")).endswith("_error"):
            error = str(content.get("error_message") or content.get("error_code") or "failed")
        return _ProviderTool(call=False, result=True, call_id=call_id, output=content,
                             error=error)  # fmt: skip
    if isinstance(kind, str) and kind in _RESPONSES_TOOLS:
        return _responses_tool(kind, block)
    use = block.get("toolUse")
    if isinstance(use, dict) and use.get("type") == "server_tool_use":  # Bedrock
        call_id, name, args = use.get("toolUseId"), use.get("name"), use.get("input")
        if isinstance(call_id, str) and isinstance(name, str) and isinstance(args, dict):
            return _ProviderTool(call=True, result=False, call_id=call_id, name=name,
                                 input=args)  # fmt: skip
        return None
    done = block.get("toolResult")
    if isinstance(done, dict) and isinstance(done.get("toolUseId"), str):  # Bedrock
        content = done.get("content")
        error = None
        if done.get("status") == "error":
            error = _block_text(content) or "the tool failed"
        return _ProviderTool(call=False, result=True, call_id=done["toolUseId"], output=content,
                             error=error)  # fmt: skip
    code = block.get("executableCode")
    if isinstance(code, dict):  # Gemini
        call_id = code.get("id")
        return _ProviderTool(
            call=True, result=False, call_id=call_id if isinstance(call_id, str) else None,
            name="code_execution",
            input={k: v for k, v in code.items() if k in ("language", "code")},
        )  # fmt: skip
    ran = block.get("codeExecutionResult")
    if isinstance(ran, dict):  # Gemini
        call_id = ran.get("id")
        output = {k: v for k, v in ran.items() if k in ("outcome", "output")}
        outcome = ran.get("outcome")
        error = None
        if outcome is not None and outcome != "OUTCOME_OK":
            error = str(ran.get("output") or outcome)
        return _ProviderTool(call=False, result=True,
                             call_id=call_id if isinstance(call_id, str) else None,
                             output=output, error=error)  # fmt: skip
    return None


def _responses_tool(kind: str, block: dict[str, Any]) -> _ProviderTool | None:
    call_id = block.get("id")
    if not isinstance(call_id, str):
        return None
    name, input_keys = _RESPONSES_TOOLS[kind]
    args: Any = {k: block[k] for k in input_keys if block.get(k) is not None}
    action = block.get("action")
    if kind == "web_search_call" and isinstance(action, dict):
        # The search itself is the input (its query); the pages it found are the output.
        args = {k: v for k, v in action.items() if k != "sources"}
    if kind == "mcp_call":
        mcp_name = block.get("name")
        if not isinstance(mcp_name, str) or not mcp_name:
            return None
        name = mcp_name
        try:
            args = json.loads(block.get("arguments") or "{}")
        except ValueError:
            args = None
        if not isinstance(args, dict):
            args = {"arguments": block.get("arguments")}
    output = {
        k: v
        for k, v in block.items()
        if k not in _RESPONSES_ITEM and k not in input_keys and k != "name" and v is not None
    }
    if kind == "web_search_call" and isinstance(action, dict) and "sources" in action:
        output["sources"] = action["sources"]
    status = block.get("status")
    error = None
    if block.get("error") is not None:
        error = _block_text(block["error"]) or "the tool failed"
    elif status == "failed":
        error = f"{kind} failed"
    return _ProviderTool(call=True, result=status in _RESPONSES_DONE, call_id=call_id,
                         name=name, input=args, output=output, error=error,
                         dynamic=kind == "mcp_call")  # fmt: skip


def _block_text(content: Any) -> str:
    """The text of a failed tool's content (a string, or blocks with text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    texts = [b.get("text") for b in content if isinstance(b, dict)]
    return "".join(t for t in texts if isinstance(t, str))


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
        self._provider_calls: dict[str, int] = {}  # a provider-run call's id -> its slot index
        self._unanswered: list[str] = []  # provider-run calls awaiting their result, in order
        self._held: dict[int, UIMessageChunk] = {}  # run's first slot -> its end, awaiting a marker
        self._runs: dict[int, _TextRun] = {}  # slot index of a text part -> its run, until sent
        self._tail: _TextRun | None = None  # the run the next text part may continue
        self._held_at: dict[int, int] = {}  # slot index of a text part -> its held run's first
        self._sources: dict[tuple[str, str], str] = {}
        self._last: Message | None = None
        self._last_timing: Mapping[str, Any] | None = None
        self._errored = False
        self.steps: list[dict[str, Any]] = []
        """Each finished response's `message_metadata` (an agent loop's steps)."""

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
            self.steps.append(message_metadata(event.message, event.timing))
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

    def tool_result(self, result: ToolResult) -> list[UIMessageChunk]:
        """The app's tool finished: `tool-output-available` with its output, or
        `tool-output-error` (`is_error`), or `tool-output-denied` (the user said no: the
        result's `approval` option says `approved: false`)."""
        if self._finished:
            return []
        out = self.start()
        call_id = result.tool_call_id
        approval = result.options.get("approval")
        if isinstance(approval, dict) and isinstance(approval.get("id"), str):
            out.extend(self.approval_request(call_id, approval["id"]))
        if isinstance(approval, dict) and approval.get("approved") is False:
            out.append({"type": "tool-output-denied", "toolCallId": call_id})
        elif result.is_error:
            out.append(
                {
                    "type": "tool-output-error",
                    "toolCallId": call_id,
                    "errorText": _result_text(result),
                }
            )
        else:
            out.append({"type": "tool-output-available", "toolCallId": call_id,
                        "output": tool_output(result)})  # fmt: skip
        return out

    def approval_request(self, tool_call_id: str, approval_id: str) -> list[UIMessageChunk]:
        """The app asks the user to approve a call before it runs it: the call's part
        shows `approval-requested`; the answer comes back on the UI message
        (`approval: {id, approved, reason}`), which `load_ui_messages` reads."""
        if self._finished:
            return []
        return [*self.start(), {"type": "tool-approval-request", "approvalId": approval_id,
                                "toolCallId": tool_call_id}]  # fmt: skip

    def data(
        self, name: str, data: Any, *, id: str | None = None, transient: bool = False
    ) -> list[UIMessageChunk]:
        """A `data-<name>` part of the app's own (a status line, a chart's points): with an
        `id`, a later one of the same name and id replaces it; `transient` ones reach the
        app's `onData` and are not kept in the message."""
        if not isinstance(name, str) or not name:
            raise UsageError(f"data: expected a non-empty part name, got {name!r}")
        if self._finished:
            return []
        check_json_value(data, "data")
        chunk: UIMessageChunk = {"type": f"data-{name}", "data": data}
        if id is not None:
            chunk["id"] = id
        if transient:
            chunk["transient"] = True
        return [*self.start(), chunk]

    def metadata(self, metadata: Mapping[str, Any]) -> list[UIMessageChunk]:
        """`message-metadata`: merged into the message's metadata as it streams."""
        if not isinstance(metadata, Mapping):
            raise UsageError(f"metadata: expected a mapping, got {type(metadata).__name__}")
        if self._finished:
            return []
        value = check_json_object(dict(metadata), "metadata")
        return [*self.start(), {"type": "message-metadata", "messageMetadata": value}]

    def abort(self, reason: str | None = None) -> list[UIMessageChunk]:
        """The user stopped the turn: open parts end, `abort`, and the stream is over
        (`useChat` shows the message as stopped, not failed)."""
        if self._finished:
            return []
        out = self.start()
        out.extend(self._end_open())
        out.extend(self._finish_step())
        chunk: UIMessageChunk = {"type": "abort"}
        if reason is not None:
            chunk["reason"] = str(reason)
        out.append(chunk)
        self._finished = True
        return out

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
            self._provider_calls.clear()
            self._unanswered.clear()
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
            if len(self.steps) > 1:
                # Each response's provider, model, id and stop reason: an agent loop's
                # steps may differ, and history read back needs each step's provider.
                finish["messageMetadata"]["steps"] = self.steps
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
            out.extend(self._provider_block(index, part))
        else:
            file = _file_chunk(part)
            if file is not None:
                out.append(file)
        out.extend(self._sources_of(part.citations))
        return out

    def _provider_block(self, index: int, part: ContentPart) -> list[UIMessageChunk]:
        """A provider block, whole: a tool the provider ran (its call, its result, or both)
        as a tool part with `providerExecuted`; anything else as `data-provider-block`."""
        options = dict(part.options)
        tool = _provider_tool(options)
        pid = self.part_id(index)
        if tool is not None and tool.call:
            call_id = tool.call_id or f"call-{pid}"
            if call_id in self._provider_calls:  # the same call again: not a second part
                tool = None
            else:
                return self._provider_call(index, call_id, tool, options)
        if tool is not None and tool.result:
            answered = tool.call_id
            if answered is None and self._unanswered:
                answered = self._unanswered[-1]  # Gemini's result follows its code, unnamed
            if answered is not None and answered in self._unanswered:
                self._unanswered.remove(answered)
                meta: dict[str, Any] = {PROVIDER_BLOCK_KEY: options}
                after = index - self._provider_calls[answered] - 1
                if after:
                    meta[_RESULT_AFTER_KEY] = after
                return [_provider_output(answered, tool, meta)]
        return [{"type": DATA_BLOCK, "id": pid, "data": options}]

    def _provider_call(
        self, index: int, call_id: str, tool: _ProviderTool, options: dict[str, Any]
    ) -> list[UIMessageChunk]:
        self._provider_calls[call_id] = index
        common: UIMessageChunk = {"toolCallId": call_id, "toolName": tool.name or "unknown",
                                  "providerExecuted": True}  # fmt: skip
        if tool.dynamic:
            common["dynamic"] = True
        meta = _provider_metadata({PROVIDER_BLOCK_KEY: options})
        out = [
            {"type": "tool-input-start", **common, **meta},
            {"type": "tool-input-available", **common, "input": tool.input, **meta},
        ]
        if tool.result:  # one block holds the call and its result (a Responses item)
            out.append(_provider_output(call_id, tool, None))
        else:
            self._unanswered.append(call_id)
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


def _provider_output(
    call_id: str, tool: _ProviderTool, meta: dict[str, Any] | None
) -> UIMessageChunk:
    """`tool-output-available` (or `-error`) of a tool the provider ran."""
    chunk: UIMessageChunk = {"toolCallId": call_id}
    if tool.error is not None:
        chunk.update(type="tool-output-error", errorText=tool.error)
    else:
        chunk.update(type="tool-output-available", output=tool.output)
    chunk["providerExecuted"] = True
    if tool.dynamic:
        chunk["dynamic"] = True
    if meta is not None:
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
    events: Iterable[Event | ToolResult],
    *,
    message_id: str | None = None,
    output_ratio: float | None = OUTPUT_RATIO,
) -> Iterator[UIMessageChunk]:
    """Turn streamfold events into UI message stream chunks (a StreamfoldError becomes `error`).

    The events of several responses in a row (an agent loop) are the steps of one UI
    message; a `ToolResult` between them (the app ran the tool) is the call's output.
    `output_ratio`: see `UIMessageStreamEncoder` (None: every structured-output change).
    """
    encoder = UIMessageStreamEncoder(message_id=message_id, output_ratio=output_ratio)
    return drive(encoder, events)


def ato_ui_message_stream(
    events: AsyncIterable[Event | ToolResult],
    *,
    message_id: str | None = None,
    output_ratio: float | None = OUTPUT_RATIO,
) -> AsyncIterator[UIMessageChunk]:
    """Async `to_ui_message_stream`: over `async for` events (an `afold`, say)."""
    encoder = UIMessageStreamEncoder(message_id=message_id, output_ratio=output_ratio)
    return adrive(encoder, events)


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


# --- UI messages: what `useChat` keeps and sends back ------------------------------------
#
# A UIMessage (the `ai` package's type) is one bubble of the chat: a user's message, or the
# assistant's whole turn, whose `step-start` parts divide the responses of an agent loop and
# whose tool parts carry each call's input and, once the app ran it, its output. streamfold
# history is one Message per response, and a tool message with the results after each.
# `dump_ui_messages` writes the bubbles exactly as `readUIMessageStream` builds them from
# this module's stream (it runs the same encoder), `load_ui_messages` reads them back the
# way the package's `convertToModelMessages` does, keeping what streamfold put in
# `providerMetadata.streamfold` (signatures, ids, markers), so the next request goes out to
# any provider with thinking and tool results intact.

UIMessage = dict[str, Any]
"""One message of `useChat`'s list (`UIMessage`), as JSON."""

MAX_UI_MESSAGES_BYTES: Final = 32 * 1024 * 1024
"""The most JSON text `load_ui_messages` reads by default (a chat's history, files inline)."""

UI_ID_KEY: Final = "ui_message_id"
"""The Message metadata key that keeps a UIMessage's id through a load and a dump."""

_DENIED_TEXT: Final = "Tool call execution denied."  # the `ai` package's own words
_M = TypeVar("_M", bound=BaseModel)


class UIMessagesError(StreamfoldError, ValueError):
    """UI messages are not what `useChat` sends: names the message and part, and why."""


def _result_text(result: ToolResult) -> str:
    if isinstance(result.content, str):
        return result.content
    return "".join(part.content or "" for part in result.content if part.type == "text")


def tool_output(result: ToolResult) -> Any:
    """A tool result's `output` in a UI tool part: the JSON value a UI gave it (kept in the
    result's `output` option), else its text, else its parts as JSON."""
    if "output" in result.options:
        return result.options["output"]
    if isinstance(result.content, str):
        return result.content
    return [part.model_dump(mode="json", exclude_defaults=True) for part in result.content]


def _merge_objects(base: Any, update: Any) -> Any:
    # The package's mergeObjects: objects merge key by key, anything else replaces.
    if not isinstance(base, dict) or not isinstance(update, dict):
        return update
    merged = dict(base)
    for key, value in update.items():
        merged[key] = _merge_objects(merged.get(key), value) if key in merged else value
    return merged


def _chunk_metadata(part: dict[str, Any], chunk: UIMessageChunk, key: str) -> None:
    meta = chunk.get("providerMetadata")
    if meta is not None:
        part[key] = meta


def ui_message_from_chunks(chunks: Iterable[UIMessageChunk], *, message_id: str = "") -> UIMessage:
    """The UIMessage the `ai` package's `readUIMessageStream` builds from a stream of the
    chunks this module writes (its last snapshot): what `useChat` holds once it ends."""
    parts: list[dict[str, Any]] = []
    message: UIMessage = {"id": message_id, "role": "assistant", "parts": parts}
    active: dict[tuple[str, str], dict[str, Any]] = {}
    tools: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        kind = chunk["type"]
        if kind in ("start", "finish", "message-metadata"):
            if kind == "start" and chunk.get("messageId") is not None:
                message["id"] = chunk["messageId"]
            if chunk.get("messageMetadata") is not None:
                old = message.get("metadata")
                new = chunk["messageMetadata"]
                message["metadata"] = new if old is None else _merge_objects(old, new)
        elif kind in ("text-start", "reasoning-start"):
            name = kind.removesuffix("-start")
            part: dict[str, Any] = {"type": name}
            if name == "reasoning":
                part["id"] = chunk["id"]
            part.update(text="", state="streaming")
            _chunk_metadata(part, chunk, "providerMetadata")
            active[(name, chunk["id"])] = part
            parts.append(part)
        elif kind in ("text-delta", "reasoning-delta", "text-end", "reasoning-end"):
            name, _, step = kind.partition("-")
            part = active[(name, chunk["id"])]
            if step == "delta":
                part["text"] += chunk["delta"]
            else:
                part["state"] = "done"
                del active[(name, chunk["id"])]
            _chunk_metadata(part, chunk, "providerMetadata")
        elif kind in ("file", "source-url", "source-document"):
            keys = {
                "file": ("mediaType", "url"),
                "source-url": ("sourceId", "url", "title"),
                "source-document": ("sourceId", "mediaType", "title", "filename"),
            }[kind]
            part = {"type": kind, **{k: chunk[k] for k in keys if chunk.get(k) is not None}}
            _chunk_metadata(part, chunk, "providerMetadata")
            parts.append(part)
        elif kind == "tool-input-start":
            part = {"type": _tool_type(chunk), "toolCallId": chunk["toolCallId"],
                    "state": "input-streaming"}  # fmt: skip
            if chunk.get("dynamic"):
                part["toolName"] = chunk["toolName"]
            _executed(part, chunk)
            _chunk_metadata(part, chunk, "callProviderMetadata")
            tools[chunk["toolCallId"]] = part
            parts.append(part)
        elif kind == "tool-input-delta":
            part = _tool_part(tools, chunk)
            part["rawInput"] = part.get("rawInput", "") + chunk["inputTextDelta"]
            part["input"] = _partial_json(part["rawInput"])
        elif kind in ("tool-input-available", "tool-input-error"):
            part = _tool_part(tools, chunk, create=True)
            if part["type"] != "dynamic-tool":
                part["type"] = _tool_type(chunk)
            if part["type"] == "dynamic-tool":
                part["toolName"] = chunk["toolName"]
            _executed(part, chunk)
            part.pop("rawInput", None)
            if kind == "tool-input-available":
                part.update(state="input-available", input=chunk["input"])
            else:
                part.pop("input", None)
                part.update(state="output-error", rawInput=chunk["input"],
                            errorText=chunk["errorText"])  # fmt: skip
            _chunk_metadata(part, chunk, "callProviderMetadata")
        elif kind == "tool-approval-request":
            part = _tool_part(tools, chunk)
            part.update(state="approval-requested", approval={"id": chunk["approvalId"]})
        elif kind == "tool-output-denied":
            _tool_part(tools, chunk)["state"] = "output-denied"
        elif kind in ("tool-output-available", "tool-output-error"):
            part = _tool_part(tools, chunk)
            if kind == "tool-output-available":
                part.update(state="output-available", output=chunk["output"])
            else:
                part.update(state="output-error", errorText=chunk["errorText"])
            _executed(part, chunk)
            _chunk_metadata(part, chunk, "resultProviderMetadata")
        elif kind == "start-step":
            parts.append({"type": "step-start"})
        elif kind == "finish-step":
            active.clear()
        elif kind.startswith("data-"):
            if chunk.get("transient"):
                continue
            same = [
                p
                for p in parts
                if p["type"] == kind and "id" in chunk and p.get("id") == chunk["id"]
            ]
            if same:
                same[0]["data"] = chunk.get("data")
            else:
                parts.append(dict(chunk))
        # error, abort: said to the app as they come; nothing of the message's
    return message


def _tool_type(chunk: UIMessageChunk) -> str:
    # A tool outside the app's set (an MCP server's) is a dynamic-tool part, named inside.
    return "dynamic-tool" if chunk.get("dynamic") else f"tool-{chunk['toolName']}"


def _executed(part: dict[str, Any], chunk: UIMessageChunk) -> None:
    # The package keeps a part's providerExecuted until a chunk says otherwise.
    if chunk.get("providerExecuted") is not None:
        part["providerExecuted"] = chunk["providerExecuted"]


def _tool_part(
    tools: dict[str, dict[str, Any]], chunk: UIMessageChunk, *, create: bool = False
) -> dict[str, Any]:
    part = tools.get(chunk["toolCallId"])
    if part is None:
        if not create:
            raise UIMessagesError(
                f"{chunk['type']}: expected a tool call {chunk['toolCallId']!r} started "
                "earlier in the message, got none"
            )
        part = tools[chunk["toolCallId"]] = {"type": "", "toolCallId": chunk["toolCallId"]}
    return part


def _partial_json(text: str) -> Any:
    # What a cut call's input reads as so far (the package's parsePartialJson).
    import jiter

    try:
        return jiter.from_json(text.encode(), partial_mode="trailing-strings")
    except ValueError:
        return None


def dump_ui_messages(messages: Iterable[Message]) -> list[UIMessage]:
    """streamfold history as the `UIMessage[]` `useChat` keeps.

    A user or system message is one UIMessage; the assistant messages of a turn and the
    tool messages between them (an agent loop) are one, a step per response, each tool
    part holding its call's input and the app's output. Every assistant message is
    written as `readUIMessageStream` would build it from `to_ui_message_stream` (the same
    encoder runs), with the part options under `providerMetadata.streamfold`, and each
    step's provider, model and response id in the metadata's `steps`.
    """
    from .relay import Snapshot  # the relay module is the larger import: only when used

    out: list[UIMessage] = []
    turn: list[Message] = []

    def end_turn() -> None:
        if not turn:
            return
        items: list[Event | ToolResult] = []
        for message in turn:
            if message.role == "assistant":
                items.extend(Snapshot(message=message).events())
                items.append(MessageCompleted(message=message))
            items.extend(message.tool_results)
        encoder = UIMessageStreamEncoder(message_id=_ui_id(turn, len(out)))
        chunks: list[UIMessageChunk] = encoder.start()
        for item in items:
            chunks += (
                encoder.tool_result(item) if isinstance(item, ToolResult) else encoder.feed(item)
            )
        chunks += encoder.close()
        ui = ui_message_from_chunks(chunks)
        _answer_approvals(ui, [r for m in turn for r in m.tool_results])
        out.append(ui)
        turn.clear()

    for mi, message in enumerate(messages):
        if not isinstance(message, Message):
            raise UsageError(
                f"dump_ui_messages: expected Message objects, got {type(message).__name__} at {mi}"
            )
        if message.role in ("assistant", "tool") or (
            message.role == "user" and message.tool_results and not message.content
        ):
            if message.role != "assistant" and not turn:
                raise UsageError(
                    f"dump_ui_messages: message {mi} holds tool results but no assistant "
                    "message before it in its turn made the calls"
                )
            turn.append(message)
            continue
        end_turn()
        out.append(_plain_ui_message(message, _ui_id([message], len(out)), mi))
    end_turn()
    return out


def _answer_approvals(ui: UIMessage, results: list[ToolResult]) -> None:
    # The user's answer to an approval request is set on the message by the browser, not
    # streamed: a stored message holds it as the browser sent it back.
    answers = {r.tool_call_id: r.options["approval"] for r in results if "approval" in r.options}
    for part in ui["parts"]:
        answer = answers.get(part.get("toolCallId", ""))
        if isinstance(answer, dict) and "approval" in part:
            part["approval"] = {**part["approval"], **answer}


def _ui_id(messages: list[Message], position: int) -> str:
    for message in messages:
        known = message.metadata.get(UI_ID_KEY)
        if isinstance(known, str):
            return known
    return f"message-{position}"


def _plain_ui_message(message: Message, ui_id: str, mi: int) -> UIMessage:
    parts: list[dict[str, Any]] = []
    for pi, part in enumerate(message.content):
        if part.type == "text":
            text: dict[str, Any] = {"type": "text", "text": part.content or ""}
            text.update(_provider_metadata(dict(part.options)))
            parts.append(text)
        elif part.type in ("image", "image_url", "file", "file_url"):
            file = _file_chunk(part)
            if file is not None:
                file.pop("type")
                parts.append({"type": "file", **file})
        else:
            raise UsageError(
                f"dump_ui_messages: message {mi} ({message.role}) part {pi} is {part.type!r}: "
                "a UIMessage of that role holds text and files only"
            )
    return {"id": ui_id, "role": message.role, "parts": parts}


# The shapes `useChat` sends, checked before anything is read from them: known fields must
# have the right type; fields the package may add later are ignored.
class _UIPart(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    type: StrictStr


class _UIMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    id: StrictStr
    role: Literal["system", "user", "assistant"]
    metadata: Any = None
    parts: list[_UIPart]


class _Text(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    text: StrictStr
    providerMetadata: dict[str, Any] | None = None


class _File(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    url: StrictStr
    mediaType: StrictStr
    filename: StrictStr | None = None
    providerMetadata: dict[str, Any] | None = None


class _Source(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    sourceId: StrictStr
    url: StrictStr | None = None
    title: StrictStr | None = None
    mediaType: StrictStr | None = None
    filename: StrictStr | None = None
    providerMetadata: dict[str, Any] | None = None


class _Approval(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    id: StrictStr
    approved: StrictBool | None = None
    reason: StrictStr | None = None


class _Tool(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    toolCallId: StrictStr
    toolName: StrictStr | None = None
    state: Literal[
        "input-streaming",
        "input-available",
        "approval-requested",
        "approval-responded",
        "output-available",
        "output-error",
        "output-denied",
    ]
    input: Any = None
    rawInput: Any = None
    output: Any = None
    errorText: StrictStr | None = None
    providerExecuted: StrictBool | None = None
    preliminary: StrictBool | None = None
    callProviderMetadata: dict[str, Any] | None = None
    resultProviderMetadata: dict[str, Any] | None = None
    approval: _Approval | None = None


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    data: Any = None


def load_ui_messages(
    messages: str | bytes | Sequence[Mapping[str, Any]], *, max_bytes: int = MAX_UI_MESSAGES_BYTES
) -> list[Message]:
    """The `UIMessage[]` a browser sent (`useChat`'s request body's `messages`, as JSON
    text or decoded) as streamfold history, ready for `streamfold.encode`.

    Read as the `ai` package's `convertToModelMessages` reads them: a system message's
    text; a user's text and files; each step of an assistant message one assistant
    Message (text, reasoning, files, the calls whose input is complete) and, when the app
    answered any of its calls (output, error, or the user's denial), a tool message with
    the results. `providerMetadata.streamfold` gives each part back its options
    (thinking signatures, ids, narration markers) and each call its metadata; the
    metadata's `steps` (what `dump_ui_messages` writes) give each step its provider,
    model and response id. A tool the provider ran (`providerExecuted`) comes back as the
    provider's own blocks kept in its metadata (`provider_block`), each in its place; one
    without them (another server's) is a call marked `provider_executed`, its result the
    provider's own to keep. Sources become citations of the text they back; other data
    parts and calls still being written are left out, as the package leaves them out.

    Raises UIMessagesError naming the message and part when the input is not UI messages.
    """
    value = _ui_json(messages, max_bytes)
    if not isinstance(value, list):
        raise UIMessagesError(f"UI messages: expected a list, got {type(value).__name__}")
    history: list[Message] = []
    for mi, raw in enumerate(value):
        try:
            ui = _UIMessage.model_validate(raw)
        except ValidationError as exc:
            raise _ui_error(f"message {mi}", exc) from None
        first = len(history)
        if ui.role == "assistant":
            history.extend(_load_assistant(ui, mi))
        else:
            history.append(_load_plain(ui, mi))
        if len(history) > first:
            first_message = history[first]
            history[first] = first_message.model_copy(
                update={"metadata": {**first_message.metadata, UI_ID_KEY: ui.id}}
            )
    return history


def _ui_json(messages: str | bytes | Sequence[Mapping[str, Any]], max_bytes: int) -> Any:
    if isinstance(messages, str | bytes):
        size = len(messages.encode() if isinstance(messages, str) else messages)
        if size > max_bytes:
            raise UIMessagesError(
                f"UI messages: expected at most {max_bytes} bytes of JSON, got {size}"
            )
        try:
            value = json.loads(messages)
        except (ValueError, RecursionError) as exc:
            raise UIMessagesError(
                f"UI messages: expected JSON text, got {preview(messages)} ({exc})"
            ) from None
    else:
        value = messages
    depth = json_depth_over(value, MAX_JSON_DEPTH)
    if depth is not None:
        raise UIMessagesError(
            f"UI messages: expected JSON at most {MAX_JSON_DEPTH} levels deep, got deeper"
        )
    return value


def _ui_error(where: str, exc: ValidationError) -> UIMessagesError:
    problems = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(value)"
        problems.append(f"{loc}: {err['msg']}, got {preview(err['input'])}")
    return UIMessagesError(f"UI messages: {where}: " + "; ".join(problems))


def _part(model: type[_M], part: _UIPart, where: str) -> _M:
    try:
        return model.model_validate(part.model_dump())
    except ValidationError as exc:
        raise _ui_error(f"{where} ({part.type})", exc) from None


def _options(meta: dict[str, Any] | None, where: str) -> dict[str, Any]:
    options = (meta or {}).get(METADATA_KEY)
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise UIMessagesError(
            f"UI messages: {where}: expected providerMetadata.{METADATA_KEY} to be an object, "
            f"got {type(options).__name__}"
        )
    return check_json_object(options, f"{where} providerMetadata.{METADATA_KEY}")


def _load_plain(ui: _UIMessage, mi: int) -> Message:
    content: list[ContentPart] = []
    for pi, part in enumerate(ui.parts):
        where = f"message {mi} part {pi}"
        if part.type == "text":
            text = _part(_Text, part, where)
            content.append(ContentPart(type="text", content=text.text,
                                       options=_options(text.providerMetadata, where)))  # fmt: skip
        elif part.type == "file":
            content.append(_load_file(_part(_File, part, where), where))
        # data parts: the package's converter leaves them to the app (convertDataPart)
    return Message(role=ui.role, content=content)


def _load_file(file: _File, where: str) -> ContentPart:
    options = {"media": file.mediaType, **_options(file.providerMetadata, where)}
    if file.filename is not None:
        options.setdefault("filename", file.filename)
    image = file.mediaType.startswith("image/")
    head, comma, data = file.url.partition(",")
    if file.url.startswith("data:") and comma and head.endswith(";base64"):
        return ContentPart(type="image" if image else "file", content=data, options=options)
    return ContentPart(type="image_url" if image else "file_url", content=file.url, options=options)


def _load_assistant(ui: _UIMessage, mi: int) -> list[Message]:
    steps: list[list[tuple[int, _UIPart]]] = [[]]
    for pi, part in enumerate(ui.parts):
        if part.type == "step-start":
            if steps[-1]:
                steps.append([])
        else:
            steps[-1].append((pi, part))
    metadata = ui.metadata if isinstance(ui.metadata, dict) else {}
    step_meta = metadata.get("steps")
    sources = {
        p.sourceId: p
        for pi, raw in enumerate(ui.parts)
        if raw.type in ("source-url", "source-document")
        for p in [_part(_Source, raw, f"message {mi} part {pi}")]
    }
    out: list[Message] = []
    for si, step in enumerate(steps):
        if not step:
            continue
        meta = step_meta[si] if isinstance(step_meta, list) and si < len(step_meta) else metadata
        out.extend(_load_step(step, meta if isinstance(meta, dict) else {}, sources, mi))
    return out


def _load_step(
    step: list[tuple[int, _UIPart]], meta: dict[str, Any], sources: dict[str, _Source], mi: int
) -> list[Message]:
    content: list[ContentPart] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    slot = 0
    # The result blocks of tools the provider ran, and the slot each goes back to.
    later: list[tuple[int, ContentPart]] = []
    for pi, part in step:
        where = f"message {mi} part {pi}"
        kind = part.type
        while later and later[0][0] <= slot:
            content.append(later.pop(0)[1])
            slot += 1
        if kind in ("text", "reasoning"):
            text = _part(_Text, part, where)
            options = _options(text.providerMetadata, where)
            if kind == "reasoning":
                content.append(ContentPart(type="thinking", content=text.text, options=options))
                slot += 1
                continue
            pieces = _cited_pieces(text.text, options, sources, where)
            content.extend(pieces)
            slot += len(pieces)
        elif kind == "file":
            content.append(_load_file(_part(_File, part, where), where))
            slot += 1
        elif kind == DATA_BLOCK:
            data = _part(_Data, part, where).data
            if not isinstance(data, dict):
                raise UIMessagesError(
                    f"UI messages: {where}: expected {DATA_BLOCK} data to be an object"
                )
            content.append(ContentPart(type="unsupported", options=check_json_object(data, where)))
            slot += 1
        elif kind.startswith("tool-") or kind == "dynamic-tool":
            tool = _part(_Tool, part, where)
            name = tool.toolName if kind == "dynamic-tool" else kind.removeprefix("tool-")
            if tool.state == "input-streaming" or name is None:
                continue  # still being written: no call to send (nor does the package)
            blocks = _provider_blocks(tool, where) if tool.providerExecuted else None
            if blocks is not None:
                # A tool the provider ran, from streamfold: its own blocks back, in place.
                call_block, result_block = blocks
                content.append(call_block)
                slot += 1
                if result_block is not None:
                    later.append((slot + result_block[0], result_block[1]))
                    later.sort(key=_slot_of)
                    while later and later[0][0] <= slot:
                        content.append(later.pop(0)[1])
                        slot += 1
                continue
            metadata = _options(tool.callProviderMetadata, where)
            if tool.providerExecuted:
                metadata["provider_executed"] = True
            if isinstance(tool.input, dict):
                call = ToolCall(call_id=tool.toolCallId, name=name, arguments=tool.input,
                                index=slot, status="complete", metadata=metadata)  # fmt: skip
            else:
                raw = tool.rawInput if isinstance(tool.rawInput, str) else json.dumps(tool.input)
                call = ToolCall.model_construct(
                    call_id=tool.toolCallId, name=name, arguments=raw, index=slot,
                    status="complete",
                    metadata={**metadata, "arguments_error": tool.errorText or "not a JSON object"},
                )  # fmt: skip
            calls.append(call)
            slot += 1
            result = _tool_result(tool, name)
            if result is not None and not tool.providerExecuted:
                results.append(result)
        # step-start is the split; sources are read as citations; other data parts are the app's
    content.extend(part for _, part in later)
    step_message = Message(
        role="assistant",
        content=content,
        tool_calls=calls,
        status=_literal(meta.get("status"), Status, "complete"),
        usage=_load_usage(meta.get("usage"), f"message {mi} metadata"),
        stop_reason=_literal(meta.get("stopReason"), StopReason, None),
        raw_stop_reason=stop if isinstance(stop := meta.get("rawStopReason"), str) else None,
        metadata={
            k: meta[v]
            for k, v in (("provider", "provider"), ("model", "model"), ("id", "responseId"))
            if isinstance(meta.get(v), str)
        },
    )
    return [step_message, Message.tool(results)] if results else [step_message]


def _provider_blocks(
    tool: _Tool, where: str
) -> tuple[ContentPart, tuple[int, ContentPart] | None] | None:
    """A provider-run tool's blocks as the encoder sent them in its metadata: the call's
    part, and its result's part with the slot it stood at (counted from the call's, as
    parts may stand between), when it came as a block of its own. None: not streamfold's."""
    call = _options(tool.callProviderMetadata, where).get(PROVIDER_BLOCK_KEY)
    if not isinstance(call, dict):
        return None
    call_part = ContentPart(type="unsupported", options=call)
    done = _options(tool.resultProviderMetadata, where)
    block = done.get(PROVIDER_BLOCK_KEY)
    if not isinstance(block, dict):
        return call_part, None
    after = done.get(_RESULT_AFTER_KEY, 0)
    if type(after) is not int or after < 0:
        raise UIMessagesError(
            f"UI messages: {where}: expected providerMetadata.{METADATA_KEY}."
            f"{_RESULT_AFTER_KEY} to be a count of parts, got {preview(after)}"
        )
    return call_part, (after, ContentPart(type="unsupported", options=block))


def _slot_of(item: tuple[int, ContentPart]) -> int:
    return item[0]


def _tool_result(tool: _Tool, name: str) -> ToolResult | None:
    approval = tool.approval.model_dump(exclude_none=True) if tool.approval else None
    options: dict[str, Any] = {} if approval is None else {"approval": approval}
    if tool.state == "output-denied":
        reason = tool.approval.reason if tool.approval and tool.approval.reason else _DENIED_TEXT
        return ToolResult(tool_call_id=tool.toolCallId, name=name, content=reason,
                          is_error=True, options=options)  # fmt: skip
    if tool.state == "output-error":
        return ToolResult(tool_call_id=tool.toolCallId, name=name,
                          content=tool.errorText or "", is_error=True, options=options)  # fmt: skip
    if tool.state != "output-available" or tool.preliminary:
        return None
    output = tool.output
    if isinstance(output, str):
        return ToolResult(tool_call_id=tool.toolCallId, name=name, content=output, options=options)
    parts = _as_parts(output)
    if parts is not None:
        return ToolResult(tool_call_id=tool.toolCallId, name=name, content=parts, options=options)
    text = json.dumps(output, ensure_ascii=False)
    return ToolResult(tool_call_id=tool.toolCallId, name=name, content=text,
                      options={**options, "output": output})  # fmt: skip


def _as_parts(output: Any) -> list[ContentPart] | None:
    # What `tool_output` writes for a result of parts, read back as parts.
    if not isinstance(output, list) or not output:
        return None
    try:
        return [ContentPart.model_validate(item) for item in output]
    except StreamfoldError:
        return None


def _literal(value: Any, kind: Any, default: Any) -> Any:
    return value if value in get_args(kind) else default


def _load_usage(value: Any, where: str) -> Usage | None:
    # The usage `message_metadata` wrote (its totalTokens is worked out again).
    if not isinstance(value, dict):
        return None
    fields = {name: value[key] for key, name in _USAGE_FIELDS.items() if key in value}
    try:
        return Usage.model_validate(fields)
    except StreamfoldError as exc:
        raise UIMessagesError(f"UI messages: {where}: usage: {exc}") from None


def _cited_pieces(
    text: str, options: dict[str, Any], sources: dict[str, _Source], where: str
) -> list[ContentPart]:
    """A text part back as the parts the encoder joined: each cited piece its own part,
    citing its sources (see the module docstring on joined text)."""
    ranges = options.pop("citations", None)
    if not isinstance(ranges, list) or not ranges:
        return [ContentPart(type="text", content=text, options=options)]
    pieces: list[ContentPart] = []
    at = 0
    for cited in ranges:
        if not isinstance(cited, dict):
            raise UIMessagesError(f"UI messages: {where}: a citation range must be an object")
        start, end = cited.get("start"), cited.get("end")
        if not (
            isinstance(start, int) and isinstance(end, int) and at <= start <= end <= len(text)
        ):
            raise UIMessagesError(
                f"UI messages: {where}: expected citation ranges in order within the text's "
                f"{len(text)} characters, got {preview(cited)}"
            )
        if start > at:
            pieces.append(ContentPart(type="text", content=text[at:start], options=options))
        ids = cited.get("sourceIds")
        ids = ids if isinstance(ids, list) else []
        citations = [_citation(sources[i]) for i in ids if isinstance(i, str) and i in sources]
        pieces.append(ContentPart(type="text", content=text[start:end], options=options,
                                  citations=citations))  # fmt: skip
        at = end
    if at < len(text):
        pieces.append(ContentPart(type="text", content=text[at:], options=options))
    return pieces


def _citation(source: _Source) -> Citation:
    meta = dict(_options(source.providerMetadata, "source")) if source.providerMetadata else {}
    if source.url is not None and source.mediaType is None:
        return Citation(source=CitationSource(type="web", url=source.url, title=source.title,
                                              metadata=meta))  # fmt: skip
    document_id = meta.pop("document_id", None)
    url = meta.pop("url", None)
    return Citation(
        source=CitationSource(
            type="document",
            title=source.title,
            document_id=document_id if isinstance(document_id, str) else None,
            url=url if isinstance(url, str) else None,
            metadata=meta,
        )
    )


__all__ = [
    "DATA_BLOCK",
    "MAX_UI_MESSAGES_BYTES",
    "METADATA_KEY",
    "PROVIDER_BLOCK_KEY",
    "UI_ID_KEY",
    "UI_MESSAGE_STREAM_HEADERS",
    "UIMessage",
    "UIMessageChunk",
    "UIMessageStreamEncoder",
    "UIMessagesError",
    "aencode_sse",
    "ato_ui_message_stream",
    "dump_ui_messages",
    "encode_chunk",
    "encode_sse",
    "finish_reason",
    "load_ui_messages",
    "message_metadata",
    "to_ui_message_stream",
    "tool_output",
    "ui_message_from_chunks",
]
