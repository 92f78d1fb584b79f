"""Moving runs between stores: export to a bundle, import a verified bundle."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from agentfootprint.errors import (
    RunNotFoundError,
    StoreConflictError,
    UsageError,
    VerificationError,
)
from agentfootprint.exchange.bundle_write import Kept, write_bundle
from agentfootprint.seal.note import Checkpoint
from agentfootprint.seal.signer import Signer, checked_signer
from agentfootprint.store.artifacts import ArtifactStore
from agentfootprint.store.base import EventReader, EventStore, StoredEvent, run_index_from_open
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.urls import StoreLocation, is_store_url, open_store_url, parse_store_url
from agentfootprint.verify.bundle import BundleSource, is_bundle
from agentfootprint.verify.bundle_proofs import ExportCheckpoint
from agentfootprint.verify.checkpoint import leaves_of, sign_checkpoint_with
from agentfootprint.verify.results import RunVerification
from agentfootprint.verify.verifier import Verifier
from agentfootprint.version import __version__

__all__ = ["copy_runs", "export_runs", "import_bundle", "open_log"]


def open_log(
    path: str | os.PathLike[str] | StoreLocation, *, option: str = "db"
) -> EventStore | BundleSource:
    """The log a path or store URL names, opened for reading only: an export bundle, or a
    database that is never created, migrated or changed (both read the same way: ``read``,
    ``runs``, ``run_ids``, ``index_entries``, ``close``).

    A ``sqlite:///PATH`` URL names its file as a path does (what the file holds decides how
    it is read), a ``postgresql://`` URL its database; ``memory:`` and other URLs are
    refused (:mod:`agentfootprint.store.urls`).
    """
    if isinstance(path, StoreLocation):
        return open_store_url(path, option=option, readonly=True)
    if not is_store_url(path):
        return BundleSource(path) if is_bundle(path) else SqliteStore(path, readonly=True)
    location = parse_store_url(path, option=option)
    if location.path is not None and is_bundle(location.path):
        return BundleSource(location.path)
    return open_store_url(location, option=option, readonly=True)


def export_runs(
    store: EventStore,
    run_ids: Sequence[str],
    out: str | os.PathLike[str],
    *,
    signer: Signer | None = None,
    origin: str | None = None,
    checkpoint: bytes | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    artifacts: ArtifactStore | None = None,
) -> dict[str, Any]:
    """Write a bundle of the runs and every ancestor they continue; returns its manifest.

    Each run is verified before it is exported: a bundle never carries a broken log.

    With ``signer`` (and ``origin``, the log's name in its checkpoints), or with
    ``checkpoint`` (a signed note of this database's seal log, as ``agentfootprint
    checkpoint`` prints it: its tree must be a prefix of the log), the bundle is of version
    2 and proves each sealed run's inclusion under that checkpoint (docs/log-format.md
    section 13.4). Either way every run of the database is verified first (the tree is
    built over its whole seal log). A sealed run the checkpoint's tree does not hold (sealed
    after it) is a :class:`UsageError`; so is asking for a checkpoint when no run exported
    is sealed.

    With ``artifacts`` (an artifact store, only read: open it with ``open_artifacts(...,
    readonly=True)``) the bundle is of version 3 (section 13.5): the minted events of the
    runs' verified rows decide which artifacts it lists, and it carries the bytes of each
    one the store holds; a run under a redaction policy gets its artifacts listed as
    ``withheld``, digests only. Without it the bundle is byte for byte what it was before.

    ``on_progress(done, total)`` counts runs: each run asked for as it is verified and
    written (with a checkpoint, first every run of the store as it is verified).
    """
    if not isinstance(store, EventReader):
        raise UsageError(
            f"store must be a store to read (SqliteStore, MemoryStore), not {type(store).__name__}",
            option="store",
        )
    if (
        isinstance(run_ids, str | bytes)
        or not isinstance(run_ids, Sequence)
        or not run_ids
        or not all(type(r) is str and r for r in run_ids)
    ):
        raise UsageError(
            f"run_ids must be a non-empty list of run id strings, not {run_ids!r}",
            option="run_ids",
        )
    if signer is not None and checkpoint is not None:
        raise UsageError(
            "export_runs(): give signer (to sign a new checkpoint) or checkpoint (an existing "
            "one), not both",
            option="checkpoint",
        )
    if checkpoint is not None and type(checkpoint) is not bytes:
        raise UsageError(
            f"export_runs(): checkpoint must be the note's bytes, not {type(checkpoint).__name__}",
            option="checkpoint",
        )
    if signer is None and origin is not None:
        raise UsageError(
            "export_runs(): origin names the checkpoint a signer signs", option="origin"
        )
    if signer is not None and (type(origin) is not str or not origin):
        raise UsageError(
            "export_runs(): a signer needs origin, the log's name in its checkpoints",
            option="origin",
        )
    library = f"agentfootprint {__version__}"
    if signer is not None or checkpoint is not None:  # verifies every run of the store
        # one count: every run of the store verified, then the runs asked for written
        verifying = _part(on_progress, 0, len(set(run_ids)))
        proven, verdicts = _export_checkpoint(store, run_ids, signer, origin, checkpoint, verifying)
        writing = _part(on_progress, len(verdicts), 0)
        return write_bundle(
            store,
            run_ids,
            out,
            library=library,
            checkpoint=proven,
            verified=lambda run_id: (verdicts[run_id], None),
            on_progress=writing,
            artifacts=artifacts,
        )
    read_once = _ReadOnce(store)
    with read_once.verifier.session():  # one seal log read for every run
        return write_bundle(
            store,
            run_ids,
            out,
            library=library,
            verified=read_once.verified,
            on_progress=on_progress,
            artifacts=artifacts,
        )


def _part(
    on_progress: Callable[[int, int], None] | None, before: int, after: int
) -> Callable[[int, int], None] | None:
    """``on_progress`` for one part of a longer task: its count lands after ``before``
    units done, with ``after`` units still to come once it is over."""
    if on_progress is None:
        return None
    return lambda done, total: on_progress(before + done, before + total + after)


class _ReadOnce:
    """The store as export's verifier reads it: each run is verified as it comes to be
    written, and the rows the verifier read for it (``chain_rows``) are handed to the
    writer with each row's event and chain hash as the verifier computed them
    (``Verifier.hashes_for``), so a run is read and hashed once for both. A run the
    verifier did not read (cached as an ancestor) is read again by the writer. The runs are
    verified in one :meth:`~agentfootprint.verify.verifier.Verifier.session`: the seal log
    is read and indexed once per export, not once per run."""

    def __init__(self, store: EventStore) -> None:
        self._store = store
        self.verifier = Verifier(self)
        self.verifier.hashes_for = self._hashes_for
        self._wanted: str | None = None
        self._kept: Sequence[tuple[Any, ...]] | None = None
        self._hashes: list[tuple[bytes, bytes]] | None = None

    def __getattr__(self, name: str) -> Any:  # the store's seal log and other reads
        return getattr(self._store, name)

    def read(self, run_id: str, *, start: int = 0) -> Iterable[StoredEvent]:
        return self._store.read(run_id, start=start)

    def chain_rows(self, run_id: str) -> Sequence[tuple[Any, ...]] | None:
        fetch = getattr(self._store, "chain_rows", None)
        rows: Sequence[tuple[Any, ...]] | None = fetch(run_id) if callable(fetch) else None
        if run_id == self._wanted:
            self._kept = rows
        return rows

    def _hashes_for(self, run_id: str) -> list[tuple[bytes, bytes]] | None:
        if run_id != self._wanted:
            return None
        self._hashes = []
        return self._hashes

    def verified(self, run_id: str) -> tuple[RunVerification, Kept | None]:
        """The run verified (a failure raises), with the rows its verification read and
        their hashes, when it read them."""
        self._wanted, self._kept, self._hashes = run_id, None, None
        try:
            verification = self.verifier.verify(run_id)
            rows, hashes = self._kept, self._hashes
            kept = None if rows is None or hashes is None else (rows, hashes)
            return verification, kept
        finally:
            self._wanted, self._kept, self._hashes = None, None, None


def _export_checkpoint(
    store: EventStore,
    run_ids: Sequence[str],
    signer: Signer | None,
    origin: str | None,
    note: bytes | None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[ExportCheckpoint, dict[str, RunVerification]]:
    """The checkpoint a version 2 bundle carries, over the store's whole verified log, and
    every run's verification."""
    order = [str(run_id) for _, run_id in store.seal_log() or ()]
    if not set(run_ids) & set(order):
        raise UsageError(
            "none of the runs to export is sealed: a checkpoint proves sealed runs only "
            "(export without one)",
            option="checkpoint",
        )
    # every run once, the seal log checked
    results = list(Verifier(store).verify_all(on_progress=on_progress))
    verdicts = dict(results)
    for run_id in run_ids:  # what export verifies of each run asked for, from that pass
        verdict = verdicts.get(run_id)
        if verdict is None:
            raise RunNotFoundError(f"run_id: no run {run_id!r} in this store")
        if isinstance(verdict, VerificationError):
            raise verdict
    leaves = leaves_of(store, results)
    tree = ExportCheckpoint(leaves, order)
    if signer is not None:
        assert origin is not None
        signed = Checkpoint(origin, len(leaves), tree.root_of(len(leaves)))
        note = sign_checkpoint_with(signed, checked_signer(signer))
    assert note is not None
    verified = {r: v for r, v in results if isinstance(v, RunVerification)}
    return tree.adopt(note), verified


def copy_runs(
    source: EventStore,
    target: EventStore | Callable[[], EventStore],
    run_ids: Sequence[str] | None = None,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[list[str], list[str]]:
    """Copy runs (all the source's, found from its events, or ``run_ids`` and their
    ancestors) into ``target`` losslessly, with an export bundle as the medium: each run is
    verified in the source, the bundle (written from those verified rows) is imported
    all-or-nothing (runs the target holds with the same rows are skipped; one held with
    other rows is a :class:`StoreConflictError` and nothing is copied), and every run is
    verified again as the target holds it, with the source's head. Returns ``(copied,
    already_there)``.

    ``target`` may be a function that opens the store (closed again here): it is called
    only once the source's runs are verified and bundled, so a copy refused there opens
    (and creates) nothing.

    Sealed runs are copied in the source's seal order (then the others): into a target that
    holds no sealed run, the copy's seal log is the source's (of the runs copied), so a
    checkpoint of the source checks against the copy.

    ``on_progress(done, total)`` counts three steps a run: verified in the source and
    bundled, imported (or found there), verified in the target.
    """
    import tempfile  # the bundle lives only while it is copied

    _check_store(source, "source")
    if not callable(target):
        _check_store(target, "target")
    if run_ids is None:
        run_ids = [str(run_id) for run_id in source.run_ids()]
    if not run_ids:
        return [], []
    run_ids = _in_seal_order(source, run_ids)
    n = len(run_ids)
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="agentfootprint-copy-"))
        path = os.path.join(folder, "runs.afp")
        # verifies each run in the source
        export_runs(source, list(run_ids), path, on_progress=_part(on_progress, 0, 2 * n))
        bundle = stack.enter_context(BundleSource(path))
        heads = {run.run_id: run.head for run in bundle.runs()}
        if callable(target):
            target = stack.enter_context(contextlib.closing(target()))
            _check_store(target, "target")
        imported = _part(on_progress, n, len(heads))
        copied = _import_runs(bundle, target, list(heads), imported)
        checking = _part(on_progress, n + len(heads), 0)
        return copied, _checked_copy(target, heads, copied, checking)


def _checked_copy(
    target: EventStore,
    heads: dict[str, bytes],
    copied: list[str],
    on_progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Every run copied verified as the target holds it, ending at the source's head;
    returns those the target held already."""
    checker = Verifier(target)
    for done, (run_id, head) in enumerate(heads.items(), 1):
        if checker.verify(run_id).head != head:
            raise StoreConflictError(
                f"run {run_id}: the target holds it with another head than the source's"
            )
        if on_progress is not None:
            on_progress(done, len(heads))
    return [run_id for run_id in heads if run_id not in copied]


def _in_seal_order(source: EventStore, run_ids: Sequence[str]) -> list[str]:
    """``run_ids`` with the sealed ones first, in the source's seal-log order, then the rest
    as given. A parent's leaf is always below its child's (a run is continued once closed,
    and its seal commits with its close), so the order keeps parents first."""
    log = source.seal_log() or []
    leaves = {r: leaf for leaf, r in log if isinstance(r, str) and type(leaf) is int}
    ids = list(dict.fromkeys(str(run_id) for run_id in run_ids))
    sealed = sorted((r for r in ids if r in leaves), key=lambda r: (leaves[r], r))
    return sealed + [r for r in ids if r not in leaves]


def import_bundle(
    bundle: BundleSource,
    store: EventStore,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Verify every run of the bundle, then append the ones the store lacks (exact bytes),
    all in one atomic unit: a refused import leaves the store as it was.

    First every run is verified; then every run is checked against the store: one the
    store holds with exactly the same rows is skipped, one it holds with any other rows is
    a :class:`StoreConflictError` naming it (two logs under one run id: the store's copy
    is never altered or added to). Only when every run passed are the missing ones
    appended, parents before children, through :meth:`EventStore.append_runs`. Returns
    the ids of the runs imported.

    ``on_progress(done, total)`` counts two steps a run: verified, then imported (or
    found in the store).
    """
    if not isinstance(bundle, BundleSource):
        raise UsageError(
            f"bundle must be an opened BundleSource, not {type(bundle).__name__}",
            option="bundle",
        )
    _check_store(store, "store")
    runs = len(bundle.runs())
    verified = _verified_run_ids(bundle, _part(on_progress, 0, runs))
    return _import_runs(bundle, store, verified, _part(on_progress, runs, 0))


def _import_runs(
    bundle: BundleSource,
    store: EventStore,
    run_ids: list[str],
    on_progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """:func:`import_bundle` of runs already verified (``run_ids``, the bundle's)."""
    missing: list[str] = []
    done = 0
    for run_id in run_ids:
        if not _present(store, bundle, run_id):
            missing.append(run_id)
        elif on_progress is not None:  # there already: done with
            done += 1
            on_progress(done, len(run_ids))
    ordered = _parents_first(bundle, missing)
    if ordered:
        store.append_runs(_rows_of(bundle, ordered, done, len(run_ids), on_progress))
    return ordered


def _rows_of(
    bundle: BundleSource,
    run_ids: list[str],
    done: int,
    total: int,
    on_progress: Callable[[int, int], None] | None,
) -> Iterator[list[StoredEvent]]:
    """Each run's rows, for :meth:`EventStore.append_runs`; a run counts as done when the
    store asks for the next one."""
    for run_id in run_ids:
        yield [StoredEvent.copy_of(row) for row in bundle.read(run_id)]
        if on_progress is not None:
            done += 1
            on_progress(done, total)


def _check_store(store: Any, argument: str) -> None:
    if not isinstance(store, EventStore):
        raise UsageError(
            f"{argument} must be an EventStore (SqliteStore, MemoryStore), "
            f"not {type(store).__name__}",
            option=argument,
        )


def _verified_run_ids(
    bundle: BundleSource, on_progress: Callable[[int, int], None] | None = None
) -> list[str]:
    """Every run of the bundle, each verified (and, where the verifier offers whole-file
    verification, the manifest checked against the events): a failure raises."""
    verifier = Verifier(bundle)
    verify_all = getattr(verifier, "verify_all", None)
    if verify_all is not None:
        found: list[str] = []
        for run_id, outcome in verify_all(on_progress=on_progress):
            if isinstance(outcome, VerificationError):
                raise outcome
            found.append(run_id)
        return list(dict.fromkeys(found))
    run_ids = [run.run_id for run in bundle.runs()]
    for run_id in run_ids:
        verifier.verify(run_id)
    return run_ids


def _present(store: EventStore, bundle: BundleSource, run_id: str) -> bool:
    """Whether the store holds the run (found from its events, not the index); a copy that
    differs from the bundle's in any row is a :class:`StoreConflictError`."""
    try:
        held = store.read(run_id)
    except RunNotFoundError:
        return False
    rows = (StoredEvent.copy_of(row) for row in bundle.read(run_id))
    for count, (mine, theirs) in enumerate(itertools.zip_longest(held, rows)):
        if mine is None and count == 0:
            return False  # a store that yields no row for the run does not hold it
        if mine != theirs:
            raise StoreConflictError(
                f"run {run_id} is already in the store with a different log (they differ "
                f"at seq {count}); nothing was imported: the store's copy is kept as it is"
            )
    return True


def _parents_first(bundle: BundleSource, run_ids: list[str]) -> list[str]:
    """``run_ids`` reordered so that a run comes after its parent when both are in it
    (whatever order the bundle lists them in), otherwise in the bundle's order."""
    wanted = set(run_ids)
    parent: dict[str, str | None] = {}
    for run_id in run_ids:
        first = next(iter(bundle.read(run_id)))
        parent[run_id] = run_index_from_open(StoredEvent.copy_of(first))[1]
    ordered: list[str] = []
    placed: set[str] = set()
    for run_id in run_ids:
        chain: list[str] = []
        at: str | None = run_id
        while at is not None and at in wanted and at not in placed and at not in chain:
            chain.append(at)
            at = parent[at]
        for item in reversed(chain):
            placed.add(item)
            ordered.append(item)
    return ordered
