"""Hashing and appending one run's events: the only writer of the log.

A :class:`RunWriter` turns ``(type, body)`` pairs into canonical bytes, event
hashes and chain links, and hands the batch to the store in one atomic append.
Its head advances only after the store accepted the batch, so a failed append
leaves neither the store nor the writer half-written.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.verify.canonical import canon
from agentfootprint.verify.chain import GENESIS, chain_hash, event_hash

__all__ = ["Clock", "RunWriter", "new_run_id", "wall_clock_ms"]

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch: the ``ts`` of each row."""
    return time.time_ns() // 1_000_000


def new_run_id() -> str:
    """A sortable unique id: 12 hex digits of milliseconds, then 20 random hex digits."""
    return f"{wall_clock_ms():012x}{secrets.token_hex(10)}"


class RunWriter:
    """Appends the events of one run, keeping its seq and chain head."""

    def __init__(self, store: EventStore, run_id: str, *, clock: Clock = wall_clock_ms) -> None:
        self.store = store
        self.run_id = run_id
        self.clock = clock
        self.seq = 0
        self.head = GENESIS

    def append(self, events: Sequence[tuple[str, Any]]) -> list[StoredEvent]:
        """Hash and append ``(type, body)`` pairs as one atomic batch."""
        ts = self.clock()
        seq, head = self.seq, self.head
        batch: list[StoredEvent] = []
        for type_, body in events:
            data = canon(body)
            e = event_hash(self.run_id, seq, type_, ts, data)
            head = chain_hash(head, e)
            batch.append(
                StoredEvent(
                    run_id=self.run_id,
                    seq=seq,
                    type=type_,
                    ts=ts,
                    body=data,
                    event_hash=e,
                    chain_hash=head,
                )
            )
            seq += 1
        self.store.append(batch)
        self.seq, self.head = seq, head
        return batch
