"""Listeners can never change the record (issue 24, item 1), under either delivery tier.

A listener gets a detached copy of each event, one per listener call, made only when
someone listens. Whatever it does with its copy (edit or delete nested members, replace
fields, raise any exception, ``CancelledError`` included, sleep, subscribe or unsubscribe
listeners mid-run), the run records the same rows, serves the same requests and hands its
tools the same arguments as with no listener at all; and each listener sees exactly what a
lone listener sees.

Under ``observer_delivery="deferred"`` (issue 29) the same holds, and the listeners see
what they see inline: the same kinds, payloads and order.

The scripted conversation makes every event kind the features declare fire at least once
(``event_kinds()``: a new kind that does not fire fails the test until the script covers it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.features.registry import event_kinds
from agentfootprint.runtime import events as events_module
from agentfootprint.runtime.artifacts import ref_of
from agentfootprint.runtime.events import AgentEvent, detached
from agentfootprint.runtime.provider import WireAttempt, WireRecord
from agentfootprint.testing.pytest_plugin import VerifiedRuns

TOOL_START = "agentfootprint.stream.tool_start"
ARGS_INVALID = "agentfootprint.validation.args_invalid"
#: fields measured on the wall clock (listener-only, never recorded)
WALL_CLOCK = frozenset({"duration_ms"})


# -- the conversation: every event kind fires -------------------------------------------------
class StreamingMock(af.MockProvider):
    """The scripted model, streaming its text to token listeners and reporting an HTTP
    exchange (its wire evidence is recorded), the same reply whether or not anyone listens."""

    streams = True

    async def complete(self, request: Any, *, on_token: Any = None) -> af.LLMResponse:
        response = await super().complete(request)
        if on_token is not None:
            for start in range(0, len(response.content), 4):
                await on_token(response.content[start : start + 4])
        sent = orjson.dumps(dict(request), option=orjson.OPT_SORT_KEYS)
        attempt = WireAttempt(
            request_body=sent, response_body=response.content.encode(), status=200
        )
        return dataclasses.replace(response, wire=WireRecord(attempts=(attempt,)))


class Checker:
    """Denies ``q == "bad"``, allows the rest."""

    name = "policy"

    async def check(self, request: af.PermissionRequest) -> af.Decision:
        q = request.arguments.get("q") if isinstance(request.arguments, dict) else None
        return af.Decision.deny("not that") if q == "bad" else af.Decision.allow("fine")


class Prefer:
    """Ranks by a fixed preference: narrowed to the top one, ``add`` is off the wire."""

    name = "prefer"
    order = (
        "lookup",
        "add",
        "ids",
        "search",
        "report",
        "export",
        "tally",
        "present",
        "hosts",
        "wwpns",
        "probe",
        "backups",
    )

    async def rank(self, query: str, candidates: Any) -> list[tuple[str, float]]:
        return [(c.name, float(len(self.order) - self.order.index(c.name))) for c in candidates]


class Judge:
    """The findings ledger's second source: every result is noise to it."""

    name = "judge"

    async def judge(self, request: af.JudgeRequest) -> dict[str, float]:
        return {"noise": 0.9, "fact": 0.1}


QUERY = {"type": "object", "properties": {"q": {"type": "string"}}}
REPORT = {
    "type": "object",
    "properties": {
        "q": {"type": "string"},
        "window": {"type": "string"},
        "days": {"type": "integer"},
    },
}
NUMBERS = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


def toolbox(seen: list[tuple[str, bytes]]) -> list[af.Tool]:
    """The tools, async (no worker threads), each noting the arguments it was handed."""

    async def closed() -> None:
        return None

    async def broken() -> None:
        raise OSError("the session is gone")

    async def lookup(args: Any, ctx: af.ToolContext) -> str:
        seen.append(("lookup", orjson.dumps(args)))
        ctx.on_teardown(closed)
        return f"rows for {args.get('q')}"

    async def add(args: Any, ctx: af.ToolContext) -> Any:
        seen.append(("add", orjson.dumps(args)))
        ctx.on_teardown(broken)
        return args["a"] + args["b"]

    async def ids(args: Any, ctx: af.ToolContext) -> str:
        seen.append(("ids", orjson.dumps(args)))
        assert ctx.credential is not None
        # a tool that echoes its credential: the leak guard withholds the result
        return f"valid ids: 7, 9 (as {ctx.credential.token})"

    async def search(args: Any) -> str:
        seen.append(("search", orjson.dumps(args)))
        return "web"

    async def report(args: Any) -> str:
        seen.append(("report", orjson.dumps(args)))
        return "3 rows"

    async def export(args: Any) -> str:
        seen.append(("export", orjson.dumps(args)))
        return f"rows of {args.get('q')}: " + "1,2,3;" * 60  # placed: over 256 characters

    async def tally(args: Any) -> str:
        seen.append(("tally", orjson.dumps(args)))
        return "never: its ref is refused"

    async def hosts(args: Any) -> Any:
        seen.append(("hosts", orjson.dumps(args)))
        return [{"lun": "", "host": "h1"}]  # LUN 0 written as "": refused under enforce

    async def wwpns(args: Any) -> Any:
        seen.append(("wwpns", orjson.dumps(args)))
        return [{"wwpn": "wwpn-0001"}]

    async def backups(args: Any) -> Any:
        seen.append(("backups", orjson.dumps(args)))
        return af.absent(
            "failed backup runs",
            ["every job in the nightly export"],
            period=af.period(
                "2026-09-26T09:30:00Z",
                "2026-09-26T10:30:00Z",
                held=("2026-08-27T02:00:00Z", "2026-09-26T09:00:00Z"),
            ),
        )

    async def probe(args: Any) -> Any:
        seen.append(("probe", orjson.dumps(args)))
        return []  # every lookup empty: an advisory for the value wwpns produced

    return [
        af.define_tool(
            name="lookup", description="Look it up.", input_schema=QUERY, execute=lookup
        ),
        af.define_tool(
            name="add", description="Add two numbers.", input_schema=NUMBERS, execute=add
        ),
        af.define_tool(
            name="ids",
            description="The valid ids.",
            input_schema=QUERY,
            execute=ids,
            needs={"credential": "registry"},
        ),
        af.define_tool(name="search", description="Search.", input_schema=QUERY, execute=search),
        af.define_tool(
            name="report",
            description="A report.",
            input_schema=REPORT,
            execute=report,
            ask_or_assume={"window": {"assume": "24h"}, "days": {"ask": "How many days?"}},
        ),
        af.define_tool(name="export", description="Export.", input_schema=QUERY, execute=export),
        af.define_tool(
            name="tally",
            description="Tally a table.",
            input_schema={"type": "object", "properties": {"t": {"type": "string"}}},
            execute=tally,
            wants={"t": "table"},
        ),
        af.define_tool(
            name="hosts",
            description="The hosts.",
            input_schema=QUERY,
            execute=hosts,
            result_columns={"lun": "number", "host": "string"},
        ),
        af.define_tool(name="wwpns", description="WWPNs.", input_schema=QUERY, execute=wwpns),
        af.define_tool(
            name="backups",
            description="Failed backup runs.",
            input_schema=QUERY,
            execute=backups,
            period="q",
        ),
        af.define_tool(
            name="probe",
            description="Probe a port.",
            input_schema=QUERY,
            execute=probe,
            arguments_from=["wwpns"],
        ),
    ]


def asks(name: str, arguments: Any, text: str = "", **usage: int) -> af.LLMResponse:
    return af.reply(
        text, tool_calls=[af.tool_call(name, arguments)], usage=af.Usage(**usage) if usage else None
    )


#: the refs of the artifacts the conversation places (the fixed ports' salts 0 and 1)
FIRST_REF, SECOND_REF = (ref_of(n.to_bytes(16, "big")) for n in (0, 1))

#: turn 0: cache tokens without a price (cost.unpriced), invalid arguments to a tool the
#: narrowed list did not serve (args_invalid, answered_off_wire), a repeated call, a denied
#: one, a tool whose cleanup fails, then the iteration cap with a tool call pending (wrap-up);
#: turns 1-4: the window moves, a pin holds and then stands down
TURNS: list[list[Any]] = [
    [
        asks("lookup", {"q": "x"}, "let me look", input=40, output=9, cache_read=7),
        asks("add", {"a": "2"}),
        asks("lookup", {"q": "x"}),
        asks("lookup", {"q": "bad"}),
        asks("add", {"a": 2, "b": 3.5}),
        asks("lookup", {"q": "more"}),
        "wrapped up",
    ],
    # an answer that does not fit output_type is taught and asked again (output_invalid)
    [asks("ids", {"q": "all"}), "a1", '{"a": "a1"}'],
    [asks("lookup", {"q": "y"}), asks("lookup", {"q": "z"}), '{"a": "a2"}'],
    [asks("lookup", {"q": "w"}), '{"a": "a3"}'],
    [asks("lookup", {"q": "v"}), '{"a": "a4"}'],
    # the inputs layer: a default filled in, and an ask (an input pause, then its resume)
    [asks("report", {"q": "r"}), '{"a": "a5"}'],
    # artifacts: two results placed (the store keeps one: the first expires), the second
    # presented, the first wanted again (unavailable), the second refused (wrong kind)
    [
        asks("export", {"q": "a"}),
        asks("export", {"q": "b"}),
        asks("present", {"ref": SECOND_REF}),
        asks("present", {"ref": FIRST_REF}),
        asks("tally", {"t": SECOND_REF}),
        '{"a": "a6"}',
    ],
    # findings: a basis declared, an earlier result judged noise (a standing: the piece and a
    # ticket), each result judged by the second source
    [
        af.reply(tool_calls=[af.tool_call("lookup", {"q": "f1"}, id="find-1")]),
        af.reply(
            tool_calls=[
                af.tool_call(
                    "lookup",
                    {
                        "q": "f2",
                        "_findings": {
                            "basis": "direct",
                            "previous": [{"toolCallId": "find-1", "standing": "noise"}],
                        },
                    },
                    id="find-2",
                )
            ]
        ),
        '{"a": "a7"}',
    ],
    # integrity: rows refused (enforce), a lookup keyed on a produced value comes back empty,
    # a value excused by the app's external grounds
    [
        asks("hosts", {"q": "all"}),
        asks("wwpns", {"q": "all"}),
        asks("probe", {"q": "wwpn-0001"}),
        asks("probe", {"q": "ext-value-1"}),
        '{"a": "a8"}',
    ],
    # the results layer: asked about the last hour, the nightly export ends at 09:00
    [asks("backups", {"q": "last hour"}), '{"a": "a9"}'],
]


def fixed_ports() -> af.Ports:
    ticks = itertools.count(1_700_000_000_000)
    ids = itertools.count()
    salts = itertools.count()
    return af.Ports(
        clock=lambda: next(ticks),
        run_ids=lambda: f"run{next(ids):04d}",
        salts=lambda: next(salts).to_bytes(16, "big"),
    )


@dataclasses.dataclass(frozen=True)
class Record:
    """What a conversation left: rows per run (type and body; ts and run ids aside, though
    the fixed ports make them equal too), the requests served, the tools' arguments, and
    what the last-subscribed listener saw."""

    rows: tuple[tuple[tuple[str, bytes], ...], ...]
    requests: tuple[bytes, ...]
    arguments: tuple[tuple[str, bytes], ...]
    seen: tuple[tuple[str, bytes], ...]


def as_seen(event: AgentEvent) -> tuple[str, bytes]:
    """An event as a listener received it: its kind and fields (not the wall-clock ones)."""
    assert type(event).kind == event.kind
    fields = {k: v for k, v in vars(event).items() if k not in WALL_CLOCK}
    return event.kind, orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)


def converse(
    subscribe: Callable[[af.Agent], None] | None,
    *,
    observe: bool = True,
    delivery: str = "inline",
) -> Record:
    """The conversation, with ``subscribe``'s listeners and then (``observe``) one that
    keeps what it sees, delivered as ``delivery`` says (``observer_delivery``)."""
    arguments: list[tuple[str, bytes]] = []
    provider = StreamingMock([step for turn in TURNS for step in turn])
    agent = af.Agent(
        provider=provider,
        model="m",
        tools=toolbox(arguments),
        ports=fixed_ports(),
        max_iterations=6,
        window={"keep_last_turns": 1},
        permission_checker=Checker(),
        credentials=af.static_tokens({"registry": "registry-token"}),
        time={"zone": "Europe/Paris"},
        pricing_table={"m": {"input": 1, "output": 2}},
        cost_budget=0.00001,
        context_budget={"messages": 50},
        tool_choice={"classifier": Prefer(), "serve": {"top": 1}, "always_serve": ["search"]},
        argument_ask_context=lambda: {"screen": "reports"},
        observer_delivery=delivery,
        output_type={"type": "object", "properties": {"a": {"type": "string"}}},
        ontology=af.define_ontology(
            {"name": "n", "version": "1", "nodes": {"t": {"meaning": "t"}}}
        ),
        artifacts={
            "store": af.MemoryArtifacts(retention=af.Retention(max_count=1)),
            "max_inline_chars": 256,
        },
        findings={"judge": Judge()},
        integrity_posture="dev",
        answer_layer=True,
        check_column_types="enforce",
        notice_empty_lookups=True,
        notice_prior_turn_evidence=True,
        external_grounds=lambda: [{"value": "ext-value-1", "source": "viewer-selection"}],
    )
    if subscribe is not None:
        subscribe(agent)
    seen: list[tuple[str, bytes]] = []
    if observe:
        agent.on("*", lambda event: seen.append(as_seen(event)))
    results: list[af.RunResult] = []
    for turn in range(len(TURNS)):
        parent = results[-1] if results else None
        results.append(agent.run_sync(f"question {turn}", continue_from=parent))
        if results[-1].outcome == "paused":
            results.append(agent.resume_sync(results[-1], {"f1": 7}))
    answers = [r.answer for r in results if r.outcome != "paused"]
    assert answers == ["wrapped up", *(f'{{"a": "a{n}"}}' for n in range(1, 10))]
    rows = tuple(
        tuple((e.type, bytes(e.body)) for e in agent.store.read(r.run_id)) for r in results
    )
    requests = tuple(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in provider.requests)
    return Record(rows, requests, tuple(arguments), tuple(seen))


@functools.cache
def alone() -> Record:
    """No listener at all: the record every run with listeners must equal."""
    return converse(None, observe=False)


@functools.cache
def observed() -> Record:
    """One listener only, inline: what every listener must see, whatever the others do and
    whichever the tier."""
    return converse(None)


TIERS = ("inline", "deferred")


def assert_same_record(record: Record) -> None:
    reference = alone()
    assert record.rows == reference.rows
    assert record.requests == reference.requests
    assert record.arguments == reference.arguments
    assert record.seen == observed().seen
    assert {kind for kind, _ in record.seen} == event_kinds()


# -- what listeners do ---------------------------------------------------------------------
def scramble(value: Any) -> None:
    """Edit every nested member in place: each key's value replaced, one added, lists grown."""
    if isinstance(value, dict):
        for key in list(value):
            scramble(value[key])
            value[key] = 1000
        value["added"] = True
    elif isinstance(value, list):
        for item in value:
            scramble(item)
        value.append("added")
        value[0] = 1000


def mutate(event: AgentEvent) -> None:
    for name, value in list(vars(event).items()):
        scramble(value)
        if not isinstance(value, dict | list):  # the frozen event's own fields, too
            object.__setattr__(event, name, "changed")


def delete(event: AgentEvent) -> None:
    for name, value in list(vars(event).items()):
        if isinstance(value, dict | list):
            value.clear()
        object.__delattr__(event, name)


class Stop(BaseException):
    """A BaseException of the listener's own."""


def subscribe(agent: af.Agent, pattern: str, name: str) -> None:
    """Subscribe one listener to ``pattern`` that does ``name``."""
    handle: list[Callable[[], None]] = []
    listener: Callable[[AgentEvent], Any]
    if name == "mutate":
        listener = mutate
    elif name == "delete":
        listener = delete
    elif name == "mutate_later":  # edits its copy once the run went on

        def listener(event: AgentEvent) -> None:
            asyncio.get_running_loop().call_soon(mutate, event)

    elif name == "raise":

        def listener(event: AgentEvent) -> None:
            mutate(event)
            raise ValueError("listener bug")

    elif name == "raise_base":

        def listener(event: AgentEvent) -> None:
            raise Stop("a BaseException of its own")

    elif name == "raise_cancelled":

        def listener(event: AgentEvent) -> None:
            raise asyncio.CancelledError("raised by the listener, not a cancel of the run")

    elif name == "cancelled_await":  # awaits something cancelled under it

        async def listener(event: AgentEvent) -> None:
            pending = asyncio.get_running_loop().create_future()
            pending.cancel()
            await pending

    elif name == "sleep":

        async def listener(event: AgentEvent) -> None:
            await asyncio.sleep(0)
            mutate(event)
            await asyncio.sleep(0)

    elif name == "subscribe":  # subscribes a mutating listener, dropping the last it added

        def listener(event: AgentEvent) -> None:
            if handle:
                handle.pop()()
            handle.append(agent.on("*", mutate))

    elif name == "unsubscribe_self":

        def listener(event: AgentEvent) -> None:
            mutate(event)
            if handle:
                handle.pop()()

    else:
        raise AssertionError(name)
    unsubscribe = agent.on(pattern, listener)
    if name == "unsubscribe_self":
        handle.append(unsubscribe)


BEHAVIOURS = (
    "mutate",
    "delete",
    "mutate_later",
    "raise",
    "raise_base",
    "raise_cancelled",
    "cancelled_await",
    "sleep",
    "subscribe",
    "unsubscribe_self",
)
PATTERNS = (
    "*",
    "agentfootprint.*",
    *sorted({kind.rsplit(".", 1)[0] + ".*" for kind in event_kinds()}),
    *sorted(event_kinds()),
)


def listeners_of(drawn: list[tuple[str, str]]) -> Callable[[af.Agent], None]:
    def subscribe_all(agent: af.Agent) -> None:
        for pattern, name in drawn:
            subscribe(agent, pattern, name)

    return subscribe_all


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """The listeners' tracebacks (logged, by design) and the features' warnings."""
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


# -- the property --------------------------------------------------------------------------
@given(
    st.lists(
        st.tuples(st.sampled_from(PATTERNS), st.sampled_from(BEHAVIOURS)), min_size=1, max_size=4
    ),
    st.sampled_from(TIERS),
)
@example([(TOOL_START, "mutate")], "inline")  # the issue's probe: the tool ran with 1000
@example([(ARGS_INVALID, "mutate")], "inline")  # the probe: the row and teaching message changed
@example([(TOOL_START, "delete")], "inline")  # the run failed with KeyError
@example([("*", name) for name in BEHAVIOURS[:4]], "inline")
@example([("*", name) for name in BEHAVIOURS[4:8]], "inline")
@example([("*", "subscribe"), ("*", "unsubscribe_self"), ("*", "delete")], "inline")
@example([("*", name) for name in BEHAVIOURS[:5]], "deferred")
@example([("*", name) for name in BEHAVIOURS[5:]], "deferred")
def test_no_listener_changes_the_record(drawn: list[tuple[str, str]], delivery: str) -> None:
    assert_same_record(converse(listeners_of(drawn), delivery=delivery))


def test_deferred_delivery_hands_a_listener_what_inline_does() -> None:
    """Kinds, payloads and order, every event kind among them, and the rows unchanged."""
    assert_same_record(converse(None, delivery="deferred"))


# -- the issue's probes, by name -----------------------------------------------------------
def probe_tool() -> tuple[af.Agent, list[Any]]:
    ran: list[Any] = []

    def add(args: Any) -> Any:
        ran.append(dict(args))
        return args["a"] + args["b"]

    tool = af.define_tool(name="add", description="Add.", input_schema=NUMBERS, execute=add)
    replies = [asks("add", {"a": 2, "b": 3}), asks("add", {"a": "2"}), "done"]
    agent = af.Agent(
        provider=af.MockProvider(replies), model="m", tools=[tool], ports=fixed_ports()
    )
    return agent, ran


def probe_rows(edit: Callable[[af.Agent], Any] | None) -> tuple[list[tuple[str, bytes]], Any]:
    agent, ran = probe_tool()
    if edit is not None:
        agent.on("*", edit)
    result = agent.run_sync("go")
    assert ran == [{"a": 2, "b": 3}]
    history = result.state["history"]
    assert history[1]["tool_calls"][0]["arguments"] == {"a": 2, "b": 3}
    assert history[2]["content"] == "5"
    calls = af.tool_calls(agent.store, result.run_id)
    assert [c.arguments for c in calls] == [{"a": 2, "b": 3}, {"a": "2"}]
    return [(e.type, bytes(e.body)) for e in agent.store.read(result.run_id)], history


def test_a_listener_rewriting_tool_start_arguments_changes_nothing(
    verified_runs: VerifiedRuns,
) -> None:
    def rewrite(event: AgentEvent) -> None:
        if isinstance(event, af.ToolStart) and isinstance(event.arguments, dict):
            event.arguments["a"] = 1000

    assert probe_rows(rewrite) == probe_rows(None)
    assert len(verified_runs.results) == 2


def test_a_listener_editing_args_invalid_issues_changes_nothing(
    verified_runs: VerifiedRuns,
) -> None:
    def edit(event: AgentEvent) -> None:
        if isinstance(event, af.ArgsInvalid):
            event.issues[0]["message"] = "edited by a listener"
            event.issues.append({"path": "$.z", "message": "invented"})
            del event.issues[0]["path"]

    edited_rows, edited_history = probe_rows(edit)
    rows, history = probe_rows(None)
    assert edited_rows == rows
    teaching = history[4]["content"]
    assert edited_history[4]["content"] == teaching and "edited" not in teaching
    assert len(verified_runs.results) == 2


def test_a_listener_deleting_members_does_not_fail_the_run() -> None:
    assert probe_rows(delete) == probe_rows(None)


def test_each_listener_gets_its_own_copy() -> None:
    agent, _ = probe_tool()
    got: list[Any] = []
    agent.on(TOOL_START, mutate)
    agent.on(TOOL_START, lambda event: got.append(event.arguments))
    agent.on(TOOL_START, delete)
    agent.on(TOOL_START, lambda event: got.append(event.arguments))
    agent.run_sync("go")
    assert got == [{"a": 2, "b": 3}, {"a": 2, "b": 3}, {"a": "2"}, {"a": "2"}]
    assert got[0] is not got[1]


def test_listeners_get_what_the_record_holds() -> None:
    """Recorded kinds: the row's payload (its run id aside); tool_start: the arguments the
    history holds; the copies keep the types (a float stays a float)."""
    agent, _ = probe_tool()
    seen: list[AgentEvent] = []
    agent.on("*", seen.append)
    result = agent.run_sync("go")
    recorded = [e.decoded() for e in agent.store.read(result.run_id) if e.type == "event"]
    delivered = [
        {"name": e.kind, "payload": {k: v for k, v in e.payload().items() if k != "run_id"}}
        for e in seen
        if e.kind == ARGS_INVALID
    ]
    assert delivered == recorded
    starts = [e for e in seen if isinstance(e, af.ToolStart)]
    assert [s.arguments for s in starts] == [
        m["tool_calls"][0]["arguments"] for m in result.state["history"] if m.get("tool_calls")
    ]
    ends = [e for e in seen if isinstance(e, af.LLMEnd)]
    assert all(type(e.duration_ms) is float and type(e.usage["input"]) is int for e in ends)


def test_a_tool_editing_its_arguments_changes_nothing() -> None:
    """The same hole from the tools' side: a tool gets its own copy of the arguments, so
    editing them changes neither the history nor what the features compare (the repeated
    call is still noticed)."""

    def run(edit: bool) -> list[tuple[str, bytes]]:
        def add(args: Any) -> Any:
            total = args["a"] + args["b"]
            if edit:
                args["a"] = 1000
                del args["b"]
            return total

        tool = af.define_tool(name="add", description="Add.", input_schema=NUMBERS, execute=add)
        replies = [asks("add", {"a": 2, "b": 3}), asks("add", {"a": 2, "b": 3}), "done"]
        agent = af.Agent(
            provider=af.MockProvider(replies), model="m", tools=[tool], ports=fixed_ports()
        )
        result = agent.run_sync("go")
        calls = [m for m in result.state["history"] if m.get("tool_calls")]
        assert [c["tool_calls"][0]["arguments"] for c in calls] == [{"a": 2, "b": 3}] * 2
        assert [c.arguments for c in af.tool_calls(agent.store, result.run_id)] == [
            {"a": 2, "b": 3}
        ] * 2
        return [(e.type, bytes(e.body)) for e in agent.store.read(result.run_id)]

    edited = run(edit=True)
    assert edited == run(edit=False)
    assert any(b"agentfootprint.tools.repeated_call" in body for _, body in edited)


def test_editing_a_results_state_does_not_change_a_continued_run() -> None:
    """The same hole from the caller's side: ``RunResult.state`` is a copy, so editing it
    cannot make a continued run serve what its receipts and log do not say."""

    def conversation(edit: bool) -> tuple[list[tuple[str, bytes]], list[Any]]:
        provider = af.MockProvider(["one", "two"])
        agent = af.Agent(provider=provider, model="m", ports=fixed_ports())
        first = agent.run_sync("go")
        if edit:
            first.state["history"][0]["content"] = "edited by the caller"
            first.state["history"].append({"role": "user", "content": "added"})
        second = agent.run_sync("again", continue_from=first)
        rows = [
            (e.type, bytes(e.body)) for r in (first, second) for e in agent.store.read(r.run_id)
        ]
        return rows, provider.requests

    edited, served = conversation(edit=True)
    assert (edited, served) == conversation(edit=False)
    assert served[1]["messages"][0] == {"role": "user", "content": "go"}


# -- raising, cancelling -------------------------------------------------------------------
@pytest.mark.parametrize("is_async", [False, True])
def test_a_listener_raising_cancelled_error_is_contained(is_async: bool) -> None:
    def raises(event: AgentEvent) -> None:
        raise asyncio.CancelledError

    async def raises_async(event: AgentEvent) -> None:
        await asyncio.sleep(0)
        raise asyncio.CancelledError

    agent, _ = probe_tool()
    agent.on("*", raises_async if is_async else raises)
    assert agent.run_sync("go").answer == "done"


def test_a_listener_cancelling_the_runs_task_ends_the_run_cancelled() -> None:
    """``task.cancel()`` is a cancel of the run, whoever holds the task: honoured, and the
    run is closed ``failed`` with the cancellation on the record (verified)."""
    agent, ran = probe_tool()

    def cancel(event: AgentEvent) -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()

    agent.on(TOOL_START, cancel)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(agent.run("go"))
    assert len(ran) <= 1  # cancelled at the run's next await: no further call
    (run_id,) = agent.store.run_ids()
    close = [e.decoded() for e in agent.store.read(run_id) if e.type == "run.close"]
    assert close[0]["outcome"] == "failed"
    assert close[0]["error"]["type"] == "CancelledError"


def test_the_callers_cancel_while_a_listener_awaits_cancels_the_run() -> None:
    agent, ran = probe_tool()
    entered: list[asyncio.Event] = []

    async def waits(event: AgentEvent) -> None:
        entered[0].set()
        await asyncio.Event().wait()  # until the run is cancelled

    agent.on(TOOL_START, waits)

    async def main() -> None:
        entered.append(asyncio.Event())
        task = asyncio.ensure_future(agent.run("go"))
        await asyncio.wait_for(entered[0].wait(), timeout=60)  # a hang guard only
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert ran == []
    (run_id,) = agent.store.run_ids()
    close = [e.decoded() for e in agent.store.read(run_id) if e.type == "run.close"]
    assert close[0]["outcome"] == "failed"
    assert close[0]["error"]["type"] == "CancelledError"


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_a_listener_stopping_the_process_stops_the_run(stop: type[BaseException]) -> None:
    agent, ran = probe_tool()

    def stops(event: AgentEvent) -> None:
        raise stop

    agent.on(TOOL_START, stops)
    # as raised anywhere in a run: KeyboardInterrupt as it is, SystemExit as the run's failure
    with pytest.raises((KeyboardInterrupt, af.RunError)) as raised:
        asyncio.run(agent.run("go"))
    assert isinstance(raised.value, stop) or isinstance(raised.value.__cause__, stop)
    assert ran == []


# -- copies: only when someone listens, and exact -----------------------------------------
def test_no_copy_is_made_when_nobody_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshots: list[str] = []
    copies: list[str] = []
    snapshot, fresh = events_module._snapshot, events_module._fresh

    def counted_snapshot(event: AgentEvent) -> Any:
        snapshots.append(event.kind)
        return snapshot(event)

    def counted_fresh(taken: Any) -> AgentEvent:
        made = fresh(taken)
        copies.append(made.kind)
        return made

    monkeypatch.setattr(events_module, "_snapshot", counted_snapshot)
    monkeypatch.setattr(events_module, "_fresh", counted_fresh)
    agent, _ = probe_tool()
    agent.run_sync("go")
    assert snapshots == copies == []  # args_invalid was recorded, and copied for nobody
    agent, _ = probe_tool()
    got: list[AgentEvent] = []
    agent.on(TOOL_START, got.append)
    agent.on(TOOL_START, got.append)
    agent.run_sync("go")
    assert snapshots == [TOOL_START] * 2  # serialised once per delivered event
    assert copies == [TOOL_START] * 4 and len({id(e) for e in got}) == 4  # a copy per call


def test_detached_copies_keep_json_types_and_share_nothing() -> None:
    value = {"f": 1.0, "i": 1, "n": None, "b": True, "s": "é", "l": [{"x": [2.5]}], "e": {}}
    copied = detached(value)
    assert copied == value and orjson.dumps(copied) == orjson.dumps(value)
    assert type(copied["f"]) is float and type(copied["i"]) is int
    copied["l"][0]["x"].append(3)
    assert value["l"] == [{"x": [2.5]}]
    odd = {"set": {1, 2}, "big": 2**70}  # not JSON: deep-copied instead
    assert detached(odd) == odd and detached(odd)["set"] is not odd["set"]
