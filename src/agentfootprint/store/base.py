"""The store contract: a small ladder every backend implements.

* :class:`EventReader`: read one run's events in seq order, list runs.
* :class:`EventStore`: an :class:`EventReader` that also appends a batch of
  already-hashed events atomically (all or nothing) and refuses to overwrite, and
  several runs' batches at once, also all or nothing (an import).

Backends never compute hashes and never interpret bodies beyond the run index
taken from ``run.open``; :class:`~agentfootprint.store.writer.RunWriter` does
the hashing, so every backend stores exactly the same bytes.
``agentfootprint.testing.store_contract.StoreContract`` is the test case every
backend passes.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import orjson

from agentfootprint.errors import PauseAnsweredError, StoreError, UsageError
from agentfootprint.logformat.rows import LinkedEvent, StoredEvent
from agentfootprint.logformat.runs import RunInfo

__all__ = [
    "Answering",
    "AsyncAppend",
    "EventReader",
    "EventStore",
    "IndexEntry",
    "LinkedEvent",
    "RunInfo",
    "StoredEvent",
    "agreed_durability",
    "answered_pause",
    "refuse_second_answer",
    "run_index_from_open",
    "same_file",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexEntry:
    """One row of a store's run index exactly as stored (values not coerced: the index is
    not evidence, and whole-file verification compares it with the events)."""

    run_id: Any
    conversation_id: Any
    parent_run_id: Any
    opened_at: Any


def run_index_from_open(event: StoredEvent) -> tuple[str, str | None]:
    """``(conversation_id, parent_run_id)`` read from a ``run.open`` body."""
    try:
        body = orjson.loads(event.body)
        conversation = body["conversation_id"]
        parent = body.get("parent")
        parent_id = parent["run_id"] if isinstance(parent, dict) else None
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise StoreError(f"run {event.run_id}: run.open body lacks its run index ({exc})") from exc
    if not isinstance(conversation, str):
        raise StoreError(f"run {event.run_id}: run.open conversation_id is not a string")
    return conversation, parent_id


@dataclass(frozen=True, slots=True)
class Answering:
    """A ``run.open`` that answers a pause (``resumes`` or ``abandons``, log format v5): the
    paused parent, and whether its writer retries an answer that never closed."""

    parent: str
    retries: bool


def answered_pause(event: StoredEvent) -> Answering | None:
    """What pause a ``run.open`` answers, or None. Stores let one answer per pause close:
    the opening is checked in the transaction that stores it (:func:`refuse_second_answer`)."""
    body_bytes = bytes(event.body)
    if event.type != "run.open" or (
        b'"resumes"' not in body_bytes and b'"abandons"' not in body_bytes
    ):
        return None  # most openings answer no pause: no parse
    try:
        body = orjson.loads(body_bytes)
    except orjson.JSONDecodeError:
        return None
    parent = body.get("parent") if isinstance(body, dict) else None
    if not isinstance(parent, dict) or not ("resumes" in body or "abandons" in body):
        return None
    parent_id = parent.get("run_id")
    if not isinstance(parent_id, str):
        return None
    return Answering(parent_id, body.get("retries") is True)


def refuse_second_answer(
    run_id: str, answering: Answering, others: Iterable[tuple[str, bool]]
) -> None:
    """Raise :class:`PauseAnsweredError` unless ``run_id`` may answer ``answering.parent``'s
    pause, given the other runs that answer it (``(run id, closed)``, as the store holds
    them): never once one closed; while one is open (a resume under way, or one whose
    process died) only when its writer retries (``retries``: the caller says it is gone)."""
    parent = answering.parent
    others = list(others)
    closed = next((other for other, done in others if done), None)
    if closed is not None:
        raise PauseAnsweredError(
            f"run {run_id}: run {parent} paused, and its question was answered already (by "
            f"run {closed}): a pause is answered once (docs/log-format.md section 5.9)",
            parent=parent,
            answered_by=closed,
        )
    if others and not answering.retries:
        began = others[0][0]
        raise PauseAnsweredError(
            f"run {run_id}: run {parent} paused, and run {began} began answering it and "
            "never closed (under way in another process, or its process died): if it is "
            "gone, answer again with retry=True (docs/pauses.md)",
            parent=parent,
            answered_by=began,
        )


#: what ``durability=`` may be, for every backend that keeps its log across a crash
DURABILITIES = ("full", "normal")


def agreed_durability(given: object, from_url: str | None) -> str | None:
    """The durability a store is opened with: ``given`` (the option, checked) and a URL's
    own ``durability=`` must agree when both are there; None when neither is (the store's
    default, "full"). The one place both rules are enforced, whatever the backend."""
    if given is not None and (not isinstance(given, str) or given not in DURABILITIES):
        raise UsageError(
            f"option 'durability': must be 'full' or 'normal', got {given!r}",
            option="durability",
        )
    if given is not None and from_url is not None and given != from_url:
        raise UsageError(
            f"option 'durability' is {given!r} but the store URL says "
            f"durability={from_url}: give one of them, or the same",
            option="durability",
        )
    return given if given is not None else from_url


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: :func:`os.path.samefile` when both exist (hard
    links, symlinks, different spellings), else the resolved paths compared."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):  # an unreadable folder, a NUL in a path
        return os.path.abspath(a) == os.path.abspath(b)


class EventReader(abc.ABC):
    """Read access to a log."""

    @abc.abstractmethod
    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        """The run's events from seq ``start`` on, in seq order.

        Raises :class:`~agentfootprint.errors.RunNotFoundError` for an unknown run.
        """

    @abc.abstractmethod
    def runs(self) -> list[RunInfo]:
        """Every run in the order they were opened (a parent always before its children)."""

    @abc.abstractmethod
    def run_ids(self) -> list[str]:
        """Every run that has at least one event, found from the events themselves (never
        from the index), in the order of each run's first stored row."""

    @abc.abstractmethod
    def index_entries(self) -> list[IndexEntry]:
        """The run index as stored, for checking against the events."""

    def iter_index_entries(self) -> Iterator[IndexEntry]:
        """:meth:`index_entries` as an iterator; a store whose index can be long reads it a
        part at a time (whole-file verification then holds a part, not the whole index)."""
        return iter(self.index_entries())

    @abc.abstractmethod
    def run_info(self, run_id: str) -> RunInfo:
        """One run's index entry; :class:`RunNotFoundError` when absent."""

    def seal_log(self) -> list[tuple[object, object]] | None:
        """The seal log (docs/log-format.md section 4.1): ``(leaf, run_id)`` per sealed run in
        leaf order, as stored; None for a store that keeps none."""
        return None

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release resources (connections, files)."""

    def __enter__(self) -> EventReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventStore(EventReader):
    """A log that also appends."""

    @abc.abstractmethod
    def append(self, events: Sequence[StoredEvent]) -> None:
        """Append events of one run atomically.

        The batch must continue the run exactly (first seq = current length) and be
        contiguous; a batch starting at seq 0 opens the run and must start with
        ``run.open``. On any failure nothing of the batch is kept:
        :class:`StoreConflictError` when the position is taken (another writer),
        :class:`StoreError` for anything else.
        """

    @abc.abstractmethod
    def append_runs(self, batches: Iterable[Sequence[StoredEvent]]) -> None:
        """Append several batches (of one or several runs) as one atomic unit: every batch
        is kept, or none is.

        Each batch obeys the rules of :meth:`append`, judged after the batches before it
        in ``batches``. An import uses it so that a refused bundle leaves the store as it
        was. ``batches`` may be a generator: it is consumed once, inside the unit.
        """

    # A store over the network also offers ``append_async`` (:class:`AsyncAppend`): the run
    # writer awaits it at the run's flush points (before a model call, before a tool runs,
    # at the close), so the event loop serves other runs while the database answers.

    @staticmethod
    def check_batch(events: Sequence[StoredEvent]) -> None:
        """Shared shape checks every backend applies before writing."""
        if not events:
            raise StoreError("append of an empty batch")
        run_id = events[0].run_id
        for offset, event in enumerate(events):
            if event.run_id != run_id:
                raise StoreError("a batch must belong to one run")
            if event.seq != events[0].seq + offset:
                raise StoreError(f"run {run_id}: batch seqs are not contiguous at {event.seq}")
        if events[0].seq == 0 and events[0].type != "run.open":
            raise StoreError(f"run {run_id}: seq 0 must be run.open")


@runtime_checkable
class AsyncAppend(Protocol):
    """The part of the store contract a network database adds: :meth:`EventStore.append`,
    awaited. Same rules (one run's batch, atomic, :class:`StoreConflictError` for a taken
    position, :class:`StoreError` otherwise); the run writer awaits it where a local store
    is written synchronously (docs/stores.md, "Stores that answer over the network")."""

    async def append_async(self, events: Sequence[StoredEvent]) -> None: ...
