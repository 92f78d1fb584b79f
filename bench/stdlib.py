"""The standard library against the hand-made copies of it (issue 25), end to end.

Three hand-made pieces are measured against the standard library's way, each alone and the
first two together, on the recorded conversation of ``common.Conversation`` (4 tool calls per
``run_sync`` turn, the tool a plain ``def`` with a four-keyword input schema, its arguments
validated on every call):

* ``loop``: ``run_sync`` on a hand-made event loop per thread (the previous main's
  ``core/sync_loop.py``) against one ``asyncio.Runner`` per thread (this tree's
  ``runtime/sync_loop.py``);
* ``threads``: sync tools handed over by a hand-made future plumbing (the previous main's
  ``core/tool_threads.py``) against ``concurrent.futures.Future`` + ``asyncio.wrap_future``
  (``runtime/tool_threads.py`` at 4bcc558; since 5ce2a02 this tree hands over as the previous
  main did, the measured loss being over 5%, so give ``--b`` a checkout of 4bcc558 to
  reproduce the figure);
* ``both``: the two hand-made pieces against the two standard-library ones;
* ``schema``: tool arguments validated by ``jsonschema`` behind the ``fast_schema`` predicate
  (the previous main's ``core/fast_schema.py``) against ``jsonschema`` alone;
* ``same``: this tree against itself (A/A), what the measurement alone makes of no change.

Both sides of a comparison run this tree's ``agentfootprint`` (``--b``), in the same process:
the hand-made side loads the previous main's module by path (``--a``: a checkout of it, by
default ``/work/ab-before/src``; those modules use the standard library only) and puts its
function in place of this tree's wherever a module of the package imported it, and the other
side puts this tree's back (the standard library's way). So the two sides of a pair differ in
that one piece and run one after the other in one process (other sessions' load on a shared
machine, which moves figures by tens of percent from one process to the next, moves both
alike). A pair: the N-iteration conversation recorded into a
``MemoryStore`` (the ``run_sync`` calls timed, as ``ab.py``, and the process's CPU time,
every thread's), then three micro figures: one ``run_sync`` of an empty coroutine, one
``await call_user_code(f)`` of a sync ``f`` that returns at once, and one
``validate_arguments`` of the conversation's tool arguments (what the recording does once per
iteration). From these, what B adds to an iteration's CPU time,
with far less noise than the recording's own figure: the micro difference of each piece
swapped times how often an iteration makes it (a quarter of a ``run_sync``, one hand-over,
one validation). A runs first in one pair, B in the next (ABBA), after an untimed warm-up of
each side; the pairs are split over ``--processes`` fresh processes.

Printed per comparison and metric: the median of each side, B/A of the medians and the
spread (min-max) of the per-pair ratios B_i/A_i.

Usage::

    python bench/stdlib.py                       # 10 pairs at N = 200 (about 3 min)
    python bench/stdlib.py --pairs 30 --only loop threads
    python bench/stdlib.py --quick               # 2 pairs, N = 50 (smoke run)
    python bench/stdlib.py --b /some/tree/src    # another tree's src as B
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parent
DEFAULT_A = Path("/work/ab-before/src")
DEFAULT_B = BENCH.parent / "src"
WARMUP_N = 8
MICRO_CALLS = 2000

#: comparison -> the pieces A takes from the previous main
COMPARISONS: dict[str, list[str]] = {
    "loop": ["loop"],
    "threads": ["threads"],
    "both": ["loop", "threads"],
    "schema": ["schema"],
    "same": ["same"],
}
METRICS: tuple[tuple[str, str, int], ...] = (
    ("memory_cpu_ms", "record, MemoryStore, CPU (ms/it)", 3),
    ("memory_ms", "record, MemoryStore, wall (ms/it)", 3),
    ("run_sync_cpu_us", "run_sync of an empty coroutine, CPU (µs)", 1),
    ("user_code_cpu_us", "await call_user_code(sync f), CPU (µs)", 1),
    ("validate_cpu_us", "validate_arguments of one call's arguments, CPU (µs)", 1),
)
#: piece -> its micro figure, and how many of those one tool-call iteration makes
PER_ITERATION = {
    "loop": ("run_sync_cpu_us", 0.25),
    "threads": ("user_code_cpu_us", 1.0),
    "schema": ("validate_cpu_us", 1.0),
    "same": ("run_sync_cpu_us", 0.25),
}


# -- the measuring subprocess ---------------------------------------------------------------
def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _Piece:
    """One function of the tree (``name``) as each side runs it, in every package module that
    imported it: :meth:`use` puts A's or B's in place."""

    def __init__(self, name: str, original: Any, a_side: Any, b_side: Any) -> None:
        self.name, self.a_side, self.b_side = name, a_side, b_side
        self.modules = [
            module
            for module in list(sys.modules.values())
            if getattr(module, "__name__", "").startswith("agentfootprint")
            and getattr(module, name, None) is original
        ]
        if not self.modules:
            raise SystemExit(f"no module of the tree imports {name}: the bench is out of date")

    def use(self, a_side: bool) -> Any:
        value = self.a_side if a_side else self.b_side
        for module in self.modules:
            setattr(module, self.name, value)
        return value


def _pieces(names: list[str], a_core: Path) -> list[_Piece]:
    """The pieces of one comparison: the previous main's (A) and the standard library's (B)."""
    import agentfootprint.agent.agent
    import agentfootprint.features
    from agentfootprint.runtime import sync_loop, tool_threads, tools

    pieces = []
    if "same" in names:  # A/A: both sides this tree's, the measurement's own bias and noise
        pieces.append(
            _Piece("run_sync", sync_loop.run_sync, sync_loop.run_sync, sync_loop.run_sync)
        )
    if "loop" in names:  # B: this tree's asyncio.Runner
        hand = _load(a_core / "sync_loop.py", "_hand_sync_loop").run_sync
        pieces.append(_Piece("run_sync", sync_loop.run_sync, hand, sync_loop.run_sync))
    if "threads" in names:  # B: this tree's concurrent.futures hand-off
        hand = _load(a_core / "tool_threads.py", "_hand_tool_threads").call_user_code
        ours = tool_threads.call_user_code
        pieces.append(_Piece("call_user_code", ours, hand, ours))
    if "schema" in names:  # the predicate in front of this tree's jsonschema validation
        compile_check = _load(a_core / "fast_schema.py", "_fast_schema").compile_check
        validate = tools.validate_arguments
        checks: dict[int, Any] = {}

        def validate_arguments(tool: Any, arguments: Any) -> list[dict[str, Any]]:
            check = checks.get(id(tool))
            if check is None:
                check = checks[id(tool)] = compile_check(tool.input_schema) or (lambda _: False)
            if check(arguments):
                return []
            result: list[dict[str, Any]] = validate(tool, arguments)
            return result

        pieces.append(_Piece("validate_arguments", validate, validate_arguments, validate))
    del agentfootprint.agent.agent, agentfootprint.features  # imported for their importers
    return pieces


def child(b: Path, a: Path, names: list[str], n: int, pairs: int) -> dict[str, Any]:
    """``pairs`` rounds in this one process, each recording the conversation with the
    previous main's pieces (A), then with this tree's (B)."""
    sys.path.insert(0, str(BENCH))
    import agentfootprint as af

    if b.resolve() not in Path(af.__file__).resolve().parents:
        raise SystemExit(f"imported {af.__file__}, not from {b}: is PYTHONPATH set?")
    pieces = _pieces(names, a / "agentfootprint" / "core")
    from common import Conversation, run_agent_conversation, tool_args

    from agentfootprint.runtime import sync_loop, tool_threads, tools

    async def empty() -> None:
        return None

    def returns() -> int:
        return 1

    async def hand_overs(call_user_code: Any) -> float:
        c0 = time.process_time()
        for _ in range(MICRO_CALLS):
            await call_user_code(returns)
        return time.process_time() - c0

    def measure(a_side: bool) -> dict[str, float]:
        """One recording and the micro figures with A's pieces or B's."""
        run_sync, call_user_code = sync_loop.run_sync, tool_threads.call_user_code
        validate = tools.validate_arguments
        for piece in pieces:
            value = piece.use(a_side)
            if piece.name == "run_sync":
                run_sync = value
            elif piece.name == "call_user_code":
                call_user_code = value
            else:
                validate = value
        gc.collect()
        c0 = time.process_time()
        run = run_agent_conversation(conv, af.MemoryStore())
        cpu = time.process_time() - c0
        if run.iterations != n:
            raise SystemExit(f"{run.iterations} iterations, not {n}")
        c0 = time.process_time()
        for _ in range(MICRO_CALLS):
            run_sync(empty())
        loop_s = time.process_time() - c0
        user_s = run_sync(hand_overs(call_user_code))
        arguments = tool_args(7)
        c0 = time.process_time()
        for _ in range(MICRO_CALLS):
            validate(tool, arguments)
        validate_s = time.process_time() - c0
        return {
            "memory_cpu_ms": cpu * 1000.0 / n,
            "memory_ms": run.seconds * 1000.0 / n,
            "run_sync_cpu_us": loop_s / MICRO_CALLS * 1e6,
            "user_code_cpu_us": user_s / MICRO_CALLS * 1e6,
            "validate_cpu_us": validate_s / MICRO_CALLS * 1e6,
        }

    conv = Conversation(n)
    tool = conv.tool()
    for a_side in (True, False):  # warm-up, untimed: imports and first calls of each side
        for piece in pieces:
            piece.use(a_side)
        run_agent_conversation(Conversation(WARMUP_N), af.MemoryStore())
    out = []
    for i in range(pairs):  # A then B, then B then A: neither side always runs first
        if i % 2 == 0:
            first = measure(True)
            out.append([first, measure(False)])
        else:
            first = measure(False)
            out.append([measure(True), first])
    return {"module": af.__file__, "pairs": out}


# -- the parent ------------------------------------------------------------------------------
def _spawn(b: Path, a: Path, names: list[str], n: int, pairs: int) -> list[Any]:
    env = {**os.environ, "PYTHONPATH": str(b), "PYTHONHASHSEED": "0"}
    args = ["--child", "--b", str(b), "--a", str(a), "--n", str(n), "--pairs", str(pairs)]
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args, "--pieces", *names],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"measurement {names} failed:\n{proc.stderr[-3000:]}")
    result: list[Any] = json.loads(proc.stdout.strip().splitlines()[-1])["pairs"]
    return result


def summarise(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for key, label, decimals in METRICS:
        a = [p[0][key] for p in pairs]
        b = [p[1][key] for p in pairs]
        ratios = [bi / ai for ai, bi in zip(a, b, strict=True)]
        rows.append(
            {
                "metric": key,
                "label": label,
                "decimals": decimals,
                "a": statistics.median(a),
                "b": statistics.median(b),
                "ratio": statistics.median(b) / statistics.median(a),
                "spread": (min(ratios), max(ratios)),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--a", type=Path, default=DEFAULT_A, help="the previous main's src")
    parser.add_argument("--b", type=Path, default=DEFAULT_B, help="this tree's src")
    parser.add_argument("--n", type=int, default=200, help="tool-call iterations")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--processes", type=int, default=2, help="processes the pairs span")
    parser.add_argument("--only", nargs="*", choices=sorted(COMPARISONS), default=None)
    parser.add_argument("--quick", action="store_true", help="2 pairs, N = 50, 1 process")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pieces", nargs="*", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.b, args.a, args.pieces, args.n, args.pairs)))
        return
    if args.quick:
        args.pairs, args.n, args.processes = 2, 50, 1
    names = args.only or list(COMPARISONS)
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}  {platform.platform()}  cpus={os.cpu_count()}")
    print(f"# python {platform.python_version()}, load {os.getloadavg()}")
    print(f"# A pieces from {args.a}, both sides run {args.b}")
    print(f"# N = {args.n}, {args.pairs} pairs over {args.processes} processes, ABBA order")
    figures: dict[str, Any] = {}
    for name in names:
        pieces = COMPARISONS[name]
        pairs: list[Any] = []
        for _ in range(args.processes):  # pairs split over fresh processes, in turn
            pairs += _spawn(args.b, args.a, pieces, args.n, args.pairs // args.processes)
        for i, (a, b) in enumerate(pairs):
            print(
                f"  {name} pair {i + 1}: record, MemoryStore, CPU ms/it "
                f"{a['memory_cpu_ms']:.3f} / {b['memory_cpu_ms']:.3f}"
            )
        rows = summarise(pairs)
        figures[name] = {"pieces": pieces, "rows": rows, "pairs": pairs}
        print(f"\n### {name}: A = the previous main's {' + '.join(pieces)}, B = this tree's")
        print(f"| metric | A median | B median | B/A | per-pair B/A, min-max ({len(pairs)}) |")
        print("|---|---:|---:|---:|---|")
        for r in rows:
            d = r["decimals"]
            low, high = r["spread"]
            print(
                f"| {r['label']} | {r['a']:.{d}f} | {r['b']:.{d}f} | {r['ratio']:.3f} "
                f"| {low:.3f}-{high:.3f} |"
            )
        a_it = statistics.median(p[0]["memory_cpu_ms"] for p in pairs) * 1000.0
        extra = 0.0
        for piece in pieces:  # only the micro figures of the pieces swapped
            key, per_it = PER_ITERATION[piece]
            extra += statistics.median(p[1][key] - p[0][key] for p in pairs) * per_it
        print(
            f"micro-derived end to end: B costs {extra:+.1f} µs of CPU per iteration "
            f"(the median per-pair difference of each micro figure times how often an "
            f"iteration makes it), B/A = {(a_it + extra) / a_it:.3f} of A's {a_it:.0f} µs"
        )
        figures[name]["derived_ratio"] = (a_it + extra) / a_it
        print(flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
