"""The period a result covers: the instants, the rule set, the verdict, the row (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfootprint.integrity.contracts import Contract
from agentfootprint.integrity.period import (
    CLAUSES,
    VERDICTS,
    Period,
    instant_of,
    least_held,
    period_problem,
    period_row,
    period_rows_of,
    period_verdict,
    periods_of,
    read_period,
)
from agentfootprint.integrity.rail import ToolCall
from agentfootprint.logformat.canonical import canon
from agentfootprint.runtime.envelopes import absent, described, period

Q = ("2026-09-26T09:00:00Z", "2026-09-26T10:00:00Z")


def verdict(queried: tuple[str, str], held: tuple[str, str] | str) -> str:
    wire: dict[str, Any] = {
        "queried": {"from": queried[0], "to": queried[1]},
        "held": held if isinstance(held, str) else {"from": held[0], "to": held[1]},
    }
    read = read_period(wire)
    assert read is not None, period_problem(wire)
    return period_verdict(read)


def test_upstreams_example_the_hour_asked_about_is_after_the_export() -> None:
    assert verdict(Q, ("2026-08-27T02:00:00Z", "2026-09-26T02:00:00Z")) == "not-held"


def test_bounds_are_inclusive() -> None:
    assert verdict(Q, Q) == "covered"
    assert verdict(Q, ("2026-09-26T10:00:00Z", "2026-09-26T11:00:00Z")) == "partly-held"  # a point
    assert verdict(Q, ("2026-09-26T08:00:00Z", "2026-09-26T09:00:00Z")) == "partly-held"
    assert verdict(Q, ("2026-09-26T10:00:01Z", "2026-09-26T11:00:00Z")) == "not-held"
    assert verdict(Q, ("2026-09-26T09:30:00Z", "2026-09-26T09:40:00Z")) == "partly-held"
    assert verdict(Q, "unknown") == "unknown"


def test_zones_are_compared_as_instants() -> None:
    # 10:00+02:00 is 08:00Z: the store ends before the hour asked about begins
    assert verdict(Q, ("2026-09-26T00:00:00+02:00", "2026-09-26T10:00:00+02:00")) == "not-held"
    # 05:00-05:00 is 10:00Z: the same instant as the end asked for
    assert verdict(Q, ("2026-09-26T04:00:00-05:00", "2026-09-26T05:00:00-05:00")) == "covered"
    assert instant_of("2026-09-26T10:00:00+02:00") == instant_of("2026-09-26T08:00:00Z")
    assert instant_of("2026-09-26t08:00z") == instant_of("2026-09-26T08:00:00.000000000Z")


def test_instants_are_exact_and_lenient_as_rfc_3339_is() -> None:
    one = instant_of("2026-09-26T08:00:00.000000001Z")
    zero = instant_of("2026-09-26T08:00:00Z")
    assert one is not None and zero is not None and one - zero == 1
    # the leap second compares as the next minute's :00
    assert instant_of("2016-12-31T23:59:60Z") == instant_of("2017-01-01T00:00:00Z")
    assert instant_of("0000-01-01T00:00:00Z") is not None
    assert instant_of("1970-01-01T00:00:00Z") == 0
    assert instant_of("2024-02-29T00:00:00Z") is not None


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-26T08:00:00",  # no zone
        "2026-09-26",  # a date alone
        "2026-02-30T08:00:00Z",  # no such day
        "2025-02-29T08:00:00Z",
        "2026-09-26T24:00:00Z",  # hour 24
        "2026-09-26T08:00:61Z",
        "2026-09-26T08:00:00+24:00",
        "2026-09-26 08:00:00Z",  # a space is not the separator
        "2026-09-26T08:00:00Z\n",
        "\u0662\u0660\u0662\u0666-09-26T08:00:00Z",  # digits, but not ASCII ones
        "yesterday",
        20260926,
        None,
    ],
)
def test_what_is_not_an_instant(text: Any) -> None:
    assert instant_of(text) is None
    assert read_period({"queried": {"from": text, "to": Q[1]}, "held": "unknown"}) is None


@pytest.mark.parametrize(
    "wire",
    [
        None,
        [],
        "unknown",
        {"held": "unknown"},  # nothing queried
        {"queried": {"from": Q[0], "to": Q[1]}},  # nothing held
        {"queried": {"from": Q[1], "to": Q[0]}, "held": "unknown"},  # backwards
        {"queried": {"from": Q[0], "to": Q[1]}, "held": "Unknown"},
        {"queried": {"from": Q[0], "to": Q[1]}, "held": {"from": Q[1], "to": Q[0]}},
        {"queried": {"from": Q[0], "to": Q[1]}, "held": "unknown", "readAt": Q[0]},
        {"queried": {"from": Q[0], "to": Q[1]}, "held": "unknown", "read_at": "now"},
        {"queried": {"from": Q[0], "to": Q[1], "zone": "Z"}, "held": "unknown"},
        {"queried": [Q[0], Q[1]], "held": "unknown"},
    ],
)
def test_a_malformed_period_is_not_read(wire: Any) -> None:
    assert read_period(wire) is None
    assert isinstance(period_problem(wire), str)


def test_a_slip_names_the_key_meant() -> None:
    wire = {"queried": {"from": Q[0], "to": Q[1]}, "held": "unknown", "readAt": 1}
    problem = period_problem(wire)
    assert problem is not None and "did you mean `read_at`?" in problem


def test_read_at_null_is_not_declared_and_the_wire_round_trips() -> None:
    wire = {"queried": {"from": Q[0], "to": Q[1]}, "held": "unknown", "read_at": None}
    assert read_period(wire) == Period(queried=Q, held="unknown")
    full = period(Q[0], Q[1], held=("2026-01-01T00:00:00Z", Q[1]), read_at=Q[1])
    read = read_period(full)
    assert read is not None and read.wire() == full


def test_the_verdicts_and_clauses_are_upstreams() -> None:
    assert VERDICTS == ("covered", "partly-held", "not-held", "unknown", "undeclared")
    assert set(CLAUSES) == {"not-held", "partly-held", "unknown"}
    assert CLAUSES["unknown"] == (
        "`period.verdict` is `unknown`: the tool cannot say what time its store holds, so this "
        "result cannot vouch that it covers the time this read asked about (`period.queried`)."
    )
    assert all(not any(c.isdigit() for c in clause) for clause in CLAUSES.values())
    assert least_held(["covered", "unknown", "partly-held"]) == "partly-held"
    assert least_held(["covered", "not-held"]) == "not-held"
    assert least_held([]) is None


HELD = ("2026-08-27T02:00:00Z", "2026-09-26T02:00:00Z")
NOT_HELD = period(Q[0], Q[1], held=HELD)
COVERED = period(Q[0], Q[1], held=("2026-09-01T00:00:00Z", "2026-10-01T00:00:00Z"))
PROVENANCE = {"measured_at": HELD[1], "source": "nightly export"}


def test_periods_of_reads_upstreams_envelopes_only() -> None:
    found = absent("failed runs", ["the export"], period=NOT_HELD)
    assert periods_of(found) == [read_period(NOT_HELD)]
    rows = described([{"entity": "vm-7"}], provenance=PROVENANCE, period=COVERED)
    assert periods_of(rows) == [read_period(COVERED)]
    # a ledger around an absence: the ledger's period first, then the absence's
    ledger = {"af_coverage": {"checked": [{"what": "x"}], "period": COVERED}, "result": found}
    assert periods_of(ledger) == [read_period(COVERED), read_period(NOT_HELD)]
    # a plain object with a period member, a rowset: nothing declared
    assert periods_of({"period": NOT_HELD, "rows": []}) == []
    assert periods_of([NOT_HELD]) == []
    # a malformed period is not read; the envelope is still an absence
    broken = {**found, "period": {"queried": {"from": Q[1], "to": Q[0]}, "held": "unknown"}}
    assert periods_of(broken) == []
    # a described envelope with any fault is data: its period is not read
    assert periods_of({**rows, "facts": [{"vm": "no entity"}]}) == []
    assert periods_of({**rows, "extra": 1}) == []
    assert periods_of({**rows, "period": None}) == []
    assert periods_of({**rows, "af_semantics": 1}) == []


def call(content: Any, *, tool: str = "backup_runs", is_error: bool = False) -> ToolCall:
    text = content if isinstance(content, str) or content is None else canon(content).decode()
    return ToolCall(
        tool=tool,
        tool_call_id="c1",
        arguments={},
        content=text,
        is_error=is_error,
        turn=1,
        history_index=2,
    )


DECLARING = Contract(tool="backup_runs", period="window")


def judged(contract: Contract | None, content: Any) -> dict[str, Any] | None:
    """``period_row`` of one call of ``backup_runs`` whose result is ``content``."""
    made = call(content)
    return period_row(contract, made.tool, made.tool_call_id, made.content)


def test_period_row() -> None:
    found = absent("failed runs", ["the export"], period=NOT_HELD)
    assert judged(DECLARING, found) == {
        "tool": "backup_runs",
        "tool_call_id": "c1",
        "verdict": "not-held",
        "argument": "window",
    }
    assert judged(None, found) == {
        "tool": "backup_runs",
        "tool_call_id": "c1",
        "verdict": "not-held",
    }
    # a note after the result is not read
    assert judged(None, canon(found).decode() + "\n\n" + CLAUSES["not-held"]) == (
        judged(None, found)
    )
    assert judged(DECLARING, "no rows")["verdict"] == "undeclared"  # type: ignore[index]
    assert judged(DECLARING, None)["verdict"] == "undeclared"  # type: ignore[index]
    assert judged(None, [{"a": 1}]) is None
    assert judged(Contract(tool="backup_runs", arguments_from=("x",)), "x") is None
    ledger = {"af_coverage": {"period": COVERED}, "result": found}
    assert judged(None, ledger)["verdict"] == "not-held"  # type: ignore[index]


def test_period_rows_of_mirrors_the_arming() -> None:
    found = absent("failed runs", ["the export"], period=NOT_HELD)
    calls = [
        call(found, tool="search"),
        call("nothing", tool="backup_runs"),
        call(found, tool="search", is_error=True),
    ]
    assert period_rows_of(calls, {}, False) == []  # unarmed: nothing
    assert [r["tool"] for r in period_rows_of(calls, {}, True)] == ["search"]
    armed = period_rows_of(calls, {"backup_runs": DECLARING}, False)
    assert [(r["tool"], r["verdict"]) for r in armed] == [
        ("search", "not-held"),
        ("backup_runs", "undeclared"),
    ]


BASE = datetime(2026, 9, 26, tzinfo=UTC)
ZONES = st.integers(min_value=-12 * 4, max_value=14 * 4).map(lambda q: q * 15)


def spelled(minute: int, zone: int, lower: bool) -> str:
    local = (BASE + timedelta(minutes=minute)).astimezone(timezone(timedelta(minutes=zone)))
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if zone == 0:
        text += "Z"
    else:
        sign = "-" if zone < 0 else "+"
        text += f"{sign}{abs(zone) // 60:02d}:{abs(zone) % 60:02d}"
    return text.lower() if lower else text


def span(draw: Any) -> tuple[int, int]:
    a = draw(st.integers(min_value=0, max_value=40))
    b = draw(st.integers(min_value=0, max_value=40))
    return (min(a, b), max(a, b))


@st.composite
def spans(draw: Any) -> tuple[tuple[int, int], tuple[int, int], list[int], list[bool]]:
    queried, held = span(draw), span(draw)
    zones = [draw(ZONES) for _ in range(4)]
    lower = [draw(st.booleans()) for _ in range(4)]
    return queried, held, zones, lower


@given(spans())
def test_the_verdict_is_the_interval_comparison(
    case: tuple[tuple[int, int], tuple[int, int], list[int], list[bool]],
) -> None:
    (q0, q1), (h0, h1), zones, lower = case
    text = [spelled(m, z, low) for m, z, low in zip((q0, q1, h0, h1), zones, lower, strict=True)]
    asked = set(range(q0, q1 + 1))  # whole minutes, bounds inclusive
    held = set(range(h0, h1 + 1))
    expected = "covered" if asked <= held else "not-held" if not asked & held else "partly-held"
    assert verdict((text[0], text[1]), (text[2], text[3])) == expected
