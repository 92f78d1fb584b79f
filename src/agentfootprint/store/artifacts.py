"""The artifact store port: large content kept outside the log, named by a random ref.

An artifact is bytes a run placed outside its log (a large tool result, a table) together with
its head: the scope it belongs to (the conversation: a tenant boundary nothing crosses), a ref
minted at random (``art_`` + 22 base62 characters: never derived from the content, so one scope
cannot confirm that another holds the same bytes), its kind, media type, size and digest
(``hexdigest("artifact", content)``, which the log records and ``verify --artifacts``
recomputes). Removing an artifact (retention, or an erasure) deletes its bytes and keeps a
:class:`Tombstone` with its digest and size, so a verifier can tell ``expired`` or ``erased``
from ``missing``. A ref is never reused within its scope.

:class:`ArtifactStore` holds what every backend shares: the checks of every argument, the
read-only and closed refusals, the lock, and retention (:meth:`ArtifactStore.sweep`); a backend
implements the storage steps (``_put``, ``_head``, ``_read``, ``_tombstone``, ``_remove_all``,
``_list``, ``_close``) and translates its driver's errors in one place (``_errors``).
Backends: :class:`MemoryArtifacts` here, :class:`~agentfootprint.store.artifacts_file.FileArtifacts`
(a directory) and :class:`~agentfootprint.store.artifacts_sqlite.SqliteArtifacts` (an SQLite
file); :func:`open_artifacts` picks one from a path. Every backend passes
``agentfootprint.testing.artifact_contract.ArtifactStoreContract``.

The store never reads a clock: every instant (``created_at``, ``expires_at``, a tombstone's
``at``, ``sweep``'s ``now``) is given by the caller, so retention is a function of the record.
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import os
import re
import secrets
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Self, get_args

from agentfootprint.errors import (
    ArtifactConflictError,
    ArtifactNotFoundError,
    ArtifactStoreError,
    FileError,
    UsageError,
)
from agentfootprint.logformat.canonical import MAX_SAFE_INT
from agentfootprint.logformat.hashing import hexdigest, is_hex_digest

__all__ = [
    "KIND_PATTERN",
    "REF_PATTERN",
    "ArtifactHead",
    "ArtifactStore",
    "MemoryArtifacts",
    "Retention",
    "Tombstone",
    "mint_ref",
    "open_artifacts",
]

#: A ref: ``art_`` and 22 base62 characters (about 131 random bits), matched with fullmatch.
REF_PATTERN: Final = re.compile(r"art_[0-9A-Za-z]{22}")
#: An artifact's kind (``tool-result``, ``table``, ``recording/run`` is not one: no slash).
KIND_PATTERN: Final = re.compile(r"[a-z0-9._-]{1,64}")
_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MEDIA_TYPE: Final = re.compile(r"[\x20-\x7e]{1,255}")
#: Longest scope and tombstone note, in UTF-8 bytes (a head or tombstone file stays small).
MAX_SCOPE_BYTES: Final = 4096
MAX_NOTE_BYTES: Final = 4096

Reason = Literal["expired", "erased"]
_REASONS: Final = frozenset(get_args(Reason))


def mint_ref() -> str:
    """A fresh ref: ``art_`` + 22 base62 characters from :mod:`secrets` (random, never derived
    from content)."""
    return "art_" + "".join(secrets.choice(_BASE62) for _ in range(22))


@dataclass(frozen=True, kw_only=True, slots=True)
class ArtifactHead:
    """What a store knows of an artifact besides its bytes. Instants are unix milliseconds
    given by the caller; ``expires_at`` None means no expiry (the store never invents one:
    the caller computes ``created_at + retention.ttl_ms``)."""

    scope: str
    ref: str
    kind: str
    media_type: str
    size: int
    digest: str
    created_at: int
    expires_at: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Tombstone:
    """What is kept of a removed artifact: its digest and size, why (``expired`` for
    retention, ``erased`` for an erasure) and when (``at``, given by the caller). ``note``:
    ``ttl``, ``max_count`` or ``max_bytes`` for retention, or the eraser's reason."""

    scope: str
    ref: str
    digest: str
    size: int
    reason: Reason
    at: int
    note: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Retention:
    """Per-scope bounds, each optional, each a positive int when given: ``ttl_ms`` (read by
    whoever computes ``expires_at``; :meth:`ArtifactStore.sweep` compares ``expires_at``
    only), ``max_count`` live artifacts, ``max_bytes`` of live content."""

    ttl_ms: int | None = None
    max_count: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("ttl_ms", "max_count", "max_bytes"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value <= 0):
                raise UsageError(
                    f"Retention({name}=...) must be a positive int or None, not {value!r}",
                    option="retention",
                )


#: One planned removal: the head and the note its tombstone gets.
Removal = tuple[ArtifactHead, str]


# -- checks shared by every backend ------------------------------------------------------


def _instant(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INT


def _utf8_size(text: str) -> int | None:
    """Bytes of ``text`` in UTF-8; None when it cannot be encoded (a lone surrogate)."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def _note_ok(note: object) -> bool:
    if type(note) is not str:
        return False
    size = _utf8_size(note)
    return size is not None and size <= MAX_NOTE_BYTES


def scope_problem(scope: object) -> str | None:
    """Why ``scope`` cannot be one (None when it can): a non-empty str of at most
    :data:`MAX_SCOPE_BYTES` UTF-8 bytes."""
    if type(scope) is not str or not scope:
        return f"a scope must be a non-empty str, not {scope!r:.80}"
    size = _utf8_size(scope)
    if size is None:
        return "a scope must be valid Unicode text (it holds a lone surrogate)"
    if size > MAX_SCOPE_BYTES:
        return f"a scope is at most {MAX_SCOPE_BYTES} bytes of UTF-8, not {size}"
    return None


def head_problem(head: ArtifactHead) -> str | None:
    """Why ``head`` cannot be stored (None when it can), member by member."""
    problem = scope_problem(head.scope)
    if problem is not None:
        return problem
    if type(head.ref) is not str or not REF_PATTERN.fullmatch(head.ref):
        return f"ref {head.ref!r:.80} is not a minted ref (art_ and 22 base62 characters)"
    if type(head.kind) is not str or not KIND_PATTERN.fullmatch(head.kind):
        return f"kind {head.kind!r:.80} is not 1 to 64 characters of [a-z0-9._-]"
    if type(head.media_type) is not str or not _MEDIA_TYPE.fullmatch(head.media_type):
        return f"media_type {head.media_type!r:.80} is not 1 to 255 printable ASCII characters"
    if not _instant(head.size):
        return f"size {head.size!r:.80} is not an int from 0 to 2**53 - 1"
    if not is_hex_digest(head.digest):
        return f"digest {head.digest!r:.80} is not 64 lowercase hex digits"
    if not _instant(head.created_at):
        return f"created_at {head.created_at!r:.80} is not unix milliseconds (an int >= 0)"
    if head.expires_at is not None and not _instant(head.expires_at):
        return f"expires_at {head.expires_at!r:.80} is not None or unix milliseconds"
    return None


def tombstone_problem(tomb: Tombstone) -> str | None:
    """Why ``tomb`` is not a tombstone a store writes (None when it is one)."""
    problem = scope_problem(tomb.scope)
    if problem is not None:
        return problem
    if type(tomb.ref) is not str or not REF_PATTERN.fullmatch(tomb.ref):
        return f"ref {tomb.ref!r:.80} is not a minted ref"
    if not is_hex_digest(tomb.digest):
        return f"digest {tomb.digest!r:.80} is not 64 lowercase hex digits"
    if not _instant(tomb.size):
        return f"size {tomb.size!r:.80} is not an int from 0 to 2**53 - 1"
    if type(tomb.reason) is not str or tomb.reason not in _REASONS:
        return f"reason {tomb.reason!r:.80} is not 'expired' or 'erased'"
    if not _instant(tomb.at):
        return f"at {tomb.at!r:.80} is not unix milliseconds (an int >= 0)"
    if not _note_ok(tomb.note):
        return f"note {tomb.note!r:.80} is not text of at most {MAX_NOTE_BYTES} UTF-8 bytes"
    return None


def retention_plan(heads: Sequence[ArtifactHead], retention: Retention, now: int) -> list[Removal]:
    """What :meth:`ArtifactStore.sweep` removes from ``heads`` (live, oldest first): every
    one with ``expires_at <= now`` (``ttl``), then the oldest while the count is above
    ``max_count`` (``max_count``) or the total size above ``max_bytes`` (``max_bytes``)."""
    plan: list[Removal] = [
        (head, "ttl") for head in heads if head.expires_at is not None and head.expires_at <= now
    ]
    expired = {head.ref for head, _ in plan}
    kept = [head for head in heads if head.ref not in expired]
    count, total = len(kept), sum(head.size for head in kept)
    limit_count, limit_bytes = retention.max_count, retention.max_bytes
    for head in kept:
        if limit_count is not None and count > limit_count:
            note = "max_count"
        elif limit_bytes is not None and total > limit_bytes:
            note = "max_bytes"
        else:
            break
        plan.append((head, note))
        count, total = count - 1, total - head.size
    return plan


def _checked_instant(value: object, name: str) -> int:
    if not _instant(value):
        raise UsageError(
            f"{name} must be unix milliseconds (an int from 0 to 2**53 - 1), not {value!r:.80}",
            option=name,
        )
    return value  # type: ignore[return-value]


def _checked_ref(ref: object) -> str:
    if type(ref) is not str:
        raise UsageError(f"a ref must be a str, not {ref!r:.80}", option="ref")
    return ref


def _checked_scope(scope: object) -> str:
    problem = scope_problem(scope)
    if problem is not None:
        raise UsageError(problem, option="scope")
    return scope  # type: ignore[return-value]


def order_key(head: ArtifactHead, seq: int) -> tuple[int, int, str]:
    """Put order: ``created_at``, then the put sequence (the ref breaks a tie a backend
    written by two processes at once may leave)."""
    return (head.created_at, seq, head.ref)


# -- the port ----------------------------------------------------------------------------


class ArtifactStore(abc.ABC):
    """Artifacts by (scope, ref). Thread-safe: every operation holds the store's lock.

    Errors: :class:`~agentfootprint.errors.UsageError` for an argument of the wrong type
    (a scope that is not a non-empty str, an instant that is not an int);
    :class:`~agentfootprint.errors.ArtifactStoreError` (and its subclasses) for what the
    store refuses or a driver error, translated in one place per backend; any use after
    :meth:`close` is an :class:`~agentfootprint.errors.ArtifactStoreError`.
    """

    retention: Retention
    readonly: bool
    #: the file or directory the store lives in (None: memory); the agent refuses a store
    #: whose path is the log's
    holds_path: str | None

    def __init__(
        self,
        *,
        retention: Retention | None = None,
        readonly: bool = False,
        holds_path: str | None = None,
    ) -> None:
        if retention is not None and not isinstance(retention, Retention):
            raise UsageError(
                f"retention must be a Retention or None, not {retention!r:.80}",
                option="retention",
            )
        if type(readonly) is not bool:
            raise UsageError(
                f"readonly must be True or False, not {readonly!r:.80}", option="readonly"
            )
        self.retention = retention if retention is not None else Retention()
        self.readonly = readonly
        self.holds_path = holds_path
        self._lock = threading.RLock()
        self._closed = False

    # -- what a backend implements (called with the lock held, inside ``_errors``) --------
    @abc.abstractmethod
    def _put(self, head: ArtifactHead, content: bytes) -> None:
        """Keep ``content`` under ``head`` atomically; :class:`ArtifactConflictError` when the
        scope knows the ref (live or tombstoned). Head and content are checked already."""

    @abc.abstractmethod
    def _head(self, scope: str, ref: str) -> ArtifactHead | None: ...

    @abc.abstractmethod
    def _read(self, scope: str, ref: str) -> bytes | None: ...

    @abc.abstractmethod
    def _tombstone(self, scope: str, ref: str) -> Tombstone | None: ...

    @abc.abstractmethod
    def _remove_all(self, tombs: Sequence[Tombstone]) -> None:
        """Delete the bytes and head of each live artifact ``tombs`` names and keep the
        tombstone (atomically where the backend can: all or none)."""

    @abc.abstractmethod
    def _list(self, scope: str) -> list[ArtifactHead]:
        """The live heads of ``scope`` in put order."""

    @abc.abstractmethod
    def _close(self) -> None: ...

    def _repair(self, scope: str) -> None:
        """Before a sweep: clear what an interrupted removal left in ``scope`` (a backend
        whose removals are not one transaction overrides it)."""
        return None

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        """The one place a backend's driver errors become this library's."""
        return contextlib.nullcontext()

    def _describe(self) -> str:
        return type(self).__name__ + (f" {self.holds_path}" if self.holds_path else "")

    # -- the operations ----------------------------------------------------------------
    @contextlib.contextmanager
    def _using(self, *, writing: str | None = None) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise ArtifactStoreError(f"artifact store {self._describe()} is closed")
            if writing is not None and self.readonly:
                raise ArtifactStoreError(
                    f"artifact store {self._describe()} was opened read-only: nothing can be "
                    f"{writing} (open it without readonly=True)"
                )
            with self._errors():
                yield

    def put(self, head: ArtifactHead, content: bytes) -> None:
        """Keep ``content`` under ``head``, atomically (after a crash or an error nothing
        half-written is visible). Refused with :class:`ArtifactConflictError` when the scope
        knows the ref (live or tombstoned), and with :class:`ArtifactStoreError` when the
        content's length or ``hexdigest("artifact", content)`` differs from the head's, when
        the head is not valid (its ref not minted, its kind not ``[a-z0-9._-]{1,64}``...),
        or when the store is read-only."""
        if not isinstance(head, ArtifactHead):
            raise ArtifactStoreError(f"put: head must be an ArtifactHead, not {head!r:.80}")
        if not isinstance(content, bytes | bytearray | memoryview):
            raise ArtifactStoreError(
                f"put {head.ref!r:.40}: content must be bytes, not {type(content).__name__}"
            )
        data = bytes(content)
        problem = head_problem(head)
        if problem is not None:
            raise ArtifactStoreError(f"put: the head cannot be stored: {problem}")
        if len(data) != head.size:
            raise ArtifactStoreError(
                f"put {head.ref}: the content is {len(data)} bytes, the head says {head.size}"
            )
        actual = hexdigest("artifact", data)
        if actual != head.digest:
            raise ArtifactStoreError(
                f"put {head.ref}: the content's digest is {actual}, the head says {head.digest}"
            )
        with self._using(writing="put"):
            self._put(head, data)

    def head(self, scope: str, ref: str) -> ArtifactHead | None:
        """The live artifact's head; None when the scope holds no such ref or it was removed."""
        scope, ref = _checked_scope(scope), _checked_ref(ref)
        if not REF_PATTERN.fullmatch(ref):
            return None
        with self._using():
            return self._head(scope, ref)

    def read(self, scope: str, ref: str) -> bytes | None:
        """The stored bytes as they are (no digest check: the verifier hashes them); None when
        the scope holds no such ref or it was removed."""
        scope, ref = _checked_scope(scope), _checked_ref(ref)
        if not REF_PATTERN.fullmatch(ref):
            return None
        with self._using():
            return self._read(scope, ref)

    def tombstone(self, scope: str, ref: str) -> Tombstone | None:
        """The tombstone of a removed artifact; None when the ref is live or unknown."""
        scope, ref = _checked_scope(scope), _checked_ref(ref)
        if not REF_PATTERN.fullmatch(ref):
            return None
        with self._using():
            return self._tombstone(scope, ref)

    def remove(self, scope: str, ref: str, *, reason: Reason, at: int, note: str = "") -> Tombstone:
        """Delete the artifact's bytes and keep a tombstone with its head's digest and size;
        :class:`ArtifactNotFoundError` when the scope holds no live artifact ``ref``."""
        scope, ref = _checked_scope(scope), _checked_ref(ref)
        if type(reason) is not str or reason not in _REASONS:
            raise UsageError(
                f"remove: reason must be 'expired' or 'erased', not {reason!r:.80}",
                option="reason",
            )
        at = _checked_instant(at, "at")
        if not _note_ok(note):
            raise UsageError(
                f"remove: note must be text of at most {MAX_NOTE_BYTES} UTF-8 bytes",
                option="note",
            )
        with self._using(writing="removed"):
            head = self._head(scope, ref) if REF_PATTERN.fullmatch(ref) else None
            if head is None:
                raise ArtifactNotFoundError(
                    f"no live artifact {ref!r:.80} in scope {scope!r:.80} (never put there, "
                    "or removed already)"
                )
            tomb = _tomb_of(head, reason, at, note)
            self._remove_all([tomb])
            return tomb

    def list(self, scope: str) -> list[ArtifactHead]:
        """The scope's live artifacts in put order (``created_at``, then put sequence)."""
        scope = _checked_scope(scope)
        with self._using():
            return self._list(scope)

    def sweep(self, scope: str, now: int) -> builtins.list[Tombstone]:
        """Apply retention to ``scope`` at ``now``: remove every artifact whose ``expires_at``
        is at or before ``now`` (note ``ttl``), then the oldest while more than
        ``max_count`` are live (``max_count``) or their sizes add up to more than
        ``max_bytes`` (``max_bytes``). Each removal is tombstoned ``expired`` at ``now``; the
        tombstones are returned in the order of removal."""
        scope = _checked_scope(scope)
        now = _checked_instant(now, "now")
        with self._using(writing="swept"):
            self._repair(scope)
            plan = retention_plan(self._list(scope), self.retention, now)
            tombs = [_tomb_of(head, "expired", now, note) for head, note in plan]
            if tombs:
                self._remove_all(tombs)
            return tombs

    def close(self) -> None:
        """Release the backend's resources; later use is an :class:`ArtifactStoreError`.
        Closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with self._errors():
                self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tomb_of(head: ArtifactHead, reason: Reason, at: int, note: str) -> Tombstone:
    return Tombstone(
        scope=head.scope,
        ref=head.ref,
        digest=head.digest,
        size=head.size,
        reason=reason,
        at=at,
        note=note,
    )


def conflict(scope: str, ref: str, tombstoned: bool) -> ArtifactConflictError:
    state = "was removed (its tombstone stays)" if tombstoned else "is already stored"
    return ArtifactConflictError(
        f"artifact {ref} {state} in scope {scope!r:.80}: a ref is never reused; mint a new one"
    )


# -- memory ------------------------------------------------------------------------------


class MemoryArtifacts(ArtifactStore):
    """Artifacts in process memory (tests, agents run without files); lost on close."""

    def __init__(self, *, retention: Retention | None = None) -> None:
        super().__init__(retention=retention)
        #: scope -> ref -> (head, content, put sequence)
        self._live: dict[str, dict[str, tuple[ArtifactHead, bytes, int]]] = {}
        self._tombs: dict[str, dict[str, Tombstone]] = {}
        self._seq = 0

    def _put(self, head: ArtifactHead, content: bytes) -> None:
        live = self._live.setdefault(head.scope, {})
        if head.ref in live or head.ref in self._tombs.get(head.scope, {}):
            raise conflict(head.scope, head.ref, head.ref not in live)
        self._seq += 1
        live[head.ref] = (head, content, self._seq)

    def _entry(self, scope: str, ref: str) -> tuple[ArtifactHead, bytes, int] | None:
        return self._live.get(scope, {}).get(ref)

    def _head(self, scope: str, ref: str) -> ArtifactHead | None:
        entry = self._entry(scope, ref)
        return entry[0] if entry else None

    def _read(self, scope: str, ref: str) -> bytes | None:
        entry = self._entry(scope, ref)
        return entry[1] if entry else None

    def _tombstone(self, scope: str, ref: str) -> Tombstone | None:
        return self._tombs.get(scope, {}).get(ref)

    def _remove_all(self, tombs: Sequence[Tombstone]) -> None:
        for tomb in tombs:
            del self._live[tomb.scope][tomb.ref]
            self._tombs.setdefault(tomb.scope, {})[tomb.ref] = tomb

    def _list(self, scope: str) -> list[ArtifactHead]:
        entries = self._live.get(scope, {}).values()
        return [head for head, _, _ in sorted(entries, key=lambda e: order_key(e[0], e[2]))]

    def _close(self) -> None:
        self._live.clear()
        self._tombs.clear()


# -- opening -----------------------------------------------------------------------------


def open_artifacts(
    location: str | os.PathLike[str] | ArtifactStore,
    *,
    readonly: bool = False,
    retention: Retention | None = None,
) -> ArtifactStore:
    """An artifact store from what a user names: an :class:`ArtifactStore` is itself (a
    ``retention`` that differs from its own is refused); an existing directory is a
    :class:`~agentfootprint.store.artifacts_file.FileArtifacts`, an existing file a
    :class:`~agentfootprint.store.artifacts_sqlite.SqliteArtifacts`. A path that does not
    exist is created (unless ``readonly``): a directory when it ends with a separator or has
    no suffix (``artifacts/``, ``artifacts``), else an SQLite file (``artifacts.db``).
    ``readonly`` never creates, migrates or changes anything: a missing path is a
    :class:`~agentfootprint.errors.FileError` naming it."""
    if isinstance(location, ArtifactStore):
        if retention is not None and retention != location.retention:
            raise UsageError(
                f"open_artifacts: retention={retention!r} given with a store whose retention "
                f"is {location.retention!r}: set it on the store you built",
                option="retention",
            )
        return location
    if not isinstance(location, str | os.PathLike):
        raise UsageError(
            "open_artifacts: expected a path (a directory or an SQLite file) or an "
            f"ArtifactStore, got {location!r:.80}",
            option="artifacts",
        )
    text = os.fspath(location)
    if not isinstance(text, str) or not text or "\0" in text:
        raise UsageError(
            f"open_artifacts: {location!r:.80} is not a path (a non-empty str without NUL)",
            option="artifacts",
        )
    from agentfootprint.store.artifacts_file import FileArtifacts
    from agentfootprint.store.artifacts_sqlite import SqliteArtifacts

    path = Path(text)
    if os.path.isdir(path):
        return FileArtifacts(path, retention=retention, readonly=readonly)
    if os.path.lexists(path):
        return SqliteArtifacts(path, retention=retention, readonly=readonly)
    if readonly:
        raise FileError(
            f"{text}: no such artifact store (nothing at that path); it was not created "
            "(opened read-only)",
            path=text,
        )
    if text.endswith(("/", os.sep)) or not path.suffix:
        return FileArtifacts(path, retention=retention)
    return SqliteArtifacts(path, retention=retention)
