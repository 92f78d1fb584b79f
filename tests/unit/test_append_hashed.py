"""``SqliteStore.append_hashed``: the run writer's rows, whose event hashes it computed from the
bytes it stores, are not hashed again by a schema 2 store, but every chain link is still
checked against the stored head; ``append`` still recomputes everything. The writer uses the
fast path, and what it writes reads back and verifies exactly as before."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import agentfootprint as af
from agentfootprint.errors import StoreError
from agentfootprint.logformat.chain import chain_hash
from agentfootprint.store.base import StoredEvent
from agentfootprint.testing.store_contract import hashed_batch, open_body


def _batches() -> tuple[list[StoredEvent], list[StoredEvent]]:
    first = hashed_batch("r", [("run.open", open_body("r"))])
    second = hashed_batch(
        "r",
        [("commit", {"commit": 0, "stage": "s", "stage_run": "s#1", "writes": 0})] * 2,
        after=first,
    )
    return first, second


@pytest.fixture
def store(tmp_path: Path) -> af.SqliteStore:
    store = af.SqliteStore(tmp_path / "log.db")
    yield store
    store.close()


def test_a_broken_chain_link_is_refused_on_the_fast_path_too(store: af.SqliteStore) -> None:
    first, second = _batches()
    store.append_hashed(first)
    broken = [dataclasses.replace(second[0], chain_hash=bytes(32)), second[1]]
    with pytest.raises(StoreError, match="chain link does not follow"):
        store.append_hashed(broken)
    assert [e.seq for e in store.read("r")] == [0]  # nothing of the refused batch


def test_append_recomputes_the_event_hash_the_fast_path_takes(store: af.SqliteStore) -> None:
    first, second = _batches()
    store.append(first)
    wrong = bytes(range(32))  # a hash the row does not have, with its link made to match
    relinked = dataclasses.replace(
        second[0], event_hash=wrong, chain_hash=chain_hash(first[-1].chain_hash, wrong)
    )
    with pytest.raises(StoreError, match="event hash or chain link does not follow"):
        store.append([relinked])
    store.append_hashed(second)  # the writer's own hashes: taken, and they are right
    assert list(store.read("r")) == first + second


def test_the_writer_takes_the_fast_path_and_its_runs_verify(
    store: af.SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    fast = store.append_hashed

    def counted(events: list[StoredEvent]) -> None:
        calls.append(len(events))
        fast(events)

    monkeypatch.setattr(store, "append_hashed", counted)
    with af.Agent(provider=af.MockProvider(["hi"]), model="m", store=store) as agent:
        result = agent.run_sync("hello")
    assert calls and sum(calls) == len(list(store.read(result.run_id)))
    assert af.Verifier(store).verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED
