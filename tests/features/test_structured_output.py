"""``output_type``: the answer's schema served in params, the answer validated, taught, retried.

Every run these tests close is verified by the pytest plugin, which also compares what the
mock was served with ``served_at`` (the request rebuilt from the log).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypedDict

import pydantic
import pytest
from feature_support import events_of, fixed_ports, lookup, rows, without_open

import agentfootprint as af
from agentfootprint.features import registry, structured_output
from agentfootprint.runtime.output_schemas import OUTPUT_FRAME_PREFIX, strict_compatible
from agentfootprint.testing.records import outcome, run_open

KIND = "agentfootprint.validation.output_invalid"


@dataclasses.dataclass
class Forecast:
    """The weather in one city."""

    city: str
    celsius: int


class ForecastDict(TypedDict):
    city: str
    celsius: int


class ForecastModel(pydantic.BaseModel):
    city: str
    celsius: int


class ClosedModel(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    city: str
    celsius: int


FORECAST_SCHEMA = {
    "type": "object",
    "description": "The weather in one city.",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
    "additionalProperties": False,
    "required": ["city", "celsius"],
}
GOOD = '{"city": "Paris", "celsius": 21}'


def agent_of(script: list[Any], **options: Any) -> af.Agent:
    options.setdefault("output_type", Forecast)
    options.setdefault("ports", fixed_ports())
    return af.Agent(provider=af.MockProvider(script), model="m", **options)


def twin(agent: af.Agent, **options: Any) -> af.Agent:
    """An agent configured as ``agent`` (or as ``options`` say), to replay with."""
    given = {"output_type": Forecast, "tools": list(agent.config.tools), **options}
    return af.Agent(provider=af.MockProvider([]), model="m", **given)


def test_the_schema_is_served_in_params_and_the_answer_is_typed() -> None:
    agent = agent_of([GOOD])
    result = agent.run_sync("weather in Paris?")
    assert result.answer == GOOD and result.outcome == "answered"
    assert result.output == Forecast(city="Paris", celsius=21)
    served = af.served_at(agent.store, result.run_id, 0)
    assert served["params"] == {
        "output": {"name": "Forecast", "schema": FORECAST_SCHEMA, "strict": True}
    }
    assert served == agent.config.provider.requests[0]
    assert af.receipt_at(agent.store, result.run_id, 0).params == served["params"]
    assert run_open(agent.store, result.run_id)["options"]["output_retries"] == 2
    assert not events_of(agent.store, result.run_id, KIND)


@pytest.mark.parametrize(
    ("output_type", "value", "strict"),
    [
        (ForecastDict, {"city": "Paris", "celsius": 21}, True),
        (ForecastModel, ForecastModel(city="Paris", celsius=21), False),  # extra allowed
        (ClosedModel, ClosedModel(city="Paris", celsius=21), True),
        (FORECAST_SCHEMA, {"city": "Paris", "celsius": 21}, True),
        ({**FORECAST_SCHEMA, "required": ["city"]}, {"city": "Paris", "celsius": 21}, False),
    ],
)
def test_each_kind_of_type_gives_its_value_and_says_whether_it_is_strict(
    output_type: Any, value: Any, strict: bool
) -> None:
    agent = agent_of([GOOD], output_type=output_type)
    result = agent.run_sync("weather?")
    assert result.output == value and type(result.output) is type(value)
    output = af.served_at(agent.store, result.run_id, 0)["params"]["output"]
    assert output["strict"] is strict is strict_compatible(output["schema"])


def test_a_wrong_answer_is_taught_and_asked_again() -> None:
    secret = "hunter2-do-not-echo"
    agent = agent_of([f'{{"city": "{secret}", "celsius": "warm"}}', "sunny, I think", GOOD])
    result = agent.run_sync("weather?")
    assert result.output == Forecast(city="Paris", celsius=21)
    assert result.calls == 3 and result.iterations == 3
    failures = events_of(agent.store, result.run_id, KIND)
    assert failures == [
        {
            "iteration": 1,
            "call": 0,
            "issues": [
                {
                    "path": "$.celsius",
                    "keyword": "type",
                    "received": "string",
                    "expected": "integer",
                    "message": "expected type 'integer'",
                }
            ],
            "retry": True,
            "failures": 1,
        },
        {
            "iteration": 2,
            "call": 1,
            "issues": [
                {
                    "path": "$",
                    "keyword": "json",
                    "received": "text",
                    "message": "the answer is not JSON (Expecting value at line 1 column 1)",
                }
            ],
            "retry": True,
            "failures": 2,
        },
    ]
    second = agent.config.provider.requests[1]["messages"]
    assert second[-2]["role"] == "assistant" and secret in second[-2]["content"]
    teaching = second[-1]
    assert teaching["role"] == "user" and teaching["content"].startswith(OUTPUT_FRAME_PREFIX)
    assert "- $.celsius: expected type 'integer' (received string)" in teaching["content"]
    assert secret not in teaching["content"] and secret not in str(failures)
    assert af.served_at(agent.store, result.run_id, 1) == agent.config.provider.requests[1]


@pytest.mark.parametrize("retries", [0, 1])
def test_past_the_bound_the_run_fails_typed_and_closed_failed(retries: int) -> None:
    agent = agent_of(["no", "still no", GOOD], output_retries=retries)
    with pytest.raises(af.OutputValidationError) as caught:
        agent.run_sync("weather?")
    error = caught.value
    assert isinstance(error, af.RunError) and error.failures == retries + 1
    assert f"output_retries={retries}" in str(error) and error.issues[0]["keyword"] == "json"
    assert error.run_id is not None and outcome(agent.store, error.run_id) == "failed"
    failures = events_of(agent.store, error.run_id, KIND)
    assert [f["retry"] for f in failures] == [True] * retries + [False]
    assert len(agent.config.provider.requests) == retries + 1


def test_max_iterations_leaves_no_pass_to_ask_again() -> None:
    agent = agent_of(["no", GOOD], max_iterations=1)
    with pytest.raises(af.OutputValidationError, match="max_iterations=1") as caught:
        agent.run_sync("weather?")
    assert caught.value.failures == 1 and outcome(agent.store, caught.value.run_id) == "failed"
    (failure,) = events_of(agent.store, caught.value.run_id, KIND)
    assert failure["retry"] is False


def test_a_tool_calling_agent_answers_typed_and_a_window_keeps_the_question() -> None:
    script = [af.reply(tool_calls=[af.tool_call("lookup", {"q": "Paris"})]), "21C", GOOD]
    agent = agent_of(script, tools=[lookup("Paris: 21C")], window={"keep_last_turns": 1})
    result = agent.run_sync("weather in Paris?")
    assert result.output == Forecast(city="Paris", celsius=21) and result.calls == 3
    # the teaching message starts no window turn: the question is still served after it
    served = af.served_at(agent.store, result.run_id, 2)["messages"]
    assert served[0] == {"role": "user", "content": "weather in Paris?"}
    assert served[-1]["content"].startswith(OUTPUT_FRAME_PREFIX)


def test_a_replay_is_identical_and_a_changed_schema_diverges_at_call_0(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    agent = agent_of(["nope", GOOD], store=db)
    result = agent.run_sync("weather?")
    again = twin(agent)
    replayed = af.replay_sync(again, db, result.run_id)
    assert replayed.calls_checked == 2 and replayed.result.output == result.output
    assert af.same_recording(db, result.run_id, again.store, replayed.result.run_id)

    @dataclasses.dataclass
    class Other:
        city: str

    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin(agent, output_type=Other), db, result.run_id)
    assert caught.value.call == 0 and caught.value.kind == "params"
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin(agent, output_type=None), db, result.run_id)
    assert caught.value.call == 0 and caught.value.kind == "params"


def test_a_stopped_early_turn_is_not_checked() -> None:
    asking = af.reply("checking", tool_calls=[af.tool_call("lookup", {"q": "x"})])
    cut = agent_of([asking], tools=[lookup()], max_iterations=1, wrap_up_at_max_iterations=False)
    result = cut.run_sync("weather?")
    assert result.outcome == "stopped_early" and result.output is None
    assert not events_of(cut.store, result.run_id, KIND)
    wrapped = agent_of([asking, GOOD], tools=[lookup()], max_iterations=1)
    result = wrapped.run_sync("weather?")
    assert result.outcome == "stopped_early" and result.output == Forecast("Paris", 21)
    assert "output" in wrapped.config.provider.requests[1]["params"]  # the wrap-up call too


def test_the_retry_branch_loops_back_and_the_budget_counts_it() -> None:
    agent = agent_of([GOOD], max_iterations=4)
    by_name = {s["stage"]: s for s in agent.chart.describe()}
    assert by_name["route"]["branches"]["output-retry"] == "output-retry"
    assert by_name["output-retry"]["next"] == "system-prompt"
    plain = af.Agent(provider=af.MockProvider([GOOD]), model="m", max_iterations=4)
    assert agent.seam.stage_budget == plain.seam.stage_budget + 1  # one stage more


def test_absent_records_the_rows_of_a_seam_without_the_feature() -> None:
    script = [af.reply(tool_calls=[af.tool_call("lookup", {"q": "a"})]), "plain text answer"]
    options: dict[str, Any] = {"model": "m", "tools": [lookup()], "ports": fixed_ports()}
    agent = af.Agent(provider=af.MockProvider(list(script)), **options)
    assert agent.config.options["output_type"] is None
    assert agent.config.options["output_retries"] is None
    assert "output-retry" not in agent.chart.stages
    result = agent.run_sync("go")
    assert result.output is None and "output_retries" not in run_open(agent.store, "run0000")
    bare = af.Agent(provider=af.MockProvider(list(script)), **{**options, "ports": fixed_ports()})
    features = [f for f in registry.all_features() if f is not structured_output.FEATURE]
    bare.seam = registry.Seam.build(bare.config.options, features=features)
    bare.chart = bare.seam.chart
    again = bare.run_sync("go")
    assert rows(agent.store, result.run_id) == rows(bare.store, again.run_id)
    assert without_open(rows(agent.store, result.run_id))  # not vacuous


class Quiet:
    """A provider that says nothing of structured output."""

    name = "quiet"

    async def complete(self, request: af.Request) -> af.LLMResponse:
        return af.reply(GOOD)


@pytest.mark.parametrize(
    ("options", "option", "words"),
    [
        ({"output_type": "Forecast"}, "output_type", "takes a dataclass"),
        ({"output_type": list[str]}, "output_type", "takes a dataclass"),
        ({"output_type": Forecast("Paris", 21)}, "output_type", "got Forecast"),
        ({"output_type": {"type": "array"}}, "output_type", "type 'object' at the top"),
        (
            {"output_type": {"type": "object", "properties": {"a": {"type": 5}}}},
            "output_type",
            "not a valid JSON Schema",
        ),
        (
            {"output_type": {"type": "object", "properties": {"a": {"$ref": "https://x/s"}}}},
            "output_type",
            "points outside the schema",
        ),
        ({"output_type": {"type": "object", "enum": [float("nan")]}}, "output_type", "finite"),
        ({"output_type": Forecast, "provider": Quiet()}, "output_type", "structured_output"),
        (
            {
                "output_type": Forecast,
                "model_settings": {"response_format": {"type": "json_object"}},
            },
            "output_type",
            "response_format",
        ),
        ({"output_retries": 2}, "output_retries", "give output_type too"),
        ({"output_type": Forecast, "output_retries": 11}, "output_retries", "integer up to 10"),
        ({"output_type": Forecast, "output_retries": True}, "output_retries", "integer up to 10"),
    ],
)
def test_a_bad_value_is_refused_at_construction_naming_the_option(
    options: dict[str, Any], option: str, words: str
) -> None:
    given = {"provider": af.MockProvider([GOOD]), "model": "m", **options}
    with pytest.raises(af.UsageError) as caught:
        af.Agent(**given)
    assert caught.value.option == option and words in str(caught.value), str(caught.value)


def test_a_json_schema_answer_is_the_json_and_the_bounds_are_accepted() -> None:
    agent = agent_of([GOOD], output_type=FORECAST_SCHEMA, output_retries=10)
    assert agent.run_sync("weather?").output == {"city": "Paris", "celsius": 21}
    assert agent_of([GOOD], output_retries=0).run_sync("w").output == Forecast("Paris", 21)


@pytest.mark.parametrize("react_mode", ["classic", "dynamic-grouped"])
def test_the_retry_loops_back_in_every_react_mode(react_mode: str) -> None:
    script = [af.reply(tool_calls=[af.tool_call("lookup", {"q": "Paris"})]), "no", GOOD]
    agent = agent_of(script, tools=[lookup()], react_mode=react_mode, max_iterations=3)
    result = agent.run_sync("weather?")
    assert result.output == Forecast("Paris", 21) and result.calls == 3
    following = {s["stage"]: s.get("next") for s in agent.chart.describe()}
    assert following["output-retry"] == following["tool-calls"]
    assert len(events_of(agent.store, result.run_id, KIND)) == 1
    replayed = af.replay_sync(twin(agent, react_mode=react_mode), agent.store, result.run_id)
    assert replayed.calls_checked == 3


def test_a_resumed_run_answers_typed_and_only_under_the_schema_it_was_served() -> None:
    rules = {"days": {"ask": "How many days?", "choices": [1, 3]}}
    days = af.define_tool(
        name="forecast",
        description="The forecast.",
        input_schema={"type": "object", "properties": {"days": {"type": "integer"}}},
        execute=lambda args: "21C",
        ask_or_assume=rules,
    )
    store = af.MemoryStore()
    asking = af.reply(tool_calls=[af.tool_call("forecast", {})])
    agent = agent_of([asking, "no", GOOD], tools=[days], store=store)
    paused = agent.run_sync("weather?")
    assert paused.outcome == "paused" and paused.output is None
    resumed = agent.resume_sync(paused, {"f1": 3})
    assert resumed.output == Forecast("Paris", 21)
    assert len(events_of(store, resumed.run_id, KIND)) == 1  # taught and asked again there

    @dataclasses.dataclass
    class Other:
        city: str

    again = agent_of([asking, GOOD], tools=[days], store=store, ports=af.Ports())
    paused = again.run_sync("weather?")
    other = agent_of([GOOD], tools=[days], store=store, ports=af.Ports(), output_type=Other)
    with pytest.raises(af.RunError, match="another output schema"):
        other.resume_sync(paused, {"f1": 3})
