"""Replaying runs recorded under a redaction policy: with the original's vault byte for byte,
without it where no commitment has to be copied, and never showing a redacted value.

Every run closed here is verified by the pytest plugin as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from replay_support import (
    PERSON_SCRIPT,
    SSN,
    assert_no_clear_ssn,
    demo_options,
    failed_replay,
    opened,
    person_tool,
    record_demo,
    record_people,
    replaying_agent,
    verified,
)

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, demo_tools
from agentfootprint.features import tool_dispatch
from agentfootprint.store.base import EventStore
from agentfootprint.testing.replay import NoModel, silent_twins


@pytest.mark.parametrize("with_vault", [False, True], ids=["no-vault", "vault"])
@pytest.mark.parametrize("target_store", ["same", "memory"], indirect=True)
def test_redacted_run_replays_byte_identically(
    tmp_path: Path, with_vault: bool, target_store: EventStore | None
) -> None:
    store = af.MemoryStore()
    policy = af.RedactionPolicy(keys=["ssn"])
    vault = tmp_path / "vault.db" if with_vault else None
    first, second = record_people(
        store, PERSON_SCRIPT, person_tool(), redact=policy, disclosures=vault
    )
    assert SSN in first.state["history"][2]["content"]  # live state keeps the value
    assert_no_clear_ssn(store, first.run_id)
    target = store if target_store is None else target_store
    replay_vault = (
        vault if target_store is None else (tmp_path / "replay-vault.db" if vault else None)
    )
    executed: list[str] = []
    agent = af.Agent(
        provider=NoModel(),
        model="m",
        tools=silent_twins([person_tool()], executed),
        store=target,
        redact=policy,
        disclosures=replay_vault,
    )
    try:
        for original in (first, second):
            replayed = af.replay_sync(agent, store, original.run_id)
            assert af.same_recording(store, original.run_id, target, replayed.result.run_id)
            assert af.diff_runs(store, original.run_id, target, replayed.result.run_id).identical
            assert_no_clear_ssn(target, replayed.result.run_id)
            assert opened(target, replayed.result.run_id)["policy_digest"] == policy.digest
            verified(target, replayed.result.run_id)
    finally:
        agent.close()
    assert executed == []


def redacted_replayer(tool: af.Tool, policy: af.RedactionPolicy, **options: Any) -> af.Agent:
    return af.Agent(
        provider=NoModel(),
        model="m",
        tools=silent_twins([tool], []),
        store=af.MemoryStore(),
        redact=policy,
        **options,
    )


def assert_needs_the_vault(
    agent: af.Agent, store: EventStore, original: str, call: int, kind: str
) -> af.ReplayDivergence:
    """Without the vault the replay stops with a divergence that says what to do, and the
    replay run it leaves verifies (no commitment was recorded twice)."""
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent, store, original)
    error = caught.value
    assert (error.call, error.kind) == (call, kind), error
    assert "disclosure vault" in str(error)
    failed_replay(agent.store, error, original)
    return error


SSN_CALLS_SCRIPT = [
    af.reply(tool_calls=[af.tool_call("lookup_person", {"ssn": SSN})]),
    "Found Ann.",
    af.reply(tool_calls=[af.tool_call("lookup_person", '{"ssn": "987-65-4321"}')]),
    "Found Bob.",
]


def test_redacted_key_in_tool_call_arguments_replays_with_the_vault(tmp_path: Path) -> None:
    """The model's tool-call arguments hold a redacted key: recorded in the reply and again in
    the history (two commitments). With the vault the replay opens them and commits the same
    values with the original's salts: byte-identical."""
    store, vault = af.MemoryStore(), tmp_path / "vault.db"
    policy = af.RedactionPolicy(keys=["ssn"])
    runs = record_people(
        store, SSN_CALLS_SCRIPT, person_tool(type="object"), redact=policy, disclosures=vault
    )
    agent = redacted_replayer(person_tool(type="object"), policy)
    for original in runs:
        replayed = af.replay_sync(agent, store, original.run_id, disclosures=vault)
        assert af.same_recording(store, original.run_id, agent.store, replayed.result.run_id)
        assert_no_clear_ssn(agent.store, replayed.result.run_id)


def test_redacted_key_in_tool_call_arguments_without_the_vault_says_so() -> None:
    store = af.MemoryStore()
    policy = af.RedactionPolicy(keys=["ssn"])
    first, _ = record_people(store, SSN_CALLS_SCRIPT, person_tool(type="object"), redact=policy)
    agent = redacted_replayer(person_tool(type="object"), policy)
    error = assert_needs_the_vault(agent, store, first.run_id, 0, "redacted")
    assert error.position == 0 and "redacted arguments" in str(error)


SCHEMA_WITH_SSN = {"type": "object", "properties": {"ssn": {"type": "string"}}}


def test_redacted_key_in_a_tool_schema_replays_with_the_vault(tmp_path: Path) -> None:
    store, vault = af.MemoryStore(), tmp_path / "vault.db"
    policy = af.RedactionPolicy(keys=["ssn"])
    runs = record_people(
        store, PERSON_SCRIPT, person_tool(**SCHEMA_WITH_SSN), redact=policy, disclosures=vault
    )
    # the replaying agent keeps its own vault: the original's is read, never written
    agent = redacted_replayer(person_tool(**SCHEMA_WITH_SSN), policy)
    for original in runs:
        replayed = af.replay_sync(agent, store, original.run_id, disclosures=vault)
        assert af.same_recording(store, original.run_id, agent.store, replayed.result.run_id)


def test_redacted_key_in_a_tool_schema_without_the_vault_diverges_in_tools() -> None:
    """A schema committed with a fresh salt cannot equal the original's without its salt:
    the divergence says the two pieces differ only by commitments and how to compare them."""
    store = af.MemoryStore()
    policy = af.RedactionPolicy(keys=["ssn"])
    first, _ = record_people(store, PERSON_SCRIPT, person_tool(**SCHEMA_WITH_SSN), redact=policy)
    agent = redacted_replayer(person_tool(**SCHEMA_WITH_SSN), policy)
    error = assert_needs_the_vault(agent, store, first.run_id, 0, "tools")
    assert error.position == 0 and "$commit" in error.diff


def record_conversation_redacted(tmp_path: Path, with_vault: bool) -> tuple[EventStore, Any]:
    store = af.MemoryStore()
    vault = tmp_path / "vault.db" if with_vault else None
    runs = record_people(
        store, PERSON_SCRIPT, person_tool(), redact=af.conversation_redaction(), disclosures=vault
    )
    for run in runs:
        verified(store, run.run_id)
    return store, runs


def conversation_replayer(**options: Any) -> af.Agent:
    return redacted_replayer(person_tool(), af.conversation_redaction(), **options)


@pytest.mark.parametrize("agent_vault", [False, True], ids=["vault-given", "agent-vault"])
def test_conversation_redaction_run_replays_with_the_vault(
    tmp_path: Path, agent_vault: bool
) -> None:
    """Every text of the conversation is committed, several of them twice (the reply in
    ``last_response`` and in the history, the final answer): with the vault, opened and
    committed again with the original's salts, in the original's order."""
    store, runs = record_conversation_redacted(tmp_path, True)
    vault = tmp_path / "vault.db"
    agent = conversation_replayer(disclosures=vault if agent_vault else None)
    for original in runs:
        replayed = af.replay_sync(
            agent, store, original.run_id, disclosures=None if agent_vault else vault
        )
        assert af.same_recording(store, original.run_id, agent.store, replayed.result.run_id)
        assert replayed.result.answer == original.answer  # the replay handled the values
    agent.close()


def test_conversation_redaction_run_without_the_vault_says_so(tmp_path: Path) -> None:
    store, (first, second) = record_conversation_redacted(tmp_path, False)
    for original in (first, second):
        agent = conversation_replayer()
        error = assert_needs_the_vault(agent, store, original.run_id, 0, "redacted")
        assert "redacted arguments" in str(error) or "second place" in str(error)


def test_erased_disclosures_are_like_no_vault(tmp_path: Path) -> None:
    store, (first, _) = record_conversation_redacted(tmp_path, True)
    vault = af.DisclosureVault(tmp_path / "vault.db")
    assert vault.erase(run_id=first.run_id) > 0
    agent = conversation_replayer()
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent, store, first.run_id, disclosures=vault)
    assert caught.value.kind == "redacted"
    failed_replay(agent.store, caught.value, first.run_id)
    vault.close()


def test_an_agent_that_stopped_redacting_diverges_and_the_replay_records_nothing_in_clear(
    tmp_path: Path,
) -> None:
    """New code whose policy lacks keys the original was recorded under would record those
    values in clear: a ``policy`` divergence at call 0. The replay itself records under the
    original's policy joined with the agent's, so the vault's plaintext never reaches it."""
    store, (first, _) = record_conversation_redacted(tmp_path, True)
    agent = redacted_replayer(person_tool(), af.RedactionPolicy(keys=["unrelated"]))
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent, store, first.run_id, disclosures=tmp_path / "vault.db")
    error = caught.value
    assert (error.call, error.kind) == (0, "policy")
    assert "key 'content'" in str(error) and "in clear" in str(error)
    failed_replay(agent.store, error, first.run_id)
    assert error.run_id is not None
    assert all(b"Lisbon" not in e.body for e in agent.store.read(error.run_id))
    # a policy naming more than the original's is no gap (a key that never occurs changes
    # nothing that is recorded)
    wider = redacted_replayer(
        person_tool(), af.conversation_redaction() | af.RedactionPolicy(keys=["more"])
    )
    replayed = af.replay_sync(wider, store, first.run_id, disclosures=tmp_path / "vault.db")
    assert af.same_recording(store, first.run_id, wider.store, replayed.result.run_id)


def test_a_changed_redacted_value_diverges_with_the_vault_and_is_not_printed(
    tmp_path: Path,
) -> None:
    """With the vault, a change under a commitment is told from a new salt, and the diff
    shows commitments only: a replay's error never prints a redacted value."""
    store, vault = af.MemoryStore(), tmp_path / "vault.db"
    policy = af.RedactionPolicy(keys=["ssn"])
    first, _ = record_people(
        store, PERSON_SCRIPT, person_tool(**SCHEMA_WITH_SSN), redact=policy, disclosures=vault
    )
    changed = {"type": "object", "properties": {"ssn": {"type": "string", "maxLength": 11}}}
    agent = redacted_replayer(person_tool(**changed), policy)
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent, store, first.run_id, disclosures=vault)
    error = caught.value
    assert (error.call, error.kind, error.position) == (0, "tools", 0)
    assert "a redacted value changed" in str(error)
    assert "maxLength" not in str(error) and "$commit" in error.diff
    failed_replay(agent.store, error, first.run_id)


def test_new_code_under_conversation_redaction_diverges_without_printing_the_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, vault = af.MemoryStore(), tmp_path / "vault.db"
    policy = af.conversation_redaction()
    first, _ = record_demo(store, redact=policy, disclosures=vault)
    monkeypatch.setattr(
        tool_dispatch, "teaching_message", lambda tool, issues: f"Call {tool.name} again, fixed."
    )
    target = af.MemoryStore()
    agent = replaying_agent(target, redact=policy)
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent, store, first.run_id, disclosures=vault)
    error = caught.value
    assert (error.call, error.kind, error.position) == (2, "messages", 4)
    assert "a redacted value changed" in str(error)
    assert "again, fixed" not in str(error) and "input schema" not in str(error)
    failed_replay(target, error, first.run_id)
    # and the unchanged agent replays both turns byte for byte
    monkeypatch.undo()
    unchanged = replaying_agent(af.MemoryStore(), redact=policy)
    for original in record_demo(store, redact=policy, disclosures=vault):
        replayed = af.replay_sync(unchanged, store, original.run_id, disclosures=vault)
        assert af.same_recording(store, original.run_id, unchanged.store, replayed.result.run_id)


def test_a_tampered_vault_never_makes_a_replay_match(tmp_path: Path) -> None:
    """A disclosure that does not open its commitment is not used: neither to open a value
    nor to lend its salt. Here every disclosure of the first turn claims another value."""
    import sqlite3

    store, path = af.MemoryStore(), tmp_path / "vault.db"
    policy = af.conversation_redaction()
    first, _ = record_people(store, PERSON_SCRIPT, person_tool(), redact=policy, disclosures=path)
    with sqlite3.connect(path) as conn:
        changed = conn.execute(
            "UPDATE disclosures SET value = CAST('\"forged\"' AS BLOB) WHERE run_id = ?",
            (first.run_id,),
        ).rowcount
    assert changed > 0
    agent = conversation_replayer()
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent, store, first.run_id, disclosures=path)
    assert caught.value.kind == "redacted"
    assert "forged" not in str(caught.value)
    failed_replay(agent.store, caught.value, first.run_id)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_fork_of_a_redacted_run_with_the_vault(tmp_path: Path, k: int) -> None:
    """Calls before ``k`` reproduce the original's commitments; the live model is served the
    opened values (as the original's model was), and the fork verifies with no clear value."""
    store, vault = af.MemoryStore(), tmp_path / "vault.db"
    policy = af.conversation_redaction()
    first, _ = record_demo(store, redact=policy, disclosures=vault)
    live = af.MockProvider(["A new answer."])
    executed: list[str] = []
    target = af.MemoryStore()
    agent = af.Agent(
        provider=live,
        store=target,
        **demo_options(tools=silent_twins(demo_tools(), executed), redact=policy),
    )
    forked = af.replay_sync(agent, store, first.run_id, until=k, disclosures=vault)
    run = forked.result
    assert (forked.calls_checked, run.calls, run.answer) == (k, k + 1, "A new answer.")
    assert executed == []
    for j in range(k + 1):
        assert af.receipt_at(target, run.run_id, j) == af.receipt_at(store, first.run_id, j)
    served = live.requests[0]
    assert served["messages"][0]["content"] == DEMO_QUESTIONS[0]  # opened, not a commitment
    question = DEMO_QUESTIONS[0].encode()
    assert all(question not in row.body for row in target.read(run.run_id))
    verified(target, run.run_id)


@pytest.mark.parametrize("number", ["1e16", "9007199254740992.0", "-2.3515291280394876e+16"])
def test_a_redacted_integral_double_beyond_53_bits_replays(tmp_path: Path, number: str) -> None:
    """Found by test_replay_property: a policy key's value in the model's arguments that is an
    integral double beyond 2**53 is written by canonical JSON as plain digits, which the replay
    read back as an integer outside I-JSON and recorded as the type name "object"."""
    vault = tmp_path / "vault.db"
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    policy = af.RedactionPolicy(keys=["k"])

    def agent(provider: Any, store: Any, disclosures: Any) -> af.Agent:
        tool = af.define_tool(
            name="lookup", description="Look up.", input_schema=schema, execute=lambda a: "r"
        )
        return af.Agent(
            provider=provider,
            model="m",
            tools=[tool],
            store=store,
            disclosures=disclosures,
            redact=policy,
        )

    source = af.MemoryStore()
    reply = af.reply("", tool_calls=[af.tool_call("lookup", '{"k": ' + number + "}")])
    with agent(af.MockProvider([reply, af.reply("")]), source, vault) as original:
        run = original.run_sync("go")
    target = af.MemoryStore()
    with agent(NoModel(), target, None) as again:
        replayed = af.replay_sync(again, source, run.run_id, disclosures=vault)
    assert replayed.calls_checked == 2
    assert af.same_recording(source, run.run_id, target, replayed.result.run_id)
