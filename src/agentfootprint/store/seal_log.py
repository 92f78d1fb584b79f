"""The seal log: one Merkle leaf per sealed run, in the order the store committed the seals.

A sealed run's close and seal reach the store in one transaction (docs/log-format.md section
5.8); the store gives the run the next leaf index in that same transaction, so the order is
defined however many writers share the database (SQLite serialises them with ``BEGIN
IMMEDIATE``). The index is the only thing stored: the leaf itself (run id, event count, head,
seal digest) is recomputed from the run's rows by whoever verifies, so the table is an order,
never evidence of a run's content. docs/log-format.md section 4.1 and docs/merkle.md
section 2 are the normative text.

In SQLite the table comes with migration 3, applied by the first sealed append to a file of
either layout (files without sealed runs are never migrated); reading never creates it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

from agentfootprint.errors import StoreError
from agentfootprint.store.base import StoredEvent

__all__ = ["SEAL_LOG_MIGRATION", "read_seal_log", "record_seal", "sealed_in"]

_APPEND_ONLY = "agentfootprint log is append-only"
_TABLE: Final = "seal_log"

#: (version, name, statements) of the migration that adds the seal log (both layouts)
SEAL_LOG_MIGRATION: Final[tuple[int, str, tuple[str, ...]]] = (
    3,
    "seal log: one Merkle leaf per sealed run, in seal order",
    (
        """CREATE TABLE seal_log (
            leaf INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE
        )""",
        *(
            f"""CREATE TRIGGER seal_log_no_{verb.lower()} BEFORE {verb} ON seal_log
                BEGIN SELECT RAISE(ABORT, '{_APPEND_ONLY}'); END"""
            for verb in ("UPDATE", "DELETE")
        ),
    ),
)


def sealed_in(events: Sequence[StoredEvent]) -> list[str]:
    """The runs a batch seals: those whose ``run.seal`` row it holds."""
    return [event.run_id for event in events if event.type == "run.seal"]


def _has_table(conn: sqlite3.Connection) -> bool:
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_TABLE,)
    ).fetchone()
    return found is not None


def record_seal(conn: sqlite3.Connection, run_id: str, applied_at: int) -> int:
    """Give ``run_id`` the next leaf index, inside the caller's transaction (creating the
    table first, as migration 3, when the file has none); returns the index."""
    if not _has_table(conn):
        version, name, statements = SEAL_LOG_MIGRATION
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (version, name, applied_at))
    (leaf,) = conn.execute(f"SELECT COALESCE(MAX(leaf), -1) + 1 FROM {_TABLE}").fetchone()
    try:
        conn.execute(f"INSERT INTO {_TABLE} (leaf, run_id) VALUES (?, ?)", (leaf, run_id))
    except sqlite3.IntegrityError as exc:
        raise StoreError(f"run {run_id} is sealed already (it has a leaf in the seal log)") from exc
    return int(leaf)


def read_seal_log(conn: sqlite3.Connection) -> list[tuple[object, object]]:
    """``(leaf, run_id)`` of the seal log in leaf order, as stored (a crafted file may hold
    other types or gaps in the index: the verifier reports them); empty without the table."""
    if not _has_table(conn):
        return []
    return [
        (leaf, run_id)
        for leaf, run_id in conn.execute(f"SELECT leaf, run_id FROM {_TABLE} ORDER BY leaf")
    ]
