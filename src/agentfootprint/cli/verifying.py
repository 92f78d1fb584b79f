"""``verify``: every run of a database or bundle, found from its events, checked.

Imports nothing of the runtime (``agentfootprint.core``): an auditor's machine needs only
the verifier.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click
import orjson

from agentfootprint.audit.artifacts import ArtifactVerdict, Minted, MintedWatch, check_minted
from agentfootprint.audit.bundle_artifacts import check_carried
from agentfootprint.cli._boundary import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNSEALED,
    invalid_line,
    json_flag,
    one_line,
    verdict_word,
)
from agentfootprint.cli._common import DB, INPUT_FILE, Database, open_log, read_input, short
from agentfootprint.cli._progress import PROGRESS_EPILOG, Progress, progress
from agentfootprint.cli.artifacts import STORE, open_store_argument
from agentfootprint.errors import StoreError, UsageError, VerificationError
from agentfootprint.local_files import MAX_DISCLOSURES_BYTES
from agentfootprint.logformat.commitments import Disclosure
from agentfootprint.seal.signer import PublicKey, load_public_key
from agentfootprint.store.vault import read_disclosures
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.bundle_proofs import Inclusion
from agentfootprint.verify.checkpoint import check_checkpoint, leaves_of, same_tree
from agentfootprint.verify.verifier import Outcome, RunVerification, Verifier

__all__ = ["disclosures_file", "in_words", "report", "severity", "verdict_line", "verify"]

_SEVERITY = {EXIT_OK: 0, EXIT_UNSEALED: 1, EXIT_INVALID: 2}


def severity(code: int) -> int:
    """Order of exit codes when runs disagree: INVALID over UNSEALED over VALID."""
    return _SEVERITY[code]


def exit_code(
    result: RunVerification | VerificationError,
    *,
    require_signature: bool,
    require_inclusion: bool = False,
) -> int:
    """0 VALID or VALID_UNSIGNED (both printed VALID), 1 INVALID, 3 UNSEALED; with
    ``require_signature`` anything but VALID (a seal by a pinned key) is 1, with
    ``require_inclusion`` also a run not proven in a checkpoint signed by a pinned key."""
    if isinstance(result, VerificationError):
        return EXIT_INVALID
    if (require_signature or require_inclusion) and result.outcome is not Outcome.VALID:
        return EXIT_INVALID
    if require_inclusion and (result.inclusion is None or not result.inclusion.signed_by):
        return EXIT_INVALID
    return EXIT_UNSEALED if result.outcome is Outcome.UNSEALED else EXIT_OK


def _included(inclusion: Inclusion | None) -> str:
    if inclusion is None:
        return ""
    where = f"leaf {inclusion.leaf} of {inclusion.size} in checkpoint {one_line(inclusion.origin)}"
    if inclusion.signed_by:
        return f"; {where}, signed by pinned key {', '.join(inclusion.signed_by)}"
    return f"; {where} (signed by no pinned key: inclusion unproven)"


def in_words(result: RunVerification) -> str:
    """What a run's outcome means, for a person: whether it closed, whether it is sealed
    and whether a key the caller pinned sealed it. The machine codes (VALID_UNSIGNED) are
    for ``--json``; beside "sealed by key K", "unsigned" would read as a contradiction."""
    if result.outcome is Outcome.UNSEALED:
        return "never closed: its writer stopped before run.close, as after a crash"
    if result.signed_by:
        many = len(result.signed_by) > 1
        keys = ", ".join(result.signed_by)
        return f"sealed by key{'s' * many} {keys}; key{'s' * many} pinned"
    if result.seal_key_id is None:
        return "not sealed"
    return one_line(result.seal_note or f"sealed by key {result.seal_key_id}; key not pinned")


def verdict_line(run_id: str, result: RunVerification | VerificationError) -> str:
    """One run's verdict as ``verify`` prints it: VALID (whatever the machine code says of
    the seal), UNSEALED or INVALID, the run, and then, in parentheses, what that means."""
    if isinstance(result, VerificationError):
        return invalid_line(result)
    ancestry = f", continues {one_line(result.ancestors[-1])}" if result.ancestors else ""
    word = "UNSEALED" if result.outcome is Outcome.UNSEALED else "VALID"
    return (
        f"{verdict_word(word)} run {one_line(run_id)}: {result.events} events, "
        f"{result.receipts} receipts checked against rebuilt requests{ancestry} "
        f"({in_words(result)}){_included(result.inclusion)}"
    )


def report(
    run_id: str,
    result: RunVerification | VerificationError,
    *,
    require_signature: bool = False,
    require_inclusion: bool = False,
) -> int:
    """Print one verdict line; returns its exit code."""
    click.echo(verdict_line(run_id, result))
    if isinstance(result, VerificationError):
        return EXIT_INVALID
    return exit_code(
        result, require_signature=require_signature, require_inclusion=require_inclusion
    )


def as_json(run_id: str, result: RunVerification | VerificationError) -> dict[str, Any]:
    """One run's verdict as ``--json`` prints it."""
    if isinstance(result, VerificationError):
        return {
            "run_id": run_id,
            "outcome": "INVALID",
            "error": {"code": result.code, "seq": result.seq, "reason": str(result)},
        }
    return {
        "run_id": run_id,
        "outcome": result.outcome.value,
        "events": result.events,
        "receipts": result.receipts,
        "sealed": result.seal_digest is not None,
        "key_pinned": bool(result.signed_by),
        "signed_by": list(result.signed_by),
        "seal_key_id": result.seal_key_id,
        "note": result.seal_note,
        "inclusion": None
        if result.inclusion is None
        else {
            "leaf": result.inclusion.leaf,
            "size": result.inclusion.size,
            "origin": result.inclusion.origin,
            "root": result.inclusion.root.hex(),
            "signed_by": list(result.inclusion.signed_by),
        },
    }


def artifact_line(verdict: ArtifactVerdict) -> str:
    """One artifact's line as ``verify --artifacts`` prints it: the ref, the run and seq of
    its minted event, the status, and, unless ``ok``, why (a mismatch names both digests)."""
    where = f"{verdict.ref or '(no ref)'} run {one_line(verdict.run_id)} seq {verdict.seq}"
    why = "" if verdict.status == "ok" else f" ({one_line(verdict.detail)})"
    return f"{verdict_word('ARTIFACT')} {where}: {verdict.status}{why}"


#: how one verified run's minted artifacts are judged: against a store, or a bundle's
Judge = Callable[[RunVerification, list[Minted]], Iterable[ArtifactVerdict]]


def _artifact_judge(
    source: Any, store: Path | None, db: Database, stack: contextlib.ExitStack
) -> Judge | None:
    """How the minted artifacts are checked: against ``--artifacts STORE`` (opened
    read-only), else against the artifacts a version 3 bundle carries (docs/log-format.md
    section 13.5); None: no artifact check."""
    if store is not None:
        opened = stack.enter_context(contextlib.closing(open_store_argument(store, log=db)))
        return lambda run, minted: check_minted(run, minted, opened)
    offered = getattr(source, "artifact_source", None)
    carried = offered() if callable(offered) else None
    if carried is None:
        return None
    return lambda run, minted: check_carried(run, minted, carried)


def _results(
    verifier: Verifier, run_ids: tuple[str, ...], bar: Progress
) -> Iterable[tuple[str, RunVerification | VerificationError]]:
    if not run_ids:
        yield from verifier.verify_all(on_progress=bar.at)
        return
    for run_id in run_ids:
        try:
            verified: RunVerification | VerificationError = verifier.verify(run_id)
        except VerificationError as exc:
            verified = exc
        bar()
        yield run_id, verified


def disclosures_file(path: Path) -> list[Disclosure]:
    """The disclosures a ``--disclosures`` file holds (section 12.7), or a usage error."""
    data = read_input(path, "--disclosures", "disclosures file", MAX_DISCLOSURES_BYTES)
    if data.startswith(b"SQLite format 3\x00"):
        raise StoreError(
            f"--disclosures {path} is an SQLite database (a vault or a log?), not a "
            "disclosures file: write one with `agentfootprint disclose VAULT ... --out FILE`"
        )
    try:
        return read_disclosures(data)
    except StoreError as exc:
        raise StoreError(f"--disclosures {path}: {exc}") from exc


def _checkpoint_note(
    path: Path | None, trusted: list[PublicKey], run_ids: tuple[str, ...]
) -> bytes | None:
    if path is None:
        return None
    if not trusted:
        raise UsageError(
            "--checkpoint needs the checkpoint signer's public key as a --key", option="--key"
        )
    if run_ids:
        raise UsageError(
            "--checkpoint proves the whole seal log: give no --run", option="--checkpoint"
        )
    return read_input(path, "--checkpoint", "checkpoint")


def _check_checkpoint(
    source: Any,
    note: bytes,
    trusted: list[PublicKey],
    results: list[tuple[str, RunVerification | VerificationError]],
    *,
    quiet: bool,
) -> dict[str, Any]:
    """The checkpoint line (or JSON member): CONSISTENT, or INVALID with where and why."""
    try:
        if isinstance(source, BundleSource):
            checkpoint = same_tree(source, note, trusted)
            size = checkpoint.size
        else:
            leaves = leaves_of(source, results)
            checkpoint = check_checkpoint(note, trusted, leaves)
            size = len(leaves)
    except VerificationError as exc:
        if not quiet:
            click.echo(invalid_line(exc))
        return {"outcome": "INVALID", "code": exc.code, "reason": str(exc)}
    if isinstance(source, BundleSource):
        if not quiet:
            click.echo(
                f"{verdict_word('CONSISTENT')} checkpoint {one_line(checkpoint.origin)} of size "
                f"{checkpoint.size}: the bundle's inclusion proofs are under its tree"
            )
        return {"outcome": "CONSISTENT", "origin": checkpoint.origin, "size": checkpoint.size}
    if not quiet:
        click.echo(
            f"{verdict_word('CONSISTENT')} checkpoint {one_line(checkpoint.origin)} of size "
            f"{checkpoint.size}: every run sealed by then is in place, unchanged; the log "
            f"holds {size} now"
        )
    return {
        "outcome": "CONSISTENT",
        "origin": checkpoint.origin,
        "size": checkpoint.size,
        "now": size,
    }


@click.command(epilog=PROGRESS_EPILOG)
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
    type=INPUT_FILE,
    help="A disclosures file (from `disclose`, at most 256 MiB): prove each value it opens.",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="KEY",
    help="A public key whose seals you trust: its text form (ed25519:...) or a file "
    "(PEM, or the text form). Repeatable. Never a key found in DB.",
)
@click.option(
    "--require-signature",
    is_flag=True,
    help="Exit 1 unless every run is VALID and sealed by a --key (key pinned).",
)
@click.option(
    "--require-inclusion",
    is_flag=True,
    help="For a bundle: exit 1 unless every run is VALID and proven in the bundle's "
    "checkpoint, signed by a --key (implies --require-signature).",
)
@click.option(
    "--checkpoint",
    "checkpoint_path",
    type=INPUT_FILE,
    help="A signed checkpoint (from `checkpoint`) kept elsewhere: prove DB's sealed runs "
    "only grew since (for a bundle: that its inclusion proofs are under this very tree). "
    "Its signer's public key must be a --key.",
)
@click.option(
    "--artifacts",
    "artifacts_store",
    type=STORE,
    metavar="STORE",
    help="An artifact store (a directory or an SQLite file, opened read-only): check each "
    "artifact the verified runs minted against it (ok, mismatch, expired, erased, missing).",
)
@json_flag(
    "Print the verdicts, or the failure that stopped verification, as one JSON object "
    "on stdout (docs/log-format.md section 9.6)."
)
def verify(
    db: Database,
    run_ids: tuple[str, ...],
    disclosures: Path | None,
    keys: tuple[str, ...],
    require_signature: bool,
    require_inclusion: bool,
    checkpoint_path: Path | None,
    artifacts_store: Path | None,
    json_out: bool,
) -> None:
    """Verify every run in DB (or only --run ID): hashes, chain, every receipt and seal.

    DB is a database or an export bundle, verified the same way, and never changed (a
    database is opened read-only, so a log on write-once media verifies). Every run is
    found from the events themselves, and each row of the run index that disagrees with
    them is reported as INVALID. Redacted runs verify without any secret; with
    --disclosures, each disclosed value is proven against the commitment the log holds
    (and must sit under the same key), and, for a run recorded under a version 3 policy,
    no later text of the conversation may quote it in clear (echo redaction: a leak).

    Each closed run that passes every check is VALID, and its line says in parentheses
    whether it is sealed: "sealed by key K; key pinned" when its seal verifies under a
    key you pinned with --key, "sealed by key K; key not pinned" when no --key is given
    or K is not among them (nothing proves who sealed it), "not sealed" when it was
    recorded without a signer. A seal that does not attest its run, or a sealed run whose
    seal was removed, is INVALID whatever the keys. A run that never closed is UNSEALED.
    With --checkpoint, DB's seal log must still hold the checkpoint's tree (every run
    sealed by then in place, unchanged): CONSISTENT, or INVALID when a sealed run was
    dropped, rewritten or reordered since.

    A bundle exported with a checkpoint (`export --key`) proves each sealed run's place in
    its database's log: the line says which leaf of which checkpoint, and whether a --key
    signed it. A proof that does not lead to the checkpoint's root is INVALID. With
    --checkpoint, the bundle's checkpoint must be that very tree.

    With --artifacts STORE (the directory or SQLite file of the agent's artifacts= option,
    opened read-only, never the log itself), each artifact a verified run minted is checked
    after the verdicts, one ARTIFACT line each: ok (STORE holds bytes whose digest is the
    recorded one, and the run's history holds the ticket the minted event describes),
    mismatch (the bytes hash to another digest, both named, or the ticket disagrees with
    the event), expired or erased (STORE's tombstone says why the bytes are gone), missing
    (no bytes and no tombstone). A run's own verdict never depends on STORE, and no expiry
    is compared with the time now: the output does not depend on when it runs. A bundle
    exported with its artifacts (`export --artifacts`) is checked against them without
    --artifacts; --artifacts STORE checks it against STORE instead.

    \b
    Exit codes:
      0  every run verified and closed (VALID, pinned key or not), or DB is a log with
         no runs
      1  a run, the run index, the seal log, the bundle, a disclosure or the
         --checkpoint failed verification (INVALID lines say where and why); with
         --require-signature, also any run not sealed by a --key (key pinned); with
         --require-inclusion, also any run not proven in a checkpoint a --key signed;
         with --artifacts, also an artifact mismatch or missing
      2  usage error: DB is missing, not a log (it says what it is instead), of a newer
         schema version, or unreadable; a file that is not a regular file (a FIFO, a
         device) or too large; an unknown --run; a bad disclosures file; a --key that
         is not a public key, or one that proves nothing (of small order, or not
         canonically encoded); --checkpoint without --key or with --run; an
         --artifacts STORE that is missing, not an artifact store or the log itself
      3  all consistent, but a run never closed (UNSEALED, e.g. after a crash)

    With --json, stdout is one JSON object whatever happens: the verdicts, each run's
    "outcome" a stable machine code (VALID: sealed by a pinned key; VALID_UNSIGNED: valid,
    not sealed by a pinned key; UNSEALED; INVALID) with the booleans "sealed" and
    "key_pinned"; or, when something stopped verification (the bundle's framing, a usage
    error), {"runs": [], "exit": CODE, "error": {"code", "run_id", "seq", "reason"}} (a
    usage error is also the one Error: line on stderr). An artifact check adds
    "artifacts": one object per artifact ("run_id", "seq", "scope", "ref",
    "tool_call_id", "digest", "status", "found", "detail").
    """
    opened = disclosures_file(disclosures) if disclosures is not None else []
    trusted: list[PublicKey] = [load_public_key(key) for key in keys]
    note = _checkpoint_note(checkpoint_path, trusted, run_ids)
    verdicts: list[dict[str, Any]] = []
    results: list[tuple[str, RunVerification | VerificationError]] = []
    demands = {"require_signature": require_signature, "require_inclusion": require_inclusion}
    minted: list[ArtifactVerdict] = []
    with open_log(db) as source, contextlib.ExitStack() as stack:
        judge = _artifact_judge(source, artifacts_store, db, stack)
        watch = None if judge is None else MintedWatch(source)
        verifier = Verifier(source if watch is None else watch, trusted_keys=trusted)
        worst, seen = EXIT_OK, 0
        with progress(len(run_ids) or None, desc="verify", unit="runs") as bar:
            for run_id, result in _results(verifier, run_ids, bar):
                results.append((run_id, result))
                seen += 1
                if json_out:
                    verdicts.append(as_json(run_id, result))
                else:
                    bar.echo(verdict_line(run_id, result))
                worst = max(worst, exit_code(result, **demands), key=severity)
                if watch is not None and judge is not None and isinstance(result, RunVerification):
                    minted.extend(judge(result, watch.minted(result.run_id)))
        if not seen and not json_out:
            click.echo("no runs to verify")
        proven_values: list[dict[str, Any]] = []
        if opened and worst != EXIT_INVALID:
            try:
                for proven in verifier.check_disclosures(opened):
                    proven_values.append(
                        {
                            "run_id": proven.run_id,
                            "seq": proven.seq,
                            "key": proven.key,
                            "value": proven.value,
                        }
                    )
                    if not json_out:
                        value = one_line(short(proven.value, 60))
                        click.echo(
                            f"{verdict_word('PROVEN')} {one_line(proven.key)} = {value}"
                            f" (run {one_line(proven.run_id)} seq {proven.seq})"
                        )
            except VerificationError as exc:
                if json_out:
                    verdicts.append(as_json(exc.run_id, exc))
                else:
                    click.echo(invalid_line(exc))
                worst = EXIT_INVALID
        checked: dict[str, Any] | None = None
        if note is not None:
            checked = _check_checkpoint(source, note, trusted, results, quiet=json_out)
            if checked["outcome"] != "CONSISTENT":
                worst = EXIT_INVALID
        if judge is not None and not json_out:
            for artifact in minted:
                click.echo(artifact_line(artifact))
            if not minted:
                click.echo("no artifacts to check: no verified run minted one")
        if any(artifact.failed for artifact in minted):
            worst = max(worst, EXIT_INVALID, key=severity)
    if json_out:
        document: dict[str, Any] = {"runs": verdicts, "exit": worst}
        if judge is not None:
            document["artifacts"] = [artifact.as_json() for artifact in minted]
        if opened:
            document["proven"] = proven_values
        if checked is not None:
            document["checkpoint"] = checked
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
    raise click.exceptions.Exit(worst)
