"""Sampling settings (``top_p``, ``stop``, ``seed``, ``presence_penalty``,
``frequency_penalty``, ``model_settings``): served in ``params``, hashed into every receipt,
sent under each vendor's names, and refused at construction where the provider would not
send them. Real HTTP to the fake vendor servers on 127.0.0.1; every run closed here is
verified by the pytest plugin."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint import cli
from agentfootprint.features import sampling
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.providers import anthropic as make_anthropic
from agentfootprint.providers import openai as make_openai
from agentfootprint.providers.anthropic import translate
from agentfootprint.providers.openai import chat_body
from agentfootprint.runtime.provider import SAMPLING_SETTINGS, Request
from agentfootprint.testing.fake_anthropic import FakeAnthropic, message
from agentfootprint.testing.fake_openai import FakeOpenAI, reply
from agentfootprint.testing.records import recorded_events

pytestmark = pytest.mark.allow_model_requests

#: every setting, as a user passes it
SETTINGS: dict[str, Any] = {
    "top_p": 0.9,
    "stop": ["END", "STOP"],
    "seed": 42,
    "presence_penalty": 0.5,
    "frequency_penalty": -0.25,
    "model_settings": {"logprobs": True, "top_logprobs": 2, "user": "u-1"},
}
ANTHROPIC_SETTINGS: dict[str, Any] = {
    "top_p": 0.9,
    "stop": "END",
    "model_settings": {"top_k": 5, "metadata": {"user_id": "u-1"}},
}


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


def served(**params: Any) -> Request:
    return Request.from_served(
        {
            "model": "m",
            "params": params,
            "system": [],
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [],
        }
    )


# -- served, hashed, sent ---------------------------------------------------------------------


def test_every_setting_is_served_hashed_and_sent_to_openai_under_its_name(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.add(reply("Hi."))
    model = make_openai(api_key="k", base_url=openai_server.url)
    agent = af.Agent(
        provider=model, model="gpt-4o-mini", temperature=0.5, store=tmp_path / "r.db", **SETTINGS
    )
    result = agent.run_sync("hello")
    params = af.served_at(agent.store, result.run_id, 0)["params"]
    assert params == {"temperature": 0.5, **SETTINGS}  # one stop list or more: always a list
    receipt = af.receipt_at(agent.store, result.run_id, 0)
    assert receipt is not None and receipt.params == params  # the receipt binds them
    body = openai_server.requests[0].body
    sent = json.loads(body)
    assert {k: sent[k] for k in ("temperature", "top_p", "stop", "seed")} == {
        "temperature": 0.5,
        "top_p": 0.9,
        "stop": ["END", "STOP"],
        "seed": 42,
    }
    assert (sent["presence_penalty"], sent["frequency_penalty"]) == (0.5, -0.25)
    # model_settings: merged last, as given, and nothing else is added
    assert (sent["logprobs"], sent["top_logprobs"], sent["user"]) == (True, 2, "u-1")
    assert "model_settings" not in sent
    assert list(sent)[-3:] == ["logprobs", "top_logprobs", "user"]
    # the recorded wire digest is of those bytes, and the log rebuilds them
    (exchange,) = recorded_events(agent.store, result.run_id, "agentfootprint.wire.exchange")
    assert exchange["attempts"][0]["request"] == hexdigest("wire/request", body)
    assert model.wire_request(af.served_at(agent.store, result.run_id, 0)) == body
    agent.close()
    shown = CliRunner().invoke(
        cli.main, ["served", str(tmp_path / "r.db"), result.run_id, "0", "--wire"]
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["matches"] is True


def test_anthropic_sends_top_p_stop_sequences_and_the_model_settings(
    anthropic_server: FakeAnthropic,
) -> None:
    anthropic_server.script(message("Hi."))
    model = make_anthropic(api_key="k", base_url=anthropic_server.url)
    agent = af.Agent(
        provider=model, model="claude-sonnet-4-5", temperature=0.2, **ANTHROPIC_SETTINGS
    )
    result = agent.run_sync("hello")
    assert af.served_at(agent.store, result.run_id, 0)["params"] == {
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["END"],
        "model_settings": {"metadata": {"user_id": "u-1"}, "top_k": 5},
    }
    body = anthropic_server.received[0].body
    sent = json.loads(body)
    assert sent["stop_sequences"] == ["END"] and "stop" not in sent
    assert (sent["top_p"], sent["temperature"], sent["top_k"]) == (0.9, 0.2, 5)
    assert sent["metadata"] == {"user_id": "u-1"} and "model_settings" not in sent
    assert model.wire_request(af.served_at(agent.store, result.run_id, 0)) == body


def test_without_them_the_bodies_are_the_bodies_of_before() -> None:
    """A request without the settings translates as it did before they existed: the
    temperature where it always went, nothing added."""
    plain = served(temperature=1, max_tokens=9)
    assert chat_body(plain, stream=False, max_tokens_field="max_tokens") == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 1,
        "max_tokens": 9,
    }
    assert translate(plain) == {
        "model": "m",
        "max_tokens": 9,
        "messages": [{"role": "user", "content": "hi"}],
        "extra_body": {"temperature": 1},
    }


def test_settings_change_the_receipt_so_a_replay_without_them_diverges() -> None:
    def run(**options: Any) -> tuple[af.Agent, af.RunResult]:
        agent = af.Agent(provider=af.MockProvider(["ok"]), model="m", **options)
        return agent, agent.run_sync("hi")

    agent, result = run(top_p=0.5, seed=7)
    requests = set()
    for options in ({}, {"top_p": 0.5}, {"top_p": 0.5, "seed": 7}, {"top_p": 0.5, "seed": 8}):
        other, done = run(**options)
        receipt = af.receipt_at(other.store, done.run_id, 0)
        assert receipt is not None
        requests.add(receipt.request)
    assert len(requests) == 4  # the request digest differs with each setting
    same = af.Agent(provider=af.MockProvider([]), model="m", top_p=0.5, seed=7)
    assert af.replay_sync(same, agent.store, result.run_id).calls_checked == 1
    for options in ({}, {"top_p": 0.5}, {"top_p": 0.5, "seed": 8}):
        other = af.Agent(provider=af.MockProvider([]), model="m", **options)
        with pytest.raises(af.ReplayDivergence) as caught:
            af.replay_sync(other, agent.store, result.run_id)
        assert caught.value.kind == "params", caught.value


def fixed_rows(**options: Any) -> list[tuple[str, int, bytes]]:
    """The rows of one run with a clock, run ids and salts that repeat."""
    ticks = itertools.count(1_700_000_000_000)
    ports = af.Ports(clock=lambda: next(ticks), run_ids=lambda: "run0", salts=lambda: bytes(16))
    agent = af.Agent(
        provider=af.MockProvider(["ok"]), model="m", temperature=1, ports=ports, **options
    )
    result = agent.run_sync("hi")
    return [(e.type, e.ts, bytes(e.body)) for e in agent.store.read(result.run_id)]


def test_absent_none_or_empty_records_the_rows_of_before() -> None:
    """Left out, None or an empty model_settings: nothing is served, the rows are those of
    a run before the settings existed (the projection is unchanged, no key is added)."""
    before = fixed_rows()
    nothing = {name: None for name in SAMPLING_SETTINGS}
    assert fixed_rows(**nothing) == before
    assert fixed_rows(model_settings={}) == before
    assert fixed_rows(top_p=0.5) != before


# -- refused at construction -------------------------------------------------------------------


@pytest.mark.parametrize("option", ["seed", "presence_penalty", "frequency_penalty"])
def test_anthropic_refuses_what_the_messages_api_has_not_naming_option_and_provider(
    option: str,
) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=make_anthropic(api_key="k"), model="c", **{option: SETTINGS[option]})
    assert caught.value.option == option
    assert "provider 'anthropic' does not send" in str(caught.value)
    assert "it sends: model_settings, stop, top_p" in str(caught.value)


class Undeclared:
    """A provider of one's own that says nothing about sampling settings."""

    name = "mine"

    async def complete(self, request: af.Request) -> af.LLMResponse:
        return af.LLMResponse(content="ok")


class TopPOnly(Undeclared):
    sampling_settings = frozenset({"top_p"})


@pytest.mark.parametrize("option", sorted(SETTINGS))
def test_a_provider_that_declares_nothing_is_refused_every_setting(option: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=Undeclared(), model="m", **{option: SETTINGS[option]})
    assert caught.value.option == option
    assert "provider 'mine' declares no sampling_settings" in str(caught.value)
    assert "sampling_settings = frozenset(" in str(caught.value)


def test_a_provider_declaring_some_gets_those_and_is_refused_the_others() -> None:
    provider = TopPOnly()
    agent = af.Agent(provider=provider, model="m", top_p=0.3, temperature=1)
    assert agent.run_sync("hi").answer == "ok"
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=provider, model="m", top_p=0.3, seed=1)
    assert caught.value.option == "seed" and "(it sends: top_p)" in str(caught.value)
    # temperature and max_tokens stay what they were: served to every provider
    af.Agent(provider=Undeclared(), model="m", temperature=1, max_tokens=5).close()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("top_p", 1.01),
        ("top_p", -0.1),
        ("top_p", True),
        ("top_p", "0.5"),
        ("top_p", float("nan")),
        ("presence_penalty", 2.5),
        ("frequency_penalty", -2.01),
        ("frequency_penalty", "1"),
        ("seed", 1.5),
        ("seed", True),
        ("seed", "7"),
        ("stop", ""),
        ("stop", []),
        ("stop", ["ok", ""]),
        ("stop", [1]),
        ("stop", b"END"),
        ("stop", ["s"] * (sampling.MAX_STOP + 1)),
        ("model_settings", ["logprobs"]),
        ("model_settings", {"when": object()}),
        ("model_settings", {"x": {"$commit": "a" * 64}}),
        ("model_settings", {1: True}),
        ("model_settings", {"": 1}),
        ("model_settings", {"top_p": 0.5}),
        ("model_settings", {"stop_sequences": ["x"]}),
        ("model_settings", {"temperature": 1}),
    ],
)
def test_a_bad_value_is_refused_naming_the_option(option: str, value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", **{option: value})
    assert caught.value.option == option and f"option {option!r}" in str(caught.value)


def test_a_setting_given_in_model_settings_names_its_option() -> None:
    with pytest.raises(af.UsageError, match=r"served by the option top_p=") as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", model_settings={"top_p": 1})
    assert caught.value.option == "model_settings"


@pytest.mark.parametrize(
    ("factory", "field"),
    [
        (lambda: make_openai(api_key="k"), "messages"),
        (lambda: make_openai(api_key="k"), "max_completion_tokens"),
        (lambda: make_openai(api_key="k"), "stream_options"),
        (lambda: make_anthropic(api_key="k"), "system"),
        (lambda: make_anthropic(api_key="k"), "stream"),
    ],
)
def test_model_settings_may_only_add_fields(factory: Any, field: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=factory(), model="m", model_settings={field: 1})
    assert caught.value.option == "model_settings"
    assert f"{field!r}: the provider" in str(caught.value) and "sets this field" in str(
        caught.value
    )


def test_a_request_whose_model_settings_collide_is_not_sent() -> None:
    """Built elsewhere than by an agent (which refuses it first), it fails unsent."""
    with pytest.raises(af.ProviderError, match="which the adapter sets itself"):
        chat_body(
            served(model_settings={"messages": []}), stream=False, max_tokens_field="max_tokens"
        )
    with pytest.raises(af.ProviderError, match="which the adapter sets itself"):
        translate(served(model_settings={"system": "x"}))


def test_the_adapters_declare_settings_the_agent_knows() -> None:
    for provider in (make_openai(api_key="k"), make_anthropic(api_key="k")):
        assert provider.sampling_settings <= set(SAMPLING_SETTINGS)
        assert not provider.body_fields & {"model_settings"}
    assert af.MockProvider(["x"]).sampling_settings == set(SAMPLING_SETTINGS)
