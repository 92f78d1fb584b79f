"""Stores side by side (issue 15): appends and verification per backend, 1-16 processes.

Backends: ``MemoryStore`` (a reference: no I/O, one store per process), an SQLite file and a
PostgreSQL database at ``durability="full"`` and ``"normal"``; PostgreSQL is a
``ThrowawayCluster(fsync=True)`` started here (or ``--postgres URL``, a user that may create
databases). Rounds alternate the backends' order; tables give the median (min-max).

1. Appends: 1, 4 and 16 writer *processes* (spawn) append to one database per backend for
   ``--seconds``. A real agent run (one turn of ``common.py``'s conversation, ``--iterations``
   tool calls, ``MockProvider``) is recorded once; each writer replays its flushes (same
   bodies and batches: one ``RunWriter.append``, one store transaction per flush) under a new
   run id per run, so rows are still canonicalised and hashed. events/s, flushes/s, CPU per
   event of the writers (and of the PostgreSQL server), PG/SQLite at equal durability.
2. ``Verifier(store).verify_all()`` of ``--verify-runs`` such runs per backend by 1 and 4
   reader processes (each verifies the whole database); then a reader verifying in a loop
   while 4 writers append, against the same writers alone.
3. The N=800 conversation recorded by the agent into a fresh SQLite file and a fresh
   PostgreSQL database at equal durability, alternating, ``--pairs`` pairs: ms per iteration.

First, always, the probes (``stores_support.probes``): one fdatasync, one round trip, one
commit on each backend, and a flush of 7 rows written as the store writes it and as one packed
row (what a one-row-per-flush PostgreSQL layout would save), in CPU per call, client and server.

Usage::

    python bench/stores.py --parts ""      # the probes alone (seconds)
    python bench/stores.py                 # ~7 min on 2 vCPU
    python bench/stores.py --quick         # smaller sizes, < 1 min
    python bench/stores.py --json stores.json --parts 1,3
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson
from common import (
    Conversation,
    environment,
    print_environment,
    remove_db,
    run_agent_conversation,
    write_figures,
)
from stores_support import (
    Databases,
    cell_figures,
    fmt_ratios,
    fmt_spread,
    med,
    postgres_server,
    postmaster_cpu,
    probes,
    rounds_order,
    table,
)

import agentfootprint as af
from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.store.writer import RunWriter, new_run_id

if TYPE_CHECKING:
    from throwaway_cluster import ThrowawayCluster

WRITERS = (1, 4, 16)
READERS = (1, 4)
#: the backends of the append table, in the order of an even round
APPEND_BACKENDS = (
    ("memory", None),
    ("sqlite", "full"),
    ("postgres", "full"),
    ("sqlite", "normal"),
    ("postgres", "normal"),
)
VERIFY_BACKENDS = ("memory", "sqlite", "postgres")
KINDS = ("postgres", "sqlite")

Template = list[list[tuple[str, bytes]]]
Spec = dict[str, Any]


# -- the runs the writers append --------------------------------------------------------------
def record_template(iterations: int) -> Template:
    """One real agent run (a turn of ``iterations`` tool-call iterations of the scripted
    conversation), as the batches it flushed: ``[(type, canonical body), ...]`` per flush."""
    batches: Template = []

    class Capture(af.MemoryStore):
        def append(self, events: Sequence[StoredEvent]) -> None:
            batches.append([(e.type, bytes(e.body)) for e in events])
            super().append(events)

    run = run_agent_conversation(Conversation(iterations), Capture())
    if run.turns != 1 or not batches:
        raise SystemExit("the template run did not record as one run")
    return batches


class Replayer:
    """Appends copies of the template run, each under a new run id, through ``RunWriter``."""

    def __init__(self, template: Template) -> None:
        first_type, first_body = template[0][0]
        if first_type != "run.open":
            raise SystemExit("the template run does not start with run.open")
        self.old_id = orjson.loads(first_body)["run_id"].encode()
        #: (type, parsed body, or None: the body names the run, so it is rebuilt per run)
        self.batches = [
            [(t, None if self.old_id in b else orjson.loads(b), b) for t, b in batch]
            for batch in template
        ]
        self.events = sum(len(b) for b in template)
        self.flushes = len(template)

    def run(self, store: EventStore) -> None:
        run_id = new_run_id()
        new_id, old_id = run_id.encode(), self.old_id
        writer = RunWriter(store, run_id)
        for batch in self.batches:
            writer.append(
                [
                    (t, orjson.loads(raw.replace(old_id, new_id)) if b is None else b)
                    for t, b, raw in batch
                ]
            )


# -- stores ------------------------------------------------------------------------------------
def open_store(spec: Spec, *, readonly: bool = False) -> Any:
    kind = spec["kind"]
    if kind == "memory":
        return af.MemoryStore()
    if kind == "sqlite":
        return af.SqliteStore(spec["target"], readonly=readonly, durability=spec["durability"])
    from agentfootprint.store.postgres import PostgresStore

    return PostgresStore(
        spec["target"], readonly=readonly, durability=None if readonly else spec["durability"]
    )


def label(kind: str, durability: str | None) -> str:
    return kind if durability is None else f"{kind} {durability}"


# -- the worker processes ---------------------------------------------------------------------
def worker_main(index: int, template: Template, inbox: Any, outbox: Any) -> None:
    """Serve commands until None: ``append`` and ``verify`` each answer ``ready`` once the
    store is open (and warm), wait for ``go`` and then measure."""
    replayer = Replayer(template)
    while True:
        command = inbox.get()
        if command is None:
            return
        try:
            what, spec, options = command
            job = _append if what == "append" else _verify
            outbox.put(("done", index, job(replayer, spec, options, inbox, outbox, index)))
        except BaseException:
            outbox.put(("error", index, traceback.format_exc()))


def _ready_and_go(inbox: Any, outbox: Any, index: int) -> None:
    """Say the store is open and warm; wait for the common start."""
    outbox.put(("ready", index, None))
    _, start_at = inbox.get()
    time.sleep(max(0.0, float(start_at) - time.time()))


def _append(
    replayer: Replayer, spec: Spec, options: dict[str, Any], inbox: Any, outbox: Any, index: int
) -> dict[str, Any]:
    store = open_store(spec)
    try:
        replayer.run(store)  # warm: connections, statements, first-call costs
        _ready_and_go(inbox, outbox, index)
        runs, limit = 0, options.get("max_runs") or float("inf")
        c0, t0 = time.process_time(), time.perf_counter()
        deadline = t0 + options["seconds"]
        while runs < limit and time.perf_counter() < deadline:
            replayer.run(store)
            runs += 1
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        store.close()
    counts = dict(runs=runs, events=runs * replayer.events, flushes=runs * replayer.flushes)
    # the warm-up run is stored too
    return dict(counts, stored_runs=runs + 1, seconds=elapsed, cpu=cpu)


def _verify(
    replayer: Replayer, spec: Spec, options: dict[str, Any], inbox: Any, outbox: Any, index: int
) -> dict[str, Any]:
    looping = "loop_seconds" in options
    if spec["kind"] == "memory":
        store = af.MemoryStore()
        for _ in range(options["memory_runs"]):
            replayer.run(store)
    else:
        store = open_store(spec, readonly=True)
    try:
        store.runs()  # warm the connection
        _ready_and_go(inbox, outbox, index)
        passes = runs = events = unsealed = index_races = 0
        failures: list[str] = []
        c0, t0 = time.process_time(), time.perf_counter()
        deadline = t0 + options.get("loop_seconds", 0.0)
        while True:
            if looping:  # each pass opens the store anew, as `agentfootprint verify` does
                store.close()
                store = open_store(spec, readonly=True)
            seen: set[str] = set()
            for run_id, result in af.Verifier(store).verify_all():
                if isinstance(result, af.VerificationError):
                    if getattr(result, "code", None) == "index" and run_id not in seen:
                        index_races += 1  # opened after the pass listed the runs
                    else:
                        failures.append(f"{run_id}: {result}")
                    continue
                seen.add(run_id)
                runs += 1
                events += result.events
                unsealed += result.outcome is af.Outcome.UNSEALED
            passes += 1
            if time.perf_counter() >= deadline:
                break
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        store.close()
    counts = dict(passes=passes, runs=runs, events=events, unsealed=unsealed)
    return dict(counts, index_races=index_races, failures=failures, seconds=elapsed, cpu=cpu)


class Workers:
    """A fixed set of spawned worker processes, each with its own command queue."""

    def __init__(self, count: int, template: Template) -> None:
        ctx = mp.get_context("spawn")
        self.outbox = ctx.Queue()
        self.inboxes = [ctx.Queue() for _ in range(count)]
        self.procs = [
            ctx.Process(
                target=worker_main, args=(i, template, self.inboxes[i], self.outbox), daemon=True
            )
            for i in range(count)
        ]
        for proc in self.procs:
            proc.start()

    def _collect(self, kind: str, count: int) -> dict[int, Any]:
        got: dict[int, Any] = {}
        while len(got) < count:
            try:
                what, index, value = self.outbox.get(timeout=600)
            except Exception:  # queue.Empty: a worker hangs
                raise SystemExit(f"workers: no {kind!r} for 600 s") from None
            if what == "error":
                raise SystemExit(f"worker {index} failed:\n{value}")
            if what != kind:
                raise SystemExit(f"worker {index}: expected {kind!r}, got {what!r}")
            got[index] = value
        return got

    def run(self, jobs: Sequence[tuple[int, tuple[str, Spec, dict[str, Any]]]]) -> list[Any]:
        """Give each (worker, command) its command, start them all at once, their results."""
        for index, command in jobs:
            self.inboxes[index].put(command)
        self._collect("ready", len(jobs))
        start_at = time.time() + 0.05
        for index, _ in jobs:
            self.inboxes[index].put(("go", start_at))
        done = self._collect("done", len(jobs))
        return [done[index] for index, _ in jobs]

    def close(self) -> None:
        for inbox in self.inboxes:
            with contextlib.suppress(Exception):
                inbox.put(None)
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)


# -- part 1: appends ---------------------------------------------------------------------------
def measure_appends(
    workers: Workers,
    specs: dict[str, Spec],
    replayer: Replayer,
    server_cpu: Callable[[], float | None],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Each cell: ``writers`` processes append to one database for ``args.seconds``;
    ``server_cpu`` is the PostgreSQL server's CPU seconds so far (None: not known)."""
    names = [label(k, d) for k, d in APPEND_BACKENDS]
    cells: dict[str, dict[int, list[dict[str, float]]]] = {
        n: {w: [] for w in WRITERS} for n in names
    }
    written = {n: 0 for n in names}
    for round_no in range(args.rounds):
        for w_index, writers in enumerate(WRITERS):
            for name in rounds_order(names, round_no + w_index):
                options = {"seconds": args.seconds}
                cpu0 = server_cpu() if name.startswith("postgres") else None
                results = workers.run(
                    [(i, ("append", specs[name], options)) for i in range(writers)]
                )
                figures = cell_figures(results, "flushes")
                if cpu0 is not None:
                    time.sleep(0.2)  # the writers' backends end and are reaped
                cpu1 = server_cpu() if cpu0 is not None else None
                if cpu0 is not None and cpu1 is not None:
                    events = sum(r["events"] + replayer.events for r in results)  # + warm-up
                    figures["server_cpu_us_per_event"] = 1e6 * (cpu1 - cpu0) / events
                cells[name][writers].append(figures)
                written[name] += sum(r["stored_runs"] for r in results)
                f = cells[name][writers][-1]
                print(
                    f"  round {round_no + 1}, {writers:2d} writer(s), {name:15s}: "
                    f"{f['events_s']:9,.0f} events/s, {f['flushes_s']:7,.0f} flushes/s",
                    flush=True,
                )
    stored = {n: count_runs(specs[n]) for n in names if n != "memory"}
    return {"cells": cells, "stored_vs_written": {n: (stored[n], written[n]) for n in stored}}


def print_appends(part: dict[str, Any], shape: dict[str, int], args: argparse.Namespace) -> None:
    cells = part["cells"]
    print(
        f"\n### Appends: one run = {shape['events']} events in {shape['flushes']} flushes "
        f"({args.iterations} tool-call iterations), {args.seconds:g} s per measurement, "
        f"{args.rounds} round(s): median (min-max)\n"
    )
    table(
        *("writers", "<backend", "events/s", "per writer", "flushes/s", "per writer", "runs/s"),
        *("writer CPU µs/event", "server CPU µs/event", "slowest / fastest writer"),
    )
    for writers in WRITERS:
        for kind, durability in APPEND_BACKENDS:
            rows = cells[label(kind, durability)][writers]
            ev = [r["events_s"] for r in rows]
            fl = [r["flushes_s"] for r in rows]
            known = [r["server_cpu_us_per_event"] for r in rows if "server_cpu_us_per_event" in r]
            server = f"{statistics.median(known):,.1f}" if known else ""
            print(
                f"| {writers} | {label(kind, durability)} | {fmt_spread(ev)} "
                f"| {statistics.median(ev) / writers:,.0f} | {fmt_spread(fl)} "
                f"| {statistics.median(fl) / writers:,.0f} "
                f"| {statistics.median(r['runs_s'] for r in rows):,.1f} "
                f"| {statistics.median(r['cpu_us_per_event'] for r in rows):,.1f} "
                f"| {server:s} | {statistics.median(r['fairness'] for r in rows):.2f} |"
            )
    print()
    table("writers", "<durability", "PG / SQLite, events/s", "SQLite n / 1 writers", "PG n / 1")
    for writers in WRITERS:
        for durability in ("full", "normal"):
            pg, lite = ([r["events_s"] for r in cells[f"{k} {durability}"][writers]] for k in KINDS)
            pg1, lite1 = ([r["events_s"] for r in cells[f"{k} {durability}"][1]] for k in KINDS)
            scale = f"{med(lite) / med(lite1):.2f}x | {med(pg) / med(pg1):.2f}x"
            print(f"| {writers} | {durability} | {fmt_ratios(pg, lite)} | {scale} |")
    print()
    print_cpu_per_run(cells, shape["events"])
    bad = {k: v for k, v in part["stored_vs_written"].items() if v[0] != v[1]}
    print(f"\nRUNS LOST OR EXTRA (stored, written): {bad}" if bad else "\nno run lost or extra")


def print_cpu_per_run(cells: dict[str, dict[int, list[dict[str, float]]]], events: int) -> None:
    """CPU per run, the writers' and (PostgreSQL) the server's: what a run costs the machine,
    whichever process spends it; PG / SQLite per round at equal durability."""
    table(
        *("writers", "<durability", "SQLite ms/run", "PG ms/run (client + server)"),
        *("PG client", "PG server", "PG / SQLite, CPU per run"),
    )

    def per_run(row: dict[str, float], *keys: str) -> float:
        return sum(row.get(k, float("nan")) for k in keys) * events / 1000

    both = ("cpu_us_per_event", "server_cpu_us_per_event")
    for writers in WRITERS:
        for durability in ("full", "normal"):
            pg_rows = cells[f"postgres {durability}"][writers]
            lite = [per_run(r, "cpu_us_per_event") for r in cells[f"sqlite {durability}"][writers]]
            pg = [per_run(r, *both) for r in pg_rows]
            client = med(per_run(r, both[0]) for r in pg_rows)
            server = med(per_run(r, both[1]) for r in pg_rows)
            print(
                f"| {writers} | {durability} | {fmt_spread(lite, 2)} | {fmt_spread(pg, 2)} "
                f"| {client:.2f} | {server:.2f} | {fmt_ratios(pg, lite)} |"
            )


# -- part 2: verification ----------------------------------------------------------------------
def measure_verify(
    workers: Workers, specs: dict[str, Spec], replayer: Replayer, args: argparse.Namespace
) -> dict[str, Any]:
    fill = max(1, -(-args.verify_runs // 4))
    for name in ("sqlite", "postgres"):
        options = {"seconds": float("inf"), "max_runs": fill - 1}  # + the warm-up run
        workers.run([(i, ("append", specs[f"{name} verify"], options)) for i in range(4)])
    cells: dict[str, dict[int, list[dict[str, float]]]] = {
        n: {r: [] for r in READERS} for n in VERIFY_BACKENDS
    }
    opts = {"memory_runs": 4 * fill}
    for round_no in range(args.rounds):
        for r_index, readers in enumerate(READERS):
            for name in rounds_order(VERIFY_BACKENDS, round_no + r_index):
                spec = specs["memory" if name == "memory" else f"{name} verify"]
                results = workers.run([(i, ("verify", spec, opts)) for i in range(readers)])
                _check_verified(name, results, live=False)
                cells[name][readers].append(cell_figures(results, "runs"))
                f = cells[name][readers][-1]
                print(
                    f"  round {round_no + 1}, {readers} reader(s), {name:8s}: "
                    f"{f['runs_s']:8,.0f} runs/s, {f['events_s']:9,.0f} events/s",
                    flush=True,
                )
    loop: dict[str, Any] = {}
    if not args.no_loop:
        loop = _measure_loop(workers, specs, args)
    return {"cells": cells, "runs": 4 * fill, "loop": loop}


def _check_verified(name: str, results: Sequence[dict[str, Any]], *, live: bool) -> None:
    """Every run VALID_UNSIGNED; with writers appending (``live``) also UNSEALED (runs in
    flight) and index rows of runs opened after the pass listed the runs."""
    for r in results:
        if r["failures"] or (not live and (r["unsealed"] or r["index_races"])):
            raise SystemExit(
                f"{name}: {len(r['failures'])} failed, {r['unsealed']} unsealed, "
                f"{r['index_races']} index rows ahead of the events: {r['failures'][:3]}"
            )


def _measure_loop(
    workers: Workers, specs: dict[str, Spec], args: argparse.Namespace
) -> dict[str, Any]:
    """4 writers alone, then 4 writers and a reader verifying in a loop, per backend."""
    out: dict[str, Any] = {}
    durability = args.loop_durability
    for round_no in range(args.rounds):
        for name in rounds_order(("sqlite", "postgres"), round_no):
            spec = {**specs[f"{name} verify"], "durability": durability}
            append = ("append", spec, {"seconds": args.seconds})
            alone = workers.run([(i, append) for i in range(4)])
            verify = ("verify", spec, {"loop_seconds": args.seconds})
            both = workers.run([*((i, append) for i in range(4)), (4, verify)])
            _check_verified(name, both[4:], live=True)
            reader = both[4]
            row = {f"reader_{k}": reader[k] for k in ("unsealed", "index_races", "passes")}
            row.update(alone=cell_figures(alone, "flushes"), reader=cell_figures([reader], "runs"))
            row["with_reader"] = cell_figures(both[:4], "flushes")
            out.setdefault(name, []).append(row)
            print(
                f"  round {round_no + 1}, {name:8s} {durability}: 4 writers "
                f"{row['alone']['events_s']:8,.0f} events/s alone, "
                f"{row['with_reader']['events_s']:8,.0f} with a reader verifying "
                f"{row['reader']['runs_s']:6,.0f} runs/s ({row['reader_passes']} passes: "
                f"{row['reader_unsealed']} unsealed, {row['reader_index_races']} index rows ahead)",
                flush=True,
            )
    return out


def print_verify(part: dict[str, Any], shape: dict[str, int], args: argparse.Namespace) -> None:
    cells = part["cells"]
    print(
        f"\n### verify_all: {part['runs']} runs of {shape['events']} events per database; "
        "each reader verifies the whole database; median (min-max)\n"
    )
    table("readers", "<backend", "runs/s", "events/s", "per reader, runs/s", "ms/run, one reader")
    for readers in READERS:
        for name in VERIFY_BACKENDS:
            rows = cells[name][readers]
            runs = [r["runs_s"] for r in rows]
            ev = [r["events_s"] for r in rows]
            print(
                f"| {readers} | {name} | {fmt_spread(runs)} | {fmt_spread(ev)} "
                f"| {statistics.median(runs) / readers:,.0f} "
                f"| {1000 * readers / statistics.median(runs):.3f} |"
            )
    print()
    table("readers", "PG / SQLite, runs/s", "SQLite / memory")
    for readers in READERS:
        pg, lite, mem = ([r["runs_s"] for r in cells[k][readers]] for k in (*KINDS, "memory"))
        print(f"| {readers} | {fmt_ratios(pg, lite)} | {fmt_ratios(lite, mem)} |")
    if part["loop"]:
        print(
            f"\n### A reader verifying in a loop while 4 writers append "
            f"(durability {args.loop_durability}, {args.seconds:g} s): median (min-max)\n"
        )
        table(
            *("<backend", "writers alone, events/s", "with the reader", "with / alone"),
            *("reader runs/s", "reader events/s", "per pass: unsealed runs, index rows ahead"),
        )
        for name, rows in part["loop"].items():
            alone = [r["alone"]["events_s"] for r in rows]
            both = [r["with_reader"]["events_s"] for r in rows]
            unsealed = med(r["reader_unsealed"] / r["reader_passes"] for r in rows)
            ahead = med(r["reader_index_races"] / r["reader_passes"] for r in rows)
            print(
                f"| {name} | {fmt_spread(alone)} | {fmt_spread(both)} | {fmt_ratios(both, alone)} "
                f"| {fmt_spread([r['reader']['runs_s'] for r in rows])} "
                f"| {fmt_spread([r['reader']['events_s'] for r in rows])} "
                f"| {unsealed:.1f}, {ahead:.1f} |"
            )


# -- part 3: recording per iteration -----------------------------------------------------------
def measure_recording(
    new_target: Callable[[str], tuple[Spec, Callable[[], None]]], args: argparse.Namespace
) -> dict[str, Any]:
    conv = Conversation(args.n)
    out: dict[str, dict[str, list[float]]] = {}
    for durability in ("full", "normal"):
        sides: dict[str, list[float]] = {"memory": [], "sqlite": [], "postgres": []}
        for name in ("sqlite", "postgres"):  # warm-up, untimed
            spec, drop = new_target(name)
            _record(Conversation(8), {**spec, "durability": durability}, verify=True)
            drop()
        for pair in range(args.pairs):
            order = ["sqlite", "postgres"] if pair % 2 == 0 else ["postgres", "sqlite"]
            for name in ["memory", *order]:
                spec, drop = new_target(name)
                try:
                    seconds = _record(conv, {**spec, "durability": durability}, verify=pair == 0)
                finally:
                    drop()
                sides[name].append(1000 * seconds / args.n)
            print(
                f"  {durability}, pair {pair + 1}: memory {sides['memory'][-1]:.3f}, "
                f"sqlite {sides['sqlite'][-1]:.3f}, postgres {sides['postgres'][-1]:.3f} ms/it",
                flush=True,
            )
        out[durability] = sides
    return out


def _record(conv: Conversation, spec: Spec, *, verify: bool) -> float:
    store = open_store(spec)
    try:
        run = run_agent_conversation(conv, store)
        if verify:
            bad = [
                (run_id, r)
                for run_id, r in af.Verifier(store).verify_all()
                if getattr(r, "outcome", None) is not af.Outcome.VALID_UNSIGNED
            ]
            if bad or run.iterations != conv.n:
                raise SystemExit(f"{spec['kind']}: the conversation did not verify: {bad[:1]}")
    finally:
        store.close()
    return run.seconds


def print_recording(part: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"\n### Recording the N={args.n} conversation (ms per iteration), {args.pairs} pair(s) "
        "alternating: median (min-max)\n"
    )
    table(
        *("<durability", "memory", "SQLite", "PostgreSQL", "PG / SQLite, per pair"),
        *("PG - SQLite", "SQLite - memory", "PG - memory"),
    )
    for durability, sides in part.items():
        mem, lite, pg = (statistics.median(sides[k]) for k in ("memory", "sqlite", "postgres"))
        ratios = [p / s for p, s in zip(sides["postgres"], sides["sqlite"], strict=True)]
        print(
            f"| {durability} | {fmt_spread(sides['memory'], 3)} | {fmt_spread(sides['sqlite'], 3)} "
            f"| {fmt_spread(sides['postgres'], 3)} | {fmt_spread(ratios, 2, 'x')} "
            f"| {pg - lite:+.3f} | {lite - mem:+.3f} | {pg - mem:+.3f} |"
        )


def count_runs(spec: Spec) -> int:
    store = open_store(spec, readonly=True)
    try:
        return len(store.index_entries())
    finally:
        store.close()


# -- main --------------------------------------------------------------------------------------
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (< 1 min)")
    parser.add_argument("--seconds", type=float, help="per append measurement (default 4; quick 1)")
    parser.add_argument("--rounds", type=int, help="rounds of parts 1 and 2 (default 3; quick 1)")
    parser.add_argument("--iterations", type=int, default=4, help="tool-call iterations per run")
    parser.add_argument("--verify-runs", type=int, help="runs per verified database (default 1000)")
    parser.add_argument("--n", type=int, help="iterations of the recorded conversation (800)")
    parser.add_argument("--pairs", type=int, help="recording pairs per durability (default 5)")
    parser.add_argument("--loop-durability", choices=("full", "normal"), default="full")
    parser.add_argument("--no-loop", action="store_true", help="skip the reader-in-a-loop part")
    parser.add_argument("--parts", default="1,2,3", help="which parts to run (default 1,2,3)")
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    args = parser.parse_args()
    quick = {"seconds": 1.0, "rounds": 1, "verify_runs": 200, "n": 200, "pairs": 1}
    full = {"seconds": 4.0, "rounds": 3, "verify_runs": 1000, "n": 800, "pairs": 5}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.parts = {int(p) for p in args.parts.split(",") if p.strip()}
    return args


def make_specs(folder: Path, dbs: Databases) -> dict[str, Spec]:
    """Where each backend writes: one SQLite file or PostgreSQL database per durability,
    and one of each for part 2 (filled at ``normal``: durability changes no stored byte)."""
    specs: dict[str, Spec] = {"memory": {"kind": "memory", "durability": None}}
    for kind, durability in [*APPEND_BACKENDS[1:], ("sqlite", "verify"), ("postgres", "verify")]:
        tag = durability or ""
        target = str(folder / f"{tag}.sqlite") if kind == "sqlite" else dbs.create(tag)
        if kind == "sqlite":  # created here: processes creating one file at once can fail
            af.SqliteStore(target).close()  # (StoreBusyError from PRAGMA journal_mode=WAL)
        specs[label(kind, tag)] = {
            "kind": kind,
            "durability": "normal" if tag == "verify" else tag,
            "target": target,
        }
    return specs


def print_probes(probe: dict[str, float]) -> None:
    print(
        f"# probes: fdatasync of 4 KiB {probe['fdatasync_ms']:.3f} ms; PG round trip "
        f"(SELECT 1) {probe['pg_round_trip_ms']:.3f} ms; a bare psycopg transaction of 7 rows "
        f"(executemany) {probe['pg_bare_flush_on_ms']:.3f} ms at synchronous_commit=on, "
        f"{probe['pg_bare_flush_off_ms']:.3f} off; the 7 rows as one multi-row INSERT "
        f"{probe['pg_one_statement_on_ms']:.3f} / {probe['pg_one_statement_off_ms']:.3f} ms"
    )
    print(
        f"# floor, CPU per call (client + server): a bare round trip through libpq (SELECT 1) "
        f"{probe['pg_round_trip_client_cpu_us']:.0f} + "
        f"{probe['pg_round_trip_server_cpu_us']:.0f} µs; a one-row commit "
        f"{probe['pg_commit_on_client_cpu_us']:.0f} + {probe['pg_commit_on_server_cpu_us']:.0f} "
        f"µs at synchronous_commit=on, {probe['pg_commit_off_client_cpu_us']:.0f} + "
        f"{probe['pg_commit_off_server_cpu_us']:.0f} off; one fdatasync of 4 KiB "
        f"{probe['fdatasync_cpu_us']:.0f} µs (-1: the server's process cannot be read)"
    )
    flush = {
        (name, setting): probe[f"pg_flush_{name}_{setting}_client_cpu_us"]
        + probe[f"pg_flush_{name}_{setting}_server_cpu_us"]
        for name in ("rows", "packed")
        for setting in ("on", "off")
    }
    print(
        "# a flush of 7 rows (CPU per flush, client + server), as the store writes it (7 rows "
        f"of events) {flush['rows', 'on']:.0f} / {flush['rows', 'off']:.0f} µs at "
        "synchronous_commit on / off; as one packed row (records in one bytea, the last chain "
        f"hash, a continuity check) {flush['packed', 'on']:.0f} / {flush['packed', 'off']:.0f} µs"
    )
    print(
        "# SQLite, a one-row commit (CPU): "
        f"{probe['sqlite_commit_normal_cpu_us']:.0f} µs at synchronous=NORMAL, "
        f"{probe['sqlite_commit_full_cpu_us']:.0f} at FULL"
    )


def measure(
    args: argparse.Namespace, server: str, cluster: ThrowawayCluster, folder: Path
) -> dict[str, Any]:
    """Every part asked for, into a dict of figures."""
    figures: dict[str, Any] = {}
    dbs = Databases(server)
    workers: Workers | None = None
    try:
        figures["probes"] = probes(server, folder)
        print_probes(figures["probes"])
        template = record_template(args.iterations)
        replayer = Replayer(template)
        specs = make_specs(folder, dbs)
        workers = Workers(max(WRITERS[-1], 5), template) if args.parts & {1, 2} else None
        if 1 in args.parts and workers:
            print("\n## 1. appends")
            cpu = functools.partial(postmaster_cpu, cluster)
            figures["appends"] = measure_appends(workers, specs, replayer, cpu, args)
        if 2 in args.parts and workers:
            print("\n## 2. verification")
            figures["verify"] = measure_verify(workers, specs, replayer, args)
        if workers:
            workers.close()
            workers = None
        if 3 in args.parts:
            print(f"\n## 3. recording, N={args.n}")

            def new_target(kind: str) -> tuple[Spec, Callable[[], None]]:
                if kind == "memory":
                    return {"kind": "memory"}, lambda: None
                if kind == "sqlite":
                    path = folder / f"rec-{uuid.uuid4().hex[:8]}.sqlite"
                    return {"kind": "sqlite", "target": str(path)}, lambda: remove_db(path)
                url = dbs.create("rec")
                return {"kind": "postgres", "target": url}, lambda: dbs.drop(url)

            figures["recording"] = measure_recording(new_target, args)
        figures["replayer"] = {"events": replayer.events, "flushes": replayer.flushes}
    finally:
        if workers is not None:
            workers.close()
        dbs.drop()
    return figures


def main() -> None:
    args = parse_args()
    logging.getLogger("agentfootprint.context").setLevel(logging.ERROR)  # budget notes
    started = time.perf_counter()
    env = environment()
    print_environment(env)
    figures: dict[str, Any] = {"environment": env, "args": {**vars(args)}}
    figures["args"].update(parts=sorted(args.parts), json=str(args.json))
    with (
        postgres_server() as (server, cluster),
        tempfile.TemporaryDirectory(prefix="afbench-stores-") as tmp,
    ):
        what = f"ThrowawayCluster(fsync=True) of {cluster.bindir}"
        print(f"# PostgreSQL: {what}; load {os.getloadavg()}")
        figures.update(measure(args, server, cluster, Path(tmp)))
    figures["load_after"] = os.getloadavg()
    print(f"\n# PostgreSQL: {what}; load at the end {figures['load_after']}")
    shape = figures["replayer"]
    if "appends" in figures:
        print_appends(figures["appends"], shape, args)
    if "verify" in figures:
        print_verify(figures["verify"], shape, args)
    if "recording" in figures:
        print_recording(figures["recording"], args)
    print(f"\n# {time.perf_counter() - started:.0f} s in all")
    write_figures(args.json, figures)


if __name__ == "__main__":
    main()
