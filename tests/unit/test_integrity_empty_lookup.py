"""empty-lookup: a lookup keyed on a value the run itself produced came back empty.

The fixture is upstream's recorded failure: a reverse-lookup tool whose filter could never
match answered every WWPN its declared producer served with an empty list.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfootprint.integrity.contracts import Contract
from agentfootprint.integrity.empty_lookup import (
    CEILING,
    CHECK,
    SEAM,
    Produced,
    canary,
    judge_empty_lookup,
)
from agentfootprint.integrity.rail import ToolCall
from agentfootprint.testing.strategies import json_values

WWPN = "10:00:00:90:fa:12:34:56"
LOGINS = Contract(tool="port_logins", arguments_from=("list_hbas",))
ABSENT = {
    "af_absent": True,
    "outcome": "nothing_found",
    "looked_for": "port logins",
    "checked": [{"what": "switch fabric A"}],
    "retry_returns_the_same": True,
}

_ids = iter(range(10**6))


def tool_call(
    tool: str,
    content: Any,
    arguments: Any = None,
    *,
    call_id: str | None = None,
    is_error: bool = False,
) -> ToolCall:
    text = content if isinstance(content, str) or content is None else json.dumps(content)
    return ToolCall(
        tool=tool,
        tool_call_id=call_id or f"call_{next(_ids)}",
        arguments=arguments,
        content=text,
        is_error=is_error,
        turn=1,
        history_index=0,
    )


def hbas() -> ToolCall:
    return tool_call(
        "list_hbas",
        [{"host": "desk-114", "wwpn": WWPN.upper()}, {"host": "desk-115", "wwpn": "other"}],
        {},
        call_id="call_hbas",
    )


def lookup(content: Any, arguments: Any = None, **kw: Any) -> ToolCall:
    return tool_call(
        "port_logins",
        content,
        {"wwpn": WWPN} if arguments is None else arguments,
        call_id="call_logins",
        **kw,
    )


def test_the_reverse_lookup_failure_files_one_advisory_naming_both_tools() -> None:
    judged = judge_empty_lookup(LOGINS, lookup([]), [hbas()])
    assert judged.verdict == "checked"
    (finding,) = judged.findings
    assert finding.check == finding.kind == CHECK == "empty-lookup"
    assert finding.seam == SEAM == "write"
    assert finding.advisory is True and finding.synthetic is False
    assert finding.subjects == (("tool", "port_logins"), ("tool", "list_hbas"))
    assert finding.predicate == "wwpn"
    assert finding.witnesses == ("call_logins", "call_hbas")
    assert finding.facts == {
        "value": WWPN,
        "producer": "list_hbas",
        "producer_call": "call_hbas",
        "path": "wwpn",
        "shape": "rowset",
    }
    assert finding.message == (
        f"'port_logins' was called with wwpn = \"{WWPN}\" — a value this run itself "
        "produced, in a result from 'list_hbas', which 'port_logins' declares as where its "
        "arguments come from — and the lookup came back with a rowset with zero rows. That "
        "pairing is what makes it worth a look: the run had the identifier, so an empty "
        "answer is either a true absence or a lookup that could never have matched, and "
        f"those two are byte-identical from here. {CEILING} Call id call_logins. Nothing "
        "here blocked the call, changed the result, or retried anything."
    )
    assert "never a verdict that anything is wrong" in CEILING


def test_the_produced_index_gives_the_same_judgement() -> None:
    index = Produced()
    index.add(tool_call("unrelated", f"mentions {WWPN}", {}, call_id="call_unrelated"))
    index.add(hbas())
    index.add(tool_call("list_hbas", "", {}, call_id="call_blank"))  # no text grounds nothing
    index.add(tool_call("list_hbas", None, {}, call_id="call_none"))
    assert index.grounds(["list_hbas"]) == [("call_hbas", "list_hbas", str(hbas().content).lower())]
    assert [g[0] for g in index.grounds(["list_hbas", "unrelated"])] == [
        "call_unrelated",
        "call_hbas",
    ]
    assert judge_empty_lookup(LOGINS, lookup([]), index) == judge_empty_lookup(
        LOGINS, lookup([]), [hbas()]
    )


def test_grounds_keep_the_order_served_and_the_first_producer_is_named() -> None:
    contract = Contract(tool="port_logins", arguments_from=("list_hbas", "list_hosts"))
    first = tool_call("list_hosts", f"host desk-114 has {WWPN}", {}, call_id="call_hosts")
    index = Produced([first, hbas()])
    assert [g[0] for g in index.grounds(["list_hbas", "list_hosts"])] == [
        "call_hosts",
        "call_hbas",
    ]
    for produced in (index, [first, hbas()]):
        (finding,) = judge_empty_lookup(contract, lookup([]), produced).findings
        assert finding.facts["producer"] == "list_hosts"
        assert finding.witnesses == ("call_logins", "call_hosts")


def test_a_lookup_that_found_rows_passes() -> None:
    judged = judge_empty_lookup(LOGINS, lookup([{"port": "fc1/3"}]), [hbas()])
    assert judged.verdict == "checked" and judged.findings == ()


def test_a_value_not_from_a_declared_producer_passes() -> None:
    judged = judge_empty_lookup(LOGINS, lookup([], {"wwpn": "20:00:00:25:b5:00:00:01"}), [hbas()])
    assert judged.verdict == "checked" and judged.findings == ()
    # served by a tool the consumer does not declare: no ground
    other = tool_call("inventory", f"{WWPN}", {})
    assert judge_empty_lookup(LOGINS, lookup([]), [other]).verdict == "unreachable"


def test_short_and_non_string_arguments_are_never_leaves() -> None:
    producer = tool_call("list_hbas", "port 7 of fc1 is up: true", {})
    judged = judge_empty_lookup(
        LOGINS, lookup([], {"port": 7, "slot": "fc1", "up": True, "n": None}), [producer]
    )
    assert judged.verdict == "checked" and judged.findings == ()


def test_nested_leaves_are_each_a_finding_with_their_path() -> None:
    judged = judge_empty_lookup(
        LOGINS,
        lookup([], {"filter": {"wwpns": [f"  {WWPN}  ", "desk-115"]}}),
        [hbas()],
    )
    assert [f.predicate for f in judged.findings] == ["filter.wwpns.0", "filter.wwpns.1"]
    assert judged.findings[0].facts["value"] == WWPN  # trimmed


@pytest.mark.parametrize(
    "content",
    [
        "no logins found for that WWPN",  # prose
        {"rows": []},  # a bespoke wrapper
        {"logins": 0},
        None,  # no result
        "",
        "[",
        "[" * 100_000 + "]" * 100_000,  # past the parser's depth
    ],
)
def test_what_cannot_be_counted_is_not_applicable(content: Any) -> None:
    judged = judge_empty_lookup(LOGINS, lookup(content), [hbas()])
    assert judged.verdict == "not_applicable" and judged.findings == ()


def test_an_error_and_a_tool_without_sources_are_not_applicable() -> None:
    assert judge_empty_lookup(LOGINS, lookup([], is_error=True), [hbas()]).verdict == (
        "not_applicable"
    )
    bare = Contract(tool="port_logins")
    assert judge_empty_lookup(bare, lookup([]), [hbas()]).verdict == "not_applicable"


def test_no_grounds_is_unreachable() -> None:
    assert judge_empty_lookup(LOGINS, lookup([]), []).verdict == "unreachable"
    assert judge_empty_lookup(LOGINS, lookup([]), Produced()).verdict == "unreachable"


def test_a_declared_absence_is_empty_and_named_as_such() -> None:
    (finding,) = judge_empty_lookup(LOGINS, lookup(ABSENT), [hbas()]).findings
    assert finding.facts["shape"] == "absence"
    assert (
        "came back with a declared absence — the tool said the search ran and matched "
        "nothing. That pairing" in finding.message
    )
    assert CEILING in finding.message


def test_the_call_itself_is_never_its_own_ground() -> None:
    contract = Contract(tool="port_logins", arguments_from=("port_logins",))
    own = lookup({**ABSENT, "looked_for": WWPN})
    assert judge_empty_lookup(contract, own, [own]).verdict == "unreachable"


def test_canary_files_a_synthetic_advisory() -> None:
    judged = canary()
    (finding,) = judged.findings
    assert finding.synthetic and finding.advisory and finding.kind == CHECK
    assert finding.facts["value"] == "canary-grounded-id"


_PRODUCERS = st.lists(
    st.builds(
        tool_call,
        st.sampled_from(["list_hbas", "other", "port_logins"]),
        st.one_of(json_values().map(json.dumps), st.text(max_size=30), st.none()),
        json_values(max_leaves=4),
        is_error=st.booleans(),
    ),
    max_size=4,
)


@given(
    content=st.one_of(
        json_values().map(json.dumps),
        st.just(json.dumps(ABSENT)),
        st.text(max_size=30),
        st.none(),
    ),
    arguments=json_values(),
    produced=_PRODUCERS,
    indexed=st.booleans(),
    is_error=st.booleans(),
)
def test_any_json_gives_a_judgement(
    content: str | None,
    arguments: Any,
    produced: list[ToolCall],
    indexed: bool,
    is_error: bool,
) -> None:
    call = tool_call("port_logins", content, arguments, is_error=is_error)
    judged = judge_empty_lookup(LOGINS, call, Produced(produced) if indexed else produced)
    assert judged == judge_empty_lookup(LOGINS, call, produced)  # the index agrees
    assert judged.verdict in ("checked", "not_applicable", "unreachable")
    assert all(f.check == CHECK and f.advisory for f in judged.findings)
    json.dumps([f.payload() for f in judged.findings], allow_nan=False)
