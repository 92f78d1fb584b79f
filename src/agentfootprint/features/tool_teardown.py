"""``tool_teardown_timeout_ms``: tools' cleanups, run when the run ends, each bounded.

A tool registers a cleanup through its context: ``ctx.on_teardown(fn)`` (``fn()`` sync, or
a coroutine function, or returning an awaitable). The run's cleanups run once, where the run
ends: after its last stage (answered or stopped early), at the stage that failed, or where
a cancellation (``asyncio.CancelledError``, e.g. the run's task cancelled mid-tool) reached
the run; the last registered runs first. Each gets ``tool_teardown_timeout_ms`` (default
5000 ms, a positive integer); past it the cleanup is *abandoned*, not cancelled (there is
nothing to cancel a vendor's in-flight call with: a coroutine keeps running in the loop, a
sync function in its worker thread), and the run goes on closing. An abandoned sync cleanup
never holds the process: interpreter exit waits for it only until its budget is spent, then
exits without it (the worker is a daemon thread); likewise a sync tool or permission check
whose run was cancelled gets at most ``tool_teardown_timeout_ms`` more at exit
(:mod:`agentfootprint.runtime.tool_threads`).

Each outcome is a recorded event, in the commit of the stage where the run ended (so it is
written before ``run.close`` and verifies): ``agentfootprint.tools.session_closed``
``{tool, tool_call_id, ms}`` or ``agentfootprint.tools.session_close_failed``
``{tool, tool_call_id, error_class, ms}`` (``error_class``: the exception's class name, or
``ToolTeardownTimeoutError`` for an abandoned one). ``ms`` is measured with the run's clock
port. A cleanup never fails the run, and the run's own error (the first) still surfaces.

A run where no tool registered a cleanup records exactly what it recorded before this
option existed (the option is not in ``run.open``). A replay runs no tool, so no cleanup
registers and none of these events is made again: like wire exchanges, they are evidence of
the original's side effects, left out of what a replay compares (see docs/tools.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from agentfootprint.features.base import MISSING, Feature, HookContext, OptionSpec, refuse
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.tool_threads import call_user_code

if TYPE_CHECKING:
    from agentfootprint.runtime.run import RunState

__all__ = [
    "DEFAULT_MS",
    "NAME",
    "SessionCloseFailed",
    "SessionClosed",
    "exit_grace",
    "grace",
    "registrar",
]

OPTION = "tool_teardown_timeout_ms"
DEFAULT_MS = 5000
#: the longest budget accepted (a day): a teardown sits on the shutdown path
MAX_MS = 86_400_000
TIMEOUT_ERROR = "ToolTeardownTimeoutError"
NAME = "tool-teardown"
#: abandoned cleanups still running (kept so they are not collected mid-flight)
_ABANDONED: set[asyncio.Future[Any]] = set()


@dataclass(frozen=True, kw_only=True)
class SessionClosed(AgentEvent):
    """A tool's cleanup finished within its budget."""

    kind: ClassVar[str] = "agentfootprint.tools.session_closed"
    tool: str
    tool_call_id: str
    ms: int  #: how long it took, by the run's clock


@dataclass(frozen=True, kw_only=True)
class SessionCloseFailed(AgentEvent):
    """A tool's cleanup raised, or ran past its budget and was abandoned (the session it
    closes may still be live)."""

    kind: ClassVar[str] = "agentfootprint.tools.session_close_failed"
    tool: str
    tool_call_id: str
    error_class: str  #: the exception's class, or ``ToolTeardownTimeoutError``
    ms: int


def _check(value: Any, given: Mapping[str, Any]) -> int:
    if value is MISSING:
        return DEFAULT_MS
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_MS:
        raise refuse(
            OPTION,
            f"must be a whole number of milliseconds from 1 to {MAX_MS} (default {DEFAULT_MS}), "
            f"got {value!r}",
        )
    return value


def registrar(run: RunState, tool: str, tool_call_id: str) -> Callable[[Callable[[], Any]], None]:
    """Where one tool call's ``ctx.on_teardown(fn)`` registers: this feature's run memory
    (the dispatcher hands it to the tool's context)."""

    def register(fn: Callable[[], Any]) -> None:
        pending = run.memory.get(NAME)
        if pending is None:
            pending = run.memory[NAME] = _Pending()
        pending.cleanups.append((tool, tool_call_id, fn))

    return register


def exit_grace(options: Mapping[str, Any]) -> float:
    """How long interpreter exit still waits for sync user code a cancelled run gave up (a
    tool, a permission check), in seconds: what one cleanup gets."""
    return float(options.get(OPTION, DEFAULT_MS)) / 1000


async def _invoke(fn: Callable[[], Any], timeout: float) -> None:
    # past its budget a thread is given up: exit does not wait for it any longer
    await call_user_code(fn, budget=timeout, grace=0.0)


def _abandon(task: asyncio.Future[Any]) -> None:
    _ABANDONED.add(task)

    def done(finished: asyncio.Future[Any]) -> None:
        _ABANDONED.discard(finished)
        if not finished.cancelled():
            finished.exception()  # retrieved: an abandoned cleanup's failure is not news

    task.add_done_callback(done)


async def _close(fn: Callable[[], Any], timeout: float) -> str | None:
    """Run one cleanup within ``timeout`` seconds: None, or the class name of its failure."""
    task = asyncio.ensure_future(_invoke(fn, timeout))
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:  # the run is cancelled again while waiting: stop waiting
        _abandon(task)
        raise
    if not done:
        _abandon(task)
        return TIMEOUT_ERROR
    if task.cancelled():
        return "CancelledError"
    error = task.exception()
    return None if error is None else type(error).__name__


def grace(ctx: HookContext[object]) -> float:
    """:func:`exit_grace` for a hook of a feature that ``needs`` this one."""
    return ctx.needed(FEATURE).options / 1000


@dataclass(slots=True)
class _Pending:
    """The run's registered cleanups, in registration order (the run's memory)."""

    cleanups: list[tuple[str, str, Callable[[], Any]]] = field(default_factory=list)


class _ToolTeardown(Feature[int]):
    def settings(self, options: Mapping[str, Any]) -> int:
        """The budget of one cleanup, in milliseconds."""
        ms: int = options[OPTION]
        return ms

    async def run_end(self, ctx: HookContext[int], error: BaseException | None) -> None:
        pending = ctx.memory(_Pending).cleanups
        ctx.forget()
        if not pending:
            return
        timeout = ctx.options / 1000
        clock = ctx.clock
        for tool, call_id, fn in reversed(pending):
            started = clock()
            failure = await _close(fn, timeout)
            ms = max(int(clock() - started), 0)
            if failure is None:
                await ctx.emit(
                    SessionClosed(run_id=ctx.run_id, tool=tool, tool_call_id=call_id, ms=ms)
                )
            else:
                await ctx.emit(
                    SessionCloseFailed(
                        run_id=ctx.run_id,
                        tool=tool,
                        tool_call_id=call_id,
                        error_class=failure,
                        ms=ms,
                    )
                )


FEATURE = _ToolTeardown(
    name=NAME,
    summary="tools' ctx.on_teardown cleanups run at run end and on cancellation, bounded",
    order=200,  # after every other end-of-run hook
    options=(
        OptionSpec(
            name=OPTION,
            seed="toolTeardownTimeoutMs",
            check=_check,
            summary="budget of one tool teardown (ms)",
        ),
    ),
    events=(SessionClosed, SessionCloseFailed),
    recorded_events=(SessionClosed, SessionCloseFailed),
    live_only_events=(SessionClosed, SessionCloseFailed),
    ports=("clock",),
)
