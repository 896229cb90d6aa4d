"""streamfold's own deltas as an input: MessageDeltas, bare ContentParts, and their JSON."""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import reliability.test_fuzz as fuzz
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_support import serve_in_thread
from support import ALL_RECORDINGS, read, without_inferred_marker

from streamfold import (
    Citation,
    ContentPart,
    Limits,
    Message,
    MessageCompleted,
    MessageDelta,
    PartCompleted,
    PartDelta,
    PartStarted,
    ProviderErrored,
    StreamFolder,
    StreamLimitError,
    StreamProtocolError,
    ToolCall,
    Usage,
    UsageError,
    UsageUpdated,
    afold_message,
    detect_provider,
    events_to_deltas,
    fold,
    fold_message,
    merge_deltas,
    to_message,
)
from streamfold.limits import DEFAULT_LIMITS
from streamfold.parts import UTTERANCES

CP = ContentPart
# What a fold records about itself, which merge_deltas has no word for.
BOOKKEEPING = frozenset({"provider", "end_marker"})


def _no_marker_inferred(part: Any) -> Any:
    part = without_inferred_marker(part)
    if isinstance(part, CP) and part.options.get("utterance") not in (None, *UTTERANCES):
        # A value that is no marker reads as none, and the fold may infer one over it.
        options = {k: v for k, v in part.options.items() if k != "utterance"}
        return part.model_copy(update={"options": options})
    return part


def seed_message(message: Message) -> Message:
    """The message without what the fold adds to the seed's reduce: its bookkeeping
    metadata and the narration / answer markers it inferred (over no marker, or over a
    stored value that is none)."""
    metadata = {k: v for k, v in message.metadata.items() if k not in BOOKKEEPING}
    content = [_no_marker_inferred(part) for part in message.content]
    return message.model_copy(update={"metadata": metadata, "content": content})


ISSUE_DELTAS = [
    MessageDelta(role="assistant", content=[CP.thinking("th")]),
    MessageDelta(content=[CP.thinking("", signature="SIG")]),
    MessageDelta(content=[None, CP.text("Hel")]),
    MessageDelta(content=[None, CP.text("lo")]),
    MessageDelta(status="complete"),
]


def ndjson(deltas: list[MessageDelta]) -> bytes:
    return "".join(json.dumps(d.model_dump(mode="json")) + "\n" for d in deltas).encode()


def sse(deltas: list[MessageDelta]) -> bytes:
    return "".join(f"data: {json.dumps(d.model_dump(mode='json'))}\n\n" for d in deltas).encode()


def test_message_deltas_fold_to_the_message_merge_deltas_gives() -> None:
    events = list(fold(ISSUE_DELTAS))
    final = events[-1]
    assert isinstance(final, MessageCompleted)
    assert seed_message(final.message) == seed_message(to_message(merge_deltas(ISSUE_DELTAS)))
    assert set(final.message.metadata) == BOOKKEEPING
    assert final.message.metadata["provider"] == "streamfold"
    assert final.message.metadata["end_marker"] is True
    assert [type(e).__name__ for e in events] == [
        "PartStarted",
        "PartDelta",
        "PartDelta",
        "PartStarted",
        "PartDelta",
        "PartDelta",
        "PartMarked",  # a normal end: the text after the last tool (none) is the answer
        "PartCompleted",
        "PartCompleted",
        "MessageCompleted",
    ]
    # Every character comes in a PartDelta; starts carry the kind only.
    starts = [e for e in events if isinstance(e, PartStarted)]
    assert [s.part for s in starts] == [CP(type="thinking"), CP(type="text")]
    texts = [e.content for e in events if isinstance(e, PartDelta)]
    assert texts == ["th", "", "Hel", "lo"]
    done = [e for e in events if isinstance(e, PartCompleted)]
    assert [d.explicit for d in done] == [False, False]
    assert [item.content for d in done for item in d.display_items] == [
        {"text": "th"},
        {"text": "Hello", "utterance": "answer"},
    ]


@pytest.mark.parametrize("form", ["ndjson", "sse", "dicts", "one-chunk-per-byte"])
def test_the_json_form_folds_the_same_and_is_detected(form: str) -> None:
    expected = fold_message(ISSUE_DELTAS)
    if form == "ndjson":
        chunks: list[Any] = [ndjson(ISSUE_DELTAS)]
    elif form == "sse":
        chunks = [sse(ISSUE_DELTAS)]
    elif form == "dicts":
        chunks = [d.model_dump(mode="json") for d in ISSUE_DELTAS]
    else:
        data = sse(ISSUE_DELTAS)
        chunks = [data[i : i + 1] for i in range(len(data))]
    assert fold_message(chunks) == expected
    assert detect_provider(ISSUE_DELTAS[0].model_dump(mode="json")) == "streamfold"
    # Only the fields set, as a hand-written producer may send them.
    assert detect_provider({"content": [None, {"type": "text", "content": "x"}]}) == "streamfold"


def test_a_single_delta_is_one_chunk() -> None:
    message = fold_message(MessageDelta(content=[CP.text("hi")], status="complete"))
    assert message.text == "hi"
    assert message.status == "complete"


def test_a_slot_named_in_completed_completes_at_once_with_its_display_items() -> None:
    folder = StreamFolder()
    assert folder.feed(MessageDelta(content=[CP.text("Looking it up.")]))
    events = folder.feed(
        MessageDelta(
            completed=[0],
            tool_calls=[ToolCall(call_id="c1", name="search", arguments='{"q": "x"}', index=1)],
        )
    )
    done = [e for e in events if isinstance(e, PartCompleted)]
    assert len(done) == 1
    assert done[0].index == 0
    assert done[0].explicit is True
    # The tool call that came with it made the text narration before it completed.
    assert done[0].display_items[0].content == {"text": "Looking it up.", "utterance": "narration"}
    assert not folder.finished
    events = folder.feed(MessageDelta(completed=[1]))
    assert [(e.index, e.explicit) for e in events if isinstance(e, PartCompleted)] == [(1, True)]
    # A tool call's own status "complete" closes it too (its arguments sent whole).
    whole = ToolCall(call_id="c2", name="now", arguments={"tz": "UTC"}, status="complete")
    events = folder.feed(MessageDelta(tool_calls=[whole.replaced(index=2)]))
    assert [(e.index, e.explicit) for e in events if isinstance(e, PartCompleted)] == [(2, True)]
    events = folder.feed(MessageDelta(status="complete", stop_reason="tool_use")) + folder.close()
    message = events[-1].message  # type: ignore[union-attr]
    assert message.status == "complete"
    assert [c.arguments for c in message.tool_calls] == [{"q": "x"}, {"tz": "UTC"}]


def test_whole_arguments_after_argument_text_are_a_repair_not_a_replacement() -> None:
    deltas = [
        MessageDelta(tool_calls=[ToolCall(call_id="c", name="f", arguments='{"a": 1}', index=0)]),
        # What ToolCall(status="complete") validates to: arguments {} (merge_deltas would
        # replace the text with it; the fold keeps the text and says so).
        MessageDelta(tool_calls=[ToolCall(index=0, status="complete")]),
        MessageDelta(status="complete"),
    ]
    message = fold_message(deltas)
    assert message.tool_calls[0].arguments == {"a": 1}
    assert message.metadata["repairs"] == {"tool_arguments_replaced": 1}
    with pytest.raises(StreamProtocolError, match="would replace what it has"):
        fold_message(deltas, strict=True)


def test_growth_after_an_explicit_end_is_a_repair_or_a_strict_error() -> None:
    deltas = [
        MessageDelta(content=[CP.text("a")], completed=[0]),
        MessageDelta(content=[CP.text("b")]),
        MessageDelta(status="complete"),
    ]
    lenient = fold_message(deltas)
    assert lenient.text == "a"
    assert lenient.metadata["repairs"] == {"delta_after_part_end": 1}
    with pytest.raises(StreamProtocolError) as caught:
        fold_message(deltas, strict=True)
    assert caught.value.provider == "streamfold"
    assert caught.value.position == 2
    assert caught.value.partial is not None
    assert caught.value.partial.text == "a"


def test_tool_call_fragments_merge_by_index_and_their_arguments_parse() -> None:
    deltas = [
        MessageDelta(content=[CP.text("Let me check.")]),
        MessageDelta(tool_calls=[ToolCall(call_id="c1", name="get", arguments='{"ci', index=1)]),
        MessageDelta(tool_calls=[ToolCall(arguments='ty": "Oslo"}', index=1)]),
        MessageDelta(tool_calls=[ToolCall(call_id="c2", name="now", arguments={"tz": "UTC"})]),
        MessageDelta(status="complete", stop_reason="tool_use", usage=Usage(output_tokens=3)),
        MessageDelta(usage=Usage(output_tokens=2)),
    ]
    events = list(fold(deltas))
    message = events[-1].message  # type: ignore[union-attr]
    assert [(c.call_id, c.name, c.arguments, c.index) for c in message.tool_calls] == [
        ("c1", "get", {"city": "Oslo"}, 1),
        ("c2", "now", {"tz": "UTC"}, 2),
    ]
    assert message.usage is not None and message.usage.output_tokens == 5
    assert [e.usage.output_tokens for e in events if isinstance(e, UsageUpdated)] == [3, 5]
    merged = to_message(merge_deltas(deltas))
    assert seed_message(message).content == merged.content
    assert message.tool_calls[0] == merged.tool_calls[0]


def test_a_type_clash_at_a_slot_is_a_protocol_error_that_keeps_the_parts_before() -> None:
    deltas = [
        MessageDelta(content=[CP.text("kept")]),
        MessageDelta(content=[CP.thinking("lost?")]),
    ]
    with pytest.raises(StreamProtocolError) as caught:
        fold_message(deltas)
    error = caught.value
    assert "expected a text at slot 0" in str(error)
    assert error.provider == "streamfold"
    assert error.position == 2
    assert error.raw == CP.thinking("lost?")
    assert error.partial is not None and error.partial.text == "kept"


def test_a_slot_opened_below_a_later_one_is_a_repair_or_a_strict_error() -> None:
    deltas = [
        MessageDelta(content=[None, CP.text("second")]),
        MessageDelta(content=[CP.thinking("first")]),
        MessageDelta(status="complete"),
    ]
    message = fold_message(deltas)
    assert [p.content for p in message.content] == ["second", "first"]  # arrival order
    assert message.metadata["repairs"] == {"slot_out_of_order": 1}
    with pytest.raises(StreamProtocolError, match="slots open in index order"):
        fold_message(deltas, strict=True)


def test_role_status_and_stop_reason_follow_the_seed_rules() -> None:
    deltas = [
        MessageDelta(role="user", content=[CP.text("hi")]),
        MessageDelta(status="length", stop_reason="length"),
        MessageDelta(status="complete", metadata={"model": "m"}),
    ]
    message = fold_message(deltas)
    assert message.role == "user"
    assert message.status == "length"  # status only moves forward
    assert message.stop_reason == "length"
    assert message.metadata["model"] == "m"
    assert seed_message(message) == seed_message(to_message(merge_deltas(deltas)))


def test_a_stream_that_ends_without_a_final_status_keeps_every_part() -> None:
    message = fold_message(ISSUE_DELTAS[:-1])
    assert message.status == "incomplete"
    assert message.metadata["end_marker"] is False
    assert [p.content for p in message.content] == ["th", "Hello"]


def test_an_error_status_ends_the_message_cut() -> None:
    deltas = [MessageDelta(content=[CP.text("par")]), MessageDelta(status="error")]
    message = fold_message(deltas)
    assert message.status == "error"
    assert message.metadata["end_marker"] is False
    assert message.text == "par"


def test_limits_hold_on_message_deltas() -> None:
    deltas = [MessageDelta(content=[CP.text("x" * 6)]), MessageDelta(content=[CP.text("y" * 6)])]
    with pytest.raises(StreamLimitError) as caught:
        fold_message(deltas, limits=Limits(max_part_chars=10))
    assert caught.value.partial is not None
    assert caught.value.partial.text == "xxxxxx"
    many = [MessageDelta(content=[*([None] * i), CP.text("p")]) for i in range(5)]
    with pytest.raises(StreamLimitError, match="too many parts"):
        fold_message(many, limits=Limits(max_parts=3))
    # max_bytes counts each delta's JSON as it arrives, as it counts the bytes of a wire.
    taken: list[int] = []

    def endless() -> Iterator[MessageDelta]:
        for n in itertools.count():
            taken.append(n)
            yield MessageDelta(content=[CP.text("z" * 100)])

    with pytest.raises(StreamLimitError, match="max_bytes") as long:
        fold_message(endless(), limits=Limits(max_bytes=10_000))
    assert long.value.partial is not None and long.value.partial.text
    assert len(taken) < 100  # refused at the limit, not after the whole input


def test_bare_content_parts_grow_the_last_part_of_their_type() -> None:
    parts = [CP.thinking("hm"), CP.thinking("m"), CP.text("Hel"), CP.text("lo"), CP.thinking("!")]
    message = fold_message(parts)
    assert [(p.type, p.content) for p in message.content] == [
        ("thinking", "hmm"),
        ("text", "Hello"),
        ("thinking", "!"),
    ]
    assert message.status == "incomplete"  # no delta said the message ended
    assert fold_message(parts[:1]).role == "assistant"
    folder = StreamFolder(role="user")
    folder.feed(CP.text("hi"))
    assert folder.close()[-1].message.role == "user"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "payload",
    [
        {"content": "not a list"},
        {"content": [{"type": "bogus", "content": "x"}]},
        {"tool_calls": [{"index": -1, "arguments": "{}"}]},
        {"status": "complete", "usage": {"input_tokens": "many"}},
    ],
)
def test_a_hostile_json_delta_is_a_protocol_error(payload: dict[str, Any]) -> None:
    with pytest.raises(StreamProtocolError) as caught:
        fold_message([{"content": [{"type": "text", "content": "ok"}]}, payload])
    assert caught.value.provider == "streamfold"
    assert caught.value.position == 2
    assert caught.value.partial is not None and caught.value.partial.text == "ok"


def test_a_decoded_dict_nested_past_what_python_can_validate_is_a_protocol_error() -> None:
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"a": deep}
    payload = {"content": [{"type": "text", "content": "x", "options": {"deep": deep}}]}
    with pytest.raises(StreamProtocolError, match="nested too deep"):
        fold_message([payload])


def test_message_deltas_into_a_fold_of_another_kind_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="provider 'streamfold'"):
        StreamFolder("anthropic").feed(ISSUE_DELTAS[0])
    folder = StreamFolder()
    folder.feed(b"data: ")
    with pytest.raises(UsageError, match="expected sse bytes, got a MessageDelta"):
        folder.feed(ISSUE_DELTAS[0])


async def _deltas() -> AsyncIterator[MessageDelta]:
    for delta in ISSUE_DELTAS:
        yield delta


async def test_afold_folds_message_deltas_on_asyncio() -> None:
    assert await afold_message(_deltas()) == fold_message(ISSUE_DELTAS)


def test_afold_folds_message_deltas_on_trio() -> None:
    async def main() -> Message:
        return await afold_message(_deltas())

    assert trio.run(main) == fold_message(ISSUE_DELTAS)


def test_a_saved_fold_of_message_deltas_resumes() -> None:
    folder = StreamFolder()
    for delta in ISSUE_DELTAS[:3]:
        folder.feed(delta)
    resumed = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    for delta in ISSUE_DELTAS[3:]:
        resumed.feed(delta)
    message = resumed.close()[-1].message  # type: ignore[union-attr]
    assert message == fold_message(ISSUE_DELTAS)


# --- properties ----------------------------------------------------------------------

SLOT_KINDS = st.sampled_from(["text", "thinking", "tool_call"])
FINAL_STATUSES = st.sampled_from(["complete", "length", "content_filtered", "error", "cancelled"])
usages = st.builds(
    Usage,
    input_tokens=st.none() | st.integers(0, 50),
    output_tokens=st.none() | st.integers(0, 50),
    cumulative=st.booleans(),
)
citations = st.builds(Citation, cited_text=st.text(max_size=3))


@st.composite
def part_pieces(draw: st.DrawFn, kind: str) -> list[ContentPart | ToolCall]:
    """The pieces one slot streams: parts of its type, or a tool call's fragments."""
    if kind == "tool_call":
        arguments = draw(
            st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=3)
        )
        text = json.dumps(arguments)
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=3)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        call_id = draw(st.text(min_size=1, max_size=3))
        name = draw(st.sampled_from(["f", "g"]))
        metadata = st.dictionaries(st.just("x"), st.text(max_size=2), max_size=1)
        first = ToolCall(call_id=call_id, name=name, arguments=pieces[0], metadata=draw(metadata))
        rest = [ToolCall(arguments=piece, metadata=draw(metadata)) for piece in pieces[1:]]
        return [first, *rest]
    part = st.builds(
        ContentPart,
        type=st.just(kind),
        content=st.none() | st.text(max_size=5),
        options=st.dictionaries(
            st.sampled_from(["signature", "id", "utterance"]), st.text(max_size=4), max_size=2
        ),
        citations=st.lists(citations, max_size=1),
    )
    return draw(st.lists(part, min_size=1, max_size=4))


@st.composite
def delta_streams(draw: st.DrawFn) -> list[MessageDelta]:
    """Any stream of MessageDeltas whose slots first appear in index order, with a final
    status somewhere, explicit ends after a slot's last piece, usage, metadata..."""
    kinds = draw(st.lists(SLOT_KINDS, max_size=4))
    pieces = [draw(part_pieces(kind)) for kind in kinds]
    # Interleave: at each step, take the next piece of an open slot or open the next slot.
    taken = [0] * len(kinds)
    order: list[int] = []
    opened = 0
    while len(order) < sum(map(len, pieces)):
        choices = [s for s in range(opened) if taken[s] < len(pieces[s])]
        if opened < len(kinds):
            choices.append(opened)
        slot = draw(st.sampled_from(choices))
        opened = max(opened, slot + 1)
        order.append(slot)
        taken[slot] += 1
    # Group the steps into deltas: a delta holds at most one piece per slot.
    groups: list[list[int]] = []
    for slot in order:
        if groups and slot not in groups[-1] and draw(st.booleans()):
            groups[-1].append(slot)
        else:
            groups.append([slot])
    explicit = {s for s in range(len(kinds)) if draw(st.booleans())}
    taken = [0] * len(kinds)
    deltas: list[MessageDelta] = []
    for group in groups:
        content: list[ContentPart | None] = []
        calls: list[ToolCall] = []
        completed: list[int] = []
        for slot in sorted(group):
            piece = pieces[slot][taken[slot]]
            taken[slot] += 1
            if isinstance(piece, ToolCall):
                calls.append(piece.replaced(index=slot))
            else:
                content.extend([None] * (slot - len(content)))
                content.append(piece)
            if taken[slot] == len(pieces[slot]) and slot in explicit:
                completed.append(slot)
        deltas.append(MessageDelta(content=content, tool_calls=calls, completed=completed))
    deltas.extend(draw(st.lists(st.just(MessageDelta()), min_size=0 if deltas else 1, max_size=1)))
    # Message-level news on any of them; a final status on at least one.
    finals = draw(st.sets(st.integers(0, len(deltas) - 1), min_size=1))
    role = draw(st.sampled_from(["assistant", "user"]))
    news = []
    for i, delta in enumerate(deltas):
        update: dict[str, Any] = {
            "role": role,
            "usage": draw(st.none() | usages),
            "stop_reason": draw(st.none() | st.sampled_from(["stop", "length", "tool_use"])),
            "raw_stop_reason": draw(st.none() | st.text(max_size=3)),
            "metadata": draw(
                st.dictionaries(st.sampled_from(["id", "model"]), st.text(max_size=3))
            ),
        }
        if i in finals:
            update["status"] = draw(FINAL_STATUSES)
        news.append(MessageDelta.model_validate({**delta.model_dump(), **update}))
    return news


@settings(max_examples=300, deadline=None)
@given(delta_streams())
def test_any_delta_stream_folds_to_the_message_merge_deltas_gives(
    deltas: list[MessageDelta],
) -> None:
    events = list(fold(deltas, strict=True))
    final = events[-1]
    assert isinstance(final, MessageCompleted)
    assert seed_message(final.message) == seed_message(to_message(merge_deltas(deltas)))
    # The PartDeltas of each slot, concatenated, are its final part.
    texts: dict[int, list[str]] = {}
    for event in events:
        if isinstance(event, PartDelta) and event.content is not None:
            texts.setdefault(event.index, []).append(event.content)
    for event in events:
        if isinstance(event, PartCompleted):
            joined = "".join(texts[event.index]) if event.index in texts else None
            if isinstance(event.part, ToolCall):
                assert json.loads(joined or "{}") == event.part.arguments
            else:
                assert joined == event.part.content
    # The JSON form, as NDJSON, folds the same.
    assert fold_message([ndjson(deltas)], strict=True) == final.message


RECORDINGS = ALL_RECORDINGS


@pytest.mark.parametrize("rel", RECORDINGS)
def test_a_recordings_events_as_message_deltas_fold_to_the_same_message(rel: str) -> None:
    events = list(fold([read(rel)]))
    original = events[-1]
    assert isinstance(original, MessageCompleted)
    deltas = events_to_deltas(events)
    again = fold_message(deltas)
    assert seed_message(again) == seed_message(original.message)
    # The message still names the provider that wrote it.
    assert again.metadata["provider"] == original.message.metadata["provider"]
    # ... and so does their JSON, sent as server-sent events.
    assert fold_message([sse(deltas)]) == again


def test_an_error_delta_carrying_the_error_ends_with_provider_errored() -> None:
    error = {"type": "overloaded_error", "message": "Overloaded"}
    deltas = [
        MessageDelta(content=[CP.text("par")]),
        MessageDelta(status="error", stop_reason="error", metadata={"error": error}),
    ]
    events = list(fold(deltas))
    errored = [e for e in events if isinstance(e, ProviderErrored)]
    assert [(e.error_type, e.message) for e in errored] == [("overloaded_error", "Overloaded")]
    assert errored[0].partial.text == "par"
    message = events[-1].message  # type: ignore[union-attr]
    assert seed_message(message) == seed_message(to_message(merge_deltas(deltas)))


def test_a_service_streams_a_fold_as_message_deltas_and_a_client_folds_them() -> None:
    import httpx
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    rel = "anthropic/thinking-then-tool-use.sse"
    original = fold_message([read(rel)])

    async def relay(request: Any) -> StreamingResponse:
        deltas = events_to_deltas(fold([read(rel)]))
        lines = (json.dumps(d.model_dump(mode="json")) + "\n" for d in deltas)
        return StreamingResponse(lines, media_type="application/x-ndjson")

    app = Starlette(routes=[Route("/fold", relay)])
    with serve_in_thread(app) as base, httpx.stream("GET", base + "/fold") as response:
        events = list(fold(response.iter_bytes()))
    assert isinstance(events[-1], MessageCompleted)
    assert seed_message(events[-1].message) == seed_message(original)
    # Each part completed on its own as it arrived, with its display items.
    done = [e for e in events if isinstance(e, PartCompleted)]
    assert [e.part for e in done] == original.stream_order()
    assert all(e.display_items for e in done)


# --- the fuzz, on this door ------------------------------------------------------------


@functools.cache
def delta_stream(rel: str) -> fuzz.Stream:
    """A recording folded and sent on as MessageDeltas (NDJSON), as a fuzz stream."""
    deltas = events_to_deltas(fold([read(rel)]))
    lines = ndjson(deltas).splitlines(keepends=True)
    return fuzz.Stream("streamfold/" + rel, "ndjson", b"", [fuzz._ndjson_event(x) for x in lines])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rel=st.sampled_from(RECORDINGS), data=st.data())
def test_mutated_message_delta_streams_only_raise_streamfold_errors(
    rel: str, data: st.DataObject
) -> None:
    # The fuzz's promises (only typed errors, consistent events, no part lost, bounded
    # output) on MessageDelta JSON mutated event by event, as bytes and as dicts.
    c = fuzz.HypothesisChooser(data)
    stream, done = fuzz.mutate_events(delta_stream(rel), c)
    limits = DEFAULT_LIMITS
    if c.integer(0, 3) == 0:
        limits = Limits(max_parts=c.choice([0, 1, 3]), max_part_chars=c.choice([0, 5, 200]))
    mode = fuzz.Mode(c.choice([None, "streamfold"]), c.boolean(), limits)
    payload = fuzz.render(stream)
    fuzz.check_bounded(fuzz.run_fold(fuzz.split(payload, c), mode), len(payload))
    fuzz.check_bounded(fuzz.run_fold(fuzz.as_dicts(stream), mode), len(payload))
    data.draw(st.just(done), label="mutations")
