"""Every sealed-run and checkpoint vector of tests/vectors (``seals.json``, made by
``build_seals.py``) through the library and the CLI, as an auditor runs them: the file opened
read-only and left byte-identical, the keys pinned as the entry says, the failure codes, the
outcomes, the exit codes with and without ``--require-signature``, ``--json`` listing each run
once, the run an entry names verified alone (``--run``), a pinned key that proves nothing
refused (exit 2), and the checkpoint's verdict. Then the Wycheproof invalid signature classes
inside a seal envelope."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest
from vector_support import KEYS, files, place, verify_cli

import agentfootprint as af
from agentfootprint.errors import KeyFileError, SealError
from agentfootprint.seal import parse_envelope, verify_envelope
from agentfootprint.seal.statement import PAYLOAD_TYPE
from agentfootprint.testing.seals import SIGNER, signature_variants
from agentfootprint.verify.checkpoint import check_checkpoint, leaves_of

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
INDEX: list[dict[str, Any]] = orjson.loads((VECTORS / "seals.json").read_bytes())


@pytest.fixture
def placed(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, dict[str, Any]]:
    """The vector (and its checkpoint note) copied alone into an empty folder."""
    return place(tmp_path, VECTORS, request.param)


def test_the_index_lists_every_sealed_file() -> None:
    listed = {e["file"] for e in INDEX} | {e["checkpoint"] for e in INDEX if e["checkpoint"]}
    present = {p.name for p in VECTORS.iterdir() if p.name.startswith(("sealed-", "checkpoint-"))}
    assert listed == present
    assert len(INDEX) >= 24


ENTRIES = [pytest.param(e, id=e["file"]) for e in INDEX]


@pytest.mark.parametrize("placed", ENTRIES, indirect=True)
def test_sealed_vector_through_the_library(placed: tuple[Path, dict[str, Any]]) -> None:
    path, entry = placed
    before = files(path.parent)
    store = af.SqliteStore(path, readonly=True)
    try:
        keys = [KEYS[k] for k in entry["keys"]]
        if entry["refused"]:  # a key that proves nothing: refused before anything is judged
            with pytest.raises(KeyFileError, match=entry["refused"]) as info:
                af.Verifier(store, trusted_keys=keys)
            assert "pin the signer's real key" in str(info.value)
            return
        if entry["run"]:
            try:
                alone = af.Verifier(store, trusted_keys=keys).verify(entry["run"])
                verdict = alone.outcome.value
            except af.VerificationError as exc:
                verdict = exc.code
            assert verdict == entry["run_code"], entry["about"]
        results = list(af.Verifier(store, trusted_keys=keys).verify_all())
        codes = sorted({r.code for _, r in results if isinstance(r, af.VerificationError)})
        outcomes = sorted(
            {r.outcome.value for _, r in results if isinstance(r, af.RunVerification)}
        )
        assert codes == entry["codes"], entry["about"]
        assert outcomes == sorted(entry["outcomes"]), entry["about"]
        if entry["checkpoint"]:
            note = (path.parent / entry["checkpoint"]).read_bytes()
            try:
                check_checkpoint(note, [SIGNER.public], leaves_of(store, results))
                verdict = ""
            except af.VerificationError as exc:
                verdict = exc.code
            assert verdict == entry["checkpoint_code"], entry["about"]
    finally:
        store.close()
    assert files(path.parent) == before


@pytest.mark.parametrize("placed", ENTRIES, indirect=True)
def test_sealed_vector_through_the_cli(placed: tuple[Path, dict[str, Any]]) -> None:
    path, entry = placed
    before = files(path.parent)
    done = verify_cli(path, entry, fresh=True)
    assert done.returncode == entry["exit"], (entry["about"], done.stdout, done.stderr)
    required = verify_cli(path, entry, "--require-signature")
    assert required.returncode == entry["exit_required"], (entry["about"], required.stdout)
    for code in entry["codes"]:
        assert f"[{code}]" in done.stdout, (code, done.stdout)
    if entry["refused"]:
        pinned = [KEYS[k] for k in entry["keys"]]
        assert all(key in done.stderr for key in pinned), done.stderr
        assert entry["refused"] in done.stderr and not done.stdout, done.stderr
    else:
        document = orjson.loads(verify_cli(path, entry, "--json").stdout)
        listed = [verdict["run_id"] for verdict in document["runs"]]
        assert len(listed) == len(set(listed)) == 3, listed  # each run once, no finding
        assert document["exit"] == entry["exit"]
    if entry["run"]:
        alone = verify_cli(path, entry, "--run", entry["run"])
        assert alone.returncode == entry["run_exit"], (entry["about"], alone.stdout)
        assert f"[{entry['run_code']}]" in alone.stdout or entry["run_code"] in alone.stdout
    if entry["checkpoint"]:
        note = str(path.parent / entry["checkpoint"])
        with_note = verify_cli(path, entry, "--key", SIGNER.public.text, "--checkpoint", note)
        if entry["checkpoint_code"]:
            assert with_note.returncode == 1
            assert f"[{entry['checkpoint_code']}]" in with_note.stdout, with_note.stdout
        else:
            assert with_note.returncode == entry["exit"] and "CONSISTENT" in with_note.stdout
    for out in (done, required):
        assert "Traceback" not in out.stdout + out.stderr
    assert files(path.parent) == before


@pytest.mark.parametrize("variant", list(signature_variants(bytes(64))))
def test_wycheproof_classes_in_a_seal_envelope(variant: str) -> None:
    store = af.SqliteStore(VECTORS / "sealed-valid.db", readonly=True)
    try:
        run_id = store.seal_log()[0][1]
        rows = list(store.read(str(run_id)))
    finally:
        store.close()
    envelope = orjson.loads(orjson.loads(rows[-1].body)["dsse"])
    assert verify_envelope(orjson.dumps(envelope), [SIGNER.public], payload_type=PAYLOAD_TYPE)
    sig = base64.b64decode(envelope["signatures"][0]["sig"])
    envelope["signatures"][0]["sig"] = base64.b64encode(signature_variants(sig)[variant]).decode()
    with pytest.raises(SealError) as info:
        verify_envelope(orjson.dumps(envelope), [SIGNER.public], payload_type=PAYLOAD_TYPE)
    assert info.value.code == "bad-signature"
    assert parse_envelope(orjson.dumps(envelope)).signatures[0].keyid == SIGNER.key_id
