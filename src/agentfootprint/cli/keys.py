"""``keys generate`` and ``keys show``: Ed25519 signing keys for seals (docs/seals.md).

A private key is written once, to a new file of mode 0600, and never printed: both
commands print only the public key (``ed25519:<base64>``) and its key id.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import click

from agentfootprint.cli._boundary import one_line
from agentfootprint.errors import KeyFileError, UsageError
from agentfootprint.local_files import open_regular
from agentfootprint.seal.signer import (
    PUBLIC_KEY_PREFIX,
    PublicKey,
    generate_key_file,
    load_public_key,
    load_signer,
)

__all__ = ["keys"]

_PRIVATE_LABELS = (b"-----BEGIN PRIVATE KEY-----", b"-----BEGIN ENCRYPTED PRIVATE KEY-----")

_PASSPHRASE_HELP = (
    "Read the passphrase from this environment variable (never from the command line, "
    "where other users can see it)."
)


def _passphrase(variable: str | None) -> str | None:
    if variable is None:
        return None
    value = os.environ.get(variable)
    if value is None:
        raise UsageError(
            f"--passphrase-env {variable}: the environment variable {variable} is not set",
            option="--passphrase-env",
        )
    if not value:
        raise UsageError(
            f"--passphrase-env {variable}: the environment variable {variable} is empty",
            option="--passphrase-env",
        )
    return value


def _echo_public(public: PublicKey, pem: bool) -> None:
    click.echo(f"public key: {public.text}")
    click.echo(f"key id:     {public.key_id}")
    if pem:
        click.echo(public.pem.decode("ascii"), nl=False)


@click.group()
def keys() -> None:
    """Ed25519 keys that sign seals: create one, or show a key's public half.

    The private key stays in its file (PKCS8 PEM, mode 0600, optionally encrypted with a
    passphrase); give verifiers the public key only.
    """


@keys.command("generate")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--passphrase-env", "passphrase_env", metavar="VAR", help=_PASSPHRASE_HELP)
@click.option("--pem", is_flag=True, help="Also print the public key as PEM.")
def generate(path: Path, passphrase_env: str | None, pem: bool) -> None:
    """Create a new Ed25519 signing key in PATH (PKCS8 PEM, mode 0600).

    PATH must not exist: a key file is never overwritten. The file appears whole or not at
    all. Prints the public key (ed25519:...) and its key id, never the private key.

    \b
    Exit codes:
      0  the key file was written
      2  usage error: PATH exists, its folder is missing or not writable, the
         passphrase variable is not set
    """
    passphrase = _passphrase(passphrase_env)
    signer = generate_key_file(path, passphrase)
    state = "encrypted" if passphrase is not None else "not encrypted"
    click.echo(f"wrote {one_line(path)} (Ed25519, PKCS8 PEM, mode 0600, {state})")
    _echo_public(signer.public, pem)


@keys.command("show")
@click.argument("key")
@click.option("--passphrase-env", "passphrase_env", metavar="VAR", help=_PASSPHRASE_HELP)
@click.option("--pem", is_flag=True, help="Also print the public key as PEM.")
def show(key: str, passphrase_env: str | None, pem: bool) -> None:
    """Print the public key and key id of KEY, never the private key.

    KEY is a private key file (PKCS8 PEM; an encrypted one needs --passphrase-env), a
    public key file (PEM, the ed25519:... text form, or the raw 32 bytes), or a public key
    given as text (ed25519:...). Files are only read.

    \b
    Exit codes:
      0  the public key was printed
      2  usage error: no such file, not an Ed25519 key, a public key that proves
         nothing (of small order, or not canonically encoded), a wrong or missing
         passphrase, a damaged file
    """
    passphrase = _passphrase(passphrase_env)
    public: PublicKey
    if key.startswith(PUBLIC_KEY_PREFIX):
        public = load_public_key(key)
    else:
        path = Path(key)
        if _is_private(path):
            public = load_signer(path, passphrase).public
            _warn_if_readable(path)
        else:
            public = load_public_key(path)
    _echo_public(public, pem)


def _warn_if_readable(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        click.echo(
            f"warning: the private key {one_line(path)} can be read by other users (mode "
            f"{mode:04o}): chmod 600 {one_line(path)}",
            err=True,
        )


def _is_private(path: Path) -> bool:
    try:
        with open_regular(path, error=KeyFileError) as handle:  # a FIFO is refused, not read
            head = handle.read(256).lstrip()
    except OSError:
        return False  # load_public_key says what is wrong with the path
    return head.startswith(_PRIVATE_LABELS)
