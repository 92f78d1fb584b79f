"""``inputs_layer`` and ``argument_ask_context``: ruled arguments (``ask_or_assume``), the
defaults filled in and said so, one ask a batch as an input pause, answers checked, asked
again, refused after three rounds; every row filed, every run verified and replayed.

Every run closed here is verified by the pytest plugin as well.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, rows, tool_messages, without_open

import agentfootprint as af
from agentfootprint.features.inputs_layer import NOTE_MARK, ROUNDS, refusal
from agentfootprint.testing.replay import NoModel, silent_twins

KIND = "agentfootprint.findings.argument"
SCHEMA = {
    "type": "object",
    "properties": {
        "window": {"type": "string"},
        "period": {"type": "integer", "description": "Days covered."},
        "q": {"type": "string"},
    },
    "required": ["window", "period", "q"],
}
RULES = {"window": {"assume": "24h"}, "period": {"ask": "How many days?", "choices": [7, 30]}}


def report_tool(ran: list[Any], rules: Any = RULES) -> af.Tool:
    def report(args: dict[str, Any]) -> Any:
        ran.append(dict(args))
        return {"rows": 3}

    return af.define_tool(
        name="report",
        description="Build a report.",
        input_schema=SCHEMA,
        execute=report,
        ask_or_assume=rules,
    )


def batch(*arguments: dict[str, Any], answer: str = "done") -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call("report", a) for a in arguments]), answer]


def agent_for(replies: list[Any], ran: list[Any], **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(replies),
        model="m",
        tools=[report_tool(ran)],
        ports=fixed_ports(),
        **options,
    )


def filed(agent: af.Agent, run_id: str) -> list[tuple[str, str, str, bool]]:
    return [
        (e["tool_call_id"], e["argument"], e["source"], e.get("filled", False))
        for e in events_of(agent.store, run_id, KIND)
    ]


def replayed_identically(agent: af.Agent, run_id: str, **options: Any) -> af.ReplayResult:
    twin = af.Agent(
        provider=NoModel(),
        model="m",
        tools=silent_twins(agent.config.tools, []),
        store=af.MemoryStore(),
        **options,
    )
    again = af.replay_sync(twin, agent.store, run_id)
    assert af.same_recording(agent.store, run_id, twin.store, again.result.run_id)
    return again


def test_the_served_schema_makes_ruled_arguments_optional_and_says_the_rule() -> None:
    served = report_tool([]).schema["input_schema"]
    assert served["required"] == ["q"]
    assert served["properties"]["window"]["description"] == 'If omitted, "24h" is assumed.'
    assert served["properties"]["period"]["description"] == (
        "Days covered. If omitted, the user is asked."
    )
    assert SCHEMA["required"] == ["window", "period", "q"]  # the author's schema is untouched


def test_a_default_is_filled_in_filed_and_said_on_the_result() -> None:
    ran: list[Any] = []
    agent = agent_for(
        batch({"q": "a", "period": 7}, {"q": "b", "period": 30, "window": "24h"}), ran
    )
    result = agent.run_sync("go")
    assert result.outcome == "answered"
    assert ran == [
        {"q": "a", "period": 7, "window": "24h"},
        {"q": "b", "period": 30, "window": "24h"},
    ]
    first, second = tool_messages(result)
    assert first["content"].endswith(f'{NOTE_MARK}window = "24h" (the default).]')
    assert NOTE_MARK not in second["content"]  # the model gave the default itself
    assert filed(agent, result.run_id) == [
        ("call_0_0", "window", "default", True),
        ("call_0_0", "period", "model", False),
        ("call_0_1", "window", "default", False),
        ("call_0_1", "period", "model", False),
    ]
    # the history keeps what the model sent; the tool ran with the fill
    assistant = result.state["history"][1]
    assert assistant["tool_calls"][0]["arguments"] == {"q": "a", "period": 7}
    replayed_identically(agent, result.run_id)


def test_two_calls_leaving_an_ask_out_share_one_pause_and_one_answer() -> None:
    ran: list[Any] = []
    agent = agent_for(batch({"q": "a", "window": "1h"}, {"q": "b"}), ran)
    paused = agent.run_sync("go")
    assert paused.outcome == "paused" and ran == []  # nothing of the batch ran
    pending = paused.pending
    assert pending is not None and pending.kind == "input" and pending.tool_call_id == "call_0_0"
    assert pending.fields == {
        "f1": {"type": "integer", "description": "How many days?", "enum": [7, 30]}
    }
    assert pending.context == {
        "agentfootprint": {
            "ask": "arguments",
            "round": 1,
            "fields": [
                {
                    "field": "f1",
                    "tool": "report",
                    "argument": "period",
                    "calls": ["call_0_0", "call_0_1"],
                }
            ],
        }
    }
    assert "How many days?" in pending.question
    resumed = agent.resume_sync(paused, {"f1": 7})
    assert resumed.outcome == "answered"
    assert ran == [
        {"q": "a", "window": "1h", "period": 7},
        {"q": "b", "period": 7, "window": "24h"},
    ]
    assert filed(agent, paused.run_id) == [
        ("call_0_0", "window", "model", False),
        ("call_0_0", "period", "asked", False),
        ("call_0_1", "window", "default", True),
        ("call_0_1", "period", "asked", False),
    ]
    assert filed(agent, resumed.run_id) == [
        ("call_0_0", "period", "answered", True),
        ("call_0_1", "period", "answered", True),
    ]
    second = tool_messages(resumed)[1]["content"]
    assert second.endswith('window = "24h" (the default); period = 7 (the user\'s answer).]')
    assert "argument_fills" not in resumed.state or resumed.state["argument_fills"]
    replayed_identically(agent, paused.run_id)
    replayed_identically(agent, resumed.run_id)


def test_an_invalid_answer_is_asked_again_and_refused_after_three_rounds() -> None:
    ran: list[Any] = []
    agent = agent_for(batch({"q": "a"}, answer="gave up"), ran)
    run = agent.run_sync("go")
    for round_, answer in enumerate(({"f1": 2.5}, {}, {"f1": "seven"}), start=1):
        assert run.pending is not None and run.pending.context["agentfootprint"]["round"] == round_
        run = agent.resume_sync(run, answer)
        if round_ < ROUNDS:
            assert run.outcome == "paused" and run.pending is not None
            assert "The last answer was not valid" in run.pending.question
    assert run.outcome == "answered" and ran == []
    (message,) = tool_messages(run)
    assert message["content"] == refusal("report", ["period"]) and message["is_error"]
    assert [row[2] for row in filed(agent, run.run_id)] == ["refused"]
    assert run.parent_run_id is not None
    replayed_identically(agent, run.run_id)


def test_the_host_context_rides_the_ask_and_is_never_asked_in_a_replay(tmp_path: Path) -> None:
    asked: list[int] = []

    def context() -> dict[str, Any]:
        asked.append(1)
        return {"routing": {"step": "metrics"}}

    ran: list[Any] = []
    db = tmp_path / "log.db"
    agent = agent_for(batch({"q": "a"}), ran, store=db, argument_ask_context=context)
    paused = agent.run_sync("go")
    assert paused.pending is not None
    assert paused.pending.context["routing"] == {"step": "metrics"} and asked == [1]
    agent.close()
    # a new process reads the question, the context included, from the log alone, and
    # answers it: the batch runs there
    script = textwrap.dedent(
        f"""
        import agentfootprint as af
        ran = []
        tool = af.define_tool(name="report", description="Build a report.",
            input_schema={SCHEMA!r}, execute=lambda a: ran.append(a) or {{"rows": 3}},
            ask_or_assume={RULES!r})
        agent = af.Agent(provider=af.MockProvider(["done"]), model="m", tools=[tool],
            store={str(db)!r}, argument_ask_context=lambda: 1 / 0)
        result = agent.resume_sync({paused.run_id!r}, {{"f1": 30}})
        assert result.outcome == "answered", result.outcome
        assert ran == [{{"q": "a", "window": "24h", "period": 30}}], ran
        print("resumed", result.run_id)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    again = af.Agent(
        provider=NoModel(), model="m", tools=silent_twins([report_tool([])], []), store=db
    )
    state = af.Verifier(again.store).verify(paused.run_id).final_state
    assert state["pending"]["context"]["routing"] == {"step": "metrics"}
    again.close()
    twin = af.Agent(
        provider=NoModel(),
        model="m",
        tools=silent_twins([report_tool([])], []),
        store=af.MemoryStore(),
        argument_ask_context=lambda: 1 / 0,  # a replay never calls it
    )
    store = af.SqliteStore(db)
    replayed = af.replay_sync(twin, store, paused.run_id)
    assert af.same_recording(store, paused.run_id, twin.store, replayed.result.run_id)
    store.close()


@pytest.mark.parametrize(
    ("context", "says"),
    [
        (lambda: {"agentfootprint": 1}, "reserved key 'agentfootprint'"),
        (lambda: {"ids": {1, 2}}, "not JSON"),
        (lambda: ["a"], "must return a dict"),
    ],
)
def test_a_bad_host_context_fails_naming_the_option_before_any_tool_runs(
    context: Any, says: str
) -> None:
    ran: list[Any] = []
    agent = agent_for(batch({"q": "a"}), ran, argument_ask_context=context)
    with pytest.raises(af.UsageError, match="argument_ask_context") as caught:
        agent.run_sync("go")
    assert says in str(caught.value) and ran == []


def test_armed_and_never_triggered_records_the_same_rows_but_the_opening() -> None:
    """Armed with no ruled tool: the rows are those of an agent without the layer, but
    ``run.open`` (format v5, the arm recorded)."""
    plain = af.define_tool(
        name="lookup", description="Look it up.", input_schema=QUERY, execute=lambda a: "rows"
    )

    def recorded(tools: list[af.Tool], **options: Any) -> tuple[af.Agent, af.RunResult]:
        agent = af.Agent(
            provider=af.MockProvider(
                [af.reply(tool_calls=[af.tool_call("lookup", {"q": "x"})]), "ok"]
            ),
            model="m",
            tools=tools,
            ports=fixed_ports(),
            **options,
        )
        return agent, agent.run_sync("go")

    base_agent, base = recorded([plain])
    agent, result = recorded([plain], inputs_layer=True)
    assert without_open(rows(agent.store, result.run_id)) == without_open(
        rows(base_agent.store, base.run_id)
    )
    opened = next(iter(agent.store.read(result.run_id))).decoded()
    assert opened["options"]["inputs_layer"] is True  # type: ignore[index]
    # a ruled tool the model never calls: its schema is served with the rules said, and
    # nothing is filed
    agent, result = recorded([plain, report_tool([])])
    assert not events_of(agent.store, result.run_id, KIND)
    assert "argument_fills" not in result.state
    assert plain.schema["input_schema"] == QUERY
    opened = next(iter(base_agent.store.read(base.run_id))).decoded()
    assert "inputs_layer" not in opened["options"]  # type: ignore[index]


QUERY = {"type": "object", "properties": {"q": {"type": "string"}}}


def test_abandoning_an_input_pause_closes_the_batch() -> None:
    ran: list[Any] = []
    agent = agent_for([*batch({"q": "a"}), "ok"], ran)
    paused = agent.run_sync("go")
    later = agent.run_sync("never mind", continue_from=paused, abandon=True)
    assert later.outcome == "answered" and ran == []
    (message,) = tool_messages(later)
    assert "the question was abandoned" in message["content"]


def test_a_turn_that_abandons_a_pause_replays() -> None:
    """Its seed appends the "was not run" results before the person's message: a replay
    takes the person's message as the turn's input (it once took the first result's text,
    and diverged at call 0)."""
    ran: list[Any] = []
    agent = agent_for([*batch({"q": "a"}), "ok"], ran)
    paused = agent.run_sync("go")
    later = agent.run_sync("never mind", continue_from=paused, abandon=True)
    twin = af.Agent(provider=af.MockProvider([]), model="m", tools=[report_tool([])])
    again = af.replay_sync(twin, agent.store, later.run_id)
    assert again.calls_checked == later.calls == 1
    assert af.same_recording(agent.store, later.run_id, twin.store, again.result.run_id)
    assert ran == []


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"inputs_layer": False}, "cannot be switched off"),
        ({"inputs_layer": {"argument_sources": True}}, "findings ledger"),
        ({"inputs_layer": "yes"}, "True or False"),
        ({"argument_ask_context": {"a": 1}}, "must be a function"),
    ],
)
def test_misconfiguration_is_refused_at_construction(options: dict[str, Any], says: str) -> None:
    with pytest.raises(af.UsageError, match=says):
        af.Agent(provider=af.MockProvider([]), model="m", tools=[report_tool([])], **options)


def test_a_context_without_the_layer_is_refused() -> None:
    with pytest.raises(af.UsageError, match="argument_ask_context"):
        af.Agent(provider=af.MockProvider([]), model="m", argument_ask_context=lambda: {})


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        ({"nope": {"assume": 1}}, "not a property"),
        ({"window": {"assume": "1h", "ask": "?"}}, "exactly one"),
        ({"window": {"assume": 5}}, "does not fit its schema"),
        ({"period": {"ask": "Days?", "choices": [7, "x"]}}, "does not fit its schema"),
        ({"period": {"ask": " "}}, "non-empty question"),
        ({"window": {"assume": "1h", "choices": ["1h"]}}, "goes with 'ask'"),
        ({"period": {"ask": "Days?", "choices": []}}, "non-empty list"),
        ({"window": {"default": "1h"}}, "must be"),
        ({}, "non-empty dict"),
    ],
)
def test_define_tool_checks_the_rules(rules: Any, says: str) -> None:
    with pytest.raises(af.UsageError, match=says):
        report_tool([], rules)


def test_a_redacted_ask_resumes_with_the_vault_and_fails_closed_without(tmp_path: Path) -> None:
    """A policy committing what the ask bound (``calls``): a resume that opens the log with
    the vault answers it; one without the vault is refused before it writes anything."""
    db, vault = tmp_path / "log.db", tmp_path / "vault.db"
    policy = af.RedactionPolicy(keys=["calls"])
    ran: list[Any] = []
    agent = agent_for(batch({"q": "a"}), ran, store=db, redact=policy, disclosures=vault)
    paused = agent.run_sync("go")
    agent.close()
    blind = af.Agent(
        provider=af.MockProvider(["done"]),
        model="m",
        tools=[report_tool(ran)],
        store=db,
        redact=policy,
    )
    with pytest.raises(af.ContinuationError, match="redacted"):
        blind.resume_sync(paused.run_id, {"f1": 7})
    assert ran == [] and len(blind.store.run_ids()) == 1  # nothing was written
    blind.close()
    seeing = af.Agent(
        provider=af.MockProvider(["done"]),
        model="m",
        tools=[report_tool(ran)],
        store=db,
        redact=policy,
        disclosures=vault,
    )
    assert seeing.resume_sync(paused.run_id, {"f1": 7}).outcome == "answered"
    assert ran == [{"q": "a", "window": "24h", "period": 7}]
    seeing.close()
