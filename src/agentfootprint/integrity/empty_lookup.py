"""empty-lookup: the run itself produced this identifier, and the lookup for it found
nothing. Filed at the write seam, always as an advisory, never an accusation.

The join of two things the record already holds: (a) a string argument of the call appears
in an earlier result of a tool the consumer declares in ``arguments_from``; (b) the lookup
came back empty (a rowset of zero rows, or an ``af.absent`` envelope). An empty answer can
be perfectly true (:data:`CEILING`), so the same advisory is filed for a true absence and a
lookup that could never have matched: nothing here can tell them apart. A result whose shape
cannot be counted (prose, an object, a ``{"rows": [...]}`` wrapper) is ``not_applicable``;
a consumer whose declared producers served nothing yet is ``unreachable``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, Final

from agentfootprint.integrity.contracts import Contract
from agentfootprint.integrity.rail import (
    NOT_APPLICABLE,
    NOT_JSON,
    UNREACHABLE,
    Finding,
    Judgement,
    ToolCall,
    clip,
    is_absence,
    read_result,
    string_leaves,
)

__all__ = [
    "CEILING",
    "CHECK",
    "MIN_CHECKED_LENGTH",
    "SEAM",
    "Produced",
    "came_back_empty",
    "canary",
    "judge_empty_lookup",
]

CHECK = "empty-lookup"
SEAM: Final = "write"
#: upstream's EMPTY_LOOKUP_CEILING, verbatim
CEILING = (
    "An empty result can be perfectly true — the thing may exist and simply have nothing to "
    "show right now — so this is a place to look, never a verdict that anything is wrong."
)
#: below four characters substring matching is noise both ways (the choice seam's fence)
MIN_CHECKED_LENGTH = 4

_PHRASES = {
    "absence": "a declared absence — the tool said the search ran and matched nothing",
    "rowset": "a rowset with zero rows",
}

#: one ground: (tool_call_id, tool, the result's text lowered)
Ground = tuple[str, str, str]


class Produced:
    """The results a run served so far, indexed by tool, grown as the history grows, so a
    live run asks for the grounds of each call without rescanning the history. Each text is
    lowered once, when added; order is the order added (the history's)."""

    def __init__(self, calls: Iterable[ToolCall] = ()) -> None:
        self._by_tool: dict[str, list[tuple[int, str, str]]] = {}
        self._added = 0
        for call in calls:
            self.add(call)

    def add(self, call: ToolCall) -> None:
        """Keep ``call``'s result as a ground (a call with no result text grounds nothing)."""
        if not isinstance(call.content, str) or not call.content:
            return
        self._by_tool.setdefault(call.tool, []).append(
            (self._added, call.tool_call_id, call.content.casefold())
        )
        self._added += 1

    def grounds(self, tools: Sequence[str]) -> list[Ground]:
        """The results of ``tools``, in the order they were served."""
        picked = [
            (seq, call_id, tool, text)
            for tool in dict.fromkeys(tools)
            for seq, call_id, text in self._by_tool.get(tool, ())
        ]
        picked.sort(key=lambda entry: entry[0])
        return [(call_id, tool, text) for _, call_id, tool, text in picked]


def _grounds(contract: Contract, produced: Sequence[ToolCall] | Produced) -> list[Ground]:
    if isinstance(produced, Produced):
        return produced.grounds(contract.arguments_from)
    sources = set(contract.arguments_from)
    return [
        (p.tool_call_id, p.tool, p.content.casefold())
        for p in produced
        if p.tool in sources and isinstance(p.content, str) and p.content
    ]


def _shape(content: str) -> str | None:
    """``"absence"``, ``"rowset"`` (an empty array) or ``"full"`` (rows came back); None
    when the result cannot be counted."""
    try:
        value: Any = read_result(content)
    except RecursionError:  # nested past the parser's depth: not a shape it counts
        return None
    if type(value) is list:  # the common case first (a list is never an absence)
        return "rowset" if not value else "full"
    if value is NOT_JSON:
        return None
    if is_absence(value):
        return "absence"
    if isinstance(value, list):
        return "rowset" if not value else "full"
    return None


def came_back_empty(call: ToolCall) -> bool:
    """Whether ``call``'s result is an empty lookup (a declared absence or a rowset with no
    rows): the one case :func:`judge_empty_lookup` reads the grounds, so a run gathers them
    only then."""
    if call.is_error or not isinstance(call.content, str):
        return False
    return _shape(call.content) in _PHRASES


def judge_empty_lookup(
    contract: Contract, call: ToolCall, produced: Sequence[ToolCall] | Produced
) -> Judgement:
    """Judge one finished call of a tool declaring ``arguments_from``. ``produced``: every
    tool result served before this call (a sequence, or a :class:`Produced` index). One
    advisory per string argument (trimmed, 4 characters or more) found, case-insensitively,
    in a declared producer's result, when the lookup came back empty; the first producer
    result that carries it is named."""
    if not contract.arguments_from or call.is_error or call.content is None:
        return NOT_APPLICABLE
    shape = _shape(call.content)
    if shape is None:
        return NOT_APPLICABLE
    if shape == "full":
        return Judgement.passed()
    grounds = [g for g in _grounds(contract, produced) if g[0] != call.tool_call_id]
    if not grounds:
        return UNREACHABLE
    consumer, call_id, phrase = call.tool, call.tool_call_id, _PHRASES[shape]
    findings: list[Finding] = []
    for path, raw in string_leaves(call.arguments):
        value = raw.strip()
        if len(value) < MIN_CHECKED_LENGTH:
            continue
        needle = value.casefold()
        ground = next((g for g in grounds if needle in g[2]), None)
        if ground is None:
            continue
        producer_call, producer, _ = ground
        quoted = clip(value)
        findings.append(
            Finding(
                check=CHECK,
                kind=CHECK,
                seam=SEAM,
                subjects=(("tool", consumer), ("tool", producer)),
                witnesses=(call_id, producer_call),
                predicate=path,
                advisory=True,
                facts={
                    "value": quoted,
                    "producer": producer,
                    "producer_call": producer_call,
                    "path": path,
                    "shape": shape,
                },
                message=(
                    f"'{consumer}' was called with {path} = \"{quoted}\" — a value this run "
                    f"itself produced, in a result from '{producer}', which '{consumer}' "
                    "declares as where its arguments come from — and the lookup came back "
                    f"with {phrase}. That pairing is what makes it worth a look: the run had "
                    "the identifier, so an empty answer is either a true absence or a lookup "
                    "that could never have matched, and those two are byte-identical from "
                    f"here. {CEILING} Call id {call_id}. Nothing here blocked the call, "
                    "changed the result, or retried anything."
                ),
            )
        )
    return Judgement.found(*findings) if findings else Judgement.passed()


def canary() -> Judgement:
    """The check run on its synthetic defect: a lookup keyed on an id its declared producer
    served, answered with an empty rowset."""
    contract = Contract(tool="canary_tool", arguments_from=("canary_ground",))
    ground = ToolCall(
        tool="canary_ground",
        tool_call_id="canary_ground_call",
        arguments={},
        content="canary: served canary-grounded-id",
        is_error=False,
        turn=0,
        history_index=0,
    )
    call = ToolCall(
        tool="canary_tool",
        tool_call_id="canary",
        arguments={"id": "canary-grounded-id"},
        content="[]",
        is_error=False,
        turn=0,
        history_index=1,
    )
    judged = judge_empty_lookup(contract, call, [ground])
    return dataclasses.replace(
        judged, findings=tuple(dataclasses.replace(f, synthetic=True) for f in judged.findings)
    )
