"""The resources an agent opens from its options: its store (the log) and its disclosure
vault, each from a path, a URL or an object, checked before anything is created."""

from __future__ import annotations

import os
from typing import Any

from agentfootprint.errors import FileError, UsageError
from agentfootprint.store.base import EventStore, agreed_durability
from agentfootprint.store.memory import MemoryStore
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.urls import (
    database_of,
    is_store_url,
    open_store_url,
    parse_store_url,
    store_file,
)
from agentfootprint.store.vault import open_vault
from agentfootprint.store.vault_base import Vault

__all__ = ["check_durability", "open_disclosures", "open_store"]


def check_durability(durability: Any, store: Any) -> str | None:
    """``durability`` checked against the ``store`` it applies to (one the agent opens from
    a path); None when not given."""
    if durability is None:
        return None
    chosen = agreed_durability(durability, None)
    in_memory = store is None
    if is_store_url(store):  # a URL's durability=... must agree; memory: has none
        location = parse_store_url(store, option="store")
        in_memory = location.kind == "memory"
        agreed_durability(durability, location.durability)
    if in_memory or not isinstance(store, str | os.PathLike):
        raise UsageError(
            "option 'durability' applies to a store the agent opens from a path "
            "(store='runs.db'); "
            + (
                "the in-memory store keeps nothing across a crash"
                if in_memory
                else "a store object keeps the durability it was opened with "
                "(SqliteStore(path, durability=...))"
            ),
            option="durability",
        )
    return chosen


def open_store(store: Any, durability: str | None = None) -> EventStore:
    """``None`` or ``"memory:"`` -> in memory; a path or ``"sqlite:///PATH"`` -> SQLite
    file (at ``durability``, else the URL's ``durability=``, default "full"); an
    :class:`EventStore` as is. Other URLs are refused (:mod:`agentfootprint.store.urls`)."""
    if store is None:
        return MemoryStore()
    if is_store_url(store):
        try:
            return open_store_url(store, option="store", durability=durability)
        except FileError as exc:
            raise _naming(exc, "store") from exc
    if isinstance(store, EventStore):
        if getattr(store, "readonly", False) is True:
            raise UsageError(
                "option 'store': the store was opened read-only (readonly=True); an agent "
                "records its runs: give it a store opened for writing",
                option="store",
            )
        return store
    if isinstance(store, str | os.PathLike):
        path = _file_path(store, "store")
        try:
            return SqliteStore(path, durability=durability or "full")
        except FileError as exc:
            raise _naming(exc, "store") from exc
    raise UsageError(
        f"option 'store': expected None, a database path or an EventStore, got {store!r}",
        option="store",
    )


def _file_path(value: str | os.PathLike[Any], option: str) -> str:
    """A path option as a non-empty str (the store checks the file itself)."""
    path = os.fspath(value)
    if not isinstance(path, str) or not path:
        raise UsageError(f"option {option!r}: expected a file path, got {value!r}", option=option)
    return path


def _naming(exc: FileError, option: str) -> FileError:
    """``exc`` (same type) with the option it came from named."""
    if exc.option == option:
        return exc
    return type(exc)(f"option {option!r}: {exc}", path=exc.path, option=option)


def open_disclosures(disclosures: Any, store: Any) -> Vault | None:
    """The ``disclosures`` option as a vault, never the log: the same file as ``store`` (by
    any path, a link included) or any other log is refused before anything is opened (the
    vault holds what the log must not)."""
    if isinstance(disclosures, str | os.PathLike):
        disclosures = _file_path(disclosures, "disclosures")
    log_database = database_of(store)
    if log_database is not None and database_of(disclosures) == log_database:
        raise UsageError(
            "option 'disclosures': the vault is the log's own PostgreSQL database; the vault "
            "keeps the redacted values and must be a database of its own, never the log's",
            option="disclosures",
        )
    log: str | os.PathLike[str] | None = None
    if is_store_url(store):
        log = store_file(store)  # the file of a sqlite: URL (None: memory: is no file)
    elif isinstance(store, str | os.PathLike):
        log = _file_path(store, "store")
    elif isinstance(store, SqliteStore):
        log = store.path
    try:
        return open_vault(disclosures, log=log)
    except FileError as exc:  # NotAVaultError: a log, another database, not SQLite at all
        raise _naming(exc, "disclosures") from exc
