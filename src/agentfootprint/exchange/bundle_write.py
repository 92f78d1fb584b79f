"""Writing export bundles: runs' events as stored, streamed one run at a time.

The format and its reader are in :mod:`agentfootprint.verify.bundle` (docs/log-format.md,
section 13). Writing reads each run twice through its source (once for its manifest entry,
once while its lines are written), so memory stays flat in the number and size of the runs;
it writes ``OUT.partial``, syncs it and renames it, and removes the partial file on any
error.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from agentfootprint.errors import (
    FileError,
    RecordTooLargeError,
    RunNotFoundError,
    StoreError,
    UsageError,
    VerificationError,
)
from agentfootprint.local_files import open_regular
from agentfootprint.logformat import limits
from agentfootprint.logformat.chain import open_body, stored_kind
from agentfootprint.verify.bundle import _SQLITE_MAGIC, _path_argument
from agentfootprint.verify.bundle_json import _file_error, _safe_int
from agentfootprint.verify.bundle_proofs import ExportCheckpoint
from agentfootprint.verify.bundle_versions import MANIFEST_HEADER, written_shape
from agentfootprint.verify.verifier import Row, RowSource

__all__ = ["write_bundle"]


# -- writing ----------------------------------------------------------------------------------


def _entry(source: RowSource, run_id: str, policies: dict[str, Any]) -> dict[str, Any]:
    """The run's manifest entry, from one read of its rows (one row held at a time)."""
    first: Row | None = None
    last: Row | None = None
    events = 0
    for row in source.read(run_id):
        if first is None:
            first = row
        last = row
        events += 1
    if first is None or last is None:
        raise RunNotFoundError(f"no run {run_id!r} to export (it has no events)")
    body = open_body(first) or {}
    conversation, parent, digest = (
        body.get(k) for k in ("conversation_id", "parent", "policy_digest")
    )
    if type(digest) is str:
        policies.setdefault(digest, body.get("policy"))
    if not _safe_int(first.ts) or type(last.type) is not str:
        raise VerificationError(
            run_id,
            None,
            "a row's ts or type is not what a bundle can carry (an integer within "
            "+-(2**53 - 1), a string)",
            code="rows",
        )
    return {
        "run_id": run_id,
        "conversation_id": run_id
        if conversation == run_id  # one string kept, not two
        else conversation
        if type(conversation) is str
        else None,
        "parent_run_id": parent["run_id"]
        if isinstance(parent, dict) and type(parent.get("run_id")) is str
        else None,
        "opened_at": first.ts,
        "events": events,
        "last_type": sys.intern(last.type),
        "head": _row_field(run_id, last, "chain_hash").hex(),
        "policy_digest": digest if type(digest) is str else None,
        "requested": False,
    }


def _row_field(run_id: str, row: Row, name: str) -> bytes:
    value: Any = getattr(row, name)
    if type(value) in (bytearray, memoryview):
        value = bytes(value)
    if type(value) is not bytes or (name != "body" and len(value) != 32):
        raise VerificationError(
            run_id,
            row.seq if type(row.seq) is int else None,
            f"{name} is {stored_kind(value)}, not {'bytes' if name == 'body' else '32 bytes'}: "
            "a bundle cannot carry it",
            code="rows",
        )
    return value


def _plan(source: RowSource, run_ids: Sequence[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The manifest entries of the runs and all their ancestors (named by each run's
    ``run.open`` row, never an index), each once, parents before children."""
    ordered: list[dict[str, Any]] = []
    placed: set[str] = set()
    policies: dict[str, Any] = {}
    for run_id in run_ids:
        chain: list[dict[str, Any]] = []  # run_id and its unplaced ancestors, nearest first
        in_chain: set[str] = set()
        current: str | None = run_id
        while current is not None and current not in placed:
            if current in in_chain:
                raise VerificationError(
                    current, 0, "run.open names a parent cycle", code="ancestry"
                )
            in_chain.add(current)
            chain.append(_entry(source, current, policies))
            current = chain[-1]["parent_run_id"]
        for entry in reversed(chain):
            placed.add(entry["run_id"])
            ordered.append(entry)
    return ordered, policies


def _event_line(run_id: str, row: Row) -> bytes:
    """The bundle line of one row, refused when a bundle cannot carry it exactly."""
    seq = row.seq
    body = _row_field(run_id, row, "body")
    if not (_safe_int(seq) and _safe_int(row.ts) and type(row.type) is str):
        raise VerificationError(
            run_id,
            seq if type(seq) is int else None,
            "the row's seq, ts or type is not what a bundle can carry (integers within "
            "+-(2**53 - 1), a string)",
            code="rows",
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VerificationError(
            run_id,
            seq,
            f"body is not UTF-8 ({exc.reason}): a bundle cannot carry it",
            code="canonical",
        ) from exc
    try:
        line = orjson.dumps(
            {
                "run": run_id,
                "seq": seq,
                "type": row.type,
                "ts": row.ts,
                "body": text,
                "event_hash": _row_field(run_id, row, "event_hash").hex(),
                "chain_hash": _row_field(run_id, row, "chain_hash").hex(),
            }
        )
    except orjson.JSONEncodeError as exc:
        raise VerificationError(
            run_id, seq, f"the row cannot be written as JSON ({exc})", code="rows"
        ) from exc
    limit = limits.MAX_BUNDLE_LINE_BYTES
    if len(line) > limit:
        raise RecordTooLargeError(
            f"run {run_id} seq {seq}",
            f"its bundle line would be {len(line)} bytes, over the limit of {limit} "
            "(MAX_BUNDLE_LINE_BYTES): the body is over the size limit the writer enforces",
        )
    return line + b"\n"


def _check_output(out: Path, source: RowSource) -> None:
    """Refuse an output that is a folder, in a missing folder, the source itself or any
    SQLite file (a log or a vault: evidence a rename would destroy)."""
    if out.is_dir():
        raise FileError(f"{out} is a folder: name the bundle file to write", path=str(out))
    folder = out.parent
    if not folder.is_dir():
        raise FileError(
            f"{out} cannot be written: the folder {folder} does not exist", path=str(out)
        )
    if not out.exists():
        return
    given = getattr(source, "path", None)
    same = False
    with contextlib.suppress(OSError, TypeError, ValueError):
        same = given is not None and os.path.samefile(out, given)
    if same:
        raise FileError(f"{out} is the log being exported: refusing to replace it", path=str(out))
    with contextlib.suppress(OSError), open_regular(out) as handle:  # a FIFO: refused
        if handle.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC:
            raise FileError(
                f"{out} is an SQLite database (a log or a vault?): refusing to replace it "
                "with a bundle; choose another file name",
                path=str(out),
            )


def write_bundle(
    source: RowSource,
    run_ids: Sequence[str],
    out: str | os.PathLike[str],
    *,
    library: str,
    checkpoint: ExportCheckpoint | None = None,
) -> dict[str, Any]:
    """Write the runs (ancestors included) to ``out``; returns the manifest.

    Without ``checkpoint`` the bundle is of version 1; with it, of version 2: the manifest
    carries the checkpoint's note and each run's inclusion proof under it (null for a run
    without a seal; a sealed run its tree does not hold is a :class:`UsageError`). The
    version is :func:`~agentfootprint.verify.bundle_versions.written_shape`'s.

    Built by reading events through the source, never by copying database files, so
    nothing but the log's own rows (no free pages, no WAL, no vault) can reach it. Each run
    is read twice, once for its manifest entry and once while it is written, one run at a
    time: memory does not grow with the runs' rows. A run that grew in between is written
    as it was (its first ``events`` rows). The file is written as ``out + ".partial"`` and
    renamed when complete; on any error the partial file is removed. An output that cannot
    be written is a :class:`FileError`; a row no bundle can carry (over the size limit, a
    body that is not UTF-8) is refused before the rename.
    """
    if not callable(getattr(source, "read", None)):
        raise UsageError(
            f"write_bundle() argument 'source' must be a log to read (a store or a bundle), "
            f"not {type(source).__name__}",
            option="source",
        )
    if isinstance(run_ids, str) or not isinstance(run_ids, Sequence) or not run_ids:
        raise UsageError(
            "write_bundle() argument 'run_ids' must be a list of at least one run id",
            option="run_ids",
        )
    if not all(type(run_id) is str for run_id in run_ids):
        raise UsageError("write_bundle() argument 'run_ids' must hold strings", option="run_ids")
    if type(library) is not str:
        raise UsageError("write_bundle() argument 'library' must be a string", option="library")
    if checkpoint is not None and not isinstance(checkpoint, ExportCheckpoint):
        raise UsageError(
            "write_bundle() argument 'checkpoint' must be an ExportCheckpoint or None",
            option="checkpoint",
        )
    target = _path_argument(out, "out", "write_bundle")
    _check_output(target, source)
    planned, policies = _plan(source, list(dict.fromkeys(run_ids)))
    requested = set(run_ids)
    for entry in planned:
        entry["requested"] = entry["run_id"] in requested
    if checkpoint is not None:
        proofs = checkpoint.inclusions([entry["run_id"] for entry in planned])
        for entry in planned:
            entry["inclusion"] = proofs[entry["run_id"]]
    total = sum(entry["events"] for entry in planned)
    manifest = {
        "agentfootprint_bundle": written_shape(checkpoint=checkpoint is not None).version,
        **MANIFEST_HEADER,
        "library": library,
        "runs": planned,
        "policies": policies,
        "counts": {"runs": len(planned), "events": total},
    }
    if checkpoint is not None:
        manifest["checkpoint"] = checkpoint.note.decode("utf-8")
    # the manifest line starts with the magic: keys are written in this order
    first = orjson.dumps(manifest) + b"\n"
    if len(first) - 1 > limits.MAX_BUNDLE_LINE_BYTES:
        raise UsageError(
            f"the manifest of {len(planned)} runs would be {len(first) - 1} bytes, over the "
            f"bundle line limit of {limits.MAX_BUNDLE_LINE_BYTES}: export fewer runs per bundle",
            option="run",
        )
    tmp = Path(f"{os.fspath(target)}.partial")
    created = False
    try:
        with open(tmp, "wb") as handle:
            created = True
            digest = hashlib.sha256(first)
            handle.write(first)
            del first
            for entry in planned:
                _write_run(source, entry, handle, digest)
            handle.write(
                orjson.dumps({"end": True, "events": total, "sha256": digest.hexdigest()}) + b"\n"
            )
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)  # nothing half-written is left under the final name
    except BaseException as exc:
        if created:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if isinstance(exc, OSError):
            raise _file_error(exc, target, "write") from exc
        raise
    return manifest


def _write_run(source: RowSource, entry: dict[str, Any], handle: IO[bytes], digest: Any) -> None:
    """The run's first ``events`` rows (a live run may have grown since it was counted)."""
    run_id, events = entry["run_id"], entry["events"]
    written = 0
    head = b""
    for row in itertools.islice(source.read(run_id), events):
        line = _event_line(run_id, row)
        digest.update(line)
        handle.write(line)
        written += 1
        head = _row_field(run_id, row, "chain_hash")
    if (written, head.hex()) != (events, entry["head"]):
        raise StoreError(
            f"run {run_id} changed while it was exported ({written} rows read where "
            f"{events} were counted, or another head): export again"
        )
