"""``answer_layer``: the answer's standing, folded from the run's committed record.

Armed (``answer_layer=True``, or ``{"standing_line": bool}``), the head of the final branch,
the stage ``assess-answer`` (before ``prepare-final``), runs one pure fold over the committed
state (:func:`agentfootprint.integrity.assessment.assess`: the reasons each committed row of
this turn supports, the checks that had something to read, the standing ``ask``,
``not-sure``, ``consistent`` or ``not-assessed``; never ``known``, which needs an answer
validation this project does not have). It commits ``answer_assessment`` (``{standing,
reasons, checked}``, and the ``line`` with ``standing_line``) and records one
``agentfootprint.answer.assessed`` ``{standing, reasons, checked}`` (names, never a value).
A run that pauses is assessed at its end (the ``run_end`` hook, seeing ``ctx.pausing``), in
the commit that pauses it: standing ``ask``.

"This turn" is what the run appended: the lengths of the growing lists at the run's start
are kept in run memory at the turn's start (the ``turn_start`` hook) or at a resume (the
``resumed`` hook), read from the state as the log holds it, so ``agentfootprint assess``
folds the same from the parent's final state. The in-run standing IS the read-after
standing: :func:`agentfootprint.audit.assessment.assess_run` checks it on the log.

``standing_line=True`` appends the line to the final answer (``final_answer``, the answer
the seal covers; the history keeps the model's own words): refused beside ``output_type``,
whose answer is JSON. Unarmed, nothing runs and a run records the same rows as without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    OptionSpec,
    StageSpec,
    StateKey,
    refuse,
)
from agentfootprint.integrity.assessment import assess, recorded_form, since_of
from agentfootprint.integrity.reading import READINGS, Reading, kept_evidence
from agentfootprint.runtime.events import AgentEvent, detached
from agentfootprint.runtime.run import StageContext
from agentfootprint.runtime.scope import Scope

__all__ = ["FEATURE", "KEY", "OPTION", "STAGE", "AnswerAssessed", "assessment_of"]

OPTION = "answer_layer"
#: the state key of the run's assessment
KEY = "answer_assessment"
#: the stage at the head of the final branch
STAGE = "assess-answer"
NAME = "answer-layer"


@dataclass(frozen=True, kw_only=True)
class AnswerAssessed(AgentEvent):
    """The answer's standing, the reasons that fired and the checks that ran (names only:
    never a value of the answer or of a call)."""

    kind: ClassVar[str] = "agentfootprint.answer.assessed"
    standing: str
    reasons: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AnswerSettings:
    standing_line: bool


@dataclass(slots=True)
class _Turn:
    """What the layer keeps for the run: where its turn begins, and whether it assessed."""

    since: dict[str, int] | None = None
    assessed: bool = False
    #: the agent's readings of its conversations (an agent cache: the evidence index grows
    #: with the history instead of being built again each turn), and this run's conversation
    readings: dict[str, Reading] = field(default_factory=dict)
    conversation: str = ""


def _answer_layer(value: Any, given: Mapping[str, Any]) -> bool | dict[str, bool] | None:
    """True or ``{"standing_line": bool}`` when armed (recorded in ``run.open.options``);
    None when off (not recorded)."""
    if value is MISSING or value is None or value is False:
        return None
    resolved: bool | dict[str, bool]
    if value is True:
        resolved, line = True, False
    elif isinstance(value, Mapping):
        unknown = sorted(repr(k) for k in value if k != "standing_line")
        if unknown:
            raise refuse(
                OPTION,
                f"unknown member {unknown[0]}: the only member is 'standing_line' (True or False)",
            )
        line = value.get("standing_line", False)
        if not isinstance(line, bool):
            raise refuse(OPTION, f"standing_line must be True or False, got {line!r}")
        resolved = {"standing_line": line}
    else:
        raise refuse(
            OPTION, f"must be True, False or {{'standing_line': True | False}}, got {value!r}"
        )
    if line and given.get("output_type") not in (None, MISSING):
        raise refuse(
            OPTION,
            "{'standing_line': True} appends a line to a prose answer, and output_type asks "
            "for a structured one (JSON the line would break): give answer_layer=True, or "
            "drop output_type",
        )
    return resolved


def _standing_line(options: Mapping[str, Any]) -> bool:
    value = options.get(OPTION)
    return isinstance(value, Mapping) and value.get("standing_line") is True


def _begin(ctx: HookContext[AnswerSettings]) -> None:
    """The turn starts (or a resume enters): where its lists begin, from the state the run
    started from as the log holds it (the same state ``assess_run`` reads)."""
    turn = ctx.memory(_Turn)
    turn.since = since_of(ctx.recorded_state)
    turn.assessed = False
    turn.readings = ctx.shared_cache(READINGS, dict)
    turn.conversation = ctx.conversation_id


async def _file(
    scope: Scope, emit: Any, run_id: str, turn: _Turn | None, standing_line: bool
) -> None:
    """Fold, commit and record (in the commit of the stage ``scope`` belongs to)."""
    if turn is None or turn.since is None:
        raise RuntimeError("the answer layer assessed a run whose start it did not see")
    state = _Reading(scope)
    folded = assess(
        state,
        turn.since,
        lambda: kept_evidence(turn.readings, turn.conversation, state.get("history") or []),
    )
    scope.set(KEY, recorded_form(folded, standing_line))
    await emit(
        AnswerAssessed(
            run_id=run_id,
            standing=folded["standing"],
            reasons=list(folded["reasons"]),
            checked=list(folded["checked"]),
        )
    )
    turn.assessed = True


class _Reading(Mapping[str, Any]):
    """The stage's state as the fold reads it: by key, through the scope (this stage's own
    writes included, each read tracked), never iterated."""

    __slots__ = ("_scope",)

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def __getitem__(self, key: str) -> Any:
        missing = object()
        value = self._scope.get(key, missing)
        if value is missing:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self._scope.get(key, default)

    def __iter__(self) -> Any:
        return iter(())  # the fold reads by key only

    def __len__(self) -> int:
        return 0


async def assess_answer(ctx: StageContext) -> None:
    """The head of the final branch: the answer's standing, committed and recorded."""
    turn = ctx.run_memory.get(NAME)
    await _file(
        ctx.scope,
        ctx.emit,
        ctx.run_id,
        turn if isinstance(turn, _Turn) else None,
        _standing_line(ctx.config.options),
    )


def assessment_of(run_memory: Mapping[str, Any], state: Mapping[str, Any]) -> dict[str, Any] | None:
    """``RunResult.assessment``: the run's ``answer_assessment`` when this run assessed its
    answer (a detached copy), else None (unarmed, or a state inherited from a parent)."""
    turn = run_memory.get(NAME)
    if not isinstance(turn, _Turn) or not turn.assessed:
        return None
    found = state.get(KEY)
    return detached(found) if isinstance(found, dict) else None


class _AnswerLayer(Feature[AnswerSettings]):
    def settings(self, options: Mapping[str, Any]) -> AnswerSettings:
        return AnswerSettings(standing_line=_standing_line(options))

    async def turn_start(self, ctx: HookContext[AnswerSettings]) -> None:
        _begin(ctx)

    async def resumed(self, ctx: HookContext[AnswerSettings]) -> None:
        _begin(ctx)

    async def run_end(self, ctx: HookContext[AnswerSettings], error: BaseException | None) -> None:
        if error is None and ctx.pausing:  # the final branch is never reached: assess here
            await _file(
                ctx.scope, ctx.emit, ctx.run_id, ctx.memory(_Turn), ctx.options.standing_line
            )


FEATURE = _AnswerLayer(
    name=NAME,
    summary="the answer's standing, folded from the committed record",
    # late: a paused run is assessed after the other end-of-run hooks wrote what they write
    order=190,
    options=(
        OptionSpec(
            name=OPTION,
            seed="answerLayer",
            check=_answer_layer,
            recorded=True,
            summary="the answer's standing from the record (True or {'standing_line': bool})",
        ),
    ),
    stages=(
        StageSpec(
            name=STAGE,
            fn=assess_answer,
            phase="final",
            order=-10,  # before prepare-final (0): its standing line reads the assessment
            description="fold the answer's standing from the committed record",
        ),
    ),
    state_keys=(
        StateKey(name=KEY, summary="the answer's standing, reasons and checks (and line)"),
    ),
    events=(AnswerAssessed,),
    recorded_events=(AnswerAssessed,),
    active=lambda options: options.get(OPTION) is not None,
)
