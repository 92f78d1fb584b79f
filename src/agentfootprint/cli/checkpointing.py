"""``checkpoint``: a signed checkpoint of a database's Merkle log of sealed runs.

Keep what it prints outside the database (a ticket, a CI artifact, a witness): ``verify DB
--checkpoint FILE --key PUB`` later proves the log only grew since (docs/merkle.md).
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from agentfootprint.cli._boundary import EXIT_INVALID, invalid_line
from agentfootprint.cli._common import DB, open_log
from agentfootprint.cli.keys import _PASSPHRASE_HELP, _passphrase
from agentfootprint.errors import VerificationError
from agentfootprint.seal.signer import load_signer
from agentfootprint.verify.checkpoint import make_checkpoint
from agentfootprint.verify.verifier import Verifier

__all__ = ["checkpoint_command", "default_origin"]


def default_origin(db: Path) -> str:
    """``agentfootprint/<file name without suffix>``, with what a note key name cannot hold
    (spaces, ``+``, control characters) as ``-``."""
    return "agentfootprint/" + (re.sub(r"[\s+\x00-\x1f]", "-", db.stem) or "log")


@click.command("checkpoint")
@click.argument("db", type=DB)
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The private key file that signs the checkpoint (PKCS8 PEM, as `keys generate` "
    "writes it).",
)
@click.option("--passphrase-env", "passphrase_env", metavar="VAR", help=_PASSPHRASE_HELP)
@click.option(
    "--origin",
    metavar="NAME",
    help="The log's name in the checkpoint and its signature (default: agentfootprint/ and "
    "the file name). Keep it the same for every checkpoint of one database.",
)
def checkpoint_command(
    db: Path, key_path: Path, passphrase_env: str | None, origin: str | None
) -> None:
    """Print a signed checkpoint of DB's sealed runs (a C2SP tlog-checkpoint note).

    Every run of DB is verified first; the checkpoint is the RFC 6962 root of one leaf per
    sealed run, in the order the store sealed them. DB is opened read-only and never
    changed.

    \b
    Exit codes:
      0  the checkpoint was printed
      1  a sealed run, or the seal log, failed verification (nothing is signed)
      2  usage error: DB is missing or not a log; the key file is missing, not a
         private key or encrypted without --passphrase-env; a bad --origin
    """
    signer = load_signer(key_path, _passphrase(passphrase_env))
    with open_log(db) as source:
        try:
            note = make_checkpoint(Verifier(source), signer, origin or default_origin(db))
        except VerificationError as exc:
            click.echo(invalid_line(exc))
            raise click.exceptions.Exit(EXIT_INVALID) from None
    click.echo(note.decode("utf-8"), nl=False)
