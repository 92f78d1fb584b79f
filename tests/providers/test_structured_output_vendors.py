"""``output_type`` through both vendors' fakes: the exact schema sent in each vendor's shape
(OpenAI's ``response_format`` json_schema with its strict flag, Anthropic's
``output_config.format``), a wrong answer taught and asked again, the bound honoured, and the
schema bound by every receipt (a replay with another schema diverges at call 0). Real HTTP
to the fake servers on 127.0.0.1; every run closed here is verified by the pytest plugin."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.providers import anthropic as make_anthropic
from agentfootprint.providers import openai as make_openai
from agentfootprint.runtime.output_schemas import OUTPUT_FRAME_PREFIX
from agentfootprint.testing.fake_anthropic import FakeAnthropic, message, tool_use
from agentfootprint.testing.fake_openai import FakeOpenAI, reply, tool_reply
from agentfootprint.testing.records import outcome, recorded_events

pytestmark = pytest.mark.allow_model_requests

INVALID = "agentfootprint.validation.output_invalid"
GOOD = '{"city": "Paris", "celsius": 21}'


@dataclasses.dataclass
class Forecast:
    """The weather in one city."""

    city: str
    celsius: int


SCHEMA = {
    "additionalProperties": False,
    "description": "The weather in one city.",
    "properties": {"celsius": {"type": "integer"}, "city": {"type": "string"}},
    "required": ["city", "celsius"],
    "type": "object",
}


def weather() -> af.Tool:
    @af.tool
    def get_weather(city: str) -> str:
        """The current weather in a city.

        Args:
            city: The city's name.
        """
        return f"{city}: 21C, sunny"

    return get_weather


def replay_diverges(store: Any, run_id: str, **options: Any) -> af.ReplayDivergence:
    """The replay of ``run_id`` by an agent configured as its own, but for ``options``."""
    twin = af.Agent(provider=af.MockProvider([]), tools=[weather()], **options)
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin, store, run_id)
    return caught.value


def test_openai_is_sent_the_strict_json_schema_and_a_wrong_answer_is_asked_again(
    tmp_path: Path,
) -> None:
    with FakeOpenAI(
        [tool_reply(("c1", "get_weather", {"city": "Paris"})), reply("It is 21C."), reply(GOOD)]
    ) as server:
        model = make_openai(api_key="k", base_url=server.url)
        agent = af.Agent(
            provider=model,
            model="gpt-4o-mini",
            tools=[weather()],
            output_type=Forecast,
            store=tmp_path / "log.db",
        )
        result = agent.run_sync("weather in Paris?")
        sent = [json.loads(r.body) for r in server.requests]
    assert result.output == Forecast(city="Paris", celsius=21) and result.calls == 3
    for body in sent:  # every call: the schema beside the agent's own tool
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "Forecast", "schema": SCHEMA, "strict": True},
        }
        assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]
        assert "output" not in body and "output" not in body.get("extra_body", {})
    assert sent[2]["messages"][-2] == {"role": "assistant", "content": "It is 21C."}
    assert sent[2]["messages"][-1]["content"].startswith(OUTPUT_FRAME_PREFIX)
    (failure,) = recorded_events(agent.store, result.run_id, INVALID)
    assert failure["call"] == 1 and failure["retry"] is True
    # the receipt binds the schema; the wire digest is of the bytes sent, which the log rebuilds
    served = af.served_at(agent.store, result.run_id, 0)
    receipt = af.receipt_at(agent.store, result.run_id, 0)
    assert receipt is not None and receipt.params == served["params"]
    assert served["params"]["output"]["schema"] == SCHEMA
    exchanges = recorded_events(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert exchanges[0]["attempts"][0]["request"] == hexdigest(
        "wire/request", server.requests[0].body
    )
    assert model.wire_request(served) == server.requests[0].body
    divergence = replay_diverges(
        agent.store, result.run_id, model="gpt-4o-mini", output_type={**SCHEMA, "title": "X"}
    )
    assert (divergence.call, divergence.kind) == (0, "params")
    agent.close()


def test_openai_is_told_a_schema_strict_mode_cannot_take_is_not_strict() -> None:
    loose = {"type": "object", "properties": {"city": {"type": "string"}}}
    with FakeOpenAI([reply('{"city": "Paris"}')]) as server:
        agent = af.Agent(
            provider=make_openai(api_key="k", base_url=server.url),
            model="gpt-4o-mini",
            output_type=loose,
        )
        assert agent.run_sync("where?").output == {"city": "Paris"}
        format_ = json.loads(server.requests[0].body)["response_format"]
    assert format_["json_schema"] == {"name": "output", "schema": loose, "strict": False}


def test_openai_past_the_bound_fails_closed_and_asks_no_more() -> None:
    with FakeOpenAI([reply("no"), reply("still no"), reply(GOOD)]) as server:
        agent = af.Agent(
            provider=make_openai(api_key="k", base_url=server.url),
            model="gpt-4o-mini",
            output_type=Forecast,
            output_retries=1,
        )
        with pytest.raises(af.OutputValidationError) as caught:
            agent.run_sync("weather?")
        assert len(server.requests) == 2 and len(server.script) == 1
    assert caught.value.failures == 2 and outcome(agent.store, caught.value.run_id) == "failed"


def test_anthropic_is_sent_output_config_and_a_wrong_answer_is_asked_again() -> None:
    with FakeAnthropic(
        [
            message(tool_uses=[tool_use("get_weather", {"city": "Paris"})]),
            message('{"city": "Paris"}'),
            message(GOOD),
        ]
    ) as server:
        model = make_anthropic(api_key="k", base_url=server.url)
        agent = af.Agent(
            provider=model, model="claude-sonnet-4-5", tools=[weather()], output_type=Forecast
        )
        result = agent.run_sync("weather in Paris?")
        sent = [json.loads(r.body) for r in server.received]
    assert result.output == Forecast(city="Paris", celsius=21) and result.calls == 3
    for body in sent:
        assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
        assert [t["name"] for t in body["tools"]] == ["get_weather"]
        assert "tool_choice" not in body and "output" not in body
    assert sent[2]["messages"][-2] == {"role": "assistant", "content": '{"city": "Paris"}'}
    teaching = sent[2]["messages"][-1]  # one text block: the cache breakpoint marks it
    (block,) = teaching["content"]
    assert teaching["role"] == "user" and block["text"].startswith(OUTPUT_FRAME_PREFIX)
    assert "missing required member(s): celsius" in block["text"]
    (failure,) = recorded_events(agent.store, result.run_id, INVALID)
    assert failure["issues"][0]["path"] == "$" and failure["call"] == 1
    served = af.served_at(agent.store, result.run_id, 0)
    assert model.wire_request(served) == server.received[0].body
    receipt = af.receipt_at(agent.store, result.run_id, 0)
    assert receipt is not None and receipt.params["output"]["schema"] == SCHEMA

    @dataclasses.dataclass
    class Other:
        city: str

    divergence = replay_diverges(
        agent.store, result.run_id, model="claude-sonnet-4-5", output_type=Other
    )
    assert (divergence.call, divergence.kind) == (0, "params")
    agent.close()


def test_anthropic_with_no_retry_left_fails_closed() -> None:
    with FakeAnthropic([message("sunny"), message(GOOD)]) as server:
        agent = af.Agent(
            provider=make_anthropic(api_key="k", base_url=server.url),
            model="claude-sonnet-4-5",
            output_type=Forecast,
            output_retries=0,
        )
        with pytest.raises(af.OutputValidationError, match="output_retries=0"):
            agent.run_sync("weather?")
        assert len(server.received) == 1 and server.remaining == 1


@pytest.mark.parametrize("field", ["response_format", "output_config"])
def test_a_request_whose_model_settings_set_the_schema_field_is_refused(field: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(
            provider=af.MockProvider([GOOD]),
            model="m",
            output_type=Forecast,
            model_settings={field: {"type": "json_object"}},
        )
    assert caught.value.option == "output_type" and field in str(caught.value)
