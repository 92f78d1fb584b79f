"""A sealed run cut with its close and seal is INVALID seal-log by every path (docs/log-format.md
section 9.2 step 5; docs/seals.md section 7): ``verify(run_id)``, ``verify_all``, ``verify
--run``, ``verify --json``, listed once, in SQLite files of both storage schemas and the
in-memory store (PostgreSQL: tests/postgres/test_postgres_seal_log.py). Cut with its seal log
row too, it reads as a crash (UNSEALED). A bundle carries no seal log; exporting the cut run is
refused, since it no longer verifies. The seal log is read before the run's rows: a run sealed
while it is verified is never taken for a cut one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main as cli
from agentfootprint.errors import VerificationError
from agentfootprint.testing.seals import SIGNER
from agentfootprint.testing.tamper import new_file_schema, plain, read_rows, rewrite, tampering

KEY = SIGNER.public.text


def record(store: Any, count: int = 2) -> list[str]:
    with af.Agent(
        provider=af.MockProvider([f"answer {i}" for i in range(count)]),
        model="m",
        store=store,
        signer=SIGNER,
    ) as agent:
        return [agent.run_sync(f"question {i}").run_id for i in range(count)]


@pytest.fixture(params=[1, 2], ids=["schema 1", "schema 2"])
def cut(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """Two sealed runs in a file of the given storage schema; the first cut with its close and
    seal, its seal log row kept."""
    path = tmp_path / "cut.db"
    with new_file_schema(request.param):
        ids = record(path)
    with tampering(path) as conn:
        rewrite(conn, ids[0], plain(read_rows(conn, ids[0]))[:-2])
    yield path, ids


def test_verifying_the_cut_run_alone_is_invalid_seal_log(cut: tuple[Path, list[str]]) -> None:
    path, ids = cut
    with af.SqliteStore(path, readonly=True) as store:
        for keys in ([KEY], []):
            with pytest.raises(VerificationError) as info:
                af.Verifier(store, trusted_keys=keys).verify(ids[0])
            assert (info.value.code, info.value.seq) == ("seal-log", None)
            assert "its tail was cut" in str(info.value)
        assert af.Verifier(store, trusted_keys=[KEY]).verify(ids[1]).outcome is af.Outcome.VALID
        verdicts = list(af.Verifier(store, trusted_keys=[KEY]).verify_all())
    assert sorted(run_id for run_id, _ in verdicts) == sorted(ids)  # once each, no finding
    found = dict(verdicts)[ids[0]]
    assert isinstance(found, VerificationError) and found.code == "seal-log"


def test_the_command_line_says_invalid_by_every_path(cut: tuple[Path, list[str]]) -> None:
    path, ids = cut
    runner = CliRunner()
    alone = runner.invoke(cli, ["verify", str(path), "--run", ids[0], "--key", KEY])
    assert alone.exit_code == 1 and "[seal-log]" in alone.output, alone.output
    whole = runner.invoke(cli, ["verify", str(path), "--key", KEY])
    assert whole.exit_code == 1 and whole.output.count(ids[0]) == 1, whole.output
    for extra in ([], ["--run", ids[0]]):
        done = runner.invoke(cli, ["verify", str(path), "--key", KEY, "--json", *extra])
        document = json.loads(done.output)
        listed = [v["run_id"] for v in document["runs"]]
        assert listed.count(ids[0]) == 1 and len(listed) == len(set(listed)), listed
        (verdict,) = [v for v in document["runs"] if v["run_id"] == ids[0]]
        assert verdict["error"]["code"] == "seal-log" and verdict["error"]["seq"] is None
        assert document["exit"] == done.exit_code == 1


def test_cut_with_its_seal_log_row_too_it_reads_as_a_crash(cut: tuple[Path, list[str]]) -> None:
    path, ids = cut
    with tampering(path) as conn:
        conn.execute("DELETE FROM seal_log WHERE run_id = ?", (ids[0],))
    with af.SqliteStore(path, readonly=True) as store:
        verifier = af.Verifier(store, trusted_keys=[KEY])
        assert verifier.verify(ids[0]).outcome is af.Outcome.UNSEALED
    result = CliRunner().invoke(cli, ["verify", str(path), "--run", ids[0], "--key", KEY])
    assert result.exit_code == 3, result.output


def test_a_sealed_run_its_log_does_not_list_is_invalid_alone(tmp_path: Path) -> None:
    path = tmp_path / "unlisted.db"
    ids = record(path)
    with tampering(path) as conn:
        conn.execute("DELETE FROM seal_log WHERE run_id = ?", (ids[1],))
    with af.SqliteStore(path, readonly=True) as store, pytest.raises(VerificationError) as info:
        af.Verifier(store).verify(ids[1])
    assert info.value.code == "seal-log" and "no leaf in the seal log" in str(info.value)


def test_a_run_without_a_signer_that_the_log_lists_is_invalid_alone(tmp_path: Path) -> None:
    path = tmp_path / "listed.db"
    record(path, 1)
    with af.Agent(provider=af.MockProvider(["x"]), model="m", store=path) as agent:
        plain_run = agent.run_sync("q").run_id
    with tampering(path) as conn:
        conn.execute("INSERT INTO seal_log VALUES (1, ?)", (plain_run,))
    with af.SqliteStore(path, readonly=True) as store, pytest.raises(VerificationError) as info:
        af.Verifier(store).verify(plain_run)
    assert info.value.code == "seal-log"


def test_the_memory_store_is_checked_the_same_way() -> None:
    store = af.MemoryStore()
    ids = record(store)
    del store._events[ids[0]][-2:]  # the cut: its close and seal (the log keeps its leaf)
    with pytest.raises(VerificationError) as info:
        af.Verifier(store).verify(ids[0])
    assert info.value.code == "seal-log"
    assert [r for r, _ in af.Verifier(store).verify_all()] == ids


def test_exporting_the_cut_run_is_refused(cut: tuple[Path, list[str]], tmp_path: Path) -> None:
    """A bundle has no seal log (log-format.md section 13): the cut run cannot be carried
    into one, where it would read as a crash."""
    path, ids = cut
    out = tmp_path / "cut.afp"
    result = CliRunner().invoke(cli, ["export", str(path), "--run", ids[0], "--out", str(out)])
    assert result.exit_code == 1 and "[seal-log]" in result.output, result.output
    assert not out.exists()


class SealedMeanwhile(af.MemoryStore):
    """A store whose writer seals a run between the verifier's reads: the seal log is read
    first (as it was), the run's rows after (as they are now)."""

    def __init__(self) -> None:
        super().__init__()
        self.log_reads = 0
        self.held: dict[str, list[Any]] = {}
        self.held_leaves: list[str] = []

    def seal_log(self) -> list[tuple[object, object]]:
        self.log_reads += 1
        log = super().seal_log()
        if self.log_reads == 1:  # the first read: as before the run's close and seal
            return [row for row in log if row[1] not in self.held_leaves]
        return log


def test_a_run_sealed_after_the_log_was_read_is_not_taken_for_a_cut_one() -> None:
    store = SealedMeanwhile()
    (run_id,) = record(store, 1)
    store.held_leaves.append(run_id)  # the first read does not list it, the rows are sealed
    verified = af.Verifier(store, trusted_keys=[KEY]).verify(run_id)
    assert verified.outcome is af.Outcome.VALID
    assert store.log_reads == 2  # the first read, and one fresh read for the sealed run
