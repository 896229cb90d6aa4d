"""Structured output: the answer's JSON as a typed value, as it streams and at the end.

`fold(..., output=Model)` hands the fold's events to an `OutputFolder`, a box beside the
fold: it picks the part that holds the output (the answer's text, or the arguments of
the tool call named by `output_tool`), scans its JSON with `IncrementalJSON` (O(delta)),
and adds `OutputPartial`, `OutputItem`, `OutputCompleted` or `OutputFailed` events.

Validation is kept incremental by following the type: a `list[X]` keeps the elements
that completed, each validated once as X, and validates only the element being built; a
pydantic model keeps its completed fields, each validated once as the field's type, and
builds the partial model with `model_construct` from them. Any other type (and a model
with validators, aliases for validation or extra fields kept) is validated whole, as
pydantic validates partial input (`validate_python(value, experimental_allow_partial=True)`),
when something inside it changed. The final value is always `validate_json` of the
whole text, so it is exactly what `Model.model_validate_json(text)` gives.
"""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import Callable
from typing import Any, Final

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

from .errors import OutputValidationError, UsageError, preview
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
)
from .message import ToolCall
from .partial_json import Change, IncrementalJSON, PartialJSONError, Path
from .parts import ContentPart

__all__ = ["OutputFolder", "output_adapter"]


class _Missing:
    """No valid partial value yet (None is a value)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def output_adapter(function: str, output: Any) -> TypeAdapter[Any]:
    """The TypeAdapter for `output=` (a type, or a TypeAdapter as given); UsageError if none."""
    if isinstance(output, TypeAdapter):
        return output
    try:
        return TypeAdapter(output)
    except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
        raise UsageError(
            f"{function}: expected output to be a type pydantic validates (a model, "
            f"list[Model], any annotation) or a TypeAdapter, got {preview(output, 80)} "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None


class _Context:
    """What the nodes share: the scanner, and the events and moves of one feed."""

    def __init__(self, scanner: IncrementalJSON) -> None:
        self.scanner = scanner
        self.items: list[Event] = []
        # Something completed (and was validated) during this feed, changes or not.
        self.moved = False


class _Node:
    """The validated view of the value at one path of the output."""

    value: Any = MISSING
    # A completed piece failed its full validation: the partial value stays invalid (as
    # pydantic's partial validation fails on any error before the last element).
    broken = False

    def update(self, ctx: _Context, raw: Any, path: Path, changes: list[Change]) -> None:
        raise NotImplementedError


class _Leaf(_Node):
    """Any type: the whole value validated again when it changed."""

    def __init__(self, adapter: TypeAdapter[Any]) -> None:
        self.adapter = adapter

    def update(self, ctx: _Context, raw: Any, path: Path, changes: list[Change]) -> None:
        try:
            if ctx.scanner.is_open(path):
                self.value = self.adapter.validate_python(raw, experimental_allow_partial=True)
            else:
                self.value = self.adapter.validate_python(raw)
        except ValidationError:
            self.value = MISSING


_Factory = Callable[[], _Node]


class _List(_Node):
    """A list: completed elements validated once and kept; the open one validated alone
    (whole, with pydantic's partial validation: O(its size) a delta, not the answer's).

    `value` is one list, grown in place (its last item replaced while it is partial).
    """

    def __init__(self, adapter: TypeAdapter[Any], items: bool) -> None:
        self.adapter = adapter  # the element's
        self.items = items  # send OutputItem for each completed element (the top level)
        self.value: list[Any] = []
        self.done = 0  # elements completed and validated
        self.shown = False  # value[-1] is the open element's partial

    def update(self, ctx: _Context, raw: Any, path: Path, changes: list[Change]) -> None:
        if type(raw) is not list:
            self.value = MISSING  # type: ignore[assignment]
            self.broken = True
            return
        value = self.value
        count = len(raw)
        done = self.done
        while done < count:
            if done == count - 1 and ctx.scanner.is_open((*path, done)):
                break
            if self.shown:
                value.pop()
                self.shown = False
            try:
                item = self.adapter.validate_python(raw[done])
            except ValidationError:
                self.broken = True
                return
            value.append(item)
            if self.items:
                ctx.items.append(OutputItem(index=done, value=item))
            done += 1
            self.done = done
            ctx.moved = True
        if done < count:  # the last element is open
            try:
                partial = self.adapter.validate_python(raw[done], experimental_allow_partial=True)
            except ValidationError:
                if self.shown:
                    value.pop()
                    self.shown = False
                return
            if self.shown:
                value[-1] = partial
            else:
                value.append(partial)
                self.shown = True


class _Model(_Node):
    """A pydantic model: completed fields validated once and kept; the partial model
    built from them with `model_construct` once every required field has a value."""

    def __init__(
        self, cls: type[BaseModel], fields: dict[str, tuple[str, TypeAdapter[Any], _Factory]]
    ) -> None:
        self.cls = cls
        self.fields = fields  # JSON key -> (field name, its adapter, its node)
        self.required = frozenset(
            name for name, info in cls.model_fields.items() if info.is_required()
        )
        self.done: dict[str, Any] = {}
        self.open_key: str | None = None
        self.child: _Node | None = None

    def update(self, ctx: _Context, raw: Any, path: Path, changes: list[Change]) -> None:
        if type(raw) is not dict:
            self.value = MISSING
            self.broken = True
            return
        depth = len(path)
        keys: dict[str, None] = {}
        if self.open_key is not None:
            keys[self.open_key] = None
        for change in changes:
            if len(change[1]) > depth:
                keys[change[1][depth]] = None  # type: ignore[index]
        scanner = ctx.scanner
        for key in keys:
            field = self.fields.get(key)
            if field is None or key not in raw:
                continue  # a key the model does not read (the final validation decides)
            name, adapter, factory = field
            key_path = (*path, key)
            if scanner.is_open(key_path):
                if self.open_key != key or self.child is None:
                    self.open_key = key
                    self.child = factory()
                mine = [c for c in changes if len(c[1]) > depth and c[1][depth] == key]
                self.child.update(ctx, raw[key], key_path, mine)
                continue
            if self.open_key == key:
                self.open_key = None
                self.child = None
            try:
                self.done[name] = adapter.validate_python(raw[key])
            except ValidationError:
                self.broken = True
                self.value = MISSING
                return
            ctx.moved = True
        values = dict(self.done)
        child = self.child
        if (
            self.open_key is not None
            and child is not None
            and child.value is not MISSING
            and not child.broken
        ):
            values[self.fields[self.open_key][0]] = child.value
        if self.required.issubset(values):
            self.value = self.cls.model_construct(**values)
        else:
            self.value = MISSING


def _plan(target: Any, adapter: TypeAdapter[Any], items: bool = False) -> tuple[_Factory, bool]:
    """How to build the node for a value of type `target` (validated by `adapter`), and
    whether it is taken apart (a list, or a model holding one) rather than validated whole.

    What can grow with the answer is taken apart: a list, and the models on the way to
    one. A model without a list inside is validated whole: that costs less than
    assembling it (pydantic validates a small model in ~3 us, model_construct takes ~6).
    """
    try:
        planned = _plan_of(target, items)
    except TypeError:  # an annotation that cannot be a cache key: validated whole
        planned = None
    return planned if planned is not None else ((lambda: _Leaf(adapter)), False)


@functools.lru_cache(maxsize=256)
def _adapter_for(target: Any) -> TypeAdapter[Any]:
    return TypeAdapter(target)


@functools.lru_cache(maxsize=256)
def _plan_of(target: Any, items: bool) -> tuple[_Factory, bool] | None:
    """`_plan` for a type taken apart; None for one validated whole (cached per type)."""
    if typing.get_origin(target) is list:
        (element,) = typing.get_args(target) or (Any,)
        element_adapter = _adapter_for(element)
        # The element being built is validated whole (O(its size) a delta, not the
        # answer's): assembling it field by field costs more than pydantic's ~3 us.
        return (lambda: _List(element_adapter, items)), True
    if isinstance(target, type) and issubclass(target, BaseModel) and _plain_model(target):
        fields: dict[str, tuple[str, TypeAdapter[Any], _Factory]] = {}
        apart = False
        for name, info in target.model_fields.items():
            annotation: Any = info.annotation
            if info.metadata:
                annotation = typing.Annotated[(annotation, *info.metadata)]
            field_adapter = _adapter_for(annotation)
            factory, field_apart = _plan(annotation, field_adapter)
            apart = apart or field_apart
            fields[info.alias or name] = (name, field_adapter, factory)
        if apart:
            return (lambda: _Model(target, fields)), True
    return None


# Model settings that change nothing in how one field's value validates: a model with any
# other (str_strip_whitespace, strict, use_enum_values...) is validated whole.
_NEUTRAL_CONFIG: Final = frozenset(
    {
        "title",
        "json_schema_extra",
        "frozen",
        "extra",
        "populate_by_name",
        "validate_by_name",
        "validate_by_alias",
        "serialize_by_alias",
        "protected_namespaces",
        "defer_build",
        "use_attribute_docstrings",
    }
)


def _plain_model(cls: type[BaseModel]) -> bool:
    """A model whose fields validate one by one as the whole does (else: validated whole)."""
    decorators = cls.__pydantic_decorators__
    config = cls.model_config
    return (
        not decorators.model_validators
        and not decorators.field_validators
        and not decorators.validators
        and not decorators.root_validators
        and config.get("extra") != "allow"
        and _NEUTRAL_CONFIG.issuperset(config)
        and not getattr(cls, "__pydantic_root_model__", False)
        and all(info.validation_alias is None for info in cls.model_fields.values())
    )


class OutputFolder:
    """Events of a fold in; the same events with the output's events added, out.

    `output_tool`: the name of the tool call whose arguments are the output; None for
    the answer's text (text parts after the last tool call, narration left out).
    """

    def __init__(self, adapter: TypeAdapter[Any], output_tool: str | None = None) -> None:
        self.adapter = adapter
        self.output_tool = output_tool
        self._factory, _ = _plan(getattr(adapter, "_type", None), adapter, items=True)
        self.value: Any = None  # the latest partial value, then the final one
        self.error: OutputValidationError | None = None
        self.finished = False
        self._reset()
        self._excluded: set[int] = set()
        self._tool_found = False

    def _reset(self) -> None:
        """Start over: what was read so far was narration, not the output."""
        self.value = None
        self._scanner = IncrementalJSON()
        self._ctx = _Context(self._scanner)
        self._root = self._factory()
        self._chunks: list[str] = []
        self._slots: set[int] = set()
        self._fault: PartialJSONError | None = None

    def take(self, events: list[Event]) -> list[Event]:
        """The events with the output's own added where they belong."""
        if self.finished or not events:
            return events
        out: list[Event] = []
        for event in events:
            self.take_one(event, out)
        return out

    def take_one(self, event: Event, out: list[Event]) -> None:
        """Append `event` to `out`, and the output's events it gives."""
        if self.finished:
            out.append(event)
            return
        if isinstance(event, PartDelta):
            out.append(event)
            if event.index in self._slots and event.content:
                self._feed(event.content, out)
            return
        if isinstance(event, PartStarted):
            out.append(event)
            part = event.part
            if self.output_tool is not None:
                if (
                    isinstance(part, ToolCall)
                    and part.name == self.output_tool
                    and not self._tool_found
                ):
                    self._tool_found = True  # the first call of that name holds the output
                    self._slots.add(event.index)
            elif isinstance(part, ContentPart) and part.type == "text":
                if event.index not in self._excluded:
                    self._slots.add(event.index)
            elif isinstance(part, ToolCall) or (
                isinstance(part, ContentPart) and part.type != "thinking"
            ):
                # Tool activity (a call, a server tool's part): the text before it was
                # narration, as the accumulator marks it; the output is the text after.
                if self._chunks:
                    self._reset()
                self._slots.clear()
            return
        if isinstance(event, PartMarked):
            out.append(event)
            # A provider's own narration marker (Responses `phase: commentary`) keeps the
            # part out. An inferred one is not read: mid-stream it comes with the tool
            # activity handled above, and at the end it says whether the turn goes on
            # (a JSON answer beside a tool call), not where the JSON is.
            if event.utterance == "narration" and event.explicit and self.output_tool is None:
                self._excluded.add(event.index)
                if event.index in self._slots:
                    if self._chunks:
                        self._reset()
                    self._slots.discard(event.index)
            return
        if isinstance(event, PartCompleted):
            out.append(event)
            if self.output_tool is not None and event.index in self._slots:
                part = event.part
                if not self._chunks and isinstance(part, ToolCall) and part.arguments == {}:
                    # A call without argument text (Anthropic's `input: {}` and an empty
                    # delta) completes as {}: that is its JSON.
                    self._chunks.append("{}")
                self._finish(out, None)
            return
        if isinstance(event, MessageCompleted):
            self._finish(out, event.message.status)
            out.append(event)
            return
        out.append(event)

    def _feed(self, text: str, out: list[Event]) -> None:
        self._chunks.append(text)
        if self._fault is not None:
            return
        ctx = self._ctx
        try:
            changes = self._scanner.feed(text)
        except PartialJSONError as exc:
            self._fault = exc
            return
        if not changes and not self._scanner.started:
            return
        ctx.moved = False
        root = self._root
        root.update(ctx, self._scanner.value, (), changes)
        if ctx.items:
            out.extend(ctx.items)
            ctx.items = []
        if (changes or ctx.moved) and root.value is not MISSING and not root.broken:
            self.value = root.value
            out.append(OutputPartial(value=root.value, changes=tuple(changes)))

    def _finish(self, out: list[Event], status: str | None) -> None:
        self.finished = True
        text = "".join(self._chunks) if self._slots or self._chunks else None
        if not self._chunks:
            where = (
                f"a tool call named {self.output_tool!r}"
                if self.output_tool is not None
                else "an answer text part"
            )
            got = "none" if status is None else f"none (the message ended {status})"
            self._fail(
                out, OutputValidationError(f"expected {where} holding JSON, got {got}", None)
            )
            return
        assert text is not None
        try:
            value = self.adapter.validate_json(text)
        except ValidationError as exc:
            errors = json.loads(exc.json(include_url=False))
            first = errors[0] if errors else {}
            ended = "" if status in (None, "complete") else f"; the message ended {status}"
            reason = (
                f"expected JSON valid as {_type_name(self.adapter)}, got {len(errors)} "
                f"error(s), first at {_location(first)}: {first.get('msg', '')}{ended}"
            )
            self._fail(out, OutputValidationError(reason, text, errors))
            return
        self.value = value
        if isinstance(self._root, _List) and self._root.items:
            # Elements the scanner never closed (a top-level scalar list's last number
            # completes only at the end): their OutputItem now, from the final value.
            for at in range(self._root.done, len(value) if isinstance(value, list) else 0):
                out.append(OutputItem(index=at, value=value[at]))
        out.append(OutputCompleted(value=value))

    def _fail(self, out: list[Event], error: OutputValidationError) -> None:
        self.error = error
        self.value = None
        out.append(OutputFailed(error=error))


def _type_name(adapter: TypeAdapter[Any]) -> str:
    target = getattr(adapter, "_type", None)
    if isinstance(target, type):
        return target.__name__
    return preview(target, 80) if target is not None else "the output type"


def _location(error: dict[str, Any]) -> str:
    loc = error.get("loc") or ()
    return "/".join(str(part) for part in loc) or "the top"
