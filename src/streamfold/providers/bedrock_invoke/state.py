"""The saved state of the Bedrock InvokeModelWithResponseStream decoder (decode.py)."""

from __future__ import annotations

from typing import Any, Literal

from ...state_schema import BoxState


class BedrockInvokeState(BoxState):
    """What a BedrockInvokeDecoder needs to resume: the family its chunks carry (none yet
    before the first) and the state of that family's decoder, checked by its own model."""

    family: Literal["anthropic", "bedrock"] | None = None
    inner: dict[str, Any] | None = None
    usage_seen: bool = False
