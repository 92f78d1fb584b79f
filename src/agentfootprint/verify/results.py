"""What verifying a run gives: its :class:`Outcome` and :class:`RunVerification` (a failure
raises :class:`~agentfootprint.errors.VerificationError` instead)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentfootprint.logformat.log_formats import LOG_FORMAT_V1
from agentfootprint.verify.bundle_proofs import Inclusion

__all__ = ["Outcome", "RunVerification"]


class Outcome(enum.Enum):
    """What a verified run proves. The values are stable machine codes (``verify --json``,
    the vectors' descriptors); what a person reads says it in words instead: ``verify``
    prints both VALID and VALID_UNSIGNED as ``VALID``, then whether the run is sealed and
    whether a pinned key sealed it (docs/log-format.md section 9.6)."""

    VALID = "VALID"  #: closed, every check passed, sealed by a key the caller pinned
    #: closed, every check passed, not proven sealed by a pinned key: not sealed, or
    #: sealed by a key the caller did not pin (``seal_note`` says which)
    VALID_UNSIGNED = "VALID_UNSIGNED"
    UNSEALED = "UNSEALED"  #: never closed (the process died); the prefix is consistent


@dataclass(frozen=True, kw_only=True, slots=True)
class RunVerification:
    """The result of verifying one run (a failure raises instead)."""

    run_id: str
    conversation_id: str
    outcome: Outcome
    events: int
    commits: int
    receipts: int
    head: bytes
    close: Mapping[str, Any] | None
    final_state: Mapping[str, Any]
    receipt_lists: Mapping[str, tuple[str, ...]]
    ancestors: tuple[str, ...]
    #: the redaction policy document the run recorded (None: no policy)
    policy: Mapping[str, Any] | None = None
    #: the ``ts`` of the run's ``run.open`` row
    opened_at: int = 0
    #: the projection version the run was served under (a child may record another)
    projection: int = 1
    #: the run's log format (``run.open.format``); a replay records in it
    log_format: str = LOG_FORMAT_V1
    #: the pinned keys the run's seal verified under (VALID when not empty)
    signed_by: tuple[str, ...] = ()
    #: the key id ``run.open`` names as the run's signer (format v4), or None
    seal_key_id: str | None = None
    #: in words, why a closed run is VALID_UNSIGNED ("not sealed: ...", or "sealed by key
    #: K; key not pinned: ..."); None for VALID and UNSEALED
    seal_note: str | None = None
    #: SHA-256 of the seal envelope's bytes (its Merkle leaf's ``seal``), None unsealed
    seal_digest: bytes | None = None
    #: a bundle's proof of the run's leaf under the checkpoint it carries (section 13.4)
    inclusion: Inclusion | None = None
