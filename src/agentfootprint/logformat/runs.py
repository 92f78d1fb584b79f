"""What a log knows about one run without folding it: the one record every source gives.

A store's ``runs()`` / ``run_info()`` and a bundle's (``BundleSource``) answer with the same
:class:`RunInfo`, so the read side, the CLI and an import handle a run the same way whatever
holds it. It lives in the kernel because both the stores and the verifier's bundle reader
use it and neither may import the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentfootprint.logformat.chain import CLOSING_TYPES

__all__ = ["RunInfo"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunInfo:
    """One run as its source indexes it: read from the source's run index and last row (a
    store) or from the run's own rows (a bundle), never verified: the verifier judges the rows.

    In a bundle, ``conversation_id`` and ``parent_run_id`` are what the run's ``run.open`` row
    names (``""`` / None when its first row is no readable ``run.open``: verification says
    why), never the manifest's, which is an index and not evidence.
    """

    run_id: str
    conversation_id: str
    parent_run_id: str | None
    #: the ``ts`` of the run's first row (milliseconds since the Unix epoch)
    opened_at: int
    #: how many rows the run has
    events: int
    #: the type of its last row (``run.close`` or ``run.seal`` once it ended)
    last_type: str
    #: the chain hash of its last row
    head: bytes
    #: whether the run was asked for: a bundle also carries the ancestors of the runs it was
    #: exported for (False for those); every run of a store is True
    requested: bool = True

    @property
    def closed(self) -> bool:
        """Whether the run ended (its last row closes or seals it)."""
        return self.last_type in CLOSING_TYPES
