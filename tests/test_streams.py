"""`to_stream`: a Message as each provider's own stream, folded back.

What "the same Message" means (`to_stream`'s docstring):
- a message folded from provider P, written as P's stream and folded again, is equal to
  itself: every field, metadata and raw usage included (`message_json` equality);
- any message written as any provider's stream folds to a Message that keeps its essence
  (the text, the thinking text, each tool call's name and arguments, the status and the
  stop reason, but for the words the provider has none for: `_expected_end`) and that,
  written as that stream again, comes back equal to itself: one trip reaches the
  provider's form, and that form travels exactly.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invoke_support import INVOKE_SOURCES, invoke_bytes
from stream_support import messages
from support import ALL_RECORDINGS, message_json, read

import streamfold
from streamfold import (
    ContentPart,
    EncodeError,
    Message,
    ReplayWarning,
    UsageError,
    fold_message,
    to_stream,
)
from streamfold.message import Status, StopReason, settled_stop_reason
from streamfold.providers import canonical_provider
from streamfold.streams import STREAM_WRITERS

PROVIDERS = sorted(STREAM_WRITERS)
MESSAGES = {rel: fold_message(read(rel)) for rel in ALL_RECORDINGS}


def _own(message: Message) -> str:
    return canonical_provider(str(message.metadata["provider"]))


def _fold(message: Message, provider: str, **options: Any) -> Message:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReplayWarning)  # (what is dropped is checked apart)
        chunks = to_stream(message, provider, **options)
    return fold_message(chunks, provider)


def _essence(message: Message, provider: str) -> dict[str, Any]:
    texts = [p for p in message.content if p.type == "text"]
    if provider in ("openai-chat", "openai-responses"):
        # Refusals are parts of their own there (on Chat apart from the text, as its wire
        # has them: their order against the text is lost); elsewhere they are text.
        refusals = [p for p in texts if p.options.get("refusal") is True]
        texts = [p for p in texts if p.options.get("refusal") is not True]
    else:
        refusals = []
    return {
        "text": "".join(p.content or "" for p in texts),
        "refusal": "".join(p.content or "" for p in refusals),
        "thinking": "".join(p.content or "" for p in message.content if p.type == "thinking"),
        "calls": [(c.name, c.arguments) for c in message.tool_calls],
        "end": (message.status, message.stop_reason),
    }


# Stop reasons a provider's stream has no word for, and what its fold reads instead.
_NO_WORD: dict[str, dict[str, StopReason]] = {
    # Anthropic's pause_turn: only Anthropic (and Claude on Bedrock) says it.
    "pause": {p: "stop" for p in PROVIDERS if p not in ("anthropic", "bedrock-invoke")},
    # An MCP approval request waiting: a Responses item no other provider carries.
    "approval": {p: "stop" for p in PROVIDERS if p != "openai-responses"},
}


def _expected_end(message: Message, provider: str) -> tuple[Status, StopReason | None]:
    """The status and stop reason a fold of the provider's stream gives back: the message's,
    but for the words the provider has none for (to_stream's docstring lists them), settled
    as every fold settles them (calls under "stop" stop with tool_use)."""
    status, stop = _said_end(message, provider)
    refused = any(p.options.get("refusal") is True for p in message.content)
    # A refusal part says it: on Chat with a "stop" finish, on Responses unless a tool call
    # came.
    says_refusal = provider == "openai-chat" or (
        provider == "openai-responses" and not message.tool_calls
    )
    if says_refusal and refused and status == "complete" and stop == "stop":
        stop = "refusal"
    # (An MCP approval request is a Responses item: other streams leave it out.)
    content = message.content if provider == "openai-responses" else []
    settled = settled_stop_reason(stop, status, message.tool_calls, content)
    return status, settled


def _said_end(message: Message, provider: str) -> tuple[Status, StopReason | None]:
    status, stop = message.status, message.stop_reason
    if status == "cancelled" and provider != "openai-responses":
        return "incomplete", None  # a cancelled stream is a cut one on the wire
    if stop == "refusal":
        # A refusal (Anthropic's word) is a filtered answer where the provider has one; on
        # Chat and Responses it is said by a refusal part, which a bare stop reason is not.
        if provider in ("anthropic", "bedrock-invoke"):
            return "content_filtered", "refusal"
        if provider in ("bedrock", "gemini"):
            return "content_filtered", "content_filter"
        return status, "stop"
    if status == "content_filtered" and provider == "ollama":
        return "complete", "stop"  # Ollama has no word for a filtered answer
    if status == "content_filtered" and provider in ("anthropic", "bedrock-invoke"):
        return status, "refusal"  # Anthropic's word for it
    if stop == "other" and provider != "gemini":
        return status, "stop"  # only Gemini says OTHER
    if stop is not None and provider in _NO_WORD.get(stop, {}):
        return status, _NO_WORD[stop][provider]
    return status, stop


def _check_travels(message: Message, provider: str) -> None:
    once = _fold(message, provider)
    expected = {**_essence(message, provider), "end": _expected_end(message, provider)}
    if not any(c.arguments for c in message.tool_calls if isinstance(c.arguments, str)):
        assert _essence(once, provider) == expected
    twice = _fold(once, provider)
    assert message_json(twice) == message_json(once)


# --- every recording -------------------------------------------------------------------------


@pytest.mark.parametrize("piece", [3, 100_000])
@pytest.mark.parametrize("rel", ALL_RECORDINGS)
def test_a_message_comes_back_the_same_from_its_own_providers_stream(rel: str, piece: int) -> None:
    message = MESSAGES[rel]
    provider = _own(message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its own provider's stream carries every part
        chunks = to_stream(message, provider, piece=piece)
    assert message_json(fold_message(chunks, provider)) == message_json(message)
    # One event a chunk: the chunks joined fold the same as the chunks one by one.
    assert message_json(fold_message(b"".join(chunks), provider)) == message_json(message)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("rel", ALL_RECORDINGS)
def test_any_recordings_message_on_any_provider_keeps_its_essence(rel: str, provider: str) -> None:
    _check_travels(MESSAGES[rel], provider)


# --- generated messages ----------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=messages(), provider=st.sampled_from(PROVIDERS), piece=st.integers(1, 20))
def test_generated_messages_keep_their_essence_on_every_provider(
    message: Message, provider: str, piece: int
) -> None:
    once = fold_message(to_stream(message, provider, piece=piece), provider)
    expected = {**_essence(message, provider), "end": _expected_end(message, provider)}
    assert _essence(once, provider) == expected
    twice = _fold(once, provider)
    assert message_json(twice) == message_json(once)


# --- what a stream cannot carry, and misuse -----------------------------------------------------

_IMAGE = Message(role="assistant", content=[ContentPart.text("see"),
                 ContentPart.image_url("https://example.com/a.png")])  # fmt: skip


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_part_the_stream_cannot_carry_is_left_out_with_a_warning_or_refused_when_strict(
    provider: str,
) -> None:
    with pytest.warns(ReplayWarning, match=r"part 1 \(image_url part\) is left out"):
        back = fold_message(to_stream(_IMAGE, provider), provider)
    assert [(p.type, p.content) for p in back.content] == [("text", "see")]
    with pytest.raises(EncodeError, match=r"part 1 \(image_url part\)") as caught:
        to_stream(_IMAGE, provider, strict=True)
    assert caught.value.provider == provider


def test_another_providers_opaque_block_is_left_out_by_name() -> None:
    message = MESSAGES["anthropic/web-search-citations.sse"]
    with pytest.warns(ReplayWarning) as caught:
        to_stream(message, "openai-chat")
    said = [str(w.message) for w in caught]
    assert any("part 0 (unsupported part 'server_tool_use') is left out" in w for w in said)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("not a message", "anthropic"), {}, "expected a streamfold Message, got str"),
        ((Message.assistant("hi"), "nobody"), {}, "nobody"),
        ((Message.assistant("hi"), "streamfold"), {}, "expected one of anthropic, bedrock"),
        ((Message.assistant("hi"), 3), {}, "expected a provider name, got int"),
        ((Message.assistant("hi"), "anthropic"), {"piece": 0}, "expected piece to be an int >= 1"),
        ((Message.assistant("hi"), "anthropic"), {"piece": True}, "expected piece"),
        ((Message.assistant("hi"), "anthropic"), {"model": None}, "expected model to be a str"),
        ((Message.assistant("hi"), "anthropic"), {"strict": "yes"}, "expected True or False"),
        ((Message.user("hi"), "anthropic"), {}, "expected an assistant message"),
    ],
)
def test_misuse_is_a_usage_error_that_names_what_arrived(
    args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        to_stream(*args, **kwargs)


def test_aliases_name_the_provider_they_stand_for() -> None:
    message = Message.assistant("hi")
    assert to_stream(message, "deepseek")[1:] == to_stream(message, "openai-chat")[1:]
    assert streamfold.to_stream is to_stream


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_event_a_chunk_and_the_text_in_pieces(provider: str) -> None:
    text = "0123456789" * 3
    chunks = to_stream(Message.assistant(text), provider, piece=7)
    joined = b"".join(chunks)
    # The text arrives in pieces of at most 7 characters (json-quoted in each event).
    for start in range(0, len(text), 7):
        assert json.dumps(text[start : start + 7]).encode() in joined or provider in (
            "bedrock-invoke"  # (its events are base64 inside the frames)
        )
    assert fold_message(chunks, provider).text == text


def test_a_signature_goes_only_to_the_provider_that_issued_it() -> None:
    # (As encode leaves out a foreign signature: it would not verify.)
    signed = MESSAGES["anthropic/thinking-signature.sse"]
    assert signed.content[0].options["signature"]
    for provider in ("gemini", "bedrock", "openai-chat"):
        back = _fold(signed, provider)
        assert back.content[0].type == "thinking"
        assert "signature" not in back.content[0].options
    hand_built = Message.assistant([ContentPart.thinking("hmm", signature="c2ln"),
                                    ContentPart.text("ok")])  # fmt: skip
    for provider in ("anthropic", "bedrock-invoke", "gemini", "bedrock", "openai-chat"):
        assert _fold(hand_built, provider).content[0].options["signature"] == "c2ln"


@pytest.mark.parametrize("rel", INVOKE_SOURCES)
def test_claude_on_bedrocks_invoke_stream_comes_back_the_same(rel: str) -> None:
    # (The invoke streams tests/invoke_support.py builds from the Anthropic recordings,
    # Bedrock's invocation metrics and latencies on their last chunk.)
    message = fold_message(invoke_bytes(rel), "bedrock-invoke")
    chunks = to_stream(message, "bedrock-invoke")
    assert message_json(fold_message(chunks, "bedrock-invoke")) == message_json(message)
