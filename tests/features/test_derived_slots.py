"""The system-prompt and tools slots build their pieces once per run (StageContext.set_derived):
later iterations find the committed value the first one left and record the same no-write
commit without building, copying and comparing the pieces again. The log is what it was."""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.runtime.tools import Tool


def _script(iterations: int) -> list[Any]:
    calls = [af.reply(tool_calls=[af.tool_call("echo", {"n": n})]) for n in range(iterations)]
    return [*calls, "done", "done again"]


def _agent(**options: Any) -> af.Agent:
    echo = af.define_tool(name="echo", description="Echo.", execute=lambda args: "ok")
    return af.Agent(
        provider=af.MockProvider(_script(4)), model="m", tools=[echo], system="Be brief.", **options
    )


def test_the_tool_pieces_are_built_once_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    schema = Tool.schema

    def counting(self: Tool) -> dict[str, Any]:
        built.append(self.name)
        return schema.fget(self)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(Tool, "schema", property(counting))
    with _agent() as agent:
        result = agent.run_sync("go")
        assert result.iterations == 5
        assert built == ["echo"]  # five iterations, one build
        agent.run_sync("again", continue_from=result)  # a new run builds again, once
    assert built == ["echo", "echo"]


def test_the_pieces_are_recorded_once_as_before(verified_runs: Any) -> None:
    """The first iteration writes them; every later one commits no write, as when each
    iteration built and compared them."""
    with _agent() as agent:
        first = agent.run_sync("go")
    rows = [r for r in agent.store.read(first.run_id) if r.type == "write"]
    tool_writes = [r for r in rows if b'"path":"tool_schemas"' in r.body]
    system_writes = [r for r in rows if b'"path":"system_pieces"' in r.body]
    assert len(tool_writes) == 1 and len(system_writes) == 1  # set once, then unchanged
    assert first.run_id in verified_runs.run_ids
