"""``demo``: record a scripted two-turn agent run, then verify what was recorded."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agentfootprint.cli._boundary import EXIT_OK, one_line
from agentfootprint.cli.verifying import report, severity
from agentfootprint.errors import VerificationError
from agentfootprint.store.base import EventReader
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.verify.canonical import parse
from agentfootprint.verify.verifier import Verifier

if TYPE_CHECKING:
    from agentfootprint.core.agent import RunResult

__all__ = ["demo"]


def _account(store: EventReader, run_id: str) -> None:
    stages: Counter[str] = Counter()
    writes = receipts = events = 0
    for event in store.read(run_id):
        events += 1
        if event.type == "commit":
            stages[parse(event.body)["stage"]] += 1
        elif event.type == "write":
            writes += 1
        elif event.type == "receipt":
            receipts += 1
    summary = ", ".join(f"{name} x{count}" for name, count in stages.items())
    click.echo(
        f"run {run_id}: {events} events, {sum(stages.values())} commits "
        f"({writes} writes), {receipts} LLM calls with receipts"
    )
    click.echo(f"  stages: {summary}")


@click.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("agentfootprint.db"),
    show_default=True,
    help="SQLite file to record into (created if missing; runs are appended; a file "
    "that is not an agentfootprint log is refused).",
)
def demo(db: Path) -> None:
    """Record a scripted two-tool, two-turn agent run, then verify it.

    No model or network is used: the scripted provider plays the model, and
    everything else (stages, store, receipts, verifier) is the real thing.
    Exit codes as for `verify` (2 also when --db cannot be written or is not a log).
    """
    from agentfootprint.demo import DEMO_QUESTIONS, build_demo_agent

    with SqliteStore(db) as store:
        agent = build_demo_agent(store)
        results: list[RunResult] = []
        for question in DEMO_QUESTIONS:
            parent = results[-1] if results else None
            click.echo(f"\nuser> {question}")
            result = agent.run_sync(question, continue_from=parent)
            click.echo(f"agent> {result.answer}")
            results.append(result)
        click.echo("")
        verifier = Verifier(store)
        worst = EXIT_OK
        for result in results:
            _account(store, result.run_id)
            try:
                verdict = report(result.run_id, verifier.verify(result.run_id))
            except VerificationError as exc:
                verdict = report(result.run_id, exc)
            worst = max(worst, verdict, key=severity)
    last = one_line(results[-1].run_id)
    click.echo(
        f"\nRecorded to {one_line(db)}. Inspect with:\n"
        f"  agentfootprint runs {db}\n"
        f"  agentfootprint show {db} {last}\n"
        f"  agentfootprint served {db} {last} 0\n"
        f"  agentfootprint verify {db}\n"
        f"Replay it against today's code (no model call):\n"
        f"  agentfootprint replay {db} {last} --agent agentfootprint.demo:replay_agent"
    )
    raise click.exceptions.Exit(worst)
