"""The tools slot: the tools the agent offers, and the schemas served, in registration order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentfootprint.features.base import (
    MISSING,
    Feature,
    Options,
    OptionSpec,
    StageSpec,
    StateKey,
    refuse,
)
from agentfootprint.features.registry import hooks_at
from agentfootprint.runtime.run import StageContext
from agentfootprint.runtime.tools import Tool


def _tools(value: Any, given: Mapping[str, Any]) -> tuple[Tool, ...]:
    if value is MISSING:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise refuse("tools", "must be a list of tools made with define_tool(...)")
    seen: set[str] = set()
    for tool in value:
        if not isinstance(tool, Tool):
            raise refuse("tools", f"{tool!r} is not a Tool; build tools with define_tool(...)")
        if tool.name in seen:
            raise refuse("tools", f"two tools are named {tool.name!r}; tool names are unique")
        seen.add(tool.name)
    return tuple(value)


async def tools(ctx: StageContext) -> None:
    tools = ctx.config.tools

    def schemas() -> list[dict[str, Any]]:
        served = [tool.schema for tool in tools]
        for hook in hooks_at(ctx, Feature.tool_schema):  # (findings' reserved argument)
            served = [hook(ctx, schema) for schema in served]
        return served

    ctx.set_derived("tool_schemas", tools, schemas)


FEATURE: Feature[Options] = Feature(
    name="tools",
    summary="the tools slot",
    order=30,
    options=(OptionSpec(name="tools", seed=None, check=_tools, summary="the tools offered"),),
    stages=(StageSpec(name="tools", fn=tools, phase="iteration", order=30, classic="first"),),
    state_keys=(StateKey(name="tool_schemas", structure=True, summary="request.tools"),),
)
