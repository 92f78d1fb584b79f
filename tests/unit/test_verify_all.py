"""Whole-file verification finds runs from the events, never from the ``runs`` index.

``Verifier.verify_all()`` gives every run with events one verdict (ancestors verified
first), then one ``index`` finding per index row that disagrees with the events. The
files here are real SQLite logs recorded by an agent, altered through a raw connection
with the append-only triggers dropped.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.chain import GENESIS, chain_hash, event_hash
from agentfootprint.store.base import EventReader
from agentfootprint.store.memory import MemoryStore
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body
from agentfootprint.testing.tamper import tampering
from agentfootprint.verify.verifier import Row, parent_of

#: these tests edit or read the schema-1 ``events`` table directly (docs/log-format.md
#: appendix B): every new file of this module is created with storage schema 1
#: (tests/conftest.py)
NEW_FILE_SCHEMA = 1

Verdicts = list[tuple[str, af.RunVerification | af.VerificationError]]


class Runs:
    """The recorded file and its run ids: root, child (continues root), other (a root)."""

    def __init__(self, path: Path, root: str, child: str, other: str) -> None:
        self.path, self.root, self.child, self.other = path, root, child, other


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    path = tmp_path_factory.mktemp("all") / "log.db"
    store = af.SqliteStore(path)
    agent = af.Agent(provider=af.MockProvider(["one", "two", "three"]), model="m", store=store)
    root = agent.run_sync("first")
    child = agent.run_sync("second", continue_from=root)
    other = agent.run_sync("unrelated")
    store.close()
    return Runs(path, root.run_id, child.run_id, other.run_id)


@pytest.fixture
def runs(recorded: Runs, tmp_path: Path) -> Runs:
    """A fresh copy of the recorded file for one test."""
    copy = tmp_path / "copy.db"
    shutil.copyfile(recorded.path, copy)
    for suffix in ("-wal", "-shm"):
        if Path(f"{recorded.path}{suffix}").exists():
            shutil.copyfile(f"{recorded.path}{suffix}", f"{copy}{suffix}")
    return Runs(copy, recorded.root, recorded.child, recorded.other)


def verdicts(path: Path) -> Verdicts:
    store = af.SqliteStore(path, readonly=True)
    try:
        return list(af.Verifier(store).verify_all())
    finally:
        store.close()


def split(found: Verdicts) -> tuple[dict[str, Any], list[af.VerificationError]]:
    """Per-run verdicts (in order) and the index findings."""
    per_run: dict[str, Any] = {}
    index = []
    for run_id, result in found:
        if isinstance(result, af.VerificationError) and result.code == "index":
            index.append(result)
        else:
            assert run_id not in per_run, f"{run_id} got two verdicts"
            per_run[run_id] = result
    return per_run, index


def test_every_run_gets_one_verdict_in_the_order_of_its_events(runs: Runs) -> None:
    per_run, index = split(verdicts(runs.path))
    assert list(per_run) == [runs.root, runs.child, runs.other]
    assert all(r.outcome is af.Outcome.VALID_UNSIGNED for r in per_run.values())
    assert per_run[runs.child].ancestors == (runs.root,)
    assert index == []


def test_a_deleted_index_row_does_not_hide_a_tampered_run(runs: Runs) -> None:
    """The issue's case: before, ``verify DB`` never looked at a run without a runs row."""
    with tampering(runs.path) as conn:
        conn.execute("UPDATE events SET ts = ts + 1 WHERE run_id = ? AND seq = 2", (runs.root,))
        conn.execute("DELETE FROM runs WHERE run_id = ?", (runs.root,))
    per_run, index = split(verdicts(runs.path))
    assert isinstance(per_run[runs.root], af.VerificationError)
    assert (per_run[runs.root].code, per_run[runs.root].seq) == ("hash", 2)
    assert per_run[runs.child].code == "ancestry"
    assert per_run[runs.other].outcome is af.Outcome.VALID_UNSIGNED
    assert [(e.run_id, e.seq) for e in index] == [(runs.root, None)]
    assert "no row" in index[0].reason


def test_an_index_row_without_events_is_a_finding(runs: Runs) -> None:
    with tampering(runs.path) as conn:
        conn.execute("INSERT INTO runs VALUES ('ghost', 'ghost', NULL, 1)")
    per_run, index = split(verdicts(runs.path))
    assert "ghost" not in per_run and len(per_run) == 3
    assert [(e.run_id, e.seq, e.code) for e in index] == [("ghost", None, "index")]
    assert "no event" in index[0].reason


@pytest.mark.parametrize(
    ("column", "value", "words"),
    [
        ("conversation_id", "'elsewhere'", "conversation_id 'elsewhere' where run.open says"),
        ("parent_run_id", "NULL", "parent_run_id None where run.open says"),
        ("parent_run_id", "'someone'", "parent_run_id 'someone'"),
        ("opened_at", "opened_at + 1", "opened_at"),
        ("opened_at", "'later'", "opened_at 'later'"),
        ("opened_at", "opened_at + 0.5", "opened_at"),
        ("conversation_id", "CAST(conversation_id AS BLOB)", "conversation_id b'"),
    ],
)
def test_an_index_row_that_disagrees_with_run_open_is_a_finding(
    runs: Runs, column: str, value: str, words: str
) -> None:
    with tampering(runs.path) as conn:
        conn.execute(f"UPDATE runs SET {column} = {value} WHERE run_id = ?", (runs.child,))
    per_run, index = split(verdicts(runs.path))
    assert all(r.outcome is af.Outcome.VALID_UNSIGNED for r in per_run.values())  # evidence
    assert [(e.run_id, e.seq) for e in index] == [(runs.child, 0)], index
    assert words in index[0].reason


def test_a_root_run_indexed_with_a_parent_is_a_finding(runs: Runs) -> None:
    with tampering(runs.path) as conn:
        conn.execute("UPDATE runs SET parent_run_id = ? WHERE run_id = ?", (runs.root, runs.other))
    _, index = split(verdicts(runs.path))
    assert [e.run_id for e in index] == [runs.other]
    assert f"parent_run_id {runs.root!r} where run.open says None" in index[0].reason


def test_the_parent_is_taken_from_run_open_not_from_the_index(runs: Runs) -> None:
    """An index naming no parent (or another) changes nothing the verifier checks."""
    with tampering(runs.path) as conn:
        conn.execute("UPDATE runs SET parent_run_id = ? WHERE run_id = ?", (runs.other, runs.child))
    store = af.SqliteStore(runs.path, readonly=True)
    try:
        assert parent_of(store, runs.child) == runs.root
        assert parent_of(store, runs.root) is None
        assert af.Verifier(store).verify(runs.child).ancestors == (runs.root,)
    finally:
        store.close()


def test_runs_stored_child_first_verify_ancestors_first(runs: Runs) -> None:
    """Re-inserting the root's rows puts them after the child's: the child is listed first,
    and its verdict still rests on the root verified before it."""
    with tampering(runs.path) as conn:
        rows = conn.execute("SELECT * FROM events WHERE run_id = ?", (runs.root,)).fetchall()
        conn.execute("DELETE FROM events WHERE run_id = ?", (runs.root,))
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    per_run, index = split(verdicts(runs.path))
    assert list(per_run) == [runs.child, runs.other, runs.root]
    assert per_run[runs.child].ancestors == (runs.root,)
    assert all(r.outcome is af.Outcome.VALID_UNSIGNED for r in per_run.values())
    assert index == []


def test_a_run_whose_id_is_not_text_gets_a_verdict(runs: Runs) -> None:
    """A crafted file can hold a BLOB run id: a ``rows`` verdict (and no index row)."""
    with tampering(runs.path) as conn:
        conn.execute(
            "INSERT INTO events SELECT CAST(run_id AS BLOB), seq, type, ts, body, event_hash, "
            "chain_hash FROM events WHERE run_id = ?",
            (runs.other,),
        )
    found = verdicts(runs.path)
    per_run, index = split(found)
    blob = repr(runs.other.encode())
    assert per_run[blob].code == "rows" and "not a string" in per_run[blob].reason
    assert [(e.run_id, e.seq) for e in index] == [(blob, None)]


def test_an_index_run_id_that_is_not_text_is_a_finding(runs: Runs) -> None:
    with tampering(runs.path) as conn:
        conn.execute("INSERT INTO runs VALUES (x'07', 'c', NULL, 1)")
    _, index = split(verdicts(runs.path))
    assert [(e.run_id, e.seq) for e in index] == [("b'\\x07'", None)]
    assert "1 bytes, not text" in index[0].reason


def test_a_failed_run_is_compared_for_presence_only(runs: Runs) -> None:
    """Its verdict is INVALID already; its run.open is not evidence to compare with."""
    with tampering(runs.path) as conn:
        conn.execute("UPDATE events SET ts = ts + 1 WHERE run_id = ? AND seq = 0", (runs.other,))
        conn.execute("UPDATE runs SET conversation_id = 'x' WHERE run_id = ?", (runs.other,))
    per_run, index = split(verdicts(runs.path))
    assert per_run[runs.other].code == "hash"
    assert index == []


# -- sources ----------------------------------------------------------------------------------


class Counting:
    """A plain row source over a store (``read`` and ``run_ids``, no index) that counts
    the reads of each run."""

    def __init__(self, store: EventReader) -> None:
        self.store = store
        self.reads: Counter[str] = Counter()

    def read(self, run_id: str, *, start: int = 0) -> Iterable[Row]:
        self.reads[run_id] += 1
        return self.store.read(run_id, start=start)

    def run_ids(self) -> list[str]:
        return self.store.run_ids()


def test_a_plain_row_source_has_no_index_to_check(runs: Runs) -> None:
    with tampering(runs.path) as conn:
        conn.execute("DELETE FROM runs")
    store = af.SqliteStore(runs.path, readonly=True)
    try:
        found = list(af.Verifier(Counting(store)).verify_all())
    finally:
        store.close()
    assert [run_id for run_id, _ in found] == [runs.root, runs.child, runs.other]
    assert all(isinstance(r, af.RunVerification) for _, r in found)


def test_a_source_that_cannot_list_its_runs_is_a_usage_error() -> None:
    class ReadOnly:
        def read(self, run_id: str, *, start: int = 0) -> Iterator[Row]:
            return iter(())

    with pytest.raises(af.UsageError, match="cannot list its runs"):
        list(af.Verifier(ReadOnly()).verify_all())


def test_each_run_is_read_once_and_a_failed_parent_is_not_verified_per_child(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fan.db"
    store = af.SqliteStore(path)
    agent = af.Agent(provider=af.MockProvider(["p", "a", "b", "c"]), model="m", store=store)
    parent = agent.run_sync("root")
    children = [agent.run_sync(q, continue_from=parent).run_id for q in "abc"]
    store.close()
    for damaged in (False, True):
        if damaged:
            with tampering(path) as conn:
                conn.execute(
                    "UPDATE events SET ts = ts + 1 WHERE run_id = ? AND seq = 1", (parent.run_id,)
                )
        store = af.SqliteStore(path, readonly=True)
        try:
            source = Counting(store)
            found = dict(af.Verifier(source).verify_all())
        finally:
            store.close()
        assert source.reads == Counter({run_id: 1 for run_id in [parent.run_id, *children]})
        if damaged:
            assert found[parent.run_id].code == "hash"  # type: ignore[union-attr]
            assert {found[c].code for c in children} == {"ancestry"}  # type: ignore[union-attr]


def test_a_memory_store_is_checked_the_same_way() -> None:
    store = MemoryStore()
    agent = af.Agent(provider=af.MockProvider(["one", "two"]), model="m", store=store)
    first = agent.run_sync("a")
    second = agent.run_sync("b", continue_from=first)
    found = list(af.Verifier(store).verify_all())
    assert [run_id for run_id, _ in found] == [first.run_id, second.run_id]
    assert all(isinstance(r, af.RunVerification) for _, r in found)


def test_verify_all_after_verify_uses_the_cache(runs: Runs) -> None:
    store = af.SqliteStore(runs.path, readonly=True)
    try:
        verifier = af.Verifier(store)
        child = verifier.verify(runs.child)
        found = dict(verifier.verify_all())
    finally:
        store.close()
    assert found[runs.child] is child


def test_runs_that_name_each_other_as_parents_are_ancestry_not_a_hang() -> None:
    store = MemoryStore()
    parent = {"events": 2, "head": "ab" * 32}
    for run_id, other in (("a", "b"), ("b", "a"), ("c", "c")):
        writer = RunWriter(store, run_id)
        writer.append([("run.open", open_body(run_id, "conv", {**parent, "run_id": other}))])
        writer.append([("run.close", {"outcome": "answered", "commits": 0, "receipts": 0})])
    found = dict(af.Verifier(store).verify_all())
    assert set(found) == {"a", "b", "c"}
    for result in found.values():
        assert isinstance(result, af.VerificationError)
        assert (result.code, result.seq) == ("ancestry", 0) and "cycle" in result.reason


def _chain(store: MemoryStore, length: int) -> list[str]:
    """``length`` runs, each continuing the one before (hand-built, minimal)."""
    ids: list[str] = []
    for index in range(length):
        run_id = f"r{index}"
        parent = None
        if ids:
            events = len(list(store.read(ids[-1])))
            head = list(store.read(ids[-1]))[-1].chain_hash.hex()
            parent = {"run_id": ids[-1], "events": events, "head": head}
        writer = RunWriter(store, run_id)
        writer.append([("run.open", open_body(run_id, "conv", parent))])
        writer.append([("run.close", {"outcome": "answered", "commits": 0, "receipts": 0})])
        ids.append(run_id)
    return ids


def test_a_long_conversation_with_a_broken_root_fails_every_run_without_recursion() -> None:
    store = MemoryStore()
    ids = _chain(store, 1200)
    log = store._events[ids[0]]
    log[1] = af.store.base.StoredEvent(
        **{
            **{k: getattr(log[1], k) for k in af.store.base.StoredEvent.__slots__},
            "ts": log[1].ts + 1,
        }
    )
    source = Counting(store)
    with pytest.raises(af.VerificationError) as caught:
        af.Verifier(source).verify(ids[-1])  # its whole ancestry, oldest first, no recursion
    assert (caught.value.code, caught.value.seq) == ("ancestry", 0)
    assert f"run {ids[0]} seq 1: event hash" in caught.value.reason  # the first failure
    assert len(caught.value.reason) < 300  # named once, not once per link
    assert max(source.reads.values()) <= 2  # each run: found by its child, then verified
    found = dict(af.Verifier(Counting(store)).verify_all())
    assert found[ids[0]].code == "hash"  # type: ignore[union-attr]
    assert {found[r].code for r in ids[1:]} == {"ancestry"}  # type: ignore[union-attr]


def test_a_child_is_checked_before_its_failed_parent_is_blamed() -> None:
    """The order of seq-0 checks does not depend on whether the parent was verified first:
    the child's own run.open members (structure), then its parent (ancestry)."""
    for warm in (False, True):
        store = MemoryStore()
        ids = _chain(store, 2)
        log = store._events[ids[0]]
        log[1] = af.store.base.StoredEvent(
            **{
                **{k: getattr(log[1], k) for k in af.store.base.StoredEvent.__slots__},
                "ts": log[1].ts + 1,
            }
        )
        child = store._events[ids[1]]
        body = parse(child[0].body)
        body["format"] = "agentfootprint/log/v9"
        data = canon(body)
        digest = event_hash(ids[1], 0, "run.open", child[0].ts, data)
        child[0] = af.store.base.StoredEvent(
            **{
                **{k: getattr(child[0], k) for k in af.store.base.StoredEvent.__slots__},
                "body": data,
                "event_hash": digest,
                "chain_hash": chain_hash(GENESIS, digest),
            }
        )
        verifier = af.Verifier(store)
        if warm:
            with pytest.raises(af.VerificationError):
                verifier.verify(ids[0])
        with pytest.raises(af.VerificationError) as caught:
            verifier.verify(ids[1])
        assert (caught.value.code, caught.value.seq) == ("structure", 0), caught.value


@pytest.mark.parametrize("column", ["type", "run_id"])
def test_text_that_is_not_utf8_fails_its_run_not_the_file(runs: Runs, column: str) -> None:
    # found while reviewing: the driver refused the whole query, so no run got a verdict
    with tampering(runs.path) as conn:
        conn.execute(
            f"UPDATE events SET {column} = CAST(x'ff' || CAST({column} AS BLOB) AS TEXT) "
            "WHERE run_id = ? AND seq = 1",
            (runs.other,),
        )
    per_run, index = split(verdicts(runs.path))
    assert per_run[runs.root].outcome is af.Outcome.VALID_UNSIGNED
    assert per_run[runs.child].outcome is af.Outcome.VALID_UNSIGNED
    assert per_run[runs.other].code == "rows"
    if column == "run_id":  # the damaged row is a run of its own, with no index row
        strays = [run_id for run_id in per_run if run_id not in (runs.root, runs.child, runs.other)]
        assert len(strays) == 1 and per_run[strays[0]].code == "rows"
        assert [finding.code for finding in index] == ["index"]
    else:
        assert index == []
