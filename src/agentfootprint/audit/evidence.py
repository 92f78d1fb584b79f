"""Where each value of a run's final answer was served: the tool results that carried it.

:func:`evidence` verifies the run first (and its ancestors), reads its final state, takes the
values the final answer states (:func:`agentfootprint.integrity.evidence.answer_values`: a
number of four digits or more, an identifier with a digit, a quoted one-token value) and
looks each up, token-exact, in every tool result of the conversation's history
(:class:`~agentfootprint.integrity.evidence.EvidenceIndex`, the same index the
``prior-turn-evidence`` check reads). Each place names the tool, the call id, the turn, the
history index, and the run and commit that appended the result (element-level provenance,
:func:`agentfootprint.audit.provenance.why` of ``history``): a continued conversation's
earlier results are its ancestors'. A value no result carries is listed with no place ("not
found in any result"): the user may have given it, or the model may have written it; this
says where a value was served, never whether the answer is right.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentfootprint.audit.provenance import HISTORY, why
from agentfootprint.audit.read import RunReader
from agentfootprint.audit.sources import check_run_id, naming_run, opened
from agentfootprint.errors import UsageError
from agentfootprint.integrity.evidence import EvidenceIndex, answer_values
from agentfootprint.verify.verifier import RowSource, shared_verifier

__all__ = ["EvidenceLine", "Served", "evidence"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Served:
    """One tool result that carried a value."""

    tool: str | None  #: the tool's name (None: not a string in the record)
    tool_call_id: str | None
    turn: int  #: the conversation's turn it was served in (user messages at or before it)
    history_index: int
    run_id: str | None  #: the run that appended it to the history (None: not known)
    commit: int | None  #: that run's commit that appended it

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "tool_call_id": self.tool_call_id,
            "turn": self.turn,
            "history_index": self.history_index,
            "run_id": self.run_id,
            "commit": self.commit,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class EvidenceLine:
    """One value of the final answer and where it was served (none: in no result)."""

    value: str  #: normalized (lowercase, ``1,240`` as ``1240``)
    answer_turn: int  #: the turn the final answer answers (the same on every line)
    served: tuple[Served, ...]

    @property
    def newest_turn(self) -> int | None:
        """The newest turn that served it (None: not found in any result)."""
        return max((s.turn for s in self.served), default=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "answer_turn": self.answer_turn,
            "served": [s.to_json() for s in self.served],
        }


def evidence(source: RowSource | str | os.PathLike[str], run_id: str) -> list[EvidenceLine]:
    """Each value of ``run_id``'s final answer, in the order the answer states them, with
    the tool results that served it. ``source``: a store or bundle, or the path of one
    (opened read-only for this call). Raises
    :class:`~agentfootprint.errors.VerificationError` when the run does not verify, and
    :class:`~agentfootprint.errors.UsageError` when it has no final answer in text (it
    failed, paused or stopped before one; or the answer is redacted)."""
    check_run_id(run_id)
    with opened(source) as rows, naming_run():
        verifier = shared_verifier(rows)
        verifier.verify(run_id)  # ancestors first; a failure raises
        state = RunReader(rows, verifier=verifier).final_state(run_id)
        answer = state.get("final_answer")
        if answer is None:
            raise UsageError(
                f"run_id: run {run_id} has no final answer (it failed, paused or stopped "
                "before one)",
                option="run_id",
            )
        if not isinstance(answer, str):
            raise UsageError(
                f"run_id: the final answer of run {run_id} is not text in the log (redacted: "
                "a commitment stands in for it)",
                option="run_id",
            )
        history = state.get(HISTORY)
        history = history if isinstance(history, list) else []
        index = EvidenceIndex.of(history)
        appended: dict[int, tuple[str, int]] = {}
        if history:
            messages = why(rows, run_id, HISTORY, verifier=verifier).messages or ()
            appended = {m.index: (m.run_id, m.commit) for m in messages}
    return [
        EvidenceLine(
            value=value,
            answer_turn=index.current_turn,
            served=tuple(
                Served(
                    tool=place.tool,
                    tool_call_id=place.tool_call_id,
                    turn=place.turn,
                    history_index=place.history_index,
                    run_id=_where(appended, place.history_index)[0],
                    commit=_where(appended, place.history_index)[1],
                )
                for place in index.places(value)
            ),
        )
        for value in answer_values(answer)
    ]


def _where(appended: Mapping[int, tuple[str, int]], index: int) -> tuple[str | None, int | None]:
    found = appended.get(index)
    return (None, None) if found is None else found
