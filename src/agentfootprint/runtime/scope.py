"""A stage's view of state: reads see committed state, writes are buffered.

At the stage's end the buffer becomes one commit: the *net* change per key
(a write that leaves a key as it was drops out), encoded by ``commit_values``:

* ``"delta"`` (default): an array that grew from its committed value by a tail
  is written as ``append`` of the tail only; an object that kept all its members
  and changed some as ``merge`` of the changed members; anything else ``set``.
* ``"full"``: every changed key as ``set`` of its whole value.

Both fold back (``verify.fold.apply_write``) to the same state. Values are
checked to be I-JSON and copied on write, so committed state holds plain JSON
types only and equals, type for type, what the verifier folds from the log.

A scope made with ``track_reads`` also keeps which keys the stage read, and what it
read first of each (``read_tracking``, ``write_provenance``): a key read is one that
held a value when the stage asked for it (``get``, ``in``, or ``committed`` read by
key, as a request is built); the reading ``append`` and ``merge`` do of the value they
extend is not a read. :meth:`Scope.with_reads` gives each write the keys read before
the stage last changed its key (docs/log-format.md section 5.10).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from agentfootprint.errors import RecordTooLargeError, UsageError
from agentfootprint.logformat import limits
from agentfootprint.logformat.canonical import MAX_SAFE_INT, check_ijson, json_path
from agentfootprint.logformat.shared_lists import SharedList, as_list
from agentfootprint.runtime.leak_guard import LeakGuard

__all__ = ["CommitValues", "Scope", "Write", "json_equal", "to_json_value"]

CommitValues = Literal["delta", "full"]
_DELETED: Any = object()
_MISSING: Any = object()


@dataclass(frozen=True, kw_only=True, slots=True)
class Write:
    """One entry of a commit: ``value`` is absent (None) for ``delete``; ``reads`` (log
    format v6) the keys its stage read before it, sorted (None: not recorded)."""

    path: str
    verb: str
    value: Any = None
    reads: tuple[str, ...] | None = None

    def body(self, commit: int) -> dict[str, Any]:
        body: dict[str, Any] = {"commit": commit, "path": self.path, "verb": self.verb}
        if self.verb != "delete":
            body["value"] = self.value
        if self.reads is not None:
            body["reads"] = list(self.reads)
        return body


def to_json_value(value: Any, path: tuple[str | int, ...] = ()) -> Any:
    """Validate ``value`` as I-JSON and return a detached copy made of JSON types only.

    The copy is what the log will give back: tuples become lists, and a float with an
    integral value becomes the number JCS writes and a parser reads back (``1.0`` -> ``1``,
    ``-0.0`` -> ``0``, ``1e19`` stays a float), so live state equals folded state exactly.
    """
    return _detached(value, path)[0]


def _detached(value: Any, path: tuple[str | int, ...]) -> tuple[Any, bytes]:
    """:func:`to_json_value` and the JSON it went through (its length is the size of the
    value as recorded, up to number formatting: orjson writes ``1e20`` where JCS writes
    its 21 digits, a difference the write envelope's room absorbs)."""
    plain = check_ijson(value, path)
    encoded = orjson.dumps(value, default=as_list)
    copied = orjson.loads(encoded)
    return (copied if plain else _as_parsed(copied)), encoded


#: Room a write body takes around its value (``{"commit":..,"path":..,"value":..,"verb":..}``)
_WRITE_ENVELOPE = 1024


def _fits(key: str, size: int) -> None:
    """A value too large for one log body is refused when it is written, naming its key
    (the limit is read when asked, from ``verify.limits``)."""
    room = limits.MAX_BODY_BYTES - _WRITE_ENVELOPE - len(key.encode("utf-8", "replace"))
    if size > room:
        raise RecordTooLargeError(
            json_path((key,)),
            f"{size} bytes as JSON, over the {room} bytes one write may record "
            "(MAX_BODY_BYTES, agentfootprint.logformat.limits)",
        )


def _as_parsed(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        if value.is_integer() and -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            return int(value)
        return value
    if kind is list:
        return [_as_parsed(v) for v in value]
    if kind is dict:
        return {k: _as_parsed(v) for k, v in value.items()}
    return value


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: ``1`` and ``1.0`` and ``True`` are three different values."""
    if a is b:
        return True
    if type(a) is SharedList or type(b) is SharedList:  # a list, held as versions
        a, b = as_list(a), as_list(b)
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _is_list(value: Any) -> bool:
    return type(value) is list or type(value) is SharedList


def _is_prefix(base: Sequence[Any], new: Sequence[Any]) -> bool:
    if len(new) < len(base):
        return False
    if all(map(operator.is_, base, new)):  # appends keep the very objects: checked in C
        return True
    return all(x is y or json_equal(x, y) for x, y in zip(base, new, strict=False))


#: what a stage read first of a key: the value (borrowed), and whether it was the stage's
#: own pending value (else the committed one)
Read = tuple[Any, bool]


class Scope:
    """Reads and buffered writes of one stage execution."""

    def __init__(
        self,
        committed: Mapping[str, Any],
        guard: LeakGuard | None = None,
        *,
        track_reads: bool = False,
    ) -> None:
        self._committed = committed
        #: the run's secrets: a value written that holds one is written withheld
        self._guard = guard
        self._pending: dict[str, Any] = {}
        #: key -> the committed list its pending value extends by appends only (so the
        #: commit's ``append`` tail is known without comparing the history item by item)
        self._extends: dict[str, Sequence[Any]] = {}
        #: the keys read, in the order first read, with what was read first (None: the
        #: scope does not track reads)
        self._reads: dict[str, Read] | None = {} if track_reads else None
        #: key -> how many keys had been read when the stage last changed it
        self._read_before: dict[str, int] = {}
        self._view: _ReadView | None = None

    @property
    def committed(self) -> Mapping[str, Any]:
        """State as committed before this stage (what requests are built from); a key read
        from it is a read of the stage when the scope tracks reads."""
        if self._reads is None:
            return self._committed
        if self._view is None:
            self._view = _ReadView(self._committed, self._reads)
        return self._view

    @property
    def reads(self) -> Mapping[str, Read]:
        """The keys the stage read, in the order first read (empty when not tracked)."""
        return self._reads if self._reads is not None else {}

    def get(self, key: str, default: Any = None) -> Any:
        """The key's value as this stage sees it (borrowed: never mutate it)."""
        pending = key in self._pending
        value = self._pending[key] if pending else self._committed.get(key, _DELETED)
        if value is _DELETED:
            return default
        reads = self._reads
        if reads is not None and key not in reads:
            reads[key] = (value, pending)
        return value

    def _peek(self, key: str, default: Any) -> Any:
        """:meth:`get` that is no read of the stage (the value a write extends)."""
        if key in self._pending:
            value = self._pending[key]
            return default if value is _DELETED else value
        return self._committed.get(key, default)

    def __contains__(self, key: str) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def set(self, key: str, value: Any) -> None:
        self._pending[self._key(key)] = self._recordable(key, value)
        self._extends.pop(key, None)
        if self._reads is not None:  # the reads before the key's last change
            self._read_before[key] = len(self._reads)

    def append(self, key: str, items: list[Any]) -> None:
        current: Sequence[Any] = self._peek(key, [])
        if not isinstance(items, list) or not (
            type(current) is SharedList or isinstance(current, list)
        ):
            raise UsageError(f"append to {key!r} needs a list value and a list of items")
        pending = key in self._pending
        tail = self._recordable(key, items)
        # a new version, O(new): what get() lent, and committed state, read as they were
        grown = (
            current.extended(tail)
            if type(current) is SharedList
            else SharedList.adopt([*current, *tail])
        )
        self._pending[self._key(key)] = grown
        if not pending and current is self._committed.get(key):
            self._extends[key] = current
        if self._reads is not None:
            self._read_before[key] = len(self._reads)

    def merge(self, key: str, members: Mapping[str, Any]) -> None:
        current = self._peek(key, {})
        if not isinstance(current, dict) or not isinstance(members, Mapping):
            raise UsageError(f"merge into {key!r} needs an object value and a mapping")
        self._pending[self._key(key)] = {**current, **self._recordable(key, dict(members))}
        self._extends.pop(key, None)
        if self._reads is not None:
            self._read_before[key] = len(self._reads)

    def _recordable(self, key: str, value: Any) -> Any:
        """A detached JSON copy of what is written (as ``delta`` records it), refused when
        it cannot be recorded (not I-JSON, or too large for one log body), with any secret
        of the run withheld (:mod:`~agentfootprint.runtime.leak_guard`)."""
        copied, encoded = _detached(value, (key,))
        _fits(key, len(encoded))
        guard = self._guard
        if guard is not None and guard.active and guard.holds(encoded):
            return guard.masked(copied, key)
        return copied

    def delete(self, key: str) -> None:
        self._pending[self._key(key)] = _DELETED
        self._extends.pop(key, None)
        if self._reads is not None:
            self._read_before[key] = len(self._reads)

    @staticmethod
    def _key(key: str) -> str:
        if not isinstance(key, str) or not key:
            raise UsageError(f"state keys are non-empty strings, not {key!r}")
        return key

    # -- commit -------------------------------------------------------------------------
    def net_writes(self, mode: CommitValues) -> list[Write]:
        """The commit: net change per key, in first-touch order, encoded by ``mode``."""
        writes: list[Write] = []
        for key, new in self._pending.items():
            old = self._committed.get(key, _MISSING)
            if new is _DELETED:
                if old is not _MISSING:
                    writes.append(Write(path=key, verb="delete"))
                continue
            grown_from = self._extends.get(key)
            if grown_from is not None and grown_from is old:
                # grown from the committed list by appends: its tail is the new part (O(1)
                # to find, where comparing the prefix is O(history) on every commit)
                if len(new) > len(grown_from):
                    value = new[len(grown_from) :] if mode == "delta" else as_list(new)
                    verb = "append" if mode == "delta" else "set"
                    writes.append(Write(path=key, verb=verb, value=value))
                continue
            if old is not _MISSING and json_equal(old, new):
                continue
            writes.append(self._encode(key, old, new, mode))
        return writes

    @staticmethod
    def _encode(key: str, old: Any, new: Any, mode: CommitValues) -> Write:
        if mode == "delta" and old is not _MISSING:
            if _is_list(old) and _is_list(new) and _is_prefix(old, new):
                return Write(path=key, verb="append", value=new[len(old) :])
            if type(old) is dict and type(new) is dict and old.keys() <= new.keys():
                changed = {
                    k: v for k, v in new.items() if k not in old or not json_equal(old[k], v)
                }
                if len(changed) < len(new):
                    return Write(path=key, verb="merge", value=changed)
        return Write(path=key, verb="set", value=as_list(new))  # what is written is plain

    def with_reads(self, writes: list[Write]) -> list[Write]:
        """``writes`` (this scope's net writes) each with ``reads``: the keys read before the
        stage last changed its key, sorted, less any key neither committed before the stage
        nor written by it (a value made and dropped inside the stage, which the log never
        holds): docs/log-format.md section 5.10."""
        read = list(self._reads or ())
        written = {w.path for w in writes}
        committed = self._committed
        return [
            Write(
                path=w.path,
                verb=w.verb,
                value=w.value,
                reads=tuple(
                    sorted(
                        k
                        for k in read[: self._read_before.get(w.path, 0)]
                        if k in committed or k in written
                    )
                ),
            )
            for w in writes
        ]

    def pending_value(self, key: str) -> Any:
        """The stage's own last value of ``key`` (None when it set none, or deleted it)."""
        value = self._pending.get(key)
        return None if value is _DELETED else value

    def apply_to(self, writes: list[Write]) -> dict[str, Any]:
        """New committed state: the old top level copied, the written keys replaced."""
        state = dict(self._committed)
        for write in writes:
            new = self._pending[write.path]
            if new is _DELETED:
                del state[write.path]
            else:
                state[write.path] = new
        return state


class _ReadView(Mapping[str, Any]):
    """Committed state, read through: each key read by key (or found by ``in``) is a read
    of the stage. Iterating the keys alone reads no value."""

    __slots__ = ("_reads", "_state")

    def __init__(self, state: Mapping[str, Any], reads: dict[str, Read]) -> None:
        self._state = state
        self._reads = reads

    def __getitem__(self, key: str) -> Any:
        value = self._state[key]
        if key not in self._reads:
            self._reads[key] = (value, False)
        return value

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or key not in self._state:
            return False
        if key not in self._reads:
            self._reads[key] = (self._state[key], False)
        return True

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._state else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)
