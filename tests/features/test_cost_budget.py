"""``cost_budget``: a bare number warns once; ``on_exceed: "halt"`` stops at the route."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest
from feature_support import billed, calls, events_of, fixed_ports, lookup, replays, rows

import agentfootprint as af
from agentfootprint.logformat.canonical import parse

TICK = "agentfootprint.cost.tick"
LIMIT = "agentfootprint.cost.limit_hit"
#: 1000 input tokens at 10 USD per 1M: every call costs 0.01 USD
TABLE = {"m": {"input": 10, "output": 0}}
EACH = af.Usage(input=1000, output=0)


#: what the lookup tool was asked, by the latest run()
ASKED: list[Any] = []


def run(tool_calls: int = 3, **options: Any) -> tuple[af.Agent, af.RunResult]:
    """``tool_calls`` replies asking for a lookup, then an answer: 0.01 USD a call."""
    ASKED.clear()
    tool = lookup(lambda args: ASKED.append(args) or "rows")
    agent = af.Agent(
        provider=billed(
            calls(*({"q": str(i)} for i in range(tool_calls))), [EACH] * (tool_calls + 1)
        ),
        model="m",
        tools=[tool],
        ports=fixed_ports(),
        **options,
    )
    return agent, agent.run_sync("go")


def stages(agent: af.Agent, run_id: str) -> list[tuple[str, str | None]]:
    """Each commit's stage and route decision."""
    return [
        (body["stage"], body.get("decision"))
        for row in agent.store.read(run_id)
        if row.type == "commit" and (body := parse(row.body))
    ]


def test_halt_stops_at_the_route_after_the_call_that_crossed_the_budget() -> None:
    """4 calls scripted; the budget (0.015) is crossed by call 2 (cumulative 0.02): the run
    stops at the route after it, that call completed, billed and recorded."""
    options = {"pricing_table": TABLE, "cost_budget": {"usd": 0.015, "on_exceed": "halt"}}
    agent, result = run(**options)
    assert result.calls == 2 and result.iterations == 2
    assert result.stopped_early is not None
    assert result.stopped_early.reason == "cost-budget"
    assert result.stopped_early.details == {"usd": 0.02, "budget": 0.015}
    assert result.stopped_early.pending_tool_calls == 1  # call 2's lookup never ran
    assert ASKED == [{"q": "0"}]
    assert result.state["stopped_early"] == {
        "reason": "cost-budget",
        "usd": 0.02,
        "budget": 0.015,
        "iteration": 2,
        "pending_tool_calls": 1,
    }
    assert result.answer == ""  # the answer it has: call 2 asked for a tool, said nothing
    ticks = events_of(agent.store, result.run_id, TICK)
    assert [(t["call"], t["cumulative_usd"]) for t in ticks] == [(0, 0.01), (1, 0.02)]
    [hit] = events_of(agent.store, result.run_id, LIMIT)
    assert hit == {"action": "halt", "call": 1, "iteration": 2, "usd": 0.02, "budget": 0.015}
    # the route after call 2 decided final: no tool stage ran after the crossing call
    walked = stages(agent, result.run_id)
    crossing = [i for i, s in enumerate(walked) if s[0] == "call-llm"][1]
    assert walked[crossing + 1 :] == [
        ("route", "final"),
        ("prepare-final", None),
        ("break-final", None),
    ]
    opened = parse(rows(agent.store, result.run_id)[0][2])
    assert opened["options"]["cost_budget"] == {"usd": 0.015, "on_exceed": "halt"}
    replays(agent, result, **options)


def test_a_bare_number_warns_once_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentfootprint.cost"):
        agent, result = run(pricing_table=TABLE, cost_budget=0.015)
    assert result.outcome == "answered" and result.answer == "done"
    assert result.calls == 4 and result.stopped_early is None
    [hit] = events_of(agent.store, result.run_id, LIMIT)
    assert hit == {"action": "warn", "call": 1, "iteration": 2, "usd": 0.02, "budget": 0.015}
    warnings = [r for r in caplog.records if r.name == "agentfootprint.cost"]
    assert len(warnings) == 1 and "over its cost_budget of 0.015 USD" in warnings[0].getMessage()
    opened = parse(rows(agent.store, result.run_id)[0][2])
    assert opened["options"]["cost_budget"] == {"usd": 0.015, "on_exceed": "warn"}
    replays(agent, result, pricing_table=TABLE, cost_budget=0.015)


def test_warn_spelled_out_records_what_the_bare_number_records() -> None:
    bare, bare_result = run(pricing_table=TABLE, cost_budget=0.015)
    spelled, spelled_result = run(
        pricing_table=TABLE, cost_budget={"usd": 0.015, "on_exceed": "warn"}
    )
    assert rows(bare.store, bare_result.run_id) == rows(spelled.store, spelled_result.run_id)
    defaulted, defaulted_result = run(pricing_table=TABLE, cost_budget={"usd": 0.015})
    assert rows(bare.store, bare_result.run_id) == rows(defaulted.store, defaulted_result.run_id)


def test_spend_equal_to_the_budget_does_not_exceed_it() -> None:
    agent, result = run(pricing_table=TABLE, cost_budget={"usd": 0.04, "on_exceed": "halt"})
    assert result.outcome == "answered" and result.calls == 4 and result.stopped_early is None
    assert events_of(agent.store, result.run_id, TICK)[-1]["cumulative_usd"] == 0.04
    assert not events_of(agent.store, result.run_id, LIMIT)
    replays(agent, result, pricing_table=TABLE, cost_budget={"usd": 0.04, "on_exceed": "halt"})


def test_a_budget_crossed_by_the_answer_records_the_hit_and_the_turn_ends_answered() -> None:
    options = {"pricing_table": TABLE, "cost_budget": {"usd": 0.035, "on_exceed": "halt"}}
    agent, result = run(**options)
    assert result.outcome == "answered" and result.answer == "done"
    assert result.stopped_early is None  # the reply asked for no tool: nothing to stop
    [hit] = events_of(agent.store, result.run_id, LIMIT)
    assert (hit["action"], hit["call"], hit["usd"]) == ("halt", 3, 0.04)
    replays(agent, result, **options)


def test_max_iterations_and_the_budget_stop_at_the_same_boundary() -> None:
    options = {
        "pricing_table": TABLE,
        "cost_budget": {"usd": 0.015, "on_exceed": "halt"},
        "max_iterations": 2,
    }
    agent, result = run(**options)
    assert result.calls == 2 and result.stopped_early is not None
    assert result.stopped_early.reason == "max-iterations"  # the loop's bound is asked first
    replays(agent, result, **options)


def test_an_unreached_budget_records_the_rows_of_a_priced_run_but_run_open() -> None:
    priced, without = run(pricing_table=TABLE)
    budgeted, within = run(pricing_table=TABLE, cost_budget={"usd": 1, "on_exceed": "halt"})
    assert rows(priced.store, without.run_id)[1:] == rows(budgeted.store, within.run_id)[1:]
    assert not events_of(budgeted.store, within.run_id, LIMIT)
    # off (absent or None): the same rows as a run without it
    off, off_result = run(pricing_table=TABLE, cost_budget=None)
    assert rows(off.store, off_result.run_id) == rows(priced.store, without.run_id)


def test_a_budget_without_a_pricing_table_is_refused_saying_what_to_do() -> None:
    for table in ({}, {"pricing_table": None}, {"pricing_table": False}):
        with pytest.raises(af.UsageError) as caught:
            af.Agent(provider=af.MockProvider(["x"]), model="m", cost_budget=0.5, **table)
        assert caught.value.option == "cost_budget"
        assert "pricing_table=True" in str(caught.value)


def test_a_budget_whose_model_the_table_does_not_price_is_refused() -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(
            provider=af.MockProvider(["x"]),
            model="m",
            cost_budget=0.5,
            pricing_table={"other": {"input": 1, "output": 1}},
        )
    assert caught.value.option == "cost_budget"
    assert "no prices for the agent's model 'm'" in str(caught.value)
    # a bad table is named as the table's fault
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", cost_budget=0.5, pricing_table=[])
    assert caught.value.option == "pricing_table"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (0, "finite number of USD > 0"),
        (-1, "> 0, got -1"),
        (math.nan, "is nan, not a finite number"),
        (math.inf, "is inf, not a finite number"),
        (True, "must be a number of USD"),
        ("0.5", "must be a number of USD"),
        ([0.5], "must be a number of USD"),
        ({"usd": 0}, "> 0, got 0"),
        ({"usd": "1"}, "got '1'"),
        ({"usd": 1, "on_exceed": "stop"}, "'on_exceed' must be 'halt' or 'warn', got 'stop'"),
        ({"usd": 1, "onExceed": "halt"}, "unknown key 'onExceed'"),
        ({"on_exceed": "halt"}, "give the budget in USD"),
    ],
)
def test_cost_budget_refuses_bad_budgets(value: Any, words: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", pricing_table=TABLE, cost_budget=value)
    assert caught.value.option == "cost_budget" and words in str(caught.value), caught.value


def test_a_halt_under_a_policy_naming_usd_verifies_and_replays_with_the_vault(
    tmp_path: Path,
) -> None:
    """The spend and the prices are recorded like any value: a policy may commit them; the
    run still verifies, stops where the budget says, and replays with its vault."""
    policy = af.RedactionPolicy(keys=["usd", "prices"])
    options = {
        "pricing_table": TABLE,
        "cost_budget": {"usd": 0.015, "on_exceed": "halt"},
        "redact": policy,
    }
    log, vault = tmp_path / "log.db", tmp_path / "vault.db"
    agent, result = run(store=log, disclosures=vault, **options)
    assert result.stopped_early is not None and result.stopped_early.details["usd"] == 0.02
    [hit] = events_of(agent.store, result.run_id, LIMIT)
    assert "$commit" in hit["usd"] and hit["budget"] == 0.015
    agent.close()
    twin = af.Agent(provider=af.MockProvider([]), model="m", tools=[lookup()], **options)
    replayed = af.replay_sync(twin, log, result.run_id, disclosures=vault)
    assert replayed.calls_checked == 2
