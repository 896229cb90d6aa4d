"""The pytest plugin, run by pytest's own `pytester`: the fixture and marker, a miss and an
unused turn failing the test, and `--streamfold-record` against a real `streamfold serve`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import serve_in_thread
from support import REAL

pytest.importorskip("openai")
pytest.importorskip("uvicorn")
from streamfold.serve import create_app

pytest_plugins = ["pytester"]

ROOT = Path(__file__).parent.parent.parent
PLUGIN = "streamfold.testing.pytest_plugin"


def plugin_options() -> tuple[str, ...]:
    """`-p <the plugin>` where its entry point is not installed (a checkout run from its
    source); installed, pytest loads it by itself, and naming it again is an error."""
    from importlib.metadata import entry_points

    installed = any(e.value == PLUGIN for e in entry_points(group="pytest11"))
    return () if installed else ("-p", PLUGIN)


# The options every inner run gets: the plugin, and pytest-asyncio told its loop scope.
RUN = (*plugin_options(), "-o", "asyncio_default_fixture_loop_scope=function")
CHAT = REAL / "openai-chat" / "tool-call-single-mini.sse"

SCENARIO = """\
[[turns]]
name = "greeting"
match = { api = "chat", user = "hello" }
message = { text = "Hi from the scenario." }

[[turns]]
name = "farewell"
match = { api = "chat", user = "bye" }
message = { text = "Bye." }
"""

# The test file pytester runs: the openai SDK through the fixture's client.
TESTS = """\
import openai
import pytest


def ask(replay, text):
    client = openai.OpenAI(api_key="test", http_client=replay.client(), max_retries=0)
    answer = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}]
    )
    return answer.choices[0].message.content


@pytest.mark.streamfold_replay("scenarios/chat.toml")
def test_greeting(streamfold_replay):
    assert ask(streamfold_replay, "hello") == "Hi from the scenario."
    assert streamfold_replay.scenario.used == [1, 0]


@pytest.mark.streamfold_replay("scenarios/chat.toml")
def test_both(streamfold_replay):
    assert ask(streamfold_replay, "hello") == "Hi from the scenario."
    assert ask(streamfold_replay, "bye") == "Bye."


@pytest.mark.streamfold_replay("scenarios/chat.toml")
def test_a_miss_the_app_swallows(streamfold_replay):
    try:
        ask(streamfold_replay, "what is the time?")
    except openai.NotFoundError:
        pass  # an app that shrugs off API errors: the test fails all the same


@pytest.mark.streamfold_replay("scenarios/chat.toml", fail_on_unused=False)
def test_unused_allowed_by_the_marker(streamfold_replay):
    assert ask(streamfold_replay, "bye") == "Bye."
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "chat.toml").write_text(SCENARIO)
    pytester.makepyfile(test_app=TESTS)
    return pytester


def test_the_fixture_replays_the_marked_scenario_and_a_miss_fails_the_test(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest(*RUN)
    result.assert_outcomes(passed=3, failed=1)
    # The miss names the request and the nearest turns, with why each did not match.
    result.stdout.fnmatch_lines(
        [
            "*test_a_miss_the_app_swallows*",
            "*no turn of the scenario answers request #0 to 'chat'*'what is the time?'*",
            "*turn 0 ('greeting'): user: expected text holding 'hello'*",
        ]
    )


def test_unused_turns_fail_the_test_when_the_ini_says_so(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nstreamfold_fail_on_unused = true\n")
    result = project.runpytest(*RUN, "-k", "not swallows")
    # test_greeting leaves "farewell" unused; the marker's fail_on_unused=False wins.
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_greeting*",
            "*chat.toml: expected every turn used, got unused: turn 1 ('farewell')*",
        ]
    )


def test_a_missing_scenario_fails_with_how_to_record_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_new="""
        def test_weather(streamfold_replay):
            pass
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*scenarios/test_new/test_weather.toml: expected a scenario file, got none "
            "(run with --streamfold-record=new to record one from the real API)*"
        ]
    )


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("upstream")
    (directory / "chat").mkdir()
    shutil.copy(CHAT, directory / "chat" / CHAT.name)
    with serve_in_thread(create_app(directory, speed=0)) as url:
        yield url


RECORDED = """\
import openai
import pytest

BASE_URL = {base_url!r}


def test_weather(streamfold_replay):
    client = openai.OpenAI(
        api_key="sk-live-0123456789", base_url=BASE_URL, http_client=streamfold_replay.client()
    )
    first = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{{"role": "user", "content": "Capital of France?"}}],
        stream=True,
    )
    calls = [c.choices[0].delta.tool_calls for c in first if c.choices]
    calls = [call for call in calls if call]
    assert calls
    assert streamfold_replay.record in ("new", "none")
"""


def test_record_new_writes_the_scenario_and_the_next_run_replays_it_offline(
    pytester: pytest.Pytester, upstream: str
) -> None:
    pytester.makepyfile(test_rec=RECORDED.format(base_url=upstream + "/v1"))
    recorded = pytester.runpytest(*RUN, "--streamfold-record=new")
    recorded.assert_outcomes(passed=1)
    scenario = pytester.path / "scenarios" / "test_rec" / "test_weather.toml"
    [turn] = tomllib.loads(scenario.read_text())["turns"]
    assert turn["match"] == {
        "api": "chat",
        "model": "gpt-4o-mini",
        "user": "Capital of France?",
        "tool_result": False,
    }
    answer = scenario.parent / turn["recording"]
    assert answer.read_bytes() == CHAT.read_bytes()
    written = b"".join(p.read_bytes() for p in scenario.parent.rglob("*") if p.is_file())
    assert b"sk-live-0123456789" not in written

    # Offline: the same test, the base URL a port nothing listens on, replay only.
    pytester.makepyfile(test_rec=RECORDED.format(base_url="http://127.0.0.1:9/v1"))
    replayed = pytester.runpytest(*RUN)
    replayed.assert_outcomes(passed=1)


def test_the_entry_point_loads_the_plugin_without_the_flag() -> None:
    # Declared in pyproject.toml; an installed streamfold registers it for every pytest run.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["pytest11"] == {"streamfold": PLUGIN}


def test_loading_the_plugin_imports_no_sdk_and_no_http_library() -> None:
    # What every pytest run in an environment with streamfold installed pays for: the
    # option parsing, not the transports (they load when a test asks for the fixture).
    probe = (
        "import sys, pytest\n"
        f"import {PLUGIN}\n"
        "heavy = {'httpx', 'httpx2', 'openai', 'anthropic', 'streamfold.testing.transport'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src")},
    )
    assert out.stdout.strip() == "[]"
