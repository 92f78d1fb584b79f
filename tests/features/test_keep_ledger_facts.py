"""``keep_ledger_facts``: the window holds the turns the model declared facts in, newest
first up to the ceiling, and a hold that blocked two boundaries stands down on the record."""

from __future__ import annotations

from typing import Any

import pytest
from feature_support import events_of, fixed_ports

import agentfootprint as af

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
HELD = "agentfootprint.context.pins_held"
DOWN = "agentfootprint.context.pin_stood_down"


def tools() -> list[af.Tool]:
    return [
        af.define_tool(
            name=name, description="Look.", input_schema=SCHEMA, execute=lambda a: f"rows {a}"
        )
        for name in ("lookup", "other")
    ]


def asks(tool: str, call_id: str, standing: str | None = None, of: str = "") -> af.LLMResponse:
    findings: dict[str, Any] = {"basis": "direct"}
    if standing is not None:
        findings["previous"] = [{"toolCallId": of, "standing": standing}]
    return af.reply(
        tool_calls=[af.tool_call(tool, {"q": call_id, "_findings": findings}, id=call_id)]
    )


def conversation(standing: str, **options: Any) -> tuple[af.Agent, list[af.RunResult]]:
    """Turn 0 calls lookup (c1); turn 1 calls other (c2) and declares c1's standing; then
    plain turns move the window (one turn kept, no tool-result pins)."""
    script = [
        asks("lookup", "c1"),
        "one",
        asks("other", "c2", standing, "c1"),
        "two",
        *(f"answer {n}" for n in range(3, 8)),
    ]
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=tools(),
        ports=fixed_ports(),
        window={"keep_last_turns": 1},
        keep_last_tool_results=0,
        **{"findings": True, **options},
    )
    results: list[af.RunResult] = []
    for turn in range(7):
        results.append(
            agent.run_sync(f"question {turn}", continue_from=results[-1] if results else None)
        )
    return agent, results


def served_ids(agent: af.Agent, run: af.RunResult, call: int = 0) -> list[str]:
    served = af.served_at(agent.store, run.run_id, call)
    return [m["tool_call_id"] for m in served["messages"] if m["role"] == "tool"]


def test_a_fact_turn_outlives_the_window_and_stands_down_on_the_record() -> None:
    agent, runs = conversation("fact")
    held = [events_of(agent.store, r.run_id, HELD) for r in runs]
    fact_pins = [[p for e in found for p in e["pins"] if p.get("kind") == "ledger-fact"]
                 for found in held]  # fmt: skip
    # c1's turn leaves the window in turn 1; once c2 declared it a fact (turn 1's second
    # call), it is held, through two boundaries, then stands down
    assert [len(p) for p in fact_pins] == [0, 1, 1, 0, 0, 0, 0]
    assert fact_pins[1][0]["tool"] == "lookup" and fact_pins[1][0]["messages"][0] == [0, 1]
    assert served_ids(agent, runs[1], 0) == []  # (no standing yet)
    assert served_ids(agent, runs[1], 1) == ["c1", "c2"]
    assert served_ids(agent, runs[2], 0) == ["c1"]
    assert served_ids(agent, runs[3], 0) == []
    downs = [events_of(agent.store, r.run_id, DOWN) for r in runs]
    assert downs[3] == [
        {"iteration": 1, "tool": "lookup", "messages": [0, 3], "boundaries": 2,
         "kind": "ledger-fact"}
    ]  # fmt: skip
    assert [len(d) for d in downs] == [0, 0, 0, 1, 0, 0, 0]
    for run in runs:  # every turn replays with no store, no model
        twin = af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=tools(),
            window={"keep_last_turns": 1},
            keep_last_tool_results=0,
            findings=True,
        )
        again = af.replay_sync(twin, agent.store, run.run_id)
        assert af.same_recording(agent.store, run.run_id, twin.store, again.result.run_id)


def test_a_noise_turn_leaves_as_before() -> None:
    agent, runs = conversation("noise")
    assert all(not events_of(agent.store, r.run_id, HELD) for r in runs)
    assert served_ids(agent, runs[1], 1) == ["c2"]


@pytest.mark.parametrize("options", [{"keep_ledger_facts": 0}, {"keep_ledger_facts": False}])
def test_off_zero_or_without_findings_nothing_is_held(options: dict[str, Any]) -> None:
    agent, runs = conversation("fact", **options)
    assert all(not events_of(agent.store, r.run_id, HELD) for r in runs)
    # the findings door wins over the top-level option
    agent, runs = conversation("fact", keep_ledger_facts=3, findings={"keep_ledger_facts": 0})
    assert all(not events_of(agent.store, r.run_id, HELD) for r in runs)
    # checked and then ignored without a window: nothing recorded
    bare = af.Agent(provider=af.MockProvider(["x"]), model="m", findings=True, keep_ledger_facts=2)
    opened = bare.store.read(bare.run_sync("go").run_id)
    assert b"keep_ledger_facts" not in next(iter(opened)).body


@pytest.mark.parametrize("value", [-1, 1.5, "4", True])
def test_a_bad_ceiling_is_refused_at_construction(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", keep_ledger_facts=value)
    assert caught.value.option == "keep_ledger_facts"
