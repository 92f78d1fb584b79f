"""``disclose`` and ``erase``: open chosen commitments from a vault, or erase them."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from agentfootprint.cli._boundary import one_line
from agentfootprint.cli._common import (
    DB,
    INPUT_FILE,
    Database,
    check_output,
    open_vault_argument,
    write_output,
)
from agentfootprint.errors import UsageError
from agentfootprint.local_files import MAX_DISCLOSURES_BYTES
from agentfootprint.store.vault import disclosures_document

__all__ = ["disclose", "erase", "vault_key"]


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
def disclose(vault: Database, commitments: tuple[str, ...], run_id: str | None, out: Path) -> None:
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
    with contextlib.closing(open_vault_argument(vault, readonly=True)) as store:
        chosen = list(commitments) + (store.commitments(run_id) if run_id else [])
        if not chosen:
            raise UsageError(
                f"the vault holds no disclosure of run {run_id}"
                if run_id
                else "name commitments, or --run ID"
            )
        found = store.disclose(chosen)
    document = disclosures_document(found)
    if len(document) > MAX_DISCLOSURES_BYTES:  # `verify --disclosures` would refuse it
        raise UsageError(
            f"the {len(found)} disclosures are {len(document)} bytes, more than a disclosures "
            f"file may be ({MAX_DISCLOSURES_BYTES}): disclose fewer commitments per file"
        )
    write_output(out, document)
    click.echo(f"wrote {len(found)} disclosures to {one_line(out)}")


@click.command()
@click.argument("vault", type=DB)
@click.argument("commitments", nargs=-1)
@click.option("--run", "run_id", metavar="ID", help="Every commitment of this run.")
def erase(vault: Database, commitments: tuple[str, ...], run_id: str | None) -> None:
    """Erase disclosures from VAULT (secure delete): those values become unrecoverable.

    The log never held the values, so it still verifies after an erasure. VAULT must be
    an existing disclosure vault: a log, or any other file, is refused and left as it is.
    A PostgreSQL vault (postgresql://...?key_file=PATH) deletes the entry and its key;
    copies of the database taken before (WAL, backups) hold them wrapped under the master
    key until `vault-key rotate` replaces it (docs/stores.md).

    \b
    Exit codes:
      0  erased (the count is printed)
      2  usage error: VAULT is missing or not a disclosure vault; nothing named to erase
    """
    if not commitments and run_id is None:
        raise UsageError("erase what? name commitments, or --run ID")
    with contextlib.closing(open_vault_argument(vault)) as store:
        erased = store.erase(commitments=commitments, run_id=run_id)
    click.echo(f"erased {erased} disclosures from {one_line(vault)}")


@click.group("vault-key")
def vault_key() -> None:
    """The master key of a vault on PostgreSQL: create one, or rotate a vault to a new one.

    Every entry of a PostgreSQL vault is encrypted under a key of its own, kept only
    wrapped under the master key, a file of 64 hex digits the agents' user alone can read
    (docs/stores.md, "The vault on PostgreSQL").
    """


@vault_key.command("new")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def vault_key_new(path: Path) -> None:
    """Create a new random master key in PATH (64 hex digits, mode 0600).

    PATH must not exist: a key file is never overwritten. Nothing is printed of the key.

    \b
    Exit codes:
      0  the key file was written
      2  usage error: PATH exists, or its folder is missing or not writable
    """
    from agentfootprint.store.postgres_vault import new_master_key_file

    new_master_key_file(path)
    click.echo(f"wrote a new vault master key to {one_line(path)}")


@vault_key.command("rotate")
@click.argument("vault", type=DB)
@click.argument("new_key", type=INPUT_FILE)
def vault_key_rotate(vault: Database, new_key: Path) -> None:
    """Wrap every live entry's key of VAULT again under NEW_KEY, in one transaction.

    VAULT is postgresql://...?key_file=OLD (the current master key). Afterwards OLD opens
    nothing VAULT holds, and every vault opened with it is refused: open them with NEW_KEY.
    Entries erased before the rotation were not wrapped again, so once every copy of OLD
    is destroyed they are unrecoverable from any copy of the database (WAL, backups).

    \b
    Exit codes:
      0  rotated (the number of keys wrapped again is printed)
      2  usage error: VAULT is not a PostgreSQL vault, OLD does not open it, NEW_KEY is not
         a key file or is the current key; the database cannot be reached
    """
    if isinstance(vault, Path):
        raise UsageError(
            f"{vault} is an SQLite vault: it keeps no master key (an erase overwrites the "
            "bytes in place); rotation is for a vault on PostgreSQL"
        )
    from agentfootprint.store.postgres_vault import PostgresVault

    with contextlib.closing(open_vault_argument(vault)) as store:
        assert isinstance(store, PostgresVault)
        count = store.rotate_master_key(new_key)
        key_id = store.key_id
    click.echo(f"wrapped {count} keys again under the new master key (key id {key_id})")
