"""The JSON form of events, and back: one stable object per event (as the CLI prints them).

It lives beside the events (not in events.py, which every delta of every stream goes
through) so that the CLI, the relay and the web routes share it without importing each other.
"""

from __future__ import annotations

import json
from typing import Any, assert_never

from pydantic_core import PydanticSerializationError, to_jsonable_python

from .construct import check_json_object, check_json_value
from .display import DisplayItem
from .errors import EventJSONError, OutputValidationError
from .events import (
    Event,
    MessageCompleted,
    OutputCompleted,
    OutputFailed,
    OutputItem,
    OutputPartial,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    ProviderErrored,
    UsageUpdated,
)
from .message import Message, ToolCall, Usage
from .parts import UTTERANCES, Citation, ContentPart


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
    message_completed:{type, message} (not its timing: as for ==, the same bytes give
                      the same JSON on every run)
    output_partial:   {type, value, changes}
    output_item:      {type, index, value}
    output_completed: {type, value}
    output_failed:    {type, reason, text, errors}

    An output's `value` is written as pydantic writes it in JSON mode; read back, it is
    that JSON (the type it was validated as is the caller's, not the event's).

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
    if isinstance(event, OutputPartial):
        return {
            "type": event.type,
            "value": _output_json(event.value),
            "changes": [[op, list(path), value] for op, path, value in event.changes],
        }
    if isinstance(event, OutputItem):
        return {"type": event.type, "index": event.index, "value": _output_json(event.value)}
    if isinstance(event, OutputCompleted):
        return {"type": event.type, "value": _output_json(event.value)}
    if isinstance(event, OutputFailed):
        error = event.error
        return {
            "type": event.type,
            "reason": error.reason,
            "text": error.text,
            "errors": _json_safe(error.errors),
        }
    assert_never(event)


def _output_json(value: Any) -> Any:
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError:
        return repr(value)


def _part(data: Any, part_type: Any) -> ContentPart | ToolCall:
    if part_type == "tool_call":
        return ToolCall.model_validate(data)
    return ContentPart.model_validate(data)


def event_from_json(data: Any) -> Event:
    """The Event that `streamfold.event_to_json` wrote (the inverse, up to JSON)."""
    if not isinstance(data, dict):
        raise EventJSONError(f"expected an event object, got {type(data).__name__}")
    kind = data.get("type")
    try:
        if kind == "part_delta":
            options = data.get("options")
            changes = tuple((c[0], tuple(c[1]), c[2]) for c in data.get("arguments_changes", ()))
            # The values kept as they came are checked as the models check theirs: JSON,
            # and no deeper than any value streamfold keeps (without recursion).
            if options is not None:
                check_json_object(options, "options")
            for at, change in enumerate(changes):
                check_json_value(change[2], f"arguments_changes[{at}]")
            return PartDelta(
                index=data["index"],
                part_type=data["part_type"],
                content=data.get("content"),
                options=options or None,
                citations=tuple(Citation.model_validate(c) for c in data.get("citations", ())),
                arguments_changes=changes,
            )
        if kind == "part_started":
            return PartStarted(index=data["index"], part=_part(data["part"], data["part_type"]))
        if kind == "part_completed":
            return PartCompleted(
                index=data["index"],
                part=_part(data["part"], data["part_type"]),
                display_items=tuple(DisplayItem.model_validate(d) for d in data["display_items"]),
                explicit=bool(data["explicit"]),
            )
        if kind == "part_marked":
            index, marker = data["index"], data["utterance"]
            if type(index) is not int or marker not in UTTERANCES:
                raise ValueError(f"expected a slot index and one of {UTTERANCES}, got {data!r}")
            return PartMarked(index=index, utterance=marker, explicit=bool(data["explicit"]))
        if kind == "usage_updated":
            return UsageUpdated(usage=Usage.model_validate(data["usage"]))
        if kind == "provider_errored":
            check_json_value(data.get("raw"), "raw")
            return ProviderErrored(
                error_type=data.get("error_type"),
                message=data["message"],
                raw=data.get("raw"),
                partial=Message.model_validate(data["partial"]),
            )
        if kind == "message_completed":
            return MessageCompleted(message=Message.model_validate(data["message"]))
        if kind == "output_partial":
            check_json_value(data["value"], "value")
            changes = tuple((c[0], tuple(c[1]), c[2]) for c in data.get("changes", ()))
            for at, change in enumerate(changes):
                check_json_value(change[2], f"changes[{at}]")
            return OutputPartial(value=data["value"], changes=changes)
        if kind == "output_item":
            check_json_value(data["value"], "value")
            if type(data["index"]) is not int:
                raise ValueError(f"expected an element index, got {data['index']!r}")
            return OutputItem(index=data["index"], value=data["value"])
        if kind == "output_completed":
            check_json_value(data["value"], "value")
            return OutputCompleted(value=data["value"])
        if kind == "output_failed":
            text, errors = data.get("text"), data.get("errors", [])
            if (text is not None and type(text) is not str) or type(errors) is not list:
                raise ValueError(f"expected a text and a list of errors, got {data!r}")
            check_json_value(errors, "errors")
            return OutputFailed(error=OutputValidationError(str(data["reason"]), text, errors))
    except (KeyError, TypeError, ValueError) as exc:
        raise EventJSONError(f"malformed {kind} event ({type(exc).__name__}: {exc})") from None
    raise EventJSONError(f"expected a streamfold event type, got {kind!r}")
