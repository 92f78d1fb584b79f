"""The tamper tools (agentfootprint.testing.tamper) on both storage schemas
(docs/log-format.md section 4): rows read raw are the rows the store yields, a re-chained
rewrite of unchanged rows reproduces them and verifies, and a re-chained forgery is still
caught by what binds content."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

import agentfootprint as af
from agentfootprint.testing.tamper import (
    layout_of,
    new_file_schema,
    plain,
    read_rows,
    reencoded,
    rewrite,
    tampering,
    verification_error,
)


def _recorded(path: Path, schema: int) -> list[str]:
    tool = af.define_tool(name="lookup", description="look up", execute=lambda args: "rows")
    script = [af.reply(tool_calls=[af.tool_call("lookup", {"q": "a"})]), "done", "again"]
    with new_file_schema(schema):
        store = af.SqliteStore(path)
    try:
        agent = af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=store)
        first = agent.run_sync("hi")
        second = agent.run_sync("more", continue_from=first)
    finally:
        store.close()
    return [first.run_id, second.run_id]


def _stored(path: Path, run_id: str) -> list[tuple[object, ...]]:
    with af.SqliteStore(path, readonly=True) as store:
        return [
            (e.seq, e.type, e.ts, e.body, e.event_hash, e.chain_hash) for e in store.read(run_id)
        ]


@pytest.mark.parametrize("schema", [1, 2])
def test_rows_read_raw_are_the_stored_rows(tmp_path: Path, schema: int) -> None:
    path = tmp_path / "log.db"
    ids = _recorded(path, schema)
    with closing(sqlite3.connect(path)) as conn:
        assert layout_of(conn) == schema
        rows = {run_id: read_rows(conn, run_id) for run_id in ids}
    for run_id in ids:
        assert [tuple(r) for r in rows[run_id]] == _stored(path, run_id)


@pytest.mark.parametrize("schema", [1, 2])
def test_rewrite_is_faithful_and_forgeries_are_caught(tmp_path: Path, schema: int) -> None:
    path = tmp_path / "log.db"
    root, child = _recorded(path, schema)
    before = {run_id: _stored(path, run_id) for run_id in (root, child)}
    with tampering(path) as conn:
        for run_id in (root, child):
            rewrite(conn, run_id, plain(read_rows(conn, run_id)))
    assert {run_id: _stored(path, run_id) for run_id in (root, child)} == before
    with af.SqliteStore(path, readonly=True) as store:
        for run_id in (root, child):
            assert af.Verifier(store).verify(run_id).outcome is af.Outcome.VALID_UNSIGNED

    def other_answer(body: dict[str, object]) -> None:
        if body.get("path") == "final_answer":
            body["value"] = "forged"

    with tampering(path) as conn:
        rows = read_rows(conn, root)
        assert any(b'"final_answer"' in r.body for r in rows)
        rewrite(conn, root, [reencoded(r, other_answer) for r in rows])
    # the root re-chains on its own (its receipts do not bind the answer); the child's
    # parent head no longer matches
    assert verification_error(path, child).code == "ancestry"


def test_an_append_only_file_is_writable_while_tampering(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    _recorded(path, 2)
    with closing(sqlite3.connect(path)) as conn, pytest.raises(sqlite3.DatabaseError):
        conn.execute("DELETE FROM rows")
    with tampering(path) as conn:
        conn.execute("DELETE FROM rows WHERE pos = (SELECT MAX(pos) FROM rows)")
    with af.SqliteStore(path, readonly=True) as store:
        verdicts = dict(af.Verifier(store).verify_all())
    assert any(isinstance(v, af.VerificationError) for v in verdicts.values())
