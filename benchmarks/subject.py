"""streamfold under test: SSE bytes or dicts -> every event -> the final Message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jiter

from streamfold import Message, MessageCompleted, PartDelta, fold

from .floor import Result

# SSE bytes arrive in network-sized pieces (httpx's iter_bytes gives what the socket
# gives; 64 KiB is a typical read).
CHUNK = 65536


def chunks(data: bytes, size: int = CHUNK) -> Iterator[bytes]:
    """`data` in pieces of `size` bytes (the last may be shorter)."""
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


def result_of(message: Message) -> Result:
    """The parts of a Message, in the shape the checks compare."""
    text: list[str] = []
    thinking: list[str] = []
    signature: str | None = None
    for part in message.content:
        if part.type == "text":
            text.append(part.content or "")
        elif part.type == "thinking":
            thinking.append(part.content or "")
            # Anthropic's signature; Responses' encrypted_content plays its part.
            sig = part.options.get("signature", part.options.get("encrypted_content"))
            if isinstance(sig, str):
                signature = sig
    tools = {call.call_id: call.arguments for call in message.tool_calls}
    return Result("".join(text), "".join(thinking) or None, signature, tools)


def _final(events: Any) -> tuple[Message, int]:
    count = 0
    final: Message | None = None
    for event in events:
        count += 1
        if type(event) is MessageCompleted:
            final = event.message
    assert final is not None
    return final, count


def streamfold_sse(provider: str, sse: bytes) -> Result:
    """Fold SSE bytes (fed in CHUNK-sized pieces), consuming every event."""
    message, _ = _final(fold(chunks(sse), provider))
    return result_of(message)


def streamfold_dicts(provider: str, events: list[dict[str, Any]]) -> Result:
    """Fold already-decoded event dicts, consuming every event."""
    message, _ = _final(fold(events, provider))
    return result_of(message)


def streamfold_sse_live_args(provider: str, sse: bytes) -> Result:
    """Fold SSE bytes and keep a live parsed view of each tool call's partial arguments.

    streamfold has no partial-arguments API yet, so this is what a consumer must do
    today: keep each call's fragments and re-parse the whole prefix with jiter's partial
    mode on every PartDelta. Its cost per delta grows with the argument's length.
    """
    buffers: dict[int, list[str]] = {}
    live: dict[int, Any] = {}
    final: Message | None = None
    for event in fold(chunks(sse), provider):
        if type(event) is PartDelta and event.part_type == "tool_call" and event.content:
            buf = buffers.setdefault(event.index, [])
            buf.append(event.content)
            live[event.index] = jiter.from_json(
                "".join(buf).encode(), partial_mode="trailing-strings"
            )
        elif type(event) is MessageCompleted:
            final = event.message
    assert final is not None
    return result_of(final)
