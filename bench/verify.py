"""Verification time of a recorded conversation, and its hashing throughput.

For each N (same conversation as ``overhead.py``: 4 tool-call iterations per turn,
~500-character tool results, each turn continuing the previous one) the SQLite
database is built, or reused from ``overhead.py --keep-dir DIR``, then every run
of the conversation is verified with ONE ``af.Verifier``, root run first, in
conversation order (the verifier caches verified ancestors, so this is meant
to be linear in N).

Printed per N: verification time (median of the repeats), ms per iteration,
the time to merely read the rows, and the hashing throughput:

* ``body MB`` is the sum of the stored event body bytes: the brief's approximation
  of what the verifier hashes, and the basis of ``verify MB/s`` and of the plain
  ``hashlib.sha256`` figures over the same bytes (concatenated and fed in 64 KiB
  chunks; one hash per event body);
* ``hashed MB`` is what the verifier really feeds SHA-256 (event envelopes, chain
  links, request pieces and request digests, domain tags included), counted in one
  extra, untimed verification by wrapping ``hashlib.sha256``; ``x body`` is how
  many times the body bytes that is. A verifier that hashes each piece once stays
  near a constant ``x body``; one that re-hashes history grows with N.

Target: verify time at N=800 at most 4.5x the time at N=200 (4x is linear).

Usage::

    python bench/verify.py                  # N = 50, 200, 800
    python bench/verify.py --quick          # N = 50, 200
    python bench/verify.py --dir /tmp/afp-bench --json verify.json
    python bench/verify.py --profile 800    # cProfile of verifying one conversation
"""

from __future__ import annotations

import gc
import hashlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    QUICK_SIZES,
    SIZES,
    Conversation,
    bench_arguments,
    checkpoint_and_measure,
    conversation_order,
    environment,
    median,
    print_environment,
    profile_report,
    profiled,
    remove_db,
    run_agent_conversation,
    verdict,
    write_figures,
)

import agentfootprint as af

RATIO_LIMIT = 4.5  # verify(800) / verify(200), at most
CHUNK = 64 * 1024


def ensure_db(n: int, directory: Path) -> tuple[Path, bool]:
    """The database of the N-iteration conversation in ``directory``: (path, reused)."""
    path = directory / f"afp-{n}.sqlite"
    conv = Conversation(n)
    if path.exists():
        store = af.SqliteStore(path)
        try:
            order = conversation_order(store)
            infos = {info.run_id: info for info in store.runs()}
            if len(order) == len(conv.turns) and all(infos[r].closed for r in order):
                # a database written by another version of the library may not verify
                _verify_all(store, order)
                return path, True
            print(f"    {path} holds another conversation; rebuilding")
        except Exception as exc:  # anything odd (older log format, ...): rebuild
            print(f"    {path} not reusable ({type(exc).__name__}: {exc}); rebuilding")
        finally:
            store.close()
    remove_db(path)
    store = af.SqliteStore(path)
    try:
        run_agent_conversation(conv, store)
    finally:
        store.close()
    checkpoint_and_measure(path)
    return path, False


def _verify_all(store: af.SqliteStore, order: list[str]) -> af.RunVerification:
    verifier = af.Verifier(store)
    last = None
    for run_id in order:
        last = verifier.verify(run_id)
    assert last is not None and last.outcome is af.Outcome.VALID_UNSIGNED
    return last


def _best_rate(fn: Any, min_seconds: float = 0.2, max_runs: int = 50) -> float:
    """Median seconds of ``fn()`` over enough runs to fill ``min_seconds``."""
    times: list[float] = []
    spent = 0.0
    while (spent < min_seconds or len(times) < 3) and len(times) < max_runs:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
    return median(times)


def count_hashed_bytes(store: af.SqliteStore, order: list[str]) -> tuple[int, int]:
    """(bytes, hash objects) fed to SHA-256 during one (untimed) verification.

    ``hashlib.sha256`` is wrapped for the duration; the library looks it up at
    each call, so every digest the verifier makes is counted, domain tags included.
    """
    real = hashlib.sha256
    fed = [0, 0]

    class Counting:
        def __init__(self, data: bytes = b"", **kwargs: Any) -> None:
            self._h = real(data, **kwargs)
            fed[0] += len(data)
            fed[1] += 1

        def update(self, data: bytes) -> None:
            fed[0] += len(data)
            self._h.update(data)

        def digest(self) -> bytes:
            return self._h.digest()

        def hexdigest(self) -> str:
            return self._h.hexdigest()

        def copy(self) -> Counting:
            twin = Counting.__new__(Counting)
            twin._h = self._h.copy()
            return twin

    hashlib.sha256 = Counting  # type: ignore[assignment]
    try:
        _verify_all(store, order)
    finally:
        hashlib.sha256 = real
    return fed[0], fed[1]


def measure_n(n: int, directory: Path, repeat: int) -> dict[str, Any]:
    path, reused = ensure_db(n, directory)
    store = af.SqliteStore(path)
    try:
        order = conversation_order(store)
        bodies = [bytes(e.body) for run_id in order for e in store.read(run_id)]
        verify_times, read_times = [], []
        final = None
        for _ in range(repeat):
            gc.collect()
            t0 = time.perf_counter()
            for run_id in order:
                for _event in store.read(run_id):
                    pass
            read_times.append(time.perf_counter() - t0)
            gc.collect()
            t0 = time.perf_counter()
            final = _verify_all(store, order)
            verify_times.append(time.perf_counter() - t0)
        hashed, hashes = count_hashed_bytes(store, order)
    finally:
        store.close()
    assert final is not None
    total = sum(len(b) for b in bodies)
    joined = memoryview(b"".join(bodies))

    def chunked() -> bytes:
        h = hashlib.sha256()
        for offset in range(0, len(joined), CHUNK):
            h.update(joined[offset : offset + CHUNK])
        return h.digest()

    def per_event() -> None:
        sha = hashlib.sha256
        for body in bodies:
            sha(body).digest()

    return {
        "n": n,
        "reused_db": reused,
        "runs": len(order),
        "events": len(bodies),
        "commits_last_run": final.commits,
        "body_bytes": total,
        "hashed_bytes": hashed,
        "sha256_objects": hashes,
        "repeat": repeat,
        "verify_seconds": median(verify_times),
        "verify_seconds_all": verify_times,
        "read_seconds": median(read_times),
        "hashlib_chunked_seconds": _best_rate(chunked),
        "hashlib_per_event_seconds": _best_rate(per_event),
    }


def _mbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e6


def print_table(results: list[dict[str, Any]]) -> None:
    print()
    print("Verification of every run of the conversation (one Verifier, runs in order)")
    header = (
        f"{'N':>5} {'runs':>5} {'events':>7} {'rep':>3} {'verify s':>9} {'ms/iter':>8} "
        f"{'read s':>7} {'body MB':>8} {'hashed MB':>10} {'x body':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        n = r["n"]
        print(
            f"{n:>5} {r['runs']:>5} {r['events']:>7} {r['repeat']:>3} "
            f"{r['verify_seconds']:>9.3f} {1000 * r['verify_seconds'] / n:>8.3f} "
            f"{r['read_seconds']:>7.3f} {r['body_bytes'] / 1e6:>8.3f} "
            f"{r['hashed_bytes'] / 1e6:>10.3f} {r['hashed_bytes'] / r['body_bytes']:>6.1f}x"
        )
    print()
    print("Throughput over the body bytes (MB/s; hashlib figures: median of >= 3 runs)")
    header = (
        f"{'N':>5} {'verifier':>9} {'sha256 64KiB chunks':>20} {'sha256 per event':>17} "
        f"{'chunks/verifier':>16} {'per-event/verifier':>19} {'verifier on hashed MB':>22}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        total = r["body_bytes"]
        v = _mbps(total, r["verify_seconds"])
        c = _mbps(total, r["hashlib_chunked_seconds"])
        e = _mbps(total, r["hashlib_per_event_seconds"])
        h = _mbps(r["hashed_bytes"], r["verify_seconds"])
        print(
            f"{r['n']:>5} {v:>9.2f} {c:>20.1f} {e:>17.1f} {c / v:>15.0f}x {e / v:>18.0f}x "
            f"{h:>22.2f}"
        )
    print("  body bytes approximate the hashed bytes (see 'hashed MB' for the counted figure).")


def targets(results: list[dict[str, Any]]) -> dict[str, Any]:
    by_n = {r["n"]: r for r in results}
    if 800 in by_n and 200 in by_n:
        ratio = by_n[800]["verify_seconds"] / by_n[200]["verify_seconds"]
        return {"ratio_800_200": ratio, "limit": RATIO_LIMIT, "met": ratio <= RATIO_LIMIT}
    sizes = sorted(by_n)
    ratio = by_n[sizes[-1]]["verify_seconds"] / by_n[sizes[0]]["verify_seconds"]
    return {
        f"ratio_{sizes[-1]}_{sizes[0]}": ratio,
        "limit": RATIO_LIMIT,
        "met": None,
    }


def print_targets(t: dict[str, Any], results: list[dict[str, Any]]) -> None:
    print()
    print("Target")
    if t["met"] is None:
        key = next(k for k in t if k.startswith("ratio_"))
        _, big, small = key.split("_")
        print(
            f"  verify N={big} / N={small} = {t[key]:.2f}x ({int(big) // int(small)}x is linear); "
            "the N=800/N=200 target needs N=800: run without --quick  -> n/a"
        )
        return
    print(
        f"  verify N=800 / N=200 = {t['ratio_800_200']:.2f}x (at most {t['limit']}x; 4x is "
        f"linear)  -> {verdict(t['met'])}"
    )
    by_n = {r["n"]: r for r in results}
    per_iter = {n: 1000 * r["verify_seconds"] / n for n, r in by_n.items()}
    print("  ms per iteration: " + ", ".join(f"N={n}: {v:.3f}" for n, v in per_iter.items()))


def profile(n: int, directory: Path, top: int) -> str:
    path, _ = ensure_db(n, directory)
    store = af.SqliteStore(path)
    try:
        order = conversation_order(store)
        _verify_all(store, order[:1])  # warm up imports
        profiler, _, _ = profiled(lambda: _verify_all(store, order))
    finally:
        store.close()
    return profile_report(
        profiler, f"cProfile of verifying the N={n} conversation ({len(order)} runs)", top
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_arguments(
        __doc__,
        repeat_default=3,
        repeat_help="verification repetitions",
        profile_help="only profile verification",
    )
    parser.add_argument(
        "--dir", type=Path, help="reuse (or build and keep) the databases afp-<N>.sqlite here"
    )
    args = parser.parse_args(argv)

    env = environment()
    print_environment(env)
    with tempfile.TemporaryDirectory(prefix="afp-verify-") as tmp:
        directory = args.dir or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        if args.profile:
            print(profile(args.profile, directory, args.top))
            return 0
        sizes = QUICK_SIZES if args.quick else SIZES
        results = []
        for n in sizes:
            print(f"... N={n}", flush=True)
            results.append(measure_n(n, directory, max(1, args.repeat)))
            print(f"    database {'reused' if results[-1]['reused_db'] else 'built'}")
    print_table(results)
    t = targets(results)
    print_targets(t, results)
    write_figures(args.json, {"environment": env, "results": results, "target": t})
    return 0


if __name__ == "__main__":
    sys.exit(main())
