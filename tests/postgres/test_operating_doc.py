"""docs/stores.md, "Operating PostgreSQL", runs as written: its SQL blocks (each as the role
its first line names) and its console commands (each exit code as the page says), in page
order, against a throwaway cluster of this module's own (the roles and database names are
the page's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import agentfootprint as af
from agentfootprint.store.postgres import PostgresStore
from throwaway_cluster import ThrowawayCluster

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "stores.md"


def _section(heading: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def _blocks() -> list[tuple[str, str]]:
    """The blocks of "Operating PostgreSQL", then those of "The vault on PostgreSQL"."""
    return [
        found
        for heading in ("### Operating PostgreSQL", "## The vault on PostgreSQL")
        for found in re.findall(r"```(sql|console|python)\n(.*?)```", _section(heading), re.S)
    ]


@pytest.fixture(scope="module")
def cluster(pg_cluster: ThrowawayCluster) -> ThrowawayCluster:
    return pg_cluster


def test_the_page_has_the_blocks_this_test_runs() -> None:
    kinds = [kind for kind, _ in _blocks()]
    assert kinds == [
        *("sql", "console", "sql", "console", "console", "console"),
        *("sql", "console", "python", "console", "console"),
    ]


@pytest.mark.unverified("the demo's runs are verified by the page's own commands")
def test_operating_postgresql_runs_as_written(cluster: ThrowawayCluster, tmp_path: Path) -> None:
    base = f"postgresql://{{}}@127.0.0.1:{cluster.port}/{{}}"
    urls = {
        "ADMIN_URL": cluster.url(),
        "OWNER_URL": base.format("af_owner", "runs"),
        "WRITER_URL": base.format("af_writer", "runs"),
        "AUDITOR_URL": base.format("af_auditor", "runs"),
        "RESTORED_URL": base.format("af_owner", "runs_restored"),
        "VAULT_URL": base.format("af_vault", "vault") + "?key_file=vault.key",
        "NEW_VAULT_URL": base.format("af_vault", "vault") + "?key_file=vault-2.key",
    }
    env = {
        **os.environ,
        **urls,
        "PATH": os.pathsep.join(
            [str(Path(sys.executable).parent), str(cluster.bindir), os.environ.get("PATH", "")]
        ),
    }
    ran: list[str] = []
    for kind, block in _blocks():
        if kind == "python":  # run where the commands run, with their environment
            script = tmp_path / "block.py"
            script.write_text(block, encoding="utf-8")
            done = subprocess.run(
                [sys.executable, str(script)],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, done.stderr
            env["RUN"] = done.stdout.strip()
            ran.append("python block")
            continue
        if kind == "sql":
            first, _, statements = block.partition("\n")
            role = first.removeprefix("-- as ").strip()
            with psycopg.connect(urls[role], autocommit=True) as conn:
                for statement in filter(None, (s.strip() for s in statements.split(";"))):
                    conn.execute(statement)  # one at a time: CREATE DATABASE needs its own
            ran.append(f"sql as {role}")
            continue
        for line in block.splitlines():
            if not line.startswith("$ "):
                continue
            command, _, comment = line[2:].partition("  # ")
            found = re.match(r"exit (\d+)", comment)
            expected = int(found.group(1)) if found else 0
            done = subprocess.run(
                ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True
            )
            shown = done.stdout + done.stderr
            assert done.returncode == expected, (command, shown)
            assert "Traceback" not in shown, (command, shown)
            if "DELETE" in command:
                assert "permission denied" in shown
            if "again.json" in command:
                assert "no disclosure" in shown
            ran.append(command.split()[0] + " " + command.split()[1])
    assert len(ran) == 27, ran

    # what the page claims, checked from the side: the demo's sealed runs are in the log,
    # the restored copy holds the same runs, and the archive verifies on its own
    with PostgresStore(urls["AUDITOR_URL"], readonly=True) as store:
        verdicts = dict(af.Verifier(store).verify_all())
        assert verdicts
        assert all(isinstance(v, af.RunVerification) and v.close for v in verdicts.values())
        sealed = {r for r, v in verdicts.items() if getattr(v, "seal_digest", None)}
        assert {run_id for _, run_id in store.seal_log()} == sealed and len(sealed) == 2
        rows = {run_id: list(store.read(run_id)) for run_id in verdicts}
    with af.SqliteStore(tmp_path / "runs-2026-12.db", readonly=True) as archive:
        archived = archive.run_ids()  # taken before the vault's section recorded its run
        assert set(archived) == sealed
        assert {run_id: list(archive.read(run_id)) for run_id in archived} == {
            run_id: rows[run_id] for run_id in archived
        }
    with psycopg.connect(urls["ADMIN_URL"], autocommit=True) as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()]
        assert "runs" in names and "runs_restored" not in names
    # the redacted run: the log holds only the commitment, the vault (erased) nothing
    assert not (tmp_path / "vault.key").exists() and (tmp_path / "vault-2.key").exists()
    assert b"078-05-1120" in (tmp_path / "disclosures.json").read_bytes()
    with PostgresStore(urls["AUDITOR_URL"], readonly=True) as store:
        assert not any(b"078-05-1120" in row.body for row in store.read(env["RUN"]))
        verified = af.Verifier(store).verify(env["RUN"])
        assert verified.outcome is af.Outcome.VALID_UNSIGNED
