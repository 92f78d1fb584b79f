"""The read side hands out copies: what ``served_at``, ``state_at`` and ``served_requests``
return shares nothing with the fold or with the verifier's cache of verified runs, so a
caller that changes it changes no later read (audit/read.py ``_detached``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import agentfootprint as af
from agentfootprint.audit.read import RunReader, _detached


def _conversation(path: Path) -> tuple[af.SqliteStore, str]:
    lookup = af.define_tool(name="lookup", description="Look up.", execute=lambda a: "x" * 40)
    script: list[Any] = []
    for turn in range(2):
        script += [af.reply(tool_calls=[af.tool_call("lookup", {"q": turn})]), f"done {turn}"]
    store = af.SqliteStore(path)
    with af.Agent(
        provider=af.MockProvider(script), model="m", system="Be brief.", tools=[lookup],
        store=store,
    ) as agent:  # fmt: skip
        first = agent.run_sync("one")
        second = agent.run_sync("two", continue_from=first)
    return store, second.run_id


def test_what_a_read_returns_can_be_changed_without_changing_the_next_read(
    tmp_path: Path,
) -> None:
    store, run_id = _conversation(tmp_path / "log.db")
    reader = RunReader(store)
    served, state = reader.served_at(run_id, 1), reader.state_at(run_id, 2)
    every = reader.served_requests(run_id)
    expected = (af.served_at(store, run_id, 1), af.state_at(store, run_id, 2))
    assert (served, state) == expected and every[1] == expected[0]
    assert len(served["messages"]) >= 5  # the parent's history is in it
    served["messages"][0]["content"] = "changed"
    served["messages"].clear()
    state["history"][0]["content"] = "changed"
    every[0]["messages"].append({"role": "user", "content": "added"})
    assert (reader.served_at(run_id, 1), reader.state_at(run_id, 2)) == expected
    assert reader.served_requests(run_id)[1] == expected[0]
    assert af.Verifier(store).verify(run_id).outcome.value == "VALID_UNSIGNED"


def test_a_value_nested_past_orjsons_limit_is_still_copied() -> None:
    deep: Any = "leaf"
    for _ in range(300):
        deep = [deep]
    copied = _detached({"v": deep})
    assert copied == {"v": deep} and copied["v"] is not deep
    assert _detached({"a": [1, 2.5, -0.0, "é", None, True]}) == {
        "a": [1, 2.5, -0.0, "é", None, True]
    }
