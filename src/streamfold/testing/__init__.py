"""Test an LLM app on recorded streams: the official SDKs answered in-process, by scenario.

    ReplayTransport / AsyncReplayTransport   httpx and httpx2 transports (no server)
    Scenario, Turn, Match, Faults            the conversation, turn by turn, and its faults
    NoTurnMatched                            a request no turn answers
    read_request                             what a turn matches on, read from a request

See `streamfold.testing.scenario` for the scenario file's format and
`streamfold.testing.transport` for the transports.
"""

from __future__ import annotations

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
    ToolResultRef,
    Turn,
)
from .transport import AsyncReplayTransport, ReplayTransport

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
    "ToolResultRef",
    "Turn",
    "WireRequest",
    "read_request",
]
