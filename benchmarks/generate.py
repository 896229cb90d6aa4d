"""Seeded generators of realistic provider streams, as SSE bytes and as decoded dicts.

Shapes are copied from the real recordings in tests/fixtures/real (field names, the
fields servers repeat on every chunk, the `obfuscation` padding, the summary events that
repeat the whole text). Two workloads per provider:

- "mixed": about 10% thinking deltas (then a signature: Anthropic `signature_delta`,
  Responses `encrypted_content`; OpenAI Chat has no thinking), 70% token-sized text
  deltas, 20% argument fragments of three parallel tool calls, the JSON cut at arbitrary
  points (Chat interleaves the three calls' fragments, as some servers do).
- "bigargs": one tool call whose argument JSON (about 10 bytes per delta: 1 MB at
  N = 100k) is cut into N fragments: the live-partial-arguments workload.

`N` counts content-carrying delta events. Every stream comes with its `Expected` result
(text, thinking, signature, tool arguments), against which every implementation is
checked before it is timed.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field
from typing import Any

PROVIDERS = ("anthropic", "openai-chat", "openai-responses")
WORKLOADS = ("mixed", "bigargs")
# One kind of delta alone, N of it (the shapes table re-writes every delta of a stream
# onto one recorded shape, and a shape is found per kind): text, thinking (then its
# signature), or argument fragments of three parallel calls (Chat interleaves them).
KIND_WORKLOADS = ("text", "thinking", "args")

# Token-sized pieces: words with their leading space, suffixes, punctuation, newlines,
# characters JSON must escape, and non-ASCII text.
_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "from",
    "or",
    "at",
    "an",
    "which",
    "stream",
    "fold",
    "message",
    "token",
    "part",
    "delta",
    "event",
    "tool",
    "call",
    "argument",
    "thinking",
    "signature",
    "provider",
    "server",
    "client",
    "buffer",
    "parse",
    "join",
    "list",
    "chunk",
    "order",
    "usage",
    "model",
    "reply",
]
_PIECES = (
    *(" " + w for w in _WORDS),
    *_WORDS[:20],
    "ing", "ed", "s", "ly", ",", ".", ":", ";", "\n", "\n\n", "**", "`", "-",
    ' "', '"', "\\", "\t", " é", "ü", " 中文", "字", " 🙂", " naïve", " 42", "0", "%",
)  # fmt: skip


@dataclass
class Expected:
    """What a correct fold of a generated stream holds."""

    text: str
    thinking: str | None = None
    signature: str | None = None
    # call id -> argument JSON text, in stream order.
    tools: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)


@dataclass
class Stream:
    """One generated stream: its SSE bytes, its decoded events, and what it should fold to."""

    provider: str
    workload: str
    n: int
    sse: bytes
    # (SSE event name or None, decoded payload); the [DONE] sentinel is left out.
    events: list[tuple[str | None, dict[str, Any]]]
    expected: Expected

    @property
    def dicts(self) -> list[dict[str, Any]]:
        """The decoded payloads only."""
        return [payload for _, payload in self.events]


def _tokens(rng: random.Random, count: int) -> list[str]:
    return [rng.choice(_PIECES) for _ in range(count)]


def _split(rng: random.Random, text: str, count: int) -> list[str]:
    """Cut `text` into exactly `count` non-empty pieces at arbitrary points."""
    count = max(1, min(count, len(text)))
    cuts = sorted(rng.sample(range(1, len(text)), count - 1)) if count > 1 else []
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _args_json(rng: random.Random, length: int, big: bool = False) -> str:
    """A tool-argument JSON object of about `length` characters."""
    if big:
        # A file-writing tool: one long string with escapes, plus a few small fields.
        body = "".join(_tokens(rng, max(1, length // 5)))
        obj: dict[str, Any] = {"path": "src/app/main.py", "mode": "overwrite", "content": body}
        return json.dumps(obj, ensure_ascii=False)
    query = "".join(_tokens(rng, max(1, length // 8)))
    obj = {
        "query": query,
        "limit": rng.randint(1, 50),
        "filters": {"tags": ["a", "b"], "since": "2024-01-01", "exact": rng.random() < 0.5},
    }
    return json.dumps(obj, ensure_ascii=False)


def _id(rng: random.Random, prefix: str, length: int = 24) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return prefix + "".join(rng.choice(alphabet) for _ in range(length))


def _obfuscation(rng: random.Random) -> str:
    return "x" * rng.randint(1, 15)


@dataclass
class _Plan:
    thinking: list[str]
    signature: str | None
    text: list[str]
    # (call id, name, fragments)
    calls: list[tuple[str, str, list[str]]]


def _plan(rng: random.Random, provider: str, workload: str, n: int, id_prefix: str) -> _Plan:
    if workload == "bigargs":
        args = _args_json(rng, 10 * n, big=True)
        return _Plan([], None, [], [(_id(rng, id_prefix), "write_file", _split(rng, args, n))])
    if workload in KIND_WORKLOADS:
        n_think = n if workload == "thinking" else 0
        n_tools = n if workload == "args" else 0
    else:
        n_think = 0 if provider == "openai-chat" else n // 10
        n_tools = n // 5
    n_text = n - n_think - n_tools
    thinking = _tokens(rng, n_think)
    signature = _id(rng, "Eo", 300) if n_think else None
    text = _tokens(rng, n_text)
    calls: list[tuple[str, str, list[str]]] = []
    per_call = [n_tools // 3, n_tools // 3, n_tools - 2 * (n_tools // 3)] if n_tools else []
    for i, k in enumerate(per_call):
        k = max(k, 1)
        args = _args_json(rng, 6 * k)
        while len(args) < k:
            args = _args_json(rng, 12 * k)
        calls.append((_id(rng, id_prefix), ("search", "lookup", "fetch")[i], _split(rng, args, k)))
    return _Plan(thinking, signature, text, calls)


def _expected(plan: _Plan) -> Expected:
    return Expected(
        text="".join(plan.text),
        thinking="".join(plan.thinking) if plan.thinking else None,
        signature=plan.signature,
        tools={cid: "".join(frags) for cid, _, frags in plan.calls},
        names={cid: name for cid, name, _ in plan.calls},
    )


def _sse(
    events: list[tuple[str | None, dict[str, Any]]],
    done: bool = False,
    pad: random.Random | None = None,
) -> bytes:
    out: list[str] = []
    for name, payload in events:
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        if pad is not None:
            # Anthropic's servers pad every event with 0 to 15 spaces before its last brace.
            data = data[:-1] + " " * pad.randint(0, 15) + "}"
        out.append(f"event: {name}\ndata: {data}\n\n" if name else f"data: {data}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode("utf-8")


# --- Anthropic Messages ---------------------------------------------------------------


def _anthropic(rng: random.Random, plan: _Plan) -> list[tuple[str | None, dict[str, Any]]]:
    ev: list[tuple[str | None, dict[str, Any]]] = []

    def add(payload: dict[str, Any]) -> None:
        ev.append((payload["type"], payload))

    add(
        {
            "type": "message_start",
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": _id(rng, "msg_"),
                "type": "message",
                "role": "assistant",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 598,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "cache_creation": {
                        "ephemeral_5m_input_tokens": 0,
                        "ephemeral_1h_input_tokens": 0,
                    },
                    "output_tokens": 8,
                    "service_tier": "standard",
                },
            },
        }
    )
    index = 0
    if plan.thinking:
        add(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
        )
        add({"type": "ping"})
        for piece in plan.thinking:
            add(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": piece},
                }
            )
        add(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": plan.signature},
            }
        )
        add({"type": "content_block_stop", "index": index})
        index += 1
    if plan.text:
        add(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
        )
        for piece in plan.text:
            add(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
            )
        add({"type": "content_block_stop", "index": index})
        index += 1
    for call_id, name, frags in plan.calls:
        add(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            }
        )
        for piece in frags:
            add(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
            )
        add({"type": "content_block_stop", "index": index})
        index += 1
    add(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if plan.calls else "end_turn",
                "stop_sequence": None,
            },
            "usage": {
                "input_tokens": 598,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": len(plan.text) + len(plan.thinking) + 10,
            },
        }
    )
    add({"type": "message_stop"})
    return ev


# --- OpenAI Chat Completions ------------------------------------------------------------


def _chat(rng: random.Random, plan: _Plan) -> list[tuple[str | None, dict[str, Any]]]:
    cid = _id(rng, "chatcmpl-", 29)
    created = 1759436804
    ev: list[tuple[str | None, dict[str, Any]]] = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
        ev.append(
            (
                None,
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": "gpt-4o-2024-08-06",
                    "service_tier": "default",
                    "system_fingerprint": "fp_cbf1785567",
                    "usage": None,
                    "choices": [
                        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                    ],
                    "obfuscation": _obfuscation(rng),
                },
            )
        )

    chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in plan.text:
        chunk({"content": piece})
    # Parallel calls: each opens with id and name, in index order (as servers do), and the
    # fragments of the open calls interleave (a fragment names its call by index only).
    queues = [list(frags) for _, _, frags in plan.calls]
    opened = 0
    while opened < len(plan.calls) or any(queues):
        ready = [k for k in range(opened) if queues[k]]
        if opened < len(plan.calls):
            ready.append(opened)
        i = rng.choice(ready)
        call_id, name, _ = plan.calls[i]
        if i == opened:
            opened += 1
            fn: dict[str, Any] = {"name": name, "arguments": ""}
            chunk({"tool_calls": [{"index": i, "id": call_id, "type": "function", "function": fn}]})
            continue
        piece = queues[i].pop(0)
        chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    chunk({}, "tool_calls" if plan.calls else "stop")
    ev.append(
        (
            None,
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": "gpt-4o-2024-08-06",
                "service_tier": "default",
                "system_fingerprint": "fp_cbf1785567",
                "choices": [],
                "usage": {
                    "prompt_tokens": 417,
                    "completion_tokens": len(plan.text) + 10,
                    "total_tokens": 427 + len(plan.text),
                    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                    "completion_tokens_details": {
                        "reasoning_tokens": 0,
                        "audio_tokens": 0,
                        "accepted_prediction_tokens": 0,
                        "rejected_prediction_tokens": 0,
                    },
                },
                "obfuscation": _obfuscation(rng),
            },
        )
    )
    return ev


# --- OpenAI Responses -------------------------------------------------------------------


def _responses(rng: random.Random, plan: _Plan) -> list[tuple[str | None, dict[str, Any]]]:
    ev: list[tuple[str | None, dict[str, Any]]] = []
    seq = 0
    resp_id = _id(rng, "resp_", 48)

    def add(payload: dict[str, Any]) -> None:
        nonlocal seq
        payload = {"type": payload["type"], "sequence_number": seq, **payload}
        seq += 1
        ev.append((payload["type"], payload))

    def response(status: str, output: list[dict[str, Any]], usage: Any) -> dict[str, Any]:
        return {
            "id": resp_id,
            "object": "response",
            "created_at": 1765552659,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": "gpt-5.1-codex-max",
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": "high", "summary": "detailed"},
            "service_tier": "auto",
            "store": False,
            "temperature": 1,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 0.985,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": {},
        }

    add({"type": "response.created", "response": response("in_progress", [], None)})
    add({"type": "response.in_progress", "response": response("in_progress", [], None)})
    output: list[dict[str, Any]] = []
    index = 0
    if plan.thinking:
        rid = _id(rng, "rs_", 48)
        item = {"id": rid, "type": "reasoning", "encrypted_content": plan.signature, "summary": []}
        add({"type": "response.output_item.added", "output_index": index, "item": item})
        common = {"item_id": rid, "output_index": index, "summary_index": 0}
        add(
            {
                "type": "response.reasoning_summary_part.added",
                **common,
                "part": {"type": "summary_text", "text": ""},
            }
        )
        for piece in plan.thinking:
            add(
                {
                    "type": "response.reasoning_summary_text.delta",
                    **common,
                    "delta": piece,
                    "obfuscation": _obfuscation(rng),
                }
            )
        full = "".join(plan.thinking)
        add({"type": "response.reasoning_summary_text.done", **common, "text": full})
        add(
            {
                "type": "response.reasoning_summary_part.done",
                **common,
                "part": {"type": "summary_text", "text": full},
            }
        )
        done = dict(item, summary=[{"type": "summary_text", "text": full}])
        add({"type": "response.output_item.done", "output_index": index, "item": done})
        output.append(done)
        index += 1
    if plan.text:
        mid = _id(rng, "msg_", 48)
        item = {
            "id": mid,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        add({"type": "response.output_item.added", "output_index": index, "item": item})
        common = {"item_id": mid, "output_index": index, "content_index": 0}
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        add({"type": "response.content_part.added", **common, "part": part})
        for piece in plan.text:
            add(
                {
                    "type": "response.output_text.delta",
                    **common,
                    "delta": piece,
                    "logprobs": [],
                    "obfuscation": _obfuscation(rng),
                }
            )
        full = "".join(plan.text)
        add({"type": "response.output_text.done", **common, "text": full, "logprobs": []})
        done_part = dict(part, text=full)
        add({"type": "response.content_part.done", **common, "part": done_part})
        done = dict(item, status="completed", content=[done_part])
        add({"type": "response.output_item.done", "output_index": index, "item": done})
        output.append(done)
        index += 1
    for call_id, name, frags in plan.calls:
        fid = _id(rng, "fc_", 48)
        item = {
            "id": fid,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
        }
        add({"type": "response.output_item.added", "output_index": index, "item": item})
        for piece in frags:
            add(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": fid,
                    "output_index": index,
                    "delta": piece,
                    "obfuscation": _obfuscation(rng),
                }
            )
        args = "".join(frags)
        add(
            {
                "type": "response.function_call_arguments.done",
                "item_id": fid,
                "output_index": index,
                "arguments": args,
            }
        )
        done = dict(item, status="completed", arguments=args)
        add({"type": "response.output_item.done", "output_index": index, "item": done})
        output.append(done)
        index += 1
    usage = {
        "input_tokens": 417,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": len(plan.text) + len(plan.thinking) + 10,
        "output_tokens_details": {"reasoning_tokens": len(plan.thinking)},
        "total_tokens": 427 + len(plan.text) + len(plan.thinking),
    }
    add({"type": "response.completed", "response": response("completed", output, usage)})
    return ev


_BUILDERS = {"anthropic": _anthropic, "openai-chat": _chat, "openai-responses": _responses}
_ID_PREFIX = {"anthropic": "toolu_", "openai-chat": "call_", "openai-responses": "call_"}


def generate(provider: str, workload: str, n: int, seed: int = 0) -> Stream:
    """A seeded stream of `n` content deltas for `provider` and `workload`."""
    if provider not in _BUILDERS:
        raise ValueError(f"provider: expected one of {PROVIDERS}, got {provider!r}")
    if workload not in WORKLOADS + KIND_WORKLOADS:
        known = WORKLOADS + KIND_WORKLOADS
        raise ValueError(f"workload: expected one of {known}, got {workload!r}")
    if workload == "thinking" and provider == "openai-chat":
        raise ValueError("workload: openai-chat streams carry no thinking here")
    # One seed per (provider, workload, n), stable across runs and Python versions.
    rng = random.Random(f"{seed}:{provider}:{workload}:{n}")
    plan = _plan(rng, provider, workload, n, _ID_PREFIX[provider])
    events = _BUILDERS[provider](rng, plan)
    return Stream(
        provider=provider,
        workload=workload,
        n=n,
        sse=_sse(
            events,
            done=provider == "openai-chat",
            pad=random.Random(f"{seed}:pad:{n}") if provider == "anthropic" else None,
        ),
        events=events,
        expected=_expected(plan),
    )


def count_deltas(stream: Stream) -> int:
    """The content-carrying delta events actually in `stream` (equals `n` by construction)."""
    total = 0
    for _, p in stream.events:
        kind = p.get("type")
        anthropic = kind == "content_block_delta" and p["delta"]["type"] != "signature_delta"
        responses = (
            isinstance(kind, str) and kind.startswith("response.") and kind.endswith(".delta")
        )
        if anthropic or responses:
            total += 1
        elif p.get("choices"):
            delta = p["choices"][0]["delta"]
            if delta.get("content") or (
                delta.get("tool_calls") and "id" not in delta["tool_calls"][0]
            ):
                total += 1
    return total
