"""Review of the integrity checks against edge runs: each test is a run where the live checks
and ``findings --recompute`` once disagreed (or a replay differed, or an odd input crashed),
kept so it cannot come back."""

from __future__ import annotations

import json
from typing import Any

from feature_support import events_of, fixed_ports, settled

import agentfootprint as af
from agentfootprint.audit.integrity import findings

CONTEXT_ERROR = "agentfootprint.integrity.context_error"
WWPN = "10:00:00:90:fa:12:34:56"
HOST = {"type": "object", "properties": {"host": {"type": "string"}}}
RULED = {
    "type": "object",
    "properties": {"wwpn": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["wwpn", "days"],
}
ARMED: dict[str, Any] = {
    "check_column_types": "warn",
    "notice_empty_lookups": True,
    "notice_prior_turn_evidence": True,
    "integrity_posture": "dev",
    "answer_layer": True,
}


def hosts() -> af.Tool:
    return af.define_tool(
        name="list_hosts",
        description="The hosts and their ports.",
        input_schema=HOST,
        execute=lambda a: json.dumps([{"host": "esx-01", "lun": 3, "wwpn": WWPN}]),
        result_columns={"lun": "number", "wwpn": "string"},
    )


def ruled_lookup(rules: dict[str, Any]) -> af.Tool:
    """A lookup grounded by ``list_hosts`` whose arguments the inputs layer rules."""
    return af.define_tool(
        name="find_port",
        description="The port of a WWPN.",
        input_schema=RULED,
        execute=lambda a: "[]",
        arguments_from=["list_hosts"],
        ask_or_assume=rules,
    )


def filed(agent: af.Agent, result: af.RunResult) -> list[dict[str, Any]]:
    """The run's recorded findings, canaries left out."""
    return [e for e in events_of(agent.store, result.run_id, CONTEXT_ERROR) if not e["synthetic"]]


def listed() -> af.LLMResponse:
    return af.reply(tool_calls=[af.tool_call("list_hosts", {"host": "esx-01"}, id="c1")])


def test_a_lookup_run_with_a_filled_default_recomputes_the_same() -> None:
    """The inputs layer fills a left-out argument with its default: the tool runs with the
    fill, and the recompute reads the fill from the committed ``argument_fills`` (it once read
    the model's arguments alone, and the run's empty-lookup advisory was a difference)."""
    tools = [hosts(), ruled_lookup({"wwpn": {"assume": WWPN}, "days": {"assume": 7}})]
    script = [listed(), af.reply(tool_calls=[af.tool_call("find_port", {}, id="c2")]), "none"]
    agent = af.Agent(
        provider=af.MockProvider(script), model="m", tools=tools, ports=fixed_ports(), **ARMED
    )
    result = agent.run_sync("go")
    (found,) = filed(agent, result)
    assert found["kind"] == "empty-lookup" and found["facts"]["value"] == WWPN
    settled(agent, result, **ARMED)


def plain_lookup(result: str = "[]") -> af.Tool:
    return af.define_tool(
        name="find_port",
        description="The port of a WWPN.",
        input_schema={"type": "object", "properties": {"wwpn": {"type": "string"}}},
        execute=lambda a: result,
        arguments_from=["list_hosts"],
    )


def test_arguments_with_an_escaped_lone_surrogate_are_not_json_to_the_checks_too() -> None:
    """The model sends ``{"wwpn": "\\ud800..."}`` as text: the loop refuses it as not JSON
    (the call is not run), and the choice seam reads it the same way (it once parsed it with
    a laxer reader, filed a finding quoting the lone surrogate, and the finding could not be
    recorded: the run failed)."""
    arguments = '{"wwpn": "\\ud800abcd1234"}'
    script = [listed(), af.reply(tool_calls=[af.tool_call("find_port", arguments, id="c2")])]
    agent = af.Agent(
        provider=af.MockProvider([*script, "none"]),
        model="m",
        tools=[hosts(), plain_lookup()],
        ports=fixed_ports(),
        **ARMED,
    )
    result = agent.run_sync("go")
    assert result.outcome == "answered"
    assert "not valid JSON" in result.state["history"][4]["content"]
    assert [
        e for e in events_of(agent.store, result.run_id, CONTEXT_ERROR) if not e["synthetic"]
    ] == []
    settled(agent, result, **ARMED)


def test_a_result_with_an_escaped_lone_surrogate_is_not_read_as_rows() -> None:
    """A tool returns JSON text whose string escapes a lone surrogate: the text itself is
    fine for the log, the value it decodes to is not; the checks read no rows from it (a
    finding quoting the cell once failed the run)."""
    odd = af.define_tool(
        name="list_hosts",
        description="The hosts and their ports.",
        input_schema=HOST,
        execute=lambda a: '[{"lun": "\\ud800", "wwpn": "x"}]',
        result_columns={"lun": "number", "wwpn": "string"},
    )
    script = [listed(), "none"]
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[odd, plain_lookup()],
        ports=fixed_ports(),
        **ARMED,
    )
    result = agent.run_sync("go")
    assert result.outcome == "answered"
    assert [
        e for e in events_of(agent.store, result.run_id, CONTEXT_ERROR) if not e["synthetic"]
    ] == []
    settled(agent, result, **ARMED)


def test_a_continuation_by_an_agent_declaring_nothing_inherits_no_checks() -> None:
    """Turn 1 arms the checks (its tools declare ``arguments_from``, committed as
    ``tool_contracts``); turn 2 is continued by an agent whose tools declare nothing: it
    checks nothing and files no disposition. The recompute once armed turn 2 from the
    declarations it inherited in state, and filed what the run never did."""
    lookup = plain_lookup()
    first = af.Agent(
        provider=af.MockProvider([listed(), "one host"]),
        model="m",
        tools=[hosts(), lookup],
        ports=fixed_ports(),
        **ARMED,
    )
    earlier = first.run_sync("go")
    bare = af.define_tool(
        name="find_port",
        description="The port of a WWPN.",
        input_schema={"type": "object", "properties": {"wwpn": {"type": "string"}}},
        execute=lambda a: "[]",
    )
    call = af.tool_call("find_port", {"wwpn": "made-up-7777"}, id="d1")
    second = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[call]), "none"]),
        model="m",
        tools=[bare],
        store=first.store,
    )
    later = second.run_sync("and the port?", continue_from=earlier)
    assert later.state["tool_contracts"] == earlier.state["tool_contracts"]  # inherited
    report = findings(first.store, later.run_id, recompute=True)
    assert report.recorded.disposition is None and report.recorded.findings == ()
    assert report.agrees, report.differences
    assert not report.armed
