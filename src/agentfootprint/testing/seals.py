"""Fixed Ed25519 signers for tests and examples (never keys to seal real runs with), and the
Wycheproof Ed25519 invalid-signature classes that apply to a stored signature."""

from __future__ import annotations

from agentfootprint.seal.signer import Ed25519Signer

__all__ = ["OTHER", "SIGNER", "signature_variants"]

#: the signer of the tests' sealed runs (seed 0x00..0x1f)
SIGNER = Ed25519Signer.from_seed(bytes(range(32)))
#: another key: a signer the verifier did not pin, or a forger's (seed 0x01..0x20)
OTHER = Ed25519Signer.from_seed(bytes(range(1, 33)))

#: the group order of edwards25519 (RFC 8032 section 5.1)
_L = 2**252 + 27742317777372353535851937790883648493


def signature_variants(sig: bytes) -> dict[str, bytes]:
    """The Wycheproof Ed25519 invalid classes that apply to a 64-byte signature kept in a
    note or an envelope, by name: each must fail to verify."""
    r, s = sig[:32], int.from_bytes(sig[32:], "little")
    return {
        "TruncatedSignature": sig[:-1],
        "TruncatedSignature (R only)": sig[:32],
        "SignatureWithGarbage": sig + b"\0",
        "SignatureMalleability (S + L)": r + (s + _L).to_bytes(32, "little"),
        "InvalidSignature (S = 0)": r + bytes(32),
        "InvalidSignature (R = 0)": bytes(32) + sig[32:],
        "InvalidSignature (all zero)": bytes(64),
        "InvalidSignature (high bit of S)": r + (s | 1 << 255).to_bytes(32, "little"),
        "InvalidSignature (flipped bit of R)": bytes([sig[0] ^ 1]) + sig[1:],
    }
