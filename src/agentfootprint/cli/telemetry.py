"""``otel``: a run's OpenTelemetry GenAI spans, made from its verified log (docs/otel.md)."""

from __future__ import annotations

import click
import orjson

from agentfootprint.cli._boundary import one_line
from agentfootprint.cli._common import DB, Database, open_log
from agentfootprint.errors import UsageError
from agentfootprint.seal.signer import PublicKey, load_public_key

__all__ = ["otel_command"]


@click.command("otel")
@click.argument("db", type=DB)
@click.argument("run_id")
@click.option(
    "--endpoint",
    metavar="URL",
    help="The collector's OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:4318/v1/traces "
    "(a URL without a path gets /v1/traces). Default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
    "else OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the spans, one JSON object a line, instead of sending them (no collector, "
    "and no OpenTelemetry package needed).",
)
@click.option(
    "--content",
    is_flag=True,
    help="Add the content attributes (the messages served, the replies, the tools' "
    "arguments and results), as the log holds them: redacted values stay commitments.",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="KEY",
    help="A public key to pin, as `verify --key`: a run sealed by it is VALID in "
    "agentfootprint.verify.outcome. Repeatable.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds the collector has to take the spans, retries included.",
)
def otel_command(
    db: Database,
    run_id: str,
    endpoint: str | None,
    as_json: bool,
    content: bool,
    keys: tuple[str, ...],
    timeout: float,
) -> None:
    """Send RUN_ID's OpenTelemetry GenAI spans, made from the log, to a collector.

    The run is verified first: a run that does not verify sends nothing. Then one
    `invoke_agent` span for the run, one `chat` per model call and one `execute_tool`
    per tool call, with the GenAI semantic conventions' attributes (version 1.41.0), the
    run id, each receipt's request digest and the verifier's outcome, timed by the rows'
    timestamps. The same log always gives the same spans, trace and span ids included
    (derived from the run id). DB is a database (opened read-only, never changed) or an
    export bundle. Content attributes only with --content. Headers and certificates come
    from the OTEL_EXPORTER_OTLP_* variables. Sending needs
    `pip install "agentfootprint[otel]"`.

    \b
    Exit codes:
      0  sent (or, with --json, printed)
      1  the run does not verify (nothing sent)
      2  usage error: DB missing or not a log; unknown run; no endpoint (give
         --endpoint, set OTEL_EXPORTER_OTLP_ENDPOINT, or use --json); the
         OpenTelemetry packages missing; the collector refused the spans or
         could not be reached in --timeout seconds
    """
    from agentfootprint.otel import require, spans_from_log

    if as_json and endpoint is not None:
        raise UsageError(
            "--json prints the spans; --endpoint sends them: give one", option="--json"
        )
    pinned: list[PublicKey] = [load_public_key(key) for key in keys]
    if as_json:
        with open_log(db) as source:
            spans = spans_from_log(source, run_id, keys=pinned, content=content)
        for span in spans:
            click.echo(orjson.dumps(span.to_json(), option=orjson.OPT_SORT_KEYS).decode())
        return
    require("agentfootprint otel")
    from agentfootprint.otel.export import send, traces_endpoint

    url = traces_endpoint(endpoint)
    if url is None:
        raise UsageError(
            "no collector named: give --endpoint URL (or set OTEL_EXPORTER_OTLP_ENDPOINT), "
            "or print the spans with --json",
            option="--endpoint",
        )
    with open_log(db) as source:
        spans = send(source, run_id, url, content=content, keys=pinned, timeout=timeout)
    root = spans[0]
    verified = root.attributes.get("agentfootprint.verify.outcome")
    click.echo(
        f"sent {len(spans)} spans of run {one_line(run_id)} ({verified}) to {one_line(url)}: "
        f"trace {root.trace_id:032x}"
    )
