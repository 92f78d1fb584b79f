"""Export bundles: runs' events as stored, in one file an auditor verifies offline.

A bundle is UTF-8 JSON Lines (docs/log-format.md, section 13):

1. a manifest line: ``{"agentfootprint_bundle": 1, "format", "canon", "hash", "library",
   "runs": [{"run_id", "conversation_id", "parent_run_id", "opened_at", "events",
   "last_type", "head", "policy_digest", "requested"}], "policies": {digest: policy},
   "counts": {"runs", "events"}}``; version 2 adds a signed ``checkpoint`` note and, per
   run, its ``inclusion`` proof under it (null without a seal: section 13.4,
   :mod:`agentfootprint.verify.bundle_proofs`); version 3 adds ``artifacts``, the artifacts
   its runs minted (section 13.5, :mod:`agentfootprint.verify.bundle_artifacts`). What
   differs by version is read from its
   :class:`~agentfootprint.verify.bundle_versions.BundleShape`;
2. one line per event, runs in dependency order (a parent before its children), each
   run's rows together and in seq order: ``{"run", "seq", "type", "ts", "body",
   "event_hash", "chain_hash"}`` where ``body`` is the stored canonical body as a JSON
   string (its UTF-8 bytes are exactly the hashed bytes) and hashes are lowercase hex;
3. version 3 only: the artifact lines, ``{"artifact", "offset", "data"}``, the bytes of each
   artifact the bundle carries, in base64, in the manifest's order;
4. a trailer line: ``{"end": true, "events": n, "sha256": hex}``, the SHA-256 of every
   byte before the trailer, so a cut or spliced file is refused before verification.

Memory is bounded by the size limit, never by the file: no line may exceed
``limits.MAX_BUNDLE_LINE_BYTES`` (so a reader holds at most one bounded line), opening is one
streaming pass that keeps only each run's place in the file, and writing reads each run
from its source while it writes it. Salts and disclosures are never in a bundle.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from agentfootprint.errors import RunNotFoundError, UsageError, VerificationError
from agentfootprint.local_files import open_regular
from agentfootprint.logformat import limits
from agentfootprint.logformat.rows import StoredEvent
from agentfootprint.logformat.runs import RunInfo
from agentfootprint.verify.bundle_artifacts import BundleArtifacts
from agentfootprint.verify.bundle_json import _checked_values, _file_error
from agentfootprint.verify.bundle_manifest import (
    _INDEX_DECODER,
    BLOCK,
    RUNS,
    BundleIndexEntry,
    NotStreamed,
    stream_manifest,
)
from agentfootprint.verify.bundle_open import PREFIX, Opening, RunTable
from agentfootprint.verify.bundle_proofs import InclusionClaim

__all__ = [
    "BUNDLE_MAGIC",
    "BundleIndexEntry",
    "BundleSource",
    "is_bundle",
]


#: how a version 1 bundle begins (a version 2 bundle begins with ...":2)
BUNDLE_MAGIC = b'{"agentfootprint_bundle":1'
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: how much of a run's lines is read at once when they are read again
_BLOCK = 1 << 18


def _path_argument(value: Any, name: str, call: str) -> Path:
    """A path argument as a Path, or a UsageError naming the argument."""
    if isinstance(value, str | os.PathLike) and not isinstance(value, bytes):
        path = os.fspath(value)
        if isinstance(path, str) and "\x00" not in path:
            return Path(path)
    raise UsageError(
        f"{call}() argument {name!r} must be a file path (str or os.PathLike), not "
        f"{type(value).__name__} {value!r:.60}",
        option=name,
    )


def is_bundle(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts like a bundle of any version (``{"agentfootprint_bundle":``;
    a database starts ``SQLite format 3``): opening it then says whether it is one.

    A path that cannot be read (missing, a folder, no permission) is a :class:`FileError`.
    """
    checked = _path_argument(path, "path", "is_bundle")
    try:
        with open_regular(checked) as handle:  # a FIFO or a device is refused, never read
            return handle.read(len(PREFIX)) == PREFIX
    except OSError as exc:
        raise _file_error(exc, checked, "read") from exc


# -- reading ----------------------------------------------------------------------------------


class _RunRows(Sequence[tuple[Any, ...]]):
    """One run's rows of an open bundle as a sequence that reads them from the file each
    time it is iterated (memory holds one block, never the run)."""

    __slots__ = ("_at", "_run_id", "_source")

    def __init__(self, source: BundleSource, run_id: str, at: int) -> None:
        self._source, self._run_id, self._at = source, run_id, at

    def __len__(self) -> int:
        return self._source._runs.events[self._at]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self._source._values(self._run_id, self._at, 0)

    @overload
    def __getitem__(self, index: int) -> tuple[Any, ...]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[Any, ...]]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return list(self)[index]
        position = range(len(self))[index]  # IndexError out of range
        found: Any = None
        for at, row in enumerate(self):  # to the end: the run's bytes checked whole
            if at == position:
                found = row
        return found


class BundleSource:
    """A bundle opened for verification: ``read(run_id)`` like a store, plus ``run_ids()``,
    ``index_entries()``, ``runs()`` and ``run_info()``.

    Opening is one streaming pass over the file that checks its framing (section 13.2:
    manifest, trailer, byte digest, counts, each run's rows together, in dependency order
    and as the manifest lists them) and raises :class:`VerificationError` with code
    ``bundle`` on the first problem; the events themselves are checked by the verifier. It
    keeps only where each run's rows are (:class:`~agentfootprint.verify.bundle_open.RunTable`):
    ``read`` parses them again, lazily, from the file, which stays open until :meth:`close`
    (a context manager closes it), and so does :meth:`iter_index_entries` the manifest. The
    file must not change while it is open: a row read back that is not what opening saw
    fails with code ``bundle``. A missing, unreadable or folder path is a :class:`FileError`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = _path_argument(path, "path", "BundleSource")
        try:
            self._handle = open_regular(self.path, buffer_size=1 << 16)  # no FIFO, no device
        except OSError as exc:
            raise _file_error(exc, self.path, "read") from exc
        self._lock = threading.Lock()
        self._limit = limits.MAX_BUNDLE_LINE_BYTES
        try:
            opening = Opening(self._handle, self._bad, self.path)
            opening.run()
        except OSError as exc:
            self._handle.close()
            raise _file_error(exc, self.path, "read") from exc
        except BaseException:
            self._handle.close()
            raise
        self._runs: RunTable = opening.runs
        self._manifest = opening.manifest_length, opening.manifest_sha
        #: the ``library`` member of the manifest (who wrote the bundle, as it says)
        self.library: str = opening.library
        #: the bundle's version (1; 2 with a checkpoint; 3 with artifacts, and maybe one)
        self.version: int = opening.version
        #: the signed checkpoint note the manifest carries (its bytes; version 2, or 3 with
        #: one), else None
        self.checkpoint_note: bytes | None = opening.checkpoint
        self._claims = opening.claims
        framing = opening.artifacts
        self._artifacts = (
            None
            if framing is None
            else BundleArtifacts(framing.entries, framing.placed, self._line_at, self._changed)
        )

    def _bad(self, reason: str) -> VerificationError:
        return VerificationError("", None, reason, code="bundle", where=f"bundle {self.path}")

    def _changed(self, line: int) -> VerificationError:
        return self._bad(
            f"line {line} is not what it was when the bundle was opened: the file changed "
            "while it was open (a bundle must not change while it is read)"
        )

    def _at(self, run_id: str) -> int:
        at = self._runs.index.get(run_id) if type(run_id) is str else None
        if at is None:
            raise RunNotFoundError(f"no run {run_id!r} in bundle {self.path}")
        return at

    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        """The run's rows from position ``start`` on, parsed from the file as they are
        consumed; :class:`RunNotFoundError` for a run the bundle does not hold."""
        rows = self._values(run_id, self._at(run_id), start)
        return map(StoredEvent.of_values, rows)

    def chain_rows(self, run_id: str) -> Sequence[tuple[Any, ...]]:
        """The run's rows as the verifier's loop takes them (the 7 values of each row
        ``read`` yields, no row object): a sequence read from the file each time it is
        iterated, never held whole. :class:`RunNotFoundError` for a run it does not hold."""
        return _RunRows(self, run_id, self._at(run_id))

    def _values(self, run_id: str, at: int, start: int) -> Iterator[tuple[Any, ...]]:
        """The lines were checked line by line when the bundle was opened and their SHA-256
        kept: read again (in blocks, each hashed whole), they are parsed the fast way, and
        the iteration fails (before it ends, so no verification of the run completes) unless
        they are as many lines as then and their bytes hash the same. The lock is held per
        block, never across a yield, so runs can be read interleaved."""
        runs = self._runs
        offset, count, first = runs.offsets[at], runs.events[at], runs.lines[at]
        end = offset + runs.lengths[at]
        sha = hashlib.sha256()
        tail = b""  # a line begun in an earlier block
        index = 0
        for block in self._hashed_blocks(offset, end, _BLOCK, sha):
            offset += len(block)
            lines = block.split(b"\n")
            if tail:
                lines[0] = tail + lines[0]
            tail = lines.pop()
            if len(tail) > self._limit or index + len(lines) > count:
                raise self._changed(first + min(index + len(lines), count - 1))
            for line in lines:
                if index >= start:
                    row = _checked_values(line)
                    if row is None or row[0] != run_id:
                        raise self._changed(first + index)
                    yield row
                index += 1
        if tail or index != count or offset != end or sha.digest() != runs.sha(at):
            raise self._changed(first + min(index, count - 1))

    def _hashed_blocks(self, offset: int, end: int, size: int, sha: Any) -> Iterator[bytes]:
        """The file from ``offset`` to ``end`` (or its end) in blocks of at most ``size``,
        each hashed into ``sha`` as it is read; the lock is held per block, never across a
        yield."""
        while offset < end:
            block = self._block_at(offset, min(size, end - offset))
            if not block:
                return
            offset += len(block)
            sha.update(block)
            yield block

    def _line_at(self, offset: int) -> bytes:
        """The line that starts at ``offset`` (with its newline), read under the lock; a line
        over the limit is cut there (and then differs from what opening saw)."""
        with self._lock:
            if self._handle.closed:
                raise UsageError(f"bundle {self.path} is closed")
            try:
                self._handle.seek(offset)
                return self._handle.readline(self._limit + 1)
            except OSError as exc:
                raise _file_error(exc, self.path, "read") from exc

    def _block_at(self, offset: int, size: int) -> bytes:
        with self._lock:
            if self._handle.closed:
                raise UsageError(f"bundle {self.path} is closed")
            try:
                self._handle.seek(offset)
                return self._handle.read(size)
            except OSError as exc:
                raise _file_error(exc, self.path, "read") from exc

    def run_ids(self) -> list[str]:
        """Every run the bundle's event lines hold, in file order (never the manifest's:
        opening held the two to one order)."""
        return list(self._runs.ids)

    def iter_index_entries(self) -> Iterator[BundleIndexEntry]:
        """The manifest's run list as written, one entry at a time: the bundle's run index,
        read again from the file (opening already checked that it lists the same runs,
        counts and heads), one block of it held at a time; the line must hash as when the
        bundle was opened, else the iteration fails (the file changed)."""
        length, expected = self._manifest
        sha = hashlib.sha256()
        try:
            for name, entry in stream_manifest(
                self._hashed_blocks(0, length, BLOCK, sha), _INDEX_DECODER
            ):
                if name == "runs" and entry is not RUNS:
                    if type(entry) is not BundleIndexEntry:
                        raise self._changed(1)
                    yield entry
        except NotStreamed:
            raise self._changed(1) from None
        if sha.digest() != expected:
            raise self._changed(1)

    def index_entries(self) -> list[BundleIndexEntry]:
        """The manifest's run list as written (:meth:`iter_index_entries` as a list)."""
        return list(self.iter_index_entries())

    def _info(self, at: int) -> RunInfo:
        runs = self._runs
        return RunInfo(
            run_id=runs.ids[at],
            conversation_id=runs.conversations[at],
            parent_run_id=runs.parents[at],
            opened_at=runs.opened[at],
            events=runs.events[at],
            last_type=runs.types[at],
            head=runs.head(at),
            requested=bool(runs.requested[at]),
        )

    def runs(self) -> list[RunInfo]:
        """Every run in the bundle, in file order (parents before children)."""
        return [self._info(at) for at in range(len(self._runs.ids))]

    def run_info(self, run_id: str) -> RunInfo:
        return self._info(self._at(run_id))

    def artifact_source(self) -> BundleArtifacts | None:
        """The artifacts a version 3 bundle carries, as an artifact source (``read(scope,
        ref)``, ``tombstone(scope, ref)``: what the per-artifact check reads of a store, plus
        each entry as the manifest lists it); None for a bundle of version 1 or 2. The
        entries and lines were checked as framing when the bundle was opened; whether they
        are the artifacts the runs recorded is judged per artifact (section 13.5)."""
        return self._artifacts

    def inclusion_of(self, run_id: str) -> InclusionClaim | None:
        """What the manifest claims of the run's leaf and proof under ``checkpoint_note``
        (None: no claim, or a version 1 bundle). Not evidence: the verifier checks it."""
        return self._claims.get(run_id)

    def close(self) -> None:
        """Release the file (reading a run afterwards is a :class:`UsageError`)."""
        with self._lock:
            self._handle.close()

    def __enter__(self) -> BundleSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
