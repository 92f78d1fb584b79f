"""``demo``: record a scripted two-turn agent run, sealed, then verify what was recorded."""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agentfootprint.cli._boundary import EXIT_OK, one_line
from agentfootprint.cli._common import TARGET_DB, Database
from agentfootprint.cli.verifying import report, severity
from agentfootprint.errors import VerificationError
from agentfootprint.logformat.canonical import parse
from agentfootprint.seal.signer import Ed25519Signer
from agentfootprint.store.base import EventReader
from agentfootprint.store.urls import open_store_url
from agentfootprint.verify.verifier import Verifier

if TYPE_CHECKING:
    from agentfootprint.agent.agent import RunResult

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
    type=TARGET_DB,
    default=Path("agentfootprint.db"),
    show_default=True,
    help="SQLite file to record into (created if missing; runs are appended; a file "
    "that is not an agentfootprint log is refused).",
)
@click.option(
    "--base-url",
    default=None,
    metavar="URL",
    help="Run the demo against an OpenAI-compatible server at URL (e.g. a local Ollama at "
    "http://localhost:11434/v1) instead of the scripted model; needs --model and "
    'the openai extra (pip install -e ".[openai]" from a clone). The key, if the server needs '
    "one, is read from OPENAI_API_KEY and never recorded.",
)
@click.option("--model", default=None, metavar="NAME", help="The model to ask (with --base-url).")
def demo(db: Database, base_url: str | None, model: str | None) -> None:
    """Record a two-tool, two-turn agent run, seal it, then verify it.

    By default no model or network is used: the scripted provider plays the model, and
    everything else (stages, store, receipts, seals, verifier) is the real thing. Each run
    is sealed with a key made for this demo and verified under its public key (printed;
    `agentfootprint keys generate` makes a key to keep). With --base-url
    and --model a real model answers, through the OpenAI-compatible adapter, and each call's
    HTTP exchange is recorded by digest too.
    Exit codes as for `verify` (2 also when --db cannot be written or is not a log, or the
    server cannot be used).
    """
    from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent

    real: dict[str, Any] = {}
    if (base_url is None) != (model is None):
        raise click.UsageError("--base-url and --model go together: give both, or neither")
    if base_url is not None and model is not None:
        from agentfootprint.providers import openai

        real = {"provider": openai(base_url=base_url), "model": model}
    signer = Ed25519Signer.generate()  # the demo's own: printed public, never written
    with contextlib.closing(open_store_url(db, option="--db")) as store:
        agent = build_demo_agent(store, signer=signer, **real)
        results: list[RunResult] = []
        for question in DEMO_QUESTIONS:
            parent = results[-1] if results else None
            click.echo(f"\nuser> {question}")
            result = agent.run_sync(question, continue_from=parent)
            click.echo(f"agent> {result.answer}")
            results.append(result)
        click.echo("")
        verifier = Verifier(store, trusted_keys=[signer.public])
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
        f"Its runs are sealed by a key made for this demo; prove who sealed them with:\n"
        f"  agentfootprint verify {db} --key {signer.public.text}\n"
        f"Replay it against today's code (no model call):\n"
        f"  agentfootprint replay {db} {last} --agent agentfootprint.agent.demo:replay_agent"
    )
    raise click.exceptions.Exit(worst)
