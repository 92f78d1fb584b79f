"""Storage schema 2 (the leaner rows, issue 13) beside schema 1.

A file keeps the layout it was created with: a schema-1 file is read, continued and
verified as it is (never migrated, no row rewritten); a new file gets the layout
``NEW_FILE_SCHEMA`` names. Both yield the same :class:`StoredEvent` s for the same run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.errors import AppendOnlyError, NotALogError, StoreError
from agentfootprint.exchange.transfer import export_runs, import_bundle
from agentfootprint.logformat.canonical import canon
from agentfootprint.store import sqlite as sqlite_store
from agentfootprint.store.base import EventStore, LinkedEvent, StoredEvent
from agentfootprint.store.sqlite import SqliteStore, translate_errors
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import StoreContract, hashed_batch, open_body
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.verifier import Outcome, Verifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "features"))
from feature_support import fixed_ports, lookup

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = (DATA / "golden" / "demo.db", DATA / "format_v1" / "format_v1.db")

#: the schema-1 DDL exactly as files before schema 2 were created (frozen here: a schema-1
#: file made by it must keep being read, continued and verified)
SCHEMA_1_DDL = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at INTEGER);
CREATE TABLE events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, ts INTEGER NOT NULL,
    body BLOB NOT NULL, event_hash BLOB NOT NULL, chain_hash BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, parent_run_id TEXT,
    opened_at INTEGER NOT NULL
);
CREATE INDEX runs_by_conversation ON runs (conversation_id, opened_at);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'agentfootprint log is append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'agentfootprint log is append-only'); END;
CREATE TRIGGER runs_no_update BEFORE UPDATE ON runs
    BEGIN SELECT RAISE(ABORT, 'agentfootprint log is append-only'); END;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs
    BEGIN SELECT RAISE(ABORT, 'agentfootprint log is append-only'); END;
INSERT INTO schema_version VALUES (1, 'events and runs, append-only', 0);
"""


@contextlib.contextmanager
def new_files(schema: int) -> Iterator[None]:
    """New files created inside get ``schema``."""
    saved = sqlite_store.NEW_FILE_SCHEMA
    sqlite_store.NEW_FILE_SCHEMA = schema
    try:
        yield
    finally:
        sqlite_store.NEW_FILE_SCHEMA = saved


def schema_2_store(path: Path, **options: Any) -> SqliteStore:
    with new_files(2):
        return SqliteStore(path, **options)


def schema_1_file(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_1_DDL)
    conn.close()
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class TestSchema2Store(StoreContract):
    def make_store(self, tmp_path: Path) -> EventStore:
        store = schema_2_store(tmp_path / "runs.db")
        assert store.layout == 2 and store.schema_version() == 2
        return store


class TestSchema1FileStore(StoreContract):
    """A file made by the schema-1 DDL, opened by today's code while new files get schema 2:
    continued as schema 1."""

    def make_store(self, tmp_path: Path) -> EventStore:
        path = schema_1_file(tmp_path / "runs.db")
        store = schema_2_store(path)
        assert store.layout == 1 and store.schema_version() == 1
        return store


# -- the same run, both layouts ---------------------------------------------------------------


def _record(store: SqliteStore) -> list[str]:
    replies: list[af.LLMResponse | str] = [
        af.LLMResponse(tool_calls=[af.ToolCall(id="c1", name="lookup", arguments='{"q": "x"}')]),
        "first answer",
        "second answer",
    ]
    agent = af.Agent(
        provider=af.MockProvider(replies),
        model="m",
        store=store,
        tools=[lookup()],
        ports=fixed_ports(),
    )
    first = agent.run_sync("question")
    second = agent.run_sync("again", continue_from=first)
    return [first.run_id, second.run_id]


def _everything(store: SqliteStore) -> tuple[Any, ...]:
    ids = store.run_ids()
    return (
        ids,
        {run_id: list(store.read(run_id)) for run_id in ids},
        {run_id: list(store.read(run_id, start=7)) for run_id in ids},
        store.runs(),
        store.index_entries(),
        [store.run_info(run_id) for run_id in ids],
    )


def test_schema_2_rows_equal_schema_1_rows_of_the_same_run(tmp_path: Path) -> None:
    with new_files(1):
        one_store = SqliteStore(tmp_path / "one.db")
    with schema_2_store(tmp_path / "two.db") as two, one_store as one:
        assert (one.layout, two.layout) == (1, 2)
        assert _record(one) == _record(two)
        assert _everything(one) == _everything(two)
        for _, verdict in Verifier(two).verify_all():
            assert getattr(verdict, "outcome", None) is Outcome.VALID_UNSIGNED, verdict
        # something was stored compactly: empty commit markers, NULL ts, heads per batch
        (compact,) = two.db.execute("SELECT COUNT(*) FROM rows WHERE body IS NULL").fetchone()
        (heads,) = two.db.execute("SELECT COUNT(*) FROM rows WHERE head IS NOT NULL").fetchone()
        (total,) = two.db.execute("SELECT COUNT(*) FROM rows").fetchone()
        assert compact > 0 and 0 < heads < total
    with (
        SqliteStore(tmp_path / "two.db", readonly=True) as two,
        SqliteStore(tmp_path / "one.db", readonly=True) as one,
    ):
        assert _everything(one) == _everything(two)


def test_every_start_reads_the_same_rows(tmp_path: Path) -> None:
    with schema_2_store(tmp_path / "two.db") as two:
        run_id = _record(two)[0]
        rows = list(two.read(run_id))
        for start in range(len(rows) + 2):
            assert list(two.read(run_id, start=start)) == rows[start:]


def test_a_schema_2_file_is_continued_across_stores(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    with schema_2_store(path) as store:
        first = RunWriter(store, "r")
        first.append([("run.open", open_body("r"))])
    with SqliteStore(path) as store:  # new files schema 1 again: the file keeps its own
        assert store.layout == 2
        writer = RunWriter(store, "r")
        writer.seq, writer.head = 1, store.run_info("r").head
        writer.append([("commit", _empty(0)), ("commit", _empty(1))])
        writer.append([("run.close", {"outcome": "answered", "commits": 2, "receipts": 0})])
        assert Verifier(store).verify("r").outcome is Outcome.VALID_UNSIGNED


def _empty(index: int, stage: str = "s") -> dict[str, Any]:
    return {"commit": index, "stage": stage, "stage_run": f"{stage}#{index}", "writes": 0}


# -- old files stay as they are -----------------------------------------------------------------


@pytest.mark.parametrize("golden", GOLDEN, ids=["demo", "format_v1"])
def test_golden_files_verify_continue_and_are_never_modified(tmp_path: Path, golden: Path) -> None:
    before = _sha(golden)
    with new_files(2):
        with SqliteStore(golden, readonly=True) as store:
            assert store.layout == 1
            verdicts = list(Verifier(store).verify_all())
            assert verdicts and all(
                getattr(v, "outcome", None) is Outcome.VALID_UNSIGNED for _, v in verdicts
            )
            answered = [v for _, v in verdicts if getattr(v, "close", {})["outcome"] == "answered"]
            last = answered[-1]
        copy = tmp_path / golden.name
        shutil.copyfile(golden, copy)
        with SqliteStore(copy) as store:  # continued: stays schema 1, nothing migrated
            assert store.layout == 1 and store.schema_version() == 1
            agent = af.Agent(provider=af.MockProvider(["more"]), model="m", store=store)
            more = agent.run_sync("and then?", continue_from=last.run_id)
            assert Verifier(store).verify(more.run_id).outcome is Outcome.VALID_UNSIGNED
            (old,) = store.db.execute("SELECT COUNT(*) FROM events").fetchone()
            assert old > 0
    assert _sha(golden) == before


def test_demo_golden_replays_into_a_schema_2_file(tmp_path: Path) -> None:
    from agentfootprint.agent.demo import replay_agent

    golden = GOLDEN[0]
    before = _sha(golden)
    copy = tmp_path / "demo.db"
    shutil.copyfile(golden, copy)
    with SqliteStore(copy, readonly=True) as source:
        first = source.runs()[0].run_id
    with new_files(2):
        agent = replay_agent()
        replayed = af.replay_sync(agent, copy, first)
    rows = list(agent.store.read(replayed.result.run_id))
    assert rows[0].type == "run.open"
    assert _sha(golden) == before


# -- bundles --------------------------------------------------------------------------------


@pytest.mark.parametrize("into", [1, 2])
def test_bundles_round_trip_from_a_schema_2_file(tmp_path: Path, into: int) -> None:
    with schema_2_store(tmp_path / "two.db") as two:
        ids = _record(two)
        export_runs(two, ids[-1:], tmp_path / "runs.afb")
        expected = {run_id: list(two.read(run_id)) for run_id in ids}
    with new_files(into), SqliteStore(tmp_path / "into.db") as target:
        assert target.layout == into
        with BundleSource(tmp_path / "runs.afb") as bundle:
            assert sorted(import_bundle(bundle, target)) == sorted(ids)
        assert {run_id: list(target.read(run_id)) for run_id in ids} == expected
        export_runs(target, ids[-1:], tmp_path / "again.afb")
    assert (tmp_path / "again.afb").read_bytes() == (tmp_path / "runs.afb").read_bytes()


# -- what schema 2 refuses and enforces ---------------------------------------------------------


def test_schema_2_rows_and_runs_are_append_only(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    with schema_2_store(path) as store:
        RunWriter(store, "r").append([("run.open", open_body("r"))])
    conn = sqlite3.connect(path)
    for statement in (
        "UPDATE rows SET ts = 0",
        "DELETE FROM rows",
        "UPDATE run_keys SET run_id = 'x'",
        "DELETE FROM run_keys",
        "UPDATE runs SET opened_at = 0",
        "DELETE FROM runs",
    ):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(statement)
    with pytest.raises(AppendOnlyError), translate_errors("test"):
        conn.execute("DELETE FROM rows")
    rows = conn.execute("SELECT version, name FROM schema_version").fetchall()
    assert rows == [(2, sqlite_store.SCHEMA_V2[1])]
    conn.close()


def test_a_row_whose_dropped_hashes_do_not_follow_is_refused(tmp_path: Path) -> None:
    with schema_2_store(tmp_path / "two.db") as store:
        writer = RunWriter(store, "r")
        writer.append([("run.open", open_body("r"))])
        batch = _hashed(store, "r", [("commit", _empty(0)), ("commit", _empty(1))])
        for bad in (
            [_with(batch[0], event_hash=bytes(32)), batch[1]],
            [_with(batch[0], chain_hash=bytes(32)), batch[1]],
        ):
            with pytest.raises(StoreError, match="does not follow"):
                store.append(bad)
            assert [e.seq for e in store.read("r")] == [0]
        store.append(batch)  # the last row's chain hash is stored: kept as given
        assert list(store.read("r"))[1:] == batch


def test_a_linked_row_is_not_hashed_again_but_must_link_to_the_stored_head(
    tmp_path: Path,
) -> None:
    """The writer's rows are :class:`LinkedEvent`: hashed by their one constructor, so
    schema 2 takes their event hash as made (a plain row is hashed again, above); the link
    to the stored head is still checked, and a linked row cannot be altered in place."""
    with schema_2_store(tmp_path / "two.db") as store:
        RunWriter(store, "r").append([("run.open", open_body("r"))])
        head = next(iter(store.read("r"))).chain_hash
        plain = _hashed(store, "r", [("commit", _empty(0)), ("commit", _empty(1))])
        linked = [
            LinkedEvent(run_id="r", seq=e.seq, type=e.type, ts=e.ts, body=e.body, previous=previous)
            for e, previous in zip(plain, [head, plain[0].chain_hash], strict=True)
        ]
        assert linked == plain and plain == linked and len({*linked, *plain}) == 2
        astray = LinkedEvent(
            run_id="r", seq=1, type="commit", ts=1, body=canon(_empty(0)), previous=bytes(32)
        )
        with pytest.raises(StoreError, match="does not follow"):
            store.append([astray, linked[1]])
        with pytest.raises(TypeError):
            dataclasses.replace(linked[0], event_hash=bytes(32))
        with pytest.raises(dataclasses.FrozenInstanceError):
            linked[0].body = b"{}"  # type: ignore[misc]
        store.append(linked)
        assert list(store.read("r"))[1:] == plain
        assert Verifier(store).verify("r").outcome is Outcome.UNSEALED


def test_only_exact_empty_commit_markers_are_compact(tmp_path: Path) -> None:
    with schema_2_store(tmp_path / "two.db") as store:
        RunWriter(store, "r").append([("run.open", open_body("r"))])
        bodies = [
            _empty(0),
            _empty(1, "call-llm"),
            {**_empty(2), "call": 0},  # another member
            {"commit": 3, "stage": "s", "stage_run": "t#3", "writes": 0},  # another stage
            {"commit": 4, "stage": "s", "stage_run": "s#04", "writes": 0},  # not canonical k
            {"commit": 5, "stage": 'é"\\', "stage_run": 'é"\\#5', "writes": 0},  # escapes
            {**_empty(6), "writes": 1},
        ]
        batch = _hashed(store, "r", [("commit", body) for body in bodies])
        store.append(batch)
        assert list(store.read("r"))[1:] == batch
        nulls = [
            row[0] is None
            for row in store.db.execute("SELECT body FROM rows WHERE pos & 4294967295 > 0")
        ]
        assert nulls == [True, True, False, False, False, True, False]


# -- crafted schema-2 files -------------------------------------------------------------------


def _crafted(tmp_path: Path, statement: str) -> Path:
    path = tmp_path / "two.db"
    with schema_2_store(path) as store:
        _record(store)
    conn = sqlite3.connect(path)
    for table in ("rows", "run_keys", "runs"):
        for verb in ("update", "delete"):
            conn.execute(f"DROP TRIGGER {table}_no_{verb}")
    conn.executescript(statement)
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE rows SET type = 'commit' WHERE type = 5",
        "UPDATE rows SET type = 99 WHERE pos = 4294967298",
        "UPDATE rows SET ts = 'soon' WHERE ts IS NOT NULL AND pos > 4294967296",
        "UPDATE rows SET ts = ts + 0.5 WHERE ts IS NOT NULL AND pos > 4294967296",
        "UPDATE rows SET body = CAST(body AS TEXT) WHERE pos = 4294967297",
        "UPDATE rows SET body = CAST('{}' AS BLOB) WHERE pos = 4294967297",
        "UPDATE rows SET head = hex(head) WHERE head IS NOT NULL",
        "UPDATE rows SET head = substr(head, 1, 16) WHERE head IS NOT NULL",
        "UPDATE rows SET head = NULL WHERE head IS NOT NULL",
        "UPDATE rows SET stage = 7 WHERE stage IS NOT NULL",
        "UPDATE rows SET stage = stage || 'x' WHERE stage IS NOT NULL",
        "UPDATE rows SET commit_no = 'one' WHERE stage IS NOT NULL",
        "UPDATE rows SET stage_k = -1 WHERE stage IS NOT NULL",
        "UPDATE rows SET body = x'00', stage = NULL WHERE stage IS NOT NULL",
        "UPDATE rows SET stage = NULL WHERE stage IS NOT NULL",
        # the commit columns on a row that keeps its body, or on a row that is no commit
        "UPDATE rows SET stage = 'x', commit_no = 1, stage_k = 1 WHERE pos = 4294967297",
        "UPDATE rows SET commit_no = 0 WHERE pos = 4294967297",
        "UPDATE rows SET type = 2 WHERE stage IS NOT NULL",
        "DELETE FROM rows WHERE pos = 4294967299",
        "UPDATE run_keys SET run_id = 'other' WHERE run_key = 1",
        "UPDATE run_keys SET run_id = CAST(x'ff00' AS TEXT) WHERE run_key = 1",
        "DELETE FROM run_keys WHERE run_key = 1",
        "UPDATE run_keys SET run_key = 9 WHERE run_key = 1",
        "DELETE FROM runs WHERE rowid = 1",
        "UPDATE runs SET opened_at = 'soon'",
    ],
)
def test_a_crafted_schema_2_file_never_verifies_nor_crashes(tmp_path: Path, statement: str) -> None:
    path = _crafted(tmp_path, statement)
    with SqliteStore(path, readonly=True) as store:
        verdicts = list(Verifier(store).verify_all())
        for run_id in store.run_ids():
            list(store.read(run_id))  # yields what the file holds, never raises
        with contextlib.suppress(StoreError):
            store.runs()
    assert verdicts
    assert any(not isinstance(v, af.RunVerification) for _, v in verdicts) or any(
        getattr(v, "outcome", None) is not Outcome.VALID_UNSIGNED for _, v in verdicts
    ), verdicts


def test_readonly_schema_2_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    with schema_2_store(path) as store:
        _record(store)
    before, listing = _sha(path), sorted(p.name for p in tmp_path.iterdir())
    with SqliteStore(path, readonly=True) as store:
        assert store.layout == 2
        list(Verifier(store).verify_all())
        with pytest.raises(StoreError, match="read-only"):
            RunWriter(store, "x").append([("run.open", open_body("x"))])
    assert _sha(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing


def test_version_and_tables_must_agree(tmp_path: Path) -> None:
    path = schema_1_file(tmp_path / "one.db")
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (2, 'says two', 0)")
    conn.commit()
    conn.close()
    for readonly in (True, False):
        with pytest.raises(NotALogError, match="schema version 2 but the tables of schema 1"):
            SqliteStore(path, readonly=readonly)


# -- helpers ---------------------------------------------------------------------------------


def _hashed(store: SqliteStore, run_id: str, events: list[tuple[str, Any]]) -> list[StoredEvent]:
    """A batch continuing ``run_id``, hashed but not appended."""
    last = list(store.read(run_id, start=store.run_info(run_id).events - 1))
    return hashed_batch(run_id, events, after=last)


def _with(event: StoredEvent, **changes: Any) -> StoredEvent:
    fields = {name: getattr(event, name) for name in StoredEvent.__slots__}
    return StoredEvent(**{**fields, **changes})


def test_a_changed_row_fails_the_link_of_its_batch_head(tmp_path: Path) -> None:
    """A body changed in place (no hash is stored beside it) is caught by the next stored
    head: the chain fails at the last row of the changed row's batch."""
    path = tmp_path / "two.db"
    with schema_2_store(path) as store:
        run_id = _record(store)[0]
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER rows_no_update")
    (changed,) = conn.execute(
        "SELECT MIN(pos) FROM rows WHERE body IS NOT NULL AND head IS NULL AND pos > ?",
        (1 << 32,),
    ).fetchone()
    (head,) = conn.execute(
        "SELECT MIN(pos) FROM rows WHERE head IS NOT NULL AND pos > ?", (changed,)
    ).fetchone()
    conn.execute("UPDATE rows SET ts = ts + 1 WHERE pos = ?", (changed,))
    conn.execute(
        "UPDATE rows SET ts = (SELECT ts FROM rows r WHERE r.pos < ? AND r.ts IS NOT NULL "
        "ORDER BY r.pos DESC LIMIT 1) + 1 WHERE pos = ? AND ts IS NULL",
        (changed, changed),
    )
    conn.commit()
    conn.close()
    with SqliteStore(path, readonly=True) as store, pytest.raises(af.VerificationError) as caught:
        Verifier(store).verify(run_id)
    assert (caught.value.code, caught.value.seq) == ("chain", head - (1 << 32))


def test_schema_2_runs_table_is_only_an_index(tmp_path: Path) -> None:
    """As in schema 1, the ``runs`` table can be lost: the rows (and ``run_keys``, which
    names them) are read, verified and continued without it."""
    path = tmp_path / "two.db"
    with schema_2_store(path) as store:
        ids = _record(store)
        before = {run_id: list(store.read(run_id)) for run_id in ids}
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER runs_no_delete")
    conn.execute("DELETE FROM runs")
    conn.commit()
    conn.close()
    with SqliteStore(path) as store:
        assert store.run_ids() == ids and store.runs() == []
        assert {run_id: list(store.read(run_id)) for run_id in ids} == before
        agent = af.Agent(provider=af.MockProvider(["more"]), model="m", store=store)
        more = agent.run_sync("and then?", continue_from=ids[-1])
        assert Verifier(store).verify(more.run_id).outcome is Outcome.VALID_UNSIGNED
