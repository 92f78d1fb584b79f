"""``cost_budget``: a cap on a run's USD (seed semantics), priced by ``pricing_table``.

A bare number warns: when the run's cumulative USD first exceeds it, one
``agentfootprint.cost.limit_hit`` event with ``action: "warn"`` is recorded (and a warning
logged) and the run goes on. ``{"usd": x, "on_exceed": "halt"}`` stops: the same event
(``action: "halt"``) is recorded at the call that crossed the budget, and the turn ends at
the next iteration boundary, the route after that call, where ``max_iterations`` stops it
too. The call in flight has completed, is billed (its tick is recorded) and is recorded;
the requested tools are not run, and ``RunResult.stopped_early`` is
``{"reason": "cost-budget", "usd": spent, "budget": x}``. A reply that asks for no tool ends
the turn on its own. ``{"usd": x, "on_exceed": "warn"}`` is the bare number.

The budget is money, and only a pricing table turns tokens into money: a budget without
``pricing_table``, or whose agent's model the table does not price, is refused at
construction. The run's spend is what ``pricing_table`` counted (a call it could not price
counts nothing, and its ``agentfootprint.cost.unpriced`` event says so). Recorded in
``run.open.options`` as ``{"usd": x, "on_exceed": ...}``; whether it warned is kept in its
run memory, never in state. It declares it needs ``pricing_table``: its check reads the
resolved table by name, its hooks the spend that feature counted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

from agentfootprint.features import pricing_table
from agentfootprint.features.base import MISSING, Feature, Given, HookContext, OptionSpec, refuse
from agentfootprint.logformat.canonical import MAX_SAFE_INT
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.provider import LLMResponse

OPTION = "cost_budget"
ACTIONS = ("halt", "warn")
#: ``stopped_early.reason`` of a halt
REASON = "cost-budget"
log = logging.getLogger("agentfootprint.cost")


@dataclass(frozen=True, kw_only=True)
class LimitHit(AgentEvent):
    """The run's cumulative USD exceeded its budget (once per run)."""

    kind: ClassVar[str] = "agentfootprint.cost.limit_hit"
    iteration: int
    call: int  #: the call that crossed the budget
    action: str  #: ``warn`` (the run goes on) or ``halt`` (it stops at the route)
    usd: float  #: the run's cumulative USD after that call
    budget: float | int


def _usd(value: Any) -> float | int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not math.isfinite(value))
        or not 0 < value <= MAX_SAFE_INT
    ):
        raise refuse(OPTION, f"the budget must be a finite number of USD > 0, got {value!r}")
    return value


def _check(value: Any, given: Given) -> dict[str, Any] | None:
    if value is MISSING or value is None:
        return None
    if isinstance(value, Mapping):
        unknown = sorted(map(repr, set(value) - {"usd", "on_exceed"}))
        if unknown:
            raise refuse(
                OPTION, f"unknown key {', '.join(unknown)}; the keys are 'usd' and 'on_exceed'"
            )
        if "usd" not in value:
            raise refuse(OPTION, "give the budget in USD: {'usd': 0.5, 'on_exceed': 'halt'}")
        action = value.get("on_exceed", "warn")
        if action not in ACTIONS:
            raise refuse(OPTION, f"'on_exceed' must be 'halt' or 'warn', got {action!r}")
        budget = {"usd": _usd(value["usd"]), "on_exceed": action}
    elif isinstance(value, int | float) and not isinstance(value, bool):
        budget = {"usd": _usd(value), "on_exceed": "warn"}
    else:
        raise refuse(
            OPTION,
            "must be a number of USD (warns once) or {'usd': x, 'on_exceed': 'halt' | 'warn'}, "
            f"got {value!r}",
        )
    table = given.resolved(pricing_table.OPTION)
    if table is None:
        raise refuse(
            OPTION,
            "a cost budget is money and needs prices to turn tokens into money: give "
            "pricing_table=True (the shipped table) or pricing_table={model: {'input': ..., "
            "'output': ...}} (USD per 1M tokens)",
        )
    model = given.get("model")
    if model not in table:
        raise refuse(
            OPTION,
            f"pricing_table has no prices for the agent's model {model!r}, so the budget "
            f"could never be reached; add {model!r} to pricing_table",
        )
    return budget


@dataclass(frozen=True, kw_only=True, slots=True)
class Budget:
    """The resolved option, typed."""

    usd: float | int
    on_exceed: str  #: ``halt`` or ``warn``


@dataclass(slots=True)
class _Warned:
    """Whether this run has crossed its budget already (the event is made once per run)."""

    crossed: bool = False


class _CostBudget(Feature[Budget]):
    def settings(self, options: Mapping[str, Any]) -> Budget:
        return Budget(**options[OPTION])

    def _crossed(self, ctx: HookContext[Budget]) -> Decimal | None:
        """The spend (what ``pricing_table`` counted) when it exceeds the budget."""
        spent = pricing_table.spent(ctx)
        return spent if spent > pricing_table.price_decimal(ctx.options.usd) else None

    async def reply_received(
        self, ctx: HookContext[Budget], call: int, response: LLMResponse
    ) -> None:
        spent = self._crossed(ctx)
        warned = ctx.memory(_Warned)
        if spent is None or warned.crossed:
            return
        warned.crossed = True  # once per run
        budget = ctx.options
        if budget.on_exceed == "warn":
            log.warning(
                "run %s: spent %s USD, over its cost_budget of %s USD (warning only; "
                "{'usd': x, 'on_exceed': 'halt'} stops the run instead)",
                ctx.run_id,
                spent,
                budget.usd,
            )
        await ctx.emit(
            LimitHit(
                run_id=ctx.run_id,
                iteration=ctx.scope.get("iteration"),
                call=call,
                action=budget.on_exceed,
                usd=float(spent),
                budget=budget.usd,
            )
        )

    async def stop_reason(self, ctx: HookContext[Budget]) -> Mapping[str, Any] | None:
        spent = self._crossed(ctx)
        if spent is None or ctx.options.on_exceed != "halt":
            return None
        return {"reason": REASON, "usd": float(spent), "budget": ctx.options.usd}


FEATURE = _CostBudget(
    name="cost-budget",
    summary="a cap on a run's USD: warn once, or halt at the next iteration boundary",
    order=150,  # after pricing_table's tick (its hook counts the spend first)
    options=(
        OptionSpec(
            name=OPTION,
            seed="costBudget",
            check=_check,
            recorded=True,
            summary="cap on a run's USD",
        ),
    ),
    events=(LimitHit,),
    recorded_events=(LimitHit,),
    needs=(pricing_table.NAME,),
    active=lambda options: options.get(OPTION) is not None,
)
