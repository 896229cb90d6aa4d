"""The JSON form of events: one stable object per event, as the CLI prints and the relay stores.

It lives beside the events (not in events.py, which every delta of every stream goes
through) so that the CLI, the relay and the web routes share it without importing each other.
"""

from __future__ import annotations

import json
from typing import Any, assert_never

from .events import (
    Event,
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    ProviderErrored,
    UsageUpdated,
)
from .message import ToolCall


def _json_safe(value: Any) -> Any:
    # Raw provider payloads are JSON already; a raw bytes frame (a broken stream) is not.
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _part_json(part: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = part.model_dump(mode="json")
    return dumped


def _part_type(part: Any) -> str:
    return "tool_call" if isinstance(part, ToolCall) else str(part.type)


def event_to_json(event: Event) -> dict[str, Any]:
    """A stable JSON object for one event; `type` names the event, as on the dataclass.

    part_started:     {type, index, part_type, part}
    part_delta:       {type, index, part_type, content, options, citations}
    part_completed:   {type, index, part_type, part, display_items, explicit}
    part_marked:      {type, index, utterance, explicit}
    usage_updated:    {type, usage}
    provider_errored: {type, error_type, message, raw, partial}
    message_completed:{type, message}

    `part` is a ContentPart or ToolCall as `model_dump(mode="json")` gives it; `part_type`
    is the ContentPart type or "tool_call".
    """
    if isinstance(event, PartStarted):
        return {
            "type": event.type,
            "index": event.index,
            "part_type": _part_type(event.part),
            "part": _part_json(event.part),
        }
    if isinstance(event, PartDelta):
        delta: dict[str, Any] = {
            "type": event.type,
            "index": event.index,
            "part_type": event.part_type,
            "content": event.content,
            "options": dict(event.options) if event.options else {},
            "citations": [c.model_dump(mode="json") for c in event.citations],
        }
        if event.arguments_changes:
            delta["arguments_changes"] = [
                [op, list(path), value] for op, path, value in event.arguments_changes
            ]
        return delta
    if isinstance(event, PartCompleted):
        return {
            "type": event.type,
            "index": event.index,
            "part_type": _part_type(event.part),
            "part": _part_json(event.part),
            "display_items": [item.model_dump(mode="json") for item in event.display_items],
            "explicit": event.explicit,
        }
    if isinstance(event, PartMarked):
        return {
            "type": event.type,
            "index": event.index,
            "utterance": event.utterance,
            "explicit": event.explicit,
        }
    if isinstance(event, UsageUpdated):
        return {"type": event.type, "usage": event.usage.model_dump(mode="json")}
    if isinstance(event, ProviderErrored):
        return {
            "type": event.type,
            "error_type": event.error_type,
            "message": event.message,
            "raw": _json_safe(event.raw),
            "partial": event.partial.model_dump(mode="json"),
        }
    if isinstance(event, MessageCompleted):
        return {"type": event.type, "message": event.message.model_dump(mode="json")}
    assert_never(event)
