"""The self-verifying HTML report against the bundle it embeds, and its page's verification
in headless Chromium against ``agentfootprint verify`` on the same bundle.

For each N (the conversation of ``overhead.py``: 4 tool-call iterations per turn, each turn
continuing the previous one) the conversation is recorded into SQLite, the last run is
exported (its ancestors come along: the whole conversation), and a report is made of that
bundle. Printed, side by side in one run:

* the bundle's size and the report's, and their ratio (target: report <= 1.5x bundle);
* the page's verification time in headless Chromium (from the moment it starts verifying
  to its verdict, measured by the page: ``AFReport.verify_ms``; median of the repeats), the
  reference verifier on the same bundle in this process (``Verifier.verify_all`` over a
  ``BundleSource``: the work ``agentfootprint verify BUNDLE`` does, without the
  interpreter's start), and the command itself in a subprocess (start included); the
  ratios page / reference and page / command (target: <= 3x).

Needs Chromium (Debian's ``chromium``) and Playwright (the dev extra).

Usage::

    python bench/report.py              # N = 200, 800
    python bench/report.py --quick      # N = 50, 200
    python bench/report.py --json report.json
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "browser"))

from common import (
    Conversation,
    bench_arguments,
    environment,
    median,
    print_environment,
    run_agent_conversation,
    write_figures,
)

import agentfootprint as af
from agentfootprint.report import report_html
from agentfootprint.verify.bundle import BundleSource

SIZES = (200, 800)
QUICK = (50, 200)


def reference_seconds(bundle: Path) -> float:
    t0 = time.perf_counter()
    with BundleSource(bundle) as source:
        verdicts = list(af.Verifier(source).verify_all())
    seconds = time.perf_counter() - t0
    assert all(not isinstance(r, Exception) for _, r in verdicts), verdicts
    return seconds


def command_seconds(bundle: Path) -> float:
    exe = shutil.which("agentfootprint") or str(Path(sys.executable).parent / "agentfootprint")
    t0 = time.perf_counter()
    subprocess.run([exe, "verify", str(bundle)], check=True, capture_output=True)
    return time.perf_counter() - t0


def page_seconds(browser: Any, html: Path) -> float:
    from browser_support import VERIFY_TIMEOUT_MS

    page = browser.new_page()
    try:
        page.goto(html.resolve().as_uri())
        page.wait_for_function("window.AFReport && window.AFReport.done", timeout=VERIFY_TIMEOUT_MS)
        state, ms = page.evaluate("[window.AFReport.state, window.AFReport.verify_ms]")
    finally:
        page.close()
    assert state == "valid", state
    return float(ms) / 1000


def prepare(n: int, folder: Path) -> dict[str, Any]:
    """Record the conversation, export it, make its report (before the browser starts:
    Playwright's sync API runs an event loop, inside which ``run_sync`` refuses to run)."""
    db = folder / f"conv-{n}.db"
    run = run_agent_conversation(Conversation(n), str(db))
    bundle = folder / f"conv-{n}.afp"
    with af.SqliteStore(db, readonly=True) as store:
        af.export_runs(store, [run.run_ids[-1]], bundle)
    made = report_html(bundle, library="bench")
    html = folder / f"conv-{n}.html"
    html.write_bytes(made.html)
    return {"n": n, "runs": run.turns, "bundle": bundle, "html": html}


def measure(prepared: dict[str, Any], repeats: int, browser: Any) -> dict[str, Any]:
    bundle, html = prepared["bundle"], prepared["html"]
    page = [page_seconds(browser, html) for _ in range(repeats)]
    reference = [reference_seconds(bundle) for _ in range(repeats)]
    command = [command_seconds(bundle) for _ in range(repeats)]
    figures = {
        "n": prepared["n"],
        "runs": prepared["runs"],
        "bundle_bytes": bundle.stat().st_size,
        "report_bytes": html.stat().st_size,
        "page_s": median(page),
        "reference_s": median(reference),
        "command_s": median(command),
    }
    figures["size_ratio"] = figures["report_bytes"] / figures["bundle_bytes"]
    figures["page_vs_reference"] = figures["page_s"] / figures["reference_s"]
    figures["page_vs_command"] = figures["page_s"] / figures["command_s"]
    return figures


def main() -> None:
    args = bench_arguments(
        __doc__, repeat_default=3, repeat_help="repeats of each timing", profile_help="unused"
    ).parse_args()
    sizes = QUICK if args.quick else SIZES
    from browser_support import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    env = environment()
    print_environment(env)
    with tempfile.TemporaryDirectory(prefix="afp-report-bench-") as tmp:
        prepared = [prepare(n, Path(tmp)) for n in sizes]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=shutil.which("chromium") or "chromium", args=CHROMIUM_ARGS
            )
            try:
                rows = [measure(one, args.repeat, browser) for one in prepared]
            finally:
                browser.close()
    print(
        f"\n{'N':>5} {'runs':>5} {'bundle MB':>10} {'report MB':>10} {'size x':>7} "
        f"{'page s':>8} {'ref s':>7} {'cmd s':>7} {'page/ref':>9} {'page/cmd':>9}"
    )
    for r in rows:
        print(
            f"{r['n']:>5} {r['runs']:>5} {r['bundle_bytes'] / 1e6:>10.2f} "
            f"{r['report_bytes'] / 1e6:>10.2f} {r['size_ratio']:>7.2f} {r['page_s']:>8.2f} "
            f"{r['reference_s']:>7.2f} {r['command_s']:>7.2f} {r['page_vs_reference']:>9.2f} "
            f"{r['page_vs_command']:>9.2f}"
        )
    last = rows[-1]
    print(
        f"\nN={last['n']}: report {last['size_ratio']:.2f}x the bundle (target <= 1.5x); "
        f"page {last['page_vs_command']:.2f}x the command (target <= 3x)"
    )
    write_figures(args.json, {"environment": env, "rows": rows})


if __name__ == "__main__":
    main()
