"""Every feature, found by module, and what derives from their declarations.

Each public module of :mod:`agentfootprint.features` exports ``FEATURE``; adding an option
is adding a module (and its test and docs row): nothing here lists features by name. From
the declarations come the option names and their checks, the chart for a configuration,
its stage budget, the ``run.open`` options record, the event kinds (and which are
recorded) and the state keys a redaction policy may not name.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast

from agentfootprint.errors import UsageError
from agentfootprint.features.base import (
    HOOK_POINTS,
    MISSING,
    Feature,
    Given,
    HookContext,
    OptionSpec,
    Part,
    StageSpec,
    UndeclaredNeedError,
    loggable,
    takes_part,
)
from agentfootprint.runtime.chart import Chart, Stage
from agentfootprint.runtime.seam import RunEndHook

if TYPE_CHECKING:
    from agentfootprint.runtime.run import StageContext

__all__ = [
    "Seam",
    "all_features",
    "event_classes",
    "event_kinds",
    "hooks_at",
    "live_only_kinds",
    "option_specs",
    "recorded_kinds",
    "resolve",
    "structure_keys",
]


@functools.cache
def all_features() -> tuple[Feature[Any], ...]:
    """Every feature module's ``FEATURE``, in hook order (then by name)."""
    import agentfootprint.features as package

    found: list[Feature[Any]] = []
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("_") or module.name in _NOT_FEATURES:
            continue
        loaded = importlib.import_module(f"{package.__name__}.{module.name}")
        feature = getattr(loaded, "FEATURE", None)
        if not isinstance(feature, Feature):
            raise RuntimeError(f"features module {module.name!r} exports no FEATURE")
        found.append(feature)
    found.sort(key=lambda f: (f.order, f.name))
    _check_unique(found)
    return tuple(found)


_NOT_FEATURES = frozenset({"base", "classifiers", "findings_ledger", "registry", "seed_options"})


def _check_unique(features: Iterable[Feature[Any]]) -> None:
    owners: dict[tuple[str, str], str] = {}
    for feature in features:
        names = [("option", o.name) for o in feature.options]
        names += [("stage", s.name) for s in feature.stages]
        names += [("state key", k.name) for k in feature.state_keys]
        names += [("event", e.kind) for e in feature.events]
        for item in names:
            if item in owners:
                raise RuntimeError(
                    f"{item[0]} {item[1]!r} is declared by both {owners[item]!r} and "
                    f"{feature.name!r}"
                )
            owners[item] = feature.name


@functools.cache
def option_specs() -> dict[str, tuple[Feature[Any], OptionSpec]]:
    """Every implemented option by Python name, with the feature that owns it."""
    return {o.name: (f, o) for f in all_features() for o in f.options}


@functools.cache
def event_classes() -> tuple[type[Any], ...]:
    return tuple(e for f in all_features() for e in f.events)


@functools.cache
def event_kinds() -> frozenset[str]:
    """Every event kind a feature declares."""
    return frozenset(cls.kind for cls in event_classes())


@functools.cache
def recorded_kinds() -> frozenset[str]:
    """Event kinds written to the log as ``event`` rows (declared by their features)."""
    return frozenset(e.kind for f in all_features() for e in f.recorded_events)


@functools.cache
def live_only_kinds() -> frozenset[str]:
    """Recorded event kinds a replay does not reproduce (what only a live run does outside
    the process), declared by their features."""
    return frozenset(e.kind for f in all_features() for e in f.live_only_events)


@functools.cache
def structure_keys() -> frozenset[str]:
    """State keys the loop reads as structure: a redaction policy may not name them."""
    return frozenset(k.name for f in all_features() for k in f.state_keys if k.structure)


def _refuse_unknown(name: str) -> UsageError:
    close = difflib.get_close_matches(name, sorted(option_specs()), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return UsageError(f"unknown option {name!r}{hint}", option=name)


#: options naming this process's resources (a file path may be any bytes the file system
#: takes): never in the log or a request
_LOCAL = frozenset({"store", "disclosures"})


def resolve(given: Mapping[str, Any]) -> dict[str, Any]:
    """Every option checked by its feature, in declaration order: resolved values by name."""
    specs = option_specs()
    for name in given:
        if name not in specs:
            raise _refuse_unknown(name)
    for name, value in given.items():
        if name not in _LOCAL:
            loggable(name, value)  # what no log can hold, before any check reads it
    resolved: dict[str, Any] = {}
    pending: set[str] = set()

    def one(name: str, reader: Feature[Any] | None = None) -> Any:
        """``name`` resolved (first, if need be); ``reader``: the feature of the check
        reading it, which must own it or declare its owner in ``needs``."""
        owner, spec = specs[name]
        if reader is not None and owner.name != reader.name and owner.name not in reader.needs:
            raise UndeclaredNeedError(reader.name, owner.name)
        if name not in resolved:
            if name in pending:
                raise RuntimeError(f"option {name!r} needs itself (a cycle of needs)")
            pending.add(name)
            resolved[name] = spec.check(given.get(name, MISSING), Given(given, owner, one))
        return resolved[name]

    resolved = {name: one(name) for name in specs}
    offered = [
        tool
        for feature in all_features()
        if feature.library_tools is not None and feature.active(resolved)
        for tool in feature.library_tools(resolved)
        if tool not in resolved["tools"]  # (an agent made with another agent's tools)
    ]
    if offered:  # (each feature refuses, in its check, a tool of the agent's by that name)
        resolved["tools"] = (*resolved["tools"], *offered)
    return resolved


@dataclass(frozen=True, kw_only=True)
class Seam:
    """The features taking part in an agent with these options, and what derives from them."""

    options: Mapping[str, Any]
    features: tuple[Feature[Any], ...]
    chart: Chart
    #: the most stage executions a run may make (more is a loop gone wrong)
    stage_budget: int
    projection: int
    #: a feature taking part may pause a run (its runs record log format v5)
    may_pause: bool
    model_stages: frozenset[str]
    #: the event kinds written to the log as ``event`` rows
    recorded_kinds: frozenset[str]
    #: each hook point's hooks bound to their features' contexts, in order (computed once:
    #: the loop asks at every call)
    _points: Mapping[Callable[..., Any], tuple[Callable[..., Any], ...]] = field(
        default_factory=dict, repr=False
    )
    #: what features cache across the agent's runs, by feature name: caches only, that
    #: revalidate what they find (nothing in it is evidence, nothing is replayed)
    caches: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls, options: Mapping[str, Any], features: Iterable[Feature[Any]] | None = None
    ) -> Seam:
        """The seam of ``options`` over every feature (or ``features``, in tests)."""
        candidates = all_features() if features is None else tuple(features)
        features = tuple(f for f in candidates if f.active(options))
        parts = _parts(features, options)
        may_pause = any(f.pauses for f in features)
        stages = [
            _declaring(s, parts[f.name])
            for f in features
            for s in f.stages
            if may_pause or s.phase != "resume"  # a run that cannot pause is never resumed
        ]
        chart, loop = _chart(stages, str(options.get("react_mode", "dynamic")))
        max_iterations = int(options.get("max_iterations", 1))
        return cls(
            options=options,
            features=features,
            chart=chart,
            stage_budget=loop * max_iterations + len(chart.stages),
            projection=max((f.projection for f in features), default=1),
            may_pause=may_pause,
            model_stages=frozenset(s.name for s in stages if s.calls_model),
            recorded_kinds=recorded_kinds(),
            _points={
                point: tuple(
                    _bound(getattr(f, point.__name__), parts[f.name])
                    for f in features
                    if takes_part(f, point)
                )
                for point in HOOK_POINTS
            },
        )

    def run_open_options(self) -> dict[str, Any]:
        """The options ``run.open`` records: those declared recorded and set (a copy)."""
        cached = self.caches.get("run.open")
        if cached is None:
            recorded = {}
            for feature in self.features:
                for spec in feature.options:
                    value = self.options.get(spec.name)
                    if spec.recorded and value is not None:
                        recorded[spec.name] = value if spec.record is None else spec.record(value)
            cached = self.caches["run.open"] = dict(sorted(recorded.items()))
        return dict(cached)

    def at(
        self, point: Callable[Concatenate[Feature[Any], HookContext[Any], P], R]
    ) -> tuple[Callable[Concatenate[StageContext, P], R], ...]:
        """The hooks of the active features taking part in ``point`` (a :class:`Feature`
        hook method, e.g. ``Feature.run_end``), in order, each bound to its feature's own
        :class:`HookContext`: called with the stage's context and the point's arguments."""
        hooks = self._points.get(point)
        if hooks is None:
            raise TypeError(f"{point!r} is not a hook point of Feature")
        return cast("tuple[Callable[Concatenate[StageContext, P], R], ...]", hooks)

    @property
    def run_end_hooks(self) -> tuple[RunEndHook, ...]:
        """The ``run_end`` hooks (the one point the runtime itself calls)."""
        return self.at(Feature.run_end)


P = ParamSpec("P")
R = TypeVar("R")


def hooks_at(
    ctx: StageContext, point: Callable[Concatenate[Feature[Any], HookContext[Any], P], R]
) -> tuple[Callable[Concatenate[StageContext, P], R], ...]:
    """The hooks at ``point`` of the run ``ctx`` belongs to (see :meth:`Seam.at`)."""
    seam = ctx.run.seam
    if not isinstance(seam, Seam):
        raise TypeError(f"the run's seam is {type(seam).__name__}, not the registry's Seam")
    return seam.at(point)


def _parts(features: tuple[Feature[Any], ...], options: Mapping[str, Any]) -> dict[str, Part]:
    """Each active feature as its hooks see it, with the features it needs (which must be
    active too: a feature that needs an inactive one is a bug in its ``active``)."""
    parts = {
        f.name: Part(feature=f, settings=f.settings(options), ports=frozenset(f.ports))
        for f in features
    }
    for part in parts.values():
        for name in part.feature.needs:
            if name not in parts:
                raise RuntimeError(
                    f"feature {part.feature.name!r} needs feature {name!r}, which does not "
                    "take part with these options"
                )
            part.needs[name] = parts[name]
    return parts


def _bound(method: Callable[..., R], part: Part) -> Callable[..., R]:
    """``method`` (a feature's hook) called with its own context over the stage's."""

    def hook(ctx: StageContext, *args: Any) -> R:
        return method(HookContext(part, ctx), *args)

    return hook


def _declaring(spec: StageSpec, part: Part) -> StageSpec:
    """``spec`` whose function runs with its feature's name and declared ports set on the
    stage's context (a port it did not declare raises at its use)."""
    fn, name, ports = spec.fn, part.feature.name, part.ports

    def stage(ctx: StageContext) -> Awaitable[str | None]:
        ctx.feature, ctx.declared = name, ports
        return fn(ctx)

    return dataclasses.replace(spec, fn=stage)


#: the group ``react_mode="dynamic-grouped"`` describes each model turn's stages in
LLM_CALL_GROUP = "llm-call"


def _chart(stages: list[StageSpec], react_mode: str) -> tuple[Chart, int]:
    """The chart from the declared stages, and how many stages one loop pass runs.

    start stages, then the iteration stages (classic: those run on the ``first`` pass only
    come first and are not looped back to), the route decider, and its branches: the
    tool stages loop back to the first iteration stage that runs every pass; each declared
    ``branch`` (stages of phase ``branch``, grouped by their ``branch`` name) runs once and
    leads to the final stages (or, its stages declaring ``loops``, back where the tool stages
    do); the final stages end the walk; the ``resume`` stages are a second entry (a run that
    answers a pause), leading to the tool stages.
    """

    def phase(name: str) -> list[StageSpec]:
        return sorted((s for s in stages if s.phase == name), key=lambda s: s.order)

    iteration = phase("iteration")
    if react_mode == "classic":
        firsts = [s for s in iteration if s.classic == "first"]
        every = [s for s in iteration if s.classic == "every"]
        iteration = firsts + every
    else:
        every = iteration
    route = phase("route")
    tools, final = phase("tool"), phase("final")
    if len(route) != 1 or not every or not tools or not final:
        raise UsageError("the features declare no complete loop (iteration, route, tool, final)")
    extra: dict[str, list[StageSpec]] = {}
    for spec in phase("branch"):
        if not spec.branch or spec.branch in ("tool-calls", "final"):
            raise UsageError(
                f"stage {spec.name!r} declares route branch {spec.branch!r}; a branch stage "
                "names a branch of its own (not 'tool-calls' or 'final')"
            )
        extra.setdefault(spec.branch, []).append(spec)
    for name, chain in extra.items():
        if len({s.loops for s in chain}) > 1:
            raise UsageError(f"the stages of branch {name!r} disagree on loops=")
    decider = route[0]
    order = [*phase("start"), *iteration]
    built: list[Stage] = []
    # dynamic-grouped: the chart of dynamic, its model turn (the iteration stages) described
    # as one llm-call group; the walk and the rows are dynamic's
    grouped = {s.name for s in iteration} if react_mode == "dynamic-grouped" else set()
    for index, spec in enumerate(order):
        following = order[index + 1].name if index + 1 < len(order) else decider.name
        stage = _stage(spec, following)
        if spec.name in grouped:
            stage = dataclasses.replace(stage, group=LLM_CALL_GROUP)
        built.append(stage)
    built.append(
        Stage(
            name=decider.name,
            fn=decider.fn,
            kind="decider",
            branches={
                "tool-calls": tools[0].name,
                "final": final[0].name,
                **{name: chain[0].name for name, chain in sorted(extra.items())},
            },
            description=decider.description,
        )
    )
    chains: list[tuple[list[StageSpec], str | None]] = [(tools, every[0].name)]
    chains += [
        (chain, every[0].name if chain[0].loops else final[0].name)
        for _, chain in sorted(extra.items())
    ]
    chains.append((final, None))
    resume = phase("resume")  # a resume answers the question, then finishes the tool batch
    chains.append((resume, tools[0].name))
    for chain, end in chains:
        for index, spec in enumerate(chain):
            built.append(_stage(spec, chain[index + 1].name if index + 1 < len(chain) else end))
    # a pass goes through the tool stages or a branch that loops, whichever is longer
    looping = [len(chain) for chain in extra.values() if chain[0].loops]
    loop = len(every) + 1 + max([len(tools), *looping])
    entry = order[0].name
    return Chart(built, entry=entry, resume=resume[0].name if resume else None), loop


def _stage(spec: StageSpec, following: str | None) -> Stage:
    return Stage(name=spec.name, fn=spec.fn, next=following, description=spec.description)
