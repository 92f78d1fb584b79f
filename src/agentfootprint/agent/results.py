"""What a run returns: :class:`RunResult`, and :class:`StoppedEarly` when the turn ended
before the model's final answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentfootprint.agent.pauses import Pending
from agentfootprint.runtime.artifacts import Presented
from agentfootprint.runtime.events import detached
from agentfootprint.runtime.observers import ObserverStats

__all__ = ["RunResult", "StoppedEarly"]


@dataclass(frozen=True, kw_only=True, slots=True)
class StoppedEarly:
    """Why a turn ended before the model gave a final answer."""

    reason: str
    iteration: int
    pending_tool_calls: int
    #: what the feature that stopped the turn added (e.g. a cost budget's spend)
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_state(cls, stopped: dict[str, Any]) -> StoppedEarly:
        core = ("reason", "iteration", "pending_tool_calls")
        return cls(
            **{k: stopped[k] for k in core},
            details={k: v for k, v in stopped.items() if k not in core},
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    """What ``run()`` returns."""

    answer: str
    run_id: str
    conversation_id: str
    parent_run_id: str | None
    iterations: int
    calls: int
    outcome: str
    stopped_early: StoppedEarly | None
    usage: dict[str, int]
    #: the question a paused run waits on (``outcome == "paused"``); answer it with
    #: ``agent.resume(result, answer)``
    pending: Pending | None = None
    #: the answer as ``output_type`` makes it (a dataclass or pydantic instance, a
    #: ``TypedDict``'s dict, a JSON Schema's JSON); None without ``output_type``, or when a
    #: turn that stopped early ended on an answer that does not fit it
    output: Any = None
    #: what the delivery of the run's events to listeners did (never recorded)
    observer_stats: ObserverStats | None = None
    #: what each stage read, ``{stage_run: {key: ReadMarker or value}}`` (``read_tracking``;
    #: never recorded; None when ``"off"``)
    stage_reads: dict[str, dict[str, Any]] | None = field(default=None, repr=False)
    #: the artifacts the model showed the person with the ``present`` tool, bytes included
    #: (``artifacts``; never recorded beyond their tickets; empty in a replay)
    presented: tuple[Presented, ...] = ()
    #: the answer's standing as this run assessed it, ``{"standing", "reasons", "checked"}``
    #: (and ``"line"`` with ``standing_line``): ``answer_layer``; None when not armed
    assessment: dict[str, Any] | None = None
    #: the run's final state as the agent keeps it (shared with a run continued from it)
    _final: dict[str, Any] = field(repr=False, compare=False)
    _copy: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def state(self) -> dict[str, Any]:
        """The final state (never redacted): a detached copy, made when first read, so
        that editing it cannot change what a run continued from this one is served (the
        run's own state is shared with the agent's continuation, and hashed by identity)."""
        if self._copy is None:
            object.__setattr__(self, "_copy", detached(self._final))
        assert self._copy is not None
        return self._copy
