"""The floor: the least work that still gets each part's text out of a stream.

SSE floor: split the SSE bytes (read in 64 KiB pieces, as streamfold is fed) into lines,
`orjson.loads` each `data:` payload, append each delta's text to its part's list, join at
the end. Dict floor: the same from
already-decoded dicts (dict lookups, list append, join). Both know just enough of each
provider to key deltas by part and to name tool calls; they keep no usage, no stop
reason, no events. Everything else is measured against these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

try:
    from orjson import loads as _loads

    JSON_LIBRARY = "orjson"
except ImportError:  # the bench extra is not installed: the floor is then stdlib json
    from json import loads as _loads  # type: ignore[assignment]

    JSON_LIBRARY = "json"


@dataclass
class Result:
    """What an implementation folded a stream into, for the correctness check."""

    text: str
    thinking: str | None = None
    signature: str | None = None
    # call id -> arguments (JSON text or parsed object)
    tools: dict[str, Any] = field(default_factory=dict)


_ANTHROPIC_KEY = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
    "signature_delta": "signature",
}


def dict_anthropic(events: Iterable[dict[str, Any]]) -> Result:
    """Anthropic: key deltas by (block index, delta type)."""
    parts: dict[Any, list[str]] = {}
    tools: dict[int, str] = {}
    for ev in events:
        kind = ev["type"]
        if kind == "content_block_delta":
            delta = ev["delta"]
            dtype = delta["type"]
            key = (ev["index"], dtype)
            chunks = parts.get(key)
            if chunks is None:
                chunks = parts[key] = []
            chunks.append(delta[_ANTHROPIC_KEY[dtype]])
        elif kind == "content_block_start":
            block = ev["content_block"]
            if block["type"] == "tool_use":
                tools[ev["index"]] = block["id"]
        elif kind == "message_stop":
            break
    joined = {key: "".join(chunks) for key, chunks in parts.items()}
    return Result(
        text="".join(v for (_, t), v in joined.items() if t == "text_delta"),
        thinking="".join(v for (_, t), v in joined.items() if t == "thinking_delta") or None,
        signature="".join(v for (_, t), v in joined.items() if t == "signature_delta") or None,
        tools={cid: joined.get((i, "input_json_delta"), "") for i, cid in tools.items()},
    )


def dict_chat(events: Iterable[dict[str, Any]]) -> Result:
    """OpenAI Chat: content into one list, tool-call arguments keyed by index."""
    text: list[str] = []
    args: dict[int, list[str]] = {}
    ids: dict[int, str] = {}
    for ev in events:
        choices = ev["choices"]
        if not choices:
            continue
        delta = choices[0]["delta"]
        content = delta.get("content")
        if content:
            text.append(content)
        calls = delta.get("tool_calls")
        if calls:
            for call in calls:
                index = call["index"]
                if "id" in call and index not in ids:  # Qwen repeats `"id": ""` after
                    ids[index] = call["id"]
                    args[index] = []
                fragment = call["function"].get("arguments")
                if fragment:
                    args[index].append(fragment)
    return Result(text="".join(text), tools={ids[i]: "".join(chunks) for i, chunks in args.items()})


_RESPONSES_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
    }
)


_RESPONSES_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def dict_responses(events: Iterable[dict[str, Any]]) -> Result:
    """OpenAI Responses: key deltas by item id (item types from output_item.added)."""
    parts: dict[str, list[str]] = {}
    items: dict[str, dict[str, Any]] = {}
    for ev in events:
        kind = ev["type"]
        if kind in _RESPONSES_DELTAS:
            key = ev["item_id"]
            chunks = parts.get(key)
            if chunks is None:
                chunks = parts[key] = []
            chunks.append(ev["delta"])
        elif kind == "response.output_item.added":
            item = ev["item"]
            items[item["id"]] = item
        elif kind in _RESPONSES_ENDS:
            break  # a recording may hold more turns; a fold ends with the first
    joined = {key: "".join(chunks) for key, chunks in parts.items()}
    text: list[str] = []
    thinking: list[str] = []
    signature: str | None = None
    tools: dict[str, Any] = {}
    for item_id, item in items.items():
        if item["type"] == "message":
            text.append(joined.get(item_id, ""))
        elif item["type"] == "reasoning":
            thinking.append(joined.get(item_id, ""))
            signature = item.get("encrypted_content")
        elif item["type"] == "function_call":
            tools[item["call_id"]] = joined.get(item_id, "")
    return Result("".join(text), "".join(thinking) or None, signature, tools)


DICT_FLOORS: dict[str, Callable[[Iterable[dict[str, Any]]], Result]] = {
    "anthropic": dict_anthropic,
    "openai-chat": dict_chat,
    "openai-responses": dict_responses,
}


# The SSE floor reads the bytes in the same network-sized pieces streamfold is fed, so
# neither holds a second copy of the whole stream.
CHUNK = 65536


def _payloads(sse: bytes) -> Iterator[dict[str, Any]]:
    return _chunk_payloads(sse[start : start + CHUNK] for start in range(0, len(sse), CHUNK))


def _chunk_payloads(chunks: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    # One `data:` line per event in the streams measured here (generated and recorded).
    loads = _loads
    rest = b""
    for chunk in chunks:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line[:5] == b"data:":
                data = line[5:]
                if data.strip() != b"[DONE]":
                    yield loads(data)
    if rest[:5] == b"data:" and rest[5:].strip() != b"[DONE]":
        yield loads(rest[5:])


def sse_floor(provider: str, sse: bytes) -> Result:
    """SSE bytes -> lines -> orjson.loads each payload -> per-part lists -> join."""
    return DICT_FLOORS[provider](_payloads(sse))


def sse_floor_chunks(provider: str, chunks: list[bytes]) -> Result:
    """The SSE floor fed the pieces a live connection delivers (see subject.event_chunks)."""
    return DICT_FLOORS[provider](_chunk_payloads(chunks))


def dict_floor(provider: str, events: list[dict[str, Any]]) -> Result:
    """Decoded dicts -> per-part lists -> join."""
    return DICT_FLOORS[provider](events)
