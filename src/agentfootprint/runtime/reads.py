"""``read_tracking``: what each stage read, kept beside the run, never in the log.

At each commit the run turns the keys the stage's scope saw it read
(:attr:`~agentfootprint.runtime.scope.Scope.reads`) into one entry of
``RunResult.stage_reads``: ``{stage_run: {key: what was read}}``, the keys sorted. What is
described is always a value *as the log holds it* (under a redaction policy, its committed
form: a commitment where the policy hid a value), so no entry shows more than the log does:

* ``"summary"``: a :class:`ReadMarker` (the value's JSON type, its size, and for a string,
  number, boolean or null the first 80 characters of its canonical JSON);
* ``"full"``: a detached copy of the value (every read of a long history copies it: the
  cost grows with the run);
* ``"off"``: nothing is kept, and ``stage_reads`` is None.

A value the stage read that the log never holds (made and replaced inside the stage) has no
committed form: under a policy it is described as :data:`UNRECORDED` (its type only: nothing
of it is shown); without one it is described as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import is_commitment
from agentfootprint.logformat.shared_lists import SharedList
from agentfootprint.runtime.events import detached
from agentfootprint.runtime.scope import Scope, Write, json_equal

__all__ = [
    "PREVIEW_CHARS",
    "READ_MODES",
    "UNRECORDED",
    "ReadMarker",
    "ReadTracking",
    "StageReads",
    "marker",
    "stage_reads",
]

ReadTracking = Literal["summary", "full", "off"]
READ_MODES: Final[tuple[ReadTracking, ...]] = ("summary", "full", "off")
#: how much of a primitive's JSON a marker previews
PREVIEW_CHARS: Final = 80


@dataclass(frozen=True, slots=True)
class ReadMarker:
    """A read described without its value: ``type`` is the JSON type (``string``,
    ``number``, ``boolean``, ``null``, ``array``, ``object``), ``commitment`` for a value a
    redaction policy hid, or ``unrecorded`` for one the log never held under a policy;
    ``size`` the characters of a string, the items of an array, the members of an object;
    ``preview`` the first 80 characters of a primitive's canonical JSON."""

    type: str
    size: int | None = None
    preview: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "size": self.size, "preview": self.preview}


#: a value read that the log never held, under a redaction policy: nothing of it is shown
UNRECORDED: Final = ReadMarker("unrecorded")
_COMMITMENT: Final = ReadMarker("commitment")
_NULL: Final = ReadMarker("null", None, "null")
_TRUE: Final = ReadMarker("boolean", None, "true")
_FALSE: Final = ReadMarker("boolean", None, "false")


def marker(value: Any) -> ReadMarker:
    """The summary of a JSON value as the log holds it."""
    kind = type(value)
    if kind is list or kind is SharedList:
        return ReadMarker("array", len(value))
    if kind is dict:
        return _COMMITMENT if is_commitment(value) else ReadMarker("object", len(value))
    if kind is str:  # the JSON of the first characters is the first characters of the JSON
        # (a string in state is I-JSON already: its canonical JSON is orjson's)
        text = orjson.dumps(value[: PREVIEW_CHARS + 1]).decode("utf-8")
        return ReadMarker("string", len(value), text[:PREVIEW_CHARS])
    if value is None:
        return _NULL
    if kind is bool:
        return _TRUE if value else _FALSE
    if kind is int:
        return ReadMarker("number", None, str(value)[:PREVIEW_CHARS])
    return ReadMarker("number", None, canon(value).decode("utf-8")[:PREVIEW_CHARS])


_ABSENT: Any = object()


class StageReads:
    """``RunResult.stage_reads`` as a run fills it, one entry per commit. A marker is made
    once per value object: a key read again, unchanged, at a later stage (the model, the
    tool schemas, the parameters) reuses the last one."""

    def __init__(self, mode: ReadTracking) -> None:
        self.mode = mode
        self.entries: dict[str, dict[str, Any]] = {}
        self._last: dict[str, tuple[Any, ReadMarker]] = {}

    def add(
        self,
        stage_run: str,
        scope: Scope,
        writes: Sequence[Write],
        before: Mapping[str, Any],
        recorded_before: Mapping[str, Any],
        recorded_after: Mapping[str, Any],
        redacting: bool,
    ) -> None:
        """The entry of one stage: each key it read (sorted), described by the mode from
        the value's committed form. ``before`` is the live state the stage started from,
        ``recorded_before`` / ``recorded_after`` the state as the log holds it before and
        after the stage's commit (the same objects as the live state when nothing is
        redacted)."""
        reads = scope.reads
        entry: dict[str, Any] = {}
        self.entries[stage_run] = entry
        if not reads:
            return
        written = {w.path for w in writes} if writes else frozenset()
        full = self.mode == "full"
        last = self._last
        for key in sorted(reads):
            value, pending = reads[key]
            if not pending:  # the committed value: as the log held it before the commit
                recorded = recorded_before.get(key, _ABSENT)
            elif key in written and value is scope.pending_value(key):  # what it wrote
                recorded = recorded_after.get(key, _ABSENT)
            elif key not in written and json_equal(value, before.get(key, _ABSENT)):
                recorded = recorded_before.get(key, _ABSENT)  # set again as it was
            else:  # made and replaced inside the stage: the log never held it
                recorded = _ABSENT if redacting else value
            if recorded is _ABSENT:
                entry[key] = UNRECORDED
            elif full:
                entry[key] = detached(recorded)
            else:
                seen = last.get(key)
                if seen is not None and seen[0] is recorded:
                    entry[key] = seen[1]
                else:
                    made = entry[key] = marker(recorded)
                    last[key] = (recorded, made)


def stage_reads(
    mode: ReadTracking,
    scope: Scope,
    writes: Sequence[Write],
    before: Mapping[str, Any],
    recorded_before: Mapping[str, Any],
    recorded_after: Mapping[str, Any],
    redacting: bool,
) -> dict[str, Any]:
    """One stage's entry of ``stage_reads`` (:meth:`StageReads.add`, on its own)."""
    reads = StageReads(mode)
    reads.add("", scope, writes, before, recorded_before, recorded_after, redacting)
    return reads.entries[""]
