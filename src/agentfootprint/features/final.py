"""The final branch: the answer joins the history and becomes the turn's result."""

from __future__ import annotations

from collections.abc import Mapping

from agentfootprint.features.base import Feature, Options, StageSpec, StateKey
from agentfootprint.runtime.events import IterationEnd, TurnEnd
from agentfootprint.runtime.run import StageContext


async def prepare_final(ctx: StageContext) -> None:
    s = ctx.scope
    response = s.get("last_response")
    iteration = s.get("iteration")
    answer = response["content"]
    s.append("history", [{"role": "assistant", "content": answer}])
    layer = ctx.config.options.get("answer_layer")
    if isinstance(layer, Mapping) and layer.get("standing_line") is True:
        # the standing line the answer layer's stage committed just before this one: the
        # answer given (and sealed) carries it; the history keeps the model's own words
        assessed = s.get("answer_assessment")
        line = assessed.get("line") if isinstance(assessed, Mapping) else None
        if isinstance(line, str) and isinstance(answer, str):
            answer = f"{answer}\n\n{line}" if answer else line
    s.set("final_answer", answer)
    await ctx.emit(IterationEnd(run_id=ctx.run_id, iteration=iteration))
    await ctx.emit(
        TurnEnd(
            run_id=ctx.run_id,
            answer=answer,
            iterations=iteration,
            stopped_early=s.get("stopped_early"),
        )
    )


async def break_final(ctx: StageContext) -> None:
    """The end of the chart: commits nothing, stops the walk."""


FEATURE: Feature[Options] = Feature(
    name="final",
    summary="the final answer",
    order=90,
    stages=(
        StageSpec(name="prepare-final", fn=prepare_final, phase="final", order=0),
        StageSpec(name="break-final", fn=break_final, phase="final", order=10),
    ),
    state_keys=(StateKey(name="final_answer", summary="the turn's answer"),),
    events=(IterationEnd, TurnEnd),
)
