"""Content parts: the seed's ContentPart, its constructors, merge rules and helpers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, get_args

from pydantic import Field, StrictStr

from ._model import JsonObject, StreamfoldModel, check_json_object
from .errors import PartMergeError, UsageError

PartType = Literal["text", "image_url", "image", "file", "file_url", "thinking", "unsupported"]
PART_TYPES: tuple[str, ...] = get_args(PartType)

Utterance = Literal["narration", "answer"]
UTTERANCES: tuple[str, ...] = get_args(Utterance)
INFERRED_OPTION = "utterance_inferred"
"""The option that says a part's utterance marker was inferred, not said by the provider."""

STREAMED_OPTIONS = frozenset({"signature"})
"""Option keys that arrive in pieces and concatenate when parts merge; all others replace."""


class CitationSource(StreamfoldModel):
    """Where a citation points: a web page, a document, or a place."""

    type: Literal["web", "document", "place"]
    title: str | None = None
    url: str | None = None
    document_id: str | None = None
    metadata: JsonObject = Field(default_factory=dict)


class Citation(StreamfoldModel):
    """A span of a part's text backed by a source."""

    cited_text: str | None = None
    source: CitationSource | None = None
    start_index: int | None = None
    end_index: int | None = None
    confidence: float | None = None
    metadata: JsonObject = Field(default_factory=dict)


class ContentPart(StreamfoldModel):
    """One piece of a message: text, thinking, an image or file, or an opaque provider block."""

    type: PartType
    content: StrictStr | None = None
    options: JsonObject = Field(default_factory=dict)
    citations: list[Citation] = Field(default_factory=list)

    @classmethod
    def text(cls, content: str, **options: Any) -> ContentPart:
        """Build a text part."""
        return cls(type="text", content=content, options=options)

    @classmethod
    def thinking(cls, content: str, **options: Any) -> ContentPart:
        """Build a thinking part (pass `signature=` to keep it replayable)."""
        return cls(type="thinking", content=content, options=options)

    @classmethod
    def image(cls, content: str, **options: Any) -> ContentPart:
        """Build an image part from base64 data (pass `media="image/png"`)."""
        return cls(type="image", content=content, options=options)

    @classmethod
    def image_url(cls, content: str, **options: Any) -> ContentPart:
        """Build an image part that points at a URL."""
        return cls(type="image_url", content=content, options=options)

    @classmethod
    def file(cls, content: str, **options: Any) -> ContentPart:
        """Build a file part from base64 data."""
        return cls(type="file", content=content, options=options)

    @classmethod
    def file_url(cls, content: str, **options: Any) -> ContentPart:
        """Build a file part that points at a URL."""
        return cls(type="file_url", content=content, options=options)

    @classmethod
    def narration(cls, content: str, **options: Any) -> ContentPart:
        """Build a text part marked as narration: work in progress, the turn goes on."""
        return cls(type="text", content=content, options={**options, "utterance": "narration"})

    @classmethod
    def answer(cls, content: str, **options: Any) -> ContentPart:
        """Build a text part marked as the model's answer."""
        return cls(type="text", content=content, options={**options, "utterance": "answer"})

    def with_options(self, **options: Any) -> ContentPart:
        """Return a copy with `options` set (later keys replace earlier ones)."""
        return _with_options(self, options)


def _with_options(part: ContentPart, updates: dict[Any, Any]) -> ContentPart:
    merged = {**part.options, **check_json_object(updates)}
    return ContentPart.model_construct(
        type=part.type, content=part.content, options=merged, citations=part.citations
    )


def utterance(part: ContentPart) -> Utterance | None:
    """Return the part's utterance marker, or None when unmarked or marked with anything else."""
    value = part.options.get("utterance")
    if value == "narration":
        return "narration"
    if value == "answer":
        return "answer"
    return None


def utterance_inferred(part: ContentPart) -> bool:
    """True when the part's marker was inferred by streamfold (from the tools around it and
    how its message ended); False when the provider or the caller set it, or it has none."""
    return utterance(part) is not None and part.options.get(INFERRED_OPTION) is True


def put_utterance(part: ContentPart, value: str, *, inferred: bool = False) -> ContentPart:
    """Return the part marked as "narration" or "answer"; any other value raises.

    `inferred=True` records that the marker was worked out rather than said: encoders
    send such a marker back to a provider only when asked.
    """
    if value not in UTTERANCES:
        raise UsageError(f"utterance: expected 'narration' or 'answer', got {value!r}")
    if inferred:
        return _with_options(part, {"utterance": value, INFERRED_OPTION: True})
    options = {k: v for k, v in part.options.items() if k != INFERRED_OPTION}
    return ContentPart.model_construct(
        type=part.type,
        content=part.content,
        options={**options, "utterance": value},
        citations=part.citations,
    )


def merge_part(primary: ContentPart | None, delta: ContentPart) -> ContentPart:
    """Merge a streamed `delta` into the `primary` part accumulated so far."""
    if primary is None:
        return delta
    if primary.type != delta.type:
        raise PartMergeError(
            f"cannot merge a {delta.type!r} part into a {primary.type!r} part "
            f"(delta content {delta.content!r} would be lost)"
        )
    if delta.content is None:
        content = primary.content
    elif primary.content is None:
        content = delta.content
    else:
        content = primary.content + delta.content
    if delta.options:
        options = dict(primary.options)
        for key, value in delta.options.items():
            before = options.get(key)
            if key in STREAMED_OPTIONS and isinstance(before, str) and isinstance(value, str):
                options[key] = before + value
            else:
                options[key] = value
    else:
        options = primary.options
    citations = primary.citations + delta.citations if delta.citations else primary.citations
    return ContentPart.model_construct(
        type=primary.type, content=content, options=options, citations=citations
    )


def parts_to_string(parts: Iterable[ContentPart | None], type: str = "text") -> str | None:
    """Join the content of the parts of `type` with a blank line; None when that is empty."""
    joined = "\n\n".join(p.content for p in parts if p is not None and p.type == type and p.content)
    return joined or None


def content_to_string(
    content: str | Sequence[ContentPart | None] | None, type: str = "text"
) -> str | None:
    """Return message content (None, a str, or a list of parts) as a plain string."""
    if content is None or isinstance(content, str):
        return content
    return parts_to_string(content, type)


def set_option_on_last_part(parts: list[ContentPart], key: Any, value: Any) -> list[ContentPart]:
    """Return `parts` with option `key` set on the last part (an empty list is unchanged)."""
    if not parts:
        return parts
    return [*parts[:-1], _with_options(parts[-1], {key: value})]


def citations(part: ContentPart) -> list[Citation]:
    """Return the part's citations (an empty list when it has none)."""
    return part.citations


def has_citations(part: ContentPart) -> bool:
    """Return True when the part carries at least one citation."""
    return bool(part.citations)
