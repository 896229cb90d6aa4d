"""The AWS eventstream framer: every recording, any split, CRCs, truncation, header types."""

from __future__ import annotations

import itertools
import json
import struct
import uuid
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import (
    REAL,
    final_message,
    fold_bytes,
    fold_outcome,
    split_at,
    without_inferred_marker,
)

from streamfold import NoEventsError, StreamProtocolError, fold_message
from streamfold.errors import UsageError
from streamfold.eventstream import EventStreamFramer, EventStreamMessage, eventstream_payload

EVENTSTREAMS = sorted(p.name for p in (REAL / "bedrock").glob("*.eventstream"))


def _raw(name: str) -> bytes:
    return (REAL / "bedrock" / name).read_bytes()


def _twin(name: str) -> list[dict[str, Any]]:
    text = (REAL / "bedrock" / name.replace(".eventstream", ".ndjson")).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _frame(data: bytes, cuts: list[int] | None = None) -> list[EventStreamMessage]:
    framer = EventStreamFramer()
    if cuts is None:
        pieces = [data]
    else:
        points = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
        pieces = [data[a:b] for a, b in itertools.pairwise(points)]
    messages: list[EventStreamMessage] = []
    for piece in pieces:
        messages.extend(framer.feed(piece))
    messages.extend(framer.close())
    return messages


# --- a small encoder written from the AWS eventstream spec (test-only) -------------------

BOOL_TRUE, BOOL_FALSE, BYTE, SHORT, INT, LONG, BYTES, STRING, TIMESTAMP, UUID = range(10)


def _header(name: str, kind: int, value: Any) -> bytes:
    encoded = name.encode()
    head = bytes([len(encoded)]) + encoded + bytes([kind])
    if kind in (BOOL_TRUE, BOOL_FALSE):
        return head
    if kind == BYTE:
        return head + struct.pack(">b", value)
    if kind == SHORT:
        return head + struct.pack(">h", value)
    if kind == INT:
        return head + struct.pack(">i", value)
    if kind in (LONG, TIMESTAMP):
        return head + struct.pack(">q", value)
    if kind in (BYTES, STRING):
        blob = value.encode() if kind == STRING else value
        return head + struct.pack(">H", len(blob)) + blob
    if kind == UUID:
        return head + value.bytes
    raise AssertionError(kind)


def encode(headers: list[tuple[str, int, Any]], payload: bytes) -> bytes:
    """One eventstream message: prelude (lengths + CRC), headers, payload, message CRC."""
    return raw_message(b"".join(_header(*h) for h in headers), payload)


def raw_message(head: bytes, payload: bytes = b"") -> bytes:
    """A message whose headers section is the bytes `head`, well-formed or not; CRCs right."""
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(kind: str, body: dict[str, Any]) -> bytes:
    """A Bedrock event message as the service sends it."""
    return encode(
        [
            (":event-type", STRING, kind),
            (":content-type", STRING, "application/json"),
            (":message-type", STRING, "event"),
        ],
        json.dumps(body).encode(),
    )


def _reencode(message: EventStreamMessage) -> bytes:
    kinds = {str: STRING, bytes: BYTES}
    headers = [(k, kinds[type(v)], v) for k, v in message.headers.items()]
    return encode(headers, message.payload)


# --- the recordings ----------------------------------------------------------------------


def test_there_are_seven_recordings() -> None:
    assert len(EVENTSTREAMS) == 7


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_payloads_equal_the_ndjson_twin(name: str) -> None:
    messages = _frame(_raw(name))
    twin = _twin(name)
    assert len(messages) == len(twin)
    for message, line in zip(messages, twin, strict=True):
        assert message.headers[":message-type"] == "event"
        assert message.headers[":content-type"] == "application/json"
        assert eventstream_payload(message) == line


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_the_spec_encoder_rebuilds_the_recording_byte_for_byte(name: str) -> None:
    # The framer kept every header and payload byte: re-encoding gives the file back.
    data = _raw(name)
    assert b"".join(_reencode(m) for m in _frame(data)) == data


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_a_whole_stream_is_not_truncated(name: str) -> None:
    framer = EventStreamFramer()
    framer.feed(_raw(name))
    framer.close()
    assert not framer.truncated


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_byte_by_byte_equals_whole(name: str) -> None:
    data = _raw(name)
    assert _frame(data, list(range(len(data)))) == _frame(data)


@pytest.mark.parametrize("name", EVENTSTREAMS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_split_equals_whole(name: str, data: st.DataObject) -> None:
    raw = _raw(name)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=60))
    assert _frame(raw, cuts) == _frame(raw)


# --- CRCs --------------------------------------------------------------------------------


def _boundaries(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += struct.unpack_from(">I", data, pos)[0]
    return starts


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_a_flipped_prelude_byte_is_a_prelude_crc_error(name: str) -> None:
    data = _raw(name)
    starts = _boundaries(data)
    for start in (starts[0], starts[len(starts) // 2], starts[-1]):
        for offset in range(12):
            broken = bytearray(data)
            broken[start + offset] ^= 0x20
            with pytest.raises(StreamProtocolError) as info:
                _frame(bytes(broken))
            assert "prelude CRC32" in str(info.value)
            assert info.value.provider == "bedrock"


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_a_flipped_payload_byte_is_a_message_crc_error(name: str) -> None:
    data = _raw(name)
    starts = [*_boundaries(data), len(data)]
    for start, end in itertools.pairwise(starts[:4]):
        for at in (start + 12, (start + end) // 2, end - 5, end - 1):
            broken = bytearray(data)
            broken[at] ^= 0x01
            with pytest.raises(StreamProtocolError) as info:
                _frame(bytes(broken))
            assert "message CRC32" in str(info.value)


def test_a_crc_error_through_the_fold_is_a_stream_protocol_error() -> None:
    data = bytearray(_raw("text-nova-micro.eventstream"))
    data[_boundaries(bytes(data))[5] + 20] ^= 0x01
    with pytest.raises(StreamProtocolError, match="message CRC32"):
        fold_message([bytes(data)])


# --- truncation --------------------------------------------------------------------------


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_a_truncated_last_message_is_dropped(name: str) -> None:
    data = _raw(name)
    starts = [*_boundaries(data), len(data)]
    twin = _twin(name)
    stop_at = next(i for i, line in enumerate(twin) if "messageStop" in line)
    whole = final_message(fold_bytes(data))
    for k, (start, end) in enumerate(itertools.pairwise(starts)):
        cut = data[: (start + end) // 2]
        framer = EventStreamFramer()
        assert len(framer.feed(cut)) == k
        assert framer.close() == []
        assert framer.truncated
        try:
            message = final_message(fold_bytes(cut))
        except NoEventsError as exc:
            assert k == 0 and "cut before the end of its first message" in str(exc)
            message = exc.partial  # no event at all: an error, holding the empty message
        if k <= stop_at:
            # Cut before messageStop: whatever arrived is kept, marked incomplete.
            assert message.status == "incomplete"
            assert message.stop_reason is None
        else:
            # Only the usage (the metadata event) is lost: the message itself had ended,
            # but not the stream, and that shows.
            assert message.status == "complete"
            assert message.usage is None
            assert message.metadata["end_marker"] is False
            assert message.content == whole.content
            assert message.tool_calls == whole.tool_calls


def test_parts_received_before_a_cut_are_kept() -> None:
    data = _raw("thinking-signature-claude.eventstream")
    starts = _boundaries(data)
    # Cut in the middle of the text block: thinking (with its signature) and the first
    # text deltas survive.
    cut = data[: starts[19] + 7]
    message = final_message(fold_bytes(cut))
    assert message.status == "incomplete"
    assert [p.type for p in message.content] == ["thinking", "text"]
    assert message.content[0].options["signature"].startswith("Eu0CCkgIBxAB")
    assert message.content[1].content == "Hello! It's nice"


# --- header value types, limits, message types ----------------------------------------------


def test_every_header_value_type_parses() -> None:
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    headers = [
        ("t", BOOL_TRUE, None),
        ("f", BOOL_FALSE, None),
        ("byte", BYTE, -7),
        ("short", SHORT, -300),
        ("int", INT, 70_000),
        ("long", LONG, -(2**40)),
        ("bytes", BYTES, b"\x00\xffraw"),
        ("string", STRING, "héllo"),
        ("timestamp", TIMESTAMP, 1_700_000_000_123),
        ("uuid", UUID, ident),
    ]
    message = encode(headers, b"{}")
    for cuts in (None, list(range(len(message)))):
        (parsed,) = _frame(message, cuts)
        assert parsed.headers == {
            "t": True,
            "f": False,
            "byte": -7,
            "short": -300,
            "int": 70_000,
            "long": -(2**40),
            "bytes": b"\x00\xffraw",
            "string": "héllo",
            "timestamp": 1_700_000_000_123,
            "uuid": ident,
        }
        assert parsed.payload == b"{}"


_BITS = {BYTE: 8, SHORT: 16, INT: 32, LONG: 64, TIMESTAMP: 64}


@pytest.mark.parametrize("kind", sorted(_BITS))
def test_integer_headers_parse_as_struct_packs_them_at_every_bound(kind: int) -> None:
    bits = _BITS[kind]
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    values = [low, low + 1, -256, -1, 0, 1, 127, 128, 255, 256, high - 1, high]
    values = [v for v in values if low <= v <= high]
    message = encode([(f"n{n}", kind, v) for n, v in enumerate(values)], b"")
    (parsed,) = _frame(message)
    assert parsed.headers == {f"n{n}": v for n, v in enumerate(values)}


@pytest.mark.parametrize("kind", [*sorted(_BITS), BYTES])
def test_a_header_value_cut_short_is_a_protocol_error(kind: int) -> None:
    whole = _header("x", kind, 1 if kind != BYTES else b"ab")
    for cut in range(len(b"\x01x") + 1, len(whole)):
        with pytest.raises(StreamProtocolError, match="header"):
            _frame(raw_message(whole[:cut]))


def test_a_message_is_immutable_and_equal_by_value() -> None:
    (message,) = _frame(event("messageStop", {"stopReason": "end_turn"}))
    same = EventStreamMessage(dict(message.headers), bytes(message.payload))
    assert message == same and message != EventStreamMessage({}, message.payload)
    assert repr(message).startswith("EventStreamMessage(headers={':event-type': 'messageStop'")
    with pytest.raises(AttributeError, match="immutable"):
        message.payload = b"{}"  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(message)


def test_an_unknown_header_value_type_is_a_protocol_error() -> None:
    head = b"\x01x\x0a"  # name "x", type 10
    with pytest.raises(StreamProtocolError, match="header value type 0-9, got 10"):
        _frame(raw_message(head))


def test_headers_that_overrun_their_length_are_a_protocol_error() -> None:
    # A string header that says it is longer than the headers section.
    head = b"\x01x\x07\x00\x09abc"
    with pytest.raises(StreamProtocolError, match="header value"):
        _frame(raw_message(head))


def test_an_oversized_message_is_refused_from_its_prelude() -> None:
    prelude = struct.pack(">II", 17 * 1024 * 1024, 0)
    prelude += struct.pack(">I", zlib.crc32(prelude))
    with pytest.raises(StreamProtocolError, match="under 16 MiB"):
        EventStreamFramer().feed(prelude)


def test_feed_after_close_is_a_usage_error() -> None:
    framer = EventStreamFramer()
    framer.close()
    with pytest.raises(UsageError):
        framer.feed(b"")


def test_an_exception_message_becomes_an_error_event() -> None:
    message = encode(
        [
            (":exception-type", STRING, "throttlingException"),
            (":content-type", STRING, "application/json"),
            (":message-type", STRING, "exception"),
        ],
        b'{"message":"Too many requests, please wait before trying again."}',
    )
    (parsed,) = _frame(message)
    assert eventstream_payload(parsed) == {
        "throttlingException": {"message": "Too many requests, please wait before trying again."}
    }
    data = event("messageStart", {"role": "assistant"}) + event(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}
    )
    result = fold_message([data + message])
    assert result.status == "error"
    assert result.text == "Hel"
    assert result.metadata["error"] == {
        "type": "throttlingException",
        "message": "Too many requests, please wait before trying again.",
    }


def test_an_error_message_becomes_an_error_event() -> None:
    message = encode(
        [
            (":message-type", STRING, "error"),
            (":error-code", STRING, "InternalFailure"),
            (":error-message", STRING, "boom"),
        ],
        b"",
    )
    (parsed,) = _frame(message)
    assert eventstream_payload(parsed) == {
        "error": {"errorCode": "InternalFailure", "message": "boom"}
    }
    result = fold_message([event("messageStart", {"role": "assistant"}) + message])
    assert result.status == "error"
    assert result.metadata["error"] == {"type": "InternalFailure", "message": "boom"}


def test_a_payload_that_is_not_json_is_a_protocol_error() -> None:
    (parsed,) = _frame(
        encode([(":event-type", STRING, "messageStart"), (":message-type", STRING, "event")], b"{")
    )
    with pytest.raises(StreamProtocolError, match="expected a JSON payload"):
        eventstream_payload(parsed)


def test_an_event_without_an_event_type_is_a_protocol_error() -> None:
    (parsed,) = _frame(encode([(":message-type", STRING, "event")], b"{}"))
    with pytest.raises(StreamProtocolError, match=":event-type"):
        eventstream_payload(parsed)


def test_synthetic_stream_folds_like_its_dicts() -> None:
    events = [
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "é"}}),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("messageStop", {"stopReason": "max_tokens"}),
        ("metadata", {"usage": {"inputTokens": 1, "outputTokens": 2}, "metrics": {}}),
    ]
    data = b"".join(event(k, v) for k, v in events)
    from_bytes = final_message(fold_bytes(data, list(range(len(data)))))
    from_dicts = fold_message([{k: v} for k, v in events], "bedrock")
    assert from_bytes == from_dicts
    assert from_bytes.status == "length"
    assert from_bytes.text == "é"


# --- a fault after good messages: the same outcome in any pieces --------------------------


def _outcomes(data: bytes, cuts: list[int]) -> list[tuple[Any, ...]]:
    """The fold of `data` whole, byte by byte, in two reads at each message boundary, and
    cut at `cuts`."""
    pieces = [[data], split_at(data, list(range(len(data)))), split_at(data, cuts)]
    pieces += [split_at(data, [at]) for at in _boundaries(data)[1:]]
    return [fold_outcome(chunks, None) for chunks in pieces]


def _with_bad_crc(data: bytes, message: int) -> bytes:
    broken = bytearray(data)
    end = [*_boundaries(data), len(data)][message + 1]
    broken[end - 1] ^= 0x01  # the message CRC's last byte
    return bytes(broken)


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_a_bad_last_message_keeps_every_message_before_it_in_any_pieces(name: str) -> None:
    data = _raw(name)
    broken = _with_bad_crc(data, len(_boundaries(data)) - 1)
    outcomes = _outcomes(broken, [len(broken) // 3, len(broken) // 2])
    events, error, text, _ = outcomes[0]
    assert all(outcome == outcomes[0] for outcome in outcomes)
    assert error == "StreamProtocolError" and "message CRC32" in text
    # Only the last message (the usage) is lost: every part came before the error.
    whole = final_message(fold_bytes(data))
    with pytest.raises(StreamProtocolError) as info:
        fold_message([broken])
    partial = info.value.partial
    assert partial is not None
    # The same parts (the whole stream's answer is marked, the errored one's is not).
    unmarked = [without_inferred_marker(p) for p in partial.content]
    assert unmarked == [without_inferred_marker(p) for p in whole.content]
    assert partial.tool_calls == whole.tool_calls
    assert len([e for e in events if "PartCompleted" in e]) == len(whole.stream_order())


def test_a_bad_last_message_keeps_the_text_and_the_tool_call() -> None:
    data = _raw("text-then-tool-use-nova.eventstream")
    broken = _with_bad_crc(data, len(_boundaries(data)) - 1)
    for chunks in ([broken], split_at(broken, list(range(len(broken))))):
        with pytest.raises(StreamProtocolError) as info:
            fold_message(chunks)
        assert info.value.partial is not None
        assert [p.type for p in info.value.partial.content] == ["text"]
        assert len(info.value.partial.tool_calls) == 1


@pytest.mark.parametrize("name", EVENTSTREAMS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_bad_message_anywhere_gives_one_outcome_in_any_pieces(
    name: str, data: st.DataObject
) -> None:
    raw = _raw(name)
    count = len(_boundaries(raw))
    broken = _with_bad_crc(raw, data.draw(st.integers(0, count - 1)))
    if data.draw(st.booleans()):
        broken = bytearray(broken)
        at = data.draw(st.sampled_from(_boundaries(raw)[1:]))
        broken[at + data.draw(st.integers(0, 11))] ^= 0x40  # a prelude as well
        broken = bytes(broken)
    cuts = data.draw(st.lists(st.integers(0, len(broken)), max_size=40))
    outcomes = _outcomes(broken, cuts)
    assert outcomes[0][1] == "StreamProtocolError"
    assert all(outcome == outcomes[0] for outcome in outcomes)


@pytest.mark.parametrize("name", EVENTSTREAMS)
@pytest.mark.parametrize(
    "junk", [b"\x00", b"junk after the end", b"\x00\x00\x00\x10" + bytes(12), b"\xff" * 40]
)
def test_bytes_after_a_finished_message_are_ignored_in_any_pieces(name: str, junk: bytes) -> None:
    # The message ended (messageStop and metadata): what follows cannot change it, so it
    # is not read, however the bytes were split.
    data = _raw(name)
    expected = fold_outcome([data], None)
    assert expected[1] is None
    for chunks in ([data + junk], [data, junk], split_at(data + junk, list(range(len(data) + 9)))):
        assert fold_outcome(chunks, None) == expected


@pytest.mark.parametrize("name", EVENTSTREAMS)
def test_a_message_that_is_not_json_gives_one_outcome_in_any_pieces(name: str) -> None:
    # Its CRCs are right, so the framer hands it over: the fold finds the fault, after
    # folding (and returning the events of) every message before it.
    data = _raw(name)
    starts = [*_boundaries(data), len(data)]
    k = len(starts) // 2
    bad = encode(
        [(":event-type", STRING, "contentBlockDelta"), (":message-type", STRING, "event")], b"{"
    )
    broken = data[: starts[k]] + bad + data[starts[k + 1] :]
    outcomes = _outcomes(broken, [starts[k] - 3, starts[k] + 5])
    assert outcomes[0][1] == "StreamProtocolError" and "JSON payload" in outcomes[0][2]
    assert all(outcome == outcomes[0] for outcome in outcomes)
