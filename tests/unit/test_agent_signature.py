"""``Agent(...)`` is typed from the features' declarations, and the types agree with the checks.

``AgentOptions`` (agent/option_types.py) types every option; these tests hold it to the
declarations both ways (every declared option typed, nothing typed that no feature declares),
hold its types to the run-time checks (a missing option refused iff required, None refused iff
the type leaves it out, a string refused wherever the type takes none, each Literal member
accepted), and run mypy on a snippet to show a misspelt option is a type error.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Required, Union, get_args, get_origin, get_type_hints

import pytest

import agentfootprint as af
from agentfootprint.agent.agent import Agent, RunResult
from agentfootprint.agent.option_types import AgentOptions, ContextBudget, ModelPrices, ToolChoice
from agentfootprint.errors import UsageError
from agentfootprint.features import context_budget, pricing_table, registry, tool_choice
from agentfootprint.features.base import MISSING
from mypy_snippets import mypy_errors

HINTS = get_type_hints(AgentOptions, include_extras=True)
DECLARED = registry.option_specs()
#: keyword parameters of Agent() that are the agent's own, not a feature's option
AGENT_OWN = {"durability", "signer"}


def members(hint: Any) -> Iterator[Any]:
    """The alternatives of ``hint`` (a union flattened, Required stripped)."""
    if get_origin(hint) is Required:
        (hint,) = get_args(hint)
    if get_origin(hint) in (Union, types.UnionType):
        for arg in get_args(hint):
            yield from members(arg)
    else:
        yield hint


def literals(hint: Any) -> list[Any]:
    return [v for m in members(hint) if get_origin(m) is Literal for v in get_args(m)]


def takes_any_string(hint: Any) -> bool:
    """Whether the type admits an arbitrary str (``str`` itself, or ``Sequence[str]``)."""
    return any(
        m is str or (get_origin(m) is Sequence and get_args(m) == (str,)) for m in members(hint)
    )


#: options that apply only beside another (refused alone): what each is given with
COMPANIONS: dict[str, dict[str, Any]] = {
    "on_authorization_required": {"credentials": af.static_tokens({})},
    "check_column_types": {
        "tools": [
            af.define_tool(
                name="rows",
                description="Rows.",
                execute=lambda args: "[]",
                result_columns={"n": "number"},
            )
        ]
    },
    "ontology_ask": {
        "ontology": af.define_ontology(
            {"name": "n", "version": "1", "nodes": {"t": {"meaning": "a term"}}}
        )
    },
}


def build(name: str, value: Any) -> None:
    """An agent with ``name=value`` (and a provider and model of its own otherwise, and the
    option it applies beside, if any)."""
    options: dict[str, Any] = {"provider": af.MockProvider(["x"]), "model": "m", name: value}
    if value is not None:
        options.update(COMPANIONS.get(name, {}))
    af.Agent(**options).close()


def test_every_declared_option_is_typed_and_nothing_else() -> None:
    assert sorted(set(DECLARED) - set(HINTS)) == [], "declared but not typed in AgentOptions"
    assert sorted(set(HINTS) - set(DECLARED)) == [], "typed but no feature declares it"


def test_the_agent_takes_the_options_unpacked_besides_its_own_keywords() -> None:
    parameters = inspect.signature(Agent).parameters
    keywords = {n for n, p in parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert keywords == AGENT_OWN
    assert not keywords & set(DECLARED)
    (var_keyword,) = [n for n, p in parameters.items() if p.kind is p.VAR_KEYWORD]
    hint = get_type_hints(Agent.__init__)[var_keyword]
    assert get_origin(hint) is typing.Unpack and get_args(hint) == (AgentOptions,)


@pytest.mark.parametrize("method", [Agent.__init__, Agent.run, Agent.run_sync, Agent.on])
def test_no_public_parameter_of_the_agent_is_any(method: Callable[..., Any]) -> None:
    hints = get_type_hints(method)
    assert all(hint is not Any for hint in hints.values()), hints
    assert inspect.signature(method).parameters.keys() - {"self"} <= hints.keys()


def test_run_and_run_sync_take_a_str_and_a_typed_continue_from() -> None:
    for method in (Agent.run, Agent.run_sync):
        hints = get_type_hints(method)
        assert hints["message"] is str
        assert set(get_args(hints["continue_from"])) == {str, RunResult, type(None)}
        assert inspect.signature(method).parameters["continue_from"].kind.name == "KEYWORD_ONLY"


def test_required_exactly_where_the_check_refuses_a_missing_option() -> None:
    given = {"provider": af.MockProvider(["x"]), "model": "m"}
    refused_missing = set()
    for name, (_, spec) in DECLARED.items():
        try:
            spec.check(MISSING, given)
        except UsageError:
            refused_missing.add(name)
    assert AgentOptions.__required_keys__ == refused_missing == {"provider", "model"}


@pytest.mark.parametrize("name", sorted(HINTS))
def test_none_is_refused_exactly_where_the_type_leaves_it_out(name: str) -> None:
    if type(None) in set(members(HINTS[name])):
        build(name, None)
    else:
        with pytest.raises(UsageError) as caught:
            build(name, None)
        assert caught.value.option == name


@pytest.mark.parametrize("name", sorted(n for n in HINTS if not takes_any_string(HINTS[n])))
def test_a_string_the_type_refuses_is_refused_and_each_literal_accepted(name: str) -> None:
    for value in literals(HINTS[name]):
        build(name, value)
    with pytest.raises(UsageError) as caught:
        build(name, "no-such-value")
    assert caught.value.option == name


def test_the_nested_shapes_have_the_features_keys() -> None:
    assert set(get_type_hints(ContextBudget)) == set(context_budget.DEFAULTS)
    assert set(get_type_hints(ModelPrices)) == set(pricing_table.KINDS)
    assert ModelPrices.__required_keys__ == set(pricing_table.REQUIRED)
    assert set(get_type_hints(ToolChoice)) == set(tool_choice.KEYS)


_SNIPPET = """\
from agentfootprint.agent.agent import Agent
from agentfootprint.runtime.provider import Provider


def build(provider: Provider) -> None:
    Agent(provider=provider, model="m", max_iteration=3)
    Agent(provider=provider, model="m", react_mode="clasic")
    Agent(provider=provider, model="m", max_iterations="3")
    Agent(model="m")
    Agent(provider=provider, model="m", max_iterations=3, react_mode="classic").close()
"""


@pytest.mark.slow
def test_mypy_refuses_a_misspelt_option_a_wrong_type_and_a_missing_provider(
    tmp_path: Path,
) -> None:
    status, by_line, out = mypy_errors(tmp_path / "agent_options_snippet.py", _SNIPPET)
    assert status == 1, out
    assert sorted(by_line) == [6, 7, 8, 9], out
    assert 'Unexpected keyword argument "max_iteration"' in by_line[6]
    assert 'did you mean "max_iterations"' in by_line[6]
    assert (
        '"react_mode"' in by_line[7]
        and "Literal['dynamic', 'dynamic-grouped', 'classic']" in by_line[7]
    )
    assert '"max_iterations"' in by_line[8] and 'expected "int"' in by_line[8]
    assert 'Missing named argument "provider"' in by_line[9]


def test_an_options_mapping_can_be_built_and_passed() -> None:
    options: AgentOptions = {"provider": af.MockProvider(["x"]), "model": "m", "max_iterations": 2}
    checked: Mapping[str, Any] = options
    with af.Agent(**options) as agent:
        assert agent.config.max_iterations == checked["max_iterations"] == 2
