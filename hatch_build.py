"""Wheel build hook: the pipeline's modules compiled with mypyc, or the same source interpreted.

hatch-mypyc does the compiling. This hook only decides whether to let it: a C compiler is
needed to build a compiled wheel, never to run one, so a build without a compiler (or with
`STREAMFOLD_PURE=1`) makes a pure wheel and says so in the build log instead of failing. An
editable install stays interpreted: it must be quick, and it runs the files in src/ directly.
`streamfold.is_compiled()` tells which build is running.
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import sysconfig
from pathlib import Path
from typing import Any

from hatch_mypyc.plugin import MypycBuildHook


def missing_toolchain() -> str | None:
    """What stops a C extension being built here, or None when nothing does."""
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    program = shlex.split(compiler)[0] if compiler.strip() else ""
    if not program or shutil.which(program) is None:
        return f"no C compiler ({compiler!r} is not on PATH)"
    headers = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(headers, "Python.h")):
        return f"no Python headers (Python.h is not in {headers})"
    return None


def compiled_files(root: str) -> list[str]:
    """The files of `streamfold._build.COMPILED_MODULES`: one list, read without importing it."""
    tree = ast.parse(Path(root, "src/streamfold/_build.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "COMPILED_MODULES"
            for target in node.targets
        ):
            modules = ast.literal_eval(node.value)
            return [f"src/{module.replace('.', '/')}.py" for module in modules]
    raise LookupError("src/streamfold/_build.py assigns no COMPILED_MODULES")


class CompiledPipelineHook(MypycBuildHook):
    PLUGIN_NAME = "custom"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config["include"] = compiled_files(self.root)

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        if os.environ.get("STREAMFOLD_PURE", "") not in ("", "0"):
            self.app.display_info("streamfold: STREAMFOLD_PURE is set: building a pure wheel")
            return
        reason = missing_toolchain()
        if reason is not None:
            self._fall_back(reason)
            return
        try:
            super().initialize(version, build_data)
        except Exception as error:  # a failed compile still installs the same source
            self.clean([version])
            self._fall_back(f"mypyc failed:\n{error}")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        # The extension modules are built next to the sources; once in the wheel they must
        # leave src/, or the interpreted runs there (PYTHONPATH=src) would import them.
        if self.target_name == "wheel" and version != "editable":
            self.clean([version])

    def _fall_back(self, reason: str) -> None:
        self.app.display_warning(
            f"WARNING: streamfold is built interpreted (pure Python, slower): {reason}"
        )


def get_build_hook() -> type[CompiledPipelineHook]:
    """The hook hatchling runs (the module also holds the hatch-mypyc class it extends)."""
    return CompiledPipelineHook
