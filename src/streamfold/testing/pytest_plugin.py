"""The pytest plugin: a scenario per test, the transports that replay it, record on miss.

Registered through the `pytest11` entry point, so installing streamfold is enough:

    @pytest.mark.streamfold_replay("scenarios/weather.toml")   # relative to the test file
    def test_weather(streamfold_replay):
        client = openai.OpenAI(api_key="test", http_client=streamfold_replay.client())
        ...

`streamfold_replay` (the fixture) holds the test's `scenario`, a sync `transport` and an
`async_transport` that share it, and makes clients on them (`client()`, `async_client()`:
httpx2, which every SDK takes; `httpx_client()`, `async_httpx_client()`: httpx), all
closed when the test ends. Without the marker the scenario is
`scenarios/<test file stem>/<test name>.toml` beside the test file.

The marker's keywords: `record` (as the option below), `fail_on_unused` (as the ini
option), `speed` (0 by default: no waiting; 1 paces as recorded), `redact` (more header
or body field names never written), `faults` (applied to every answer).

Options:

    --streamfold-record=none|new|all   none: replay only (the default); new: a request no
                                       turn answers goes to the real API and is recorded
                                       as a new turn; all: every request is re-recorded
                                       (the scenario file's turns are replaced)
    streamfold_record (ini)            the same, when the command line does not say
    streamfold_fail_on_unused (ini)    fail a test whose scenario has a turn it never used

A request no turn answers (in `none` mode) fails the test with the request and the
nearest turns, even if the app swallowed the SDK's error.

The plugin imports nothing of streamfold's testing machinery until a test asks for the
fixture: a test run that does not use it pays for the option parsing alone.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .scenario import Scenario
    from .transport import AsyncReplayTransport, ReplayTransport

MARKER = "streamfold_replay"
_MODES = ("none", "new", "all")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamfold", "streamfold replay")
    group.addoption(
        "--streamfold-record",
        choices=_MODES,
        default=None,
        help="none: replay only; new: record requests no turn answers; all: re-record all",
    )
    parser.addini(
        "streamfold_record", "streamfold: none, new or all (see --streamfold-record)", default=""
    )
    parser.addini(
        "streamfold_fail_on_unused",
        "streamfold: fail a test whose scenario has turns it never used",
        type="bool",
        default=False,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(scenario=None, *, record=None, fail_on_unused=None, speed=0, redact=(), "
        "faults=None): the scenario file (relative to the test file) the "
        "streamfold_replay fixture replays",
    )


class StreamfoldReplay:
    """What the `streamfold_replay` fixture gives a test (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        scenario: Scenario,
        transport: ReplayTransport,
        async_transport: AsyncReplayTransport,
        record: str,
        fail_on_unused: bool,
    ) -> None:
        self.path = path
        """The scenario file."""
        self.scenario = scenario
        self.transport = transport
        self.async_transport = async_transport
        self.record = record
        """The record mode of this test: "none", "new" or "all"."""
        self.fail_on_unused = fail_on_unused
        self._loaded = len(scenario.turns)
        self._clients: list[Any] = []

    def client(self, **kwargs: Any) -> Any:
        """An `httpx2.Client` on the sync transport (closed when the test ends)."""
        import httpx2

        return self._keep(httpx2.Client(transport=self.transport, **kwargs))

    def async_client(self, **kwargs: Any) -> Any:
        """An `httpx2.AsyncClient` on the async transport (closed when the test ends)."""
        import httpx2

        return self._keep(httpx2.AsyncClient(transport=self.async_transport, **kwargs))

    def httpx_client(self, **kwargs: Any) -> Any:
        """An `httpx.Client` on the sync transport (closed when the test ends)."""
        import httpx

        return self._keep(httpx.Client(transport=self.transport, **kwargs))

    def async_httpx_client(self, **kwargs: Any) -> Any:
        """An `httpx.AsyncClient` on the async transport (closed when the test ends)."""
        import httpx

        return self._keep(httpx.AsyncClient(transport=self.async_transport, **kwargs))

    def _keep(self, client: Any) -> Any:
        self._clients.append(client)
        return client

    def problems(self) -> list[str]:
        """What fails the test: requests no turn answered; turns never used, if asked."""
        out = [str(miss) for miss in self.transport.misses]
        if self.fail_on_unused and self.record != "all":
            used = self.scenario.used[: self._loaded]
            unused = [self.scenario.label(n) for n, times in enumerate(used) if times == 0]
            if unused:
                out.append(
                    f"{self.path}: expected every turn used, got unused: {', '.join(unused)}"
                )
        return out

    def _close(self) -> None:
        import anyio

        for client in self._clients:
            if hasattr(client, "aclose"):
                if not client.is_closed:
                    anyio.run(client.aclose)
            else:
                client.close()


def _scenario_path(item: pytest.Item, marker: pytest.Mark | None) -> Path:
    base = Path(str(item.path)).parent
    named = marker.args[0] if marker is not None and marker.args else None
    named = named if named is not None else (marker.kwargs.get("scenario") if marker else None)
    if named is not None:
        if not isinstance(named, str | Path):
            raise pytest.UsageError(
                f"{item.nodeid}: {MARKER}: expected the scenario file's path, got {named!r:.80}"
            )
        return base / named
    name = re.sub(r"[^\w.-]+", "_", item.name).strip("_")
    return base / "scenarios" / Path(str(item.path)).stem / f"{name}.toml"


def _record_mode(config: pytest.Config, marker: pytest.Mark | None) -> str:
    mode = marker.kwargs.get("record") if marker is not None else None
    if mode is None:
        mode = config.getoption("--streamfold-record")
    if mode is None:
        mode = config.getini("streamfold_record") or "none"
    if mode not in _MODES:
        raise pytest.UsageError(f"streamfold record mode: expected none, new or all, got {mode!r}")
    return str(mode)


@pytest.fixture
def streamfold_replay(request: pytest.FixtureRequest) -> Iterator[StreamfoldReplay]:
    """The test's scenario and the transports replaying it (see StreamfoldReplay)."""
    from .record import attach_recorder
    from .scenario import Scenario
    from .transport import AsyncReplayTransport, ReplayTransport

    item = request.node
    marker = item.get_closest_marker(MARKER)
    options = dict(marker.kwargs) if marker is not None else {}
    path = _scenario_path(item, marker)
    record = _record_mode(request.config, marker)
    fail_on_unused = options.get("fail_on_unused")
    if fail_on_unused is None:
        fail_on_unused = bool(request.config.getini("streamfold_fail_on_unused"))
    if path.exists():
        scenario = Scenario.load(path)
    elif record == "none":
        pytest.fail(
            f"{path}: expected a scenario file, got none "
            "(run with --streamfold-record=new to record one from the real API)",
            pytrace=False,
        )
    else:
        scenario = Scenario([], root=path.parent, name=str(path))
    settings = {"speed": options.get("speed", 0), "faults": options.get("faults")}
    transport = ReplayTransport(scenario, **settings)
    async_transport = AsyncReplayTransport(scenario, **settings)
    hook = None
    if record != "none":
        # One hook for both transports: one numbering of the files, one scenario file.
        hook = attach_recorder(
            [transport, async_transport], path, record, redact=options.get("redact")
        )
    replay = StreamfoldReplay(path, scenario, transport, async_transport, record, fail_on_unused)
    item.stash[_REPLAY] = replay
    try:
        yield replay
    finally:
        replay._close()
        if hook is not None:
            hook.close()


_REPLAY = pytest.StashKey[StreamfoldReplay]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    # After the test's body (and before its fixtures close), so a miss or an unused turn
    # fails the test itself, even when the app swallowed the SDK's error.
    result = yield
    replay = item.stash.get(_REPLAY, None)
    if replay is not None:
        problems = replay.problems()
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
    return result
