"""prior-turn-evidence: every value the answer states was served before this turn. Filed at
the claim seam, always as an advisory (upstream's ``priorTurnEvidenceOf``, 9.83.0).

The measured case behind it: an agent answered a fresh question with no tool call, and every
value of its answer came from an inventory fetched turns earlier, for a different question.
Grounded, and out of date. Narrowing the evidence to this turn would be wrong ("and what
about that disk?" rightly leans on the last turn's rows), so the evidence stays the whole
history and each value is judged by the NEWEST turn that served it: when some value was
served in the turn being answered, the check passes; when all were served only earlier, it
files one advisory naming the newest such turn and the distance.

Adapted from upstream on one point: upstream counts only the turns still in the live window,
so its distance is a floor. Here the history is never edited (a window serves it by
reference), so the turn of every result is on the record and the distance is exact: the
ceiling's middle sentence says so, and the message says "{n} turn(s) before" without "at
least". The rest of the ceiling and of the message is upstream's, verbatim.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from agentfootprint.integrity.evidence import EvidenceIndex, Place, answer_values
from agentfootprint.integrity.rail import NOT_APPLICABLE, UNREACHABLE, Finding, Judgement

__all__ = ["CEILING", "CHECK", "SEAM", "canary", "judge_prior_turn"]

CHECK = "prior-turn-evidence"
SEAM: Final = "claim"
#: upstream's PRIOR_TURN_EVIDENCE_CEILING, its window sentence replaced (exact attribution)
CEILING = (
    "An answer that legitimately refers back to an earlier result is indistinguishable, by "
    "evidence alone, from one that has gone stale: this reports WHERE the values came from "
    "and never whether they were still the ones the reader wanted. It counts every turn of "
    "the conversation, because the whole history is on the record and never edited, so the "
    "distance it names is exact, and values the run supplied rather than fetched (the "
    "prompt, a fact, a recalled passage) are exempt from grounding and invisible to it. A "
    "place to look, never a verdict that anything is wrong."
)


def judge_prior_turn(
    answer: str, index: EvidenceIndex, current_turn: int, tool_results_this_turn: int
) -> Judgement:
    """Judge the final answer of turn ``current_turn`` against ``index`` (the tool results
    served up to the answer; places of later turns are not read). ``not_applicable`` when
    the index is truncated; ``unreachable`` with no turn, or no value of the answer served
    by any result; passed when some value's newest serving turn is this one; else one
    advisory finding."""
    if index.truncated:
        return NOT_APPLICABLE
    if isinstance(current_turn, bool) or not isinstance(current_turn, int) or current_turn < 1:
        return UNREACHABLE
    values = answer_values(answer)
    if index.served_in_turn(values, current_turn):
        return Judgement.passed()  # a value's newest place is in this turn: nothing older matters
    newest: list[Place] = []  # per grounded value, the newest place that served it
    for value in values:
        served = [p for p in index.places(value) if p.turn <= current_turn]
        if served:
            newest.append(max(served, key=lambda p: (p.turn, p.history_index)))
    if not newest:
        return UNREACHABLE
    latest = max(newest, key=lambda p: (p.turn, p.history_index))
    if latest.turn == current_turn:
        return Judgement.passed()
    count, age = len(newest), current_turn - latest.turn
    results = tool_results_this_turn if isinstance(tool_results_this_turn, int) else 0
    fetched = (
        "This turn called no tool and served no result, so the answer was assembled "
        "entirely from the conversation. "
        if results == 0
        else f"This turn served {results} tool result(s) and the answer states no value "
        "from any of them. "
    )
    return Judgement.found(
        Finding(
            check=CHECK,
            kind=CHECK,
            seam=SEAM,
            subjects=(("answer", "final"),),
            witnesses=(f"turn {latest.turn}", latest.tool_call_id or "?"),
            predicate="grounding",
            advisory=True,
            facts={
                "count": count,
                "newest_turn": latest.turn,
                "distance": age,
                "current_turn": current_turn,
                "tool_results_this_turn": results,
            },
            message=(
                f"the final answer states {count} value(s) the run can ground, and every one "
                f"of them was last served in turn {latest.turn} or earlier — {age} turn(s) "
                f"before the turn being answered — while turn {current_turn}, the one being "
                f"answered, contributed none of them. {fetched}{CEILING} Nothing here "
                "blocked the answer, revised it or changed a byte of it."
            ),
        )
    )


def canary() -> Judgement:
    """The check run on its synthetic defect: turn 2 answers with turn 1's value and no tool
    result of its own."""
    history = [
        {"role": "user", "content": "canary: list the volumes"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "canary", "name": "canary_tool", "arguments": "{}"}],
        },
        {
            "role": "tool",
            "tool_call_id": "canary",
            "name": "canary_tool",
            "content": '[{"volume":"canary-vol-0001"}]',
        },
        {"role": "assistant", "content": "canary-vol-0001"},
        {"role": "user", "content": "canary: and now?"},
    ]
    index = EvidenceIndex.of(history)
    judged = judge_prior_turn(
        "Still canary-vol-0001.", index, index.current_turn, index.tool_results_this_turn
    )
    return dataclasses.replace(
        judged,
        findings=tuple(dataclasses.replace(f, synthetic=True) for f in judged.findings),
    )
