"""``af.openai(client=...)`` and ``af.anthropic(client=...)``: a user's own SDK client
(``AsyncAzureOpenAI`` included) serves the agent, and the wire receipt still digests the
exact bytes the loopback server received; the key is in no file; a client whose bytes the
adapter cannot see is refused with a sentence saying why.

Real HTTP to the fake vendor servers on 127.0.0.1; the SDK clients are built as a user
builds them and never patched. Every run closed here is verified by the pytest plugin.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic as anthropic_sdk
import httpx2
import openai as openai_sdk
import pytest
from click.testing import CliRunner
from provider_support import failed_run

import agentfootprint as af
from agentfootprint import cli
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.providers import _http
from agentfootprint.testing.fake_anthropic import FakeAnthropic, message, tool_use
from agentfootprint.testing.fake_openai import (
    FakeOpenAI,
    bad_key,
    rate_limited,
    reply,
    server_error,
    tool_reply,
)
from agentfootprint.testing.records import recorded_events, run_open

pytestmark = pytest.mark.allow_model_requests

OPENAI_KEY = "sk-own-client-PLANTED-5e1f"
AZURE_KEY = "azure-own-client-PLANTED-77c2"
ANTHROPIC_KEY = "sk-ant-own-client-PLANTED-0b9d"
API_VERSION = "2024-10-21"
MODEL = "gpt-4o-mini"


def weather_tool() -> af.Tool:
    return af.define_tool(
        name="get_weather",
        description="The weather in a city.",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        execute=lambda args: {"sky": "sunny", "city": args.get("city")},
    )


def agent_for(provider: Any, model: str = MODEL, **options: Any) -> af.Agent:
    return af.Agent(
        provider=provider,
        model=model,
        system=["You are a weather assistant."],
        tools=[weather_tool()],
        **options,
    )


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def root(server: FakeOpenAI) -> str:
    """The server's address without ``/v1``: Azure's endpoint."""
    return server.url.removesuffix("/v1")


def azure_client(server: FakeOpenAI, **options: Any) -> openai_sdk.AsyncAzureOpenAI:
    return openai_sdk.AsyncAzureOpenAI(
        api_key=AZURE_KEY, api_version=API_VERSION, azure_endpoint=root(server), **options
    )


def assert_digests_are_the_bytes_received(
    agent: af.Agent, run_id: str, bodies: list[bytes], provider: Any
) -> None:
    """Each call's recorded request digest is the SHA-256 of the bytes the server got, and
    the log rebuilds those bytes (what ``served --wire`` checks)."""
    exchanges = recorded_events(agent.store, run_id, "agentfootprint.wire.exchange")
    assert len(exchanges) == len(bodies)
    for k, (exchange, body) in enumerate(zip(exchanges, bodies, strict=True)):
        (attempt,) = exchange["attempts"]
        assert attempt["request"] == hexdigest("wire/request", body)
        assert attempt["status"] == 200 and attempt["error"] is None
        assert provider.wire_request(af.served_at(agent.store, run_id, k)) == body


# -- the bytes --------------------------------------------------------------------------------


def test_an_own_async_openai_client_records_the_bytes_the_server_received(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.add(tool_reply(("call_1", "get_weather", {"city": "Oslo"})), reply("Sunny in Oslo."))
    http = httpx2.AsyncClient(headers={"x-team": "blue"})  # the user's own settings
    client = openai_sdk.AsyncOpenAI(api_key=OPENAI_KEY, base_url=server.url, http_client=http)
    provider = af.openai(client=client)
    agent = agent_for(provider, store=tmp_path / "runs.db", temperature=0.5)
    result = agent.run_sync("Weather in Oslo?")
    assert result.answer == "Sunny in Oslo." and result.calls == 2
    bodies = [r.body for r in server.requests]
    assert_digests_are_the_bytes_received(agent, result.run_id, bodies, provider)
    # the client as the user built it: its key, its headers, its address
    assert all(r.headers["authorization"] == f"Bearer {OPENAI_KEY}" for r in server.requests)
    assert all(r.headers["x-team"] == "blue" for r in server.requests)
    assert run_open(agent.store, result.run_id)["provider_info"] == provider.describe()
    agent.close()
    shown = CliRunner().invoke(
        cli.main, ["served", str(tmp_path / "runs.db"), result.run_id, "1", "--wire"]
    )
    assert shown.exit_code == 0 and json.loads(shown.output)["matches"] is True, shown.output


def test_an_azure_client_records_the_bytes_sent_to_its_deployment(server: FakeOpenAI) -> None:
    server.add(tool_reply(("call_1", "get_weather", {"city": "Lima"})), reply("Warm."))
    provider = af.openai(client=azure_client(server))
    agent = agent_for(provider, model="my-deployment", seed=3, top_p=0.5)
    result = agent.run_sync("Weather in Lima?")
    assert result.answer == "Warm."
    for received in server.requests:
        path, query = received.path.split("?", 1)
        assert path == "/openai/deployments/my-deployment/chat/completions"
        assert query == f"api-version={API_VERSION}"
        assert received.headers["api-key"] == AZURE_KEY  # Azure's header, sent by the client
    assert_digests_are_the_bytes_received(
        agent, result.run_id, [r.body for r in server.requests], provider
    )
    assert (server.requests[0].json()["seed"], server.requests[0].json()["top_p"]) == (3, 0.5)
    assert "client=AsyncAzureOpenAI" in repr(provider)


def test_an_own_async_anthropic_client_records_the_bytes_the_server_received() -> None:
    with FakeAnthropic(api_key=ANTHROPIC_KEY) as fake:  # refuses a request without the key
        fake.script(
            message(tool_uses=[tool_use("get_weather", {"city": "Rome"})]), message("Mild.")
        )
        client = anthropic_sdk.AsyncAnthropic(
            api_key=ANTHROPIC_KEY, base_url=fake.url, default_headers={"x-team": "red"}
        )
        provider = af.anthropic(client=client)
        agent = agent_for(provider, model="claude-sonnet-4-5", top_p=0.8, stop="END")
        result = agent.run_sync("Weather in Rome?")
        assert result.answer == "Mild." and result.calls == 2
        assert all(r.headers["x-team"] == "red" for r in fake.received)
        assert json.loads(fake.received[0].body)["stop_sequences"] == ["END"]
        assert_digests_are_the_bytes_received(
            agent, result.run_id, [r.body for r in fake.received], provider
        )


def test_a_streamed_run_through_an_own_client_digests_the_stream_as_received(
    server: FakeOpenAI,
) -> None:
    server.add(reply("Streaming works."))
    client = openai_sdk.AsyncOpenAI(api_key=OPENAI_KEY, base_url=server.url)
    provider = af.openai(client=client, stream=True)
    agent = agent_for(provider)
    tokens: list[str] = []
    agent.on("agentfootprint.stream.token", lambda event: tokens.append(event.text))
    result = agent.run_sync("hi")
    assert "".join(tokens) == result.answer == "Streaming works."
    (exchange,) = recorded_events(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert exchange["attempts"][0]["request"] == hexdigest("wire/request", server.requests[0].body)
    assert json.loads(server.requests[0].body)["stream"] is True


# -- retries are the adapter's -----------------------------------------------------------------


def test_the_clients_own_retries_are_off_and_each_adapter_attempt_is_recorded(
    server: FakeOpenAI,
) -> None:
    server.add(server_error(), reply("Second time lucky."))
    client = openai_sdk.AsyncOpenAI(api_key=OPENAI_KEY, base_url=server.url, max_retries=5)
    provider = af.openai(client=client, max_retries=1)
    provider.retry = _http.RetryPolicy(max_retries=1, sleep=_no_wait)
    agent = agent_for(provider)
    result = agent.run_sync("hi")
    assert result.answer == "Second time lucky."
    (exchange,) = recorded_events(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert [a["status"] for a in exchange["attempts"]] == [500, 200]
    assert [a["request"] for a in exchange["attempts"]] == [
        hexdigest("wire/request", r.body) for r in server.requests
    ]
    # with none left to the adapter, one request: the SDK client retried nothing itself
    server.add(rate_limited(retry_after=0), reply("unused"))
    provider.retry = _http.RetryPolicy(max_retries=0, sleep=_no_wait)
    exc, _ = failed_run(agent, "again")
    assert exc.status == 429 and len(server.requests) == 3
    assert client.max_retries == 5  # the user's client itself is unchanged


async def _no_wait(seconds: float) -> None:
    return None


# -- the key ----------------------------------------------------------------------------------


def test_the_planted_keys_reach_the_servers_and_no_file(server: FakeOpenAI, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    seen: list[str] = []
    server.add(
        tool_reply(("call_1", "get_weather", {"city": "Oslo"})),
        reply("Sunny."),
        reply("Azure says hi."),
        bad_key(shown=OPENAI_KEY),  # a server that echoes the key it was sent
    )
    own = af.openai(client=openai_sdk.AsyncOpenAI(api_key=OPENAI_KEY, base_url=server.url))
    azure = af.openai(client=azure_client(server))
    with FakeAnthropic(api_key=ANTHROPIC_KEY) as fake:
        fake.script(message("Claude says hi."))
        claude = af.anthropic(
            client=anthropic_sdk.AsyncAnthropic(api_key=ANTHROPIC_KEY, base_url=fake.url)
        )

        def heard(event: af.AgentEvent) -> None:
            seen.append(repr(event))

        for provider, model in ((own, MODEL), (azure, "dep"), (claude, "claude-sonnet-4-5")):
            seen += [repr(provider), str(vars(provider)), str(provider.describe())]
            with agent_for(provider, model=model, store=db) as agent:
                agent.on("*", heard)
                agent.run_sync("Weather?")
        with agent_for(own, store=db) as agent:
            exc, _ = failed_run(agent, "Weather?")
            seen += [str(exc), repr(exc), str(exc.__cause__), repr(exc.__cause__)]
            assert "check the key in the AsyncOpenAI given as client=" in str(exc)
        assert fake.received[0].headers["authorization"] == f"Bearer {ANTHROPIC_KEY}"
    assert server.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert server.requests[2].headers["api-key"] == AZURE_KEY
    keys = (OPENAI_KEY, AZURE_KEY, ANTHROPIC_KEY)
    runner = CliRunner()
    with af.SqliteStore(str(db)) as store:
        run_ids = store.run_ids()
    assert len(run_ids) == 4
    for run_id in run_ids:
        for command in (["show", str(db), run_id], ["served", str(db), run_id, "0"]):
            seen.append(runner.invoke(cli.main, command).output)
    seen.append(runner.invoke(cli.main, ["verify", str(db)]).output)
    assert seen and not [text for text in seen for key in keys if key in text]
    files = list(tmp_path.iterdir())
    assert db in files
    for path in files:  # the log and whatever sits beside it
        data = path.read_bytes()
        assert not [key for key in keys if key.encode() in data], path


# -- the client stays the user's ---------------------------------------------------------------


def test_the_client_is_never_closed_and_its_own_requests_pass_through_unrecorded(
    server: FakeOpenAI,
) -> None:
    server.add(reply("From the agent."), reply("From the user."))
    # no connection kept: the user's own call below runs on another event loop
    http = httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=0))
    client = openai_sdk.AsyncOpenAI(api_key=OPENAI_KEY, base_url=server.url, http_client=http)
    agent = agent_for(af.openai(client=client))
    result = agent.run_sync("hi")  # run_sync closes the provider's connections at its end
    agent.close()
    assert not http.is_closed

    async def own_call() -> str:
        completion = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "mine"}]
        )
        return completion.choices[0].message.content or ""

    assert asyncio.run(own_call()) == "From the user."
    assert len(server.requests) == 2
    (exchange,) = recorded_events(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert len(exchange["attempts"]) == 1  # the user's request is not the run's


def test_a_client_given_twice_is_wrapped_once(server: FakeOpenAI) -> None:
    client = openai_sdk.AsyncOpenAI(api_key=OPENAI_KEY, base_url=server.url)
    af.openai(client=client)
    af.openai(client=client, stream=True)
    transport = client._client._transport
    assert isinstance(transport, _http.RecordingTransport)
    assert not isinstance(transport._inner, _http.RecordingTransport)


# -- refused ----------------------------------------------------------------------------------


class Elsewhere(httpx2.AsyncClient):
    """An HTTP client that sends every request through another client: its own transport
    never sees one."""

    async def send(self, request: httpx2.Request, **options: Any) -> httpx2.Response:
        async with httpx2.AsyncClient() as other:
            return await other.send(request, **options)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda url: openai_sdk.OpenAI(api_key="k", base_url=url), "use AsyncOpenAI"),
        (lambda url: "http://127.0.0.1:9/v1", "must be an openai.AsyncOpenAI"),
        (
            lambda url: openai_sdk.AsyncOpenAI(api_key="k", base_url=url, http_client=Elsewhere()),
            "overrides send: its requests need not pass through its transport",
        ),
    ],
)
def test_an_openai_client_the_adapter_cannot_use_or_see_is_refused(
    make: Any, words: str, server: FakeOpenAI
) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.openai(client=make(server.url))
    assert caught.value.option == "client" and words in str(caught.value)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda url: anthropic_sdk.Anthropic(api_key="k", base_url=url), "the adapter is async"),
        (lambda url: object(), "must be an anthropic.AsyncAnthropic"),
        (
            lambda url: anthropic_sdk.AsyncAnthropic(
                api_key="k", base_url=url, http_client=Elsewhere()
            ),
            "overrides send",
        ),
    ],
)
def test_an_anthropic_client_the_adapter_cannot_use_or_see_is_refused(
    make: Any, words: str
) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.anthropic(client=make("http://127.0.0.1:9"))
    assert caught.value.option == "client" and words in str(caught.value)


def test_the_refusal_says_why_the_bytes_must_be_seen() -> None:
    with pytest.raises(af.UsageError) as caught:
        _http.observe(object(), sdk_client="AsyncOpenAI")
    said = str(caught.value)
    assert "is a builtins.object, not an httpx2.AsyncClient" in said
    assert "The wire receipt digests the exact bytes of every request and reply" in said
    assert "http_client=httpx2.AsyncClient(...)" in said


def test_a_closed_client_is_refused(server: FakeOpenAI) -> None:
    client = openai_sdk.AsyncOpenAI(api_key="k", base_url=server.url)
    asyncio.run(client.close())
    with pytest.raises(af.UsageError, match="HTTP client is closed") as caught:
        af.openai(client=client)
    assert caught.value.option == "client"


@pytest.mark.parametrize(
    "option",
    [
        {"api_key": "k"},
        {"base_url": "http://127.0.0.1:9/v1"},
        {"timeout": 5},
        {"organization": "org"},
        {"extra_headers": {"x": "y"}},
    ],
)
def test_what_the_openai_client_decides_is_refused_beside_it(
    option: dict[str, Any], server: FakeOpenAI
) -> None:
    client = openai_sdk.AsyncOpenAI(api_key="k", base_url=server.url)
    with pytest.raises(af.UsageError) as caught:
        af.openai(client=client, **option)
    (name,) = option
    assert caught.value.option == name and "client= together" in str(caught.value)
    assert not isinstance(client._client._transport, _http.RecordingTransport)  # left as it was


@pytest.mark.parametrize(
    "option",
    [{"api_key": "k"}, {"base_url": "http://x"}, {"timeout": 5}, {"extra_headers": {"a": "b"}}],
)
def test_what_the_anthropic_client_decides_is_refused_beside_it(option: dict[str, Any]) -> None:
    client = anthropic_sdk.AsyncAnthropic(api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(af.UsageError) as caught:
        af.anthropic(client=client, **option)
    (name,) = option
    assert caught.value.option == name


def test_a_request_the_transport_never_saw_fails_the_call_and_records_no_digest(
    server: FakeOpenAI,
) -> None:
    """Fail-closed at the call: a client rewired after the adapter wrapped it answers, but
    no digest could be honest, so the call fails (not retried) and nothing is recorded."""
    server.add(reply("unseen"))
    client = openai_sdk.AsyncOpenAI(api_key=OPENAI_KEY, base_url=server.url)
    agent = agent_for(af.openai(client=client))
    client._client._transport = httpx2.AsyncHTTPTransport()  # the user rewires it
    exc, run_id = failed_run(agent, "hi")
    assert "without passing through the transport" in str(exc)
    assert exc.retryable is False and len(server.requests) == 1
    assert recorded_events(agent.store, run_id, "agentfootprint.wire.exchange") == []
