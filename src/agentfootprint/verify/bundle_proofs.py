"""Inclusion proofs in export bundles (docs/log-format.md section 13.4): a sealed run's
place in its database's Merkle log of sealed runs, under a signed checkpoint the bundle
carries.

A version 2 bundle's manifest holds a ``checkpoint`` (a signed note, as ``agentfootprint
checkpoint`` prints it) and, per run, an ``inclusion``: ``{"leaf", "proof"}`` for a sealed
run, null for one without a seal. The verifier recomputes each sealed run's leaf from its
verified rows (never from the manifest) and checks the proof against the checkpoint's root:
the run, exactly as the bundle holds it, was in the log when the checkpoint was signed. What
the checkpoint's signature is worth depends on the keys the caller pins, as for seals: a
proof that does not lead to the root is INVALID whatever the keys; a checkpoint signed by no
pinned key leaves the inclusion unproven (said so), not INVALID.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.seal.merkle import (
    MAX_PROOF_HASHES,
    inclusion_proofs,
    leaf_hash,
    root,
    run_leaf,
    verify_inclusion,
)
from agentfootprint.seal.note import (
    MAX_NOTE_BYTES,
    Checkpoint,
    NoteError,
    keys_named,
    open_checkpoint,
    parse_checkpoint,
    parse_note,
)
from agentfootprint.seal.signer import PublicKey, key_id_of

__all__ = [
    "CODE",
    "ExportCheckpoint",
    "Inclusion",
    "InclusionClaim",
    "InclusionJudge",
    "claim_of",
]

#: a sealed run without its proof, or a proof for a run without a seal
CODE = "inclusion"


@dataclass(frozen=True, slots=True)
class InclusionClaim:
    """What a manifest entry says of its run's place in the log (not evidence: checked)."""

    leaf: int
    proof: tuple[bytes, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Inclusion:
    """A verified run's proven place in its database's log of sealed runs."""

    #: the run's leaf index
    leaf: int
    #: the checkpoint's tree size, origin (the log's name) and root
    size: int
    origin: str
    root: bytes
    #: the pinned keys the checkpoint verified under (empty: the inclusion is proven against
    #: the checkpoint's root, but nothing the caller trusts signed that root)
    signed_by: tuple[str, ...]


def claim_of(value: Any) -> InclusionClaim | None:
    """A manifest entry's ``inclusion`` member read strictly (JSON null, or an object with
    exactly ``leaf``, an integer from 0 to 2**53 - 1, and ``proof``, an array of at most
    ``MAX_PROOF_HASHES`` hex hashes); ValueError says what is wrong."""
    if value is None:
        return None
    if type(value) is not dict or value.keys() != {"leaf", "proof"}:
        raise ValueError("inclusion is neither null nor an object of exactly leaf and proof")
    leaf, proof = value["leaf"], value["proof"]
    if type(leaf) is not int or not 0 <= leaf <= 2**53 - 1:
        raise ValueError("inclusion.leaf is not an integer from 0 to 2**53 - 1")
    if type(proof) is not list or len(proof) > MAX_PROOF_HASHES:
        raise ValueError(f"inclusion.proof is not an array of at most {MAX_PROOF_HASHES} hashes")
    hashes = []
    for item in proof:
        if type(item) is not str or len(item) != 64 or item.strip("0123456789abcdef"):
            raise ValueError("an inclusion.proof hash is not 64 lowercase hex digits")
        hashes.append(bytes.fromhex(item))
    return InclusionClaim(leaf, tuple(hashes))


def check_note_text(value: Any) -> str:
    """A manifest's ``checkpoint`` member: a string of at most ``MAX_NOTE_BYTES`` bytes
    (its meaning is judged when runs are verified); ValueError says what is wrong."""
    if type(value) is not str or len(value.encode("utf-8", "surrogatepass")) > MAX_NOTE_BYTES:
        raise ValueError(f"checkpoint is not a string of at most {MAX_NOTE_BYTES} bytes")
    return value


class InclusionJudge:
    """The checkpoint a bundle carries, opened once against the caller's pinned keys, and
    each run's claimed inclusion judged against it (section 13.4)."""

    def __init__(self, note: bytes, trusted: Sequence[PublicKey]) -> None:
        self.checkpoint: Checkpoint | None = None
        self.signed_by: tuple[str, ...] = ()
        #: why the checkpoint cannot be used (malformed, or a pinned key's bad signature)
        self.error: VerificationError | None = None
        #: whether a sealed run's proof relied on the note (one no run relied on is judged
        #: on its own by whole-file verification)
        self.used = False
        try:
            text, _ = parse_note(note)
            self.checkpoint = parse_checkpoint(text)
            if trusted:
                named = keys_named(self.checkpoint.origin, [key.raw for key in trusted])
                try:
                    _, opened = open_checkpoint(note, named)
                except NoteError as exc:
                    if exc.code != "note/unverified":  # a pinned key's signature is bad
                        raise
                else:
                    self.signed_by = tuple(key_id_of(key.public_key) for key in opened.verified)
        except NoteError as exc:
            self.checkpoint = None
            self.error = exc

    def judge(
        self,
        run_id: str,
        claim: InclusionClaim | None,
        *,
        events: int,
        head: bytes,
        seal: bytes | None,
    ) -> Inclusion | None:
        """The run's :class:`Inclusion` (None for a run without a seal and without a claim);
        raises :class:`VerificationError` (``inclusion``, ``merkle/inclusion``, ``note/...``)
        when its claim does not stand."""
        if seal is None:
            if claim is not None:
                raise VerificationError(
                    run_id,
                    None,
                    "the manifest gives an inclusion proof for a run without a seal "
                    "(only sealed runs have leaves)",
                    code=CODE,
                )
            return None
        if claim is None:
            raise VerificationError(
                run_id,
                None,
                "the run is sealed but the manifest gives no inclusion proof for it under "
                "the bundle's checkpoint",
                code=CODE,
            )
        self.used = True
        if self.checkpoint is None:
            assert self.error is not None
            raise VerificationError(
                run_id,
                None,
                f"its inclusion is claimed under the bundle's checkpoint, which cannot be "
                f"used: {self.error.reason}",
                code=self.error.code,
            )
        checkpoint = self.checkpoint
        data = run_leaf(run_id=run_id, events=events, head=head, seal=seal)
        try:
            verify_inclusion(
                leaf_hash(data), claim.leaf, checkpoint.size, claim.proof, checkpoint.root
            )
        except VerificationError as exc:
            raise VerificationError(
                run_id,
                None,
                f"its inclusion proof (leaf {claim.leaf}) under checkpoint "
                f"{checkpoint.origin!r} of size {checkpoint.size} does not hold: {exc.reason}",
                code=exc.code,
            ) from None
        return Inclusion(
            leaf=claim.leaf,
            size=checkpoint.size,
            origin=checkpoint.origin,
            root=checkpoint.root,
            signed_by=self.signed_by,
        )


# -- the writer's side --------------------------------------------------------------------


class ExportCheckpoint:
    """The exporting database's tree of sealed runs, and the proofs of its runs under the
    checkpoint a bundle carries.

    ``leaves`` are the log's leaf hashes as they are now (after verifying every run),
    ``order`` the run of each leaf. Every subtree is hashed once, whether for the root a new
    checkpoint signs (:meth:`root_of`) or for the proofs. A checkpoint may be older than the
    log (:meth:`adopt` checks that its tree is a prefix of it): a run sealed after it has no
    proof and is refused.
    """

    def __init__(self, leaves: Sequence[bytes], order: Iterable[str]) -> None:
        self._leaves = list(leaves)
        self._memo: dict[tuple[int, int], bytes] = {}
        self._leaf_of: Mapping[str, int] = {run_id: i for i, run_id in enumerate(order)}
        #: the note :meth:`adopt` took, and its checkpoint (None until then)
        self.note = b""
        self.checkpoint: Checkpoint | None = None

    def root_of(self, size: int) -> bytes:
        """The root of the log's first ``size`` leaves."""
        return root(self._leaves[:size], self._memo)

    def adopt(self, note: bytes) -> ExportCheckpoint:
        """Carry ``note``, whose tree must be the log's first ``size`` leaves."""
        text, _ = parse_note(note)  # a NoteError says what is wrong with it
        checkpoint = parse_checkpoint(text)
        if checkpoint.size > len(self._leaves) or self.root_of(checkpoint.size) != checkpoint.root:
            raise VerificationError(
                "",
                None,
                f"the database's seal log ({len(self._leaves)} sealed runs) does not hold the "
                "checkpoint's tree: it is another database's, or sealed runs were dropped, "
                "rewritten or reordered since",
                code="checkpoint",
                where=f"checkpoint {checkpoint.origin} of size {checkpoint.size}",
            )
        self.note, self.checkpoint = note, checkpoint
        return self

    def inclusions(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any] | None]:
        """Each run's manifest ``inclusion`` member (null for a run without a seal); a sealed
        run the checkpoint's tree does not hold is a :class:`UsageError`."""
        checkpoint = self.checkpoint
        if checkpoint is None:
            raise UsageError("ExportCheckpoint.inclusions(): adopt a checkpoint note first")
        members: dict[str, dict[str, Any] | None] = {}
        wanted: list[tuple[str, int]] = []
        for run_id in run_ids:
            leaf = self._leaf_of.get(run_id)
            if leaf is None:
                members[run_id] = None
            elif leaf >= checkpoint.size:
                raise UsageError(
                    f"run {run_id} was sealed after the checkpoint (it is leaf {leaf}; the "
                    f"checkpoint's tree holds {checkpoint.size}): sign a new checkpoint "
                    "to export it with its inclusion proof",
                    option="checkpoint",
                )
            else:
                wanted.append((run_id, leaf))
        tree = self._leaves[: checkpoint.size]
        proofs = inclusion_proofs(tree, [leaf for _, leaf in wanted], self._memo)
        for (run_id, leaf), proof in zip(wanted, proofs, strict=True):
            members[run_id] = {"leaf": leaf, "proof": [node.hex() for node in proof]}
        return members
