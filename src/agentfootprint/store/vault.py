"""The disclosure vault: a separate SQLite file that can open commitments.

The log holds only commitments; the vault keeps, per commitment, the disclosure
``[salt, key, value]`` that proves what was committed. It is never part of the
log or of an export. Erasing an entry (with ``PRAGMA secure_delete``, so the bytes
are overwritten in the file) makes that value unrecoverable by anyone, while the
log, which never held it, still verifies. Without a vault, salts are discarded at
the boundary and redacted values can be recovered by no one.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from agentfootprint.errors import StoreError, UsageError
from agentfootprint.store.sqlite import atomic, translate_errors
from agentfootprint.verify.canonical import canon, parse
from agentfootprint.verify.commitments import (
    COMMIT_KEY,
    Disclosure,
    is_commitment,
    parse_json_container,
)

__all__ = ["DisclosureVault", "open_vault"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS disclosures (
    commitment TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    salt TEXT NOT NULL,
    value BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS disclosures_by_run ON disclosures (run_id);
"""


class DisclosureVault:
    """Disclosures by commitment, in their own SQLite file (secure delete on)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        with translate_errors(f"opening vault {self.path}"):
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            self._conn.execute("PRAGMA secure_delete=ON")
            self._conn.execute("PRAGMA journal_mode=DELETE")  # no WAL copies of values
            self._conn.executescript(_SCHEMA)

    def put(self, run_id: str, disclosures: Sequence[Disclosure]) -> None:
        """Keep the disclosures of one commit (one transaction)."""
        rows = [(d.commitment, run_id, d.key, d.salt, canon(d.value)) for d in disclosures]
        with self._lock, translate_errors(f"vault {self.path}"), atomic(self._conn) as conn:
            conn.executemany("INSERT OR IGNORE INTO disclosures VALUES (?, ?, ?, ?, ?)", rows)

    def get(self, commitment: str) -> Disclosure | None:
        with self._lock, translate_errors(f"vault {self.path}"):
            row = self._conn.execute(
                "SELECT commitment, key, salt, value FROM disclosures WHERE commitment = ?",
                (commitment,),
            ).fetchone()
        if row is None:
            return None
        return Disclosure(commitment=row[0], key=row[1], salt=row[2], value=parse(row[3]))

    def reveal(self, value: Any, memo: dict[int, tuple[Any, Any]] | None = None) -> Any:
        """``value`` with every commitment this vault can open replaced by its value (JSON
        text inside strings too). Erased or unknown commitments stay in place. ``memo``
        collects, for each container that changed, ``id(opened) -> (opened, recorded)``:
        recording the opened container again then keeps its commitments."""
        if is_commitment(value):
            found = self.get(value[COMMIT_KEY])
            return value if found is None or not found.opens() else found.value
        kind = type(value)
        if kind is dict:
            opened: Any = {k: self.reveal(v, memo) for k, v in value.items()}
        elif kind is list:
            opened = [self.reveal(v, memo) for v in value]
        elif kind is str:
            inner = parse_json_container(value)
            if inner is None:
                return value
            opened_inner = self.reveal(inner, memo)
            return value if opened_inner == inner else canon(opened_inner).decode("utf-8")
        else:
            return value
        if opened == value:
            return value
        if memo is not None:
            memo[id(opened)] = (opened, value)
        return opened

    def disclose(self, commitments: Iterable[str]) -> list[Disclosure]:
        """The disclosures for these commitments; a missing one is a :class:`UsageError`."""
        out = []
        for commitment in commitments:
            found = self.get(commitment)
            if found is None:
                raise UsageError(
                    f"the vault holds no disclosure for commitment {commitment} "
                    "(never kept, or erased)"
                )
            out.append(found)
        return out

    def commitments(self, run_id: str | None = None) -> list[str]:
        query = "SELECT commitment FROM disclosures"
        args: tuple[str, ...] = ()
        if run_id is not None:
            query, args = query + " WHERE run_id = ?", (run_id,)
        with self._lock, translate_errors(f"vault {self.path}"):
            return [r[0] for r in self._conn.execute(query + " ORDER BY rowid", args)]

    def erase(self, *, commitments: Iterable[str] = (), run_id: str | None = None) -> int:
        """Delete disclosures (overwritten on disk); returns how many were erased."""
        targets = list(commitments)
        if not targets and run_id is None:
            raise UsageError("erase what? name commitments or a run id")
        with self._lock, translate_errors(f"vault {self.path}"):
            with atomic(self._conn) as conn:
                erased = 0
                for commitment in targets:
                    erased += conn.execute(
                        "DELETE FROM disclosures WHERE commitment = ?", (commitment,)
                    ).rowcount
                if run_id is not None:
                    erased += conn.execute(
                        "DELETE FROM disclosures WHERE run_id = ?", (run_id,)
                    ).rowcount
            self._conn.execute("VACUUM")  # no free page keeps an erased value
        return erased

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()


def open_vault(vault: object) -> DisclosureVault | None:
    """``None``, a path, or a :class:`DisclosureVault` (the ``disclosures`` option)."""
    if vault is None or isinstance(vault, DisclosureVault):
        return vault
    if isinstance(vault, str | os.PathLike):
        return DisclosureVault(vault)
    raise UsageError(
        f"option 'disclosures': expected a path or a DisclosureVault, got {vault!r}",
        option="disclosures",
    )


def disclosures_document(disclosures: Sequence[Disclosure]) -> bytes:
    """The file ``agentfootprint disclose`` writes: ``{"disclosures": [...]}``."""
    return (
        orjson.dumps(
            {"agentfootprint_disclosures": 1, "disclosures": [d.to_json() for d in disclosures]},
            option=orjson.OPT_INDENT_2,
        )
        + b"\n"
    )


def read_disclosures(data: bytes) -> list[Disclosure]:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise StoreError(f"disclosures file is not JSON: {exc}") from exc
    version = document.get("agentfootprint_disclosures") if isinstance(document, dict) else None
    if type(version) is not int or version != 1:
        raise StoreError("not an agentfootprint disclosures file")
    try:
        return [Disclosure.from_json(item) for item in document.get("disclosures", [])]
    except ValueError as exc:
        raise StoreError(f"disclosures file: {exc}") from exc
