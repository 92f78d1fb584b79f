"""``structure_recorders``: the agent's chart told, stage by stage, to objects of the user's.

Each recorder is an object with ``on_stage_added(stage)`` and, optionally,
``on_edge_added(edge)`` and ``on_group(group)``. At construction, once, the agent tells
every recorder its chart (the one ``agent.chart.describe()`` gives, from the stages the
features declare): for each stage in ``describe()`` order, a :class:`StageAdded`, then one
:class:`EdgeAdded` per place it leads (a linear stage's ``next``; a decider's branches, in
their order); then, under ``react_mode="dynamic-grouped"``, one :class:`GroupAdded` per group
(``"llm-call"``: each model turn's stages). Each event goes to every recorder in turn.

The values are detached, frozen records built from ``describe()``: a recorder cannot change
the chart. The seed's ``onSubflowMounted`` has no counterpart: this chart has no subflows
(its slots are stages of the one chart, all told above). Build-time code fails loudly: a
recorder that raises (or returns an awaitable: the calls are synchronous) is refused at
construction naming the option, the error chained. Nothing is recorded: the option is not in
``run.open`` and the rows are those of the agent without it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

from agentfootprint.features.base import MISSING, Feature, Given, Options, OptionSpec, refuse
from agentfootprint.runtime.chart import Chart

__all__ = [
    "FEATURE",
    "OPTION",
    "EdgeAdded",
    "GroupAdded",
    "StageAdded",
    "StructureRecorder",
    "announce",
    "structure_of",
]

OPTION = "structure_recorders"
#: the methods a recorder may have: the first is required
_METHODS = ("on_stage_added", "on_edge_added", "on_group")


@dataclass(frozen=True, kw_only=True, slots=True)
class StageAdded:
    """One stage of the chart, as ``chart.describe()`` gives it."""

    name: str
    kind: Literal["linear", "decider"]
    #: where a linear stage goes (None: the run ends there, or a decider)
    next: str | None = None
    #: a decider's branches: its result -> the stage it leads to (read-only; empty: linear)
    branches: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    description: str = ""
    #: the group it is described in (``react_mode="dynamic-grouped"``: ``"llm-call"``)
    group: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class EdgeAdded:
    """One place a stage leads to: ``branch`` names a decider's branch (None: linear)."""

    source: str
    target: str
    branch: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupAdded:
    """A group of stages the chart is described in, its stages in chart order."""

    name: str
    stages: tuple[str, ...]


class StructureRecorder(Protocol):
    """A build-time recorder. ``on_edge_added(edge: EdgeAdded)`` and
    ``on_group(group: GroupAdded)`` are optional: a recorder without them is not told."""

    def on_stage_added(self, stage: StageAdded) -> object: ...


def _check(value: Any, given: Given) -> tuple[Any, ...] | None:
    if value is MISSING or value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise refuse(
            OPTION,
            "must be a list of recorders (objects with on_stage_added(stage)), got "
            f"{type(value).__name__}",
        )
    for index, recorder in enumerate(value):
        for method in _METHODS:
            found = getattr(recorder, method, None)
            required = method == _METHODS[0]
            if (found is None and required) or (found is not None and not callable(found)):
                raise refuse(
                    OPTION,
                    f"recorder {index} ({type(recorder).__name__}) has no callable {method}; "
                    "a recorder has on_stage_added(stage) and, optionally, "
                    "on_edge_added(edge) and on_group(group)",
                )
    return tuple(value)  # the caller's list may change later; the agent's may not


def structure_of(
    chart: Chart,
) -> tuple[tuple[StageAdded, ...], tuple[EdgeAdded, ...], tuple[GroupAdded, ...]]:
    """The chart's stages, edges and groups, detached (built from ``chart.describe()``)."""
    stages: list[StageAdded] = []
    edges: list[EdgeAdded] = []
    groups: dict[str, list[str]] = {}
    for entry in chart.describe():
        name = entry["stage"]
        branches = dict(entry.get("branches", {}))
        stages.append(
            StageAdded(
                name=name,
                kind=entry["kind"],
                next=entry.get("next"),
                branches=MappingProxyType(branches),
                description=entry.get("description", ""),
                group=entry.get("group"),
            )
        )
        if entry["kind"] == "linear":
            if entry["next"] is not None:
                edges.append(EdgeAdded(source=name, target=entry["next"]))
        else:
            edges += [EdgeAdded(source=name, target=t, branch=b) for b, t in branches.items()]
        if entry.get("group") is not None:
            groups.setdefault(entry["group"], []).append(name)
    told = tuple(GroupAdded(name=g, stages=tuple(members)) for g, members in groups.items())
    return tuple(stages), tuple(edges), told


def announce(chart: Chart, options: Mapping[str, Any]) -> None:
    """Tell every recorder ``options`` holds the chart (nothing without the option)."""
    recorders: tuple[Any, ...] | None = options.get(OPTION)
    if not recorders:
        return
    stages, edges, groups = structure_of(chart)
    by_source: dict[str, list[EdgeAdded]] = {}
    for edge in edges:
        by_source.setdefault(edge.source, []).append(edge)
    for stage in stages:
        _tell(recorders, "on_stage_added", stage)
        for edge in by_source.get(stage.name, ()):
            _tell(recorders, "on_edge_added", edge)
    for group in groups:
        _tell(recorders, "on_group", group)


def _tell(recorders: tuple[Any, ...], method: str, value: object) -> None:
    for index, recorder in enumerate(recorders):
        call = getattr(recorder, method, None)
        if call is None:
            continue
        try:
            answer = call(value)
        except Exception as exc:
            raise refuse(
                OPTION,
                f"recorder {index} ({type(recorder).__name__}) raised {type(exc).__name__} "
                f"in {method}: {exc}. A recorder runs at construction: fix it or leave it out",
            ) from exc
        if inspect.isawaitable(answer):
            if inspect.iscoroutine(answer):
                answer.close()  # never awaited: no "was never awaited" warning
            raise refuse(
                OPTION,
                f"recorder {index} ({type(recorder).__name__}).{method} returned an awaitable; "
                "recorders are called at construction, synchronously: use a plain method",
            )


FEATURE: Feature[Options] = Feature(
    name="structure-recorders",
    summary="the chart told to the user's recorders at construction (nothing recorded)",
    order=150,
    options=(
        OptionSpec(
            name=OPTION,
            seed="structureRecorders",
            check=_check,
            summary="the chart's stages, edges and groups told at construction",
        ),
    ),
    active=lambda options: bool(options.get(OPTION)),
)
