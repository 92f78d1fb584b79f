"""Issue 30, item 8: the install line that works for this install, and tracebacks without
asyncio's "no running event loop" chained in."""

from __future__ import annotations

import asyncio
import traceback

import pytest

import agentfootprint as af
from agentfootprint.version import command_for, install_command, source_of


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        ('{"url": "file:///work/clone", "dir_info": {"editable": true}}', ("/work/clone", True)),
        ('{"url": "file:///srv/a%20b", "dir_info": {}}', ("/srv/a b", False)),
        ('{"url": "https://files.example/x.whl", "archive_info": {}}', None),
        ('{"url": "file:///x.whl", "archive_info": {}}', None),
        ("not json", None),
        ("[]", None),
        (None, None),
    ],
)
def test_the_source_of_an_install_is_read_from_its_direct_url(
    direct_url: str | None, expected: tuple[str, bool] | None
) -> None:
    assert source_of(direct_url) == expected


def test_the_install_line_names_the_clone_or_the_published_package() -> None:
    assert command_for("openai", ("/work/clone", True)) == 'pip install -e "/work/clone[openai]"'
    assert command_for("otel", ("/srv/src", False)) == 'pip install "/srv/src[otel]"'
    assert command_for("postgresql", None) == 'pip install "agentfootprint[postgresql]"'


def test_this_install_is_named_as_it_was_made() -> None:
    # the suite runs from an editable install of the clone (README, .ci/run)
    assert install_command("openai").startswith('pip install -e "')


def _chain(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def test_a_failing_run_sync_chains_no_event_loop_error() -> None:
    agent = af.Agent(provider=af.MockProvider([]), model="m")
    with pytest.raises(af.ScriptExhaustedError) as caught:
        agent.run_sync("go")
    assert "no running event loop" not in _chain(caught.value)


def test_a_failing_replay_sync_chains_no_event_loop_error() -> None:
    agent = af.Agent(provider=af.MockProvider(["hi"]), model="m")
    result = agent.run_sync("go")
    twin = af.Agent(provider=af.MockProvider([]), model="other")
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin, agent.store, result.run_id)
    assert "no running event loop" not in _chain(caught.value)


def test_run_sync_inside_a_loop_is_still_refused() -> None:
    agent = af.Agent(provider=af.MockProvider(["hi"]), model="m")

    async def inside() -> None:
        agent.run_sync("go")

    with pytest.raises(af.UsageError, match="inside a running event loop"):
        asyncio.run(inside())
