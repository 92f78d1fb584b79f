"""In-memory backend: the same contract as SQLite, for tests and store-less agents."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence

from agentfootprint.errors import RunNotFoundError, StoreConflictError
from agentfootprint.logformat.chain import CLOSING_TYPES
from agentfootprint.store.base import (
    EventStore,
    IndexEntry,
    RunInfo,
    StoredEvent,
    answered_pause,
    refuse_second_answer,
    run_index_from_open,
)
from agentfootprint.store.seal_log import sealed_in

__all__ = ["MemoryStore"]


class MemoryStore(EventStore):
    """Runs held in process memory; lost when the process ends (still verifiable while alive)."""

    def __init__(self) -> None:
        self._events: dict[str, list[StoredEvent]] = {}
        self._index: dict[str, tuple[str, str | None]] = {}
        #: the sealed runs in seal order (each one's leaf index is its position)
        self._sealed: list[str] = []
        self._lock = threading.Lock()

    def append(self, events: Sequence[StoredEvent]) -> None:
        """One batch: :meth:`append_runs` of it."""
        self.append_runs([events])

    def append_runs(self, batches: Iterable[Sequence[StoredEvent]]) -> None:
        """Every batch checked against the store plus the batches before it, then all
        applied together: a batch refused anywhere leaves the store untouched."""
        staged: list[Sequence[StoredEvent]] = []
        with self._lock:
            lengths: dict[str, int] = {}
            index: dict[str, tuple[str, str | None]] = {}
            for events in batches:
                self.check_batch(events)
                run_id, first = events[0].run_id, events[0].seq
                have = lengths.get(run_id, len(self._events.get(run_id, ())))
                if first != have:
                    raise StoreConflictError(
                        f"run {run_id}: append at seq {first} but the run has {have} events"
                    )
                if first == 0:
                    index[run_id] = run_index_from_open(events[0])
                    answering = answered_pause(events[0])
                    if answering is not None:
                        others = [
                            (r, r in self._events and self._events[r][-1].type in CLOSING_TYPES)
                            for r, (_, p) in [*self._index.items(), *index.items()]
                            if p == answering.parent and r != run_id
                        ]
                        refuse_second_answer(run_id, answering, others)
                lengths[run_id] = have + len(events)
                staged.append(events)
            self._index.update(index)
            for events in staged:
                self._events.setdefault(events[0].run_id, []).extend(events)
                self._sealed += sealed_in(events)

    def seal_log(self) -> list[tuple[object, object]]:
        with self._lock:
            return list(enumerate(self._sealed))

    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        with self._lock:
            if run_id not in self._events:
                raise RunNotFoundError(f"no run {run_id!r} in this store")
            snapshot = self._events[run_id][start:]
        return iter(snapshot)

    def run_info(self, run_id: str) -> RunInfo:
        with self._lock:
            if run_id not in self._events:
                raise RunNotFoundError(f"no run {run_id!r} in this store")
            log = self._events[run_id]
            conversation, parent = self._index[run_id]
            return RunInfo(
                run_id=run_id,
                conversation_id=conversation,
                parent_run_id=parent,
                opened_at=log[0].ts,
                events=len(log),
                last_type=log[-1].type,
                head=log[-1].chain_hash,
            )

    def run_ids(self) -> list[str]:
        with self._lock:
            return [run_id for run_id, log in self._events.items() if log]

    def index_entries(self) -> list[IndexEntry]:
        with self._lock:
            return [
                IndexEntry(
                    run_id=run_id,
                    conversation_id=conversation,
                    parent_run_id=parent,
                    opened_at=self._events[run_id][0].ts,
                )
                for run_id, (conversation, parent) in self._index.items()
            ]

    def runs(self) -> list[RunInfo]:
        with self._lock:
            ids = list(self._events)
        return [self.run_info(run_id) for run_id in ids]
