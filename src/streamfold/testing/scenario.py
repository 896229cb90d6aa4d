"""Scenarios: the conversation an app under test holds with a model, turn by turn.

A scenario is a list of turns. Each turn says which request it answers (`Match`: the
API, the model, the request's index, the last user message, the tool results it carries,
the tools it offers) and what it answers with (a recording, or a `Message` streamed as
the API's own wire bytes), plus the faults to play (`Faults`). The first turn, in order,
that matches a request and has answers left answers it; a request no turn matches is a
miss (`NoTurnMatched`), which names the request and the nearest turns with why each did
not match.

A scenario file is TOML (or JSON, the same shape), written by hand:

    # weather.toml
    [[turns]]
    match = { api = "chat", user = "weather in Paris" }
    recording = "recordings/chat-tool-call.sse"      # relative to this file

    [[turns]]
    match = { tool_result = "get_weather" }          # the follow-up carrying the result
    message = { text = "It is sunny in Paris." }     # streamed as the API's own bytes

    [[turns]]
    match = { user = "again" }
    times = 1
    faults = { status = 429, retry_after = 0 }       # the SDK retries ...
    [[turns]]
    match = { user = "again" }
    recording = "recordings/chat-text.sse"           # ... and reads this

Load it with `Scenario.load(path)`, or build the same in Python:
`Scenario([Turn(match=Match(user="weather"), recording="chat-tool-call.sse")], root=...)`.
"""

from __future__ import annotations

import json
import re
import threading
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import StreamfoldError, UsageError, preview
from ..message import Message, StopReason, ToolCall
from ..web.replay_api import Api

# The APIs a replay answers: OpenAI Chat Completions and Responses, Anthropic Messages,
# Gemini generateContent, Bedrock InvokeModel (Claude) and Converse (serve's own names).

API_NAMES: tuple[Api, ...] = ("chat", "responses", "messages", "gemini", "invoke", "converse")

_PREVIEW = 80  # characters of a prompt quoted in a miss's message


class ScenarioError(UsageError):
    """A scenario file or turn that cannot be used: its path and what is wrong."""

    def __init__(self, message: str, problems: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems)
        """(field path, what is wrong) pairs, when a model refused a value."""


class NoTurnMatched(StreamfoldError):
    """A request no turn of the scenario answers: the request and the nearest turns, each
    with why it did not match."""

    def __init__(self, request: ApiRequest, reasons: Sequence[tuple[str, list[str]]]) -> None:
        self.request = request
        self.reasons = list(reasons)
        lines = [f"no turn of the scenario answers {request.describe()}"]
        if not self.reasons:
            lines.append("  (the scenario has no turn left to answer it)")
        for label, why in self.reasons:
            lines.append(f"  {label}: " + "; ".join(why))
        super().__init__("\n".join(lines))


# --- the request, as a turn reads it -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolResultRef:
    """A tool result a request carries: the call it answers (id, and the tool's name when
    the request names it or an earlier call in it does)."""

    call_id: str | None
    name: str | None


@dataclass(frozen=True, slots=True)
class ApiRequest:
    """An API request as a scenario matches it (see `streamfold.testing.read_request`)."""

    api: Api
    model: str | None
    stream: bool
    last_user: str | None
    """The text of the last user message (its text parts joined), None if it has none."""
    tool_results: tuple[ToolResultRef, ...]
    """The tool results sent after the last assistant turn: what this request answers."""
    tools: tuple[str, ...]
    """The names of the tools offered."""
    body: Mapping[str, Any] = field(repr=False)
    index: int = 0
    """Which request of the scenario's run this is (0 for the first)."""

    def describe(self) -> str:
        """The request in a line: API, model, index, last user message preview."""
        parts = [f"request #{self.index} to {self.api!r}"]
        if self.model:
            parts.append(f"model {self.model!r}")
        parts.append(f"last user message {preview(self.last_user, _PREVIEW)}")
        if self.tool_results:
            names = [r.name or r.call_id or "?" for r in self.tool_results]
            parts.append(f"tool results for {', '.join(names)}")
        if self.tools:
            parts.append(f"tools {', '.join(self.tools)}")
        return ", ".join(parts)


# --- the file's models ---------------------------------------------------------------


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    """A validation error's problems, each at its full path in the file (turns.1.match.api).

    A nested model's own error arrives whole at its field: its paths go under the field's.
    """
    problems: list[tuple[str, str]] = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"])
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, ScenarioError) and original.problems:
            problems.extend(
                (".".join(part for part in (loc, path) if part), text)
                for path, text in original.problems
            )
            continue
        message = str(original) if isinstance(original, Exception) else err["msg"]
        problems.append((loc, f"{message}, got {preview(err.get('input'), _PREVIEW)}"))
    return problems


def _invalid(name: str, exc: ValidationError) -> ScenarioError:
    problems = _problems(exc)
    text = "; ".join(f"{path or '(value)'}: {what}" for path, what in problems)
    return ScenarioError(f"invalid {name}: {text}", problems)


class _Closed(BaseModel):
    """A frozen model that refuses unknown fields, its errors ScenarioErrors with paths."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _invalid(type(self).__name__, exc) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """Validate `obj` into this model (ScenarioError naming each field's path)."""
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _invalid(cls.__name__, exc) from None


class Match(_Closed):
    """Which requests a turn answers; every field given must hold (none given: any).

    `user` is a substring of the last user message, `user_regex` a regular expression
    searched in it. `tool_result`: True (the request carries a tool result), False (it
    does not), or a string: it carries the result of that call id or tool name. `tools`:
    the tool names the request must offer (others may be offered too). `index`: the
    request's index in the scenario's run (0 for the first request).
    """

    api: Api | None = None
    model: str | None = None
    index: int | None = Field(default=None, ge=0)
    user: str | None = None
    user_regex: str | None = None
    tool_result: bool | str | None = None
    tools: list[str] | None = None

    @field_validator("user_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"expected a regular expression ({exc})") from None
        return value

    def misses(self, request: ApiRequest) -> list[str]:
        """Why `request` does not match (empty: it matches)."""
        why: list[str] = []
        if self.api is not None and request.api != self.api:
            why.append(f"api: expected {self.api!r}, got {request.api!r}")
        if self.model is not None and request.model != self.model:
            why.append(f"model: expected {self.model!r}, got {request.model!r}")
        if self.index is not None and request.index != self.index:
            why.append(f"index: expected {self.index}, got {request.index}")
        last = request.last_user or ""
        if self.user is not None and self.user not in last:
            why.append(f"user: expected text holding {self.user!r}, got {preview(last, _PREVIEW)}")
        if self.user_regex is not None and re.search(self.user_regex, last) is None:
            why.append(
                f"user_regex: expected a match of {self.user_regex!r}, "
                f"got {preview(last, _PREVIEW)}"
            )
        if self.tool_result is not None:
            got = [r.name or r.call_id or "?" for r in request.tool_results]
            shown = ", ".join(got) if got else "none"
            if self.tool_result is True and not request.tool_results:
                why.append("tool_result: expected a tool result, got none")
            elif self.tool_result is False and request.tool_results:
                why.append(f"tool_result: expected none, got results for {shown}")
            elif isinstance(self.tool_result, str) and not any(
                self.tool_result in (r.name, r.call_id) for r in request.tool_results
            ):
                why.append(f"tool_result: expected a result for {self.tool_result!r}, got {shown}")
        if self.tools is not None:
            absent = [name for name in self.tools if name not in request.tools]
            if absent:
                offered = ", ".join(request.tools) or "none"
                why.append(f"tools: expected {', '.join(absent)} offered, got {offered}")
        return why


class Faults(_Closed):
    """What goes wrong when a turn answers (on a turn, on a transport, in `serve`).

    status: an HTTP error before any stream (429, 500, 529, ...), in the API's own error
      body, with `retry_after` seconds in a `retry-after` header when given: the SDK's own
      retry logic runs. `error_message` is the error body's message.
    cut_after_events / cut_after_bytes: the stream stops after that many events (or bytes);
      `cut` says how: "drop" (the connection breaks: the HTTP client raises) or "end" (the
      body ends cleanly, short: the fold reads an incomplete message).
    error_frame: the provider's own mid-stream error event, sent where the stream is cut
      (with `cut_after_events`), then the stream ends: its kind, as
      `streamfold.testing.faults.ERROR_FORMS` names them ("overloaded_error" for Anthropic,
      "error" or "response.failed" for Responses, "UNAVAILABLE" for Gemini, ...; "" for
      the provider's first), with `error_message` as its text.
    stall: seconds of silence after `stall_after_events` events.
    ttft: seconds before the first byte; tokens_per_second: one event a token, evenly
      spaced (both replace the recording's own timing, which is used otherwise).

    A non-streaming answer (one JSON body) waits `ttft` + `stall` seconds, and
    `cut_after_bytes` cuts its body; the event faults are a stream's alone.
    """

    status: int | None = Field(default=None, ge=400, le=599)
    retry_after: float | None = Field(default=None, ge=0)
    error_message: str | None = None
    cut_after_events: int | None = Field(default=None, ge=0)
    cut_after_bytes: int | None = Field(default=None, ge=0)
    cut: Literal["drop", "end"] = "drop"
    error_frame: str | None = None
    stall: float | None = Field(default=None, ge=0)
    stall_after_events: int = Field(default=0, ge=0)
    ttft: float | None = Field(default=None, ge=0)
    tokens_per_second: float | None = Field(default=None, gt=0)

    def over(self, base: Faults | None) -> Faults:
        """These faults with `base`'s filling the fields these leave unset."""
        if base is None:
            return self
        return Faults.model_validate({**base.model_dump(exclude_unset=True),
                                      **self.model_dump(exclude_unset=True)})  # fmt: skip

    @classmethod
    def parse(cls, spec: str) -> Faults:
        """Faults from `name=value` pairs separated by commas or semicolons (a header's or
        query parameter's value): `status=429,retry_after=1`, `cut_after_events=3`."""
        fields: dict[str, Any] = {}
        for piece in re.split(r"[,;&]", spec):
            piece = piece.strip()
            if not piece:
                continue
            name, sep, raw = piece.partition("=")
            name, raw = name.strip(), raw.strip()
            if not sep or name not in cls.model_fields:
                known = ", ".join(cls.model_fields)
                raise ScenarioError(
                    f"faults: expected name=value pairs with a name among {known}, "
                    f"got {preview(piece, _PREVIEW)}"
                )
            fields[name] = _scalar(raw)
        try:
            return cls.model_validate(fields)
        except ScenarioError as exc:
            raise ScenarioError(f"faults {preview(spec, _PREVIEW)}: {exc}") from None


def _scalar(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


class ToolCallAnswer(_Closed):
    """A tool call a scenario's message makes: the tool, its arguments, its call id."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class MessageAnswer(_Closed):
    """A message written in a scenario: text and tool calls (shorthand), or a whole
    `Message` (its JSON) in `message`."""

    text: str | None = None
    tool_calls: list[ToolCallAnswer] = Field(default_factory=list)
    stop_reason: StopReason | None = None

    def to_message(self) -> Message:
        """The Message this answer streams."""
        calls = [
            ToolCall(
                call_id=call.id or f"call_{n}",
                name=call.name,
                arguments=call.arguments,
                index=n + (1 if self.text else 0),  # after the text, as models write
                status="complete",
            )
            for n, call in enumerate(self.tool_calls)
        ]
        message = Message.assistant(self.text or "", tool_calls=calls)
        stop = self.stop_reason or ("tool_use" if calls else "stop")
        return Message.model_validate({**message.model_dump(), "stop_reason": stop})


class Turn(_Closed):
    """One answer of a scenario: what it matches, what it answers with, its faults.

    Exactly one of `recording` (a recorded stream's path, relative to the scenario's
    file) and `message` (a `MessageAnswer` or a `Message`) is given, unless `faults.status`
    answers with an error alone. `times`: how many requests the turn answers (None: any
    number).
    """

    name: str | None = None
    match: Match = Field(default_factory=Match)
    recording: str | None = None
    message: MessageAnswer | Message | None = None
    faults: Faults | None = None
    times: int | None = Field(default=None, ge=1)

    @field_validator("message", mode="before")
    @classmethod
    def _message_shape(cls, value: Any) -> Any:
        # A dict with a `role` is a whole Message; anything else the shorthand.
        if isinstance(value, dict) and "role" in value:
            return Message.model_validate(value)
        return value

    @model_validator(mode="after")
    def _one_answer(self) -> Turn:
        answers = (self.recording is not None) + (self.message is not None)
        if answers > 1:
            raise ValueError("expected one of recording and message, got both")
        if answers == 0 and (self.faults is None or self.faults.status is None):
            raise ValueError("expected a recording, a message or faults.status, got none")
        return self

    def answer_message(self) -> Message | None:
        """The Message this turn answers with, if it answers with one."""
        if isinstance(self.message, MessageAnswer):
            return self.message.to_message()
        return self.message


class _File(_Closed):
    turns: list[Turn]


# --- the scenario --------------------------------------------------------------------


class Scenario:
    """Turns that answer an app's requests, in order; thread-safe (a transport shared by
    threads, or `serve`'s workers, draws from one scenario)."""

    def __init__(
        self,
        turns: Iterable[Turn],
        *,
        root: str | Path | None = None,
        name: str = "scenario",
        path: str | Path | None = None,
    ) -> None:
        self.turns: list[Turn] = list(turns)
        for n, turn in enumerate(self.turns):
            if not isinstance(turn, Turn):
                raise ScenarioError(f"{name}: turns[{n}]: expected a Turn, got {preview(turn)}")
        self.root = Path(root) if root is not None else Path.cwd()
        self.name = name
        self.path = Path(path) if path is not None else None
        """The file the scenario was loaded from (None: built in Python)."""
        self.used: list[int] = [0] * len(self.turns)
        """How many requests each turn has answered."""
        self.misses: list[NoTurnMatched] = []
        """The requests no turn answered, in order."""
        self.requests = 0
        """How many requests the scenario has seen."""
        self.seen: list[ApiRequest] = []
        """Every request, as a turn reads it (index, last user message, tool results, tools,
        body), answered or not: what a test asserts the app sent."""
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """Read a scenario file (`.toml`, or `.json`); ScenarioError naming the file and the
        field if it is not one."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ScenarioError(f"{path}: expected a scenario file, got {exc}") from None
        try:
            is_json = path.suffix == ".json"
            data = json.loads(raw) if is_json else tomllib.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            kind = "JSON" if path.suffix == ".json" else "TOML"
            raise ScenarioError(f"{path}: expected {kind}, got {exc}") from None
        scenario = cls.from_dict(data, root=path.parent, name=str(path))
        scenario.path = path
        return scenario

    @classmethod
    def from_dict(
        cls, data: Any, *, root: str | Path | None = None, name: str = "scenario"
    ) -> Scenario:
        """A scenario from the file's shape: `{"turns": [...]}`."""
        try:
            parsed = _File.model_validate(data)
        except ScenarioError as exc:
            text = "; ".join(f"{path or '(file)'}: {what}" for path, what in exc.problems)
            raise ScenarioError(f"{name}: {text or exc}", exc.problems) from None
        return cls(parsed.turns, root=root, name=name)

    def reset(self) -> None:
        """Forget the requests seen: the next one is index 0 and every turn is unused."""
        with self._lock:
            self.used = [0] * len(self.turns)
            self.misses = []
            self.requests = 0
            self.seen = []

    def unused(self) -> list[Turn]:
        """The turns that answered no request."""
        return [turn for turn, n in zip(self.turns, self.used, strict=True) if n == 0]

    def label(self, n: int) -> str:
        """How a miss's message names turn `n`."""
        turn = self.turns[n]
        return f"turn {n}" + (f" ({turn.name!r})" if turn.name else "")

    def choose(self, request: ApiRequest) -> tuple[int, Turn]:
        """The turn that answers `request` (its index counted here); NoTurnMatched if none
        does (kept in `misses` too)."""
        with self._lock:
            request = _with_index(request, self.requests)
            self.requests += 1
            self.seen.append(request)
            reasons: list[tuple[int, list[str]]] = []
            for n, turn in enumerate(self.turns):
                why = turn.match.misses(request)
                if turn.times is not None and self.used[n] >= turn.times:
                    why.append(f"times: answered its {turn.times} request(s) already")
                if not why:
                    self.used[n] += 1
                    return n, turn
                reasons.append((n, why))
            nearest = sorted(reasons, key=lambda item: len(item[1]))[:3]
            miss = NoTurnMatched(request, [(self.label(n), why) for n, why in nearest])
            self.misses.append(miss)
            raise miss

    def recording_path(self, turn: Turn) -> Path:
        """Where a turn's recording is: its path, relative to the scenario's file."""
        assert turn.recording is not None
        return self.root / turn.recording


def _with_index(request: ApiRequest, index: int) -> ApiRequest:
    return ApiRequest(
        api=request.api,
        model=request.model,
        stream=request.stream,
        last_user=request.last_user,
        tool_results=request.tool_results,
        tools=request.tools,
        body=request.body,
        index=index,
    )


__all__ = [
    "API_NAMES",
    "Api",
    "ApiRequest",
    "Faults",
    "Match",
    "MessageAnswer",
    "NoTurnMatched",
    "Scenario",
    "ScenarioError",
    "ToolCallAnswer",
    "ToolResultRef",
    "Turn",
]
