"""Format v5 (docs/log-format.md section 5.9) taught to the independent verifier from the page:
on the pause vectors (``tests/vectors/pauses``, built by ``build_pauses.py``: paused runs and
their continuations, valid and damaged), it gives every verdict and whole-file finding the
library gives, and the one each vector is about; each file is read and left byte-identical,
and building the vectors again gives the same verdicts."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from typing import Any

import independent_verifier as iv
import orjson
import pytest

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
FOLDER = VECTORS / "pauses"
INDEX: list[dict[str, Any]] = orjson.loads((FOLDER / "pauses.json").read_bytes())

sys.path.insert(0, str(VECTORS))
import build_pauses  # noqa: E402


def test_the_index_lists_every_file_and_case() -> None:
    assert {e["file"] for e in INDEX} == {p.name for p in FOLDER.glob("*.db")}
    assert [e["about"] for e in INDEX] == [about for about, _, _, _ in build_pauses.CASES]


@pytest.mark.parametrize("entry", INDEX, ids=[e["about"] for e in INDEX])
def test_both_verifiers_give_the_vector_its_verdicts(tmp_path: Path, entry: dict[str, Any]) -> None:
    placed = tmp_path / entry["file"]
    shutil.copyfile(FOLDER / entry["file"], placed)
    before = hashlib.sha256(placed.read_bytes()).hexdigest()
    ours = build_pauses.verdicts(placed)
    theirs = sorted(([run, code, seq] for run, code, seq in iv.verify_file(placed)), key=str)
    assert ours == theirs == entry["verdicts"], iv.explain_file(placed)
    assert [entry["run"], entry["code"], entry["seq"]] in ours
    assert hashlib.sha256(placed.read_bytes()).hexdigest() == before
    assert [p.name for p in tmp_path.iterdir()] == [entry["file"]]


def test_built_again_the_vectors_give_the_same_verdicts(tmp_path: Path) -> None:
    rebuilt = {e.file: e for e in build_pauses.build(tmp_path)}
    for entry in INDEX:
        again = rebuilt[entry["file"]]
        assert (again.code, again.seq, again.verdicts) == (
            entry["code"],
            entry["seq"],
            entry["verdicts"],
        )
