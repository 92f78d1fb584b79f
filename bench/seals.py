"""What seals and checkpoints cost (issue 14), measured side by side in one run.

1. **Seal cost per run**: the same one-call run (a user message, one text reply) recorded by
   an agent with a signer (log format v4: the statement, one Ed25519 signature, the
   ``run.seal`` row, a seal log leaf) and by one without (format v3), alternating per pair,
   into fresh SQLite files at ``durability="full"``. Printed: ms per run of each, the
   difference (the seal's cost), the ratio and the per-pair spread; and bytes per run.
2. **Verifying a sealed run**: ``Verifier(store, trusted_keys=[key]).verify_all()`` over
   those files, sealed against unsealed, per run.
3. **The Merkle log at 10,000 and 100,000 sealed runs** (``--sizes``): with leaf hashes made
   from random heads and seal digests (what the tree holds; recording 100,000 runs is not
   what is measured here), the time to compute the root, a signed checkpoint, an inclusion
   proof and its verification (at 200 random leaves), a consistency proof from a random
   older size and its verification; proof sizes in hashes and bytes against
   ``ceil(log2 n)``. The tree functions rebuild from the leaves (no stored nodes), so the root
   and one proof are O(n), k proofs in one walk O(n + k log n); verifying a proof is O(log n).
4. **A checkpoint of a real database**: ``agentfootprint checkpoint``'s work
   (``make_checkpoint``: verify every run, recompute every leaf, the root, one signature) on
   the sealed file of part 1, per sealed run.
5. **Bundles with inclusion proofs** (``export --key``, bundle version 2): 50 sealed runs of
   that file exported plain and with proofs under a fresh signed checkpoint, alternating, and
   each bundle verified with the key pinned: export and verify time, and bytes per run. The
   proofs of all runs exported share one walk of the tree (``inclusion_proofs``), which part
   3 also times against one proof at a time.

Usage::

    python bench/seals.py                 # 300 runs per side, 5 pairs; 10k and 100k leaves
    python bench/seals.py --quick         # 60 runs, 2 pairs; 10k leaves
    python bench/seals.py --runs 500 --pairs 7 --json seals.json
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, median, print_environment, remove_db, write_figures

import agentfootprint as af
from agentfootprint.seal import Ed25519Signer, merkle
from agentfootprint.seal.note import Checkpoint, VerifierKey, open_checkpoint
from agentfootprint.verify.checkpoint import make_checkpoint, sign_checkpoint_with

SIGNER = Ed25519Signer.from_seed(bytes(range(32)))


def record(path: Path, runs: int, signer: Any) -> float:
    """Seconds of ``run_sync`` summed over ``runs`` one-call runs."""
    provider = af.MockProvider([f"answer {i}" for i in range(runs)], record=False)
    with af.Agent(provider=provider, model="m", store=path, signer=signer) as agent:
        total = 0.0
        for i in range(runs):
            t0 = time.perf_counter()
            agent.run_sync(f"question {i}")
            total += time.perf_counter() - t0
    return total


def verify_seconds(path: Path) -> float:
    store = af.SqliteStore(path, readonly=True)
    try:
        verifier = af.Verifier(store, trusted_keys=[SIGNER.public])
        t0 = time.perf_counter()
        outcomes = {
            r.outcome for _, r in verifier.verify_all() if isinstance(r, af.RunVerification)
        }
        seconds = time.perf_counter() - t0
    finally:
        store.close()
    assert outcomes <= {af.Outcome.VALID, af.Outcome.VALID_UNSIGNED}, outcomes
    return seconds


def size_of(path: Path) -> int:
    return sum(
        os.path.getsize(f"{path}{s}") for s in ("", "-wal", "-shm") if os.path.exists(f"{path}{s}")
    )


def seal_pairs(runs: int, pairs: int, directory: Path) -> dict[str, Any]:
    rows: list[dict[str, float]] = []
    for pair in range(pairs):
        figures: dict[str, float] = {}
        order = [("sealed", SIGNER), ("plain", None)]
        if pair % 2:
            order.reverse()
        for name, signer in order:
            path = directory / f"{name}-{pair}.db"
            remove_db(path)
            figures[f"{name}_ms"] = record(path, runs, signer) * 1000 / runs
            figures[f"{name}_verify_ms"] = verify_seconds(path) * 1000 / runs
            figures[f"{name}_bytes"] = size_of(path) / runs
        rows.append(figures)
        print(
            f"  pair {pair + 1}: record {figures['plain_ms']:.3f} / {figures['sealed_ms']:.3f}"
            f" ms/run, verify {figures['plain_verify_ms']:.3f} /"
            f" {figures['sealed_verify_ms']:.3f} ms/run (plain / sealed)"
        )
    out: dict[str, Any] = {"pairs": rows}
    for key in rows[0]:
        out[key] = median(r[key] for r in rows)
    ratios = [r["sealed_ms"] / r["plain_ms"] for r in rows]
    verify_ratios = [r["sealed_verify_ms"] / r["plain_verify_ms"] for r in rows]
    out["ratio"], out["ratio_range"] = median(ratios), (min(ratios), max(ratios))
    out["verify_ratio"] = median(verify_ratios)
    out["verify_ratio_range"] = (min(verify_ratios), max(verify_ratios))
    out["seal_ms"] = median(r["sealed_ms"] - r["plain_ms"] for r in rows)
    return out


def timed(fn: Any, repeat: int = 3) -> tuple[float, Any]:
    best, value = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def tree_figures(n: int, rng: random.Random) -> dict[str, Any]:
    leaves = [
        merkle.leaf_hash(
            merkle.run_leaf(
                run_id=f"run-{i:08d}", events=25, head=rng.randbytes(32), seal=rng.randbytes(32)
            )
        )
        for i in range(n)
    ]
    root_s, root = timed(lambda: merkle.root(leaves))
    checkpoint = Checkpoint("bench/seals", n, root)
    sign_s, note = timed(lambda: sign_checkpoint_with(checkpoint, SIGNER))
    key = VerifierKey("bench/seals", SIGNER.public_key)
    open_s, _ = timed(lambda: open_checkpoint(note, [key]))
    indices = [rng.randrange(n) for _ in range(200)]
    build, check, sizes = [], [], []
    for index in indices:
        t0 = time.perf_counter()
        proof = merkle.inclusion_proof(leaves, index)
        t1 = time.perf_counter()
        merkle.verify_inclusion(leaves[index], index, n, proof, root)
        t2 = time.perf_counter()
        build.append(t1 - t0)
        check.append(t2 - t1)
        sizes.append(len(proof))
    batch_s, _ = timed(lambda: merkle.inclusion_proofs(leaves, indices), repeat=1)
    old = rng.randrange(1, n)
    consistency_s, proof = timed(lambda: merkle.consistency_proof(leaves, old), repeat=1)
    old_root = merkle.root(leaves[:old])
    check_s, _ = timed(lambda: merkle.verify_consistency(old, n, old_root, root, proof))
    return {
        "n": n,
        "log2": math.ceil(math.log2(n)),
        "root_ms": root_s * 1000,
        "sign_ms": sign_s * 1000,
        "open_ms": open_s * 1000,
        "note_bytes": len(note),
        "inclusion_build_ms": median(build) * 1000,
        "inclusion_verify_us": median(check) * 1e6,
        "inclusion_hashes_max": max(sizes),
        "inclusion_hashes_median": median(sizes),
        "inclusion_200_one_walk_ms": batch_s * 1000,
        "inclusion_200_one_by_one_ms": sum(build) * 1000,
        "consistency_old": old,
        "consistency_build_ms": consistency_s * 1000,
        "consistency_verify_us": check_s * 1e6,
        "consistency_hashes": len(proof),
    }


def checkpoint_of_file(path: Path) -> dict[str, Any]:
    store = af.SqliteStore(path, readonly=True)
    try:
        sealed = len(store.seal_log())
        seconds, _ = timed(lambda: make_checkpoint(af.Verifier(store), SIGNER, "bench/db"), 1)
    finally:
        store.close()
    return {"sealed_runs": sealed, "ms": seconds * 1000, "ms_per_run": seconds * 1000 / sealed}


def bundle_figures(path: Path, directory: Path, count: int = 50, pairs: int = 3) -> dict[str, Any]:
    """Export ``count`` sealed runs plain and with proofs, alternating; verify each bundle."""
    from agentfootprint.exchange.transfer import export_runs

    store = af.SqliteStore(path, readonly=True)
    try:
        run_ids = [str(run_id) for _, run_id in store.seal_log()][:count]
        rows: list[dict[str, float]] = []
        for pair in range(pairs):
            figures: dict[str, float] = {}
            order = [("proven", {"signer": SIGNER, "origin": "bench/db"}), ("plain", {})]
            if pair % 2:
                order.reverse()
            for name, kwargs in order:
                out = directory / f"{name}-{pair}.afp"
                t0 = time.perf_counter()
                export_runs(store, run_ids, out, **kwargs)
                figures[f"{name}_export_ms"] = (time.perf_counter() - t0) * 1000
                figures[f"{name}_bytes"] = out.stat().st_size / len(run_ids)
                with af.BundleSource(out) as source:
                    verifier = af.Verifier(source, trusted_keys=[SIGNER.public])
                    t0 = time.perf_counter()
                    results = [r for _, r in verifier.verify_all()]
                    figures[f"{name}_verify_ms"] = (time.perf_counter() - t0) * 1000 / len(run_ids)
                assert all(isinstance(r, af.RunVerification) for r in results)
                if name == "proven":
                    assert all(r.inclusion and r.inclusion.signed_by for r in results)
            rows.append(figures)
    finally:
        store.close()
    out: dict[str, Any] = {"runs": len(run_ids)}
    for key in rows[0]:
        out[key] = median(r[key] for r in rows)
    ratios = [r["proven_verify_ms"] / r["plain_verify_ms"] for r in rows]
    out["verify_ratio"], out["verify_ratio_range"] = median(ratios), (min(ratios), max(ratios))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per side and pair")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--quick", action="store_true", help="60 runs, 2 pairs, 10k leaves")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.runs, args.pairs, args.sizes = 60, 2, [10_000]
    env = environment()
    print_environment(env)
    figures: dict[str, Any] = {"environment": env}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        print(f"\n## 1-2. one-call runs, {args.runs} per side, {args.pairs} pairs (SQLite, full)")
        seals = seal_pairs(args.runs, args.pairs, directory)
        figures["seals"] = seals
        low, high = seals["ratio_range"]
        vlow, vhigh = seals["verify_ratio_range"]
        print(
            f"record: plain {seals['plain_ms']:.3f}, sealed {seals['sealed_ms']:.3f} ms/run; "
            f"the seal {seals['seal_ms']:.3f} ms/run; sealed/plain {seals['ratio']:.3f}x "
            f"({low:.3f}-{high:.3f}x)"
        )
        print(
            f"verify: plain {seals['plain_verify_ms']:.3f}, sealed "
            f"{seals['sealed_verify_ms']:.3f} ms/run; sealed/plain {seals['verify_ratio']:.3f}x "
            f"({vlow:.3f}-{vhigh:.3f}x)"
        )
        print(
            f"bytes: plain {seals['plain_bytes']:.0f}, sealed {seals['sealed_bytes']:.0f} B/run "
            f"(+{seals['sealed_bytes'] - seals['plain_bytes']:.0f})"
        )
        print("\n## 4. checkpoint of the sealed file (verify every run, leaves, root, sign)")
        made = checkpoint_of_file(directory / "sealed-0.db")
        figures["checkpoint_of_file"] = made
        print(
            f"{made['sealed_runs']} sealed runs: {made['ms']:.1f} ms, "
            f"{made['ms_per_run']:.3f} ms per sealed run"
        )
        print("\n## 5. bundles of 50 sealed runs: plain (v1) against with proofs (v2, --key)")
        bundles = bundle_figures(directory / "sealed-0.db", directory)
        figures["bundles"] = bundles
        vlow, vhigh = bundles["verify_ratio_range"]
        print(
            f"export: plain {bundles['plain_export_ms']:.1f} ms, with proofs "
            f"{bundles['proven_export_ms']:.1f} ms (a checkpoint of the whole file first)"
        )
        extra = bundles["proven_bytes"] - bundles["plain_bytes"]
        print(
            f"bytes per run: plain {bundles['plain_bytes']:.0f}, with proofs "
            f"{bundles['proven_bytes']:.0f} (+{extra:.0f})"
        )
        print(
            f"verify per run: plain {bundles['plain_verify_ms']:.3f} ms, with proofs "
            f"{bundles['proven_verify_ms']:.3f} ms ({bundles['verify_ratio']:.3f}x, "
            f"{vlow:.3f}-{vhigh:.3f}x)"
        )
    print("\n## 3. the Merkle log (leaf hashes in memory)")
    rng = random.Random(14)
    header = (
        f"{'n':>8} {'root ms':>9} {'sign ms':>8} {'incl ms':>8} {'incl us':>8} "
        f"{'hashes':>7} {'log2 n':>7} {'cons ms':>8} {'cons us':>8} {'hashes':>7}"
    )
    print(header)
    figures["trees"] = []
    for n in args.sizes:
        tree = tree_figures(n, rng)
        figures["trees"].append(tree)
        print(
            f"{n:>8} {tree['root_ms']:>9.1f} {tree['sign_ms']:>8.3f} "
            f"{tree['inclusion_build_ms']:>8.1f} {tree['inclusion_verify_us']:>8.1f} "
            f"{tree['inclusion_hashes_max']:>7} {tree['log2']:>7} "
            f"{tree['consistency_build_ms']:>8.1f} {tree['consistency_verify_us']:>8.1f} "
            f"{tree['consistency_hashes']:>7}"
        )
    print(
        "(incl/cons ms: building a proof from the leaves; us: verifying it; hashes: its "
        "length, 32 bytes each; a signed checkpoint note is "
        f"{figures['trees'][0]['note_bytes']} bytes)"
    )
    for tree in figures["trees"]:
        print(
            f"{tree['n']:>8} leaves: 200 inclusion proofs in one walk "
            f"{tree['inclusion_200_one_walk_ms']:.1f} ms, one by one "
            f"{tree['inclusion_200_one_by_one_ms']:.1f} ms"
        )
    write_figures(args.json, figures)


if __name__ == "__main__":
    main()
