"""What handing listeners detached copies costs (issue 24, item 1).

Since then each listener call gets its own copy of the event (nested members serialised
once per event by orjson and parsed once per listener; scalars shared). This measures that
copy on the benchmark's conversation (``common.Conversation``, N tool-call iterations)
recorded into a ``MemoryStore`` (where the copy weighs most) and into SQLite
(``durability="normal"``: no fsync per flush to drown the figures), three ways:

* ``none``: no listener (this tree): nothing is built, nothing is copied;
* ``star``: one ``agent.on("*", fn)`` listener that does nothing (this tree: copies);
* ``star, before``: the same listener with the copies taken out, as before them (this tree's
  ``src`` whose ``runtime/events.py`` ends with :data:`NO_COPIES`: ``detached`` returns its
  value and each listener gets the run's own event object; so a tool's arguments are not
  copied either: the copies are the only difference). Made from this tree, not from an old
  commit, so it keeps measuring the copies as the code around them moves.

Each measurement runs in a fresh subprocess (``PYTHONPATH`` set to the tree's ``src``):
an untimed warm-up, then ``--inner`` recordings whose ``run_sync`` calls are timed (median
kept). The variants alternate in every round. Printed: the fastest round in ms per iteration,
the events delivered, and the copy's cost, ``star - star, before``, per delivered event
and as a share of the recording time with no listener (the target: at most 5%).

Usage::

    python bench/listeners.py                  # N = 800, 5 rounds (about 3 min on 2 vCPU)
    python bench/listeners.py --quick          # N = 200, 2 rounds
    python bench/listeners.py --rounds 9 --json listeners.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
#: appended to this tree's ``runtime/events.py`` for ``star, before``: no copy anywhere
NO_COPIES = b"""

# bench/listeners.py: the copies taken out, as before them
def detached(value):
    return value


def _snapshot(event):
    return event


def _fresh(snapshot):
    return snapshot
"""
WARMUP_N = 8
VARIANTS = ("star, before", "star", "none")
STORES = ("memory", "sqlite")


# -- the measuring subprocess -----------------------------------------------------------------
def child(variant: str, n: int, inner: int, db: Path) -> dict[str, Any]:
    sys.path.insert(0, str(BENCH))
    import common
    from common import Conversation, remove_db, run_agent_conversation

    import agentfootprint as af

    delivered = [0]

    def nothing(event: af.AgentEvent) -> None:
        delivered[0] += 1

    made = common.conversation_agent

    def agent_with_listener(*args: Any, **kwargs: Any) -> af.Agent:
        agent = made(*args, **kwargs)
        if variant != "none":
            agent.on("*", nothing)
        return agent

    common.conversation_agent = agent_with_listener  # the variant's listener on every agent
    run_agent_conversation(Conversation(WARMUP_N), af.MemoryStore())
    conv = Conversation(n)
    wall: dict[str, list[float]] = {store: [] for store in STORES}
    cpu: dict[str, list[float]] = {store: [] for store in STORES}
    events = 0
    for _ in range(inner):
        for store_kind in STORES:
            remove_db(db)
            store = (
                af.MemoryStore()
                if store_kind == "memory"
                else af.SqliteStore(db, durability="normal")
            )
            delivered[0] = 0
            try:
                c0 = time.process_time()
                wall[store_kind].append(run_agent_conversation(conv, store).seconds)
                cpu[store_kind].append(time.process_time() - c0)
            finally:
                store.close()
            events = delivered[0]
        remove_db(db)
    per_it = 1000.0 / n
    return {
        "module": af.__file__,
        "events": events,
        **{f"{k}_ms": statistics.median(v) * per_it for k, v in wall.items()},
        **{f"{k}_cpu_ms": statistics.median(v) * per_it for k, v in cpu.items()},
        "delivery_us": delivery_cost(af, conv) if variant == "star" else None,
        "raw": {"wall_s": wall, "cpu_s": cpu},
    }


def delivery_cost(af: Any, conv: Any) -> dict[str, float]:
    """Delivering one event to one listener that does nothing, alone: microseconds per
    event through this tree's ``EventBus`` (the copy included) and through the one of
    ``runtime/events.py`` with :data:`NO_COPIES` (loaded beside it), over the events of a recording
    of the first 50 iterations, each delivered many times in a loop."""
    import asyncio
    import importlib.util

    import common
    from common import Conversation, run_agent_conversation

    from agentfootprint.features.registry import event_kinds
    from agentfootprint.runtime.events import EventBus

    kept: list[Any] = []
    made = common.conversation_agent

    def keeping(*args: Any, **kwargs: Any) -> Any:
        agent = made(*args, **kwargs)
        agent.on("*", kept.append)
        return agent

    common.conversation_agent = keeping
    run_agent_conversation(Conversation(min(conv.n, 50)), af.MemoryStore())
    common.conversation_agent = made
    from agentfootprint.runtime import events

    old_source = Path(events.__file__).read_bytes() + NO_COPIES
    spec = importlib.util.spec_from_loader("events_before", loader=None)
    assert spec is not None
    old = sys.modules["events_before"] = importlib.util.module_from_spec(spec)
    exec(compile(old_source, "events_before.py", "exec"), old.__dict__)
    rounds = 200
    timed: dict[str, float] = {}
    for name, bus in (("before", old.EventBus(event_kinds())), ("now", EventBus(event_kinds()))):
        bus.on("*", lambda event: None)

        async def deliver(bus: Any = bus) -> float:
            t0 = time.perf_counter()
            for _ in range(rounds):
                for event in kept:
                    await bus.emit(event)
            return time.perf_counter() - t0

        timed[name] = asyncio.run(deliver()) / (rounds * len(kept)) * 1e6
    return timed


# -- the parent -------------------------------------------------------------------------------
def before_tree(into: Path) -> Path:
    """This tree's ``src`` with the copies taken out (:data:`NO_COPIES`)."""
    src = into / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
    events = src / "agentfootprint" / "runtime" / "events.py"
    events.write_bytes(events.read_bytes() + NO_COPIES)
    return src


def spawn(tree: Path, variant: str, n: int, inner: int, db: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    args = ["--child", variant, "--n", str(n), "--inner", str(inner), "--db", str(db)]
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{variant} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not result["module"].startswith(str(tree)):
        raise SystemExit(f"{variant} imported {result['module']}, not from {tree}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inner", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="N = 200, 2 rounds")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.inner, args.db)))
        return
    if args.quick:
        args.n, args.rounds = 200, 2
    with tempfile.TemporaryDirectory(prefix="afp-listeners-") as tmp:
        trees = {"star, before": before_tree(Path(tmp)), "star": ROOT / "src"}
        trees["none"] = ROOT / "src"
        db = Path(tmp) / "listeners.sqlite"
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}  load {os.getloadavg()}")
        print(f"# N = {args.n}, {args.rounds} rounds")
        measured: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        for _ in range(args.rounds):
            for variant in VARIANTS:
                measured[variant].append(spawn(trees[variant], variant, args.n, args.inner, db))
    report(measured, args.n)
    if args.json:
        args.json.write_text(json.dumps(measured, indent=1))


def report(measured: dict[str, list[dict[str, Any]]], n: int) -> None:
    events = measured["star"][-1]["events"]
    per_it = events / n
    delivery = {
        k: statistics.median(m["delivery_us"][k] for m in measured["star"])
        for k in ("before", "now")
    }
    added_us = delivery["now"] - delivery["before"]
    added_ms = added_us * per_it / 1000
    print(f"# events delivered to the '*' listener: {events} ({per_it:.2f} per iteration)")
    print(
        f"# one event to one listener, alone: {delivery['before']:.2f} us before, "
        f"{delivery['now']:.2f} us now (+{added_us:.2f} us: the copy and its guard)"
    )
    print()
    print(
        "| store, time | no listener | '*' listener, before | '*' listener "
        "| difference | share | copies alone | share |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for store in STORES:
        for clock, suffix in (("wall", "_ms"), ("CPU", "_cpu_ms")):
            key = f"{store}{suffix}"
            # the fastest recording of each variant: interference on a shared machine only
            # ever adds time (the medians are in the JSON)
            best = {v: min(m[key] for m in measured[v]) for v in VARIANTS}
            diff = best["star"] - best["star, before"]
            print(
                f"| {store}, {clock} | {best['none']:.3f} | {best['star, before']:.3f} "
                f"| {best['star']:.3f} | {diff:+.3f} | {diff / best['none']:+.1%} "
                f"| {added_ms:.3f} | {added_ms / best['none']:.1%} |"
            )
    print()
    print("ms per tool-call iteration, the fastest of the rounds; difference: '*' listener now")
    print("minus before, end to end (a few microseconds per event within milliseconds per")
    print("iteration: noisy); copies alone: the added delivery time per event, measured")
    print("alone, times the events per iteration; shares: of the recording time with no")
    print("listener.")


if __name__ == "__main__":
    main()
