"""The contract test case every artifact store backend passes (store/artifacts.py).

Subclass :class:`ArtifactStoreContract` in a ``Test*`` class, implement
``make(tmp_path, retention=None, readonly=False)`` (a store at a place inside ``tmp_path``),
and, for a backend whose artifacts outlive the object, set ``persistent = True`` and implement
``reopen(tmp_path, retention=None, readonly=False)`` (the same store opened again); pytest
then runs every contract test against it (``tests/unit/test_artifact_stores.py`` does so for
the memory, file and SQLite stores). :func:`artifact` makes a head and content that agree.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agentfootprint.errors import (
    ArtifactConflictError,
    ArtifactNotFoundError,
    ArtifactStoreError,
    UsageError,
)
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.store.artifacts import (
    REF_PATTERN,
    ArtifactHead,
    ArtifactStore,
    Retention,
    Tombstone,
    mint_ref,
)

__all__ = ["ArtifactStoreContract", "artifact"]

SCOPE_A = "conversation-a"
SCOPE_B = "conversation-b"


def artifact(
    content: bytes,
    *,
    scope: str = SCOPE_A,
    ref: str | None = None,
    kind: str = "tool-result",
    media_type: str = "text/plain; charset=utf-8",
    created_at: int = 1_700_000_000_000,
    expires_at: int | None = None,
) -> tuple[ArtifactHead, bytes]:
    """A head that agrees with ``content`` (its size and ``hexdigest("artifact", content)``),
    under a fresh ref unless one is given, and the content."""
    head = ArtifactHead(
        scope=scope,
        ref=ref if ref is not None else mint_ref(),
        kind=kind,
        media_type=media_type,
        size=len(content),
        digest=hexdigest("artifact", content),
        created_at=created_at,
        expires_at=expires_at,
    )
    return head, content


def _other(head: ArtifactHead, **changes: Any) -> ArtifactHead:
    members = {name: getattr(head, name) for name in ArtifactHead.__slots__}
    return ArtifactHead(**(members | changes))


class ArtifactStoreContract:
    """Behaviour every :class:`ArtifactStore` backend must show."""

    #: artifacts outlive the object: ``reopen`` opens the same store again
    persistent = False

    def make(
        self, tmp_path: Path, retention: Retention | None = None, readonly: bool = False
    ) -> ArtifactStore:
        raise NotImplementedError

    def reopen(
        self, tmp_path: Path, retention: Retention | None = None, readonly: bool = False
    ) -> ArtifactStore:
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[ArtifactStore]:
        store = self.make(tmp_path)
        yield store
        store.close()

    def _reopened(self, store: ArtifactStore, tmp_path: Path, **kwargs: Any) -> ArtifactStore:
        store.close()
        if not self.persistent:
            pytest.skip("this backend keeps nothing beyond the object")
        return self.reopen(tmp_path, **kwargs)

    # -- refs ------------------------------------------------------------------------------
    def test_minted_refs_are_random_and_well_formed(self) -> None:
        refs = {mint_ref() for _ in range(200)}
        assert len(refs) == 200
        assert all(REF_PATTERN.fullmatch(ref) for ref in refs)

    def test_is_an_artifact_store(self, store: ArtifactStore) -> None:
        assert isinstance(store, ArtifactStore)
        assert store.readonly is False and store.retention == Retention()

    # -- put, head, read ---------------------------------------------------------------
    def test_put_head_read_round_trip(self, store: ArtifactStore) -> None:
        contents = [b"", b"plain text", bytes(range(256)), "Zoë \u2028 ✓".encode(), b"\x00" * 9]
        kept = [artifact(content, created_at=i) for i, content in enumerate(contents)]
        for head, content in kept:
            store.put(head, content)
        for head, content in kept:
            assert store.head(SCOPE_A, head.ref) == head
            got = store.read(SCOPE_A, head.ref)
            assert type(got) is bytes and got == content
            assert store.tombstone(SCOPE_A, head.ref) is None
        assert store.list(SCOPE_A) == [head for head, _ in kept]

    def test_a_large_content_round_trips(self, store: ArtifactStore) -> None:
        content = random.Random(8).randbytes(8 * 1024 * 1024)
        head, _ = artifact(content, media_type="application/octet-stream", expires_at=5)
        store.put(head, content)
        assert store.head(SCOPE_A, head.ref) == head
        assert store.read(SCOPE_A, head.ref) == content

    def test_content_is_copied_when_put(self, store: ArtifactStore) -> None:
        buffer = bytearray(b"mutable")
        head, _ = artifact(bytes(buffer))
        store.put(head, buffer)  # type: ignore[arg-type]  # bytes-like is accepted, copied
        buffer[0:1] = b"M"
        assert store.read(SCOPE_A, head.ref) == b"mutable"

    def test_unknown_refs_read_as_none(self, store: ArtifactStore) -> None:
        head, content = artifact(b"kept")
        store.put(head, content)
        for ref in (mint_ref(), "art_short", "../" + head.ref, head.ref + "x", ""):
            assert store.head(SCOPE_A, ref) is None
            assert store.read(SCOPE_A, ref) is None
            assert store.tombstone(SCOPE_A, ref) is None
            with pytest.raises(ArtifactNotFoundError):
                store.remove(SCOPE_A, ref, reason="erased", at=1)
        assert store.list("no such scope") == []

    def test_arguments_of_the_wrong_type_are_usage_errors(self, store: ArtifactStore) -> None:
        head, content = artifact(b"kept")
        store.put(head, content)
        for bad_scope in (7, "", None, b"conversation-a", "\ud800"):
            with pytest.raises(UsageError):
                store.head(bad_scope, head.ref)  # type: ignore[arg-type]
            with pytest.raises(UsageError):
                store.list(bad_scope)  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            store.read(SCOPE_A, 7)  # type: ignore[arg-type]
        for bad in ({"reason": "deleted", "at": 1}, {"reason": "erased", "at": "1"}):
            with pytest.raises(UsageError):
                store.remove(SCOPE_A, head.ref, **bad)
        with pytest.raises(UsageError):
            store.remove(SCOPE_A, head.ref, reason="erased", at=1, note=5)  # type: ignore[arg-type]
        for now in (-1, 1.5, True, None):
            with pytest.raises(UsageError):
                store.sweep(SCOPE_A, now)  # type: ignore[arg-type]
        assert store.read(SCOPE_A, head.ref) == content  # nothing was removed

    # -- list order ----------------------------------------------------------------------
    def test_list_is_in_put_order(self, store: ArtifactStore) -> None:
        late, early, tie_1, tie_2, middle = (  # refs in the reverse of the put order
            artifact(name.encode(), created_at=at, ref="art_" + letter * 22)
            for name, at, letter in (
                ("late", 50, "z"),
                ("early", 10, "y"),
                ("t1", 30, "x"),
                ("t2", 30, "w"),
                ("mid", 20, "v"),
            )
        )
        for head, content in (late, tie_1, early, tie_2, middle):
            store.put(head, content)
        order = [early, middle, tie_1, tie_2, late]
        assert store.list(SCOPE_A) == [head for head, _ in order]

    # -- refs are never reused -----------------------------------------------------------
    def test_put_of_a_live_ref_is_refused(self, store: ArtifactStore) -> None:
        head, content = artifact(b"first")
        store.put(head, content)
        again, other = artifact(b"second", ref=head.ref)
        with pytest.raises(ArtifactConflictError):
            store.put(again, other)
        with pytest.raises(ArtifactConflictError):
            store.put(head, content)  # the very same artifact again, too
        assert store.read(SCOPE_A, head.ref) == b"first"
        assert store.list(SCOPE_A) == [head]

    def test_put_of_a_tombstoned_ref_is_refused(self, store: ArtifactStore) -> None:
        head, content = artifact(b"first")
        store.put(head, content)
        tomb = store.remove(SCOPE_A, head.ref, reason="erased", at=9, note="asked")
        with pytest.raises(ArtifactConflictError):
            store.put(head, content)
        assert store.head(SCOPE_A, head.ref) is None and store.read(SCOPE_A, head.ref) is None
        assert store.tombstone(SCOPE_A, head.ref) == tomb
        assert store.list(SCOPE_A) == []

    # -- scopes --------------------------------------------------------------------------
    def test_nothing_crosses_scopes(self, store: ArtifactStore) -> None:
        head, content = artifact(b"tenant a's", scope=SCOPE_A)
        store.put(head, content)
        assert store.head(SCOPE_B, head.ref) is None
        assert store.read(SCOPE_B, head.ref) is None
        assert store.tombstone(SCOPE_B, head.ref) is None
        assert store.list(SCOPE_B) == []
        with pytest.raises(ArtifactNotFoundError):
            store.remove(SCOPE_B, head.ref, reason="erased", at=1)
        assert store.sweep(SCOPE_B, 2**53 - 1) == []
        assert store.read(SCOPE_A, head.ref) == content

    def test_one_ref_in_two_scopes_names_two_artifacts(self, store: ArtifactStore) -> None:
        a, a_content = artifact(b"in a", scope=SCOPE_A)
        b, b_content = artifact(b"in b, longer", scope=SCOPE_B, ref=a.ref, kind="table")
        store.put(a, a_content)
        store.put(b, b_content)
        assert store.head(SCOPE_A, a.ref) == a and store.head(SCOPE_B, a.ref) == b
        assert store.read(SCOPE_B, a.ref) == b_content
        tomb = store.remove(SCOPE_A, a.ref, reason="erased", at=3)
        assert tomb.scope == SCOPE_A and tomb.digest == a.digest
        assert store.read(SCOPE_B, a.ref) == b_content
        assert store.tombstone(SCOPE_B, a.ref) is None
        assert store.list(SCOPE_B) == [b]

    def test_scopes_that_look_alike_are_distinct(self, store: ArtifactStore) -> None:
        scopes = ["a", "a ", "A", "a/../b", "tenant:1|user:2", "é", "e\u0301", "x" * 1000]
        kept = [artifact(scope.encode() + b"!", scope=scope) for scope in scopes]
        for head, content in kept:
            store.put(head, content)
        for head, content in kept:
            assert store.list(head.scope) == [head]
            assert store.read(head.scope, head.ref) == content

    # -- what put refuses ----------------------------------------------------------------
    def test_a_put_that_disagrees_with_its_head_is_refused_and_stores_nothing(
        self, store: ArtifactStore
    ) -> None:
        head, content = artifact(b"the content")
        wrong = [
            (_other(head, digest=hexdigest("artifact", b"other")), content),
            (_other(head, digest=head.digest.upper()), content),
            (_other(head, size=head.size + 1), content),
            (head, content + b"!"),
            (head, content[:-1] + b"?"),
            (_other(head, ref="art_short"), content),
            (_other(head, ref="../" + head.ref[3:]), content),
            (_other(head, kind="Tool Result"), content),
            (_other(head, kind=""), content),
            (_other(head, media_type=""), content),
            (_other(head, created_at=-1), content),
            (_other(head, expires_at=1.5), content),
            (_other(head, scope=""), content),
        ]
        for bad_head, bad_content in wrong:
            with pytest.raises(ArtifactStoreError) as caught:
                store.put(bad_head, bad_content)
            assert not isinstance(caught.value, ArtifactConflictError)
        with pytest.raises(ArtifactStoreError):
            store.put(head, "the content")  # type: ignore[arg-type]
        with pytest.raises(ArtifactStoreError):
            store.put({"ref": head.ref}, content)  # type: ignore[arg-type]
        assert store.head(SCOPE_A, head.ref) is None and store.list(SCOPE_A) == []
        store.put(head, content)  # nothing of the refused puts is in the way
        assert store.read(SCOPE_A, head.ref) == content

    # -- remove --------------------------------------------------------------------------
    def test_remove_keeps_a_tombstone_and_drops_the_bytes(self, store: ArtifactStore) -> None:
        head, content = artifact(b"to be erased", expires_at=77)
        other, other_content = artifact(b"stays")
        store.put(head, content)
        store.put(other, other_content)
        tomb = store.remove(SCOPE_A, head.ref, reason="erased", at=1234, note="user asked")
        assert tomb == Tombstone(
            scope=SCOPE_A,
            ref=head.ref,
            digest=head.digest,
            size=head.size,
            reason="erased",
            at=1234,
            note="user asked",
        )
        assert store.head(SCOPE_A, head.ref) is None and store.read(SCOPE_A, head.ref) is None
        assert store.tombstone(SCOPE_A, head.ref) == tomb
        assert store.list(SCOPE_A) == [other]
        with pytest.raises(ArtifactNotFoundError) as caught:
            store.remove(SCOPE_A, head.ref, reason="erased", at=1235)
        assert isinstance(caught.value, KeyError) and head.ref in str(caught.value)
        assert store.tombstone(SCOPE_A, head.ref) == tomb  # the first tombstone stays
        expired = store.remove(SCOPE_A, other.ref, reason="expired", at=5)
        assert expired.reason == "expired" and expired.note == ""

    # -- sweep ---------------------------------------------------------------------------
    def test_sweep_removes_what_expired_at_or_before_now(self, store: ArtifactStore) -> None:
        first, c1 = artifact(b"one", expires_at=100, created_at=3)
        second, c2 = artifact(b"two", expires_at=101, created_at=1)
        never, c3 = artifact(b"never", expires_at=None, created_at=0)
        for head, content in ((first, c1), (second, c2), (never, c3)):
            store.put(head, content)
        assert store.sweep(SCOPE_A, 99) == []
        swept = store.sweep(SCOPE_A, 100)
        assert [(t.ref, t.reason, t.note, t.at) for t in swept] == [
            (first.ref, "expired", "ttl", 100)
        ]
        assert store.tombstone(SCOPE_A, first.ref) == swept[0]
        assert store.read(SCOPE_A, second.ref) == c2
        assert [t.ref for t in store.sweep(SCOPE_A, 10**12)] == [second.ref]
        assert store.list(SCOPE_A) == [never]
        assert store.sweep(SCOPE_A, 10**12) == []

    def test_sweep_by_count_removes_the_oldest_first(self, tmp_path: Path) -> None:
        with self.make(tmp_path, Retention(max_count=2)) as store:
            kept = [artifact(f"n{i}".encode(), created_at=at) for i, at in enumerate([5, 1, 5, 3])]
            for head, content in kept:
                store.put(head, content)
            swept = store.sweep(SCOPE_A, 0)
            assert [(t.ref, t.note, t.reason) for t in swept] == [
                (kept[1][0].ref, "max_count", "expired"),
                (kept[3][0].ref, "max_count", "expired"),
            ]
            assert store.list(SCOPE_A) == [kept[0][0], kept[2][0]]
            assert store.sweep(SCOPE_A, 0) == []

    def test_sweep_by_bytes_removes_the_oldest_first(self, tmp_path: Path) -> None:
        with self.make(tmp_path, Retention(max_bytes=10)) as store:
            kept = [artifact(bytes([i]) * 4, created_at=i) for i in range(4)]
            empty, nothing = artifact(b"", created_at=0)
            store.put(empty, nothing)
            for head, content in kept:
                store.put(head, content)
            swept = store.sweep(SCOPE_A, 0)  # 16 bytes: the oldest go until 10 or fewer
            assert [(t.ref, t.note, t.size) for t in swept] == [
                (empty.ref, "max_bytes", 0),
                (kept[0][0].ref, "max_bytes", 4),
                (kept[1][0].ref, "max_bytes", 4),
            ]
            assert store.list(SCOPE_A) == [kept[2][0], kept[3][0]]

    def test_sweep_expires_first_then_applies_the_bounds(self, tmp_path: Path) -> None:
        with self.make(tmp_path, Retention(max_count=2, max_bytes=100)) as store:
            old, c_old = artifact(b"old", created_at=1)
            mid, c_mid = artifact(b"mid", created_at=2)
            new, c_new = artifact(b"new", created_at=3)
            dead, c_dead = artifact(b"dead", created_at=4, expires_at=50)
            for head, content in ((old, c_old), (mid, c_mid), (new, c_new), (dead, c_dead)):
                store.put(head, content)
            swept = store.sweep(SCOPE_A, 50)
            assert [(t.ref, t.note) for t in swept] == [(dead.ref, "ttl"), (old.ref, "max_count")]
            assert all(t.at == 50 and t.reason == "expired" for t in swept)
            assert store.list(SCOPE_A) == [mid, new]
            assert store.list(SCOPE_B) == []

    def test_sweep_touches_only_its_scope(self, tmp_path: Path) -> None:
        with self.make(tmp_path, Retention(max_count=1)) as store:
            a = [artifact(b"a%d" % i, scope=SCOPE_A, created_at=i) for i in range(2)]
            b = [artifact(b"b%d" % i, scope=SCOPE_B, created_at=i) for i in range(3)]
            for head, content in a + b:
                store.put(head, content)
            assert [t.ref for t in store.sweep(SCOPE_A, 0)] == [a[0][0].ref]
            assert store.list(SCOPE_B) == [head for head, _ in b]

    def test_retention_bounds_are_checked(self) -> None:
        for bad in (0, -1, True, 1.5, "10"):
            for name in ("ttl_ms", "max_count", "max_bytes"):
                with pytest.raises(UsageError, match=name):
                    Retention(**{name: bad})  # type: ignore[arg-type]
        assert Retention(ttl_ms=1, max_count=1, max_bytes=1).max_bytes == 1

    # -- read-only, persistence ----------------------------------------------------------
    def test_a_readonly_store_refuses_every_write(self, tmp_path: Path) -> None:
        store = self.make(tmp_path, Retention(max_count=1))
        head, content = artifact(b"kept", expires_at=1)
        gone, gone_content = artifact(b"gone", created_at=0)
        store.put(head, content)
        store.put(gone, gone_content)
        tomb = store.remove(SCOPE_A, gone.ref, reason="erased", at=2)
        with self._reopened(store, tmp_path, readonly=True) as readonly:
            assert readonly.readonly is True
            new, new_content = artifact(b"new")
            writes = (
                lambda: readonly.put(new, new_content),
                lambda: readonly.remove(SCOPE_A, head.ref, reason="erased", at=3),
                lambda: readonly.sweep(SCOPE_A, 10),
            )
            for write in writes:
                with pytest.raises(ArtifactStoreError, match="read-only"):
                    write()
            assert readonly.list(SCOPE_A) == [head]
            assert readonly.read(SCOPE_A, head.ref) == content
            assert readonly.tombstone(SCOPE_A, gone.ref) == tomb
        with self.reopen(tmp_path) as again:
            assert again.list(SCOPE_A) == [head] and again.head(SCOPE_A, new.ref) is None

    def test_everything_survives_a_reopen(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        kept = [artifact(b"k%d" % i, created_at=7, expires_at=i or None) for i in range(3)]
        elsewhere, elsewhere_content = artifact(b"elsewhere", scope=SCOPE_B)
        for head, content in [*kept, (elsewhere, elsewhere_content)]:
            store.put(head, content)
        tomb = store.remove(SCOPE_A, kept[1][0].ref, reason="erased", at=8, note="why")
        with self._reopened(store, tmp_path) as again:
            assert again.list(SCOPE_A) == [kept[0][0], kept[2][0]]
            assert again.read(SCOPE_A, kept[2][0].ref) == kept[2][1]
            assert again.tombstone(SCOPE_A, kept[1][0].ref) == tomb
            assert again.list(SCOPE_B) == [elsewhere]
            # a tie, under the lowest ref: the put order must have survived the reopen
            later, later_content = artifact(b"later", created_at=7, ref="art_" + "0" * 22)
            again.put(later, later_content)
            assert again.list(SCOPE_A) == [kept[0][0], kept[2][0], later]
            with pytest.raises(ArtifactConflictError):
                again.put(*kept[1])

    # -- threads, closing ----------------------------------------------------------------
    def test_concurrent_puts_from_threads(self, store: ArtifactStore) -> None:
        threads, per_thread = 6, 10
        barrier = threading.Barrier(threads)
        failures: list[BaseException] = []
        made: dict[int, list[ArtifactHead]] = {}

        def work(index: int) -> None:
            try:
                barrier.wait()
                made[index] = []
                for j in range(per_thread):
                    head, content = artifact(b"t%d-%d" % (index, j), created_at=j)
                    store.put(head, content)
                    made[index].append(head)
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert failures == []
        listed = store.list(SCOPE_A)
        assert len(listed) == threads * per_thread
        assert [head.created_at for head in listed] == sorted(h.created_at for h in listed)
        for heads in made.values():
            assert [h for h in listed if h in heads] == heads  # each thread's in its order

    def test_a_closed_store_refuses_every_use(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        head, content = artifact(b"kept")
        store.put(head, content)
        store.close()
        store.close()  # twice is harmless
        uses = (
            lambda: store.put(*artifact(b"new")),
            lambda: store.head(SCOPE_A, head.ref),
            lambda: store.read(SCOPE_A, head.ref),
            lambda: store.tombstone(SCOPE_A, head.ref),
            lambda: store.remove(SCOPE_A, head.ref, reason="erased", at=1),
            lambda: store.list(SCOPE_A),
            lambda: store.sweep(SCOPE_A, 1),
        )
        for use in uses:
            with pytest.raises(ArtifactStoreError, match="closed"):
                use()

    def test_the_context_manager_closes(self, tmp_path: Path) -> None:
        with self.make(tmp_path) as store:
            store.put(*artifact(b"kept"))
        with pytest.raises(ArtifactStoreError):
            store.list(SCOPE_A)

    # -- the property ----------------------------------------------------------------------
    def test_the_store_behaves_as_a_dict_model(self, tmp_path: Path) -> None:
        """Random put / put-again / remove / sweep (/ reopen) sequences: after every step
        the store answers ``list``, ``head``, ``read`` and ``tombstone`` as a dict model does,
        and every refusal is the model's."""
        run_state_machine_as_test(
            _machine(self, tmp_path),
            settings=settings(
                max_examples=max(1, settings().max_examples * 3 // 2),
                stateful_step_count=20,
                deadline=None,
            ),
        )


_SCOPES = st.sampled_from([SCOPE_A, SCOPE_B])
_RETENTION = st.builds(
    Retention,
    max_count=st.none() | st.integers(1, 4),
    max_bytes=st.none() | st.integers(1, 40),
)


def _machine(contract: ArtifactStoreContract, tmp_path: Path) -> type[RuleBasedStateMachine]:
    examples = itertools.count()

    class StoreAgainstModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.store: ArtifactStore | None = None
            #: (scope, ref) -> (head, content, put number)
            self.live: dict[tuple[str, str], tuple[ArtifactHead, bytes, int]] = {}
            self.tombs: dict[tuple[str, str], Tombstone] = {}
            self.refs: list[str] = []
            self.puts = itertools.count()

        @initialize(retention=_RETENTION)
        def open(self, retention: Retention) -> None:
            self.where = tmp_path / f"example-{next(examples)}"
            self.where.mkdir()
            self.retention = retention
            self.store = contract.make(self.where, retention)

        @property
        def opened(self) -> ArtifactStore:
            assert self.store is not None
            return self.store

        def _model_list(self, scope: str) -> list[ArtifactHead]:
            entries = [entry for (s, _), entry in self.live.items() if s == scope]
            entries.sort(key=lambda entry: (entry[0].created_at, entry[2]))
            return [head for head, _, _ in entries]

        @rule(
            scope=_SCOPES,
            reuse=st.booleans(),
            content=st.binary(max_size=12),
            created_at=st.integers(0, 6),
            expires_at=st.none() | st.integers(0, 8),
            data=st.data(),
        )
        def put(
            self,
            scope: str,
            reuse: bool,
            content: bytes,
            created_at: int,
            expires_at: int | None,
            data: st.DataObject,
        ) -> None:
            if reuse and self.refs:  # a ref known somewhere: new to this scope, or refused
                ref = data.draw(st.sampled_from(self.refs))
            else:
                # deterministic, and in no relation to the put order
                ref = "art_" + hashlib.sha256(b"%d" % len(self.refs)).hexdigest()[:22]
                self.refs.append(ref)
            head, _ = artifact(
                content, scope=scope, ref=ref, created_at=created_at, expires_at=expires_at
            )
            if (scope, ref) in self.live or (scope, ref) in self.tombs:
                with pytest.raises(ArtifactConflictError):
                    self.opened.put(head, content)
                return
            self.opened.put(head, content)
            self.live[(scope, ref)] = (head, content, next(self.puts))

        @precondition(lambda self: bool(self.refs))
        @rule(
            scope=_SCOPES,
            data=st.data(),
            reason=st.sampled_from(["expired", "erased"]),
            at=st.integers(0, 10),
        )
        def remove(self, scope: str, data: st.DataObject, reason: Any, at: int) -> None:
            ref = data.draw(st.sampled_from(self.refs))
            if (scope, ref) not in self.live:
                with pytest.raises(ArtifactNotFoundError):
                    self.opened.remove(scope, ref, reason=reason, at=at, note="rule")
                return
            head, _, _ = self.live.pop((scope, ref))
            tomb = self.opened.remove(scope, ref, reason=reason, at=at, note="rule")
            assert tomb == Tombstone(
                scope=scope,
                ref=ref,
                digest=head.digest,
                size=head.size,
                reason=reason,
                at=at,
                note="rule",
            )
            self.tombs[(scope, ref)] = tomb

        @precondition(lambda self: bool(self.live))
        @rule(scope=_SCOPES, data=st.data())
        def sweep(self, scope: str, data: st.DataObject) -> None:
            heads = self._model_list(scope)
            expiries = sorted({h.expires_at for h in heads if h.expires_at is not None})
            at_an_expiry = st.sampled_from(expiries) if expiries else st.nothing()
            now = data.draw(at_an_expiry | st.integers(0, 10), label="now")
            expected: list[tuple[str, str]] = []
            rest = []
            for head in heads:
                if head.expires_at is not None and head.expires_at <= now:
                    expected.append((head.ref, "ttl"))
                else:
                    rest.append(head)
            limit_count, limit_bytes = self.retention.max_count, self.retention.max_bytes
            while rest:
                if limit_count is not None and len(rest) > limit_count:
                    expected.append((rest.pop(0).ref, "max_count"))
                elif limit_bytes is not None and sum(h.size for h in rest) > limit_bytes:
                    expected.append((rest.pop(0).ref, "max_bytes"))
                else:
                    break
            swept = self.opened.sweep(scope, now)
            assert [(t.ref, t.note) for t in swept] == expected
            for tomb in swept:
                head, _, _ = self.live.pop((scope, tomb.ref))
                assert (tomb.scope, tomb.reason, tomb.at) == (scope, "expired", now)
                assert (tomb.digest, tomb.size) == (head.digest, head.size)
                self.tombs[(scope, tomb.ref)] = tomb

        @precondition(lambda self: contract.persistent)
        @rule()
        def reopen(self) -> None:
            self.opened.close()
            self.store = contract.reopen(self.where, self.retention)

        @invariant()
        def agrees_with_the_model(self) -> None:
            if self.store is None:
                return
            for scope in (SCOPE_A, SCOPE_B):
                assert self.store.list(scope) == self._model_list(scope)
                for ref in self.refs:
                    entry = self.live.get((scope, ref))
                    assert self.store.head(scope, ref) == (entry[0] if entry else None)
                    assert self.store.read(scope, ref) == (entry[1] if entry else None)
                    assert self.store.tombstone(scope, ref) == self.tombs.get((scope, ref))

        def teardown(self) -> None:
            if self.store is not None:
                self.store.close()

    return StoreAgainstModel
