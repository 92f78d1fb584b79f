"""``assess``: the answer's standing, folded from a verified run's committed record.

Read-only, like every inspect command: the run is verified first (with its ancestors), and
the answer layer's own fold runs over the state it started from and the state it ended with
(:func:`agentfootprint.audit.assessment.assess_run`), on any run, armed or not.
"""

from __future__ import annotations

import json

import click

from agentfootprint.audit.assessment import AssessmentReport, assess_run
from agentfootprint.cli._boundary import EXIT_INVALID, json_flag, one_line
from agentfootprint.cli._common import DB, Database, echo_json, open_log

__all__ = ["assess_command", "lines"]

_EPILOG = """\b
Exit codes:
  0  printed (and, for a run recorded with answer_layer, what it
     recorded equals the fold)
  1  the run (or one it continues) does not verify; or it was recorded
     with answer_layer and what it recorded differs from the fold
  2  usage error: DB missing, not a log, of a newer schema version or
     unreadable; unknown run
"""


@click.command("assess", epilog=_EPILOG)
@click.argument("db", type=DB)
@click.argument("run_id")
@json_flag(
    "One JSON document: the standing, reasons, checks and line of the fold and, for a run "
    "recorded with answer_layer, what it recorded and whether it matches."
)
def assess_command(db: Database, run_id: str, json_out: bool) -> None:
    """The answer's standing in RUN_ID, folded from its committed record.

    The answer layer's fold (answer_layer=True runs it in the run) over the run's state:
    the reasons a committed row of the run's turn supports (a pause waiting, a value the
    model gave a ruled argument, an empty or absent result, a period not held, a value of
    the answer no tool result carries, a run stopped early), the checks that had something
    to read, and the standing: ask, not-sure, consistent (checks ran and none fired: this is
    not a verification) or not-assessed. Never "known": no row here supports an answer. For
    a run recorded with answer_layer, it also says whether the answer_assessment the run
    recorded equals this fold. DB is a database (opened read-only, never changed) or an
    export bundle; under a redaction policy the fold reads commitments where the run read
    values.
    """
    with open_log(db) as source:
        report = assess_run(source, run_id)
    if json_out:
        echo_json(report.to_json())
    else:
        for text in lines(report):
            click.echo(text)
    if report.matches is False:
        raise click.exceptions.Exit(EXIT_INVALID)


def lines(report: AssessmentReport) -> list[str]:
    """The fold as text: the standing, its reasons and checks, the line; then, for an armed
    run, whether what it recorded equals the fold."""
    folded = report.assessment
    outcome = "no close" if report.outcome is None else report.outcome
    out = [
        f"assess run {one_line(report.run_id)} ({outcome})",
        f"standing: {folded['standing']}",
        "reasons:  " + (", ".join(folded["reasons"]) or "none"),
        "checked:  " + (", ".join(folded["checked"]) or "none"),
        f"line:     {report.line}",
    ]
    if report.redacted:
        out.append("note: recorded under a redaction policy: the fold reads commitments")
    if not report.armed:
        out.append("recorded: answer_layer was not armed in this run (nothing to compare)")
    elif report.matches is None:
        out.append("recorded: none (the run ended before its answer): nothing to compare")
    elif report.matches:
        out.append("recorded: answer_assessment equals the fold")
    elif report.recorded_event is None:
        out.append("recorded: DIFFERS: the run was armed and recorded no assessment")
    else:
        shown = json.dumps(report.recorded, ensure_ascii=False, default=str)
        out.append(f"recorded: DIFFERS from the fold: {one_line(shown)}")
    return out
