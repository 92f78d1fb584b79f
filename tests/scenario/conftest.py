"""Fixtures of the replay suites."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent
from agentfootprint.store.base import EventStore


@pytest.fixture
def demo() -> tuple[EventStore, af.RunResult, af.RunResult]:
    """Both demo turns recorded by the unchanged demo agent."""
    store = af.MemoryStore()
    agent = build_demo_agent(store)
    first = agent.run_sync(DEMO_QUESTIONS[0])
    second = agent.run_sync(DEMO_QUESTIONS[1], continue_from=first)
    assert (first.calls, second.calls) == (4, 2)
    return store, first, second


@pytest.fixture
def target_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore | None]:
    """Where a replay records: ``None`` for the original's store, else a new store."""
    kind = request.param
    if kind == "same":
        yield None
    elif kind == "memory":
        yield af.MemoryStore()
    else:
        store = af.SqliteStore(tmp_path / "replays.db")
        try:
            yield store
        finally:
            store.close()
