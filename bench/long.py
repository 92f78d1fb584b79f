"""Long runs (issue 13): is recording and verifying one conversation linear up to N=20,000?

One conversation of N tool-call iterations (``common.Conversation``: 4 per turn, 500-char
tool results, each turn ``run_sync(msg, continue_from=previous)``), recorded into a fresh
SQLite file, then every run verified with ``af.Verifier(store).verify_all()``.

The model is :class:`ConstantProvider`: it returns the next scripted ``af.LLMResponse``
with a fixed usage and touches nothing of the request, so its own cost per call is
constant (``af.MockProvider`` estimates usage from the whole request, which grows with
the history). Whatever grows per iteration here is agentfootprint's.

Every measurement runs in a subprocess of its own (recording of N, verification of N), so
its peak memory (``ru_maxrss``) is its own; ``rss+`` is that peak minus the RSS the
subprocess had before the timed part (interpreter, imports, the script). Printed per N:
ms per iteration of recording and of verification, their peak and grown RSS, database
bytes per iteration, and each figure over the one at the smallest N (linear: 1.00 for
per-iteration figures; the log itself grows as N, so ``rss+`` should grow no faster than
``N/N0``).

Target (issue 13): per-iteration recording and verify at N=20,000 within 1.15x of N=800,
and peak memory growing no faster than the log.

Usage::

    python bench/long.py                    # N = 800, 5,000, 20,000 (a few minutes)
    python bench/long.py --quick            # N = 800, 5,000
    python bench/long.py --repeat 3         # repetitions per N (median kept, spread shown)
    python bench/long.py --src ../old/src   # measure another tree's package instead
    python bench/long.py --against ../old/src  # A/B: both trees, alternating per N
    python bench/long.py --profile 20000    # only: cProfile recording and verify at N
    python bench/long.py --profile-growth 800 8000  # only: what grows per iteration
"""

from __future__ import annotations

import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Conversation,
    bench_arguments,
    checkpoint_and_measure,
    conversation_agent,
    environment,
    final_text,
    median,
    print_environment,
    profile_report,
    profiled,
    remove_db,
    user_text,
    write_figures,
)

import agentfootprint as af

SIZES = (800, 5_000, 20_000)
QUICK_SIZES = (800, 5_000)
TARGET = 1.15
_USAGE = af.Usage(input=1000, output=20)


class ConstantProvider:
    """The next scripted reply, whatever the request: constant cost per call."""

    name = "constant"

    def __init__(self, replies: list[af.LLMResponse]) -> None:
        self._replies = replies
        self.position = 0

    async def complete(self, request: Any) -> af.LLMResponse:
        response = self._replies[self.position]
        self.position += 1
        return response


def scripted_replies(conv: Conversation) -> list[af.LLMResponse]:
    out: list[af.LLMResponse] = []
    for item in conv.replies():
        if isinstance(item, str):
            out.append(af.reply(item, usage=_USAGE))
        else:
            out.append(af.reply(item.content, tool_calls=list(item.tool_calls), usage=_USAGE))
    return out


def _rss_kb() -> int:
    """Current resident set size in KiB (Linux /proc), or the peak where that is missing."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def record(n: int, path: str) -> dict[str, Any]:
    """Record the N-iteration conversation into a fresh SQLite file at ``path``."""
    conv = Conversation(n)
    provider = ConstantProvider(scripted_replies(conv))
    remove_db(path)
    store = af.SqliteStore(path)
    agent = conversation_agent(conv, provider, store)
    rss0 = _rss_kb()
    seconds = 0.0
    previous: af.RunResult | None = None
    iterations = 0
    try:
        for turn, planned in enumerate(conv.turns):
            t0 = time.perf_counter()
            previous = agent.run_sync(user_text(turn), continue_from=previous)
            seconds += time.perf_counter() - t0
            if previous.outcome != "answered" or previous.answer != final_text(turn):
                raise RuntimeError(f"turn {turn}: {previous.outcome!r}, unexpected answer")
            iterations += previous.iterations - 1
            if previous.iterations != len(planned) + 1:
                raise RuntimeError(f"turn {turn}: {previous.iterations} iterations")
    finally:
        store.close()
    return {"seconds": seconds, "iterations": iterations, "rss0_kb": rss0, "peak_kb": _peak_kb()}


def verify(path: str) -> dict[str, Any]:
    """Verify every run of the database at ``path`` with one ``af.Verifier``."""
    store = af.SqliteStore(path)
    rss0 = _rss_kb()
    runs = 0
    bad: list[Any] = []
    try:
        t0 = time.perf_counter()
        # results are looked at and dropped: holding every RunVerification (its final state
        # and receipt lists) would measure the caller, not the verifier
        for _, result in af.Verifier(store).verify_all():
            runs += 1
            if (
                not isinstance(result, af.RunVerification)
                or result.outcome is not af.Outcome.VALID_UNSIGNED
            ):
                bad.append(result)
        seconds = time.perf_counter() - t0
    finally:
        store.close()
    if bad:
        raise RuntimeError(f"{len(bad)} runs did not verify: {bad[0]}")
    return {"seconds": seconds, "runs": runs, "rss0_kb": rss0, "peak_kb": _peak_kb()}


def _child(what: str, n: int, path: str, src: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if src:  # measure another source tree (its ``src``, ahead of the installed package)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, __file__, "--child", what, str(n), path],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def measure(n: int, directory: str, src: str | None = None) -> dict[str, Any]:
    path = os.path.join(directory, f"long-{n}.sqlite")
    rec = _child("record", n, path, src)
    size = checkpoint_and_measure(path)
    ver = _child("verify", n, path, src)
    remove_db(path)
    return {"n": n, "record": rec, "verify": ver, "bytes": size}


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return ""
    return f" ({min(values):.3f}-{max(values):.3f})"


def main() -> int:
    parser = bench_arguments(
        __doc__,
        repeat_default=1,
        repeat_help="repetitions per N (default 1; median kept)",
        profile_help="only: cProfile recording and verification at this N",
    )
    parser.add_argument("--sizes", type=int, nargs="+", help="N values (default 800 5000 20000)")
    parser.add_argument(
        "--src", help="measure the package in this directory (e.g. a worktree's src) instead"
    )
    parser.add_argument(
        "--against", help="also measure the package in this directory, alternating (A/B)"
    )
    parser.add_argument(
        "--profile-growth",
        type=int,
        nargs=2,
        metavar=("N0", "N1"),
        help="only: cProfile both sizes; list functions by own time per iteration over linear",
    )
    parser.add_argument("--child", nargs=3, metavar=("WHAT", "N", "PATH"), help=argparse_hide())
    args = parser.parse_args()
    if args.child:
        what, n, path = args.child
        result = record(int(n), path) if what == "record" else verify(path)
        print(json.dumps(result))
        return 0
    if args.profile:
        return profile(args.profile, args.top)
    if args.profile_growth:
        small, big = args.profile_growth
        return profile_growth(small, big, args.top)

    sizes = tuple(args.sizes or (QUICK_SIZES if args.quick else SIZES))
    trees: list[tuple[str, str | None]] = [("this tree", args.src)]
    if args.against:
        trees.append((f"against {args.against}", args.against))
    env = environment()
    print_environment(env)
    print(
        f"# one conversation, 4 tool-call iterations per turn, 500-char results, "
        f"N = {', '.join(map(str, sizes))}; constant-cost scripted model; "
        f"{args.repeat} repetition(s), each measurement in its own subprocess"
        + (f"; package from {args.src}" if args.src else "")
        + (f"; alternating with {args.against}" if args.against else "")
    )
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {t: {n: [] for n in sizes} for t, _ in trees}
    with tempfile.TemporaryDirectory(prefix="afp-long-") as directory:
        for _ in range(args.repeat):  # sizes (and trees) interleaved within each repetition
            for n in sizes:
                for label, src in trees:
                    m = measure(n, directory, src)
                    runs[label][n].append(m)
                    print(
                        f"  {label}, N={n}: record {m['record']['seconds']:.1f} s, "
                        f"verify {m['verify']['seconds']:.1f} s",
                        flush=True,
                    )
    figures: dict[str, Any] = {"environment": env, "runs": runs, "rows": {}}
    ok = True
    for label, _ in trees:
        print(f"\n## {label}")
        rows, met = report(sizes, runs[label])
        figures["rows"][label] = rows
        ok = ok and met
        if len(trees) == 1:
            break
    if len(trees) == 2:
        this, other = (figures["rows"][t] for t, _ in trees)
        print("\nthis tree / the other, per N (ms per iteration)")
        for n in sizes:
            print(
                f"  N={n:>6}: record {this[n]['record_ms'] / other[n]['record_ms']:.2f}x, "
                f"verify {this[n]['verify_ms'] / other[n]['verify_ms']:.2f}x"
            )
    write_figures(args.json, figures)
    return 0


def report(
    sizes: tuple[int, ...], runs: dict[int, list[dict[str, Any]]]
) -> tuple[dict[int, Any], bool]:
    """Print the table and the ratios of one tree's runs; (rows, target met)."""
    rows: dict[int, dict[str, Any]] = {}
    for n in sizes:
        ms = runs[n]
        rec = [1000 * m["record"]["seconds"] / n for m in ms]
        ver = [1000 * m["verify"]["seconds"] / n for m in ms]
        rows[n] = {
            "record_ms": median(rec),
            "record_all": rec,
            "verify_ms": median(ver),
            "verify_all": ver,
            "record_peak_mb": median(m["record"]["peak_kb"] / 1024 for m in ms),
            "record_grown_mb": median(
                (m["record"]["peak_kb"] - m["record"]["rss0_kb"]) / 1024 for m in ms
            ),
            "verify_peak_mb": median(m["verify"]["peak_kb"] / 1024 for m in ms),
            "verify_grown_mb": median(
                (m["verify"]["peak_kb"] - m["verify"]["rss0_kb"]) / 1024 for m in ms
            ),
            "bytes_per_iter": median(m["bytes"] / n for m in ms),
            "db_mb": median(m["bytes"] / 2**20 for m in ms),
        }
    base = rows[sizes[0]]
    print(
        f"{'N':>7} {'rec ms/it':>18} {'ver ms/it':>18} {'B/it':>7} {'db MB':>7} "
        f"{'rec peak':>8} {'rec rss+':>8} {'ver peak':>8} {'ver rss+':>8}"
    )
    for n in sizes:
        r = rows[n]
        print(
            f"{n:>7} {r['record_ms']:>7.3f}{_spread(r['record_all']):<11} "
            f"{r['verify_ms']:>7.3f}{_spread(r['verify_all']):<11} {r['bytes_per_iter']:>7.0f} "
            f"{r['db_mb']:>7.1f} {r['record_peak_mb']:>7.0f}M {r['record_grown_mb']:>7.0f}M "
            f"{r['verify_peak_mb']:>7.0f}M {r['verify_grown_mb']:>7.0f}M"
        )
    print(f"ratios to N={sizes[0]} (per-iteration figures: 1.00 is linear; memory vs N/N0)")
    print(
        f"{'N':>7} {'N/N0':>6} {'record':>7} {'verify':>7} {'B/it':>6} "
        f"{'rec rss+':>9} {'ver rss+':>9}"
    )
    ok = True
    for n in sizes[1:]:
        r = rows[n]
        rec_ratio = r["record_ms"] / base["record_ms"]
        ver_ratio = r["verify_ms"] / base["verify_ms"]
        mem_rec = r["record_grown_mb"] / max(base["record_grown_mb"], 1.0)
        mem_ver = r["verify_grown_mb"] / max(base["verify_grown_mb"], 1.0)
        r.update(record_ratio=rec_ratio, verify_ratio=ver_ratio, rss_rec=mem_rec, rss_ver=mem_ver)
        print(
            f"{n:>7} {n / sizes[0]:>6.2f} {rec_ratio:>7.2f} {ver_ratio:>7.2f} "
            f"{r['bytes_per_iter'] / base['bytes_per_iter']:>6.2f} {mem_rec:>9.2f} {mem_ver:>9.2f}"
        )
        ok = ok and rec_ratio <= TARGET and ver_ratio <= TARGET
    print(
        f"target: per-iteration recording and verify at N={sizes[-1]} within {TARGET}x of "
        f"N={sizes[0]}: {'MET' if ok else 'NOT MET'}"
    )
    return rows, ok


def argparse_hide() -> str:
    import argparse

    return argparse.SUPPRESS


def profile(n: int, top: int) -> int:
    with tempfile.TemporaryDirectory(prefix="afp-long-") as directory:
        path = os.path.join(directory, f"long-{n}.sqlite")
        profiler, _, seconds = profiled(lambda: record(n, path))
        print(profile_report(profiler, f"recording N={n}: {seconds:.1f} s", top))
        profiler, _, seconds = profiled(lambda: verify(path))
        print(profile_report(profiler, f"verify N={n}: {seconds:.1f} s", top))
    return 0


def _own_times(n: int, directory: str) -> dict[str, dict[str, tuple[float, int]]]:
    """Per function: (own seconds, calls), for recording and for verification at ``n``."""
    path = os.path.join(directory, f"growth-{n}.sqlite")
    out: dict[str, dict[str, tuple[float, int]]] = {}
    for what, run in (("record", lambda: record(n, path)), ("verify", lambda: verify(path))):
        profiler, _, _ = profiled(run)
        stats = pstats.Stats(profiler).strip_dirs().stats  # type: ignore[attr-defined]
        out[what] = {f"{f}:{line}({name})": (v[2], v[0]) for (f, line, name), v in stats.items()}
    remove_db(path)
    return out


def profile_growth(small: int, big: int, top: int) -> int:
    """What grows: each function's own time at ``big`` over ``big / small`` times its own
    time at ``small`` (seconds beyond linear), largest first. A function whose per-call cost
    is constant shows about 0 (up to noise); one doing O(history) per call leads the list."""
    with tempfile.TemporaryDirectory(prefix="afp-long-") as directory:
        at_small, at_big = _own_times(small, directory), _own_times(big, directory)
    for what in ("record", "verify"):
        total_small = sum(t for t, _ in at_small[what].values())
        total_big = sum(t for t, _ in at_big[what].values())
        print(
            f"\n## {what}: {1000 * total_small / small:.3f} ms/it at N={small}, "
            f"{1000 * total_big / big:.3f} at N={big} (under cProfile)"
        )
        rows = []
        for key, (seconds, calls) in at_big[what].items():
            base, base_calls = at_small[what].get(key, (0.0, 0))
            rows.append((seconds - base * big / small, key, base, seconds, base_calls, calls))
        rows.sort(reverse=True)
        print(f"{'s over linear':>13} {'ms/it small':>11} {'ms/it big':>9}  calls  function")
        for excess, key, base, seconds, base_calls, calls in rows[:top]:
            print(
                f"{excess:>13.3f} {1000 * base / small:>11.4f} {1000 * seconds / big:>9.4f}  "
                f"{base_calls}->{calls}  {key}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
