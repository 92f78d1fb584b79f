"""`agentfootprint scan` on PostgreSQL: a log's rows and a vault's disclosures (read through
its master key); a server's files are not ours to sweep, so no bytes are reported."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, main
from agentfootprint.store.postgres_url import with_database

TOKEN = "pg-token/A+b&c=d-0099"
SSN = "SSN-123-45-6789-pg"


@pytest.fixture
def vault_url(pg_server: str, tmp_path: Path) -> Iterator[str]:
    import psycopg

    name = f"v_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    key = tmp_path / "master.key"
    made = CliRunner().invoke(main, ["vault-key", "new", str(key)])
    assert made.exit_code == 0, made.output
    try:
        yield f"{with_database(pg_server, name)}?key_file={key}"
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_scan_a_postgres_log_and_vault(pg_database: str, vault_url: str, tmp_path: Path) -> None:
    tool = af.define_tool(
        name="crm", description="record", execute=lambda a: {"token": TOKEN, "ssn": SSN}
    )
    agent = af.Agent(
        provider=af.MockProvider(
            [af.reply(tool_calls=[af.tool_call("crm", {"id": "1"})]), f"token {TOKEN}"]
        ),
        model="m",
        tools=[tool],
        store=pg_database,
        redact=af.RedactionPolicy(keys=["ssn"]),
        disclosures=vault_url,
    )
    agent.run_sync("look it up")
    agent.close()
    chosen = tmp_path / "literals.txt"
    chosen.write_text(f"{TOKEN}\n{SSN}\n")
    runner = CliRunner()
    log = runner.invoke(main, ["scan", pg_database, "--literals", str(chosen), "--json"])
    assert log.exit_code == EXIT_INVALID, log.output
    document = json.loads(log.output)
    assert document["found"] == [0]  # the token, never the redacted value
    assert {r["path"] for r in document["rows"]} >= {"history", "final_answer"}
    assert document["bytes"] == [] and document["read"]["files"] == []
    vault = runner.invoke(main, ["scan", vault_url, "--literals", str(chosen), "--json"])
    assert vault.exit_code == EXIT_INVALID, vault.output
    found = json.loads(vault.output)
    assert found["found"] == [1] and {d["key"] for d in found["disclosures"]} == {"ssn"}
    assert "password" not in found["target"]
    clean = tmp_path / "clean.txt"
    clean.write_text("absent-from-everything\n")
    none = runner.invoke(main, ["scan", pg_database, "--literals", str(clean)])
    assert none.exit_code == EXIT_OK and "no literal found" in none.output
