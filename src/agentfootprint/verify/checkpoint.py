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

from collections.abc import Iterable, Sequence
from typing import Any

from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.seal.signer import PublicKey, Signer
from agentfootprint.verify.merkle import root
from agentfootprint.verify.note import (
    Checkpoint,
    NoteSignature,
    VerifierKey,
    ed25519_verify,
    format_checkpoint,
    key_id,
    open_checkpoint,
    parse_checkpoint,
    parse_note,
)
from agentfootprint.verify.seal_log_check import SealedRun, tree_leaves
from agentfootprint.verify.verifier import RunVerification, Verifier

__all__ = [
    "CODE",
    "check_checkpoint",
    "leaves_of",
    "log_leaves",
    "make_checkpoint",
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
    leaves = log_leaves(verifier)
    return sign_checkpoint_with(Checkpoint(origin, len(leaves), root(leaves)), signer)


def check_checkpoint(
    note: bytes, trusted: Iterable[PublicKey] | Sequence[Any], leaves: Sequence[bytes]
) -> Checkpoint:
    """Prove that a seal log whose leaves are ``leaves`` (as it is now: :func:`leaves_of`)
    holds ``note``'s tree unchanged: the note is signed by a trusted key (named by the
    checkpoint's origin), and the first ``size`` leaves hash to its root. Raises
    :class:`VerificationError`: a ``NoteError`` for the note, code ``checkpoint`` for a log
    that did not only grow."""
    keys = [key if isinstance(key, PublicKey) else PublicKey(key) for key in trusted]
    if not keys:
        raise UsageError("check a checkpoint against at least one trusted public key")
    text, _ = parse_note(note)
    origin = parse_checkpoint(text).origin
    checkpoint, _ = open_checkpoint(note, [VerifierKey(origin, key.raw) for key in keys])
    where = f"checkpoint {origin} of size {checkpoint.size}"
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
