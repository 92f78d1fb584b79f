"""A PostgreSQL server killed with SIGKILL while runs are recording, then started again:
every run is VALID or UNSEALED, the writer reports a typed store error, nothing half-written
remains (each stored batch is whole: the log ends at a flush), and the same store goes on
recording once the server is back.

The server here is a cluster of the test's own (fsync on), not the session's shared one.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import psycopg
import pytest

import agentfootprint as af
from agentfootprint.store.postgres import PostgresStore
from agentfootprint.store.postgres_url import with_database
from throwaway_cluster import ThrowawayCluster

pytestmark = [pytest.mark.slow, pytest.mark.deep_pass]

#: server kills in the trial test (5 under AFP_DEEP=1, as .ci/run runs it)
TRIALS = 5 if os.environ.get("AFP_DEEP") else 2


@pytest.fixture(scope="module")
def cluster(pg_cluster: ThrowawayCluster) -> ThrowawayCluster:
    return pg_cluster


@pytest.fixture
def database(cluster: ThrowawayCluster, request: pytest.FixtureRequest) -> str:
    if cluster.pid() is None:
        cluster.start()
    name = "crash_" + request.node.name.split("[")[0][-20:].lower()
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_database(cluster.url(), name)
    PostgresStore(url).close()
    return url


def _outcomes(url: str) -> dict[str, af.Outcome]:
    with PostgresStore(url, readonly=True) as store:
        found: dict[str, af.Outcome] = {}
        for run_id, result in af.Verifier(store).verify_all():
            assert isinstance(result, af.RunVerification), (run_id, result)
            found[run_id] = result.outcome
        return found


@pytest.mark.unverified("the server is killed mid-run: the test verifies after the restart")
def test_a_kill_during_a_tool_call_ends_the_run_with_a_typed_error_and_a_whole_prefix(
    cluster: ThrowawayCluster, database: str
) -> None:
    started, release = threading.Event(), threading.Event()

    def slow(arguments: dict[str, Any]) -> str:
        started.set()
        release.wait(30)
        return "late result"

    tool = af.define_tool(name="slow", description="waits", execute=slow)
    script = [af.reply(tool_calls=[af.tool_call("slow", {})]), "never served"]
    store = PostgresStore(database, timeout=3)
    before = af.Agent(provider=af.MockProvider(["before"]), model="m", store=store).run_sync("q")
    agent = af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=store)
    failure: list[BaseException] = []

    def record() -> None:
        try:
            agent.run_sync("call the slow tool")
        except BaseException as exc:
            failure.append(exc)

    runner = threading.Thread(target=record)
    runner.start()
    assert started.wait(30)  # the tool runs: its call was flushed before it started
    cluster.kill()
    release.set()
    runner.join(60)
    assert not runner.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], af.StoreUnavailableError), failure
    assert "Traceback" not in str(failure[0])

    cluster.start()
    outcomes = _outcomes(database)
    crashed = next(run_id for run_id in outcomes if run_id != before.run_id)
    assert outcomes == {before.run_id: af.Outcome.VALID_UNSIGNED, crashed: af.Outcome.UNSEALED}
    with PostgresStore(database, readonly=True) as reader:
        rows = list(reader.read(crashed))
    assert rows[-1].type != "run.close"
    assert any(row.type == "write" and b"slow" in row.body for row in rows)  # the call's intent
    assert not any(b"late result" in row.body for row in rows)  # the result never landed

    # the pool that saw the server die reconnects on its own backoff schedule (seconds that
    # double while the server was down): a store opened now is what a restarted writer uses
    store.close()
    with PostgresStore(database, timeout=30) as again:
        after = af.Agent(provider=af.MockProvider(["after"]), model="m", store=again).run_sync("q")
    assert _outcomes(database)[after.run_id] is af.Outcome.VALID_UNSIGNED


WRITER = textwrap.dedent(
    """
    import sys
    import agentfootprint as af

    url, name = sys.argv[1], sys.argv[2]
    tool = af.define_tool(name="note", description="note", execute=lambda a: "noted " + a["t"])
    i = 0
    try:
        store = af.PostgresStore(url, timeout=2)  # the kill may come before it connects
        while True:
            script = [af.reply(tool_calls=[af.tool_call("note", {"t": f"{name}-{i}"})]),
                      f"{name} done {i}"]
            af.Agent(provider=af.MockProvider(script), model="m", tools=[tool],
                     store=store).run_sync(f"run {i} of {name}")
            i += 1
    except af.StoreError as exc:
        print(type(exc).__name__, i, flush=True)
        sys.exit(3)
    """
)


def _closed_runs(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM events WHERE type = 'run.close'").fetchone()
    assert row is not None
    return int(row[0])


def _await_closed_runs(url: str, count: int) -> None:
    """Until the log holds ``count`` closed runs (the kill point is a count of runs, not a
    time); the deadline only guards against a hang."""
    deadline = time.monotonic() + 300
    while _closed_runs(url) < count:
        assert time.monotonic() < deadline, f"the writers did not close {count} runs"
        time.sleep(0.05)


@pytest.mark.unverified("writer processes record; the test verifies after each restart")
def test_kills_at_chosen_points_leave_every_run_valid_or_unsealed(
    cluster: ThrowawayCluster, database: str
) -> None:
    rng = random.Random(15)
    totals: dict[af.Outcome, int] = {}
    for trial in range(TRIALS):
        # the server dies once the writers have closed k more runs, k drawn from a seeded
        # generator: every trial kills mid-recording, with closed runs to check
        target = _closed_runs(database) + rng.randint(1, 12)
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, database, f"t{trial}w{n}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(4)
        ]
        _await_closed_runs(database, target)
        cluster.kill()
        for proc in writers:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 3, err
            assert out.split()[0] == "StoreUnavailableError", (out, err)
            assert "Traceback" not in err, err
        cluster.start()
        outcomes = _outcomes(database)
        assert set(outcomes.values()) <= {af.Outcome.VALID_UNSIGNED, af.Outcome.UNSEALED}
        for outcome in outcomes.values():
            totals[outcome] = totals.get(outcome, 0) + 1
    assert totals.get(af.Outcome.VALID_UNSIGNED, 0) >= TRIALS  # a closed run a trial at least
