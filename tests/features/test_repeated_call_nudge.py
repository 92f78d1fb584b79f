"""``repeated_call_nudge``: a note and an event on a repeated identical call and result."""

from __future__ import annotations

from typing import Any

import pytest
from feature_support import (
    calls,
    events_of,
    lookup,
    record,
    replays,
    rows,
    tool_messages,
    without_open,
)

import agentfootprint as af
from agentfootprint.features.repeated_call_nudge import NOTE


def test_a_repeated_identical_call_and_result_gets_one_note_and_one_event() -> None:
    agent, result = record(
        lambda: calls({"q": "a"}, {"q": "a"}, {"q": "b"}, {"q": "a"}), [lookup()]
    )
    contents = [m["content"] for m in tool_messages(result)]
    assert contents[0] == "rows: 1, 2, 3"
    assert contents[1] == "rows: 1, 2, 3" + NOTE
    assert contents[2] == "rows: 1, 2, 3"  # other arguments: not a repeat
    assert contents[3] == "rows: 1, 2, 3" + NOTE  # a third identical call: not blocked
    events = events_of(agent.store, result.run_id, "agentfootprint.tools.repeated_call")
    assert [(e["tool"], e["count"], e["iteration"]) for e in events] == [
        ("lookup", 2, 2),
        ("lookup", 3, 4),
    ]
    assert "repeated_call_nudge" not in str(result.state)  # the tally is never in state
    replays(agent, result)


def test_the_same_call_with_another_result_is_not_a_repeat() -> None:
    answers = iter(["first", "second"])
    agent, result = record(
        lambda: calls({"q": "a"}, {"q": "a"}), [lookup(lambda args: next(answers))]
    )
    assert [m["content"] for m in tool_messages(result)] == ["first", "second"]
    assert not events_of(agent.store, result.run_id, "agentfootprint.tools.repeated_call")


def test_off_nothing_is_noted_even_when_a_turn_repeats() -> None:
    agent, result = record(
        lambda: calls({"q": "a"}, {"q": "a"}), [lookup()], repeated_call_nudge=False
    )
    assert [m["content"] for m in tool_messages(result)] == ["rows: 1, 2, 3"] * 2
    assert not events_of(agent.store, result.run_id, "agentfootprint.tools.repeated_call")
    replays(agent, result, repeated_call_nudge=False)


def test_a_turn_that_repeats_nothing_records_the_same_rows_on_or_off() -> None:
    script = lambda: calls({"q": "a"}, {"q": "b"})  # noqa: E731
    on, with_nudge = record(script, [lookup()])
    off, without = record(script, [lookup()], repeated_call_nudge=False)
    assert without_open(rows(on.store, with_nudge.run_id)) == without_open(
        rows(off.store, without.run_id)
    )


def test_a_nudged_capped_run_replays_and_a_replay_with_the_nudge_off_diverges() -> None:
    script = lambda: calls({"q": "a"}, {"q": "a"})  # noqa: E731
    agent, result = record(script, [lookup("v" * 800)], max_tool_result_chars=200)
    assert tool_messages(result)[1]["content"].endswith(NOTE)
    replays(agent, result, max_tool_result_chars=200)
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[lookup()],
        max_tool_result_chars=200,
        repeated_call_nudge=False,
    )
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin, agent.store, result.run_id)
    assert caught.value.call == 2


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_repeated_call_nudge_is_true_or_false(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", repeated_call_nudge=value)
    assert caught.value.option == "repeated_call_nudge"


def test_under_a_policy_a_json_result_is_not_compared_so_nothing_leaks() -> None:
    """Found by the replay property: a note appended to a JSON result made it text the
    policy could not read, and the redacted value was recorded in clear."""
    secret = '{"ssn":"078-05-1120","who":"x"}'
    policy = af.RedactionPolicy(keys=["ssn"])
    agent, result = record(lambda: calls({"q": "a"}, {"q": "a"}), [lookup(secret)], redact=policy)
    assert [m["content"] for m in tool_messages(result)] == [secret, secret]
    assert not events_of(agent.store, result.run_id, "agentfootprint.tools.repeated_call")
    assert all(b"078-05-1120" not in bytes(row.body) for row in agent.store.read(result.run_id))
    replays(agent, result, redact=policy)
    # a text result is compared as always
    agent, text = record(lambda: calls({"q": "a"}, {"q": "a"}), [lookup("plain")], redact=policy)
    assert tool_messages(text)[1]["content"] == "plain" + NOTE
    replays(agent, text, redact=policy)
