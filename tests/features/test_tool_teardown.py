"""``tool_teardown_timeout_ms``: ``ctx.on_teardown`` cleanups at run end and on cancellation."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, lookup, replays, rows, without_open

import agentfootprint as af
from agentfootprint.features import tool_teardown
from agentfootprint.features.registry import Seam, all_features
from agentfootprint.logformat.canonical import parse

CLOSED = "agentfootprint.tools.session_closed"
FAILED = "agentfootprint.tools.session_close_failed"


def script(*ids: str, answer: str = "done") -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call("session", {}, id=i)]) for i in ids] + [answer]


def session_tool(teardown: Any, *, then: Any = None) -> af.Tool:
    """A tool that opens a "session" and registers ``teardown(call_id)``'s cleanup for it."""

    async def execute(args: Any, ctx: af.ToolContext) -> Any:
        ctx.on_teardown(teardown(ctx.tool_call_id))
        if then is not None:
            return await then()
        return "opened"

    return af.define_tool(name="session", description="Open a session.", execute=execute)


def agent_with(tool: af.Tool, replies: list[Any], **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(replies), model="m", tools=[tool], ports=fixed_ports(), **options
    )


def verified(agent: af.Agent, run_id: str) -> dict[str, Any]:
    checked = af.verify_run(agent.store, run_id)
    assert checked.outcome.name == "VALID_UNSIGNED"
    assert checked.close is not None
    return checked.close


def last_rows(agent: af.Agent, run_id: str) -> list[tuple[str, Any]]:
    """The rows of the run's last commit and its close: (type, event name or stage)."""
    out = []
    for e in agent.store.read(run_id):
        body = parse(e.body)
        out.append((e.type, body.get("name") if e.type == "event" else body.get("stage")))
    return out


def test_teardowns_run_once_at_run_end_last_registered_first_and_are_recorded() -> None:
    order: list[str] = []

    def teardown(call_id: str) -> Any:
        return lambda: order.append(call_id)

    agent = agent_with(session_tool(teardown), script("a", "b"))
    result = agent.run_sync("go")
    assert result.outcome == "answered" and order == ["b", "a"]
    assert events_of(agent.store, result.run_id, CLOSED) == [
        {"tool": "session", "tool_call_id": "b", "ms": 1},  # the fixed clock ticks once
        {"tool": "session", "tool_call_id": "a", "ms": 1},
    ]
    found = last_rows(agent, result.run_id)
    # in the last stage's commit, before its marker and before run.close
    assert found[-4:] == [
        ("event", CLOSED),
        ("event", CLOSED),
        ("commit", "break-final"),
        ("run.close", None),
    ]
    assert verified(agent, result.run_id)["outcome"] == "answered"


def test_an_async_teardown_is_awaited_and_a_failing_one_records_its_class() -> None:
    done: list[str] = []

    def teardown(call_id: str) -> Any:
        async def close() -> None:
            await asyncio.sleep(0)
            if call_id == "b":
                raise ConnectionError("vendor said no: token=abc")
            done.append(call_id)

        return close

    agent = agent_with(session_tool(teardown), script("a", "b"))
    result = agent.run_sync("go")
    assert result.answer == "done" and done == ["a"]
    assert events_of(agent.store, result.run_id, FAILED) == [
        {"tool": "session", "tool_call_id": "b", "error_class": "ConnectionError", "ms": 1}
    ]
    assert "token" not in str(list(agent.store.read(result.run_id)))
    verified(agent, result.run_id)


def test_a_teardown_that_hangs_is_abandoned_after_the_timeout() -> None:
    finished: list[str] = []

    async def hang() -> None:
        await asyncio.Event().wait()  # never set
        finished.append("hang")

    agent = agent_with(session_tool(lambda _: hang), script("a"), tool_teardown_timeout_ms=50)
    result = agent.run_sync("go")
    assert finished == []  # the run closed without it
    (failed,) = events_of(agent.store, result.run_id, FAILED)
    assert failed["error_class"] == "ToolTeardownTimeoutError"
    assert not events_of(agent.store, result.run_id, CLOSED)
    assert verified(agent, result.run_id)["outcome"] == "answered"


def test_a_sync_teardown_that_hangs_in_its_thread_is_abandoned_not_waited_for() -> None:
    release, returned = threading.Event(), threading.Event()

    def cleanup() -> None:
        release.wait(30)  # a hang guard: the test releases it
        returned.set()

    agent = agent_with(session_tool(lambda _: cleanup), script("a"), tool_teardown_timeout_ms=50)
    try:
        result = agent.run_sync("go")
        assert not returned.is_set()  # the run closed while the cleanup still blocked
    finally:
        release.set()
    assert events_of(agent.store, result.run_id, FAILED)[0]["error_class"] == (
        "ToolTeardownTimeoutError"
    )
    verified(agent, result.run_id)


def test_teardown_runs_when_the_run_fails_and_the_first_error_surfaces() -> None:
    closed: list[str] = []
    tool = session_tool(lambda call_id: lambda: closed.append(call_id))
    agent = agent_with(tool, [af.reply(tool_calls=[af.tool_call("session", {}, id="a")])])
    with pytest.raises(af.ScriptExhaustedError) as caught:  # the second call has no reply
        agent.run_sync("go")
    assert closed == ["a"]
    run_id = caught.value.run_id
    assert run_id is not None
    close = verified(agent, run_id)
    assert close["outcome"] == "failed" and close["error"]["type"] == "ScriptExhaustedError"
    assert len(events_of(agent.store, run_id, CLOSED)) == 1
    found = last_rows(agent, run_id)
    assert found[-3:] == [("event", CLOSED), ("commit", "call-llm"), ("run.close", None)]


def test_teardown_runs_when_the_turn_stops_early() -> None:
    closed: list[str] = []
    tool = session_tool(lambda call_id: lambda: closed.append(call_id))
    agent = agent_with(tool, script("a", "b"), max_iterations=2, wrap_up_at_max_iterations=False)
    result = agent.run_sync("go")
    assert result.outcome == "stopped_early" and closed == ["a"]
    verified(agent, result.run_id)


def test_cancellation_mid_tool_runs_the_teardown_within_the_timeout_and_the_run_closes() -> None:
    closed: list[str] = []
    inside = asyncio.Event()

    async def block() -> Any:
        inside.set()
        await asyncio.sleep(30)

    def teardown(call_id: str) -> Any:
        async def close() -> None:
            closed.append(call_id)

        return close

    agent = agent_with(
        session_tool(teardown, then=block), script("a"), tool_teardown_timeout_ms=500
    )

    async def scenario() -> None:
        task = asyncio.ensure_future(agent.run("go"))
        await inside.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert closed == ["a"]
    (run_id,) = [info.run_id for info in agent.store.runs()]
    close = verified(agent, run_id)
    assert close["outcome"] == "failed" and close["error"]["type"] == "CancelledError"
    assert events_of(agent.store, run_id, CLOSED) == [
        {"tool": "session", "tool_call_id": "a", "ms": 1}
    ]


def test_cancellation_with_a_hanging_teardown_abandons_it_and_the_run_still_closes() -> None:
    inside = asyncio.Event()

    async def block() -> Any:
        inside.set()
        await asyncio.sleep(30)

    finished: list[str] = []

    async def hang() -> None:
        await asyncio.Event().wait()  # never set
        finished.append("hang")

    agent = agent_with(
        session_tool(lambda _: hang, then=block), script("a"), tool_teardown_timeout_ms=50
    )

    async def scenario() -> None:
        task = asyncio.ensure_future(agent.run("go"))
        await inside.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert finished == []  # the run closed without it

    asyncio.run(scenario())
    (run_id,) = [info.run_id for info in agent.store.runs()]
    assert verified(agent, run_id)["outcome"] == "failed"
    assert events_of(agent.store, run_id, FAILED)[0]["error_class"] == "ToolTeardownTimeoutError"


#: the hang guard of a child process (it exits about a second after it starts; one held for
#: ever by an abandoned cleanup or tool would run into it)
EXIT_GUARD_S = 60


def _exits(code: str) -> list[str]:
    """Run ``code`` in a child interpreter: it must exit on its own, with status 0; its
    printed words."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=EXIT_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_process_whose_sync_teardown_never_returns_exits_within_its_budget() -> None:
    # exit does not wait for a cleanup past its budget (200 ms): without the bound the
    # child would never exit and the guard would fail the test
    assert _exits(
        """
        import threading
        import agentfootprint as af

        def execute(args, ctx):
            ctx.on_teardown(lambda: threading.Event().wait())  # never returns
            return "opened"

        tool = af.define_tool(name="session", description="Open.", execute=execute)
        agent = af.Agent(
            provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("session", {})]), "ok"]),
            model="m",
            tools=[tool],
            tool_teardown_timeout_ms=200,
        )
        result = agent.run_sync("go")
        print(result.answer, af.verify_run(agent.store, result.run_id).outcome.name)
        """
    ) == ["ok", "VALID_UNSIGNED"]


def test_a_process_whose_cancelled_sync_tool_never_returns_exits_within_the_budget() -> None:
    # a sync tool cannot be stopped: once its run is cancelled, exit gives it at most
    # tool_teardown_timeout_ms, then leaves it
    assert _exits(
        """
        import asyncio, threading
        import agentfootprint as af

        started = threading.Event()

        def forever(args):
            started.set()
            threading.Event().wait()  # never returns

        tool = af.define_tool(name="stuck", description="Stuck.", execute=forever)
        agent = af.Agent(
            provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("stuck", {})]), "ok"]),
            model="m",
            tools=[tool],
            tool_teardown_timeout_ms=200,
        )

        async def main():
            task = asyncio.ensure_future(agent.run("go"))
            await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                print("cancelled")

        asyncio.run(main())
        (info,) = agent.store.runs()
        print(af.verify_run(agent.store, info.run_id).close["error"]["type"])
        """
    ) == ["cancelled", "CancelledError"]


def test_teardowns_belong_to_their_run_a_continued_run_runs_none_again() -> None:
    closed: list[str] = []
    calls = iter(["a"])

    async def execute(args: Any, ctx: af.ToolContext) -> str:
        if next(calls, None) is not None:
            ctx.on_teardown(lambda: closed.append(ctx.tool_call_id))
        return "ok"

    tool = af.define_tool(name="session", description="Open a session.", execute=execute)
    agent = agent_with(tool, [*script("a"), *script("b")])
    first = agent.run_sync("go")
    second = agent.run_sync("again", continue_from=first)
    assert closed == ["a"]
    assert not events_of(agent.store, second.run_id, CLOSED)


@pytest.mark.parametrize("value", [0, -1, 1.5, "100", True, None, [5], 86_400_001])
def test_a_value_that_is_not_a_positive_whole_number_of_ms_is_refused(value: Any) -> None:
    with pytest.raises(af.UsageError, match="tool_teardown_timeout_ms") as caught:
        af.Agent(provider=af.MockProvider([]), model="m", tool_teardown_timeout_ms=value)
    assert caught.value.option == "tool_teardown_timeout_ms"


def test_the_default_is_5000_ms() -> None:
    agent = af.Agent(provider=af.MockProvider([]), model="m")
    assert agent.config.options["tool_teardown_timeout_ms"] == 5000


def test_on_teardown_takes_a_function_and_needs_a_run() -> None:
    seen: list[Any] = []

    def execute(args: Any, ctx: af.ToolContext) -> str:
        try:
            ctx.on_teardown("not a function")  # type: ignore[arg-type]
        except af.UsageError as exc:
            seen.append(exc)
        return "ok"

    tool = af.define_tool(name="session", description="Open a session.", execute=execute)
    agent = agent_with(tool, script("a"))
    result = agent.run_sync("go")
    assert len(seen) == 1 and "on_teardown() takes a function" in str(seen[0])
    assert not events_of(agent.store, result.run_id, CLOSED)
    outside = af.ToolContext(
        run_id="r", conversation_id="r", tool_call_id="c", iteration=1, tool="session"
    )
    with pytest.raises(af.UsageError, match="belongs to no run"):
        outside.on_teardown(lambda: None)


def test_without_a_teardown_the_rows_are_the_rows_before_the_feature_existed() -> None:
    def run(*, without: bool, **options: Any) -> list[tuple[str, int, bytes]]:
        agent = af.Agent(
            provider=af.MockProvider(
                [af.reply(tool_calls=[af.tool_call("lookup", {"q": "a"})]), "done"]
            ),
            model="m",
            tools=[lookup()],
            ports=fixed_ports(),
            **options,
        )
        if without:
            agent.seam = Seam.build(
                agent.config.options, [f for f in all_features() if f is not tool_teardown.FEATURE]
            )
        result = agent.run_sync("go")
        return rows(agent.store, result.run_id)

    before = run(without=True)
    assert run(without=False) == before
    assert without_open(run(without=False, tool_teardown_timeout_ms=100)) == without_open(before)


def test_a_run_without_teardowns_replays() -> None:
    agent = agent_with(lookup(), [af.reply(tool_calls=[af.tool_call("lookup", {})]), "ok"])
    result = agent.run_sync("go")
    replays(agent, result)


def test_a_run_whose_tools_tore_down_verifies_and_replays() -> None:
    closed: list[str] = []
    tool = session_tool(lambda call_id: lambda: closed.append(call_id))
    agent = agent_with(tool, script("a", "b"))
    result = agent.run_sync("go")
    verified(agent, result.run_id)
    replayed = replays(agent, result)
    assert closed == ["b", "a"]  # the replay ran no tool, so no teardown either
    assert replayed.result.answer == "done"


def test_a_run_failing_between_stages_records_its_teardowns_in_a_run_end_commit() -> None:
    closed: list[str] = []
    tool = session_tool(lambda call_id: lambda: closed.append(call_id))
    agent = agent_with(tool, script("a"))
    agent.seam = dataclasses.replace(agent.seam, stage_budget=7)  # out after tool-calls
    with pytest.raises(af.RunError, match="iteration budget") as caught:
        agent.run_sync("go")
    run_id = caught.value.run_id
    assert run_id is not None and closed == ["a"]
    assert last_rows(agent, run_id)[-4:] == [
        ("commit", "tool-calls"),
        ("event", CLOSED),
        ("commit", "run-end"),
        ("run.close", None),
    ]
    close = verified(agent, run_id)
    assert close["outcome"] == "failed" and "iteration budget" in close["error"]["message"]
