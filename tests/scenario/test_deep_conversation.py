"""A conversation deeper than Python's recursion limit verifies, exports, is read and
continues (also with its run index gone: the chain is followed through the events)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import agentfootprint as af
from agentfootprint.testing.tamper import tampering


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
        fresh.close()
        # read by path (read-only), and continued with no run index at all: every fact of
        # the chain comes from its events
        assert len(af.state_at(db, final.run_id, -1)["history"]) == 2 * turns
        assert af.served_at(db, final.run_id, 0)["messages"][-1]["content"] == "one more"
        with tampering(db) as conn:
            conn.execute("DELETE FROM runs")
        bare = af.Agent(provider=af.MockProvider(["bare"]), model="m", store=db)
        last = bare.run_sync("without an index", continue_from=final.run_id)
        bare.close()
        with af.SqliteStore(db, readonly=True) as store:
            check = af.Verifier(store).verify(last.run_id)
    finally:
        sys.setrecursionlimit(old_limit)
    assert len(final.state["history"]) == 2 * (turns + 1)
    assert last.conversation_id == final.conversation_id
    assert len(check.ancestors) == turns + 1
