"""``pricing_table``: a recorded cost tick after every call, recomputable from the log."""

from __future__ import annotations

import datetime
import logging
from decimal import Decimal
from typing import Any

import pytest
from feature_support import billed, calls, events_of, fixed_ports, lookup, replays, rows

import agentfootprint as af
from agentfootprint.features.pricing_table import DECIMALS, shipped_prices, shipped_table
from agentfootprint.logformat.canonical import parse

TICK = "agentfootprint.cost.tick"
UNPRICED = "agentfootprint.cost.unpriced"
COST_KINDS = {TICK, UNPRICED}
TABLE = {"m": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}


def usage(input: int, output: int, **cache: int) -> af.Usage:
    return af.Usage(input=input, output=output, **cache)


def run(usages: list[af.Usage], model: str = "m", **options: Any) -> tuple[af.Agent, af.RunResult]:
    """A run of ``len(usages) - 1`` tool calls and an answer, each reply with its usage."""
    script = calls(*({"q": str(i)} for i in range(len(usages) - 1)))
    agent = af.Agent(
        provider=billed(script, usages),
        model=model,
        tools=[lookup()],
        ports=fixed_ports(),
        **options,
    )
    return agent, agent.run_sync("go")


def without_cost(found: list[tuple[str, int, bytes]]) -> list[tuple[str, int, bytes]]:
    return [r for r in found if r[0] != "event" or parse(r[2])["name"] not in COST_KINDS]


def test_every_call_ticks_its_usd_and_the_runs_cumulative() -> None:
    agent, result = run(
        [
            usage(1000, 500),
            usage(2000, 100, cache_read=3000, cache_write=400),
            usage(10, 7),
        ],
        pricing_table=TABLE,
    )
    ticks = events_of(agent.store, result.run_id, TICK)
    # 1000*3 + 500*15 = 10500; 2000*3 + 100*15 + 3000*0.3 + 400*3.75 = 9900; 10*3 + 7*15 = 135
    assert [(t["call"], t["iteration"], t["usd"], t["cumulative_usd"]) for t in ticks] == [
        (0, 1, 0.0105, 0.0105),
        (1, 2, 0.0099, 0.0204),
        (2, 3, 0.000135, 0.020535),
    ]
    assert all(t["model"] == "m" for t in ticks)
    # the prices billed are on the record once per run: the cost recomputes from the log
    assert ticks[0]["prices"] == TABLE["m"]
    assert all("prices" not in t for t in ticks[1:])
    assert not events_of(agent.store, result.run_id, UNPRICED)
    assert "pricing_table" not in str(result.state)  # the spend is never in state
    replays(agent, result, pricing_table=TABLE)


def test_the_cost_recomputes_from_the_log_alone() -> None:
    """An auditor's check: each call's usage (the recorded ``usage`` writes, per call) times
    the recorded prices, rounded half-even, is the tick; the cumulative is their sum."""
    agent, result = run(
        [usage(1234, 567, cache_read=89), usage(1, 1, cache_write=3), usage(42, 0)],
        pricing_table={"m": {"input": 0.15, "output": 0.6, "cache_read": 0.075, "cache_write": 1}},
    )
    totals, ticks = [], []
    for row in agent.store.read(result.run_id):
        body = parse(row.body)
        if row.type == "write" and body["path"] == "usage" and body["value"]["calls"]:
            totals.append(body["value"])
        elif row.type == "event" and body["name"] == TICK:
            ticks.append(body["payload"])
    prices = {k: Decimal(str(v)) for k, v in ticks[0]["prices"].items()}
    cumulative = Decimal(0)
    before: dict[str, int] = {}
    for total, tick in zip(totals, ticks, strict=True):
        spent = sum(
            (Decimal(n - before.get(k, 0)) * prices[k] for k, n in total.items() if k != "calls"),
            Decimal(0),
        )
        usd = (spent / 1_000_000).quantize(Decimal(1).scaleb(-DECIMALS))
        cumulative += usd
        assert Decimal(str(tick["usd"])) == usd
        assert Decimal(str(tick["cumulative_usd"])) == cumulative
        before = total
    assert len(ticks) == result.calls == 3


def test_figures_are_rounded_to_fixed_decimals_and_stable_json() -> None:
    agent, result = run(
        [usage(1, 0), usage(1, 0), usage(3, 0)],
        pricing_table={"m": {"input": 0.075, "output": 1e-5}},
    )
    bodies = [
        r[2] for r in rows(agent.store, result.run_id) if r[0] == "event" and TICK.encode() in r[2]
    ]
    assert b'"usd":7.5e-8' in bodies[0] and b'"cumulative_usd":1.5e-7' in bodies[1]
    assert b'"cumulative_usd":3.75e-7' in bodies[2]
    # output at 1e-5 USD per 1M: below 1e-10 a call, rounded away (half-even)
    agent, result = run(
        [usage(0, 5), usage(0, 4)], pricing_table={"m": {"input": 1, "output": 1e-5}}
    )
    ticks = events_of(agent.store, result.run_id, TICK)
    assert [(t["usd"], t["cumulative_usd"]) for t in ticks] == [(0, 0), (0, 0)]
    replays(agent, result, pricing_table={"m": {"input": 1, "output": 1e-5}})


def test_a_model_missing_from_the_table_warns_once_and_its_cost_is_unknown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = {"other": {"input": 1, "output": 1}}
    with caplog.at_level(logging.WARNING, logger="agentfootprint.cost"):
        agent, result = run([usage(10, 10), usage(10, 10), usage(10, 10)], pricing_table=table)
    assert result.outcome == "answered" and result.calls == 3  # never a crash
    ticks = events_of(agent.store, result.run_id, TICK)
    assert [(t["usd"], t["cumulative_usd"]) for t in ticks] == [(None, 0)] * 3
    assert all("prices" not in t for t in ticks)
    [unpriced] = events_of(agent.store, result.run_id, UNPRICED)
    assert unpriced == {
        "call": 0,
        "iteration": 1,
        "model": "m",
        "kinds": ["input", "output"],
        "in_table": False,
    }
    warnings = [r for r in caplog.records if r.name == "agentfootprint.cost"]
    assert len(warnings) == 1 and "'m' has no prices" in warnings[0].getMessage()
    replays(agent, result, pricing_table=table)


def test_tokens_of_a_kind_the_entry_does_not_price_are_unknown_not_guessed() -> None:
    table = {"m": {"input": 1, "output": 2}}
    agent, result = run(
        [usage(10, 10, cache_read=0), usage(10, 10, cache_read=100), usage(10, 10)],
        pricing_table=table,
    )
    ticks = events_of(agent.store, result.run_id, TICK)
    # a cache figure of 0 needs no price; 100 cache reads with no cache_read price do
    assert [(t["usd"], t["cumulative_usd"]) for t in ticks] == [
        (0.00003, 0.00003),
        (None, 0.00003),
        (0.00003, 0.00006),
    ]
    [unpriced] = events_of(agent.store, result.run_id, UNPRICED)
    assert (unpriced["call"], unpriced["kinds"], unpriced["in_table"]) == (1, ["cache_read"], True)
    replays(agent, result, pricing_table=table)


def test_the_cumulative_resets_every_run() -> None:
    agent = af.Agent(
        provider=billed(["a", "b"], [usage(1000, 0), usage(2000, 0)]),
        model="m",
        ports=fixed_ports(),
        pricing_table=TABLE,
    )
    first, second = agent.run_sync("one"), agent.run_sync("two")
    assert events_of(agent.store, first.run_id, TICK)[0]["cumulative_usd"] == 0.003
    [tick] = events_of(agent.store, second.run_id, TICK)
    assert (tick["usd"], tick["cumulative_usd"]) == (0.006, 0.006)
    assert tick["prices"] == TABLE["m"]  # each run records the prices it used


def test_the_shipped_table_is_dated_sourced_and_valid() -> None:
    shipped = shipped_table()
    datetime.date.fromisoformat(shipped["date"])
    assert set(shipped["source"]) == {"openai", "anthropic"}
    assert all(url.startswith("https://") for url in shipped["source"].values())
    assert "contract prices" in shipped["note"] and "pricing_table=" in shipped["note"]
    assert shipped["unit"] == "USD per 1,000,000 tokens"
    models = shipped_prices()
    assert {"gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5", "claude-haiku-4-5"} <= set(models)
    for prices in models.values():
        assert (
            {"input", "output"} <= set(prices) <= {"input", "output", "cache_read", "cache_write"}
        )
        assert prices["output"] >= prices["input"] > prices.get("cache_read", 0) >= 0
    af.Agent(provider=af.MockProvider(["x"]), model="m", pricing_table=models).close()


def test_true_bills_at_the_shipped_prices() -> None:
    agent, result = run([usage(1_000_000, 1_000_000)], model="gpt-4o-mini", pricing_table=True)
    [tick] = events_of(agent.store, result.run_id, TICK)
    assert tick["prices"] == shipped_prices()["gpt-4o-mini"]
    prices = tick["prices"]
    assert Decimal(str(tick["usd"])) == Decimal(str(prices["input"])) + Decimal(
        str(prices["output"])
    )
    replays_with_model(agent, result, "gpt-4o-mini", pricing_table=True)


def replays_with_model(agent: af.Agent, result: af.RunResult, model: str, **options: Any) -> None:
    twin = af.Agent(provider=af.MockProvider([]), model=model, tools=[lookup()], **options)
    assert af.replay_sync(twin, agent.store, result.run_id).calls_checked == result.calls


def test_a_replay_under_other_prices_diverges_at_the_first_tick() -> None:
    agent, result = run([usage(100, 100), usage(100, 100)], pricing_table=TABLE)
    cheaper = {"m": {**TABLE["m"], "output": 10}}
    twin = af.Agent(
        provider=af.MockProvider([]), model="m", tools=[lookup()], pricing_table=cheaper
    )
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin, agent.store, result.run_id)
    assert caught.value.call == 0 and TICK in str(caught.value)


def test_off_the_run_records_the_same_rows_as_without_it_and_on_only_adds_ticks() -> None:
    usages = [usage(100, 10), usage(200, 20), usage(300, 30)]
    plain, without = run(usages)
    for off in (None, False):
        agent, result = run(usages, pricing_table=off)
        assert rows(agent.store, result.run_id) == rows(plain.store, without.run_id)
    priced, with_table = run(usages, pricing_table=TABLE)
    # not recorded in run.open (the ticks carry the prices used): only the tick rows differ
    assert without_cost(rows(priced.store, with_table.run_id)) == rows(plain.store, without.run_id)
    assert len(events_of(priced.store, with_table.run_id, TICK)) == 3


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("yes", "must be True (the shipped table) or a non-empty mapping"),
        (1, "must be True"),
        ({}, "non-empty mapping"),
        ([("m", {})], "non-empty mapping"),
        ({"m": 2.5}, "the prices of 'm' must be a mapping"),
        ({"": {"input": 1, "output": 1}}, "non-empty strings"),
        ({7: {"input": 1, "output": 1}}, "non-empty strings"),
        ({"m": {"input": 1}}, "'m' has no 'output' price"),
        ({"m": {"output": 1}}, "'m' has no 'input' price"),
        ({"m": {"input": 1, "output": 1, "reasoning": 1}}, "unknown price 'reasoning'"),
        ({"m": {"input": -1, "output": 1}}, "the 'input' price of 'm' must be a finite number"),
        ({"m": {"input": float("nan"), "output": 1}}, "['m']['input'] is nan, not a finite"),
        ({"m": {"input": 1, "output": float("inf")}}, "['m']['output'] is inf"),
        ({"m": {"input": True, "output": 1}}, "got True"),
        ({"m": {"input": "1", "output": 1}}, "got '1'"),
        ({"m": {"input": 1, "output": 1, "cache_read": -0.1}}, "the 'cache_read' price"),
        (
            {"m": {"input": 1, "output": 1, "cache_write": 2**60}},
            "['cache_write'] is an integer beyond",
        ),
    ],
)
def test_pricing_table_refuses_bad_tables(value: Any, words: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", pricing_table=value)
    assert caught.value.option == "pricing_table" and words in str(caught.value), caught.value
