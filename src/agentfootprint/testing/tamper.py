"""Helpers for negative tests: damage a recorded SQLite log the way a forger would.

``tampering(path)`` opens the file with the append-only triggers dropped;
``rewrite(conn, run_id, rows)`` replaces a run's rows and recomputes every event hash
and chain link (what someone who can recompute hashes does), so that only the checks
that bind content (receipts, commitments, structure) are left to catch the change;
``verification_error(path, run_id)`` returns the error verification must raise.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from agentfootprint.errors import VerificationError
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.verify.canonical import canon, parse
from agentfootprint.verify.chain import GENESIS, chain_hash, event_hash
from agentfootprint.verify.verifier import Verifier

__all__ = [
    "TRIGGERS",
    "Row",
    "plain",
    "read_rows",
    "reencoded",
    "rewrite",
    "scratch_copy",
    "tampering",
    "verification_error",
]

TRIGGERS = ("events_no_update", "events_no_delete", "runs_no_update", "runs_no_delete")


class Row(NamedTuple):
    """One stored event of a run, as the database holds it."""

    seq: int
    type: str
    ts: int
    body: bytes
    event_hash: bytes
    chain_hash: bytes

    @property
    def value(self) -> Any:
        return parse(self.body)


@contextmanager
def scratch_copy(path: Path, copy: Path) -> Iterator[Path]:
    """``copy``: a copy of the database at ``path``, removed afterwards (with its journals),
    so each tamper starts from the recorded bytes."""
    shutil.copyfile(path, copy)
    try:
        yield copy
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)


def read_rows(conn: sqlite3.Connection, run_id: str) -> list[Row]:
    """A run's rows in seq order, read with a raw connection."""
    return [
        Row(r[0], r[1], r[2], bytes(r[3]), bytes(r[4]), bytes(r[5]))
        for r in conn.execute(
            "SELECT seq, type, ts, body, event_hash, chain_hash FROM events "
            "WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
    ]


@contextmanager
def tampering(path: Path) -> Iterator[sqlite3.Connection]:
    """A raw connection with the append-only triggers dropped; committed on exit."""
    conn = sqlite3.connect(path)
    try:
        for trigger in TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        yield conn
        conn.commit()
    finally:
        conn.close()


def rewrite(conn: sqlite3.Connection, run_id: str, rows: Sequence[tuple[str, int, bytes]]) -> None:
    """Replace a run's rows by ``(type, ts, body)`` rows, renumbered and re-chained."""
    conn.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
    head = GENESIS
    for seq, (type_, ts, body) in enumerate(rows):
        digest = event_hash(run_id, seq, type_, ts, body)
        head = chain_hash(head, digest)
        conn.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
            (run_id, seq, type_, ts, body, digest, head),
        )


def plain(rows: Sequence[Row]) -> list[tuple[str, int, bytes]]:
    """Rows as the ``(type, ts, body)`` triples :func:`rewrite` takes."""
    return [(r.type, r.ts, r.body) for r in rows]


def reencoded(row: Row, change: Callable[[dict[str, Any]], None]) -> tuple[str, int, bytes]:
    """``row`` with its body changed by ``change`` and canonicalised again."""
    body = row.value
    change(body)
    return (row.type, row.ts, canon(body))


def verification_error(path: Path, run_id: str) -> VerificationError:
    """Verify ``run_id`` in the database at ``path``, expecting it to fail; the error."""
    store = SqliteStore(path)
    try:
        with pytest.raises(VerificationError) as info:
            Verifier(store).verify(run_id)
    finally:
        store.close()
    error = info.value
    assert error.run_id == run_id
    return error
