"""``time``: the run's clock on the record. What the agent took "now" to be, in which zone,
and when each tool call was dispatched, as rows anyone reads from the log; every instant
read through the clock port as a recorded decision, so a replay next month serves and
writes the instants of the original.

Each turn files one ``clock`` row in ``time_rows`` (``now`` from the turn's start, the zone
the agent was given, else unknown: never the server's, never guessed); each dispatched tool
call files a ``call`` row with its ``dispatched_at``; a run that resumes a pause files a
``clock-on-resume`` row (the turn's clock stays the one it started with). A tool reads
``ctx.time`` (zone, the turn's now, its own dispatch instant). Zones are IANA names, read
from the ``tzdata`` package (its version is on the clock row), so a zone means the same on
every machine.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

import tzdata

from agentfootprint.errors import UsageError
from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    OptionSpec,
    StateKey,
    ToolResult,
    refuse,
    unreadable_decision,
)
from agentfootprint.logformat.canonical import MAX_SAFE_INT
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.tools import ToolOutcome, ToolTime

OPTION = "time"
ROWS = "time_rows"
#: an IANA zone name: ``Area/Location`` (``America/Argentina/Buenos_Aires``), or ``UTC``
_ZONE = re.compile(r"^(UTC|[A-Z][A-Za-z_+-]*(/[A-Za-z0-9_+-]+)+)$")


@dataclass(frozen=True, kw_only=True)
class TimeRead(AgentEvent):
    """One reading of the run's clock (the question: what for; the answer: the instant)."""

    kind: ClassVar[str] = "agentfootprint.time.read"
    purpose: str  #: ``turn-start``, ``dispatch`` or ``resume``
    tool_call_id: str | None = field(default=None, metadata={"omit_none": True})
    at: int  #: unix milliseconds
    source: str  #: ``clock``: the run's clock port


@dataclass(frozen=True, slots=True)
class TimeSettings:
    zone: str | None


@cache
def zone_info(name: str) -> ZoneInfo:
    """The zone, from the ``tzdata`` package (the same data on every machine)."""
    resource = importlib.resources.files("tzdata.zoneinfo").joinpath(*name.split("/"))
    with resource.open("rb") as data:
        return ZoneInfo.from_file(data, key=name)


def checked_run_time(value: Any) -> dict[str, Any] | None:
    """``run(..., time=...)`` checked: ``{"zone": IANA name, "now": unix ms}``, either
    member optional; a :class:`UsageError` naming ``time`` otherwise."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value or set(value) - {"zone", "now"}:
        raise UsageError(
            "run() argument 'time' must be a dict with 'zone' (an IANA name) and/or 'now' "
            f"(unix milliseconds), got {value!r}",
            option="time",
        )
    now = value.get("now")
    if "now" in value and (
        isinstance(now, bool) or not isinstance(now, int) or not 0 <= now <= MAX_SAFE_INT
    ):
        raise UsageError(
            f"run() argument 'time': now must be unix milliseconds (an int from 0), got {now!r}",
            option="time",
        )
    zone = _time({"zone": value.get("zone")}, {})
    checked: dict[str, Any] = {}
    if zone is not None and zone["zone"] is not None:
        checked["zone"] = zone["zone"]
    if "now" in value:
        checked["now"] = now
    return checked


def _time(value: Any, given: Mapping[str, Any]) -> dict[str, Any] | None:
    if value is MISSING or value is None or value is False:
        return None
    if value is True:
        return {"zone": None}
    if not isinstance(value, Mapping) or set(value) - {"zone"}:
        raise refuse(OPTION, f"must be True or {{'zone': 'Europe/Paris'}}, got {value!r}")
    zone = value.get("zone")
    if zone is None:
        return {"zone": None}
    if not isinstance(zone, str) or not _ZONE.match(zone):
        raise refuse(
            OPTION,
            f"zone must be an IANA zone name such as 'Europe/Paris' or 'UTC' (abbreviations "
            f"and bare offsets are ambiguous), got {zone!r}",
        )
    try:
        zone_info(zone)
    except (OSError, ValueError) as exc:
        raise refuse(
            OPTION, f"zone {zone!r} is not in the IANA database (tzdata {tzdata.IANA_VERSION})"
        ) from exc
    return {"zone": zone}


async def _read(
    ctx: HookContext[TimeSettings], purpose: str, tool_call_id: str | None = None
) -> int:
    """An instant of the clock port, asked through the decision port (a replay answers with
    the original's) and recorded."""
    question: dict[str, Any] = {"purpose": purpose}
    if tool_call_id is not None:
        question["tool_call_id"] = tool_call_id
    recorded = ctx.decisions.recorded(TimeRead.kind, question)
    if recorded is None:
        at: int = ctx.clock()
    else:
        value = recorded.get("at")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SAFE_INT:
            raise unreadable_decision(ctx, TimeRead.kind, "instant")
        at = value
    event = TimeRead(
        run_id=ctx.run_id, purpose=purpose, tool_call_id=tool_call_id, at=at, source="clock"
    )
    await ctx.emit(event)
    return at


def _turn_clock(ctx: HookContext[TimeSettings]) -> dict[str, Any] | None:
    """The turn's clock row (the last ``clock`` row of the rows)."""
    rows = ctx.scope.get(ROWS) or []
    return next((row for row in reversed(rows) if row.get("row") == "clock"), None)


class _RunClock(Feature[TimeSettings]):
    def settings(self, options: Mapping[str, Any]) -> TimeSettings:
        return TimeSettings(zone=options[OPTION]["zone"])

    async def turn_start(self, ctx: HookContext[TimeSettings]) -> None:
        given = ctx.time_input or {}
        if "now" in given:
            now, now_source = given["now"], "run"
        else:
            now, now_source = await _read(ctx, "turn-start"), "turn-start"
        if given.get("zone") is not None:
            zone, zone_source = given["zone"], "run"
        else:
            zone = ctx.options.zone
            zone_source = "agent" if zone is not None else "unknown"
        row = {
            "row": "clock",
            "now": now,
            "now_source": now_source,
            "zone": zone,
            "zone_source": zone_source,
            "tzdata": tzdata.IANA_VERSION,
        }
        ctx.scope.append(ROWS, [row])

    async def resumed(self, ctx: HookContext[TimeSettings]) -> None:
        """The turn keeps its clock; the row says when (and, if the caller gave one, with
        which clock) the answer came."""
        given = ctx.time_input or {}
        if "now" in given:
            row: dict[str, Any] = {
                "row": "clock-on-resume",
                "now": given["now"],
                "now_source": "run",
            }
        else:
            now = await _read(ctx, "resume")
            row = {"row": "clock-on-resume", "now": now, "now_source": "resume"}
        if given.get("zone") is not None:
            row["zone"] = given["zone"]
        ctx.scope.append(ROWS, [row])

    async def tool_ready(
        self, ctx: HookContext[TimeSettings], call: ToolResult, grant: dict[str, Any]
    ) -> ToolOutcome | None:
        dispatched = await _read(ctx, "dispatch", call.tool_call_id)
        ctx.scope.append(
            ROWS, [{"row": "call", "tool_call_id": call.tool_call_id, "dispatched_at": dispatched}]
        )
        clock = _turn_clock(ctx)
        grant["time"] = ToolTime(  # the turn's clock, as its row recorded it
            zone=clock["zone"] if clock is not None else ctx.options.zone,
            now=clock["now"] if clock is not None else dispatched,
            dispatched_at=dispatched,
        )
        return None


FEATURE = _RunClock(
    name="time",
    summary="the run's clock as rows: the turn's now and zone, each dispatch instant",
    order=68,  # after credentials (a call that pauses is not dispatched)
    options=(
        OptionSpec(
            name=OPTION,
            seed="time",
            check=_time,
            recorded=True,
            summary="the run's clock (zone and now) and dispatch instants, as rows",
        ),
    ),
    state_keys=(StateKey(name=ROWS, summary="clock, call and clock-on-resume rows"),),
    events=(TimeRead,),
    recorded_events=(TimeRead,),
    ports=("clock", "decisions"),
    active=lambda options: options.get(OPTION) is not None,
)
