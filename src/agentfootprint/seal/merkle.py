"""RFC 6962 / RFC 9162 Merkle trees: the log of a database's sealed runs.

Hashing is RFC 6962 §2.1 byte for byte, so the published vectors (RFC 6962, RFC 9162,
transparency-dev/merkle) reproduce here unchanged::

    leaf hash  = SHA-256(0x00 || leaf data)
    node hash  = SHA-256(0x01 || left || right)
    MTH({})    = SHA-256("")

The 0x00 / 0x01 prefixes are the tree's own domain separation (a leaf can never be read as a
node). The ``afp/v1/`` tags of :mod:`agentfootprint.logformat.hashing` live *inside* the leaf
data instead: a sealed run's leaf data is ``afp/v1/runleaf 0x00 canon({...})`` (see
:func:`run_leaf`), so no other agentfootprint digest input can be replayed as a leaf.

The builders (:func:`root`, :func:`inclusion_proof`, :func:`consistency_proof`) take the list
of *leaf hashes* (what a store keeps per leaf index) and are for the writer. The verifiers
(:func:`verify_inclusion`, :func:`verify_consistency`) implement RFC 9162 §2.1.3.2 and
§2.1.4.2 as written, after checking every input's type, range and length, so crafted input
is rejected in time logarithmic in the tree size. They raise :class:`ProofError`, whose
message says which proof, where, and why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.logformat.canonical import MAX_SAFE_INT, canon
from agentfootprint.logformat.hashing import domain_prefix

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "MAX_PROOF_HASHES",
    "ProofError",
    "consistency_proof",
    "consistency_proof_size",
    "inclusion_proof",
    "inclusion_proof_size",
    "inclusion_proofs",
    "leaf_hash",
    "node_hash",
    "root",
    "run_leaf",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE: Final = 32
#: SHA-256 of the empty string: the root of the tree with no leaves
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
#: no proof for a tree of at most MAX_SAFE_INT leaves needs more hashes than this
#: (an inclusion proof has at most ceil(log2(size)) hashes, a consistency proof one more)
MAX_PROOF_HASHES: Final = MAX_SAFE_INT.bit_length() + 1


class ProofError(VerificationError):
    """A Merkle proof (or a tree head it is checked against) does not prove what it claims.

    ``code`` is ``merkle/inclusion`` or ``merkle/consistency``; ``where`` names the proof
    (``inclusion proof of leaf 3 in a tree of 8``); ``reason`` says what failed.
    """

    def __init__(self, code: str, where: str, reason: str) -> None:
        super().__init__("", None, reason, code=code, where=where)


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 leaf hash: SHA-256(0x00 || data)."""
    return hashlib.sha256(b"\x00" + bytes(data)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def run_leaf(*, run_id: str, events: int, head: bytes, seal: bytes) -> bytes:
    """The leaf data of a sealed run: ``afp/v1/runleaf 0x00`` followed by the RFC 8785 bytes
    of ``{"v": 1, "run": run_id, "events": events, "head": hex(head), "seal": hex(seal)}``.

    ``events`` is the run's event count, ``head`` its last chain hash and ``seal`` the
    SHA-256 of the seal envelope's exact stored bytes. Its :func:`leaf_hash` is what the
    tree holds at the run's leaf index.
    """
    if type(run_id) is not str or not run_id:
        raise UsageError(f"run_leaf(run_id=...) must be a non-empty str, got {run_id!r}")
    if type(events) is not int or not 1 <= events <= MAX_SAFE_INT:
        raise UsageError(f"run_leaf(events=...) must be an int from 1 to 2**53-1, got {events!r}")
    for name, value in (("head", head), ("seal", seal)):
        if not isinstance(value, bytes) or len(value) != HASH_SIZE:
            raise UsageError(f"run_leaf({name}=...) must be 32 bytes, got {value!r}")
    body = {"v": 1, "run": run_id, "events": events, "head": head.hex(), "seal": seal.hex()}
    return domain_prefix("runleaf") + canon(body)


# -- builders (the writer's side) ---------------------------------------------------------


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def _checked_leaves(leaves: Sequence[bytes], what: str) -> Sequence[bytes]:
    for i, h in enumerate(leaves):
        if not isinstance(h, bytes) or len(h) != HASH_SIZE:
            raise UsageError(f"{what}: leaf hash {i} must be 32 bytes, got {h!r}")
    return leaves


def _mth(
    leaves: Sequence[bytes], lo: int, hi: int, memo: dict[tuple[int, int], bytes] | None = None
) -> bytes:
    """MTH(D[lo:hi]); with ``memo``, each subtree is hashed once however many proofs ask
    for it (the proofs of k leaves of one tree cost O(n + k log n), not O(k n))."""
    n = hi - lo
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return leaves[lo]
    if memo is not None:
        found = memo.get((lo, hi))
        if found is not None:
            return found
    k = _split(n)
    node = node_hash(_mth(leaves, lo, lo + k, memo), _mth(leaves, lo + k, hi, memo))
    if memo is not None:
        memo[(lo, hi)] = node
    return node


def root(leaves: Sequence[bytes], memo: dict[tuple[int, int], bytes] | None = None) -> bytes:
    """MTH over ``leaves``, a list of 32-byte *leaf hashes* (:func:`leaf_hash` of each entry).
    ``memo`` (shared with :func:`inclusion_proofs` over the same leaves) keeps every subtree
    hashed, so a root and proofs of one tree hash each subtree once."""
    return _mth(_checked_leaves(leaves, "root"), 0, len(leaves), memo)


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """RFC 9162 §2.1.3.1 PATH(index, D[n]) over the leaf hashes ``leaves``, lowest level first."""
    return inclusion_proofs(leaves, [index])[0]


def inclusion_proofs(
    leaves: Sequence[bytes],
    indexes: Sequence[int],
    memo: dict[tuple[int, int], bytes] | None = None,
) -> list[list[bytes]]:
    """:func:`inclusion_proof` of each of ``indexes`` in the one tree over ``leaves``, every
    subtree hashed once (what an export of many sealed runs needs; ``memo`` as for
    :func:`root`)."""
    _checked_leaves(leaves, "inclusion_proof")
    memo = {} if memo is None else memo
    proofs = []
    for index in indexes:
        if type(index) is not int or not 0 <= index < len(leaves):
            raise UsageError(
                f"inclusion_proof: index {index!r} is not a leaf of a tree of {len(leaves)}"
            )
        lo, hi, m = 0, len(leaves), index
        siblings: list[tuple[int, int]] = []
        while hi - lo > 1:
            k = _split(hi - lo)
            if m < k:
                siblings.append((lo + k, hi))
                hi = lo + k
            else:
                siblings.append((lo, lo + k))
                lo, m = lo + k, m - k
        proofs.append([_mth(leaves, a, b, memo) for a, b in reversed(siblings)])
    return proofs


def consistency_proof(leaves: Sequence[bytes], old_size: int) -> list[bytes]:
    """RFC 9162 §2.1.4.1 PROOF(old_size, D[n]) over the leaf hashes ``leaves``.

    ``old_size`` must be from 1 to ``len(leaves)``: a proof from the empty tree proves
    nothing and is refused (as transparency-dev/merkle does); equal sizes give ``[]``.
    """
    _checked_leaves(leaves, "consistency_proof")
    n = len(leaves)
    if type(old_size) is not int or not 1 <= old_size <= n:
        raise UsageError(f"consistency_proof: old size {old_size!r} must be from 1 to {n}")
    # SUBPROOF(m, D[lo:hi], b), unrolled: collect siblings from the top, emit bottom first
    out: list[bytes] = []
    lo, hi, m, complete = 0, n, old_size, True
    while True:
        if m == hi - lo:
            if not complete:
                out.append(_mth(leaves, lo, hi))
            break
        k = _split(hi - lo)
        if m <= k:
            out.append(_mth(leaves, lo + k, hi))
            hi = lo + k
        else:
            out.append(_mth(leaves, lo, lo + k))
            lo, m, complete = lo + k, m - k, False
    out.reverse()
    return out


# -- verifiers (the auditor's side) -------------------------------------------------------


def inclusion_proof_size(index: int, size: int) -> int:
    """How many hashes the inclusion proof of leaf ``index`` in a tree of ``size`` has."""
    inner = (index ^ (size - 1)).bit_length()
    return inner + (index >> inner).bit_count()


def consistency_proof_size(old_size: int, new_size: int) -> int:
    """How many hashes the consistency proof from ``old_size`` to ``new_size`` has
    (0 < old_size <= new_size)."""
    if old_size == new_size:
        return 0
    fork = ((old_size - 1) ^ (new_size - 1)).bit_length()
    border = ((old_size - 1) >> fork).bit_count()
    shift = (old_size & -old_size).bit_length() - 1
    seeded = 0 if old_size == 1 << shift else 1
    return seeded + (fork - shift) + border


def _check_int(code: str, where: str, name: str, value: object) -> int:
    if type(value) is not int or not 0 <= value <= MAX_SAFE_INT:
        raise ProofError(code, where, f"{name} must be an int from 0 to 2**53-1, got {value!r}")
    return value


def _check_hash(code: str, where: str, name: str, value: object) -> bytes:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        got = f"{len(value)} bytes" if isinstance(value, bytes) else type(value).__name__
        raise ProofError(code, where, f"{name} must be 32 bytes, got {got}")
    return value


def _check_proof(code: str, where: str, proof: object, want: int) -> list[bytes]:
    if not isinstance(proof, list | tuple):
        raise ProofError(code, where, f"the proof must be a list of hashes, got {type(proof)}")
    if len(proof) != want:
        raise ProofError(code, where, f"the proof has {len(proof)} hashes, this one needs {want}")
    return [_check_hash(code, where, f"proof hash {i}", h) for i, h in enumerate(proof)]


def _mismatch(code: str, where: str, what: str, got: bytes, want: bytes) -> ProofError:
    return ProofError(code, where, f"{what} {got.hex()} does not match {want.hex()}")


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves whose root
    is ``root`` (RFC 9162 §2.1.3.2). Returns None; raises :class:`ProofError`."""
    code = "merkle/inclusion"
    where = f"inclusion proof of leaf {index!r} in a tree of {size!r}"
    index = _check_int(code, where, "the leaf index", index)
    size = _check_int(code, where, "the tree size", size)
    if index >= size:
        raise ProofError(code, where, f"leaf index {index} is not below the tree size {size}")
    r = _check_hash(code, where, "the leaf hash", leaf_hash)
    want_root = _check_hash(code, where, "the root hash", root)
    path = _check_proof(code, where, proof, inclusion_proof_size(index, size))
    # RFC 9162 §2.1.3.2, steps 2 to 5
    fn, sn = index, size - 1
    for p in path:
        if sn == 0:
            raise ProofError(code, where, "the proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while fn and not fn & 1:  # LSB(fn) not set: shift until it is, or fn is 0
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(code, where, "the proof is shorter than the path to the root")
    if r != want_root:
        raise _mismatch(code, where, "the root the proof leads to", r, want_root)


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``old_size`` leaves with root ``old_root`` is a prefix of the
    tree of ``new_size`` leaves with root ``new_root`` (RFC 9162 §2.1.4.2).

    ``old_size`` must be at least 1 (a proof from the empty tree is meaningless: the caller
    decides what an empty old tree means); equal sizes need an empty proof and equal roots.
    Returns None; raises :class:`ProofError`."""
    code = "merkle/consistency"
    where = f"consistency proof from tree size {old_size!r} to {new_size!r}"
    first = _check_int(code, where, "the old tree size", old_size)
    second = _check_int(code, where, "the new tree size", new_size)
    first_hash = _check_hash(code, where, "the old root", old_root)
    second_hash = _check_hash(code, where, "the new root", new_root)
    if first == 0:
        raise ProofError(code, where, "a consistency proof from the empty tree proves nothing")
    if first > second:
        raise ProofError(code, where, f"the tree shrank from {first} to {second} leaves")
    path = _check_proof(code, where, proof, consistency_proof_size(first, second))
    if first == second:
        if first_hash != second_hash:
            raise _mismatch(code, where, "the new root at the same size", second_hash, first_hash)
        return
    # RFC 9162 §2.1.4.2, steps 1 to 7
    if first & (first - 1) == 0:  # an exact power of two: the old root is the seed
        path = [first_hash, *path]
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError(code, where, "the proof is longer than the path to the new root")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while fn and not fn & 1:  # LSB(fn) not set: shift until it is, or fn is 0
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(code, where, "the proof is shorter than the path to the new root")
    if fr != first_hash:
        raise _mismatch(code, where, "the old root the proof leads to", fr, first_hash)
    if sr != second_hash:
        raise _mismatch(code, where, "the new root the proof leads to", sr, second_hash)
