"""column-types: a tool's declared ``result_columns`` against the rows it returned.

Fixtures are upstream's recorded failures: LUN 0 stored as ``""``, numbers returned as
quoted strings, and the 8 MiB disk shown as ``0.0`` (which passes: the check judges type,
never meaning, and says so in every finding).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.errors import UsageError
from agentfootprint.integrity.column_types import (
    CEILING,
    CHECKS,
    MAX_NAMED_IN_REFUSAL,
    SEAM,
    _every_cell_matches,
    _matches,
    canary,
    judge_columns,
    refusal_text,
)
from agentfootprint.integrity.contracts import COLUMN_TYPES, Column, Contract
from agentfootprint.integrity.rail import Finding, ToolCall
from agentfootprint.testing.strategies import json_values

WARN_OUTCOME = (
    "Nothing here blocked the call, changed the result, or retried anything — the model "
    "reads the rows exactly as the tool returned them."
)
ENFORCE_OUTCOME = (
    "The result was REFUSED: the model reads a teaching sentence instead of these rows."
)


def contract(tool: str = "mappings", **columns: str | Column) -> Contract:
    declared = {n: c if isinstance(c, Column) else Column(type=c) for n, c in columns.items()}
    return Contract(tool=tool, result_columns=tuple(sorted(declared.items())))


def call(content: Any, *, tool: str = "mappings", is_error: bool = False) -> ToolCall:
    text = content if isinstance(content, str) or content is None else json.dumps(content)
    return ToolCall(
        tool=tool,
        tool_call_id="call_1",
        arguments={},
        content=text,
        is_error=is_error,
        turn=1,
        history_index=2,
    )


def test_lun_zero_written_as_empty_string_is_a_mismatch() -> None:
    rows = [
        {"host_group": "hg1", "logical_unit_number": ""},
        {"host_group": "hg2", "logical_unit_number": 1},
        {"host_group": "hg3", "logical_unit_number": ""},
    ]
    judged = judge_columns(contract(logical_unit_number="number"), call(rows), mode="warn")
    assert judged.verdict == "checked"
    (finding,) = judged.findings
    assert finding.check == finding.kind == "column-type-mismatch"
    assert finding.seam == SEAM == "write"
    assert finding.predicate == "logical_unit_number"
    assert finding.subjects == (("tool", "mappings"),)
    assert finding.witnesses == ("call_1",)
    assert not finding.advisory and not finding.synthetic
    assert finding.facts == {
        "column": "logical_unit_number",
        "declared": "number",
        "nullable": False,
        "rows": 2,
        "of": 3,
        "got": "string",
        "sample": '""',
    }
    assert finding.message == (
        "'mappings' declares column 'logical_unit_number' as number, and 2 of 3 rows hold "
        'something else — the first is "" (string). '
        f"{CEILING} Call id call_1. {WARN_OUTCOME}"
    )


def test_numbers_as_quoted_strings_are_mismatches_counted_over_all_rows() -> None:
    rows = [{"iops": "1240", "latency": 0.5}, {"iops": "98304", "latency": "2.1"}]
    judged = judge_columns(
        contract("capacity", iops="number", latency="number"),
        call(rows, tool="capacity"),
        mode="enforce",
    )
    by_column = {f.predicate: f for f in judged.findings}
    assert set(by_column) == {"iops", "latency"}
    assert by_column["iops"].facts["rows"] == 2
    assert by_column["iops"].facts["sample"] == '"1240"'
    assert by_column["latency"].facts["rows"] == 1
    assert by_column["latency"].facts["sample"] == '"2.1"'
    assert all(f.message.endswith(ENFORCE_OUTCOME) for f in judged.findings)


def test_an_8_mib_disk_shown_as_zero_passes_and_the_ceiling_says_so() -> None:
    judged = judge_columns(
        contract("capacity", size_gb="number"),
        call([{"size_gb": 0.0}, {"size_gb": 512.5}], tool="capacity"),
        mode="warn",
    )
    assert judged.verdict == "checked"
    assert judged.findings == ()
    assert "a 0.0 should have been an 8" in CEILING
    bad = judge_columns(
        contract("capacity", size_gb="number", disk="string"),
        call([{"size_gb": "0.0"}], tool="capacity"),
        mode="warn",
    )
    assert len(bad.findings) == 2
    assert all(CEILING in f.message for f in bad.findings)


@pytest.mark.parametrize(
    "content",
    [
        {"rows": [{"logical_unit_number": ""}]},  # a bespoke wrapper
        [],  # zero rows: empty-lookup's subject
        [{"logical_unit_number": 1}, "prose"],  # not every element an object
        [[1, 2]],
        "LUN 0 is mapped to hg1",  # prose
        "",
        None,  # no result in the history
        "[1, 2",  # not JSON
        "[" * 100_000 + "]" * 100_000,  # past the parser's depth
        7,
    ],
)
def test_what_is_not_a_rowset_is_not_applicable(content: Any) -> None:
    judged = judge_columns(contract(logical_unit_number="number"), call(content), mode="warn")
    assert judged.verdict == "not_applicable"
    assert judged.findings == ()


def test_an_error_and_a_tool_without_columns_are_not_applicable() -> None:
    rows = [{"logical_unit_number": ""}]
    declared = contract(logical_unit_number="number")
    assert judge_columns(declared, call(rows, is_error=True), mode="warn").verdict == (
        "not_applicable"
    )
    bare = Contract(tool="mappings", arguments_from=("hosts",))
    assert judge_columns(bare, call(rows), mode="warn").verdict == "not_applicable"


def test_a_note_after_the_rows_is_not_read() -> None:
    text = json.dumps([{"count": "3"}]) + "\n\n(note: the loop appended this)"
    judged = judge_columns(contract(count="number"), call(text), mode="warn")
    assert [f.predicate for f in judged.findings] == ["count"]


def test_missing_column_is_its_own_finding_and_comes_first() -> None:
    rows = [{"host": "a", "port": None}, {"host": "b"}]
    judged = judge_columns(
        contract(wwpn=Column(type="string", nullable=True), port="number", host="string"),
        call(rows),
        mode="warn",
    )
    by_column = {f.predicate: f for f in judged.findings}
    assert set(by_column) == {"wwpn", "port"}
    missing = by_column["wwpn"]
    assert missing.check == missing.kind == "missing-column"
    assert missing.facts == {"column": "wwpn", "declared": "string", "of": 2}
    assert missing.message == (
        "'mappings' declares a column 'wwpn' (string) that is in NONE of the 2 rows it "
        "returned. This is not a mistyped value — the column is simply not there, so "
        "anything downstream that keys on it reads a rowset that cannot answer, and a row "
        "missing the column is indistinguishable from a row whose value is nothing. "
        f"{CEILING} Call id call_1. {WARN_OUTCOME}"
    )
    # a column present in some rows: null and an absent key are violations, with the hint
    port = by_column["port"]
    assert port.kind == "column-type-mismatch"
    assert (port.facts["rows"], port.facts["got"], port.facts["sample"]) == (2, "null", "null")
    assert "`{'type': '…', 'nullable': True}`" in port.message
    assert (
        "1 row it returned"
        in judge_columns(contract(wwpn="string"), call([{"host": "a"}]), mode="warn")
        .findings[0]
        .message
    )


def test_nullable_allows_null_and_absent_keys_and_names_no_hint() -> None:
    declared = contract(port=Column(type="number", nullable=True))
    ok = judge_columns(declared, call([{"port": None}, {}, {"port": 3}]), mode="warn")
    assert ok.verdict == "checked" and ok.findings == ()
    bad = judge_columns(declared, call([{"port": None}, {"port": "3"}]), mode="warn")
    (finding,) = bad.findings
    assert finding.facts["nullable"] is True
    assert "nullable" not in finding.message.split(CEILING)[0]
    first_absent = judge_columns(contract(port="number"), call([{}, {"port": 1}]), mode="warn")
    assert first_absent.findings[0].facts["sample"] == "no such key"
    assert first_absent.findings[0].facts["got"] == "missing"


@pytest.mark.parametrize(
    "value",
    ["2024-01-02", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123+02:00", "2024-01-02 03:04"],
)
def test_a_date_column_accepts_iso_8601(value: str) -> None:
    judged = judge_columns(contract(seen="date"), call([{"seen": value}]), mode="warn")
    assert judged.verdict == "checked" and judged.findings == ()


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ("yesterday", "string"),
        ("2024-13-01", "string"),
        (1704153600, "number"),  # an epoch number is not a date
        (True, "boolean"),
    ],
)
def test_a_date_column_refuses_what_is_not_a_date(value: Any, got: str) -> None:
    (finding,) = judge_columns(contract(seen="date"), call([{"seen": value}]), mode="warn").findings
    assert finding.facts["got"] == got


@pytest.mark.parametrize(
    ("declared", "value", "sample", "got"),
    [
        ("number", True, "true", "boolean"),  # a bool is no number
        ("number", [1], "[1]", "array"),
        ("boolean", 1, "1", "number"),
        ("string", {"a": 1}, '{"a":1}', "object"),
        ("string", 3.0, "3", "number"),  # as JavaScript's String spells it
        ("number", "x" * 100, '"' + "x" * 79 + '…"', "string"),  # clipped at 80
    ],
)
def test_type_rules(declared: str, value: Any, sample: str, got: str) -> None:
    (finding,) = judge_columns(contract(c=declared), call([{"c": value}]), mode="warn").findings
    assert (finding.facts["sample"], finding.facts["got"]) == (sample, got)


def test_non_finite_numbers_are_mismatches() -> None:
    (finding,) = judge_columns(
        contract(c="number"), call('[{"c": NaN}, {"c": 1}]'), mode="warn"
    ).findings
    assert (finding.facts["sample"], finding.facts["got"]) == ("NaN", "the number NaN")


def test_mode_is_checked() -> None:
    with pytest.raises(UsageError):
        judge_columns(contract(c="number"), call([{"c": 1}]), mode="off")


def test_refusal_text_is_rederived_from_the_findings_facts_alone() -> None:
    rows = [{"iops": "1240", "host": "a"}, {"iops": 7, "host": "b"}]
    judged = judge_columns(
        contract("capacity", iops="number", wwpn="string", host="string"),
        call(rows, tool="capacity"),
        mode="enforce",
    )
    expected = (
        "Result rejected: capacity returned rows that disagree with the columns it declares "
        "— 'iops' is declared number and 1 of 2 rows hold string (first: \"1240\"); 'wwpn' "
        "is declared but present in no row. Fix the tool so the column holds what it "
        "declares, or change the declaration. No data was returned."
    )
    assert refusal_text("capacity", judged.findings) == expected
    # the recorded form: only what a finding's payload carries, messages blanked
    recorded = [
        Finding(
            check=p["check"],
            kind=p["kind"],
            seam=p["seam"],
            subjects=tuple((s["kind"], s["id"]) for s in p["subjects"]),
            witnesses=tuple(p["witnesses"]),
            message="",
            predicate=p.get("predicate"),
            facts=p["facts"],
        )
        for p in (json.loads(json.dumps(f.payload())) for f in judged.findings)
    ]
    assert refusal_text("capacity", recorded) == expected


def test_refusal_names_at_most_five_then_counts_the_rest() -> None:
    names = [f"c{i}" for i in range(8)]
    rows = [{name: "text" for name in names[:6]}]
    judged = judge_columns(
        contract("wide", **dict.fromkeys(names, "number")), call(rows, tool="wide"), mode="enforce"
    )
    assert len(judged.findings) == 8  # six mismatches, two missing
    text = refusal_text("wide", judged.findings)
    assert text.count(" is declared ") == MAX_NAMED_IN_REFUSAL
    assert "present in no row" not in text  # mismatches are named first
    assert text.endswith(
        ", and 3 more. Fix the tool so the column holds what it declares, or change the "
        "declaration. No data was returned."
    )
    few = refusal_text("wide", judged.findings[:5])
    assert " more" not in few


def test_canary_files_a_synthetic_mismatch() -> None:
    judged = canary()
    assert judged.verdict == "checked"
    (finding,) = judged.findings
    assert finding.synthetic and finding.kind == "column-type-mismatch"
    assert finding.facts["sample"] == '"1240"'


_COLUMNS = st.dictionaries(
    st.sampled_from(["a", "b", "c", "logical_unit_number"]),
    st.builds(Column, type=st.sampled_from(COLUMN_TYPES), nullable=st.booleans()),
    min_size=1,
    max_size=4,
)
_ROWS = st.lists(
    st.dictionaries(st.sampled_from(["a", "b", "c", "x"]), json_values(max_leaves=4), max_size=4),
    max_size=4,
)


@given(
    columns=_COLUMNS,
    content=st.one_of(
        json_values().map(json.dumps),
        _ROWS.map(json.dumps),
        st.text(max_size=30),
        st.none(),
    ),
    is_error=st.booleans(),
    mode=st.sampled_from(["warn", "enforce"]),
)
def test_any_json_gives_a_judgement(
    columns: dict[str, Column], content: str | None, is_error: bool, mode: str
) -> None:
    declared = Contract(tool="t", result_columns=tuple(sorted(columns.items())))
    judged = judge_columns(declared, call(content, tool="t", is_error=is_error), mode=mode)
    assert judged.verdict in ("checked", "not_applicable")
    assert all(f.check in CHECKS and f.kind == f.check for f in judged.findings)
    assert len({f.predicate for f in judged.findings}) == len(judged.findings)
    json.dumps([f.payload() for f in judged.findings], allow_nan=False)  # findings are JSON
    refusal_text("t", judged.findings)


ROW_VALUES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3)
KINDS = st.sampled_from(["string", "number", "boolean", "date"])


@given(
    rows=st.lists(st.dictionaries(st.sampled_from(["a", "b"]), ROW_VALUES), min_size=1),
    kinds=st.tuples(KINDS, KINDS),
    nullable=st.booleans(),
)
@example(rows=[{"a": 1, "b": 1}, {"a": True, "b": 1}], kinds=("number",) * 2, nullable=False)
@example(
    rows=[{"a": 1.5, "b": 1}, {"a": float("nan"), "b": 1}], kinds=("number",) * 2, nullable=False
)
@example(
    rows=[{"a": 2, "b": 1}, {"a": float("-inf"), "b": 1}], kinds=("number",) * 2, nullable=False
)
@example(rows=[{"a": 1, "b": 0.5}], kinds=("number",) * 2, nullable=False)
@example(
    rows=[{"a": True, "b": False}, {"a": 0, "b": True}], kinds=("boolean",) * 2, nullable=False
)
@example(rows=[{"a": "x", "b": "y"}, {"b": "y"}], kinds=("string",) * 2, nullable=True)
@example(rows=[{"a": None, "b": "y"}], kinds=("string",) * 2, nullable=True)
@example(rows=[{"a": "2024-01-02", "b": "x"}], kinds=("date", "string"), nullable=False)
def test_the_fast_path_agrees_with_the_rule_row_by_row(
    rows: list[dict[str, Any]], kinds: tuple[str, str], nullable: bool
) -> None:
    """``_every_cell_matches`` reads the whole rowset by type identity; it holds exactly when
    every row has every column with a value the rule accepts, not null and no date (a bool is
    no number, NaN and the infinities are none either), and then the rule files nothing."""
    columns = (("a", Column(type=kinds[0], nullable=nullable)), ("b", Column(type=kinds[1])))
    by_rule = all(
        row.get(name) is not None and column.type != "date" and _matches(row[name], column.type)
        for row in rows
        for name, column in columns
    )
    assert _every_cell_matches(rows, columns) is by_rule
    if by_rule:
        judged = judge_columns(
            Contract(tool="t", result_columns=columns),
            call(json.dumps(rows), tool="t"),
            mode="warn",
        )
        assert judged.verdict == "checked" and not judged.findings
