"""SQLite specifics beyond the shared contract: schema versions, triggers, error translation."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import agentfootprint as af
from agentfootprint.errors import AppendOnlyError, StoreBusyError, StoreConflictError, StoreError
from agentfootprint.store.sqlite import MIGRATIONS, SCHEMA_VERSION, SqliteStore, translate_errors
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body


def test_migrations_are_recorded_once(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    SqliteStore(db).close()
    store = SqliteStore(db)  # opening again applies nothing new
    rows = store.db.execute("SELECT version, name FROM schema_version").fetchall()
    assert rows == [(version, name) for version, name, _ in MIGRATIONS]
    assert store.schema_version() == SCHEMA_VERSION
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
    with pytest.raises(StoreError, match="newer than this library"):
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


def test_synchronous_setting_is_checked(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="synchronous"):
        SqliteStore(tmp_path / "s.db", synchronous="OFF")
    SqliteStore(tmp_path / "f.db", synchronous="FULL").close()


def test_agent_records_into_an_existing_file_across_processes_of_time(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = af.Agent(provider=af.MockProvider(["one"]), model="m", store=db).run_sync("a")
    agent = af.Agent(provider=af.MockProvider(["two"]), model="m", store=str(db))
    second = agent.run_sync("b", continue_from=first.run_id)
    assert [i.run_id for i in agent.store.runs()] == [first.run_id, second.run_id]
