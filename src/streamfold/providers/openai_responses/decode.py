"""OpenAI Responses API stream decoder (also Azure, xAI, DeepSeek and OpenRouter Responses).

Items are keyed by their `item_id` / item `id`, never by `output_index` (which can move
or repeat). Each item becomes one or more parts:

- message: one text part per content part (`content_index`); ends at
  `content_part.done`. Refusals are text parts with options {"refusal": true}.
- reasoning: one thinking part per summary part (`summary_index`) and per raw
  `reasoning_text` content part. The item's `encrypted_content` only becomes final at
  `output_item.done`, so the item's latest part stays open until then (earlier parts close
  as soon as the next one starts); a reasoning item without summary or text still yields
  one empty thinking part carrying its id and encrypted_content.
- function_call / custom_tool_call: a ToolCall, ends at `output_item.done`.
- computer_call, local_shell_call, shell_call (not in an OpenAI container),
  apply_patch_call: tools the caller runs, so a ToolCall too (named computer, local_shell,
  shell, apply_patch; the item's action or operation as arguments, the rest of the item
  in metadata["item_fields"]), from `output_item.done`.
- anything else (built-in tools OpenAI runs): an unsupported part whose final options
  hold the whole item from `output_item.done`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, NoReturn

import jiter

from ...construct import check_json_object, trusted
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
from ...errors import StateError, ToolArgumentsError
from ...message import Status, StopReason, ToolCall, Usage, parse_tool_arguments
from ...parts import Citation, CitationSource, ContentPart
from ..base import Decoder, PartGrower, json_string_body, starts_at
from ..fields import describe, event_field, int_or_none, optional, text_or_none
from .state import (
    OpenAIResponsesState,
    ResponsesEarly,
    ResponsesItemAt,
    ResponsesItemState,
    ResponsesPartState,
)

_PHASES = {"commentary": "narration", "final_answer": "answer"}

# Response fields worth keeping on the Message (None values are dropped).
_RESPONSE_METADATA = (
    "id",
    "model",
    "created_at",
    "completed_at",
    "service_tier",
    "previous_response_id",
    "conversation",
    "background",
)

# Progress events of built-in tool items (`response.<item type>.<status>`): they only
# move the item's status, which the final item from output_item.done carries anyway.
_PROGRESS_STATUSES = frozenset(
    {"in_progress", "searching", "interpreting", "generating", "completed", "failed", "incomplete"}
)


def _is_tool_item(item_type: str) -> bool:
    """A built-in tool item (web_search_call, mcp_call, ...; an MCP approval request): tool
    activity, so the text before it is narration. Lists and outputs are not."""
    return item_type.endswith("_call") or item_type == "mcp_approval_request"


_TOOL_CALL_TYPES = frozenset({"function_call", "custom_tool_call"})

# Items the caller must run (a computer, a local shell, a patch to its files): each
# becomes a ToolCall named after the item (computer, local_shell, shell, apply_patch), its
# input fields as the arguments, so an agent loop sees stop reason tool_use; its result
# goes back as the matching *_output item. Other built-in tools run at OpenAI: parts.
CLIENT_CALL_INPUTS: dict[str, tuple[str, ...]] = {
    "computer_call": ("action", "actions", "pending_safety_checks"),
    "local_shell_call": ("action",),
    "shell_call": ("action",),
    "apply_patch_call": ("operation",),
}


_ITEM_IDS = ("type", "id", "call_id")


def _client_runs(item_type: str, item: dict[str, Any]) -> bool:
    """Whether the caller runs the item: a shell in an OpenAI container runs there."""
    if item_type not in CLIENT_CALL_INPUTS:
        return False
    environment = item.get("environment")
    return not isinstance(environment, dict) or environment.get("type") in (None, "local")


@dataclass(slots=True)
class _Part:
    """What the decoder remembers of one open part (the accumulator holds the text)."""

    key: Hashable
    has_text: bool = False
    ended: bool = False  # its own done event arrived (reasoning parts close later)
    annotated: bool = False
    logprobs: list[Any] = field(default_factory=list)  # from the deltas
    logprobs_sent: bool = False


@dataclass(slots=True)
class _Item:
    """One output item being streamed."""

    id: str
    type: str
    kind: str  # message, reasoning, tool_call, builtin
    added: dict[str, Any]
    phase: str | None = None
    parts: dict[Hashable, _Part] = field(default_factory=dict)
    latest: Hashable | None = None  # the reasoning part opened last
    any_part: bool = False
    # Tool calls
    call_id: str | None = None
    name: str | None = None
    has_arguments: bool = False
    input_chunks: list[str] = field(default_factory=list)  # custom tool call input
    input_done: str | None = None
    closed: set[Hashable] = field(default_factory=set)  # parts already done

    def to_state(self) -> ResponsesItemState:
        """This as saved-state data."""
        return ResponsesItemState(
            id=self.id,
            type=self.type,
            kind=self.kind,
            added=self.added,
            phase=self.phase,
            parts=[
                ResponsesPartState(
                    key=p.key,
                    has_text=p.has_text,
                    ended=p.ended,
                    annotated=p.annotated,
                    logprobs=p.logprobs,
                    logprobs_sent=p.logprobs_sent,
                )
                for p in self.parts.values()
            ],
            latest=self.latest,
            any_part=self.any_part,
            call_id=self.call_id,
            name=self.name,
            has_arguments=self.has_arguments,
            input_chunks=self.input_chunks,
            input_done=self.input_done,
            closed=list(self.closed),
        )

    @classmethod
    def from_state(cls, state: ResponsesItemState) -> _Item:
        """The item this describes."""
        parts = {
            p.key: _Part(p.key, p.has_text, p.ended, p.annotated, list(p.logprobs), p.logprobs_sent)
            for p in state.parts
        }
        if len(parts) != len(state.parts):
            raise StateError("parts", "expected each part key once")
        return cls(
            id=state.id,
            type=state.type,
            kind=state.kind,
            added=dict(state.added),
            phase=state.phase,
            parts=parts,
            latest=state.latest,
            any_part=state.any_part,
            call_id=state.call_id,
            name=state.name,
            has_arguments=state.has_arguments,
            input_chunks=list(state.input_chunks),
            input_done=state.input_done,
            closed=set(state.closed),
        )


class _Dropped(Exception):
    """Lenient: the event is dropped (its repair is already noted)."""


class _LastDelta:
    """The part (or call) the last fast-path delta grew, and how that delta named it.

    Deltas come in runs for one part: the next of the same path, item and index grows the
    same part, found without the item and part lookups or a new key (the fold compares the
    key it gets by identity first). Cleared whenever the full path runs, the only place
    an item or part is added, replaced, ended or closed. (Not a dataclass: compiled, a
    dataclass's generated __init__ stays interpreted, and interleaved deltas of several
    parts build one of these per delta.)
    """

    __slots__ = ("index", "item", "item_id", "key", "path", "state")

    def __init__(
        self,
        path: Literal["text", "summary", "arguments"],
        item_id: str,
        index: int,
        key: Hashable,
        item: _Item,
        state: _Part | None,  # None for a call's arguments
    ) -> None:
        self.path = path
        self.item_id = item_id
        self.index = index
        self.key = key
        self.item = item
        self.state = state


# The item type an event implies, for events whose item never arrived (by the event's
# first name segment; a name not listed is the item type itself, as web_search_call).
_IMPLIED_ITEM = {
    "output_text": "message",
    "refusal": "message",
    "content_part": "message",
    "reasoning_text": "reasoning",
    "reasoning_summary_part": "reasoning",
    "reasoning_summary_text": "reasoning",
    "function_call_arguments": "function_call",
    "custom_tool_call_input": "custom_tool_call",
    "mcp_call_arguments": "mcp_call",
    "code_interpreter_call_code": "code_interpreter_call",
}

# Past this many sequence numbers held above a gap, the gap is taken as never coming.
_MAX_SEQUENCE_GAP = 1024

# The SSE hot lane: a delta event exactly as OpenAI's servers write it, e.g.
#   event: response.output_text.delta
#   data: {"type":"response.output_text.delta","sequence_number":12,"item_id":"msg_1",
#          "output_index":1,"content_index":0,"delta":"Hi","logprobs":[],"obfuscation":"x3"}
# (one line, then a blank line): the kind's head, the sequence number (older streams have
# none), the part's middle (the item, its output_index, the content_index or
# summary_index: tool arguments have neither), the text as a JSON string body, `"`, an
# empty logprobs list and the obfuscation padding (either may be missing), `}`.
_HOT_EVENT = b"event: response."
# The delta events a fast path takes, by SSE event name: the part they grow.
_HOT_PART: dict[bytes, Literal["content", "summary", "arguments"]] = {
    b"response.output_text.delta": "content",
    b"response.refusal.delta": "content",
    b"response.reasoning_text.delta": "content",
    b"response.reasoning_summary_text.delta": "summary",
    b"response.function_call_arguments.delta": "arguments",
}
# The start of the next event of those kinds (after its blank line).
# (Or, with no event line, a data line whose type comes first, as OpenRouter writes it.)
_HOT_NEXT = re.compile(
    b"\n\n(?=event: (?:"
    + b"|".join(map(re.escape, _HOT_PART))
    + b')\n|data: ?\\{"type":"(?:'
    + b"|".join(map(re.escape, _HOT_PART))
    + b')")'
)
# Delta events declined in a row (written another way) before the lane stops.
_HOT_MISSES = 8
_HOT_NUMBERED = b',"sequence_number":'
# A JSON integer as servers write it: no sign, no leading zero, no fraction; a longer or
# other one is left to the full path.
_HOT_INTEGER = rb"(?:0|[1-9][0-9]{0,17})"
_HOT_SEQUENCE = re.compile(_HOT_INTEGER + rb"(?=,)")
# After the event's `{"type":"<kind>"`: the sequence number if any, then the middle.
_HOT_FIELDS = re.compile(
    (
        rb'(,"sequence_number":INTEGER)?'
        rb'(,"item_id":"([^"\\\x00-\x1f]*)","output_index":INTEGER'
        rb'(?:,"(content|summary)_index":(INTEGER))?,"delta":")'
    ).replace(b"INTEGER", _HOT_INTEGER)
)
# The text (escapes and all: the first `"` no backslash escapes ends it) and the tail.
# The padding is printable ASCII but `"` and `\`: a JSON string, which decode() ignores.
_HOT_TEXT = rb'([^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*)"'
_HOT_LOGPROBS = rb',"logprobs":\[\]'
_HOT_OBFUSCATION = rb',"obfuscation":"[ !#-\[\]-~]*"'
_HOT_END = rb"\}\n\n"
_HOT_TAIL = re.compile(
    _HOT_TEXT + rb"(?:" + _HOT_LOGPROBS + rb")?(?:" + _HOT_OBFUSCATION + rb")?" + _HOT_END
)
# The common case, a little faster: text with nothing JSON escapes, OpenAI's own tail.
_HOT_PLAIN_TEXT = rb'([^"\\\x00-\x1f]*)"'
_HOT_OPENAI_PADDED = re.compile(_HOT_PLAIN_TEXT + _HOT_OBFUSCATION + _HOT_END)
# A run's tail: the same, escapes allowed (jiter reads them, and refuses bad ones).
_HOT_OPENAI_RUN_TAIL = {
    "content": re.compile(_HOT_TEXT + _HOT_LOGPROBS + _HOT_OBFUSCATION + _HOT_END),
    "summary": re.compile(_HOT_TEXT + _HOT_OBFUSCATION + _HOT_END),
    "arguments": re.compile(_HOT_TEXT + _HOT_OBFUSCATION + _HOT_END),
}
_HOT_OPENAI_TAIL = {
    "content": re.compile(_HOT_PLAIN_TEXT + _HOT_LOGPROBS + _HOT_OBFUSCATION + _HOT_END),
    "summary": _HOT_OPENAI_PADDED,
    "arguments": _HOT_OPENAI_PADDED,
}


# Other servers' layouts (keys in another order, no sequence number or no padding, extra
# fields, no event line): a layout learned from the bytes of a part's first delta event,
# then every later event held to it byte for byte but for its slots. An event is an
# optional `event: <type>` line and one data line holding a flat JSON object; each member
# is found by this, its value a scalar or an empty list or object (anything else is left
# to the full path).
_SHAPE_MEMBER = re.compile(
    rb'[ \t]*"([A-Za-z_][A-Za-z0-9_]*)"[ \t]*:[ \t]*'
    rb'("(?:[^"\\\n]|\\.)*"|-?[0-9][0-9.eE+\-]*|true|false|null|\[[ \t]*\]|\{[ \t]*\})'
    rb"[ \t]*([,}])"
)
_SHAPE_TYPE = re.compile(rb'"type"[ \t]*:[ \t]*"(response\.[a-z_]+\.delta)"')
# The slots, the values that change from event to event: the sequence number, the text
# (a JSON string body) and the padding (printable ASCII but `"` and `\`).
_SLOT_NUMBER: Final = 0
_SLOT_TEXT: Final = 1
_SLOT_PADDING: Final = 2
_SHAPE_NUMBER = re.compile(_HOT_INTEGER)
_SHAPE_TEXT = re.compile(_HOT_TEXT)
_SHAPE_PLAIN_TEXT = re.compile(_HOT_PLAIN_TEXT)
_SHAPE_PADDING = re.compile(rb"[ !#-\[\]-~]*")
_SHAPE_PADDING_VALUE = re.compile(rb'"[ !#-\[\]-~]*"')


class _Shape:
    """A part's delta events as one server writes them: constant bytes between slots.

    `consts` has one more entry than `slots`: the bytes before each slot, then the rest of
    the event (its blank line included). Learned from an event whose payload the fast
    path takes (see `_shape_learn`): every event these bytes match is that payload but
    for its sequence number, text and padding. (Not a dataclass, as _LastDelta.)
    """

    __slots__ = ("consts", "item", "key", "kind", "part", "slots", "state")

    def __init__(
        self,
        consts: list[bytes],
        slots: list[int],
        kind: str,
        part: str,
        key: Hashable,
        item: _Item,
        state: _Part | None,
    ) -> None:
        self.consts = consts
        self.slots = slots
        self.kind = kind
        self.part = part
        self.key = key
        self.item = item
        self.state = state


# The hot lane's part: event kind, part kind, head (the sequence number's key included
# if the events have one), middle, whether numbered, the part's key, item and state (None
# for tool arguments).
_Hot = tuple[str, str, bytes, bytes, bool, Hashable, _Item, _Part | None]


class OpenAIResponsesDecoder(Decoder):
    """Decode OpenAI Responses API stream events into neutral deltas."""

    provider: ClassVar[str] = "openai-responses"
    state_model = OpenAIResponsesState

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        self._items: dict[str, _Item] = {}
        self._by_index: dict[int, str] = {}  # only for events that carry no item_id
        self._tool_calls = 0
        self._refusals = 0
        # Lenient repairs: ids of finished items, events that came before their item
        # (replayed when it is added), repairs noted while decoding the current event.
        self._done: set[str] = set()
        self._early: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self._early_chars: dict[str, int] = {}  # text they hold, by item (see hold_text)
        self._noted: list[Delta] = []
        self._kind = ""
        # Sequence numbers seen: all up to _seq_floor, and those above it.
        self._seq_floor: int | None = None
        self._seq_above: set[int] = set()
        # The hot lane's part: the one the last event it took (or learned) grows.
        self._hot: _Hot | None = None
        self._hot_misses = 0  # delta events declined since the lane last took one
        self._hot_head = _HOT_EVENT  # None: the lane stopped for this stream
        self._hot_shape: _Shape | None = None  # the layout the lane took an event in last
        self._last_delta: _LastDelta | None = None  # see _LastDelta

    def to_state(self) -> OpenAIResponsesState:
        """This decoder as saved-state data (between events: no repairs noted)."""
        return OpenAIResponsesState(
            items=[item.to_state() for item in self._items.values()],
            by_index=[ResponsesItemAt(index=i, item=id_) for i, id_ in self._by_index.items()],
            tool_calls=self._tool_calls,
            refusals=self._refusals,
            done=sorted(self._done),
            early=[
                ResponsesEarly(item=item_id, kind=kind, payload=payload)
                for item_id, held in self._early.items()
                for kind, payload in held
            ],
            seq_floor=self._seq_floor,
            seq_above=sorted(self._seq_above),
        )

    @classmethod
    def from_state(
        cls, state: OpenAIResponsesState, *, choice: int = 0, strict: bool = False
    ) -> OpenAIResponsesDecoder:
        """The decoder `state` describes."""
        decoder = cls(choice=choice, strict=strict)
        for n, saved in enumerate(state.items):
            try:
                decoder._items[saved.id] = _Item.from_state(saved)
            except StateError as exc:
                raise exc.within(f"items[{n}]") from None
        if len(decoder._items) != len(state.items):
            raise StateError("items", "expected each item id once")
        decoder._by_index = {at.index: at.item for at in state.by_index}
        decoder._tool_calls = state.tool_calls
        decoder._refusals = state.refusals
        decoder._done = set(state.done)
        for held in state.early:
            decoder._early.setdefault(held.item, []).append((held.kind, dict(held.payload)))
            # The held text's size, derived (not saved): see hold_text.
            text = held.payload.get("delta")
            size = len(text) if isinstance(text, str) else 0
            decoder._early_chars[held.item] = decoder._early_chars.get(held.item, 0) + size
        above = set(state.seq_above)
        if above and (
            state.seq_floor is None
            or len(above) > _MAX_SEQUENCE_GAP
            or min(above) <= state.seq_floor + 1
        ):
            raise StateError(
                "seq_above", f"expected at most {_MAX_SEQUENCE_GAP} numbers past a gap"
            )
        decoder._seq_floor = state.seq_floor
        decoder._seq_above = above
        return decoder

    # --- entry points ------------------------------------------------------------------

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one Responses stream event into neutral deltas."""
        kind = payload.get("type", event)
        if not isinstance(kind, str):
            raise self.protocol_error(
                f"expected a string event 'type', got {describe(kind)}", payload
            )
        if event == "error" and kind not in _HANDLERS:
            # An SSE error event holding a server's own error object, whose `type` names
            # the error, not the event (llama.cpp's `error:` line: "server_error").
            kind = "error"
        sequence = payload.get("sequence_number")
        if type(sequence) is int and self._seen(sequence):
            # The same event again (a retried or duplicated send): said once already.
            return self.repair(
                "duplicate_event",
                f"expected a new sequence_number, got {sequence} again ({kind})",
                payload,
            )
        fast = _FAST.get(kind)
        if fast is not None and not self._noted:
            hit = self._fast(fast, payload)
            if hit is not None:
                self._kind = kind
                return [GrowPart(hit[0], hit[1])]
        deltas = self._dispatch(kind, payload)
        if self._noted:
            deltas[:0] = self._noted
            self._noted = []
        return deltas

    def close(self) -> list[Delta]:
        """The input ended: close open custom tool calls with what arrived."""
        self._last_delta = None
        deltas = self._flush_early()
        deltas.extend(self._flush_custom_calls())
        if self._noted:
            deltas[:0] = self._noted
            self._noted = []
        return deltas

    # --- fast paths: the common delta events for a part that is known and open ----------
    #
    # Each returns the one GrowPart the full handler would give, or None to take the full
    # path. They only read the payload and run when every check the handler makes has an
    # outcome that cannot add a repair, a protocol error or an opening delta: the item is
    # found by a string item_id (so no missing_item_id / early-event handling), the part is
    # already open and not ended, and the delta is a string. The sequence_number check has
    # run in decode() before them.

    def object_text(self, payload: dict[str, Any]) -> tuple[Hashable, str] | None:
        """The dict lane (see `Decoder.object_text`): the events the fast paths take, when
        their sequence number (if any) is the one after the last with none above: then
        decode() would record it as the new floor, and this does."""
        if self._noted:
            return None
        try:  # a subscript, cheaper than get(): no type (or one that is no key) is not this
            kind = payload["type"]
            fast = _FAST.get(kind)
        except (KeyError, TypeError):
            return None
        if fast is None:
            return None
        sequence = payload.get("sequence_number")
        # The same, never narrowed: compiled, a number narrowed to an int is unboxed, and
        # storing it boxes it anew (an allocation per delta); this one is stored as it is.
        given: Any = sequence
        if sequence is not None:
            if type(sequence) is not int:
                return None
            number: int = sequence  # (compiled: compared as a machine integer, not an object)
            floor = self._seq_floor
            if floor is None or number != floor + 1 or len(self._seq_above):
                return None
        # Handed on as it came: narrowed to a pair, it would be unpacked and packed again.
        hit = self._fast(fast, payload)
        if hit is not None:
            if given is not None:
                self._seq_floor = given  # what _seen() does with the number after the floor
            self._kind = kind
        return hit

    def _fast(
        self, path: Literal["text", "summary", "arguments"], payload: dict[str, Any]
    ) -> tuple[Hashable, str] | None:
        """The fast path named `path`: the part (or call) the delta grows, and its text."""
        if path == "text":
            return self._fast_text_delta(payload)
        if path == "summary":
            return self._fast_summary_delta(payload)
        return self._fast_arguments_delta(payload)

    def _fast_text_delta(self, payload: dict[str, Any]) -> tuple[Hashable, str] | None:
        try:  # a subscript: a missing key, or no dict, is not this
            item_id = payload["item_id"]
        except (KeyError, TypeError):
            return None
        if type(item_id) is not str:
            return None
        index = payload.get("content_index")  # (no default given: compiled, it is boxed)
        if index is None:
            index = 0  # _int(default=0) reads null (or nothing) as the default
        elif type(index) is not int:
            return None
        delta = payload.get("delta")
        if type(delta) is not str or payload.get("logprobs"):
            # Logprobs are kept beside the text: the full path takes them, so the fold
            # counts and checks the whole event (the dict lane counts only the text).
            return None
        return self._fast_part_delta("text", item_id, index, delta)

    def _fast_summary_delta(self, payload: dict[str, Any]) -> tuple[Hashable, str] | None:
        item_id = payload.get("item_id")
        index = payload.get("summary_index")
        delta = payload.get("delta")
        if type(item_id) is not str or type(index) is not int or type(delta) is not str:
            return None
        return self._fast_part_delta("summary", item_id, index, delta)

    def _fast_part_delta(
        self, path: Literal["text", "summary"], item_id: str, index: int, delta: str
    ) -> tuple[Hashable, str] | None:
        """The open part a text or summary delta grows, and its text."""
        last = self._last_delta
        if (
            last is not None
            and last.path == path
            and last.index == index
            and last.item_id == item_id
        ):
            state = last.state
        else:
            state = self._fast_find_part(path, item_id, index)
        if state is None or state.ended:
            return None
        if delta:
            state.has_text = True
        return state.key, delta

    def _fast_find_part(
        self, path: Literal["text", "summary"], item_id: str, index: int
    ) -> _Part | None:
        """The part a fast-path delta names, if the fast path may grow it; remembered."""
        item = self._items.get(item_id)
        if item is None:
            return None
        if path == "text":
            state = item.parts.get((item_id, "content", index))
        elif item.kind != "reasoning":
            return None  # a summary delta for another item kind: the full handler notes a repair
        else:
            state = item.parts.get((item_id, "summary", index))
            if state is not None and state.key in item.closed:
                return None
        if state is not None:
            self._last_delta = _LastDelta(path, item_id, index, state.key, item, state)
        return state

    def _fast_arguments_delta(self, payload: dict[str, Any]) -> tuple[Hashable, str] | None:
        try:  # subscripts: a missing key, or no dict, is not this
            item_id = payload["item_id"]
            delta = payload["delta"]
        except (KeyError, TypeError):
            return None
        if type(item_id) is not str or type(delta) is not str:
            return None
        last = self._last_delta
        item: _Item | None
        if last is not None and last.path == "arguments" and last.item_id == item_id:
            item = last.item
            key = last.key
        else:
            item = self._items.get(item_id)
            if item is None:
                return None
            if item.kind != "builtin" and item.type != "function_call":
                return None  # the full handler notes a delta_type_mismatch
            key = (item_id,)
            self._last_delta = _LastDelta("arguments", item_id, -1, key, item, None)
        if delta and item.kind != "builtin":
            item.has_arguments = True
        return key, delta

    # --- the SSE hot lane: the fast paths' events straight from their bytes --------------

    def sse_next_hot(self, buffer: bytes, pos: int) -> int:
        """The next delta event of a kind the lane takes (every Responses event starts
        with the same `event: response.`: the head alone would stop at each one)."""
        if self._hot_head is None:
            return -1
        found = _HOT_NEXT.search(buffer, pos)
        return -1 if found is None else found.start() + 2

    def sse_shortcut(self, buffer: bytes, pos: int, grower: PartGrower, out: list[Any]) -> int:
        """The SSE hot lane (see `Decoder.sse_shortcut`): the delta events the fast paths take.

        An event matches when its bytes are its kind's head, a sequence number that
        `_seen` does not call a duplicate (or none), the middle of the hot part (one the
        fast path grows), a JSON string body and the tail. Its payload is then exactly
        {"type": kind, ["sequence_number": n,] "item_id": id, "output_index": i,
        ["content_index" | "summary_index": j,] "delta": text, ["logprobs": [],]
        ["obfuscation": padding]}, for which decode() records n and its fast path gives the
        one GrowPart this gives and marks the part (or call) as having text.
        """
        if self._noted or buffer.rfind(b"\n\n", pos) < 0:
            # decode() takes no fast path while it holds repairs to say; no whole event
            # (sought from the end: a live chunk ends with its event, found at once).
            return pos
        if self._hot_shape is None:
            # OpenAI's own layout first (the faster reading), until a stream shows another.
            end = self._openai_lane(buffer, pos, grower, out)
            if end != pos:
                return end
        end = self._shape_lane(buffer, pos, grower, out)
        if end == pos:
            self._hot_missed(buffer, pos)
        return end

    def _openai_lane(self, buffer: bytes, pos: int, grower: PartGrower, out: list[Any]) -> int:
        """The hot lane for OpenAI's own layout: `{"type":...,"sequence_number":...,
        "item_id":...,"output_index":...,[index,]"delta":...` then an empty logprobs list
        and the padding (either may be missing)."""
        hot = self._hot
        # The hot part, if this event is of its kind and the fast path still grows it.
        learn = hot is None or not starts_at(buffer, pos, hot[2]) or not self._hot_open(hot)
        any_tail = _HOT_TAIL.match
        floor = self._seq_floor
        above = self._seq_above
        learned_at = -1
        taken = ""
        try:
            while True:
                if learn or hot is None:
                    if learned_at == pos:
                        return pos  # the event just learned does not match its own prefix
                    learned_at = pos
                    found = self._hot_learn(buffer, pos)
                    if found is None:
                        return pos
                    hot = found
                learn = True  # once the run below ends, the event there may be another part's
                kind, part, head, middle, numbered, key, item, state = hot
                openai_tail = _HOT_OPENAI_TAIL[part].match
                prefix = head + middle  # the whole prefix of an event without a number
                # Numbered events: the common number, the one after the last, is read with
                # the rest of the prefix; any other goes through _hot_sequence and _seen.
                predict = numbered and floor is not None and not above
                # Whether the part (or call) is already marked as having text: the fast
                # path's mark is then a no-op. A built-in item's arguments mark nothing.
                if state is not None:
                    marked = state.has_text
                else:
                    marked = item.has_arguments or item.kind == "builtin"
                while True:
                    number: int | None = None
                    if predict:
                        number = floor + 1  # type: ignore[operator]  # predict: not None
                        prefix = b"%b%d%b" % (head, number, middle)
                        hit = starts_at(buffer, pos, prefix)
                    else:
                        hit = not numbered and starts_at(buffer, pos, prefix)
                    if hit:
                        start = pos + len(prefix)
                    else:
                        if not starts_at(buffer, pos, head):
                            break
                        at = pos + len(head)
                        if numbered:
                            sequence = self._hot_sequence(buffer, at)
                            if sequence is None:
                                return pos  # not a plain number, or one seen before
                            number, at = sequence
                        if not starts_at(buffer, at, middle):
                            break
                        start = at + len(middle)
                    match = openai_tail(buffer, start)
                    if match is not None:
                        try:
                            text = match.group(1).decode()
                        except UnicodeDecodeError:
                            return pos
                    else:
                        match = any_tail(buffer, start)
                        if match is None:
                            return pos
                        decoded = json_string_body(match.group(1))
                        if decoded is None:
                            return pos
                        text = decoded
                    try:
                        grown = grower.grow_text(key, text, out)
                    except BaseException:
                        # decode() had recorded the event before the fold applied it.
                        self._hot_record(number, text, item, state)
                        taken = kind
                        raise
                    if not grown:
                        return pos  # not open in the fold: the full path takes the event
                    if number is not None:
                        if hit:
                            # The one after the floor, none above it: what _seen does.
                            floor = self._seq_floor = number
                        else:
                            self._seen(number)
                            floor = self._seq_floor
                            predict = not above
                    if not marked and text:
                        marked = True
                        self._hot_record(None, text, item, state)
                    taken = kind
                    pos = match.end()
                    if pos >= len(buffer):
                        return pos  # (a live stream's chunk: its one event)
                    if predict and starts_at(buffer, pos, head):
                        # More of the same kind (a replayed or buffered chunk): the run at
                        # once.
                        pos, marked = self._hot_run(buffer, pos, hot, grower, out, marked)
                        floor = self._seq_floor
                        if pos >= len(buffer):
                            return pos
                if pos >= len(buffer):
                    return pos
        finally:
            self._hot = hot
            if taken:
                self._kind = taken
                self._hot_misses = 0

    def _hot_run(
        self,
        buffer: bytes,
        pos: int,
        hot: _Hot,
        grower: PartGrower,
        out: list[Any],
        marked: bool,
    ) -> tuple[int, bool]:
        """The run of numbered events from `pos` in OpenAI's own layout, each numbered one
        after the last with none above (what the lane predicts), given to the accumulator
        at once: where they end and whether the part is now marked as having text.

        `pos` when there are none, or one holds bad UTF-8 or a bad escape: the
        event-by-event loop then takes them, or leaves them to the full path.
        """
        _, part, head, middle, _, key, item, state = hot
        match = _HOT_OPENAI_RUN_TAIL[part].match
        floor = self._seq_floor
        assert floor is not None  # predicted: the floor is known and nothing is above it
        # Each event's prefix, its number formatted in (one substitution, not three).
        template = head.replace(b"%", b"%%") + b"%d" + middle.replace(b"%", b"%%")
        pieces: list[bytes] = []
        append = pieces.append
        number = floor
        end = pos
        while True:
            number += 1
            prefix = template % number
            if not starts_at(buffer, end, prefix):
                break
            found = match(buffer, end + len(prefix))
            if found is None:
                break
            append(found.group(1))
            end = found.end()
        if not pieces:
            return pos, marked
        number = floor + len(pieces)  # the last one taken
        loads = jiter.from_json
        try:
            texts = [p.decode() if b"\\" not in p else loads(b'"' + p + b'"') for p in pieces]
        except ValueError:  # bad UTF-8 or a bad escape
            return pos, marked
        before = len(out)
        try:
            grown = grower.grow_texts(key, texts, out)
        except BaseException:
            # decode() records each event before the fold applies it: those taken, and
            # the one that failed.
            failed = len(out) - before
            self._seq_floor = floor + failed + 1
            if not marked and any(texts[: failed + 1]):
                self._hot_mark(item, state)
            raise
        if not grown:
            return pos, marked
        self._seq_floor = number
        if not marked and any(texts):
            self._hot_mark(item, state)
            marked = True
        return end, marked

    def _hot_learn(self, buffer: bytes, pos: int) -> _Hot | None:
        """The hot part of the delta event at `pos`: its kind, head, middle and part."""
        name_end = buffer.find(b"\n", pos, pos + 64)
        if name_end < 0 or not buffer.startswith(b"event: ", pos):
            return None
        name = buffer[pos + 7 : name_end]
        part = _HOT_PART.get(name)
        head = b"event: " + name + b'\ndata: {"type":"' + name + b'"'
        if part is None or not buffer.startswith(head, pos):
            return None
        fields = _HOT_FIELDS.match(buffer, pos + len(head))
        if fields is None or _HOT_OPENAI_RUN_TAIL[part].match(buffer, fields.end()) is None:
            # Not OpenAI's own tail (no padding, say): the layout lane reads those faster.
            return None
        numbered, middle, raw_id, index_name, raw_index = fields.groups()
        if (part == "arguments") != (index_name is None) or (
            index_name is not None and index_name.decode() != part
        ):
            return None
        try:
            item_id = raw_id.decode()
        except UnicodeDecodeError:
            return None
        item = self._items.get(item_id)
        if item is None:
            return None
        key: Hashable
        state: _Part | None = None
        if raw_index is None:
            key = (item_id,)
        else:
            key = (item_id, part, int(raw_index))
            state = item.parts.get(key)
            if state is None:
                return None
        if numbered is not None:
            head += _HOT_NUMBERED
        hot = (name.decode(), part, head, middle, numbered is not None, key, item, state)
        return hot if self._hot_open(hot) else None

    def _hot_open(self, hot: _Hot) -> bool:
        """Whether the fast path still grows the hot part (decode() may have run since)."""
        _, part, _, _, _, key, item, state = hot
        return self._grows(part, key, item, state)

    def _grows(self, part: str, key: Hashable, item: _Item, state: _Part | None) -> bool:
        """Whether the fast path grows this part (or call) of this item."""
        if self._items.get(item.id) is not item:
            return False
        if state is None:
            # Tool arguments: the item's type decides, and it never changes.
            return item.kind == "builtin" or item.type == "function_call"
        if item.parts.get(key) is not state or state.ended:
            return False
        return part == "content" or (item.kind == "reasoning" and key not in item.closed)

    # --- the hot lane for other layouts ----------------------------------------------------

    def _shape_lane(self, buffer: bytes, pos: int, grower: PartGrower, out: list[Any]) -> int:
        """The hot lane for any layout: the run of events from `pos` that match the layout
        of the part they grow (learned from the first of them), one by one; where they end.

        An event matches when its bytes are its part's layout with a plain sequence number
        `_seen` does not call a duplicate, a JSON string body and padding in the slots:
        its payload is then the learned one but for those, which decode() records and
        its fast path turns into the one GrowPart this gives.
        """
        shape = self._hot_shape
        if shape is not None and not self._grows(shape.part, shape.key, shape.item, shape.state):
            shape = None
        size = len(buffer)
        taken = ""
        marked = False  # whether the shape's part is already marked as having text
        try:
            while pos < size:
                floor = self._seq_floor
                above = self._seq_above
                # The number the event most likely has: the one after the floor.
                expect = -1 if floor is None or above else floor + 1
                found = None if shape is None else self._shape_match(shape, buffer, pos, expect)
                if shape is None or found is None:
                    shape = self._shape_learn(buffer, pos)
                    if shape is None:
                        return pos
                    found = self._shape_match(shape, buffer, pos, expect)
                    if found is None:
                        return pos
                    marked = False
                end, number, text = found
                # Predicted: the one after the floor with none above, which _seen records
                # as the new floor (and so each of a run numbered one after another).
                predicted = number >= 0 and number == expect
                if number >= 0 and floor is not None and (number <= floor or number in above):
                    return pos  # a duplicate: decode() repairs it
                texts = [text]
                last = number
                if predicted or number < 0:
                    # The run of events after it in the same layout, given at once.
                    while end < size:
                        more = self._shape_match(shape, buffer, end, last + 1 if predicted else -1)
                        if more is None or (predicted and more[1] != last + 1):
                            break
                        end, last, text = more
                        texts.append(text)
                before = len(out)
                try:
                    if len(texts) == 1:
                        grown = grower.grow_text(shape.key, texts[0], out)
                    else:
                        grown = grower.grow_texts(shape.key, texts, out)
                except BaseException:
                    # decode() records each event before the fold applies it: those taken,
                    # and the one that failed.
                    failed = len(out) - before
                    if predicted:
                        self._seq_floor = number + failed
                    elif number >= 0:
                        self._seen(number)
                    if any(texts[: failed + 1]):
                        self._hot_mark(shape.item, shape.state)
                    taken = shape.kind
                    raise
                if not grown:
                    return pos  # not open in the fold: the full path takes the event
                if predicted:
                    self._seq_floor = last
                elif number >= 0:
                    self._seen(number)
                if not marked and (text or any(texts)):
                    self._hot_mark(shape.item, shape.state)
                    marked = True
                taken = shape.kind
                pos = end
            return pos
        finally:
            if taken:
                self._hot_shape = shape
                self._kind = taken
                self._hot_misses = 0

    def _shape_match(
        self, shape: _Shape, buffer: bytes, pos: int, expect: int
    ) -> tuple[int, int, str] | None:
        """The event at `pos` in `shape`'s layout: where it ends, its sequence number (-1:
        none) and its text; None if it is not one. `expect` is the number it most likely
        has (-1: none), read as its bytes."""
        consts = shape.consts
        slots = shape.slots
        at = pos
        number = -1
        text = ""
        for i in range(len(slots)):
            const = consts[i]
            if not starts_at(buffer, at, const):
                return None
            at += len(const)
            slot = slots[i]
            if slot == _SLOT_TEXT:
                plain = _SHAPE_PLAIN_TEXT.match(buffer, at)
                if plain is not None:
                    try:
                        text = plain.group(1).decode()
                    except UnicodeDecodeError:
                        return None
                    at = plain.end() - 1
                else:
                    # Escapes (tool arguments hold them in nearly every delta): jiter reads
                    # the string, quotes and all, as the full path's parse would (and
                    # refuses a bad escape or bad UTF-8).
                    escaped = _SHAPE_TEXT.match(buffer, at)
                    if escaped is None:
                        return None
                    try:
                        decoded = jiter.from_json(buffer[at - 1 : escaped.end()])
                    except ValueError:
                        return None
                    if type(decoded) is not str:
                        return None
                    text = decoded
                    at = escaped.end() - 1
            elif slot == _SLOT_NUMBER:
                if expect >= 0:
                    guess = b"%d" % expect
                    if starts_at(buffer, at, guess):
                        number = expect
                        at += len(guess)
                        continue
                digits = _SHAPE_NUMBER.match(buffer, at)
                if digits is None:
                    return None
                number = int(digits.group())
                at = digits.end()
            else:
                close = buffer.find(b'"', at)
                if close < 0:
                    return None
                # OpenAI's padding is letters and digits: a quicker test first.
                padding = buffer[at:close]
                if not padding.isalnum() and _SHAPE_PADDING.fullmatch(padding) is None:
                    return None
                at = close
        const = consts[len(slots)]
        if not starts_at(buffer, at, const):
            return None
        return at + len(const), number, text

    def _shape_learn(self, buffer: bytes, pos: int) -> _Shape | None:
        """The layout of the delta event at `pos`, if the fast path takes its payload as it
        is and would take it with any other sequence number, text and padding."""
        end = buffer.find(b"\n\n", pos)
        if end < 0:
            return None
        block = buffer[pos:end]
        line_at = 0
        name: bytes | None = None
        if block.startswith(b"event: "):
            line_at = block.find(b"\n") + 1
            if line_at <= 0:
                return None
            name = block[7 : line_at - 1]
            if name not in _HOT_PART:
                return None
        if not block.startswith(b"data:", line_at) or block.find(b"\n", line_at) >= 0:
            return None
        json_at = line_at + 5
        if block.startswith(b" ", json_at):
            json_at += 1  # the one space SSE strips
        named = _SHAPE_TYPE.search(block, json_at)
        if (
            named is None
            or named.group(1) not in _HOT_PART
            or (name is not None and named.group(1) != name)
        ):
            return None
        # The members, each value's place: the object must be flat (see _SHAPE_MEMBER).
        at = json_at
        while block.startswith((b" ", b"\t"), at):
            at += 1
        if not block.startswith(b"{", at):
            return None
        at += 1
        keys: list[str] = []
        spans: dict[str, tuple[int, int]] = {}
        while True:
            member = _SHAPE_MEMBER.match(block, at)
            if member is None:
                return None
            key_name = member.group(1).decode()
            keys.append(key_name)
            spans[key_name] = member.span(2)
            at = member.end()
            if member.group(3) == b"}":
                break
        if block[at:].strip(b" \t"):
            return None
        try:
            payload = jiter.from_json(block[json_at:], allow_inf_nan=False)
        except ValueError:
            return None
        if type(payload) is not dict or list(payload) != keys:
            return None  # a key twice: the last one counts, and the layout cannot say so
        return self._shape_of(payload, name, block, spans)

    def _shape_of(
        self,
        payload: dict[str, Any],
        name: bytes | None,
        block: bytes,
        spans: dict[str, tuple[int, int]],
    ) -> _Shape | None:
        """The layout of the event `block`, whose payload, event name and members' places
        are given."""
        kind = payload.get("type")
        if type(kind) is not str or (name is not None and name != kind.encode()):
            return None
        path = _FAST.get(kind)
        item_id = payload.get("item_id")
        if path is None or type(item_id) is not str or type(payload.get("delta")) is not str:
            return None
        # The slots, by place: the text, and the number and padding if they are there.
        found: list[tuple[int, int, int]] = [(*spans["delta"], _SLOT_TEXT)]
        if "sequence_number" in payload:
            start, stop = spans["sequence_number"]
            if type(payload["sequence_number"]) is not int or not _SHAPE_NUMBER.fullmatch(
                block, start, stop
            ):
                return None  # decode() takes it, or not, by its type: left to it
            found.append((start, stop, _SLOT_NUMBER))
        if "obfuscation" in spans:
            start, stop = spans["obfuscation"]
            if _SHAPE_PADDING_VALUE.fullmatch(block, start, stop):
                found.append((start, stop, _SLOT_PADDING))
        item = self._items.get(item_id)
        if item is None:
            return None
        key: Hashable
        state: _Part | None = None
        part: str
        if path == "arguments":
            part = "arguments"
            key = (item_id,)
        else:
            index_name = "content_index" if path == "text" else "summary_index"
            index = payload.get(index_name)
            if path == "text" and index is None:
                index = 0  # as _fast_text_delta reads it
            if type(index) is not int:
                return None
            if path == "text" and payload.get("logprobs"):
                return None  # kept beside the text: the full path takes them
            part = "content" if path == "text" else "summary"
            key = (item_id, part, index)
            state = item.parts.get(key)
            if state is None:
                return None
        if not self._grows(part, key, item, state):
            return None
        found.sort()
        consts: list[bytes] = []
        slots: list[int] = []
        at = 0
        for start, stop, slot in found:
            if slot == _SLOT_NUMBER:
                consts.append(block[at:start])
                at = stop
            else:  # a string's body: its quotes stay in the constant bytes
                consts.append(block[at : start + 1])
                at = stop - 1
            slots.append(slot)
        consts.append(block[at:] + b"\n\n")
        return _Shape(consts, slots, kind, part, key, item, state)

    def _hot_sequence(self, buffer: bytes, at: int) -> tuple[int, int] | None:
        """The sequence number at `at` and where it ends; None if not one or one seen."""
        found = _HOT_SEQUENCE.match(buffer, at)
        if found is None:
            return None
        number = int(found.group())
        floor = self._seq_floor
        if floor is not None and (number <= floor or number in self._seq_above):
            return None  # a duplicate: decode() repairs it
        return number, found.end()

    def _hot_missed(self, buffer: bytes, pos: int) -> None:
        """The lane took nothing from a whole event: count it if it is a delta event of a
        kind a fast path takes.

        Streams whose delta events are written another way (other key orders, logprobs)
        are declined event by event, each a slow step of its own: after a run of such
        declines, the lane stops for this stream and the framer takes it all.
        """
        name_end = buffer.find(b"\n", pos, pos + 64)
        if (
            name_end > 0
            and buffer.startswith(b"event: ", pos)
            and buffer[pos + 7 : name_end] in _HOT_PART
        ):
            self._hot_misses += 1
            if self._hot_misses >= _HOT_MISSES:
                self._hot_head = None

    def _hot_record(self, number: int | None, text: str, item: _Item, state: _Part | None) -> None:
        """What decode() records for a delta event the lane takes, but the kind."""
        if number is not None:
            self._seen(number)
        if text:
            self._hot_mark(item, state)

    def _hot_mark(self, item: _Item, state: _Part | None) -> None:
        """What decode() marks when a delta brings text: the part, or the call's arguments."""
        if state is not None:
            state.has_text = True
        elif item.kind != "builtin":
            item.has_arguments = True

    def _dispatch(self, kind: str, payload: dict[str, Any]) -> list[Delta]:
        self._kind = kind
        self._last_delta = None
        handler = _HANDLERS.get(kind)
        try:
            if handler is not None:
                return handler(self, payload)
            return self._other(kind, payload)
        except _Dropped:
            return []

    # --- helpers: lenient repairs ----------------------------------------------------------

    def _note(self, kind: str, reason: str, raw: Any) -> None:
        """A repair made while decoding this event: raise when strict, else count it."""
        self._noted.extend(self.repair(kind, reason, raw))

    def _drop(self, kind: str, reason: str, raw: Any) -> NoReturn:
        """Drop this event as out of spec (strict: raise)."""
        self._note(kind, reason, raw)
        raise _Dropped

    def _seen(self, number: int) -> bool:
        """Whether a sequence number arrived before; remember it if not."""
        if self._seq_floor is None:
            self._seq_floor = number
            return False
        if number <= self._seq_floor or number in self._seq_above:
            return True
        above = self._seq_above
        above.add(number)
        if len(above) > _MAX_SEQUENCE_GAP:
            # A server that skips numbers: stop waiting for the lowest gap.
            self._seq_floor = min(above)
            above.discard(self._seq_floor)
        while self._seq_floor + 1 in above:
            self._seq_floor += 1
            above.discard(self._seq_floor)
        return False

    def _replay_early(self, item_id: str, deltas: list[Delta]) -> list[Delta]:
        """Deltas for an item just added, then those of its events that came before it."""
        self._early_chars.pop(item_id, None)
        for kind, payload in self._early.pop(item_id, ()):
            deltas.extend(self._dispatch(kind, payload))
        return deltas

    def _flush_early(self) -> list[Delta]:
        """The response ends: items that got events but never an output_item.added."""
        deltas: list[Delta] = []
        for item_id, events in list(self._early.items()):
            name = events[0][0].removeprefix("response.").split(".")[0]
            item = {"type": _IMPLIED_ITEM.get(name, name), "id": item_id}
            deltas.extend(self._on_item_added({"type": "response.output_item.added", "item": item}))
        return deltas

    # --- helpers: field access -----------------------------------------------------------

    def _item_for(self, payload: dict[str, Any]) -> _Item:
        """The open item an event refers to, by item_id (output_index only if no id)."""
        item_id = payload.get("item_id")
        item = self._items.get(item_id) if type(item_id) is str else None
        if item is not None:
            return item  # the common case: no message to build
        if item_id is None and "output_index" in payload:
            item_id = self._by_index.get(event_field(self, payload, "output_index", int))
        reason = f"expected {payload.get('type')}.item_id to be a string, got {describe(item_id)}"
        if item_id is None and self._items:
            # No id and no known position: the item added last that is still open.
            self._note("missing_item_id", reason, payload)
            item_id = next(reversed(self._items))
        if not isinstance(item_id, str):
            raise self.protocol_error(reason, payload)
        item = self._items.get(item_id)
        if item is None:
            reason = (
                f"expected an event for an added output item, got {payload.get('type')} "
                f"for item {item_id!r}, which was never added or is already done"
            )
            if item_id in self._done:
                self._drop("event_after_item_done", reason, payload)
            # Held until its item is added (or done, or the response ends without it).
            self._note("event_before_item_added", reason, payload)
            kind = self._kind
            tool_input = "arguments" in kind or "input" in kind
            self.hold_text(self._early_chars, item_id, payload.get("delta"), tool_input)
            self._early.setdefault(item_id, []).append((kind, payload))
            raise _Dropped
        return item

    # --- response lifecycle ----------------------------------------------------------------

    def _response(self, payload: dict[str, Any]) -> dict[str, Any]:
        return event_field(self, payload, "response", dict)

    def _metadata(self, response: dict[str, Any]) -> dict[str, Any]:
        metadata = {k: response[k] for k in _RESPONSE_METADATA if response.get(k) is not None}
        status = response.get("status")
        if isinstance(status, str):
            metadata["response_status"] = status
        return metadata

    def _on_started(self, payload: dict[str, Any]) -> list[Delta]:
        # response.created / in_progress / queued
        return [update_message(metadata=self._metadata(self._response(payload)))]

    def _usage(self, response: dict[str, Any]) -> Usage | None:
        usage = response.get("usage")
        if usage is None:
            return None
        if not isinstance(usage, dict):
            raise self.protocol_error(
                f"expected response.usage to be an object, got {describe(usage)}", usage
            )
        # Details that are not objects are left out, as an older server's absent ones are.
        inputs = usage.get("input_tokens_details")
        inputs = inputs if isinstance(inputs, dict) else None
        outputs = usage.get("output_tokens_details")
        outputs = outputs if isinstance(outputs, dict) else None
        # Every count checked here, the raw object below: built without validation.
        return trusted(
            Usage,
            {
                "input_tokens": optional(self, usage, "input_tokens", int, usage, "usage "),
                "output_tokens": optional(self, usage, "output_tokens", int, usage, "usage "),
                "cache_read_tokens": optional(self, inputs, "cached_tokens", int, inputs, "usage "),
                "cache_write_tokens": optional(
                    self, inputs, "cache_write_tokens", int, inputs, "usage "
                ),
                "reasoning_tokens": optional(
                    self, outputs, "reasoning_tokens", int, outputs, "usage "
                ),
                "raw": check_json_object(dict(usage), "raw"),
                "cumulative": True,  # one final total per response
            },
        )

    def _on_finished(self, payload: dict[str, Any]) -> list[Delta]:
        # response.completed / response.incomplete / response.failed
        kind = payload.get("type")
        response = self._response(payload)
        raw_status = response.get("status")
        deltas: list[Delta] = self._flush_early()
        deltas.extend(self._flush_custom_calls())
        status: Status
        stop: StopReason
        raw_stop: str
        if kind == "response.failed" or raw_status == "failed":
            deltas.append(
                update_message(
                    usage=self._usage(response),
                    raw_stop_reason="failed",
                    metadata=self._metadata(response),
                )
            )
            error = response.get("error")
            if isinstance(error, dict):
                code, message = error.get("code"), error.get("message")
            else:
                code, message = None, None
            deltas.append(
                ReportError(
                    error_type=str(code) if code is not None else "failed",
                    message=str(message) if message is not None else "response failed",
                    raw=error if error is not None else response,
                )
            )
            deltas.append(END_MESSAGE)
            return deltas
        if raw_status == "cancelled":
            status, stop, raw_stop = "cancelled", "cancelled", "cancelled"
        elif kind == "response.incomplete" or raw_status == "incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            raw_stop = reason if isinstance(reason, str) else "incomplete"
            if reason == "max_output_tokens":
                status, stop = "length", "length"
            elif reason == "content_filter":
                status, stop = "content_filtered", "content_filter"
            else:
                status, stop = "incomplete", "other"
        else:
            status, raw_stop = "complete", "completed"
            if self._tool_calls:
                stop = "tool_use"
            elif self._refusals:
                stop = "refusal"
            else:
                stop = "stop"
        deltas.append(
            update_message(
                status=status,
                stop_reason=stop,
                raw_stop_reason=raw_stop,
                usage=self._usage(response),
                metadata=self._metadata(response),
            )
        )
        deltas.append(END_MESSAGE)
        return deltas

    def _on_error(self, payload: dict[str, Any]) -> list[Delta]:
        # The top-level `error` event: fields at top level (SDK) or nested under "error".
        nested = payload.get("error")
        error = nested if isinstance(nested, dict) else payload
        code = error.get("code") or error.get("type")
        message = error.get("message")
        deltas = self._flush_early()
        deltas.extend(self._flush_custom_calls())
        deltas.append(
            ReportError(
                error_type=str(code) if code is not None else None,
                message=str(message) if message is not None else "error event",
                raw=payload,
            )
        )
        return deltas

    # --- output items ----------------------------------------------------------------------

    def _on_item_added(self, payload: dict[str, Any]) -> list[Delta]:
        raw = event_field(self, payload, "item", dict)
        item_type = event_field(self, raw, "type", str)
        item_id = raw.get("id")
        if item_id is None:
            # Some compatible servers omit ids; fall back to the position, once.
            item_id = f"output_index:{event_field(self, payload, 'output_index', int)}"
        elif not isinstance(item_id, str):
            raise self.protocol_error(
                f"expected output_item.added item.id to be a string, got {describe(item_id)}",
                payload,
            )
        if item_id in self._items:
            self._drop(
                "duplicate_item_added",
                f"expected a new output item, got a second output_item.added for {item_id!r}",
                payload,
            )
        if item_id in self._done:
            # A new item under a finished item's id: kept as the new item it says it is.
            self._note(
                "reused_item_id",
                f"expected a new output item, got output_item.added for {item_id!r}, "
                "which is already done",
                payload,
            )
            self._done.discard(item_id)
        if isinstance(payload.get("output_index"), int):
            self._by_index[payload["output_index"]] = item_id
        if item_type == "message":
            phase = raw.get("phase")
            item = _Item(item_id, item_type, "message", raw, phase=phase)
            if phase is not None and not isinstance(phase, str):
                raise self.protocol_error(
                    f"expected message phase to be a string, got {describe(phase)}", payload
                )
            self._items[item_id] = item
            return self._replay_early(item_id, [])
        if item_type == "reasoning":
            self._items[item_id] = _Item(item_id, item_type, "reasoning", raw)
            return self._replay_early(item_id, [])
        if item_type in _TOOL_CALL_TYPES:
            item = _Item(item_id, item_type, "tool_call", raw)
            item.call_id = optional(self, raw, "call_id", str, raw, f"{item_type}.")
            item.name = optional(self, raw, "name", str, raw, f"{item_type}.")
            initial = raw.get("arguments" if item_type == "function_call" else "input")
            if initial is not None and not isinstance(initial, str):
                raise self.protocol_error(
                    f"expected {item_type} arguments/input to be a string, got {describe(initial)}",
                    payload,
                )
            metadata: dict[str, Any] = {"item_id": item_id}
            if item_type == "custom_tool_call":
                metadata["type"] = "custom_tool_call"
                if initial:
                    item.input_chunks.append(initial)
            item.has_arguments = bool(initial)
            self._items[item_id] = item
            self._tool_calls += 1
            # Each field checked above: built without validation.
            call = trusted(
                ToolCall,
                {
                    "call_id": item.call_id,
                    "name": item.name,
                    "arguments": initial or "",
                    "index": None,
                    "status": "incomplete",
                    "metadata": metadata,
                },
            )
            return self._replay_early(item_id, [open_part((item_id,), call)])
        if _client_runs(item_type, raw):
            item = _Item(item_id, item_type, "client_call", raw)
            item.call_id = optional(self, raw, "call_id", str, raw, f"{item_type}.")
            self._items[item_id] = item
            self._tool_calls += 1
            client_call = trusted(
                ToolCall,
                {
                    "call_id": item.call_id,
                    "name": item_type.removesuffix("_call"),
                    "arguments": "",
                    "index": None,
                    "status": "incomplete",
                    "metadata": {"item_id": item_id, "type": item_type},
                },
            )
            return self._replay_early(item_id, [open_part((item_id,), client_call)])
        item = _Item(item_id, item_type, "builtin", raw)
        self._items[item_id] = item
        part = ContentPart(
            type="unsupported",
            content=None,
            options={"type": item_type, "id": item_id, "block": raw},
        )
        return self._replay_early(item_id, [open_part((item_id,), part, _is_tool_item(item_type))])

    def _on_item_done(self, payload: dict[str, Any]) -> list[Delta]:
        raw = event_field(self, payload, "item", dict)
        item_id = raw.get("id")
        if item_id is None and isinstance(payload.get("output_index"), int):
            item_id = self._by_index.get(payload["output_index"])
        if not isinstance(item_id, str):
            raise self.protocol_error(
                f"expected output_item.done item.id to be a string, got {describe(item_id)}",
                payload,
            )
        deltas: list[Delta] = []
        if item_id not in self._items:
            reason = (
                f"expected output_item.done for an added item, got one for {item_id!r}, "
                "which was never added or is already done"
            )
            if item_id in self._done:
                self._drop("duplicate_item_done", reason, payload)
            # Never added: the finished item stands in for its start.
            self._note("item_done_before_added", reason, payload)
            added = dict(raw)
            if self._early.get(item_id):
                # Its streamed events replay on the start: keep the text out of it.
                added.pop("arguments", None)
                added.pop("input", None)
            added_event = {"type": "response.output_item.added", "item": added}
            if "output_index" in payload:
                added_event["output_index"] = payload["output_index"]
            deltas = self._on_item_added(added_event)
        item = self._items.pop(item_id)
        self._done.add(item_id)
        if item.kind == "message":
            return deltas + self._message_done(item, raw)
        if item.kind == "reasoning":
            return deltas + self._reasoning_done(item, raw)
        # Text or thinking that (lenient) grew inside a call or built-in item ends with it.
        deltas.extend(close_part(key, explicit=True) for key in item.parts)
        item.parts.clear()
        if item.kind == "tool_call":
            return deltas + self._tool_call_done(item, raw, explicit=True)
        if item.kind == "client_call":
            return deltas + self._client_call_done(item, raw)
        final = ContentPart(
            type="unsupported",
            content=None,
            options={"type": item.type, "id": item.id, "block": raw},
        )
        deltas.append(close_part((item.id,), explicit=True, final=final))
        return deltas

    def _message_done(self, item: _Item, raw: dict[str, Any]) -> list[Delta]:
        deltas: list[Delta] = []
        content = raw.get("content")
        blocks = content if isinstance(content, list) else []
        # A part whose content_part.done never came ends with its item.
        for key in list(item.parts):
            index = None
            if isinstance(key, tuple) and len(key) == 3 and key[1] == "content":
                index = key[2]
            block: Any = None
            if isinstance(index, int) and 0 <= index < len(blocks):
                block = blocks[index]
            deltas.extend(self._fill_from_done(item, key, block if isinstance(block, dict) else {}))
            deltas.append(close_part(key, explicit=True))
        item.parts.clear()
        if not item.any_part:
            # A server that streamed no content parts: take them from the finished item.
            for index, block in enumerate(blocks):
                if not isinstance(block, dict):
                    continue
                key = (item.id, "content", index)
                deltas.extend(self._open_content(item, key, block, raw))
                deltas.extend(self._fill_from_done(item, key, block))
                deltas.append(close_part(key, explicit=True))
                item.parts.pop(key, None)
        return deltas

    def _reasoning_done(self, item: _Item, raw: dict[str, Any]) -> list[Delta]:
        deltas: list[Delta] = []
        if not item.any_part:
            # Nothing streamed: the finished item's summary and text, or one empty part.
            for source, part_type in (("summary", "summary_text"), ("content", "reasoning_text")):
                blocks = raw.get(source)
                for index, block in enumerate(blocks if isinstance(blocks, list) else []):
                    text = block.get("text") if isinstance(block, dict) else None
                    if isinstance(text, str):
                        key: Hashable = (item.id, source, index)
                        deltas.append(self._open_thinking(item, key, part_type, text))
            if not item.any_part:
                deltas.append(self._open_thinking(item, (item.id, "reasoning"), "reasoning", ""))
        encrypted = raw.get("encrypted_content")
        if encrypted is None:
            encrypted = item.added.get("encrypted_content")
        if encrypted is not None and not isinstance(encrypted, str):
            raise self.protocol_error(
                f"expected reasoning encrypted_content to be a string, got {describe(encrypted)}",
                raw,
            )
        for open_key in list(item.parts):
            if encrypted is not None and open_key == item.latest:
                deltas.append(GrowPart(open_key, options={"encrypted_content": encrypted}))
            deltas.append(close_part(open_key, explicit=True))
        item.parts.clear()
        return deltas

    def _tool_call_done(self, item: _Item, raw: dict[str, Any], *, explicit: bool) -> list[Delta]:
        key = (item.id,)
        call_id = item.call_id
        name = item.name
        if raw.get("call_id") is not None:
            call_id = event_field(self, raw, "call_id", str)
        if raw.get("name") is not None:
            name = event_field(self, raw, "name", str)
        metadata: dict[str, Any] = {"item_id": item.id}
        if item.type == "custom_tool_call":
            metadata["type"] = "custom_tool_call"
            text = raw.get("input")
            if not isinstance(text, str):
                text = (
                    item.input_done if item.input_done is not None else "".join(item.input_chunks)
                )
            # Free text, not JSON: the accumulator must not parse it, so the final call
            # carries it as {"input": text}.
            final = ToolCall.model_construct(
                call_id=call_id,
                name=name,
                arguments={"input": text},
                index=None,
                status="complete" if explicit else "incomplete",
                metadata=metadata,
            )
            return [close_part(key, explicit=explicit, final=final)]
        deltas: list[Delta] = []
        arguments = raw.get("arguments")
        if not item.has_arguments and isinstance(arguments, str) and arguments:
            deltas.append(GrowPart(key, content=arguments))
            item.has_arguments = True
        if (call_id, name) != (item.call_id, item.name) and isinstance(arguments, str):
            # The start lacked the id or name: rebuild the call from the finished item.
            status: Literal["incomplete", "complete"]
            try:
                parsed: str | dict[str, Any] = parse_tool_arguments(call_id, name, arguments)
                status = "complete"
            except ToolArgumentsError as exc:
                parsed, status = arguments, "incomplete"
                metadata["arguments_error"] = str(exc)
            final_call = ToolCall.model_construct(
                call_id=call_id,
                name=name,
                arguments=parsed,
                index=None,
                status=status,
                metadata=metadata,
            )
            return [close_part(key, explicit=True, final=final_call)]
        deltas.append(close_part(key, explicit=True))
        return deltas

    def _client_call_done(self, item: _Item, raw: dict[str, Any]) -> list[Delta]:
        """The finished item's input as the call's argument text (one delta), the rest of
        the item (status, environment...) in its metadata, to rebuild it for replay."""
        key = (item.id,)
        inputs = CLIENT_CALL_INPUTS[item.type]
        arguments = {name: raw[name] for name in inputs if name in raw}
        fields = {k: v for k, v in raw.items() if k not in inputs and k not in _ITEM_IDS}
        text = json.dumps(arguments, ensure_ascii=False)
        deltas: list[Delta] = [GrowPart(key, content=text, options={"item_fields": fields})]
        call_id = optional(self, raw, "call_id", str, raw, f"{item.type}.")
        if call_id is not None and call_id != item.call_id:
            # The start lacked the id (or said another): the finished item's stands.
            final = ToolCall.model_construct(
                call_id=call_id,
                name=item.type.removesuffix("_call"),
                arguments=arguments,
                index=None,
                status="complete",
                metadata={"item_id": item.id, "type": item.type, "item_fields": fields},
            )
            return [*deltas, close_part(key, explicit=True, final=final)]
        return [*deltas, close_part(key, explicit=True)]

    def _flush_custom_calls(self) -> list[Delta]:
        """Close open custom tool calls with their input so far (their text is not JSON)."""
        deltas: list[Delta] = []
        for item_id, item in list(self._items.items()):
            if item.type == "custom_tool_call":
                del self._items[item_id]
                deltas.extend(self._tool_call_done(item, {}, explicit=False))
        return deltas

    # --- content parts (message text, refusals, raw reasoning text) --------------------------

    def _open_content(
        self, item: _Item, key: Hashable, part: dict[str, Any], raw: Any
    ) -> list[Delta]:
        part_type = part.get("type")
        text = part.get("text")
        if item.kind == "reasoning":
            initial = text if isinstance(text, str) else ""
            return [self._open_thinking(item, key, str(part_type or "reasoning_text"), initial)]
        if item.kind != "message":
            # Lenient: text in a call or built-in item is kept as a text part of it.
            self._note(
                "content_in_wrong_item",
                f"expected content parts only in message or reasoning items, got one in a "
                f"{item.type} item",
                raw,
            )
        item.any_part = True
        state = _Part(key)
        item.parts[key] = state
        if part_type in ("output_text", "refusal"):
            field_name = "text" if part_type == "output_text" else "refusal"
            start = part.get(field_name)
            if start is not None and not isinstance(start, str):
                raise self.protocol_error(
                    f"expected content part {field_name} to be a string, got {describe(start)}",
                    raw,
                )
            options: dict[str, Any] = {"id": item.id}
            if part_type == "refusal":
                options["refusal"] = True
                self._refusals += 1
            if item.phase is not None:
                marker = _PHASES.get(item.phase)
                if marker is not None:
                    options["utterance"] = marker
                else:
                    options["phase"] = item.phase
            state.has_text = bool(start)
            # Each field checked above: built without validation.
            text_part = trusted(
                ContentPart,
                {"type": "text", "content": start or "", "options": options, "citations": []},
            )
            return [open_part(key, text_part)]
        # An unknown content part type: keep it whole.
        options = {"type": str(part_type), "id": item.id, "block": part}
        return [open_part(key, ContentPart(type="unsupported", content=None, options=options))]

    def _open_thinking(self, item: _Item, key: Hashable, part_type: str, text: str) -> Delta:
        """Open a thinking part of a reasoning item; the previous finished one closes later."""
        item.any_part = True
        state = _Part(key, has_text=bool(text))
        item.parts[key] = state
        item.latest = key
        options = {"id": item.id, "type": part_type}
        # The caller checked `text` and `part_type`: built without validation.
        part = trusted(
            ContentPart, {"type": "thinking", "content": text, "options": options, "citations": []}
        )
        return open_part(key, part)

    def _close_finished_reasoning(self, item: _Item) -> list[Delta]:
        # Reasoning parts whose own done arrived close once a later part starts.
        deltas: list[Delta] = []
        for key, part in list(item.parts.items()):
            if part.ended and key != item.latest:
                del item.parts[key]
                item.closed.add(key)
                deltas.append(close_part(key, explicit=True))
        return deltas

    def _on_content_part_added(self, payload: dict[str, Any]) -> list[Delta]:
        item = self._item_for(payload)
        index = event_field(self, payload, "content_index", int)
        part = event_field(self, payload, "part", dict)
        key = (item.id, "content", index)
        if key in item.parts or key in item.closed:
            self._drop(
                "duplicate_content_part_added",
                f"expected a new content part, got a second content_part.added for {key!r}",
                payload,
            )
        deltas = self._open_content(item, key, part, payload)
        if item.kind == "reasoning":
            deltas.extend(self._close_finished_reasoning(item))
        return deltas

    def _on_content_part_done(self, payload: dict[str, Any]) -> list[Delta]:
        item = self._item_for(payload)
        index = event_field(self, payload, "content_index", int)
        part = event_field(self, payload, "part", dict)
        key = (item.id, "content", index)
        state = item.parts.get(key)
        deltas: list[Delta] = []
        if key in item.closed or (state is not None and state.ended):
            self._drop("duplicate_content_part_done", _part_done_reason(key), payload)
        if state is None:
            # Never added: the finished part opens (and fills) it.
            self._note("content_part_done_before_added", _part_done_reason(key), payload)
            deltas = self._open_content(item, key, part, payload)
            if item.kind == "reasoning":
                deltas.extend(self._close_finished_reasoning(item))
            state = item.parts[key]
        deltas.extend(self._fill_from_done(item, key, part))
        if item.kind == "reasoning":
            state.ended = True
            if key != item.latest:
                del item.parts[key]
                item.closed.add(key)
                deltas.append(close_part(key, explicit=True))
            return deltas
        del item.parts[key]
        item.closed.add(key)
        if part.get("type") not in ("output_text", "refusal", None):
            final = ContentPart(
                type="unsupported",
                content=None,
                options={"type": str(part.get("type")), "id": item.id, "block": part},
            )
            deltas.append(close_part(key, explicit=True, final=final))
        else:
            deltas.append(close_part(key, explicit=True))
        return deltas

    def _fill_from_done(self, item: _Item, key: Hashable, part: dict[str, Any]) -> list[Delta]:
        """What a finished content part says that its deltas did not (text, annotations)."""
        state = item.parts.get(key)
        if state is None:
            return []
        deltas: list[Delta] = []
        text = part.get("refusal") if part.get("type") == "refusal" else part.get("text")
        if not state.has_text and isinstance(text, str) and text:
            deltas.append(GrowPart(key, content=text))
            state.has_text = True
        annotations = part.get("annotations")
        if not state.annotated and isinstance(annotations, list) and annotations:
            citations = tuple(self._citation(a) for a in annotations if isinstance(a, dict))
            deltas.append(GrowPart(key, citations=citations))
            state.annotated = True
        if not state.logprobs_sent:
            logprobs = part.get("logprobs")
            if isinstance(logprobs, list) and logprobs:
                state.logprobs = list(logprobs)
            if state.logprobs:
                deltas.append(GrowPart(key, options={"logprobs": list(state.logprobs)}))
            state.logprobs_sent = True
        return deltas

    def _text_part(self, payload: dict[str, Any], kind: str) -> tuple[Hashable, _Part, list[Delta]]:
        """The part a text/refusal/reasoning_text event is about, and deltas opening it."""
        item = self._item_for(payload)
        index = (
            0
            if payload.get("content_index") is None
            else event_field(self, payload, "content_index", int)
        )
        key = (item.id, "content", index)
        state = item.parts.get(key)
        if state is not None:
            return key, state, []
        if key in item.closed:
            self._drop(
                "event_after_part_done",
                f"expected {payload.get('type')} for an open content part, got one for {key!r} "
                "after its content_part.done",
                payload,
            )
        # Some servers skip content_part.added: start the part here.
        part_type = {"text": "output_text", "refusal": "refusal"}.get(kind, "reasoning_text")
        deltas = self._open_content(item, key, {"type": part_type}, payload)
        if item.kind == "reasoning":
            deltas.extend(self._close_finished_reasoning(item))
        return key, item.parts[key], deltas

    def _on_text_delta(self, payload: dict[str, Any], kind: str) -> list[Delta]:
        key, state, deltas = self._text_part(payload, kind)
        delta = event_field(self, payload, "delta", str)
        if state.ended:
            self._drop(
                "event_after_part_done",
                f"expected {payload.get('type')} for an open content part, got one for {key!r} "
                "after its content_part.done",
                payload,
            )
        state.has_text = state.has_text or bool(delta)
        logprobs = payload.get("logprobs")
        if isinstance(logprobs, list) and logprobs:
            state.logprobs.extend(logprobs)
        deltas.append(GrowPart(key, delta))
        return deltas

    def _on_text_done(self, payload: dict[str, Any], kind: str) -> list[Delta]:
        key, state, deltas = self._text_part(payload, kind)
        text = payload.get("refusal" if kind == "refusal" else "text")
        if not state.has_text and isinstance(text, str) and text:
            deltas.append(GrowPart(key, content=text))
            state.has_text = True
        logprobs = payload.get("logprobs")
        if isinstance(logprobs, list) and logprobs:
            # The done event carries the whole list; prefer it to the pieces.
            state.logprobs = list(logprobs)
        if state.logprobs:
            deltas.append(GrowPart(key, options={"logprobs": list(state.logprobs)}))
        state.logprobs_sent = True
        return deltas

    def _on_annotation(self, payload: dict[str, Any]) -> list[Delta]:
        key, state, deltas = self._text_part(payload, "text")
        annotation = event_field(self, payload, "annotation", dict)
        state.annotated = True
        deltas.append(GrowPart(key, citations=(self._citation(annotation),)))
        return deltas

    def _citation(self, annotation: dict[str, Any]) -> Citation:
        kind = annotation.get("type")
        start = int_or_none(annotation.get("start_index"))
        end = int_or_none(annotation.get("end_index"))
        metadata = {"annotation": annotation}
        if kind == "url_citation":
            source = CitationSource(
                type="web",
                title=text_or_none(annotation.get("title")),
                url=text_or_none(annotation.get("url")),
            )
        elif kind in ("file_citation", "container_file_citation", "file_path"):
            if start is None:
                start = int_or_none(annotation.get("index"))
            source = CitationSource(
                type="document",
                title=text_or_none(annotation.get("filename")),
                document_id=text_or_none(annotation.get("file_id")),
            )
        else:
            source = None
        return Citation(source=source, start_index=start, end_index=end, metadata=metadata)

    # --- reasoning summaries -----------------------------------------------------------------

    def _summary_part(
        self, payload: dict[str, Any], *, open_missing: bool
    ) -> tuple[_Item, Hashable, list[Delta]]:
        """The summary part an event is about, and deltas opening it if it never started."""
        item = self._item_for(payload)
        index = event_field(self, payload, "summary_index", int)
        if item.kind != "reasoning":
            # Lenient: kept as a thinking part of the item it names.
            self._note(
                "summary_in_wrong_item",
                f"expected {payload.get('type')} for a reasoning item, "
                f"got one for a {item.type} item",
                payload,
            )
        key = (item.id, "summary", index)
        state = item.parts.get(key)
        if key in item.closed or (state is not None and state.ended and open_missing):
            self._drop(
                "event_after_part_done",
                f"expected {payload.get('type')} for an open summary part, got one for {key!r} "
                "after its reasoning_summary_part.done",
                payload,
            )
        deltas: list[Delta] = []
        if key not in item.parts and open_missing:
            deltas.append(self._open_thinking(item, key, "summary_text", ""))
            deltas.extend(self._close_finished_reasoning(item))
        return item, key, deltas

    def _on_summary_part_added(self, payload: dict[str, Any]) -> list[Delta]:
        item, key, _ = self._summary_part(payload, open_missing=False)
        if key in item.parts:
            self._drop(
                "duplicate_summary_part_added",
                "expected a new summary part, got a second "
                f"reasoning_summary_part.added for {key!r}",
                payload,
            )
        part = payload.get("part")
        text = part.get("text") if isinstance(part, dict) else None
        deltas: list[Delta] = [
            self._open_thinking(item, key, "summary_text", text if isinstance(text, str) else "")
        ]
        deltas.extend(self._close_finished_reasoning(item))
        return deltas

    def _on_summary_delta(self, payload: dict[str, Any]) -> list[Delta]:
        item, key, deltas = self._summary_part(payload, open_missing=True)
        delta = event_field(self, payload, "delta", str)
        item.parts[key].has_text = item.parts[key].has_text or bool(delta)
        deltas.append(GrowPart(key, delta))
        return deltas

    def _on_summary_text_done(self, payload: dict[str, Any]) -> list[Delta]:
        item, key, deltas = self._summary_part(payload, open_missing=True)
        state = item.parts[key]
        text = payload.get("text")
        if not state.has_text and isinstance(text, str) and text:
            deltas.append(GrowPart(key, content=text))
            state.has_text = True
        return deltas

    def _on_summary_part_done(self, payload: dict[str, Any]) -> list[Delta]:
        item, key, deltas = self._summary_part(payload, open_missing=True)
        state = item.parts[key]
        part = payload.get("part")
        text = part.get("text") if isinstance(part, dict) else None
        if not state.has_text and isinstance(text, str) and text:
            deltas.append(GrowPart(key, content=text))
            state.has_text = True
        state.ended = True
        if key != item.latest:
            del item.parts[key]
            item.closed.add(key)
            deltas.append(close_part(key, explicit=True))
        return deltas

    # --- tool calls ----------------------------------------------------------------------------

    def _on_arguments_delta(self, payload: dict[str, Any]) -> list[Delta]:
        item = self._item_for(payload)
        delta = event_field(self, payload, "delta", str)
        if item.kind == "builtin":
            # mcp_call arguments: shown while streaming; the final item replaces them.
            return [GrowPart((item.id,), delta)]
        if item.type != "function_call":
            self._note(
                "delta_type_mismatch",
                f"expected function_call_arguments.delta for a function_call item, "
                f"got one for a {item.type} item",
                payload,
            )
            if item.type != "custom_tool_call":
                return []  # no call to grow: dropped (and counted)
            item.input_chunks.append(delta)
        item.has_arguments = item.has_arguments or bool(delta)
        return [GrowPart((item.id,), delta)]

    def _on_arguments_done(self, payload: dict[str, Any]) -> list[Delta]:
        item = self._item_for(payload)
        if item.type != "function_call":
            return []
        arguments = event_field(self, payload, "arguments", str)
        if not item.has_arguments and arguments:
            item.has_arguments = True
            return [GrowPart((item.id,), content=arguments)]
        return []

    def _on_custom_input_delta(self, payload: dict[str, Any]) -> list[Delta]:
        item = self._item_for(payload)
        delta = event_field(self, payload, "delta", str)
        if item.type != "custom_tool_call":
            self._note(
                "delta_type_mismatch",
                f"expected custom_tool_call_input.delta for a custom_tool_call item, "
                f"got one for a {item.type} item",
                payload,
            )
            if item.type != "function_call":
                return []  # no call to grow: dropped (and counted)
            item.has_arguments = item.has_arguments or bool(delta)
            return [GrowPart((item.id,), delta)]
        item.input_chunks.append(delta)
        return [GrowPart((item.id,), delta)]

    def _on_custom_input_done(self, payload: dict[str, Any]) -> list[Delta]:
        item = self._item_for(payload)
        text = event_field(self, payload, "input", str)
        if item.type != "custom_tool_call":
            self._drop(
                "delta_type_mismatch",
                f"expected custom_tool_call_input.done for a custom_tool_call item, "
                f"got one for a {item.type} item",
                payload,
            )
        item.input_done = text
        return []

    # --- built-in tools ---------------------------------------------------------------------

    def _on_code_delta(self, payload: dict[str, Any]) -> list[Delta]:
        item = self._item_for(payload)
        # Code shown while it streams; the final item from output_item.done replaces it.
        return [GrowPart((item.id,), content=event_field(self, payload, "delta", str))]

    def _on_builtin_done_field(self, payload: dict[str, Any]) -> list[Delta]:
        self._item_for(payload)  # the whole value arrives again with output_item.done
        return []

    def _on_partial_image(self, payload: dict[str, Any]) -> list[Delta]:
        item = self._item_for(payload)
        image = event_field(self, payload, "partial_image_b64", str)
        options: dict[str, Any] = {"partial_image_b64": image}
        index = payload.get("partial_image_index")
        if isinstance(index, int):
            options["partial_image_index"] = index
        return [GrowPart((item.id,), options=options)]

    def _other(self, kind: str, payload: dict[str, Any]) -> list[Delta]:
        head, _, status = kind.rpartition(".")
        if (
            status in _PROGRESS_STATUSES
            and head.startswith("response.")
            and isinstance(payload.get("item_id"), str)
        ):
            item = self._item_for(payload)
            if item.kind == "builtin":
                return [GrowPart((item.id,), options={"status": status})]
            return []
        return [SkipEvent(kind)]


_Handler = Callable[[OpenAIResponsesDecoder, dict[str, Any]], list[Delta]]


def _part_done_reason(key: Hashable) -> str:
    return f"expected content_part.done for an open part, got one for {key!r}"


# The fast paths by event type. A name, not the method: compiled, a method called through
# a table is a Python-level call, one named in an `if` a direct one.
_FAST: Final[dict[str, Literal["text", "summary", "arguments"]]] = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "text",
    "response.reasoning_text.delta": "text",
    "response.reasoning_summary_text.delta": "summary",
    "response.function_call_arguments.delta": "arguments",
}

_HANDLERS: dict[str, _Handler] = {
    "response.created": OpenAIResponsesDecoder._on_started,
    "response.in_progress": OpenAIResponsesDecoder._on_started,
    "response.queued": OpenAIResponsesDecoder._on_started,
    "response.completed": OpenAIResponsesDecoder._on_finished,
    "response.incomplete": OpenAIResponsesDecoder._on_finished,
    "response.failed": OpenAIResponsesDecoder._on_finished,
    "error": OpenAIResponsesDecoder._on_error,
    "response.output_item.added": OpenAIResponsesDecoder._on_item_added,
    "response.output_item.done": OpenAIResponsesDecoder._on_item_done,
    "response.content_part.added": OpenAIResponsesDecoder._on_content_part_added,
    "response.content_part.done": OpenAIResponsesDecoder._on_content_part_done,
    "response.output_text.delta": lambda d, p: d._on_text_delta(p, "text"),
    "response.output_text.done": lambda d, p: d._on_text_done(p, "text"),
    "response.refusal.delta": lambda d, p: d._on_text_delta(p, "refusal"),
    "response.refusal.done": lambda d, p: d._on_text_done(p, "refusal"),
    "response.reasoning_text.delta": lambda d, p: d._on_text_delta(p, "reasoning_text"),
    "response.reasoning_text.done": lambda d, p: d._on_text_done(p, "reasoning_text"),
    "response.output_text.annotation.added": OpenAIResponsesDecoder._on_annotation,
    "response.reasoning_summary_part.added": OpenAIResponsesDecoder._on_summary_part_added,
    "response.reasoning_summary_part.done": OpenAIResponsesDecoder._on_summary_part_done,
    "response.reasoning_summary_text.delta": OpenAIResponsesDecoder._on_summary_delta,
    "response.reasoning_summary_text.done": OpenAIResponsesDecoder._on_summary_text_done,
    "response.function_call_arguments.delta": OpenAIResponsesDecoder._on_arguments_delta,
    "response.function_call_arguments.done": OpenAIResponsesDecoder._on_arguments_done,
    "response.mcp_call_arguments.delta": OpenAIResponsesDecoder._on_arguments_delta,
    "response.mcp_call_arguments.done": OpenAIResponsesDecoder._on_builtin_done_field,
    "response.custom_tool_call_input.delta": OpenAIResponsesDecoder._on_custom_input_delta,
    "response.custom_tool_call_input.done": OpenAIResponsesDecoder._on_custom_input_done,
    "response.code_interpreter_call_code.delta": OpenAIResponsesDecoder._on_code_delta,
    "response.code_interpreter_call_code.done": OpenAIResponsesDecoder._on_builtin_done_field,
    "response.image_generation_call.partial_image": OpenAIResponsesDecoder._on_partial_image,
}
