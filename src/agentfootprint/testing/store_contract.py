"""The contract test case every store backend passes.

Subclass :class:`StoreContract` in a ``Test*`` class and implement
``make_store(tmp_path)``; pytest then runs every contract test against it.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from agentfootprint.errors import (
    PauseAnsweredError,
    RunNotFoundError,
    StoreConflictError,
    StoreError,
)
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.chain import GENESIS, chain_hash, event_hash
from agentfootprint.logformat.log_formats import LOG_FORMAT, LOG_FORMAT_V1
from agentfootprint.logformat.runs import RunInfo
from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.store.writer import RunWriter
from agentfootprint.verify.verifier import Outcome, Verifier

__all__ = ["StoreContract", "hashed_batch", "open_body"]


def open_body(
    run_id: str, conversation_id: str | None = None, parent: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A minimal valid ``run.open`` body (format 1: receipts are read as on)."""
    return {
        "format": LOG_FORMAT_V1,  # crafted logs are v1-shaped (no options member)
        "run_id": run_id,
        "conversation_id": conversation_id or run_id,
        "parent": parent,
        "projection": {
            "version": 1,
            "keys": {"system": "system_pieces", "messages": "history", "tools": "tool_schemas"},
        },
    }


def _ticking_clock() -> Any:
    now = [1_700_000_000_000]

    def clock() -> int:
        now[0] += 1
        return now[0]

    return clock


class StoreContract:
    """Behaviour every :class:`EventStore` backend must show."""

    def make_store(self, tmp_path: Path) -> EventStore:
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Any:
        store = self.make_store(tmp_path)
        yield store
        store.close()

    def _write_run(self, store: EventStore, run_id: str, commits: int = 2) -> RunWriter:
        writer = RunWriter(store, run_id, clock=_ticking_clock())
        writer.append([("run.open", open_body(run_id))])
        for index in range(commits):
            writer.append(
                [
                    ("write", {"commit": index, "path": "n", "verb": "set", "value": index}),
                    (
                        "commit",
                        {"commit": index, "stage": "s", "stage_run": f"s#{index}", "writes": 1},
                    ),
                ]
            )
        return writer

    def test_append_then_read_back_exact_bytes(self, store: EventStore) -> None:
        writer = self._write_run(store, "r1")
        events = list(store.read("r1"))
        assert [e.seq for e in events] == list(range(5))
        assert [e.type for e in events] == ["run.open", "write", "commit", "write", "commit"]
        assert events[-1].chain_hash == writer.head
        for start in range(len(events) + 2):  # from any seq: the tail of the whole read
            assert list(store.read("r1", start=start)) == events[start:]

    def test_written_run_verifies(self, store: EventStore) -> None:
        self._write_run(store, "r1")
        writer = RunWriter(store, "r1")
        writer.seq, writer.head = 5, list(store.read("r1"))[-1].chain_hash
        writer.append([("run.close", {"outcome": "answered", "commits": 2, "receipts": 0})])
        result = Verifier(store).verify("r1")
        assert result.outcome is Outcome.VALID_UNSIGNED
        assert result.final_state == {"n": 1}

    def test_taken_position_is_a_conflict_and_keeps_nothing(self, store: EventStore) -> None:
        self._write_run(store, "r1", commits=1)
        before = list(store.read("r1"))
        stale = RunWriter(store, "r1")  # believes the run is empty
        with pytest.raises(StoreConflictError):
            stale.append([("run.open", open_body("r1"))])
        assert list(store.read("r1")) == before
        assert stale.seq == 0

    def test_gap_is_refused(self, store: EventStore) -> None:
        self._write_run(store, "r1", commits=1)
        writer = RunWriter(store, "r1")
        writer.seq = 7
        with pytest.raises(StoreConflictError):
            writer.append(
                [("commit", {"commit": 1, "stage": "s", "stage_run": "s#1", "writes": 0})]
            )
        assert len(list(store.read("r1"))) == 3

    def test_first_event_must_open_the_run(self, store: EventStore) -> None:
        with pytest.raises(StoreError):
            RunWriter(store, "r2").append([("commit", {"commit": 0})])
        with pytest.raises(RunNotFoundError):
            list(store.read("r2"))

    def test_batch_must_be_one_contiguous_run(self, store: EventStore) -> None:
        a = StoredEvent(
            run_id="a",
            seq=0,
            type="run.open",
            ts=1,
            body=b"{}",
            event_hash=b"0" * 32,
            chain_hash=b"0" * 32,
        )
        with pytest.raises(StoreError):
            store.append([a, StoredEvent(**{**_fields(a), "run_id": "b", "seq": 1})])
        with pytest.raises(StoreError):
            store.append([a, StoredEvent(**{**_fields(a), "seq": 2})])
        with pytest.raises(StoreError):
            store.append([])

    def test_runs_index(self, store: EventStore) -> None:
        self._write_run(store, "r1", commits=1)
        writer = RunWriter(store, "r2", clock=lambda: 1_800_000_000_000)
        writer.append([("run.open", open_body("r2", "r1", {"run_id": "r1"}))])
        infos = store.runs()
        assert [i.run_id for i in infos] == ["r1", "r2"]
        assert all(type(i) is RunInfo and i.requested for i in infos)  # the one run record
        r2 = store.run_info("r2")
        assert (r2.conversation_id, r2.parent_run_id, r2.events) == ("r1", "r1", 1)
        assert r2.opened_at == 1_800_000_000_000 and not r2.closed
        assert r2.head == writer.head

    def test_index_entries_read_lazily_are_the_index(self, store: EventStore) -> None:
        for run_id in ("zz-parent", "aa-child", "mm-grandchild"):
            RunWriter(store, run_id, clock=lambda: 1_700_000_000_000).append(
                [("run.open", open_body(run_id))]
            )
        entries = store.index_entries()
        assert [e.run_id for e in entries] == ["zz-parent", "aa-child", "mm-grandchild"]
        assert list(store.iter_index_entries()) == entries

    def test_runs_keep_opening_order(self, store: EventStore) -> None:
        for run_id in ("zz-parent", "aa-child", "mm-grandchild"):
            RunWriter(store, run_id, clock=lambda: 1_700_000_000_000).append(
                [("run.open", open_body(run_id))]
            )
        assert [i.run_id for i in store.runs()] == ["zz-parent", "aa-child", "mm-grandchild"]

    def test_append_runs_keeps_every_batch(self, store: EventStore) -> None:
        self._write_run(store, "old", commits=1)
        parent = hashed_batch("p", [("run.open", open_body("p"))])
        child = hashed_batch("c", [("run.open", open_body("c", "p", {"run_id": "p"}))])
        more = hashed_batch("c", [("commit", _commit(0))], after=child)
        store.append_runs([parent, child, more])  # a later batch may continue an earlier one
        assert [e.type for e in store.read("c")] == ["run.open", "commit"]
        assert [i.run_id for i in store.runs()] == ["old", "p", "c"]
        assert store.run_info("c").parent_run_id == "p"
        store.append_runs([])  # nothing to append is not an error
        store.append_runs(iter([hashed_batch("g", [("run.open", open_body("g"))])]))  # a generator
        assert store.run_ids() == ["old", "p", "c", "g"]

    @pytest.mark.parametrize("failure", ["taken", "gap", "shape", "open-body", "raises"])
    def test_append_runs_keeps_nothing_when_a_batch_fails(
        self, store: EventStore, failure: str
    ) -> None:
        self._write_run(store, "old", commits=1)
        before = {run_id: list(store.read(run_id)) for run_id in store.run_ids()}
        index_before = store.index_entries()
        good = hashed_batch("new", [("run.open", open_body("new"))])
        good_after = hashed_batch("last", [("run.open", open_body("last"))])
        bad: list[StoredEvent]
        if failure == "taken":  # another run.open of a run the store holds
            bad = hashed_batch("old", [("run.open", open_body("old"))])
        elif failure == "gap":
            bad = hashed_batch("new", [("commit", _commit(0))], first_seq=5)
        elif failure == "shape":  # seq 0 that is not run.open
            bad = hashed_batch("other", [("commit", _commit(0))])
        else:  # a run.open body without its run index
            bad = hashed_batch("other", [("run.open", {"format": LOG_FORMAT})])

        def batches() -> Any:
            yield good
            if failure == "raises":  # the source of the batches fails half-way
                raise StoreError("the bundle could not be read")
            yield bad
            yield good_after

        with pytest.raises(StoreError):
            store.append_runs(batches())
        assert store.run_ids() == ["old"]
        assert {run_id: list(store.read(run_id)) for run_id in store.run_ids()} == before
        assert store.index_entries() == index_before
        with pytest.raises(RunNotFoundError):
            store.run_info("new")
        store.append_runs([good, good_after])  # the store still takes the good batches
        assert store.run_ids() == ["old", "new", "last"]
        for run_id in ("old", "new", "last"):
            assert Verifier(store).verify(run_id).outcome is Outcome.UNSEALED

    def test_a_pause_is_answered_once(self, store: EventStore) -> None:
        """A ``run.open`` that resumes or abandons its parent's pause (log format v5) is
        refused when a run continuing that parent is stored already, in the appending
        transaction, keeping nothing (docs/log-format.md section 5.9)."""

        def answering(run_id: str, member: str) -> dict[str, Any]:
            return {**open_body(run_id, "p", {"run_id": "p"}), member: "pause-1"}

        self._write_run(store, "p", commits=1)
        RunWriter(store, "a1", clock=_ticking_clock()).append(
            [("run.open", answering("a1", "resumes"))]
        )
        index_before = store.index_entries()
        for run_id, member in (("a2", "resumes"), ("a3", "abandons")):
            with pytest.raises(PauseAnsweredError) as refused:
                RunWriter(store, run_id, clock=_ticking_clock()).append(
                    [("run.open", answering(run_id, member))]
                )
            assert (refused.value.parent, refused.value.answered_by) == ("p", "a1")
        # in one atomic append: the second answer takes the first down with it
        both = [
            hashed_batch("q", [("run.open", open_body("q"))]),
            hashed_batch(
                "b1", [("run.open", {**answering("b1", "abandons"), "parent": {"run_id": "q"}})]
            ),
            hashed_batch(
                "b2", [("run.open", {**answering("b2", "resumes"), "parent": {"run_id": "q"}})]
            ),
        ]
        with pytest.raises(PauseAnsweredError):
            store.append_runs(both)
        assert store.run_ids() == ["p", "a1"]
        assert store.index_entries() == index_before
        # a run that answers no pause is the store's to keep (the verifier judges it), and
        # a value that only reads "resumes" is no answer
        RunWriter(store, "c", clock=_ticking_clock()).append(
            [("run.open", {**open_body("c", "p", {"run_id": "p"}), "model": "resumes"})]
        )
        assert store.run_ids() == ["p", "a1", "c"]

    def test_an_answer_that_never_closed_may_be_retried_once(self, store: EventStore) -> None:
        """An answering run that never closed does not answer the pause: a run that says it
        retries (``run.open.retries``) may answer it; once an answer has closed, none may,
        retrying or not (docs/log-format.md section 5.9)."""

        def answering(run_id: str, **extra: Any) -> dict[str, Any]:
            return {**open_body(run_id, "p", {"run_id": "p"}), "resumes": "pause-1", **extra}

        self._write_run(store, "p", commits=1)
        RunWriter(store, "dead", clock=_ticking_clock()).append([("run.open", answering("dead"))])
        with pytest.raises(PauseAnsweredError, match="never closed") as refused:
            RunWriter(store, "plain", clock=_ticking_clock()).append(
                [("run.open", answering("plain"))]
            )
        assert refused.value.answered_by == "dead"
        retry = RunWriter(store, "retry", clock=_ticking_clock())
        retry.append([("run.open", answering("retry", retries=True))])
        retry.append([("run.close", {"outcome": "answered", "commits": 0, "receipts": 0})])
        with pytest.raises(PauseAnsweredError, match="answered already") as refused:
            RunWriter(store, "late", clock=_ticking_clock()).append(
                [("run.open", answering("late", retries=True))]
            )
        assert refused.value.answered_by == "retry"
        assert store.run_ids() == ["p", "dead", "retry"]

    def test_the_seal_log_lists_sealed_runs_in_seal_order(self, store: EventStore) -> None:
        """A batch holding a ``run.seal`` row gives its run the next leaf, in that batch's
        transaction (docs/log-format.md section 4.1); a store keeping no seal log says None."""
        log = store.seal_log()
        if log is None:
            pytest.skip("this store keeps no seal log")
        assert log == []
        for run_id in ("s2", "s1", "open", "s3"):
            batch = [("run.open", open_body(run_id))]
            if run_id != "open":
                batch.append(("run.seal", {"seal": run_id}))  # the store reads only the type
            RunWriter(store, run_id, clock=_ticking_clock()).append(batch)
        assert store.seal_log() == [(0, "s2"), (1, "s1"), (2, "s3")]

    def test_writers_of_different_runs_in_threads_lose_nothing(self, store: EventStore) -> None:
        errors: list[BaseException] = []

        def write(worker: int) -> None:
            try:
                for index in range(5):
                    self._write_run(store, f"w{worker}-{index}", commits=2)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        assert sorted(store.run_ids()) == sorted(f"w{n}-{i}" for n in range(8) for i in range(5))
        verifier = Verifier(store)
        assert all(verifier.verify(r).outcome is Outcome.UNSEALED for r in store.run_ids())

    def test_append_async_when_offered_keeps_the_append_rules(self, store: EventStore) -> None:
        append = getattr(store, "append_async", None)
        if not callable(append):
            pytest.skip("this store appends synchronously only")
        batch = hashed_batch("a1", [("run.open", open_body("a1"))])
        asyncio.run(append(batch))
        assert [e.seq for e in store.read("a1")] == [0]
        with pytest.raises(StoreConflictError):
            asyncio.run(append(batch))  # the position is taken
        assert list(store.read("a1")) == batch

    def test_unknown_run(self, store: EventStore) -> None:
        with pytest.raises(RunNotFoundError):
            store.run_info("nope")
        with pytest.raises(RunNotFoundError):
            list(store.read("nope"))
        assert store.runs() == []


def _commit(index: int) -> dict[str, Any]:
    return {"commit": index, "stage": "s", "stage_run": f"s#{index}", "writes": 0}


def hashed_batch(
    run_id: str,
    events: list[tuple[str, Any]],
    *,
    after: list[StoredEvent] | None = None,
    first_seq: int = 0,
) -> list[StoredEvent]:
    """A hashed batch of ``run_id``, not appended (continuing ``after``, if given)."""
    seq, head = (after[-1].seq + 1, after[-1].chain_hash) if after else (first_seq, GENESIS)
    batch = []
    for offset, (type_, body) in enumerate(events, start=seq):
        data = canon(body)
        digest = event_hash(run_id, offset, type_, 1_700_000_000_000, data)
        head = chain_hash(head, digest)
        batch.append(
            StoredEvent(
                run_id=run_id,
                seq=offset,
                type=type_,
                ts=1_700_000_000_000,
                body=data,
                event_hash=digest,
                chain_hash=head,
            )
        )
    return batch


def _fields(event: StoredEvent) -> dict[str, Any]:
    return {name: getattr(event, name) for name in StoredEvent.__slots__}
