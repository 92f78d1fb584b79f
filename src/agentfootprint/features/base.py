"""The seam every option is built on: a :class:`Feature` declares what it adds to a run.

A feature declares the options it owns (name, default, check), the stages it adds and where
they sit in the chart, the state keys it owns, the events it emits, the ports it needs and
the hooks it takes part in. Everything else derives from the declarations
(:mod:`agentfootprint.features.registry`): option checking, the chart, the stage budget,
``run.open``'s options record, the recorded event kinds, the keys a redaction policy may not
name, and the status column of ``docs/options.md``.

A feature may write scope from its own stages; it never builds or edits the request. Hooks
see the request only as the read-only served JSON, after it was built from committed state:
what the model is served stays a pure function of committed state.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentfootprint.errors import UsageError
from agentfootprint.logformat.canonical import MAX_SAFE_INT, has_lone_surrogate

if TYPE_CHECKING:
    from agentfootprint.runtime.events import AgentEvent
    from agentfootprint.runtime.provider import LLMResponse
    from agentfootprint.runtime.run import StageContext
    from agentfootprint.runtime.tools import ToolOutcome

__all__ = [
    "MAX_COUNT",
    "MISSING",
    "Feature",
    "OptionSpec",
    "Phase",
    "StageSpec",
    "StateKey",
    "ToolResult",
    "boolean",
    "count",
    "loggable",
    "refuse",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: The value of an option the caller did not give.
MISSING: Any = _Missing()

Phase = Literal["start", "iteration", "route", "tool", "branch", "final"]
Ports = Literal["model", "tools", "clock", "run_ids", "salts", "decisions"]


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
#: ``given`` every option the caller passed (for rules spanning two options). Raise
#: :func:`refuse` for a bad value.
OptionCheck = Callable[[Any, Mapping[str, Any]], Any]


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
    once and leads to the final phase, e.g. ``wrap-up``) or ``final``. Within a phase (and a
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
    description: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class StateKey:
    """A state key a feature owns. ``structure``: the loop reads it as structure, so a
    redaction policy may match keys inside it but never the key itself."""

    name: str
    structure: bool = False
    summary: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """One tool call's outcome, as the tool-result hooks see it."""

    tool: str
    tool_call_id: str
    arguments: Any  #: as parsed (None when they were not JSON)
    iteration: int
    ran: bool  #: the tool was executed (False: refused before it ran, or a replay)


#: ``hook(ctx, result, outcome) -> outcome``: may replace the outcome the model reads.
ToolResultHook = Callable[["StageContext", ToolResult, "ToolOutcome"], Awaitable["ToolOutcome"]]
#: ``hook(ctx, served) -> fields``: the request about to be served (its JSON, read-only);
#: returns extra fields for the ``llm_start`` event. May emit events.
RequestHook = Callable[["StageContext", Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
#: ``hook(ctx)``: at the start of each turn (a feature resets what it keeps per turn).
TurnHook = Callable[["StageContext"], Awaitable[None]]
#: ``hook(ctx, call, response)``: after a reply was committed (its usage summed in state);
#: may write scope in the model call's commit and emit events.
ReplyHook = Callable[["StageContext", int, "LLMResponse"], Awaitable[None]]
#: ``hook(ctx) -> why``: at the route, when the reply asks for tools: a mapping (at least
#: ``{"reason": ...}``) stops the turn there, as ``stopped_early`` says; None lets it go on.
StopHook = Callable[["StageContext"], Awaitable[Mapping[str, Any] | None]]
#: ``hook(ctx) -> branch``: at the route, when ``max_iterations`` stops a reply asking for
#: tools (``stopped_early`` already set): the route branch to take instead of ``final`` (one
#: this feature's ``branch`` stages declare), or None.
CapHook = Callable[["StageContext"], Awaitable[str | None]]
#: ``hook(ctx, call) -> refusal``: just before a tool runs (live, or answered from a
#: recording), after the loop's own checks (no such tool, arguments not JSON, validation):
#: None lets it run; a :class:`~agentfootprint.runtime.tools.ToolOutcome` is the call's result
#: instead (the tool does not run). May emit events, and raise to stop the run.
PermissionHook = Callable[["StageContext", ToolResult], Awaitable["ToolOutcome | None"]]
#: ``hook(ctx, error)``: where the run ends (the last stage's execution, the stage that
#: failed, or the one a cancellation reached: ``error`` is its exception, else None),
#: before that stage's commit is written: events it emits are recorded in that commit.
RunEndHook = Callable[["StageContext", BaseException | None], Awaitable[None]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Feature:
    """What one option (or group of options) adds to a run. See the module docstring."""

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
    ports: tuple[Ports, ...] = ()
    #: hooks run in ``order`` across features (lower first)
    order: int = 100
    #: before the ``tool_end`` event (what the event and the model both carry)
    tool_result: ToolResultHook | None = None
    #: after the ``tool_end`` event (a note on what the model reads only)
    tool_result_noted: ToolResultHook | None = None
    #: ``unnote(content) -> content``: a recorded result as it was before this feature's
    #: ``tool_result_noted`` hook (a replay answers with what was recorded, after every hook;
    #: the hooks then run again on what the tool returned, so a note is never added twice)
    unnote: Callable[[str], str] | None = None
    request_served: RequestHook | None = None
    reply_received: ReplyHook | None = None
    stop_reason: StopHook | None = None
    at_max_iterations: CapHook | None = None
    turn_start: TurnHook | None = None
    #: just before a tool runs: None lets it run, an outcome answers instead (a denial)
    tool_permission: PermissionHook | None = None
    #: where the run ends, before the last commit (cleanups: tool teardowns)
    run_end: RunEndHook | None = None
    #: the projection version this feature needs when ``active(options)`` (default 1)
    projection: int = 1
    #: whether the feature takes part in a run with these resolved options (an opt-in
    #: feature that is off adds no stage and runs no hook)
    active: Callable[[Mapping[str, Any]], bool] = field(default=lambda options: True)

    def __post_init__(self) -> None:
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
