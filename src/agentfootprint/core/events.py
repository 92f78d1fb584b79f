"""Typed events: keyword-only frozen dataclasses, each with its seed ``kind`` name.

Listeners subscribe with ``agent.on(name, fn)`` where ``name`` is an event kind,
a domain wildcard (``"agentfootprint.stream.*"``), ``"agentfootprint.*"`` or
``"*"``. Each event class is declared by the feature that emits it; events that record a
decision or a finding (a feature's ``recorded_events``) are also written to the log as
``event`` rows; stream events are not. ``EVENT_KINDS`` and ``RECORDED_KINDS`` derive from
the declarations (:mod:`agentfootprint.features.registry`).
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
    "AgentEvent",
    "ArgsInvalid",
    "EventBus",
    "IterationEnd",
    "IterationStart",
    "LLMEnd",
    "LLMStart",
    "LLMToken",
    "Listener",
    "ToolEnd",
    "ToolStart",
    "TurnEnd",
    "TurnStart",
    "WireExchange",
    "event_kinds",
]

log = logging.getLogger("agentfootprint.events")


@dataclass(frozen=True, kw_only=True)
class AgentEvent:
    """Base of every typed event."""

    kind: ClassVar[str] = "agentfootprint.event"
    run_id: str

    def payload(self) -> dict[str, Any]:
        """The event's fields as plain data (what a recorded event row holds). A field
        declared with ``metadata={"omit_none": True}`` is left out while it is None (a field
        an opt-in feature fills: off, the payload keeps its earlier members)."""
        return {
            f.name: value
            for f in dataclasses.fields(self)
            if (value := getattr(self, f.name)) is not None or not f.metadata.get("omit_none")
        }


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
    #: the length of the assembled system prompt (the served pieces' texts joined by a blank
    #: line), always
    system_prompt_chars: int = 0
    #: the assembled system prompt itself, only with ``record_system_prompt=True``
    system_prompt_text: str | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True)
class LLMToken(AgentEvent):
    """A piece of a streamed reply as it arrives (the recorded reply is the assembled one)."""

    kind: ClassVar[str] = "agentfootprint.stream.token"
    iteration: int
    call: int
    text: str


@dataclass(frozen=True, kw_only=True)
class WireExchange(AgentEvent):
    """The HTTP attempts behind one model call: per attempt the digests of the exact request
    body sent and response body received (salted commitments under a redaction policy),
    the status, and why it failed. Recorded in the call's commit."""

    kind: ClassVar[str] = "agentfootprint.wire.exchange"
    call: int
    attempts: list[dict[str, Any]]


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


def __getattr__(name: str) -> frozenset[str]:
    """``EVENT_KINDS`` and ``RECORDED_KINDS``, derived from the features' declarations."""
    from agentfootprint.features import registry

    if name == "EVENT_KINDS":
        return event_kinds()
    if name == "RECORDED_KINDS":
        return registry.recorded_kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def event_kinds() -> frozenset[str]:
    """Every event kind a feature declares."""
    from agentfootprint.features import registry

    return frozenset(cls.kind for cls in registry.event_classes())


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
        self._wanted: dict[str, bool] = {}

    def on(self, pattern: str, listener: Listener) -> Callable[[], None]:
        """Subscribe; returns a function that unsubscribes. Unknown names are refused."""
        kinds = event_kinds()
        if not isinstance(pattern, str) or not any(_matches(pattern, k) for k in kinds):
            known = ", ".join(sorted(kinds))
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
        self._wanted.clear()

        def unsubscribe() -> None:
            if entry in self._listeners:
                self._listeners.remove(entry)
                self._wanted.clear()

        return unsubscribe

    def wants(self, kind: str) -> bool:
        """Some listener takes ``kind`` (kept per kind until the subscriptions change)."""
        wanted = self._wanted.get(kind)
        if wanted is None:
            wanted = self._wanted[kind] = any(_matches(p, kind) for p, _ in self._listeners)
        return wanted

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
