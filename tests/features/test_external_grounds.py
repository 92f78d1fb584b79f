"""The unsupported-argument check through an agent, and ``external_grounds``.

A tool declaring ``arguments_from`` arms the check (no option): each string argument of a
call to it is looked for in the request the model chose the call from. Upstream's example,
``4417-ganymede``: a value the model only ever wrote itself, in prose, is not ground. An app
may vouch for values the run never served through ``external_grounds``, a recorded decision:
a replay answers from the record and never asks the app.

Every run is verified by the pytest plugin, recomputed from the log
(``findings(..., recompute=True)``) and replayed byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, rows

import agentfootprint as af
from agentfootprint.audit.integrity import findings
from agentfootprint.features import integrity, registry
from agentfootprint.integrity.unsupported import CEILING

ERROR = "agentfootprint.integrity.context_error"
USED = "agentfootprint.integrity.external_ground_used"
GROUNDS = "agentfootprint.integrity.external_grounds"
DISPOSITION = "agentfootprint.integrity.disposition"
MACHINE = {"type": "object", "properties": {"machine": {"type": "string"}}}
QUESTION = "Which machine is the busy one, and how is it?"
VALUE = "4417-ganymede"
ENTRIES = [{"value": VALUE, "source": "viewer-selection"}]
#: upstream's self-reference template, verbatim (the apostrophe is U+2019), then our ceiling
SELF_REFERENCE = (
    f"'machine_status' was called with machine = \"{VALUE}\", and the only place that value "
    "appears in the frame the model chose from is the model\u2019s own earlier answer. "
    "Rendered text is not evidence \u2014 a value re-read out of prose can be a fragment of "
    "something else entirely. To ground it, call list_machines again and use a value it "
    "returns. Nothing here blocked the call. " + CEILING
)
NOWHERE = (
    "'machine_status' was called with machine = \"4417-europa\", and that value appears "
    "nowhere in the frame the model chose from \u2014 not in the instructions, not in any "
    "message from the user, not in any tool result. Nothing served it, so nothing in this run "
    "can say what it refers to. To ground it, call list_machines again and use a value it "
    "returns. Nothing here blocked the call. " + CEILING
)


def list_machines(*names: str) -> af.Tool:
    """The inventory: the machines it serves."""
    served = names or ("4417-callisto",)
    return af.define_tool(
        name="list_machines",
        description="List the fleet's machines.",
        input_schema={"type": "object", "properties": {}},
        execute=lambda args: json.dumps([{"machine": n} for n in served]),
    )


def machine_status(asked: list[str] | None = None, *, sourced: bool = True) -> af.Tool:
    """The lookup whose argument comes from the inventory (``arguments_from``)."""

    def execute(args: dict[str, Any]) -> str:
        if asked is not None:
            asked.append(args["machine"])
        return json.dumps({"state": "online"})

    return af.define_tool(
        name="machine_status",
        description="The status of one machine.",
        input_schema=MACHINE,
        execute=execute,
        arguments_from=["list_machines"] if sourced else None,
    )


def status(machine: str, call_id: str) -> af.LLMResponse:
    return af.reply(tool_calls=[af.tool_call("machine_status", {"machine": machine}, id=call_id)])


def prose_then_status(machine: str = VALUE) -> list[Any]:
    """Upstream's case in one run: the model writes the value in prose beside an inventory
    call (which does not serve it), then calls the lookup with it."""
    return [
        af.reply(
            f"I believe {VALUE} is the busy one; let me check the fleet.",
            tool_calls=[af.tool_call("list_machines", {}, id="c1")],
        ),
        status(machine, "c2"),
        "It is online.",
    ]


def viewer(answer: Any = ENTRIES, asked: list[int] | None = None) -> Callable[[], Any]:
    """An external grounds provider answering ``answer`` (raising it when it is an
    exception); every provider it makes has one name, so a replay's may stand in."""

    def viewer_selection() -> Any:
        if asked is not None:
            asked.append(1)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return viewer_selection


PROVIDER = viewer.__qualname__ + ".<locals>.viewer_selection"


def run(
    script: list[Any], tools: list[af.Tool], message: str = QUESTION, **options: Any
) -> tuple[af.Agent, af.RunResult]:
    agent = af.Agent(
        provider=af.MockProvider(script), model="m", tools=tools, ports=fixed_ports(), **options
    )
    return agent, agent.run_sync(message)


def settled(agent: af.Agent, *results: af.RunResult, grounds: bool = False, **options: Any) -> None:
    """Each run: the findings recomputed from the log agree with the recorded ones, and a
    replay records the same bytes (with ``grounds``, its provider raising if it is ever
    asked: the replay answers from the record)."""
    asked: list[int] = []
    if grounds:
        options["external_grounds"] = viewer(AssertionError("a replay asked the app"), asked)
    for result in results:
        report = findings(agent.store, result.run_id, recompute=True)
        assert report.agrees, report.differences
        twin = af.Agent(
            provider=af.MockProvider([]), model="m", tools=list(agent.config.tools), **options
        )
        again = af.replay_sync(twin, agent.store, result.run_id)
        assert again.calls_checked == result.calls
        assert af.same_recording(agent.store, result.run_id, twin.store, again.result.run_id)
    assert asked == []


def filed(agent: af.Agent, result: af.RunResult) -> list[dict[str, Any]]:
    return events_of(agent.store, result.run_id, ERROR)


def ledger_row(agent: af.Agent, result: af.RunResult) -> dict[str, Any]:
    (disposition,) = events_of(agent.store, result.run_id, DISPOSITION)
    (row,) = [r for r in disposition["rows"] if r["check"] == "unsupported-argument"]
    return dict(row)


def finding(
    message: str, *, self_reference: bool, value: str, served: int, assistant: int
) -> dict[str, Any]:
    """The finding on call ``c2`` as recorded."""
    return {
        "check": "unsupported-argument",
        "kind": "unsupported-argument",
        "seam": "choice",
        "subjects": [{"kind": "tool", "id": "machine_status"}],
        "witnesses": ["c2"],
        "predicate": "machine",
        "advisory": False,
        "synthetic": False,
        "message": message,
        "facts": {
            "path": "machine",
            "value": value,
            "self_reference": self_reference,
            "served": served,
            "assistant": assistant,
        },
    }


def test_a_value_only_in_the_models_own_earlier_prose_files_the_self_reference_finding() -> None:
    asked: list[str] = []
    agent, result = run(prose_then_status(), [list_machines(), machine_status(asked)])
    assert filed(agent, result) == [
        # served: the question and the inventory's result; written: the model's one reply
        finding(SELF_REFERENCE, self_reference=True, value=VALUE, served=2, assistant=1)
    ]
    assert asked == [VALUE] and result.outcome == "answered"  # nothing blocked the call
    # one disposition per reply: the armed call checked; the inventory reply and the
    # answer held no armed call
    assert ledger_row(agent, result) == {
        "check": "unsupported-argument",
        "seam": "choice",
        "armed": True,
        "checked": 1,
        "findings": 1,
        "not_applicable": 2,
        "unreachable": 0,
        "synthetic": 0,
    }
    assert not events_of(agent.store, result.run_id, GROUNDS)  # no provider, nothing asked
    settled(agent, result)


def test_an_earlier_turns_answer_is_the_models_own_prose_too() -> None:
    script: list[Any] = [f"{VALUE} is the busiest machine.", status(VALUE, "c2"), "It is online."]
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[list_machines(), machine_status()],
        ports=fixed_ports(),
    )
    first = agent.run_sync("Which machine is the busiest?")
    second = agent.run_sync("And how is it?", continue_from=first)
    assert filed(agent, first) == []
    # served: the two questions; written: turn 1's answer
    assert filed(agent, second) == [
        finding(SELF_REFERENCE, self_reference=True, value=VALUE, served=2, assistant=1)
    ]
    settled(agent, first, second)


def test_a_value_served_nowhere_gets_the_nowhere_message() -> None:
    agent, result = run(prose_then_status("4417-europa"), [list_machines(), machine_status()])
    assert filed(agent, result) == [
        finding(NOWHERE, self_reference=False, value="4417-europa", served=2, assistant=1)
    ]
    settled(agent, result)


@pytest.mark.parametrize(
    ("inventory", "message", "options"),
    [
        (("4417-callisto", VALUE), QUESTION, {}),  # a tool result serves it
        ((), "How is 4417-GANYMEDE doing?", {}),  # the person's message, any case
        ((), QUESTION, {"system": ["The fleet: 4417-callisto and 4417-ganymede."]}),
    ],
    ids=["tool-result", "user-message", "system-prompt"],
)
def test_a_value_the_request_served_files_nothing(
    inventory: tuple[str, ...], message: str, options: dict[str, Any]
) -> None:
    tools = [list_machines(*inventory), machine_status()]
    agent, result = run(prose_then_status(), tools, message, **options)
    assert filed(agent, result) == []
    row = ledger_row(agent, result)
    assert (row["checked"], row["findings"], row["not_applicable"]) == (1, 0, 2)
    settled(agent, result, **options)


def test_an_external_ground_excuses_the_value_and_names_its_source() -> None:
    asked: list[int] = []
    script = [*prose_then_status()[:2], status("4417-callisto", "c3"), "Both are online."]
    agent, result = run(
        script, [list_machines(), machine_status()], external_grounds=viewer(ENTRIES, asked)
    )
    assert filed(agent, result) == []
    assert events_of(agent.store, result.run_id, USED) == [
        {
            "tool": "machine_status",
            "tool_call_id": "c2",
            "path": "machine",
            "value": VALUE,
            "source": "viewer-selection",
        }
    ]
    # asked only for a reply holding a value its frame serves nowhere (call 1's): never for
    # call 2's, whose value the inventory served, nor the inventory reply or the answer
    assert asked == [1]
    assert events_of(agent.store, result.run_id, GROUNDS) == [
        {"call": 1, "provider": PROVIDER, "status": "ok", "entries": ENTRIES}
    ]
    row = ledger_row(agent, result)
    assert (row["checked"], row["findings"], row["not_applicable"]) == (2, 0, 2)
    opened = next(iter(agent.store.read(result.run_id))).decoded()
    assert opened["options"]["external_grounds"] == PROVIDER  # type: ignore[index]
    settled(agent, result, grounds=True)


def test_a_provider_that_raises_contributes_nothing_and_the_run_goes_on() -> None:
    tools = [list_machines(), machine_status()]
    plain_agent, plain = run(prose_then_status(), tools)
    agent, result = run(
        prose_then_status(), tools, external_grounds=viewer(RuntimeError("viewer is down"))
    )
    assert result.outcome == "answered" and result.answer == "It is online."
    assert filed(agent, result) == filed(plain_agent, plain) != []  # as without it
    assert events_of(agent.store, result.run_id, GROUNDS) == [
        {
            "call": 1,
            "provider": PROVIDER,
            "status": "failed",
            "entries": [],
            "error": "RuntimeError",
        }
    ]
    assert events_of(agent.store, result.run_id, USED) == []
    settled(agent, result, grounds=True)


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        VALUE,
        ENTRIES[0],  # one entry, not a list of them
        [VALUE],
        [{"value": VALUE}],
        [{"value": VALUE, "source": "   "}],
        [{"value": 4417, "source": "viewer-selection"}],
        [{"value": "\ud800" + VALUE, "source": "viewer-selection"}],  # no log holds it
        [{"value": VALUE, "source": "viewer-\udc00"}],
        object(),
    ],
    ids=[
        "none",
        "str",
        "dict",
        "strs",
        "no-source",
        "blank-source",
        "number",
        "surrogate",
        "surrogate-source",
        "object",
    ],
)
def test_a_provider_returning_garbage_contributes_nothing(garbage: Any) -> None:
    tools = [list_machines(), machine_status()]
    plain_agent, plain = run(prose_then_status(), tools)
    agent, result = run(prose_then_status(), tools, external_grounds=viewer(garbage))
    assert result.outcome == "answered"
    assert filed(agent, result) == filed(plain_agent, plain) != []
    assert events_of(agent.store, result.run_id, GROUNDS) == [
        {"call": 1, "provider": PROVIDER, "status": "ok", "entries": []}
    ]
    assert events_of(agent.store, result.run_id, USED) == []
    settled(agent, result, grounds=True)


def test_only_the_usable_entries_are_recorded_and_used() -> None:
    answer = [{"value": 5, "source": "x"}, "junk", {**ENTRIES[0], "note": "extra"}]
    agent, result = run(
        prose_then_status(), [list_machines(), machine_status()], external_grounds=viewer(answer)
    )
    assert filed(agent, result) == []
    assert [e["entries"] for e in events_of(agent.store, result.run_id, GROUNDS)] == [ENTRIES]
    assert [e["source"] for e in events_of(agent.store, result.run_id, USED)] == [
        "viewer-selection"
    ]
    settled(agent, result, grounds=True)


def test_the_ledger_counts_a_reply_with_two_findings_once() -> None:
    text = {"type": "string"}
    schema = {"type": "object", "properties": {"machine": text, "peer": text}}
    pair = af.define_tool(
        name="machine_status",
        description="The status of a machine and its peer.",
        input_schema=schema,
        execute=lambda args: "online",
        arguments_from=["list_machines"],
    )
    both = {"machine": VALUE, "peer": "4417-europa"}
    script = [af.reply(tool_calls=[af.tool_call("machine_status", both, id="c2")]), "done"]
    agent, result = run(script, [list_machines(), pair])
    assert len(filed(agent, result)) == 2
    settled(agent, result)
    row = ledger_row(agent, result)
    assert row["findings"] <= row["checked"] == 1


def test_a_summary_listener_gets_the_finding_and_the_run_answers() -> None:
    heard: list[af.AgentEvent] = []
    agent = af.Agent(
        provider=af.MockProvider(prose_then_status()),
        model="m",
        tools=[list_machines(), machine_status()],
        ports=fixed_ports(),
        observer_delivery="deferred",
        observer_delivery_options={"capture": "summary"},
    )
    agent.on(ERROR, heard.append)
    result = agent.run_sync(QUESTION)
    assert result.outcome == "answered"
    assert [e.payload()["kind"] for e in heard] == ["unsupported-argument"]


@pytest.mark.parametrize(
    ("options", "named", "says"),
    [
        ({"external_grounds": ENTRIES}, "external_grounds", "function of no arguments"),
        ({"external_grounds": "viewer-selection"}, "external_grounds", "function"),
        (
            {
                "external_grounds": viewer(),
                "tools": [list_machines(), machine_status(sourced=False)],
            },
            "external_grounds",
            "arguments_from",
        ),
        (
            {"external_grounds": viewer(), "redact": af.RedactionPolicy(keys=["card"])},
            "redact",
            "integrity",
        ),
    ],
    ids=["entries", "str", "no-arguments-from", "redact"],
)
def test_construction_refuses(options: dict[str, Any], named: str, says: str) -> None:
    given = {"tools": [list_machines(), machine_status()], **options}
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider([]), model="m", **given)
    assert caught.value.option == named
    assert says in str(caught.value)


def test_arguments_from_is_refused_beside_redact_without_any_dial() -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=[list_machines(), machine_status()],
            redact=af.RedactionPolicy(keys=["machine"]),
        )
    assert caught.value.option == "redact"


@pytest.mark.parametrize("given", [{}, {"external_grounds": None}], ids=["absent", "none"])
def test_absent_records_the_rows_of_a_seam_without_the_feature(given: dict[str, Any]) -> None:
    tools = [list_machines(), machine_status(sourced=False)]
    options: dict[str, Any] = {"model": "m", "tools": tools}
    agent, result = run(prose_then_status(), tools, **given)
    assert integrity.FEATURE not in agent.seam.features
    bare = af.Agent(provider=af.MockProvider(prose_then_status()), ports=fixed_ports(), **options)
    features = [f for f in registry.all_features() if f is not integrity.FEATURE]
    bare.seam = registry.Seam.build(bare.config.options, features=features)
    bare.chart = bare.seam.chart
    again = bare.run_sync(QUESTION)
    assert rows(agent.store, result.run_id) == rows(bare.store, again.run_id)
    assert len(rows(agent.store, result.run_id)) > 2  # not vacuous
    settled(agent, result)
