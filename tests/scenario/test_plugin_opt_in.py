"""The pytest plugin is opt-in (issue 30, item 7): a user's suite that installs agentfootprint
and does not ask for the plugin runs with no plugin loaded; asked for, it verifies every run
and blocks model requests, and blocking is its own switch.

Each case is a small project of its own (its own rootdir, none of this suite's conftest),
run by pytest in a subprocess, as a user's suite runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = "agentfootprint.testing.pytest_plugin"

USERS_TESTS = """
import pytest
import agentfootprint as af


class Paid(af.MockProvider):
    makes_requests = True  # a provider that would call a real (paid) model


def test_plugin_state(request):
    loaded = request.config.pluginmanager.has_plugin("{plugin}")
    fixtures = request.session._fixturemanager.getfixturedefs("verified_runs", request.node)
    print("LOADED", loaded, "FIXTURE", bool(fixtures))


def test_a_model_request():
    agent = af.Agent(provider=Paid(["hi"]), model="m")
    try:
        agent.run_sync("go")
    except af.ModelRequestsBlocked:
        print("BLOCKED")
    else:
        print("ALLOWED")
"""


def run_users_suite(tmp_path: Path, *args: str, ini: str = "") -> str:
    (tmp_path / "test_users.py").write_text(USERS_TESTS.format(plugin=PLUGIN))
    (tmp_path / "pytest.ini").write_text("[pytest]\n" + ini)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_suite_that_does_not_ask_loads_no_plugin(tmp_path: Path) -> None:
    out = run_users_suite(tmp_path)
    assert "LOADED False FIXTURE False" in out and "ALLOWED" in out


def test_asked_for_it_verifies_and_blocks(tmp_path: Path) -> None:
    out = run_users_suite(tmp_path, "-p", PLUGIN)
    assert "LOADED True FIXTURE True" in out and "BLOCKED" in out


def test_blocking_is_its_own_switch(tmp_path: Path) -> None:
    ini = "agentfootprint_block_model_requests = false\n"
    out = run_users_suite(tmp_path, "-p", PLUGIN, ini=ini)
    assert "LOADED True FIXTURE True" in out and "ALLOWED" in out


def test_this_suite_asks_for_it(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.has_plugin(PLUGIN)
