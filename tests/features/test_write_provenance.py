"""``write_provenance``: under ``"reads-prefix"`` every recorded write names the keys its
stage read before it (log format v6, docs/log-format.md section 5.10), the verifier checks
them, and a replay records them again; absent or ``"off"``, the rows of before."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from feature_support import fixed_ports, rows

import agentfootprint as af
from agentfootprint.logformat.log_formats import LOG_FORMAT_V3, LOG_FORMAT_V4, LOG_FORMAT_V6
from agentfootprint.runtime.scope import Scope, Write
from agentfootprint.testing.seals import SIGNER
from quickstart_support import ADD, quickstart_replies

SERVED = ["history", "iteration", "model", "params", "system_pieces", "tool_schemas"]


def quickstart(**options: Any) -> tuple[af.Agent, af.RunResult]:
    """The README's quickstart (a tool call, then an answer), with fixed ports."""
    agent = af.Agent(
        provider=af.MockProvider(quickstart_replies()),
        model="my-model",
        system="You add numbers.",
        tools=[ADD],
        temperature=0,
        ports=fixed_ports(),
        **options,
    )
    return agent, agent.run_sync("What is 2 + 3?")


def writes(agent: af.Agent, run_id: str) -> list[tuple[int, str, str, Any]]:
    """``(commit, path, verb, reads)`` of every write (reads: None when not recorded)."""
    bodies = [orjson.loads(e.body) for e in agent.store.read(run_id) if e.type == "write"]
    return [(b["commit"], b["path"], b["verb"], b.get("reads")) for b in bodies]


def test_each_write_names_the_keys_its_stage_read_before_it() -> None:
    agent, result = quickstart(write_provenance="reads-prefix")
    opened = orjson.loads(next(iter(agent.store.read(result.run_id))).body)
    assert opened["format"] == LOG_FORMAT_V6
    assert opened["options"]["write_provenance"] == "reads-prefix"
    found = writes(agent, result.run_id)
    assert all(reads == [] for commit, _, _, reads in found if commit == 0)  # the seed: none
    # the reply: every key the request served, and the turn's counter
    assert (4, "last_response", "set", SERVED) in found
    # the usage, summed after the reply: read after it, so it names itself (and not the reply)
    assert (4, "usage", "set", [*SERVED, "usage"]) in found
    # the tool call and its result (one append), and the answer: from the reply
    assert (6, "history", "append", ["iteration", "last_response"]) in found
    assert (12, "final_answer", "set", ["iteration", "last_response"]) in found
    assert af.verify_run(agent.store, result.run_id).outcome is af.Outcome.VALID_UNSIGNED


@pytest.mark.parametrize("off", [{}, {"write_provenance": "off"}, {"write_provenance": None}])
def test_absent_or_off_records_the_rows_of_before(off: dict[str, Any]) -> None:
    agent, result = quickstart(**off)
    plain, plain_result = quickstart()
    assert rows(agent.store, result.run_id) == rows(plain.store, plain_result.run_id)
    opened = orjson.loads(rows(agent.store, result.run_id)[0][2])
    assert opened["format"] == LOG_FORMAT_V3 and "write_provenance" not in opened["options"]
    assert all(reads is None for *_, reads in writes(agent, result.run_id))


@pytest.mark.parametrize("value", ["on", "reads", True, 1, "Reads-Prefix"])
def test_a_bad_value_is_refused_naming_the_option(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", write_provenance=value)
    assert caught.value.option == "write_provenance"
    assert "'reads-prefix'" in str(caught.value)


def test_a_replay_records_the_same_reads_whatever_its_agent_says() -> None:
    """A replay records in its original's format: the reads come back byte for byte, with
    the option given again or not (the format decides)."""
    agent, result = quickstart(write_provenance="reads-prefix")
    for options in ({"write_provenance": "reads-prefix"}, {}):
        twin = af.Agent(
            provider=af.MockProvider([]),
            model="my-model",
            system="You add numbers.",
            tools=[ADD],
            temperature=0,
            **options,
        )
        replayed = af.replay_sync(twin, agent.store, result.run_id)
        assert replayed.calls_checked == 2
        assert af.same_recording(agent.store, result.run_id, twin.store, replayed.result.run_id)
        again = writes(twin, replayed.result.run_id)
        assert again == writes(agent, result.run_id) and again[0][3] == []


def test_a_sealed_continued_run_records_its_reads_and_verifies() -> None:
    agent = af.Agent(
        provider=af.MockProvider(quickstart_replies("Still 5.")),
        model="my-model",
        tools=[ADD],
        signer=SIGNER,
        write_provenance="reads-prefix",
        redact=af.conversation_redaction(),
    )
    first = agent.run_sync("What is 2 + 3?")
    second = agent.run_sync("Sure?", continue_from=first)
    for result in (first, second):
        verified = af.Verifier(agent.store, trusted_keys=[SIGNER.public]).verify(result.run_id)
        assert verified.outcome is af.Outcome.VALID
    found = writes(agent, second.run_id)
    # the continuation's seed read what it deletes: the last turn's answer and reply
    assert (0, "final_answer", "delete", ["final_answer"]) in found
    assert (0, "last_response", "delete", ["final_answer", "last_response"]) in found
    # a signer without the option: v4, as before
    plain = af.Agent(provider=af.MockProvider(["x"]), model="m", signer=SIGNER)
    done = plain.run_sync("hi")
    assert orjson.loads(next(iter(plain.store.read(done.run_id))).body)["format"] == (LOG_FORMAT_V4)


class _Consent:
    """A credential service that first asks for consent, then issues."""

    def __init__(self) -> None:
        self.answers: list[Any] = [
            af.AuthorizationRequired(authorization_url="https://consent.example/x"),
            af.Issued(token="tok-123456789"),
        ]

    def get_credential(self, request: Any) -> Any:
        return self.answers.pop(0)


def test_a_pause_and_its_resume_record_their_reads() -> None:
    """Format v6 pauses as v5 does: the paused run and the run that answers it verify."""
    tool = af.define_tool(
        name="search",
        description="Search.",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=lambda args: {"hits": 3},
        needs={"credential": "github", "scopes": ["repo:read"]},
    )
    agent = af.Agent(
        provider=af.MockProvider(
            [af.reply(tool_calls=[af.tool_call("search", {"q": "x"})]), "found 3"]
        ),
        model="m",
        tools=[tool],
        credentials=_Consent(),
        write_provenance="reads-prefix",
    )
    paused = agent.run_sync("find")
    assert paused.outcome == "paused"
    resumed = agent.resume_sync(paused)
    assert resumed.outcome == "answered" and resumed.answer == "found 3"
    for run_id in (paused.run_id, resumed.run_id):
        opened = orjson.loads(next(iter(agent.store.read(run_id))).body)
        assert opened["format"] == LOG_FORMAT_V6
        assert all(reads is not None for *_, reads in writes(agent, run_id))
    assert (0, "resume_answer", "set", []) in writes(agent, resumed.run_id)


def test_the_reads_of_a_write_are_those_before_its_keys_last_change() -> None:
    """Per key, the reads before the stage last changed it (so every read before any of its
    changes), sorted; a key made and dropped inside the stage is not named (the log never
    holds it); reading through ``committed`` (as a request is built) is a read; the read an
    append makes of the list it extends is not."""
    scope = Scope({"a": 1, "b": [1], "c": {"x": 1}}, track_reads=True)
    scope.set("tmp", 5)
    scope.get("tmp")
    scope.delete("tmp")
    assert scope.committed["c"] == {"x": 1}
    scope.set("out", 1)  # reads so far: tmp (dropped), c
    scope.append("b", [2])  # no read of b by the append itself
    scope.get("a")
    assert "missing" not in scope and "a" in scope  # an absent key read: not named
    scope.set("out", 2)  # its last change: after c and a
    scope.merge("c", {"y": 2})
    net = scope.with_reads(scope.net_writes("delta"))
    assert net == [
        Write(path="out", verb="set", value=2, reads=("a", "c")),
        Write(path="b", verb="append", value=[2], reads=("c",)),
        Write(path="c", verb="merge", value={"y": 2}, reads=("a", "c")),
    ]
    assert list(scope.reads) == ["tmp", "c", "a"]  # first read order, kept


def test_a_key_the_commit_writes_may_be_named_whatever_the_order_of_its_writes() -> None:
    """The commit's writes come in the order keys were first changed, not the order of the
    changes: a write may name a key written after it in the commit (section 5.10), and such
    a run verifies."""
    scope = Scope({}, track_reads=True)
    scope.set("first", 1)
    scope.set("second", 2)
    scope.get("second")
    scope.set("first", 3)
    assert scope.with_reads(scope.net_writes("delta"))[0] == Write(
        path="first", verb="set", value=3, reads=("second",)
    )


def test_a_replay_whose_stage_now_reads_another_key_diverges_as_record() -> None:
    """The replay compares ``reads`` as it compares every row: today's code reading one more
    key before the answer is written is a finding about that code (``record``)."""
    agent, result = quickstart(write_provenance="reads-prefix")
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="my-model",
        system="You add numbers.",
        tools=[ADD],
        temperature=0,
    )
    stage = twin.chart.stages["prepare-final"]
    original = stage.fn

    async def reads_more(ctx: Any) -> Any:
        ctx.scope.get("usage")
        return await original(ctx)

    twin.chart.stages["prepare-final"] = dataclasses.replace(stage, fn=reads_more)
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin, agent.store, result.run_id)
    assert caught.value.kind == "record" and caught.value.call == 1
    assert '+    "usage"' in str(caught.value)  # the diff: one more key read
