"""What the model call records beyond the reply: cache usage, the wire exchange of an HTTP
adapter (digests, commitments under a policy), streamed tokens, the provider's versions."""

from __future__ import annotations

from typing import Any

import pytest
from feature_support import events_of

import agentfootprint as af
from agentfootprint.logformat.canonical import parse
from agentfootprint.logformat.commitments import is_commitment
from agentfootprint.logformat.hashing import hexdigest

SENT = b'{"model":"m","messages":[]}'
RECEIVED = b'{"choices":[{"message":{"content":"hi"}}]}'


class WireProvider:
    """Answers like an HTTP adapter: a 429 attempt, then one that answered."""

    name = "wire"
    streams = True

    def __init__(self, fail: bool = False, pieces: tuple[str, ...] = ("hi",)) -> None:
        self.fail = fail
        self.pieces = pieces
        self.streamed: list[bool] = []

    def describe(self) -> dict[str, str]:
        return {"adapter": "wire-test", "adapter_version": "1", "sdk": "none", "httpx": "0"}

    async def complete(self, request: Any, on_token: Any = None) -> af.LLMResponse:
        self.streamed.append(on_token is not None)
        limited = af.WireAttempt(
            request_body=SENT,
            response_body=b"slow down",
            status=429,
            error="rate limited",
            retry_after=0.5,
        )
        if self.fail:
            broken = af.WireAttempt(request_body=SENT, status=None, error="connection reset")
            raise af.ProviderError(
                "the server went away: retry later",
                status=None,
                retryable=True,
                wire=af.WireRecord(attempts=(limited, broken)),
            )
        if on_token is not None:
            for piece in self.pieces:
                await on_token(piece)
        answered = af.WireAttempt(request_body=SENT, response_body=RECEIVED, status=200)
        return af.LLMResponse(
            content="".join(self.pieces),
            usage=af.Usage(input=7, output=2, cache_read=5, cache_write=0),
            wire=af.WireRecord(attempts=(limited, answered)),
        )


def test_each_attempt_is_recorded_by_digest_and_the_versions_in_run_open() -> None:
    agent = af.Agent(provider=WireProvider(), model="m")
    result = agent.run_sync("hello")
    (exchange,) = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert exchange == {
        "call": 0,
        "attempts": [
            {
                "request": hexdigest("wire/request", SENT),
                "response": hexdigest("wire/response", b"slow down"),
                "status": 429,
                "error": "rate limited",
                "retry_after": 0.5,
            },
            {
                "request": hexdigest("wire/request", SENT),
                "response": hexdigest("wire/response", RECEIVED),
                "status": 200,
                "error": None,
            },
        ],
    }
    opened = parse(next(iter(agent.store.read(result.run_id))).body)
    assert opened["provider_info"]["adapter"] == "wire-test"
    assert result.usage == {"input": 7, "output": 2, "calls": 1, "cache_read": 5, "cache_write": 0}
    assert result.state["last_response"]["usage"]["cache_read"] == 5
    # a replay makes no HTTP exchange: its rows match the original's but for these events
    twin = af.Agent(provider=af.MockProvider([]), model="m")
    assert af.replay_sync(twin, agent.store, result.run_id).calls_checked == 1
    assert not events_of(twin.store, twin.store.run_ids()[-1], "agentfootprint.wire.exchange")


def test_under_a_policy_the_digests_are_commitments() -> None:
    agent = af.Agent(provider=WireProvider(), model="m", redact=af.RedactionPolicy(keys=["ssn"]))
    result = agent.run_sync("hello")
    (exchange,) = events_of(agent.store, result.run_id, "agentfootprint.wire.exchange")
    for attempt in exchange["attempts"]:
        assert is_commitment(attempt["request"]) and is_commitment(attempt["response"])
    body = b"".join(bytes(r.body) for r in agent.store.read(result.run_id))
    assert hexdigest("wire/request", SENT).encode() not in body


def test_a_failed_call_records_the_attempts_it_made() -> None:
    agent = af.Agent(provider=WireProvider(fail=True), model="m")
    with pytest.raises(af.ProviderCallError) as caught:
        agent.run_sync("hello")
    run_id = str(caught.value.run_id)
    (exchange,) = events_of(agent.store, run_id, "agentfootprint.wire.exchange")
    assert [a["error"] for a in exchange["attempts"]] == ["rate limited", "connection reset"]
    assert exchange["attempts"][1]["response"] is None
    assert caught.value.retryable is True


def test_streamed_tokens_go_to_listeners_and_the_assembled_reply_is_recorded() -> None:
    provider = WireProvider(pieces=("Hel", "lo", "."))
    agent = af.Agent(provider=provider, model="m")
    tokens: list[af.AgentEvent] = []
    agent.on("agentfootprint.stream.token", tokens.append)
    result = agent.run_sync("hi")
    assert [getattr(t, "text", None) for t in tokens] == ["Hel", "lo", "."]
    assert result.answer == "Hello."
    quiet = af.Agent(provider=WireProvider(pieces=("Hel", "lo", ".")), model="m")
    quiet.run_sync("hi")
    # nobody listens: the provider is asked without a token sink
    assert provider.streamed == [True] and quiet.config.provider.streamed == [False]


@pytest.mark.parametrize("info", [{"adapter": 1}, ["x"], {"adapter": float("nan")}])
def test_a_provider_whose_description_is_not_json_strings_is_refused(info: Any) -> None:
    class Odd(WireProvider):
        def describe(self) -> Any:
            return info

    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=Odd(), model="m")
    assert caught.value.option == "provider"


def test_scripted_usage_with_cache_figures_is_summed() -> None:
    usage = af.Usage(input=10, output=3, cache_read=8)
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("t", {})], usage=usage), "ok"]),
        model="m",
        tools=[af.define_tool(name="t", description="d", execute=lambda a: "x")],
    )
    result = agent.run_sync("go")
    assert result.usage["cache_read"] == 8 and "cache_write" not in result.usage
