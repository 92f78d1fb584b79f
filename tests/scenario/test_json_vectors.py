"""The ``verify --json`` vectors of tests/vectors (``json.json``, kept by hand: each names a
vector file of the other indexes): ``agentfootprint verify FILE --json`` prints exactly one
JSON object on stdout with the members docs/log-format.md section 9.6 gives, for a bundle
whose framing fails as much as for runs (``error``: its code, run, seq and reason), its
``exit`` the process's, and each run listed once. The independent verifier reads the same
entries (tests/spec/test_independent_verifier.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from vector_support import files, verify_cli

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
INDEX: list[dict[str, Any]] = orjson.loads((VECTORS / "json.json").read_bytes())


def test_every_entry_names_a_vector() -> None:
    assert all((VECTORS / e["file"]).is_file() for e in INDEX)
    assert any(e["file"].endswith(".afp") and e["code"] == "bundle" for e in INDEX)


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_json_vector_through_the_cli(entry: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / entry["file"]
    path.write_bytes((VECTORS / entry["file"]).read_bytes())
    before = files(tmp_path)
    done = verify_cli(path, {**entry, "checkpoint": ""}, "--json")
    document = orjson.loads(done.stdout)  # exactly one JSON text, nothing else on stdout
    assert isinstance(document, dict), done.stdout
    assert sorted(document) == entry["members"], document
    assert document["exit"] == done.returncode == entry["exit"], done.stderr
    if entry["error"]:
        assert sorted(document["error"]) == entry["error"]
        assert document["error"]["code"] == entry["code"] and document["runs"] == []
    else:
        listed = [verdict["run_id"] for verdict in document["runs"]]
        assert len(listed) == len(set(listed)), listed
        codes = {v["error"]["code"] for v in document["runs"] if v["outcome"] == "INVALID"}
        assert codes == {entry["code"]}
    assert "Traceback" not in done.stdout + done.stderr
    assert files(tmp_path) == before
