"""The Chat Completions SSE hot lane gives exactly what the framer and decode() give.

The Chat lane learns each stream's chunk shape from a chunk it had to leave to the full
path. Every stream here is folded twice, with and without the lane, split at arbitrary
points, lenient and strict, with tight limits and live partial arguments: events, errors
and the final message must not differ. The event pools, one per key order servers use,
mix chunks the lane takes (text, reasoning, tool-call argument fragments, with any
obfuscation value) with look-alikes it must leave to the full path: escapes, bad UTF-8,
raw control characters, other spacing or key order, duplicate keys, a changed id,
fingerprint or usage, another choice, an unknown or closed call, pending citations...
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import (
    HOT_LANE_OPTIONS,
    INDEX,
    assert_hot_lane_same,
    decoded_payloads,
    hot_lane_from,
    read,
    split_at,
)

from streamfold import PartDelta, StreamFolder, event_to_json, fold
from streamfold.limits import Limits
from streamfold.providers.openai_chat import decode as openai_chat


@pytest.fixture(autouse=True)
def _lane_from_the_first_event() -> Iterator[None]:
    """These streams are short: the lane starts at once (assert_hot_lane_same also folds
    with the shipped start)."""
    with hot_lane_from(0):
        yield


# Top-level key orders of real servers: OpenAI, Azure (sorted, choices first), DeepSeek
# (no obfuscation), xAI (fingerprint after choices).
_ORDERS: dict[str, tuple[str, ...]] = {
    "openai": (
        "id",
        "object",
        "created",
        "model",
        "service_tier",
        "system_fingerprint",
        "usage",
        "choices",
        "obfuscation",
    ),
    "azure": (
        "choices",
        "created",
        "id",
        "model",
        "obfuscation",
        "object",
        "system_fingerprint",
        "usage",
    ),
    "deepseek": ("id", "object", "created", "model", "system_fingerprint", "choices", "usage"),
    "xai": ("id", "object", "created", "model", "choices", "system_fingerprint"),
}

_BASE: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1700000000,
    "model": "gpt-x",
    "service_tier": "default",
    "system_fingerprint": "fp_1",
    "usage": None,
    "obfuscation": "Ab3",
}

# Stands for raw bytes in the JSON text: `"RAW"` becomes `"` + raw + `"`.
_RAW = "\u2603RAW\u2603"


def _chunk(
    order: str,
    delta: dict[str, Any],
    *,
    raw: bytes | None = None,
    finish: str | None = None,
    index: int = 0,
    choice: dict[str, Any] | None = None,
    **top: Any,
) -> bytes:
    """One `data:` chunk in the key order of `order` (`top` overrides or adds fields)."""
    body: dict[str, Any] = {"index": index, "delta": delta, "logprobs": None}
    body["finish_reason"] = finish
    body.update(choice or {})
    if order == "azure":
        body = {"content_filter_results": {}, **body}
        body = dict(sorted(body.items()))
    payload: dict[str, Any] = {}
    for name in _ORDERS[order]:
        if name == "choices":
            payload[name] = [body]
        elif name in top:
            payload[name] = top.pop(name)
        else:
            payload[name] = _BASE[name]
    payload.update(top)
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if raw is not None:
        data = data.replace(json.dumps(_RAW, ensure_ascii=False).encode(), b'"' + raw + b'"')
    return b"data: " + data + b"\n\n"


def _text(order: str, raw: bytes) -> bytes:
    return _chunk(order, {"content": _RAW}, raw=raw)


def _args(order: str, index: int, raw: bytes, **fragment: Any) -> bytes:
    call = {"index": index, **fragment, "function": {"arguments": _RAW}}
    return _chunk(order, {"tool_calls": [call]}, raw=raw)


def _start(order: str, index: int, call_id: str, name: str) -> bytes:
    function = {"name": name, "arguments": ""}
    call = {"index": index, "id": call_id, "type": "function", "function": function}
    return _chunk(order, {"tool_calls": [call]})


def _pool(order: str) -> dict[str, bytes]:
    """Chunks by name: those the lane takes once it learned their shape, and look-alikes."""
    events = {
        "hello": _text(order, b"Hello"),
        "unicode": _text(order, " world, naïve ☃ 😀".encode()),
        "empty": _text(order, b""),
        "escapes": _text(order, b'esc \\"q\\" \\n \\t \\u00e9 \\ud83d\\ude00 \\/ \\\\'),
        "bad escape": _text(order, b"bad escape \\x"),
        "lone surrogate": _text(order, b"lone \\ud800"),
        "raw quote": _text(order, b'raw " quote'),
        "trailing backslash": _text(order, b"trailing backslash \\"),
        "raw tab": _text(order, b"raw\ttab"),
        "raw control": _text(order, b"raw\x01ctl"),
        "raw newline": _text(order, b"raw\nnewline"),
        "bad utf8": _text(order, b"bad utf8 \xff\xfe"),
        "cut utf8": _text(order, b"cut utf8 \xe2\x98"),
        "utf8 surrogate": _text(order, b"surrogate \xed\xa0\x80"),
        # Obfuscation values: any printable value is the same chunk; others are not.
        "obf empty": _chunk(order, {"content": "obf"}, obfuscation=""),
        "obf long": _chunk(order, {"content": "obf"}, obfuscation="Zz9 " * 20),
        "obf unicode": _chunk(order, {"content": "obf"}, obfuscation="é"),
        "obf quote": _chunk(order, {"content": "obf"}, obfuscation='q"uote'),
        "obf number": _chunk(order, {"content": "obf"}, obfuscation=7),
        "obf bad utf8": _chunk(order, {"content": "obf"}, obfuscation=_RAW, raw=b"\xff"),
        "obf raw control": _chunk(order, {"content": "obf"}, obfuscation=_RAW, raw=b"\x01"),
        # The same text with something else changed.
        "new id": _chunk(order, {"content": "new id"}, id="chatcmpl-2"),
        "new created": _chunk(order, {"content": "new created"}, created=1700000001),
        "new fingerprint": _chunk(order, {"content": "new fp"}, system_fingerprint="fp_2"),
        "no fingerprint": _chunk(order, {"content": "no fp"}, system_fingerprint=None),
        "new tier": _chunk(order, {"content": "new tier"}, service_tier="flex"),
        "with usage": _chunk(order, {"content": "with usage"}, usage={"prompt_tokens": 3}),
        "upstream": _chunk(order, {"content": "upstream"}, provider="Azure"),
        "extra field": _chunk(order, {"content": "extra field"}, x_extra=1),
        "cited": _chunk(order, {"content": "cited"}, citations=["https://a.example"]),
        "other choice": _chunk(order, {"content": "other choice"}, index=1),
        "finishing": _chunk(order, {"content": "finishing"}, finish="stop"),
        "logprobs": _chunk(order, {"content": "logprobs"}, choice={"logprobs": {"content": []}}),
        "role after": _chunk(order, {"content": "with role", "role": "assistant"}),
        "role before": _chunk(order, {"role": "assistant", "content": "role first"}),
        "refusal null": _chunk(order, {"content": "a", "refusal": None}),
        "dup first": _chunk(order, {"content": "dup"}).replace(b'"dup"', b'"a","content":"dup"'),
        "dup later": _chunk(order, {"content": "dup"}).replace(b'"dup"', b'"dup","content":"b"'),
        # A later duplicate that says what the lane's first probe says.
        "dup probe": _chunk(order, {"content": "dup"}).replace(
            b'"dup"', b'"dup","content":"hot lane probe"'
        ),
        "obf in delta": _chunk(order, {"content": "obf in delta", "obfuscation": "x"}),
        "spaced": _chunk(order, {"content": "spaced"}).replace(b'"content":"', b'"content": "'),
        "no space": _chunk(order, {"content": "no space"}).replace(b"data: ", b"data:", 1),
        "id line": _chunk(order, {"content": "id line"}).replace(b"data: ", b"id: 7\ndata: ", 1),
        "named error": _chunk(order, {"content": "named"}).replace(
            b"data: ", b"event: error\ndata: "
        ),
        "crlf": _chunk(order, {"content": "crlf"}).replace(b"\n", b"\r\n"),
        "two data lines": _chunk(order, {"content": "two lines"})[:-1] + b"data: {}\n\n",
        "trailing space": _chunk(order, {"content": "space"}).replace(b"}\n\n", b"} \n\n"),
        # Reasoning: DeepSeek's reasoning_content, Groq's and OpenRouter's reasoning.
        "reasoning content": _chunk(order, {"content": None, "reasoning_content": "Let me"}),
        "reasoning escaped": _chunk(
            order, {"content": None, "reasoning_content": _RAW}, raw=b'more \\"thought\\"'
        ),
        "reasoning": _chunk(order, {"reasoning": "plain reasoning"}),
        "reasoning channel": _chunk(order, {"reasoning": "channel", "channel": "analysis"}),
        "reasoning both": _chunk(order, {"reasoning_content": "both", "reasoning": "both"}),
        "reasoning second": _chunk(order, {"reasoning_content": "", "reasoning": "second"}),
        "reasoning details": _chunk(
            order,
            {
                "reasoning": "detail",
                "reasoning_details": [{"type": "reasoning.text", "text": "detail", "index": 0}],
            },
        ),
        # Tool calls: starts, fragments by index (the lane's), and look-alikes.
        "start 0": _start(order, 0, "call_1", "f"),
        "start 1": _start(order, 1, "call_2", "g"),
        "start 0 again": _start(order, 0, "call_3", "h"),
        "args 0": _args(order, 0, b'{\\"a\\": '),
        "args 0 escapes": _args(order, 0, b'[1, \\"x\\\\\\""'),
        "args 0 plain": _args(order, 0, b"]}"),
        "args 0 empty": _args(order, 0, b""),
        "args 0 bad escape": _args(order, 0, b"bad \\q"),
        "args 1": _args(order, 1, b'{\\"b\\": 2}'),
        "args 2": _args(order, 2, b"unknown index"),
        "args empty id": _args(order, 0, b"empty id", id=""),
        "args with id": _args(order, 0, b"with id", id="call_1"),
        "args with name": _chunk(
            order, {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "n"}}]}
        ),
        "args no index": _chunk(order, {"tool_calls": [{"function": {"arguments": "x"}}]}),
        "args str index": _chunk(
            order, {"tool_calls": [{"index": "0", "function": {"arguments": "x"}}]}
        ),
        "args number": _chunk(order, {"tool_calls": [{"index": 0, "function": {"arguments": 1}}]}),
        # Everything else a stream holds.
        "role": _chunk(order, {"role": "assistant", "content": "", "refusal": None}),
        "refusal": _chunk(order, {"refusal": "I can't"}),
        "annotation": _chunk(
            order,
            {
                "content": "",
                "annotations": [
                    {"type": "url_citation", "url_citation": {"url": "https://b.example"}}
                ],
            },
        ),
        "citations": _chunk(order, {"content": ""}, citations=["https://c.example"]),
        "finish tools": _chunk(order, {}, finish="tool_calls"),
        "finish usage": _chunk(order, {}, finish="stop", usage={"prompt_tokens": 3}),
        "usage only": b'data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3}}\n\n',
        "error": b'data: {"error":{"type":"server_error","message":"busy"}}\n\n',
        "done": b"data: [DONE]\n\n",
        "comment": b": keep-alive\n\n",
        "blank": b"\n",
        "unterminated": _chunk(order, {"content": "unterminated"})[:-12],
    }
    return events


_POOLS = {order: _pool(order) for order in _ORDERS}
_NAMES = list(_POOLS["openai"])
# The chunks the lane takes once learned, and those that change what it may take: picked
# more often, so that learned shapes meet the state changes.
_CORE = [
    "hello",
    "unicode",
    "escapes",
    "obf long",
    "reasoning content",
    "reasoning",
    "args 0",
    "args 0 escapes",
    "args 1",
    "start 0",
    "start 1",
    "start 0 again",
    "new fingerprint",
    "refusal",
    "finish tools",
    "reasoning details",
    "citations",
    "empty",
    "dup probe",
    "obf bad utf8",
    "with usage",
]
_PICK = st.one_of(st.sampled_from(_CORE), st.sampled_from(_CORE), st.sampled_from(_NAMES))


def _opening(order: str) -> bytes:
    """A stream start: the role chunk and a first text chunk (the text part is open)."""
    return _POOLS[order]["role"] + _text(order, b"Hi")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    order=st.sampled_from(sorted(_ORDERS)),
    picks=st.lists(_PICK, max_size=30),
    cuts=st.lists(st.integers(0, 12000), max_size=6),
    opening=st.booleans(),
    options=HOT_LANE_OPTIONS,
    named=st.booleans(),
)
def test_chat_hot_lane_equals_full_path(
    order: str,
    picks: list[str],
    cuts: list[int],
    opening: bool,
    options: dict[str, Any],
    named: bool,
) -> None:
    pool = _POOLS[order]
    data = (_opening(order) if opening else b"") + b"".join(pool[name] for name in picks)
    assert_hot_lane_same(split_at(data, cuts), "openai-chat" if named else None, **options)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    order=st.sampled_from(sorted(_ORDERS)),
    runs=st.lists(st.tuples(_PICK, st.integers(1, 4)), min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 30000), max_size=4),
    options=HOT_LANE_OPTIONS,
)
def test_chat_hot_lane_runs_equal_full_path(
    order: str, runs: list[tuple[str, int]], cuts: list[int], options: dict[str, Any]
) -> None:
    """Runs of the same chunk, so that shapes are learned and then taken (and met again
    after other chunks changed the state)."""
    pool = _POOLS[order]
    data = _opening(order) + b"".join(pool[name] * n for name, n in runs)
    assert_hot_lane_same(split_at(data, cuts), "openai-chat", **options)


# Each: a shape learned, something that changes what the fast path takes, the shape again.
_SCENARIOS = [
    ["hello", "hello", "hello", "new fingerprint", "hello", "hello", "hello"],
    ["hello", "hello", "hello", "upstream", "hello", "with usage", "hello", "hello"],
    ["hello", "hello", "empty", "hello", "empty"],
    ["dup probe", "dup probe", "dup probe", "dup probe"],
    ["dup later", "dup later", "dup later", "dup first", "dup first", "dup first"],
    ["hello", "hello", "obf long", "obf empty", "obf unicode", "obf bad utf8", "obf raw control"],
    ["start 0", "args 0", "args 0 plain", "args 0", "finish tools", "args 0", "args 0 plain"],
    ["start 0", "args 0", "args 0", "args 0", "refusal", "args 0", "args 0"],
    ["start 0", "args 0", "args 0", "start 1", "args 1", "args 1", "args 0", "args 1"],
    ["start 0", "args 0", "args 0", "start 0 again", "args 0", "args 0", "args 0"],
    ["start 0", "args 0", "args 0", "args 0 empty", "args 0 bad escape", "args 0 escapes"],
    ["start 0", "args 0", "args 0", "args 2", "args with id", "args empty id", "args 0"],
    ["hello", "hello", "hello", "start 0", "args 0", "args 0", "hello", "hello", "args 0"],
    ["reasoning", "reasoning", "reasoning", "reasoning details", "reasoning", "reasoning"],
    ["reasoning content"] * 3 + ["hello", "hello", "hello", "reasoning content"] * 2,
    ["reasoning content"] * 3 + ["reasoning escaped", "citations", "reasoning content", "hello"],
    ["hello", "hello", "hello", "citations", "hello", "annotation", "hello"],
    ["new id", "hello", "new id", "new created", "hello", "new created", "hello"],
    ["hello", "hello", "hello", "other choice", "hello", "finishing", "hello"],
    ["hello", "hello", "hello", "error", "hello"],
    ["hello", "hello", "hello", "done", "hello"],
    ["hello", "hello", "hello", "finish usage", "hello", "usage only", "hello"],
    ["start 0", "args 0", "args 0", "reasoning content", "args 0", "args 0"],
]


# Each a text chunk the lane must leave to the full path once the text shape is learned
# (most of them end the fold with an error, so each gets a stream of its own).
_SCENARIOS += [
    ["hello", "hello", name, "hello"]
    for name in _NAMES
    if name.startswith(("raw ", "bad ", "cut ", "lone ", "trailing ", "utf8 ", "obf "))
]
_SCENARIOS += [
    ["start 0", "args 0", "args 0", name, "args 0"] for name in _NAMES if name.startswith("args ")
]


@pytest.mark.parametrize("order", sorted(_ORDERS))
@pytest.mark.parametrize("scenario", _SCENARIOS, ids=lambda names: "+".join(names[:3]))
def test_chat_hot_lane_state_changes(order: str, scenario: list[str]) -> None:
    pool = _POOLS[order]
    data = _opening(order) + b"".join(pool[name] for name in scenario)
    for size in (len(data), 7, 97, 301):
        pieces = [data[at : at + size] for at in range(0, len(data), size)]
        assert_hot_lane_same(pieces, "openai-chat")
    assert_hot_lane_same([data[:50], data[50:]], "openai-chat", strict=True)
    assert_hot_lane_same([data[:50], data[50:]], "openai-chat", partial_arguments=True)
    limits = Limits(max_part_chars=40, max_tool_argument_chars=12)
    assert_hot_lane_same([data[:50], data[50:]], "openai-chat", limits=limits)


_CHAT_RECORDINGS = sorted(e["file"] for e in INDEX if e.get("api") == "chat-completions")


@pytest.mark.parametrize("rel", _CHAT_RECORDINGS)
def test_chat_recordings_hot_lane_equals_full_path(rel: str) -> None:
    data = read(rel)
    for size in (7, 61, 300, 4096):
        pieces = [data[at : at + size] for at in range(0, len(data), size)]
        assert_hot_lane_same(pieces, "openai-chat")
        assert_hot_lane_same(pieces, None)
    assert_hot_lane_same([data], "openai-chat", strict=True)
    assert_hot_lane_same([data], "openai-chat", partial_arguments=True)


@pytest.mark.parametrize(
    ("rel", "most"),
    [
        ("openai-chat/text-long-nano.sse", 5),
        ("openai-chat/tool-call-long-args.sse", 4),
        ("openai-chat/tool-calls-parallel-interleaved-args.sse", 7),
        ("azure-openai/chat-model-router.sse", 6),
        ("deepseek/chat-finish-length.sse", 4),
        ("deepseek/reasoner-reasoning-content.sse", 6),
        ("deepseek/reasoner-tool-call.sse", 6),
        ("zai/glm-thinking-reasoning-content.sse", 5),
        ("xai/chat-reasoning-content-tool-call.sse", 5),
    ],
)
def test_chat_hot_lane_takes_the_common_chunks(
    monkeypatch: pytest.MonkeyPatch, rel: str, most: int
) -> None:
    """Not vacuous: on real recordings the lane takes nearly every text, reasoning and
    argument chunk, and decode() sees only the few that open or end something."""
    data = read(rel)
    decoded = decoded_payloads(monkeypatch, openai_chat.OpenAIChatDecoder)
    pieces = [data[at : at + 4096] for at in range(0, len(data), 4096)]
    deltas = sum(type(e) is PartDelta for e in fold(pieces, "openai-chat"))
    assert deltas >= data.count(b"\ndata: ") - 5
    assert len(decoded) <= most
    assert decoded[-1].get("choices") == [] or decoded[-1]["choices"][0]["finish_reason"]


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[bytes]:
    """Where the decoder's method `name` (taking the bytes and an offset) was called."""
    calls: list[bytes] = []
    original = getattr(openai_chat.OpenAIChatDecoder, name)

    def counting(self: openai_chat.OpenAIChatDecoder, data: bytes, at: Any) -> Any:
        calls.append(data[at : at + 40] if type(at) is int else data)
        return original(self, data, at)

    monkeypatch.setattr(openai_chat.OpenAIChatDecoder, name, counting)
    return calls


@pytest.mark.parametrize(
    "changed",
    [
        # Groq compound sends a new id on every chunk; others a new timestamp.
        lambda n: {"id": f"chatcmpl-{n}"},
        lambda n: {"created": 1700000000 + n},
        # Not plain at all: usage in every chunk (Perplexity), a channel (Groq gpt-oss).
        lambda n: {"usage": {"completion_tokens": n}},
        lambda n: {"delta": {"content": f" word{n}", "channel": "final"}},
    ],
)
def test_chat_hot_lane_gives_up_when_it_cannot_pay(
    monkeypatch: pytest.MonkeyPatch, changed: Callable[[int], dict[str, Any]]
) -> None:
    """A stream whose chunks the lane cannot take: it stops learning after a few chunks
    and goes off, so the fold frames the rest as without the lane."""
    probes = _counting(monkeypatch, "_hot_probe")
    learns = _counting(monkeypatch, "_hot_learn")
    chunks = [_text("openai", b"Hi")]
    for n in range(300):
        fields = changed(n)
        delta = fields.pop("delta", {"content": f" word{n}"})
        chunks.append(_chunk("openai", delta, **fields))
    data = b"".join(chunks)
    events = fold([data[at : at + 997] for at in range(0, len(data), 997)], "openai-chat")
    text = "".join(e.content or "" for e in events if type(e) is PartDelta)
    assert text == "Hi" + "".join(f" word{n}" for n in range(300))
    assert len(probes) <= 4
    assert len(learns) <= openai_chat._HOT_CREDIT + 2
    assert_hot_lane_same(split_at(data, [5000, 20000]), "openai-chat")


@pytest.mark.parametrize(
    "rel", ["openai-chat/text-long-nano.sse", "deepseek/reasoner-tool-call.sse"]
)
def test_chat_hot_lane_state_saves_and_restores(rel: str) -> None:
    """A fold saved once the lane learned shapes restores and continues the same (the
    shapes are plain data)."""
    data = read(rel)
    pieces = [data[at : at + 1000] for at in range(0, len(data), 1000)]
    half = len(pieces) // 2
    folder = StreamFolder(provider="openai-chat")
    events = [e for piece in pieces[:half] for e in folder.feed(piece)]
    assert folder._decoder is not None and folder._decoder._hot_shapes  # type: ignore[attr-defined]
    restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    events += [e for piece in pieces[half:] for e in restored.feed(piece)] + restored.close()
    whole = fold(pieces, "openai-chat")
    assert [event_to_json(e) for e in events] == [event_to_json(e) for e in whole]


@pytest.mark.parametrize("bad", [b"\x01", b"\n", b"\xff", b"\\", b'"'])
def test_a_raw_obfuscation_value_json_rejects_is_left_to_the_full_path(bad: bytes) -> None:
    """The obfuscation value the lane lets vary must still be one JSON accepts as is."""
    plain = [_chunk("openai", {"content": f"t{i}"}) for i in range(6)]
    broken = plain[0].replace(b'"obfuscation":"Ab3"', b'"obfuscation":"A' + bad + b'3"')
    assert broken != plain[0]
    data = _chunk("openai", {"role": "assistant", "content": ""}) + b"".join(plain) + broken
    assert_hot_lane_same([data], "openai-chat")
    assert_hot_lane_same([data + b"".join(plain)], "openai-chat", strict=True)
