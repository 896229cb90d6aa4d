"""The import graph of src/streamfold: one way only, and the CLI is a leaf.

The graph is read from the source with ``ast``, so it sees every ``import``
and ``from ... import`` wherever it is written, inside functions too: a lazy
import hides a cycle from the interpreter, not from a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "src" / "streamfold"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()  # a package's __init__ is the package itself
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def _resolve(current: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name a (possibly relative) ``from`` import refers to."""
    if level == 0:
        return module or ""
    base = current.split(".")
    # "from . import x" inside a.b (module) means package a; inside package a.b it means a.b.
    drop = level - 1 if is_package else level
    base = base[: len(base) - drop]
    return ".".join(base + ([module] if module else []))


def _own(name: str, modules: dict[str, Path]) -> str | None:
    """The longest streamfold module that ``name`` names or lies inside."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.level, node.module)
                # "from pkg import sub" depends on the submodule; "from pkg import name"
                # on pkg/__init__ (every module inside pkg runs after pkg/__init__ has
                # begun, so naming a sibling through its package adds no other edge).
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            for target in targets:
                own = _own(target, modules)
                if own is not None and own != name:
                    graph[name].add(own)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a closed path of module names, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_graph_sees_relative_package_and_function_level_imports() -> None:
    graph = import_graph()
    # __main__ runs the CLI; fold.py and relay.py import from events.
    assert "streamfold.cli" in graph["streamfold.__main__"]
    assert "streamfold.events" in graph["streamfold.fold"]
    assert "streamfold.events" in graph["streamfold.web.relay_routes"]
    # the package re-exports its modules
    assert "streamfold.fold" in graph["streamfold"]
    # a lazy import inside a method: StreamFolder.restore loads the state module
    assert "streamfold.state" in graph["streamfold.fold"]
    # "from .. import encoding" inside providers/ is the encoding module, not the package
    assert "streamfold.encoding" in graph["streamfold.providers.anthropic.encode"]


def test_no_module_inside_the_package_imports_the_package_itself() -> None:
    # streamfold/__init__ imports nearly every module: one that imported a name from it
    # would close a cycle through it.
    importers = sorted(name for name, targets in import_graph().items() if "streamfold" in targets)
    assert importers == []


def test_find_cycle_reports_the_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_graph_has_no_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_nothing_but_main_imports_the_cli() -> None:
    importers = sorted(
        name for name, targets in import_graph().items() if "streamfold.cli" in targets
    )
    assert importers == ["streamfold.__main__"]


def test_only_the_edges_import_the_adapters() -> None:
    # The adapters need optional libraries: the core never imports them; the replay
    # server's core (serve's, and streamfold.testing's transports') does.
    importers = sorted(
        name
        for name, targets in import_graph().items()
        if not name.startswith("streamfold.interop")
        and any(t.startswith("streamfold.interop") for t in targets)
    )
    assert importers == ["streamfold.web.replay_api"]
