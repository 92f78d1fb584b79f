"""The demo's recorded conversation is a regression gate: today's code must serve it again."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path

import pytest

from agentfootprint.agent.agent import Agent
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent
from agentfootprint.errors import UsageError
from agentfootprint.exchange.transfer import export_runs
from agentfootprint.store.redaction import conversation_redaction
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.testing.replay import assert_replays

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "demo.db"


def test_the_demo_replays_its_golden_runs() -> None:
    assert_replays(lambda: build_demo_agent(None), GOLDEN)


def edited_demo_agent() -> Agent:
    """The demo agent with one word of its system prompt changed."""
    agent = build_demo_agent(None)
    system = ("You are a terse travel helper.", *agent.config.system[1:])
    agent.config = dataclasses.replace(agent.config, system=system)
    return agent


def test_an_edited_demo_agent_is_caught() -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_replays(edited_demo_agent, GOLDEN)
    report = str(failed.value)
    runs = [line for line in report.splitlines() if line.startswith("replay of run ")]
    assert len(runs) == 2  # both runs were replayed and both diverged
    assert all("diverged at call 0: system piece 0" in line for line in runs)
    assert '-  "text": "You are a concise travel helper."' in report
    assert '+  "text": "You are a terse travel helper."' in report
    assert "re-record" in report


def test_the_golden_file_is_self_contained_and_left_untouched() -> None:
    before = hashlib.sha256(GOLDEN.read_bytes()).hexdigest()
    results = assert_replays(lambda: build_demo_agent(None), GOLDEN)
    assert [r.calls_checked for r in results] == [4, 2]
    assert hashlib.sha256(GOLDEN.read_bytes()).hexdigest() == before
    for suffix in ("-wal", "-shm", "-journal"):
        assert not GOLDEN.with_name(GOLDEN.name + suffix).exists()


def test_one_run_or_a_bundle(tmp_path: Path) -> None:
    copy = tmp_path / "demo.db"
    shutil.copyfile(GOLDEN, copy)
    store = SqliteStore(copy)
    first, second = (info.run_id for info in store.runs())
    bundle = tmp_path / "demo.afp"
    export_runs(store, [second], bundle)
    store.close()
    only = assert_replays(lambda: build_demo_agent(None), GOLDEN, first)
    assert [r.original_run for r in only] == [first]
    from_bundle = assert_replays(lambda: build_demo_agent(None), bundle)
    assert [r.original_run for r in from_bundle] == [first, second]  # the ancestor came along


def test_a_factory_must_build_an_agent() -> None:
    with pytest.raises(UsageError, match="must return an agentfootprint Agent"):
        assert_replays(lambda: "not an agent", GOLDEN)  # type: ignore[arg-type,return-value]
    with pytest.raises(UsageError, match="does not exist"):
        assert_replays(lambda: build_demo_agent(None), GOLDEN.with_name("absent.db"))


def test_a_redacted_golden_run_replays_with_its_vault(tmp_path: Path) -> None:
    """A golden run recorded under conversation_redaction() is gated with its vault (read
    from a copy, left untouched); without it the gate fails saying the vault is needed."""
    golden, vault = tmp_path / "golden.db", tmp_path / "golden.vault.db"
    agent = build_demo_agent(golden, redact=conversation_redaction(), disclosures=vault)
    first = agent.run_sync(DEMO_QUESTIONS[0])
    agent.run_sync(DEMO_QUESTIONS[1], continue_from=first)
    agent.close()
    before = hashlib.sha256(vault.read_bytes()).hexdigest()

    def factory() -> Agent:
        return build_demo_agent(None, redact=conversation_redaction())

    results = assert_replays(factory, golden, disclosures=vault)
    assert [r.calls_checked for r in results] == [4, 2]
    assert hashlib.sha256(vault.read_bytes()).hexdigest() == before
    with pytest.raises(pytest.fail.Exception) as failed:
        assert_replays(factory, golden)
    assert "disclosure vault" in str(failed.value)
    with pytest.raises(UsageError, match="does not exist"):
        assert_replays(factory, golden, disclosures=tmp_path / "absent.db")
