"""The worker threads that run sync tools, off the event loop, with one hop each way.

``loop.run_in_executor(ThreadPoolExecutor)`` costs about 120 µs per call on a 2 vCPU
machine: a ``concurrent.futures`` work item and future, then an asyncio future chained to
it, each state change copied across. A tool call that returns at once pays that on every
iteration. :func:`run_in_thread` keeps what matters (the tool runs in a worker thread, never
on the loop; tools of one reply run concurrently, up to ``MAX_WORKERS`` threads; the
caller's context variables are the tool's; an exception, ``BaseException`` included, reaches
the awaiting task) and drops the rest: the work goes on one ``SimpleQueue``, and the worker
sets the awaiting asyncio future through ``call_soon_threadsafe``. It is about 70 µs.

Threads start when no worker is idle (as ``ThreadPoolExecutor`` does) and are daemon
threads: at interpreter exit :func:`_shutdown` lets the running tools finish, as
``ThreadPoolExecutor`` joins its workers, so a tool is never cut off mid-way by the exit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_WORKERS", "run_in_thread"]

#: as ThreadPoolExecutor's default: enough for I/O-bound tools of concurrent runs
MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)

_Job = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any]]

_jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
_idle = threading.Semaphore(0)
_lock = threading.Lock()
_threads: list[threading.Thread] = []


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the loop: hand the tool's outcome to the task awaiting it (unless it gave up)."""
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _work() -> None:
    while True:
        job = _jobs.get()
        if job is None:
            return
        loop, future, fn = job
        result, error = None, None
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting task, as run_in_executor does
            error = exc
        with contextlib.suppress(RuntimeError):  # a loop closed meanwhile: nobody awaits it
            loop.call_soon_threadsafe(_settle, future, result, error)
        del job, loop, future, fn, result, error  # hold nothing while idle
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


def run_in_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """Run ``fn(*args)`` in a worker thread with the caller's context; await the result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()
    _start_worker_if_none_idle()
    _jobs.put((loop, future, lambda: context.run(fn, *args)))
    return future


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: start from nothing (the parent's
    idle count would send jobs to workers that do not exist)."""
    global _jobs, _idle, _lock, _threads
    _jobs, _idle, _lock, _threads = (
        queue.SimpleQueue(),
        threading.Semaphore(0),
        threading.Lock(),
        [],
    )


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _shutdown() -> None:
    """Let running tools finish before the interpreter goes (daemon threads are not
    joined otherwise)."""
    with _lock:
        threads = list(_threads)
    for _ in threads:
        _jobs.put(None)
    for thread in threads:
        thread.join()
