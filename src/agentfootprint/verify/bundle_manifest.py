"""A bundle's manifest line (docs/log-format.md section 13.1): its checks, and reading it one
run entry at a time.

The manifest lists every run of the bundle in one JSON line. Parsed whole, it is held at once
as bytes, as text and as one object per run: memory grows with the runs wherever it is read
(opening the bundle, and whole-file verification's index check). :func:`stream_manifest`
reads the line in blocks instead and hands over its members one at a time, and each element
of ``runs`` as soon as it is parsed, with the same decoder (so each object is what the whole
parse makes of it). It takes only what it can read as exactly the whole parse would, a JSON
object of distinct member names whose ``runs`` is an array, in valid UTF-8; anything else
is :class:`NotStreamed`, and the reader parses the line whole, which says what is wrong.
"""

from __future__ import annotations

import codecs
import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from agentfootprint.logformat.chain import stored_kind
from agentfootprint.verify.bundle_json import (
    _hex,
    _LineError,
    _members,
    _no_constant,
    _no_duplicates,
    _no_lone_surrogates,
    _safe_int,
    _sound_text,
)
from agentfootprint.verify.bundle_proofs import InclusionClaim, check_note_text, claim_of
from agentfootprint.verify.bundle_versions import (
    BUNDLE_SHAPES,
    MANIFEST_HEADER,
    BundleShape,
    UnknownBundleVersion,
    bundle_shape,
)

__all__ = ["BundleIndexEntry"]

_INDEXED = ("run_id", "conversation_id", "parent_run_id", "opened_at")
#: a run entry's members, by whether it has an inclusion (which the manifest's version must
#: then call for): an entry is checked as it is parsed, before the version is known
_ENTRY_KEYS_OF = {shape.entry_inclusion: shape.entry_keys for shape in BUNDLE_SHAPES}
_ENTRY_KEY_SETS = tuple(_ENTRY_KEYS_OF.values())
#: how much of the line is read at once (the text a block decodes to is held about four
#: times over while the window is refilled)
BLOCK: Final = 1 << 14
#: JSON's whitespace (RFC 8259), what the stdlib decoder skips between tokens
_WHITESPACE: Final = " \t\n\r"
#: what :func:`stream_manifest` gives as ``runs``'s value, before the array's elements
RUNS: Final = object()


@dataclass(frozen=True, kw_only=True, slots=True)
class BundleIndexEntry:
    """One run of the manifest as written (values uncoerced): the bundle's run index, which
    whole-file verification compares with the events, like a database's ``runs`` table."""

    run_id: Any
    conversation_id: Any
    parent_run_id: Any
    opened_at: Any


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
        return bundle_shape(
            members.get("agentfootprint_bundle"), checkpoint="checkpoint" in members
        )
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


# -- reading the line in blocks ---------------------------------------------------------------


class NotStreamed(Exception):
    """Internal: the manifest is not one :func:`stream_manifest` reads as the whole parse
    would; the whole-line parse judges it."""


class _Window:
    """The part of the manifest's text not parsed yet, refilled from its blocks as parsing
    needs (a value cut by a block's end is parsed again once more text is in)."""

    __slots__ = ("_blocks", "_decode", "at", "done", "text")

    def __init__(self, blocks: Iterable[bytes]) -> None:
        self._blocks = iter(blocks)
        self._decode = codecs.getincrementaldecoder("utf-8")("strict").decode
        self.text, self.at, self.done = "", 0, False

    def _more(self, wanted: int) -> None:
        """``wanted`` characters more (or the rest of the line), the text parsed dropped."""
        if self.done:
            raise NotStreamed
        parts, got = [self.text[self.at :]], 0
        try:
            while got < wanted:
                block = next(self._blocks, None)
                if block is None:
                    parts.append(self._decode(b"", True))
                    self.done = True
                    break
                parts.append(self._decode(block))
                got += len(parts[-1])
        except UnicodeDecodeError:
            raise NotStreamed from None
        self.text, self.at = "".join(parts), 0

    def token(self) -> str:
        """The next character after whitespace, consumed ("" at the end of the line)."""
        while True:
            text, at = self.text, self.at
            while at < len(text) and text[at] in _WHITESPACE:
                at += 1
            self.at = at
            if at < len(text):
                self.at = at + 1
                return text[at]
            if self.done:
                return ""
            self._more(BLOCK)

    def value(self, decoder: json.JSONDecoder) -> Any:
        """The JSON value that starts at the next character after whitespace."""
        if self.token():  # the whitespace skipped, the value's first character kept
            self.at -= 1
        wanted = BLOCK  # then twice as much each time the value is still cut
        while True:
            try:
                value, end = decoder.raw_decode(self.text, self.at)
            except json.JSONDecodeError:
                if self.done:
                    raise NotStreamed from None
            except (_LineError, ValueError, RecursionError):  # the whole parse says why
                raise NotStreamed from None
            else:
                if end < len(self.text) or self.done:  # a number at the end may go on
                    self.at = end
                    return value
            self._more(wanted)
            wanted *= 2  # a value longer than a block: read in as many as it needs


def stream_manifest(
    blocks: Iterable[bytes], decoder: json.JSONDecoder
) -> Iterator[tuple[str, Any]]:
    """The manifest line (its bytes in ``blocks``, in order) as ``(name, value)`` per member
    of its object, in the line's order, except that ``runs`` is given as ``("runs", RUNS)``
    then one ``("runs", element)`` per element of its array, each as soon as it is parsed.
    Each value is what ``decoder`` makes of it. :class:`NotStreamed` (possibly after some
    members) when the line is not a JSON object of distinct member names whose ``runs`` is
    an array, followed by nothing but whitespace, in UTF-8."""
    window = _Window(blocks)
    if window.token() != "{":
        raise NotStreamed
    names: set[str] = set()
    follows = window.token()
    while follows != "}":
        if follows != '"':
            raise NotStreamed
        window.at -= 1
        name = window.value(decoder)
        if name in names or window.token() != ":":
            raise NotStreamed
        names.add(name)
        if name != "runs":
            yield name, window.value(decoder)
        elif window.token() != "[":
            raise NotStreamed
        else:
            yield name, RUNS
            after = window.token()
            if after != "]":
                window.at -= 1
            while after != "]":
                yield name, window.value(decoder)
                after = window.token()
                if after != "," and after != "]":
                    raise NotStreamed
        follows = window.token()
        if follows == ",":
            follows = window.token()
            if follows == "}":  # a comma before the end: not JSON
                raise NotStreamed
        elif follows != "}":
            raise NotStreamed
    if window.token() != "":
        raise NotStreamed
