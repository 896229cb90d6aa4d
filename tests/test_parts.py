"""ContentPart: constructors, options, utterance markers, merge_part and helpers (the seed)."""

from __future__ import annotations

import functools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamfold import (
    Citation,
    CitationSource,
    ContentPart,
    InvalidModelError,
    OptionsError,
    PartMergeError,
    StreamfoldError,
    UsageError,
    citations,
    content_to_string,
    has_citations,
    is_narration,
    merge_part,
    parts_to_string,
    put_utterance,
    set_option_on_last_part,
    utterance,
)

# --- the seed's examples ---------------------------------------------------------------


def test_parts_to_string_seed_example() -> None:
    parts = [ContentPart.text("Hello"), ContentPart.image("base64data"), ContentPart.text("world")]
    assert parts_to_string(parts) == "Hello\n\nworld"


def test_parts_to_string_empty_is_none() -> None:
    assert parts_to_string([]) is None


def test_parts_to_string_skips_none_and_other_types() -> None:
    parts = [None, ContentPart.thinking("hm"), ContentPart.text("a"), None]
    assert parts_to_string(parts) == "a"
    assert parts_to_string(parts, "thinking") == "hm"
    assert parts_to_string([ContentPart.image("x")]) is None


def test_utterance_seed_examples() -> None:
    assert utterance(ContentPart.narration("Looking that up.")) == "narration"
    assert utterance(ContentPart.text("Hello")) is None
    assert utterance(ContentPart.answer("Done.")) == "answer"


def test_utterance_other_stored_value_reads_as_none() -> None:
    assert utterance(ContentPart.text("x", utterance="shout")) is None
    assert not is_narration(ContentPart.text("x", utterance="shout"))


def test_put_utterance_marks_and_rejects_other_values() -> None:
    part = put_utterance(ContentPart.text("I'll check the logs first."), "narration")
    assert is_narration(part)
    assert put_utterance(part, "answer").options == {"utterance": "answer"}
    with pytest.raises(UsageError, match="expected 'narration' or 'answer', got 'maybe'"):
        put_utterance(part, "maybe")


def test_content_to_string() -> None:
    assert content_to_string(None) is None
    assert content_to_string("plain") == "plain"
    assert content_to_string([ContentPart.text("a"), ContentPart.text("b")]) == "a\n\nb"


def test_set_option_on_last_part() -> None:
    assert set_option_on_last_part([], "cache_control", True) == []
    parts = [ContentPart.text("a"), ContentPart.text("b")]
    updated = set_option_on_last_part(parts, "cache_control", {"type": "ephemeral"})
    assert updated[0].options == {}
    assert updated[1].options == {"cache_control": {"type": "ephemeral"}}
    assert parts[1].options == {}  # the input list's parts are not changed


def test_citations_helpers() -> None:
    cited = Citation(cited_text="x", source=CitationSource(type="web", url="https://a.example"))
    part = ContentPart(type="text", content="x", citations=[cited])
    assert citations(part) == [cited]
    assert has_citations(part)
    assert not has_citations(ContentPart.text("y"))
    assert citations(ContentPart.text("y")) == []


# --- constructors and validation --------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "kind"),
    [
        (ContentPart.text, "text"),
        (ContentPart.thinking, "thinking"),
        (ContentPart.image, "image"),
        (ContentPart.image_url, "image_url"),
        (ContentPart.file, "file"),
        (ContentPart.file_url, "file_url"),
    ],
)
def test_constructors_set_type_and_options(build: object, kind: str) -> None:
    part = build("data", media="image/png", detail="low")  # type: ignore[operator]
    assert part.type == kind
    assert part.content == "data"
    assert list(part.options) == ["media", "detail"]


def test_unknown_part_type_is_a_clear_error() -> None:
    with pytest.raises(InvalidModelError, match=r"type: .*'unsupported', got 'video'") as info:
        ContentPart(type="video")  # type: ignore[arg-type]
    assert isinstance(info.value, StreamfoldError)
    assert isinstance(info.value, ValueError)


def test_non_str_content_on_text_part_is_rejected() -> None:
    with pytest.raises(InvalidModelError, match="content: Input should be a valid string, got 5"):
        ContentPart.text(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidModelError, match="content"):
        ContentPart.text(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({1: "x"}, "expected str keys, got key 1"),
        ({"when": {2: "x"}}, "expected str keys, got key 2"),
        ({"pair": (1, 2)}, r"options\['pair'\]: expected a JSON value .* got tuple"),
        ({"nan": math.nan}, r"options\['nan'\].*JSON has no nan"),
        ({"blob": b"x"}, r"options\['blob'\].*got bytes"),
        ({"nested": [1, {"s": {3}}]}, r"options\['nested'\]\[1\]\['s'\].*got set"),
    ],
)
def test_options_reject_what_json_cannot_hold(options: dict[object, object], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        ContentPart(type="text", content="x", options=options)  # type: ignore[arg-type]


def test_set_option_with_non_str_key_is_rejected() -> None:
    with pytest.raises(OptionsError, match="expected str keys"):
        set_option_on_last_part([ContentPart.text("a")], 3, True)


def test_options_keep_order_through_json() -> None:
    part = ContentPart.text("x", zeta=1, alpha={"b": 2, "a": [1.5, None, True]}, mid="m")
    back = ContentPart.model_validate_json(part.model_dump_json())
    assert back == part
    assert list(back.options) == ["zeta", "alpha", "mid"]
    assert list(back.options["alpha"]) == ["b", "a"]


# --- merge_part -------------------------------------------------------------------------


def test_merge_part_rules() -> None:
    assert merge_part(None, ContentPart.text("a")) == ContentPart.text("a")
    assert merge_part(ContentPart.text("a"), ContentPart.text("b")).content == "ab"
    none_delta = ContentPart(type="text", content=None, options={"k": 1})
    merged = merge_part(ContentPart.text("a"), none_delta)
    assert merged.content == "a"
    assert merged.options == {"k": 1}
    empty = ContentPart(type="thinking")
    assert merge_part(empty, ContentPart.thinking("t")).content == "t"


def test_merge_part_signature_concatenates_other_options_replace() -> None:
    first = ContentPart(type="thinking", content="a", options={"signature": "AB", "type": "x"})
    delta = ContentPart(type="thinking", content=None, options={"signature": "CD", "type": "x"})
    merged = merge_part(first, delta)
    assert merged.options == {"signature": "ABCD", "type": "x"}  # "type" is never doubled


def test_merge_part_appends_citations() -> None:
    c1, c2 = Citation(cited_text="1"), Citation(cited_text="2")
    a = ContentPart(type="text", content="a", citations=[c1])
    b = ContentPart(type="text", content="b", citations=[c2])
    assert merge_part(a, b).citations == [c1, c2]


def test_merge_part_of_different_types_raises_and_names_the_text() -> None:
    with pytest.raises(PartMergeError, match=r"'text' part into a 'thinking'.*'lost words'"):
        merge_part(ContentPart.thinking("t"), ContentPart.text("lost words"))


@given(st.lists(st.text(max_size=5), min_size=1, max_size=20), st.data())
def test_merge_part_any_grouping_gives_the_concatenation(
    chunks: list[str], data: st.DataObject
) -> None:
    deltas = [ContentPart.text(c) for c in chunks]
    left = functools.reduce(merge_part, deltas)
    assert left == ContentPart.text("".join(chunks))
    # Any grouping: merge a prefix and a suffix separately, then merge the two.
    cut = data.draw(st.integers(1, len(deltas)))
    head = functools.reduce(merge_part, deltas[:cut])
    tail_parts = deltas[cut:]
    grouped = merge_part(head, functools.reduce(merge_part, tail_parts)) if tail_parts else head
    assert grouped == left
