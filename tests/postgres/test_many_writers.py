"""Writer processes recording sealed runs into one database (16 x 50 under ``AFP_DEEP=1``,
as ``.ci/run`` runs it; 6 x 8 by default), PostgreSQL and SQLite alike, with a
reader verifying the whole database in a loop while they append: nothing is lost, every run
verifies, and the seal log gives each sealed run exactly one leaf (a checkpoint of it checks).

The reader is sure to read mid-way by construction: each writer records half its runs, then
waits at a gate (a file) that the reader opens once a pass has seen some runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.store.postgres import PostgresStore
from agentfootprint.testing.seals import SIGNER
from agentfootprint.verify.checkpoint import check_checkpoint, log_leaves, make_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.deep_pass]

WRITERS, RUNS = (16, 50) if os.environ.get("AFP_DEEP") else (6, 8)

WRITER = textwrap.dedent(
    """
    import sys
    import agentfootprint as af
    from agentfootprint.testing.seals import SIGNER

    import os
    import time

    url, name, runs, gate = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    tool = af.define_tool(name="note", description="note", execute=lambda a: "noted " + a["t"])
    script = []
    for i in range(runs):
        script += [af.reply(tool_calls=[af.tool_call("note", {"t": f"{name}-{i}"})]),
                   f"{name} done {i}"]
    with af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=url,
                  signer=SIGNER) as agent:
        for i in range(runs):
            if i == runs // 2:
                deadline = time.monotonic() + 300  # a hang guard: the reader opens the gate
                while not os.path.exists(gate) and time.monotonic() < deadline:
                    time.sleep(0.01)
            agent.run_sync(f"run {i} of {name}")
    print("ok")
    """
)


@pytest.fixture(params=["postgresql", "sqlite"])
def shared(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, Callable[[], Any]]]:
    """``(url, open a reader)`` of one database every writer appends to."""
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_database")
        PostgresStore(url).close()  # the schema, created once, as a deployment would
        yield url, lambda: PostgresStore(url, readonly=True)
    else:
        path = tmp_path / "shared.db"
        af.SqliteStore(path).close()
        yield str(path), lambda: af.SqliteStore(path, readonly=True)


def test_many_writers_lose_nothing_while_a_reader_verifies(
    shared: tuple[str, Callable[[], Any]], tmp_path: Path
) -> None:
    url, open_reader = shared
    gate = tmp_path / "gate"
    done = threading.Event()
    passes: list[int] = []  # runs seen per verifying pass
    bad: list[str] = []

    def reader() -> None:
        with open_reader() as store:
            verifier = af.Verifier(store, trusted_keys=[SIGNER.public])
            while not done.is_set():
                seen = 0
                for run_id, result in verifier.verify_all():
                    seen += 1
                    if not isinstance(result, af.RunVerification) or result.outcome not in (
                        af.Outcome.VALID,
                        af.Outcome.UNSEALED,
                    ):
                        bad.append(f"{run_id}: {result}")
                passes.append(seen)
                if seen and not gate.exists():
                    gate.touch()  # a pass saw runs while every writer waits: go on
                time.sleep(0.05)

    watcher = threading.Thread(target=reader)
    watcher.start()
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, url, f"w{n}", str(RUNS), str(gate)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(WRITERS)
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0 and out.strip() == "ok", err
    finally:
        done.set()
        watcher.join()
    assert not bad, bad[:5]
    assert any(0 < seen <= WRITERS * RUNS // 2 for seen in passes), passes  # read mid-way

    with open_reader() as store:
        infos = store.runs()
        assert len(infos) == WRITERS * RUNS and all(info.closed for info in infos)
        verifier = af.Verifier(store, trusted_keys=[SIGNER.public])
        answers = set()
        for run_id, result in verifier.verify_all():
            assert isinstance(result, af.RunVerification), (run_id, result)
            assert result.outcome is af.Outcome.VALID
            answers.add(result.final_state["final_answer"])
        assert answers == {f"w{n} done {i}" for n in range(WRITERS) for i in range(RUNS)}
        log = store.seal_log()
        assert [leaf for leaf, _ in log] == list(range(WRITERS * RUNS))
        assert {run_id for _, run_id in log} == {info.run_id for info in infos}
        note = make_checkpoint(verifier, SIGNER, "agentfootprint/many-writers")
        assert check_checkpoint(note, [SIGNER.public], log_leaves(verifier)).size == len(log)
