"""Display items, as Sagents' DisplayHelpers: what a UI or a display table stores per message."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ._model import JsonObject, StreamfoldModel
from .construct import trusted
from .message import Message, Role, ToolCall, ToolResult
from .parts import ContentPart, Utterance, put_utterance, utterance

DisplayType = Literal["text", "thinking", "tool_call", "tool_result"]

# A message that ended like this says so on its last display item, so a UI can show why.
ABNORMAL_STATUSES = frozenset({"length", "cancelled", "content_filtered", "error"})


class DisplayItem(StreamfoldModel):
    """One displayable item: its type, the role of its message, and JSON-ready content."""

    type: DisplayType
    message_type: Role
    content: JsonObject = Field(default_factory=dict)


def part_display_item(part: ContentPart, role: Role) -> DisplayItem | None:
    """The display item for one content part, or None for parts a UI does not show."""
    if part.type == "text":
        if not part.content and not part.citations:
            return None  # e.g. a Gemini signature-only part: nothing to show
        content: dict[str, Any] = {"text": part.content or ""}
        marker = utterance(part)
        if marker is not None:
            content["utterance"] = marker
        # (the model built directly, as DisplayItem.trusted does: one call less per part)
        return trusted(DisplayItem, {"type": "text", "message_type": role, "content": content})
    if part.type == "thinking":
        content = {"text": part.content or ""}
        return trusted(DisplayItem, {"type": "thinking", "message_type": role, "content": content})
    return None


def tool_call_display_item(call: ToolCall, role: Role) -> DisplayItem:
    """The display item for a tool call."""
    content = {"call_id": call.call_id, "name": call.name, "arguments": call.arguments}
    return trusted(DisplayItem, {"type": "tool_call", "message_type": role, "content": content})


def tool_result_display_item(result: ToolResult, role: Role) -> DisplayItem:
    """The display item for a tool result."""
    content = (
        result.content
        if isinstance(result.content, str)
        else [p.model_dump(mode="json") for p in result.content]
    )
    return DisplayItem.trusted(
        type="tool_result",
        message_type=role,
        content={
            "tool_call_id": result.tool_call_id,
            "name": result.name,
            "content": content,
            "is_error": result.is_error,
        },
    )


def display_items_for(item: ContentPart | ToolCall, role: Role) -> list[DisplayItem]:
    """The display items one streamed part or tool call gives (zero or one)."""
    if isinstance(item, ToolCall):
        return [tool_call_display_item(item, role)]
    shown = part_display_item(item, role)
    return [] if shown is None else [shown]


def extract_display_items(
    message: Message, order: Literal["sagents", "stream"] = "sagents"
) -> list[DisplayItem]:
    """Extract a message's display items: parts, then tool calls, then tool results.

    `order="stream"` gives parts and tool calls interleaved as they were streamed.
    """
    role = message.role
    items: list[DisplayItem] = []
    if order == "stream":
        for entry in message.stream_order():
            items.extend(display_items_for(entry, role))
    else:
        for part in message.content:
            items.extend(display_items_for(part, role))
        items.extend(tool_call_display_item(tc, role) for tc in message.tool_calls)
    items.extend(tool_result_display_item(r, role) for r in message.tool_results)
    if items and message.status in ABNORMAL_STATUSES:
        last = items[-1]
        items[-1] = DisplayItem.trusted(
            type=last.type,
            message_type=last.message_type,
            content={**last.content, "stop_reason": message.stop_reason or message.status},
        )
    return items


class MarkedInOrder:
    """Finished parts in slot order, each given out once its display is final.

    A text part's narration / answer marker is often known only after it is complete (when
    a tool starts after it, or the message ends): a view that shows a part once, for good
    (a terminal, a log of display items), holds it until then, and the parts after it
    behind it, so they still come out in order.
    """

    def __init__(self) -> None:
        self.held: dict[int, ContentPart | ToolCall] = {}

    def completed(self, index: int, part: ContentPart | ToolCall) -> list[ContentPart | ToolCall]:
        """Part `index` is complete: the parts that may be shown now."""
        self.held[index] = part
        return self._release(everything=False)

    def marked(self, index: int, marker: Utterance, explicit: bool) -> list[ContentPart | ToolCall]:
        """Part `index` got its marker (a PartMarked event): the parts that may be shown now."""
        part = self.held.get(index)
        if not isinstance(part, ContentPart):
            return []  # still open: its completion will carry the marker
        self.held[index] = put_utterance(part, marker, inferred=not explicit)
        return self._release(everything=False)

    def flush(self) -> list[ContentPart | ToolCall]:
        """The message is over: every part held, marked or not."""
        return self._release(everything=True)

    def _release(self, *, everything: bool) -> list[ContentPart | ToolCall]:
        out: list[ContentPart | ToolCall] = []
        for index in sorted(self.held):
            part = self.held[index]
            waits = isinstance(part, ContentPart) and part.type == "text" and not utterance(part)
            if waits and not everything:
                break
            out.append(self.held.pop(index))
        return out
