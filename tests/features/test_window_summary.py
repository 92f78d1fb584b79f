"""``window={"keep_last_turns": N, "summarize": True}``: what leaves is folded into a summary
by a receipted call of its own; the history is never edited."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, lookup, rows

import agentfootprint as af
from agentfootprint.errors import ReplayDivergence
from agentfootprint.features import context_window, window_summary
from agentfootprint.logformat.canonical import parse

EVICTED = "agentfootprint.context.evicted"


def respond(request: Mapping[str, Any]) -> Any:
    """A model: summarises when asked, else one lookup per question and then an answer."""
    messages = request["messages"]
    last = messages[-1]
    if last["role"] == "user" and last["content"].startswith(window_summary.FOLD_FRAME_PREFIX):
        folded = [m["content"] for m in messages if m["role"] == "user"][1:-1]
        return "summary of " + ", ".join(folded)
    if last["role"] == "tool":
        return f"answer to {last['content']}"
    return af.reply(tool_calls=[af.tool_call("lookup", {"q": last["content"]})])


def conversation(turns: int, **options: Any) -> tuple[af.Agent, list[af.RunResult]]:
    agent = af.Agent(
        provider=af.MockProvider(respond=respond),
        model="m",
        tools=[lookup(lambda args: f"rows for {args['q']}")],
        ports=fixed_ports(),
        **options,
    )
    results: list[af.RunResult] = []
    for turn in range(turns):
        parent = results[-1] if results else None
        results.append(agent.run_sync(f"question {turn}", continue_from=parent))
    return agent, results


WINDOW = {"keep_last_turns": 1, "summarize": True}


def test_what_leaves_is_folded_by_a_receipted_call_served_ahead_of_the_window() -> None:
    agent, results = conversation(3, window=WINDOW, keep_last_tool_results=0)
    provider = agent.config.provider
    # turn 0: 2 calls; turns 1 and 2: a summariser call, then 2 calls
    assert [r.calls for r in results] == [2, 3, 3]
    served = [af.served_at(agent.store, r.run_id, k) for r in results for k in range(r.calls)]
    assert served == provider.requests  # every call, the summariser's too, from the log
    summariser = served[2]
    assert summariser["messages"][0]["content"].startswith(window_summary.FOLD_FRAME_PREFIX)
    assert [m["role"] for m in summariser["messages"][1:-1]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert summariser["messages"][1]["content"] == "question 0"
    assert summariser["tools"] == served[0]["tools"]  # tools stay defined (vendors need them)
    # the next call serves the summary, then the window
    after = served[3]["messages"]
    assert after[0]["content"].startswith(context_window.SUMMARY_FRAME_PREFIX)
    assert after[0]["content"].endswith("summary of question 0")
    assert "written at call 0 from the 4 history messages" in after[0]["content"]
    assert after[1] == {"role": "user", "content": "question 1"}
    # the second fold sees the first summary
    second = served[5]["messages"]
    assert "summary of question 0" in second[0]["content"]
    assert second[1]["content"] == "question 1"
    # the ledger is whole; the summary and the folds are recorded
    assert len(results[-1].state["history"]) == 12
    assert results[-1].state["window_summary"] == {
        "text": "summary of question 1",
        "call": 0,
        "folded": 8,
    }
    assert events_of(agent.store, results[2].run_id, EVICTED) == [
        {"iteration": 1, "messages": [4, 8], "reason": "summarized", "turns_left": 1}
    ]


def test_the_summariser_call_is_receipted_at_its_own_index_and_billed() -> None:
    agent, results = conversation(2, window=WINDOW, keep_last_tool_results=0)
    run = results[1]
    receipts = [parse(r.body) for r in agent.store.read(run.run_id) if r.type == "receipt"]
    assert [r["call"] for r in receipts] == [0, 1, 2]
    assert run.usage["calls"] == 3
    # the served list of the summariser call is committed by reference, never copied
    writes = [
        parse(r.body)["value"]
        for r in agent.store.read(run.run_id)
        if r.type == "write" and parse(r.body)["path"] == "served_messages"
    ]
    assert writes[0][1:-1] == [{"history": [0, 4]}]
    assert {"history": [4, None]} in writes[1]


def test_a_summarized_run_verifies_and_replays_without_a_model_call() -> None:
    agent, results = conversation(3, window=WINDOW)
    for result in results:
        af.verify_run(agent.store, result.run_id)
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[lookup(lambda args: "never run")],
        window=WINDOW,
    )
    for result in results:
        replayed = af.replay_sync(twin, agent.store, result.run_id)
        assert replayed.calls_checked == result.calls
        af.verify_run(twin.store, replayed.result.run_id)


def test_turning_the_summary_off_diverges_at_the_summariser_call() -> None:
    agent, results = conversation(2, window=WINDOW, keep_last_tool_results=0)
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[lookup()],
        window={"keep_last_turns": 1},
        keep_last_tool_results=0,
    )
    with pytest.raises(ReplayDivergence) as raised:
        af.replay_sync(twin, agent.store, results[1].run_id)
    assert raised.value.call == 0
    assert raised.value.kind == "messages"
    assert "the original served" in str(raised.value)


def test_without_summarize_the_window_records_what_it_recorded() -> None:
    plain, plain_runs = conversation(3, window={"keep_last_turns": 1})
    off, off_runs = conversation(3, window={"keep_last_turns": 1, "summarize": False})
    for a, b in zip(plain_runs, off_runs, strict=True):
        assert rows(plain.store, a.run_id) == rows(off.store, b.run_id)
    opened = parse(next(iter(off.store.read(off_runs[0].run_id))).body)
    assert opened["options"]["window"] == {"keep_last_turns": 1}


def test_a_pinned_result_stays_raw_while_the_rest_of_its_turn_is_folded() -> None:
    agent, results = conversation(2, window=WINDOW, keep_last_tool_results=1)
    served = [af.served_at(agent.store, r.run_id, k) for r in results for k in range(r.calls)]
    # turn 0's lookup is pinned: the summariser folds only its answer
    summariser = served[2]["messages"]
    assert [m["role"] for m in summariser[1:-1]] == ["assistant"]
    after = served[3]["messages"]
    assert after[0]["content"].startswith(context_window.SUMMARY_FRAME_PREFIX)
    assert [m["role"] for m in after[1:4]] == ["user", "assistant", "tool"]


def test_the_wrap_up_message_starts_no_turn() -> None:
    script = [af.reply(tool_calls=[af.tool_call("lookup", {"q": "a"})])] * 2 + ["wrapped"]
    script += [af.reply(tool_calls=[af.tool_call("lookup", {"q": "b"})]), "second"]
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[lookup()],
        max_iterations=2,
        window={"keep_last_turns": 1},
        keep_last_tool_results=0,
    )
    first = agent.run_sync("question 0")
    assert first.stopped_early is not None and first.stopped_early.details["wrapped_up"]
    second = agent.run_sync("question 1", continue_from=first)
    request = agent.config.provider.requests[3]
    # the window keeps one turn: question 1's. The wrap-up message belonged to turn 0 and
    # left with it (counted as a turn of its own, it would have kept turn 0 served)
    assert request["messages"][0] == {"role": "user", "content": "question 1"}
    af.verify_run(agent.store, second.run_id)
