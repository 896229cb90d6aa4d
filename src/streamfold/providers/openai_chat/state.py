"""The saved state of the OpenAI Chat Completions decoder (decode.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ...message import Usage
from ...parts import Citation
from ...state_schema import BoxState, Count, JsonObject, Key


class ChatCallState(BoxState):
    """A streamed tool call as the decoder knows it (see _Call)."""

    key: Key
    id: str | None = None
    index: int | None = None
    name: str | None = None
    closed: bool = False
    # A custom (free-text) tool call, and its input text so far.
    custom: bool = False
    input_chunks: list[str] = Field(default_factory=list)


class ChatCallAt(BoxState):
    """A call (its place in `calls`) under a tool-call index (None: fragments without one)."""

    index: int | None
    call: Count


class ChatExecuted(BoxState):
    """A server-executed tool's part, by its index: its key and block."""

    index: int
    key: Key
    block: JsonObject


class OpenAIChatState(BoxState):
    """What an OpenAIChatDecoder needs to resume (its hot lane starts afresh). Calls are
    kept once, in `calls`; the other tables name them by their place there."""

    counter: Count = 0
    open: list[Key] = Field(default_factory=list)
    thinking: Key | None = None
    # (reasoning_details index, kind): a list in JSON.
    thinking_slot: Annotated[tuple[int | None, str], Field(strict=False)] | None = None
    text: Key | None = None
    refusal: Key | None = None
    saw_refusal: bool = False
    calls: list[ChatCallState] = Field(default_factory=list)
    calls_by_id: dict[str, Count] = Field(default_factory=dict)
    latest_at: list[ChatCallAt] = Field(default_factory=list)
    unclosed: list[Count] = Field(default_factory=list)
    executed: list[ChatExecuted] = Field(default_factory=list)
    metadata: JsonObject = Field(default_factory=dict)
    usage: Usage | None = None
    usage_raw: JsonObject | None = None
    cited: list[str] = Field(default_factory=list)
    pending_citations: list[Citation] = Field(default_factory=list)
    metadata_version: Count = 0
    # The other choices the stream held (see Decoder.other_choices): they name the
    # choices there are when `choice` itself never comes.
    other_choices: list[Count] = Field(default_factory=list, max_length=64)
