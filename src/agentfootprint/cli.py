"""The ``agentfootprint`` command: run the demo, list and inspect runs, verify logs, replay.

Exit codes of ``verify`` (and ``demo``, which verifies what it recorded):

* 0: every run verified and is closed (VALID_UNSIGNED);
* 1: a run failed verification (the message names run, seq and reason);
* 2: usage error, or the database could not be opened or read;
* 3: every run is consistent but at least one never closed (UNSEALED: a crash).

``replay`` and ``diff`` use the same style: 0 identical, 1 diverged / different, 2 usage.
The replay and diff modules are imported inside their commands: ``verify`` must keep
working where the runtime (``agentfootprint.core``) cannot be imported.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
import orjson

from agentfootprint import __version__
from agentfootprint.audit.read import RunReader
from agentfootprint.errors import (
    AgentFootprintError,
    ReplayDivergence,
    RunError,
    RunNotFoundError,
    StoreError,
    UsageError,
    VerificationError,
)
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.transfer import export_runs, import_bundle
from agentfootprint.store.vault import DisclosureVault, disclosures_document, read_disclosures
from agentfootprint.verify.bundle import BundleSource, is_bundle
from agentfootprint.verify.canonical import parse
from agentfootprint.verify.verifier import Outcome, RunVerification, Verifier

if TYPE_CHECKING:
    from agentfootprint.audit.diff import PieceDifference, RunDiff
    from agentfootprint.core.agent import Agent, RunResult

__all__ = ["EXIT_DIFFERENT", "EXIT_INVALID", "EXIT_OK", "EXIT_UNSEALED", "EXIT_USAGE", "main"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_UNSEALED = 0, 1, 2, 3
EXIT_DIFFERENT = 1  # replay diverged / diff found a difference (the same code as INVALID)

_DB = click.Path(exists=True, dir_okay=False, path_type=Path)


def _when(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def _open(path: Path) -> SqliteStore:
    try:
        return SqliteStore(path)
    except StoreError as exc:
        raise click.ClickException(f"cannot open {path}: {exc}") from exc


def _open_log(path: Path) -> Any:
    """A database or an export bundle, read the same way (``read``, ``runs``, ``close``)."""
    if is_bundle(path):
        try:
            return BundleSource(path)
        except VerificationError as exc:
            click.echo(f"INVALID         {exc}")
            sys.exit(EXIT_INVALID)
    return _open(path)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentfootprint")
def main() -> None:
    """agentfootprint: agent runs recorded as verifiable evidence.

    Every stage write is an append-only event in SQLite, every LLM call has a
    receipt of SHA-256 digests, and `verify` rebuilds each request the model
    was served from the log and checks it against its receipt.
    """


@main.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("agentfootprint.db"),
    show_default=True,
    help="SQLite file to record into (created if missing; runs are appended).",
)
def demo(db: Path) -> None:
    """Record a scripted two-tool, two-turn agent run, then verify it.

    No model or network is used: the scripted provider plays the model, and
    everything else (stages, store, receipts, verifier) is the real thing.
    Exit codes as for `verify`.
    """
    from agentfootprint.demo import DEMO_QUESTIONS, build_demo_agent

    store = _open(db)
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
        worst = max(worst, _verify_one(verifier, result.run_id), key=_severity)
    click.echo(
        f"\nRecorded to {db}. Inspect with:\n"
        f"  agentfootprint runs {db}\n"
        f"  agentfootprint show {db} {results[-1].run_id}\n"
        f"  agentfootprint served {db} {results[-1].run_id} 0\n"
        f"  agentfootprint verify {db}\n"
        f"Replay it against today's code (no model call):\n"
        f"  agentfootprint replay {db} {results[-1].run_id} "
        "--agent agentfootprint.demo:replay_agent"
    )
    store.close()
    sys.exit(worst)


def _account(store: SqliteStore, run_id: str) -> None:
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


def _verify_one(verifier: Verifier, run_id: str) -> int:
    try:
        result: RunVerification = verifier.verify(run_id)
    except VerificationError as exc:
        click.echo(f"INVALID         {exc}")
        return EXIT_INVALID
    ancestry = f", continues {result.ancestors[-1]}" if result.ancestors else ""
    click.echo(
        f"{result.outcome.value:<15} run {run_id}: {result.events} events, "
        f"{result.receipts} receipts checked against rebuilt requests{ancestry}"
    )
    return EXIT_OK if result.outcome is Outcome.VALID_UNSIGNED else EXIT_UNSEALED


@main.command()
@click.argument("db", type=_DB)
def runs(db: Path) -> None:
    """List the runs in DB (a database or an export bundle), in the order they opened."""
    store = _open_log(db)
    infos = store.runs()
    if not infos:
        click.echo("no runs")
    for info in infos:
        status = "closed" if info.closed else "open"
        if info.closed:
            last = next(iter(store.read(info.run_id, start=info.events - 1)))
            status = parse(last.body).get("outcome", status)
        parent = f" parent={info.parent_run_id}" if info.parent_run_id else ""
        click.echo(
            f"{info.run_id}  {_when(info.opened_at)}  {info.events:>5} events  "
            f"{status:<13} conversation={info.conversation_id}{parent}"
        )
    store.close()


def _short(value: Any, limit: int = 72) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


@main.command()
@click.argument("db", type=_DB)
@click.argument("run_id")
def show(db: Path, run_id: str) -> None:
    """Print RUN_ID's commit timeline: each stage's writes, receipts and decisions.

    DB is a database or an export bundle; redacted values show as their commitments.
    """
    store = _open_log(db)
    try:
        events = list(store.read(run_id))
    except RunNotFoundError as exc:
        store.close()
        _fail(str(exc), EXIT_USAGE)
    pending: list[str] = []
    for event in events:
        body = parse(event.body)
        if event.type == "run.open":
            parent = body.get("parent")
            click.echo(
                f"run {run_id}  opened {_when(event.ts)}  model={body.get('model')}"
                + (f"  continues {parent['run_id']}" if parent else "")
            )
        elif event.type == "write":
            value = "" if body["verb"] == "delete" else " " + _short(body.get("value"))
            pending.append(f"    {body['verb']:<6} {body['path']}{value}")
        elif event.type == "receipt":
            pending.append(
                f"    receipt call {body['call']}: request {body['request'][:16]}… "
                f"({body['messages']['keep'] + len(body['messages']['add'])} messages)"
            )
        elif event.type == "event":
            pending.append(f"    event  {body['name']}")
        elif event.type == "commit":
            extra = f" -> {body['decision']}" if "decision" in body else ""
            if "error" in body:
                error = body["error"]
                detail = (
                    error.get("message", error.get("details")) if isinstance(error, dict) else error
                )
                kind = error.get("type", "error") if isinstance(error, dict) else "error"
                extra += f"  ERROR {kind}: {_short(detail, 120)}"
            click.echo(f"  [{body['commit']:>3}] {body['stage_run']}{extra}")
            for line in pending:
                click.echo(line)
            pending = []
        elif event.type == "run.close":
            click.echo(f"run closed {_when(event.ts)}: {_short(body, 200)}")
    store.close()


@main.command()
@click.argument("db", type=_DB)
@click.argument("run_id")
@click.argument("k", type=click.IntRange(min=0))
def served(db: Path, run_id: str, k: int) -> None:
    """Print the request served at call K (0-based) of RUN_ID, rebuilt from the log.

    DB is a database or an export bundle. Under a redaction policy this is the request as
    recorded (commitments in place of redacted values): what the receipt attests.
    """
    store = _open_log(db)
    try:
        request = RunReader(store).served_at(run_id, k)
    except (RunNotFoundError, UsageError) as exc:
        store.close()
        _fail(str(exc), EXIT_USAGE)
    except VerificationError as exc:
        store.close()
        _fail(str(exc), EXIT_INVALID)
    click.echo(orjson.dumps(request, option=orjson.OPT_INDENT_2).decode())
    store.close()


@main.command()
@click.argument("db", type=_DB)
@click.option(
    "--run",
    "run_ids",
    multiple=True,
    metavar="ID",
    help="Verify only this run (and its ancestors). Repeatable.",
)
@click.option(
    "--disclosures",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A disclosures file (from `disclose`): prove each value it opens.",
)
def verify(db: Path, run_ids: tuple[str, ...], disclosures: Path | None) -> None:
    """Verify every run in DB (or only --run ID): hashes, chain, and every receipt.

    DB is a database or an export bundle, verified the same way. Redacted runs verify
    without any secret; with --disclosures, each disclosed value is proven against the
    commitment the log holds (and must sit under the same key).

    \b
    Exit codes:
      0  every run verified and closed (VALID_UNSIGNED)
      1  a run, the bundle or a disclosure failed verification (where and why are printed)
      2  usage error, or DB could not be opened or read
      3  all consistent, but a run never closed (UNSEALED, e.g. after a crash)
    """
    store = _open_log(db)
    try:
        opened = read_disclosures(disclosures.read_bytes()) if disclosures else []
        targets = list(run_ids) or [info.run_id for info in store.runs()]
        verifier = Verifier(store)
        worst = EXIT_OK
        for run_id in targets:
            worst = max(worst, _verify_one(verifier, run_id), key=_severity)
        if opened and worst != EXIT_INVALID:
            try:
                for proven in verifier.check_disclosures(opened):
                    click.echo(
                        f"PROVEN          {proven.key} = {_short(proven.value, 60)} "
                        f"(run {proven.run_id} seq {proven.seq})"
                    )
            except VerificationError as exc:
                click.echo(f"INVALID         {exc}")
                worst = EXIT_INVALID
    except AgentFootprintError as exc:
        store.close()
        _fail(str(exc), EXIT_USAGE)
    if not targets:
        click.echo("no runs to verify")
    store.close()
    sys.exit(worst)


@main.command("export")
@click.argument("db", type=_DB)
@click.option(
    "--run",
    "run_ids",
    multiple=True,
    required=True,
    metavar="ID",
    help="A run to export (its ancestors come along). Repeatable.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The bundle file to write.",
)
def export_command(db: Path, run_ids: tuple[str, ...], out: Path) -> None:
    """Write runs of DB to one bundle file an auditor can verify offline.

    The bundle holds each run's events exactly as stored (with their hashes), the
    ancestors continued runs need, and a manifest. Redacted values are in it only as
    commitments; salts and the vault never are. Each run is verified before export.
    """
    store = _open(db)
    try:
        manifest = export_runs(store, list(run_ids), out)
    except VerificationError as exc:
        _fail(f"not exported: {exc}", EXIT_INVALID)
    except AgentFootprintError as exc:
        _fail(str(exc), EXIT_USAGE)
    finally:
        store.close()
    counts = manifest["counts"]
    click.echo(f"exported {counts['runs']} runs ({counts['events']} events) to {out}")


@main.command("import")
@click.argument("bundle", type=_DB)
@click.argument("db", type=click.Path(dir_okay=False, path_type=Path))
def import_command(bundle: Path, db: Path) -> None:
    """Verify BUNDLE, then load its runs into DB (created if missing).

    Runs already in DB with the same log are skipped; a run id held with a different
    log is refused (exit 2). A bundle that does not verify is not loaded (exit 1).
    """
    try:
        source = BundleSource(bundle)
    except VerificationError as exc:
        _fail(str(exc), EXIT_INVALID)
    store = _open(db)
    try:
        imported = import_bundle(source, store)
    except VerificationError as exc:
        _fail(f"not imported: {exc}", EXIT_INVALID)
    except AgentFootprintError as exc:
        _fail(str(exc), EXIT_USAGE)
    finally:
        store.close()
    skipped = len(source.runs()) - len(imported)
    click.echo(
        f"imported {len(imported)} runs into {db}"
        + (f" ({skipped} already there)" if skipped else "")
    )


@main.command()
@click.argument("vault", type=_DB)
@click.argument("commitments", nargs=-1)
@click.option("--run", "run_id", metavar="ID", help="Every commitment of this run.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The disclosures file to write.",
)
def disclose(vault: Path, commitments: tuple[str, ...], run_id: str | None, out: Path) -> None:
    """Write disclosures from VAULT for chosen COMMITMENTS (or --run ID).

    A disclosure is [salt, key, value]: with it, `verify --disclosures` proves the value a
    commitment hides. Give it only to whoever may see the value.
    """
    store = DisclosureVault(vault)
    try:
        chosen = list(commitments) + (store.commitments(run_id) if run_id else [])
        if not chosen:
            raise UsageError(
                f"the vault holds no disclosure of run {run_id}"
                if run_id
                else "name commitments, or --run ID"
            )
        found = store.disclose(chosen)
    except AgentFootprintError as exc:
        store.close()
        _fail(str(exc), EXIT_USAGE)
    store.close()
    out.write_bytes(disclosures_document(found))
    click.echo(f"wrote {len(found)} disclosures to {out}")


@main.command()
@click.argument("vault", type=_DB)
@click.argument("commitments", nargs=-1)
@click.option("--run", "run_id", metavar="ID", help="Every commitment of this run.")
def erase(vault: Path, commitments: tuple[str, ...], run_id: str | None) -> None:
    """Erase disclosures from VAULT (secure delete): those values become unrecoverable.

    The log never held the values, so it still verifies after an erasure.
    """
    store = DisclosureVault(vault)
    try:
        erased = store.erase(commitments=commitments, run_id=run_id)
    except AgentFootprintError as exc:
        store.close()
        _fail(str(exc), EXIT_USAGE)
    store.close()
    click.echo(f"erased {erased} disclosures from {vault}")


# -- replay, diff, state ------------------------------------------------------------------


@contextlib.contextmanager
def _cwd_on_path() -> Iterator[None]:
    """The current directory on ``sys.path`` (as ``python -m`` would have it) while inside."""
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    importlib.invalidate_caches()  # a module written since the last import must be found
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(cwd)


def _load_factory(spec: str) -> Callable[[], Any]:
    """``module:attr`` (``attr`` may be dotted) to the callable it names."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise UsageError(
            f"--agent takes MODULE:FACTORY (e.g. myproject.agents:build_agent), got {spec!r}"
        )
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or anything the module raised while importing
        raise UsageError(
            f"--agent {spec}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError as exc:
            raise UsageError(f"--agent {spec}: {module_name} has no attribute {attr!r}") from exc
    if not callable(found):
        raise UsageError(f"--agent {spec}: {attr} is not callable (it is a {type(found).__name__})")
    factory: Callable[[], Any] = found
    return factory


def _build_agent(spec: str) -> Agent:
    from agentfootprint.core.agent import Agent

    factory = _load_factory(spec)
    try:
        agent = factory()
    except Exception as exc:
        raise UsageError(f"--agent {spec}: the factory raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(agent, Agent):
        raise UsageError(
            f"--agent {spec}: the factory must return an agentfootprint Agent, "
            f"it returned {type(agent).__name__}"
        )
    return agent


def _digest(value: Any) -> str:
    """A digest shortened for reading (other values, e.g. a model name, as they are)."""
    if value is None:
        return "-"
    text = str(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12] + "…"
    return text if len(text) <= 40 else text[:39] + "…"


def _divergence_json(exc: ReplayDivergence) -> dict[str, Any]:
    message = str(exc)
    if exc.diff:
        message = message.removesuffix("\n" + exc.diff)
    return {
        "call": exc.call,
        "kind": exc.kind,
        "position": exc.position,
        "expected": exc.expected,
        "actual": exc.actual,
        "message": message,
        "diff": exc.diff,
    }


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


def _echo_json(document: Any) -> None:
    click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())


@main.command("replay")
@click.argument("db", type=_DB)
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
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="VAULT",
    help="The disclosure vault the original was recorded with: a run recorded under a "
    "redaction policy replays byte for byte when its commitments can be opened (read only; "
    "the replay's own disclosures go to the agent's vault).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
def replay_command(
    db: Path, run_id: str, factory: str, until: int | None, vault: Path | None, as_json: bool
) -> None:
    """Replay RUN_ID of DB with the agent FACTORY builds: no model call, no tool runs.

    DB is a database or an export bundle. Each call is answered with the response the
    original received and each tool call with its recorded result; before each call the
    request the agent builds now is checked, piece by piece, against the original's
    receipt. The first difference stops the replay: its call, kind (system, messages,
    tools, model, params, request, tool-call, calls, redacted, policy, record), piece
    position, both digests and a unified diff are printed. The original must verify; once
    every request matched, the replay's rows must equal the original's. The replay is
    recorded as a run of the agent's own store.

    \b
    Exit codes:
      0  identical: every call served, and every row recorded, as in the original
      1  diverged (DIVERGED and the diff are printed), the original does not verify
         (INVALID), or the replay failed otherwise
      2  usage: bad MODULE:FACTORY, import error, not an Agent, unknown run or DB
    """
    from agentfootprint.audit.replayer import replay_sync

    source = _open_log(db)
    agent: Agent | None = None
    try:
        with _cwd_on_path():
            agent = _build_agent(factory)
            try:
                outcome = replay_sync(agent, source, run_id, until=until, disclosures=vault)
            except ReplayDivergence as exc:
                _report_divergence(run_id, exc, as_json)
                code = EXIT_DIFFERENT
            except VerificationError as exc:
                if as_json:
                    _echo_json(
                        {
                            "run": run_id,
                            "replay_run": None,
                            "outcome": "invalid",
                            "error": str(exc),
                            "seq": exc.seq,
                            "code": exc.code,
                        }
                    )
                else:
                    click.echo(f"INVALID   {exc}")
                code = EXIT_INVALID
            except (UsageError, StoreError) as exc:
                _fail(str(exc), EXIT_USAGE)
            except RunError as exc:  # e.g. the live provider of a fork failed
                if as_json:
                    _echo_json(
                        {
                            "run": run_id,
                            "replay_run": exc.run_id,
                            "outcome": "failed",
                            "error": f"{type(exc).__name__}: {exc}",
                        }
                    )
                else:
                    click.echo(f"FAILED    run {run_id}: {type(exc).__name__}: {exc}")
                code = EXIT_DIFFERENT
            else:
                _report_replayed(outcome, as_json)
                code = EXIT_OK
    except UsageError as exc:
        _fail(str(exc), EXIT_USAGE)
    finally:
        if agent is not None:
            agent.close()
        source.close()
    sys.exit(code)


def _report_replayed(outcome: Any, as_json: bool) -> None:
    result = outcome.result
    if as_json:
        _echo_json(
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
    found = _divergence_json(exc)
    if as_json:
        _echo_json(
            {
                "run": run_id,
                "replay_run": exc.run_id,
                "outcome": "diverged",
                "divergence": found,
            }
        )
        return
    where = f"{exc.kind} piece {exc.position}" if exc.position is not None else exc.kind
    digests = (
        f"  original {_digest(exc.expected)}  replay {_digest(exc.actual)}"
        if exc.expected is not None or exc.actual is not None
        else ""
    )
    click.echo(f"DIVERGED  call {exc.call}: {where}{digests}")
    click.echo(f"  {found['message']}")
    click.echo(f"  run {run_id}, replay run {exc.run_id or '-'}")
    _echo_diff(exc.diff)


@main.command("diff")
@click.argument("db_a", type=_DB)
@click.argument("rest", nargs=-1, required=True, metavar="RUN_A [DB_B] RUN_B")
@click.option("--json", "as_json", is_flag=True, help="Print the RunDiff as JSON.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="List at most N differences (default: all).",
)
def diff_command(db_a: Path, rest: tuple[str, ...], as_json: bool, limit: int | None) -> None:
    """Compare what the model was served in two runs, call by call and piece by piece.

    DB_A RUN_A RUN_B compares two runs of one log; DB_A RUN_A DB_B RUN_B compares runs
    of two logs. Each DB is a database or an export bundle. Listed per difference: the
    call, the kind (model, params, system, messages, tools, or calls when the numbers of
    calls differ), the piece position, both digests shortened and a unified diff of the
    recorded content (A is run A, B is run B).

    \b
    Exit codes:
      0  identical: both runs were served the same at every call
      1  different (or a log does not verify: INVALID is printed)
      2  usage: wrong arguments, unknown run, DB could not be opened
    """
    from agentfootprint.audit.diff import diff_runs

    if len(rest) == 2:
        (run_a, run_b), db_b = rest, None
    elif len(rest) == 3:
        run_a, db_name, run_b = rest
        db_b = Path(db_name)
        if not db_b.is_file():
            _fail(f"DB_B {db_name!r} is not a file", EXIT_USAGE)
    else:
        _fail(
            f"diff takes DB_A RUN_A RUN_B or DB_A RUN_A DB_B RUN_B, got {len(rest) + 1} arguments",
            EXIT_USAGE,
        )
    source_a = _open_log(db_a)
    source_b = _open_log(db_b) if db_b is not None else source_a
    try:
        found = diff_runs(source_a, run_a, source_b, run_b, limit=limit)
    except VerificationError as exc:
        click.echo(f"INVALID   {exc}")
        code = EXIT_INVALID
    except (UsageError, StoreError) as exc:
        _fail(str(exc), EXIT_USAGE)
    else:
        if as_json:
            _echo_json(found.to_json())
        else:
            _report_diff(found, limit)
        code = EXIT_OK if found.identical else EXIT_DIFFERENT
    finally:
        source_a.close()
        if source_b is not source_a:
            source_b.close()
    sys.exit(code)


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


@main.command()
@click.argument("db", type=_DB)
@click.argument("run_id")
@click.option(
    "--at",
    "commit",
    type=click.IntRange(min=-1),
    required=True,
    metavar="COMMIT",
    help="The commit (0-based, the [n] that `show` prints) whose state to print; "
    "-1 is the state the run started from (its parent's final state, or {}).",
)
@click.option("--path", "key", metavar="KEY", help="Print only this state key's value.")
def state(db: Path, run_id: str, commit: int, key: str | None) -> None:
    """Print RUN_ID's state as of commit COMMIT, rebuilt from the log.

    The state is folded from the run's writes (and its ancestors' for a continued run)
    and printed as JSON with sorted keys; --path KEY prints one key's value. DB is a
    database or an export bundle; redacted values show as their commitments.
    Exit 2 for an unknown run, commit or key.
    """
    store = _open_log(db)
    try:
        folded = RunReader(store).state_at(run_id, commit)
    except (RunNotFoundError, UsageError, StoreError) as exc:
        store.close()
        _fail(str(exc), EXIT_USAGE)
    except VerificationError as exc:
        store.close()
        _fail(str(exc), EXIT_INVALID)
    store.close()
    if key is not None:
        if key not in folded:
            _fail(
                f"no key {key!r} in the state of run {run_id} at commit {commit} "
                f"(keys: {', '.join(sorted(folded)) or 'none'})",
                EXIT_USAGE,
            )
        folded = folded[key]
    click.echo(orjson.dumps(folded, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())


def _severity(code: int) -> int:
    return {EXIT_OK: 0, EXIT_UNSEALED: 1, EXIT_INVALID: 2}[code]
