"""The session header names the build under test (the compiled wheel or the source interpreted);
the fixtures the lane tests and the relay tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_support import RedisServer
from support import hot_lane_from

import streamfold


def pytest_report_header() -> str:
    build = "compiled (mypyc)" if streamfold.is_compiled() else "interpreted"
    return f"streamfold: {build}, imported from {Path(streamfold.__file__).parent}"


@pytest.fixture
def lane_from_the_first_event() -> Iterator[None]:
    """The lane tests' streams are short: the lane starts at once (assert_hot_lane_same also
    folds with the shipped start). Asked for by each test that compares a lane with the full
    path, so the other tests keep the shipped start."""
    with hot_lane_from(0):
        yield


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server for a test module: 127.0.0.1, a free port, nothing kept on disk
    (the modules that ask for it skip where redis-server is not installed)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()
