"""Regression gates: replay golden runs against today's agent code, inside a test.

``assert_replays(factory, golden_db)`` replays every run of a recorded log (a database
or an export bundle kept with the tests) with a fresh agent from ``factory()``. No model
is called and no tool runs: each call is answered with the recorded response, each tool
call with its recorded result, and the request today's code builds is checked piece by
piece against the original's receipt. A change in what the model is served fails the
test, naming the run, the call, the kind of piece and a unified diff::

    from agentfootprint.testing.replay import assert_replays

    def test_agent_still_serves_what_it_served():
        assert_replays(build_agent, "tests/data/golden/agent.db")

The golden log (and its vault) are opened read-only: never changed, nothing created beside
them, so they may sit on a read-only checkout. The runs replayed are those found from the
log's events (never from its run index). Each replay records into the agent's own store (a
memory store when the factory passes ``store=None``). Re-record the golden log when a
change of what the model is served is intended.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentfootprint.audit.sources import check_run_id, opened
from agentfootprint.errors import FileError, ReplayDivergence, UsageError
from agentfootprint.replayer.replay_run import ReplayResult, replay_sync
from agentfootprint.runtime.tools import Tool

if TYPE_CHECKING:
    from agentfootprint.agent.agent import Agent

__all__ = ["assert_replays", "describe_divergence"]


def assert_replays(
    factory: Callable[[], Agent],
    golden_db: str | os.PathLike[str],
    run_id: str | None = None,
    *,
    disclosures: str | os.PathLike[str] | None = None,
) -> list[ReplayResult]:
    """Replay ``run_id`` (default: every run, in the order they opened) of ``golden_db``.

    Each run is replayed with a new agent from ``factory()``, closed afterwards. Every
    run is replayed; if any diverged, the test fails (``pytest.fail``, no traceback) with
    one report per diverged run. Returns the replays when all were identical.
    ``disclosures``: the golden run's vault, for runs recorded under a redaction policy
    that commits values the loop copies (``conversation_redaction()``); read only.
    """
    import pytest

    from agentfootprint.agent.agent import Agent

    if not callable(factory):
        raise UsageError(
            f"factory: expected a function that returns a new Agent, got {type(factory).__name__}",
            option="factory",
        )
    if run_id is not None:
        check_run_id(run_id)
    if not isinstance(golden_db, str | os.PathLike):
        raise UsageError(
            f"golden_db: expected the path of a recorded database or bundle, got "
            f"{type(golden_db).__name__}",
            option="golden_db",
        )
    path = Path(golden_db)
    if not path.is_file():
        raise FileError(
            f"golden_db: golden log {path} does not exist (record it first)",
            path=str(path),
            option="golden_db",
        )
    if disclosures is not None and (
        not isinstance(disclosures, str | os.PathLike) or not Path(disclosures).is_file()
    ):
        raise FileError(
            f"disclosures: golden vault {disclosures} does not exist",
            path=str(disclosures),
            option="disclosures",
        )
    failures: list[str] = []
    results: list[ReplayResult] = []
    # read only: the golden log and vault are never changed, nothing is created beside them
    with opened(path, "golden_db") as source:
        # the runs found from the events themselves (a run index is not evidence)
        found: Any = source
        run_ids = [run_id] if run_id is not None else list(found.run_ids())
        if not run_ids:
            pytest.fail(f"golden log {path} holds no runs", pytrace=False)
        for current in run_ids:
            agent = factory()
            if not isinstance(agent, Agent):
                raise UsageError(
                    "assert_replays: the factory must return an agentfootprint Agent, "
                    f"it returned {type(agent).__name__}",
                    option="factory",
                )
            try:
                results.append(replay_sync(agent, source, current, disclosures=disclosures))
            except ReplayDivergence as exc:
                failures.append(describe_divergence(exc, current, path))
            finally:
                agent.close()
    if failures:
        pytest.fail(
            "\n\n".join(failures)
            + f"\n\nIf this change of what the model is served is intended, re-record {path}.",
            pytrace=False,
        )
    return results


def describe_divergence(exc: ReplayDivergence, run_id: str, golden: Path | str = "") -> str:
    """A readable report of one divergence: run, call, kind, position, digests, diff."""
    where = f"{exc.kind} piece {exc.position}" if exc.position is not None else exc.kind
    source = f" of {golden}" if golden else ""
    message = str(exc)
    if exc.diff:
        message = message.removesuffix("\n" + exc.diff)
    lines = [f"replay of run {run_id}{source} diverged at call {exc.call}: {where}", message]
    if exc.expected is not None or exc.actual is not None:
        lines.append(f"  original: {exc.expected}")
        lines.append(f"  replay:   {exc.actual}")
    if exc.diff:
        lines.append(exc.diff.rstrip("\n"))
    return "\n".join(lines)


class NoModel:
    """A provider that must never be asked: give it to an agent that replays, and a call
    to the model fails the test (a replay answers every call from the recording)."""

    name = "no-model"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: Any) -> Any:
        self.calls += 1
        raise AssertionError("the replay called the model")


def silent_twins(tools: Any, executed: list[str]) -> list[Tool]:
    """Tools with the same model-visible schemas (and the same declarations: needs, ruled
    arguments) whose execution fails (and is logged in ``executed``): a replay answers every
    tool call from the recording."""

    def twin(tool: Tool) -> Tool:
        def execute(arguments: Any) -> Any:
            executed.append(tool.name)
            raise AssertionError(f"the replay ran tool {tool.name}")

        return dataclasses.replace(tool, execute=execute, takes_context=False)

    return [twin(tool) for tool in tools]
