"""The event loop of ``run_sync``: one ``asyncio.Runner`` per thread, kept between calls.

``asyncio.run`` builds a loop for every call and tears it down after (a selector, the
self-pipe, the loop's close): about 100 µs a call. :func:`run_sync` keeps one
``asyncio.Runner`` per thread instead, and does for each call what ``asyncio.run`` does:

- the coroutine runs as a task in a copy of the caller's context variables (passed to
  ``Runner.run``: the runner's own context would carry one call's values into the next);
- on the main thread, a first Ctrl-C cancels that task (the run records its cancellation)
  and the call raises ``KeyboardInterrupt``; a second one raises at once (``Runner.run``);
- tasks the call left behind are cancelled and awaited before the call returns, so no task
  of one call runs during the next (``asyncio.run`` does it when it closes its runner).

One thing ``Runner.run`` leaves out: Ctrl-C taken by a worker thread (a sync tool or check
blocked in user code) only flags the main thread, asleep in the selector, so nothing would run
the handler until the tool returns. While a call runs on the main thread, a socket pair the
loop reads is the signal wakeup fd (``signal.set_wakeup_fd``): the selector wakes and the
handler (``Runner.run``'s, or the caller's own) runs at once (asyncio's own
``add_signal_handler`` does this with its self-pipe).

What the runner costs beyond a bare loop is mostly ``Runner.run``'s handler: ``signal``
converts each handler it is given or returns to its enum, and for a ``functools.partial``
holding the task that conversion formats the task's repr; about 80 µs of CPU a call on
2 vCPU under load, some 1.2% of a recorded iteration at four tool calls per call
(bench/README.md, "Issue 25: the standard library").

Unlike ``asyncio.run``, the loop does not end with the call: an async generator left open is
closed when it is garbage-collected, on this loop, and a callback left scheduled with
``call_later`` may run in a later call of the same thread. The runner closes when its thread
ends, or at interpreter exit.

A loop that outlives a call is inherited by every process forked meanwhile (``multiprocessing``'s
default start method on Linux), and an epoll instance is one kernel object shared by parent
and child: the child closing its copy of the loop would unregister the parent's descriptors
from the parent's own epoll set, and the parent's loop would no longer wake when a tool thread
hands back its result. So the loop is built on ``selectors.PollSelector``, whose registrations
live in the process's memory, and a child never runs, closes or lets go of a runner it
inherited (it makes its own), which keeps the parent's loop whole even when it is an epoll
loop: with a policy other than asyncio's default (uvloop, say) the loop is the policy's
(before Python 3.14, which deprecates policies).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import selectors
import signal
import socket
import sys
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["loop_running", "run_sync"]

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    poll = getattr(selectors, "PollSelector", None)
    if poll is None or _policy_set():
        return asyncio.new_event_loop()
    return asyncio.SelectorEventLoop(poll())


def _policy_set() -> bool:
    """The process chose an event-loop policy of its own (uvloop's, say). Python 3.14
    deprecates policies (asking for one warns): there the loop is always built here."""
    if sys.version_info >= (3, 14):
        return False
    return type(asyncio.get_event_loop_policy()) is not asyncio.DefaultEventLoopPolicy


class _ThreadRunner:
    """A thread's runner, and the socket pair that wakes its loop on a signal (made on the
    first call from the main thread). Closed when the thread's locals let go of it."""

    __slots__ = ("__weakref__", "pid", "runner", "wakeup")

    def __init__(self) -> None:
        self.runner = asyncio.Runner(loop_factory=_new_loop)
        self.runner.get_loop()  # the loop now: what the finalizer closes is made already
        self.pid = os.getpid()
        self.wakeup: list[socket.socket] = []  # reader, writer
        weakref.finalize(self, _close, self.runner, self.pid, self.wakeup)

    def wakeup_fd(self) -> int:
        """The write end of the pair the loop reads (made, and registered, on first use)."""
        if not self.wakeup:
            reader, writer = socket.socketpair()
            reader.setblocking(False)
            writer.setblocking(False)
            self.runner.get_loop().add_reader(reader.fileno(), _drain, reader)
            self.wakeup += (reader, writer)
        return self.wakeup[1].fileno()


def _drain(reader: socket.socket) -> None:
    try:
        while reader.recv(4096):
            pass
    except OSError:  # drained (BlockingIOError), or closed
        pass


#: runners a forked child inherited: kept, never closed or collected there (closing an epoll
#: loop, a policy's, would unregister its descriptors from a set the parent still uses)
_inherited: list[asyncio.Runner] = []


def _close(runner: asyncio.Runner, pid: int, wakeup: list[socket.socket]) -> None:
    if os.getpid() != pid:
        _inherited.append(runner)
        return
    loop = runner.get_loop()
    if loop.is_running() or loop.is_closed():  # pragma: no cover - collected mid-call
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop runs here: the runner's own close, as asyncio.run's
        runner.close()
    else:  # pragma: no cover - collected while another loop runs on this thread
        loop.close()
    for sock in wakeup:
        sock.close()


_local = threading.local()


def _thread_runner() -> _ThreadRunner:
    holder: _ThreadRunner | None = getattr(_local, "holder", None)
    if holder is None or holder.pid != os.getpid() or holder.runner.get_loop().is_closed():
        holder = _local.holder = _ThreadRunner()  # an inherited one goes to _inherited
    return holder


def loop_running() -> bool:
    """An event loop runs on this thread. Asked apart from the work it decides, so that no
    traceback of that work chains asyncio's "no running event loop"."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on this thread's runner (made on first use) and return its
    result, as ``asyncio.run(coro)`` would. The caller checks that no loop is running."""
    holder = _thread_runner()
    wakeup: int | None = None  # the wakeup fd before ours
    if threading.current_thread() is threading.main_thread():  # where Python runs handlers
        wakeup = signal.set_wakeup_fd(holder.wakeup_fd(), warn_on_full_buffer=False)
    try:
        return holder.runner.run(coro, context=contextvars.copy_context())
    finally:
        if wakeup is not None:
            signal.set_wakeup_fd(wakeup)
        _finish(holder.runner.get_loop())


def _finish(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does with the tasks left behind before it closes its loop: cancel
    them and await them (an exception one raised goes to the loop's exception handler)."""
    left = asyncio.all_tasks(loop)
    if left:
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        for task in left:
            if task.cancelled() or task.exception() is None:
                continue
            loop.call_exception_handler(
                {
                    "message": "unhandled exception of a task left by run_sync()",
                    "exception": task.exception(),
                    "task": task,
                }
            )
