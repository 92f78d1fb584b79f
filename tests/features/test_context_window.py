"""``window``: the last N user turns served by reference; the history is never edited."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from feature_support import calls, events_of, fixed_ports, lookup, rows

import agentfootprint as af
from agentfootprint.errors import ReplayDivergence, UsageError
from agentfootprint.features import context_window, keep_last_tool_results, registry
from agentfootprint.logformat.canonical import parse

EVICTED = "agentfootprint.context.evicted"


def conversation(
    turns: int, *, store: Any = None, **options: Any
) -> tuple[af.Agent, list[af.RunResult]]:
    """``turns`` user turns, each one lookup call and an answer, continued run after run."""
    script: list[Any] = []
    for turn in range(turns):
        script += calls({"q": f"t{turn}"}, answer=f"answer {turn}")
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[lookup()],
        ports=fixed_ports(),
        store=store,
        **options,
    )
    results: list[af.RunResult] = []
    for turn in range(turns):
        parent = results[-1] if results else None
        results.append(agent.run_sync(f"question {turn}", continue_from=parent))
    return agent, results


def served_lists(agent: af.Agent, results: list[af.RunResult]) -> list[dict[str, Any]]:
    """Every call's served request rebuilt from the log, checked against the provider."""
    provider = agent.config.provider
    served: list[dict[str, Any]] = []
    for result in results:
        for k in range(result.calls):
            found = af.served_at(agent.store, result.run_id, k)
            assert found == provider.requests[len(served)]
            served.append(found)
    assert len(served) == len(provider.requests)
    return served


def assert_pairs_whole(messages: list[dict[str, Any]]) -> None:
    """Every tool result follows the assistant message that called it, and every call of
    a served assistant message has its result served."""
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending
            pending.discard(message["tool_call_id"])
        else:
            assert not pending, "a call was served without its result"
            pending = {c["id"] for c in message.get("tool_calls") or ()}
    assert not pending


def test_the_window_serves_the_last_turns_by_reference_and_keeps_pairs_whole() -> None:
    agent, results = conversation(4, window={"keep_last_turns": 2}, keep_last_tool_results=0)
    served = served_lists(agent, results)
    history = results[-1].state["history"]
    assert len(history) == 16  # 4 turns x (user, call, result, answer): nothing was edited
    last = served[-1]["messages"]
    assert last == history[8:15]  # turns 2 and 3 (the last answer is not served yet)
    for request in served:
        assert_pairs_whole(request["messages"])
        assert request["messages"][0]["role"] == "user"
    # the window is recorded as segments, never as copies of messages
    for result in results:
        for row in agent.store.read(result.run_id):
            body = parse(row.body)
            if row.type == "write" and body["path"] == "served_messages":
                assert all(set(segment) == {"history"} for segment in body["value"])


def test_each_boundary_is_one_eviction_event_and_a_still_window_records_nothing() -> None:
    agent, results = conversation(4, window={"keep_last_turns": 2}, keep_last_tool_results=0)
    found = [events_of(agent.store, r.run_id, EVICTED) for r in results]
    assert found[0] == [] and found[1] == []
    assert found[2] == [{"iteration": 1, "messages": [0, 4], "reason": "window", "turns_left": 1}]
    assert found[3] == [{"iteration": 1, "messages": [4, 8], "reason": "window", "turns_left": 1}]
    # one write of served_messages per boundary (and the first call), none while it is still
    writes = [
        sum(
            1
            for row in agent.store.read(r.run_id)
            if row.type == "write" and parse(row.body)["path"] == "served_messages"
        )
        for r in results
    ]
    assert writes == [1, 0, 1, 1]


@pytest.mark.parametrize(
    "value",
    [
        2,
        "2",
        True,
        [2],
        {},
        {"keep_last_turns": 0},
        {"keep_last_turns": -1},
        {"keep_last_turns": 1.5},
        {"keep_last_turns": True},
        {"keep_last_turns": "2"},
        {"turns": 2},
        {"keep_last_turns": 2, "summarize": 1},
        {"keep_last_turns": 2, "summary": True},
    ],
)
def test_window_refuses_what_is_not_keep_last_turns_of_at_least_one(value: Any) -> None:
    with pytest.raises(UsageError, match="'window'") as raised:
        af.Agent(provider=af.MockProvider([]), model="m", window=value)
    assert raised.value.option == "window"


def before_this_feature(script: list[Any], **options: Any) -> af.Agent:
    """An agent on the seam without the window modules (what a run recorded before)."""
    agent = af.Agent(provider=af.MockProvider(script), model="m", **options)
    features = tuple(
        f
        for f in registry.all_features()
        if f not in (context_window.FEATURE, keep_last_tool_results.FEATURE)
    )
    agent.seam = registry.Seam.build(agent.config.options, features=features)
    agent.chart = agent.seam.chart
    return agent


def test_without_a_window_a_run_records_exactly_the_rows_it_recorded_before() -> None:
    for given in ({}, {"keep_last_tool_results": 3}):  # the pin is ignored without a window
        script = calls({"q": "a"}, {"q": "b"})
        plain = af.Agent(
            provider=af.MockProvider(script), model="m", tools=[lookup()], ports=fixed_ports()
        )
        now = plain.run_sync("go")
        old = before_this_feature(script, tools=[lookup()], ports=fixed_ports(), **given)
        then = old.run_sync("go")
        assert rows(plain.store, now.run_id) == rows(old.store, then.run_id)


def replay_all(agent: af.Agent, results: list[af.RunResult], **options: Any) -> None:
    for result in results:
        twin = af.Agent(
            provider=af.MockProvider([]), model="m", tools=[lookup()], store=agent.store, **options
        )
        assert af.replay_sync(twin, agent.store, result.run_id).calls_checked == result.calls


def test_a_windowed_conversation_verifies_and_replays_under_the_same_window() -> None:
    options = {"window": {"keep_last_turns": 1}}
    agent, results = conversation(3, **options)  # the plugin verifies every run
    replay_all(agent, results, **options)


def test_a_replay_under_another_window_size_diverges_where_the_served_list_changes() -> None:
    agent, results = conversation(3, window={"keep_last_turns": 1}, keep_last_tool_results=0)
    # turn 0 serves the same list under either size: it replays
    replay_all(agent, results[:1], window={"keep_last_turns": 2}, keep_last_tool_results=0)
    # turn 1: size 1 has evicted turn 0 at its first call, size 2 has not
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[lookup()],
        window={"keep_last_turns": 2},
        keep_last_tool_results=0,
    )
    with pytest.raises(ReplayDivergence) as raised:
        af.replay_sync(twin, agent.store, results[1].run_id)
    assert raised.value.call == 0
    assert raised.value.kind == "messages"
    # the message names what differs: the replay (2 turns) also serves turn 0's four
    # messages (its question, the tool call, its result, the answer) the original evicted
    assert "the replay serves 4 messages the original did not, at 0-3 (user 'question 0'" in str(
        raised.value
    )
    assert "the original served" not in str(raised.value)


def db_bytes_per_iteration(tmp_path: Path, turns: int) -> float:
    path = tmp_path / f"conversation-{turns}.db"
    agent, results = conversation(turns, store=str(path), window={"keep_last_turns": 2})
    iterations = sum(r.calls for r in results)
    agent.close()
    return os.path.getsize(path) / iterations


#: the long conversation's turns (1,000 in .ci/run's deep pass)
LONG_TURNS = 1000 if os.environ.get("AFP_DEEP") else 500


@pytest.mark.slow
@pytest.mark.deep_pass
def test_bytes_per_iteration_stay_flat_over_a_long_windowed_conversation(tmp_path: Path) -> None:
    short = db_bytes_per_iteration(tmp_path, 25)  # 50 iterations
    long = db_bytes_per_iteration(tmp_path, LONG_TURNS)  # 20 to 80 times as many
    assert long <= 1.25 * short, (short, long)
