"""Helpers of bench/stores.py: the tables' figures, the probes of one round trip, commit and
fsync, and the throwaway PostgreSQL server with the databases a run creates on it."""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

#: the tests' throwaway PostgreSQL server (tests/throwaway_cluster.py) is imported from there
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

if TYPE_CHECKING:
    from throwaway_cluster import ThrowawayCluster


# -- figures -----------------------------------------------------------------------------------
def table(*columns: str) -> None:
    """A markdown table's header; a column named with a leading ``<`` is left-aligned."""
    print("| " + " | ".join(c.lstrip("<") for c in columns) + " |")
    print("|" + "|".join("---" if c.startswith("<") else "---:" for c in columns) + "|")


def fmt_spread(values: Sequence[float], decimals: int = 0, suffix: str = "") -> str:
    """The median, and the min-max when there is more than one value."""
    med, lo, hi = statistics.median(values), min(values), max(values)
    if len(values) == 1:
        return f"{med:,.{decimals}f}{suffix}"
    return f"{med:,.{decimals}f}{suffix} ({lo:,.{decimals}f}-{hi:,.{decimals}f})"


def cell_figures(results: Sequence[dict[str, Any]], per: str) -> dict[str, float]:
    """Totals of one measurement (one result per process): rates summed over the processes."""
    rate = {k: sum(r[k] / r["seconds"] for r in results) for k in (per, "events", "runs")}
    events = sum(r["events"] for r in results)
    shares = [r["events"] / r["seconds"] for r in results]
    cpu = 1e6 * sum(r["cpu"] for r in results) / max(events, 1)
    fairness = min(shares) / max(shares) if max(shares) else 0.0
    return {
        **{f"{k}_s": v for k, v in rate.items()},
        "cpu_us_per_event": cpu,
        "fairness": fairness,
    }


def med(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def fmt_ratios(top: Sequence[float], bottom: Sequence[float]) -> str:
    """Per-round ratios top/bottom: median (min-max)."""
    return fmt_spread([t / b for t, b in zip(top, bottom, strict=True)], 2, "x")


def rounds_order(items: Sequence[Any], round_no: int) -> list[Any]:
    return list(items) if round_no % 2 == 0 else list(reversed(items))


# -- probes: what one round trip, one commit, one fsync cost here ------------------------------
def _ms_per_call(fn: Callable[[], Any], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1000


def _cpu_us_per_call(fn: Callable[[], Any], calls: int, backend: int | None) -> tuple[float, float]:
    """(this process's, the server session's) CPU microseconds per call of ``fn``; the
    session's is -1 where its process cannot be read (a server on another machine)."""

    def session_cpu() -> float:
        if backend is None:
            return 0.0
        try:
            fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    s0, c0 = session_cpu(), time.process_time()
    for _ in range(calls):
        fn()
    c1, s1 = time.process_time(), session_cpu()
    server = 1e6 * (s1 - s0) / calls if backend is not None and s1 else -1.0
    return 1e6 * (c1 - c0) / calls, server


def probes(server: str, folder: Path) -> dict[str, float]:
    """One fdatasync, one round trip, a flush's rows without the store; and what the
    floor of a flush costs in CPU here: a bare round trip and a bare durable commit through
    libpq (no driver objects), client and server, and the kernel's CPU for one fdatasync."""
    import psycopg

    out: dict[str, float] = {}
    fd = os.open(folder / "probe.bin", os.O_WRONLY | os.O_CREAT, 0o600)

    def write_and_sync() -> None:
        os.write(fd, b"x" * 4096)
        os.fdatasync(fd)

    try:
        out["fdatasync_ms"] = _ms_per_call(write_and_sync, 200)
        out["fdatasync_cpu_us"] = _cpu_us_per_call(write_and_sync, 200, None)[0]
    finally:
        os.close(fd)
    out.update(_sqlite_commit_probe(folder))
    with psycopg.connect(server, autocommit=True) as conn:
        out["pg_round_trip_ms"] = _ms_per_call(lambda: conn.execute("SELECT 1"), 500)
        pgconn, backend = conn.pgconn, conn.info.backend_pid
        client, session = _cpu_us_per_call(lambda: pgconn.exec_(b"SELECT 1"), 2000, backend)
        out["pg_round_trip_client_cpu_us"], out["pg_round_trip_server_cpu_us"] = client, session
        # a logged table (a TEMP one writes no WAL, so its commits would not wait for disk)
        conn.execute("CREATE TABLE probe (run_id text, seq int, body bytea)")
        rows = [("0" * 32, i, b"x" * 160) for i in range(7)]  # 7: the template's mean flush
        values = ", ".join(["(%s, %s, %s)"] * len(rows))
        flat = [v for row in rows for v in row]

        def flush() -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany("INSERT INTO probe VALUES (%s, %s, %s)", rows)

        one_row = [b"0" * 32, b"0", b"x" * 160]

        def commit_one_row() -> None:
            pgconn.exec_params(b"INSERT INTO probe VALUES ($1, $2::int, $3::bytea)", one_row)

        for setting in ("on", "off"):
            conn.execute(f"SET synchronous_commit = {setting}")
            client, session = _cpu_us_per_call(commit_one_row, 1000, backend)
            out[f"pg_commit_{setting}_client_cpu_us"] = client
            out[f"pg_commit_{setting}_server_cpu_us"] = session
            out[f"pg_bare_flush_{setting}_ms"] = _ms_per_call(flush, 300)
            # the same rows as one statement (atomic by itself: one round trip, no BEGIN)
            out[f"pg_one_statement_{setting}_ms"] = _ms_per_call(
                lambda: conn.execute(f"INSERT INTO probe VALUES {values}", flat), 300
            )
        conn.execute("DROP TABLE probe")
        out.update(_packed_probe(conn))
    return out


def _sqlite_commit_probe(folder: Path) -> dict[str, float]:
    """CPU of one SQLite commit of one 900-byte row (a WAL file, as the store opens it), at
    synchronous NORMAL and FULL: what SQLite pays per flush where PostgreSQL pays a commit."""
    out: dict[str, float] = {}
    for sync in ("normal", "full"):
        path = folder / f"probe-{sync}.sqlite"
        try:
            out[f"sqlite_commit_{sync}_cpu_us"] = _sqlite_commit_cpu(path, sync)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    return out


def _sqlite_commit_cpu(path: Path, sync: str) -> float:
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={sync.upper()}")
        conn.execute("CREATE TABLE probe (pos INTEGER PRIMARY KEY, data BLOB)")
        data, at = b"x" * 900, [0]

        def commit() -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO probe VALUES (?, ?)", (at[0], data))
            conn.execute("COMMIT")
            at[0] += 1

        return _cpu_us_per_call(commit, 2000, None)[0]
    finally:
        conn.close()


#: a flush's 7 rows as the store writes them (``events``: one prepared multi-row INSERT) and
#: as one packed row would (``appends``: the records in one bytea, only the last chain hash,
#: and the check that the batch continues its run, which a key on its first seq alone cannot
#: make): what such a layout would save the server per flush
_PACKED_TABLES = (
    "CREATE TABLE probe_events (position bigint GENERATED ALWAYS AS IDENTITY, run_id text "
    "NOT NULL, seq integer NOT NULL, type text NOT NULL, ts bigint NOT NULL, body bytea NOT "
    "NULL, event_hash bytea NOT NULL, chain_hash bytea NOT NULL, PRIMARY KEY (run_id, seq))",
    "CREATE TABLE probe_appends (position bigint GENERATED ALWAYS AS IDENTITY, run_id text "
    "NOT NULL, seq integer NOT NULL, count integer NOT NULL, ts bigint NOT NULL, head bytea "
    "NOT NULL, data bytea NOT NULL, PRIMARY KEY (run_id, seq))",
)
_PACKED_INSERT = (
    b"INSERT INTO probe_appends (run_id, seq, count, ts, head, data) "
    b"SELECT $1, $2, $3, $4, $5, $6 WHERE $2 = 0 OR EXISTS (SELECT 1 FROM probe_appends "
    b"WHERE run_id = $1 AND seq < $2 AND seq + count = $2)"
)


def _packed_probe(conn: Any) -> dict[str, float]:
    import struct

    pgconn, backend = conn.pgconn, conn.info.backend_pid
    for sql in _PACKED_TABLES:
        conn.execute(sql)
    i4, i8 = struct.Struct("!i"), struct.Struct("!q")
    sizes = (80, 200, 60, 70, 90, 770, 55)  # the template's flush before a model call
    bodies = [bytes([65 + k]) * size for k, size in enumerate(sizes)]
    rows = len(bodies)
    values = ", ".join(
        f"($1, $2 + {k}, " + ", ".join(f"${3 + 5 * k + j}" for j in range(5)) + ")"
        for k in range(rows)
    )
    events_sql = "INSERT INTO probe_events (run_id, seq, type, ts, body, event_hash, chain_hash) "
    pgconn.prepare(b"probe_rows", (events_sql + "VALUES " + values).encode(), None)
    pgconn.prepare(b"probe_packed", _PACKED_INSERT, None)
    data = b"".join(bodies) + bytes(3 * rows)  # a record's tag, ts delta and length
    at = {"run": 0, "seq": 0}

    def step() -> tuple[bytes, bytes]:
        run, seq = (b"%032x" % at["run"]), i4.pack(at["seq"])
        at["seq"] += rows
        if at["seq"] > 60:  # a run's length in the template
            at["run"], at["seq"] = at["run"] + 1, 0
        return run, seq

    def seven_rows() -> None:
        run, seq = step()
        params = [run, seq]
        for body in bodies:
            params += [b"write", i8.pack(1), body, os.urandom(32), os.urandom(32)]
        pgconn.exec_prepared(b"probe_rows", params, [1] * len(params))

    def one_packed_row() -> None:
        run, seq = step()
        params = [run, seq, i4.pack(rows), i8.pack(1), os.urandom(32), data]
        pgconn.exec_prepared(b"probe_packed", params, [1] * len(params))

    out: dict[str, float] = {}
    for setting in ("on", "off"):
        conn.execute(f"SET synchronous_commit = {setting}")
        for name, fn in (("rows", seven_rows), ("packed", one_packed_row)):
            at["run"] += 100_000
            at["seq"] = 0
            client, session = _cpu_us_per_call(fn, 1500, backend)
            out[f"pg_flush_{name}_{setting}_client_cpu_us"] = client
            out[f"pg_flush_{name}_{setting}_server_cpu_us"] = session
    conn.execute("DROP TABLE probe_events, probe_appends")
    return out


# -- PostgreSQL --------------------------------------------------------------------------------
def postmaster_cpu(cluster: ThrowawayCluster) -> float | None:
    """CPU seconds of a PostgreSQL server so far: the postmaster's own and its ended
    children's (reaped backends: ``cutime``/``cstime``), plus its live children's."""
    pid = cluster.pid()
    if pid is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")

    def fields(stat: Path) -> list[str]:
        return stat.read_text().rsplit(")", 1)[1].split()  # after "(comm)": state, ppid...

    try:
        own = fields(Path(f"/proc/{pid}/stat"))
    except OSError:
        return None
    total = sum(int(v) for v in own[11:15])  # utime stime cutime cstime
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                f = fields(entry / "stat")
                if int(f[1]) == pid:
                    total += int(f[11]) + int(f[12])
    return total / tick


def fail(message: str) -> NoReturn:
    """No PostgreSQL to measure against: say why, exit 2 (no traceback)."""
    print(f"stores.py: {message}", file=sys.stderr)
    raise SystemExit(2)


@contextlib.contextmanager
def postgres_server() -> Iterator[tuple[str, ThrowawayCluster]]:
    """A throwaway cluster's maintenance URL, and the cluster; exit 2 without one."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401

        from throwaway_cluster import ClusterUnavailable, ThrowawayCluster
    except ImportError as exc:
        fail(f"PostgreSQL needs psycopg 3 ({exc}): pip install 'agentfootprint[postgresql]'")
    try:
        cluster = ThrowawayCluster(fsync=True)
        url = cluster.start()
    except (ClusterUnavailable, OSError, subprocess.SubprocessError) as exc:
        fail(f"no PostgreSQL server to measure against: {exc}\n(install the server package)")
    try:
        yield url, cluster
    finally:
        cluster.stop()


class Databases:
    """The databases this run creates on the server (dropped at the end)."""

    def __init__(self, server: str) -> None:
        self.server, self.names = server, set[str]()

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(sql)

    def create(self, tag: str) -> str:
        from agentfootprint.store.postgres_url import with_database

        name = f"afbench_{tag}_{uuid.uuid4().hex[:8]}"
        self._admin(f'CREATE DATABASE "{name}"')
        self.names.add(name)
        return with_database(self.server, name)

    def drop(self, url: str | None = None) -> None:
        """The database of ``url``; None: every one left (errors ignored: the end)."""
        names = sorted(self.names) if url is None else [url.rsplit("/", 1)[1].split("?")[0]]
        for name in names:
            with contextlib.suppress(Exception) if url is None else contextlib.nullcontext():
                self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self.names.discard(name)
