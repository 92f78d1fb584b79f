"""The seal's in-toto Statement v1 (in-toto/attestation ``spec/v1/statement.md``).

The statement is the DSSE payload (payloadType ``application/vnd.in-toto+json``), as
canonical JSON (RFC 8785, :func:`agentfootprint.logformat.canonical.canon`)::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "run:<run_id>", "digest": {"sha256": "<last chain hash, hex>"}}],
     "predicateType": "https://agentfootprint.dev/seal/v1",
     "predicate": {"run_id", "events", "policy_digest", "receipts", "outcome",
                   "final_answer_digest", "wire_list_digest" (optional)}}

It is built from plain values (:class:`SealFacts`, the run's close facts) and parsed back
strictly: exactly these members, the subject's name matching ``run_id``, digests as 64
lowercase hex, the payload bytes canonical. docs/seals.md is the normative text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentfootprint.errors import CanonicalFormError, SealError, UsageError
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.hashing import is_hex_digest
from agentfootprint.logformat.log_format_spec import CLOSE_OUTCOMES, PAUSED
from agentfootprint.seal.dsse import sign_envelope, verify_envelope
from agentfootprint.seal.signer import PublicKey, Signer

__all__ = [
    "OUTCOMES",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "SealFacts",
    "build_statement",
    "open_seal",
    "parse_statement",
    "seal_run",
    "statement_bytes",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "https://agentfootprint.dev/seal/v1"
#: ``run.close`` ``outcome`` values of any format (docs/log-format.md sections 5.7 and 5.9;
#: the run's own format was judged by the verifier before its seal)
OUTCOMES = frozenset((*CLOSE_OUTCOMES, PAUSED))
SUBJECT_PREFIX = "run:"

_REQUIRED = ("run_id", "events", "policy_digest", "receipts", "outcome", "final_answer_digest")
_PREDICATE_MEMBERS = frozenset({*_REQUIRED, "wire_list_digest"})
_STATEMENT_MEMBERS = frozenset({"_type", "subject", "predicateType", "predicate"})
_MAX_COUNT = 2**53 - 1


@dataclass(frozen=True)
class SealFacts:
    """What a seal attests about a closed run.

    ``head``: the run's last chain hash (64 lowercase hex); ``events``: its event count
    (``run.close`` included, so at least 2); ``policy_digest``: ``run.open``'s (hex, or None
    for a run without a policy); ``receipts``: the receipt count; ``outcome``: ``run.close``'s;
    ``final_answer_digest``: the digest of the final answer (hex, or None when the run has
    none); ``wire_list_digest``: the digest of the run's list of wire digests, where the run
    has one (None: the member is absent)."""

    run_id: str
    head: str
    events: int
    policy_digest: str | None
    receipts: int
    outcome: str
    final_answer_digest: str | None
    wire_list_digest: str | None = None

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem is not None:
            where, reason = problem
            raise UsageError(f"SealFacts {where}: {reason}", option=where)


def _count_problem(value: Any, least: int) -> str | None:
    if type(value) is not int or not least <= value <= _MAX_COUNT:
        return f"must be an integer from {least} to 2**53-1, got {value!r}"
    return None


def _problem(facts: SealFacts) -> tuple[str, str] | None:
    """The first member of ``facts`` that is out of shape, and why (None: all fine)."""
    if type(facts.run_id) is not str or not facts.run_id:
        return "run_id", "must be a non-empty string"
    try:
        canon(facts.run_id)
    except CanonicalFormError:
        return "run_id", "must be a string without lone surrogates"
    if not is_hex_digest(facts.head):
        return "head", "must be 64 lowercase hex digits (the last chain hash)"
    for name, least in (("events", 2), ("receipts", 0)):
        reason = _count_problem(getattr(facts, name), least)
        if reason:
            return name, reason
    if facts.receipts >= facts.events:
        return "receipts", "must be fewer than the events (receipts are events of the run)"
    if type(facts.outcome) is not str or facts.outcome not in OUTCOMES:
        return "outcome", f"must be one of {sorted(OUTCOMES)}, got {facts.outcome!r}"
    for name in ("policy_digest", "final_answer_digest", "wire_list_digest"):
        value = getattr(facts, name)
        if value is not None and not is_hex_digest(value):
            return name, "must be 64 lowercase hex digits or None"
    return None


def build_statement(facts: SealFacts) -> dict[str, Any]:
    """The statement of ``facts`` as a JSON value."""
    predicate: dict[str, Any] = {
        "run_id": facts.run_id,
        "events": facts.events,
        "policy_digest": facts.policy_digest,
        "receipts": facts.receipts,
        "outcome": facts.outcome,
        "final_answer_digest": facts.final_answer_digest,
    }
    if facts.wire_list_digest is not None:
        predicate["wire_list_digest"] = facts.wire_list_digest
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": SUBJECT_PREFIX + facts.run_id, "digest": {"sha256": facts.head}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def statement_bytes(facts: SealFacts) -> bytes:
    """The canonical JSON bytes of the statement: the DSSE payload."""
    return canon(build_statement(facts))


def _refuse(where: str, reason: str) -> SealError:
    return SealError(f"statement {where}", reason, code="statement")


def _exact(value: Any, where: str, members: frozenset[str], optional: frozenset[str]) -> None:
    if not isinstance(value, dict):
        raise _refuse(where, "must be an object")
    unknown = sorted(set(value) - members)
    if unknown:
        raise _refuse(where, f"unknown member {unknown[0]!r}")
    missing = sorted(members - optional - set(value))
    if missing:
        raise _refuse(where, f"the member {missing[0]!r} is missing")


def parse_statement(payload: bytes) -> SealFacts:
    """Parse and check a seal statement strictly; return its facts.

    Refused (:class:`SealError`, code ``statement``): bytes that are not the canonical JSON
    of their value (this catches duplicate members, whitespace, other key orders), another
    ``_type`` or ``predicateType``, unknown or missing members, not exactly one subject, a
    subject name other than ``run:<predicate.run_id>``, a digest that is not 64 lowercase
    hex, counts or an outcome out of range."""
    if not isinstance(payload, bytes):
        raise UsageError("a statement is bytes (the verified DSSE payload)", option="payload")
    try:
        value = parse(payload)
        canonical = canon(value)
    except (ValueError, CanonicalFormError) as exc:
        raise _refuse("$", f"not canonical JSON ({type(exc).__name__})") from None
    if canonical != payload:
        raise _refuse("$", "not canonical JSON (RFC 8785): the bytes differ from canon(value)")
    _exact(value, "$", _STATEMENT_MEMBERS, frozenset())
    if value["_type"] != STATEMENT_TYPE:
        raise _refuse("$._type", f"must be {STATEMENT_TYPE!r}")
    if value["predicateType"] != PREDICATE_TYPE:
        raise _refuse("$.predicateType", f"must be {PREDICATE_TYPE!r}")
    subjects = value["subject"]
    if not isinstance(subjects, list) or len(subjects) != 1:
        raise _refuse("$.subject", "must be an array of exactly one subject (the run)")
    subject = subjects[0]
    _exact(subject, "$.subject[0]", frozenset({"name", "digest"}), frozenset())
    _exact(subject["digest"], "$.subject[0].digest", frozenset({"sha256"}), frozenset())
    predicate = value["predicate"]
    _exact(predicate, "$.predicate", _PREDICATE_MEMBERS, frozenset({"wire_list_digest"}))
    if "wire_list_digest" in predicate and predicate["wire_list_digest"] is None:
        raise _refuse("$.predicate.wire_list_digest", "is absent when there is none, never null")
    run_id = predicate["run_id"]
    if type(run_id) is not str or subject["name"] != SUBJECT_PREFIX + run_id:
        raise _refuse("$.subject[0].name", "must be 'run:' followed by predicate.run_id")
    try:
        return SealFacts(
            run_id=run_id,
            head=subject["digest"]["sha256"],
            events=predicate["events"],
            policy_digest=predicate["policy_digest"],
            receipts=predicate["receipts"],
            outcome=predicate["outcome"],
            final_answer_digest=predicate["final_answer_digest"],
            wire_list_digest=predicate.get("wire_list_digest"),
        )
    except UsageError as exc:
        where = exc.option or "?"
        path = "$.subject[0].digest.sha256" if where == "head" else f"$.predicate.{where}"
        raise _refuse(path, str(exc).split(": ", 1)[-1]) from None


def seal_run(facts: SealFacts, signer: Signer) -> bytes:
    """The seal of a closed run: a DSSE envelope (JSON bytes) over its statement."""
    return sign_envelope(PAYLOAD_TYPE, statement_bytes(facts), signer)


def open_seal(
    envelope: bytes | str, trusted_keys: Iterable[PublicKey | bytes | str]
) -> tuple[SealFacts, tuple[str, ...]]:
    """Verify a seal under the caller's trusted keys, then parse its statement (never the
    other way round); return the facts and the key ids that signed."""
    verified = verify_envelope(envelope, trusted_keys, payload_type=PAYLOAD_TYPE)
    return parse_statement(verified.payload), verified.key_ids
