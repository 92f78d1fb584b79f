"""Signed checkpoints of a database's Merkle log of sealed runs, and the check that the log
only grew since one (docs/merkle.md sections 2 and 5; docs/log-format.md section 9.7).

A checkpoint is a C2SP tlog-checkpoint signed note: the log's origin, its size (the number of
sealed runs) and the RFC 6962 root of their leaves, in seal log order. Kept outside the
database (a ticket, a CI artifact, a witness), it lets a later verifier prove that every run
sealed by then is still there, unchanged and in its place: the first ``size`` leaves of the
log as it is now must hash to the checkpoint's root. A dropped, rewritten or reordered sealed
run changes that root; a log cut back below the checkpoint's size is shorter than it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any

from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.seal.merkle import consistency_proof, root, verify_consistency
from agentfootprint.seal.note import (
    Checkpoint,
    NoteSignature,
    ed25519_verify,
    format_checkpoint,
    key_id,
    keys_named,
    open_checkpoint,
    parse_checkpoint,
    parse_note,
)
from agentfootprint.seal.signer import PublicKey, Signer
from agentfootprint.verify.seal_log_check import SealedRun, tree_leaves
from agentfootprint.verify.verifier import RunVerification, Verifier

__all__ = [
    "CODE",
    "PROOF_HEADER",
    "check_checkpoint",
    "check_consistency",
    "checkpoint_of",
    "consistency_file",
    "leaves_of",
    "log_leaves",
    "make_checkpoint",
    "parse_consistency_file",
    "prove_consistency",
    "same_tree",
    "sign_checkpoint_with",
]

CODE = "checkpoint"


def log_leaves(verifier: Verifier) -> list[bytes]:
    """The leaf hashes of the verifier's source's seal log, in leaf order, after verifying
    every run of the source (:func:`leaves_of` over ``verify_all()``)."""
    return leaves_of(verifier.source, verifier.verify_all())


def leaves_of(
    source: Any, results: Iterable[tuple[Any, RunVerification | VerificationError]]
) -> list[bytes]:
    """The leaf hashes of ``source``'s seal log from the whole-file results of verifying it.
    Raises the first failure that touches the log (a sealed run that does not verify, a seal
    log row that does not stand); a source without a seal log is a usage error."""
    log_of = getattr(source, "seal_log", None)
    log = log_of() if callable(log_of) else None
    if log is None:
        raise UsageError(
            f"{type(source).__name__} keeps no seal log: checkpoints are of a database "
            "(a SQLite or memory store), not of an export"
        )
    runs: dict[object, SealedRun | None] = {}
    for run_id, result in results:
        if isinstance(result, RunVerification):
            runs[run_id] = SealedRun(result.events, result.head, result.seal_digest)
        elif result.code == "seal-log":
            raise result
        elif result.code != "index":  # the run index is not evidence: no leaf depends on it
            runs[run_id] = None
    return tree_leaves(log, runs)


def sign_checkpoint_with(checkpoint: Checkpoint, signer: Signer) -> bytes:
    """The checkpoint as a signed note, signed by ``signer`` (a file key or a KMS/HSM key)
    under the key name ``checkpoint.origin``."""
    text = checkpoint.text()
    signature = signer.sign(text.encode("utf-8"))
    if not ed25519_verify(signer.public_key, text.encode("utf-8"), signature):
        raise UsageError(
            f"the signer {signer.key_id} returned a signature that does not verify under its "
            "own public key (a broken or misconfigured signer)",
            option="signer",
        )
    line = NoteSignature(checkpoint.origin, key_id(checkpoint.origin, signer.public_key), signature)
    return format_checkpoint(checkpoint, [line])


def make_checkpoint(verifier: Verifier, signer: Signer, origin: str) -> bytes:
    """A signed checkpoint of the verifier's source's seal log as it is now."""
    return checkpoint_of(log_leaves(verifier), signer, origin)


def checkpoint_of(leaves: Sequence[bytes], signer: Signer, origin: str) -> bytes:
    """The signed checkpoint of a seal log whose leaves are ``leaves``."""
    return sign_checkpoint_with(Checkpoint(origin, len(leaves), root(leaves)), signer)


def _open_pinned(
    note: bytes, trusted: Iterable[PublicKey] | Sequence[Any], *, origin: str | None = None
) -> Checkpoint:
    """``note`` verified under the caller's pinned keys, named by its own origin (or, given,
    by ``origin``, which it must then be of)."""
    keys = [key if isinstance(key, PublicKey) else PublicKey(key) for key in trusted]
    if not keys:
        raise UsageError("check a checkpoint against at least one trusted public key")
    name = origin if origin is not None else parse_checkpoint(parse_note(note)[0]).origin
    checkpoint, _ = open_checkpoint(
        note, keys_named(name, [key.raw for key in keys]), origin=origin
    )
    return checkpoint


def check_checkpoint(
    note: bytes, trusted: Iterable[PublicKey] | Sequence[Any], leaves: Sequence[bytes]
) -> Checkpoint:
    """Prove that a seal log whose leaves are ``leaves`` (as it is now: :func:`leaves_of`)
    holds ``note``'s tree unchanged: the note is signed by a trusted key (named by the
    checkpoint's origin), and the first ``size`` leaves hash to its root. Raises
    :class:`VerificationError`: a ``NoteError`` for the note, code ``checkpoint`` for a log
    that did not only grow."""
    checkpoint = _open_pinned(note, trusted)
    where = f"checkpoint {checkpoint.origin} of size {checkpoint.size}"
    if len(leaves) < checkpoint.size:
        raise VerificationError(
            "",
            None,
            f"the seal log holds {len(leaves)} sealed runs, fewer than the checkpoint's: "
            "sealed runs were dropped",
            code=CODE,
            where=where,
        )
    if root(leaves[: checkpoint.size]) != checkpoint.root:
        raise VerificationError(
            "",
            None,
            f"the first {checkpoint.size} leaves of the seal log do not hash to the "
            "checkpoint's root: a sealed run was dropped, rewritten or reordered since",
            code=CODE,
            where=where,
        )
    return checkpoint


def same_tree(bundle: Any, note: bytes, trusted: Iterable[PublicKey] | Sequence[Any]) -> Checkpoint:
    """Prove that a bundle's inclusion proofs are under ``note``'s tree (a checkpoint the
    caller kept elsewhere, signed by a trusted key): the bundle's own checkpoint names the
    same log, size and root. Raises :class:`VerificationError` (``note/...``,
    ``checkpoint``)."""
    kept = _open_pinned(note, trusted)
    where = f"checkpoint {kept.origin} of size {kept.size}"
    carried = getattr(bundle, "checkpoint_note", None)
    if type(carried) is not bytes:
        raise VerificationError(
            "",
            None,
            "the bundle carries no checkpoint, so no inclusion proof: export its runs with "
            "`export --checkpoint` (this checkpoint) or `export --key`",
            code=CODE,
            where=where,
        )
    theirs = parse_checkpoint(parse_note(carried)[0])
    if (theirs.origin, theirs.size, theirs.root) != (kept.origin, kept.size, kept.root):
        same_size = theirs.size == kept.size and theirs.origin == kept.origin
        raise VerificationError(
            "",
            None,
            f"the bundle's proofs are under checkpoint {theirs.origin!r} of size "
            f"{theirs.size}"
            + (
                " with another root: the two checkpoints fork (one log cannot have both)"
                if same_size
                else ": export the runs again with `export --checkpoint` and this checkpoint"
            ),
            code=CODE,
            where=where,
        )
    return kept


# -- consistency between two checkpoints (an auditor without the database) ---------------------

#: the first line of a consistency proof file (docs/log-format.md section 9.7)
PROOF_HEADER = "agentfootprint consistency proof v1"
_MAX_PROOF_HASHES = 128  # 2 * 53 levels bound any tree of at most 2**53 - 1 leaves


def consistency_file(old_size: int, new_size: int, proof: Sequence[bytes]) -> bytes:
    """The proof file: the header, the two sizes, one standard base64 hash per line."""
    lines = [PROOF_HEADER, str(old_size), str(new_size)]
    lines += [base64.b64encode(node).decode("ascii") for node in proof]
    return "".join(line + "\n" for line in lines).encode("ascii")


def _proof_error(reason: str) -> VerificationError:
    return VerificationError("", None, reason, code="merkle/consistency", where="consistency proof")


def parse_consistency_file(data: bytes) -> tuple[int, int, list[bytes]]:
    """``(old_size, new_size, hashes)`` of a proof file, read strictly (what
    :func:`consistency_file` writes is the only spelling); malformed: ``merkle/consistency``."""
    if len(data) > 64 * 1024 or not data.endswith(b"\n") or not data.isascii():
        raise _proof_error("not a proof file (ASCII lines, each ending in a newline)")
    header, *rest = data.decode("ascii")[:-1].split("\n")
    if header != PROOF_HEADER or len(rest) < 2:
        raise _proof_error(f"the first line is not {PROOF_HEADER!r} followed by two sizes")
    sizes = []
    for text in rest[:2]:
        if not text.isdigit() or text != str(int(text)) or int(text) > 2**53 - 1:
            raise _proof_error(f"{text!r} is not a tree size in canonical decimal")
        sizes.append(int(text))
    if len(rest) - 2 > _MAX_PROOF_HASHES:
        raise _proof_error(f"more than {_MAX_PROOF_HASHES} hashes")
    hashes = []
    for text in rest[2:]:
        try:
            node = base64.b64decode(text, validate=True)
        except ValueError:
            node = b""
        if len(node) != 32 or base64.b64encode(node).decode("ascii") != text:
            raise _proof_error(f"{text!r} is not the canonical base64 of a 32-byte hash")
        hashes.append(node)
    return sizes[0], sizes[1], hashes


def prove_consistency(old_note: bytes, signer: Signer, leaves: Sequence[bytes]) -> bytes:
    """The proof file from ``old_note`` (a checkpoint this signer made, consistent with the
    log: checked first) to the log's tree as it is now (``leaves``)."""
    old = check_checkpoint(old_note, [PublicKey(signer.public_key)], leaves)
    proof = consistency_proof(list(leaves), old.size) if old.size else []
    return consistency_file(old.size, len(leaves), proof)


def check_consistency(
    old_note: bytes,
    new_note: bytes,
    proof_file: bytes,
    trusted: Iterable[PublicKey] | Sequence[Any],
) -> tuple[Checkpoint, Checkpoint]:
    """Prove, from two signed checkpoints of one log and a proof file alone, that the newer
    tree extends the older one (RFC 9162 section 2.1.4.2): both notes verify under a trusted
    key named by the same origin, the proof's sizes are the checkpoints', and it leads to
    both roots. Raises :class:`VerificationError` (``note/...``, ``merkle/consistency``)."""
    old = _open_pinned(old_note, trusted)
    new = _open_pinned(new_note, trusted, origin=old.origin)
    old_size, new_size, hashes = parse_consistency_file(proof_file)
    if (old_size, new_size) != (old.size, new.size):
        raise _proof_error(
            f"the proof is from size {old_size} to {new_size}, the checkpoints are of sizes "
            f"{old.size} and {new.size}"
        )
    if old.size == 0:  # the empty tree: every log extends it
        return old, new
    verify_consistency(old.size, new.size, old.root, new.root, hashes)
    return old, new
