"""``pricing_table``: what each model call cost, in USD, on the record.

The option is a mapping ``model -> {"input": ..., "output": ..., "cache_read": ...,
"cache_write": ...}`` of USD per million tokens (``input`` and ``output`` required), or
``True`` for the table shipped in ``agentfootprint/data/pricing.json`` (list prices, dated,
with their source named: override it with your contract prices, e.g.
``{**shipped_prices(), "gpt-4o": {...}}`` with :func:`shipped_prices` from this module).

After every reply an ``agentfootprint.cost.tick`` event is recorded in the call's commit:
the call's USD and the run's cumulative USD. The call's cost is
``sum(tokens[kind] * price[kind]) / 1e6`` over the kinds of the reply's usage, where
``input`` counts the prompt tokens billed at the input rate, and ``cache_read`` /
``cache_write`` the prompt tokens read from or written to the vendor's cache (the three
are disjoint, as Anthropic reports them). It is computed in decimal arithmetic from the
prices as written (their shortest decimal form) and rounded half-even to
:data:`DECIMALS` places; the cumulative is the exact sum of the rounded per-call figures,
so the numbers are stable JSON and an auditor recomputes both from the log: the first tick
of each model in a run carries the ``prices`` it was billed at. A call whose model has no
entry, or whose usage has tokens of a kind the entry does not price, costs ``None``
(unknown, never guessed): one ``agentfootprint.cost.unpriced`` event per model and run
says which, with one warning in the log; the cumulative counts the priced calls only.

The cumulative lives in the feature's run memory (never in state): the seed makes it run-scoped
(it resets every run), it is derived from recorded usage and recorded prices, and what it
says is in the tick events, so it is not evidence of its own; a replay recomputes it from
the recorded replies. The table itself is not recorded in ``run.open`` (a whole shipped
table would be bytes of no use): the prices a run used are in its ticks.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from importlib import resources
from typing import Any, ClassVar

from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    OptionSpec,
    StateKey,
    refuse,
)
from agentfootprint.logformat.canonical import MAX_SAFE_INT
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.provider import LLMResponse

__all__ = [
    "DECIMALS",
    "KINDS",
    "NAME",
    "OPTION",
    "CostTick",
    "CostUnpriced",
    "PriceTable",
    "call_usd",
    "price_decimal",
    "shipped_prices",
    "shipped_table",
    "spent",
]

OPTION = "pricing_table"
NAME = "pricing-table"
#: The token kinds a price entry may name (``input`` and ``output`` are required).
KINDS = ("input", "output", "cache_read", "cache_write")
REQUIRED = ("input", "output")
#: Decimal places of every USD figure recorded (1e-10 USD).
DECIMALS = 10
_QUANTUM = Decimal(1).scaleb(-DECIMALS)
_PER = Decimal(1_000_000)
log = logging.getLogger("agentfootprint.cost")


@dataclass(frozen=True, kw_only=True)
class CostTick(AgentEvent):
    """What one model call cost and what the run has cost so far (USD)."""

    kind: ClassVar[str] = "agentfootprint.cost.tick"
    iteration: int
    call: int
    model: str
    #: None: unknown (see :class:`CostUnpriced`)
    usd: float | None
    cumulative_usd: float
    #: the prices this model was billed at (USD per 1M tokens), on its first tick of the run
    prices: dict[str, float | int] | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True)
class CostUnpriced(AgentEvent):
    """A call's cost is unknown: its model has no prices, or not for some token kinds."""

    kind: ClassVar[str] = "agentfootprint.cost.unpriced"
    iteration: int
    call: int
    model: str
    #: the token kinds the call used that the table does not price
    kinds: list[str]
    #: the model has an entry in the table (False: none at all)
    in_table: bool


def shipped_table() -> dict[str, Any]:
    """The shipped ``pricing.json`` (date, source, note, models), a fresh copy."""
    text = resources.files("agentfootprint.data").joinpath("pricing.json").read_text("utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def shipped_prices() -> dict[str, dict[str, float]]:
    """The shipped prices by model (what ``pricing_table=True`` uses), a fresh copy."""
    models: dict[str, dict[str, float]] = shipped_table()["models"]
    return models


def _price(model: str, kind: str, value: Any) -> float | int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not math.isfinite(value))
        or value < 0
        or value > MAX_SAFE_INT
    ):
        raise refuse(
            OPTION,
            f"the {kind!r} price of {model!r} must be a finite number >= 0 (USD per 1M "
            f"tokens), got {value!r}",
        )
    return value


def _check(value: Any, given: Mapping[str, Any]) -> dict[str, dict[str, float | int]] | None:
    if value is MISSING or value is None or value is False:
        return None
    if value is True:
        value = shipped_prices()
    if not isinstance(value, Mapping) or not value:
        raise refuse(
            OPTION,
            "must be True (the shipped table) or a non-empty mapping model -> {'input': ..., "
            "'output': ..., 'cache_read': ..., 'cache_write': ...} in USD per 1M tokens, got "
            f"{value!r}",
        )
    table: dict[str, dict[str, float | int]] = {}
    for model, entry in value.items():
        if not isinstance(model, str) or not model:
            raise refuse(OPTION, f"model names must be non-empty strings, got {model!r}")
        if not isinstance(entry, Mapping):
            raise refuse(
                OPTION,
                f"the prices of {model!r} must be a mapping like {{'input': 2.5, 'output': "
                f"10.0}} (USD per 1M tokens), got {entry!r}",
            )
        for kind in entry:
            if kind not in KINDS:
                raise refuse(
                    OPTION,
                    f"unknown price {kind!r} for {model!r}; the kinds are "
                    + ", ".join(map(repr, KINDS)),
                )
        for kind in REQUIRED:
            if kind not in entry:
                raise refuse(OPTION, f"{model!r} has no {kind!r} price; give one (USD per 1M)")
        table[model] = {kind: _price(model, kind, entry[kind]) for kind in KINDS if kind in entry}
    return table


def price_decimal(price: float | int) -> Decimal:
    """A price (or budget) as written: a float's shortest decimal form (what its JSON
    shows)."""
    return Decimal(repr(price)) if isinstance(price, float) else Decimal(price)


def call_usd(
    usage: Mapping[str, int], prices: Mapping[str, float | int] | None
) -> tuple[Decimal | None, list[str]]:
    """A call's USD (rounded to :data:`DECIMALS`) from its usage, and the token kinds with
    tokens but no price (then the USD is None)."""
    if prices is None:
        return None, [k for k in KINDS if usage.get(k)]
    missing = [k for k in KINDS if usage.get(k) and k not in prices]
    if missing:
        return None, missing
    total = sum(
        (Decimal(usage[k]) * price_decimal(prices[k]) for k in KINDS if usage.get(k)), Decimal(0)
    )
    return (total / _PER).quantize(_QUANTUM, rounding=ROUND_HALF_EVEN), []


@dataclass(slots=True)
class _Spend:
    """The run's cost beside the loop (never in state)."""

    cumulative: Decimal = Decimal(0)
    priced: set[str] = field(default_factory=set)  #: models whose prices were recorded
    unpriced: set[str] = field(default_factory=set)  #: models warned about


#: the resolved table: model -> {kind: USD per 1M tokens}
PriceTable = Mapping[str, Mapping[str, float | int]]


def spent(ctx: HookContext[object]) -> Decimal:
    """The run's cumulative USD so far (priced calls; 0 before the first), for a hook of a
    feature that ``needs`` this one."""
    return ctx.needed(FEATURE).memory(_Spend).cumulative


class _PricingTable(Feature[PriceTable]):
    def settings(self, options: Mapping[str, Any]) -> PriceTable:
        table: PriceTable = options[OPTION]
        return table

    async def reply_received(
        self, ctx: HookContext[PriceTable], call: int, response: LLMResponse
    ) -> None:
        spend = ctx.memory(_Spend)
        model: str = ctx.scope.get("model")
        iteration: int = ctx.scope.get("iteration")
        usage = response.usage.to_state()  # as committed in ``last_response``
        prices = ctx.options.get(model)
        usd, missing = call_usd(usage, prices)
        if usd is None and model not in spend.unpriced:
            spend.unpriced.add(model)
            log.warning(
                "call %d: model %r %s, so its cost is unknown (not counted in the run's "
                "total); add its prices to pricing_table",
                call,
                model,
                "has no prices" if prices is None else f"has no price for {', '.join(missing)}",
            )
            await ctx.emit(
                CostUnpriced(
                    run_id=ctx.run_id,
                    iteration=iteration,
                    call=call,
                    model=model,
                    kinds=missing,
                    in_table=prices is not None,
                )
            )
        if usd is not None:
            spend.cumulative += usd
        recorded = None
        if prices is not None and model not in spend.priced:
            spend.priced.add(model)
            recorded = dict(prices)
        await ctx.emit(
            CostTick(
                run_id=ctx.run_id,
                iteration=iteration,
                call=call,
                model=model,
                usd=None if usd is None else float(usd),
                cumulative_usd=float(spend.cumulative),
                prices=recorded,
            )
        )

    async def run_end(self, ctx: HookContext[PriceTable], error: BaseException | None) -> None:
        if error is None and ctx.pausing:
            ctx.scope.set(CARRIED, str(ctx.memory(_Spend).cumulative))

    async def resumed(self, ctx: HookContext[PriceTable]) -> None:
        carried = ctx.scope.get(CARRIED)
        if isinstance(carried, str):
            ctx.memory(_Spend).cumulative = Decimal(carried)
            ctx.scope.delete(CARRIED)


#: what a paused run had spent in its turn, carried to the run that answers it (exact
#: decimal text): a pause never resets a cost budget
CARRIED = "paused_cost_usd"


FEATURE = _PricingTable(
    name=NAME,
    summary="per-call and cumulative USD of a run, recorded after every call",
    order=140,
    options=(
        OptionSpec(
            name=OPTION,
            seed="pricingTable",
            check=_check,
            summary="USD per 1M tokens by model",
        ),
    ),
    events=(CostTick, CostUnpriced),
    recorded_events=(CostTick, CostUnpriced),
    state_keys=(
        StateKey(
            name=CARRIED,
            structure=True,
            summary="a paused turn's spend, carried to the run that resumes it",
        ),
    ),
    active=lambda options: options.get(OPTION) is not None,
)
