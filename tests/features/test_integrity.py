"""``integrity_posture`` and the shared rail: the disposition ledger, the dev posture's
canaries and liveness alarm, ``tool_contracts`` committed once, and the tools' declarations
(``arguments_from``, ``result_columns``, ``period``) checked where a tool is defined.

The honest test of the posture (remaining-options 6.1): a check sabotaged in the test makes a
``dev`` run fail with :class:`CheckerDeadError` (closed ``failed``, verifying), and an
``observe`` run file its disposition with zero ``checked`` for that check: the alarm is live.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, rows

import agentfootprint as af
from agentfootprint.audit.integrity import findings
from agentfootprint.integrity import column_types
from agentfootprint.integrity.contracts import Column, Contract
from agentfootprint.integrity.passes import IntegrityPass
from agentfootprint.integrity.rail import Judgement, ToolCall
from agentfootprint.logformat.canonical import parse
from agentfootprint.testing.records import outcome, run_open

CONTEXT_ERROR = "agentfootprint.integrity.context_error"
DISPOSITION = "agentfootprint.integrity.disposition"
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
WWPN = "10:00:00:90:fa:12:34:56"
#: every check of the ledger, as its rows are keyed
CHECKS = (
    "column-type-mismatch",
    "empty-lookup",
    "missing-column",
    "prior-turn-evidence",
    "unsupported-argument",
)
#: what the dev posture's canaries put in the ``synthetic`` column: one per check that has a
#: canary (the column-type canary is a mismatch, so ``missing-column`` mints none)
CANARIES = {
    "column-type-mismatch": 1,
    "empty-lookup": 1,
    "missing-column": 0,
    "prior-turn-evidence": 1,
    "unsupported-argument": 1,
}


def list_hosts(**declared: Any) -> af.Tool:
    """A producer whose one row stores LUN 0 as ``""`` (upstream's recorded failure)."""
    return af.define_tool(
        name="list_hosts",
        description="List the hosts.",
        input_schema=SCHEMA,
        execute=lambda args: [{"wwpn": WWPN, "lun": ""}],
        **declared,
    )


def lookup(**declared: Any) -> af.Tool:
    """A reverse lookup that finds nothing."""
    return af.define_tool(
        name="lookup",
        description="Look a host up.",
        input_schema=SCHEMA,
        execute=lambda args: [],
        **declared,
    )


def declared_tools() -> list[af.Tool]:
    return [list_hosts(result_columns={"lun": "number"}), lookup(arguments_from=["list_hosts"])]


def script(answer: str = f"The device {WWPN} is on no port.") -> list[Any]:
    return [
        af.reply(tool_calls=[af.tool_call("list_hosts", {"q": "all"}, id="c1")]),
        af.reply(tool_calls=[af.tool_call("lookup", {"q": WWPN}, id="c2")]),
        answer,
    ]


def agent_of(tools: list[af.Tool], replies: list[Any] | None = None, **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(script() if replies is None else replies),
        model="m",
        tools=tools,
        ports=fixed_ports(),
        **options,
    )


def only_run(agent: af.Agent) -> str:
    (info,) = list(agent.store.runs())
    return info.run_id


def disposition(store: Any, run_id: str) -> dict[str, Any]:
    (payload,) = events_of(store, run_id, DISPOSITION)
    return dict(payload)


def rows_by_check(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["check"]: row for row in payload["rows"]}


def contract_writes(store: Any, run_id: str) -> list[Any]:
    """The values of the run's writes to ``tool_contracts``."""
    out = []
    for row in store.read(run_id):
        if row.type == "write":
            body = parse(row.body)
            if body["path"] == "tool_contracts":
                out.append(body.get("value"))
    return out


ALL_ARMED: dict[str, Any] = {
    "check_column_types": "warn",
    "notice_empty_lookups": True,
    "notice_prior_turn_evidence": True,
}


# -- the dev posture: canaries counted apart, the run answers --------------------------------


def test_dev_counts_one_synthetic_per_canary_and_the_run_answers() -> None:
    agent = agent_of(declared_tools(), integrity_posture="dev", **ALL_ARMED)
    result = agent.run_sync("go")
    assert result.outcome == "answered"
    payload = disposition(agent.store, result.run_id)
    assert payload["posture"] == "dev"
    by_check = rows_by_check(payload)
    assert set(by_check) == set(CHECKS)
    assert {c: r["synthetic"] for c, r in by_check.items()} == CANARIES
    assert all(row["armed"] for row in payload["rows"])
    # the real counts are the run's own: the canaries never touch them
    assert by_check["column-type-mismatch"]["findings"] == 1
    assert by_check["empty-lookup"]["findings"] == 1
    # a canary's finding is never recorded as a finding of the run
    found = events_of(agent.store, result.run_id, CONTEXT_ERROR)
    assert [f["kind"] for f in found] == ["column-type-mismatch", "empty-lookup"]
    assert not any(f["synthetic"] for f in found)
    assert run_open(agent.store, result.run_id)["options"]["integrity_posture"] == "dev"
    assert findings(agent.store, result.run_id, recompute=True).agrees


def test_posture_alone_records_every_row_unarmed_with_the_canaries_counts() -> None:
    tools = [list_hosts(), lookup()]  # nothing declared: no check can be armed
    agent = agent_of(tools, integrity_posture="dev")
    result = agent.run_sync("go")
    assert result.outcome == "answered"
    payload = disposition(agent.store, result.run_id)
    assert payload["posture"] == "dev"
    for row in payload["rows"]:
        assert row["armed"] is False
        assert (row["checked"], row["findings"], row["not_applicable"], row["unreachable"]) == (
            0,
            0,
            0,
            0,
        )
    assert {c: r["synthetic"] for c, r in rows_by_check(payload).items()} == CANARIES
    assert events_of(agent.store, result.run_id, CONTEXT_ERROR) == []
    assert findings(agent.store, result.run_id, recompute=True).agrees


# -- the alarm is live: a sabotaged check -----------------------------------------------------


def _always_passes(contract: Contract, call: ToolCall, *, mode: str) -> Judgement:
    return Judgement.passed()


def test_a_check_that_misses_its_canary_fails_a_dev_run_before_any_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(column_types, "judge_columns", _always_passes)
    provider = af.MockProvider(script())
    agent = af.Agent(
        provider=provider,
        model="m",
        tools=declared_tools(),
        ports=fixed_ports(),
        integrity_posture="dev",
        check_column_types="warn",
    )
    with pytest.raises(af.CheckerDeadError) as info:
        agent.run_sync("go")
    error = info.value
    assert (error.check, error.seam) == ("column-type-mismatch", "write")
    assert "'column-type-mismatch' at the write seam" in str(error)
    assert "was handed 1 synthetic defect and caught 0." in str(error)
    assert "A green report from a check that never ran is decoration, not health" in str(error)
    assert isinstance(error, af.RunError)
    run_id = only_run(agent)
    assert error.run_id == run_id
    # closed failed, and the log verifies (`agentfootprint verify` would exit 0)
    checked = af.Verifier(agent.store).verify(run_id)
    assert checked.outcome is af.Outcome.VALID_UNSIGNED
    assert checked.close is not None and checked.close["outcome"] == "failed"
    assert checked.close["calls"] == 0  # the canaries run at the turn's start
    assert provider.requests == []


def test_the_same_sabotage_under_observe_checks_and_finds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Observe runs no canary: the broken check passes the bad rows, and only the ledger
    (checked 1, findings 0) and the recompute can tell."""
    monkeypatch.setattr(column_types, "judge_columns", _always_passes)
    agent = agent_of(declared_tools(), check_column_types="warn")
    result = agent.run_sync("go")
    assert result.outcome == "answered"
    row = rows_by_check(disposition(agent.store, result.run_id))["column-type-mismatch"]
    assert (row["armed"], row["checked"], row["findings"], row["synthetic"]) == (True, 1, 0, 0)
    monkeypatch.undo()  # today's (working) check, over the same log
    again = findings(agent.store, result.run_id, recompute=True)
    assert not again.agrees
    assert any("column-type-mismatch" in d for d in again.differences)


_COLUMNS = IntegrityPass.columns


def _files_nothing(self: IntegrityPass, call: ToolCall) -> Any:
    """The column checks skipping every result as if they were off: nothing filed."""
    on = self.on
    self.on = {**on, "column-type-mismatch": False}
    try:
        return _COLUMNS(self, call)
    finally:
        self.on = on


def test_a_check_that_files_nothing_shows_zero_checked_under_observe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(IntegrityPass, "columns", _files_nothing)
    agent = agent_of(declared_tools(), check_column_types="warn")
    result = agent.run_sync("go")
    assert result.outcome == "answered"
    by_check = rows_by_check(disposition(agent.store, result.run_id))
    for check in ("column-type-mismatch", "missing-column"):
        row = by_check[check]
        assert row["armed"] is True
        assert (row["checked"], row["not_applicable"], row["unreachable"]) == (0, 0, 0)
    assert events_of(agent.store, result.run_id, CONTEXT_ERROR) == []
    monkeypatch.undo()
    assert not findings(agent.store, result.run_id, recompute=True).agrees


def test_a_check_that_files_nothing_fails_a_dev_run_beside_a_live_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With empty-lookups armed too, the write seam met work (the tool results), the column
    checks filed no disposition: the run fails at its end, closed failed and verifying."""
    monkeypatch.setattr(IntegrityPass, "columns", _files_nothing)
    agent = agent_of(
        declared_tools(),
        integrity_posture="dev",
        check_column_types="warn",
        notice_empty_lookups=True,
    )
    with pytest.raises(af.CheckerDeadError) as info:
        agent.run_sync("go")
    assert (info.value.check, info.value.seam) == ("column-type-mismatch", "write")
    assert "filed no disposition at all in a run where work existed" in str(info.value)
    run_id = only_run(agent)
    assert outcome(agent.store, run_id) == "failed"
    assert af.Verifier(agent.store).verify(run_id).outcome is af.Outcome.VALID_UNSIGNED
    # every call was made: the alarm is at the run's end, and the ledger says why
    row = rows_by_check(disposition(agent.store, run_id))["column-type-mismatch"]
    assert (row["armed"], row["checked"], row["synthetic"]) == (True, 0, 1)


def test_a_check_that_files_nothing_fails_a_dev_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(IntegrityPass, "columns", _files_nothing)
    agent = agent_of(declared_tools(), integrity_posture="dev", check_column_types="warn")
    with pytest.raises(af.CheckerDeadError) as info:
        agent.run_sync("go")
    assert (info.value.check, info.value.seam) == ("column-type-mismatch", "write")
    assert outcome(agent.store, only_run(agent)) == "failed"


def test_a_run_a_canary_killed_still_files_its_disposition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(column_types, "judge_columns", _always_passes)
    agent = agent_of(declared_tools(), integrity_posture="dev", check_column_types="warn")
    with pytest.raises(af.CheckerDeadError):
        agent.run_sync("go")
    run_id = only_run(agent)
    row = rows_by_check(disposition(agent.store, run_id))["column-type-mismatch"]
    assert (row["armed"], row["synthetic"]) == (True, 0)
    assert findings(agent.store, run_id, recompute=True).agrees  # the same (broken) code


def test_a_failed_run_files_its_disposition() -> None:
    """Every exit files the ledger: here the model's script ends after the first call."""
    agent = agent_of(declared_tools(), script()[:1], integrity_posture="dev", **ALL_ARMED)
    with pytest.raises(af.AgentFootprintError):
        agent.run_sync("go")
    run_id = only_run(agent)
    assert outcome(agent.store, run_id) == "failed"
    by_check = rows_by_check(disposition(agent.store, run_id))
    assert by_check["column-type-mismatch"]["findings"] == 1
    assert by_check["prior-turn-evidence"]["checked"] == 0  # no answer to judge


@pytest.mark.parametrize("posture", ["observe", "dev"])
def test_a_run_failed_at_a_model_call_recomputes_the_same(posture: str) -> None:
    """A call that failed wrote no reply: the recompute judges no reply for it (not the
    previous call's again)."""
    agent = agent_of(declared_tools(), script()[:1], integrity_posture=posture, **ALL_ARMED)
    with pytest.raises(af.AgentFootprintError):
        agent.run_sync("go")
    run_id = only_run(agent)
    report = findings(agent.store, run_id, recompute=True)
    assert report.agrees, report.differences


# -- observe is the default: given or absent, the same rows -----------------------------------


@pytest.mark.parametrize(
    ("tools", "options"),
    [
        (declared_tools, ALL_ARMED),
        (lambda: [list_hosts(), lookup()], {}),
    ],
    ids=["armed", "nothing-armed"],
)
def test_observe_given_records_the_same_rows_as_absent(tools: Any, options: Any) -> None:
    absent = agent_of(tools(), **options)
    given = agent_of(tools(), integrity_posture="observe", **options)
    first, second = absent.run_sync("go"), given.run_sync("go")
    assert rows(absent.store, first.run_id) == rows(given.store, second.run_id)
    # recorded whenever a check is armed (the agent took part), given or not; else never
    posture = run_open(given.store, second.run_id)["options"].get("integrity_posture")
    assert posture == ("observe" if options else None)
    recorded = events_of(given.store, second.run_id, DISPOSITION)
    if options:
        assert [d["posture"] for d in recorded] == ["observe"]
    else:  # the default run records nothing new
        assert recorded == []
        assert contract_writes(given.store, second.run_id) == []


@pytest.mark.parametrize("bad", ["strict", "DEV", "", 1, True, ["dev"]])
def test_a_bad_posture_is_refused(bad: Any) -> None:
    with pytest.raises(af.UsageError) as info:
        af.Agent(provider=af.MockProvider([]), model="m", integrity_posture=bad)
    assert info.value.option == "integrity_posture"
    assert "'observe', 'dev'" in str(info.value)


# -- tool_contracts: committed once -----------------------------------------------------------


def test_tool_contracts_are_committed_once_across_a_continuation() -> None:
    replies = [*script(), "Still nothing for it.", "And again."]
    agent = agent_of(declared_tools(), replies, check_column_types="warn")
    first = agent.run_sync("go")
    declared = {
        "list_hosts": {"result_columns": {"lun": "number"}},
        "lookup": {"arguments_from": ["list_hosts"]},
    }
    assert contract_writes(agent.store, first.run_id) == [declared]
    assert first.state["tool_contracts"] == declared
    second = agent.run_sync("and now?", continue_from=first)
    assert contract_writes(agent.store, second.run_id) == []  # inherited, not rewritten
    assert second.state["tool_contracts"] == declared
    assert findings(agent.store, second.run_id, recompute=True).agrees

    # a fresh agent whose tools declare something else: committed again, as now declared
    changed = [list_hosts(result_columns={"lun": {"type": "number", "nullable": True}})]
    other = af.Agent(
        provider=af.MockProvider(["Fine."]),
        model="m",
        tools=changed,
        store=agent.store,
        check_column_types="warn",
    )
    third = other.run_sync("and with the new tool?", continue_from=second)
    renewed = {"list_hosts": {"result_columns": {"lun": {"nullable": True, "type": "number"}}}}
    assert contract_writes(agent.store, third.run_id) == [renewed]
    assert findings(agent.store, third.run_id, recompute=True).agrees


# -- the declarations, checked where a tool is defined ----------------------------------------


@pytest.mark.parametrize(
    ("declared", "says"),
    [
        ({"arguments_from": "list_hosts"}, "arguments_from must be a list of tool names"),
        ({"arguments_from": ("list_hosts" for _ in ())}, "arguments_from must be a list"),
        ({"arguments_from": []}, "arguments_from must name 1 to 64 tools"),
        ({"arguments_from": ["list_hosts", "list_hosts"]}, "names a tool twice"),
        ({"arguments_from": ["list_hosts", 3]}, "which is not a tool name"),
        ({"arguments_from": [""]}, "which is not a tool name"),
        ({"result_columns": ["lun"]}, "result_columns must map 1 to 256 column names"),
        ({"result_columns": "lun"}, "result_columns must map"),
        ({"result_columns": {}}, "result_columns must map"),
        ({"result_columns": {"lun": "int"}}, "result_columns['lun'] must be one of"),
        ({"result_columns": {"lun": None}}, "result_columns['lun'] must be one of"),
        (
            {"result_columns": {"lun": {"type": "number", "nullable": "yes"}}},
            "result_columns['lun'] must be one of",
        ),
        (
            {"result_columns": {"lun": {"type": "number", "default": 0}}},
            "result_columns['lun'] must be one of",
        ),
        ({"result_columns": {"": "number"}}, "which is not a column name"),
        ({"period": "window"}, "period must name a property of its input schema"),
        ({"period": 3}, "period must name a property of its input schema"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_tool(declared: Any, says: str) -> None:
    with pytest.raises(af.UsageError) as info:
        lookup(**declared)
    assert str(info.value).startswith("tool 'lookup': ")
    assert says in str(info.value)
    assert info.value.option == "tools"


def test_a_tool_that_declares_nothing_has_no_contract() -> None:
    assert lookup().contract is None
    assert lookup(period="q").contract == Contract(tool="lookup", period="q")


def test_the_decorator_carries_the_contract() -> None:
    @af.tool(
        arguments_from=["list_hosts"],
        result_columns={"lun": "number", "host": {"type": "string", "nullable": True}},
        period="window",
    )
    def find_host(q: str, window: str = "the last hour") -> list[dict[str, Any]]:
        """Find a host."""
        return []

    assert find_host.contract == Contract(
        tool="find_host",
        arguments_from=("list_hosts",),
        result_columns=(
            ("host", Column(type="string", nullable=True)),
            ("lun", Column(type="number")),
        ),
        period="window",
    )
    agent = agent_of(
        [list_hosts(), find_host],
        [af.reply(tool_calls=[af.tool_call("find_host", {"q": "host-17"}, id="c1")]), "None."],
        notice_empty_lookups=True,
    )
    result = agent.run_sync("go")
    assert result.state["tool_contracts"] == {
        "find_host": {
            "arguments_from": ["list_hosts"],
            "period": "window",
            "result_columns": {"host": {"nullable": True, "type": "string"}, "lun": "number"},
        }
    }
    assert findings(agent.store, result.run_id, recompute=True).agrees

    with pytest.raises(af.UsageError) as info:

        @af.tool(period="when")
        def dated(q: str) -> str:
            """Dated."""
            return q

    assert str(info.value).startswith("tool 'dated': period must name a property")


def test_a_tool_result_the_model_reads_is_json_the_checks_read() -> None:
    """The producer's rows reach the model as JSON text: the column check reads them there."""
    agent = agent_of(declared_tools(), check_column_types="warn")
    result = agent.run_sync("go")
    (first,) = [m for m in result.state["history"] if m.get("tool_call_id") == "c1"]
    assert json.loads(first["content"]) == [{"wwpn": WWPN, "lun": ""}]
    (found,) = events_of(agent.store, result.run_id, CONTEXT_ERROR)
    assert found["facts"]["column"] == "lun" and found["subjects"] == [
        {"kind": "tool", "id": "list_hosts"}
    ]


def test_the_read_side_names_the_tool_calls_stage_as_the_loop_does() -> None:
    """The recompute judges the results of the tool-calls stage's commits (the ones the
    tool-result hooks saw): it names the stage as the loop does, without importing it."""
    from agentfootprint.audit import integrity as read_side
    from agentfootprint.features.tool_dispatch import TOOL_CALLS_STAGE

    assert read_side._TOOL_STAGE == TOOL_CALLS_STAGE


def test_a_redacted_run_shows_its_layers_as_recorded_and_agrees() -> None:
    """Under a redaction policy the answer layer and the results layer read values the
    policy may commit: `findings --recompute` says so and compares nothing it cannot
    recompute (the integrity checks are refused beside a policy)."""
    lookup = af.define_tool(
        name="lookup",
        description="Look it up.",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=lambda args: [],
    )
    agent = af.Agent(
        provider=af.MockProvider(
            [af.reply(tool_calls=[af.tool_call("lookup", {"q": "vol-0001"})]), "none found"]
        ),
        model="m",
        tools=[lookup],
        ports=fixed_ports(),
        redact=af.conversation_redaction(),
        answer_layer=True,
        results_layer=True,
    )
    result = agent.run_sync("which volumes?")
    report = findings(agent.store, result.run_id, recompute=True)
    assert report.redacted and report.agrees, report.differences
    assert report.recorded.standing is not None
    assert report.recorded.standing["reasons"] == ["empty-undeclared"]
    with pytest.raises(af.UsageError) as caught:
        af.Agent(
            provider=af.MockProvider(["x"]),
            model="m",
            redact=af.conversation_redaction(),
            notice_prior_turn_evidence=True,
        )
    assert caught.value.option == "redact"
