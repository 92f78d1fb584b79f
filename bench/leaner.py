"""Two storage schemas side by side in one run: schema 2 (the leaner rows, issue 13) against
schema 4 (one row per append, compact records, 8 KiB pages: issue 26) by default.

The conversation is the one of ``overhead.py`` (N tool-call iterations, 4 per turn, every
turn ``run_sync(msg, continue_from=prev)``). Both layouts are this tree's code: a new file
gets the layout ``agentfootprint.store.sqlite.NEW_FILE_SCHEMA`` names, set before each file
is created. Pairs alternate (the first schema first in even pairs, the second first in odd
ones). Per file: the summed ``run_sync`` time (recording, ``durability="full"`` as the
default), one ``Verifier(store).verify_all()`` over the file on a fresh read-only store
(every run must come out ``VALID_UNSIGNED``), one plain read of every row of every run
(what the reader costs: schemas 2 and 4 recompute the hashes, and 4 rebuilds the bodies),
then the database bytes after ``wal_checkpoint(TRUNCATE)``
(``common.checkpoint_and_measure``). All divided by N. Printed: the medians, second / first
of the medians and the spread (min-max) of the per-pair ratios; then, untimed, where the
bytes of each layout go (SQLite ``dbstat``).

Usage::

    python bench/leaner.py                 # N = 800, 5 pairs, schema 2 vs 4
    python bench/leaner.py --quick         # N = 200, 2 pairs
    python bench/leaner.py --schemas 1 2   # the comparison of issue 13
    python bench/leaner.py --n 800 --pairs 7 --json leaner.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Conversation,
    checkpoint_and_measure,
    environment,
    median,
    print_environment,
    remove_db,
    run_agent_conversation,
    write_figures,
)

import agentfootprint as af
from agentfootprint.store import sqlite as sqlite_store

METRICS = (
    ("record_ms", "record, SQLite full (ms/it)", 3),
    ("verify_ms", "verify_all (ms/it)", 3),
    ("read_ms", "read every row (ms/it)", 3),
    ("db_bytes", "db bytes/it (checkpointed)", 1),
    ("rows", "rows/it", 2),
)


def measure(n: int, schema: int, directory: Path) -> dict[str, Any]:
    path = directory / f"leaner-{schema}-{n}.sqlite"
    remove_db(path)
    conv = Conversation(n)
    gc.collect()
    sqlite_store.NEW_FILE_SCHEMA = schema
    store = af.SqliteStore(path)
    try:
        if store.layout != schema:
            raise SystemExit(f"a new file got schema {store.layout}, not {schema}")
        run = run_agent_conversation(conv, store)
    finally:
        store.close()
    with af.SqliteStore(path, readonly=True) as reader:
        t0 = time.perf_counter()
        results = list(af.Verifier(reader).verify_all())
        verify_s = time.perf_counter() - t0
        ids = reader.run_ids()
        t0 = time.perf_counter()
        rows = sum(len(list(reader.read(run_id))) for run_id in ids)
        read_s = time.perf_counter() - t0
    bad = [r for _, r in results if getattr(r, "outcome", None) is not af.Outcome.VALID_UNSIGNED]
    if bad or len(ids) != run.turns:
        raise SystemExit(f"schema {schema}, N={n}: {len(bad)} runs did not verify: {bad[:1]!r}")
    size = checkpoint_and_measure(path)
    return {
        "record_ms": run.seconds / n * 1e3,
        "verify_ms": verify_s / n * 1e3,
        "read_ms": read_s / n * 1e3,
        "db_bytes": size / n,
        "rows": rows / n,
        "path": str(path),
    }


def breakdown(path: str, schema: int, n: int) -> list[str]:
    """Bytes per iteration of each b-tree (dbstat), and what the rows hold."""
    conn = sqlite3.connect(path)
    lines = []
    try:
        with contextlib.suppress(sqlite3.Error):
            for name, size in conn.execute(
                "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ):
                lines.append(f"  {name:<28} {size / n:>8.1f} B/it")
        if schema == 4:
            appends, count, data = conn.execute(
                "SELECT COUNT(*), SUM(count), SUM(LENGTH(data)) FROM appends"
            ).fetchone()
            lines.append(f"  record bytes (appends.data)  {data / n:>8.1f} B/it")
            lines.append(f"  rows {count} in {appends} appends rows")
            return lines
        table = "events" if schema == 1 else "rows"
        (bodies,) = conn.execute(f"SELECT SUM(LENGTH(body)) FROM {table}").fetchone()
        lines.append(f"  stored body bytes            {bodies / n:>8.1f} B/it")
        if schema == 2:
            compact, heads, no_ts, total = conn.execute(
                "SELECT SUM(body IS NULL), SUM(head IS NOT NULL), SUM(ts IS NULL), COUNT(*) "
                "FROM rows"
            ).fetchone()
            lines.append(
                f"  rows {total}: {compact} compact commit markers, {heads} heads stored "
                f"(batches), {no_ts} with ts NULL"
            )
    finally:
        conn.close()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=800)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="N = 200, 2 pairs")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--schemas", type=int, nargs=2, default=(2, 4), choices=(1, 2, 4), metavar="SCHEMA"
    )
    args = parser.parse_args()
    n, pairs = (200, 2) if args.quick else (args.n, args.pairs)
    first, second = args.schemas
    env = environment()
    print_environment(env)
    print(f"# N = {n}, {pairs} pairs, schema {first} vs schema {second}, this tree")
    saved = sqlite_store.NEW_FILE_SCHEMA
    samples: dict[int, list[dict[str, Any]]] = {first: [], second: []}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        measure(8, first, directory)  # warm-up: imports, first calls
        measure(8, second, directory)
        try:
            for pair in range(pairs):
                for schema in (first, second) if pair % 2 == 0 else (second, first):
                    samples[schema].append(measure(n, schema, directory))
        finally:
            sqlite_store.NEW_FILE_SCHEMA = saved
        a, b = f"schema {first}", f"schema {second}"
        ratio = f"{second}/{first}"
        print(f"\n{'metric':<32} {a:>10} {b:>10} {ratio:>7} {'spread':>13}")
        figures: dict[str, Any] = {"environment": env, "n": n, "pairs": pairs, "metrics": {}}
        for key, label, decimals in METRICS:
            one = [s[key] for s in samples[first]]
            two = [s[key] for s in samples[second]]
            ratios = [y / x for x, y in zip(one, two, strict=True)]
            m1, m2 = median(one), median(two)
            print(
                f"{label:<32} {m1:>10.{decimals}f} {m2:>10.{decimals}f} {m2 / m1:>6.2f}x "
                f"{min(ratios):>5.2f}-{max(ratios):.2f}x"
            )
            figures["metrics"][key] = {f"schema{first}": one, f"schema{second}": two}
        for schema in (first, second):
            print(f"\nschema {schema}, where the bytes go (N={n}):")
            print("\n".join(breakdown(samples[schema][-1]["path"], schema, n)))
    write_figures(args.json, figures)


if __name__ == "__main__":
    main()
