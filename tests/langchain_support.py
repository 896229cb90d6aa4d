"""What the LangChain judges share: the next turn's history, a chat model's own streamed
message, and usage without the zero detail counts the chat models write."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage


def history(ai: AIMessage) -> list[BaseMessage]:
    """The next turn's input: the question, the answer, a result for each tool call."""
    results = [ToolMessage(f"result of {c['name']}", tool_call_id=c["id"] or "")
               for c in ai.tool_calls]  # fmt: skip
    return [HumanMessage("hi"), ai, *results]


def streamed(model: BaseChatModel) -> AIMessage:
    """The chat model's own message, accumulated from its stream as LangChain does."""
    chunks = list(model.stream([HumanMessage("hi")]))
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole = whole + chunk  # type: ignore[operator]
    data = whole.model_dump(exclude={"type", "tool_call_chunks", "chunk_position"})
    return AIMessage.model_validate(data)


def drop_zero_details(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Usage without the detail counts of 0 (the chat models write them for counts the
    provider did not report; streamfold writes only those reported)."""
    if usage is None:
        return None
    out = dict(usage)
    for key in ("input_token_details", "output_token_details"):
        details = {k: v for k, v in (out.get(key) or {}).items() if v != 0}
        if details:
            out[key] = details
        else:
            out.pop(key, None)
    return out
