"""The seam: everything that used to be a list derives from the features' declarations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.features import registry
from agentfootprint.features.base import Feature, StageSpec
from agentfootprint.features.registry import event_kinds
from agentfootprint.features.seed_options import SEED_OPTIONS, python_name
from agentfootprint.runtime.events import AgentEvent

DOCS = Path(__file__).parents[2] / "docs" / "options.md"


def _docs_rows() -> dict[str, tuple[str, str]]:
    """docs/options.md's table: Python name -> (seed name, status)."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[1].startswith("`"):
            rows[cells[1].strip("`")] = (cells[0], cells[2])
    return rows


def test_docs_options_table_matches_the_declarations() -> None:
    """Every seed option has one row; done iff a feature declares it; the seed and Python
    names agree; every declared seed option's row names a test that exists."""
    rows = _docs_rows()
    declared = registry.option_specs()
    seed_names = {python_name(s): s for s in SEED_OPTIONS}
    assert set(seed_names) <= set(rows), sorted(set(seed_names) - set(rows))
    for name, (seed, status) in rows.items():
        if name not in seed_names:
            continue
        assert seed == seed_names[name], (name, seed)
        implemented = name in declared
        assert status.startswith("done") == implemented, (name, status)
    for name, (_, spec) in declared.items():
        if spec.seed is not None:
            assert python_name(spec.seed) == name
            assert name in rows, f"docs/options.md has no row for {name}"
    root = Path(__file__).parents[2]
    for line in DOCS.read_text().splitlines():
        path = None  # ``::name`` after a full reference names a test of the same file
        for full, test in re.findall(r"`(tests/[\w/]+\.py)?::(\w+)", line):
            path = full or path
            assert path is not None, line
            source = root / path
            assert source.exists(), path
            assert f"def {test}" in source.read_text(), f"{path}::{test}"


def test_reserved_keys_options_and_kinds_come_from_the_declarations() -> None:
    features = registry.all_features()
    keys = {k.name for f in features for k in f.state_keys}
    structure = registry.structure_keys()
    assert structure <= keys
    # the keys the loop reads as structure: exactly those a policy may not name
    assert structure == {
        "agent",
        "model",
        "params",
        "system_pieces",
        "history",
        "tool_schemas",
        "iteration",
        "usage",
        "last_response",
        "stopped_early",
        "cache_markers",
        "served_messages",
        "served_system",
        "served_results",
        "window_summary",
        "window_folding",
        "served_tools",
        "tool_choices",
        "tool_choice_outcomes",
        "pending",
        "pause_count",
        "paused_cost_usd",
    }
    for key in sorted(structure):
        with pytest.raises(af.UsageError) as caught:
            af.Agent(
                provider=af.MockProvider(["x"]), model="m", redact=af.RedactionPolicy(keys=[key])
            )
        assert caught.value.option == "redact" and key in str(caught.value)
    kinds = {e.kind for f in features for e in f.events}
    assert kinds == event_kinds()
    assert (
        registry.recorded_kinds()
        == {e.kind for f in features for e in f.recorded_events}
        >= {"agentfootprint.validation.args_invalid", "agentfootprint.tools.repeated_call"}
    )
    options = {o.name for f in features for o in f.options}
    assert options == set(registry.option_specs())
    assert {python_name(s) for s in SEED_OPTIONS} <= options
    for feature in features:
        for event in feature.events:
            assert issubclass(event, AgentEvent) and event.kind.startswith("agentfootprint.")


def test_the_chart_derives_from_the_declared_stages() -> None:
    dynamic = af.Agent(provider=af.MockProvider(["x"]), model="m").chart.describe()
    assert [s["stage"] for s in dynamic] == [
        "seed",
        "system-prompt",
        "messages",
        "tools",
        "call-llm",
        "route",
        "tool-calls",
        "prepare-final",
        "break-final",
    ]
    by_name = {s["stage"]: s for s in dynamic}
    assert by_name["route"]["branches"] == {"tool-calls": "tool-calls", "final": "prepare-final"}
    assert by_name["tool-calls"]["next"] == "system-prompt"
    classic = af.Agent(provider=af.MockProvider(["x"]), model="m", react_mode="classic")
    order = [s["stage"] for s in classic.chart.describe()]
    assert order[:5] == ["seed", "system-prompt", "tools", "messages", "call-llm"]
    assert {s["stage"]: s for s in classic.chart.describe()}["tool-calls"]["next"] == "messages"


@pytest.mark.parametrize(("mode", "per_pass"), [("dynamic", 6), ("classic", 4)])
def test_the_stage_budget_derives_from_the_loop(mode: str, per_pass: int) -> None:
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m", react_mode=mode, max_iterations=7)
    assert agent.seam.stage_budget == per_pass * 7 + len(agent.chart.stages)


async def _note(ctx: Any) -> None:
    ctx.scope.set("checked", True)


def test_a_feature_stage_sits_where_it_declares() -> None:
    """A feature's stage joins the chart at its phase and order, and the budget counts it."""
    extra = Feature(
        name="check",
        summary="a stage before the call",
        stages=(StageSpec(name="check", fn=_note, phase="iteration", order=40),),
    )
    options = af.Agent(provider=af.MockProvider(["x"]), model="m").config.options
    seam = registry.Seam.build(options, features=(*registry.all_features(), extra))
    order = [s["stage"] for s in seam.chart.describe()]
    assert order[3:6] == ["tools", "check", "call-llm"]
    assert seam.stage_budget == 7 * 10 + len(seam.chart.stages)


def test_a_stage_that_calls_the_model_must_declare_it() -> None:
    from agentfootprint.features import llm_call

    extra = Feature(
        name="sneaky",
        summary="",
        stages=(StageSpec(name="sneaky", fn=llm_call.call_llm, phase="iteration", order=45),),
    )
    agent = af.Agent(provider=af.MockProvider(["a", "b"]), model="m")
    agent.seam = registry.Seam.build(
        agent.config.options, features=(*registry.all_features(), extra)
    )
    agent.chart = agent.seam.chart
    with pytest.raises(af.RunError, match="does not declare calls_model"):
        agent.run_sync("hi")


def test_two_features_cannot_own_one_name() -> None:
    owner = next(f for f in registry.all_features() if f.state_keys)
    twin = Feature(name="twin", summary="", state_keys=owner.state_keys[:1])
    with pytest.raises(RuntimeError, match="declared by both"):
        registry._check_unique([*registry.all_features(), twin])


def test_a_stage_making_two_calls_is_refused_by_the_marker_rule() -> None:
    """The log marks one call per commit: a feature stage cannot make two."""
    from agentfootprint.features import llm_call

    async def twice(ctx: Any) -> None:
        await llm_call.call_llm(ctx)
        await llm_call.call_llm(ctx)

    extra = Feature(
        name="twice",
        summary="",
        stages=(StageSpec(name="twice", fn=twice, phase="iteration", order=45, calls_model=True),),
        ports=("model",),
    )
    agent = af.Agent(provider=af.MockProvider(["a", "b", "c"]), model="m")
    agent.seam = registry.Seam.build(
        agent.config.options, features=(*registry.all_features(), extra)
    )
    agent.chart = agent.seam.chart
    with pytest.raises(af.RunError, match="second model call"):
        agent.run_sync("hi")
