"""Export bundles: runs' events as stored, in one file an auditor verifies offline.

A bundle is UTF-8 JSON Lines (docs/log-format.md, section 13):

1. a manifest line: ``{"agentfootprint_bundle": 1, "format", "canon", "hash", "library",
   "runs": [{"run_id", "conversation_id", "parent_run_id", "opened_at", "events",
   "last_type", "head", "policy_digest", "requested"}], "policies": {digest: policy},
   "counts": {"runs", "events"}}``; version 2 adds a signed ``checkpoint`` note and, per
   run, its ``inclusion`` proof under it (null without a seal: section 13.4,
   :mod:`agentfootprint.verify.bundle_proofs`). What differs by version is read from its
   :class:`~agentfootprint.verify.bundle_versions.BundleShape`;
2. one line per event, runs in dependency order (a parent before its children), each
   run's rows together and in seq order: ``{"run", "seq", "type", "ts", "body",
   "event_hash", "chain_hash"}`` where ``body`` is the stored canonical body as a JSON
   string (its UTF-8 bytes are exactly the hashed bytes) and hashes are lowercase hex;
3. a trailer line: ``{"end": true, "events": n, "sha256": hex}``, the SHA-256 of every
   byte before the trailer, so a cut or spliced file is refused before verification.

Memory is bounded by the size limit, never by the file: no line may exceed
``limits.MAX_BUNDLE_LINE_BYTES`` (so a reader holds at most one bounded line), opening is one
streaming pass that keeps only each run's place in the file, and writing reads each run
from its source while it writes it. Salts and disclosures are never in a bundle.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, overload

from agentfootprint.errors import (
    NewerVersionError,
    RunNotFoundError,
    UsageError,
    VerificationError,
)
from agentfootprint.local_files import open_regular
from agentfootprint.logformat import limits
from agentfootprint.logformat.chain import open_body, stored_kind
from agentfootprint.logformat.rows import StoredEvent
from agentfootprint.logformat.runs import RunInfo
from agentfootprint.verify.bundle_json import (
    _ROW_KEYS,
    _checked_values,
    _file_error,
    _hex,
    _LineError,
    _members,
    _no_constant,
    _no_duplicates,
    _no_lone_surrogates,
    _parse,
    _safe_int,
    _sound_text,
    _text_of,
    _written_members,
    _written_row,
)
from agentfootprint.verify.bundle_proofs import InclusionClaim, check_note_text, claim_of
from agentfootprint.verify.bundle_versions import (
    BUNDLE_SHAPES,
    BUNDLE_VERSION,
    BUNDLE_VERSIONS,
    MANIFEST_HEADER,
    BundleShape,
    UnknownBundleVersion,
    bundle_shape,
    listed_versions,
)

__all__ = [
    "BUNDLE_MAGIC",
    "BundleIndexEntry",
    "BundleSource",
    "is_bundle",
]


#: how a version 1 bundle begins (a version 2 bundle begins with ...":2)
BUNDLE_MAGIC = b'{"agentfootprint_bundle":1'
#: how every bundle version begins (the version number follows)
_PREFIX = b'{"agentfootprint_bundle":'
_INDEXED = ("run_id", "conversation_id", "parent_run_id", "opened_at")
#: a run entry's members, by whether it has an inclusion (which the manifest's version must
#: then call for): an entry is checked as it is parsed, before the version is known
_ENTRY_KEYS_OF = {shape.entry_inclusion: shape.entry_keys for shape in BUNDLE_SHAPES}
_ENTRY_KEY_SETS = tuple(_ENTRY_KEYS_OF.values())
_TRAILER_KEYS = frozenset({"end", "events", "sha256"})
#: the version number right after the prefix (a JSON integer, then what may follow it)
_VERSION = re.compile(rb"(0|[1-9][0-9]{0,17})(?:[,}\s]|\Z)")
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: how much of a run's lines is read at once when they are read again
_BLOCK = 1 << 18


@dataclass(frozen=True, kw_only=True, slots=True)
class BundleIndexEntry:
    """One run of the manifest as written (values uncoerced): the bundle's run index, which
    whole-file verification compares with the events, like a database's ``runs`` table."""

    run_id: Any
    conversation_id: Any
    parent_run_id: Any
    opened_at: Any


def _path_argument(value: Any, name: str, call: str) -> Path:
    """A path argument as a Path, or a UsageError naming the argument."""
    if isinstance(value, str | os.PathLike) and not isinstance(value, bytes):
        path = os.fspath(value)
        if isinstance(path, str) and "\x00" not in path:
            return Path(path)
    raise UsageError(
        f"{call}() argument {name!r} must be a file path (str or os.PathLike), not "
        f"{type(value).__name__} {value!r:.60}",
        option=name,
    )


def is_bundle(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts like a bundle of any version (``{"agentfootprint_bundle":``;
    a database starts ``SQLite format 3``): opening it then says whether it is one.

    A path that cannot be read (missing, a folder, no permission) is a :class:`FileError`.
    """
    checked = _path_argument(path, "path", "is_bundle")
    try:
        with open_regular(checked) as handle:  # a FIFO or a device is refused, never read
            return handle.read(len(_PREFIX)) == _PREFIX
    except OSError as exc:
        raise _file_error(exc, checked, "read") from exc


# -- parsing one line -------------------------------------------------------------------------


#: an entry without an inclusion member (of a version whose entries carry none)
_NO_MEMBER = "absent"


class _Entry(NamedTuple):
    """A manifest run entry that passed its checks: what the run's rows are held to."""

    run_id: str
    events: int
    head: bytes
    requested: bool
    #: its claimed place in the log (a version whose entries carry it), None without a
    #: seal, or _NO_MEMBER
    inclusion: InclusionClaim | str | None = _NO_MEMBER


def _entry_or_object(pairs: list[tuple[str, Any]]) -> Any:
    """Each object of the manifest as it is parsed: a sound run entry becomes a small
    :class:`_Entry` at once (so the entries of a large manifest are never all dicts);
    anything else stays an object, to be judged where it stands."""
    found = _no_duplicates(pairs)
    if found.keys() in _ENTRY_KEY_SETS:
        with contextlib.suppress(_LineError):
            return _expected_of(found)
    return found


def _index_or_object(pairs: list[tuple[str, Any]]) -> Any:
    found = _no_duplicates(pairs)
    if found.keys() in _ENTRY_KEY_SETS:
        return BundleIndexEntry(**{name: found[name] for name in _INDEXED})
    return found


_MANIFEST_DECODER = json.JSONDecoder(
    object_pairs_hook=_entry_or_object, parse_constant=_no_constant
)
_INDEX_DECODER = json.JSONDecoder(object_pairs_hook=_index_or_object, parse_constant=_no_constant)


def _row_of(item: Any) -> StoredEvent:
    """An event line's members as a row, or :class:`_LineError` saying which is wrong."""
    item = _members(item, _ROW_KEYS, "the line")
    run, seq, type_, ts, body = (item[k] for k in ("run", "seq", "type", "ts", "body"))
    if not _sound_text(run):
        raise _LineError(f"run is {stored_kind(run)}, not a string")
    for name, number in (("seq", seq), ("ts", ts)):
        if not _safe_int(number):
            raise _LineError(f"{name} is not an integer within +-(2**53 - 1)")
    if not _sound_text(type_):
        raise _LineError(f"type is {stored_kind(type_)}, not a string")
    if type(body) is not str:
        raise _LineError(f"body is {stored_kind(body)}, not a string")
    try:
        data = body.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _LineError("body holds a lone surrogate, not Unicode text") from exc
    event, chain = _hex(item["event_hash"]), _hex(item["chain_hash"])
    if event is None or chain is None:
        raise _LineError("event_hash and chain_hash must be 64 lowercase hex digits")
    return StoredEvent(
        run_id=run, seq=seq, type=type_, ts=ts, body=data, event_hash=event, chain_hash=chain
    )


def _expected_of(item: Any) -> _Entry:
    """A manifest run entry checked: ``(run_id, events, head, requested, inclusion)``
    (which version's members it must have is checked with the manifest's version)."""
    keys = _ENTRY_KEYS_OF[type(item) is dict and "inclusion" in item]
    item = _members(item, keys, "a manifest run entry")
    if not _sound_text(item["run_id"]):
        raise _LineError(f"a run entry's run_id is {stored_kind(item['run_id'])}, not a string")
    run_id = item["run_id"]
    for name in ("conversation_id", "parent_run_id", "policy_digest"):
        if item[name] is not None and not _sound_text(item[name]):
            raise _LineError(f"run {run_id}: {name} is neither a string nor null")
    if not _safe_int(item["opened_at"]):
        raise _LineError(f"run {run_id}: opened_at is not an integer within +-(2**53 - 1)")
    events = item["events"]
    if not _safe_int(events) or events < 1:
        raise _LineError(f"run {run_id}: events is not a positive integer")
    if not _sound_text(item["last_type"]):
        raise _LineError(f"run {run_id}: last_type is not a string")
    head = _hex(item["head"])
    if head is None:
        raise _LineError(f"run {run_id}: head is not 64 lowercase hex digits")
    if type(item["requested"]) is not bool:
        raise _LineError(f"run {run_id}: requested is not true or false")
    if "inclusion" not in item:
        return _Entry(run_id, events, head, item["requested"])
    try:
        claim = claim_of(item["inclusion"])
    except ValueError as exc:
        raise _LineError(f"run {run_id}: {exc}") from None
    return _Entry(run_id, events, head, item["requested"], claim)


def _check_version(members: dict[str, Any]) -> BundleShape:
    try:
        return bundle_shape(members.get("agentfootprint_bundle"))
    except UnknownBundleVersion as exc:
        raise _LineError(str(exc)) from None


def _check_header(members: dict[str, Any], entries: int, shape: BundleShape) -> None:
    """The manifest's members other than ``runs`` (after :func:`_check_version`)."""
    _members(members, shape.manifest_keys, "the manifest")
    if shape.checkpoint:
        try:
            check_note_text(members["checkpoint"])
        except ValueError as exc:
            raise _LineError(str(exc)) from None
    for name, value in MANIFEST_HEADER.items():
        if members[name] != value:
            raise _LineError(f"{name} is {members[name]!r}, not {value!r}")
    if not _sound_text(members["library"]):
        raise _LineError("library is not a string")
    if type(members["runs"]) is not list:
        raise _LineError("runs is not an array")
    if type(members["policies"]) is not dict or not _no_lone_surrogates(members["policies"]):
        raise _LineError("policies is not an object of Unicode text")
    counts = _members(members["counts"], frozenset({"runs", "events"}), "counts")
    if not all(_safe_int(counts[k]) and counts[k] >= 0 for k in counts):
        raise _LineError("counts are not integers")
    if counts["runs"] != entries:
        raise _LineError(f"counts.runs is {counts['runs']} but the manifest lists {entries} runs")


# -- reading ----------------------------------------------------------------------------------


class _Span:
    """Where one run's rows are in the file, and what they showed when it was opened."""

    __slots__ = (
        "conversation_id",
        "count",
        "head",
        "last_type",
        "length",
        "line",
        "offset",
        "opened_at",
        "parent_run_id",
        "requested",
        "run_id",
        "sha",
    )

    def __init__(self, offset: int, line: int, first: StoredEvent, requested: bool) -> None:
        self.run_id = first.run_id
        self.offset, self.line, self.length, self.count = offset, line, 0, 0
        #: SHA-256 of the run's lines as checked (a hash object while they are read, then its
        #: 32 bytes): reading them again must give the same
        self.sha: Any = hashlib.sha256()
        self.opened_at = first.ts
        self.requested = requested
        self.head = first.chain_hash
        self.last_type = first.type
        body = open_body(first)
        conversation = body.get("conversation_id") if body is not None else None
        parent = body.get("parent") if body is not None else None
        self.conversation_id: str = (
            first.run_id  # a root run's: one string kept, not two
            if conversation == first.run_id
            else conversation
            if type(conversation) is str
            else ""
        )
        self.parent_run_id: str | None = (
            parent["run_id"]
            if isinstance(parent, dict) and type(parent.get("run_id")) is str
            else None
        )


class _Opening:
    """The one streaming pass that opens a bundle (framing checks, spans of the runs).

    Problems other than a line over the limit are kept (the first one), and the pass goes
    on hashing, so that a file altered without a new trailer is reported as altered.
    """

    def __init__(
        self, handle: io.BufferedReader[Any], bad: Callable[[str], VerificationError], path: Path
    ) -> None:
        self.handle, self.bad, self.path = handle, bad, path
        self.limit = limits.MAX_BUNDLE_LINE_BYTES
        self.problem: str | None = None
        self.expected: dict[str, _Entry] = {}
        self.spans: dict[str, _Span] = {}
        self.awaited: dict[str, str] = {}  # a parent not seen yet -> its first child
        self.current: _Span | None = None
        self.current_id: str | None = None
        self.events = 0
        self.library = ""
        self.version = 0
        #: a version with a checkpoint: its note, and each run's claimed inclusion under it
        self.checkpoint: bytes | None = None
        self.claims: dict[str, InclusionClaim | None] = {}
        self.counts: dict[str, Any] = {}
        self.order: Iterator[_Entry] = iter(())

    def fail(self, reason: str) -> None:
        if self.problem is None:
            self.problem = reason

    def line(self, number: int, head: bytes = b"") -> bytes:
        line = head + self.handle.readline(self.limit + 1 - len(head))
        if len(line) > self.limit and not line.endswith(b"\n"):
            raise self.bad(
                f"line {number} is longer than the limit of {self.limit} bytes "
                "(docs/log-format.md, size limits): refused without reading it whole"
            )
        return line

    def run(self) -> None:
        head = self.handle.read(len(_PREFIX))
        if head != _PREFIX:
            raise self.bad("not an agentfootprint bundle (no manifest line)")
        version = _VERSION.match(self.handle.peek(20)[:20])
        if version is not None and int(version[1]) > BUNDLE_VERSION:
            raise NewerVersionError(  # not judged at all: like a newer schema version
                f"bundle {self.path} is of version {int(version[1])}, newer than the version "
                f"{BUNDLE_VERSION} this reader knows: upgrade agentfootprint to read it",
                path=str(self.path),
            )
        if version is None or int(version[1]) not in BUNDLE_VERSIONS:
            self.fail(
                'the manifest is malformed: it does not begin with {"agentfootprint_bundle": '
                f"and the version {listed_versions('or')} followed by ',' or '}}' (the bytes a "
                "bundle begins with)"
            )
        size = os.fstat(self.handle.fileno()).st_size  # the last line is the trailer
        manifest = self.line(1, head)
        offset, number = len(manifest), 1
        if not manifest.endswith(b"\n") or offset >= size:
            raise self.bad("the bundle is truncated (it does not end with its trailer)")
        digest = hashlib.sha256(manifest)
        try:
            text = _text_of(manifest)
        except _LineError as exc:
            self.fail(f"the manifest is malformed: {exc}")
        else:
            del manifest  # the text alone while it is parsed
            self.manifest(text)
            del text
        while True:
            number += 1
            line = self.line(number)
            if not line or offset + len(line) >= size:
                break
            digest.update(line)
            if self.problem is None:
                self.row(number, offset, line)
            offset += len(line)
            self.events += 1
            line = b""  # one line held at a time, not two
        if self.current is not None and not isinstance(self.current.sha, bytes):
            self.current.sha = self.current.sha.digest()
        self.trailer(line, digest.hexdigest())

    def manifest(self, text: str) -> None:
        try:
            members = _parse(text, _MANIFEST_DECODER)
            if type(members) is not dict:
                raise _LineError("it is not a JSON object")
            shape = _check_version(members)  # before what a later version may write
            if type(members.get("runs")) is list:
                for item in members["runs"]:
                    entry = item if type(item) is _Entry else _expected_of(item)  # says why
                    if entry.run_id in self.expected:
                        raise _LineError(f"it lists run {entry.run_id} twice")
                    if (entry.inclusion != _NO_MEMBER) != shape.entry_inclusion:
                        raise _LineError(
                            f"run {entry.run_id}: a version {shape.version} run entry "
                            + (
                                "has no member inclusion"
                                if shape.entry_inclusion
                                else "has no inclusion"
                            )
                        )
                    self.expected[entry.run_id] = entry
                members["runs"] = []
            _check_header(members, len(self.expected), shape)
        except _LineError as exc:
            self.fail(f"the manifest is malformed: {exc} (docs/log-format.md, bundles)")
            return
        self.version = shape.version
        if shape.checkpoint:
            self.checkpoint = members["checkpoint"].encode("utf-8")
        if shape.entry_inclusion:
            for entry in self.expected.values():
                assert entry.inclusion != _NO_MEMBER
                self.claims[entry.run_id] = entry.inclusion  # type: ignore[assignment]
        self.counts = members["counts"]
        self.library = members["library"]
        self.order = iter(self.expected.values())

    def row(self, number: int, offset: int, line: bytes) -> None:
        item = _written_members(line)
        written = None if item is None else _written_row(item)
        try:
            if written is None:  # the strict parser and every check, to say what is wrong
                row = _row_of(_parse(line) if item is None else item)
                written = row.run_id, row.type, row.chain_hash
            if written[0] != self.current_id:
                self.start_run(number, offset, _row_of(_parse(line) if item is None else item))
                if self.problem is not None:
                    return
        except _LineError as exc:
            self.fail(f"line {number} is not an event row ({exc})")
            return
        span = self.current
        assert span is not None
        span.count += 1
        span.length += len(line)
        span.sha.update(line)
        span.head, span.last_type = written[2], sys.intern(written[1])

    def start_run(self, number: int, offset: int, row: StoredEvent) -> None:
        run_id = row.run_id
        if run_id in self.spans:
            self.fail(
                f"line {number}: the rows of run {run_id} are not together (they resume "
                "after another run's rows)"
            )
            return
        expected = next(self.order, None)
        if run_id not in self.expected:
            self.fail(f"line {number} holds rows of run {run_id}, which the manifest does not list")
            return
        if expected is None or expected.run_id != run_id:
            self.fail(
                f"the manifest lists its runs in another order than the bundle's rows (run "
                f"{run_id} starts at line {number})"
            )
            return
        if run_id in self.awaited:
            self.fail(
                f"run {run_id} (line {number}) comes after its child {self.awaited[run_id]}: "
                "a bundle holds a parent's rows before its children's"
            )
            return
        span = _Span(offset, number, row, expected.requested)
        parent = span.parent_run_id
        if parent in self.spans:
            span.parent_run_id = self.spans[parent].run_id  # one string kept, not two
        elif parent is not None and parent != run_id:
            self.awaited.setdefault(parent, run_id)
        if self.current is not None:
            self.current.sha = self.current.sha.digest()
        self.spans[run_id] = self.current = span
        self.current_id = run_id

    def finish(self) -> None:
        """Each run's rows as many as the manifest says, ending at its head; every run it
        lists present (checked once all rows are read, so a run's rows resumed after
        another's are reported as that)."""
        for run_id, span in self.spans.items():
            if self.problem is not None:
                return
            entry = self.expected[run_id]
            if (span.count, span.head) != (entry.events, entry.head):
                self.fail(
                    f"run {run_id}: the manifest's event count or head differs from the rows "
                    "the bundle holds"
                )
        if self.problem is None and len(self.spans) != len(self.expected):
            missing = next(run_id for run_id in self.expected if run_id not in self.spans)
            self.fail(f"run {missing}: the manifest lists it but the bundle holds no rows of it")

    def trailer(self, line: bytes, digest: str) -> None:
        if not line.endswith(b"\n"):
            raise self.bad("the bundle is truncated (it does not end with its trailer)")
        try:
            trailer = _members(_parse(line), _TRAILER_KEYS, "the last line")
            if trailer["end"] is not True or not _safe_int(trailer["events"]):
                raise _LineError("it is not the trailer")
        except _LineError as exc:
            raise self.bad(
                f"the bundle is truncated or damaged (its last line is not the trailer: {exc})"
            ) from exc
        if trailer["sha256"] != digest:
            raise self.bad(
                "the bundle's bytes do not match its trailer digest (it was "
                "altered, cut or spliced)"
            )
        self.finish()
        if self.problem is not None:
            raise self.bad(self.problem)
        if trailer["events"] != self.events or self.counts["events"] != self.events:
            raise self.bad(
                f"the bundle holds {self.events} events but its trailer or manifest counts differ"
            )


class _RunRows(Sequence[tuple[Any, ...]]):
    """One run's rows of an open bundle as a sequence that reads them from the file each
    time it is iterated (memory holds one block, never the run)."""

    __slots__ = ("_run_id", "_source", "_span")

    def __init__(self, source: BundleSource, run_id: str, span: _Span) -> None:
        self._source, self._run_id, self._span = source, run_id, span

    def __len__(self) -> int:
        return self._span.count

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self._source._values(self._run_id, self._span, 0)

    @overload
    def __getitem__(self, index: int) -> tuple[Any, ...]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[Any, ...]]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return list(self)[index]
        position = range(self._span.count)[index]  # IndexError out of range
        found: Any = None
        for at, row in enumerate(self):  # to the end: the run's bytes checked whole
            if at == position:
                found = row
        return found


class BundleSource:
    """A bundle opened for verification: ``read(run_id)`` like a store, plus ``run_ids()``,
    ``index_entries()``, ``runs()`` and ``run_info()``.

    Opening is one streaming pass over the file that checks its framing (section 13.2:
    manifest, trailer, byte digest, counts, each run's rows together, in dependency order
    and as the manifest lists them) and raises :class:`VerificationError` with code
    ``bundle`` on the first problem; the events themselves are checked by the verifier. It
    keeps only where each run's rows are: ``read`` parses them again, lazily, from the file,
    which stays open until :meth:`close` (a context manager closes it). The file must not
    change while it is open: a row read back that is not what opening saw fails with code
    ``bundle``. A missing, unreadable or folder path is a :class:`FileError`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = _path_argument(path, "path", "BundleSource")
        try:
            self._handle = open_regular(self.path, buffer_size=1 << 16)  # no FIFO, no device
        except OSError as exc:
            raise _file_error(exc, self.path, "read") from exc
        self._lock = threading.Lock()
        self._limit = limits.MAX_BUNDLE_LINE_BYTES
        try:
            opening = _Opening(self._handle, self._bad, self.path)
            opening.run()
        except OSError as exc:
            self._handle.close()
            raise _file_error(exc, self.path, "read") from exc
        except BaseException:
            self._handle.close()
            raise
        self._spans = opening.spans
        #: the ``library`` member of the manifest (who wrote the bundle, as it says)
        self.library: str = opening.library
        #: the bundle's version (1, or 2 with a checkpoint)
        self.version: int = opening.version
        #: the signed checkpoint note the manifest carries (its bytes; version 2), else None
        self.checkpoint_note: bytes | None = opening.checkpoint
        self._claims = opening.claims

    def _bad(self, reason: str) -> VerificationError:
        return VerificationError("", None, reason, code="bundle", where=f"bundle {self.path}")

    def _changed(self, line: int) -> VerificationError:
        return self._bad(
            f"line {line} is not what it was when the bundle was opened: the file changed "
            "while it was open (a bundle must not change while it is read)"
        )

    def _line_at(self, offset: int, number: int) -> bytes:
        with self._lock:
            if self._handle.closed:
                raise UsageError(f"bundle {self.path} is closed")
            try:
                self._handle.seek(offset)
                line = self._handle.readline(self._limit + 1)
            except OSError as exc:
                raise _file_error(exc, self.path, "read") from exc
        if not line.endswith(b"\n"):
            raise self._changed(number)
        return line

    def _span(self, run_id: str) -> _Span:
        span = self._spans.get(run_id) if type(run_id) is str else None
        if span is None:
            raise RunNotFoundError(f"no run {run_id!r} in bundle {self.path}")
        return span

    def read(self, run_id: str, *, start: int = 0) -> Iterator[StoredEvent]:
        """The run's rows from position ``start`` on, parsed from the file as they are
        consumed; :class:`RunNotFoundError` for a run the bundle does not hold."""
        rows = self._values(run_id, self._span(run_id), start)
        return map(StoredEvent.of_values, rows)

    def chain_rows(self, run_id: str) -> Sequence[tuple[Any, ...]]:
        """The run's rows as the verifier's loop takes them (the 7 values of each row
        ``read`` yields, no row object): a sequence read from the file each time it is
        iterated, never held whole. :class:`RunNotFoundError` for a run it does not hold."""
        return _RunRows(self, run_id, self._span(run_id))

    def _values(self, run_id: str, span: _Span, start: int) -> Iterator[tuple[Any, ...]]:
        """The lines were checked line by line when the bundle was opened and their SHA-256
        kept: read again (in blocks, each hashed whole), they are parsed the fast way, and
        the iteration fails (before it ends, so no verification of the run completes) unless
        they are as many lines as then and their bytes hash the same. The lock is held per
        block, never across a yield, so runs can be read interleaved."""
        offset, end = span.offset, span.offset + span.length
        sha = hashlib.sha256()
        tail = b""  # a line begun in an earlier block
        index = 0
        while offset < end:
            block = self._block_at(offset, min(_BLOCK, end - offset))
            if not block:
                break
            offset += len(block)
            sha.update(block)
            lines = block.split(b"\n")
            if tail:
                lines[0] = tail + lines[0]
            tail = lines.pop()
            if len(tail) > self._limit or index + len(lines) > span.count:
                raise self._changed(span.line + min(index + len(lines), span.count - 1))
            for line in lines:
                if index >= start:
                    row = _checked_values(line)
                    if row is None or row[0] != run_id:
                        raise self._changed(span.line + index)
                    yield row
                index += 1
        if tail or index != span.count or offset != end or sha.digest() != span.sha:
            raise self._changed(span.line + min(index, span.count - 1))

    def _block_at(self, offset: int, size: int) -> bytes:
        with self._lock:
            if self._handle.closed:
                raise UsageError(f"bundle {self.path} is closed")
            try:
                self._handle.seek(offset)
                return self._handle.read(size)
            except OSError as exc:
                raise _file_error(exc, self.path, "read") from exc

    def run_ids(self) -> list[str]:
        """Every run the bundle's event lines hold, in file order (never the manifest's)."""
        return list(self._spans)

    def index_entries(self) -> list[BundleIndexEntry]:
        """The manifest's run list as written: the bundle's run index (read again from the
        file; opening already checked that it lists the same runs, counts and heads)."""
        try:
            entries = _parse(self._line_at(0, 1), _INDEX_DECODER)["runs"]
            if not all(type(entry) is BundleIndexEntry for entry in entries):
                raise TypeError
        except (_LineError, KeyError, TypeError):
            raise self._changed(1) from None
        return list(entries)

    def _info(self, run_id: str, span: _Span) -> RunInfo:
        return RunInfo(
            run_id=run_id,
            conversation_id=span.conversation_id,
            parent_run_id=span.parent_run_id,
            opened_at=span.opened_at,
            events=span.count,
            last_type=span.last_type,
            head=span.head,
            requested=span.requested,
        )

    def runs(self) -> list[RunInfo]:
        """Every run in the bundle, in file order (parents before children)."""
        return [self._info(run_id, span) for run_id, span in self._spans.items()]

    def run_info(self, run_id: str) -> RunInfo:
        return self._info(run_id, self._span(run_id))

    def inclusion_of(self, run_id: str) -> InclusionClaim | None:
        """What the manifest claims of the run's leaf and proof under ``checkpoint_note``
        (None: no claim, or a version 1 bundle). Not evidence: the verifier checks it."""
        return self._claims.get(run_id)

    def close(self) -> None:
        """Release the file (reading a run afterwards is a :class:`UsageError`)."""
        with self._lock:
            self._handle.close()

    def __enter__(self) -> BundleSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
