"""Live: the spans of an agent's runs as they happen, from the events its listeners get.

One listener (``agent.on``, the public listener API) on the six kinds it reads
(``turn_start``, ``llm_start``, ``llm_end``, ``tool_start``, ``tool_end``, ``turn_end``), so
it rides whichever observer delivery the agent uses: inline (each event as it is emitted)
or ``observer_delivery="deferred"`` (in order, later, by a task beside the run). Either way
the listener only makes spans and ends them; sending them is the span processor's work:
with the SDK's ``BatchSpanProcessor`` ending a span only queues it and a thread of its own
exports, so a slow collector never slows a run (``bench/otel.py`` measures it).
The events give the same facts the log does, and the facts go through the same mapping
(:mod:`agentfootprint.otel.mapping`): the live tree equals the one exported after the fact
from the log, but for the times (live: the clock when the events arrive, a call's and a
tool's start taken back by the duration their end event reports) and the ids (the
tracer's own), and but for what only the log gives (the verifier's outcome). Content, when
asked for, is what the events hold: each reply's text and each tool call's arguments and
result, in the committed form the listener is handed (the request the model was served is
in no event: ``gen_ai.input.messages`` is the after-the-fact exporter's).

``invoke_agent`` starts at ``turn_start`` (under the span current then, if any) and ends at
``turn_end``; a run that ends without one (failed, paused, cancelled) is ended by
:meth:`Instrumentation.close`, or when :data:`MAX_OPEN_RUNS` newer runs are open, with
``error.type`` ``incomplete``: export it from the log for what happened.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Span, Tracer

from agentfootprint.otel.emit import Emitter
from agentfootprint.otel.mapping import (
    INCOMPLETE,
    TOOL_ERROR,
    CallFacts,
    RunFacts,
    ToolFacts,
    agent_span,
    chat_span,
    tool_span,
)
from agentfootprint.runtime.events import (
    AgentEvent,
    LLMEnd,
    LLMStart,
    ToolEnd,
    ToolStart,
    TurnEnd,
    TurnStart,
)

if TYPE_CHECKING:
    from agentfootprint.agent.agent import Agent

__all__ = ["MAX_OPEN_RUNS", "Instrumentation"]

#: the runs whose ``invoke_agent`` span may stay open at once: no event says a run failed or
#: paused, so past this many the oldest is ended (``incomplete``) rather than kept forever
MAX_OPEN_RUNS = 1024


@dataclass(slots=True)
class _CallStarted:
    """A call whose ``llm_start`` arrived and whose ``llm_end`` has not."""

    at: int
    event: LLMStart


@dataclass(slots=True)
class _ToolStarted:
    """A tool call whose ``tool_start`` arrived and whose ``tool_end`` has not: the model
    call whose reply asked for it, and its place among that reply's calls."""

    at: int
    event: ToolStart
    call: int | None
    index: int


@dataclass(slots=True)
class _LiveRun:
    facts: RunFacts
    span: Span
    calls: dict[int, _CallStarted] = field(default_factory=dict)
    tools: dict[Any, _ToolStarted] = field(default_factory=dict)
    #: the call whose reply's tool calls arrive now, and how many arrived
    call: int | None = None
    tool_index: int = 0
    last_end: int = 0


class Instrumentation:
    """The live exporter of one agent (:func:`agentfootprint.otel.instrument`): a listener
    and the spans of the runs under way. ``close()`` unsubscribes and ends what is open."""

    def __init__(
        self,
        agent: Agent,
        tracer: Tracer,
        *,
        content: bool = False,
        clock: Callable[[], int] = time.time_ns,
        max_open: int = MAX_OPEN_RUNS,
    ) -> None:
        config = agent.config
        provider = config.provider
        #: what every run of the agent records in its ``run.open`` (its ``agent``, ``model``
        #: and ``provider`` members)
        self._agent = {
            "agent_id": config.id,
            "agent_name": config.name,
            "provider": str(getattr(provider, "name", type(provider).__name__)),
            "model": config.model,
        }
        self._emitter = Emitter(tracer)
        self._content = content
        self._clock = clock
        self._max_open = max_open
        self._runs: dict[str, _LiveRun] = {}
        self._handlers: dict[type[Any], Callable[[Any, int], None]] = {
            TurnStart: self._turn_start,
            LLMStart: self._llm_start,
            LLMEnd: self._llm_end,
            ToolStart: self._tool_start,
            ToolEnd: self._tool_end,
            TurnEnd: self._turn_end,
        }
        # the six kinds it reads, each through the public listener API (no other event is
        # copied for it); one bus, so they arrive in the order they were emitted
        self._unsubscribe: list[Callable[[], None]] | None = [
            agent.on(kind.kind, self._on) for kind in self._handlers
        ]

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def open_runs(self) -> tuple[str, ...]:
        """The runs whose ``invoke_agent`` span is still open (no ``turn_end`` yet)."""
        return tuple(self._runs)

    def close(self) -> None:
        """Stop listening; end every span still open (``error.type`` ``incomplete``)."""
        if self._unsubscribe is not None:
            for unsubscribe in self._unsubscribe:
                unsubscribe()
            self._unsubscribe = None
        now = self._clock()
        for run_id in list(self._runs):
            self._end(run_id, now, outcome=None, error=INCOMPLETE)

    # -- the listener ---------------------------------------------------------------------
    def _on(self, event: AgentEvent) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event, self._clock())

    def _run(self, run_id: str, now: int, conversation_id: str | None = None) -> _LiveRun:
        """The run's state, opened at its first event seen (``turn_start``, or whichever
        came first when a deferred delivery dropped it)."""
        run = self._runs.get(run_id)
        if run is None:
            while len(self._runs) >= self._max_open:  # the oldest never had its turn_end
                self._end(next(iter(self._runs)), now, outcome=None, error=INCOMPLETE)
            facts = RunFacts(
                run_id=run_id,
                conversation_id=conversation_id,
                start_ns=now,
                end_ns=now,
                **self._agent,
            )
            run = _LiveRun(facts=facts, span=self._emitter.start(agent_span(facts)), last_end=now)
            self._runs[run_id] = run
        return run

    def _turn_start(self, event: TurnStart, now: int) -> None:
        self._run(event.run_id, now, event.conversation_id)

    def _llm_start(self, event: LLMStart, now: int) -> None:
        self._run(event.run_id, now).calls[event.call] = _CallStarted(at=now, event=event)

    def _llm_end(self, event: LLMEnd, now: int) -> None:
        run = self._run(event.run_id, now)
        started = run.calls.pop(event.call, None)
        call = CallFacts(
            call=event.call,
            model=started.event.model if started is not None else run.facts.model,
            start_ns=self._start(run, now, event.duration_ms, started),
            end_ns=now,
            request_digest=event.request_digest,
            temperature=started.event.temperature if started is not None else None,
            usage=event.usage,
            finish_reason=event.stop_reason,
            reply={"content": event.content},
        )
        self._emitter.emit(chat_span(run.facts, call, content=self._content), run.span)
        run.call, run.tool_index = event.call, 0
        run.last_end = max(run.last_end, now)

    def _tool_start(self, event: ToolStart, now: int) -> None:
        run = self._run(event.run_id, now)
        run.tools[event.tool_call_id] = _ToolStarted(
            at=now, event=event, call=run.call, index=run.tool_index
        )
        run.tool_index += 1

    def _tool_end(self, event: ToolEnd, now: int) -> None:
        run = self._run(event.run_id, now)
        started = run.tools.pop(event.tool_call_id, None)
        tool = ToolFacts(
            call=started.call if started is not None else run.call,
            index=started.index if started is not None else run.tool_index,
            tool=event.tool,
            tool_call_id=event.tool_call_id,
            start_ns=self._start(run, now, event.duration_ms, started),
            end_ns=now,
            error=TOOL_ERROR if event.is_error else None,
            arguments=started.event.arguments if started is not None else None,
            result=event.result,
            has_content=started is not None,
        )
        self._emitter.emit(tool_span(run.facts, tool, content=self._content), run.span)
        run.last_end = max(run.last_end, now)

    def _turn_end(self, event: TurnEnd, now: int) -> None:
        self._run(event.run_id, now)
        outcome = "stopped_early" if event.stopped_early else "answered"
        self._end(event.run_id, now, outcome=outcome, error=None)

    # -- ends -----------------------------------------------------------------------------
    @staticmethod
    def _start(
        run: _LiveRun, now: int, duration_ms: float, started: _CallStarted | _ToolStarted | None
    ) -> int:
        """When a call or tool call began: its end less the duration its end event reports
        (right under a deferred delivery too), else when its start event arrived; never
        before the run's span."""
        if duration_ms > 0:
            begun = now - int(duration_ms * 1_000_000)
        else:
            begun = started.at if started is not None else now
        return max(run.facts.start_ns, min(begun, now))

    def _end(self, run_id: str, now: int, *, outcome: str | None, error: str | None) -> None:
        run = self._runs.pop(run_id)
        for number, asked in run.calls.items():  # started, never answered
            call = CallFacts(
                call=number,
                model=asked.event.model,
                start_ns=asked.at,
                end_ns=now,
                temperature=asked.event.temperature,
                error=INCOMPLETE,
            )
            self._emitter.emit(chat_span(run.facts, call, content=self._content), run.span)
        for started in run.tools.values():  # started, never ended
            tool = ToolFacts(
                call=started.call,
                index=started.index,
                tool=started.event.tool,
                tool_call_id=started.event.tool_call_id,
                start_ns=started.at,
                end_ns=now,
                error=INCOMPLETE,
                arguments=started.event.arguments,
                has_content=True,
            )
            self._emitter.emit(tool_span(run.facts, tool, content=self._content), run.span)
        facts = dataclasses.replace(
            run.facts, end_ns=max(now, run.last_end), outcome=outcome, error=error
        )
        self._emitter.finish(run.span, agent_span(facts))
