"""In-memory disclosure vault: the vault contract held in process memory.

For tests and for agents run without files. Values are kept in their canonical bytes (as
the SQLite vault keeps them), so :meth:`MemoryVault.get` returns a fresh value equal to the
one an SQLite vault would return. Erasing an entry drops the vault's only reference to it:
nothing reachable from the vault holds the value afterwards. Everything is lost when the
vault is closed or the process ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from agentfootprint.errors import StoreError, UsageError
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.commitments import Disclosure
from agentfootprint.store.vault_base import Vault

__all__ = ["MemoryVault"]


class _Entry(NamedTuple):
    run_id: str
    key: str
    salt: str
    value: bytes  #: canonical JSON, parsed afresh on each read


class MemoryVault(Vault):
    """Disclosures by commitment in a dict guarded by a lock (safe to share between
    threads); the same guarantees as :class:`~agentfootprint.store.vault.DisclosureVault`
    except durability."""

    def __init__(self) -> None:
        #: commitment -> entry, in the order the entries were kept
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _open(self) -> None:
        """Refuse use after :meth:`close` (call with the lock held)."""
        if self._closed:
            raise StoreError(
                "the memory vault is closed: nothing can be kept, read or erased "
                "(its disclosures went with it)"
            )

    def put(self, run_id: str, disclosures: Sequence[Disclosure]) -> None:
        """Keep one commit's disclosures: every entry is encoded and checked before any is
        kept, so a refused batch leaves the vault as it was."""
        rows = [(d.commitment, _Entry(run_id, d.key, d.salt, canon(d.value))) for d in disclosures]
        for commitment, entry in rows:
            if not all(type(text) is str for text in (commitment, *entry[:3])):
                raise StoreError(
                    f"memory vault: a disclosure's commitment, run id, key and salt must be "
                    f"strings (commitment {commitment!r})"
                )
        with self._lock:
            self._open()
            for commitment, entry in rows:
                self._entries.setdefault(commitment, entry)  # the first one kept wins

    def get(self, commitment: str) -> Disclosure | None:
        """The disclosure kept for ``commitment``, or None (never kept, or erased)."""
        with self._lock:
            self._open()
            entry = self._entries.get(commitment)
        if entry is None:
            return None
        return Disclosure(
            commitment=commitment, key=entry.key, salt=entry.salt, value=parse(entry.value)
        )

    def commitments(self, run_id: str | None = None) -> list[str]:
        """The commitments held (of one run), in the order they were kept."""
        with self._lock:
            self._open()
            return [c for c, entry in self._entries.items() if run_id in (None, entry.run_id)]

    def erase(self, *, commitments: Iterable[str] = (), run_id: str | None = None) -> int:
        """Drop the entries (the vault keeps no reference to their values); returns how
        many were erased."""
        targets = list(commitments)
        if not targets and run_id is None:
            raise UsageError("erase what? name commitments or a run id")
        with self._lock:
            self._open()
            doomed = {c for c in targets if c in self._entries}
            if run_id is not None:
                doomed.update(c for c, entry in self._entries.items() if entry.run_id == run_id)
            for commitment in doomed:
                del self._entries[commitment]
        return len(doomed)

    def close(self) -> None:
        """Drop every disclosure; later use is a :class:`StoreError`."""
        with self._lock:
            self._closed = True
            self._entries.clear()
