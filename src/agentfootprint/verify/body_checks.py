"""One run's verification state, and the checks of the body types that change it.

:class:`RunCheck` is what the verifier knows about a run while it reads its rows in seq order
(the folded state, the open commit, the receipt lists, the policy); ``check_write``,
``check_commit``, ``check_close`` and ``check_receipt`` apply docs/log-format.md section 9.2
step 6 to one body: every member's shape first (a ``ValueError``, which the verifier reports
as **structure**), then what it says against the log (each with its own code). A receipt's
request is rebuilt under the projection the run's ``run.open`` records; format v2's ``call``
markers and format v6's ``reads`` on writes (section 5.10) are checked here too.
``open_members`` checks ``run.open``'s own members; ``check_redaction`` and
``policy_matcher`` are the redaction checks of docs/log-format.md section 12.5
(commitments, reuse, leaks under the run's policy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

from agentfootprint.errors import CanonicalFormError, VerificationError
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import (
    MatchBudgetExceeded,
    PolicyDocument,
    iter_commitments,
    scan_redaction,
)
from agentfootprint.logformat.fold import (
    FoldError,
    apply_write,
    digest_list_problem,
    expand_digests,
)
from agentfootprint.logformat.hashing import is_hex_digest
from agentfootprint.logformat.log_formats import (
    LOG_FORMAT_V1,
    LOG_FORMATS,
    LogFormat,
    known_log_format,
    log_format,
)
from agentfootprint.logformat.request import (
    PROJECTIONS,
    Projection,
    ProjectionError,
    RequestHasher,
    json_kind,
    piece_mismatch,
    recorded_projection,
)
from agentfootprint.verify.pause_checks import (
    Answer,
    check_pending,
    check_resume_commit,
    open_answer,
)

__all__ = [
    "Opened",
    "RunCheck",
    "check_close",
    "check_commit",
    "check_receipt",
    "check_redaction",
    "check_write",
    "field_of",
    "open_members",
    "policy_matcher",
]

_CLOSE_COUNTS = frozenset({"outcome", "commits", "receipts", "calls"})


class RunCheck:
    """Mutable state of one run's verification."""

    def __init__(self, run_id: str, state: dict[str, Any], conversation_id: str = "") -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.state = state
        self.commit = 0
        self.pending: list[tuple[int, str, str, Any]] = []  # writes of the open commit
        #: format v6: the open commit's writes' ``reads`` (seq, keys), checked at its marker
        self.pending_reads: list[tuple[int, list[str]]] = []
        self.in_batch = False  # a commit batch has started and its marker is not seen yet
        self.phase = 0  # 1 receipts, 2 events, 3 writes: the order inside a batch
        self.receipts = 0
        self.receipted = False  # run.open says every call was receipted
        self.format: LogFormat = log_format(LOG_FORMAT_V1)  # run.open's format, once read
        self.projection: Projection = PROJECTIONS[1]  # run.open's projection, once read
        self.calls = 0  # format v2: the commit markers carrying ``call`` so far
        self.matches: Callable[[str], bool] | None = None  # the run's redaction policy
        self.policy: Mapping[str, Any] | None = None
        self.digests: set[str] = set()  # commitments written by this run
        self.sightings: list[tuple[str, int, str | None]] = []  # (digest, seq, key)
        self.initial: Mapping[str, Any] = {}  # the parent's final state (recorded form)
        self._inherited: set[str] | None = None
        self._hasher: RequestHasher | None = None  # made when first needed (usually given)
        self.previous: dict[str, Sequence[str]] = {kind: [] for kind in self.projection.piece_kinds}
        self.close: dict[str, Any] | None = None
        self.resumes = False  # format v5: run.open resumes the parent's pause (section 5.9)

    @property
    def log_format(self) -> str:
        """The name of the run's log format (``run.open.format``)."""
        return self.format.name

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


class Opened(NamedTuple):
    """What a checked ``run.open`` says: its format, conversation, parent, projection, and
    (format v5) whether it answers or sets aside its paused parent's question."""

    format: LogFormat
    conversation_id: str
    parent: tuple[str, int, bytes] | None
    projection: Projection
    answer: Answer | None = None


def open_members(where: RunCheck, body: dict[str, Any]) -> Opened:
    """``run.open``'s own members (structure): the log format, the conversation, the
    parent reference and the projection version."""
    name = body.get("format")
    recorded = known_log_format(name) if isinstance(name, str) else None
    if recorded is None:
        raise where.fail(
            0,
            f"unknown log format {name!r} (this version verifies {', '.join(LOG_FORMATS)})",
            "structure",
        )
    if body.get("run_id") != where.run_id:
        raise where.fail(0, "run.open names another run id", "structure")
    conversation = body.get("conversation_id")
    if not isinstance(conversation, str) or not conversation:
        raise where.fail(0, "run.open has no conversation_id", "structure")
    parent = body.get("parent")
    reference = None
    if parent is not None:
        try:
            if not isinstance(parent, dict):
                raise ValueError(f"it is {json_kind(parent)}, not an object")
            parent_id = field_of(parent, "run_id", str)
            parent_events = field_of(parent, "events", int)
            head_hex = field_of(parent, "head", str)
            if not is_hex_digest(head_hex):
                raise ValueError("head is not 64 lowercase hex digits")
        except ValueError as exc:
            raise where.fail(0, f"run.open parent is malformed: {exc}", "structure") from exc
        reference = (parent_id, parent_events, bytes.fromhex(head_hex))
    try:
        spec = recorded_projection(body)
    except ProjectionError as exc:
        raise where.fail(0, str(exc), "structure") from exc
    answer = open_answer(where, body, recorded, reference is not None)
    return Opened(recorded, conversation, reference, spec, answer)


def check_write(check: RunCheck, seq: int, body: dict[str, Any]) -> None:
    # field_of's own test first, in line: the members of the usual body cost no call
    commit = body.get("commit")
    if type(commit) is not int:
        commit = field_of(body, "commit", int)
    if commit != check.commit:
        raise check.fail(
            seq, f"write of commit {commit} while commit {check.commit} is open", "structure"
        )
    path, verb = body.get("path"), body.get("verb")
    if type(path) is not str:
        path = field_of(body, "path", str)
    if type(verb) is not str:
        verb = field_of(body, "verb", str)
    if not path:
        raise check.fail(seq, "write with an empty path", "structure")
    has_value = "value" in body  # commit, path and verb are members: any other one is extra
    members = 3 + has_value
    if check.format.records_reads:  # format v6: reads, on every write (section 5.10)
        check.pending_reads.append((seq, _reads(check, seq, body.get("reads"))))
        members += 1
    if (verb == "delete") == has_value or len(body) != members:
        raise check.fail(seq, f"{verb} write has the wrong fields {sorted(body)}", "structure")
    check.pending.append((seq, path, verb, body.get("value")))


def _reads(check: RunCheck, seq: int, reads: Any) -> list[str]:
    """A write's ``reads`` (format v6): an array of strings in strictly ascending code point
    order (Python compares strings by code point), else structure."""
    if type(reads) is not list or not all(type(key) is str for key in reads):
        raise check.fail(
            seq, "write has no reads, or reads is not an array of strings", "structure"
        )
    if any(a >= b for a, b in pairwise(reads)):
        raise check.fail(
            seq, "write reads are not distinct keys in ascending code point order", "structure"
        )
    return reads


def _check_reads(check: RunCheck) -> None:
    """Format v6, at the marker: every key a write of the commit says its stage read is a
    key of the state the commit started from or one the commit writes (section 5.10)."""
    written = {path for _, path, _, _ in check.pending}
    for seq, reads in check.pending_reads:
        for key in reads:
            if key not in check.state and key not in written:
                raise check.fail(
                    seq,
                    f"write reads {key!r}, which is neither in the state commit {check.commit} "
                    "started from nor written by it",
                    "structure",
                )
    check.pending_reads = []


def check_commit(check: RunCheck, seq: int, body: dict[str, Any]) -> None:
    commit, writes = body.get("commit"), body.get("writes")  # field_of's test in line
    if type(commit) is not int:
        commit = field_of(body, "commit", int)
    if type(writes) is not int:
        writes = field_of(body, "writes", int)
    if type(body.get("stage")) is not str:
        field_of(body, "stage", str)
    if type(body.get("stage_run")) is not str:
        field_of(body, "stage_run", str)
    marks_call = check.format.marks_calls and "call" in body
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
    if check.resumes and commit == 0:  # format v5: the answer, committed first
        check_resume_commit(check, seq, body)
    if check.pending_reads:  # format v6: what each write says its stage read existed
        _check_reads(check)
    if check.pending:  # (most markers close a batch of no writes: nothing to fold)
        for write_seq, path, verb, value in check.pending:
            try:
                apply_write(check.state, path, verb, value, shared=True)
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
    marked = check.format.marks_calls and not check.receipted  # calls by markers
    calls = field_of(body, "calls", int) if check.receipted or marked else receipts
    if outcome not in check.format.outcomes:
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
    check_pending(check, seq, body, outcome)
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
        stored = body.get(kind)
        if type(stored) is dict and len(stored) == 2:  # the usual unchanged list, seen at once:
            add, keep = stored.get("add"), stored.get("keep")  # {"keep": n, "add": []}
            if type(add) is list and not add and type(keep) is int:
                continue
        problem = digest_list_problem(stored)
        if problem is not None:
            raise ValueError(f"field {kind!r} {problem}")
    if check.format.marks_calls and not check.receipted:
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
        previous, stored = check.previous[kind], body[kind]
        if stored["keep"] == len(previous) and not stored["add"]:
            claimed = previous  # all of the last list and nothing added: that list, as is
        else:
            try:
                claimed = expand_digests(previous, stored)
            except FoldError as exc:
                raise check.fail(seq, f"receipt {kind} list: {exc}", "receipt") from exc
        actual = served.pieces(kind)
        if claimed != actual:
            raise check.fail(seq, piece_mismatch(call, kind, claimed, actual), "receipt")
        check.previous[kind] = actual  # equal; its prefix objects make the next compare cheap
    # two names (text, parsed) have the same canonical bytes exactly when they are equal
    same_model = (
        model == served.model
        if type(model) is str and type(served.model) is str
        else canon(model) == served.model_bytes
    )
    if not same_model or canon(params) != served.params_bytes:
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


def scanned_value(
    type_: str, body: dict[str, Any]
) -> tuple[str | None, Any, tuple[str | int, ...]] | None:
    """What section 12.5 scans in a body: ``(the name it sits under, the value, its path)``,
    or None for a body that is not scanned. A ``set`` is scanned as ``{path: value}``; an
    ``append`` or ``merge`` operand sits inside its state key."""
    if type_ == "write":
        if "value" not in body:
            return None
        path, value = body["path"], body["value"]
        if body["verb"] == "set":
            return None, {path: value}, ()
        if body["verb"] in ("append", "merge"):
            return path, value, (path,)
        return None  # an unknown verb is not scanned (section 12.5): it fails the fold
    if type_ == "event":
        return None, body["payload"], ()
    if type_ == "commit" and "error" in body:
        return None, {"error": body["error"]}, ()
    if type_ == "run.close":
        return None, {k: v for k, v in body.items() if k not in _CLOSE_COUNTS}, ()
    return None


def check_redaction(check: RunCheck, seq: int, type_: str, body: dict[str, Any]) -> None:
    """Commitments well formed and never repeated; no plaintext under a policy key."""
    scanned = scanned_value(type_, body)
    if scanned is None:
        return
    key, value, where = scanned
    rerecorded: Callable[[str, tuple[str | int, ...]], bool] = lambda _d, _p: False  # noqa: E731
    if type_ == "write" and body["verb"] == "set":
        rerecorded = _held_by(check.state.get(body["path"]), (body["path"],))
    elif type_ == "run.close" and "pending" in body:  # the close repeats the question (5.9)
        rerecorded = _held_by(check.state.get("pending"), ("pending",))
    # one walk: every malformed commitment (commitment) before any reuse
    # (commitment-reuse) before any leak (leak), whatever the walk order
    try:
        scan = scan_redaction(value, check.matches, where, key)
    except MatchBudgetExceeded as exc:
        try:  # a malformed commitment in the same value is reported first
            for _ in iter_commitments(value, where, key=key):
                pass
        except ValueError as malformed:
            raise check.fail(seq, str(malformed), "commitment") from malformed
        raise check.fail(
            seq, f"policy matching ran out of its budget: {exc}", "policy-budget"
        ) from exc
    except ValueError as exc:
        raise check.fail(seq, str(exc), "commitment") from exc
    for digest, under, at_path in scan.commitments:
        if (
            digest in check.digests
            and not check.inherited(digest)
            and not rerecorded(digest, at_path)
        ):
            raise check.fail(
                seq,
                f"commitment {digest} appears twice in the run (a reused salt links equal values)",
                "commitment-reuse",
            )
        check.digests.add(digest)
        check.sightings.append((digest, seq, under))
    if scan.leaks:
        raise check.fail(seq, scan.leaks[0].message, "leak")


def _held_by(
    value: Any, path: tuple[str | int, ...]
) -> Callable[[str, tuple[str | int, ...]], bool]:
    """Whether ``value`` (a key's committed value before a ``set``) holds this commitment at
    this very position, computed once and only when asked: a ``set`` that records a key again
    (full mode) repeats the commitments of what did not change, in place, which is no reuse."""
    found: set[tuple[str, tuple[str | int, ...]]] | None = None

    def held(digest: str, at: tuple[str | int, ...]) -> bool:
        nonlocal found
        if found is None:
            found = set()
            if value is not None:
                found = {(d, where) for d, _, where in iter_commitments(value, path)}
        return (digest, at) in found

    return held


def policy_matcher(check: RunCheck, body: dict[str, Any]) -> Callable[[str], bool] | None:
    """The run's policy from run.open (checked against its digest), as a key matcher."""
    document, digest = body.get("policy"), body.get("policy_digest")
    if document is None and digest is None:
        return None
    try:
        policy = PolicyDocument.from_json(document)
    except MatchBudgetExceeded as exc:
        raise check.fail(
            0, f"policy matching ran out of its budget: {exc}", "policy-budget"
        ) from exc
    except ValueError as exc:
        raise check.fail(0, f"run.open policy is malformed: {exc}", "policy") from exc
    if policy.to_json() != document:
        raise check.fail(0, "run.open policy is not in its normal form", "policy")
    if digest != policy.digest():
        raise check.fail(0, "run.open policy_digest does not match the policy", "policy")
    return policy.matcher()
