"""``why``: the chain of writes behind a state key, and the reads behind each, from the log.

Read-only, like every inspect command: the run is verified first (with its ancestors), and
the chain is walked from its verified events (:func:`agentfootprint.audit.provenance.why`).
"""

from __future__ import annotations

import click

from agentfootprint.audit.provenance import (
    NOTHING_READ,
    READS_UNKNOWN,
    TOOL_RESULT,
    USER_MESSAGE,
    Message,
    Step,
    Why,
    why,
)
from agentfootprint.cli._boundary import json_flag, one_line
from agentfootprint.cli._common import DB, Database, echo_json, open_log
from agentfootprint.verify.verifier import shared_verifier

__all__ = ["why_command"]

_EPILOG = """\b
Exit codes:
  0  printed
  1  the run (or one it continues) does not verify: nothing of it is shown
  2  usage error: DB missing, not a log, of a newer schema version or
     unreadable; unknown run; COMMIT out of range; KEY not in the state
     at COMMIT
"""


@click.command("why", epilog=_EPILOG)
@click.argument("db", type=DB)
@click.argument("run_id")
@click.argument("key")
@click.option(
    "--at",
    "commit",
    type=click.IntRange(min=-1),
    metavar="COMMIT",
    help="Start from the write that gave KEY its value at commit COMMIT (the [n] that `show` "
    "prints; -1: the state the run started from). Default: the run's last commit.",
)
@json_flag("One JSON document: the steps (each write, its reads and the steps they lead to) "
           "and, where shown, each history message with the commit that appended it.")  # fmt: skip
def why_command(db: Database, run_id: str, key: str, commit: int | None, json_out: bool) -> None:
    """Why KEY holds its value in RUN_ID: the chain of writes, and the reads behind each.

    From the commit that last wrote KEY: the keys that stage had read before the write,
    the writes those keys came from, and so on back to the user message or a tool result.
    The reads are known for a run recorded with write_provenance="reads-prefix" (log
    format v6); for any other run they are said to be unknown, and the history as that
    stage saw it stands in, each message with the commit that appended it. The limit:
    almost every write follows a model call, which read the whole history, so the chain
    says which keys could have mattered, never which did. DB is a database (opened
    read-only, never changed) or an export bundle; redacted values stay commitments.
    """
    with open_log(db) as source:
        shared_verifier(source).verify(run_id)
        found = why(source, run_id, key, at=commit)
    if json_out:
        echo_json(found.to_json())
        return
    for line in lines(found):
        click.echo(line)


def lines(found: Why) -> list[str]:
    """The chain as text: one numbered line per write, nearest first (the numbers are the
    ``step`` indices of ``--json``), each read key followed by the step it came from."""
    recorded = "reads recorded" if found.reads_recorded else "reads not recorded"
    out = [
        f"why {one_line(found.key)} in run {one_line(found.run_id)} at commit {found.at} "
        f"({recorded})"
    ]
    for index, step in enumerate(found.steps):
        out.append(f"[{index}] {_where(found, step)}: {_said(step)}")
    if found.messages is not None:
        seen = "its messages" if found.key == "history" else "history as that stage saw it"
        out.append(f"{seen}, each with the commit that appended it:")
        out.extend(_message(found, m) for m in found.messages)
    return out


def _where(found: Why, step: Step) -> str:
    run = "" if step.run_id == found.run_id else f"run {one_line(step.run_id)} "
    call = f", model call {step.call}" if step.call is not None else ""
    return (
        f"{one_line(step.key)} {step.verb} at {run}commit {step.commit} "
        f"{one_line(step.stage_run)} (seq {step.seq}{call})"
    )


def _said(step: Step) -> str:
    if step.origin == TOOL_RESULT:
        results = ", ".join(
            f"{one_line(t.get('tool'))} (call id {one_line(t.get('tool_call_id'))})"
            for t in step.tools
        )
        return f"a tool result: {results}"
    if step.origin == USER_MESSAGE:
        return "the user message"
    if step.origin == NOTHING_READ:
        return "read no key (from the stage's code, the agent's configuration or a port)"
    if step.origin == READS_UNKNOWN:
        return 'reads unknown (not recorded: write_provenance="reads-prefix" records them)'
    came = dict(step.sources)
    return "read " + ", ".join(
        f"{one_line(k)} [{came[k]}]" if k in came else one_line(k) for k in step.reads or ()
    )


def _message(found: Why, m: Message) -> str:
    run = "" if m.run_id == found.run_id else f"run {one_line(m.run_id)} "
    tool = f"  {one_line(m.tool)} (call id {one_line(m.tool_call_id)})" if m.role == "tool" else ""
    return (
        f"  [{m.index}] {one_line(m.role):<9} appended at {run}commit {m.commit} "
        f"{one_line(m.stage_run)}{tool}"
    )
