"""Shared helpers of the feature tests: fixed ports, row comparison, replay of a run."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import agentfootprint as af
from agentfootprint.audit.integrity import FindingsReport, findings
from agentfootprint.store.base import EventStore
from agentfootprint.testing.records import recorded_events


def fixed_ports() -> af.Ports:
    """A clock, run ids and salts that repeat from one agent to the next."""
    ticks = itertools.count(1_700_000_000_000)
    ids = itertools.count()
    salts = itertools.count()
    return af.Ports(
        clock=lambda: next(ticks),
        run_ids=lambda: f"run{next(ids):04d}",
        salts=lambda: next(salts).to_bytes(16, "big"),
    )


def rows(store: EventStore, run_id: str) -> list[tuple[str, int, bytes]]:
    """Every row of a run as stored: type, ts and body bytes."""
    return [(e.type, e.ts, bytes(e.body)) for e in store.read(run_id)]


def record(
    script: Callable[[], list[Any]], tools: list[af.Tool], message: str = "go", **options: Any
) -> tuple[af.Agent, af.RunResult]:
    """One run of ``script``'s replies with fixed ports, into a memory store."""
    agent = af.Agent(
        provider=af.MockProvider(script()),
        model="m",
        tools=tools,
        ports=fixed_ports(),
        **options,
    )
    return agent, agent.run_sync(message)


LOOKUP_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def lookup(result: Any = "rows: 1, 2, 3") -> af.Tool:
    return af.define_tool(
        name="lookup",
        description="Look something up.",
        input_schema=LOOKUP_SCHEMA,
        execute=lambda args: result if not callable(result) else result(args),
    )


def calls(*arguments: dict[str, Any], answer: str = "done") -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call("lookup", a)]) for a in arguments] + [answer]


def tool_messages(result: af.RunResult) -> list[dict[str, Any]]:
    return [m for m in result.state["history"] if m["role"] == "tool"]


def replays(agent: af.Agent, result: af.RunResult, **options: Any) -> af.ReplayResult:
    """Replay the run with a fresh agent of the same configuration: byte-identical."""
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=list(agent.config.tools),
        **options,
    )
    replayed = af.replay_sync(twin, agent.store, result.run_id)
    assert replayed.calls_checked == result.calls
    return replayed


def without_open(found: list[tuple[str, int, bytes]]) -> list[tuple[str, int, bytes]]:
    return [row for row in found if row[0] != "run.open"]


#: the payloads of a run's recorded events of one kind
events_of = recorded_events


def billed(script: list[Any], usages: list[af.Usage]) -> af.MockProvider:
    """The mock answering with ``script``, each reply reporting the given usage (exact token
    counts, where the mock would estimate them from characters)."""
    replies = [
        af.reply(item, usage=used)
        if isinstance(item, str)
        else dataclasses.replace(item, usage=used)
        for item, used in zip(script, usages, strict=True)
    ]
    return af.MockProvider(replies)


def settled(agent: af.Agent, result: af.RunResult, **options: Any) -> FindingsReport:
    """The run's integrity findings recomputed from the log agree with what it recorded, and
    a replay (no model, no tool; the agent's tools and ``options``) records the same rows
    byte for byte."""
    report = findings(agent.store, result.run_id, recompute=True)
    assert report.agrees, report.differences
    assert report.recomputed is not None
    assert report.recomputed.findings == report.recorded.findings
    twin = af.Agent(
        provider=af.MockProvider([]), model="m", tools=list(agent.config.tools), **options
    )
    again = af.replay_sync(twin, agent.store, result.run_id)
    assert again.calls_checked == result.calls
    assert af.same_recording(agent.store, result.run_id, twin.store, again.result.run_id)
    return report
