"""The seal log checked against the runs (docs/log-format.md sections 4.1, 9.2 step 5 and 9.5),
and the Merkle tree of sealed runs it orders (docs/merkle.md).

The seal log is an order, not evidence: each leaf is recomputed from its run's verified rows
(``run_leaf(run, events, head, SHA-256(envelope))``). What the log adds is the record that a
run *was* sealed. Each run is checked against it when the run is verified, by every path
(``verify(run_id)`` as much as ``verify_all``): a run the log lists that has no seal (its tail
cut with its close and seal, which alone would read as a crash) is INVALID, and so is a sealed
run the log does not list. Whole-file verification adds the findings about the log's own
rows. Dropping the leaf too, rewriting a run or reordering leaves changes the tree, which a
signed checkpoint kept elsewhere shows (:mod:`agentfootprint.verify.checkpoint`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentfootprint.errors import VerificationError
from agentfootprint.logformat.chain import shown
from agentfootprint.seal.merkle import leaf_hash, run_leaf

__all__ = [
    "SealListing",
    "SealedRun",
    "log_findings",
    "run_finding",
    "seal_log_findings",
    "tree_leaves",
]

CODE = "seal-log"

#: a seal log as a store gives it: ``(leaf, run_id)`` per row in leaf order, as stored
Log = list[tuple[object, object]]


@dataclass(frozen=True, slots=True)
class SealedRun:
    """What a verified run's leaf is made of (its whole log: the ``run.seal`` row included)."""

    events: int
    head: bytes
    #: SHA-256 of the seal envelope's bytes; None for a verified run without a seal
    seal: bytes | None


def _finding(run_id: object, reason: str) -> VerificationError:
    return VerificationError(shown(run_id), None, reason, code=CODE)


def _named(log: Log) -> dict[str, int]:
    """Each text run id the log names, with the position of the first row naming it."""
    named: dict[str, int] = {}
    for index, (_, run_id) in enumerate(log):
        if type(run_id) is str:
            named.setdefault(run_id, index)
    return named


def run_finding(run_id: object, leaf: int | None, sealed: bool) -> VerificationError | None:
    """The seal log's word on one verified run (section 9.2 step 5): ``leaf`` is the position
    of the first log row naming it (None: no row does), ``sealed`` whether it has a
    ``run.seal``. None when they agree."""
    if leaf is not None and not sealed:
        return _finding(
            run_id,
            f"seal log leaf {leaf} says the run was sealed, but it has no seal: its tail was "
            "cut (its close and seal removed) or its seal taken out",
        )
    if leaf is None and sealed:
        return _finding(run_id, "a sealed run with no leaf in the seal log")
    return None


def log_findings(log: Log, runs: Mapping[object, Any]) -> list[VerificationError]:
    """One finding per seal log row that does not stand (section 9.5 step 4): numbered out of
    place, a run id that is not text, a second row of a run, a run with no events (``runs``
    holds every run found from the events)."""
    findings: list[VerificationError] = []
    listed: set[object] = set()
    for index, (leaf, run_id) in enumerate(log):
        if type(leaf) is not int or leaf != index:
            findings.append(_finding(run_id, f"seal log row {index} is numbered {leaf!r}"))
            continue
        if type(run_id) is not str or run_id in listed:
            why = "a run id that is not text" if type(run_id) is not str else "a second leaf"
            findings.append(_finding(run_id, f"seal log leaf {index} holds {why}"))
            continue
        listed.add(run_id)
        if run_id not in runs:
            findings.append(_finding(run_id, f"seal log leaf {index} names a run with no events"))
    return findings


def seal_log_findings(log: Log, runs: Mapping[object, SealedRun | None]) -> list[VerificationError]:
    """:func:`log_findings`, then :func:`run_finding` for each run that verified (``runs``:
    its :class:`SealedRun`, or None when it failed verification, already INVALID). A
    verifier's own results hold the run findings already, as verdicts."""
    findings = log_findings(log, runs)
    named = _named(log)
    for run_id, verified in runs.items():
        if verified is not None:
            leaf = named.get(run_id) if type(run_id) is str else None
            found = run_finding(run_id, leaf, verified.seal is not None)
            if found is not None:
                findings.append(found)
    return findings


class SealListing:
    """A source's seal log as one verification call sees it: read once, before any run's
    rows, so a run it lists had its close and seal stored before they were read (a listed run
    read without them was cut, never caught while it was being sealed). A sealed run the first
    read does not list is looked up again in a fresh read, since it may have been sealed after
    it. A source without ``seal_log`` (a bundle), or whose ``seal_log()`` is None, has no
    seal log: nothing is checked."""

    def __init__(self, source: Any) -> None:
        read = getattr(source, "seal_log", None)
        self._read: Callable[[], Log | None] | None = read if callable(read) else None
        #: the rows as first read in this call (None: not read, or no seal log)
        self.log: Log | None = None
        self._named: dict[str, int] = {}
        self._done = False

    def start(self) -> None:
        """Read the log, once per call (a no-op after the first)."""
        if self._done or self._read is None:
            return
        self._done = True
        self.log = self._read()
        self._named = _named(self.log) if self.log is not None else {}

    def end(self) -> None:
        """The call is over: the next one reads the log again."""
        self._done, self.log, self._named = False, None, {}

    def finding(self, run_id: str, sealed: bool) -> VerificationError | None:
        """:func:`run_finding` for a run just verified (None without a seal log)."""
        if self.log is None or self._read is None:
            return None
        leaf = self._named.get(run_id)
        if leaf is None and sealed:  # sealed after the first read? a fresh one says
            leaf = _named(self._read() or []).get(run_id)
        return run_finding(run_id, leaf, sealed)


def tree_leaves(log: Log, runs: Mapping[object, SealedRun | None]) -> list[bytes]:
    """The Merkle leaf hashes in seal log order; raises the first finding when the log does
    not stand (a tree is only built over a whole, verified seal log)."""
    findings = seal_log_findings(log, runs)
    if findings:
        raise findings[0]
    leaves = []
    for _, run_id in log:
        verified = runs[run_id]
        if verified is None or verified.seal is None:
            raise _finding(run_id, "a leaf of a run that does not verify")
        data = run_leaf(
            run_id=str(run_id), events=verified.events, head=verified.head, seal=verified.seal
        )
        leaves.append(leaf_hash(data))
    return leaves
