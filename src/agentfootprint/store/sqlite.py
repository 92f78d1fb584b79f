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
file's kind, opening it, transactions; :mod:`~agentfootprint.store.sqlite_layout` the schemas,
schema 2's row codec and one :class:`~agentfootprint.store.sqlite_layout.Layout` per schema).

The schema is looked at once, when the file is opened (:meth:`SqliteStore._read_layout`
picks the file's layout); every insert, row read and run query after that is the layout's.

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
    StoreError,
    UsageError,
)
from agentfootprint.store.base import EventStore, IndexEntry, RunInfo, StoredEvent
from agentfootprint.store.seal_log import read_seal_log, record_seal, sealed_in
from agentfootprint.store.sqlite_appends import SchemaV4Layout
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
    MIGRATIONS,
    NEW_FILE_SCHEMA,
    PAGE_SIZE,
    SCHEMA_V2,
    SCHEMA_V4,
    SCHEMA_VERSION,
    Layout,
    Pending,
    SchemaV1Layout,
    SchemaV2Layout,
    _bytes_or_as_stored,
    fetch_all,
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


#: index rows read at a time by :meth:`SqliteStore.iter_index_entries`
INDEX_PAGE = 1024


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

    #: the file's storage schema, chosen once by :meth:`_read_layout`
    _layout: Layout

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
                elif NEW_FILE_SCHEMA == 4:
                    # before the first page is written (the WAL switch writes it); a file
                    # created empty elsewhere keeps its own page size
                    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
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
                if NEW_FILE_SCHEMA in (2, 4):  # a new file gets a leaner layout whole
                    self._apply(conn, *(SCHEMA_V4 if NEW_FILE_SCHEMA == 4 else SCHEMA_V2))
                    return
            if current >= 2:
                return  # schemas 2 and 4 have no later migration yet (3 is the seal log)
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

    def _read_layout(self, conn: sqlite3.Connection) -> Layout:
        """The one dispatch on the storage schema: the layout the schema versions recorded
        name, which the tables must be (else the file is not a log this library wrote)."""
        version = schema_version_of(conn, self.path)
        check_newer(version, self.path)
        kind = DatabaseKind.of(conn)
        # migrations 2 and 4 are the leaner layouts; 3 (the seal log) applies to any layout
        held = {
            int(row[0])
            for row in conn.execute("SELECT version FROM schema_version WHERE version IN (2, 4)")
        }
        recorded = 4 if 4 in held else 2 if 2 in held else 1
        if recorded in kind.layouts:
            layouts: dict[int, type[Layout]] = {
                1: SchemaV1Layout,
                2: SchemaV2Layout,
                4: SchemaV4Layout,
            }
            return layouts[recorded]()
        raise NotALogError(
            f"{self.path}: schema version {version} but the tables of schema {kind.layout}: "
            "not an agentfootprint log (or a damaged one)",
            path=str(self.path),
        )

    @property
    def layout(self) -> int:
        """The storage schema this file's rows are kept in (1, 2 or 4)."""
        return self._layout.number

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
        pending: Pending = {}
        with (
            self._lock,
            translate_errors(context, path=self.path),
            atomic(self._conn) as conn,
        ):
            for events in batches:
                self.check_batch(events)
                self._layout.insert(conn, events, written, pending)
                self._seal(conn, events)
                written.append(events)
        for events in written:
            self._layout.appended(events, pending)

    @staticmethod
    def _seal(conn: sqlite3.Connection, events: Sequence[StoredEvent]) -> None:
        """The runs this batch seals get their leaves, in this transaction (section 4.1)."""
        for run_id in sealed_in(events):
            record_seal(conn, run_id, int(time.time() * 1000))

    def seal_log(self) -> list[tuple[object, object]]:
        with self._lock, translate_errors("reading the seal log", path=self.path):
            self._fresh()
            return read_seal_log(self._conn)

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
            rows = self._layout.stored_rows(self._conn, run_id, start)
        if not rows and start == 0:
            raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
        return rows

    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        """The rows of :meth:`stored_rows` as :class:`StoredEvent` s, every value given:
        schema 2's event hashes and chain links computed from the rows."""
        rows = self._layout.completed(run_id, self.stored_rows(run_id, start))
        return map(StoredEvent.of_values, rows)

    def chain_rows(self, run_id: str) -> list[tuple[Any, ...]]:
        """The run's rows for the verifier's loop
        (:class:`~agentfootprint.logformat.chain.ChainRowSource`): :meth:`stored_rows` as they
        are, so the verifier computes each value schema 2 does not store once, itself."""
        return self.stored_rows(run_id)

    def _info(self, row: Any) -> RunInfo:
        head = _bytes_or_as_stored(row[6])
        last_type = self._layout.type_name(row[5])
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
            found = fetch_all(
                self._conn, self._layout.info_query + " WHERE r.run_id = ?", (run_id,)
            )
            row = found[0] if found else None
        if row is None:
            raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
        return self._info(row)

    def run_ids(self) -> list[str]:
        with self._lock, translate_errors("listing runs from the events", path=self.path):
            self._fresh()
            return self._layout.run_ids(self._conn)

    def index_entries(self) -> list[IndexEntry]:
        return list(self.iter_index_entries())

    def iter_index_entries(self) -> Iterator[IndexEntry]:
        """:meth:`index_entries` read :data:`INDEX_PAGE` rows at a time (by ``rowid``, so pages
        never overlap or skip): whole-file verification holds a page, not the whole index.
        Inside a :meth:`snapshot` every page is of the same moment."""
        page = INDEX_PAGE
        after = None
        while True:
            with self._lock, translate_errors("reading the run index", path=self.path):
                self._fresh()
                rows = fetch_all(
                    self._conn,
                    "SELECT rowid, run_id, conversation_id, parent_run_id, opened_at FROM runs "
                    + ("" if after is None else "WHERE rowid > ? ")
                    + "ORDER BY rowid LIMIT ?",
                    (page,) if after is None else (after, page),
                )
            for r in rows:
                yield IndexEntry(
                    run_id=r[1], conversation_id=r[2], parent_run_id=r[3], opened_at=r[4]
                )
            if len(rows) < page:
                return
            after = rows[-1][0]

    def runs(self) -> list[RunInfo]:
        with self._lock, translate_errors("listing runs", path=self.path):
            self._fresh()
            rows = fetch_all(self._conn, self._layout.info_query + " ORDER BY r.rowid")
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
