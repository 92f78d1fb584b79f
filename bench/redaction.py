"""What redaction costs: recording, database size, verification, export and bundle verification.

The conversation is the one of ``overhead.py`` (N tool-call iterations, 4 per turn,
every turn ``run_sync(msg, continue_from=prev)``), except that personal data travels
in it: each ``search_docs`` call carries ``ssn``, ``email`` and ``account_number``
arguments, and each tool result is a JSON object string holding the same three keys
plus a 500-character ``text`` (the tool result of ``overhead.py``). Three agents record
it to a fresh SQLite file each, interleaved within every repetition:

* ``none``: no redaction policy (everything recorded in clear);
* ``keys3``: ``RedactionPolicy(keys=["ssn", "email", "account_number"])``: the three
  values are committed wherever they appear (arguments, tool results, events);
* ``conversation``: ``conversation_redaction()``: all of the conversation's text
  (user message, arguments, results, model text, final answer) is committed.

No disclosure vault: salts are dropped at the boundary (the agent's default).

Printed per N: recording time per iteration and its ratio to ``none``; database bytes
per iteration (and commitments per iteration, as a check that the policy commits);
verification time of the whole conversation (one ``af.Verifier``, runs in order). At
the largest N (800 by default): ``export_runs`` of the last run (which verifies it, then
writes it and all its ancestors to a bundle), the bundle's size, and the time to open
the bundle (``BundleSource``) and verify every run from it, next to verifying the same
runs from the database.

Usage::

    python bench/redaction.py                  # N = 50, 200, 800 (about 1 minute on 2 vCPU)
    python bench/redaction.py --quick          # N = 50, 200 (export measured at N=200)
    python bench/redaction.py --repeat 5 --json redaction.json
    python bench/redaction.py --profile 800 --variant keys3   # cProfile of one variant
"""

from __future__ import annotations

import gc
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    ITERATIONS_PER_TURN,
    QUICK_SIZES,
    RESULT_CHARS,
    SIZES,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    Conversation,
    bench_arguments,
    call_id,
    checkpoint_and_measure,
    conversation_order,
    environment,
    final_text,
    median,
    print_environment,
    profile_report,
    profiled,
    remove_db,
    run_agent_conversation,
    tool_result,
    write_figures,
)

import agentfootprint as af
from agentfootprint.exchange.transfer import export_runs
from agentfootprint.store.redaction import RedactionPolicy, conversation_redaction
from agentfootprint.verify.bundle import BundleSource

PII_KEYS = ("ssn", "email", "account_number")
VARIANTS = ("none", "keys3", "conversation")
POLICIES: dict[str, Callable[[], RedactionPolicy | None]] = {
    "none": lambda: None,
    "keys3": lambda: RedactionPolicy(keys=list(PII_KEYS)),
    "conversation": conversation_redaction,
}
DEFAULT_REPEAT = 5

PII_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "top_k": {"type": "integer", "minimum": 1},
        "ssn": {"type": "string"},
        "email": {"type": "string"},
        "account_number": {"type": "string"},
    },
    "required": ["query"],
    "additionalProperties": False,
}


# -- the conversation with personal data in it -------------------------------------------
def pii(iteration: int) -> dict[str, str]:
    """The three personal values of one iteration (deterministic, distinct per iteration)."""
    return {
        "ssn": f"{100 + iteration % 800:03d}-{10 + iteration % 89:02d}-{iteration % 10000:04d}",
        "email": f"customer{iteration:05d}@example.com",
        "account_number": f"GB29NWBK6016{iteration:010d}",
    }


def pii_tool_args(iteration: int) -> dict[str, Any]:
    return {"query": f"query {iteration}", "top_k": 5, **pii(iteration)}


def pii_tool_result(iteration: int, result_chars: int = RESULT_CHARS) -> str:
    """A JSON object string: the three personal values plus the 500-char result as ``text``."""
    value = {**pii(iteration), "text": tool_result(iteration, result_chars)}
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class PiiConversation(Conversation):
    """``Conversation`` whose tool arguments and results carry ``PII_KEYS``."""

    def __post_init__(self) -> None:
        if not self.results:
            self.results.update({i: pii_tool_result(i, self.result_chars) for i in range(self.n)})

    def replies(self) -> list[af.LLMResponse | str]:
        out: list[af.LLMResponse | str] = []
        for turn, iterations in enumerate(self.turns):
            for i in iterations:
                call = af.tool_call(TOOL_NAME, pii_tool_args(i), id=call_id(i))
                out.append(af.reply("", tool_calls=[call]))
            out.append(final_text(turn))
        return out

    def tool(self) -> af.Tool:
        return af.define_tool(
            name=TOOL_NAME,
            description=TOOL_DESCRIPTION,
            input_schema=PII_TOOL_SCHEMA,
            execute=self.tool_fn(),
        )


@dataclass
class Recording:
    seconds: float  # summed wall time of the run_sync calls
    run_ids: list[str]
    db_bytes: int


def record(conv: PiiConversation, path: Path, variant: str) -> Recording:
    """Record the conversation to a fresh SQLite file under ``variant``'s policy.

    ``common.run_agent_conversation`` (only ``run_sync`` is timed) with ``redact=``.
    """
    remove_db(path)
    store = af.SqliteStore(path)
    try:
        run = run_agent_conversation(conv, store, redact=POLICIES[variant]())
    finally:
        store.close()
    return Recording(
        seconds=run.seconds, run_ids=run.run_ids, db_bytes=checkpoint_and_measure(path)
    )


def verify_all(source: Any, order: list[str]) -> af.RunVerification:
    """Verify every run with one Verifier, in order; every run must be VALID_UNSIGNED."""
    verifier = af.Verifier(source)
    last = None
    for run_id in order:
        last = verifier.verify(run_id)
        if last.outcome is not af.Outcome.VALID_UNSIGNED:
            raise RuntimeError(f"run {run_id}: {last.outcome}")
    assert last is not None
    return last


def content_stats(store: af.SqliteStore, order: list[str], samples: list[str]) -> dict[str, int]:
    """Events, body bytes, commitments, and personal values left in clear (must be 0
    under a policy that covers them)."""
    events = body = commits = clear = 0
    for run_id in order:
        for event in store.read(run_id):
            data = bytes(event.body)
            events += 1
            body += len(data)
            commits += data.count(b"$commit")
            clear += sum(data.count(s.encode()) for s in samples)
    return {"events": events, "body_bytes": body, "commitments": commits, "clear_values": clear}


# -- one N ---------------------------------------------------------------------------------
def measure_n(n: int, repeat: int, workdir: Path, with_export: bool) -> dict[str, Any]:
    conv = PiiConversation(n)
    # a sample of personal values to look for in clear (the first and last iterations)
    samples = [v for i in {0, n // 2, n - 1} for v in pii(i).values()]
    rec: dict[str, list[float]] = {v: [] for v in VARIANTS}
    ver: dict[str, list[float]] = {v: [] for v in VARIANTS}
    exp: dict[str, dict[str, list[float]]] = {
        v: {"export": [], "open": [], "bundle_verify": [], "db_verify": []} for v in VARIANTS
    }
    sizes: dict[str, dict[str, Any]] = {}
    for rep in range(repeat):
        # interleaved, and the starting variant rotates, so drift and order hit all alike
        order_of_variants = VARIANTS[rep % 3 :] + VARIANTS[: rep % 3]
        for variant in order_of_variants:
            path = workdir / f"redaction-{variant}-{n}.sqlite"
            gc.collect()
            recording = record(conv, path, variant)
            rec[variant].append(recording.seconds)
            store = af.SqliteStore(path)
            try:
                order = conversation_order(store)
                if order != recording.run_ids:
                    raise RuntimeError(f"{variant}: store order differs from the turn order")
                gc.collect()
                t0 = time.perf_counter()
                verify_all(store, order)
                ver[variant].append(time.perf_counter() - t0)
                if variant not in sizes:
                    sizes[variant] = {
                        "db_bytes": recording.db_bytes,
                        **content_stats(store, order, samples),
                    }
                if with_export:
                    _measure_export(store, order, workdir / f"{variant}-{n}.bundle", exp[variant])
                    sizes[variant]["bundle_bytes"] = os.path.getsize(
                        workdir / f"{variant}-{n}.bundle"
                    )
            finally:
                store.close()
            remove_db(path)
            (workdir / f"{variant}-{n}.bundle").unlink(missing_ok=True)
    result: dict[str, Any] = {
        "n": n,
        "turns": len(conv.turns),
        "repeat": repeat,
        "record_seconds": {v: median(ts) for v, ts in rec.items()},
        "record_seconds_all": rec,
        "verify_seconds": {v: median(ts) for v, ts in ver.items()},
        "verify_seconds_all": ver,
        "sizes": sizes,
    }
    if with_export:
        result["export"] = {
            v: {
                **{f"{k}_seconds": median(ts) for k, ts in parts.items()},
                "all": parts,
                "bundle_bytes": sizes[v]["bundle_bytes"],
            }
            for v, parts in exp.items()
        }
    return result


def _measure_export(
    store: af.SqliteStore, order: list[str], bundle: Path, times: dict[str, list[float]]
) -> None:
    """Export the last run (ancestors pulled in), open and verify the bundle, and verify
    the same runs from the database; appends one timing of each to ``times``."""
    bundle.unlink(missing_ok=True)
    gc.collect()
    t0 = time.perf_counter()
    manifest = export_runs(store, [order[-1]], bundle)
    times["export"].append(time.perf_counter() - t0)
    if [r["run_id"] for r in manifest["runs"]] != order:
        raise RuntimeError("the bundle does not hold the conversation's runs in order")
    gc.collect()
    t0 = time.perf_counter()
    source = BundleSource(bundle)
    t1 = time.perf_counter()
    verify_all(source, order)
    t2 = time.perf_counter()
    times["open"].append(t1 - t0)
    times["bundle_verify"].append(t2 - t0)  # open + verify
    gc.collect()
    t0 = time.perf_counter()
    verify_all(store, order)
    times["db_verify"].append(time.perf_counter() - t0)


# -- reporting ------------------------------------------------------------------------------
def _ms(seconds: float, n: int) -> str:
    return f"{1000 * seconds / n:.3f}"


def print_tables(results: list[dict[str, Any]]) -> None:
    print()
    print("Recording to SQLite, ms per tool-call iteration (median; only run_sync timed)")
    header = (
        f"{'N':>5} {'rep':>3} {'none':>8} {'keys3':>8} {'conversation':>13} "
        f"{'keys3/none':>11} {'conv/none':>10}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        n, s = r["n"], r["record_seconds"]
        print(
            f"{n:>5} {r['repeat']:>3} {_ms(s['none'], n):>8} {_ms(s['keys3'], n):>8} "
            f"{_ms(s['conversation'], n):>13} {s['keys3'] / s['none']:>10.2f}x "
            f"{s['conversation'] / s['none']:>9.2f}x"
        )

    print()
    print(
        "Database bytes per iteration (file + -wal + -shm after wal_checkpoint(TRUNCATE)); "
        "commitments per iteration; personal values found in clear (sample of 9)"
    )
    header = (
        f"{'N':>5} {'none B/it':>10} {'keys3 B/it':>11} {'conv B/it':>10} {'keys3/none':>11} "
        f"{'conv/none':>10} {'commit/it k3':>13} {'commit/it conv':>15} {'clear n/k3/conv':>16}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        n, z = r["n"], r["sizes"]
        b = {v: z[v]["db_bytes"] for v in VARIANTS}
        clear = "/".join(str(z[v]["clear_values"]) for v in VARIANTS)
        print(
            f"{n:>5} {b['none'] / n:>10,.0f} {b['keys3'] / n:>11,.0f} "
            f"{b['conversation'] / n:>10,.0f} {b['keys3'] / b['none']:>10.2f}x "
            f"{b['conversation'] / b['none']:>9.2f}x "
            f"{z['keys3']['commitments'] / n:>13.1f} {z['conversation']['commitments'] / n:>15.1f} "
            f"{clear:>16}"
        )

    print()
    print("Verification of the whole conversation (one Verifier, runs in order), seconds")
    header = (
        f"{'N':>5} {'runs':>5} {'none':>8} {'keys3':>8} {'conversation':>13} "
        f"{'keys3/none':>11} {'conv/none':>10} {'ms/it none':>11} {'ms/it k3':>9} "
        f"{'ms/it conv':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        n, s = r["n"], r["verify_seconds"]
        print(
            f"{n:>5} {r['turns']:>5} {s['none']:>8.3f} {s['keys3']:>8.3f} "
            f"{s['conversation']:>13.3f} {s['keys3'] / s['none']:>10.2f}x "
            f"{s['conversation'] / s['none']:>9.2f}x {_ms(s['none'], n):>11} "
            f"{_ms(s['keys3'], n):>9} {_ms(s['conversation'], n):>11}"
        )

    exported = [r for r in results if "export" in r]
    for r in exported:
        n = r["n"]
        print()
        print(
            f"Export and bundle verification at N={n} ({r['turns']} runs; export_runs of the "
            "last run, ancestors pulled in), seconds"
        )
        header = (
            f"{'variant':<13} {'export':>7} {'bundle bytes':>13} {'bundle/db':>10} "
            f"{'open':>7} {'open+verify':>12} {'db verify':>10} {'bundle/db':>10}"
        )
        print(header)
        print("-" * len(header))
        for v in VARIANTS:
            e = r["export"][v]
            print(
                f"{v:<13} {e['export_seconds']:>7.3f} {e['bundle_bytes']:>13,} "
                f"{e['bundle_bytes'] / r['sizes'][v]['db_bytes']:>9.2f}x "
                f"{e['open_seconds']:>7.3f} {e['bundle_verify_seconds']:>12.3f} "
                f"{e['db_verify_seconds']:>10.3f} "
                f"{e['bundle_verify_seconds'] / e['db_verify_seconds']:>9.2f}x"
            )


def growth(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-iteration growth from the smallest to the largest N (1.0 is linear)."""
    by_n = {r["n"]: r for r in results}
    small, large = min(by_n), max(by_n)
    out: dict[str, Any] = {"from": small, "to": large}
    for what in ("record_seconds", "verify_seconds"):
        out[what] = {
            v: (by_n[large][what][v] / large) / (by_n[small][what][v] / small) for v in VARIANTS
        }
    out["db_bytes"] = {
        v: (by_n[large]["sizes"][v]["db_bytes"] / large)
        / (by_n[small]["sizes"][v]["db_bytes"] / small)
        for v in VARIANTS
    }
    return out


def print_growth(g: dict[str, Any]) -> None:
    print()
    print(f"Per-iteration growth N={g['to']} over N={g['from']} (1.00x is linear)")
    for what, label in (
        ("record_seconds", "recording time"),
        ("db_bytes", "database bytes"),
        ("verify_seconds", "verification time"),
    ):
        print(f"  {label:<18} " + ", ".join(f"{v} {g[what][v]:.2f}x" for v in VARIANTS))


# -- profile --------------------------------------------------------------------------------
def profile(n: int, variant: str, top: int, workdir: Path) -> str:
    """cProfile of recording, verifying and exporting one conversation under ``variant``."""
    record(PiiConversation(8), workdir / "warm-up.sqlite", variant)  # imports, first calls
    remove_db(workdir / "warm-up.sqlite")
    conv = PiiConversation(n)
    path = workdir / f"profile-{variant}-{n}.sqlite"
    profiler, recording, _ = profiled(lambda: record(conv, path, variant))
    out = io.StringIO()
    out.write(
        profile_report(
            profiler,
            f"cProfile of recording the N={n} conversation, variant {variant} "
            f"({recording.seconds:.2f} s in run_sync under the profiler)",
            top,
        )
    )
    store = af.SqliteStore(path)
    try:
        order = conversation_order(store)
        bundle = workdir / "profile.bundle"
        for label, fn in (
            ("verifying from the database", lambda: verify_all(store, order)),
            ("export_runs of the last run", lambda: export_runs(store, [order[-1]], bundle)),
            ("opening and verifying the bundle", lambda: verify_all(BundleSource(bundle), order)),
        ):
            profiler, _, _ = profiled(fn)
            out.write(
                profile_report(
                    profiler, f"\ncProfile of {label} (N={n}, {variant})", top, cumulative=False
                )
            )
    finally:
        store.close()
        remove_db(path)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = bench_arguments(
        __doc__,
        repeat_default=DEFAULT_REPEAT,
        repeat_help="repetitions for every N (median kept)",
        profile_help="only cProfile one conversation of N",
    )
    parser.add_argument("--variant", choices=VARIANTS, default="keys3", help="for --profile")
    args = parser.parse_args(argv)

    env = environment()
    print_environment(env)
    with tempfile.TemporaryDirectory(prefix="afp-redaction-") as tmp:
        workdir = Path(tmp)
        if args.profile:
            print(profile(args.profile, args.variant, args.top, workdir))
            return 0
        sizes = QUICK_SIZES if args.quick else SIZES
        repeat = max(1, args.repeat)
        print(
            f"# {ITERATIONS_PER_TURN} tool-call iterations per turn, tool results of "
            f"{len(pii_tool_result(0))} chars (3 personal values + {RESULT_CHARS}-char text), "
            f"N = {', '.join(map(str, sizes))}, {repeat} repetitions, variants interleaved"
        )
        results = []
        for n in sizes:
            with_export = n == max(sizes)
            print(f"... N={n}{' (with export)' if with_export else ''}", flush=True)
            results.append(measure_n(n, repeat, workdir, with_export))
    print_tables(results)
    g = growth(results)
    print_growth(g)
    write_figures(args.json, {"environment": env, "results": results, "growth": g})
    return 0


if __name__ == "__main__":
    sys.exit(main())
