"""The compiled decoders' delta builders give what the named tuples' own constructors give."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from streamfold import ContentPart, ToolCall, Usage
from streamfold.deltas import (
    END_MESSAGE,
    ClosePart,
    EndMessage,
    OpenPart,
    UpdateMessage,
    close_part,
    open_part,
    update_message,
)

PART = ContentPart.text("hi")
CALL = ToolCall(call_id="c", name="f", arguments="")


def _same(built: Any, expected: Any) -> None:
    assert type(built) is type(expected)
    assert built == expected
    assert built._asdict() == expected._asdict()
    assert pickle.loads(pickle.dumps(built)) == expected


@pytest.mark.parametrize(
    "args", [(0,), ((1, "a"), False), ("k", True, PART), (2, False, CALL), ("k", True, None)]
)
def test_close_part_is_the_named_tuple(args: tuple[Any, ...]) -> None:
    _same(close_part(*args), ClosePart(*args))


@pytest.mark.parametrize("args", [(0, PART), ("k", CALL, True), ((1,), PART, False)])
def test_open_part_is_the_named_tuple(args: tuple[Any, ...]) -> None:
    _same(open_part(*args), OpenPart(*args))


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"usage": Usage(output_tokens=3), "metadata": {"id": "m"}},
        {"status": "complete"},
        {"stop_reason": "stop", "raw_stop_reason": "end_turn"},
        # Every field, each a different value: one out of place would show.
        {
            "status": "length",
            "stop_reason": "length",
            "raw_stop_reason": "max_tokens",
            "usage": Usage(input_tokens=1),
            "metadata": {"m": 1},
            "role": "assistant",
        },
    ],
)
def test_update_message_is_the_named_tuple(fields: dict[str, Any]) -> None:
    _same(update_message(**fields), UpdateMessage(**fields))


def test_the_end_message_is_the_named_tuple() -> None:
    _same(END_MESSAGE, EndMessage())
