"""Bedrock InvokeModel, written: the request body for Claude, and the response stream as
Bedrock sends it (what the replay server streams)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

from ... import encoding as _enc
from ...errors import UsageError
from ...eventstream import encode_message
from ...message import Message
from ..anthropic.encode import encode_request as anthropic_request
from ..anthropic.encode import replay_problems as anthropic_problems
from .decode import _METRICS

ANTHROPIC_VERSION = "bedrock-2023-05-31"
_CHUNK_HEADERS = {
    ":event-type": "chunk",
    ":content-type": "application/json",
    ":message-type": "event",
}


def replay_problems(history: list[Message]) -> list[_enc.Problem]:
    """What Claude on Bedrock would reject: what the Anthropic API rejects."""
    return anthropic_problems(history)


def encode_request(
    history: list[Message], params: _enc.RequestParams, skip: frozenset[_enc.PartRef]
) -> dict[str, Any]:
    """The InvokeModel body for Claude: the Anthropic Messages body with Bedrock's
    `anthropic_version`, without `model` and `stream` (Bedrock takes them from the URL:
    `modelId`, and which operation is called)."""
    body = anthropic_request(history, params, skip)
    body.pop("model", None)
    body.pop("stream", None)
    return {"anthropic_version": ANTHROPIC_VERSION, **body}


# --- the wire, written: what the replay server streams ----------------------------------


def invoke_stream(events: Iterable[dict[str, Any]]) -> bytes:
    """Claude's Messages events as InvokeModelWithResponseStream sends them: each one a
    `chunk` eventstream message (its JSON in base64), without the `ping`s, and the token
    counts as `amazon-bedrock-invocationMetrics` on `message_stop`."""
    counts = {"inputTokenCount": 0, "outputTokenCount": 0}
    out = bytearray()
    for event in events:
        if not isinstance(event, dict):
            raise UsageError(f"invoke_stream: expected event objects, got {type(event).__name__}")
        kind = event.get("type")
        if kind == "ping":
            continue
        message = event.get("message")
        for usage in (
            message.get("usage") if isinstance(message, dict) else None,
            event.get("usage"),
        ):
            if isinstance(usage, dict):
                for wire, key in (
                    ("input_tokens", "inputTokenCount"),
                    ("output_tokens", "outputTokenCount"),
                ):
                    if isinstance(usage.get(wire), int):
                        counts[key] = usage[wire]
        if kind == "message_stop":
            event = {**event, _METRICS: dict(counts)}
        data = base64.b64encode(json.dumps(event, separators=(",", ":")).encode()).decode()
        out += encode_message(_CHUNK_HEADERS, json.dumps({"bytes": data}).encode())
    return bytes(out)
