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
event per contiguous range, ``{turns_left, messages: [start, end), reason}`` (``turns_left``:
the user messages in the range; ``reason``: ``window``, or ``summarized`` when
``summarize`` folded it into the summary), and, while pins hold, one
``agentfootprint.context.pins_held`` naming each pin's messages and their size in characters
(so the window's size without the pins is computable from the record). A call at which
nothing moved writes nothing and records nothing.

A library-written message opening with ``WRAP_UP_FRAME_PREFIX`` (the wrap-up call's) or
``OUTPUT_FRAME_PREFIX`` (an answer's teaching message, ``output_type``) is not the person's:
it starts no turn. With ``"summarize": True``
(:mod:`agentfootprint.features.window_summary`) what leaves is folded into a summary by a
model call of its own, served ahead of the window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.features import keep_last_tool_results as pinning
from agentfootprint.features.base import (
    MISSING,
    Feature,
    Options,
    OptionSpec,
    StageSpec,
    StateKey,
    count,
    refuse,
)
from agentfootprint.features.wrap_up import WRAP_UP_FRAME_PREFIX
from agentfootprint.logformat.canonical import canon
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.output_schemas import OUTPUT_FRAME_PREFIX
from agentfootprint.runtime.run import StageContext

OPTION = "window"
KEY = "served_messages"
#: the summary of what left the window (``window_summary``), when ``summarize`` is on
SUMMARY_KEY = "window_summary"
#: the marker a library-written summary message opens with
SUMMARY_FRAME_PREFIX = "[summary of earlier turns — "

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


@dataclass(frozen=True, kw_only=True)
class PinsHeld(AgentEvent):
    """At a boundary the window moved at: the pins that held, with what each kept served."""

    kind: ClassVar[str] = "agentfootprint.context.pins_held"
    iteration: int | None
    #: per pin: ``{tool, messages: [[start, end], ...], chars}`` (``chars``: the characters
    #: of those messages' canonical JSON, as the history records them)
    pins: list[dict[str, Any]]


def _check(value: Any, given: Mapping[str, Any]) -> dict[str, Any] | None:
    if value is MISSING or value is None:
        return None
    if (
        not isinstance(value, Mapping)
        or "keep_last_turns" not in value
        or not set(value) <= {"keep_last_turns", "summarize"}
    ):
        raise refuse(
            OPTION,
            'must be {"keep_last_turns": N} (N >= 1: the user turns served), optionally with '
            f'"summarize": True (fold what leaves into a summary), got {value!r}',
        )
    turns = count(OPTION, value["keep_last_turns"], "keep_last_turns")
    summarize = value.get("summarize", False)
    if not isinstance(summarize, bool):
        raise refuse(OPTION, f"summarize must be True or False, got {summarize!r}")
    # the recorded form of a window without a summary is the one earlier releases recorded
    return (
        {"keep_last_turns": turns, "summarize": True} if summarize else {"keep_last_turns": turns}
    )


def opens_turn(message: Mapping[str, Any]) -> bool:
    """A user message the person wrote: the wrap-up call's marked message and an answer's
    teaching message (``output_type``) start no turn (the summary's never enters the
    history: it is served from ``served_messages``)."""
    content = message.get("content")
    marked = (WRAP_UP_FRAME_PREFIX, OUTPUT_FRAME_PREFIX)
    return not (isinstance(content, str) and content.startswith(marked))


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
            if (role == "user" and opens_turn(message)) or (index == 0 and not self.starts):
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
    facts: Mapping[str, str] | None = None,
    fact_limit: int = 0,
) -> tuple[list[dict[str, Any]], list[pinning.Pin], list[pinning.Pin]]:
    """The segments served, the pins holding and those standing down at this boundary
    (``facts``: the ledger's fact results, held up to ``fact_limit``: ``keep_ledger_facts``)."""
    kept_from = starts[-keep_last_turns] if len(starts) > keep_last_turns else 0
    held, down = pinning.pins(history, starts, latest, keep_last_turns, pins)
    if facts:
        fact_held, fact_down = pinning.fact_pins(
            history, starts, facts, keep_last_turns, fact_limit
        )
        held, down = held + fact_held, down + fact_down
    ranges = sorted(r for pin in held for r in pin.ranges)
    ranges.append((kept_from, len(history)))
    merged = _merge(ranges)
    segments: list[dict[str, Any]] = [{"history": [s, e]} for s, e in merged]
    segments[-1] = {"history": [merged[-1][0], None]}
    return segments, held, down


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


@dataclass(frozen=True, slots=True)
class Selection:
    """What the window serves at this call, and how it got there."""

    segments: list[dict[str, Any]]  #: ``served_messages``
    previous: Any  #: the ``served_messages`` served before (None: the whole history)
    left: Ranges  #: history ranges served before and not now
    held: list[pinning.Pin]
    down: list[pinning.Pin]
    starts: list[int]  #: each turn's first history index


#: the ceiling of fact turns held (``keep_ledger_facts``, declared by ``findings``)
LEDGER_FACTS = "keep_ledger_facts"


def ledger_facts(rows: Any) -> dict[str, str]:
    """The results whose current standing is ``fact`` (last row wins): id -> tool."""
    current: dict[str, Mapping[str, Any]] = {}
    for row in rows or ():
        if isinstance(row, Mapping) and row.get("kind") == "standing":
            call = row.get("tool_call_id")
            if isinstance(call, str):
                current[call] = row
    return {
        call: str(row.get("tool", "?"))
        for call, row in current.items()
        if row.get("standing") == "fact" and not row.get("unknown_id")
    }


def summary_message(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The served message holding the summary of what left (library-written, marked)."""
    return {
        "role": "user",
        "content": SUMMARY_FRAME_PREFIX
        + f"written at call {summary['call']} from the {summary['folded']} history messages "
        "that had left the window; the messages themselves are in the log]\n"
        + str(summary["text"]),
    }


def select(ctx: StageContext) -> Selection:
    """The window at this call, from committed state, against the list served before."""
    options = ctx.config.options
    turns: int = options[OPTION]["keep_last_turns"]
    history: list[dict[str, Any]] = ctx.scope.get("history") or []
    index: _Index = ctx.run_memory.setdefault(OPTION, _Index())
    index.update(history)
    fact_limit = options.get(LEDGER_FACTS) or 0
    segments, held, down = plan(
        history,
        index.starts,
        index.latest,
        turns,
        options.get(pinning.OPTION) or 0,
        ledger_facts(ctx.scope.get("findings_rows")) if fact_limit else None,
        fact_limit,
    )
    summary = ctx.scope.get(SUMMARY_KEY)
    if summary is not None:
        segments.insert(0, {"message": summary_message(summary)})
    previous = ctx.scope.get(KEY)
    left = _subtract(_resolve(previous, len(history)), _resolve(segments, len(history)))
    return Selection(segments, previous, left, held, down, index.starts)


async def record(ctx: StageContext, selection: Selection, reason: str) -> None:
    """The events of a boundary the window moved at: what left, the pins, the stand-downs."""
    iteration = ctx.scope.get("iteration")
    starts = set(selection.starts)
    left = selection.left
    for start, end in left:
        await ctx.emit(
            ContextEvicted(
                run_id=ctx.run_id,
                iteration=iteration,
                turns_left=sum(1 for i in range(start, end) if i in starts),
                messages=[start, end],
                reason=reason,
            )
        )
    if selection.held:
        history = ctx.scope.get("history") or []
        await ctx.emit(
            PinsHeld(
                run_id=ctx.run_id,
                iteration=iteration,
                pins=[
                    {
                        **({"kind": pin.kind} if pin.kind else {}),
                        "tool": pin.tool,
                        "messages": [[s, e] for s, e in pin.ranges],
                        "chars": sum(
                            len(canon(history[i]).decode("utf-8"))
                            for s, e in pin.ranges
                            for i in range(s, e)
                        ),
                    }
                    for pin in selection.held
                ],
            )
        )
    for pin in selection.down:
        if any(s < e and _subtract([(s, e)], left) != [(s, e)] for s, e in pin.ranges):
            await ctx.emit(
                pinning.PinStoodDown(
                    run_id=ctx.run_id,
                    iteration=iteration,
                    tool=pin.tool,
                    messages=[pin.ranges[0][0], pin.ranges[-1][1]],
                    boundaries=pinning.HOLDS,
                    pin_kind=pin.kind,
                )
            )


async def window(ctx: StageContext) -> None:
    selection = select(ctx)
    if selection.previous == selection.segments:
        return
    ctx.scope.set(KEY, selection.segments)
    await record(ctx, selection, "window")


FEATURE: Feature[Options] = Feature(
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
    events=(ContextEvicted, PinsHeld),
    recorded_events=(ContextEvicted, PinsHeld),
    projection=2,
    active=lambda options: options.get(OPTION) is not None,
)
