"""The event loop of ``run_sync``: one per thread, kept from one call to the next.

``asyncio.run`` builds a loop for every call and tears it down after: a selector, the
self-pipe (a socket pair), the Ctrl-C handler put in and taken out through ``signal``'s enum
wrappers, the loop's close: 121 µs per call against 17 on a kept loop (2 vCPU), about 2.5% of
a recorded tool-call iteration at four iterations per run (bench/README.md, "Flushes and
durability"). :func:`run_sync` keeps one loop per thread instead, and otherwise does what
``asyncio.run`` does for each call:

- the coroutine runs as a task in a copy of the caller's context variables, so what it sets
  is not seen by the caller or by the next call;
- on the main thread, a first Ctrl-C cancels that task (the run records its cancellation)
  and the call raises ``KeyboardInterrupt``; a second one raises at once;
- tasks the call left behind are cancelled and awaited before the call returns, so no task
  of one call runs during the next.

Unlike ``asyncio.run``, the loop does not end with the call: an async generator left open is
closed when it is garbage-collected, on this loop (``shutdown_asyncgens`` would stop the loop
from running any later one), and a callback left scheduled with ``call_later`` may run in a
later call of the same thread.

The loop closes when its thread ends, or at interpreter exit.

A loop that outlives a call is inherited by every process forked meanwhile (``multiprocessing``'s
default start method on Linux), and an epoll instance is one kernel object shared by parent
and child: the child closing its copy of the loop (at its exit, or when it is collected) would
unregister the parent's self-pipe from the parent's own epoll set, and the parent's loop would
no longer wake when a tool thread hands back its result. So the loop is built on
``selectors.PollSelector``, whose registrations live in the process's memory (poll costs no
more than epoll for the few descriptors one run watches), and a child never runs, closes or
lets go of a loop it inherited (it makes its own), which keeps the parent's loop whole even
when it is an epoll loop: with a policy other than asyncio's default (uvloop, say) the loop is
the policy's (before Python 3.14, which deprecates policies).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import selectors
import signal
import sys
import threading
import weakref
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

try:  # signal's own functions, without the enum conversion of signal.getsignal/signal.signal
    # (a handler that is a function goes through a ValueError there: most of their cost)
    import _signal  # type: ignore[import-not-found]

    _getsignal: Any = _signal.getsignal
    _setsignal: Any = _signal.signal
except ImportError:  # pragma: no cover - an interpreter without CPython's _signal
    _getsignal, _setsignal = signal.getsignal, signal.signal

__all__ = ["run_sync"]

T = TypeVar("T")


class _ThreadLoop:
    """A thread's loop; it is closed when the thread's locals let go of this holder."""

    __slots__ = ("__weakref__", "loop", "pid")

    def __init__(self) -> None:
        self.loop = _new_loop()
        self.pid = os.getpid()
        weakref.finalize(self, _close, self.loop, self.pid)


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


#: loops a forked child inherited: kept, never closed or collected there (closing an epoll
#: loop, a policy's, would unregister its descriptors from a set the parent still uses)
_inherited: list[asyncio.AbstractEventLoop] = []


def _close(loop: asyncio.AbstractEventLoop, pid: int) -> None:
    if os.getpid() != pid:
        _inherited.append(loop)
    elif not loop.is_running() and not loop.is_closed():
        loop.close()


_local = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    holder: _ThreadLoop | None = getattr(_local, "holder", None)
    if holder is None or holder.pid != os.getpid() or holder.loop.is_closed():
        holder = _local.holder = _ThreadLoop()  # an inherited one goes to _inherited
    return holder.loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on this thread's loop (made on first use) and return its
    result, as ``asyncio.run(coro)`` would. The caller checks that no loop is running."""
    loop = _thread_loop()
    task = loop.create_task(coro, context=contextvars.copy_context())
    interrupts = 0

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1 and not task.done():
            task.cancel()
            loop.call_soon_threadsafe(lambda: None)  # wake the selector
            return
        raise KeyboardInterrupt

    handles_sigint = (
        threading.current_thread() is threading.main_thread()
        and _getsignal(signal.SIGINT) is signal.default_int_handler
    )
    wakeup: int | None = None  # the wakeup fd before ours
    if handles_sigint:
        _setsignal(signal.SIGINT, on_sigint)
        # Ctrl-C taken by a worker thread (a sync tool or check blocked in user code) only
        # flags the main thread, which sleeps in the selector: the self-pipe as the wakeup
        # fd wakes it, so the handler runs at once (asyncio's own signal handling does this)
        csock = getattr(loop, "_csock", None)
        if csock is not None:
            wakeup = signal.set_wakeup_fd(csock.fileno(), warn_on_full_buffer=False)
    try:
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            if interrupts and task.uncancel() == 0:
                raise KeyboardInterrupt from None
            raise
    finally:
        if wakeup is not None:
            signal.set_wakeup_fd(wakeup)
        if handles_sigint and _getsignal(signal.SIGINT) is on_sigint:
            _setsignal(signal.SIGINT, signal.default_int_handler)
        _finish(loop)


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
