"""The throwaway cluster the PostgreSQL tests run on (tests/throwaway_cluster.py):
started, restarted on its port after a kill, and never left behind by a process killed before
its teardown."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from throwaway_cluster import ThrowawayCluster

pytestmark = pytest.mark.slow


def test_a_killed_server_starts_again_on_its_port(pg_cluster: ThrowawayCluster) -> None:
    url, port = pg_cluster.url(), pg_cluster.port
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")
    pg_cluster.kill()
    assert pg_cluster.pid() is None or not Path(f"/proc/{pg_cluster.pid()}").exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)
    assert pg_cluster.start() == url and pg_cluster.port == port
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_cluster_whose_owner_died_is_removed(pg_cluster: ThrowawayCluster) -> None:
    script = textwrap.dedent(
        """
        import os
        from throwaway_cluster import ThrowawayCluster

        cluster = ThrowawayCluster(fsync=False)
        cluster.start()
        print(cluster.root, cluster.pid(), flush=True)
        os._exit(0)  # no teardown: as a test process killed mid-session
        """
    )
    tests = str(Path(__file__).resolve().parents[1])  # where throwaway_cluster.py is
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": tests},
    )
    assert done.returncode == 0, done.stderr
    root, pid = done.stdout.split()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (Path(root).exists() or _alive(int(pid))):
        time.sleep(0.2)
    assert not Path(root).exists() and not _alive(int(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
