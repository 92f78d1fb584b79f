"""Fixed Ed25519 signers for tests and examples: never keys to seal real runs with."""

from __future__ import annotations

from agentfootprint.seal.signer import Ed25519Signer

__all__ = ["OTHER", "SIGNER"]

#: the signer of the tests' sealed runs (seed 0x00..0x1f)
SIGNER = Ed25519Signer.from_seed(bytes(range(32)))
#: another key: a signer the verifier did not pin, or a forger's (seed 0x01..0x20)
OTHER = Ed25519Signer.from_seed(bytes(range(1, 33)))
