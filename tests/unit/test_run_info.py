"""One record of a run for every source: a store's ``runs()`` and a bundle's are the same
:class:`~agentfootprint.logformat.runs.RunInfo` (issue 25), field for field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import agentfootprint as af
from agentfootprint.logformat.runs import RunInfo
from agentfootprint.store.base import RunInfo as StoreRunInfo
from agentfootprint.verify.bundle import BundleSource


def test_a_store_and_its_bundle_describe_each_run_with_the_same_record(tmp_path: Path) -> None:
    db, out = tmp_path / "runs.db", tmp_path / "all.afp"
    agent = af.Agent(provider=af.MockProvider(["one", "two", "three"]), model="m", store=db)
    root = agent.run_sync("hi")
    child = agent.run_sync("again", continue_from=root)
    other = agent.run_sync("elsewhere")
    af.export_runs(agent.store, [child.run_id, other.run_id], out)
    agent.close()
    assert StoreRunInfo is RunInfo
    with af.SqliteStore(db, readonly=True) as store, BundleSource(out) as bundle:
        held, carried = store.runs(), bundle.runs()
        assert all(type(info) is RunInfo for info in [*held, *carried])
        # the bundle carries the root as the child's ancestor: not asked for
        assert [info.requested for info in carried] == [False, True, True]
        assert [dataclasses.replace(info, requested=True) for info in carried] == held
        assert bundle.run_info(root.run_id) == dataclasses.replace(
            store.run_info(root.run_id), requested=False
        )
        assert all(info.closed for info in held)
