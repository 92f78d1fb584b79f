"""The scripted model's usage estimate (ceil(characters / 4)) is counted incrementally over a
conversation's growing history and is exactly the full count every call, whatever the
requests: grown, windowed, rebuilt, or made of other message objects."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentfootprint as af


def full_estimate(request: dict[str, Any]) -> int:
    chars = sum(len(p.get("text", "")) for p in request.get("system", []))
    chars += sum(len(m.get("content") or "") for m in request.get("messages", []))
    return math.ceil(chars / 4)


def test_a_long_conversation_gets_the_full_count_every_call() -> None:
    lookup = af.define_tool(name="lookup", description="Look up.", execute=lambda a: "x" * 37)
    script: list[Any] = []
    for turn in range(6):
        script += [af.reply(tool_calls=[af.tool_call("lookup", {"q": turn})]), f"done {turn}"]
    provider = af.MockProvider(script)
    agent = af.Agent(
        provider=provider,
        model="m",
        tools=[lookup],
        system="Be brief.",
        window={"keep_last_turns": 2},  # served lists that are not a prefix of the last one
    )
    with agent:
        previous = None
        counted, expected = [], []
        for turn in range(6):
            previous = agent.run_sync(f"question {turn} " * turn, continue_from=previous)
            requests = provider.requests[-previous.calls :]
            counted.append(previous.usage["input"])
            expected.append(sum(full_estimate(request) for request in requests))
    assert counted == expected
    assert len(set(counted)) == 6  # the history grew and the window moved


MESSAGES = [{"role": "user", "content": "a" * n} for n in range(12)]


@given(
    st.lists(
        st.lists(st.integers(0, len(MESSAGES) - 1), max_size=10).map(
            lambda picks: [MESSAGES[i] for i in picks]
        ),
        min_size=1,
        max_size=8,
    ),
    st.data(),
)
def test_any_sequence_of_requests_is_counted_exactly(
    requests: list[list[dict[str, Any]]], data: st.DataObject
) -> None:
    provider = af.MockProvider(respond=lambda request: "ok", record=False)

    async def calls() -> list[int]:
        out = []
        for messages in requests:
            if data.draw(st.booleans()):  # the same objects in another list, or copies
                messages = [dict(m) for m in messages]
            response = await provider.complete({"system": [], "messages": messages})
            out.append(response.usage.input)
        return out

    counted = asyncio.run(calls())
    assert counted == [math.ceil(sum(len(m["content"]) for m in r) / 4) for r in requests]


def test_a_list_changed_in_place_is_counted_again() -> None:
    provider = af.MockProvider(respond=lambda request: "ok", record=False)
    messages = [{"role": "user", "content": "a" * 40}]

    async def call() -> int:
        response = await provider.complete({"messages": messages})
        return response.usage.input

    assert asyncio.run(call()) == 10
    messages[0] = {"role": "user", "content": "b" * 80}  # same list, another first message
    assert asyncio.run(call()) == 20
    messages.append({"role": "assistant", "content": "c" * 4})
    assert asyncio.run(call()) == 21
