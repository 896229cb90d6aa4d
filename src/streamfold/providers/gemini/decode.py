"""Gemini / Vertex AI `streamGenerateContent` streams (`alt=sse`).

Every event is a whole GenerateContentResponse: `candidates[].content.parts[]`,
`usageMetadata` (running totals), `modelVersion`, `responseId`, `promptFeedback`. The wire
never says where a part ends, so a part ends when a part of another kind begins, and
everything ends with the stream. Gemini has no end marker: `finishReason` sets the status
and stop reason, and the fold finishes when the input closes (a usage chunk may follow);
an input that closes after a finishReason ended normally (its end marker, see close()).

Parts:
- `text` chunks grow one text part; `thought: true` chunks grow one thinking part.
- `thoughtSignature` stays on the part that carried it: options["signature"] on text and
  thinking, metadata["thought_signature"] on a tool call, inside the block of an opaque part.
  Gemini's rule for replay is "don't merge a part with a signature with another part" (other
  than its own streamed continuation), so a signed chunk never joins an earlier part, and a
  signed part with empty text (how Gemini 3 ends a streamed turn) is kept as a part of its
  own, with content "".
- `functionCall` parts that arrive whole are one ToolCall each; `functionCall.id` is the call
  id when present, else `f"{name}_{n}"` (n counts the stream's calls), so one function
  called twice gives two ids. Vertex streams arguments (`willContinue` / `partialArgs` with
  JSON paths, closed by a call part without `willContinue`); they are written out as JSON
  text as they come.
- `inlineData` becomes an image (or file) part; every other part (`executableCode`,
  `codeExecutionResult`, `toolCall`, `toolResponse`, `fileData`, ...) an `unsupported` part
  holding the whole part, signature included, so it can be sent back verbatim.
- `groundingMetadata` supports become Citations on the text part they cite (indexes are
  characters of that part; Gemini's byte offsets are kept in the citation metadata); the
  whole grounding and `urlContextMetadata` objects go in the message metadata.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Literal

from ...deltas import (
    ClosePart,
    Delta,
    EndMessage,
    GrowPart,
    OpenPart,
    ReportError,
    SkipEvent,
    UpdateMessage,
)
from ...errors import StateError
from ...message import Status, StopReason, ToolCall, Usage
from ...parts import Citation, CitationSource, ContentPart
from ..base import Decoder
from ..fields import check, describe, text_or_none
from .state import (
    GeminiArgsFrame,
    GeminiArgsState,
    GeminiCallState,
    GeminiGrowable,
    GeminiState,
    GeminiTextState,
)

# The top-level fields of a GenerateContentResponse chunk (wire names; the google-genai
# SDK's model_dump adds the last three). A chunk with none of them is not Gemini's.
_CHUNK_FIELDS = frozenset(
    {
        "candidates",
        "promptFeedback",
        "usageMetadata",
        "modelVersion",
        "responseId",
        "createTime",
        "sdkHttpResponse",
        "automaticFunctionCallingHistory",
        "parsed",
    }
)

_STOP: dict[str, tuple[StopReason, Status]] = {
    "STOP": ("stop", "complete"),
    "MAX_TOKENS": ("length", "length"),
    "CONTINUATION": ("pause", "complete"),
    "MALFORMED_FUNCTION_CALL": ("error", "error"),
    "UNEXPECTED_TOOL_CALL": ("error", "error"),
    "TOO_MANY_TOOL_CALLS": ("error", "error"),
    "MISSING_THOUGHT_SIGNATURE": ("error", "error"),
    "MALFORMED_RESPONSE": ("error", "error"),
}
_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)

# Part fields that qualify a part rather than being its payload.
_PART_META = frozenset(
    {"thought", "thoughtSignature", "partMetadata", "videoMetadata", "mediaResolution"}
)

# Parts that are a tool the model has Gemini run (code, a built-in tool call): the text
# before one is narration. Their results (codeExecutionResult, toolResponse) are not.
_TOOL_KINDS = frozenset({"executableCode", "toolCall"})

_URLSAFE = str.maketrans("-_", "+/")


def _standard_b64(value: str) -> str:
    # google-genai objects dump bytes (signatures, inline data) as URL-safe base64; the
    # wire uses the standard alphabet, which has neither "-" nor "_", so this is the
    # identity on wire data and makes folding SDK objects give the same Message.
    return value.translate(_URLSAFE)


@dataclass(slots=True)
class _Growable:
    """The text or thinking part later chunks of the same kind may still grow."""

    key: int
    kind: Literal["text", "thinking"]


@dataclass(slots=True)
class _TextPart:
    """A text part's chunks, kept to turn grounding byte offsets into character indexes."""

    key: int
    chunks: list[str]
    cited: set[tuple[Any, ...]] = field(default_factory=set)
    # Where each chunk ends, in UTF-8 bytes and in characters: a grounding offset maps to
    # a character index by bisecting these, not by re-encoding the whole text per report
    # (a stream of grounding reports on a long text was quadratic).
    byte_ends: list[int] = field(default_factory=list)
    char_ends: list[int] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.chunks.append(text)
        self.byte_ends.append((self.byte_ends[-1] if self.byte_ends else 0) + len(text.encode()))
        self.char_ends.append((self.char_ends[-1] if self.char_ends else 0) + len(text))

    @property
    def size(self) -> int:
        """The text's length in UTF-8 bytes."""
        return self.byte_ends[-1] if self.byte_ends else 0

    def chars(self, offset: int) -> int:
        """The character index of a UTF-8 byte offset (a split character is not counted)."""
        at = bisect.bisect_left(self.byte_ends, offset)
        if at == len(self.chunks):
            return self.char_ends[-1] if self.char_ends else 0
        byte_base = self.byte_ends[at - 1] if at else 0
        char_base = self.char_ends[at - 1] if at else 0
        head = self.chunks[at].encode()[: offset - byte_base]
        return char_base + len(head.decode("utf-8", errors="ignore"))

    def to_state(self) -> GeminiTextState:
        """This as saved-state data (its offsets are derived from the chunks)."""
        return GeminiTextState(
            key=self.key, chunks=self.chunks, cited=[list(mark) for mark in self.cited]
        )

    @classmethod
    def from_state(cls, state: GeminiTextState) -> _TextPart:
        """The text part this describes."""
        part = _TextPart(state.key, [])
        try:
            for chunk in state.chunks:
                part.add(chunk)
        except UnicodeEncodeError:
            raise StateError("chunks", "expected text UTF-8 can encode") from None
        for n, mark in enumerate(state.cited):
            if not all(item is None or isinstance(item, str | int | float) for item in mark):
                raise StateError(f"cited[{n}]", "expected a report's plain values")
            part.cited.add(tuple(mark))
        return part


# The deepest partialArgs path accepted: jiter reads JSON at most ~200 levels deep.
_MAX_PATH_DEPTH = 128


class _ArgsWriter:
    """Write Vertex's streamed `partialArgs` (JSON path + value) as argument JSON text.

    Paths that arrive in document order are written as they come. A path that goes back
    into a finished object or array cannot be written as text any more: the writer stops
    (`broken`) and the call's arguments are rebuilt from `values` at its end.
    """

    def __init__(self) -> None:
        self.started = False
        self.broken = False
        # Open containers, root first: (kind, keys used or item count).
        self._stack: list[tuple[str, set[Any]]] = []
        self._path: list[str | int] = []
        self._open_string: tuple[str | int, ...] | None = None
        self.values: dict[str, Any] = {}
        self._strings: dict[tuple[str | int, ...], _Chunks] = {}

    def add(self, path: list[str | int], value: Any, is_string: bool, more: bool) -> str:
        self._remember(path, value, is_string)
        if self.broken:
            return ""
        out: list[str] = []
        if not self.started:
            self.started = True
            out.append("{")
            self._stack.append(("object", set()))
        key = tuple(path)
        if self._open_string is not None:
            if self._open_string == key and is_string:
                out.append(_escape(value))
                if not more:
                    out.append('"')
                    self._open_string = None
                return "".join(out)
            out.append('"')
            self._open_string = None
        containers, leaf = path[:-1], path[-1]
        common = 0
        while (
            common < len(self._path)
            and common < len(containers)
            and self._path[common] == containers[common]
        ):
            common += 1
        while len(self._path) > common:
            kind, _ = self._stack.pop()
            self._path.pop()
            out.append("}" if kind == "object" else "]")
        for depth in range(common, len(containers)):
            segment = containers[depth]
            nxt = path[depth + 1]
            if not self._enter(segment, out):
                return self._break()
            out.append("{" if isinstance(nxt, str) else "[")
            self._stack.append(("object" if isinstance(nxt, str) else "array", set()))
            self._path.append(segment)
        if not self._enter(leaf, out):
            return self._break()
        if is_string:
            out.append('"' + _escape(value))
            if more:
                self._open_string = key
            else:
                out.append('"')
        else:
            out.append(json.dumps(value))
        return "".join(out)

    def finish(self) -> str:
        if self.broken or not self.started:
            return ""
        out = ['"'] if self._open_string is not None else []
        while self._stack:  # innermost first (mypyc 2.4 crashes on `reversed` over this list)
            kind, _ = self._stack.pop()
            out.append("}" if kind == "object" else "]")
        return "".join(out)

    def _enter(self, segment: str | int, out: list[str]) -> bool:
        kind, used = self._stack[-1]
        if kind == "object":
            if not isinstance(segment, str) or segment in used:
                return False
            out.append(("," if used else "") + json.dumps(segment, ensure_ascii=False) + ":")
        else:
            if not isinstance(segment, int) or segment != len(used):
                return False
            if used:
                out.append(",")
        used.add(segment)
        return True

    def _break(self) -> str:
        self.broken = True
        return ""

    def _remember(self, path: list[str | int], value: Any, is_string: bool) -> None:
        key = tuple(path)
        if is_string:
            chunks = self._strings.get(key)
            if chunks is None:
                chunks = self._strings[key] = _Chunks()
                _set_path(self.values, path, chunks)
            chunks.pieces.append(value)
        else:
            self._strings.pop(key, None)
            _set_path(self.values, path, value)

    def arguments(self) -> dict[str, Any]:
        result = _join_strings(self.values)
        assert isinstance(result, dict)
        return result


def _escape(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _set_path(root: dict[str, Any], path: list[str | int], value: Any) -> None:
    node: Any = root
    for segment, nxt in zip(path, [*path[1:], None], strict=True):
        if nxt is None:
            break
        child = _child(node, segment)
        if not isinstance(child, dict | list):
            child = {} if isinstance(nxt, str) else []
            _put(node, segment, child)
        node = child
    _put(node, path[-1], value)


def _child(node: Any, segment: str | int) -> Any:
    if isinstance(node, dict):
        return node.get(segment)
    if isinstance(node, list) and isinstance(segment, int) and segment < len(node):
        return node[segment]
    return None


class _IndexGap(Exception):
    """A path indexed an array past its next item (filling the gap could take any memory)."""

    def __init__(self, index: int, length: int) -> None:
        super().__init__(index, length)
        self.index = index
        self.length = length


def _put(node: Any, segment: str | int, value: Any) -> None:
    if isinstance(node, dict):
        node[segment] = value
    elif isinstance(node, list) and isinstance(segment, int):
        if segment > len(node):
            raise _IndexGap(segment, len(node))
        if segment == len(node):
            node.append(value)
        else:
            node[segment] = value


def _join_strings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _join_strings(v) for k, v in value.items()}
    if isinstance(value, _Chunks):
        return "".join(value.pieces)
    if isinstance(value, list):
        return [_join_strings(v) for v in value]
    return value


@dataclass(slots=True)
class _Chunks:
    """A streamed string's pieces inside the rebuilt argument tree.

    A holder rather than a `list` subclass: mypyc compiles no subclass of a builtin, and the
    tree's own lists must not be mistaken for a string's pieces.
    """

    pieces: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _StreamedCall:
    key: int
    call_id: str | None
    name: str | None
    metadata: dict[str, Any]
    writer: _ArgsWriter = field(default_factory=_ArgsWriter)


def _writer_state(writer: _ArgsWriter) -> GeminiArgsState:
    return GeminiArgsState(
        started=writer.started,
        broken=writer.broken,
        stack=[
            GeminiArgsFrame(kind="object" if kind == "object" else "array", used=sorted(used))
            for kind, used in writer._stack
        ],
        path=list(writer._path),
        open_string=None if writer._open_string is None else list(writer._open_string),
        values=_join_strings(writer.values),
        strings=[list(path) for path in writer._strings],
    )


def _writer_from(state: GeminiArgsState) -> _ArgsWriter:
    writer = _ArgsWriter()
    writer.started = state.started
    writer.broken = state.broken
    writer._stack = [(frame.kind, set(frame.used)) for frame in state.stack]
    writer._path = list(state.path)
    writer._open_string = None if state.open_string is None else tuple(state.open_string)
    writer.values = json.loads(json.dumps(state.values))  # its own copy, to grow
    for n, path in enumerate(state.strings):
        node: Any = writer.values
        for segment in path[:-1]:
            node = _child(node, segment)
        text = _child(node, path[-1]) if path else None
        if not isinstance(text, str):
            raise StateError(f"strings[{n}]", "expected the path of a string in values")
        chunks = writer._strings[tuple(path)] = _Chunks([text])
        _put(node, path[-1], chunks)
    return writer


class GeminiDecoder(Decoder):
    """Gemini / Vertex `streamGenerateContent` chunks into neutral deltas."""

    provider = "gemini"
    state_model = GeminiState

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        self._next_key = 0
        self._growable: _Growable | None = None
        self._last_text: _TextPart | None = None
        self._open_text: dict[int, _TextPart] = {}
        self._call: _StreamedCall | None = None
        self._calls = 0
        self._pending: list[ClosePart] = []
        self._sent_meta: dict[str, Any] = {}
        self._usage_raw: dict[str, Any] | None = None
        # The chosen candidate's finishReason arrived: the end of the input is then the
        # stream's normal end (Gemini sends no end marker of its own).
        self._finish_seen = False

    # --- events ------------------------------------------------------------------------

    def to_state(self) -> GeminiState:
        """This decoder as saved-state data (between chunks: no ends pending)."""
        grow = self._growable
        call = self._call
        last = self._last_text
        return GeminiState(
            other_choices=sorted(self.other_choices),
            next_key=self._next_key,
            growable=None if grow is None else GeminiGrowable(key=grow.key, kind=grow.kind),
            last_text=None if last is None or last.key not in self._open_text else last.key,
            open_text=[part.to_state() for part in self._open_text.values()],
            call=None
            if call is None
            else GeminiCallState(
                key=call.key,
                call_id=call.call_id,
                name=call.name,
                metadata=call.metadata,
                writer=_writer_state(call.writer),
            ),
            calls=self._calls,
            sent_meta=self._sent_meta,
            usage_raw=self._usage_raw,
            finish_seen=self._finish_seen,
        )

    @classmethod
    def from_state(
        cls, state: GeminiState, *, choice: int = 0, strict: bool = False
    ) -> GeminiDecoder:
        """The decoder `state` describes."""
        decoder = cls(choice=choice, strict=strict)
        decoder.other_choices = set(state.other_choices)
        decoder._next_key = state.next_key
        decoder._finish_seen = state.finish_seen
        if state.growable is not None:
            decoder._growable = _Growable(state.growable.key, state.growable.kind)
        for n, saved in enumerate(state.open_text):
            try:
                decoder._open_text[saved.key] = _TextPart.from_state(saved)
            except StateError as exc:
                raise exc.within(f"open_text[{n}]") from None
        if state.last_text is not None:
            decoder._last_text = decoder._open_text.get(state.last_text)
            if decoder._last_text is None:
                raise StateError("last_text", "expected the key of a part in open_text")
        if state.call is not None:
            saved_call = state.call
            try:
                writer = _writer_from(saved_call.writer)
            except StateError as exc:
                raise exc.within("call.writer") from None
            decoder._call = _StreamedCall(
                saved_call.key,
                saved_call.call_id,
                saved_call.name,
                dict(saved_call.metadata),
                writer,
            )
        decoder._calls = state.calls
        decoder._sent_meta = dict(state.sent_meta)
        decoder._usage_raw = None if state.usage_raw is None else dict(state.usage_raw)
        return decoder

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one GenerateContentResponse chunk into neutral deltas."""
        out: list[Delta] = []
        error = payload.get("error")
        if error is not None:
            return [self._error(error, payload)]
        meta: dict[str, Any] = {}
        for wire, name in (("responseId", "id"), ("modelVersion", "model")):
            value = payload.get(wire)
            if value is not None:
                meta[name] = check(self, value, str, wire, payload)
        candidates = payload.get("candidates")
        finish: UpdateMessage | None = None
        if candidates is not None:
            candidate = self._candidate(check(self, candidates, list, "candidates", payload))
            if candidate is not None:
                finish = self._candidate_deltas(candidate, payload, out, meta)
        out.extend(self._pending)
        self._pending = []
        for key in [k for k in self._open_text if k not in self._open_keys()]:
            del self._open_text[key]
        feedback = payload.get("promptFeedback")
        if feedback is not None:
            out.extend(self._prompt_feedback(feedback, payload, meta))
        changed = {k: v for k, v in meta.items() if self._sent_meta.get(k) != v}
        usage = self._usage(payload)
        if changed or usage is not None:
            self._sent_meta.update(changed)
            out.append(UpdateMessage(usage=usage, metadata=changed or None))
        if finish is not None:
            out.append(finish)
        if not out and payload.keys().isdisjoint(_CHUNK_FIELDS):
            # Not a GenerateContentResponse at all (another provider's event, say): counted
            # as skipped, as other decoders count an event type they do not know.
            return [SkipEvent("unknown")]
        return out

    def close(self) -> list[Delta]:
        """The stream ended: open parts are closed by the accumulator (ends inferred).

        After a finishReason, this is the stream's normal end: its end marker."""
        return [EndMessage()] if self._finish_seen else []

    # --- candidates --------------------------------------------------------------------

    def _candidate(self, candidates: list[Any]) -> dict[str, Any] | None:
        for position, candidate in enumerate(candidates):
            cand = check(self, candidate, dict, f"candidates[{position}]", candidates)
            index = cand.get("index", 0)
            if check(self, index, int, "candidate.index", cand) == self.choice:
                return cand
            self.note_other_choice(index)
        return None

    def _candidate_deltas(
        self, cand: dict[str, Any], payload: dict[str, Any], out: list[Delta], meta: dict[str, Any]
    ) -> UpdateMessage | None:
        content = cand.get("content")
        if content is not None:
            content = check(self, content, dict, "candidate.content", payload)
            parts = content.get("parts")
            if parts is not None:
                for part in check(self, parts, list, "candidate.content.parts", payload):
                    self._part(check(self, part, dict, "content.parts[]", payload), out)
        grounding = cand.get("groundingMetadata")
        if grounding is not None:
            grounding = check(self, grounding, dict, "groundingMetadata", payload)
            if grounding:
                meta["grounding_metadata"] = grounding
                self._citations(grounding, out)
        for wire, name in (
            ("urlContextMetadata", "url_context_metadata"),
            ("citationMetadata", "citation_metadata"),
        ):
            value = cand.get(wire)
            if value is not None and check(self, value, dict, wire, payload):
                meta[name] = value
        message = cand.get("finishMessage")
        if message is not None:
            meta["finish_message"] = check(self, message, str, "finishMessage", payload)
        reason = cand.get("finishReason")
        if reason is None:
            return None
        finish = self._finish(check(self, reason, str, "finishReason", payload))
        self._finish_seen = True
        return finish

    def _finish(self, reason: str) -> UpdateMessage:
        stop: StopReason
        status: Status
        if reason in _FILTERED:
            stop, status = "content_filter", "content_filtered"
        else:
            stop, status = _STOP.get(reason, ("other", "complete"))
        # STOP after a functionCall: the accumulator settles it to tool_use, as for every
        # provider (message.settled_stop_reason).
        return UpdateMessage(status=status, stop_reason=stop, raw_stop_reason=reason)

    # --- parts -------------------------------------------------------------------------

    def _part(self, part: dict[str, Any], out: list[Delta]) -> None:
        signature = part.get("thoughtSignature")
        if signature is not None:
            signature = _standard_b64(check(self, signature, str, "thoughtSignature", part))
        thought = part.get("thought")
        if thought is not None:
            check(self, thought, bool, "part.thought", part)
        if "text" in part:
            text = check(self, part["text"], str, "part.text", part)
            self._text(text, "thinking" if thought else "text", signature, out)
        elif "functionCall" in part:
            call = check(self, part["functionCall"], dict, "part.functionCall", part)
            self._function_call(call, signature, part, out)
        elif "inlineData" in part:
            self._inline_data(part, signature, out)
        else:
            kinds = [k for k in part if k not in _PART_META]
            if kinds:
                self._opaque(kinds[0], part, signature, out)
            elif signature is not None:
                # A part with nothing but a signature: keep it, as a signed empty part.
                self._text("", "thinking" if thought else "text", signature, out)

    def _text(
        self,
        text: str,
        kind: Literal["text", "thinking"],
        signature: str | None,
        out: list[Delta],
    ) -> None:
        grow = self._growable
        if signature is None:
            if not text:
                return  # an empty unsigned part carries nothing
            if grow is not None and grow.kind == kind:
                out.append(GrowPart(grow.key, content=text))
                self._track_text(grow.key, kind, text)
                return
        # A new part: the first of its kind here, or a signed one (never merged into an
        # earlier part).
        self._end_growable()
        self._end_call(out)
        key = self._new_key()
        options = {} if signature is None else {"signature": signature}
        out.append(OpenPart(key, ContentPart(type=kind, content=text, options=options)))
        if text:
            self._growable = _Growable(key, kind)
            if kind == "text":
                self._open_text[key] = self._last_text = _TextPart(key, [])
            self._track_text(key, kind, text)
        else:
            # A signed empty part (Gemini 3 ends a streamed turn with one): nothing may
            # join it, or the signature would move.
            self._pending.append(ClosePart(key, explicit=False))

    def _track_text(self, key: int, kind: str, text: str) -> None:
        if kind == "text":
            state = self._open_text.get(key)
            if state is not None:
                state.add(text)

    def _function_call(
        self,
        call: dict[str, Any],
        signature: str | None,
        part: dict[str, Any],
        out: list[Delta],
    ) -> None:
        name = call.get("name")
        if name is not None:
            check(self, name, str, "functionCall.name", part)
        call_id = call.get("id")
        if call_id is not None:
            check(self, call_id, str, "functionCall.id", part)
        more = call.get("willContinue")
        if more is not None:
            check(self, more, bool, "functionCall.willContinue", part)
        partial = call.get("partialArgs")
        if partial is not None:
            check(self, partial, list, "functionCall.partialArgs", part)
        args = call.get("args")
        if args is not None:
            check(self, args, dict, "functionCall.args", part)
        streamed = self._call
        if streamed is None and name is None and call_id is None and signature is None:
            if not args and not partial:
                # The end marker ({}) of a call that is not streaming (a repeated end):
                # nothing to end, and no call to open.
                out.extend(
                    self.repair(
                        "end_for_unknown_call",
                        "expected a functionCall with a name, args or partialArgs, or a "
                        f"streaming call to end, got {describe(call)}",
                        part,
                    )
                )
                return
            if partial:
                # Arguments for a call whose start (its name) never came: a nameless call.
                out.extend(
                    self.repair(
                        "delta_before_call_start",
                        "expected a functionCall naming its function before its partialArgs, "
                        "got partialArgs with no call streaming",
                        part,
                    )
                )
        if (
            streamed is not None
            and name == streamed.name
            and call_id is None
            and more
            and not partial
            and not args
            and not streamed.writer.values
            and not streamed.writer.broken
            and signature in (None, streamed.metadata.get("thought_signature"))
        ):
            # The same start again before any argument: a repeated event, not a new call.
            out.extend(
                self.repair(
                    "duplicate_call_start",
                    f"expected arguments for the streaming call to {name!r}, got its start again",
                    part,
                )
            )
            return
        if streamed is not None and (
            (name is not None and (name != streamed.name or not partial))
            or (call_id is not None and call_id != streamed.call_id)
        ):
            # A call that names itself anew starts a new call.
            self._end_call(out)
            streamed = None
        if streamed is None:
            self._end_growable()
            key = self._new_key()
            metadata: dict[str, Any] = {}
            if signature is not None:
                metadata["thought_signature"] = signature
            if call_id is None:
                metadata["generated_id"] = True
                call_id = f"{name}_{self._calls}"
            self._calls += 1
            out.append(
                OpenPart(key, ToolCall(call_id=call_id, name=name, arguments="", metadata=metadata))
            )
            if not more:
                if args:
                    out.append(GrowPart(key, content=json.dumps(args, ensure_ascii=False)))
                self._pending.append(ClosePart(key, explicit=True))
                return
            streamed = self._call = _StreamedCall(key, call_id, name, metadata)
        elif signature is not None:
            streamed.metadata["thought_signature"] = signature
            out.append(GrowPart(streamed.key, options={"thought_signature": signature}))
        writer = streamed.writer
        for item in partial or ():
            text = self._partial_arg(writer, check(self, item, dict, "partialArgs[]", part))
            if text:
                out.append(GrowPart(streamed.key, content=text))
        if args:
            for arg_name, value in args.items():
                writer.add([arg_name], value, False, False)
            writer.broken = True
        if not more:
            self._end_call(out, explicit=True)

    def _partial_arg(self, writer: _ArgsWriter, item: dict[str, Any]) -> str:
        path_text = check(self, item.get("jsonPath"), str, "partialArgs[].jsonPath", item)
        path = _json_path(path_text)
        if path is None:
            raise self.protocol_error(
                f"expected partialArgs[].jsonPath to be a JSON path like $.a.b[0], "
                f"got {describe(path_text)}",
                item,
            )
        if len(path) > _MAX_PATH_DEPTH:
            # Deeper than any JSON parser here reads back (and the rebuild would recurse).
            raise self.protocol_error(
                f"expected partialArgs[].jsonPath at most {_MAX_PATH_DEPTH} deep, "
                f"got {len(path)} segments",
                item,
            )
        more = item.get("willContinue")
        if more is not None:
            check(self, more, bool, "partialArgs[].willContinue", item)
        value: Any
        if "stringValue" in item:
            value = check(self, item["stringValue"], str, "partialArgs[].stringValue", item)
            is_string = True
        elif "numberValue" in item:
            value = item["numberValue"]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self.protocol_error(
                    f"expected partialArgs[].numberValue to be a number, got {describe(value)}",
                    item,
                )
            is_string, more = False, False
        elif "boolValue" in item:
            value = check(self, item["boolValue"], bool, "partialArgs[].boolValue", item)
            is_string, more = False, False
        elif "nullValue" in item:
            value, is_string, more = None, False, False
        else:
            return ""  # a path with no value yet
        try:
            return writer.add(path, value, is_string, bool(more))
        except _IndexGap as gap:
            raise self.protocol_error(
                f"expected partialArgs[].jsonPath {path_text!r} to index an array item "
                f"at most {gap.length} (the next one), got {gap.index}",
                item,
            ) from None

    def _end_call(self, out: list[Delta], *, explicit: bool = False) -> None:
        streamed = self._call
        if streamed is None:
            return
        self._call = None
        writer = streamed.writer
        if writer.broken:
            final = ToolCall(
                call_id=streamed.call_id,
                name=streamed.name,
                arguments=writer.arguments(),
                status="complete",
                metadata=streamed.metadata,
            )
            self._pending.append(ClosePart(streamed.key, explicit=explicit, final=final))
            return
        tail = writer.finish()
        if tail:
            out.append(GrowPart(streamed.key, content=tail))
        self._pending.append(ClosePart(streamed.key, explicit=explicit))

    def _inline_data(self, part: dict[str, Any], signature: str | None, out: list[Delta]) -> None:
        blob = check(self, part["inlineData"], dict, "part.inlineData", part)
        data = check(self, blob.get("data", ""), str, "inlineData.data", part)
        mime = blob.get("mimeType")
        options: dict[str, Any] = {}
        if mime is not None:
            options["media"] = check(self, mime, str, "inlineData.mimeType", part)
        if signature is not None:
            options["signature"] = signature
        kind: Literal["image", "file"] = (
            "image" if isinstance(mime, str) and mime.startswith("image/") else "file"
        )
        self._whole(ContentPart(type=kind, content=_standard_b64(data), options=options), out)

    def _opaque(
        self, kind: str, part: dict[str, Any], signature: str | None, out: list[Delta]
    ) -> None:
        block = dict(part)
        if signature is not None:
            block["thoughtSignature"] = signature
        options: dict[str, Any] = {"type": kind, "block": block}
        body = part.get(kind)
        if isinstance(body, dict) and isinstance(body.get("id"), str):
            options["id"] = body["id"]
        opaque = ContentPart(type="unsupported", content=None, options=options)
        self._whole(opaque, out, tool=kind in _TOOL_KINDS)

    def _whole(self, content: ContentPart, out: list[Delta], *, tool: bool = False) -> None:
        self._end_growable()
        self._end_call(out)
        key = self._new_key()
        out.append(OpenPart(key, content, tool))
        self._pending.append(ClosePart(key, explicit=True))

    def _end_growable(self) -> None:
        grow = self._growable
        if grow is not None:
            self._growable = None
            self._pending.append(ClosePart(grow.key, explicit=False))

    def _new_key(self) -> int:
        key = self._next_key
        self._next_key += 1
        return key

    def _open_keys(self) -> set[Hashable]:
        keys: set[Hashable] = set()
        if self._growable is not None:
            keys.add(self._growable.key)
        return keys

    # --- grounding ---------------------------------------------------------------------

    def _citations(self, grounding: dict[str, Any], out: list[Delta]) -> None:
        supports = grounding.get("groundingSupports")
        target = self._last_text
        if supports is None or target is None or target.key not in self._open_text:
            return
        supports = check(self, supports, list, "groundingSupports", grounding)
        sources = grounding.get("groundingChunks") or []
        check(self, sources, list, "groundingChunks", grounding)
        citations: list[Citation] = []
        for support in supports:
            support = check(self, support, dict, "groundingSupports[]", grounding)
            segment = check(self, support.get("segment", {}), dict, "segment", support)
            start = check(self, segment.get("startIndex", 0), int, "segment.startIndex", support)
            end = check(self, segment.get("endIndex", 0), int, "segment.endIndex", support)
            cited = segment.get("text")
            if cited is not None:
                check(self, cited, str, "segment.text", support)
            indices = support.get("groundingChunkIndices") or []
            check(self, indices, list, "groundingChunkIndices", support)
            scores = support.get("confidenceScores") or []
            check(self, scores, list, "confidenceScores", support)
            in_range = 0 <= start <= end <= target.size
            char_start = target.chars(start) if in_range else None
            char_end = target.chars(end) if in_range else None
            for n, index in enumerate(indices):
                check(self, index, int, "groundingChunkIndices[]", support)
                mark = (start, end, index, segment.get("partIndex"))
                if mark in target.cited:
                    continue  # a repeated grounding report
                target.cited.add(mark)
                score = scores[n] if n < len(scores) else None
                metadata: dict[str, Any] = {"start_byte": start, "end_byte": end}
                metadata["chunk_index"] = index
                if "partIndex" in segment:
                    metadata["part_index"] = segment["partIndex"]
                source = None
                if 0 <= index < len(sources):
                    chunk = check(self, sources[index], dict, "groundingChunks[]", grounding)
                    source = _source(chunk)
                citations.append(
                    Citation(
                        cited_text=cited,
                        source=source,
                        start_index=char_start,
                        end_index=char_end,
                        confidence=score if isinstance(score, int | float) else None,
                        metadata=metadata,
                    )
                )
        if citations:
            out.append(GrowPart(target.key, citations=tuple(citations)))

    # --- message level -----------------------------------------------------------------

    def _usage(self, payload: dict[str, Any]) -> Usage | None:
        raw = payload.get("usageMetadata")
        if raw is None:
            return None
        raw = check(self, raw, dict, "usageMetadata", payload)
        if not any(k.endswith("TokenCount") for k in raw) or raw == self._usage_raw:
            # Vertex sends {"trafficType": ...} alone while a call streams: no counts.
            return None
        self._usage_raw = raw
        counts: dict[str, int] = {}
        for key in (
            "promptTokenCount",
            "candidatesTokenCount",
            "cachedContentTokenCount",
            "thoughtsTokenCount",
            "toolUsePromptTokenCount",
        ):
            value = raw.get(key, 0)  # proto3 JSON leaves out zeros
            counts[key] = check(self, value, int, f"usageMetadata.{key}", payload)
        thoughts = counts["thoughtsTokenCount"]
        return Usage(
            input_tokens=counts["promptTokenCount"] + counts["toolUsePromptTokenCount"],
            output_tokens=counts["candidatesTokenCount"] + thoughts,
            cache_read_tokens=counts["cachedContentTokenCount"] or None,
            reasoning_tokens=thoughts or None,
            raw=raw,
            cumulative=True,
        )

    def _prompt_feedback(
        self, feedback: Any, payload: dict[str, Any], meta: dict[str, Any]
    ) -> list[Delta]:
        feedback = check(self, feedback, dict, "promptFeedback", payload)
        meta["prompt_feedback"] = feedback
        reason = feedback.get("blockReason")
        if reason is None:
            return []
        reason = check(self, reason, str, "promptFeedback.blockReason", payload)
        return [
            UpdateMessage(
                status="content_filtered", stop_reason="content_filter", raw_stop_reason=reason
            )
        ]

    def _error(self, error: Any, payload: dict[str, Any]) -> ReportError:
        if not isinstance(error, dict):
            return ReportError(None, str(error), payload)
        status = error.get("status")
        code = error.get("code")
        kind = status if isinstance(status, str) else None if code is None else str(code)
        message = error.get("message")
        return ReportError(kind, message if isinstance(message, str) else str(error), payload)


# --- helpers -----------------------------------------------------------------------------


def _source(chunk: dict[str, Any]) -> CitationSource | None:
    web = chunk.get("web")
    if isinstance(web, dict):
        return CitationSource(
            type="web",
            url=text_or_none(web.get("uri")),
            title=text_or_none(web.get("title")),
            metadata={k: v for k, v in web.items() if k not in ("uri", "title")},
        )
    context = chunk.get("retrievedContext")
    if isinstance(context, dict):
        document = text_or_none(context.get("documentName")) or text_or_none(
            context.get("fileSearchStore")
        )
        return CitationSource(
            type="document",
            url=text_or_none(context.get("uri")),
            title=text_or_none(context.get("title")),
            document_id=document,
            metadata={k: v for k, v in context.items() if k not in ("uri", "title")},
        )
    maps = chunk.get("maps")
    if isinstance(maps, dict):
        return CitationSource(
            type="place",
            url=text_or_none(maps.get("uri")),
            title=text_or_none(maps.get("title")),
            document_id=text_or_none(maps.get("placeId")),
            metadata={k: v for k, v in maps.items() if k not in ("uri", "title")},
        )
    return None


def _json_path(text: str) -> list[str | int] | None:
    """Parse the JSON paths Vertex uses ($.a.b[0], $['a b']) into keys and indexes."""
    if not text.startswith("$"):
        return None
    path: list[str | int] = []
    i, n = 1, len(text)
    while i < n:
        if text[i] == ".":
            j = i + 1
            while j < n and text[j] not in ".[":
                j += 1
            if j == i + 1:
                return None
            path.append(text[i + 1 : j])
            i = j
        elif text.startswith("['", i) or text.startswith('["', i):
            quote = text[i + 1]
            j = text.find(quote + "]", i + 2)
            if j < 0:
                return None
            path.append(text[i + 2 : j])
            i = j + 2
        elif text[i] == "[":
            j = text.find("]", i)
            if j < 0 or not text[i + 1 : j].isdigit():
                return None
            path.append(int(text[i + 1 : j]))
            i = j + 1
        else:
            return None
    return path or None
