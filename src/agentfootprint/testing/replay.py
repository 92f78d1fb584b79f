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

A database is copied into a temporary directory before it is opened (opening SQLite
writes: schema checks, WAL files), so the golden file itself is never touched. Each
replay records into the agent's own store (a memory store when the factory passes
``store=None``). Re-record the golden log when a change of what the model is served is
intended.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentfootprint.audit.replayer import ReplayResult, replay_sync
from agentfootprint.core.tools import Tool, define_tool
from agentfootprint.errors import ReplayDivergence, UsageError
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.verify.bundle import BundleSource, is_bundle

if TYPE_CHECKING:
    from agentfootprint.core.agent import Agent

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

    from agentfootprint.core.agent import Agent

    path = Path(golden_db)
    if not path.is_file():
        raise UsageError(f"golden log {path} does not exist (record it first)")
    failures: list[str] = []
    results: list[ReplayResult] = []
    with tempfile.TemporaryDirectory(prefix="agentfootprint-golden-") as scratch:
        vault_copy = None
        if disclosures is not None:  # read from a copy: the golden vault is never touched
            if not Path(disclosures).is_file():
                raise UsageError(f"golden vault {disclosures} does not exist")
            vault_copy = Path(scratch) / f"vault-{Path(disclosures).name}"
            shutil.copyfile(disclosures, vault_copy)
        source = _open_read_only(path, Path(scratch))
        try:
            run_ids = [run_id] if run_id is not None else [i.run_id for i in source.runs()]
            if not run_ids:
                pytest.fail(f"golden log {path} holds no runs", pytrace=False)
            for current in run_ids:
                agent = factory()
                if not isinstance(agent, Agent):
                    raise UsageError(
                        "assert_replays: the factory must return an agentfootprint Agent, "
                        f"it returned {type(agent).__name__}"
                    )
                try:
                    results.append(replay_sync(agent, source, current, disclosures=vault_copy))
                except ReplayDivergence as exc:
                    failures.append(describe_divergence(exc, current, path))
                finally:
                    agent.close()
        finally:
            source.close()
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


def _open_read_only(path: Path, scratch: Path) -> Any:
    """A bundle as it is; a database through a copy in ``scratch`` (with its WAL, if any)."""
    if is_bundle(path):
        return BundleSource(path)
    copy = scratch / path.name
    shutil.copyfile(path, copy)
    wal = path.with_name(path.name + "-wal")
    if wal.exists():  # committed pages not yet checkpointed into the main file
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
    return SqliteStore(copy)


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
    """Tools with the same model-visible schemas whose execution fails (and is logged in
    ``executed``): a replay answers every tool call from the recording."""

    def twin(tool: Tool) -> Tool:
        def execute(arguments: Any) -> Any:
            executed.append(tool.name)
            raise AssertionError(f"the replay ran tool {tool.name}")

        return define_tool(
            name=tool.name,
            description=tool.description,
            input_schema=dict(tool.input_schema),
            execute=execute,
        )

    return [twin(tool) for tool in tools]
