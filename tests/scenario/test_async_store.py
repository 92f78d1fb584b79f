"""A store that answers over the network offers ``append_async`` (store/base.py AsyncAppend):
the run writer awaits it at every flush point, so one run waiting on its database does not
stop another run on the same event loop; what it writes verifies like any run, and a failed
append leaves nothing half-written."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

import agentfootprint as af
from agentfootprint.errors import StoreError
from agentfootprint.store.base import AsyncAppend, StoredEvent


class SlowStore(af.MemoryStore):
    """A memory store whose appends wait for ``gate`` (a database that has not answered)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.waits = 0
        self.fail_next = False

    async def append_async(self, events: Sequence[StoredEvent]) -> None:
        self.waits += 1
        await self.gate.wait()
        if self.fail_next:
            self.fail_next = False
            raise StoreError("the database went away")
        self.append(events)


def test_a_slow_store_does_not_stop_another_run_on_the_loop() -> None:
    slow = SlowStore()
    assert isinstance(slow, AsyncAppend)

    async def main() -> tuple[af.RunResult, af.RunResult, int]:
        waiting = af.Agent(provider=af.MockProvider(["slow answer"]), model="m", store=slow)
        other = af.Agent(provider=af.MockProvider(["quick answer"]), model="m")
        pending = asyncio.ensure_future(waiting.run("first"))
        while not slow.waits and not pending.done():
            await asyncio.sleep(0)
        assert not pending.done() and slow.waits == 1  # waiting on its database
        quick = await other.run("second")  # the loop is free: this run goes all the way
        slow.gate.set()
        late = await pending
        return late, quick, slow.waits

    late, quick, waits = asyncio.run(main())
    assert (late.answer, quick.answer) == ("slow answer", "quick answer")
    assert waits >= 2  # the call's write-ahead and the close, at least, were awaited
    assert af.Verifier(slow).verify(late.run_id).outcome is af.Outcome.VALID_UNSIGNED


def test_a_failed_append_ends_the_runs_writing_and_leaves_a_consistent_prefix() -> None:
    """The first flush (before the model call) fails: the run fails with the store's error,
    its close is not written after it (the commits it would count never reached the store),
    and what the store holds is a consistent prefix; found by this test: the close used to
    be written with the unflushed receipt, a log that did not verify."""
    slow = SlowStore()
    slow.gate.set()
    slow.fail_next = True

    async def main() -> None:
        agent = af.Agent(provider=af.MockProvider(["never served"]), model="m", store=slow)
        await agent.run("hello")

    with pytest.raises(StoreError, match="went away"):
        asyncio.run(main())
    assert slow.runs() == []  # the failed flush was the run's first: nothing of it is there


def test_a_store_that_fails_once_mid_run_leaves_an_unsealed_prefix(tmp_path: Path) -> None:
    store = af.SqliteStore(tmp_path / "runs.db")
    original = store.append
    calls: list[int] = []

    def failing_second(events: Sequence[StoredEvent]) -> None:
        calls.append(len(events))
        if len(calls) == 2:  # before the tool runs: the store is busy, then recovers
            raise StoreError("database is locked")
        original(events)

    store.append = failing_second  # type: ignore[method-assign]
    tool = af.define_tool(name="act", description="Acts.", execute=lambda args: "acted")
    script = [af.reply(tool_calls=[af.tool_call("act", {})]), "done"]
    agent = af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=store)
    with agent, pytest.raises(StoreError, match="database is locked"):
        agent.run_sync("go")
    (info,) = store.runs()
    assert af.Verifier(store).verify(info.run_id).outcome is af.Outcome.UNSEALED
    assert len(calls) == 2  # nothing was written after the failure
    store.close()
