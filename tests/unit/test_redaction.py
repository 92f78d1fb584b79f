"""RedactionPolicy and the boundary: validation, matching, commitments, the vault."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

import agentfootprint as af
from agentfootprint.logformat.commitments import (
    Disclosure,
    PolicyDocument,
    b64url,
    b64url_decode,
    commitment_digest,
    is_commitment,
    iter_commitments,
    iter_leaks,
)
from agentfootprint.logformat.shared_lists import SharedList
from agentfootprint.store.redaction import Boundary


def fixed_salt() -> bytes:
    return bytes(range(16))


def test_policy_document_and_digest() -> None:
    policy = af.RedactionPolicy(keys=["ssn", "email", "ssn"], patterns=["(?i)token$"])
    assert policy.keys == ("ssn", "email")
    assert policy.document.to_json() == {
        "v": 3,
        "keys": ["email", "ssn"],
        "patterns": ["(?i)token$"],
    }
    again = PolicyDocument.from_json(policy.document.to_json())
    assert again.digest() == policy.digest and len(policy.digest) == 64
    union = policy | af.RedactionPolicy(keys=["iban"])
    assert set(union.keys) == {"ssn", "email", "iban"}


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({}, "names no key"),
        ({"keys": "ssn"}, "must be a list"),
        ({"keys": [""]}, "non-empty strings"),
        ({"keys": [3]}, "non-empty strings"),
        ({"patterns": ["("]}, "not RE2 syntax"),
        ({"patterns": ["(a)\\1"]}, "not RE2 syntax"),
        ({"patterns": ["(?<=x)token"]}, "'(?<=x)token' is not RE2 syntax"),
        ({"patterns": [re.compile("x", re.IGNORECASE)]}, "without flags"),
        ({"keys": ["$commit"]}, "reserved"),
        ({"keys": ["history"]}, "matches 'history'"),
        ({"keys": ["messages"]}, "matches 'messages'"),
        ({"patterns": ["^us"]}, "matches 'usage'"),
    ],
)
def test_bad_policies_are_refused(kwargs: dict[str, Any], words: str) -> None:
    """By the policy itself, or (a state key the features declare as structure) by the agent."""
    with pytest.raises(af.UsageError) as caught:
        policy = af.RedactionPolicy(**kwargs)
        af.Agent(provider=af.MockProvider(["x"]), model="m", redact=policy)
    assert caught.value.option == "redact" and words in str(caught.value)


def test_agent_options_for_redaction(tmp_path: Path) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", redact="ssn")
    assert caught.value.option == "redact"
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", disclosures=tmp_path / "v.db")
    assert caught.value.option == "disclosures"
    with pytest.raises(af.UsageError) as caught:
        af.Agent(
            provider=af.MockProvider(["x"]),
            model="m",
            redact=af.conversation_redaction(),
            disclosures=42,
        )
    assert caught.value.option == "disclosures"


def test_matching_exact_pattern_and_long_keys() -> None:
    matches = af.RedactionPolicy(keys=["ssn"], patterns=["token"]).document.matcher()
    assert matches("ssn") and not matches("SSN") and not matches("ssn_")
    assert matches("api_token") and matches("token")
    assert matches("x" * 300 + "token")  # RE2 (version 2) patterns apply at any key length
    legacy = PolicyDocument(keys=("ssn",), patterns=("token",), version=1).matcher()
    assert legacy("api_token") and not legacy("x" * 300 + "token")  # version 1: 256 chars
    long_exact = af.RedactionPolicy(keys=["k" * 300]).document.matcher()
    assert long_exact("k" * 300)  # exact keys match at any length


def test_boundary_commits_any_depth_and_json_strings() -> None:
    boundary = Boundary(af.RedactionPolicy(keys=["ssn"]), salt=fixed_salt)
    value = {
        "a": [{"b": {"ssn": {"deep": [1, 2]}}}],
        "args": '{"ssn": "123", "x": 1}',
        "plain": "not json {",
        "keep": 1,
    }
    committed = boundary.commit(value)
    inner = committed["a"][0]["b"]["ssn"]
    assert is_commitment(inner)
    assert committed["args"].startswith('{"ssn":{"$commit":"')
    assert committed["plain"] == "not json {" and committed["keep"] == 1
    disclosures = boundary.take_disclosures()
    assert [d.value for d in disclosures] == [{"deep": [1, 2]}, "123"]
    assert all(d.opens() for d in disclosures)
    assert disclosures[0].salt == b64url(fixed_salt())
    assert b64url_decode(disclosures[0].salt) == fixed_salt()
    assert boundary.take_disclosures() == []


def test_boundary_keeps_identity_when_nothing_matches_and_is_idempotent() -> None:
    boundary = Boundary(af.RedactionPolicy(keys=["ssn"]))
    untouched = {"a": [1, {"b": "c"}], "s": '{"x": 1}'}
    assert boundary.commit(untouched) is untouched
    committed = boundary.commit({"ssn": "1"})
    assert boundary.commit(committed) is committed  # an existing commitment stays
    assert boundary.commit_entry("ssn", committed["ssn"]) is committed["ssn"]


def test_fresh_salts_hide_equal_values() -> None:
    boundary = Boundary(af.RedactionPolicy(keys=["ssn"]))
    first, second = boundary.commit({"ssn": "1"}), boundary.commit({"ssn": "1"})
    assert first != second


def test_commitment_digest_definition() -> None:
    digest = commitment_digest("c2FsdA", "ssn", "123")
    disclosure = Disclosure(commitment=digest, salt="c2FsdA", key="ssn", value="123")
    assert disclosure.opens()
    assert not Disclosure(commitment=digest, salt="c2FsdA", key="ssn", value="124").opens()
    assert Disclosure.from_json(disclosure.to_json()) == disclosure
    with pytest.raises(ValueError):
        Disclosure.from_json({"commitment": "xyz", "salt": "", "key": "", "value": 1})


def test_iterators_find_commitments_and_leaks() -> None:
    digest = "ab" * 32
    value = {"x": {"ssn": {"$commit": digest}}, "y": '{"ssn": "plain"}', "z": [{"ssn": 1}]}
    found = list(iter_commitments(value))
    assert found == [(digest, "ssn", ("x", "ssn"))]
    leaks = {key for key, _ in iter_leaks(value, lambda k: k == "ssn")}
    assert leaks == {"ssn"} and len(list(iter_leaks(value, lambda k: k == "ssn"))) == 2
    with pytest.raises(ValueError, match="malformed commitment"):
        list(iter_commitments({"a": {"$commit": "nothex"}}))


def test_redacted_run_records_commitments_and_serves_raw(tmp_path: Path) -> None:
    tool = af.define_tool(
        name="lookup", description="d", execute=lambda a: {"ssn": "999-00-" + a["q"], "name": "Ann"}
    )
    provider = af.MockProvider(
        [
            af.reply(tool_calls=[af.tool_call("lookup", {"q": "1234", "ssn": "111-22-3333"})]),
            "Ann's record is on file.",
        ]
    )
    agent = af.Agent(
        provider=provider,
        model="m",
        tools=[tool],
        store=tmp_path / "r.db",
        redact=af.RedactionPolicy(keys=["ssn"]),
        disclosures=tmp_path / "v.db",
    )
    seen: list[af.AgentEvent] = []
    agent.on("*", seen.append)
    result = agent.run_sync("find Ann")
    assert result.state["history"][2]["content"] == '{"name":"Ann","ssn":"999-00-1234"}'
    assert provider.requests[1]["messages"][2]["content"] == result.state["history"][2]["content"]
    raw = (tmp_path / "r.db").read_bytes() + (tmp_path / "r.db-wal").read_bytes()
    assert b"999-00-1234" not in raw and b"111-22-3333" not in raw
    assert "999-00" not in repr(seen) and "111-22" not in repr(seen)
    verified = af.Verifier(agent.store)
    assert verified.verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED
    opened = agent.vault.disclose(agent.vault.commitments(result.run_id))  # type: ignore[union-attr]
    proven = verified.check_disclosures(opened)
    assert {p.value for p in proven} == {"111-22-3333", "999-00-1234"}
    opened_body = next(iter(agent.store.read(result.run_id))).decoded()
    assert opened_body["policy"] == {"v": 3, "keys": ["ssn"], "patterns": []}  # type: ignore[index]


def test_reserved_key_in_input_is_refused(tmp_path: Path) -> None:
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m", store=tmp_path / "r.db")
    with pytest.raises(af.ReservedKeyError) as caught:
        agent.run_sync('{"a": [{"$commit": "x"}]}')
    assert caught.value.path == 'message.a[0]["$commit"]'
    assert agent.store.runs() == []
    tool = af.define_tool(name="t", description="d", execute=lambda a: {"$commit": "x"})
    agent2 = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("t", {})]), "ok"]),
        model="m",
        tools=[tool],
    )
    result = agent2.run_sync("go")
    message = result.state["history"][2]
    assert message["is_error"] and "'$commit' is reserved" in message["content"]


def test_full_mode_continuation_without_vault_is_not_salt_reuse(tmp_path: Path) -> None:
    """Re-recording commitments a run inherited (full mode re-sets the history) is no reuse."""
    tool = af.define_tool(name="t", description="d", execute=lambda a: {"ssn": "S-1"})
    db = tmp_path / "f.db"

    def agent(script: list[Any]) -> af.Agent:
        return af.Agent(
            provider=af.MockProvider(script),
            model="m",
            tools=[tool],
            store=db,
            commit_values="full",
            redact=af.RedactionPolicy(keys=["ssn"]),
        )

    first = agent([af.reply(tool_calls=[af.tool_call("t", {"ssn": "x"})]), "done"]).run_sync("a")
    child = agent(
        [
            af.reply(tool_calls=[af.tool_call("t", {"ssn": "y"})]),
            af.reply(tool_calls=[af.tool_call("t", {"ssn": "z"})]),
            "done",
        ]
    )
    result = child.run_sync("b", continue_from=first.run_id)
    assert af.Verifier(child.store).verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED
    # without a vault the model is served the parent's commitments where its values were
    served = child.config.provider.requests[0]["messages"][1]["tool_calls"][0]  # type: ignore[attr-defined]
    assert "$commit" in str(served["arguments"]["ssn"])


def _vault_proves_everything(agent: af.Agent, run_id: str) -> list[af.ProvenValue]:
    verifier = af.Verifier(agent.store)
    verifier.verify(run_id)
    assert agent.vault is not None
    opened = agent.vault.disclose(list(verifier.commitments))
    return verifier.check_disclosures(opened)


def test_full_mode_with_redaction_verifies_across_calls(tmp_path: Path) -> None:
    tool = af.define_tool(name="t", description="d", execute=lambda a: {"ssn": a["n"]})
    script: list[Any] = [
        af.reply(tool_calls=[af.tool_call("t", {"n": i, "ssn": f"s{i}"})]) for i in range(4)
    ] + ["done"]
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[tool],
        commit_values="full",
        store=tmp_path / "f.db",
        redact=af.RedactionPolicy(keys=["ssn"]),
        disclosures=tmp_path / "v.db",
    )
    result = agent.run_sync("go")
    assert af.Verifier(agent.store).verify(result.run_id).receipts == 5
    assert {p.value for p in _vault_proves_everything(agent, result.run_id)} >= {"s0", "s3", 0, 3}


def test_recorded_event_disclosures_reach_the_vault(tmp_path: Path) -> None:
    tool = af.define_tool(
        name="t",
        description="d",
        execute=lambda a: "ran",
        input_schema={"type": "object", "required": ["q"]},
    )
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("t", {})]), "ok"]),
        model="m",
        tools=[tool],
        store=tmp_path / "e.db",
        redact=af.RedactionPolicy(keys=["message"]),
        disclosures=tmp_path / "v.db",
    )
    result = agent.run_sync("go")
    events = [e.decoded() for e in agent.store.read(result.run_id) if e.type == "event"]
    assert "$commit" in str(events[0])  # the message is committed in the log
    proven = _vault_proves_everything(agent, result.run_id)
    assert any("missing required" in str(p.value) for p in proven)


def test_a_policy_key_on_error_records(tmp_path: Path) -> None:
    def explode(request: Any) -> af.LLMResponse:
        raise ConnectionError({"account": "A-1", "reason": "denied"})

    agent = af.Agent(
        provider=af.MockProvider(respond=explode),
        model="m",
        store=tmp_path / "x.db",
        redact=af.RedactionPolicy(keys=["error"]),
        disclosures=tmp_path / "v.db",
    )
    with pytest.raises(af.ProviderCallError) as caught:
        agent.run_sync("go")
    run_id = caught.value.run_id
    assert run_id is not None
    raw = (tmp_path / "x.db").read_bytes() + (tmp_path / "x.db-wal").read_bytes()
    assert b"A-1" not in raw
    proven = _vault_proves_everything(agent, run_id)
    assert {p.key for p in proven} == {"error"}
    assert all(p.value["details"] == {"account": "A-1", "reason": "denied"} for p in proven)


@pytest.mark.parametrize("version", [True, 1.0, 2.0, 3.0, "2", "3", 0, 4, None])
def test_a_policy_version_must_be_the_integer_one_two_or_three(version: Any) -> None:
    with pytest.raises(ValueError, match="version"):
        PolicyDocument.from_json({"v": version, "keys": ["a"], "patterns": []})


def test_a_shared_list_anywhere_in_a_value_is_walked_like_the_list_it_is() -> None:
    """State holds a grown history as a SharedList: a value carrying it (top level, in an
    object, in a list) is redacted like the plain list, never recorded in clear."""
    policy = af.RedactionPolicy(keys=["ssn"])
    history = SharedList([{"role": "user", "ssn": "123-45-6789"}]).extended([{"ssn": "987"}])
    for value in (history, {"copy": history}, [history], {"deep": [{"h": history}]}):
        boundary = Boundary(policy)
        committed = boundary.commit(value)
        text = orjson.dumps(committed).decode()
        assert "123-45-6789" not in text and '"987"' not in text
        assert [d.key for d in boundary.take_disclosures()] == ["ssn", "ssn"]
