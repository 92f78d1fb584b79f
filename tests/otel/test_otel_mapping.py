"""The one mapping, and the spans the log gives, as plain data: no OpenTelemetry package is
needed here (the after-the-fact spans are descriptions until an emitter makes SDK spans of
them). Every run closed here is verified by the pytest plugin as well."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from otel_support import EMAIL, agent_for, converse, ports

import agentfootprint as af
from agentfootprint.features.registry import all_features
from agentfootprint.logformat.canonical import parse
from agentfootprint.otel import mapping as m
from agentfootprint.otel import spans_from_log
from agentfootprint.runtime.events import LLMEnd
from agentfootprint.testing.tamper import read_rows, reencoded, rewrite, tampering
from agentfootprint.version import install_command


def _rows(store: Any, run_id: str) -> list[tuple[str, int, dict[str, Any]]]:
    return [(r.type, r.ts, parse(r.body)) for r in store.read(run_id)]


def test_one_span_per_run_call_and_tool_call_parents_and_token_sums(tmp_path: Path) -> None:
    agent = agent_for(tmp_path)
    first, second = converse(agent)
    for result in (first, second):
        spans = spans_from_log(agent.store, result.run_id)
        rows = _rows(agent.store, result.run_id)
        receipts = [body for kind, _, body in rows if kind == "receipt"]
        recorded_tools = af.tool_calls(agent.store, result.run_id)
        runs = [s for s in spans if s.attributes[m.OPERATION] == "invoke_agent"]
        chats = [s for s in spans if s.attributes[m.OPERATION] == "chat"]
        tools = [s for s in spans if s.attributes[m.OPERATION] == "execute_tool"]
        assert len(runs) == 1 and len(spans) == 1 + len(chats) + len(tools)
        assert len(chats) == len(receipts) == result.calls
        assert len(tools) == len(recorded_tools)
        (run,) = runs
        assert run.name == "invoke_agent helper" and run.kind == "internal"
        assert run.parent is None and run.parent_span_id is None
        for child in chats + tools:
            assert child.parent == "run" and child.parent_span_id == run.span_id
            assert child.trace_id == run.trace_id == m.trace_id_of(result.run_id)
        assert {s.span_id for s in spans} == {m.span_id_of(result.run_id, s.key) for s in spans}
        assert len({s.span_id for s in spans}) == len(spans)
        # each chat names its receipt's request digest; the tokens add up to the usage
        assert [c.attributes[m.RECEIPT_REQUEST] for c in chats] == [r["request"] for r in receipts]
        assert sum(int(c.attributes[m.INPUT_TOKENS]) for c in chats) == result.usage["input"]
        assert sum(int(c.attributes[m.OUTPUT_TOKENS]) for c in chats) == result.usage["output"]
        assert all(c.kind == "client" and c.name == "chat m" for c in chats)
        assert run.attributes[m.CONVERSATION_ID] == first.run_id
        assert run.attributes[m.AGENT_ID] == "agent-7"
        assert run.attributes[m.RUN_OUTCOME] == "answered"
        assert run.attributes[m.VERIFY_OUTCOME] == "VALID_UNSIGNED"
    agent.close()


def test_the_first_turns_spans_in_full(tmp_path: Path) -> None:
    """Names, kinds, attributes and statuses of the conversation's first run, and each
    time from the rows' ts."""
    agent = agent_for(tmp_path)
    first, _ = converse(agent)
    spans = spans_from_log(agent.store, first.run_id)
    rows = _rows(agent.store, first.run_id)
    assert [(s.name, s.key) for s in spans] == [
        ("invoke_agent helper", "run"),
        ("chat m", "call/0"),
        ("execute_tool lookup", "tool/0/0"),
        ("execute_tool broken", "tool/0/1"),
        ("chat m", "call/1"),
        ("execute_tool lookup", "tool/1/0"),
        ("chat m", "call/2"),
    ]
    run, chat0, lookup, broken, _, _, last = spans
    assert run.start_ns == rows[0][1] * 1_000_000 and run.end_ns == rows[-1][1] * 1_000_000
    receipt_ts = [ts for kind, ts, _ in rows if kind == "receipt"]
    assert chat0.start_ns == receipt_ts[0] * 1_000_000 < chat0.end_ns
    assert chat0.attributes[m.FINISH_REASONS] == ("tool_use",)
    assert last.attributes[m.FINISH_REASONS] == ("stop",)
    assert chat0.attributes[m.PROVIDER] == "mock" and chat0.attributes[m.CALL] == 0
    assert lookup.attributes == {
        m.OPERATION: "execute_tool",
        m.TOOL_NAME: "lookup",
        m.TOOL_CALL_ID: "a-1",
        m.RUN_ID: first.run_id,
        m.CALL: 0,
    }
    assert lookup.error is None
    assert broken.error == m.TOOL_ERROR and broken.attributes[m.ERROR_TYPE] == m.TOOL_ERROR
    # the tools ran between the route's commit and the tool-calls commit
    commits = [(ts, body) for kind, ts, body in rows if kind == "commit"]
    (tool_ts,) = [ts for ts, body in commits if body["stage"] == "tool-calls"][:1]
    route_ts = max(ts for ts, body in commits if ts < tool_ts)
    assert (lookup.start_ns, lookup.end_ns) == (route_ts * 1_000_000, tool_ts * 1_000_000)
    # no content unless asked for
    assert not any(m.CONTENT_ATTRIBUTES & set(s.attributes) for s in spans)
    agent.close()


def test_the_same_log_gives_the_same_spans(tmp_path: Path) -> None:
    agent = agent_for(tmp_path)
    first, _ = converse(agent)
    agent.close()
    once = spans_from_log(tmp_path / "log.db", first.run_id, content=True)
    again = spans_from_log(tmp_path / "log.db", first.run_id, content=True)
    assert once == again
    assert [s.to_json() for s in once] == [s.to_json() for s in again]


def test_content_is_the_committed_form_and_the_planted_secret_in_no_span(tmp_path: Path) -> None:
    agent = agent_for(tmp_path)
    first, second = converse(agent)
    for content in (False, True):
        for run_id in (first.run_id, second.run_id):
            spans = spans_from_log(agent.store, run_id, content=content)
            text = repr([s.to_json() for s in spans])
            assert EMAIL not in text
            assert ("$commit" in text) is content  # redacted values stay commitments
    spans = spans_from_log(agent.store, first.run_id, content=True)
    chat1 = spans[4]
    served = af.served_at(agent.store, first.run_id, 1)
    messages = parse(chat1.attributes[m.INPUT_MESSAGES].encode())
    assert [x["role"] for x in messages] == [x["role"] for x in served["messages"]]
    assert messages[1]["parts"][0] == {"type": "text", "content": "Let me look."}
    assert [p["id"] for p in messages[1]["parts"][1:]] == ["a-1", "b-1"]
    assert messages[2]["parts"][0]["type"] == "tool_call_response"
    output = parse(spans[1].attributes[m.OUTPUT_MESSAGES].encode())
    assert output[0]["finish_reason"] == "tool_use"
    assert [p["type"] for p in output[0]["parts"]] == ["text", "tool_call", "tool_call"]
    lookup = spans[2]
    assert parse(lookup.attributes[m.TOOL_ARGUMENTS].encode()) == {"q": "Ann"}
    assert "$commit" in lookup.attributes[m.TOOL_RESULT]
    agent.close()


def test_the_sweep_finds_the_secret_without_a_policy(tmp_path: Path) -> None:
    """The sweep above can fail: without the policy the same spans carry the value in clear
    (with content on), and still not with content off."""
    agent = agent_for(tmp_path, redact=False)
    first, _ = converse(agent)
    with_content = repr(
        [s.to_json() for s in spans_from_log(agent.store, first.run_id, content=True)]
    )
    without = repr([s.to_json() for s in spans_from_log(agent.store, first.run_id)])
    assert EMAIL in with_content and EMAIL not in without
    agent.close()


def test_a_failed_call_and_run_carry_the_recorded_error_type(tmp_path: Path) -> None:
    class Failing:
        name = "flaky"

        def __init__(self) -> None:
            self.mock = af.MockProvider([af.reply(tool_calls=[af.tool_call("lookup", {})])])
            self.calls = 0

        async def complete(self, request: Any) -> Any:
            self.calls += 1
            if self.calls > 1:
                raise af.ProviderError("503 from upstream")
            return await self.mock.complete(request)

    agent = af.Agent(
        provider=Failing(),
        model="m",
        tools=[af.define_tool(name="lookup", description="x", execute=lambda a: "ok")],
        store=tmp_path / "log.db",
        ports=ports(),
    )
    with pytest.raises(af.ProviderCallError):
        agent.run_sync("go")
    (run_id,) = agent.store.run_ids()
    spans = spans_from_log(agent.store, run_id)
    run, first, tool, failed = spans
    assert run.attributes[m.RUN_OUTCOME] == "failed"
    assert run.error == run.attributes[m.ERROR_TYPE] == "ProviderCallError"
    assert run.name == "invoke_agent Agent" and run.attributes[m.PROVIDER] == "flaky"
    assert first.error is None and tool.error is None
    assert failed.error == "ProviderCallError" and m.INPUT_TOKENS not in failed.attributes
    assert m.RECEIPT_REQUEST in failed.attributes  # the receipt was written before the call
    agent.close()


def test_a_run_that_does_not_verify_gives_no_spans(tmp_path: Path) -> None:
    agent = agent_for(tmp_path)
    first, _ = converse(agent)
    agent.close()
    path = tmp_path / "log.db"
    with tampering(path) as conn:
        rows = read_rows(conn, first.run_id)

        def edit(body: dict[str, Any]) -> None:
            if body.get("path") == "history" and body.get("verb") == "set":
                body["value"][0]["content"] = "something else"  # not what was served

        rewrite(conn, first.run_id, [reencoded(r, edit) for r in rows])
    with pytest.raises(af.VerificationError):
        spans_from_log(path, first.run_id)


def test_receipts_off_and_a_run_with_no_tools(tmp_path: Path) -> None:
    agent = af.Agent(
        provider=af.MockProvider(["hello"]),
        model="m2",
        store=tmp_path / "log.db",
        ports=ports(),
        record_receipt=False,
        temperature=0.5,
    )
    result = agent.run_sync("hi")
    run, chat = spans_from_log(agent.store, result.run_id)
    assert chat.name == "chat m2" and m.RECEIPT_REQUEST not in chat.attributes
    assert chat.attributes[m.REQUEST_TEMPERATURE] == 0.5
    assert chat.attributes[m.INPUT_TOKENS] == result.usage["input"]
    assert run.start_ns <= chat.start_ns <= chat.end_ns <= run.end_ns
    agent.close()


def test_the_mapping_alone() -> None:
    run = m.RunFacts(
        run_id="r",
        conversation_id=None,
        agent_id=None,
        agent_name=None,
        provider="p",
        model="x",
        start_ns=10,
        end_ns=5,  # an end before the start is clamped
        outcome=None,
    )
    span = m.agent_span(run)
    assert span.name == "invoke_agent" and span.end_ns == 10
    assert m.CONVERSATION_ID not in span.attributes and m.AGENT_NAME not in span.attributes
    call = m.CallFacts(
        call=3,
        model="x",
        start_ns=1,
        end_ns=2,
        usage={"input": 4, "output": 5, "cache_read": 2, "calls": 9},
    )
    chat = m.chat_span(run, call)
    assert chat.attributes[m.CACHE_READ_TOKENS] == 2 and "calls" not in repr(chat.attributes)
    committed = {"$commit": "ab" * 32}
    tool = m.ToolFacts(call=None, index=0, tool=committed, tool_call_id="i", start_ns=1, end_ns=1)
    described = m.tool_span(run, tool)
    assert described.attributes[m.TOOL_NAME] == m.json_text(committed)
    assert described.key == "tool/-/0"
    assert m.chat_message(committed) == {
        "role": "unknown",
        "parts": [{"type": "text", "content": committed}],
    }
    assert dataclasses.replace(run, run_id="s").run_id == "s"
    assert m.trace_id_of("r") != m.trace_id_of("s") and m.trace_id_of("r") == m.trace_id_of("r")


def test_llm_end_is_a_listener_only_event() -> None:
    """``request_digest`` was added to ``llm_end`` for the live exporter: the event is never
    recorded, so no row changes."""
    recorded = {kind.kind for f in all_features() for kind in f.recorded_events}
    assert LLMEnd.kind not in recorded


def test_the_package_imports_without_opentelemetry_and_says_how_to_install(tmp_path: Path) -> None:
    """With the OpenTelemetry packages missing, importing agentfootprint.otel still works,
    the spans as data still come, and what needs the packages says how to get them."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["opentelemetry"] = None  # as if it were not installed
        import agentfootprint as af
        import agentfootprint.otel as otel
        from agentfootprint.cli import main
        from click.testing import CliRunner
        agent = af.Agent(provider=af.MockProvider(["hi"]), model="m",
                         store={str(tmp_path / "log.db")!r})
        result = agent.run_sync("hi")
        print(len(otel.spans_from_log(agent.store, result.run_id)))
        calls = (lambda: otel.instrument(agent), lambda: otel.export_run(agent.store, "x", None))
        for call in calls:
            try:
                call()
            except af.UsageError as exc:
                print(exc)
        out = CliRunner().invoke(main, ["otel", {str(tmp_path / "log.db")!r}, result.run_id,
                                        "--endpoint", "http://127.0.0.1:9"])
        print(out.exit_code, out.output)
        print(CliRunner().invoke(main, ["otel", {str(tmp_path / "log.db")!r}, result.run_id,
                                        "--json"]).exit_code)
        print("opentelemetry" in str([k for k, v in sys.modules.items() if v is not None]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "2"
    hint = install_command("otel")  # this install's line (an editable clone here)
    assert "instrument() needs the OpenTelemetry packages" in lines[1] and hint in lines[1]
    assert "export_run() needs the OpenTelemetry packages" in lines[2] and hint in lines[2]
    assert lines[3].startswith("2 Error: agentfootprint otel needs the OpenTelemetry")
    assert "Traceback" not in done.stdout + done.stderr
    assert lines[-2:] == ["0", "False"]
