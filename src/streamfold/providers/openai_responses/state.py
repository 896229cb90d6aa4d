"""The saved state of the OpenAI Responses decoder (decode.py)."""

from __future__ import annotations

from pydantic import Field

from ...state_schema import BoxState, Count, Json, JsonObject, Key, Number


class ResponsesPartState(BoxState):
    """An open part of an item (see _Part)."""

    key: Key
    has_text: bool = False
    ended: bool = False
    annotated: bool = False
    logprobs: list[Json] = Field(default_factory=list)
    logprobs_sent: bool = False


class ResponsesItemState(BoxState):
    """An output item being streamed (see _Item)."""

    id: str
    type: str
    kind: str
    added: JsonObject
    phase: str | None = None
    parts: list[ResponsesPartState] = Field(default_factory=list)
    latest: Key | None = None
    any_part: bool = False
    call_id: str | None = None
    name: str | None = None
    has_arguments: bool = False
    input_chunks: list[str] = Field(default_factory=list)
    input_done: str | None = None
    closed: list[Key] = Field(default_factory=list)


class ResponsesItemAt(BoxState):
    """The item an output_index names (for events that carry no item_id)."""

    index: int
    item: str


class ResponsesEarly(BoxState):
    """Lenient: an event that came before its item, held to replay when it is added."""

    item: str
    kind: str
    payload: JsonObject


class OpenAIResponsesState(BoxState):
    """What an OpenAIResponsesDecoder needs to resume (its hot lane starts afresh)."""

    items: list[ResponsesItemState] = Field(default_factory=list)
    by_index: list[ResponsesItemAt] = Field(default_factory=list)
    tool_calls: Count = 0
    refusals: Count = 0
    done: list[str] = Field(default_factory=list)
    early: list[ResponsesEarly] = Field(default_factory=list)
    seq_floor: Number | None = None
    seq_above: list[Number] = Field(default_factory=list)
