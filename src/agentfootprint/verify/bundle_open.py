"""Opening a bundle: the one streaming pass over its file that checks its framing
(docs/log-format.md section 13.2) and finds where each run's rows are.

What the pass keeps is per run, so it is kept compactly (:class:`RunTable`: arrays, one
string per run id): a bundle of many runs costs a few hundred bytes per run, never an object
per run. The manifest line is read one run entry at a time
(:func:`~agentfootprint.verify.bundle_manifest.stream_manifest`); one that stream does not
read as the whole parse would is parsed whole, which says what is wrong. Event lines as a
writer writes them are judged by :func:`~agentfootprint.verify.bundle_json._written_event`,
any other by the strict parser and every check.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import sys
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from agentfootprint.errors import NewerVersionError, VerificationError
from agentfootprint.logformat import limits
from agentfootprint.logformat.chain import open_body, stored_kind
from agentfootprint.logformat.rows import StoredEvent
from agentfootprint.verify.bundle_artifacts import (
    CHUNK_PREFIX,
    ArtifactFraming,
    check_entries,
    is_artifact_line,
)
from agentfootprint.verify.bundle_json import (
    _ROW_KEYS,
    _hex,
    _LineError,
    _members,
    _parse,
    _safe_int,
    _sound_text,
    _text_of,
    _written_event,
    _written_members,
    _written_row,
)
from agentfootprint.verify.bundle_manifest import (
    _MANIFEST_DECODER,
    _NO_MEMBER,
    BLOCK,
    RUNS,
    NotStreamed,
    _check_header,
    _check_version,
    _Entry,
    _expected_of,
    stream_manifest,
)
from agentfootprint.verify.bundle_proofs import InclusionClaim
from agentfootprint.verify.bundle_versions import (
    BUNDLE_VERSION,
    BUNDLE_VERSIONS,
    BundleShape,
    listed_versions,
)

__all__: list[str] = []  # internal to the bundle reader

#: how every bundle version begins (the version number follows)
PREFIX: Final = b'{"agentfootprint_bundle":'
_TRAILER_KEYS = frozenset({"end", "events", "sha256"})
#: the version number right after the prefix (a JSON integer, then what may follow it)
_VERSION = re.compile(rb"(0|[1-9][0-9]{0,17})(?:[,}\s]|\Z)")


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


class RunTable:
    """The runs of a bundle by their place in it (the manifest's order, which opening holds
    the rows to): what the manifest says of each, where its rows are, and what its first
    row says. Arrays of numbers and bytes, and one string per run id (a conversation or
    parent that is a run of the bundle is that same string)."""

    __slots__ = (
        "conversations",
        "events",
        "heads",
        "ids",
        "index",
        "lengths",
        "lines",
        "offsets",
        "opened",
        "parents",
        "requested",
        "shas",
        "types",
    )

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        self.events = array("q")  # each run's rows, as many as the manifest says
        self.heads = bytearray()  # its head (32 bytes each), as the manifest says
        self.requested = bytearray()
        self.offsets = array("q")  # where its rows start in the file
        self.lengths = array("q")  # and how many bytes they are
        self.lines = array("q")  # the line number of its first row
        self.opened = array("q")  # its first row's ts
        #: SHA-256 of its lines as checked (32 bytes each): reading them again must give it
        self.shas = bytearray()
        self.types: list[str] = []  # its last row's type
        self.conversations: list[str] = []
        self.parents: list[str | None] = []

    def listed(self, entry: _Entry) -> None:
        """A manifest entry, in the manifest's order."""
        self.index[entry.run_id] = len(self.ids)
        self.ids.append(entry.run_id)
        self.events.append(entry.events)
        self.heads += entry.head
        self.requested.append(entry.requested)

    def shared(self, run_id: str) -> str:
        """The run id as this table holds it, when it holds the run (one string, not two)."""
        at = self.index.get(run_id)
        return run_id if at is None else self.ids[at]

    def head(self, at: int) -> bytes:
        return bytes(self.heads[32 * at : 32 * at + 32])

    def sha(self, at: int) -> bytes:
        return bytes(self.shas[32 * at : 32 * at + 32])


class _Current:
    """The run whose rows are being read."""

    __slots__ = ("at", "count", "head", "last_type", "length", "run_id", "sha")

    def __init__(self, run_id: str, at: int) -> None:
        self.run_id, self.at = run_id, at
        self.count = self.length = 0
        self.sha = hashlib.sha256()
        self.head, self.last_type = b"", ""


class Opening:
    """The pass that opens a bundle (framing checks, where each run's rows are).

    Problems other than a line over the limit are kept (the first one), and the pass goes
    on hashing, so that a file altered without a new trailer is reported as altered.
    """

    def __init__(
        self, handle: io.BufferedReader[Any], bad: Callable[[str], VerificationError], path: Path
    ) -> None:
        self.handle, self.bad, self.path = handle, bad, path
        self.limit = limits.MAX_BUNDLE_LINE_BYTES
        self.problem: str | None = None
        self.runs = RunTable()
        self.started = 0  # runs whose rows have begun (a prefix of the manifest's)
        self.awaited: dict[str, str] = {}  # a parent not seen yet -> its first child
        self.current: _Current | None = None
        self.differs: str | None = None  # the first run whose rows differ from its entry
        self.events = 0
        self.library = ""
        self.version = 0
        #: a version with a checkpoint: its note, and each run's claimed inclusion under it
        self.checkpoint: bytes | None = None
        self.claims: dict[str, InclusionClaim | None] = {}
        #: a version with artifacts: the artifact lines' framing (section 13.5)
        self.artifacts: ArtifactFraming | None = None
        self.counts: dict[str, Any] = {}
        #: the manifest line: its length and SHA-256 (the index is read from it again)
        self.manifest_length = 0
        self.manifest_sha = b""

    def fail(self, reason: str) -> None:
        if self.problem is None:
            self.problem = reason

    def line(self, number: int, head: bytes = b"") -> bytes:
        line = head + self.handle.readline(self.limit + 1 - len(head))
        if len(line) > self.limit and not line.endswith(b"\n"):
            raise self._too_long(number)
        return line

    def _too_long(self, number: int) -> VerificationError:
        return self.bad(
            f"line {number} is longer than the limit of {self.limit} bytes "
            "(docs/log-format.md, size limits): refused without reading it whole"
        )

    def run(self) -> None:
        head = self.handle.read(len(PREFIX))
        if head != PREFIX:
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
        digest = hashlib.sha256()
        try:
            if self.problem is not None:
                raise NotStreamed
            self.streamed_manifest(head, digest)
        except NotStreamed:  # parsed whole, which says what is wrong
            self.handle.seek(len(PREFIX))
            self.runs, self.claims, digest = RunTable(), {}, hashlib.sha256()
            self.whole_manifest(head, digest)
        offset, number = self.manifest_length, 1
        if offset >= size:
            raise self.bad("the bundle is truncated (it does not end with its trailer)")
        self.manifest_sha = digest.digest()  # the digest so far is of the manifest alone
        self.rows(offset, number, size, digest)

    def manifest_blocks(self, head: bytes, digest: Any) -> Iterator[bytes]:
        """The manifest line in blocks, each hashed into ``digest``; one over the limit is
        refused as :meth:`line` refuses it, one the file ends in is truncated."""
        total = len(head)
        digest.update(head)
        yield head
        while True:
            block = self.handle.readline(BLOCK)
            total += len(block)
            digest.update(block)
            ended = block.endswith(b"\n")
            if total - ended > self.limit:  # the line without its newline
                raise self._too_long(1)
            if not block:
                raise self.bad("the bundle is truncated (it does not end with its trailer)")
            yield block
            if ended:
                self.manifest_length = total
                return

    def streamed_manifest(self, head: bytes, digest: Any) -> None:
        """The manifest read one run entry at a time; :class:`NotStreamed` for any manifest
        it does not take whole (then :meth:`whole_manifest` says what is wrong with it)."""
        members: dict[str, Any] = {}
        carried = 0  # entries with an inclusion member
        for name, value in stream_manifest(self.manifest_blocks(head, digest), _MANIFEST_DECODER):
            if name != "runs":
                members[name] = value
            elif value is RUNS:
                members[name] = []
            elif type(value) is not _Entry or value.run_id in self.runs.index:
                raise NotStreamed
            else:
                self.runs.listed(value)
                if value.inclusion != _NO_MEMBER:
                    carried += 1
                    self.claims[value.run_id] = value.inclusion  # type: ignore[assignment]
        try:
            shape = _check_version(members)
            _check_header(members, len(self.runs.ids), shape)
        except _LineError:
            raise NotStreamed from None
        if carried != (len(self.runs.ids) if shape.entry_inclusion else 0):
            raise NotStreamed
        self.adopt(members, shape)

    def adopt(self, members: dict[str, Any], shape: BundleShape) -> None:
        if shape.artifacts:  # its entries name runs: checked once the runs are listed
            try:
                entries = check_entries(members["artifacts"], self.runs.index)
            except _LineError as exc:
                self.fail(f"the manifest is malformed: {exc} (docs/log-format.md, bundles)")
                return
            self.artifacts = ArtifactFraming(entries)
        self.version = shape.version
        if shape.checkpoint:
            self.checkpoint = members["checkpoint"].encode("utf-8")
        self.counts = members["counts"]
        self.library = members["library"]

    def whole_manifest(self, head: bytes, digest: Any) -> None:
        """The manifest line read and parsed whole (what :meth:`streamed_manifest` does not
        take: the first problem is reported as it always was)."""
        manifest = self.line(1, head)
        self.manifest_length = len(manifest)
        digest.update(manifest)
        if not manifest.endswith(b"\n"):
            raise self.bad("the bundle is truncated (it does not end with its trailer)")
        try:
            text = _text_of(manifest)
        except _LineError as exc:
            self.fail(f"the manifest is malformed: {exc}")
            return
        del manifest  # the text alone while it is parsed
        try:
            members = _parse(text, _MANIFEST_DECODER)
            del text
            if type(members) is not dict:
                raise _LineError("it is not a JSON object")
            shape = _check_version(members)  # before what a later version may write
            if type(members.get("runs")) is list:
                for item in members["runs"]:
                    entry = item if type(item) is _Entry else _expected_of(item)  # says why
                    if entry.run_id in self.runs.index:
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
                    self.runs.listed(entry)
                    if shape.entry_inclusion:
                        self.claims[entry.run_id] = entry.inclusion  # type: ignore[assignment]
                members["runs"] = []
            _check_header(members, len(self.runs.ids), shape)
        except _LineError as exc:
            self.fail(f"the manifest is malformed: {exc} (docs/log-format.md, bundles)")
            return
        self.adopt(members, shape)

    def rows(self, offset: int, number: int, size: int, digest: Any) -> None:
        """Every event line (then, in a version with artifacts, every artifact line), then
        the trailer."""
        update, events = digest.update, 0
        readline, limit = self.handle.readline, self.limit
        current, judging = self.current, self.problem is None
        artifacts = self.artifacts
        while True:
            number += 1
            line = readline(limit + 1)  # as line() reads it
            if len(line) > limit and not line.endswith(b"\n"):
                raise self._too_long(number)
            if not line or offset + len(line) >= size:
                break
            update(line)
            written = None
            if judging and artifacts is not None:
                # an artifact line, or any line after the first one (section 13.5)
                chunk = artifacts.begun or line.startswith(CHUNK_PREFIX)
                if not chunk:
                    written = _written_event(line)
                    chunk = written is None and is_artifact_line(line)
                if chunk:
                    self.end_run()
                    current = None
                    problem = artifacts.line(number, offset, line)
                    if problem is not None:
                        self.fail(problem)
                        judging = False
                    offset += len(line)
                    line = b""
                    continue
            if judging:
                # a line as a writer writes it, of the run its line before began: taken here
                # (every other line, and the first of each run, is judged by row())
                if written is None:
                    written = _written_event(line)
                if written is not None and current is not None and written[0] == current.run_id:
                    current.count += 1
                    current.length += len(line)
                    current.sha.update(line)
                    current.head, current.last_type = written[2], written[1]
                else:
                    self.row(number, offset, line, written)
                    current, judging = self.current, self.problem is None
            offset += len(line)
            events += 1
            line = b""  # one line held at a time, not two
        self.events = events
        self.end_run()
        self.trailer(line, digest.hexdigest())

    def row(
        self,
        number: int,
        offset: int,
        line: bytes,
        fast: tuple[str, str, bytes, dict[str, Any]] | None,
    ) -> None:
        """An event line: ``fast`` is what :func:`_written_event` made of it (None: it did not
        take it, and the strict parser says what it is)."""
        item: Any = fast[3] if fast is not None else _written_members(line)
        written = fast[:3] if fast is not None else None if item is None else _written_row(item)
        try:
            if written is None:  # the strict parser and every check, to say what is wrong
                row = _row_of(_parse(line) if item is None else item)
                written = row.run_id, row.type, row.chain_hash
            if self.current is None or written[0] != self.current.run_id:
                self.start_run(number, offset, _row_of(_parse(line) if item is None else item))
                if self.problem is not None:
                    return
        except _LineError as exc:
            self.fail(f"line {number} is not an event row ({exc})")
            return
        current = self.current
        assert current is not None
        current.count += 1
        current.length += len(line)
        current.sha.update(line)
        current.head, current.last_type = written[2], written[1]

    def start_run(self, number: int, offset: int, row: StoredEvent) -> None:
        run_id, runs = row.run_id, self.runs
        at = runs.index.get(run_id)
        if at is not None and at < self.started:
            self.fail(
                f"line {number}: the rows of run {run_id} are not together (they resume "
                "after another run's rows)"
            )
            return
        if at is None:
            self.fail(f"line {number} holds rows of run {run_id}, which the manifest does not list")
            return
        if at != self.started:
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
        run_id = runs.ids[at]  # the manifest's string, kept once
        body = open_body(row)
        conversation = body.get("conversation_id") if body is not None else None
        parent = body.get("parent") if body is not None else None
        parent_id = (
            parent["run_id"]
            if isinstance(parent, dict) and type(parent.get("run_id")) is str
            else None
        )
        if parent_id is not None:
            placed = runs.index.get(parent_id)
            if placed is not None and placed < at:
                parent_id = runs.ids[placed]
            elif parent_id != run_id:
                self.awaited.setdefault(parent_id, run_id)
        self.end_run()
        runs.offsets.append(offset)
        runs.lines.append(number)
        runs.opened.append(row.ts)
        runs.conversations.append(runs.shared(conversation) if type(conversation) is str else "")
        runs.parents.append(parent_id)
        self.current = _Current(run_id, at)
        self.started += 1

    def end_run(self) -> None:
        """The current run's rows are all read: where they are kept, and whether they are
        as many as its entry says, ending at its head (reported once every row is read)."""
        current, runs = self.current, self.runs
        if current is None:
            return
        self.current = None
        runs.lengths.append(current.length)
        runs.shas += current.sha.digest()
        runs.types.append(sys.intern(current.last_type))
        at = current.at
        expected = (runs.events[at], runs.head(at))
        if self.differs is None and (current.count, current.head) != expected:
            self.differs = current.run_id

    def finish(self) -> None:
        """Each run's rows as many as the manifest says, ending at its head; every run it
        lists present (checked once all rows are read, so a run's rows resumed after
        another's are reported as that)."""
        if self.problem is None and self.differs is not None:
            self.fail(
                f"run {self.differs}: the manifest's event count or head differs from the rows "
                "the bundle holds"
            )
        if self.problem is None and self.started != len(self.runs.ids):
            missing = self.runs.ids[self.started]
            self.fail(f"run {missing}: the manifest lists it but the bundle holds no rows of it")
        if self.problem is None and self.artifacts is not None:
            short = self.artifacts.finish()
            if short is not None:
                self.fail(short)

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
