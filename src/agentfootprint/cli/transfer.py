"""``export`` and ``import``: runs into one bundle file, and a verified bundle into a log."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click

from agentfootprint.cli._boundary import EXIT_INVALID, fail, one_line, verification_message
from agentfootprint.cli._common import (
    DB,
    INPUT_FILE,
    TARGET_DB,
    Database,
    check_output,
    read_input,
)
from agentfootprint.cli._progress import PROGRESS_EPILOG, progress
from agentfootprint.cli.artifacts import STORE, open_store_argument
from agentfootprint.cli.checkpointing import log_origin
from agentfootprint.cli.keys import _PASSPHRASE_HELP, _passphrase
from agentfootprint.errors import FileError, UsageError, VerificationError
from agentfootprint.exchange.transfer import copy_runs, export_runs, import_bundle
from agentfootprint.local_files import open_regular
from agentfootprint.seal.signer import load_signer
from agentfootprint.store.base import same_file
from agentfootprint.store.sqlite import SQLITE_HEADER
from agentfootprint.store.urls import database_of, open_store_url
from agentfootprint.verify.bundle import BundleSource, is_bundle
from agentfootprint.verify.verifier import Verifier

__all__ = ["copy_command", "export_command", "import_command"]

#: the order ``export --artifacts`` counts the artifacts' statuses in
STATUS_ORDER: Final = ("ok", "withheld", "expired", "erased", "missing")


@click.command("export", epilog=PROGRESS_EPILOG)
@click.argument("db", type=DB)
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
    help="The bundle file to write (in an existing folder; never DB itself or another "
    "SQLite file).",
)
@click.option(
    "--key",
    "key_path",
    type=INPUT_FILE,
    help="Sign a checkpoint of DB's sealed runs with this private key file (as `checkpoint "
    "--key`) and put it in the bundle, with each sealed run's inclusion proof under it.",
)
@click.option("--passphrase-env", "passphrase_env", metavar="VAR", help=_PASSPHRASE_HELP)
@click.option(
    "--origin",
    metavar="NAME",
    help="With --key: the log's name in the checkpoint (default: agentfootprint/ and the "
    "file name), the same as for `checkpoint`.",
)
@click.option(
    "--checkpoint",
    "checkpoint_path",
    type=INPUT_FILE,
    help="Instead of --key: a checkpoint of DB signed earlier (from `checkpoint`, e.g. the "
    "one an auditor keeps); the proofs are made under its tree.",
)
@click.option(
    "--artifacts",
    "artifacts_store",
    type=STORE,
    metavar="STORE",
    help="An artifact store (the directory or SQLite file of the agent's artifacts= option, "
    "opened read-only): put the bytes of each artifact the runs minted in the bundle "
    "(version 3); a run under a redaction policy gets its artifacts' digests only.",
)
def export_command(
    db: Database,
    run_ids: tuple[str, ...],
    out: Path,
    key_path: Path | None,
    passphrase_env: str | None,
    origin: str | None,
    checkpoint_path: Path | None,
    artifacts_store: Path | None,
) -> None:
    """Write runs of DB to one bundle file an auditor can verify offline.

    The bundle holds each run's events exactly as stored (with their hashes), the
    ancestors continued runs need, and a manifest. Redacted values are in it only as
    commitments; salts and the vault never are. Each run is verified before export.
    DB is opened read-only and never changed.

    With --key (or --checkpoint) the bundle also carries a signed checkpoint of DB's
    Merkle log of sealed runs and each sealed run's inclusion proof under it: `verify
    BUNDLE --key PUB` then proves those runs were in DB's log, as the bundle holds them,
    when the checkpoint was signed. Every run of DB is verified first.

    With --artifacts STORE the bundle also carries the artifacts the runs minted (the
    bytes STORE holds for each, or what its tombstone says): `verify BUNDLE` checks them
    offline. STORE is opened read-only and never changed.

    \b
    Exit codes:
      0  the bundle was written
      1  a run, or DB's seal log, does not verify; the --checkpoint is not a checkpoint
         of DB's log (nothing is written)
      2  usage error: DB missing, not a log or of a newer schema version; an unknown
         run; --out in a missing or read-only folder, or an input or SQLite file; a bad
         key file; --key with --checkpoint; no run to export is sealed; a run sealed
         after the --checkpoint; --artifacts STORE missing, not an artifact store or DB
         itself
    """
    check_output(out, db)
    if key_path is not None and checkpoint_path is not None:
        raise UsageError("give --key (a new checkpoint) or --checkpoint, not both", option="--key")
    if origin is not None and key_path is None:
        raise UsageError("--origin names the checkpoint --key signs", option="--origin")
    name = log_origin(origin, db) if key_path else None
    signer = load_signer(key_path, _passphrase(passphrase_env)) if key_path else None
    note = read_input(checkpoint_path, "--checkpoint", "checkpoint") if checkpoint_path else None
    with contextlib.ExitStack() as stack:
        carried = (
            None
            if artifacts_store is None
            else stack.enter_context(
                contextlib.closing(open_store_argument(artifacts_store, log=db))
            )
        )
        store = stack.enter_context(
            contextlib.closing(open_store_url(db, option="DB", readonly=True))
        )
        try:  # the bar is erased before any message
            with progress(desc="export", unit="runs") as bar:
                manifest = export_runs(
                    store,
                    list(run_ids),
                    out,
                    signer=signer,
                    origin=name,
                    checkpoint=note,
                    on_progress=bar.at,
                    artifacts=carried,
                )
        except VerificationError as exc:
            fail(f"not exported: {verification_message(exc)}", EXIT_INVALID)
    counts = manifest["counts"]
    proven = ""
    if "checkpoint" in manifest:
        sealed = sum(entry["inclusion"] is not None for entry in manifest["runs"])
        proven = f", with the inclusion proofs of {sealed} sealed runs under its checkpoint"
    click.echo(f"exported {counts['runs']} runs ({counts['events']} events) to {out}{proven}")
    if "artifacts" in manifest:
        click.echo(_artifact_summary(manifest["artifacts"]))


def _artifact_summary(entries: list[dict[str, Any]]) -> str:
    """What the bundle says of the artifacts: how many of each status."""
    if not entries:
        return "artifacts: none (no run exported minted one)"
    statuses = Counter(entry["status"] for entry in entries)
    parts = ", ".join(f"{statuses[name]} {name}" for name in STATUS_ORDER if statuses[name])
    return f"artifacts: {len(entries)} ({parts})"


def _same_database(a: Database, b: Database) -> bool:
    """Whether two database arguments name one database (a file by any path; a PostgreSQL
    database by host, port and name: :func:`~agentfootprint.store.urls.database_of`)."""
    if isinstance(a, Path) and isinstance(b, Path):
        return b.exists() and same_file(a, b)
    found = database_of(a)
    return found is not None and found == database_of(b)


def _not_a_bundle(path: Path) -> FileError:
    with open_regular(path, "BUNDLE") as handle:
        head = handle.read(len(SQLITE_HEADER))
    what = (
        "an empty file"
        if not head
        else "an SQLite database (export its runs to a bundle first)"
        if head == SQLITE_HEADER
        else "not an agentfootprint export bundle"
    )
    return FileError(f"BUNDLE {path} is {what}", path=str(path))


def _verify(source: BundleSource, on_progress: Callable[[int, int], None]) -> None:
    verifier = Verifier(source)
    for _, result in verifier.verify_all(on_progress=on_progress):
        if isinstance(result, VerificationError):
            raise result


@click.command("import", epilog=PROGRESS_EPILOG)
@click.argument("bundle", type=DB)
@click.argument("db", type=TARGET_DB)
def import_command(bundle: Database, db: Database) -> None:
    """Verify BUNDLE, then load its runs into DB (created if missing).

    Runs already in DB with the same log are skipped; a run id held with a different
    log is refused (exit 2), and so is a DB that is not an agentfootprint log. A bundle
    that does not verify is not loaded (exit 1). Of a bundle that carries artifacts
    (`export --artifacts`) its runs only are loaded: a log holds no artifact bytes.

    \b
    Exit codes:
      0  imported (runs already there are skipped)
      1  BUNDLE does not verify (nothing is loaded)
      2  usage error: BUNDLE is not a bundle; DB is not a log, of a newer schema
         version, or cannot be written; a run id already in DB with another log
    """
    if not isinstance(bundle, Path):
        raise UsageError(
            f"BUNDLE {bundle} is a PostgreSQL database, not a bundle: copy runs between "
            "databases with 'agentfootprint copy SRC DST'"
        )
    if not is_bundle(bundle):
        raise _not_a_bundle(bundle)
    if isinstance(db, Path):
        folder = db.parent if str(db.parent) else Path(".")
        if not db.exists() and not folder.is_dir():
            raise FileError(
                f"cannot import into {db}: the folder {folder} does not exist", path=str(db)
            )
    try:
        source = BundleSource(bundle)
    except VerificationError as exc:
        fail(f"not imported: {verification_message(exc)}", EXIT_INVALID)
    with contextlib.closing(source):
        runs = len(source.runs())
        first = not isinstance(db, Path) or not db.exists()
        # a run's steps: verified (twice when DB is new: once before it is created), imported
        steps = runs * (3 if first else 2)
        try:  # the bar is erased before any message
            with progress(steps, desc="import", unit="steps") as bar:
                if first:
                    # verified before DB is created (a refusal leaves no file) or reached
                    # over the network (a refusal leaves no tables in an empty database)
                    _verify(source, bar.after(0))
                with contextlib.closing(open_store_url(db, option="DB")) as store:
                    done = runs if first else 0
                    imported = import_bundle(source, store, on_progress=bar.after(done))
        except VerificationError as exc:
            fail(f"not imported: {verification_message(exc)}", EXIT_INVALID)
        skipped = runs - len(imported)
    click.echo(
        f"imported {len(imported)} runs into {one_line(db)}"
        + (f" ({skipped} already there)" if skipped else "")
    )


@click.command("copy", epilog=PROGRESS_EPILOG)
@click.argument("src", type=DB)
@click.argument("dst", type=TARGET_DB)
@click.option(
    "--run",
    "run_ids",
    multiple=True,
    metavar="ID",
    help="Copy only this run (and its ancestors). Repeatable. Default: every run of SRC.",
)
def copy_command(src: Database, dst: Database, run_ids: tuple[str, ...]) -> None:
    """Copy runs from database SRC into database DST (created if missing), losslessly.

    An export bundle is the medium: every run is verified in SRC, the bundle is verified
    and imported in one transaction (runs DST holds with the same rows are skipped), and
    every run is verified again as DST holds it, with SRC's head. SRC is opened read-only
    and never changed.

    \b
    Exit codes:
      0  copied (runs already in DST are skipped)
      1  a run does not verify in SRC or, copied, in DST (nothing is copied)
      2  usage error: SRC missing or not a log; DST not a log or not writable; an
         unknown --run; a run id DST holds with another log
    """
    if _same_database(src, dst):
        raise UsageError(f"DST {dst} is SRC: name another database to copy into", option="DST")
    created = False
    if isinstance(dst, Path):
        folder = dst.parent if str(dst.parent) else Path(".")
        if not dst.exists() and not folder.is_dir():
            raise FileError(
                f"cannot copy into {dst}: the folder {folder} does not exist", path=str(dst)
            )
        created = not dst.exists()
    with contextlib.closing(open_store_url(src, option="SRC", readonly=True)) as source:
        try:  # DST is opened (created) only once SRC's runs are verified and bundled
            # three steps a run: verified in SRC, imported, verified in DST; the bar is
            # erased before any message
            with progress(desc="copy", unit="steps") as bar:
                copied, there = copy_runs(
                    source,
                    lambda: open_store_url(dst, option="DST"),
                    list(run_ids) or None,
                    on_progress=bar.at,
                )
        except BaseException as exc:
            if created:  # a refused copy leaves no new file behind
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(f"{dst}{suffix}").unlink(missing_ok=True)
            if isinstance(exc, VerificationError):
                fail(f"not copied: {verification_message(exc)}", EXIT_INVALID)
            raise
    click.echo(
        f"copied {len(copied)} runs into {one_line(dst)}"
        + (f" ({len(there)} already there)" if there else "")
        + ", every one verified as it holds it"
    )
