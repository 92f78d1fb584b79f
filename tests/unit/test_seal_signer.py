"""Signing keys: key files (PKCS8 PEM, 0600, never overwritten), passphrases, public key
forms, typed refusals, and the Wycheproof Ed25519 verification vectors."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa, x25519

from agentfootprint.errors import (
    FileError,
    KeyFileError,
    UnsupportedKeyError,
    UsageError,
    WrongPassphraseError,
)
from agentfootprint.seal import (
    Ed25519Signer,
    PublicKey,
    Signer,
    generate_key_file,
    key_id_of,
    load_public_key,
    load_signer,
)

WYCHEPROOF = Path(__file__).resolve().parents[1] / "data" / "wycheproof" / "ed25519_test.json"

# RFC 8032 section 7.1, TEST 1
RFC8032_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC8032_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC8032_SIG = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46b"
    "d25bf5f0595bbe24655141438e7a100b"
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_rfc8032_vector_and_key_id() -> None:
    signer = Ed25519Signer.from_seed(RFC8032_SEED)
    assert signer.public_key == RFC8032_PUBLIC
    assert signer.sign(b"") == RFC8032_SIG
    assert signer.key_id == key_id_of(RFC8032_PUBLIC)
    assert (
        signer.key_id == "21fe31dfa154a261626bf854046fd2271b7bed4b6abe45aa58877ef47f9721b9"
    )  # hex SHA-256 of the raw key
    assert isinstance(signer, Signer)
    assert PublicKey(RFC8032_PUBLIC).verify(RFC8032_SIG, b"")


def test_public_key_forms_round_trip() -> None:
    public = PublicKey(RFC8032_PUBLIC)
    assert public.text == "ed25519:" + base64.b64encode(RFC8032_PUBLIC).decode()
    assert len(public.text) == len("ed25519:") + 44
    assert load_public_key(public.text) == public
    assert load_public_key(RFC8032_PUBLIC) == public
    assert load_public_key(public.pem) == public
    assert public.pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    assert repr(public) == f"PublicKey({public.text!r})"


def test_public_key_files(tmp_path: Path) -> None:
    public = Ed25519Signer.generate().public
    for name, data in (
        ("k.pem", public.pem),
        ("k.txt", public.text.encode() + b"\n"),
        ("k.raw", public.raw),
    ):
        (tmp_path / name).write_bytes(data)
        assert load_public_key(tmp_path / name) == public
        assert load_public_key(str(tmp_path / name)) == public


@pytest.mark.parametrize(
    "text",
    [
        "ed25519:",
        "ed25519:AAAA",
        "ed25519:" + base64.urlsafe_b64encode(bytes(range(200, 232))).decode(),  # URL-safe
        "ed25519:" + base64.b64encode(RFC8032_PUBLIC).decode().rstrip("="),  # unpadded
        "ed25519:" + base64.b64encode(RFC8032_PUBLIC + b"x").decode(),  # 33 bytes
        "ed25519: " + base64.b64encode(RFC8032_PUBLIC).decode(),
    ],
)
def test_text_form_is_strict(text: str) -> None:
    with pytest.raises(KeyFileError, match="base64 of 32 bytes"):
        load_public_key(text)


def test_generate_round_trip_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "seal.key"
    signer = generate_key_file(path)
    assert _mode(path) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    loaded = load_signer(path)
    assert loaded.public_key == signer.public_key and loaded.key_id == signer.key_id
    assert loaded.public.verify(loaded.sign(b"data"), b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seal.key"]  # no temporary left


def test_generate_with_passphrase(tmp_path: Path) -> None:
    path = tmp_path / "seal.key"
    signer = generate_key_file(path, passphrase="correct horse")
    assert _mode(path) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert load_signer(path, "correct horse").key_id == signer.key_id
    assert load_signer(path, b"correct horse").key_id == signer.key_id


def test_generate_mode_is_0600_under_a_lax_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        generate_key_file(tmp_path / "k")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "k") == 0o600


def test_generate_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "seal.key"
    path.write_bytes(b"precious")
    with pytest.raises(KeyFileError, match="already exists"):
        generate_key_file(path)
    assert path.read_bytes() == b"precious"
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(KeyFileError, match="already exists"):
        generate_key_file(link)
    assert not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "seal.key"]


def test_generate_leaves_nothing_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(KeyFileError, match="No space left"):
        generate_key_file(tmp_path / "k")
    assert list(tmp_path.iterdir()) == []


def test_generate_refuses_a_missing_folder_and_an_empty_passphrase(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="does not exist"):
        generate_key_file(tmp_path / "no" / "k")
    with pytest.raises(UsageError, match="non-empty"):
        generate_key_file(tmp_path / "k", passphrase="")
    assert list(tmp_path.iterdir()) == []


def test_wrong_passphrase(tmp_path: Path) -> None:
    path = tmp_path / "k"
    generate_key_file(path, passphrase="Xq7-kept-pass")
    with pytest.raises(WrongPassphraseError, match="does not decrypt") as wrong:
        load_signer(path, "Zz9-other-pass")
    with pytest.raises(WrongPassphraseError, match="is encrypted: give its passphrase"):
        load_signer(path)
    assert "Xq7-kept-pass" not in str(wrong.value) and "Zz9-other" not in str(wrong.value)
    plain = tmp_path / "plain"
    generate_key_file(plain)
    with pytest.raises(WrongPassphraseError, match="not encrypted"):
        load_signer(plain, "anything")
    assert isinstance(wrong.value, KeyFileError) and isinstance(wrong.value, FileError)
    assert wrong.value.path == str(path)


def _pkcs8(key: Any) -> bytes:
    return key.private_bytes(  # type: ignore[no-any-return]
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda: rsa.generate_private_key(public_exponent=65537, key_size=1024), "RSA"),
        (lambda: ec.generate_private_key(ec.SECP256R1()), "EC"),
        (ed448.Ed448PrivateKey.generate, "Ed448"),
        (x25519.X25519PrivateKey.generate, "X25519"),
    ],
)
def test_other_key_types_are_refused(tmp_path: Path, make: Any, kind: str) -> None:
    key = make()
    path = tmp_path / "other.pem"
    path.write_bytes(_pkcs8(key))
    with pytest.raises(UnsupportedKeyError, match=f"{kind} private key: seals are Ed25519"):
        load_signer(path)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "other.pub").write_bytes(public)
    with pytest.raises(UnsupportedKeyError, match=f"{kind} public key"):
        load_public_key(tmp_path / "other.pub")


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "not a PKCS8 PEM private key"),
        (b"hello", "not a PKCS8 PEM private key"),
        (b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "could not be decoded"),
        (b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbg==\n", "not in PKCS8 PEM"),
        (b"\xff" * 100, "not a PKCS8 PEM private key"),
    ],
)
def test_malformed_key_files(tmp_path: Path, data: bytes, match: str) -> None:
    path = tmp_path / "bad"
    path.write_bytes(data)
    with pytest.raises(KeyFileError, match=match) as refused:
        load_signer(path)
    assert type(refused.value) is KeyFileError


def test_truncated_key_file(tmp_path: Path) -> None:
    path = tmp_path / "k"
    generate_key_file(path)
    cut = tmp_path / "cut"
    cut.write_bytes(path.read_bytes()[:60])
    with pytest.raises(KeyFileError, match="could not be decoded"):
        load_signer(cut)
    cut.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(KeyFileError):
        load_signer(cut)


def test_missing_folder_and_huge_files(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="no such key file"):
        load_signer(tmp_path / "none")
    with pytest.raises(KeyFileError, match="is a folder"):
        load_signer(tmp_path)
    (tmp_path / "big").write_bytes(b"A" * (65 * 1024))
    with pytest.raises(KeyFileError, match="not a key file"):
        load_signer(tmp_path / "big")
    with pytest.raises(KeyFileError, match="no such public key file"):
        load_public_key(tmp_path / "none")


def test_a_private_key_is_not_a_public_key(tmp_path: Path) -> None:
    path = tmp_path / "k"
    generate_key_file(path)
    with pytest.raises(KeyFileError, match="is a private key: give a verifier its public key"):
        load_public_key(path)


def test_private_key_never_in_repr_or_messages(tmp_path: Path) -> None:
    """A planted key: its seed and PEM body appear in no repr and no error message."""
    signer = Ed25519Signer.from_seed(RFC8032_SEED)
    pem = signer.private_pem()
    body = b"".join(pem.splitlines()[1:-1]).decode()
    secrets = [RFC8032_SEED.hex(), base64.b64encode(RFC8032_SEED).decode(), body]
    texts = [repr(signer), repr(signer.public), str(signer.public.text)]
    path = tmp_path / "k"
    path.write_bytes(pem)
    for attempt in (
        lambda: load_signer(path, "pass"),
        lambda: load_public_key(path),
        lambda: load_public_key(pem),
    ):
        with pytest.raises(KeyFileError) as refused:
            attempt()
        texts.append(str(refused.value))
    cut = tmp_path / "cut"
    cut.write_bytes(pem[:-40])
    with pytest.raises(KeyFileError) as refused:
        load_signer(cut)
    texts.append(str(refused.value))
    for text in texts:
        for secret in secrets:
            assert secret not in text
            assert secret[:16] not in text


def _wycheproof() -> list[tuple[str, str, dict[str, Any]]]:
    document = json.loads(WYCHEPROOF.read_text(encoding="utf-8"))
    assert document["commit"] == "dac1dd4729fd1f8dd9e1e9f3dce51d783da6c166"
    cases = [
        (group["publicKey"]["pk"], f"tc{test['tcId']}", test)
        for group in document["testGroups"]
        for test in group["tests"]
    ]
    assert len(cases) == document["numberOfTests"] == 151
    return cases


_CASES = _wycheproof()


@pytest.mark.parametrize(
    ("pk", "case"),
    [(pk, test) for pk, _, test in _CASES if test["result"] == "invalid"],
    ids=[name for _, name, test in _CASES if test["result"] == "invalid"],
)
def test_wycheproof_invalid_signatures_are_rejected(pk: str, case: dict[str, Any]) -> None:
    public = PublicKey(bytes.fromhex(pk))
    assert not public.verify(bytes.fromhex(case["sig"]), bytes.fromhex(case["msg"])), case


def test_wycheproof_valid_signatures_are_accepted() -> None:
    valid = [(pk, test) for pk, _, test in _CASES if test["result"] == "valid"]
    assert len(valid) == 88
    for pk, case in valid:
        public = PublicKey(bytes.fromhex(pk))
        assert public.verify(bytes.fromhex(case["sig"]), bytes.fromhex(case["msg"])), case


def test_public_key_refuses_wrong_lengths() -> None:
    for raw in (b"", bytes(31), bytes(33)):
        with pytest.raises(KeyFileError, match="32 bytes"):
            PublicKey(raw)
    with pytest.raises(UsageError, match="32 bytes"):
        Ed25519Signer.from_seed(bytes(31))
    with pytest.raises(UnsupportedKeyError):
        Ed25519Signer(ed448.Ed448PrivateKey.generate())  # type: ignore[arg-type]
    assert isinstance(Ed25519Signer(ed25519.Ed25519PrivateKey.generate()), Signer)
