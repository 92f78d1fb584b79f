"""Storage schema 4 of the SQLite log: one row per append, its rows as compact records.

docs/log-format.md section 4 is the normative text. An append (the rows one transaction wrote
of one run) is one ``appends`` row: ``pos = run_key << 32 | first seq``, ``count``, the first
row's ``ts``, the chain ``head`` after its last row, and ``data``, one record per row. A record
holds either the body whole (form 0) or, for the four row types a writer makes most (write,
commit marker, receipt, a continued run's ``run.open``), the fields the body is rebuilt from
(form 1): :mod:`agentfootprint.store.sqlite_records`. The reader recomputes every event hash
and chain link, as for schema 2, and only the append's last chain hash is stored.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from agentfootprint.errors import StoreError
from agentfootprint.logformat.chain import GENESIS
from agentfootprint.store.base import StoredEvent
from agentfootprint.store.sqlite_layout import (
    TYPE_CODES,
    Pending,
    SchemaV2Layout,
    _bytes_or_as_stored,
    _checked_links,
    _whole,
    fetch_all,
)
from agentfootprint.store.sqlite_records import (
    NameIds,
    RecordEncoder,
    RecordTables,
    decode_append,
    last_type,
)

__all__ = ["MAX_DATA_BYTES", "SchemaV4Layout"]

#: a writer starts another ``appends`` row before ``data`` passes this many bytes
MAX_DATA_BYTES: Final = 256 * 1024 * 1024

_SEQ_BITS = 32
_SEQ_MASK = (1 << _SEQ_BITS) - 1
#: an append's ``data`` of at least this many bytes is written into its row in place
_JOINED_BELOW = 1 << 20


# -- the layout ------------------------------------------------------------------------------------


class SchemaV4Layout(SchemaV2Layout):
    """Schema 4 (docs/log-format.md section 4): one ``appends`` row per append. The insert
    checks each dropped hash as schema 2 does (:func:`_checked_links`); a read decodes
    (:func:`decode_append`) and leaves every hash but the appends' heads :data:`DERIVED`."""

    number = 4
    shown_as = "schema 4"
    head_holder = "append"
    positions = "appends"
    #: column 5 is the last append's ``data``, its last row named by :meth:`type_name`
    info_query = (
        "SELECT r.run_id, r.conversation_id, r.parent_run_id, r.opened_at, "
        f"(e.pos & {_SEQ_MASK}) + e.count, e.data, e.head "
        "FROM runs r JOIN run_keys k ON k.run_id = r.run_id JOIN appends e "
        "ON e.pos = (SELECT MAX(pos) FROM appends WHERE pos BETWEEN "
        f"(k.run_key << {_SEQ_BITS}) AND ((k.run_key << {_SEQ_BITS}) | {_SEQ_MASK}))"
    )

    def __init__(self) -> None:
        super().__init__()
        self._names = NameIds()
        #: ``names`` rows this store has read (the reader's side of the same table)
        self._known_names: dict[int, bytes] = {}

    def appended(self, events: Sequence[StoredEvent], pending: Pending) -> None:
        super().appended(events, pending)
        self._names.committed()

    def _tail(
        self, conn: sqlite3.Connection, run_id: str, pending: Pending
    ) -> tuple[int | None, int, bytes | None]:
        if run_id not in pending and run_id in self._heads and run_id in self._next_seq:
            key, head = self._heads[run_id]
            return key, self._next_seq[run_id], head
        if run_id in pending:
            key = pending[run_id][0]
        else:
            row = conn.execute("SELECT run_key FROM run_keys WHERE run_id = ?", (run_id,))
            found = row.fetchone()
            if found is None:
                return None, 0, None
            key = int(found[0])
        base = key << _SEQ_BITS
        last = conn.execute(
            "SELECT pos, count, head FROM appends WHERE pos BETWEEN ? AND ? "
            "ORDER BY pos DESC LIMIT 1",
            (base, base | _SEQ_MASK),
        ).fetchone()
        if last is None:
            return key, 0, None
        count, head = last[1], _bytes_or_as_stored(last[2])
        if type(count) is not int or count < 1 or type(head) is not bytes or len(head) != 32:
            return key, int(last[0]) - base + 1, None
        return key, int(last[0]) - base + count, head

    def insert(
        self,
        conn: sqlite3.Connection,
        events: Sequence[StoredEvent],
        earlier: Sequence[Sequence[StoredEvent]],
        pending: Pending,
    ) -> None:
        if not earlier:
            self._names.begin()  # ids a rolled-back transaction wrote are not named
        first = events[0]
        run_id = first.run_id
        key, head = self._begin_append(conn, events, pending)
        encoder = RecordEncoder(conn, self._names)
        parts: list[bytes] = []
        size = 0
        start = 0
        previous_ts = first.ts
        for offset, event in enumerate(events):
            last = offset == len(events) - 1
            head = _checked_links(event, head, last=last)
            if not isinstance(event.type, str) or event.type not in TYPE_CODES:
                raise StoreError(f"run {run_id} seq {event.seq}: unknown event type")
            # a record is its body and at most 21 bytes more (tag, delta, length)
            if parts and size + len(event.body) + 21 > MAX_DATA_BYTES:
                self._put(conn, key, events, start, offset, parts)
                parts, size, start, previous_ts = [], 0, offset, event.ts
            record = encoder.record(event, event.ts - previous_ts)
            previous_ts = event.ts
            parts += record
            size += sum(map(len, record))
        self._put(conn, key, events, start, len(events), parts)
        pending[run_id] = (key, events[-1].chain_hash)

    @staticmethod
    def _put(
        conn: sqlite3.Connection,
        key: int,
        events: Sequence[StoredEvent],
        start: int,
        end: int,
        parts: list[bytes],
    ) -> None:
        """One ``appends`` row: ``events[start:end]``, its head the last one's chain hash.
        Past :data:`_JOINED_BELOW` bytes its ``data`` is written into the row in place, part
        by part (SQLite's incremental blob I/O, inside the append's transaction), never
        joined in memory first: a 50 MB tool result is not copied once more."""
        first = events[start]
        pos = (key << _SEQ_BITS) | first.seq
        size = sum(map(len, parts))
        joined = size < _JOINED_BELOW
        conn.execute(
            "INSERT INTO appends VALUES (?, ?, ?, ?, " + ("?)" if joined else "zeroblob(?))"),
            (
                pos,
                end - start,
                first.ts,
                bytes(events[end - 1].chain_hash),
                b"".join(parts) if joined else size,
            ),
        )
        if not joined:
            with conn.blobopen("appends", "data", pos) as blob:
                for part in parts:
                    blob.write(part)

    def stored_rows(
        self, conn: sqlite3.Connection, run_id: str, start: int
    ) -> list[tuple[Any, ...]]:
        """Decoded from the append holding ``start`` on, its rows before ``start`` hashed
        only to give the first row whole (from the head of the append before it)."""
        key = self._key_of(conn, run_id)
        if key is None:
            return []
        base = key << _SEQ_BITS
        begin, previous = base, GENESIS
        if start > 0:
            found = fetch_all(
                conn,
                "SELECT pos FROM appends WHERE pos BETWEEN ? AND ? ORDER BY pos DESC LIMIT 1",
                (base, base + min(start, _SEQ_MASK)),
            )
            if found:
                begin = int(found[0][0])
                before = fetch_all(
                    conn,
                    "SELECT head FROM appends WHERE pos >= ? AND pos < ? ORDER BY pos DESC LIMIT 1",
                    (base, begin),
                )
                if before:
                    previous = _bytes_or_as_stored(before[0][0])
        stored = fetch_all(
            conn,
            "SELECT pos, count, ts, head, data FROM appends WHERE pos BETWEEN ? AND ? ORDER BY pos",
            (begin, base | _SEQ_MASK),
        )
        tables = RecordTables(conn, run_id, self._known_names)
        rows: list[tuple[Any, ...]] = []
        for pos, count, ts, head, data in stored:
            rows += decode_append(
                run_id,
                pos - base,
                count,
                ts,
                _bytes_or_as_stored(head),
                _bytes_or_as_stored(data),
                tables,
            )
        if start == 0 or not rows:
            return rows
        skip = next((i for i, row in enumerate(rows) if row[1] >= start), len(rows))
        if skip >= len(rows):
            return []
        return [_whole(run_id, rows[: skip + 1], previous)[-1], *rows[skip + 1 :]]

    def type_name(self, stored: Any) -> Any:
        return last_type(_bytes_or_as_stored(stored))
