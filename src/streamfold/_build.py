"""Which build is running: the pipeline compiled with mypyc, or the same source interpreted."""

from __future__ import annotations

import importlib.machinery
import importlib.util

# The pipeline modules a wheel build compiles (hatch_build.py reads this list): those of the
# per-delta path that hold no pydantic model. mypyc compiles a model's class body but writes
# its annotations loosely (`str | None` as `type`, `Count` as plain `int`), so pydantic would
# validate a saved state against the wrong types: framing, eventstream, accumulator, fold and
# the decoders join once their state models live in modules of their own, and
# providers.base with them (a compiled class takes no interpreted subclass).
COMPILED_MODULES = (
    "streamfold.partial_json",
    "streamfold.deltas",
    "streamfold.events",
)


def is_compiled() -> bool:
    """True when the pipeline's modules are compiled extension modules, False when interpreted.

    A wheel built with a C compiler is compiled; an editable install, a wheel built with
    `STREAMFOLD_PURE=1` or without a compiler, and the source tree itself are interpreted.
    """
    return all(_is_extension(name) for name in COMPILED_MODULES)


def _is_extension(module: str) -> bool:
    # Finding the module's file, not importing it: a decoder nobody uses stays unloaded.
    spec = importlib.util.find_spec(module)
    return spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)
