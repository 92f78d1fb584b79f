"""What the PostgreSQL log and the PostgreSQL vault share: their connections and errors.

:class:`Connections` is one database's sessions: a first direct connection (to look at the
schema and create it, so that a failure to connect surfaces at construction, with the
server's own reason), then a pool, every session configured once (``synchronous_commit`` for
the durability, ``default_transaction_read_only`` for a reader). :func:`translate_errors` is
the one place psycopg's errors become this library's; :func:`schema_tables` and
:func:`recorded_version` read what a schema holds, for the fail-closed opening both do.
"""

from __future__ import annotations

import contextlib
import select
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from agentfootprint.errors import (
    AppendOnlyError,
    NewerVersionError,
    StoreBusyError,
    StoreConflictError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from agentfootprint.store.postgres_url import PostgresLocation, PostgresURLError, parse_postgres_url
from agentfootprint.version import install_command

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = [
    "APPEND_ONLY",
    "DURABILITY",
    "LOCK_CLASS",
    "Connections",
    "check_pool_options",
    "check_quietly",
    "first_line",
    "location_of",
    "now_ms",
    "recorded_version",
    "schema_tables",
    "translate_errors",
]

APPEND_ONLY: Final = "agentfootprint log is append-only"
#: ``durability`` -> the session's ``synchronous_commit``: "full" waits for the commit's WAL to
#: reach disk (a committed flush survives a crash of the server's machine); "normal" does not
#: wait (a crash of the server may lose the last commits, about 0.6 s of them at the default
#: ``wal_writer_delay``, though never part of one)
DURABILITY: Final = {"full": "on", "normal": "off"}

#: the class of every transaction-scoped advisory lock of this library's (0x6166, "af"):
#: ``pg_advisory_xact_lock(LOCK_CLASS, key)``; the log takes keys 1 (migrations), 2 (seal
#: leaves) and 5 (answers to pauses), the vault 3 (its creation) and 4 (master key rotation)
LOCK_CLASS: Final = 0x6166

#: a translator of driver errors: a context manager taking the operation's description
Translate = Callable[[str], contextlib.AbstractContextManager[None]]


def driver() -> Any:
    """psycopg, or a :class:`UsageError` saying how to install it."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the extra is installed in every test run
        raise UsageError(
            f"a PostgreSQL store needs psycopg 3: {install_command('postgresql')}"
        ) from None
    return psycopg


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def now_ms() -> int:
    return int(time.time() * 1000)


@contextlib.contextmanager
def translate_errors(context: str) -> Iterator[None]:
    """Turn psycopg's (and its pool's) errors into this library's (the one place that does;
    nothing is looked up unless something was raised: a flush passes through here)."""
    try:
        yield
    except Exception as exc:
        translated = _translated(context, exc)
        if translated is None:
            raise
        raise translated from exc


def _translated(context: str, exc: Exception) -> Exception | None:
    """This library's error for a driver error ``exc``; None for any other exception."""
    import psycopg
    from psycopg import errors
    from psycopg_pool import PoolClosed, PoolTimeout

    if isinstance(exc, errors.UniqueViolation):
        return StoreConflictError(
            f"{context}: position already taken by another writer ({first_line(exc)})"
        )
    if isinstance(exc, errors.RaiseException):
        if APPEND_ONLY in str(exc):
            return AppendOnlyError(f"{context}: {first_line(exc)}")
        return StoreError(f"{context}: PostgreSQL error: {first_line(exc)}")
    if isinstance(exc, errors.InsufficientPrivilege):
        return StoreError(
            f"{context}: the database role lacks a privilege ({first_line(exc)}): a writer "
            "needs SELECT and INSERT on the log's tables (docs/stores.md, 'Roles')"
        )
    rolled_back = (
        errors.LockNotAvailable,
        errors.QueryCanceled,
        errors.DeadlockDetected,
        errors.SerializationFailure,
        errors.TransactionRollback,
    )
    if isinstance(exc, rolled_back):
        return StoreBusyError(
            f"{context}: the database rolled the transaction back ({first_line(exc)}); "
            "nothing of it was kept"
        )
    if isinstance(exc, errors.ReadOnlySqlTransaction):
        return StoreError(f"{context}: the session is read-only: nothing can be written")
    if isinstance(exc, PoolTimeout | PoolClosed):
        return StoreUnavailableError(
            f"{context}: no connection to the database ({exc}): is the server running and "
            "reachable?"
        )
    if isinstance(exc, psycopg.OperationalError):
        return StoreUnavailableError(
            f"{context}: the database could not be reached or the connection broke "
            f"({first_line(exc)}); a batch in flight was kept whole or not at all"
        )
    if isinstance(exc, psycopg.Error):
        return StoreError(f"{context}: PostgreSQL error: {first_line(exc)}")
    return None


def location_of(url: Any) -> PostgresLocation:
    """``url`` parsed (a :class:`PostgresLocation` as it is); a :class:`UsageError` naming
    ``url`` otherwise."""
    if isinstance(url, PostgresLocation):
        return url
    if not isinstance(url, str):
        raise UsageError(
            f"option 'url': a postgresql:// URL, got {type(url).__name__}", option="url"
        )
    try:
        return parse_postgres_url(url)
    except PostgresURLError as exc:
        raise UsageError(f"option 'url': {exc}", option="url") from None


def check_pool_options(pool_size: Any, timeout: Any, readonly: Any) -> None:
    if type(readonly) is not bool:
        raise UsageError(f"option 'readonly': True or False, not {readonly!r}", option="readonly")
    if type(pool_size) is not int or pool_size < 1:
        raise UsageError(
            f"option 'pool_size': a positive integer, got {pool_size!r}", option="pool_size"
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise UsageError(f"option 'timeout': seconds > 0, got {timeout!r}", option="timeout")


def schema_tables(conn: psycopg.Connection[Any]) -> dict[str, set[str]]:
    """The tables (and views) of the connection's current schema, with their columns."""
    schema = conn.execute("SELECT current_schema()").fetchone()
    if schema is None or schema[0] is None:
        raise StoreError(
            "the connection has no current schema (search_path names none that exists): "
            "create the schema or set search_path"
        )
    rows = conn.execute(
        "SELECT c.relname, a.attname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
        "AND NOT a.attisdropped "
        "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
    ).fetchall()
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(table, set())
        if column is not None:
            found[table].add(column)
    return found


def recorded_version(
    conn: psycopg.Connection[Any], *, newest: int | None = None, what: str = ""
) -> int:
    """The highest migration ``schema_version`` records (0 for none); above ``newest``, a
    :class:`NewerVersionError` naming ``what``."""
    row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
    version = int(row[0]) if row else 0
    if newest is not None and version > newest:
        raise NewerVersionError(
            f"{what} was written by a newer agentfootprint (schema version {version}, this "
            f"version reads up to {newest}): upgrade to use it"
        )
    return version


def check_quietly(conn: psycopg.Connection[Any]) -> None:
    """The pool's check of a connection it hands out, without a round trip while the server
    has said nothing: an idle session's socket turns readable only when the server speaks
    unprompted (its termination notice, a reset, the end of the stream: a server stopped,
    restarted or killed), and only then is the connection checked by a query (which raises
    for a broken one, so the pool makes a new one). A flush on a live connection costs one
    round trip, not two; a connection lost silently (a cable pulled) fails its next
    statement either way, as the check's own round trip could not have foreseen."""
    from psycopg_pool import ConnectionPool

    if conn.closed:
        raise driver().OperationalError("the connection is closed")
    if _readable(conn.fileno()):
        ConnectionPool.check_connection(conn)


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read now (no waiting)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [fd], 0)[0])  # pragma: no cover - Windows


class Connections:
    """One database's sessions: :meth:`connect` (direct), then :meth:`open_pool`'s pool, each
    session configured for ``durability`` and ``readonly``; :meth:`cursor` through the pool,
    its errors translated by ``translate``."""

    def __init__(
        self,
        location: PostgresLocation,
        *,
        durability: str,
        readonly: bool,
        timeout: float,
        name: str,
        translate: Translate = translate_errors,
        adapt: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> None:
        driver()
        self.location = location
        self.durability = durability
        self.readonly = readonly
        self.timeout = timeout
        self.name = name
        self.translate = translate
        #: what every session learns once made (the log's types for its parameters)
        self.adapt = adapt
        self.closed = False
        self._pool: ConnectionPool | None = None

    def connect(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] = driver().connect(
            self.location.conninfo, autocommit=True, connect_timeout=max(1, int(self.timeout))
        )
        self._configure(conn)
        return conn

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        if self.adapt is not None:
            self.adapt(conn)
        conn.execute(
            "SELECT set_config('synchronous_commit', %s, false), "
            "set_config('default_transaction_read_only', %s, false)",
            (DURABILITY[self.durability], "on" if self.readonly else "off"),
        )

    def open_pool(self, size: int) -> None:
        """The pool (connections made as they are needed, each checked before use, so a
        server started again is reconnected to), its first connection made before this
        returns: the first flush then finds it ready, where waiting for it made the pool
        grow a second one for a single writer, which the pool's first-in first-out order
        then alternated with (two server processes serving one writer's flushes in turn)."""
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(
            self.location.conninfo,
            min_size=1,
            max_size=size,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(self.timeout))},
            configure=self._configure,
            check=check_quietly,
            timeout=self.timeout,
            reconnect_timeout=max(self.timeout, 60.0),
            name=self.name,
            open=False,
        )
        pool.open(wait=False)
        self._pool = pool
        with self.translate(f"opening {self.location.shown}"):
            pool.wait(timeout=self.timeout)  # (closes the pool if it fails)

    @contextlib.contextmanager
    def connection(self, context: str) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection, errors translated. Taken and given back without the pool's
        own context manager, whose commit-or-rollback at the end costs a flush a fifth of
        its client-side Python: the sessions are in autocommit, a transaction is opened
        and ended by ``conn.transaction()`` inside the block, and the pool rolls back one
        given back in a transaction all the same."""
        pool = self._pool
        if self.closed or pool is None:
            raise StoreError(f"{context}: {self.location.shown} was closed")
        with self.translate(context):
            conn = pool.getconn()
            try:
                yield conn
            finally:
                pool.putconn(conn)

    @contextlib.contextmanager
    def cursor(self, context: str, *, write: bool = False) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor on a pooled connection; ``write``: inside one transaction (committed
        when the block ends, rolled back on any exception)."""
        with self.connection(context) as conn:
            if write:
                with conn.transaction(), conn.cursor() as cur:
                    yield cur
            else:
                with conn.cursor() as cur:
                    yield cur

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._pool is not None:
            with contextlib.suppress(Exception):
                self._pool.close()
