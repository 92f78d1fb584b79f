"""The demo agent: a scripted, two-tool, two-turn conversation recorded for real.

It uses the scripted provider, so it runs anywhere with no model and no network,
but everything else is the production path: the SQLite store, the stages,
receipts, the continued second turn and the verifier.
"""

from __future__ import annotations

from typing import Any

from agentfootprint.agent.agent import Agent
from agentfootprint.runtime.mock_provider import MockProvider, reply, tool_call
from agentfootprint.runtime.tools import Tool, define_tool

__all__ = ["DEMO_QUESTIONS", "build_demo_agent", "demo_tools", "replay_agent"]

DEMO_QUESTIONS = (
    "I'm flying to Lisbon on Friday with 400 USD. What's the weather, and how many euros is that?",
    "And if I bring 250 GBP instead?",
)

_WEATHER = {
    "lisbon": {"city": "Lisbon", "forecast": "sunny", "high_c": 24, "low_c": 16},
    "oslo": {"city": "Oslo", "forecast": "rain", "high_c": 9, "low_c": 3},
}
_RATES_TO_EUR = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17}


def _weather(args: dict[str, Any]) -> dict[str, Any]:
    found = _WEATHER.get(args["city"].strip().lower())
    if found is None:
        raise LookupError(f"no forecast for {args['city']!r}")
    return found


def _convert(args: dict[str, Any]) -> dict[str, Any]:
    source, target = args["from"].upper(), args["to"].upper()
    if source not in _RATES_TO_EUR or target not in _RATES_TO_EUR:
        raise ValueError(f"unknown currency pair {source}->{target}")
    value = args["amount"] * _RATES_TO_EUR[source] / _RATES_TO_EUR[target]
    return {"amount": args["amount"], "from": source, "to": target, "result": round(value, 2)}


def demo_tools() -> list[Tool]:
    """The demo's two tools: a weather lookup and a currency converter."""
    return [
        define_tool(
            name="get_weather",
            description="Forecast for a city: conditions and temperatures in Celsius.",
            input_schema={
                "type": "object",
                "properties": {"city": {"type": "string", "minLength": 1}},
                "required": ["city"],
                "additionalProperties": False,
            },
            execute=_weather,
        ),
        define_tool(
            name="convert_currency",
            description="Convert an amount between EUR, USD and GBP at today's fixed rates.",
            input_schema={
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "minimum": 0},
                    "from": {"type": "string", "enum": list(_RATES_TO_EUR)},
                    "to": {"type": "string", "enum": list(_RATES_TO_EUR)},
                },
                "required": ["amount", "from", "to"],
                "additionalProperties": False,
            },
            execute=_convert,
        ),
    ]


def demo_script() -> list[Any]:
    """What the scripted model says: tool calls, one malformed call it corrects, answers."""
    return [
        # turn 1
        reply(
            "Let me check the forecast.", tool_calls=[tool_call("get_weather", {"city": "Lisbon"})]
        ),
        reply(
            tool_calls=[
                tool_call("convert_currency", {"amount": "400", "from": "USD", "to": "EUR"})
            ]
        ),
        reply(
            tool_calls=[tool_call("convert_currency", {"amount": 400, "from": "USD", "to": "EUR"})]
        ),
        "Lisbon on Friday: sunny, 16-24 °C. 400 USD is about 368.00 EUR.",
        # turn 2 (continues turn 1)
        reply(
            tool_calls=[
                tool_call("convert_currency", '{"amount": 250, "from": "GBP", "to": "EUR"}')
            ]
        ),
        "250 GBP is about 292.50 EUR, so you would have more to spend than with 400 USD.",
    ]


def build_demo_agent(
    store: Any, *, provider: Any = None, model: str = "scripted-travel-model", **options: Any
) -> Agent:
    """The demo agent recording into ``store`` (a path or a store object); ``provider`` and
    ``model`` default to the scripted ones; ``options`` (``redact``, ``disclosures``...) are
    added to its own."""
    return Agent(
        provider=provider or MockProvider(demo_script()),
        model=model,
        name="Travel helper",
        id="travel-helper",
        system=[
            "You are a concise travel helper.",
            "Use the tools for facts; never guess a forecast or a rate.",
        ],
        tools=demo_tools(),
        store=store,
        temperature=0.2,
        max_tokens=512,
        max_iterations=6,
        **options,
    )


def replay_agent() -> Agent:
    """The demo agent as ``agentfootprint replay --agent agentfootprint.agent.demo:replay_agent``
    builds it: today's code, recording its replays in memory."""
    return build_demo_agent(None)
