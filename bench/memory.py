"""Peak memory of bundle export and bundle verification, and of recording a large tool result.

Two measurements, each case in its own fresh subprocess (so one case's garbage or caches
never count for another), run twice: once plain (wall time and ``ru_maxrss``, the
process's peak resident set), once under ``tracemalloc`` (peak of the Python heap during
the operation alone, imports and setup excluded):

1. **Bundles, 1k vs 10k runs.** A log of N closed runs, each a copy of one real two-call
   run (a tool call, then an answer, from ``af.MockProvider``) under a new run id, hashed
   by ``RunWriter`` and stored in SQLite: every copy verifies. Cases: ``export`` (what
   ``agentfootprint export`` does: ``af.export_runs``, which verifies each run, then writes
   the bundle), ``write`` (``write_bundle`` alone), ``verify`` (open the bundle with
   ``BundleSource`` and ``Verifier.verify_all`` every run, as ``agentfootprint verify``)
   and ``verify-db`` (``Verifier.verify_all`` over the database itself, for comparison).
   The figure to read is how the peak grows with N against how the bundle grows: what
   grows is each run's place in the file (a few hundred bytes per run: the reader reads the
   manifest's run list one entry at a time, when it opens the bundle and again for the index
   check), not its rows. Target (issue 26): bundle verify's max RSS at the larger N within
   1.25x of the smaller.
2. **A 50 MB tool result** recorded by an agent into a fresh SQLite log (``run_sync``:
   the tool call, the result appended to the history, the receipt of the next call, the
   SQLite write). Target: peak at most 5x the result's size. The tool result itself is
   made before measuring starts, so the figure is what recording it costs on top.

Usage::

    python bench/memory.py                  # N = 1000, 10000; 50 MB
    python bench/memory.py --quick          # N = 200, 2000; 10 MB
    python bench/memory.py --json mem.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, print_environment, verdict, write_figures

import agentfootprint as af
from agentfootprint.store.base import StoredEvent
from agentfootprint.store.writer import RunWriter

SIZES = (1000, 10000)
QUICK_SIZES = (200, 2000)
RESULT_MB = 50
QUICK_RESULT_MB = 10
RECORD_LIMIT = 5.0  # peak / tool result size, at most
FLAT_LIMIT = 1.25  # bundle verify's max RSS at the larger N over the smaller, at most
CHUNK = 500  # runs per atomic append while building the log
#: the bundle cases, and the database's own verify of the same runs to compare them with
CASES = ("export", "write", "verify", "verify-db")
MiB = 1024 * 1024


# -- building the log (not measured) ----------------------------------------------------------
def _template(folder: Path) -> list[list[tuple[str, Any]]]:
    """One real two-call run, as the (type, body) batches its writer appended."""
    tool = af.define_tool(
        name="lookup",
        description="Look a customer up.",
        input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
        execute=lambda args: {"id": args["id"], "name": "Ann", "notes": "x" * 400},
    )
    provider = af.MockProvider(
        [af.reply(tool_calls=[af.tool_call("lookup", {"id": "7"})]), "Ann it is."], record=False
    )
    with af.SqliteStore(folder / "template.db") as store:
        agent = af.Agent(provider=provider, model="m", tools=[tool], store=store)
        run_id = agent.run_sync("Who is customer 7?").run_id
        rows = list(store.read(run_id))
    batches: list[list[tuple[str, Any]]] = []
    current: list[tuple[str, Any]] = []
    for row in rows:
        current.append((row.type, row.decoded()))
        if row.type in ("run.open", "commit", "run.close"):
            batches.append(current)
            current = []
    assert not current, "the run does not end with a marker"
    opened = batches[0][0][1]
    assert opened["run_id"] == opened["conversation_id"] == run_id
    return batches


def build_log(path: Path, runs: int, template: list[list[tuple[str, Any]]]) -> list[str]:
    """``runs`` copies of the template under new ids, hashed for real, stored in SQLite."""
    ids: list[str] = []
    staging = af.MemoryStore()
    store: Any
    with af.SqliteStore(path) as store:
        pending: list[list[StoredEvent]] = []
        for index in range(runs):
            run_id = f"{index:012x}{'c0ffee' * 3}{index % 97:02x}"
            writer = RunWriter(staging, run_id)
            for batch in template:
                if batch[0][0] == "run.open":
                    body = {**batch[0][1], "run_id": run_id, "conversation_id": run_id}
                    batch = [("run.open", body)]
                pending.append(writer.append(batch))
            ids.append(run_id)
            if len(pending) >= CHUNK * len(template):
                store.append_runs(pending)
                pending = []
                staging = af.MemoryStore()
        if pending:
            store.append_runs(pending)
    return ids


# -- the measured cases (each in a child process) ---------------------------------------------
def _case(case: str, args: list[str]) -> None:
    """What one child measures (setup first, then only the operation)."""
    work: Any
    if case == "baseline":

        def work() -> None:
            return None
    elif case in ("export", "write"):
        db, out = Path(args[0]), Path(args[1])
        store = af.SqliteStore(db, readonly=True)
        ids = store.run_ids()
        if case == "export":

            def work() -> None:
                af.export_runs(store, ids, out)
        else:
            from agentfootprint.exchange.bundle_write import write_bundle

            def work() -> None:
                write_bundle(store, ids, out, library="bench")
    elif case == "verify-db":
        db = Path(args[0])

        def work() -> None:
            with af.SqliteStore(db, readonly=True) as store:
                bad = [r for _, r in af.Verifier(store).verify_all() if not _valid(r)]
            assert not bad, bad[:3]
    elif case == "verify":
        path = Path(args[0])

        def work() -> None:
            with af.BundleSource(path) as source:
                bad = [r for _, r in af.Verifier(source).verify_all() if not _valid(r)]
            assert not bad, bad[:3]
    elif case == "record":
        size, db = int(args[0]), Path(args[1])
        result = "r" * size
        tool = af.define_tool(name="dump", description="d", execute=lambda args: result)
        provider = af.MockProvider(
            [af.reply(tool_calls=[af.tool_call("dump", {})]), "done"], record=False
        )
        agent = af.Agent(provider=provider, model="m", tools=[tool], store=db)

        def work() -> None:
            outcome = agent.run_sync("dump it")
            assert outcome.outcome == "answered", outcome.outcome
            message = outcome.state["history"][2]
            assert not message.get("is_error"), str(message["content"])[:200]
    else:
        raise SystemExit(f"unknown case {case}")
    traced = os.environ.get("AFP_BENCH_TRACED") == "1"
    before = _status("VmRSS")
    if traced:
        tracemalloc.start()
    t0 = time.perf_counter()
    work()
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] if traced else None
    figures = {"seconds": seconds, "traced_peak": peak, "rss_before": before}
    print(json.dumps({**figures, "maxrss": _status("VmHWM")}))


def _status(field: str) -> int:
    """A size from /proc/self/status: ``VmHWM`` is the peak resident set (reset by exec,
    unlike ``ru_maxrss``, which a child started by fork and exec inherits from the parent
    that forked it), ``VmRSS`` the current one."""
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _valid(result: Any) -> bool:
    return isinstance(result, af.RunVerification) and result.outcome is af.Outcome.VALID_UNSIGNED


def measure(case: str, *args: str) -> dict[str, Any]:
    """The case run twice in fresh children: plain (time, max RSS), then traced."""
    figures: dict[str, Any] = {}
    for traced in (False, True):
        env = {**os.environ, "AFP_BENCH_TRACED": "1" if traced else "0"}
        done = subprocess.run(
            [sys.executable, __file__, "--case", case, *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"case {case} failed:\n{done.stderr}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if traced:
            figures["traced_peak"] = result["traced_peak"]
            figures["traced_seconds"] = result["seconds"]
        else:
            figures["seconds"] = result["seconds"]
            figures["maxrss"] = result["maxrss"]
            figures["rss_before"] = result["rss_before"]
    return figures


# -- reporting ----------------------------------------------------------------------------------
def _mb(n: float) -> str:
    return f"{n / MiB:8.1f}"


def bundles(sizes: tuple[int, ...], folder: Path, baseline: dict[str, Any]) -> dict[str, Any]:
    template = _template(folder)
    results: dict[str, Any] = {"events_per_run": sum(len(b) for b in template), "by_n": {}}
    for n in sizes:
        print(f"... {n} runs: building the log", flush=True)
        db = folder / f"runs-{n}.db"
        build_log(db, n, template)
        out = folder / f"runs-{n}.afp"
        figures: dict[str, Any] = {"runs": n, "db_bytes": db.stat().st_size}
        for case in ("export", "write"):
            print(f"... {n} runs: {case}", flush=True)
            figures[case] = measure(case, str(db), str(out))
        figures["bundle_bytes"] = out.stat().st_size
        print(f"... {n} runs: verify-db", flush=True)
        figures["verify-db"] = measure("verify-db", str(db))
        print(f"... {n} runs: verify", flush=True)
        figures["verify"] = measure("verify", str(out))
        results["by_n"][n] = figures
        db.unlink()
        out.unlink()
    base = baseline["maxrss"]
    print()
    print(
        f"Bundles: runs of {results['events_per_run']} events (one real two-call run, "
        "copied under new ids); MiB"
    )
    header = (
        f"{'runs':>6} {'bundle':>8} {'case':>7} {'seconds':>8} {'traced peak':>12} "
        f"{'max RSS':>8} {'RSS - base':>11} {'peak/bundle':>12}"
    )
    print(header)
    print("-" * len(header))
    for n, f in results["by_n"].items():
        for case in CASES:
            c = f[case]
            print(
                f"{n:>6} {_mb(f['bundle_bytes'])} {case:>7} {c['seconds']:>8.2f} "
                f"{_mb(c['traced_peak']):>12} {_mb(c['maxrss'])} {_mb(c['maxrss'] - base):>11} "
                f"{c['traced_peak'] / f['bundle_bytes']:>11.1%}"
            )
    small, big = (results["by_n"][n] for n in sizes)
    ratios: dict[str, Any] = {"bundle": big["bundle_bytes"] / small["bundle_bytes"]}
    print()
    print(f"From {sizes[0]} to {sizes[1]} runs (bundle x{ratios['bundle']:.1f}):")
    for case in CASES:
        peak = big[case]["traced_peak"] / small[case]["traced_peak"]
        rss = (big[case]["maxrss"] - base) / max(small[case]["maxrss"] - base, 1)
        grown = big[case]["traced_peak"] - small[case]["traced_peak"]
        per_run = grown / (sizes[1] - sizes[0])
        bundle_per_run = (big["bundle_bytes"] - small["bundle_bytes"]) / (sizes[1] - sizes[0])
        ratios[case] = {
            "traced_peak": peak,
            "rss_over_baseline": rss,
            "peak_bytes_per_added_run": per_run,
            "bundle_bytes_per_added_run": bundle_per_run,
        }
        print(
            f"  {case:>7}: traced peak x{peak:.2f}, RSS over baseline x{rss:.2f}; "
            f"{per_run:,.0f} bytes of peak per added run, against {bundle_per_run:,.0f} "
            "bytes of bundle"
        )
    flat = big["verify"]["maxrss"] / small["verify"]["maxrss"]
    ratios["verify_maxrss"] = flat
    print(
        f"  bundle verify max RSS x{flat:.2f} (target <= {FLAT_LIMIT}x -> "
        f"{verdict(flat <= FLAT_LIMIT)}); database verify x"
        f"{big['verify-db']['maxrss'] / small['verify-db']['maxrss']:.2f}"
    )
    results["ratios"] = ratios
    return results


def record(mb: int, folder: Path, baseline: dict[str, Any]) -> dict[str, Any]:
    size = mb * 1000 * 1000
    db = folder / "record.db"
    print(f"... a {mb} MB tool result", flush=True)
    figures = measure("record", str(size), str(db))
    cost = (figures["maxrss"] - figures["rss_before"]) / size
    total = (figures["maxrss"] - baseline["maxrss"]) / size
    traced = figures["traced_peak"] / size
    out = {
        "result_bytes": size,
        "db_bytes": db.stat().st_size,
        **figures,
        "rss_peak_over_result": cost,
        "rss_over_baseline_over_result": total,
        "traced_peak_over_result": traced,
        "limit": RECORD_LIMIT,
        "met": cost <= RECORD_LIMIT,
    }
    print()
    print(f"A {mb} MB tool result recorded into SQLite (the result itself made before measuring)")
    print(
        f"  {figures['seconds']:.2f} s; peak RSS during the run "
        f"+{(figures['maxrss'] - figures['rss_before']) / MiB:.1f} MiB = {cost:.2f}x the result "
        f"(target <= {RECORD_LIMIT}x -> {verdict(out['met'])}); over the bare interpreter, the "
        f"result's own copy and the agent included: {total:.2f}x"
    )
    print(
        f"  traced peak {figures['traced_peak'] / MiB:.1f} MiB = {traced:.2f}x: tracemalloc counts "
        "what orjson reserves to serialise a string (about 13x its length), pages that are "
        "never touched and so never resident; RSS is the figure to judge"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 200, 2000; a 10 MB result")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.case:
        _case(args.case, rest)
        return 0
    env = environment()
    print_environment(env)
    sizes = QUICK_SIZES if args.quick else SIZES
    with tempfile.TemporaryDirectory(prefix="afp-memory-") as tmp:
        folder = Path(tmp)
        baseline = measure("baseline")
        print(f"# baseline (interpreter and imports): max RSS {baseline['maxrss'] / MiB:.1f} MiB")
        results = {
            "environment": env,
            "baseline": baseline,
            "bundles": bundles(sizes, folder, baseline),
            "record": record(QUICK_RESULT_MB if args.quick else RESULT_MB, folder, baseline),
        }
    write_figures(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
