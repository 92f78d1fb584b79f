"""Every vector in tests/vectors through the database verifier, the bundle verifier and the CLI.

``tests/vectors/build.py`` makes the files and ``vectors.json`` says, for each, the failure
codes whole-file verification reports and the exit code of ``agentfootprint verify``. Here
each file is verified as an auditor would: opened read-only (the file stays byte-identical
and nothing is created beside it), every run found from the events, the verdicts compared
with the expected codes; then through the CLI in a subprocess (exit code, no traceback).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentfootprint.errors import FileError, VerificationError
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.verifier import Outcome, Verifier

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
INDEX: list[dict[str, Any]] = orjson.loads((VECTORS / "vectors.json").read_bytes())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verdicts(source: Any) -> tuple[set[str], set[Outcome]]:
    codes: set[str] = set()
    outcomes: set[Outcome] = set()
    for _run_id, verdict in Verifier(source).verify_all():
        if isinstance(verdict, VerificationError):
            codes.add(verdict.code)
        else:
            outcomes.add(verdict.outcome)
    return codes, outcomes


def _open(path: Path, kind: str) -> Any:
    return BundleSource(path) if kind == "bundle" else SqliteStore(path, readonly=True)


@pytest.fixture
def placed(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The vector copied alone into an empty folder, so files created beside it show."""
    name = request.param
    target = tmp_path / name
    shutil.copyfile(VECTORS / name, target)
    return target


def test_the_index_lists_every_file() -> None:
    listed = {entry["file"] for entry in INDEX}
    present = {
        p.name
        for p in VECTORS.iterdir()
        if p.suffix in (".db", ".afp")
        and not p.name.startswith(("sealed-", "checkpoint-", "proven-"))
    }  # the sealed and proven vectors have their own indexes (seals.json, proven.json)
    assert listed == present
    assert {entry["kind"] for entry in INDEX} == {"db", "bundle", "file"}


@pytest.mark.parametrize(
    ("placed", "entry"),
    [(e["file"], e) for e in INDEX],
    indirect=["placed"],
    ids=[e["file"] for e in INDEX],
)
def test_vector_through_the_library(placed: Path, entry: dict[str, Any]) -> None:
    before = _digest(placed)
    if entry["kind"] == "file":
        kind = "bundle" if placed.suffix == ".afp" else "db"
        with pytest.raises(FileError):  # not a log, or a newer version: not judged at all
            _open(placed, kind).close()
    else:
        try:
            source = _open(placed, entry["kind"])
        except VerificationError as exc:  # a bundle refused at opening: its framing
            codes, outcomes = {exc.code}, set()
        else:
            try:
                codes, outcomes = _verdicts(source)
            finally:
                source.close()
        assert sorted(codes) == entry["codes"], entry["about"]
        if entry["exit"] == 0:
            assert outcomes == {Outcome.VALID_UNSIGNED}
        elif entry["exit"] == 3:
            assert Outcome.UNSEALED in outcomes and not codes
    assert _digest(placed) == before
    assert sorted(p.name for p in placed.parent.iterdir()) == [placed.name]


@pytest.mark.parametrize(
    ("placed", "entry"),
    [(e["file"], e) for e in INDEX],
    indirect=["placed"],
    ids=[e["file"] for e in INDEX],
)
def test_vector_through_the_cli(placed: Path, entry: dict[str, Any]) -> None:
    before = _digest(placed)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from agentfootprint.cli import main; main()",
            "verify",
            str(placed),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == entry["exit"], (entry["about"], done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
    for code in entry["codes"]:
        assert code in done.stdout + done.stderr or code == "bundle", (code, done.stdout)
    assert _digest(placed) == before
    assert sorted(p.name for p in placed.parent.iterdir()) == [placed.name]
