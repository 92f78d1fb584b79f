"""Every library opener of an input file takes only a regular file, read under a bound.

A named pipe (FIFO) would block ``open`` for ever, ``/dev/zero`` would never end (a read with
no bound grows until ``MemoryError``). The openers run in a subprocess, with a timeout that
only guards against a hang and an address-space limit that only guards against a read with
no bound: the assertions are on what each opener raised.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentfootprint.errors import FileError
from agentfootprint.local_files import check_regular, kind_of, open_regular, read_bounded

#: each library entry point that opens a file it is handed (the name printed, the call)
OPENERS = {
    "read_bounded": "read_bounded(P, 'the file', 1024)",
    "open_regular": "open_regular(P).close()",
    "check_regular": "check_regular(P)",
    "load_signer": "load_signer(P)",
    "load_public_key": "load_public_key(P)",
    "is_bundle": "is_bundle(P)",
    "BundleSource": "BundleSource(P)",
    "SqliteStore readonly": "SqliteStore(P, readonly=True)",
    "SqliteStore": "SqliteStore(P)",
    "DisclosureVault readonly": "DisclosureVault(P, readonly=True)",
    "DisclosureVault": "DisclosureVault(P)",
    "open_log": "open_log(P)",
    "load_master_key": "load_master_key(P)",
    # an output: checked before anything is planned or written
    "write_bundle out": "write_bundle(MemoryStore(), ['r'], P, library='t')",
}

DRIVER = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a read with no bound fails
    from agentfootprint.local_files import check_regular, open_regular, read_bounded
    from agentfootprint.seal.signer import load_public_key, load_signer
    from agentfootprint.verify.bundle import BundleSource, is_bundle
    from agentfootprint.store.sqlite import SqliteStore
    from agentfootprint.store.vault import DisclosureVault
    from agentfootprint.exchange.transfer import open_log
    from agentfootprint.store.postgres_vault import load_master_key
    from agentfootprint.store.memory import MemoryStore
    from agentfootprint.exchange.bundle_write import write_bundle
    P = sys.argv[1]
    for name, call in json.loads(sys.argv[2]).items():
        try:
            eval(call)
            found = {"name": name, "error": None}
        except BaseException as exc:
            found = {"name": name, "error": type(exc).__name__, "file_error": isinstance(
                exc, __import__("agentfootprint").FileError), "message": str(exc)}
        print(json.dumps(found), flush=True)
    """
)


def _run_openers(path: str) -> dict[str, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, path, json.dumps(OPENERS)],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard only: each call returns at once when it refuses the file
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    return {str(r["name"]): r for r in results}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_every_opener_refuses_a_fifo_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    found = _run_openers(str(fifo))
    assert sorted(found) == sorted(OPENERS)
    for name, result in found.items():
        assert result["file_error"], (name, result)
        assert "named pipe (FIFO)" in str(result["message"]), (name, result)
    assert list(tmp_path.iterdir()) == [fifo]  # nothing created beside it


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_every_opener_refuses_a_device_that_never_ends() -> None:
    found = _run_openers("/dev/zero")
    assert sorted(found) == sorted(OPENERS)
    for name, result in found.items():
        assert result["file_error"], (name, result)
        assert "character device" in str(result["message"]), (name, result)


def test_a_regular_file_is_read_whole_up_to_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_bounded(path, "--thing", 100) == b"x" * 100
    with pytest.raises(FileError, match=r"--thing .*f is 100 bytes, more than a note may be"):
        read_bounded(path, "--thing", 99, noun="note")
    assert check_regular(path).st_size == 100
    with open_regular(path) as handle:
        assert handle.read() == b"x" * 100


def test_a_folder_or_a_missing_file_says_what_it_is(tmp_path: Path) -> None:
    with pytest.raises(FileError, match="is a folder, not a regular file"):
        read_bounded(tmp_path, "--thing", 10)
    with pytest.raises(FileError, match="is a folder, not a regular file"):
        check_regular(tmp_path)
    with pytest.raises(FileError, match="does not exist"):
        read_bounded(tmp_path / "none", "--thing", 10)
    with pytest.raises(FileError, match="does not exist"):
        check_regular(tmp_path / "none")
    with pytest.raises(FileNotFoundError):  # as open() raises: the caller words it
        open_regular(tmp_path / "none")


def test_a_symbolic_link_to_a_regular_file_is_one(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"data")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert read_bounded(link, "--thing", 10) == b"data"


def test_kinds_are_named() -> None:
    import stat

    assert kind_of(stat.S_IFREG) is None
    assert kind_of(stat.S_IFDIR) == "a folder"
    assert kind_of(stat.S_IFIFO) == "a named pipe (FIFO)"
    assert kind_of(stat.S_IFCHR) == "a character device"
    assert kind_of(stat.S_IFBLK) == "a block device"
    assert kind_of(stat.S_IFSOCK) == "a socket"
