"""Hypothesis strategies for random scripted agent runs (test support; needs ``hypothesis``).

A drawn :class:`RunSpec` is plain data: the agent's options, its tools (each with a
cycle of scripted outcomes: JSON values, unicode text, big strings, exceptions and
non-JSON values such as ``datetime``, ``bytes`` or ``set``) and one or more turns,
each holding exactly the model replies it consumes (a turn whose tool-call replies
reach ``max_iterations`` stops early: with ``wrap_up_at_max_iterations`` on, its last reply
answers the wrap-up call, whose tool calls, if any, are not run; off, it keeps no final
reply).

:func:`build_run` turns a spec into fresh objects, ``(agent kwargs, script,
messages)``; :func:`run_spec` runs every turn against a given store and returns
the results with the provider (whose ``requests`` hold what each call received).
Building twice gives independent tools (their outcome cycles restart), so one spec
can be replayed, e.g. once per ``commit_values`` encoding.

Values that reach state (tool arguments, ``temperature``) include integral floats
(``1.0``, ``-0.0``), which RFC 8785 writes as ``1`` and ``0``: state must hold them as the
log gives them back. ``integral_floats=False`` leaves them out.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import decimal
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import orjson
from hypothesis import strategies as st

from agentfootprint.agent.agent import Agent, RunResult
from agentfootprint.logformat.canonical import MAX_SAFE_INT
from agentfootprint.runtime.mock_provider import MockProvider, reply, tool_call
from agentfootprint.runtime.provider import LLMResponse
from agentfootprint.runtime.tools import Tool, ToolContext, define_tool
from agentfootprint.store.base import EventStore

__all__ = [
    "NON_JSON_RESULTS",
    "BuiltRun",
    "CallSpec",
    "Recorded",
    "ReplySpec",
    "RunSpec",
    "ToolFailure",
    "ToolOutcomeSpec",
    "ToolSpec",
    "TurnSpec",
    "build_run",
    "json_values",
    "make_tool",
    "run_spec",
    "run_specs",
    "texts",
    "tool_arguments",
    "tool_outcomes",
    "tool_specs",
]

OutcomeKind = Literal["json", "text", "big", "raise", "non_json", "context"]
Via = Literal["result", "run_id", "fresh_agent"]

#: Tool results the library must refuse (recorded as that call's error result).
NON_JSON_RESULTS: Mapping[str, Callable[[], Any]] = {
    "datetime": lambda: datetime.datetime(2024, 5, 17, 12, 30, tzinfo=datetime.UTC),
    "date": lambda: datetime.date(2024, 5, 17),
    "bytes": lambda: b"\x00\xffbytes",
    "set": lambda: {1, 2, 3},
    "frozenset": lambda: frozenset({"a"}),
    "object": object,
    "decimal": lambda: decimal.Decimal("1.10"),
    "complex": lambda: 1 + 2j,
    "nan": lambda: float("nan"),
    "inf": lambda: float("-inf"),
    "unsafe_int": lambda: 2**60,
    "int_key": lambda: {1: "one"},
    "nested_datetime": lambda: {"ok": [1, 2, {"when": datetime.datetime(2024, 1, 1)}]},
    "lone_surrogate": lambda: "text with a lone surrogate \udc80",
    "nested_bytes": lambda: [{"a": b"raw"}],
}


class ToolFailure(RuntimeError):
    """What a scripted tool raises for a ``raise`` outcome."""


# -- values ---------------------------------------------------------------------------------


def texts(*, min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    """Arbitrary unicode text without surrogates (always valid UTF-8)."""
    return st.text(alphabet=st.characters(codec="utf-8"), min_size=min_size, max_size=max_size)


def _floats(integral: bool) -> st.SearchStrategy[float]:
    floats = st.floats(allow_nan=False, allow_infinity=False)
    if integral:
        return floats
    return floats.filter(lambda f: not f.is_integer())


def json_values(
    *, integral_floats: bool = True, max_leaves: int = 12, text_size: int = 20
) -> st.SearchStrategy[Any]:
    """I-JSON values: safe integers, finite floats, unicode strings and keys, nesting."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT),
        st.sampled_from([0, 1, -1, MAX_SAFE_INT, -MAX_SAFE_INT]),
        _floats(integral_floats),
        texts(max_size=text_size),
    )
    if integral_floats:  # the numbers whose JSON spelling differs from Python's
        leaves |= st.sampled_from([1.0, -0.0, 0.0, 2.0, 1e16, 2.0**53, 1e19, 1e21, -1e300])
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(keys(), children, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def json_objects(*, integral_floats: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(keys(), json_values(integral_floats=integral_floats), max_size=4)


def keys() -> st.SearchStrategy[str]:
    """Object keys: any short text but the reserved ``$commit``."""
    return texts(max_size=8).filter(lambda key: key != "$commit")


# -- tools ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolOutcomeSpec:
    """One scripted tool outcome.

    ``json``: return ``value`` (any JSON value); ``text``: return the string ``value``;
    ``big``: return ``value[0] * value[1]``; ``raise``: raise :class:`ToolFailure`
    with message ``value``; ``non_json``: return ``NON_JSON_RESULTS[value]()``;
    ``context``: return a JSON object made from the tool's context.
    """

    kind: OutcomeKind
    value: Any = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool: its model-visible schema and the cycle of outcomes it produces."""

    name: str
    description: str
    input_schema: dict[str, Any]
    outcomes: tuple[ToolOutcomeSpec, ...]
    is_async: bool = False


def _produce(outcome: ToolOutcomeSpec, ctx: ToolContext) -> Any:
    if outcome.kind == "raise":
        raise ToolFailure(outcome.value)
    if outcome.kind == "non_json":
        return NON_JSON_RESULTS[outcome.value]()
    if outcome.kind == "big":
        char, count = outcome.value
        return char * count
    if outcome.kind == "context":
        return {"iteration": ctx.iteration, "call": ctx.tool_call_id, "tool": ctx.tool}
    return copy.deepcopy(outcome.value)


def make_tool(spec: ToolSpec) -> Tool:
    """A fresh tool for ``spec``: each call takes the next outcome of its cycle."""
    counter = itertools.count()

    def next_outcome() -> ToolOutcomeSpec:
        return spec.outcomes[next(counter) % len(spec.outcomes)]

    execute: Callable[..., Any]
    if spec.is_async:

        async def execute_async(arguments: Any, ctx: ToolContext) -> Any:
            return _produce(next_outcome(), ctx)

        execute = execute_async
    else:

        def execute_sync(arguments: Any, ctx: ToolContext) -> Any:
            return _produce(next_outcome(), ctx)

        execute = execute_sync
    return define_tool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.input_schema,
        execute=execute,
    )


def tool_outcomes(*, big: bool = True) -> st.SearchStrategy[ToolOutcomeSpec]:
    """Random tool outcomes of every kind (``big=False`` leaves out large strings)."""
    kinds: list[st.SearchStrategy[ToolOutcomeSpec]] = [
        st.builds(ToolOutcomeSpec, st.just("json"), json_values(integral_floats=True)),
        st.builds(ToolOutcomeSpec, st.just("text"), texts(max_size=80)),
        st.builds(ToolOutcomeSpec, st.just("raise"), texts(max_size=40)),
        st.builds(ToolOutcomeSpec, st.just("non_json"), st.sampled_from(sorted(NON_JSON_RESULTS))),
        st.just(ToolOutcomeSpec("context")),
    ]
    if big:
        kinds.append(
            st.builds(
                ToolOutcomeSpec,
                st.just("big"),
                st.tuples(
                    st.characters(codec="utf-8"), st.integers(min_value=1_000, max_value=30_000)
                ),
            )
        )
    return st.one_of(kinds)


_NAMES = ("lookup", "search_docs", "calc-2", "X")


@st.composite
def tool_specs(draw: st.DrawFn, *, count: int | None = None, big: bool = True) -> list[ToolSpec]:
    """1-3 tools with distinct names, a schema with a required string ``q``, outcome cycles."""
    n = count if count is not None else draw(st.integers(min_value=1, max_value=3))
    names = draw(st.permutations(_NAMES))[:n]
    specs = []
    for name in names:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["q"],
        }
        if draw(st.booleans()):
            schema["additionalProperties"] = False
        specs.append(
            ToolSpec(
                name=name,
                description=draw(texts(min_size=1, max_size=30).filter(str.strip)),
                input_schema=schema,
                outcomes=tuple(draw(st.lists(tool_outcomes(big=big), min_size=1, max_size=4))),
                is_async=draw(st.booleans()),
            )
        )
    return specs


def tool_arguments(*, integral_floats: bool = True) -> st.SearchStrategy[Any]:
    """Arguments as a model sends them: objects valid or not, JSON text, broken JSON."""
    valid = st.fixed_dictionaries(
        {"q": texts()},
        optional={"n": st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)},
    )
    objects = st.one_of(valid, json_objects(integral_floats=integral_floats))
    return st.one_of(
        objects,
        objects.map(lambda value: orjson.dumps(value).decode("utf-8")),
        texts(max_size=20).map(lambda text: "{" + text),
        json_values(integral_floats=integral_floats).map(
            lambda value: orjson.dumps([value]).decode("utf-8")
        ),
        st.lists(json_values(integral_floats=integral_floats), max_size=2),
    )


# -- runs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallSpec:
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class ReplySpec:
    text: str
    calls: tuple[CallSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnSpec:
    """One turn: its user message and exactly the replies it consumes.

    ``continue_from`` names an earlier turn's index (``None``: a new conversation);
    ``via`` says how: the ``RunResult``, its run id, or the run id from a fresh agent.
    """

    message: str
    replies: tuple[ReplySpec, ...]
    continue_from: int | None = None
    via: Via = "result"
    #: the turn hit the cap and its last reply answers the wrap-up call
    wrapped_up: bool = False

    @property
    def calls(self) -> int:
        return len(self.replies)

    @property
    def stops_early(self) -> bool:
        return self.wrapped_up or bool(self.replies[-1].calls)


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything one scripted scenario needs, as plain data."""

    model: str
    system: tuple[str, ...]
    tools: tuple[ToolSpec, ...]
    options: dict[str, Any]
    turns: tuple[TurnSpec, ...]

    def with_options(self, **changes: Any) -> RunSpec:
        return dataclasses.replace(self, options={**self.options, **changes})

    @property
    def max_iterations(self) -> int:
        return int(self.options.get("max_iterations", 10))


def consumed_replies(
    tool_replies: Sequence[ReplySpec],
    final: ReplySpec,
    max_iterations: int,
    wrap_up: bool = False,
) -> tuple[ReplySpec, ...]:
    """The replies a turn really consumes: it stops early at ``max_iterations``, where a
    wrap-up call (``wrap_up``) consumes ``final`` too."""
    if len(tool_replies) >= max_iterations:
        return (*tool_replies[:max_iterations], *((final,) if wrap_up else ()))
    return (*tool_replies, final)


@st.composite
def _tool_reply(
    draw: st.DrawFn, names: Sequence[str], integral_floats: bool, text_size: int
) -> ReplySpec:
    known = st.sampled_from(list(names))
    name = draw(st.one_of(known, known, known, st.sampled_from(["missing_tool", "no such tool"])))
    calls = [CallSpec(name, draw(tool_arguments(integral_floats=integral_floats)))]
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        calls.append(CallSpec(draw(known), draw(tool_arguments(integral_floats=integral_floats))))
    return ReplySpec(draw(texts(max_size=text_size)), tuple(calls))


@st.composite
def turn_replies(
    draw: st.DrawFn,
    names: Sequence[str],
    max_iterations: int,
    *,
    integral_floats: bool = True,
    text_size: int = 60,
    wrap_up: bool = False,
) -> tuple[ReplySpec, ...]:
    """Tool-call replies (up to one past ``max_iterations``) and a final text reply (with
    ``wrap_up``, the wrap-up call's reply, which may still ask for tools)."""
    count = draw(st.integers(min_value=0, max_value=max_iterations + 1))
    tool_replies = [draw(_tool_reply(names, integral_floats, text_size)) for _ in range(count)]
    final = ReplySpec(draw(texts(max_size=text_size)))
    if wrap_up and count >= max_iterations and draw(st.booleans()):
        final = draw(_tool_reply(names, integral_floats, text_size))
    return consumed_replies(tool_replies, final, max_iterations, wrap_up)


@st.composite
def agent_options(
    draw: st.DrawFn,
    *,
    max_iterations: tuple[int, int] = (1, 5),
    integral_floats: bool = True,
) -> dict[str, Any]:
    options: dict[str, Any] = {
        "commit_values": draw(st.sampled_from(["delta", "full"])),
        "react_mode": draw(st.sampled_from(["dynamic", "classic"])),
        "max_iterations": draw(st.integers(*max_iterations)),
        "tool_arg_validation": draw(st.sampled_from(["enforce", "warn", "off"])),
        "record_receipt": draw(st.sampled_from([True, True, True, False])),
        # at the cap: the plain stop, or one more call with the tools withheld
        "wrap_up_at_max_iterations": draw(st.booleans()),
    }
    temperature = draw(
        st.one_of(
            st.none(),
            st.integers(min_value=0, max_value=2),
            _floats(integral_floats).map(abs).filter(lambda t: t <= 2.0),
        )
    )
    if temperature is not None:
        options["temperature"] = temperature
    max_tokens = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=100_000)))
    if max_tokens is not None:
        options["max_tokens"] = max_tokens
    return options


@st.composite
def run_specs(
    draw: st.DrawFn,
    *,
    min_turns: int = 1,
    max_turns: int = 1,
    max_iterations: tuple[int, int] = (1, 5),
    integral_floats: bool = True,
    big: bool = True,
    options: Mapping[str, Any] | None = None,
) -> RunSpec:
    """A random scripted scenario; ``options`` pins agent options (e.g. commit_values)."""
    opts = draw(agent_options(max_iterations=max_iterations, integral_floats=integral_floats))
    opts.update(options or {})
    tools = tuple(draw(tool_specs(big=big)))
    names = [tool.name for tool in tools]
    system = draw(
        st.one_of(
            st.just(()),
            st.lists(texts(max_size=40), min_size=1, max_size=3).map(tuple),
        )
    )
    n_turns = draw(st.integers(min_value=min_turns, max_value=max_turns))
    turns = []
    for index in range(n_turns):
        continue_from: int | None = None
        via: Via = "result"
        if index and draw(st.integers(0, 4)):
            continue_from = draw(
                st.one_of(st.just(index - 1), st.integers(min_value=0, max_value=index - 1))
            )
            via = draw(st.sampled_from(["result", "result", "run_id", "fresh_agent"]))
        cap, wrap_up = int(opts["max_iterations"]), bool(opts["wrap_up_at_max_iterations"])
        replies = draw(turn_replies(names, cap, integral_floats=integral_floats, wrap_up=wrap_up))
        turns.append(
            TurnSpec(
                message=draw(texts(max_size=60)),
                replies=replies,
                continue_from=continue_from,
                via=via,
                wrapped_up=wrap_up and len(replies) > cap,
            )
        )
    model = draw(st.one_of(st.sampled_from(["m", "gpt-x", "claude"]), texts(min_size=1)))
    if not model.strip():
        model = "m"
    return RunSpec(model=model, system=system, tools=tools, options=opts, turns=tuple(turns))


# -- building and running -------------------------------------------------------------------


class BuiltRun(NamedTuple):
    """Fresh objects for one replay of a spec."""

    agent_kwargs: dict[str, Any]
    script: list[str | LLMResponse]
    messages: list[str]


def script_of(replies: Sequence[ReplySpec]) -> list[str | LLMResponse]:
    """``MockProvider`` replies for ``replies`` (text-only replies stay plain strings)."""
    script: list[str | LLMResponse] = []
    for item in replies:
        if item.calls:
            calls = [tool_call(c.name, c.arguments) for c in item.calls]
            script.append(reply(item.text, tool_calls=calls))
        else:
            script.append(item.text)
    return script


def build_run(spec: RunSpec, **overrides: Any) -> BuiltRun:
    """``(agent kwargs, script, messages)`` for ``spec``: new tools, a script for every turn."""
    kwargs: dict[str, Any] = {
        "model": spec.model,
        "system": list(spec.system),
        "tools": [make_tool(tool) for tool in spec.tools],
        **spec.options,
        **overrides,
    }
    script: list[str | LLMResponse] = []
    for turn in spec.turns:
        script += script_of(turn.replies)
    return BuiltRun(kwargs, script, [turn.message for turn in spec.turns])


@dataclass(slots=True)
class Recorded:
    """What :func:`run_spec` produced."""

    spec: RunSpec
    provider: MockProvider
    agent: Agent
    results: list[RunResult]
    first_call: list[int]  #: index in ``provider.requests`` of each run's call 0

    def requests(self, turn: int) -> list[dict[str, Any]]:
        """The requests the provider received during ``turn``."""
        start = self.first_call[turn]
        return self.provider.requests[start : start + self.results[turn].calls]


def run_spec(spec: RunSpec, store: EventStore, **overrides: Any) -> Recorded:
    """Run every turn of ``spec`` against ``store`` (``overrides`` replace agent options)."""
    kwargs, script, messages = build_run(spec, **overrides)
    provider = MockProvider(script)
    agent = Agent(provider=provider, store=store, **kwargs)
    results: list[RunResult] = []
    first_call: list[int] = []
    for turn, message in zip(spec.turns, messages, strict=True):
        runner = agent
        parent: str | RunResult | None = None
        if turn.continue_from is not None:
            previous = results[turn.continue_from]
            parent = previous
            if turn.via == "run_id":
                parent = previous.run_id
            elif turn.via == "fresh_agent":
                parent = previous.run_id
                runner = Agent(provider=provider, store=store, **kwargs)
        first_call.append(len(provider.requests))
        results.append(runner.run_sync(message, continue_from=parent))
    return Recorded(
        spec=spec, provider=provider, agent=agent, results=results, first_call=first_call
    )
