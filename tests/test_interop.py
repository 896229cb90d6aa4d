"""The adapters to other libraries' types: every recording there and back.

What comes back from `from_x(to_x(message))` must equal the recording's Message with the
losses the adapter's docstring lists applied (the functions `*_kept` below, one per
target): a loss nobody listed fails. The target libraries' own models validate every
object on the way (the adapters build with model_validate), and `from_x` reads the
object's JSON dict as it reads the object.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from langchain_core.messages import AIMessage
from openai.types.responses import ResponseOutputItem
from pydantic import TypeAdapter
from pydantic_ai.messages import ModelResponse
from support import ALL_RECORDINGS, IMPORTED_FROM, read

import streamfold
from streamfold import ContentPart, Message, StreamfoldError, ToolCall, Usage
from streamfold.errors import InteropError, UsageError
from streamfold.interop import anthropic as to_anthropic
from streamfold.interop import langchain as to_langchain
from streamfold.interop import openai as to_openai
from streamfold.interop import pydantic_ai as to_pydantic_ai
from streamfold.interop._common import build_message, mark_utterances
from streamfold.message import pending_approvals
from streamfold.parts import (
    INFERRED_OPTION,
    Citation,
    CitationSource,
    utterance,
    utterance_inferred,
)
from streamfold.providers.anthropic.decode import _STOP as ANTHROPIC_STOP
from streamfold.providers.openai_chat.decode import _FINISH as CHAT_FINISH
from streamfold.providers.openai_responses import CLIENT_CALL_INPUTS

MESSAGES = {rel: streamfold.fold_message(read(rel)) for rel in ALL_RECORDINGS}


def _unmarked(part: ContentPart) -> ContentPart:
    options = {k: v for k, v in part.options.items() if k not in ("utterance", INFERRED_OPTION)}
    return part.model_copy(update={"options": options})


def _zeroed(usage: Usage | None, *names: str) -> Usage | None:
    """The usage as a total, with the counts `names` reading 0 when not reported."""
    if usage is None:
        return None
    zeros = {name: getattr(usage, name) or 0 for name in names}
    return usage.model_copy(update={**zeros, "cumulative": True})


# --- the narration rule the readers share ---------------------------------------------------


@pytest.mark.parametrize("rel", ALL_RECORDINGS)
def test_mark_utterances_is_the_folds_rule(rel: str) -> None:
    # The readers mark text by this function; on every recording it gives the fold's markers.
    message = MESSAGES[rel]
    order = message.stream_order()
    unmarked = [
        _unmarked(x) if isinstance(x, ContentPart) and x.options.get(INFERRED_OPTION) else x
        for x in order
    ]
    assert mark_utterances(unmarked, message.status, message.stop_reason) == order


# --- pydantic-ai -----------------------------------------------------------------------------


_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
           "reasoning_tokens")  # fmt: skip


def pydantic_ai_kept(message: Message, _made: Any) -> Message:
    """Lost: usage counts not reported read 0; the usage is a total."""
    return message.model_copy(update={"usage": _zeroed(message.usage, *_COUNTS)})


def test_pydantic_ai_parts_are_the_ones_pydantic_ai_users_expect() -> None:
    response = to_pydantic_ai.to_model_response(
        MESSAGES["anthropic/web-search-thinking-citations.sse"]
    )
    kinds = [part.part_kind for part in response.parts]
    assert kinds[:4] == ["thinking", "builtin-tool-call", "builtin-tool-return", "text"]
    thinking, search, found, text = response.parts[:4]
    assert thinking.signature  # type: ignore[union-attr]
    assert search.tool_name == found.tool_name == "web_search"  # type: ignore[union-attr]
    assert search.args == {"query": "San Francisco weather today"}  # type: ignore[union-attr]
    assert search.tool_call_id == found.tool_call_id  # type: ignore[union-attr]
    # The narration / answer markers are streamfold's own: in the response's metadata,
    # which pydantic-ai never sends to a model.
    assert text.provider_details is None
    assert response.metadata is not None
    saved = response.metadata["streamfold"]["parts"]
    assert saved[3]["options"] == {"utterance": "narration", INFERRED_OPTION: True}
    assert saved[-1]["options"] == {"utterance": "answer", INFERRED_OPTION: True}
    answers = [p for p in response.parts if p.part_kind == "text"]
    cited = next(p for p in answers if p.citations)
    assert cited.citations[0].sources[0].kind == "web"  # type: ignore[union-attr]
    assert cited.citations[0].sources[0].excerpts  # the cited text  # type: ignore[union-attr]
    assert response.finish_reason == "stop"
    assert response.provider_details is not None
    assert response.provider_details["finish_reason"] == "end_turn"
    assert response.usage.input_tokens == 22397

    calls = to_pydantic_ai.to_model_response(MESSAGES["openai-chat/tool-calls-parallel.sse"])
    tool_calls = [p for p in calls.parts if p.part_kind == "tool-call"]
    assert len(tool_calls) == 2 and calls.finish_reason == "tool_call"


def test_pydantic_ai_hostile_responses_are_interop_errors() -> None:
    import dataclasses

    response = to_pydantic_ai.to_model_response(MESSAGES["anthropic/thinking-signature.sse"])
    text = response.parts[1]
    assert text.part_kind == "text"
    # A lone surrogate: pydantic-ai's dataclass holds it, no JSON text can.
    lone = dataclasses.replace(response, parts=[dataclasses.replace(text, content="a\ud800")])
    with pytest.raises(InteropError, match="surrogates not allowed"):
        to_pydantic_ai.from_model_response(lone)
    # A dataclass holding what its type does not say (pydantic-ai does not check).
    wrong = dataclasses.replace(response)
    wrong.parts = [{"part_kind": "text", "content": 5}]  # type: ignore[list-item]
    with pytest.raises(InteropError):
        to_pydantic_ai.from_model_response(wrong)
    # Nesting deeper than any writer goes, as an object and as its dict.
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    nested = dataclasses.replace(response, metadata={"streamfold": {"metadata": {"x": deep}}})
    with pytest.raises(InteropError):
        to_pydantic_ai.from_model_response(nested)
    as_dict = TypeAdapter(ModelResponse).dump_python(response, mode="json")
    as_dict["metadata"] = {"streamfold": {"metadata": {"x": deep}}}
    with pytest.raises(InteropError):
        to_pydantic_ai.from_model_response(as_dict)
    with pytest.raises(InteropError, match="provider_name as a str"):
        to_pydantic_ai.to_model_response(MESSAGES["anthropic/text-basic.sse"], provider_name=5)  # type: ignore[arg-type]


def test_pydantic_ai_provider_name_names_the_provider_the_history_goes_to() -> None:
    message = MESSAGES["gemini/thought-parts-signature.sse"]
    assert to_pydantic_ai.to_model_response(message).provider_name == "google"
    vertex = to_pydantic_ai.to_model_response(message, provider_name="google-cloud")
    assert (vertex.provider_name, vertex.canonical_system) == ("google-cloud", "google-cloud")
    signed = vertex.parts[1]
    assert signed.provider_name == "google-cloud" and signed.provider_details
    assert to_pydantic_ai.from_model_response(vertex).metadata["provider"] == "gemini"
    assert to_pydantic_ai.PROVIDER_NAMES["openai-responses"] == "openai"


def test_pydantic_ai_reads_the_form_earlier_versions_wrote() -> None:
    message = MESSAGES["openai-responses/reasoning-summary.sse"]
    # As streamfold wrote it before: its own data in provider_details, each part's options
    # in the part's provider_details, the encrypted content among them.
    old = TypeAdapter(ModelResponse).dump_python(
        to_pydantic_ai.to_model_response(message), mode="json"
    )
    ours = old.pop("metadata")["streamfold"]
    saved = ours.pop("parts")
    old["provider_details"]["streamfold"] = ours
    for part, keep in zip(old["parts"], saved, strict=True):
        part["provider_details"] = keep["options"] or None
        part["signature"] = None
    back = to_pydantic_ai.from_model_response(old)
    assert back.content == message.content
    assert back.status == message.status and back.stop_reason == message.stop_reason


# --- LangChain -------------------------------------------------------------------------------


def langchain_kept(message: Message, _made: Any) -> Message:
    """Lost: input and output counts not reported read 0; the usage is a total."""
    usage = _zeroed(message.usage, "input_tokens", "output_tokens")
    return message.model_copy(update={"usage": usage})


def test_langchain_message_holds_standard_blocks_tool_calls_and_usage() -> None:
    message = MESSAGES["anthropic/thinking-then-tool-use.sse"]
    ai_message = to_langchain.to_ai_message(message)
    assert [b["type"] for b in ai_message.content_blocks] == ["reasoning", "tool_call"]
    assert ai_message.content_blocks[0]["extras"]["signature"]  # type: ignore[typeddict-item]
    assert [(c["id"], c["name"], c["args"]) for c in ai_message.tool_calls] == [
        (c.call_id, c.name, c.arguments) for c in message.tool_calls
    ]
    assert ai_message.usage_metadata is not None and message.usage is not None
    assert ai_message.usage_metadata["input_tokens"] == message.usage.input_tokens
    # Under the keys ChatAnthropic writes, so that it reads the blocks as its own.
    assert ai_message.response_metadata["stop_reason"] == "tool_use"
    assert ai_message.response_metadata["model_provider"] == "anthropic"
    assert ai_message.response_metadata["output_version"] == "v1"


def test_langchain_reads_a_chat_models_own_message() -> None:
    # What ChatOpenAI gives: a string and tool_calls, the finish reason in response_metadata.
    ai_message = AIMessage(
        content="Looking it up.",
        tool_calls=[{"id": "call_1", "name": "search", "args": {"q": "x"}}],
        response_metadata={"finish_reason": "tool_calls", "model_name": "gpt-test"},
        usage_metadata={"input_tokens": 5, "output_tokens": 7, "total_tokens": 12},
        id="run-1",
    )
    message = to_langchain.from_ai_message(ai_message)
    assert [p.content for p in message.content] == ["Looking it up."]
    assert streamfold.is_narration(message)
    assert message.stop_reason == "tool_use" and message.status == "complete"
    assert message.tool_calls[0].arguments == {"q": "x"}
    assert message.usage is not None and message.usage.output_tokens == 7
    assert message.metadata == {"id": "run-1", "model": "gpt-test"}


def _deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "hostile",
    [
        pytest.param({"content": [{"type": "text", "text": "a\ud800b"}]}, id="surrogate-text"),
        pytest.param(
            {"response_metadata": {"streamfold": {"metadata": {"k\udfff": 1}}}}, id="surrogate-key"
        ),
        pytest.param(
            {"response_metadata": {"streamfold": {"metadata": {"deep": _deep(100_000)}}}},
            id="deep-metadata",
        ),
        pytest.param(
            {"content": [{"type": "text", "text": "x", "extras": {"d": _deep(100_000)}}]},
            id="deep-extras",
        ),
        pytest.param({"content": 5}, id="content-int"),
        pytest.param({"usage_metadata": "many"}, id="usage-str"),
        pytest.param({"response_metadata": ["x"]}, id="metadata-list"),
    ],
)
def test_langchain_refuses_what_a_message_cannot_hold(hostile: dict[str, Any]) -> None:
    # As the stream doors refuse them: text no UTF-8 carries, nesting the input chooses,
    # wrong types in an AIMessage built without validation (model_construct).
    fields = {"content": "", "tool_calls": [], "response_metadata": {}, "usage_metadata": None,
              "id": None, **hostile}  # fmt: skip
    with pytest.raises(InteropError):
        to_langchain.from_ai_message(AIMessage.model_construct(**fields))


# --- Anthropic -------------------------------------------------------------------------------


def _sdk_block(block: dict[str, Any]) -> dict[str, Any]:
    """A block as the SDK's model keeps it (its fields, none of them null)."""
    from anthropic.types import ContentBlock
    from anthropic.types.beta import BetaContentBlock

    for kind in (ContentBlock, BetaContentBlock):
        try:
            model = TypeAdapter(kind).validate_python(block)
        except ValueError:
            continue
        dumped: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
        return dumped
    raise AssertionError(f"no SDK model for {block.get('type')}")


def anthropic_kept(message: Message, sdk: Any) -> Message:
    """Lost (the adapter's docstring): other providers' blocks and citations, options but
    the signature, tool call metadata but `caller`, statuses the API cannot say, reasoning
    tokens and the raw usage (the Message's), metadata but the id and model."""
    native = message.metadata.get("provider") in ("anthropic", "bedrock-invoke")
    order: list[ContentPart | ToolCall] = []
    for item in message.stream_order():
        if isinstance(item, ToolCall):
            keep = {k: v for k, v in item.metadata.items() if k == "caller" and native}
            order.append(item.model_copy(update={"metadata": keep}))
        elif item.type == "unsupported":
            if native:
                block = _sdk_block(item.options["block"])
                order.append(
                    _unmarked(item).model_copy(update={"options": {**item.options, "block": block}})
                )
        elif item.type == "thinking":
            signature = item.options.get("signature")
            options = {"signature": signature if isinstance(signature, str) else ""}
            order.append(item.model_copy(update={"options": options}))
        elif item.type == "text":
            citations = item.citations if native else []
            order.append(ContentPart(type="text", content=item.content, citations=citations))
    stop = sdk.stop_reason
    status, stop_reason = ("incomplete", None) if stop is None else ANTHROPIC_STOP[stop][::-1]
    usage = message.usage or Usage()
    kept_usage = Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        raw=sdk.usage.model_dump(mode="json", exclude_none=True),
        cumulative=True,
    )
    metadata = {
        "provider": "anthropic",
        "id": sdk.id,
        "model": sdk.model,
        "end_marker": stop is not None,
    }
    return build_message(order, status=status, stop_reason=stop_reason, raw_stop_reason=stop,
                    usage=kept_usage, metadata=metadata)  # fmt: skip


# --- OpenAI ----------------------------------------------------------------------------------


def _openai_usage(message: Message, sdk_usage: Any, *zeroed: str) -> Usage | None:
    """The usage as the target keeps it: `zeroed` counts read 0 when not reported, the raw
    usage is the target's."""
    if message.usage is None:
        return None
    kept = _zeroed(message.usage, *zeroed)
    assert kept is not None
    drop = {"cache_write_tokens": None} if "cache_write_tokens" not in zeroed else {}
    raw = sdk_usage.model_dump(mode="json", exclude_none=True)
    return kept.model_copy(update={**drop, "raw": raw})


def chat_kept(message: Message, sdk: Any) -> Message:
    """Lost (the adapter's docstring): the order of thinking, text, refusal and calls; part
    options, citations but a web page's, signatures, opaque blocks; statuses
    `finish_reason` cannot say; call metadata; cache writes and the raw usage; metadata but
    the id and model."""
    thinking = [p.content for p in message.content if p.type == "thinking" and p.content]
    texts = [p for p in message.content if p.type == "text" and p.content]
    answer = [p for p in texts if p.options.get("refusal") is not True]
    refusal = [p.content or "" for p in texts if p.options.get("refusal") is True]
    citations: list[Citation] = []
    offset = 0
    for part in answer:
        citations.extend(
            Citation(
                source=CitationSource(type="web", url=c.source.url, title=c.source.title or None),
                start_index=(c.start_index or 0) + offset,
                end_index=(c.end_index or 0) + offset,
            )
            for c in part.citations
            if c.source is not None and c.source.url is not None
        )
        offset += len(part.content or "") + 2
    order: list[ContentPart | ToolCall] = []
    if thinking:
        order.append(ContentPart.thinking("\n\n".join(thinking)))
    if answer:
        joined = "\n\n".join(p.content or "" for p in answer)
        order.append(ContentPart(type="text", content=joined, citations=citations))
    if refusal:
        order.append(ContentPart.text("\n\n".join(refusal), refusal=True))
    for i, call in enumerate(message.tool_calls):
        order.append(
            call.model_copy(update={"call_id": call.call_id or f"call_{i}", "metadata": {}})
        )
    finish = sdk.choices[0].finish_reason
    stop_reason, status = CHAT_FINISH[finish]
    if refusal and finish == "stop":
        stop_reason = "refusal"
    if stop_reason == "stop" and message.tool_calls:
        stop_reason = "tool_use"  # calls under "stop" (OpenRouter's o3-mini): the turn goes on
    return build_message(
        order,
        status=status,
        stop_reason=stop_reason,
        raw_stop_reason=finish,
        usage=_openai_usage(message, sdk.usage, "input_tokens", "output_tokens"),
        # (An empty model name, from a message that names none, is not kept.)
        metadata={"provider": "openai-chat", "id": sdk.id, "end_marker": True}
        | ({"model": sdk.model} if sdk.model else {}),
    )


def _sdk_item(block: dict[str, Any]) -> dict[str, Any]:
    dumped: dict[str, Any] = (
        TypeAdapter(ResponseOutputItem)
        .validate_python(block)
        .model_dump(mode="json", exclude_none=True)
    )
    return dumped


_RESPONSES_END = {  # status -> (status, stop reason, raw stop reason) read back
    "length": ("length", "length", "max_output_tokens"),
    "content_filtered": ("content_filtered", "content_filter", "content_filter"),
    "incomplete": ("incomplete", "other", "incomplete"),
    "error": ("error", "error", "failed"),
    "cancelled": ("cancelled", "cancelled", "cancelled"),
}


def responses_kept(message: Message, sdk: Any) -> Message:
    """Lost (the adapter's docstring): other providers' item ids and blocks, blocks the
    SDK does not know, inferred markers (inferred again), citations but their annotation,
    empty thinking, statuses and stop reasons the response cannot say, the raw usage,
    metadata but the id, model and created_at."""
    native = message.metadata.get("provider") == "openai-responses"
    order: list[ContentPart | ToolCall] = []
    for i, item in enumerate(message.stream_order()):
        if isinstance(item, ToolCall):
            kind = item.metadata.get("type")
            if kind not in CLIENT_CALL_INPUTS and kind != "custom_tool_call":
                item_id = item.metadata.get("item_id") or f"fc_{i}"
                update = {"call_id": item.call_id or f"call_{i}", "metadata": {"item_id": item_id}}
                item = item.model_copy(update=update)
            order.append(item)
        elif item.type == "unsupported":
            if native:
                try:
                    block = _sdk_item(item.options["block"])
                except ValueError:
                    continue  # an item newer than the SDK's models
                order.append(item.model_copy(update={"options": {**item.options, "block": block}}))
        elif item.type == "thinking":
            encrypted = item.options.get("encrypted_content")
            if not item.content and not isinstance(encrypted, str):
                continue
            options = {"id": item.options["id"] if native else f"rs_{i}",
                       "type": item.options["type"] if native else "summary_text"}  # fmt: skip
            if isinstance(encrypted, str):
                options["encrypted_content"] = encrypted
            order.append(ContentPart.thinking(item.content or "", **options))
        elif item.type == "text":
            options = {"id": item.options.get("id") or f"msg_{i}"}
            for key in ("refusal", "logprobs"):
                if key in item.options:
                    options[key] = item.options[key]
            if utterance(item) is not None and not utterance_inferred(item):
                options["utterance"] = item.options["utterance"]
            citations = item.citations if native else [
                Citation(
                    source=CitationSource(type="web", title=c.source.title or "", url=c.source.url),
                    start_index=c.start_index or 0,
                    end_index=c.end_index or 0,
                    metadata={"annotation": {"type": "url_citation", "url": c.source.url,
                              "title": c.source.title or "", "start_index": c.start_index or 0,
                              "end_index": c.end_index or 0}},
                )
                for c in item.citations
                if c.source is not None and c.source.url
            ]  # fmt: skip
            order.append(ContentPart(type="text", content=item.content, options=options,
                                     citations=citations))  # fmt: skip
    metadata: dict[str, Any] = {
        "provider": "openai-responses",
        "id": sdk.id,
        "model": sdk.model,
        "created_at": sdk.created_at,
        "response_status": sdk.status,
    }
    if message.status == "complete":
        calls = any(isinstance(x, ToolCall) for x in order)
        refused = any(isinstance(x, ContentPart) and x.options.get("refusal") for x in order)
        waiting = pending_approvals(x for x in order if isinstance(x, ContentPart))
        stop = "tool_use" if calls else "refusal" if refused else "approval" if waiting else "stop"
        status, raw_stop = "complete", "completed"
    else:
        status, stop, raw_stop = _RESPONSES_END[message.status]
    if status == "error":
        metadata["error"] = {"type": "failed", "message": "response failed"}
    metadata["end_marker"] = status != "error"
    return build_message(
        order,
        status=status,
        stop_reason=stop,
        raw_stop_reason=raw_stop,
        usage=_openai_usage(message, sdk.usage, *_COUNTS),
        metadata=metadata,
    )


# --- there and back ----------------------------------------------------------------------------


class Target(NamedTuple):
    """A target type: its writer and reader, its JSON form, what a round trip keeps."""

    name: str
    write: Callable[[Message], Any]
    read_back: Callable[[Any], Message]
    as_json: Callable[[Any], Any]
    kept: Callable[[Message, Any], Message]


def _dumped(made: Any) -> Any:
    return made.model_dump(mode="json")


TARGETS = [
    Target("chat-completion", to_openai.to_chat_completion, to_openai.from_chat_completion,
           _dumped, chat_kept),
    Target("response", to_openai.to_response, to_openai.from_response, _dumped, responses_kept),
    Target("anthropic-message", to_anthropic.to_message, to_anthropic.from_message, _dumped,
           anthropic_kept),
    Target("model-response", to_pydantic_ai.to_model_response,
           to_pydantic_ai.from_model_response,
           lambda made: TypeAdapter(ModelResponse).dump_python(made, mode="json"),
           pydantic_ai_kept),
    Target("ai-message", to_langchain.to_ai_message, to_langchain.from_ai_message, _dumped,
           langchain_kept),
]  # fmt: skip


@pytest.mark.parametrize("rel", ALL_RECORDINGS)
@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_every_recording_there_and_back_loses_only_what_is_listed(target: Target, rel: str) -> None:
    message = MESSAGES[rel]
    made = target.write(message)
    back = target.read_back(made)
    assert back == target.kept(message, made)
    # The object's JSON dict, as a caller might hold it, reads the same.
    assert target.read_back(json.loads(json.dumps(target.as_json(made)))) == back


# --- what the readers refuse -----------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_a_reader_names_what_it_expected_and_what_arrived(target: Target) -> None:
    write, read_back = target.write, target.read_back
    for wrong in (42, "text", [1], None, MESSAGES["anthropic/text-basic.sse"]):
        with pytest.raises(InteropError) as caught:
            read_back(wrong)
        assert caught.value.got.startswith(("a ", "an ")), caught.value
        assert "expected" in str(caught.value)
    with pytest.raises(InteropError) as caught:
        read_back({"unrelated": True})
    assert "a dict with keys ['unrelated']" in str(caught.value)
    for wrong in (None, {"role": "assistant"}, "hi"):
        with pytest.raises(InteropError, match="expected a streamfold Message"):
            write(wrong)
    assert isinstance(caught.value, UsageError)


JSON_VALUES: list[Any] = [None, True, 0, -1, 2**70, 1.5, "", "x", [], [None], {}, {"type": "x"}]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*path, index)))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


HOSTILE = [
    "anthropic/web-search-thinking-citations.sse",
    "openai-responses/web-search-annotations.sse",
    "openai-chat/tool-calls-parallel.sse",
    "gemini/function-call-thought-signature.sse",
]


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_any_field_changed_to_any_json_value_is_read_or_refused_typed(target: Target) -> None:
    write, read_back, as_json = target.write, target.read_back, target.as_json
    # The dict a reader gets may come from anywhere: each field of a real one changed to
    # each kind of JSON value gives a Message or a streamfold error, never another one.
    rng = random.Random(20)
    for rel in HOSTILE:
        data = as_json(write(MESSAGES[rel]))
        paths = _paths(data)
        for path in rng.sample(paths, min(len(paths), 60)):
            for new in JSON_VALUES:
                try:
                    result = read_back(_replaced(data, path, new))
                except StreamfoldError:
                    continue
                assert isinstance(result, Message)


# --- the extras --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("adapter", "library", "extra"),
    [
        ("openai", "openai", "openai"),
        ("anthropic", "anthropic", "anthropic"),
        ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("langchain", "langchain_core", "langchain"),
    ],
)
def test_an_adapter_without_its_library_names_the_extra(
    adapter: str, library: str, extra: str
) -> None:
    # A None in sys.modules makes the library's import fail, as if it were not installed.
    code = (
        f"import sys; sys.modules[{library!r}] = None\n"
        "import streamfold, streamfold.serve\n"
        f"try:\n    import streamfold.interop.{adapter}\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    env = {"PYTHONPATH": IMPORTED_FROM}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert f"pip install 'streamfold[{extra}]'" in done.stdout


def test_pydantic_ai_saved_citation_with_a_non_string_key_is_an_interop_error() -> None:
    # Found by the adapter fuzz: a dict key no JSON text holds, deep in streamfold's data.
    response = to_pydantic_ai.to_model_response(
        MESSAGES["anthropic/web-search-thinking-citations.sse"]
    )
    data = TypeAdapter(ModelResponse).dump_python(response, mode="json")
    saved = data["metadata"]["streamfold"]["parts"]
    cited = next(p for p in saved if p.get("citations"))
    cited["citations"][0]["source"] = {1: "int key"}
    with pytest.raises(InteropError, match="citations"):
        to_pydantic_ai.from_model_response(data)
    # The same in the form earlier versions wrote (citations in the part's provider_details).
    earlier = {
        "kind": "response",
        "parts": [
            {
                "part_kind": "text",
                "content": "x",
                "provider_details": {"citations": [{"source": {1: "int key"}}]},
            }
        ],
    }
    with pytest.raises(InteropError, match="citations"):
        to_pydantic_ai.from_model_response(earlier)


def test_pydantic_ai_bedrock_redacted_blob_not_utf8_stays_a_block() -> None:
    # BedrockConverseModel keeps a redacted blob as its bytes decoded as UTF-8 (Claude's
    # are base64 text); a blob that is not goes as the opaque block, whole.
    message = MESSAGES["bedrock/redacted-thinking-claude.ndjson"]
    blob = "//79AA=="  # the bytes ff fe fd 00: not UTF-8
    first = message.content[0]
    assert first.options["type"] == "redactedContent"
    odd = first.model_copy(
        update={
            "options": {**first.options, "block": {"reasoningContent": {"redactedContent": blob}}}
        }
    )
    changed = message.model_copy(update={"content": [odd, *message.content[1:]]})
    response = to_pydantic_ai.to_model_response(changed)
    kept = response.parts[0]
    assert kept.part_kind == "builtin-tool-call"
    assert kept.provider_details == odd.options
    assert response.parts[1].part_kind == "thinking" and response.parts[1].id == "redacted_content"
    assert to_pydantic_ai.from_model_response(response).content == changed.content


def test_pydantic_ai_paused_anthropic_turn_is_suspended() -> None:
    # pydantic-ai's AnthropicModel marks a `pause_turn` response `suspended` (it streamed
    # this recording so, with its web search tool on), and continues it on the next request.
    message = MESSAGES["anthropic/web-search-pause-turn.sse"]
    response = to_pydantic_ai.to_model_response(message)
    assert response.state == "suspended"
    data = TypeAdapter(ModelResponse).dump_python(response, mode="json")
    data["metadata"] = None  # as pydantic-ai's own model writes it: the state alone says so
    back = to_pydantic_ai.from_model_response(data)
    assert (back.status, back.stop_reason) == ("complete", "pause")
    assert to_pydantic_ai.from_model_response(response) == message


def test_a_library_message_that_says_stop_next_to_tool_calls_stops_with_tool_use() -> None:
    # As the fold reads the stream such a message came from (OpenRouter's o3-mini says
    # "stop" next to complete tool calls): an agent loop reading "stop" would show the call
    # as the answer. The text before the call is narration; the raw word stays.
    ai = AIMessage(
        content="Let me check.",
        tool_calls=[{"name": "f", "args": {"a": 1}, "id": "call_1"}],
        response_metadata={"finish_reason": "stop", "model_provider": "openai"},
    )
    message = to_langchain.from_ai_message(ai)
    assert (message.status, message.stop_reason, message.raw_stop_reason) == (
        "complete",
        "tool_use",
        "stop",
    )
    assert [utterance(part) for part in message.content] == ["narration"]
