"""A chart of named stages, built once per agent, and the engine that walks it.

A stage is linear (runs, then goes to ``next``) or a decider (returns the id of
one of its ``branches``). Every execution of a stage is one commit, recorded
even when it wrote nothing and even when it raised; a raising stage ends the
walk after its commit. ``next=None`` on a linear stage ends the run (a break).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentfootprint.errors import UsageError

__all__ = ["Chart", "Stage", "StageKind"]

StageKind = Literal["linear", "decider"]
StageFn = Callable[[Any], Awaitable[str | None]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Stage:
    """One named stage of the chart."""

    name: str
    fn: StageFn = field(repr=False)
    kind: StageKind = "linear"
    next: str | None = None
    branches: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    #: the group it is shown in (``react_mode="dynamic-grouped"``: ``"llm-call"``); a group
    #: is how the chart is described, never how it runs or what it records
    group: str | None = None


class Chart:
    """Stages by name, an entry, and a structural check done once at build."""

    def __init__(self, stages: list[Stage], entry: str, *, resume: str | None = None) -> None:
        self.stages: dict[str, Stage] = {}
        for stage in stages:
            if stage.name in self.stages:
                raise UsageError(f"chart has two stages named {stage.name!r}")
            self.stages[stage.name] = stage
        if entry not in self.stages:
            raise UsageError(f"chart entry {entry!r} is not a stage")
        self.entry = entry
        if resume is not None and resume not in self.stages:
            raise UsageError(f"chart resume entry {resume!r} is not a stage")
        #: where a run that answers a pause enters (None: no feature of the agent pauses)
        self.resume = resume
        for stage in stages:
            targets = [stage.next] if stage.kind == "linear" else list(stage.branches.values())
            for target in targets:
                if target is not None and target not in self.stages:
                    raise UsageError(f"stage {stage.name!r} leads to unknown stage {target!r}")
            if stage.kind == "decider" and not stage.branches:
                raise UsageError(f"decider {stage.name!r} has no branches")

    def describe(self) -> list[dict[str, Any]]:
        """The chart as data: each stage with its kind, where it leads and its group."""
        out = []
        for stage in self.stages.values():
            entry: dict[str, Any] = {"stage": stage.name, "kind": stage.kind}
            if stage.kind == "linear":
                entry["next"] = stage.next
            else:
                entry["branches"] = dict(stage.branches)
            if stage.description:
                entry["description"] = stage.description
            if stage.group is not None:
                entry["group"] = stage.group
            out.append(entry)
        return out

    def follow(self, stage: Stage, result: str | None) -> str | None:
        """The stage that runs after ``stage`` returned ``result``."""
        if stage.kind == "linear":
            return stage.next
        if result is None or result not in stage.branches:
            raise RuntimeError(
                f"decider {stage.name!r} chose {result!r}, not one of {sorted(stage.branches)}"
            )
        return stage.branches[result]
