"""What tracking reads costs: ``read_tracking`` (off, summary, full) and ``write_provenance``.

On this suite's conversation (``common.Conversation``: 4 tool-call iterations per turn, each
turn continuing the previous one), recorded into a ``MemoryStore`` (where the recording's own
cost weighs most; with ``--sqlite`` into an SQLite file too): ms per tool-call iteration, the
fastest of the rounds, variants alternating in every round, each against
``read_tracking="off"`` (a scope
that tracks nothing, as before the option existed). ``read_tracking="summary"`` is the
default, so its line is what every run pays. ``write_provenance="reads-prefix"`` is measured
with ``read_tracking="off"``: it tracks reads for the log alone (and records log format v6,
whose rows are larger by the ``reads`` of every write: the bytes per iteration are printed).

Usage::

    python bench/reads.py               # N = 800, 3 rounds
    python bench/reads.py --quick       # N = 200, 2 rounds
    python bench/reads.py --sqlite      # and into an SQLite file (bytes per iteration)
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Conversation,
    db_bytes,
    environment,
    print_environment,
    remove_db,
    run_agent_conversation,
)

import agentfootprint as af

logging.disable(logging.WARNING)

VARIANTS: dict[str, dict[str, Any]] = {
    "off": {"read_tracking": "off"},
    "summary (default)": {},
    "full": {"read_tracking": "full"},
    "reads-prefix": {"read_tracking": "off", "write_provenance": "reads-prefix"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 200, 2 rounds")
    parser.add_argument("--n", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--sqlite", action="store_true", help="also into an SQLite file (its fsyncs are noisy)"
    )
    args = parser.parse_args()
    n, rounds = (200, 2) if args.quick else (args.n, args.rounds)
    print_environment(environment())
    conv = Conversation(n)
    for where in ("memory", "sqlite") if args.sqlite else ("memory",):
        best: dict[str, float] = {}
        size: dict[str, int] = {}
        for _ in range(rounds):
            for name, options in VARIANTS.items():
                with tempfile.TemporaryDirectory() as folder:
                    path = Path(folder) / "reads.db"
                    store: Any = af.MemoryStore() if where == "memory" else str(path)
                    ran = run_agent_conversation(conv, store, **options)
                    ms = ran.seconds * 1000 / ran.iterations
                    best[name] = min(best.get(name, ms), ms)
                    if where == "sqlite":
                        size[name] = db_bytes(path) // ran.iterations
                        remove_db(path)
        base = best["off"]
        print(f"\nN={n}, {where} store: ms per iteration (fastest of {rounds})")
        for name, ms in best.items():
            extra = f"  {size[name]:>6} bytes/iteration" if name in size else ""
            print(f"  {name:<18} {ms:7.3f}  x{ms / base:5.3f}{extra}")


if __name__ == "__main__":
    main()
