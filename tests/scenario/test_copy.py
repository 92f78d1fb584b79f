"""``agentfootprint copy SRC DST`` and ``copy_runs``: runs moved between stores losslessly,
verified on both sides, with an export bundle as the medium; a refused copy writes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main as cli
from agentfootprint.errors import StoreConflictError
from agentfootprint.exchange.transfer import copy_runs
from agentfootprint.testing.seals import SIGNER
from agentfootprint.testing.tamper import plain, read_rows, reencoded, rewrite, tampering


def record(path: Path, count: int, **options: object) -> list[str]:
    with af.Agent(
        provider=af.MockProvider([f"answer {i}" for i in range(count)]),
        model="m",
        store=path,
        **options,  # type: ignore[arg-type]
    ) as agent:
        first = agent.run_sync("question 0")
        ids = [first.run_id]
        for i in range(1, count):
            ids.append(agent.run_sync(f"question {i}", continue_from=ids[-1]).run_id)
        return ids


def rows_of(path: Path, run_id: str) -> list[af.StoredEvent]:  # type: ignore[name-defined]
    store = af.SqliteStore(path, readonly=True)
    try:
        return list(store.read(run_id))
    finally:
        store.close()


def test_every_run_is_copied_byte_for_byte_and_verified(tmp_path: Path) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    ids = record(src, 3, signer=SIGNER)
    before = src.read_bytes()
    done = CliRunner().invoke(cli, ["copy", str(src), str(dst)])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("copied 3 runs into") and "verified" in done.output
    assert src.read_bytes() == before  # read-only
    for run_id in ids:
        assert rows_of(dst, run_id) == rows_of(src, run_id)
    store = af.SqliteStore(dst, readonly=True)
    try:
        verdicts = {
            r: v.outcome.value
            for r, v in af.Verifier(store, trusted_keys=[SIGNER.public]).verify_all()
        }  # type: ignore[union-attr]
        assert verdicts == dict.fromkeys(ids, "VALID")
        assert [run for _, run in store.seal_log()] == ids  # sealed runs got leaves here
    finally:
        store.close()
    again = CliRunner().invoke(cli, ["copy", f"sqlite:///{src}", f"sqlite:///{dst}"])
    assert again.exit_code == 0 and "copied 0 runs" in again.output
    assert "(3 already there)" in again.output


def test_one_run_brings_its_ancestors(tmp_path: Path) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    ids = record(src, 3)
    done = CliRunner().invoke(cli, ["copy", str(src), str(dst), "--run", ids[1]])
    assert done.exit_code == 0, done.output
    store = af.SqliteStore(dst, readonly=True)
    try:
        assert sorted(store.run_ids()) == sorted(ids[:2])
    finally:
        store.close()


def test_a_run_that_does_not_verify_is_not_copied_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    ids = record(src, 2)
    with tampering(src) as conn:
        rows = read_rows(conn, ids[0])
        at = next(i for i, r in enumerate(rows) if r.type == "write")
        triples = plain(rows)
        triples[at] = reencoded(rows[at], lambda body: body.__setitem__("value", "forged"))
        rewrite(conn, ids[0], triples)
    done = CliRunner().invoke(cli, ["copy", str(src), str(dst)])
    assert done.exit_code == 1 and "not copied:" in done.output, done.output
    assert "Traceback" not in done.output
    assert not any(p.name.startswith("dst.db") for p in tmp_path.iterdir())


def test_a_run_the_target_holds_with_another_log_stops_the_copy(tmp_path: Path) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    ids = record(src, 1)
    shutil.copy(src, dst)
    with tampering(dst) as conn:  # the same run id, another (re-hashed) log
        rows = read_rows(conn, ids[0])
        at = next(i for i, r in enumerate(rows) if r.type == "write")
        triples = plain(rows)
        triples[at] = reencoded(rows[at], lambda body: body.__setitem__("value", "other"))
        rewrite(conn, ids[0], triples)
    more = record(src, 1)
    before = dst.read_bytes()
    source, target = af.SqliteStore(src, readonly=True), af.SqliteStore(dst)
    try:
        with pytest.raises(StoreConflictError, match="different log"):
            copy_runs(source, target)
    finally:
        source.close()
        target.close()
    assert dst.read_bytes() == before and more  # nothing of the copy went in
    done = CliRunner().invoke(cli, ["copy", str(src), str(dst)])
    assert done.exit_code == 2 and "Traceback" not in done.output


def test_copy_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    src = tmp_path / "src.db"
    record(src, 1)
    runner = CliRunner()
    same = runner.invoke(cli, ["copy", str(src), str(src)])
    assert same.exit_code == 2 and "is SRC" in same.output
    memory = runner.invoke(cli, ["copy", str(src), "memory:"])
    assert memory.exit_code == 2 and "memory:" in memory.output
    missing = runner.invoke(cli, ["copy", str(tmp_path / "none.db"), str(tmp_path / "d.db")])
    assert missing.exit_code == 2
    folder = runner.invoke(cli, ["copy", str(src), str(tmp_path / "no" / "d.db")])
    assert folder.exit_code == 2 and "does not exist" in folder.output
    unknown = runner.invoke(cli, ["copy", str(src), str(tmp_path / "d.db"), "--run", "nope"])
    assert unknown.exit_code == 2 and not (tmp_path / "d.db").exists()
    empty = tmp_path / "empty.db"
    af.SqliteStore(empty).close()
    nothing = runner.invoke(cli, ["copy", str(empty), str(tmp_path / "e2.db")])
    assert nothing.exit_code == 0 and "copied 0 runs" in nothing.output


def test_copy_runs_between_memory_and_sqlite(tmp_path: Path) -> None:
    memory = af.MemoryStore()
    with af.Agent(provider=af.MockProvider(["a", "b"]), model="m", store=memory) as agent:
        first = agent.run_sync("one")
        agent.run_sync("two", continue_from=first)
    target = af.SqliteStore(tmp_path / "t.db")
    try:
        copied, there = copy_runs(memory, target)
        assert sorted(copied) == sorted(memory.run_ids()) and there == []
        back = af.MemoryStore()
        assert sorted(copy_runs(target, back)[0]) == sorted(copied)
        assert list(back.read(first.run_id)) == list(memory.read(first.run_id))
    finally:
        target.close()


def test_a_copy_keeps_the_seal_order_so_a_checkpoint_of_the_source_checks_the_copy(
    tmp_path: Path,
) -> None:
    """The run opened first is sealed last: listed from the events it comes first, in the
    seal log second. The copy's seal log is the source's, so the source's checkpoint checks
    against the copy's leaves."""
    import asyncio

    from agentfootprint.verify.checkpoint import check_checkpoint, log_leaves, make_checkpoint

    source = tmp_path / "src.db"
    release, started = asyncio.Event(), asyncio.Event()

    async def wait(arguments: dict[str, object]) -> str:
        started.set()  # the slow run is open and in its tool
        await release.wait()
        return "done"

    tool = af.define_tool(name="wait", description="waits", execute=wait)
    store = af.SqliteStore(source)

    async def main() -> tuple[str, str]:
        slow = af.Agent(
            provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("wait", {})]), "late"]),
            model="m",
            tools=[tool],
            store=store,
            signer=SIGNER,
        )
        quick = af.Agent(provider=af.MockProvider(["early"]), model="m", store=store, signer=SIGNER)
        first = asyncio.ensure_future(slow.run("opened first"))
        await started.wait()
        second = await quick.run("sealed first")
        release.set()
        return (await first).run_id, second.run_id

    opened_first, sealed_first = asyncio.run(main())
    store.close()
    with af.SqliteStore(source, readonly=True) as src:
        assert src.run_ids() == [opened_first, sealed_first]
        assert src.seal_log() == [(0, sealed_first), (1, opened_first)]
        note = make_checkpoint(af.Verifier(src, trusted_keys=[SIGNER.public]), SIGNER, "af/src")
    target = tmp_path / "copy.db"
    with af.SqliteStore(source, readonly=True) as src, af.SqliteStore(target) as dst:
        copy_runs(src, dst)
        assert dst.seal_log() == [(0, sealed_first), (1, opened_first)]
        leaves = log_leaves(af.Verifier(dst, trusted_keys=[SIGNER.public]))
        assert check_checkpoint(note, [SIGNER.public], leaves).size == 2
