"""``agent.run_stream(message)``: a run's events to iterate, then its result.

::

    async with agent.run_stream("What is 2 + 2?") as run:
        async for item in run:
            if isinstance(item, af.LLMToken):
                print(item.text, end="")
    print(run.result.answer)

The run starts when the ``async with`` block is entered, as a task of its own. Iterating
yields every event of the run (the typed events ``agent.on`` delivers: tokens, model calls,
tool calls and results, recorded findings), each a detached copy, in the order a ``"*"``
listener gets them, and last the :class:`~agentfootprint.agent.agent.RunResult` (also on
``run.result``). A run that fails raises its error from the iteration, after its events.
Leaving the block before the run ended cancels it (it is closed ``failed`` on the record,
like any cancelled run). The stream is a listener of that one run only, delivered through
the agent's ``observer_delivery`` tier like any other: it changes no row.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agentfootprint.errors import UsageError
from agentfootprint.runtime.events import AgentEvent, EventBus

if TYPE_CHECKING:
    from agentfootprint.agent.agent import Agent
    from agentfootprint.agent.results import RunResult

__all__ = ["RunStream", "stream_bus"]

#: the stream a run started in this context delivers to, with the agent it is for (a run of
#: another agent in the same context, a sub-agent in a tool, does not take it)
_STREAM: contextvars.ContextVar[tuple[Agent, EventBus] | None] = contextvars.ContextVar(
    "agentfootprint_stream", default=None
)
_END = object()


def stream_bus(agent: Agent) -> EventBus | None:
    """The bus of the stream that started this run of ``agent`` (taken once: what the run
    itself starts, in its own context, streams nowhere)."""
    found = _STREAM.get()
    if found is None or found[0] is not agent:
        return None
    _STREAM.set(None)
    return found[1]


class RunStream:
    """One run's events to iterate (``async with agent.run_stream(...) as run``)."""

    def __init__(
        self,
        agent: Agent,
        kinds: frozenset[str],
        start: Callable[[], Coroutine[Any, Any, RunResult]],
    ) -> None:
        self._agent = agent
        self._kinds = kinds
        self._start = start
        self._task: asyncio.Task[RunResult] | None = None
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._result: RunResult | None = None

    async def __aenter__(self) -> RunStream:
        if self._task is not None:
            raise UsageError("a run_stream() is entered once")
        bus = EventBus(self._kinds)
        bus.on("*", self._queue.put_nowait)
        token = _STREAM.set((self._agent, bus))
        try:  # the task copies this context: its run delivers to the bus
            self._task = asyncio.ensure_future(self._start())
        finally:
            _STREAM.reset(token)
        self._task.add_done_callback(lambda _: self._queue.put_nowait(_END))
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task = self._task
        if task is None:
            return
        if not task.done():  # left before the run ended: the run is cancelled
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        elif not task.cancelled():
            task.exception()  # retrieved: a failure not iterated is not logged as lost

    def __aiter__(self) -> AsyncIterator[AgentEvent | RunResult]:
        return self._items()

    async def _items(self) -> AsyncIterator[AgentEvent | RunResult]:
        task = self._task
        if task is None:
            raise UsageError("iterate a run_stream() inside its 'async with' block")
        while (item := await self._queue.get()) is not _END:
            yield item
        self._result = await task  # the run's error, after its events
        yield self._result

    @property
    def result(self) -> RunResult:
        """The run's result, once it ended (after the iteration)."""
        if self._result is None:
            task = self._task
            if task is None or not task.done():
                raise UsageError("run_stream(): the result is known once the run ended")
            self._result = task.result()
        return self._result
