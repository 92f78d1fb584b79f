"""The agent loop end to end: each scenario runs for real, is verified (plugin), and checked."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.logformat import limits
from agentfootprint.runtime.tools import ResultRoom, json_text_size, result_text
from agentfootprint.testing.pytest_plugin import VerifiedRuns
from examples_budget import scaled

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def add_tool(**overrides: Any) -> af.Tool:
    spec: dict[str, Any] = {
        "name": "add",
        "description": "Add two numbers.",
        "input_schema": ADD_SCHEMA,
        "execute": lambda args: args["a"] + args["b"],
    }
    spec.update(overrides)
    return af.define_tool(**spec)


def call(name: str, args: Any) -> af.LLMResponse:
    return af.reply(tool_calls=[af.tool_call(name, args)])


def history_of(result: af.RunResult) -> list[dict[str, Any]]:
    return list(result.state["history"])


def assert_served_equals_received(
    agent: af.Agent, result: af.RunResult, provider: af.MockProvider, first: int = 0
) -> None:
    for k in range(result.calls):
        assert af.served_at(agent.store, result.run_id, k) == provider.requests[first + k]


def test_tool_loop_answers_and_records(tmp_path: Path, verified_runs: VerifiedRuns) -> None:
    provider = af.MockProvider([call("add", {"a": 2, "b": 3}), "It is 5."])
    agent = af.Agent(
        provider=provider, model="m", system="Add.", tools=[add_tool()], store=tmp_path / "runs.db"
    )
    result = agent.run_sync("2+3?")
    assert (result.answer, result.iterations, result.calls) == ("It is 5.", 2, 2)
    assert result.outcome == "answered" and result.stopped_early is None
    assert history_of(result)[2] == {
        "role": "tool",
        "tool_call_id": "call_0_0",
        "name": "add",
        "content": "5",
    }
    assert_served_equals_received(agent, result, provider)
    info = agent.store.run_info(result.run_id)
    assert info.closed and info.conversation_id == result.run_id
    final = af.Verifier(agent.store).verify(result.run_id)
    assert af.state_at(agent.store, result.run_id, final.commits - 1) == result.state
    assert verified_runs.run_ids == [result.run_id]


def test_receipt_lists_are_full_and_match_served(tmp_path: Path) -> None:
    provider = af.MockProvider(
        [call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}), "done"]
    )
    agent = af.Agent(
        provider=provider,
        model="m",
        system=["one", "two"],
        tools=[add_tool()],
        store=tmp_path / "r.db",
    )
    result = agent.run_sync("go")
    receipts = [af.receipt_at(agent.store, result.run_id, k) for k in range(3)]
    assert [len(r.messages) for r in receipts if r] == [1, 3, 5]
    assert all(r is not None and len(r.system) == 2 and len(r.tools) == 1 for r in receipts)
    first, second = receipts[0], receipts[1]
    assert first is not None and second is not None
    assert second.messages[:1] == first.messages  # the shared prefix is the same digest
    # stored as tails: the third receipt body carries only the new digests
    bodies = [e.decoded() for e in agent.store.read(result.run_id) if e.type == "receipt"]
    assert bodies[2]["messages"] == {"keep": 3, "add": list(receipts[2].messages[3:])}


def test_classic_mode_runs_slots_once(tmp_path: Path) -> None:
    provider = af.MockProvider([call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4}), "7"])
    agent = af.Agent(
        provider=provider,
        model="m",
        system="s",
        tools=[add_tool()],
        react_mode="classic",
        store=tmp_path / "c.db",
    )
    result = agent.run_sync("go")
    stages = [e.decoded()["stage"] for e in agent.store.read(result.run_id) if e.type == "commit"]
    assert stages.count("system-prompt") == 1 and stages.count("tools") == 1
    assert stages.count("messages") == 3 and stages.count("call-llm") == 3
    assert_served_equals_received(agent, result, provider)


def test_max_iterations_stops_early() -> None:
    provider = af.MockProvider([call("add", {"a": 1, "b": 1})] * 3)
    agent = af.Agent(
        provider=provider,
        model="m",
        tools=[add_tool()],
        max_iterations=2,
        wrap_up_at_max_iterations=False,  # the plain stop (the wrap-up: test_wrap_up.py)
    )
    result = agent.run_sync("loop")
    assert result.outcome == "stopped_early"
    assert result.stopped_early == af.StoppedEarly(
        reason="max-iterations", iteration=2, pending_tool_calls=1
    )
    assert result.calls == 2 and result.answer == ""
    assert history_of(result)[-1] == {"role": "assistant", "content": ""}


def test_tool_that_raises_is_recorded_as_its_error_result() -> None:
    def broken(args: dict[str, Any]) -> str:
        raise RuntimeError("disk on fire")

    tool = af.define_tool(name="broken", description="fails", execute=broken)
    provider = af.MockProvider([call("broken", {}), "sorry"])
    agent = af.Agent(provider=provider, model="m", tools=[tool])
    ends: list[af.ToolEnd] = []
    agent.on("agentfootprint.stream.tool_end", ends.append)
    result = agent.run_sync("go")
    message = history_of(result)[2]
    assert message["is_error"] is True
    assert "RuntimeError: disk on fire" in message["content"]
    assert result.answer == "sorry" and ends[0].is_error


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (dt.datetime(2026, 1, 1), "datetime"),
        (b"bytes", "bytes"),
        ({1, 2}, "set"),
        ({"when": dt.date(2026, 1, 1)}, "$.when"),
        (object(), "object"),
        (float("nan"), "finite"),
        (2**60, "2**53"),
    ],
)
def test_non_json_tool_result_is_refused_as_error(value: Any, where: str) -> None:
    tool = af.define_tool(name="odd", description="returns odd things", execute=lambda a: value)
    agent = af.Agent(provider=af.MockProvider([call("odd", {}), "ok"]), model="m", tools=[tool])
    result = agent.run_sync("go")
    message = history_of(result)[2]
    assert message["is_error"] is True and where in message["content"]
    assert "not JSON" in message["content"]


def test_json_tool_results_become_canonical_text() -> None:
    tool = af.define_tool(
        name="data", description="d", execute=lambda a: {"b": 1.0, "a": [True, None, "é"]}
    )
    agent = af.Agent(provider=af.MockProvider([call("data", {}), "ok"]), model="m", tools=[tool])
    result = agent.run_sync("go")
    assert history_of(result)[2]["content"] == '{"a":[true,null,"é"],"b":1}'


def test_async_tool_and_context() -> None:
    seen: list[af.ToolContext] = []

    async def lookup(args: dict[str, Any], ctx: af.ToolContext) -> str:
        seen.append(ctx)
        await asyncio.sleep(0)
        return f"found {args['q']}"

    tool = af.define_tool(
        name="lookup",
        description="d",
        execute=lookup,
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    agent = af.Agent(
        provider=af.MockProvider([call("lookup", {"q": "x"}), "ok"]), model="m", tools=[tool]
    )
    result = asyncio.run(agent.run("go"))
    assert history_of(result)[2]["content"] == "found x"
    assert seen[0].run_id == result.run_id and seen[0].tool_call_id == "call_0_0"
    assert seen[0].iteration == 1 and seen[0].tool == "lookup"


def test_enforce_validation_teaches_and_skips_the_tool() -> None:
    ran: list[Any] = []
    tool = add_tool(execute=lambda a: ran.append(a) or 0)
    agent = af.Agent(
        provider=af.MockProvider([call("add", {"a": "2"}), "ok"]), model="m", tools=[tool]
    )
    invalid: list[af.ArgsInvalid] = []
    agent.on("agentfootprint.validation.args_invalid", invalid.append)
    result = agent.run_sync("go")
    assert ran == []
    content = history_of(result)[2]["content"]
    assert "did not match its input schema" in content
    assert "$.a: expected type 'number' (received string)" in content
    assert "missing required argument(s): b" in content
    assert "2" not in content.split("schema")[1].replace("(received", "")  # no values quoted
    assert invalid[0].mode == "enforce" and {i["path"] for i in invalid[0].issues} == {"$", "$.a"}
    recorded = [e.decoded() for e in agent.store.read(result.run_id) if e.type == "event"]
    assert recorded[0]["name"] == "agentfootprint.validation.args_invalid"


def test_warn_validation_runs_the_tool_and_off_skips_the_check() -> None:
    for mode, expected_events in (("warn", 1), ("off", 0)):
        ran: list[Any] = []
        tool = add_tool(execute=lambda a, ran=ran: ran.append(a) or "ran")
        agent = af.Agent(
            provider=af.MockProvider([call("add", {"a": 1}), "ok"]),
            model="m",
            tools=[tool],
            tool_arg_validation=mode,
        )
        events: list[af.AgentEvent] = []
        agent.on("agentfootprint.validation.*", events.append)
        result = agent.run_sync("go")
        assert ran == [{"a": 1}] and history_of(result)[2]["content"] == "ran"
        assert len(events) == expected_events


def test_arguments_as_json_string_and_malformed_json() -> None:
    provider = af.MockProvider([call("add", '{"a": 1, "b": 2}'), call("add", "{not json"), "ok"])
    agent = af.Agent(provider=provider, model="m", tools=[add_tool()])
    result = agent.run_sync("go")
    history = history_of(result)
    assert history[1]["tool_calls"][0]["arguments"] == {"a": 1, "b": 2}
    assert history[2]["content"] == "3"
    assert history[3]["tool_calls"][0]["arguments"] == "{not json"
    assert "not valid JSON" in history[4]["content"] and history[4]["is_error"]


def test_a_number_beyond_53_bits_in_the_arguments_is_read_as_its_double() -> None:
    """JSON numbers are doubles (as the log reads them back): an integer token too big for
    I-JSON reaches the tool and the history as the double it denotes, where the history
    used to hold only the arguments' type name ("object")."""
    seen: list[Any] = []

    def record(args: dict[str, Any]) -> str:
        seen.append(args["n"])
        return "ok"

    tool = af.define_tool(name="take", description="Take a number.", execute=record)
    provider = af.MockProvider([call("take", '{"n": 12345678901234567890}'), "done"])
    result = af.Agent(provider=provider, model="m", tools=[tool]).run_sync("go")
    assert seen == [1.2345678901234567e19] and type(seen[0]) is float
    assert history_of(result)[1]["tool_calls"][0]["arguments"] == {"n": 1.2345678901234567e19}


def test_unknown_tool_is_told_to_the_model() -> None:
    agent = af.Agent(
        provider=af.MockProvider([call("nope", {}), "ok"]), model="m", tools=[add_tool()]
    )
    content = history_of(agent.run_sync("go"))[2]["content"]
    assert "no tool named 'nope'" in content and "add" in content


def test_provider_failure_closes_the_run_as_failed(
    tmp_path: Path, verified_runs: VerifiedRuns
) -> None:
    def explode(request: Any) -> af.LLMResponse:
        raise ConnectionError("upstream 503")

    agent = af.Agent(provider=af.MockProvider(respond=explode), model="m", store=tmp_path / "f.db")
    with pytest.raises(af.ProviderCallError) as caught:
        agent.run_sync("go")
    run_id = caught.value.run_id
    assert run_id is not None and isinstance(caught.value.__cause__, ConnectionError)
    events = [(e.type, e.decoded()) for e in agent.store.read(run_id)]
    commit = next(b for t, b in events if t == "commit" and b["stage"] == "call-llm")
    assert commit["error"] == {
        "type": "ProviderCallError",
        "message": "provider 'mock' failed on call 0: ConnectionError: upstream 503",
    }
    assert events[-1][0] == "run.close"
    assert events[-1][1]["outcome"] == "failed"
    assert "upstream 503" in events[-1][1]["error"]["message"]
    receipts = [b for t, b in events if t == "receipt"]
    assert len(receipts) == 1  # the request was served even though the call failed
    assert verified_runs.results[0].outcome is af.Outcome.VALID_UNSIGNED


def test_exhausted_script_says_so() -> None:
    agent = af.Agent(
        provider=af.MockProvider([call("add", {"a": 1, "b": 1})]), model="m", tools=[add_tool()]
    )
    with pytest.raises(af.ScriptExhaustedError, match=r"script exhausted: call 2") as caught:
        agent.run_sync("go")
    assert caught.value.run_id is not None


def test_bad_run_input() -> None:
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m")
    with pytest.raises(af.UsageError):
        agent.run_sync(42)  # type: ignore[arg-type]
    with pytest.raises(af.UsageError, match="surrogate"):
        agent.run_sync("bad \ud800")
    assert agent.store.runs() == []  # nothing half-written


def test_run_sync_inside_a_loop_is_refused() -> None:
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m")

    async def inner() -> None:
        with pytest.raises(af.UsageError, match=r"await agent\.run"):
            agent.run_sync("go")

    asyncio.run(inner())


def test_events_in_order_and_wildcards() -> None:
    agent = af.Agent(
        provider=af.MockProvider([call("add", {"a": 1, "b": 2}), "3"]),
        model="m",
        tools=[add_tool()],
        temperature=0.5,
    )
    kinds: list[str] = []
    streams: list[str] = []
    agent.on("*", lambda e: kinds.append(e.kind))
    unsubscribe = agent.on("agentfootprint.stream.*", lambda e: streams.append(e.kind))
    agent.run_sync("go")
    prefix = "agentfootprint."
    assert [k.removeprefix(prefix) for k in kinds] == [
        "agent.turn_start",
        "agent.iteration_start",
        "stream.llm_start",
        "stream.llm_end",
        "stream.tool_start",
        "stream.tool_end",
        "agent.iteration_end",
        "agent.iteration_start",
        "stream.llm_start",
        "stream.llm_end",
        "agent.iteration_end",
        "agent.turn_end",
    ]
    assert streams == [k for k in kinds if k.startswith("agentfootprint.stream.")]
    unsubscribe()
    agent2_kinds = len(streams)
    agent.config.provider.position = 0  # type: ignore[attr-defined]
    agent.run_sync("again")
    assert len(streams) == agent2_kinds


def test_listener_errors_do_not_break_the_run(caplog: pytest.LogCaptureFixture) -> None:
    agent = af.Agent(provider=af.MockProvider(["fine"]), model="m")

    def bad(event: af.AgentEvent) -> None:
        raise ValueError("listener bug")

    agent.on("agentfootprint.agent.turn_end", bad)
    assert agent.run_sync("go").answer == "fine"
    assert "listener bug" in caplog.text


def test_unknown_event_name_is_refused() -> None:
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m")
    with pytest.raises(af.UsageError, match="no event matches"):
        agent.on("agentfootprint.stream.llm_started", print)
    with pytest.raises(af.UsageError):
        agent.on("agentfootprint.stream.*", "not callable")  # type: ignore[arg-type]


def test_llm_start_and_end_payloads() -> None:
    agent = af.Agent(
        provider=af.MockProvider(["hello there"]), model="m-1", temperature=0.7, tools=[add_tool()]
    )
    seen: list[af.AgentEvent] = []
    agent.on("agentfootprint.stream.*", seen.append)
    agent.run_sync("hi")
    start, end = seen
    assert isinstance(start, af.LLMStart) and isinstance(end, af.LLMEnd)
    assert (start.model, start.call, start.messages, start.tools, start.temperature) == (
        "m-1",
        0,
        1,
        1,
        0.7,
    )
    assert end.content == "hello there" and end.usage == {"input": 1, "output": 3}


def test_respond_callable_and_record_receipt_off(tmp_path: Path) -> None:
    def respond(request: Any) -> str:
        return f"you said {request['messages'][-1]['content']}"

    provider = af.MockProvider(respond=respond)
    agent = af.Agent(provider=provider, model="m", record_receipt=False, store=tmp_path / "n.db")
    result = agent.run_sync("ping")
    assert result.answer == "you said ping"
    assert [e for e in agent.store.read(result.run_id) if e.type == "receipt"] == []
    assert af.receipt_at(agent.store, result.run_id, 0) is None
    assert af.served_at(agent.store, result.run_id, 0) == provider.requests[0]


def test_commit_value_at_and_state_at_start(tmp_path: Path) -> None:
    agent = af.Agent(provider=af.MockProvider(["a"]), model="m", store=tmp_path / "s.db")
    result = agent.run_sync("go")
    assert af.state_at(agent.store, result.run_id, -1) == {}
    assert af.commit_value_at(agent.store, result.run_id, 0, "user_message") == "go"
    assert af.commit_value_at(agent.store, result.run_id, 0, "final_answer") is None
    with pytest.raises(af.UsageError):
        af.state_at(agent.store, result.run_id, 999)
    with pytest.raises(af.UsageError):
        af.served_at(agent.store, result.run_id, 5)


def test_continuation_errors(tmp_path: Path) -> None:
    db = tmp_path / "c.db"

    def explode(request: Any) -> af.LLMResponse:
        raise TimeoutError("slow")

    failing = af.Agent(provider=af.MockProvider(respond=explode), model="m", store=db)
    with pytest.raises(af.ProviderCallError) as caught:
        failing.run_sync("go")
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m", store=db)
    with pytest.raises(af.ContinuationError, match="closed as 'failed'"):
        agent.run_sync("again", continue_from=caught.value.run_id)
    with pytest.raises(af.ContinuationError, match="not in this agent's store"):
        agent.run_sync("again", continue_from="no-such-run")
    with pytest.raises(af.UsageError):
        agent.run_sync("again", continue_from=42)  # type: ignore[arg-type]
    other = af.Agent(provider=af.MockProvider(["y"]), model="m")
    elsewhere = other.run_sync("hi")
    with pytest.raises(af.ContinuationError):
        agent.run_sync("again", continue_from=elsewhere)


def test_agent_closes_the_store_it_opened(tmp_path: Path) -> None:
    with af.Agent(provider=af.MockProvider(["x"]), model="m", store=tmp_path / "a.db") as agent:
        result = agent.run_sync("go")
    store = af.SqliteStore(tmp_path / "a.db")
    assert store.run_info(result.run_id).closed
    shared = af.MemoryStore()
    with af.Agent(provider=af.MockProvider(["x"]), model="m", store=shared) as agent:
        agent.run_sync("go")
    assert len(shared.runs()) == 1  # a store given to the agent stays open


# -- what cannot be recorded (issue 8: the size limit, malformed replies) ----------------------


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    """The body limit lowered (read at call time from verify.limits): tool results of one
    reply may take 1000 bytes, a message as much."""
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", limits.MAX_ENVELOPE_BYTES + 1000)
    return 1000


def returning(*values: Any) -> af.Tool:
    queue = list(values)
    return af.define_tool(name="big", description="d", execute=lambda a: queue.pop(0))


def run_calls(tool: af.Tool, calls: int) -> af.RunResult:
    script: list[Any] = [af.reply(tool_calls=[af.tool_call("big", {}) for _ in range(calls)]), "ok"]
    return af.Agent(provider=af.MockProvider(script), model="m", tools=[tool]).run_sync("go")


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("x" * 999, 1001),  # a string: its JSON text, quotes included
        ('"' * 500, 1002),  # each quote is escaped: 2 bytes
        ("\u0001" * 200, 1202),  # a control character is \u0001: 6 bytes
        ({"a": "x" * 990}, 1004),  # JSON: its canonical text, as a string
        (["\\" * 250], 1008),  # a backslash, escaped in the canonical text and again
    ],
)
def test_a_tool_result_too_large_to_record_is_its_error_result(
    small_limit: int, value: Any, size: int
) -> None:
    result = run_calls(returning(value), 1)
    message = history_of(result)[2]
    assert message["is_error"] is True
    assert f"too large to record: {size} bytes" in message["content"]
    assert f"over the {small_limit} bytes" in message["content"]
    assert result.answer == "ok"  # the run goes on: the model is told


@pytest.mark.parametrize(
    "value", ["x" * 998, '"' * 499, "é" * 300, {"a": "x" * 986}, "\n" * 499, "a" * 160]
)
def test_a_result_that_fits_is_kept_whole(small_limit: int, value: Any) -> None:
    """Sizes are exact at the limit (a bound only decides what clearly fits)."""
    result = run_calls(returning(value), 1)
    message = history_of(result)[2]
    assert "is_error" not in message
    expected = value if isinstance(value, str) else orjson.dumps(value).decode()
    assert message["content"] == expected


def test_the_results_of_one_reply_share_one_body(small_limit: int) -> None:
    result = run_calls(returning("a" * 600, "b" * 300, "c" * 300), 3)
    first, second, third = history_of(result)[2:5]
    assert first["content"] == "a" * 600 and second["content"] == "b" * 300
    assert third["is_error"] is True
    assert "earlier tool results already take 904 bytes" in third["content"]


def test_a_refused_result_replays_as_recorded(small_limit: int) -> None:
    store = af.MemoryStore()
    tool = returning("x" * 2000)
    script: list[Any] = [call("big", {}), "ok"]
    original = af.Agent(
        provider=af.MockProvider(script), model="m", tools=[tool], store=store
    ).run_sync("go")
    assert history_of(original)[2]["is_error"] is True
    with af.Agent(provider=af.MockProvider(["unused"]), model="m", tools=[tool]) as agent:
        replayed = af.replay_sync(agent, store, original.run_id)
        assert af.same_recording(store, original.run_id, agent.store, replayed.result.run_id)


def test_a_user_message_too_large_to_record_writes_nothing(small_limit: int) -> None:
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m")
    with pytest.raises(af.UsageError) as caught:
        agent.run_sync("m" * 999)
    assert caught.value.option == "message" and "1001 bytes" in str(caught.value)
    assert agent.store.run_ids() == []
    assert agent.run_sync("m" * 998).answer == "x"


@pytest.mark.parametrize(
    ("response", "named"),
    [
        (af.LLMResponse(content=None), "content"),  # type: ignore[arg-type]
        (af.LLMResponse(stop_reason=3), "stop_reason"),  # type: ignore[arg-type]
        (af.LLMResponse(usage=af.Usage(input=-1)), "usage"),
        (af.LLMResponse(usage=af.Usage(output=2**60)), "usage"),
        (af.LLMResponse(usage=None), "usage"),  # type: ignore[arg-type]
        (af.LLMResponse(tool_calls=None), "tool_calls"),  # type: ignore[arg-type]
        (af.LLMResponse(tool_calls=({"id": "c", "name": "add"},)), "tool_calls[0]"),  # type: ignore[arg-type]
        (af.LLMResponse(tool_calls=(af.ToolCall(id=1, name="add"),)), "tool_calls[0]"),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_provider_reply_fails_the_call_naming_the_field(
    response: af.LLMResponse, named: str, verified_runs: VerifiedRuns
) -> None:
    class Adapter:  # an adapter with a bug: the dataclasses do not check their fields
        name = "adapter"

        async def complete(self, request: Any) -> af.LLMResponse:
            return response

    agent = af.Agent(provider=Adapter(), model="m")
    with pytest.raises(af.ProviderCallError, match="malformed") as caught:
        agent.run_sync("go")
    assert named in str(caught.value) and caught.value.run_id is not None
    assert verified_runs.results[-1].close is not None
    assert verified_runs.results[-1].close["outcome"] == "failed"


def test_a_provider_reply_too_large_to_record_fails_the_call(
    monkeypatch: pytest.MonkeyPatch, verified_runs: VerifiedRuns
) -> None:
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", limits.MAX_ENVELOPE_BYTES + 1000)
    agent = af.Agent(provider=af.MockProvider(["r" * (limits.MAX_BODY_BYTES + 1)]), model="m")
    with pytest.raises(af.ProviderCallError, match="too large to record") as caught:
        agent.run_sync("go")
    assert isinstance(caught.value.__cause__, af.RecordTooLargeError)
    assert "$.last_response" in str(caught.value)
    close = verified_runs.results[-1].close
    assert close is not None and close["outcome"] == "failed"


def test_a_write_too_large_to_record_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, verified_runs: VerifiedRuns
) -> None:
    """What cannot be recorded never reaches the log: the stage fails, the run is closed as
    failed (and verifies), and the caller gets a RunError naming the key."""
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", limits.MAX_ENVELOPE_BYTES + 1000)
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m", system="s" * 70_000)
    with pytest.raises(af.RunError, match=r"\$\.system_pieces") as caught:
        agent.run_sync("go")
    assert isinstance(caught.value.__cause__, af.RecordTooLargeError)
    assert caught.value.run_id == verified_runs.results[-1].run_id
    close = verified_runs.results[-1].close
    assert close is not None and close["outcome"] == "failed"
    assert agent.config.provider.requests == []  # type: ignore[attr-defined]


json_results = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@settings(max_examples=scaled(60), deadline=None)
@given(
    values=st.lists(st.text(max_size=400) | json_results, min_size=1, max_size=6),
    limit=st.integers(min_value=0, max_value=1500),
)
@example(values=["a" * 300, "b" * 300, "c" * 300, "d"], limit=1000)
@example(values=['"' * 300, "\u0001" * 100], limit=602)
def test_the_result_room_admits_exactly_what_fits(values: list[Any], limit: int) -> None:
    """Against exact sizes (the JSON text of each result, as recorded), in order: a result is
    kept iff it fits beside what was kept and refused before it."""
    room = ResultRoom()
    room.limit = limit
    used = 0
    for value in values:
        outcome = result_text("t", value)
        exact = json_text_size(outcome.content)  # the slow way: encode the text
        given_back = room.admit("t", outcome)
        if used + exact <= limit:
            assert given_back is outcome
            used += exact
        else:
            assert given_back.is_error and "too large to record" in given_back.content
            assert f"{exact} bytes" in given_back.content
            used += json_text_size(given_back.content)
    assert room.used <= max(used, limit)
