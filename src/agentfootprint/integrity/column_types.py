"""column-types: a tool declared what its rows contain (``result_columns``), and the rows
say otherwise. Filed at the write seam, when the tool answers.

Judges TYPE, never meaning (:data:`CEILING`, quoted into every finding). Two kinds, because
"the value is not what it should be" and "the value is not there" send a person to two
different files: ``column-type-mismatch`` (the column is there and holds the wrong thing) and
``missing-column`` (the column is in no row). Only an array of at least one plain object is
read; prose, a ``{"rows": [...]}`` wrapper and the zero-row result (empty-lookup's subject)
are ``not_applicable``. Declared, never inferred: an undeclared column is never judged.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any, Final

from agentfootprint.errors import UsageError
from agentfootprint.integrity.contracts import Column, Contract
from agentfootprint.integrity.rail import (
    NOT_APPLICABLE,
    NOT_JSON,
    Finding,
    Judgement,
    ToolCall,
    clip,
    read_result,
)
from agentfootprint.logformat.canonical import canon

__all__ = [
    "CEILING",
    "CHECKS",
    "MAX_NAMED_IN_REFUSAL",
    "MISMATCH",
    "MISSING",
    "MODES",
    "SEAM",
    "canary",
    "judge_columns",
    "refusal_text",
]

MISMATCH = "column-type-mismatch"
MISSING = "missing-column"
#: the two checks (each its own ledger row) that one judge function serves
CHECKS = (MISMATCH, MISSING)
SEAM: Final = "write"
MODES = ("warn", "enforce")
#: upstream's COLUMN_TYPE_CEILING, verbatim
CEILING = (
    "This judges TYPE, never MEANING — it can see that a column declared `number` holds a "
    "string, and it can never see that the string should have been 0, or that a 0.0 should "
    "have been an 8; a column whose every value has its declared type passes here and can "
    "still be wrong."
)
#: most columns one refusal names: a 200-column declaration must not write the context
MAX_NAMED_IN_REFUSAL = 5

_OUTCOME = {
    "enforce": "The result was REFUSED: the model reads a teaching sentence instead of these rows.",
    "warn": (
        "Nothing here blocked the call, changed the result, or retried anything — the "
        "model reads the rows exactly as the tool returned them."
    ),
}
#: upstream's nullableHint, with the declaration spelled as Python declares it
_DICTS: Final = {dict}
_NULLABLE_HINT = (
    "If this column may legitimately carry no value, say so once — "
    "`{'type': '…', 'nullable': True}` — and rows with nothing in them stop being "
    "violations. "
)


def _rows(content: str) -> list[dict[str, Any]] | None:
    """The rowset, or None: an array of >= 1 plain objects is the one shape read (each a
    ``dict``, as the decoder makes them)."""
    try:
        value = read_result(content)
    except RecursionError:  # nested past the parser's depth: not a rowset
        return None
    if value is NOT_JSON or not isinstance(value, list) or not value:
        return None
    return value if set(map(type, value)) == _DICTS else None


def _is_date(value: str) -> bool:
    """A string that is an ISO 8601 date or date-time. Python's approximation of upstream's
    ``Date.parse``: ``datetime.date.fromisoformat`` or ``datetime.datetime.fromisoformat``
    accepts it, or the latter accepts it without a trailing ``Z``. Stricter than
    ``Date.parse`` (``"2024"`` and ``"Jan 2 2024"`` are mismatches here)."""
    for parse in (datetime.date.fromisoformat, datetime.datetime.fromisoformat):
        try:
            parse(value)
            return True
        except (ValueError, OverflowError):
            pass
    if value.endswith("Z"):
        try:
            datetime.datetime.fromisoformat(value[:-1])
            return True
        except (ValueError, OverflowError):
            pass
    return False


def _finite(value: Any) -> bool:
    return isinstance(value, int) or math.isfinite(value)


def _matches(value: Any, kind: str) -> bool:
    if kind == "number":  # finite: a quoted "1240" and NaN are mismatches (failure 3)
        return isinstance(value, int | float) and not isinstance(value, bool) and _finite(value)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "date":
        return isinstance(value, str) and _is_date(value)
    return False


def _number_text(value: int | float) -> str:
    """A number as JavaScript's ``String`` spells it (``0.0`` is ``0``, NaN is ``NaN``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int):
        return str(value)
    try:
        return canon(value).decode()
    except Exception:  # a refusal falls back to Python's spelling
        return repr(value)


def _type_name(value: Any) -> str:
    """What a value is, in upstream's words (``string``, ``array``, ``the number NaN``)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number" if _finite(value) else f"the number {_number_text(value)}"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _render(value: Any) -> str:
    """One value as a person recognizes it, clipped so a large cell cannot ride a finding."""
    if isinstance(value, str):
        return f'"{clip(value)}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number_text(value)
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError):
        text = "object" if isinstance(value, Mapping) else "array"
    return clip(text)


def _every_cell_matches(rows: list[dict[str, Any]], columns: Sequence[tuple[str, Column]]) -> bool:
    """Every row holds every declared column with a value of its declared type (a date
    column, or a null, is left to the rule): the common case, read in one pass by type
    identity (the decoder's own types) before any column is counted. When it holds, neither
    check has anything to say of the rows. A second statement of :func:`_matches` for the
    decoder's types, kept for its time (judging the bench's rowset: 3.3 us by the rule, 1.5
    this way) and pinned against the rule by a property."""
    for row in rows:
        for name, column in columns:
            value: Any = row.get(name)
            kind = type(value)
            if kind is str:
                if column.type != "string":
                    return False
            elif kind is int:
                if column.type != "number":
                    return False
            elif kind is float:
                if column.type != "number" or not math.isfinite(value):
                    return False
            elif kind is not bool or column.type != "boolean":
                return False
    return True


def _violation(
    rows: list[dict[str, Any]], name: str, column: Column
) -> tuple[int, str, str] | None:
    """(offending rows, first sample, what it is) over ALL rows, or None: counted, never
    sampled; the first offender alone is quoted."""
    count, first = 0, None
    for row in rows:
        present = name in row
        value = row.get(name)
        if value is None:
            if column.nullable:
                continue
            count += 1
            if first is None:
                first = ("null", "null") if present else ("no such key", "missing")
            continue
        if _matches(value, column.type):
            continue
        count += 1
        if first is None:
            first = (_render(value), _type_name(value))
    return None if first is None else (count, first[0], first[1])


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def judge_columns(contract: Contract, call: ToolCall, *, mode: str) -> Judgement:
    """Judge one finished call against its tool's ``result_columns``: per declared column, a
    ``missing-column`` finding when no row has it (checked first, nullable or not), else one
    ``column-type-mismatch`` finding when any row holds something else. ``mode`` only
    changes what the message says happened (``enforce``: the result was refused)."""
    if mode not in MODES:
        raise UsageError(
            f"check_column_types mode must be one of {MODES!r}, got {mode!r}",
            option="check_column_types",
        )
    if call.is_error or call.content is None or not contract.result_columns:
        return NOT_APPLICABLE
    rows = _rows(call.content)
    if rows is None:
        return NOT_APPLICABLE
    if _every_cell_matches(rows, contract.result_columns):
        return Judgement.passed()
    tool, call_id, n = call.tool, call.tool_call_id, len(rows)
    outcome = _OUTCOME[mode]
    findings: list[Finding] = []
    for name, column in contract.result_columns:
        if not any(map(dict.__contains__, rows, repeat(name))):
            findings.append(
                Finding(
                    check=MISSING,
                    kind=MISSING,
                    seam=SEAM,
                    subjects=(("tool", tool),),
                    witnesses=(call_id,),
                    predicate=name,
                    facts={"column": name, "declared": column.type, "of": n},
                    message=(
                        f"'{tool}' declares a column '{name}' ({column.type}) that is in NONE "
                        f"of the {n} row{_plural(n)} it returned. This is not a mistyped value "
                        "— the column is simply not there, so anything downstream that "
                        "keys on it reads a rowset that cannot answer, and a row missing the "
                        "column is indistinguishable from a row whose value is nothing. "
                        f"{CEILING} Call id {call_id}. {outcome}"
                    ),
                )
            )
            continue
        found = _violation(rows, name, column)
        if found is None:
            continue
        count, sample, got = found
        hint = "" if column.nullable or got not in ("null", "missing") else _NULLABLE_HINT
        findings.append(
            Finding(
                check=MISMATCH,
                kind=MISMATCH,
                seam=SEAM,
                subjects=(("tool", tool),),
                witnesses=(call_id,),
                predicate=name,
                facts={
                    "column": name,
                    "declared": column.type,
                    "nullable": column.nullable,
                    "rows": count,
                    "of": n,
                    "got": got,
                    "sample": sample,
                },
                message=(
                    f"'{tool}' declares column '{name}' as {column.type}, and {count} of {n} "
                    f"row{_plural(n)} hold something else — the first is {sample} ({got}). "
                    f"{hint}{CEILING} Call id {call_id}. {outcome}"
                ),
            )
        )
    return Judgement.found(*findings) if findings else Judgement.passed()


def refusal_text(tool: str, findings: Sequence[Finding]) -> str:
    """The sentence ``enforce`` serves instead of the rows, from the findings' ``facts``
    alone, so an auditor re-derives what the model read from the recorded findings. Names
    mismatches first, then missing columns, at most :data:`MAX_NAMED_IN_REFUSAL`."""
    mismatched = [f.facts for f in findings if f.kind == MISMATCH]
    missing = [f.facts for f in findings if f.kind == MISSING]
    parts = [
        f"'{v.get('column')}' is declared {v.get('declared')} and {v.get('rows')} of "
        f"{v.get('of')} rows hold {v.get('got')} (first: {v.get('sample')})"
        for v in mismatched[:MAX_NAMED_IN_REFUSAL]
    ]
    parts += [
        f"'{m.get('column')}' is declared but present in no row"
        for m in missing[: max(0, MAX_NAMED_IN_REFUSAL - len(parts))]
    ]
    more = len(mismatched) + len(missing) - len(parts)
    tail = f", and {more} more" if more > 0 else ""
    return (
        f"{refusal_opening(tool)} — {'; '.join(parts)}{tail}. Fix the tool so the column "
        "holds what it declares, or change the declaration. No data was returned."
    )


def refusal_opening(tool: str) -> str:
    """How every refusal of ``tool``'s rows opens (a replay tells a refusal from a tool's
    own error by it)."""
    return f"Result rejected: {tool} returned rows that disagree with the columns it declares"


def canary() -> Judgement:
    """The check run on its synthetic defect: a ``number`` column holding ``"1240"``."""
    contract = Contract(
        tool="canary_tool", result_columns=(("canary_count", Column(type="number")),)
    )
    call = ToolCall(
        tool="canary_tool",
        tool_call_id="canary",
        arguments={},
        content='[{"canary_count": "1240"}]',
        is_error=False,
        turn=0,
        history_index=0,
    )
    judged = judge_columns(contract, call, mode="warn")
    return dataclasses.replace(
        judged, findings=tuple(dataclasses.replace(f, synthetic=True) for f in judged.findings)
    )
