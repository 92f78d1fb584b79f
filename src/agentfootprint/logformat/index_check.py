"""The run index checked against the events as the runs verify (section 9.5, ``index``).

A store's ``runs`` table or a bundle's manifest is an index, never evidence: whole-file
verification reports every entry that disagrees with the runs' ``run.open`` rows. The check
used to keep each run's facts until every run had verified, then read the whole index and
compare: memory grew with the number of runs by the facts, the entries and two sets.

:class:`IndexCheck` takes the entries as the runs verify instead. A writer inserts a run's
index entry in the transaction of its first append, so the index lists runs in the order the
events first hold them, the order they are verified in: each entry meets its run's facts
while they are fresh, and what is held per run is one slot of a dict of the runs found from
the events (the ids the store already listed). Any other order gives the same findings (an
entry or a run's facts wait in that slot until the other comes); only memory depends on it.
Findings are as before: one per entry that disagrees, in index order, then one per run with
events and no entry, in run order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from agentfootprint.errors import VerificationError
from agentfootprint.logformat.chain import is_text, shown, stored_kind

__all__ = ["IndexCheck", "RunFacts"]

#: what a run's ``run.open`` says of it: ``(conversation_id, parent run id, ts)``, or None
#: when the run failed verification (its verdict says why; its entry is checked for
#: presence only)
RunFacts = tuple[Any, Any, Any] | None

_INDEXED: Final = ("conversation_id", "parent_run_id", "opened_at")


class _Waiting:
    """A run with events whose verdict has not come yet, and no entry yet."""


class _Listed:
    """A run whose entry has been checked."""


_WAITING: Final = _Waiting()
_LISTED: Final = _Listed()


class _Verdict:
    """A run that verified (or failed) before its entry came."""

    __slots__ = ("facts",)

    def __init__(self, facts: RunFacts) -> None:
        self.facts = facts


class _Entry:
    """An entry that came before its run's verdict, and its place in the index."""

    __slots__ = ("entry", "place")

    def __init__(self, place: int, entry: Any) -> None:
        self.place, self.entry = place, entry


class IndexCheck:
    """One whole-file index check: :meth:`verdict` after each run, :meth:`findings` once at
    the end. ``run_ids`` are the runs found from the events (never from the index);
    ``entries`` the index in its own order, read lazily (None: the source has no index, and
    there is nothing to find)."""

    def __init__(self, run_ids: Iterable[Any], entries: Iterable[Any] | None) -> None:
        self._runs: dict[Any, Any] = dict.fromkeys(run_ids, _WAITING)
        self._indexed = entries is not None
        self._entries: Iterator[Any] = iter(() if entries is None else entries)
        self._taken = 0  # entries read so far
        self._verdicts = 0
        self._unknown: set[Any] = set()  # entries naming no run with events (rare)
        self._found: list[tuple[int, VerificationError]] = []

    @property
    def runs(self) -> Mapping[Any, object]:
        """Every run found from the events (its keys; the values are this check's own)."""
        return self._runs

    def verdict(self, run_id: Any, facts: RunFacts) -> None:
        """Record a run's facts (None: it failed), then read as many entries as verdicts."""
        slot = self._runs.get(run_id, _LISTED)
        if type(slot) is _Entry:
            self._runs[run_id] = _LISTED
            self._compare(slot.place, slot.entry, facts)
        elif slot is _WAITING:
            self._runs[run_id] = _Verdict(facts)
        self._verdicts += 1
        while self._taken < self._verdicts and self._take():
            pass

    def findings(self) -> Iterator[VerificationError]:
        """The rest of the index read, then every finding: per entry in index order, then
        per run with events and no entry, in run order."""
        if not self._indexed:
            return
        while self._take():
            pass
        self._found.sort(key=lambda found: found[0])  # stable: one finding per entry
        for _, finding in self._found:
            yield finding
        for run_id, slot in self._runs.items():
            if slot is not _LISTED and type(slot) is not _Entry:
                yield VerificationError(
                    shown(run_id),
                    None,
                    "the log holds events of this run but the index has no row for it",
                    code="index",
                )

    def _take(self) -> bool:
        entry: Any = next(self._entries, _LISTED)
        if entry is _LISTED:
            return False
        place = self._taken
        self._taken += 1
        run_id = entry.run_id
        if not is_text(run_id):
            kind = "text that is not UTF-8" if type(run_id) is str else stored_kind(run_id)
            self._flag(place, shown(run_id), None, f"index row's run id is {kind}, not text")
            return True
        slot = self._runs.get(run_id)
        if slot is None:  # no run with events of this id
            if run_id in self._unknown:
                self._flag(place, run_id, None, "the index lists this run twice")
            else:
                self._unknown.add(run_id)
                self._flag(
                    place, run_id, None, "the index lists this run but the log holds no event of it"
                )
        elif slot is _LISTED or type(slot) is _Entry:
            self._flag(place, run_id, None, "the index lists this run twice")
        elif slot is _WAITING:
            self._runs[run_id] = _Entry(place, entry)
        else:
            self._runs[run_id] = _LISTED
            self._compare(place, entry, slot.facts)
        return True

    def _compare(self, place: int, entry: Any, facts: RunFacts) -> None:
        if facts is None:  # the run failed: its verdict says why
            return
        indexed = (entry.conversation_id, entry.parent_run_id, entry.opened_at)
        differ = [
            f"{name} {have!r} where run.open says {want!r}"
            for name, have, want in zip(_INDEXED, indexed, facts, strict=True)
            if not _same(have, want)
        ]
        if differ:
            self._flag(
                place,
                entry.run_id,
                0,
                "the index row disagrees with the events: " + "; ".join(differ),
            )

    def _flag(self, place: int, run_id: str, seq: int | None, why: str) -> None:
        self._found.append((place, VerificationError(run_id, seq, why, code="index")))


def _same(index_value: Any, event_value: Any) -> bool:
    """Equal and of the same type (``1 == 1.0 == True`` does not make an index agree)."""
    return type(index_value) is type(event_value) and index_value == event_value
