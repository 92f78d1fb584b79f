"""DSSE v1 envelopes (secure-systems-lab/dsse ``protocol.md``, ``envelope.md``), strictly.

The signature covers ``PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP
body``; the envelope is ``{"payload", "payloadType", "signatures": [{"keyid", "sig"}]}``
with base64 payload and signatures. Verification takes the trusted public keys from the
caller, never from the envelope; ``keyid`` only narrows which trusted key is tried.

This profile is stricter than DSSE's "ignore unknown fields" (docs/seals.md, "Envelope"):
an unknown or duplicate member, a missing member, a value of the wrong type, an empty
signature list, base64 that is not canonical (wrong or missing padding, bits set past the
data) or that mixes the standard and URL-safe alphabets within one envelope are refused.
Every refusal is a :class:`~agentfootprint.errors.SealError` naming the member and why.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentfootprint.errors import SealError, UsageError
from agentfootprint.logformat.canonical import canon
from agentfootprint.seal.signer import PublicKey, Signer, load_public_key

__all__ = [
    "MAX_ENVELOPE_BYTES",
    "Envelope",
    "EnvelopeSignature",
    "VerifiedPayload",
    "pae",
    "parse_envelope",
    "sign_envelope",
    "verify_envelope",
]

#: an envelope larger than this is refused before it is parsed (a seal is about 1 KB)
MAX_ENVELOPE_BYTES = 1 << 20

_STANDARD = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_URLSAFE = re.compile(r"[A-Za-z0-9_-]*={0,2}")
_ENVELOPE_MEMBERS = frozenset({"payload", "payloadType", "signatures"})
_SIGNATURE_MEMBERS = frozenset({"keyid", "sig"})


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's Pre-Authentication Encoding of ``payload_type`` (as UTF-8) and ``payload``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


@dataclass(frozen=True)
class EnvelopeSignature:
    """One signature: ``keyid`` is an unauthenticated hint ("" when absent)."""

    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    """A parsed envelope: the decoded payload and signatures. ``alphabet`` is ``standard``
    or ``urlsafe``, the base64 alphabet its fields use."""

    payload_type: str
    payload: bytes
    signatures: tuple[EnvelopeSignature, ...]
    alphabet: str = "standard"

    def to_json(self) -> bytes:
        """The envelope as compact JSON with sorted members (standard base64, padded); a
        signature with an empty keyid is written without one."""
        encode = base64.b64encode if self.alphabet == "standard" else base64.urlsafe_b64encode
        signatures: list[dict[str, str]] = []
        for signature in self.signatures:
            entry = {"sig": encode(signature.sig).decode("ascii")}
            if signature.keyid:
                entry["keyid"] = signature.keyid
            signatures.append(entry)
        return canon(
            {
                "payload": encode(self.payload).decode("ascii"),
                "payloadType": self.payload_type,
                "signatures": signatures,
            }
        )


@dataclass(frozen=True)
class VerifiedPayload:
    """What verification proves: these bytes, of this type, signed by these trusted keys
    (their key ids, in signature order)."""

    payload_type: str
    payload: bytes
    key_ids: tuple[str, ...]


def sign_envelope(payload_type: str, payload: bytes, signers: Signer | Sequence[Signer]) -> bytes:
    """Sign ``payload`` as ``payload_type`` with each signer; return the envelope JSON.

    Each signature is checked against its signer's public key before it is returned, so a
    broken signer (a KMS answering for another key) fails here, not at verification."""
    if not isinstance(payload_type, str) or not payload_type:
        raise UsageError("payload_type must be a non-empty string", option="payload_type")
    if not isinstance(payload, bytes):
        raise UsageError("payload must be bytes", option="payload")
    chosen = [signers] if isinstance(signers, Signer) else list(signers)
    if not chosen:
        raise UsageError("sign with at least one signer", option="signers")
    message = pae(payload_type, payload)
    signatures = []
    for signer in chosen:
        sig = signer.sign(message)
        public = PublicKey(signer.public_key)
        if public.key_id != signer.key_id:
            raise UsageError(
                f"the signer's key_id {signer.key_id!r} is not the key id of its public key "
                f"({public.key_id}): key ids are the hex SHA-256 of the raw public key"
            )
        if not public.verify(sig, message):
            raise UsageError(
                f"the signer {signer.key_id} returned a signature that does not verify under "
                "its own public key (a broken or misconfigured signer)"
            )
        signatures.append(EnvelopeSignature(signer.key_id, sig))
    return Envelope(payload_type, payload, tuple(signatures)).to_json()


def _refuse(where: str, reason: str) -> SealError:
    return SealError(where, reason, code="malformed")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


class _Duplicate(Exception):
    pass


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _decode_b64(text: Any, where: str) -> tuple[bytes, str | None]:
    """Decode one base64 field; return the bytes and its alphabet (None when the text uses
    no character that tells the alphabets apart)."""
    if type(text) is not str:
        raise _refuse(where, f"must be a base64 string, got {_json_kind(text)}")
    if len(text) % 4:
        raise _refuse(where, "base64 must be padded to a multiple of 4 characters")
    urlsafe = False
    if _STANDARD.fullmatch(text):
        alphabet = "standard" if ("+" in text or "/" in text) else None
    elif _URLSAFE.fullmatch(text):
        alphabet, urlsafe = "urlsafe", True
    else:
        raise _refuse(
            where, "not base64 (a character outside both base64 alphabets, or '=' before the end)"
        )
    try:
        raw = (
            base64.urlsafe_b64decode(text.encode("ascii"))
            if urlsafe
            else base64.b64decode(text.encode("ascii"), validate=True)
        )
    except (binascii.Error, ValueError):
        raise _refuse(where, "not base64 (misplaced padding)") from None
    again = base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)
    if again.decode("ascii") != text:
        raise _refuse(where, "base64 is not canonical (bits set after the data, or bad padding)")
    return raw, alphabet


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
        type(value), "an array" if isinstance(value, list) else "an object"
    )


def _members(value: Any, where: str, allowed: frozenset[str], required: Iterable[str]) -> None:
    if not isinstance(value, dict):
        raise _refuse(where, f"must be an object, got {_json_kind(value)}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _refuse(where, f"unknown member {unknown[0]!r} (this profile refuses unknown ones)")
    for name in required:
        if name not in value:
            raise _refuse(where, f"the member {name!r} is missing")


def parse_envelope(data: bytes | str) -> Envelope:
    """Parse envelope JSON strictly (see the module docstring); signatures are not checked."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if not isinstance(data, bytes):
        raise UsageError("an envelope is JSON bytes or str", option="envelope")
    if len(data) > MAX_ENVELOPE_BYTES:
        raise _refuse("$", f"larger than {MAX_ENVELOPE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse("$", f"not UTF-8 (byte {exc.start})") from None
    if text.startswith("\ufeff"):
        raise _refuse("$", "starts with a byte order mark")
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _Duplicate as exc:
        raise _refuse("$", f"duplicate member {exc.args[0]!r}") from None
    except (ValueError, RecursionError) as exc:
        raise _refuse("$", f"not JSON ({type(exc).__name__}: {exc})") from None
    _members(document, "$", _ENVELOPE_MEMBERS, ("payload", "payloadType", "signatures"))
    payload_type = document["payloadType"]
    if type(payload_type) is not str:
        raise _refuse("$.payloadType", f"must be a string, got {_json_kind(payload_type)}")
    try:
        payload_type.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse("$.payloadType", "holds a lone surrogate (not UTF-8)") from None
    payload, alphabet = _decode_b64(document["payload"], "$.payload")
    alphabets = {alphabet} - {None}
    raw_signatures = document["signatures"]
    if not isinstance(raw_signatures, list):
        raise _refuse("$.signatures", f"must be an array, got {_json_kind(raw_signatures)}")
    if not raw_signatures:
        raise _refuse("$.signatures", "is empty: an envelope needs at least one signature")
    signatures = []
    for index, entry in enumerate(raw_signatures):
        where = f"$.signatures[{index}]"
        _members(entry, where, _SIGNATURE_MEMBERS, ("sig",))
        keyid = entry.get("keyid", "")
        if type(keyid) is not str:
            raise _refuse(f"{where}.keyid", f"must be a string, got {_json_kind(keyid)}")
        sig, sig_alphabet = _decode_b64(entry["sig"], f"{where}.sig")
        if not sig:
            raise _refuse(f"{where}.sig", "is empty")
        alphabets |= {sig_alphabet} - {None}
        if len(alphabets) > 1:
            raise _refuse(
                f"{where}.sig", "mixes the standard and URL-safe base64 alphabets in one envelope"
            )
        signatures.append(EnvelopeSignature(keyid, sig))
    alphabet_used = "urlsafe" if "urlsafe" in alphabets else "standard"
    return Envelope(payload_type, payload, tuple(signatures), alphabet=alphabet_used)


def _trusted(keys: Iterable[PublicKey | bytes | str]) -> dict[str, PublicKey]:
    if isinstance(keys, PublicKey | bytes | str):
        keys = [keys]
    trusted: dict[str, PublicKey] = {}
    for key in keys:
        public = load_public_key(key)
        trusted[public.key_id] = public
    if not trusted:
        raise UsageError(
            "verify an envelope against at least one trusted public key (pinned by the caller)",
            option="trusted_keys",
        )
    return trusted


def verify_envelope(
    data: bytes | str | Envelope,
    trusted_keys: Iterable[PublicKey | bytes | str],
    *,
    payload_type: str,
    threshold: int = 1,
) -> VerifiedPayload:
    """Verify an envelope against the caller's ``trusted_keys`` and return its payload.

    A signature whose ``keyid`` names a trusted key must verify under it (else
    ``bad-signature``); one with an empty ``keyid`` is tried against every trusted key; one
    whose ``keyid`` names no trusted key is skipped. Fewer than ``threshold`` distinct
    trusted keys verified: ``untrusted-key``. The signatures are checked before the
    ``payloadType`` (DSSE's order): a correctly signed envelope of another type is
    ``payload-type``. Raises :class:`SealError` with that ``code``."""
    if type(threshold) is not int or threshold < 1:
        raise UsageError("threshold must be an int of at least 1", option="threshold")
    trusted = _trusted(trusted_keys)
    envelope = data if isinstance(data, Envelope) else parse_envelope(data)
    message = pae(envelope.payload_type, envelope.payload)
    accepted: list[str] = []
    for index, signature in enumerate(envelope.signatures):
        where = f"$.signatures[{index}].sig"
        if signature.keyid:
            named = trusted.get(signature.keyid)
            if named is None:
                continue
            if not named.verify(signature.sig, message):
                raise SealError(
                    where,
                    f"does not verify under the trusted key {signature.keyid} it names",
                    code="bad-signature",
                )
            candidates = [named]
        else:
            candidates = [key for key in trusted.values() if key.verify(signature.sig, message)]
        for key in candidates[:1]:
            if key.key_id not in accepted:
                accepted.append(key.key_id)
    if len(accepted) < threshold:
        hints = sorted({s.keyid for s in envelope.signatures if s.keyid} - set(trusted))
        signed_by = f" (signed by {', '.join(hints)})" if hints else ""
        raise SealError(
            "$.signatures",
            f"{len(accepted)} of the {threshold} trusted signatures needed verify{signed_by}: "
            "pin the signing public key, or the seal is not by a key you trust",
            code="untrusted-key",
        )
    if envelope.payload_type != payload_type:
        raise SealError(
            "$.payloadType",
            f"is {envelope.payload_type!r}, expected {payload_type!r}",
            code="payload-type",
        )
    return VerifiedPayload(envelope.payload_type, envelope.payload, tuple(accepted))
