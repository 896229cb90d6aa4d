"""Headless Chromium for the page tests: Debian's browser, driven by playwright."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent.parent / "artifacts"
# No background networking: this machine's closed network refuses those connections.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return "chromium is not installed (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install playwright)"
    return None


@contextlib.contextmanager
def open_page(playwright: Any, profile: Path) -> Iterator[tuple[Any, list[str]]]:
    """A fresh-profile Chromium page, and the list its JavaScript errors go to."""
    context = playwright.chromium.launch_persistent_context(
        str(profile),
        executable_path=CHROMIUM,
        headless=True,
        args=FLAGS,
        viewport={"width": 1100, "height": 900},
    )
    try:
        page = context.pages[0] if context.pages else context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page, errors
    finally:
        context.close()
