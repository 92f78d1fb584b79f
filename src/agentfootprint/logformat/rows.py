"""The log row as a record: one type for every source of rows (a store, a bundle, the writer).

:class:`StoredEvent` is a row exactly as stored; :class:`LinkedEvent` a new row whose hashes
its one constructor computes. Both sit in the kernel so that the stores, the bundle reader and
the verifier share one record (``logformat.chain.Row`` is the protocol any of them satisfies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentfootprint.logformat.canonical import parse
from agentfootprint.logformat.chain import chain_hash, event_hash, row_values

__all__ = ["LinkedEvent", "StoredEvent"]


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredEvent:
    """One log row exactly as stored: ``body`` is the canonical bytes that were hashed.

    Read back from a file, each field is what the file holds, uncoerced (a TEXT body of a
    crafted file arrives as ``str``, not ``bytes``): the verifier judges the types.
    """

    run_id: str
    seq: int
    type: str
    ts: int
    body: bytes
    event_hash: bytes
    chain_hash: bytes

    def decoded(self) -> object:
        """The body parsed as JSON (fresh objects each call)."""
        return parse(self.body)

    @classmethod
    def of_values(cls, values: Any) -> StoredEvent:
        """The row of its 7 values in :class:`~agentfootprint.logformat.chain.RawRow`'s order
        (what ``chain_rows`` gives, and ``row_values`` takes apart), as they are."""
        run_id, seq, type_, ts, body, event, link = values
        return cls(
            run_id=run_id,
            seq=seq,
            type=type_,
            ts=ts,
            body=body,
            event_hash=event,
            chain_hash=link,
        )

    @classmethod
    def copy_of(cls, row: Any) -> StoredEvent:
        """A row of another source (a store, a bundle), exact bytes, ready to append."""
        return cls(
            run_id=row.run_id,
            seq=row.seq,
            type=row.type,
            ts=row.ts,
            body=bytes(row.body),
            event_hash=bytes(row.event_hash),
            chain_hash=bytes(row.chain_hash),
        )


class LinkedEvent(StoredEvent):
    """A new row whose hashes this class computed itself: its event hash from its fields,
    its chain hash from that and ``previous`` (the run's head before it).

    The hashes follow from the row by construction (the one constructor computes them, and
    the row is frozen), so a store that keeps them implicitly (SQLite schema 2) need not
    hash the body again to know they do; a row of any other origin (an import, a copy) is a
    plain :class:`StoredEvent` and is hashed again. :class:`RunWriter` makes these."""

    __slots__ = ()

    def __init__(
        self, *, run_id: str, seq: int, type: str, ts: int, body: bytes, previous: bytes
    ) -> None:
        digest = event_hash(run_id, seq, type, ts, body)
        super().__init__(
            run_id=run_id,
            seq=seq,
            type=type,
            ts=ts,
            body=body,
            event_hash=digest,
            chain_hash=chain_hash(previous, digest),
        )

    def __eq__(self, other: object) -> bool:
        """Equal to any row with the same values, of this class or not (a row read back
        is a plain :class:`StoredEvent`)."""
        if not isinstance(other, StoredEvent):
            return NotImplemented
        return row_values(self) == row_values(other)

    __hash__ = StoredEvent.__hash__
