"""The worker threads of sync tools (runtime/tool_threads.py): a tool never runs on the event
loop's thread, the tools of concurrent runs run at the same time, the caller's context variables
reach the tool, every exception reaches the awaiting task, a task that stops waiting leaves
the worker unharmed, and a forked child starts its own workers."""

from __future__ import annotations

import asyncio
import contextvars
import multiprocessing
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.runtime.tool_threads import MAX_WORKERS, run_in_thread

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def test_a_tool_runs_off_the_loop_thread_with_the_callers_context() -> None:
    async def main() -> tuple[int, str, int]:
        REQUEST.set("r-1")
        return await run_in_thread(lambda: (threading.get_ident(), REQUEST.get(), 7))

    ident, seen, value = asyncio.run(main())
    assert ident != threading.get_ident() and seen == "r-1" and value == 7


def test_the_tools_of_concurrent_runs_run_at_the_same_time() -> None:
    barrier = threading.Barrier(3, timeout=10)  # passes only if three run at once

    def tool(args: dict[str, Any]) -> str:
        barrier.wait()
        return f"ok {args['n']}"

    wait = af.define_tool(name="wait", description="Wait for the others.", execute=tool)

    async def one(n: int) -> af.RunResult:
        script = [af.reply(tool_calls=[af.tool_call("wait", {"n": n})]), f"done {n}"]
        with af.Agent(provider=af.MockProvider(script), model="m", tools=[wait]) as agent:
            return await agent.run(f"go {n}")

    async def main() -> list[af.RunResult]:
        return list(await asyncio.gather(*(one(n) for n in range(3))))

    results = asyncio.run(main())
    assert [r.answer for r in results] == ["done 0", "done 1", "done 2"]
    for n, result in enumerate(results):
        assert [m["content"] for m in result.state["history"] if m.get("role") == "tool"] == [
            f"ok {n}"
        ]


@pytest.mark.parametrize("error", [ValueError("bad"), KeyboardInterrupt(), SystemExit(3)])
def test_every_exception_reaches_the_awaiting_task(error: BaseException) -> None:
    def fail() -> None:
        raise error

    async def main() -> None:
        await run_in_thread(fail)

    with pytest.raises(type(error)):
        asyncio.run(main())
    assert asyncio.run(_value()) == 1  # the worker that raised still works


async def _value() -> int:
    return int(await run_in_thread(lambda: 1))


def _every_worker_at_once() -> None:
    """Run MAX_WORKERS jobs that pass only together: every worker is alive and free (each
    finished what it ran before), or the barrier breaks (its timeout is a hang guard)."""
    barrier = threading.Barrier(MAX_WORKERS, timeout=30)

    async def main() -> None:
        await asyncio.gather(*(run_in_thread(barrier.wait) for _ in range(MAX_WORKERS)))

    asyncio.run(main())


def test_a_task_that_stops_waiting_leaves_the_worker_unharmed() -> None:
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(30)
        return "late"

    async def main() -> None:
        task = asyncio.ensure_future(run_in_thread(slow))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())  # the loop is closed while the tool still runs
    release.set()
    # its outcome finds the loop closed: dropped, nothing raised, and its worker (no new
    # one may start beyond MAX_WORKERS) is free again
    _every_worker_at_once()
    assert asyncio.run(_value()) == 1


def test_work_given_up_before_a_worker_took_it_never_starts() -> None:
    release = threading.Event()
    ran: list[str] = []

    async def main() -> None:
        busy = [run_in_thread(release.wait, 30) for _ in range(MAX_WORKERS)]
        queued = asyncio.ensure_future(run_in_thread(ran.append, "ran"))
        await asyncio.sleep(0)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        await asyncio.gather(*busy)

    asyncio.run(main())
    _every_worker_at_once()  # every worker went past the queued job: skipped, or run
    assert ran == []


def test_more_tools_than_workers_wait_their_turn() -> None:
    async def main() -> list[int]:
        return list(
            await asyncio.gather(*(run_in_thread(lambda i=i: i) for i in range(MAX_WORKERS * 3)))
        )

    assert asyncio.run(main()) == list(range(MAX_WORKERS * 3))


def _in_child(out: Any) -> None:
    out.put(asyncio.run(_value()))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
def test_a_forked_child_starts_its_own_workers() -> None:
    assert asyncio.run(_value()) == 1  # the parent has idle workers
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_in_child, args=(out,))
    child.start()
    child.join(30)
    assert child.exitcode == 0 and out.get(timeout=5) == 1


# -- interpreter exit ------------------------------------------------------------------------

#: the hang guard of a child process: far past every bound below (it exits in about one
#: second; a child held by a worker for ever would run into it)
EXIT_GUARD_S = 60


def _exits(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child interpreter; it must exit on its own, with status 0."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=EXIT_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_exit_does_not_wait_for_work_past_its_budget() -> None:
    done = _exits(
        """
        import asyncio, threading
        from agentfootprint.runtime.tool_threads import run_in_thread

        async def main():
            work = run_in_thread(threading.Event().wait, budget=0.2)  # never returns
            done, _ = await asyncio.wait({work}, timeout=0.2)
            print("given up" if not done else "returned")

        loop = asyncio.new_event_loop()
        loop.run_until_complete(main())  # the loop stays open: the work is still awaited
        """
    )
    assert done.stdout.strip() == "given up"


def test_exit_waits_for_cancelled_work_at_most_its_grace() -> None:
    done = _exits(
        """
        import asyncio, threading
        from agentfootprint.runtime.tool_threads import run_in_thread

        started = threading.Event()

        def forever():
            started.set()
            threading.Event().wait()

        async def main():
            task = asyncio.ensure_future(run_in_thread(forever, grace=0.2))
            await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                print("cancelled")

        asyncio.run(main())
        """
    )
    assert done.stdout.strip() == "cancelled"


def test_exit_lets_work_still_awaited_finish() -> None:
    done = _exits(
        """
        import asyncio, threading, time
        from agentfootprint.runtime.tool_threads import run_in_thread

        started = threading.Event()

        def tool():
            started.set()
            time.sleep(0.3)  # still running when the main thread exits
            print("finished", flush=True)

        async def main():
            await run_in_thread(tool)

        def serve():  # a loop of its own that still awaits the tool at exit
            asyncio.new_event_loop().run_until_complete(main())

        threading.Thread(target=serve, daemon=True).start()
        started.wait(30)
        print("exiting", flush=True)
        """
    )
    assert done.stdout.split() == ["exiting", "finished"]
