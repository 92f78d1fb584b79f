"""Event and chain hashes (log format v1, section "Chain").

``e_i = H(event, canon({body, run, seq, ts, type}))`` where ``body`` is the
event's canonical body embedded as JSON, and ``c_i = H(chain, c_{i-1} || e_i)``
with ``c_{-1}`` = 32 zero bytes.

Rows as stored are read, not trusted: :func:`row_problem` checks a row's envelope before
anything is hashed (a TEXT body from a crafted SQLite file, a hash of the wrong length is a
finding about that row, never an exception); :func:`open_body` reads what a first row names
before it is verified (:mod:`agentfootprint.logformat.index_check` compares a run index with
the events).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple, Protocol

from agentfootprint.logformat.canonical import MAX_SAFE_INT, canon, compact, parse
from agentfootprint.logformat.hashing import ZERO, domain_prefix
from agentfootprint.logformat.limits import MAX_BODY_BYTES

__all__ = [
    "CLOSING_TYPES",
    "DERIVED",
    "EVENT_TYPES",
    "GENESIS",
    "ChainRowSource",
    "RawRow",
    "Row",
    "RowSource",
    "RunSource",
    "as_read",
    "chain_hash",
    "event_envelope",
    "event_hash",
    "is_text",
    "open_body",
    "parent_named",
    "row_problem",
    "row_values",
    "shown",
    "stored_kind",
]

GENESIS: Final = ZERO
EVENT_TYPES: Final = frozenset(
    {"run.open", "write", "receipt", "commit", "event", "run.close", "run.seal"}
)
#: the types a closed run's log ends with: its run.close, or (format v4) the seal after it
CLOSING_TYPES: Final = frozenset({"run.close", "run.seal"})


class Row(Protocol):
    """One stored event as a source yields it: the types are what a sound source gives;
    a crafted one may give others, which :func:`row_problem` finds before any use."""

    @property
    def run_id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def ts(self) -> int: ...
    @property
    def body(self) -> bytes: ...
    @property
    def event_hash(self) -> bytes: ...
    @property
    def chain_hash(self) -> bytes: ...


class RowSource(Protocol):
    """Anything that yields a run's rows in seq order (a store, an export)."""

    def read(self, run_id: str, *, start: int = 0) -> Iterable[Row]: ...


class RunSource(RowSource, Protocol):
    """A row source that also lists its runs from the events (for whole-file verification).

    A source with ``index_entries()`` too (a store's ``runs`` table, a bundle's manifest)
    has its index checked against the events."""

    def run_ids(self) -> list[str]: ...


class _Derived:
    """The type of :data:`DERIVED` (one instance)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DERIVED"

    def __reduce__(self) -> str:  # copies and pickles are the one instance
        return "DERIVED"


#: a row value the file does not keep because the row determines it (schema 2's event hash,
#: and its chain link where no head is stored): the verifier computes it and compares nothing
DERIVED: Final = _Derived()


class RawRow(NamedTuple):
    """One row as ``chain_rows`` gives it: the fields of :class:`Row`, in its order, with the
    values ``read`` gives (or :data:`DERIVED`); nothing is coerced or checked."""

    run_id: Any
    seq: Any
    type: Any
    ts: Any
    body: Any
    event_hash: Any
    chain_hash: Any


class ChainRowSource(Protocol):
    """A source that also hands over a run's rows as tuples for the verifier's loop.

    ``chain_rows(run_id)`` holds what ``read(run_id)`` yields, row for row, each as the
    7-tuple of :class:`RawRow` (a sequence, so the verifier reads it once), except that a
    value the source does not store but computes from the rows is :data:`DERIVED`: the
    verifier computes it itself, once, where ``read`` would have computed it for the verifier
    to compute again. An unknown run raises what ``read`` raises; None means "read them with
    ``read``"."""

    def chain_rows(self, run_id: str) -> Sequence[tuple[Any, ...]] | None: ...


def as_read(raw: Sequence[Any], previous: bytes) -> RawRow:
    """The row ``read`` gives for this ``chain_rows`` tuple, given the chain hash ``read``
    gave the row before (``previous``): a :data:`DERIVED` event hash computed from the row (as
    the store computes it: empty when the row's run id, type, ts or body cannot be hashed) and
    a :data:`DERIVED` chain link from ``previous`` (empty when either is not 32 bytes)."""
    row = RawRow(*raw)
    if row.event_hash is not DERIVED and row.chain_hash is not DERIVED:
        return row
    event = row.event_hash
    if event is DERIVED:
        hashable = (
            is_text(row.run_id)
            and type(row.type) is str
            and row.type in EVENT_TYPES
            and type(row.ts) is int
            and -MAX_SAFE_INT <= row.ts <= MAX_SAFE_INT
            and type(row.body) is bytes
        )
        event = event_hash(row.run_id, row.seq, row.type, row.ts, row.body) if hashable else b""
    link = row.chain_hash
    if link is DERIVED:
        whole = type(event) is bytes and len(event) == 32
        link = chain_hash(previous, event) if whole and len(previous) == 32 else b""
    return row._replace(event_hash=event, chain_hash=link)


def event_hash(run_id: str, seq: int, type_: str, ts: int, body: bytes) -> bytes:
    """The digest of one event; ``body`` must already be canonical bytes.

    ``digest("event", event_envelope(...))``, hashed in parts: the state after the domain
    prefix and ``{"body":`` is copied, the body is hashed where it lies (never copied into
    an envelope: a 50 MB result was copied twice), then the canonical rest of the envelope
    (a property test holds the two forms together). Written out in one function: it runs
    once per row written and once per row verified."""
    state = _EVENT_STATE.copy()
    state.update(body)
    if (
        type(seq) is int
        and type(ts) is int
        and -MAX_SAFE_INT <= seq <= MAX_SAFE_INT
        and -MAX_SAFE_INT <= ts <= MAX_SAFE_INT
    ):
        seq_text, ts_text = b"%d" % seq, b"%d" % ts
    else:  # what canon writes for them (or its refusal)
        seq_text, ts_text = canon(seq), canon(ts)
    tail = b',"run":%s,"seq":%s,"ts":%s,"type":%s}' % (
        _canon_text(run_id),
        seq_text,
        ts_text,
        _canon_text(type_),
    )
    state.update(tail)
    return state.digest()


@functools.lru_cache(maxsize=1024)
def _canon_text(text: str) -> bytes:
    return compact(canon(text))


def event_envelope(run_id: str, seq: int, type_: str, ts: int, body: bytes) -> bytes:
    """``canon({"body", "run", "seq", "ts", "type"})`` assembled from canonical parts.

    Byte-equal to ``canon_object`` over the same members (a unit test holds them
    together); the run id and type are canonicalised once, integers are checked.
    """
    return b'{"body":%s,"run":%s,"seq":%s,"ts":%s,"type":%s}' % (
        body,
        _canon_text(run_id),
        canon(seq),
        canon(ts),
        _canon_text(type_),
    )


def chain_hash(previous: bytes, event: bytes) -> bytes:
    """Link ``event`` (an event hash) onto the chain whose head is ``previous``:
    ``digest("chain", previous + event)``."""
    return _sha256(_CHAIN_PREFIX + previous + event).digest()


#: the SHA-256 state after the domain prefix and ``{"body":``, copied per event
_EVENT_STATE: Final = hashlib.sha256(domain_prefix("event") + b'{"body":')
_CHAIN_PREFIX: Final = domain_prefix("chain")
_sha256: Final = hashlib.sha256


def stored_kind(value: Any) -> str:
    """What a stored column value is, as a message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "text"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a real number"
    if isinstance(value, bytes):
        return f"{len(value)} bytes"
    return f"a {type(value).__name__}"


def row_problem(row: Sequence[Any], run_id: str, seq: int) -> str | None:
    """Why ``row`` (the 7 values of :class:`RawRow`, in its order) cannot be event ``seq`` of
    run ``run_id`` (None: its envelope is sound). docs/log-format.md section 9.2 step 2.1.

    In order: ``seq`` an integer, the row of this run, ``seq`` the expected one, a known
    ``type``, ``ts`` an I-JSON integer, ``body`` bytes within ``MAX_BODY_BYTES``, both
    hashes 32 bytes (or :data:`DERIVED`: not stored, computed from the row). Integers
    exclude booleans.
    """
    row_run, row_seq, type_, ts, body, event, link = row
    if type(row_seq) is not int:
        return f"seq is {stored_kind(row_seq)}, not an integer"
    if type(row_run) is not str or row_run != run_id:
        return f"row belongs to run {row_run!r}"
    if row_seq != seq:
        return f"seq {row_seq} where {seq} was expected " + (
            "(a row is missing)" if row_seq > seq else "(a row is repeated)"
        )
    if type(type_) is not str:
        return f"type is {stored_kind(type_)}, not text"
    if type_ not in EVENT_TYPES:
        return f"unknown event type {type_!r}"
    if type(ts) is not int:
        return f"ts is {stored_kind(ts)}, not an integer"
    if not -MAX_SAFE_INT <= ts <= MAX_SAFE_INT:
        return f"ts {ts} is outside +-(2**53 - 1)"
    if type(body) is not bytes:
        return f"body is {stored_kind(body)}, not bytes (a BLOB)"
    if len(body) > MAX_BODY_BYTES:
        return f"body is {len(body)} bytes, over the limit of {MAX_BODY_BYTES}"
    if event is not DERIVED and (type(event) is not bytes or len(event) != 32):
        return f"event_hash is {stored_kind(event)}, not 32 bytes"
    if link is not DERIVED and (type(link) is not bytes or len(link) != 32):
        return f"chain_hash is {stored_kind(link)}, not 32 bytes"
    return None


def row_values(row: Row) -> tuple[Any, ...]:
    """A row as :class:`RowSource.read` yields it, as the 7-tuple of :class:`RawRow`."""
    return (row.run_id, row.seq, row.type, row.ts, row.body, row.event_hash, row.chain_hash)


def open_body(row: Any) -> dict[str, Any] | None:
    """The body of a ``run.open`` row as recorded, or None (no row, another type, a body
    that is not a JSON object). For reading a run's first row before it is verified."""
    if row is None or row.type != "run.open" or type(row.body) is not bytes:
        return None
    try:
        body = parse(row.body)
    except (ValueError, RecursionError):  # RecursionError: deep arrays holding big numbers
        return None
    return body if isinstance(body, dict) else None


def parent_named(row: Any) -> str | None:
    """The parent run id a first row's ``run.open`` names (None: none, or no such row)."""
    body = open_body(row)
    parent = body.get("parent") if body is not None else None
    if isinstance(parent, dict) and type(parent.get("run_id")) is str:
        return str(parent["run_id"])
    return None


def is_text(value: Any) -> bool:
    """A ``str`` that encodes as UTF-8 (no lone surrogate): text a log can hold."""
    if type(value) is not str:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(run_id: Any) -> str:
    """A run id as messages show it (an id that is not UTF-8 text is shown as its repr)."""
    return run_id if is_text(run_id) else repr(run_id)
