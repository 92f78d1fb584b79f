"""A conversation deeper than Python's recursion limit verifies, exports and continues."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import agentfootprint as af


@pytest.mark.slow
def test_hundreds_of_continued_turns(tmp_path: Path) -> None:
    turns = 320
    assert turns > sys.getrecursionlimit() // 4  # deeper than a recursive walk would survive
    db = tmp_path / "deep.db"
    agent = af.Agent(provider=af.MockProvider(respond=lambda r: "ok"), model="m", store=db)
    result = agent.run_sync("turn 0")
    for turn in range(1, turns):
        result = agent.run_sync(f"turn {turn}", continue_from=result)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # a recursive ancestry walk would fail long before the root
    try:
        verified = af.Verifier(af.SqliteStore(db)).verify(result.run_id)
        assert len(verified.ancestors) == turns - 1
        bundle = tmp_path / "deep.afp"
        af.export_runs(af.SqliteStore(db), [result.run_id], bundle)
        source = af.BundleSource(bundle)
        assert af.Verifier(source).verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED
        fresh = af.Agent(provider=af.MockProvider(["last"]), model="m", store=db)
        final = fresh.run_sync("one more", continue_from=result.run_id)
    finally:
        sys.setrecursionlimit(old_limit)
    assert len(final.state["history"]) == 2 * (turns + 1)
