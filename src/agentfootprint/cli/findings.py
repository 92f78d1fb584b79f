"""``findings``: a run's integrity findings as recorded, and recomputed from the log.

Read-only, like every inspect command: the run is verified first (with its ancestors), and
the findings are read from its verified events (:func:`agentfootprint.audit.integrity.findings`);
``--recompute`` runs today's checks over the same log and prints both sides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from agentfootprint.audit.integrity import FindingsReport, Trail, findings
from agentfootprint.cli._boundary import json_flag, one_line
from agentfootprint.cli._common import DB, Database, echo_json, open_log

__all__ = ["findings_command"]

_EPILOG = """\b
Exit codes:
  0  printed (with --recompute: recorded and recomputed agree)
  1  --recompute found a difference (each is printed); or the run (or one
     it continues) does not verify: nothing of it is shown
  2  usage error: DB missing, not a log, of a newer schema version or
     unreadable; unknown run
"""


@click.command("findings", epilog=_EPILOG)
@click.argument("db", type=DB)
@click.argument("run_id")
@click.option(
    "--recompute",
    is_flag=True,
    help="Also run today's integrity checks over the log (the declarations committed as "
    "tool_contracts, the dials run.open recorded, the recorded external grounds) and print "
    "what they file beside what the run recorded; exit 1 on any difference.",
)
@json_flag("One JSON document: the recorded findings, excusals and disposition, and with "
           "--recompute the recomputed ones and the differences.")  # fmt: skip
def findings_command(db: Database, run_id: str, recompute: bool, json_out: bool) -> None:
    """The integrity findings of RUN_ID: each finding the run recorded, the values an
    app's external grounds excused, the disposition ledger (per check: checked, found,
    not applicable, unreachable), the results layer's period verdicts and the answer's
    standing.

    Green means no armed check fired; it never means the answer is right. With
    --recompute, the findings are re-derived from the log with today's code, so a finding
    is a claim anyone can check rather than the writer's word. DB is a database (opened
    read-only, never changed) or an export bundle.
    """
    with open_log(db) as source:
        report = findings(source, run_id, recompute=recompute)
    if json_out:
        echo_json(to_json(report))
    else:
        for line in lines(report):
            click.echo(line)
    if not report.agrees:
        click.get_current_context().exit(1)


def to_json(report: FindingsReport) -> dict[str, Any]:
    out: dict[str, Any] = {
        "run_id": report.run_id,
        "outcome": report.outcome,
        "armed": report.armed,
        "recorded": _trail(report.recorded),
    }
    if report.recomputed is not None:
        out["recomputed"] = _trail(report.recomputed)
        out["differences"] = list(report.differences)
        out["redacted"] = report.redacted
        out["agrees"] = report.agrees
    return out


def _trail(trail: Trail) -> dict[str, Any]:
    return {
        "findings": [dict(f) for f in trail.findings],
        "external_grounds_used": [dict(u) for u in trail.used],
        "disposition": None if trail.disposition is None else dict(trail.disposition),
        "period_rows": [_plain(r) for r in trail.period_rows],
        "standing": _plain(trail.standing),
    }


def _plain(value: Any) -> Any:
    """A row or a standing as JSON: what the run committed is the writer's word, any shape."""
    return dict(value) if isinstance(value, Mapping) else value


def lines(report: FindingsReport) -> list[str]:
    out = [f"run {one_line(report.run_id)} ({one_line(report.outcome)})"]
    if not report.armed:
        out.append("no integrity check was armed in this run: nothing was checked")
    sides = [("recorded", report.recorded)]
    if report.recomputed is not None:
        sides.append(("recomputed", report.recomputed))
    for name, trail in sides:
        out.append(f"{name}: {len(trail.findings)} finding(s)")
        out.extend(f"  {_finding(f)}" for f in trail.findings)
        out.extend(
            f"  excused by {one_line(u.get('source'))}: {one_line(u.get('tool'))} "
            f"{one_line(u.get('path'))} = {one_line(u.get('value'))}"
            for u in trail.used
        )
        if trail.disposition is not None:
            out.append(f"  disposition ({one_line(trail.disposition.get('posture'))}):")
            rows = trail.disposition.get("rows")
            out.extend(f"    {_row(r)}" for r in (rows if isinstance(rows, list) else ()))
        out.extend(
            f"  period: {one_line(r.get('tool'))} (call id {one_line(r.get('tool_call_id'))}) "
            f"{one_line(r.get('verdict'))}"
            if isinstance(r, Mapping)
            else f"  period: (not a row: {one_line(r)})"
            for r in trail.period_rows
        )
        if trail.standing is not None and not isinstance(trail.standing, Mapping):
            out.append(f"  standing: (not a standing: {one_line(trail.standing)})")
        elif trail.standing is not None:
            given = trail.standing.get("reasons")
            reasons = ", ".join(map(one_line, given if isinstance(given, list) else ())) or "none"
            out.append(
                f"  standing: {one_line(trail.standing.get('standing'))} (reasons: {reasons})"
            )
    if report.recomputed is not None:
        if report.redacted:
            out.append(
                "recorded under a redaction policy: the period verdicts and the standing are "
                "shown as recorded, not recomputed"
            )
        if report.agrees:
            out.append("recorded and recomputed agree")
        else:
            out.append(f"{len(report.differences)} difference(s):")
            out.extend(f"  {one_line(d)}" for d in report.differences)
    return out


def _finding(f: Mapping[str, Any]) -> str:
    tag = " (advisory)" if f.get("advisory") else ""
    return f"{one_line(f.get('kind'))} at the {one_line(f.get('seam'))} seam{tag}: " + one_line(
        f.get("message")
    )


def _row(r: Any) -> str:
    if not isinstance(r, Mapping):  # the writer's word: any shape (a recompute says so)
        return f"(not a row: {one_line(r)})"
    armed = "" if r.get("armed") else " (not armed)"
    return (
        f"{one_line(r.get('check'))}{armed}: checked {r.get('checked')}, findings "
        f"{r.get('findings')}, not applicable {r.get('not_applicable')}, unreachable "
        f"{r.get('unreachable')}, synthetic {r.get('synthetic')}"
    )
