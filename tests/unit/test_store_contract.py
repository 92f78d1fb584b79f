"""Both backends pass the one store contract."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import agentfootprint as af
from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.store.memory import MemoryStore
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.testing.store_contract import StoreContract


class TestMemoryStore(StoreContract):
    def make_store(self, tmp_path: Path) -> EventStore:
        return MemoryStore()


class TestSqliteStore(StoreContract):
    def make_store(self, tmp_path: Path) -> EventStore:
        return SqliteStore(tmp_path / "runs.db")


def test_a_store_subclass_that_appends_its_own_way_is_called(tmp_path: Path) -> None:
    """The run writer's hashed-append shortcut never bypasses an ``append`` a subclass
    overrides (logging, mirroring, fault injection)."""
    calls: list[int] = []

    class Counting(SqliteStore):
        def append(self, events: Sequence[StoredEvent]) -> None:
            calls.append(len(events))
            super().append(events)

    with Counting(tmp_path / "c.db") as store:
        run = af.Agent(provider=af.MockProvider(["hi"]), model="m", store=store).run_sync("q")
        assert sum(calls) == store.run_info(run.run_id).events
