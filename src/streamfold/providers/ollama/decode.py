"""Ollama's native streaming: NDJSON lines of /api/chat or /api/generate.

/api/chat puts the text in `message.content`, the reasoning in `message.thinking` and
tool calls (whole, arguments as an object) in `message.tool_calls`; /api/generate puts
the text in `response` and the reasoning in `thinking`. The last line has `done: true`,
the `done_reason`, the token counts and the timings. Ollama never says a part ended: a
part ends when the other kind begins, or when the message does.
"""

from __future__ import annotations

import json
from typing import Any

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
from ...message import Status, StopReason, ToolCall, Usage
from ...parts import ContentPart
from ..base import Decoder
from ..fields import check, describe, optional
from .state import OllamaCallSeen, OllamaOpenPart, OllamaState, TextKind

_DONE_REASONS: dict[str, tuple[StopReason, Status]] = {
    "stop": ("stop", "complete"),
    "length": ("length", "length"),
    "load": ("other", "complete"),
    "unload": ("other", "complete"),
}

_DURATIONS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")
_COUNTS = ("prompt_eval_count", "eval_count")


class OllamaDecoder(Decoder):
    """Decode Ollama /api/chat and /api/generate stream lines into neutral deltas."""

    provider = "ollama"

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        # The open text or thinking part: its kind and key.
        self._open: tuple[TextKind, tuple[str, int]] | None = None
        self._parts = 0
        self._tool_calls = 0
        self._described = False
        # Calls by the id the server gave them (name, argument text), to spot repeats.
        self._call_ids: dict[str, tuple[str, str]] = {}

    state_model = OllamaState

    def to_state(self) -> OllamaState:
        """This decoder as saved-state data."""
        opened = self._open
        return OllamaState(
            open=None
            if opened is None
            else OllamaOpenPart(kind=opened[0], key_kind=opened[1][0], key_number=opened[1][1]),
            parts=self._parts,
            tool_calls=self._tool_calls,
            described=self._described,
            call_ids=[
                OllamaCallSeen(id=call_id, name=name, arguments=text)
                for call_id, (name, text) in self._call_ids.items()
            ],
        )

    @classmethod
    def from_state(
        cls, state: OllamaState, *, choice: int = 0, strict: bool = False
    ) -> OllamaDecoder:
        """The decoder `state` describes."""
        decoder = cls(choice=choice, strict=strict)
        if state.open is not None:
            opened = state.open
            decoder._open = (opened.kind, (opened.key_kind, opened.key_number))
        decoder._parts = state.parts
        decoder._tool_calls = state.tool_calls
        decoder._described = state.described
        decoder._call_ids = {seen.id: (seen.name, seen.arguments) for seen in state.call_ids}
        return decoder

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        """Translate one NDJSON line of /api/chat or /api/generate into neutral deltas."""
        if "error" in payload:
            return [self._error(payload)]
        if "done" not in payload:
            # Every line of an Ollama stream says whether it is the last: one that does not
            # is another provider's event, counted as skipped (its "model" is not taken).
            return [SkipEvent("unknown")]
        out: list[Delta] = []
        if not self._described:
            metadata: dict[str, Any] = {
                k: payload[k] for k in ("model", "created_at") if k in payload
            }
            if metadata:
                self._described = True
                out.append(UpdateMessage(metadata=metadata))
        message = payload.get("message")
        if message is not None:
            message = check(self, message, dict, "message", payload)
            thinking = message.get("thinking")
            content = message.get("content")
            tool_calls = message.get("tool_calls")
            where = "message."
        else:
            thinking = payload.get("thinking")
            content = payload.get("response")
            tool_calls = None
            where = ""
        if thinking is not None:
            thinking = check(self, thinking, str, where + "thinking", payload)
            out.extend(self._grow("thinking", thinking))
        if content is not None:
            content = check(self, content, str, where + "content" if where else "response", payload)
            out.extend(self._grow("text", content))
        if tool_calls is not None:
            calls = check(self, tool_calls, list, "message.tool_calls", payload)
            out.extend(self._calls(calls, payload))
        done = payload.get("done", False)
        if not isinstance(done, bool):
            raise self.protocol_error(
                f"expected done to be true or false, got {describe(done)}", payload
            )
        if done:
            out.extend(self._done(payload))
        return out

    # --- parts -------------------------------------------------------------------------

    def _grow(self, kind: TextKind, text: str) -> list[Delta]:
        if not text:
            # Every line carries `response` / `content`, mostly empty while thinking.
            return []
        out: list[Delta] = []
        if self._open is None or self._open[0] != kind:
            out.extend(self._close_open())
            key = (kind, self._parts)
            self._parts += 1
            self._open = (kind, key)
            out.append(
                OpenPart(
                    key,
                    ContentPart.model_construct(type=kind, content="", options={}, citations=[]),
                )
            )
        out.append(GrowPart(self._open[1], content=text))
        return out

    def _close_open(self) -> list[Delta]:
        if self._open is None:
            return []
        key = self._open[1]
        self._open = None
        # Inferred: the wire never says a part ended, another kind began.
        return [ClosePart(key, explicit=False)]

    def _calls(self, calls: list[Any], payload: dict[str, Any]) -> list[Delta]:
        out: list[Delta] = []
        if calls:
            out.extend(self._close_open())
        for call in calls:
            call = check(self, call, dict, "message.tool_calls[]", payload)
            function = check(
                self, call.get("function"), dict, "message.tool_calls[].function", payload
            )
            name = check(
                self, function.get("name"), str, "message.tool_calls[].function.name", payload
            )
            arguments = function.get("arguments")
            if arguments is None:
                text = ""
            elif isinstance(arguments, dict):
                text = json.dumps(arguments, ensure_ascii=False)
            elif isinstance(arguments, str):
                text = arguments
            else:
                raise self.protocol_error(
                    "expected message.tool_calls[].function.arguments to be an object, got "
                    f"{type(arguments).__name__}",
                    payload,
                )
            metadata: dict[str, Any] = {}
            call_id = call.get("id")
            if isinstance(call_id, str) and call_id in self._call_ids:
                reason = f"expected a new tool call id, got {call_id!r} again"
                if self._call_ids[call_id] == (name, text):
                    # The same call again (a repeated line): said once already.
                    out.extend(self.repair("duplicate_tool_call", reason, payload))
                    continue
                # Another call under a used id: kept, as the call it is.
                out.extend(self.repair("reused_tool_call_id", reason, payload))
            elif isinstance(call_id, str) and call_id:
                self._call_ids[call_id] = (name, text)
            if not isinstance(call_id, str) or not call_id:
                # Ollama's tool calls had no ids until recently: make one that is stable for
                # this message, so a tool result can still name its call.
                call_id = f"call_{self._tool_calls}_{name}"
                metadata["generated_id"] = True
            if isinstance(function.get("index"), int):
                metadata["index"] = function["index"]
            key = ("tool", self._tool_calls)
            self._tool_calls += 1
            out.append(
                OpenPart(
                    key,
                    ToolCall.model_construct(
                        call_id=call_id,
                        name=name,
                        arguments=text,
                        index=None,
                        status="incomplete",
                        metadata=metadata,
                    ),
                )
            )
            # The call arrived whole: its end is on the wire.
            out.append(ClosePart(key, explicit=True))
        return out

    # --- the end -----------------------------------------------------------------------

    def _done(self, payload: dict[str, Any]) -> list[Delta]:
        reason = optional(self, payload, "done_reason", str)
        stop_reason: StopReason
        status: Status
        if reason is None:
            # Older servers send no done_reason on a normal end.
            stop_reason, status = "stop", "complete"
        else:
            stop_reason, status = _DONE_REASONS.get(reason, ("other", "complete"))
        # Ollama says "stop" when the model asked for tools: the accumulator settles it
        # to tool_use, as for every provider (message.settled_stop_reason).
        counts: dict[str, int] = {}
        for key in _COUNTS:
            value = optional(self, payload, key, int)
            if value is not None:
                counts[key] = value
        usage = (
            Usage.model_construct(
                input_tokens=counts.get("prompt_eval_count"),
                output_tokens=counts.get("eval_count"),
                cache_read_tokens=None,
                cache_write_tokens=None,
                reasoning_tokens=None,
                raw=counts,
                cumulative=False,
            )
            if counts
            else None
        )
        metadata = {k: payload[k] for k in _DURATIONS if payload.get(k) is not None}
        return [
            UpdateMessage(
                status=status,
                stop_reason=stop_reason,
                raw_stop_reason=reason,
                usage=usage,
                metadata=metadata or None,
            ),
            EndMessage(),
        ]

    def _error(self, payload: dict[str, Any]) -> ReportError:
        error = payload["error"]
        if isinstance(error, dict):
            message = error.get("message")
            kind = error.get("type")
        else:
            message, kind = error, None
        message = check(self, message, str, "error", payload)
        return ReportError(
            error_type=kind if isinstance(kind, str) else None, message=message, raw=payload
        )
