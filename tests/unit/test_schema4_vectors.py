"""The storage-schema-4 vectors (tests/vectors/schema4, built by build_schema4.py) through the
verifier, as an auditor runs them: the file opened read-only and left byte-identical, nothing
created beside it, the damaged run failing with the code and at the seq the index names (a
record that does not decode: **rows**; a changed record, name, template or head: **chain** at
the seq of its append's last row), and whole-file verification reporting the index's codes."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
FOLDER = VECTORS / "schema4"
INDEX: list[dict[str, Any]] = orjson.loads((FOLDER / "schema4.json").read_bytes())

sys.path.insert(0, str(VECTORS))
import build_schema4  # noqa: E402


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_index_lists_every_file() -> None:
    assert {e["file"] for e in INDEX} == {p.name for p in FOLDER.glob("*.db")}
    assert {e["file"] for e in INDEX} == {f"{name}.db" for name, _, _ in build_schema4.VECTORS}


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_vector_gives_its_code_at_its_seq(tmp_path: Path, entry: dict[str, Any]) -> None:
    placed = tmp_path / entry["file"]
    shutil.copyfile(FOLDER / entry["file"], placed)
    before = _digest(placed)
    code, seq, codes = build_schema4.verdicts(placed, entry["run"])
    assert (code, seq, codes) == (entry["code"], entry["seq"], entry["codes"])
    assert _digest(placed) == before
    assert [p.name for p in tmp_path.iterdir()] == [entry["file"]]


def test_the_damage_still_gives_the_indexed_verdicts(tmp_path: Path) -> None:
    """Built again from a new recording, each vector fails the same way (the seqs depend
    only on what the scripted runs record, which is the same every time)."""
    rebuilt = {e.file: e for e in build_schema4.build(tmp_path)}
    for entry in INDEX:
        again = rebuilt[entry["file"]]
        assert (again.code, again.seq, again.codes) == (entry["code"], entry["seq"], entry["codes"])
