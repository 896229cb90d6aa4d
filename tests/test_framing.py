"""SSE (WHATWG rules) and NDJSON framing: whole input, byte by byte, any split, same frames."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from providers.anthropic.test_decode import _ANTHROPIC_EVENTS
from support import (
    split_at,
)

from streamfold import NDJSONDecoder, SSEDecoder, SSEEvent, UsageError


def sse(data: bytes, cuts: list[int] | None = None) -> list[SSEEvent]:
    decoder = SSEDecoder()
    points = [0, *sorted({c for c in (cuts or []) if 0 < c < len(data)}), len(data)]
    events: list[SSEEvent] = []
    for a, b in itertools.pairwise(points):
        events.extend(decoder.feed(data[a:b]))
    return events + decoder.close()


def test_basic_fields() -> None:
    data = b'event: message_start\nid: 7\nretry: 150\ndata: {"a": 1}\n\n'
    assert sse(data) == [SSEEvent(b'{"a": 1}', "message_start", "7", 150)]


@pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"])
def test_every_line_ending(end: bytes) -> None:
    data = end.join([b"event: e", b"data: one", b"", b"data: two", b"", b""])
    assert sse(data) == [SSEEvent(b"one", "e"), SSEEvent(b"two")]


def test_cr_ending_one_chunk_and_lf_starting_the_next_are_one_line_end() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b"data: a\r")
    events += decoder.feed(b"\n\r")
    events += decoder.feed(b"\ndata: b\r\n\r\n")
    assert events == [SSEEvent(b"a"), SSEEvent(b"b")]


def test_comments_multiline_data_and_field_without_space() -> None:
    data = b": keep-alive\ndata:first\ndata: second\n:another comment\n\n"
    assert sse(data) == [SSEEvent(b"first\nsecond")]


def test_field_without_colon_and_unknown_fields_are_ignored() -> None:
    assert sse(b"data\nfoo: bar\n\n") == [SSEEvent(b"")]


@pytest.mark.parametrize("end", [b"\n", b"\r\n"])
def test_an_error_line_is_an_error_event_not_dropped(end: bytes) -> None:
    # llama.cpp's server (and GPUStack) report a failure on an `error:` line, which is no
    # SSE field: read as `event: error` + `data: ...`, what came before it dispatched apart.
    lines = [b"data: {}", b"", b'error: {"code":500}', b"", b"data: [DONE]", b"", b""]
    expected = [SSEEvent(b"{}"), SSEEvent(b'{"code":500}', "error"), SSEEvent(b"[DONE]")]
    data = end.join(lines)
    assert sse(data) == expected
    assert sse(data, list(range(len(data)))) == expected
    joined = end.join([b"event: x", b"data: {}", b"error: boom", b"", b""])
    assert sse(joined) == [SSEEvent(b"{}", "x"), SSEEvent(b"boom", "error")]


def test_event_without_data_is_not_dispatched_and_resets_type() -> None:
    assert sse(b"event: lonely\n\ndata: x\n\n") == [SSEEvent(b"x")]


def test_id_persists_and_retry_needs_digits() -> None:
    events = sse(b"id: 1\ndata: a\n\nretry: soon\ndata: b\n\n")
    assert [(e.id, e.retry) for e in events] == [("1", None), ("1", None)]


def test_leading_bom_is_skipped_even_when_split() -> None:
    data = b"\xef\xbb\xbfdata: x\n\n"
    assert sse(data) == [SSEEvent(b"x")]
    assert sse(data, [1, 2]) == [SSEEvent(b"x")]


def test_last_event_without_trailing_blank_line_is_delivered_at_close() -> None:
    assert sse(b"data: a\n\ndata: last") == [SSEEvent(b"a"), SSEEvent(b"last")]


def test_utf8_split_inside_a_character() -> None:
    data = "data: héllo ✓ 🎉\n\n".encode()
    for cut in range(len(data)):
        assert [e.text for e in sse(data, [cut])] == ["héllo ✓ 🎉"]


def test_feed_after_close_is_a_usage_error() -> None:
    decoder = SSEDecoder()
    decoder.close()
    with pytest.raises(UsageError, match="after"):
        decoder.feed(b"data: x\n\n")
    ndjson = NDJSONDecoder()
    ndjson.close()
    with pytest.raises(UsageError, match="after"):
        ndjson.feed(b"{}\n")


sse_lines = st.lists(
    st.one_of(
        st.just(""),
        st.builds(
            lambda s: "data: " + s,
            st.text(alphabet=st.characters(blacklist_characters="\r\n", codec="utf-8")),
        ),
        st.builds(lambda s: "event: " + s, st.sampled_from(["a", "message_delta", "é"])),
        st.just(": comment"),
        st.just("id: 42"),
    ),
    max_size=12,
)


@given(sse_lines, st.sampled_from(["\n", "\r", "\r\n"]), st.lists(st.integers(0, 400)))
def test_any_split_gives_the_same_events(lines: list[str], end: str, cuts: list[int]) -> None:
    data = (end.join(lines) + end + end).encode()
    whole = sse(data)
    assert sse(data, cuts) == whole
    assert sse(data, list(range(len(data)))) == whole


def ndjson(data: bytes, cuts: list[int]) -> list[bytes]:
    decoder = NDJSONDecoder()
    points = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    out: list[bytes] = []
    for a, b in itertools.pairwise(points):
        out.extend(decoder.feed(data[a:b]))
    return out + decoder.close()


def test_ndjson_lines_blank_lines_and_last_line_without_newline() -> None:
    data = b'{"a": 1}\n\n  \r\n{"b": "\xc3\xa9"}\r\n{"c": 3}'
    assert ndjson(data, []) == [b'{"a": 1}', b'{"b": "\xc3\xa9"}', b'{"c": 3}']


@given(st.lists(st.text(max_size=10), max_size=8), st.lists(st.integers(0, 200)))
def test_ndjson_any_split(values: list[str], cuts: list[int]) -> None:
    data = "".join(f'{{"v": "{v!r}"}}\n' for v in values).encode()
    assert ndjson(data, cuts) == ndjson(data, [])


def test_ndjson_skips_a_leading_bom_even_when_split() -> None:
    data = b'\xef\xbb\xbf{"a": 1}\n{"b": 2}'
    for cuts in ([], [1], [1, 2], [2], list(range(len(data)))):
        assert ndjson(data, cuts) == [b'{"a": 1}', b'{"b": 2}']
    # Only the stream's first bytes can be a byte-order mark: later, it is data.
    assert ndjson(b"{}\n\xef\xbb\xbf{}\n", []) == [b"{}", b"\xef\xbb\xbf{}"]


# The framer's take_at_boundary, as the SSE hot lane uses it.


@settings(max_examples=300, deadline=None)
@given(
    picks=st.lists(st.sampled_from(range(len(_ANTHROPIC_EVENTS))), max_size=20),
    cuts=st.lists(st.integers(0, 3000), max_size=8),
    take=st.lists(st.booleans(), min_size=10, max_size=10),
)
def test_take_at_boundary_loses_and_repeats_nothing(
    picks: list[int], cuts: list[int], take: list[bool]
) -> None:
    """Framing alone: feeding pieces, or taking them at a boundary and feeding the bytes
    back, gives the same events."""
    data = b"".join(_ANTHROPIC_EVENTS[i] for i in picks)
    plain = SSEDecoder()
    expected = [e for piece in split_at(data, cuts) for e in plain.feed(piece)] + plain.close()
    framer = SSEDecoder()
    got = []
    for n, piece in enumerate(split_at(data, cuts)):
        taken = framer.take_at_boundary(piece) if take[n % len(take)] else None
        if taken is None:
            got.extend(framer.feed(piece))
            continue
        events, rest = taken
        got.extend(events)
        # Hand the rest back at an arbitrary event end, as the hot lane does.
        end = rest.find(b"\n\n")
        got.extend(framer.feed(rest[: end + 2] if end >= 0 else rest))
        if end >= 0:
            got.extend(framer.feed(rest[end + 2 :]))
    got.extend(framer.close())
    assert got == expected
