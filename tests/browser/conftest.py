"""Headless Chromium for the report's tests: Debian's ``chromium`` driven by Playwright.

A machine without Chromium skips these tests, unless AGENTFOOTPRINT_REQUIRE_CHROMIUM is set
(``.ci/run`` sets it, after installing the package): then they fail, so CI cannot pass
without the browser. Chromium is started with its background services off: on a closed
network their connections are refused, and a report must make none of its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from browser_support import BrowserThread


def _chromium() -> str | None:
    for name in (os.environ.get("AGENTFOOTPRINT_CHROMIUM"), "chromium", "chromium-browser"):
        if name and (found := shutil.which(name)):
            return found
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[BrowserThread]:
    """One Chromium per test worker, driven from a thread of its own (see BrowserThread)."""
    executable = _chromium()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:  # pragma: no cover - a dev extra
        executable = None
    if executable is None:
        if os.environ.get("AGENTFOOTPRINT_REQUIRE_CHROMIUM"):
            pytest.fail("Chromium and Playwright are required (AGENTFOOTPRINT_REQUIRE_CHROMIUM)")
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")
    driver = BrowserThread(executable)
    try:
        yield driver
    finally:
        driver.close()
