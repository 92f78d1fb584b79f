"""``agent.run_stream(message)``: a run's events to iterate, then its result (issue 30, item 5).

The events iterated are the events ``agent.on("*")`` receives, in order, whichever the
delivery tier; the first token arrives while the vendor's server is still streaming; a
failure surfaces after its events; leaving early cancels the run (closed ``failed``). Every
run is verified by the plugin.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
import pytest

import agentfootprint as af
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.testing.fake_openai import Completion, FakeOpenAI

WALL_CLOCK = frozenset({"duration_ms"})
NUMBERS = {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}


def seen_form(event: AgentEvent) -> tuple[str, bytes]:
    fields = {k: v for k, v in vars(event).items() if k not in WALL_CLOCK}
    return event.kind, orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)


def double() -> af.Tool:
    return af.define_tool(
        name="double", description="Twice a.", input_schema=NUMBERS, execute=lambda a: a["a"] * 2
    )


def agent_of(provider: Any, **options: Any) -> af.Agent:
    return af.Agent(provider=provider, model="m", tools=[double()], **options)


def script() -> list[Any]:
    return [af.reply("let me see", tool_calls=[af.tool_call("double", {"a": 21})]), "42"]


@pytest.mark.parametrize("delivery", ["inline", "deferred"])
def test_the_stream_yields_what_a_star_listener_gets_in_order_then_the_result(
    delivery: str,
) -> None:
    agent = agent_of(af.MockProvider(script()), observer_delivery=delivery)
    heard: list[tuple[str, bytes]] = []
    agent.on("*", lambda event: heard.append(seen_form(event)))

    async def main() -> tuple[list[Any], af.RunResult]:
        items: list[Any] = []
        async with agent.run_stream("twice 21?") as run:
            async for item in run:
                items.append(item)
        return items, run.result

    items, result = asyncio.run(main())
    *events, last = items
    assert last is result and result.answer == "42"
    assert [seen_form(e) for e in events] == heard and len(heard) > 8
    kinds = {e.kind for e in events}
    assert {"agentfootprint.stream.tool_start", "agentfootprint.stream.tool_end"} <= kinds


def test_a_continued_run_streams_too_and_other_runs_of_the_agent_do_not_leak_in() -> None:
    agent = agent_of(af.MockProvider(["one", "two", "three"]))

    async def main() -> tuple[set[str], str, str, str | None]:
        first = await agent.run("first")
        async with agent.run_stream("second", continue_from=first) as run:
            other = asyncio.ensure_future(agent.run("meanwhile"))  # not this stream's run
            ids = {item.run_id async for item in run}
        return ids, run.result.run_id, (await other).run_id, run.result.parent_run_id

    ids, streamed, other, parent = asyncio.run(main())
    assert ids == {streamed} and other != streamed and parent is not None


@pytest.mark.allow_model_requests
def test_the_first_token_arrives_while_the_server_is_still_streaming() -> None:
    hold = threading.Event()
    answer = "The weather in Paris is sunny and twenty-two degrees."
    with FakeOpenAI([Completion(content=answer, hold=hold)]) as fake:
        provider = af.openai(base_url=fake.url, api_key="sk-test-stream", stream=True)
        agent = af.Agent(provider=provider, model="gpt-4o-mini")
        tokens: list[str] = []
        held: list[bool] = []

        async def main() -> af.RunResult:
            async with agent.run_stream("weather?") as run:
                async for item in run:
                    if isinstance(item, af.LLMToken):
                        held.append(not hold.is_set())  # the server still holds the rest
                        tokens.append(item.text)
                        hold.set()
            return run.result

        result = asyncio.run(main())
    assert held[0] is True and "".join(tokens) == answer == result.answer


def test_a_failed_run_raises_from_the_iteration_after_its_events() -> None:
    failing = af.MockProvider([af.reply(tool_calls=[af.tool_call("double", {"a": 1})])])
    agent = agent_of(failing)  # the script runs out at the second call

    async def main() -> list[Any]:
        items: list[Any] = []
        async with agent.run_stream("go") as run:
            with pytest.raises(af.RunError, match="script exhausted"):
                async for item in run:
                    items.append(item)
        return items

    items = asyncio.run(main())
    assert items and all(isinstance(i, AgentEvent) for i in items)
    assert items[-1].kind == "agentfootprint.stream.llm_start"  # the call that failed
    (run_id,) = agent.store.run_ids()
    close = [e.decoded() for e in agent.store.read(run_id) if e.type == "run.close"]
    assert close[0]["outcome"] == "failed"


def test_leaving_the_block_early_cancels_the_run() -> None:
    entered = asyncio.Event()

    class Waiting(af.MockProvider):
        async def complete(self, request: Any, **kwargs: Any) -> af.LLMResponse:
            if len(self.requests) == 1:
                entered.set()
                await asyncio.Event().wait()  # until cancelled
            return await super().complete(request)

    agent = agent_of(Waiting(script()))

    async def main() -> None:
        async with agent.run_stream("go") as run:
            async for item in run:
                if isinstance(item, AgentEvent) and item.kind.endswith("tool_end"):
                    await asyncio.wait_for(entered.wait(), timeout=60)  # a hang guard only
                    break

    asyncio.run(main())
    (run_id,) = agent.store.run_ids()
    close = [e.decoded() for e in agent.store.read(run_id) if e.type == "run.close"]
    assert close[0]["outcome"] == "failed" and close[0]["error"]["type"] == "CancelledError"


def test_misuse_is_refused() -> None:
    agent = agent_of(af.MockProvider(["hi"]))
    stream = agent.run_stream("go")
    with pytest.raises(af.UsageError, match="once the run ended"):
        _ = stream.result

    async def outside() -> None:
        async for _ in stream:
            pass

    with pytest.raises(af.UsageError, match="inside its 'async with'"):
        asyncio.run(outside())
