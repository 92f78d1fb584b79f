"""The one findings rail: a finding, a check's judgement of one item, the disposition ledger.

A check judges each item it meets (a tool result, a call's arguments, an answer) and says one
of three things: ``checked`` (with the findings it filed, none when it passed),
``not_applicable`` (nothing in the item it can read: prose, a wrapper, a placed result) or
``unreachable`` (what it needs is not on the record). The ledger counts them per check and
seam, so a check that silently skipped what it could not read shows as a row, never as
silence. Findings are deduplicated by identity (kind, seam, subjects, predicate), as
upstream's ``contextErrorIdentity``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from agentfootprint.logformat.canonical import has_lone_surrogate, parse

__all__ = [
    "LIBRARY_FRAMES",
    "NOT_APPLICABLE",
    "NOT_JSON",
    "PASSED",
    "UNREACHABLE",
    "Disposition",
    "Finding",
    "Judgement",
    "Ledger",
    "ToolCall",
    "clip",
    "is_absence",
    "is_person",
    "leading_json",
    "read_arguments",
    "read_result",
    "string_leaves",
    "tool_calls_of",
    "turn_of",
]

Seam = Literal["write", "choice", "claim"]
#: the dispositions of one item
Verdict = Literal["checked", "not_applicable", "unreachable"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """One integrity finding (``agentfootprint.integrity.context_error``'s payload)."""

    check: str  #: the check that filed it (``column_types``, ``empty_lookup``, ...)
    kind: str  #: what was found (``column-type-mismatch``, ``empty-lookup``, ...)
    seam: Seam
    #: what it is about, as (kind, id) pairs: ``("tool", "lookup")``, ``("answer", "final")``
    subjects: tuple[tuple[str, str], ...]
    witnesses: tuple[str, ...]  #: identities it rests on: tool call ids, turns
    message: str  #: says what and where, and quotes the check's ceiling sentence verbatim
    predicate: str | None = None  #: the column, argument or value the finding turns on
    advisory: bool = False  #: a place to look, never a verdict
    synthetic: bool = False  #: a canary's finding (``integrity_posture="dev"``)
    #: more the finding names (counts, distances, a withheld result's digest), JSON
    facts: Mapping[str, Any] = field(default_factory=dict)

    @property
    def identity(self) -> tuple[Any, ...]:
        return (self.kind, self.seam, tuple(sorted(self.subjects)), self.predicate)

    def payload(self) -> dict[str, Any]:
        """The recorded event's members (JSON)."""
        out: dict[str, Any] = {
            "check": self.check,
            "kind": self.kind,
            "seam": self.seam,
            "subjects": [{"kind": kind, "id": id_} for kind, id_ in self.subjects],
            "witnesses": list(self.witnesses),
            "message": self.message,
            "advisory": self.advisory,
            "synthetic": self.synthetic,
        }
        if self.predicate is not None:
            out["predicate"] = self.predicate
        if self.facts:
            out["facts"] = dict(self.facts)
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Judgement:
    """One check's word on one item."""

    verdict: Verdict
    findings: tuple[Finding, ...] = ()

    @staticmethod
    def passed() -> Judgement:
        return PASSED

    @staticmethod
    def found(*findings: Finding) -> Judgement:
        return Judgement(verdict="checked", findings=findings) if findings else PASSED


#: the judgements that carry no finding (frozen: one of each serves every check)
PASSED = Judgement(verdict="checked")
NOT_APPLICABLE = Judgement(verdict="not_applicable")
UNREACHABLE = Judgement(verdict="unreachable")


@dataclass(slots=True)
class Disposition:
    """One check's row of the ledger."""

    check: str
    seam: str
    checked: int = 0
    findings: int = 0
    not_applicable: int = 0
    unreachable: int = 0
    synthetic: int = 0

    def json(self, **more: Any) -> dict[str, Any]:
        """The row as the disposition records it, with ``more`` members after it."""
        return {
            "check": self.check,
            "seam": self.seam,
            "checked": self.checked,
            "findings": self.findings,
            "not_applicable": self.not_applicable,
            "unreachable": self.unreachable,
            "synthetic": self.synthetic,
            **more,
        }

    @property
    def work(self) -> int:
        """The items the check met (whatever it made of them)."""
        return self.checked + self.not_applicable + self.unreachable


class Ledger:
    """The disposition ledger of one run and its findings, deduplicated by identity."""

    def __init__(self, armed: Iterable[tuple[str, str]]) -> None:
        self.rows: dict[str, Disposition] = {
            check: Disposition(check=check, seam=seam) for check, seam in armed
        }
        self.findings: list[Finding] = []
        self._seen: set[tuple[Any, ...]] = set()

    def file(self, check: str, judgement: Judgement) -> list[Finding]:
        """Count ``judgement`` against ``check``; the findings new by identity."""
        row = self.rows[check]
        findings = judgement.findings
        if judgement.verdict == "checked":
            row.checked += 1  # and one that filed a finding (a repeat included) failed
            if findings:
                row.findings += any(not f.synthetic for f in findings)
        elif judgement.verdict == "not_applicable":
            row.not_applicable += 1
        else:
            row.unreachable += 1
        if not findings:
            return []
        fresh: list[Finding] = []
        for finding in findings:
            if finding.synthetic:
                row.synthetic += 1
            if finding.identity in self._seen:
                continue
            self._seen.add(finding.identity)
            fresh.append(finding)
        self.findings.extend(fresh)
        return fresh

    def json(self) -> list[dict[str, Any]]:
        return [row.json() for row in self.rows.values()]


class _NotJson:
    def __repr__(self) -> str:
        return "NOT_JSON"


#: what :func:`read_result` gives for content that is not JSON
NOT_JSON: Any = _NotJson()
_DECODER = json.JSONDecoder()
#: a JSON escape of a surrogate code unit: a lone one decodes to text the log cannot hold
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def read_result(content: Any) -> Any:
    """A tool result's content as the checks read it: the JSON value it begins with
    (:func:`leading_json`), :data:`NOT_JSON` when it begins with none."""
    return leading_json(content)[0] if isinstance(content, str) else NOT_JSON


@functools.lru_cache(maxsize=16)
def leading_json(content: str) -> tuple[Any, str]:
    """The JSON array or object ``content`` begins with, and the text after it (or
    :data:`NOT_JSON` and the whole content). What follows the value is not a value: a note
    the loop appended after the result (a ``tool_result_noted`` sentence), so the same value
    is read in the run, before the notes, and afterwards from the committed history. Kept for
    the last few contents: every check of a result, and the evidence index, read the same
    text once (the value is shared, and no reader changes it)."""
    text = content.lstrip()
    if not text or text[0] not in "[{":
        return NOT_JSON, content  # only arrays and objects: a number is not a rowset
    try:
        value, end = _DECODER.raw_decode(text)
        # an escaped lone surrogate: not Unicode the log can hold, so not a value a finding
        # may quote (the loop reads such arguments as not JSON too)
        if _SURROGATE_ESCAPE.search(text) and has_lone_surrogate(
            json.dumps(value, ensure_ascii=False)
        ):
            return NOT_JSON, content
    except (ValueError, RecursionError):
        return NOT_JSON, content
    return value, text[end:]


class ToolCall(NamedTuple):
    """One tool call of the history and its result, as the checks read them. A named tuple:
    immutable as a frozen dataclass, and made in less than half the time (0.52 us against
    1.17: the seams make one or two per call); ``_replace`` makes a changed copy."""

    tool: str
    tool_call_id: str
    arguments: Any  #: the arguments as the model sent them (parsed; None: not JSON)
    content: str | None  #: the committed result (None: no result in the history)
    is_error: bool
    #: its turn: by :func:`tool_calls_of`, the person's messages from its ``start`` up to it
    turn: int
    history_index: int  #: the history index of its result (of the call, when it has none)
    #: the history index of the assistant message that asked for it (-1: not known); the
    #: results before it are what the model had been served when it chose the call
    asked_at: int = -1


#: the openings of the user messages the library writes itself (``wrap_up``'s budget frame,
#: ``output_type``'s teaching message): they continue a turn, never open one
LIBRARY_FRAMES = ("[budget exhausted \u2014 ", "[answer not accepted \u2014 ")


def is_person(message: Any) -> bool:
    """A user message the person wrote: it opens a turn (a message the library wrote, in
    :data:`LIBRARY_FRAMES`, does not)."""
    if not (type(message) is dict or isinstance(message, Mapping)) or message.get("role") != "user":
        return False
    content = message.get("content")
    return not (isinstance(content, str) and content.startswith(LIBRARY_FRAMES))


def turn_of(history: Sequence[Any], index: int) -> int:
    """The turn a history index belongs to: the person's messages at or before it (a turn
    begins with the person's message, so the turn's numbers start at 1)."""
    return sum(1 for message in history[: index + 1] if is_person(message))


def read_arguments(raw: Any) -> Any:
    """A call's arguments as the loop reads them (``tool_dispatch.parse_arguments``): JSON
    text parsed by the log's reader, text that is not JSON (NaN, an escaped lone surrogate
    included) None; anything else as it is."""
    if isinstance(raw, str):
        try:
            return parse(raw)
        except ValueError:
            return None
    return raw


def _take(
    found: list[tuple[int, Mapping[str, Any]]] | None, asked_at: int
) -> tuple[int, Mapping[str, Any]] | None:
    """The first result after ``asked_at`` among ``found``, removed from it."""
    for position, (index, message) in enumerate(found or ()):
        if index > asked_at:
            del found[position]  # type: ignore[union-attr]
            return index, message
    return None


def tool_calls_of(history: Sequence[Any], start: int = 0) -> list[ToolCall]:
    """The tool calls asked for at or after ``start`` in ``history``, with their results,
    in the order the model asked for them (each ``turn`` counted from ``start``)."""
    # every result per call id, in order: a call id reused in a later batch pairs with the
    # first result after the assistant message that asked for it
    results: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for i in range(start, len(history)):
        message = history[i]
        if (type(message) is dict or isinstance(message, Mapping)) and message.get(
            "role"
        ) == "tool":
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str):
                results.setdefault(call_id, []).append((i, message))
    out: list[ToolCall] = []
    turn = 0  # counted from ``start`` (reading the prefix would cost the whole history)
    for i in range(start, len(history)):
        message = history[i]
        if not (type(message) is dict or isinstance(message, Mapping)):
            continue
        if is_person(message):
            turn += 1
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not isinstance(calls, list):
            continue
        for call in calls:
            if not isinstance(call, Mapping):
                continue
            call_id, name = call.get("id"), call.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                continue
            found = _take(results.get(call_id), i)
            content = None if found is None else found[1].get("content")
            out.append(
                ToolCall(
                    tool=name,
                    tool_call_id=call_id,
                    arguments=read_arguments(call.get("arguments")),
                    content=content if isinstance(content, str) else None,
                    is_error=found is not None and found[1].get("is_error") is True,
                    turn=turn,
                    history_index=i if found is None else found[0],
                    asked_at=i,
                )
            )
    return out


def is_absence(value: Any) -> bool:
    """``af.absent(...)``'s envelope (a declared absence: the search ran and matched
    nothing): an object with ``"af_absent": true`` and a non-empty ``checked`` list."""
    return (
        (type(value) is dict or isinstance(value, Mapping))
        and value.get("af_absent") is True
        and isinstance(value.get("checked"), list)
        and bool(value.get("checked"))
    )


def clip(value: str, limit: int = 80) -> str:
    """A value as a message quotes it: at most ``limit`` characters (the last an ellipsis)."""
    return value if len(value) <= limit else value[: limit - 1] + "\u2026"


#: the JSON types that are never a string leaf nor hold one
_SCALARS = frozenset({int, float, bool, type(None)})


def string_leaves(value: Any, path: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """Every string leaf of a call's arguments with its dot path (``machine``,
    ``filter.hosts.0``; a top-level string has the path ``""``), in order; numbers,
    booleans and null are never leaves. Bounded in depth (a crafted value cannot recurse
    the reader to death)."""
    if depth > 32:
        return []
    if isinstance(value, str):
        return [(path, value)]
    if type(value) in _SCALARS:
        return []
    out: list[tuple[str, str]] = []
    if type(value) is dict or isinstance(value, Mapping):
        # the keys in order (as the committed, canonical arguments hold them): the run and a
        # recompute file a call's findings in the same order, whatever order the model sent
        keys = sorted(value) if all(type(key) is str for key in value) else sorted(value, key=str)
        for key in keys:
            member = value[key]
            where = f"{path}.{key}" if path else str(key)
            if type(member) is str and depth < 32:  # a leaf, inline (the common argument)
                out.append((where, member))
            elif type(member) not in _SCALARS:
                out.extend(string_leaves(member, where, depth + 1))
    elif isinstance(value, list):
        for i, member in enumerate(value):
            out.extend(string_leaves(member, f"{path}.{i}" if path else str(i), depth + 1))
    return out
