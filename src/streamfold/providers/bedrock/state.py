"""The saved state of the Bedrock ConverseStream decoder (decode.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...state_schema import BoxState, Count, JsonObject, Key

BlockKind = Literal["text", "thinking", "redacted", "tool_call", "server_tool_use", "tool_result"]


class BedrockBlockState(BoxState):
    """A contentBlockIndex as the decoder knows it (see _Block)."""

    kind: BlockKind | None = None
    key: Key
    opened: bool = False
    stopped: bool = False
    start: JsonObject = Field(default_factory=dict)
    chunks: list[str] = Field(default_factory=list)
    results: list[JsonObject] = Field(default_factory=list)
    origin: JsonObject | None = None
    early: list[str] = Field(default_factory=list)
    strays: dict[str, BedrockBlockState] = Field(default_factory=dict)


class BedrockBlockAt(BoxState):
    """A block under its contentBlockIndex."""

    index: int
    block: BedrockBlockState


class BedrockState(BoxState):
    """What a BedrockDecoder needs to resume."""

    blocks: list[BedrockBlockAt] = Field(default_factory=list)
    stopped: bool = False
    metadata_seen: bool = False
    ended: bool = False
    restarts: Count = 0
