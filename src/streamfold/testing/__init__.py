"""Test an LLM app on recorded streams: the official SDKs answered in-process, by scenario.

    ReplayTransport / AsyncReplayTransport   httpx and httpx2 transports (no server)
    Scenario, Turn, Match, Faults            the conversation, turn by turn, and its faults
    MessageAnswer, ToolCallAnswer            a turn's answer written out: text, tool calls
    NoTurnMatched                            a request no turn answers
    read_request                             what a turn matches on, read from a request

See `streamfold.testing.scenario` for the scenario file's format and
`streamfold.testing.transport` for the transports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .replayer import FAULT_HEADER, Chunk, Replayer, Reply, WireRequest
    from .requests import read_request
    from .scenario import (
        Api,
        ApiRequest,
        Faults,
        Match,
        MessageAnswer,
        NoTurnMatched,
        Scenario,
        ScenarioError,
        ToolCallAnswer,
        ToolResultRef,
        Turn,
    )
    from .transport import AsyncReplayTransport, ReplayTransport

# The names load with their module on first use: the pytest plugin (an entry point, so
# imported by every pytest run where streamfold is installed) imports this package, and a
# run that never asks for the fixture should not pay for httpx, httpx2 and the transports.
_MODULE = {
    **dict.fromkeys(("FAULT_HEADER", "Chunk", "Replayer", "Reply", "WireRequest"), "replayer"),
    "read_request": "requests",
    **dict.fromkeys(
        (
            "Api",
            "ApiRequest",
            "Faults",
            "Match",
            "MessageAnswer",
            "NoTurnMatched",
            "Scenario",
            "ScenarioError",
            "ToolCallAnswer",
            "ToolResultRef",
            "Turn",
        ),
        "scenario",
    ),
    **dict.fromkeys(("AsyncReplayTransport", "ReplayTransport"), "transport"),
}


def __getattr__(name: str) -> Any:
    module = _MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "FAULT_HEADER",
    "Api",
    "ApiRequest",
    "AsyncReplayTransport",
    "Chunk",
    "Faults",
    "Match",
    "MessageAnswer",
    "NoTurnMatched",
    "ReplayTransport",
    "Replayer",
    "Reply",
    "Scenario",
    "ScenarioError",
    "ToolCallAnswer",
    "ToolResultRef",
    "Turn",
    "WireRequest",
    "read_request",
]
