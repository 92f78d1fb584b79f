"""A store has one append path, ``append``, for the run writer and everyone else (issue 25: no
``append_hashed`` beside it, chosen by checking for overrides). A schema 2 or 4 store, which keeps
neither event hashes nor most chain hashes, recomputes every row's and refuses a batch whose
dropped values do not follow from its rows; the writer's rows go through the same checks, and
a subclass's own ``append`` is the one the writer calls."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import agentfootprint as af
from agentfootprint.errors import StoreError
from agentfootprint.logformat.chain import chain_hash
from agentfootprint.store.base import StoredEvent
from agentfootprint.testing.store_contract import hashed_batch, open_body
from agentfootprint.testing.tamper import new_file_schema


def _batches() -> tuple[list[StoredEvent], list[StoredEvent]]:
    first = hashed_batch("r", [("run.open", open_body("r"))])
    second = hashed_batch(
        "r",
        [("commit", {"commit": 0, "stage": "s", "stage_run": "s#1", "writes": 0})] * 2,
        after=first,
    )
    return first, second


@pytest.fixture(params=[2, 4])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[af.SqliteStore]:
    """A store of each layout that keeps neither event hashes nor most chain hashes."""
    with new_file_schema(request.param):
        store = af.SqliteStore(tmp_path / "log.db")
    assert store.layout == request.param
    yield store
    store.close()


def test_a_broken_chain_link_is_refused(store: af.SqliteStore) -> None:
    first, second = _batches()
    store.append(first)
    broken = [dataclasses.replace(second[0], chain_hash=bytes(32)), second[1]]
    with pytest.raises(StoreError, match="chain link does not follow"):
        store.append(broken)
    assert [e.seq for e in store.read("r")] == [0]  # nothing of the refused batch


def test_a_wrong_event_hash_is_refused_even_with_its_link_made_to_match(
    store: af.SqliteStore,
) -> None:
    first, second = _batches()
    store.append(first)
    wrong = bytes(range(32))  # a hash the row does not have, with its link made to match
    relinked = dataclasses.replace(
        second[0], event_hash=wrong, chain_hash=chain_hash(first[-1].chain_hash, wrong)
    )
    with pytest.raises(StoreError, match="event hash or chain link does not follow"):
        store.append([relinked])
    store.append(second)  # the right hashes: taken
    assert list(store.read("r")) == first + second


def test_the_writer_appends_through_append_and_its_runs_verify(
    store: af.SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    append = store.append

    def counted(events: Sequence[StoredEvent]) -> None:
        calls.append(len(events))
        append(events)

    monkeypatch.setattr(store, "append", counted)
    with af.Agent(provider=af.MockProvider(["hi"]), model="m", store=store) as agent:
        result = agent.run_sync("hello")
    assert calls and sum(calls) == len(list(store.read(result.run_id)))
    assert af.Verifier(store).verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_subclass_that_appends_its_own_way_is_the_one_the_writer_calls(
    tmp_path: Path, kind: str
) -> None:
    """Logging, mirroring, fault injection: overriding ``append`` is enough, for every store."""
    calls: list[int] = []
    base: type[af.MemoryStore] | type[af.SqliteStore] = (
        af.MemoryStore if kind == "memory" else af.SqliteStore
    )

    class Counting(base):  # type: ignore[valid-type,misc]
        def append(self, events: Sequence[StoredEvent]) -> None:
            calls.append(len(events))
            super().append(events)

    store = Counting() if kind == "memory" else Counting(tmp_path / "c.db")
    with af.Agent(provider=af.MockProvider(["hi"]), model="m", store=store) as agent:
        run = agent.run_sync("q")
    assert calls and sum(calls) == store.run_info(run.run_id).events
    store.close()
