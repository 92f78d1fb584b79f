"""Replay end to end: an unchanged agent reproduces its recording byte for byte without a model
call; every kind of change is caught at the right call and piece with a readable diff; a fork
replays up to call ``k`` and goes live from there. Redacted runs: test_replay_redaction.py.

Every run closed here (the replays and the failed replay runs a divergence leaves) is verified
by the pytest plugin as well.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from replay_support import (
    assert_identical_replay,
    assert_readable_diff,
    closed,
    demo_options,
    diverge,
    failed_replay,
    logged_tools,
    opened,
    record_demo,
    replaying_agent,
    rows,
    verified,
)

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent, demo_script, demo_tools
from agentfootprint.errors import RunNotFoundError
from agentfootprint.features import tool_dispatch
from agentfootprint.replayer.recording import Recording
from agentfootprint.replayer.replay_run import _ReplayHooks, replay
from agentfootprint.runtime import run_observers as hooks
from agentfootprint.store.base import EventStore
from agentfootprint.testing.pytest_plugin import VerifiedRuns
from agentfootprint.testing.replay import NoModel, silent_twins

# -- an unchanged agent --------------------------------------------------------------------------


@pytest.mark.parametrize("target_store", ["same", "memory", "sqlite"], indirect=True)
def test_unchanged_demo_replays_both_turns_byte_identically(
    demo: tuple[EventStore, af.RunResult, af.RunResult], target_store: EventStore | None
) -> None:
    store, first, second = demo
    target = store if target_store is None else target_store
    before = {info.run_id for info in target.runs()}
    for original in (first, second):  # the second is a continued run
        agent = build_demo_agent(target, provider=NoModel())
        replayed = af.replay_sync(agent, store, original.run_id)
        assert_identical_replay(store, original, target, replayed)
    # the continued turn's replay continues the original first turn (not its replay)
    assert opened(target, replayed.result.run_id)["parent"]["run_id"] == first.run_id
    if target_store is not None:  # the ancestry was copied, row for row
        assert rows(target, first.run_id) == rows(store, first.run_id)
        assert {info.run_id for info in target.runs()} - before >= {first.run_id}
        assert second.run_id not in {info.run_id for info in target.runs()}
    else:
        assert len(target.runs()) == len(before) + 2  # the two replays, nothing copied


def test_replay_twice_into_one_store_copies_the_ancestry_once(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, second = demo
    target = af.MemoryStore()
    results = [
        af.replay_sync(replaying_agent(target), store, second.run_id).result for _ in range(2)
    ]
    assert sorted(info.run_id for info in target.runs()) == sorted(
        [first.run_id, *(r.run_id for r in results)]
    )
    assert af.same_recording(target, results[0].run_id, target, results[1].run_id)


def test_replay_never_calls_a_model_nor_runs_a_tool(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, second = demo
    target = af.MemoryStore()
    executed: list[str] = []
    agent = replaying_agent(target, executed)
    for original in (first, second):
        replayed = af.replay_sync(agent, store, original.run_id)
        assert_identical_replay(store, original, target, replayed)
    provider = agent.config.provider
    assert isinstance(provider, NoModel) and provider.calls == 0
    assert executed == []  # every tool call was answered from the recording
    # the tool results served are the recorded ones (the real tools' output)
    tool_messages = [m for m in replayed.result.state["history"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [
        m["content"] for m in second.state["history"] if m["role"] == "tool"
    ]


def test_replay_from_sqlite_into_memory_and_back(tmp_path: Path) -> None:
    with af.SqliteStore(tmp_path / "runs.db") as disk:
        _, second = record_demo(disk)
        memory = af.MemoryStore()
        replayed = af.replay_sync(replaying_agent(memory), disk, second.run_id)
        assert_identical_replay(disk, second, memory, replayed)
        again = af.replay_sync(replaying_agent(disk), memory, replayed.result.run_id)
        assert af.same_recording(disk, second.run_id, disk, again.result.run_id)
        assert opened(disk, again.result.run_id)["replay_of"] == replayed.result.run_id


def test_diff_runs_lists_what_a_changed_live_run_was_served(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    changed = af.Agent(
        provider=af.MockProvider(demo_script()),
        store=store,
        **demo_options(system=["You are a chatty travel helper.", demo_options()["system"][1]]),
    ).run_sync(DEMO_QUESTIONS[0])
    diff = af.diff_runs(store, first.run_id, store, changed.run_id)
    assert not diff.identical
    assert [(d.call, d.kind, d.position) for d in diff.differences] == [
        (call, "system", 0) for call in range(first.calls)
    ]
    assert '-  "text": "You are a concise travel helper."' in diff.differences[0].diff
    assert '+  "text": "You are a chatty travel helper."' in diff.differences[0].diff
    assert diff.to_json()["differences"][0]["kind"] == "system"
    assert af.diff_runs(store, first.run_id, store, changed.run_id, limit=1).differences == [
        diff.differences[0]
    ]
    assert not af.same_recording(store, first.run_id, store, changed.run_id)


# -- one divergence per kind of change ----------------------------------------------------------


def test_system_prompt_edit_diverges_at_call_0(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, _, second = demo
    system = demo_options()["system"]
    edited = [system[0], "Use the tools for facts; guess a rate when unsure."]
    error, target = diverge(store, second, system=edited)
    assert (error.call, error.kind, error.position) == (0, "system", 1)
    assert error.expected != error.actual and error.expected and error.actual
    assert_readable_diff(error, system[1], "guess a rate when unsure")
    failed_replay(target, error, second.run_id)


def test_tool_description_edit_diverges_in_tools(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    weather, convert = demo_tools()
    edited = af.define_tool(
        name=convert.name,
        description="Convert money between currencies.",
        input_schema=dict(convert.input_schema),
        execute=convert.execute,
    )
    error, target = diverge(store, first, tools=[weather, edited])
    assert (error.call, error.kind, error.position) == (0, "tools", 1)
    assert_readable_diff(error, convert.description, "Convert money between currencies.")
    failed_replay(target, error, first.run_id)


def test_tool_schema_edit_diverges_in_tools(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    weather, convert = demo_tools()
    schema = dict(weather.input_schema)
    schema["properties"] = {"city": {"type": "string", "minLength": 2}}
    edited = af.define_tool(
        name=weather.name,
        description=weather.description,
        input_schema=schema,
        execute=weather.execute,
    )
    error, target = diverge(store, first, tools=[edited, convert])
    assert (error.call, error.kind, error.position) == (0, "tools", 0)
    assert_readable_diff(error, '"minLength": 1', '"minLength": 2')
    failed_replay(target, error, first.run_id)


def extra_tool() -> af.Tool:
    return af.define_tool(
        name="get_time",
        description="Local time in a city.",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        execute=lambda args: "12:00",
    )


def test_tool_added_diverges_in_tools(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    error, target = diverge(store, first, tools=[*demo_tools(), extra_tool()])
    assert (error.call, error.kind, error.position) == (0, "tools", 2)
    assert error.expected is None and error.actual
    assert_readable_diff(error, None, "Local time in a city.")
    assert "added" in str(error)
    failed_replay(target, error, first.run_id)


def test_tool_removed_diverges_in_tools(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    weather, convert = demo_tools()
    error, target = diverge(store, first, tools=[weather])
    assert (error.call, error.kind, error.position) == (0, "tools", 1)
    assert error.expected and error.actual is None
    assert_readable_diff(error, convert.description, None)
    assert "removed" in str(error)
    failed_replay(target, error, first.run_id)


@pytest.mark.parametrize("change", ["added", "removed"])
def test_added_or_removed_piece_diff_puts_each_side_on_its_own_line(
    demo: tuple[EventStore, af.RunResult, af.RunResult], change: str
) -> None:
    store, first, _ = demo
    tools = [*demo_tools(), extra_tool()] if change == "added" else demo_tools()[:1]
    error, _ = diverge(store, first, tools=tools)
    lines = error.diff.splitlines()
    side = "-null" if change == "added" else "+null"
    assert side in lines, error.diff


def test_different_model_diverges_at_call_0(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    error, target = diverge(store, first, model="travel-model-2")
    assert (error.call, error.kind, error.position) == (0, "model", None)
    assert (error.expected, error.actual) == ("scripted-travel-model", "travel-model-2")
    assert "scripted-travel-model" in str(error) and "travel-model-2" in str(error)
    failed_replay(target, error, first.run_id)


def test_different_temperature_diverges_in_params(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, _, second = demo
    error, target = diverge(store, second, temperature=0.7)
    assert (error.call, error.kind, error.position) == (0, "params", None)
    assert error.expected is not None and "0.2" in error.expected and "0.7" not in error.expected
    assert error.actual is not None and "0.7" in error.actual
    assert "0.2" in str(error) and "0.7" in str(error)
    failed_replay(target, error, second.run_id)


def test_new_code_that_rewords_a_message_diverges_at_the_next_call(
    demo: tuple[EventStore, af.RunResult, af.RunResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """New code (here: a reworded validation teaching message) writes another tool message
    for the call the original refused: call 2 is served another history, caught at that
    message with both wordings in the diff."""
    store, first, _ = demo
    tool_message = first.state["history"][4]
    assert (
        tool_message["role"] == "tool"
        and "did not match its input schema" in (tool_message["content"])
    )
    monkeypatch.setattr(
        tool_dispatch, "teaching_message", lambda tool, issues: f"Call {tool.name} again, fixed."
    )
    error, target = diverge(store, first)
    assert (error.call, error.kind, error.position) == (2, "messages", 4)
    assert_readable_diff(error, "did not match its input schema", "Call convert_currency again")
    failed_replay(target, error, first.run_id)
    # the first two calls were replayed and receipted like the original's
    for k in range(2):
        assert af.receipt_at(target, error.run_id, k) == af.receipt_at(store, first.run_id, k)


def test_validation_turned_on_is_caught_at_the_tool_call() -> None:
    """Recorded with argument validation off (the malformed call ran, and failed); replayed
    with ``enforce``, the new code refuses a call the original ran: caught at that call."""
    store = af.MemoryStore()
    first, _ = record_demo(store, tool_arg_validation="off")
    tool_message = first.state["history"][4]
    assert tool_message["role"] == "tool" and "TypeError" in tool_message["content"]
    error, target = diverge(store, first, tool_arg_validation="enforce")
    assert (error.call, error.kind, error.position) == (1, "tool-call", 0)
    assert "the original ran the tool, the replay does not" in str(error)
    assert_readable_diff(error, "TypeError", "did not match its input schema")
    failed_replay(target, error, first.run_id)
    assert af.receipt_at(target, error.run_id, 1) == af.receipt_at(store, first.run_id, 1)


@pytest.mark.parametrize("mode", ["off", "warn"])
def test_validation_turned_off_is_caught_at_the_tool_call(
    demo: tuple[EventStore, af.RunResult, af.RunResult], mode: str
) -> None:
    """Recorded with ``enforce`` (the malformed call was refused); replayed with validation off
    or warning, the new code would run the tool: caught before it runs (no tool runs)."""
    store, first, _ = demo
    error, target = diverge(store, first, tool_arg_validation=mode)
    assert (error.call, error.kind, error.position) == (1, "tool-call", 0)
    assert "the replay would run the tool, the original did not" in str(error)
    assert_readable_diff(error, "did not match its input schema", None)
    failed_replay(target, error, first.run_id)


def test_fewer_calls_diverge_with_kind_calls(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    """A lower ``max_iterations`` ends the loop early: the replay makes 2 of the 4 calls."""
    store, first, _ = demo
    # the plain stop (a wrap-up call would be served where call 2 differs, not missing)
    error, target = diverge(store, first, max_iterations=2, wrap_up_at_max_iterations=False)
    assert (error.call, error.kind, error.position) == (2, "calls", None)
    assert "2" in str(error) and "4" in str(error)
    assert error.original_run == first.run_id
    assert error.run_id is not None
    assert opened(target, error.run_id)["replay_of"] == first.run_id
    verified(target, error.run_id)
    for k in range(2):
        assert af.receipt_at(target, error.run_id, k) == af.receipt_at(store, first.run_id, k)


def test_fewer_calls_replay_run_is_closed_as_failed(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    error, target = diverge(store, first, max_iterations=2)
    failed_replay(target, error, first.run_id)


def test_more_iterations_depart_at_the_tool_calls_the_original_left_pending() -> None:
    """Recorded with ``max_iterations=2`` (stopped early with call 1's tool calls pending); the
    replay may iterate further: it departs when it answers a tool call the original never ran,
    before it asks for a call the recording does not have."""
    store = af.MemoryStore()
    first, _ = record_demo(store, max_iterations=2, wrap_up_at_max_iterations=False)
    assert first.outcome == "stopped_early" and first.calls == 2
    error, target = diverge(store, first, max_iterations=6)
    assert (error.call, error.kind, error.position) == (1, "tool-call", 0)
    assert "ended the turn here" in str(error)
    failed_replay(target, error, first.run_id)


def test_a_call_beyond_the_recording_diverges_with_kind_calls(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    hooks = _ReplayHooks(Recording(store, first.run_id), None)
    with pytest.raises(af.ReplayDivergence) as beyond:
        hooks.check_receipt(first.calls, None, {})  # type: ignore[arg-type]
    assert (beyond.value.call, beyond.value.kind) == (first.calls, "calls")
    assert f"the original ({first.calls} calls) did not" in str(beyond.value)


def test_tool_calls_are_checked_in_order_against_the_recording(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    recording = Recording(store, first.run_id)
    history = first.state["history"]
    calls = [c for m in history if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    results = {m["tool_call_id"]: m for m in history if m["role"] == "tool"}
    assert [c["id"] for c in calls] == list(results)
    answered = recording.tool_calls
    assert [None if a is None else len(a) for a in answered] == [1, 1, 1, None]
    # call 1's arguments were refused by validation: the original did not run that tool
    assert [a[0].ran for a in answered[:3] if a is not None] == [True, False, True]

    def at(hooks: _ReplayHooks, k: int, call: dict[str, Any]) -> Any:
        hooks.call, hooks.tool_index = k, 0
        return hooks.tool_call(call)

    replaying = _ReplayHooks(recording, None)
    for k, call in enumerate(calls):
        entry = at(replaying, k, dict(call))
        assert (entry.id, entry.name) == (call["id"], call["name"])
        assert entry.content == results[call["id"]]["content"]
        assert entry.is_error is bool(results[call["id"]].get("is_error"))
        if entry.ran:
            assert replaying.answer(entry) == (entry.content, entry.is_error)
        else:
            with pytest.raises(af.ReplayDivergence, match="the original did not"):
                replaying.answer(entry)
    weather = calls[0]
    # the arguments as JSON text are the same call
    assert at(replaying, 0, {**weather, "arguments": '{"city": "Lisbon"}'}) is not None

    with pytest.raises(af.ReplayDivergence) as unknown:
        at(replaying, 0, {"id": "call_9_9", "name": "get_weather", "arguments": {}})
    assert (unknown.value.call, unknown.value.kind, unknown.value.position) == (0, "tool-call", 0)
    assert "call_9_9" in str(unknown.value)

    with pytest.raises(af.ReplayDivergence) as extra:
        replaying.tool_call(dict(weather))  # a second tool call in a reply that had one
    assert (extra.value.call, extra.value.kind, extra.value.position) == (0, "tool-call", 1)
    assert "not in the recording" in str(extra.value)

    with pytest.raises(af.ReplayDivergence) as other_args:
        at(replaying, 0, {**weather, "arguments": {"city": "Oslo"}})
    assert (other_args.value.call, other_args.value.kind) == (0, "tool-call")
    assert other_args.value.original_run == first.run_id
    assert_readable_diff(other_args.value, '"city": "Lisbon"', '"city": "Oslo"')

    with pytest.raises(af.ReplayDivergence) as other_tool:
        at(replaying, 0, {**weather, "name": "convert_currency"})
    assert other_tool.value.kind == "tool-call"
    assert "convert_currency" in other_tool.value.diff

    # a fork answers from the recording before its call, and leaves later calls to the tools
    forking = _ReplayHooks(recording, 1)
    assert at(forking, 0, dict(weather)) is not None
    assert at(forking, 1, {"id": "new", "name": "get_weather", "arguments": {}}) is None


@pytest.mark.parametrize("where", ["across-iterations", "one-reply"])
def test_reused_tool_call_ids_replay(where: str) -> None:
    def echo(args: Any) -> Any:
        return args

    tool = af.define_tool(
        name="echo", description="Echo.", input_schema={"type": "object"}, execute=echo
    )
    first_call = af.tool_call("echo", {"a": 1}, id="call-1")
    second_call = af.tool_call("echo", {"a": 2}, id="call-1")
    if where == "one-reply":
        script = [af.reply(tool_calls=[first_call, second_call]), "done"]
    else:
        script = [af.reply(tool_calls=[first_call]), af.reply(tool_calls=[second_call]), "done"]
    store = af.MemoryStore()
    original = af.Agent(
        provider=af.MockProvider(script), model="m", tools=[tool], store=store
    ).run_sync("hi")
    agent = af.Agent(
        provider=NoModel(), model="m", tools=silent_twins([tool], []), store=af.MemoryStore()
    )
    replayed = af.replay_sync(agent, store, original.run_id)
    assert af.same_recording(store, original.run_id, agent.store, replayed.result.run_id)


@pytest.mark.parametrize("arguments", ['{"x": 1.0}', '{"q": "a", "n": [2.0, -0.0]}'])
def test_json_text_arguments_with_integral_floats_replay(arguments: str) -> None:
    tool = af.define_tool(
        name="t", description="A tool.", input_schema={"type": "object"}, execute=lambda args: "ok"
    )
    script = [af.reply(tool_calls=[af.tool_call("t", arguments)]), "done"]
    store = af.MemoryStore()
    original = af.Agent(
        provider=af.MockProvider(script), model="m", tools=[tool], store=store
    ).run_sync("hi")
    assert original.state["history"][2]["content"] == "ok"  # the tool ran
    agent = af.Agent(
        provider=NoModel(), model="m", tools=silent_twins([tool], []), store=af.MemoryStore()
    )
    replayed = af.replay_sync(agent, store, original.run_id)
    assert af.same_recording(store, original.run_id, agent.store, replayed.result.run_id)


def test_without_receipts_a_change_diverges_with_kind_request() -> None:
    """A run recorded with ``record_receipt=False`` is compared request by request."""
    store = af.MemoryStore()
    first, _ = record_demo(store, record_receipt=False)
    assert af.receipt_at(store, first.run_id, 0) is None
    unchanged = replaying_agent(af.MemoryStore(), record_receipt=False)
    replayed = af.replay_sync(unchanged, store, first.run_id)
    assert_identical_replay(store, first, unchanged.store, replayed)

    error, target = diverge(store, first, record_receipt=False, system=["Be brief."])
    assert (error.call, error.kind, error.position) == (0, "request", None)
    assert_readable_diff(error, "You are a concise travel helper.", "Be brief.")
    failed_replay(target, error, first.run_id)


def test_replay_is_awaitable(demo: tuple[EventStore, af.RunResult, af.RunResult]) -> None:
    store, _, second = demo
    target = af.MemoryStore()

    async def main() -> af.ReplayResult:
        return await replay(replaying_agent(target), store, second.run_id)

    assert_identical_replay(store, second, target, asyncio.run(main()))


def test_af_replay_is_the_replay_function() -> None:
    """``af.replay`` stays the function once the subpackage is imported (it is ``replayer``)."""
    code = (
        "import inspect\n"
        "import agentfootprint as af\n"
        "af.replay_sync, af.state_at, af.diff_runs\n"
        "import agentfootprint.replayer.replay_run\n"
        "assert inspect.iscoroutinefunction(af.replay), af.replay\n"
        "from agentfootprint import replay\n"
        "from agentfootprint.replayer import replay as same\n"
        "assert replay is same is af.replay\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the coroutine the bug never awaits
def test_replay_sync_inside_an_event_loop_is_a_usage_error(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo

    async def main() -> None:
        af.replay_sync(replaying_agent(af.MemoryStore()), store, first.run_id)

    with pytest.raises(af.UsageError):
        asyncio.run(main())


# -- forks --------------------------------------------------------------------------------------


def test_fork_replays_before_k_and_asks_the_live_provider_from_k(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    target = af.MemoryStore()
    live = af.MockProvider(
        [
            af.reply(
                "Let me convert that too.",
                tool_calls=[
                    af.tool_call("convert_currency", {"amount": 10, "from": "GBP", "to": "EUR"})
                ],
            ),
            "Forked: sunny in Lisbon, and 10 GBP is 11.7 EUR.",
        ]
    )
    executed: list[str] = []
    agent = af.Agent(
        provider=live, store=target, **demo_options(tools=logged_tools(demo_tools(), executed))
    )
    forked = af.replay_sync(agent, store, first.run_id, until=1)
    run = forked.result
    assert (forked.original_run, forked.forked_at, forked.calls_checked) == (first.run_id, 1, 1)
    assert run.answer == "Forked: sunny in Lisbon, and 10 GBP is 11.7 EUR."
    assert run.calls == 3 and run.outcome == "answered"
    # call 0 was replayed: its tool call (get_weather) answered from the recording
    assert executed == ["convert_currency"]  # only the live call's tool ran
    assert af.receipt_at(target, run.run_id, 0) == af.receipt_at(store, first.run_id, 0)
    # calls 1 and 2 went to the live provider, served what the log says
    assert len(live.requests) == 2
    for k, request in enumerate(live.requests, start=1):
        assert af.served_at(target, run.run_id, k) == request
    assert run.state["history"][4]["content"] == (
        '{"amount":10,"from":"GBP","result":11.7,"to":"EUR"}'
    )
    head = opened(target, run.run_id)
    assert head["fork_of"] == {"run_id": first.run_id, "at_call": 1}
    assert "replay_of" not in head
    assert not af.same_recording(store, first.run_id, target, run.run_id)
    diff = af.diff_runs(store, first.run_id, target, run.run_id)
    assert diff.differences and all(d.call >= 2 for d in diff.differences)
    verified(target, run.run_id)


@pytest.mark.parametrize("k", [0, 2, 3])
def test_fork_at_k_keeps_calls_before_k(
    demo: tuple[EventStore, af.RunResult, af.RunResult], k: int
) -> None:
    store, first, _ = demo
    live = af.MockProvider(["A new answer."])
    executed: list[str] = []
    agent = af.Agent(
        provider=live, store=store, **demo_options(tools=silent_twins(demo_tools(), executed))
    )
    forked = af.replay_sync(agent, store, first.run_id, until=k)
    run = forked.result
    assert (forked.calls_checked, forked.forked_at, run.calls) == (k, k, k + 1)
    assert run.answer == "A new answer."
    assert executed == []  # tools before the fork answered from the recording
    for j in range(k + 1):  # call k was served what the original was served
        assert af.receipt_at(store, run.run_id, j) == af.receipt_at(store, first.run_id, j)
    assert live.requests == [af.served_at(store, run.run_id, k)]
    assert af.served_at(store, run.run_id, k) == af.served_at(store, first.run_id, k)
    assert opened(store, run.run_id)["fork_of"] == {"run_id": first.run_id, "at_call": k}
    verified(store, run.run_id)


def test_fork_of_a_continued_turn_into_another_store(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, second = demo
    target = af.MemoryStore()
    live = af.MockProvider(["250 GBP: about 292.50 EUR (forked)."])
    agent = af.Agent(provider=live, store=target, **demo_options())
    forked = af.replay_sync(agent, store, second.run_id, until=1)
    run = forked.result
    assert run.parent_run_id == first.run_id
    assert run.conversation_id == first.conversation_id
    assert rows(target, first.run_id) == rows(store, first.run_id)
    assert af.receipt_at(target, run.run_id, 0) == af.receipt_at(store, second.run_id, 0)
    assert len(live.requests) == 1
    assert live.requests[0] == af.served_at(target, run.run_id, 1)
    assert opened(target, run.run_id)["fork_of"] == {"run_id": second.run_id, "at_call": 1}
    check = verified(target, run.run_id)
    assert check.ancestors == (first.run_id,)


def test_fork_beyond_the_last_call_never_goes_live(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    agent = replaying_agent(af.MemoryStore())
    forked = af.replay_sync(agent, store, first.run_id, until=first.calls)
    assert forked.calls_checked == first.calls and forked.forked_at == first.calls
    assert af.same_recording(store, first.run_id, agent.store, forked.result.run_id)


def test_fork_that_diverges_before_k_raises(
    demo: tuple[EventStore, af.RunResult, af.RunResult],
) -> None:
    store, first, _ = demo
    target = af.MemoryStore()
    live = af.MockProvider(["never asked"])
    agent = af.Agent(provider=live, store=target, **demo_options(temperature=1.0))
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent, store, first.run_id, until=2)
    assert (caught.value.call, caught.value.kind) == (0, "params")
    assert live.requests == []
    assert caught.value.run_id is not None
    assert opened(target, caught.value.run_id)["fork_of"]["at_call"] == 2
    assert closed(target, caught.value.run_id)["outcome"] == "failed"
    verified(target, caught.value.run_id)


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("until", [-1, True, 1.0, "1"])
def test_until_must_be_a_call_index(
    demo: tuple[EventStore, af.RunResult, af.RunResult], until: Any
) -> None:
    store, first, _ = demo
    agent = replaying_agent(af.MemoryStore())
    with pytest.raises(af.UsageError, match="until"):
        af.replay_sync(agent, store, first.run_id, until=until)
    assert agent.store.runs() == []  # nothing was opened


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_unknown_run_id(tmp_path: Path, kind: str) -> None:
    source = af.MemoryStore() if kind == "memory" else af.SqliteStore(tmp_path / "r.db")
    record_demo(source)
    agent = replaying_agent(af.MemoryStore())
    try:
        with pytest.raises(RunNotFoundError):
            af.replay_sync(agent, source, "0" * 32)
        with pytest.raises(RunNotFoundError):
            af.replay_sync(agent, source, "0" * 32, until=1)
    finally:
        source.close()
    assert agent.store.runs() == []


def test_replay_observers_get_the_replay_provider(
    demo: tuple[EventStore, af.RunResult, af.RunResult], verified_runs: VerifiedRuns
) -> None:
    """The recording agent replays its own run: the plugin must not compare the replay's log
    with requests its MockProvider received during the original runs."""
    store, first, _ = demo
    seen: list[Any] = []
    remove = hooks.add_run_observer(lambda _store, _run, provider: seen.append(provider))
    try:
        agent = build_demo_agent(store)
        agent.run_sync(DEMO_QUESTIONS[0])  # its provider now holds requests of its own
        replayed = af.replay_sync(agent, store, first.run_id)
    finally:
        remove()
    assert len(seen) == 2 and seen[0] is agent.config.provider
    assert seen[1] is not agent.config.provider
    assert replayed.result.run_id in verified_runs.run_ids
    assert not verified_runs.failures
