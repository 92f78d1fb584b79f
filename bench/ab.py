"""A/B benchmark of recording and verification between two source trees, side by side.

A is a checkout of an earlier commit (by default the git worktree ``/work/ab-before``,
made with ``git -C /work/main worktree add /work/ab-before fdc8431``), B the working tree
this script sits in (``src/``, uncommitted changes included). Every measurement runs in
a fresh subprocess of the same Python with ``PYTHONPATH`` set to one tree's ``src``, so
each side imports its own ``agentfootprint``; the conversation code is always this
tree's ``bench/common.py`` (the run says whether A's copy differs). A and B alternate,
A first in every pair.

One measurement (one subprocess), at N tool-call iterations of ``common.Conversation``:

* a small untimed warm-up conversation (imports and first-call costs out of the figures);
* ``--inner`` times: record the conversation into a ``MemoryStore``, then into a fresh
  SQLite file (only the ``run_sync`` calls timed, as ``overhead.py``), then verify every
  run of that file with one ``Verifier(store).verify_all()`` (each run must come out
  ``VALID_UNSIGNED``; per run with ``verify`` if the tree has no ``verify_all``); the
  subprocess reports the median of its inner repetitions;
* sizes, from the last SQLite file: database bytes (file + -wal + -shm after
  ``wal_checkpoint(TRUNCATE)``, ``common.checkpoint_and_measure``) and the exact sum of the
  stored canonical bodies of every row, also split into ``run.open`` rows and the rest.

Printed per metric: median of A, median of B, B/A of the medians, and the spread
(min-max) of the per-pair ratios B_i/A_i. ``--profile`` instead runs, per side, one cProfile of a
SQLite recording and one of verifying it, and prints the top functions by cumulative time
of each, then the functions whose time moved most from A to B (matched by module and name).

Usage::

    python bench/ab.py                     # 10 pairs at N = 200 (about 1 min on 2 vCPU)
    python bench/ab.py --quick             # 3 pairs, 1 inner repetition (smoke run)
    python bench/ab.py --pairs 20 --n 200 --inner 3 --json ab.json
    python bench/ab.py --profile --top 15  # cProfile of recording and verifying, B vs A
    python bench/ab.py --a /path/to/old/src --b src
    python bench/ab.py --a /work/ab-a8c3d27/src --n 800 --durability full   # issue 13
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DEFAULT_A = Path("/work/ab-before/src")
DEFAULT_B = ROOT / "src"
WARMUP_N = 8

# (key, label, decimals): the order of the table
METRICS: tuple[tuple[str, str, int], ...] = (
    ("memory_ms", "record, MemoryStore (ms/it)", 3),
    ("sqlite_ms", "record, SQLite (ms/it)", 3),
    ("verify_ms", "verify_all, SQLite (ms/it)", 3),
    ("memory_cpu_ms", "record, MemoryStore, CPU (ms/it)", 3),
    ("sqlite_cpu_ms", "record, SQLite, CPU (ms/it)", 3),
    ("verify_cpu_ms", "verify_all, SQLite, CPU (ms/it)", 3),
    ("db_bytes", "SQLite db bytes/it (checkpointed)", 1),
    ("body_bytes", "body bytes/it, all rows", 2),
    ("body_bytes_open", "body bytes/it, run.open rows", 2),
    ("body_bytes_rest", "body bytes/it, other rows", 2),
    ("rows", "rows/it, all", 3),
    ("rows_open", "rows/it, run.open", 3),
)


# -- the measuring subprocess ---------------------------------------------------------------
def _import_tree(tree: Path) -> Any:
    """Import ``agentfootprint`` and make sure it is the one of ``tree``."""
    sys.path.insert(0, str(BENCH))
    import agentfootprint as af

    where = Path(af.__file__).resolve()
    if tree.resolve() not in where.parents:
        raise SystemExit(f"imported {where}, not from {tree}: is PYTHONPATH set?")
    return af


def _verify_file(af: Any, store: Any, order: list[str]) -> int:
    """Verify every run of ``store``; return how many runs came out VALID_UNSIGNED."""
    verifier = af.Verifier(store)
    if hasattr(verifier, "verify_all"):
        results = list(verifier.verify_all())
    else:
        results = [(run_id, verifier.verify(run_id)) for run_id in order]
    bad = [
        (run_id, r)
        for run_id, r in results
        if getattr(r, "outcome", None) is not af.Outcome.VALID_UNSIGNED
    ]
    if bad:
        raise SystemExit(f"{len(bad)} of {len(results)} runs did not verify: {bad[0]!r}")
    return len(results)


def _sizes(af: Any, path: Path, order: list[str]) -> dict[str, int]:
    """Exact row and body-byte counts of every run, split into run.open and the rest."""
    out = {"rows": 0, "rows_open": 0, "body_bytes": 0, "body_bytes_open": 0}
    store = af.SqliteStore(path)
    try:
        for run_id in order:
            for event in store.read(run_id):
                size = len(bytes(event.body))
                out["rows"] += 1
                out["body_bytes"] += size
                if event.type == "run.open":
                    out["rows_open"] += 1
                    out["body_bytes_open"] += size
    finally:
        store.close()
    out["rows_rest"] = out["rows"] - out["rows_open"]
    out["body_bytes_rest"] = out["body_bytes"] - out["body_bytes_open"]
    return out


def _writing_store(af: Any, path: Path, durability: str | None) -> Any:
    """A SQLite store for recording at ``durability`` (``full`` / ``normal``; None: the
    tree's default), in the tree's own terms: ``durability=`` since log format 3,
    SQLite's ``synchronous=`` before it."""
    import inspect

    if durability is None:
        return af.SqliteStore(path)
    if "durability" in inspect.signature(af.SqliteStore).parameters:
        return af.SqliteStore(path, durability=durability)
    return af.SqliteStore(path, synchronous=durability.upper())


def child(
    tree: Path, n: int, inner: int, db: Path, durability: str | None = None
) -> dict[str, Any]:
    import gc

    af = _import_tree(tree)
    from common import (
        Conversation,
        checkpoint_and_measure,
        conversation_order,
        remove_db,
        run_agent_conversation,
    )

    run_agent_conversation(Conversation(WARMUP_N), af.MemoryStore())
    conv = Conversation(n)
    wall: dict[str, list[float]] = {"memory": [], "sqlite": [], "verify": []}
    cpu: dict[str, list[float]] = {"memory": [], "sqlite": [], "verify": []}
    db_size = runs = 0
    order: list[str] = []
    for _ in range(inner):
        gc.collect()
        c0 = time.process_time()
        run = run_agent_conversation(conv, af.MemoryStore())
        cpu["memory"].append(time.process_time() - c0)
        wall["memory"].append(run.seconds)
        if run.iterations != n:
            raise SystemExit(f"memory run made {run.iterations} iterations, not {n}")
        remove_db(db)
        gc.collect()
        store = _writing_store(af, db, durability)
        try:
            c0 = time.process_time()
            run = run_agent_conversation(conv, store)
            cpu["sqlite"].append(time.process_time() - c0)
            wall["sqlite"].append(run.seconds)
        finally:
            store.close()
        db_size = checkpoint_and_measure(db)
        store = af.SqliteStore(db)
        try:
            order = conversation_order(store)
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            runs = _verify_file(af, store, order)
            wall["verify"].append(time.perf_counter() - t0)
            cpu["verify"].append(time.process_time() - c0)
        finally:
            store.close()
    sizes = _sizes(af, db, order)
    remove_db(db)
    per_it = 1000.0 / n
    return {
        "tree": str(tree),
        "module": af.__file__,
        "runs": runs,
        **{f"{k}_ms": statistics.median(v) * per_it for k, v in wall.items()},
        **{f"{k}_cpu_ms": statistics.median(v) * per_it for k, v in cpu.items()},
        "db_bytes": db_size / n,
        **{key: value / n for key, value in sizes.items()},
        "raw": {"wall_s": wall, "cpu_s": cpu, "sizes": sizes},
    }


def profile_child(tree: Path, n: int, db: Path, stats_dir: Path) -> None:
    """cProfile one SQLite recording of the conversation, then one ``verify_all`` of it;
    the stats go to ``stats_dir/record.prof`` and ``stats_dir/verify.prof``."""
    import cProfile

    af = _import_tree(tree)
    from common import Conversation, conversation_order, remove_db, run_agent_conversation

    run_agent_conversation(Conversation(WARMUP_N), af.MemoryStore())
    conv = Conversation(n)
    remove_db(db)
    store = af.SqliteStore(db)
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        run = run_agent_conversation(conv, store)
        profiler.disable()
    finally:
        store.close()
    profiler.dump_stats(str(stats_dir / "record.prof"))
    store = af.SqliteStore(db)
    profiler = cProfile.Profile()
    try:
        order = conversation_order(store)
        t0 = time.perf_counter()
        profiler.enable()
        _verify_file(af, store, order)
        profiler.disable()
        verify_seconds = time.perf_counter() - t0
    finally:
        store.close()
    remove_db(db)
    profiler.dump_stats(str(stats_dir / "verify.prof"))
    print(json.dumps({"record": run.seconds, "verify": verify_seconds, "module": af.__file__}))


# -- the parent ------------------------------------------------------------------------------
def _spawn(tree: Path, args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"measurement of {tree} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _git(*args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip()


def tree_digest(tree: Path) -> str:
    """SHA-256 over the paths and bytes of every ``.py`` file under ``tree`` (a state tag)."""
    h = hashlib.sha256()
    for path in sorted(tree.rglob("*.py")):
        h.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def state(a: Path, b: Path) -> dict[str, Any]:
    a_common = a.parent / "bench" / "common.py"
    same = a_common.exists() and a_common.read_bytes() == (BENCH / "common.py").read_bytes()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "loadavg": os.getloadavg(),
        "a": str(a),
        "b": str(b),
        "a_head": subprocess.run(
            ["git", "-C", str(a), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
        "b_head": _git("rev-parse", "--short", "HEAD"),
        "b_diff_stat": (_git("diff", "--stat").splitlines() or ["(no changes)"])[-1].strip(),
        "b_digest": tree_digest(b),
        "common_same": same,
    }


def print_state(s: dict[str, Any]) -> None:
    print(f"# {s['date']}  {s['platform']}  cpus={s['cpus']}  load {s['loadavg']}")
    print(f"# python {s['python']}, sqlite {s['sqlite']}")
    print(f"# A = {s['a']} (HEAD {s['a_head']})")
    print(f"# B = {s['b']} (HEAD {s['b_head']} + working tree: {s['b_diff_stat']})")
    print(f"# B src digest {s['b_digest']}")
    note = "identical in both trees" if s["common_same"] else "differs: B's copy used for both"
    print(f"# bench/common.py {note}")


def summarise(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for key, label, decimals in METRICS:
        a = [p[0][key] for p in pairs]
        b = [p[1][key] for p in pairs]
        ratios = [bi / ai for ai, bi in zip(a, b, strict=True) if ai]
        med_a, med_b = statistics.median(a), statistics.median(b)
        rows.append(
            {
                "metric": key,
                "label": label,
                "decimals": decimals,
                "a": med_a,
                "b": med_b,
                "ratio": med_b / med_a if med_a else float("nan"),
                "spread": (min(ratios), max(ratios)) if ratios else (float("nan"),) * 2,
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]], n_pairs: int) -> None:
    print()
    print(f"| metric | A median | B median | B/A | per-pair B/A, min-max ({n_pairs} pairs) |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        d = r["decimals"]
        lo, hi = r["spread"]
        print(
            f"| {r['label']} | {r['a']:,.{d}f} | {r['b']:,.{d}f} | {r['ratio']:.3f}x "
            f"| {lo:.3f}-{hi:.3f}x |"
        )


def run_pairs(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    before = state(args.a, args.b)
    print_state(before)
    print(
        f"# N = {args.n}, {args.pairs} pairs (A then B), {args.inner} inner repetition(s) "
        "per measurement, one subprocess each; SQLite durability: "
        + (args.durability or "each side's default")
    )
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="afp-ab-") as tmp:
        for i in range(args.pairs):
            pair = []
            for side, tree in (("A", args.a), ("B", args.b)):
                db = Path(tmp) / f"{side}-{i}.sqlite"
                pair.append(
                    _spawn(
                        tree,
                        [
                            *("--child", str(tree), "--db", str(db)),
                            *("--n", str(args.n), "--inner", str(args.inner)),
                            *(("--durability", args.durability) if args.durability else ()),
                        ],
                    )
                )
            a, b = pair
            pairs.append((a, b))
            print(
                f"  pair {i + 1:2d}: record mem {a['memory_ms']:.3f} / "
                f"{b['memory_ms']:.3f}, sqlite {a['sqlite_ms']:.3f} / "
                f"{b['sqlite_ms']:.3f}, verify {a['verify_ms']:.3f} / "
                f"{b['verify_ms']:.3f} ms/it (A / B)",
                flush=True,
            )
    rows = summarise(pairs)
    print_table(rows, len(pairs))
    after_digest = tree_digest(args.b)
    elapsed = time.perf_counter() - started
    print(f"\n# runs per conversation: A {pairs[0][0]['runs']}, B {pairs[0][1]['runs']}")
    if after_digest != before["b_digest"]:
        print(f"# WARNING: B's src changed during the run ({before['b_digest']} -> {after_digest})")
    print(f"# {elapsed:.0f} s in all")
    if args.json is not None:
        figures = {"state": before, "args": vars(args), "summary": rows, "pairs": pairs}
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
        print(f"# figures written to {args.json}")


def _by_function(path: Path) -> dict[tuple[str, str], tuple[float, float, int]]:
    """(module path under the package or file name, function) -> (tottime, cumtime, calls).

    Line numbers move between trees, so functions are matched by module and name: own time
    and calls are summed over same-named functions, cumulative time is their largest (a
    sum would count nested same-named calls, e.g. asyncio's two ``run``, twice).
    """
    import pstats

    out: dict[tuple[str, str], tuple[float, float, int]] = {}
    raw: dict[Any, Any] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    for (filename, _line, name), (_cc, nc, tt, ct, _callers) in raw.items():
        marker = "/agentfootprint/"
        short = filename.split(marker, 1)[1] if marker in filename else Path(filename).name
        key = (short, name)
        t0, c0, n0 = out.get(key, (0.0, 0.0, 0))
        out[key] = (t0 + tt, max(c0, ct), n0 + nc)
    return out


def _print_delta(a: dict[Any, Any], b: dict[Any, Any], top: int) -> None:
    keys = set(a) | set(b)
    none = (0.0, 0.0, 0)
    for index, what in ((1, "cumulative"), (0, "own")):
        print(f"\n### largest increases of {what} time, B - A (s; calls A / B)")
        moved = sorted((b.get(k, none)[index] - a.get(k, none)[index], k) for k in keys)
        for diff, k in moved[::-1][:top]:
            print(f"  {diff:+8.4f}  {k[0]}:{k[1]}  ({a.get(k, none)[2]} / {b.get(k, none)[2]})")


def run_profiles(args: argparse.Namespace) -> None:
    import io
    import pstats

    print_state(state(args.a, args.b))
    funcs: dict[tuple[str, str], dict[Any, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="afp-ab-prof-") as tmp:
        for side, tree in (("A", args.a), ("B", args.b)):
            stats_dir = Path(tmp) / side
            stats_dir.mkdir()
            info = _spawn(
                tree,
                [
                    *("--profile-child", str(tree), "--db", str(stats_dir / "log.sqlite")),
                    *("--n", str(args.n), "--stats", str(stats_dir)),
                ],
            )
            for phase in ("record", "verify"):
                path = stats_dir / f"{phase}.prof"
                out = io.StringIO()
                stats = pstats.Stats(str(path), stream=out).strip_dirs()
                stats.sort_stats("cumulative").print_stats(args.top)
                print(
                    f"\n## {side}, {phase} (SQLite, N={args.n}): {info[phase]:.3f} s "
                    f"under the profiler ({info['module']})"
                )
                print(out.getvalue().rstrip() + "\n")
                funcs[side, phase] = _by_function(path)
    for phase in ("record", "verify"):
        print(f"\n## {phase}: B against A")
        _print_delta(funcs["A", phase], funcs["B", phase], args.top)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--a", type=Path, default=DEFAULT_A, help="the before tree's src")
    parser.add_argument("--b", type=Path, default=DEFAULT_B, help="the after tree's src")
    parser.add_argument("--pairs", type=int, default=10, help="A/B pairs (default 10)")
    parser.add_argument("--n", type=int, default=200, help="tool-call iterations (default 200)")
    parser.add_argument(
        "--inner", type=int, default=5, help="repetitions inside one measurement (median kept)"
    )
    parser.add_argument("--quick", action="store_true", help="3 pairs, 1 inner repetition")
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument("--profile", action="store_true", help="only: cProfile, B vs A")
    parser.add_argument("--top", type=int, default=15, help="functions shown by --profile")
    parser.add_argument(
        "--durability",
        choices=("full", "normal"),
        help="record the SQLite runs of both sides at this durability (A before format 3: "
        "synchronous=FULL / NORMAL); default: each side's own default",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--profile-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--stats", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.n, args.inner, args.db, args.durability)))
        return
    if args.profile_child is not None:
        profile_child(args.profile_child, args.n, args.db, args.stats)
        return
    args.a, args.b = args.a.resolve(), args.b.resolve()
    for tree in (args.a, args.b):
        if not (tree / "agentfootprint" / "__init__.py").exists():
            raise SystemExit(
                f"{tree} holds no agentfootprint package; for the default A run "
                "`git -C /work/main worktree add /work/ab-before fdc8431`"
            )
    if args.quick:
        args.pairs, args.inner = 3, 1
    if args.profile:
        run_profiles(args)
    else:
        run_pairs(args)


if __name__ == "__main__":
    main()
