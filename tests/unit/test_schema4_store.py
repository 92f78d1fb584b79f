"""Storage schema 4 (issue 26): one ``appends`` row per append, rows as compact records.

A schema-4 file is a log like the others: the store contract holds on it, recorded runs read
back byte for byte and verify, and reading never changes it. Files of schemas 1 and 2 are
read and continued as they are while new files get schema 4.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.errors import AppendOnlyError, StoreConflictError, StoreError
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.chain import DERIVED, GENESIS, chain_hash, event_hash
from agentfootprint.store import sqlite_appends
from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.sqlite_records import _Reader, uvarint
from agentfootprint.testing.store_contract import StoreContract, hashed_batch, open_body
from agentfootprint.testing.tamper import (
    appends_of,
    layout_of,
    new_file_schema,
    plain,
    read_rows,
    reencoded,
    rewrite,
    tampering,
    verification_error,
)
from agentfootprint.verify.verifier import Outcome, Verifier


def schema_4_store(path: Path, **options: Any) -> SqliteStore:
    with new_file_schema(4):
        return SqliteStore(path, **options)


class TestSchema4Store(StoreContract):
    def make_store(self, tmp_path: Path) -> EventStore:
        store = schema_4_store(tmp_path / "runs.db")
        assert store.layout == 4 and store.schema_version() == 4
        return store


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(path: Path) -> list[str]:
    """A root run with a tool call, its continuation and a routed run, recorded for real."""
    tool = af.define_tool(name="lookup", description="look up", execute=lambda args: "rows")
    script: list[str | af.LLMResponse] = [
        af.reply(tool_calls=[af.tool_call("lookup", {"q": "a"})]),
        "done",
        "again",
        "more",
    ]
    with af.Agent(
        provider=af.MockProvider(script), model="m", tools=[tool], store=path, system="Be brief."
    ) as agent:
        first = agent.run_sync("hi")
        second = agent.run_sync("more", continue_from=first)
        third = agent.run_sync("again", continue_from=second)
    return [first.run_id, second.run_id, third.run_id]


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    path = tmp_path / "log.db"
    with new_file_schema(4):
        ids = _record(path)
    yield path, ids


def _tags(data: bytes, count: int) -> list[int]:
    """The tags of an append's records (their type code * 2 + form)."""
    reader, tags = _Reader(data), []
    for _ in range(count):
        tag = reader.u()
        reader.u()
        tags.append(tag)
        code, form = tag >> 1, tag & 1
        if not form:
            reader.blob()
        elif code == 2:
            reader.u(), reader.u(), reader.u(), reader.opt()
        elif code == 5:
            reader.u(), reader.u(), reader.u(), reader.u(), reader.opt()
        elif code == 3:
            reader.u(), reader.u(), reader.u(), reader.blob()
        else:
            reader.u(), reader.u(), reader.u(), reader.take(32)
    assert reader.i == len(data)
    return tags


def test_a_new_file_is_schema_4_whole_with_8_kib_pages(tmp_path: Path) -> None:
    store = schema_4_store(tmp_path / "log.db")
    store.close()
    with closing(sqlite3.connect(tmp_path / "log.db")) as conn:
        assert conn.execute("PRAGMA page_size").fetchone() == (8192,)
        assert conn.execute("SELECT version, name FROM schema_version").fetchall() == [
            (4, "appends: one row per append, compact records")
        ]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"appends", "names", "opens", "run_keys", "runs", "schema_version"} <= tables
        assert "rows" not in tables and "events" not in tables
        assert layout_of(conn) == 4


def test_recorded_runs_read_back_verify_and_use_the_compact_forms(
    recorded: tuple[Path, list[str]],
) -> None:
    path, ids = recorded
    with closing(SqliteStore(path, readonly=True)) as store:
        assert store.layout == 4
        assert store.run_ids() == ids
        for run_id in ids:
            assert Verifier(store).verify(run_id).outcome is Outcome.VALID_UNSIGNED
            events = list(store.read(run_id))
            info = store.run_info(run_id)
            assert (info.events, info.last_type, info.head) == (
                len(events),
                "run.close",
                events[-1].chain_hash,
            )
            for k in range(len(events) + 1):
                assert list(store.read(run_id, start=k)) == events[k:]
        assert [r.run_id for r in store.runs()] == ids
    with closing(sqlite3.connect(path)) as conn:
        tags = {
            tag
            for run_id in ids
            for a in appends_of(conn, run_id)
            for tag in _tags(a.data, a.count)
        }
        # a compact write, commit, receipt, and the continued runs' run.open
        assert {2 * 2 + 1, 5 * 2 + 1, 3 * 2 + 1, 1 * 2 + 1} <= tags
        # the continuations share the conversation's template
        assert conn.execute("SELECT COUNT(*) FROM opens").fetchone() == (1,)


def test_reading_and_verifying_never_change_the_file(recorded: tuple[Path, list[str]]) -> None:
    path, _ = recorded
    before = _sha(path)
    with closing(SqliteStore(path, readonly=True)) as store:
        for _run_id, verdict in Verifier(store).verify_all():
            assert verdict.outcome is Outcome.VALID_UNSIGNED  # type: ignore[union-attr]
        store.runs()
        store.index_entries()
    assert _sha(path) == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["log.db"]


def test_schema_2_files_stay_schema_2_when_new_files_get_schema_4(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with new_file_schema(2):
        ids = _record(path)
    with new_file_schema(4):
        store = SqliteStore(path)
        try:
            assert store.layout == 2 and store.schema_version() == 2
            batch = hashed_batch("more", [("run.open", open_body("more"))])
            store.append(batch)
            assert Verifier(store).verify(ids[1]).outcome is Outcome.VALID_UNSIGNED
        finally:
            store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert layout_of(conn) == 2


def test_an_append_too_big_for_one_row_is_split_and_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_appends, "MAX_DATA_BYTES", 64)
    path = tmp_path / "log.db"
    with new_file_schema(4):
        ids = _record(path)
    with closing(SqliteStore(path, readonly=True)) as store:
        for run_id in ids:
            assert Verifier(store).verify(run_id).outcome is Outcome.VALID_UNSIGNED
    with closing(sqlite3.connect(path)) as conn:
        appends = appends_of(conn, ids[0])
        assert len(appends) > len({a.head for a in appends if a.count > 1})
        assert all(len(a.data) <= 64 or a.count == 1 for a in appends)


def test_long_bodies_are_kept_whole_and_written_in_place(tmp_path: Path) -> None:
    """A body over 64 KiB is stored whole (form 0), and an append's data of 1 MiB or more is
    written into its row part by part: both read back byte for byte and verify; the append
    holds exactly the records, nothing more."""
    path = tmp_path / "log.db"
    values = ["v" * 100_000, "w" * 1_500_000, "small"]
    with closing(schema_4_store(path)) as store:
        first = hashed_batch("r", [("run.open", open_body("r"))])
        rows = [
            ("write", {"commit": 0, "path": "k", "value": value, "verb": "set"}) for value in values
        ]
        batch = hashed_batch(
            "r",
            [*rows, ("commit", {"commit": 0, "stage": "s", "stage_run": "s#1", "writes": 3})],
            after=first,
        )
        store.append(first)
        store.append(batch)
        assert [e.body for e in store.read("r")] == [e.body for e in [*first, *batch]]
        assert Verifier(store).verify("r").outcome is Outcome.UNSEALED
    with closing(sqlite3.connect(path)) as conn:
        last = appends_of(conn, "r")[-1]
    reader = _Reader(last.data)
    for event in batch:
        tag = reader.u()
        reader.u()  # the ts delta
        if len(event.body) > 64 * 1024:
            assert tag & 1 == 0 and reader.blob() == event.body  # whole
        elif tag & 1 == 0:
            reader.blob()
        else:  # a compact write or marker: its fields
            break
    assert len(last.data) > 1 << 20


def test_the_append_only_triggers_hold(recorded: tuple[Path, list[str]]) -> None:
    path, _ = recorded
    with closing(SqliteStore(path)) as store:
        for table in ("appends", "names", "opens", "run_keys", "runs"):
            with pytest.raises(AppendOnlyError), sqlite_store_errors(store):
                store._conn.execute(f"DELETE FROM {table}")


def sqlite_store_errors(store: SqliteStore) -> Any:
    from agentfootprint.store.sqlite import translate_errors

    return translate_errors("tampering", path=store.path)


def test_rows_whose_hashes_do_not_follow_are_refused(tmp_path: Path) -> None:
    with closing(schema_4_store(tmp_path / "log.db")) as store:
        batch = hashed_batch("r", [("run.open", open_body("r")), ("event", {"kind": "x"})])
        wrong = StoredEvent(**{**_fields(batch[0]), "chain_hash": bytes(32)})
        with pytest.raises(StoreError, match="does not follow"):
            store.append([wrong, batch[1]])
        assert store.run_ids() == []


def _fields(event: StoredEvent) -> dict[str, Any]:
    return {name: getattr(event, name) for name in StoredEvent.__slots__}


def test_a_name_of_a_rolled_back_append_is_never_named(tmp_path: Path) -> None:
    """The names a failed transaction wrote are rolled back with it: the store must not
    name their ids afterwards."""
    with closing(schema_4_store(tmp_path / "log.db")) as store:
        opened = hashed_batch("r", [("run.open", open_body("r"))])
        store.append(opened)
        write = ("write", {"commit": 0, "path": "fresh", "verb": "set", "value": 1})
        batch = hashed_batch("r", [write], after=opened)
        taken = hashed_batch("r", [("event", {"kind": "x"})], after=opened)
        store.append(taken)
        with pytest.raises(StoreConflictError):  # a conflict after the name was inserted
            store.append_runs([hashed_batch("s", [("run.open", open_body("s"))]), batch])
        retry = hashed_batch("r", [write], after=list(store.read("r")))
        store.append(retry)
        assert list(store.read("r"))[-1] == retry[0]


def test_rows_of_other_writers_are_kept_whole(tmp_path: Path) -> None:
    """Bodies no compact form rebuilds exactly (not canonical, other members, huge
    numbers, long names) are stored whole and read back byte for byte."""
    bodies = [
        ("write", b'{"commit":0,"path":"a","verb":"set","value":1,"x":2}'),
        ("write", b'{"commit":0, "path":"a","value":1,"verb":"set"}'),
        ("write", b'{"commit":9007199254740992,"path":"a","value":1,"verb":"set"}'),
        ("write", b'{"commit":0,"path":"' + b"p" * 300 + b'","verb":"delete"}'),
        ("write", b'{"commit":0,"path":"\\u0061","verb":"delete"}'),
        ("commit", b'{"commit":1,"stage":"s","stage_run":"s#01","writes":0}'),
        ("commit", b'{"commit":1,"decision":7,"stage":"s","stage_run":"s#1","writes":0}'),
        ("receipt", b'{"call":0,"commit":1}'),
        ("event", b"not json at all \xff"),
    ]
    events = _chained("r", [("run.open", canon(open_body("r"))), *bodies])
    with closing(schema_4_store(tmp_path / "log.db")) as store:
        store.append(events)
        assert list(store.read("r")) == events
    with closing(sqlite3.connect(tmp_path / "log.db")) as conn:
        (append,) = appends_of(conn, "r")
        assert all(tag & 1 == 0 for tag in _tags(append.data, append.count))


def _chained(
    run_id: str, rows: list[tuple[str, bytes]], ts: int = 1_700_000_000_000
) -> list[StoredEvent]:
    head, out = GENESIS, []
    for seq, (type_, body) in enumerate(rows):
        digest = event_hash(run_id, seq, type_, ts + seq, body)
        head = chain_hash(head, digest)
        out.append(
            StoredEvent(
                run_id=run_id,
                seq=seq,
                type=type_,
                ts=ts + seq,
                body=body,
                event_hash=digest,
                chain_hash=head,
            )
        )
    return out


def test_stored_rows_leave_the_hashes_to_the_reader(recorded: tuple[Path, list[str]]) -> None:
    path, ids = recorded
    with closing(SqliteStore(path, readonly=True)) as store:
        rows = store.stored_rows(ids[0])
        events = list(store.read(ids[0]))
    with closing(sqlite3.connect(path)) as conn:
        heads = {a.seq + a.count - 1: a.head for a in appends_of(conn, ids[0])}
    for row, event in zip(rows, events, strict=True):
        assert row[:5] == (event.run_id, event.seq, event.type, event.ts, event.body)
        assert row[5] is DERIVED
        assert row[6] == heads.get(event.seq, DERIVED)


def test_the_tamper_tools_rewrite_schema_4_runs_faithfully(
    recorded: tuple[Path, list[str]],
) -> None:
    path, ids = recorded
    with closing(SqliteStore(path, readonly=True)) as store:
        before = {run_id: list(store.read(run_id)) for run_id in ids}
    with tampering(path) as conn:
        for run_id in ids:
            rows = read_rows(conn, run_id)
            assert [tuple(r) for r in rows] == [
                (e.seq, e.type, e.ts, e.body, e.event_hash, e.chain_hash) for e in before[run_id]
            ]
            rewrite(conn, run_id, plain(rows))
    with closing(SqliteStore(path, readonly=True)) as store:
        assert {run_id: list(store.read(run_id)) for run_id in ids} == before

    def other_answer(body: dict[str, object]) -> None:
        if body.get("path") == "final_answer":
            body["value"] = "forged"

    with tampering(path) as conn:
        rows = read_rows(conn, ids[0])
        rewrite(conn, ids[0], [reencoded(r, other_answer) for r in rows])
    # the root re-chains on its own; its continuation names the old head
    assert verification_error(path, ids[1]).code == "ancestry"


def test_uvarints_are_leb128() -> None:
    for value in (0, 1, 127, 128, 300, 2**53 - 1, 2**64 - 1):
        encoded = uvarint(value)
        assert _Reader(encoded).u() == value
    assert uvarint(300) == b"\xac\x02"
