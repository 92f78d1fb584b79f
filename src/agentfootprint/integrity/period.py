"""The period a result covers: its one shape, its one rule set, and its one verdict.

A tool's result may say what time its READ covered (``af.period``, inside ``af.absent`` or
``af.described``): the instants it asked for (``queried``), what its store holds (``held``, or
``"unknown"`` said out loud) and when the read ran (``read_at``). The results layer compares
the instants the tool declared and files one verdict per call: ``covered``, ``partly-held``,
``not-held``, ``unknown``, or ``undeclared`` (the tool declares a ``period`` argument and the
result said nothing). No clock is read and no duration is parsed: both spans are the tool's.

One rule set (:func:`period_problem`) is asked by the mint (``af.period``, which refuses a
malformed period) and by the reader (:func:`read_period`, which drops it), so the two cannot
disagree about what a well-formed period is. Every instant is ISO 8601 WITH a zone (``Z`` or
``+HH:MM``), read in upstream's lenient RFC 3339 profile (``t``/``z`` in lower case, the leap
second ``:60``, seconds optional) and compared exactly (nanoseconds since the epoch, whatever
the zone it was written in). Pure: the standard library and :mod:`agentfootprint.integrity`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from agentfootprint.integrity.contracts import Contract
from agentfootprint.integrity.rail import ToolCall, is_absence, read_result

__all__ = [
    "CLAUSES",
    "HELD_UNKNOWN",
    "VERDICTS",
    "Period",
    "instant_of",
    "least_held",
    "period_problem",
    "period_row",
    "period_rows_of",
    "period_verdict",
    "periods_of",
    "provenance_problem",
    "read_period",
    "semantics_problem",
]

#: every verdict a period row may carry, in the order the fold reports them (upstream's
#: ``PERIOD_ROW_VERDICTS``)
VERDICTS = ("covered", "partly-held", "not-held", "unknown", "undeclared")
#: the literal ``held`` carries when the store cannot vouch for what it holds
HELD_UNKNOWN = "unknown"
#: the one clause served per verdict (upstream's ``PERIOD_VERDICT_CLAUSES``, verbatim):
#: static text, nothing interpolated; ``covered`` and ``undeclared`` are served nothing
CLAUSES: Mapping[str, str] = MappingProxyType(
    {
        "not-held": "`period.verdict` is `not-held`: the store holds none of the time this "
        "read asked about (`period.queried`), so all of that time is ground this result does "
        "NOT cover \u2014 this result settles nothing about it, and the time the store does "
        "hold is `period.held`.",
        "partly-held": "`period.verdict` is `partly-held`: the store holds only part of the "
        "time this read asked about (`period.queried`), so the part outside `period.held` is "
        "ground this result does NOT cover \u2014 what this result says holds for "
        "`period.held` only.",
        "unknown": "`period.verdict` is `unknown`: the tool cannot say what time its store "
        "holds, so this result cannot vouch that it covers the time this read asked about "
        "(`period.queried`).",
    }
)
#: the least held first: a call whose result declared several periods gets the weakest
_LEAST_HELD = ("not-held", "partly-held", "unknown", "covered")

# -- instants ----------------------------------------------------------------------------

_INSTANT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))"
)
_NS = 1_000_000_000


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year, 0 included)."""
    if month <= 2:
        year -= 1
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def instant_of(value: Any) -> int | None:
    """The instant ``value`` names, as nanoseconds since the epoch (UTC), or None when it is
    not an ISO 8601 instant with a zone: a date alone, a time without a zone, a day that does
    not exist, hour 24, prose. The leap second ``:60`` compares as the next minute's ``:00``."""
    if not isinstance(value, str):
        return None
    m = _INSTANT.fullmatch(value)
    if m is None:
        return None
    year, month, day, hour, minute = (int(m.group(i)) for i in range(1, 6))
    second = int(m.group(6) or 0)
    if not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month):
        return None
    if hour > 23 or minute > 59 or second > 60:
        return None
    offset = 0
    if m.group(8) is None:
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            return None
        offset = (oh * 60 + om) * (-1 if m.group(9) == "-" else 1)
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    fraction = int((m.group(7) or "0").ljust(9, "0"))
    return (seconds - offset * 60) * _NS + fraction


# -- the one rule set ----------------------------------------------------------------------


def _shown(value: Any) -> str:
    """A value as a message shows it: JSON, clipped (a message is never a copy of a document)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "\u2026"


def _meant(key: str, known: Sequence[str]) -> str | None:
    """The known key a spelling slip meant (``readAt`` for ``read_at``), if any."""
    folded = key.replace("_", "").lower()
    for candidate in known:
        if candidate.replace("_", "").lower() == folded:
            return candidate
    return None


def _unknown_key(value: Mapping[Any, Any], known: Sequence[str], at: str) -> str | None:
    for key in value:
        if key in known:
            continue
        meant = _meant(str(key), known)
        return (
            f"'{at}.{key}' is not a field this vocabulary has"
            + ("." if meant is None else f" \u2014 did you mean `{meant}`?")
            + f" The fields of `{at}` are: {', '.join(known)}."
        )
    return None


def _instant_problem(value: Any, at: str) -> str | None:
    if instant_of(value) is not None:
        return None
    return (
        f"`{at}` must be an ISO 8601 instant with a zone \u2014 e.g. '2026-09-26T08:00:00Z' or "
        f"'2026-09-26T10:00:00+02:00' \u2014 got {_shown(value)}. The library compares "
        "instants, and one with no zone could be any of 24 hours, so it is refused rather "
        "than guessed."
    )


def _span_problem(value: Any, at: str) -> str | None:
    if not isinstance(value, Mapping):
        return f"`{at}` must be {{from, to}} \u2014 two instants, got {_shown(value)}."
    extra = _unknown_key(value, ("from", "to"), at)
    if extra is not None:
        return extra
    bad = _instant_problem(value.get("from"), f"{at}.from") or _instant_problem(
        value.get("to"), f"{at}.to"
    )
    if bad is not None:
        return bad
    start, end = instant_of(value["from"]), instant_of(value["to"])
    if start is not None and end is not None and start > end:
        return (
            f"`{at}.from` ({value['from']}) is after `{at}.to` ({value['to']}) \u2014 a span "
            "runs forward."
        )
    return None


def period_problem(value: Any) -> str | None:
    """The first fault of a wire period, or None when it is well formed: a mapping; no key
    it does not have (a spelling slip names the key meant); ``queried`` a ``{from, to}``
    span of instants with ``from`` not after ``to``; ``held`` the literal ``"unknown"`` or a
    span by the same rule; ``read_at`` (when not null) an instant."""
    if not isinstance(value, Mapping):
        return f"`period` must be {{queried, held, read_at?}} \u2014 got {_shown(value)}."
    extra = _unknown_key(value, ("queried", "held", "read_at"), "period")
    if extra is not None:
        return extra
    if value.get("queried") is None:
        return (
            "`period.queried` must say what the read asked for \u2014 {from, to}, two "
            "instants of the READ that produced this result."
        )
    queried = _span_problem(value["queried"], "period.queried")
    if queried is not None:
        return queried
    held = value.get("held")
    if held != HELD_UNKNOWN:
        if held is None:
            return (
                "`period.held` must say what the store holds \u2014 {from, to}, or 'unknown' "
                "said out loud when the tool cannot vouch for it."
            )
        if isinstance(held, str):
            return (
                f"`period.held` is {_shown(held)} \u2014 it must be {{from, to}} or the "
                "literal 'unknown'."
            )
        problem = _span_problem(held, "period.held")
        if problem is not None:
            return problem
    read_at = value.get("read_at")
    if read_at is not None:
        return _instant_problem(read_at, "period.read_at")
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Period:
    """A well-formed period as :func:`read_period` read it (the instants as written)."""

    queried: tuple[str, str]
    held: tuple[str, str] | Literal["unknown"]
    read_at: str | None = None

    def wire(self) -> dict[str, Any]:
        """The wire form: ``{"queried": {from, to}, "held": {from, to} | "unknown",
        "read_at"?}``."""
        out: dict[str, Any] = {
            "queried": {"from": self.queried[0], "to": self.queried[1]},
            "held": self.held
            if self.held == HELD_UNKNOWN
            else {"from": self.held[0], "to": self.held[1]},
        }
        if self.read_at is not None:
            out["read_at"] = self.read_at
        return out


def read_period(value: Any) -> Period | None:
    """A wire period read, never repaired: None when it is missing or malformed."""
    if period_problem(value) is not None:
        return None
    queried, held = value["queried"], value["held"]
    return Period(
        queried=(queried["from"], queried["to"]),
        held="unknown" if held == HELD_UNKNOWN else (held["from"], held["to"]),
        read_at=value.get("read_at"),
    )


def _instant(text: str) -> int:
    found = instant_of(text)
    if found is None:
        raise ValueError(f"period_verdict: {text!r} is not an ISO 8601 instant with a zone")
    return found


def period_verdict(period: Period) -> str:
    """How far the read covered what it asked for (bounds inclusive; upstream's
    ``periodVerdict``): ``unknown`` when the store cannot say what it holds; ``covered``
    when it holds every instant asked for; ``not-held`` when it holds none; else
    ``partly-held``. A :class:`Period` made by hand with an instant that is not one raises
    ``ValueError`` (a caller error: :func:`read_period` never makes one)."""
    if period.held == HELD_UNKNOWN:
        return "unknown"
    q_from, q_to = _instant(period.queried[0]), _instant(period.queried[1])
    h_from, h_to = _instant(period.held[0]), _instant(period.held[1])
    if h_from <= q_from and q_to <= h_to:
        return "covered"
    if q_to < h_from or q_from > h_to:
        return "not-held"
    return "partly-held"


def least_held(verdicts: Iterable[str]) -> str | None:
    """The weakest of several verdicts (``not-held``, then ``partly-held``, ``unknown``,
    ``covered``): a reader is never told more than the weakest declaration covers."""
    given = set(verdicts)
    return next((v for v in _LEAST_HELD if v in given), None)


# -- where a result declares a period (upstream's recognizers) --------------------------

_PROVENANCE_KEYS = ("measured_at", "source", "age_seconds", "source_export_date")


def _said(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def provenance_problem(value: Any) -> str | None:
    """The first fault of a wire ``provenance`` (``{measured_at, source, age_seconds?,
    source_export_date?}``), or None: the one rule ``af.absent``, ``af.described`` and the
    recognizer share."""
    if not isinstance(value, Mapping):
        return (
            "`provenance` must be an object ({measured_at, source, age_seconds?, "
            f"source_export_date?}}), got {_shown(value)}."
        )
    extra = _unknown_key(value, _PROVENANCE_KEYS, "provenance")
    if extra is not None:
        return extra
    if not _said(value.get("measured_at")):
        return (
            "`provenance.measured_at` must say when the WORLD was measured \u2014 a tool "
            "reading a nightly export and answering in 4ms is serving yesterday, and only this "
            "field says so."
        )
    if not _said(value.get("source")):
        return "`provenance.source` must name the system of record the values were read from."
    age = value.get("age_seconds")
    if "age_seconds" in value and (
        isinstance(age, bool)
        or not isinstance(age, int | float)
        or not math.isfinite(age)
        or age < 0
    ):
        return "`provenance.age_seconds` must be a finite number >= 0 or omitted."
    if "source_export_date" in value and not _said(value.get("source_export_date")):
        return "`provenance.source_export_date` must be a non-empty string or omitted."
    return None


_SEMANTICS_KEYS = frozenset(
    {
        "af_semantics",
        "series",
        "facts",
        "edges",
        "grain",
        "provenance",
        "period",
        "coverage",
        "not_covered",
        "clarify",
        "render",
        "note",
    }
)
_GRAIN_KEYS = frozenset({"interval", "aggregation", "is_counter", "collapsed"})
_COUNTER_WORDS = frozenset({"sum", "count", "total", "cumulative", "counter", "delta"})
_RENDER_KEYS = frozenset({"default", "columns", "sort", "filter_note", "chart_hint"})
_HINT_KEYS = ("sort", "filter_note", "chart_hint")


def _rows(value: Any, field: str, ok: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return f"`{field}` must be a non-empty list \u2014 omit the field to say nothing."
    for i, row in enumerate(value):
        if not isinstance(row, Mapping) or not ok(row):
            return f"`{field}[{i}]` is malformed."
    return None


def _items(value: Any, field: str, why_needed: bool) -> tuple[str | None, int]:
    if value is None:
        return None, 0
    if not isinstance(value, list):
        return f"`{field}` must be a list of {{what, why?}} items.", 0
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or not _said(item.get("what")):
            return f"`{field}[{i}]` names no ground \u2014 each item is {{what, why?}}.", 0
        if ("why" in item and not _said(item["why"])) or (why_needed and "why" not in item):
            return f"`{field}[{i}]` needs a `why` that says something.", 0
    return None, len(value)


def _counter_looking(aggregation: str) -> bool:
    tokens = re.split(r"[^a-z]+", aggregation.lower())
    return any(
        t in _COUNTER_WORDS or (t.endswith("s") and t[:-1] in _COUNTER_WORDS) for t in tokens
    )


def _grain_problem(grain: Any) -> str | None:
    if not isinstance(grain, Mapping) or not set(grain) <= _GRAIN_KEYS:
        return "`grain` must be an object ({interval?, aggregation?, is_counter?, collapsed?})."
    says = False
    for key in ("interval", "aggregation", "collapsed"):
        if key in grain:
            if not _said(grain[key]):
                return f"`grain.{key}` must be a non-empty string or omitted."
            says = True
    if "is_counter" in grain:
        if not isinstance(grain["is_counter"], bool):
            return "`grain.is_counter` must be True or False."
        says = True
    if not says:
        return "`grain` says nothing \u2014 state one of its fields, or omit it."
    aggregation = grain.get("aggregation")
    if isinstance(aggregation, str) and _counter_looking(aggregation) and "is_counter" not in grain:
        return (
            f"`grain.aggregation` is {aggregation.strip()!r}, which is counter-looking, and "
            "`is_counter` is not stated."
        )
    return None


def _coverage_problem(value: Mapping[str, Any]) -> str | None:
    coverage = value.get("coverage")
    if "coverage" in value:
        if not isinstance(coverage, Mapping) or not set(coverage) <= {
            "checked",
            "not_checked",
            "cannot_cover",
        }:
            return "`coverage` must be an object of {checked?, not_checked?, cannot_cover?}."
        total = 0
        for key, why in (("checked", False), ("not_checked", False), ("cannot_cover", True)):
            problem, count = _items(coverage.get(key), f"coverage.{key}", why)
            if problem is not None:
                return problem
            total += count
        if total == 0:
            return "`coverage` names no ground at all."
    if "not_covered" in value:
        if not isinstance(coverage, Mapping):
            return "`not_covered` is derived from `coverage`; declare `coverage` instead."
        derived = [
            item["what"] if "why" not in item else f"{item['what']} \u2014 {item['why']}"
            for key in ("not_checked", "cannot_cover")
            for item in coverage.get(key) or ()
        ]
        if value["not_covered"] != derived:
            return "`not_covered` disagrees with what `coverage` derives."
    return None


def _clarify_render_problem(value: Mapping[str, Any]) -> str | None:
    clarify = value.get("clarify")
    if clarify is not None and (
        not isinstance(clarify, Mapping)
        or not set(clarify) <= {"question", "candidates"}
        or not _said(clarify.get("question"))
        or not isinstance(clarify.get("candidates"), list)
    ):
        return "`clarify` must be {question, candidates} or null."
    if "render" in value:
        render = value["render"]
        if (
            not isinstance(render, Mapping)
            or not set(render) <= _RENDER_KEYS
            or not _said(render.get("default"))
            or any(
                key in render and not _said(render[key])
                for key in _RENDER_KEYS - {"default", "columns"}
            )
            or (
                "columns" in render
                and (
                    not isinstance(render["columns"], list)
                    or not render["columns"]
                    or not all(_said(c) for c in render["columns"])
                )
            )
        ):
            return "`render` must be {default, columns?, sort?, filter_note?, chart_hint?}."
    return None


def semantics_problem(value: Any) -> str | None:
    """The first fault of an ``af_semantics`` envelope (upstream's ``semanticIssues``, with
    the period of honesty step 7b), or None: ``af.described`` refuses by it, and a result
    that carries the marker with any fault is data, never a half-read envelope (its period is
    not read)."""
    if not isinstance(value, Mapping) or value.get("af_semantics") is not True:
        return "`af_semantics` must be exactly true \u2014 the marker is the vocabulary."
    unknown = sorted(str(k) for k in value if k not in _SEMANTICS_KEYS)
    if unknown:
        return f"carries {unknown[0]!r}, which is not a field this vocabulary has."
    series, facts, edges = value.get("series"), value.get("facts"), value.get("edges")
    problem = None
    if "series" in value:
        problem = _rows(
            series,
            "series",
            lambda p: (
                isinstance(p.get("t"), str | int | float)
                and not isinstance(p.get("t"), bool)
                and _said(p.get("entity"))
                and _said(p.get("metric"))
                and "value" in p
            ),
        )
    if problem is None and "facts" in value:
        problem = _rows(facts, "facts", lambda f: _said(f.get("entity")))
        if problem is not None:
            problem = (
                "`facts` must be a non-empty list of rows, each saying WHAT it is about \u2014 "
                "a non-empty `entity`."
            )
    if problem is None and "edges" in value:
        problem = _rows(
            edges,
            "edges",
            lambda e: _said(e.get("from")) and _said(e.get("to")) and _said(e.get("kind")),
        )
    if problem is None and "grain" in value:
        problem = _grain_problem(value["grain"])
    if problem is None and "provenance" in value:
        problem = provenance_problem(value["provenance"])
    if problem is None and "provenance" not in value and ("series" in value or "facts" in value):
        problem = (
            "carries series/facts with no `provenance` \u2014 `provenance.measured_at` and "
            "`provenance.source` are required whenever the envelope carries data."
        )
    if problem is None and "series" in value and "grain" not in value:
        problem = "carries `series` with no `grain`."
    if problem is None:
        problem = _coverage_problem(value) or _clarify_render_problem(value)
    if problem is None and "period" in value:
        problem = period_problem(value["period"])
    if problem is None and "note" in value and not isinstance(value["note"], str):
        problem = "`note` is the library's static sentence \u2014 a string, or omitted."
    if problem is None and not (
        "series" in value or "facts" in value or "edges" in value or value.get("clarify")
    ):
        problem = (
            "declares nothing \u2014 an envelope needs data (series, facts or edges) or a "
            "question (clarify)."
        )
    return problem


def _is_ledger(value: Any) -> bool:
    """``coverage()``'s envelope: ``{"af_coverage": {...}, "result": ...}``."""
    return (
        (type(value) is dict or isinstance(value, Mapping))
        and isinstance(value.get("af_coverage"), Mapping)
        and "result" in value
    )


def periods_of(value: Any) -> list[Period]:
    """The periods a result declares, by upstream's recognizers and in their order: an
    ``af.absent`` envelope's ``period``; a well-formed ``af_semantics`` envelope's (one with
    any fault is data); a ``coverage()`` ledger's ``af_coverage.period``, then that of the
    absence it wraps. A malformed period is not read (the result is served as written).
    Anything else (a rowset, a plain object with a ``period`` member) declares none."""
    if type(value) is list:  # a rowset (the common case): no envelope
        return []
    found: list[Any] = []
    if is_absence(value):
        found.append(value.get("period"))
    elif (type(value) is dict or isinstance(value, Mapping)) and value.get("af_semantics") is True:
        if semantics_problem(value) is None:
            found.append(value.get("period"))
    elif _is_ledger(value):
        found.append(value["af_coverage"].get("period"))
        if is_absence(value["result"]):
            found.append(value["result"].get("period"))
    return [p for p in map(read_period, found) if p is not None]


# -- the row -------------------------------------------------------------------------------


def period_row(
    contract: Contract | None, tool: str, tool_call_id: str, content: str | None
) -> dict[str, Any] | None:
    """The ``period`` row of a call of ``tool`` whose result is ``content``, or None when the
    call is not judged. Judged when its result declares a period or its tool declares a
    ``period`` argument; the verdict is the least held of the declared periods' verdicts, or
    ``undeclared`` when the result declares none. The row names the tool, the call and (when
    declared) the period argument; it never copies an instant."""
    declared = periods_of(read_result(content))
    argument = None if contract is None else contract.period
    if not declared and argument is None:
        return None
    verdict = least_held(map(period_verdict, declared)) if declared else "undeclared"
    row: dict[str, Any] = {"tool": tool, "tool_call_id": tool_call_id, "verdict": verdict}
    if argument is not None:
        row["argument"] = argument
    return row


def period_rows_of(
    calls: Sequence[ToolCall], contracts: Mapping[str, Contract], armed_all: bool
) -> list[dict[str, Any]]:
    """The ``period_rows`` a run appends for its tool calls, in order (what ``results_layer``
    files live, for ``findings --recompute``). Armed by ``armed_all`` (``results_layer=True``)
    or by any contract declaring ``period``; unarmed, nothing. An errored or refused call
    (``is_error``) and a call with no result are not judged."""
    if not armed_all and not any(c.period is not None for c in contracts.values()):
        return []
    rows: list[dict[str, Any]] = []
    for call in calls:
        if call.is_error or call.content is None:
            continue
        row = period_row(contracts.get(call.tool), call.tool, call.tool_call_id, call.content)
        if row is not None:
            rows.append(row)
    return rows
