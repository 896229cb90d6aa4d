"""The saved state of the Ollama decoder (decode.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...state_schema import BoxState, Count

TextKind = Literal["text", "thinking"]


class OllamaOpenPart(BoxState):
    """The open text or thinking part: its kind and its key (kind, n)."""

    kind: TextKind
    key_kind: str
    key_number: int


class OllamaCallSeen(BoxState):
    """A call by the id the server gave it: its name and argument text (to spot repeats)."""

    id: str
    name: str
    arguments: str


class OllamaState(BoxState):
    """What an OllamaDecoder needs to resume."""

    open: OllamaOpenPart | None = None
    parts: Count = 0
    tool_calls: Count = 0
    described: bool = False
    call_ids: list[OllamaCallSeen] = Field(default_factory=list)
