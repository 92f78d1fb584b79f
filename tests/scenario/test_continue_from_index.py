"""The run index is not evidence: continuing, reading and replaying take their facts from the
verified events (issue 8, class 1).

Each test records a conversation in a real SQLite file, damages the ``runs`` table of a
copy through a raw connection (the append-only triggers dropped, as a forger would), and
then continues, reads or replays by run id. The outcome may only be one of two: refused with
``ContinuationError``, or done correctly, with a child that verifies (the pytest plugin
verifies every run closed; the tests verify again, explicitly, after reopening the file).
With the events intact, damage to the index alone changes nothing: it is always done.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.store.base import StoredEvent
from agentfootprint.testing.tamper import plain, read_rows, reencoded, rewrite, tampering

Tamper = Callable[[sqlite3.Connection, str], None]


def recorded(tmp_path: Path) -> tuple[Path, af.RunResult, af.RunResult]:
    """A two-turn conversation (root, child) in ``tmp_path/runs.db``, the file closed."""
    db = tmp_path / "runs.db"
    with af.Agent(provider=af.MockProvider(["one", "two"]), model="m", store=db) as agent:
        root = agent.run_sync("first")
        child = agent.run_sync("second", continue_from=root)
    return db, root, child


def set_conversation(conn: sqlite3.Connection, run_id: str) -> None:
    conn.execute("UPDATE runs SET conversation_id = 'forged' WHERE run_id = ?", (run_id,))


def drop_row(conn: sqlite3.Connection, run_id: str) -> None:
    conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))


def set_parent(conn: sqlite3.Connection, run_id: str) -> None:
    conn.execute("UPDATE runs SET parent_run_id = 'no-such-run' WHERE run_id = ?", (run_id,))


def point_at_itself(conn: sqlite3.Connection, run_id: str) -> None:
    conn.execute("UPDATE runs SET parent_run_id = run_id WHERE run_id = ?", (run_id,))


def set_opened_at(conn: sqlite3.Connection, run_id: str) -> None:
    conn.execute("UPDATE runs SET opened_at = 0 WHERE run_id = ?", (run_id,))


def empty_index(conn: sqlite3.Connection, run_id: str) -> None:
    conn.execute("DELETE FROM runs")


def text_values(conn: sqlite3.Connection, run_id: str) -> None:
    conn.execute(
        "UPDATE runs SET conversation_id = 42, parent_run_id = x'00', opened_at = 'soon' "
        "WHERE run_id = ?",
        (run_id,),
    )


TAMPERS: dict[str, Tamper] = {
    "conversation_id changed": set_conversation,
    "row deleted": drop_row,
    "parent_run_id names no run": set_parent,
    "parent_run_id names itself": point_at_itself,
    "opened_at changed": set_opened_at,
    "whole index emptied": empty_index,
    "values of other types": text_values,
}


def continued(db: Path, parent: str) -> af.RunResult | None:
    """Continue ``parent`` by id; None when refused (the only refusal allowed)."""
    with af.Agent(provider=af.MockProvider(["three"]), model="m", store=db) as agent:
        try:
            return agent.run_sync("third", continue_from=parent)
        except af.ContinuationError:
            return None


def verified(db: Path, run_id: str) -> af.RunVerification:
    with af.SqliteStore(db, readonly=True) as store:
        return af.Verifier(store).verify(run_id)


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
@pytest.mark.parametrize("which", ["parent", "grandparent"])
def test_continuing_a_run_whose_index_row_is_damaged(
    tmp_path: Path, tamper: str, which: str
) -> None:
    db, root, child = recorded(tmp_path)
    with tampering(db) as conn:
        TAMPERS[tamper](conn, child.run_id if which == "parent" else root.run_id)
    result = continued(db, child.run_id)
    # the events are intact, so continuing is correct, and it is done (refusing with
    # ContinuationError would be the only other allowed outcome)
    assert result is not None
    assert result.conversation_id == root.conversation_id  # from run.open, not the index
    assert result.parent_run_id == child.run_id
    check = verified(db, result.run_id)
    assert check.conversation_id == root.conversation_id
    assert check.ancestors == (root.run_id, child.run_id)
    assert len(result.state["history"]) == 6  # the verified state, both turns before it


def test_a_forged_conversation_id_is_not_carried_over(tmp_path: Path) -> None:
    """The reproduction of the issue: a changed ``runs.conversation_id`` used to be copied
    into the child's run.open, recording a run that then failed verification."""
    db, root, child = recorded(tmp_path)
    with tampering(db) as conn:
        set_conversation(conn, child.run_id)
    result = continued(db, child.run_id)
    assert result is not None  # the events are intact: continuing is correct, so it is done
    assert result.conversation_id == root.conversation_id != "forged"
    assert verified(db, result.run_id).outcome is af.Outcome.VALID_UNSIGNED


def test_an_index_row_with_no_events_is_refused(tmp_path: Path) -> None:
    db, root, _ = recorded(tmp_path)
    with tampering(db) as conn:
        conn.execute("INSERT INTO runs VALUES ('phantom', ?, NULL, 1)", (root.conversation_id,))
    with (
        af.Agent(provider=af.MockProvider(["x"]), model="m", store=db) as agent,
        pytest.raises(af.ContinuationError, match="phantom"),
    ):
        agent.run_sync("again", continue_from="phantom")


def test_a_run_missing_from_the_index_is_found_from_its_events(tmp_path: Path) -> None:
    db, root, child = recorded(tmp_path)
    with tampering(db) as conn:
        empty_index(conn, child.run_id)
    result = continued(db, child.run_id)
    assert result is not None
    assert verified(db, result.run_id).ancestors == (root.run_id, child.run_id)


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_reads_take_nothing_from_the_index(tmp_path: Path, tamper: str) -> None:
    db, root, child = recorded(tmp_path)
    with af.SqliteStore(db, readonly=True) as store:
        expected = (
            af.state_at(store, child.run_id, -1),
            af.served_at(store, child.run_id, 0),
            af.receipt_at(store, child.run_id, 0),
        )
    with tampering(db) as conn:
        TAMPERS[tamper](conn, root.run_id)
        TAMPERS[tamper](conn, child.run_id)
    with af.SqliteStore(db, readonly=True) as store:
        for source in (db, store):
            found = (
                af.state_at(source, child.run_id, -1),
                af.served_at(source, child.run_id, 0),
                af.receipt_at(source, child.run_id, 0),
            )
            assert found == expected


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_replay_copies_the_verified_ancestry(tmp_path: Path, tamper: str) -> None:
    """Replaying a continued run into another store copies its parent chain as the events
    name it (never as the index does), and the replay matches."""
    db, root, child = recorded(tmp_path)
    with tampering(db) as conn:
        TAMPERS[tamper](conn, child.run_id)
        TAMPERS[tamper](conn, root.run_id)
    target = af.MemoryStore()
    with af.Agent(provider=af.MockProvider(["unused"]), model="m", store=target) as agent:
        replayed = af.replay_sync(agent, db, child.run_id)
    assert replayed.calls_checked == 1
    assert set(target.run_ids()) == {root.run_id, replayed.result.run_id}
    assert af.same_recording(db, child.run_id, target, replayed.result.run_id)


def test_a_replay_never_continues_another_run_of_the_same_id(tmp_path: Path) -> None:
    """The agent's store holds a run with the parent's id but other content (re-chained, so
    it verifies on its own): the replay is refused, not folded onto it."""
    db, root, child = recorded(tmp_path)
    forged = tmp_path / "target.db"
    with af.SqliteStore(db, readonly=True) as original:
        target = af.SqliteStore(forged)
        target.append([StoredEvent.copy_of(row) for row in original.read(root.run_id)])
        target.close()
    with tampering(forged) as conn:
        rows = read_rows(conn, root.run_id)

        def other_answer(body: dict[str, Any]) -> None:
            if body.get("path") == "final_answer":
                body["value"] = "a different answer"

        rewrite(conn, root.run_id, [reencoded(r, other_answer) for r in rows])
        assert plain(read_rows(conn, root.run_id)) != plain(rows)
    assert verified(forged, root.run_id).outcome is af.Outcome.VALID_UNSIGNED
    with af.Agent(provider=af.MockProvider(["unused"]), model="m", store=forged) as agent:
        with pytest.raises(af.ContinuationError, match="another run of that id"):
            af.replay_sync(agent, db, child.run_id)
        assert agent.store.run_ids() == [root.run_id]  # nothing recorded
