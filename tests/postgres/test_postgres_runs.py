"""Agents recording into PostgreSQL, the CLI reading it by URL, and what the database itself
enforces: append-only for every role, and a writer role without UPDATE or DELETE."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent
from agentfootprint.cli import main as cli
from agentfootprint.errors import (
    AppendOnlyError,
    NewerVersionError,
    NotALogError,
    StoreConflictError,
    StoreError,
    UsageError,
)
from agentfootprint.store.postgres import PostgresStore
from agentfootprint.store.postgres_url import with_database
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.seals import SIGNER
from agentfootprint.testing.store_contract import open_body
from agentfootprint.verify.checkpoint import check_checkpoint, log_leaves, make_checkpoint


@pytest.fixture
def pg_store(pg_database: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_database)
    yield store
    store.close()


def _sql(url: str, statement: str, args: tuple[Any, ...] = ()) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, args)
        return cur.fetchall() if cur.description else []


def test_an_agent_records_into_postgresql_by_url_and_every_run_verifies(pg_database: str) -> None:
    agent = build_demo_agent(pg_database)
    try:
        first = agent.run_sync(DEMO_QUESTIONS[0])
        second = agent.run_sync(DEMO_QUESTIONS[1], continue_from=first)
    finally:
        agent.close()
    assert (first.calls, second.calls) == (4, 2)
    with PostgresStore(pg_database, readonly=True) as store:
        verdicts = dict(af.Verifier(store).verify_all())
        assert set(verdicts) == {first.run_id, second.run_id}
        assert all(v.outcome is af.Outcome.VALID_UNSIGNED for v in verdicts.values())
        assert [r.run_id for r in store.runs()] == [first.run_id, second.run_id]
        assert store.run_info(second.run_id).parent_run_id == first.run_id


def test_a_run_in_postgresql_is_byte_for_byte_the_run_in_sqlite(
    pg_database: str, tmp_path: Path
) -> None:
    """One conversation recorded into both backends with one clock and one run id source
    gives the same rows: the store never changes a byte."""
    af.Agent(provider=af.MockProvider(["hi"]), model="m", store=pg_database).close()
    with PostgresStore(pg_database) as pg:
        run = af.Agent(provider=af.MockProvider(["hello"]), model="m", store=pg).run_sync("q")
        rows = list(pg.read(run.run_id))
    lite = af.SqliteStore(tmp_path / "copy.db")
    lite.append(rows)
    assert list(lite.read(run.run_id)) == rows
    lite.close()


def test_sealed_runs_get_leaves_and_a_checkpoint_of_the_database_checks(
    pg_database: str,
) -> None:
    with af.Agent(
        provider=af.MockProvider([f"answer {i}" for i in range(3)]),
        model="m",
        store=pg_database,
        signer=SIGNER,
    ) as agent:
        ids = [agent.run_sync(f"question {i}").run_id for i in range(3)]
    with PostgresStore(pg_database, readonly=True) as store:
        assert store.seal_log() == list(enumerate(ids))
        verifier = af.Verifier(store, trusted_keys=[SIGNER.public])
        note = make_checkpoint(verifier, SIGNER, "agentfootprint/pg-test")
        checkpoint = check_checkpoint(note, [SIGNER.public], log_leaves(verifier))
        assert checkpoint.size == 3
        assert all(v.outcome is af.Outcome.VALID for _, v in verifier.verify_all())


def test_update_delete_and_truncate_are_refused_by_the_database(
    pg_store: PostgresStore, pg_database: str
) -> None:
    run = af.Agent(provider=af.MockProvider(["x"]), model="m", store=pg_store).run_sync("q")
    for statement in (
        "UPDATE events SET body = 'x'::bytea WHERE seq = 1",
        "DELETE FROM events WHERE seq = 1",
        "TRUNCATE events",
        "UPDATE runs SET conversation_id = 'other'",
        "DELETE FROM seal_log",
        "DELETE FROM schema_version",
    ):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            _sql(pg_database, statement)
    assert af.Verifier(pg_store).verify(run.run_id).outcome is af.Outcome.VALID_UNSIGNED


def test_the_store_names_an_append_only_refusal(pg_store: PostgresStore) -> None:
    from agentfootprint.store.postgres import translate_errors

    with (
        pytest.raises(AppendOnlyError),
        translate_errors("changing a row"),
        pg_store._cursor("changing a row", write=True) as cur,
    ):
        cur.execute("DELETE FROM events")


def test_a_role_without_update_or_delete_appends_and_verifies(pg_database: str) -> None:
    PostgresStore(pg_database).close()  # the owner creates the schema
    role = "af_writer_" + pg_database.rsplit("/", 1)[1][-8:]
    _sql(pg_database, f"CREATE ROLE {role} LOGIN")
    try:
        _sql(pg_database, f"GRANT SELECT, INSERT ON events, runs, seal_log TO {role}")
        _sql(pg_database, f"GRANT SELECT ON schema_version TO {role}")
        writer_url = pg_database.replace("af_admin@", f"{role}@", 1)
        with af.Agent(
            provider=af.MockProvider(["written by the writer role"]),
            model="m",
            store=writer_url,
            signer=SIGNER,
        ) as agent:
            run = agent.run_sync("q")
        with PostgresStore(writer_url, readonly=True) as store:
            result = af.Verifier(store, trusted_keys=[SIGNER.public]).verify(run.run_id)
            assert result.outcome is af.Outcome.VALID
        for statement in ("UPDATE events SET ts = 0", "DELETE FROM events", "TRUNCATE events"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                _sql(writer_url, statement)
    finally:
        _sql(pg_database, f"DROP OWNED BY {role}")
        _sql(pg_database, f"DROP ROLE {role}")


def _schema_1_log(url: str, runs: int) -> None:
    """A log as a writer of schema version 1 left it (migration 1 only), holding ``runs``
    recorded runs."""
    from agentfootprint.store.base import run_index_from_open
    from agentfootprint.store.postgres import MIGRATIONS

    memory = af.MemoryStore()
    with af.Agent(provider=af.MockProvider(["a"] * runs), model="m", store=memory) as agent:
        for i in range(runs):
            agent.run_sync(f"q{i}")
    version, name, statements = MIGRATIONS[0]
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (%s, %s, 0)", (version, name))
        for info in memory.runs():
            events = list(memory.read(info.run_id))
            conversation, parent = run_index_from_open(events[0])
            conn.execute(
                "INSERT INTO runs (run_id, conversation_id, parent_run_id, opened_at) "
                "VALUES (%s, %s, %s, %s)",
                (info.run_id, conversation, parent, events[0].ts),
            )
            conn.cursor().executemany(
                "INSERT INTO events (run_id, seq, type, ts, body, event_hash, chain_hash) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (e.run_id, e.seq, e.type, e.ts, e.body, e.event_hash, e.chain_hash)
                    for e in events
                ],
            )


def _position_indexed(url: str) -> bool:
    found = _sql(url, "SELECT 1 FROM pg_indexes WHERE indexname = 'events_position_key'")
    return bool(found)


def _all_valid(store: PostgresStore) -> list[Any]:
    return [getattr(r, "outcome", r) for _, r in af.Verifier(store).verify_all()]


def test_a_schema_1_log_is_read_as_it_is_and_migrated_by_its_owner(pg_database: str) -> None:
    _schema_1_log(pg_database, 2)
    with PostgresStore(pg_database, readonly=True) as reader:
        assert reader.schema_version() == 1
        assert _all_valid(reader) == [af.Outcome.VALID_UNSIGNED] * 2
    assert _position_indexed(pg_database)
    with PostgresStore(pg_database) as owner:  # migration 2 drops the index
        assert owner.schema_version() == 2
        with af.Agent(provider=af.MockProvider(["b"]), model="m", store=owner) as agent:
            agent.run_sync("after")
        assert _all_valid(owner) == [af.Outcome.VALID_UNSIGNED] * 3
    assert not _position_indexed(pg_database)
    positions = _sql(pg_database, "SELECT position FROM events ORDER BY position")
    assert len(set(positions)) == len(positions)  # the identity, without its index


def test_a_writer_that_does_not_own_a_schema_1_log_writes_it_as_it_is(pg_database: str) -> None:
    _schema_1_log(pg_database, 1)
    role = "af_old_writer_" + pg_database.rsplit("/", 1)[1][-8:]
    _sql(pg_database, f"CREATE ROLE {role} LOGIN")
    try:
        _sql(pg_database, f"GRANT SELECT, INSERT ON events, runs, seal_log TO {role}")
        _sql(pg_database, f"GRANT SELECT ON schema_version TO {role}")
        writer_url = pg_database.replace("af_admin@", f"{role}@", 1)
        with PostgresStore(writer_url) as writer:  # cannot apply migration 2: not the owner
            assert writer.schema_version() == 1
            with af.Agent(provider=af.MockProvider(["w"]), model="m", store=writer) as agent:
                agent.run_sync("by the writer")
            assert _all_valid(writer) == [af.Outcome.VALID_UNSIGNED] * 2
        assert _position_indexed(pg_database)
        with PostgresStore(pg_database) as owner:  # `init` as the owner
            assert owner.schema_version() == 2
    finally:
        _sql(pg_database, f"DROP OWNED BY {role}")
        _sql(pg_database, f"DROP ROLE {role}")


def test_a_database_that_is_not_a_log_is_refused_and_left_alone(pg_database: str) -> None:
    _sql(pg_database, "CREATE TABLE customers (id integer)")
    with pytest.raises(NotALogError, match="other tables \\(customers\\)"):
        PostgresStore(pg_database)
    tables = _sql(pg_database, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    assert tables == [("customers",)]


def test_reading_never_creates_anything(pg_database: str) -> None:
    with pytest.raises(NotALogError, match="holds no log"):
        PostgresStore(pg_database, readonly=True)
    assert _sql(pg_database, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'") == []


def test_a_read_only_store_refuses_to_append(pg_store: PostgresStore, pg_database: str) -> None:
    with (
        PostgresStore(pg_database, readonly=True) as reader,
        pytest.raises(StoreError, match="read-only"),
    ):
        RunWriter(reader, "r1").append([("run.open", open_body("r1"))])


def test_a_newer_schema_is_refused(pg_store: PostgresStore, pg_database: str) -> None:
    pg_store.close()
    _sql(pg_database, "ALTER TABLE schema_version DISABLE TRIGGER USER")
    _sql(pg_database, "INSERT INTO schema_version VALUES (99, 'from the future', 0)")
    for readonly in (False, True):
        with pytest.raises(NewerVersionError, match="schema version 99"):
            PostgresStore(pg_database, readonly=readonly)


def test_two_hosts_creating_one_new_database_at_once_both_open_it(pg_database: str) -> None:
    opened: list[PostgresStore] = []
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            opened.append(PostgresStore(pg_database))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(opened) == 4
    recorded = _sql(pg_database, "SELECT version FROM schema_version ORDER BY version")
    assert recorded == [(1,), (2,)]  # each migration once
    for store in opened:
        store.close()


def test_two_stores_appending_one_run_conflict_and_keep_one_batch(pg_database: str) -> None:
    with PostgresStore(pg_database) as a, PostgresStore(pg_database) as b:
        RunWriter(a, "r1").append([("run.open", open_body("r1"))])
        first, second = RunWriter(a, "r1"), RunWriter(b, "r1")
        for writer in (first, second):
            writer.seq, writer.head = 1, a.run_info("r1").head
        commit = ("commit", {"commit": 0, "stage": "s", "stage_run": "s#0", "writes": 0})
        first.append([commit])
        with pytest.raises(StoreConflictError):
            second.append([commit])
        assert a.run_info("r1").events == 2


def test_durability_normal_records_and_verifies(pg_database: str) -> None:
    url = pg_database + "?durability=normal"
    with af.Agent(provider=af.MockProvider(["fast"]), model="m", store=url) as agent:
        run = agent.run_sync("q")
        assert agent.store.durability == "normal"  # type: ignore[attr-defined]
    with PostgresStore(pg_database, readonly=True) as store:
        assert af.Verifier(store).verify(run.run_id).outcome is af.Outcome.VALID_UNSIGNED


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("postgresql://h/db?durability=sometimes", "durability must be"),
        ("postgresql://h/db?durability=full&durability=full", "given twice"),
        ("postgresql://h/db?colour=red", "libpq refuses"),
        ("postgresql://h", "names no database"),
        ("postgresql://h/db#frag", "fragment"),
    ],
)
def test_bad_urls_are_usage_errors(url: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        af.Agent(provider=af.MockProvider(["x"]), model="m", store=url)


def test_a_password_is_never_echoed(pg_server: str) -> None:
    url = with_database(pg_server, "no_such_db").replace("@", ":s3cret-pw@", 1)
    with pytest.raises(StoreError) as caught:
        PostgresStore(url, timeout=2)
    assert "s3cret-pw" not in str(caught.value)
    assert "no_such_db" in str(caught.value)


def test_an_unreachable_server_is_a_typed_error() -> None:
    with pytest.raises(af.StoreUnavailableError, match="could not be reached"):
        PostgresStore("postgresql://nobody@127.0.0.1:9/db", timeout=2)


# -- the CLI, by URL ---------------------------------------------------------------------


def test_the_cli_reads_verifies_exports_and_copies_by_url(pg_database: str, tmp_path: Path) -> None:
    with af.Agent(provider=af.MockProvider(["one", "two"]), model="m", store=pg_database) as agent:
        ids = [agent.run_sync("q1").run_id, agent.run_sync("q2").run_id]
    runner = CliRunner()
    listed = runner.invoke(cli, ["runs", pg_database])
    assert listed.exit_code == 0, listed.output
    assert all(run_id in listed.output for run_id in ids)
    verified = runner.invoke(cli, ["verify", pg_database])
    assert verified.exit_code == 0, verified.output
    assert verified.output.count("VALID") >= 2
    bundle = tmp_path / "runs.afb"
    exported = runner.invoke(cli, ["export", pg_database, "--run", ids[1], "--out", str(bundle)])
    assert exported.exit_code == 0, exported.output
    copied_file = tmp_path / "copy.db"
    copied = runner.invoke(cli, ["copy", pg_database, str(copied_file)])
    assert copied.exit_code == 0, copied.output
    with af.SqliteStore(copied_file, readonly=True) as lite, PostgresStore(pg_database) as pg:
        assert [list(lite.read(i)) for i in ids] == [list(pg.read(i)) for i in ids]
    same = runner.invoke(cli, ["copy", pg_database, pg_database])
    assert same.exit_code == 2 and "is SRC" in same.output


def test_the_cli_copies_a_file_into_postgresql_and_imports_a_bundle(
    pg_database: str, pg_server: str, tmp_path: Path
) -> None:
    source = tmp_path / "runs.db"
    with af.Agent(provider=af.MockProvider(["one"]), model="m", store=source) as agent:
        run_id = agent.run_sync("q").run_id
    runner = CliRunner()
    copied = runner.invoke(cli, ["copy", str(source), pg_database])
    assert copied.exit_code == 0, copied.output
    assert "s3cret" not in copied.output
    again = runner.invoke(cli, ["copy", str(source), pg_database])
    assert again.exit_code == 0 and "1 already there" in again.output
    with PostgresStore(pg_database, readonly=True) as pg:
        assert af.Verifier(pg).verify(run_id).outcome is af.Outcome.VALID_UNSIGNED


def test_the_cli_refuses_a_postgresql_url_that_names_no_log(pg_database: str) -> None:
    result = CliRunner().invoke(cli, ["verify", pg_database])
    assert result.exit_code == 2
    assert "holds no log" in result.output
    assert "Traceback" not in result.output


def test_the_readme_block_records_into_postgresql(
    pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "af_writer" in b]
    exec(
        compile(
            block.replace("postgresql://af_writer@db.internal/runs", pg_database),
            "README.md",
            "exec",
        ),
        {},
    )
    assert capsys.readouterr().out == "Recorded.\n"
    with PostgresStore(pg_database, readonly=True) as store:
        assert [v.outcome for _, v in af.Verifier(store).verify_all()] == [
            af.Outcome.VALID_UNSIGNED
        ]


def test_a_vault_in_the_logs_own_database_is_refused(pg_database: str, tmp_path: Path) -> None:
    key = tmp_path / "vault.key"
    key.write_text("ab" * 32 + "\n")
    with pytest.raises(UsageError, match="the log's own PostgreSQL database") as caught:
        af.Agent(
            provider=af.MockProvider(["x"]),
            model="m",
            store=pg_database,
            redact=af.RedactionPolicy(keys=["ssn"]),
            disclosures=f"{pg_database}?key_file={key}",
        )
    assert caught.value.option == "disclosures"
    assert _sql(pg_database, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'") == []


def test_the_vault_key_commands(pg_server: str, tmp_path: Path) -> None:
    import uuid

    name = f"v_{uuid.uuid4().hex[:12]}"
    _sql(pg_server, f'CREATE DATABASE "{name}"')
    try:
        runner = CliRunner()
        old, new = tmp_path / "old.key", tmp_path / "new.key"
        for path in (old, new):
            made = runner.invoke(cli, ["vault-key", "new", str(path)])
            assert made.exit_code == 0 and path.stat().st_mode & 0o077 == 0, made.output
        again = runner.invoke(cli, ["vault-key", "new", str(old)])
        assert again.exit_code == 2 and "never overwritten" in again.output
        url = with_database(pg_server, name)
        from agentfootprint.store.postgres_vault import PostgresVault
        from agentfootprint.testing.vault_contract import disclosure

        with PostgresVault(url, master_key=old) as vault:
            vault.put("r1", [disclosure("kept-value")])
        rotated = runner.invoke(cli, ["vault-key", "rotate", f"{url}?key_file={old}", str(new)])
        assert rotated.exit_code == 0 and "wrapped 1 keys again" in rotated.output, rotated.output
        stale = runner.invoke(cli, ["erase", f"{url}?key_file={old}", "--run", "r1"])
        assert stale.exit_code == 2 and "Traceback" not in stale.output
        with PostgresVault(url, master_key=new) as vault:
            assert [d.value for d in vault.disclose(vault.commitments("r1"))] == ["kept-value"]
        lite = runner.invoke(cli, ["vault-key", "rotate", str(old), str(new)])
        assert lite.exit_code == 2 and "SQLite vault" in lite.output
    finally:
        _sql(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
