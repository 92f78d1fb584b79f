"""The store contract (agentfootprint.testing.store_contract) against PostgreSQL: a new
database per test, on the session's server (tests/conftest.py, ``pg_server``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfootprint.store.base import EventStore
from agentfootprint.store.postgres import PostgresStore
from agentfootprint.testing.store_contract import StoreContract


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_database: str) -> Iterator[Any]:
        store = PostgresStore(pg_database)
        yield store
        store.close()

    def make_store(self, tmp_path: Path) -> EventStore:  # the fixture above is used instead
        raise NotImplementedError
