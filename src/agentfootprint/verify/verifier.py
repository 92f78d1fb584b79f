"""The verifier: rebuild every served request from the log alone and check it.

It fails closed with one error type, :class:`VerificationError`, naming the run,
the seq and the reason of the first failure. It imports nothing of the runtime:
an auditor holding only a log (or, later, an export) runs exactly this code,
which implements ``docs/log-format.md``.

Checks, per run, in seq order (docs/log-format.md section 9.2, "Algorithm for run R", whose
step numbers the comments of :meth:`Verifier._verify` cite):

* step 1: the run's rows (:meth:`Verifier._rows`);
* step 2, per row: 2.1-2.4 the envelope, the canonical body, the event hash and the chain
  link (:func:`~agentfootprint.verify.row_checks.sound_row`); 2.5 ``run.open`` (a known log
  format and projection, the parent: section 9.3, the policy); 2.6 a ``run.seal``, or the
  body by type (:mod:`~agentfootprint.verify.body_checks`: commits numbered from 0 with their
  write counts, the batch order, each receipt's request rebuilt from the folded state and
  hashed piece by piece and whole, the close's counts), then the redaction checks
  (section 12.5);
* step 3: a log cut inside a commit batch; step 4: the outcome and the seal; step 5: the
  source's seal log (a run it lists has a seal, a sealed run is listed).

Every value read from the log has its type checked before it is indexed, iterated or
called: a crafted file gets INVALID with a code and a seq, never a traceback and never a
pass. :meth:`Verifier.verify_all` verifies a whole file: the runs found from the events
(never from the run index, which is not evidence), then the index rows that disagree.

There is one loop over a run's rows (:meth:`Verifier._verify`), whatever the source: a
store that offers ``chain_rows`` hands over each run's rows as plain tuples, a ``read`` row
is taken apart into the same tuple, and a hash the file does not keep (schema 2, ``DERIVED``)
is computed once and compared with nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, cast

from agentfootprint.errors import (
    RunNotFoundError,
    UsageError,
    VerificationError,
)
from agentfootprint.logformat.chain import (
    GENESIS,
    RawRow,
    Row,
    RowSource,
    RunSource,
    is_text,
    parent_named,
    row_values,
    shown,
    stored_kind,
)
from agentfootprint.logformat.commitments import Disclosure
from agentfootprint.logformat.fold import ReceiptLists, continued_lists
from agentfootprint.logformat.index_check import IndexCheck
from agentfootprint.logformat.log_format_spec import PAUSED
from agentfootprint.logformat.request import RequestHasher
from agentfootprint.logformat.rows import StoredEvent
from agentfootprint.logformat.shared_lists import FoldedState, folded
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
from agentfootprint.verify.echo_check import EchoRun, check_echoes
from agentfootprint.verify.pause_checks import PauseAnswers, parent_answered
from agentfootprint.verify.results import Outcome, RunVerification
from agentfootprint.verify.row_checks import CanonicalBodies, canonical_body, sound_row
from agentfootprint.verify.seal_check import (
    SealWitness,
    judge,
    pinned_keys,
    sealing,
    witness_open,
    witness_row,
)
from agentfootprint.verify.seal_log_check import SealListing, log_findings

__all__ = [
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

_CONTINUABLE = ("answered", "stopped_early")
#: one stored row: the 7 values of RawRow (run id, seq, type, ts, body, event and chain hash)
_RowValues = tuple[Any, ...]


#: one run verified: its verification, hasher, commitment sightings and last digest lists
_Verified = tuple[
    RunVerification, RequestHasher, list[tuple[str, int, str | None]], dict[str, Sequence[str]]
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
        self._lists: dict[str, dict[str, Sequence[str]]] = {}
        self._active: set[str] = set()
        #: failures seen during one verify or verify_all call (a failed parent is verified
        #: once, not once per child); None between calls
        self._failed: dict[str, VerificationError] | None = None
        #: whole-file verification: the runs continuing each paused run (section 9.5 step 5)
        self._pause_answers: PauseAnswers | None = None
        #: every commitment seen in a verified run: digest -> (run, seq, the key it sits under)
        self.commitments: dict[str, tuple[str, int, str | None]] = {}
        #: step 2.2 for every run, remembering the small bodies proven canonical by their
        #: bytes (the runs of a conversation repeat many)
        self._proven = CanonicalBodies()
        #: the source's seal log as one call reads it (each run is checked against it)
        self._listing = SealListing(source)
        #: set by a caller that writes the runs it verifies (export): the list, or None, that
        #: each row's event and chain hash of a run verified (its id given) are appended to
        self.hashes_for: Callable[[str], list[tuple[bytes, bytes]] | None] | None = None

    def verify(self, run_id: str) -> RunVerification:
        """Verify one run (and, as needed, its ancestors); raise on the first failure."""
        if type(run_id) is not str or not run_id:
            raise UsageError(f"run_id must be a non-empty string, not {run_id!r}", option="run_id")
        try:
            return self._verified(run_id)[0]
        except RunNotFoundError as exc:  # the run asked for (a missing ancestor is ancestry)
            raise RunNotFoundError(f"run_id: {exc}") from exc

    def verify_all(
        self, *, on_progress: Callable[[int, int], None] | None = None
    ) -> Iterator[tuple[str, RunVerification | VerificationError]]:
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

        ``on_progress(done, total)`` is called as each run's verdict is reached (``total``
        the runs found), for a caller that shows how far it got.
        """
        snapshot = getattr(self.source, "snapshot", None)
        with snapshot() if callable(snapshot) else contextlib.nullcontext():
            yield from self._verify_all(on_progress)

    def _verify_all(
        self, on_progress: Callable[[int, int], None] | None
    ) -> Iterator[tuple[str, RunVerification | VerificationError]]:
        list_runs = getattr(self.source, "run_ids", None)
        if not callable(list_runs):
            raise UsageError(
                f"{type(self.source).__name__} cannot list its runs (no run_ids()); "
                "verify runs one by one with verify(run_id)"
            )
        self._failed = {}  # the whole file's failures: a failed parent is verified once
        self._pause_answers = answers = PauseAnswers()
        try:
            self._listing.start()  # before the runs are listed: a run it names has its rows
            run_ids = list(list_runs())
            index = IndexCheck(run_ids, self._index_entries())
            for done, run_id in enumerate(run_ids, 1):
                verdict: tuple[str, RunVerification | VerificationError]
                try:
                    verified = self._verified(run_id)[0]  # ids as stored: not text is rows
                except VerificationError as exc:
                    index.verdict(run_id, None)  # INVALID already: its entry is not compared
                    verdict = shown(run_id), exc
                else:
                    parent = verified.ancestors[-1] if verified.ancestors else None
                    index.verdict(run_id, (verified.conversation_id, parent, verified.opened_at))
                    if verified.close is None:  # UNSEALED: an answer that never closed
                        answers.unclosed(run_id)
                    verdict = run_id, verified
                if on_progress is not None:
                    on_progress(done, len(run_ids))
                yield verdict
        finally:
            self._failed = None
            self._pause_answers = None
            stored = self._listing.log
            self._listing.end()
        yield from ((finding.run_id, finding) for finding in index.findings())
        yield from ((finding.run_id, finding) for finding in answers.findings())
        if stored is not None:  # each run was checked against it: now the log's own rows
            for finding in log_findings(stored, index.runs):
                yield finding.run_id, finding
        judge = self._inclusions
        if judge is not None and judge.error is not None and not judge.used:
            yield "", judge.error  # a checkpoint no run's proof relied on, that cannot be used

    def _index_entries(self) -> Iterable[Any] | None:
        """The source's run index in its order, read lazily where the source can (a store's
        ``iter_index_entries``), else as ``index_entries()`` gives it; None with no index."""
        lazy = getattr(self.source, "iter_index_entries", None)
        if callable(lazy):
            return cast("Iterable[Any]", lazy())
        entries = getattr(self.source, "index_entries", None)
        return cast("Iterable[Any]", entries()) if callable(entries) else None

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Many :meth:`verify` calls as one (export verifies each run as it writes it): the
        source's seal log read and indexed once for all of them, a failed run verified once."""
        if self._failed is not None:  # within one already
            yield
            return
        self._failed = {}
        try:
            yield
        finally:
            self._failed = None
            self._listing.end()

    def hasher_after(self, run_id: str) -> RequestHasher:
        """A hasher primed with the pieces of a verified run's last request (for its children),
        of that run's projection (``fork(version)`` it for a child served under another)."""
        return self._verified(run_id)[1].fork()

    def _verified(self, run_id: str) -> tuple[RunVerification, RequestHasher]:
        with self.session():  # one call's failures: a failed ancestor is verified once
            return self._verified_in_scope(run_id)

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
        rows = self._rows(run_id)  # an unknown run: RunNotFoundError
        first = next(rows, None)
        parent = parent_named(None if first is None else RawRow(*first))
        if first is not None and parent is not None and parent not in self._done:
            # the parent comes from this run's unverified run.open row: its own checks come
            # first, as when the parent is cached (a damaged row is itself the failure)
            where = RunCheck(run_id, {})
            open_members(where, sound_row(where, 0, first, GENESIS, self._proven)[0])
        # Verify the uncached ancestors oldest first, so each run finds its parent verified
        # (or its failure remembered): no recursion however deep the conversation. A failure
        # is reported by the child's own run.open check, in place.
        for ancestor in reversed(self._uncached_ancestors(run_id, parent)):
            with contextlib.suppress(VerificationError):  # remembered in self._failed
                self._verify_cached(ancestor)
        return self._verify_cached(run_id, itertools.chain(() if first is None else (first,), rows))

    def _rows(self, run_id: str) -> Iterator[_RowValues]:
        """Step 1: the run's rows in seq order, each as its 7 values: ``chain_rows`` when the
        source offers it (the stores: tuples, no row object), else ``read``'s rows taken
        apart. An unknown run raises the source's RunNotFoundError."""
        fetch = getattr(self.source, "chain_rows", None)
        if callable(fetch) and is_text(run_id):
            found = fetch(run_id)
            if found is not None:
                return iter(found)
        return map(row_values, self.source.read(run_id))

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
        self, run_id: str, rows: Iterator[_RowValues] | None = None
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
            verified, hasher, sightings, lists = self._verify(
                run_id, self._rows(run_id) if rows is None else rows
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
        verified run, under the disclosure's key. Fails on the first that does not. Then,
        under a version 3 policy, no proven value may be quoted in clear in a later body of
        its run (echo redaction, section 12.8: code ``leak``).
        """
        proven = prove_disclosures(self.commitments, disclosures)
        check_echoes(proven, self._echo_run)
        return proven

    def _echo_run(self, run_id: str) -> EchoRun:
        """What the echo check reads of a verified run: its policy version, its initial
        state and its bodies."""
        verified = self._verified(run_id)[0]
        parent = verified.ancestors[-1] if verified.ancestors else None
        policy = verified.policy
        return EchoRun(
            policy_version=policy.get("v") if policy is not None else None,
            initial_state=self._verified(parent)[0].final_state if parent is not None else {},
            bodies=(
                (row.seq, row.type, row.decoded())
                for row in map(StoredEvent.of_values, self._rows(run_id))
            ),
        )

    # -- one run: docs/log-format.md section 9.2, "Algorithm for run R" -----------------------
    def _verify(self, run_id: str, rows: Iterable[_RowValues]) -> _Verified:
        check: RunCheck | None = None  # the run's state, made from its run.open (step 2.5)
        head = GENESIS
        expect = 0
        opened_at = 0
        ancestors: tuple[str, ...] = ()
        witness = SealWitness()  # what the seal is judged against (step 4)
        bodies = self._proven
        kept = None if self.hashes_for is None else self.hashes_for(run_id)
        for row in rows:  # step 2, for each row in seq order
            seq = expect
            where = RunCheck(run_id, {}) if check is None else check
            # 2.1-2.4: envelope, canonical body, event hash, chain link
            body, scan, head = sound_row(where, seq, row, head, bodies, kept)
            type_ = row[2]
            if sealing(where, witness, seq, type_, body):  # 2.6: a run.seal row, kept aside
                expect += 1
                continue
            if seq == 0:  # 2.5: run.open, its parent (section 9.3) and its policy
                check, ancestors = self._opened(where, type_, body)
                opened_at = row[3]
                witness_open(check, witness, body)
            else:  # 2.6: the body's shape, then what it says, by type
                assert check is not None
                self._event(check, seq, type_, body)
                witness_row(witness, seq, type_, body, head)
                # 2.6, last: the redaction checks of section 12.5, which a body that cannot
                # hold a commitment may skip when the run has no policy
                if check.matches is not None or scan:
                    check_redaction(check, seq, type_, body)
            expect += 1  # 2.7
        return self._result(run_id, check, head, expect, opened_at, ancestors, witness)

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
        """The end of a run's rows: no run (step 1), a truncated batch (step 3), or its
        verification: its seal judged (step 4) and the seal log's word on it (step 5)."""
        if check is None:
            raise VerificationError(run_id, None, "the run has no events", code="rows")
        if check.in_batch and not (
            check.format.writes_ahead
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
                final_state=FoldedState(check.state),
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
            final_state=FoldedState(check.state),  # read as plain lists; pins no copy
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

    #: step 2.2 alone, as the property tests call it (row_checks.canonical_body)
    _canonical_body = staticmethod(canonical_body)

    def _open(self, run_id: str, body: dict[str, Any]) -> tuple[RunCheck, tuple[str, ...]]:
        opened, parent = self._checked_open(run_id, body, fork=False)  # forked once, below
        if parent is None:
            check = RunCheck(run_id, {}, opened.conversation_id)
            check.hasher = RequestHasher(opened.projection.version)
        else:
            verified, parent_hasher = parent
            check = RunCheck(run_id, folded(verified.final_state), opened.conversation_id)
            check.initial = verified.final_state
            # the child's own projection, starting from the parent's piece digests
            check.hasher = parent_hasher.fork(opened.projection.version)
            lists = self._lists.get(verified.run_id)
            check.previous = (
                dict(lists)
                if lists is not None and self._done.get(verified.run_id, (None,))[0] is verified
                else continued_lists(verified.receipt_lists)
            )
        check.format, check.projection = opened.format, opened.projection
        check.resumes = opened.answer is not None and opened.answer.member == "resumes"
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
        close = verified.close
        outcome = None if close is None else close.get("outcome")
        if outcome not in _CONTINUABLE and outcome != PAUSED:
            raise where.fail(
                0, f"parent run {parent_id} did not finish; it cannot be continued", "ancestry"
            )
        parent_answered(where, parent_id, close, opened.answer)  # format v5: a paused parent
        if opened.answer is not None and self._pause_answers is not None:
            self._pause_answers.answered(parent_id, opened.answer.request_id, run_id)
        return opened, (verified, parent_hasher.fork() if fork else parent_hasher)

    _PHASE: ClassVar[dict[str, int]] = {"receipt": 1, "event": 2, "write": 3}

    def _event(self, check: RunCheck, seq: int, type_: str, body: dict[str, Any]) -> None:
        """Step 2.6 for a row after ``run.open`` (a ``run.seal`` was taken by ``sealing``)."""
        if check.close is not None:  # nothing but a run.seal follows run.close
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
        try:  # then by type: each body's shape first (structure), then what it says
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
