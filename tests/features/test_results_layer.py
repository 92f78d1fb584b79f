"""``results_layer``: the period each result covers, judged, filed, recorded and said."""

from __future__ import annotations

from typing import Any

import pytest
from feature_support import fixed_ports, rows, tool_messages, without_open

import agentfootprint as af
from agentfootprint.features.results_layer import FEATURE, OPTION, SEPARATOR
from agentfootprint.integrity.period import CLAUSES
from agentfootprint.integrity.rail import tool_calls_of
from agentfootprint.runtime.envelopes import absent, described, period

KIND = "agentfootprint.findings.period"
#: upstream's nightly export: it holds a month and ends at 09:00 on the day asked about
EXPORT = ("2026-08-27T02:00:00Z", "2026-09-26T09:00:00Z")
#: the last hour, asked at 10:30: after the export ends
LAST_HOUR = {"from": "2026-09-26T09:30:00Z", "to": "2026-09-26T10:30:00Z"}
#: an hour the export holds
INSIDE = {"from": "2026-09-25T09:00:00Z", "to": "2026-09-25T10:00:00Z"}
WINDOW = {
    "type": "object",
    "properties": {
        "window": {
            "type": "object",
            "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
        }
    },
}


def backup_runs(
    held: tuple[str, str] | str = EXPORT, *, declares: bool = True, says: bool = True
) -> af.Tool:
    """The failed backup runs of a host, from the nightly export: nothing found, over the
    window asked for (the result says its period unless ``says`` is False)."""

    def execute(args: dict[str, Any]) -> Any:
        window = args["window"]
        if not says:
            return {"runs": []}
        return absent(
            "failed backup runs for host-103",
            ["every job in the nightly export"],
            period=period(window["from"], window["to"], held=held),  # type: ignore[arg-type]
        )

    return af.define_tool(
        name="backup_runs",
        description="Failed backup runs in a window.",
        input_schema=WINDOW,
        execute=execute,
        period="window" if declares else None,
    )


def asked(*windows: dict[str, str], ids: list[str] | None = None) -> list[Any]:
    """One reply per window, each calling ``backup_runs`` once, then the answer."""
    ids = ids or [f"c{i}" for i in range(len(windows))]
    return [
        af.reply(tool_calls=[af.tool_call("backup_runs", {"window": w}, id=call_id)])
        for w, call_id in zip(windows, ids, strict=True)
    ] + ["done"]


#: each agent's period events as its listener heard them (the kind is delivered, not
#: recorded: the verdict's record is the ``period_rows`` row)
_HEARD: dict[af.Agent, list[dict[str, Any]]] = {}


def run(script: list[Any], tools: list[af.Tool], **options: Any) -> tuple[af.Agent, af.RunResult]:
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=tools,
        ports=fixed_ports(),
        **options,
    )
    heard = _HEARD.setdefault(agent, [])
    agent.on(KIND, lambda event: heard.append(event.payload()))
    return agent, agent.run_sync("Did host-103 have failed backups in the last hour?")


def heard(agent: af.Agent, run_id: str) -> list[dict[str, Any]]:
    """The period events ``agent``'s listener heard in ``run_id``, without the run id."""
    return [
        {k: v for k, v in event.items() if k != "run_id"}
        for event in _HEARD.get(agent, [])
        if event["run_id"] == run_id
    ]


def replayed_identically(agent: af.Agent, result: af.RunResult, **options: Any) -> None:
    """A replay (no tool runs: the recorded results, their notes stripped, judged again)
    records the same rows, byte for byte."""
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=list(agent.config.tools),
        store=af.MemoryStore(),
        **options,
    )
    again = af.replay_sync(twin, agent.store, result.run_id)
    assert again.calls_checked == result.calls
    assert af.same_recording(agent.store, result.run_id, twin.store, again.result.run_id)
    assert again.result.state.get("period_rows") == result.state.get("period_rows")


def verdicts(agent: af.Agent, result: af.RunResult) -> list[tuple[str, str, int]]:
    return [(e["tool_call_id"], e["verdict"], e["iteration"]) for e in heard(agent, result.run_id)]


def test_the_nightly_export_asked_about_the_last_hour_is_not_held_and_says_so() -> None:
    agent, result = run(asked(LAST_HOUR), [backup_runs()])
    assert result.state["period_rows"] == [
        {"tool": "backup_runs", "tool_call_id": "c0", "verdict": "not-held", "argument": "window"}
    ]
    (event,) = heard(agent, result.run_id)
    assert event == {
        "iteration": 1,
        "tool": "backup_runs",
        "tool_call_id": "c0",
        "verdict": "not-held",
        "argument": "window",
    }
    note = SEPARATOR + CLAUSES["not-held"]
    (kept,) = tool_messages(result)
    assert kept["content"].endswith(note)  # the history keeps what the model read
    assert '"af_absent":true' in kept["content"] and "2026-09-26T09:00:00Z" in kept["content"]
    served = af.served_at(agent.store, result.run_id, 1)
    (message,) = [m for m in served["messages"] if m["role"] == "tool"]
    assert message["content"] == kept["content"]
    assert "09:00" not in str(result.state["period_rows"])  # a row never copies an instant
    opened = next(iter(agent.store.read(result.run_id))).decoded()
    assert opened["options"][OPTION] is True  # type: ignore[index]
    replayed_identically(agent, result)


def test_a_window_inside_the_export_is_covered_and_nothing_is_said() -> None:
    agent, result = run(asked(INSIDE), [backup_runs()])
    assert [r["verdict"] for r in result.state["period_rows"]] == ["covered"]
    (kept,) = tool_messages(result)
    assert kept["content"].endswith("}")  # the result as the tool returned it
    assert verdicts(agent, result) == [("c0", "covered", 1)]
    replayed_identically(agent, result)


def test_a_window_across_the_end_of_the_export_is_partly_held() -> None:
    across = {"from": "2026-09-26T08:00:00Z", "to": "2026-09-26T10:00:00Z"}
    agent, result = run(asked(across), [backup_runs()])
    assert [r["verdict"] for r in result.state["period_rows"]] == ["partly-held"]
    assert tool_messages(result)[0]["content"].endswith(SEPARATOR + CLAUSES["partly-held"])
    replayed_identically(agent, result)


def test_a_tool_declaring_period_whose_result_says_nothing_is_undeclared() -> None:
    agent, result = run(asked(LAST_HOUR), [backup_runs(says=False)])
    assert result.state["period_rows"] == [
        {
            "tool": "backup_runs",
            "tool_call_id": "c0",
            "verdict": "undeclared",
            "argument": "window",
        }
    ]
    assert tool_messages(result)[0]["content"] == '{"runs":[]}'  # silence has no clause
    assert verdicts(agent, result) == [("c0", "undeclared", 1)]
    replayed_identically(agent, result)


def test_a_store_that_cannot_vouch_for_what_it_holds_is_unknown_and_says_so() -> None:
    agent, result = run(asked(INSIDE), [backup_runs(held="unknown")])
    assert [r["verdict"] for r in result.state["period_rows"]] == ["unknown"]
    assert tool_messages(result)[0]["content"].endswith(SEPARATOR + CLAUSES["unknown"])
    replayed_identically(agent, result)


def test_a_call_id_reused_across_two_batches_is_two_rows() -> None:
    agent, result = run(asked(LAST_HOUR, INSIDE, ids=["same", "same"]), [backup_runs()])
    assert [(r["tool_call_id"], r["verdict"]) for r in result.state["period_rows"]] == [
        ("same", "not-held"),
        ("same", "covered"),
    ]
    assert verdicts(agent, result) == [("same", "not-held", 1), ("same", "covered", 2)]
    replayed_identically(agent, result)


def test_the_rows_are_what_period_rows_of_recomputes_from_the_history() -> None:
    from agentfootprint.integrity.period import period_rows_of

    _, result = run(
        asked(LAST_HOUR, INSIDE, {"from": "2026-09-26T08:00:00Z", "to": "2026-09-26T10:00:00Z"}),
        [backup_runs()],
    )
    contract = backup_runs().contract
    assert contract is not None
    calls = tool_calls_of(result.state["history"])
    assert period_rows_of(calls, {"backup_runs": contract}, False) == result.state["period_rows"]


def test_absent_or_armed_with_no_period_anywhere_records_the_same_rows() -> None:
    plain = backup_runs(declares=False, says=False)
    base_agent, base = run(asked(LAST_HOUR), [plain])
    assert "period_rows" not in base.state
    agent, armed = run(asked(LAST_HOUR), [plain], results_layer=True)
    assert without_open(rows(agent.store, armed.run_id)) == without_open(
        rows(base_agent.store, base.run_id)
    )
    opened = next(iter(base_agent.store.read(base.run_id))).decoded()
    assert OPTION not in opened["options"]  # type: ignore[index]
    # off (False, or not given) with a tool whose result declares a period: not judged
    agent, off = run(asked(LAST_HOUR), [backup_runs(declares=False)], results_layer=False)
    assert "period_rows" not in off.state and not heard(agent, off.run_id)
    assert not tool_messages(off)[0]["content"].endswith(SEPARATOR + CLAUSES["not-held"])


def test_results_layer_judges_a_tool_that_declares_periods_only_on_its_results() -> None:
    def execute(args: dict[str, Any]) -> Any:
        return described(
            [{"entity": "vm-7", "datastore": "ds-2"}],
            provenance={"measured_at": EXPORT[1], "source": "RVTools export"},
            period=period(LAST_HOUR["from"], LAST_HOUR["to"], held=EXPORT),
        )

    inventory = af.define_tool(
        name="inventory",
        description="Where each VM lives.",
        input_schema={"type": "object", "properties": {}},
        execute=execute,
    )
    script = [af.reply(tool_calls=[af.tool_call("inventory", {}, id="v1")]), "done"]
    agent, result = run(list(script), [inventory], results_layer=True)
    assert result.state["period_rows"] == [
        {"tool": "inventory", "tool_call_id": "v1", "verdict": "not-held"}
    ]
    (event,) = heard(agent, result.run_id)
    assert "argument" not in event
    assert tool_messages(result)[0]["content"].endswith(SEPARATOR + CLAUSES["not-held"])
    replayed_identically(agent, result, results_layer=True)
    # without the option the same result is not judged (no tool declares period)
    agent, plain = run(list(script), [inventory])
    assert "period_rows" not in plain.state


def test_an_errored_call_is_not_judged() -> None:
    def execute(args: dict[str, Any]) -> Any:
        raise RuntimeError("the export is locked")

    broken = af.define_tool(
        name="backup_runs",
        description="Failed backup runs in a window.",
        input_schema=WINDOW,
        execute=execute,
        period="window",
    )
    agent, result = run(asked(LAST_HOUR), [broken])
    assert "period_rows" not in result.state
    assert not heard(agent, result.run_id)
    replayed_identically(agent, result)


def test_a_nudged_result_keeps_both_notes_and_replays() -> None:
    agent, result = run(asked(LAST_HOUR, LAST_HOUR), [backup_runs()])
    second = tool_messages(result)[1]["content"]
    assert second.endswith(SEPARATOR + CLAUSES["not-held"])  # the clause is the last note
    assert "[agentfootprint: this is the same call" in second
    assert [r["verdict"] for r in result.state["period_rows"]] == ["not-held", "not-held"]
    replayed_identically(agent, result)


def test_under_a_policy_a_json_result_is_judged_but_gets_no_sentence() -> None:
    policy = af.RedactionPolicy(keys=["looked_for"])
    agent, result = run(asked(LAST_HOUR), [backup_runs()], redact=policy)
    assert [r["verdict"] for r in result.state["period_rows"]] == ["not-held"]
    content = tool_messages(result)[0]["content"]
    assert not content.endswith(CLAUSES["not-held"])
    found = agent.store.read(result.run_id)
    assert all(b"failed backup runs" not in bytes(row.body) for row in found)
    replayed_identically(agent, result, redact=policy)


@pytest.mark.parametrize("value", ["yes", 1, 0, {}])
def test_results_layer_is_true_or_false(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", results_layer=value)
    assert caught.value.option == OPTION


def test_it_cannot_be_switched_off_beside_a_tool_declaring_period() -> None:
    with pytest.raises(af.UsageError, match="backup_runs") as caught:
        af.Agent(
            provider=af.MockProvider(["x"]), model="m", tools=[backup_runs()], results_layer=False
        )
    assert caught.value.option == OPTION


def test_the_verdict_is_recorded_once_as_its_row_and_delivered_as_an_event() -> None:
    """The ``period_rows`` row is the record; the event is for listeners (a second record
    of the same verdict could disagree with the first)."""
    assert [e.kind for e in FEATURE.events] == [KIND] and FEATURE.recorded_events == ()
    agent, result = run(asked(LAST_HOUR), [backup_runs()])
    assert [e["verdict"] for e in heard(agent, result.run_id)] == ["not-held"]
    recorded = [r.decoded() for r in agent.store.read(result.run_id) if r.type == "event"]
    assert not [e for e in recorded if e.get("name") == KIND]  # type: ignore[union-attr]


def test_a_described_result_inside_a_tool_refused_is_the_calls_error() -> None:
    def execute(args: dict[str, Any]) -> Any:
        return described([{"entity": "vm-7"}], provenance={"source": "RVTools"})

    tool = af.define_tool(
        name="inventory",
        description="Where each VM lives.",
        input_schema={"type": "object", "properties": {}},
        execute=execute,
    )
    script = [af.reply(tool_calls=[af.tool_call("inventory", {})]), "done"]
    _, result = run(script, [tool], results_layer=True)
    (message,) = tool_messages(result)
    assert message.get("is_error") is True and "measured_at" in message["content"]
    assert "period_rows" not in result.state
