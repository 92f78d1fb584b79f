"""Random conversations under random integrity dials: what a run files, today's checks
recompute from its log, and the run replays byte for byte.

Each example draws 2-3 tools with random declarations (``arguments_from`` among the other
tools, ``result_columns`` of random types, sometimes a ``period``), a script of 1-3 turns
(each continuing the last) whose calls take values the run served earlier or fresh ones,
and results that are rowsets, empty rowsets, declared absences, prose, JSON of the wrong
shape or errors; the dials (``check_column_types``, ``notice_empty_lookups``,
``notice_prior_turn_evidence``, ``integrity_posture``, an ``external_grounds`` provider
yielding some of the values, raising, or returning garbage) are drawn where their
declarations allow. For every run: ``findings(store, run, recompute=True).agrees``, the
disposition is recorded exactly when something is armed, and a replay (whose provider is
never asked) records the same rows.

A deliberately broken check is caught by the recompute (and ``findings --recompute`` exits 1).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.audit.integrity import findings
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, main
from agentfootprint.integrity import empty_lookup
from agentfootprint.integrity.contracts import COLUMN_TYPES, Contract
from agentfootprint.integrity.passes import Armed
from agentfootprint.integrity.rail import Judgement, ToolCall, string_leaves
from agentfootprint.store.base import EventStore
from agentfootprint.testing.records import recorded_events
from examples_budget import scaled
from integrity_support import WWPN, producer_and_lookup

DISPOSITION = "agentfootprint.integrity.disposition"
TOOL_NAMES = ("list_hosts", "lookup", "volumes")
SCHEMA = {
    "type": "object",
    "properties": {
        "q": {"type": "string"},
        "window": {"type": "string"},
        "filter": {"type": "object"},
    },
}
COLUMNS = ("lun", "wwpn", "size", "seen", "up")
#: identifiers of the kinds upstream's failures carry, and short ones the checks skip
IDS = (
    "10:00:00:90:fa:12:34:56",
    "vol-0a1b2c3d",
    "host-17",
    "ganymede-4417",
    "4417-ganymede",
    "rack",
    "ab",
    "LUN7",
    "2024-05-01",
    "2024-05-01T09:00:00Z",
    "1240",
)
#: results of the wrong shape for every check: a wrapper, scalars, nested lists, mixed rows
WRONG = (
    {"rows": [{"lun": 1}]},
    42,
    None,
    True,
    [[1, 2]],
    [1, {"lun": 2}],
    '[{"lun": "3"}] -- a note after the rows',
    "[]",
)
RAISE = "raise"  #: a result spec: the tool raises (an error result)

# Two inputs the checks once got wrong (each has its own test below), drawn by the property:
#: arguments whose keys are not in canonical (sorted) order (the live checks walked them in
#: the order the model sent, the recompute in the order the log keeps)
KEYS_IN_ANY_ORDER = True
#: an error result (a tool that raised) under check_column_types="enforce" (its replay asked
#: the rows_refused decision port a question the original never asked)
ERRORS_UNDER_ENFORCE = True


@dataclass(frozen=True, kw_only=True)
class Decl:
    """One tool's declarations."""

    name: str
    arguments_from: tuple[str, ...] | None
    result_columns: Mapping[str, Any] | None
    period: str | None


@dataclass(frozen=True, kw_only=True)
class Conversation:
    tools: tuple[Decl, ...]
    #: per turn: its replies, each ``("calls", ((tool, call id, arguments), ...))`` or
    #: ``("answer", text)``
    turns: tuple[tuple[tuple[str, Any], ...], ...]
    #: by turn and call id (``"1/r0c0"``): what the tool returns (or RAISE); call ids may
    #: repeat from one turn to the next, as a provider's do
    results: Mapping[str, Any]
    dials: Mapping[str, Any]
    grounds: Any  #: None, a list of entries, RAISE, or garbage the provider returns


# -- strategies -------------------------------------------------------------------------------

cells = st.one_of(
    st.integers(-5, 100_000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.none(),
    st.sampled_from(IDS),
    st.text(alphabet="abcXYZ019:-_ ", max_size=10),
    st.lists(st.integers(0, 3), max_size=2),
)
rows = st.dictionaries(st.sampled_from((*COLUMNS, "name")), cells, max_size=4)
column_specs = st.one_of(
    st.sampled_from(COLUMN_TYPES),
    st.builds(
        lambda t, n: {"type": t, "nullable": n}, st.sampled_from(COLUMN_TYPES), st.booleans()
    ),
)
results = st.one_of(
    st.lists(rows, min_size=1, max_size=3),  # a rowset
    st.just([]),
    st.builds(lambda what: af.absent(what, ["the index"]), st.sampled_from(IDS)),
    st.builds(lambda a, b: f"Found {a} next to {b}.", st.sampled_from(IDS), st.sampled_from(IDS)),
    st.sampled_from(WRONG),
    st.just(RAISE),
)


def leaves(value: Any) -> list[str]:
    """The strings a result serves (what later arguments may take)."""
    if value == RAISE:
        return []
    if isinstance(value, str):
        return [value, *(w.strip(".") for w in value.split())]
    return [s for _, s in string_leaves(value)]


def fresh_or_served(draw: st.DrawFn, served: list[str]) -> str:
    choices = [st.sampled_from(IDS), st.text(alphabet="abcd-01234:", max_size=12)]
    if served:
        pool = st.sampled_from(served)
        choices += [pool, pool, pool.map(str.upper), pool.map(lambda s: s[1:-1])]
    return draw(st.one_of(choices))


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    names = TOOL_NAMES[: draw(st.integers(2, 3))]
    decls = []
    for name in names:
        others = [n for n in names if n != name]
        sources = draw(st.none() | st.lists(st.sampled_from(others), min_size=1, unique=True))
        columns = draw(
            st.none() | st.dictionaries(st.sampled_from(COLUMNS), column_specs, min_size=1)
        )
        period = draw(st.sampled_from((None, None, None, "window")))
        decls.append(
            Decl(
                name=name,
                arguments_from=None if sources is None else tuple(sources),
                result_columns=columns,
                period=period,
            )
        )
    served: list[str] = []
    asked: list[str] = []
    returned: dict[str, Any] = {}
    turns = []
    reused = draw(st.booleans())  #: each turn's call ids the same as the last's
    for turn in range(draw(st.integers(1, 3))):
        replies: list[tuple[str, Any]] = []
        for reply in range(draw(st.integers(0, 3))):
            batch = []
            for k in range(draw(st.integers(1, 2))):
                call_id = f"r{reply}c{k}" if reused else f"t{turn}r{reply}c{k}"
                arguments: dict[str, Any] = {"q": fresh_or_served(draw, served)}
                if draw(st.integers(0, 3)) == 0:  # after "q": not in canonical order
                    arguments["filter"] = {"hosts": [fresh_or_served(draw, served), 7]}
                if not KEYS_IN_ANY_ORDER:
                    arguments = dict(sorted(arguments.items()))
                asked += [s for _, s in string_leaves(arguments)]
                returned[f"{turn}/{call_id}"] = draw(results)
                batch.append((draw(st.sampled_from(names)), call_id, arguments))
            for _, call_id, _ in batch:  # served once the batch has run
                served += leaves(returned[f"{turn}/{call_id}"])
            replies.append(("calls", tuple(batch)))
        said = draw(
            st.lists(st.sampled_from(served) if served else st.sampled_from(IDS), max_size=3)
        )
        replies.append(("answer", " and ".join(["The answer", *said]) + "."))
        turns.append(tuple(replies))

    sourced = any(d.arguments_from for d in decls)
    typed = any(d.result_columns for d in decls)
    dials: dict[str, Any] = {}
    posture = draw(st.sampled_from((None, "observe", "dev")))
    if posture is not None:
        dials["integrity_posture"] = posture
    if typed:
        dials["check_column_types"] = draw(st.sampled_from(("off", "warn", "enforce")))
    if sourced and draw(st.booleans()):
        dials["notice_empty_lookups"] = True
    if draw(st.booleans()):
        dials["notice_prior_turn_evidence"] = True
    grounds: Any = None
    if sourced and draw(st.booleans()):
        grounds = draw(
            st.one_of(
                st.lists(st.sampled_from(asked or list(IDS)), max_size=3).map(
                    lambda values: [{"value": v, "source": "viewer-selection"} for v in values]
                ),
                st.just(RAISE),
                st.sampled_from(("not a list", [{"value": 3}], [{"value": "", "source": "x"}])),
            )
        )
    if dials.get("check_column_types") == "enforce" and not ERRORS_UNDER_ENFORCE:
        returned = {i: [] if r == RAISE else r for i, r in returned.items()}
    return Conversation(
        tools=tuple(decls),
        turns=tuple(turns),
        results=returned,
        dials=dials,
        grounds=grounds,
    )


# -- running a conversation -------------------------------------------------------------------


def tools_of(
    conversation: Conversation, turn: list[int] | None = None, *, replay: bool = False
) -> list[af.Tool]:
    """The tools; ``turn[0]`` is the turn being run (a result is keyed by it)."""

    def execute(arguments: Any, ctx: af.ToolContext) -> Any:
        assert not replay and turn is not None, "a replay ran a tool"
        value = conversation.results[f"{turn[0]}/{ctx.tool_call_id}"]
        if value == RAISE:
            raise RuntimeError(f"{ctx.tool} is down")
        return value

    return [
        af.define_tool(
            name=d.name,
            description=f"The {d.name} tool.",
            input_schema=SCHEMA,
            execute=execute,
            arguments_from=None if d.arguments_from is None else list(d.arguments_from),
            result_columns=d.result_columns,
            period=d.period,
        )
        for d in conversation.tools
    ]


def grounds_provider(given: Any, *, replay: bool = False) -> Callable[[], Any]:
    """The app's provider (one qualified name for the run and its replay's, whose provider
    must never be asked)."""

    def grounds() -> Any:
        assert not replay, "a replay asked the external grounds provider"
        if given == RAISE:
            raise RuntimeError("the viewer is gone")
        return given

    return grounds


def options_of(conversation: Conversation, *, replay: bool = False) -> dict[str, Any]:
    options = dict(conversation.dials)
    if conversation.grounds is not None:
        options["external_grounds"] = grounds_provider(conversation.grounds, replay=replay)
    return options


def script_of(conversation: Conversation) -> list[Any]:
    script: list[Any] = []
    for turn in conversation.turns:
        for kind, item in turn:
            if kind == "answer":
                script.append(item)
            else:
                script.append(
                    af.reply(
                        tool_calls=[
                            af.tool_call(tool, arguments, id=i) for tool, i, arguments in item
                        ]
                    )
                )
    return script


def expected_armed(conversation: Conversation) -> bool:
    contracts = {t.name: t.contract for t in tools_of(conversation) if t.contract is not None}
    return Armed.from_options(conversation.dials).any(contracts)


def check_run(conversation: Conversation, store: EventStore, result: af.RunResult) -> None:
    assert result.outcome == "answered"
    report = findings(store, result.run_id, recompute=True)
    assert report.agrees, report.differences
    # the disposition is recorded exactly when a check is armed (or the posture is dev)
    armed = expected_armed(conversation)
    assert len(recorded_events(store, result.run_id, DISPOSITION)) == int(armed)
    assert (report.recorded.disposition is not None) is armed
    assert report.armed is (armed or bool(report.recorded.period_rows))

    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=tools_of(conversation, replay=True),
        **options_of(conversation, replay=True),
    )
    again = af.replay_sync(twin, store, result.run_id)
    assert again.calls_checked == result.calls
    assert af.same_recording(store, result.run_id, twin.store, again.result.run_id)
    assert findings(twin.store, again.result.run_id, recompute=True).agrees


#: a call id the provider reuses across turns (r0c0: a producer in turn 1, another tool
#: after): the recompute named the producer's earlier result by the LAST call with its id,
#: so an empty lookup found no ground where the run found one (the explore profile's find)
REUSED_ID = Conversation(
    tools=(
        Decl(name="list_hosts", arguments_from=None, result_columns=None, period=None),
        Decl(name="lookup", arguments_from=None, result_columns=None, period=None),
        Decl(name="volumes", arguments_from=("list_hosts",), result_columns=None, period=None),
    ),
    turns=(
        (("calls", (("list_hosts", "r0c0", {"q": "10:00:00:90:fa:12:34:56"}),)), ("answer", "a")),
        (("calls", (("lookup", "r0c0", {"q": "10:00:00:90:fa:12:34:56"}),)), ("answer", "b")),
        (
            ("calls", (("volumes", "r1c0", {"q": "10:00:00:90:fa:12:34:56"}),)),
            ("answer", "c"),
        ),
    ),
    results={"0/r0c0": [], "1/r0c0": [{}], "2/r1c0": []},
    dials={"notice_empty_lookups": True},
    grounds=None,
)


@settings(max_examples=scaled(300))
@given(conversation=conversations())
@example(conversation=REUSED_ID)
def test_recorded_findings_are_recomputed_from_the_log_and_the_runs_replay(
    conversation: Conversation,
) -> None:
    turn = [0]
    agent = af.Agent(
        provider=af.MockProvider(script_of(conversation)),
        model="m",
        tools=tools_of(conversation, turn),
        **options_of(conversation),
    )
    previous: af.RunResult | None = None
    for turn[0] in range(len(conversation.turns)):
        result = agent.run_sync(f"question {turn[0]}", continue_from=previous)
        check_run(conversation, agent.store, result)
        previous = result


# -- a broken check is caught ----------------------------------------------------------------


def test_a_broken_check_is_caught_by_the_recompute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "runs.db"
    script: list[Any] = [
        af.reply(tool_calls=[af.tool_call("list_hosts", {"q": "all"}, id="c1")]),
        af.reply(tool_calls=[af.tool_call("lookup", {"q": WWPN}, id="c2")]),
        "It is on no port.",
    ]
    with af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=producer_and_lookup(lambda args: [{"wwpn": WWPN}]),
        store=str(db),
        notice_empty_lookups=True,
    ) as agent:
        run_id = agent.run_sync("Where is the device?").run_id

    report = findings(db, run_id, recompute=True)
    assert report.agrees
    assert [f["kind"] for f in report.recorded.findings] == ["empty-lookup"]
    shown = CliRunner().invoke(main, ["findings", str(db), run_id, "--recompute"])
    assert shown.exit_code == EXIT_OK, shown.output

    def passes(contract: Contract, call: ToolCall, produced: Any) -> Judgement:
        return Judgement.passed()

    monkeypatch.setattr(empty_lookup, "judge_empty_lookup", passes)
    broken = findings(db, run_id, recompute=True)
    assert not broken.agrees
    assert broken.recomputed is not None and broken.recomputed.findings == ()
    assert broken.differences[0].startswith("finding 0: recorded empty-lookup")
    assert broken.differences[0].endswith("recomputed nothing")
    assert any(d.startswith("disposition: ") for d in broken.differences)
    shown = CliRunner().invoke(main, ["findings", str(db), run_id, "--recompute"])
    assert shown.exit_code == EXIT_INVALID, shown.output
    assert "difference(s):" in shown.output
    assert "recorded and recomputed agree" not in shown.output
    document = json.loads(
        CliRunner().invoke(main, ["findings", str(db), run_id, "--recompute", "--json"]).output
    )
    assert document["agrees"] is False and document["recomputed"]["findings"] == []
    # without --recompute the recorded findings are shown, and that is not a difference
    assert CliRunner().invoke(main, ["findings", str(db), run_id]).exit_code == EXIT_OK


# -- what the property leaves out today (KEYS_IN_ANY_ORDER, ERRORS_UNDER_ENFORCE) -------------


def recorded_and_replayed(tools: list[af.Tool], script: list[Any], **options: Any) -> None:
    agent = af.Agent(provider=af.MockProvider(script), model="m", tools=tools, **options)
    result = agent.run_sync("Where is the device?")
    report = findings(agent.store, result.run_id, recompute=True)
    assert report.agrees, report.differences
    twin = af.Agent(provider=af.MockProvider([]), model="m", tools=tools, **options)
    again = af.replay_sync(twin, agent.store, result.run_id)
    assert af.same_recording(agent.store, result.run_id, twin.store, again.result.run_id)


@pytest.mark.parametrize("check", ["unsupported-argument", "empty-lookup"])
def test_findings_do_not_depend_on_the_argument_order(check: str) -> None:
    arguments = {"q": WWPN, "filter": {"hosts": [WWPN]}}  # keys not in canonical order
    if check == "unsupported-argument":  # nothing served the value
        script = [af.reply(tool_calls=[af.tool_call("lookup", arguments, id="c1")]), "None."]
        recorded_and_replayed(producer_and_lookup(lambda args: []), script)
    else:  # the producer served it, the lookup found nothing
        script = [
            af.reply(tool_calls=[af.tool_call("list_hosts", {}, id="c0")]),
            af.reply(tool_calls=[af.tool_call("lookup", arguments, id="c1")]),
            "None.",
        ]
        tools = producer_and_lookup(lambda args: [{"wwpn": WWPN}])
        recorded_and_replayed(tools, script, notice_empty_lookups=True)


def down(args: Any) -> Any:
    raise RuntimeError("the inventory is down")


@pytest.mark.parametrize("refusal_after", [False, True])
def test_an_error_result_under_enforce_replays(refusal_after: bool) -> None:
    script: list[Any] = [af.reply(tool_calls=[af.tool_call("list_hosts", {}, id="c0")])]
    if refusal_after:
        script.append(af.reply(tool_calls=[af.tool_call("list_hosts", {"q": "x"}, id="c1")]))
    script.append("None.")

    def hosts(args: dict[str, Any]) -> Any:
        if "q" not in args:
            raise RuntimeError("the inventory is down")
        return [{"lun": ""}]  # refused: lun is declared a number

    tools = producer_and_lookup(hosts, result_columns={"lun": "number"})
    recorded_and_replayed(tools, script, check_column_types="enforce")
