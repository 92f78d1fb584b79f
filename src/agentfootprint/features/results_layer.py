"""``results_layer``: the period each result covers, judged and said (docs/integrity.md).

A result may declare what time its READ covered (``af.period`` inside ``af.absent`` or
``af.described``: the instants asked for, what the store holds, or ``"unknown"``). Armed, each
call whose result declares a period, or whose tool declares ``define_tool(period=...)`` (the
argument that sets it), gets one verdict from the instants the tool declared
(:func:`agentfootprint.integrity.period.period_row`): ``covered``, ``partly-held``,
``not-held``, ``unknown``, or ``undeclared`` (the tool declares a period argument and this
result said nothing). No clock is read. The verdict is filed as a row of the state key
``period_rows`` (tool, call id, verdict, the period argument; never an instant), its one
record, and delivered to listeners as ``agentfootprint.findings.period`` (not recorded: a
second record of the verdict could only disagree with the row); a verdict with a clause
(all but ``covered`` and ``undeclared``) has its one static sentence appended to the result
the model reads, after a blank line (a ``tool_result_noted`` note, the last one: a replay
strips it with ``unnote`` and judges the tool's recorded result again, so it files the same
rows).

Armed by ``results_layer=True`` (for tools that declare periods only on their results), or by
any tool declaring ``period``; unarmed, nothing is judged and a run records the same rows as
without the feature. An errored or refused call is not judged. Each result is judged once:
a call id the provider reuses in a later batch is a second row (the event carries the
iteration).

Under a redaction policy, a result that is JSON text (which the policy reads into, by the
JSON-text rule) is judged and filed but gets no sentence: a sentence after it would make it
text the policy cannot read (as ``repeated_call_nudge``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    Options,
    OptionSpec,
    StateKey,
    ToolResult,
    refuse,
)
from agentfootprint.integrity.period import CLAUSES, period_row
from agentfootprint.logformat.commitments import read_json_text
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.tools import Tool, ToolOutcome

OPTION = "results_layer"
#: the state key of the verdicts, one row per judged call
ROWS = "period_rows"
#: what precedes a verdict's clause in the result the model reads
SEPARATOR = "\n\n"
_NOTES = tuple(SEPARATOR + clause for clause in CLAUSES.values())


@dataclass(frozen=True, kw_only=True)
class PeriodJudged(AgentEvent):
    """One call's period verdict (the tool, the call, the iteration and the word; never an
    instant)."""

    kind: ClassVar[str] = "agentfootprint.findings.period"
    iteration: int
    tool: str
    tool_call_id: str
    verdict: str
    #: the argument the tool declares sets the period (``define_tool(period=...)``)
    argument: str | None = field(default=None, metadata={"omit_none": True})


def _declaring(given: Mapping[str, Any]) -> list[Tool]:
    return [
        t
        for t in given.get("tools") or ()
        if isinstance(t, Tool) and t.contract is not None and t.contract.period is not None
    ]


def _check(value: Any, given: Mapping[str, Any]) -> bool | None:
    """True when armed (recorded in ``run.open.options``), else None (not recorded)."""
    declaring = _declaring(given)
    if value is MISSING or value is None:
        return True if declaring else None
    if not isinstance(value, bool):
        raise refuse(OPTION, f"must be True or False, got {value!r}")
    if not value and declaring:
        raise refuse(
            OPTION,
            f"tool {declaring[0].name!r} declares the argument that sets its period "
            "(define_tool(period=...)), so its results are judged; it cannot be switched off",
        )
    return True if value else None


class _ResultsLayer(Feature[Options]):
    async def tool_result_noted(
        self, ctx: HookContext[Options], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        content = outcome.content
        if outcome.is_error or not isinstance(content, str):
            return outcome  # an errored or refused call produced no result to judge
        tool = ctx.tool(result.tool)
        contract = None if tool is None else tool.contract
        row = period_row(contract, result.tool, result.tool_call_id, content)
        if row is None:
            return outcome
        ctx.scope.append(ROWS, [row])
        if ctx.listens(PeriodJudged.kind):  # delivered only: made only for a listener
            await ctx.emit(
                PeriodJudged(
                    run_id=ctx.run_id,
                    iteration=result.iteration,
                    tool=result.tool,
                    tool_call_id=result.tool_call_id,
                    verdict=row["verdict"],
                    argument=row.get("argument"),
                )
            )
        clause = CLAUSES.get(row["verdict"])
        if clause is None:
            return outcome
        if ctx.redacting and read_json_text(content) is not None:
            return outcome  # JSON under a policy: no sentence (see the module docstring)
        return ToolOutcome(content=content + SEPARATOR + clause, is_error=outcome.is_error)

    def unnote(self, ctx: HookContext[Options], content: str) -> str:
        for note in _NOTES:
            if content.endswith(note):
                return content[: -len(note)]
        return content


FEATURE = _ResultsLayer(
    name="results-layer",
    summary="the period each result covers: one verdict per call, filed, recorded and said",
    order=125,  # after repeated_call_nudge (120): the clause is the result's last note
    options=(
        OptionSpec(
            name=OPTION,
            seed="resultsLayer",
            check=_check,
            recorded=True,
            summary="judge the period each result covers (armed by any tool declaring period)",
        ),
    ),
    state_keys=(
        StateKey(name=ROWS, summary="the results layer's period verdicts, one row per call"),
    ),
    events=(PeriodJudged,),
    active=lambda options: options.get(OPTION) is True,
)
