"""``findings``: the reserved ``_findings`` argument peeled before the tool, filed as rows, and
served back as a request-only piece (projection 4); noise collapsed on the wire only."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from feature_support import events_of, fixed_ports, rows, tool_messages, without_open

import agentfootprint as af
from agentfootprint.features.findings_ledger import FINDINGS_INSTRUCTION, FINDINGS_SCHEMA
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.hashing import hexdigest

SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
    "additionalProperties": False,
}
FACT = {
    "toolCallId": "c1",
    "standing": "fact",
    "assertions": [{"subject": {"kind": "table", "id": "orders"}, "predicate": "rows", "value": 3}],
}


def lookup(got: list[Any]) -> af.Tool:
    def run(args: dict[str, Any]) -> str:
        got.append(args)
        return f"rows for {args['q']}"

    return af.define_tool(name="lookup", description="Look.", input_schema=SCHEMA, execute=run)


def asks(q: str, call_id: str, findings: Any = None) -> af.LLMResponse:
    arguments: dict[str, Any] = {"q": q}
    if findings is not None:
        arguments["_findings"] = findings
    return af.reply(tool_calls=[af.tool_call("lookup", arguments, id=call_id)])


SCRIPT = [
    asks("orders", "c1", {"basis": "direct", "proposition": "orders has rows"}),
    asks("refunds", "c2", {"basis": "exploratory", "previous": [FACT]}),
    asks(
        "misc", "c3", {"basis": "direct", "previous": [{"toolCallId": "c2", "standing": "noise"}]}
    ),
    "orders has 3 rows",
]


def agent_with(script: list[Any], got: list[Any], **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[lookup(got)],
        ports=fixed_ports(),
        **{"findings": True, **options},
    )


def replayed(agent: af.Agent, result: af.RunResult, **options: Any) -> af.ReplayResult:
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[lookup([])],
        **{"findings": True, **options},
    )
    again = af.replay_sync(twin, agent.store, result.run_id)
    assert again.calls_checked == result.calls
    assert af.same_recording(agent.store, result.run_id, twin.store, again.result.run_id)
    return again


def test_the_tool_never_gets_findings_while_the_history_and_the_receipt_keep_them() -> None:
    got: list[Any] = []
    agent = agent_with(list(SCRIPT), got)
    result = agent.run_sync("how many orders?")
    assert got == [{"q": "orders"}, {"q": "refunds"}, {"q": "misc"}]
    calls = [m for m in result.state["history"] if m.get("tool_calls")]
    sent = calls[1]["tool_calls"][0]["arguments"]
    assert sent == {"q": "refunds", "_findings": {"basis": "exploratory", "previous": [FACT]}}
    # the receipt of call 2 covers the assistant message exactly as the model sent it
    receipt = af.receipt_at(agent.store, result.run_id, 2)
    assert receipt is not None
    assert hexdigest("piece/message", canon(calls[1])) in receipt.messages
    served = af.served_at(agent.store, result.run_id, 0)
    schema = served["tools"][0]["input_schema"]
    assert schema["properties"]["_findings"] == FINDINGS_SCHEMA
    assert schema["required"] == ["q"]  # never required
    assert {"source": "findings-instruction", "text": FINDINGS_INSTRUCTION} in served["system"]
    replayed(agent, result)


def test_rows_are_filed_as_declared_and_nothing_is_inferred() -> None:
    got: list[Any] = []
    script = [asks("a", "c1"), *SCRIPT[1:]]  # the first call declares nothing
    agent = agent_with(script, got)
    result = agent.run_sync("go")
    assert result.state["findings_rows"] == [
        {"kind": "basis", "tool_call_id": "c2", "tool": "lookup", "iteration": 2,
         "basis": "exploratory"},
        {"kind": "standing", "tool_call_id": "c1", "standing": "fact",
         "assertions": FACT["assertions"], "declared_on": "c2", "iteration": 2,
         "tool": "lookup"},
        {"kind": "basis", "tool_call_id": "c3", "tool": "lookup", "iteration": 3,
         "basis": "direct"},
        {"kind": "standing", "tool_call_id": "c2", "standing": "noise", "assertions": [],
         "declared_on": "c3", "iteration": 3, "tool": "lookup"},
    ]  # fmt: skip


def test_malformed_parts_are_dropped_and_counted_unknown_ids_marked() -> None:
    findings = {
        "basis": "direct",
        "expect": "enormous",
        "previous": [
            {"toolCallId": "nope", "standing": "open", "settles": "ask finance"},
            {"toolCallId": "c1", "standing": "maybe"},
            "not an entry",
        ],
    }
    agent = agent_with([asks("a", "c1"), asks("b", "c2", findings), "ok"], [])
    result = agent.run_sync("go")
    basis, open_row = result.state["findings_rows"]
    assert basis["malformed"] == 3 and "expect" not in basis
    assert open_row["unknown_id"] is True and "tool" not in open_row
    assert open_row["settles"] == "ask finance"


def test_no_piece_before_the_first_standing_then_a_piece_and_the_noise_ticket() -> None:
    got: list[Any] = []
    agent = agent_with(list(SCRIPT), got)
    result = agent.run_sync("go")
    sources = [[p["source"] for p in r["system"]] for r in agent.config.provider.requests]
    assert sources[0] == sources[1] == ["findings-instruction"]  # no standing yet
    assert sources[2][-1] == sources[3][-1] == "findings"
    last = agent.config.provider.requests[3]
    piece = last["system"][-1]["text"]
    assert "facts:\n- table/orders · rows = 3 ← tool:c1" in piece
    assert "noise: 1 result" in piece and "undeclared: 1 result" in piece
    by_id = {m["tool_call_id"]: m["content"] for m in last["messages"] if m["role"] == "tool"}
    assert orjson.loads(by_id["c2"]) == {
        "collapsed": True,
        "standing": "noise",
        "tool_call_id": "c2",
    }
    assert by_id["c1"] == "rows for orders"  # a fact stays verbatim
    # the history keeps the result; what the model was served is the record's
    assert tool_messages(result)[1]["content"] == "rows for refunds"
    served = af.served_at(agent.store, result.run_id, 3)
    assert served["system"] == last["system"] and served["messages"] == last["messages"]
    opened = orjson.loads(next(iter(agent.store.read(result.run_id))).body)
    assert opened["projection"]["version"] == 4
    assert opened["options"]["findings"] == {
        "answer_ask": "none",
        "max_context_bytes": 16384,
        "serve": "ledger-and-facts",
    }


def test_ledger_only_collapses_facts_too_and_quote_facts_adds_the_ask() -> None:
    agent = agent_with(
        list(SCRIPT), [], findings={"serve": "ledger-only", "answer_ask": "quote-facts"}
    )
    agent.run_sync("go")
    last = agent.config.provider.requests[3]
    by_id = {m["tool_call_id"]: m["content"] for m in last["messages"] if m["role"] == "tool"}
    assert orjson.loads(by_id["c1"])["standing"] == "fact"
    assert last["system"][-1]["text"].endswith("in no served result.")


def test_the_piece_keeps_within_max_context_bytes_leaving_out_whole_entries() -> None:
    many = [
        {
            "toolCallId": "c1",
            "standing": "fact",
            "assertions": [
                {"subject": {"kind": "row", "id": str(i)}, "predicate": "total", "value": "x" * 40}
                for i in range(80)
            ],
        }
    ]
    agent = agent_with(
        [asks("a", "c1"), asks("b", "c2", {"basis": "direct", "previous": many}), "ok"],
        [],
        findings={"max_context_bytes": 1024},
    )
    agent.run_sync("go")
    piece = agent.config.provider.requests[2]["system"][-1]["text"]
    assert len(piece.encode("utf-8")) <= 1024
    assert "earlier entries left out)" in piece
    assert "row/79 · total" in piece and "row/0 · total" not in piece  # newest kept


class Judge:
    name = "stub-judge"

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[af.JudgeRequest] = []

    def judge(self, request: af.JudgeRequest) -> Any:
        self.asked.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class NeverAsked:
    name = "stub-judge"

    def judge(self, request: Any) -> Any:
        raise AssertionError("a replay asked the judge")


def test_the_judge_is_a_recorded_second_source_and_a_replay_never_asks_it() -> None:
    judge = Judge({"fact": 0.7, "open": 0.2, "noise": 0.1}, RuntimeError("down"), {"noise": 1})
    agent = agent_with(list(SCRIPT), [], findings={"judge": judge})
    result = agent.run_sync("how many orders?")
    assert [r.tool for r in judge.asked] == ["lookup"] * 3
    assert judge.asked[0].proposition == "orders has rows"
    assert judge.asked[0].question == "how many orders?"
    judged = events_of(agent.store, result.run_id, "agentfootprint.findings.judged")
    assert [(j["tool_call_id"], j["status"], j.get("standing")) for j in judged] == [
        ("c1", "ok", "fact"),
        ("c2", "failed", None),
        ("c3", "ok", "noise"),
    ]
    assert judged[0]["against"] == "proposition" and judged[1]["against"] == "question"
    assert judged[1]["error"] == "RuntimeError"
    rows = [r for r in result.state["findings_rows"] if r["kind"] == "judgment"]
    assert [r["tool_call_id"] for r in rows] == ["c1", "c2", "c3"]
    # never served in the model's place: c1 was judged fact, c3 noise; only c2's ticket
    last = agent.config.provider.requests[3]
    tickets = [m for m in last["messages"] if m["role"] == "tool" and "collapsed" in m["content"]]
    assert [m["tool_call_id"] for m in tickets] == ["c2"]
    replayed(agent, result, findings={"judge": NeverAsked()})


def test_absent_records_the_rows_of_an_agent_without_the_option() -> None:
    def run(**options: Any) -> list[tuple[str, int, bytes]]:
        agent = af.Agent(
            provider=af.MockProvider([asks("a", "c1"), "ok"]),
            model="m",
            tools=[lookup([])],
            ports=fixed_ports(),
            **options,
        )
        return without_open(rows(agent.store, agent.run_sync("go").run_id))

    assert run() == run(findings=None) == run(findings=False)


def test_findings_rows_events_reach_listeners() -> None:
    seen: list[af.AgentEvent] = []
    agent = agent_with(list(SCRIPT), [])
    agent.on("agentfootprint.findings.*", seen.append)
    agent.run_sync("go")
    declared = [e.payload() for e in seen if e.kind == "agentfootprint.findings.declared"]
    standing = [e.payload() for e in seen if e.kind == "agentfootprint.findings.standing"]
    assert [d["basis"] for d in declared] == ["direct", "exploratory", "direct"]
    assert [(s["tool_call_id"], s["standing"]) for s in standing] == [
        ("c1", "fact"),
        ("c2", "noise"),
    ]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("yes", "must be True or"),
        ({"serve": "everything"}, "'serve' must be one of"),
        ({"answer_ask": "always"}, "'answer_ask' must be one of"),
        ({"judge": object()}, "'judge' must be an object with judge(request)"),
        ({"max_context_bytes": 1023}, "from 1024 to 262144"),
        ({"max_context_bytes": 262_145}, "from 1024 to 262144"),
        ({"keep_ledger_facts": -1}, "must be False or an integer"),
        ({"keep_ledger_facts": 1.5}, "must be False or an integer"),
        ({"unknown": 1}, "unknown member(s) 'unknown'"),
    ],
)
def test_misconfiguration_is_refused_at_construction(value: Any, says: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", findings=value)
    assert caught.value.option == "findings" and says in str(caught.value)


def test_a_tool_owning_the_reserved_name_and_a_redaction_policy_are_refused() -> None:
    owner = af.define_tool(
        name="t",
        description="T.",
        input_schema={"type": "object", "properties": {"_findings": {"type": "string"}}},
        execute=lambda a: "",
    )
    with pytest.raises(af.UsageError, match="reserves") as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", tools=[owner], findings=True)
    assert caught.value.option == "tools"
    af.Agent(provider=af.MockProvider(["x"]), model="m", tools=[owner])  # fine without
    with pytest.raises(af.UsageError, match="redaction policy"):
        af.Agent(
            provider=af.MockProvider(["x"]),
            model="m",
            findings=True,
            redact=af.RedactionPolicy(keys=["ssn"]),
        )
