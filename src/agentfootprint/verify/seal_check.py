"""A run's seal, checked against its rows and the caller's pinned keys (log format v4).

The verifier gathers a :class:`SealWitness` while it walks a run (what ``run.open`` names as
the signer, the chain head and event count at ``run.close``, the wire exchange payloads, the
``run.seal`` row) and then asks :func:`judge` for the outcome:

* the statement inside the seal must attest exactly the facts the rows give (head, event
  count, policy digest, receipt count, outcome, final answer digest, wire list digest), and
  its signature must name the key ``run.open`` names. Anything else is INVALID, whoever
  signed: an honest writer never makes such a seal, so the run or its seal was changed;
* then the signature: verified under a key the caller pinned, VALID; a seal by a key the
  caller did not pin (or no key pinned at all), VALID_UNSIGNED, and the note says which key
  sealed it and that it is not pinned. A seal is never trusted for the key it carries;
* a run whose ``run.open`` names a signer but which closed without a seal is INVALID (the
  seal was removed); a run that names none is VALID_UNSIGNED, its note "not sealed".

The notes are read by people (``verify`` prints them): they say "sealed" and "not
pinned", never "unsigned", which beside "sealed by key K" reads as a contradiction.

docs/seals.md section 7 is the normative text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.errors import SealError, UsageError, VerificationError
from agentfootprint.logformat.hashing import is_hex_digest
from agentfootprint.seal.dsse import parse_envelope, verify_envelope
from agentfootprint.seal.facts import (
    WIRE_EVENT,
    final_answer_digest,
    seal_envelope_bytes,
    wire_list_digest,
)
from agentfootprint.seal.signer import PublicKey, load_public_key
from agentfootprint.seal.statement import PAYLOAD_TYPE, SealFacts, parse_statement
from agentfootprint.verify.body_checks import RunCheck

__all__ = [
    "SealVerdict",
    "SealWitness",
    "judge",
    "open_member",
    "pinned_keys",
    "seal_row_problem",
    "sealing",
    "witness_open",
    "witness_row",
]


@dataclass(slots=True)
class SealWitness:
    """What a run's rows say about its seal, gathered while it is verified."""

    #: the key id ``run.open`` names (``seal.key_id``); None: the run is not sealed
    key_id: str | None = None
    #: ``run.open``'s policy digest (checked against its policy), None without a policy
    policy_digest: str | None = None
    #: the chain head and event count once ``run.close`` was read
    close_head: bytes | None = None
    close_events: int = 0
    #: the recorded payloads of the wire exchange events, in log order
    wires: list[Any] = field(default_factory=list)
    #: the envelope bytes of the ``run.seal`` row, and its seq
    envelope: bytes | None = None
    seal_seq: int = 0


@dataclass(frozen=True, slots=True)
class SealVerdict:
    """``signed_by``: the pinned keys the seal verified under (VALID when not empty);
    ``note``: in words, why a closed run is VALID_UNSIGNED (None when it is VALID)."""

    signed_by: tuple[str, ...]
    note: str | None


def open_member(value: Any) -> str:
    """The key id of ``run.open``'s ``seal`` member (``{"key_id": <64 hex>}``), or
    ValueError saying what is wrong with it."""
    if type(value) is not dict or set(value) != {"key_id"} or not is_hex_digest(value["key_id"]):
        raise ValueError('seal must be {"key_id": <64 lowercase hex>}')
    return str(value["key_id"])


def seal_row_problem(witness: SealWitness, closed: bool, body: Any) -> str | None:
    """Why a ``run.seal`` row cannot stand where it is (None: it can; the envelope is kept)."""
    if not closed:
        return "run.seal before run.close"
    if witness.envelope is not None:
        return "a second run.seal"
    if witness.key_id is None:
        return "run.seal in a run whose run.open names no signer (seal)"
    envelope = seal_envelope_bytes(body)
    if envelope is None:
        return 'run.seal body must be exactly {"dsse": <the envelope JSON text>}'
    witness.envelope = envelope
    return None


def _expected(
    run_id: str,
    witness: SealWitness,
    *,
    policy_digest: str | None,
    receipts: int,
    close: Mapping[str, Any],
    final_state: Mapping[str, Any],
) -> SealFacts:
    assert witness.close_head is not None
    return SealFacts(
        run_id=run_id,
        head=witness.close_head.hex(),
        events=witness.close_events,
        policy_digest=policy_digest,
        receipts=receipts,
        outcome=close.get("outcome"),  # type: ignore[arg-type]
        final_answer_digest=final_answer_digest(final_state),
        wire_list_digest=wire_list_digest(witness.wires),
    )


def judge(
    run_id: str,
    witness: SealWitness,
    trusted: Sequence[PublicKey],
    *,
    policy_digest: str | None,
    receipts: int,
    close: Mapping[str, Any],
    final_state: Mapping[str, Any],
) -> SealVerdict:
    """The seal verdict of a closed, otherwise verified run; raises
    :class:`VerificationError` (code ``seal``) when the run is INVALID."""

    def fail(reason: str) -> VerificationError:
        return VerificationError(run_id, witness.seal_seq or None, reason, code="seal")

    if witness.key_id is None:
        return SealVerdict((), "not sealed: its run.open names no signer")
    if witness.envelope is None:
        return_seq = witness.close_events - 1
        raise VerificationError(
            run_id,
            return_seq,
            f"run.open names the signer key {witness.key_id}, but the run closed without a "
            "run.seal after its run.close: the seal was removed",
            code="seal",
        )
    try:
        envelope = parse_envelope(witness.envelope)
        if envelope.payload_type != PAYLOAD_TYPE:
            raise SealError(
                "$.payloadType",
                f"is {envelope.payload_type!r}, expected {PAYLOAD_TYPE!r}",
                code="payload-type",
            )
        attested = parse_statement(envelope.payload)
    except SealError as exc:
        raise fail(f"the seal is not a sealed statement: {exc}") from exc
    try:
        expected = _expected(
            run_id,
            witness,
            policy_digest=policy_digest,
            receipts=receipts,
            close=close,
            final_state=final_state,
        )
    except UsageError as exc:
        raise fail(f"the run's close facts cannot be sealed: {exc}") from exc
    differs = [
        name
        for name in SealFacts.__dataclass_fields__
        if getattr(attested, name) != getattr(expected, name)
    ]
    if differs:
        shown = "; ".join(
            f"{name}: sealed {getattr(attested, name)!r}, the log has {getattr(expected, name)!r}"
            for name in differs
        )
        raise fail(f"the seal does not attest this run ({shown}): the run was changed")
    named = {s.keyid for s in envelope.signatures}
    if witness.key_id not in named:
        raise fail(
            f"the seal is signed by {', '.join(sorted(k or '(no keyid)' for k in named))}, "
            f"not by the key {witness.key_id} its run.open names"
        )
    if not trusted:
        return SealVerdict(
            (),
            f"sealed by key {witness.key_id}; key not pinned: verify --key KEY checks who "
            "sealed it",
        )
    try:
        verified = verify_envelope(envelope, trusted, payload_type=PAYLOAD_TYPE)
    except SealError as exc:
        if exc.code == "untrusted-key":
            return SealVerdict(
                (),
                f"sealed by key {witness.key_id}; key not pinned: none of the keys given "
                "with --key",
            )
        raise fail(f"the seal does not verify: {exc}") from exc
    return SealVerdict(verified.key_ids, None)


def pinned_keys(keys: Any) -> tuple[PublicKey, ...]:
    """The caller's trusted keys, each read as a public key (a :class:`PublicKey`, the raw 32
    bytes, the ``ed25519:`` text, PEM or a file path); None or empty: no key is pinned.
    Refused at construction, naming the option."""
    if keys is None:
        return ()
    if isinstance(keys, PublicKey | bytes | str | os.PathLike):
        keys = [keys]
    try:
        listed = list(keys)
    except TypeError:
        raise UsageError(
            f"trusted_keys must be a list of public keys, not {type(keys).__name__}",
            option="trusted_keys",
        ) from None
    pinned: dict[str, PublicKey] = {}
    for key in listed:
        if not isinstance(key, PublicKey | bytes | str | os.PathLike):
            raise UsageError(
                f"trusted_keys holds a {type(key).__name__}: each key is a PublicKey, the raw "
                "32 bytes, the 'ed25519:...' text, PEM or a public key file",
                option="trusted_keys",
            )
        public = load_public_key(key)
        pinned.setdefault(public.key_id, public)
    return tuple(pinned.values())


def witness_open(check: RunCheck, witness: SealWitness, body: Mapping[str, Any]) -> None:
    """What ``run.open`` says of the run's seal: the signer key id it names (format v4
    only) and the policy digest (checked against the policy; null without one)."""
    witness.policy_digest = body.get("policy_digest") if check.matches else None
    if "seal" not in body:
        return
    if not check.format.may_seal:
        raise check.fail(0, f"run.open names a seal in format {check.log_format}", "structure")
    try:
        witness.key_id = open_member(body["seal"])
    except ValueError as exc:
        raise check.fail(0, f"run.open {exc}", "structure") from exc


def witness_row(
    witness: SealWitness, seq: int, type_: str, body: Mapping[str, Any], head: bytes
) -> None:
    """The seal facts a checked row gives: the head and count at ``run.close``, the
    payload of a wire exchange event."""
    if type_ == "run.close":
        witness.close_head, witness.close_events = head, seq + 1
    elif type_ == "event" and body.get("name") == WIRE_EVENT:
        witness.wires.append(body.get("payload"))


def sealing(where: RunCheck, witness: SealWitness, seq: int, type_: str, body: Any) -> bool:
    """True when the row is the run's ``run.seal`` (kept in ``witness``); a row after
    it, or a seal where it cannot stand, is **structure** (section 5.8)."""
    if witness.envelope is not None:
        raise where.fail(seq, f"{type_} after run.seal", "structure")
    if type_ != "run.seal" or seq == 0:
        return False  # at seq 0 _opened names what the first row should be
    problem = (
        seal_row_problem(witness, where.close is not None, body)
        if where.format.may_seal
        else f"run.seal in a log of format {where.log_format}"
    )
    if problem is not None:
        raise where.fail(seq, problem, "structure")
    witness.seal_seq = seq
    return True
