"""The answer's standing, folded after the fact from a verified log: any run, armed or not.

:func:`assess_run` verifies the run (and its ancestors), takes the state it started from (its
parent's final state, or nothing) and the state it ended with, and runs the answer layer's
own fold over them (:func:`agentfootprint.integrity.assessment.assess`, with ``since`` the
starting state's list lengths). For a run recorded with ``answer_layer`` armed it also reads
what the run recorded (``answer_assessment`` and the ``agentfootprint.answer.assessed``
event) and says whether both equal the fold: the in-run standing IS the read-after standing,
checked on the log (``agentfootprint assess``, ``findings --recompute``).

The fold reads the log as it holds it: under a redaction policy, a value the policy committed
is a commitment here where the run read the value, so the two may differ
(:attr:`AssessmentReport.redacted` says the run was recorded under one).

Imports nothing above :mod:`agentfootprint.audit`'s own layer (the runtime and the features
stay out of the read side): the state key, the event kind and the option are named here as
the answer layer records them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agentfootprint.audit.sources import check_run_id, naming_run, opened
from agentfootprint.integrity.assessment import assess, line, recorded_form, since_of
from agentfootprint.logformat.canonical import parse
from agentfootprint.verify.verifier import RowSource, shared_verifier

__all__ = ["ASSESSED_EVENT", "ASSESSMENT_KEY", "AssessmentReport", "assess_run"]

#: the state key the answer layer commits (``features/answer_layer.py``'s ``KEY``)
ASSESSMENT_KEY: Final = "answer_assessment"
#: the event it records (``AnswerAssessed.kind``)
ASSESSED_EVENT: Final = "agentfootprint.answer.assessed"
#: the option that arms it, as ``run.open.options`` records it
_OPTION: Final = "answer_layer"
#: outcomes of a run that reached its answer or its pause: an armed one assessed it
_ASSESSING: Final = ("answered", "stopped_early", "paused")
_SUMMARY: Final = ("standing", "reasons", "checked")


@dataclass(frozen=True, kw_only=True, slots=True)
class AssessmentReport:
    """The fold over one verified run, and, when it was armed, what it recorded."""

    run_id: str
    #: how the run closed (None: it has no close)
    outcome: str | None
    #: the fold: ``{"standing", "reasons", "checked"}`` (and ``"assumed"``)
    assessment: dict[str, Any]
    #: the standing line of the fold
    line: str
    #: the run was recorded with ``answer_layer`` armed
    armed: bool
    #: ... with ``{"standing_line": True}``
    standing_line: bool
    #: the ``answer_assessment`` this run recorded (None: it recorded none)
    recorded: Any = None
    #: the payload of its ``agentfootprint.answer.assessed`` event (None: none)
    recorded_event: Mapping[str, Any] | None = field(default=None)
    #: the run was recorded under a redaction policy (see the module docstring)
    redacted: bool = False

    @property
    def expected(self) -> dict[str, Any]:
        """What an armed run records for this fold (``recorded_form``)."""
        return recorded_form(self.assessment, self.standing_line)

    @property
    def matches(self) -> bool | None:
        """Whether what the run recorded equals the fold: None when it was not armed, or
        armed and closed without reaching its answer (failed, or no close); False when an
        armed run that answered, stopped early or paused recorded none."""
        if not self.armed:
            return None
        if self.recorded_event is None:
            return False if self.outcome in _ASSESSING else None
        event = {k: self.recorded_event.get(k) for k in _SUMMARY}
        summary = {k: self.assessment.get(k) for k in _SUMMARY}
        return self.recorded == self.expected and event == summary

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "outcome": self.outcome,
            "standing": self.assessment.get("standing"),
            "reasons": list(self.assessment.get("reasons") or ()),
            "checked": list(self.assessment.get("checked") or ()),
            "line": self.line,
            "armed": self.armed,
            "redacted": self.redacted,
        }
        if self.armed:
            out["standing_line"] = self.standing_line
            out["recorded"] = self.recorded
            out["matches"] = self.matches
        return out


def assess_run(source: RowSource | str | os.PathLike[str], run_id: str) -> AssessmentReport:
    """The answer layer's fold over ``run_id``'s committed state (see the module docstring).
    ``source``: a store or bundle, or the path of one (opened read-only for this call).
    Raises :class:`~agentfootprint.errors.VerificationError` when the run (or an ancestor)
    does not verify, :class:`~agentfootprint.errors.UsageError` for an unknown run."""
    check_run_id(run_id)
    with opened(source) as rows, naming_run():
        verifier = shared_verifier(rows)
        verified = verifier.verify(run_id)
        parent = verified.ancestors[-1] if verified.ancestors else None
        start: Mapping[str, Any] = verifier.verify(parent).final_state if parent else {}
        final = verified.final_state
        options, event = _recorded(rows, run_id)
        folded = assess(final, since_of(start))
        layer = options.get(_OPTION) if isinstance(options, Mapping) else None
        armed = layer is not None
        standing_line = isinstance(layer, Mapping) and layer.get("standing_line") is True
        return AssessmentReport(
            run_id=run_id,
            outcome=None if verified.close is None else str(verified.close.get("outcome")),
            assessment=folded,
            line=line(folded),
            armed=armed,
            standing_line=standing_line,
            recorded=final.get(ASSESSMENT_KEY) if event is not None else None,
            recorded_event=event,
            redacted=verified.policy is not None,
        )


def _recorded(rows: RowSource, run_id: str) -> tuple[Any, Mapping[str, Any] | None]:
    """``run.open``'s options and the payload of the run's last ``answer.assessed`` event
    (None: it recorded none), from rows the verifier has just checked."""
    options: Any = None
    found: Mapping[str, Any] | None = None
    for row in rows.read(run_id):
        if row.type not in ("run.open", "event"):
            continue
        body = parse(row.body)
        if not isinstance(body, dict):
            continue
        if row.type == "run.open":
            options = body.get("options")
        elif body.get("name") == ASSESSED_EVENT:
            payload = body.get("payload")
            found = payload if isinstance(payload, dict) else {}
    return options, found
