"""Opening a report in the browser and reading what its page computed."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Chromium's background services off: on a closed network their connections are refused
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: how long a page may take to verify before the test fails (a hang guard, never asserted)
VERIFY_TIMEOUT_MS = 120_000


@dataclass
class Opened:
    """A report as the page saw it: its verdicts and state, and every request it made."""

    state: str
    verdicts: list[dict[str, Any]]
    report: dict[str, Any]
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  #: console errors and uncaught exceptions
    then: Any = None


def open_report(
    browser: BrowserThread,
    path: Path,
    *,
    runs: bool = False,
    then: Callable[[Any], Any] | None = None,
    before: str | None = None,
) -> Opened:
    """Open ``path`` from file:// and wait for its verdict (``runs``: also return what the
    verifier computed of each run; ``then``: called with the page before it is closed, in
    the browser's thread, its result in ``Opened.then``; ``before``: a script run in the page
    before its own)."""
    return browser.run(_open, path, runs, then, before)  # type: ignore[no-any-return]


def _open(
    browser: Any, path: Path, runs: bool, then: Callable[[Any], Any] | None, before: str | None
) -> Opened:
    page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    if before is not None:
        page.add_init_script(before)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    url = path.resolve().as_uri()
    page.goto(url)
    page.wait_for_function("window.AFReport && window.AFReport.done", timeout=VERIFY_TIMEOUT_MS)
    report = page.evaluate(
        "(() => { const r = window.AFReport; "
        "return {state: r.state, verdicts: r.verdicts, error: r.error}; })()"
    )
    if runs:
        report["runs"] = page.evaluate(_CALLS)
    opened = Opened(
        state=report["state"],
        verdicts=report["verdicts"],
        report=report,
        requests=[u for u in requests if u != url],
        errors=errors,
    )
    try:
        if then is not None:
            opened.then = then(page)
    finally:
        page.close()
    return opened


#: what the verifier computed of each model call: digests only (the values stay in the page)
_CALLS = """(() => Object.values(window.AFReport.runs).map((run) => ({
  run_id: run.run_id,
  calls: (run.calls || []).map((c) => ({
    call: c.call, seq: c.seq, ok: c.ok, request: c.request,
    pieces: Object.fromEntries(["system", "messages", "tools"].map((k) => [k,
      ((c.pieces || {})[k] || []).map((p) => ({ digest: p.digest, recorded: p.recorded }))])),
  })),
})))()"""


class BrowserThread:
    """Chromium driven from a thread of its own: Playwright's sync API runs an event loop in
    the thread that starts it, and a test worker whose main thread held one would refuse
    every later ``run_sync`` (an agent's, or the demo's) for the rest of the session.
    :meth:`run` hands a function the browser in that thread and returns what it returns
    (its exception, an assertion's included, is raised in the caller)."""

    def __init__(self, executable: str) -> None:
        self._jobs: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]] | None]
        self._jobs = queue.Queue()
        started: Future[None] = Future()
        self._thread = threading.Thread(
            target=self._serve, args=(executable, started), name="chromium", daemon=True
        )
        self._thread.start()
        started.result()

    def _serve(self, executable: str, started: Future[None]) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
                started.set_result(None)
                while (job := self._jobs.get()) is not None:
                    fn, args, done = job
                    try:
                        done.set_result(fn(browser, *args))
                    except BaseException as exc:  # handed to the caller, raised there
                        done.set_exception(exc)
                browser.close()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        done: Future[Any] = Future()
        self._jobs.put((fn, args, done))
        return done.result()

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=60)
