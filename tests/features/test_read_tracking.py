"""``read_tracking``: what each stage read, beside the run (``RunResult.stage_reads``), never
in the log, and never more than the log shows under a redaction policy."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from feature_support import fixed_ports, rows

import agentfootprint as af
from agentfootprint.logformat.literal_forms import LiteralMatcher
from agentfootprint.runtime.reads import UNRECORDED, ReadMarker, marker, stage_reads
from agentfootprint.runtime.scope import Scope
from quickstart_support import ADD, quickstart_agent

SECRET = "planted-7Qx2-secret-Zr9"


def quickstart(message: str = "What is 2 + 3?", **options: Any) -> tuple[af.Agent, af.RunResult]:
    """The README's quickstart (a tool call, then an answer), with fixed ports."""
    agent = quickstart_agent(ports=fixed_ports(), **options)
    return agent, agent.run_sync(message)


def test_off_is_the_default() -> None:
    _, result = quickstart()
    assert result.stage_reads is None


def test_summary_describes_each_stages_reads() -> None:
    agent, result = quickstart(read_tracking="summary")
    reads = result.stage_reads
    assert reads is not None
    commits = [e for e in agent.store.read(result.run_id) if e.type == "commit"]
    assert list(reads) == [orjson.loads(c.body)["stage_run"] for c in commits]  # every stage
    first_call = reads["call-llm#1"]
    # the request read every key it serves; the stage read the iteration and usage itself
    assert list(first_call) == [
        "history",
        "iteration",
        "model",
        "params",
        "system_pieces",
        "tool_schemas",
        "usage",
    ]
    assert first_call["model"] == ReadMarker("string", 8, '"my-model"')
    assert first_call["iteration"] == ReadMarker("number", None, "1")
    assert first_call["history"] == ReadMarker("array", 1, None)
    assert first_call["params"] == ReadMarker("object", 1, None)
    assert reads["call-llm#2"]["history"] == ReadMarker("array", 3, None)  # + call, + result
    assert reads["prepare-final#1"] == {
        "iteration": ReadMarker("number", None, "2"),
        "last_response": ReadMarker("object", 4, None),
    }
    assert reads["seed#1"] == {} and reads["break-final#1"] == {}


def test_a_preview_is_the_first_80_characters_of_a_primitives_canonical_json() -> None:
    assert marker("a" * 200) == ReadMarker("string", 200, '"' + "a" * 79)
    assert marker('say "hi"\n') == ReadMarker("string", 9, '"say \\"hi\\"\\n"')
    assert marker(1.5) == ReadMarker("number", None, "1.5")
    assert marker(None) == ReadMarker("null", None, "null")
    assert marker(False) == ReadMarker("boolean", None, "false")
    assert marker({"$commit": "0" * 64}) == ReadMarker("commitment")
    assert marker([1, 2]).preview is None and marker({"a": 1}).preview is None


def test_full_gives_detached_copies_of_the_values_read() -> None:
    _, result = quickstart(read_tracking="full")
    reads = result.stage_reads
    assert reads is not None
    served = reads["call-llm#2"]
    assert served["model"] == "my-model" and served["iteration"] == 2
    assert [m["role"] for m in served["history"]] == ["user", "assistant", "tool"]
    assert served["history"][2]["content"] == "5"
    served["history"].clear()  # a copy: the run's state and the other stages' views keep theirs
    assert len(reads["call-llm#1"]["history"]) == 1
    assert [m["role"] for m in result.state["history"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_off_keeps_nothing() -> None:
    _, result = quickstart(read_tracking="off")
    assert result.stage_reads is None


def test_the_rows_are_byte_identical_in_every_mode() -> None:
    recorded = {}
    for mode in (None, "off", "summary", "full"):
        options = {} if mode is None else {"read_tracking": mode}
        agent, result = quickstart(**options)
        recorded[mode] = rows(agent.store, result.run_id)  # run.open included: not recorded
        assert b"read_tracking" not in recorded[mode][0][2]
    assert recorded[None] == recorded["off"] == recorded["summary"] == recorded["full"]


@pytest.mark.parametrize("value", ["everything", "Summary", True, 1, ["full"]])
def test_a_bad_value_is_refused_naming_the_option(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", read_tracking=value)
    assert caught.value.option == "read_tracking"
    assert "'summary'" in str(caught.value)


def _secret_tool(args: dict[str, Any]) -> Any:
    return {"content": f"the code is {SECRET}", "note": "ok"}


def _found(reads: Any) -> list[str]:
    """The forms of the planted secret anywhere in ``stage_reads`` (raw, JSON, base64...)."""
    dumped = orjson.dumps(reads, default=lambda m: m.to_json())
    return sorted({m.form for m in LiteralMatcher([SECRET]).find(dumped)})


@pytest.mark.parametrize("mode", ["summary", "full"])
def test_a_redacted_value_never_shows_in_stage_reads(mode: str) -> None:
    """The planted-secret sweep over ``stage_reads``: under a policy that redacts where the
    secret travels (the user's message, the tool's result, the model's words, the answer a
    continuation's seed reads), no marker or value holds it in any encoding; the same sweep
    without the policy finds it (it can fail)."""
    tool = af.define_tool(
        name="lookup",
        description="Look up.",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=_secret_tool,
    )

    def run(**options: Any) -> tuple[af.RunResult, af.RunResult]:
        agent = af.Agent(
            provider=af.MockProvider(
                [af.reply(tool_calls=[af.tool_call("lookup", {"q": SECRET})]), SECRET, "ok"]
            ),
            model="m",
            tools=[tool],
            read_tracking=mode,
            **options,
        )
        first = agent.run_sync(SECRET)
        return first, agent.run_sync("and?", continue_from=first)

    exposed = run()
    assert _found(exposed[1].stage_reads)  # the continuation's seed read the answer
    assert bool(_found(exposed[0].stage_reads)) == (mode == "full")  # (a summary: no text)
    hidden = run(redact=af.conversation_redaction())
    assert [_found(r.stage_reads) for r in hidden] == [[], []]
    assert SECRET in hidden[0].state["user_message"]  # the run itself read it in clear
    read = (hidden[1].stage_reads or {})["seed#1"]["final_answer"]  # the answer, read by `in`
    if mode == "summary":
        assert read == ReadMarker("commitment")
        assert (exposed[1].stage_reads or {})["seed#1"]["final_answer"].preview == f'"{SECRET}"'
    else:
        assert list(read) == ["$commit"]


def test_a_value_made_and_replaced_inside_a_stage_is_described_only_without_a_policy() -> None:
    """A stage that reads its own value before replacing it read something the log never
    holds: without a policy it is described as it was; under one, as unrecorded (nothing of
    it: it has no committed form)."""
    scope = Scope({}, track_reads=True)
    scope.set("draft", f"draft with {SECRET}")
    assert scope.get("draft") == f"draft with {SECRET}"
    scope.set("draft", "final")
    writes = scope.net_writes("delta")
    after = scope.apply_to(writes)
    plain = stage_reads("summary", scope, writes, {}, {}, after, redacting=False)
    assert plain == {"draft": ReadMarker("string", 34, f'"draft with {SECRET}"')}
    redacted = stage_reads("summary", scope, writes, {}, {}, after, redacting=True)
    assert redacted == {"draft": UNRECORDED}
    assert stage_reads("full", scope, writes, {}, {}, after, redacting=True) == redacted


def test_a_replay_with_reads_tracked_records_the_same_rows() -> None:
    agent, result = quickstart(read_tracking="full")
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="my-model",
        system="You add numbers.",
        tools=[ADD],
        temperature=0,
        read_tracking="full",
    )
    replayed = af.replay_sync(twin, agent.store, result.run_id)
    assert replayed.calls_checked == 2
    assert af.same_recording(agent.store, result.run_id, twin.store, replayed.result.run_id)
    assert replayed.result.stage_reads is not None
    assert replayed.result.stage_reads.keys() == (result.stage_reads or {}).keys()
