"""Options are checked at construction: each bad input is a UsageError naming the option."""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.core.options import PLANNED_OPTIONS


def _tool(name: str = "t") -> af.Tool:
    return af.define_tool(name=name, description="d", execute=lambda a: "ok")


def make(**options: Any) -> af.Agent:
    base: dict[str, Any] = {"provider": af.MockProvider(["hi"]), "model": "m"}
    base.update(options)
    return af.Agent(**base)


def refused(option: str, **options: Any) -> af.UsageError:
    with pytest.raises(af.UsageError) as caught:
        make(**options)
    assert caught.value.option == option
    assert option in str(caught.value)
    return caught.value


def test_defaults() -> None:
    config = make().config
    assert (config.name, config.id, config.max_iterations) == ("Agent", "agent", 10)
    assert (config.react_mode, config.tool_arg_validation) == ("dynamic", "enforce")
    assert (config.commit_values, config.record_receipt) == ("delta", True)
    assert config.params == {}
    assert make(temperature=0.3, max_tokens=9).config.params == {
        "temperature": 0.3,
        "max_tokens": 9,
    }


def test_unknown_option_suggests_the_close_name() -> None:
    error = refused("max_iteration", max_iteration=3)
    assert "did you mean 'max_iterations'" in str(error)


@pytest.mark.parametrize("name", sorted(PLANNED_OPTIONS))
def test_planned_options_are_refused_by_name(name: str) -> None:
    error = refused(name, **{name: True})
    assert "planned" in str(error)


@pytest.mark.parametrize("value", [0, 51, -1, 10**6])
def test_max_iterations_outside_1_to_50(value: int) -> None:
    error = refused("max_iterations", max_iterations=value)
    assert "between 1 and 50" in str(error)


@pytest.mark.parametrize("value", ["10", 2.5, True, None])
def test_max_iterations_wrong_type(value: Any) -> None:
    refused("max_iterations", max_iterations=value)


def test_max_iterations_bounds_accepted() -> None:
    assert make(max_iterations=1).config.max_iterations == 1
    assert make(max_iterations=50).config.max_iterations == 50


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("temperature", -0.1),
        ("temperature", float("nan")),
        ("temperature", "hot"),
        ("temperature", True),
        ("max_tokens", 0),
        ("max_tokens", 1.5),
        ("max_tokens", "9"),
        ("react_mode", "loop"),
        ("tool_arg_validation", "strict"),
        ("commit_values", "diff"),
        ("record_receipt", "yes"),
        ("name", ""),
        ("name", 3),
        ("id", "has space"),
        ("id", ""),
        ("model", ""),
        ("model", None),
        ("system", 5),
        ("system", ["ok", 3]),
        ("tools", "not-a-list"),
        ("tools", [lambda a: a]),
        ("store", 42),
    ],
)
def test_wrong_types_and_values(option: str, value: Any) -> None:
    refused(option, **{option: value})


def test_provider_must_have_complete() -> None:
    refused("provider", provider=object())
    refused("provider", provider=None)


def test_dynamic_grouped_is_refused_clearly() -> None:
    error = refused("react_mode", react_mode="dynamic-grouped")
    assert "planned" in str(error) and "'dynamic'" in str(error)


def test_duplicate_tool_names() -> None:
    error = refused("tools", tools=[_tool("same"), _tool("same")])
    assert "'same'" in str(error)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dot.name", "ünï", 7])
def test_invalid_tool_names(name: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.define_tool(name=name, description="d", execute=lambda a: a)
    assert caught.value.option == "tools"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string"},
        {"properties": {}},
        {"type": "array", "items": {}},
        {"type": "object", "properties": {"a": {"type": "no-such-type"}}},
        {"type": "object", "minimum": float("nan")},
    ],
)
def test_schema_must_be_an_object_schema(schema: dict[str, Any]) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.define_tool(name="t", description="d", execute=lambda a: a, input_schema=schema)
    assert caught.value.option == "tools"
    assert "'t'" in str(caught.value)


def test_tool_needs_description_and_callable() -> None:
    with pytest.raises(af.UsageError):
        af.define_tool(name="t", description=" ", execute=lambda a: a)
    with pytest.raises(af.UsageError):
        af.define_tool(name="t", description="d", execute="nope")  # type: ignore[arg-type]


def test_mock_provider_misuse() -> None:
    with pytest.raises(af.UsageError):
        af.MockProvider()
    with pytest.raises(af.UsageError):
        af.MockProvider(["a"], respond=lambda r: "b")
    with pytest.raises(af.UsageError):
        af.MockProvider([3])  # type: ignore[list-item]


def test_store_choices(tmp_path: Any) -> None:
    assert isinstance(make().store, af.MemoryStore)
    assert isinstance(make(store=tmp_path / "a.db").store, af.SqliteStore)
    assert isinstance(make(store=str(tmp_path / "b.db")).store, af.SqliteStore)
    own = af.MemoryStore()
    assert make(store=own).store is own
