"""Observer delivery (issue 29): inline against deferred, and what delivery costs.

Two measurements, on this suite's conversation (``common.Conversation``: 4 tool-call
iterations per turn, each turn continuing the previous one), side by side in one run:

1. **A slow listener** (N = 200 by default). The model answers after ``--latency`` ms (a
   real model takes seconds; the mock's sleep stands for that wait), and one ``"*"``
   listener takes 5 ms per event, either awaiting (``asyncio.sleep``) or holding the event
   loop (``time.sleep``). Wall time per tool-call iteration, inline against deferred, and the
   ratio. Deferred delivery overlaps an awaiting listener with the run's own waits; a
   listener that holds the loop costs the same under either tier (docs/features.md says so).
2. **What delivery costs** (N = 800). No listener, one ``"*"`` listener that only counts
   (inline: detached copies; deferred clone; deferred summary), recorded into a
   ``MemoryStore`` (where delivery weighs most): ms per iteration (the fastest of the rounds,
   variants alternating in every round), against no listener (which builds no event at
   all: a stage builds one only when it is recorded or someone listens) and against inline.
   The detached copies alone, against the same listener without them, are
   ``bench/listeners.py``'s figure (the target: at most 5% of the recording time).

Usage::

    python bench/observers.py                 # N = 200 and 800
    python bench/observers.py --quick         # N = 50 and 200
    python bench/observers.py --json observers.json
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Conversation, environment, print_environment, run_agent_conversation

import agentfootprint as af

logging.disable(logging.WARNING)  # the conversation is over a context budget: said once per run

LISTENER_MS = 5.0
TIERS: dict[str, dict[str, Any]] = {
    "inline": {},
    "deferred": {"observer_delivery": "deferred"},
}


class SlowModel(af.MockProvider):
    """The scripted model, answering after ``latency`` seconds (the wait of a real call)."""

    def __init__(self, replies: list[Any], latency: float) -> None:
        super().__init__(replies=replies, record=False)
        self.latency = latency

    async def complete(self, request: Any, **kwargs: Any) -> af.LLMResponse:
        await asyncio.sleep(self.latency)
        return await super().complete(request)


def slow_listener(kind: str) -> tuple[Any, list[int]]:
    seen = [0]

    async def awaits(event: af.AgentEvent) -> None:
        await asyncio.sleep(LISTENER_MS / 1000)
        seen[0] += 1

    def holds(event: af.AgentEvent) -> None:
        time.sleep(LISTENER_MS / 1000)
        seen[0] += 1

    return (awaits if kind == "awaits" else holds), seen


def one_slow(conv: Conversation, tier: str, kind: str, latency_ms: float) -> tuple[float, int]:
    """ms per tool-call iteration of the conversation with a slow listener, and the events
    it was handed (all of them: a run returns once its events are delivered)."""
    import common

    listener, seen = slow_listener(kind)
    made = common.conversation_agent

    def with_listener(c: Conversation, provider: Any, store: Any, **options: Any) -> af.Agent:
        agent = made(c, SlowModel(c.replies(), latency_ms / 1000), store, **options)
        agent.on("*", listener)
        return agent

    common.conversation_agent = with_listener
    try:
        run = run_agent_conversation(conv, af.MemoryStore(), **TIERS[tier])
    finally:
        common.conversation_agent = made
    return 1000 * run.seconds / run.iterations, seen[0]


COST_VARIANTS: dict[str, tuple[bool, dict[str, Any]]] = {
    "none": (False, {}),
    "inline": (True, {}),
    "deferred, clone": (True, {"observer_delivery": "deferred"}),
    "deferred, summary": (
        True,
        {"observer_delivery": "deferred", "observer_delivery_options": {"capture": "summary"}},
    ),
}


def one_cost(conv: Conversation, variant: str) -> tuple[float, int]:
    import common

    listens, options = COST_VARIANTS[variant]
    delivered = [0]

    def counts(event: af.AgentEvent) -> None:
        delivered[0] += 1

    made = common.conversation_agent

    def with_listener(c: Conversation, provider: Any, store: Any, **extra: Any) -> af.Agent:
        agent = made(c, provider, store, **extra)
        if listens:
            agent.on("*", counts)
        return agent

    common.conversation_agent = with_listener
    try:
        run = run_agent_conversation(conv, af.MemoryStore(), **options)
    finally:
        common.conversation_agent = made
    return 1000 * run.seconds / run.iterations, delivered[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--latency", type=float, default=50.0, help="model latency, ms")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    slow_n, cost_n = (50, 200) if args.quick else (200, 800)
    env = environment()
    print_environment(env)
    figures: dict[str, Any] = {"environment": env, "latency_ms": args.latency}

    print(
        f"\n1. a listener taking {LISTENER_MS:g} ms per event, model latency {args.latency:g} ms, "
        f"N = {slow_n}: wall ms per tool-call iteration"
    )
    print(f"{'listener':<22}{'inline':>10}{'deferred':>10}{'deferred/inline':>17}{'events':>9}")
    conv = Conversation(slow_n)
    slow: dict[str, Any] = {}
    for kind in ("awaits", "holds the loop"):
        row = {tier: one_slow(conv, tier, kind.split()[0], args.latency) for tier in TIERS}
        (inline, events), (deferred, deferred_events) = row["inline"], row["deferred"]
        assert events == deferred_events, (events, deferred_events)
        print(f"{kind:<22}{inline:>10.2f}{deferred:>10.2f}{deferred / inline:>16.2f}x{events:>9}")
        slow[kind] = {"inline_ms": inline, "deferred_ms": deferred, "events": events}
    model_only, _ = one_cost_latency(conv, args.latency)
    print(f"{'no listener':<22}{model_only:>10.2f}")
    slow["no listener"] = {"ms": model_only}
    figures["slow_listener"] = slow

    print(f"\n2. one '*' listener that counts, N = {cost_n}, MemoryStore, {args.rounds} rounds")
    conv = Conversation(cost_n)
    one_cost(Conversation(8), "inline")  # warm-up
    best: dict[str, float] = {}
    events: dict[str, int] = {}
    for _ in range(args.rounds):
        for variant in COST_VARIANTS:
            ms, delivered = one_cost(conv, variant)
            best[variant] = min(best.get(variant, ms), ms)
            events[variant] = delivered
    base = best["none"]
    inline = best["inline"]
    print(f"{'variant':<20}{'ms/iteration':>14}{'events':>9}{'vs none':>10}{'vs inline':>11}")
    for variant, ms in best.items():
        share = "" if variant == "none" else f"{100 * (ms - base) / base:+.1f}%"
        against = "" if variant in ("none", "inline") else f"{100 * (ms - inline) / inline:+.1f}%"
        print(f"{variant:<20}{ms:>14.3f}{events[variant]:>9}{share:>10}{against:>11}")
    figures["delivery_cost"] = {"ms": best, "events": events}
    if args.json:
        import json

        args.json.write_text(json.dumps(figures, indent=2))


def one_cost_latency(conv: Conversation, latency_ms: float) -> tuple[float, int]:
    """The conversation with the slow model and no listener (the floor of part 1)."""
    import common

    made = common.conversation_agent

    def slow_model(c: Conversation, provider: Any, store: Any, **options: Any) -> af.Agent:
        return made(c, SlowModel(c.replies(), latency_ms / 1000), store, **options)

    common.conversation_agent = slow_model
    try:
        run = run_agent_conversation(conv, af.MemoryStore())
    finally:
        common.conversation_agent = made
    return 1000 * run.seconds / run.iterations, 0


if __name__ == "__main__":
    main()
