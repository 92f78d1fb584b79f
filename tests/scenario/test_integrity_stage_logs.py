"""Logs whose integrity checks committed their declarations in an ``integrity-contracts``
stage (the build before the declarations moved into the turn's start) verify, and
``findings --recompute`` agrees with what each recorded.

``tests/data/integrity_stage/integrity_stage.db`` (see its ``make_integrity_stage_logs.py``)
holds a turn armed by dials and ``arguments_from``, its continuation by the same agent, a
continuation by an agent with no declarations (it inherits ``tool_contracts`` and checked
nothing), a ``dev`` turn and a turn of the results layer alone.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from recorded_logs import maker, pristine_copy, runs

import agentfootprint as af
from agentfootprint.audit.integrity import findings
from agentfootprint.logformat.canonical import parse

FILE = Path(__file__).resolve().parents[1] / "data" / "integrity_stage" / "integrity_stage.db"
RUNS = runs("integrity_stage")
MAKER = maker("integrity_stage", "make_integrity_stage_logs")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """A copy of the file (a replay records into its own store; the data stays pristine)."""
    return pristine_copy(FILE, tmp_path)


def _stages(store: af.SqliteStore, run_id: str) -> list[str]:
    return [parse(r.body)["stage"] for r in store.read(run_id) if r.type == "commit"]


def test_every_run_verifies_and_holds_the_stage_where_its_agent_took_part() -> None:
    before = hashlib.sha256(FILE.read_bytes()).hexdigest()
    with af.SqliteStore(FILE, readonly=True) as store:
        found = dict(af.Verifier(store).verify_all())
        assert set(found) == set(RUNS.values())
        assert all(v.outcome == af.Outcome.VALID_UNSIGNED for v in found.values())
        staged = {n for n, r in RUNS.items() if "integrity-contracts" in _stages(store, r)}
    assert staged == {"observe", "continued-same", "dev", "period"}
    assert hashlib.sha256(FILE.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("name", list(MAKER.RUNS))
def test_the_recompute_agrees_with_every_run(name: str) -> None:
    """Armed at the ``integrity-contracts`` stage these logs hold, as they were."""
    with af.SqliteStore(FILE, readonly=True) as store:
        report = findings(store, RUNS[name], recompute=True)
    assert report.agrees, report.differences
    recorded, again = report.recorded, report.recomputed
    assert again is not None
    armed = {"observe": 3, "continued-same": 1, "dev": 3}
    assert len(again.findings) == len(recorded.findings) == armed.get(name, 0)
    assert (again.disposition is not None) is (name in armed)
    if name == "dev":
        assert again.disposition is not None and again.disposition["posture"] == "dev"
    if name == "period":  # the results layer alone: its declarations read from the stage
        assert [r["verdict"] for r in again.period_rows] == ["undeclared"]


def test_todays_build_commits_the_declarations_at_the_turns_start(tmp_path: Path) -> None:
    """The same agent today: no ``integrity-contracts`` stage, ``tool_contracts`` written in
    the seed's commit, the posture recorded because a check is armed; the recompute agrees."""
    with af.SqliteStore(tmp_path / "today.db") as store:
        agent, message, _ = MAKER.RUNS["observe"]
        result = agent(store).run_sync(message)
        rows = [(r.type, parse(r.body)) for r in store.read(result.run_id)]
        assert "integrity-contracts" not in _stages(store, result.run_id)
        seed = next(i for i, (t, b) in enumerate(rows) if t == "commit")
        assert rows[seed][1]["stage"] == "seed"
        assert "tool_contracts" in [b.get("path") for t, b in rows[:seed] if t == "write"]
        assert rows[0][1]["options"]["integrity_posture"] == "observe"
        report = findings(store, result.run_id, recompute=True)
    assert report.agrees and len(report.recorded.findings) == 3


def test_a_replay_today_serves_every_request_alike_and_names_the_moved_declarations(
    log: Path,
) -> None:
    """Every request the model was served matches; the record differs where the declarations
    moved (into the seed's commit), and the replay says so rather than pass."""
    agent, _, _ = MAKER.RUNS["observe"]
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent(None), log, RUNS["observe"])
    said = str(caught.value)
    assert "every request matched" in said and "tool_contracts" in said
