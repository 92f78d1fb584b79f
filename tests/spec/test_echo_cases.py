"""Echo redaction (docs/log-format.md section 12.8) taught to the independent verifier from
the page: on the echo vectors (``tests/vectors/echoes``, built by ``build_echoes.py``: real
runs whose model quotes a committed address, some with the quotation's commitment undone by
hand), proving the disclosures gives what the library gives, and what the index says; each
file is read and left byte-identical, and building the vectors again gives the same results."""

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
FOLDER = VECTORS / "echoes"
INDEX: list[dict[str, Any]] = orjson.loads((FOLDER / "echoes.json").read_bytes())

sys.path.insert(0, str(VECTORS))
import build_echoes  # noqa: E402


def test_the_index_lists_every_file_and_case() -> None:
    assert {e["file"] for e in INDEX} == {p.name for p in FOLDER.glob("*.db")}
    assert [e["about"] for e in INDEX] == [about for about, _ in build_echoes.CASES]
    assert {e["result"][0] for e in INDEX if e["result"]} == {"leak", "disclosure"}


@pytest.mark.parametrize("entry", INDEX, ids=[e["about"] for e in INDEX])
def test_both_verifiers_prove_the_vector_alike(tmp_path: Path, entry: dict[str, Any]) -> None:
    placed = tmp_path / entry["file"]
    shutil.copyfile(FOLDER / entry["file"], placed)
    before = hashlib.sha256(placed.read_bytes()).hexdigest()
    assert all(code in ("VALID_UNSIGNED",) for _run, code, _seq in iv.verify_file(placed))
    disclosures = orjson.loads((FOLDER / entry["disclosures"]).read_bytes())["disclosures"]
    theirs = iv.prove_disclosures(placed, disclosures)
    ours = build_echoes.proven(placed, FOLDER / entry["disclosures"])
    assert ours == entry["result"]
    assert (None if theirs is None else list(theirs)) == entry["result"]
    assert hashlib.sha256(placed.read_bytes()).hexdigest() == before
    assert [p.name for p in tmp_path.iterdir()] == [entry["file"]]


def test_built_again_the_vectors_give_the_same_results(tmp_path: Path) -> None:
    for entry in build_echoes.build(tmp_path):
        assert build_echoes.proven(tmp_path / entry.file, tmp_path / entry.disclosures) == (
            entry.result
        )
        recorded = next(e for e in INDEX if e["file"] == entry.file)
        assert entry.result == recorded["result"]
