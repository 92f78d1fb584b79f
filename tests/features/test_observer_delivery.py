"""``observer_delivery`` and ``observer_delivery_options``: when listeners get a run's events.

Deferred delivery hands listeners the same events as inline (kinds, payloads, order) from a
bounded queue beside the run, every one of them before ``run()`` returns, whether the run
answered, failed or was cancelled; under overflow, delivered + dropped = produced exactly.
Neither tier changes a row, and neither is recorded. (The listener property,
``tests/property/test_listeners.py``, runs under both tiers.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from feature_support import calls, fixed_ports, lookup, record, replays, rows

import agentfootprint as af
from agentfootprint.runtime.events import AgentEvent, EventBus, TurnStart
from agentfootprint.runtime.observers import (
    SUMMARY_CHARS,
    DeferredDelivery,
    DeliveryOptions,
    summarised,
)

DEFERRED = {"observer_delivery": "deferred"}
#: listener-only fields measured on the wall clock
WALL_CLOCK = frozenset({"duration_ms"})


def seen_form(event: AgentEvent) -> tuple[str, bytes]:
    fields = {k: v for k, v in vars(event).items() if k not in WALL_CLOCK}
    return event.kind, orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)


def script() -> list[Any]:
    return calls({"q": "a"}, {"q": "b"}, {"q": "c"})


def observed(slow: bool = False, **options: Any) -> tuple[af.Agent, af.RunResult, list[Any]]:
    """One run of the script with a listener keeping what it is handed (``slow``: it
    awaits a moment per event, so the queue fills)."""
    seen: list[tuple[str, bytes]] = []

    async def keep(event: AgentEvent) -> None:
        if slow:
            await asyncio.sleep(0.001)
        seen.append(seen_form(event))

    agent = af.Agent(
        provider=af.MockProvider(script()),
        model="m",
        tools=[lookup()],
        ports=fixed_ports(),
        **options,
    )
    agent.on("*", keep)
    return agent, agent.run_sync("go"), seen


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """The listeners' tracebacks are logged by design."""
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


# -- the same events, the same rows ----------------------------------------------------------
@pytest.mark.parametrize("capture", ["clone", "summary"])
def test_deferred_hands_listeners_what_inline_does_in_the_same_order(capture: str) -> None:
    _, inline_result, inline = observed()
    options = {**DEFERRED, "observer_delivery_options": {"capture": capture}}
    _, result, deferred = observed(slow=True, **options)
    assert deferred == inline and len(inline) > 20  # short values: summary cuts nothing
    stats = result.observer_stats
    assert stats is not None and stats.delivery == "deferred"
    assert stats.produced == stats.delivered == len(deferred) and stats.dropped == 0
    assert stats.max_depth > 1  # the slow listener fell behind: the queue held events
    assert inline_result.observer_stats is not None
    assert inline_result.observer_stats.delivered == len(inline)


def test_no_tier_changes_a_row_and_neither_is_recorded() -> None:
    plain, first = record(script, [lookup()])
    inline, _, _ = observed()
    deferred, _, _ = observed(slow=True, **DEFERRED)
    expected = rows(plain.store, first.run_id)
    for agent in (inline, deferred):
        assert rows(agent.store, first.run_id) == expected  # run.open included


def test_a_deferred_run_replays_identically_under_either_tier() -> None:
    agent, result, _ = observed(slow=True, **DEFERRED)
    assert replays(agent, result).result.answer == "done"
    assert replays(agent, result, **DEFERRED).result.answer == "done"
    inline, plain, _ = observed()
    assert replays(inline, plain, **DEFERRED).calls_checked == plain.calls


# -- overflow --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "queue",
    [
        {"max_queue": 2},
        {"max_queue": 2, "overflow": "sample", "sample_every": 3},
        {"max_queue": 1, "overflow": "drop-oldest", "flush_budget_ms": 0},
    ],
)
def test_under_overflow_delivered_and_dropped_add_up_to_produced(queue: dict[str, Any]) -> None:
    _, _, everything = observed()
    _, result, seen = observed(slow=True, **DEFERRED, observer_delivery_options=queue)
    stats = result.observer_stats
    assert stats is not None
    assert stats.dropped > 0 and stats.stranded == 0
    assert stats.delivered + stats.dropped == stats.produced == len(everything)
    assert stats.delivered == len(seen) and stats.max_depth <= queue["max_queue"]
    kept = iter(everything)  # what was delivered is what inline delivers, less the drops
    assert all(any(event == other for other in kept) for event in seen)


def test_block_delivers_every_event_at_the_runs_expense() -> None:
    _, _, everything = observed()
    queue = {"max_queue": 1, "overflow": "block"}
    _, result, seen = observed(slow=True, **DEFERRED, observer_delivery_options=queue)
    stats = result.observer_stats
    assert stats is not None and stats.blocked > 0 and stats.dropped == 0
    assert seen == everything and stats.produced == stats.delivered == len(seen)


# -- every event delivered before run() returns: answered, failed, cancelled ----------------
class Gate(af.MockProvider):
    """The scripted model whose ``fail_at``-th call fails, or waits at ``wait_at`` until
    the test cancels the run (``entered`` says it is waiting)."""

    def __init__(self, replies: list[Any], *, fail_at: int = -1, wait_at: int = -1) -> None:
        super().__init__(replies)
        self.fail_at, self.wait_at, self.made = fail_at, wait_at, 0
        self.entered = asyncio.Event()

    async def complete(self, request: Any, **kwargs: Any) -> af.LLMResponse:
        made, self.made = self.made, self.made + 1
        if made == self.fail_at:
            raise ConnectionError("the model service went away")
        if made == self.wait_at:
            self.entered.set()
            await asyncio.Event().wait()  # until cancelled
        return await super().complete(request)


def counted(tier: dict[str, Any], outcome: str) -> tuple[int, int]:
    """Run to ``outcome`` with a slow counting listener: the events it had seen when the
    run's call returned or raised, and then after everything settled."""
    seen: list[str] = []

    async def count(event: AgentEvent) -> None:
        await asyncio.sleep(0.001)
        seen.append(event.kind)

    provider = Gate(
        script(),
        fail_at=2 if outcome == "failed" else -1,
        wait_at=2 if outcome == "cancelled" else -1,
    )
    agent = af.Agent(provider=provider, model="m", tools=[lookup()], ports=fixed_ports(), **tier)
    agent.on("*", count)

    async def main() -> tuple[int, int]:
        task = asyncio.ensure_future(agent.run("go"))
        if outcome == "cancelled":
            await asyncio.wait_for(provider.entered.wait(), timeout=60)  # a hang guard only
            task.cancel()
        if outcome == "answered":
            assert (await task).answer == "done"
        else:
            with pytest.raises(af.RunError if outcome == "failed" else asyncio.CancelledError):
                await task
        at_return = len(seen)
        await asyncio.sleep(0.05)  # anything still under way would land now
        return at_return, len(seen)

    at_return, settled = asyncio.run(main())
    (run_id,) = agent.store.run_ids()
    close = [e.decoded() for e in agent.store.read(run_id) if e.type == "run.close"]
    assert close[0]["outcome"] == ("answered" if outcome == "answered" else "failed")
    return at_return, settled


@pytest.mark.parametrize("outcome", ["answered", "failed", "cancelled"])
def test_a_counting_listener_has_seen_every_event_when_run_returns(outcome: str) -> None:
    inline = counted({}, outcome)
    deferred = counted(DEFERRED, outcome)
    assert inline[0] == inline[1] > 5
    assert deferred == inline  # every event, delivered before run() returned or raised


def test_a_listener_cancelling_the_deliverer_does_not_stop_delivery() -> None:
    seen: list[str] = []

    def cancels(event: AgentEvent) -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # under deferred delivery the current task is the deliverer

    agent = af.Agent(provider=af.MockProvider(script()), model="m", tools=[lookup()], **DEFERRED)
    agent.on("agentfootprint.stream.tool_start", cancels)
    agent.on("*", lambda event: seen.append(event.kind))
    result = agent.run_sync("go")
    assert result.answer == "done" and seen.count("agentfootprint.stream.tool_start") == 3
    stats = result.observer_stats
    assert stats is not None and stats.listener_errors == 3
    assert stats.delivered == stats.produced == len(seen)


# -- the queue itself ---------------------------------------------------------------------
def test_a_cancelled_drain_strands_what_is_queued_and_the_counts_add_up() -> None:
    bus = EventBus(frozenset({TurnStart.kind}))
    entered = asyncio.Event()

    async def stuck(event: AgentEvent) -> None:
        entered.set()
        await asyncio.Event().wait()

    bus.on("*", stuck)

    async def main() -> DeferredDelivery:
        delivery = DeferredDelivery(bus, DeliveryOptions())
        for n in range(4):
            await delivery.emit(TurnStart(run_id="r", conversation_id="c", message=str(n)))
        draining = asyncio.ensure_future(delivery.drain())
        await asyncio.wait_for(entered.wait(), timeout=60)  # a hang guard only
        draining.cancel()
        with pytest.raises(asyncio.CancelledError):
            await draining
        return delivery

    stats = asyncio.run(main()).stats()
    assert (stats.produced, stats.delivered, stats.stranded) == (4, 1, 3)
    assert stats.produced == stats.delivered + stats.dropped + stats.stranded


def test_drain_observers_waits_for_runs_under_way() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(event: AgentEvent) -> None:
        entered.set()
        await release.wait()

    agent = af.Agent(provider=af.MockProvider(["hi"]), model="m", **DEFERRED)
    agent.on("agentfootprint.agent.turn_start", held)

    async def main() -> tuple[bool, bool, bool, str]:
        before = await agent.drain_observers()
        task = asyncio.ensure_future(agent.run("go"))
        await asyncio.wait_for(entered.wait(), timeout=60)  # a hang guard only
        held_up = await agent.drain_observers(timeout=0.01)  # the listener holds the queue
        release.set()
        drained = await agent.drain_observers(timeout=60)  # a hang guard only
        return before, held_up, drained, (await task).answer

    assert asyncio.run(main()) == (True, False, True, "hi")


def test_summary_capture_cuts_long_values_and_says_so() -> None:
    event = af.ToolEnd(
        run_id="r",
        iteration=0,
        tool_call_id="c",
        tool="t",
        result="x" * (SUMMARY_CHARS + 10),
    )
    cut = summarised(event)
    assert isinstance(cut, af.ToolEnd) and cut.result.endswith("... (10 more characters)")
    start = af.ToolStart(
        run_id="r",
        iteration=0,
        tool_call_id="c",
        tool="t",
        arguments={"rows": list(range(40)), "deep": {"a": {"b": {"c": 1}}}},
    )
    kept = summarised(start).arguments
    assert kept["rows"] == [*range(16), "... 24 more"]
    assert kept["deep"] == {"a": {"b": "<object of 1>"}}


def test_summary_capture_hands_listeners_the_cut_copy_and_records_the_whole() -> None:
    long = "r" * (SUMMARY_CHARS * 3)
    seen: list[str] = []
    options = {**DEFERRED, "observer_delivery_options": {"capture": "summary"}}
    agent, result = record(lambda: script() + script(), [lookup(long)], **options)
    agent.on("agentfootprint.stream.tool_end", lambda event: seen.append(event.result))
    second = agent.run_sync("again", continue_from=result)
    assert len(seen) == 3 and all(len(s) < len(long) for s in seen)
    assert second.state["history"][-2]["content"] == long


# -- refused at construction -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"observer_delivery": "fast"}, "'inline' or 'deferred'"),
        ({"observer_delivery_options": {"max_queue": 5}}, "observer_delivery='deferred'"),
        (
            {"observer_delivery": "inline", "observer_delivery_options": {}},
            "observer_delivery='deferred'",
        ),
        ({**DEFERRED, "observer_delivery_options": {"capture": "ref"}}, "live objects"),
        ({**DEFERRED, "observer_delivery_options": {"capture": "deep"}}, "capture must be"),
        ({**DEFERRED, "observer_delivery_options": {"overflow": "wait"}}, "overflow must be"),
        ({**DEFERRED, "observer_delivery_options": {"sample_every": 3}}, "overflow='sample'"),
        (
            {**DEFERRED, "observer_delivery_options": {"overflow": "sample", "sample_every": 1}},
            "sample_every must be",
        ),
        ({**DEFERRED, "observer_delivery_options": {"max_queue": 0}}, "max_queue must be"),
        ({**DEFERRED, "observer_delivery_options": {"flush_budget_ms": -1}}, "flush_budget_ms"),
        ({**DEFERRED, "observer_delivery_options": {"flush_budget_ms": "2"}}, "flush_budget_ms"),
        ({**DEFERRED, "observer_delivery_options": {"queue": 5}}, "unknown keys ['queue']"),
        ({**DEFERRED, "observer_delivery_options": [("max_queue", 5)]}, "must be a mapping"),
    ],
)
def test_misconfiguration_is_refused_at_construction(options: dict[str, Any], says: str) -> None:
    with pytest.raises(af.UsageError, match=r"option 'observer_delivery") as caught:
        af.Agent(provider=af.MockProvider([]), model="m", **options)
    assert says in str(caught.value)
    assert caught.value.option in {"observer_delivery", "observer_delivery_options"}


def test_drain_observers_refuses_a_bad_timeout() -> None:
    agent = af.Agent(provider=af.MockProvider([]), model="m", **DEFERRED)
    with pytest.raises(af.UsageError, match="timeout"):
        asyncio.run(agent.drain_observers(timeout=-1))
