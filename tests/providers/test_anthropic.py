"""The Anthropic Messages provider against a real HTTP server on 127.0.0.1.

The fake server (``agentfootprint.testing.fake_anthropic``) answers with responses shaped
like Anthropic's documented examples (``fixtures/anthropic/``) and records the exact bytes
it received; the SDK is given our httpx2 client and is never patched. Every run these
tests close is verified by the pytest plugin.
"""

from __future__ import annotations

import asyncio
import copy
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from provider_support import Sleeps
from provider_support import failed_run as _failed_run

import agentfootprint as af
from agentfootprint import cli
from agentfootprint.logformat.canonical import parse
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.providers import _http
from agentfootprint.providers.anthropic import AnthropicMessages, translate
from agentfootprint.providers.anthropic import anthropic as make_anthropic
from agentfootprint.runtime.events import LLMToken
from agentfootprint.runtime.provider import Request
from agentfootprint.testing import assert_replays
from agentfootprint.testing.fake_anthropic import (
    FakeAnthropic,
    Reply,
    dropped_stream,
    message,
    parse_sse,
    raw_stream,
    stream_events,
    tool_use,
)
from agentfootprint.testing.fake_anthropic import error as error_body
from agentfootprint.testing.provider_contract import ServedProviderContract
from agentfootprint.testing.records import outcome, run_open
from agentfootprint.testing.records import recorded_events as events_of
from agentfootprint.version import install_command

pytestmark = pytest.mark.allow_model_requests

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"
EPHEMERAL = {"type": "ephemeral"}
KEY = "sk-ant-api03-PLANTED-test-key-7f3a9c"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"location": {"type": "string"}, "unit": {"type": "string"}},
    "required": ["location"],
}


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def error_reply(name: str, status: int, retry_after: str | None = None) -> Reply:
    """An error fixture, sent as its exact bytes."""
    return Reply(status=status, body=fixture(name), retry_after=retry_after)


class Capturing(AnthropicMessages):
    """The adapter, keeping a copy of every request it was handed."""

    received: list[Any]

    async def complete(self, request: Request, **kwargs: Any) -> af.LLMResponse:
        self.received.append(copy.deepcopy(dict(request.to_json())))
        return await super().complete(request, **kwargs)


def provider(
    server: FakeAnthropic | str, *, sleeps: Sleeps | None = None, **options: Any
) -> AnthropicMessages:
    """The adapter pointed at ``server``, its retry waits recorded instead of slept."""
    options.setdefault("api_key", KEY)
    made = make_anthropic(base_url=server if isinstance(server, str) else server.url, **options)
    made.retry = _http.RetryPolicy(
        max_retries=made.retry.max_retries,
        max_retry_wait=made.retry.max_retry_wait,
        sleep=sleeps if sleeps is not None else Sleeps(),
    )
    return made


def capturing(server: FakeAnthropic, *, stream: bool = False) -> Capturing:
    made = Capturing(
        api_key=KEY,
        base_url=server.url,
        timeout=60.0,
        max_retries=2,
        max_retry_wait=30.0,
        stream=stream,
        default_max_tokens=1024,
        extra_headers=None,
    )
    made.received = []
    return made


def weather_tool() -> af.Tool:
    return af.define_tool(
        name="get_weather",
        description="Get the current weather in a given location.",
        input_schema=WEATHER_SCHEMA,
        execute=lambda args: {"temperature": 15, "unit": args.get("unit", "celsius")},
    )


def weather_agent(model: Any, **options: Any) -> af.Agent:
    return af.Agent(
        provider=model,
        model="claude-sonnet-4-5",
        system=["You are a weather assistant.", "Answer in one sentence."],
        tools=[weather_tool()],
        **options,
    )


def listen(agent: af.Agent, tokens: list[str]) -> None:
    """Collect the text of the token events ``agent`` emits."""

    def heard(event: af.AgentEvent) -> None:
        assert isinstance(event, LLMToken)
        tokens.append(event.text)

    agent.on(LLMToken.kind, heard)


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- the translation --------------------------------------------------------------------------


def served(**members: Any) -> Request:
    base: dict[str, Any] = {"model": "m", "params": {}, "system": [], "messages": [], "tools": []}
    base.update(members)
    return Request.from_served(base)


def test_the_translation_keeps_pieces_merges_tool_results_and_adds_nothing() -> None:
    request = served(
        params={"temperature": 0.2},
        system=[{"source": "base", "text": "Be brief."}, {"source": "base", "text": "Be kind."}],
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {"id": "t1", "name": "get_weather", "arguments": {"location": "SF"}},
                    {"id": "t2", "name": "get_weather", "arguments": '{"location": "LA"}'},
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "name": "get_weather", "content": "15C"},
            {
                "role": "tool",
                "tool_call_id": "t2",
                "name": "get_weather",
                "content": "error: down",
                "is_error": True,
            },
            {"role": "assistant", "content": "SF is 15C."},
            {"role": "user", "content": "thanks"},
        ],
        tools=[{"name": "get_weather", "description": "Weather.", "input_schema": WEATHER_SCHEMA}],
    )
    before = copy.deepcopy(dict(request.to_json()))
    assert translate(request) == {
        "model": "m",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "get_weather",
                        "input": {"location": "SF"},
                    },
                    {
                        "type": "tool_use",
                        "id": "t2",
                        "name": "get_weather",
                        "input": {"location": "LA"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "15C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "content": "error: down",
                        "is_error": True,
                    },
                ],
            },
            {"role": "assistant", "content": "SF is 15C."},
            {"role": "user", "content": "thanks"},
        ],
        "tools": [
            {"name": "get_weather", "description": "Weather.", "input_schema": WEATHER_SCHEMA}
        ],
        "extra_body": {"temperature": 0.2},
    }
    assert dict(request.to_json()) == before  # read, never changed


def test_markers_become_cache_control_on_the_marked_blocks() -> None:
    """A system text block, a tool, and a message's last content block: a tool result in
    the merged user turn, an assistant turn's last tool_use, a plain text turn as a block."""
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [{"id": "t1", "name": "get_weather", "arguments": {"location": "SF"}}],
        },
        {"role": "tool", "tool_call_id": "t1", "name": "get_weather", "content": "15C"},
        {"role": "tool", "tool_call_id": "t2", "name": "get_weather", "content": "16C"},
    ]
    tool = {"name": "get_weather", "description": "Weather.", "input_schema": WEATHER_SCHEMA}
    request = served(
        system=[{"source": "base", "text": "A."}, {"source": "base", "text": "B."}],
        messages=messages,
        tools=[tool, {**tool, "name": "other"}],
        prompt_cache={"system": [0], "tools": [1], "messages": [0, 2]},
    )
    before = copy.deepcopy(dict(request.to_json()))
    wire = translate(request)
    assert wire["system"] == [
        {"type": "text", "text": "A.", "cache_control": EPHEMERAL},
        {"type": "text", "text": "B."},
    ]
    assert [("cache_control" in t) for t in wire["tools"]] == [False, True]
    assert wire["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": "weather?", "cache_control": EPHEMERAL}],
    }
    assert all("cache_control" not in b for b in wire["messages"][1]["content"])
    results = wire["messages"][2]["content"]  # the two tool results, one user turn
    assert results[0]["cache_control"] == EPHEMERAL and "cache_control" not in results[1]
    assert dict(request.to_json()) == before  # read, never changed
    marked = translate(served(messages=messages, prompt_cache={"system": [], "tools": [],
                                                               "messages": [1]}))  # fmt: skip
    assert marked["messages"][1]["content"][-1]["type"] == "tool_use"
    assert marked["messages"][1]["content"][-1]["cache_control"] == EPHEMERAL
    # nothing marked, or no prompt_cache member at all: nothing is added
    plain = served(messages=messages, tools=[tool])
    assert request.cache is not None and plain.cache is None
    empty = served(messages=messages, tools=[tool], prompt_cache={"system": [], "tools": [],
                                                                 "messages": []})  # fmt: skip
    assert translate(empty) == translate(plain)
    assert "cache_control" not in json.dumps(translate(plain))


def test_max_tokens_is_the_requests_else_the_default() -> None:
    assert translate(served(params={"max_tokens": 77}))["max_tokens"] == 77
    assert "extra_body" not in translate(served(params={"max_tokens": 77}))
    assert translate(served(), default_max_tokens=9)["max_tokens"] == 9


def test_values_the_views_do_not_expect_are_sent_as_text() -> None:
    commitment = {"$commit": "ab" * 32}
    request = served(
        system=[{"source": "base", "text": commitment}],
        messages=[
            {"role": "user", "content": commitment},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "t1", "name": "x", "arguments": "not json"},
                    {"id": "t2", "name": "x", "arguments": commitment},
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": {"rows": [1]}},
        ],
    )
    wire = translate(request)
    assert wire["system"] == [{"type": "text", "text": json.dumps(commitment)}]
    assert wire["messages"][0]["content"] == json.dumps(commitment)
    # no text block for an empty text; a tool_use input is always an object
    assert wire["messages"][1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "x", "input": {"arguments": "not json"}},
        {"type": "tool_use", "id": "t2", "name": "x", "input": commitment},
    ]
    assert wire["messages"][2]["content"][0]["content"] == '{"rows": [1]}'


def test_the_fake_streams_a_message_as_the_documented_events() -> None:
    documented = parse_sse(fixture("stream_tool_use.sse"))
    made = stream_events(json.loads(fixture("tool_use.json")))
    assert [name for name, _ in made if name != "content_block_delta"] == [
        name for name, _ in documented if name != "content_block_delta"
    ]
    assert all(data["type"] == name for name, data in made)


# -- a recorded run ---------------------------------------------------------------------------


def test_a_tool_loop_run_verifies_and_its_wire_digests_are_the_bytes_exchanged(
    server: FakeAnthropic, tmp_path: Path
) -> None:
    replies = [fixture("tool_use.json"), fixture("after_tool.json")]
    server.script(*(Reply(body=body) for body in replies))
    model = capturing(server)
    db = tmp_path / "run.db"
    agent = weather_agent(model, store=str(db))
    result = agent.run_sync("What's the weather in San Francisco?")
    assert result.answer == "The current weather in San Francisco is 15 degrees Celsius and foggy."
    assert result.calls == 2 and result.outcome == "answered"
    assert result.usage == {
        "input": 472 + 597,
        "output": 89 + 21,
        "calls": 2,
        "cache_read": 0 + 1024,
        "cache_write": 1024 + 0,
    }
    assert outcome(agent.store, result.run_id) == "answered"

    exchanges = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert [e["call"] for e in exchanges] == [0, 1]
    assert len(server.received) == 2
    for k, exchange in enumerate(exchanges):
        rebuilt = af.served_at(agent.store, result.run_id, k)
        assert rebuilt == model.received[k]  # the log rebuilds what the adapter was handed
        body = server.received[k].body
        (attempt,) = exchange["attempts"]
        assert attempt == {
            "request": hexdigest("wire/request", body),
            "response": hexdigest("wire/response", replies[k]),
            "status": 200,
            "error": None,
        }
        # ``served --wire``: the wire request rebuilt from the log is the one sent
        assert model.wire_request(rebuilt) == body

    second = server.received[1].json()
    # the adapter declares prompt_caching="breakpoints": the last system piece, the last tool
    # and the last message carry a cache breakpoint (test_prompt_cache_breakpoints_...)
    assert second["system"] == [
        {"type": "text", "text": "You are a weather assistant."},
        {"type": "text", "text": "Answer in one sentence.", "cache_control": EPHEMERAL},
    ]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_01A09q90qw90lq917835lq9",
        "name": "get_weather",
        "input": {"location": "San Francisco, CA", "unit": "celsius"},
    }
    assert second["messages"][2]["content"][0]["type"] == "tool_result"
    assert second["messages"][2]["content"][0]["cache_control"] == EPHEMERAL
    assert second["tools"][0]["input_schema"] == WEATHER_SCHEMA
    assert second["tools"][0]["cache_control"] == EPHEMERAL
    assert second["max_tokens"] == 1024 and "stream" not in second
    assert server.received[1].path == "/v1/messages"
    assert server.received[1].headers["anthropic-version"]

    assert run_open(agent.store, result.run_id)["provider_info"] == model.describe()
    assert model.describe()["adapter"] == "anthropic"
    agent.close()

    # it replays with no model call: the server is asked nothing more
    assert_replays(lambda: weather_agent(provider(server)), db)
    assert len(server.received) == 2


def test_prompt_cache_breakpoints_are_decided_recorded_sent_verified_and_replayed(
    server: FakeAnthropic, tmp_path: Path
) -> None:
    """The default strategy of the adapter (breakpoints): the caching stage writes the
    markers, the run is served under projection 3, the fake server sees cache_control on
    the marked blocks, and the markers rebuilt from the log are the ones served."""
    replies = [fixture("tool_use.json"), fixture("after_tool.json")]
    server.script(*(Reply(body=body) for body in replies))
    model = capturing(server)
    db = tmp_path / "run.db"
    agent = weather_agent(model, store=str(db))
    result = agent.run_sync("What's the weather in San Francisco?")
    assert run_open(agent.store, result.run_id)["projection"]["version"] == 3
    writes = [
        parse(row.body)
        for row in agent.store.read(result.run_id)
        if row.type == "write" and parse(row.body)["path"] == "cache_markers"
    ]
    assert [w["value"]["messages"] for w in writes] == [[0], [2]]  # moved with the history
    for k in range(2):
        rebuilt = af.served_at(agent.store, result.run_id, k)
        marks = rebuilt["prompt_cache"]
        assert marks == {"system": [1], "tools": [0], "messages": [len(rebuilt["messages"]) - 1]}
        assert model.received[k]["prompt_cache"] == marks
        sent = server.received[k].json()
        assert sent["system"][1]["cache_control"] == EPHEMERAL
        assert "cache_control" not in sent["system"][0]
        assert sent["tools"][0]["cache_control"] == EPHEMERAL
        assert sent["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
        assert json.dumps(sent).count("cache_control") == 3
        assert model.wire_request(rebuilt) == server.received[k].body
    agent.close()
    assert_replays(lambda: weather_agent(provider(server)), db)
    assert len(server.received) == 2


def test_caching_off_sends_no_cache_control_and_serves_projection_1(
    server: FakeAnthropic,
) -> None:
    server.script(message("hi"), message("hi"))
    off = weather_agent(provider(server), caching="off")
    result = off.run_sync("hello")
    assert run_open(off.store, result.run_id)["projection"]["version"] == 1
    assert "cache_markers" not in result.state
    assert b"cache_control" not in server.received[0].body
    automatic = weather_agent(provider(server), cache_strategy="automatic")
    automatic.run_sync("hello")
    assert server.received[1].body == server.received[0].body


def test_temperature_and_max_tokens_reach_the_wire(server: FakeAnthropic) -> None:
    server.script(message("hi"))
    agent = weather_agent(provider(server), temperature=0.3, max_tokens=321)
    agent.run_sync("hello")
    sent = server.received[0].json()
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 321


# -- streaming --------------------------------------------------------------------------------


def test_a_streamed_tool_loop_sends_tokens_and_records_the_assembled_reply(
    server: FakeAnthropic,
) -> None:
    streams = [fixture("stream_tool_use.sse"), fixture("stream.sse")]
    server.script(*(raw_stream(body) for body in streams))
    model = capturing(server, stream=True)
    assert model.streams is True
    agent = weather_agent(model)
    tokens: list[str] = []
    listen(agent, tokens)
    result = agent.run_sync("What's the weather in San Francisco?")
    assert "".join(tokens) == "Okay, let's check the weather for San Francisco:Hello!"
    assert result.answer == "Hello!"
    state = result.state
    assert state["history"][1]["tool_calls"] == [
        {
            "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "name": "get_weather",
            "arguments": {"location": "San Francisco, CA", "unit": "fahrenheit"},
        }
    ]
    assert result.usage["input"] == 472 + 25 and result.usage["output"] == 89 + 15
    exchanges = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    for k, exchange in enumerate(exchanges):
        (attempt,) = exchange["attempts"]
        # for a stream: the digest of the bytes as received
        assert attempt["response"] == hexdigest("wire/response", streams[k])
        assert attempt["request"] == hexdigest("wire/request", server.received[k].body)
        assert model.wire_request(af.served_at(agent.store, result.run_id, k)) == (
            server.received[k].body
        )
    assert all(r.json()["stream"] is True for r in server.received)


def test_the_wire_request_does_not_depend_on_who_listens(server: FakeAnthropic) -> None:
    server.script(message("Hello there"), message("Hello there"))
    model = provider(server, stream=True)
    listened = weather_agent(model)
    tokens: list[str] = []
    listen(listened, tokens)
    listened.run_sync("hi")
    weather_agent(model).run_sync("hi")  # nobody listens
    assert "".join(tokens) == "Hello there" and len(tokens) > 1
    assert server.received[0].body == server.received[1].body


@pytest.mark.parametrize("clean", [False, True], ids=["connection-broken", "no-message-stop"])
def test_a_dropped_stream_fails_the_call_and_the_failed_run_verifies(
    server: FakeAnthropic, clean: bool
) -> None:
    server.script(dropped_stream(message("It is sunny and warm today."), after=5, clean=clean))
    agent = weather_agent(provider(server, stream=True))
    tokens: list[str] = []
    listen(agent, tokens)
    error, run_id = failed_run(agent)
    assert "the stream ended before the reply was complete" in str(error)
    assert error.retryable is False and error.status is None
    assert len(server.received) == 1  # not retried: its tokens already went out
    assert tokens  # what arrived before the drop was streamed
    (exchange,) = events_of(agent.store, run_id, "agentfootprint.wire.exchange")
    (attempt,) = exchange["attempts"]
    assert attempt["status"] == 200 and attempt["error"]
    assert attempt["request"] == hexdigest("wire/request", server.received[0].body)
    partial = b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        for name, data in stream_events(message("It is sunny and warm today."))[:5]
    )
    assert attempt["response"] == hexdigest("wire/response", partial)


def test_an_error_event_in_a_stream_fails_the_call(server: FakeAnthropic) -> None:
    events = stream_events(message("Hello"))[:3]
    events.append(("error", json.loads(fixture("error_overloaded.json"))))
    server.script(Reply(events=events))
    error, _ = failed_run(weather_agent(provider(server, stream=True)))
    assert "the stream ended before the reply was complete" in str(error)
    assert "overloaded_error" in str(error) and error.retryable is False


# -- retries ----------------------------------------------------------------------------------


def test_a_429_then_success_is_retried_and_both_attempts_are_recorded(
    server: FakeAnthropic,
) -> None:
    server.script(
        error_reply("error_rate_limit.json", 429, retry_after="7"),
        Reply(body=fixture("message.json")),
    )
    sleeps = Sleeps()
    agent = weather_agent(provider(server, sleeps=sleeps))
    result = agent.run_sync("hi")
    assert result.answer == "Hi! My name is Claude."
    assert sleeps.waits == [7.0]  # Retry-After honoured
    (exchange,) = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    limited, answered = exchange["attempts"]
    assert [limited["status"], answered["status"]] == [429, 200]
    assert limited["retry_after"] == 7.0 and limited["error"]
    assert limited["response"] == hexdigest("wire/response", fixture("error_rate_limit.json"))
    assert answered["response"] == hexdigest("wire/response", fixture("message.json"))
    for attempt, received in zip(exchange["attempts"], server.received, strict=True):
        assert attempt["request"] == hexdigest("wire/request", received.body)
    assert server.received[0].body == server.received[1].body


def test_retry_after_is_capped_by_max_retry_wait(server: FakeAnthropic) -> None:
    server.script(error_reply("error_rate_limit.json", 429, retry_after="120"), message("ok"))
    sleeps = Sleeps()
    weather_agent(provider(server, sleeps=sleeps, max_retry_wait=2)).run_sync("hi")
    assert sleeps.waits == [2.0]


@pytest.mark.parametrize(
    ("name", "status"), [("error_overloaded.json", 529), ("error_api.json", 500)]
)
def test_overloaded_and_server_errors_are_retried(
    server: FakeAnthropic, name: str, status: int
) -> None:
    server.script(error_reply(name, status), error_reply(name, status), message("ok"))
    sleeps = Sleeps()
    agent = weather_agent(provider(server, sleeps=sleeps))
    result = agent.run_sync("hi")
    assert result.answer == "ok" and len(sleeps.waits) == 2
    assert 0 < sleeps.waits[0] <= sleeps.waits[1] * 2  # backing off, no Retry-After
    (exchange,) = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert [a["status"] for a in exchange["attempts"]] == [status, status, 200]


def test_exhausted_retries_fail_the_run_which_verifies(server: FakeAnthropic) -> None:
    server.script(*(error_reply("error_overloaded.json", 529) for _ in range(3)))
    agent = weather_agent(provider(server, max_retries=2))
    error, run_id = failed_run(agent)
    assert error.status == 529 and error.retryable is True
    assert "Overloaded" in str(error) and "3 attempts" in str(error)
    assert isinstance(error.__cause__, af.ProviderError)
    (exchange,) = events_of(agent.store, run_id, "agentfootprint.wire.exchange")
    assert [a["status"] for a in exchange["attempts"]] == [529, 529, 529]
    assert len(server.received) == 3 and server.remaining == 0


# -- errors that say what to do ---------------------------------------------------------------


def test_a_bad_key_is_refused_naming_the_environment_variable() -> None:
    with FakeAnthropic([message("never sent")], api_key="the-right-key-123") as fake:
        agent = weather_agent(provider(fake, api_key=KEY))
        error, run_id = failed_run(agent)
    assert error.status == 401 and error.retryable is False
    assert "ANTHROPIC_API_KEY" in str(error) and KEY not in str(error)
    assert len(fake.received) == 1  # a bad key is not retried
    (exchange,) = events_of(agent.store, run_id, "agentfootprint.wire.exchange")
    assert exchange["attempts"][0]["status"] == 401


def test_a_missing_model_is_named(server: FakeAnthropic) -> None:
    server.script(error_reply("error_not_found.json", 404))
    agent = af.Agent(provider=provider(server), model="claude-nonexistent-1")
    error, _ = failed_run(agent, "hi")
    assert error.status == 404 and error.retryable is False
    assert "'claude-nonexistent-1'" in str(error) and "not found" in str(error)


def test_a_prompt_too_long_says_to_reduce_the_history(server: FakeAnthropic) -> None:
    server.script(error_reply("error_prompt_too_long.json", 400))
    error, _ = failed_run(weather_agent(provider(server)))
    assert error.status == 400 and error.retryable is False
    assert "too long" in str(error) and "reduce the history" in str(error)
    assert len(server.received) == 1


def test_nothing_listening_asks_whether_the_server_is_running() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    sleeps = Sleeps()
    agent = weather_agent(provider(url, sleeps=sleeps, max_retries=1))
    error, run_id = failed_run(agent)
    assert error.status is None and error.retryable is True
    assert f"Is the server running at {url}?" in str(error)
    (exchange,) = events_of(agent.store, run_id, "agentfootprint.wire.exchange")
    assert [(a["status"], a["response"]) for a in exchange["attempts"]] == [(None, None)] * 2
    assert len(sleeps.waits) == 1


def test_a_slow_server_times_out(server: FakeAnthropic) -> None:
    server.script(Reply(body=json.loads(fixture("message.json")), delay=1.0))
    error, _ = failed_run(weather_agent(provider(server, timeout=0.2, max_retries=0)))
    assert error.retryable is True and "did not answer within 0.2 s" in str(error)


def test_cancelling_a_call_in_flight_closes_the_run_as_failed(server: FakeAnthropic) -> None:
    server.script(Reply(body=json.loads(fixture("message.json")), delay=2.0))
    agent = weather_agent(provider(server))

    async def cancel() -> None:
        task = asyncio.ensure_future(agent.run("hi"))
        while not server.received:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    (run_id,) = agent.store.run_ids()
    assert outcome(agent.store, run_id) == "failed"


# -- the key ----------------------------------------------------------------------------------


def test_the_planted_key_is_in_no_row_event_error_or_repr(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    seen: list[str] = []
    errors: list[str] = []
    with FakeAnthropic(api_key=KEY) as fake:
        fake.script(
            Reply(body=fixture("tool_use.json")),
            Reply(body=fixture("after_tool.json")),
            error_reply("error_rate_limit.json", 429, retry_after="0"),
            message("streamed"),
            *(error_reply("error_overloaded.json", 529) for _ in range(3)),
        )
        for stream in (False, True, False):
            model = provider(fake, stream=stream)
            seen.extend([repr(model), str(vars(model)), str(model.describe())])
            agent = weather_agent(model, store=str(db))
            agent.on("*", lambda event: seen.append(repr(event)))
            try:
                agent.run_sync("What's the weather in San Francisco?")
            except af.ProviderCallError as exc:
                errors.extend([str(exc), repr(exc), str(exc.__cause__), repr(exc.__cause__)])
                for attempt in exc.__cause__.wire.attempts:  # type: ignore[union-attr]
                    seen.append(repr(attempt))
            agent.close()
        # and a key the server refuses
        with FakeAnthropic([], api_key="another-key-456") as other:
            agent = weather_agent(provider(other), store=str(db))
            with pytest.raises(af.ProviderCallError) as caught:
                agent.run_sync("hi")
            errors.extend([str(caught.value), str(caught.value.__cause__)])
            agent.close()
        assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake.received)
    assert errors and seen
    runner = CliRunner()
    (first, *_) = af.Agent(provider=af.MockProvider([]), model="m", store=str(db)).store.run_ids()
    for command in (["runs"], ["verify"], ["show", first], ["served", first, "1"]):
        shown = runner.invoke(cli.main, [command[0], str(db), *command[1:]])
        assert shown.exit_code == 0, shown.output
        seen.append(shown.output)
    for text in [*seen, *errors]:
        assert KEY not in text
    for path in tmp_path.iterdir():  # the log and whatever sits beside it
        assert KEY.encode() not in path.read_bytes()


def test_the_key_comes_from_the_environment_else_the_factory_refuses(
    monkeypatch: pytest.MonkeyPatch, server: FakeAnthropic
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server.script(message("hi"))
    weather_agent(make_anthropic(base_url=server.url)).run_sync("hi")
    assert server.received[0].headers["authorization"] == f"Bearer {KEY}"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(af.UsageError) as caught:
        make_anthropic(base_url=server.url)
    assert "ANTHROPIC_API_KEY" in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [
        {"timeout": 0},
        {"timeout": "60"},
        {"max_retries": -1},
        {"max_retry_wait": "soon"},
        {"stream": "yes"},
        {"default_max_tokens": 0},
        {"base_url": ""},
        {"extra_headers": {"x": 1}},
        {"api_key": ""},
    ],
)
def test_wrong_options_are_refused_by_name(options: dict[str, Any]) -> None:
    options = {"api_key": KEY, **options}
    with pytest.raises(af.UsageError) as caught:
        make_anthropic(**options)
    assert caught.value.option in options


def test_extra_headers_are_sent(server: FakeAnthropic) -> None:
    server.script(message("hi"))
    weather_agent(provider(server, extra_headers={"anthropic-beta": "x-test"})).run_sync("hi")
    assert server.received[0].headers["anthropic-beta"] == "x-test"


def test_the_provider_is_blocked_in_tests_that_do_not_allow_requests(
    server: FakeAnthropic,
) -> None:
    model = provider(server)
    with af.allow_model_requests(False), pytest.raises(af.ModelRequestsBlocked):
        weather_agent(model).run_sync("hi")
    assert not server.received


def test_tool_use_helper_shapes_a_message() -> None:
    reply = message("x", tool_uses=[tool_use("get_weather", {"location": "SF"})])
    assert reply["stop_reason"] == "tool_use" and reply["content"][1]["type"] == "tool_use"


def test_the_wire_request_rebuilt_from_the_log_is_the_one_sent_whatever_the_order(
    server: FakeAnthropic,
) -> None:
    """The log keeps canonical JSON (sorted members, ``2.0`` as ``2``): the adapter sends
    that form, so the bytes rebuilt from a recorded run are the bytes sent."""
    schema = {"type": "object", "properties": {"z": {"type": "number"}, "a": {"minimum": 1.0}}}
    tool = af.define_tool(
        name="calc", description="Calculate.", input_schema=schema, execute=lambda args: "3"
    )
    server.script(
        message(tool_uses=[tool_use("calc", {"z": 2.0, "a": 1, "m": {"y": 1, "b": 0.5}})]),
        message("3"),
    )
    model = provider(server)
    agent = af.Agent(provider=model, model="m", tools=[tool], temperature=1.0)
    result = agent.run_sync("go")
    for k in range(2):
        rebuilt = af.served_at(agent.store, result.run_id, k)
        assert model.wire_request(rebuilt) == server.received[k].body
    sent = server.received[1].json()
    assert list(sent["tools"][0]["input_schema"]) == ["properties", "type"]
    assert b'"input":{"a":1,"m":{"b":0.5,"y":1},"z":2}' in server.received[1].body


def test_a_provider_serves_calls_from_several_event_loops_and_closes(
    server: FakeAnthropic,
) -> None:
    server.script(message("one"), message("two"))
    model = provider(server)
    request = served(messages=[{"role": "user", "content": "hi"}])

    async def call_and_close() -> str:
        reply = await model.complete(request)
        await model.aclose()
        return reply.content

    # run_sync runs each run in a loop of its own: each gets a client of its own
    assert [asyncio.run(call_and_close()) for _ in range(2)] == ["one", "two"]
    assert model.describe()["stream"] == "false"


def test_without_the_sdk_the_factory_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # import anthropic -> ImportError
    with pytest.raises(af.UsageError) as caught:
        make_anthropic(api_key=KEY)
    assert install_command("anthropic") in str(caught.value)


def test_a_reply_that_is_no_message_is_not_retried(server: FakeAnthropic) -> None:
    server.script(Reply(body={"choices": []}), message("never"))
    error, _ = failed_run(weather_agent(provider(server)))
    assert "is base_url an Anthropic Messages API?" in str(error)
    assert error.retryable is False and len(server.received) == 1


# -- the provider contract --------------------------------------------------------------------

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def as_wire(reply: af.LLMResponse | af.ProviderError) -> Reply | dict[str, Any]:
    """A contract reply in the Messages API's wire format."""
    if isinstance(reply, af.ProviderError):
        status = reply.status or 500
        return error_body(status, ERROR_TYPES.get(status, "api_error"), str(reply))
    return message(
        reply.content,
        tool_uses=[tool_use(c.name, c.arguments, id=c.id) for c in reply.tool_calls],
        input_tokens=reply.usage.input,
        output_tokens=reply.usage.output,
        cache_read=reply.usage.cache_read,
        cache_write=reply.usage.cache_write,
    )


class TestAnthropicContract(ServedProviderContract):
    """The contract every provider passes, through the fake Messages API."""

    reports_cache = True
    stream = False

    def fake(self, replies: list[af.LLMResponse | af.ProviderError]) -> FakeAnthropic:
        return FakeAnthropic([as_wire(r) for r in replies])

    def provider_for(self, server: FakeAnthropic) -> Any:
        return provider(server, max_retries=0, stream=self.stream)


class TestAnthropicStreamingContract(TestAnthropicContract):
    streams = True
    stream = True


def failed_run(agent: af.Agent, text: str = "What's the weather in San Francisco?") -> Any:
    return _failed_run(agent, text)
