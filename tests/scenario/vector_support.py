"""What the sealed and the proven vector tests share: the files of a folder by digest (a
vector check must leave them byte-identical) and ``agentfootprint verify`` run as an auditor
runs it, in a fresh process with the entry's keys pinned."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def verify_cli(path: Path, entry: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    keys = [arg for k in entry["keys"] for arg in ("--key", KEYS[k])]
    return subprocess.run(
        [sys.executable, "-c", "from agentfootprint.cli import main; main()", "verify",
         str(path), *keys, *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip


def place(folder: Path, vectors: Path, entry: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """The entry's vector (and its checkpoint note) copied alone into an empty folder."""
    shutil.copyfile(vectors / entry["file"], folder / entry["file"])
    if entry["checkpoint"]:
        shutil.copyfile(vectors / entry["checkpoint"], folder / entry["checkpoint"])
    return folder / entry["file"], entry
