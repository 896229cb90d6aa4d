"""Bring your own provider: a decoder written outside streamfold, registered by name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import streamfold
from streamfold import (
    ClosePart,
    ContentPart,
    Decoder,
    Delta,
    EndMessage,
    GrowPart,
    MessageCompleted,
    OpenPart,
    PartCompleted,
    PartDelta,
    PartStarted,
    ProviderErrored,
    ReportError,
    SkipEvent,
    StreamProtocolError,
    ToolCall,
    UpdateMessage,
    Usage,
    UsageError,
    UsageUpdated,
    afold_message,
    detect_provider,
    fold,
    fold_message,
    register_provider,
    registered_providers,
    unregister_provider,
)
from streamfold.providers import ALIASES, canonical_provider


class LineChatDecoder(Decoder):
    """A made-up JSON-lines chat format, decoded the way a user outside streamfold would.

    {"ev": "begin", "model": ...}, {"ev": "think" | "say", "text": ..., "phase": ...},
    {"ev": "call", "id": ..., "fn": ..., "args": ...}, {"ev": "end", "reason": ...,
    "tokens": {"in": n, "out": n}}, {"ev": "error", "code": ..., "message": ...}.
    """

    provider = "linechat"

    def __init__(self, *, choice: int = 0, strict: bool = False) -> None:
        super().__init__(choice=choice, strict=strict)
        self.open_key: str | None = None  # the block being written, closed by the next
        self.blocks = 0

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Delta]:
        ev = payload["ev"]
        if ev == "begin":
            return [UpdateMessage(metadata={"model": payload["model"]})]
        if ev in ("think", "say"):
            out = self._switch(ev, ContentPart(type="thinking" if ev == "think" else "text"))
            options = {"utterance": "narration"} if payload.get("phase") == "commentary" else None
            return [*out, GrowPart(self.open_key, payload["text"], options)]
        if ev == "call":
            key = "call:" + payload["id"]
            out = self._switch(key, ToolCall(call_id=payload["id"], name=payload.get("fn")))
            return [*out, GrowPart(key, payload["args"])]
        if ev == "end":
            tokens = payload["tokens"]
            usage = Usage(input_tokens=tokens["in"], output_tokens=tokens["out"])
            reason = "tool_use" if payload["reason"] == "call" else "stop"
            return [
                *self._close(),
                UpdateMessage(status="complete", stop_reason=reason, usage=usage),
                EndMessage(),
            ]
        if ev == "error":
            return [ReportError(payload["code"], payload["message"], payload)]
        return [SkipEvent(str(ev))]

    def _switch(self, kind: str, part: ContentPart | ToolCall) -> list[Delta]:
        if self.open_key is not None and self.open_key.startswith(kind):
            return []
        out = self._close()
        self.blocks += 1
        self.open_key = kind if kind.startswith("call:") else f"{kind}{self.blocks}"
        return [*out, OpenPart(self.open_key, part)]

    def _close(self) -> list[Delta]:
        if self.open_key is None:
            return []
        key, self.open_key = self.open_key, None
        return [ClosePart(key)]


def _is_linechat(payload: dict[str, Any], event: str | None) -> bool:
    return isinstance(payload.get("ev"), str)


LINES = [
    {"ev": "begin", "model": "tiny-1"},
    {"ev": "think", "text": "The user wants "},
    {"ev": "think", "text": "the weather."},
    {"ev": "say", "text": "Let me look ", "phase": "commentary"},
    {"ev": "say", "text": "that up."},
    {"ev": "call", "id": "c1", "fn": "weather", "args": '{"city": '},
    {"ev": "call", "id": "c1", "args": '"Oslo"}'},
    {"ev": "heartbeat"},
    {"ev": "end", "reason": "call", "tokens": {"in": 12, "out": 9}},
]


@pytest.fixture(autouse=True)
def linechat() -> Iterator[None]:
    register_provider("linechat", LineChatDecoder, aliases=("lc",), detect=_is_linechat)
    yield
    unregister_provider("linechat")


def ndjson(lines: list[dict[str, Any]]) -> bytes:
    import json

    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@pytest.mark.parametrize("provider", ["linechat", "lc", None])
def test_a_registered_provider_gets_every_event_display_item_and_marker(
    provider: str | None,
) -> None:
    events = list(fold([ndjson(LINES)], provider))
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "PartStarted",
        "PartDelta",
        "PartDelta",
        "PartCompleted",
        "PartStarted",
        "PartDelta",
        "PartDelta",
        "PartCompleted",
        "PartStarted",
        "PartDelta",
        "PartDelta",
        "PartCompleted",
        "UsageUpdated",
        "MessageCompleted",
    ]
    done = [e for e in events if isinstance(e, PartCompleted)]
    assert all(d.explicit for d in done)
    items = [item for d in done for item in d.display_items]
    assert [(i.type, i.content) for i in items] == [
        ("thinking", {"text": "The user wants the weather."}),
        ("text", {"text": "Let me look that up.", "utterance": "narration"}),
        ("tool_call", {"call_id": "c1", "name": "weather", "arguments": {"city": "Oslo"}}),
    ]
    assert [e.part_type for e in events if isinstance(e, PartDelta)] == [
        "thinking",
        "thinking",
        "text",
        "text",
        "tool_call",
        "tool_call",
    ]
    assert isinstance(events[0], PartStarted)
    usage = next(e for e in events if isinstance(e, UsageUpdated)).usage
    assert (usage.input_tokens, usage.output_tokens) == (12, 9)
    final = events[-1]
    assert isinstance(final, MessageCompleted)
    message = final.message
    assert message.metadata["provider"] == "linechat"
    assert message.metadata["model"] == "tiny-1"
    assert message.metadata["skipped_events"] == {"heartbeat": 1}
    assert message.stop_reason == "tool_use"
    assert streamfold.is_narration(message)
    # Decoded dicts fold the same as the bytes.
    assert fold_message(LINES, provider) == message


def test_a_registered_provider_reports_errors_like_a_built_in() -> None:
    lines = [*LINES[:4], {"ev": "error", "code": "overloaded", "message": "try later"}]
    events = list(fold([ndjson(lines)]))
    errored = next(e for e in events if isinstance(e, ProviderErrored))
    assert errored.error_type == "overloaded"
    assert errored.partial.content[-1].content == "Let me look "
    assert events[-1].message.status == "error"  # type: ignore[union-attr]
    with pytest.raises(StreamProtocolError) as caught:
        fold_message([ndjson([LINES[0], {"ev": "say"}])])
    assert caught.value.provider == "linechat"
    assert caught.value.position == 2
    assert "KeyError" in str(caught.value)


async def test_a_registered_provider_folds_under_afold() -> None:
    async def lines() -> Any:
        for line in LINES:
            yield line

    assert await afold_message(lines()) == fold_message(LINES)


def test_detection_asks_registered_detectors_after_the_built_ins() -> None:
    assert detect_provider({"ev": "say"}) == "linechat"
    assert detect_provider({"ev": "say", "choices": []}) == "openai-chat"
    assert registered_providers()[-1] == "linechat"
    assert "linechat" in registered_providers()
    assert "linechat" not in streamfold.PROVIDERS


def test_a_name_in_use_is_refused_unless_replace_is_given() -> None:
    with pytest.raises(UsageError, match="'anthropic' already registered"):
        register_provider("anthropic", LineChatDecoder)
    with pytest.raises(UsageError, match="'openai' already registered"):
        register_provider("other", LineChatDecoder, aliases=("openai",))
    with pytest.raises(UsageError, match="'lc' already registered"):
        register_provider("lc", LineChatDecoder)
    assert canonical_provider("anthropic") == "anthropic"
    assert "other" not in registered_providers()


def test_replace_swaps_a_built_in_decoder_and_keeps_its_name() -> None:
    original = streamfold.providers.decoder_class("ollama")

    class Quiet(LineChatDecoder):
        provider = "ollama"

    register_provider("ollama", Quiet, detect=None, replace=True)
    try:
        assert streamfold.providers.decoder_class("ollama") is Quiet
        assert detect_provider({"done": False, "message": {}}) is None
        with pytest.raises(UsageError, match="a provider you registered"):
            unregister_provider("ollama")
    finally:
        from streamfold.providers import _detect_ollama

        register_provider("ollama", original, detect=_detect_ollama, replace=True)
    assert detect_provider({"done": False, "message": {}}) == "ollama"


@pytest.mark.parametrize("name", ["", "Mine", "has space", "-dash", "x" * 65, 3])
def test_a_bad_name_is_refused(name: Any) -> None:
    with pytest.raises(UsageError, match="expected a provider name"):
        register_provider(name, LineChatDecoder)


def test_a_decoder_must_be_a_decoder() -> None:
    with pytest.raises(UsageError, match=r"subclass of streamfold\.Decoder"):
        register_provider("notone", dict)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="expected detect to be callable"):
        register_provider("notone", LineChatDecoder, detect="yes")  # type: ignore[arg-type]
    register_provider("lazy", lambda: dict)  # type: ignore[arg-type,return-value]
    try:
        with pytest.raises(UsageError, match="loader to return a Decoder subclass"):
            fold_message([{"x": 1}], "lazy")
    finally:
        unregister_provider("lazy")


def test_unregistering_forgets_the_name_and_its_aliases() -> None:
    unregister_provider("lc")
    assert "lc" not in ALIASES
    with pytest.raises(UsageError, match="got 'linechat'"):
        canonical_provider("linechat")
    register_provider("linechat", LineChatDecoder, aliases=("lc",), detect=_is_linechat)


def test_an_undetected_stream_names_every_registered_provider() -> None:
    with pytest.raises(StreamProtocolError, match="linechat") as caught:
        fold_message([{"unknown": 1}])
    assert "streamfold" in str(caught.value)


def test_a_detector_that_fails_is_named_as_the_fault() -> None:
    def fragile(payload: dict[str, Any], event: str | None) -> bool:
        return bool(payload["ev"])

    register_provider("fragile", LineChatDecoder, detect=fragile)
    try:
        with pytest.raises(UsageError, match=r"provider 'fragile': .* KeyError"):
            fold_message([{"type": "ping"}])
        # Events a built-in recognises never reach it.
        assert fold_message([{"done": True, "message": {"content": "hi"}}]).text == "hi"
    finally:
        unregister_provider("fragile")


# --- the shared field checks: every decoder says a wrong type the same way ----------------

# One event per provider with a string where a count belongs.
_COUNT_AS_TEXT = [
    (
        "anthropic",
        {"type": "content_block_delta", "index": "3", "delta": {"type": "text_delta"}},
        "index",
    ),
    ("openai-chat", {"choices": [], "usage": {"prompt_tokens": "3"}}, "prompt_tokens"),
    (
        "openai-responses",
        {"type": "response.completed", "response": {"id": "r", "usage": {"input_tokens": "3"}}},
        "usage input_tokens",
    ),
    (
        "gemini",
        {"candidates": [], "usageMetadata": {"promptTokenCount": "3"}},
        "usageMetadata.promptTokenCount",
    ),
    ("bedrock", {"metadata": {"usage": {"inputTokens": "3"}}}, "metadata.usage.inputTokens"),
    ("ollama", {"model": "m", "response": "", "done": True, "eval_count": "3"}, "eval_count"),
]


@pytest.mark.parametrize(("provider", "event", "name"), _COUNT_AS_TEXT)
def test_a_wrong_type_says_what_was_expected_and_what_arrived_alike(
    provider: str, event: dict[str, Any], name: str
) -> None:
    with pytest.raises(StreamProtocolError) as info:
        fold_message([event], provider=provider)
    assert f'expected {name} to be an integer, got str "3"' in str(info.value)
