"""Typed events: keyword-only frozen dataclasses, each with its seed ``kind`` name.

Listeners subscribe with ``agent.on(name, fn)`` where ``name`` is an event kind,
a domain wildcard (``"agentfootprint.stream.*"``), ``"agentfootprint.*"`` or
``"*"``. Each event class is declared by the feature that emits it; events that record a
decision or a finding (a feature's ``recorded_events``) are also written to the log as
``event`` rows; stream events are not. The kinds derive from the
declarations (:func:`agentfootprint.features.registry.event_kinds`).

Listeners are outside the run: each listener call gets its own detached copy of the event
(:class:`EventBus`), so whatever a listener does to it, or raises, never reaches the rows,
the served requests or a tool's arguments.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self, TypeVar

import orjson

from agentfootprint.errors import UsageError
from agentfootprint.logformat.shared_lists import as_list
from agentfootprint.seal.facts import WIRE_EVENT

__all__ = [
    "LEAK_BLOCKED",
    "AgentEvent",
    "ArgsInvalid",
    "EventBus",
    "IterationEnd",
    "IterationStart",
    "LLMEnd",
    "LLMStart",
    "LLMToken",
    "Listener",
    "Snapshot",
    "ToolEnd",
    "ToolStart",
    "TurnEnd",
    "TurnStart",
    "WireExchange",
    "detached",
    "snapshot_of",
]

log = logging.getLogger("agentfootprint.events")

#: the kind of the event that records where the leak guard withheld a secret of the run
#: (declared by the ``credentials`` feature, recorded by the run at the commit it touched)
LEAK_BLOCKED = "agentfootprint.credential.leak_blocked"


@dataclass(frozen=True, kw_only=True)
class AgentEvent:
    """Base of every typed event."""

    kind: ClassVar[str] = "agentfootprint.event"
    run_id: str

    def payload(self) -> dict[str, Any]:
        """The event's fields as plain data (what a recorded event row holds). A field
        declared with ``metadata={"omit_none": True}`` is left out while it is None (a field
        an opt-in feature fills: off, the payload keeps its earlier members); one declared
        with ``metadata={"name": "kind"}`` is the payload's member of that name (a member the
        class attribute ``kind`` would shadow)."""
        return {
            f.metadata.get("name", f.name): value
            for f in dataclasses.fields(self)
            if (value := getattr(self, f.name)) is not None or not f.metadata.get("omit_none")
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        """The event of these payload members (the inverse of :meth:`payload`: a member
        renamed by ``metadata={"name": ...}`` goes back to its field)."""
        names = {f.metadata.get("name", f.name): f.name for f in dataclasses.fields(cls)}
        return cls(**{names.get(key, key): value for key, value in payload.items()})


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

    kind: ClassVar[str] = WIRE_EVENT  # the seal's wire list digest gathers these events
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
    #: the request digest of the call's receipt (its ``request``), so an observer can name
    #: the receipt (the OTel exporter's ``agentfootprint.receipt.request``); left out when
    #: receipts are off. Listener-only: this event is never recorded
    request_digest: str | None = field(default=None, metadata={"omit_none": True})


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


Listener = Callable[[AgentEvent], Any]

_T = TypeVar("_T")
#: the types an event field holds that no listener can change in place
_SCALARS = frozenset({str, int, float, bool, type(None)})


def detached(value: _T) -> _T:
    """A copy of JSON-shaped ``value`` that shares nothing with it, for user code outside
    the run (a listener, a tool's arguments). An orjson round trip: what the run hands out
    is JSON it records (I-JSON: finite numbers, string keys, lists), which the round trip
    gives back equal and of the same types (a float stays a float); anything else is
    deep-copied."""
    try:
        copied: _T = orjson.loads(orjson.dumps(value, default=as_list))
    except orjson.JSONEncodeError:  # not JSON (a set, an object, a huge integer)
        return copy.deepcopy(value)
    return copied


#: one event's members as a listener's copy is made from them: the event class, whether
#: its fields live in the instance ``__dict__``, the members, and the nested ones (name,
#: their JSON, or the value itself when it is not JSON)
Snapshot = tuple[type[Any], bool, dict[str, Any], list[tuple[str, bytes | None, Any]]]


def snapshot_of(event: AgentEvent) -> Snapshot:
    """What every listener's copy of ``event`` is made from (:func:`_snapshot`)."""
    return _snapshot(event)


def _snapshot(event: AgentEvent) -> Snapshot:
    """What every copy of ``event`` is made from, once per delivered event: the nested
    members (lists, dicts) serialised by orjson; scalars are immutable and shared."""
    cls = type(event)
    plain = _PLAIN.get(cls)
    if plain is None:
        plain = _PLAIN[cls] = _in_dict(cls)
    fields = (
        event.__dict__
        if plain
        else {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
    )
    nested: list[tuple[str, bytes | None, Any]] = []
    for name, value in fields.items():
        if type(value) not in _SCALARS:
            try:
                nested.append((name, orjson.dumps(value, default=as_list), None))
            except orjson.JSONEncodeError:  # not JSON: deep-copied for each listener
                nested.append((name, None, value))
    return cls, plain, fields, nested


def _fresh(snapshot: Snapshot) -> AgentEvent:
    """A new event object with its own nested members (the JSON parsed again), so nothing
    one listener does to its copy, even ``object.__setattr__`` on the frozen event, is
    seen by the next, or by the run."""
    cls, plain, fields, nested = snapshot
    event: AgentEvent | None = None
    if plain:  # a new object given the members, without running ``__init__``
        event = object.__new__(cls)
        members = event.__dict__
        members.update(fields)
    else:
        members = dict(fields)
    for name, blob, value in nested:
        members[name] = orjson.loads(blob) if blob is not None else copy.deepcopy(value)
    return event if event is not None else cls(**members)


#: per event class: its fields live in the instance ``__dict__`` (no slots, all in init)
_PLAIN: dict[type[Any], bool] = {}


def _in_dict(cls: type[Any]) -> bool:
    slotted = any("__slots__" in vars(c) for c in cls.__mro__[:-1])
    return not slotted and all(f.init for f in dataclasses.fields(cls))


def _matches(pattern: str, kind: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith(".*"):
        return kind.startswith(pattern[:-1])
    return pattern == kind


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # driven outside an event loop
        return None


class EventBus:
    """Delivers events to listeners in subscription order.

    Listeners are outside the run, so nothing they do reaches it. Each listener call gets
    a detached copy of the event (made only when someone listens), so a listener that
    edits, deletes or replaces members changes its own copy only. A listener that raises
    (any exception, ``asyncio.CancelledError`` included) is logged and the run goes on.
    Two things are not a listener's failure and are honoured as from anywhere else: a
    stop of the process (``KeyboardInterrupt``, ``SystemExit``) and a cancellation of the
    run's task (``task.cancel()``, by the caller or by a listener holding the task), which
    ends the run as cancelled, closed ``failed`` on the record. An async listener is
    awaited before the run goes on. Listeners subscribed or unsubscribed while an event
    is delivered take effect from the next event.
    """

    def __init__(self, kinds: frozenset[str]) -> None:
        #: every event kind the features taking part declare (what ``on`` accepts)
        self._kinds = kinds
        self._listeners: list[tuple[str, Listener]] = []
        self._wanted: dict[str, bool] = {}

    def on(self, pattern: str, listener: Listener) -> Callable[[], None]:
        """Subscribe; returns a function that unsubscribes. Unknown names are refused."""
        kinds = self._kinds
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

    async def emit(self, event: AgentEvent) -> int:
        """Deliver ``event`` to the listeners that take its kind, each its own copy, and
        contain what they raise; returns how many raised."""
        if not self.wants(event.kind):
            return 0
        return await self.deliver(event.kind, _snapshot(event))

    async def deliver(self, kind: str, snapshot: Snapshot) -> int:
        """Deliver the event ``snapshot`` was taken of to the listeners that take ``kind``
        now, each a fresh copy; returns how many raised (each logged)."""
        task = _current_task()
        errors = 0
        for pattern, listener in list(self._listeners):
            if not _matches(pattern, kind):
                continue
            cancels = task.cancelling() if task is not None else 0
            try:
                result = listener(_fresh(snapshot))
                if result is not None and inspect.isawaitable(result):
                    await result
            except (KeyboardInterrupt, SystemExit):
                raise
            except asyncio.CancelledError:
                if task is not None and task.cancelling() > cancels:
                    raise  # the task was cancelled meanwhile: the run (or delivery) ends
                errors += 1
                log.exception("listener %r for %s raised; the run goes on", listener, kind)
            except BaseException:
                errors += 1
                log.exception("listener %r for %s raised; the run goes on", listener, kind)
        return errors
