"""Both backends pass the one store contract."""

from __future__ import annotations

from pathlib import Path

from agentfootprint.store.base import EventStore
from agentfootprint.store.memory import MemoryStore
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.testing.store_contract import StoreContract


class TestMemoryStore(StoreContract):
    def make_store(self, tmp_path: Path) -> EventStore:
        return MemoryStore()


class TestSqliteStore(StoreContract):
    def make_store(self, tmp_path: Path) -> EventStore:
        return SqliteStore(tmp_path / "runs.db")
