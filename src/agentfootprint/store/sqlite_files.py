"""The SQLite file under a log or a vault: what a file is, opening it, driver errors.

Shared by :class:`~agentfootprint.store.sqlite.SqliteStore` (a log) and
:class:`~agentfootprint.store.vault.DisclosureVault` (a vault): telling a file's kind from its
tables before anything is written (:class:`DatabaseKind`), opening it read-only without ever
creating a file beside it (:func:`connect_readonly`) or for writing (:func:`check_writable`,
:func:`switch_to_wal`), one ``BEGIN IMMEDIATE`` transaction (:func:`atomic`), and turning the
driver's errors into this library's in one place (:func:`translate_errors`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfootprint.errors import (
    AppendOnlyError,
    FileError,
    NewerVersionError,
    NotALogError,
    StoreBusyError,
    StoreConflictError,
    StoreError,
    UsageError,
)
from agentfootprint.local_files import open_regular
from agentfootprint.store.sqlite_layout import _APPEND_ONLY, SCHEMA_VERSION

__all__ = [
    "DURABILITY",
    "SQLITE_HEADER",
    "DatabaseKind",
    "atomic",
    "check_newer",
    "check_writable",
    "connect_readonly",
    "file_path",
    "printable",
    "probe_file",
    "schema_version_of",
    "switch_to_wal",
    "translate_errors",
    "writer_files",
]

#: The first 16 bytes of every SQLite 3 database file.
SQLITE_HEADER = b"SQLite format 3\x00"

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
_LOG_COLUMNS_V4 = {
    "appends": {"pos", "count", "ts", "head", "data"},
    "run_keys": {"run_key", "run_id"},
    "names": {"id", "text"},
    "opens": {"id", "prefix", "middle", "suffix"},
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


def printable(name: str) -> str:
    return name if name.isprintable() else ascii(name)


@dataclass(frozen=True, slots=True)
class DatabaseKind:
    """What an SQLite database holds, told from its tables (and their columns)."""

    tables: tuple[str, ...]
    is_log: bool
    is_vault: bool
    #: which log layout the tables are (1: ``events``; 2: ``rows``; 4: ``appends``), 0 for
    #: none; the highest when the file holds the tables of several
    layout: int = 0
    #: every log layout whose tables the file holds
    layouts: frozenset[int] = frozenset()

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

        layouts = frozenset(
            number
            for number, columns in ((1, _LOG_COLUMNS), (2, _LOG_COLUMNS_V2), (4, _LOG_COLUMNS_V4))
            if has(columns)
        )
        is_log = bool(layouts)
        return cls(
            tables=tables,
            is_log=is_log,
            is_vault=not is_log and has(_VAULT_COLUMNS),
            layout=max(layouts, default=0),
            layouts=layouts,
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
        shown = ", ".join(printable(t) for t in self.tables[:12])
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


def switch_to_wal(conn: sqlite3.Connection, timeout: float) -> None:
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


def schema_version_of(conn: sqlite3.Connection, path: Path) -> int:
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


def check_newer(version: int, path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise NewerVersionError(
            f"{path} has schema version {version}, newer than this library's "
            f"{SCHEMA_VERSION}: upgrade agentfootprint to read it",
            path=str(path),
        )


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
