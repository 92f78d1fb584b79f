"""The provider contract: behaviour every provider must show, as test cases to subclass.

Subclass :class:`ProviderContract` and implement :meth:`scripted`: a provider whose calls
are answered, in order, by the given replies (each an :class:`LLMResponse` or a
:class:`ProviderError` to fail that call with). The mock implements it with its script;
an HTTP adapter with a fake vendor server on 127.0.0.1 answering with those replies in its
wire format. Every case runs a real agent, whose runs the pytest plugin verifies.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from agentfootprint.agent.agent import Agent
from agentfootprint.errors import ProviderCallError, ProviderError
from agentfootprint.logformat.canonical import canon
from agentfootprint.runtime.events import AgentEvent, LLMToken
from agentfootprint.runtime.provider import LLMResponse, Request, ToolCall, Usage
from agentfootprint.runtime.tools import define_tool

__all__ = ["ProviderContract", "ServedProviderContract", "Unmutating"]

_SCHEMA = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}


class Unmutating:
    """Wraps a provider and fails the call if the provider changed the request it was given
    (the served JSON is borrowed from committed state)."""

    def __init__(self, provider: Any) -> None:
        self.inner = provider
        self.name = getattr(provider, "name", type(provider).__name__)
        self.streams = getattr(provider, "streams", False)
        self.makes_requests = getattr(provider, "makes_requests", False)

    async def complete(self, request: Request, **kwargs: Any) -> LLMResponse:
        before = canon(request.to_json())
        snapshot = copy.deepcopy(request.to_json())
        try:
            response: LLMResponse = await self.inner.complete(request, **kwargs)
        finally:
            if canon(request.to_json()) != before:
                raise AssertionError(
                    f"provider {self.name!r} mutated the request it was served "
                    f"(before: {snapshot!r})"
                )
        return response


class ProviderContract:
    """Behaviour every provider must show (see the module docstring)."""

    #: the provider streams (``streams = True``): token events assemble into the reply
    streams: bool = False
    #: the provider reports cache token figures when the vendor does
    reports_cache: bool = False

    def scripted(self, replies: list[LLMResponse | ProviderError]) -> Any:
        """A provider answering its calls with ``replies``, in order (no retries: a
        :class:`ProviderError` fails its call at once)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what :meth:`scripted` started (a server); called after each case."""

    @pytest.fixture(autouse=True)
    def _closing(self) -> Iterator[None]:
        yield
        self.close()

    def agent(self, replies: list[LLMResponse | ProviderError], **options: Any) -> Agent:
        add = define_tool(
            name="add",
            description="Add two numbers.",
            input_schema=_SCHEMA,
            execute=lambda args: args["a"] + args["b"],
        )
        return Agent(
            provider=Unmutating(self.scripted(replies)),
            model="contract-model",
            system=["You add numbers.", "Be brief."],
            tools=[add],
            **options,
        )

    def test_a_text_reply_is_the_answer(self) -> None:
        agent = self.agent([LLMResponse(content="Hello.", usage=Usage(input=5, output=2))])
        result = agent.run_sync("hi")
        assert (result.answer, result.outcome, result.calls) == ("Hello.", "answered", 1)
        assert result.usage["input"] == 5 and result.usage["output"] == 2

    def test_a_tool_call_round_trip(self) -> None:
        call = ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})
        agent = self.agent(
            [
                LLMResponse(tool_calls=(call,), stop_reason="tool_calls"),
                LLMResponse(content="It is 5."),
            ]
        )
        result = agent.run_sync("2+3?")
        assert (result.answer, result.calls, result.iterations) == ("It is 5.", 2, 2)
        assistant, tool = result.state["history"][1:3]
        assert [(c["id"], c["name"]) for c in assistant["tool_calls"]] == [("call_1", "add")]
        assert assistant["tool_calls"][0]["arguments"] == {"a": 2, "b": 3}
        assert (tool["role"], tool["tool_call_id"], tool["content"]) == ("tool", "call_1", "5")

    def test_usage_is_summed_per_run(self) -> None:
        call = ToolCall(id="c", name="add", arguments={"a": 1, "b": 1})
        cache = {"cache_read": 3, "cache_write": 1} if self.reports_cache else {}
        agent = self.agent(
            [
                LLMResponse(tool_calls=(call,), usage=Usage(input=10, output=4, **cache)),
                LLMResponse(content="2", usage=Usage(input=20, output=1, **cache)),
            ]
        )
        usage = agent.run_sync("1+1?").usage
        assert (usage["input"], usage["output"], usage["calls"]) == (30, 5, 2)
        if self.reports_cache:
            assert (usage["cache_read"], usage["cache_write"]) == (6, 2)

    def test_a_failed_call_is_a_provider_error_and_the_run_closes_failed(self) -> None:
        from agentfootprint.verify.verifier import Verifier

        agent = self.agent(
            [ProviderError("the service is down: try again later", status=503, retryable=True)]
        )
        with pytest.raises(ProviderCallError) as caught:
            agent.run_sync("hi")
        error = caught.value
        assert (error.status, error.retryable) == (503, True)
        assert isinstance(error.__cause__, ProviderError)
        verified = Verifier(agent.store).verify(str(error.run_id))
        assert verified.close is not None and verified.close["outcome"] == "failed"

    def test_a_refused_call_is_not_retryable(self) -> None:
        agent = self.agent([ProviderError("bad key: set the API key", status=401)])
        with pytest.raises(ProviderCallError) as caught:
            agent.run_sync("hi")
        assert (caught.value.status, caught.value.retryable) == (401, False)

    def test_streamed_tokens_assemble_into_the_recorded_reply(self) -> None:
        if not self.streams:
            pytest.skip("this provider does not stream")
        tokens: list[AgentEvent] = []
        agent = self.agent([LLMResponse(content="One two three.")])
        agent.on(LLMToken.kind, tokens.append)
        result = agent.run_sync("count")
        assert result.answer == "One two three."
        assert "".join(getattr(t, "text", "") for t in tokens) == "One two three."
        assert len(tokens) >= 2


class ServedProviderContract(ProviderContract):
    """The contract for a provider that speaks HTTP, run against a fake vendor server on
    127.0.0.1 (``agentfootprint.testing.fake_openai`` / ``fake_anthropic``): implement
    :meth:`fake` (the server, not started, answering with the contract's replies in its wire
    format) and :meth:`provider_for` (the provider pointed at it, with no retries)."""

    def fake(self, replies: list[LLMResponse | ProviderError]) -> Any:
        raise NotImplementedError

    def provider_for(self, server: Any) -> Any:
        raise NotImplementedError

    def scripted(self, replies: list[LLMResponse | ProviderError]) -> Any:
        self.server = self.fake(replies).start()
        return self.provider_for(self.server)

    def close(self) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.close()
            self.server = None
