"""The artifact store contract (agentfootprint.testing.artifact_contract) run against the
memory, file and SQLite stores, and what each backend shows besides: refusing what is not
an artifact store (an alien directory, a log, a vault), reading without creating or changing
anything, failing closed on crafted files, returning stored bytes as they are."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentfootprint.errors import (
    ArtifactStoreError,
    FileError,
    NewerVersionError,
    NotALogError,
    NotAnArtifactStoreError,
    UsageError,
)
from agentfootprint.logformat.canonical import canon
from agentfootprint.store.artifacts import (
    ArtifactStore,
    MemoryArtifacts,
    Retention,
    mint_ref,
    open_artifacts,
)
from agentfootprint.store.artifacts_file import MARKER, FileArtifacts
from agentfootprint.store.artifacts_sqlite import APPLICATION_ID, SCHEMA_VERSION, SqliteArtifacts
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.vault import DisclosureVault
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.artifact_contract import ArtifactStoreContract, artifact
from agentfootprint.testing.store_contract import open_body

SCOPE = "conversation-a"


class TestMemoryArtifacts(ArtifactStoreContract):
    def make(
        self, tmp_path: Path, retention: Retention | None = None, readonly: bool = False
    ) -> ArtifactStore:
        assert not readonly, "a memory store has nothing to open read-only"
        return MemoryArtifacts(retention=retention)

    def test_a_memory_store_holds_no_path(self) -> None:
        assert MemoryArtifacts().holds_path is None


class TestFileArtifacts(ArtifactStoreContract):
    persistent = True

    def make(
        self, tmp_path: Path, retention: Retention | None = None, readonly: bool = False
    ) -> ArtifactStore:
        return FileArtifacts(tmp_path / "artifacts", retention=retention, readonly=readonly)

    def reopen(
        self, tmp_path: Path, retention: Retention | None = None, readonly: bool = False
    ) -> ArtifactStore:
        return self.make(tmp_path, retention, readonly)


class TestSqliteArtifacts(ArtifactStoreContract):
    persistent = True

    def make(
        self, tmp_path: Path, retention: Retention | None = None, readonly: bool = False
    ) -> ArtifactStore:
        return SqliteArtifacts(tmp_path / "artifacts.db", retention=retention, readonly=readonly)

    def reopen(
        self, tmp_path: Path, retention: Retention | None = None, readonly: bool = False
    ) -> ArtifactStore:
        return self.make(tmp_path, retention, readonly)


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (and ``root``'s own listing) with a file's bytes."""
    if not root.exists():
        return {}
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        found[str(path.relative_to(root))] = path.read_bytes() if path.is_file() else None
    return found


def _file_store(tmp_path: Path) -> tuple[Path, str, bytes, Path]:
    """A file store holding one artifact: (root, ref, content, scope folder)."""
    root = tmp_path / "artifacts"
    head, content = artifact(b"stored bytes", scope=SCOPE)
    with FileArtifacts(root) as store:
        store.put(head, content)
    return root, head.ref, content, root / hashlib.sha256(SCOPE.encode()).hexdigest()


# -- the file store ----------------------------------------------------------------------


def test_file_store_layout(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    with FileArtifacts(root) as store:
        head, content = artifact(b"laid out", scope="tenant/../a")
        store.put(head, content)
        folder = root / hashlib.sha256(b"tenant/../a").hexdigest()
        assert (root / MARKER).read_bytes() == b'{"agentfootprint_artifacts":1}'
        assert (folder / f"{head.ref}.bin").read_bytes() == content
        members = {name: getattr(head, name) for name in head.__slots__}
        assert (folder / f"{head.ref}.head.json").read_bytes() == canon({**members, "seq": 0})
        store.remove("tenant/../a", head.ref, reason="erased", at=5, note="asked")
        assert sorted(p.name for p in folder.iterdir()) == [f"{head.ref}.tomb.json"]
        assert store.holds_path == os.path.abspath(root)


def test_file_store_refuses_an_alien_directory_and_leaves_it(tmp_path: Path) -> None:
    alien = tmp_path / "photos"
    alien.mkdir()
    (alien / "holiday.jpg").write_bytes(b"\xff\xd8")
    before = _tree(alien)
    for readonly in (False, True):
        with pytest.raises(NotAnArtifactStoreError, match="not an agentfootprint") as e:
            FileArtifacts(alien, readonly=readonly)
        assert "artifact store" in str(e.value) and e.value.path == str(alien)
    with pytest.raises(NotAnArtifactStoreError, match="new or empty directory"):
        open_artifacts(alien)
    assert _tree(alien) == before


def test_file_store_refuses_a_file_an_empty_directory_read_only_and_odd_markers(
    tmp_path: Path,
) -> None:
    a_file = tmp_path / "plain.txt"
    a_file.write_text("hello")
    with pytest.raises(NotAnArtifactStoreError, match="not a directory"):
        FileArtifacts(a_file)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotAnArtifactStoreError, match="empty directory"):
        FileArtifacts(empty, readonly=True)
    assert list(empty.iterdir()) == []
    for marker in (b"[]", b'{"agentfootprint_artifacts":"1"}', b"not json", b'{"x":1}', b"{}"):
        folder = tmp_path / f"odd-{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / MARKER).write_bytes(marker)
        with pytest.raises(NotAnArtifactStoreError, match="not an artifact store marker"):
            FileArtifacts(folder)


def test_file_store_of_a_newer_layout_is_refused(tmp_path: Path) -> None:
    root, _, _, _ = _file_store(tmp_path)
    (root / MARKER).write_bytes(b'{"agentfootprint_artifacts":2}')
    for readonly in (False, True):
        with pytest.raises(NewerVersionError, match="upgrade agentfootprint"):
            FileArtifacts(root, readonly=readonly)


def test_readonly_open_of_a_missing_path_creates_nothing(tmp_path: Path) -> None:
    for name in ("missing", "missing/", "missing.db"):
        with pytest.raises(FileError, match="missing") as caught:
            open_artifacts(str(tmp_path) + "/" + name, readonly=True)
        assert not isinstance(caught.value, NotAnArtifactStoreError)
    with pytest.raises(FileError, match="no such artifact store"):
        FileArtifacts(tmp_path / "missing", readonly=True)
    with pytest.raises(FileError, match="no such file"):
        SqliteArtifacts(tmp_path / "missing.db", readonly=True)
    assert list(tmp_path.iterdir()) == []


def test_a_readonly_file_store_changes_nothing(tmp_path: Path) -> None:
    root, ref, content, folder = _file_store(tmp_path)
    with FileArtifacts(root) as store:
        store.remove(SCOPE, ref, reason="erased", at=1)
        store.put(*artifact(b"live", scope=SCOPE))
    # leftovers of an interrupted removal, which a writable sweep would delete
    (folder / f"{ref}.bin").write_bytes(content)
    before = _tree(root)
    with FileArtifacts(root, readonly=True) as readonly:
        assert len(readonly.list(SCOPE)) == 1
        assert readonly.read(SCOPE, ref) is None
        assert readonly.tombstone(SCOPE, ref) is not None
        assert readonly.list("other scope") == []
    assert _tree(root) == before


@pytest.mark.parametrize(
    "change",
    [
        "size as text",
        "size as bool",
        "size as float",
        "expires_at as text",
        "extra member",
        "missing member",
        "wrong ref",
        "wrong scope",
        "not JSON",
        "not an object",
        "not canonical",
        "bad digest",
        "bad kind",
        "too large",
    ],
)
def test_a_crafted_head_file_is_refused_naming_it(tmp_path: Path, change: str) -> None:
    root, ref, _, folder = _file_store(tmp_path)
    path = folder / f"{ref}.head.json"
    members = orjson_loads(path.read_bytes())
    crafted: object = members
    if change == "size as text":
        members["size"] = str(members["size"])
    elif change == "size as bool":
        members["size"] = True
    elif change == "size as float":
        members["size"] = 12.5
    elif change == "expires_at as text":
        members["expires_at"] = "never"
    elif change == "extra member":
        members["__class__"] = "os.system"
    elif change == "missing member":
        del members["kind"]
    elif change == "wrong ref":
        members["ref"] = mint_ref()
    elif change == "wrong scope":
        members["scope"] = "conversation-b"
    elif change == "not an object":
        crafted = [members]
    elif change == "bad digest":
        members["digest"] = "Z" * 64
    elif change == "bad kind":
        members["kind"] = "Tool Result"
    data = canon(crafted) if change not in ("not JSON", "not canonical", "too large") else b""
    if change == "not JSON":
        data = b"{'size': 3"
    elif change == "not canonical":
        data = canon(members).replace(b",", b", ")
    elif change == "too large":
        members["media_type"] = "x" * 70_000
        data = canon(members)
    path.write_bytes(data)
    with FileArtifacts(root) as store:
        for read in (store.head, store.read, lambda s, r: store.list(s)):
            with pytest.raises(ArtifactStoreError, match=f"{ref}.head.json") as caught:
                read(SCOPE, ref)
            assert not isinstance(caught.value.__cause__, KeyError | TypeError)


@pytest.mark.parametrize(
    "change", ["reason unknown", "at as text", "extra member", "wrong ref", "note as number"]
)
def test_a_crafted_tombstone_file_is_refused_naming_it(tmp_path: Path, change: str) -> None:
    root, ref, _, folder = _file_store(tmp_path)
    with FileArtifacts(root) as store:
        store.remove(SCOPE, ref, reason="erased", at=3, note="asked")
    path = folder / f"{ref}.tomb.json"
    members = orjson_loads(path.read_bytes())
    if change == "reason unknown":
        members["reason"] = "deleted"
    elif change == "at as text":
        members["at"] = "3"
    elif change == "extra member":
        members["by"] = "someone"
    elif change == "wrong ref":
        members["ref"] = mint_ref()
    elif change == "note as number":
        members["note"] = 7
    path.write_bytes(canon(members))
    with FileArtifacts(root) as store:
        for read in (store.tombstone, store.head, store.read):
            with pytest.raises(ArtifactStoreError, match=f"{ref}.tomb.json"):
                read(SCOPE, ref)


def test_a_flipped_byte_in_a_bin_file_is_read_as_stored(tmp_path: Path) -> None:
    root, ref, content, folder = _file_store(tmp_path)
    flipped = bytes([content[0] ^ 0x01]) + content[1:]
    (folder / f"{ref}.bin").write_bytes(flipped)
    with FileArtifacts(root, readonly=True) as store:
        assert store.read(SCOPE, ref) == flipped != content
        head = store.head(SCOPE, ref)
        assert head is not None and head.size == len(content)


def test_a_missing_bin_file_reads_as_none_beside_its_head(tmp_path: Path) -> None:
    root, ref, _, folder = _file_store(tmp_path)
    (folder / f"{ref}.bin").unlink()
    with FileArtifacts(root, readonly=True) as store:
        assert store.head(SCOPE, ref) is not None
        assert store.read(SCOPE, ref) is None and store.tombstone(SCOPE, ref) is None


@pytest.mark.parametrize("which", [".bin", ".head.json", ".tomb.json", "scope folder"])
def test_a_symbolic_link_inside_the_store_is_refused(tmp_path: Path, which: str) -> None:
    root, ref, _, folder = _file_store(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    if which == "scope folder":
        shutil.move(folder, outside / "moved")
        folder.symlink_to(outside / "moved", target_is_directory=True)
    else:
        if which == ".tomb.json":
            with FileArtifacts(root) as store:
                store.put(*artifact(b"x", scope=SCOPE, ref=(ref := mint_ref())))
                store.remove(SCOPE, ref, reason="erased", at=1)
        target = folder / f"{ref}{which}"
        shutil.move(target, outside / target.name)
        target.symlink_to(outside / target.name)
    with FileArtifacts(root) as store:
        by_file: dict[str, list[Callable[[str, str], object]]] = {
            ".bin": [store.read],
            ".head.json": [store.head, store.read, lambda s, r: store.list(s)],
            ".tomb.json": [store.tombstone, store.head, store.read],
            "scope folder": [
                store.head,
                store.read,
                store.tombstone,
                lambda s, r: store.list(s),
                lambda s, r: store.put(*artifact(b"new", scope=s)),
            ],
        }
        for read in by_file[which]:
            with pytest.raises(ArtifactStoreError, match="symbolic link"):
                read(SCOPE, ref)
    assert (outside / ("moved" if which == "scope folder" else f"{ref}{which}")).exists()


def test_what_an_interrupted_write_leaves_is_never_visible(tmp_path: Path) -> None:
    root, ref, content, folder = _file_store(tmp_path)
    # a put interrupted before its head: the content alone, and a temporary file
    orphan, orphan_content = artifact(b"orphan", scope=SCOPE)
    (folder / f"{orphan.ref}.bin").write_bytes(orphan_content)
    (folder / f".{orphan.ref}.head.json.0123456789abcdef.tmp").write_bytes(b"{")
    # a removal interrupted after its tombstone: head and content still there
    with FileArtifacts(root) as store:
        tomb = store.remove(SCOPE, ref, reason="erased", at=2)
    (folder / f"{ref}.bin").write_bytes(content)
    head_bytes = canon({"stale": True})
    (folder / f"{ref}.head.json").write_bytes(head_bytes)
    with FileArtifacts(root) as store:
        assert store.list(SCOPE) == []
        assert store.head(SCOPE, orphan.ref) is None and store.read(SCOPE, ref) is None
        assert store.tombstone(SCOPE, ref) == tomb
        assert store.sweep(SCOPE, 0) == []  # a writable sweep clears the removal's leftovers
        assert not (folder / f"{ref}.bin").exists()
        assert not (folder / f"{ref}.head.json").exists()
        store.put(orphan, orphan_content)  # the orphan's ref was never stored
        assert store.read(SCOPE, orphan.ref) == orphan_content


# -- the SQLite store --------------------------------------------------------------------


def _a_log(path: Path) -> None:
    store = SqliteStore(path)
    try:
        writer = RunWriter(store, "run-1")
        writer.append([("run.open", open_body("run-1"))])
        writer.flush()
    finally:
        store.close()


def test_sqlite_store_refuses_a_log_and_leaves_it(tmp_path: Path) -> None:
    log = tmp_path / "agent.db"
    _a_log(log)
    before = log.read_bytes()
    openers: list[Callable[[], object]] = [
        lambda: SqliteArtifacts(log),
        lambda: SqliteArtifacts(log, readonly=True),
        lambda: open_artifacts(log),
        lambda: open_artifacts(str(log), readonly=True),
    ]
    for opener in openers:
        with pytest.raises(NotAnArtifactStoreError, match="an agentfootprint log") as caught:
            opener()
        assert "never the log file" in str(caught.value) and caught.value.path == str(log)
    assert log.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db"]


def test_sqlite_store_refuses_a_vault_and_other_databases(tmp_path: Path) -> None:
    vault = tmp_path / "vault.db"
    DisclosureVault(vault).close()
    with pytest.raises(NotAnArtifactStoreError, match="a disclosure vault"):
        SqliteArtifacts(vault)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (x)")
    with pytest.raises(NotAnArtifactStoreError, match="another application"):
        SqliteArtifacts(other)
    tagged = tmp_path / "tagged.db"
    with sqlite3.connect(tagged) as conn:
        conn.execute("PRAGMA application_id=1234")
        conn.execute("CREATE TABLE artifacts (x)")
    with pytest.raises(NotAnArtifactStoreError, match="application_id 1234"):
        SqliteArtifacts(tagged, readonly=True)
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all")
    with pytest.raises(NotAnArtifactStoreError, match="not an SQLite database"):
        SqliteArtifacts(text)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(NotAnArtifactStoreError, match="empty file"):
        SqliteArtifacts(empty, readonly=True)
    with SqliteArtifacts(empty) as store:  # an empty file becomes a store when writing
        store.put(*artifact(b"x"))


def test_sqlite_store_says_what_it_is_in_its_header(tmp_path: Path) -> None:
    path = tmp_path / "artifacts.db"
    SqliteArtifacts(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("SELECT version, name FROM migrations").fetchall() == [
            (1, "artifacts and tombstones")
        ]
    finally:
        conn.close()
    with pytest.raises(NotALogError, match="an SQLite database of another"):
        SqliteStore(path)  # and the log refuses it in turn


def test_sqlite_store_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "artifacts.db"
    SqliteArtifacts(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    for readonly in (True, False):
        with pytest.raises(NewerVersionError, match="upgrade agentfootprint"):
            SqliteArtifacts(path, readonly=readonly)
    assert path.read_bytes() == before


def test_a_readonly_sqlite_store_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "artifacts.db"
    with SqliteArtifacts(path) as store:
        head, content = artifact(b"kept", scope=SCOPE)
        store.put(head, content)
    before = path.read_bytes()
    with SqliteArtifacts(path, readonly=True) as readonly:
        assert readonly.read(SCOPE, head.ref) == content
        assert readonly.list(SCOPE) == [head]
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifacts.db"]


def test_a_flipped_byte_in_a_blob_is_read_as_stored(tmp_path: Path) -> None:
    path = tmp_path / "artifacts.db"
    head, content = artifact(b"stored bytes", scope=SCOPE)
    with SqliteArtifacts(path) as store:
        store.put(head, content)
    flipped = bytes([content[0] ^ 0x01]) + content[1:]
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE artifacts SET content = ? WHERE ref = ?", (flipped, head.ref))
    conn.close()
    with SqliteArtifacts(path, readonly=True) as store:
        assert store.read(SCOPE, head.ref) == flipped != content
        assert store.head(SCOPE, head.ref) == head


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("artifacts", "size", "twelve"),
        ("artifacts", "digest", "0" * 63),
        ("artifacts", "ref", "art_forged"),
        ("artifacts", "content", "text, not a blob"),
        ("tombstones", "reason", "deleted"),
        ("tombstones", "at", 1.5),
        ("tombstones", "size", None),
    ],
)
def test_a_crafted_sqlite_row_is_refused(
    tmp_path: Path, table: str, column: str, value: object
) -> None:
    path = tmp_path / "artifacts.db"
    head, content = artifact(b"stored bytes", scope=SCOPE)
    with SqliteArtifacts(path) as store:
        store.put(head, content)
        if table == "tombstones":
            store.remove(SCOPE, head.ref, reason="erased", at=2)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("PRAGMA ignore_check_constraints=ON")
        if value is None:  # NOT NULL cannot be crafted away by UPDATE: rebuild the table
            conn.execute("CREATE TABLE t2 AS SELECT * FROM tombstones")
            conn.execute("DROP TABLE tombstones")
            conn.execute("ALTER TABLE t2 RENAME TO tombstones")
        conn.execute(f"UPDATE {table} SET {column} = ?", (value,))
    conn.close()
    with SqliteArtifacts(path, readonly=True) as store:
        read: Callable[[str, str], object] = store.read if column == "content" else store.head
        if table == "tombstones":
            read = store.tombstone
        if column == "ref":  # no longer found by its ref: listing the scope finds it
            assert store.head(SCOPE, head.ref) is None
        else:
            with pytest.raises(ArtifactStoreError, match="damaged"):
                read(SCOPE, head.ref)
        if table == "artifacts" and column != "content":
            with pytest.raises(ArtifactStoreError, match="damaged"):
                store.list(SCOPE)


def test_removed_content_is_overwritten_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "artifacts.db"
    needle = b"needle-0f3a9c-" * 300
    with SqliteArtifacts(path) as store:
        head, content = artifact(needle, scope=SCOPE)
        kept, kept_content = artifact(b"still-here-77e1", scope=SCOPE)
        store.put(head, content)
        store.put(kept, kept_content)
        assert b"needle-0f3a9c-" in path.read_bytes(), "the probe finds nothing: proves nothing"
        store.remove(SCOPE, head.ref, reason="erased", at=9)
    files = [path, *tmp_path.glob("artifacts.db-*")]
    assert not any(b"needle-0f3a9c-" in f.read_bytes() for f in files)
    assert b"still-here-77e1" in path.read_bytes()


# -- opening -----------------------------------------------------------------------------


def test_open_artifacts_picks_the_backend(tmp_path: Path) -> None:
    made = {
        "dir-store": FileArtifacts,
        "dir-slash/": FileArtifacts,
        "store.db": SqliteArtifacts,
    }
    for name, kind in made.items():
        location = str(tmp_path / name) + ("/" if name.endswith("/") else "")
        with open_artifacts(location) as store:
            assert type(store) is kind
        with open_artifacts(location, readonly=True) as again:  # an existing one, by its kind
            assert type(again) is kind and again.readonly
    assert (tmp_path / "dir-store").is_dir() and (tmp_path / "store.db").is_file()
    memory = MemoryArtifacts(retention=Retention(max_count=3))
    assert open_artifacts(memory) is memory
    assert open_artifacts(memory, retention=Retention(max_count=3)) is memory
    with pytest.raises(UsageError, match="retention"):
        open_artifacts(memory, retention=Retention(max_count=4))
    for bad in (7, None, "", "a\0b", b"bytes"):
        with pytest.raises(UsageError):
            open_artifacts(bad)  # type: ignore[arg-type]
    with pytest.raises(FileError, match="does not exist"):
        open_artifacts(tmp_path / "no" / "parent")


def orjson_loads(data: bytes) -> dict[str, object]:
    import orjson

    value = orjson.loads(data)
    assert isinstance(value, dict)
    return value
