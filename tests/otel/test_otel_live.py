"""The SDK's spans: live through a listener (inline and deferred delivery) and after the fact
from the log, both caught by the SDK's in-memory exporter. One ``invoke_agent``, one ``chat``
per receipt, one ``execute_tool`` per tool call, parents right, token sums equal to the
recorded usage, the live tree equal to the after-the-fact one but for timing, and the planted
secret in no span, content on or off. Every run closed here is verified by the pytest plugin
as well."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "opentelemetry.sdk.trace", reason="the otel extra is not installed: pip install -e '.[otel]'"
)

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from otel_support import (
    EMAIL,
    agent_for,
    converse,
    description_tree,
    ports,
    sdk_tree,
    swept,
)

import agentfootprint as af
from agentfootprint.otel import SCHEMA_URL, export_run, instrument, spans_from_log
from agentfootprint.otel import mapping as m
from agentfootprint.otel.export import finished_spans


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def of_run(spans: Any, run_id: str) -> list[ReadableSpan]:
    return [s for s in spans if s.attributes.get(m.RUN_ID) == run_id]


def exported(agent: af.Agent, run_id: str, **options: Any) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    export_run(agent.store, run_id, memory, **options)
    return list(memory.get_finished_spans())


@pytest.mark.parametrize("delivery", ["inline", "deferred"])
def test_live_spans_equal_the_logs_but_for_timing(tmp_path: Path, delivery: str) -> None:
    provider, memory = memory_provider()
    agent = agent_for(tmp_path, observer_delivery=delivery)
    with instrument(agent, tracer_provider=provider) as live:
        first, second = converse(agent)
        assert live.open_runs == ()
    for result in (first, second):
        spans = of_run(memory.get_finished_spans(), result.run_id)
        after = exported(agent, result.run_id)
        assert (
            sdk_tree(spans)
            == sdk_tree(after)
            == description_tree(spans_from_log(agent.store, result.run_id))
        )
        # the counts, parents and token sums, on the SDK's own spans
        (root,) = [s for s in spans if s.parent is None]
        chats = [s for s in spans if s.attributes[m.OPERATION] == "chat"]
        tools = [s for s in spans if s.attributes[m.OPERATION] == "execute_tool"]
        assert root.name == "invoke_agent helper" and len(spans) == 1 + len(chats) + len(tools)
        receipts = [r for r in agent.store.read(result.run_id) if r.type == "receipt"]
        assert len(chats) == len(receipts) == result.calls
        assert len(tools) == len(af.tool_calls(agent.store, result.run_id))
        for child in chats + tools:
            assert child.parent is not None and child.parent.span_id == root.context.span_id
            assert child.context.trace_id == root.context.trace_id
            assert root.start_time <= child.start_time <= child.end_time <= root.end_time
        assert sum(c.attributes[m.INPUT_TOKENS] for c in chats) == result.usage["input"]
        assert sum(c.attributes[m.OUTPUT_TOKENS] for c in chats) == result.usage["output"]
        assert root.instrumentation_scope.schema_url == SCHEMA_URL
        assert root.attributes[m.RUN_OUTCOME] == "answered"
        assert m.VERIFY_OUTCOME not in root.attributes  # only the log can give it
        assert after[-1].attributes[m.VERIFY_OUTCOME] == "VALID_UNSIGNED"
    agent.close()


def test_after_the_fact_spans_carry_the_descriptions_ids_and_times(tmp_path: Path) -> None:
    agent = agent_for(tmp_path)
    first, _ = converse(agent)
    described = spans_from_log(agent.store, first.run_id)
    spans = exported(agent, first.run_id)
    by_id = {s.context.span_id: s for s in spans}
    assert set(by_id) == {d.span_id for d in described}
    for d in described:
        span = by_id[d.span_id]
        assert span.context.trace_id == d.trace_id and span.name == d.name
        assert (span.start_time, span.end_time) == (d.start_ns, d.end_ns)
        assert (span.parent.span_id if span.parent else None) == d.parent_span_id
        assert span.resource.attributes["service.name"] == "agentfootprint"
    # the same log, the same SDK spans again (ids and times are the log's)
    again = {s.context.span_id: (s.start_time, s.end_time) for s in finished_spans(described)}
    assert again == {i: (s.start_time, s.end_time) for i, s in by_id.items()}
    agent.close()


@pytest.mark.parametrize("content", [False, True])
def test_the_planted_secret_is_in_no_span_live_or_after(tmp_path: Path, content: bool) -> None:
    provider, memory = memory_provider()
    agent = agent_for(tmp_path)
    with instrument(agent, tracer_provider=provider, content=content):
        first, second = converse(agent)
    assert EMAIL not in swept(memory.get_finished_spans())
    for result in (first, second):
        after = exported(agent, result.run_id, content=content)
        assert EMAIL not in swept(after)
        assert ("$commit" in swept(after)) is content  # redacted values: their commitments
    agent.close()


def test_the_sweep_finds_the_secret_without_a_policy(tmp_path: Path) -> None:
    """The sweep can fail: with no policy and content on, the value is in the spans, live
    and after the fact; content off, it is in none. And where the events hold content (the
    reply's text, the tools' arguments and results) the live spans carry the log's."""
    provider, memory = memory_provider()
    agent = agent_for(tmp_path, redact=False)
    with instrument(agent, tracer_provider=provider, content=True):
        first, _ = converse(agent)
    live = of_run(memory.get_finished_spans(), first.run_id)
    after = exported(agent, first.run_id, content=True)
    assert EMAIL in swept(live) and EMAIL in swept(after)
    assert EMAIL not in swept(exported(agent, first.run_id))

    def tools(spans: list[ReadableSpan]) -> list[Any]:
        found = [s for s in spans if s.attributes[m.OPERATION] == "execute_tool"]
        return sorted((dict(s.attributes) for s in found), key=repr)

    assert tools(live) == tools(after)
    last_live = max((s for s in live if s.name == "chat m"), key=lambda s: s.attributes[m.CALL])
    assert m.INPUT_MESSAGES not in last_live.attributes  # the served request is in no event
    assert EMAIL in last_live.attributes[m.OUTPUT_MESSAGES]
    agent.close()


def test_the_run_span_continues_the_callers_trace(tmp_path: Path) -> None:
    provider, memory = memory_provider()
    agent = agent_for(tmp_path)
    outer_span = provider.get_tracer("app").start_as_current_span("request")
    with instrument(agent, tracer_provider=provider), outer_span as outer:
        result = agent.run_sync("What is Ann's email?")
    (root,) = [
        s
        for s in of_run(memory.get_finished_spans(), result.run_id)
        if s.name.startswith("invoke_agent")
    ]
    assert root.parent is not None and root.parent.span_id == outer.get_span_context().span_id
    # after the fact, the run is a trace of its own
    assert next(s for s in exported(agent, result.run_id) if s.parent is None).name == root.name
    agent.close()


def test_a_run_without_turn_end_is_ended_by_close(tmp_path: Path) -> None:
    class Failing:
        name = "flaky"

        async def complete(self, request: Any) -> Any:
            raise af.ProviderError("503 from upstream")

    provider, memory = memory_provider()
    agent = af.Agent(provider=Failing(), model="m", store=tmp_path / "log.db", ports=ports())
    live = instrument(agent, tracer_provider=provider)
    with pytest.raises(af.ProviderCallError):
        agent.run_sync("go")
    (run_id,) = agent.store.run_ids()
    assert live.open_runs == (run_id,) and memory.get_finished_spans() == ()
    live.close()
    live.close()  # once is enough; twice is harmless
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert set(spans) == {"invoke_agent Agent", "chat m"}
    for span in spans.values():
        assert span.attributes[m.ERROR_TYPE] == m.INCOMPLETE
        assert span.status.status_code is trace.StatusCode.ERROR
    # the log says what happened
    after = {s.name: s for s in exported(agent, run_id)}
    assert after["invoke_agent Agent"].attributes[m.ERROR_TYPE] == "ProviderCallError"
    assert after["chat m"].attributes[m.ERROR_TYPE] == "ProviderCallError"
    # closed, it listens no more
    agent.close()


def test_instrument_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    agent = agent_for(tmp_path)
    with pytest.raises(af.UsageError, match="'content' must be True or False") as info:
        instrument(agent, content="yes")  # type: ignore[arg-type]
    assert info.value.option == "content"
    with pytest.raises(af.UsageError, match="must be an agentfootprint Agent"):
        instrument(object())  # type: ignore[arg-type]
    with pytest.raises(af.UsageError, match="must be an OpenTelemetry TracerProvider"):
        instrument(agent, tracer_provider=object())  # type: ignore[arg-type]
    agent.close()


def test_runs_left_open_are_bounded(tmp_path: Path) -> None:
    """No event says a run failed, so an instrumentation that is never closed ends the
    oldest open run once too many are open, rather than keeping every one."""
    from agentfootprint.otel.live import Instrumentation

    class Failing:
        name = "flaky"

        async def complete(self, request: Any) -> Any:
            raise af.ProviderError("503 from upstream")

    provider, memory = memory_provider()
    agent = af.Agent(provider=Failing(), model="m", store=tmp_path / "log.db", ports=ports())
    live = Instrumentation(agent, provider.get_tracer("t"), max_open=2)
    for _ in range(3):
        with pytest.raises(af.ProviderCallError):
            agent.run_sync("go")
    first, second, third = agent.store.run_ids()
    assert live.open_runs == (second, third)
    ended = [s for s in memory.get_finished_spans() if s.parent is None]
    assert [s.attributes[m.RUN_ID] for s in ended] == [first]
    assert ended[0].attributes[m.ERROR_TYPE] == m.INCOMPLETE
    live.close()
    assert live.open_runs == ()
    agent.close()
