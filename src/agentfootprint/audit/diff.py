"""Comparing two recorded runs call by call and piece by piece, as data.

``diff_runs(source_a, run_a, source_b, run_b)`` reads both logs (one store or two) and
lists every difference in what the model was served: per call, the model, the
parameters, and each system piece, message and tool schema (by digest, with a unified
diff of the recorded content), plus a difference in the number of calls.
``same_recording`` is the byte-equality a replay must meet: every receipt and every
write value identical, ignoring exactly the fields that legitimately differ (run ids,
row timestamps, ``run.open``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agentfootprint.audit.divergence import piece_diff
from agentfootprint.audit.read import Receipt, RunReader
from agentfootprint.audit.sources import check_index, check_run_id, naming_run, opened
from agentfootprint.errors import UsageError
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.request import PIECE_KINDS
from agentfootprint.verify.verifier import RowSource

__all__ = ["PieceDifference", "RunDiff", "diff_runs", "same_recording"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PieceDifference:
    """One thing served differently at one call."""

    call: int
    kind: str  # system, messages, tools, model, params, calls
    position: int | None = None
    a: str | None = None  # digest (or value) in run A
    b: str | None = None
    diff: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunDiff:
    """Every difference between two runs' served requests (empty when identical)."""

    run_a: str
    run_b: str
    calls_a: int
    calls_b: int
    differences: list[PieceDifference] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "calls_a": self.calls_a,
            "calls_b": self.calls_b,
            "identical": self.identical,
            "differences": [asdict(d) for d in self.differences],
        }


def _calls(source: RowSource, run_id: str) -> list[tuple[dict[str, Any], Receipt | None]]:
    return list(RunReader(source).served_calls(run_id))


def diff_runs(
    source_a: RowSource | str | os.PathLike[str],
    run_a: str,
    source_b: RowSource | str | os.PathLike[str] | None = None,
    run_b: str | None = None,
    *,
    limit: int | None = None,
) -> RunDiff:
    """Compare two runs (``source_b`` defaults to ``source_a``); ``limit`` caps the list.

    A source is a store or bundle, or the path of one (opened read-only for this call).
    """
    check_run_id(run_a, "run_a")
    if run_b is None:
        raise UsageError(
            "run_b: diff_runs needs two run ids: diff_runs(source_a, run_a, source_b, run_b)",
            option="run_b",
        )
    check_run_id(run_b, "run_b")
    if limit is not None:
        check_index(limit, "limit", 1, "how many differences to list at most")
    with opened(source_a, "source_a") as rows_a, naming_run("run_a"):
        calls_a = _calls(rows_a, run_a)
    source = source_b if source_b is not None else source_a
    with opened(source, "source_b") as rows_b, naming_run("run_b"):
        calls_b = _calls(rows_b, run_b)
    return _differences(run_a, calls_a, run_b, calls_b, limit)


def _differences(
    run_a: str,
    calls_a: list[tuple[dict[str, Any], Receipt | None]],
    run_b: str,
    calls_b: list[tuple[dict[str, Any], Receipt | None]],
    limit: int | None,
) -> RunDiff:
    found: list[PieceDifference] = []
    for call, ((served_a, receipt_a), (served_b, receipt_b)) in enumerate(
        zip(calls_a, calls_b, strict=False)
    ):
        for name in ("model", "params"):
            if canon(served_a[name]) != canon(served_b[name]):
                found.append(
                    PieceDifference(
                        call=call, kind=name, a=str(served_a[name]), b=str(served_b[name])
                    )
                )
        for kind in PIECE_KINDS:
            digests_a = _digests(receipt_a, kind, served_a)
            digests_b = _digests(receipt_b, kind, served_b)
            if digests_a == digests_b:  # compared at C speed: positions only when they differ
                continue
            for position in range(max(len(digests_a), len(digests_b))):
                da = digests_a[position] if position < len(digests_a) else None
                db = digests_b[position] if position < len(digests_b) else None
                if da == db:
                    continue
                before = served_a[kind][position] if position < len(served_a[kind]) else None
                after = served_b[kind][position] if position < len(served_b[kind]) else None
                found.append(
                    PieceDifference(
                        call=call,
                        kind=kind,
                        position=position,
                        a=da,
                        b=db,
                        diff=piece_diff(before, after, f"call {call} {kind}[{position}]"),
                    )
                )
        if limit is not None and len(found) >= limit:
            break
    if len(calls_a) != len(calls_b):
        found.append(
            PieceDifference(
                call=min(len(calls_a), len(calls_b)),
                kind="calls",
                a=str(len(calls_a)),
                b=str(len(calls_b)),
            )
        )
    return RunDiff(
        run_a=run_a,
        run_b=run_b,
        calls_a=len(calls_a),
        calls_b=len(calls_b),
        differences=found[:limit] if limit is not None else found,
    )


def _digests(receipt: Receipt | None, kind: str, served: dict[str, Any]) -> Sequence[str]:
    """Piece digests from the receipt, or (no receipts kept) the canonical pieces."""
    if receipt is not None:
        digests: Sequence[str] = getattr(receipt, kind)
        return digests
    return tuple(canon(piece).decode("utf-8") for piece in served[kind])


def same_recording(
    source_a: RowSource | str | os.PathLike[str],
    run_a: str,
    source_b: RowSource | str | os.PathLike[str],
    run_b: str,
) -> bool:
    """Byte-equality of two recordings: every receipt body and every write, commit marker and
    event body equal, in order; only ``run.open``, run ids and ``ts`` may differ (and a
    ``run.close`` must match too)."""
    check_run_id(run_a, "run_a")
    check_run_id(run_b, "run_b")
    with opened(source_a, "source_a") as rows, naming_run("run_a"):
        recorded_a = [(e.type, bytes(e.body)) for e in rows.read(run_a) if e.type != "run.open"]
    with opened(source_b, "source_b") as rows, naming_run("run_b"):
        recorded_b = [(e.type, bytes(e.body)) for e in rows.read(run_b) if e.type != "run.open"]
    return recorded_a == recorded_b
