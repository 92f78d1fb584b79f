"""SQLite specifics beyond the shared contract: schema versions, triggers, error translation."""

from __future__ import annotations

import hashlib
import math
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

import agentfootprint as af
from agentfootprint.errors import (
    AppendOnlyError,
    FileError,
    NewerVersionError,
    NotALogError,
    NotAVaultError,
    RunNotFoundError,
    StoreBusyError,
    StoreConflictError,
    StoreError,
    UsageError,
    VerificationError,
)
from agentfootprint.store import sqlite_layout
from agentfootprint.store.base import StoredEvent
from agentfootprint.store.sqlite import (
    MIGRATIONS,
    SCHEMA_V2,
    SCHEMA_VERSION,
    SQLITE_HEADER,
    SqliteStore,
    atomic,
    translate_errors,
)
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.verifier import Outcome, Verifier

#: these tests edit or read the schema-1 ``events`` table directly (docs/log-format.md
#: appendix B): every new file of this module is created with storage schema 1
#: (tests/conftest.py); tests/unit/test_sqlite_store_layouts.py covers both schemas
NEW_FILE_SCHEMA = 1


def test_migrations_are_recorded_once(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    SqliteStore(db).close()
    store = SqliteStore(db)  # opening again applies nothing new
    rows = store.db.execute("SELECT version, name FROM schema_version").fetchall()
    applied = MIGRATIONS if NEW_FILE_SCHEMA == 1 else (SCHEMA_V2,)
    assert rows == [(version, name) for version, name, _ in applied]
    assert store.schema_version() == NEW_FILE_SCHEMA
    mode = store.db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    store.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    SqliteStore(db).close()
    conn = sqlite3.connect(db)
    conn.execute(
        "INSERT INTO schema_version VALUES (?, 'from the future', 0)", (SCHEMA_VERSION + 1,)
    )
    conn.commit()
    conn.close()
    with pytest.raises(NewerVersionError, match="newer than this library"):
        SqliteStore(db)


def test_log_rows_cannot_be_changed_or_deleted(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    RunWriter(store, "r").append([("run.open", open_body("r"))])
    store.close()
    conn = sqlite3.connect(db)
    for statement in (
        "UPDATE events SET ts = 0",
        "DELETE FROM events",
        "UPDATE runs SET opened_at = 0",
        "DELETE FROM runs",
    ):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(statement)
    with pytest.raises(AppendOnlyError), translate_errors("test"):
        conn.execute("DELETE FROM events")
    conn.close()


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (sqlite3.IntegrityError("UNIQUE constraint failed: events.run_id"), StoreConflictError),
        (sqlite3.OperationalError("database is locked"), StoreBusyError),
        (sqlite3.DatabaseError("agentfootprint log is append-only"), AppendOnlyError),
        (sqlite3.OperationalError("disk I/O error"), StoreError),
    ],
)
def test_driver_errors_are_translated_in_one_place(
    error: sqlite3.Error, kind: type[StoreError]
) -> None:
    with pytest.raises(kind) as caught, translate_errors("doing X"):
        raise error
    assert "doing X" in str(caught.value) and caught.value.__cause__ is error


def test_a_failed_append_keeps_nothing(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    writer = RunWriter(store, "r")
    writer.append([("run.open", open_body("r"))])
    other = RunWriter(store, "r")
    other.seq, other.head = writer.seq, writer.head
    other.append([("commit", {"commit": 0, "stage": "s", "stage_run": "s#1", "writes": 0})])
    with pytest.raises(StoreConflictError):  # the writer's position was taken meanwhile
        writer.append(
            [
                ("write", {"commit": 0, "path": "x", "verb": "set", "value": 1}),
                ("commit", {"commit": 0, "stage": "s", "stage_run": "s#1", "writes": 1}),
            ]
        )
    assert [e.type for e in store.read("r")] == ["run.open", "commit"]
    assert writer.seq == 1  # the writer did not advance either
    store.close()


@pytest.mark.parametrize("value", ["OFF", "NORMAL", "FULL", 1, None, b"full"])
def test_durability_setting_is_checked(tmp_path: Path, value: object) -> None:
    with pytest.raises(UsageError, match="durability") as caught:
        SqliteStore(tmp_path / "s.db", durability=value)  # type: ignore[arg-type]
    assert caught.value.option == "durability"
    assert not (tmp_path / "s.db").exists()  # refused before anything is created


@pytest.mark.parametrize(("durability", "pragma"), [("full", 2), ("normal", 1), (None, 2)])
def test_durability_sets_sqlite_synchronous(
    tmp_path: Path, durability: str | None, pragma: int
) -> None:
    kwargs = {} if durability is None else {"durability": durability}
    store = SqliteStore(tmp_path / "d.db", **kwargs)
    try:
        # 2 is FULL (the default: an audit log survives power loss), 1 NORMAL
        assert store._conn.execute("PRAGMA synchronous").fetchone() == (pragma,)
        assert store.durability == (durability or "full")
    finally:
        store.close()


@pytest.mark.parametrize("value", ["30", 0, -1, 0.0, math.nan, math.inf, True, None, [1]])
def test_timeout_is_checked(tmp_path: Path, value: object) -> None:
    with pytest.raises(UsageError, match="timeout") as caught:
        SqliteStore(tmp_path / "s.db", timeout=value)  # type: ignore[arg-type]
    assert caught.value.option == "timeout"
    SqliteStore(tmp_path / "t.db", timeout=1).close()
    SqliteStore(tmp_path / "t.db", timeout=0.5, readonly=True).close()


@pytest.mark.parametrize(("kwargs", "option"), [({"readonly": "yes"}, "readonly")])
def test_other_arguments_are_checked(
    tmp_path: Path, kwargs: dict[str, object], option: str
) -> None:
    with pytest.raises(UsageError) as caught:
        SqliteStore(tmp_path / "s.db", **kwargs)  # type: ignore[arg-type]
    assert caught.value.option == option
    for path in (3, b"/tmp/x.db", "", "/tmp/a\0b.db"):
        with pytest.raises(UsageError) as caught:
            SqliteStore(path, readonly=True)  # type: ignore[arg-type]
        assert caught.value.option == "path"
        with pytest.raises(UsageError):
            SqliteStore(path)  # type: ignore[arg-type]


# -- what a file is, when opened for writing ------------------------------------------------


def _siblings(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir() if p != path}


def _other_application(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("CREATE TABLE orders (id INTEGER, customer INTEGER)")
    conn.execute("INSERT INTO customers VALUES (1, 'Ada')")
    conn.commit()
    conn.close()


def _vault(path: Path) -> None:
    from agentfootprint.store.vault import DisclosureVault

    DisclosureVault(path).close()


def _log(path: Path) -> str:
    store = SqliteStore(path)
    RunWriter(store, "r").append([("run.open", open_body("r"))])
    store.close()
    return "r"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_other_application, "another application (tables: customers, orders)"),
        (_vault, "a disclosure vault"),
        (lambda p: p.write_text("hello, I am notes\n"), "not an SQLite database"),
        (lambda p: p.write_bytes(SQLITE_HEADER + b"\x00" * 84), "not an SQLite database"),
    ],
    ids=["other-app", "vault", "text", "bad-header"],
)
def test_a_file_that_is_not_a_log_is_refused_and_left_unchanged(
    tmp_path: Path, make: Callable[[Path], object], says: str
) -> None:
    path = tmp_path / "x.db"
    make(path)
    data, beside = path.read_bytes(), _siblings(path)
    for readonly in (False, True):
        with pytest.raises(NotALogError, match=re.escape(says)) as caught:
            SqliteStore(path, readonly=readonly)
        assert caught.value.path == str(path)
        assert path.read_bytes() == data and _siblings(path) == beside


def test_new_empty_and_tableless_files_become_logs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    tableless = tmp_path / "tableless.db"
    conn = sqlite3.connect(tableless)
    conn.execute("PRAGMA user_version = 0")
    conn.execute("VACUUM")  # writes the header: an SQLite database with no tables
    conn.close()
    assert tableless.stat().st_size > 0
    for path in (tmp_path / "new.db", empty, tableless):
        SqliteStore(path).close()
        with SqliteStore(path, readonly=True) as store:
            assert store.schema_version() == NEW_FILE_SCHEMA and store.run_ids() == []


def test_missing_folder_and_folders_are_file_errors(tmp_path: Path) -> None:
    with pytest.raises(FileError, match="does not exist") as caught:
        SqliteStore(tmp_path / "nowhere" / "s.db")
    assert caught.value.path == str(tmp_path / "nowhere" / "s.db")
    assert not (tmp_path / "nowhere").exists()
    for readonly in (False, True):
        with pytest.raises(FileError, match="folder"):
            SqliteStore(tmp_path, readonly=readonly)


# -- read-only ---------------------------------------------------------------------------


def test_readonly_reads_a_log_and_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    run_id = _log(path)
    data = path.read_bytes()
    with SqliteStore(path, readonly=True) as store:
        assert store.readonly and store.run_ids() == [run_id]
        assert [e.type for e in store.read(run_id)] == ["run.open"]
        assert Verifier(store).verify(run_id).outcome is Outcome.UNSEALED
        assert _siblings(path) == set()  # immutable: no -wal, no -shm
        with pytest.raises(StoreError, match="read-only"):
            RunWriter(store, "other").append([("run.open", open_body("other"))])
        with pytest.raises(StoreError, match="read-only"):
            store.append_runs([])
    assert path.read_bytes() == data and _siblings(path) == set()


def test_readonly_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(FileError, match="no such file") as caught:
        SqliteStore(tmp_path / "missing.db", readonly=True)
    assert not isinstance(caught.value, NotALogError)
    assert not (tmp_path / "missing.db").exists()
    (tmp_path / "empty.db").touch()
    with pytest.raises(NotALogError, match="an empty file"):
        SqliteStore(tmp_path / "empty.db", readonly=True)
    assert (tmp_path / "empty.db").read_bytes() == b""
    assert _siblings(tmp_path / "empty.db") == set()


def test_readonly_sees_a_live_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    writer_store = SqliteStore(path)
    writer = RunWriter(writer_store, "live")
    writer.append([("run.open", open_body("live"))])
    assert (tmp_path / "s.db-wal").exists()  # the writer holds the log
    with SqliteStore(path, readonly=True) as reader:
        assert [e.seq for e in reader.read("live")] == [0]
        writer.append([("commit", {"commit": 0, "stage": "s", "stage_run": "s#0", "writes": 0})])
        assert [e.seq for e in reader.read("live")] == [0, 1]  # committed frames are seen
    writer_store.close()


@pytest.mark.parametrize(
    ("junk", "shown"),
    [
        (["'abc'"], "'abc', not a migration number"),
        (["1", "x'00ff'"], "b'\\x00\\xff', not a migration number"),
        (["1.5"], "1.5, not a migration number"),
        (["0"], "0, not a migration number"),
        ([], "no version"),
    ],
    ids=["text", "blob", "real", "zero", "empty"],
)
def test_junk_schema_version_is_not_a_log(tmp_path: Path, junk: list[str], shown: str) -> None:
    path = tmp_path / "s.db"
    _log(path)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE schema_version")  # a crafted file: no INTEGER PRIMARY KEY
    conn.execute("CREATE TABLE schema_version (version, name, applied_at)")
    for value in junk:
        conn.execute(f"INSERT INTO schema_version VALUES ({value}, 'junk', 0)")
    conn.commit()
    conn.close()
    data = path.read_bytes()
    for readonly in (True, False):
        with pytest.raises(NotALogError, match="schema_version table holds " + re.escape(shown)):
            SqliteStore(path, readonly=readonly)
    assert path.read_bytes() == data and _siblings(path) == set()


def test_newer_schema_is_refused_read_only_too_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _log(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (?, 'future', 0)", (SCHEMA_VERSION + 7,))
    conn.commit()
    conn.close()
    data = path.read_bytes()
    for readonly in (True, False):
        with pytest.raises(NewerVersionError) as caught:
            SqliteStore(path, readonly=readonly)
        assert f"schema version {SCHEMA_VERSION + 7}" in str(caught.value)
        assert f"this library's {SCHEMA_VERSION}" in str(caught.value)
    assert path.read_bytes() == data and _siblings(path) == set()


def test_a_log_lacking_a_column_is_another_application(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE events (run_id TEXT, seq INTEGER)")
    conn.execute("CREATE TABLE runs (run_id TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(NotALogError, match="another application"):
        SqliteStore(path, readonly=True)


def test_a_damaged_database_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _log(path)
    data = bytearray(path.read_bytes())
    data[100:] = b"\xa5" * (len(data) - 100)  # everything after the file header
    path.write_bytes(bytes(data))
    for readonly in (True, False):
        with pytest.raises((NotALogError, StoreError)):
            SqliteStore(path, readonly=readonly).run_ids()
    assert path.read_bytes() == bytes(data)


def test_rows_are_read_as_stored(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    run_id = _log(path)
    conn = sqlite3.connect(path)
    row = conn.execute("SELECT * FROM events").fetchone()
    conn.execute(
        "INSERT INTO events VALUES (?, 1, 'commit', ?, ?, ?, ?)",
        (run_id, row[3], '{"commit":0}', row[5].hex(), row[6]),
    )
    conn.commit()
    conn.close()
    with SqliteStore(path, readonly=True) as store:
        first, second = store.read(run_id)
        assert type(first.body) is bytes and type(first.event_hash) is bytes
        assert second.body == '{"commit":0}' and type(second.event_hash) is str
        with pytest.raises(VerificationError) as caught:
            Verifier(store).verify(run_id)
        assert caught.value.code == "rows" and caught.value.seq == 1


def test_a_run_without_its_index_row_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at INT);"
        "INSERT INTO schema_version VALUES (1, 'x', 0);"
        "CREATE TABLE events (run_id, seq, type, ts, body, event_hash, chain_hash);"
        "CREATE TABLE runs (run_id, conversation_id, parent_run_id, opened_at);"
        "INSERT INTO events VALUES ('r', 0, 'run.open', 1, x'7b7d', x'00', x'00');"
        "INSERT INTO runs VALUES ('q', 'q', NULL, 'soon');"
    )
    conn.close()
    with SqliteStore(path, readonly=True) as store:
        assert store.run_ids() == ["r"] and [e.seq for e in store.read("r")] == [0]
        assert store.index_entries()[0].opened_at == "soon"  # as stored
        with pytest.raises(RunNotFoundError):
            store.run_info("r")  # the index knows no run r
        with pytest.raises(RunNotFoundError):
            list(store.read("q"))  # nor do the events know run q


def test_an_index_row_of_the_wrong_type_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _log(path)
    conn = sqlite3.connect(path)
    row = conn.execute("SELECT * FROM events").fetchone()
    conn.execute("INSERT INTO events VALUES ('t', 0, 'run.open', 1, ?, ?, 'head')", row[4:6])
    conn.execute("INSERT INTO runs VALUES ('t', 't', NULL, 'yesterday')")
    conn.commit()
    conn.close()
    with SqliteStore(path, readonly=True) as store:
        with pytest.raises(StoreError, match="run t holds values of the wrong type"):
            store.runs()
        with pytest.raises(StoreError, match="wrong type"):
            store.run_info("t")


# -- driver errors and transactions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (sqlite3.DatabaseError("file is not a database"), NotALogError),
        (sqlite3.OperationalError("unable to open database file"), FileError),
        (sqlite3.OperationalError("attempt to write a readonly database"), FileError),
        (sqlite3.OperationalError("database or disk is full"), FileError),
    ],
)
def test_file_errors_are_translated_in_one_place(
    error: sqlite3.Error, kind: type[FileError]
) -> None:
    with pytest.raises(kind) as caught, translate_errors("doing X", path="/p/x.db"):
        raise error
    assert type(caught.value) is kind and caught.value.path == "/p/x.db"
    assert "doing X" in str(caught.value) and caught.value.__cause__ is error


def test_translation_names_the_kind_of_file_wanted() -> None:
    with pytest.raises(NotAVaultError), translate_errors("x", wrong_kind=NotAVaultError):
        raise sqlite3.DatabaseError("file is not a database")


def test_atomic_lets_the_first_error_surface(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")

    class First(Exception):
        pass

    with pytest.raises(First), atomic(conn):  # the error already ended the transaction
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("ROLLBACK")
        raise First
    assert not conn.in_transaction
    assert conn.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)
    conn.close()


def test_atomic_rolls_back_a_failed_commit(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE p (id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE c (p INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(sqlite3.IntegrityError), atomic(conn):
        conn.execute("INSERT INTO c VALUES (7)")  # fails only at COMMIT
    assert not conn.in_transaction
    assert conn.execute("SELECT COUNT(*) FROM c").fetchone() == (0,)
    conn.close()


_RACE = """
import sys
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body
store = SqliteStore(sys.argv[1])
RunWriter(store, sys.argv[2]).append([("run.open", open_body(sys.argv[2]))])
store.close()
"""


def test_writers_racing_to_create_one_file(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    procs = [
        subprocess.Popen([sys.executable, "-c", _RACE, str(path), f"r{i}"], stderr=subprocess.PIPE)
        for i in range(4)
    ]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 4, errors
    with SqliteStore(path, readonly=True) as store:
        assert sorted(store.run_ids()) == ["r0", "r1", "r2", "r3"]
        # the processes create the file with the library's own default, not this module's
        assert store.schema_version() == sqlite_layout.NEW_FILE_SCHEMA


def test_agent_records_into_an_existing_file_across_processes_of_time(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = af.Agent(provider=af.MockProvider(["one"]), model="m", store=db).run_sync("a")
    agent = af.Agent(provider=af.MockProvider(["two"]), model="m", store=str(db))
    second = agent.run_sync("b", continue_from=first.run_id)
    assert [i.run_id for i in agent.store.runs()] == [first.run_id, second.run_id]


# -- import is all-or-nothing ----------------------------------------------------------------


def _rows(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    conn = sqlite3.connect(path)
    try:
        events = conn.execute("SELECT * FROM events ORDER BY rowid").fetchall()
        runs = conn.execute("SELECT * FROM runs ORDER BY rowid").fetchall()
    finally:
        conn.close()
    return events, runs


def _record(store: object, answer: str, run_id: str | None = None, **kwargs: object) -> str:
    ports = af.Ports() if run_id is None else af.Ports(run_ids=lambda: run_id)
    agent = af.Agent(provider=af.MockProvider([answer]), model="m", store=store, ports=ports)
    return agent.run_sync("q", **kwargs).run_id  # type: ignore[arg-type]


def _reordered(bundle: Path, order: list[str]) -> None:
    """Rewrite a bundle with its runs (manifest entries and rows) in ``order``; the trailer
    digest is recomputed, so only the order differs."""
    lines = bundle.read_bytes().split(b"\n")[:-1]
    manifest, rows, trailer = orjson.loads(lines[0]), lines[1:-1], orjson.loads(lines[-1])
    manifest["runs"].sort(key=lambda entry: order.index(entry["run_id"]))
    rows.sort(key=lambda line: order.index(orjson.loads(line)["run"]))
    body = orjson.dumps(manifest) + b"\n" + b"".join(line + b"\n" for line in rows)
    trailer["sha256"] = hashlib.sha256(body).hexdigest()
    bundle.write_bytes(body + orjson.dumps(trailer) + b"\n")


@pytest.fixture
def held(tmp_path: Path) -> tuple[Path, str]:
    """A database holding one closed run."""
    db = tmp_path / "held.db"
    with SqliteStore(db) as store:
        return db, _record(store, "the real answer")


def _assert_unchanged(db: Path, before: object) -> None:
    assert _rows(db) == before
    with SqliteStore(db, readonly=True) as store:
        verifier = Verifier(store)
        for run_id in store.run_ids():
            assert verifier.verify(run_id).outcome is Outcome.VALID_UNSIGNED


@pytest.mark.parametrize("child_first", [True, False], ids=["child-first", "parent-first"])
def test_import_of_a_forged_run_and_its_child_keeps_nothing(
    tmp_path: Path, held: tuple[Path, str], child_first: bool
) -> None:
    db, real = held
    with SqliteStore(tmp_path / "forge.db") as forge:
        forged = _record(forge, "a forged answer", run_id=real)
        child = _record(forge, "the child", continue_from=forged)
        assert Verifier(forge).verify(child).outcome is Outcome.VALID_UNSIGNED
        bundle = tmp_path / "forged.afb"
        af.export_runs(forge, [child], bundle)
    if child_first:
        _reordered(bundle, [child, real])
    before = _rows(db)
    with SqliteStore(db) as store, pytest.raises((StoreConflictError, VerificationError)):
        af.import_bundle(BundleSource(bundle), store)
    _assert_unchanged(db, before)


def test_import_refused_at_a_later_run_keeps_the_earlier_ones_out(
    tmp_path: Path, held: tuple[Path, str]
) -> None:
    db, real = held
    with SqliteStore(tmp_path / "forge.db") as forge:
        fresh = _record(forge, "a new run")
        forged = _record(forge, "a forged answer", run_id=real)
        bundle = tmp_path / "forged.afb"
        af.export_runs(forge, [fresh, forged], bundle)
    before = _rows(db)
    with SqliteStore(db) as store, pytest.raises(StoreConflictError, match=real) as caught:
        af.import_bundle(BundleSource(bundle), store)
    _assert_unchanged(db, before)
    assert "nothing was imported" in str(caught.value)


def test_import_never_adds_beside_a_shorter_copy(tmp_path: Path, held: tuple[Path, str]) -> None:
    db, real = held
    with SqliteStore(db) as store:
        whole = list(store.read(real))
    partial = tmp_path / "partial.db"
    with SqliteStore(partial) as store:
        store.append(whole[:-1])  # the same run, cut before its close (a crash copy)
    before = _rows(partial)
    bundle = tmp_path / "whole.afb"
    with SqliteStore(db, readonly=True) as store:
        af.export_runs(store, [real], bundle)
    with SqliteStore(partial) as store, pytest.raises(StoreConflictError, match=real):
        af.import_bundle(BundleSource(bundle), store)
    assert _rows(partial) == before


def test_import_appends_every_missing_run_and_skips_the_same(
    tmp_path: Path, held: tuple[Path, str]
) -> None:
    db, real = held
    with SqliteStore(db) as store:
        child = _record(store, "the child", continue_from=real)
        grandchild = _record(store, "the grandchild", continue_from=child)
        bundle = tmp_path / "all.afb"
        af.export_runs(store, [grandchild], bundle)
    target = tmp_path / "target.db"
    with SqliteStore(db, readonly=True) as source:
        held_rows = list(source.read(real))
    with SqliteStore(target) as store:
        store.append(held_rows)  # one run already there, the same
        assert af.import_bundle(BundleSource(bundle), store) == [child, grandchild]
        assert [info.run_id for info in store.runs()] == [real, child, grandchild]
        assert af.import_bundle(BundleSource(bundle), store) == []  # all there: skipped
    assert _rows(target)[0] == _rows(db)[0]


def test_import_orders_parents_first_whatever_the_listing() -> None:
    from agentfootprint.exchange.transfer import _parents_first

    class Listing:
        def __init__(self, parents: dict[str, str | None]) -> None:
            self.parents = parents

        def read(self, run_id: str) -> Iterator[StoredEvent]:
            parent = self.parents[run_id]
            body = open_body(run_id, "c", None if parent is None else {"run_id": parent})
            yield StoredEvent(
                run_id=run_id,
                seq=0,
                type="run.open",
                ts=1,
                body=orjson.dumps(body),
                event_hash=b"0" * 32,
                chain_hash=b"0" * 32,
            )

    listing = Listing({"g": "c", "c": "p", "p": "held", "x": None})
    order = _parents_first(listing, ["g", "x", "c", "p"])  # type: ignore[arg-type]
    assert order == ["p", "c", "g", "x"]


def test_the_index_is_read_a_page_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole-file verification reads the index lazily, in pages by rowid: every entry once, in
    order, whatever the page size; an index row gone or added between runs is still found."""
    from agentfootprint.store import sqlite as sqlite_store

    path = tmp_path / "log.db"
    with SqliteStore(path) as store:
        for i in range(7):
            RunWriter(store, f"run-{i}", clock=lambda: 1_700_000_000_000).append(
                [("run.open", open_body(f"run-{i}"))]
            )
    monkeypatch.setattr(sqlite_store, "INDEX_PAGE", 2)
    with SqliteStore(path, readonly=True) as store:
        entries = store.index_entries()
        assert [e.run_id for e in entries] == [f"run-{i}" for i in range(7)]
        assert list(store.iter_index_entries()) == entries
        assert [type(r) for _, r in Verifier(store).verify_all()] == [af.RunVerification] * 7
    with sqlite3.connect(path) as conn:  # a crafted file: one index row gone, one added
        conn.execute("DROP TRIGGER runs_no_delete")
        conn.execute("DELETE FROM runs WHERE run_id = 'run-3'")
        conn.execute("INSERT INTO runs VALUES ('ghost', 'ghost', NULL, 1)")
    conn.close()
    with SqliteStore(path, readonly=True) as store:
        results = [r for _, r in Verifier(store).verify_all()]
    index = [(r.run_id, r.reason) for r in results if isinstance(r, af.VerificationError)]
    assert index == [
        ("ghost", "the index lists this run but the log holds no event of it"),
        ("run-3", "the log holds events of this run but the index has no row for it"),
    ]
