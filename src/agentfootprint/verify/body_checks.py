"""One run's verification state, and the checks of the body types that change it.

:class:`RunCheck` is what the verifier knows about a run while it reads its rows in seq order
(the folded state, the open commit, the receipt lists, the policy); ``check_write``,
``check_commit``, ``check_close`` and ``check_receipt`` apply docs/log-format.md section 9.2
step 6 to one body: every member's shape first (a ``ValueError``, which the verifier reports
as **structure**), then what it says against the log (each with its own code). A receipt's
request is rebuilt under the projection the run's ``run.open`` records; format v2's ``call``
markers are checked here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentfootprint.errors import CanonicalFormError, VerificationError
from agentfootprint.verify.calls import LOG_FORMAT_V1, MARKED_FORMATS
from agentfootprint.verify.canonical import canon
from agentfootprint.verify.commitments import iter_commitments
from agentfootprint.verify.fold import FoldError, apply_write, digest_list_problem, expand_digests
from agentfootprint.verify.hashing import is_hex_digest
from agentfootprint.verify.request import (
    PROJECTIONS,
    Projection,
    ProjectionError,
    RequestHasher,
    piece_mismatch,
)

__all__ = [
    "OUTCOMES",
    "RunCheck",
    "check_close",
    "check_commit",
    "check_receipt",
    "check_write",
    "field_of",
]

OUTCOMES = ("answered", "stopped_early", "failed")


class RunCheck:
    """Mutable state of one run's verification."""

    def __init__(self, run_id: str, state: dict[str, Any], conversation_id: str = "") -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.state = state
        self.commit = 0
        self.pending: list[tuple[int, str, str, Any]] = []  # writes of the open commit
        self.in_batch = False  # a commit batch has started and its marker is not seen yet
        self.phase = 0  # 1 receipts, 2 events, 3 writes: the order inside a batch
        self.receipts = 0
        self.receipted = False  # run.open says every call was receipted
        self.log_format = LOG_FORMAT_V1  # run.open's format, once read
        self.projection: Projection = PROJECTIONS[1]  # run.open's projection, once read
        self.calls = 0  # format v2: the commit markers carrying ``call`` so far
        self.matches: Callable[[str], bool] | None = None  # the run's redaction policy
        self.policy: Mapping[str, Any] | None = None
        self.digests: set[str] = set()  # commitments written by this run
        self.sightings: list[tuple[str, int, str | None]] = []  # (digest, seq, key)
        self.initial: Mapping[str, Any] = {}  # the parent's final state (recorded form)
        self._inherited: set[str] | None = None
        self._hasher: RequestHasher | None = None  # made when first needed (usually given)
        self.previous: dict[str, list[str]] = {kind: [] for kind in self.projection.piece_kinds}
        self.close: dict[str, Any] | None = None

    @property
    def hasher(self) -> RequestHasher:
        """The receipt hasher of the run's projection (the verifier gives a continued run
        its parent's, forked)."""
        if self._hasher is None:
            self._hasher = RequestHasher(self.projection.version)
        return self._hasher

    @hasher.setter
    def hasher(self, hasher: RequestHasher) -> None:
        self._hasher = hasher

    def inherited(self, digest: str) -> bool:
        """Whether the run started with this commitment (re-recording it is no reuse)."""
        if self._inherited is None:
            self._inherited = {d for d, _, _ in iter_commitments(dict(self.initial))}
        return digest in self._inherited

    def fail(self, seq: int, reason: str, code: str = "invalid") -> VerificationError:
        return VerificationError(self.run_id, seq, reason, code=code)


def field_of(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(name)
    if type(value) is kind:  # what a parsed body holds: the exact type (a bool is not an int)
        return value
    if (isinstance(value, bool) and kind is int) or not isinstance(value, kind):
        raise ValueError(f"field {name!r} missing or not {getattr(kind, '__name__', kind)}")
    return value


def check_write(check: RunCheck, seq: int, body: dict[str, Any]) -> None:
    commit = field_of(body, "commit", int)
    if commit != check.commit:
        raise check.fail(
            seq, f"write of commit {commit} while commit {check.commit} is open", "structure"
        )
    path, verb = field_of(body, "path", str), field_of(body, "verb", str)
    if not path:
        raise check.fail(seq, "write with an empty path", "structure")
    if (verb == "delete") == ("value" in body) or set(body) - {
        "commit",
        "path",
        "verb",
        "value",
    }:
        raise check.fail(seq, f"{verb} write has the wrong fields {sorted(body)}", "structure")
    check.pending.append((seq, path, verb, body.get("value")))


def check_commit(check: RunCheck, seq: int, body: dict[str, Any]) -> None:
    commit, writes = field_of(body, "commit", int), field_of(body, "writes", int)
    field_of(body, "stage", str)
    field_of(body, "stage_run", str)
    marks_call = check.log_format in MARKED_FORMATS and "call" in body
    if marks_call:
        field_of(body, "call", int)
    if commit != check.commit:
        raise check.fail(seq, f"commit {commit} where {check.commit} was expected", "structure")
    if writes != len(check.pending):
        raise check.fail(
            seq,
            f"commit {commit} declares {writes} writes but {len(check.pending)} precede it",
            "structure",
        )
    if marks_call:
        _check_call_marker(check, seq, commit, body["call"])
    for write_seq, path, verb, value in check.pending:
        try:
            apply_write(check.state, path, verb, value)
        except FoldError as exc:
            raise check.fail(write_seq, str(exc), "fold") from exc
    check.pending = []
    check.commit += 1
    check.in_batch = False
    check.phase = 0


def _check_call_marker(check: RunCheck, seq: int, commit: int, call: int) -> None:
    """Format v2: ``call`` marks a model call only when no receipt does, numbered from 0."""
    if check.receipted:
        raise check.fail(
            seq,
            f"commit {commit} carries call {call} but receipts are on (the receipt is the "
            "call's marker; a commit marker carries call only when receipts are off)",
            "structure",
        )
    if call != check.calls:
        raise check.fail(
            seq,
            f"commit {commit} carries call {call} where call {check.calls} was expected "
            "(call markers count 0, 1, 2, ... in order)",
            "structure",
        )
    check.calls += 1


def check_close(check: RunCheck, seq: int, body: dict[str, Any]) -> None:
    if check.in_batch:
        raise check.fail(seq, f"run.close inside commit {check.commit}'s batch", "structure")
    outcome = field_of(body, "outcome", str)
    commits, receipts = field_of(body, "commits", int), field_of(body, "receipts", int)
    marked = check.log_format in MARKED_FORMATS and not check.receipted  # calls by markers
    calls = field_of(body, "calls", int) if check.receipted or marked else receipts
    if outcome not in OUTCOMES:
        raise check.fail(seq, f"unknown outcome {outcome!r}", "structure")
    if (commits, receipts) != (check.commit, check.receipts):
        raise check.fail(
            seq,
            f"run.close counts {commits} commits and {receipts} receipts, the log "
            f"holds {check.commit} and {check.receipts}",
            "structure",
        )
    if marked:
        if calls != check.calls:
            raise check.fail(
                seq,
                f"run.close counts {calls} calls but {check.calls} commit markers carry call "
                "(receipts are off, so each model call is marked on its commit)",
                "structure",
            )
    elif calls != receipts:
        raise check.fail(
            seq,
            f"run.close counts {calls} calls but receipts were on and "
            f"{receipts} receipts were written",
            "receipt",
        )
    check.close = body


def check_receipt(check: RunCheck, seq: int, body: dict[str, Any]) -> None:
    # every member's shape first (structure), then what it says (receipt)
    call, commit = field_of(body, "call", int), field_of(body, "commit", int)
    model, params = field_of(body, "model", str), field_of(body, "params", dict)
    claimed_request = field_of(body, "request", str)
    if not is_hex_digest(claimed_request):
        raise ValueError("field 'request' is not 64 lowercase hex digits")
    kinds = check.projection.piece_kinds
    for kind in kinds:
        problem = digest_list_problem(body.get(kind))
        if problem is not None:
            raise ValueError(f"field {kind!r} {problem}")
    if check.log_format in MARKED_FORMATS and not check.receipted:
        raise check.fail(
            seq,
            "a receipt in a run whose run.open says receipts are off (options.record_receipt "
            "is not true); in format v2 the commit marker marks such a call",
            "structure",
        )
    if call != check.receipts:
        raise check.fail(
            seq, f"receipt for call {call} where call {check.receipts} was expected", "receipt"
        )
    if commit != check.commit:
        raise check.fail(
            seq,
            f"receipt of call {call} names commit {commit} inside commit {check.commit}",
            "receipt",
        )
    try:
        request = check.projection.build(check.state)
    except ProjectionError as exc:
        raise check.fail(seq, f"no request can be built here: {exc}", "receipt") from exc
    try:
        served = check.hasher.digests(request)
    except CanonicalFormError as exc:
        raise check.fail(seq, f"served state is not I-JSON: {exc}", "receipt") from exc
    for kind in kinds:
        try:
            claimed = expand_digests(check.previous[kind], body[kind])
        except FoldError as exc:
            raise check.fail(seq, f"receipt {kind} list: {exc}", "receipt") from exc
        actual = served.pieces(kind)
        if claimed != actual:
            raise check.fail(seq, piece_mismatch(call, kind, claimed, actual), "receipt")
        check.previous[kind] = actual  # equal; its prefix objects make the next compare cheap
    if canon(model) != canon(served.model) or canon(params) != canon(served.params):
        raise check.fail(
            seq, f"call {call}: model or parameters differ from those served", "receipt"
        )
    if claimed_request != served.request:
        raise check.fail(
            seq,
            f"call {call}: request digest {claimed_request} does not "
            f"match the rebuilt request {served.request}",
            "receipt",
        )
    check.receipts += 1
