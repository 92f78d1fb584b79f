"""The OpenAI Chat Completions provider against a real HTTP server on 127.0.0.1.

The fake server (``agentfootprint.testing.fake_openai``) answers with responses shaped
like OpenAI's documented examples (``fixtures/openai/``) and records the exact bytes it
received; the SDK is given our httpx2 client and is never patched. Every run these tests
close is verified by the pytest plugin.
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from provider_support import Sleeps
from provider_support import failed_run as _failed_run

import agentfootprint as af
from agentfootprint import providers
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.providers import _http
from agentfootprint.providers.openai import OpenAIChat, chat_body
from agentfootprint.runtime.provider import Request
from agentfootprint.testing.fake_openai import (
    Completion,
    DroppedStream,
    Failure,
    FakeOpenAI,
    UnfinishedStream,
    bad_key,
    completion_chunks,
    completion_json,
    dead_url,
    reply,
    scripted_reply,
    server_error,
    sse_events,
    tool_reply,
)
from agentfootprint.testing.provider_contract import ServedProviderContract
from agentfootprint.testing.records import outcome, run_open
from agentfootprint.testing.records import recorded_events as events_of
from agentfootprint.version import install_command

pytestmark = pytest.mark.allow_model_requests

FIXTURES = Path(__file__).parent / "fixtures" / "openai"
KEY = "sk-test-PLANTED-1234"
MODEL = "gpt-4o-mini"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"location": {"type": "string"}, "unit": {"type": "string"}},
    "required": ["location"],
}


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def error(name: str, status: int, retry_after: str | float | None = None) -> Failure:
    """An error fixture, sent as its exact bytes."""
    return Failure(status, fixture(name), retry_after=retry_after)


class Capturing(OpenAIChat):
    """The adapter, keeping a copy of every request it was handed."""

    received: list[Any]

    async def complete(self, request: Request, **kwargs: Any) -> af.LLMResponse:
        self.received.append(copy.deepcopy(dict(request.to_json())))
        return await super().complete(request, **kwargs)


def provider(
    server: FakeOpenAI | str, *, sleeps: Sleeps | None = None, **options: Any
) -> OpenAIChat:
    """The adapter pointed at ``server``, its retry waits recorded instead of slept."""
    options.setdefault("api_key", KEY)
    made = providers.openai(base_url=server if isinstance(server, str) else server.url, **options)
    made.retry = _http.RetryPolicy(
        max_retries=made.retry.max_retries,
        max_retry_wait=made.retry.max_retry_wait,
        sleep=sleeps if sleeps is not None else Sleeps(),
    )
    return made


def capturing(server: FakeOpenAI, **options: Any) -> Capturing:
    made = Capturing(api_key=KEY, base_url=server.url, **options)
    made.received = []
    return made


def weather_tool() -> af.Tool:
    return af.define_tool(
        name="get_current_weather",
        description="Get the current weather in a given location.",
        input_schema=WEATHER_SCHEMA,
        execute=lambda args: {"temperature": 22, "unit": "celsius", "sky": "sunny"},
    )


def weather_agent(model: Any, **options: Any) -> af.Agent:
    return af.Agent(
        provider=model,
        model=MODEL,
        system=["You are a weather assistant.", "Answer in one sentence."],
        tools=[weather_tool()],
        **options,
    )


def collect(into: list[str]) -> Any:
    """A listener keeping the text of each token event."""

    def listen(event: Any) -> None:
        into.append(event.text)

    return listen


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def served(**members: Any) -> Request:
    base: dict[str, Any] = {"model": "m", "params": {}, "system": [], "messages": [], "tools": []}
    base.update(members)
    return Request.from_served(base)


# -- importing --------------------------------------------------------------------------------


def test_importing_agentfootprint_and_its_providers_imports_no_sdk() -> None:
    code = (
        "import sys, agentfootprint, agentfootprint.providers, agentfootprint.providers.openai\n"
        "import agentfootprint.testing.fake_openai\n"
        "assert 'openai' not in sys.modules, 'openai imported'\n"
        "assert 'anthropic' not in sys.modules, 'anthropic imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_the_sdk_the_factory_says_how_to_install_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['openai'] = None  # as if not installed\n"
        "import agentfootprint.providers as p\n"
        "from agentfootprint.errors import UsageError\n"
        "try:\n"
        "    p.openai(base_url='http://127.0.0.1:9/v1')\n"
        "except UsageError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert install_command("openai") in out.stdout
    without_httpx2 = code.replace("sys.modules['openai']", "sys.modules['httpx2']")
    out = subprocess.run(
        [sys.executable, "-c", without_httpx2], check=True, capture_output=True, text=True
    )
    assert f"needs httpx2: {install_command('openai')}" in out.stdout


def test_the_factory_stays_the_package_attribute_after_its_module_is_imported() -> None:
    import agentfootprint.providers.openai as _module  # noqa: F401 - binds the submodule

    assert callable(providers.openai) and providers.openai.__name__ == "openai"
    assert isinstance(providers.openai(base_url="http://127.0.0.1:9/v1"), OpenAIChat)


# -- the translation --------------------------------------------------------------------------


def test_the_translation_joins_system_pieces_and_maps_calls_results_and_tools() -> None:
    request = served(
        params={"temperature": 0.2, "max_tokens": 50},
        system=[{"source": "base", "text": "Be brief."}, {"source": "base", "text": "Be kind."}],
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "t1", "name": "get_weather", "arguments": {"location": "SF"}},
                    {"id": "t2", "name": "get_weather", "arguments": '{"location": "LA"'},
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "name": "get_weather", "content": "15C"},
            {
                "role": "tool",
                "tool_call_id": "t2",
                "name": "get_weather",
                "content": "the service is down",
                "is_error": True,
            },
            {"role": "assistant", "content": "SF is 15C."},
        ],
        tools=[{"name": "get_weather", "description": "Weather.", "input_schema": WEATHER_SCHEMA}],
    )
    before = copy.deepcopy(dict(request.to_json()))
    assert chat_body(request, stream=False, max_tokens_field="max_completion_tokens") == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief.\n\nBe kind."},
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "SF"}'},
                    },
                    {
                        "id": "t2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "LA"'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "15C"},
            {"role": "tool", "tool_call_id": "t2", "content": "Error: the service is down"},
            {"role": "assistant", "content": "SF is 15C."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather.",
                    "parameters": WEATHER_SCHEMA,
                },
            }
        ],
        "temperature": 0.2,
        "max_completion_tokens": 50,
    }
    assert dict(request.to_json()) == before  # read, never changed


def test_max_tokens_goes_where_the_server_reads_it() -> None:
    request = served(params={"max_tokens": 7})
    assert "max_completion_tokens" in OpenAIChat(api_key=KEY).body(request)
    assert OpenAIChat(base_url="http://127.0.0.1:9/v1").body(request)["max_tokens"] == 7
    chosen = OpenAIChat(base_url="http://x/v1", max_tokens_field="max_completion_tokens")
    assert chosen.body(request)["max_completion_tokens"] == 7


def test_an_error_result_already_saying_so_is_not_flagged_twice() -> None:
    request = served(
        messages=[
            {"role": "tool", "tool_call_id": "a", "content": "Error: bad", "is_error": True},
            {"role": "tool", "tool_call_id": "b", "content": '{"error": "x"}', "is_error": True},
        ]
    )
    wire = chat_body(request, stream=False, max_tokens_field="max_tokens")["messages"]
    assert [m["content"] for m in wire] == ["Error: bad", '{"error": "x"}']


def test_values_the_views_do_not_expect_are_sent_as_text() -> None:
    commitment = {"$commit": "ab" * 32}
    request = served(
        system=[commitment],
        messages=[
            {"role": "user", "content": commitment},
            {"role": "assistant", "content": "", "tool_calls": commitment},
            {"role": "tool", "tool_call_id": "t1", "content": {"rows": [1]}},
            commitment,
        ],
    )
    wire = chat_body(request, stream=False, max_tokens_field="max_tokens")["messages"]
    text = json.dumps(commitment)
    assert wire == [
        {"role": "system", "content": text},
        {"role": "user", "content": text},
        {"role": "assistant", "content": text},
        {"role": "tool", "tool_call_id": "t1", "content": '{"rows": [1]}'},
        {"role": "user", "content": text},
    ]


def test_no_tools_sends_no_tools_member_and_streaming_asks_for_usage() -> None:
    body = chat_body(served(), stream=True, max_tokens_field="max_tokens")
    assert "tools" not in body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_the_fake_answers_in_the_shape_of_the_documented_examples() -> None:
    documented = json.loads(fixture("chat_completion.json"))
    made = completion_json(reply("Hello!"), model=MODEL, n=1)
    assert isinstance(made, dict)
    assert set(made) >= set(documented)
    assert set(made["choices"][0]["message"]) == set(documented["choices"][0]["message"])
    assert set(made["usage"]) == set(documented["usage"])
    chunks = [
        json.loads(e[6:]) for e in sse_events(fixture("stream_chunks.sse")) if b"[DONE]" not in e
    ]
    streamed = completion_chunks(reply("Hello! How"), model=MODEL, n=1, include_usage=True)
    assert [set(c) for c in streamed[:-1]] == [set(chunks[0])] * (len(streamed) - 1)
    assert set(streamed[-1]) == set(chunks[-1]) and streamed[-1]["choices"] == []
    tool = json.loads(fixture("tool_call_completion.json"))["choices"][0]["message"]
    made_tool = completion_json(tool_reply(("c", "f", {})), model=MODEL, n=1)
    assert isinstance(made_tool, dict)
    assert set(made_tool["choices"][0]["message"]["tool_calls"][0]) == set(tool["tool_calls"][0])


# -- a recorded run ---------------------------------------------------------------------------


def test_a_tool_loop_run_verifies_and_its_wire_digests_are_the_bytes_exchanged(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    replies = [fixture("tool_call_completion.json"), fixture("after_tool_completion.json")]
    server.add(*(Completion(body=body) for body in replies))
    model = capturing(server)
    # 1.0 comes back from the log as 1, and the schema's keys sorted: the bytes must not care
    agent = weather_agent(model, store=str(tmp_path / "run.db"), temperature=1.0, max_tokens=256)
    result = agent.run_sync("What's the weather like in Boston?")
    assert result.answer == "It is 22 degrees Celsius and sunny in Boston."
    assert result.calls == 2 and result.outcome == "answered"
    # the first reply reports no cache figures, the second 1024 cached prompt tokens
    # prompt_tokens include the cached ones; Usage.input counts the uncached only
    assert result.usage == {
        "input": 82 + 1230 - 1024,
        "output": 17 + 13,
        "calls": 2,
        "cache_read": 1024,
    }
    assert outcome(agent.store, result.run_id) == "answered"
    tool_message = result.state["history"][2]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_abc123"

    exchanges = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert [e["call"] for e in exchanges] == [0, 1]
    assert len(server.requests) == 2
    for k, exchange in enumerate(exchanges):
        rebuilt = af.served_at(agent.store, result.run_id, k)
        assert rebuilt == model.received[k]  # the log rebuilds what the adapter was handed
        body = server.requests[k].body
        (attempt,) = exchange["attempts"]
        assert attempt == {
            "request": hexdigest("wire/request", body),
            "response": hexdigest("wire/response", replies[k]),
            "status": 200,
            "error": None,
        }
        assert model.wire_request(rebuilt) == body  # what ``served --wire`` rebuilds
    sent = server.requests[1].json()
    assert sent["messages"][0] == {
        "role": "system",
        "content": "You are a weather assistant.\n\nAnswer in one sentence.",
    }
    assert sent["messages"][2]["tool_calls"][0]["function"]["name"] == "get_current_weather"
    assert sent["messages"][3]["role"] == "tool"
    assert sent["temperature"] == 1 and sent["max_tokens"] == 256  # a base_url: max_tokens
    assert run_open(agent.store, result.run_id)["provider_info"] == model.describe()


def test_describe_names_the_adapter_and_the_versions_that_shape_the_bytes() -> None:
    import httpx2
    import openai as sdk

    info = OpenAIChat(base_url="http://127.0.0.1:9/v1", stream=True).describe()
    assert info == {
        "adapter": "openai-chat",
        "adapter_version": af.__version__,
        "sdk": f"openai {sdk.__version__}",
        "httpx": f"httpx2 {httpx2.__version__}",
        "stream": "true",
        "max_tokens_field": "max_tokens",
    }


def test_a_recorded_run_replays_with_no_model_call(server: FakeOpenAI, tmp_path: Path) -> None:
    server.add(
        tool_reply(("call_1", "get_current_weather", {"location": "Boston"})),
        reply("Sunny, 22C.", cached_tokens=128),
    )
    db = tmp_path / "run.db"
    with weather_agent(provider(server), store=str(db)) as agent:
        result = agent.run_sync("Weather in Boston?")
    assert result.answer == "Sunny, 22C." and result.usage["cache_read"] == 128
    received = len(server.requests)
    twin = weather_agent(provider(dead_url(), max_retries=0), store=str(tmp_path / "replay.db"))
    replayed = af.replay_sync(twin, str(db), result.run_id)
    assert replayed.result.answer == "Sunny, 22C."
    assert len(server.requests) == received  # nothing was asked of any model
    twin.close()


def test_the_same_provider_serves_runs_in_successive_event_loops(server: FakeOpenAI) -> None:
    server.add(reply("one"), reply("two"))
    agent = af.Agent(provider=provider(server), model=MODEL)
    assert agent.run_sync("1").answer == "one"
    assert agent.run_sync("2").answer == "two"  # a new loop: a new connection pool


# -- streaming --------------------------------------------------------------------------------


def test_streaming_sends_tokens_to_listeners_and_records_the_assembled_reply(
    server: FakeOpenAI,
) -> None:
    stream = fixture("stream_chunks.sse")
    server.add(Completion(chunks=stream))
    model = capturing(server, stream=True)
    agent = af.Agent(provider=model, model=MODEL)
    tokens: list[str] = []
    agent.on("agentfootprint.stream.token", collect(tokens))
    result = agent.run_sync("Hello")
    assert result.answer == "Hello! How can I assist you today?"
    assert "".join(tokens) == result.answer and len(tokens) == 9
    assert result.state["last_response"]["content"] == result.answer
    assert result.usage == {"input": 19, "output": 10, "calls": 1, "cache_read": 0}
    (exchange,) = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    (attempt,) = exchange["attempts"]
    assert attempt["response"] == hexdigest("wire/response", stream)  # the bytes as received
    body = server.requests[0].body
    assert attempt["request"] == hexdigest("wire/request", body)
    assert model.wire_request(af.served_at(agent.store, result.run_id, 0)) == body


def test_a_streamed_tool_call_is_assembled_from_its_deltas(server: FakeOpenAI) -> None:
    server.add(Completion(chunks=fixture("stream_tool_call.sse")), reply("22C in Boston."))
    agent = weather_agent(provider(server, stream=True))
    result = agent.run_sync("Weather in Boston?")
    assert result.answer == "22C in Boston."
    call = result.state["history"][1]["tool_calls"][0]
    assert call == {
        "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
        "name": "get_current_weather",
        "arguments": {"location": "Boston, MA"},
    }
    assert result.usage["cache_read"] == 64 + 0


def test_the_request_is_the_same_whether_or_not_someone_listens(server: FakeOpenAI) -> None:
    server.add(reply("a"), reply("a"))
    quiet = af.Agent(provider=provider(server, stream=True), model=MODEL)
    quiet.run_sync("hi")
    heard = af.Agent(provider=provider(server, stream=True), model=MODEL)
    heard.on("agentfootprint.stream.token", lambda event: None)
    heard.run_sync("hi")
    assert server.requests[0].body == server.requests[1].body


def test_a_dropped_stream_fails_the_call_and_the_run_closes_failed(server: FakeOpenAI) -> None:
    server.add(DroppedStream(after=3))
    agent = af.Agent(provider=provider(server, stream=True), model=MODEL)
    tokens: list[str] = []
    agent.on("agentfootprint.stream.token", collect(tokens))
    exc, run_id = failed_run(agent)
    assert "the stream ended before the reply was complete" in str(exc)
    assert exc.retryable is False and exc.status is None
    assert tokens == ["Hello ", "there, "]  # what arrived before the cut
    (exchange,) = events_of(agent.store, run_id, "agentfootprint.wire.exchange")
    (attempt,) = exchange["attempts"]
    assert attempt["status"] == 200 and attempt["response"] is not None
    assert attempt["error"] == "stream ended before the reply was complete"
    assert len(server.requests) == 1  # not retried


def test_a_stream_that_ends_without_finishing_fails_the_call(server: FakeOpenAI) -> None:
    server.add(UnfinishedStream(after=2))
    agent = af.Agent(provider=provider(server, stream=True), model=MODEL)
    exc, _ = failed_run(agent)
    assert "the stream ended before the reply was complete" in str(exc)
    assert exc.retryable is False


def test_an_error_event_mid_stream_fails_the_call_with_the_servers_words(
    server: FakeOpenAI,
) -> None:
    events = sse_events(fixture("stream_chunks.sse"))[:3]
    events.append(
        b'data: {"error": {"message": "The server is overloaded.", "type": "server_error"}}\n\n'
    )
    server.add(Completion(chunks=b"".join(events)))
    agent = af.Agent(provider=provider(server, stream=True), model=MODEL)
    exc, _ = failed_run(agent)
    assert "the stream ended before the reply was complete" in str(exc)
    assert "The server is overloaded." in str(exc) and exc.retryable is False


# -- retries ----------------------------------------------------------------------------------


def test_a_429_with_retry_after_is_retried_and_both_attempts_are_recorded(
    server: FakeOpenAI,
) -> None:
    server.add(error("error_rate_limit.json", 429, retry_after=0.05), reply("ok"))
    sleeps = Sleeps()
    agent = af.Agent(provider=provider(server, sleeps=sleeps), model=MODEL)
    result = agent.run_sync("hi")
    assert sleeps.waits == [0.05]  # the wait asked for was honoured
    assert result.answer == "ok"
    (exchange,) = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    first, second = exchange["attempts"]
    assert first == {
        "request": hexdigest("wire/request", server.requests[0].body),
        "response": hexdigest("wire/response", fixture("error_rate_limit.json")),
        "status": 429,
        "error": "HTTP 429 rate_limit_exceeded",
        "retry_after": 0.05,
    }
    assert second["status"] == 200 and second["error"] is None
    assert server.requests[0].body == server.requests[1].body  # the same request again


def test_retry_after_as_an_http_date_is_honoured_and_capped(server: FakeOpenAI) -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=3600), usegmt=True)
    server.add(Failure(429, fixture("error_rate_limit.json"), retry_after=later), reply("ok"))
    sleeps = Sleeps()
    made = provider(server, sleeps=sleeps, max_retry_wait=2.5)
    assert af.Agent(provider=made, model=MODEL).run_sync("hi").answer == "ok"
    assert sleeps.waits == [2.5]


def test_a_500_is_retried_with_backoff(server: FakeOpenAI) -> None:
    server.add(server_error(), error("error_server.json", 503), reply("ok"))
    sleeps = Sleeps()
    agent = af.Agent(provider=provider(server, sleeps=sleeps), model=MODEL)
    result = agent.run_sync("hi")
    assert result.answer == "ok"
    assert len(sleeps.waits) == 2
    assert 0.25 <= sleeps.waits[0] <= 0.5 and 0.5 <= sleeps.waits[1] <= 1.0  # jittered
    (exchange,) = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert [a["status"] for a in exchange["attempts"]] == [500, 503, 200]


def test_retries_exhausted_fail_the_run_which_closes_failed(server: FakeOpenAI) -> None:
    server.add(*[error("error_rate_limit.json", 429, retry_after=1)] * 3)
    sleeps = Sleeps()
    agent = af.Agent(provider=provider(server, sleeps=sleeps), model=MODEL)
    exc, run_id = failed_run(agent)
    assert exc.status == 429 and exc.retryable is True
    assert "rate limited" in str(exc) and "after 3 attempts" in str(exc)
    assert "asked to wait 1 s" in str(exc)
    assert isinstance(exc.__cause__, af.ProviderError) and exc.__cause__.wire is not None
    assert sleeps.waits == [1.0, 1.0]
    (exchange,) = events_of(agent.store, run_id, "agentfootprint.wire.exchange")
    assert [a["status"] for a in exchange["attempts"]] == [429, 429, 429]


def test_max_retries_zero_makes_one_attempt(server: FakeOpenAI) -> None:
    server.add(server_error())
    agent = af.Agent(provider=provider(server, max_retries=0), model=MODEL)
    exc, _ = failed_run(agent)
    assert exc.status == 500 and exc.retryable is True and len(server.requests) == 1
    assert "server failed on its side (500" in str(exc) and "server server" not in str(exc)


# -- errors that say what to do ---------------------------------------------------------------


def test_a_bad_key_names_the_environment_variable(server: FakeOpenAI) -> None:
    server.add(error("error_invalid_api_key.json", 401))
    agent = af.Agent(provider=provider(server), model=MODEL)
    exc, _ = failed_run(agent)
    assert exc.status == 401 and exc.retryable is False
    assert "OPENAI_API_KEY" in str(exc) and "refused the API key" in str(exc)
    assert len(server.requests) == 1


def test_a_missing_key_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(af.UsageError, match="OPENAI_API_KEY"):
        providers.openai()
    with pytest.raises(af.UsageError, match="OPENAI_API_KEY"):  # OpenAI itself, named
        providers.openai(base_url="https://api.openai.com/v1/")


def test_the_key_comes_from_the_environment(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.add(reply("ok"))
    made = providers.openai(base_url=server.url)
    assert af.Agent(provider=made, model=MODEL).run_sync("hi").answer == "ok"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_local_server_needs_no_key(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.add(reply("ok"))
    assert (
        af.Agent(provider=providers.openai(base_url=server.url), model="llama3")
        .run_sync("hi")
        .answer
        == "ok"
    )


def test_a_model_not_found_names_the_model(server: FakeOpenAI) -> None:
    server.add(error("error_model_not_found.json", 404))
    agent = af.Agent(provider=provider(server), model="gpt-9-turbo")
    exc, _ = failed_run(agent)
    assert exc.status == 404 and exc.retryable is False
    assert "model 'gpt-9-turbo' was not found" in str(exc) and "base_url" in str(exc)


def test_a_request_too_long_for_the_context_says_to_reduce_the_history(
    server: FakeOpenAI,
) -> None:
    server.add(error("error_context_length_exceeded.json", 400))
    agent = af.Agent(provider=provider(server), model=MODEL)
    exc, run_id = failed_run(agent)
    assert exc.status == 400 and exc.retryable is False
    assert "too long for model 'gpt-4o-mini'" in str(exc) and "reduce the history" in str(exc)
    (exchange,) = events_of(agent.store, run_id, "agentfootprint.wire.exchange")
    assert exchange["attempts"][0]["error"] == "HTTP 400 context_length_exceeded"


def test_nothing_listening_at_base_url_asks_whether_the_server_runs() -> None:
    url = dead_url()
    sleeps = Sleeps()
    agent = af.Agent(provider=provider(url, sleeps=sleeps, max_retries=1), model=MODEL)
    exc, run_id = failed_run(agent)
    assert exc.status is None and exc.retryable is True
    assert f"Is the server running at {url}?" in str(exc)
    assert len(sleeps.waits) == 1
    (exchange,) = events_of(agent.store, run_id, "agentfootprint.wire.exchange")
    assert [a["error"] for a in exchange["attempts"]] == ["connection refused"] * 2
    assert all(a["response"] is None and a["status"] is None for a in exchange["attempts"])


def test_a_server_slower_than_the_timeout_fails_as_retryable(server: FakeOpenAI) -> None:
    server.add(Completion(content="late", delay=3.0))
    agent = af.Agent(provider=provider(server, timeout=0.2, max_retries=0), model=MODEL)
    exc, _ = failed_run(agent)
    assert exc.retryable is True and "did not answer within 0.2 s" in str(exc)


def test_a_reply_with_no_choices_is_an_error_naming_the_server(server: FakeOpenAI) -> None:
    server.add(Completion(body={"id": "x", "object": "chat.completion", "choices": []}))
    agent = af.Agent(provider=provider(server), model=MODEL)
    exc, _ = failed_run(agent)
    assert "replied with no choices" in str(exc) and exc.retryable is False


def test_a_reply_that_is_not_json_asks_whether_base_url_is_the_api(server: FakeOpenAI) -> None:
    server.add(Completion(body=b"<html>It works!</html>"))
    agent = af.Agent(provider=provider(server), model=MODEL)
    exc, _ = failed_run(agent)
    assert "is base_url the API's address?" in str(exc) and exc.retryable is False


def test_to_provider_error_classifies_one_sdk_failure() -> None:
    import httpx2
    import openai as sdk

    vendor = OpenAIChat(base_url="http://127.0.0.1:9/v1")._vendor
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    refused = sdk.APIConnectionError(request=request)
    refused.__cause__ = httpx2.ConnectError("[Errno 111] Connection refused")
    error = _http.to_provider_error(refused, vendor=vendor, model="m", secrets=(KEY,))
    assert error.retryable is True and error.status is None
    assert "Is the server running at http://127.0.0.1:9/v1?" in str(error)
    response = httpx2.Response(401, request=request, json={"error": {"message": KEY}})
    denied = sdk.AuthenticationError(KEY, response=response, body={"error": {"message": KEY}})
    error = _http.to_provider_error(denied, vendor=vendor, model="m", secrets=(KEY,))
    assert error.status == 401 and "OPENAI_API_KEY" in str(error) and KEY not in str(error)


def test_cancelling_a_call_in_flight_closes_the_run(server: FakeOpenAI) -> None:
    server.add(Completion(content="late", delay=3.0))
    agent = af.Agent(provider=provider(server), model=MODEL)

    async def go() -> None:
        task = asyncio.create_task(agent.run("hi"))
        for _ in range(3000):  # until the request is at the server (a hang guard, not a figure)
            if server.requests:
                break
            await asyncio.sleep(0.01)
        assert server.requests and not task.done()  # the call is in flight: its reply waits 3 s
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    (run_id,) = agent.store.run_ids()
    assert outcome(agent.store, run_id) == "failed"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": "60"}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retry_wait": float("inf")}, "max_retry_wait"),
        ({"stream": "yes"}, "stream"),
        ({"base_url": ""}, "base_url"),
        ({"base_url": "localhost:11434"}, "base_url"),
        ({"api_key": ""}, "api_key"),
        ({"extra_headers": {"x": 1}}, "extra_headers"),
        ({"max_tokens_field": "tokens"}, "max_tokens_field"),
    ],
)
def test_bad_options_are_refused_naming_the_option(options: dict[str, Any], named: str) -> None:
    options.setdefault("base_url", "http://127.0.0.1:9/v1")
    with pytest.raises(af.UsageError) as caught:
        providers.openai(**options)
    assert caught.value.option == named


def test_retry_after_parsing() -> None:
    parse_after = _http.parse_retry_after
    assert parse_after({"retry-after": "2"}) == 2.0
    assert parse_after({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    assert parse_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # past
    when = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert parse_after({"retry-after": when}, now=1445412470.0) == 10.0
    assert parse_after({"retry-after": "soon"}) is None
    assert parse_after({"retry-after": "-1"}) is None
    assert parse_after({}) is None and parse_after(None) is None
    policy = _http.RetryPolicy(max_retry_wait=3.0, jitter=lambda: 1.0)
    assert policy.delay(0, 10.0) == 3.0 and policy.delay(0, None) == 0.5
    assert policy.delay(10, None) == 3.0  # the backoff is capped too


# -- the key ----------------------------------------------------------------------------------


def test_a_planted_key_reaches_the_server_and_nothing_recorded(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.add(
        tool_reply(("call_1", "get_current_weather", {"location": "Boston"})),
        reply("Sunny."),
        bad_key(),
        error("error_rate_limit.json", 429, retry_after=0),
        error("error_rate_limit.json", 429, retry_after=0),
        error("error_rate_limit.json", 429, retry_after=0),
    )
    db = tmp_path / "run.db"
    made = provider(server)
    agent = weather_agent(made, store=str(db))
    seen: list[Any] = []
    agent.on("*", seen.append)
    agent.run_sync("Weather in Boston?")
    errors = [failed_run(agent)[0], failed_run(agent)[0]]
    agent.close()
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)
    assert all(KEY.encode() not in r.body for r in server.requests)
    texts = [str(e) for e in errors] + [repr(e) for e in errors]
    texts += [str(e.__cause__) for e in errors] + [repr(made), str(made.describe())]
    texts += [repr(event) for event in seen]
    assert seen and not [t for t in texts if KEY in t]
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{db}{suffix}")
        if path.exists():
            assert KEY.encode() not in path.read_bytes()
    with af.SqliteStore(str(db)) as store:  # every row of every run
        run_ids = store.run_ids()
        for run_id in run_ids:
            assert all(KEY.encode() not in bytes(row.body) for row in store.read(run_id))
    # and no command prints it
    from click.testing import CliRunner

    from agentfootprint.cli import main

    commands = [["runs", str(db)], ["verify", str(db)]]
    for run_id in run_ids:
        commands += [
            ["show", str(db), run_id],
            ["served", str(db), run_id, "0"],
            ["served", str(db), run_id, "0", "--wire"],
        ]
    for args in commands:
        shown = CliRunner().invoke(main, args)
        assert KEY not in shown.output, args


def test_the_key_is_scrubbed_from_a_message_that_echoes_it(server: FakeOpenAI) -> None:
    server.add(bad_key(shown=KEY))  # a server that echoes the key it was sent
    agent = af.Agent(provider=provider(server), model=MODEL)
    exc, _ = failed_run(agent)
    assert KEY not in str(exc) and KEY not in str(exc.__cause__) and "[api key]" in str(exc)


# -- the provider contract --------------------------------------------------------------------


class TestOpenAIContract(ServedProviderContract):
    """The contract every provider passes, through the fake Chat Completions API."""

    stream = False

    def fake(self, replies: list[af.LLMResponse | af.ProviderError]) -> FakeOpenAI:
        return FakeOpenAI([scripted_reply(r) for r in replies])

    def provider_for(self, server: FakeOpenAI) -> Any:
        return provider(server, max_retries=0, stream=self.stream)


class TestOpenAIStreamingContract(TestOpenAIContract):
    streams = True
    stream = True


def failed_run(agent: af.Agent, text: str = "What's the weather like in Boston?") -> Any:
    return _failed_run(agent, text)


# -- a sealed run through the adapter (issue 14) ---------------------------------------------


def test_a_sealed_run_attests_its_wire_exchanges(tmp_path: Path) -> None:
    """The seal of a run served over HTTP carries the digest of its recorded wire exchanges:
    the verifier recomputes it from the rows, so a rewritten exchange fails the seal."""
    from agentfootprint.seal import Ed25519Signer, parse_envelope
    from agentfootprint.seal.facts import wire_list_digest
    from agentfootprint.seal.statement import parse_statement
    from agentfootprint.testing.tamper import plain, read_rows, reencoded, rewrite, tampering

    signer = Ed25519Signer.from_seed(bytes(range(32)))
    script = [
        tool_reply(("call_1", "get_current_weather", {"location": "Boston"})),
        reply("It is sunny in Boston."),
    ]
    path = tmp_path / "wire.db"
    with (
        FakeOpenAI(script) as server,
        weather_agent(provider(server), store=path, signer=signer) as agent,
    ):
        result = agent.run_sync("What's the weather like in Boston?")
    store = af.SqliteStore(path, readonly=True)
    rows = list(store.read(result.run_id))
    verified = af.Verifier(store, trusted_keys=[signer.public]).verify(result.run_id)
    store.close()
    assert verified.outcome is af.Outcome.VALID
    wires = [
        json.loads(r.body)["payload"]
        for r in rows
        if r.type == "event" and json.loads(r.body)["name"] == "agentfootprint.wire.exchange"
    ]
    assert len(wires) == 2
    facts = parse_statement(parse_envelope(json.loads(rows[-1].body)["dsse"]).payload)
    assert facts.wire_list_digest == wire_list_digest(wires)
    at = next(
        i
        for i, r in enumerate(rows)
        if r.type == "event" and json.loads(r.body)["name"] == "agentfootprint.wire.exchange"
    )

    def another_response(body: dict[str, Any]) -> None:
        body["payload"]["attempts"][0]["response"] = "0" * 64

    with tampering(path) as conn:
        kept = read_rows(conn, result.run_id)
        triples = plain(kept)
        triples[at] = reencoded(kept[at], another_response)
        rewrite(conn, result.run_id, triples)
    store = af.SqliteStore(path, readonly=True)
    with pytest.raises(af.VerificationError) as info:
        af.Verifier(store, trusted_keys=[signer.public]).verify(result.run_id)
    store.close()
    assert info.value.code == "seal" and "wire_list_digest" in str(info.value)
