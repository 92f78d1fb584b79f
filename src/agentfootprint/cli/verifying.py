"""``verify``: every run of a database or bundle, found from its events, checked.

Imports nothing of the runtime (``agentfootprint.core``): an auditor's machine needs only
the verifier.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import click

from agentfootprint.cli._boundary import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNSEALED,
    invalid_line,
    one_line,
)
from agentfootprint.cli._common import DB, open_log, short
from agentfootprint.errors import StoreError, VerificationError
from agentfootprint.store.vault import read_disclosures
from agentfootprint.verify.commitments import Disclosure
from agentfootprint.verify.verifier import Outcome, RunVerification, Verifier

__all__ = ["report", "severity", "verify"]

_SEVERITY = {EXIT_OK: 0, EXIT_UNSEALED: 1, EXIT_INVALID: 2}


def severity(code: int) -> int:
    """Order of exit codes when runs disagree: INVALID over UNSEALED over VALID."""
    return _SEVERITY[code]


def report(run_id: str, result: RunVerification | VerificationError) -> int:
    """Print one verdict line; returns its exit code."""
    if isinstance(result, VerificationError):
        click.echo(invalid_line(result))
        return EXIT_INVALID
    ancestry = f", continues {one_line(result.ancestors[-1])}" if result.ancestors else ""
    click.echo(
        f"{result.outcome.value:<15} run {one_line(run_id)}: {result.events} events, "
        f"{result.receipts} receipts checked against rebuilt requests{ancestry}"
    )
    return EXIT_OK if result.outcome is Outcome.VALID_UNSIGNED else EXIT_UNSEALED


def _results(
    verifier: Verifier, run_ids: tuple[str, ...]
) -> Iterable[tuple[str, RunVerification | VerificationError]]:
    if not run_ids:
        yield from verifier.verify_all()
        return
    for run_id in run_ids:
        try:
            yield run_id, verifier.verify(run_id)
        except VerificationError as exc:
            yield run_id, exc


def _disclosures(path: Path) -> list[Disclosure]:
    data = path.read_bytes()
    if data.startswith(b"SQLite format 3\x00"):
        raise StoreError(
            f"--disclosures {path} is an SQLite database (a vault or a log?), not a "
            "disclosures file: write one with `agentfootprint disclose VAULT ... --out FILE`"
        )
    try:
        return read_disclosures(data)
    except StoreError as exc:
        raise StoreError(f"--disclosures {path}: {exc}") from exc


@click.command()
@click.argument("db", type=DB)
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

    DB is a database or an export bundle, verified the same way, and never changed (a
    database is opened read-only, so a log on write-once media verifies). Every run is
    found from the events themselves, and each row of the run index that disagrees with
    them is reported as INVALID. Redacted runs verify without any secret; with
    --disclosures, each disclosed value is proven against the commitment the log holds
    (and must sit under the same key).

    \b
    Exit codes:
      0  every run verified and closed (VALID_UNSIGNED), or DB is a log with no runs
      1  a run, the run index, the bundle or a disclosure failed verification
         (INVALID lines say where and why)
      2  usage error: DB is missing, not a log (it says what it is instead), of a newer
         schema version, or unreadable; an unknown --run; a bad disclosures file
      3  all consistent, but a run never closed (UNSEALED, e.g. after a crash)
    """
    opened = _disclosures(disclosures) if disclosures is not None else []
    with open_log(db) as source:
        verifier = Verifier(source)
        worst, seen = EXIT_OK, 0
        for run_id, result in _results(verifier, run_ids):
            seen += 1
            worst = max(worst, report(run_id, result), key=severity)
        if not seen:
            click.echo("no runs to verify")
        if opened and worst != EXIT_INVALID:
            try:
                for proven in verifier.check_disclosures(opened):
                    value = one_line(short(proven.value, 60))
                    click.echo(
                        f"{'PROVEN':<15} {one_line(proven.key)} = {value}"
                        f" (run {one_line(proven.run_id)} seq {proven.seq})"
                    )
            except VerificationError as exc:
                click.echo(invalid_line(exc))
                worst = EXIT_INVALID
    raise click.exceptions.Exit(worst)
