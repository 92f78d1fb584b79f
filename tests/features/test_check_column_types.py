"""``check_column_types``: upstream's recorded failures, through a real agent. A mapping tool
declares ``result_columns`` and returns rows that disagree (LUN 0 written as ``""``, a number
quoted); ``warn`` files the finding and the model reads the rows as returned, ``enforce``
serves a refusal instead and records the rows' digest. Every run is verified by the plugin,
recomputed from the log (``findings(..., recompute=True)``) and replayed byte for byte."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from feature_support import events_of, fixed_ports, rows, settled

import agentfootprint as af
from agentfootprint.integrity import column_types
from agentfootprint.integrity.records import findings_of
from agentfootprint.logformat.hashing import hexdigest

CONTEXT_ERROR = "agentfootprint.integrity.context_error"
ROWS_REFUSED = "agentfootprint.integrity.rows_refused"
DISPOSITION = "agentfootprint.integrity.disposition"
#: upstream's COLUMN_TYPE_CEILING, verbatim (quoted by every finding this check files)
CEILING = (
    "This judges TYPE, never MEANING — it can see that a column declared `number` holds a "
    "string, and it can never see that the string should have been 0, or that a 0.0 should "
    "have been an 8; a column whose every value has its declared type passes here and can "
    "still be wrong."
)
WARNED = (
    "Nothing here blocked the call, changed the result, or retried anything — the model "
    "reads the rows exactly as the tool returned them."
)
REFUSED = "The result was REFUSED: the model reads a teaching sentence instead of these rows."
COLUMNS = {"logical_unit_number": "number", "host": "string"}
HOST = {"type": "object", "properties": {"host": {"type": "string"}}}
#: upstream's failure 1: LUN 0 written as an empty string by the array's export
LUN_ZERO_BLANK = [
    {"logical_unit_number": "", "host": "esx-01"},
    {"logical_unit_number": 1, "host": "esx-01"},
]
#: upstream's failure 3: numbers quoted by a CSV-to-JSON step
QUOTED = [
    {"logical_unit_number": "1240", "host": "esx-02"},
    {"logical_unit_number": "1241", "host": "esx-02"},
]


def mappings(
    result: Any, ran: list[dict[str, Any]] | None = None, *, columns: Any = COLUMNS
) -> af.Tool:
    """The LUN mapping tool: returns ``result`` (rows are written as the JSON text a tool
    returns), counting its calls in ``ran``."""

    def execute(args: dict[str, Any]) -> str:
        if ran is not None:
            ran.append(args)
        return result if isinstance(result, str) else json.dumps(result)

    return af.define_tool(
        name="list_lun_mappings",
        description="The LUNs mapped to a host.",
        input_schema=HOST,
        execute=execute,
        result_columns=columns,
    )


def ping() -> af.Tool:
    return af.define_tool(
        name="ping", description="Is a host up?", input_schema=HOST, execute=lambda a: "pong"
    )


def asks(tool: str = "list_lun_mappings", answer: str = "esx-01 sees LUN 0 and LUN 1") -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call(tool, {"host": "esx-01"}, id="c1")]), answer]


def run(
    tools: list[af.Tool], script: Callable[[], list[Any]] = asks, **options: Any
) -> tuple[af.Agent, af.RunResult]:
    agent = af.Agent(
        provider=af.MockProvider(script()),
        model="m",
        tools=tools,
        ports=fixed_ports(),
        **options,
    )
    return agent, agent.run_sync("Which LUNs does esx-01 see?")


def ledger(agent: af.Agent, result: af.RunResult) -> dict[str, dict[str, Any]]:
    (disposition,) = events_of(agent.store, result.run_id, DISPOSITION)
    return {row["check"]: row for row in disposition["rows"]}


def counts(row: dict[str, Any]) -> tuple[int, int, int, int]:
    return (row["checked"], row["findings"], row["not_applicable"], row["unreachable"])


def served_result(agent: af.Agent, result: af.RunResult, call: int = 1) -> dict[str, Any]:
    """The tool message the model was served at ``call``, rebuilt from the log alone."""
    served = af.served_at(agent.store, result.run_id, call)
    (message,) = [m for m in served["messages"] if m["role"] == "tool"]
    assert isinstance(message, dict)
    return message


def strings(value: Any) -> list[str]:
    """Every string in a JSON value (keys and leaves)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(s for v in value.values() for s in strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def test_the_ceiling_is_upstreams_sentence_verbatim() -> None:
    assert column_types.CEILING == CEILING


def test_lun_zero_written_blank_is_one_mismatch_and_the_model_reads_the_rows_unchanged() -> None:
    agent, result = run([mappings(LUN_ZERO_BLANK)], check_column_types="warn")
    (finding,) = events_of(agent.store, result.run_id, CONTEXT_ERROR)
    assert finding["kind"] == finding["check"] == "column-type-mismatch"
    assert finding["predicate"] == "logical_unit_number"
    assert finding["seam"] == "write" and finding["advisory"] is False
    assert finding["subjects"] == [{"kind": "tool", "id": "list_lun_mappings"}]
    assert finding["witnesses"] == ["c1"]
    assert finding["facts"] == {
        "column": "logical_unit_number",
        "declared": "number",
        "nullable": False,
        "rows": 1,
        "of": 2,
        "got": "string",
        "sample": '""',
    }
    assert finding["message"] == (
        "'list_lun_mappings' declares column 'logical_unit_number' as number, and 1 of 2 rows "
        'hold something else — the first is "" (string). '
        f"{CEILING} Call id c1. {WARNED}"
    )
    # warn: the model read the rows exactly as the tool returned them
    message = served_result(agent, result)
    assert message["content"] == json.dumps(LUN_ZERO_BLANK)
    assert "is_error" not in message
    assert not events_of(agent.store, result.run_id, ROWS_REFUSED)
    rows_of = ledger(agent, result)
    assert counts(rows_of["column-type-mismatch"]) == (1, 1, 0, 0)
    assert counts(rows_of["missing-column"]) == (1, 0, 0, 0)  # both columns are there
    assert rows_of["column-type-mismatch"]["armed"] is True
    report = settled(agent, result, check_column_types="warn")
    assert report.recorded.findings == (finding,)


def test_quoted_numbers_are_a_mismatch() -> None:
    agent, result = run([mappings(QUOTED)], check_column_types="warn")
    (finding,) = events_of(agent.store, result.run_id, CONTEXT_ERROR)
    assert finding["kind"] == "column-type-mismatch"
    assert finding["predicate"] == "logical_unit_number"
    assert finding["facts"]["rows"] == finding["facts"]["of"] == 2  # counted, never sampled
    assert finding["facts"]["sample"] == '"1240"' and finding["facts"]["got"] == "string"
    assert CEILING in finding["message"] and WARNED in finding["message"]
    assert served_result(agent, result)["content"] == json.dumps(QUOTED)
    settled(agent, result, check_column_types="warn")


def test_a_zero_for_an_eight_mib_volume_passes_the_type_check() -> None:
    """The ceiling's own example: 0.0 where the capacity was 8 MiB is a number, so nothing is
    filed; the check judged the row (checked, no finding) and can say nothing about it."""
    capacity = af.define_tool(
        name="volume_capacity",
        description="A volume's capacity.",
        input_schema=HOST,
        execute=lambda a: '[{"volume": "vol-scratch-8m", "capacity_gib": 0.0}]',
        result_columns={"volume": "string", "capacity_gib": "number"},
    )
    agent, result = run(
        [capacity], lambda: asks("volume_capacity", "0 GiB"), check_column_types="warn"
    )
    assert not events_of(agent.store, result.run_id, CONTEXT_ERROR)
    rows_of = ledger(agent, result)
    assert counts(rows_of["column-type-mismatch"]) == (1, 0, 0, 0)
    assert counts(rows_of["missing-column"]) == (1, 0, 0, 0)
    assert "or that a 0.0 should have been an 8" in CEILING
    settled(agent, result, check_column_types="warn")


@pytest.mark.parametrize(
    "returned",
    [
        {"rows": LUN_ZERO_BLANK},  # a wrapper: not the one shape read
        [],  # zero rows: empty-lookup's subject, never this check's
        "LUN 0 and LUN 1 are mapped to esx-01",  # prose
    ],
    ids=["wrapper", "zero-rows", "prose"],
)
def test_what_is_not_a_rowset_is_counted_not_applicable_and_files_nothing(returned: Any) -> None:
    agent, result = run([mappings(returned)], check_column_types="warn")
    assert not events_of(agent.store, result.run_id, CONTEXT_ERROR)
    rows_of = ledger(agent, result)
    assert counts(rows_of["column-type-mismatch"]) == (0, 0, 1, 0)
    assert counts(rows_of["missing-column"]) == (0, 0, 1, 0)
    settled(agent, result, check_column_types="warn")


def test_a_column_in_no_row_is_a_missing_column() -> None:
    agent, result = run(
        [mappings([{"logical_unit_number": 0}, {"logical_unit_number": 1}])],
        check_column_types="warn",
    )
    (finding,) = events_of(agent.store, result.run_id, CONTEXT_ERROR)
    assert finding["kind"] == finding["check"] == "missing-column"
    assert finding["predicate"] == "host"
    assert finding["facts"] == {"column": "host", "declared": "string", "of": 2}
    assert finding["message"] == (
        "'list_lun_mappings' declares a column 'host' (string) that is in NONE of the 2 rows "
        "it returned. This is not a mistyped value — the column is simply not there, so "
        "anything downstream that keys on it reads a rowset that cannot answer, and a row "
        "missing the column is indistinguishable from a row whose value is nothing. "
        f"{CEILING} Call id c1. {WARNED}"
    )
    rows_of = ledger(agent, result)
    assert counts(rows_of["missing-column"]) == (1, 1, 0, 0)
    assert counts(rows_of["column-type-mismatch"]) == (1, 0, 0, 0)
    settled(agent, result, check_column_types="warn")


def test_enforce_runs_the_tool_then_serves_the_refusal_and_records_the_rows_digest() -> None:
    ran: list[dict[str, Any]] = []
    agent, result = run([mappings(LUN_ZERO_BLANK, ran)], check_column_types="enforce")
    assert ran == [{"host": "esx-01"}]  # the tool ran: its rows were judged, then refused
    (finding,) = events_of(agent.store, result.run_id, CONTEXT_ERROR)
    assert finding["kind"] == "column-type-mismatch"
    assert finding["predicate"] == "logical_unit_number"
    assert finding["message"].endswith(f"{CEILING} Call id c1. {REFUSED}")
    refusal = (
        "Result rejected: list_lun_mappings returned rows that disagree with the columns it "
        "declares — 'logical_unit_number' is declared number and 1 of 2 rows hold string "
        '(first: ""). Fix the tool so the column holds what it declares, or change the '
        "declaration. No data was returned."
    )
    # the model read the refusal, as an error, and never the rows
    message = served_result(agent, result)
    assert message["content"] == refusal and message["is_error"] is True
    returned = json.dumps(LUN_ZERO_BLANK)
    assert not any(
        returned in text for text in strings(af.served_at(agent.store, result.run_id, 1))
    )
    # the history holds the refusal
    (kept,) = [m for m in result.state["history"] if m["role"] == "tool"]
    assert kept["content"] == refusal and kept["is_error"] is True
    # the rows are not kept: their digest and size, with the findings that refused them
    (refused,) = events_of(agent.store, result.run_id, ROWS_REFUSED)
    assert refused == {
        "tool": "list_lun_mappings",
        "tool_call_id": "c1",
        "digest": hexdigest("artifact", returned.encode()),
        "bytes": len(returned.encode()),
        "findings": [finding],
    }
    for _, _, body in rows(agent.store, result.run_id):
        assert not any(returned in text for text in strings(orjson.loads(body)))
    assert counts(ledger(agent, result)["column-type-mismatch"]) == (1, 1, 0, 0)
    settled(agent, result, check_column_types="enforce")
    assert ran == [{"host": "esx-01"}]  # the replay answered from the record


def test_enforce_records_what_refused_each_call_when_a_second_refusal_repeats_the_first() -> None:
    """Two hosts, both exports with LUN 0 blank: both results are refused; the finding is
    filed once (deduplicated by identity), and each refusal is recorded with the findings
    its sentence is made of."""
    ran: list[dict[str, Any]] = []

    def script() -> list[Any]:
        return [
            af.reply(tool_calls=[af.tool_call("list_lun_mappings", {"host": "esx-01"}, id="c1")]),
            af.reply(tool_calls=[af.tool_call("list_lun_mappings", {"host": "esx-02"}, id="c2")]),
            "Both exports are broken.",
        ]

    agent, result = run([mappings(LUN_ZERO_BLANK, ran)], script, check_column_types="enforce")
    assert ran == [{"host": "esx-01"}, {"host": "esx-02"}]
    (finding,) = events_of(agent.store, result.run_id, CONTEXT_ERROR)
    assert finding["witnesses"] == ["c1"]
    served = af.served_at(agent.store, result.run_id, 2)
    read = {m["tool_call_id"]: m for m in served["messages"] if m["role"] == "tool"}
    assert all(m["is_error"] is True for m in read.values())
    refusals = events_of(agent.store, result.run_id, ROWS_REFUSED)
    assert [r["tool_call_id"] for r in refusals] == ["c1", "c2"]
    for refused in refusals:
        recorded = findings_of(refused["findings"])
        assert recorded, f"{refused['tool_call_id']}: no findings recorded for its refusal"
        text = column_types.refusal_text("list_lun_mappings", recorded)
        assert read[refused["tool_call_id"]]["content"].startswith(text)
    settled(agent, result, check_column_types="enforce")


def test_enforce_names_a_mismatch_and_a_missing_column_in_one_refusal() -> None:
    agent, result = run([mappings([{"logical_unit_number": "0"}])], check_column_types="enforce")
    found = events_of(agent.store, result.run_id, CONTEXT_ERROR)
    assert [(f["kind"], f["predicate"]) for f in found] == [  # in the columns' order
        ("missing-column", "host"),
        ("column-type-mismatch", "logical_unit_number"),
    ]
    message = served_result(agent, result)
    assert message["content"] == (
        "Result rejected: list_lun_mappings returned rows that disagree with the columns it "
        "declares — 'logical_unit_number' is declared number and 1 of 1 rows hold string "
        "(first: \"0\"); 'host' is declared but present in no row. Fix the tool so the column "
        "holds what it declares, or change the declaration. No data was returned."
    )
    (refused,) = events_of(agent.store, result.run_id, ROWS_REFUSED)
    assert refused["findings"] == found
    settled(agent, result, check_column_types="enforce")


def test_enforce_lets_rows_that_agree_through_unchanged() -> None:
    good = [{"logical_unit_number": 0, "host": "esx-01"}]
    agent, result = run([mappings(good)], check_column_types="enforce")
    assert not events_of(agent.store, result.run_id, CONTEXT_ERROR)
    assert not events_of(agent.store, result.run_id, ROWS_REFUSED)
    assert served_result(agent, result)["content"] == json.dumps(good)
    settled(agent, result, check_column_types="enforce")


@pytest.mark.parametrize("mode", ["warn", "enforce"])
def test_a_mode_without_a_tool_declaring_result_columns_is_refused(mode: Any) -> None:
    with pytest.raises(af.UsageError, match="needs a tool declaring result_columns") as caught:
        af.Agent(provider=af.MockProvider([]), model="m", tools=[ping()], check_column_types=mode)
    assert caught.value.option == "check_column_types"
    with pytest.raises(af.UsageError, match="needs a tool declaring result_columns"):
        af.Agent(provider=af.MockProvider([]), model="m", check_column_types=mode)


@pytest.mark.parametrize("bad", ["strict", True, "WARN", 1])
def test_a_value_outside_the_three_modes_is_refused(bad: Any) -> None:
    with pytest.raises(af.UsageError, match="must be one of") as caught:
        af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=[mappings(LUN_ZERO_BLANK)],
            check_column_types=bad,
        )
    assert caught.value.option == "check_column_types"


@pytest.mark.parametrize("mode", ["warn", "enforce"])
def test_a_mode_beside_a_redaction_policy_is_refused(mode: Any) -> None:
    with pytest.raises(af.UsageError, match="redaction policy") as caught:
        af.Agent(
            provider=af.MockProvider([]),
            model="m",
            tools=[mappings(LUN_ZERO_BLANK)],
            check_column_types=mode,
            redact=af.conversation_redaction(),
        )
    assert caught.value.option == "redact"


def test_off_and_absent_record_exactly_the_rows_of_an_agent_without_the_declaration() -> None:
    """The declaration alone arms nothing, is never served and records nothing: the same
    defective rows through a tool that declares no columns, through one that declares them
    with the dial absent, and with ``"off"``, record the same rows, byte for byte."""
    plain_agent, plain = run([mappings(LUN_ZERO_BLANK, columns=None)])
    runs = [
        run([mappings(LUN_ZERO_BLANK)]),
        run([mappings(LUN_ZERO_BLANK)], check_column_types="off"),
    ]
    expected = rows(plain_agent.store, plain.run_id)
    for agent, result in runs:
        assert rows(agent.store, result.run_id) == expected
        assert not events_of(agent.store, result.run_id, CONTEXT_ERROR)
    settled(plain_agent, plain)
    settled(*runs[1], check_column_types="off")


def test_armed_but_never_triggered_adds_the_declarations_and_the_disposition_only() -> None:
    """A tool declaring result_columns that is never called, under ``warn``. Against the run
    without the dial, exactly two rows are added: the ``tool_contracts`` write in the turn's
    start commit (the seed's: commit 0, so no commit index moves), and the disposition event
    before the last commit. ``run.open`` records the dial and the posture (``observe``: a
    check is armed); the seed's commit marker counts one more write; every other row is the
    same body (the requests served are the same: ``tool_contracts`` is never served)."""

    def script() -> list[Any]:
        return asks("ping", "esx-01 is up")

    plain_agent, plain = run([mappings(LUN_ZERO_BLANK), ping()], script)
    armed_agent, armed = run([mappings(LUN_ZERO_BLANK), ping()], script, check_column_types="warn")
    before = [(t, orjson.loads(b)) for t, _, b in rows(plain_agent.store, plain.run_id)]
    after = [(t, orjson.loads(b)) for t, _, b in rows(armed_agent.store, armed.run_id)]

    added = [
        (t, b)
        for t, b in after
        if b.get("path") == "tool_contracts" or b.get("name") == DISPOSITION
    ]
    assert [t for t, _ in added] == ["write", "event"]
    assert added[0][1] == {
        "commit": 0,
        "path": "tool_contracts",
        "value": {
            "list_lun_mappings": {
                "result_columns": {"host": "string", "logical_unit_number": "number"}
            }
        },
        "verb": "set",
    }
    disposition = added[1][1]["payload"]
    assert disposition["posture"] == "observe"
    by_check = {r["check"]: r for r in disposition["rows"]}
    assert set(by_check) == {
        "column-type-mismatch",
        "missing-column",
        "empty-lookup",
        "prior-turn-evidence",
        "unsupported-argument",
    }
    # the ping result is a result of a tool declaring no columns: not applicable, once each
    assert counts(by_check["column-type-mismatch"]) == (0, 0, 1, 0)
    assert counts(by_check["missing-column"]) == (0, 0, 1, 0)
    assert [c for c, r in by_check.items() if r["armed"]] == [
        "column-type-mismatch",
        "missing-column",
    ]
    assert all(counts(by_check[c]) == (0, 0, 0, 0) for c in ("empty-lookup", "prior-turn-evidence"))
    assert [t for t, _ in after].index("event") == len(after) - 3  # before break-final, close

    rest = [(t, b) for t, b in after if (t, b) not in added]
    assert len(rest) == len(before)
    (opened_before, *others_before), (opened_after, *others_after) = before, rest
    assert opened_after[1]["options"] == {
        **opened_before[1]["options"],
        "check_column_types": "warn",
        "integrity_posture": "observe",
    }
    assert {k: v for k, v in opened_after[1].items() if k != "options"} == {
        k: v for k, v in opened_before[1].items() if k != "options"
    }
    seeded = [i for i, (t, b) in enumerate(others_after) if b.get("stage") == "seed"]
    assert seeded == [i for i, (t, b) in enumerate(others_before) if b.get("stage") == "seed"]
    (at,) = seeded
    seed_before, seed_after = others_before.pop(at), others_after.pop(at)
    assert seed_after[1] == {**seed_before[1], "writes": seed_before[1]["writes"] + 1}
    assert others_after == others_before
    assert not events_of(armed_agent.store, armed.run_id, CONTEXT_ERROR)
    settled(armed_agent, armed, check_column_types="warn")
    settled(plain_agent, plain)
