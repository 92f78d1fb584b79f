"""The system-prompt slot: one piece per configured system string."""

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


def _system(value: Any, given: Mapping[str, Any]) -> tuple[str, ...]:
    if value is MISSING:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if not isinstance(value, Sequence) or not all(isinstance(s, str) for s in value):
        raise refuse("system", "must be a string or a list of strings (system pieces)")
    return tuple(value)


async def system_prompt(ctx: StageContext) -> None:
    system = ctx.config.system

    def pieces() -> list[dict[str, Any]]:
        built: list[dict[str, Any]] = [{"source": "base", "text": text} for text in system]
        for hook in hooks_at(ctx, Feature.system_pieces):  # (the ontology's map, ...)
            built = hook(ctx, built)
        return built

    # the features' pieces are constant for the agent, as ``system`` is, so ``system`` stays
    # the memo's source
    ctx.set_derived("system_pieces", system, pieces)


FEATURE: Feature[Options] = Feature(
    name="system-prompt",
    summary="the system-prompt slot",
    order=10,
    options=(OptionSpec(name="system", seed=None, check=_system, summary="the system pieces"),),
    stages=(
        StageSpec(
            name="system-prompt", fn=system_prompt, phase="iteration", order=10, classic="first"
        ),
    ),
    state_keys=(StateKey(name="system_pieces", structure=True, summary="request.system"),),
)
