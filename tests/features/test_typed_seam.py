"""The seam typed where it is used: hook points are methods, each hook gets its feature's own
narrow context, ports and needs are checked at their use."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from feature_support import calls, lookup, tool_messages

import agentfootprint as af
from agentfootprint.features import cost_budget, pricing_table, registry, repeated_call_nudge
from agentfootprint.features.base import (
    HOOK_POINTS,
    Feature,
    Given,
    HookContext,
    OptionSpec,
    StageSpec,
    ToolResult,
    UndeclaredNeedError,
    takes_part,
)
from agentfootprint.runtime.ports import UndeclaredPortError
from agentfootprint.runtime.run import StageContext
from agentfootprint.runtime.tools import ToolOutcome


def _agent_with(extra: Feature, script: list[Any] | None = None) -> af.Agent:
    """An agent that asks for one tool call, with ``extra`` among its features."""
    agent = af.Agent(
        provider=af.MockProvider(script if script is not None else calls({"q": "x"})),
        model="m",
        tools=[lookup()],
    )
    agent.seam = registry.Seam.build(
        agent.config.options, features=(*registry.all_features(), extra)
    )
    agent.chart = agent.seam.chart
    return agent


class _AsksDecisions(Feature):
    async def tool_permission(self, ctx: HookContext[Any], call: ToolResult) -> None:
        ctx.decisions.recorded("test.kind", {"tool": call.tool})


def test_a_hook_using_an_undeclared_port_fails_at_once() -> None:
    extra = _AsksDecisions(name="asks-decisions", summary="uses a port it did not declare")
    with pytest.raises(UndeclaredPortError, match="'asks-decisions' uses the 'decisions' port"):
        _agent_with(extra).run_sync("go")


def test_the_same_hook_runs_once_it_declares_the_port() -> None:
    extra = _AsksDecisions(name="asks-decisions", summary="", ports=("decisions",))
    assert _agent_with(extra).run_sync("go").outcome == "answered"


async def _clocked(ctx: StageContext) -> None:
    ctx.clock()


def test_a_stage_using_an_undeclared_port_fails_at_once() -> None:
    stage = StageSpec(name="clocked", fn=_clocked, phase="iteration", order=45)
    sneaky = Feature(name="clocked", summary="", stages=(stage,))
    with pytest.raises(UndeclaredPortError, match="'clocked' uses the 'clock' port") as caught:
        _agent_with(sneaky, ["done"]).run_sync("go")
    assert (caught.value.feature, caught.value.port) == ("clocked", "clock")
    declared = Feature(name="clocked", summary="", stages=(stage,), ports=("clock",))
    assert _agent_with(declared, ["done"]).run_sync("go").outcome == "answered"


def test_every_stage_keeps_to_its_declared_ports() -> None:
    """Every shipped feature runs its stages and hooks within its declared ports (a tool
    call, a permission checker, a classifier: the ports those paths use)."""

    class Allow:
        def check(self, request: Any) -> af.Decision:
            return af.Decision(decision="allow")

    agent = af.Agent(
        provider=af.MockProvider(calls({"q": "x"})),
        model="m",
        tools=[lookup()],
        permission_checker=Allow(),
        tool_choice={},
        pricing_table={"m": {"input": 1, "output": 1}},
        cost_budget=5,
    )
    assert agent.run_sync("go").outcome == "answered"


class _ReadsSpend(Feature):
    async def stop_reason(self, ctx: HookContext[Any]) -> Mapping[str, Any] | None:
        pricing_table.spent(ctx)
        return None


def test_a_hook_reading_a_feature_it_does_not_need_fails() -> None:
    extra = _ReadsSpend(name="reads-spend", summary="")
    with pytest.raises(UndeclaredNeedError, match="'reads-spend' reads feature 'pricing-table'"):
        _agent_with(extra).run_sync("go")


def test_a_needed_feature_must_take_part() -> None:
    extra = _ReadsSpend(name="reads-spend", summary="", needs=(pricing_table.NAME,))
    options = af.Agent(provider=af.MockProvider([]), model="m").config.options
    with pytest.raises(RuntimeError, match="needs feature 'pricing-table', which does not"):
        registry.Seam.build(options, features=(*registry.all_features(), extra))


def test_an_option_check_reads_only_what_its_feature_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def peek(value: Any, given: Given) -> Any:
        return given.resolved(pricing_table.OPTION)

    spy = Feature(name="spy", summary="", options=(OptionSpec(name="spy", seed=None, check=peek),))
    specs = {**registry.option_specs(), "spy": (spy, spy.options[0])}
    monkeypatch.setattr(registry, "option_specs", lambda: specs)
    with pytest.raises(UndeclaredNeedError, match="'spy' reads feature 'pricing-table'"):
        registry.resolve({"model": "m", "provider": af.MockProvider([])})
    allowed = Feature(
        name="spy",
        summary="",
        options=spy.options,
        needs=(pricing_table.NAME,),
    )
    specs["spy"] = (allowed, spy.options[0])
    resolved = registry.resolve(
        {"model": "m", "provider": af.MockProvider([]), "pricing_table": True}
    )
    assert resolved["spy"] == resolved["pricing_table"] == pricing_table.shipped_prices()


def test_cost_budget_declares_it_needs_the_pricing_table() -> None:
    assert cost_budget.FEATURE.needs == (pricing_table.NAME,)
    with pytest.raises(af.UsageError, match="needs prices"):
        af.Agent(provider=af.MockProvider([]), model="m", cost_budget=1)


def test_the_registry_records_once_who_takes_part_in_each_point() -> None:
    """A feature takes part in a point by overriding its method; a plain declaration takes
    part in none; the seam's table is each point's overriders, in hook order."""
    assert {p.__name__ for p in HOOK_POINTS} >= {"tool_result", "run_end", "unnote"}
    plain = Feature(name="plain", summary="")
    assert not any(takes_part(plain, point) for point in HOOK_POINTS)
    nudge = repeated_call_nudge.FEATURE
    assert {p.__name__ for p in HOOK_POINTS if takes_part(nudge, p)} == {
        "tool_result_noted",
        "unnote",
        "turn_start",
    }
    agent = af.Agent(provider=af.MockProvider([]), model="m")
    assert len(agent.seam.at(Feature.turn_start)) == 1  # the nudge, on by default
    assert agent.seam.run_end_hooks == agent.seam.at(Feature.run_end)
    with pytest.raises(TypeError, match="not a hook point"):
        agent.seam.at(Feature.settings)  # type: ignore[arg-type]


class _Typed(Feature):
    """A hook reads its own options as the typed object its ``settings`` made."""

    def settings(self, options: Mapping[str, Any]) -> int:
        return len(str(options["model"]))

    async def tool_result(
        self, ctx: HookContext[int], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        seen = ctx.memory(list)
        seen.append(ctx.options)
        return ToolOutcome(content=f"{outcome.content} ({len(seen)}x{ctx.options})")


def test_a_hook_gets_its_typed_options_and_its_own_memory() -> None:
    agent = _agent_with(_Typed(name="typed", summary=""), calls({"q": "a"}, {"q": "b"}))
    result = agent.run_sync("go")
    tools = [m["content"] for m in tool_messages(result)]
    assert tools == ["rows: 1, 2, 3 (1x1)", "rows: 1, 2, 3 (2x1)"]


def test_mypy_checks_hooks_against_their_points_and_settings(tmp_path: Path) -> None:
    """The seam is typed where it is used: a hook's context must carry its feature's
    settings type, and a call site passes each point's arguments (mypy strict says so)."""
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        textwrap.dedent(
            """\
            from collections.abc import Mapping
            from typing import Any

            from agentfootprint.features.base import Feature, HookContext, Options
            from agentfootprint.features.registry import hooks_at
            from agentfootprint.runtime.provider import LLMResponse
            from agentfootprint.runtime.run import StageContext


            class Right(Feature[int]):
                def settings(self, options: Mapping[str, Any]) -> int:
                    return 1

                async def turn_start(self, ctx: HookContext[int]) -> None:
                    return None


            class Wrong(Feature[int]):
                async def turn_start(self, ctx: HookContext[str]) -> None:  # error: override
                    return None


            async def call_site(ctx: StageContext, reply: LLMResponse) -> None:
                for hook in hooks_at(ctx, Feature.stop_reason):
                    await hook(ctx)
                    await hook(ctx, 1)  # error: call-arg
                for received in hooks_at(ctx, Feature.reply_received):
                    await received(ctx, 0, reply)
                    await received(ctx, "call", reply)  # error: arg-type


            def options_of(ctx: HookContext[int]) -> str:
                return ctx.options  # error: return-value


            PLAIN: Feature[Options] = Feature(name="plain", summary="")
            """
        )
    )
    limit = sys.getrecursionlimit()  # mypy raises it for the whole process: put it back
    try:
        out, _, _ = api.run(
            [str(snippet), "--strict", "--no-error-summary", "--hide-error-context"]
        )
    finally:
        sys.setrecursionlimit(limit)
    errors = {
        (int(line.split(":")[1]), line.rsplit("[", 1)[-1].rstrip("]"))
        for line in out.splitlines()
        if ": error: " in line
    }
    marked = {
        (number, line.rsplit("# error: ", 1)[1])
        for number, line in enumerate(snippet.read_text().splitlines(), start=1)
        if "# error: " in line
    }
    assert len(marked) == 4
    assert errors == marked  # each wrong use is caught, and nothing else is flagged


def test_features_reach_ports_only_through_their_contexts() -> None:
    """The port checks hold only if no feature takes a port from the run itself: every
    feature module but the gate (base.py: HookContext) uses ``ctx.<port>``."""
    package = Path(registry.__file__).parent
    bypass = re.compile(r"\brun\.(model|tools|decisions|ports)\b")
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(package.glob("*.py"))
        if path.name != "base.py"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if bypass.search(line)
    ]
    assert found == []


def test_a_declaration_names_real_ports_and_no_need_of_itself() -> None:
    with pytest.raises(af.UsageError, match="declares port 'clocks'; the ports are 'model'"):
        Feature(name="typo", summary="", ports=("clocks",))  # type: ignore[arg-type]
    with pytest.raises(af.UsageError, match="'loop' declares it needs itself"):
        Feature(name="loop", summary="", needs=("loop",))


def test_a_hook_reads_the_request_its_stage_served() -> None:
    """``ctx.served``: the request the model call's stage served, from ``request_served``
    on (what ``reply_received`` judges a reply against); None in a stage serving none."""
    seen: list[tuple[str, Any]] = []

    class _SeesServed(Feature):
        async def request_served(
            self, ctx: HookContext[Any], served: Mapping[str, Any]
        ) -> Mapping[str, Any]:
            assert ctx.served is served
            seen.append(("request_served", served))
            return {}

        async def reply_received(
            self, ctx: HookContext[Any], call: int, response: af.LLMResponse
        ) -> None:
            seen.append(("reply_received", ctx.served))

        async def tool_result(
            self, ctx: HookContext[Any], result: ToolResult, outcome: ToolOutcome
        ) -> ToolOutcome:
            seen.append(("tool_result", ctx.served))
            return outcome

    result = _agent_with(_SeesServed(name="sees-served", summary="")).run_sync("go")
    assert [point for point, _ in seen] == [
        "request_served",
        "reply_received",
        "tool_result",
        "request_served",
        "reply_received",
    ]
    first, second = seen[0][1], seen[3][1]
    assert seen[1][1] is first and seen[4][1] is second  # each reply: its own request
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]
    assert seen[2][1] is None  # the tool stage served the model nothing
    assert result.outcome == "answered"
