"""What the adapters share: reading the caller's object, and rebuilding a Message from parts."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, get_args

import pydantic

from ..encoding import foreign
from ..errors import InteropError, StreamfoldError, preview
from ..fold import fold_message
from ..limits import Limits
from ..message import (
    TURN_GOES_ON,
    Message,
    Status,
    StopReason,
    ToolCall,
    Usage,
    settled_stop_reason,
)
from ..parts import ContentPart, put_utterance, utterance

Model = TypeVar("Model", bound=pydantic.BaseModel)
T = TypeVar("T")

# Opaque parts that are tool activity the provider ran (as the decoders flag them when they
# open): the text before one is narration, as before a ToolCall.
_TOOL_BLOCKS = frozenset(
    {"server_tool_use", "mcp_tool_use", "executableCode", "toolCall", "mcp_approval_request"}
)


def missing_library(adapter: str, package: str, extra: str) -> ImportError:
    """The ImportError an adapter raises when its library is not installed."""
    return ImportError(
        f"streamfold.interop.{adapter} needs the {package} package: "
        f"pip install 'streamfold[{extra}]'"
    )


def described(value: object) -> str:
    """A value's kind as an error names it: its type, and a dict's keys."""
    if isinstance(value, Mapping):
        keys = sorted(str(k) for k in list(value)[:8])
        return f"a dict with keys {keys}"
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiouAEIOU' else 'a'} {name}"


def invalid(function: str, name: str, value: object, exc: pydantic.ValidationError) -> InteropError:
    """The error for a dict that the target library's model refuses: its first problem."""
    return InteropError(function, name, f"{described(value)}: {_first(exc)}")


def dict_field(function: str, value: object, what: str) -> dict[str, Any]:
    """A field that must be a dict (absent: empty), as a new dict."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InteropError(function, f"{what} as a dict", described(value))
    return dict(value)


def read_model(function: str, model: type[Model], value: object) -> Model:
    """`value` as the SDK's `model`, validated: the object, or a dict of its JSON form.

    The SDKs build their objects from the wire without validating them (`construct_type`):
    an object of the right class may hold anything, so it is checked as its dict would be.
    """
    name = f"{model.__module__.split('.')[0]} {model.__name__}"
    if isinstance(value, model):
        sdk_object = value
        value = library_call(
            function, name, lambda: sdk_object.model_dump(round_trip=True, warnings=False)
        )
    return read_object(function, name, model, value, model.model_validate)


def model_json(function: str, model: pydantic.BaseModel) -> dict[str, Any]:
    """A validated SDK object's JSON form (None fields left out), or an InteropError."""
    name = f"{type(model).__module__.split('.')[0]} {type(model).__name__}"
    return library_call(
        function, name, lambda: model.model_dump(mode="json", exclude_none=True, warnings=False)
    )


def library_call(function: str, name: str, call: Callable[[], T]) -> T:
    """What a library's own code makes of an object it did not check (a dump, a reading of
    its content): whatever it raises on that object is an InteropError naming it."""
    try:
        return call()
    except Exception as exc:  # (ValueError, TypeError, UnicodeError, RecursionError...)
        raise InteropError(function, name, preview(f"{type(exc).__name__}: {exc}")) from None


def read_object(
    function: str,
    name: str,
    kind: type[T],
    value: object,
    validate: Callable[[dict[str, Any]], T],
    errors: tuple[type[Exception], ...] = (),
) -> T:
    """`value` as the library's `kind`: the object itself, or a dict `validate` reads.

    `errors`: what the library's validators raise besides a ValidationError, on shapes
    they do not check; named in the InteropError like a validation error.
    """
    if isinstance(value, kind):
        return value
    if not isinstance(value, Mapping):
        raise InteropError(function, f"{name} (or a dict of its JSON form)", described(value))
    try:
        return validate(dict(value))
    except pydantic.ValidationError as exc:
        raise invalid(function, name, value, exc) from None
    except errors as exc:
        raise InteropError(function, name, f"{described(value)}: {exc!r}"[:300]) from None


def _first(exc: pydantic.ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    head = errors[0]
    where = ".".join(str(p) for p in head["loc"]) or "(the object)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {head['msg']}{more}"


def saved_end(
    function: str, ours: dict[str, Any], status: Status, stop_reason: StopReason | None
) -> tuple[Status, StopReason | None]:
    """The status and stop reason a writer saved in the target's free dict (else the ones
    read from the target's own fields), checked: the dict may come from anywhere."""
    saved_status = ours.get("status", status)
    saved_stop = ours.get("stop_reason", stop_reason)
    if saved_status not in get_args(Status):
        raise InteropError(
            function, f"a status ({', '.join(get_args(Status))})", repr(saved_status)[:80]
        )
    if saved_stop is not None and saved_stop not in get_args(StopReason):
        raise InteropError(
            function, f"a stop reason ({', '.join(get_args(StopReason))})", repr(saved_stop)[:80]
        )
    return saved_status, saved_stop


def check_message(function: str, message: object) -> Message:
    """The Message an adapter writes from; anything else is an InteropError."""
    if not isinstance(message, Message):
        raise InteropError(function, "a streamfold Message", described(message))
    return message


def is_tool_activity(item: ContentPart | ToolCall) -> bool:
    """A tool call, or an opaque block of a tool the provider ran (server tool, built-in
    item, executed code): what makes the text before it narration."""
    if isinstance(item, ToolCall):
        return True
    kind = item.options.get("type")
    if item.type != "unsupported" or not isinstance(kind, str):
        return False
    return kind in _TOOL_BLOCKS or kind.endswith("_call")


def mark_utterances(
    order: Sequence[ContentPart | ToolCall], status: Status, stop_reason: StopReason | None
) -> list[ContentPart | ToolCall]:
    """The fold's narration / answer rule on a finished message's parts, in stream order.

    A part the provider (or the caller) marked keeps its marker; the others are marked as
    inferred: text before tool activity is narration; the text after the last tool is
    narration in a turn that goes on, the answer in one that ended normally, and stays
    unmarked in one that was cut, cancelled or failed.
    """
    closing: str | None
    if status in ("incomplete", "cancelled", "error"):
        closing = None
    else:
        closing = "narration" if stop_reason in TURN_GOES_ON else "answer"
    out = list(order)
    marker = closing
    for i in range(len(out) - 1, -1, -1):
        item = out[i]
        if is_tool_activity(item):
            marker = "narration"
        elif (
            isinstance(item, ContentPart)
            and item.type == "text"
            and marker is not None
            and utterance(item) is None
        ):
            out[i] = put_utterance(item, marker, inferred=True)
    return out


def build_message(
    order: Sequence[ContentPart | ToolCall],
    *,
    status: Status,
    stop_reason: StopReason | None,
    raw_stop_reason: str | None,
    usage: Usage | None,
    metadata: dict[str, Any],
) -> Message:
    """A Message from its parts in stream order: each call's index is its place in it, the
    stop reason settled and the text marked by the fold's rules (`settled_stop_reason`,
    `mark_utterances`): a library's message that says "stop" next to tool calls is read as
    the fold reads the stream it came from."""
    stop_reason = settled_stop_reason(
        stop_reason,
        status,
        [item for item in order if isinstance(item, ToolCall)],
        [item for item in order if isinstance(item, ContentPart)],
    )
    content: list[ContentPart] = []
    calls: list[ToolCall] = []
    for i, item in enumerate(mark_utterances(order, status, stop_reason)):
        if isinstance(item, ToolCall):
            calls.append(item.model_copy(update={"index": i}))
        else:
            content.append(item)
    return Message(
        role="assistant",
        content=content,
        tool_calls=calls,
        status=status,
        usage=usage,
        stop_reason=stop_reason,
        raw_stop_reason=raw_stop_reason,
        metadata=metadata,
    )


# --- what the writers share (and serve's Gemini answer) -------------------------------------


def from_provider(message: Message, provider: str) -> bool:
    """True when the message was folded from `provider` (Claude on Bedrock's invoke stream
    counts as Anthropic: see `encoding.foreign`)."""
    return message.metadata.get("provider") is not None and not foreign(message, provider)


def meta_str(message: Message, key: str, default: str) -> str:
    """A text field of the message's metadata, or `default`."""
    value = message.metadata.get(key)
    return value if isinstance(value, str) and value else default


def created(message: Message) -> int:
    """When the message was created (its `created` or `created_at`), else now."""
    for key in ("created", "created_at"):
        value = message.metadata.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return int(time.time())


def tokens(value: int | None) -> int:
    """A count a target requires: None (not reported) as 0."""
    return value or 0


def own_block(part: ContentPart, provider: str, message: Message) -> dict[str, Any] | None:
    """An opaque provider block, when it came from the provider it goes back to."""
    block = part.options.get("block")
    if part.type == "unsupported" and isinstance(block, dict) and from_provider(message, provider):
        return block
    return None


def fold_events(
    function: str, events: Sequence[Mapping[str, Any]], provider: str, *, done: bool = False
) -> Message:
    """The Message the provider's decoder folds from these wire events."""
    try:
        message = fold_message(sse(events, done=done), provider=provider)
    except StreamfoldError as exc:  # a value the provider's own stream could not carry
        raise InteropError(function, f"content a {provider} stream could carry", str(exc)) from None
    return message


def sse(events: Sequence[Mapping[str, Any]], *, done: bool = False) -> str:
    """Events as the SSE text a provider streams (`data: [DONE]` at the end if asked)."""
    lines = [f"data: {json.dumps(event, ensure_ascii=False)}\n\n" for event in events]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines)


# --- what a reader checks before it reads -----------------------------------------------------

# A lone surrogate: text no UTF-8 wire (and no JSON writer) can carry.
_SURROGATE = re.compile("[\\ud800-\\udfff]")
# How deep a field an adapter reads may nest: the fold's own limit on a value (max_depth),
# with room for the fields around a saved part.
TREE_DEPTH = Limits().max_depth + 16


def check_tree(function: str, value: object, what: str) -> None:
    """Refuse `value` unless it is JSON a Message can hold: str-keyed dicts, lists, text
    without lone surrogates, ints, finite floats, bools and None, nested at most
    `TREE_DEPTH` deep. Iterative: the input chooses no recursion depth."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > TREE_DEPTH:
            raise InteropError(function, f"{what} nested at most {TREE_DEPTH} deep",
                               f"a value {depth} deep")  # fmt: skip
        if isinstance(item, str):
            if _SURROGATE.search(item) is not None:
                raise InteropError(function, f"{what} as text UTF-8 can carry",
                                   f"a lone surrogate in {preview(item, 80)}")  # fmt: skip
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InteropError(function, f"{what} as JSON values", f"the float {item!r}")
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InteropError(function, f"{what} with text keys", described(key))
                stack.append((key, depth))
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif item is not None and not isinstance(item, bool | int):
            raise InteropError(function, f"{what} as JSON values", described(item))
