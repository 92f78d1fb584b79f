"""Helpers for negative tests: damage a recorded SQLite log the way a forger would.

``tampering(path)`` opens the file with the append-only triggers dropped;
``rewrite(conn, run_id, rows)`` replaces a run's rows and recomputes every event hash
and chain link (what someone who can recompute hashes does), so that only the checks
that bind content (receipts, commitments, structure) are left to catch the change;
``verification_error(path, run_id)`` returns the error verification must raise.

They work on every storage schema (docs/log-format.md section 4): :func:`read_rows` yields
the rows a reader rebuilds, and :func:`rewrite` stores a run's rows in the file's own
layout. A test about the bytes of one layout (a flipped stored ``event_hash``, a row of the
``events`` table) records its file with :func:`new_file_schema` ``(1)``. In schema 4,
:func:`appends_of` gives a run's ``appends`` rows and :func:`set_append` changes one (a
record, a count, a head), the way a forger edits that layout's bytes.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import agentfootprint.store.sqlite as sqlite_store
from agentfootprint.errors import VerificationError
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.chain import GENESIS, chain_hash, event_hash
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.sqlite_layout import TYPE_CODES, _decoded, _whole
from agentfootprint.store.sqlite_records import RecordTables, decode_append, encode_whole
from agentfootprint.verify.verifier import Verifier

__all__ = [
    "TRIGGERS",
    "Append",
    "Row",
    "appends_of",
    "layout_of",
    "new_file_schema",
    "plain",
    "read_rows",
    "reencoded",
    "resealed",
    "rewrite",
    "scratch_copy",
    "set_append",
    "tampering",
    "verification_error",
]

#: the append-only triggers of every schema and the seal log (a file has those of its own)
TRIGGERS = tuple(
    f"{table}_no_{verb}"
    for table in ("events", "rows", "appends", "names", "opens", "run_keys", "runs", "seal_log")
    for verb in ("update", "delete")
)
_SEQ_BITS = 32
_SEQ_MASK = (1 << _SEQ_BITS) - 1


@contextmanager
def new_file_schema(schema: int) -> Iterator[None]:
    """New files created inside get storage schema ``schema`` (1, 2 or 4), for a test about
    one layout's bytes; the default is restored on exit."""
    store_globals = vars(sqlite_store)  # SqliteStore._migrate reads this module's global
    saved = store_globals["NEW_FILE_SCHEMA"]
    store_globals["NEW_FILE_SCHEMA"] = schema
    try:
        yield
    finally:
        store_globals["NEW_FILE_SCHEMA"] = saved


def layout_of(conn: sqlite3.Connection) -> int:
    """The storage schema of the log ``conn`` is open on: 4 if it has an ``appends`` table,
    2 if it has a ``rows`` table, else 1."""
    tables = {
        str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    return 4 if "appends" in tables else 2 if "rows" in tables else 1


def _run_key(conn: sqlite3.Connection, run_id: str) -> int | None:
    row = conn.execute("SELECT run_key FROM run_keys WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else int(row[0])


class Row(NamedTuple):
    """One stored event of a run, as the database holds it."""

    seq: int
    type: str
    ts: int
    body: bytes
    event_hash: bytes
    chain_hash: bytes

    @property
    def value(self) -> Any:
        return parse(self.body)


@contextmanager
def scratch_copy(path: Path, copy: Path) -> Iterator[Path]:
    """``copy``: a copy of the database at ``path``, removed afterwards (with its journals),
    so each tamper starts from the recorded bytes."""
    shutil.copyfile(path, copy)
    try:
        yield copy
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)


def read_rows(conn: sqlite3.Connection, run_id: str) -> list[Row]:
    """A run's rows in seq order, read with a raw connection (in schema 2, rebuilt as a
    reader rebuilds them: section 4)."""
    layout = layout_of(conn)
    if layout == 4:
        key = _run_key(conn, run_id)
        if key is None:
            return []
        tables = RecordTables(conn, run_id)
        decoded: list[tuple[Any, ...]] = []
        for append in appends_of(conn, run_id):
            decoded += decode_append(run_id, append.seq, *append[1:], tables)
        return [Row(*row[1:]) for row in _whole(run_id, decoded, GENESIS)]
    if layout == 2:
        key = _run_key(conn, run_id)
        if key is None:
            return []
        base = key << _SEQ_BITS
        stored = conn.execute(
            "SELECT pos, type, ts, body, head, stage, commit_no, stage_k FROM rows "
            "WHERE pos BETWEEN ? AND ? ORDER BY pos",
            (base, base + (1 << _SEQ_BITS) - 1),
        ).fetchall()
        return [Row(*row[1:]) for row in _whole(run_id, _decoded(run_id, base, stored), GENESIS)]
    return [
        Row(r[0], r[1], r[2], bytes(r[3]), bytes(r[4]), bytes(r[5]))
        for r in conn.execute(
            "SELECT seq, type, ts, body, event_hash, chain_hash FROM events "
            "WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
    ]


@contextmanager
def tampering(path: Path) -> Iterator[sqlite3.Connection]:
    """A raw connection with the append-only triggers dropped; committed on exit."""
    conn = sqlite3.connect(path)
    try:
        for trigger in TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        yield conn
        conn.commit()
    finally:
        conn.close()


def rewrite(conn: sqlite3.Connection, run_id: str, rows: Sequence[tuple[str, int, bytes]]) -> None:
    """Replace a run's rows by ``(type, ts, body)`` rows, renumbered and re-chained. In
    schema 2 every row keeps its ``ts`` and body as given and the last row the head (one
    batch: what the chain recomputes is not stored). In schema 4 the rows become one
    ``appends`` row, each body whole (form 0), with the last row's chain hash as its head."""
    layout = layout_of(conn)
    if layout == 4:
        _rewrite_v4(conn, run_id, rows)
        return
    if layout == 2:
        _rewrite_v2(conn, run_id, rows)
        return
    conn.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
    head = GENESIS
    for seq, (type_, ts, body) in enumerate(rows):
        digest = event_hash(run_id, seq, type_, ts, body)
        head = chain_hash(head, digest)
        conn.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
            (run_id, seq, type_, ts, body, digest, head),
        )


def _emptied(conn: sqlite3.Connection, run_id: str, table: str) -> int:
    """The first ``pos`` of ``run_id`` (keyed now when it has no key), its rows in ``table``
    (``rows``, schema 2, or ``appends``, schema 4) deleted."""
    key = _run_key(conn, run_id)
    if key is None:
        key = conn.execute("INSERT INTO run_keys (run_id) VALUES (?)", (run_id,)).lastrowid
        assert key is not None
    base: int = key << _SEQ_BITS
    conn.execute(f"DELETE FROM {table} WHERE pos BETWEEN ? AND ?", (base, base | _SEQ_MASK))
    return base


def _rewrite_v2(
    conn: sqlite3.Connection, run_id: str, rows: Sequence[tuple[str, int, bytes]]
) -> None:
    base = _emptied(conn, run_id, "rows")
    head = GENESIS
    for seq, (type_, ts, body) in enumerate(rows):
        head = chain_hash(head, event_hash(run_id, seq, type_, ts, body))
        conn.execute(
            "INSERT INTO rows (pos, type, ts, body, head) VALUES (?, ?, ?, ?, ?)",
            # a type with no code (a forged one) is stored as given: the reader hands it on
            (
                base + seq,
                TYPE_CODES.get(type_, type_),
                ts,
                body,
                head if seq == len(rows) - 1 else None,
            ),
        )


def _rewrite_v4(
    conn: sqlite3.Connection, run_id: str, rows: Sequence[tuple[str, int, bytes]]
) -> None:
    base = _emptied(conn, run_id, "appends")
    if not rows:
        return
    head, records, previous = GENESIS, [], rows[0][1]
    for seq, (type_, ts, body) in enumerate(rows):
        if type_ not in TYPE_CODES:
            raise ValueError(
                f"schema 4 records only the seven row types, not {type_!r}: record this "
                "test's file with new_file_schema(2)"
            )
        head = chain_hash(head, event_hash(run_id, seq, type_, ts, body))
        records.append(encode_whole(TYPE_CODES[type_], ts - previous, body))
        previous = ts
    conn.execute(
        "INSERT INTO appends VALUES (?, ?, ?, ?, ?)",
        (base, len(rows), rows[0][1], head, b"".join(records)),
    )


class Append(NamedTuple):
    """One ``appends`` row of a schema-4 file, as stored."""

    pos: int
    count: Any
    ts: Any
    head: Any
    data: Any

    @property
    def seq(self) -> int:
        """The seq of its first row."""
        return self.pos & _SEQ_MASK


def appends_of(conn: sqlite3.Connection, run_id: str) -> list[Append]:
    """A schema-4 run's ``appends`` rows in ``pos`` order (a raw connection)."""
    key = _run_key(conn, run_id)
    if key is None:
        return []
    base = key << _SEQ_BITS
    return [
        Append(*row)
        for row in conn.execute(
            "SELECT pos, count, ts, head, data FROM appends WHERE pos BETWEEN ? AND ? ORDER BY pos",
            (base, base | _SEQ_MASK),
        )
    ]


def set_append(conn: sqlite3.Connection, at: int, **columns: Any) -> None:
    """Change columns (``pos``, ``count``, ``ts``, ``head``, ``data``) of the ``appends`` row
    at position ``at``, nothing recomputed (inside :func:`tampering`)."""
    known = {"pos", "count", "ts", "head", "data"}
    if not columns or not set(columns) <= known:
        raise ValueError(f"set_append: columns among {sorted(known)}, not {sorted(columns)}")
    assignments = ", ".join(f"{name} = ?" for name in columns)
    conn.execute(f"UPDATE appends SET {assignments} WHERE pos = ?", (*columns.values(), at))


def plain(rows: Sequence[Row]) -> list[tuple[str, int, bytes]]:
    """Rows as the ``(type, ts, body)`` triples :func:`rewrite` takes."""
    return [(r.type, r.ts, r.body) for r in rows]


def reencoded(row: Row, change: Callable[[dict[str, Any]], None]) -> tuple[str, int, bytes]:
    """``row`` with its body changed by ``change`` and canonicalised again."""
    body = row.value
    change(body)
    return (row.type, row.ts, canon(body))


def verification_error(path: Path, run_id: str) -> VerificationError:
    """Verify ``run_id`` in the database at ``path``, expecting it to fail; the error."""
    store = SqliteStore(path)
    try:
        with pytest.raises(VerificationError) as info:
            Verifier(store).verify(run_id)
    finally:
        store.close()
    error = info.value
    assert error.run_id == run_id
    return error


def resealed(path: Path, run_id: str, signer: Any, answer: str = "a better answer") -> None:
    """The signing key holder's rewrite: the run's final answer edited, every hash
    recomputed and the run sealed again with ``signer``. The run still verifies VALID under
    that key; only a checkpoint taken before the rewrite shows it (its leaf changed)."""
    from agentfootprint.seal import parse_envelope, seal_run  # the runtime's, not the verifier's
    from agentfootprint.seal.facts import final_answer_digest
    from agentfootprint.seal.statement import SealFacts, parse_statement

    with tampering(path) as conn:
        *kept, seal = read_rows(conn, run_id)

        def change(body: dict[str, Any]) -> None:
            body["value"] = answer

        at = next(
            i for i, r in enumerate(kept) if r.type == "write" and r.value["path"] == "final_answer"
        )
        triples = plain(kept)
        triples[at] = reencoded(kept[at], change)
        rewrite(conn, run_id, triples)
        closed = read_rows(conn, run_id)
        facts = parse_statement(parse_envelope(seal.value["dsse"]).payload)
        forged = SealFacts(
            **{
                **facts.__dict__,
                "head": closed[-1].chain_hash.hex(),
                "final_answer_digest": final_answer_digest({"final_answer": answer}),
            }
        )
        body = canon({"dsse": seal_run(forged, signer).decode()})
        rewrite(conn, run_id, [*triples, ("run.seal", seal.ts, body)])
