"""The verifier's chain-row loop (``SqliteStore.chain_rows``) against its general loop
(``read``): on sound and on damaged files of both storage schemas, every verdict, code, seq
and message is the same, and so is every verified run. The rows it hands over are the rows
``read`` yields (``as_read``), and a store's reads go through ``stored_rows``."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.errors import VerificationError
from agentfootprint.logformat.chain import DERIVED, GENESIS, as_read
from agentfootprint.store.base import StoredEvent
from agentfootprint.testing.tamper import new_file_schema, tampering
from agentfootprint.verify.verifier import RunVerification


class _ReadOnly:
    """The store seen through ``read`` alone (no ``chain_rows``): the general loop."""

    def __init__(self, store: af.SqliteStore) -> None:
        self.store = store

    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        return self.store.read(run_id, start=start)

    def run_ids(self) -> list[str]:
        return self.store.run_ids()

    def index_entries(self) -> list[Any]:
        return self.store.index_entries()


def _record(path: Path, schema: int) -> list[str]:
    tool = af.define_tool(name="lookup", description="look up", execute=lambda args: "rows")
    script = [
        af.reply(tool_calls=[af.tool_call("lookup", {"q": "a"})]),
        "done",
        af.reply(tool_calls=[af.tool_call("lookup", {"q": "b"})]),
        "again",
    ]
    with new_file_schema(schema):
        store = af.SqliteStore(path)
    try:
        agent = af.Agent(
            provider=af.MockProvider(script),
            model="m",
            tools=[tool],
            store=store,
            record_receipt=True,
        )
        first = agent.run_sync("hi")
        second = agent.run_sync("more", continue_from=first)
    finally:
        store.close()
    return [first.run_id, second.run_id]


def _summary(result: Any) -> tuple[Any, ...]:
    if isinstance(result, VerificationError):
        return ("error", result.code, result.seq, result.run_id, str(result))
    assert isinstance(result, RunVerification)
    return (
        "run",
        result.outcome,
        result.events,
        result.commits,
        result.receipts,
        result.head,
        dict(result.final_state),
        {k: tuple(v) for k, v in result.receipt_lists.items()},
        result.ancestors,
        result.opened_at,
        result.log_format,
    )


def _verdicts(path: Path, *, general: bool) -> list[tuple[Any, ...]]:
    with af.SqliteStore(path, readonly=True) as store:
        source: Any = _ReadOnly(store) if general else store
        return [(run_id, _summary(result)) for run_id, result in af.Verifier(source).verify_all()]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, list[str]]]:
    folder = tmp_path_factory.mktemp("chain-rows")
    return {schema: (p, _record(p, schema)) for schema in (1, 2) for p in [folder / f"{schema}.db"]}


# damage of one kind each, in SQL; {root} is the root run's id, {key} its schema-2 run key
_V1 = [
    "UPDATE events SET body = CAST(body AS TEXT) WHERE run_id = '{root}' AND seq = 2",
    "UPDATE events SET body = body || X'20' WHERE run_id = '{root}' AND seq = 1",
    "UPDATE events SET body = X'FF' WHERE run_id = '{root}' AND seq = 3",
    "UPDATE events SET body = CAST('[]' AS BLOB) WHERE run_id = '{root}' AND seq = 3",
    "UPDATE events SET event_hash = X'00' WHERE run_id = '{root}' AND seq = 3",
    "UPDATE events SET event_hash = zeroblob(32) WHERE run_id = '{root}' AND seq = 4",
    "UPDATE events SET chain_hash = zeroblob(32) WHERE run_id = '{root}' AND seq = 4",
    "UPDATE events SET chain_hash = 7 WHERE run_id = '{root}' AND seq = 0",
    "UPDATE events SET ts = 1.5 WHERE run_id = '{root}' AND seq = 1",
    "UPDATE events SET ts = '12' WHERE run_id = '{root}' AND seq = 1",
    "UPDATE events SET ts = 9007199254740993 WHERE run_id = '{root}' AND seq = 2",
    "UPDATE events SET ts = ts + 1 WHERE run_id = '{root}' AND seq = 2",
    "UPDATE events SET type = 'bogus' WHERE run_id = '{root}' AND seq = 2",
    "UPDATE events SET type = X'01' WHERE run_id = '{root}' AND seq = 2",
    "UPDATE events SET type = 'write' WHERE run_id = '{root}' AND seq = 0",
    "UPDATE events SET seq = seq + 100 WHERE run_id = '{root}' AND seq = 4",
    "UPDATE events SET seq = 'x' WHERE run_id = '{root}' AND seq = 3",
    "UPDATE events SET run_id = 'other' WHERE run_id = '{root}' AND seq = 5",
    "UPDATE events SET run_id = CAST(run_id AS BLOB) WHERE run_id = '{root}' AND seq = 2",
    "UPDATE events SET run_id = CAST(X'FF' AS TEXT) WHERE run_id = '{root}' AND seq = 0",
    "DELETE FROM events WHERE run_id = '{root}' AND seq = 1",
    "DELETE FROM events WHERE run_id = '{root}' AND seq = "
    "(SELECT MAX(seq) FROM events WHERE run_id = '{root}')",
    "DELETE FROM events WHERE run_id = '{root}' AND seq = 0",
    "UPDATE runs SET opened_at = opened_at + 1",
]
_V2 = [
    "UPDATE rows SET body = CAST(body AS TEXT) WHERE pos = {key} + 2",
    "UPDATE rows SET body = X'20' || body WHERE pos = {key} + 1",
    "UPDATE rows SET body = X'FF' WHERE pos = {key} + 3",
    "UPDATE rows SET ts = NULL WHERE pos = {key}",
    "UPDATE rows SET ts = NULL WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos > {key} AND "
    "ts IS NOT NULL)",
    "UPDATE rows SET ts = ts + 1 WHERE pos = {key} + 1",
    "UPDATE rows SET ts = 1.5 WHERE pos = {key}",
    "UPDATE rows SET ts = 9007199254740993 WHERE pos = {key}",
    "UPDATE rows SET head = X'00' WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos > {key} "
    "AND head IS NOT NULL)",
    "UPDATE rows SET head = 5 WHERE pos = {key}",
    "UPDATE rows SET head = zeroblob(32) WHERE pos = (SELECT MIN(pos) FROM rows WHERE "
    "pos > {key} AND head IS NOT NULL)",
    "UPDATE rows SET head = zeroblob(32) WHERE pos = {key} + 1",
    "UPDATE rows SET head = NULL WHERE pos = (SELECT MAX(pos) FROM rows WHERE pos < {next})",
    "UPDATE rows SET head = NULL WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos > {key} "
    "AND head IS NOT NULL)",
    "UPDATE rows SET type = 99 WHERE pos = {key} + 2",
    "UPDATE rows SET type = 'x' WHERE pos = {key} + 2",
    "UPDATE rows SET type = 2.0 WHERE pos = {key} + 2",
    "UPDATE rows SET type = 2 WHERE pos = {key}",
    "UPDATE rows SET stage = 'other' WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos > {key} "
    "AND body IS NULL)",
    "UPDATE rows SET commit_no = 'x' WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos > {key} "
    "AND body IS NULL)",
    "UPDATE rows SET stage = CAST(X'FF' AS TEXT) WHERE pos = (SELECT MIN(pos) FROM rows WHERE "
    "pos > {key} AND body IS NULL)",
    "UPDATE rows SET stage = 's' WHERE pos = {key} + 1",
    "UPDATE rows SET pos = pos + 1000 WHERE pos = (SELECT MAX(pos) FROM rows WHERE pos < {next})",
    "DELETE FROM rows WHERE pos = (SELECT MAX(pos) FROM rows WHERE pos < {next})",
    "DELETE FROM rows WHERE pos = {key} + 1",
    "DELETE FROM rows WHERE pos = {key}",
    "DELETE FROM run_keys WHERE run_id = '{root}'",
    "UPDATE run_keys SET run_id = 'zzz' WHERE run_id = '{root}'",
    "UPDATE run_keys SET run_id = CAST(X'FF' AS TEXT) WHERE run_id = '{root}'",
    "UPDATE runs SET conversation_id = 'c'",
]


def _cases() -> Iterator[Any]:
    yield from (pytest.param(1, sql, id=f"v1-{i}") for i, sql in enumerate(["SELECT 1", *_V1]))
    yield from (pytest.param(2, sql, id=f"v2-{i}") for i, sql in enumerate(["SELECT 1", *_V2]))


@pytest.mark.parametrize(("schema", "sql"), list(_cases()))
def test_the_chain_row_loop_gives_every_verdict_the_general_loop_gives(
    recorded: dict[int, tuple[Path, list[str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    schema: int,
    sql: str,
) -> None:
    original, (root, _) = recorded[schema]
    path = tmp_path / "damaged.db"
    shutil.copyfile(original, path)
    with tampering(path) as conn:
        values = {"root": root, "key": 0, "next": 0}
        if schema == 2:
            (key,) = conn.execute(
                "SELECT run_key FROM run_keys WHERE run_id = ?", (root,)
            ).fetchone()
            values.update(key=key << 32, next=(key + 1) << 32)
        conn.execute(sql.format(**values))
    calls: list[str] = []
    chain_rows = af.SqliteStore.chain_rows

    def counted(self: af.SqliteStore, run_id: str) -> Any:
        calls.append(run_id)
        return chain_rows(self, run_id)

    monkeypatch.setattr(af.SqliteStore, "chain_rows", counted)
    fast = _verdicts(path, general=False)
    assert calls, "the verifier did not take the chain-row loop"
    assert fast == _verdicts(path, general=True)
    if sql == "SELECT 1":
        assert [r[1][0:2] for r in fast] == [("run", af.Outcome.VALID_UNSIGNED)] * 2


@pytest.mark.parametrize("schema", [1, 2])
def test_chain_rows_are_the_rows_read_gives(
    recorded: dict[int, tuple[Path, list[str]]], schema: int
) -> None:
    path, ids = recorded[schema]
    with af.SqliteStore(path, readonly=True) as store:
        for run_id in ids:
            raw = store.chain_rows(run_id)
            assert raw is not None
            previous = GENESIS
            read = list(store.read(run_id))
            assert len(raw) == len(read)
            for tup, row in zip(raw, read, strict=True):
                assert (DERIVED in tup) == (schema == 2)
                expected = (row.run_id, row.seq, row.type, row.ts, row.body)
                assert tuple(as_read(tup, previous)) == (*expected, row.event_hash, row.chain_hash)
                previous = row.chain_hash
        with pytest.raises(af.RunNotFoundError):
            store.chain_rows("no-such-run")


def test_a_store_that_observes_its_reads_does_so_through_stored_rows(
    recorded: dict[int, tuple[Path, list[str]]],
) -> None:
    """The documented seam (issue 25: no check for an overridden ``read``): ``read`` and
    ``chain_rows`` are both made from ``stored_rows``, so the verifier reads through it."""
    path, ids = recorded[2]
    seen: list[str] = []

    class Counting(af.SqliteStore):
        def stored_rows(self, run_id: str, start: int = 0) -> list[tuple[Any, ...]]:
            seen.append(run_id)
            return super().stored_rows(run_id, start)

    with Counting(path, readonly=True) as store:
        verified = [r for _, r in af.Verifier(store).verify_all()]
    assert [r.outcome for r in verified if isinstance(r, RunVerification)] == [
        af.Outcome.VALID_UNSIGNED
    ] * 2
    assert set(seen) == set(ids)


def test_reading_chain_rows_changes_no_file(
    recorded: dict[int, tuple[Path, list[str]]], tmp_path: Path
) -> None:
    for schema in (1, 2):
        original, ids = recorded[schema]
        path = tmp_path / f"copy-{schema}.db"
        shutil.copyfile(original, path)
        before = path.read_bytes()
        with af.SqliteStore(path, readonly=True) as store:
            for run_id in ids:
                store.chain_rows(run_id)
            assert all(isinstance(r, RunVerification) for _, r in af.Verifier(store).verify_all())
        assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(path.name)) == [
            path.name
        ]
        with closing(sqlite3.connect(path)) as conn:  # the file is still a log of its schema
            assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone() == (schema,)


@pytest.mark.parametrize("schema", [1, 2])
def test_a_verifier_that_proved_bodies_before_gives_the_same_verdicts(
    recorded: dict[int, tuple[Path, list[str]]], tmp_path: Path, schema: int
) -> None:
    """Bodies proven canonical once are remembered by the bytes (never by position): a
    warm verifier and a cold one agree, on the sound file and on one whose repeated commit
    marker was rewritten in another form."""
    original, (root, child) = recorded[schema]
    with af.SqliteStore(original, readonly=True) as store:
        verifier = af.Verifier(store)
        cold = [(r, _summary(v)) for r, v in verifier.verify_all()]
        assert verifier._proven  # the runs repeat commit markers
        warm = [(r, _summary(v)) for r, v in verifier.verify_all()]
    assert warm == cold
    path = tmp_path / "damaged.db"
    shutil.copyfile(original, path)
    with af.SqliteStore(path, readonly=True) as store:
        marker = next(r for r in store.read(child) if r.type == "commit")
    with tampering(path) as conn:  # the same JSON, not canonical: a space after a comma
        loose = marker.body.replace(b",", b", ", 1)
        if schema == 1:
            conn.execute(
                "UPDATE events SET body = ? WHERE run_id = ? AND seq = ?",
                (loose, child, marker.seq),
            )
        else:
            (key,) = conn.execute(
                "SELECT run_key FROM run_keys WHERE run_id = ?", (child,)
            ).fetchone()
            conn.execute(
                "UPDATE rows SET body = ?, stage = NULL, commit_no = NULL, stage_k = NULL "
                "WHERE pos = ?",
                (loose, (key << 32) + marker.seq),
            )
    with af.SqliteStore(path, readonly=True) as store:
        verifier = af.Verifier(store)
        results = dict(verifier.verify_all())
    assert isinstance(results[root], RunVerification)
    error = results[child]
    assert isinstance(error, VerificationError)
    assert (error.code, error.seq) == ("canonical", marker.seq)
    assert _verdicts(path, general=True) == _verdicts(path, general=False)
