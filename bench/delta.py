"""agentfootprint against LangGraph's DeltaChannel and add_messages, bytes per iteration (issue 13).

One run records the conversation of ``overhead.py`` (N tool-call iterations, 4 per turn,
500-character results, every turn ``run_sync(msg, continue_from=prev)``) three ways:

* ``afp``: agentfootprint to a fresh SQLite file, default options and durability (a new
  file gets storage schema 2);
* ``add_messages``: LangGraph + ``SqliteSaver``, ``MessagesState`` (the ``add_messages``
  reducer): every checkpoint stores the whole list;
* ``delta``: LangGraph + ``SqliteSaver`` with the messages in the beta ``DeltaChannel``
  (``langgraph_peer.DeltaMessagesState``, default ``snapshot_frequency`` 100): each step's
  writes plus a full snapshot of the list every 100 updates.

Bytes are ``file + -wal + -shm`` after every connection is closed and a
``wal_checkpoint(TRUNCATE)`` (as ``overhead.py``), divided by N; they are deterministic,
so every repetition's bytes are kept and the spread printed (0 when they agree). Time per
iteration (only the turn calls, summed) is a side figure: the median of the repetitions,
the three variants run in a rotating order within each one. The first repetition also
reads the final messages back from both LangGraph databases (``graph.get_state``, untimed)
and checks they are the same list, of the expected length. Then, untimed, where the
bytes of the largest agentfootprint and DeltaChannel databases go.

Targets at N=800: DeltaChannel / afp at least 5x, add_messages / afp at least 100x.

Usage::

    python bench/delta.py                # N = 50, 200, 800, 3 repetitions (~1.5 min on 2 vCPU)
    python bench/delta.py --quick        # N = 50, 200
    python bench/delta.py --repeat 1 --json delta.json
    python bench/delta.py --snapshot-frequency 1000 --snapshot-frequency 1000000000
                                         # also DeltaChannel's bytes with fewer snapshots
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    ITERATIONS_PER_TURN,
    QUICK_SIZES,
    RESULT_CHARS,
    SIZES,
    Conversation,
    announce,
    checkpoint_and_measure,
    db_breakdown,
    environment,
    median,
    print_environment,
    remove_db,
    run_agent_conversation,
    tool_result,
    verdict,
    write_figures,
)
from langgraph_peer import run_langgraph_conversation
from leaner import breakdown as afp_pages
from overhead import _check_same_script

import agentfootprint as af

VARIANTS = ("afp", "add_messages", "delta")
DELTA_FACTOR = 5.0  # DeltaChannel bytes over ours at N=800, at least
ADD_FACTOR = 100.0  # SqliteSaver + add_messages bytes over ours at N=800, at least


def run_afp(n: int, path: Path) -> tuple[float, int]:
    """(seconds, db bytes) of the conversation recorded to a fresh SQLite file."""
    remove_db(path)
    store = af.SqliteStore(path)
    try:
        run = run_agent_conversation(Conversation(n), store)
    finally:
        store.close()
    return run.seconds, checkpoint_and_measure(path)


def run_peer(
    n: int, path: Path, channel: str, keep_messages: bool, snapshot_frequency: int | None = None
) -> dict[str, Any]:
    return run_langgraph_conversation(
        n,
        str(path),
        iterations_per_turn=ITERATIONS_PER_TURN,
        result_chars=RESULT_CHARS,
        channel=channel,  # type: ignore[arg-type]
        keep_messages=keep_messages,
        snapshot_frequency=snapshot_frequency,
    )


def sensitivity(
    results: list[dict[str, Any]], frequencies: list[int], workdir: Path
) -> dict[str, dict[str, int]]:
    """Bytes of the DeltaChannel peer with other snapshot frequencies, one run each, printed
    against the afp bytes of the same N measured above."""
    out: dict[str, dict[str, int]] = {}
    print()
    print("DeltaChannel bytes per iteration by snapshot_frequency (one run each; 100 is default)")
    header = f"{'freq':>12} " + " ".join(f"{'N=' + str(r['n']):>9} {'/afp':>6}" for r in results)
    print(header)
    print("-" * len(header))
    for freq in [100, *frequencies]:
        cols = []
        for r in results:
            n = r["n"]
            if freq == 100:
                size = r["db_bytes"]["delta"]
            else:
                path = workdir / f"delta-{freq}-{n}.sqlite"
                size = run_peer(n, path, "delta", False, snapshot_frequency=freq)["db_bytes"]
                remove_db(path)
            out.setdefault(str(freq), {})[str(n)] = size
            cols.append(f"{size / n:>9,.0f} {size / r['db_bytes']['afp']:>5.2f}x")
        print(f"{freq:>12} " + " ".join(cols))
    return out


def check_messages(n: int, add: list[Any], delta: list[Any]) -> int:
    """Both peers end with the same messages, as many as the script has; returns that count."""
    expected = 2 * n + 2 * len(Conversation(n).turns)
    if len(add) != expected:
        raise SystemExit(f"N={n}: add_messages kept {len(add)} messages, expected {expected}")
    if [m.model_dump() for m in add] != [m.model_dump() for m in delta]:
        raise SystemExit(f"N={n}: DeltaChannel's final messages differ from add_messages'")
    if n and add[-2].content != tool_result(n - 1):
        raise SystemExit(f"N={n}: the last tool result is not the script's")
    return expected


def measure_n(n: int, repeat: int, workdir: Path, keep: bool) -> dict[str, Any]:
    seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
    sizes: dict[str, list[int]] = {v: [] for v in VARIANTS}
    paths = {v: workdir / f"{v}-{n}.sqlite" for v in VARIANTS}
    peers: dict[str, dict[str, Any]] = {}
    messages = 0
    for rep in range(repeat):
        order = VARIANTS[rep % 3 :] + VARIANTS[: rep % 3]
        for variant in order:
            gc.collect()
            if variant == "afp":
                s, size = run_afp(n, paths[variant])
            else:
                remove_db(paths[variant])
                r = run_peer(n, paths[variant], variant, keep_messages=rep == 0)
                s, size = r["seconds"], r["db_bytes"]
                peers[variant] = {k: r[k] for k in ("steps", "checkpoints", "writes")}
                if rep == 0:
                    peers[variant]["messages"] = r["messages"]
            seconds[variant].append(s)
            sizes[variant].append(size)
        if rep == 0:
            messages = check_messages(
                n, peers["add_messages"].pop("messages"), peers["delta"].pop("messages")
            )
    result: dict[str, Any] = {
        "n": n,
        "repeat": repeat,
        "messages": messages,
        "seconds": {v: median(ts) for v, ts in seconds.items()},
        "seconds_all": seconds,
        "db_bytes": {v: sizes[v][-1] for v in VARIANTS},
        "db_bytes_all": sizes,
        "peers": peers,
        "paths": {v: str(p) for v, p in paths.items()},
    }
    if not keep:
        for p in paths.values():
            remove_db(p)
    return result


def delta_pages(path: str, n: int) -> list[str]:
    """Where a DeltaChannel database's bytes go: b-trees (dbstat), snapshot checkpoints
    against the others, metadata, the messages writes."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    serde = JsonPlusSerializer()
    conn = sqlite3.connect(path)
    lines = []
    try:
        for name, size in conn.execute(
            "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ):
            lines.append(f"  {name:<32} {size / n:>9.1f} B/it")
        snaps = snap_bytes = other = other_bytes = meta = 0
        for kind, blob, metadata in conn.execute(
            "SELECT type, checkpoint, metadata FROM checkpoints"
        ):
            meta += len(metadata or b"")
            values = serde.loads_typed((kind, blob)).get("channel_values", {})
            if isinstance(values.get("messages"), _DeltaSnapshot):
                snaps, snap_bytes = snaps + 1, snap_bytes + len(blob)
            else:
                other, other_bytes = other + 1, other_bytes + len(blob)
        lines.append(
            f"  checkpoint blobs, {snaps} with a messages snapshot {snap_bytes / n:>9.1f} B/it "
            f"({snap_bytes / max(snaps, 1):,.0f} B each)"
        )
        lines.append(
            f"  checkpoint blobs, the other {other:<5}         {other_bytes / n:>9.1f} B/it "
            f"({other_bytes / max(other, 1):,.0f} B each)"
        )
        lines.append(f"  checkpoint metadata                   {meta / n:>9.1f} B/it")
        for channel, rows, size in conn.execute(
            "SELECT channel, COUNT(*), SUM(LENGTH(value)) FROM writes GROUP BY channel"
        ):
            lines.append(f"  writes {channel:<18} {rows:>5} rows    {(size or 0) / n:>9.1f} B/it")
    finally:
        conn.close()
    return lines


def afp_lines(path: str, n: int) -> list[str]:
    """Where agentfootprint's bytes go: b-trees (leaner.py's dbstat breakdown), then the
    stored body bytes of each row type."""
    lines = afp_pages(path, 2, n)
    for kind, row in db_breakdown(path)["by_type"].items():
        lines.append(f"  body {kind:<10} {row['rows']:>6} rows  {row['body_bytes'] / n:>9.1f} B/it")
    return lines


def spread(values: list[int]) -> str:
    """Max - min of a file's bytes over the repetitions (SQLite pages are 4,096 B)."""
    return f"{max(values) - min(values):,}"


def print_tables(results: list[dict[str, Any]]) -> None:
    print()
    print("Bytes per iteration (file + -wal + -shm after wal_checkpoint(TRUNCATE))")
    header = (
        f"{'N':>5} {'afp':>9} {'delta':>9} {'add_messages':>13} {'delta/afp':>10} "
        f"{'add/afp':>9} {'delta ckpts':>11} {'max-min bytes over reps (afp; delta; add)':>42}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        n, b = r["n"], r["db_bytes"]
        spreads = "; ".join(spread(r["db_bytes_all"][v]) for v in ("afp", "delta", "add_messages"))
        print(
            f"{n:>5} {b['afp'] / n:>9,.0f} {b['delta'] / n:>9,.0f} {b['add_messages'] / n:>13,.0f} "
            f"{b['delta'] / b['afp']:>9.2f}x {b['add_messages'] / b['afp']:>8.1f}x "
            f"{r['peers']['delta']['checkpoints']:>11} {spreads:>42}"
        )
    first, last = results[0], results[-1]
    print(
        f"  per-iteration growth N={last['n']} / N={first['n']}: "
        + ", ".join(
            f"{v} {(last['db_bytes'][v] / last['n']) / (first['db_bytes'][v] / first['n']):.2f}x"
            for v in VARIANTS
        )
    )
    print()
    print("Time per iteration (ms; median of the repetitions, min-max; the turn calls only)")
    header = f"{'N':>5} {'rep':>3} {'afp':>18} {'delta':>20} {'add_messages':>20} {'delta/afp':>10}"
    print(header)
    print("-" * len(header))
    for r in results:
        n, s, a = r["n"], r["seconds"], r["seconds_all"]

        def col(v: str, width: int, n: int = n, s: Any = s, a: Any = a) -> str:
            text = f"{1e3 * s[v] / n:.2f} ({1e3 * min(a[v]) / n:.2f}-{1e3 * max(a[v]) / n:.2f})"
            return f"{text:>{width}}"

        print(
            f"{n:>5} {r['repeat']:>3} {col('afp', 18)} {col('delta', 20)} "
            f"{col('add_messages', 20)} {s['delta'] / s['afp']:>9.1f}x"
        )
    print(
        f"  (final messages identical in both LangGraph databases: {first['messages']} at "
        f"N={first['n']} ... {last['messages']} at N={last['n']})"
    )


def targets(results: list[dict[str, Any]]) -> dict[str, Any]:
    big = results[-1]
    b = big["db_bytes"]
    at_800 = big["n"] == 800
    delta, add = b["delta"] / b["afp"], b["add_messages"] / b["afp"]
    return {
        "n": big["n"],
        "delta_factor": delta,
        "delta_met": delta >= DELTA_FACTOR if at_800 else None,
        "add_factor": add,
        "add_met": add >= ADD_FACTOR if at_800 else None,
    }


def print_targets(t: dict[str, Any]) -> None:
    note = "" if t["delta_met"] is not None else "  (the targets are at N=800: run without --quick)"
    print()
    print("Targets")
    print(
        f"  DeltaChannel / afp at N={t['n']} = {t['delta_factor']:.2f}x (at least "
        f"{DELTA_FACTOR:.0f}x)  -> {verdict(t['delta_met'])}{note}"
    )
    print(
        f"  add_messages / afp at N={t['n']} = {t['add_factor']:.1f}x (at least "
        f"{ADD_FACTOR:.0f}x)  -> {verdict(t['add_met'])}{note}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 50, 200 only")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per N (default 3)")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument(
        "--snapshot-frequency",
        type=int,
        action="append",
        default=[],
        metavar="K",
        help="also record DeltaChannel with this snapshot_frequency (bytes only; repeatable)",
    )
    args = parser.parse_args(argv)
    env = environment()
    print_environment(env)
    _check_same_script()
    sizes = QUICK_SIZES if args.quick else SIZES
    announce(sizes, "; afp vs LangGraph SqliteSaver (DeltaChannel, add_messages)")
    results = []
    with tempfile.TemporaryDirectory(prefix="afp-delta-") as tmp:
        workdir = Path(tmp)
        run_afp(8, workdir / "warm-up.sqlite")  # imports and first calls out of the figures
        run_peer(8, workdir / "warm-up-lg.sqlite", "delta", keep_messages=False)
        for n in sizes:
            repeat = max(1, args.repeat)
            print(f"... N={n} ({repeat} repetition{'s' if repeat > 1 else ''})", flush=True)
            results.append(measure_n(n, repeat, workdir, keep=n == sizes[-1]))
        print_tables(results)
        big = results[-1]
        n, b = big["n"], big["db_bytes"]
        print(f"\nWhere agentfootprint's bytes go at N={n} ({b['afp'] / n:,.0f} B/it)")
        print("\n".join(afp_lines(big["paths"]["afp"], n)))
        print(f"\nWhere DeltaChannel's bytes go at N={n} ({b['delta'] / n:,.0f} B/it)")
        print("\n".join(delta_pages(big["paths"]["delta"], n)))
        by_frequency = (
            sensitivity(results, args.snapshot_frequency, workdir)
            if args.snapshot_frequency
            else {}
        )
    t = targets(results)
    print_targets(t)
    for r in results:
        r.pop("paths")
    figures = {"environment": env, "results": results, "targets": t}
    write_figures(args.json, {**figures, "delta_by_snapshot_frequency": by_frequency})
    return 0


if __name__ == "__main__":
    sys.exit(main())
