"""A/B of the work recording and verification do, counted instead of timed.

On a shared 2-vCPU machine the time of one conversation moves by 20-40% from minute to
minute (the same process, the same code: 1.0 to 1.8 ms per iteration), more than most
changes worth measuring. Two counts do not move:

* **instructions** (valgrind's cachegrind, ``I refs``): every user-space instruction the
  process runs, C and Python alike, for one conversation of N iterations, less the same
  process run with no conversation (imports and warm-up), divided by N. Recording into a
  ``MemoryStore``, into a SQLite file, and verifying that file (``verify_all``). Kernel time
  (system calls, thread wake-ups) is not counted: ``ab.py`` measures time.
* **Python opcodes** (``sys.settrace`` with opcode events, ``--opcodes``): per iteration of a
  ``MemoryStore`` recording, grouped by the package whose code ran (``agentfootprint``,
  ``jsonschema``, ``asyncio``, ...), then the functions that moved most. Slow (about 200x);
  it says where a difference in instructions comes from.

A is a checkout of an earlier commit (default ``/work/ab-before/src``), B this tree's
``src``; each count runs in a fresh process with ``PYTHONPATH`` set to one tree and
``PYTHONHASHSEED=0``; the conversation is this tree's ``bench/common.py``. Needs valgrind
for the instruction counts (``apt-get install valgrind``); ``--opcodes`` needs nothing.

Usage::

    python bench/instructions.py                       # N=200: record (memory, SQLite), verify
    python bench/instructions.py --n 800 --a /work/ab-before/src
    python bench/instructions.py --opcodes --n 100     # where the Python-level work moved
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DEFAULT_A = Path("/work/ab-before/src")
DEFAULT_B = ROOT / "src"
WARMUP_N = 8
KINDS = ("memory", "sqlite", "verify")


# -- the measured process --------------------------------------------------------------------
def child(n: int, what: str, db: str) -> None:
    """One process: the warm-up conversation, then (N > 0) one recording or one verify."""
    from ab import _verify_file
    from common import Conversation, conversation_order, remove_db, run_agent_conversation

    import agentfootprint as af

    run_agent_conversation(Conversation(WARMUP_N), af.MemoryStore())
    if n == 0:
        return
    conv = Conversation(n)
    if what == "memory":
        run_agent_conversation(conv, af.MemoryStore())
    elif what == "sqlite":
        remove_db(db)
        store = af.SqliteStore(db)
        try:
            run_agent_conversation(conv, store)
        finally:
            store.close()
    else:
        store = af.SqliteStore(db)
        try:
            _verify_file(af, store, conversation_order(store))
        finally:
            store.close()


def opcode_child(n: int, out: str) -> None:
    """One ``MemoryStore`` recording under an opcode tracer; counts by (file, function)."""
    import threading

    from common import Conversation, run_agent_conversation

    import agentfootprint as af

    run_agent_conversation(Conversation(WARMUP_N), af.MemoryStore())
    conv = Conversation(n)
    counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            counts[code.co_filename, code.co_qualname] += 1
        return tracer

    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        run_agent_conversation(conv, af.MemoryStore())
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
    Path(out).write_text(json.dumps([[f, q, c] for (f, q), c in counts.items()]))


# -- the parent ------------------------------------------------------------------------------
def _env(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{BENCH}", PYTHONHASHSEED="0")


def _instructions(tree: Path, n: int, what: str, db: Path) -> int:
    command = [
        *("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"),
        *(sys.executable, str(Path(__file__)), "--child", str(n), what, str(db)),
    ]
    done = subprocess.run(command, env=_env(tree), capture_output=True, text=True, cwd=BENCH)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run failed ({tree}, {what}):\n{done.stderr[-2000:]}")
    return int(found[1].replace(",", ""))


def count_instructions(a: Path, b: Path, n: int) -> dict[str, dict[str, float]]:
    """Instructions per iteration, per side and kind (two processes at a time)."""
    sides = {"A": a, "B": b}
    with tempfile.TemporaryDirectory(prefix="afp-instr-") as tmp:
        dbs = {side: Path(tmp) / f"{side}.sqlite" for side in sides}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = {
                (side, what): pool.submit(_instructions, tree, m, what, dbs[side])
                for side, tree in sides.items()
                for what, m in (("base", 0), ("memory", n), ("sqlite", n))
            }
            counts = {key: job.result() for key, job in first.items()}
            verify = {  # the SQLite files are written now
                side: pool.submit(_instructions, tree, n, "verify", dbs[side])
                for side, tree in sides.items()
            }
            counts.update({(side, "verify"): job.result() for side, job in verify.items()})
    return {
        side: {what: (counts[side, what] - counts[side, "base"]) / n for what in KINDS}
        for side in sides
    }


def _opcodes(tree: Path, n: int) -> collections.Counter[tuple[str, str]]:
    with tempfile.TemporaryDirectory(prefix="afp-opcodes-") as tmp:
        out = Path(tmp) / "counts.json"
        command = [sys.executable, str(Path(__file__)), "--opcode-child", str(n), str(out)]
        done = subprocess.run(command, env=_env(tree), capture_output=True, text=True, cwd=BENCH)
        if done.returncode != 0:
            raise SystemExit(f"opcode run failed ({tree}):\n{done.stderr[-2000:]}")
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for filename, name, count in json.loads(out.read_text()):
            counts[_package(filename), name] += count
    return counts


def _package(filename: str) -> str:
    """``agentfootprint`` (its layer packages folded: modules moved between them), a
    site-packages distribution, or a standard-library module, by the file's path."""
    path = filename.replace(os.sep, "/")
    if "/agentfootprint/" in path:
        return "agentfootprint"
    if "/site-packages/" in path:
        return path.split("/site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    for marker in ("/asyncio/", "/concurrent/"):
        if marker in path:
            return marker.strip("/")
    return Path(path).name.removesuffix(".py") or path


def report_opcodes(a: Path, b: Path, n: int, top: int) -> None:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ja, jb = pool.submit(_opcodes, a, n), pool.submit(_opcodes, b, n)
        ca, cb = ja.result(), jb.result()
    ta, tb = sum(ca.values()), sum(cb.values())
    print(f"Python opcodes per iteration, MemoryStore recording, N={n}")
    print(f"  all: A {ta / n:,.0f}  B {tb / n:,.0f}  B/A {tb / ta:.3f}")
    packages: collections.Counter[str] = collections.Counter()
    for counter, sign in ((ca, -1), (cb, 1)):
        for (package, _), count in counter.items():
            packages[package] += sign * count
    print("  by package (B - A, per iteration; the largest moves):")
    for package, delta in sorted(packages.items(), key=lambda kv: -abs(kv[1]))[:10]:
        pa = sum(c for (p, _), c in ca.items() if p == package) / n
        pb = sum(c for (p, _), c in cb.items() if p == package) / n
        print(f"    {delta / n:+9.0f}  {package:<22} A {pa:9,.0f}  B {pb:9,.0f}")
    moved = sorted(set(ca) | set(cb), key=lambda k: cb[k] - ca[k])
    print(f"  functions, largest increases (B - A per iteration; top {top}):")
    for key in moved[::-1][:top]:
        print(f"    {(cb[key] - ca[key]) / n:+9.1f}  {key[0]}:{key[1]}")
    print(f"  functions, largest decreases (top {top}):")
    for key in moved[:top]:
        print(f"    {(cb[key] - ca[key]) / n:+9.1f}  {key[0]}:{key[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--a", type=Path, default=DEFAULT_A, help="the before tree's src")
    parser.add_argument("--b", type=Path, default=DEFAULT_B, help="the after tree's src")
    parser.add_argument("--n", type=int, default=200, help="tool-call iterations (default 200)")
    parser.add_argument("--opcodes", action="store_true", help="Python opcodes by package")
    parser.add_argument("--top", type=int, default=15, help="functions shown by --opcodes")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--opcode-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(int(args.child[0]), args.child[1], args.child[2])
        return
    if args.opcode_child is not None:
        opcode_child(int(args.opcode_child[0]), args.opcode_child[1])
        return
    a, b = args.a.resolve(), args.b.resolve()
    for tree in (a, b):
        if not (tree / "agentfootprint" / "__init__.py").exists():
            raise SystemExit(f"{tree} holds no agentfootprint package")
    print(f"# A = {a}\n# B = {b}")
    if args.opcodes:
        report_opcodes(a, b, args.n, args.top)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind); try --opcodes")
    figures = count_instructions(a, b, args.n)
    print(f"instructions per iteration (valgrind cachegrind), N={args.n}")
    for what in KINDS:
        ia, ib = figures["A"][what], figures["B"][what]
        print(f"  {what:<7} A {ia / 1e6:7.3f} M  B {ib / 1e6:7.3f} M  B/A {ib / ia:.3f}")


if __name__ == "__main__":
    main()
