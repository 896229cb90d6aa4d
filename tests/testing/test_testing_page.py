"""docs/testing.md, run as written: its scenario files and test files, in a pytest run of
their own (pytester) with the plugin, with the SDKs and frameworks it shows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import streamfold
from testing.test_pytest_plugin import plugin_options

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("pydantic_ai")
pytest.importorskip("langchain_openai")
pytest.importorskip("langchain_anthropic")

pytest_plugins = ["pytester"]

PAGE = Path(__file__).parent.parent.parent / "docs" / "testing.md"
# A fenced block whose first line names its file: `# scenarios/weather.toml`, `# test_x.py`.
_FILE_BLOCK = re.compile(
    r"^```(?:toml|python)\n# (?P<name>[\w./-]+)\n(?P<code>.*?)^```", re.M | re.S
)


def page_files() -> dict[str, str]:
    """The files the page shows, by name."""
    return {m["name"]: m["code"] for m in _FILE_BLOCK.finditer(PAGE.read_text())}


def test_the_page_shows_its_files() -> None:
    assert sorted(page_files()) == [
        "scenarios/cut.toml",
        "scenarios/rate-limited.toml",
        "scenarios/weather-claude.toml",
        "scenarios/weather.toml",
        "test_async_weather.py",
        "test_claude.py",
        "test_cut.py",
        "test_frameworks.py",
        "test_retry.py",
        "test_weather.py",
    ]


def test_every_example_on_the_page_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, code in page_files().items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    # A process of its own, as a reader's run is: pydantic-ai's run_sync leaves its event
    # loop open, which this process would report as an unclosed socket.
    monkeypatch.setenv("PYTHONPATH", str(Path(streamfold.__file__).parent.parent))
    result = pytester.runpytest_subprocess(
        *plugin_options(),
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-q",
    )
    result.assert_outcomes(passed=8)
