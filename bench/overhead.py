"""Recording overhead and database size of agentfootprint, next to LangGraph + SqliteSaver.

For each N (tool-call iterations over the whole conversation; 4 per turn, one
~500-character tool result each, every turn ``run_sync(msg, continue_from=prev)``):

* time per iteration of the same scripted conversation
    - ``plain``: a minimal ReAct loop over a message list, same MockProvider and
      tool function, no agentfootprint at all;
    - ``mem -rcpt``: agentfootprint recording to a ``MemoryStore`` with
      ``record_receipt=False`` (events, writes and hashes, no receipts);
    - ``memory``: agentfootprint recording to a ``MemoryStore`` (everything but SQLite);
    - ``sqlite``: agentfootprint recording to a fresh SQLite file (the default setup);
    - ``langgraph``: LangGraph with ``SqliteSaver`` on the equivalent conversation
      (``langgraph_peer.run_langgraph_conversation``);
* database bytes per iteration (file + -wal + -shm after closing and a separate
  ``PRAGMA wal_checkpoint(TRUNCATE)``) for agentfootprint and for SqliteSaver, and for
  SqliteSaver with the messages in LangGraph's beta ``DeltaChannel`` (one run per N:
  bytes only; ``delta.py`` times it too).

Targets: bytes per iteration at N=800 within 1.25x of N=50 (linear growth), and the
N=800 database at least 50x smaller than SqliteSaver's.

Usage::

    python bench/overhead.py                   # N = 50, 200, 800 (~1-2 minutes)
    python bench/overhead.py --quick           # N = 50, 200
    python bench/overhead.py --repeat 5 --json figures.json --keep-dir /tmp/afp-bench
    python bench/overhead.py --profile 800     # cProfile of one agent conversation
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    ITERATIONS_PER_TURN,
    QUICK_SIZES,
    RESULT_CHARS,
    SIZES,
    Conversation,
    announce,
    bench_arguments,
    checkpoint_and_measure,
    db_breakdown,
    environment,
    final_text,
    median,
    print_environment,
    remove_db,
    repeats_for,
    run_agent_conversation,
    run_plain_conversation,
    tool_result,
    user_text,
    verdict,
    write_figures,
)

import agentfootprint as af

LINEAR_LIMIT = 1.25  # bytes/iter at the largest N over bytes/iter at the smallest
LANGGRAPH_FACTOR = 50.0  # SqliteSaver bytes over ours at N=800, at least
VARIANTS = ("plain", "mem_norcpt", "memory", "sqlite")


def _check_same_script() -> None:
    """Our conversation text must be the peer's, byte for byte."""
    import langgraph_peer as peer

    for i in (0, 1, 7, 799):
        assert tool_result(i) == peer._tool_result(i, RESULT_CHARS), "tool results differ"
        assert user_text(i) == peer._user_text(i), "user messages differ"
        assert final_text(i) == peer._final_text(i), "final answers differ"
    assert peer.TOOL_NAME == "search_docs"


def _run_sqlite(conv: Conversation, path: Path) -> tuple[float, int, int]:
    """(seconds, db bytes, turns) of one conversation recorded to a fresh SQLite file."""
    remove_db(path)
    store = af.SqliteStore(path)
    try:
        run = run_agent_conversation(conv, store)
    finally:
        store.close()
    return run.seconds, checkpoint_and_measure(path), run.turns


def measure_n(
    n: int, repeat: int, workdir: Path, keep_dir: Path | None, with_langgraph: bool
) -> dict[str, Any]:
    conv = Conversation(n)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    sqlite_bytes = 0
    turns = 0
    db_path = (keep_dir or workdir) / f"afp-{n}.sqlite"
    for _ in range(repeat):
        # interleaved, so slow drift of the machine hits every variant alike
        gc.collect()
        times["plain"].append(run_plain_conversation(conv))
        gc.collect()
        times["mem_norcpt"].append(
            run_agent_conversation(conv, af.MemoryStore(), record_receipt=False).seconds
        )
        gc.collect()
        times["memory"].append(run_agent_conversation(conv, af.MemoryStore()).seconds)
        gc.collect()
        seconds, sqlite_bytes, turns = _run_sqlite(conv, db_path)
        times["sqlite"].append(seconds)
    result: dict[str, Any] = {
        "n": n,
        "turns": turns,
        "repeat": repeat,
        "seconds": {v: median(ts) for v, ts in times.items()},
        "seconds_all": times,
        "db_bytes": sqlite_bytes,
        "db_path": str(db_path) if keep_dir else None,
        "breakdown": db_breakdown(db_path),
    }
    if keep_dir is None:
        remove_db(db_path)
    if with_langgraph:
        from langgraph_peer import run_langgraph_conversation

        lg_path = workdir / f"langgraph-{n}.sqlite"
        runs = []
        for _ in range(repeat):
            gc.collect()
            runs.append(
                run_langgraph_conversation(
                    n,
                    str(lg_path),
                    iterations_per_turn=ITERATIONS_PER_TURN,
                    result_chars=RESULT_CHARS,
                )
            )
            remove_db(lg_path)
        result["langgraph"] = {
            "seconds": median(r["seconds"] for r in runs),
            "seconds_all": [r["seconds"] for r in runs],
            "steps": runs[-1]["steps"],
            "checkpoints": runs[-1]["checkpoints"],
            "db_bytes": runs[-1]["db_bytes"],
        }
        gc.collect()
        delta = run_langgraph_conversation(
            n,
            str(lg_path),
            iterations_per_turn=ITERATIONS_PER_TURN,
            result_chars=RESULT_CHARS,
            channel="delta",
        )
        remove_db(lg_path)
        result["langgraph_delta"] = {
            "seconds": delta["seconds"],
            "checkpoints": delta["checkpoints"],
            "db_bytes": delta["db_bytes"],
        }
    return result


def _ms(seconds: float, n: int) -> str:
    return f"{1000 * seconds / n:.3f}"


def print_tables(results: list[dict[str, Any]]) -> None:
    print()
    print("Time per tool-call iteration (ms, median of the repeats; only the turn calls timed)")
    header = (
        f"{'N':>5} {'rep':>3} {'plain':>8} {'mem-rcpt':>9} {'memory':>8} {'sqlite':>8} "
        f"{'langgraph':>10} {'sqlite-plain':>13} {'sqlite/plain':>13} {'sqlite/mem':>11} "
        f"{'lg/sqlite':>10}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        n, s = r["n"], r["seconds"]
        lg = r.get("langgraph")
        lg_ms = _ms(lg["seconds"], n) if lg else "-"
        lg_ratio = f"{lg['seconds'] / s['sqlite']:.2f}x" if lg else "-"
        print(
            f"{n:>5} {r['repeat']:>3} {_ms(s['plain'], n):>8} {_ms(s['mem_norcpt'], n):>9} "
            f"{_ms(s['memory'], n):>8} {_ms(s['sqlite'], n):>8} {lg_ms:>10} "
            f"{_ms(s['sqlite'] - s['plain'], n):>13} {s['sqlite'] / s['plain']:>12.1f}x "
            f"{s['sqlite'] / s['memory']:>10.2f}x {lg_ratio:>10}"
        )
    if any("langgraph" in r for r in results):
        print(
            "  (langgraph per node step, ms: "
            + ", ".join(
                f"N={r['n']}: {1000 * r['langgraph']['seconds'] / r['langgraph']['steps']:.3f}"
                for r in results
                if "langgraph" in r
            )
            + ")"
        )

    print()
    print("Database size (bytes; file + -wal + -shm after close and wal_checkpoint(TRUNCATE))")
    header = (
        f"{'N':>5} {'turns':>5} {'afp bytes':>12} {'afp B/iter':>11} {'lg bytes':>14} "
        f"{'lg B/iter':>11} {'lg ckpts':>8} {'lg/afp':>8} {'delta B/iter':>12} {'delta/afp':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        n = r["n"]
        lg, delta = r.get("langgraph"), r.get("langgraph_delta")
        lg_cols = (
            f"{lg['db_bytes']:>14,} {lg['db_bytes'] / n:>11,.0f} {lg['checkpoints']:>8} "
            f"{lg['db_bytes'] / r['db_bytes']:>7.1f}x"
            if lg
            else f"{'-':>14} {'-':>11} {'-':>8} {'-':>8}"
        )
        delta_cols = (
            f"{delta['db_bytes'] / n:>12,.0f} {delta['db_bytes'] / r['db_bytes']:>8.2f}x"
            if delta
            else f"{'-':>12} {'-':>9}"
        )
        print(
            f"{n:>5} {r['turns']:>5} {r['db_bytes']:>12,} {r['db_bytes'] / n:>11,.0f} "
            f"{lg_cols} {delta_cols}"
        )
    if any("langgraph_delta" in r for r in results):
        print("  (delta: SqliteSaver, messages in a DeltaChannel, default snapshot_frequency)")

    big = results[-1]
    b = big["breakdown"]
    print()
    print(f"Where agentfootprint's bytes go at N={big['n']} ({big['db_bytes']:,} bytes on disk)")
    for kind, row in b["by_type"].items():
        print(
            f"  {kind:<10} {row['rows']:>6} rows  {row['body_bytes']:>10,} body bytes "
            f"({row['body_bytes'] / row['rows']:.0f}/row)"
        )
    rows = sum(row["rows"] for row in b["by_type"].values())
    print(
        f"  commit markers with no writes: {b['empty_commits']} of "
        f"{b['by_type'].get('commit', {}).get('rows', 0)}; "
        f"hash blobs {b['hash_bytes']:,} B; run_id text {b['run_id_bytes_in_events']:,} B "
        f"in {rows} rows (again in the primary-key index)"
    )
    if b["btree_bytes"]:
        print("  pages per b-tree: " + ", ".join(f"{k} {v:,}" for k, v in b["btree_bytes"].items()))


def targets(results: list[dict[str, Any]]) -> dict[str, Any]:
    by_n = {r["n"]: r for r in results}
    out: dict[str, Any] = {}
    small, large = min(by_n), max(by_n)
    growth = (by_n[large]["db_bytes"] / large) / (by_n[small]["db_bytes"] / small)
    out["linear"] = {
        "from": small,
        "to": large,
        "ratio": growth,
        "limit": LINEAR_LIMIT,
        "met": growth <= LINEAR_LIMIT if large == 800 and small == 50 else None,
    }
    lg = by_n[large].get("langgraph")
    factor = lg["db_bytes"] / by_n[large]["db_bytes"] if lg else None
    out["langgraph"] = {
        "n": large,
        "factor": factor,
        "limit": LANGGRAPH_FACTOR,
        "met": (factor >= LANGGRAPH_FACTOR) if (factor is not None and large == 800) else None,
    }
    time_growth = (by_n[large]["seconds"]["sqlite"] / large) / (
        by_n[small]["seconds"]["sqlite"] / small
    )
    out["time_growth_sqlite"] = time_growth
    out["time_growth_plain"] = (by_n[large]["seconds"]["plain"] / large) / (
        by_n[small]["seconds"]["plain"] / small
    )
    return out


def print_targets(t: dict[str, Any]) -> None:
    lin, lg = t["linear"], t["langgraph"]
    print()
    print("Targets")
    note = "" if lin["met"] is not None else "  (needs N=50 and N=800: run without --quick)"
    print(
        f"  bytes/iter at N={lin['to']} / N={lin['from']} = {lin['ratio']:.3f} "
        f"(limit {lin['limit']})  -> {verdict(lin['met'])}{note}"
    )
    if lg["factor"] is None:
        print("  SqliteSaver / agentfootprint database size: not measured (--no-langgraph)")
    else:
        note = "" if lg["met"] is not None else "  (the target is at N=800: run without --quick)"
        print(
            f"  SqliteSaver / agentfootprint database at N={lg['n']} = {lg['factor']:.1f}x "
            f"(at least {lg['limit']:.0f}x)  -> {verdict(lg['met'])}{note}"
        )
    print(
        f"  (no target) ms/iter growth, largest N over smallest: sqlite "
        f"{t['time_growth_sqlite']:.2f}x, plain loop {t['time_growth_plain']:.2f}x"
    )


# (file, function) pairs whose cumulative time the profile summary reports per iteration
HOT_SPOTS = (
    ("runners.py", "run", "asyncio.run + Runner.run (run_sync), all of it"),
    ("runners.py", "close", "asyncio.run teardown (default executor shutdown)"),
    ("<string>", "__repr__", "dataclass __repr__ (RunResult, from asyncio's SIGINT restore)"),
    ("run.py", "execute", "the chart walk (every stage + commit)"),
    ("stages.py", "call_llm", "stage call-llm (receipt + provider call)"),
    ("request.py", "digests", "RequestHasher.digests (receipt digests)"),
    ("request.py", "request_digest", "request_digest (canon of the digest lists)"),
    ("mock.py", "complete", "MockProvider.complete (the scripted model)"),
    ("stages.py", "tool_calls", "stage tool-calls"),
    ("tools.py", "call_tool", "call_tool (asyncio.to_thread for a sync tool)"),
    ("run.py", "_commit", "RunState._commit (net writes + writer)"),
    ("scope.py", "net_writes", "Scope.net_writes"),
    ("scope.py", "set", "Scope.set (to_json_value)"),
    ("scope.py", "append", "Scope.append"),
    ("writer.py", "append", "RunWriter.append (canon + event/chain hashes + store)"),
    ("chain.py", "event_hash", "event_hash"),
    ("sqlite.py", "append", "SqliteStore.append (one transaction per commit)"),
    ("canonical.py", "check_ijson", "check_ijson (I-JSON walk, all callers)"),
    ("canonical.py", "canon", "canon (all callers)"),
)


def hot_spots(stats: pstats.Stats, n: int) -> list[tuple[str, int, float, float]]:
    """(label, calls, cumulative seconds, ms per iteration) of the functions in HOT_SPOTS."""
    table: dict[tuple[str, str], tuple[int, float]] = {}
    for (filename, _line, func), (_cc, nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        key = (Path(filename).name, func)
        calls, cum = table.get(key, (0, 0.0))
        # recursive functions appear once per line; keep the largest cumulative time
        table[key] = (calls + nc, max(cum, ct))
    out = []
    for filename, func, label in HOT_SPOTS:
        if (filename, func) in table:
            calls, cum = table[(filename, func)]
            out.append((label, calls, cum, 1000 * cum / n))
    return out


def profile(n: int, top: int, workdir: Path) -> str:
    """cProfile of one agent conversation recorded to SQLite; top functions as text."""
    warm = workdir / "warm-up.sqlite"
    store = af.SqliteStore(warm)  # imports and first-call costs out of the profile
    try:
        run_agent_conversation(Conversation(8), store)
    finally:
        store.close()
        remove_db(warm)
    conv = Conversation(n)
    path = workdir / f"profile-{n}.sqlite"
    remove_db(path)
    store = af.SqliteStore(path)
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        run = run_agent_conversation(conv, store)
        profiler.disable()
    finally:
        store.close()
        remove_db(path)
    out = io.StringIO()
    out.write(
        f"cProfile of the agent conversation, N={n}, SQLite "
        f"({run.seconds:.2f} s in run_sync under the profiler, "
        f"{1000 * run.seconds / n:.2f} ms/iter)\n\n"
    )
    stats = pstats.Stats(profiler, stream=out)
    out.write("Hot spots (cumulative; nested entries overlap):\n")
    out.write(f"  {'':<62} {'calls':>8} {'cum s':>8} {'ms/iter':>8}\n")
    for label, calls, cum, per_iter in hot_spots(stats, n):
        out.write(f"  {label:<62} {calls:>8} {cum:>8.3f} {per_iter:>8.3f}\n")
    out.write("\n")
    stats.strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = bench_arguments(
        __doc__,
        repeat_default=None,
        repeat_help="timing repetitions (default 3 for N<=200, 1 above)",
        profile_help="only profile one agent conversation of N",
    )
    parser.add_argument(
        "--keep-dir", type=Path, help="keep the agentfootprint databases here (for verify.py)"
    )
    parser.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph peer")
    args = parser.parse_args(argv)

    env = environment()
    print_environment(env)
    with tempfile.TemporaryDirectory(prefix="afp-overhead-") as tmp:
        workdir = Path(tmp)
        if args.profile:
            print(profile(args.profile, args.top, workdir))
            return 0
        with_langgraph = not args.no_langgraph
        if with_langgraph:
            _check_same_script()
        if args.keep_dir:
            args.keep_dir.mkdir(parents=True, exist_ok=True)
        sizes = QUICK_SIZES if args.quick else SIZES
        announce(sizes)
        results = []
        for n in sizes:
            repeat = repeats_for(n, args.repeat)
            print(f"... N={n} ({repeat} repetition{'s' if repeat > 1 else ''})", flush=True)
            results.append(measure_n(n, repeat, workdir, args.keep_dir, with_langgraph))
    print_tables(results)
    t = targets(results)
    print_targets(t)
    write_figures(args.json, {"environment": env, "results": results, "targets": t})
    return 0


if __name__ == "__main__":
    sys.exit(main())
