"""``notice_prior_turn_evidence``: an advisory when every value of the answer was served before
the turn being answered (upstream's ``prior-turn-evidence``, claim seam).

Upstream's measured case: turn 1 fetches an inventory; turn 2 asks something new and the model
answers from turn 1's rows without calling a tool. Grounded, and possibly stale. The turn of
each result is on the record, so the distance is exact. The library's own user messages (the
wrap-up's budget frame, ``output_type``'s teaching message) continue a turn, never open one.

Every run is verified by the pytest plugin, recomputed from the log
(``findings(..., recompute=True)``) and replayed byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, rows

import agentfootprint as af
from agentfootprint.audit.integrity import findings
from agentfootprint.features import integrity, registry
from agentfootprint.features.wrap_up import WRAP_UP_MESSAGE
from agentfootprint.integrity.prior_turn import CEILING
from agentfootprint.runtime.output_schemas import OUTPUT_FRAME_PREFIX

OPTION = "notice_prior_turn_evidence"
ERROR = "agentfootprint.integrity.context_error"
DISPOSITION = "agentfootprint.integrity.disposition"
INVENTORY = [
    {"volume": "vol-0a1b2c3d", "size_gb": 98304, "host": "esx-host-0417"},
    {"volume": "vol-77ee0042", "size_gb": 4096, "host": "esx-host-0418"},
]
#: two values of turn 1's inventory (an identifier and a number of four digits or more)
FROM_INVENTORY = "vol-0a1b2c3d is the largest volume, at 98304 GB."
EMPTY = {"type": "object", "properties": {}}
NO_TOOL = (
    "This turn called no tool and served no result, so the answer was assembled entirely from "
    "the conversation. "
)


def list_volumes() -> af.Tool:
    return af.define_tool(
        name="list_volumes",
        description="Every volume of the array.",
        input_schema=EMPTY,
        execute=lambda args: json.dumps(INVENTORY),
    )


def volume_detail() -> af.Tool:
    """A lookup echoing the identifier it was asked about."""
    return af.define_tool(
        name="volume_detail",
        description="One volume's state.",
        input_schema={"type": "object", "properties": {"volume": {"type": "string"}}},
        execute=lambda args: json.dumps({"volume": args["volume"], "state": "online"}),
    )


def ping() -> af.Tool:
    """A tool whose result carries no value of the inventory."""
    return af.define_tool(
        name="ping",
        description="Is the array reachable?",
        input_schema=EMPTY,
        execute=lambda args: "pong",
    )


TOOLS = [list_volumes(), volume_detail(), ping()]


def calling(tool: str, call_id: str, arguments: dict[str, Any] | None = None) -> af.LLMResponse:
    return af.reply(tool_calls=[af.tool_call(tool, arguments or {}, id=call_id)])


def conversation(
    turns: list[list[Any]], tools: list[af.Tool] = TOOLS, **options: Any
) -> tuple[af.Agent, list[af.RunResult]]:
    """One run per turn, each continuing the last; ``turns`` the replies of each."""
    script = [reply for turn in turns for reply in turn]
    agent = af.Agent(
        provider=af.MockProvider(script), model="m", tools=tools, ports=fixed_ports(), **options
    )
    results: list[af.RunResult] = []
    for k in range(len(turns)):
        parent = results[-1] if results else None
        results.append(agent.run_sync(f"question {k + 1}", continue_from=parent))
    return agent, results


INVENTORY_TURN: list[Any] = [calling("list_volumes", "c1"), FROM_INVENTORY]


def settled(agent: af.Agent, results: list[af.RunResult], **options: Any) -> None:
    """Each run: the findings recomputed from the log agree with the recorded ones, and a
    replay records the same bytes."""
    for result in results:
        report = findings(agent.store, result.run_id, recompute=True)
        assert report.agrees, report.differences
        twin = af.Agent(
            provider=af.MockProvider([]), model="m", tools=list(agent.config.tools), **options
        )
        again = af.replay_sync(twin, agent.store, result.run_id)
        assert again.calls_checked == result.calls
        assert af.same_recording(agent.store, result.run_id, twin.store, again.result.run_id)


def filed(agent: af.Agent, result: af.RunResult) -> list[dict[str, Any]]:
    return events_of(agent.store, result.run_id, ERROR)


def ledger_row(agent: af.Agent, result: af.RunResult) -> dict[str, Any]:
    (disposition,) = events_of(agent.store, result.run_id, DISPOSITION)
    (row,) = [r for r in disposition["rows"] if r["check"] == "prior-turn-evidence"]
    return dict(row)


def counts(agent: af.Agent, result: af.RunResult) -> tuple[int, int, int, int]:
    row = ledger_row(agent, result)
    return row["checked"], row["findings"], row["not_applicable"], row["unreachable"]


def advisory(
    count: int, newest: int, current: int, results: int, call_id: str = "c1"
) -> dict[str, Any]:
    """The finding as recorded: upstream's template, its distance exact."""
    age = current - newest
    fetched = (
        NO_TOOL
        if results == 0
        else f"This turn served {results} tool result(s) and the answer states no value from "
        "any of them. "
    )
    return {
        "check": "prior-turn-evidence",
        "kind": "prior-turn-evidence",
        "seam": "claim",
        "subjects": [{"kind": "answer", "id": "final"}],
        "witnesses": [f"turn {newest}", call_id],
        "predicate": "grounding",
        "advisory": True,
        "synthetic": False,
        "facts": {
            "count": count,
            "newest_turn": newest,
            "distance": age,
            "current_turn": current,
            "tool_results_this_turn": results,
        },
        "message": (
            f"the final answer states {count} value(s) the run can ground, and every one of "
            f"them was last served in turn {newest} or earlier \u2014 {age} turn(s) before the "
            f"turn being answered \u2014 while turn {current}, the one being answered, "
            f"contributed none of them. {fetched}{CEILING} Nothing here blocked the answer, "
            "revised it or changed a byte of it."
        ),
    }


def test_turn_two_answering_from_turn_ones_inventory_files_one_advisory() -> None:
    again = "Still vol-0a1b2c3d, 98304 GB."
    agent, (first, second) = conversation(
        [INVENTORY_TURN, [again]], notice_prior_turn_evidence=True
    )
    assert filed(agent, first) == [] and counts(agent, first) == (1, 0, 0, 0)
    assert second.calls == 1 and second.answer == again  # zero tool calls, nothing changed
    assert filed(agent, second) == [advisory(count=2, newest=1, current=2, results=0)]
    assert counts(agent, second) == (1, 1, 0, 0)
    assert second.outcome == "answered"  # an advisory never changes an outcome
    opened = next(iter(agent.store.read(second.run_id))).decoded()
    assert opened["options"][OPTION] is True  # type: ignore[index]
    settled(agent, [first, second], notice_prior_turn_evidence=True)


def test_four_turns_stale_names_distance_four() -> None:
    stale = [[f"vol-0a1b2c3d, as before ({k})."] for k in range(4)]
    agent, results = conversation([INVENTORY_TURN, *stale], notice_prior_turn_evidence=True)
    assert filed(agent, results[0]) == []
    for turn, result in enumerate(results[1:], start=2):
        assert filed(agent, result) == [advisory(count=1, newest=1, current=turn, results=0)]
    assert filed(agent, results[-1])[0]["facts"]["distance"] == 4
    settled(agent, results, notice_prior_turn_evidence=True)


def test_a_follow_up_whose_lookup_echoes_the_identifier_files_nothing() -> None:
    follow_up = [
        calling("volume_detail", "c2", {"volume": "vol-0a1b2c3d"}),
        "vol-0a1b2c3d is online; it holds 98304 GB.",  # 98304 only from turn 1: one is enough
    ]
    agent, results = conversation([INVENTORY_TURN, follow_up], notice_prior_turn_evidence=True)
    assert [filed(agent, r) for r in results] == [[], []]
    assert counts(agent, results[1]) == (1, 0, 0, 0)
    settled(agent, results, notice_prior_turn_evidence=True)


def test_a_follow_up_that_fetched_something_else_says_so() -> None:
    follow_up = [calling("ping", "c2"), "Reachable; vol-0a1b2c3d still holds 98304 GB."]
    agent, results = conversation([INVENTORY_TURN, follow_up], notice_prior_turn_evidence=True)
    assert filed(agent, results[1]) == [advisory(count=2, newest=1, current=2, results=1)]
    settled(agent, results, notice_prior_turn_evidence=True)


@pytest.mark.parametrize("answer", ["Yes, it is fine.", "It has 12 disks, 2 spares.", ""])
def test_an_answer_with_no_extractable_value_is_unreachable(answer: str) -> None:
    agent, results = conversation([INVENTORY_TURN, [answer]], notice_prior_turn_evidence=True)
    assert filed(agent, results[1]) == []
    assert counts(agent, results[1]) == (0, 0, 0, 1)
    settled(agent, results, notice_prior_turn_evidence=True)


def test_a_wrap_up_message_continues_the_turn() -> None:
    """Turn 2 pings, asks for a second ping past ``max_iterations`` and is wrapped up: the
    budget frame is a user message, yet the answer is turn 2's, one turn from turn 1."""
    capped = [
        calling("ping", "c2"),
        af.reply("one more look", tool_calls=[af.tool_call("ping", {}, id="c3")]),
        "vol-0a1b2c3d holds 98304 GB.",
    ]
    agent, results = conversation(
        [INVENTORY_TURN, capped], notice_prior_turn_evidence=True, max_iterations=2
    )
    wrapped = results[1]
    assert wrapped.outcome == "stopped_early"
    assert wrapped.stopped_early is not None and wrapped.stopped_early.details["wrapped_up"]
    history = wrapped.state["history"]
    assert {"role": "user", "content": WRAP_UP_MESSAGE} in history[-3:]  # a user message
    assert filed(agent, wrapped) == [advisory(count=2, newest=1, current=2, results=1)]
    settled(agent, results, notice_prior_turn_evidence=True, max_iterations=2)


def test_a_wrap_up_in_the_fetching_turn_keeps_its_values_this_turns() -> None:
    capped = [
        calling("list_volumes", "c1"),
        af.reply("one more look", tool_calls=[af.tool_call("ping", {}, id="c2")]),
        FROM_INVENTORY,
    ]
    agent, results = conversation([capped], notice_prior_turn_evidence=True, max_iterations=2)
    assert results[0].stopped_early is not None
    assert filed(agent, results[0]) == [] and counts(agent, results[0]) == (1, 0, 0, 0)
    settled(agent, results, notice_prior_turn_evidence=True, max_iterations=2)


@dataclasses.dataclass
class Largest:
    """The largest volume."""

    volume: str
    size_gb: int


def test_an_output_retry_teaching_message_continues_the_turn() -> None:
    typed = '{"volume": "vol-0a1b2c3d", "size_gb": 98304}'
    turns: list[list[Any]] = [
        [calling("list_volumes", "c1"), typed],
        ["The largest is vol-0a1b2c3d.", typed],  # prose refused, taught, answered typed
    ]
    agent, results = conversation(turns, notice_prior_turn_evidence=True, output_type=Largest)
    retried = results[1]
    assert retried.output == Largest("vol-0a1b2c3d", 98304) and retried.calls == 2
    teaching = [
        m
        for m in retried.state["history"]
        if m["role"] == "user" and m["content"].startswith(OUTPUT_FRAME_PREFIX)
    ]
    assert len(teaching) == 1  # a user message inside turn 2
    assert filed(agent, retried) == [advisory(count=2, newest=1, current=2, results=0)]
    settled(agent, results, notice_prior_turn_evidence=True, output_type=Largest)


@pytest.mark.parametrize(
    "given", [{}, {OPTION: False}, {OPTION: None}], ids=["absent", "false", "none"]
)
def test_off_records_the_rows_of_a_seam_without_the_feature(given: dict[str, Any]) -> None:
    turns: list[list[Any]] = [INVENTORY_TURN, ["Still vol-0a1b2c3d."]]
    agent, results = conversation(turns, **given)
    assert integrity.FEATURE not in agent.seam.features
    bare = af.Agent(
        provider=af.MockProvider([r for t in turns for r in t]),
        model="m",
        tools=TOOLS,
        ports=fixed_ports(),
    )
    features = [f for f in registry.all_features() if f is not integrity.FEATURE]
    bare.seam = registry.Seam.build(bare.config.options, features=features)
    bare.chart = bare.seam.chart
    first = bare.run_sync("question 1")
    second = bare.run_sync("question 2", continue_from=first)
    for ours, theirs in zip(results, (first, second), strict=True):
        assert rows(agent.store, ours.run_id) == rows(bare.store, theirs.run_id)
        assert not events_of(agent.store, ours.run_id, DISPOSITION)
    settled(agent, results)


@pytest.mark.parametrize("value", ["yes", 1, 0, "True", [True]], ids=repr)
def test_a_value_that_is_not_a_bool_is_refused(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider([]), model="m", tools=TOOLS, **{OPTION: value})
    assert caught.value.option == OPTION
    assert "True or False" in str(caught.value)


def test_refused_beside_redact() -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=TOOLS,
            redact=af.RedactionPolicy(keys=["card"]),
            **{OPTION: True},
        )
    assert caught.value.option == "redact"
