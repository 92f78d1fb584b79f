"""The seal log (one Merkle leaf per sealed run, in seal order) and signed checkpoints of it
(issue 14): what a seal alone cannot show, a checkpoint kept elsewhere does.

The attacks here are a holder's: a tail cut with the close and seal, a leaf deleted with its
run, leaves reordered, and a run rewritten and re-signed with the very signing key (which a
seal cannot catch). Each is INVALID against a checkpoint taken before it.
"""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main as cli
from agentfootprint.errors import VerificationError
from agentfootprint.seal import Ed25519Signer, generate_key_file
from agentfootprint.seal.merkle import root
from agentfootprint.seal.note import parse_checkpoint, parse_note
from agentfootprint.store import sqlite_layout
from agentfootprint.testing.seals import OTHER, SIGNER
from agentfootprint.testing.tamper import (
    new_file_schema,
    plain,
    read_rows,
    resealed,
    rewrite,
    tampering,
)
from agentfootprint.verify.checkpoint import (
    check_checkpoint,
    check_consistency,
    log_leaves,
    make_checkpoint,
    parse_consistency_file,
    prove_consistency,
)


def record(path: Path, count: int, signer: Any = SIGNER) -> list[str]:
    with af.Agent(
        provider=af.MockProvider([f"answer {i}" for i in range(count)]),
        model="m",
        store=path,
        signer=signer,
    ) as agent:
        return [agent.run_sync(f"question {i}").run_id for i in range(count)]


def whole_file(path: Path, keys: tuple[Any, ...] = (SIGNER.public,)) -> dict[str, str]:
    """``{run or finding: outcome or code}`` of ``verify_all``."""
    store = af.SqliteStore(path, readonly=True)
    try:
        verdicts: dict[str, str] = {}
        for run_id, result in af.Verifier(store, trusted_keys=keys).verify_all():
            key = run_id if run_id not in verdicts else f"{run_id} (finding)"
            verdicts[key] = (
                result.code if isinstance(result, VerificationError) else result.outcome.value
            )
        return verdicts
    finally:
        store.close()


def checkpoint_of(path: Path) -> bytes:
    store = af.SqliteStore(path, readonly=True)
    try:
        return make_checkpoint(af.Verifier(store), SIGNER, "example.com/audit-log")
    finally:
        store.close()


def against(path: Path, note: bytes, keys: tuple[Any, ...] = (SIGNER.public,)) -> int:
    """Check ``note`` against the file; the log's size now (raises on failure)."""
    store = af.SqliteStore(path, readonly=True)
    try:
        leaves = log_leaves(af.Verifier(store))
        check_checkpoint(note, keys, leaves)
        return len(leaves)
    finally:
        store.close()


def seal_log(path: Path) -> list[tuple[Any, Any]]:
    store = af.SqliteStore(path, readonly=True)
    try:
        return list(store.seal_log())
    finally:
        store.close()


# -- the log and its order ----------------------------------------------------------------------


def test_each_sealed_run_gets_the_next_leaf_in_seal_order(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    ids = record(path, 3)
    assert seal_log(path) == [(0, ids[0]), (1, ids[1]), (2, ids[2])]
    with af.Agent(provider=af.MockProvider(["x"]), model="m", store=path) as agent:
        agent.run_sync("unsealed")  # a run without a signer has no leaf
    assert len(seal_log(path)) == 3
    assert set(whole_file(path).values()) == {"VALID", "VALID_UNSIGNED"}


def _writer(path: str, worker: int, runs: int) -> None:
    with af.Agent(
        provider=af.MockProvider([f"w{worker} r{i}" for i in range(runs)]),
        model="m",
        store=path,
        signer=Ed25519Signer.from_seed(bytes(range(32))),
    ) as agent:
        for i in range(runs):
            agent.run_sync(f"worker {worker} run {i}")


def test_concurrent_writers_get_one_leaf_each_in_one_order(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    record(path, 1)  # the file exists with its seal log before the writers start
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(str(path), w, 5)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
        assert process.exitcode == 0
    log = seal_log(path)
    assert [leaf for leaf, _ in log] == list(range(21))
    assert len({run for _, run in log}) == 21
    verdicts = whole_file(path)
    assert len(verdicts) == 21 and set(verdicts.values()) == {"VALID"}
    note = checkpoint_of(path)
    assert against(path, note) == 21


def test_a_schema_1_file_gets_the_seal_log_as_migration_3(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with (
        new_file_schema(1),
        af.Agent(provider=af.MockProvider(["a"]), model="m", store=path) as agent,
    ):
        agent.run_sync("unsealed, schema 1")
    store = af.SqliteStore(path, readonly=True)
    assert store.schema_version() == 1 and store.seal_log() == []
    store.close()
    sealed = record(path, 1)
    store = af.SqliteStore(path, readonly=True)
    assert store.schema_version() == 3 and store.layout == 1
    assert store.seal_log() == [(0, sealed[0])]
    store.close()
    assert set(whole_file(path).values()) == {"VALID", "VALID_UNSIGNED"}
    with sqlite3.connect(path) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_version")]
    assert versions == [1, 3]


def test_reading_never_creates_the_seal_log(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    with af.Agent(provider=af.MockProvider(["a"]), model="m", store=path) as agent:
        agent.run_sync("no signer")
    before = path.read_bytes()
    store = af.SqliteStore(path, readonly=True)
    assert store.seal_log() == [] and store.schema_version() == sqlite_layout.NEW_FILE_SCHEMA
    list(af.Verifier(store).verify_all())
    store.close()
    assert path.read_bytes() == before


def test_an_imported_sealed_run_gets_a_leaf_in_the_importing_log(tmp_path: Path) -> None:
    source, target, bundle = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "a.afp"
    ids = record(source, 2)
    store = af.SqliteStore(source)
    af.export_runs(store, ids, bundle)
    store.close()
    record(target, 1)
    into = af.SqliteStore(target)
    af.import_bundle(af.BundleSource(bundle), into)
    into.close()
    assert [run for _, run in seal_log(target)][1:] == ids
    assert set(whole_file(target).values()) == {"VALID"}
    memory = af.MemoryStore()
    af.import_bundle(af.BundleSource(bundle), memory)
    assert memory.seal_log() == [(0, ids[0]), (1, ids[1])]


# -- what the log shows without a checkpoint ---------------------------------------------------


def test_a_tail_cut_with_its_close_and_seal_is_invalid_by_the_seal_log(tmp_path: Path) -> None:
    """The forgery that reads as a crash without seals (issue 14): cut at a batch boundary,
    the run alone would be UNSEALED, but the seal log says it was sealed. Its verdict says
    so, once (section 9.2 step 5); per-run paths: test_seal_log_per_run.py."""
    path = tmp_path / "cut.db"
    ids = record(path, 2)
    with tampering(path) as conn:
        rewrite(conn, ids[0], plain(read_rows(conn, ids[0]))[:-2])
    verdicts = whole_file(path)
    assert verdicts == {ids[0]: "seal-log", ids[1]: "VALID"}
    result = CliRunner().invoke(cli, ["verify", str(path), "--key", SIGNER.public.text])
    assert result.exit_code == 1 and "its tail was cut" in result.output
    assert result.output.count(ids[0]) == 1


def test_a_crafted_seal_log_is_reported_row_by_row(tmp_path: Path) -> None:
    path = tmp_path / "crafted.db"
    ids = record(path, 2)
    with tampering(path) as conn:
        conn.execute("INSERT INTO seal_log VALUES (5, 'ghost')")
        conn.execute("DELETE FROM seal_log WHERE leaf = 1")
    verdicts = whole_file(path)
    assert verdicts[ids[1]] == "seal-log"  # sealed, and no leaf lists it: its verdict
    assert f"{ids[1]} (finding)" not in verdicts
    assert verdicts["ghost"] == "seal-log"  # numbered 5 at position 1


# -- checkpoints --------------------------------------------------------------------------------


def test_a_checkpoint_is_a_signed_note_of_the_seal_log(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    record(path, 3)
    note = checkpoint_of(path)
    text, signatures = parse_note(note)
    checkpoint = parse_checkpoint(text)
    assert checkpoint.origin == "example.com/audit-log" and checkpoint.size == 3
    store = af.SqliteStore(path, readonly=True)
    assert checkpoint.root == root(log_leaves(af.Verifier(store)))
    store.close()
    assert [s.name for s in signatures] == ["example.com/audit-log"]
    assert against(path, note) == 3
    record(path, 2)
    assert against(path, note) == 5  # the log only grew


def _drop_last_leaf(path: Path, ids: list[str]) -> None:
    with tampering(path) as conn:
        conn.execute("DELETE FROM seal_log WHERE run_id = ?", (ids[-1],))
        rewrite(conn, ids[-1], plain(read_rows(conn, ids[-1]))[:-2])  # cut with its seal


def _reorder(path: Path, ids: list[str]) -> None:
    with tampering(path) as conn:
        conn.execute("DELETE FROM seal_log")
        for leaf, run_id in enumerate([ids[1], ids[0], *ids[2:]]):
            conn.execute("INSERT INTO seal_log VALUES (?, ?)", (leaf, run_id))


def _resigned(path: Path, ids: list[str]) -> None:
    """The key holder's rewrite: an edited run, re-hashed and sealed again with the very
    signing key. Every run still verifies VALID; only the checkpoint tells."""
    resealed(path, ids[0], SIGNER)


@pytest.mark.parametrize(
    "attack",
    [_drop_last_leaf, _reorder, _resigned],
    ids=["a sealed run cut with its leaf", "leaves reordered", "rewritten and re-signed"],
)
def test_a_checkpoint_shows_what_the_holder_changed_since(tmp_path: Path, attack: Any) -> None:
    path = tmp_path / "log.db"
    ids = record(path, 3)
    note = checkpoint_of(path)
    attack(path, ids)
    if attack is _resigned:
        assert set(whole_file(path).values()) == {"VALID"}  # what a seal alone cannot see
    with pytest.raises(VerificationError) as info:
        against(path, note)
    assert info.value.code == "checkpoint"
    key_file = tmp_path / "seal.pub"
    key_file.write_text(SIGNER.public.text)
    note_file = tmp_path / "checkpoint.txt"
    note_file.write_bytes(note)
    result = CliRunner().invoke(
        cli, ["verify", str(path), "--key", str(key_file), "--checkpoint", str(note_file)]
    )
    assert result.exit_code == 1 and "[checkpoint]" in result.output, result.output


def test_a_checkpoint_is_trusted_only_under_a_pinned_key(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    record(path, 2)
    note = checkpoint_of(path)
    with pytest.raises(VerificationError) as info:
        against(path, note, (OTHER.public,))
    assert info.value.code == "note/unverified"
    damaged = note.replace(b"\n2\n", b"\n1\n")
    with pytest.raises(VerificationError) as info:
        against(path, damaged)
    assert info.value.code == "note/signature"


def test_the_checkpoint_command_and_verify_checkpoint(tmp_path: Path) -> None:
    path, key = tmp_path / "log.db", tmp_path / "seal.key"
    signer = generate_key_file(key)
    record(path, 2, signer)
    runner = CliRunner()
    made = runner.invoke(cli, ["checkpoint", str(path), "--key", str(key), "--origin", "ex/log"])
    assert made.exit_code == 0, made.output
    assert made.output.startswith("ex/log\n2\n") and "— ex/log " in made.output
    assert "PRIVATE" not in made.output
    note = tmp_path / "cp.txt"
    note.write_text(made.output)
    record(path, 1, signer)
    checked = runner.invoke(
        cli, ["verify", str(path), "--key", signer.public.text, "--checkpoint", str(note)]
    )
    assert checked.exit_code == 0, checked.output
    assert "CONSISTENT" in checked.output and "holds 3 now" in checked.output
    as_json = runner.invoke(
        cli,
        ["verify", str(path), "--key", signer.public.text, "--checkpoint", str(note), "--json"],
    )
    assert '"outcome": "CONSISTENT"' in as_json.output
    no_key = runner.invoke(cli, ["verify", str(path), "--checkpoint", str(note)])
    assert no_key.exit_code == 2 and "--key" in no_key.output
    default = runner.invoke(cli, ["checkpoint", str(path), "--key", str(key)])
    assert default.exit_code == 0 and default.output.startswith("agentfootprint/log\n3\n")
    bundle = tmp_path / "log.afp"
    store = af.SqliteStore(path)
    af.export_runs(store, [r.run_id for r in store.runs()], bundle)
    store.close()
    on_bundle = runner.invoke(cli, ["checkpoint", str(bundle), "--key", str(key)])
    assert on_bundle.exit_code == 2 and "Traceback" not in on_bundle.output
    copy = tmp_path / "copy.db"
    shutil.copyfile(path, copy)
    assert path.read_bytes() == copy.read_bytes()  # nothing was written by the commands


# -- consistency between two checkpoints, without the database -------------------------------


def _proof(path: Path, old: bytes) -> bytes:
    store = af.SqliteStore(path, readonly=True)
    try:
        return prove_consistency(old, SIGNER, log_leaves(af.Verifier(store)))
    finally:
        store.close()


@pytest.mark.parametrize(("before", "after"), [(1, 2), (2, 5), (4, 7), (3, 3), (4, 8)])
def test_two_checkpoints_and_a_proof_show_the_log_only_grew(
    tmp_path: Path, before: int, after: int
) -> None:
    path = tmp_path / "log.db"
    record(path, before)
    old = checkpoint_of(path)
    if after > before:
        record(path, after - before)
    new, proof = checkpoint_of(path), _proof(path, old)
    first, second = check_consistency(old, new, proof, [SIGNER.public])
    assert (first.size, second.size) == (before, after)
    assert parse_consistency_file(proof)[:2] == (before, after)


def test_a_proof_fails_for_a_forked_log_or_a_wrong_size(tmp_path: Path) -> None:
    path, forked = tmp_path / "log.db", tmp_path / "forked.db"
    ids = record(path, 3)
    old = checkpoint_of(path)
    shutil.copyfile(path, forked)
    record(path, 2)
    new, proof = checkpoint_of(path), _proof(path, old)
    _reorder(forked, ids)  # another history of the same three runs, then grown the same
    record(forked, 2)
    forked_new = checkpoint_of(forked)
    with pytest.raises(VerificationError) as info:
        check_consistency(old, forked_new, proof, [SIGNER.public])
    assert info.value.code == "merkle/consistency"
    with pytest.raises(VerificationError) as info:
        check_consistency(new, old, proof, [SIGNER.public])  # sizes swapped
    assert info.value.code == "merkle/consistency"
    text = proof.decode().split("\n")
    flipped = "\n".join([*text[:3], text[4], text[3], *text[5:]]).encode()
    with pytest.raises(VerificationError) as info:
        check_consistency(old, new, flipped, [SIGNER.public])
    assert info.value.code == "merkle/consistency"
    for junk in (
        b"",
        b"agentfootprint consistency proof v1\n3\n",
        proof.replace(b"\n3\n", b"\n03\n"),
    ):
        with pytest.raises(VerificationError) as info:
            check_consistency(old, new, junk, [SIGNER.public])
        assert info.value.code == "merkle/consistency"
    with pytest.raises(VerificationError) as info:
        check_consistency(old, new, proof, [OTHER.public])
    assert info.value.code == "note/unverified"


def test_the_consistency_command(tmp_path: Path) -> None:
    path, key = tmp_path / "log.db", tmp_path / "seal.key"
    signer = generate_key_file(key)
    record(path, 2, signer)
    runner = CliRunner()
    old = tmp_path / "old.txt"
    old.write_text(runner.invoke(cli, ["checkpoint", str(path), "--key", str(key)]).output)
    record(path, 3, signer)
    proof = tmp_path / "proof.txt"
    since = ["checkpoint", str(path), "--key", str(key), "--since", str(old)]
    made = runner.invoke(cli, [*since, "--proof-out", str(proof)])
    assert made.exit_code == 0, made.output
    new = tmp_path / "new.txt"
    new.write_text(made.output)
    assert proof.read_bytes().startswith(b"agentfootprint consistency proof v1\n2\n5\n")
    pub = signer.public.text
    done = runner.invoke(cli, ["consistency", str(old), str(new), str(proof), "--key", pub])
    assert done.exit_code == 0 and "CONSISTENT" in done.output, done.output
    bad = runner.invoke(cli, ["consistency", str(new), str(old), str(proof), "--key", pub])
    assert bad.exit_code == 1 and "[merkle/consistency]" in bad.output
    again = runner.invoke(cli, [*since, "--proof-out", str(proof)])
    assert again.exit_code == 2 and "Traceback" not in again.output  # never over a file
    alone = runner.invoke(cli, since)
    assert alone.exit_code == 2
