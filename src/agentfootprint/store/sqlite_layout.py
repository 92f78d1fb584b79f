"""Storage layouts of the SQLite log: the schema DDL, schema 2's row codec, one class per layout.

Schema 1 keeps every row as written (``events``). Schema 2 (docs/log-format.md section 4)
keeps the same rows with nothing a reader cannot rebuild byte for byte: an integer run key,
type codes, a chain head per batch, compact empty commit markers. This module holds what
defines the layouts, turns schema-2 rows back into :class:`StoredEvent` s, and
:class:`SchemaV1Layout` / :class:`SchemaV2Layout`, each one layout's inserts, reads and run
index query behind :class:`Layout` (schema 4, one row per append, is
:mod:`agentfootprint.store.sqlite_appends`); :mod:`agentfootprint.store.sqlite` holds the
store, which picks one layout when it opens a file and never asks which again.
"""

from __future__ import annotations

import abc
import functools
import re
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import orjson

from agentfootprint.errors import StoreConflictError, StoreError
from agentfootprint.logformat.canonical import MAX_SAFE_INT, canon
from agentfootprint.logformat.chain import CLOSING_TYPES, DERIVED, GENESIS, chain_hash, event_hash
from agentfootprint.store.base import (
    LinkedEvent,
    StoredEvent,
    answered_pause,
    refuse_second_answer,
    run_index_from_open,
)

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

#: Schema 2, the leaner layout (docs/log-format.md section 4): a new file gets it whole, as
#: one migration; a schema-1 file is never migrated to it (no row is ever rewritten).
#: ``rows.pos`` is ``run_key * 2**32 + seq`` (one integer key: no index beside the table);
#: ``type`` a code (:data:`TYPE_CODES`); ``ts`` NULL when it equals the ``ts`` of the row
#: before in the same batch; ``head`` the chain hash on the last row of each batch (NULL
#: elsewhere: the reader recomputes every event hash and chain link from the rows);
#: ``body`` NULL for an empty commit marker whose canonical body is rebuilt, byte for byte,
#: from ``stage``, ``commit_no`` and ``stage_k``.
SCHEMA_V2: tuple[int, str, tuple[str, ...]] = (
    2,
    "leaner rows: run keys, type codes, chain heads per batch, compact empty commits",
    (
        """CREATE TABLE run_keys (
            run_key INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE
        )""",
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL,
            parent_run_id TEXT,
            opened_at INTEGER NOT NULL
        )""",
        "CREATE INDEX runs_by_conversation ON runs (conversation_id, opened_at)",
        """CREATE TABLE rows (
            pos INTEGER PRIMARY KEY,
            type INTEGER NOT NULL,
            ts INTEGER,
            body BLOB,
            head BLOB,
            stage TEXT,
            commit_no INTEGER,
            stage_k INTEGER
        )""",
        *(
            f"""CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table}
                BEGIN SELECT RAISE(ABORT, '{_APPEND_ONLY}'); END"""
            for table in ("rows", "run_keys", "runs")
            for verb in ("UPDATE", "DELETE")
        ),
    ),
)
#: Schema 4, one row per append (docs/log-format.md section 4; its records are
#: :mod:`agentfootprint.store.sqlite_appends`): created whole in a new file, never migrated to.
SCHEMA_V4: tuple[int, str, tuple[str, ...]] = (
    4,
    "appends: one row per append, compact records",
    (
        "CREATE TABLE run_keys (run_key INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE)",
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL,
            parent_run_id TEXT,
            opened_at INTEGER NOT NULL
        )""",
        "CREATE INDEX runs_by_conversation ON runs (conversation_id, opened_at)",
        "CREATE TABLE names (id INTEGER PRIMARY KEY, text TEXT NOT NULL)",
        "CREATE TABLE opens (id INTEGER PRIMARY KEY, prefix BLOB NOT NULL, "
        "middle BLOB NOT NULL, suffix BLOB NOT NULL)",
        "CREATE TABLE appends (pos INTEGER PRIMARY KEY, count INTEGER NOT NULL, "
        "ts INTEGER NOT NULL, head BLOB NOT NULL, data BLOB NOT NULL)",
        *(
            f"""CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table}
                BEGIN SELECT RAISE(ABORT, '{_APPEND_ONLY}'); END"""
            for table in ("appends", "run_keys", "runs", "names", "opens")
            for verb in ("UPDATE", "DELETE")
        ),
    ),
)
#: the page size a new schema-4 file is created with (set before its first table)
PAGE_SIZE = 8192
#: The highest schema this library reads and continues: 4, one row per append
#: (:mod:`agentfootprint.store.sqlite_appends`). (3 is the seal log,
#: :mod:`agentfootprint.store.seal_log`, added by a file's first sealed append whatever its
#: layout.)
SCHEMA_VERSION = 4
#: The schema a new (missing, empty or tableless) file is created with: schema 4, one row
#: per append (about half the bytes of schema 2's leaner rows). Files of the others are read,
#: continued and verified as they are; a test about one layout's bytes creates its files with
#: ``agentfootprint.testing.tamper.new_file_schema(n)``.
NEW_FILE_SCHEMA = 4
#: ``rows.type`` of schema 2.
TYPE_CODES: dict[str, int] = {
    "run.open": 1,
    "write": 2,
    "receipt": 3,
    "event": 4,
    "commit": 5,
    "run.close": 6,
    "run.seal": 7,
}
_TYPE_NAMES = {code: name for name, code in TYPE_CODES.items()}
_NAME_SET = frozenset(_TYPE_NAMES.values())
_COMMIT_CODE = TYPE_CODES["commit"]
_SEQ_BITS = 32
_SEQ_MASK = (1 << _SEQ_BITS) - 1


# -- schema 2 rows ------------------------------------------------------------------------

#: the run id named for rows whose ``run_key`` has no ``run_keys`` row (a crafted file): a lone
#: surrogate, so never a run id a writer could record (the verifier fails it, code rows)
_ORPHAN = "\udcffrun_key="


def _orphan_name(key: Any) -> str:
    return f"{_ORPHAN}{key}"


def _orphan_key(run_id: str) -> int | None:
    if isinstance(run_id, str) and run_id.startswith(_ORPHAN):
        digits = run_id[len(_ORPHAN) :]
        if digits.lstrip("-").isdigit():
            return int(digits)
    return None


def _checked_links(event: StoredEvent, head: bytes, *, last: bool) -> bytes:
    """Schema 2 keeps no event hash and, but on a batch's last row, no chain hash: refuse a
    row whose dropped values do not follow from it (the reader would yield other ones). A
    :class:`LinkedEvent`'s event hash follows from it by construction: it is not hashed
    again (its link to the stored head still is checked)."""
    if type(event) is LinkedEvent:
        digest = event.event_hash
    else:
        try:
            digest = event_hash(event.run_id, event.seq, event.type, event.ts, event.body)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"run {event.run_id} seq {event.seq}: cannot hash the row ({exc})"
            ) from exc
    if type(event.chain_hash) is not bytes or len(event.chain_hash) != 32:
        raise StoreError(f"run {event.run_id} seq {event.seq}: chain_hash is not 32 bytes")
    if digest != event.event_hash or (not last and chain_hash(head, digest) != event.chain_hash):
        raise StoreError(
            f"run {event.run_id} seq {event.seq}: its event hash or chain link does not follow "
            "from the row (schema 2 stores only what the chain recomputes)"
        )
    return bytes(event.chain_hash)


def _commit_body(stage: str, number: int, k: int) -> bytes:
    """The canonical body of an empty commit marker."""
    quoted = _plain_quoted(stage) if type(stage) is str else None
    if quoted is not None and type(k) is int:  # then "<stage>#<k>" is plain too
        return b'{"commit":%d,"stage":%s,"stage_run":%s#%d","writes":0}' % (
            number,
            quoted,
            quoted[:-1],
            k,
        )
    return b'{"commit":%d,"stage":%s,"stage_run":%s,"writes":0}' % (
        number,
        canon(stage),
        canon(f"{stage}#{k}"),
    )


@functools.lru_cache(maxsize=256)
def _plain_quoted(text: str) -> bytes | None:
    """``canon(text)`` of printable ASCII with nothing to escape (every stage name the runtime
    writes): the text in quotes, which is what RFC 8785 writes for it. None for other text."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return b'"' + text.encode("ascii") + b'"'
    return None


#: an empty marker whose stage is printable ASCII with nothing to escape (what
#: :func:`_commit_body` writes for it); whatever it matches is still rebuilt and compared
_PLAIN_MARKER = re.compile(
    rb'\{"commit":([0-9]{1,16}),"stage":"([ !#-\[\]-~]*)",'
    rb'"stage_run":"\2#([0-9]{1,16})","writes":0\}'
)


def _compact_commit(event: StoredEvent) -> tuple[str, int, int] | None:
    """``(stage, commit, k)`` of an empty commit marker whose body is exactly
    :func:`_commit_body` of them; None for every other row (stored as it is)."""
    if event.type != "commit" or len(event.body) > 512 or b'"writes":0}' not in event.body:
        return None
    plain = _PLAIN_MARKER.fullmatch(event.body) if type(event.body) is bytes else None
    if plain is not None:  # the runtime's markers: the candidates read without a JSON parse
        number, k = int(plain[1]), int(plain[3])
        if number > MAX_SAFE_INT or k > MAX_SAFE_INT:
            return None
        stage = plain[2].decode("ascii")
        return (stage, number, k) if _commit_body(stage, number, k) == event.body else None
    return _parsed_marker(event.body)


def _parsed_marker(data: bytes) -> tuple[str, int, int] | None:
    """:func:`_compact_commit` for any marker body: parsed as JSON, then rebuilt."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict) or set(body) != {"commit", "stage", "stage_run", "writes"}:
        return None
    stage, number, run = body["stage"], body["commit"], body["stage_run"]
    if not (isinstance(stage, str) and type(number) is int and isinstance(run, str)):
        return None
    prefix, _, k_text = run.rpartition("#")
    if prefix != stage or not k_text.isascii() or not k_text.isdigit():
        return None
    k = int(k_text)
    if not 0 <= number <= MAX_SAFE_INT or k > MAX_SAFE_INT:
        return None
    try:
        rebuilt = _commit_body(stage, number, k)
    except (TypeError, ValueError):
        return None
    return (stage, number, k) if rebuilt == data else None


def _whole(run_id: str, rows: list[tuple[Any, ...]], previous: Any) -> list[tuple[Any, ...]]:
    """Rows as :func:`_decoded` gives them with every :data:`DERIVED` value computed, byte-
    identical to schema 1's rows: the event hash (as
    :func:`~agentfootprint.logformat.chain.event_hash` computes it) and the chain link from the
    row before (``previous`` before the first: the head stored before it, or GENESIS). Values a
    sound writer never stores reach the verifier as they are (or as an empty hash it refuses),
    never an exception."""
    out: list[tuple[Any, ...]] = []
    try:
        canon(run_id)
        hashable = True
    except (TypeError, ValueError):  # not text a writer can record: nothing is hashed
        hashable = False
    for row in rows:
        _, seq, type_, ts, body, digest, head = row
        if digest is DERIVED:
            digest = b""
            if (
                hashable
                and type(type_) is str
                and type_ in _NAME_SET
                and type(ts) is int
                and -MAX_SAFE_INT <= ts <= MAX_SAFE_INT
                and type(body) is bytes
            ):
                digest = event_hash(run_id, seq, type_, ts, body)
        if head is DERIVED:
            whole = type(previous) is bytes and len(previous) == 32 and len(digest) == 32
            head = chain_hash(previous, digest) if whole else b""
        out.append((run_id, seq, type_, ts, body, digest, head))
        previous = head
    return out


def _decoded(run_id: str, base: int, rows: list[Any]) -> list[tuple[Any, ...]]:
    """Schema-2 rows decoded (docs/log-format.md section 4), hashing nothing: tuples
    ``(run_id, seq, type, ts, body, DERIVED, chain_hash)``, the type named, a NULL ``ts``
    taken from the row before in its batch, an empty commit body rebuilt, ``chain_hash`` the
    stored head where there is one and else :data:`DERIVED` (the link the reader computes),
    but None on a run's last row without a head. What :func:`_whole` completes for
    ``SqliteStore.read`` and ``SqliteStore.chain_rows`` hands the verifier as it is."""
    out: list[tuple[Any, ...]] = []
    add, names, derived = out.append, _TYPE_NAMES, DERIVED
    ts: Any = None
    last = len(rows) - 1
    for index, (pos, code, stored_ts, stored_body, stored_head, stage, number, k) in enumerate(
        rows
    ):
        type_: Any = names.get(code) if type(code) is int else None
        if type_ is None:
            type_ = f"{code!r} (not a schema 2 type code)" if isinstance(code, str) else code
        if stored_ts is not None:
            ts = stored_ts
        body = stored_body if type(stored_body) is bytes else _bytes_or_as_stored(stored_body)
        if stage is not None or number is not None or k is not None:
            # the commit columns stand for an empty marker's body, on a commit row only
            compact = stored_body is None and code == _COMMIT_CODE
            body = _rebuilt_commit(stage, number, k) if compact else None
        if stored_head is None:
            # a run's last row always carries its head (a batch ends there): without one,
            # nothing stored would bind the rows, so the row is not one a writer stored
            add((run_id, pos - base, type_, ts, body, derived, None if index == last else derived))
        else:
            head = stored_head if type(stored_head) is bytes else _bytes_or_as_stored(stored_head)
            add((run_id, pos - base, type_, ts, body, derived, head))
            ts = None  # a head ends a batch: the next row carries its own ts
    return out


@functools.lru_cache(maxsize=1024, typed=True)  # the runs of a conversation repeat markers
def _rebuilt_commit(stage: Any, number: Any, k: Any) -> bytes | None:
    if not (isinstance(stage, str) and type(number) is int and type(k) is int):
        return None
    if not (0 <= number <= MAX_SAFE_INT and 0 <= k <= MAX_SAFE_INT):
        return None
    try:
        return _commit_body(stage, number, k)
    except (TypeError, ValueError):
        return None


def _bytes_or_as_stored(value: Any) -> Any:
    """BLOB values as ``bytes``; anything else (a TEXT body of a crafted file) as stored, so
    the verifier can say what is wrong with it."""
    return bytes(value) if isinstance(value, bytes | memoryview) else value


def _first(row: tuple[Any, ...]) -> Any:
    return row[0]


def _named_run(row: tuple[Any, Any]) -> Any:
    """A run's id from ``(run_key, run_keys.run_id)``; an orphan key's reference name."""
    return row[1] if row[1] is not None else _orphan_name(row[0])


def _undecodable_text(data: bytes) -> str:
    """TEXT as Python reads it when it is not UTF-8: its bytes kept as lone surrogates."""
    return data.decode("utf-8", "surrogateescape")


def fetch_all(
    conn: sqlite3.Connection,
    sql: str,
    args: tuple[Any, ...] = (),
    each: Callable[[Any], Any] | None = None,
) -> list[Any]:
    """Rows as stored (or ``each`` of every row, taken as the cursor gives it: a long listing
    holds its results, not every row tuple too). A TEXT value that is not UTF-8 (a crafted
    file) makes the driver refuse the whole query; it is read again with such text decoded
    with ``surrogateescape``, so the value reaches the verifier (which fails that row, code
    ``rows``) instead of failing every run of the file."""

    def read() -> list[Any]:
        cursor = conn.execute(sql, args)
        return cursor.fetchall() if each is None else [each(row) for row in cursor]

    try:
        return read()
    except sqlite3.OperationalError as exc:
        if "decode to UTF-8" not in str(exc):
            raise
    conn.text_factory = _undecodable_text
    try:
        return read()
    finally:
        conn.text_factory = str


# -- the layouts ----------------------------------------------------------------------------

#: what one append transaction wrote of each run, kept by the layout once it committed:
#: schema 2's ``(run_key, head)`` (schema 1 keeps nothing beside the next seq)
Pending = dict[str, tuple[int, bytes]]


class Layout(abc.ABC):
    """One storage schema's way of keeping a log's rows: its inserts, its reads, its run
    index query. :class:`~agentfootprint.store.sqlite.SqliteStore` picks one when it opens a
    file (``_read_layout``, the one place that looks at the schema number) and from then on
    calls it without asking which it is: a file keeps the layout it was created with.

    One instance per opened file: it also holds what the store remembers of each run it
    appended to (its next seq, so an append need not ask the database for the run's length;
    another writer appending to the same run is caught by the row's key, as a conflict).
    Every method runs under the store's lock and its
    :func:`~agentfootprint.store.sqlite_files.translate_errors`, on the connection given.
    """

    #: the storage schema (``SqliteStore.layout``)
    number: ClassVar[int]
    #: each run's index entry joined with its last row: ``run_id, conversation_id,
    #: parent_run_id, opened_at``, the event count, the last type as stored, the head
    info_query: ClassVar[str]

    def __init__(self) -> None:
        self._next_seq: dict[str, int] = {}

    @abc.abstractmethod
    def insert(
        self,
        conn: sqlite3.Connection,
        events: Sequence[StoredEvent],
        earlier: Sequence[Sequence[StoredEvent]],
        pending: Pending,
    ) -> None:
        """One checked batch of one run, inserted after ``earlier`` (the batches before it
        in this transaction); a batch not at the run's end raises
        :class:`StoreConflictError`."""

    def appended(self, events: Sequence[StoredEvent], pending: Pending) -> None:
        """After the transaction committed: the run's next seq (forgotten once it closed)."""
        last = events[-1]
        if last.type in CLOSING_TYPES:
            self._next_seq.pop(last.run_id, None)
        else:
            self._next_seq[last.run_id] = last.seq + 1

    @staticmethod
    def _check_at_end(first: StoredEvent, count: int) -> None:
        """A batch goes at the run's end (``count`` rows held), or it is a conflict."""
        if count != first.seq:
            raise StoreConflictError(
                f"run {first.run_id}: append at seq {first.seq} but the run has {count} events"
            )

    def _index_run(self, conn: sqlite3.Connection, first: StoredEvent) -> None:
        """A new run's index entry, from its ``run.open`` (never evidence)."""
        conversation, parent = run_index_from_open(first)
        answering = answered_pause(first)
        if answering is not None:  # one answer per pause, in the appending transaction
            others = conn.execute(
                self.info_query + " WHERE r.parent_run_id = ? AND r.run_id <> ?",
                (answering.parent, first.run_id),
            ).fetchall()
            refuse_second_answer(
                first.run_id,
                answering,
                [(row[0], self.type_name(row[5]) in CLOSING_TYPES) for row in others],
            )
        conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?)", (first.run_id, conversation, parent, first.ts)
        )

    @abc.abstractmethod
    def stored_rows(
        self, conn: sqlite3.Connection, run_id: str, start: int
    ) -> list[tuple[Any, ...]]:
        """``SqliteStore.stored_rows``: the run's rows from seq ``start`` on, 7 values each,
        as the file holds them."""

    def completed(self, run_id: str, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """:meth:`stored_rows` with every value a reader computes filled in (for ``read``)."""
        return rows

    def type_name(self, stored: Any) -> Any:
        """A row's type as :attr:`info_query` gives it, named."""
        return stored

    @abc.abstractmethod
    def run_ids(self, conn: sqlite3.Connection) -> list[str]:
        """Every run with a row, in the order of their first rows (the events, never the
        run index)."""


class SchemaV1Layout(Layout):
    """Schema 1: every row kept as written in ``events``, keyed ``(run_id, seq)``. Files
    created with it are read, continued and verified as they are, never migrated."""

    number = 1
    info_query = (
        "SELECT r.run_id, r.conversation_id, r.parent_run_id, r.opened_at, "
        "e.seq + 1, e.type, e.chain_hash FROM runs r JOIN events e "
        "ON e.run_id = r.run_id AND e.seq = "
        "(SELECT MAX(seq) FROM events WHERE run_id = r.run_id)"
    )
    _ROWS = (
        "SELECT run_id, seq, type, ts, body, event_hash, chain_hash FROM events "
        "WHERE run_id = ? AND seq >= ? ORDER BY seq"
    )

    def insert(
        self,
        conn: sqlite3.Connection,
        events: Sequence[StoredEvent],
        earlier: Sequence[Sequence[StoredEvent]],
        pending: Pending,
    ) -> None:
        first = events[0]
        count = self._next_seq.get(first.run_id)
        if count is None or any(b[0].run_id == first.run_id for b in earlier):
            (count,) = conn.execute(
                "SELECT COALESCE(MAX(seq), -1) + 1 FROM events WHERE run_id = ?", (first.run_id,)
            ).fetchone()
        self._check_at_end(first, count)
        if first.seq == 0:
            self._index_run(conn, first)
        conn.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(e.run_id, e.seq, e.type, e.ts, e.body, e.event_hash, e.chain_hash) for e in events],
        )

    def stored_rows(
        self, conn: sqlite3.Connection, run_id: str, start: int
    ) -> list[tuple[Any, ...]]:
        return fetch_all(conn, self._ROWS, (run_id, start))

    def run_ids(self, conn: sqlite3.Connection) -> list[str]:
        return fetch_all(
            conn, "SELECT run_id FROM events GROUP BY run_id ORDER BY MIN(rowid)", each=_first
        )


class SchemaV2Layout(Layout):
    """Schema 2 (docs/log-format.md section 4): the rows of :data:`SCHEMA_V2`, with nothing
    stored that a reader cannot rebuild byte for byte. An insert recomputes each dropped hash
    (:func:`_checked_links`) to refuse rows that would not read back as given; a read decodes
    (:func:`_decoded`) and leaves the dropped values :data:`DERIVED` for whoever reads."""

    number = 2
    info_query = (
        "SELECT r.run_id, r.conversation_id, r.parent_run_id, r.opened_at, "
        f"(e.pos & {_SEQ_MASK}) + 1, e.type, e.head FROM runs r "
        "JOIN run_keys k ON k.run_id = r.run_id JOIN rows e "
        "ON e.pos = (SELECT MAX(pos) FROM rows WHERE pos BETWEEN "
        f"(k.run_key << {_SEQ_BITS}) AND ((k.run_key << {_SEQ_BITS}) | {_SEQ_MASK}))"
    )

    def __init__(self) -> None:
        super().__init__()
        #: each run's key and head after this store's last append to it
        self._heads: dict[str, tuple[int, bytes]] = {}

    #: what the layout's messages call it, and the stored unit that ends with a chain head
    shown_as = "schema 2"
    head_holder = "row"
    #: the table keyed by ``pos`` (run key << 32 | seq): the runs are found from it
    positions = "rows"

    def _begin_append(
        self, conn: sqlite3.Connection, events: Sequence[StoredEvent], pending: Pending
    ) -> tuple[int, bytes]:
        """The run's key and chain head before ``events``, after the checks every append
        makes (a new run is keyed and indexed here)."""
        first = events[0]
        run_id = first.run_id
        key, count, head = self._tail(conn, run_id, pending)
        self._check_at_end(first, count)
        if events[-1].seq > _SEQ_MASK:
            raise StoreError(
                f"run {run_id}: seq {events[-1].seq} is past {self.shown_as}'s 2**32 - 1"
            )
        if first.seq == 0:
            cursor = conn.execute("INSERT INTO run_keys (run_id) VALUES (?)", (run_id,))
            key, head = cursor.lastrowid, GENESIS
            self._index_run(conn, first)
        if key is None or head is None:
            raise StoreError(
                f"run {run_id}: its last stored {self.head_holder} holds no chain head: the "
                "file is damaged or was altered (verify it)"
            )
        return key, head

    def appended(self, events: Sequence[StoredEvent], pending: Pending) -> None:
        """The next seq, and the run's key and head (forgotten once it closed)."""
        super().appended(events, pending)
        last = events[-1]
        if last.type in CLOSING_TYPES:
            self._heads.pop(last.run_id, None)
        elif last.run_id in pending:
            self._heads[last.run_id] = pending[last.run_id]

    def _tail(
        self, conn: sqlite3.Connection, run_id: str, pending: Pending
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

    def insert(
        self,
        conn: sqlite3.Connection,
        events: Sequence[StoredEvent],
        earlier: Sequence[Sequence[StoredEvent]],
        pending: Pending,
    ) -> None:
        first = events[0]
        run_id = first.run_id
        key, head = self._begin_append(conn, events, pending)
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

    @staticmethod
    def _key_of(conn: sqlite3.Connection, run_id: str) -> int | None:
        orphan = _orphan_key(run_id)
        if orphan is not None:
            return orphan
        if not isinstance(run_id, str):
            return None
        try:
            row = fetch_all(conn, "SELECT run_key FROM run_keys WHERE run_id = ?", (run_id,))
        except UnicodeEncodeError:  # a crafted id read with surrogateescape: its bytes
            raw = run_id.encode("utf-8", "surrogateescape")
            row = fetch_all(
                conn, "SELECT run_key FROM run_keys WHERE CAST(run_id AS BLOB) = ?", (raw,)
            )
        return int(row[0][0]) if row and type(row[0][0]) is int else None

    def _stored(
        self, conn: sqlite3.Connection, run_id: str, start: int
    ) -> tuple[int, list[Any], Any]:
        """The run's stored rows from the last head before ``start`` on: the run's
        ``run_key << 32`` (-1 for no key), the rows and the chain hash before the first."""
        key = self._key_of(conn, run_id)
        base = -1 if key is None else key << _SEQ_BITS
        begin, previous = base, GENESIS
        if start > 0 and key is not None:
            # the rows are rebuilt from the last chain head stored before ``start``
            found = fetch_all(
                conn,
                "SELECT pos, head FROM rows WHERE pos >= ? AND pos < ? AND head IS NOT NULL "
                "ORDER BY pos DESC LIMIT 1",
                (base, base + min(start, _SEQ_MASK + 1)),
            )
            if found:
                begin, previous = int(found[0][0]) + 1, _bytes_or_as_stored(found[0][1])
        rows = (
            []
            if key is None
            else fetch_all(
                conn,
                "SELECT pos, type, ts, body, head, stage, commit_no, stage_k FROM rows "
                "WHERE pos BETWEEN ? AND ? ORDER BY pos",
                (begin, base | _SEQ_MASK),
            )
        )
        return base, rows, previous

    def stored_rows(
        self, conn: sqlite3.Connection, run_id: str, start: int
    ) -> list[tuple[Any, ...]]:
        """Decoded from the last stored head before ``start``, the rows before ``start``
        hashed only to give the first row whole."""
        base, rows, previous = self._stored(conn, run_id, start)
        decoded = _decoded(run_id, base, rows)
        if start == 0 or not decoded:
            return decoded
        before = start - decoded[0][1]  # rows read from the head before ``start``
        if before >= len(decoded):
            return []
        return [_whole(run_id, decoded[: before + 1], previous)[-1], *decoded[before + 1 :]]

    def completed(self, run_id: str, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return _whole(run_id, rows, GENESIS)

    def type_name(self, stored: Any) -> Any:
        return _TYPE_NAMES.get(stored) if type(stored) is int else None

    def run_ids(self, conn: sqlite3.Connection) -> list[str]:
        return fetch_all(
            conn,
            f"SELECT k.key, r.run_id FROM (SELECT pos >> {_SEQ_BITS} AS key, "
            f"MIN(pos) AS first FROM {self.positions} GROUP BY pos >> {_SEQ_BITS}) k "
            "LEFT JOIN run_keys r ON r.run_key = k.key ORDER BY k.first",
            each=_named_run,
        )
