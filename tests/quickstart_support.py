"""The README's quickstart as tests use it: the ``add`` tool, the model's two replies (a tool
call, then the answer) and the agent that serves them."""

from __future__ import annotations

from typing import Any

import agentfootprint as af


def _add(args: dict[str, Any]) -> Any:
    return args["a"] + args["b"]


ADD = af.define_tool(
    name="add",
    description="Add two numbers.",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    execute=_add,
)


def quickstart_replies(*more: Any) -> list[Any]:
    """The model's replies: ``add(2, 3)``, then the answer, then ``more``."""
    return [af.reply(tool_calls=[af.tool_call("add", {"a": 2, "b": 3})]), "2 + 3 = 5.", *more]


def quickstart_agent(*more_replies: Any, **options: Any) -> af.Agent:
    """The quickstart's agent (``options`` added: ports, a store, the option under test)."""
    return af.Agent(
        provider=af.MockProvider(quickstart_replies(*more_replies)),
        model="my-model",
        system="You add numbers.",
        tools=[ADD],
        temperature=0,
        **options,
    )
