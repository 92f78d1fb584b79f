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
6. ancestry: a continued run's parent verifies and its head is the one recorded;
7. the seal, and the source's seal log: a run it lists has a seal, a sealed run is listed.

Every value read from the log has its type checked before it is indexed, iterated or
called: a crafted file gets INVALID with a code and a seq, never a traceback and never a
pass. :meth:`Verifier.verify_all` verifies a whole file: the runs found from the events
(never from the run index, which is not evidence), then the index rows that disagree.

A source that offers ``chain_rows`` (the SQLite store) hands over each run's rows as plain
tuples: the verifier then runs steps 1-3 in one loop with no row object, computes each
hash once (schema 2 stores neither event hashes nor most links, so nothing computed by the
reader is computed again) and proves a body canonical once per verifier however often the
runs repeat it. The checks, their order and every finding are the general loop's.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

import orjson

from agentfootprint.errors import (
    CanonicalFormError,
    RunNotFoundError,
    UsageError,
    VerificationError,
)
from agentfootprint.logformat.calls import (
    LOG_FORMAT_V1,
    LOG_FORMAT_V2,
    LOG_FORMAT_V3,
    LOG_FORMATS,
    WRITE_AHEAD_FORMATS,
)
from agentfootprint.logformat.canonical import MAX_SAFE_INT, canon, parse_canonical
from agentfootprint.logformat.chain import (
    DERIVED,
    EVENT_TYPES,
    GENESIS,
    RawRow,
    Row,
    RowSource,
    RunSource,
    as_read,
    chain_hash,
    event_hash,
    index_findings,
    is_text,
    parent_named,
    row_problem,
    shown,
    stored_kind,
)
from agentfootprint.logformat.commitments import Disclosure
from agentfootprint.logformat.fold import ReceiptLists, continued_lists
from agentfootprint.logformat.hashing import domain_prefix
from agentfootprint.logformat.limits import MAX_BODY_BYTES
from agentfootprint.logformat.request import (
    RequestHasher,
    json_kind,
)
from agentfootprint.logformat.spares import Spares
from agentfootprint.seal.signer import PublicKey
from agentfootprint.verify.body_checks import (
    Opened,
    RunCheck,
    check_close,
    check_commit,
    check_receipt,
    check_redaction,
    check_write,
    field_of,
    open_members,
    policy_matcher,
)
from agentfootprint.verify.bundle_proofs import InclusionJudge
from agentfootprint.verify.disclosure_check import ProvenValue, prove_disclosures
from agentfootprint.verify.results import Outcome, RunVerification
from agentfootprint.verify.seal_check import (
    SealWitness,
    judge,
    pinned_keys,
    sealing,
    witness_open,
    witness_row,
)
from agentfootprint.verify.seal_log_check import SealedRun, SealListing, log_findings

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
_EVENT_MISMATCH = "event hash does not match the event"
_CHAIN_MISMATCH = "chain hash does not link to the previous event"
#: what the chain-row loop hashes around a row's own values (docs/log-format.md 3 and 5.1)
_EVENT_HEAD = domain_prefix("event") + b'{"body":'
_CHAIN_PREFIX = domain_prefix("chain")
#: the bodies a verifier remembers as proven canonical: how long each, and how many
_PROVEN_BODY_BYTES = 1024
_PROVEN_BODIES = 4096


#: one run verified: its verification, hasher, commitment sightings and last digest lists
_Verified = tuple[
    RunVerification, RequestHasher, list[tuple[str, int, str | None]], dict[str, list[str]]
]


class Verifier:
    """Verifies runs from one source, remembering the runs verified most recently.

    A continued run needs its parent's final state (and the parent's piece digests,
    so no message is hashed twice). The last ``cache_size`` verified runs keep them:
    verifying a conversation's runs in order checks and hashes each run once, and
    memory stays bounded however long the conversation (a run evicted from the cache
    is verified again if a later run needs it). Only closed runs are remembered: a run
    without its close may still be growing in a database other writers append to, so it
    is read again each time it is asked for.
    """

    def __init__(
        self,
        source: RowSource,
        *,
        cache_size: int = 64,
        trusted_keys: Iterable[Any] | None = (),
    ) -> None:
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
        #: the list versions the folds made (every cached run holds two: its final state's
        #: and its hasher's), reused once nobody holds them instead of copied per append
        self._spares = Spares(2 * cache_size + 16)
        #: the public keys whose seals make a run VALID, pinned by the caller (never read
        #: from the evidence)
        self.trusted_keys: tuple[PublicKey, ...] = pinned_keys(trusted_keys)
        note = getattr(source, "checkpoint_note", None)
        #: a version 2 bundle's checkpoint, against which each sealed run's proof is checked
        self._inclusions = InclusionJudge(note, self.trusted_keys) if type(note) is bytes else None
        self._done: OrderedDict[str, tuple[RunVerification, RequestHasher]] = OrderedDict()
        #: each cached run's last receipt digest lists as verified (its receipt_lists are
        #: tuples of them): a continued run goes on from the lists themselves, which are
        #: never mutated, instead of copies (a copy is O(history) per run)
        self._lists: dict[str, dict[str, list[str]]] = {}
        self._active: set[str] = set()
        #: failures seen during one verify or verify_all call (a failed parent is verified
        #: once, not once per child); None between calls
        self._failed: dict[str, VerificationError] | None = None
        #: every commitment seen in a verified run: digest -> (run, seq, the key it sits under)
        self.commitments: dict[str, tuple[str, int, str | None]] = {}
        #: small bodies proven canonical JSON objects (a function of the bytes alone): the
        #: runs of a conversation repeat many (commit markers, settings), and a body seen
        #: again is parsed without proving it again (bounded: cleared when full). The value:
        #: whether it holds "$" or a backslash, or a commit marker's parsed body (no tuple:
        #: a container per entry would cost the garbage collector)
        self._proven: dict[bytes, bool | dict[str, Any]] = {}
        #: the source's seal log as one call reads it (each run is checked against it)
        self._listing = SealListing(source)

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

        A source that offers ``snapshot()`` (a database other writers may be appending to)
        is read inside it: the runs, the index and the seal log are judged as of one
        moment, never a run list of one moment against an index of a later one.
        """
        snapshot = getattr(self.source, "snapshot", None)
        with snapshot() if callable(snapshot) else contextlib.nullcontext():
            yield from self._verify_all()

    def _verify_all(self) -> Iterator[tuple[str, RunVerification | VerificationError]]:
        list_runs = getattr(self.source, "run_ids", None)
        if not callable(list_runs):
            raise UsageError(
                f"{type(self.source).__name__} cannot list its runs (no run_ids()); "
                "verify runs one by one with verify(run_id)"
            )
        facts: dict[Any, tuple[Any, Any, Any] | None] = {}
        sealed: dict[Any, SealedRun | None] = {}
        self._failed = {}  # the whole file's failures: a failed parent is verified once
        try:
            self._listing.start()  # before the runs are listed: a run it names has its rows
            run_ids = list(list_runs())
            for run_id in run_ids:
                try:
                    verified = self._verified(run_id)[0]  # ids as stored: not text is rows
                except VerificationError as exc:
                    facts[run_id] = sealed[run_id] = None  # INVALID already: not compared
                    yield shown(run_id), exc
                else:
                    parent = verified.ancestors[-1] if verified.ancestors else None
                    facts[run_id] = (verified.conversation_id, parent, verified.opened_at)
                    sealed[run_id] = SealedRun(verified.events, verified.head, verified.seal_digest)
                    yield run_id, verified
        finally:
            self._failed = None
            stored = self._listing.log
            self._listing.end()
        entries = getattr(self.source, "index_entries", None)
        if callable(entries):
            for finding in index_findings(run_ids, facts, list(entries())):
                yield finding.run_id, finding
        if stored is not None:  # each run was checked against it: now the log's own rows
            for finding in log_findings(stored, sealed):
                yield finding.run_id, finding
        judge = self._inclusions
        if judge is not None and judge.error is not None and not judge.used:
            yield "", judge.error  # a checkpoint no run's proof relied on, that cannot be used

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
            self._listing.end()

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
        self._listing.start()  # once per call, before any row is read
        raw = self._chain_rows(run_id)  # an unknown run: RunNotFoundError
        rows: Iterator[Row] = iter(()) if raw is not None else iter(self.source.read(run_id))
        first: Row | None = next(rows, None)
        if raw:
            first = RawRow(*raw[0])  # parent_named reads its type and body, never derived
        parent = parent_named(first)
        if first is not None and parent is not None and parent not in self._done:
            # the parent comes from this run's unverified run.open row: its own checks come
            # first, as when the parent is cached (a damaged row is itself the failure)
            where = RunCheck(run_id, {})
            whole = as_read(raw[0], GENESIS) if raw else first
            open_members(where, self._sound_row(where, 0, whole, GENESIS)[0])
        # Verify the uncached ancestors oldest first, so each run finds its parent verified
        # (or its failure remembered): no recursion however deep the conversation. A failure
        # is reported by the child's own run.open check, in place.
        for ancestor in reversed(self._uncached_ancestors(run_id, parent)):
            with contextlib.suppress(VerificationError):  # remembered in self._failed
                self._verify_cached(ancestor)
        if raw is not None:
            return self._verify_cached(run_id, raw=raw)
        head = [] if first is None else [first]
        return self._verify_cached(run_id, itertools.chain(head, rows))

    def _chain_rows(self, run_id: str) -> Sequence[tuple[Any, ...]] | None:
        """The run's rows as tuples when the source offers them (``chain_rows``, the SQLite
        store), else None: the rows are read with ``read``."""
        fetch = getattr(self.source, "chain_rows", None)
        if not callable(fetch) or not is_text(run_id):
            return None
        found: Sequence[tuple[Any, ...]] | None = fetch(run_id)
        return found

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
        self,
        run_id: str,
        rows: Iterable[Row] | None = None,
        *,
        raw: Sequence[tuple[Any, ...]] | None = None,
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
            if rows is None and raw is None:
                raw = self._chain_rows(run_id)
            if raw is not None:
                verified, hasher, sightings, lists = self._verify_chain_rows(run_id, raw)
            else:
                verified, hasher, sightings, lists = self._verify(
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
        if verified.close is None:
            return verified, hasher  # still open (or cut): it may grow, so it is read again
        self._done[run_id] = (verified, hasher)
        self._lists[run_id] = lists
        while len(self._done) > self.cache_size:
            self._lists.pop(self._done.popitem(last=False)[0], None)
        return verified, hasher

    def check_disclosures(self, disclosures: Iterable[Disclosure]) -> list[ProvenValue]:
        """Prove disclosed values against the runs verified so far.

        Each disclosure must hash to its commitment, that commitment must sit in a
        verified run, under the disclosure's key. Fails on the first that does not.
        """
        return prove_disclosures(self.commitments, disclosures)

    # -- one run ----------------------------------------------------------------------------
    def _verify(self, run_id: str, rows: Iterable[Row]) -> _Verified:
        check: RunCheck | None = None
        head = GENESIS
        expected_seq = 0
        opened_at = 0
        ancestors: tuple[str, ...] = ()
        witness = SealWitness()
        for row in rows:
            seq = expected_seq
            where = RunCheck(run_id, {}) if check is None else check
            body, head = self._sound_row(where, seq, row, head)
            if sealing(where, witness, seq, row.type, body):
                expected_seq += 1
                continue
            if seq == 0:
                check, ancestors = self._opened(where, row.type, body)
                opened_at = row.ts
                witness_open(check, witness, body)
            else:
                assert check is not None
                self._event(check, seq, row.type, body)
                witness_row(witness, seq, row.type, body, head)
                # a $commit member reaches a canonical body only as the bytes "$commit" or
                # through a \u escape at some level of JSON-in-JSON, which leaves a backslash
                if check.matches is not None or b"$" in row.body or b"\\" in row.body:
                    check_redaction(check, seq, row.type, body)
            expected_seq += 1
        return self._result(run_id, check, head, expected_seq, opened_at, ancestors, witness)

    def _verify_chain_rows(self, run_id: str, raw: Sequence[tuple[Any, ...]]) -> _Verified:
        """:meth:`_verify` over ``chain_rows`` tuples: the same checks in the same order with
        the same findings, steps 1-3 in this loop (no row object, no call per column, each
        hash computed once: a :data:`DERIVED` value is computed here and compared with
        nothing). A row whose envelope is not the usual one goes through :meth:`_sound_row`
        as ``read`` would give it (:func:`as_read`), so its finding is :func:`row_problem`'s."""
        check: RunCheck | None = None
        head = GENESIS
        expected_seq = 0
        opened_at = 0
        ancestors: tuple[str, ...] = ()
        sha256 = hashlib.sha256
        kinds = _ROW_KINDS
        event_head = _EVENT_HEAD
        chain_prefix = _CHAIN_PREFIX
        run_part = b',"run":' + canon(run_id) + b',"seq":'  # run_id is text (_chain_rows)
        known = self._proven
        loads = orjson.loads
        witness = SealWitness()
        for raw_row in raw:
            seq = expected_seq
            where = RunCheck(run_id, {}) if check is None else check
            row_run, row_seq, type_, ts, data, stored_event, stored_chain = raw_row
            kind = kinds.get(type_) if type(type_) is str else None
            if (
                kind is None
                or type(row_seq) is not int
                or row_seq != seq
                or type(row_run) is not str
                or row_run != run_id
                or type(ts) is not int
                or not -MAX_SAFE_INT <= ts <= MAX_SAFE_INT
                or type(data) is not bytes
                or len(data) > MAX_BODY_BYTES
                or (
                    stored_event is not DERIVED
                    and (type(stored_event) is not bytes or len(stored_event) != 32)
                )
                or (
                    stored_chain is not DERIVED
                    and (type(stored_chain) is not bytes or len(stored_chain) != 32)
                )
            ):  # not the usual envelope: the row as read gives it, checked the general way
                row = as_read(raw_row, head)
                body, head = self._sound_row(where, seq, row, head)
                type_, ts, data = row.type, row.ts, row.body
                scan = data.find(b"$") >= 0 or data.find(b"\\") >= 0
                _, checker, phase = _ROW_KINDS[type_]  # a known type: _sound_row passed
            else:
                tail, checker, phase = kind
                # a $commit member reaches a canonical body only as the bytes "$commit" or
                # through a \u escape, which leaves a backslash (find() is several times
                # faster than ``in`` on bytes, which first tries the needle as an integer)
                seen = known.get(data)
                if seen is not None:  # these bytes were proven canonical: parse() is loads()
                    if type(seen) is dict:  # a commit marker's body, parsed
                        scan, body = False, seen if type_ == "commit" else loads(data)
                    else:
                        scan, body = seen, loads(data)
                else:
                    try:
                        body, proven = parse_canonical(data)
                    except (orjson.JSONDecodeError, RecursionError):
                        proven = False
                    if not proven or type(body) is not dict:  # the full check, its finding
                        body = self._canonical_body(where, seq, data)
                    scan = data.find(b"$") >= 0 or data.find(b"\\") >= 0
                    if proven and len(data) <= _PROVEN_BODY_BYTES:
                        if len(known) >= _PROVEN_BODIES:
                            known.clear()
                        # a commit marker's body is only read (check_commit), never kept
                        # or changed: one parse serves every repeat of it
                        known[data] = body if type_ == "commit" and not scan else scan
                envelope = b'%s%s%s%d,"ts":%d%s' % (event_head, data, run_part, seq, ts, tail)
                event = sha256(envelope).digest()
                if stored_event is not DERIVED and event != stored_event:
                    raise where.fail(seq, _EVENT_MISMATCH, "hash")
                head = sha256(chain_prefix + head + event).digest()
                if stored_chain is not DERIVED and head != stored_chain:
                    raise where.fail(seq, _CHAIN_MISMATCH, "chain")
            if sealing(where, witness, seq, type_, body):
                expected_seq += 1
                continue
            if seq == 0:
                check, ancestors = self._opened(where, type_, body)
                opened_at = ts
                witness_open(check, witness, body)
            else:
                assert check is not None
                late = phase is not None and phase < check.phase
                if checker is None or check.close is not None or late:
                    # an event row, or a finding of _event's own: _event says which
                    self._event(check, seq, type_, body)
                else:  # _event's steps for the usual row, in line
                    if phase is not None:
                        check.phase = phase
                        check.in_batch = True
                    try:
                        checker(check, seq, body)
                    except ValueError as exc:
                        raise _malformed(check, seq, type_, exc) from exc
                witness_row(witness, seq, type_, body, head)
                if check.matches is not None or scan:
                    check_redaction(check, seq, type_, body)
            expected_seq += 1
        return self._result(run_id, check, head, expected_seq, opened_at, ancestors, witness)

    def _opened(
        self, where: RunCheck, type_: str, body: dict[str, Any]
    ) -> tuple[RunCheck, tuple[str, ...]]:
        """Step 4 for seq 0: a ``run.open``, its parent, policy and options."""
        if type_ != "run.open":
            raise where.fail(0, f"first event is {type_}, not run.open", "structure")
        check, ancestors = self._open(where.run_id, body)
        check.matches = policy_matcher(check, body)
        check.policy = body.get("policy") if check.matches is not None else None
        options = body.get("options")
        check.receipted = isinstance(options, dict) and options.get("record_receipt") is True
        return check, ancestors

    def _result(
        self,
        run_id: str,
        check: RunCheck | None,
        head: bytes,
        events: int,
        opened_at: int,
        ancestors: tuple[str, ...],
        witness: SealWitness,
    ) -> _Verified:
        """The end of a run's rows: no run, a truncated batch, or its verification (its
        seal judged and the seal log's word on it, section 9.2 steps 4 and 5)."""
        if check is None:
            raise VerificationError(run_id, None, "the run has no events", code="rows")
        if check.in_batch and not (
            check.log_format in WRITE_AHEAD_FORMATS
            and check.phase == self._PHASE["receipt"]
            and check.close is None
        ):
            raise check.fail(
                events,
                f"the log ends inside commit {check.commit} (its commit marker is missing); "
                "commits are written atomically, so rows were removed from the end",
                "truncated",
            )
        outcome, verdict = Outcome.UNSEALED, None
        if check.close is not None:
            verdict = judge(
                run_id,
                witness,
                self.trusted_keys,
                policy_digest=witness.policy_digest,
                receipts=check.receipts,
                close=check.close,
                final_state=check.state,
            )
            outcome = Outcome.VALID if verdict.signed_by else Outcome.VALID_UNSIGNED
        listed = self._listing.finding(run_id, witness.envelope is not None)  # step 5
        if listed is not None:
            raise listed
        seal = hashlib.sha256(witness.envelope).digest() if witness.envelope else None
        inclusion = None
        if self._inclusions is not None:
            inclusion = self._inclusions.judge(
                run_id,
                self.source.inclusion_of(run_id),  # type: ignore[attr-defined]
                events=events,
                head=head,
                seal=seal,
            )
        result = RunVerification(
            run_id=run_id,
            conversation_id=check.conversation_id,
            outcome=outcome,
            events=events,
            commits=check.commit,
            receipts=check.receipts,
            head=head,
            close=check.close,
            final_state=check.state,
            receipt_lists=ReceiptLists(check.previous),  # tuples made when read
            ancestors=ancestors,
            policy=check.policy,
            opened_at=opened_at,
            projection=check.projection.version,
            log_format=check.log_format,
            signed_by=verdict.signed_by if verdict else (),
            seal_key_id=witness.key_id,
            seal_note=verdict.note if verdict else None,
            seal_digest=seal,
            inclusion=inclusion,
        )
        return result, check.hasher, check.sightings, check.previous

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
            raise check.fail(seq, _EVENT_MISMATCH, "hash")
        head = chain_hash(head, recomputed)
        if head != row.chain_hash:
            raise check.fail(seq, _CHAIN_MISMATCH, "chain")
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
        opened, parent = self._checked_open(run_id, body, fork=False)  # forked once, below
        if parent is None:
            check = RunCheck(run_id, {}, opened.conversation_id)
            check.hasher = RequestHasher(opened.projection.version)
        else:
            verified, parent_hasher = parent
            check = RunCheck(run_id, dict(verified.final_state), opened.conversation_id)
            check.initial = verified.final_state
            # the child's own projection, starting from the parent's piece digests
            check.hasher = parent_hasher.fork(opened.projection.version)
            lists = self._lists.get(verified.run_id)
            check.previous = (
                dict(lists)
                if lists is not None and self._done.get(verified.run_id, (None,))[0] is verified
                else continued_lists(verified.receipt_lists)
            )
        check.spares = self._spares
        check.log_format, check.projection = opened.log_format, opened.projection
        ancestors = () if parent is None else (*parent[0].ancestors, parent[0].run_id)
        return check, ancestors

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
        self, run_id: str, body: dict[str, Any], *, fork: bool = True
    ) -> tuple[Opened, tuple[RunVerification, RequestHasher] | None]:
        """:meth:`check_open`'s checks; the parent's hasher forked (``fork=False``: the cached
        one itself, which the caller forks before hashing anything with it)."""
        where = RunCheck(run_id, {})
        opened = open_members(where, body)
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
        return opened, (verified, parent_hasher.fork() if fork else parent_hasher)

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
            raise _malformed(check, seq, type_, exc) from exc


#: per event type, for the chain-row loop: the envelope's tail from ``,"type":`` on (section
#: 5.1), the check of its body (none for ``run.open`` and ``event``: _event) and its place in a
#: commit batch (Verifier._PHASE)
_CHECKERS = {
    "write": check_write,
    "receipt": check_receipt,
    "commit": check_commit,
    "run.close": check_close,
}
_ROW_KINDS = {
    name: (b',"type":' + canon(name) + b"}", _CHECKERS.get(name), Verifier._PHASE.get(name))
    for name in EVENT_TYPES
}


def _malformed(check: RunCheck, seq: int, type_: str, exc: ValueError) -> VerificationError:
    return check.fail(seq, f"{type_} body is malformed: {exc}", "structure")


def parent_of(source: RowSource, run_id: str) -> str | None:
    """The run a run continues, named by its ``run.open`` row (never by a run index, which
    is not evidence). None for a root or a first row that names no parent: verification
    reports a damaged first row in place. An unknown run: the source's RunNotFoundError."""
    return parent_named(next(iter(source.read(run_id)), None))


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
