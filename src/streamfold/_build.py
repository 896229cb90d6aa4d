"""Which build is running: the pipeline compiled with mypyc, or the same source interpreted."""

from __future__ import annotations

import importlib.machinery
import importlib.util

# The pipeline modules a wheel build compiles (hatch_build.py reads this list): every module
# on the per-delta path, and each provider's encoder beside its decoder (they shared one
# module before each provider had its package). What stays interpreted: the pydantic models
# (parts, message, _model, state, state_schema, each box's saved-state model in its *_state
# module and each provider's state.py: mypyc writes a model's annotations loosely,
# `str | None` as `type`, `Count` as a plain `int`, so pydantic would validate against the
# wrong types), the packages' __init__ re-exports, and the edges (aio, cli, serve, relay,
# web, ui, live, recording), where the time is the network's. providers.base is compiled
# with allow_interpreted_subclasses, so the decoders users register still subclass it.
COMPILED_MODULES = (
    "streamfold.construct",
    "streamfold.partial_json",
    "streamfold.deltas",
    "streamfold.events",
    "streamfold.limits",
    "streamfold.framing",
    "streamfold.eventstream",
    "streamfold.accumulator",
    "streamfold.fold",
    "streamfold.timing",
    "streamfold.providers.base",
    "streamfold.providers.fields",
    "streamfold.providers.anthropic.decode",
    "streamfold.providers.bedrock.decode",
    "streamfold.providers.bedrock_invoke.decode",
    "streamfold.providers.gemini.decode",
    "streamfold.providers.messagedelta.decode",
    "streamfold.providers.ollama.decode",
    "streamfold.providers.openai_chat.decode",
    "streamfold.providers.openai_responses.decode",
    "streamfold.providers.anthropic.encode",
    "streamfold.providers.bedrock_invoke.encode",
    "streamfold.providers.gemini.encode",
    "streamfold.providers.openai_chat.encode",
    "streamfold.providers.openai_responses.encode",
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
