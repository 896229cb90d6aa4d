"""The libraries users would pick instead, each behind a function that returns a Result.

Every peer is prepared outside the timed region (`prepare(stream)` builds clients and
the like) and returns a zero-argument callable that does the fold and returns what it
folded, so the harness can check it before it times it. A peer whose package is missing
is skipped with a note (`pip install -e '.[bench]'` installs them all).

What each peer is handed is what its users hold: the SDK state classes get the SDK's
own event objects built from the decoded dicts with the SDK's `construct_type` (what
the SDK's Stream does per event), litellm gets `ModelResponseStream` objects, and the
provider-neutral accumulators (pydantic-ai's parts manager, langchain-core's
AIMessageChunk) get the deltas from a small dict walker like the floor's. Building
those objects is timed: it is part of what each library costs between "JSON parsed"
and "final message".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .floor import Result
from .generate import Stream

Runner = Callable[[], Result]


@dataclass(frozen=True)
class Peer:
    """One competing implementation."""

    name: str
    providers: tuple[str, ...]
    # "sse" or "dicts": what it is fed (and which floor it is compared with).
    input: str
    # Result fields it produces, and so is checked on.
    checks: tuple[str, ...]
    prepare: Callable[[Stream], Runner]
    # A Python package to import to tell whether the peer is installed.
    module: str
    # Workloads it runs on (the live-partial variants run on bigargs only).
    workloads: tuple[str, ...] = ("mixed", "bigargs")
    note: str = ""


# --- a small dict walker, for the provider-neutral accumulators ------------------------


def walk(provider: str, events: list[dict[str, Any]]) -> Iterator[tuple[str, Any, Any, Any]]:
    """Neutral deltas: (kind, part key, value, extra) with kind text / thinking /
    signature / tool (value: call id, extra: name) / args."""
    if provider == "anthropic":
        for ev in events:
            kind = ev["type"]
            if kind == "content_block_delta":
                d = ev["delta"]
                dtype = d["type"]
                if dtype == "text_delta":
                    yield "text", ev["index"], d["text"], None
                elif dtype == "input_json_delta":
                    yield "args", ev["index"], d["partial_json"], None
                elif dtype == "thinking_delta":
                    yield "thinking", ev["index"], d["thinking"], None
                elif dtype == "signature_delta":
                    yield "signature", ev["index"], d["signature"], None
            elif kind == "content_block_start":
                block = ev["content_block"]
                if block["type"] == "tool_use":
                    yield "tool", ev["index"], block["id"], block["name"]
    elif provider == "openai-chat":
        for ev in events:
            choices = ev["choices"]
            if not choices:
                continue
            delta = choices[0]["delta"]
            content = delta.get("content")
            if content:
                yield "text", "text", content, None
            for call in delta.get("tool_calls") or ():
                fn = call["function"]
                if "id" in call:
                    yield "tool", call["index"], call["id"], fn["name"]
                if fn.get("arguments"):
                    yield "args", call["index"], fn["arguments"], None
    else:
        for ev in events:
            kind = ev["type"]
            if kind == "response.output_text.delta":
                yield "text", ev["item_id"], ev["delta"], None
            elif kind == "response.function_call_arguments.delta":
                yield "args", ev["item_id"], ev["delta"], None
            elif kind == "response.reasoning_summary_text.delta":
                yield "thinking", ev["item_id"], ev["delta"], None
            elif kind == "response.output_item.added":
                item = ev["item"]
                if item["type"] == "function_call":
                    yield "tool", item["id"], item["call_id"], item["name"]
                elif item["type"] == "reasoning" and item.get("encrypted_content"):
                    yield "signature", item["id"], item["encrypted_content"], None


# --- pydantic-ai ---------------------------------------------------------------------


def _pydantic_ai(stream: Stream) -> Runner:
    from pydantic_ai._parts_manager import ModelResponsePartsManager
    from pydantic_ai.messages import TextPart, ThinkingPart, ToolCallPart

    try:  # newer releases want the request's tool context
        from pydantic_ai.models import ModelRequestParameters

        def manager() -> Any:
            return ModelResponsePartsManager(model_request_parameters=ModelRequestParameters())
    except ImportError:  # pragma: no cover - older pydantic-ai

        def manager() -> Any:
            return ModelResponsePartsManager()

    provider, events = stream.provider, stream.dicts

    def run() -> Result:
        pm = manager()
        for kind, key, value, extra in walk(provider, events):
            if kind == "text":
                for _ in pm.handle_text_delta(vendor_part_id=key, content=value):
                    pass
            elif kind == "args":
                pm.handle_tool_call_delta(vendor_part_id=key, args=value)
            elif kind == "thinking":
                for _ in pm.handle_thinking_delta(vendor_part_id=key, content=value):
                    pass
            elif kind == "signature":
                for _ in pm.handle_thinking_delta(vendor_part_id=key, signature=value):
                    pass
            else:
                pm.handle_tool_call_delta(
                    vendor_part_id=key, tool_name=extra, args=None, tool_call_id=value
                )
        text, thinking, signature, tools = [], [], None, {}
        for part in pm.get_parts():
            if isinstance(part, TextPart):
                text.append(part.content)
            elif isinstance(part, ThinkingPart):
                thinking.append(part.content)
                signature = part.signature
            elif isinstance(part, ToolCallPart):
                tools[part.tool_call_id] = part.args
        return Result("".join(text), "".join(thinking) or None, signature, tools)

    return run


# --- langchain-core ----------------------------------------------------------------


def _langchain(stream: Stream) -> Runner:
    from langchain_core.messages import AIMessageChunk

    provider, events = stream.provider, stream.dicts

    def run() -> Result:
        acc: Any = AIMessageChunk(content="")
        slots: dict[Any, int] = {}
        for kind, key, value, extra in walk(provider, events):
            if kind == "text":
                acc = acc + AIMessageChunk(content=value)
            elif kind == "tool":
                slots[key] = len(slots)
                chunk = {"name": extra, "args": "", "id": value, "index": slots[key]}
                acc = acc + AIMessageChunk(content="", tool_call_chunks=[chunk])
            elif kind == "args":
                chunk = {"name": None, "args": value, "id": None, "index": slots[key]}
                acc = acc + AIMessageChunk(content="", tool_call_chunks=[chunk])
            # thinking has no provider-neutral place in AIMessageChunk: not folded.
        tools = {c["id"]: c["args"] for c in acc.tool_call_chunks}
        return Result(acc.content, tools=tools)

    return run


# --- anthropic SDK ------------------------------------------------------------------


def _anthropic_result(message: Any) -> Result:
    text, thinking, signature, tools = [], [], None, {}
    for block in message.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "thinking":
            thinking.append(block.thinking)
            signature = block.signature
        elif block.type == "tool_use":
            tools[block.id] = block.input
    return Result("".join(text), "".join(thinking) or None, signature, tools)


def _anthropic_accumulate(stream: Stream) -> Runner:
    from anthropic.lib.streaming._messages import accumulate_event

    # The SDK's Stream drops pings before they reach accumulate_event.
    events = [ev for ev in stream.dicts if ev["type"] != "ping"]

    def run() -> Result:
        snapshot: Any = None
        json_bufs: dict[int, bytes] = {}
        for ev in events:
            snapshot = accumulate_event(
                event=ev,  # type: ignore[arg-type]  # it builds the model itself
                current_snapshot=snapshot,
                json_bufs=json_bufs,
            )
        return _anthropic_result(snapshot)

    return run


def _anthropic_message_stream(stream: Stream) -> Runner:
    import anthropic
    from anthropic import NOT_GIVEN
    from anthropic.lib.streaming._messages import MessageStream
    from anthropic.types import RawMessageStreamEvent

    try:  # newer SDKs ship their own fork of httpx
        import httpx2 as import_httpx
    except ImportError:
        import httpx as import_httpx

    client = anthropic.Anthropic(api_key="bench", base_url="http://127.0.0.1:9")
    sse = stream.sse
    url = "http://127.0.0.1:9/v1/messages"

    def run() -> Result:
        response = import_httpx.Response(
            200,
            content=sse,
            headers={"content-type": "text/event-stream"},
            request=import_httpx.Request("POST", url),
        )
        raw = anthropic.Stream(cast_to=RawMessageStreamEvent, response=response, client=client)
        ms: Any = MessageStream(raw, output_format=NOT_GIVEN)
        for _ in ms:
            pass
        return _anthropic_result(ms.get_final_message())

    return run


# --- openai SDK ----------------------------------------------------------------------


def _openai_tools(stream: Stream, strict: bool) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {}, "additionalProperties": True}
    return [
        {
            "type": "function",
            "function": {"name": name, "parameters": schema, "strict": strict},
        }
        for name in dict.fromkeys(stream.expected.names.values())
    ]


def _openai_chat_state(stream: Stream, live: bool = False) -> Runner:
    from openai._models import construct_type
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    events = stream.dicts
    # strict input tools make the state re-parse each call's partial arguments per chunk.
    tools = _openai_tools(stream, strict=True) if live else None

    def run() -> Result:
        state: Any = (
            ChatCompletionStreamState(input_tools=tools)  # type: ignore[arg-type]
            if tools
            else ChatCompletionStreamState()
        )
        for ev in events:
            chunk = construct_type(type_=ChatCompletionChunk, value=ev)
            for _ in state.handle_chunk(chunk):
                pass
        completion = state.get_final_completion()
        message = completion.choices[0].message
        calls = {c.id: c.function.arguments for c in message.tool_calls or ()}
        return Result(message.content or "", tools=calls)

    return run


def _openai_chat_state_live(stream: Stream) -> Runner:
    return _openai_chat_state(stream, live=True)


def _openai_responses_state(stream: Stream) -> Runner:
    from openai import omit
    from openai._models import construct_type
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    events = stream.dicts

    def run() -> Result:
        state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
        for ev in events:
            state.handle_event(construct_type(type_=ResponseStreamEvent, value=ev))
        response = state._completed_response
        text, thinking, signature, tools = [], [], None, {}
        for item in response.output:
            if item.type == "message":
                text.extend(c.text for c in item.content if c.type == "output_text")
            elif item.type == "reasoning":
                thinking.extend(s.text for s in item.summary)
                signature = item.encrypted_content
            elif item.type == "function_call":
                tools[item.call_id] = item.arguments
        return Result("".join(text), "".join(thinking) or None, signature, tools)

    return run


# --- litellm ------------------------------------------------------------------------


def _litellm(stream: Stream) -> Runner:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from litellm import ModelResponseStream, stream_chunk_builder

    events = stream.dicts

    def run() -> Result:
        chunks = [ModelResponseStream(**ev) for ev in events]
        response: Any = stream_chunk_builder(chunks)
        message = response.choices[0].message
        calls = {c.id: c.function.arguments for c in message.tool_calls or ()}
        return Result(message.content or "", tools=calls)

    return run


ALL = ("anthropic", "openai-chat", "openai-responses")
PEERS: tuple[Peer, ...] = (
    Peer(
        "pydantic-ai parts manager",
        ALL,
        "dicts",
        ("text", "thinking", "signature", "tools"),
        _pydantic_ai,
        "pydantic_ai",
    ),
    Peer(
        "langchain-core AIMessageChunk +",
        ALL,
        "dicts",
        ("text", "tools"),
        _langchain,
        "langchain_core",
        note="thinking not folded (no neutral place for it)",
    ),
    Peer(
        "anthropic accumulate_event",
        ("anthropic",),
        "dicts",
        ("text", "thinking", "signature", "tools"),
        _anthropic_accumulate,
        "anthropic",
        note="re-parses the partial tool input with jiter on every input_json_delta",
    ),
    Peer(
        "anthropic MessageStream",
        ("anthropic",),
        "sse",
        ("text", "thinking", "signature", "tools"),
        _anthropic_message_stream,
        "anthropic",
        note="the SDK's own SSE parser, event models and helper events",
    ),
    Peer(
        "openai ChatCompletionStreamState",
        ("openai-chat",),
        "dicts",
        ("text", "tools"),
        _openai_chat_state,
        "openai",
    ),
    Peer(
        "openai ChatCompletionStreamState strict",
        ("openai-chat",),
        "dicts",
        ("text", "tools"),
        _openai_chat_state_live,
        "openai",
        workloads=("bigargs",),
        note="strict input tools: partial arguments re-parsed per chunk (live view)",
    ),
    Peer(
        "openai ResponseStreamState",
        ("openai-responses",),
        "dicts",
        ("text", "thinking", "signature", "tools"),
        _openai_responses_state,
        "openai",
    ),
    Peer(
        "litellm stream_chunk_builder",
        ("openai-chat",),
        "dicts",
        ("text", "tools"),
        _litellm,
        "litellm",
        note="includes building ModelResponseStream per chunk",
    ),
)
