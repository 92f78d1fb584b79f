"""C2SP signed notes and tlog checkpoints: the published examples reproduce byte for byte,
golang.org/x/mod/sumdb/note's keys and signatures, strict parsing, the signed-note trust
rules, and the Wycheproof Ed25519 verification vectors."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.seal import note as note_module
from agentfootprint.seal.merkle import leaf_hash, root
from agentfootprint.seal.note import (
    MAX_SIGNATURES,
    Checkpoint,
    NoteError,
    NoteSignature,
    VerifierKey,
    ed25519_verify,
    format_checkpoint,
    format_note,
    key_id,
    open_checkpoint,
    open_note,
    parse_checkpoint,
    parse_note,
    sign_checkpoint,
    sign_note,
)
from agentfootprint.testing.seals import signature_variants

DATA = Path(__file__).resolve().parents[1] / "data" / "note"
#: the Wycheproof Ed25519 vectors (one copy in the tests: tests/data/wycheproof), flattened
_VECTORS = json.loads(
    (DATA.parent / "wycheproof" / "ed25519_test.json").read_text(encoding="utf-8")
)
WYCHEPROOF = {
    "source": "https://github.com/C2SP/wycheproof",
    "commit": _VECTORS["commit"],
    "cases": [
        {"pk": group["publicKey"]["pk"], **test}
        for group in _VECTORS["testGroups"]
        for test in group["tests"]
    ],
}

# -- c2sp.org/signed-note (C2SP/C2SP 5ba5ee830903e91240fc6f9f3a7a9293d49e69c9) -------------
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = (
    "This is an example message.\n"
    "\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mF"
    "XmRKuwHjG1Yu72IneyaQM=\n"
).encode()
QUASIMODO = (
    "Ognuno sta solo sul cuor della terra\n"
    "trafitto da un raggio di sole:\n"
    "\n"
    "ed è subito sera.\n"
    "\n"
    "— quasimodo.example/salvatore NnugSzTjtVAewIS+Z/iJhUPeFDkO/5QQ2i5ddnGITLlC+EhfLW9oJKONrMo"
    "uFSQU0xMcXxj99ihAQwaqP3ZekRwNtIc=\n"
).encode()
# -- c2sp.org/tlog-checkpoint --------------------------------------------------------------
SOFA = (
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zh"
    "cyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
).encode()
# -- golang.org/x/mod sumdb/note/note_test.go (golang/mod fe2ec04f7c3c3aa6fad97631aafcff6e49e2d1db)
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotp"
    "RZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox"
    "33WWd1RvMc+QQ=\n"
)
PETER = VerifierKey.from_vkey(PETER_VKEY)
ENOCH = VerifierKey.from_vkey(ENOCH_VKEY)

# RFC 8032 section 7.1, test 1: the key of the docs/merkle.md worked example
RFC8032_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
ORIGIN = "example.com/agentfootprint/demo"


def go_private_key(skey: str) -> Ed25519PrivateKey:
    """The seed of a sumdb/note private key text (PRIVATE+KEY+name+hash+base64(0x01||seed))."""
    raw = base64.b64decode(skey.split("+", 4)[4])
    assert raw[0] == 1 and len(raw) == 33
    return Ed25519PrivateKey.from_private_bytes(raw[1:])


def demo_key() -> tuple[Ed25519PrivateKey, VerifierKey]:
    private = Ed25519PrivateKey.from_private_bytes(RFC8032_SEED)
    return private, VerifierKey.from_private_key(ORIGIN, private)


def demo_checkpoint(size: int = 3) -> Checkpoint:
    leaves = [leaf_hash(bytes([k])) for k in range(size)]
    return Checkpoint(ORIGIN, size, root(leaves))


def rejected(data: bytes, trusted: list[VerifierKey], code: str) -> NoteError:
    with pytest.raises(NoteError) as caught:
        open_note(data, trusted)
    assert caught.value.code == code, caught.value
    assert isinstance(caught.value, VerificationError)
    return caught.value


# -- published examples --------------------------------------------------------------------


def test_c2sp_signed_note_example_verifies() -> None:
    key = VerifierKey.from_vkey(C2SP_VKEY)
    assert key.vkey == C2SP_VKEY
    opened = open_note(C2SP_NOTE, [key])
    assert opened.text == "This is an example message.\n"
    assert opened.verified == (key,) and opened.ignored == ()
    text, sigs = parse_note(C2SP_NOTE)
    assert format_note(text, sigs) == C2SP_NOTE


def test_c2sp_quasimodo_example_parses_with_its_blank_line() -> None:
    text, sigs = parse_note(QUASIMODO)
    assert text.endswith("\n\ned è subito sera.\n")
    assert [s.name for s in sigs] == ["quasimodo.example/salvatore"]
    assert format_note(text, sigs) == QUASIMODO
    # its key is not published: nobody trusted signed it
    rejected(QUASIMODO, [VerifierKey.from_vkey(C2SP_VKEY)], "note/unverified")


def test_tlog_checkpoint_example_round_trips() -> None:
    text, sigs = parse_note(SOFA)
    checkpoint = parse_checkpoint(text)
    assert checkpoint.origin == "example.com/behind-the-sofa"
    assert checkpoint.size == 20852163
    assert base64.b64encode(checkpoint.root) == b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
    assert checkpoint.extensions == ()
    assert format_checkpoint(checkpoint, sigs) == SOFA


def test_go_vkeys_and_key_ids() -> None:
    assert PETER.vkey == PETER_VKEY and ENOCH.vkey == ENOCH_VKEY
    assert key_id(PETER.name, PETER.public_key).hex() == "c74f20a3"
    private = go_private_key(PETER_SKEY)
    assert VerifierKey.from_private_key("PeterNeumann", private) == PETER


def test_go_sign_reproduces_byte_for_byte() -> None:
    note = sign_note(GO_TEXT, [("PeterNeumann", go_private_key(PETER_SKEY))])
    assert note == (GO_TEXT + "\n" + PETER_SIG).encode()


def test_go_open_one_of_two_signatures() -> None:
    data = (GO_TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode()
    opened = open_note(data, [PETER])
    assert opened.text == GO_TEXT
    assert opened.verified == (PETER,)
    assert [(s.name, s.key_id.hex()) for s in opened.ignored] == [("EnochRoot", "af0cfe78")]
    both = open_note(data, [PETER, ENOCH])
    assert both.verified == (PETER, ENOCH) and both.ignored == ()
    err = rejected(data, [], "note/unverified")
    assert "PeterNeumann+c74f20a3" in str(err) and "EnochRoot+af0cfe78" in str(err)


def test_go_duplicated_signatures_count_once() -> None:
    data = (GO_TEXT + "\n" + PETER_SIG + PETER_SIG + ENOCH_SIG + ENOCH_SIG).encode()
    opened = open_note(data, [PETER])
    assert opened.verified == (PETER,) and len(opened.ignored) == 1


def test_go_invalid_signature_rejects_the_note() -> None:
    data = (GO_TEXT + "\n" + PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]).encode()
    err = rejected(data, [PETER], "note/signature")
    assert "PeterNeumann+c74f20a3 does not verify" in str(err)


@pytest.mark.parametrize(
    "message",
    [
        GO_TEXT,
        GO_TEXT + "\n",
        GO_TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + GO_TEXT + "\n" + PETER_SIG,
        GO_TEXT + "\n— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXg"
        "KvqfqdngotpRZb6KE6RyyBwJnAM=",
        GO_TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
        GO_TEXT + "\n" + PETER_SIG * (MAX_SIGNATURES + 1),
    ],
    ids=["no-sigs", "blank-only", "no-final-newline", "control", "bad-name", "extra-line", "101"],
)
def test_go_malformed_notes(message: str) -> None:
    rejected(message.encode(), [PETER], "note/malformed")


def test_go_bad_utf8() -> None:
    rejected(b"\xff" + (GO_TEXT + "\n" + PETER_SIG).encode(), [PETER], "note/malformed")


def test_go_vkey_manglings_are_refused() -> None:
    """note_test.go TestNewVerifier: every proper substring, every byte plus one."""
    b = PETER_VKEY.encode()
    for i in range(len(b) + 1):
        for j in range(i + 1, len(b) + 1):
            if (i, j) != (0, len(b)):
                with pytest.raises(UsageError):
                    VerifierKey.from_vkey(b[i:j].decode())
    for i in range(len(b)):
        mangled = bytearray(b)
        mangled[i] += 1
        with pytest.raises(UsageError):
            VerifierKey.from_vkey(mangled.decode("utf-8", "replace"))
    long_key = b"\x01" + bytes(33)
    long_id = hashlib.sha256(b"PeterNeumann\n" + long_key).digest()[:4].hex()
    for bad, reason in [
        (f"PeterNeumann+{long_id}+{base64.b64encode(long_key).decode()}", "is 32 bytes, got 33"),
        ("PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==", "base64"),
        ("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "not Ed25519"),
        ("PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "lowercase hex"),
        (" PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "has a space"),
        (PETER_VKEY + "\n", "canonical"),
    ]:
        with pytest.raises(UsageError, match=reason):
            VerifierKey.from_vkey(bad)


# -- checkpoints: signing, opening, negatives --------------------------------------------


def test_checkpoint_sign_and_open() -> None:
    private, key = demo_key()
    checkpoint = demo_checkpoint()
    note = sign_checkpoint(checkpoint, ORIGIN, private)
    got, opened = open_checkpoint(note, [key], origin=ORIGIN)
    assert got == checkpoint and opened.verified == (key,)
    assert note.decode().splitlines()[:3] == [ORIGIN, "3", ROOT64]


def test_checkpoint_with_extension_lines() -> None:
    private, key = demo_key()
    checkpoint = Checkpoint(ORIGIN, 3, demo_checkpoint().root, ("ext one", "ext two"))
    got, _ = open_checkpoint(sign_checkpoint(checkpoint, ORIGIN, private), [key])
    assert got == checkpoint


def test_empty_tree_checkpoint() -> None:
    private, key = demo_key()
    checkpoint = Checkpoint(ORIGIN, 0, root([]))
    note = sign_checkpoint(checkpoint, ORIGIN, private)
    assert b"\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n" in note
    assert open_checkpoint(note, [key])[0] == checkpoint


def test_wrong_key_is_ignored_so_the_note_is_unverified() -> None:
    private, _ = demo_key()
    other = VerifierKey.from_private_key(ORIGIN, Ed25519PrivateKey.generate())
    note = sign_checkpoint(demo_checkpoint(), ORIGIN, private)
    rejected(note, [other], "note/unverified")


def test_untrusted_key_only() -> None:
    stranger = Ed25519PrivateKey.generate()
    note = sign_checkpoint(demo_checkpoint(), ORIGIN, stranger)
    _, key = demo_key()
    rejected(note, [key], "note/unverified")
    rejected(note, [], "note/unverified")


def test_empty_signatures() -> None:
    body = demo_checkpoint().text().encode()
    rejected(body, [demo_key()[1]], "note/malformed")
    rejected(body + b"\n", [demo_key()[1]], "note/malformed")
    with pytest.raises(UsageError):
        format_note(demo_checkpoint().text(), [])
    with pytest.raises(UsageError):
        sign_note(demo_checkpoint().text(), [])


def test_signature_under_a_different_name() -> None:
    """The same key and signature bytes, relabelled: name and key ID no longer match."""
    private, key = demo_key()
    note = sign_checkpoint(demo_checkpoint(), ORIGIN, private).decode()
    renamed = note.replace("— " + ORIGIN, "— example.com/other")
    rejected(renamed.encode(), [key], "note/unverified")
    # and a trusted key of that other name, same public key: its key ID differs
    alias = VerifierKey("example.com/other", key.public_key)
    rejected(renamed.encode(), [alias], "note/unverified")


def test_modified_body() -> None:
    private, key = demo_key()
    note = sign_checkpoint(demo_checkpoint(), ORIGIN, private)
    for old, new in [(b"\n3\n", b"\n4\n"), (ORIGIN.encode(), b"example.com/agentfootprint/demp")]:
        rejected(note.replace(old, new, 1), [key], "note/signature")


def test_a_failing_trusted_signature_rejects_despite_a_good_one() -> None:
    private, key = demo_key()
    good = sign_checkpoint(demo_checkpoint(), ORIGIN, private)
    second_private = Ed25519PrivateKey.generate()
    second = VerifierKey.from_private_key("witness.example/w1", second_private)
    other_body = sign_note(demo_checkpoint(4).text(), [("witness.example/w1", second_private)])
    forged = good + other_body.split(b"\n\n")[-1]
    rejected(forged, [key, second], "note/signature")
    assert open_note(forged, [key]).verified == (key,)  # the witness is not trusted here


def test_origin_must_match() -> None:
    private, key = demo_key()
    note = sign_checkpoint(demo_checkpoint(), ORIGIN, private)
    with pytest.raises(NoteError) as caught:
        open_checkpoint(note, [key], origin="example.com/another-log")
    assert caught.value.code == "note/origin"


def test_every_byte_flip_of_a_signed_checkpoint_is_rejected() -> None:
    private, key = demo_key()
    note = sign_checkpoint(demo_checkpoint(), ORIGIN, private)
    for i in range(len(note)):
        for bit in (0, 5):
            mutated = note[:i] + bytes([note[i] ^ (1 << bit)]) + note[i + 1 :]
            with pytest.raises(NoteError):
                open_checkpoint(mutated, [key], origin=ORIGIN)


# -- strict parsing ------------------------------------------------------------------------


def _signed(text: str) -> bytes:
    private, _ = demo_key()
    return sign_note(text, [(ORIGIN, private)])


ROOT64 = base64.b64encode(demo_checkpoint().root).decode()
URLSAFE64 = base64.urlsafe_b64encode(b"\xff" * 32).decode()  # the other alphabet: refused


def _non_canonical_last_line(note: bytes) -> bytes:
    """The same signature bytes, base64 with non-zero unused bits in its last quantum."""
    head, _, line = note[:-1].rpartition(b"\n")
    prefix, _, b64 = line.rpartition(b" ")
    assert b64.endswith(b"=") and not b64.endswith(b"==")
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet.index(b64[-2:-1])
    assert last & 3 == 0
    bent = b64[:-2] + alphabet[last | 1 : (last | 1) + 1] + b"="
    assert base64.b64decode(bent) == base64.b64decode(b64)
    return head + b"\n" + prefix + b" " + bent + b"\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f"{ORIGIN}\n3\n", "at least 3 lines"),
        (f"3\n{ORIGIN}\n{ROOT64}\n", "line 2"),  # lines out of order
        (f"{ORIGIN}\n{ROOT64}\n3\n", "line 2"),
        (f"{ORIGIN} \n3\n{ROOT64}\n", "surrounding spaces"),
        (f" {ORIGIN}\n3\n{ROOT64}\n", "surrounding spaces"),
        (f"{ORIGIN}\n03\n{ROOT64}\n", "not a decimal"),
        (f"{ORIGIN}\n+3\n{ROOT64}\n", "not a decimal"),
        (f"{ORIGIN}\n3 \n{ROOT64}\n", "not a decimal"),
        (f"{ORIGIN}\n٣\n{ROOT64}\n", "not a decimal"),
        (f"{ORIGIN}\n9007199254740992\n{ROOT64}\n", "above 2\\*\\*53-1"),
        (f"{ORIGIN}\n{'9' * 5000}\n{ROOT64}\n", "not a decimal"),
        (f"{ORIGIN}\n3\n{ROOT64} \n", "line 3"),
        (f"{ORIGIN}\n3\n{ROOT64[:-1]}\n", "line 3"),
        (f"{ORIGIN}\n3\n{base64.b64encode(bytes(31)).decode()}\n", "line 3"),
        (f"{ORIGIN}\n3\n{URLSAFE64}\n", "line 3"),
        (f"{ORIGIN}\n3\n{ROOT64}\n\next\n", "line 4"),
    ],
)
def test_malformed_checkpoint_text(text: str, reason: str) -> None:
    note = _signed(text)  # validly signed: the body itself is refused
    with pytest.raises(NoteError, match=reason) as caught:
        open_checkpoint(note, [demo_key()[1]])
    assert caught.value.code == "note/malformed"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda n: n.replace(b"\n", b"\r\n"),
        lambda n: n.replace(b"\xe2\x80\x94 ", b"\xe2\x80\x94  "),
        lambda n: n.replace(b"\xe2\x80\x94 ", b"- "),
        lambda n: n.replace(b"\xe2\x80\x94 ", b"\xe2\x80\x94"),
        lambda n: n[:-1] + b" \n",
        lambda n: n[:-1],
        lambda n: n + b"\n",
        lambda n: n.replace(b"\n\n", b"\n \n"),
        lambda n: n.replace(b"\n\n", b"\n\t\n"),
        _non_canonical_last_line,
        lambda n: n.replace(b"\n3\n", b"\n3\xc0\xaf\n"),
        lambda n: n + b"\xe2\x80\x94 x AAAA\n",
        lambda n: n + b"\xe2\x80\x94 x+y AAAAAAA=\n",
        lambda n: n + b"\xe2\x80\x94 a\xe2\x80\x83b AAAAAAA=\n",
        lambda n: n + b"\xe2\x80\x94  AAAAAAA=\n",
        lambda n: n + b" " * 300_000,
    ],
    ids=[
        "crlf", "double-space", "hyphen", "no-space", "trailing-space", "no-final-newline",
        "extra-blank", "space-line", "tab-line", "non-canonical-base64", "overlong-utf8",
        "short-signature", "plus-in-name", "unicode-space-in-name", "empty-name", "too-long",
    ],
)  # fmt: skip
def test_malformed_note_bytes(mutate: Any) -> None:
    note = _signed(demo_checkpoint().text())
    with pytest.raises(NoteError) as caught:
        open_checkpoint(mutate(note), [demo_key()[1]])
    assert caught.value.code in {"note/malformed", "note/signature", "note/unverified"}
    if caught.value.code != "note/malformed":  # only a different text can fail on signature
        assert parse_note(mutate(note))[0] != demo_checkpoint().text()


def test_writer_refuses_what_the_reader_would() -> None:
    private, _ = demo_key()
    with pytest.raises(UsageError):
        sign_note("no final newline", [(ORIGIN, private)])
    with pytest.raises(UsageError):
        sign_note("tab\there\n", [(ORIGIN, private)])
    with pytest.raises(UsageError):
        sign_note("ok\n", [("bad name", private)])
    for bad in [
        {"origin": "", "size": 0, "root": bytes(32)},
        {"origin": " o", "size": 0, "root": bytes(32)},
        {"origin": "o\nx", "size": 0, "root": bytes(32)},
        {"origin": "o", "size": -1, "root": bytes(32)},
        {"origin": "o", "size": 2**53, "root": bytes(32)},
        {"origin": "o", "size": True, "root": bytes(32)},
        {"origin": "o", "size": 0, "root": bytes(31)},
        {"origin": "o", "size": 0, "root": bytes(32), "extensions": ("",)},
    ]:
        with pytest.raises(UsageError):
            Checkpoint(**bad)


def test_conflicting_trusted_keys_are_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _, key = demo_key()
    assert open_note(_signed("x\n"), [key, key]).verified == (key,)
    with pytest.raises(UsageError, match="trusted keys are VerifierKey"):
        open_note(_signed("x\n"), [key, "not a key"])  # type: ignore[list-item]
    # two keys with one name and key ID (a 32-bit collision, forced here) cannot both be trusted
    stranger = VerifierKey.from_private_key("o", Ed25519PrivateKey.generate())
    other = VerifierKey(key.name, stranger.public_key)
    monkeypatch.setattr(note_module, "key_id", lambda name, public: b"\0\0\0\0")
    with pytest.raises(UsageError, match="share the name and key ID"):
        open_note(_signed("x\n"), [key, other])


def test_trusted_keys_as_name_and_public_key_pairs() -> None:
    _, key = demo_key()
    note = _signed("x\n")
    assert open_note(note, [(key.name, key.public_key)]).verified == (key,)
    with pytest.raises(UsageError):
        open_note(note, key)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        open_note(note, [(key.name, key.public_key[:31])])


def test_a_failing_repeat_of_a_trusted_signature_rejects() -> None:
    private, key = demo_key()
    note = sign_checkpoint(demo_checkpoint(), ORIGIN, private)
    bad = NoteSignature(ORIGIN, key.key_id, bytes(64)).line().encode()
    rejected(note + bad, [key], "note/signature")


def test_signature_lines_for_unknown_keys_never_need_to_parse_as_ed25519() -> None:
    """A cosignature of another type (longer than 64 bytes) from an unknown key is ignored."""
    private, key = demo_key()
    note = sign_checkpoint(demo_checkpoint(), ORIGIN, private)
    cosig = NoteSignature("witness.example/w", b"\x01\x02\x03\x04", bytes(72)).line().encode()
    assert open_note(note + cosig, [key]).verified == (key,)


# -- Wycheproof Ed25519 ---------------------------------------------------------------------


def test_wycheproof_file_names_its_source() -> None:
    assert WYCHEPROOF["source"] == "https://github.com/C2SP/wycheproof"
    assert re.fullmatch(r"[0-9a-f]{40}", WYCHEPROOF["commit"])
    assert len(WYCHEPROOF["cases"]) == 151


@pytest.mark.parametrize("case", WYCHEPROOF["cases"], ids=lambda c: f"tc{c['tcId']}")
def test_wycheproof_ed25519(case: dict[str, Any]) -> None:
    public, msg, sig = (bytes.fromhex(case[k]) for k in ("pk", "msg", "sig"))
    assert ed25519_verify(public, msg, sig) is (case["result"] == "valid")


@pytest.mark.parametrize("variant", list(signature_variants(bytes(64))))
def test_wycheproof_classes_in_a_signed_checkpoint(variant: str) -> None:
    private, key = demo_key()
    text = demo_checkpoint().text()
    good = private.sign(text.encode())
    bad = signature_variants(good)[variant]
    assert not ed25519_verify(key.public_key, text.encode(), bad)
    note = format_note(text, [NoteSignature(ORIGIN, key.key_id, bad)])
    rejected(note, [key], "note/signature")
