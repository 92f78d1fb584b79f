"""``caching`` and ``cache_strategy``: the markers a stage decides, served by projection 3.

Every run here is verified by the pytest plugin; the anthropic adapter's breakpoints on the
wire are in tests/providers/test_anthropic.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from feature_support import calls, events_of, fixed_ports, lookup, rows

import agentfootprint as af
from agentfootprint.features import registry
from agentfootprint.features.base import Feature, StageSpec, StateKey
from agentfootprint.features.caching import CacheStrategy
from agentfootprint.logformat.canonical import parse

NOTHING = {"system": [], "tools": [], "messages": []}


class Breakpoints(af.MockProvider):
    """A mock that declares prompt caching as the anthropic adapter does."""

    prompt_caching = "breakpoints"


class Declares(af.MockProvider):
    def __init__(self, declared: Any, script: list[Any]) -> None:
        super().__init__(script)
        self.prompt_caching = declared


def agent(provider: af.MockProvider, *, fixed: bool = True, **options: Any) -> af.Agent:
    return af.Agent(
        provider=provider,
        model="m",
        system=["Be brief.", "Be kind."],
        tools=[lookup()],
        ports=fixed_ports() if fixed else None,
        **options,
    )


def marker_writes(store: Any, run_id: str) -> list[dict[str, Any]]:
    found = []
    for row in store.read(run_id):
        if row.type == "write":
            body = parse(row.body)
            if body["path"] == "cache_markers":
                found.append(body)
    return found


def projection_of(store: Any, run_id: str) -> int:
    version: int = parse(next(iter(store.read(run_id))).body)["projection"]["version"]
    return version


def test_breakpoints_mark_the_last_system_piece_tool_and_message() -> None:
    made = agent(af.MockProvider(calls({"q": "a"}, {"q": "b"})), cache_strategy="breakpoints")
    assert "cache-markers" in made.chart.stages
    result = made.run_sync("look it up")
    assert result.calls == 3
    assert projection_of(made.store, result.run_id) == 3
    requests = made.config.provider.requests
    for k, served in enumerate(requests):
        assert served["prompt_cache"] == {
            "system": [1],
            "tools": [0],
            "messages": [len(served["messages"]) - 1],
        }
        assert af.served_at(made.store, result.run_id, k) == served
    assert [len(r["messages"]) for r in requests] == [1, 3, 5]
    # written by the stage, each call's markers in the commit before it: only what moved
    writes = marker_writes(made.store, result.run_id)
    assert writes[0]["verb"] == "set"
    assert [w["value"] for w in writes[1:]] == [{"messages": [2]}, {"messages": [4]}]
    assert result.state["cache_markers"] == requests[-1]["prompt_cache"]


def test_the_default_strategy_is_the_one_the_provider_declares() -> None:
    declared = agent(Breakpoints(["hi"]))
    assert declared.config.options["cache_strategy"] == "breakpoints"
    assert declared.seam.projection == 3
    result = declared.run_sync("hello")
    assert declared.config.provider.requests[0]["prompt_cache"] == {
        "system": [1],
        "tools": [0],
        "messages": [0],
    }
    assert result.state["cache_markers"]
    # a provider that declares nothing (the mock), or automatic caching: no stage, no key
    for provider in (af.MockProvider(["hi"]), Declares("automatic", ["hi"])):
        plain = agent(provider)
        assert plain.seam.projection == 1 and "cache-markers" not in plain.chart.stages
        assert "cache_markers" not in plain.run_sync("hello").state
        assert "prompt_cache" not in provider.requests[0]
    assert agent(af.MockProvider([])).config.options["cache_strategy"] == "none"
    assert agent(Declares("automatic", [])).config.options["cache_strategy"] == "automatic"


def run_rows(provider: af.MockProvider, **options: Any) -> list[tuple[str, int, bytes]]:
    made = agent(provider, **options)
    result = made.run_sync("look it up")
    return rows(made.store, result.run_id)


def test_without_markers_the_run_records_the_same_rows_as_before() -> None:
    """No strategy (the mock), "none", "automatic", or caching="off" over breakpoints: the
    feature takes no part, so the rows are byte for byte those of a run without it."""
    script = lambda: calls({"q": "a"})  # noqa: E731
    before = run_rows(af.MockProvider(script()))
    assert b"cache" not in b"".join(body for _, _, body in before)
    for provider, options in (
        (af.MockProvider(script()), {"cache_strategy": "none"}),
        (af.MockProvider(script()), {"cache_strategy": "automatic"}),
        (Breakpoints(script()), {"caching": "off"}),
        (af.MockProvider(script()), {"caching": "off", "cache_strategy": "breakpoints"}),
    ):
        assert run_rows(provider, **options) == before, options


def test_caching_off_marks_nothing_whatever_the_strategy() -> None:
    class Everything:
        def markers(self, served: Any) -> dict[str, list[int]]:
            raise AssertionError("never asked: caching is off")

    made = agent(af.MockProvider(["hi"]), caching="off", cache_strategy=Everything())
    assert made.seam.projection == 1 and "cache-markers" not in made.chart.stages
    made.run_sync("hello")


class MarkFirst:
    """A strategy of its own: the first message once the history is long, else nothing."""

    def __init__(self) -> None:
        self.asked: list[Mapping[str, Any]] = []

    def markers(self, served: af.Request) -> dict[str, list[int]] | None:
        self.asked.append(served)
        if len(served.messages) < 3:
            return None
        return {"messages": [0]}


def test_an_own_strategy_is_asked_about_the_request_and_its_answer_recorded() -> None:
    strategy = MarkFirst()
    assert isinstance(strategy, CacheStrategy)
    made = agent(af.MockProvider(calls({"q": "a"})), cache_strategy=strategy)
    result = made.run_sync("look it up")
    # asked about the request about to be served, typed, without markers
    assert [len(r.messages) for r in strategy.asked] == [1, 3]
    assert all("prompt_cache" not in r and r.cache is None for r in strategy.asked)
    requests = made.config.provider.requests
    assert requests[0]["prompt_cache"] == NOTHING  # it answered None: nothing marked
    assert requests[1]["prompt_cache"] == {"system": [], "tools": [], "messages": [0]}
    (write,) = marker_writes(made.store, result.run_id)
    assert write["value"] == {"system": [], "tools": [], "messages": [0]}
    # a replay asks the same strategy again: it reproduces the recorded markers
    twin = agent(af.MockProvider([]), cache_strategy=MarkFirst())
    assert af.replay_sync(twin, made.store, result.run_id).calls_checked == 2
    # another strategy decides other markers: the replay diverges at that call
    other = agent(af.MockProvider([]), cache_strategy="breakpoints")
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(other, made.store, result.run_id)
    assert caught.value.call == 0
    assert "prompt cache markers differ" in str(caught.value)


def test_an_own_strategy_runs_off_the_loop_and_a_cancelled_run_makes_no_call() -> None:
    asked, release, answered = threading.Event(), threading.Event(), threading.Event()
    where: list[int] = []

    class Blocking:
        def markers(self, served: af.Request) -> None:
            where.append(threading.get_ident())
            asked.set()
            release.wait(30)  # a hang guard: the test releases it
            answered.set()

    provider = af.MockProvider(["hi"])
    made = agent(provider, cache_strategy=Blocking())

    async def scenario() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(made.run("go"), 0.5)
        assert asked.is_set() and not answered.is_set()  # the loop did not wait for it
        release.set()
        await asyncio.get_running_loop().run_in_executor(None, answered.wait, 30)

    asyncio.run(scenario())
    assert where and where[0] != threading.get_ident()
    assert provider.requests == []  # the call it decided the markers of was never made
    (info,) = list(made.store.runs())
    close = af.verify_run(made.store, info.run_id).close
    assert close is not None and close["error"]["type"] == "CancelledError"


def test_markers_that_are_no_longer_wanted_are_deleted() -> None:
    class Early:
        def markers(self, served: af.Request) -> dict[str, list[int]] | None:
            return {"system": [0]} if len(served.messages) == 1 else None

    made = agent(af.MockProvider(calls({"q": "a"})), cache_strategy=Early())
    result = made.run_sync("look it up")
    assert [w["verb"] for w in marker_writes(made.store, result.run_id)] == ["set", "delete"]
    assert "cache_markers" not in result.state
    assert made.config.provider.requests[1]["prompt_cache"] == NOTHING


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ({"messages": [5]}, "messages[0] marks 5, out of range"),
        ({"images": [0]}, "unknown member 'images'"),
        ([0], "returned list, not a mapping"),
        ({"system": [0, 1], "tools": [0], "messages": [0, 0]}, "not increasing"),
        ({"messages": ["0"]}, "messages[0] is a string, not an integer"),
    ],
)
def test_an_own_strategy_answering_wrong_fails_the_run_naming_the_option(
    answer: Any, words: str
) -> None:
    class Wrong:
        def markers(self, served: af.Request) -> Any:
            return answer

    made = agent(af.MockProvider(["hi"]), cache_strategy=Wrong())
    with pytest.raises(af.AgentFootprintError) as caught:
        made.run_sync("hello")
    assert "cache_strategy" in str(caught.value) and words in str(caught.value)
    assert made.config.provider.requests == []  # nothing was served


class NoMarkers:
    markers = "not a method"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"caching": "on"}, "option 'caching': must be \"off\""),
        ({"caching": None}, "option 'caching'"),
        ({"caching": False}, "option 'caching'"),
        ({"cache_strategy": "breakpoint"}, "did you mean 'breakpoints'?"),
        ({"cache_strategy": ""}, "option 'cache_strategy': unknown strategy ''"),
        ({"cache_strategy": None}, "option 'cache_strategy'"),
        ({"cache_strategy": 4}, "an object (an instance) with a markers(served)"),
        ({"cache_strategy": NoMarkers()}, "markers(served) -> dict | None method"),
        ({"cache_strategy": MarkFirst}, "an object (an instance)"),  # the class itself
    ],
)
def test_bad_values_are_refused_at_construction(options: dict[str, Any], words: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        agent(af.MockProvider([]), **options)
    assert words in str(caught.value)
    assert caught.value.option == next(iter(options))


def test_a_provider_declaring_an_unknown_strategy_is_refused_unless_one_is_given() -> None:
    with pytest.raises(af.UsageError) as caught:
        agent(Declares("sometimes", []))
    assert "prompt_caching='sometimes'" in str(caught.value)
    assert caught.value.option == "cache_strategy"
    assert agent(Declares("sometimes", []), cache_strategy="none").seam.projection == 1


async def window(ctx: Any) -> None:
    """Serve the last message only, and no tool (projection 2's edits)."""
    ctx.scope.set("served_messages", [{"history": [len(ctx.scope.get("history")) - 1, None]}])
    ctx.scope.set("served_tools", [])


WINDOW = Feature(
    name="test-last-message",
    summary="the last message only",
    stages=(StageSpec(name="last-message", fn=window, phase="iteration", order=40),),
    state_keys=(
        StateKey(name="served_messages", structure=True),
        StateKey(name="served_tools", structure=True),
    ),
    projection=2,
)


def test_breakpoints_index_the_lists_as_served_after_the_edits() -> None:
    made = agent(af.MockProvider(calls({"q": "a"})), cache_strategy="breakpoints")
    made.seam = registry.Seam.build(
        made.config.options, features=(*registry.all_features(), WINDOW)
    )
    made.chart = made.seam.chart
    result = made.run_sync("look it up")
    for served in made.config.provider.requests:
        assert len(served["messages"]) == 1 and served["tools"] == []
        assert served["prompt_cache"] == {"system": [1], "tools": [], "messages": [0]}
    assert projection_of(made.store, result.run_id) == 3
    twin = agent(af.MockProvider([]), cache_strategy="breakpoints")
    twin.seam, twin.chart = made.seam, made.seam.chart
    assert af.replay_sync(twin, made.store, result.run_id).calls_checked == 2


def test_a_breakpoints_run_verifies_replays_and_continues() -> None:
    made = agent(Breakpoints(["one", *calls({"q": "a"})]))
    first = made.run_sync("hello")
    second = made.run_sync("look it up", continue_from=first)
    assert af.verify_run(made.store, second.run_id).projection == 3
    served = af.served_at(made.store, second.run_id, 0)
    assert served["prompt_cache"]["messages"] == [len(served["messages"]) - 1] == [2]
    assert not events_of(made.store, second.run_id, "agentfootprint.cache")
    for run in (first, second):
        twin = agent(Breakpoints([]), fixed=False)
        assert af.replay_sync(twin, made.store, run.run_id).calls_checked == run.calls


def test_an_own_strategy_editing_the_request_changes_nothing() -> None:
    """The strategy gets a copy of the request: editing it changes neither the committed
    state nor what is served, and the run verifies."""

    class Meddler:
        def markers(self, served: af.Request) -> None:
            served["messages"][0]["content"] = "EDITED"  # the JSON behind the typed view
            served["system"].clear()
            return None

    provider = af.MockProvider(calls({"q": "a"}))
    made = agent(provider, cache_strategy=Meddler())
    result = made.run_sync("look it up")
    assert all("EDITED" not in str(request) for request in provider.requests)
    assert "EDITED" not in str(result.state)
    assert af.verify_run(made.store, result.run_id).outcome is af.Outcome.VALID_UNSIGNED
