"""OpenAI Chat Completions streams, and the servers that imitate them.

One decoder for OpenAI, Azure OpenAI, DeepSeek, Groq, Mistral, OpenRouter, Perplexity,
xAI, Z.ai (GLM) and Alibaba (Qwen): they share the `chat.completion.chunk` shape and
differ in extras (where reasoning goes, whether tool-call fragments carry an index,
where usage lives, how citations arrive).

Chat never says a part ended, so a part closes (explicit=False) at the earliest point it
can no longer grow: thinking when text or a tool call begins; text when a tool call
begins or thinking begins again; tool calls at finish_reason, never when the next call
starts, because fragments of an earlier call can still arrive after it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from typing import Any, Literal

import jiter

from ...construct import trusted
from ...deltas import (
    END_MESSAGE,
    Delta,
    GrowPart,
    ReportError,
    SkipEvent,
    close_part,
    open_part,
    update_message,
)
from ...errors import StateError
from ...message import Status, StopReason, ToolCall, Usage
from ...parts import Citation, CitationSource, ContentPart, PartType
from ..base import Decoder, PartGrower, json_string_body
from ..fields import check, describe, optional
from .state import ChatCallAt, ChatCallState, ChatExecuted, OpenAIChatState


def _empty_part(kind: PartType, options: dict[str, Any] | None = None) -> ContentPart:
    """A part as a chunk starts it: empty (constants only: built without validation)."""
    return trusted(
        ContentPart, {"type": kind, "content": "", "options": options or {}, "citations": []}
    )


# finish_reason -> (normalised stop reason, status). Anything else is kept raw as "other".
_FINISH: dict[str, tuple[StopReason, Status]] = {
    "stop": ("stop", "complete"),
    "length": ("length", "length"),
    "tool_calls": ("tool_use", "complete"),
    "function_call": ("tool_use", "complete"),
    "content_filter": ("content_filter", "content_filtered"),
    # Mistral: the context window, not max_tokens, cut the answer.
    "model_length": ("length", "length"),
    # OpenRouter and Mistral report a generation that failed upstream this way.
    "error": ("error", "error"),
}

# Top-level chunk fields kept in the message metadata as they are.

_META_FIELDS = ("system_fingerprint", "service_tier", "moderation", "prompt_filter_results")

# The delta fields the full path (_choice) reads; it never looks at any other (role, Groq's
# channel, Writer's graph_data...). Of these, the ones read as strings do nothing when
# empty, and the ones read as lists do nothing when empty: servers repeat them so in every
# delta (Snowflake: `"refusal":"","tool_calls":[]`; OpenRouter: `"reasoning_details":[]`).
_DELTA_STRINGS = frozenset({"content", "reasoning_content", "reasoning", "refusal"})
_DELTA_LISTS = frozenset(
    {"content", "reasoning_details", "executed_tools", "annotations", "tool_calls"}
)
_DELTA_READ = _DELTA_STRINGS | _DELTA_LISTS | {"function_call"}


def _inert(name: str, value: Any) -> bool:
    """Whether the full path does nothing with this delta field (null, a field it never
    reads, or an empty string or list where it reads one); a function_call always acts."""
    if value is None or name not in _DELTA_READ:
        return True
    kind = type(value)
    if kind is str:
        return not value and name in _DELTA_STRINGS
    return kind is list and not value and name in _DELTA_LISTS


# The SSE hot lane. A Chat chunk has no event line, and its fields before the
# text (id, created, model, fingerprint...) repeat on every chunk of a stream but are not
# known in advance, so the lane learns each shape from a chunk it had to leave to the full
# path: the bytes before the text string (`data: {"id":...,"delta":{"content":"`), and the
# bytes after it, e.g. `"},"logprobs":null,"finish_reason":null}],"obfuscation":"Xy"}`,
# where OpenAI's random obfuscation value may differ per chunk (nothing reads it).
_HOT_START = b"data: {"
# The strings the dict fast path grows a part with, as JSON writes their key.
_HOT_FIELDS = (b'"content":"', b'"arguments":"', b'"reasoning_content":"', b'"reasoning":"')
# A JSON string body: anything but a quote, a backslash or a control character, or an
# escape (which jiter then checks). The group is the body; the match ends at its close.
_HOT_BODY = rb'([^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*)'
_HOT_STRING = re.compile(_HOT_BODY + b'"')
_HOT_STRING_MATCH = _HOT_STRING.match
# An obfuscation value: printable ASCII but a quote or a backslash (valid UTF-8, and a
# JSON string body as it is).
_HOT_OBFUSCATION_VALUE = rb"[ !#-\[\]-~]*"
_HOT_OBFUSCATION = b'"obfuscation":"'
_HOT_DELTA = b'"delta":{'
_HOT_MESSAGE = b'"message":{'
# Two different string bodies the lane parses a learned shape with, to see which part the
# string at the learned place grows (and that nothing else does).
_HOT_PROBES = ((b"hot lane probe", b"a"), (b"another probe", b"b"))
# The lane must pay its way: a chunk it stops at (which the fold then frames alone) costs
# a credit, a shape probed 3 more, a shape that replaces one for the same part (its prefix
# changed) 16 more; a chunk taken earns one back, up to a cap. With no credit left the
# lane goes off for the stream, so a server whose chunks are never plain (usage or a
# channel in every chunk) or whose prefix changes per chunk (a timestamp, an id) costs no
# more than a few chunks, and a long run of other chunks after the text turns it off too.
_HOT_CREDIT = 16
_HOT_CREDIT_CAP = 64
_HOT_PROBE_COST = 3
_HOT_RELEARN_COST = 16
# How many prefixes not yet probed a stream remembers.
_HOT_SEEN_KEPT = 8
# A learned tail: the bytes between the string and its copy (None: no copy; see
# `_hot_learn`), then the bytes after the string, or those before and after the
# obfuscation value (None: it has none).
_HotTail = tuple[bytes | None, bytes, bytes | None]
# The compiled tails: streams of a server share them, so a stream after the first learns
# without compiling.
_HOT_TAILS: dict[_HotTail, Callable[[bytes, int], re.Match[bytes] | None]] = {}
_HOT_TAILS_KEPT = 256
# A plain tail longer than this is compared as bytes after the string's closing quote,
# not matched as a regex literal, which reads it a byte at a time (servers that put
# choices first, Alibaba and llama.cpp, leave some 200 bytes after the text); a short
# one costs less in the one regex than a second call.
_HOT_LONG_TAIL = 96
# The one field whose string a chunk may repeat (Writer copies the delta as `message`):
# both places are a `content` key, which nothing compares with a value, so any text the
# two hold alike is read as the probes were.
_HOT_COPIED = b'"content":"'


def _hot_fixed(tail: _HotTail) -> bytes | None:
    """A long plain tail with the blank line ending the event, compared as bytes after
    the string (see _HOT_LONG_TAIL); None: the tail is matched with the string."""
    copy, before, after = tail
    if copy is None and after is None and len(before) > _HOT_LONG_TAIL:
        return before + b"\n\n"
    return None


class _HotShape:
    """A learned chunk shape the hot lane takes: `prefix` + a JSON string body + tail.

    `kind` says which part the body grows ("text", "reasoning", or "tool" with the
    fragment's `index`), `head` the bytes every chunk of the stream starts with. Plain
    data only, so that a saved fold state holds it (`_hot_tail` compiles the tail).
    """

    __slots__ = ("fixed", "head", "index", "kind", "prefix", "tail")

    def __init__(self, prefix: bytes, tail: _HotTail, kind: str, index: int | None) -> None:
        self.prefix = prefix
        self.tail = tail
        self.fixed = _hot_fixed(tail)
        self.kind = kind
        self.index = index
        # The bytes every chunk of the stream starts with: up to the delta, or up to the
        # message copy when it comes first (Writer's), so that the fold stops at the
        # stream's chunks whatever their delta (and its copy) holds.
        cut = prefix.rfind(b"{") + 1
        for mark in (_HOT_DELTA, _HOT_MESSAGE):
            at = prefix.find(mark)
            if at >= 0:
                cut = min(cut, at + len(mark))
        self.head = prefix[:cut]


def _hot_tail(tail: _HotTail) -> Callable[[bytes, int], re.Match[bytes] | None]:
    """The matcher of a JSON string body, the tail (the bytes up to the same body again,
    and it, if copied; the bytes before an obfuscation value, the value, the bytes after
    it) and the blank line ending the event; its group is the body."""
    match = _HOT_TAILS.get(tail)
    if match is None:
        copy, before, after = tail
        pattern = b"" if copy is None else re.escape(copy) + rb"\1"
        pattern += re.escape(before)
        if after is not None:
            pattern += _HOT_OBFUSCATION_VALUE + re.escape(after)
        match = re.compile(_HOT_BODY + pattern + b"\n\n").match
        if len(_HOT_TAILS) >= _HOT_TAILS_KEPT:
            _HOT_TAILS.clear()
        _HOT_TAILS[tail] = match
    return match


# The usage before the first report (frozen: one for every stream).
_NO_USAGE = Usage()


def _first(value: int | None, earlier: int | None) -> int | None:
    return earlier if value is None else value


class _Call:
    """What the decoder knows of one streamed tool call, for matching later fragments."""

    __slots__ = ("closed", "custom", "id", "index", "input_chunks", "key", "name")

    def __init__(
        self,
        key: Hashable,
        call_id: str | None,
        index: int | None,
        name: str | None,
        custom: bool = False,
    ):
        self.key = key
        self.id = call_id
        self.index = index
        self.name = name
        self.closed = False
        # A custom (free-text) tool: its input is text, not JSON, kept for the final call.
        self.custom = custom
        self.input_chunks: list[str] = []

    def custom_call(self, status: Literal["complete", "incomplete"]) -> ToolCall:
        """The finished custom call: its text as {"input": text}, as Responses gives one."""
        # Each field is the decoder's own, checked when it arrived: built without validation.
        return ToolCall.model_construct(
            call_id=self.id,
            name=self.name,
            arguments={"input": "".join(self.input_chunks)},
            index=None,
            status=status,
            metadata={"type": "custom_tool_call"},
        )


class OpenAIChatDecoder(Decoder):
    """Chat Completions chunks in, neutral deltas out; `choice` selects one of n choices."""

    provider = "openai-chat"
    state_model = OpenAIChatState

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        self._counter = 0
        # Open parts in the order they opened, so an end closes them in stream order.
        self._open: dict[Hashable, None] = {}
        self._thinking: Hashable | None = None
        # (reasoning_details index, kind) of the open thinking part; a change starts a new one.
        self._thinking_slot: tuple[int | None, str] | None = None
        self._text: Hashable | None = None
        self._refusal: Hashable | None = None
        self._saw_refusal = False
        self._calls: list[_Call] = []
        self._calls_by_id: dict[str, _Call] = {}
        # The latest call at each index, and the calls finish_reason has not closed yet: a
        # stream of many calls must not cost a scan of all of them per fragment.
        self._latest_at: dict[int | None, _Call] = {}
        self._unclosed: list[_Call] = []
        self._executed: dict[int, tuple[Hashable, dict[str, Any]]] = {}
        self._metadata: dict[str, Any] = {}
        self._usage: Usage | None = None
        self._usage_raw: dict[str, Any] | None = None
        # The usage, and the (citations, search_results), the full path last folded whole
        # (usage: None while a new one is checked): the same again adds nothing, so the
        # fast path takes a chunk that repeats them (Perplexity: in every chunk).
        self._usage_folded: dict[str, Any] | None = None
        self._citations_folded: tuple[Any, Any] | None = None
        # Perplexity repeats its source list on every chunk: attach each source once.
        self._cited: set[str] = set()
        self._pending_citations: list[Citation] = []
        # Counts the changes of _metadata, and of the usage and citations last folded: the
        # hot lane's shapes hold only while what they were learned with stands (the fast
        # path compares fields with it).
        self._metadata_version = 0
        # object_text's copy of what it compares with: whether id and model are known, and
        # the fingerprint and service tier, as of this metadata version (-1: none yet).
        self._seen_version = -1
        self._named = False
        self._fingerprint: Any = None
        self._tier: Any = None
        # The hot lane: the shapes learned (the last one taken first), the metadata version
        # they hold for, its credit, the prefixes seen once, and the head (None: lane off).
        self._hot_shapes: list[_HotShape] = []
        self._hot_version = 0
        self._hot_credit = _HOT_CREDIT
        self._hot_seen: set[bytes] = set()
        # sse_hot_head: `data: {`, then the stream's own prefix once a shape is learned;
        # None once the lane went off for the stream.
        self._hot_head = _HOT_START

    def to_state(self) -> OpenAIChatState:
        """This decoder as saved-state data."""
        place = {id(call): n for n, call in enumerate(self._calls)}
        return OpenAIChatState(
            other_choices=sorted(self.other_choices),
            counter=self._counter,
            open=list(self._open),
            thinking=self._thinking,
            thinking_slot=self._thinking_slot,
            text=self._text,
            refusal=self._refusal,
            saw_refusal=self._saw_refusal,
            calls=[
                ChatCallState(
                    key=c.key,
                    id=c.id,
                    index=c.index,
                    name=c.name,
                    closed=c.closed,
                    custom=c.custom,
                    input_chunks=["".join(c.input_chunks)] if c.input_chunks else [],
                )
                for c in self._calls
            ],
            calls_by_id={call_id: place[id(c)] for call_id, c in self._calls_by_id.items()},
            latest_at=[ChatCallAt(index=i, call=place[id(c)]) for i, c in self._latest_at.items()],
            unclosed=[place[id(c)] for c in self._unclosed],
            executed=[
                ChatExecuted(index=i, key=key, block=block)
                for i, (key, block) in self._executed.items()
            ],
            metadata=self._metadata,
            usage=self._usage,
            usage_raw=self._usage_raw,
            cited=sorted(self._cited),
            pending_citations=self._pending_citations,
            metadata_version=self._metadata_version,
        )

    @classmethod
    def from_state(
        cls, state: OpenAIChatState, *, choice: int = 0, strict: bool = False
    ) -> OpenAIChatDecoder:
        """The decoder `state` describes."""
        decoder = cls(choice=choice, strict=strict)
        decoder.other_choices = set(state.other_choices)
        calls = [_Call(c.key, c.id, c.index, c.name, c.custom) for c in state.calls]
        for call, saved in zip(calls, state.calls, strict=True):
            call.closed = saved.closed
            call.input_chunks = list(saved.input_chunks)

        def call_at(place: int, field: str) -> _Call:
            if place >= len(calls):
                raise StateError(field, f"expected the place of a call (< {len(calls)})")
            return calls[place]

        decoder._counter = state.counter
        decoder._open = dict.fromkeys(state.open)
        decoder._thinking = state.thinking
        decoder._thinking_slot = state.thinking_slot
        decoder._text = state.text
        decoder._refusal = state.refusal
        decoder._saw_refusal = state.saw_refusal
        decoder._calls = calls
        decoder._calls_by_id = {
            i: call_at(n, f"calls_by_id.{i}") for i, n in state.calls_by_id.items()
        }
        decoder._latest_at = {
            at.index: call_at(at.call, f"latest_at[{n}].call")
            for n, at in enumerate(state.latest_at)
        }
        decoder._unclosed = [call_at(p, f"unclosed[{n}]") for n, p in enumerate(state.unclosed)]
        decoder._executed = {e.index: (e.key, dict(e.block)) for e in state.executed}
        decoder._metadata = dict(state.metadata)
        decoder._usage = state.usage
        decoder._usage_raw = None if state.usage_raw is None else dict(state.usage_raw)
        decoder._cited = set(state.cited)
        decoder._pending_citations = list(state.pending_citations)
        decoder._metadata_version = state.metadata_version
        return decoder

    # --- entry points ----------------------------------------------------------------

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one chat.completion.chunk (or an in-stream error) into deltas."""
        # An SSE event named error must carry an error object: the full path says so.
        fast = self.object_text(payload) if event != "error" else None
        if fast is not None:
            return [GrowPart(fast[0], fast[1])]
        choices = payload.get("choices")
        usage = payload.get("usage")
        error = payload.get("error")
        x_groq = payload.get("x_groq")
        if choices is None and usage is None and error is None and x_groq is None:
            if event == "error":
                # An error event holding the error object itself, not under "error"
                # (llama.cpp: {"code": 500, "message": ..., "type": "server_error"}).
                return [update_message(metadata={"provider_error": payload}), self._error(payload)]
            raise self.protocol_error(
                "expected a chat.completion.chunk with choices, usage or error, got an object "
                f"with keys {sorted(payload)[:12]}",
                payload,
            )
        out: list[Delta] = []
        self._metadata_from(payload, out)
        if choices is not None:
            if not isinstance(choices, list):
                raise self.protocol_error(
                    f"expected choices to be a list, got {describe(choices)}", payload
                )
            for choice in choices:
                self._choice(choice, out)
        self._citations_from(payload, out)
        self._usage_from(payload, out)
        if error is not None:
            report = self._error(error)
            if isinstance(error, dict):
                # The accumulator keeps type and message; the rest (Groq's
                # failed_generation, OpenRouter's metadata) is worth keeping too.
                out.append(update_message(metadata={"provider_error": error}))
            out.append(report)
        elif event == "error":
            raise self.protocol_error(
                "expected an error object in an SSE event named error, got none", payload
            )
        return out

    def object_text(self, payload: dict[str, Any]) -> tuple[Hashable, str] | None:
        """The common chunks, cheaply: more text for the open text part, one argument
        fragment for a known open tool call, or more reasoning for the open thinking part,
        as the part's key and the text for one GrowPart (the dict lane, see
        `Decoder.object_text`, and decode()'s own first try).

        Nearly every chunk of a stream is one of these. Anything else (None) takes the
        full path, which gives the same result for these chunks. Reads only.
        """
        # _metadata_from would add nothing: id and model known, the rest unchanged. The
        # metadata is read again only when its version moved: compiled, a dict lookup is
        # ~130 instructions, where the floor spends ~1,900 on a whole chunk.
        metadata = self._metadata
        if self._seen_version != self._metadata_version:
            self._seen_version = self._metadata_version
            self._named = "id" in metadata and "model" in metadata
            self._fingerprint = metadata.get("system_fingerprint")
            self._tier = metadata.get("service_tier")
        if not self._named:
            return None
        # Each container's type checked before it is read: compiled, a get() on a dict
        # known as such is the dict's own lookup, where one on an unknown value looks the
        # method up first.
        choices = payload.get("choices")
        if type(choices) is not list or len(choices) != 1:
            return None
        choice = choices[0]
        if type(choice) is not dict:
            return None
        delta = choice.get("delta")
        if type(delta) is not dict or choice.get("finish_reason") is not None:
            return None
        index = choice.get("index", 0)
        if type(index) is not int or index != self.choice:
            return None
        # The other top-level fields the full path reads: absent (or null), or repeating
        # what the metadata holds. Asked for by name: a key that is not there costs a
        # probe of the dict's table, where a walk of the keys reads every one. (Azure's
        # filter results and OpenAI's moderation come once a stream: the full path's.)
        if (
            payload.get("error") is not None
            or payload.get("x_groq") is not None
            or payload.get("moderation") is not None
            or payload.get("prompt_filter_results") is not None
        ):
            return None
        # Usage, citations and search results repeated as the full path last folded them
        # add nothing there: the same raw usage is skipped, and every source is cited.
        usage = payload.get("usage")
        if usage is not None and usage != self._usage_folded:
            return None
        urls = payload.get("citations")
        results = payload.get("search_results")
        if urls is not None or results is not None:
            folded = self._citations_folded
            if folded is None or urls != folded[0] or results != folded[1]:
                return None
        value = payload.get("system_fingerprint")
        if value is not None and value != self._fingerprint:
            return None
        value = payload.get("service_tier")
        if value is not None and value != self._tier:
            return None
        upstream = payload.get("provider")
        if isinstance(upstream, str) and metadata.get("upstream_provider") != upstream:
            return None
        content = delta.get("content")
        if type(content) is str and content:
            text_key = self._text
            # (Citations waiting for the text go with its next delta: the full path's.)
            if text_key is None or self._thinking is not None or self._pending_citations:
                return None
            if len(delta) == 1:  # {"content": ...}: nothing else to look at
                return text_key, content
            for name, value in delta.items():
                if value is not None and name != "content" and not _inert(name, value):
                    return None
            return text_key, content
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None and tool_calls != []:  # (an empty list: no fragment)
            return self._plain_tool_fragment(delta, tool_calls)
        return self._plain_reasoning(delta)

    def _plain_tool_fragment(
        self, delta: dict[str, Any], tool_calls: Any
    ) -> tuple[Hashable, str] | None:
        """One argument fragment, by index only, for the latest call at that index.

        The full path (_call_fragment) closes open thinking and text first (here none is
        open), and _match then picks the latest call at the index when the fragment names
        no id and no function: the result is certain. A fragment with an id or a name,
        a closed call or an unknown index takes the full path.
        """
        if (
            self._text is not None
            or self._refusal is not None
            or self._thinking is not None
            or self._thinking_slot is not None
        ):
            return None
        if type(tool_calls) is not list or len(tool_calls) != 1:
            return None
        if len(delta) > 1:  # else {"tool_calls": ...}: nothing more to look at
            for name, value in delta.items():
                if value is not None and name != "tool_calls" and not _inert(name, value):
                    return None
        fragment = tool_calls[0]
        try:  # subscripts (a miss is simply not this fragment); then only what else is there
            index = fragment["index"]
            function = fragment["function"]
            arguments = function["arguments"]
        except (KeyError, TypeError):
            return None
        if type(index) is not int or type(arguments) is not str or not arguments:
            return None
        if type(fragment) is not dict or type(function) is not dict:
            return None
        if len(fragment) > 2:
            call_id = fragment.get("id")
            if call_id is not None and call_id != "":
                return None
            # A custom tool's fragment (by its type or its body) is read as one.
            if fragment.get("custom") is not None or fragment.get("type") == "custom":
                return None
        if len(function) > 1:
            fn_name = function.get("name")
            if fn_name is not None and fn_name != "":
                return None
        call = self._latest_at.get(index)
        if call is None or call.closed or call.custom:  # custom: the full path refuses it
            return None
        return call.key, arguments

    def _plain_reasoning(self, delta: dict[str, Any]) -> tuple[Hashable, str] | None:
        """More reasoning text (reasoning_content or reasoning) for the open thinking part.

        The full path (_reasoning -> _grow_thinking with slot (None, "text")) grows the
        open thinking part when its slot is the same and no text part is open.
        """
        thinking = self._thinking
        if (
            thinking is None
            or self._thinking_slot != (None, "text")
            or self._text is not None
            or self._refusal is not None
        ):
            return None
        content = delta.get("reasoning_content")
        plain = delta.get("reasoning")
        if (content is not None and type(content) is not str) or (
            plain is not None and type(plain) is not str
        ):
            return None
        text = content or plain
        if not text:
            return None
        for name, value in delta.items():
            if (
                value is not None
                and name != "reasoning_content"
                and name != "reasoning"
                and not _inert(name, value)
            ):
                return None
        return thinking, text

    # --- the SSE hot lane ------------------------------------------------------------

    def sse_shortcut(self, buffer: bytes, pos: int, grower: PartGrower, out: list[Any]) -> int:
        """The SSE hot lane (see `Decoder.sse_shortcut`): the chunks `object_text`
        turns into one GrowPart, read straight from their bytes by learned shapes.

        A chunk is taken when its bytes are a shape's prefix, a JSON string body and the
        shape's tail: its payload is then the payload the shape was learned from with only
        that string (and the obfuscation value) changed, for which the fast path gives
        GrowPart(key, text) whenever the decoder state `_hot_key` checks allows it.
        Taking text changes no decoder state, so the state is checked once per shape and
        call; the metadata the fast path compares with is checked by its version.
        """
        if self._hot_head is None:
            return pos
        if self._hot_version != self._metadata_version:
            self._hot_shapes.clear()
            self._hot_version = self._metadata_version
            self._hot_head = _HOT_START
        shapes = self._hot_shapes
        size = len(buffer)
        before = len(out)
        shape = shapes[-1] if shapes else None
        key: Hashable | None = None
        if shape is not None:
            prefix, tail, skip = shape.prefix, _hot_tail(shape.tail), len(shape.prefix)
            fixed = shape.fixed
            key = self._hot_key(shape)
        while True:
            # A shape whose part cannot grow now looks for another: a text shape's prefix
            # (`..."content":"`) also starts an argument chunk with an empty content
            # (`..."content":"","tool_calls":[...`) once the text part closed.
            if shape is None or key is None or not buffer.startswith(prefix, pos):
                shape = None
                for known in shapes:
                    if buffer.startswith(known.prefix, pos) and self._hot_key(known) is not None:
                        shape = known
                        break
                else:
                    shape = self._hot_learn(buffer, pos)
                if shape is None:
                    break
                prefix, tail, skip = shape.prefix, _hot_tail(shape.tail), len(shape.prefix)
                fixed = shape.fixed
                key = self._hot_key(shape)
                if key is None:
                    break
            if fixed is None:
                match = tail(buffer, pos + skip)
                if match is None:
                    break
                raw = match[1]
                end = match.end()
            else:  # the string to its closing quote, then the tail as bytes
                match = _HOT_STRING_MATCH(buffer, pos + skip)
                if match is None:
                    break
                end = match.end() - 1
                if not buffer.startswith(fixed, end):
                    break
                raw = match[1]
                end += len(fixed)
            if not raw:
                break  # an empty string grows nothing: the fast path looks further
            text = json_string_body(raw)
            if text is None or not grower.grow_text(key, text, out):
                break
            pos = end
            if pos == size:
                break  # (a live stream's chunk: its one event)
        if shape is not None and shapes[-1] is not shape and shape in shapes:
            shapes.remove(shape)
            shapes.append(shape)  # the next call tries it first
        credit = self._hot_credit + len(out) - before
        if pos < size:
            credit -= 1
        if credit <= 0:
            self._hot_head = None  # the lane cost more than it saved: off for the stream
            shapes.clear()
        self._hot_credit = min(credit, _HOT_CREDIT_CAP)
        return pos

    def _hot_key(self, shape: _HotShape) -> Hashable | None:
        """The part a chunk of this shape grows now, as the fast path decides; None: none."""
        if shape.kind == "text":
            return self._text if self._thinking is None and not self._pending_citations else None
        if self._text is not None or self._refusal is not None:
            return None
        if shape.kind == "reasoning":
            return self._thinking if self._thinking_slot == (None, "text") else None
        if self._thinking is not None or self._thinking_slot is not None:
            return None
        call = self._latest_at.get(shape.index)
        return None if call is None or call.closed or call.custom else call.key

    def _hot_learn(self, buffer: bytes, pos: int) -> _HotShape | None:
        """The shape of the chunk at `pos`, learned, if the fast path takes it as one
        GrowPart now; None (and nothing learned) otherwise.

        The chunk must be one `data: {...}` line with a non-empty string at a field the
        fast path grows a part with. Its bytes before the string are the prefix, those
        after it the tail (an obfuscation value in it matches any plain value). Two probes
        parse prefix + other string + tail: the fast path must give each probe's string
        for the same part, so the string at this place, and nothing else in the chunk,
        is the text (a later duplicate key would give the same text for both); it must
        read each probe's obfuscation value as the top-level obfuscation, which it ignores.
        Then any chunk of prefix + string body + tail parses to the same payload but for
        these two strings, and the fast path gives the same GrowPart for it with the
        string's text, as long as the state `_hot_key` and `sse_shortcut` check holds.
        A text repeated byte for byte at the next content key (a copy of the delta) is
        part of the shape: the probes hold their string at both places, and a chunk is
        taken only when it holds the same body at both.
        """
        if self._text is None and self._thinking is None and not self._latest_at:
            return None  # no part the fast path could grow is open: none to learn
        line_end = buffer.find(b"\n", pos)
        if line_end < 0:
            return None  # the chunk is not whole yet: nothing to learn from
        # The first field (in the chunk) of those the fast path grows with, with a
        # non-empty string.
        fields: list[tuple[int, bytes]] = []
        if buffer.startswith(_HOT_START, pos):
            for field in _HOT_FIELDS:
                at = buffer.find(field, pos, line_end)
                if at >= 0:
                    fields.append((at + len(field), field))
        text: tuple[int, bytes, int] | None = None  # (prefix end, field, closing quote)
        for prefix_end, field in sorted(fields):
            body = _HOT_STRING.match(buffer, prefix_end, line_end)
            if body is None:
                break
            if body.end() - 1 > prefix_end:
                text = (prefix_end, field, body.end() - 1)
                break
        if (
            text is None
            or not buffer.startswith(b"\n", line_end + 1)
            or not self._hot_ready(text[1])
        ):
            return None
        # Probe only a prefix seen before: a part of one chunk (a short tool call) is not
        # worth it, nor is a server whose prefix changes per chunk.
        # The same text again at the next content key (a copy of the delta): a second
        # place the shape holds the body, byte for byte.
        close = text[2]
        copy: bytes | None = None
        if text[1] == _HOT_COPIED:
            again = buffer.find(_HOT_COPIED, close, line_end) + len(_HOT_COPIED)
            string = buffer[text[0] : close + 1]  # with its closing quote
            if again >= len(_HOT_COPIED) and buffer.startswith(string, again):
                copy = buffer[close:again]
                close = again + len(string) - 1
        prefix = buffer[pos : text[0]]
        seen = self._hot_seen
        if prefix not in seen:
            if len(seen) >= _HOT_SEEN_KEPT:
                seen.clear()
            seen.add(prefix)
            return None
        self._hot_credit -= _HOT_PROBE_COST
        shape = self._hot_probe(prefix, copy, buffer[close:line_end])
        if shape is None:
            seen.discard(prefix)  # not plain: probe it again only once seen twice more
            return None
        shapes = self._hot_shapes
        # A shape for the same part replaces the old one, which no longer matches.
        same = (shape.kind, shape.index)
        kept = [known for known in shapes if (known.kind, known.index) != same]
        if len(kept) < len(shapes):
            self._hot_credit -= _HOT_RELEARN_COST
        shapes[:] = kept
        shapes.append(shape)
        # The fold stops at the chunks that start as they all do (those of this stream).
        heads = {known.head for known in shapes}
        self._hot_head = heads.pop() if len(heads) == 1 else _HOT_START
        return shape

    def _hot_ready(self, field: bytes) -> bool:
        """Whether the fast path could grow a part with this field now (before probing)."""
        if field == b'"content":"':
            return self._text is not None and self._thinking is None and not self._pending_citations
        if field == b'"arguments":"':
            return (
                self._text is None
                and self._refusal is None
                and self._thinking is None
                and bool(self._latest_at)
            )
        return self._thinking is not None and self._text is None and self._refusal is None

    def _hot_probe(self, prefix: bytes, copy: bytes | None, tail: bytes) -> _HotShape | None:
        """The shape prefix + string (+ copy + the string again) + tail (see `_hot_learn`),
        if the probes confirm it."""
        start = tail.find(_HOT_OBFUSCATION) + len(_HOT_OBFUSCATION)
        end = tail.find(b'"', start)
        wild = start >= len(_HOT_OBFUSCATION) and end >= 0
        found: Hashable | None = None
        payload: Any = None
        for text, obfuscation in _HOT_PROBES:
            data = (
                prefix[len(b"data: ") :]
                + text
                + (b"" if copy is None else copy + text)
                + (tail[:start] + obfuscation + tail[end:] if wild else tail)
            )
            try:
                payload = jiter.from_json(data)
            except ValueError:
                return None
            if type(payload) is not dict:
                return None
            if wild and payload.get("obfuscation") != obfuscation.decode():
                return None
            grown = self.object_text(payload)
            if (
                grown is None
                or grown[1] != text.decode()
                or (found is not None and grown[0] != found)
            ):
                return None
            found = grown[0]
        learned: _HotTail = (copy, tail[:start], tail[end:]) if wild else (copy, tail, None)
        if found == self._text:
            return _HotShape(prefix, learned, "text", None)
        if found == self._thinking:
            return _HotShape(prefix, learned, "reasoning", None)
        # Neither text nor thinking: the fast path took the tool-call fragment branch.
        index = payload["choices"][0]["delta"]["tool_calls"][0]["index"]
        call = self._latest_at.get(index)
        if call is None or call.key != found:
            return None
        return _HotShape(prefix, learned, "tool", index)

    def done(self) -> list[Delta]:
        """`data: [DONE]`: the message is over; everything still open closes."""
        return [END_MESSAGE]

    # --- message level ---------------------------------------------------------------

    def _metadata_from(self, payload: dict[str, Any], out: list[Delta]) -> None:
        update: dict[str, Any] = {}
        # Azure's first chunk (prompt filter results) has an empty id and model: take the
        # first non-empty value, which names the whole response.
        for name in ("id", "model"):
            value = payload.get(name)
            if isinstance(value, str) and value and name not in self._metadata:
                update[name] = value
        for name in _META_FIELDS:
            value = payload.get(name)
            if value is not None and self._metadata.get(name) != value:
                update[name] = value
        # OpenRouter names the upstream provider in `provider`; that key is ours.
        upstream = payload.get("provider")
        if isinstance(upstream, str) and self._metadata.get("upstream_provider") != upstream:
            update["upstream_provider"] = upstream
        x_groq = payload.get("x_groq")
        if x_groq is not None:
            if not isinstance(x_groq, dict):
                raise self.protocol_error(
                    f"expected x_groq to be an object, got {describe(x_groq)}", payload
                )
            kept = {k: v for k, v in x_groq.items() if k != "usage"}
            merged = {**self._metadata.get("x_groq", {}), **kept}
            if kept and merged != self._metadata.get("x_groq"):
                update["x_groq"] = merged
        if update:
            self._metadata.update(update)
            self._metadata_version += 1
            out.append(update_message(metadata=update))

    def _usage_from(self, payload: dict[str, Any], out: list[Delta]) -> None:
        raw = payload.get("usage")
        if raw is None:
            # Groq puts usage in x_groq.usage (and, lately, also at the top level).
            x_groq = payload.get("x_groq")
            raw = x_groq.get("usage") if isinstance(x_groq, dict) else None
        if raw is None:
            return
        if not isinstance(raw, dict):
            raise self.protocol_error(f"expected usage to be an object, got {describe(raw)}", raw)
        if raw == self._usage_raw:
            return  # the same running total again (Perplexity, OpenRouter repeat it)
        self._usage_raw = raw
        self._usage_folded = None
        prompt = optional(self, raw, "prompt_tokens", int)
        completion = optional(self, raw, "completion_tokens", int)
        total = optional(self, raw, "total_tokens", int)
        prompt_details = optional(self, raw, "prompt_tokens_details", dict)
        completion_details = optional(self, raw, "completion_tokens_details", dict)
        cache_read = optional(self, prompt_details, "cached_tokens", int)
        if cache_read is None:
            cache_read = optional(self, raw, "prompt_cache_hit_tokens", int)  # DeepSeek
        cache_write = optional(self, prompt_details, "cache_write_tokens", int)  # OpenRouter
        reasoning = optional(self, completion_details, "reasoning_tokens", int)
        output = completion
        if (
            completion is not None
            and prompt is not None
            and reasoning
            and total == prompt + completion + reasoning
        ):
            # xAI counts reasoning outside completion_tokens (its total says so); make
            # output_tokens mean every generated token, as OpenAI's does.
            output = completion + reasoning
        before = self._usage or _NO_USAGE
        # Every Chat server that repeats usage repeats a running total: replace, but keep
        # a field an earlier report had and this one leaves out.
        usage = trusted(
            Usage,
            {
                "input_tokens": _first(prompt, before.input_tokens),
                "output_tokens": _first(output, before.output_tokens),
                "cache_read_tokens": _first(cache_read, before.cache_read_tokens),
                "cache_write_tokens": _first(cache_write, before.cache_write_tokens),
                "reasoning_tokens": _first(reasoning, before.reasoning_tokens),
                "raw": raw,
                "cumulative": True,
            },
        )
        self._usage = usage
        self._usage_folded = raw
        self._metadata_version += 1  # the hot lane's shapes compared with the old usage
        out.append(update_message(usage=usage))

    def _error(self, error: Any) -> ReportError:
        if isinstance(error, str):
            return ReportError(None, error, error)
        if not isinstance(error, dict):
            raise self.protocol_error(
                f"expected error to be an object or a string, got {describe(error)}", error
            )
        code = error.get("code")
        kind = error.get("type")
        error_type = (
            code
            if isinstance(code, str) and code
            else kind
            if isinstance(kind, str) and kind
            else None
            if code is None
            else str(code)
        )
        message = error.get("message")
        return ReportError(error_type, message if isinstance(message, str) else str(error), error)

    def _finish(self, reason: Any, choice: dict[str, Any], out: list[Delta]) -> None:
        if not isinstance(reason, str):
            raise self.protocol_error(
                f"expected finish_reason to be a string, got {describe(reason)}", choice
            )
        stop_reason, status = _FINISH.get(reason, ("other", "complete"))
        if self._saw_refusal and reason == "stop":
            stop_reason = "refusal"
        self._close_all(out)
        metadata: dict[str, Any] = {}
        native = choice.get("native_finish_reason")  # OpenRouter: the upstream's own value
        if native is not None and self._metadata.get("native_finish_reason") != native:
            metadata["native_finish_reason"] = native
        filters = choice.get("content_filter_results")  # Azure: why it was filtered
        if reason == "content_filter" and filters:
            metadata["content_filter_results"] = filters
        self._metadata.update(metadata)
        self._metadata_version += 1
        out.append(
            update_message(
                status=status,
                stop_reason=stop_reason,
                raw_stop_reason=reason,
                metadata=metadata or None,
            )
        )

    # --- one choice --------------------------------------------------------------------

    def _choice(self, choice: Any, out: list[Delta]) -> None:
        if not isinstance(choice, dict):
            raise self.protocol_error(
                f"expected each choice to be an object, got {describe(choice)}", choice
            )
        index = choice.get("index", 0)
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.protocol_error(
                f"expected choice index to be an integer, got {describe(index)}", choice
            )
        if index != self.choice:
            self.note_other_choice(index)
            return
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            raise self.protocol_error(
                f"expected delta to be an object, got {describe(delta)}", choice
            )
        self._reasoning(delta, out)
        self._executed_tools(delta, out)
        self._content(delta, out)
        self._annotations(delta, out)
        refusal = optional(self, delta, "refusal", str)
        if refusal:
            self._grow_refusal(refusal, out)
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None:
            if not isinstance(tool_calls, list):
                raise self.protocol_error(
                    f"expected tool_calls to be a list, got {describe(tool_calls)}", delta
                )
            for fragment in tool_calls:
                self._tool_fragment(fragment, out)
        function_call = delta.get("function_call")
        if function_call is not None:
            self._legacy_function_call(function_call, out)
        reason = choice.get("finish_reason")
        if reason is not None:
            self._finish(reason, choice, out)

    # --- thinking ----------------------------------------------------------------------

    def _reasoning(self, delta: dict[str, Any], out: list[Delta]) -> None:
        details = delta.get("reasoning_details")
        if details is not None and not isinstance(details, list):
            raise self.protocol_error(
                f"expected reasoning_details to be a list, got {describe(details)}", delta
            )
        # OpenRouter sends the same reasoning twice, as `reasoning` and as
        # `reasoning_details`; the details carry signatures, so they win when they carry
        # the text. Details with only a signature or encrypted data leave `reasoning` be.
        if details:
            said = False
            for detail in details:
                said = self._reasoning_detail(detail, out) or said
            if said:
                return
        # DeepSeek, xAI and Z.ai say reasoning_content; Groq, OpenRouter and vLLM say
        # reasoning. A server that sends both sends the same text: take one.
        content = optional(self, delta, "reasoning_content", str)
        plain = optional(self, delta, "reasoning", str)
        text = content or plain
        if text:
            slot: tuple[int | None, str] = (None, "text")
            if details and self._thinking_slot is not None:
                slot = self._thinking_slot  # the part a signature-only detail just grew
            self._grow_thinking(text, None, slot, out)

    def _reasoning_detail(self, detail: Any, out: list[Delta]) -> bool:
        """Decode one reasoning_details entry; True if it carried reasoning text."""
        if not isinstance(detail, dict):
            raise self.protocol_error(
                f"expected each reasoning_details entry to be an object, got {describe(detail)}",
                detail,
            )
        kind = detail.get("type")
        index = detail.get("index")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise self.protocol_error(
                f"expected reasoning_details index to be an integer, got {describe(index)}",
                detail,
            )
        options: dict[str, Any] = {}
        for name in ("format", "id"):
            value = detail.get(name)
            if isinstance(value, str) and value:
                options[name] = value
        if kind == "reasoning.text":
            text = optional(self, detail, "text", str)
            signature = optional(self, detail, "signature", str)
            if signature:  # an empty signature is not replayable: never store one
                options["signature"] = signature
            if text or signature:
                self._grow_thinking(text or None, options, (index, "text"), out)
            return bool(text)
        if kind == "reasoning.summary":
            summary = optional(self, detail, "summary", str)
            if summary:
                options["summary"] = True
                self._grow_thinking(summary, options, (index, "summary"), out)
            return bool(summary)
        if kind == "reasoning.encrypted":
            # Redacted reasoning arrives whole and must go back whole: an opaque part.
            optional(self, detail, "data", str)
            self._close_thinking(out)
            self._close_text(out)
            key = self._new_key("encrypted")
            block_options: dict[str, Any] = {"type": "reasoning.encrypted", "block": detail}
            out.append(open_part(key, ContentPart(type="unsupported", options=block_options)))
            out.append(close_part(key, explicit=False))
            return False
        out.append(SkipEvent(f"reasoning_details.{kind}"))
        return False

    def _grow_thinking(
        self,
        text: str | None,
        options: dict[str, Any] | None,
        slot: tuple[int | None, str],
        out: list[Delta],
    ) -> None:
        self._close_text(out)
        if self._thinking is not None and self._thinking_slot != slot:
            self._close_thinking(out)
        if self._thinking is None:
            self._thinking = self._open_part(_empty_part("thinking"), out)
            self._thinking_slot = slot
        out.append(GrowPart(self._thinking, content=text, options=options or None))

    # --- text --------------------------------------------------------------------------

    def _content(self, delta: dict[str, Any], out: list[Delta]) -> None:
        content = delta.get("content")
        if content is None or isinstance(content, str):
            if content:
                self._grow_text(content, out)
            return
        if not isinstance(content, list):
            raise self.protocol_error(
                f"expected content to be a string or a list of chunks, got {describe(content)}",
                delta,
            )
        # Mistral: a list of typed chunks; magistral nests its thinking text one level down.
        for chunk in content:
            if not isinstance(chunk, dict):
                raise self.protocol_error(
                    f"expected each content chunk to be an object, got {describe(chunk)}",
                    chunk,
                )
            kind = chunk.get("type")
            if kind == "text":
                text = optional(self, chunk, "text", str)
                if text:
                    self._grow_text(text, out)
            elif kind == "thinking":
                text = self._thinking_text(chunk)
                if text:
                    self._grow_thinking(text, None, (None, "text"), out)
            else:
                out.append(SkipEvent(f"content.{kind}"))

    def _thinking_text(self, chunk: dict[str, Any]) -> str:
        inner = chunk.get("thinking")
        if inner is None or isinstance(inner, str):
            return inner or ""
        if not isinstance(inner, list):
            raise self.protocol_error(
                f"expected thinking to be a string or a list of chunks, got {describe(inner)}",
                chunk,
            )
        pieces: list[str] = []
        for item in inner:
            if not isinstance(item, dict):
                raise self.protocol_error(
                    f"expected each thinking chunk to be an object, got {describe(item)}", item
                )
            if item.get("type") == "text":
                pieces.append(optional(self, item, "text", str) or "")
        return "".join(pieces)

    def _grow_text(
        self, text: str | None, out: list[Delta], citations: tuple[Citation, ...] = ()
    ) -> None:
        self._close_thinking(out)
        if self._text is None:
            self._text = self._open_part(_empty_part("text"), out)
        if self._pending_citations:
            citations = (*self._pending_citations, *citations)
            self._pending_citations = []
        out.append(GrowPart(self._text, content=text, citations=citations))

    def _grow_refusal(self, text: str, out: list[Delta]) -> None:
        self._close_thinking(out)
        self._saw_refusal = True
        if self._refusal is None:
            part = _empty_part("text", {"refusal": True})
            self._refusal = self._open_part(part, out)
        out.append(GrowPart(self._refusal, content=text))

    def _annotations(self, delta: dict[str, Any], out: list[Delta]) -> None:
        annotations = delta.get("annotations")
        if annotations is None:
            return
        if not isinstance(annotations, list):
            raise self.protocol_error(
                f"expected annotations to be a list, got {describe(annotations)}", delta
            )
        found: list[Citation] = []
        for note in annotations:
            if not isinstance(note, dict):
                raise self.protocol_error(
                    f"expected each annotation to be an object, got {describe(note)}", note
                )
            if note.get("type") != "url_citation":
                out.append(SkipEvent(f"annotation.{note.get('type')}"))
                continue
            body = note.get("url_citation")
            if not isinstance(body, dict):
                raise self.protocol_error(
                    f"expected url_citation to be an object, got {describe(body)}", note
                )
            extra = {
                k: v
                for k, v in body.items()
                if k not in ("url", "title", "start_index", "end_index")
            }
            found.append(
                Citation(
                    source=CitationSource(
                        type="web",
                        url=optional(self, body, "url", str),
                        title=optional(self, body, "title", str) or None,
                    ),
                    start_index=optional(self, body, "start_index", int),
                    end_index=optional(self, body, "end_index", int),
                    metadata=extra,
                )
            )
        if found:
            # Annotations can come before the first word of text (OpenRouter web search):
            # they belong to the answer, so the answer part starts here.
            self._grow_text(None, out, tuple(found))

    def _citations_from(self, payload: dict[str, Any], out: list[Delta]) -> None:
        # Perplexity: `citations` (URLs) and `search_results` (title, url, date) at the
        # top level of every chunk; the text cites them as [1], [2], ...
        urls = payload.get("citations")
        results = payload.get("search_results")
        if urls is None and results is None:
            return
        if urls is not None and not isinstance(urls, list):
            raise self.protocol_error(
                f"expected citations to be a list, got {describe(urls)}", payload
            )
        if results is not None and not isinstance(results, list):
            raise self.protocol_error(
                f"expected search_results to be a list, got {describe(results)}", payload
            )
        by_url: dict[str, dict[str, Any]] = {}
        order: list[str] = []
        for result in results or []:
            if not isinstance(result, dict):
                raise self.protocol_error(
                    f"expected each search result to be an object, got {describe(result)}",
                    result,
                )
            url = optional(self, result, "url", str)
            if url:
                by_url.setdefault(url, result)
                order.append(url)
        for url in urls or []:
            if not isinstance(url, str):
                raise self.protocol_error(
                    f"expected each citation to be a URL string, got {describe(url)}", urls
                )
        listed = list(urls) if urls else order
        new: list[Citation] = []
        for number, url in enumerate(listed, start=1):
            if url in self._cited:
                continue
            self._cited.add(url)
            result = by_url.get(url, {})
            title = result.get("title")
            source_meta = {k: v for k, v in result.items() if k not in ("url", "title")}
            new.append(
                Citation(
                    source=CitationSource(
                        type="web",
                        url=url,
                        title=title if isinstance(title, str) else None,
                        metadata=source_meta,
                    ),
                    metadata={"number": number},
                )
            )
        # Every source listed is cited now: the same lists again add nothing.
        folded = (urls, results)
        if folded != self._citations_folded:
            self._citations_folded = folded
            self._metadata_version += 1  # the hot lane's shapes compared with the old ones
        if not new:
            return
        if self._text is not None:
            out.append(GrowPart(self._text, citations=tuple(new)))
        else:
            self._pending_citations.extend(new)

    # --- server-side tools (Groq compound) ---------------------------------------------

    def _executed_tools(self, delta: dict[str, Any], out: list[Delta]) -> None:
        tools = delta.get("executed_tools")
        if tools is None:
            return
        if not isinstance(tools, list):
            raise self.protocol_error(
                f"expected executed_tools to be a list, got {describe(tools)}", delta
            )
        for tool in tools:
            if not isinstance(tool, dict):
                raise self.protocol_error(
                    f"expected each executed tool to be an object, got {describe(tool)}", tool
                )
            index = tool.get("index", len(self._executed))
            if not isinstance(index, int) or isinstance(index, bool):
                raise self.protocol_error(
                    f"expected executed tool index to be an integer, got {describe(index)}",
                    tool,
                )
            self._close_thinking(out)
            self._close_text(out)
            known = self._executed.get(index)
            if known is None or known[0] not in self._open:
                key = self._new_key("executed")
                block = dict(tool)
                self._executed[index] = (key, block)
                part = ContentPart(type="unsupported", options={"type": "executed_tool"})
                self._open[key] = None
                out.append(open_part(key, part, True))  # a tool Groq ran: text before narrates
            else:
                key, block = known
                block.update(tool)
            # Groq sends the item twice: when the call starts and again with its output.
            if "output" in tool:
                final = ContentPart(
                    type="unsupported", options={"type": "executed_tool", "block": dict(block)}
                )
                del self._open[key]
                out.append(close_part(key, explicit=True, final=final))
            else:
                out.append(GrowPart(key, options={"block": dict(block)}))

    # --- tool calls --------------------------------------------------------------------

    def _tool_fragment(self, fragment: Any, out: list[Delta]) -> None:
        if not isinstance(fragment, dict):
            raise self.protocol_error(
                f"expected each tool_calls entry to be an object, got {describe(fragment)}",
                fragment,
            )
        index = fragment.get("index")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise self.protocol_error(
                f"expected tool call index to be an integer, got {describe(index)}", fragment
            )
        call_id = optional(self, fragment, "id", str) or None
        custom = fragment.get("custom")
        if custom is not None or fragment.get("type") == "custom":
            # A custom (free-text) tool: {"type": "custom", "custom": {"name", "input"}}.
            custom = check(
                self, {} if custom is None else custom, dict, "tool call custom", fragment
            )
            name = optional(self, custom, "name", str, fragment, "tool call custom.") or None
            text = optional(self, custom, "input", str, fragment, "tool call custom.")
            self._call_fragment(call_id, index, name, text, fragment, out, custom=True)
            return
        function = fragment.get("function")
        if function is None:
            function = {}
        if not isinstance(function, dict):
            raise self.protocol_error(
                f"expected tool call function to be an object, got {describe(function)}",
                fragment,
            )
        name = optional(self, function, "name", str) or None
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            raise self.protocol_error(
                f"expected tool call arguments to be a string fragment, got {describe(arguments)}",
                fragment,
            )
        self._call_fragment(call_id, index, name, arguments, fragment, out)

    def _legacy_function_call(self, function_call: Any, out: list[Delta]) -> None:
        # The deprecated `functions` API: one call, no id, no index.
        if not isinstance(function_call, dict):
            raise self.protocol_error(
                f"expected function_call to be an object, got {describe(function_call)}",
                function_call,
            )
        name = optional(self, function_call, "name", str) or None
        arguments = function_call.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            raise self.protocol_error(
                f"expected function_call arguments to be a string fragment, got "
                f"{describe(arguments)}",
                function_call,
            )
        self._call_fragment(None, None, name, arguments, function_call, out)

    def _match(
        self,
        call_id: str | None,
        index: int | None,
        name: str | None,
        raw: dict[str, Any],
        out: list[Delta],
    ) -> _Call | None:
        """The call a fragment continues: by id, then index, then the latest; None: new."""
        if call_id is not None:
            known = self._calls_by_id.get(call_id)
            if known is not None and name is not None and known.name not in (None, name):
                # The same id naming another function (servers that number ids per
                # message, or reuse one): a new call, not arguments for the first.
                out.extend(
                    self.repair(
                        "reused_tool_call_id",
                        f"expected a new id for a call to {name!r}, got {call_id!r}, the id of "
                        f"a call to {known.name!r}",
                        raw,
                    )
                )
                return None
            if known is not None:
                return known
            # A new id is a new call, even at a used index; but a call that started
            # without an id adopts the first one it is given.
            candidate = self._latest(index)
            if candidate is not None and candidate.id is None and index is not None:
                candidate.id = call_id
                self._calls_by_id[call_id] = candidate
                return candidate
            return None
        candidate = self._latest(index) if index is not None else self._latest_any()
        if candidate is None:
            return None
        if name is not None and candidate.name is not None and name != candidate.name:
            return None  # a fragment naming another function cannot continue this call
        return candidate

    def _latest(self, index: int | None) -> _Call | None:
        return self._latest_at.get(index)

    def _latest_any(self) -> _Call | None:
        return self._calls[-1] if self._calls else None

    def _call_fragment(
        self,
        call_id: str | None,
        index: int | None,
        name: str | None,
        arguments: str | None,
        raw: dict[str, Any],
        out: list[Delta],
        custom: bool = False,
    ) -> None:
        self._close_thinking(out)
        self._close_text(out)
        call = self._match(call_id, index, name, raw, out)
        if call is not None and call.custom != custom:
            # A function fragment for a custom call (or the reverse): its text is of
            # another kind, so it cannot continue the call.
            raise self.protocol_error(
                f"expected a {'custom' if call.custom else 'function'} fragment for tool call "
                f"{call.id or call.index!r}, got a {'custom' if custom else 'function'} one",
                raw,
            )
        if call is None:
            key = self._new_key("tool")
            call = _Call(key, call_id, index, name, custom)
            self._calls.append(call)
            self._latest_at[index] = call
            self._unclosed.append(call)
            if call_id is not None:
                self._calls_by_id[call_id] = call
            self._open[key] = None
            metadata = {"type": "custom_tool_call"} if custom else {}
            out.append(
                open_part(
                    key,
                    ToolCall(
                        call_id=call_id, name=name, arguments="", index=index, metadata=metadata
                    ),
                )
            )
        if call.name is None and name is not None:
            call.name = name  # for matching; the part keeps the name it opened with
        if not arguments:
            return
        if call.closed:
            # The call completed at finish_reason: its arguments cannot grow (lenient: the
            # fragment is dropped, and counted).
            out.extend(
                self.repair(
                    "arguments_after_finish",
                    "expected no more argument fragments for a tool call after finish_reason, "
                    f"got more for call {call.id!r}",
                    raw,
                )
            )
            return
        if call.custom:
            call.input_chunks.append(arguments)
        out.append(GrowPart(call.key, content=arguments))

    def close(self) -> list[Delta]:
        """The input ended: open custom calls close with the text that arrived (incomplete)."""
        out: list[Delta] = []
        for call in self._unclosed:
            if call.custom and call.key in self._open:
                del self._open[call.key]
                out.append(
                    close_part(call.key, explicit=False, final=call.custom_call("incomplete"))
                )
        return out

    # --- part bookkeeping ----------------------------------------------------------------

    def _new_key(self, kind: str) -> Hashable:
        self._counter += 1
        return (kind, self._counter)

    def _open_part(self, part: ContentPart, out: list[Delta]) -> Hashable:
        key = self._new_key(part.type if not part.options.get("refusal") else "refusal")
        self._open[key] = None
        out.append(open_part(key, part))
        return key

    def _close(self, key: Hashable | None, out: list[Delta]) -> None:
        if key is not None and key in self._open:
            del self._open[key]
            out.append(close_part(key, explicit=False))

    def _close_thinking(self, out: list[Delta]) -> None:
        self._close(self._thinking, out)
        self._thinking = None
        self._thinking_slot = None

    def _close_text(self, out: list[Delta]) -> None:
        self._close(self._text, out)
        self._close(self._refusal, out)
        self._text = None
        self._refusal = None

    def _close_all(self, out: list[Delta]) -> None:
        # Custom calls close with their text as {"input": text}: it is not JSON to parse.
        custom = {call.key: call for call in self._unclosed if call.custom}
        for key in list(self._open):
            call = custom.get(key)
            if call is None:
                self._close(key, out)
            else:
                del self._open[key]
                out.append(close_part(key, explicit=False, final=call.custom_call("complete")))
        for call in self._unclosed:
            call.closed = True
        self._unclosed.clear()
        self._thinking = self._thinking_slot = self._text = self._refusal = None
