"""``wrap_up_at_max_iterations``: one more call, tools withheld, when the action budget runs out."""

from __future__ import annotations

from typing import Any

import pytest
from feature_support import calls, events_of, lookup, record, replays, rows, without_open

import agentfootprint as af
from agentfootprint.features.wrap_up import WRAP_UP_FRAME_PREFIX, WRAP_UP_MESSAGE

KIND = "agentfootprint.agent.budget_exhausted"


def asking(text: str = "let me check") -> af.LLMResponse:
    return af.reply(text, tool_calls=[af.tool_call("lookup", {"q": "a"})])


def capped(answer: Any = "what I found") -> list[Any]:
    return [asking(), asking(), answer]


def test_at_the_cap_one_more_call_is_served_with_no_tools_and_the_marked_message() -> None:
    agent, result = record(lambda: capped(), [lookup()], max_iterations=2)
    assert result.calls == 3 and result.answer == "what I found"
    assert result.outcome == "stopped_early"
    assert result.stopped_early == af.StoppedEarly(
        reason="max-iterations", iteration=2, pending_tool_calls=1, details={"wrapped_up": True}
    )
    history = result.state["history"]
    assert history[-3:] == [
        {"role": "assistant", "content": "let me check"},  # the cut reply's text, no calls
        {"role": "user", "content": WRAP_UP_MESSAGE},
        {"role": "assistant", "content": "what I found"},
    ]
    assert WRAP_UP_MESSAGE.startswith(WRAP_UP_FRAME_PREFIX)
    provider = agent.config.provider
    assert len(provider.requests) == 3
    for k in range(3):
        assert af.served_at(agent.store, result.run_id, k) == provider.requests[k]
    assert [len(r["tools"]) for r in provider.requests] == [1, 1, 0]
    assert af.served_at(agent.store, result.run_id, 2)["tools"] == []
    assert provider.requests[2]["messages"][-1] == {"role": "user", "content": WRAP_UP_MESSAGE}
    assert events_of(agent.store, result.run_id, KIND) == [{"action": "wrap-up", "iteration": 2}]
    replays(agent, result, max_iterations=2)


def test_a_wrap_up_reply_asking_for_tools_runs_none_and_final_takes_its_text() -> None:
    ran: list[Any] = []
    tool = lookup(lambda args: ran.append(args) or "rows")
    agent, result = record(lambda: capped(asking("partial answer")), [tool], max_iterations=2)
    assert len(ran) == 1  # only the first iteration's call ran
    assert result.answer == "partial answer" and result.calls == 3
    assert result.state["history"][-1] == {"role": "assistant", "content": "partial answer"}
    replays(agent, result, max_iterations=2)


def test_receipts_off_the_wrap_up_call_is_marked_at_the_next_index() -> None:
    agent, result = record(lambda: capped(), [lookup()], max_iterations=2, record_receipt=False)
    assert result.calls == 3
    checked = af.Verifier(agent.store).verify(result.run_id)
    assert isinstance(checked, af.RunVerification) and checked.close["calls"] == 3
    assert af.served_at(agent.store, result.run_id, 2)["tools"] == []
    replays(agent, result, max_iterations=2, record_receipt=False)


def test_the_next_turn_serves_the_tools_again() -> None:
    agent = af.Agent(
        provider=af.MockProvider([asking(), "wrapped", "fresh"]),
        model="m",
        tools=[lookup()],
        max_iterations=1,
    )
    first = agent.run_sync("go")
    assert first.stopped_early is not None and first.stopped_early.details["wrapped_up"]
    second = agent.run_sync("again", continue_from=first)
    assert second.answer == "fresh" and second.stopped_early is None
    assert len(af.served_at(agent.store, second.run_id, 0)["tools"]) == 1


def test_off_the_turn_ends_on_the_cut_reply_as_before() -> None:
    agent, result = record(
        lambda: capped(), [lookup()], max_iterations=2, wrap_up_at_max_iterations=False
    )
    assert result.calls == 2 and result.answer == "let me check"
    assert result.stopped_early == af.StoppedEarly(
        reason="max-iterations", iteration=2, pending_tool_calls=1
    )
    assert WRAP_UP_MESSAGE not in str(result.state["history"])
    assert not events_of(agent.store, result.run_id, KIND)
    assert "wrap-up" not in agent.chart.stages
    replays(agent, result, max_iterations=2, wrap_up_at_max_iterations=False)


def test_a_run_that_never_hits_the_cap_records_the_same_rows_on_or_off() -> None:
    script = lambda: calls({"q": "a"}, {"q": "b"})  # noqa: E731
    on, with_wrap = record(script, [lookup()])
    off, without = record(script, [lookup()], wrap_up_at_max_iterations=False)
    assert with_wrap.calls == 3 and with_wrap.stopped_early is None
    assert without_open(rows(on.store, with_wrap.run_id)) == without_open(
        rows(off.store, without.run_id)
    )


def test_an_agent_without_tools_never_wraps_up() -> None:
    agent = af.Agent(provider=af.MockProvider(["hi"]), model="m")
    assert agent.config.options["wrap_up_at_max_iterations"] is False
    assert "wrap-up" not in agent.chart.stages
    explicit = af.Agent(provider=af.MockProvider(["hi"]), model="m", wrap_up_at_max_iterations=True)
    assert "wrap-up" not in explicit.chart.stages  # nothing to withhold: the feature sits out
    assert explicit.run_sync("hello").answer == "hi"


def test_the_branch_sits_between_the_route_and_the_final_phase_and_is_budgeted() -> None:
    agent = af.Agent(provider=af.MockProvider([]), model="m", tools=[lookup()], max_iterations=3)
    by_name = {s["stage"]: s for s in agent.chart.describe()}
    assert by_name["route"]["branches"] == {
        "tool-calls": "tool-calls",
        "final": "prepare-final",
        "wrap-up": "wrap-up",
    }
    assert by_name["wrap-up"]["next"] == "call-llm-wrap-up"
    assert by_name["call-llm-wrap-up"]["next"] == "prepare-final"
    assert "call-llm-wrap-up" in agent.seam.model_stages
    assert agent.seam.stage_budget == 6 * 3 + len(agent.chart.stages)
    assert len(agent.chart.stages) == 11


@pytest.mark.parametrize("value", [1, 0, "yes", None, [True]])
def test_a_value_that_is_not_a_bool_is_refused(value: Any) -> None:
    with pytest.raises(af.UsageError, match=r"wrap_up_at_max_iterations.*True or False"):
        af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=[lookup()],
            wrap_up_at_max_iterations=value,
        )


def test_a_cost_budget_halting_at_the_cap_keeps_the_plain_stop() -> None:
    """The money cap forbids a call past it: no wrap-up even though the cap was reached."""
    from test_cost_budget import TABLE, run

    options = {
        "pricing_table": TABLE,
        "cost_budget": {"usd": 0.015, "on_exceed": "halt"},
        "max_iterations": 2,
    }
    agent, result = run(**options)
    assert result.calls == 2 and result.stopped_early is not None
    assert "wrapped_up" not in result.stopped_early.details
    assert not events_of(agent.store, result.run_id, KIND)
    replays(agent, result, **options)
