"""Storage layouts of the SQLite log: the schema DDL and the schema-2 row codec.

Schema 1 keeps every row as written (``events``). Schema 2 (docs/log-format.md section 4)
keeps the same rows with nothing a reader cannot rebuild byte for byte: an integer run key,
type codes, a chain head per batch, compact empty commit markers. This module holds what
defines the layouts and turns schema-2 rows back into :class:`StoredEvent` s;
:mod:`agentfootprint.store.sqlite` holds the store that reads and writes them.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson

from agentfootprint.errors import StoreError
from agentfootprint.logformat.canonical import MAX_SAFE_INT, canon
from agentfootprint.logformat.chain import DERIVED, chain_hash, event_hash
from agentfootprint.store.base import LinkedEvent, StoredEvent

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
#: The highest schema this library reads and continues.
#: (3 is the seal log, :mod:`agentfootprint.store.seal_log`, added by a file's first sealed
#: append whatever its layout.)
SCHEMA_VERSION = 3
#: The schema a new (missing, empty or tableless) file is created with: the leaner layout.
#: Schema-1 files are read, continued and verified as they are; a test about schema-1 bytes
#: creates its files with ``agentfootprint.testing.tamper.new_file_schema(1)``.
NEW_FILE_SCHEMA = 2
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
