"""The one emitter: span descriptions made OpenTelemetry spans, each with its own times.

Both exporters use it: the live one on the tracer the user gives (or the global one), the
after-the-fact one on a private tracer provider whose ids are the descriptions' own
(:mod:`agentfootprint.otel.export`). Only the OpenTelemetry API is needed here; this module
is imported only once :func:`agentfootprint.otel.require` found it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from agentfootprint.otel.mapping import SpanDescription

__all__ = ["Emitter"]

_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}


class Emitter:
    """Starts and ends spans from descriptions on one tracer, at the descriptions' times.

    ``plan(description)`` is called just before each span starts (the after-the-fact
    exporter's provider takes its ids from it)."""

    def __init__(
        self, tracer: Tracer, plan: Callable[[SpanDescription], None] | None = None
    ) -> None:
        self._tracer = tracer
        self._plan = plan

    def start(
        self, span: SpanDescription, parent: Span | None = None, *, root: bool = False
    ) -> Span:
        """Start ``span`` under ``parent``; without one, under the current span (``root``:
        under none, a trace of its own)."""
        if self._plan is not None:
            self._plan(span)
        if parent is not None:
            context: Context | None = trace.set_span_in_context(parent)
        else:
            context = Context() if root else None
        return self._tracer.start_span(
            span.name,
            context=context,
            kind=_KINDS[span.kind],
            attributes=span.attributes,
            start_time=span.start_ns,
        )

    def finish(self, started: Span, span: SpanDescription, *, attributes: bool = True) -> None:
        """End ``started`` as ``span`` says: every attribute (the end knows more than the
        start did: a run's outcome; ``attributes=False``: the start had them all), the
        status, the end time."""
        if attributes:
            started.set_attributes(span.attributes)
        if span.error is not None:
            started.set_status(Status(StatusCode.ERROR, span.error))
        started.end(end_time=span.end_ns)

    def emit(self, span: SpanDescription, parent: Span | None) -> None:
        """Start and end ``span`` at once (its times are its own)."""
        self.finish(self.start(span, parent), span, attributes=False)

    def tree(self, spans: Sequence[SpanDescription]) -> None:
        """A whole trace: the spans without a parent first, as roots of their own, then
        each under its parent (by key), parents ended last."""
        started: dict[str, Span] = {}
        for span in spans:
            parent = started.get(span.parent) if span.parent is not None else None
            started[span.key] = self.start(span, parent, root=parent is None)
        for span in reversed(spans):
            self.finish(started[span.key], span)
