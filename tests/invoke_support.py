"""Bedrock InvokeModelWithResponseStream recordings, derived at test time from the real
Anthropic recordings (tests/fixtures/real/anthropic/, see PROVENANCE.md).

Bedrock streams Claude's own Messages events, each JSON-encoded, base64-wrapped in a
`chunk` event (`{"bytes": ..., "p": <padding>}`) of the binary eventstream, without the
`ping`s, and adds `amazon-bedrock-invocationMetrics` to the `message_stop` event. This
builds exactly that from each recording, so the wire format is tested on every block type
the Anthropic recordings hold.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from functools import cache
from typing import Any

from support import read, recordings

from streamfold.framing import SSEDecoder

INVOKE_SOURCES = recordings("anthropic")
METRICS = "amazon-bedrock-invocationMetrics"
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def eventstream_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One eventstream message with string headers and both CRCs."""
    head = b"".join(
        bytes([len(name)])
        + name.encode()
        + b"\x07"
        + struct.pack(">H", len(value))
        + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def chunk_payload(event: dict[str, Any], n: int = 0) -> dict[str, Any]:
    """The `chunk` event's JSON as Bedrock writes it: base64 bytes and some padding."""
    data = json.dumps(event, separators=(",", ":")).encode()
    return {"bytes": base64.b64encode(data).decode(), "p": _PADDING[: 1 + n % len(_PADDING)]}


def chunk_frame(event: dict[str, Any], n: int = 0) -> bytes:
    """One model event as an InvokeModelWithResponseStream eventstream message."""
    headers = {":event-type": "chunk", ":content-type": "application/json"}
    payload = json.dumps(chunk_payload(event, n), separators=(",", ":")).encode()
    return eventstream_message({**headers, ":message-type": "event"}, payload)


def exception_frame(name: str, message: str) -> bytes:
    """An in-stream exception message (e.g. throttlingException), as Bedrock sends it."""
    headers = {":exception-type": name, ":content-type": "application/json"}
    payload = json.dumps({"message": message}).encode()
    return eventstream_message({**headers, ":message-type": "exception"}, payload)


@cache
def claude_events(rel: str) -> tuple[dict[str, Any], ...]:
    """The Anthropic events of a recording as Bedrock streams them: no pings, and the
    invocation metrics (from the recording's own usage) on message_stop."""
    decoder = SSEDecoder()
    frames = [*decoder.feed(read(rel)), *decoder.close()]
    events = [json.loads(f.data) for f in frames]
    usage: dict[str, Any] = {}
    for event in events:
        usage.update(event.get("message", {}).get("usage") or {})
        usage.update(event.get("usage") or {})
    out: list[dict[str, Any]] = []
    for event in events:
        if event.get("type") == "ping":
            continue
        if event.get("type") == "message_stop":
            event = {
                **event,
                METRICS: {
                    "inputTokenCount": usage.get("input_tokens", 0),
                    "outputTokenCount": usage.get("output_tokens", 0),
                    "invocationLatency": 2345,
                    "firstByteLatency": 456,
                },
            }
        out.append(event)
    return tuple(out)


@cache
def invoke_bytes(rel: str) -> bytes:
    """The whole InvokeModelWithResponseStream body for an Anthropic recording."""
    return b"".join(chunk_frame(event, n) for n, event in enumerate(claude_events(rel)))


def boto3_events(rel: str) -> list[dict[str, Any]]:
    """The same stream as boto3 yields it: `{"chunk": {"bytes": <decoded bytes>}}`."""
    return [{"chunk": {"bytes": json.dumps(event).encode()}} for event in claude_events(rel)]
