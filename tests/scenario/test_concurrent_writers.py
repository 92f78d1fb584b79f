"""Several processes recording into one SQLite file at once lose nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import agentfootprint as af

WRITER = textwrap.dedent(
    """
    import sys
    import agentfootprint as af

    db, name, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tool = af.define_tool(name="note", description="note", execute=lambda a: "noted " + a["t"])
    for i in range(runs):
        script = [af.reply(tool_calls=[af.tool_call("note", {"t": f"{name}-{i}"})]),
                  f"{name} done {i}"]
        agent = af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=db)
        agent.run_sync(f"run {i} of {name}")
        agent.store.close()
    """
)


def test_three_writer_processes(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    af.SqliteStore(db).close()  # create the schema once, as a deployment would
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), f"w{n}", "8"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    store = af.SqliteStore(db)
    infos = store.runs()
    assert len(infos) == 24 and all(info.closed for info in infos)
    verifier = af.Verifier(store)
    answers = set()
    for info in infos:
        result = verifier.verify(info.run_id)
        assert result.outcome is af.Outcome.VALID_UNSIGNED
        answers.add(result.final_state["final_answer"])
    assert answers == {f"w{n} done {i}" for n in range(3) for i in range(8)}
    store.close()


OPENER = textwrap.dedent(
    """
    import os, sys, time
    import agentfootprint as af

    db, go = sys.argv[1], sys.argv[2]
    print("ready", flush=True)
    deadline = time.monotonic() + 120  # a hang guard: the parent opens the gate
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.001)
    store = af.SqliteStore(db, durability="normal")
    store.close()
    print("ok")
    """
)


def test_processes_creating_one_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    """The switch to WAL meets another opener's lock with SQLITE_BUSY at once (no busy
    handler): it is waited for like any lock, so no opener fails. The openers start together:
    each waits at a gate (a file) that opens once all six are ready."""
    for trial in range(4):
        db = tmp_path / f"new-{trial}.db"
        go = tmp_path / f"go-{trial}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, str(db), str(go)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(6)
        ]
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        go.touch()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0 and out.strip() == "ok", err
        with af.SqliteStore(db, readonly=True) as store:
            assert store.runs() == []
