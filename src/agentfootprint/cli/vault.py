"""``disclose`` and ``erase``: open chosen commitments from a vault, or erase them."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from agentfootprint.cli._boundary import one_line
from agentfootprint.cli._common import DB, check_output, write_output
from agentfootprint.errors import UsageError
from agentfootprint.store.vault import DisclosureVault, disclosures_document

__all__ = ["disclose", "erase"]


@click.command()
@click.argument("vault", type=DB)
@click.argument("commitments", nargs=-1)
@click.option("--run", "run_id", metavar="ID", help="Every commitment of this run.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The disclosures file to write (whole or not at all; never VAULT itself or "
    "another SQLite file).",
)
def disclose(vault: Path, commitments: tuple[str, ...], run_id: str | None, out: Path) -> None:
    """Write disclosures from VAULT for chosen COMMITMENTS (or --run ID).

    A disclosure is [salt, key, value]: with it, `verify --disclosures` proves the value a
    commitment hides. Give it only to whoever may see the value. VAULT is opened
    read-only and never changed.

    \b
    Exit codes:
      0  the disclosures file was written
      2  usage error: VAULT is missing or not a disclosure vault (a log is refused:
         it says what the file is); no such commitment; --out cannot be written
    """
    check_output(out, vault)
    with contextlib.closing(DisclosureVault(vault, readonly=True)) as store:
        chosen = list(commitments) + (store.commitments(run_id) if run_id else [])
        if not chosen:
            raise UsageError(
                f"the vault holds no disclosure of run {run_id}"
                if run_id
                else "name commitments, or --run ID"
            )
        found = store.disclose(chosen)
    write_output(out, disclosures_document(found))
    click.echo(f"wrote {len(found)} disclosures to {one_line(out)}")


@click.command()
@click.argument("vault", type=DB)
@click.argument("commitments", nargs=-1)
@click.option("--run", "run_id", metavar="ID", help="Every commitment of this run.")
def erase(vault: Path, commitments: tuple[str, ...], run_id: str | None) -> None:
    """Erase disclosures from VAULT (secure delete): those values become unrecoverable.

    The log never held the values, so it still verifies after an erasure. VAULT must be
    an existing disclosure vault: a log, or any other file, is refused and left as it is.

    \b
    Exit codes:
      0  erased (the count is printed)
      2  usage error: VAULT is missing or not a disclosure vault; nothing named to erase
    """
    if not commitments and run_id is None:
        raise UsageError("erase what? name commitments, or --run ID")
    with contextlib.closing(DisclosureVault(vault, create=False)) as store:
        erased = store.erase(commitments=commitments, run_id=run_id)
    click.echo(f"erased {erased} disclosures from {one_line(vault)}")
