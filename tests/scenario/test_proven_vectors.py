"""Every inclusion-proof bundle vector of tests/vectors (``proven.json``, made by
``build_proven.py``) through the library and the CLI, as an auditor runs them: the file left
byte-identical, the keys pinned as the entry says, the failure codes, the outcomes, the exit
codes plain, with ``--require-signature`` and with ``--require-inclusion``, and the verdict
against a checkpoint kept elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from vector_support import KEYS, files, place, verify_cli

import agentfootprint as af
from agentfootprint.testing.seals import SIGNER
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.checkpoint import same_tree

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
INDEX: list[dict[str, Any]] = orjson.loads((VECTORS / "proven.json").read_bytes())
ENTRIES = [pytest.param(e, id=e["file"]) for e in INDEX]


@pytest.fixture
def placed(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, dict[str, Any]]:
    return place(tmp_path, VECTORS, request.param)


def test_the_index_lists_every_proven_file() -> None:
    listed = {e["file"] for e in INDEX} | {e["checkpoint"] for e in INDEX if e["checkpoint"]}
    assert listed == {p.name for p in VECTORS.glob("proven-*")}
    assert len(INDEX) >= 16


def test_the_vectors_rebuild_byte_for_byte(tmp_path: Path) -> None:
    """Ed25519 and the export are deterministic: the committed files are what the builder
    makes from the committed base."""
    sys.path.insert(0, str(VECTORS))
    try:
        import build_proven  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(VECTORS))
    build_proven.build(tmp_path)
    for path in tmp_path.iterdir():
        assert path.read_bytes() == (VECTORS / path.name).read_bytes(), path.name


@pytest.mark.parametrize("placed", ENTRIES, indirect=True)
def test_proven_vector_through_the_library(placed: tuple[Path, dict[str, Any]]) -> None:
    path, entry = placed
    before = files(path.parent)
    keys = [KEYS[k] for k in entry["keys"]]
    with BundleSource(path) as source:
        results = list(af.Verifier(source, trusted_keys=keys).verify_all())
        codes = sorted({r.code for _, r in results if isinstance(r, af.VerificationError)})
        verified = [r for _, r in results if isinstance(r, af.RunVerification)]
        assert codes == entry["codes"], entry["about"]
        assert sorted({r.outcome.value for r in verified}) == sorted(entry["outcomes"])
        for result in verified:  # every run that verifies is a proven leaf of the tree
            assert result.inclusion is not None and result.inclusion.size == 3
        if entry["checkpoint"]:
            note = (path.parent / entry["checkpoint"]).read_bytes()
            try:
                same_tree(source, note, [SIGNER.public])
                verdict = ""
            except af.VerificationError as exc:
                verdict = exc.code
            assert verdict == entry["checkpoint_code"], entry["about"]
    assert files(path.parent) == before


@pytest.mark.parametrize("placed", ENTRIES, indirect=True)
def test_proven_vector_through_the_cli(placed: tuple[Path, dict[str, Any]]) -> None:
    path, entry = placed
    before = files(path.parent)
    done = verify_cli(path, entry, fresh=True)
    assert done.returncode == entry["exit"], (entry["about"], done.stdout, done.stderr)
    required = verify_cli(path, entry, "--require-signature")
    assert required.returncode == entry["exit_required"], (entry["about"], required.stdout)
    included = verify_cli(path, entry, "--require-inclusion")
    assert included.returncode == entry["exit_inclusion"], (entry["about"], included.stdout)
    for code in entry["codes"]:
        assert f"[{code}]" in done.stdout, (code, done.stdout)
    if not entry["codes"]:
        assert done.stdout.count("of 3 in checkpoint example.com/proven-vectors") == 3
    if entry["checkpoint"]:
        note = str(path.parent / entry["checkpoint"])
        kept = verify_cli(path, entry, "--key", SIGNER.public.text, "--checkpoint", note)
        if entry["checkpoint_code"]:
            assert kept.returncode == 1 and f"[{entry['checkpoint_code']}]" in kept.stdout
        else:
            assert kept.returncode == 0 and "CONSISTENT" in kept.stdout, kept.stdout
    for out in (done, required, included):
        assert "Traceback" not in out.stdout + out.stderr
    assert files(path.parent) == before
