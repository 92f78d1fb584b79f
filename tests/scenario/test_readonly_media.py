"""Evidence on read-only storage verifies: a read-only folder and a read-only mount.

The auditor's normal case is a log copied to write-once storage. Root ignores file
permissions (CAP_DAC_OVERRIDE), and CI runs as root, so every check runs in a child
process under ``setpriv`` with that capability (and CAP_DAC_READ_SEARCH) dropped; a
sanity check in the child proves it cannot write there. The mount is a bind mount
remounted read-only (root only), always unmounted in a ``finally``. Tests skip, saying
why, only where this cannot be done.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent
from agentfootprint.testing.permissions import unprivileged

SETPRIV = shutil.which("setpriv")
IS_ROOT = os.geteuid() == 0

#: Run in the child: proves it cannot write to the folder, then reads and verifies every run
#: through the library, read-only.
CHECK = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentfootprint.store.sqlite import SqliteStore
    from agentfootprint.verify.verifier import Verifier
    db = Path(sys.argv[1])
    try:
        (db.parent / "probe").write_bytes(b"x")
    except OSError:
        pass
    else:
        sys.exit("the child could write to the folder: the check would prove nothing")
    with SqliteStore(db, readonly=True) as store:
        verifier = Verifier(store)
        runs = store.run_ids()
        for run_id in runs:
            print(run_id, verifier.verify(run_id).outcome.name)
    print("runs", len(runs))
    """
)


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("agentfootprint")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentfootprint.cli"]


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        unprivileged(command), capture_output=True, text=True, timeout=300, check=False
    )


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _record(path: Path) -> list[str]:
    """Both demo turns recorded into a real SQLite log, closed (no -wal left)."""
    with af.SqliteStore(path) as store:
        agent = build_demo_agent(store)
        first = agent.run_sync(DEMO_QUESTIONS[0])
        second = agent.run_sync(DEMO_QUESTIONS[1], continue_from=first)
    assert not path.with_name(path.name + "-wal").exists()
    return [first.run_id, second.run_id]


_INTERRUPTED = textwrap.dedent(
    """
    import os, sys
    import agentfootprint as af
    from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent
    store = af.SqliteStore(sys.argv[1])
    build_demo_agent(store).run_sync(DEMO_QUESTIONS[0])
    os._exit(0)  # killed before closing: the committed frames stay in the -wal
    """
)


def _record_interrupted(path: Path) -> None:
    subprocess.run([sys.executable, "-c", _INTERRUPTED, str(path)], check=True, timeout=300)
    assert path.with_name(path.name + "-wal").exists()
    assert path.with_name(path.name + "-shm").exists()


def _assert_verifies(db: Path, run_ids: list[str]) -> None:
    checked = _run([sys.executable, "-c", CHECK, str(db)])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"runs {len(run_ids)}" in checked.stdout
    for run_id in run_ids:
        assert f"{run_id} VALID_UNSIGNED" in checked.stdout
    listed = _run([*_cli(), "runs", str(db)])
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert all(run_id[:12] in listed.stdout for run_id in run_ids), listed.stdout
    verified = _run([*_cli(), "verify", str(db)])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    for output in (checked, listed, verified):
        assert "Traceback" not in output.stdout + output.stderr


@contextlib.contextmanager
def _read_only_folder(folder: Path) -> Iterator[Path]:
    """``folder`` and its files made read-only (0555 / 0444) while inside."""
    for path in folder.iterdir():
        path.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
        for path in folder.iterdir():
            path.chmod(0o644)


@contextlib.contextmanager
def _read_only_mount(source: Path, target: Path) -> Iterator[Path]:
    """``source`` bind-mounted at ``target``, remounted read-only, unmounted on the way out."""
    if not IS_ROOT:
        pytest.skip("a read-only bind mount needs root (mount is not permitted)")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("no mount/umount command")
    target.mkdir()
    bound = subprocess.run(
        ["mount", "--bind", str(source), str(target)], capture_output=True, text=True
    )
    if bound.returncode != 0:
        pytest.skip(f"mount --bind is not permitted here: {bound.stderr.strip()}")
    try:
        remounted = subprocess.run(
            ["mount", "-o", "remount,ro,bind", str(target)], capture_output=True, text=True
        )
        if remounted.returncode != 0:
            pytest.skip(f"remounting read-only is not permitted: {remounted.stderr.strip()}")
        probe = target / "probe"
        with pytest.raises(OSError):  # even root cannot write to a read-only mount
            probe.write_bytes(b"x")
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=False, capture_output=True)
        if os.path.ismount(target):
            subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)
        assert not os.path.ismount(target), f"could not unmount {target}"


def test_a_log_in_a_read_only_folder_verifies(tmp_path: Path) -> None:
    folder = tmp_path / "evidence"
    folder.mkdir()
    run_ids = _record(folder / "runs.db")
    before = _snapshot(folder)
    with _read_only_folder(folder):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o555
        _assert_verifies(folder / "runs.db", run_ids)
    assert _snapshot(folder) == before  # byte-identical, nothing created beside it


def test_a_log_on_a_read_only_mount_verifies(tmp_path: Path) -> None:
    source = tmp_path / "evidence"
    source.mkdir()
    run_ids = _record(source / "runs.db")
    before = _snapshot(source)
    with _read_only_mount(source, tmp_path / "mnt") as mounted:
        _assert_verifies(mounted / "runs.db", run_ids)
    assert _snapshot(source) == before


def test_an_interrupted_writers_log_on_a_read_only_mount_verifies(tmp_path: Path) -> None:
    """A log copied with its -wal and -shm (a writer was killed): the committed frames in
    the -wal are read, without writing."""
    source = tmp_path / "evidence"
    source.mkdir()
    _record_interrupted(source / "runs.db")
    before = _snapshot(source)
    with _read_only_mount(source, tmp_path / "mnt") as mounted:
        checked = _run([sys.executable, "-c", CHECK, str(mounted / "runs.db")])
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "runs 1" in checked.stdout and "VALID_UNSIGNED" in checked.stdout
    assert _snapshot(source) == before


def test_a_wal_without_its_shm_on_read_only_storage_is_a_clear_file_error(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "evidence"
    folder.mkdir()
    _record_interrupted(folder / "runs.db")
    (folder / "runs.db-shm").unlink()  # copied without it
    before = _snapshot(folder)
    snippet = textwrap.dedent(
        """
        import sys
        from agentfootprint.errors import FileError
        from agentfootprint.store.sqlite import SqliteStore
        try:
            SqliteStore(sys.argv[1], readonly=True)
        except FileError as exc:
            print("FileError:", exc)
        """
    )
    with _read_only_folder(folder):
        result = _run([sys.executable, "-c", snippet, str(folder / "runs.db")])
        verified = _run([*_cli(), "verify", str(folder / "runs.db")])
    assert result.returncode == 0, result.stderr
    assert "FileError:" in result.stdout and "copy" in result.stdout, result.stdout
    assert "writable storage" in result.stdout
    assert verified.returncode == 2 and "Traceback" not in verified.stdout + verified.stderr
    assert _snapshot(folder) == before


_WRITE_ATTEMPTS = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentfootprint.errors import FileError
    from agentfootprint.store.sqlite import SqliteStore
    from agentfootprint.store.vault import DisclosureVault
    folder = Path(sys.argv[1])
    with DisclosureVault(folder / "vault.db", readonly=True) as vault:
        print("vault reads", len(vault.commitments()))
    for name, attempt in (
        ("log", lambda: SqliteStore(folder / "runs.db")),
        ("new log", lambda: SqliteStore(folder / "new.db")),
        ("vault", lambda: DisclosureVault(folder / "vault.db")),
        ("new vault", lambda: DisclosureVault(folder / "new-vault.db")),
    ):
        try:
            attempt().close()
        except FileError as exc:
            print(name, "FileError", exc)
        else:
            print(name, "opened")
    """
)


def test_opening_for_writing_on_a_read_only_folder_is_a_file_error(tmp_path: Path) -> None:
    folder = tmp_path / "evidence"
    folder.mkdir()
    _record(folder / "runs.db")
    af.DisclosureVault(folder / "vault.db").close()
    before = _snapshot(folder)
    with _read_only_folder(folder):
        result = _run([sys.executable, "-c", _WRITE_ATTEMPTS, str(folder)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "vault reads 0" in result.stdout
    for name in ("log", "new log", "vault", "new vault"):
        assert f"\n{name} FileError" in "\n" + result.stdout, result.stdout
    assert "open it read-only" in result.stdout
    assert _snapshot(folder) == before
