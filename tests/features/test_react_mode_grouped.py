"""``react_mode="dynamic-grouped"``: dynamic's walk and rows, each model turn's stages
described as one ``llm-call`` group (the seed: "behaviour is identical to 'dynamic'; only the
chart's nesting differs"). Groups live in the chart's description, never in the log."""

from __future__ import annotations

import json

import pytest
from feature_support import calls, lookup, record, replays, rows, without_open

import agentfootprint as af

ITERATION = ("system-prompt", "messages", "tools", "call-llm")


def describe(react_mode: str) -> dict[str, dict[str, object]]:
    agent = af.Agent(provider=af.MockProvider([]), model="m", react_mode=react_mode)
    return {entry["stage"]: entry for entry in agent.seam.chart.describe()}


def test_the_description_nests_each_model_turn_in_an_llm_call_group() -> None:
    grouped, dynamic = describe("dynamic-grouped"), describe("dynamic")
    assert {name for name, e in grouped.items() if e.get("group") == "llm-call"} >= set(ITERATION)
    assert grouped["route"].get("group") is None and grouped["seed"].get("group") is None
    assert all("group" not in e for e in dynamic.values())  # dynamic is flat, as before
    # the same stages, leading to the same places: only the nesting differs
    flat = {name: {k: v for k, v in e.items() if k != "group"} for name, e in grouped.items()}
    assert flat == dynamic


def test_the_rows_are_dynamics_but_for_the_option_run_open_records() -> None:
    script = lambda: calls({"q": "a"}, {"q": "b"})  # noqa: E731
    plain, first = record(script, [lookup()])
    grouped, second = record(script, [lookup()], react_mode="dynamic-grouped")
    assert without_open(rows(grouped.store, second.run_id)) == without_open(
        rows(plain.store, first.run_id)
    )
    opened = [json.loads(r[2]) for r in rows(grouped.store, second.run_id) if r[0] == "run.open"]
    assert opened[0]["options"]["react_mode"] == "dynamic-grouped"


@pytest.mark.parametrize(
    ("recorded", "replayed"), [("dynamic", "dynamic-grouped"), ("dynamic-grouped", "dynamic")]
)
def test_a_run_replays_under_the_other_mode_with_no_divergence(
    recorded: str, replayed: str
) -> None:
    agent, result = record(lambda: calls({"q": "a"}), [lookup()], react_mode=recorded)
    outcome = replays(agent, result, react_mode=replayed)  # a divergence raises
    assert outcome.calls_checked == result.calls == 2
    assert outcome.result.answer == result.answer
