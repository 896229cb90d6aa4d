"""A Message as Bedrock's InvokeModelWithResponseStream sends Claude's answer: the Anthropic
Messages events (see `streamfold.providers.anthropic.stream`, which says what they carry),
each in a `chunk` eventstream message, the token counts as
`amazon-bedrock-invocationMetrics` on the last one. An error ends it with Bedrock's own
exception message (`streamfold.providers.bedrock.stream.error_event`).
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

from ...encoding import origin
from ...eventstream import encode_message
from ..anthropic.stream import stream_events
from ..bedrock.stream import error_event
from ..streaming import StreamWriter
from .decode import _METRICS
from .encode import _CHUNK_HEADERS, invoke_stream


def to_stream_chunks(writer: StreamWriter) -> list[bytes]:
    """The message as InvokeModelWithResponseStream's eventstream: one message a chunk."""
    # Claude's events: a message folded from Claude on Bedrock is Anthropic's own.
    claude = StreamWriter(
        writer.message, writer.provider, writer.model, writer.piece, writer.strict, "anthropic"
    )
    events = stream_events(claude)
    metrics = writer.message.metadata.get("invocation_metrics")
    if (
        origin(writer.message) == "bedrock-invoke"
        and isinstance(metrics, dict)
        and events
        and events[-1]["type"] == "message_stop"
    ):
        # Bedrock's own metrics (latencies too) on the last chunk, as they came.
        chunks = _frames(invoke_stream(events[:-1]))
        chunks.append(_chunk({**events[-1], _METRICS: metrics}))
    else:
        chunks = _frames(invoke_stream(events))
    if writer.message.status == "error":
        kind, text = writer.error("", "the stream failed")
        exception = kind if kind.endswith("Exception") else "modelStreamErrorException"
        chunks.append(error_event(exception, text))
    return chunks


def _frames(data: bytes) -> list[bytes]:
    """Eventstream bytes cut into their messages (each starts with its total length)."""
    frames: list[bytes] = []
    at = 0
    while at < len(data):
        (total,) = struct.unpack_from(">I", data, at)
        frames.append(data[at : at + total])
        at += total
    return frames


def _chunk(event: dict[str, Any]) -> bytes:
    """One Claude event as a `chunk` eventstream message (its JSON in base64)."""
    data = base64.b64encode(json.dumps(event, separators=(",", ":")).encode()).decode()
    return encode_message(_CHUNK_HEADERS, json.dumps({"bytes": data}).encode())
