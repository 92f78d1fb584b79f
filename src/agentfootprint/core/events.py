"""Typed events: keyword-only frozen dataclasses, each with its seed ``kind`` name.

Listeners subscribe with ``agent.on(name, fn)`` where ``name`` is an event kind,
a domain wildcard (``"agentfootprint.stream.*"``), ``"agentfootprint.*"`` or
``"*"``. Events that record a decision or a finding (``RECORDED_KINDS``) are
also written to the log as ``event`` rows; stream events are not.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.errors import UsageError

__all__ = [
    "EVENT_KINDS",
    "RECORDED_KINDS",
    "AgentEvent",
    "ArgsInvalid",
    "EventBus",
    "IterationEnd",
    "IterationStart",
    "LLMEnd",
    "LLMStart",
    "Listener",
    "ToolEnd",
    "ToolStart",
    "TurnEnd",
    "TurnStart",
]

log = logging.getLogger("agentfootprint.events")


@dataclass(frozen=True, kw_only=True)
class AgentEvent:
    """Base of every typed event."""

    kind: ClassVar[str] = "agentfootprint.event"
    run_id: str

    def payload(self) -> dict[str, Any]:
        """The event's fields as plain data (what a recorded event row holds)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True, kw_only=True)
class TurnStart(AgentEvent):
    kind: ClassVar[str] = "agentfootprint.agent.turn_start"
    conversation_id: str
    message: str


@dataclass(frozen=True, kw_only=True)
class TurnEnd(AgentEvent):
    kind: ClassVar[str] = "agentfootprint.agent.turn_end"
    answer: str
    iterations: int
    stopped_early: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class IterationStart(AgentEvent):
    kind: ClassVar[str] = "agentfootprint.agent.iteration_start"
    iteration: int


@dataclass(frozen=True, kw_only=True)
class IterationEnd(AgentEvent):
    kind: ClassVar[str] = "agentfootprint.agent.iteration_end"
    iteration: int


@dataclass(frozen=True, kw_only=True)
class LLMStart(AgentEvent):
    kind: ClassVar[str] = "agentfootprint.stream.llm_start"
    iteration: int
    call: int
    model: str
    messages: int
    tools: int
    temperature: float | None = None


@dataclass(frozen=True, kw_only=True)
class LLMEnd(AgentEvent):
    kind: ClassVar[str] = "agentfootprint.stream.llm_end"
    iteration: int
    call: int
    content: str
    tool_calls: int
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str = ""
    duration_ms: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ToolStart(AgentEvent):
    kind: ClassVar[str] = "agentfootprint.stream.tool_start"
    iteration: int
    tool_call_id: str
    tool: str
    arguments: Any


@dataclass(frozen=True, kw_only=True)
class ToolEnd(AgentEvent):
    kind: ClassVar[str] = "agentfootprint.stream.tool_end"
    iteration: int
    tool_call_id: str
    tool: str
    result: str
    is_error: bool = False
    duration_ms: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ArgsInvalid(AgentEvent):
    kind: ClassVar[str] = "agentfootprint.validation.args_invalid"
    iteration: int
    tool_call_id: str
    tool: str
    mode: str
    issues: list[dict[str, Any]]


_ALL: tuple[type[AgentEvent], ...] = (
    TurnStart,
    TurnEnd,
    IterationStart,
    IterationEnd,
    LLMStart,
    LLMEnd,
    ToolStart,
    ToolEnd,
    ArgsInvalid,
)
EVENT_KINDS: frozenset[str] = frozenset(cls.kind for cls in _ALL)
RECORDED_KINDS: frozenset[str] = frozenset({ArgsInvalid.kind})

Listener = Callable[[AgentEvent], Any]


def _matches(pattern: str, kind: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith(".*"):
        return kind.startswith(pattern[:-1])
    return pattern == kind


class EventBus:
    """Delivers events to listeners in subscription order; a failing listener is logged."""

    def __init__(self) -> None:
        self._listeners: list[tuple[str, Listener]] = []

    def on(self, pattern: str, listener: Listener) -> Callable[[], None]:
        """Subscribe; returns a function that unsubscribes. Unknown names are refused."""
        if not isinstance(pattern, str) or not any(_matches(pattern, k) for k in EVENT_KINDS):
            known = ", ".join(sorted(EVENT_KINDS))
            raise UsageError(
                f"on() argument 'name': no event matches {pattern!r}; use one of {known}, a "
                "domain wildcard such as 'agentfootprint.stream.*', 'agentfootprint.*' or '*'",
                option="name",
            )
        if not callable(listener):
            raise UsageError(
                f"on() argument 'listener' for {pattern!r} is not callable", option="listener"
            )
        entry = (pattern, listener)
        self._listeners.append(entry)

        def unsubscribe() -> None:
            if entry in self._listeners:
                self._listeners.remove(entry)

        return unsubscribe

    def wants(self, kind: str) -> bool:
        return any(_matches(p, kind) for p, _ in self._listeners)

    async def emit(self, event: AgentEvent) -> None:
        for pattern, listener in list(self._listeners):
            if not _matches(pattern, event.kind):
                continue
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("listener %r for %s raised; the run goes on", listener, event.kind)
