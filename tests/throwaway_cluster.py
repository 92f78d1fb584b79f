"""A throwaway PostgreSQL server on 127.0.0.1, for this project's tests and benchmarks (kept
beside them, never in the installed package).

:class:`ThrowawayCluster` runs the machine's own PostgreSQL server programs (``initdb``,
``pg_ctl``): a new cluster in a temporary folder, listening on a free loopback port and on a
socket in that folder only, trusting local connections (nothing outside the machine can reach
it), removed again by :meth:`~ThrowawayCluster.stop`. The tests of
:class:`~agentfootprint.store.postgres.PostgresStore` run against one; the crash tests kill
its server with SIGKILL and start it again on the same data.

The programs are found from ``AGENTFOOTPRINT_PG_BINDIR``, else the newest
``/usr/lib/postgresql/*/bin`` (Debian's and Ubuntu's ``postgresql`` package), else ``PATH``.
PostgreSQL refuses to run as root: as root, the cluster runs as the ``postgres`` system user
(which the distribution's package creates) through ``runuser``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["ClusterUnavailable", "ThrowawayCluster", "find_bindir"]

#: the superuser the cluster is created with (trusted on loopback only)
SUPERUSER = "af_admin"

#: run beside the cluster: once the process that started it is gone (killed, so its
#: teardown never ran), stop the server and remove the cluster
_WATCHDOG = """
import os, shutil, subprocess, sys, time
parent, root, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
while True:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    time.sleep(0.5)
subprocess.run(command, capture_output=True, timeout=120)
shutil.rmtree(root, ignore_errors=True)
"""


class ClusterUnavailable(RuntimeError):
    """This machine cannot run a PostgreSQL server (programs or a user to run them missing)."""


def find_bindir() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``."""
    given = os.environ.get("AGENTFOOTPRINT_PG_BINDIR")
    candidates = [Path(given)] if given else []

    def version(path: str) -> tuple[int, ...]:
        name = Path(path).parent.name
        return tuple(int(p) for p in name.split(".") if p.isdigit())

    candidates += [
        Path(p).parent
        for p in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version, reverse=True)
    ]
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).resolve().parent)
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    raise ClusterUnavailable(
        "no PostgreSQL server programs (initdb, pg_ctl, postgres) found: install the "
        "distribution's server package (Debian: apt-get install postgresql) or set "
        "AGENTFOOTPRINT_PG_BINDIR"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ThrowawayCluster:
    """One PostgreSQL cluster of its own, in a temporary folder, on 127.0.0.1.

    ``fsync=False`` trades crash safety of the machine (not of the server process: a server
    killed with SIGKILL loses nothing it committed either way) for speed, for suites that
    create many databases.
    """

    def __init__(self, *, fsync: bool = True, bindir: Path | None = None) -> None:
        self.bindir = bindir or find_bindir()
        self.fsync = fsync
        self._run_as: list[str] = []
        owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                raise ClusterUnavailable(
                    "PostgreSQL does not run as root and there is no 'postgres' user to run "
                    "it as: run the tests as another user, or install the server package"
                ) from None
            runuser = shutil.which("runuser")
            if runuser is None:
                raise ClusterUnavailable("running as root, but 'runuser' is missing")
            self._run_as = [runuser, "-u", "postgres", "--"]
        self.root = Path(tempfile.mkdtemp(prefix="af-pg-"))
        if owner is not None:
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self._initialised = False
        self._watchdog: subprocess.Popen[bytes] | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._run_as, *args], capture_output=True, text=True, check=check, timeout=120
        )

    def start(self) -> str:
        """Create the cluster (first time) and start its server; returns :meth:`url` of the
        ``postgres`` database. Started again (after :meth:`kill` or :meth:`stop` without
        ``remove``), it listens on the same port, so clients reconnect to the same URL."""
        if not self._initialised:
            self._run(
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            )
            self._initialised = True
        last = ""
        for attempt in range(5):  # a port taken between probing and binding: try another
            if not (attempt == 0 and self.port):
                self.port = _free_port()
            options = (
                f"-h 127.0.0.1 -p {self.port} -k {self.root} "
                f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200"
            )
            done = self._run(
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.log),
                "-w",
                "-t",
                "60",
                "start",
                check=False,
            )
            if done.returncode == 0:
                self._watch()
                return self.url()
            last = done.stdout + done.stderr + self._log_tail()
        raise ClusterUnavailable(f"the PostgreSQL server did not start: {last}")

    def _watch(self) -> None:
        """The watchdog that removes the cluster if this process dies without :meth:`stop`."""
        if self._watchdog is not None and self._watchdog.poll() is None:
            return
        stop = [
            *self._run_as,
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-m",
            "immediate",
            "-w",
            "stop",
        ]
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(self.root), *stop],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-2000:]
        return ""

    def pid(self) -> int | None:
        """The running postmaster's process id (from ``postmaster.pid``), or None."""
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL the server (the postmaster and, as they notice, its backends): a crash."""
        pid = self.pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        self._reap_backends()

    def _reap_backends(self) -> None:
        """Backends of a killed postmaster end by themselves; wait until none holds the
        data folder (a new server refuses to start beside them)."""
        deadline = time.monotonic() + 30
        marker = str(self.data)
        ours = {os.getpid()} | ({self._watchdog.pid} if self._watchdog is not None else set())
        while time.monotonic() < deadline:
            alive = False
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) in ours:
                    continue
                with contextlib.suppress(OSError):
                    if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                        alive = True
                        break
            if not alive:
                return
            time.sleep(0.05)

    def stop(self, *, remove: bool = True) -> None:
        """Stop the server (fast shutdown) and, with ``remove``, delete the cluster."""
        if self.pid() is not None:
            self._run(
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "fast",
                "-w",
                "stop",
                check=False,
            )
        if remove:
            if self._watchdog is not None:
                self._watchdog.kill()
                self._watchdog.wait()
                self._watchdog = None
            shutil.rmtree(self.root, ignore_errors=True)

    # -- addressing -----------------------------------------------------------------------
    def url(self, database: str = "postgres", *, user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> ThrowawayCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
