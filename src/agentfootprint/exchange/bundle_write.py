"""Writing export bundles: runs' events as stored, streamed one run at a time.

The format and its reader are in :mod:`agentfootprint.verify.bundle` (docs/log-format.md,
section 13). Each run is read once, while its lines are written to a spill file next to the
output, one row held at a time (the manifest, which comes first, is made of what that pass
saw); then the bundle is written as ``OUT.partial`` (the manifest, the spilled lines, the
trailer), synced and renamed. On any error nothing is left behind. Given the runs'
verifications (:func:`~agentfootprint.exchange.transfer.export_runs`), the order comes from
the verified ancestry and each run is written exactly as it was verified: the rows its
verification read, with the event and chain hashes the verifier computed of them (nothing is
hashed here), when the verifier kept them, else its first ``events`` rows as the source reads
them, ending at its head.

Given an artifact store, the bundle is of version 3 (section 13.5): the minted events among the
rows written decide which artifacts it lists, and the bytes of each one the store holds follow
the event lines in base64 lines (:func:`_spill_artifacts`), one artifact read at a time.
"""

from __future__ import annotations

import binascii
import contextlib
import functools
import hashlib
import itertools
import os
import sys
import tempfile
from binascii import hexlify
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

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
from agentfootprint.logformat.canonical import MAX_SAFE_INT
from agentfootprint.logformat.chain import RawRow, open_body, row_values, stored_kind
from agentfootprint.store.artifacts import ArtifactStore
from agentfootprint.verify.bundle import _SQLITE_MAGIC, _path_argument
from agentfootprint.verify.bundle_artifacts import (
    MintedArtifact,
    describes_artifact,
    minted_payload,
)
from agentfootprint.verify.bundle_json import _file_error, _safe_int
from agentfootprint.verify.bundle_proofs import ExportCheckpoint
from agentfootprint.verify.bundle_versions import MANIFEST_HEADER, written_shape
from agentfootprint.verify.results import RunVerification
from agentfootprint.verify.verifier import Row, RowSource

__all__ = ["Kept", "Verified", "write_bundle"]

#: the rows a run's verification read (each the 7 values of
#: :class:`~agentfootprint.logformat.chain.RawRow`, ``DERIVED`` where the store keeps none),
#: and each row's event and chain hash as the verifier computed them
Kept = tuple[Sequence[tuple[Any, ...]], Sequence[tuple[bytes, bytes]]]
#: what the writer is told of a run it writes: its verification (the rows written are its
#: ``events`` rows, ending at its ``head``) and what that verification read, when it kept it,
#: else None: the run is read again
Verified = Callable[[str], tuple[RunVerification, Kept | None]]
#: how much of the spilled lines is copied at once (and written to the spill at once)
_COPY = 1 << 18
#: the bytes of an artifact one line carries (section 13.5 allows up to 32 MiB)
_CHUNK: Final = 1 << 20
_CHUNK_LINE: Final = b'{"artifact":%d,"offset":%d,"data":"%s"}\n'


# -- writing ----------------------------------------------------------------------------------


def _entry(
    run_id: str, first: RawRow, last: RawRow, events: int, policies: dict[str, Any]
) -> dict[str, Any]:
    """The run's manifest entry, from its first and last rows as written."""
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


#: what bounds a run's written rows: its count and head (as verified, or as counted by a
#: first read), and the rows the verifier read with their hashes, when it kept them
_Bound = tuple[int, bytes, Kept | None]


def _counted(source: RowSource, run_id: str) -> tuple[str | None, _Bound]:
    """The parent its ``run.open`` row names, and the run's rows counted (one row held at a
    time) for the writing pass to hold them to: a run that changes in between is refused."""
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
    parent = body.get("parent")
    named = parent.get("run_id") if isinstance(parent, dict) else None
    head = _row_field(run_id, last, "chain_hash")
    return (named if type(named) is str else None), (events, head, None)


def _unverified_chain(source: RowSource, run_id: str, placed: set[str]) -> list[tuple[str, _Bound]]:
    """The run and its ancestors not written yet, oldest first, each parent named by its
    child's ``run.open`` row (never an index), each with its rows counted."""
    chain: list[tuple[str, _Bound]] = []  # run_id and its unplaced ancestors, nearest first
    seen: set[str] = set()
    current: str | None = run_id
    while current is not None and current not in placed:
        if current in seen:
            raise VerificationError(current, 0, "run.open names a parent cycle", code="ancestry")
        seen.add(current)
        parent, bound = _counted(source, current)
        chain.append((current, bound))
        current = parent
    return chain[::-1]


def _event_line(run_id: str, row: tuple[Any, ...], run_json: bytes = b"") -> bytes:
    """The bundle line of one row, refused when a bundle cannot carry it exactly
    (``run_json``: the run id as JSON, when the caller made it once for the run)."""
    _, seq, type_, ts, body, event, link = row
    if (
        type(body) is bytes
        and type(event) is bytes
        and type(link) is bytes
        and len(event) == 32
        and len(link) == 32
        and type(seq) is int
        and -MAX_SAFE_INT <= seq <= MAX_SAFE_INT
        and type(ts) is int
        and -MAX_SAFE_INT <= ts <= MAX_SAFE_INT
        and type(type_) is str
    ):  # the shape of every sound row: written at once (else each value judged, below)
        try:  # byte for byte orjson.dumps of the row's object, its members in this order
            line = _LINE % (
                run_json or orjson.dumps(run_id),
                seq,
                _json_text(type_),
                ts,
                orjson.dumps(body.decode("utf-8")),
                hexlify(event),
                hexlify(link),
            )
        except (UnicodeDecodeError, orjson.JSONEncodeError):
            pass
        else:
            if len(line) - 1 <= limits.MAX_BUNDLE_LINE_BYTES:
                return line
    return _judged_line(run_id, RawRow(*row))


_LINE: Final = (
    b'{"run":%s,"seq":%d,"type":%s,"ts":%d,"body":%s,"event_hash":"%s","chain_hash":"%s"}\n'
)


@functools.lru_cache(maxsize=64)
def _json_text(text: str) -> bytes:
    return orjson.dumps(text)


def _judged_line(run_id: str, row: RawRow) -> bytes:
    """:func:`_event_line` value by value, saying what a bundle cannot carry."""
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
    verified: Verified | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    artifacts: ArtifactStore | None = None,
) -> dict[str, Any]:
    """Write the runs (ancestors included) to ``out``; returns the manifest.

    Without ``checkpoint`` the bundle is of version 1; with it, of version 2: the manifest
    carries the checkpoint's note and each run's inclusion proof under it (null for a run
    without a seal; a sealed run its tree does not hold is a :class:`UsageError`). With
    ``artifacts`` (an artifact store, only read) it is of version 3, with or without a
    checkpoint: the manifest lists each artifact the written rows mint and the bundle
    carries the bytes of those the store holds (docs/log-format.md section 13.5; a run under
    a redaction policy gets its artifacts listed ``withheld``, without bytes). The version is
    :func:`~agentfootprint.verify.bundle_versions.written_shape`'s.

    Built by reading events through the source, never by copying database files, so
    nothing but the log's own rows (no free pages, no WAL, no vault) can reach it. Each run
    is read once, one run at a time, its lines spilled to a temporary file in the output's
    folder: memory does not grow with the runs' rows. With ``verified`` (each run's
    verification, and the rows the verifier read when it kept them) the runs' order comes
    from their verified ancestry and a run is written as it was verified (a run that grew
    since is written as it was; one that changed is a :class:`StoreError`); without it, the
    parents are named by the runs' ``run.open`` rows. The file is written as ``out +
    ".partial"`` and renamed when complete; on any error the partial file is removed. An
    output that cannot be written is a :class:`FileError`; a row no bundle can carry (over
    the size limit, a body that is not UTF-8) is refused before the rename.

    ``on_progress(done, total)`` is called as each run asked for is written (with the
    ancestors it brings), ``total`` the runs asked for: a caller may show how far it got.
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
    if artifacts is not None and not isinstance(artifacts, ArtifactStore):
        raise UsageError(
            "write_bundle() argument 'artifacts' must be an artifact store or None, not "
            f"{type(artifacts).__name__}",
            option="artifacts",
        )
    minting = _Minting() if artifacts is not None else None
    target = _path_argument(out, "out", "write_bundle")
    _check_output(target, source)
    tmp = Path(f"{os.fspath(target)}.partial")
    created = False
    try:
        with tempfile.TemporaryFile(dir=target.parent, prefix=".afp-rows-") as spill:
            planned, policies = _spill_runs(
                source, list(dict.fromkeys(run_ids)), spill, verified, on_progress, minting
            )
            manifest = _manifest(planned, policies, set(run_ids), library, checkpoint)
            if artifacts is not None and minting is not None:
                manifest["agentfootprint_bundle"] = written_shape(
                    checkpoint=checkpoint is not None, artifacts=True
                ).version
                manifest["artifacts"] = _spill_artifacts(artifacts, minting, spill)
            # the manifest line starts with the magic: keys are written in this order
            first = orjson.dumps(manifest) + b"\n"
            if len(first) - 1 > limits.MAX_BUNDLE_LINE_BYTES:
                raise UsageError(
                    f"the manifest of {len(planned)} runs would be {len(first) - 1} bytes, over "
                    f"the bundle line limit of {limits.MAX_BUNDLE_LINE_BYTES}: export fewer "
                    "runs per bundle",
                    option="run",
                )
            with open(tmp, "wb") as handle:
                created = True
                digest = hashlib.sha256(first)
                handle.write(first)
                del first
                spill.seek(0)
                while block := spill.read(_COPY):
                    digest.update(block)
                    handle.write(block)
                total = manifest["counts"]["events"]
                handle.write(
                    orjson.dumps({"end": True, "events": total, "sha256": digest.hexdigest()})
                    + b"\n"
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


def _manifest(
    planned: list[dict[str, Any]],
    policies: dict[str, Any],
    requested: set[str],
    library: str,
    checkpoint: ExportCheckpoint | None,
) -> dict[str, Any]:
    for entry in planned:
        entry["requested"] = entry["run_id"] in requested
    if checkpoint is not None:
        proofs = checkpoint.inclusions([entry["run_id"] for entry in planned])
        for entry in planned:
            entry["inclusion"] = proofs[entry["run_id"]]
    manifest = {
        "agentfootprint_bundle": written_shape(checkpoint=checkpoint is not None).version,
        **MANIFEST_HEADER,
        "library": library,
        "runs": planned,
        "policies": policies,
        "counts": {"runs": len(planned), "events": sum(entry["events"] for entry in planned)},
    }
    if checkpoint is not None:
        manifest["checkpoint"] = checkpoint.note.decode("utf-8")
    return manifest


def _spill_runs(
    source: RowSource,
    run_ids: list[str],
    spill: IO[bytes],
    verified: Verified | None,
    on_progress: Callable[[int, int], None] | None = None,
    minting: _Minting | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every run and its ancestors not written yet, each once, parents before children,
    their lines written to ``spill``; returns their manifest entries and the policies
    (and, given ``minting``, notes the artifacts their rows mint)."""
    planned: list[dict[str, Any]] = []
    placed: set[str] = set()
    policies: dict[str, Any] = {}
    for done, run_id in enumerate(run_ids, 1):
        if run_id not in placed:
            for current, bound in _chain(source, run_id, placed, verified):
                planned.append(_write_run(source, current, bound, spill, policies, minting))
                placed.add(current)
        if on_progress is not None:
            on_progress(done, len(run_ids))
    return planned, policies


def _chain(
    source: RowSource, run_id: str, placed: set[str], verified: Verified | None
) -> list[tuple[str, _Bound]]:
    """The run and its ancestors not written yet, oldest first, each with what bounds it."""
    if verified is None:
        return _unverified_chain(source, run_id, placed)
    asked, kept = verified(run_id)
    # the verified ancestry, oldest first (the runs written already are a prefix)
    unplaced = [run_id]
    for ancestor in reversed(asked.ancestors):
        if ancestor in placed:
            break
        unplaced.append(ancestor)
    return [
        (r, _bound(verified(r)[0], None) if r != run_id else _bound(asked, kept))
        for r in reversed(unplaced)
    ]


def _bound(verification: RunVerification, kept: Kept | None) -> _Bound:
    return verification.events, verification.head, kept


def _write_run(
    source: RowSource,
    run_id: str,
    bound: _Bound,
    spill: IO[bytes],
    policies: dict[str, Any],
    minting: _Minting | None = None,
) -> dict[str, Any]:
    """The run's first ``events`` rows (the verifier's, when it kept them) to ``spill``, held
    to the head they must end at (a live run may have grown since; it must not have
    changed); returns the run's manifest entry. ``minting`` notes the artifacts the rows
    mint (rows written to a run that then fails the head check raise: nothing is kept)."""
    expected, head, kept = bound
    rows: Iterator[tuple[Any, ...]] = (
        _verified_rows(*kept)
        if kept is not None
        else (row_values(row) for row in source.read(run_id))
    )
    first: tuple[Any, ...] | None = None
    last: tuple[Any, ...] | None = None
    events = 0
    run_json = b""  # a run id JSON cannot carry: each line says so
    with contextlib.suppress(orjson.JSONEncodeError):
        run_json = orjson.dumps(run_id) if type(run_id) is str else b""
    lines: list[bytes] = []  # written in batches of about _COPY bytes
    size = 0
    for row in itertools.islice(rows, expected):
        line = _event_line(run_id, row, run_json)
        lines.append(line)
        size += len(line)
        if size >= _COPY:
            spill.write(b"".join(lines))
            lines, size = [], 0
        if first is None:
            first = row
            if minting is not None:
                minting.open_run(run_id, row)
        elif minting is not None:
            minting.row(row)
        last = row
        events += 1
    spill.write(b"".join(lines))
    if first is None or last is None or (events, last[6]) != (expected, head):
        raise StoreError(
            f"run {run_id} changed while it was exported ({events} rows read where "
            f"{expected} were counted, or another head): export again"
        )
    return _entry(run_id, RawRow(*first), RawRow(*last), events, policies)


def _verified_rows(
    rows: Sequence[tuple[Any, ...]], hashes: Sequence[tuple[bytes, bytes]]
) -> Iterator[tuple[Any, ...]]:
    """The rows a verification read, each with the event and chain hash the verifier
    computed of it in place of what the store holds (equal where it holds them, since the
    run verified; ``DERIVED`` where it keeps none): nothing is hashed here."""
    if len(hashes) != len(rows):  # a run that fails verifies nothing: never here
        raise StoreError(f"export: {len(hashes)} hashes for {len(rows)} rows verified")
    for (run, seq, type_, ts, body, _, _), (event, link) in zip(rows, hashes, strict=True):
        yield run, seq, type_, ts, body, event, link


# -- artifacts (version 3) --------------------------------------------------------------------


@dataclass(slots=True)
class _Found:
    """An artifact the written rows mint: the run and event that minted it first, and whether
    a run that mints it records a redaction policy."""

    run_id: str
    minted: MintedArtifact
    withheld: bool


class _Minting:
    """The artifacts the rows written mint (section 13.5), each scope and ref once, in the
    order of the event lines."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str], _Found] = {}
        self._run = ""
        self._scope: str | None = None
        self._withheld = False

    def open_run(self, run_id: str, first: tuple[Any, ...]) -> None:
        """A run's first row: its ``run.open`` names the scope (its conversation) and says
        whether it records a redaction policy."""
        body = open_body(RawRow(*first)) or {}
        scope = body.get("conversation_id")
        self._run, self._scope = run_id, scope if type(scope) is str else None
        self._withheld = body.get("policy") is not None

    def row(self, row: tuple[Any, ...]) -> None:
        payload = minted_payload(row[2], row[4])
        if payload is None or self._scope is None or not describes_artifact(payload):
            return
        minted = MintedArtifact(
            row[1], payload["ref"], payload["digest"], payload["bytes"], payload
        )
        key = (self._scope, minted.ref)
        found = self.found.get(key)
        if found is None:
            self.found[key] = _Found(self._run, minted, self._withheld)
        elif self._withheld:
            found.withheld = True


def _spill_artifacts(
    store: ArtifactStore, minting: _Minting, spill: IO[bytes]
) -> list[dict[str, Any]]:
    """The manifest's ``artifacts``, the bytes of each ``ok`` one written to ``spill`` after
    the event lines (one artifact held at a time: the store reads it whole), as the store
    holds them: the reader judges them, the writer does not."""
    entries: list[dict[str, Any]] = []
    for index, ((scope, ref), found) in enumerate(minting.found.items()):
        minted = found.minted
        entry: dict[str, Any] = {
            "scope": scope,
            "ref": ref,
            "run_id": found.run_id,
            "seq": minted.seq,
            "digest": minted.digest,
            "bytes": minted.bytes,
            "status": "withheld",
            "removed": None,
        }
        entries.append(entry)
        if found.withheld:
            continue
        data = store.read(scope, ref)
        if data is not None:
            entry["status"], entry["bytes"] = "ok", len(data)
            _write_chunks(index, data, spill)
            continue
        removed = store.tombstone(scope, ref)
        if removed is None:
            entry["status"] = "missing"
        else:  # what the store says of it: a tombstone that disagrees is judged by the reader
            entry["status"], entry["digest"], entry["bytes"] = (
                removed.reason,
                removed.digest,
                removed.size,
            )
            entry["removed"] = {"at": removed.at, "note": removed.note}
    return entries


def _write_chunks(index: int, data: bytes, spill: IO[bytes]) -> None:
    """An artifact's bytes as artifact lines (byte for byte what orjson writes of each)."""
    view = memoryview(data)
    for offset in range(0, len(data), _CHUNK):
        text = binascii.b2a_base64(view[offset : offset + _CHUNK], newline=False)
        spill.write(_CHUNK_LINE % (index, offset, text))
