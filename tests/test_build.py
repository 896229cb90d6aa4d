"""`is_compiled()` tells the truth about the build under test."""

from __future__ import annotations

import importlib
import importlib.machinery
import os

import streamfold
from streamfold._build import COMPILED_MODULES


def test_the_build_under_test_is_the_one_expected() -> None:
    # CI's compiled run sets this; every other run tests the source interpreted.
    expected = os.environ.get("STREAMFOLD_EXPECT_COMPILED") == "1"
    assert streamfold.is_compiled() is expected, (
        f"expected the {'compiled' if expected else 'interpreted'} build, "
        f"imported from {streamfold.__file__} (STREAMFOLD_EXPECT_COMPILED=1 tests a compiled one)"
    )


def test_is_compiled_agrees_with_the_modules_loaded() -> None:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    files = [importlib.import_module(name).__file__ or "" for name in COMPILED_MODULES]
    assert streamfold.is_compiled() is all(file.endswith(suffixes) for file in files), files
