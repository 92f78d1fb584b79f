"""The seal log checked against the runs (whole-file verification), and the Merkle tree of
sealed runs it orders (docs/log-format.md sections 4.3 and 9.5; docs/merkle.md).

The seal log is an order, not evidence: each leaf is recomputed from its run's verified rows
(``run_leaf(run, events, head, SHA-256(envelope))``). What the log adds is the record that a
run *was* sealed: a run whose leaf is there but whose seal is gone (its tail cut with its
close and seal) is INVALID, and so is a sealed run the log does not list. Dropping the leaf
too, rewriting a run or reordering leaves changes the tree, which a signed checkpoint kept
elsewhere shows (:mod:`agentfootprint.verify.checkpoint`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentfootprint.errors import VerificationError
from agentfootprint.verify.chain import shown
from agentfootprint.verify.merkle import leaf_hash, run_leaf

__all__ = ["SealedRun", "seal_log_findings", "tree_leaves"]

CODE = "seal-log"


@dataclass(frozen=True, slots=True)
class SealedRun:
    """What a verified run's leaf is made of (its whole log: the ``run.seal`` row included)."""

    events: int
    head: bytes
    #: SHA-256 of the seal envelope's bytes; None for a verified run without a seal
    seal: bytes | None


def _finding(run_id: object, reason: str) -> VerificationError:
    return VerificationError(shown(run_id), None, reason, code=CODE)


def seal_log_findings(
    log: list[tuple[object, object]], runs: Mapping[object, SealedRun | None]
) -> list[VerificationError]:
    """One finding per seal log row that does not stand (its index, its run) and per sealed
    run it does not list. ``runs`` holds every run found from the events: its
    :class:`SealedRun`, or None when it failed verification (already INVALID)."""
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
            continue
        verified = runs[run_id]
        if verified is not None and verified.seal is None:
            findings.append(
                _finding(
                    run_id,
                    f"seal log leaf {index} says the run was sealed, but it has no seal: its "
                    "tail was cut (its close and seal removed) or its seal taken out",
                )
            )
    for run_id, verified in runs.items():
        if verified is not None and verified.seal is not None and run_id not in listed:
            findings.append(_finding(run_id, "a sealed run with no leaf in the seal log"))
    return findings


def tree_leaves(
    log: list[tuple[object, object]], runs: Mapping[object, SealedRun | None]
) -> list[bytes]:
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
