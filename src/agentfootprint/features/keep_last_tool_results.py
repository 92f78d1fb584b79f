"""``keep_last_tool_results``: each tool's latest result stays served beyond the window.

Only meaningful beside ``window`` (the seed: "Only meaningful beside .window(...)"): without
a window the option is checked (a bad value is refused at construction) and then ignored,
so the run records what it records today. With a window it defaults to 2; ``False`` or 0
switches it off.

A pin is one tool's latest call: the assistant message that made it with every tool result
answering that message (a parallel batch is one slot, and a call never leaves its results),
served with the user message of its turn so the served list still opens on a user turn.
It holds while the turn it belongs to is outside the window and the tool has not been
called since (a newer call is the new pin, or is inside the window). At most this many
tools are pinned, the most recent first.

Turns here are user turns, so every boundary the window moves at is a new request; the
seed's "released when the person asks something new" would release every pin at the very
boundary it exists for. What bounds a pin here is the seed's stand-down rule instead: a pin
that blocked two consecutive boundaries stands down at the next one, on the record
(:class:`PinStoodDown`). The selection is computed by ``context_window`` from the history
alone (:func:`pins`), so it is a pure function of committed state and replays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.features.base import MAX_COUNT, MISSING, Feature, Options, OptionSpec, refuse
from agentfootprint.runtime.events import AgentEvent

OPTION = "keep_last_tool_results"
#: the default with a window (the seed's)
DEFAULT = 2
#: boundaries a pin may block before it stands down
HOLDS = 2


@dataclass(frozen=True, kw_only=True)
class PinStoodDown(AgentEvent):
    """A tool's pinned result blocked two consecutive window boundaries and left."""

    kind: ClassVar[str] = "agentfootprint.context.pin_stood_down"
    iteration: int | None
    tool: str
    #: the pinned messages, half-open ``[start, end)`` indices of the history
    messages: list[int]
    boundaries: int
    #: ``ledger-fact`` for a hold of ``keep_ledger_facts`` (absent: a tool's latest result)
    pin_kind: str | None = field(default=None, metadata={"omit_none": True, "name": "kind"})


@dataclass(frozen=True, slots=True)
class Pin:
    """One tool's latest call outside the window, and the history ranges serving it."""

    tool: str
    call: int  #: the assistant message's index in the history
    ranges: tuple[tuple[int, int], ...]  #: half-open, increasing
    blocked: int  #: the boundaries it has blocked (it holds while this is <= HOLDS)
    #: None: a tool's latest result (``keep_last_tool_results``); ``ledger-fact``: a turn the
    #: model declared a fact in (``keep_ledger_facts``)
    kind: str | None = None


def _check(value: Any, given: Mapping[str, Any]) -> int | None:
    windowed = given.get("window", MISSING) not in (MISSING, None)
    if value is MISSING:
        return DEFAULT if windowed else None
    if value is False:
        value = 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise refuse(
            OPTION,
            f"must be a non-negative integer number of tools up to {MAX_COUNT} (or False: "
            f"off), got {value!r}",
        )
    return value if windowed else None


def pins(
    history: Sequence[Mapping[str, Any]],
    starts: Sequence[int],
    latest: Mapping[str, int],
    keep_last_turns: int,
    limit: int,
) -> tuple[list[Pin], list[Pin]]:
    """The pins that hold (at most ``limit`` tools, most recent first) and those standing
    down at this boundary. ``starts``: each turn's first index; ``latest``: each tool's
    latest calling assistant message."""
    if limit <= 0 or len(starts) <= keep_last_turns:
        return [], []
    kept_from = starts[-keep_last_turns]
    held: list[Pin] = []
    down: list[Pin] = []
    for tool, call in sorted(latest.items(), key=lambda item: (-item[1], item[0])):
        if call < kept_from:
            _sort(_pin(history, starts, keep_last_turns, tool, call, None), held, down)
    chosen: list[Pin] = []
    tools = 0
    for pin in held:
        if tools < limit:
            chosen.append(pin)
            tools += 1
    return chosen, down


def fact_pins(
    history: Sequence[Mapping[str, Any]],
    starts: Sequence[int],
    facts: Mapping[str, str],
    keep_last_turns: int,
    limit: int,
) -> tuple[list[Pin], list[Pin]]:
    """``keep_ledger_facts``: the calls whose results the model declared facts (``facts``:
    tool call id -> tool, the ledger's current standings), held past the window newest
    first, at most ``limit``, under the same stand-down rule as :func:`pins`."""
    if limit <= 0 or len(starts) <= keep_last_turns or not facts:
        return [], []
    kept_from = starts[-keep_last_turns]
    calls: dict[int, str] = {}  # the assistant message making a fact's call -> its tool
    for index in range(kept_from - 1, -1, -1):
        message = history[index]
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if isinstance(call, Mapping) and call.get("id") in facts and index not in calls:
                calls[index] = facts[call["id"]]
    held: list[Pin] = []
    down: list[Pin] = []
    for call, tool in sorted(calls.items(), key=lambda item: -item[0]):
        _sort(_pin(history, starts, keep_last_turns, tool, call, "ledger-fact"), held, down)
    return held[:limit], down


def _pin(
    history: Sequence[Mapping[str, Any]],
    starts: Sequence[int],
    keep_last_turns: int,
    tool: str,
    call: int,
    kind: str | None,
) -> Pin:
    """The pin of the call at ``call`` (outside the window), with the boundaries its turn
    has been outside it."""
    turn = _turn_of(starts, call)
    blocked = len(starts) - 1 - (turn + keep_last_turns) + 1
    ranges = _unit(history, starts[turn], call)
    return Pin(tool=tool, call=call, ranges=ranges, blocked=blocked, kind=kind)


def _sort(pin: Pin, held: list[Pin], down: list[Pin]) -> None:
    """A pin holds through :data:`HOLDS` blocked boundaries and stands down at the next."""
    if pin.blocked <= HOLDS:
        held.append(pin)
    elif pin.blocked == HOLDS + 1:
        down.append(pin)


def _turn_of(starts: Sequence[int], index: int) -> int:
    from bisect import bisect_right

    return max(0, bisect_right(starts, index) - 1)


def _unit(
    history: Sequence[Mapping[str, Any]], user: int, call: int
) -> tuple[tuple[int, int], ...]:
    """The turn's user message, and the call with every result answering it."""
    end = call + 1
    while end < len(history) and history[end].get("role") == "tool":
        end += 1
    if user == call:
        return ((call, end),)
    return ((user, user + 1), (call, end))


FEATURE: Feature[Options] = Feature(
    name="keep-last-tool-results",
    summary="each tool's latest result pinned beyond the window",
    order=26,
    options=(
        OptionSpec(
            name=OPTION,
            seed="keepLastToolResults",
            check=_check,
            recorded=True,
            summary="tools whose latest result the window keeps",
        ),
    ),
    events=(PinStoodDown,),
    recorded_events=(PinStoodDown,),
    active=lambda options: bool(options.get(OPTION)),
)
