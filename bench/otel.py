"""What exporting OpenTelemetry GenAI spans live costs per iteration, and after the fact.

The benchmark's conversation (``common.Conversation``, N tool-call iterations, 4 a turn)
recorded into a ``MemoryStore`` (where added work weighs most), side by side in one process,
the variants alternating in every round:

* ``none``: no listener;
* ``live``: ``agentfootprint.otel.instrument(agent)`` on a tracer provider with the SDK's
  ``BatchSpanProcessor`` (ending a span only queues it) over an exporter that takes every
  batch at once: the listener, the mapping and the SDK's span work, on the run's thread;
* ``live, deferred``: the same with ``observer_delivery="deferred"`` (the listener runs in
  the delivery task beside the run);
* ``live, slow collector``: the ``BatchSpanProcessor`` over an exporter that takes
  ``--slow-ms`` per batch (a collector far away, or struggling): the processor's thread waits,
  the run should not;
* ``live, OTLP``: the ``BatchSpanProcessor`` over the real OTLP/HTTP exporter, to a receiver
  on 127.0.0.1 that decodes nothing (the protobuf encoding and the HTTP round trips, on the
  processor's thread);
* ``slow, no batch``: what the ``BatchSpanProcessor`` spares: a ``SimpleSpanProcessor`` (it
  exports as each span ends, inside the listener) over an exporter taking ``--simple-ms``.

Every ``BatchSpanProcessor`` here exports every 10 ms (``schedule_delay_millis``), so its
exports happen while the conversation runs, not after it (the SDK's default waits 5 s).

Printed per variant: the fastest round's ms per tool-call iteration (wall, and CPU of the
whole process, the processor's thread included), the difference to ``none``, and the spans
exported per iteration (checked: one ``invoke_agent`` per turn, one ``chat`` per call, one
``execute_tool`` per tool call). Then the after-the-fact exporter on the recorded
conversation: building every run's spans from the verified log (``spans_from_log``) and
making the SDK's spans of them (``finished_spans``), ms per iteration.

Usage::

    python bench/otel.py                  # N = 200, 5 rounds (about a minute on 2 vCPU)
    python bench/otel.py --quick          # N = 50, 2 rounds
    python bench/otel.py --n 800 --rounds 7 --json otel.json
"""

from __future__ import annotations

import argparse
import http.server
import logging
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import common  # noqa: E402
from common import Conversation, environment, print_environment, run_agent_conversation  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import agentfootprint as af  # noqa: E402
from agentfootprint.otel import instrument, spans_from_log  # noqa: E402
from agentfootprint.otel.export import finished_spans  # noqa: E402

VARIANTS = (
    "none",
    "live",
    "live, deferred",
    "live, slow collector",
    "live, OTLP",
    "slow, no batch",
)
WARMUP_N = 8


class Counting(SpanExporter):
    """Takes every batch (after ``delay`` seconds) and counts its spans by operation."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.operations: dict[str, int] = {}

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.delay:
            time.sleep(self.delay)
        for span in spans:
            name = str((span.attributes or {}).get("gen_ai.operation.name"))
            self.operations[name] = self.operations.get(name, 0) + 1
        return SpanExportResult.SUCCESS


class _Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


def receiver() -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def one_round(
    variant: str, conv: Conversation, slow_ms: float, simple_ms: float, url: str
) -> dict[str, Any]:
    """One recording of the conversation under ``variant``: its times and spans."""
    exporter: SpanExporter | None = None
    counted: Counting | None = None
    options: dict[str, Any] = {}
    if variant != "none":
        if variant == "live, OTLP":
            exporter = OTLPSpanExporter(endpoint=url)
        else:
            delay = {"live, slow collector": slow_ms, "slow, no batch": simple_ms}
            counted = Counting(delay.get(variant, 0.0) / 1000)
            exporter = counted
        if variant == "live, deferred":
            options["observer_delivery"] = "deferred"
    provider = TracerProvider(shutdown_on_exit=False)
    if exporter is not None:
        provider.add_span_processor(
            SimpleSpanProcessor(exporter)
            if variant == "slow, no batch"
            else BatchSpanProcessor(exporter, schedule_delay_millis=10)
        )
    made = common.conversation_agent

    def instrumented(*args: Any, **kwargs: Any) -> af.Agent:
        agent = made(*args, **kwargs)
        if exporter is not None:
            instrument(agent, tracer_provider=provider)
        return agent

    common.conversation_agent = instrumented
    try:
        c0 = time.process_time()
        run = run_agent_conversation(conv, af.MemoryStore(), **options)
        cpu = time.process_time() - c0
    finally:
        common.conversation_agent = made
    provider.force_flush()
    provider.shutdown()
    spans = None
    if counted is not None:
        spans = counted.operations
        expected = {"invoke_agent": run.turns, "chat": run.calls, "execute_tool": conv.n}
        if spans != expected:
            raise RuntimeError(f"{variant}: exported {spans}, expected {expected}")
    return {"wall_s": run.seconds, "cpu_s": cpu, "spans": spans}


def after_the_fact(conv: Conversation) -> dict[str, float]:
    """The conversation recorded once, then every run's spans made from the log."""
    store = af.MemoryStore()
    run = run_agent_conversation(conv, store)
    t0 = time.perf_counter()
    described = [spans_from_log(store, run_id) for run_id in run.run_ids]
    t1 = time.perf_counter()
    made = [finished_spans(spans) for spans in described]
    t2 = time.perf_counter()
    assert sum(map(len, made)) == sum(map(len, described))
    per_it = 1000.0 / conv.n
    return {
        "descriptions_ms": (t1 - t0) * per_it,
        "sdk_spans_ms": (t2 - t1) * per_it,
        "spans_per_iteration": sum(map(len, described)) / conv.n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="tool-call iterations")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="N = 50, 2 rounds")
    parser.add_argument("--slow-ms", type=float, default=50.0, help="the slow collector's delay")
    parser.add_argument(
        "--simple-ms", type=float, default=2.0, help="the delay behind the SimpleSpanProcessor"
    )
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args()
    # the conversation's served context is over context_budget's default warning line: its
    # warnings (one a call) are not what this measures
    logging.disable(logging.WARNING)
    n, rounds = (50, 2) if args.quick else (args.n, args.rounds)
    env = environment()
    print_environment(env)
    print(
        f"# N = {n}, {rounds} rounds; the slow collector takes {args.slow_ms:g} ms a batch, "
        f"{args.simple_ms:g} ms a span without a batch"
    )
    server = receiver()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    for variant in VARIANTS:  # warm-up, untimed
        one_round(variant, Conversation(WARMUP_N), args.slow_ms, args.simple_ms, url)
    conv = Conversation(n)
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for variant in VARIANTS:
            results[variant].append(one_round(variant, conv, args.slow_ms, args.simple_ms, url))
    server.shutdown()
    per_it = 1000.0 / n
    best = {v: min(r["wall_s"] for r in rs) * per_it for v, rs in results.items()}
    cpu = {v: min(r["cpu_s"] for r in rs) * per_it for v, rs in results.items()}
    base_wall, base_cpu = best["none"], cpu["none"]
    spans_per_it = next(r["spans"] for r in results["live"])
    print(f"# spans exported per iteration: {sum(spans_per_it.values()) / n:.2f} {spans_per_it}")
    print()
    print(
        f"{'variant':<22} {'wall ms/it':>10} {'+ vs none':>10} {'CPU ms/it':>10} {'+ vs none':>10}"
    )
    for variant in VARIANTS:
        print(
            f"{variant:<22} {best[variant]:>10.3f} {best[variant] - base_wall:>+10.3f} "
            f"{cpu[variant]:>10.3f} {cpu[variant] - base_cpu:>+10.3f}"
        )
    after = after_the_fact(conv)
    print()
    print(
        f"after the fact, per iteration: descriptions from the verified log "
        f"{after['descriptions_ms']:.3f} ms, SDK spans of them {after['sdk_spans_ms']:.3f} ms "
        f"({after['spans_per_iteration']:.2f} spans)"
    )
    figures = {
        "environment": env,
        "n": n,
        "rounds": rounds,
        "slow_ms": args.slow_ms,
        "simple_ms": args.simple_ms,
        "fastest_wall_ms_per_iteration": best,
        "fastest_cpu_ms_per_iteration": cpu,
        "median_wall_ms_per_iteration": {
            v: statistics.median(r["wall_s"] for r in rs) * per_it for v, rs in results.items()
        },
        "after_the_fact": after,
        "raw": results,
    }
    common.write_figures(args.json, figures)


if __name__ == "__main__":
    main()
