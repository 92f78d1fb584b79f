"""``context_budget``: per-slot character budgets, a signal and never a limiter.

Each of the three context slots (``system_prompt``, ``messages``, ``tools``) has a budget in
characters (defaults 4000, 10000, 2000). When what a slot serves at a call exceeds it, an
``agentfootprint.context.budget_pressure`` event says which slot, its budget and what it
used, and a warning is logged once per slot and agent. Nothing is truncated: the full content
still reaches the model. The event goes to listeners only: what it measures is already in
the log (every served request rebuilds from it).

What a slot uses: ``system_prompt``, the assembled prompt's length (the served pieces'
texts joined by a blank line); ``messages``, the sum over served messages of their
``content`` length (a content that is not a string counts as its canonical JSON);
``tools``, the length of the served tool schemas' canonical JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.features import llm_call
from agentfootprint.features.base import MISSING, Feature, HookContext, OptionSpec, refuse
from agentfootprint.features.base import count as whole_count
from agentfootprint.features.llm_call import system_prompt_text
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.projection import projection as projection_of
from agentfootprint.logformat.request import identity_prefix
from agentfootprint.runtime.events import AgentEvent

OPTION = "context_budget"
DEFAULTS: Mapping[str, int] = {"system_prompt": 4000, "messages": 10000, "tools": 2000}
log = logging.getLogger("agentfootprint.context")


@dataclass(frozen=True, kw_only=True)
class BudgetPressure(AgentEvent):
    """A context slot served more characters than its budget at one call."""

    kind: ClassVar[str] = "agentfootprint.context.budget_pressure"
    iteration: int
    call: int
    slot: str  #: ``system_prompt``, ``messages`` or ``tools``
    budget: int
    used: int


def _check(value: Any, given: Mapping[str, Any]) -> dict[str, int]:
    if value is MISSING or value is None:
        return dict(DEFAULTS)
    if not isinstance(value, Mapping):
        raise refuse(
            OPTION,
            "must be a mapping of slot budgets in characters, e.g. {'messages': 40000} "
            f"(slots: {', '.join(DEFAULTS)}), got {value!r}",
        )
    budgets = dict(DEFAULTS)
    for slot, budget in value.items():
        if slot not in DEFAULTS:
            raise refuse(
                OPTION, f"unknown slot {slot!r}; the slots are {', '.join(map(repr, DEFAULTS))}"
            )
        budgets[slot] = whole_count(OPTION, budget, f"the {slot!r} budget")
    return budgets


def _chars(message: Any) -> int:
    content = message.get("content") if isinstance(message, dict) else message
    return len(content) if isinstance(content, str) else len(canon(content))


def used(served: Mapping[str, Any]) -> dict[str, int]:
    """What each slot serves, in characters (see the module docstring)."""
    return {
        "system_prompt": len(system_prompt_text(served)),
        "messages": sum(map(_chars, served["messages"])),
        "tools": len(canon(list(served["tools"]))),
    }


class _Meter:
    """:func:`used`, call after call, without measuring again what was measured: served
    lists grow by appends of the very objects of the previous call (committed state is
    replaced, never mutated), so the messages counted are kept with the running total after
    each, and the tools' size is kept for the list object it was measured on.

    A run continued from a verified parent (a replay, a continuation by id) serves the
    parent's history as parsed from the log: the same messages, other objects from some
    position on. The part still identical is found by bisection on identity (the history
    grows by appends only, so a message identical at a position is identical at every one
    before it), and only the rest is counted: O(log history + new) per call, never
    O(history)."""

    def __init__(self) -> None:
        self.messages: Sequence[Any] = []
        #: totals[i]: the characters of the first i messages counted
        self.totals: list[int] = [0]
        self.tools: Any = None
        self.tools_size = 0

    def measure(self, served: Mapping[str, Any], appends_only: bool) -> dict[str, int]:
        """``appends_only``: the projection serves the history as recorded (it edits nothing,
        as projection 1); otherwise the served list may be spliced, and the messages kept
        are found object by object (the request hasher's rule) before the rest is counted."""
        current = served["messages"]
        kept = identity_prefix(self.messages, current, spliced=not appends_only)
        totals = self.totals
        del totals[kept + 1 :]
        running = totals[kept]
        for message in current[kept:]:
            running += _chars(message)
            totals.append(running)
        self.messages = current
        tools = served["tools"]
        if tools is not self.tools:
            self.tools, self.tools_size = tools, len(canon(list(tools)))
        return {"messages": running, "tools": self.tools_size}


@dataclass(slots=True)
class _Kept:
    """What the feature keeps across the agent's runs: a continued conversation's history
    is not counted again, and a slot is warned about once per agent."""

    meter: _Meter = field(default_factory=lambda: _Meter())
    warned: set[str] = field(default_factory=set)


class _ContextBudget(Feature[Mapping[str, int]]):
    def settings(self, options: Mapping[str, Any]) -> Mapping[str, int]:
        budgets: Mapping[str, int] = options[OPTION]
        return budgets

    async def request_served(
        self, ctx: HookContext[Mapping[str, int]], served: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        budgets = ctx.options
        kept = ctx.cache(_Kept)
        listened = ctx.listens(BudgetPressure.kind)
        # the system prompt's length is the one the model call keeps for llm_start
        counts = {
            "system_prompt": ctx.needed(llm_call.FEATURE).cache(llm_call.PromptChars).of(served)
        }
        counts.update(kept.meter.measure(served, not projection_of(ctx.projection).edited))
        for slot, count in counts.items():
            if count <= budgets[slot] or (slot in kept.warned and not listened):
                continue
            if slot not in kept.warned:
                kept.warned.add(slot)
                log.warning(
                    "context slot %s served %d characters, over its budget of %d (nothing was "
                    "truncated; raise context_budget[%r] if the slot is legitimately this big)",
                    slot,
                    count,
                    budgets[slot],
                    slot,
                )
            if not listened:
                continue
            await ctx.emit(
                BudgetPressure(
                    run_id=ctx.run_id,
                    iteration=ctx.scope.get("iteration"),
                    call=ctx.calls,
                    slot=slot,
                    budget=budgets[slot],
                    used=count,
                )
            )
        return {}


FEATURE = _ContextBudget(
    name="context-budget",
    summary="per-slot character budgets: a pressure event, nothing truncated",
    order=130,
    options=(
        OptionSpec(
            name=OPTION,
            seed="contextBudget",
            check=_check,
            summary="per-slot character budgets",
        ),
    ),
    events=(BudgetPressure,),
    needs=(llm_call.NAME,),
)
