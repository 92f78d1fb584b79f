"""The seam every option is built on: a :class:`Feature` declares what it adds to a run.

A feature declares the options it owns (name, default, check), the stages it adds and where
they sit in the chart, the state keys it owns, the events it emits, the ports it uses and
the features it needs. Everything else derives from the declarations
(:mod:`agentfootprint.features.registry`): option checking, the chart, the stage budget,
``run.open``'s options record, the recorded event kinds, the keys a redaction policy may not
name, and the status column of ``docs/options.md``.

Hooks are methods: :class:`Feature` has one typed method per hook point, doing nothing by
default; a feature subclasses it and overrides the points it takes part in (the registry
records once which do). Each hook gets a :class:`HookContext` of its own: its typed options
(:meth:`Feature.settings`), its run memory, ``emit``, the stage's scope, the ports it
declared (another raises :class:`~agentfootprint.runtime.ports.UndeclaredPortError` at
once) and the features it declared it needs (another raises :class:`UndeclaredNeedError`).
Adding a hook point is adding its method here, calling it where it happens
(``registry.hooks_at(ctx, Feature.<point>)``) and overriding it in the feature.

A feature may write scope from its own stages; it never builds or edits the request. Hooks
see the request only as the read-only served JSON, after it was built from committed state:
what the model is served stays a pure function of committed state.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, get_args

from agentfootprint.errors import ReplayDivergence, UsageError
from agentfootprint.logformat.canonical import MAX_SAFE_INT, has_lone_surrogate
from agentfootprint.runtime.ports import PortName
from agentfootprint.runtime.run import DeclaredPorts

if TYPE_CHECKING:
    from agentfootprint.runtime.events import AgentEvent
    from agentfootprint.runtime.provider import LLMResponse
    from agentfootprint.runtime.run import RunState, StageContext
    from agentfootprint.runtime.scope import Scope
    from agentfootprint.runtime.tools import Tool, ToolOutcome
    from agentfootprint.store.redaction import RedactionPolicy

__all__ = [
    "HOOK_POINTS",
    "MAX_COUNT",
    "MISSING",
    "Feature",
    "Given",
    "HookContext",
    "OptionSpec",
    "Options",
    "Part",
    "PauseRequest",
    "Phase",
    "StageSpec",
    "StateKey",
    "ToolResult",
    "UndeclaredNeedError",
    "boolean",
    "count",
    "hook_point",
    "loggable",
    "refuse",
    "takes_part",
    "unreadable_decision",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: The value of an option the caller did not give.
MISSING: Any = _Missing()

Phase = Literal["start", "iteration", "route", "tool", "branch", "final", "resume"]
#: resolved options by name (what a declaration without typed settings gives its hooks)
Options = Mapping[str, Any]
#: the type of a feature's typed options (:meth:`Feature.settings`), as its hooks read them
Settings = TypeVar("Settings")
#: the same, as a context gives it out (read only, so covariant: a helper that reads no
#: options takes any feature's ``HookContext[object]``)
Settings_co = TypeVar("Settings_co", covariant=True)
T = TypeVar("T")
_F = TypeVar("_F", bound=Callable[..., Any])
_HOOK_POINT = "__agentfootprint_hook_point__"
_PORT_NAMES: tuple[str, ...] = get_args(PortName)
_UNSET: Any = object()


def hook_point(fn: _F) -> _F:
    """Mark a :class:`Feature` method as a hook point (the registry finds them by it)."""
    setattr(fn, _HOOK_POINT, True)
    return fn


def unreadable_decision(ctx: HookContext[Any], kind: str, what: str) -> ReplayDivergence:
    """A replay's divergence when the original's recorded decision of ``kind`` holds no
    ``what`` it can read (the decider is never asked in a replay: nothing else answers)."""
    return ReplayDivergence(
        f"the original's {kind} event holds no {what} the replay can read (redacted or "
        "malformed); replay with the disclosure vault",
        call=max(ctx.calls - 1, 0),
        kind="redacted",
        run_id=ctx.run_id,
    )


def refuse(option: str, message: str) -> UsageError:
    """The error for a bad value of ``option`` (it names the option)."""
    return UsageError(f"option {option!r}: {message}", option=option)


#: the bound of every count an option takes (turns, tools, characters, tokens, a top N):
#: far past any real use, and within the 32-bit integer fields of vendors' APIs
MAX_COUNT = 2**31 - 1
#: how deep :func:`loggable` looks into an option's mappings and lists
_DEPTH = 32


def count(option: str, value: Any, what: str, *, low: int = 1, high: int = MAX_COUNT) -> int:
    """``value`` when it is a whole number from ``low`` to ``high`` (not a bool), else a
    :func:`refuse` naming ``what`` (``"max_tokens"``, ``"keep_last_turns"``) and the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(low)
        bounds = f"{kind} up to {high}" if kind else f"an integer from {low} to {high}"
        raise refuse(option, f"{what} must be {bounds}, got {value!r}")
    return value


def loggable(option: str, value: Any) -> None:
    """Refuse a value the log could not hold wherever it sits in the option (mappings,
    lists and tuples, to a depth): an integer beyond +-(2**53 - 1), a float that is not
    finite, a string or key that is not UTF-8 (a lone surrogate). Run before the option's
    own check, so no check has to print (or reason about) such a value."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:  # depth first: a value nested in itself reaches the depth bound at once
        path, item, depth = stack.pop()
        where = f"{option}{path}"
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, int):
            if not -MAX_SAFE_INT <= item <= MAX_SAFE_INT:
                raise refuse(
                    option,
                    f"{where} is an integer beyond +-(2**53 - 1), more than the log holds "
                    "(docs/log-format.md section 2)",
                )
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise refuse(option, f"{where} is {item!r}, not a finite number")
        elif isinstance(item, str):
            _utf8(option, where, item)
        elif isinstance(item, Mapping | list | tuple):
            if depth >= _DEPTH:
                raise refuse(option, f"{where} nests deeper than {_DEPTH} levels")
            if isinstance(item, Mapping):
                for key, member in item.items():
                    if isinstance(key, str):
                        _utf8(option, f"{where} (a key)", key)
                    step = f"[{key!r}]" if isinstance(key, str) else "[...]"
                    stack.append((path + step, member, depth + 1))
            else:
                stack.extend((f"{path}[{i}]", member, depth + 1) for i, member in enumerate(item))


def _utf8(option: str, where: str, text: str) -> None:
    if has_lone_surrogate(text):
        raise refuse(
            option, f"{where} holds a lone surrogate (not UTF-8), which the log cannot hold"
        )


#: ``check(value, given) -> resolved``: ``value`` is the caller's (or :data:`MISSING`),
#: ``given`` every option the caller passed (for rules spanning two options), and the
#: resolved options of the features its feature ``needs`` (:meth:`Given.resolved`). Raise
#: :func:`refuse` for a bad value.
OptionCheck = Callable[[Any, "Given"], Any]


def boolean(option: str, default: bool) -> OptionCheck:
    """The check of an on/off option: True or False, ``default`` when not given."""

    def check(value: Any, given: Mapping[str, Any]) -> bool:
        value = default if value is MISSING else value
        if not isinstance(value, bool):
            raise refuse(option, f"must be True or False, got {value!r}")
        return value

    return check


@dataclass(frozen=True, kw_only=True, slots=True)
class OptionSpec:
    """One option: its Python name, the seed's name, its check and whether it is recorded."""

    name: str
    seed: str | None  #: the seed's ``AgentOptions`` name (None: a Python-side argument)
    check: OptionCheck
    #: recorded in ``run.open.options`` (a value of None is left out: "not set")
    recorded: bool = False
    summary: str = ""  #: what it does here, in a few words (the docs table's column)
    #: the JSON ``run.open`` records of a resolved value that holds objects (a classifier,
    #: say); None: the resolved value is JSON and recorded as it is
    record: Callable[[Any], Any] | None = None


StageFn = Callable[["StageContext"], Awaitable[str | None]]


@dataclass(frozen=True, kw_only=True, slots=True)
class StageSpec:
    """A stage a feature adds, and where it sits.

    ``phase`` is the part of the loop it belongs to: ``start`` (once, at the turn's start),
    ``iteration`` (before each model call), ``route`` (the decider), ``tool`` (after a reply
    asking for tools), ``branch`` (a route branch of its own, named by ``branch``, that runs
    once and leads to the final phase, e.g. ``wrap-up``, or, its stages declaring ``loops``,
    back to the loop for another model call, e.g. ``output-retry``), ``final``, or
    ``resume`` (the entry of a run that answers a pause: it leads to the tool stages, and is
    in the chart only when a feature that may pause takes part). Within a phase (and a
    branch) stages run by ``order``. ``classic`` says
    what ``react_mode="classic"`` does with an iteration stage: ``every`` pass, or the
    ``first`` pass only (those run before the others, in order). ``calls_model``: the stage
    makes model calls (the run indexes them; the log marks them).
    """

    name: str
    fn: StageFn = field(repr=False)
    phase: Phase
    order: int
    kind: Literal["linear", "decider"] = "linear"
    branches: Mapping[str, str] = field(default_factory=dict)
    classic: Literal["every", "first"] = "every"
    calls_model: bool = False
    #: the route branch a ``branch``-phase stage belongs to (the decider's result taking it)
    branch: str = ""
    #: a ``branch``-phase stage whose branch leads back to the loop (its first stage that
    #: runs every pass: another model call) instead of to the final phase. Such a pass is a
    #: pass of the loop: the stage budget allows one per iteration, so the branch advances
    #: ``iteration`` and its decider takes it only below ``max_iterations``
    loops: bool = False
    description: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class StateKey:
    """A state key a feature owns. ``structure``: the loop reads it as structure, so a
    redaction policy may match keys inside it but never the key itself."""

    name: str
    structure: bool = False
    summary: str = ""


class GrowingRead:
    """A list that only grows (a conversation's history), read a tail at a time: a feature's
    index of it costs what was appended, never a copy of the whole (a committed history is
    a :class:`~agentfootprint.logformat.shared_lists.SharedList`, sliced in place)."""

    def __init__(self) -> None:
        self.read = 0

    def tail(self, items: Any) -> tuple[Sequence[Any], bool]:
        """The items past those read before, and whether the list is read again from the
        start (it is shorter than before: the caller drops its index)."""
        if not isinstance(items, Sequence) or isinstance(items, str):
            items = ()
        restarted = len(items) < self.read
        start = 0 if restarted else self.read
        self.read = len(items)
        return items[start:], restarted


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """One tool call's outcome, as the tool-result hooks see it."""

    tool: str
    tool_call_id: str
    arguments: Any  #: as parsed (None when they were not JSON)
    iteration: int
    ran: bool  #: the tool was executed (False: refused before it ran, or a replay)
    #: the outcome is a recording's answer (a replay): what the original's hooks made of it
    recorded: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class PauseRequest:
    """What a :meth:`Feature.tool_ready` hook returns to pause the run at a tool call: the
    question for a person (docs/log-format.md section 5.9). The runtime adds the request id,
    the call and its tool, and records it as ``pending``; ``private`` (a consent URL) goes
    to the caller only (``RunResult.pending``), never to the log."""

    kind: Literal["consent", "input"]
    question: str
    fields: Mapping[str, Any] | None = None
    context: Mapping[str, Any] | None = None
    service: str | None = None
    private: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Feature(Generic[Settings]):
    """What one option (or group of options) adds to a run. See the module docstring.

    ``Settings`` is the type of the object its hooks read as ``ctx.options`` (what
    :meth:`settings` makes): a feature with hooks subclasses ``Feature[ItsType]`` and mypy
    checks each hook's ``HookContext[ItsType]`` against it; a declaration with no hook is a
    ``Feature[Options]``."""

    name: str
    summary: str
    options: tuple[OptionSpec, ...] = ()
    stages: tuple[StageSpec, ...] = ()
    state_keys: tuple[StateKey, ...] = ()
    events: tuple[type[AgentEvent], ...] = ()
    #: the kinds of ``events`` also written to the log (findings and decisions)
    recorded_events: tuple[type[AgentEvent], ...] = ()
    #: the kinds of ``recorded_events`` that record what only a live run does outside the
    #: process (an HTTP exchange, a tool's teardown): a replay makes none, so what it
    #: records is compared with the original's without them
    live_only_events: tuple[type[AgentEvent], ...] = ()
    #: the ports its stages and hooks use (any other raises :class:`UndeclaredPortError`)
    ports: tuple[PortName, ...] = ()
    #: the features (by name) whose resolved options and run memory this one reads: its
    #: option checks through :meth:`Given.resolved`, its hooks through
    #: :meth:`HookContext.needed` (each must take part whenever this one does)
    needs: tuple[str, ...] = ()
    #: hooks run in ``order`` across features (lower first)
    order: int = 100
    #: the projection version this feature needs when ``active(options)`` (default 1)
    projection: int = 1
    #: it may pause a run (:class:`PauseRequest`): an agent it takes part in records log
    #: format v5, and its chart has the ``resume`` entry
    pauses: bool = False
    #: whether the feature takes part in a run with these resolved options (an opt-in
    #: feature that is off adds no stage and runs no hook)
    active: Callable[[Mapping[str, Any]], bool] = field(default=lambda options: True)
    #: the library tools it offers when active (served after the agent's own, e.g.
    #: ``artifacts``' ``present``), made from the resolved options
    library_tools: Callable[[Mapping[str, Any]], tuple[Tool, ...]] | None = None

    def __post_init__(self) -> None:
        for port in self.ports:
            if port not in _PORT_NAMES:
                raise UsageError(
                    f"feature {self.name!r} declares port {port!r}; the ports are "
                    + ", ".join(map(repr, _PORT_NAMES))
                )
        if self.name in self.needs:
            raise UsageError(f"feature {self.name!r} declares it needs itself")
        for event in self.recorded_events:
            if event not in self.events:
                raise UsageError(
                    f"feature {self.name!r} records {event.kind} but does not declare it"
                )
        for event in self.live_only_events:
            if event not in self.recorded_events:
                raise UsageError(
                    f"feature {self.name!r} names {event.kind} live-only but does not record it"
                )

    def settings(self, options: Options) -> Settings:
        """The typed object its hooks read as ``ctx.options``, made once per agent from the
        resolved options. The default is its own options by name, read-only (so a
        ``Feature[Options]``): a feature of another ``Settings`` overrides it."""
        own = MappingProxyType({spec.name: options.get(spec.name) for spec in self.options})
        return cast(Settings, own)

    # -- hook points: one typed method each, doing nothing by default. A feature takes part
    # in a point by overriding its method (the registry records once which do); the call
    # site asks ``registry.hooks_at(ctx, Feature.<point>)`` for the bound hooks, in order.

    @hook_point
    def system_pieces(
        self, ctx: HookContext[Settings], pieces: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The system slot's pieces with this feature's own after them (``ontology``'s map,
        ``findings``' instruction). They are constant for the agent, as the configured
        pieces are: the slot builds them once per run and keeps them."""
        return pieces

    @hook_point
    def tool_schema(self, ctx: HookContext[Settings], schema: dict[str, Any]) -> dict[str, Any]:
        """One tool's schema as the tools slot serves it (``findings`` adds its reserved
        argument); constant for the agent, like the tools themselves."""
        return schema

    @hook_point
    async def tool_result(
        self, ctx: HookContext[Settings], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        """Before the ``tool_end`` event: may replace the outcome (what the event and the
        model both carry)."""
        return outcome

    @hook_point
    async def tool_result_noted(
        self, ctx: HookContext[Settings], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        """After the ``tool_end`` event: a note on what the model reads only."""
        return outcome

    @hook_point
    def unnote(self, ctx: HookContext[Settings], content: str) -> str:
        """A recorded result as it was before this feature's :meth:`tool_result_noted` (a
        replay answers with what was recorded, after every hook; the hooks then run again
        on what the tool returned, so a note is never added twice)."""
        return content

    @hook_point
    async def request_served(
        self, ctx: HookContext[Settings], served: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """The request about to be served (its JSON, read-only): extra fields for the
        ``llm_start`` event. May emit events."""
        return {}

    @hook_point
    async def reply_received(
        self, ctx: HookContext[Settings], call: int, response: LLMResponse
    ) -> None:
        """After a reply was committed (its usage summed in state): may write scope in the
        model call's commit and emit events."""

    @hook_point
    async def stop_reason(self, ctx: HookContext[Settings]) -> Mapping[str, Any] | None:
        """At the route, when the reply asks for tools: a mapping (at least
        ``{"reason": ...}``) stops the turn there, as ``stopped_early`` says; None goes on."""
        return None

    @hook_point
    async def at_max_iterations(self, ctx: HookContext[Settings]) -> str | None:
        """At the route, when ``max_iterations`` stops a reply asking for tools
        (``stopped_early`` already set): the route branch to take instead of ``final`` (one
        this feature's ``branch`` stages declare), or None."""
        return None

    @hook_point
    async def answer_check(self, ctx: HookContext[Settings]) -> str | None:
        """At the route, when the reply asks for no tool (the model's answer): the route
        branch to take instead of ``final`` (one this feature's ``branch`` stages declare:
        the answer is not accepted), or None to accept it. May emit events, and raise to end
        the run (it closes ``failed``)."""
        return None

    @hook_point
    async def turn_start(self, ctx: HookContext[Settings]) -> None:
        """At the start of each turn (a feature resets what it keeps per turn)."""

    @hook_point
    async def batch_ready(
        self, ctx: HookContext[Settings], calls: list[dict[str, Any]], resuming: bool
    ) -> PauseRequest | None:
        """Before the calls of a reply's batch still to run (``calls``: all of them, or, in a
        run that answers a pause, those from the paused one on: ``resuming``) are dispatched:
        a :class:`PauseRequest` pauses the run on a question for the whole batch, at its first
        waiting call, before any of them runs (only a feature declared ``pauses=True``). May
        write scope and emit events (in the tool-calls commit)."""
        return None

    @hook_point
    async def tool_arguments(
        self, ctx: HookContext[Settings], call: ToolResult
    ) -> dict[str, Any] | ToolOutcome | None:
        """Before a call's arguments are validated: the arguments the tool runs with instead
        (arguments the model left out, filled in), an outcome refusing the call (the tool
        does not run), or None to keep them. What the model sent stays in the history."""
        return None

    @hook_point
    async def tool_permission(
        self, ctx: HookContext[Settings], call: ToolResult
    ) -> ToolOutcome | None:
        """Just before a tool runs (live, or answered from a recording), after the loop's
        own checks: None lets it run; an outcome is the call's result instead (the tool
        does not run). May emit events, and raise to stop the run."""
        return None

    @hook_point
    async def tool_ready(
        self, ctx: HookContext[Settings], call: ToolResult, grant: dict[str, Any]
    ) -> ToolOutcome | PauseRequest | None:
        """After the ``tool_permission`` hooks let a call run, just before its tool runs
        (live, or answered from a recording): None lets it run, and the hook may add to
        ``grant`` what the tool's context carries (by name: ``credential``, ``time``,
        ``artifacts``; ``wanted``: artifacts in place of refs); an outcome is the call's
        result instead; a :class:`PauseRequest` pauses the run at this call (only a
        feature declared ``pauses=True``). May emit events."""
        return None

    @hook_point
    async def resumed(self, ctx: HookContext[Settings]) -> None:
        """In a run that answers a pause, at its ``resume`` stage (after the answer is
        written, in that commit): a feature picks up what it carried across the pause
        (what a ``run_end`` hook of the paused run wrote to state, seeing ``ctx.pausing``)."""

    @hook_point
    async def run_end(self, ctx: HookContext[Settings], error: BaseException | None) -> None:
        """Where the run ends (after its last stage, at the stage that failed or the one a
        cancellation reached: ``error`` is its exception, else None), before that stage's
        commit: events it emits are recorded in that commit (cleanups: tool teardowns)."""


#: every hook point (a method of :class:`Feature` marked :func:`hook_point`), in class order
HOOK_POINTS: tuple[Callable[..., Any], ...] = tuple(
    fn for fn in vars(Feature).values() if getattr(fn, _HOOK_POINT, False)
)


def takes_part(feature: Feature[Any], point: Callable[..., Any]) -> bool:
    """``feature`` overrides the hook point ``point`` (a :class:`Feature` method)."""
    return getattr(type(feature), point.__name__) is not point


@dataclass(frozen=True, kw_only=True, slots=True)
class Part:
    """One active feature of an agent as its hooks see it: made once, by the registry."""

    feature: Feature[Any]
    settings: Any  #: ``feature.settings(options)``: the type its feature's hooks declare
    ports: frozenset[str]
    #: the parts of the features it declared it needs, by name (filled by the registry)
    needs: dict[str, Part] = field(default_factory=dict)


class HookContext(DeclaredPorts, Generic[Settings_co]):
    """What one feature's hook sees: its own typed options, its run memory and agent cache,
    ``emit``, the stage's scope, the ports it declared (another raises at once) and the
    features it declared it needs. Nothing else of the run."""

    __slots__ = ("_part", "_stage")

    def __init__(self, part: Part, stage: StageContext) -> None:
        self._part = part
        self._stage = stage

    @property
    def feature(self) -> str:
        return self._part.feature.name

    @property
    def options(self) -> Settings_co:
        """The feature's own resolved options, as :meth:`Feature.settings` made them."""
        settings: Settings_co = self._part.settings  # no cast(): a call on a hot path
        return settings

    @property
    def scope(self) -> Scope:
        """The stage's scope: committed state, and the writes of this stage's commit."""
        return self._stage.scope

    @property
    def run_id(self) -> str:
        return self._stage.run_id

    @property
    def conversation_id(self) -> str:
        return self._stage.run.conversation_id

    @property
    def calls(self) -> int:
        """The model calls the run has made so far."""
        return self._stage.calls

    def tool(self, name: str) -> Tool | None:
        """The agent's tool of that name (None: the model named no such tool)."""
        return self._stage.config.tool(name)

    @property
    def projection(self) -> int:
        """The request projection version the run serves."""
        return self._stage.projection

    @property
    def time_input(self) -> Mapping[str, Any] | None:
        """The run's own clock as its caller gave it (``run(..., time=...)``), or None."""
        return self._stage.time_input

    @property
    def served(self) -> Mapping[str, Any] | None:
        """The request this stage served the model (read-only JSON, as ``request_served``
        sees it): from that hook on, in the stage that calls the model; else None."""
        return self._stage.served

    @property
    def pausing(self) -> bool:
        """The run closes paused after this stage (its ``run_end`` hooks may carry state
        over to the run that answers it; :meth:`Feature.resumed`)."""
        return self._stage.run.paused is not None

    @property
    def redacting(self) -> bool:
        """A redaction policy is in force (what is recorded may be commitments)."""
        return self._stage.run.boundary is not None

    @property
    def policy(self) -> RedactionPolicy | None:
        """The redaction policy in force, or None."""
        boundary = self._stage.run.boundary
        return None if boundary is None else boundary.policy

    @property
    def recorded_state(self) -> Mapping[str, Any]:
        """Committed state as the log holds it (commitments where a policy redacted);
        the scope's ``committed`` itself when nothing is redacted."""
        return self._stage.run.committed

    def listens(self, kind: str) -> bool:
        """An event of ``kind`` would be recorded or delivered."""
        return self._stage.listens(kind)

    def withhold(self, secret: str) -> None:
        """Keep ``secret`` (a credential the run vended) out of everything the run records
        from now on, in every form the leak guard knows
        (:mod:`agentfootprint.runtime.leak_guard`)."""
        self._stage.run.guard.withhold(secret)

    def withheld_in(self, text: str) -> bool:
        """``text`` holds a secret the run keeps out of its record."""
        guard = self._stage.run.guard
        return guard.active and guard.holds(text.encode("utf-8", "surrogatepass"))

    async def emit(self, event: AgentEvent) -> None:
        """Deliver ``event``; a recorded kind goes into this stage's commit."""
        await self._stage.emit(event)

    def memory(self, factory: Callable[[], T]) -> T:
        """What this feature keeps for the run beside the loop (never in state): made by
        ``factory`` at the first use in a run."""
        memory = self._stage.run_memory
        kept: T = memory.get(self._part.feature.name, _UNSET)
        if kept is _UNSET:
            kept = memory[self._part.feature.name] = factory()
        return kept

    def forget(self) -> None:
        """Drop this feature's run memory (the next :meth:`memory` makes a new one)."""
        self._stage.run_memory.pop(self._part.feature.name, None)

    def cache(self, factory: Callable[[], T]) -> T:
        """What this feature caches across the agent's runs (revalidated by the feature;
        never evidence): made by ``factory`` at the first use."""
        caches = self._stage.run.seam.caches
        kept = caches.get(self._part.feature.name, _UNSET)
        if kept is _UNSET:
            kept = caches[self._part.feature.name] = factory()
        return cast(T, kept)

    def shared_cache(self, key: str, factory: Callable[[], T]) -> T:
        """What features share of the agent's caches under ``key`` (the integrity checks'
        and the answer layer's reading of a conversation): made by ``factory`` at the first
        use; never evidence, like :meth:`cache`."""
        caches = self._stage.run.seam.caches
        kept = caches.get(f"shared:{key}", _UNSET)
        if kept is _UNSET:
            kept = caches[f"shared:{key}"] = factory()
        return cast(T, kept)

    def needed(self, feature: Feature[T]) -> HookContext[T]:
        """The context of ``feature``, which this one declared in ``needs`` (its typed
        options, memory and cache), in the same stage."""
        part = self._part.needs.get(feature.name)
        if part is None:
            raise UndeclaredNeedError(self.feature, feature.name)
        return HookContext(part, self._stage)

    def _port_holder(self) -> tuple[str, frozenset[str], RunState]:
        return self._part.feature.name, self._part.ports, self._stage.run


class UndeclaredNeedError(UsageError):
    """A feature read another feature's options or memory without declaring it in
    ``needs``: a bug in the feature, raised at the read (as itself, never wrapped)."""

    def __init__(self, feature: str, needed: str) -> None:
        super().__init__(
            f"feature {feature!r} reads feature {needed!r} without declaring it: add "
            f"{needed!r} to its Feature(needs=...)"
        )
        self.feature = feature
        self.needed = needed


class Given(Mapping[str, Any]):
    """What an option's check sees: every option the caller passed (raw, by name), and the
    resolved value of an option owned by a feature its own feature ``needs``."""

    __slots__ = ("_feature", "_raw", "_resolve")

    def __init__(
        self,
        raw: Mapping[str, Any],
        feature: Feature[Any] | None = None,
        resolve: Callable[[str, Feature[Any]], Any] | None = None,
    ) -> None:
        self._raw = raw
        self._feature = feature
        self._resolve = resolve

    def __getitem__(self, key: str) -> Any:
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def resolved(self, option: str) -> Any:
        """``option``'s resolved value (checked by its own feature first)."""
        if self._feature is None or self._resolve is None:
            raise RuntimeError(f"option {option!r} is resolved only by the registry")
        return self._resolve(option, self._feature)
