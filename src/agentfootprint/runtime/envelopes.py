"""What a tool returns to say what its result covers: ``af.absent``, ``af.described`` and
``af.period`` (docs/integrity.md).

Each builds a plain dict; the tool returns it, and the result rule makes it the canonical
JSON the model reads, the history keeps and the checks read back. The shapes are upstream's,
byte for byte on the wire (snake_case keys, a reserved marker each), so an envelope minted by
another process is read the same way:

* ``absent(...)``: the search ran and matched nothing (``af_absent``). An ANSWER, not an
  error: it names what was looked for and the ground it covered, and says a retry returns the
  same.
* ``described(...)``: typed rows with their provenance (``af_semantics``).
* ``period(...)``: the time the READ covered (inside either): the instants it asked for, what
  its store holds (or ``"unknown"``), and when it ran. ``results_layer`` judges it.

A malformed declaration is refused here, at the line that wrote it (``UsageError``, option
``tools``), by the same rule set the readers use (:mod:`agentfootprint.integrity.period`), so
a mint and a read cannot disagree. Inside a tool, the refusal is the call's error result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from agentfootprint.errors import UsageError
from agentfootprint.integrity.period import (
    HELD_UNKNOWN,
    instant_of,
    period_problem,
    provenance_problem,
    read_period,
    semantics_problem,
)

__all__ = ["ABSENCE_NOTE", "SEMANTICS_NOTE", "absent", "described", "period"]

#: the static sentence every absence carries (upstream's ``ABSENCE_NOTE``, verbatim): never
#: interpolated, so nothing of the caller's rides it
ABSENCE_NOTE = (
    "The search ran and matched nothing. This is an ANSWER, not an error: nothing failed, "
    "nothing was substituted for what was asked, and calling this tool again with the same "
    "arguments returns this same result. `checked` is the ground this answer covers; anything "
    "under `not_checked` or `cannot_cover` is ground it does NOT cover, and reaching that "
    "needs a different question, not a retry."
)
#: the static sentence every described result carries (upstream's ``SEMANTICS_NOTE``,
#: verbatim, from ``src/lib/semantics/types.ts``)
SEMANTICS_NOTE = (
    "Typed data, not prose. `grain` and `provenance` are caveats that travel with the "
    "numbers: check `is_counter` before summing values from a series, read `measured_at` "
    "(and `age_seconds`) as how old the data is, and treat everything under `not_covered` "
    "as ground this result does NOT cover \u2014 a clean look here says nothing about it."
)

Item = str | Mapping[str, Any]


def _refuse(door: str, message: str) -> UsageError:
    return UsageError(f"af.{door}: {message}", option="tools")


def _said(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _items(door: str, section: str, given: Any, *, why_needed: bool) -> list[dict[str, str]]:
    """One coverage list normalized to ``{"what", "why"?}`` items (trimmed), or refused."""
    if given is None:
        return []
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        raise _refuse(
            door,
            f"`{section}` must be a list of strings or {{'what': ..., 'why': ...}} entries, "
            f"got {given!r}; to say nothing about it, leave it out",
        )
    out: list[dict[str, str]] = []
    for i, raw in enumerate(given):
        at = f"{section}[{i}]"
        if isinstance(raw, str):
            if not raw.strip():
                raise _refuse(door, f"{at} is blank: name a source, window or population")
            if why_needed:
                raise _refuse(
                    door,
                    f"{at} is {raw.strip()!r} with no reason. Every `cannot_cover` entry needs a "
                    "`why`: a blind spot this tool can NEVER see is a claim about what it is, and "
                    "a reader cannot act on, escalate or disprove a claim with no reason. Write "
                    f"{{'what': {raw.strip()!r}, 'why': ...}}, or move it to `not_checked` if a "
                    "wider call could reach it",
                )
            out.append({"what": raw.strip()})
            continue
        if not isinstance(raw, Mapping) or not _said(raw.get("what")):
            raise _refuse(
                door,
                f"{at} names no ground. Each entry is either a non-empty string or "
                "{'what': ..., 'why': ...}: what a reader has to know is WHICH source, window or "
                "population this is about",
            )
        extra = sorted(str(k) for k in raw if k not in ("what", "why"))
        if extra:
            raise _refuse(door, f"{at} has the key {extra[0]!r}; an entry is {{what, why?}}")
        what = raw["what"].strip()
        why = raw.get("why")
        if why is not None and not _said(why):
            raise _refuse(door, f"{at} ({what!r}) has a `why` that says nothing: give a reason")
        if why_needed and why is None:
            raise _refuse(
                door,
                f"{at} ({what!r}) has no `why`. Every `cannot_cover` entry needs one: a "
                "permanent blind spot must say what makes it permanent",
            )
        out.append({"what": what} if why is None else {"what": what, "why": why.strip()})
    return out


def _provenance(door: str, given: Any) -> dict[str, Any]:
    problem = provenance_problem(given)
    if problem is not None:
        raise _refuse(door, problem)
    keys = ("measured_at", "source", "age_seconds", "source_export_date")
    return {key: given[key] for key in keys if key in given}


def _period(door: str, given: Any) -> dict[str, Any]:
    problem = period_problem(given)
    read = read_period(given)
    if problem is not None or read is None:
        raise _refuse(door, problem or "`period` is malformed")
    return read.wire()


def absent(
    looked_for: str,
    checked: Sequence[Item],
    *,
    not_checked: Sequence[Item] | None = None,
    cannot_cover: Sequence[Item] | None = None,
    provenance: Mapping[str, Any] | None = None,
    period: Mapping[str, Any] | None = None,
    try_instead: str | None = None,
) -> dict[str, Any]:
    """Say "I looked, and there is nothing" in a way a model cannot read as a failure, and
    cannot productively retry.

    ``looked_for``: what the search was for. ``checked``: the ground it covered (at least
    one source, window or population), each a string or ``{"what": ..., "why": ...}``;
    ``not_checked``: ground this call did not look at; ``cannot_cover``: ground this tool can
    never see (each needs a ``why``). ``provenance``: ``{"measured_at", "source",
    "age_seconds"?, "source_export_date"?}``; ``period``: :func:`period`'s; ``try_instead``:
    one sentence for the model. Return it from the tool::

        return af.absent("failed backup runs for host-103", ["every job in the 02:00 export"],
                         period=af.period(asked_from, asked_to, held=(first, last)))
    """
    if not isinstance(looked_for, str) or not looked_for.strip():
        raise _refuse(
            "absent",
            "`looked_for` must say what was looked for (e.g. 'FLOGI entries on fc1/3'). An "
            "absence that cannot name what it did not find is indistinguishable from a tool "
            f"that returned nothing by accident; got {looked_for!r}",
        )
    what = looked_for.strip()
    covered = _items("absent", "checked", checked, why_needed=False)
    if not covered:
        raise _refuse(
            "absent",
            f"{what!r}: `checked` must name at least one source, window or population that WAS "
            "searched. An absence with no coverage is a null with extra steps: the reader still "
            'cannot tell "I looked and there is nothing" from "I could not look". If you '
            "could not look, that is an error: raise it",
        )
    skipped = _items("absent", "not_checked", not_checked, why_needed=False)
    never = _items("absent", "cannot_cover", cannot_cover, why_needed=True)
    if try_instead is not None and not isinstance(try_instead, str):
        raise _refuse(
            "absent", f"`try_instead` is the sentence the model reads, got {try_instead!r}"
        )
    sentence = None if try_instead is None or not try_instead.strip() else try_instead.strip()
    out: dict[str, Any] = {
        "af_absent": True,
        "outcome": "nothing_found",
        "looked_for": what,
        "checked": covered,
    }
    if skipped:
        out["not_checked"] = skipped
    if never:
        out["cannot_cover"] = never
    if provenance is not None:
        out["provenance"] = _provenance("absent", provenance)
    if period is not None:
        out["period"] = _period("absent", period)
    out["retry_returns_the_same"] = True
    if sentence is not None:
        out["try_instead"] = sentence
    out["note"] = ABSENCE_NOTE
    return out


def described(
    facts: Any, *, provenance: Mapping[str, Any], period: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Typed rows from a system of record, with the caveats that make them honest.

    ``facts``: a non-empty list of rows, each a mapping naming WHAT it is about (a non-empty
    ``"entity"``), its other columns the tool's own. ``provenance``: ``{"measured_at",
    "source", "age_seconds"?, "source_export_date"?}``: when the WORLD was measured (taken
    from the data: the export's time, the newest sample), never when the tool ran.
    ``period``: :func:`period`'s, the time the read covered::

        return af.described(rows, provenance={"measured_at": export_time, "source": "RVTools"},
                            period=af.period(asked_from, asked_to, held=(first, last)))
    """
    if (
        isinstance(facts, str | bytes | Mapping)
        or not isinstance(facts, Sequence)
        or not facts
        or not all(isinstance(row, Mapping) and _said(row.get("entity")) for row in facts)
    ):
        raise _refuse(
            "described",
            "`facts` must be a non-empty list of rows, each a mapping that says WHAT it is "
            f"about (a non-empty 'entity'), got {_clipped(facts)}",
        )
    out: dict[str, Any] = {
        "af_semantics": True,
        "facts": [dict(row) for row in facts],
        "provenance": _provenance("described", provenance),
    }
    if period is not None:
        out["period"] = _period("described", period)
    out["note"] = SEMANTICS_NOTE
    problem = semantics_problem(out)  # the recognizer's own rule set: what it mints, it reads
    if problem is not None:
        raise _refuse("described", problem)
    return out


def period(
    queried_from: str,
    queried_to: str,
    *,
    held: tuple[str, str] | Literal["unknown"],
    read_at: str | None = None,
) -> dict[str, Any]:
    """The time a READ covered, as the wire spells it: ``{"queried": {"from", "to"},
    "held": {"from", "to"} | "unknown", "read_at"?}``.

    ``queried_from``/``queried_to``: the instants the read asked for; ``held``: the
    ``(from, to)`` the store holds at the time of the read, or ``"unknown"`` said out loud when
    the tool cannot vouch for it; ``read_at``: when the read ran. Every instant ISO 8601 with a
    zone (``"2026-09-26T09:00:00Z"``, ``"...+02:00"``), ``from`` not after ``to``::

        af.period("2026-09-26T09:00:00Z", "2026-09-26T10:00:00Z",
                  held=("2026-08-27T02:00:00Z", "2026-09-26T02:00:00Z"))
    """
    for argument, value in (("queried_from", queried_from), ("queried_to", queried_to)):
        if not isinstance(value, str) or instant_of(value) is None:
            raise _refuse(
                "period",
                f"{argument} must be an ISO 8601 instant with a zone, e.g. "
                f"'2026-09-26T08:00:00Z' or '2026-09-26T10:00:00+02:00', got {_clipped(value)}",
            )
    wire_held: Any
    if isinstance(held, str):
        wire_held = held
    elif isinstance(held, Sequence) and len(held) == 2:
        wire_held = {"from": held[0], "to": held[1]}
    else:
        raise _refuse(
            "period",
            f"`held` must be (from, to), two instants, or the literal {HELD_UNKNOWN!r}, "
            f"got {_clipped(held)}",
        )
    wire: dict[str, Any] = {"queried": {"from": queried_from, "to": queried_to}, "held": wire_held}
    if read_at is not None:
        wire["read_at"] = read_at
    return _period("period", wire)


def _clipped(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "\u2026"
