"""The incremental JSON scanner and live partial tool arguments in the fold."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import jiter
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import read, recordings

from streamfold import PartCompleted, PartDelta, PartStarted, StreamFolder, fold, fold_message
from streamfold.accumulator import Accumulator
from streamfold.deltas import ClosePart, GrowPart, OpenPart
from streamfold.errors import StreamfoldError
from streamfold.message import ToolCall
from streamfold.partial_json import (
    Change,
    IncrementalJSON,
    PartialJSONError,
    apply_change,
    partial_arguments,
)

# --- strategies -----------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=25,
)


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    value = draw(json_values)
    ensure_ascii = draw(st.booleans())
    indent = draw(st.sampled_from([None, 0, 2]))
    separators = draw(st.sampled_from([None, (",", ":"), (" , ", " : ")]))
    text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators)
    return draw(st.sampled_from(["", " ", "\n\t"])) + text + draw(st.sampled_from(["", " \r\n"]))


def split(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(text)}), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def same(a: Any, b: Any) -> bool:
    """Deep equality where -0.0 == 0.0 but int and float must match as json.loads has them."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


def jiter_view(prefix: str) -> Any:
    return jiter.from_json(prefix.encode("utf-8", "surrogatepass"), partial_mode="trailing-strings")


def check_prefix_against_jiter(scanner: IncrementalJSON, text: str) -> None:
    """Where jiter's partial mode defines the prefix, the scanner's view is the same.

    The deliberate difference: a number at the very end of the prefix is left out until
    it is complete, so jiter is asked about the prefix before that number.
    """
    prefix = text[: scanner.offset]
    if scanner._state == 9:  # inside a number: compare without it
        prefix = text[: scanner._num_start]
    if not prefix.strip():
        assert scanner.value is None
        return
    try:
        expected = jiter_view(prefix)
    except ValueError:
        return
    assert same(scanner.value, expected), (prefix, scanner.value, expected)


# --- properties -----------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_texts(), st.lists(st.integers(min_value=0, max_value=400), max_size=30))
def test_any_value_any_split(text: str, cuts: list[int]) -> None:
    scanner = IncrementalJSON()
    rebuilt: Any = None
    for fragment in split(text, cuts):
        for change in scanner.feed(fragment):
            rebuilt = apply_change(rebuilt, change)
        # Applying the changes in order rebuilds the live value at every step.
        assert same(rebuilt, scanner.value)
        check_prefix_against_jiter(scanner, text)
    for change in scanner.close():
        rebuilt = apply_change(rebuilt, change)
    assert scanner.complete
    expected = json.loads(text)
    assert same(scanner.value, expected)
    assert same(rebuilt, expected)


@settings(max_examples=150, deadline=None)
@given(json_texts())
def test_one_character_at_a_time(text: str) -> None:
    scanner = IncrementalJSON()
    rebuilt: Any = None
    for ch in text:
        for change in scanner.feed(ch):
            rebuilt = apply_change(rebuilt, change)
        assert same(rebuilt, scanner.value)
        check_prefix_against_jiter(scanner, text)
    for change in scanner.close():
        rebuilt = apply_change(rebuilt, change)
    assert same(scanner.value, json.loads(text))
    assert same(rebuilt, scanner.value)


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def loads_strict(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


@settings(max_examples=400, deadline=None)
@given(
    json_texts(),
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=200),
            st.sampled_from(list('{}[]",:\\ u0e.-+aZtn\x01')),
        ),
        min_size=1,
        max_size=3,
    ),
    st.lists(st.integers(min_value=0, max_value=200), max_size=8),
)
def test_mutated_text_valid_iff_json_loads_and_split_independent(
    text: str, edits: list[tuple[int, str]], cuts: list[int]
) -> None:
    chars = list(text)
    for pos, ch in edits:
        pos = min(pos, len(chars))
        if pos < len(chars) and ch == "\x01":
            del chars[pos]
        else:
            chars.insert(pos, ch)
    mutated = "".join(chars)
    try:
        expected: Any = loads_strict(mutated)
        valid = True
    except ValueError:
        valid = False

    def scan(fragments: list[str]) -> Any:
        scanner = IncrementalJSON()
        for fragment in fragments:
            scanner.feed(fragment)
        scanner.close()
        return scanner.value

    try:
        whole: Any = scan([mutated])
    except PartialJSONError as exc:
        assert not valid, (mutated, exc)
        assert 0 <= exc.offset <= len(mutated)
        with pytest.raises(PartialJSONError) as split_exc:
            scan(split(mutated, cuts))
        # The same fault, wherever the text was cut.
        assert split_exc.value.offset == exc.offset
        assert str(split_exc.value) == str(exc)
        return
    assert valid, mutated
    assert same(whole, expected)
    assert same(scan(split(mutated, cuts)), expected)


# --- strings and escapes --------------------------------------------------------------


def feed_all(fragments: list[str]) -> tuple[IncrementalJSON, list[Change]]:
    scanner = IncrementalJSON()
    changes: list[Change] = []
    for fragment in fragments:
        changes.extend(scanner.feed(fragment))
    return scanner, changes


@pytest.mark.parametrize(
    "text",
    [
        r'["a\ud83d\ude00b"]',  # a surrogate pair
        r'["\ud83d\ude00\ud83d\ude01"]',  # two in a row
        r'["x\ud83dy"]',  # a lone high surrogate, as json.loads keeps it
        r'["\ud83d\n"]',  # a high surrogate then another escape
        r'["\ud83d\u0041"]',  # a high surrogate then a \u escape that is not low
        r'["\ud83d\ud83d\ude00"]',  # a high surrogate then a pair
        r'["\ude00"]',  # a lone low surrogate
        r'["\ud83d"]',  # a lone high surrogate at the end of the string
        r'{"k\u00e9y\"": "\"\\\/\b\f\n\r\t"}',  # escapes in a key and every short escape
    ],
)
def test_escapes_split_at_every_point(text: str) -> None:
    expected = json.loads(text)
    for a in range(len(text) + 1):
        for b in range(a, len(text) + 1):
            scanner, changes = feed_all([text[:a], text[a:b], text[b:]])
            scanner.close()
            assert scanner.value == expected
            rebuilt: Any = None
            for change in changes:
                rebuilt = apply_change(rebuilt, change)
            assert rebuilt == expected


def test_a_pending_surrogate_is_not_shown_until_its_pair_arrives() -> None:
    scanner = IncrementalJSON()
    assert scanner.feed('["ab\\ud83d') == [
        ("set", (), []),
        ("set", (0,), ""),
        ("append", (0,), "ab"),
    ]
    assert scanner.value == ["ab"]
    assert scanner.feed("\\ude") == []
    assert scanner.value == ["ab"]
    assert scanner.feed("00c") == [("append", (0,), "\U0001f600c")]
    assert scanner.value == ["ab\U0001f600c"]


def test_changes_per_feed_one_append_per_string() -> None:
    scanner = IncrementalJSON()
    assert scanner.feed('{"path": "a.py", "content": "line\\n') == [
        ("set", (), {}),
        ("set", ("path",), ""),
        ("append", ("path",), "a.py"),
        ("set", ("content",), ""),
        ("append", ("content",), "line\n"),
    ]
    assert scanner.feed('next\\"') == [("append", ("content",), 'next"')]
    assert scanner.value == {"path": "a.py", "content": 'line\nnext"'}
    assert scanner.feed('", "n": [1') == [("set", ("n",), [])]
    # A number is reported when the character after it arrives.
    assert scanner.value == {"path": "a.py", "content": 'line\nnext"', "n": []}
    assert scanner.feed("2, tr") == [("set", ("n", 0), 12)]
    assert scanner.feed("ue]}") == [("set", ("n", 1), True)]
    assert scanner.complete
    assert scanner.close() == []


def test_value_reads_are_cached_and_the_live_structure_is_kept() -> None:
    scanner = IncrementalJSON()
    assert scanner.value is None and not scanner.started
    scanner.feed('{"a": {"b": "x')
    assert scanner.started and not scanner.complete
    first = scanner.value
    assert first == {"a": {"b": "x"}}
    assert scanner.value is first  # the same live structure, not a copy
    assert scanner._chunks == ["x"]
    scanner.feed("y")
    scanner.feed("z")
    assert scanner._chunks == ["x", "y", "z"]
    assert scanner.value == {"a": {"b": "xyz"}}
    assert scanner._chunks == ["xyz"]  # joined once, cached


def test_top_level_scalars() -> None:
    scanner, changes = feed_all(["12", "3"])
    assert changes == [] and scanner.value is None and not scanner.complete
    assert scanner.close() == [("set", (), 123)]
    assert scanner.value == 123 and scanner.complete
    scanner, changes = feed_all(["-1.5e", "2 "])
    assert changes == [("set", (), -150.0)] and scanner.complete
    scanner, changes = feed_all(['"ab', 'c"'])
    assert changes == [("set", (), ""), ("append", (), "ab"), ("append", (), "c")]
    assert scanner.value == "abc"
    scanner, changes = feed_all(["nu", "ll"])
    assert changes == [("set", (), None)] and scanner.complete


def test_duplicate_keys_last_wins_like_json_loads() -> None:
    text = '{"a": [1], "b": 2, "a": "x"}'
    scanner, changes = feed_all([text])
    assert scanner.value == json.loads(text)
    rebuilt: Any = None
    for change in changes:
        rebuilt = apply_change(rebuilt, change)
    assert rebuilt == json.loads(text)
    assert list(rebuilt) == ["a", "b"]


def test_apply_change_copies_empty_containers() -> None:
    changes = IncrementalJSON().feed('{"a": [')
    one = two = None
    for change in changes:
        one = apply_change(one, change)
        two = apply_change(two, change)
    assert one is not None and two is not None
    one["a"].append(1)
    assert two == {"a": []}
    assert changes[1] == ("set", ("a",), [])


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "offset", "message"),
    [
        ('{"a" 1}', 5, "expected ':', got '1'"),
        ('{"a": 1 "b"}', 8, "expected ',' or '}', got '\"'"),
        ("[1, 2}", 5, "expected ',' or ']', got '}'"),
        ("{,}", 1, "expected '\"' (a key) or '}', got ','"),
        ('{"a": 1,}', 8, "expected '\"' (a key), got '}'"),
        ("[1,]", 3, "expected a value, got ']'"),
        ("[01]", 1, "expected a JSON number, got '01'"),
        ("[1.]", 1, "expected a JSON number, got '1.'"),
        ("[-]", 1, "expected a JSON number, got '-'"),
        ("[tru]", 4, "expected 'true', got 'tru]'"),
        ("[nulx]", 4, "expected 'null', got 'nulx'"),
        ("[NaN]", 1, "expected a value or ']', got 'N'"),
        ('["a\\x"]', 4, "expected an escape"),
        ('["\\u12g4"]', 6, "expected a hex digit of a \\u escape, got 'g'"),
        ('["a\nb"]', 3, "expected a string character or '\"', got '\\n'"),
        ('{"a": 1} x', 9, "expected the end of the text (the value is complete), got 'x'"),
        ("{} {}", 3, "expected the end of the text"),
    ],
)
def test_invalid_text_names_offset_and_expectation(text: str, offset: int, message: str) -> None:
    for cut in range(len(text) + 1):
        scanner = IncrementalJSON()
        with pytest.raises(PartialJSONError) as exc:
            scanner.feed(text[:cut])
            scanner.feed(text[cut:])
            scanner.close()
        assert exc.value.offset == offset, cut
        assert message in str(exc.value)
        assert isinstance(exc.value, StreamfoldError)
        # The scanner stays broken.
        with pytest.raises(PartialJSONError):
            scanner.feed("")
        with pytest.raises(PartialJSONError):
            scanner.close()


def test_incomplete_value_at_close() -> None:
    for text, expected in [
        ("", "expected a value, got the end of the text"),
        ('{"a": ', "expected a value"),
        ('{"a"', "expected ':'"),
        ("[1", "expected more of the value"),
        ('"ab', "expected more of the value"),
    ]:
        scanner = IncrementalJSON()
        scanner.feed(text)
        with pytest.raises(PartialJSONError, match=expected):
            scanner.close()


def test_an_error_carries_the_changes_made_before_it() -> None:
    scanner = IncrementalJSON()
    with pytest.raises(PartialJSONError) as exc:
        scanner.feed('{"a": 1, "b": "x" ]')
    assert exc.value.changes == (
        ("set", (), {}),
        ("set", ("a",), 1),
        ("set", ("b",), ""),
        ("append", ("b",), "x"),
    )
    assert scanner.value == {"a": 1, "b": "x"}


def test_partial_arguments_helper() -> None:
    assert partial_arguments(ToolCall(arguments='{"q": "ab')) == {"q": "ab"}
    assert partial_arguments(ToolCall(arguments={"q": 1}, status="complete")) == {"q": 1}
    assert partial_arguments(ToolCall(arguments=None)) is None
    assert partial_arguments(ToolCall(arguments="")) is None
    assert partial_arguments(ToolCall(arguments="not json")) is None
    assert partial_arguments('[1, {"a": tr') == [1, {}]


# --- in the fold ----------------------------------------------------------------------


def _without_changes(events: list[Any]) -> list[Any]:
    return [
        PartDelta(
            index=e.index,
            part_type=e.part_type,
            content=e.content,
            options=e.options,
            citations=e.citations,
        )
        if isinstance(e, PartDelta)
        else e
        for e in events
    ]


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)] or [data]


@pytest.mark.parametrize("rel", recordings())
def test_every_recording_with_live_arguments(rel: str) -> None:
    data = read(rel)
    provider = rel.split("/")[0] if rel.split("/")[0] in ("bedrock",) else None
    off = list(fold(_pieces(data, 97), provider))
    live = fold(_pieces(data, 97), provider, partial_arguments=True)
    events: list[Any] = []
    rebuilt: dict[int, Any] = {}
    text: dict[int, list[str]] = {}
    custom: set[int] = set()
    for event in live:
        events.append(event)
        if isinstance(event, PartStarted) and isinstance(event.part, ToolCall):
            start = event.part.arguments
            text[event.index] = [start if isinstance(start, str) else ""]
            if event.part.metadata.get("type") == "custom_tool_call":
                custom.add(event.index)  # free text: not scanned
        elif isinstance(event, PartDelta) and event.index in custom:
            assert event.arguments_changes == ()
            assert live.partial_arguments(event.index) is None
        elif isinstance(event, PartDelta) and event.part_type == "tool_call":
            for change in event.arguments_changes:
                rebuilt[event.index] = apply_change(rebuilt.get(event.index), change)
            text[event.index].append(event.content or "")
            # The changes rebuild the live value, which is jiter's view of the text so far.
            assert same(rebuilt.get(event.index), live.partial_arguments(event.index))
            scanner = IncrementalJSON()
            scanner.feed("".join(text[event.index]))
            check_prefix_against_jiter(scanner, "".join(text[event.index]))
        elif isinstance(event, PartCompleted) and isinstance(event.part, ToolCall):
            call = event.part
            assert "partial_arguments_error" not in call.metadata, call.metadata
            streamed = "".join(text[event.index])
            if (
                call.status == "complete"
                and event.index not in custom
                and streamed.strip()
                and json.loads(streamed) == call.arguments
            ):
                assert rebuilt[event.index] == call.arguments
                assert live.partial_arguments(event.index) == call.arguments
    # Apart from the changes, the events are those of the fold without the option.
    assert _without_changes(events) == off
    assert all(e.arguments_changes == () for e in off if isinstance(e, PartDelta))


def _tool_deltas(fragments: list[str], *, metadata: dict[str, Any] | None = None) -> list[Any]:
    call = ToolCall(call_id="c1", name="write_file", arguments="", metadata=metadata or {})
    return [
        OpenPart("k", call),
        *(GrowPart("k", content=f) for f in fragments),
        ClosePart("k", explicit=True),
    ]


def test_accumulator_changes_per_delta_and_partial_value() -> None:
    acc = Accumulator(partial_arguments=True)
    deltas = _tool_deltas(['{"path": "a.py", "con', 'tent": "x\\', "ny", '"}'])
    seen: list[tuple[Change, ...]] = []
    for delta in deltas:
        for event in acc.apply(delta):
            if isinstance(event, PartDelta):
                seen.append(event.arguments_changes)
                assert event.content == delta.content
        if isinstance(delta, GrowPart) and delta.content == "ny":
            assert acc.partial_arguments(0) == {"path": "a.py", "content": "x\ny"}
    assert seen == [
        (("set", (), {}), ("set", ("path",), ""), ("append", ("path",), "a.py")),
        (("set", ("content",), ""), ("append", ("content",), "x")),
        (("append", ("content",), "\ny"),),
        (),
    ]
    assert acc.partial_arguments(0) == {"path": "a.py", "content": "x\ny"}
    assert acc.partial_arguments(5) is None
    assert acc._slots[0].scanner is None  # released with the part


def test_option_off_leaves_the_deltas_bare() -> None:
    acc = Accumulator()
    events = acc.apply_all(_tool_deltas(['{"a": ', "1}"])[:-1])
    deltas = [e for e in events if isinstance(e, PartDelta)]
    assert [d.arguments_changes for d in deltas] == [(), ()]
    assert acc.partial_arguments(0) is None  # open, and not scanned
    assert PartDelta(index=0, part_type="text").arguments_changes == ()


def test_text_that_is_not_json_stops_the_scanner_not_the_fold() -> None:
    acc = Accumulator(partial_arguments=True)
    events = acc.apply_all(_tool_deltas(['{"a": 1', "} trailing", " more", " text"]))
    deltas = [e for e in events if isinstance(e, PartDelta)]
    # The changes before the fault are kept; after it, nothing.
    assert [d.arguments_changes for d in deltas] == [
        (("set", (), {}),),
        (("set", ("a",), 1),),
        (),
        (),
    ]
    done = next(e for e in events if isinstance(e, PartCompleted))
    assert isinstance(done.part, ToolCall)
    assert done.part.metadata["partial_arguments_error"] == (
        "invalid JSON at offset 9: expected the end of the text (the value is complete), got 't'"
    )
    assert "arguments_error" in done.part.metadata  # the final parse says so too
    assert done.part.arguments == '{"a": 1} trailing more text'
    assert acc.snapshot().tool_calls[0].metadata["partial_arguments_error"].startswith("invalid")


def test_custom_tool_input_is_not_scanned() -> None:
    acc = Accumulator(partial_arguments=True)
    events = acc.apply_all(
        _tool_deltas(["*** Begin", " Patch"], metadata={"type": "custom_tool_call"})
    )
    assert all(e.arguments_changes == () for e in events if isinstance(e, PartDelta))
    done = next(e for e in events if isinstance(e, PartCompleted))
    assert "partial_arguments_error" not in done.part.metadata


def test_arguments_in_the_start_come_as_a_delta_of_their_own() -> None:
    acc = Accumulator(partial_arguments=True)
    events = acc.apply(OpenPart("k", ToolCall(call_id="c", name="f", arguments='{"q": "a')))
    assert [type(e) for e in events] == [PartStarted, PartDelta]
    # The start's text comes in the delta too: PartStarted never carries content.
    assert events[0].part.arguments == ""  # type: ignore[union-attr]
    assert events[1] == PartDelta(
        index=0,
        part_type="tool_call",
        content='{"q": "a',
        arguments_changes=(("set", (), {}), ("set", ("q",), ""), ("append", ("q",), "a")),
    )
    events = acc.apply(GrowPart("k", content='b"}'))
    assert events[0].arguments_changes == (("append", ("q",), "b"),)
    # Complete arguments in the start: nothing to scan.
    acc = Accumulator(partial_arguments=True)
    events = acc.apply(OpenPart("j", ToolCall(call_id="c", name="f", arguments={"q": 1})))
    assert [type(e) for e in events] == [PartStarted]


def test_resume_mid_arguments_keeps_scanning() -> None:
    data = read("openai-chat/tool-call-long-args.sse")
    pieces = _pieces(data, 50)
    whole = list(fold(pieces, partial_arguments=True))
    half = len(pieces) // 2
    folder = StreamFolder(partial_arguments=True)
    events: list[Any] = []
    for piece in pieces[:half]:
        events.extend(folder.feed(piece))
    restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    for piece in pieces[half:]:
        events.extend(restored.feed(piece))
    events.extend(restored.close())
    assert events == whole
    assert any(isinstance(e, PartDelta) and e.arguments_changes for e in events[len(events) // 2 :])


async def test_afold_with_live_arguments() -> None:
    from streamfold import afold

    data = read("anthropic/tool-search-then-tool-use.sse")
    live = afold(_pieces(data, 40), partial_arguments=True)
    rebuilt: Any = None
    index = None
    async for event in live:
        if isinstance(event, PartDelta) and event.part_type == "tool_call":
            index = event.index
            for change in event.arguments_changes:
                rebuilt = apply_change(rebuilt, change)
            assert same(rebuilt, live.partial_arguments(event.index))
    assert index is not None
    final = live.snapshot().tool_calls[0]
    assert final.status == "complete" and final.arguments
    assert rebuilt == final.arguments
    assert fold_message(_pieces(data, 40), partial_arguments=True) == live.snapshot()


def test_arguments_changes_survive_the_json_event_shape() -> None:
    pytest.importorskip("redis")
    from streamfold import event_to_json
    from streamfold.relay import event_from_json

    rel = "openai-chat/tool-call-long-args.sse"
    events = list(fold([read(rel)], partial_arguments=True))
    with_changes = [e for e in events if isinstance(e, PartDelta) and e.arguments_changes]
    assert with_changes
    for event in events:
        assert event_from_json(event_to_json(event)) == event
