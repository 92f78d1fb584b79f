"""An artifact store in one SQLite file: heads and content in ``artifacts``, ``tombstones``.

The file says what it is in its header: ``PRAGMA application_id`` is :data:`APPLICATION_ID`
(a log and a vault keep SQLite's 0) and ``PRAGMA user_version`` the schema version, which
the ``migrations`` table records migration by migration. Any other SQLite file (a log, a
vault, another application's database) is refused with
:class:`~agentfootprint.errors.NotAnArtifactStoreError` and left unchanged: an artifact store
is never the log file. A put is one transaction; a removal deletes the row (``PRAGMA
secure_delete=ON`` overwrites its bytes in the file) and keeps the tombstone in the same
transaction; a sweep's removals are one transaction. The rollback journal (never WAL) keeps no
copy of removed content beside the file once a transaction ends.

``readonly=True`` opens the file ``mode=ro``: nothing is created, migrated or changed, and a
newer schema is refused. sqlite3's errors are translated in one place, :func:`_sqlite_errors`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from agentfootprint.errors import (
    ArtifactConflictError,
    ArtifactStoreError,
    FileError,
    NewerVersionError,
    NotAnArtifactStoreError,
)
from agentfootprint.store.artifacts import (
    ArtifactHead,
    ArtifactStore,
    Retention,
    Tombstone,
    conflict,
    head_problem,
    tombstone_problem,
)
from agentfootprint.store.sqlite_files import (
    DatabaseKind,
    atomic,
    check_writable,
    connect_readonly,
    file_path,
    probe_file,
)

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "SqliteArtifacts"]

#: ``PRAGMA application_id`` of an artifact store: "AFPA" in ASCII (logs and vaults keep 0).
APPLICATION_ID: Final = 0x41465041
#: (version, name, statements): applied in order, each recorded in ``migrations``
MIGRATIONS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
    (
        1,
        "artifacts and tombstones",
        (
            """CREATE TABLE migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL
            )""",
            """CREATE TABLE artifacts (
                seq INTEGER PRIMARY KEY,
                scope TEXT NOT NULL,
                ref TEXT NOT NULL,
                kind TEXT NOT NULL,
                media_type TEXT NOT NULL,
                size INTEGER NOT NULL,
                digest TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER,
                content BLOB NOT NULL,
                UNIQUE (scope, ref)
            )""",
            "CREATE INDEX artifacts_in_order ON artifacts (scope, created_at, seq)",
            """CREATE TABLE tombstones (
                scope TEXT NOT NULL,
                ref TEXT NOT NULL,
                digest TEXT NOT NULL,
                size INTEGER NOT NULL,
                reason TEXT NOT NULL,
                at INTEGER NOT NULL,
                note TEXT NOT NULL,
                PRIMARY KEY (scope, ref)
            ) WITHOUT ROWID""",
        ),
    ),
)
SCHEMA_VERSION: Final = MIGRATIONS[-1][0]
_TABLES: Final = frozenset({"migrations", "artifacts", "tombstones"})
_HEAD_COLUMNS: Final = "scope, ref, kind, media_type, size, digest, created_at, expires_at"
_NEVER_THE_LOG: Final = (
    "it was left unchanged: an artifact store is never the log file (nor the vault); name a "
    "separate file"
)


def _name(exc: sqlite3.Error) -> str:
    return str(getattr(exc, "sqlite_errorname", "") or "")


@contextlib.contextmanager
def _sqlite_errors(context: str, path: Path) -> Iterator[None]:
    """The one place sqlite3's errors become this library's: a file that is not a database
    :class:`NotAnArtifactStoreError`; one that cannot be opened, written or grown
    :class:`FileError`; a ref taken twice :class:`ArtifactConflictError`; the rest
    :class:`ArtifactStoreError`."""
    try:
        yield
    except sqlite3.Error as exc:
        message, name, where = str(exc), _name(exc), str(path)
        if name == "SQLITE_NOTADB" or "file is not a database" in message:
            raise NotAnArtifactStoreError(
                f"{context}: {where} is not an SQLite database, so not an artifact store "
                f"({message})",
                path=where,
            ) from exc
        if name.startswith("SQLITE_CANTOPEN") or "unable to open" in message:
            raise FileError(f"{context}: cannot open {where} ({message})", path=where) from exc
        if name.startswith("SQLITE_READONLY") or "readonly database" in message:
            raise FileError(
                f"{context}: {where} or its folder cannot be written ({message}); to read "
                "it, open it read-only",
                path=where,
            ) from exc
        if name == "SQLITE_FULL" or "disk is full" in message:
            raise FileError(f"{context}: no room left ({message})", path=where) from exc
        if isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in message:
            raise ArtifactConflictError(
                f"{context}: the ref is stored already ({message})"
            ) from exc
        raise ArtifactStoreError(f"{context}: SQLite error: {message}") from exc


def _header(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(application_id, user_version)``: read from the file's header, nothing written."""
    (application,) = conn.execute("PRAGMA application_id").fetchone()
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(application), int(version)


class SqliteArtifacts(ArtifactStore):
    """Artifacts in one SQLite file (see the module's docstring).

    Writing (default): a missing or empty file becomes an artifact store (its folder must
    exist), an older one is migrated; any other file is refused and left unchanged.
    ``readonly=True`` reads only: a missing file is a :class:`~agentfootprint.errors.FileError`.
    """

    def __init__(
        self,
        file: str | os.PathLike[str],
        *,
        retention: Retention | None = None,
        readonly: bool = False,
    ) -> None:
        path = file_path(file, who="SqliteArtifacts", option="file")
        super().__init__(retention=retention, readonly=readonly, holds_path=os.path.abspath(path))
        self.path = path
        self._conn = self._open_readonly() if readonly else self._open_for_writing()

    # -- opening -------------------------------------------------------------------------
    def _refuse(self, what: str) -> NotAnArtifactStoreError:
        return NotAnArtifactStoreError(
            f"{self.path} is {what}, not an agentfootprint artifact store; {_NEVER_THE_LOG}",
            path=str(self.path),
        )

    def _kind(self, conn: sqlite3.Connection, *, creating: bool) -> int:
        """The file's schema version after checking it is an artifact store (0: an empty
        database, accepted only when ``creating``)."""
        application, version = _header(conn)
        if application != APPLICATION_ID:
            kind = DatabaseKind.of(conn)
            if application == 0 and kind.is_empty and creating:
                return 0
            what = (
                kind.describe()
                if application == 0
                else f"an SQLite database of another application (application_id {application})"
            )
            raise self._refuse(what)
        if version > SCHEMA_VERSION:
            raise NewerVersionError(
                f"{self.path} is an artifact store of schema version {version}, newer than "
                f"this library's {SCHEMA_VERSION}: upgrade agentfootprint to read it",
                path=str(self.path),
            )
        tables = set(DatabaseKind.of(conn).tables)
        if version < 1 or not tables.issuperset(_TABLES):
            raise self._refuse(
                f"a damaged artifact store (schema version {version}, tables {sorted(tables)[:8]})"
            )
        return version

    def _look(self, *, creating: bool) -> None:
        """Tell what an existing file is through a connection that creates nothing beside it
        (``immutable``, or ``mode=ro`` beside a writer's files): a log in WAL mode gets no
        ``-wal`` or ``-shm`` from being refused. A missing file is a ``FileError``."""
        conn = connect_readonly(
            self.path, what="an agentfootprint artifact store", wrong_kind=NotAnArtifactStoreError
        )
        try:
            with _sqlite_errors(f"opening {self.path}", self.path):
                self._kind(conn, creating=creating)
        finally:
            conn.close()

    def _open_readonly(self) -> sqlite3.Connection:
        path = self.path
        self._look(creating=False)
        uri = "file://" + urllib.parse.quote(os.path.abspath(path), safe="/") + "?mode=ro"
        context = f"opening {path} read-only"
        with _sqlite_errors(context, path):
            conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, timeout=30.0, check_same_thread=False
            )
        try:
            with _sqlite_errors(context, path):
                conn.execute("PRAGMA query_only=ON")  # a connection setting; writes nothing
                self._kind(conn, creating=False)  # again: the file may have changed since
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_for_writing(self) -> sqlite3.Connection:
        path = self.path
        if os.path.lexists(path) and probe_file(path)[0] > 0:
            self._look(creating=True)
        check_writable(path, what="artifact store")
        context = f"opening {path}"
        with _sqlite_errors(context, path):
            conn = sqlite3.connect(
                path, isolation_level=None, timeout=30.0, check_same_thread=False
            )
        try:
            with _sqlite_errors(context, path):
                self._kind(conn, creating=True)  # reads only: nothing written before this
                conn.execute("PRAGMA secure_delete=ON")
                conn.execute("PRAGMA journal_mode=DELETE")  # no WAL copies of content
                conn.execute("PRAGMA synchronous=FULL")
                self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Apply the migrations the file lacks, in one transaction (checked again inside it:
        another process may have created or migrated the file meanwhile)."""
        with atomic(conn):
            current = self._kind(conn, creating=True)
            if current == SCHEMA_VERSION:
                return
            if current == 0:
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            for version, name, statements in MIGRATIONS:
                if version > current:
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute("INSERT INTO migrations VALUES (?, ?)", (version, name))
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # -- reading rows (a crafted file may hold anything: each row is checked) --------------
    def _head_row(self, row: Sequence[Any]) -> ArtifactHead:
        head = ArtifactHead(
            scope=row[0],
            ref=row[1],
            kind=row[2],
            media_type=row[3],
            size=row[4],
            digest=row[5],
            created_at=row[6],
            expires_at=row[7],
        )
        problem = head_problem(head)
        if problem is not None:
            raise ArtifactStoreError(
                f"artifact store {self.path}: the artifacts row of {row[1]!r:.80} is damaged: "
                f"{problem}"
            )
        return head

    # -- the backend's steps ---------------------------------------------------------------
    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return _sqlite_errors(f"artifact store {self.path}", self.path)

    def _known(self, scope: str, ref: str) -> tuple[bool, bool]:
        """(live, tombstoned)"""
        where = "WHERE scope = ? AND ref = ?"
        live = self._conn.execute(f"SELECT 1 FROM artifacts {where}", (scope, ref)).fetchone()
        tomb = self._conn.execute(f"SELECT 1 FROM tombstones {where}", (scope, ref)).fetchone()
        return live is not None, tomb is not None

    def _put(self, head: ArtifactHead, content: bytes) -> None:
        with atomic(self._conn) as conn:
            live, tombstoned = self._known(head.scope, head.ref)
            if live or tombstoned:
                raise conflict(head.scope, head.ref, tombstoned)
            conn.execute(
                f"INSERT INTO artifacts ({_HEAD_COLUMNS}, content) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    head.scope,
                    head.ref,
                    head.kind,
                    head.media_type,
                    head.size,
                    head.digest,
                    head.created_at,
                    head.expires_at,
                    content,
                ),
            )

    def _head(self, scope: str, ref: str) -> ArtifactHead | None:
        row = self._conn.execute(
            f"SELECT {_HEAD_COLUMNS} FROM artifacts WHERE scope = ? AND ref = ?", (scope, ref)
        ).fetchone()
        return None if row is None else self._head_row(row)

    def _read(self, scope: str, ref: str) -> bytes | None:
        """The BLOB as stored (no digest check: the verifier hashes it)."""
        row = self._conn.execute(
            "SELECT content FROM artifacts WHERE scope = ? AND ref = ?", (scope, ref)
        ).fetchone()
        if row is None:
            return None
        if type(row[0]) is not bytes:
            raise ArtifactStoreError(
                f"artifact store {self.path}: the content of {ref} is "
                f"{type(row[0]).__name__}, not a BLOB: the file is damaged"
            )
        return row[0]

    def _tombstone(self, scope: str, ref: str) -> Tombstone | None:
        row = self._conn.execute(
            "SELECT scope, ref, digest, size, reason, at, note FROM tombstones "
            "WHERE scope = ? AND ref = ?",
            (scope, ref),
        ).fetchone()
        if row is None:
            return None
        tomb = Tombstone(
            scope=row[0],
            ref=row[1],
            digest=row[2],
            size=row[3],
            reason=row[4],
            at=row[5],
            note=row[6],
        )
        problem = tombstone_problem(tomb)
        if problem is not None:
            raise ArtifactStoreError(
                f"artifact store {self.path}: the tombstones row of {ref} is damaged: {problem}"
            )
        return tomb

    def _remove_all(self, tombs: Sequence[Tombstone]) -> None:
        with atomic(self._conn) as conn:
            for tomb in tombs:
                gone = conn.execute(
                    "DELETE FROM artifacts WHERE scope = ? AND ref = ?", (tomb.scope, tomb.ref)
                ).rowcount
                if gone != 1:
                    raise ArtifactStoreError(
                        f"artifact store {self.path}: {tomb.ref} was removed meanwhile by "
                        "another process; nothing of this removal was kept"
                    )
                conn.execute(
                    "INSERT INTO tombstones VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (tomb.scope, tomb.ref, tomb.digest, tomb.size, tomb.reason, tomb.at, tomb.note),
                )

    def _list(self, scope: str) -> list[ArtifactHead]:
        rows = self._conn.execute(
            f"SELECT {_HEAD_COLUMNS} FROM artifacts WHERE scope = ? ORDER BY created_at, seq, ref",
            (scope,),
        ).fetchall()
        return [self._head_row(row) for row in rows]

    def _close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
