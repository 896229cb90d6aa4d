"""The session header names the build under test: the compiled wheel or the source interpreted."""

from __future__ import annotations

from pathlib import Path

import streamfold
import streamfold.timing


def pytest_report_header() -> str:
    build = "compiled (mypyc)" if streamfold.is_compiled() else "interpreted"
    return f"streamfold: {build}, imported from {Path(streamfold.__file__).parent}"


# Folds are compared across runs, chunkings and doors: a constant clock makes every
# fold's metadata["timing"] the same. tests/test_timing.py gives its folds real clocks.
streamfold.timing.default_clock = lambda: 0.0
