"""A Hypothesis state machine over sealed evidence (issue 14): record (sealed, unsealed,
continued), checkpoint, export (plain, and with inclusion proofs under a signed checkpoint),
import. In every state the machine reaches, the verifier accepts the database, the imported
copy and every bundle, every checkpoint taken so far is consistent, and every sealed run of a
proven bundle is a leaf of its signed checkpoint; any single-byte change to stored evidence
(a row's body, a seal log row) is rejected by whole-file verification or by a checkpoint
taken before it, and any one-character change to a bundle's proof, leaf index or checkpoint
(its trailer recomputed, as anyone can) leaves some sealed run unproven or INVALID."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import agentfootprint as af
from agentfootprint.testing.seals import SIGNER
from agentfootprint.testing.tamper import TRIGGERS, layout_of
from agentfootprint.verify.checkpoint import check_checkpoint, leaves_of, make_checkpoint
from examples_budget import scaled

ORIGIN = "example.com/machine"


def _verified(path: Path) -> tuple[list[tuple[str, Any]], Any]:
    store = af.SqliteStore(path, readonly=True)
    results = list(af.Verifier(store, trusted_keys=[SIGNER.public]).verify_all())
    return results, store


def _accepts(path: Path, notes: list[bytes]) -> bool:
    """Every run VALID or VALID_UNSIGNED, no finding, every note consistent."""
    results, store = _verified(path)
    try:
        if any(not isinstance(r, af.RunVerification) for _, r in results):
            return False
        leaves = leaves_of(store, results)
        for note in notes:
            try:
                check_checkpoint(note, [SIGNER.public], leaves)
            except af.VerificationError:
                return False
        return True
    finally:
        store.close()


def _proven(bundle: Path) -> bool:
    """The bundle opens, every run verifies, and every sealed run is VALID and a leaf of the
    bundle's checkpoint as signed by the pinned key."""
    try:
        with af.BundleSource(bundle) as source:
            results = list(af.Verifier(source, trusted_keys=[SIGNER.public]).verify_all())
    except af.VerificationError:
        return False
    for _, result in results:
        if not isinstance(result, af.RunVerification):
            return False
        if result.seal_digest is not None and (
            result.outcome is not af.Outcome.VALID
            or result.inclusion is None
            or result.inclusion.signed_by != (SIGNER.key_id,)
        ):
            return False
    return True


def _reframed(manifest: dict[str, Any], lines: list[bytes]) -> bytes:
    body = orjson.dumps(manifest) + b"\n" + b"".join(line + b"\n" for line in lines)
    trailer = {"end": True, "events": len(lines), "sha256": hashlib.sha256(body).hexdigest()}
    return body + orjson.dumps(trailer) + b"\n"


def _other_char(data: st.DataObject, old: str, alphabet: str) -> str:
    """A character of ``alphabet`` other than ``old``, drawn the same way whatever ``old`` is
    (the recorded bytes differ between runs of one example: the draw must not depend on
    them)."""
    new = alphabet[data.draw(st.integers(0, len(alphabet) - 1))]
    return new if new != old else alphabet[(alphabet.index(new) + 1) % len(alphabet)]


class SealedEvidence(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="afp-seal-machine-"))
        self.db = self.folder / "log.db"
        self.copy = self.folder / "imported.db"
        self.answered: list[str] = []
        self.sealed: list[str] = []
        self.notes: list[bytes] = []
        self.turn = 0
        self._run(True, None)  # every rule has a sealed run to work on from the first step

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, signed: bool, parent: str | None) -> None:
        self.turn += 1
        with af.Agent(
            provider=af.MockProvider([f"answer {self.turn}"]),
            model="m",
            store=self.db,
            signer=SIGNER if signed else None,
        ) as agent:
            result = agent.run_sync(f"question {self.turn}", continue_from=parent)
        self.answered.append(result.run_id)
        if signed:
            self.sealed.append(result.run_id)

    @rule(signed=st.booleans())
    def record(self, signed: bool) -> None:
        self._run(signed, None)

    @precondition(lambda self: bool(self.answered))
    @rule(signed=st.booleans(), data=st.data())
    def continue_one(self, signed: bool, data: st.DataObject) -> None:
        self._run(signed, data.draw(st.sampled_from(self.answered)))

    @precondition(lambda self: self.db.exists())
    @rule()
    def checkpoint(self) -> None:
        store = af.SqliteStore(self.db, readonly=True)
        try:
            self.notes.append(make_checkpoint(af.Verifier(store), SIGNER, ORIGIN))
        finally:
            store.close()

    @precondition(lambda self: bool(self.answered))
    @rule(data=st.data())
    def export_import(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.sampled_from(self.answered), min_size=1, max_size=3))
        bundle = self.folder / f"export-{self.turn}.afp"
        store = af.SqliteStore(self.db)
        try:
            af.export_runs(store, sorted(set(chosen)), bundle)
        finally:
            store.close()
        into = af.SqliteStore(self.copy)
        try:
            af.import_bundle(af.BundleSource(bundle), into)
        finally:
            into.close()
        assert _accepts(self.copy, [])

    @precondition(lambda self: bool(self.sealed))
    @rule(data=st.data())
    def export_with_proofs(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.sampled_from(self.answered), max_size=2))
        chosen.append(data.draw(st.sampled_from(self.sealed)))
        bundle = self.folder / f"proven-{self.turn}.afp"
        store = af.SqliteStore(self.db, readonly=True)
        try:
            af.export_runs(store, sorted(set(chosen)), bundle, signer=SIGNER, origin=ORIGIN)
        finally:
            store.close()
        assert _proven(bundle)
        lines = bundle.read_bytes().rstrip(b"\n").split(b"\n")
        manifest = orjson.loads(lines[0])
        claims = [e["inclusion"] for e in manifest["runs"] if e["inclusion"] is not None]
        claim = data.draw(st.sampled_from(claims))
        where = data.draw(st.sampled_from(["proof", "leaf", "checkpoint"]))
        if where == "proof" and claim["proof"]:
            index = data.draw(st.integers(0, len(claim["proof"]) - 1))
            text = claim["proof"][index]
            at = data.draw(st.integers(0, 63))
            new = _other_char(data, text[at], "0123456789abcdef")
            claim["proof"][index] = text[:at] + new + text[at + 1 :]
        elif where == "leaf" or where == "proof":
            claim["leaf"] = data.draw(
                st.integers(0, 2**53 - 1).filter(lambda n: n != claim["leaf"])
            )
        else:
            note = manifest["checkpoint"]
            at = data.draw(st.integers(0, len(note) - 1))
            alphabet = "0123456789abcdefABCDEF+/=. \n"
            manifest["checkpoint"] = (
                note[:at] + _other_char(data, note[at], alphabet) + note[at + 1 :]
            )
        forged = self.folder / "forged.afp"
        forged.write_bytes(_reframed(manifest, lines[1:-1]))
        assert not _proven(forged)
        event(f"one character of a bundle's {where} changed: not proven")

    @invariant()
    def the_verifier_accepts_every_state(self) -> None:
        if self.db.exists():
            assert _accepts(self.db, self.notes)
            store = af.SqliteStore(self.db, readonly=True)
            try:
                assert [run for _, run in store.seal_log()] == self.sealed
            finally:
                store.close()

    @precondition(lambda self: bool(self.sealed))
    @rule(data=st.data())
    def any_single_byte_change_is_rejected(self, data: st.DataObject) -> None:
        mutated = self.folder / "mutated.db"
        shutil.copyfile(self.db, mutated)
        for suffix in ("-wal", "-shm"):
            Path(f"{mutated}{suffix}").unlink(missing_ok=True)
        conn = sqlite3.connect(mutated)
        try:
            for trigger in TRIGGERS:
                conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
            where = data.draw(st.sampled_from(["rows", "seal_log"]))
            if where == "rows":  # a stored body (schema 4: a byte of an append's records)
                table, column = ("appends", "data") if layout_of(conn) == 4 else ("rows", "body")
                positions = [
                    p for (p,) in conn.execute(f"SELECT pos FROM {table} WHERE {column} NOT NULL")
                ]
                pos = data.draw(st.sampled_from(positions))
                (body,) = conn.execute(
                    f"SELECT {column} FROM {table} WHERE pos = ?", (pos,)
                ).fetchone()
                at = data.draw(st.integers(0, len(body) - 1))
                flip = data.draw(st.integers(1, 255))
                changed = bytearray(body)
                changed[at] ^= flip
                conn.execute(
                    f"UPDATE {table} SET {column} = ? WHERE pos = ?", (bytes(changed), pos)
                )
            else:
                leaves = conn.execute("SELECT leaf, run_id FROM seal_log").fetchall()
                leaf, run_id = data.draw(st.sampled_from(leaves))
                at = data.draw(st.integers(0, len(run_id) - 1))
                swapped = "0" if run_id[at] != "0" else "1"
                changed_id = run_id[:at] + swapped + run_id[at + 1 :]
                conn.execute("UPDATE seal_log SET run_id = ? WHERE leaf = ?", (changed_id, leaf))
            conn.commit()
        finally:
            conn.close()
        assert not _accepts(mutated, self.notes)
        event(f"a byte of {where} changed: rejected")
        mutated.unlink()


SealedEvidence.TestCase.settings = settings(
    max_examples=scaled(20),
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_sealed_evidence = SealedEvidence.TestCase
