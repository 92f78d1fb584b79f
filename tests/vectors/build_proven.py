"""Build the inclusion-proof bundle vectors (issue 14; docs/log-format.md section 13.4) in this
folder: ``proven-*.afp``, the checkpoint notes ``proven-*.checkpoint`` and the index
``proven.json``.

Run ``python tests/vectors/build_proven.py`` to rebuild them. Every vector is a version 2
bundle exported for real from the committed ``sealed-valid.db`` (three sealed runs: a root,
its continuation, a redacted run; sealed by ``agentfootprint.testing.seals.SIGNER``), then
edited the way its holder would: the manifest changed and the trailer's SHA-256 recomputed,
which anyone can do. Each entry of ``proven.json`` says which public keys the verifier pins
(``keys``), the failure codes whole-file verification must report, the outcomes of the runs
that verify, the exit code of ``verify`` with those keys, with ``--require-signature`` and
with ``--require-inclusion``, and for some, a checkpoint kept elsewhere (``checkpoint``) that
``verify --checkpoint`` checks the bundle against and the code it fails with
(``checkpoint_code``, empty when CONSISTENT). ``tests/scenario/test_proven_vectors.py`` runs
them all, and ``tests/spec`` runs them through the independent verifier.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

import agentfootprint as af
from agentfootprint.exchange.transfer import export_runs
from agentfootprint.seal.note import Checkpoint
from agentfootprint.testing.seals import OTHER, SIGNER
from agentfootprint.verify.checkpoint import checkpoint_of, log_leaves, sign_checkpoint_with

HERE = Path(__file__).resolve().parent
BASE = HERE / "sealed-valid.db"
ORIGIN = "example.com/proven-vectors"


@dataclass
class Entry:
    file: str
    about: str
    keys: list[str]  # "signer" / "other": the public keys pinned
    codes: list[str]  # failure codes of whole-file verification
    outcomes: list[str]  # the outcomes of the runs that verify
    exit: int  # verify BUNDLE --key ...
    exit_required: int  # ... --require-signature
    exit_inclusion: int  # ... --require-inclusion
    checkpoint: str = ""  # a note kept elsewhere, for verify --checkpoint
    checkpoint_code: str = ""  # "" = CONSISTENT


@dataclass(frozen=True)
class Runs:
    """The base's runs in seal order (leaves 0, 1, 2) and its leaf hashes."""

    root: str
    child: str
    redacted: str
    leaves: list[bytes]


Edit = Callable[[dict[str, Any], Runs], None]
VECTORS: list[tuple[Entry, Any, Edit | None, str | None]] = []


def vector(entry: Entry, signer: Any = SIGNER, kept: str | None = None) -> Callable[[Edit], Edit]:
    def register(edit: Edit) -> Edit:
        VECTORS.append((entry, signer, edit, kept))
        return edit

    return register


def _entry(manifest: dict[str, Any], run_id: str) -> dict[str, Any]:
    return next(item for item in manifest["runs"] if item["run_id"] == run_id)


def _flipped(text: str) -> str:
    return ("1" if text[0] == "0" else "0") + text[1:]


@vector(
    Entry(
        "proven-valid.afp",
        "three sealed runs, each with its proof",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        0,
    )
)
def _valid(manifest: dict[str, Any], runs: Runs) -> None:
    return None


@vector(
    Entry(
        "proven-unpinned.afp",
        "no key pinned: seals and checkpoint unproven",
        [],
        [],
        ["VALID_UNSIGNED"],
        0,
        1,
        1,
    )
)
def _unpinned(manifest: dict[str, Any], runs: Runs) -> None:
    return None


@vector(
    Entry(
        "proven-checkpoint-by-other.afp",
        "the checkpoint signed by a key not pinned",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        1,
    ),
    signer=OTHER,
)
def _other(manifest: dict[str, Any], runs: Runs) -> None:
    return None


@vector(
    Entry(
        "proven-proof-flipped.afp",
        "one hash of the root's proof changed",
        ["signer"],
        ["ancestry", "merkle/inclusion"],
        ["VALID"],
        1,
        1,
        1,
    )
)
def _proof_flipped(manifest: dict[str, Any], runs: Runs) -> None:
    proof = _entry(manifest, runs.root)["inclusion"]["proof"]
    proof[-1] = _flipped(proof[-1])


@vector(
    Entry(
        "proven-leaf-moved.afp",
        "the redacted run's leaf index changed",
        ["signer"],
        ["merkle/inclusion"],
        ["VALID"],
        1,
        1,
        1,
    )
)
def _leaf_moved(manifest: dict[str, Any], runs: Runs) -> None:
    _entry(manifest, runs.redacted)["inclusion"]["leaf"] = 1


@vector(
    Entry(
        "proven-leaf-past-size.afp",
        "a leaf index not below the tree size",
        ["signer"],
        ["merkle/inclusion"],
        ["VALID"],
        1,
        1,
        1,
    )
)
def _leaf_past(manifest: dict[str, Any], runs: Runs) -> None:
    _entry(manifest, runs.redacted)["inclusion"]["leaf"] = 3


@vector(
    Entry(
        "proven-proof-short.afp",
        "a hash dropped from the redacted run's proof",
        ["signer"],
        ["merkle/inclusion"],
        ["VALID"],
        1,
        1,
        1,
    )
)
def _short(manifest: dict[str, Any], runs: Runs) -> None:
    _entry(manifest, runs.redacted)["inclusion"]["proof"].pop()


@vector(
    Entry(
        "proven-proof-long.afp",
        "a hash added to the redacted run's proof",
        ["signer"],
        ["merkle/inclusion"],
        ["VALID"],
        1,
        1,
        1,
    )
)
def _long(manifest: dict[str, Any], runs: Runs) -> None:
    _entry(manifest, runs.redacted)["inclusion"]["proof"].append("00" * 32)


@vector(
    Entry(
        "proven-proofs-swapped.afp",
        "the root's and the child's claims swapped",
        ["signer"],
        ["ancestry", "merkle/inclusion"],
        ["VALID"],
        1,
        1,
        1,
    )
)
def _swapped(manifest: dict[str, Any], runs: Runs) -> None:
    a, b = _entry(manifest, runs.root), _entry(manifest, runs.child)
    a["inclusion"], b["inclusion"] = b["inclusion"], a["inclusion"]


@vector(
    Entry(
        "proven-proof-removed.afp",
        "a sealed run's inclusion set to null",
        ["signer"],
        ["inclusion"],
        ["VALID"],
        1,
        1,
        1,
    )
)
def _removed(manifest: dict[str, Any], runs: Runs) -> None:
    _entry(manifest, runs.redacted)["inclusion"] = None


@vector(
    Entry(
        "proven-checkpoint-smaller.afp",
        "the checkpoint swapped for a signed one of two leaves",
        ["signer"],
        ["ancestry", "merkle/inclusion"],
        [],
        1,
        1,
        1,
    )
)
def _smaller(manifest: dict[str, Any], runs: Runs) -> None:
    manifest["checkpoint"] = checkpoint_of(runs.leaves[:2], SIGNER, ORIGIN).decode()


@vector(
    Entry(
        "proven-checkpoint-malformed.afp",
        "the checkpoint's blank line removed",
        ["signer"],
        ["ancestry", "note/malformed"],
        [],
        1,
        1,
        1,
    )
)
def _malformed(manifest: dict[str, Any], runs: Runs) -> None:
    manifest["checkpoint"] = manifest["checkpoint"].replace("\n\n", "\n")


@vector(
    Entry(
        "proven-checkpoint-bad-signature.afp",
        "the checkpoint's root changed after the pinned key signed it",
        ["signer"],
        ["ancestry", "note/signature"],
        [],
        1,
        1,
        1,
    )
)
def _bad_signature(manifest: dict[str, Any], runs: Runs) -> None:
    text, _, rest = manifest["checkpoint"].partition("\n\n")
    origin, size, _ = text.split("\n")
    other = sign_checkpoint_with(Checkpoint(origin, int(size), bytes(32)), SIGNER).decode()
    manifest["checkpoint"] = other.split("\n\n")[0] + "\n\n" + rest  # the old signature kept


@vector(
    Entry(
        "proven-kept-consistent.afp",
        "checked against the very checkpoint kept elsewhere",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        0,
        "proven-kept.checkpoint",
        "",
    ),
    kept="same",
)
def _kept(manifest: dict[str, Any], runs: Runs) -> None:
    return None


@vector(
    Entry(
        "proven-kept-older.afp",
        "checked against a kept checkpoint of an older tree",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        0,
        "proven-kept-older.checkpoint",
        "checkpoint",
    ),
    kept="older",
)
def _kept_older(manifest: dict[str, Any], runs: Runs) -> None:
    return None


@vector(
    Entry(
        "proven-kept-forked.afp",
        "checked against a kept checkpoint of the same size, another root",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        0,
        "proven-kept-forked.checkpoint",
        "checkpoint",
    ),
    kept="forked",
)
def _kept_forked(manifest: dict[str, Any], runs: Runs) -> None:
    return None


def _reframed(manifest: dict[str, Any], lines: list[bytes]) -> bytes:
    body = orjson.dumps(manifest) + b"\n" + b"".join(line + b"\n" for line in lines)
    trailer = {"end": True, "events": len(lines), "sha256": hashlib.sha256(body).hexdigest()}
    return body + orjson.dumps(trailer) + b"\n"


def build(target: Path = HERE) -> list[Entry]:
    store = af.SqliteStore(BASE, readonly=True)
    try:
        order = [str(run_id) for _, run_id in store.seal_log()]
        runs = Runs(*order, leaves=log_leaves(af.Verifier(store)))  # type: ignore[misc]
        kept = {
            "same": checkpoint_of(runs.leaves, SIGNER, ORIGIN),
            "older": checkpoint_of(runs.leaves[:2], SIGNER, ORIGIN),
            "forked": sign_checkpoint_with(Checkpoint(ORIGIN, 3, bytes(range(32))), SIGNER),
        }
        built = []
        with tempfile.TemporaryDirectory() as scratch:
            for entry, signer, edit, note in VECTORS:
                out = Path(scratch) / entry.file
                if note is None:
                    export_runs(store, order, out, signer=signer, origin=ORIGIN)
                else:
                    export_runs(store, order, out, checkpoint=kept["same"])
                    (target / entry.checkpoint).write_bytes(kept[note])
                lines = out.read_bytes().rstrip(b"\n").split(b"\n")
                manifest = orjson.loads(lines[0])
                if edit is not None:
                    edit(manifest, runs)
                (target / entry.file).write_bytes(_reframed(manifest, lines[1:-1]))
                built.append(entry)
    finally:
        store.close()
    index = [asdict(e) for e in built]
    (target / "proven.json").write_bytes(orjson.dumps(index, option=orjson.OPT_INDENT_2) + b"\n")
    return built


if __name__ == "__main__":
    for old in HERE.glob("proven-*"):
        old.unlink()
    made = build()
    print(f"built {len(made)} inclusion-proof bundle vectors in {HERE}", file=sys.stderr)
