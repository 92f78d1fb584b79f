"""``context_budget``: per-slot budgets signal pressure; nothing is truncated."""

from __future__ import annotations

from typing import Any

import pytest
from feature_support import calls, events_of, fixed_ports, lookup, record, rows

import agentfootprint as af
from agentfootprint.testing.replay import NoModel


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"history": 10}, "unknown slot 'history'"),
        ({"messages": 0}, "positive integer"),
        ({"tools": True}, "positive integer"),
        ([("messages", 10)], "mapping of slot budgets"),
        ("10000", "mapping of slot budgets"),
    ],
)
def test_context_budget_refuses_bad_budgets(value: Any, words: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", context_budget=value)
    assert caught.value.option == "context_budget" and words in str(caught.value)


def test_a_slot_over_its_budget_signals_and_nothing_is_truncated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pressure: list[af.AgentEvent] = []
    agent = af.Agent(
        provider=af.MockProvider(calls({"q": "a"})),
        model="m",
        system="You look things up carefully.",
        tools=[lookup("r" * 40)],
        context_budget={"messages": 30, "system_prompt": 10},
        ports=fixed_ports(),
    )
    agent.on("agentfootprint.context.budget_pressure", pressure.append)
    message = "please look up everything about the account"
    result = agent.run_sync(message)
    found = [(e.slot, e.call, e.budget, e.used) for e in pressure]  # type: ignore[attr-defined]
    assert found == [
        ("system_prompt", 0, 10, 29),
        ("messages", 0, 30, len(message)),
        ("system_prompt", 1, 10, 29),
        ("messages", 1, 30, len(message) + 40),
    ]
    assert [r.message.count("context slot") for r in caplog.records].count(1) == 2  # once each
    # the full content still reached the model, and the log holds no pressure row
    assert agent.config.provider.requests[1]["messages"][-1]["content"] == "r" * 40
    assert not events_of(agent.store, result.run_id, "agentfootprint.context.budget_pressure")


def test_the_budget_changes_no_row() -> None:
    script = lambda: calls({"q": "a"})  # noqa: E731
    tight, a = record(script, [lookup()], context_budget={"messages": 1})
    loose, b = record(script, [lookup()])
    assert rows(tight.store, a.run_id) == rows(loose.store, b.run_id)


def test_a_replayed_conversation_counts_each_message_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replay serves each run its parent's history as parsed from the log (other objects
    than the previous run's): the part still identical is found by bisection, so the
    messages counted per call stay bounded by what is new, however long the conversation,
    and every figure equals a full count."""
    from agentfootprint.features import context_budget as module

    turns = 12
    options: dict[str, Any] = {"model": "m", "context_budget": {"messages": 10**9}}
    store = af.MemoryStore()
    agent = af.Agent(
        provider=af.MockProvider([f"answer {i}" for i in range(turns)]), store=store, **options
    )
    previous: af.RunResult | None = None
    for turn in range(turns):
        previous = agent.run_sync(f"question {turn}", continue_from=previous)
    counted: list[Any] = []
    chars = module._chars

    def counting(message: Any) -> int:
        counted.append(message)
        return chars(message)

    measured: list[tuple[int, int]] = []
    measure = module._Meter.measure

    def checked(self: Any, served: Any, appends_only: bool) -> dict[str, int]:
        figures = measure(self, served, appends_only)
        measured.append((figures["messages"], sum(map(chars, served["messages"]))))
        return figures

    monkeypatch.setattr(module, "_chars", counting)
    monkeypatch.setattr(module._Meter, "measure", checked)
    replayer = af.Agent(provider=NoModel(), store=af.MemoryStore(), **options)
    per_replay = []
    for run_id in store.run_ids():
        del counted[:]
        af.replay_sync(replayer, store, run_id)
        per_replay.append(len(counted))
    assert all(got == full for got, full in measured), measured
    assert max(per_replay) <= 4, per_replay  # the new messages, not the history (24 by then)
