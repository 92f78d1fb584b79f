"""OpenTelemetry GenAI spans of agentfootprint runs (docs/otel.md), an optional extra.

``invoke_agent`` per run, ``chat`` per model call, ``execute_tool`` per tool call, with the
GenAI semantic conventions' attributes of a pinned version (:data:`SEMCONV_VERSION`), the
run id, each receipt's request digest and, after the fact, the verifier's outcome. One
mapping (:mod:`~agentfootprint.otel.mapping`), two exporters:

* after the fact, from the log (the reference): :func:`spans_from_log` (plain data, no
  OpenTelemetry package needed), :func:`export_run` (to any SDK span exporter) and
  ``agentfootprint otel DB RUN --endpoint URL`` (OTLP/HTTP); deterministic, timed by the
  rows;
* live: :func:`instrument` subscribes one listener to an agent, so it rides the agent's
  observer delivery (``observer_delivery="deferred"``: a slow collector never slows a run).

Content attributes are off by default; on, they hold only committed (redacted) forms.
Nothing else in agentfootprint imports OpenTelemetry, and this package imports it only when
asked: without ``pip install "agentfootprint[otel]"`` a call that needs it raises a
:class:`~agentfootprint.errors.UsageError` saying so.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agentfootprint.errors import UsageError
from agentfootprint.otel.from_log import spans_from_log
from agentfootprint.otel.mapping import SCHEMA_URL, SEMCONV_VERSION, SpanDescription
from agentfootprint.version import install_command

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import TracerProvider

    from agentfootprint.agent.agent import Agent
    from agentfootprint.otel.live import Instrumentation
    from agentfootprint.verify.verifier import RowSource

__all__ = [
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "SpanDescription",
    "export_run",
    "instrument",
    "require",
    "spans_from_log",
]

#: how to get the packages this extra needs

#: the modules each use needs: the live exporter the API; after the fact, the SDK and the
#: OTLP/HTTP exporter as well
API = ("opentelemetry.trace",)
SDK = (
    "opentelemetry.trace",
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)


def require(what: str, modules: Iterable[str] = SDK) -> None:
    """Import ``modules`` or raise a :class:`UsageError` naming ``what`` needed them and the
    command that installs them."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise UsageError(
                f"{what} needs the OpenTelemetry packages ({name} is not installed): "
                + install_command("otel"),
                option="otel",
            ) from exc


def instrument(
    agent: Agent,
    *,
    tracer_provider: TracerProvider | None = None,
    content: bool = False,
) -> Instrumentation:
    """Export the spans of ``agent``'s runs live, through one listener (``agent.on``) on
    the events it reads.

    ``tracer_provider``: where the spans go (default: OpenTelemetry's global provider; give
    it a ``BatchSpanProcessor`` so ending a span never waits for the collector).
    ``content``: add the content attributes the events hold (committed forms). Returns the
    :class:`~agentfootprint.otel.live.Instrumentation`; ``close()`` it (or use it as a
    context manager) to stop listening.
    """
    require("agentfootprint.otel.instrument()", API)
    if not isinstance(content, bool):
        raise UsageError(
            f"instrument() argument 'content' must be True or False, got {content!r}",
            option="content",
        )
    if not callable(getattr(agent, "on", None)) or not hasattr(agent, "config"):
        raise UsageError(
            f"instrument() argument 'agent' must be an agentfootprint Agent, got "
            f"{type(agent).__name__}",
            option="agent",
        )
    from opentelemetry import trace

    from agentfootprint.otel.live import Instrumentation
    from agentfootprint.version import __version__

    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if not callable(getattr(provider, "get_tracer", None)):
        raise UsageError(
            "instrument() argument 'tracer_provider' must be an OpenTelemetry TracerProvider, "
            f"got {type(provider).__name__}",
            option="tracer_provider",
        )
    tracer = provider.get_tracer("agentfootprint", __version__, schema_url=SCHEMA_URL)
    return Instrumentation(agent, tracer, content=content)


def export_run(
    source: RowSource | str | os.PathLike[str],
    run_id: str,
    exporter: SpanExporter,
    *,
    content: bool = False,
    keys: Iterable[Any] = (),
) -> list[SpanDescription]:
    """Verify ``run_id`` and hand its spans, made from the log, to ``exporter`` (any SDK
    ``SpanExporter``: OTLP, the in-memory one...) in one batch; returns their descriptions.
    See :func:`agentfootprint.otel.export.export_run`."""
    require("agentfootprint.otel.export_run()")
    from agentfootprint.otel import export

    return export.export_run(source, run_id, exporter, content=content, keys=keys)
