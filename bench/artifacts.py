"""A large tool result recorded inline against placed in an artifact store (``artifacts``).

Each case runs in a fresh subprocess (so one case's garbage never counts for another): an
agent makes one tool call whose result is N MB of text (made before measuring starts), then
answers, into a fresh SQLite log. Measured side by side:

* ``inline``: today's path, no artifact store: the result is in the history, the log, the
  receipt of the next call;
* ``placed``: ``artifacts={"store": af.FileArtifacts(dir), "max_inline_chars": 20_000}``:
  the result goes to the store, the model and the log get its ticket.

Figures: the log file's size and the bytes of the run's row bodies, the store's bytes, wall
time, and the peak resident set during the run over what the process held before it, as a
multiple of the result (inline, 50 MB measured 4.01x when ``bench/memory.py`` first ran).
Then ``verify --artifacts``' own work: re-hashing the stored bytes against the minted digest
(``check_artifacts``), in MB/s beside a bare ``hashlib.sha256`` of the same bytes.

Usage::

    python bench/artifacts.py            # 1 MB and 50 MB
    python bench/artifacts.py --quick    # 1 MB and 10 MB
    python bench/artifacts.py --json artifacts.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, print_environment, write_figures

import agentfootprint as af

MiB = 1024 * 1024
SIZES_MB = (1, 50)
QUICK_SIZES_MB = (1, 10)
THRESHOLD = 20_000


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _case(case: str, size: int, folder: Path) -> dict[str, Any]:
    """One recorded run (in this child process): its figures."""
    result = "r" * size
    tool = af.define_tool(name="dump", description="d", execute=lambda args: result)
    provider = af.MockProvider(
        [af.reply(tool_calls=[af.tool_call("dump", {})]), "done"], record=False
    )
    db = folder / f"{case}.db"
    options: dict[str, Any] = {}
    if case == "placed":
        options["artifacts"] = {
            "store": af.FileArtifacts(folder / "artifacts"),
            "max_inline_chars": THRESHOLD,
        }
    agent = af.Agent(provider=provider, model="m", tools=[tool], store=str(db), **options)
    before = _status("VmRSS")
    started = time.perf_counter()
    outcome = agent.run_sync("dump it")
    seconds = time.perf_counter() - started
    peak = _status("VmHWM")
    assert outcome.outcome == "answered", outcome.outcome
    message = outcome.state["history"][2]
    assert not message.get("is_error"), str(message["content"])[:200]
    agent.close()
    with af.SqliteStore(db, readonly=True) as log:
        verdicts = [v for _, v in af.Verifier(log).verify_all()]
        body_bytes = sum(len(e.body) for e in log.read(outcome.run_id))
    assert all(v.outcome is af.Outcome.VALID_UNSIGNED for v in verdicts), verdicts
    stored = sum(p.stat().st_size for p in (folder / "artifacts").rglob("*") if p.is_file())
    figures = {
        "seconds": seconds,
        "peak_over_result": (peak - before) / size,
        "log_bytes": db.stat().st_size,
        "body_bytes": body_bytes,
        "store_bytes": stored if case == "placed" else 0,
        "ticket_chars": len(message["content"]) if case == "placed" else None,
    }
    if case == "placed":
        figures.update(_check(db, folder / "artifacts", size))
    return figures


def _check(db: Path, store: Path, size: int) -> dict[str, Any]:
    """``check_artifacts`` over the run (the log verified, then the bytes re-hashed), and a
    bare SHA-256 of the same bytes, in MB/s."""
    from agentfootprint.audit.artifacts import check_artifacts

    with af.SqliteStore(db, readonly=True) as log, af.FileArtifacts(store, readonly=True) as kept:
        started = time.perf_counter()
        verdicts = list(check_artifacts(log, kept))
        checked = time.perf_counter() - started
        (verdict,) = verdicts
        assert verdict.status == "ok", verdict
        data = kept.read(verdict.scope, verdict.ref)
    assert data is not None
    started = time.perf_counter()
    hashlib.sha256(data).digest()
    bare = time.perf_counter() - started
    return {"check_mb_s": size / checked / 1e6, "sha256_mb_s": size / bare / 1e6}


def measure(case: str, size: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="afp-artifacts-") as tmp:
        done = subprocess.run(
            [sys.executable, __file__, "--case", case, str(size), tmp],
            capture_output=True,
            text=True,
            check=False,
            env=os.environ.copy(),
        )
    if done.returncode != 0:
        raise RuntimeError(f"case {case} failed:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 MB and 10 MB")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument("--case", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        case, size, folder = args.case
        print(json.dumps(_case(case, int(size), Path(folder))))
        return 0
    env = environment()
    print_environment(env)
    results: dict[str, Any] = {"environment": env, "sizes": {}}
    for mb in QUICK_SIZES_MB if args.quick else SIZES_MB:
        size = mb * 1000 * 1000
        inline, placed = measure("inline", size), measure("placed", size)
        results["sizes"][mb] = {"inline": inline, "placed": placed}
        print(f"\nA {mb} MB tool result")
        print(
            f"  {'':8} {'log file':>12} {'row bodies':>12} {'store bytes':>12} {'seconds':>8} "
            f"{'peak RSS':>9}"
        )
        for name, f in (("inline", inline), ("placed", placed)):
            print(
                f"  {name:8} {f['log_bytes']:>12,} {f['body_bytes']:>12,} {f['store_bytes']:>12,} "
                f"{f['seconds']:>8.3f} {f['peak_over_result']:>8.2f}x"
            )
        print(
            f"  placed/inline: log {placed['log_bytes'] / inline['log_bytes']:.4f}x, time "
            f"{placed['seconds'] / inline['seconds']:.2f}x, peak "
            f"{placed['peak_over_result'] / max(inline['peak_over_result'], 1e-9):.2f}x; the "
            f"ticket: {placed['ticket_chars']} chars"
        )
        print(
            f"  verify --artifacts: {placed['check_mb_s']:.0f} MB/s (the log verified, the "
            f"bytes re-hashed); bare SHA-256 of the same bytes: {placed['sha256_mb_s']:.0f} MB/s"
        )
    write_figures(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
