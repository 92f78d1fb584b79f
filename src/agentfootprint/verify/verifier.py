"""The verifier: rebuild every served request from the log alone and check it.

It fails closed with one error type, :class:`VerificationError`, naming the run,
the seq and the reason of the first failure. It imports nothing of the runtime:
an auditor holding only a log (or, later, an export) runs exactly this code,
which implements ``docs/log-format.md``.

Checks, per run, in seq order:

1. rows: seq starts at 0 with no gaps, every row belongs to the run, the type is known;
2. bytes: every body is canonical (``canon(parse(body)) == body``);
3. hashes: every event hash and chain link recomputes;
4. structure: ``run.open`` first (a known log format and projection version), commits
   numbered from 0 with their write counts, receipts before the writes of their commit,
   format v2's ``call`` markers, nothing after ``run.close``;
5. receipts: the request rebuilt from the folded state under the run's projection hashes,
   piece by piece and as a whole, to what the receipt says;
6. ancestry: a continued run's parent verifies and its head is the one recorded.

Every value read from the log has its type checked before it is indexed, iterated or
called: a crafted file gets INVALID with a code and a seq, never a traceback and never a
pass. :meth:`Verifier.verify_all` verifies a whole file: the runs found from the events
(never from the run index, which is not evidence), then the index rows that disagree.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import orjson

from agentfootprint.errors import (
    CanonicalFormError,
    RunNotFoundError,
    UsageError,
    VerificationError,
)
from agentfootprint.verify.body_checks import (
    RunCheck,
    check_close,
    check_commit,
    check_receipt,
    check_write,
    field_of,
)
from agentfootprint.verify.calls import (
    LOG_FORMAT_V1,
    LOG_FORMAT_V2,
    LOG_FORMAT_V3,
    LOG_FORMATS,
    WRITE_AHEAD_FORMATS,
)
from agentfootprint.verify.canonical import canon, parse_canonical
from agentfootprint.verify.chain import (
    GENESIS,
    Row,
    RowSource,
    RunSource,
    chain_hash,
    event_hash,
    index_findings,
    is_text,
    parent_named,
    row_problem,
    shown,
    stored_kind,
)
from agentfootprint.verify.commitments import (
    Disclosure,
    MatchBudgetExceeded,
    PolicyDocument,
    iter_commitments,
    scan_redaction,
)
from agentfootprint.verify.hashing import is_hex_digest
from agentfootprint.verify.request import (
    Projection,
    ProjectionError,
    RequestHasher,
    json_kind,
    recorded_projection,
)

__all__ = [
    "LOG_FORMAT",
    "LOG_FORMATS",
    "LOG_FORMAT_V1",
    "LOG_FORMAT_V2",
    "LOG_FORMAT_V3",
    "Outcome",
    "ProvenValue",
    "Row",
    "RowSource",
    "RunSource",
    "RunVerification",
    "Verifier",
    "shared_verifier",
    "verify_run",
]

#: the log format this version writes; every one of LOG_FORMATS verifies
LOG_FORMAT = LOG_FORMAT_V3
_CONTINUABLE = ("answered", "stopped_early")
_CLOSE_COUNTS = frozenset({"outcome", "commits", "receipts", "calls"})


class _Opened(NamedTuple):
    """What a checked ``run.open`` says: its format, conversation, parent and projection."""

    log_format: str
    conversation_id: str
    parent: tuple[str, int, bytes] | None
    projection: Projection


class Outcome(enum.Enum):
    """What a verified run proves."""

    VALID_UNSIGNED = "VALID_UNSIGNED"  #: closed, every check passed, no signature (seals: later)
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


@dataclass(frozen=True, kw_only=True, slots=True)
class ProvenValue:
    """A redacted value proven by its disclosure: where it sits and what it is."""

    run_id: str
    seq: int
    key: str
    commitment: str
    value: Any


class Verifier:
    """Verifies runs from one source, remembering the runs verified most recently.

    A continued run needs its parent's final state (and the parent's piece digests,
    so no message is hashed twice). The last ``cache_size`` verified runs keep them:
    verifying a conversation's runs in order checks and hashes each run once, and
    memory stays bounded however long the conversation (a run evicted from the cache
    is verified again if a later run needs it).
    """

    def __init__(self, source: RowSource, *, cache_size: int = 64) -> None:
        if type(cache_size) is not int or cache_size < 1:
            raise UsageError(
                f"cache_size must be an integer of at least 1, not {cache_size!r}",
                option="cache_size",
            )
        if not callable(getattr(source, "read", None)):
            raise UsageError(
                f"source must be a store or a bundle (anything with read(run_id)), "
                f"not {type(source).__name__}",
                option="source",
            )
        self.source = source
        self.cache_size = cache_size
        self._done: OrderedDict[str, tuple[RunVerification, RequestHasher]] = OrderedDict()
        self._active: set[str] = set()
        #: failures seen during one verify or verify_all call (a failed parent is verified
        #: once, not once per child); None between calls
        self._failed: dict[str, VerificationError] | None = None
        #: every commitment seen in a verified run: digest -> (run, seq, the key it sits under)
        self.commitments: dict[str, tuple[str, int, str | None]] = {}

    def verify(self, run_id: str) -> RunVerification:
        """Verify one run (and, as needed, its ancestors); raise on the first failure."""
        if type(run_id) is not str or not run_id:
            raise UsageError(f"run_id must be a non-empty string, not {run_id!r}", option="run_id")
        try:
            return self._verified(run_id)[0]
        except RunNotFoundError as exc:  # the run asked for (a missing ancestor is ancestry)
            raise RunNotFoundError(f"run_id: {exc}") from exc

    def verify_all(self) -> Iterator[tuple[str, RunVerification | VerificationError]]:
        """Verify every run the source's events hold, then check its run index against them.

        Yields ``(run_id, result)`` per run found from the events (``source.run_ids()``,
        never the index), a result being the :class:`RunVerification` or the
        :class:`VerificationError`; then one ``VerificationError`` with code ``index`` per
        index row that disagrees with the events (a source without ``index_entries`` has
        no index to check; the row of a run that failed is checked for presence only).
        Store errors (an unreadable file) propagate.
        """
        list_runs = getattr(self.source, "run_ids", None)
        if not callable(list_runs):
            raise UsageError(
                f"{type(self.source).__name__} cannot list its runs (no run_ids()); "
                "verify runs one by one with verify(run_id)"
            )
        run_ids = list(list_runs())
        facts: dict[Any, tuple[Any, Any, Any] | None] = {}
        self._failed = {}  # the whole file's failures: a failed parent is verified once
        try:
            for run_id in run_ids:
                try:
                    verified = self._verified(run_id)[0]  # ids as stored: not text is rows
                except VerificationError as exc:
                    facts[run_id] = None  # INVALID already: its index row is not compared
                    yield shown(run_id), exc
                else:
                    parent = verified.ancestors[-1] if verified.ancestors else None
                    facts[run_id] = (verified.conversation_id, parent, verified.opened_at)
                    yield run_id, verified
        finally:
            self._failed = None
        entries = getattr(self.source, "index_entries", None)
        if callable(entries):
            for finding in index_findings(run_ids, facts, list(entries())):
                yield finding.run_id, finding

    def hasher_after(self, run_id: str) -> RequestHasher:
        """A hasher primed with the pieces of a verified run's last request (for its children),
        of that run's projection (``fork(version)`` it for a child served under another)."""
        return self._verified(run_id)[1].fork()

    def _verified(self, run_id: str) -> tuple[RunVerification, RequestHasher]:
        if self._failed is not None:
            return self._verified_in_scope(run_id)
        self._failed = {}  # one call's failures: a failed ancestor is verified once
        try:
            return self._verified_in_scope(run_id)
        finally:
            self._failed = None

    def _verified_in_scope(self, run_id: str) -> tuple[RunVerification, RequestHasher]:
        assert self._failed is not None
        if not is_text(run_id):
            what = "not UTF-8" if type(run_id) is str else f"{stored_kind(run_id)}, not a string"
            raise VerificationError(shown(run_id), None, f"run id is {what}", code="rows")
        cached = self._done.get(run_id)
        if cached is not None:
            self._done.move_to_end(run_id)
            return cached
        if run_id in self._failed:
            raise self._failed[run_id]
        rows = iter(self.source.read(run_id))  # an unknown run: RunNotFoundError
        first = next(rows, None)
        parent = parent_named(first)
        if first is not None and parent is not None and parent not in self._done:
            # the parent comes from this run's unverified run.open row: its own checks come
            # first, as when the parent is cached (a damaged row is itself the failure)
            where = RunCheck(run_id, {})
            self._open_members(where, self._sound_row(where, 0, first, GENESIS)[0])
        # Verify the uncached ancestors oldest first, so each run finds its parent verified
        # (or its failure remembered): no recursion however deep the conversation. A failure
        # is reported by the child's own run.open check, in place.
        for ancestor in reversed(self._uncached_ancestors(run_id, parent)):
            with contextlib.suppress(VerificationError):  # remembered in self._failed
                self._verify_cached(ancestor)
        head = [] if first is None else [first]
        return self._verify_cached(run_id, itertools.chain(head, rows))

    def _uncached_ancestors(self, run_id: str, parent: str | None) -> list[str]:
        """The parent chain of ``run_id`` up to the first cached run (nearest first), each
        parent named by its child's ``run.open`` row (never by an index)."""
        chain: list[str] = []
        seen = {run_id}
        current = parent
        while current is not None and current not in self._done:
            if current in seen:
                raise VerificationError(run_id, 0, "run.open names a parent cycle", code="ancestry")
            if self._failed is not None and current in self._failed:
                break  # known to fail: its child reports it, and its ancestors need no read
            try:
                parent = parent_of(self.source, current)
            except KeyError:  # a missing ancestor: its child reports it, in place
                break
            seen.add(current)
            chain.append(current)
            current = parent
        return chain

    def _verify_cached(
        self, run_id: str, rows: Iterable[Row] | None = None
    ) -> tuple[RunVerification, RequestHasher]:
        cached = self._done.get(run_id)
        if cached is not None:
            self._done.move_to_end(run_id)
            return cached
        if self._failed is not None and run_id in self._failed:
            raise self._failed[run_id]
        if run_id in self._active:
            raise VerificationError(run_id, 0, "run.open names a parent cycle", code="ancestry")
        self._active.add(run_id)
        try:
            verified, hasher, sightings = self._verify(
                run_id, self.source.read(run_id) if rows is None else rows
            )
        except VerificationError as exc:
            if self._failed is not None:
                self._failed[run_id] = exc
            raise
        finally:
            self._active.discard(run_id)
        for digest, seq, key in sightings:  # only runs that verified can prove disclosures
            self.commitments.setdefault(digest, (run_id, seq, key))
        self._done[run_id] = (verified, hasher)
        while len(self._done) > self.cache_size:
            self._done.popitem(last=False)
        return verified, hasher

    def check_disclosures(self, disclosures: Iterable[Disclosure]) -> list[ProvenValue]:
        """Prove disclosed values against the runs verified so far.

        Each disclosure must hash to its commitment, that commitment must sit in a
        verified run, under the disclosure's key. Fails on the first that does not.
        """
        proven = []
        for disclosure in disclosures:
            seen = self.commitments.get(disclosure.commitment)
            if not disclosure.opens():
                raise VerificationError(
                    seen[0] if seen else "-",
                    seen[1] if seen else None,
                    f"disclosure for {disclosure.commitment} does not open it (the salt, key "
                    "or value differs from what was committed)",
                    code="disclosure",
                    where=None if seen else "disclosures",
                )
            if seen is None:
                raise VerificationError(
                    "-",
                    None,
                    f"disclosure for {disclosure.commitment}: no verified run "
                    "holds that commitment",
                    code="disclosure",
                    where="disclosures",
                )
            run_id, seq, key = seen
            if key != disclosure.key:
                raise VerificationError(
                    run_id,
                    seq,
                    f"disclosure for {disclosure.commitment} names key "
                    f"{disclosure.key!r} but the log holds it under {key!r}",
                    code="disclosure",
                )
            proven.append(
                ProvenValue(
                    run_id=run_id,
                    seq=seq,
                    key=key,
                    commitment=disclosure.commitment,
                    value=disclosure.value,
                )
            )
        return proven

    # -- one run ----------------------------------------------------------------------------
    def _verify(
        self, run_id: str, rows: Iterable[Row]
    ) -> tuple[RunVerification, RequestHasher, list[tuple[str, int, str | None]]]:
        check: RunCheck | None = None
        head = GENESIS
        expected_seq = 0
        opened_at = 0
        ancestors: tuple[str, ...] = ()
        for row in rows:
            seq = expected_seq
            where = RunCheck(run_id, {}) if check is None else check
            body, head = self._sound_row(where, seq, row, head)
            if seq == 0:
                if row.type != "run.open":
                    raise where.fail(0, f"first event is {row.type}, not run.open", "structure")
                check, ancestors = self._open(run_id, body)
                check.matches = _policy_matcher(check, body)
                check.policy = body.get("policy") if check.matches is not None else None
                options = body.get("options")
                check.receipted = (
                    isinstance(options, dict) and options.get("record_receipt") is True
                )
                opened_at = row.ts
            else:
                assert check is not None
                self._event(check, seq, row.type, body)
                # a $commit member reaches a canonical body only as the bytes "$commit" or
                # through a \u escape at some level of JSON-in-JSON, which leaves a backslash
                if check.matches is not None or b"$" in row.body or b"\\" in row.body:
                    self._redaction(check, seq, row.type, body)
            expected_seq += 1
        if check is None:
            raise VerificationError(run_id, None, "the run has no events", code="rows")
        if check.in_batch and not (
            check.log_format in WRITE_AHEAD_FORMATS
            and check.phase == self._PHASE["receipt"]
            and check.close is None
        ):
            raise check.fail(
                expected_seq,
                f"the log ends inside commit {check.commit} (its commit marker is missing); "
                "commits are written atomically, so rows were removed from the end",
                "truncated",
            )
        result = RunVerification(
            run_id=run_id,
            conversation_id=check.conversation_id,
            outcome=Outcome.VALID_UNSIGNED if check.close is not None else Outcome.UNSEALED,
            events=expected_seq,
            commits=check.commit,
            receipts=check.receipts,
            head=head,
            close=check.close,
            final_state=check.state,
            receipt_lists={kind: tuple(check.previous[kind]) for kind in check.previous},
            ancestors=ancestors,
            policy=check.policy,
            opened_at=opened_at,
            projection=check.projection.version,
            log_format=check.log_format,
        )
        return result, check.hasher, check.sightings

    @classmethod
    def _sound_row(
        cls, check: RunCheck, seq: int, row: Row, head: bytes
    ) -> tuple[dict[str, Any], bytes]:
        """Steps 1-4 for one row: its envelope, canonical body, event hash and chain link;
        returns the body and the new head."""
        problem = row_problem(row, check.run_id, seq)
        if problem is not None:
            raise check.fail(seq, problem, "rows")
        body = cls._canonical_body(check, seq, row.body)
        recomputed = event_hash(check.run_id, seq, row.type, row.ts, row.body)
        if recomputed != row.event_hash:
            raise check.fail(seq, "event hash does not match the event", "hash")
        head = chain_hash(head, recomputed)
        if head != row.chain_hash:
            raise check.fail(seq, "chain hash does not link to the previous event", "chain")
        return body, head

    @staticmethod
    def _canonical_body(check: RunCheck, seq: int, data: bytes) -> dict[str, Any]:
        try:
            body, proven = parse_canonical(data)  # proven: canon(body) == data, shown in C
        except orjson.JSONDecodeError as exc:
            raise check.fail(seq, f"body is not JSON ({exc})", "canonical") from exc
        except RecursionError as exc:  # parse() recurses over deep arrays holding big numbers
            raise check.fail(seq, "body is not I-JSON (nested too deep)", "canonical") from exc
        if not proven:  # the full check: what it refuses, and why
            try:
                canonical = canon(body)
            except CanonicalFormError as exc:
                raise check.fail(seq, f"body is not I-JSON ({exc})", "canonical") from exc
            if canonical != data:
                raise check.fail(seq, "body is not in canonical form (RFC 8785)", "canonical")
        if not isinstance(body, dict):
            raise check.fail(seq, f"body is {json_kind(body)}, not a JSON object", "structure")
        return body

    def _open(self, run_id: str, body: dict[str, Any]) -> tuple[RunCheck, tuple[str, ...]]:
        opened, parent = self._checked_open(run_id, body)
        if parent is None:
            check = RunCheck(run_id, {}, opened.conversation_id)
            check.hasher = RequestHasher(opened.projection.version)
        else:
            verified, parent_hasher = parent
            check = RunCheck(run_id, dict(verified.final_state), opened.conversation_id)
            check.initial = verified.final_state
            # the child's own projection, starting from the parent's piece digests
            check.hasher = parent_hasher.fork(opened.projection.version)
            check.previous = {kind: list(v) for kind, v in verified.receipt_lists.items()}
        check.log_format, check.projection = opened.log_format, opened.projection
        ancestors = () if parent is None else (*parent[0].ancestors, parent[0].run_id)
        return check, ancestors

    @staticmethod
    def _open_members(where: RunCheck, body: dict[str, Any]) -> _Opened:
        """``run.open``'s own members (structure): the log format, the conversation, the
        parent reference and the projection version."""
        log_format = body.get("format")
        if not isinstance(log_format, str) or log_format not in LOG_FORMATS:
            raise where.fail(
                0,
                f"unknown log format {log_format!r} (this version verifies "
                f"{', '.join(LOG_FORMATS)})",
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
        return _Opened(log_format, conversation, reference, spec)

    def check_open(
        self, run_id: str, body: dict[str, Any]
    ) -> tuple[str, tuple[RunVerification, RequestHasher] | None]:
        """Check a ``run.open`` body and the parent it continues (verified, linked, finished).

        Returns the conversation id and, for a continued run, the verified parent with a
        hasher of its own to continue from. The read side uses this too, so it never folds a
        run onto a parent other than the one it continued.
        """
        opened, parent = self._checked_open(run_id, body)
        return opened.conversation_id, parent

    def _checked_open(
        self, run_id: str, body: dict[str, Any]
    ) -> tuple[_Opened, tuple[RunVerification, RequestHasher] | None]:
        where = RunCheck(run_id, {})
        opened = self._open_members(where, body)
        conversation, reference = opened.conversation_id, opened.parent
        if reference is None:
            return opened, None
        parent_id, parent_events, parent_head = reference
        try:
            verified, parent_hasher = self._verified(parent_id)
        except VerificationError as exc:
            # name the first failure up the ancestry, not every link (a long conversation
            # with a broken root would nest its whole length into each message)
            cause = exc.__cause__
            through = exc.code == "ancestry" and isinstance(cause, VerificationError)
            root = cause if through and isinstance(cause, VerificationError) else exc
            via = " (through its ancestry)" if through else ""
            raise where.fail(
                0, f"parent run {parent_id} fails verification{via}: {root}", "ancestry"
            ) from root
        except KeyError as exc:  # RunNotFoundError: the source does not hold the parent
            raise where.fail(
                0, f"parent run {parent_id} is not in this log: {exc}", "ancestry"
            ) from exc
        if verified.conversation_id != conversation:
            raise where.fail(
                0,
                f"conversation_id {conversation} differs from parent's {verified.conversation_id}",
                "ancestry",
            )
        if verified.events != parent_events or verified.head != parent_head:
            raise where.fail(
                0,
                f"parent run {parent_id} head differs from the one this run continued",
                "ancestry",
            )
        if verified.close is None or verified.close.get("outcome") not in _CONTINUABLE:
            raise where.fail(
                0, f"parent run {parent_id} did not finish; it cannot be continued", "ancestry"
            )
        return opened, (verified, parent_hasher.fork())

    _PHASE: ClassVar[dict[str, int]] = {"receipt": 1, "event": 2, "write": 3}

    def _event(self, check: RunCheck, seq: int, type_: str, body: dict[str, Any]) -> None:
        if check.close is not None:
            raise check.fail(seq, f"{type_} after run.close", "structure")
        if type_ == "run.open":
            raise check.fail(seq, "a second run.open", "structure")
        phase = self._PHASE.get(type_)
        if phase is not None:  # inside a commit batch: receipts, then events, then writes
            if phase < check.phase:
                raise check.fail(
                    seq,
                    f"{type_} after a later part of commit {check.commit}'s "
                    "batch (the order is receipts, events, writes, marker)",
                    "structure",
                )
            check.phase = phase
            check.in_batch = True
        try:
            if type_ == "write":
                check_write(check, seq, body)
            elif type_ == "receipt":
                check_receipt(check, seq, body)
            elif type_ == "commit":
                check_commit(check, seq, body)
            elif type_ == "run.close":
                check_close(check, seq, body)
            else:  # "event": a typed event recorded as a finding; chained, no fold
                field_of(body, "name", str)
                field_of(body, "payload", dict)
        except ValueError as exc:
            raise check.fail(seq, f"{type_} body is malformed: {exc}", "structure") from exc

    def _redaction(self, check: RunCheck, seq: int, type_: str, body: dict[str, Any]) -> None:
        """Commitments well formed and never repeated; no plaintext under a policy key."""
        where: tuple[str | int, ...] = ()
        rerecorded: Callable[[str, tuple[str | int, ...]], bool] = lambda _d, _p: False  # noqa: E731
        if type_ == "write":
            if "value" not in body:
                return
            path, value = body["path"], body["value"]
            if body["verb"] == "set":
                rerecorded = _held_by(check.state.get(path), (path,))
                entries = [(None, {path: value})]
            elif body["verb"] in ("append", "merge"):  # the operand sits inside the state key
                entries, where = [(path, value)], (path,)
            else:  # an unknown verb is not scanned (section 12.5): it fails the fold
                return
        elif type_ == "event":
            entries = [(None, body["payload"])]
        elif type_ == "commit" and "error" in body:
            entries = [(None, {"error": body["error"]})]
        elif type_ == "run.close":
            recorded = {k: v for k, v in body.items() if k not in _CLOSE_COUNTS}
            entries = [(None, recorded)]
        else:
            return
        for key, value in entries:
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
                        f"commitment {digest} appears twice in the run "
                        "(a reused salt links equal values)",
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


def parent_of(source: RowSource, run_id: str) -> str | None:
    """The run a run continues, named by its ``run.open`` row (never by a run index, which
    is not evidence). None for a root or a first row that names no parent: verification
    reports a damaged first row in place. An unknown run: the source's RunNotFoundError."""
    return parent_named(next(iter(source.read(run_id)), None))


def _policy_matcher(check: RunCheck, body: dict[str, Any]) -> Callable[[str], bool] | None:
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


_SHARED: weakref.WeakKeyDictionary[Any, Verifier] = weakref.WeakKeyDictionary()


def shared_verifier(source: RowSource) -> Verifier:
    """One verifier per source object for the runtime and the read side: continuing, reading
    or replaying the runs of a long conversation verifies each ancestor once. (Verified runs
    are closed or a crash's prefix; neither changes, so the cache stays true.)"""
    try:
        found = _SHARED.get(source)
    except TypeError:  # a source that cannot be weakly referenced: no sharing
        return Verifier(source)
    if found is None:
        found = _SHARED[source] = Verifier(source)
    return found


def verify_run(source: RowSource, run_id: str) -> RunVerification:
    """Verify one run from ``source`` (a store or anything with ``read``)."""
    return Verifier(source).verify(run_id)
