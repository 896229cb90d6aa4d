"""The session header names the build under test: the compiled wheel or the source interpreted."""

from __future__ import annotations

from pathlib import Path

import streamfold


def pytest_report_header() -> str:
    build = "compiled (mypyc)" if streamfold.is_compiled() else "interpreted"
    return f"streamfold: {build}, imported from {Path(streamfold.__file__).parent}"
