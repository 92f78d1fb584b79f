"""Bundles against the database (issue 26): export and bundle verify per run, against a
database verify of the same runs.

The benchmark conversation (``common.Conversation``: 4 tool-call iterations per turn,
500-char tool results, each turn continued from the previous run) is recorded at each N
into a fresh SQLite file by ``long.py``'s recording child (its own process), then, in this
one process and alternating within each repetition:

* ``verify``: ``af.Verifier(store).verify_all()`` over the database (every run VALID_UNSIGNED);
* ``export``: ``af.export_runs(store, run_ids, path)`` of every run (which verifies each run
  before it writes the bundle, as ``agentfootprint export``);
* ``bundle``: ``af.BundleSource(path)`` opened (its framing pass) and
  ``af.Verifier(bundle).verify_all()`` over it, as ``agentfootprint verify BUNDLE``.

Printed per N: each case's ms per run (median of the repetitions, min-max spread), the
ratios ``export/verify`` and ``bundle/verify`` computed within each repetition (median and
spread: the machine's drift hits both sides of one ratio alike), the same in this process's
CPU seconds (steadier on a shared machine; export's fsync wait is not in it), and the
bundle's bytes over the database's (``file + -wal + -shm`` after a checkpoint). Target
(issue 26): both wall-time ratios at most 1.5.

Usage::

    python bench/bundles.py                   # N = 800, 5,000; 3 repetitions
    python bench/bundles.py --sizes 800 --repeat 5
    python bench/bundles.py --dir DIR         # reuse DIR/bundles-<N>.sqlite when present
    python bench/bundles.py --profile 800     # only: cProfile export and bundle verify at N
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    checkpoint_and_measure,
    environment,
    median,
    print_environment,
    profile_report,
    profiled,
    verdict,
    write_figures,
)

import agentfootprint as af

SIZES = (800, 5_000)
TARGET = 1.5
CASES = ("verify", "export", "bundle")


def record(n: int, path: Path) -> None:
    """The conversation of N iterations into ``path``, by long.py's recording child."""
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("long.py")),
            "--child",
            "record",
            str(n),
            str(path),
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def _valid(results: Any) -> int:
    """How many runs verified VALID_UNSIGNED; anything else is an error of the setup."""
    count = 0
    for _, result in results:
        if (
            not isinstance(result, af.RunVerification)
            or result.outcome is not af.Outcome.VALID_UNSIGNED
        ):
            raise RuntimeError(f"not VALID_UNSIGNED: {result}")
        count += 1
    return count


def cases(db: Path, out: Path) -> dict[str, Callable[[], Any]]:
    """The three measured operations over the database at ``db`` and the bundle ``out``."""

    def verify() -> int:
        with af.SqliteStore(db, readonly=True) as store:
            return _valid(af.Verifier(store).verify_all())

    def export() -> int:
        with af.SqliteStore(db, readonly=True) as store:
            ids = store.run_ids()
            af.export_runs(store, ids, out)
            return len(ids)

    def bundle() -> int:
        with af.BundleSource(out) as source:
            return _valid(af.Verifier(source).verify_all())

    return {"verify": verify, "export": export, "bundle": bundle}


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall seconds, this process's CPU seconds (less disturbed by other work on a shared
    machine; export's fsync wait is not in it), and the value."""
    t0, c0 = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - t0, time.process_time() - c0, value


def _spread(values: list[float], digits: int = 2) -> str:
    return f"{median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def measure(n: int, folder: Path, repeat: int) -> dict[str, Any]:
    db = folder / f"bundles-{n}.sqlite"
    if not db.exists():
        print(f"... N={n}: recording", flush=True)
        record(n, db)
    db_bytes = checkpoint_and_measure(db)
    out = folder / f"bundles-{n}.afp"
    run = cases(db, out)
    run["export"]()  # warm: the bundle exists before the first bundle verify
    times: dict[str, list[float]] = {case: [] for case in CASES}
    cpu: dict[str, list[float]] = {case: [] for case in CASES}
    runs = 0
    for index in range(repeat):
        order = CASES if index % 2 == 0 else tuple(reversed(CASES[1:])) + CASES[:1]
        for case in order:
            seconds, used, runs = _timed(run[case])
            times[case].append(seconds)
            cpu[case].append(used)
        print(
            f"  N={n} #{index + 1}: "
            + ", ".join(f"{case} {times[case][-1]:.2f} s" for case in CASES),
            flush=True,
        )
    ratios = {
        case: [t / v for t, v in zip(times[case], times["verify"], strict=True)]
        for case in CASES[1:]
    }
    cpu_ratios = {
        case: [t / v for t, v in zip(cpu[case], cpu["verify"], strict=True)] for case in CASES[1:]
    }
    return {
        "n": n,
        "runs": runs,
        "seconds": times,
        "ratios": ratios,
        "cpu_seconds": cpu,
        "cpu_ratios": cpu_ratios,
        "db_bytes": db_bytes,
        "bundle_bytes": out.stat().st_size,
    }


def report(results: list[dict[str, Any]]) -> bool:
    print()
    header = (
        f"{'N':>6} {'runs':>5} {'verify ms/run':>20} {'export ms/run':>20} "
        f"{'bundle ms/run':>20} {'export/verify':>18} {'bundle/verify':>18} {'bundle/db':>10}"
    )
    print(header)
    print("-" * len(header))
    ok = True
    for r in results:
        per_run = {c: [s * 1000 / r["runs"] for s in r["seconds"][c]] for c in CASES}
        print(
            f"{r['n']:>6} {r['runs']:>5} "
            + " ".join(f"{_spread(per_run[c]):>20}" for c in CASES)
            + " "
            + " ".join(f"{_spread(r['ratios'][c]):>18}" for c in CASES[1:])
            + f" {r['bundle_bytes'] / r['db_bytes']:>10.2f}"
        )
        ok = ok and all(median(r["ratios"][c]) <= TARGET for c in CASES[1:])
    print("\nThe same in CPU seconds of this process (ms per run; ratios):")
    for r in results:
        per_run = {c: [s * 1000 / r["runs"] for s in r["cpu_seconds"][c]] for c in CASES}
        print(
            f"{r['n']:>6} {r['runs']:>5} "
            + " ".join(f"{_spread(per_run[c]):>20}" for c in CASES)
            + " "
            + " ".join(f"{_spread(r['cpu_ratios'][c]):>18}" for c in CASES[1:])
        )
    print(
        f"\nTarget: export and bundle verify each within {TARGET}x of a database verify "
        f"(median ratio) -> {verdict(ok)}"
    )
    return ok


def profile(n: int, folder: Path, top: int) -> int:
    db = folder / f"bundles-{n}.sqlite"
    if not db.exists():
        record(n, db)
    run = cases(db, folder / f"bundles-{n}.afp")
    for case in CASES:
        run[case]()  # warm, and the bundle written
    for case in CASES:
        profiler, _, seconds = profiled(run[case])
        print(profile_report(profiler, f"# {case}, N={n}: {seconds:.2f} s", top))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", help="N values (default 800 5000)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--dir", type=Path, help="keep (and reuse) the databases here")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument("--profile", type=int, metavar="N", help="only: cProfile each case")
    parser.add_argument("--top", type=int, default=25, help="functions shown by --profile")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="afp-bundles-") as tmp:
        folder = args.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.profile:
            return profile(args.profile, folder, args.top)
        env = environment()
        print_environment(env)
        sizes = tuple(args.sizes or SIZES)
        print(
            f"# the benchmark conversation, N = {', '.join(map(str, sizes))}; "
            f"{args.repeat} repetitions alternating in one process"
        )
        results = [measure(n, folder, max(1, args.repeat)) for n in sizes]
        for r in results:
            (folder / f"bundles-{r['n']}.afp").unlink(missing_ok=True)
    ok = report(results)
    write_figures(args.json, {"environment": env, "results": results, "met": ok})
    return 0


if __name__ == "__main__":
    sys.exit(main())
