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
from agentfootprint.features.ontology import ontology_pieces
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
    # the ontology pieces (features/ontology.py) follow the configured ones; they are constant
    # for the agent, as ``system`` is, so ``system`` stays the memo's source
    options = ctx.config.options
    ctx.set_derived(
        "system_pieces",
        system,
        lambda: [{"source": "base", "text": text} for text in system] + ontology_pieces(options),
    )


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
