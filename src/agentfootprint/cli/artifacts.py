"""``artifacts list`` and ``artifacts erase``: what an artifact store holds, and removing an
artifact's bytes while its tombstone stays (docs/artifacts.md).

Also the one way a command opens a ``STORE`` argument it only reads
(:func:`open_store_argument`, used by ``verify --artifacts``). Imports nothing of the
runtime: ``verify`` must keep working where the runtime cannot be imported.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import click

from agentfootprint.cli._boundary import json_flag, one_line
from agentfootprint.cli._common import Database, echo_json, when
from agentfootprint.errors import ArtifactNotFoundError, UsageError
from agentfootprint.local_files import check_regular
from agentfootprint.store.artifacts import REF_PATTERN, ArtifactHead, ArtifactStore, open_artifacts
from agentfootprint.store.base import same_file

__all__ = ["artifacts", "open_store_argument"]

#: a STORE argument: a directory (FileArtifacts) or a file (SqliteArtifacts); whether it
#: exists and what it is, the store's opening says (one Error: line, exit 2)
STORE = click.Path(path_type=Path)


def open_store_argument(
    store: Path, *, log: Database | None = None, readonly: bool = True
) -> ArtifactStore:
    """The artifact store a ``STORE`` argument names, opened ``readonly`` (never created,
    migrated or changed); writable only for a command that changes it (``erase``), and then
    only an existing store, checked read-only first. Refused (a usage error, exit 2): the log
    file itself, a missing path, a pipe or a device, anything that is not an artifact store
    (a log, a vault, a directory of other files: the message says what it is)."""
    if isinstance(log, Path) and same_file(store, log):
        raise UsageError(
            f"STORE {store} is the log itself: an artifact store is never the log file; name "
            "the store the agent's artifacts= option wrote",
            option="--artifacts",
        )
    if not os.path.isdir(store) and os.path.lexists(store):
        check_regular(store, "STORE")  # a FIFO would block the open, a device never end
    opened = open_artifacts(store, readonly=True)
    if readonly:
        return opened
    opened.close()  # it is an artifact store: only now may it be opened for writing
    return open_artifacts(store)


def _head_json(head: ArtifactHead) -> dict[str, object]:
    return {
        "ref": head.ref,
        "kind": head.kind,
        "media_type": head.media_type,
        "bytes": head.size,
        "digest": head.digest,
        "created_at": head.created_at,
        "expires_at": head.expires_at,
    }


def _checked_ref(ref: str) -> str:
    if not REF_PATTERN.fullmatch(ref):
        raise UsageError(
            f"--ref {one_line(ref)} is not an artifact ref (art_ and 22 characters of "
            "0-9A-Za-z): copy it from the ticket or `artifacts list`",
            option="--ref",
        )
    return ref


@click.group("artifacts")
def artifacts() -> None:
    """An artifact store (the agent's artifacts= option): list what it holds, erase an artifact.

    STORE is the directory (FileArtifacts) or SQLite file (SqliteArtifacts) the agent's
    artifacts= option wrote; it is never created, and never the log file. Artifacts are
    filed by conversation (--scope: the run's conversation id, as `runs` shows it).
    """


@artifacts.command("list")
@click.argument("store", type=STORE)
@click.option(
    "--scope",
    required=True,
    metavar="CONVERSATION",
    help="The conversation whose artifacts to list (a store files each under one).",
)
@json_flag("Print the list as one JSON object on stdout.")
def list_command(store: Path, scope: str, json_out: bool) -> None:
    """List the live artifacts one conversation of STORE holds, oldest first.

    One line each: ref, kind, media type, size, digest, when it was stored and its stated
    expiry (never compared with the time now). Erased and expired artifacts are not listed:
    their bytes are gone (`verify --artifacts` reports them). STORE is opened read-only
    and never changed.

    \b
    Exit codes:
      0  listed (none is no error)
      2  usage error: STORE missing, not an artifact store (it says what it is), or the
         log file; a damaged file inside the store (named)
    """
    with contextlib.closing(open_store_argument(store)) as opened:
        heads = opened.list(scope)
    if json_out:
        echo_json({"scope": scope, "artifacts": [_head_json(head) for head in heads]})
        return
    if not heads:
        click.echo(f"no artifacts in scope {one_line(scope)}")
    for head in heads:
        expires = "no expiry" if head.expires_at is None else f"expires {when(head.expires_at)}"
        click.echo(
            f"{head.ref}  {one_line(head.kind)}  {one_line(head.media_type)}  {head.size} bytes"
            f"  digest {head.digest}  stored {when(head.created_at)}  {expires}"
        )


@artifacts.command("erase")
@click.argument("store", type=STORE)
@click.option(
    "--scope", required=True, metavar="CONVERSATION", help="The conversation the ref is in."
)
@click.option("--ref", "ref", required=True, metavar="REF", help="The artifact to erase (art_...).")
@click.option(
    "--reason",
    default="",
    metavar="TEXT",
    help="Why (kept in the tombstone's note, e.g. a request's number).",
)
def erase_command(store: Path, scope: str, ref: str, reason: str) -> None:
    """Erase one artifact's bytes from STORE; its tombstone (digest, size, when, why) stays.

    The log never held the bytes: every run still verifies, and `verify LOG --artifacts
    STORE` reports the artifact as erased (exit 0), not missing. STORE must be an existing
    artifact store (it is never created; a log, or any other file or directory, is refused
    and left as it is). Only the store's own copy goes: copies made before (backups, a
    bundle exported with --artifacts) keep the bytes.

    \b
    Exit codes:
      0  erased (the tombstone kept is printed)
      2  usage error: STORE missing or not an artifact store; no live artifact REF in
         that scope (never stored there, or erased or expired already)
    """
    _checked_ref(ref)
    with contextlib.closing(open_store_argument(store, readonly=False)) as opened:
        try:
            tomb = opened.remove(
                scope, ref, reason="erased", at=time.time_ns() // 1_000_000, note=reason
            )
        except ArtifactNotFoundError:
            gone = opened.tombstone(scope, ref)
            if gone is not None:
                raise UsageError(
                    f"artifact {ref} in scope {one_line(scope)} was removed already "
                    f"({gone.reason} at {when(gone.at)}{': ' + gone.note if gone.note else ''})",
                    option="--ref",
                ) from None
            raise UsageError(
                f"no artifact {ref} in scope {one_line(scope)} of {store}: `agentfootprint "
                "artifacts list STORE --scope CONVERSATION` lists what it holds",
                option="--ref",
            ) from None
    click.echo(
        f"erased {tomb.ref} from scope {one_line(tomb.scope)}: {tomb.size} bytes removed, "
        f"tombstone kept (digest {tomb.digest}, erased at {when(tomb.at)})"
    )
