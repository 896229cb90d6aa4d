"""The fixture the decoders' lane tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import hot_lane_from


@pytest.fixture
def lane_from_the_first_event() -> Iterator[None]:
    """The lane tests' streams are short: the lane starts at once (assert_hot_lane_same also
    folds with the shipped start)."""
    with hot_lane_from(0):
        yield
