"""The disclosure vault: a separate SQLite file that can open commitments.

The log holds only commitments; the vault keeps, per commitment, the disclosure
``[salt, key, value]`` that proves what was committed. It is never part of the
log or of an export. Erasing an entry (with ``PRAGMA secure_delete``, so the bytes
are overwritten in the file) makes that value unrecoverable by anyone, while the
log, which never held it, still verifies. Without a vault, salts are discarded at
the boundary and redacted values can be recovered by no one.

:class:`DisclosureVault` implements the vault contract
(:class:`~agentfootprint.store.vault_base.Vault`); its SQLite errors are translated in one
place (:meth:`DisclosureVault._errors`, via
:func:`~agentfootprint.store.sqlite_files.translate_errors`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence

import orjson

from agentfootprint.errors import FileError, NotAVaultError, StoreError, UsageError
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.commitments import Disclosure
from agentfootprint.store.base import same_file
from agentfootprint.store.sqlite_files import (
    SQLITE_HEADER,
    DatabaseKind,
    atomic,
    check_writable,
    connect_readonly,
    file_path,
    probe_file,
    translate_errors,
    writer_files,
)
from agentfootprint.store.vault_base import Vault

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
_VAULT = "a disclosure vault"


class DisclosureVault(Vault):
    """Disclosures by commitment, in their own SQLite file (secure delete on).

    ``DisclosureVault(path)`` opens a vault for writing, creating it when the file is
    missing or empty; ``create=False`` requires an existing vault (a missing file is a
    :class:`FileError`); ``readonly=True`` (implies ``create=False``) only reads: no schema,
    no journal switch, nothing written. A file that is not a vault (a log, another
    application's SQLite database, a file that is not SQLite) is refused with
    :class:`NotAVaultError` saying what it is, and left unchanged.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, create: bool = True, readonly: bool = False
    ) -> None:
        checked = file_path(path, who="DisclosureVault", option="disclosures")
        for name, flag in (("create", create), ("readonly", readonly)):
            if type(flag) is not bool:
                raise UsageError(
                    f"DisclosureVault: {name} must be True or False, not {flag!r}", option=name
                )
        self.path = checked
        self.readonly = readonly
        self._lock = threading.RLock()
        if readonly:
            self._conn = self._open_readonly()
        else:
            self._conn = self._open_for_writing(create)

    def _refuse(self, what: str) -> NotAVaultError:
        return NotAVaultError(
            f"{self.path} is {what}, not a disclosure vault; it was left unchanged: name "
            "the vault file (a separate file from the log)",
            path=str(self.path),
        )

    def _open_readonly(self) -> sqlite3.Connection:
        conn = connect_readonly(self.path, what=_VAULT, wrong_kind=NotAVaultError)
        try:
            with translate_errors(
                f"opening vault {self.path}", path=self.path, wrong_kind=NotAVaultError
            ):
                kind = DatabaseKind.of(conn)
                if not kind.is_vault:
                    raise self._refuse(kind.describe())
                conn.execute("PRAGMA secure_delete=ON")  # a connection setting
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_for_writing(self, create: bool) -> sqlite3.Connection:
        path = self.path
        exists = path.exists() or path.is_symlink()
        if not exists and not create:
            raise FileError(f"{path}: no such vault (no such file)", path=str(path))
        if exists:
            size, header = probe_file(path)
            if size > 0 and header != SQLITE_HEADER:
                raise self._refuse("not an SQLite database")
            if size == 0 and not create and not writer_files(path):
                raise self._refuse("an empty file")
        elif not path.parent.is_dir():
            raise FileError(
                f"cannot create the vault {path}: the folder {path.parent} does not exist",
                path=str(path),
            )
        check_writable(path, what="vault")
        context = f"opening vault {path}"
        with translate_errors(context, path=path, wrong_kind=NotAVaultError):
            conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
        try:
            with translate_errors(context, path=path, wrong_kind=NotAVaultError):
                kind = DatabaseKind.of(conn)  # reads only: nothing is written before this
                if not (kind.is_vault or (kind.is_empty and create)):
                    raise self._refuse(kind.describe())
                conn.execute("PRAGMA secure_delete=ON")
                conn.execute("PRAGMA journal_mode=DELETE")  # no WAL copies of values
                if kind.is_empty:
                    conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _writable(self) -> None:
        if self.readonly:
            raise StoreError(
                f"vault {self.path} was opened read-only: nothing can be kept or erased "
                "(open it without readonly=True)"
            )

    def put(self, run_id: str, disclosures: Sequence[Disclosure]) -> None:
        """Keep the disclosures of one commit (one transaction)."""
        self._writable()
        rows = [(d.commitment, run_id, d.key, d.salt, canon(d.value)) for d in disclosures]
        with self._lock, self._errors(), atomic(self._conn) as conn:
            conn.executemany("INSERT OR IGNORE INTO disclosures VALUES (?, ?, ?, ?, ?)", rows)

    def get(self, commitment: str) -> Disclosure | None:
        """The disclosure kept for ``commitment``, or None (never kept, or erased)."""
        with self._lock, self._errors():
            row = self._conn.execute(
                "SELECT commitment, key, salt, value FROM disclosures WHERE commitment = ?",
                (commitment,),
            ).fetchone()
        if row is None:
            return None
        return Disclosure(commitment=row[0], key=row[1], salt=row[2], value=parse(row[3]))

    def commitments(self, run_id: str | None = None) -> list[str]:
        """The commitments held (of one run), in the order they were kept."""
        query = "SELECT commitment FROM disclosures"
        args: tuple[str, ...] = ()
        if run_id is not None:
            query, args = query + " WHERE run_id = ?", (run_id,)
        with self._lock, self._errors():
            return [r[0] for r in self._conn.execute(query + " ORDER BY rowid", args)]

    def erase(self, *, commitments: Iterable[str] = (), run_id: str | None = None) -> int:
        """Delete disclosures (overwritten on disk); returns how many were erased."""
        targets = list(commitments)
        if not targets and run_id is None:
            raise UsageError("erase what? name commitments or a run id")
        self._writable()
        with self._lock, self._errors():
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

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return translate_errors(f"vault {self.path}", path=self.path, wrong_kind=NotAVaultError)

    def close(self) -> None:
        """Close the connection; later use is a :class:`StoreError` (SQLite refuses it)."""
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()


def open_vault(vault: object, *, log: str | os.PathLike[str] | None = None) -> Vault | None:
    """``None``, a path, or a :class:`~agentfootprint.store.vault_base.Vault` (a
    :class:`DisclosureVault`, a :class:`~agentfootprint.store.memory_vault.MemoryVault`, any
    backend of the contract): the ``disclosures`` option.

    ``log`` is the log's path, when the log is a file: a vault that is the same file is
    refused (the secrets would be put in the log), before anything is opened.
    """
    if vault is None:
        return None
    from agentfootprint.store.urls import is_store_url, open_vault_url, store_file

    url = is_store_url(vault)
    if isinstance(vault, Vault) and not isinstance(vault, DisclosureVault):
        return vault  # not a file of this library's: nothing to compare with the log
    if isinstance(vault, DisclosureVault | str | os.PathLike):  # a URL is a str
        where: str | os.PathLike[str] | None  # the file the vault is
        if isinstance(vault, DisclosureVault):
            where = vault.path
        elif url:
            where = store_file(vault)  # a sqlite: URL's file; memory: is none
        else:
            where = vault
        if log is not None and where is not None and same_file(where, log):
            raise UsageError(
                f"option 'disclosures': the vault {os.fspath(where)} is the log file itself; "
                "the vault keeps the redacted values and must be a separate file, "
                "never the log or part of an export",
                option="disclosures",
            )
        if url:  # sqlite:///PATH is a vault file, memory: a MemoryVault, postgresql:// a
            # PostgresVault (its URL names the master key file: ?key_file=PATH)
            return open_vault_url(vault)
        return vault if isinstance(vault, DisclosureVault) else DisclosureVault(vault)
    raise UsageError(
        "option 'disclosures': expected a path or a vault (a DisclosureVault, a MemoryVault "
        f"or another agentfootprint Vault), got {vault!r}",
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
    items = document.get("disclosures", [])
    if not isinstance(items, list):
        raise StoreError("disclosures file: 'disclosures' must be an array of disclosures")
    try:
        return [Disclosure.from_json(item) for item in items]
    except ValueError as exc:
        raise StoreError(f"disclosures file: {exc}") from exc
