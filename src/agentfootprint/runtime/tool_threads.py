"""The worker threads that run sync user code (tools, cleanups, checkers) off the event loop.

The hand-off is asyncio's own primitive, ``loop.call_soon_threadsafe``: the work goes on one
``SimpleQueue``, and the worker settles the awaiting asyncio future from the loop. The
standard library's higher-level way, a ``concurrent.futures.Future`` chained to the asyncio
future by ``asyncio.wrap_future`` (what ``loop.run_in_executor`` does), was tried and measured
(``bench/stdlib.py --only threads``, N=800, 8 ABBA pairs in one process, 2 vCPU): one hand-off
of a sync function that returns at once costs 75.5 µs of CPU this way and 118.2 µs that way
(1.57x per call: a ``Condition`` per future, each state change copied across), and recording
the benchmark conversation (one sync tool call per iteration) 1.097x (0.84-1.31) end to end,
over the 5% the library's own hand-off must save to stay (bench/README.md, "Issue 25: the
standard library"). What a call gets is the same either way: it runs in a worker thread,
never on the loop; tools of one reply run concurrently, up to ``MAX_WORKERS`` threads; the
caller's context variables are the function's; an exception, ``BaseException`` included,
reaches the awaiting task.

Work off the loop is what lets a run be cancelled while user code blocks (``wait_for``,
Ctrl-C under ``run_sync``): the awaiting task stops waiting at once. A thread cannot be
stopped, so such work is *given up*: work given up before a worker took it never starts,
and its outcome is dropped.

Threads start when no worker is idle (as ``ThreadPoolExecutor`` does) and are daemon
threads. At interpreter exit :func:`_shutdown` waits for them, as ``ThreadPoolExecutor``
joins its workers, so a tool whose run still awaits it is never cut off mid-way; but work
given up is waited for only within its bound, then the process exits without it:

* work with a ``budget`` (a cleanup: ``tool_teardown_timeout_ms``) until the budget, counted
  from when it was handed over, is spent;
* work whose awaiting task was cancelled (a sync tool or permission checker of a cancelled
  run) at most ``grace`` seconds more, counted from the exit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import inspect
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_GRACE_S", "MAX_WORKERS", "call_user_code", "run_in_thread"]

#: as ThreadPoolExecutor's default: enough for I/O-bound tools of concurrent runs
MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)
#: how long exit waits for work given up by cancellation, unless the caller says (seconds:
#: ``tool_teardown_timeout_ms``'s default)
DEFAULT_GRACE_S = 5.0
#: how often exit looks again at a worker whose work may be given up meanwhile (seconds)
_EXIT_POLL_S = 0.05


class _Job:
    """One call handed to a worker: where its outcome goes, and its bound at exit."""

    __slots__ = ("call", "deadline", "future", "grace", "loop")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        call: Callable[[], Any],
        deadline: float | None,
        grace: float,
    ) -> None:
        self.loop, self.future, self.call = loop, future, call
        self.deadline = deadline  #: time.monotonic() past which it is given up (a budget)
        self.grace = grace

    def given_up(self) -> bool:
        """The awaiting task stopped waiting (a read of the future's state: atomic)."""
        return self.future.cancelled()

    def exit_deadline(self, exiting: float) -> float | None:
        """Until when exit waits for it (None: until it returns)."""
        if self.deadline is not None:
            return self.deadline
        if self.given_up():
            return exiting + self.grace
        return None


_jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
_idle = threading.Semaphore(0)
_lock = threading.Lock()
_threads: list[threading.Thread] = []
#: the job each worker runs now, by thread ident (what exit reads to bound its wait)
_running: dict[int, _Job] = {}


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the loop: hand the outcome to the task awaiting it (unless it gave up)."""
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _work() -> None:
    me = threading.get_ident()
    while True:
        job = _jobs.get()
        if job is None:
            return
        if not job.given_up():  # given up before it started: it never starts
            result, error = None, None
            _running[me] = job
            try:
                result = job.call()
            except BaseException as exc:  # handed to the awaiting task, as run_in_executor does
                error = exc
            finally:
                _running.pop(me, None)
            with contextlib.suppress(RuntimeError):  # a loop closed meanwhile: nobody awaits it
                job.loop.call_soon_threadsafe(_settle, job.future, result, error)
            del result, error
        del job  # hold nothing while idle
        _idle.release()


def _start_worker_if_none_idle() -> None:
    if _idle.acquire(blocking=False):
        return
    with _lock:
        if len(_threads) < MAX_WORKERS:
            thread = threading.Thread(
                target=_work, name=f"agentfootprint-tool_{len(_threads)}", daemon=True
            )
            thread.start()
            _threads.append(thread)


def run_in_thread(
    fn: Callable[..., Any],
    *args: Any,
    budget: float | None = None,
    grace: float = DEFAULT_GRACE_S,
) -> asyncio.Future[Any]:
    """Run ``fn(*args)`` in a worker thread with the caller's context; await the result.

    ``budget`` (seconds): past it the caller gives the work up (a cleanup's timeout), so
    exit waits for it no longer. ``grace`` (seconds): how long exit still waits for it once
    the awaiting task was cancelled."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()
    deadline = None if budget is None else time.monotonic() + budget
    _start_worker_if_none_idle()
    _jobs.put(_Job(loop, future, lambda: context.run(fn, *args), deadline, grace))
    return future


async def call_user_code(
    fn: Callable[..., Any],
    *args: Any,
    budget: float | None = None,
    grace: float = DEFAULT_GRACE_S,
) -> Any:
    """``fn(*args)`` for user code the run awaits (a tool, a checker, a classifier, a
    cleanup): a coroutine function is awaited on the loop; anything else runs in a worker
    thread (:func:`run_in_thread`, with its ``budget`` and ``grace``), and an awaitable it
    returns is awaited on the loop."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await run_in_thread(fn, *args, budget=budget, grace=grace)
    if inspect.isawaitable(result):
        return await result
    return result


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: start from nothing (the parent's
    idle count would send jobs to workers that do not exist)."""
    global _jobs, _idle, _lock, _threads, _running
    _jobs, _idle, _lock, _threads, _running = (
        queue.SimpleQueue(),
        threading.Semaphore(0),
        threading.Lock(),
        [],
        {},
    )


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _wait_for(thread: threading.Thread, exiting: float) -> None:
    """Join ``thread`` while it runs work exit waits for; leave it once all it runs is
    work given up whose bound is spent (a daemon thread does not hold the exit)."""
    while thread.is_alive():
        job = _running.get(thread.ident or 0)
        deadline = None if job is None else job.exit_deadline(exiting)
        if deadline is None:  # awaited work (or between jobs): look again shortly
            thread.join(_EXIT_POLL_S)
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            return
        thread.join(min(left, _EXIT_POLL_S))


@atexit.register
def _shutdown() -> None:
    """Let running work finish before the interpreter goes (daemon threads are not joined
    otherwise), work given up only within its bound."""
    exiting = time.monotonic()
    with _lock:
        threads = list(_threads)
    for _ in threads:
        _jobs.put(None)
    for thread in threads:
        _wait_for(thread, exiting)
