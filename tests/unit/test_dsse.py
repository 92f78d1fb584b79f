"""DSSE v1 envelopes: PAE, the spec's published example, sign/verify round trips, the
negative vectors (each refused with SealError and its code), and a property: any
single-byte mutation of an envelope is rejected."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.errors import SealError, UsageError, VerificationError
from agentfootprint.seal import (
    Ed25519Signer,
    Envelope,
    EnvelopeSignature,
    pae,
    parse_envelope,
    sign_envelope,
    verify_envelope,
)

TYPE = "application/vnd.in-toto+json"
SIGNER = Ed25519Signer.from_seed(bytes(range(32)))
OTHER = Ed25519Signer.from_seed(bytes(range(1, 33)))


def _doc(envelope: bytes) -> dict[str, Any]:
    return json.loads(envelope)  # type: ignore[no-any-return]


def _dump(document: Any) -> bytes:
    return json.dumps(document).encode()


def _refused(data: bytes | str, code: str, where: str = "", keys: Any = None) -> SealError:
    with pytest.raises(SealError) as refused:
        verify_envelope(data, keys or [SIGNER.public], payload_type=TYPE)
    assert refused.value.code == code, refused.value
    assert where in refused.value.where, refused.value
    return refused.value


# -- the spec ------------------------------------------------------------------------------


def test_pae_matches_the_spec() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("", b"") == b"DSSEv1 0  0 "
    assert pae("é", b"x") == b"DSSEv1 2 \xc3\xa9 1 x"  # LEN is bytes, not characters


def test_the_spec_example_envelope() -> None:
    """secure-systems-lab/dsse protocol.md, "Test Vectors": the published envelope parses and
    its ECDSA P-256 signature verifies over our PAE (DSSE signs PAE, whatever the algorithm)."""
    published = (
        '{"payload": "aGVsbG8gd29ybGQ=",\n "payloadType": "http://example.com/HelloWorld",\n '
        '"signatures": [{"sig": "A3JqsQGtVsJ2O2xqrI5IcnXip5GToJ3F+FnZ+O88SjtR6rDAajabZKciJTf'
        'UiHqJPcIAriEGAHTVeCUjW2JIZA=="}]}'
    )
    envelope = parse_envelope(published)
    assert envelope.payload == b"hello world"
    assert envelope.payload_type == "http://example.com/HelloWorld"
    (signature,) = envelope.signatures
    assert signature.keyid == "" and len(signature.sig) == 64
    x = 46950820868899156662930047687818585632848591499744589407958293238635476079160
    y = 5640078356564379163099075877009565129882514886557779369047442380624545832820
    public = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    der = encode_dss_signature(
        int.from_bytes(signature.sig[:32], "big"), int.from_bytes(signature.sig[32:], "big")
    )
    public.verify(der, pae(envelope.payload_type, envelope.payload), ec.ECDSA(hashes.SHA256()))
    # an Ed25519 verifier refuses it (not a key it trusts) without crashing
    with pytest.raises(SealError) as refused:
        verify_envelope(published, [SIGNER.public], payload_type="http://example.com/HelloWorld")
    assert refused.value.code == "untrusted-key"


# -- round trips ---------------------------------------------------------------------------


def test_sign_and_verify() -> None:
    envelope = sign_envelope(TYPE, b"body", SIGNER)
    document = _doc(envelope)
    assert sorted(document) == ["payload", "payloadType", "signatures"]
    assert document["signatures"] == [
        {"keyid": SIGNER.key_id, "sig": document["signatures"][0]["sig"]}
    ]
    verified = verify_envelope(envelope, [SIGNER.public], payload_type=TYPE)
    assert verified.payload == b"body" and verified.key_ids == (SIGNER.key_id,)
    assert verify_envelope(envelope, SIGNER.public.text, payload_type=TYPE).payload == b"body"
    assert verify_envelope(envelope, [SIGNER.public_key], payload_type=TYPE).payload == b"body"
    assert sign_envelope(TYPE, b"body", SIGNER) == envelope  # Ed25519 is deterministic
    assert parse_envelope(envelope).to_json() == envelope


def test_empty_payload_round_trips() -> None:
    envelope = sign_envelope(TYPE, b"", SIGNER)
    assert verify_envelope(envelope, [SIGNER.public], payload_type=TYPE).payload == b""


def test_both_base64_alphabets_are_accepted() -> None:
    payload = bytes([0xFB, 0xFF, 0xBF]) * 5  # "+/+/" in the standard alphabet
    standard = parse_envelope(sign_envelope(TYPE, payload, SIGNER))
    urlsafe = Envelope(standard.payload_type, standard.payload, standard.signatures, "urlsafe")
    data = urlsafe.to_json()
    assert b"-" in data or b"_" in data
    assert verify_envelope(data, [SIGNER.public], payload_type=TYPE).payload == payload


def test_threshold_and_multiple_signers() -> None:
    envelope = sign_envelope(TYPE, b"body", [SIGNER, OTHER])
    both = [SIGNER.public, OTHER.public]
    assert verify_envelope(envelope, both, payload_type=TYPE, threshold=2).key_ids == (
        SIGNER.key_id,
        OTHER.key_id,
    )
    assert verify_envelope(envelope, [OTHER.public], payload_type=TYPE).key_ids == (OTHER.key_id,)
    with pytest.raises(SealError) as refused:
        verify_envelope(envelope, [SIGNER.public], payload_type=TYPE, threshold=2)
    assert refused.value.code == "untrusted-key"


def test_one_bad_trusted_signature_fails_the_envelope() -> None:
    """A good signature does not excuse a bad one by another pinned key."""
    document = _doc(sign_envelope(TYPE, b"body", [SIGNER, OTHER]))
    document["signatures"][1]["sig"] = document["signatures"][0]["sig"]
    both = [SIGNER.public, OTHER.public]
    _refused(_dump(document), "bad-signature", "$.signatures[1].sig", keys=both)
    # the same envelope, OTHER not pinned: its signature is skipped, SIGNER's suffices
    verified = verify_envelope(_dump(document), [SIGNER.public], payload_type=TYPE)
    assert verified.key_ids == (SIGNER.key_id,)


def test_a_signature_without_keyid_is_tried_against_every_trusted_key() -> None:
    document = _doc(sign_envelope(TYPE, b"body", SIGNER))
    del document["signatures"][0]["keyid"]
    verified = verify_envelope(_dump(document), [OTHER.public, SIGNER.public], payload_type=TYPE)
    assert verified.key_ids == (SIGNER.key_id,)
    _refused(_dump(document), "untrusted-key", keys=[OTHER.public])


# -- negative vectors ----------------------------------------------------------------------


def test_byte_flip_in_payload() -> None:
    document = _doc(sign_envelope(TYPE, b"the run's statement", SIGNER))
    raw = bytearray(base64.b64decode(document["payload"]))
    raw[3] ^= 0x01
    document["payload"] = base64.b64encode(bytes(raw)).decode()
    _refused(_dump(document), "bad-signature", "$.signatures[0].sig")


def test_byte_flip_in_payload_type() -> None:
    document = _doc(sign_envelope(TYPE, b"body", SIGNER))
    document["payloadType"] = TYPE.replace("json", "jsoN")
    _refused(_dump(document), "bad-signature", "$.signatures[0].sig")


def test_byte_flip_in_signature() -> None:
    document = _doc(sign_envelope(TYPE, b"body", SIGNER))
    sig = bytearray(base64.b64decode(document["signatures"][0]["sig"]))
    for index in (0, 31, 32, 63):
        flipped = bytearray(sig)
        flipped[index] ^= 0x80
        document["signatures"][0]["sig"] = base64.b64encode(bytes(flipped)).decode()
        _refused(_dump(document), "bad-signature", "$.signatures[0].sig")


def test_wrong_key_named_in_keyid() -> None:
    """Signed by OTHER but claiming SIGNER's key id: checked under SIGNER's key, fails."""
    document = _doc(sign_envelope(TYPE, b"body", OTHER))
    document["signatures"][0]["keyid"] = SIGNER.key_id
    _refused(_dump(document), "bad-signature")


def test_untrusted_key() -> None:
    envelope = sign_envelope(TYPE, b"body", OTHER)
    refused = _refused(envelope, "untrusted-key", "$.signatures")
    assert OTHER.key_id in refused.reason
    assert isinstance(refused, VerificationError)


def test_key_from_the_envelope_is_never_used() -> None:
    """Adding members that carry a public key is refused, not trusted."""
    document = _doc(sign_envelope(TYPE, b"body", OTHER))
    document["signatures"][0]["publicKey"] = OTHER.public.text
    _refused(_dump(document), "malformed", "$.signatures[0]")


def test_wrong_payload_type() -> None:
    envelope = sign_envelope("application/json", b"body", SIGNER)
    refused = _refused(envelope, "payload-type", "$.payloadType")
    assert "application/json" in refused.reason


def test_empty_signatures() -> None:
    document = _doc(sign_envelope(TYPE, b"body", SIGNER))
    document["signatures"] = []
    _refused(_dump(document), "malformed", "$.signatures")


def test_signature_over_the_payload_without_pae() -> None:
    document = _doc(sign_envelope(TYPE, b"body", SIGNER))
    document["signatures"][0]["sig"] = base64.b64encode(SIGNER.sign(b"body")).decode()
    _refused(_dump(document), "bad-signature")


@pytest.mark.parametrize(
    ("edit", "where", "reason"),
    [
        (lambda d: d.pop("payload"), "$", "'payload' is missing"),
        (lambda d: d.pop("payloadType"), "$", "'payloadType' is missing"),
        (lambda d: d.pop("signatures"), "$", "'signatures' is missing"),
        (lambda d: d.update(extra=1), "$", "unknown member 'extra'"),
        (lambda d: d["signatures"][0].pop("sig"), "$.signatures[0]", "'sig' is missing"),
        (lambda d: d["signatures"][0].update(sig=""), "$.signatures[0].sig", "empty"),
        (lambda d: d["signatures"][0].update(keyid=7), "$.signatures[0].keyid", "a number"),
        (lambda d: d.update(payloadType=None), "$.payloadType", "null"),
        (lambda d: d.update(payload=["x"]), "$.payload", "an array"),
        (lambda d: d.update(signatures={}), "$.signatures", "an object"),
        (lambda d: d["signatures"].__setitem__(0, "x"), "$.signatures[0]", "a string"),
        (lambda d: d.update(payload="Ym9keQ"), "$.payload", "padded"),
        (lambda d: d.update(payload="Ym9keR=="), "$.payload", "not canonical"),
        (lambda d: d.update(payload="Ym9k=Q=="), "$.payload", "'=' before the end"),
        (lambda d: d.update(payload="Ym9k eQ="), "$.payload", "outside both base64"),
        (lambda d: d.update(payload="Ym9k\neQ="), "$.payload", "outside both base64"),
        (lambda d: d.update(payload="+/-_"), "$.payload", "outside both base64"),
    ],
)
def test_malformed_envelopes(edit: Any, where: str, reason: str) -> None:
    document = _doc(sign_envelope(TYPE, b"body", SIGNER))
    edit(document)
    refused = _refused(_dump(document), "malformed")
    assert refused.where == where and reason in refused.reason, refused


def test_mixed_alphabets_are_refused() -> None:
    payload = bytes([0xFB, 0xFF]) * 6
    for _ in range(64):  # find a seed whose signature uses a standard-only character
        document = _doc(sign_envelope(TYPE, payload, SIGNER))
        if "+" in document["signatures"][0]["sig"] or "/" in document["signatures"][0]["sig"]:
            break
        payload += b"\x00"
    else:
        pytest.fail("no signature with a standard-only character in 64 tries")
    raw = base64.b64decode(document["payload"])
    document["payload"] = base64.urlsafe_b64encode(raw).decode()
    _refused(_dump(document), "malformed", "sig")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"payload":"","payload":"","payloadType":"t","signatures":[]}', "duplicate member"),
        (b"[]", "must be an object"),
        (b"", "not JSON"),
        (b"\xff{}", "not UTF-8"),
        ("\ufeff{}".encode(), "byte order mark"),
        (b'{"payload":NaN}', "not JSON"),
        (b"{" * 100_000, "not JSON"),
        (b'{"payload":"","payloadType":"\\ud800","signatures":[{"sig":"AA=="}]}', "surrogate"),
    ],
)
def test_unparseable_envelopes(data: bytes, reason: str) -> None:
    refused = _refused(data, "malformed", "$")
    assert reason in refused.reason


def test_duplicate_member_inside_a_signature() -> None:
    envelope = sign_envelope(TYPE, b"body", SIGNER)
    doubled = envelope.replace(b'{"keyid":', b'{"sig":"AA==","keyid":')
    refused = _refused(doubled, "malformed")
    assert "duplicate member 'sig'" in refused.reason


def test_too_large() -> None:
    _refused(b" " * ((1 << 20) + 1), "malformed", "$")


def test_usage_errors() -> None:
    envelope = sign_envelope(TYPE, b"body", SIGNER)
    with pytest.raises(UsageError, match="at least one trusted public key"):
        verify_envelope(envelope, [], payload_type=TYPE)
    with pytest.raises(UsageError, match="threshold"):
        verify_envelope(envelope, [SIGNER.public], payload_type=TYPE, threshold=0)
    with pytest.raises(UsageError, match="at least one signer"):
        sign_envelope(TYPE, b"body", [])
    with pytest.raises(UsageError, match="payload must be bytes"):
        sign_envelope(TYPE, "body", SIGNER)  # type: ignore[arg-type]


class _LyingSigner:
    """A signer (a misconfigured KMS) whose signatures are by another key."""

    key_id = SIGNER.key_id
    public_key = SIGNER.public_key

    def sign(self, data: bytes) -> bytes:
        return OTHER.sign(data)


def test_a_broken_signer_fails_at_signing() -> None:
    with pytest.raises(UsageError, match="does not verify under its own public key"):
        sign_envelope(TYPE, b"body", _LyingSigner())


def test_envelope_dataclass_round_trip() -> None:
    envelope = Envelope(TYPE, b"x", (EnvelopeSignature("", b"\x01" * 64),))
    assert _doc(envelope.to_json())["signatures"] == [
        {"sig": base64.b64encode(b"\x01" * 64).decode()}
    ]
    assert parse_envelope(envelope.to_json()) == envelope


# -- the property ---------------------------------------------------------------------------

_TWINS = ({ord("+"), ord("-")}, {ord("/"), ord("_")})


@given(
    payload=st.binary(max_size=300),
    position=st.integers(min_value=0, max_value=10**6),
    delta=st.integers(min_value=1, max_value=255),
)
@example(payload=b"\xfb", position=12, delta=2)  # "+w==" -> "-w==": the URL-safe twin
@example(payload=b"", position=0, delta=1)
def test_any_single_byte_mutation_is_rejected(payload: bytes, position: int, delta: int) -> None:
    """Change one byte anywhere in a signed envelope: verification refuses it. The one
    exception DSSE itself requires: a base64 character swapped for its twin in the other
    alphabet (+ and -, / and _), which encodes the same bytes; then the verified payload is
    the original's, byte for byte, so nothing was tampered with."""
    envelope = sign_envelope(TYPE, payload, SIGNER)
    index = position % len(envelope)
    mutated = bytearray(envelope)
    mutated[index] = (mutated[index] + delta) % 256
    try:
        verified = verify_envelope(bytes(mutated), [SIGNER.public], payload_type=TYPE)
    except SealError as refused:
        assert refused.code in {"malformed", "bad-signature", "untrusted-key", "payload-type"}
        return
    assert {envelope[index], mutated[index]} in _TWINS, (index, bytes(mutated))
    assert verified.payload == payload and verified.key_ids == (SIGNER.key_id,)
