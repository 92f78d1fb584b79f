"""Inclusion proofs in export bundles (issue 14; docs/log-format.md section 13.4): a bundle of
version 2 carries a signed checkpoint of its database's log of sealed runs and each sealed
run's proof under it, so an auditor holding only the bundle proves the runs were in the log,
as the bundle holds them, when the checkpoint was signed.

The attacks are a holder's: a proof or a leaf index edited (the trailer recomputed, as anyone
can), a proof removed or put on a run without a seal, the checkpoint swapped, and a run
rewritten and re-sealed with the very signing key, which a fresh checkpoint would cover but
the checkpoint the auditor kept does not.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main as cli
from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.exchange.transfer import export_runs
from agentfootprint.seal import generate_key_file
from agentfootprint.seal.merkle import inclusion_proofs, leaf_hash, root
from agentfootprint.seal.note import Checkpoint
from agentfootprint.testing.seals import OTHER, SIGNER
from agentfootprint.testing.tamper import resealed
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.checkpoint import checkpoint_of, log_leaves, sign_checkpoint_with

ORIGIN = "example.com/audit-log"


def record(path: Path, count: int, signer: Any = SIGNER, *, first: int = 0) -> list[str]:
    with af.Agent(
        provider=af.MockProvider([f"answer {i}" for i in range(first, first + count)]),
        model="m",
        store=path,
        signer=signer,
    ) as agent:
        return [agent.run_sync(f"question {i}").run_id for i in range(first, first + count)]


def export(path: Path, run_ids: list[str], out: Path, **kwargs: Any) -> dict[str, Any]:
    store = af.SqliteStore(path, readonly=True)
    try:
        return export_runs(store, run_ids, out, **kwargs)
    finally:
        store.close()


def verdicts(bundle: Path, keys: tuple[Any, ...] = (SIGNER.public,)) -> dict[str, Any]:
    """``{run: (outcome, inclusion) or code}`` of whole-file verification."""
    with BundleSource(bundle) as source:
        found: dict[str, Any] = {}
        for run_id, result in af.Verifier(source, trusted_keys=keys).verify_all():
            found[run_id] = (
                result.code
                if isinstance(result, VerificationError)
                else (result.outcome.value, result.inclusion)
            )
        return found


def edited(bundle: Path, out: Path, change: Any) -> Path:
    """The bundle with ``change(manifest)`` applied and its trailer recomputed (a forger's
    edit, not damage)."""
    lines = bundle.read_bytes().rstrip(b"\n").split(b"\n")
    manifest = orjson.loads(lines[0])
    change(manifest)
    body = orjson.dumps(manifest) + b"\n" + b"".join(line + b"\n" for line in lines[1:-1])
    trailer = {"end": True, "events": len(lines) - 2, "sha256": hashlib.sha256(body).hexdigest()}
    out.write_bytes(body + orjson.dumps(trailer) + b"\n")
    return out


def entry(manifest: dict[str, Any], run_id: str) -> dict[str, Any]:
    return next(item for item in manifest["runs"] if item["run_id"] == run_id)


@pytest.fixture
def sealed_log(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "runs.db"
    return path, record(path, 5)


def test_a_bundle_proves_its_sealed_runs_are_leaves_of_a_signed_checkpoint(
    sealed_log: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, ids = sealed_log
    out = tmp_path / "runs.afp"
    manifest = export(path, [ids[1], ids[3]], out, signer=SIGNER, origin=ORIGIN)
    assert out.read_bytes().startswith(b'{"agentfootprint_bundle":2,')
    assert [entry(manifest, run_id)["inclusion"]["leaf"] for run_id in (ids[1], ids[3])] == [1, 3]
    store = af.SqliteStore(path, readonly=True)
    leaves = log_leaves(af.Verifier(store))
    store.close()
    found = verdicts(out)
    for index in (1, 3):
        outcome, inclusion = found[ids[index]]
        assert outcome == "VALID"
        assert (inclusion.leaf, inclusion.size, inclusion.origin) == (index, 5, ORIGIN)
        assert inclusion.root == root(leaves) and inclusion.signed_by == (SIGNER.key_id,)
    unpinned = verdicts(out, keys=())
    assert {run: (v[0], v[1].signed_by) for run, v in unpinned.items()} == {
        ids[1]: ("VALID_UNSIGNED", ()),
        ids[3]: ("VALID_UNSIGNED", ()),
    }


def test_without_a_checkpoint_the_bundle_stays_version_1(
    sealed_log: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, ids = sealed_log
    out = tmp_path / "plain.afp"
    manifest = export(path, [ids[0]], out)
    assert out.read_bytes().startswith(b'{"agentfootprint_bundle":1,')
    assert "checkpoint" not in manifest and "inclusion" not in manifest["runs"][0]
    assert verdicts(out) == {ids[0]: ("VALID", None)}


def test_an_unsealed_run_gets_no_proof_and_a_continued_run_carries_its_parents(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mixed.db"
    plain = record(path, 1, signer=None)[0]
    with af.Agent(
        provider=af.MockProvider(["one", "two"]), model="m", store=path, signer=SIGNER
    ) as agent:
        parent = agent.run_sync("first")
        child = agent.run_sync("second", continue_from=parent.run_id)
    out = tmp_path / "mixed.afp"
    manifest = export(path, [plain, child.run_id], out, signer=SIGNER, origin=ORIGIN)
    assert entry(manifest, plain)["inclusion"] is None
    assert [entry(manifest, r)["inclusion"]["leaf"] for r in (parent.run_id, child.run_id)] == [
        0,
        1,
    ]
    found = verdicts(out)
    assert found[plain] == ("VALID_UNSIGNED", None)
    assert found[parent.run_id][1].leaf == 0 and found[child.run_id][1].leaf == 1


def _flip_proof(run_id: str) -> Any:
    def change(manifest: dict[str, Any]) -> None:
        proof = entry(manifest, run_id)["inclusion"]["proof"]
        proof[0] = ("1" if proof[0][0] == "0" else "0") + proof[0][1:]

    return change


def _move_leaf(run_id: str) -> Any:
    def change(manifest: dict[str, Any]) -> None:
        entry(manifest, run_id)["inclusion"]["leaf"] ^= 1

    return change


def _drop_hash(run_id: str) -> Any:
    def change(manifest: dict[str, Any]) -> None:
        entry(manifest, run_id)["inclusion"]["proof"].pop()

    return change


def _no_proof(run_id: str) -> Any:
    def change(manifest: dict[str, Any]) -> None:
        entry(manifest, run_id)["inclusion"] = None

    return change


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (_flip_proof, "merkle/inclusion"),
        (_move_leaf, "merkle/inclusion"),
        (_drop_hash, "merkle/inclusion"),
        (_no_proof, "inclusion"),
    ],
)
def test_an_edited_proof_is_invalid_whatever_the_keys(
    sealed_log: tuple[Path, list[str]], tmp_path: Path, change: Any, code: str
) -> None:
    path, ids = sealed_log
    out = tmp_path / "runs.afp"
    export(path, [ids[2], ids[4]], out, signer=SIGNER, origin=ORIGIN)
    forged = edited(out, tmp_path / "forged.afp", change(ids[2]))
    for keys in ((SIGNER.public,), ()):
        found = verdicts(forged, keys)
        assert found[ids[2]] == code
        assert found[ids[4]][0] in {"VALID", "VALID_UNSIGNED"}  # the other run stands


def test_a_proof_on_a_run_without_a_seal_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "mixed.db"
    plain = record(path, 1, signer=None)[0]
    sealed = record(path, 1, first=1)[0]
    out = tmp_path / "mixed.afp"
    export(path, [plain, sealed], out, signer=SIGNER, origin=ORIGIN)

    def borrow(manifest: dict[str, Any]) -> None:
        entry(manifest, plain)["inclusion"] = entry(manifest, sealed)["inclusion"]

    assert verdicts(edited(out, tmp_path / "forged.afp", borrow))[plain] == "inclusion"


def test_a_child_of_a_run_whose_proof_fails_fails_ancestry(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with af.Agent(
        provider=af.MockProvider(["one", "two"]), model="m", store=path, signer=SIGNER
    ) as agent:
        parent = agent.run_sync("first")
        child = agent.run_sync("second", continue_from=parent.run_id)
    out = tmp_path / "chat.afp"
    export(path, [child.run_id], out, signer=SIGNER, origin=ORIGIN)
    found = verdicts(edited(out, tmp_path / "forged.afp", _flip_proof(parent.run_id)))
    assert found == {parent.run_id: "merkle/inclusion", child.run_id: "ancestry"}


def test_a_checkpoint_signed_by_no_pinned_key_leaves_the_inclusion_unproven(
    sealed_log: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, ids = sealed_log
    out = tmp_path / "runs.afp"
    export(path, [ids[0]], out, signer=OTHER, origin=ORIGIN)  # seals by SIGNER, log by OTHER
    outcome, inclusion = verdicts(out)[ids[0]]
    assert outcome == "VALID" and inclusion.signed_by == ()
    _, both = verdicts(out, keys=(SIGNER.public, OTHER.public))[ids[0]]
    assert both.signed_by == (OTHER.key_id,)


def test_a_swapped_or_broken_checkpoint_fails_the_runs_that_rely_on_it(
    sealed_log: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, ids = sealed_log
    out = tmp_path / "runs.afp"
    export(path, [ids[1]], out, signer=SIGNER, origin=ORIGIN)
    store = af.SqliteStore(path, readonly=True)
    leaves = log_leaves(af.Verifier(store))
    store.close()
    smaller = checkpoint_of(leaves[:4], SIGNER, ORIGIN).decode()

    def swap(manifest: dict[str, Any]) -> None:
        manifest["checkpoint"] = smaller

    def garble(manifest: dict[str, Any]) -> None:
        manifest["checkpoint"] = manifest["checkpoint"].replace("\n\n", "\n")

    def bad_signature(manifest: dict[str, Any]) -> None:
        text, _, signature = manifest["checkpoint"].rpartition(" ")
        flipped = ("A" if signature[10] != "A" else "B").join((signature[:10], signature[11:]))
        manifest["checkpoint"] = f"{text} {flipped}"

    assert verdicts(edited(out, tmp_path / "a.afp", swap))[ids[1]] == "merkle/inclusion"
    assert verdicts(edited(out, tmp_path / "b.afp", garble))[ids[1]] == "note/malformed"
    assert verdicts(edited(out, tmp_path / "c.afp", bad_signature))[ids[1]] == "note/signature"
    # unpinned, a signature cannot be judged: the proof under the note's root still is
    assert verdicts(edited(out, tmp_path / "d.afp", bad_signature), keys=())[ids[1]][0] == (
        "VALID_UNSIGNED"
    )


def test_export_under_a_checkpoint_kept_earlier(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    early = record(path, 3)
    store = af.SqliteStore(path, readonly=True)
    kept = checkpoint_of(log_leaves(af.Verifier(store)), SIGNER, ORIGIN)
    store.close()
    late = record(path, 2, first=3)
    out = tmp_path / "early.afp"
    manifest = export(path, [early[2]], out, checkpoint=kept)
    assert manifest["checkpoint"] == kept.decode()
    assert verdicts(out)[early[2]][1].size == 3
    with pytest.raises(UsageError, match="sealed after the checkpoint"):
        export(path, [late[0]], tmp_path / "late.afp", checkpoint=kept)
    assert not (tmp_path / "late.afp").exists() and not (tmp_path / "late.afp.partial").exists()
    other = tmp_path / "other.db"
    record(other, 3, first=10)
    with pytest.raises(VerificationError, match="does not hold the checkpoint's tree") as caught:
        export(other, [record(other, 1, first=20)[0]], tmp_path / "x.afp", checkpoint=kept)
    assert caught.value.code == "checkpoint"


def test_export_refuses_what_it_cannot_prove(
    sealed_log: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, ids = sealed_log
    out = tmp_path / "x.afp"
    plain_db = tmp_path / "plain.db"
    plain = record(plain_db, 1, signer=None)
    with pytest.raises(UsageError, match="none of the runs to export is sealed"):
        export(plain_db, plain, out, signer=SIGNER, origin=ORIGIN)
    with pytest.raises(UsageError, match="not both"):
        export(path, ids[:1], out, signer=SIGNER, origin=ORIGIN, checkpoint=b"x")
    with pytest.raises(UsageError, match="origin names the checkpoint"):
        export(path, ids[:1], out, origin=ORIGIN)
    with pytest.raises(UsageError, match="needs origin"):
        export(path, ids[:1], out, signer=SIGNER)
    with pytest.raises(UsageError, match="note's bytes"):
        export(path, ids[:1], out, checkpoint="text")  # type: ignore[arg-type]
    with pytest.raises(VerificationError) as caught:
        export(path, ids[:1], out, checkpoint=b"not a note")
    assert caught.value.code == "note/malformed"
    assert not out.exists()


def test_the_key_holder_rewrites_a_run_but_the_kept_checkpoint_shows_it(tmp_path: Path) -> None:
    """A holder of the signing key can rewrite a sealed run, re-seal it and sign a fresh
    checkpoint that covers the rewrite; the checkpoint the auditor kept from before does not."""
    path = tmp_path / "runs.db"
    ids = record(path, 3)
    store = af.SqliteStore(path, readonly=True)
    kept = checkpoint_of(log_leaves(af.Verifier(store)), SIGNER, ORIGIN)
    store.close()
    honest = tmp_path / "honest.afp"
    export(path, [ids[1]], honest, checkpoint=kept)
    forged_db = tmp_path / "forged.db"
    shutil.copy(path, forged_db)
    resealed(forged_db, ids[1], SIGNER)
    forged = tmp_path / "forged.afp"
    export(forged_db, [ids[1]], forged, signer=SIGNER, origin=ORIGIN)
    assert verdicts(forged)[ids[1]][0] == "VALID"  # seal and fresh checkpoint: all VALID
    assert verdicts(forged)[ids[1]][1].signed_by == (SIGNER.key_id,)
    with pytest.raises(VerificationError, match="does not hold the checkpoint's tree"):
        export(forged_db, [ids[1]], tmp_path / "x.afp", checkpoint=kept)
    note = tmp_path / "kept.checkpoint"
    note.write_bytes(kept)
    runner = CliRunner()
    ok = runner.invoke(
        cli, ["verify", str(honest), "--key", SIGNER.public.text, "--checkpoint", str(note)]
    )
    assert ok.exit_code == 0, ok.output
    assert "CONSISTENT" in ok.output and "inclusion proofs are under its tree" in ok.output
    bad = runner.invoke(
        cli, ["verify", str(forged), "--key", SIGNER.public.text, "--checkpoint", str(note)]
    )
    assert bad.exit_code == 1 and "[checkpoint]" in bad.output, bad.output
    assert "another root" in bad.output and "fork" in bad.output


def test_a_bundle_checkpoint_of_the_same_size_and_another_root_is_a_fork(
    sealed_log: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, ids = sealed_log
    out = tmp_path / "runs.afp"
    export(path, [ids[0]], out, signer=SIGNER, origin=ORIGIN)
    fork = sign_checkpoint_with(Checkpoint(ORIGIN, 5, leaf_hash(b"other")), SIGNER)
    note = tmp_path / "fork.checkpoint"
    note.write_bytes(fork)
    done = CliRunner().invoke(
        cli, ["verify", str(out), "--key", SIGNER.public.text, "--checkpoint", str(note)]
    )
    assert done.exit_code == 1 and "fork" in done.output, done.output
    v1 = tmp_path / "plain.afp"
    export(path, [ids[0]], v1)
    none = CliRunner().invoke(
        cli, ["verify", str(v1), "--key", SIGNER.public.text, "--checkpoint", str(note)]
    )
    assert none.exit_code == 1 and "carries no checkpoint" in none.output, none.output


def test_the_export_and_verify_commands(sealed_log: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, ids = sealed_log
    key = tmp_path / "log.key"
    generate_key_file(key)
    public = af.seal.load_signer(key).public.text
    out = tmp_path / "runs.afp"
    runner = CliRunner()
    done = runner.invoke(
        cli, ["export", str(path), "--run", ids[3], "--out", str(out), "--key", str(key)]
    )
    assert done.exit_code == 0, done.output
    assert done.output.strip().endswith(
        "with the inclusion proofs of 1 sealed runs under its checkpoint"
    )
    seal_key = SIGNER.public.text
    full = runner.invoke(cli, ["verify", str(out), "--key", seal_key, "--key", public])
    assert full.exit_code == 0 and full.output.startswith("VALID "), full.output
    assert "leaf 3 of 5 in checkpoint agentfootprint/runs, signed by pinned key" in full.output
    strict = ["verify", str(out), "--key", seal_key, "--require-inclusion"]
    unproven = runner.invoke(cli, strict)
    assert unproven.exit_code == 1 and "inclusion unproven" in unproven.output
    proven = runner.invoke(cli, [*strict, "--key", public])
    assert proven.exit_code == 0, proven.output
    document = orjson.loads(runner.invoke(cli, ["verify", str(out), "--json"]).output)
    inclusion = document["runs"][0]["inclusion"]
    assert (inclusion["leaf"], inclusion["size"], inclusion["signed_by"]) == (3, 5, [])
    assert inclusion["origin"] == "agentfootprint/runs" and len(inclusion["root"]) == 64
    plain = tmp_path / "plain.afp"
    assert (
        runner.invoke(cli, ["export", str(path), "--run", ids[0], "--out", str(plain)]).exit_code
        == 0
    )
    refused = runner.invoke(cli, ["verify", str(plain), "--key", seal_key, "--require-inclusion"])
    assert refused.exit_code == 1
    both = runner.invoke(
        cli,
        [
            "export",
            str(path),
            "--run",
            ids[0],
            "--out",
            str(tmp_path / "b.afp"),
            "--key",
            str(key),
            "--checkpoint",
            str(key),
        ],
    )
    assert both.exit_code == 2 and "not both" in both.output and "Traceback" not in both.output
    origin_alone = runner.invoke(
        cli,
        ["export", str(path), "--run", ids[0], "--out", str(tmp_path / "c.afp"), "--origin", "x"],
    )
    assert origin_alone.exit_code == 2 and "--origin" in origin_alone.output


def test_an_imported_v2_bundle_gets_leaves_of_the_importing_log(
    sealed_log: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, ids = sealed_log
    out = tmp_path / "runs.afp"
    export(path, [ids[4]], out, signer=SIGNER, origin=ORIGIN)
    target = tmp_path / "imported.db"
    done = CliRunner().invoke(cli, ["import", str(out), str(target)])
    assert done.exit_code == 0, done.output
    store = af.SqliteStore(target, readonly=True)
    try:
        assert store.seal_log() == [(0, ids[4])]
        (result,) = [r for _, r in af.Verifier(store, trusted_keys=[SIGNER.public]).verify_all()]
        assert not isinstance(result, VerificationError) and result.outcome.value == "VALID"
    finally:
        store.close()


def test_proofs_of_many_leaves_share_one_tree_walk() -> None:
    leaves = [leaf_hash(bytes([i % 256, i // 256])) for i in range(1000)]
    from agentfootprint.seal.merkle import inclusion_proof, verify_inclusion

    indexes = [0, 1, 511, 512, 998, 999]
    for index, proof in zip(indexes, inclusion_proofs(leaves, indexes), strict=True):
        assert proof == inclusion_proof(leaves, index)
        verify_inclusion(leaves[index], index, 1000, proof, root(leaves))


def _as_v1_with_inclusion(manifest: dict[str, Any]) -> None:
    manifest["agentfootprint_bundle"] = 1
    del manifest["checkpoint"]


def _without(member: str) -> Any:
    def change(manifest: dict[str, Any]) -> None:
        if member == "checkpoint":
            del manifest["checkpoint"]
        else:
            del manifest["runs"][0]["inclusion"]

    return change


def _claim(value: Any) -> Any:
    def change(manifest: dict[str, Any]) -> None:
        manifest["runs"][0]["inclusion"] = value

    return change


def _checkpoint(value: Any) -> Any:
    def change(manifest: dict[str, Any]) -> None:
        manifest["checkpoint"] = value

    return change


@pytest.mark.parametrize(
    "change",
    [
        _as_v1_with_inclusion,
        _without("checkpoint"),
        _without("inclusion"),
        _claim({"leaf": -1, "proof": []}),
        _claim({"leaf": 1.0, "proof": []}),
        _claim({"leaf": True, "proof": []}),
        _claim({"leaf": 0, "proof": ["AB" * 32]}),
        _claim({"leaf": 0, "proof": "00" * 32}),
        _claim({"leaf": 0, "proof": ["00" * 32] * 55}),
        _claim({"leaf": 0}),
        _claim({"leaf": 0, "proof": [], "root": "00" * 32}),
        _claim([0, []]),
        _checkpoint(None),
        _checkpoint(7),
        _checkpoint("x" * (256 * 1024 + 1)),
    ],
    ids=[
        "v1 with inclusion",
        "v2 without checkpoint",
        "v2 entry without inclusion",
        "negative leaf",
        "leaf 1.0",
        "leaf true",
        "uppercase hex",
        "proof a string",
        "55 hashes",
        "no proof member",
        "an extra member",
        "an array",
        "checkpoint null",
        "checkpoint a number",
        "checkpoint over the note limit",
    ],
)
def test_a_v2_manifest_of_the_wrong_shape_is_a_framing_failure(
    sealed_log: tuple[Path, list[str]], tmp_path: Path, change: Any
) -> None:
    path, ids = sealed_log
    out = tmp_path / "runs.afp"
    export(path, [ids[0]], out, signer=SIGNER, origin=ORIGIN)
    with pytest.raises(VerificationError) as caught:
        BundleSource(edited(out, tmp_path / "bad.afp", change))
    assert caught.value.code == "bundle" and "manifest is malformed" in str(caught.value)


def test_a_checkpoint_no_run_relies_on_is_still_judged(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    plain = record(path, 1, signer=None)[0]
    out = tmp_path / "plain.afp"
    export(path, [plain], out)

    def as_v2(manifest: dict[str, Any]) -> None:
        manifest["agentfootprint_bundle"] = 2
        manifest["checkpoint"] = "not a note\n"
        manifest["runs"][0]["inclusion"] = None

    crafted = edited(out, tmp_path / "v2.afp", as_v2)
    with BundleSource(crafted) as source:
        found = [
            (run_id, getattr(result, "code", None))
            for run_id, result in af.Verifier(source).verify_all()
        ]
    assert found == [(plain, None), ("", "note/malformed")]
