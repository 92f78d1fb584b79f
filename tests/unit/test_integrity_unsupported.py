"""The unsupported-argument check (choice seam), on its own: upstream's triage example, every
fence, the external grounds, and the property that a served value never files a finding."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.integrity import unsupported
from agentfootprint.integrity.contracts import Contract
from agentfootprint.integrity.rail import Finding, Judgement, ToolCall, string_leaves
from agentfootprint.integrity.reading import kept_folds, kept_grounds
from agentfootprint.integrity.unsupported import (
    CEILING,
    Frame,
    canary,
    fold,
    frame_of,
    judge_arguments,
    read_entries,
)
from agentfootprint.logformat.projection import build_request

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "features"))
from feature_support import fixed_ports

SYSTEM = "You are a fleet triage assistant."
TASK = "What is the backup status for that machine?"
RENDERED_ANSWER = "The nightly job bkp-4417-ganymede-tier2 finished at 02:14."
FLEET = "FLEET: callisto-02 (online), europa-03 (online)"
BACKUP_SCHEMA = {
    "type": "object",
    "properties": {
        "machine": {"type": "string"},
        "window": {"type": "string", "enum": ["Nightly", "weekly"]},
    },
}
PASSED = Judgement.passed()
CONTRACT = Contract(tool="backup_status", arguments_from=("fleet_report",))

SELF_REFERENCE = (
    "'backup_status' was called with machine = \"4417-ganymede\", and the only place that value "
    "appears in the frame the model chose from is the model\u2019s own earlier answer. Rendered "
    "text is not evidence — a value re-read out of prose can be a fragment of something else "
    "entirely. To ground it, call fleet_report again and use a value it returns. Nothing here "
    "blocked the call. " + CEILING
)
NOWHERE = (
    "'backup_status' was called with machine = \"ganymede-99\", and that value appears nowhere "
    "in the frame the model chose from — not in the instructions, not in any message from the "
    "user, not in any tool result. Nothing served it, so nothing in this run can say what it "
    "refers to. To ground it, call fleet_report again and use a value it returns. Nothing here "
    "blocked the call. " + CEILING
)


def served(
    *,
    system: tuple[str, ...] = (SYSTEM,),
    user: str = TASK,
    assistant: str = RENDERED_ANSWER,
    result: str = FLEET,
    tools: tuple[dict[str, Any], ...] | None = None,
) -> dict[str, Any]:
    """A served request in the projection's shape: the triage turn's frame."""
    return {
        "model": "m",
        "params": {},
        "system": [{"source": "base", "text": text} for text in system],
        "messages": [
            {"content": user, "role": "user"},
            {
                "content": assistant,
                "role": "assistant",
                "tool_calls": [{"arguments": {}, "id": "c1", "name": "fleet_report"}],
            },
            {"content": result, "name": "fleet_report", "role": "tool", "tool_call_id": "c1"},
        ],
        "tools": list(tools)
        if tools is not None
        else [
            {"description": "Lists machines.", "input_schema": {}, "name": "fleet_report"},
            {
                "description": "Reads a backup.",
                "input_schema": BACKUP_SCHEMA,
                "name": "backup_status",
            },
        ],
    }


def chose(arguments: Any, tool: str = "backup_status") -> ToolCall:
    return ToolCall(
        tool=tool,
        tool_call_id="c2",
        arguments=arguments,
        content=None,
        is_error=False,
        turn=1,
        history_index=3,
    )


def judged(
    arguments: Any, frame: Frame, entries: Any = ()
) -> tuple[Judgement, list[dict[str, str]]]:
    return judge_arguments(CONTRACT, chose(arguments), frame, entries)


def found(arguments: Any, frame: Frame) -> tuple[Finding, ...]:
    judgement, used = judged(arguments, frame)
    assert judgement.verdict == "checked" and used == []
    return judgement.findings


def test_served_shape_is_the_projections() -> None:
    """The requests these tests build are what ``build_request`` serves from state."""
    made = served()
    state = {
        "model": "m",
        "system_pieces": made["system"],
        "history": made["messages"],
        "tool_schemas": made["tools"],
    }
    for version in (1, 2, 3, 4):
        built = build_request(state, version)
        assert {k: built[k] for k in made} == made


def test_the_triage_example_files_one_self_reference_finding() -> None:
    frame = frame_of(served())
    judgement, used = judged({"machine": "4417-ganymede"}, frame)
    assert judgement.verdict == "checked" and used == []
    (finding,) = judgement.findings
    assert finding.check == finding.kind == "unsupported-argument"
    assert finding.seam == "choice"
    assert finding.subjects == (("tool", "backup_status"),)
    assert finding.predicate == "machine"
    assert finding.witnesses == ("c2",)
    assert finding.message == SELF_REFERENCE
    assert not finding.advisory and not finding.synthetic
    assert finding.facts == {
        "path": "machine",
        "value": "4417-ganymede",
        "self_reference": True,
        "served": 3,  # the system piece, the user message, the tool result
        "assistant": 1,
    }


def test_a_value_served_nowhere_gets_the_other_message() -> None:
    (finding,) = found({"machine": "ganymede-99"}, frame_of(served()))
    assert finding.message == NOWHERE
    assert finding.facts["self_reference"] is False


def test_the_triage_example_through_a_real_run() -> None:
    """The served request of a real run, read back from the log, judged as the run would."""
    fleet = af.define_tool(
        name="fleet_report",
        description="Lists the machines in the fleet by their real names.",
        input_schema={"type": "object", "properties": {}},
        execute=lambda args: FLEET,
    )
    backup = af.define_tool(
        name="backup_status",
        description="Reads the backup record for one machine.",
        input_schema=BACKUP_SCHEMA,
        execute=lambda args: "no backup record found",
    )
    script: list[str | af.LLMResponse] = [
        af.reply(RENDERED_ANSWER, tool_calls=[af.tool_call("fleet_report", {}, id="c1")]),
        af.reply(tool_calls=[af.tool_call("backup_status", {"machine": "4417-ganymede"}, id="c2")]),
        "done",
    ]
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[fleet, backup],
        system=SYSTEM,
        ports=fixed_ports(),
    )
    result = agent.run_sync(TASK)
    frame = frame_of(af.served_at(agent.store, result.run_id, 1))
    assert frame.grounded == (fold(SYSTEM), fold(TASK), fold(FLEET))
    assert frame.assistant == (fold(RENDERED_ANSWER),)
    assert frame.enums("backup_status") == {"nightly", "weekly"}
    (finding,) = found({"machine": "4417-ganymede"}, frame)
    assert finding.message == SELF_REFERENCE


def test_served_ground_passes_wherever_it_was_served() -> None:
    value = {"machine": "4417-Ganymede"}  # case-insensitive
    for frame in (
        frame_of(served(result="FLEET: 4417-ganymede (online)")),
        frame_of(served(user="Status of 4417-GANYMEDE please")),
        frame_of(served(system=(SYSTEM, "The machine is 4417-ganymede."))),
    ):
        assert judged(value, frame) == (PASSED, [])


def test_case_is_folded_the_same_alone_and_inside_a_text() -> None:
    """``str.lower`` gives a final sigma alone ("...ς") and another inside a word ("...σ..."):
    a served value would file a finding; folding makes them one."""
    assert "NODE-ΣΣ".lower() not in "node-ΣΣx".lower()
    assert judged({"machine": "NODE-ΣΣ"}, frame_of(served(result="node-ΣΣx"))) == (PASSED, [])


def test_content_as_parts_is_read_for_its_text() -> None:
    made = served()
    made["messages"][2]["content"] = [{"type": "text", "text": "FLEET: 4417-ganymede"}]
    assert judged({"machine": "4417-ganymede"}, frame_of(made)) == (PASSED, [])
    made["messages"][1]["content"] = [{"type": "text", "text": "I saw ganymede-99."}]
    (finding,) = found({"machine": "ganymede-99"}, frame_of(made))
    assert finding.facts["self_reference"] is True


def test_an_enum_value_of_the_served_schema_passes() -> None:
    frame = frame_of(served())
    assert judged({"window": "NIGHTLY"}, frame) == (PASSED, [])
    # flat: a value declared for one field excuses it at any field of the same tool
    assert judged({"machine": "weekly"}, frame) == (PASSED, [])
    # another tool's enums excuse nothing
    bare = frame_of(served(tools=({"name": "backup_status", "input_schema": {}},)))
    assert len(found({"window": "nightly"}, bare)) == 1


def test_short_and_non_string_values_are_never_checked() -> None:
    frame = frame_of(served())
    arguments = {"mode": "up", "tier": " a1  ", "count": 4417, "latest": True, "note": None}
    assert judged(arguments, frame) == (PASSED, [])
    assert len(found({"mode": "upup"}, frame)) == 1


def test_nested_paths_and_one_finding_per_leaf() -> None:
    frame = frame_of(served())
    filed = found({"filter": {"hosts": ["ganymede-99", "europa-03"]}, "region": "sector-77"}, frame)
    assert [f.predicate for f in filed] == ["filter.hosts.0", "region"]
    assert filed[0].facts["path"] == "filter.hosts.0"


def test_a_long_value_is_quoted_clipped() -> None:
    long = "ganymede-" + "x" * 400
    (finding,) = found({"machine": f"  {long} "}, frame_of(served()))
    assert finding.facts["value"] == long[:79] + "\u2026"
    assert f'machine = "{long[:79]}\u2026"' in finding.message


def test_not_applicable_without_arguments_from_or_readable_arguments() -> None:
    frame = frame_of(served())
    bare = Contract(tool="backup_status", result_columns=())
    judgement, used = judge_arguments(bare, chose({"machine": "ganymede-99"}), frame)
    assert judgement.verdict == "not_applicable" and used == []
    judgement, used = judge_arguments(CONTRACT, chose(None), frame)
    assert judgement.verdict == "not_applicable" and used == []


# -- external grounds -------------------------------------------------------------------------


def test_an_external_entry_excuses_and_names_its_source() -> None:
    entries = read_entries([{"value": "the row 4417-Ganymede", "source": "viewer-selection"}])
    judgement, used = judged({"machine": " 4417-ganymede"}, frame_of(served()), entries)
    assert judgement == PASSED
    assert used == [
        {
            "tool": "backup_status",
            "tool_call_id": "c2",
            "path": "machine",
            "value": " 4417-ganymede",  # as the model sent it
            "source": "viewer-selection",
        }
    ]


def test_served_ground_needs_no_excuse_and_the_first_entry_wins() -> None:
    entries = read_entries(
        [
            {"value": "europa-03", "source": "first"},
            {"value": "ganymede-99", "source": "second"},
            {"value": "GANYMEDE-99!", "source": "third"},
        ]
    )
    assert judged({"machine": "europa-03"}, frame_of(served()), entries) == (PASSED, [])
    _, used = judged({"machine": "ganymede-99"}, frame_of(served()), entries)
    assert [u["source"] for u in used] == ["second"]


def test_garbage_entries_contribute_nothing() -> None:
    garbage: list[Any] = [
        None,
        "4417-ganymede",
        {"value": "4417-ganymede"},
        {"source": "viewer-selection"},
        {"value": 4417, "source": "viewer-selection"},
        {"value": "4417-ganymede", "source": 7},
        {"value": "   ", "source": "viewer-selection"},
        {"value": "4417-ganymede", "source": " "},
        ["4417-ganymede", "viewer-selection"],
    ]
    for answer in (None, "4417-ganymede", 3, {"value": "4417-ganymede", "source": "s"}, garbage):
        assert read_entries(answer) == ()
        judgement, used = judged({"machine": "4417-ganymede"}, frame_of(served()), answer)
        assert used == [] and judgement.findings[0].message == SELF_REFERENCE
    kept = read_entries([*garbage, {"value": " a ", "source": " s ", "extra": 1}])
    assert kept == ({"value": " a ", "source": " s "},)


def test_entries_are_bounded() -> None:
    many = [{"value": f"v-{i:04d}", "source": "s"} for i in range(1500)]
    kept = read_entries(many)
    assert len(kept) == unsupported.MAX_ENTRIES and kept[-1]["value"] == "v-0999"
    assert read_entries([{"value": "x" * 4097, "source": "s"}]) == ()
    assert len(read_entries([{"value": "x" * 4096, "source": "s"}])) == 1


# -- the canary and totality -----------------------------------------------------------------


def test_the_canary_is_caught_and_synthetic() -> None:
    judgement = canary()
    (finding,) = judgement.findings
    assert finding.synthetic and finding.predicate == "id"
    assert finding.subjects == (("tool", "canary_tool"),)
    assert "canary_ground" in finding.message and finding.message.endswith(CEILING)


def test_a_malformed_frame_grounds_nothing() -> None:
    bad: Any
    for bad in (None, [], {"system": "x", "messages": 3, "tools": [1, {"name": 2}]}):
        frame = frame_of(bad)
        assert frame.grounded == () and frame.assistant == ()
    frame = frame_of({"messages": [None, {"role": "user", "content": {"$commit": "ab"}}]})
    assert frame.grounded == ('{"$commit": "ab"}',)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


@given(arguments=JSON, texts=st.lists(st.text(max_size=40), max_size=4), entries=JSON)
def test_judging_never_raises_and_findings_are_unserved(
    arguments: Any, texts: list[str], entries: Any
) -> None:
    made = served(result=texts[0] if texts else "", system=tuple(texts[1:]))
    frame = frame_of(made)
    judgement, used = judge_arguments(CONTRACT, chose(arguments), frame, entries)
    for finding in judgement.findings:
        needle = fold(dict(string_leaves(arguments))[finding.predicate or ""].strip())
        assert all(needle not in text for text in frame.grounded)
        assert all(needle not in fold(text) for text in texts)
    assert len(judgement.findings) + len(used) <= len(string_leaves(arguments))


@given(value=st.text(min_size=1, max_size=30), padding=st.text(max_size=10))
def test_a_value_served_in_a_tool_result_never_files(value: str, padding: str) -> None:
    frame = frame_of(served(result=padding + value + padding))
    judgement, used = judged({"filter": {"hosts": [value]}}, frame)
    assert judgement.findings == () and used == []


def _leaves_by_the_rule(value: Any, path: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """``string_leaves`` as its docstring states it, one node at a time (the reference)."""
    if depth > 32:
        return []
    if isinstance(value, str):
        return [(path, value)]
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        keys = sorted(value) if all(type(k) is str for k in value) else sorted(value, key=str)
        for key in keys:
            out += _leaves_by_the_rule(value[key], f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(value, list):
        for i, member in enumerate(value):
            out += _leaves_by_the_rule(member, f"{path}.{i}" if path else str(i), depth + 1)
    return out


def _nested(levels: int) -> Any:
    value: Any = {"leaf": "deep-value", "n": 1}
    for _ in range(levels):
        value = {"k": value, "s": "side"}
    return value


@given(arguments=JSON)
@example(arguments=_nested(31))  # "leaf" at depth 32: kept
@example(arguments=_nested(32))  # at depth 33: past the bound, dropped
@example(arguments=[[["x" * 5, 1, None, True]]])
@example(arguments={2: "int-key", "10": "str-key", "a": {"b": 1.5}})
def test_string_leaves_reads_a_leaf_inline_as_the_rule_reads_it(arguments: Any) -> None:
    assert string_leaves(arguments) == _leaves_by_the_rule(arguments)


def test_folds_start_again_at_their_bound(monkeypatch: Any) -> None:
    """A conversation's folds are kept across its runs, never without end: past
    ``MAX_FOLDS`` texts they start again, and fold each text as before."""
    monkeypatch.setattr(unsupported, "MAX_FOLDS", 3)
    folds = unsupported.Folds()
    texts = [f"Served TEXT {i}" for i in range(10)]
    assert [folds.text({}, t) for t in texts] == [fold(t) for t in texts]
    assert [folds.text({}, t) for t in texts] == [fold(t) for t in texts]
    assert len(folds._texts) <= 3
    schemas = [{"enum": [f"V{i}"]} for i in range(5)]
    assert [folds.enums(s) for s in schemas] == [frozenset({f"v{i}"}) for i in range(5)]
    assert len(folds._enums) <= 3


def test_a_conversations_folds_are_kept_across_its_runs_and_its_forks() -> None:
    kept: dict[str, Any] = {}
    folds = kept_folds(kept, "c1")
    assert kept_folds(kept, "c1") is folds and kept_folds(kept, "c2") is not folds
    history = [{"role": "user", "content": "go"}]
    kept_grounds(kept, "c1", history)
    fork = [{"role": "user", "content": "another branch"}]
    kept_grounds(kept, "c1", fork)  # a history that does not hold the one read: a new reading
    assert kept_folds(kept, "c1") is folds  # folded by identity: valid on any branch


def _served_by_the_rule(made: dict[str, Any], needle: str) -> bool:
    """``Frame.serves`` as its docstring's rule states it: the needle in a folded text."""
    texts = [fold(unsupported._text(m.get("content"))) for m in made["messages"]]
    texts = [t for t, m in zip(texts, made["messages"], strict=True) if m["role"] != "assistant"]
    pieces = [fold(p["text"]) for p in made["system"]]
    return any(needle in t for t in [*texts, *pieces])


CASES = st.text(alphabet="aAbBß\u212akK\u0130i\u03a3\u03c2\u03c3 -01", max_size=12)


@given(texts=st.lists(CASES, min_size=1, max_size=4), needle=CASES)
@example(texts=["ABC-1"], needle="ABC")  # a needle not folded: only the folded text is read
@example(texts=["ABC-1"], needle="abc")  # the served text holds it folded only
@example(texts=["\u212a-01"], needle="k-01")  # the Kelvin sign folds to k
@example(texts=["Stra\u00dfe"], needle="strasse")
@example(texts=["x", "id-01"], needle="id-01")  # an older message holds it as served
def test_serves_finds_a_needle_as_the_folded_rule_does(texts: list[str], needle: str) -> None:
    made = served(result=texts[0], system=tuple(texts[1:]))
    made["messages"].append({"role": "user", "content": texts[-1]})
    assert frame_of(made).serves(needle) == _served_by_the_rule(made, needle)
