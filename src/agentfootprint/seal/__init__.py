"""Seals: a closed run signed as a DSSE envelope over an in-toto Statement v1.

:mod:`.signer` (keys and the :class:`Signer` seam), :mod:`.dsse` (envelopes),
:mod:`.statement` (what a seal attests). docs/seals.md is the normative text.
"""

from __future__ import annotations

from agentfootprint.seal.dsse import (
    Envelope,
    EnvelopeSignature,
    VerifiedPayload,
    pae,
    parse_envelope,
    sign_envelope,
    verify_envelope,
)
from agentfootprint.seal.signer import (
    PUBLIC_KEY_PREFIX,
    Ed25519Signer,
    PublicKey,
    Signer,
    generate_key_file,
    key_id_of,
    load_public_key,
    load_signer,
)
from agentfootprint.seal.statement import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    SealFacts,
    build_statement,
    open_seal,
    parse_statement,
    seal_run,
    statement_bytes,
)

__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "PUBLIC_KEY_PREFIX",
    "STATEMENT_TYPE",
    "Ed25519Signer",
    "Envelope",
    "EnvelopeSignature",
    "PublicKey",
    "SealFacts",
    "Signer",
    "VerifiedPayload",
    "build_statement",
    "generate_key_file",
    "key_id_of",
    "load_public_key",
    "load_signer",
    "open_seal",
    "pae",
    "parse_envelope",
    "parse_statement",
    "seal_run",
    "sign_envelope",
    "statement_bytes",
    "verify_envelope",
]
