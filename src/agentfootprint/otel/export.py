"""After the fact, to a collector: a run's spans built by the SDK and sent over OTLP/HTTP.

The spans are made on a private tracer provider whose id generator hands out the
descriptions' own ids (derived from the run id) and whose sampler keeps every span, so the
same log always sends the same trace; they are collected in memory, then handed to the
exporter in one batch, whose answer says whether the collector took them. Imported only
once :func:`agentfootprint.otel.require` found the SDK and the OTLP exporter.
"""

from __future__ import annotations

import contextlib
import logging
import os
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from agentfootprint.errors import AgentFootprintError, UsageError
from agentfootprint.otel.emit import Emitter
from agentfootprint.otel.from_log import spans_from_log
from agentfootprint.otel.mapping import SCHEMA_URL, SpanDescription
from agentfootprint.verify.verifier import RowSource
from agentfootprint.version import __version__

__all__ = [
    "ExportError",
    "export_run",
    "finished_spans",
    "otlp_exporter",
    "send",
    "traces_endpoint",
]

#: the traces path an OTLP/HTTP endpoint given without one gets (the OTLP specification's)
TRACES_PATH = "/v1/traces"
#: the instrumentation scope of every span
SCOPE = "agentfootprint"


class ExportError(AgentFootprintError):
    """The collector did not take the spans (refused, unreachable, timed out)."""


class _PlannedIds(IdGenerator):
    """Hands out the ids of the span about to start (``plan``), so the SDK's spans carry the
    descriptions' deterministic ids."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def plan(self, span: SpanDescription) -> None:
        self.trace_id, self.span_id = span.trace_id, span.span_id

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


def default_resource() -> Resource:
    """The resource of exported spans: ``service.name`` from ``OTEL_SERVICE_NAME``, else
    ``agentfootprint`` (``OTEL_RESOURCE_ATTRIBUTES`` adds to it, as everywhere in OTel)."""
    return Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or SCOPE})


def finished_spans(
    spans: Sequence[SpanDescription], *, resource: Resource | None = None
) -> list[ReadableSpan]:
    """The SDK's finished spans of ``spans`` (one trace per root), ids and times theirs."""
    ids = _PlannedIds()
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=resource if resource is not None else default_resource(),
        id_generator=ids,
        sampler=ALWAYS_ON,
        shutdown_on_exit=False,
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    try:
        tracer = provider.get_tracer(SCOPE, __version__, schema_url=SCHEMA_URL)
        Emitter(tracer, ids.plan).tree(spans)
        return list(memory.get_finished_spans())
    finally:
        provider.shutdown()


def export_run(
    source: RowSource | str | os.PathLike[str],
    run_id: str,
    exporter: SpanExporter,
    *,
    content: bool = False,
    keys: Iterable[Any] = (),
    resource: Resource | None = None,
) -> list[SpanDescription]:
    """Verify ``run_id``, make its spans from the log and hand them to ``exporter`` in one
    batch; returns their descriptions. Raises
    :class:`~agentfootprint.errors.VerificationError` (nothing exported) when the run does
    not verify, :class:`ExportError` when the exporter fails."""
    spans = spans_from_log(source, run_id, keys=keys, content=content)
    if exporter.export(finished_spans(spans, resource=resource)) is not SpanExportResult.SUCCESS:
        raise ExportError(f"the exporter did not take the {len(spans)} spans of run {run_id}")
    return spans


def traces_endpoint(given: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The OTLP/HTTP traces URL: ``given`` (``/v1/traces`` added when it has no path), else
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as it is, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` with
    ``/v1/traces`` (the OTLP exporter's own rules); None when none is set."""
    env = os.environ if environ is None else environ
    if given is not None:
        parsed = urllib.parse.urlsplit(given)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise UsageError(
                f"--endpoint: expected an http:// or https:// URL of a collector's OTLP/HTTP "
                f"traces endpoint (e.g. http://127.0.0.1:4318/v1/traces), got {given!r}",
                option="--endpoint",
            )
        return given.rstrip("/") + TRACES_PATH if parsed.path in ("", "/") else given
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + TRACES_PATH
    return None


def otlp_exporter(endpoint: str, *, timeout: float = 10.0) -> OTLPSpanExporter:
    """The OTLP/HTTP (protobuf) span exporter for ``endpoint``; headers, certificates and
    compression from the ``OTEL_EXPORTER_OTLP_*`` variables, as the exporter reads them."""
    return OTLPSpanExporter(endpoint=endpoint, timeout=timeout)


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _exporter_logs() -> Iterator[list[str]]:
    """What the OTel packages log while sending, kept (not printed): the command prints its
    own one line."""
    logger = logging.getLogger("opentelemetry")
    handler = _Collected()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def send(
    source: RowSource | str | os.PathLike[str],
    run_id: str,
    endpoint: str,
    *,
    content: bool = False,
    keys: Iterable[Any] = (),
    timeout: float = 10.0,
) -> list[SpanDescription]:
    """``export_run`` to the collector at ``endpoint`` over OTLP/HTTP; an
    :class:`ExportError` says why the collector did not take them (its status, or the
    connection's failure)."""
    exporter = otlp_exporter(endpoint, timeout=timeout)
    try:
        with _exporter_logs() as logged:
            try:
                return export_run(source, run_id, exporter, content=content, keys=keys)
            except ExportError as exc:
                # the first message names the cause (a refused connection...), the last the end
                said = list(dict.fromkeys([*logged[:1], *logged[-1:]]))
                why = f": {' / '.join(said)}" if said else ""
                raise ExportError(
                    f"the collector at {endpoint} did not take the spans of run {run_id}{why}"
                ) from exc
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]  # (the SDK leaves it unannotated)
