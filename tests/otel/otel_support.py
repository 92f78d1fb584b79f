"""Shared helpers of the OTel tests: the scripted conversation, span trees to compare, and an
OTLP/HTTP receiver on 127.0.0.1 that decodes what it is sent with opentelemetry-proto."""

from __future__ import annotations

import http.server
import itertools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import agentfootprint as af
from agentfootprint.otel.mapping import CALL, TOOL_CALL_ID, VERIFY_OUTCOME, SpanDescription

EMAIL = "ann.lee@example.com"  # the planted secret: a value the policy redacts by key
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def ports() -> af.Ports:
    """A clock ticking one millisecond a read, run ids and salts that repeat."""
    ticks = itertools.count(1_700_000_000_000)
    ids = itertools.count()
    salts = itertools.count()
    return af.Ports(
        clock=lambda: next(ticks),
        run_ids=lambda: f"run{next(ids):04d}",
        salts=lambda: next(salts).to_bytes(16, "big"),
    )


def tools() -> list[af.Tool]:
    def broken(args: Any) -> Any:
        raise RuntimeError("the index is down")

    return [
        af.define_tool(
            name="lookup",
            description="Find a person.",
            input_schema=SCHEMA,
            execute=lambda args: {"email": EMAIL, "name": "Ann"},
        ),
        af.define_tool(name="broken", description="Fails.", input_schema=SCHEMA, execute=broken),
    ]


def script() -> list[Any]:
    """Two tool calls in one reply (one fails), one more call, then an answer quoting the
    planted value; the second turn answers at once."""
    return [
        af.reply(
            "Let me look.",
            tool_calls=[
                af.tool_call("lookup", {"q": "Ann"}, id="a-1"),
                af.tool_call("broken", {"q": "Ann"}, id="b-1"),
            ],
        ),
        af.reply(tool_calls=[af.tool_call("lookup", {"q": "Ann again"}, id="a-2")]),
        f"Ann's address is {EMAIL}.",
        "Nothing more.",
    ]


def agent_for(tmp_path: Path, *, redact: bool = True, **options: Any) -> af.Agent:
    """The conversation's agent on a SQLite file, under a policy redacting ``email`` (its
    commitments opened by a vault) unless ``redact=False``."""
    policy = {"redact": af.RedactionPolicy(keys=["email"])} if redact else {}
    vault = {"disclosures": tmp_path / "vault.db"} if redact else {}
    return af.Agent(
        provider=af.MockProvider(script()),
        model="m",
        tools=tools(),
        store=tmp_path / "log.db",
        name="helper",
        id="agent-7",
        ports=ports(),
        **policy,
        **vault,
        **options,
    )


def converse(agent: af.Agent) -> tuple[af.RunResult, af.RunResult]:
    first = agent.run_sync("What is Ann's email?")
    second = agent.run_sync("Anything else?", continue_from=first)
    return first, second


# -- trees ----------------------------------------------------------------------------------

#: what differs between a live and an after-the-fact tree by design: the verifier's outcome
#: (after the fact only); times and ids are not in a tree at all
AFTER_ONLY = frozenset({VERIFY_OUTCOME})


def _plain(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple) else value


def _ident(name: str, attributes: dict[str, Any]) -> tuple[Any, ...]:
    return (name, attributes.get(CALL), attributes.get(TOOL_CALL_ID))


def sdk_tree(spans: Sequence[Any], drop: frozenset[str] = AFTER_ONLY) -> list[tuple[Any, ...]]:
    """The SDK's finished spans as a comparable tree: per span its identity, its parent's,
    kind, status and attributes; no time, no id."""
    by_id = {s.context.span_id: s for s in spans}
    nodes = []
    for span in spans:
        attributes = {k: _plain(v) for k, v in span.attributes.items()}
        parent = by_id.get(span.parent.span_id) if span.parent is not None else None
        nodes.append(
            (
                _ident(span.name, attributes),
                None if parent is None else _ident(parent.name, dict(parent.attributes)),
                span.kind.name.lower(),
                span.status.status_code.name,
                tuple(sorted((k, v) for k, v in attributes.items() if k not in drop)),
            )
        )
    return sorted(nodes, key=repr)


def description_tree(
    spans: Sequence[SpanDescription], drop: frozenset[str] = AFTER_ONLY
) -> list[tuple[Any, ...]]:
    """The same tree from span descriptions."""
    by_key = {s.key: s for s in spans}
    nodes = []
    for span in spans:
        attributes = {k: _plain(v) for k, v in span.attributes.items()}
        parent = by_key.get(span.parent) if span.parent is not None else None
        nodes.append(
            (
                _ident(span.name, attributes),
                None if parent is None else _ident(parent.name, dict(parent.attributes)),
                span.kind,
                "ERROR" if span.error is not None else "UNSET",
                tuple(sorted((k, v) for k, v in attributes.items() if k not in drop)),
            )
        )
    return sorted(nodes, key=repr)


def swept(spans: Sequence[Any]) -> str:
    """Every name and attribute value of the spans, as one text to search."""
    return "\n".join(f"{s.name} {dict(s.attributes)!r}" for s in spans)


# -- the OTLP/HTTP receiver -------------------------------------------------------------------


class Receiver(http.server.ThreadingHTTPServer):
    """Takes OTLP/HTTP trace exports on 127.0.0.1 and keeps what arrived."""

    def __init__(self, status: int = 200) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status = status
        self.received: list[tuple[str, str, bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def requests(self) -> list[Any]:
        """Each body received, decoded as the collector protocol's request."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        decoded = []
        for _, _, body in self.received:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            decoded.append(request)
        return decoded


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.received.append((self.path, self.headers.get("Content-Type", ""), body))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return


@contextmanager
def receiver(status: int = 200) -> Iterator[Receiver]:
    server = Receiver(status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as Python."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    return getattr(value, kind)


def decoded_spans(requests: Sequence[Any]) -> list[dict[str, Any]]:
    """The spans of decoded export requests, in the shape of ``SpanDescription.to_json``
    (plus where each came from: resource, scope and its schema URL)."""
    kinds = {1: "internal", 3: "client"}
    found = []
    for request in requests:
        for resource in request.resource_spans:
            service = {kv.key: any_value(kv.value) for kv in resource.resource.attributes}
            for scope in resource.scope_spans:
                for span in scope.spans:
                    found.append(
                        {
                            "name": span.name,
                            "kind": kinds.get(span.kind, span.kind),
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex() or None,
                            "start_time_unix_nano": span.start_time_unix_nano,
                            "end_time_unix_nano": span.end_time_unix_nano,
                            "status": "ERROR" if span.status.code == 2 else "UNSET",
                            "attributes": {kv.key: any_value(kv.value) for kv in span.attributes},
                            "scope": (scope.scope.name, scope.schema_url),
                            "service": service.get("service.name"),
                        }
                    )
    return found
