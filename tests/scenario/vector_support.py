"""What the sealed and the proven vector tests share: the files of a folder by digest (a
vector check must leave them byte-identical) and ``agentfootprint verify`` run as an auditor
runs it, with the entry's keys pinned: in a fresh process (``fresh=True``, each vector's first
check), or in this one through click's runner for the further flags (the same command, without
a process start per check)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from agentfootprint.cli import main
from agentfootprint.testing.seals import OTHER, SIGNER

#: the keys a vector entry pins, by name, in their text form; the last two prove nothing and
#: are refused wherever they are read (docs/seals.md section 1)
KEYS = {
    "signer": SIGNER.public.text,
    "other": OTHER.public.text,
    "small-order": "ed25519:AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    "non-canonical": "ed25519:7v///////////////////////////////////////38=",
}


def files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def verify_cli(
    path: Path, entry: dict[str, Any], *extra: str, fresh: bool = False
) -> subprocess.CompletedProcess[str]:
    keys = [arg for k in entry["keys"] for arg in ("--key", KEYS[k])]
    args = ["verify", str(path), *keys, *extra]
    if fresh:
        return subprocess.run(
            [sys.executable, "-c", "from agentfootprint.cli import main; main()", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
    result = CliRunner().invoke(main, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback in a real process: the test fails with it
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def place(folder: Path, vectors: Path, entry: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """The entry's vector (and its checkpoint note) copied alone into an empty folder."""
    shutil.copyfile(vectors / entry["file"], folder / entry["file"])
    if entry["checkpoint"]:
        shutil.copyfile(vectors / entry["checkpoint"], folder / entry["checkpoint"])
    return folder / entry["file"], entry
