"""``wrap_up_at_max_iterations``: when the action budget runs out mid-task, one more call
with the tools withheld. Default on for agents that have tools.

``max_iterations`` caps actions, and the model does not know it is about to hit the cap: a
turn cut there while the reply still asked for tools would hand back a fragment as the
answer. With this on, the route takes the ``wrap-up`` branch instead of ``final``:

1. the ``wrap-up`` stage appends to the history the reply's text (when it has any; its tool
   calls were not run) and the library's marked message :data:`WRAP_UP_MESSAGE` (it opens
   with :data:`WRAP_UP_FRAME_PREFIX`, so a reader of the history can tell the library wrote
   it, and states past facts about the call it was written for, not instructions), commits
   ``tool_schemas = []`` (the withholding is in what is committed and served: the next
   turn's ``tools`` stage restores them), marks ``stopped_early`` with ``wrapped_up: true``
   and records ``agentfootprint.agent.budget_exhausted`` ``{action: "wrap-up", iteration}``;
2. ``call-llm-wrap-up`` makes the call (the loop's own model call: receipted or marked, at
   the run's next call index; it does not count against the cap);
3. the final phase takes that reply's text. Tool calls it may still ask for are not run.

A cost-budget halt never wraps up (the person capped the money), and a turn that never hits
the cap records the same rows with the option on or off. Off: the turn ends on the last
reply, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from agentfootprint.features import llm_call
from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    Options,
    OptionSpec,
    StageSpec,
    refuse,
)
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.run import StageContext

OPTION = "wrap_up_at_max_iterations"
#: the route branch, and ``budget_exhausted``'s action
BRANCH = "wrap-up"
#: The registered marker a library-written wrap-up message opens with (the seed's wording):
#: the history re-reads it on every later call, and the marker says it is not the person's.
WRAP_UP_FRAME_PREFIX = "[budget exhausted — "
#: The message appended before the wrap-up call: every clause a past fact about that call.
WRAP_UP_MESSAGE = (
    WRAP_UP_FRAME_PREFIX
    + "the action budget was exhausted before the wrap-up call this message opened, so no "
    "tools were offered on that call. That call was for the final answer, from what the "
    "messages above already hold: what was completed, what remained undone, and anything "
    "the person should know.]"
)


@dataclass(frozen=True, kw_only=True)
class BudgetExhausted(AgentEvent):
    """The action budget ran out with tool calls pending; what the turn did about it."""

    kind: ClassVar[str] = "agentfootprint.agent.budget_exhausted"
    action: str  #: ``wrap-up``: one more call, tools withheld
    iteration: int


def _has_tools(tools: Any) -> bool:
    return isinstance(tools, Sequence) and not isinstance(tools, str) and len(tools) > 0


def _check(value: Any, given: Mapping[str, Any]) -> bool:
    if value is MISSING:
        return _has_tools(given.get("tools"))
    if not isinstance(value, bool):
        raise refuse(OPTION, f"must be True or False, got {value!r}")
    return value


class _WrapUp(Feature[Options]):
    async def at_max_iterations(self, ctx: HookContext[Options]) -> str | None:
        return BRANCH


async def wrap_up(ctx: StageContext) -> None:
    """The history gets the reply's text and the marked message; the tools are withheld."""
    s = ctx.scope
    response = s.get("last_response")
    stopped = s.get("stopped_early")
    added: list[dict[str, Any]] = []
    if response["content"]:
        added.append({"role": "assistant", "content": response["content"]})
    added.append({"role": "user", "content": WRAP_UP_MESSAGE})
    s.append("history", added)
    s.set("tool_schemas", [])
    s.set("stopped_early", {**stopped, "wrapped_up": True})
    await ctx.emit(
        BudgetExhausted(run_id=ctx.run_id, action=BRANCH, iteration=stopped["iteration"])
    )


FEATURE = _WrapUp(
    name="wrap-up",
    summary="one more call, tools withheld, when the action budget runs out",
    order=65,
    options=(
        OptionSpec(
            name=OPTION,
            seed="wrapUpAtMaxIterations",
            check=_check,
            recorded=True,
            summary="a wrap-up call at the cap",
        ),
    ),
    stages=(
        StageSpec(name="wrap-up", fn=wrap_up, phase="branch", branch=BRANCH, order=0),
        StageSpec(
            name="call-llm-wrap-up",
            fn=llm_call.call_llm,
            phase="branch",
            branch=BRANCH,
            order=10,
            calls_model=True,
        ),
    ),
    events=(BudgetExhausted,),
    recorded_events=(BudgetExhausted,),
    ports=("model",),
    active=lambda options: bool(options.get(OPTION)) and _has_tools(options.get("tools")),
)
