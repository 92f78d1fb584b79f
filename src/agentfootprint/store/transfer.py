"""Moving runs between stores: export to a bundle, import a verified bundle."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from agentfootprint import __version__
from agentfootprint.errors import RunNotFoundError, StoreConflictError
from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.verify.bundle import BundleSource, write_bundle
from agentfootprint.verify.verifier import Verifier

__all__ = ["export_runs", "import_bundle"]


def export_runs(
    store: EventStore, run_ids: Sequence[str], out: str | os.PathLike[str]
) -> dict[str, Any]:
    """Write a bundle of the runs and every ancestor they continue; returns its manifest.

    Each run is verified before it is exported: a bundle never carries a broken log.
    """
    verifier = Verifier(store)
    for run_id in run_ids:
        verifier.verify(run_id)
    return write_bundle(store, run_ids, out, library=f"agentfootprint {__version__}")


def import_bundle(bundle: BundleSource, store: EventStore) -> list[str]:
    """Verify every run of the bundle, then append the ones the store lacks (exact bytes).

    A run the store already holds with the same head is skipped; with another head it is
    a :class:`StoreConflictError` (two different logs under one run id). Returns the ids
    of the runs imported.
    """
    verifier = Verifier(bundle)
    runs = bundle.runs()
    for run in runs:
        verifier.verify(run.run_id)
    imported = []
    for run in runs:
        try:
            present = store.run_info(run.run_id)
        except RunNotFoundError:
            present = None
        if present is not None:
            if (present.events, present.head) != (run.events, run.head):
                raise StoreConflictError(
                    f"run {run.run_id} is already in the store with a different log "
                    f"({present.events} events, head {present.head.hex()[:16]}…)"
                )
            continue
        store.append([StoredEvent.copy_of(row) for row in bundle.read(run.run_id)])
        imported.append(run.run_id)
    return imported
