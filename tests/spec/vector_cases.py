"""What every folder of built vectors is checked for (the pause and provenance cases): both
verifiers give a vector its recorded verdicts, the file left byte-identical and alone in its
folder; building the vectors again gives the same verdicts."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import independent_verifier as iv


def assert_both_verifiers_give(
    entry: dict[str, Any], folder: Path, tmp_path: Path, verdicts: Callable[[Path], Any]
) -> None:
    """The library (``verdicts``, a builder's) and the independent verifier give ``entry``'s
    file its recorded verdicts, the one it is about among them, and leave it unchanged."""
    placed = tmp_path / entry["file"]
    shutil.copyfile(folder / entry["file"], placed)
    before = hashlib.sha256(placed.read_bytes()).hexdigest()
    ours = verdicts(placed)
    theirs = sorted(([run, code, seq] for run, code, seq in iv.verify_file(placed)), key=str)
    assert ours == theirs == entry["verdicts"], iv.explain_file(placed)
    assert [entry["run"], entry["code"], entry["seq"]] in ours
    assert hashlib.sha256(placed.read_bytes()).hexdigest() == before
    assert [p.name for p in tmp_path.iterdir()] == [entry["file"]]


def assert_built_again_the_same(index: Iterable[dict[str, Any]], rebuilt: Iterable[Any]) -> None:
    """Vectors built again (``build(folder)``'s entries) give the index's verdicts."""
    by_file = {e.file: e for e in rebuilt}
    for entry in index:
        again = by_file[entry["file"]]
        assert (again.code, again.seq, again.verdicts) == (
            entry["code"],
            entry["seq"],
            entry["verdicts"],
        )
