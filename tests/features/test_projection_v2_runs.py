"""A feature that needs projection 2 gets it: its runs serve a window of the history by
reference and a subset of the tools by name, verify, and replay (runtime end to end)."""

from __future__ import annotations

from typing import Any

from feature_support import calls, fixed_ports, lookup

import agentfootprint as af
from agentfootprint.features import registry
from agentfootprint.features.base import Feature, StageSpec, StateKey
from agentfootprint.logformat.canonical import parse


async def window(ctx: Any) -> None:
    """Serve the first message and the last two (an assistant turn and its tool result stay
    together), and only the lookup tool."""
    history = ctx.scope.get("history")
    if len(history) > 3:
        segments = [{"history": [0, 1]}, {"history": [len(history) - 2, None]}]
    else:
        segments = [{"history": [0, None]}]
    ctx.scope.set("served_messages", segments)
    ctx.scope.set("served_tools", ["lookup"])


WINDOW = Feature(
    name="test-window",
    summary="a window over the history, by reference",
    stages=(StageSpec(name="window", fn=window, phase="iteration", order=40),),
    state_keys=(
        StateKey(name="served_messages", structure=True),
        StateKey(name="served_tools", structure=True),
    ),
    projection=2,
)


def windowed(script: list[Any]) -> af.Agent:
    other = af.define_tool(name="other", description="Never served.", execute=lambda a: "x")
    agent = af.Agent(
        provider=af.MockProvider(script), model="m", tools=[lookup(), other], ports=fixed_ports()
    )
    agent.seam = registry.Seam.build(
        agent.config.options, features=(*registry.all_features(), WINDOW)
    )
    agent.chart = agent.seam.chart
    return agent


def test_a_windowed_run_serves_by_reference_verifies_and_replays() -> None:
    agent = windowed(calls({"q": "a"}, {"q": "b"}, {"q": "c"}))
    result = agent.run_sync("look up three things")
    assert result.calls == 4
    opened = parse(next(iter(agent.store.read(result.run_id))).body)
    assert opened["projection"]["version"] == 2
    assert opened["format"] == "agentfootprint/log/v3"
    provider = agent.config.provider
    for k in range(result.calls):
        served = af.served_at(agent.store, result.run_id, k)
        assert served == provider.requests[k]
        assert [t["name"] for t in served["tools"]] == ["lookup"]
    history = result.state["history"]
    assert provider.requests[3]["messages"] == [history[0], *history[-3:-1]]
    # the window is recorded by reference: the writes hold segments, never message copies
    windows = [
        parse(row.body)
        for row in agent.store.read(result.run_id)
        if row.type == "write" and parse(row.body)["path"] == "served_messages"
    ]
    assert windows and all(b"content" not in repr(w).encode() for w in windows)
    twin = windowed([])
    assert af.replay_sync(twin, agent.store, result.run_id).calls_checked == 4
