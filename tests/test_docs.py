"""The documentation site keeps up with the code: a page per provider, every public name.

CI builds the site with `mkdocs build --strict` (a broken link or reference fails it);
these checks need no docs dependency, and catch what a strict build cannot: a provider or
a public name added without its page.
"""

from __future__ import annotations

import re
from pathlib import Path

import streamfold

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
NAV = (ROOT / "mkdocs.yml").read_text()


def test_every_provider_has_a_page_in_the_nav() -> None:
    missing = [
        name
        for name in streamfold.registered_providers()
        if not (DOCS / "providers" / f"{name}.md").is_file() or f"providers/{name}.md" not in NAV
    ]
    assert missing == []


def test_every_public_name_is_in_the_api_reference() -> None:
    # Each API page renders a name with `::: streamfold.<name>` (or `::: <module>.<name>`).
    pages = "\n".join(page.read_text() for page in (DOCS / "api").glob("*.md"))
    documented = set(re.findall(r"^::: streamfold(?:\.\w+)*\.(\w+)$", pages, re.M))
    assert sorted(set(streamfold.__all__) - documented) == []
