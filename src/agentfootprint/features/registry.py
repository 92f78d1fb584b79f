"""Every feature, found by module, and what derives from their declarations.

Each public module of :mod:`agentfootprint.features` exports ``FEATURE``; adding an option
is adding a module (and its test and docs row): nothing here lists features by name. From
the declarations come the option names and their checks, the chart for a configuration,
its stage budget, the ``run.open`` options record, the event kinds (and which are
recorded) and the state keys a redaction policy may not name.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.errors import UsageError
from agentfootprint.features.base import MISSING, Feature, OptionSpec, StageSpec, loggable
from agentfootprint.features.seed_options import SEED_OPTIONS, python_name
from agentfootprint.runtime.chart import Chart, Stage

__all__ = [
    "Seam",
    "all_features",
    "event_classes",
    "event_kinds",
    "live_only_kinds",
    "option_specs",
    "planned_options",
    "recorded_kinds",
    "resolve",
    "structure_keys",
]


@functools.cache
def all_features() -> tuple[Feature, ...]:
    """Every feature module's ``FEATURE``, in hook order (then by name)."""
    import agentfootprint.features as package

    found: list[Feature] = []
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


_NOT_FEATURES = frozenset({"base", "classifiers", "registry", "seed_options"})


def _check_unique(features: Iterable[Feature]) -> None:
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
def option_specs() -> dict[str, tuple[Feature, OptionSpec]]:
    """Every implemented option by Python name, with the feature that owns it."""
    return {o.name: (f, o) for f in all_features() for o in f.options}


@functools.cache
def planned_options() -> frozenset[str]:
    """Seed options (Python names) no feature implements yet: refused by name."""
    return frozenset(python_name(seed) for seed in SEED_OPTIONS) - set(option_specs())


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
    if name in planned_options():
        return UsageError(
            f"option {name!r}: this seed option is planned but not implemented yet; "
            "see docs/options.md",
            option=name,
        )
    close = difflib.get_close_matches(name, sorted(set(option_specs()) | planned_options()), n=1)
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
    return {name: spec.check(given.get(name, MISSING), given) for name, (_, spec) in specs.items()}


@dataclass(frozen=True, kw_only=True)
class Seam:
    """The features taking part in an agent with these options, and what derives from them."""

    options: Mapping[str, Any]
    features: tuple[Feature, ...]
    chart: Chart
    #: the most stage executions a run may make (more is a loop gone wrong)
    stage_budget: int
    projection: int
    model_stages: frozenset[str]
    #: the event kinds written to the log as ``event`` rows
    recorded_kinds: frozenset[str]
    #: each hook point's hooks, in order (computed once: the loop asks at every call)
    _hooks: Mapping[str, tuple[Any, ...]] = field(default_factory=dict, repr=False)
    #: what features cache across the agent's runs, by feature name: caches only, that
    #: revalidate what they find (nothing in it is evidence, nothing is replayed)
    caches: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, options: Mapping[str, Any], features: Iterable[Feature] | None = None) -> Seam:
        """The seam of ``options`` over every feature (or ``features``, in tests)."""
        candidates = all_features() if features is None else tuple(features)
        features = tuple(f for f in candidates if f.active(options))
        stages = [s for f in features for s in f.stages]
        chart, loop = _chart(stages, str(options.get("react_mode", "dynamic")))
        max_iterations = int(options.get("max_iterations", 1))
        return cls(
            options=options,
            features=features,
            chart=chart,
            stage_budget=loop * max_iterations + len(chart.stages),
            projection=max((f.projection for f in features), default=1),
            model_stages=frozenset(s.name for s in stages if s.calls_model),
            recorded_kinds=recorded_kinds(),
            _hooks={
                point: tuple(h for f in features if (h := getattr(f, point)) is not None)
                for point in _HOOK_POINTS
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

    def hooks(self, point: str) -> tuple[Any, ...]:
        """The hooks of active features at ``point`` (a Feature field name), in order."""
        return self._hooks[point]


_HOOK_POINTS = (
    "tool_result",
    "tool_result_noted",
    "unnote",
    "request_served",
    "reply_received",
    "stop_reason",
    "at_max_iterations",
    "turn_start",
    "tool_permission",
    "run_end",
)


def _chart(stages: list[StageSpec], react_mode: str) -> tuple[Chart, int]:
    """The chart from the declared stages, and how many stages one loop pass runs.

    start stages, then the iteration stages (classic: those run on the ``first`` pass only
    come first and are not looped back to), the route decider, and its branches: the
    tool stages loop back to the first iteration stage that runs every pass; each declared
    ``branch`` (stages of phase ``branch``, grouped by their ``branch`` name) runs once and
    leads to the final stages; the final stages end the walk.
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
    decider = route[0]
    order = [*phase("start"), *iteration]
    built: list[Stage] = []
    for index, spec in enumerate(order):
        following = order[index + 1].name if index + 1 < len(order) else decider.name
        built.append(_stage(spec, following))
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
    chains += [(chain, final[0].name) for _, chain in sorted(extra.items())]
    chains.append((final, None))
    for chain, end in chains:
        for index, spec in enumerate(chain):
            built.append(_stage(spec, chain[index + 1].name if index + 1 < len(chain) else end))
    loop = len(every) + 1 + len(tools)
    return Chart(built, entry=order[0].name), loop


def _stage(spec: StageSpec, following: str | None) -> Stage:
    return Stage(name=spec.name, fn=spec.fn, next=following, description=spec.description)
