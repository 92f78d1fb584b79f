"""``Agent(disclosures=...)`` takes a vault object of the contract (as ``store=`` takes an
EventStore): a run redacted into a :class:`MemoryVault` records, verifies, and its values
can be disclosed, proven, opened by a continuation and a replay, and erased."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.logformat.commitments import COMMIT_KEY
from agentfootprint.store.memory_vault import MemoryVault
from agentfootprint.testing.pytest_plugin import VerifiedRuns


def _tool() -> af.Tool:
    return af.define_tool(
        name="lookup",
        description="Look a person up.",
        execute=lambda args: {"ssn": "999-00-" + args["q"], "name": "Ann"},
    )


def _script() -> list[Any]:
    return [
        af.reply(tool_calls=[af.tool_call("lookup", {"q": "1234", "ssn": "111-22-3333"})]),
        "Ann's record is on file.",
    ]


def _agent(vault: Any, script: list[Any] | None = None, **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(_script() if script is None else script),
        model="m",
        tools=[_tool()],
        redact=af.RedactionPolicy(keys=["ssn"]),
        disclosures=vault,
        **options,
    )


def test_a_run_redacted_into_a_memory_vault_verifies_and_discloses(
    verified_runs: VerifiedRuns,
) -> None:
    vault = MemoryVault()
    agent = _agent(vault)
    assert agent.vault is vault
    result = agent.run_sync("find Ann")
    assert result.run_id in verified_runs.run_ids  # the plugin verified it at its close
    rows = b"".join(bytes(e.body) for e in agent.store.read(result.run_id))
    assert b"999-00-1234" not in rows and b"111-22-3333" not in rows
    assert COMMIT_KEY.encode() in rows
    verifier = af.Verifier(agent.store)
    assert verifier.verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED
    held = vault.commitments(result.run_id)
    assert held and set(held) <= set(verifier.commitments)
    proven = verifier.check_disclosures(vault.disclose(held))
    assert {p.value for p in proven} == {"111-22-3333", "999-00-1234"}
    agent.close()
    assert vault.commitments(result.run_id) == held  # the agent does not close a given vault
    vault.close()


def test_a_continuation_and_a_replay_open_the_memory_vault(
    verified_runs: VerifiedRuns,
) -> None:
    vault = MemoryVault()
    agent = _agent(vault)
    first = agent.run_sync("find Ann")
    child = _agent(vault, script=["still on file"], store=agent.store)
    second = child.run_sync("and now?", continue_from=first.run_id)
    assert {first.run_id, second.run_id} <= set(verified_runs.run_ids)
    served = child.config.provider.requests[0]["messages"]  # type: ignore[attr-defined]
    assert "999-00-1234" in str(served)  # the vault opened the parent's commitment
    for given in ({}, {"disclosures": vault}):  # the twin's own vault, or named
        twin = _agent(vault, script=[])
        replayed = af.replay_sync(twin, agent.store, first.run_id, **given)
        assert replayed.calls_checked == first.calls
    # erasing the run's entries: the log still verifies, the values can no longer be opened
    held = vault.commitments(first.run_id)
    assert held and vault.erase(run_id=first.run_id) == len(held)
    assert vault.commitments(first.run_id) == [] and vault.get(held[0]) is None
    assert af.Verifier(agent.store).verify(first.run_id).outcome is af.Outcome.VALID_UNSIGNED


def test_a_shared_memory_vault_serves_several_agents(tmp_path: Path) -> None:
    vault = MemoryVault()
    runs = [_agent(vault, store=tmp_path / f"runs{i}.db") for i in range(2)]
    ids = [agent.run_sync("find Ann").run_id for agent in runs]
    assert all(vault.commitments(run_id) for run_id in ids)
    for agent in runs:
        agent.close()
    assert len(vault.commitments()) == sum(len(vault.commitments(r)) for r in ids)


@pytest.mark.parametrize("wrong", [42, object(), af.MemoryStore(), b"vault.db"])
def test_anything_else_is_refused_at_construction(wrong: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        _agent(wrong)
    assert caught.value.option == "disclosures" and "disclosures" in str(caught.value)
