"""The saved state of the Gemini decoder (decode.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...state_schema import BoxState, Count, Json, JsonObject


class GeminiTextState(BoxState):
    """An open text part's chunks and the grounding reports already turned to citations."""

    key: int
    chunks: list[str] = Field(default_factory=list)
    cited: list[list[Json]] = Field(default_factory=list)


class GeminiArgsFrame(BoxState):
    """An open container of streamed arguments: its kind and the keys (items) it has."""

    kind: Literal["object", "array"]
    used: list[str | int] = Field(default_factory=list)


class GeminiArgsState(BoxState):
    """A streamed call's argument writer (see _ArgsWriter). `values` holds each streamed
    string whole; `strings` names the paths of those that may still grow."""

    started: bool = False
    broken: bool = False
    stack: list[GeminiArgsFrame] = Field(default_factory=list)
    path: list[str | int] = Field(default_factory=list)
    open_string: list[str | int] | None = None
    values: JsonObject = Field(default_factory=dict)
    strings: list[list[str | int]] = Field(default_factory=list)


class GeminiCallState(BoxState):
    """A function call streamed in pieces (Vertex partialArgs)."""

    key: int
    call_id: str | None = None
    name: str | None = None
    metadata: JsonObject = Field(default_factory=dict)
    writer: GeminiArgsState = GeminiArgsState()


class GeminiGrowable(BoxState):
    """The text or thinking part later chunks of the same kind may still grow."""

    key: int
    kind: Literal["text", "thinking"]


class GeminiState(BoxState):
    """What a GeminiDecoder needs to resume."""

    next_key: Count = 0
    growable: GeminiGrowable | None = None
    # The part grounding reports cite: the key of a part in `open_text`, if any.
    last_text: int | None = None
    open_text: list[GeminiTextState] = Field(default_factory=list)
    call: GeminiCallState | None = None
    calls: Count = 0
    sent_meta: JsonObject = Field(default_factory=dict)
    usage_raw: JsonObject | None = None
    # A chunk with a finishReason arrived: the input's end is then the stream's end marker.
    finish_seen: bool = False
    # The other choices the stream held (see Decoder.other_choices): they name the
    # choices there are when `choice` itself never comes.
    other_choices: list[Count] = Field(default_factory=list, max_length=64)
