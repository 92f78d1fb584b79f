"""``run_sync``'s loop (runtime/sync_loop.py: an ``asyncio.Runner``): one per thread, kept
between calls, and each call as ``asyncio.run`` would make it: its own copy of the context,
Ctrl-C cancelling the run (recorded as failed) and raising KeyboardInterrupt, no task of one
call left for the next, a loop of its own in every thread and in a forked child, closed when
its thread ends; the signal wakeup fd the caller had is put back."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import multiprocessing
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.runtime.sync_loop import run_sync

SEEN = contextvars.ContextVar("SEEN", default="unset")


def _agent(tool: af.Tool, turns: int = 1, store: Any = None) -> af.Agent:
    script: list[Any] = []
    for turn in range(turns):
        script += [af.reply(tool_calls=[af.tool_call(tool.name, {"n": turn})]), f"done {turn}"]
    return af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=store)


def _loop_probe(loops: list[asyncio.AbstractEventLoop]) -> af.Tool:
    async def probe(args: dict[str, Any]) -> str:
        loops.append(asyncio.get_running_loop())
        return "ok"

    return af.define_tool(name="probe", description="Note the loop.", execute=probe)


def test_calls_on_one_thread_share_its_loop_and_each_run_verifies(tmp_path: Any) -> None:
    loops: list[asyncio.AbstractEventLoop] = []
    store = af.SqliteStore(tmp_path / "log.db")
    with _agent(_loop_probe(loops), turns=2, store=store) as agent:
        first = agent.run_sync("one")
        second = agent.run_sync("two", continue_from=first)
    assert [first.answer, second.answer] == ["done 0", "done 1"]
    assert len(loops) == 2 and loops[0] is loops[1] and not loops[0].is_closed()
    for run in (first, second):
        assert af.Verifier(store).verify(run.run_id).outcome.value == "VALID_UNSIGNED"


def test_each_call_runs_in_a_copy_of_the_callers_context() -> None:
    async def mark(args: dict[str, Any]) -> str:
        before = SEEN.get()
        SEEN.set(f"set by turn {args['n']}")
        return before

    tool = af.define_tool(name="mark", description="Set a context variable.", execute=mark)
    SEEN.set("caller")
    with _agent(tool, turns=2) as agent:
        first = agent.run_sync("one")
        second = agent.run_sync("two", continue_from=first)
    tool_results = [m["content"] for m in second.state["history"] if m.get("role") == "tool"]
    assert tool_results == ["caller", "caller"]  # neither saw the other's value
    assert SEEN.get() == "caller"


def test_a_task_left_behind_is_cancelled_before_the_call_returns() -> None:
    outcomes: list[str] = []

    async def lingerer() -> None:
        try:
            await asyncio.sleep(3600)
            outcomes.append("finished")
        except asyncio.CancelledError:
            outcomes.append("cancelled")
            raise

    kept: list[asyncio.Task[None]] = []

    async def spawn(args: dict[str, Any]) -> str:
        kept.append(asyncio.get_running_loop().create_task(lingerer()))
        await asyncio.sleep(0)  # let it start
        return "spawned"

    tool = af.define_tool(name="spawn", description="Leave a task behind.", execute=spawn)
    with _agent(tool) as agent:
        result = agent.run_sync("go")
    assert result.answer == "done 0"
    assert outcomes == ["cancelled"] and kept[0].cancelled()


def test_a_task_left_behind_that_fails_goes_to_the_loops_exception_handler() -> None:
    reported: list[dict[str, Any]] = []
    loops: list[asyncio.AbstractEventLoop] = []
    kept: list[asyncio.Task[None]] = []

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise ValueError("refused to stop") from None

    async def spawn(args: dict[str, Any]) -> str:
        loop = asyncio.get_running_loop()
        loops.append(loop)
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        kept.append(loop.create_task(stubborn()))
        await asyncio.sleep(0)
        return "spawned"

    tool = af.define_tool(name="spawn", description="Leave a failing task.", execute=spawn)
    try:
        with _agent(tool) as agent:
            assert agent.run_sync("go").answer == "done 0"
    finally:
        loops[0].set_exception_handler(None)
    assert len(reported) == 1
    assert isinstance(reported[0]["exception"], ValueError)
    assert "left by run_sync" in reported[0]["message"]


def test_threads_get_loops_of_their_own_closed_when_the_thread_ends() -> None:
    loops: list[asyncio.AbstractEventLoop] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with _agent(_loop_probe(loops)) as agent:
                agent.run_sync("go")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert len({id(loop) for loop in loops}) == 3
    gc.collect()
    assert all(loop.is_closed() for loop in loops)


def test_ctrl_c_cancels_the_run_records_it_and_raises_keyboard_interrupt(tmp_path: Any) -> None:
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        pytest.skip("signals reach the main thread only")

    async def interrupted(args: dict[str, Any]) -> str:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(30)
        return "never"

    tool = af.define_tool(name="wait", description="Wait to be interrupted.", execute=interrupted)
    store = af.SqliteStore(tmp_path / "log.db")
    before = signal.getsignal(signal.SIGINT)
    with _agent(tool, store=store) as agent, pytest.raises(KeyboardInterrupt):
        agent.run_sync("go")
    assert signal.getsignal(signal.SIGINT) is before  # the handler was put back
    (run_id,) = store.run_ids()
    close = [e for e in store.read(run_id) if e.type == "run.close"]
    assert len(close) == 1 and b'"outcome":"failed"' in close[0].body
    assert b"CancelledError" in close[0].body
    assert af.Verifier(store).verify(run_id).outcome.value == "VALID_UNSIGNED"
    with _agent(_loop_probe([])) as agent:  # the thread's loop goes on serving
        assert agent.run_sync("again").answer == "done 0"


def test_the_wakeup_fd_the_caller_set_is_put_back() -> None:
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        pytest.skip("the wakeup fd belongs to the main thread")
    seen: list[int] = []

    async def during() -> None:
        seen.append(signal.set_wakeup_fd(-1))  # the call's own (then none, until it ends)

    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno())
    try:
        run_sync(during())
        assert signal.set_wakeup_fd(writer.fileno()) == writer.fileno()
    finally:
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
    assert seen and seen[0] not in (-1, writer.fileno())


def test_a_handler_the_caller_installed_is_left_alone() -> None:
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        pytest.skip("signals reach the main thread only")
    calls: list[int] = []

    def own(signum: int, frame: Any) -> None:
        calls.append(signum)

    async def interrupted(args: dict[str, Any]) -> str:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(0.05)
        return "went on"

    tool = af.define_tool(name="wait", description="Be interrupted.", execute=interrupted)
    previous = signal.signal(signal.SIGINT, own)
    try:
        with _agent(tool) as agent:
            result = agent.run_sync("go")
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.answer == "done 0" and calls == [signal.SIGINT]


#: a parent that records a run, forks a child that records one, then records another: when the
#: child closed the epoll loop it inherited, that unregistered the parent's self-pipe from their
#: shared epoll set and the parent's third run never saw its tool's result (``policy``: the
#: loops are epoll loops, kept whole by the child keeping what it inherited)
FORKING = """
import asyncio, multiprocessing, sys
import agentfootprint as af

def agent(store, n):
    tool = af.define_tool(name="echo", description="Echo.", execute=lambda a: f"echo {a['n']}")
    script = [af.reply(tool_calls=[af.tool_call("echo", {"n": n})]), f"done {n}"]
    return af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=store)

def loop_id():
    async def running():
        return id(asyncio.get_running_loop())
    from agentfootprint.runtime.sync_loop import run_sync
    return run_sync(running())

def child(path, conn):
    with agent(af.SqliteStore(path), 2) as a:
        conn.send((a.run_sync("in the child").answer, loop_id()))

if __name__ == "__main__":
    path = sys.argv[1]
    if sys.argv[2] == "policy":  # a policy of the caller's own: its loops are epoll loops
        asyncio.set_event_loop_policy(type("Own", (asyncio.DefaultEventLoopPolicy,), {})())
    with agent(af.SqliteStore(path), 1) as a:
        print(a.run_sync("before the fork").answer, flush=True)
    parent_loop = loop_id()
    context = multiprocessing.get_context("fork")
    here, there = context.Pipe()
    process = context.Process(target=child, args=(path, there))
    process.start()
    answer, child_loop = here.recv()
    process.join()
    print(answer, process.exitcode, child_loop != parent_loop, flush=True)
    with agent(af.SqliteStore(path), 3) as a:
        print(a.run_sync("after the fork").answer, loop_id() == parent_loop, flush=True)
"""


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
@pytest.mark.parametrize("loops", ["poll", "policy"])
def test_a_forked_child_makes_its_own_loop_and_the_parents_goes_on_serving(
    tmp_path: Any, loops: str
) -> None:
    if loops == "policy" and sys.version_info >= (3, 14):  # pragma: no cover
        pytest.skip("event-loop policies are deprecated")
    path = tmp_path / "log.db"
    done = subprocess.run(
        [sys.executable, "-c", FORKING, str(path), loops],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["done 1", "done 2 0 True", "done 3 True"]
    store = af.SqliteStore(path, readonly=True)
    outcomes = [result.outcome.value for _, result in af.Verifier(store).verify_all()]
    assert outcomes == ["VALID_UNSIGNED"] * 3


def test_run_sync_returns_the_coroutines_value_and_raises_its_error() -> None:
    async def value() -> int:
        return 41 + 1

    async def fail() -> None:
        raise LookupError("no such thing")

    assert run_sync(value()) == 42
    with pytest.raises(LookupError, match="no such thing"):
        run_sync(fail())


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="event-loop policies are deprecated")
def test_a_policy_of_the_callers_own_makes_the_loop_and_the_default_makes_a_poll_loop() -> None:
    class OwnLoop(asyncio.SelectorEventLoop):
        pass

    class OwnPolicy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            return OwnLoop()

    seen: dict[str, tuple[type, type]] = {}

    def in_a_thread(name: str) -> None:
        async def probe(args: dict[str, Any]) -> str:
            loop: Any = asyncio.get_running_loop()
            seen[name] = (type(loop), type(loop._selector))  # closed with its thread, after
            return "ok"

        tool = af.define_tool(name="probe", description="Note the loop.", execute=probe)
        with _agent(tool) as agent:
            agent.run_sync("go")

    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(OwnPolicy())
    try:
        thread = threading.Thread(target=in_a_thread, args=("own",))
        thread.start()
        thread.join(30)
    finally:
        asyncio.set_event_loop_policy(previous)
    thread = threading.Thread(target=in_a_thread, args=("default",))
    thread.start()
    thread.join(30)
    assert seen["own"][0] is OwnLoop
    assert issubclass(seen["default"][0], asyncio.SelectorEventLoop)
    assert seen["default"][1] is selectors.PollSelector
