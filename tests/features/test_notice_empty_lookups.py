"""``notice_empty_lookups``: upstream's recorded reverse-lookup failure, through a real agent.
The HBA listing serves a WWPN, the zone lookup keyed on it comes back ``[]``: one advisory
naming both tools, the value and the call, and the model reads the ``[]`` unchanged. Every run
is verified by the plugin, recomputed from the log (``findings(..., recompute=True)``) and
replayed byte for byte."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, rows, settled

import agentfootprint as af
from agentfootprint.integrity import empty_lookup

CONTEXT_ERROR = "agentfootprint.integrity.context_error"
DISPOSITION = "agentfootprint.integrity.disposition"
#: upstream's EMPTY_LOOKUP_CEILING, verbatim
CEILING = (
    "An empty result can be perfectly true — the thing may exist and simply have nothing to "
    "show right now — so this is a place to look, never a verdict that anything is wrong."
)
WWPN = "10:00:00:90:fa:12:34:56"
#: a WWPN only the switch's port list serves (a tool the lookup does not declare)
SWITCH_WWPN = "20:00:00:25:b5:aa:bb:cc"
HOST = {"type": "object", "properties": {"host": {"type": "string"}}}
BY_WWPN = {"type": "object", "properties": {"wwpn": {"type": "string"}}}


def hba_ports() -> af.Tool:
    """The producer: the host's HBA ports and their WWPNs."""
    return af.define_tool(
        name="list_hba_ports",
        description="The HBA ports of a host.",
        input_schema=HOST,
        execute=lambda a: json.dumps([{"host": "esx-01", "port": "vmhba2", "wwpn": WWPN}]),
    )


def switch_ports() -> af.Tool:
    """A tool that serves WWPNs too, but is not a declared ground of the lookup."""
    return af.define_tool(
        name="list_switch_ports",
        description="The logged-in ports of a switch.",
        input_schema=HOST,
        execute=lambda a: json.dumps([{"port": "fc1/3", "wwpn": SWITCH_WWPN}]),
    )


def zones(result: Any = "[]", declares: bool = True) -> af.Tool:
    """The reverse lookup: the zones a WWPN is in, keyed on a WWPN from ``list_hba_ports``."""
    return af.define_tool(
        name="find_zones_by_wwpn",
        description="The zones a WWPN is a member of.",
        input_schema=BY_WWPN,
        execute=lambda a: result,
        arguments_from=["list_hba_ports"] if declares else None,
    )


def listed(tool: str = "list_hba_ports", call_id: str = "c1") -> af.LLMResponse:
    return af.reply(tool_calls=[af.tool_call(tool, {"host": "esx-01"}, id=call_id)])


def looked_up(value: str = WWPN, call_id: str = "c2") -> af.LLMResponse:
    return af.reply(tool_calls=[af.tool_call("find_zones_by_wwpn", {"wwpn": value}, id=call_id)])


def reverse_lookup() -> list[Any]:
    """Upstream's failure: list the ports, look the WWPN up, answer from the empty result."""
    return [listed(), looked_up(), "vmhba2 on esx-01 is in no zone."]


def tools() -> list[af.Tool]:
    return [hba_ports(), zones()]


def run(
    script: Callable[[], list[Any]] = reverse_lookup,
    made: Callable[[], list[af.Tool]] = tools,
    message: str = "Which zones is esx-01's vmhba2 in?",
    **options: Any,
) -> tuple[af.Agent, af.RunResult]:
    agent = af.Agent(
        provider=af.MockProvider(script()),
        model="m",
        tools=made(),
        ports=fixed_ports(),
        **options,
    )
    return agent, agent.run_sync(message)


def found(agent: af.Agent, result: af.RunResult) -> list[dict[str, Any]]:
    return events_of(agent.store, result.run_id, CONTEXT_ERROR)


def empty_row(agent: af.Agent, result: af.RunResult) -> tuple[bool, int, int, int, int]:
    """The empty-lookup row of the disposition: armed, checked, findings, not applicable,
    unreachable."""
    (disposition,) = events_of(agent.store, result.run_id, DISPOSITION)
    (row,) = [r for r in disposition["rows"] if r["check"] == "empty-lookup"]
    return (
        row["armed"],
        row["checked"],
        row["findings"],
        row["not_applicable"],
        row["unreachable"],
    )


def served_result(agent: af.Agent, result: af.RunResult, call: int, call_id: str) -> str:
    """The content of tool result ``call_id`` the model was served at ``call``, from the log."""
    served = af.served_at(agent.store, result.run_id, call)
    (content,) = [m["content"] for m in served["messages"] if m.get("tool_call_id") == call_id]
    assert isinstance(content, str)
    return content


def test_the_ceiling_is_upstreams_sentence_verbatim() -> None:
    assert empty_lookup.CEILING == CEILING


def test_the_reverse_lookup_that_found_nothing_is_one_advisory_naming_both_tools() -> None:
    agent, result = run(notice_empty_lookups=True)
    (finding,) = found(agent, result)
    assert finding["kind"] == finding["check"] == "empty-lookup"
    assert finding["advisory"] is True and finding["seam"] == "write"
    assert finding["subjects"] == [
        {"kind": "tool", "id": "find_zones_by_wwpn"},
        {"kind": "tool", "id": "list_hba_ports"},
    ]
    assert finding["predicate"] == "wwpn"
    assert finding["witnesses"] == ["c2", "c1"]
    assert finding["facts"] == {
        "value": WWPN,
        "producer": "list_hba_ports",
        "producer_call": "c1",
        "path": "wwpn",
        "shape": "rowset",
    }
    assert finding["message"] == (
        f"'find_zones_by_wwpn' was called with wwpn = \"{WWPN}\" — a value this run itself "
        "produced, in a result from 'list_hba_ports', which 'find_zones_by_wwpn' declares as "
        "where its arguments come from — and the lookup came back with a rowset with zero "
        "rows. That pairing is what makes it worth a look: the run had the identifier, so an "
        "empty answer is either a true absence or a lookup that could never have matched, and "
        f"those two are byte-identical from here. {CEILING} Call id c2. Nothing here blocked "
        "the call, changed the result, or retried anything."
    )
    # the model read the [] exactly as the tool returned it
    assert served_result(agent, result, 2, "c2") == "[]"
    (kept,) = [m for m in result.state["history"] if m.get("tool_call_id") == "c2"]
    assert kept["content"] == "[]" and "is_error" not in kept
    # the listing is no lookup (it declares no grounds): not applicable; the lookup: checked
    assert empty_row(agent, result) == (True, 1, 1, 1, 0)
    report = settled(agent, result, notice_empty_lookups=True)
    assert report.recorded.findings == (finding,)


def test_a_lookup_that_found_rows_files_nothing() -> None:
    made = lambda: [hba_ports(), zones(json.dumps([{"zone": "z_esx01_hba2"}]))]  # noqa: E731
    agent, result = run(made=made, notice_empty_lookups=True)
    assert not found(agent, result)
    assert empty_row(agent, result) == (True, 1, 0, 1, 0)
    settled(agent, result, notice_empty_lookups=True)


def test_a_value_no_declared_producer_served_files_nothing() -> None:
    """The WWPN came from the switch's port list, which the lookup does not declare as its
    ground: the declared producer served something else, so the lookup is checked and
    passes (and the value was served, so no unsupported argument either)."""

    def script() -> list[Any]:
        return [
            af.reply(
                tool_calls=[
                    af.tool_call("list_hba_ports", {"host": "esx-01"}, id="c1"),
                    af.tool_call("list_switch_ports", {"host": "fcsw-a"}, id="c1b"),
                ]
            ),
            looked_up(SWITCH_WWPN),
            "That port is in no zone.",
        ]

    agent, result = run(
        script, lambda: [hba_ports(), switch_ports(), zones()], notice_empty_lookups=True
    )
    assert not found(agent, result)
    assert empty_row(agent, result) == (True, 1, 0, 2, 0)
    assert served_result(agent, result, 2, "c2") == "[]"
    settled(agent, result, notice_empty_lookups=True)


def test_a_lookup_before_its_producer_served_anything_is_unreachable() -> None:
    """The producer is called in the same reply as the lookup: its result was not served
    when the lookup was chosen, so there is no ground to join (the WWPN came from the
    question)."""

    def script() -> list[Any]:
        return [
            af.reply(
                tool_calls=[
                    af.tool_call("list_hba_ports", {"host": "esx-01"}, id="c1"),
                    af.tool_call("find_zones_by_wwpn", {"wwpn": WWPN}, id="c2"),
                ]
            ),
            "No zones.",
        ]

    agent, result = run(script, message=f"Zones of {WWPN}?", notice_empty_lookups=True)
    assert not found(agent, result)
    assert empty_row(agent, result) == (True, 0, 0, 1, 1)
    settled(agent, result, notice_empty_lookups=True)


def test_a_prose_result_is_not_applicable() -> None:
    made = lambda: [hba_ports(), zones(f"No zone has {WWPN} as a member.")]  # noqa: E731
    agent, result = run(made=made, notice_empty_lookups=True)
    assert not found(agent, result)
    assert empty_row(agent, result) == (True, 0, 0, 2, 0)  # the listing's and the prose
    settled(agent, result, notice_empty_lookups=True)


def test_a_declared_absence_is_an_empty_lookup_too() -> None:
    if not hasattr(af, "absent"):
        pytest.skip("af.absent is not exported by the package yet (another helper adds it)")
    absence = af.absent("the zones of a WWPN", ["the fabric's active zoneset"])
    agent, result = run(made=lambda: [hba_ports(), zones(absence)], notice_empty_lookups=True)
    (finding,) = found(agent, result)
    assert finding["facts"]["shape"] == "absence"
    assert (
        "came back with a declared absence — the tool said the search ran and matched nothing."
    ) in finding["message"]
    assert CEILING in finding["message"] and "Call id c2." in finding["message"]
    served = json.loads(served_result(agent, result, 2, "c2"))
    assert served["af_absent"] is True and served["looked_for"] == "the zones of a WWPN"
    assert empty_row(agent, result) == (True, 1, 1, 1, 0)
    settled(agent, result, notice_empty_lookups=True)


def test_a_producer_in_an_earlier_turn_still_grounds_the_lookup() -> None:
    def script() -> list[Any]:
        return [listed(), "esx-01 has vmhba2.", looked_up(), "vmhba2 is in no zone."]

    agent = af.Agent(
        provider=af.MockProvider(script()),
        model="m",
        tools=tools(),
        ports=fixed_ports(),
        notice_empty_lookups=True,
    )
    first = agent.run_sync("Which HBAs does esx-01 have?")
    second = agent.run_sync("And which zones is vmhba2 in?", continue_from=first)
    assert not found(agent, first)
    assert empty_row(agent, first) == (True, 0, 0, 1, 0)
    (finding,) = found(agent, second)
    assert finding["witnesses"] == ["c2", "c1"]  # c1: the first run's call
    assert finding["facts"]["producer_call"] == "c1"
    assert f'wwpn = "{WWPN}"' in finding["message"] and "Call id c2." in finding["message"]
    assert empty_row(agent, second) == (True, 1, 1, 0, 0)
    assert served_result(agent, second, 1, "c2") == "[]"
    settled(agent, first, notice_empty_lookups=True)
    settled(agent, second, notice_empty_lookups=True)


def test_the_same_value_looked_up_twice_is_one_finding() -> None:
    """Asked again in the next reply (the loop appends its repeated-call note to what the
    model reads): both lookups are checked and both fail (the disposition counts items, as
    upstream's ledger does), and the second's finding, of the same identity, is filed once."""

    def script() -> list[Any]:
        return [listed(), looked_up(), looked_up(call_id="c3"), "No zones."]

    agent, result = run(script, notice_empty_lookups=True)
    (finding,) = found(agent, result)
    assert finding["witnesses"] == ["c2", "c1"]  # the first filing is kept
    assert empty_row(agent, result) == (True, 2, 2, 1, 0)
    again = served_result(agent, result, 3, "c3")
    assert again.startswith("[]") and again != "[]"  # the note rides after the rows
    settled(agent, result, notice_empty_lookups=True)


def test_the_same_value_looked_up_twice_in_one_reply_is_one_finding() -> None:
    def script() -> list[Any]:
        twice = [
            af.tool_call("find_zones_by_wwpn", {"wwpn": WWPN}, id="c2"),
            af.tool_call("find_zones_by_wwpn", {"wwpn": WWPN.upper()}, id="c3"),
        ]
        return [listed(), af.reply(tool_calls=twice), "No zones."]

    agent, result = run(script, notice_empty_lookups=True)
    (finding,) = found(agent, result)
    assert finding["witnesses"] == ["c2", "c1"]
    assert empty_row(agent, result) == (True, 2, 2, 1, 0)
    settled(agent, result, notice_empty_lookups=True)


def test_true_without_a_tool_declaring_arguments_from_is_refused() -> None:
    with pytest.raises(af.UsageError, match="needs a tool declaring arguments_from") as caught:
        af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=[hba_ports(), zones(declares=False)],
            notice_empty_lookups=True,
        )
    assert caught.value.option == "notice_empty_lookups"


@pytest.mark.parametrize("bad", ["yes", 1, "true", [True]])
def test_a_value_that_is_not_a_bool_is_refused(bad: Any) -> None:
    with pytest.raises(af.UsageError, match="must be True or False") as caught:
        af.Agent(provider=af.MockProvider([]), model="m", tools=tools(), notice_empty_lookups=bad)
    assert caught.value.option == "notice_empty_lookups"


def test_true_beside_a_redaction_policy_is_refused() -> None:
    with pytest.raises(af.UsageError, match="redaction policy") as caught:
        af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=tools(),
            notice_empty_lookups=True,
            redact=af.conversation_redaction(),
        )
    assert caught.value.option == "redact"


def test_arguments_from_beside_a_redaction_policy_is_refused_without_the_dial() -> None:
    with pytest.raises(af.UsageError, match="redaction policy"):
        af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=tools(),
            redact=af.conversation_redaction(),
        )


def test_absent_and_false_record_the_same_rows_and_never_file_an_empty_lookup() -> None:
    """Without the dial the check is a row of the disposition, unarmed and empty (the
    unsupported-argument check, armed by the declaration alone, still runs); ``False`` is
    the same as leaving it out, byte for byte."""
    absent_agent, absent = run()
    false_agent, false = run(notice_empty_lookups=False)
    assert rows(absent_agent.store, absent.run_id) == rows(false_agent.store, false.run_id)
    assert not found(absent_agent, absent)
    assert empty_row(absent_agent, absent) == (False, 0, 0, 0, 0)
    assert served_result(absent_agent, absent, 2, "c2") == "[]"
    settled(absent_agent, absent)
    settled(false_agent, false, notice_empty_lookups=False)
