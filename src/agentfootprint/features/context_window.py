"""``window``: serve the history's last N turns, by reference. Opt-in, Python-side.

``window={"keep_last_turns": N}`` (N >= 1). A turn is a user message and everything up to
the next one, so a window never separates an assistant's tool call from its results. The
rule is "edit the window, never the ledger": the ``history`` stays as recorded, and the
``window`` stage (before each call, after ``messages``) writes ``served_messages``, the
projection-2 segments selecting what is served (``{"history": [start, end|null]}``: slices of
the history, never copies). With ``keep_last_tool_results`` (default 2 with a window) each
tool's latest call and its results stay served beyond the turns
(:mod:`agentfootprint.features.keep_last_tool_results` says how long).

Each time the window moves, what left is recorded: one ``agentfootprint.context.evicted``
event per contiguous range, ``{turns_left, messages: [start, end), reason: "window"}``
(``turns_left``: the user messages in the range). A call at which nothing moved writes
nothing and records nothing. Compaction by a summariser call is not built yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.core.events import AgentEvent
from agentfootprint.core.run import StageContext
from agentfootprint.features import keep_last_tool_results as pinning
from agentfootprint.features.base import MISSING, Feature, OptionSpec, StageSpec, StateKey, refuse

OPTION = "window"
KEY = "served_messages"

Ranges = list[tuple[int, int]]


@dataclass(frozen=True, kw_only=True)
class ContextEvicted(AgentEvent):
    """Messages of the history left the served window (the history keeps them)."""

    kind: ClassVar[str] = "agentfootprint.context.evicted"
    iteration: int | None
    turns_left: int
    #: half-open ``[start, end)`` indices of the history that are no longer served
    messages: list[int]
    reason: str


def _check(value: Any, given: Mapping[str, Any]) -> dict[str, int] | None:
    if value is MISSING or value is None:
        return None
    if not isinstance(value, Mapping) or set(value) != {"keep_last_turns"}:
        raise refuse(
            OPTION,
            f'must be {{"keep_last_turns": N}} (N >= 1: the user turns served), got {value!r}',
        )
    turns = value["keep_last_turns"]
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise refuse(OPTION, f"keep_last_turns must be an integer >= 1, got {turns!r}")
    return {"keep_last_turns": turns}


@dataclass(slots=True)
class _Index:
    """What the stage knows of the history so far (a cache: rebuilt when it shrinks)."""

    scanned: int = 0
    first: Any = None  #: the history's first message (identity: the same history)
    starts: list[int] = field(default_factory=list)
    latest: dict[str, int] = field(default_factory=dict)

    def update(self, history: Sequence[Mapping[str, Any]]) -> None:
        if len(history) < self.scanned or (history and history[0] is not self.first):
            self.scanned, self.starts, self.latest = 0, [], {}
            self.first = history[0] if history else None
        for index in range(self.scanned, len(history)):
            message = history[index]
            role = message.get("role")
            if role == "user" or (index == 0 and not self.starts):
                self.starts.append(index)
            elif role == "assistant":
                for call in message.get("tool_calls") or ():
                    name = call.get("name") if isinstance(call, Mapping) else None
                    if isinstance(name, str):
                        self.latest[name] = index
        self.scanned = len(history)


def plan(
    history: Sequence[Mapping[str, Any]],
    starts: Sequence[int],
    latest: Mapping[str, int],
    keep_last_turns: int,
    pins: int,
) -> tuple[list[dict[str, Any]], list[pinning.Pin]]:
    """The segments served and the pins standing down at this boundary."""
    kept_from = starts[-keep_last_turns] if len(starts) > keep_last_turns else 0
    held, down = pinning.pins(history, starts, latest, keep_last_turns, pins)
    ranges = sorted(r for pin in held for r in pin.ranges)
    ranges.append((kept_from, len(history)))
    merged = _merge(ranges)
    segments: list[dict[str, Any]] = [{"history": [s, e]} for s, e in merged]
    segments[-1] = {"history": [merged[-1][0], None]}
    return segments, down


def _merge(ranges: Ranges) -> Ranges:
    merged: Ranges = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _resolve(segments: Any, length: int) -> Ranges:
    """The history ranges of recorded segments (absent: the whole history)."""
    if not isinstance(segments, list):
        return [(0, length)]
    found: Ranges = []
    for segment in segments:
        bounds = segment.get("history") if isinstance(segment, Mapping) else None
        if isinstance(bounds, list) and len(bounds) == 2:
            found.append((bounds[0], length if bounds[1] is None else bounds[1]))
    return found


def _subtract(before: Ranges, after: Ranges) -> Ranges:
    """The parts of ``before`` not covered by ``after`` (both increasing, disjoint)."""
    left: Ranges = []
    for start, end in before:
        cursor = start
        for s, e in after:
            if e <= cursor or s >= end:
                continue
            if s > cursor:
                left.append((cursor, s))
            cursor = max(cursor, e)
        if cursor < end:
            left.append((cursor, end))
    return left


async def window(ctx: StageContext) -> None:
    options = ctx.run.config.options
    turns: int = options[OPTION]["keep_last_turns"]
    history: list[dict[str, Any]] = ctx.scope.get("history") or []
    index: _Index = ctx.run.memory.setdefault(OPTION, _Index())
    index.update(history)
    segments, down = plan(
        history, index.starts, index.latest, turns, options.get(pinning.OPTION) or 0
    )
    previous = ctx.scope.get(KEY)
    if previous == segments:
        return
    ctx.scope.set(KEY, segments)
    left = _subtract(_resolve(previous, len(history)), _resolve(segments, len(history)))
    iteration = ctx.scope.get("iteration")
    starts = set(index.starts)
    for start, end in left:
        await ctx.emit(
            ContextEvicted(
                run_id=ctx.run.run_id,
                iteration=iteration,
                turns_left=sum(1 for i in range(start, end) if i in starts),
                messages=[start, end],
                reason="window",
            )
        )
    for pin in down:
        if any(s < e and _subtract([(s, e)], left) != [(s, e)] for s, e in pin.ranges):
            await ctx.emit(
                pinning.PinStoodDown(
                    run_id=ctx.run.run_id,
                    iteration=iteration,
                    tool=pin.tool,
                    messages=[pin.ranges[0][0], pin.ranges[-1][1]],
                    boundaries=pinning.HOLDS,
                )
            )


FEATURE = Feature(
    name="context-window",
    summary="the last N turns served, by reference",
    order=25,
    options=(
        OptionSpec(
            name=OPTION,
            seed=None,
            check=_check,
            recorded=True,
            summary="the turns served (by reference)",
        ),
    ),
    stages=(StageSpec(name="window", fn=window, phase="iteration", order=25),),
    state_keys=(StateKey(name=KEY, structure=True, summary="request.messages, by reference"),),
    events=(ContextEvicted,),
    recorded_events=(ContextEvicted,),
    projection=2,
    active=lambda options: options.get(OPTION) is not None,
)
