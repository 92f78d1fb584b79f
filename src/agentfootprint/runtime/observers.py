"""How a run hands its events to listeners: ``inline`` or ``deferred`` (``observer_delivery``).

Delivery is never evidence. Whichever tier, a listener gets a detached copy of each event
(:class:`~agentfootprint.runtime.events.EventBus`), and the rows, the served requests and
what the tools receive are the same as with no listener at all.

``inline`` (the default) delivers each event as it is emitted: the stage waits for every
listener, so a slow listener taxes every stage of every iteration.

``deferred`` captures each event (its detached snapshot, made at once, so it is exactly
what inline would deliver) into a bounded queue of the run, delivered in order by a task
beside the run: a listener's awaits overlap the run's own (the model call, a tool, the
store). Between stages the run gives the deliverer one slice of at most ``flush_budget_ms``;
at every terminal boundary (answered, stopped, paused, failed, cancelled) it waits until
the queue is empty, so every event was delivered before ``run()`` returns. A synchronous
listener still holds the event loop while it runs, whatever the tier: make a slow one async.

When the queue is full, ``overflow`` says what gives: ``drop-oldest`` (the oldest waiting
event is dropped), ``sample`` (one overflowing event in ``sample_every`` is kept, the
oldest waiting making room for it), ``block`` (the run waits for room: every event is
delivered, at the run's expense). Every captured event is delivered, dropped, or (when the
caller cancels the run's final drain) stranded, and :class:`ObserverStats` counts each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agentfootprint.runtime.events import AgentEvent, EventBus, Snapshot, snapshot_of

__all__ = [
    "DeferredDelivery",
    "Delivery",
    "DeliveryOptions",
    "InlineDelivery",
    "ObserverStats",
    "summarised",
]

log = logging.getLogger("agentfootprint.events")

Overflow = Literal["drop-oldest", "sample", "block"]
Capture = Literal["clone", "summary"]

#: how far ``capture="summary"`` keeps a nested value: levels, entries per container,
#: nodes in all, characters per string
SUMMARY_DEPTH = 3
SUMMARY_ENTRIES = 16
SUMMARY_NODES = 128
SUMMARY_CHARS = 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class DeliveryOptions:
    """``observer_delivery_options``, resolved (each member's default is the seed's)."""

    max_queue: int = 10_000
    overflow: Overflow = "drop-oldest"
    sample_every: int = 10
    capture: Capture = "clone"
    flush_budget_ms: float = 2.0


@dataclass(frozen=True, kw_only=True, slots=True)
class ObserverStats:
    """What a run's delivery did (``RunResult.observer_stats``). Never recorded.

    ``produced == delivered + dropped + stranded`` always."""

    delivery: Literal["inline", "deferred"]
    #: events captured for delivery (some listener took their kind when they were emitted)
    produced: int
    #: events handed to the listeners that took their kind
    delivered: int
    #: events the full queue gave up (``drop-oldest``, ``sample``)
    dropped: int = 0
    #: events still queued when the caller cancelled the run's final drain
    stranded: int = 0
    #: listener calls that raised (logged; the run went on)
    listener_errors: int = 0
    #: the longest the queue grew
    max_depth: int = 0
    #: slices the deliverer ran, and those that ended on the budget with events waiting
    flushes: int = 0
    budget_exhausted: int = 0
    #: times the run waited for room (``overflow="block"``)
    blocked: int = 0


class _Buses:
    """The buses a run delivers to: the agent's (``agent.on``), then the run's own (a
    ``run_stream``'s), each listener its own copy of the one snapshot."""

    def __init__(self, buses: tuple[EventBus, ...]) -> None:
        self._buses = buses

    def wants(self, kind: str) -> bool:
        return any(bus.wants(kind) for bus in self._buses)

    async def deliver(self, kind: str, taken: Snapshot) -> int:
        errors = 0
        for bus in self._buses:
            if bus.wants(kind):
                errors += await bus.deliver(kind, taken)
        return errors


def _buses(bus: EventBus | tuple[EventBus, ...]) -> EventBus | _Buses:
    if isinstance(bus, EventBus):
        return bus
    return bus[0] if len(bus) == 1 else _Buses(bus)


class InlineDelivery:
    """Each event delivered as it is emitted, the stage waiting for every listener."""

    deferred = False

    def __init__(self, bus: EventBus | tuple[EventBus, ...]) -> None:
        self._bus = _buses(bus)
        self._delivered = 0
        self._errors = 0

    def wants(self, kind: str) -> bool:
        return self._bus.wants(kind)

    async def emit(self, event: AgentEvent) -> None:
        if self._bus.wants(event.kind):
            self._delivered += 1
            self._errors += await self._bus.deliver(event.kind, snapshot_of(event))

    async def checkpoint(self) -> None:
        return None

    async def drain(self) -> None:
        return None

    def stats(self) -> ObserverStats:
        return ObserverStats(
            delivery="inline",
            produced=self._delivered,
            delivered=self._delivered,
            listener_errors=self._errors,
        )


class DeferredDelivery:
    """A run's bounded queue of captured events and the task that delivers them."""

    deferred = True

    def __init__(self, bus: EventBus | tuple[EventBus, ...], options: DeliveryOptions) -> None:
        self._bus = _buses(bus)
        self._options = options
        self._budget = options.flush_budget_ms / 1000
        self._queue: deque[tuple[str, Snapshot]] = deque()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._room = asyncio.Event()
        self._busy = False  # a listener call is under way
        self._closing = False  # the run closed: deliver what is queued, then end
        self._stopping = False  # delivery is given up (the final drain was cancelled)
        self._yielded = time.perf_counter()
        self._overflowed = 0
        self.produced = self.delivered = self.dropped = self.stranded = 0
        self.errors = self.max_depth = self.flushes = self.budget_exhausted = 0
        self.blocked = 0

    def wants(self, kind: str) -> bool:
        return not self._stopping and self._bus.wants(kind)

    async def emit(self, event: AgentEvent) -> None:
        """Capture ``event`` (its snapshot, made now), making room as ``overflow`` says."""
        if not self.wants(event.kind):
            return
        options = self._options
        if options.capture == "summary":
            event = summarised(event)
        item = (event.kind, snapshot_of(event))
        queue = self._queue
        self.produced += 1
        if len(queue) >= options.max_queue:
            if options.overflow == "block":
                self.blocked += 1
                while len(queue) >= options.max_queue and not self._stopping:
                    self._room.clear()
                    self._start()
                    await self._room.wait()
            elif options.overflow == "drop-oldest":
                queue.popleft()
                self.dropped += 1
            else:  # sample: one overflowing event in sample_every is kept
                self._overflowed += 1
                if self._overflowed % options.sample_every:
                    self.dropped += 1
                    return
                queue.popleft()
                self.dropped += 1
        queue.append(item)
        self.max_depth = max(self.max_depth, len(queue))
        self._idle.clear()
        self._start()

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._deliver())
        self._wake.set()

    async def checkpoint(self) -> None:
        """Between stages: a slice for the deliverer when events wait and the run went on
        for a budget's time since the last (or the queue is half full), so that a run
        that never waits still delivers as it goes, without a turn of the event loop after
        every stage."""
        queue = self._queue
        if not queue:
            return
        now = time.perf_counter()
        if now - self._yielded >= self._budget or 2 * len(queue) >= self._options.max_queue:
            await asyncio.sleep(0)
            self._yielded = time.perf_counter()

    async def _deliver(self) -> None:
        """Deliver queued events in order, a slice of at most the budget at a time, until
        the run closes and the queue is empty. A cancel of this task by a listener (it is
        a listener's current task) is contained: only :meth:`drain` stops delivery."""
        task = asyncio.current_task()
        assert task is not None
        while not (self._closing and not self._queue):
            try:
                await self._slice()
            except asyncio.CancelledError:
                if self._stopping:
                    raise
                task.uncancel()
                self.errors += 1
                log.error("a listener cancelled the observer task; delivery goes on")
        self._idle.set()

    async def _slice(self) -> None:
        queue = self._queue
        if not queue:
            self._idle.set()
            if not self._closing:
                self._wake.clear()
                await self._wake.wait()
            return
        self.flushes += 1
        started = time.perf_counter()
        while queue:
            kind, taken = queue.popleft()
            self._room.set()
            self._busy = True
            try:
                self.errors += await self._bus.deliver(kind, taken)
            finally:
                self._busy = False
                self.delivered += 1
            if queue and time.perf_counter() - started >= self._budget:
                self.budget_exhausted += 1
                break
        await asyncio.sleep(0)  # the run goes on between slices

    async def drain(self) -> None:
        """Wait until every captured event was delivered (the run's terminal boundary). A
        cancel of the wait strands what is still queued (counted) and stops delivery."""
        self._closing = True
        task = self._task
        if task is None:
            return
        self._wake.set()
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done() and not task.cancelled():
                raise  # the caller's cancel, after delivery ended
            self._stopping = True
            self.stranded += len(self._queue)
            self._queue.clear()
            self._room.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise
        except Exception:  # a listener's failure never reaches the run
            log.exception("the observer task failed")

    async def idle(self) -> None:
        """Until the queue is empty (``agent.drain_observers``)."""
        while self._queue or self._busy:
            if self._task is None or self._task.done():
                return
            await self._idle.wait()

    def stats(self) -> ObserverStats:
        return ObserverStats(
            delivery="deferred",
            produced=self.produced,
            delivered=self.delivered,
            dropped=self.dropped,
            stranded=self.stranded,
            listener_errors=self.errors,
            max_depth=self.max_depth,
            flushes=self.flushes,
            budget_exhausted=self.budget_exhausted,
            blocked=self.blocked,
        )


#: a run's delivery, whichever tier
Delivery = InlineDelivery | DeferredDelivery


def summarised(event: AgentEvent) -> AgentEvent:
    """``event`` with its nested members cut to what ``capture="summary"`` keeps: three
    levels, sixteen entries a container, 128 nodes, 1,024 characters a string; each cut is
    said where it was made (``"<list of 40>"``, ``"... 24 more"``)."""
    budget = [SUMMARY_NODES]
    members = {name: _summary(value, 0, budget) for name, value in event.payload().items()}
    return type(event).from_payload(members)


def _summary(value: Any, depth: int, budget: list[int]) -> Any:
    budget[0] -= 1
    if isinstance(value, str):
        if len(value) <= SUMMARY_CHARS:
            return value
        return value[:SUMMARY_CHARS] + f"... ({len(value) - SUMMARY_CHARS} more characters)"
    if not isinstance(value, Mapping | list | tuple):
        return value
    if depth >= SUMMARY_DEPTH or budget[0] < 0:
        shape = "object" if isinstance(value, Mapping) else "list"
        return f"<{shape} of {len(value)}>"
    more = len(value) - SUMMARY_ENTRIES
    if isinstance(value, Mapping):
        kept: dict[str, Any] = {}
        for key in list(value)[:SUMMARY_ENTRIES]:
            kept[str(key)] = _summary(value[key], depth + 1, budget)
        if more > 0:
            kept["..."] = f"{more} more"
        return kept
    items = [_summary(item, depth + 1, budget) for item in list(value)[:SUMMARY_ENTRIES]]
    if more > 0:
        items.append(f"... {more} more")
    return items
