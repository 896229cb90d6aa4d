"""The saved state of the Anthropic decoder (decode.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...message import Status
from ...state_schema import BoxState, Count, JsonObject, Key

BlockKind = Literal["text", "thinking", "tool_use", "buffered", "compaction", "opaque"]


class AnthropicBlockState(BoxState):
    """A content block as the decoder remembers it (see _Block)."""

    kind: BlockKind
    type: str
    block: JsonObject
    key: Key
    origin: JsonObject | None = None
    open: bool = True
    json_chunks: list[str] | None = None
    got_json: bool = False
    strays: dict[str, AnthropicBlockState] = Field(default_factory=dict)


class AnthropicBlockAt(BoxState):
    """A content block under its index."""

    index: int
    block: AnthropicBlockState


class AnthropicState(BoxState):
    """What an AnthropicDecoder needs to resume (its hot lane starts afresh)."""

    blocks: list[AnthropicBlockAt] = Field(default_factory=list)
    usage_raw: JsonObject = Field(default_factory=dict)
    status: Status | None = None
    ended: bool = False
    started: bool = False
    # Lenient: the content_block_delta events held for a block not started yet, in order.
    early: list[JsonObject] = Field(default_factory=list)
    restarts: Count = 0
