"""The error hierarchy: one root, misuse separate from run failures.

``AgentFootprintError``
    ``UsageError``            misuse, raised at construction or call time (bad option, bad id)
        ``FileError``           a named file cannot be used: missing, unreadable, unwritable
            ``NotALogError``      the file is not an agentfootprint log (says what it is)
            ``NotAVaultError``    the file is not a disclosure vault (says what it is)
            ``NotAnArtifactStoreError`` not an artifact store (file or directory; says what it is)
            ``NewerVersionError`` written by a newer format version: upgrade to read it
            ``KeyFileError``      a key file or public key that cannot be used
                ``WrongPassphraseError`` the passphrase does not decrypt the key
                ``UnsupportedKeyError``  not an Ed25519 key
        ``ModelRequestsBlocked`` a provider that calls a real model, while requests are blocked
    ``CanonicalFormError``    a value that cannot be hashed canonically (names the JSON path)
        ``ReservedKeyError``    input used ``$commit``, reserved for commitments
        ``RecordTooLargeError`` a value whose recorded body would exceed the size limit
    ``RunError``              the run itself failed; carries ``run_id``
        ``ProviderError``       raised by a provider: ``status``, ``retryable``
        ``ProviderCallError``   the provider raised; the log holds the failure and verifies
        ``ScriptExhaustedError`` the scripted mock provider has no reply left
        ``ContinuationError``   a run cannot be continued from the named parent
        ``ReplayDivergence``    a replay was served something the original was not
        ``PolicyHaltError``     the permission checker halted the run at a tool call
        ``CheckerDeadError``    an integrity check missed its canary (``integrity_posture="dev"``)
        ``OutputValidationError`` the answer did not fit ``output_type`` within the retries
    ``ToolTeardownTimeoutError`` a tool's teardown ran past ``tool_teardown_timeout_ms``
    ``StoreError``            the store failed (driver errors are translated to these)
        ``StoreConflictError``  another writer appended the same run position
        ``StoreBusyError``      the database stayed locked past the timeout
        ``StoreUnavailableError`` the database server could not be reached, or the connection
                                broke (a batch in flight was kept whole or not at all)
        ``AppendOnlyError``     something tried to change or delete a log row
        ``RunNotFoundError``    no such run in the store
        ``ArtifactStoreError``  an artifact store refused or failed (docs/artifacts.md)
            ``ArtifactConflictError`` a put of a ref the scope already knows
            ``ArtifactNotFoundError`` no live artifact with that ref in that scope (a KeyError)
    ``VerificationError``     the log does not prove what it claims (names run, seq, reason)
        ``SealError``           a seal (DSSE envelope, in-toto statement) is malformed or fails
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentFootprintError",
    "AppendOnlyError",
    "ArtifactConflictError",
    "ArtifactNotFoundError",
    "ArtifactStoreError",
    "CanonicalFormError",
    "CheckerDeadError",
    "ContinuationError",
    "CredentialConsentRequiredError",
    "FileError",
    "KeyFileError",
    "ModelRequestsBlocked",
    "NewerVersionError",
    "NotALogError",
    "NotAVaultError",
    "NotAnArtifactStoreError",
    "OutputValidationError",
    "PauseAnsweredError",
    "PolicyHaltError",
    "ProviderCallError",
    "ProviderError",
    "RecordTooLargeError",
    "ReplayDivergence",
    "ReservedKeyError",
    "RunError",
    "RunNotFoundError",
    "ScriptExhaustedError",
    "SealError",
    "StoreBusyError",
    "StoreConflictError",
    "StoreError",
    "StoreUnavailableError",
    "ToolTeardownTimeoutError",
    "UnsupportedKeyError",
    "UsageError",
    "VerificationError",
    "WrongPassphraseError",
]


class AgentFootprintError(Exception):
    """Root of every error this library raises on purpose."""


class UsageError(AgentFootprintError, ValueError):
    """The library was used wrongly; the message names what and how to fix it."""

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class FileError(UsageError):
    """A file named as input or output cannot be used (missing, a folder, no permission, no
    room), or is not the kind of file asked for. ``path`` names it."""

    def __init__(self, message: str, *, path: str | None = None, option: str | None = None):
        super().__init__(message, option=option)
        self.path = path


class NotALogError(FileError):
    """The file is not an agentfootprint log; the message says what it is instead."""


class NotAVaultError(FileError):
    """The file is not a disclosure vault; the message says what it is instead."""


class NewerVersionError(FileError):
    """The file was written by a newer version of the format (a schema or bundle version this
    library does not know): it is not judged, neither valid nor invalid; upgrade to read it."""


class ModelRequestsBlocked(UsageError):
    """A provider that calls a real model (its class sets ``makes_requests = True``) was
    asked to, while model requests are blocked: under pytest, the agentfootprint plugin
    blocks them in every test. The message names the provider and how to allow it."""


class CanonicalFormError(AgentFootprintError, ValueError):
    """A value is not I-JSON and cannot be canonicalised (RFC 8785)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class ReservedKeyError(CanonicalFormError):
    """Input used the key ``$commit``, which the log reserves for redaction commitments."""


class RecordTooLargeError(CanonicalFormError):
    """A value whose recorded body would exceed ``verify.limits.MAX_BODY_BYTES``."""


class RunError(AgentFootprintError):
    """A run failed while executing. ``run_id`` names its (closed, verifiable) log."""

    def __init__(self, message: str, *, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


def _checked_status(status: object, retryable: object) -> None:
    if status is not None and (type(status) is not int or not 100 <= status <= 999):
        raise UsageError(
            f"ProviderError(status=...) must be the HTTP status (an int from 100 to 999) or None, "
            f"got {status!r}",
            option="status",
        )
    if type(retryable) is not bool:
        raise UsageError(
            f"ProviderError(retryable=...) must be True or False, got {retryable!r}",
            option="retryable",
        )


class ProviderError(RunError):
    """Raised by a provider when its model call failed: rate limited, a server error, a
    bad key, a model not found, a request too long for the model's context.

    ``status`` is the HTTP status (None when there was none: a connection refused);
    ``retryable`` says whether sending the same request again may succeed (rate limits and
    server errors: True; a bad key, a missing model, a request that is too long: False).
    The message says what went wrong and what to do about it.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        run_id: str | None = None,
        wire: Any = None,
    ) -> None:
        _checked_status(status, retryable)
        super().__init__(message, run_id=run_id)
        self.status = status
        self.retryable = retryable
        #: the HTTP attempts the call made (a ``WireRecord``), from adapters that speak HTTP:
        #: the loop records their digests in the failed call's commit
        self.wire = wire


class ProviderCallError(RunError):
    """The LLM provider raised during a call; the original error is ``__cause__``.

    ``status`` and ``retryable`` are the cause's when it is a :class:`ProviderError`
    (None and False otherwise)."""

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        status: int | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message, run_id=run_id)  # the loop's own: copied, not checked
        self.status = status
        self.retryable = retryable


class ScriptExhaustedError(RunError):
    """The scripted mock provider was asked for more replies than its script holds."""


class ContinuationError(RunError):
    """A run cannot continue the named parent run (missing, unfinished or failed)."""


class ReplayDivergence(RunError):
    """A replay was served something the original was not, or departed from its tool calls.

    ``call`` is the call index, ``kind`` what differs (``system``, ``messages``, ``tools``,
    ``model``, ``params``, ``request``, ``tool-call``, ``calls``, ``redacted``: a value the
    replay cannot compare without the disclosure vault, ``policy``: the agent redacts less
    than the original, ``record``: every request matched but another row was recorded,
    ``decision``: a decider, such as a permission checker, was asked something the original
    did not ask), ``position`` the piece's (or tool call's, or row's, or decision's) index,
    ``expected`` / ``actual`` the digests (or values) and ``diff`` a unified diff of the
    recorded content from both logs.
    """

    def __init__(
        self,
        message: str,
        *,
        call: int,
        kind: str,
        position: int | None = None,
        expected: str | None = None,
        actual: str | None = None,
        diff: str = "",
        original_run: str = "",
        run_id: str | None = None,
    ) -> None:
        super().__init__(message + (f"\n{diff}" if diff else ""), run_id=run_id)
        self.call = call
        self.kind = kind
        self.position = position
        self.expected = expected
        self.actual = actual
        self.diff = diff
        self.original_run = original_run


class PolicyHaltError(RunError):
    """The permission checker answered ``halt`` for a tool call: the tool did not run and
    the run closed ``failed`` (its log verifies and records the decision). ``tool``,
    ``tool_call_id``, ``by`` (who decided) and ``reason`` are the decision's."""

    def __init__(
        self,
        message: str,
        *,
        tool: str = "",
        tool_call_id: str = "",
        by: str = "",
        reason: str = "",
        run_id: str | None = None,
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.tool = tool
        self.tool_call_id = tool_call_id
        self.by = by
        self.reason = reason


class OutputValidationError(RunError):
    """The model's answer did not fit the agent's ``output_type`` after its
    ``output_retries`` (or with no pass of ``max_iterations`` left): the run closed
    ``failed`` (its log verifies and records each failure as
    ``agentfootprint.validation.output_invalid``). ``issues`` are the last answer's, each
    naming a path, what was expected and the JSON type received (never a value);
    ``failures`` counts the answers refused."""

    def __init__(
        self,
        message: str,
        *,
        issues: list[dict[str, Any]] | None = None,
        failures: int = 0,
        run_id: str | None = None,
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.issues = list(issues or [])
        self.failures = failures


class CheckerDeadError(RunError):
    """Under ``integrity_posture="dev"``, an integrity check is dead: it missed its own
    canary (the synthetic defect it exists to catch) at the run's start, or it filed no
    disposition at all in a run where work existed. The run closed ``failed`` (its log
    verifies): a green report from a check that never ran is decoration. ``check`` and
    ``seam`` name it."""

    def __init__(
        self, message: str, *, check: str = "", seam: str = "", run_id: str | None = None
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.check = check
        self.seam = seam


class ToolTeardownTimeoutError(AgentFootprintError, TimeoutError):
    """A tool's teardown did not finish within ``tool_teardown_timeout_ms``: it was
    abandoned (recorded as ``agentfootprint.tools.session_close_failed`` with this class
    name). Never raised out of a run: a session that may still be live is a recorded fact."""


class StoreError(AgentFootprintError):
    """The store could not do what was asked."""


class StoreConflictError(StoreError):
    """Another writer appended at the same (run, seq); nothing of this append was kept."""


class StoreBusyError(StoreError):
    """The database stayed locked by another writer past the busy timeout."""


class StoreUnavailableError(StoreError):
    """The database server could not be reached, refused the connection, or the connection
    broke during a request. A batch in flight when it broke was kept whole or not at all
    (one transaction per flush); a run whose flush failed records nothing more and stays
    UNSEALED."""


class AppendOnlyError(StoreError):
    """The log is append-only: rows cannot be updated or deleted."""


class RunNotFoundError(StoreError, KeyError):
    """The store holds no run with that id."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class VerificationError(AgentFootprintError):
    """The log failed verification. Names the run, the event seq and the reason."""

    def __init__(
        self,
        run_id: str,
        seq: int | None,
        reason: str,
        *,
        code: str = "invalid",
        where: str | None = None,
    ) -> None:
        if where is None:
            where = f"run {run_id}" + (f" seq {seq}" if seq is not None else "")
        super().__init__(f"{where}: {reason}")
        self.run_id = run_id
        self.seq = seq
        self.reason = reason
        self.code = code


class KeyFileError(FileError):
    """A signing key or a public key cannot be used: unreadable, not PEM, not PKCS8, a private
    key where a public one was asked for. ``path`` names the file (None for a key given as
    text). The message never quotes key material."""


class WrongPassphraseError(KeyFileError):
    """An encrypted private key file could not be decrypted with the passphrase given (or none
    was given, or one was given for a key that is not encrypted)."""


class UnsupportedKeyError(KeyFileError):
    """The key file holds a key of another type (RSA, EC, Ed448, X25519...): seals are Ed25519."""


class SealError(VerificationError):
    """A seal (a DSSE envelope or the in-toto statement inside it) is malformed or does not
    verify. ``where`` names the member (``$.signatures[0].sig``), ``reason`` says why and
    ``code`` is one of ``malformed``, ``payload-type``, ``untrusted-key``, ``bad-signature``,
    ``statement``."""

    def __init__(
        self, where: str, reason: str, *, code: str = "malformed", run_id: str = ""
    ) -> None:
        super().__init__(run_id, None, reason, code=code, where=f"seal {where}")
        self.where = where


class PauseAnsweredError(StoreConflictError):
    """A store refused a run that answers a pause already answered (docs/log-format.md
    section 5.9: one answer per pause): ``parent`` is the paused run, ``answered_by`` the
    run that answered it."""

    def __init__(self, message: str, *, parent: str, answered_by: str) -> None:
        super().__init__(message)
        self.parent = parent
        self.answered_by = answered_by


class CredentialConsentRequiredError(RunError):
    """A tool's credential needs a person's consent and the agent tells the model instead of
    pausing (``on_authorization_required="tell-model"``): the turn ended without it.
    ``authorization_url`` (where the person consents) is on this object only: never in its
    message, so never in the recorded error."""

    def __init__(
        self,
        message: str,
        *,
        service: str,
        authorization_url: str | None,
        run_id: str | None = None,
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.service = service
        self.authorization_url = authorization_url


class ArtifactStoreError(StoreError):
    """An artifact store (docs/artifacts.md) refused or failed: a put whose content does not
    match its head, a write to a read-only store, a damaged file inside the store (named)."""


class ArtifactConflictError(ArtifactStoreError):
    """A put named a ref its scope already knows (live or tombstoned): refs are never reused,
    so a ref always names one content or its tombstone."""


class ArtifactNotFoundError(ArtifactStoreError, KeyError):
    """No live artifact with that ref in that scope (never put, put in another scope, or
    removed already)."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class NotAnArtifactStoreError(FileError):
    """The file or directory is not an artifact store (a log, a vault, another application's
    database, a directory of other files); the message says what it is and what to do."""
