"""What looking for literals costs (issue 27): the matcher per body, and ``scan`` per file.

The conversation of ``overhead.py`` (N tool-call iterations, 4 per turn, every turn
``run_sync(msg, continue_from=prev)``) is recorded to a fresh SQLite file, timed (the record
time per body is the yardstick). Then, over every body of that file (read once, untimed):

* ``LiteralMatcher.find`` with one 40-character token, and with three literals (a token, an
  e-mail address, an account number): µs per body, and against the recording's time per body
  (the writer's leak guard will search every body it appends for the credentials it vended:
  issue 27's target is at most 5% of record time with one credential);
* a body that holds the token (the rare case: every needle is then looked for).

Then ``agentfootprint scan``'s work on the file (``scan_rows`` and ``scan_files``: every row
read and searched, and the file's bytes swept): seconds and MB/s of rows and of file.

Usage::

    python bench/literals.py              # N = 800, 5 repetitions (about 30 s on 2 vCPU)
    python bench/literals.py --n 200 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Conversation, environment, print_environment, run_agent_conversation

import agentfootprint as af
from agentfootprint.audit.scan import ScanReport, scan_files, scan_rows, sqlite_files
from agentfootprint.logformat.literal_forms import LiteralMatcher

TOKEN = "ghp_" + "Zq7vK2mN9xR4tB8wL1cY6dF3hJ5sP0gA2eU4"  # 40 characters, like a GitHub token
OTHERS = ["ann.example@corp.example", "GB29NWBK60161331926819"]


def _median_us(fn: Callable[[bytes], object], bodies: list[bytes], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        for body in bodies:
            fn(body)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / len(bodies) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=800, help="iterations (default 800)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    args = parser.parse_args()
    logging.getLogger("agentfootprint.context").setLevel(logging.ERROR)
    print_environment(environment())
    with tempfile.TemporaryDirectory(prefix="afbench-literals-") as tmp:
        db = Path(tmp) / "conversation.db"
        store = af.SqliteStore(db)
        try:
            run = run_agent_conversation(Conversation(args.n), store)
        finally:
            store.close()
        with af.SqliteStore(db, readonly=True) as reader:
            bodies = [bytes(e.body) for rid in reader.run_ids() for e in reader.read(rid)]
        record_us = run.seconds / len(bodies) * 1e6
        one, three = LiteralMatcher([TOKEN]), LiteralMatcher([TOKEN, *OTHERS])
        miss_one = _median_us(one.find, bodies, args.repeat)
        miss_three = _median_us(three.find, bodies, args.repeat)
        holding = [b'{"content":"token ' + TOKEN.encode() + b'"}'] * 2000
        hit_one = _median_us(one.find, holding, args.repeat)
        print(
            f"\nN={args.n}: {len(bodies):,} bodies, {sum(map(len, bodies)) / 2**20:.2f} MiB; "
            f"record {record_us:.1f} µs a body"
        )
        print("| matcher | forms | µs a body | against record time |")
        print("|---|---:|---:|---:|")
        print(f"| 1 literal | {one.forms} | {miss_one:.2f} | {miss_one / record_us:.2%} |")
        print(f"| 3 literals | {three.forms} | {miss_three:.2f} | {miss_three / record_us:.2%} |")
        print(f"| 1 literal, a body holding it | {one.forms} | {hit_one:.2f} | |")
        scans = []
        for _ in range(args.repeat):
            report = ScanReport(literals=3, forms=three.forms)
            gc.collect()
            t0 = time.perf_counter()
            with af.SqliteStore(db, readonly=True) as reader:
                scan_rows(reader, three, report)
            t1 = time.perf_counter()
            scan_files(sqlite_files(db), three, report)
            scans.append((t1 - t0, time.perf_counter() - t1, report))
        rows_s = statistics.median(s[0] for s in scans)
        files_s = statistics.median(s[1] for s in scans)
        report = scans[-1][2]
        size = os.path.getsize(db)
        print(
            f"\nscan, 3 literals: rows {rows_s:.3f} s ({report.rows:,} rows, "
            f"{sum(map(len, bodies)) / 2**20 / rows_s:.1f} MiB/s of bodies); file bytes "
            f"{files_s:.3f} s ({size / 2**20:.2f} MiB, {size / 2**20 / files_s:.1f} MiB/s); "
            f"found {len(report.literals_found())} (none planted)"
        )


if __name__ == "__main__":
    main()
