"""PostgreSQL backend (psycopg 3 and its connection pool): one log shared by many hosts.

The same logical tables as an SQLite file of schema 1 (docs/log-format.md section 4.2):
``events`` holds every row whole (``PRIMARY KEY (run_id, seq)``), ``runs`` the run index,
``seal_log`` one Merkle leaf per sealed run, ``schema_version`` the migrations applied. A flush
is one atomic write and one round trip (one statement, or for a sealing batch one pipeline:
one implicit transaction); two writers racing for one position cannot both win (the primary
key), and the loser's whole batch rolls back, so appends to different runs never wait for
each other and appends to one run never interleave. Sealing takes one transaction-scoped
advisory lock, so leaf indexes follow the order in which sealing transactions commit,
whatever the number of writers.

Append-only is enforced by the database itself: triggers refuse ``UPDATE``, ``DELETE`` and
``TRUNCATE`` on every table of the log, for every role (a superuser can still drop triggers;
docs/stores.md, "Operating PostgreSQL", gives the writer and auditor roles that cannot).
Driver errors become this library's in one place, :func:`translate_errors`.

Opening is fail-closed as for SQLite: an empty schema becomes a log, a log is used as it is
(a newer schema is refused), anything else is refused and left alone; ``readonly=True`` opens
read-only sessions and never creates or migrates anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from agentfootprint.errors import (
    NotALogError,
    RunNotFoundError,
    StoreConflictError,
    StoreError,
    UsageError,
)
from agentfootprint.logformat.chain import CLOSING_TYPES
from agentfootprint.store.base import (
    EventStore,
    IndexEntry,
    RunInfo,
    StoredEvent,
    agreed_durability,
    answered_pause,
    refuse_second_answer,
)
from agentfootprint.store.postgres_db import (
    APPEND_ONLY,
    LOCK_CLASS,
    Connections,
    check_pool_options,
    location_of,
    now_ms,
    recorded_version,
    schema_tables,
    translate_errors,
)
from agentfootprint.store.postgres_rows import register_arrays, statement, write_batch
from agentfootprint.store.postgres_url import PostgresLocation
from agentfootprint.store.seal_log import sealed_in

if TYPE_CHECKING:
    import psycopg

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore", "translate_errors"]

_LOCK_MIGRATE: Final = 1
_LOCK_SEAL: Final = 2
_LOCK_ANSWER: Final = 5
_TABLES: Final = ("events", "runs", "seal_log", "schema_version")

_REFUSE_FUNCTION = f"""
CREATE FUNCTION agentfootprint_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '{APPEND_ONLY}: % on % refused', TG_OP, TG_TABLE_NAME;
END
$$"""


def _append_only(table: str) -> tuple[str]:
    """A statement trigger: it refuses even a statement that would touch no row."""
    return (
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION agentfootprint_refuse_change()",
    )


#: (version, name, statements): the schema, recorded in ``schema_version`` as it is applied
MIGRATIONS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
    (
        1,
        "log: events, run index, seal log, append-only triggers",
        (
            """CREATE TABLE schema_version (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at bigint NOT NULL
            )""",
            """CREATE TABLE runs (
                position bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
                run_id text PRIMARY KEY,
                conversation_id text NOT NULL,
                parent_run_id text,
                opened_at bigint NOT NULL
            )""",
            """CREATE TABLE events (
                position bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
                run_id text NOT NULL,
                seq integer NOT NULL CHECK (seq >= 0),
                type text NOT NULL,
                ts bigint NOT NULL,
                body bytea NOT NULL,
                event_hash bytea NOT NULL,
                chain_hash bytea NOT NULL,
                PRIMARY KEY (run_id, seq)
            )""",
            """CREATE TABLE seal_log (
                leaf bigint PRIMARY KEY CHECK (leaf >= 0),
                run_id text NOT NULL UNIQUE,
                sealed_at bigint NOT NULL
            )""",
            _REFUSE_FUNCTION,
            *(statement for table in _TABLES for statement in _append_only(table)),
        ),
    ),
    (
        2,
        "events: position without its unique index",
        # the identity gives each row its own value already; the index cost every row an
        # index entry, a uniqueness check and its WAL (a sixth of the server's work for a
        # flush), and no query looks rows up by position
        ("ALTER TABLE events DROP CONSTRAINT IF EXISTS events_position_key",),
    ),
)
SCHEMA_VERSION: Final = MIGRATIONS[-1][0]
#: migrations a log is read and written the same without (they only make it cheaper): a
#: writer whose role may not apply them (not the tables' owner) uses the log as it is, and
#: the owner's ``agentfootprint init`` applies them
_OPTIONAL: Final = frozenset({2})
_COLUMNS: Final = {
    "events": {"position", "run_id", "seq", "type", "ts", "body", "event_hash", "chain_hash"},
    "runs": {"position", "run_id", "conversation_id", "parent_run_id", "opened_at"},
    "seal_log": {"leaf", "run_id", "sealed_at"},
    "schema_version": {"version", "name", "applied_at"},
}


class PostgresStore(EventStore):
    """A log in one PostgreSQL database (the tables of the connection's current schema).

    ``url``: ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?libpq parameters]``, with this
    library's ``durability=full|normal`` allowed in the query. ``durability`` (default
    ``"full"``): see :data:`DURABILITY`. ``pool_size``: connections kept open (writers and
    readers share them); ``timeout``: seconds to wait for a connection (a server that is down
    answers :class:`StoreUnavailableError` after it). ``readonly=True``: read-only sessions;
    never creates or migrates anything, refuses a database that is not a log.

    Thread-safe: one store may serve every run of a process. :meth:`append_async` runs the
    append on the store's own threads through the same pool, so one store serves every event
    loop (an asyncio pool belongs to the loop that opened it, and ``run_sync`` gives each call
    a loop of its own).
    """

    def __init__(
        self,
        url: str | PostgresLocation,
        *,
        readonly: bool = False,
        durability: str | None = None,
        pool_size: int = 4,
        timeout: float = 30.0,
    ) -> None:
        location = location_of(url)
        if location.key_file is not None:
            raise UsageError(
                "option 'url': key_file= names a vault's master key; a log takes none",
                option="url",
            )
        chosen = agreed_durability(durability, location.durability)
        check_pool_options(pool_size, timeout, readonly)
        self.location = location
        self.readonly = readonly
        self.durability = chosen or "full"
        self._db = Connections(
            location,
            durability=self.durability,
            readonly=readonly,
            timeout=float(timeout),
            name="agentfootprint-log",
            adapt=register_arrays,
        )
        #: the next seq of each open run this store appended to (another writer of the same
        #: run is caught by the primary key, as a conflict)
        self._next_seq: dict[str, int] = {}
        self._lock = threading.Lock()
        #: the connection of this thread's :meth:`snapshot`, while one is open
        self._pinned = threading.local()
        with translate_errors(f"opening {location.shown}"), self._db.connect() as conn:
            self._open_schema(conn)
        self._db.open_pool(pool_size)
        self._executor = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="af-pg")

    def __repr__(self) -> str:
        return f"PostgresStore({self.location.shown!r}, durability={self.durability!r})"

    @property
    def shown(self) -> str:
        """The database's URL without its password, for messages."""
        return self.location.shown

    # -- connections ----------------------------------------------------------------------
    @contextlib.contextmanager
    def _cursor(self, context: str, *, write: bool = False) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor on a pooled connection (a read inside this thread's :meth:`snapshot`:
        on its connection); ``write``: inside one transaction."""
        pinned = getattr(self._pinned, "conn", None)
        if pinned is not None and not write and not self._db.closed:
            with translate_errors(context), pinned.cursor() as cur:
                yield cur
            return
        with self._db.cursor(context, write=write) as cur:
            yield cur

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read of this thread inside the block sees the database as of one moment
        (one ``REPEATABLE READ READ ONLY`` transaction on one connection), however many
        writers commit meanwhile: a whole-database verification judges the runs, the index
        and the seal log of that moment."""
        if getattr(self._pinned, "conn", None) is not None:  # already inside one
            yield
            return
        with self._db.connection(f"reading {self.shown}") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self._pinned.conn = conn
            try:
                yield
            finally:
                self._pinned.conn = None

    # -- schema ---------------------------------------------------------------------------
    def _open_schema(self, conn: psycopg.Connection[Any]) -> None:
        tables = schema_tables(conn)
        if not tables:
            if self.readonly:
                raise NotALogError(
                    f"{self.shown} holds no log (its schema has no tables): name the "
                    "database that holds the runs"
                )
            self._migrate(conn)
            return
        self._check_kind(tables)
        version = recorded_version(conn, newest=SCHEMA_VERSION, what=self.shown)
        if version < SCHEMA_VERSION and not self.readonly:
            from psycopg import errors

            try:
                self._migrate(conn)
            except errors.InsufficientPrivilege:
                pending = {number for number, _, _ in MIGRATIONS if number > version}
                if version < 1 or not pending <= _OPTIONAL:
                    raise
                # not the tables' owner: the log serves as it is (rolled back, unchanged)

    def _check_kind(self, tables: dict[str, set[str]]) -> None:
        if tables == _COLUMNS:
            return
        if "disclosures" in tables or "vault_entries" in tables:
            what = "a disclosure vault"
        else:
            names = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
            what = f"a database holding other tables ({names})"
        raise NotALogError(
            f"{self.shown} is {what}, not an agentfootprint log; it was left unchanged: name "
            "a new, empty database (or schema) or an existing log"
        )

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Apply the migrations not yet recorded, in one transaction, one migrator at a
        time (an advisory lock: two hosts opening a new database at once)."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, _LOCK_MIGRATE))
            tables = schema_tables(conn)
            current = 0
            if tables:  # another opener won the race
                self._check_kind(tables)
                current = recorded_version(conn)
            for version, name, statements in MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version VALUES (%s, %s, %s)", (version, name, now_ms())
                )

    def schema_version(self) -> int:
        """The highest migration applied to this database."""
        with self._cursor("reading the schema version") as cur:
            return recorded_version(cur.connection)

    # -- appending ------------------------------------------------------------------------
    def _writable(self) -> None:
        if self.readonly:
            raise StoreError(
                f"{self.shown} was opened read-only: nothing can be appended (open it without "
                "readonly=True to record)"
            )

    def append(self, events: Sequence[StoredEvent]) -> None:
        """One batch, one round trip where this store knows where its run stands (it
        appended the run's earlier batches, or the batch opens the run): a batch that seals
        nothing is one statement, atomic by itself (the run index row travels in it when the
        batch opens its run); a sealing batch is one transaction sent as one pipeline (its
        rows, the seal lock, the leaf). Otherwise the run's length is read first, in the
        batch's transaction."""
        self._writable()
        self.check_batch(events)
        first = events[0]
        context = f"run {first.run_id} append at seq {first.seq}"
        with self._lock:
            count = self._next_seq.get(first.run_id)
        if first.seq != 0 and count is not None and count != first.seq:
            raise StoreConflictError(
                f"run {first.run_id}: append at seq {first.seq} but the run has {count} events"
            )
        sealed = sealed_in(events)
        answers = first.seq == 0 and answered_pause(first) is not None
        if (first.seq != 0 and count is None) or answers:
            with self._cursor(context, write=True) as cur, _seal_conflicts(sealed):
                self._insert(cur, events, ())
                self._seal(cur, sealed)
        elif not sealed:
            with self._db.connection(context) as conn:
                write_batch(conn, events)
        else:
            # one pipeline, one Sync: its statements are one implicit transaction, committed
            # at the Sync if all succeed, rolled back if any fails (the protocol's rule for a
            # pipeline without BEGIN); conn.transaction() would add two round trips
            with (
                self._db.connection(context) as conn,
                _seal_conflicts(sealed),
                conn.pipeline(),
                conn.cursor() as cur,
            ):
                cur.execute(*statement(events))
                self._seal(cur, sealed)
        self._appended(events)

    async def append_async(self, events: Sequence[StoredEvent]) -> None:
        """:meth:`append` on the store's own threads: the event loop serves other runs while
        the database answers (the run writer awaits it at each flush). A loop whose one task
        is the caller (``run_sync``: one run, its own loop) has nothing to serve meanwhile,
        so there the append runs in place and saves the handing over to a thread and back,
        a quarter of a flush's time on a busy machine."""
        if self._db.closed:
            raise StoreError("append: the store was closed")
        loop = asyncio.get_running_loop()
        if len(asyncio.all_tasks(loop)) <= 1:
            self.append(events)
            return
        await loop.run_in_executor(self._executor, self.append, events)

    def append_runs(self, batches: Iterable[Sequence[StoredEvent]]) -> None:
        """Every batch in one transaction: all kept, or none."""
        self._writable()
        written: list[Sequence[StoredEvent]] = []
        with self._cursor(f"atomic append to {self.shown}", write=True) as cur:
            for events in batches:
                self.check_batch(events)
                self._insert(cur, events, written)
                sealed = sealed_in(events)
                with _seal_conflicts(sealed):
                    self._seal(cur, sealed)
                written.append(events)
        for events in written:
            self._appended(events)

    def _insert(
        self,
        cur: psycopg.Cursor[Any],
        events: Sequence[StoredEvent],
        earlier: Sequence[Sequence[StoredEvent]],
    ) -> None:
        """A batch's rows inside the caller's transaction, after checking that it continues
        its run (read from the database when this store does not know the run's length, or
        an earlier batch of the transaction wrote to the same run)."""
        first = events[0]
        answering = answered_pause(first) if first.seq == 0 else None
        if answering is not None:
            # one answer per pause: answerers take turns under a lock, and the check reads
            # what committed before it (each statement of a READ COMMITTED transaction does)
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, _LOCK_ANSWER))
            others = cur.execute(
                self._INFO + " WHERE r.parent_run_id = %s AND r.run_id <> %s",
                (answering.parent, first.run_id),
            ).fetchall()
            refuse_second_answer(
                first.run_id, answering, [(row[0], row[5] in CLOSING_TYPES) for row in others]
            )
        if first.seq != 0:  # (the run index's primary key refuses a second opening)
            with self._lock:
                count = self._next_seq.get(first.run_id)
            if count is None or any(b[0].run_id == first.run_id for b in earlier):
                row = cur.execute(
                    "SELECT COALESCE(MAX(seq), -1) + 1 FROM events WHERE run_id = %s",
                    (first.run_id,),
                ).fetchone()
                count = int(row[0]) if row else 0
            if count != first.seq:
                raise StoreConflictError(
                    f"run {first.run_id}: append at seq {first.seq} but the run has {count} events"
                )
        cur.execute(*statement(events))

    @staticmethod
    def _seal(cur: psycopg.Cursor[Any], sealed: Sequence[str]) -> None:
        """The runs a batch seals get the next leaves, under the seal lock: leaf order is
        the order in which sealing transactions commit (docs/log-format.md section 4.1).
        The leaf is read by the statement that writes it, after the lock (each statement
        of a READ COMMITTED transaction sees what committed before it began), so the two
        need no answer in between and go in one pipeline."""
        for run_id in sealed:
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, _LOCK_SEAL))
            cur.execute(_SEAL_LEAF, (run_id, now_ms()))

    def _appended(self, events: Sequence[StoredEvent]) -> None:
        last = events[-1]
        with self._lock:
            if last.type in CLOSING_TYPES:
                self._next_seq.pop(last.run_id, None)
            else:
                self._next_seq[last.run_id] = last.seq + 1

    # -- reading --------------------------------------------------------------------------
    _ROWS: Final = (
        "SELECT run_id, seq, type, ts, body, event_hash, chain_hash FROM events "
        "WHERE run_id = %s AND seq >= %s ORDER BY seq"
    )

    def _fetch(self, context: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._cursor(context) as cur:
            return cur.execute(sql, args).fetchall()

    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        rows = self._fetch(f"reading run {run_id}", self._ROWS, (run_id, start))
        if not rows and start == 0:
            raise RunNotFoundError(f"no run {run_id!r} in {self.shown}")
        return map(StoredEvent.of_values, rows)

    _INFO: Final = (
        "SELECT r.run_id, r.conversation_id, r.parent_run_id, r.opened_at, "
        "e.seq + 1, e.type, e.chain_hash FROM runs r JOIN LATERAL "
        "(SELECT seq, type, chain_hash FROM events WHERE run_id = r.run_id "
        "ORDER BY seq DESC LIMIT 1) e ON true"
    )

    @staticmethod
    def _info(row: Any) -> RunInfo:
        return RunInfo(
            run_id=row[0],
            conversation_id=row[1],
            parent_run_id=row[2],
            opened_at=row[3],
            events=row[4],
            last_type=row[5],
            head=row[6],
        )

    def run_info(self, run_id: str) -> RunInfo:
        rows = self._fetch(f"reading run {run_id}", self._INFO + " WHERE r.run_id = %s", (run_id,))
        if not rows:
            raise RunNotFoundError(f"no run {run_id!r} in {self.shown}")
        return self._info(rows[0])

    def runs(self) -> list[RunInfo]:
        return [
            self._info(r) for r in self._fetch("listing runs", self._INFO + " ORDER BY r.position")
        ]

    def run_ids(self) -> list[str]:
        rows = self._fetch(
            "listing runs from the events",
            "SELECT run_id FROM events GROUP BY run_id ORDER BY MIN(position)",
        )
        return [row[0] for row in rows]

    def index_entries(self) -> list[IndexEntry]:
        rows = self._fetch(
            "reading the run index",
            "SELECT run_id, conversation_id, parent_run_id, opened_at FROM runs ORDER BY position",
        )
        return [
            IndexEntry(run_id=r[0], conversation_id=r[1], parent_run_id=r[2], opened_at=r[3])
            for r in rows
        ]

    def seal_log(self) -> list[tuple[object, object]]:
        rows = self._fetch(
            "reading the seal log", "SELECT leaf, run_id FROM seal_log ORDER BY leaf"
        )
        return [(leaf, run_id) for leaf, run_id in rows]

    def close(self) -> None:
        if self._db.closed:
            return
        self._executor.shutdown(wait=True)
        self._db.close()


_SEAL_LEAF: Final = (
    "INSERT INTO seal_log (leaf, run_id, sealed_at) "
    "SELECT COALESCE(MAX(leaf), -1) + 1, %s, %s FROM seal_log"
)


@contextlib.contextmanager
def _seal_conflicts(sealed: Sequence[str]) -> Iterator[None]:
    """A second leaf for a run (the seal log's unique run id) named as such, inside the
    driver's error translation (which would call it a taken position); any other error as
    it is."""
    from psycopg import errors

    try:
        yield
    except errors.UniqueViolation as exc:
        if exc.diag.table_name != "seal_log" or not sealed:
            raise
        raise StoreError(
            f"run {sealed[0]} is sealed already (it has a leaf in the seal log)"
        ) from exc
