"""Helpers shared by the replay suites (tests/scenario/test_replay*.py)."""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent, demo_script
from agentfootprint.logformat.canonical import parse
from agentfootprint.store.base import EventStore
from agentfootprint.testing.replay import NoModel, silent_twins


def logged_tools(tools: Any, executed: list[str]) -> list[af.Tool]:
    """The same tools, really executed, each execution logged by name."""

    def wrap(tool: af.Tool) -> af.Tool:
        def execute(args: Any) -> Any:
            executed.append(tool.name)
            return tool.execute(args)

        return af.define_tool(
            name=tool.name,
            description=tool.description,
            input_schema=dict(tool.input_schema),
            execute=execute,
        )

    return [wrap(tool) for tool in tools]


def demo_options(**changes: Any) -> dict[str, Any]:
    """The demo agent's options (read from ``build_demo_agent``), with ``changes``."""
    config = build_demo_agent(af.MemoryStore()).config
    options: dict[str, Any] = {
        "model": config.model,
        "name": config.name,
        "id": config.id,
        "system": list(config.system),
        "tools": list(config.tools),
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "max_iterations": config.max_iterations,
        "react_mode": config.react_mode,
        "tool_arg_validation": config.tool_arg_validation,
        "commit_values": config.commit_values,
        "record_receipt": config.record_receipt,
    }
    options.update(changes)
    return options


def replaying_agent(
    store: EventStore, executed: list[str] | None = None, **changes: Any
) -> af.Agent:
    """The demo agent (``changes`` applied) with no model and tools that must not run."""
    options = demo_options(**changes)
    options["tools"] = silent_twins(options["tools"], executed if executed is not None else [])
    return af.Agent(provider=NoModel(), store=store, **options)


def record_demo(store: EventStore, **changes: Any) -> tuple[af.RunResult, af.RunResult]:
    """Both demo turns (the second continues the first), with ``changes`` to the options."""
    agent = af.Agent(
        provider=af.MockProvider(demo_script()), store=store, **demo_options(**changes)
    )
    first = agent.run_sync(DEMO_QUESTIONS[0])
    second = agent.run_sync(DEMO_QUESTIONS[1], continue_from=first)
    return first, second


def opened(store: EventStore, run_id: str) -> dict[str, Any]:
    first = next(iter(store.read(run_id)))
    assert first.type == "run.open"
    body: dict[str, Any] = parse(first.body)
    return body


def closed(store: EventStore, run_id: str) -> dict[str, Any]:
    rows = list(store.read(run_id))
    assert rows[-1].type == "run.close"
    body: dict[str, Any] = parse(rows[-1].body)
    return body


def verified(store: EventStore, run_id: str) -> af.RunVerification:
    result = af.Verifier(store).verify(run_id)  # a fresh verifier: ancestors checked too
    assert result.outcome is af.Outcome.VALID_UNSIGNED
    return result


def rows(store: EventStore, run_id: str) -> list[tuple[int, str, bytes, bytes]]:
    return [(e.seq, e.type, e.body, e.chain_hash) for e in store.read(run_id)]


def assert_identical_replay(
    source: EventStore, original: af.RunResult, target: EventStore, replayed: af.ReplayResult
) -> None:
    run = replayed.result
    assert replayed.original_run == original.run_id
    assert replayed.forked_at is None
    assert replayed.calls_checked == original.calls == run.calls
    assert run.run_id != original.run_id
    assert (run.answer, run.outcome, run.iterations) == (
        original.answer,
        original.outcome,
        original.iterations,
    )
    assert run.usage == original.usage
    assert run.parent_run_id == original.parent_run_id
    assert af.same_recording(source, original.run_id, target, run.run_id)
    diff = af.diff_runs(source, original.run_id, target, run.run_id)
    assert diff.identical and diff.differences == []
    assert diff.calls_a == diff.calls_b == original.calls
    assert diff.to_json()["identical"] is True
    head = opened(target, run.run_id)
    assert head["replay_of"] == original.run_id
    assert "fork_of" not in head
    verified(target, run.run_id)


def failed_replay(target: EventStore, error: af.ReplayDivergence, original: str) -> None:
    """The replay run a divergence left: named by the error, closed as failed, verifiable."""
    assert error.original_run == original
    assert error.run_id is not None
    assert opened(target, error.run_id)["replay_of"] == original
    assert closed(target, error.run_id)["outcome"] == "failed"
    verified(target, error.run_id)


def diverge(
    store: EventStore, run: af.RunResult, **changes: Any
) -> tuple[af.ReplayDivergence, EventStore]:
    target = af.MemoryStore()
    executed: list[str] = []
    agent = replaying_agent(target, executed, **changes)
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent, store, run.run_id)
    assert executed == []
    assert isinstance(agent.config.provider, NoModel) and agent.config.provider.calls == 0
    return caught.value, target


def assert_readable_diff(
    error: af.ReplayDivergence, removed: str | None, added: str | None
) -> None:
    lines = error.diff.splitlines()
    assert lines[0].startswith("--- original "), error.diff
    assert lines[1].startswith("+++ replay "), error.diff
    assert lines[2].startswith("@@ "), error.diff
    assert all(line[:1] in {" ", "-", "+", "@"} for line in lines), error.diff
    if removed is not None:
        assert any(line.startswith("-") and removed in line for line in lines[2:]), error.diff
    if added is not None:
        assert any(line.startswith("+") and added in line for line in lines[2:]), error.diff
    assert error.diff in str(error)  # the message carries the diff


# -- a redacted conversation ------------------------------------------------------------------

SSN = "123-45-6789"


def person_tool(**schema: Any) -> af.Tool:
    def lookup(args: Any) -> Any:
        return {"name": args.get("name", "?"), "ssn": SSN, "city": "Lisbon"}

    return af.define_tool(
        name="lookup_person",
        description="Look a person up.",
        input_schema=schema or {"type": "object", "properties": {"name": {"type": "string"}}},
        execute=lookup,
    )


PERSON_SCRIPT = [
    af.reply("Looking.", tool_calls=[af.tool_call("lookup_person", {"name": "Ann"})]),
    "Ann lives in Lisbon.",
    af.reply(tool_calls=[af.tool_call("lookup_person", '{"name": "Bob"}')]),
    "Bob lives in Lisbon too.",
]


def record_people(
    store: EventStore, script: list[Any], tool: af.Tool, **options: Any
) -> tuple[af.RunResult, af.RunResult]:
    agent = af.Agent(
        provider=af.MockProvider(script), model="m", tools=[tool], store=store, **options
    )
    first = agent.run_sync("Who is Ann?")
    second = agent.run_sync("And Bob?", continue_from=first)
    agent.close()
    return first, second


def assert_no_clear_ssn(store: EventStore, run_id: str) -> None:
    assert all(SSN.encode() not in e.body for e in store.read(run_id))
