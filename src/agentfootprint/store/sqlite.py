"""SQLite backend through sqlite-utils: WAL, ``BEGIN IMMEDIATE``, append-only triggers.

One transaction per appended batch (a flush), plain ``INSERT`` against the row's
position (schema 1: ``PRIMARY KEY (run_id, seq)``; schema 2: ``pos = run_key * 2**32 +
seq``): two writers racing for the same position cannot both win, and the loser's whole
batch rolls back. A file keeps the schema it was created with (schema 1 files are never
migrated); schema 2 (docs/log-format.md section 4) stores no value a reader can recompute
and rebuilds every row byte for byte. Several processes may write
to one database at once (WAL plus a busy timeout). Driver errors are turned
into this library's errors in one place, :func:`translate_errors`.

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
import stat
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from agentfootprint.errors import (
    AppendOnlyError,
    FileError,
    NewerVersionError,
    NotALogError,
    RunNotFoundError,
    StoreBusyError,
    StoreConflictError,
    StoreError,
    UsageError,
)
from agentfootprint.local_files import open_regular
from agentfootprint.logformat.chain import CLOSING_TYPES, GENESIS
from agentfootprint.store.base import (
    EventStore,
    IndexEntry,
    RunInfo,
    StoredEvent,
    run_index_from_open,
)
from agentfootprint.store.seal_log import read_seal_log, record_seal, sealed_in
from agentfootprint.store.sqlite_layout import (
    _APPEND_ONLY,
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
    _rebuilt,
)

#: The first 16 bytes of every SQLite 3 database file.
SQLITE_HEADER = b"SQLite format 3\x00"

__all__ = [
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


_LOG_COLUMNS = {
    "events": {"run_id", "seq", "type", "ts", "body", "event_hash", "chain_hash"},
    "runs": {"run_id", "conversation_id", "parent_run_id", "opened_at"},
    "schema_version": {"version"},
}
_LOG_COLUMNS_V2 = {
    "rows": {"pos", "type", "ts", "body", "head", "stage", "commit_no", "stage_k"},
    "run_keys": {"run_key", "run_id"},
    "runs": {"run_id", "conversation_id", "parent_run_id", "opened_at"},
    "schema_version": {"version"},
}
_VAULT_COLUMNS = {"disclosures": {"commitment", "run_id", "key", "salt", "value"}}
#: ``durability`` -> SQLite's ``synchronous``: "full" syncs every transaction (a committed
#: flush survives power loss), "normal" survives a killed process but not power loss (WAL)
DURABILITY = {"full": "FULL", "normal": "NORMAL"}


def _error_name(exc: sqlite3.Error) -> str:
    return str(getattr(exc, "sqlite_errorname", "") or "")


@contextlib.contextmanager
def translate_errors(
    context: str,
    *,
    path: str | os.PathLike[str] | None = None,
    wrong_kind: type[FileError] = NotALogError,
) -> Iterator[None]:
    """Turn sqlite3 errors into this library's errors (the one place that does).

    A file SQLite cannot parse is ``wrong_kind`` (:class:`NotALogError` for a log,
    :class:`NotAVaultError` for a vault); a file it cannot open, write or grow is a
    :class:`FileError`; the rest are store errors.
    """
    try:
        yield
    except sqlite3.Error as exc:
        message, name = str(exc), _error_name(exc)
        where = os.fspath(path) if path is not None else None
        if _APPEND_ONLY in message:
            raise AppendOnlyError(f"{context}: {message}") from exc
        if isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in message:
            raise StoreConflictError(
                f"{context}: position already taken by another writer ({message})"
            ) from exc
        if name == "SQLITE_NOTADB" or "file is not a database" in message:
            raise wrong_kind(
                f"{context}: {where or 'the file'} is not an SQLite database ({message})",
                path=where,
            ) from exc
        if name.startswith("SQLITE_CANTOPEN") or "unable to open" in message:
            raise FileError(
                f"{context}: cannot open {where or 'the database'} ({message}): check that "
                "it exists and that its folder can be read (and written, to record)",
                path=where,
            ) from exc
        if name.startswith("SQLITE_READONLY") or "readonly database" in message:
            raise FileError(
                f"{context}: {where or 'the database'} or its folder cannot be written "
                f"({message}); to read a log on read-only storage, open it read-only",
                path=where,
            ) from exc
        if name == "SQLITE_FULL" or "disk is full" in message:
            raise FileError(f"{context}: no room left ({message})", path=where) from exc
        if "locked" in message or "busy" in message:
            raise StoreBusyError(f"{context}: database stayed locked ({message})") from exc
        raise StoreError(f"{context}: SQLite error: {message}") from exc


@contextlib.contextmanager
def atomic(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; any exception (a failed ``COMMIT`` too) rolls
    the whole batch back. The rollback is skipped when the error already ended the
    transaction (SQLite does for some, e.g. a full disk), so the first error surfaces."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


# -- what a file is ----------------------------------------------------------------------


def writer_files(path: Path) -> list[Path]:
    """The files a writer keeps beside a database (``-wal``, ``-journal``) that exist now:
    while there are none, no writer holds the database and it can be read ``immutable``."""
    return [
        side
        for side in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-journal"))
        if side.exists()
    ]


def probe_file(path: Path) -> tuple[int, bytes]:
    """``(size, first 16 bytes)`` of an existing regular file, read without SQLite;
    :class:`FileError` when it is missing, a folder or unreadable."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise FileError(f"{path}: no such file", path=str(path)) from None
    except OSError as exc:
        raise FileError(f"cannot read {path}: {exc.strerror or exc}", path=str(path)) from exc
    if stat.S_ISDIR(info.st_mode):
        raise FileError(f"{path} is a folder, not a file", path=str(path))
    try:  # a FIFO or a device is refused here, before SQLite is handed the path
        with open_regular(path) as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise FileError(f"cannot read {path}: {exc.strerror or exc}", path=str(path)) from exc
    return info.st_size, header


def check_writable(path: Path, *, what: str) -> None:
    """Refuse early, with a :class:`FileError`, to open ``path`` for writing when its folder
    is missing or cannot be written (SQLite keeps its ``-wal``/``-journal`` files there) or
    the file itself is read-only; ``what`` names the file ("log", "vault")."""
    folder = path.parent
    if not folder.is_dir():
        raise FileError(
            f"cannot open the {what} {path} for writing: the folder {folder} does not exist",
            path=str(path),
        )
    read_only = (
        f"; to read a {what} on read-only storage, open it read-only (readonly=True, "
        "or a command that only reads)"
    )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FileError(
            f"cannot open the {what} {path} for writing: its folder {folder} cannot be "
            f"written{read_only}",
            path=str(path),
        )
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise FileError(
            f"cannot open the {what} {path} for writing: the file is read-only{read_only}",
            path=str(path),
        )


def _printable(name: str) -> str:
    return name if name.isprintable() else ascii(name)


@dataclass(frozen=True, slots=True)
class DatabaseKind:
    """What an SQLite database holds, told from its tables (and their columns)."""

    tables: tuple[str, ...]
    is_log: bool
    is_vault: bool
    #: which log layout the tables are (1: ``events``; 2: ``rows``), 0 for none
    layout: int = 0

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> DatabaseKind:
        tables = tuple(
            str(row[0])
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
            )
        )

        def has(expected: dict[str, set[str]]) -> bool:
            for table, columns in expected.items():
                if table not in tables:
                    return False
                found = {str(r[0]) for r in conn.execute(_COLUMNS, (table,))}
                if not columns <= found:
                    return False
            return True

        layout = 2 if has(_LOG_COLUMNS_V2) else 1 if has(_LOG_COLUMNS) else 0
        is_log = layout > 0
        return cls(
            tables=tables,
            is_log=is_log,
            is_vault=not is_log and has(_VAULT_COLUMNS),
            layout=layout,
        )

    @property
    def is_empty(self) -> bool:
        return not self.tables

    def describe(self) -> str:
        """``an agentfootprint log``, ``a disclosure vault``, ``an SQLite database with no
        tables`` or ``an SQLite database of another application (tables: a, b)``."""
        if self.is_log:
            return "an agentfootprint log"
        if self.is_vault:
            return "a disclosure vault"
        if self.is_empty:
            return "an SQLite database with no tables"
        shown = ", ".join(_printable(t) for t in self.tables[:12])
        more = f", and {len(self.tables) - 12} more" if len(self.tables) > 12 else ""
        return f"an SQLite database of another application (tables: {shown}{more})"


_COLUMNS = "SELECT name FROM pragma_table_info(?)"


def _uri(path: Path, query: str) -> str:
    # file:// and an empty authority: a path that starts with // (POSIX allows it) stays a path
    return "file://" + urllib.parse.quote(os.path.abspath(path), safe="/") + "?" + query


def connect_readonly(
    path: Path,
    *,
    what: str,
    wrong_kind: type[FileError],
    timeout: float = 30.0,
    live: list[Path] | None = None,
) -> sqlite3.Connection:
    """A connection that can never write to ``path`` or create anything beside it.

    With no writer's file beside the database it is opened ``immutable`` (no lock, no
    ``-wal`` or ``-shm``: works on read-only storage); with one (a live or interrupted
    writer) ``mode=ro``, which reads the committed WAL frames. A missing file is a
    :class:`FileError`; an empty or non-SQLite file ``wrong_kind`` (``what`` names the
    kind of file wanted, e.g. "an agentfootprint log"). ``live``: the writer's files the
    caller found beside it (it decides on those, so it knows how the file was opened).
    """
    size, header = probe_file(path)
    if live is None:
        live = writer_files(path)
    if size == 0 and not live:
        raise wrong_kind(f"{path} is an empty file, not {what}", path=str(path))
    if size > 0 and header != SQLITE_HEADER:
        raise wrong_kind(f"{path} is not an SQLite database, so not {what}", path=str(path))
    uri = _uri(path, "mode=ro" if live else "immutable=1")
    context = f"opening {path} read-only"
    with translate_errors(context, path=path, wrong_kind=wrong_kind):
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, timeout=timeout, check_same_thread=False
        )
    try:
        with translate_errors(context, path=path, wrong_kind=wrong_kind):
            try:
                conn.execute("PRAGMA query_only=ON")  # a connection setting; writes nothing
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            except sqlite3.Error as exc:
                name = _error_name(exc)
                if live and (name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY"))):
                    raise FileError(
                        f"{path} has {live[0].name} beside it (a writer holds it, or one was "
                        f"interrupted), and it cannot be read without writing there ({exc}): "
                        "copy the file together with the files beside it to writable "
                        "storage and read the copy",
                        path=str(path),
                    ) from exc
                raise
    except BaseException:
        conn.close()
        raise
    return conn


def _switch_to_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """``PRAGMA journal_mode=WAL``, waited for: SQLite answers a switch that meets another
    process's lock with SQLITE_BUSY at once, without its busy handler (several processes
    creating one new file at the same moment)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """``MAX(schema_version.version)``, 0 with no such table; junk is :class:`NotALogError`."""
    names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
    if "schema_version" not in names:
        return 0
    junk = conn.execute(
        "SELECT version FROM schema_version WHERE typeof(version) != 'integer' LIMIT 1"
    ).fetchone()
    (highest,) = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    if junk is not None or highest is None or highest < 1:
        if junk is None and highest is None:
            held = "no version"
        else:
            held = (repr(junk[0]) if junk is not None else repr(highest))[:60]
            held += ", not a migration number"
        raise NotALogError(
            f"{path}: its schema_version table holds {held}: not an agentfootprint log "
            "(or a damaged one)",
            path=str(path),
        )
    return int(highest)


def _check_newer(version: int, path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise NewerVersionError(
            f"{path} has schema version {version}, newer than this library's "
            f"{SCHEMA_VERSION}: upgrade agentfootprint to read it",
            path=str(path),
        )


def _undecodable_text(data: bytes) -> str:
    """TEXT as Python reads it when it is not UTF-8: its bytes kept as lone surrogates."""
    return data.decode("utf-8", "surrogateescape")


def file_path(value: Any, *, who: str, option: str) -> Path:
    """``value`` as a :class:`Path`, or a :class:`UsageError` naming ``option`` when it is
    not a file path (not ``str``/``os.PathLike`` of text, or holding a NUL character)."""
    text = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    if not isinstance(text, str) or not text or "\0" in text:
        raise UsageError(
            f"{who}: {option} must be a file path (a non-empty str or os.PathLike without "
            f"NUL characters), not {value!r}",
            option=option,
        )
    return Path(text)


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
                    _check_newer(_schema_version(conn, path), path)
                _switch_to_wal(conn, timeout)
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
            return _schema_version(self._conn, self.path)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        with atomic(conn):
            current = _schema_version(conn, self.path)  # again: another writer may have won
            _check_newer(current, self.path)
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
        version = _schema_version(conn, self.path)
        _check_newer(version, self.path)
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
        """One batch in one ``BEGIN IMMEDIATE`` transaction. Schema 2 keeps no event hash and
        few chain hashes, so it recomputes each row's and refuses a batch whose dropped values
        do not follow from its rows (whoever hashed them: the run writer or an import)."""
        self._writable()
        self.check_batch(events)
        first = events[0]
        context = f"run {first.run_id} append at seq {first.seq}"
        pending: dict[str, tuple[int, bytes]] = {}
        with (
            self._lock,
            translate_errors(context, path=self.path),
            atomic(self._conn) as conn,
        ):
            self._insert(conn, events, pending=pending)
            self._seal(conn, events)
        self._appended(events, pending)

    def append_runs(self, batches: Iterable[Sequence[StoredEvent]]) -> None:
        """Every batch in one ``BEGIN IMMEDIATE`` transaction: all kept, or none."""
        self._writable()
        context = f"atomic append to {self.path}"
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

    def _read_v2(self, run_id: str, start: int) -> list[StoredEvent]:
        base, rows, previous = self._stored_v2(run_id, start)
        events = _rebuilt(run_id, base, rows, previous)
        if start > 0 and events and events[0].seq < start:
            events = [e for e in events if e.seq >= start]
        return events

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

    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        """The rows as stored: a BLOB as ``bytes``, any other value (a TEXT body, an integer
        hash of a crafted file) unchanged, for the verifier to judge. In schema 2 the event
        hashes and the chain links between stored heads are computed from the rows."""
        with self._lock, translate_errors(f"reading run {run_id}", path=self.path):
            self._fresh()
            if self._layout == 2:
                events = self._read_v2(run_id, start)
                if not events and start == 0:
                    raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
                return iter(events)
            rows = self._fetchall(self._ROWS_V1, (run_id, start))
            if not rows and start == 0:
                raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
        return (
            StoredEvent(
                run_id=r[0],
                seq=r[1],
                type=r[2],
                ts=r[3],
                body=_bytes_or_as_stored(r[4]),
                event_hash=_bytes_or_as_stored(r[5]),
                chain_hash=_bytes_or_as_stored(r[6]),
            )
            for r in rows
        )

    def chain_rows(self, run_id: str) -> list[tuple[Any, ...]] | None:
        """The rows ``read(run_id)`` yields, as tuples for the verifier's own loop
        (:class:`~agentfootprint.logformat.chain.ChainRowSource`): schema 1's exactly as the
        query returns them (the driver gives a BLOB as ``bytes``, so these are ``read``'s
        fields), schema 2's decoded with nothing hashed, the values it does not store
        :data:`~agentfootprint.logformat.chain.DERIVED`. None when ``read`` is not this class's
        (a subclass or a patched instance reads its own way: the verifier reads that)."""
        if getattr(self.read, "__func__", None) is not SqliteStore.read:
            return None
        with self._lock, translate_errors(f"reading run {run_id}", path=self.path):
            self._fresh()
            if self._layout == 2:
                base, rows, _ = self._stored_v2(run_id, 0)
                decoded = _decoded(run_id, base, rows)
                if not decoded:
                    raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
                return decoded
            found: list[tuple[Any, ...]] = self._fetchall(self._ROWS_V1, (run_id, 0))
            if not found:
                raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
        return found

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
                f"{self.path}: the index or last row of run {_printable(str(row[0]))} holds "
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
