"""``replay`` and ``diff``: a recorded run against today's code, and two runs compared.

The replay and diff modules (and so the runtime) are imported inside the commands:
``verify`` must keep working where ``agentfootprint.core`` cannot be imported.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agentfootprint.cli._boundary import (
    EXIT_DIFFERENT,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    fail,
    one_line,
    verification_message,
)
from agentfootprint.cli._common import (
    DB,
    Database,
    db_file,
    echo_json,
    open_log,
    open_vault_argument,
)
from agentfootprint.cli._factory import build_agent, cwd_on_path
from agentfootprint.cli._progress import PROGRESS_EPILOG, progress
from agentfootprint.errors import ReplayDivergence, RunError, VerificationError
from agentfootprint.verify.verifier import shared_verifier

if TYPE_CHECKING:
    from agentfootprint.audit.diff import PieceDifference, RunDiff
    from agentfootprint.replayer.replay_run import ReplayResult

__all__ = ["diff_command", "replay_command"]


def _digest(value: Any) -> str:
    """A digest shortened for reading (other values, e.g. a model name, as they are)."""
    if value is None:
        return "-"
    text = one_line(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12] + "…"
    return text if len(text) <= 40 else text[:39] + "…"


def _echo_diff(diff: str, labels: tuple[str, str] | None = None) -> None:
    if not diff:
        return
    lines = diff.rstrip("\n").splitlines()
    if labels is not None:  # piece_diff names the sides "original" and "replay"
        lines = [
            f"--- {labels[0]} " + line.removeprefix("--- original ")
            if line.startswith("--- original ")
            else f"+++ {labels[1]} " + line.removeprefix("+++ replay ")
            if line.startswith("+++ replay ")
            else line
            for line in lines
        ]
    for line in lines:
        click.echo(f"    {line}")


@click.command("replay", epilog=PROGRESS_EPILOG)
@click.argument("db", type=DB)
@click.argument("run_id")
@click.option(
    "--agent",
    "factory",
    required=True,
    metavar="MODULE:FACTORY",
    help="A callable returning the Agent to replay with (its current code and "
    "configuration), e.g. myproject.agents:build_agent. MODULE is imported from "
    "sys.path with the current directory added.",
)
@click.option(
    "--until",
    type=click.IntRange(min=0),
    metavar="K",
    help="Fork at call K: calls before K are replayed and checked, call K onward goes "
    "to the agent's own provider and tools (live).",
)
@click.option(
    "--disclosures",
    "vault",
    type=DB,
    metavar="VAULT",
    help="The disclosure vault the original was recorded with: a run recorded under a "
    "redaction policy replays byte for byte when its commitments can be opened (opened "
    "read-only; the replay's own disclosures go to the agent's vault).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
def replay_command(
    db: Database,
    run_id: str,
    factory: str,
    until: int | None,
    vault: Database | None,
    as_json: bool,
) -> None:
    """Replay RUN_ID of DB with the agent FACTORY builds: no model call, no tool runs.

    DB is a database (opened read-only, never changed) or an export bundle. Each call is
    answered with the response the original received and each tool call with its recorded
    result; before each call the request the agent builds now is checked, piece by piece,
    against the original's receipt. The first difference stops the replay: its call, kind
    (system, messages, tools, model, params, request, tool-call, calls, redacted, policy,
    record), piece position, both digests and a unified diff are printed. The original
    must verify; once every request matched, the replay's rows must equal the original's.
    The replay is recorded as a run of the agent's own store.

    \b
    Exit codes:
      0  identical: every call served, and every row recorded, as in the original
      1  diverged (DIVERGED and the diff are printed), the original does not verify
         (INVALID), or the replay failed otherwise (FAILED)
      2  usage: bad MODULE:FACTORY, import error, not an Agent, unknown run; DB or
         VAULT missing, not a log / not a vault, or unreadable
    """
    from agentfootprint.replayer.replay_run import replay_sync

    with contextlib.ExitStack() as stack:
        source = stack.enter_context(open_log(db))
        opened = (
            stack.enter_context(contextlib.closing(open_vault_argument(vault, readonly=True)))
            if vault is not None
            else None
        )
        stack.enter_context(cwd_on_path())
        agent = stack.enter_context(build_agent(factory))
        try:  # the bar is erased before the outcome is printed
            with progress(desc="replay", unit="calls") as bar:
                outcome = replay_sync(
                    agent, source, run_id, until=until, disclosures=opened, on_progress=bar.at
                )
        except ReplayDivergence as exc:
            _report_divergence(run_id, exc, as_json)
            code = EXIT_DIFFERENT
        except VerificationError as exc:
            _report_invalid(run_id, exc, as_json)
            code = EXIT_INVALID
        except RunError as exc:  # e.g. the live provider of a fork failed
            _report_failed(run_id, exc, as_json)
            code = EXIT_DIFFERENT
        else:
            _report_replayed(outcome, as_json)
            code = EXIT_OK
    raise click.exceptions.Exit(code)


def _report_invalid(run_id: str, exc: VerificationError, as_json: bool) -> None:
    if not as_json:
        click.echo(f"INVALID   {verification_message(exc)}")
        return
    echo_json(
        {
            "run": run_id,
            "replay_run": None,
            "outcome": "invalid",
            "error": str(exc),
            "seq": exc.seq,
            "code": exc.code,
        }
    )


def _report_failed(run_id: str, exc: RunError, as_json: bool) -> None:
    error = f"{type(exc).__name__}: {exc}"
    if as_json:
        echo_json({"run": run_id, "replay_run": exc.run_id, "outcome": "failed", "error": error})
    else:
        click.echo(f"FAILED    run {one_line(run_id)}: {one_line(error)}")


def _report_replayed(outcome: ReplayResult, as_json: bool) -> None:
    result = outcome.result
    if as_json:
        echo_json(
            {
                "run": outcome.original_run,
                "replay_run": result.run_id,
                "outcome": "identical" if outcome.forked_at is None else "forked",
                "calls_checked": outcome.calls_checked,
                "forked_at": outcome.forked_at,
                "calls": result.calls,
                "answer": outcome.answer_shown,
                "divergence": None,
            }
        )
    elif outcome.forked_at is None:
        click.echo(
            f"REPLAYED  run {outcome.original_run}: {outcome.calls_checked} calls identical "
            f"(replay run {result.run_id})"
        )
    else:
        click.echo(
            f"FORKED    run {outcome.original_run} at call {outcome.forked_at}: "
            f"{outcome.calls_checked} calls identical, then {result.calls - outcome.calls_checked}"
            f" live (fork run {result.run_id}, {result.outcome})"
        )
        click.echo(f"answer: {outcome.answer_shown}")


def _report_divergence(run_id: str, exc: ReplayDivergence, as_json: bool) -> None:
    message = str(exc).removesuffix("\n" + exc.diff) if exc.diff else str(exc)
    if as_json:
        found = {
            "call": exc.call,
            "kind": exc.kind,
            "position": exc.position,
            "expected": exc.expected,
            "actual": exc.actual,
            "message": message,
            "diff": exc.diff,
        }
        echo_json(
            {"run": run_id, "replay_run": exc.run_id, "outcome": "diverged", "divergence": found}
        )
        return
    where = f"{exc.kind} piece {exc.position}" if exc.position is not None else exc.kind
    digests = (
        f"  original {_digest(exc.expected)}  replay {_digest(exc.actual)}"
        if exc.expected is not None or exc.actual is not None
        else ""
    )
    click.echo(f"DIVERGED  call {exc.call}: {where}{digests}")
    click.echo(f"  {message}")
    click.echo(f"  run {one_line(run_id)}, replay run {exc.run_id or '-'}")
    _echo_diff(exc.diff)


@click.command("diff")
@click.argument("db_a", type=DB)
@click.argument("rest", nargs=-1, required=True, metavar="RUN_A [DB_B] RUN_B")
@click.option("--json", "as_json", is_flag=True, help="Print the RunDiff as JSON.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="List at most N differences (default: all).",
)
def diff_command(db_a: Database, rest: tuple[str, ...], as_json: bool, limit: int | None) -> None:
    """Compare what the model was served in two runs, call by call and piece by piece.

    DB_A RUN_A RUN_B compares two runs of one log; DB_A RUN_A DB_B RUN_B compares runs
    of two logs. Each DB is a database (opened read-only, never changed) or an export
    bundle. Listed per difference: the call, the kind (model, params, system, messages,
    tools, or calls when the numbers of calls differ), the piece position, both digests
    shortened and a unified diff of the recorded content (A is run A, B is run B).
    Both runs are verified first.

    \b
    Exit codes:
      0  identical: both runs were served the same at every call
      1  different (or a log does not verify: INVALID is printed)
      2  usage: wrong arguments, unknown run; a DB missing, not a log, or unreadable
    """
    from agentfootprint.audit.diff import diff_runs

    if len(rest) == 2:
        (run_a, run_b), db_b = rest, None
    elif len(rest) == 3:
        run_a, db_name, run_b = rest
        db_b = db_file(db_name, "DB_B")
        if isinstance(db_b, Path) and not db_b.is_file():
            fail(f"DB_B {db_name!r} is not a file", EXIT_USAGE)
    else:
        fail(
            f"diff takes DB_A RUN_A RUN_B or DB_A RUN_A DB_B RUN_B, got {len(rest) + 1} arguments",
            EXIT_USAGE,
        )
    with contextlib.ExitStack() as stack:
        source_a = stack.enter_context(open_log(db_a))
        source_b = stack.enter_context(open_log(db_b)) if db_b is not None else source_a
        try:  # both runs verified first: a log that does not verify is never compared
            shared_verifier(source_a).verify(run_a)
            shared_verifier(source_b).verify(run_b)
            found = diff_runs(source_a, run_a, source_b, run_b, limit=limit)
        except VerificationError as exc:
            click.echo(f"INVALID   {verification_message(exc)}")
            raise click.exceptions.Exit(EXIT_INVALID) from None
    if as_json:
        echo_json(found.to_json())
    else:
        _report_diff(found, limit)
    raise click.exceptions.Exit(EXIT_OK if found.identical else EXIT_DIFFERENT)


def _report_diff(found: RunDiff, limit: int | None) -> None:
    runs = (
        f"run {found.run_a} ({found.calls_a} calls) and run {found.run_b} ({found.calls_b} calls)"
    )
    if found.identical:
        click.echo(f"IDENTICAL {runs}: the same served at every call")
        return
    count = len(found.differences)
    capped = " (--limit reached)" if limit is not None and count >= limit else ""
    click.echo(f"DIFFERENT {runs}: {count} difference{'s' * (count != 1)}{capped}")
    for difference in found.differences:
        click.echo(_difference_line(difference))
        _echo_diff(difference.diff, ("A", "B"))


def _difference_line(d: PieceDifference) -> str:
    if d.kind == "calls":
        return f"  calls: run A made {d.a} calls, run B {d.b}"
    where = f"{d.kind}[{d.position}]" if d.position is not None else d.kind
    return f"  call {d.call} {where}  A {_digest(d.a)}  B {_digest(d.b)}"
