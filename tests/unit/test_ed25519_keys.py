"""Public keys that prove nothing are refused wherever a key is read (docs/seals.md section 1):
every encoding of a point of small order, canonical or not, every y at or above p, and a y
with no point; random real keys are accepted. Under a small-order key a signature with
R of small order and S = 0 verifies for any message (shown below with OpenSSL), so a pinned
one would make any forged run VALID."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from hypothesis import example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.cli import main as cli
from agentfootprint.errors import KeyFileError, UsageError
from agentfootprint.seal import Ed25519Signer, load_public_key, open_seal
from agentfootprint.seal.ed25519_keys import SMALL_ORDER_ENCODINGS, P, key_problem
from agentfootprint.seal.note import VerifierKey, ed25519_verify
from agentfootprint.seal.signer import PublicKey, checked_signer

IDENTITY = "ed25519:AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
CANONICAL, NOT_CANONICAL = SMALL_ORDER_ENCODINGS[:8], SMALL_ORDER_ENCODINGS[8:]


def text(raw: bytes) -> str:
    return "ed25519:" + base64.b64encode(raw).decode()


def spki_pem(raw: bytes) -> bytes:
    """The SubjectPublicKeyInfo PEM of any 32 bytes (OpenSSL does not judge them)."""
    der = bytes.fromhex("302a300506032b6570032100") + raw
    body = base64.encodebytes(der).decode().replace("\n", "")
    return f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n".encode()


def test_the_list_holds_fourteen_distinct_encodings_and_the_identity() -> None:
    assert len(set(SMALL_ORDER_ENCODINGS)) == len(SMALL_ORDER_ENCODINGS) == 14
    assert text(CANONICAL[0]) == IDENTITY


@pytest.mark.parametrize("raw", CANONICAL, ids=lambda r: r.hex()[:8] + r.hex()[-2:])
def test_the_arithmetic_finds_each_canonical_small_order_point(raw: bytes) -> None:
    assert key_problem(raw) == "is of small order: it would verify forged signatures"


@pytest.mark.parametrize("raw", NOT_CANONICAL, ids=lambda r: r.hex()[:8] + r.hex()[-2:])
def test_each_other_spelling_of_a_small_order_point_is_not_canonical(raw: bytes) -> None:
    problem = key_problem(raw)
    assert problem is not None and problem.startswith("is not a canonical encoding")


def test_small_order_keys_would_verify_a_forged_signature() -> None:
    """Why they are refused: OpenSSL accepts (R of small order, S = 0) under most of them."""
    forged = 0
    for key in SMALL_ORDER_ENCODINGS:
        public = ed25519.Ed25519PublicKey.from_public_bytes(key)
        for r in CANONICAL:
            try:
                public.verify(r + bytes(32), b"any forged run")
            except InvalidSignature:
                continue
            forged += 1
            break
    assert forged >= 10


@pytest.mark.parametrize("raw", SMALL_ORDER_ENCODINGS, ids=lambda r: r.hex()[:8] + r.hex()[-2:])
def test_every_way_a_key_is_read_refuses_it(raw: bytes, tmp_path: Path) -> None:
    named = text(raw)
    for form in (raw, named, spki_pem(raw)):
        with pytest.raises(KeyFileError) as info:
            load_public_key(form)
        assert named in str(info.value) and "pin the signer's real key" in str(info.value)
    for content in (named.encode() + b"\n", spki_pem(raw), raw):
        path = tmp_path / "key.pub"
        path.write_bytes(content)
        with pytest.raises(KeyFileError, match="real key") as info:
            load_public_key(path)
        assert info.value.path == str(path)
    with pytest.raises(KeyFileError, match="real key"):
        PublicKey(raw)
    with pytest.raises(KeyFileError, match="real key"):
        af.Verifier(af.MemoryStore(), trusted_keys=[named])
    with pytest.raises(KeyFileError, match="real key"):
        open_seal(b"{}", [named])
    with pytest.raises(UsageError, match="real key"):
        VerifierKey("example.com/log", raw)
    assert not ed25519_verify(raw, b"any forged run", CANONICAL[0] + bytes(32))


def test_a_signer_with_a_small_order_public_key_is_refused() -> None:
    class Forger:
        public_key = CANONICAL[0]
        key_id = af.seal.key_id_of(CANONICAL[0])

        def sign(self, data: bytes) -> bytes:
            return CANONICAL[0] + bytes(32)

    with pytest.raises(UsageError, match="small order") as info:
        checked_signer(Forger())
    assert info.value.option == "signer"


@given(st.integers(min_value=P, max_value=2**255 - 1), st.booleans())
@example(P, False).via("y = p: the other spelling of y = 0")
@example(P + 1, True).via("y = p + 1, sign set: the identity again")
def test_y_at_or_above_p_is_refused(y: int, sign: bool) -> None:
    raw = (y | (sign << 255)).to_bytes(32, "little")
    assert key_problem(raw) == "is not a canonical encoding (its y is not below 2^255 - 19)"
    with pytest.raises(KeyFileError, match="not a canonical encoding"):
        PublicKey(raw)


@given(st.binary(min_size=32, max_size=32))
@example(bytes(32)).via("y = 0: the points of order 4")
def test_random_real_keys_are_accepted(seed: bytes) -> None:
    signer = Ed25519Signer.from_seed(seed)
    assert key_problem(signer.public_key) is None
    assert load_public_key(signer.public.text) == signer.public
    assert signer.public.verify(signer.sign(b"run head"), b"run head")


@given(st.binary(min_size=32, max_size=32))
def test_bytes_openssl_reads_as_a_key_are_refused_only_for_a_reason(raw: bytes) -> None:
    """Any 32 bytes: refused with one of the reasons, or accepted as OpenSSL reads them."""
    problem = key_problem(raw)
    if problem is None:
        key = ed25519.Ed25519PublicKey.from_public_bytes(raw)
        assert key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw) == raw
        assert raw not in SMALL_ORDER_ENCODINGS
    else:
        assert problem in {
            "is not a point of the curve",
            "is of small order: it would verify forged signatures",
            "is not a canonical encoding (its y is not below 2^255 - 19)",
            "is not a canonical encoding (x is 0 and its sign bit is set)",
        }


def test_the_command_line_refuses_them_with_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with af.Agent(provider=af.MockProvider(["Paris."]), model="m", store=db) as agent:
        agent.run_sync("Capital of France?")
    runner = CliRunner()
    for key in (IDENTITY, text(NOT_CANONICAL[0])):
        for args in (["verify", str(db), "--key", key], ["keys", "show", key]):
            result = runner.invoke(cli, args)
            assert result.exit_code == 2, (args, result.output)
            assert key in result.output and "Traceback" not in result.output
