"""SQLite backend through sqlite-utils: WAL, ``BEGIN IMMEDIATE``, append-only triggers.

One transaction per appended batch (a flush), plain ``INSERT`` against the row's
position (schema 1: ``PRIMARY KEY (run_id, seq)``; schema 2: ``pos = run_key * 2**32 +
seq``): two writers racing for the same position cannot both win, and the loser's whole
batch rolls back. A file keeps the schema it was created with (schema 1 files are never
migrated); schema 2 (docs/log-format.md section 4) stores no value a reader can recompute
and rebuilds every row byte for byte. Several processes may write
to one database at once (WAL plus a busy timeout). Driver errors are turned
into this library's errors in one place, :func:`~agentfootprint.store.sqlite_files.translate_errors`
(:mod:`~agentfootprint.store.sqlite_files` holds what a log shares with a vault: telling a
file's kind, opening it, transactions; :mod:`~agentfootprint.store.sqlite_layout` the schemas
and schema 2's row codec).

One path each way: every batch is appended by :meth:`SqliteStore.append` (which, in schema 2,
recomputes each dropped hash to refuse rows that would not read back as given), and every
read of a run's rows is :meth:`SqliteStore.stored_rows`, of which ``read`` and ``chain_rows``
are two views.

Opening is fail-closed: a file is only ever written to once it is known to be a
log (or new, or empty), and a read-only store never writes at all, not even the
WAL switch or a ``-shm`` file beside a log no writer holds (it opens the file
``immutable``), so evidence on write-once storage can be read and verified.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlite_utils

from agentfootprint.errors import (
    NotALogError,
    RunNotFoundError,
    StoreConflictError,
    StoreError,
    UsageError,
)
from agentfootprint.logformat.chain import CLOSING_TYPES, GENESIS
from agentfootprint.store.base import (
    EventStore,
    IndexEntry,
    RunInfo,
    StoredEvent,
    run_index_from_open,
)
from agentfootprint.store.seal_log import read_seal_log, record_seal, sealed_in
from agentfootprint.store.sqlite_files import (
    DURABILITY,
    SQLITE_HEADER,
    DatabaseKind,
    atomic,
    check_newer,
    check_writable,
    connect_readonly,
    file_path,
    printable,
    probe_file,
    schema_version_of,
    switch_to_wal,
    translate_errors,
    writer_files,
)
from agentfootprint.store.sqlite_layout import (
    _SEQ_BITS,
    _SEQ_MASK,
    _TYPE_NAMES,
    MIGRATIONS,
    NEW_FILE_SCHEMA,
    SCHEMA_V2,
    SCHEMA_VERSION,
    TYPE_CODES,
    _bytes_or_as_stored,
    _checked_links,
    _compact_commit,
    _decoded,
    _orphan_key,
    _orphan_name,
    _whole,
)

# the file-level helpers are imported from here too (the vault, the CLI, tests)
__all__ = [
    "DURABILITY",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_HEADER",
    "DatabaseKind",
    "SqliteStore",
    "atomic",
    "check_writable",
    "connect_readonly",
    "file_path",
    "probe_file",
    "translate_errors",
    "writer_files",
]


def _undecodable_text(data: bytes) -> str:
    """TEXT as Python reads it when it is not UTF-8: its bytes kept as lone surrogates."""
    return data.decode("utf-8", "surrogateescape")


def _validated(path: Any, readonly: Any, durability: Any, timeout: Any) -> Path:
    checked = file_path(path, who="SqliteStore", option="path")
    if type(readonly) is not bool:
        raise UsageError(
            f"SqliteStore: readonly must be True or False, not {readonly!r}", option="readonly"
        )
    if not isinstance(durability, str) or durability not in DURABILITY:
        raise UsageError(
            f"SqliteStore: durability must be 'full' or 'normal', not {durability!r}",
            option="durability",
        )
    if type(timeout) not in (int, float) or not math.isfinite(timeout) or timeout <= 0:
        raise UsageError(
            f"SqliteStore: timeout must be a positive number of seconds, not {timeout!r}",
            option="timeout",
        )
    return checked


class SqliteStore(EventStore):
    """A log in one SQLite file.

    Writing (default): a missing or empty file becomes a log; an existing file that is
    not a log is refused with :class:`NotALogError` (saying what it is) and left as it
    was. ``durability``: ``"full"`` (the default, for an audit log) makes every flush
    survive power loss (SQLite ``synchronous=FULL``: an fsync per transaction); ``"normal"``
    survives a killed process but may lose the last flushes on power loss
    (``synchronous=NORMAL`` in WAL mode). A run flushes before each model call and tool run
    and at its close, so the cost is per flush, not per stage (docs/stores.md has the
    measured figures). ``timeout`` is how long (seconds) to wait for another writer's lock.

    ``readonly=True``: reads only; never creates, migrates or changes the file, creates
    nothing beside a log no writer holds, works on read-only folders and mounts;
    ``append`` raises :class:`StoreError`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        durability: str = "full",
        timeout: float = 30.0,
    ) -> None:
        self.path = _validated(path, readonly, durability, timeout)
        self.readonly = readonly
        self.durability = durability
        #: the next seq of each run this store appended to (kept in memory: an append checks
        #: it instead of asking the database for the run's length; another writer appending
        #: to the same run is caught by the primary key, as a conflict)
        self._next_seq: dict[str, int] = {}
        #: schema 2: each run's key and head after this store's last append to it
        self._heads: dict[str, tuple[int, bytes]] = {}
        self._layout = 1
        self._lock = threading.RLock()
        self._immutable = False
        self._timeout = float(timeout)
        if readonly:
            self._conn = self._open_readonly(float(timeout))
        else:
            self._conn = self._open_for_writing(DURABILITY[durability], float(timeout))
        self.db = sqlite_utils.Database(self._conn)

    def _open_readonly(self, timeout: float) -> sqlite3.Connection:
        what = "an agentfootprint log"
        live = writer_files(self.path)
        #: opened ``immutable`` (no writer then): reopened ``mode=ro`` once one appears
        self._immutable = not live
        conn = connect_readonly(
            self.path, what=what, wrong_kind=NotALogError, timeout=timeout, live=live
        )
        try:
            with translate_errors(f"opening {self.path}", path=self.path):
                kind = DatabaseKind.of(conn)
                if not kind.is_log:
                    raise NotALogError(
                        f"{self.path} is {kind.describe()}, not {what}", path=str(self.path)
                    )
                self._layout = self._read_layout(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_for_writing(self, synchronous: str, timeout: float) -> sqlite3.Connection:
        path = self.path
        if path.exists() or path.is_symlink():
            size, header = probe_file(path)
            if size > 0 and header != SQLITE_HEADER:
                raise NotALogError(
                    f"{path} is not an SQLite database, so not an agentfootprint log; it was "
                    "left unchanged: name a new file or an existing log",
                    path=str(path),
                )
        check_writable(path, what="log")
        context = f"opening {path}"
        with translate_errors(context, path=path):
            conn = sqlite3.connect(
                path, isolation_level=None, timeout=timeout, check_same_thread=False
            )
        try:
            with translate_errors(context, path=path):
                kind = DatabaseKind.of(conn)  # reads only: nothing is written before this
                if not (kind.is_log or kind.is_empty):
                    raise NotALogError(
                        f"{path} is {kind.describe()}, not an agentfootprint log; it was left "
                        "unchanged: name a new file or an existing log",
                        path=str(path),
                    )
                if kind.is_log:
                    check_newer(schema_version_of(conn, path), path)
                switch_to_wal(conn, timeout)
                conn.execute(f"PRAGMA synchronous={synchronous}")
                self._migrate(conn)
                self._layout = self._read_layout(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    # -- schema -------------------------------------------------------------------------
    def schema_version(self) -> int:
        """The highest migration applied to this database (0 for a new file)."""
        with self._lock, translate_errors(f"reading {self.path}", path=self.path):
            self._fresh()
            return schema_version_of(self._conn, self.path)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        with atomic(conn):
            current = schema_version_of(conn, self.path)  # again: another writer may have won
            check_newer(current, self.path)
            if current == 0:
                conn.execute(
                    "CREATE TABLE schema_version "
                    "(version INTEGER PRIMARY KEY, name TEXT, applied_at INTEGER)"
                )
                if NEW_FILE_SCHEMA == 2:  # a new file gets the newest layout whole
                    self._apply(conn, *SCHEMA_V2)
                    return
            if current >= 2:
                return  # schema 2 has no later migration yet
            for version, name, statements in MIGRATIONS:
                if version > current:
                    self._apply(conn, version, name, statements)

    @staticmethod
    def _apply(
        conn: sqlite3.Connection, version: int, name: str, statements: tuple[str, ...]
    ) -> None:
        for statement in statements:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_version VALUES (?, ?, ?)",
            (version, name, int(time.time() * 1000)),
        )

    def _read_layout(self, conn: sqlite3.Connection) -> int:
        """1 or 2, from the schema version and the tables (which must agree)."""
        version = schema_version_of(conn, self.path)
        check_newer(version, self.path)
        layout = DatabaseKind.of(conn).layout
        # migration 2 is the leaner layout; 3 (the seal log) applies to either layout
        with_v2 = conn.execute("SELECT 1 FROM schema_version WHERE version = 2").fetchone()
        if layout != (2 if with_v2 else 1):
            raise NotALogError(
                f"{self.path}: schema version {version} but the tables of schema {layout}: "
                "not an agentfootprint log (or a damaged one)",
                path=str(self.path),
            )
        return layout

    @property
    def layout(self) -> int:
        """The storage schema this file's rows are kept in (1 or 2)."""
        return self._layout

    def _fresh(self) -> None:
        """A file opened ``immutable`` (no writer then) is read under the promise that it does
        not change: once a writer's files appear beside it, the connection is opened again
        ``mode=ro`` (which follows the writer's commits); called, under the lock, by every
        read (inside a :meth:`snapshot`, the snapshot's connection is kept: it was checked as
        the snapshot began). Nothing is created: the writer made those files."""
        if not self._immutable or self._conn.in_transaction or not writer_files(self.path):
            return
        old = self._conn
        self._conn = self._open_readonly(self._timeout)
        self.db = sqlite_utils.Database(self._conn)
        with contextlib.suppress(sqlite3.Error):
            old.close()

    # -- contract -----------------------------------------------------------------------
    def _writable(self) -> None:
        if self.readonly:
            raise StoreError(
                f"{self.path} was opened read-only: nothing can be appended (open it without "
                "readonly=True to record)"
            )

    def append(self, events: Sequence[StoredEvent]) -> None:
        """One batch in one ``BEGIN IMMEDIATE`` transaction (:meth:`append_runs` of it).
        Schema 2 keeps no event hash and few chain hashes, so it recomputes each row's and
        refuses a batch whose dropped values do not follow from its rows (whoever hashed
        them: the run writer or an import)."""
        first = events[0] if events else None
        where = f"run {first.run_id} append at seq {first.seq}" if first else "append"
        self._append_batches([events], where)

    def append_runs(self, batches: Iterable[Sequence[StoredEvent]]) -> None:
        """Every batch in one ``BEGIN IMMEDIATE`` transaction: all kept, or none."""
        self._append_batches(batches, f"atomic append to {self.path}")

    def _append_batches(self, batches: Iterable[Sequence[StoredEvent]], context: str) -> None:
        """The one append path: each batch checked and inserted after the ones before it,
        all in one transaction; what this store remembers of each run only once it
        committed."""
        self._writable()
        written: list[Sequence[StoredEvent]] = []
        pending: dict[str, tuple[int, bytes]] = {}
        with (
            self._lock,
            translate_errors(context, path=self.path),
            atomic(self._conn) as conn,
        ):
            for events in batches:
                self.check_batch(events)
                self._insert(conn, events, written, pending=pending)
                self._seal(conn, events)
                written.append(events)
        for events in written:
            self._appended(events, pending)

    @staticmethod
    def _seal(conn: sqlite3.Connection, events: Sequence[StoredEvent]) -> None:
        """The runs this batch seals get their leaves, in this transaction (section 4.1)."""
        for run_id in sealed_in(events):
            record_seal(conn, run_id, int(time.time() * 1000))

    def seal_log(self) -> list[tuple[object, object]]:
        with self._lock, translate_errors("reading the seal log", path=self.path):
            self._fresh()
            return read_seal_log(self._conn)

    def _appended(
        self, events: Sequence[StoredEvent], pending: dict[str, tuple[int, bytes]]
    ) -> None:
        """After the transaction committed: the run's next seq (forgotten once it closed),
        and in schema 2 its key and head."""
        last = events[-1]
        if last.type in CLOSING_TYPES:
            self._next_seq.pop(last.run_id, None)
            self._heads.pop(last.run_id, None)
        else:
            self._next_seq[last.run_id] = last.seq + 1
            if last.run_id in pending:
                self._heads[last.run_id] = pending[last.run_id]

    def _insert(
        self,
        conn: sqlite3.Connection,
        events: Sequence[StoredEvent],
        earlier: Sequence[Sequence[StoredEvent]] = (),
        *,
        pending: dict[str, tuple[int, bytes]],
    ) -> None:
        if self._layout == 2:
            self._insert_v2(conn, events, pending)
            return
        first = events[0]
        count = self._next_seq.get(first.run_id)
        if count is None or any(b[0].run_id == first.run_id for b in earlier):
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
        conn.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(e.run_id, e.seq, e.type, e.ts, e.body, e.event_hash, e.chain_hash) for e in events],
        )

    # -- schema 2 -----------------------------------------------------------------------
    def _tail_v2(
        self, conn: sqlite3.Connection, run_id: str, pending: dict[str, tuple[int, bytes]]
    ) -> tuple[int | None, int, bytes | None]:
        """``(run_key, next seq, head)`` of a run as the database holds it now (in this
        transaction); no key: the run is not there."""
        if run_id in pending:  # an earlier batch of this transaction
            key, head = pending[run_id]
        elif run_id in self._heads and run_id in self._next_seq:
            key, head = self._heads[run_id]
            return key, self._next_seq[run_id], head
        else:
            found = conn.execute("SELECT run_key FROM run_keys WHERE run_id = ?", (run_id,))
            row = found.fetchone()
            if row is None:
                return None, 0, None
            key, head = int(row[0]), b""
        base = key << _SEQ_BITS
        last = conn.execute(
            "SELECT pos, head FROM rows WHERE pos BETWEEN ? AND ? ORDER BY pos DESC LIMIT 1",
            (base, base | _SEQ_MASK),
        ).fetchone()
        if last is None:
            return key, 0, None
        stored = _bytes_or_as_stored(last[1])
        return key, int(last[0]) - base + 1, stored if isinstance(stored, bytes) else None

    def _insert_v2(
        self,
        conn: sqlite3.Connection,
        events: Sequence[StoredEvent],
        pending: dict[str, tuple[int, bytes]],
    ) -> None:
        first = events[0]
        run_id = first.run_id
        key, count, head = self._tail_v2(conn, run_id, pending)
        if count != first.seq:
            raise StoreConflictError(
                f"run {run_id}: append at seq {first.seq} but the run has {count} events"
            )
        if events[-1].seq > _SEQ_MASK:
            raise StoreError(f"run {run_id}: seq {events[-1].seq} is past schema 2's 2**32 - 1")
        if first.seq == 0:
            conversation, parent = run_index_from_open(first)
            cursor = conn.execute("INSERT INTO run_keys (run_id) VALUES (?)", (run_id,))
            key, head = cursor.lastrowid, GENESIS
            conn.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?)", (run_id, conversation, parent, first.ts)
            )
        if key is None or head is None:
            raise StoreError(
                f"run {run_id}: its last stored row holds no chain head: the file is damaged "
                "or was altered (verify it)"
            )
        rows = []
        previous_ts: Any = None
        for offset, event in enumerate(events):
            last = offset == len(events) - 1
            head = _checked_links(event, head, last=last)
            code = TYPE_CODES.get(event.type) if isinstance(event.type, str) else None
            if code is None:
                raise StoreError(f"run {run_id} seq {event.seq}: unknown event type")
            ts = None if offset and event.ts == previous_ts else event.ts
            previous_ts = event.ts
            compact = _compact_commit(event)
            body, stage, number, k = (None, *compact) if compact else (event.body, None, None, None)
            rows.append(
                (
                    (key << _SEQ_BITS) | event.seq,
                    code,
                    ts,
                    body,
                    event.chain_hash if last else None,
                    stage,
                    number,
                    k,
                )
            )
        conn.executemany("INSERT INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        pending[run_id] = (key, events[-1].chain_hash)

    def _key_of(self, run_id: str) -> int | None:
        orphan = _orphan_key(run_id)
        if orphan is not None:
            return orphan
        if not isinstance(run_id, str):
            return None
        try:
            row = self._fetchall("SELECT run_key FROM run_keys WHERE run_id = ?", (run_id,))
        except UnicodeEncodeError:  # a crafted id read with surrogateescape: its bytes
            raw = run_id.encode("utf-8", "surrogateescape")
            row = self._fetchall(
                "SELECT run_key FROM run_keys WHERE CAST(run_id AS BLOB) = ?", (raw,)
            )
        return int(row[0][0]) if row and type(row[0][0]) is int else None

    def _stored_v2(self, run_id: str, start: int) -> tuple[int, list[Any], Any]:
        """A schema-2 run's stored rows from the last head before ``start`` on: the run's
        ``run_key << 32`` (-1 for no key), the rows and the chain hash before the first."""
        key = self._key_of(run_id)
        base = -1 if key is None else key << _SEQ_BITS
        begin, previous = base, GENESIS
        if start > 0 and key is not None:
            # the rows are rebuilt from the last chain head stored before ``start``
            found = self._fetchall(
                "SELECT pos, head FROM rows WHERE pos >= ? AND pos < ? AND head IS NOT NULL "
                "ORDER BY pos DESC LIMIT 1",
                (base, base + min(start, _SEQ_MASK + 1)),
            )
            if found:
                begin, previous = int(found[0][0]) + 1, _bytes_or_as_stored(found[0][1])
        rows = (
            []
            if key is None
            else self._fetchall(
                "SELECT pos, type, ts, body, head, stage, commit_no, stage_k FROM rows "
                "WHERE pos BETWEEN ? AND ? ORDER BY pos",
                (begin, base | _SEQ_MASK),
            )
        )
        return base, rows, previous

    def _fetchall(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """Rows as stored. A TEXT value that is not UTF-8 (a crafted file) makes the driver
        refuse the whole query; it is read again with such text decoded with
        ``surrogateescape``, so the value reaches the verifier (which fails that row, code
        ``rows``) instead of failing every run of the file."""
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:
            if "decode to UTF-8" not in str(exc):
                raise
        self._conn.text_factory = _undecodable_text
        try:
            return self._conn.execute(sql, args).fetchall()
        finally:
            self._conn.text_factory = str

    _ROWS_V1 = (
        "SELECT run_id, seq, type, ts, body, event_hash, chain_hash FROM events "
        "WHERE run_id = ? AND seq >= ? ORDER BY seq"
    )

    def stored_rows(self, run_id: str, start: int = 0) -> list[tuple[Any, ...]]:
        """The one read of a run's rows: :meth:`read` and :meth:`chain_rows` are both made
        from it, so a subclass that observes or alters what every reader gets (a test that
        counts reads or injects a fault) overrides this method alone.

        The rows from seq ``start`` on, each the 7 values of
        :class:`~agentfootprint.logformat.chain.RawRow` as the file holds them: a BLOB as
        ``bytes``, any other value (a TEXT body, an integer hash of a crafted file) unchanged,
        for the verifier to judge. Schema 2 keeps no event hash and no chain hash between a
        batch's stored heads: those are :data:`~agentfootprint.logformat.chain.DERIVED`,
        computed from the row and the chain hash of the row before (GENESIS before seq 0);
        from a ``start`` past 0, the first row is given whole. :class:`RunNotFoundError` for
        a run with no row (from seq 0).
        """
        with self._lock, translate_errors(f"reading run {run_id}", path=self.path):
            self._fresh()
            if self._layout == 2:
                rows = self._rows_v2(run_id, start)
            else:
                rows = self._fetchall(self._ROWS_V1, (run_id, start))
        if not rows and start == 0:
            raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
        return rows

    def _rows_v2(self, run_id: str, start: int) -> list[tuple[Any, ...]]:
        """:meth:`stored_rows` of schema 2: decoded from the last stored head before
        ``start``, the rows before ``start`` hashed only to give the first row whole."""
        base, rows, previous = self._stored_v2(run_id, start)
        decoded = _decoded(run_id, base, rows)
        if start == 0 or not decoded:
            return decoded
        before = start - decoded[0][1]  # rows read from the head before ``start``
        if before >= len(decoded):
            return []
        return [_whole(run_id, decoded[: before + 1], previous)[-1], *decoded[before + 1 :]]

    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        """The rows of :meth:`stored_rows` as :class:`StoredEvent` s, every value given:
        schema 2's event hashes and chain links computed from the rows."""
        rows = self.stored_rows(run_id, start)
        if self._layout == 2:
            rows = _whole(run_id, rows, GENESIS)
        return (
            StoredEvent(
                run_id=r[0],
                seq=r[1],
                type=r[2],
                ts=r[3],
                body=r[4],
                event_hash=r[5],
                chain_hash=r[6],
            )
            for r in rows
        )

    def chain_rows(self, run_id: str) -> list[tuple[Any, ...]]:
        """The run's rows for the verifier's loop
        (:class:`~agentfootprint.logformat.chain.ChainRowSource`): :meth:`stored_rows` as they
        are, so the verifier computes each value schema 2 does not store once, itself."""
        return self.stored_rows(run_id)

    _INFO = (
        "SELECT r.run_id, r.conversation_id, r.parent_run_id, r.opened_at, "
        "e.seq + 1, e.type, e.chain_hash FROM runs r JOIN events e "
        "ON e.run_id = r.run_id AND e.seq = "
        "(SELECT MAX(seq) FROM events WHERE run_id = r.run_id)"
    )
    _INFO_V2 = (
        "SELECT r.run_id, r.conversation_id, r.parent_run_id, r.opened_at, "
        f"(e.pos & {_SEQ_MASK}) + 1, e.type, e.head FROM runs r "
        "JOIN run_keys k ON k.run_id = r.run_id JOIN rows e "
        "ON e.pos = (SELECT MAX(pos) FROM rows WHERE pos BETWEEN "
        f"(k.run_key << {_SEQ_BITS}) AND ((k.run_key << {_SEQ_BITS}) | {_SEQ_MASK}))"
    )

    def _info(self, row: Any) -> RunInfo:
        head = _bytes_or_as_stored(row[6])
        last_type = row[5]
        if self._layout == 2:
            last_type = _TYPE_NAMES.get(last_type) if type(last_type) is int else None
        if (
            not isinstance(row[0], str)
            or not isinstance(row[1], str)
            or not (row[2] is None or isinstance(row[2], str))
            or type(row[3]) is not int
            or type(row[4]) is not int
            or not isinstance(last_type, str)
            or not isinstance(head, bytes)
        ):
            raise StoreError(
                f"{self.path}: the index or last row of run {printable(str(row[0]))} holds "
                "values of the wrong type: the file is damaged or was altered (verify it)"
            )
        return RunInfo(
            run_id=row[0],
            conversation_id=row[1],
            parent_run_id=row[2],
            opened_at=row[3],
            events=row[4],
            last_type=last_type,
            head=head,
        )

    def run_info(self, run_id: str) -> RunInfo:
        with self._lock, translate_errors(f"reading run {run_id}", path=self.path):
            self._fresh()
            info = self._INFO_V2 if self._layout == 2 else self._INFO
            found = self._fetchall(info + " WHERE r.run_id = ?", (run_id,))
            row = found[0] if found else None
        if row is None:
            raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
        return self._info(row)

    def run_ids(self) -> list[str]:
        with self._lock, translate_errors("listing runs from the events", path=self.path):
            self._fresh()
            if self._layout == 2:
                keys = self._fetchall(
                    f"SELECT k.key, r.run_id FROM (SELECT pos >> {_SEQ_BITS} AS key, "
                    f"MIN(pos) AS first FROM rows GROUP BY pos >> {_SEQ_BITS}) k "
                    "LEFT JOIN run_keys r ON r.run_key = k.key ORDER BY k.first"
                )
                return [row[1] if row[1] is not None else _orphan_name(row[0]) for row in keys]
            rows = self._fetchall("SELECT run_id FROM events GROUP BY run_id ORDER BY MIN(rowid)")
        return [row[0] for row in rows]

    def index_entries(self) -> list[IndexEntry]:
        with self._lock, translate_errors("reading the run index", path=self.path):
            self._fresh()
            rows = self._fetchall(
                "SELECT run_id, conversation_id, parent_run_id, opened_at FROM runs ORDER BY rowid"
            )
        return [
            IndexEntry(run_id=r[0], conversation_id=r[1], parent_run_id=r[2], opened_at=r[3])
            for r in rows
        ]

    def runs(self) -> list[RunInfo]:
        with self._lock, translate_errors("listing runs", path=self.path):
            self._fresh()
            info = self._INFO_V2 if self._layout == 2 else self._INFO
            rows = self._fetchall(info + " ORDER BY r.rowid")
        return [self._info(row) for row in rows]

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside the block sees the file as it was when the block's first read
        ran (one read transaction; in WAL mode other processes go on writing meanwhile, and
        this store's own writers in other threads wait for the block to end)."""
        with self._lock:
            if self._conn.in_transaction:  # already inside one
                yield
                return
            with translate_errors(f"reading {self.path}", path=self.path):
                self._fresh()
                self._conn.execute("BEGIN")
            try:
                yield
            finally:
                if self._conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()
