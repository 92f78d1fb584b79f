"""Every option is bounded at construction to what the log can hold: a number the log would
refuse later (an integer beyond +-(2**53 - 1), a float that is not finite) or one past an
option's documented bound is a UsageError naming the option at ``Agent(...)``, never a run
that fails (or, worse, records nothing) once it starts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.features import registry
from agentfootprint.features.base import MAX_COUNT
from agentfootprint.logformat.canonical import MAX_SAFE_INT


def _tool(name: str) -> af.Tool:
    return af.define_tool(name=name, description=f"The {name}.", execute=lambda args: "ok")


PRICES = {"m": {"input": 1, "output": 2, "cache_read": 0.5, "cache_write": 1.5}}

#: a valid value of every option whose value holds a number (and the options it needs)
NUMERIC: dict[str, tuple[Any, dict[str, Any]]] = {
    "temperature": (0.5, {}),
    "max_tokens": (100, {}),
    "top_p": (0.5, {}),
    "seed": (7, {}),
    "presence_penalty": (0.5, {}),
    "frequency_penalty": (0.5, {}),
    "model_settings": ({"top_k": 5, "metadata": {"n": 1}}, {}),
    "max_iterations": (5, {}),
    "tool_teardown_timeout_ms": (1000, {}),
    "window": ({"keep_last_turns": 2}, {}),
    "keep_last_tool_results": (2, {"window": {"keep_last_turns": 2}}),
    "max_tool_result_chars": (100, {}),
    "context_budget": ({"system_prompt": 10, "messages": 10, "tools": 10}, {}),
    "tool_choice": ({"serve": {"top": 1}}, {"tools": [_tool("a"), _tool("b")]}),
    "cost_budget": ({"usd": 1, "on_exceed": "halt"}, {"pricing_table": PRICES}),
    "pricing_table": (PRICES, {}),
    "observer_delivery_options": (
        {"max_queue": 10, "overflow": "sample", "sample_every": 3, "flush_budget_ms": 1},
        {"observer_delivery": "deferred"},
    ),
    "output_type": ({"type": "object", "properties": {"n": {"maximum": 10}}}, {}),
    "output_retries": (2, {"output_type": {"type": "object"}}),
    "artifacts": ({"store": af.MemoryArtifacts(), "max_inline_chars": 1000, "ttl_ms": 60}, {}),
    "findings": ({"max_context_bytes": 2048, "keep_ledger_facts": 2}, {}),
    "keep_ledger_facts": (3, {"findings": True, "window": {"keep_last_turns": 2}}),
}
#: options whose values hold no number (objects, strings, booleans, paths)
NOT_NUMERIC = frozenset(
    {
        "provider",
        "model",
        "name",
        "id",
        "stop",
        "system",
        "tools",
        "store",
        "disclosures",
        "ports",
        "redact",
        "react_mode",
        "tool_arg_validation",
        "commit_values",
        "record_receipt",
        "record_system_prompt",
        "ontology",
        "ontology_ask",
        "repeated_call_nudge",
        "wrap_up_at_max_iterations",
        "permission_checker",
        "credentials",
        "on_authorization_required",
        "time",
        "inputs_layer",
        "argument_ask_context",
        "caching",
        "cache_strategy",
        "structure_recorders",
        "group_translator",
        "observer_delivery",
        "read_tracking",
        "write_provenance",
        "integrity_posture",
        "check_column_types",
        "notice_empty_lookups",
        "notice_prior_turn_evidence",
        "external_grounds",
        "results_layer",
        "answer_layer",
    }
)
#: what no log holds, and what no option's bound admits
HUGE = {"2**53": 2**53, "-(2**53)": -(2**53), "10**30": 10**30, "10**5000": 10**5000}


def _make(**options: Any) -> af.Agent:
    return af.Agent(**{"provider": af.MockProvider(["hi"]), "model": "m", **options})


def _numbers(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The paths of every number in ``value`` (the empty path: the value is one)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        yield path
    elif isinstance(value, dict):
        for key, member in value.items():
            yield from _numbers(member, (*path, key))


def _with(value: Any, path: tuple[Any, ...], number: int) -> Any:
    if not path:
        return number
    copied = dict(value)
    copied[path[0]] = _with(value[path[0]], path[1:], number)
    return copied


def test_every_option_is_sorted_into_numeric_or_not() -> None:
    # a new option is swept here once it is named in one of the two
    assert set(NUMERIC) | NOT_NUMERIC == set(registry.option_specs())
    assert not set(NUMERIC) & NOT_NUMERIC


def _sweep() -> Iterator[Any]:
    for option, (example, needs) in NUMERIC.items():
        for path in _numbers(example):
            for label, number in HUGE.items():
                where = "".join(f"[{key!r}]" for key in path)
                yield pytest.param(
                    option, example, needs, path, number, id=f"{option}{where}={label}"
                )


@pytest.mark.parametrize(("option", "example", "needs", "path", "number"), list(_sweep()))
def test_a_number_beyond_the_log_is_refused_at_construction_naming_the_option(
    option: str, example: Any, needs: dict[str, Any], path: tuple[Any, ...], number: int
) -> None:
    _make(**needs, **{option: example})  # the example itself is accepted
    with pytest.raises(af.UsageError) as caught:
        _make(**needs, **{option: _with(example, path, number)})
    assert caught.value.option == option and f"option {option!r}" in str(caught.value)


@pytest.mark.parametrize(
    ("option", "value", "needs"),
    [
        ("max_tokens", MAX_COUNT + 1, {}),
        ("window", {"keep_last_turns": MAX_COUNT + 1}, {}),
        ("keep_last_tool_results", MAX_COUNT + 1, {"window": {"keep_last_turns": 1}}),
        ("max_tool_result_chars", MAX_COUNT + 1, {}),
        ("context_budget", {"messages": MAX_COUNT + 1}, {}),
        ("tool_choice", {"serve": {"top": MAX_COUNT + 1}}, NUMERIC["tool_choice"][1]),
        ("temperature", 2.5, {}),
        ("temperature", float("inf"), {}),
        ("top_p", 1.5, {}),
        ("presence_penalty", 2.5, {}),
        ("frequency_penalty", -2.5, {}),
        ("stop", ["s"] * 17, {}),
        ("max_iterations", 51, {}),
        ("tool_teardown_timeout_ms", 86_400_001, {}),
        ("cost_budget", {"usd": MAX_SAFE_INT + 1.0}, {"pricing_table": PRICES}),
        ("pricing_table", {"m": {"input": float("nan"), "output": 1}}, {}),
        ("observer_delivery_options", {"max_queue": 1_000_001}, {"observer_delivery": "deferred"}),
        (
            "observer_delivery_options",
            {"flush_budget_ms": 60_001},
            {"observer_delivery": "deferred"},
        ),
        ("observer_delivery_options", {"max_queue": 0}, {"observer_delivery": "deferred"}),
        ("output_retries", 11, {"output_type": {"type": "object"}}),
        ("output_retries", -1, {"output_type": {"type": "object"}}),
        ("artifacts", {"store": af.MemoryArtifacts(), "max_inline_chars": MAX_COUNT + 1}, {}),
        ("artifacts", {"store": af.MemoryArtifacts(), "ttl_ms": 0}, {}),
        ("findings", {"max_context_bytes": 262_145}, {}),
        ("keep_ledger_facts", MAX_COUNT + 1, {"findings": True}),
        ("keep_ledger_facts", -1, {}),
    ],
)
def test_a_value_past_the_options_documented_bound_is_refused(
    option: str, value: Any, needs: dict[str, Any]
) -> None:
    with pytest.raises(af.UsageError) as caught:
        _make(**needs, **{option: value})
    assert caught.value.option == option


def test_the_bounds_themselves_run_and_are_recorded() -> None:
    # the widest values accepted reach run.open and the request, and the log holds them
    agent = _make(
        max_tokens=MAX_COUNT,
        temperature=2,
        window={"keep_last_turns": MAX_COUNT},
        keep_last_tool_results=MAX_COUNT,
        max_tool_result_chars=MAX_COUNT,
    )
    result = agent.run_sync("go")
    assert result.answer == "hi"
    checked = af.verify_run(agent.store, result.run_id)
    assert checked.outcome.name == "VALID_UNSIGNED"
    assert af.served_at(agent.store, result.run_id, 0)["params"]["max_tokens"] == MAX_COUNT


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("model", "m\ud800"),
        ("name", "a\udcff"),
        ("system", ["fine", "lone \ud800 surrogate"]),
        ("window", {"keep_last_turns": 2, "\ud800": 1}),
    ],
)
def test_a_string_the_log_cannot_hold_is_refused_at_construction(option: str, value: Any) -> None:
    with pytest.raises(af.UsageError, match="lone surrogate") as caught:
        _make(**{option: value})
    assert caught.value.option == option


def test_a_value_nested_in_itself_is_refused_not_walked_for_ever() -> None:
    looped: dict[str, Any] = {"keep_last_turns": 2}
    looped["summarize"] = looped
    with pytest.raises(af.UsageError, match="nests deeper") as caught:
        _make(window=looped)
    assert caught.value.option == "window"


def test_a_store_path_is_not_held_to_the_logs_strings(tmp_path: Path) -> None:
    # a file name may be any bytes the file system takes (decoded with surrogateescape):
    # the path is never recorded, so it is not refused for a lone surrogate
    path = str(tmp_path / "runs-\udcff.db")
    try:  # can this file system name it at all?
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY))
    except (UnicodeEncodeError, OSError):
        pytest.skip("the file system cannot name this file")
    os.remove(path)
    agent = _make(store=path)
    assert agent.run_sync("go").answer == "hi"
    agent.close()
