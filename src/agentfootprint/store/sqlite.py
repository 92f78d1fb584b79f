"""SQLite backend through sqlite-utils: WAL, ``BEGIN IMMEDIATE``, append-only triggers.

One transaction per appended batch (a stage commit), plain ``INSERT`` against
``PRIMARY KEY (run_id, seq)``: two writers racing for the same position cannot
both win, and the loser's whole batch rolls back. Several processes may write
to one database at once (WAL plus a busy timeout). Driver errors are turned
into this library's errors in one place, :func:`translate_errors`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlite_utils

from agentfootprint.errors import (
    AppendOnlyError,
    RunNotFoundError,
    StoreBusyError,
    StoreConflictError,
    StoreError,
)
from agentfootprint.store.base import (
    EventStore,
    IndexEntry,
    RunInfo,
    StoredEvent,
    run_index_from_open,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteStore", "atomic", "translate_errors"]

_APPEND_ONLY = "agentfootprint log is append-only"

#: (version, name, statements). Applied in order, each recorded in ``schema_version``.
MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (
        1,
        "events and runs, append-only",
        (
            """CREATE TABLE events (
                run_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                type TEXT NOT NULL,
                ts INTEGER NOT NULL,
                body BLOB NOT NULL,
                event_hash BLOB NOT NULL,
                chain_hash BLOB NOT NULL,
                PRIMARY KEY (run_id, seq)
            )""",
            """CREATE TABLE runs (
                run_id TEXT PRIMARY KEY,
                conversation_id TEXT NOT NULL,
                parent_run_id TEXT,
                opened_at INTEGER NOT NULL
            )""",
            "CREATE INDEX runs_by_conversation ON runs (conversation_id, opened_at)",
            *(
                f"""CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table}
                    BEGIN SELECT RAISE(ABORT, '{_APPEND_ONLY}'); END"""
                for table in ("events", "runs")
                for verb in ("UPDATE", "DELETE")
            ),
        ),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


@contextlib.contextmanager
def translate_errors(context: str) -> Iterator[None]:
    """Turn sqlite3 errors into this library's store errors (the one place that does)."""
    try:
        yield
    except sqlite3.Error as exc:
        message = str(exc)
        if _APPEND_ONLY in message:
            raise AppendOnlyError(f"{context}: {message}") from exc
        if isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in message:
            raise StoreConflictError(
                f"{context}: position already taken by another writer ({message})"
            ) from exc
        if "locked" in message or "busy" in message:
            raise StoreBusyError(f"{context}: database stayed locked ({message})") from exc
        raise StoreError(f"{context}: SQLite error: {message}") from exc


@contextlib.contextmanager
def atomic(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; any exception rolls the whole batch back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class SqliteStore(EventStore):
    """A log in one SQLite file.

    ``synchronous`` is SQLite's setting: ``"NORMAL"`` (default) survives a killed
    process with no committed stage lost; ``"FULL"`` also survives power loss at
    the price of one fsync per stage commit.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: str = "NORMAL", timeout: float = 30.0
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise StoreError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        self.path = Path(path)
        self._lock = threading.RLock()
        with translate_errors(f"opening {self.path}"):
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=timeout, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
            self.db = sqlite_utils.Database(self._conn)
            self._migrate()

    # -- schema -------------------------------------------------------------------------
    def schema_version(self) -> int:
        """The highest migration applied to this database (0 for a new file)."""
        if "schema_version" not in self.db.table_names():
            return 0
        row = self._conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    def _migrate(self) -> None:
        with atomic(self._conn):
            if "schema_version" not in self.db.table_names():
                self.db.table("schema_version").create(
                    {"version": int, "name": str, "applied_at": int}, pk="version"
                )
            current = self.schema_version()
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {current}, newer than this library's "
                    f"{SCHEMA_VERSION}: upgrade agentfootprint to read it"
                )
            for version, name, statements in MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements:
                    self._conn.execute(statement)
                self.db.table("schema_version").insert(
                    {"version": version, "name": name, "applied_at": int(time.time() * 1000)}
                )

    # -- contract -----------------------------------------------------------------------
    def append(self, events: Sequence[StoredEvent]) -> None:
        self.check_batch(events)
        first = events[0]
        rows = [(e.run_id, e.seq, e.type, e.ts, e.body, e.event_hash, e.chain_hash) for e in events]
        context = f"run {first.run_id} append at seq {first.seq}"
        with self._lock, translate_errors(context), atomic(self._conn) as conn:
            (count,) = conn.execute(
                "SELECT COALESCE(MAX(seq), -1) + 1 FROM events WHERE run_id = ?", (first.run_id,)
            ).fetchone()
            if count != first.seq:
                raise StoreConflictError(
                    f"run {first.run_id}: append at seq {first.seq} but the run has {count} events"
                )
            if first.seq == 0:
                conversation, parent = run_index_from_open(first)
                conn.execute(
                    "INSERT INTO runs VALUES (?, ?, ?, ?)",
                    (first.run_id, conversation, parent, first.ts),
                )
            conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        with self._lock, translate_errors(f"reading run {run_id}"):
            rows = self._conn.execute(
                "SELECT run_id, seq, type, ts, body, event_hash, chain_hash FROM events "
                "WHERE run_id = ? AND seq >= ? ORDER BY seq",
                (run_id, start),
            ).fetchall()
            if not rows and start == 0:
                self.run_info(run_id)  # raises RunNotFoundError
        return (
            StoredEvent(
                run_id=r[0],
                seq=r[1],
                type=r[2],
                ts=r[3],
                body=bytes(r[4]),
                event_hash=bytes(r[5]),
                chain_hash=bytes(r[6]),
            )
            for r in rows
        )

    _INFO = (
        "SELECT r.run_id, r.conversation_id, r.parent_run_id, r.opened_at, "
        "e.seq + 1, e.type, e.chain_hash FROM runs r JOIN events e "
        "ON e.run_id = r.run_id AND e.seq = "
        "(SELECT MAX(seq) FROM events WHERE run_id = r.run_id)"
    )

    @staticmethod
    def _info(row: Any) -> RunInfo:
        return RunInfo(
            run_id=str(row[0]),
            conversation_id=str(row[1]),
            parent_run_id=None if row[2] is None else str(row[2]),
            opened_at=int(row[3]),
            events=int(row[4]),
            last_type=str(row[5]),
            head=bytes(row[6]),
        )

    def run_info(self, run_id: str) -> RunInfo:
        with self._lock, translate_errors(f"reading run {run_id}"):
            row = self._conn.execute(self._INFO + " WHERE r.run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
        return self._info(row)

    def run_ids(self) -> list[str]:
        with self._lock, translate_errors("listing runs from the events"):
            rows = self._conn.execute(
                "SELECT run_id FROM events GROUP BY run_id ORDER BY MIN(rowid)"
            ).fetchall()
        return [row[0] for row in rows]

    def index_entries(self) -> list[IndexEntry]:
        with self._lock, translate_errors("reading the run index"):
            rows = self._conn.execute(
                "SELECT run_id, conversation_id, parent_run_id, opened_at FROM runs ORDER BY rowid"
            ).fetchall()
        return [
            IndexEntry(run_id=r[0], conversation_id=r[1], parent_run_id=r[2], opened_at=r[3])
            for r in rows
        ]

    def runs(self) -> list[RunInfo]:
        with self._lock, translate_errors("listing runs"):
            rows = self._conn.execute(self._INFO + " ORDER BY r.rowid").fetchall()
        return [self._info(row) for row in rows]

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()
