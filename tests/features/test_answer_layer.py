"""``answer_layer``: the answer's standing folded from the committed record, recorded as
``answer_assessment`` and ``agentfootprint.answer.assessed``, the standing line, and the
equality law: what each run recorded equals ``assess_run``'s fold over its log.

Every run closed here is verified by the pytest plugin as well, and replayed identically.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, rows
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.audit.assessment import AssessmentReport, assess_run
from agentfootprint.integrity import assessment as fold
from agentfootprint.integrity.assessment import (
    CHECKS,
    REASONS,
    STANDINGS,
    assess,
    line,
    since_of,
)
from agentfootprint.logformat.canonical import parse
from agentfootprint.testing.replay import NoModel, silent_twins

KIND = "agentfootprint.answer.assessed"
QUERY = {"type": "object", "properties": {"q": {"type": "string"}}}
CONSISTENT_TWO = (
    "Consistent with the run's record \u2014 2 checks ran and none fired: what came back "
    "\u00b7 names and numbers. This is not a verification."
)


def lookup(result: Any) -> af.Tool:
    return af.define_tool(
        name="lookup", description="Look it up.", input_schema=QUERY, execute=lambda a: result
    )


def looked_up(answer: str) -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call("lookup", {"q": "hosts"})]), answer]


def agent_of(replies: list[Any], tools: list[af.Tool], **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(replies), model="m", tools=tools, ports=fixed_ports(), **options
    )


def lawful(agent: af.Agent, result: af.RunResult) -> AssessmentReport:
    """The equality law: the recorded assessment (state, event, ``RunResult``) equals the
    fold ``assess_run`` runs over the log; the event names no value."""
    report = assess_run(agent.store, result.run_id)
    assert report.armed and report.matches is True
    assert result.state["answer_assessment"] == report.expected
    assert result.assessment == report.expected
    (event,) = events_of(agent.store, result.run_id, KIND)
    assert event == {k: report.assessment[k] for k in ("standing", "reasons", "checked")}
    return report


def replayed(agent: af.Agent, run_id: str, **options: Any) -> None:
    """A replay by a fresh agent (no model, tools that must not run) records the same."""
    twin = af.Agent(
        provider=NoModel(),
        model="m",
        tools=silent_twins(agent.config.tools, []),
        store=af.MemoryStore(),
        **options,
    )
    again = af.replay_sync(twin, agent.store, run_id)
    assert af.same_recording(agent.store, run_id, twin.store, again.result.run_id)


def test_an_answer_after_no_check_is_not_assessed() -> None:
    agent = agent_of(["Hello there."], [], answer_layer=True)
    result = agent.run_sync("hi")
    assert result.assessment == {"standing": "not-assessed", "reasons": [], "checked": []}
    assert result.answer == "Hello there."
    assert lawful(agent, result).line == "Not assessed \u2014 no check applied to this answer."
    replayed(agent, result.run_id, answer_layer=True)


def test_a_run_stopped_at_max_iterations_is_not_sure() -> None:
    agent = agent_of(looked_up("never read"), [lookup("rows")], answer_layer=True, max_iterations=1)
    result = agent.run_sync("go")
    assert result.outcome == "stopped_early"
    assert result.assessment == {
        "standing": "not-sure",
        "reasons": ["stopped-early"],
        "checked": [],
    }
    report = lawful(agent, result)
    assert report.line == "Not sure \u2014 the run stopped before the model finished."
    replayed(agent, result.run_id, answer_layer=True, max_iterations=1)


def test_values_no_tool_result_carries_are_unsupported_and_served_ones_consistent() -> None:
    tools = [lookup([{"host": "host-1234", "size_mb": 98304}])]
    agent = agent_of(looked_up("host-1234 has 98,304 MB; host-9999 too."), tools, answer_layer=True)
    result = agent.run_sync("go")
    assert result.assessment == {
        "standing": "not-sure",
        "reasons": ["value-unsupported"],
        "checked": ["result-shape", "names-and-numbers"],
    }
    assert lawful(agent, result).line == (
        "Not sure \u2014 names or numbers in the answer appear in no tool result."
    )
    replayed(agent, result.run_id, answer_layer=True)
    # every value served: two checks ran, none fired (never "known")
    agent = agent_of(looked_up("host-1234 has 98,304 MB."), tools, answer_layer=True)
    result = agent.run_sync("go")
    assert result.assessment is not None and result.assessment["standing"] == "consistent"
    assert lawful(agent, result).line == CONSISTENT_TWO


def test_an_empty_result_and_a_declared_absence_are_reasons() -> None:
    agent = agent_of(looked_up("Nothing found."), [lookup([])], answer_layer=True)
    result = agent.run_sync("go")
    assert result.assessment == {
        "standing": "not-sure",
        "reasons": ["empty-undeclared"],
        "checked": ["result-shape"],
    }
    lawful(agent, result)
    replayed(agent, result.run_id, answer_layer=True)
    absence = {"af_absent": True, "looked_for": "hosts", "checked": ["the inventory"]}
    agent = agent_of(looked_up("Nothing found."), [lookup(absence)], answer_layer=True)
    result = agent.run_sync("go")
    assert result.assessment is not None
    assert result.assessment["reasons"] == ["declared-absent"]
    lawful(agent, result)


def test_a_period_the_result_did_not_declare_is_a_reason() -> None:
    """The results layer's row (``period_rows``) of this run: ``undeclared``."""
    schema = {"type": "object", "properties": {"since": {"type": "string"}}}
    tool = af.define_tool(
        name="lookup",
        description="Look it up.",
        input_schema=schema,
        execute=lambda a: [{"n": 1}],
        period="since",
    )
    replies = [af.reply(tool_calls=[af.tool_call("lookup", {"since": "2024-01-01T00:00:00Z"})])]
    agent = agent_of([*replies, "One."], [tool], answer_layer=True)
    result = agent.run_sync("go")
    assert result.assessment == {
        "standing": "not-sure",
        "reasons": ["period-undeclared"],
        "checked": ["result-period", "result-shape"],
    }
    lawful(agent, result)
    replayed(agent, result.run_id, answer_layer=True)


RULED = {
    "type": "object",
    "properties": {"period": {"type": "integer"}, "q": {"type": "string"}},
    "required": ["period", "q"],
}


def report_tool() -> af.Tool:
    return af.define_tool(
        name="report",
        description="Build a report.",
        input_schema=RULED,
        execute=lambda args: {"rows": 3},
        ask_or_assume={"period": {"ask": "How many days?", "choices": [7, 30]}},
    )


def test_a_paused_turn_asks_and_its_resume_is_assessed_on_its_own_results() -> None:
    replies = [af.reply(tool_calls=[af.tool_call("report", {"q": "a"})]), "done"]
    agent = agent_of(replies, [report_tool()], answer_layer={"standing_line": True})
    paused = agent.run_sync("go")
    assert paused.outcome == "paused"
    assert paused.assessment == {
        "standing": "ask",
        "reasons": ["argument-asked"],
        "checked": ["argument-rules"],  # the ruled argument's row: asked
        "line": "Ask \u2014 the run stopped to ask a question before it could answer.",
    }
    assert paused.answer == ""  # a paused run has no answer to carry the line
    lawful(agent, paused)
    # the resume finishes the batch its parent asked for: its results are this run's
    resumed = agent.resume_sync(paused, {"f1": 7})
    assert resumed.outcome == "answered"
    assert resumed.assessment is not None
    assert {k: resumed.assessment[k] for k in ("standing", "reasons", "checked")} == {
        "standing": "consistent",
        "reasons": [],
        "checked": ["argument-rules", "result-shape"],  # the row: answered (a person's)
    }
    lawful(agent, resumed)
    for run in (paused, resumed):
        replayed(agent, run.run_id, answer_layer={"standing_line": True})


def ruled_tool(**rule: Any) -> af.Tool:
    return af.define_tool(
        name="report",
        description="Build a report.",
        input_schema=RULED,
        execute=lambda args: {"rows": 3},
        ask_or_assume={"period": rule},
    )


def test_an_argument_the_rule_assumed_is_a_reason_named_with_its_value() -> None:
    """The model left ``period`` out and the rule's default filled it: the inputs layer's row
    (``argument_rows``, committed with the answer layer armed) fires ``argument-assumed``, and
    the line names the value no call holds (the default, from the row)."""
    replies = [af.reply(tool_calls=[af.tool_call("report", {"q": "a"})]), "3 rows."]
    agent = agent_of(replies, [ruled_tool(assume=30)], answer_layer={"standing_line": True})
    result = agent.run_sync("go")
    assert result.state["argument_rows"] == [
        {
            "tool": "report",
            "tool_call_id": "call_0_0",
            "argument": "period",
            "source": "default",
            "value": 30,
        }
    ]
    assert result.assessment is not None
    assert result.assessment["reasons"] == ["argument-assumed"]
    assert result.assessment["standing"] == "not-sure"
    assert result.answer == (
        "3 rows.\n\nNot sure \u2014 period = 30 was assumed by report's rule, not given by you."
    )
    lawful(agent, result)
    replayed(agent, result.run_id, answer_layer={"standing_line": True})


def test_an_argument_the_model_gave_a_ruled_tool_is_unverified() -> None:
    """The model gave ``period`` itself (not the default): its row's source is ``model``, and
    no record says where the value came from."""
    call = af.tool_call("report", {"q": "a", "period": 7})
    agent = agent_of(
        [af.reply(tool_calls=[call]), "3 rows."], [ruled_tool(assume=30)], answer_layer=True
    )
    result = agent.run_sync("go")
    assert [r["source"] for r in result.state["argument_rows"]] == ["model"]
    assert "value" not in result.state["argument_rows"][0]  # the call holds it
    assert result.assessment is not None
    assert result.assessment["reasons"] == ["argument-unverified"]
    lawful(agent, result)
    replayed(agent, result.run_id, answer_layer=True)


def test_the_inputs_layer_commits_its_rows_only_for_the_answer_layer() -> None:
    """Without the answer layer, the inputs layer records what it did before the layer read
    its rows (its events only): the rows of a run without ``argument_rows``."""
    replies = [af.reply(tool_calls=[af.tool_call("report", {"q": "a"})]), "3 rows."]
    plain = agent_of(list(replies), [ruled_tool(assume=30)])
    result = plain.run_sync("go")
    assert "argument_rows" not in result.state
    paths = [af_json(b).get("path") for t, _, b in rows(plain.store, result.run_id) if t == "write"]
    assert "argument_rows" not in paths and "argument_fills" in paths
    assert [
        e["source"]
        for e in events_of(plain.store, result.run_id, "agentfootprint.findings.argument")
    ] == ["default"]


def test_the_standing_line_changes_the_answer_and_nothing_else() -> None:
    """The same run with and without the line: only ``run.open``, ``answer_assessment``'s
    write and ``final_answer``'s differ; the history keeps the model's words."""
    script = looked_up("Nothing found.")
    plain = agent_of(script, [lookup([])], answer_layer=True)
    base = plain.run_sync("go")
    line_on = {"standing_line": True}
    agent = agent_of(looked_up("Nothing found."), [lookup([])], answer_layer=line_on)
    result = agent.run_sync("go")
    said = "Not sure \u2014 a lookup came back empty without saying what it searched."
    assert result.answer == "Nothing found.\n\n" + said
    assert base.answer == "Nothing found."
    assert result.state["history"] == base.state["history"]
    assert result.state["answer_assessment"] == {**base.state["answer_assessment"], "line": said}
    ours, theirs = rows(agent.store, result.run_id), rows(plain.store, base.run_id)
    assert len(ours) == len(theirs)
    differing = set()
    for mine, other in zip(ours, theirs, strict=True):
        if mine != other:
            body = af_json(mine[2])
            differing.add((mine[0], body.get("path") if mine[0] == "write" else None))
    assert differing == {
        ("run.open", None),
        ("write", "answer_assessment"),
        ("write", "final_answer"),
    }
    lawful(agent, result)
    replayed(agent, result.run_id, answer_layer={"standing_line": True})


def af_json(body: bytes) -> dict[str, Any]:
    value = parse(body)
    assert isinstance(value, dict)
    return value


@dataclasses.dataclass
class Answer:
    a: str


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"answer_layer": "yes"}, "must be True, False or"),
        ({"answer_layer": 1}, "must be True, False or"),
        ({"answer_layer": {"line": True}}, "unknown member 'line'"),
        ({"answer_layer": {"standing_line": "yes"}}, "standing_line must be True or False"),
        ({"answer_layer": {"standing_line": True}, "output_type": Answer}, "output_type"),
    ],
)
def test_misconfiguration_is_refused_at_construction(options: dict[str, Any], says: str) -> None:
    with pytest.raises(af.UsageError, match=says) as info:
        af.Agent(provider=af.MockProvider([]), model="m", **options)
    assert info.value.option == "answer_layer"
    if "output_type" in options:
        assert "standing_line" in str(info.value)


def test_beside_output_type_without_the_line_it_assesses() -> None:
    agent = agent_of(['{"a": "hi"}'], [], answer_layer=True, output_type=Answer)
    result = agent.run_sync("go")
    assert result.output == Answer(a="hi")
    assert result.assessment == {"standing": "not-assessed", "reasons": [], "checked": []}
    lawful(agent, result)


@pytest.mark.parametrize("off", [None, False, "absent"])
def test_absent_records_the_rows_of_an_agent_without_the_option(off: Any) -> None:
    def recorded(**options: Any) -> tuple[af.Agent, af.RunResult]:
        agent = agent_of(looked_up("host-1234 is down."), [lookup([])], **options)
        return agent, agent.run_sync("go")

    base_agent, base = recorded()
    agent, result = recorded(**({} if off == "absent" else {"answer_layer": off}))
    assert rows(agent.store, result.run_id) == rows(base_agent.store, base.run_id)
    assert result.assessment is None and "answer_assessment" not in result.state
    # the fold runs over any run, armed or not
    report = assess_run(agent.store, result.run_id)
    assert not report.armed and report.matches is None
    assert report.assessment["reasons"] == ["empty-undeclared", "value-unsupported"]


def test_a_continuation_assesses_its_own_turn_and_inherits_no_assessment() -> None:
    """Turn 2 reads only what it appended (the parent's empty result is not its reason);
    an unarmed continuation keeps the parent's state but reports no assessment."""
    replies = [*looked_up("Nothing found."), "Fine.", "Still fine."]
    agent = agent_of(replies, [lookup([])], answer_layer=True)
    first = agent.run_sync("go")
    assert first.assessment is not None and first.assessment["reasons"] == ["empty-undeclared"]
    second = agent.run_sync("and now?", continue_from=first)
    assert second.assessment == {"standing": "not-assessed", "reasons": [], "checked": []}
    lawful(agent, second)
    unarmed = af.Agent(
        provider=af.MockProvider(["Later."]), model="m", tools=[lookup([])], store=agent.store
    )
    third = unarmed.run_sync("later?", continue_from=second)
    assert third.assessment is None
    assert third.state["answer_assessment"] == second.state["answer_assessment"]
    report = assess_run(agent.store, third.run_id)
    assert not report.armed and report.assessment["standing"] == "not-assessed"
    replayed(agent, second.run_id, answer_layer=True)


def test_a_writer_whose_record_differs_from_the_fold_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The law is checked, not assumed: a layer that records another standing than the
    fold (patched here) gives a log that verifies and ``matches`` False."""
    import agentfootprint.features.answer_layer as layer

    lied = {"standing": "consistent", "reasons": [], "checked": []}
    monkeypatch.setattr(layer, "assess", lambda state, since, index=None: lied)
    agent = agent_of(looked_up("Nothing found."), [lookup([])], answer_layer=True)
    result = agent.run_sync("go")
    report = assess_run(agent.store, result.run_id)
    assert report.armed and report.matches is False
    assert report.assessment["standing"] == "not-sure"


# -- the fold itself: pure, total ----------------------------------------------------------


def test_the_table_is_upstreams_fold_order_and_words() -> None:
    assert [r.reason for r in REASONS] == [
        "asked",
        "argument-asked",
        "argument-assumed",
        "argument-unverified",
        "declared-absent",
        "empty-undeclared",
        "period-not-held",
        "period-partly-held",
        "period-unknown",
        "period-undeclared",
        "value-unsupported",
        "stopped-early",
    ]
    assert {r.klass for r in REASONS if r.reason in ("asked", "argument-asked")} == {"ask"}
    assert STANDINGS == ("ask", "not-sure", "consistent", "not-assessed")


def test_rows_of_this_run_fire_and_earlier_ones_do_not() -> None:
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "report", "arguments": {"window": "24h"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "report", "content": '{"rows": 3}'},
    ]
    old = {"tool": "report", "tool_call_id": "c0", "argument": "window", "source": "model"}
    state = {
        "history": history,
        "argument_rows": [
            old,
            {"tool": "report", "tool_call_id": "c1", "argument": "window", "source": "default"},
            {"tool": "report", "tool_call_id": "c1", "argument": "days", "source": "default"},
        ],
        "period_rows": [
            {"tool": "report", "tool_call_id": "c0", "verdict": "not-held"},
            {"tool": "report", "tool_call_id": "c1", "verdict": "covered"},
            {"tool": "report", "tool_call_id": "c1", "verdict": "partly-held"},
        ],
        "last_response": {"content": "Done."},
    }
    since = {"history": 0, "argument_rows": 1, "period_rows": 1}
    folded = assess(state, since)
    assert folded["reasons"] == ["argument-assumed", "period-partly-held"]
    assert folded["checked"] == ["argument-rules", "result-period", "result-shape"]
    assert folded["assumed"] == [
        {"tool": "report", "argument": "window", "value": "24h"},
        {"tool": "report", "argument": "days"},
    ]
    assert line(folded) == (
        'Not sure \u2014 window = "24h" was assumed by report\'s rule, not given by you; days '
        "was assumed by report's rule, not given by you; a tool's data covers only part of "
        "the time the question asked about."
    )
    assert "assumed" not in fold.recorded_form(folded, True)
    assert assess(state, {**since, "argument_rows": 0})["reasons"][:3] == [
        "argument-assumed",
        "argument-unverified",
        "period-partly-held",
    ]


def test_a_pause_of_another_kind_is_asked() -> None:
    pending = {"request_id": "pause-1", "kind": "consent", "tool_call_id": "c1"}
    folded = assess({"pending": pending, "last_response": {"content": "x-12345"}}, {})
    assert folded == {"standing": "ask", "reasons": ["asked"], "checked": []}


def test_the_clauses_past_the_cap_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fold, "MAX_CLAUSES", 2)
    said = line(
        {"standing": "not-sure", "reasons": ["empty-undeclared", "period-unknown", "stopped-early"]}
    )
    assert said == (
        "Not sure \u2014 a lookup came back empty without saying what it searched; a tool "
        "could not say what time its data covers; \u2026 and 1 more (in the run record)."
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
KEYS = st.sampled_from(
    ["history", "argument_rows", "period_rows", "pending", "last_response", "stopped_early"]
)


@settings(max_examples=200, deadline=None)
@given(state=st.dictionaries(KEYS, JSON), since=JSON)
def test_the_fold_is_total_and_never_known(state: dict[str, Any], since: Any) -> None:
    folded = assess(state, since)
    assert folded["standing"] in STANDINGS
    assert set(folded["checked"]) <= set(CHECKS)
    assert folded == assess(state, since)  # pure
    assert isinstance(line(folded), str)
    assert since_of(state).keys() == {"history", "argument_rows", "period_rows"}
