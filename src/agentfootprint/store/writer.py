"""Hashing and appending one run's events: the only writer of the log.

A :class:`RunWriter` turns ``(type, body)`` pairs into canonical bytes, event
hashes and chain links, and hands the batch to the store in one atomic append.
Its head advances only after the store accepted the batch, so a failed append
leaves neither the store nor the writer half-written.

A *buffered* writer (the runtime's, since log format 3) keeps the batches it hashed and
writes them to the store in one transaction at :meth:`RunWriter.flush`: the run flushes
before anything leaves the process (a model call, a tool run) and at its close, so a crash
loses only commits that had no effect outside it. A flush that fails leaves the store as it
was (it took none of the batches) and ends the run's writing: the run's state has gone past
what the store holds, so anything written after (its close) would not follow from the log;
the run stays the consistent prefix the store holds, UNSEALED, as after a crash.

It is also where the size limit (``verify.limits``) is enforced: no body over
``MAX_BODY_BYTES`` and no bundle-line envelope over ``MAX_ENVELOPE_BYTES`` is ever
recorded, so every run it writes fits in bundle lines of ``MAX_BUNDLE_LINE_BYTES`` and can
be exported. A batch that breaks the limit is refused whole, before the store sees it.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson

from agentfootprint.errors import CanonicalFormError, RecordTooLargeError, StoreError
from agentfootprint.logformat import limits
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.chain import GENESIS
from agentfootprint.seal.facts import WIRE_EVENT
from agentfootprint.store.base import EventStore, LinkedEvent, StoredEvent

__all__ = ["Clock", "RunWriter", "envelope_bytes", "new_run_id", "wall_clock_ms"]

#: a bundle line's members around the body, with empty strings and zero integers
_LINE_FRAME = len(
    orjson.dumps(
        {
            "run": "",
            "seq": 0,
            "type": "",
            "ts": 0,
            "body": "",
            "event_hash": "0" * 64,
            "chain_hash": "0" * 64,
        }
    )
) - len(b'""' * 2 + b"00")

Clock = Callable[[], int]

#: each event type the runtime writes, as the length of its JSON string
_QUOTED_TYPES = {
    t: len(orjson.dumps(t))
    for t in ("run.open", "write", "receipt", "event", "commit", "run.close", "run.seal")
}


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch: the ``ts`` of each row."""
    return time.time_ns() // 1_000_000


def new_run_id() -> str:
    """A sortable unique id: 12 hex digits of milliseconds, then 20 random hex digits."""
    return f"{wall_clock_ms():012x}{secrets.token_hex(10)}"


#: below this size a body is copied once (see :func:`_compact`)
_COMPACT_BELOW = 64 * 1024


def _compact(data: bytes) -> bytes:
    """A small body as a bytes object of its own size. orjson's output of a few dozen bytes
    keeps its 4 KiB working buffer allocated for as long as it lives: a store that keeps
    rows in memory (``MemoryStore``, the default) held about 4 KiB per event (300 MiB for
    70 000 events), against a few MiB once copied. A large output is already trimmed."""
    return bytes(memoryview(data)) if len(data) < _COMPACT_BELOW else data


def envelope_bytes(run_id: str, seq: int, type_: str, ts: int) -> int:
    """The length of the event's bundle line with an empty body (newline excluded): member
    names, punctuation, the run id and type as JSON strings, seq, ts, both hashes in hex and
    the body's two quotes. The line is this plus the body's bytes JSON-escaped, at most
    twice the body (a canonical body holds no control character, and JSON escaping writes
    every other byte as itself or, for ``"`` and ``\\``, as two)."""
    quoted = len(orjson.dumps(run_id)) + len(orjson.dumps(type_))
    return _LINE_FRAME + quoted + len(str(seq)) + len(str(ts))


class RunWriter:
    """Appends the events of one run, keeping its seq and chain head."""

    def __init__(
        self,
        store: EventStore,
        run_id: str,
        *,
        clock: Clock = wall_clock_ms,
        buffered: bool = False,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.clock = clock
        self.seq = 0
        self.head = GENESIS
        self.buffered = buffered
        #: hashed rows not yet written (a buffered writer's, until :meth:`flush`)
        self.pending: list[StoredEvent] = []
        #: the payloads of the wire exchange events appended, in log order (what a seal's
        #: ``wire_list_digest`` covers: the writer sees every row the run records)
        self.wire_payloads: list[Any] = []
        #: seq and head before the last batch appended (what :meth:`retract` restores)
        self._before: tuple[int, bytes] | None = None
        #: why a flush failed: the run's commits since its last flush are then in neither the
        #: store nor a state anything can be added to, so nothing more is written for the
        #: run (it stays the consistent prefix the store holds: UNSEALED, as after a crash)
        self.broken: BaseException | None = None
        #: rows the store has taken (what a reader finds of the run)
        self.stored = 0
        #: the bundle envelope's bytes but seq, ts and the type, once the run id is known to
        #: be Unicode text (computed at the first append: a bad run id fails there, as before)
        self._frame: int | None = None

    def append(self, events: Sequence[tuple[str, Any]]) -> list[StoredEvent]:
        """Hash ``(type, body)`` pairs as one batch; append it atomically (buffered: keep
        it for the next :meth:`flush`).

        A body whose canonical bytes exceed ``limits.MAX_BODY_BYTES`` (read at each call),
        or an event whose bundle envelope exceeds ``limits.MAX_ENVELOPE_BYTES`` (a run id of
        tens of kilobytes), raises :class:`RecordTooLargeError` before anything of the batch
        is appended: the store and this writer's seq and head stay as they were.
        """
        if self.broken is not None:
            raise StoreError(
                f"run {self.run_id}: nothing more is recorded for it: an earlier write of its "
                f"commits to the store failed ({type(self.broken).__name__}: {self.broken}); "
                "the store holds the run up to its last flush (it verifies as UNSEALED)"
            )
        ts = self.clock()
        seq, head = self.seq, self.head
        self._before = (seq, head)
        batch: list[StoredEvent] = []
        wires: list[Any] = []
        for type_, body in events:
            if type_ == "event" and type(body) is dict and body.get("name") == WIRE_EVENT:
                wires.append(body["payload"])
            self._check_envelope(seq, type_, ts)
            data = _compact(canon(body))
            self._check_body(seq, type_, data)
            row = LinkedEvent(
                run_id=self.run_id, seq=seq, type=type_, ts=ts, body=data, previous=head
            )
            batch.append(row)
            head = row.chain_hash
            seq += 1
        if self.buffered:
            self.pending += batch
        else:
            self._store_append(batch)
        self.seq, self.head = seq, head
        self.wire_payloads += wires  # kept once the batch is (a refused batch adds none)
        return batch

    def retract(self, batch: list[StoredEvent]) -> None:
        """Take back ``batch``, the last one appended and still pending (a buffered writer's
        close whose seal could not be made: the run stays open rather than close unsealed)."""
        count = len(batch)
        if not batch or self._before is None or self.pending[-count:] != batch:
            raise ValueError("only the last batch appended, still pending, can be retracted")
        del self.pending[-count:]
        self.seq, self.head = self._before
        self._before = None

    def flush(self) -> None:
        """Write every pending batch in one atomic append (nothing when none is pending)."""
        if self.pending:
            with self._ending_on_failure():
                self._store_append(self.pending)
            self.pending = []

    async def aflush(self) -> None:
        """:meth:`flush` for the event loop: a store that offers ``append_async`` (a network
        database) is awaited, so the loop goes on serving other runs meanwhile; any other
        store is written as :meth:`flush` writes it (and a failure ends the writing alike)."""
        append = getattr(self.store, "append_async", None)
        if not callable(append) or not self.pending:
            self.flush()
            return
        rows, self.pending = self.pending, []  # what is queued meanwhile waits for the next
        try:
            with self._ending_on_failure():
                await append(rows)
        except BaseException:
            self.pending = rows + self.pending
            raise
        self.stored += len(rows)

    @contextlib.contextmanager
    def _ending_on_failure(self) -> Iterator[None]:
        """A flush that raises ends the run's writing (see the module's docstring)."""
        try:
            yield
        except BaseException as exc:
            self.broken = exc
            raise

    def _store_append(self, rows: list[StoredEvent]) -> None:
        """The rows to the store, through its one append path (:meth:`EventStore.append`)."""
        self.store.append(rows)
        self.stored += len(rows)

    def _where(self, seq: int, type_: str) -> str:
        run_id = self.run_id if len(self.run_id) <= 64 else self.run_id[:64] + "…"
        return f"run {run_id} seq {seq} ({type_})"

    def _check_body(self, seq: int, type_: str, data: bytes) -> None:
        if len(data) > limits.MAX_BODY_BYTES:
            raise RecordTooLargeError(
                self._where(seq, type_),
                f"the body is {len(data)} bytes in canonical form, over the limit of "
                f"{limits.MAX_BODY_BYTES} (MAX_BODY_BYTES, agentfootprint.logformat.limits): "
                "nothing of this batch was recorded",
            )

    def _check_envelope(self, seq: int, type_: str, ts: int) -> None:
        quoted = _QUOTED_TYPES.get(type_) if type(type_) is str else None
        frame = self._frame
        # a known type: the same sum as envelope_bytes, without encoding two strings
        if (
            frame is not None
            and quoted is not None
            and frame + quoted + len(str(seq)) + len(str(ts)) <= limits.MAX_ENVELOPE_BYTES
        ):
            return
        try:
            envelope = envelope_bytes(self.run_id, seq, type_, ts)
            if self._frame is None:
                self._frame = _LINE_FRAME + len(orjson.dumps(self.run_id))
        except orjson.JSONEncodeError as exc:  # a lone surrogate: no JSON string holds it
            raise CanonicalFormError(
                self._where(seq, type_), f"the run id or type is not Unicode text ({exc})"
            ) from exc
        if envelope > limits.MAX_ENVELOPE_BYTES:
            raise RecordTooLargeError(
                self._where(seq, type_),
                f"the event's bundle envelope (run id, type, seq, ts, hashes) would be "
                f"{envelope} bytes, over the limit of {limits.MAX_ENVELOPE_BYTES} "
                "(MAX_ENVELOPE_BYTES): use a shorter run id; nothing of this batch was recorded",
            )
