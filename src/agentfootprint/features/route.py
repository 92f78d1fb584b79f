"""Routing: run the requested tools, or finish (also when the iteration budget is spent).

At the cap, a feature's ``at_max_iterations`` hook may name a route branch of its own to
take instead of ``final`` (``wrap_up_at_max_iterations``: one more call, tools withheld),
unless a ``stop_reason`` hook halts the turn there too (a cost budget: no call past it). A
reply asking for no tool is the answer, unless an ``answer_check`` hook refuses it and names
a branch of its own (``output_type``: the model is asked again).

``react_mode`` shapes the chart (classic runs the system-prompt and tools slots once and
loops back to messages only; dynamic-grouped runs as dynamic, its description nesting each
model turn's stages in an ``llm-call`` group); ``max_iterations`` bounds the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
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

MAX_ITERATIONS_CAP = 50


def _max_iterations(value: Any, given: Mapping[str, Any]) -> int:
    value = 10 if value is MISSING else value
    if isinstance(value, bool) or not isinstance(value, int):
        raise refuse("max_iterations", f"must be an integer, got {value!r}")
    if not 1 <= value <= MAX_ITERATIONS_CAP:
        raise refuse(
            "max_iterations",
            f"must be between 1 and {MAX_ITERATIONS_CAP} (the hard cap), got {value}",
        )
    return value


def _react_mode(value: Any, given: Mapping[str, Any]) -> str:
    value = "dynamic" if value is MISSING else value
    if value not in ("dynamic", "dynamic-grouped", "classic"):
        raise refuse(
            "react_mode",
            f"must be one of 'dynamic', 'dynamic-grouped', 'classic', got {value!r}",
        )
    return str(value)


async def route(ctx: StageContext) -> str:
    """Decide: run the requested tools, or finish (also when the budget is spent)."""
    s = ctx.scope
    response = s.get("last_response")
    iteration = s.get("iteration")
    if not response["tool_calls"]:
        for check in hooks_at(ctx, Feature.answer_check):  # a feature may refuse the answer
            branch = await check(ctx)
            if branch is not None:
                return str(branch)
        return "final"
    if iteration >= ctx.config.max_iterations:
        s.set(
            "stopped_early",
            {
                "reason": "max-iterations",
                "iteration": iteration,
                "pending_tool_calls": len(response["tool_calls"]),
            },
        )
        caps = hooks_at(ctx, Feature.at_max_iterations)
        if caps and await _stop_reason(ctx) is not None:
            return "final"  # a feature halts here too (money): no call past it
        for cap in caps:
            branch = await cap(ctx)
            if branch is not None:  # a feature's branch instead (e.g. a wrap-up call)
                return str(branch)
        return "final"
    why = await _stop_reason(ctx)
    if why is not None:  # a feature stops the turn at this boundary (e.g. a cost budget)
        s.set(
            "stopped_early",
            {
                **why,
                "iteration": iteration,
                "pending_tool_calls": len(response["tool_calls"]),
            },
        )
        return "final"
    return "tool-calls"


async def _stop_reason(ctx: StageContext) -> Mapping[str, Any] | None:
    """The first active feature's reason to stop the turn at this boundary, or None."""
    for hook in hooks_at(ctx, Feature.stop_reason):
        why = await hook(ctx)
        if why is not None:
            return why
    return None


FEATURE: Feature[Options] = Feature(
    name="route",
    summary="the route decider and the loop's bounds",
    order=60,
    options=(
        OptionSpec(
            name="max_iterations",
            seed="maxIterations",
            check=_max_iterations,
            recorded=True,
            summary="the loop's bound",
        ),
        OptionSpec(
            name="react_mode",
            seed="reactMode",
            check=_react_mode,
            recorded=True,
            summary="the chart's shape",
        ),
    ),
    stages=(StageSpec(name="route", fn=route, phase="route", order=0, kind="decider"),),
    state_keys=(StateKey(name="stopped_early", structure=True, summary="why the turn stopped"),),
)
