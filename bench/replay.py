"""Replay time against recording time, and ``diff_runs`` time, on the scripted conversation.

For each N (same conversation as ``overhead.py``: 4 tool-call iterations per turn,
~500-character tool results, each turn continuing the previous one):

* **record**: the conversation is recorded to a fresh SQLite file (summed ``run_sync``
  time, as in ``overhead.py``);
* **replay**: every run of it, root first, is replayed with ``af.replay_sync`` by ONE
  agent into another fresh SQLite file (summed ``replay_sync`` time). The replay agent
  has the recording agent's configuration (same builder, same tool) but a provider that
  raises if called: responses and tool results come from the recording, every request is
  checked against the original's receipt. Replaying run ``i`` continues the original run
  ``i-1``, which ``replay_sync`` copies into the replay store when it is missing (one run
  copied per replay: the rest of the ancestry is already there). Reported: ms per model
  call for both, and replay / record;
* **diff**: ``af.diff_runs`` over every run pair of two conversations, in order
  (summed time), through stores opened afresh (nothing verified earlier is cached): the
  original against its replay (must be identical), and the original against a recording
  of the same conversation with a changed system prompt (every call must differ);
  reported: seconds, ms per call, ms per run.

Usage::

    python bench/replay.py                  # N = 50, 200, 800 (~2.5 minutes on 2 vCPU)
    python bench/replay.py --quick          # N = 50, 200
    python bench/replay.py --sizes 200 800 5000
    python bench/replay.py --repeat 5 --json replay.json
    python bench/replay.py --profile 800    # only: cProfile of replaying and diffing N=800
"""

from __future__ import annotations

import contextlib
import gc
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    QUICK_SIZES,
    SIZES,
    SYSTEM,
    Conversation,
    announce,
    bench_arguments,
    conversation_agent,
    environment,
    median,
    print_environment,
    profile_report,
    profiled,
    remove_db,
    repeats_for,
    run_agent_conversation,
    write_figures,
)

import agentfootprint as af
from agentfootprint.testing import NoModel

CHANGED_SYSTEM = SYSTEM + " Answer in one paragraph."


def record(conv: Conversation, store: Any, system: str = SYSTEM) -> tuple[float, list[str], int]:
    """(summed run_sync seconds, run ids in order, model calls) of one recording."""
    run = run_agent_conversation(conv, store, system=system)
    return run.seconds, run.run_ids, run.calls


def replay_all(
    conv: Conversation, source: af.SqliteStore, run_ids: list[str], target: af.SqliteStore
) -> tuple[float, list[str], int]:
    """(summed replay_sync seconds, replay run ids, calls checked): one agent, runs in order."""
    agent = conversation_agent(conv, NoModel(), target)
    seconds = 0.0
    replayed: list[str] = []
    checked = 0
    for run_id in run_ids:
        t0 = time.perf_counter()
        result = af.replay_sync(agent, source, run_id)
        seconds += time.perf_counter() - t0
        if result.result.outcome != "answered":
            raise RuntimeError(f"replay of {run_id}: outcome {result.result.outcome!r}")
        replayed.append(result.result.run_id)
        checked += result.calls_checked
    return seconds, replayed, checked


def diff_all(
    store_a: af.SqliteStore, runs_a: list[str], store_b: af.SqliteStore, runs_b: list[str]
) -> tuple[float, list[af.RunDiff]]:
    """(summed diff_runs seconds, the diffs): run i of A against run i of B."""
    seconds = 0.0
    diffs = []
    for run_a, run_b in zip(runs_a, runs_b, strict=True):
        t0 = time.perf_counter()
        diffs.append(af.diff_runs(store_a, run_a, store_b, run_b))
        seconds += time.perf_counter() - t0
    return seconds, diffs


@contextlib.contextmanager
def cold(path: Path) -> Iterator[af.SqliteStore]:
    """The database at ``path`` through a new store object (its own, empty, verifier cache)."""
    store = af.SqliteStore(path)
    try:
        yield store
    finally:
        store.close()


def _open(path: Path) -> af.SqliteStore:
    remove_db(path)
    return af.SqliteStore(path)


def _check(
    n: int,
    calls: int,
    original: af.SqliteStore,
    runs: list[str],
    replayed: af.SqliteStore,
    replay_runs: list[str],
    same: list[af.RunDiff],
    differ: list[af.RunDiff],
) -> dict[str, Any]:
    """Untimed checks of what the replay and the diffs must say (raises when one fails)."""
    differing_calls = {(i, d.call) for i, rd in enumerate(differ) for d in rd.differences}
    checks = {
        "replay_identical": all(d.identical for d in same),
        "replay_same_recording": all(
            af.same_recording(original, a, replayed, b)
            for a, b in zip(runs, replay_runs, strict=True)
        ),
        "changed_calls_differing": len(differing_calls),
        "changed_differences": sum(len(rd.differences) for rd in differ),
        "changed_kinds": sorted({d.kind for rd in differ for d in rd.differences}),
        "replay_store_runs": len(replayed.runs()),
    }
    if not checks["replay_identical"]:
        raise RuntimeError(f"N={n}: diff_runs found differences between a run and its replay")
    if not checks["replay_same_recording"]:
        raise RuntimeError(f"N={n}: a replay is not the same recording as its original")
    if checks["changed_calls_differing"] != calls:
        raise RuntimeError(
            f"N={n}: {checks['changed_calls_differing']} of {calls} calls differ "
            "with a changed system prompt; expected all"
        )
    return checks


def measure_n(n: int, repeat: int, workdir: Path) -> dict[str, Any]:
    conv = Conversation(n)
    paths = {k: workdir / f"{k}-{n}.sqlite" for k in ("original", "replay", "changed")}
    record_s: list[float] = []
    replay_s: list[float] = []
    same_identical_s: list[float] = []
    changed_s: list[float] = []
    calls = turns = 0
    checks: dict[str, Any] = {}
    for _ in range(repeat):
        original, replayed, changed = (_open(p) for p in paths.values())
        try:
            gc.collect()
            seconds, runs, calls = record(conv, original)
            record_s.append(seconds)
            turns = len(runs)
            gc.collect()
            seconds, replay_runs, checked = replay_all(conv, original, runs, replayed)
            replay_s.append(seconds)
            if checked != calls:
                raise RuntimeError(f"replay checked {checked} calls of {calls}")
            _, changed_runs, changed_calls = record(conv, changed, CHANGED_SYSTEM)
            assert changed_calls == calls
            # each diff reads stores opened afresh: no run verified by an earlier step is
            # cached, so every diff verifies the ancestry it reads, as a new process would
            gc.collect()
            with cold(paths["original"]) as a, cold(paths["replay"]) as b:
                seconds, same = diff_all(a, runs, b, replay_runs)
            same_identical_s.append(seconds)
            gc.collect()
            with cold(paths["original"]) as a, cold(paths["changed"]) as b:
                seconds, differ = diff_all(a, runs, b, changed_runs)
            changed_s.append(seconds)
            checks = _check(n, calls, original, runs, replayed, replay_runs, same, differ)
        finally:
            for store in (original, replayed, changed):
                store.close()
            for path in paths.values():
                remove_db(path)
    return {
        "n": n,
        "turns": turns,
        "calls": calls,
        "repeat": repeat,
        "record_seconds": median(record_s),
        "replay_seconds": median(replay_s),
        "diff_identical_seconds": median(same_identical_s),
        "diff_changed_seconds": median(changed_s),
        "all": {
            "record": record_s,
            "replay": replay_s,
            "diff_identical": same_identical_s,
            "diff_changed": changed_s,
        },
        "checks": checks,
    }


def _ms(seconds: float, count: int) -> float:
    return 1000 * seconds / count


def print_tables(results: list[dict[str, Any]]) -> None:
    print()
    print("Replay against recording (SQLite; ms per model call, median of the repeats)")
    header = (
        f"{'N':>5} {'runs':>5} {'calls':>6} {'rep':>3} {'record s':>9} {'replay s':>9} "
        f"{'record ms/call':>15} {'replay ms/call':>15} {'replay/record':>14}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        rec, rep, calls = r["record_seconds"], r["replay_seconds"], r["calls"]
        print(
            f"{r['n']:>5} {r['turns']:>5} {calls:>6} {r['repeat']:>3} {rec:>9.3f} {rep:>9.3f} "
            f"{_ms(rec, calls):>15.3f} {_ms(rep, calls):>15.3f} {rep / rec:>13.2f}x"
        )
    print()
    print("diff_runs over every run pair of two conversations (summed, median of the repeats)")
    header = (
        f"{'N':>5} {'runs':>5} {'calls':>6} {'vs replay s':>12} {'ms/call':>8} {'ms/run':>7} "
        f"{'vs changed s':>13} {'ms/call':>8} {'ms/run':>7} {'differing calls':>16}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        calls, runs = r["calls"], r["turns"]
        same, changed = r["diff_identical_seconds"], r["diff_changed_seconds"]
        print(
            f"{r['n']:>5} {runs:>5} {calls:>6} {same:>12.3f} {_ms(same, calls):>8.3f} "
            f"{_ms(same, runs):>7.2f} {changed:>13.3f} {_ms(changed, calls):>8.3f} "
            f"{_ms(changed, runs):>7.2f} {r['checks']['changed_calls_differing']:>7} of "
            f"{calls:<6}"
        )
    for r in results:
        c = r["checks"]
        print(
            f"  N={r['n']}: replay identical {c['replay_identical']}, same_recording "
            f"{c['replay_same_recording']}; changed system: {c['changed_differences']} "
            f"differences ({', '.join(c['changed_kinds'])}); replay store holds "
            f"{c['replay_store_runs']} runs"
        )
    if len(results) > 1:
        first, last = results[0], results[-1]

        def growth(key: str) -> float:
            return float((last[key] / last["calls"]) / (first[key] / first["calls"]))

        print(
            f"  ms/call growth N={first['n']} -> N={last['n']}: record "
            f"{growth('record_seconds'):.2f}x, replay {growth('replay_seconds'):.2f}x, "
            f"diff vs replay {growth('diff_identical_seconds'):.2f}x, diff vs changed "
            f"{growth('diff_changed_seconds'):.2f}x (1.00x is linear)"
        )


def profile(n: int, top: int, workdir: Path) -> str:
    """cProfile of replaying, then diffing against the replay, the N-iteration conversation."""
    conv = Conversation(n)
    original = _open(workdir / "p-original.sqlite")
    replayed = _open(workdir / "p-replay.sqlite")
    warm = _open(workdir / "p-warm.sqlite")
    try:
        _, runs, calls = record(conv, original)
        replay_all(conv, original, runs[:2], warm)  # imports and first-call costs
        profiler, (_, replay_runs, _), seconds = profiled(
            lambda: replay_all(conv, original, runs, replayed)
        )
        text = profile_report(
            profiler,
            f"\n=== cProfile: replay_sync of every run ({len(runs)} runs, {calls} calls), "
            f"N={n} ({seconds:.2f} s under the profiler)",
            top,
        )
        profiler, _, seconds = profiled(lambda: diff_all(original, runs, replayed, replay_runs))
        more = profile_report(
            profiler,
            f"\n=== cProfile: diff_runs of every run against its replay, N={n} "
            f"({seconds:.2f} s under the profiler)",
            top,
        )
    finally:
        for store in (original, replayed, warm):
            store.close()
    return text + more


def main(argv: list[str] | None = None) -> int:
    parser = bench_arguments(
        __doc__,
        repeat_default=None,
        repeat_help="repetitions (default 3 for N<=200, 1 above)",
        profile_help="only profile replay and diff",
    )
    parser.add_argument("--sizes", type=int, nargs="+", help="N values (default 50 200 800)")
    args = parser.parse_args(argv)

    env = environment()
    print_environment(env)
    with tempfile.TemporaryDirectory(prefix="afp-replay-") as tmp:
        workdir = Path(tmp)
        if args.profile:
            print(profile(args.profile, args.top, workdir))
            return 0
        sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
        announce(sizes)
        results = []
        for n in sizes:
            repeat = repeats_for(n, args.repeat)
            print(f"... N={n} ({repeat} repetition{'s' if repeat > 1 else ''})", flush=True)
            results.append(measure_n(n, repeat, workdir))
    print_tables(results)
    write_figures(args.json, {"environment": env, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
