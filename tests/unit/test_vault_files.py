"""Opening files as logs and vaults: each kind of file is told apart, refused with a typed
error saying what it is, and left byte-identical with nothing created beside it."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentfootprint.errors import (
    FileError,
    NotALogError,
    NotAVaultError,
    StoreError,
    UsageError,
)
from agentfootprint.logformat.commitments import Disclosure, commitment_digest
from agentfootprint.store.base import same_file
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.vault import DisclosureVault, open_vault, read_disclosures
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body


def _log(path: Path) -> None:
    with SqliteStore(path) as store:
        RunWriter(store, "r").append([("run.open", open_body("r"))])


def _vault(path: Path) -> None:
    vault = DisclosureVault(path)
    vault.put("r", [_disclosure()])
    vault.close()


def _other_application(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes VALUES (1, 'keep me')")
    conn.commit()
    conn.close()


def _other_application_in_wal(path: Path) -> None:
    _other_application(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()


def _empty(path: Path) -> None:
    path.touch()


def _text(path: Path) -> None:
    path.write_text("run_id,seq\nnot,a database\n")


def _disclosure() -> Disclosure:
    salt, key, value = "00" * 16, "ssn", "123-45-6789"
    return Disclosure(
        commitment=commitment_digest(salt, key, value), salt=salt, key=key, value=value
    )


KINDS: dict[str, Callable[[Path], None]] = {
    "log": _log,
    "vault": _vault,
    "other-app": _other_application,
    "other-app-wal": _other_application_in_wal,
    "empty": _empty,
    "text": _text,
}

#: What the refusal says each kind is.
SAYS = {
    "log": "an agentfootprint log",
    "vault": "a disclosure vault",
    "other-app": "an SQLite database of another application (tables: notes)",
    "other-app-wal": "an SQLite database of another application (tables: notes)",
    "empty": "an empty file",
    "text": "not an SQLite database",
}


def _beside(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir()} - {path.name}


def _make(tmp_path: Path, kind: str) -> tuple[Path, bytes]:
    path = tmp_path / f"{kind}.db"
    KINDS[kind](path)
    assert _beside(path) == set(), "the fixture left a writer's file behind"
    return path, path.read_bytes()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_readonly_opens_leave_every_file_byte_identical(tmp_path: Path, kind: str) -> None:
    path, data = _make(tmp_path, kind)
    for opener, ok, refusal in (
        (lambda: SqliteStore(path, readonly=True), "log", NotALogError),
        (lambda: DisclosureVault(path, readonly=True), "vault", NotAVaultError),
    ):
        if kind == ok:
            handle = opener()
            assert path.read_bytes() == data and _beside(path) == set()  # while open, too
            handle.close()
        else:
            with pytest.raises(refusal) as caught:
                opener()
            assert SAYS[kind] in str(caught.value) and caught.value.path == str(path)
        assert path.read_bytes() == data
        assert _beside(path) == set(), f"{kind}: a file was created beside it"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_writing_opens_refuse_the_wrong_kind_and_leave_it_unchanged(
    tmp_path: Path, kind: str
) -> None:
    path, data = _make(tmp_path, kind)
    if kind not in ("log", "empty"):
        with pytest.raises(NotALogError) as caught:
            SqliteStore(path)
        assert SAYS[kind] in str(caught.value) and "left unchanged" in str(caught.value)
        assert path.read_bytes() == data and _beside(path) == set()
    if kind not in ("vault", "empty"):
        for create in (True, False):
            with pytest.raises(NotAVaultError) as vault_refusal:
                DisclosureVault(path, create=create)
            assert SAYS[kind] in str(vault_refusal.value)
            assert path.read_bytes() == data and _beside(path) == set()


def test_an_empty_file_becomes_a_vault_only_when_creating(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    path.touch()
    with pytest.raises(NotAVaultError, match="an empty file"):
        DisclosureVault(path, create=False)
    assert path.read_bytes() == b""
    DisclosureVault(path).close()
    with DisclosureVault(path, create=False) as vault:
        assert vault.commitments() == []


def test_a_tableless_sqlite_file_is_a_vault_only_when_creating(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")
    conn.close()
    for opener in (
        lambda: DisclosureVault(path, create=False),
        lambda: DisclosureVault(path, readonly=True),
    ):
        with pytest.raises(NotAVaultError, match="no tables"):
            opener()
    DisclosureVault(path).close()


def test_missing_vaults(tmp_path: Path) -> None:
    for opener in (
        lambda: DisclosureVault(tmp_path / "v.db", create=False),
        lambda: DisclosureVault(tmp_path / "v.db", readonly=True),
        lambda: DisclosureVault(tmp_path / "v.db", readonly=True, create=True),
    ):
        with pytest.raises(FileError, match="no such") as caught:
            opener()
        assert not isinstance(caught.value, NotAVaultError)
        assert not (tmp_path / "v.db").exists()
    with pytest.raises(FileError, match="does not exist"):
        DisclosureVault(tmp_path / "nowhere" / "v.db")
    with pytest.raises(FileError, match="folder"):
        DisclosureVault(tmp_path, readonly=True)


def test_readonly_vault_reads_and_never_writes(tmp_path: Path) -> None:
    path, data = _make(tmp_path, "vault")
    disclosure = _disclosure()
    with DisclosureVault(path, readonly=True) as vault:
        assert vault.readonly and vault.commitments() == [disclosure.commitment]
        assert vault.get(disclosure.commitment) == disclosure
        assert vault.disclose([disclosure.commitment]) == [disclosure]
        with pytest.raises(StoreError, match="read-only"):
            vault.put("r", [disclosure])
        with pytest.raises(StoreError, match="read-only"):
            vault.erase(run_id="r")
    assert path.read_bytes() == data and _beside(path) == set()


def test_vault_arguments_are_checked(tmp_path: Path) -> None:
    for kwargs, option in (({"create": "no"}, "create"), ({"readonly": 1}, "readonly")):
        with pytest.raises(UsageError) as caught:
            DisclosureVault(tmp_path / "v.db", **kwargs)  # type: ignore[arg-type]
        assert caught.value.option == option
    for path in (None, b"/tmp/v.db", "", "/tmp/v\0.db"):
        with pytest.raises(UsageError) as path_error:
            DisclosureVault(path)  # type: ignore[arg-type]
        assert path_error.value.option == "disclosures"
    assert not (tmp_path / "v.db").exists()


# -- the vault is never the log -----------------------------------------------------------


def test_same_file(tmp_path: Path) -> None:
    a = tmp_path / "a.db"
    a.touch()
    (tmp_path / "sub").mkdir()
    os.symlink(a, tmp_path / "link.db")
    os.link(a, tmp_path / "hard.db")
    assert same_file(a, a)
    assert same_file(a, tmp_path / "sub" / ".." / "a.db")
    assert same_file(a, tmp_path / "link.db")
    assert same_file(str(a), tmp_path / "hard.db")
    assert same_file(tmp_path / "new.db", tmp_path / "sub" / ".." / "new.db")  # neither exists
    assert not same_file(a, tmp_path / "new.db")
    assert not same_file(tmp_path / "x.db", tmp_path / "y.db")


def test_open_vault_refuses_the_log_itself(tmp_path: Path) -> None:
    log = tmp_path / "runs.db"
    for vault in (log, str(log), tmp_path / "sub" / ".." / "runs.db"):
        with pytest.raises(UsageError, match="is the log file itself") as caught:
            open_vault(vault, log=log)
        assert caught.value.option == "disclosures"
    assert not log.exists()  # refused before anything was opened
    _log(log)
    with pytest.raises(UsageError, match="the log file itself"):
        open_vault(str(log), log=str(log))
    vault = open_vault(tmp_path / "vault.db", log=log)
    assert isinstance(vault, DisclosureVault)
    with pytest.raises(UsageError, match="the log file itself"):
        open_vault(vault, log=vault.path)
    vault.close()
    assert open_vault(None, log=log) is None


def test_disclosures_files_of_the_wrong_shape() -> None:
    for data in (
        b"not json",
        b"[]",
        b'{"agentfootprint_disclosures": 2}',
        b'{"agentfootprint_disclosures": 1, "disclosures": 7}',
        b'{"agentfootprint_disclosures": 1, "disclosures": {"a": 1}}',
        b'{"agentfootprint_disclosures": 1, "disclosures": [1]}',
        b'{"agentfootprint_disclosures": 1, "disclosures": [{"commitment": 1}]}',
    ):
        with pytest.raises(StoreError):
            read_disclosures(data)
