"""A verifier reading a database other writers append to: a run still open is read again
each time (never judged from an earlier reading), and a whole-database pass judges one
moment (``snapshot()``), not a run list of one moment against an index of a later one."""

from __future__ import annotations

from pathlib import Path

import agentfootprint as af
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body


def _open_run(store: af.SqliteStore, run_id: str) -> RunWriter:
    writer = RunWriter(store, run_id)
    writer.append([("run.open", open_body(run_id))])
    writer.append(
        [
            ("write", {"commit": 0, "path": "n", "verb": "set", "value": 1}),
            ("commit", {"commit": 0, "stage": "s", "stage_run": "s#0", "writes": 1}),
        ]
    )
    return writer


def test_an_open_run_is_read_again_once_it_has_closed(tmp_path: Path) -> None:
    store = af.SqliteStore(tmp_path / "log.db")
    writer = _open_run(store, "r1")
    with af.SqliteStore(tmp_path / "log.db", readonly=True) as reader:
        verifier = af.Verifier(reader)
        assert verifier.verify("r1").outcome is af.Outcome.UNSEALED
        writer.append([("run.close", {"outcome": "answered", "commits": 1, "receipts": 0})])
        again = verifier.verify("r1")
        assert again.outcome is af.Outcome.VALID_UNSIGNED and again.events == 4
        assert verifier.verify("r1") is again  # a closed run is remembered
    store.close()


def test_a_whole_file_pass_reads_one_moment(tmp_path: Path) -> None:
    """A run opened by another writer between the pass's run list and its index read is
    not reported as an index row without events: the pass reads inside one transaction."""
    path = tmp_path / "log.db"
    store = af.SqliteStore(path)
    _open_run(store, "r1")
    with af.SqliteStore(path, readonly=True) as reader:
        results = af.Verifier(reader).verify_all()
        run_id, first = next(results)  # the pass has listed the runs and read r1
        assert run_id == "r1" and first.outcome is af.Outcome.UNSEALED
        _open_run(store, "r2")  # committed by another connection mid-pass
        rest = list(results)
        assert rest == [], rest  # r2's index row is not judged against the earlier list
        assert [r for r, _ in af.Verifier(reader).verify_all()] == ["r1", "r2"]
    store.close()


def test_a_reader_opened_before_any_writer_follows_the_writers_commits(tmp_path: Path) -> None:
    """Opened while no writer held the file, a read-only store reads it ``immutable`` (it
    creates nothing beside it); once a writer appears it follows that writer's commits
    instead of reading a file it was promised would not change."""
    path = tmp_path / "log.db"
    first = af.SqliteStore(path)
    _open_run(first, "r1")
    first.close()  # no writer's files are left beside it
    assert not list(tmp_path.glob("log.db-*"))
    with af.SqliteStore(path, readonly=True) as reader:
        assert reader.run_ids() == ["r1"]
        writer = af.SqliteStore(path)
        for index in range(30):  # enough pages for the writer's checkpoints to move
            _open_run(writer, f"r{index + 2}")
        assert reader.run_ids() == [f"r{index}" for index in range(1, 32)]
        verdicts = dict(af.Verifier(reader).verify_all())
        assert len(verdicts) == 31
        assert all(v.outcome is af.Outcome.UNSEALED for v in verdicts.values())
        writer.close()
