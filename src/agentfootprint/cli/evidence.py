"""``evidence``: where each value of a run's final answer was served, from the log.

Read-only, like every inspect command: the run is verified first (with its ancestors), and
the values are looked up in the tool results of its verified history
(:func:`agentfootprint.audit.evidence.evidence`).
"""

from __future__ import annotations

import click

from agentfootprint.audit.evidence import EvidenceLine, Served, evidence
from agentfootprint.cli._boundary import json_flag, one_line
from agentfootprint.cli._common import DB, Database, echo_json, open_log

__all__ = ["evidence_command"]

_EPILOG = """\b
Exit codes:
  0  printed (a value found in no result is listed, not an error)
  1  the run (or one it continues) does not verify: nothing of it is shown
  2  usage error: DB missing, not a log, of a newer schema version or
     unreadable; unknown run; a run with no final answer in text
"""


@click.command("evidence", epilog=_EPILOG)
@click.argument("db", type=DB)
@click.argument("run_id")
@json_flag("One JSON document: the run, the turn its answer answers, and each value with "
           "the tool results that served it (an empty list: found in no result).")  # fmt: skip
def evidence_command(db: Database, run_id: str, json_out: bool) -> None:
    """Where each value of RUN_ID's final answer was served: the tool, the call id, the turn.

    The values are those the answer states as data: a number of four digits or more
    ("41,200 IOPS" states 41200), an identifier with a digit (vol-0a1b2c3d), a one-token
    value in double quotes; prose ("32G", "2h", "48-port", "24/7") states none. Each is
    looked up, token-exact, in every tool result of the conversation's history, earlier
    turns and the runs it continues included, and listed with the results that served it,
    the run and commit that appended each, or as not found in any result. A value the user
    gave is in no result. This says where a value was served, never whether the answer is
    right. DB is a database (opened read-only, never changed) or an export bundle;
    redacted values stay commitments.
    """
    with open_log(db) as source:
        found = evidence(source, run_id)
    if json_out:
        turn = found[0].answer_turn if found else None
        echo_json(
            {"run_id": run_id, "answer_turn": turn, "values": [line.to_json() for line in found]}
        )
        return
    for line in lines(run_id, found):
        click.echo(line)


def lines(run_id: str, found: list[EvidenceLine]) -> list[str]:
    """The values as text: each value, then one indented line per result that served it."""
    if not found:
        return [f"the final answer of run {one_line(run_id)} states no value to look up"]
    turn = found[0].answer_turn
    out = [
        f"the final answer of run {one_line(run_id)} (turn {turn}) states {len(found)} "
        f"value{'' if len(found) == 1 else 's'}"
    ]
    for line in found:
        out.append(one_line(line.value))
        if not line.served:
            out.append("  not found in any result")
        out.extend(f"  {_served(run_id, turn, s)}" for s in line.served)
    return out


def _served(run_id: str, answer_turn: int, s: Served) -> str:
    distance = answer_turn - s.turn
    when = "this turn" if distance == 0 else f"{distance} turn{'' if distance == 1 else 's'} before"
    run = ""
    if s.run_id is not None:
        where = "" if s.run_id == run_id else f"run {one_line(s.run_id)} "
        run = f", appended at {where}commit {s.commit}"
    return (
        f"turn {s.turn} ({when}): {one_line(s.tool)} (call id {one_line(s.tool_call_id)}), "
        f"history [{s.history_index}]{run}"
    )
