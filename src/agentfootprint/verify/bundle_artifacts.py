"""A version 3 bundle's artifacts (docs/log-format.md section 13.5): the manifest's entries, the
framing of the artifact lines, and the bundle as an artifact source.

The manifest's ``artifacts`` lists, per artifact the exported runs minted, its scope, ref, the
run and seq of the first event that minted it, the digest and size that event records and what
the exporter found (``ok``, ``expired``, ``erased``, ``missing``, ``withheld``). After the event
lines, the bytes of each ``ok`` entry follow in artifact lines ``{"artifact", "offset",
"data"}`` (standard base64, at most 32 MiB a line), in the manifest's order, each line at the
offset where the one before ended. Opening checks that framing one line at a time
(:class:`ArtifactFraming`) and hashes each entry's bytes as its lines go by, so no artifact is
ever held whole to open a bundle; :class:`BundleArtifacts` reads an entry's lines again, in
order, when its bytes are asked for. Whether the bytes are the ones a run recorded is not
framing: it is judged per artifact, against the verified runs' minted events (the audit
layer's check; the rules are section 13.5's).
"""

from __future__ import annotations

import binascii
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, cast, get_args

from agentfootprint.errors import VerificationError
from agentfootprint.logformat.canonical import parse
from agentfootprint.logformat.hashing import domain_prefix, is_hex_digest
from agentfootprint.verify.bundle_json import _LineError, _members, _parse, _safe_int, _sound_text

__all__ = [
    "CHUNK_BYTES",
    "MINTED",
    "ArtifactEntry",
    "BundleArtifacts",
    "BundleTombstone",
    "MintedArtifact",
    "minted_artifacts",
]

#: the most bytes one artifact line carries (section 13.5)
CHUNK_BYTES: Final = 32 * 1024 * 1024
#: the event that records an artifact (docs/artifacts.md)
MINTED: Final = "agentfootprint.artifacts.minted"
_MINTED_NAME: Final = b'"agentfootprint.artifacts.minted"'
Status = Literal["ok", "expired", "erased", "missing", "withheld"]
_STATUSES: Final = frozenset(get_args(Status))
_ENTRY_KEYS: Final = frozenset(
    {"scope", "ref", "run_id", "seq", "digest", "bytes", "status", "removed"}
)
_REMOVED_KEYS: Final = frozenset({"at", "note"})
#: the statuses whose entry says when and why the store removed the bytes
REMOVED: Final = frozenset({"expired", "erased"})
_LINE_KEYS: Final = frozenset({"artifact", "offset", "data"})
#: how an artifact line as this library writes it begins (any other is parsed to find out)
CHUNK_PREFIX: Final = b'{"artifact":'
#: an artifact line exactly as this library writes it (what ``orjson.dumps`` writes of it)
_WRITTEN: Final = re.compile(
    rb'\{"artifact":(0|[1-9][0-9]{0,15}),"offset":(0|[1-9][0-9]{0,15}),'
    rb'"data":"([A-Za-z0-9+/]*={0,2})"\}\n'
)
#: an artifact ref (the store's ``REF_PATTERN``; docs/artifacts.md), matched whole
_REF: Final = re.compile(r"art_[0-9A-Za-z]{22}")
#: the longest ``data`` text a line may carry: the base64 of CHUNK_BYTES
_MAX_DATA_CHARS: Final = 4 * -(-CHUNK_BYTES // 3)


class ArtifactEntry(NamedTuple):
    """One entry of the manifest's ``artifacts``, checked (section 13.5)."""

    scope: str
    ref: str
    run_id: str
    seq: int
    digest: str
    bytes: int
    status: Status
    #: for ``expired`` and ``erased``: the tombstone's ``at`` (unix ms) and ``note``
    removed: tuple[int, str] | None


def check_entries(value: Any, listed: Mapping[str, int]) -> list[ArtifactEntry]:
    """The manifest's ``artifacts`` checked member by member (``listed``: the runs the
    manifest lists); :class:`_LineError` names the first entry that is not as section 13.5
    says, or a scope and ref listed twice."""
    if type(value) is not list:
        raise _LineError("artifacts is not an array")
    entries: list[ArtifactEntry] = []
    seen: set[tuple[str, str]] = set()
    for at, item in enumerate(value):
        what = f"artifact entry {at}"
        item = _members(item, _ENTRY_KEYS, what)
        for name in ("scope", "ref", "run_id"):
            if not _sound_text(item[name]):
                raise _LineError(f"{what}: {name} is not a string")
        if not (_safe_int(item["seq"]) and item["seq"] >= 0):
            raise _LineError(f"{what}: seq is not an integer >= 0")
        if not (_safe_int(item["bytes"]) and item["bytes"] >= 0):
            raise _LineError(f"{what}: bytes is not an integer >= 0")
        if not is_hex_digest(item["digest"]):
            raise _LineError(f"{what}: digest is not 64 lowercase hex digits")
        if type(item["status"]) is not str or item["status"] not in _STATUSES:
            raise _LineError(f"{what}: status is not one of {', '.join(sorted(_STATUSES))}")
        removed = _removed_of(item["removed"], item["status"], what)
        if item["run_id"] not in listed:
            raise _LineError(f"{what} names run {item['run_id']}, which the manifest does not list")
        key = (item["scope"], item["ref"])
        if key in seen:
            raise _LineError(f"{what} lists scope {key[0]!r} and ref {key[1]!r} a second time")
        seen.add(key)
        entries.append(
            ArtifactEntry(
                item["scope"],
                item["ref"],
                item["run_id"],
                item["seq"],
                item["digest"],
                item["bytes"],
                cast(Status, item["status"]),
                removed,
            )
        )
    return entries


def _removed_of(value: Any, status: str, what: str) -> tuple[int, str] | None:
    """An entry's ``removed``: an object ``{"at", "note"}`` exactly for ``expired`` and
    ``erased``, else null."""
    if status not in REMOVED:
        if value is not None:
            raise _LineError(f"{what}: removed is not null (its status is {status})")
        return None
    value = _members(value, _REMOVED_KEYS, f"{what}'s removed")
    if not (_safe_int(value["at"]) and value["at"] >= 0):
        raise _LineError(f"{what}: removed.at is not an integer >= 0")
    if not _sound_text(value["note"]):
        raise _LineError(f"{what}: removed.note is not a string")
    return value["at"], value["note"]


# -- the artifact lines -----------------------------------------------------------------------


def _chunk_of(line: bytes) -> tuple[Any, Any, Any]:
    """``(artifact, offset, data)`` of an artifact line (its members unchecked), or
    :class:`_LineError`. A line as this library writes it (:data:`_WRITTEN`) is read from
    its bytes, ``data`` as a view of them: no JSON parser holds a line of a megabyte many
    times over, and both read such a line alike (its numbers have no leading zero, its text
    no escape). Any other line is parsed by the strict parser, which says what is wrong."""
    written = _WRITTEN.fullmatch(line)
    if written is not None:
        start, end = written.span(3)
        return int(written[1]), int(written[2]), memoryview(line)[start:end]
    item = _members(_parse(line), _LINE_KEYS, "the line")
    return item["artifact"], item["offset"], item["data"]


def is_artifact_line(line: bytes) -> bool:
    """Whether a line of a version 3 bundle is an artifact line: a JSON object with a member
    named ``artifact`` (section 13.5). A line as this library writes it is told by its first
    bytes; any other is parsed (a line that is no JSON object is none)."""
    if line.startswith(CHUNK_PREFIX):
        return True
    try:
        item = _parse(line)
    except _LineError:
        return False
    return type(item) is dict and "artifact" in item


def decoded(data: Any) -> bytes | None:
    """The bytes a line's ``data`` carries (its text, or the bytes of a written line's):
    1 to CHUNK_BYTES bytes in canonical standard base64 (padded, nothing else, the unused
    bits zero); None for anything else."""
    if type(data) is str:
        if not data.isascii():
            return None
        data = data.encode("ascii")
    elif type(data) is not memoryview:
        return None
    if not data or len(data) > _MAX_DATA_CHARS:
        return None
    try:
        raw = binascii.a2b_base64(data, strict_mode=True)
    except binascii.Error:
        return None
    if not raw or binascii.b2a_base64(raw, newline=False) != data:
        return None
    return raw


class _Placed(NamedTuple):
    """Where an ``ok`` entry's lines are, and what opening saw of them."""

    offset: int  # the file offset of its first line
    line: int  # that line's number
    length: int  # its lines' bytes
    lines: int  # how many
    sha: bytes  # SHA-256 of its lines as read
    content: bytes  # H("artifact", its bytes)


def _content_hash() -> Any:
    return hashlib.sha256(domain_prefix("artifact"))


class ArtifactFraming:
    """The opening pass's view of the artifact lines (section 13.5): each line must be the
    next chunk the entries call for. Its bytes are hashed as they go by; only each entry's
    place and digests are kept."""

    def __init__(self, entries: list[ArtifactEntry]) -> None:
        self.entries = entries
        #: the ok entries that carry bytes, in the manifest's order: the lines' order
        self._awaited = [at for at, entry in enumerate(entries) if entry.status == "ok"]
        self._next = 0  # the index in _awaited of the entry being read
        self._at = 0  # the offset its lines reached
        self.begun = False
        self.placed: dict[int, _Placed] = {}
        self._start = (0, 0)
        self._count = self._length = 0
        self._sha = hashlib.sha256()
        self._content = _content_hash()
        self._skip_empty()

    def _skip_empty(self) -> None:
        """Entries of 0 bytes have no lines: placed at once."""
        while self._next < len(self._awaited):
            at = self._awaited[self._next]
            if self.entries[at].bytes:
                return
            self.placed[at] = _Placed(
                0, 0, 0, 0, hashlib.sha256().digest(), _content_hash().digest()
            )
            self._next += 1

    def line(self, number: int, offset: int, line: bytes) -> str | None:
        """One artifact line (``offset``: where it starts in the file); the reason it is not
        the chunk the entries call for, else None."""
        self.begun = True
        try:
            index, at, data = _chunk_of(line)
        except _LineError as exc:
            return f"line {number} is not an artifact line ({exc})"
        if not (_safe_int(index) and 0 <= index < len(self.entries)):
            return f"line {number}: artifact is not the index of an entry of the manifest"
        if not (_safe_int(at) and at >= 0):
            return f"line {number}: offset is not an integer >= 0"
        entry = self.entries[index]
        if entry.status != "ok":
            return (
                f"line {number} carries bytes of artifact entry {index} ({entry.ref}), whose "
                f"status is {entry.status}: only an ok entry's bytes are in a bundle"
            )
        awaited = self._awaited[self._next] if self._next < len(self._awaited) else None
        if index != awaited:
            return f"line {number} carries bytes of artifact entry {index} ({entry.ref}) where " + (
                "no entry awaits more"
                if awaited is None
                else f"entry {awaited}'s are awaited (from offset {self._at}): the entries' "
                "bytes come in the manifest's order, each whole before the next"
            )
        if at != self._at:
            return (
                f"line {number}: artifact entry {index}'s bytes at offset {at}, where {self._at} "
                f"was expected ({'an overlap' if at < self._at else 'a gap'})"
            )
        raw = decoded(data)
        if raw is None:
            return (
                f"line {number}: data is not the canonical standard base64 of 1 to "
                f"{CHUNK_BYTES} bytes"
            )
        if at + len(raw) > entry.bytes:
            return f"line {number}: artifact entry {index}'s bytes run past its {entry.bytes} bytes"
        if at == 0:
            self._start = (offset, number)
            self._count = self._length = 0
            self._sha, self._content = hashlib.sha256(), _content_hash()
        self._sha.update(line)
        self._content.update(raw)
        self._count += 1
        self._length += len(line)
        self._at = at + len(raw)
        if self._at == entry.bytes:
            self.placed[index] = _Placed(
                *self._start, self._length, self._count, self._sha.digest(), self._content.digest()
            )
            self._next, self._at = self._next + 1, 0
            self._skip_empty()
        return None

    def finish(self) -> str | None:
        """Once every line is read: the ok entry whose lines end short (or are missing)."""
        if self._next >= len(self._awaited):
            return None
        at = self._awaited[self._next]
        entry = self.entries[at]
        return (
            f"artifact entry {at} ({entry.ref}) is ok but the bundle carries {self._at} of its "
            f"{entry.bytes} bytes"
        )


# -- the bundle as an artifact source ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class BundleTombstone:
    """What a bundle says of an artifact whose bytes its store no longer held (``expired`` or
    ``erased``): the store's tombstone as the entry carries it (the members of
    ``agentfootprint.store.artifacts.Tombstone``, which this layer does not import)."""

    scope: str
    ref: str
    digest: str
    size: int
    reason: Literal["expired", "erased"]
    at: int
    note: str = ""


class BundleArtifacts:
    """A version 3 bundle's artifacts as an artifact source: ``read(scope, ref)`` (the bytes an
    ``ok`` entry carries, read again from the file and checked against what opening saw) and
    ``tombstone(scope, ref)`` (for an ``expired`` or ``erased`` entry), the two reads the
    per-artifact check makes of a store. A ``missing`` or ``withheld`` entry, or none, gives
    None from both: :meth:`entry` says which. :meth:`content_digest` is ``H("artifact", ·)``
    of an ``ok`` entry's bytes as opening hashed them, so a check need not read them."""

    def __init__(
        self,
        entries: Sequence[ArtifactEntry],
        placed: Mapping[int, _Placed],
        line_at: Callable[[int], bytes],
        changed: Callable[[int], VerificationError],
    ) -> None:
        self._entries = tuple(entries)
        self._placed = dict(placed)
        self._index = {(e.scope, e.ref): at for at, e in enumerate(self._entries)}
        self._line_at, self._changed = line_at, changed

    def entries(self) -> tuple[ArtifactEntry, ...]:
        """Every entry, in the manifest's order."""
        return self._entries

    def entry(self, scope: str, ref: str) -> ArtifactEntry | None:
        """The entry of that scope and ref, or None."""
        at = self._index.get((scope, ref))
        return None if at is None else self._entries[at]

    def content_digest(self, scope: str, ref: str) -> str | None:
        """``H("artifact", bytes)`` (hex) of the bytes an ``ok`` entry carries, as opening
        hashed them; None for any other entry or none."""
        at = self._index.get((scope, ref))
        placed = None if at is None else self._placed.get(at)
        return None if placed is None else placed.content.hex()

    def chunks(self, scope: str, ref: str) -> Iterator[bytes]:
        """The bytes of an ``ok`` entry, one line's at a time, read again from the file; the
        iteration fails with code ``bundle`` (the file changed) unless its lines are what
        opening read. Nothing for any other entry."""
        at = self._index.get((scope, ref))
        placed = None if at is None else self._placed.get(at)
        if at is None or placed is None:
            return
        offset, sha, expected = placed.offset, hashlib.sha256(), 0
        for count in range(placed.lines):
            line = self._line_at(offset)
            offset += len(line)
            sha.update(line)
            try:
                index, where, data = _chunk_of(line)
            except _LineError:
                raise self._changed(placed.line + count) from None
            raw = decoded(data)
            if index != at or where != expected or raw is None:
                raise self._changed(placed.line + count)
            expected += len(raw)
            yield raw
        if offset - placed.offset != placed.length or sha.digest() != placed.sha:
            raise self._changed(placed.line)

    def read(self, scope: str, ref: str) -> bytes | None:
        """The bytes an ``ok`` entry carries (held whole: a caller that can take them a line at
        a time uses :meth:`chunks`); None for any other entry, or none."""
        at = self._index.get((scope, ref))
        if at is None or at not in self._placed:
            return None
        return b"".join(self.chunks(scope, ref))

    def tombstone(self, scope: str, ref: str) -> BundleTombstone | None:
        """For an ``expired`` or ``erased`` entry, what the bundle says of its tombstone."""
        entry = self.entry(scope, ref)
        if entry is None or entry.removed is None:
            return None
        return BundleTombstone(
            scope=entry.scope,
            ref=entry.ref,
            digest=entry.digest,
            size=entry.bytes,
            reason="expired" if entry.status == "expired" else "erased",
            at=entry.removed[0],
            note=entry.removed[1],
        )


# -- minted events ----------------------------------------------------------------------------


class MintedArtifact(NamedTuple):
    """An ``agentfootprint.artifacts.minted`` event whose payload describes an artifact
    (section 13.5 step 1): its seq and the payload's ref, digest and bytes."""

    seq: int
    ref: str
    digest: str
    bytes: int
    payload: dict[str, Any]


def minted_payload(row_type: Any, body: Any) -> dict[str, Any] | None:
    """The payload of a row that is a minted event (an ``event`` row whose body's ``name`` is
    :data:`MINTED`), whatever its payload holds; None for any other row."""
    if row_type != "event":
        return None
    if isinstance(body, bytearray | memoryview):  # a store's row may hold a view of its bytes
        body = bytes(body)
    if type(body) is not bytes or _MINTED_NAME not in body:
        return None
    try:
        value = parse(body)
    except (ValueError, RecursionError):
        return None
    if type(value) is not dict or value.get("name") != MINTED:
        return None
    payload = value.get("payload")
    return payload if type(payload) is dict else {}


def describes_artifact(payload: Mapping[str, Any]) -> bool:
    """Whether a minted event's payload describes an artifact (section 13.5 step 1): string
    ``tool_call_id``, ``kind`` and ``media_type``, a ``ref`` of ``art_`` and 22 base62
    characters, a hex ``digest``, an integer ``bytes`` >= 0 and, when present, an integer
    ``expires_at`` >= 0."""
    ref, size = payload.get("ref"), payload.get("bytes")
    return (
        all(type(payload.get(name)) is str for name in ("tool_call_id", "kind", "media_type"))
        and type(ref) is str
        and _REF.fullmatch(ref) is not None
        and is_hex_digest(payload.get("digest"))
        and type(size) is int
        and size >= 0
        and ("expires_at" not in payload or _count(payload["expires_at"]))
    )


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def minted_artifacts(rows: Iterable[Sequence[Any]]) -> Iterator[MintedArtifact]:
    """The minted events among a run's rows (each ``(run, seq, type, ts, body, ...)``) whose
    payload describes an artifact, in the rows' order."""
    for row in rows:
        payload = minted_payload(row[2], row[4])
        if payload is not None and describes_artifact(payload):
            yield MintedArtifact(
                row[1], payload["ref"], payload["digest"], payload["bytes"], payload
            )
