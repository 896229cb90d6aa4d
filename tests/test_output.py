"""Structured output: the answer's JSON as a typed value, live at every delta and at the end."""

from __future__ import annotations

import copy
import itertools
import json
import pickle
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AfterValidator, BaseModel, Field, TypeAdapter, ValidationError
from support import REAL

from streamfold import (
    Event,
    IncrementalJSON,
    MessageCompleted,
    OutputCompleted,
    OutputFailed,
    OutputItem,
    OutputPartial,
    OutputValidationError,
    PartDelta,
    StreamFolder,
    StreamfoldError,
    UsageError,
    afold,
    afold_output,
    event_from_json,
    event_to_json,
    fold,
    fold_message,
    fold_output,
)


class Item(BaseModel):
    name: str
    tags: list[str] = []
    score: float | None = None


class Report(BaseModel):
    title: str
    items: list[Item]
    pages: int = 0


# --- streams -------------------------------------------------------------------------


def chat_chunks(pieces: list[str], finish: str = "stop") -> list[dict[str, Any]]:
    """An OpenAI Chat stream (decoded chunks) whose answer is `pieces`, one per delta."""
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    for piece in pieces:
        chunks.append({**head, "choices": [{"index": 0, "delta": {"content": piece}}]})
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return chunks


def as_sse(chunks: list[dict[str, Any]]) -> list[bytes]:
    return [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks] + [b"data: [DONE]\n\n"]


def cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


def frames(rel: str) -> list[dict[str, Any]]:
    """A real recording's events, decoded (SSE data or NDJSON lines)."""
    raw = (REAL / rel).read_text()
    if rel.endswith(".ndjson"):
        return [json.loads(line) for line in raw.splitlines() if line.strip()]
    out = []
    for block in raw.split("\n\n"):
        data = "\n".join(
            line[5:].lstrip() for line in block.splitlines() if line.startswith("data:")
        )
        if data and data != "[DONE]":
            out.append(json.loads(data))
    return out


def folded(chunks: Any, provider: str | None, output: Any, **options: Any) -> dict[str, Any]:
    """Fold with `output`, keeping a deep copy of each partial value as it was then (the
    value is live: a later delta grows it), the text that had arrived at each, and the rest."""
    seen: dict[str, Any] = {"partials": [], "prefixes": [], "items": [], "events": []}
    text: list[str] = []
    run = fold(chunks, provider, output=output, **options)
    for event in run:
        seen["events"].append(event)
        if isinstance(event, PartDelta) and event.content:
            text.append(event.content)
        elif isinstance(event, OutputPartial):
            seen["partials"].append(copy.deepcopy(event.value))
            seen["prefixes"].append("".join(text))
        elif isinstance(event, OutputItem):
            seen["items"].append(event)
        elif isinstance(event, OutputCompleted | OutputFailed):
            seen["end"] = event
        elif isinstance(event, MessageCompleted):
            seen["message"] = event.message
    seen["fold"] = run
    return seen


def plain(value: Any) -> Any:
    """A value as JSON data, a model by the fields that arrived (defaults left out)."""
    if isinstance(value, BaseModel):
        fields = type(value).model_fields  # in the order JSON gives them
        return {k: plain(getattr(value, k)) for k in fields if k in value.model_fields_set}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def consistent(partial: Any, final: Any) -> bool:
    """`partial` is a prefix-consistent view of `final`: what it holds is there, only the
    last member of each container (and a string's end) may still be growing."""
    if isinstance(final, dict):
        if not isinstance(partial, dict) or not set(partial) <= set(final):
            return False
        keys = list(partial)
        return all(
            consistent(partial[k], final[k]) if k == keys[-1] else partial[k] == final[k]
            for k in keys
        )
    if isinstance(final, list):
        if not isinstance(partial, list) or len(partial) > len(final):
            return False
        return all(p == f for p, f in zip(partial[:-1], final, strict=False)) and (
            not partial or consistent(partial[-1], final[len(partial) - 1])
        )
    if isinstance(final, str):
        return isinstance(partial, str) and final.startswith(partial)
    return type(partial) is type(final) and partial == final


def pydantic_partial(adapter: TypeAdapter[Any], prefix: str) -> Any:
    """What pydantic's own partial validation makes of the value the prefix holds."""
    scanner = IncrementalJSON()
    scanner.feed(prefix)
    return adapter.validate_python(scanner.value, experimental_allow_partial=True)


# --- any JSON value, any model instance, cut anywhere ----------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES, st.lists(st.integers(0, 10_000), max_size=40), st.booleans())
def test_any_json_value_cut_anywhere_gives_consistent_partials_and_the_whole_value(
    value: Any, cuts: list[int], ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    seen = folded(chat_chunks(cut(text, cuts)), "openai", Any)
    final = TypeAdapter(Any).validate_json(text)
    assert isinstance(seen["end"], OutputCompleted)
    assert seen["end"].value == final and seen["fold"].output == final
    partials = seen["partials"]
    # (A top-level number is complete only when the text ends: OutputCompleted has it.)
    assert partials or type(final) in (int, float)
    for before, after in zip(partials, [*partials[1:], final], strict=False):
        assert consistent(before, after), (before, after)
    for partial in partials:
        assert consistent(partial, final)


ITEMS = st.builds(
    Item,
    name=st.text(max_size=10),
    tags=st.lists(st.text(max_size=5), max_size=3),
    score=st.none() | st.floats(allow_nan=False, allow_infinity=False),
)
REPORTS = st.builds(
    Report,
    title=st.text(max_size=15),
    items=st.lists(ITEMS, max_size=6),
    pages=st.integers(0, 10**6),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(REPORTS, st.lists(st.integers(0, 10_000), max_size=60))
def test_any_model_instance_cut_anywhere(report: Report, cuts: list[int]) -> None:
    text = report.model_dump_json()
    seen = folded(as_sse(chat_chunks(cut(text, cuts))), "openai", Report)
    final = Report.model_validate_json(text)
    assert seen["end"] == OutputCompleted(value=final)
    assert seen["message"].status == "complete"
    for partial in seen["partials"]:
        assert isinstance(partial, Report)
        assert consistent(plain(partial), plain(final)), (plain(partial), plain(final))
    # A required field shows once it arrived: the title comes first, so every partial has it.
    assert all("title" in partial.model_fields_set for partial in seen["partials"])
    # Where pydantic's own partial validation of the same prefix gives a value, it is
    # ours. (It gives none while a list inside a model ends in an element that does not
    # validate yet: it does not carry partial validation through a model; here that
    # element is left out, as pydantic leaves it out of a list at the root.)
    adapter: TypeAdapter[Report] = TypeAdapter(Report)
    for partial, prefix in zip(seen["partials"], seen["prefixes"], strict=True):
        try:
            theirs = pydantic_partial(adapter, prefix)
        except ValidationError:
            continue
        assert partial == theirs, prefix


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    JSON_VALUES | REPORTS.map(lambda r: r.model_dump()),
    st.lists(st.integers(0, 10_000), max_size=20),
)
def test_any_value_that_fails_validation_gives_output_failed_with_pydantics_errors(
    value: Any, cuts: list[int]
) -> None:
    text = json.dumps(value)
    seen = folded(chat_chunks(cut(text, cuts)), "openai", Report)
    assert seen["message"].status == "complete"
    assert seen["message"].content[0].content == text
    try:
        expected = Report.model_validate_json(text)
    except ValidationError as exc:
        assert isinstance(seen["end"], OutputFailed)
        assert seen["end"].error.text == text
        assert seen["end"].error.errors == json.loads(exc.json(include_url=False))
        with pytest.raises(OutputValidationError):
            fold_output(chat_chunks([text]), Report, "openai")
    else:
        assert seen["end"] == OutputCompleted(value=expected)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ITEMS, max_size=8), st.lists(st.integers(0, 10_000), max_size=60))
def test_a_list_of_models_is_what_pydantic_partial_validation_gives_at_every_delta(
    items: list[Item], cuts: list[int]
) -> None:
    adapter: TypeAdapter[list[Item]] = TypeAdapter(list[Item])
    text = adapter.dump_json(items).decode()
    seen = folded(chat_chunks(cut(text, cuts)), "openai", list[Item])
    for partial, prefix in zip(seen["partials"], seen["prefixes"], strict=True):
        assert partial == pydantic_partial(adapter, prefix), prefix
    final = adapter.validate_json(text)
    assert seen["end"].value == final
    # Every element once, in order, validated as the element type, as soon as it closed.
    assert [(item.index, item.value) for item in seen["items"]] == list(enumerate(final))


def test_an_element_is_sent_the_moment_its_closing_bracket_arrives() -> None:
    pieces = ['[{"name": "a"', "}", ", ", '{"name": "b"}', "]"]
    seen = folded(chat_chunks(pieces), "openai", list[Item])
    events = [e for e in seen["events"] if isinstance(e, PartDelta | OutputItem)]
    contents = [e.content if isinstance(e, PartDelta) else e for e in events]
    assert contents[:3] == ['[{"name": "a"', "}", OutputItem(index=0, value=Item(name="a"))]


# --- the cost per delta does not grow with the answer -------------------------------


def test_the_validation_work_per_element_does_not_grow_with_the_answer() -> None:
    calls = [0]

    def counted(value: int) -> int:
        calls[0] += 1
        return value

    class Row(BaseModel):
        n: Annotated[int, AfterValidator(counted)]  # first: present in every partial row
        name: str

    def validations_per_row(count: int) -> float:
        calls[0] = 0
        text = json.dumps([{"n": i, "name": f"row number {i % 10}"} for i in range(count)])
        pieces = [text[i : i + 2] for i in range(0, len(text), 2)]
        value = fold_output(chat_chunks(pieces), list[Row], "openai")
        assert [row.n for row in value] == list(range(count))
        return calls[0] / count

    # The row being built is validated at each of its ~15 deltas, a completed row once,
    # and the final value once. Validating the whole prefix at every delta would make the
    # work per row grow with the rows before it: ~1,400 per row at 200 rows.
    small, large = validations_per_row(50), validations_per_row(200)
    assert large <= 20
    assert abs(large - small) <= 1


# --- invalid output: a typed error, the Message complete -----------------------------


def test_a_value_that_fails_validation_gives_output_failed_and_a_complete_message() -> None:
    text = '{"title": 5, "items": [{"name": "a", "score": "high"}]}'
    seen = folded(chat_chunks(cut(text, [7, 20, 33])), "openai", Report)
    error = seen["end"].error
    assert isinstance(seen["end"], OutputFailed) and isinstance(error, OutputValidationError)
    assert isinstance(error, StreamfoldError)
    assert error.text == text
    assert {tuple(e["loc"]) for e in error.errors} == {("title",), ("items", 0, "score")}
    assert "expected JSON valid as Report, got 2 error(s), first at title" in str(error)
    assert seen["message"].status == "complete"
    assert seen["message"].content[0].content == text
    assert seen["fold"].output is None and seen["fold"].output_error == error
    # The events end with the Message, the output's verdict just before it.
    assert isinstance(seen["events"][-1], MessageCompleted)
    assert isinstance(seen["events"][-2], OutputFailed)
    with pytest.raises(OutputValidationError) as caught:
        fold_output(chat_chunks([text]), Report, "openai")
    assert caught.value == error


def test_a_cut_answer_fails_saying_how_the_message_ended() -> None:
    seen = folded(chat_chunks(['[{"name": "a"}, {"na'], finish="length"), "openai", list[Item])
    assert seen["message"].status == "length"
    assert seen["items"] == [OutputItem(index=0, value=Item(name="a"))]
    error = seen["end"].error
    assert "the message ended length" in error.reason
    assert error.errors and error.errors[0]["type"] == "json_invalid"


def test_prose_where_json_was_expected_fails_with_the_text() -> None:
    seen = folded(chat_chunks(["Sure! Here is", " the report."]), "openai", Report)
    assert seen["partials"] == []
    assert seen["end"].error.text == "Sure! Here is the report."
    assert seen["end"].error.errors[0]["type"] == "json_invalid"


def test_no_answer_text_fails_saying_what_was_expected() -> None:
    seen = folded(chat_chunks([]), "openai", Report)
    assert seen["end"].error.text is None
    assert "expected an answer text part holding JSON, got none" in str(seen["end"].error)


# --- which part holds the output --------------------------------------------------------


def anthropic_events(blocks: list[tuple[str, list[str]]], stop: str) -> list[dict[str, Any]]:
    """An Anthropic stream: ("text", pieces) or ("tool:name", argument pieces) blocks."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 1, "output_tokens": 0},
            },
        }
    ]
    for index, (kind, pieces) in enumerate(blocks):
        if kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces]
        else:
            start = {"type": "tool_use", "id": f"toolu_{index}", "name": kind[5:], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}}
    )
    events.append({"type": "message_stop"})
    return events


REPORT_TEXT = '{"title": "t", "items": [{"name": "x", "tags": ["a"]}], "pages": 3}'
REPORT = Report.model_validate_json(REPORT_TEXT)


def test_the_tool_named_as_output_holds_it_and_the_narration_before_is_left_out() -> None:
    events = anthropic_events(
        [
            ("text", ["I'll file ", "the report."]),
            ("tool:lookup", ['{"q": 1}']),
            ("tool:report", cut(REPORT_TEXT, [3, 17, 40])),
        ],
        "tool_use",
    )
    seen = folded(events, "anthropic", Report, output_tool="report")
    assert seen["end"] == OutputCompleted(value=REPORT)
    # The verdict comes as the tool call completes, before the message ends.
    kinds = [e.type for e in seen["events"]]
    assert kinds.index("output_completed") < kinds.index("message_completed") - 1
    assert fold_output(events, Report, "anthropic", output_tool="report") == REPORT


def test_a_missing_output_tool_fails_naming_it() -> None:
    events = anthropic_events([("tool:lookup", ['{"q": 1}'])], "tool_use")
    seen = folded(events, "anthropic", Report, output_tool="report")
    assert "expected a tool call named 'report' holding JSON, got none" in str(seen["end"].error)


def test_text_before_a_tool_call_is_narration_and_the_answer_after_it_is_the_output() -> None:
    events = anthropic_events(
        [
            ("text", ['{"title": "draft"', ', "items": []}']),  # narration, even if JSON
            ("tool:lookup", ['{"q": 1}']),
            ("text", cut(REPORT_TEXT, [5, 30])),
        ],
        "end_turn",
    )
    seen = folded(events, "anthropic", Report)
    assert seen["end"] == OutputCompleted(value=REPORT)
    assert seen["partials"][-1] == REPORT
    # While the narration streamed it looked like the output; the tool call starts it over.
    folder = StreamFolder("anthropic", output=Report)
    tool_start = next(n for n, e in enumerate(events) if e.get("content_block", {}).get("name"))
    for event in events[:tool_start]:
        folder.feed(event)
    assert folder.output == Report(title="draft", items=[])
    folder.feed(events[tool_start])
    assert folder.output is None


def test_an_explicit_narration_marker_keeps_a_text_out_of_the_output() -> None:
    # Responses `phase: commentary` marks the first message narration when it starts.
    def message(item_id: str, phase: str, text: str, index: int) -> list[dict[str, Any]]:
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress"}
        part = {"type": "output_text", "text": "", "annotations": []}
        done = {**item, "status": "completed", "content": [{**part, "text": text}]}
        return [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "content": [], "phase": phase},
            },
            {
                "type": "response.content_part.added",
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "part": part,
            },
            {
                "type": "response.output_text.delta",
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "delta": text,
            },
            {
                "type": "response.output_text.done",
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "text": text,
            },
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": {**done, "phase": phase},
            },
        ]

    response = {
        "id": "resp_1",
        "object": "response",
        "status": "in_progress",
        "model": "m",
        "output": [],
    }
    events = [
        {"type": "response.created", "response": response},
        *message("msg_1", "commentary", "Working on it.", 0),
        *message("msg_2", "final_answer", REPORT_TEXT, 1),
        {"type": "response.completed", "response": {**response, "status": "completed"}},
    ]
    seen = folded(events, "openai-responses", Report)
    assert seen["end"] == OutputCompleted(value=REPORT)


# --- every provider's JSON mode, on real streams re-spelled with a JSON answer ------------

# A real text recording per provider; its text deltas carry the JSON instead (cut where
# the recording cut its text: one piece per delta event), and the events that repeat the
# whole text repeat the JSON. Each entry: where a delta event holds its text (the dict and
# key), or None for another event.
Where = tuple[dict[str, Any], str] | None


def _anthropic_text(f: dict[str, Any]) -> Where:
    return (f["delta"], "text") if f.get("type") == "content_block_delta" else None


def _chat_text(f: dict[str, Any]) -> Where:
    choices = f.get("choices") or [{}]
    return (choices[0]["delta"], "content") if choices[0].get("delta", {}).get("content") else None


def _responses_text(f: dict[str, Any]) -> Where:
    return (f, "delta") if f.get("type") == "response.output_text.delta" else None


def _gemini_text(f: dict[str, Any]) -> Where:
    return (f["candidates"][0]["content"]["parts"][0], "text") if "candidates" in f else None


def _ollama_text(f: dict[str, Any]) -> Where:
    return (f, "response") if f.get("response") else None


def _bedrock_text(f: dict[str, Any]) -> Where:
    return (f["contentBlockDelta"]["delta"], "text") if "contentBlockDelta" in f else None


TEXT_RECORDINGS = {
    "anthropic/text-basic.sse": _anthropic_text,
    "openai-chat/text-include-usage.sse": _chat_text,
    "openai-responses/text.sse": _responses_text,
    "gemini/text-2.0-flash.sse": _gemini_text,
    "ollama/generate-deepseek-v3.1.ndjson": _ollama_text,
    "bedrock/text-nova-micro.ndjson": _bedrock_text,
}


def respelled(rel: str, text: str) -> list[dict[str, Any]]:
    """The recording's events with `text` as their answer."""
    events = frames(rel)
    where = TEXT_RECORDINGS[rel]
    carriers = [w for w in map(where, events) if w is not None]
    original = "".join(holder[key] for holder, key in carriers)
    pieces = cut(text, [len(text) * k // len(carriers) for k in range(1, len(carriers))])
    pieces += [""] * (len(carriers) - len(pieces))
    for (holder, key), piece in zip(carriers, pieces, strict=True):
        holder[key] = piece

    def whole(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: whole(v) for k, v in value.items()}
        if isinstance(value, list):
            return [whole(v) for v in value]
        return text if value == original else value

    return [whole(event) for event in events]


@pytest.mark.parametrize("rel", list(TEXT_RECORDINGS))
def test_every_providers_json_answer_folds_to_the_typed_value(rel: str) -> None:
    events = respelled(rel, REPORT_TEXT)  # (the provider told from the events)
    assert fold_message(events).content[-1].content.strip() == REPORT_TEXT
    seen = folded(events, None, Report)
    assert seen["end"] == OutputCompleted(value=REPORT)
    for partial in seen["partials"]:
        assert consistent(plain(partial), plain(REPORT))
    assert len(seen["partials"]) >= 2  # live, not only at the end


# Real tool-call recordings: the tool's arguments are the output (`output_tool`).
TOOL_RECORDINGS = [
    "anthropic/tool-use-single.sse",
    "openai-chat/tool-call-long-args.sse",
    "openai-responses/function-call.sse",
    "gemini/function-call-streamed-args.sse",
    "bedrock/tool-call.ndjson",
    "mistral/tool-call-single-chunk.sse",
]


@pytest.mark.parametrize("rel", TOOL_RECORDINGS)
def test_a_real_tool_call_as_output(rel: str) -> None:
    raw = (REAL / rel).read_bytes()
    call = fold_message([raw]).tool_calls[0]
    seen = folded([raw], None, dict[str, Any], output_tool=call.name)
    assert seen["end"] == OutputCompleted(value=call.arguments)
    for partial in seen["partials"]:
        assert consistent(partial, call.arguments)


# --- the doors: StreamFolder, afold, the JSON form, wrong arguments -------------------


def test_a_stream_folder_fed_by_hand_gives_the_same_events() -> None:
    chunks = as_sse(chat_chunks(cut(REPORT_TEXT, [4, 9, 25, 50])))
    folder = StreamFolder("openai", output=Report)
    events: list[Event] = []
    for chunk in chunks:
        events += folder.feed(chunk)
    events += folder.close()
    assert events == list(fold(chunks, "openai", output=Report))
    assert folder.output == REPORT and folder.output_error is None


def test_afold_gives_the_output() -> None:
    chunks = chat_chunks(cut(REPORT_TEXT, [4, 9, 25, 50]))

    async def main() -> tuple[list[Event], Any]:
        run = afold(chunks, "openai", output=Report)
        events = [event async for event in run]
        assert run.output == REPORT
        return events, await afold_output(chunks, Report, "openai")

    events, value = anyio.run(main)
    assert value == REPORT
    assert [e.type for e in events] == [e.type for e in fold(chunks, "openai", output=Report)]


def test_output_events_have_a_json_form() -> None:
    events = list(fold(chat_chunks(cut(REPORT_TEXT, [9, 30])), "openai", output=Report))
    events += list(fold(chat_chunks(["[1, 2", "3, 4"]), "openai", output=list[int]))
    kinds = {e.type for e in events}
    assert {"output_partial", "output_item", "output_completed", "output_failed"} <= kinds
    for event in events:
        data = json.loads(json.dumps(event_to_json(event)))
        back = event_from_json(data)
        assert back.type == event.type
        if isinstance(event, OutputPartial | OutputItem | OutputCompleted):
            assert back.value == json.loads(json.dumps(data["value"]))
    failed = next(e for e in events if isinstance(e, OutputFailed))
    assert event_from_json(event_to_json(failed)) == failed
    assert pickle.loads(pickle.dumps(failed)) == failed


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"output": 5}, "expected output to be a type pydantic validates"),
        ({"output": Report, "output_tool": ""}, "expected output_tool to be a tool name"),
        ({"output": Report, "output_tool": 3}, "expected output_tool to be a tool name"),
        ({"output_tool": "report"}, "expected output= with output_tool="),
    ],
)
def test_wrong_output_arguments_are_usage_errors(options: dict[str, Any], said: str) -> None:
    with pytest.raises(UsageError, match=f"^fold: {said}"):
        fold([], "openai", **options)
    with pytest.raises(UsageError, match=f"^afold: {said}"):
        afold([], "openai", **options)
    with pytest.raises(UsageError, match=f"^StreamFolder: {said}"):
        StreamFolder("openai", **options)


def test_a_fold_with_output_is_not_saved_silently_without_it() -> None:
    folder = StreamFolder("openai", output=Report)
    with pytest.raises(UsageError, match="expected a fold without output="):
        folder.save_state()


def test_a_type_adapter_and_field_constraints_are_used_as_given() -> None:
    class Bounded(BaseModel):
        n: int = Field(le=5)

    adapter: TypeAdapter[list[Bounded]] = TypeAdapter(list[Bounded])
    seen = folded(chat_chunks(['[{"n": 1}, ', '{"n": 9}]']), "openai", adapter)
    assert seen["items"] == [OutputItem(index=0, value=Bounded(n=1))]
    assert seen["partials"][-1] == [Bounded(n=1)]
    assert seen["end"].error.errors[0]["loc"] == [1, "n"]


def test_the_ui_encoders_send_the_same_chunks_with_or_without_output() -> None:
    # Apart from the UI stream's data-output part (the typed value: tests/ui/test_ui_output.py).
    from streamfold.agui import to_agui_events
    from streamfold.ui import DATA_OUTPUT, to_ui_message_stream

    chunks = chat_chunks(cut(REPORT_TEXT, [6, 20, 44]))
    still = float  # a clock that never moves (0.0): the timings sent are equal
    plain_events = list(fold(chunks, "openai", clock=still))
    output_events = list(fold(chunks, "openai", output=Report, clock=still))
    assert len(output_events) > len(plain_events)
    with_output = list(to_ui_message_stream(output_events, message_id="m"))
    assert [c for c in with_output if c["type"] != DATA_OUTPUT] == list(
        to_ui_message_stream(plain_events, message_id="m")
    )
    assert [c["data"]["state"] for c in with_output if c["type"] == DATA_OUTPUT][-1] == "complete"
    agui = [e.model_dump() for e in to_agui_events(output_events, thread_id="t", run_id="r")]
    assert agui == [e.model_dump() for e in to_agui_events(plain_events, thread_id="t", run_id="r")]


def test_a_fold_left_early_fails_its_output_saying_it_was_cancelled() -> None:
    run = fold(chat_chunks(cut(REPORT_TEXT, [10, 30, 50])), "openai", output=Report)
    for event in run:
        if isinstance(event, OutputPartial):
            break
    run.close()
    assert run.snapshot().status == "cancelled"
    error = run.output_error
    assert error is not None and "the message ended cancelled" in error.reason
    # The first partial needs both required fields: it came with the delta up to `[{"nam`.
    assert error.text == REPORT_TEXT[:30]
    assert run.output is None
