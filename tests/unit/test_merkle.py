"""RFC 6962 / RFC 9162 Merkle trees: published vectors, mutation classes, crafted input,
and the property that every proof the builder makes verifies and no one-byte change does."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.logformat.hashing import domain_prefix
from agentfootprint.seal import merkle
from agentfootprint.seal.merkle import (
    EMPTY_ROOT,
    ProofError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root,
    run_leaf,
    verify_consistency,
    verify_inclusion,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "merkle"
DOC = Path(__file__).resolve().parents[2] / "docs" / "merkle.md"
REFERENCE = json.loads((DATA / "reference.json").read_text())
INCLUSION = json.loads((DATA / "inclusion.json").read_text())
CONSISTENCY = json.loads((DATA / "consistency.json").read_text())
LEAVES = [leaf_hash(bytes.fromhex(x)) for x in REFERENCE["leaf_inputs"]]

#: probes where we deliberately judge differently from transparency-dev/merkle, and why
STRICTER = {
    "testdata/consistency/additional/sizes-are-equal-one-and-proof-is-empty.json": (
        "its roots are 12 bytes ('don't care 2'): Go compares them without a length check, "
        "we require every hash to be exactly 32 bytes"
    ),
}


def b64(value: str | None) -> bytes:
    return b"" if value is None else base64.b64decode(value)


def proof_of(case: dict[str, Any]) -> list[bytes]:
    return [b64(p) for p in case["proof"] or []]


def test_vector_files_name_their_source() -> None:
    for doc in (INCLUSION, CONSISTENCY, REFERENCE):
        assert doc["source"] == "https://github.com/transparency-dev/merkle"
        assert re.fullmatch(r"[0-9a-f]{40}", doc["commit"])
    assert len(INCLUSION["cases"]) == 98 and len(CONSISTENCY["cases"]) == 98


@pytest.mark.parametrize("case", REFERENCE["hasher"], ids=lambda c: c["desc"])
def test_rfc6962_hasher_vectors(case: dict[str, str]) -> None:
    if case["kind"] == "empty":
        got = root([])
        assert got == EMPTY_ROOT
    elif case["kind"] == "leaf":
        got = leaf_hash(bytes.fromhex(case["data"]))
    else:
        got = node_hash(bytes.fromhex(case["left"]), bytes.fromhex(case["right"]))
    assert got.hex() == case["want"]


def test_reference_root_hashes() -> None:
    for n, want in enumerate(REFERENCE["root_hashes"]):
        assert root(LEAVES[:n]).hex() == want, n


def test_reference_node_hashes() -> None:
    for level, hashes in enumerate(REFERENCE["node_hashes"]):
        width = 1 << level
        for i, want in enumerate(hashes):
            assert root(LEAVES[i * width : (i + 1) * width]).hex() == want, (level, i)


def test_prefixes_give_second_preimage_resistance() -> None:
    """rfc6962_test.go TestRFC6962HasherCollisions: a node is never the leaf of its children."""
    h1, h2 = leaf_hash(b"Hello"), leaf_hash(b"World")
    assert h1 != h2
    assert node_hash(h1, h2) != leaf_hash(h1 + h2)
    assert node_hash(h1, h2) != node_hash(h2, h1)


def _judge_inclusion(case: dict[str, Any]) -> ProofError | None:
    try:
        verify_inclusion(
            b64(case["leafHash"]), case["leafIdx"], case["treeSize"], proof_of(case),
            b64(case["root"]),
        )  # fmt: skip
    except ProofError as exc:
        return exc
    return None


def _judge_consistency(case: dict[str, Any]) -> ProofError | None:
    try:
        verify_consistency(
            case["size1"], case["size2"], b64(case["root1"]), b64(case["root2"]), proof_of(case)
        )
    except ProofError as exc:
        return exc
    return None


@pytest.mark.parametrize("case", INCLUSION["cases"], ids=lambda c: c["file"][len("testdata/") :])
def test_inclusion_probes(case: dict[str, Any]) -> None:
    err = _judge_inclusion(case)
    assert (err is not None) == (case["wantErr"] or case["file"] in STRICTER), err
    if err is not None:
        assert err.code == "merkle/inclusion"
        assert str(err).startswith("inclusion proof of leaf ")


@pytest.mark.parametrize("case", CONSISTENCY["cases"], ids=lambda c: c["file"][len("testdata/") :])
def test_consistency_probes(case: dict[str, Any]) -> None:
    err = _judge_consistency(case)
    assert (err is not None) == (case["wantErr"] or case["file"] in STRICTER), err
    if err is not None:
        assert err.code == "merkle/consistency"
        assert str(err).startswith("consistency proof from tree size ")
        assert isinstance(err, VerificationError)


def test_probes_cover_every_mutation_class() -> None:
    """The transparency-dev classes are all there, and each is rejected (tests above)."""
    descs = {c["desc"] for c in INCLUSION["cases"] + CONSISTENCY["cases"]}
    for wanted in [
        "happy path", "leafIdx plus @1", "leafIdx sub @1", "leafIdx XOR @2",
        "treeSize mul @2", "treeSize div @2", "size1 plus @1", "size2 mul @2",
        "removed component", "truncated proof", "inserted component", "trailing garbage",
        "preceding garbage", "modified proof[0] bit @3", "modified proof@0 bit @4",
        "swapped roots", "wrong root1", "random root", "empty root", "wrong leaf",
    ]:  # fmt: skip
        assert wanted in descs, wanted


def test_builder_reproduces_the_happy_paths() -> None:
    seen = 0
    for case in INCLUSION["cases"]:
        n = case["treeSize"]
        if not case["wantErr"] and n <= len(LEAVES) and b64(case["root"]) == root(LEAVES[:n]):
            assert inclusion_proof(LEAVES[:n], case["leafIdx"]) == proof_of(case)
            seen += 1
    for case in CONSISTENCY["cases"]:
        n = case["size2"]
        if not case["wantErr"] and n <= len(LEAVES) and b64(case["root2"]) == root(LEAVES[:n]):
            assert consistency_proof(LEAVES[:n], case["size1"]) == proof_of(case)
            seen += 1
    assert seen == 10


def _flip(data: bytes, i: int, bit: int = 0) -> bytes:
    return data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1 :]


def _inclusion_mutants(
    leaves: list[bytes], i: int
) -> list[tuple[str, tuple[bytes, int, int, list[bytes], bytes]]]:
    n, r, p, lh = len(leaves), root(leaves), inclusion_proof(leaves, i), leaves[i]
    junk = hashlib.sha256(b"junk").digest()
    out: list[tuple[str, tuple[bytes, int, int, list[bytes], bytes]]] = [
        ("wrong leaf", (leaf_hash(b"other"), i, n, p, r)),
        ("index+1", (lh, i + 1, n, p, r)),
        ("index-1", (lh, i - 1, n, p, r)),
        ("index^2", (lh, i ^ 2, n, p, r)),
        ("size*2", (lh, i, n * 2, p, r)),
        ("size//2", (lh, i, n // 2, p, r)),
        ("wrong root", (lh, i, n, p, junk)),
        ("empty root", (lh, i, n, p, EMPTY_ROOT)),
        *([("root as leaf", (r, i, n, p, r))] if n > 1 else []),  # one leaf: the root
        ("extended at end", (lh, i, n, [*p, junk], r)),
        ("extended at start", (lh, i, n, [junk, *p], r)),
        ("root appended", (lh, i, n, [*p, r], r)),
    ]
    if p:
        out.append(("truncated", (lh, i, n, p[:-1], r)))
        out.append(("first removed", (lh, i, n, p[1:], r)))
        out.append(("duplicated", (lh, i, n, [*p, p[-1]], r)))
        for k in range(len(p)):
            flipped = [*p[:k], _flip(p[k], 7, 3), *p[k + 1 :]]
            out.append((f"flipped bit in proof[{k}]", (lh, i, n, flipped, r)))
        for k in range(len(p) - 1):
            if p[k] != p[k + 1]:
                swapped = [*p[:k], p[k + 1], p[k], *p[k + 2 :]]
                out.append((f"swapped nodes {k},{k + 1}", (lh, i, n, swapped, r)))
    return out


@pytest.mark.parametrize("n", range(1, 20))
def test_every_inclusion_mutation_is_rejected(n: int) -> None:
    leaves = [leaf_hash(bytes([k])) for k in range(n)]
    for i in range(n):
        verify_inclusion(leaves[i], i, n, inclusion_proof(leaves, i), root(leaves))
        for _name, args in _inclusion_mutants(leaves, i):
            with pytest.raises(ProofError):
                verify_inclusion(*args)


def test_size_and_root_come_together() -> None:
    """An inclusion proof checks a (size, root) pair, not the size alone: leaf 0's proof in a
    tree of 3 also leads to that root under size 4, because the paths have one shape (and so
    does a consistency proof's new size). A
    verifier must take size and root from the same signed checkpoint (docs/merkle.md)."""
    leaves = LEAVES[:3]
    verify_inclusion(leaves[0], 0, 4, inclusion_proof(leaves, 0), root(leaves))
    verify_consistency(1, 4, leaves[0], root(leaves), consistency_proof(leaves, 1))


@pytest.mark.parametrize("n", range(2, 20))
def test_every_consistency_mutation_is_rejected(n: int) -> None:
    leaves = [leaf_hash(bytes([k])) for k in range(n)]
    junk = hashlib.sha256(b"junk").digest()
    new = root(leaves)
    for m in range(1, n):
        old, p = root(leaves[:m]), consistency_proof(leaves, m)
        verify_consistency(m, n, old, new, p)
        mutants = [
            (m + 1, n, old, new, p), (m - 1, n, old, new, p), (m, n * 2, old, new, p),
            (m, n // 2, old, new, p), (n, m, new, old, p),
            (m, n, new, old, p), (m, n, junk, new, p), (m, n, old, junk, p),
            (m, n, old, new, p[:-1]), (m, n, old, new, p[1:]), (m, n, old, new, [*p, junk]),
            (m, n, old, new, [junk, *p]), (m, n, old, new, [old, *p]),
            (m, n, old, new, [*p, new]), (m, n, old, new, []),
        ]  # fmt: skip
        for k in range(len(p)):
            mutants.append((m, n, old, new, [*p[:k], _flip(p[k], 31, 7), *p[k + 1 :]]))
        for k in range(len(p) - 1):
            if p[k] != p[k + 1]:
                mutants.append((m, n, old, new, [*p[:k], p[k + 1], p[k], *p[k + 2 :]]))
        for args in mutants:
            if args[0] == 0 or (args[0], args[1]) == (m, n) or args[0] <= args[1]:
                with pytest.raises(ProofError):
                    verify_consistency(*args)
            else:
                with pytest.raises(ProofError, match="shrank"):
                    verify_consistency(*args)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ((LEAVES[0], True, 1, [], LEAVES[0]), "leaf index must be an int"),
        ((LEAVES[0], 0, True, [], LEAVES[0]), "tree size must be an int"),
        ((LEAVES[0], -1, 1, [], LEAVES[0]), "leaf index must be an int"),
        ((LEAVES[0], 0, 2**53, [], LEAVES[0]), "tree size must be an int"),
        ((LEAVES[0], 0, 2**64 - 1, [], LEAVES[0]), "tree size must be an int"),
        ((LEAVES[0], 0, 0, [], EMPTY_ROOT), "not below the tree size"),
        ((LEAVES[0][:31], 0, 1, [], LEAVES[0]), "leaf hash must be 32 bytes, got 31"),
        ((LEAVES[0] + b"\0", 0, 1, [], LEAVES[0]), "leaf hash must be 32 bytes, got 33"),
        ((LEAVES[0].hex(), 0, 1, [], LEAVES[0]), "leaf hash must be 32 bytes, got str"),
        ((LEAVES[0], 0, 1, [], bytearray(LEAVES[0])), "root hash must be 32 bytes"),
        ((LEAVES[0], 0, 2, b"x" * 32, LEAVES[0]), "must be a list of hashes"),
        ((LEAVES[0], 0, 2, [LEAVES[1][:16]], LEAVES[0]), "proof hash 0 must be 32 bytes"),
        ((LEAVES[0], 0, 2, [LEAVES[1]] * 10**6, LEAVES[0]), "has 1000000 hashes, this one needs 1"),
        ((LEAVES[0], 0, 2**53 - 1, [LEAVES[0]] * 2, LEAVES[0]), "needs 53"),
    ],
)
def test_crafted_inclusion_input_is_rejected_fast(
    args: Any, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rejected before any work that grows with the input: at most a path's worth (64) of
    proof hashes read and hashed, however long the proof or large the tree claimed."""
    work = _count_work(monkeypatch)
    args = (*args[:3], _Counted(args[3], work) if isinstance(args[3], list) else args[3], args[4])
    with pytest.raises(ProofError, match=reason):
        verify_inclusion(*args)
    assert work["read"] <= 64 and work["hashed"] <= 64, work


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ((0, 0, EMPTY_ROOT, EMPTY_ROOT, []), "from the empty tree proves nothing"),
        ((1.0, 2, LEAVES[0], LEAVES[0], []), "old tree size must be an int"),
        ((1, 2**53, LEAVES[0], LEAVES[0], []), "new tree size must be an int"),
        ((3, 2, LEAVES[0], LEAVES[0], []), "shrank from 3 to 2"),
        ((1, 1, LEAVES[0], LEAVES[1], []), "does not match"),
        ((1, 1, LEAVES[0], LEAVES[0], [LEAVES[0]]), "has 1 hashes, this one needs 0"),
        ((1, 2, LEAVES[0], LEAVES[0], []), "has 0 hashes, this one needs 1"),
        ((1, 2, LEAVES[0], LEAVES[0][:8], [LEAVES[0]]), "new root must be 32 bytes"),
        ((1, 2**53 - 1, LEAVES[0], LEAVES[0], [LEAVES[0]] * 10**6), "this one needs 53"),
    ],
)
def test_crafted_consistency_input_is_rejected_fast(
    args: Any, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = _count_work(monkeypatch)
    args = (*args[:4], _Counted(args[4], work))
    with pytest.raises(ProofError, match=reason):
        verify_consistency(*args)
    assert work["read"] <= 64 and work["hashed"] <= 2 * 64, work


class _Counted(list[Any]):
    """A proof that counts the hashes read from it (its length is free, as for any list)."""

    def __init__(self, items: list[Any], work: dict[str, int]) -> None:
        super().__init__(items)
        self.work = work

    def __iter__(self) -> Any:
        for item in super().__iter__():
            self.work["read"] += 1
            yield item

    def __getitem__(self, key: Any) -> Any:
        found = super().__getitem__(key)
        self.work["read"] += len(found) if isinstance(key, slice) else 1
        return found


def _count_work(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of proof hashes read and of interior nodes hashed by the verifier."""
    work = {"read": 0, "hashed": 0}
    real = merkle.node_hash

    def counted(left: bytes, right: bytes) -> bytes:
        work["hashed"] += 1
        return real(left, right)

    monkeypatch.setattr(merkle, "node_hash", counted)
    return work


def test_proof_sizes_are_logarithmic() -> None:
    biggest = max(
        max(merkle.inclusion_proof_size(i, n), merkle.consistency_proof_size(i + 1, n))
        for n in (2**53 - 1, 2**52 + 1, 10**15)
        for i in (0, 1, n // 3, n - 2)
    )
    assert biggest <= merkle.MAX_PROOF_HASHES


def test_builders_refuse_misuse() -> None:
    with pytest.raises(UsageError):
        inclusion_proof(LEAVES, 8)
    with pytest.raises(UsageError):
        inclusion_proof([], 0)
    with pytest.raises(UsageError):
        consistency_proof(LEAVES, 0)
    with pytest.raises(UsageError):
        consistency_proof(LEAVES, 9)
    with pytest.raises(UsageError, match="leaf hash 1 must be 32 bytes"):
        root([LEAVES[0], b"short"])
    assert consistency_proof(LEAVES, 8) == []


def _tree(count: int) -> list[bytes]:
    return [leaf_hash(f"leaf {k}".encode()) for k in range(count)]


@given(st.integers(1, 300), st.data())
@example(1, None).via("a tree of one leaf")
@example(64, None).via("a power of two")
def test_every_inclusion_proof_verifies_and_no_byte_flip_does(count: int, data: Any) -> None:
    leaves = _tree(count)
    top = root(leaves)
    i = count - 1 if data is None else data.draw(st.integers(0, count - 1), label="index")
    proof = inclusion_proof(leaves, i)
    verify_inclusion(leaves[i], i, count, proof, top)
    total = 32 * (len(proof) + 2)
    pos = total - 1 if data is None else data.draw(st.integers(0, total - 1), label="byte")
    bit = 0 if data is None else data.draw(st.integers(0, 7), label="bit")
    parts = [leaves[i], top, *proof]
    parts[pos // 32] = _flip(parts[pos // 32], pos % 32, bit)
    with pytest.raises(ProofError):
        verify_inclusion(parts[0], i, count, parts[2:], parts[1])


@given(st.integers(1, 300), st.data())
@example(1, None).via("equal sizes of one leaf")
@example(65, None).via("just past a power of two")
def test_every_consistency_proof_verifies_and_no_byte_flip_does(count: int, data: Any) -> None:
    leaves = _tree(count)
    m = 1 if data is None else data.draw(st.integers(1, count), label="old size")
    old, new = root(leaves[:m]), root(leaves)
    proof = consistency_proof(leaves, m)
    verify_consistency(m, count, old, new, proof)
    total = 32 * (len(proof) + 2)
    pos = total - 1 if data is None else data.draw(st.integers(0, total - 1), label="byte")
    bit = 7 if data is None else data.draw(st.integers(0, 7), label="bit")
    parts = [old, new, *proof]
    parts[pos // 32] = _flip(parts[pos // 32], pos % 32, bit)
    with pytest.raises(ProofError):
        verify_consistency(m, count, parts[0], parts[1], parts[2:])


# -- the worked example of docs/merkle.md ------------------------------------------------

RUNS = [
    ("run-a", 4, "11" * 32, "aa" * 32),
    ("run-b", 7, "22" * 32, "bb" * 32),
    ("run-c", 2, "33" * 32, "cc" * 32),
]


def _worked() -> dict[str, Any]:
    datas = [
        run_leaf(run_id=r, events=e, head=bytes.fromhex(h), seal=bytes.fromhex(s))
        for r, e, h, s in RUNS
    ]
    leaves = [leaf_hash(d) for d in datas]
    return {
        "leaf0_data": datas[0],
        "leaves": [h.hex() for h in leaves],
        "root2": root(leaves[:2]).hex(),
        "root3": root(leaves).hex(),
        "inclusion1": [h.hex() for h in inclusion_proof(leaves, 1)],
        "consistency2_3": [h.hex() for h in consistency_proof(leaves, 2)],
    }


def test_run_leaf_bytes() -> None:
    data = run_leaf(run_id="run-a", events=4, head=bytes(32), seal=b"\xff" * 32)
    assert data.startswith(domain_prefix("runleaf") + b'{"events":4,')
    assert data.endswith(b'"run":"run-a","seal":"' + b"ff" * 32 + b'","v":1}')
    for bad in (
        {"run_id": "", "events": 1, "head": bytes(32), "seal": bytes(32)},
        {"run_id": "r", "events": 0, "head": bytes(32), "seal": bytes(32)},
        {"run_id": "r", "events": True, "head": bytes(32), "seal": bytes(32)},
        {"run_id": "r", "events": 1, "head": bytes(31), "seal": bytes(32)},
        {"run_id": "r", "events": 1, "head": bytes(32), "seal": "00" * 32},
    ):
        with pytest.raises(UsageError):
            run_leaf(**bad)


def test_worked_example_in_the_docs() -> None:
    """docs/merkle.md section 7: its code runs, and its values are the library's."""
    doc = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(DOC), "exec"), {})
    worked = _worked()
    assert worked["leaf0_data"].startswith(b'afp/v1/runleaf\x00{"events":4,"head":"1111')
    for value in [*worked["leaves"], worked["root2"], worked["root3"]]:
        assert value in doc, value
    assert worked["inclusion1"] == [worked["leaves"][0], worked["leaves"][2]]
    assert worked["consistency2_3"] == [worked["leaves"][2]]
    assert "inclusion proof of run-b (leaf 1) under size 3: [l0, l2]" in doc
    assert "consistency proof from size 2 to 3: [l2]" in doc
