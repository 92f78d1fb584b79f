"""``keep_last_tool_results``: each tool's latest call and result served beyond the window,
superseded by the tool's next call, standing down after blocking two boundaries."""

from __future__ import annotations

from typing import Any

import pytest
from feature_support import LOOKUP_SCHEMA, events_of, fixed_ports, lookup
from test_context_window import assert_pairs_whole, served_lists

import agentfootprint as af
from agentfootprint.errors import UsageError
from agentfootprint.logformat.canonical import parse

EVICTED = "agentfootprint.context.evicted"
STOOD_DOWN = "agentfootprint.context.pin_stood_down"


def ids() -> af.Tool:
    return af.define_tool(
        name="ids",
        description="The valid ids.",
        input_schema=LOOKUP_SCHEMA,
        execute=lambda args: "valid ids: 7, 9",
    )


def call(tool: str, q: str) -> Any:
    return af.reply(tool_calls=[af.tool_call(tool, {"q": q})])


#: turn 0 asks for the ids; turns 1.. look things up (turn 2 twice)
TURNS: list[list[Any]] = [
    [call("ids", "all"), "a0"],
    [call("lookup", "x"), "a1"],
    [call("lookup", "y"), call("lookup", "z"), "a2"],
    [call("lookup", "w"), "a3"],
    [call("lookup", "v"), "a4"],
]


def conversation(**options: Any) -> tuple[af.Agent, list[af.RunResult]]:
    agent = af.Agent(
        provider=af.MockProvider([step for turn in TURNS for step in turn]),
        model="m",
        tools=[ids(), lookup()],
        ports=fixed_ports(),
        window={"keep_last_turns": 1},
        **options,
    )
    results: list[af.RunResult] = []
    for turn in range(len(TURNS)):
        parent = results[-1] if results else None
        results.append(agent.run_sync(f"question {turn}", continue_from=parent))
    return agent, results


def served_tools_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_the_latest_ids_result_outlives_its_turn_then_stands_down_on_the_record() -> None:
    agent, results = conversation()  # default: 2 pins
    served = served_lists(agent, results)
    for request in served:
        assert_pairs_whole(request["messages"])
        assert request["messages"][0]["role"] == "user"
    by_turn = [[served_tools_results(r) for r in served[a:b]] for a, b in _spans(results)]
    assert by_turn[1][0] == ["valid ids: 7, 9"]  # turn 0 left, its ids result did not
    assert "valid ids: 7, 9" in by_turn[2][0]  # the second boundary it blocks
    assert all("valid ids: 7, 9" not in r for r in by_turn[3])  # the third: stood down
    stood = events_of(agent.store, results[3].run_id, STOOD_DOWN)
    assert stood == [{"boundaries": 2, "iteration": 1, "messages": [0, 3], "tool": "ids"}]
    assert all(events_of(agent.store, r.run_id, STOOD_DOWN) == [] for r in results[:3])
    # the history is never edited: every message of every turn is still there
    assert len(results[-1].state["history"]) == sum(len(t) * 2 for t in TURNS)


def _spans(results: list[af.RunResult]) -> list[tuple[int, int]]:
    spans, start = [], 0
    for result in results:
        spans.append((start, start + result.calls))
        start += result.calls
    return spans


def test_a_new_call_of_the_tool_supersedes_its_pin_and_the_old_pair_leaves() -> None:
    agent, results = conversation()
    # turn 2: lookup's pin (turn 1) holds at its first call, and leaves once lookup is
    # called again in the window (its second call)
    evicted = events_of(agent.store, results[2].run_id, EVICTED)
    assert {"iteration": 2, "messages": [4, 7], "reason": "window", "turns_left": 1} in evicted


def test_one_pin_keeps_only_the_most_recent_tool() -> None:
    agent, results = conversation(keep_last_tool_results=1)
    served = served_lists(agent, results)
    first_of_turn_2 = served[_spans(results)[2][0]]
    assert served_tools_results(first_of_turn_2) == ["rows: 1, 2, 3"]  # lookup's, not ids'


@pytest.mark.parametrize("off", [0, False])
def test_off_no_pin_is_served(off: Any) -> None:
    agent, results = conversation(keep_last_tool_results=off)
    served = served_lists(agent, results)
    assert served[_spans(results)[1][0]]["messages"] == [results[1].state["history"][4]]
    assert events_of(agent.store, results[3].run_id, STOOD_DOWN) == []
    opened = parse(next(iter(agent.store.read(results[0].run_id))).body)
    # off, the feature takes no part: under a window, an absent count means no pins
    assert "keep_last_tool_results" not in opened["options"]
    assert opened["options"]["window"] == {"keep_last_turns": 1}


def test_a_pinned_conversation_replays_with_the_same_options() -> None:
    agent, results = conversation()
    for result in results:
        twin = af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=[ids(), lookup()],
            store=agent.store,
            window={"keep_last_turns": 1},
        )
        assert af.replay_sync(twin, agent.store, result.run_id).calls_checked == result.calls


@pytest.mark.parametrize("value", [-1, 1.5, "2", True, None, [2]])
def test_keep_last_tool_results_refuses_what_is_not_a_count_with_or_without_a_window(
    value: Any,
) -> None:
    for window in ({"keep_last_turns": 1}, None):
        with pytest.raises(UsageError, match="'keep_last_tool_results'") as raised:
            af.Agent(
                provider=af.MockProvider([]), model="m", window=window, keep_last_tool_results=value
            )
        assert raised.value.option == "keep_last_tool_results"


def test_without_a_window_the_option_is_ignored_and_not_recorded() -> None:
    agent = af.Agent(provider=af.MockProvider(["ok"]), model="m", keep_last_tool_results=3)
    result = agent.run_sync("go")
    opened = parse(next(iter(agent.store.read(result.run_id))).body)
    assert "keep_last_tool_results" not in opened["options"]
    assert opened["projection"]["version"] == 1
