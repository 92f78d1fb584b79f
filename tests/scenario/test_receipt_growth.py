"""Receipts stay small in a long conversation, and each message is hashed once."""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.logformat import request as request_module


def _long_run(iterations: int, store: Any = None) -> tuple[af.Agent, af.RunResult]:
    tool = af.define_tool(name="fetch", description="fetch a page", execute=lambda args: "x" * 500)
    script: list[Any] = [
        af.reply(tool_calls=[af.tool_call("fetch", {"page": i})]) for i in range(iterations)
    ]
    script.append("done")
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        system="s",
        tools=[tool],
        store=store,
        max_iterations=50,
    )
    return agent, agent.run_sync("go")


def test_receipt_bodies_do_not_grow_with_the_history() -> None:
    agent, result = _long_run(40)
    sizes = [len(e.body) for e in agent.store.read(result.run_id) if e.type == "receipt"]
    assert len(sizes) == 41
    assert max(sizes[5:]) - min(sizes[5:]) < 16  # only the call numbers' digits vary


@pytest.mark.unverified("counts the agent's hashing alone; the run is verified at the end")
def test_each_message_is_hashed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    hashed: list[str] = []
    real = request_module.hexdigest

    def counting(tag: str, data: bytes) -> str:
        if tag == "piece/message":
            hashed.append(data.decode())
        return real(tag, data)

    monkeypatch.setattr(request_module, "hexdigest", counting)
    agent, result = _long_run(20)
    monkeypatch.undo()
    history = result.state["history"]
    # every message but the final answer was served (and hashed) exactly once
    assert len(hashed) == len(history) - 1 == len(set(hashed))
    assert af.Verifier(agent.store).verify(result.run_id).receipts == 21


@pytest.mark.unverified("counts the agent's hashing alone; the runs are verified at the end")
def test_continuation_hashes_only_the_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    agent, first = _long_run(10)
    hashed: list[str] = []
    real = request_module.hexdigest

    def counting(tag: str, data: bytes) -> str:
        if tag == "piece/message":
            hashed.append(data.decode())
        return real(tag, data)

    monkeypatch.setattr(request_module, "hexdigest", counting)
    agent.config.provider.position = 0  # type: ignore[attr-defined]
    agent.config.provider._script = ["short answer"]  # type: ignore[attr-defined]
    second = agent.run_sync("and now?", continue_from=first)
    monkeypatch.undo()
    assert len(hashed) == 2  # the parent's final answer and the new user message
    assert af.Verifier(agent.store).verify(second.run_id).ancestors == (first.run_id,)
