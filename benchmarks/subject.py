"""streamfold under test: SSE bytes or dicts -> every event -> the final Message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jiter

from streamfold import Message, MessageCompleted, PartDelta, PartStarted, ToolCall, fold

from .floor import Result

# SSE bytes arrive in network-sized pieces (httpx's iter_bytes gives what the socket
# gives; 64 KiB is a typical read).
CHUNK = 65536


def chunks(data: bytes, size: int = CHUNK) -> Iterator[bytes]:
    """`data` in pieces of `size` bytes (the last may be shorter)."""
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


def event_chunks(data: bytes) -> list[bytes]:
    """`data` as a live connection delivers it: one SSE event per piece (a server flushes
    each event as it is generated)."""
    return [event + b"\n\n" for event in data.split(b"\n\n") if event]


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


def streamfold_sse_chunks(provider: str, pieces: list[bytes]) -> Result:
    """Fold SSE bytes already cut into pieces (a live connection's: `event_chunks`)."""
    message, _ = _final(fold(pieces, provider))
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


class _Text:
    """A string in the consumer's mirror: its appended pieces, joined once at the end."""

    __slots__ = ("chunks",)

    def __init__(self) -> None:
        self.chunks: list[str] = []


def _mirror(root: Any, change: Any) -> Any:
    """Apply one arguments change to the consumer's mirror: O(path depth + the change)."""
    op, path, value = change
    if op == "set":
        if type(value) is str:  # a string opens empty; its text comes as appends
            value = _Text()
        elif type(value) in (dict, list):
            value = type(value)()
        if not path:
            return value
        parent = root
        for key in path[:-1]:
            parent = parent[key]
        if type(parent) is list:
            parent.append(value)  # a new element is always the next index
        else:
            parent[path[-1]] = value
        return root
    node = root
    for key in path:
        node = node[key]
    node.chunks.append(value)
    return root


def _materialize(node: Any) -> Any:
    if type(node) is _Text:
        return "".join(node.chunks)
    if type(node) is dict:
        return {k: _materialize(v) for k, v in node.items()}
    if type(node) is list:
        return [_materialize(v) for v in node]
    return node


def streamfold_sse_live_args_incremental(provider: str, sse: bytes) -> Result:
    """Fold SSE bytes with `partial_arguments=True` and keep a live view of the arguments.

    Each tool-call PartDelta carries the changes its fragment made to the parsed
    arguments; the consumer mirrors them (a member per set, a chunk per append, as a UI
    forwarding them to a client would), so its cost per delta does not grow with the
    argument. The result's tool arguments are the mirror's, so the check verifies the
    changes end to end.
    """
    views: dict[int, Any] = {}
    ids: dict[int, str] = {}
    final: Message | None = None
    for event in fold(chunks(sse), provider, partial_arguments=True):
        if isinstance(event, PartDelta):
            if event.arguments_changes:
                view = views.get(event.index)
                for change in event.arguments_changes:
                    view = _mirror(view, change)
                views[event.index] = view
        elif isinstance(event, PartStarted) and isinstance(event.part, ToolCall):
            ids[event.index] = event.part.call_id or str(event.index)
        elif isinstance(event, MessageCompleted):
            final = event.message
    assert final is not None
    result = result_of(final)
    result.tools = {ids[i]: _materialize(view) for i, view in views.items()}
    return result
