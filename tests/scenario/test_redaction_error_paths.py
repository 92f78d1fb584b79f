"""Redaction on the error paths: what an exception or a refusal carries stays committed.

Each case was a defect once (found by a review of the boundary): a repr of structured
exception data, a value quoted by a canonical-form error, a schema object shared by two
validation findings (one commitment recorded twice, so the run did not verify).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af

SECRET = "S3CR3T-" + "cd" * 12


def nothing_in_clear(store: af.SqliteStore, run_id: str, secret: bytes) -> None:
    assert all(secret not in bytes(row.body) for row in store.read(run_id))


def test_a_schema_value_in_two_findings_gets_two_commitments(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"api_token": {"type": "string"}, "user": {"type": "string"}},
        "dependentRequired": {"api_token": ["user"]},
    }
    login = af.define_tool(
        name="login", description="Log in.", input_schema=schema, execute=lambda args: "ok"
    )
    script = [
        af.reply(tool_calls=[af.tool_call("login", {"api_token": "t1"})]),
        af.reply(tool_calls=[af.tool_call("login", {"api_token": "t2"})]),
        "done",
    ]
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[login],
        store=tmp_path / "runs.db",
        redact=af.RedactionPolicy(patterns=["(?i)token"]),
        disclosures=tmp_path / "vault.db",
    )
    result = agent.run_sync("hi")
    assert af.Verifier(agent.store).verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED
    agent.close()


@pytest.mark.parametrize("data", ["commitments", "not-json"])
def test_structured_exception_data_that_cannot_be_recorded_is_not_recorded_as_text(
    tmp_path: Path, data: str
) -> None:
    """A provider error echoing the request (which, continued without a vault, holds
    commitments), or holding a value JSON cannot carry: recorded as a placeholder, never as
    its repr."""
    store = af.SqliteStore(tmp_path / "runs.db")
    policy = af.RedactionPolicy(keys=["ssn"])
    parent = af.Agent(
        provider=af.MockProvider(["noted"]), model="m", store=store, redact=policy
    ).run_sync('{"ssn": "parent-secret"}')
    replies = iter([af.reply(tool_calls=[af.tool_call("t", {"ssn": SECRET})])])

    def respond(request: dict[str, Any]) -> Any:
        reply = next(replies, None)
        if reply is not None:
            return reply
        echo: Any = request["messages"] if data == "commitments" else {"ssn": SECRET, "x": {1}}
        raise RuntimeError({"request_messages": echo} if data == "commitments" else echo)

    tool = af.define_tool(name="t", description="A tool.", execute=lambda args: "ok")
    agent = af.Agent(
        provider=af.MockProvider(respond=respond),
        model="m",
        tools=[tool],
        store=store,
        redact=policy,
    )
    with pytest.raises(af.ProviderCallError) as failed:
        agent.run_sync("go on", continue_from=parent.run_id)
    run_id = failed.value.run_id
    assert run_id is not None
    assert af.Verifier(store).verify(run_id).outcome is af.Outcome.VALID_UNSIGNED
    nothing_in_clear(store, run_id, SECRET.encode())
    closed = [bytes(r.body) for r in store.read(run_id) if r.type == "run.close"]
    assert b"cannot be recorded as JSON" in closed[0]
    store.close()


def test_a_value_json_cannot_carry_is_not_quoted_by_the_error(tmp_path: Path) -> None:
    store = af.SqliteStore(tmp_path / "runs.db")
    huge = 98765432109876543210
    script = [af.reply(tool_calls=[af.tool_call("t", {"ssn": huge})])]
    tool = af.define_tool(name="t", description="A tool.", execute=lambda args: "ok")
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[tool],
        store=store,
        redact=af.RedactionPolicy(keys=["ssn"]),
    )
    with pytest.raises(af.ProviderCallError) as failed:
        agent.run_sync("hi")
    assert str(huge) not in str(failed.value)
    assert failed.value.run_id is not None
    nothing_in_clear(store, failed.value.run_id, str(huge).encode())
    store.close()
