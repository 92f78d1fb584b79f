"""``checkpoint``: a signed checkpoint of a database's Merkle log of sealed runs;
``consistency``: two checkpoints and a proof that the newer tree extends the older.

Keep what ``checkpoint`` prints outside the database (a ticket, a CI artifact, a witness):
``verify DB --checkpoint FILE --key PUB`` later proves the log only grew since, and
``consistency OLD NEW PROOF --key PUB`` proves it without the database (docs/log-format.md
section 9.7).
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from agentfootprint.cli._boundary import EXIT_INVALID, invalid_line, one_line, verdict_word
from agentfootprint.cli._common import (
    DB,
    INPUT_FILE,
    Database,
    check_output,
    open_log,
    read_input,
)
from agentfootprint.cli.keys import _PASSPHRASE_HELP, _passphrase
from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.local_files import MAX_PROOF_BYTES
from agentfootprint.seal.signer import load_public_key, load_signer
from agentfootprint.verify.checkpoint import (
    check_consistency,
    checkpoint_of,
    leaves_of,
    prove_consistency,
)
from agentfootprint.verify.verifier import Verifier

__all__ = [
    "MAX_ORIGIN_BYTES",
    "checkpoint_command",
    "consistency_command",
    "default_origin",
    "log_origin",
]

#: the longest --origin (UTF-8 bytes): it is written twice in a note of at most
#: MAX_NOTE_BYTES, and is a name to read, not a document
MAX_ORIGIN_BYTES = 1024


def default_origin(db: Database) -> str:
    """``agentfootprint/<file name without suffix>`` (of a PostgreSQL database: its name),
    with what a note key name cannot hold (spaces, ``+``, control characters) as ``-``."""
    if isinstance(db, Path):
        stem = db.stem
    else:
        assert db.postgres is not None
        stem = db.postgres.identity()[2]
    return "agentfootprint/" + (re.sub(r"[\s+\x00-\x1f]", "-", stem) or "log")


def _origin_problem(origin: str) -> str | None:
    """What keeps ``origin`` from naming a log in a checkpoint, or None: it is the note's
    first line and its signature's key name (docs/merkle.md; seal/note.py), so it is
    non-empty UTF-8 text without spaces (any Unicode space), ``+`` or control characters."""
    if not origin:
        return "it is empty"
    for char in origin:
        if char.isspace():
            return f"it holds a space ({char!r}, U+{ord(char):04X})"
        if char == "+":
            return "it holds a '+'"
        if ord(char) < 0x20:
            return f"it holds a control character (U+{ord(char):04X})"
    try:
        size = len(origin.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid UTF-8 text"
    if size > MAX_ORIGIN_BYTES:
        return f"it is {size} bytes long, more than {MAX_ORIGIN_BYTES}"
    return None


def log_origin(origin: str | None, db: Database) -> str:
    """The origin a checkpoint of ``db`` names: ``--origin`` checked (an empty one is
    refused, never replaced by the default), or :func:`default_origin`."""
    if origin is None:
        return default_origin(db)
    problem = _origin_problem(origin)
    if problem is not None:
        raise UsageError(
            f"--origin {origin!r} cannot name a log: {problem}. The origin is the checkpoint's "
            "first line and its signature's key name: non-empty text without spaces, '+' or "
            f"control characters, at most {MAX_ORIGIN_BYTES} bytes (e.g. example.com/my-log)",
            option="--origin",
        )
    return origin


@click.command("checkpoint")
@click.argument("db", type=DB)
@click.option(
    "--key",
    "key_path",
    required=True,
    type=INPUT_FILE,
    help="The private key file that signs the checkpoint (PKCS8 PEM, as `keys generate` "
    "writes it).",
)
@click.option("--passphrase-env", "passphrase_env", metavar="VAR", help=_PASSPHRASE_HELP)
@click.option(
    "--origin",
    metavar="NAME",
    help="The log's name in the checkpoint and its signature (default: agentfootprint/ and "
    "the file name): non-empty, no spaces, '+' or control characters, at most 1024 bytes. "
    "Keep it the same for every checkpoint of one database.",
)
@click.option(
    "--since",
    type=INPUT_FILE,
    help="An earlier checkpoint of DB by this key: also write the proof that the new tree "
    "extends it (to --proof-out).",
)
@click.option(
    "--proof-out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where --since writes the consistency proof (a new file).",
)
def checkpoint_command(
    db: Database,
    key_path: Path,
    passphrase_env: str | None,
    origin: str | None,
    since: Path | None,
    proof_out: Path | None,
) -> None:
    """Print a signed checkpoint of DB's sealed runs (a C2SP tlog-checkpoint note).

    Every run of DB is verified first; the checkpoint is the RFC 6962 root of one leaf per
    sealed run, in the order the store sealed them. DB is opened read-only and never
    changed.

    With --since OLD and --proof-out FILE it also writes the RFC 9162 consistency proof from
    OLD's tree to the new one: with both checkpoints, `consistency` checks it without DB.

    \b
    Exit codes:
      0  the checkpoint was printed (and the proof written)
      1  a sealed run, or the seal log, failed verification, or the log no longer
         holds OLD's tree (nothing is signed or written)
      2  usage error: DB is missing or not a log; the key file is missing, not a
         private key or encrypted without --passphrase-env; a bad --origin; --since
         without --proof-out (or the reverse), or a --proof-out that exists; a file
         that is not a regular file (a FIFO, a device) or too large
    """
    if (since is None) != (proof_out is None):
        raise UsageError("--since and --proof-out go together", option="--since")
    if proof_out is not None:
        check_output(proof_out, db)
    name = log_origin(origin, db)
    signer = load_signer(key_path, _passphrase(passphrase_env))
    old = read_input(since, "--since", "checkpoint") if since is not None else None
    with open_log(db) as source:
        try:
            leaves = leaves_of(source, Verifier(source).verify_all())
            note = checkpoint_of(leaves, signer, name)
            proof = prove_consistency(old, signer, leaves) if old is not None else None
        except VerificationError as exc:
            click.echo(invalid_line(exc))
            raise click.exceptions.Exit(EXIT_INVALID) from None
    if proof is not None and proof_out is not None:
        with open(proof_out, "xb") as handle:  # never over an existing file
            handle.write(proof)
    click.echo(note.decode("utf-8"), nl=False)


@click.command("consistency")
@click.argument("old", type=INPUT_FILE)
@click.argument("new", type=INPUT_FILE)
@click.argument("proof", type=INPUT_FILE)
@click.option(
    "--key",
    "keys",
    multiple=True,
    required=True,
    metavar="KEY",
    help="The public key that signs the checkpoints (ed25519:... or a file). Repeatable.",
)
def consistency_command(old: Path, new: Path, proof: Path, keys: tuple[str, ...]) -> None:
    """Prove that checkpoint NEW's tree extends checkpoint OLD's, with PROOF alone.

    Both checkpoints must verify under a --key for the same log (origin); PROOF (from
    `checkpoint --since OLD --proof-out PROOF`) must lead from OLD's root to NEW's. Every
    run sealed by OLD's time is then still in NEW's tree, unchanged and in its place. Files
    are only read.

    \b
    Exit codes:
      0  CONSISTENT
      1  a checkpoint's signature, the origins or the proof do not verify
      2  usage error: a file missing, too large (a checkpoint over 256 KiB, a proof
         over 64 KiB) or not a regular file (a FIFO, a device); a --key that is not a
         public key
    """
    trusted = [load_public_key(key) for key in keys]
    notes = read_input(old, "OLD", "checkpoint"), read_input(new, "NEW", "checkpoint")
    proven = read_input(proof, "PROOF", "consistency proof", MAX_PROOF_BYTES)
    try:
        first, second = check_consistency(*notes, proven, trusted)
    except VerificationError as exc:
        click.echo(invalid_line(exc))
        raise click.exceptions.Exit(EXIT_INVALID) from None
    click.echo(
        f"{verdict_word('CONSISTENT')} checkpoint {one_line(first.origin)}: the tree of "
        f"{second.size} extends the tree of {first.size}"
    )
