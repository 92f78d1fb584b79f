"""What a replay does with the original run's ancestry in the agent's store.

A replay of run ``k`` of a conversation continues run ``k - 1``; ``copy_ancestry`` copies
into the agent's store what it lacks of the chain, and checks that what it holds is the
original. Counted here: how many verifications that check costs (one comparison, whatever
``k``), and that a refused check writes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.logformat.rows import StoredEvent
from agentfootprint.testing.replay import NoModel
from agentfootprint.verify import verifier as verifier_module

RUNS = 8
OPTIONS: dict[str, Any] = {"model": "m", "system": "You answer briefly."}


def _conversation(store: af.MemoryStore) -> list[str]:
    """``RUNS`` runs, each continuing the one before; their ids, root first."""
    agent = af.Agent(
        provider=af.MockProvider([f"answer {i}" for i in range(RUNS)]), store=store, **OPTIONS
    )
    ids: list[str] = []
    previous: af.RunResult | None = None
    for turn in range(RUNS):
        previous = agent.run_sync(f"question {turn}", continue_from=previous)
        ids.append(previous.run_id)
    return ids


def _replayer() -> af.Agent:
    return af.Agent(provider=NoModel(), store=af.MemoryStore(), **OPTIONS)


def _counting_verifications(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``Verifier.verify`` call from now on, by run id."""
    calls: list[str] = []
    verify = verifier_module.Verifier.verify

    def counted(self: Any, run_id: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(run_id)
        return verify(self, run_id, *args, **kwargs)

    monkeypatch.setattr(verifier_module.Verifier, "verify", counted)
    return calls


def test_a_replay_checks_the_ancestry_it_holds_with_one_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = af.MemoryStore()
    ids = _conversation(original)
    agent = _replayer()
    calls = _counting_verifications(monkeypatch)
    per_replay = []
    for run_id in ids:  # root first: each replay finds every ancestor held but its parent
        del calls[:]
        assert af.replay_sync(agent, original, run_id).calls_checked == 1
        per_replay.append(len(calls))
    # the same count for run 2 as for run 8: not one verification per ancestor
    assert per_replay[2:] == [per_replay[2]] * (RUNS - 2), per_replay
    assert per_replay[-1] <= 6, per_replay


def test_a_held_ancestor_that_does_not_verify_refuses_the_replay_before_anything_is_copied() -> (
    None
):
    original = af.MemoryStore()
    ids = _conversation(original)
    agent = _replayer()
    target = agent.store
    assert isinstance(target, af.MemoryStore)
    root = [StoredEvent.copy_of(row) for row in original.read(ids[0])]
    at = next(i for i, row in enumerate(root) if b"question 0" in row.body)
    body = root[at].body.replace(b"question 0", b"question X")
    object.__setattr__(root[at], "body", body)  # the hashes stay: the row no longer matches
    target.append(root)
    with pytest.raises(af.ContinuationError, match="does not verify"):
        af.replay_sync(agent, original, ids[3])
    assert target.run_ids() == [ids[0]]  # nothing of the chain was copied


def test_a_run_held_past_a_missing_ancestor_is_checked_once_the_ancestor_is_copied() -> None:
    original = af.MemoryStore()
    ids = _conversation(original)
    agent = _replayer()
    target = agent.store
    for run_id in (ids[0], ids[2]):  # the store took run 2 without run 1
        target.append([StoredEvent.copy_of(row) for row in original.read(run_id)])
    assert af.replay_sync(agent, original, ids[4]).calls_checked == 1
    for run_id in ids[:4]:
        assert [r.chain_hash for r in target.read(run_id)] == [
            r.chain_hash for r in original.read(run_id)
        ]


def test_a_replay_reads_two_runs_of_the_store_it_copies_into_whatever_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Which runs of the chain the agent's store holds is learnt from its newest run back
    (a read each: the parent, missing, then the grandparent), never from a listing of the
    store, whose size grows with every replay."""
    original = af.MemoryStore()
    ids = _conversation(original)
    agent = _replayer()
    target = agent.store
    assert isinstance(target, af.MemoryStore)
    looked_up: list[str] = []
    read = af.MemoryStore.read

    def counted(self: Any, run_id: str, *args: Any, **kwargs: Any) -> Any:
        if self is target:
            looked_up.append(run_id)
        return read(self, run_id, *args, **kwargs)

    def listed(self: Any) -> list[str]:
        raise AssertionError("the agent's store was listed")

    monkeypatch.setattr(af.MemoryStore, "read", counted)
    monkeypatch.setattr(af.MemoryStore, "run_ids", listed)
    per_replay = []
    for k, run_id in enumerate(ids):
        del looked_up[:]
        af.replay_sync(agent, original, run_id)
        per_replay.append(looked_up.count(ids[k - 2]) if k >= 2 else 0)
        assert all(ids.index(r) >= k - 2 for r in looked_up if r in ids), (k, looked_up)
    assert per_replay[2:] == [per_replay[2]] * (RUNS - 2), per_replay
