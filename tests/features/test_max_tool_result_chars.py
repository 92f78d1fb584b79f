"""``max_tool_result_chars``: a result over the cap is replaced by the marker."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from feature_support import calls, lookup, record, replays, rows, tool_messages, without_open

import agentfootprint as af


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "100", [100]])
def test_max_tool_result_chars_refuses_what_is_not_a_positive_integer(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", max_tool_result_chars=value)
    assert caught.value.option == "max_tool_result_chars"
    assert "positive integer" in str(caught.value)


def test_a_result_over_the_cap_is_replaced_by_the_marker_everywhere() -> None:
    big = "id,total\n" + "".join(f"{i},{i * 3}\n" for i in range(2000))
    ends: list[af.AgentEvent] = []
    agent = af.Agent(
        provider=af.MockProvider(calls({"q": "all"})),
        model="m",
        tools=[lookup(big)],
        max_tool_result_chars=300,
    )
    agent.on("agentfootprint.stream.tool_end", ends.append)
    result = agent.run_sync("export")
    (message,) = tool_messages(result)
    marker = orjson.loads(message["content"])
    assert marker["truncated"] is True
    assert marker["reason"] == (
        f"lookup returned {len(big)} chars, over the 300-char cap. "
        "Narrow the request and call again."
    )
    assert big.startswith(marker["head"]) and marker["head"]
    assert len(message["content"]) <= 300
    # what the model read at the next call, what the event carried and what the log holds
    assert agent.config.provider.requests[1]["messages"][-1]["content"] == message["content"]
    assert af.served_at(agent.store, result.run_id, 1)["messages"][-1] == message
    assert [getattr(e, "result", None) for e in ends] == [message["content"]]
    opened = orjson.loads(next(iter(agent.store.read(result.run_id))).body)
    assert opened["options"]["max_tool_result_chars"] == 300
    replays(agent, result, max_tool_result_chars=300)


def test_a_bigger_cap_buys_a_bigger_head_and_small_results_are_untouched() -> None:
    big = "x" * 5000
    heads = []
    for cap in (200, 400):
        _, result = record(lambda: calls({"q": "a"}), [lookup(big)], max_tool_result_chars=cap)
        heads.append(len(orjson.loads(tool_messages(result)[0]["content"])["head"]))
    assert heads[1] - heads[0] == 200
    _, small = record(lambda: calls({"q": "a"}), [lookup("short")], max_tool_result_chars=10)
    assert tool_messages(small)[0]["content"] == "short"


def test_a_cap_smaller_than_the_sentence_still_replays() -> None:
    agent, result = record(lambda: calls({"q": "a"}), [lookup("y" * 500)], max_tool_result_chars=5)
    marker = orjson.loads(tool_messages(result)[0]["content"])
    assert marker["head"] == "" and marker["truncated"] is True
    replays(agent, result, max_tool_result_chars=5)


def test_a_replay_under_a_smaller_cap_diverges_at_the_next_call() -> None:
    agent, result = record(lambda: calls({"q": "a"}), [lookup("z" * 900)])
    twin = af.Agent(
        provider=af.MockProvider([]), model="m", tools=[lookup()], max_tool_result_chars=100
    )
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin, agent.store, result.run_id)
    assert caught.value.call == 1 and caught.value.kind == "messages"


def test_without_the_cap_rows_are_those_of_a_run_that_never_measured() -> None:
    script = lambda: calls({"q": "a"})  # noqa: E731
    off, plain = record(script, [lookup("w" * 900)])
    on, capped = record(script, [lookup("w" * 900)], max_tool_result_chars=10_000)
    assert without_open(rows(off.store, plain.run_id)) == without_open(
        rows(on.store, capped.run_id)
    )


def test_under_a_policy_a_json_result_is_capped_with_an_empty_head() -> None:
    """A cut JSON text is text the policy cannot read: its head would record the redacted
    value in clear."""
    secret = orjson.dumps({"ssn": "078-05-1120", "rows": ["r" * 50] * 20}).decode()
    policy = af.RedactionPolicy(keys=["ssn"])
    agent, result = record(
        lambda: calls({"q": "a"}), [lookup(secret)], max_tool_result_chars=300, redact=policy
    )
    marker = orjson.loads(tool_messages(result)[0]["content"])
    assert marker["truncated"] is True and marker["head"] == ""
    assert all(b"078-05-1120" not in bytes(row.body) for row in agent.store.read(result.run_id))
    replays(agent, result, max_tool_result_chars=300, redact=policy)
