"""``time``: the run's clock as rows (the turn's now and zone, each dispatch instant), every
instant through the clock port as a recorded decision; a replay on another day identical."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

import pytest
import tzdata
from feature_support import events_of

import agentfootprint as af
from agentfootprint.features.run_clock import zone_info

DAY = 1_700_000_000_000
MONTH = 30 * 86_400_000


def clock_at(start: int, step: int = 1_000) -> af.Ports:
    ticks = itertools.count(start, step)
    ids = itertools.count()
    return af.Ports(clock=lambda: next(ticks), run_ids=lambda: f"run{next(ids):04d}")


def when_tool(seen: list[Any], **needs: Any) -> af.Tool:
    return af.define_tool(
        name="when",
        description="What time is it?",
        execute=lambda args, ctx: seen.append(ctx.time) or "noon",
        **needs,
    )


def script(*ids: str) -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call("when", {}, id=i)]) for i in ids] + ["done"]


def test_a_clock_row_per_turn_and_a_call_row_per_dispatched_call() -> None:
    seen: list[Any] = []
    agent = af.Agent(
        provider=af.MockProvider(script("c1", "c2")),
        model="m",
        tools=[when_tool(seen)],
        time={"zone": "Europe/Paris"},
        ports=clock_at(DAY),
    )
    result = agent.run_sync("what time is it")
    clock, first, second = result.state["time_rows"]
    assert clock == {
        "row": "clock",
        "now": clock["now"],
        "now_source": "turn-start",
        "zone": "Europe/Paris",
        "zone_source": "agent",
        "tzdata": tzdata.IANA_VERSION,
    }
    assert [first["tool_call_id"], second["tool_call_id"]] == ["c1", "c2"]
    assert clock["now"] < first["dispatched_at"] < second["dispatched_at"]
    assert [t.dispatched_at for t in seen] == [first["dispatched_at"], second["dispatched_at"]]
    assert {(t.zone, t.now) for t in seen} == {("Europe/Paris", clock["now"])}
    reads = events_of(agent.store, result.run_id, "agentfootprint.time.read")
    assert [r["purpose"] for r in reads] == ["turn-start", "dispatch", "dispatch"]
    assert [r["at"] for r in reads] == [
        clock["now"],
        first["dispatched_at"],
        second["dispatched_at"],
    ]


def test_without_a_zone_the_zone_is_unknown_never_the_servers() -> None:
    agent = af.Agent(provider=af.MockProvider(["done"]), model="m", time=True, ports=clock_at(DAY))
    (clock,) = agent.run_sync("hi").state["time_rows"]
    assert (clock["zone"], clock["zone_source"]) == (None, "unknown")


def test_each_turn_files_its_clock() -> None:
    agent = af.Agent(
        provider=af.MockProvider(["one", "two"]), model="m", time=True, ports=clock_at(DAY)
    )
    first = agent.run_sync("a")
    second = agent.run_sync("b", continue_from=first)
    clocks = [r for r in second.state["time_rows"] if r["row"] == "clock"]
    assert len(clocks) == 2 and clocks[0]["now"] < clocks[1]["now"]


@pytest.mark.parametrize(
    "value",
    [
        {"zone": "EST"},
        {"zone": "+02:00"},
        {"zone": "UTC+2"},
        {"zone": "Mars/Olympus_Mons"},
        {"zone": "europe/paris"},
        {"zone": 5},
        {"zone": "Europe/Paris", "now": 0},
        "Europe/Paris",
        1,
    ],
)
def test_a_zone_that_is_not_an_iana_name_is_refused(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider([]), model="m", time=value)
    assert caught.value.option == "time"


def test_zones_come_from_the_tzdata_package() -> None:
    paris = zone_info("Europe/Paris")
    assert paris.key == "Europe/Paris"
    assert paris.utcoffset(datetime(2024, 1, 15)) == timedelta(hours=1)
    assert paris.utcoffset(datetime(2024, 7, 15)) == timedelta(hours=2)  # summer time
    assert zone_info("UTC").utcoffset(datetime(2024, 7, 15)) == timedelta(0)


def test_a_replay_a_month_later_serves_and_writes_the_recorded_instants() -> None:
    seen: list[Any] = []
    agent = af.Agent(
        provider=af.MockProvider(script("c1")),
        model="m",
        tools=[when_tool(seen)],
        time={"zone": "Asia/Tokyo"},
        ports=clock_at(DAY),
    )
    result = agent.run_sync("what time is it")
    later = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[when_tool([])],
        time={"zone": "Asia/Tokyo"},
        ports=clock_at(DAY + MONTH),
    )
    replayed = af.replay_sync(later, agent.store, result.run_id)  # rows compared byte for byte
    assert replayed.result.state["time_rows"] == result.state["time_rows"]
    assert replayed.calls_checked == 2


def test_a_call_that_is_not_dispatched_files_no_row() -> None:
    denied = af.define_tool(name="when", description="d", execute=lambda a: "x")

    class Deny:
        def check(self, request: Any) -> Any:
            return "deny"

    agent = af.Agent(
        provider=af.MockProvider(script("c1")),
        model="m",
        tools=[denied],
        time=True,
        permission_checker=Deny(),
        ports=clock_at(DAY),
    )
    rows_ = agent.run_sync("x").state["time_rows"]
    assert [r["row"] for r in rows_] == ["clock"]


def test_a_resume_files_clock_on_resume_and_keeps_the_turns_clock() -> None:
    seen: list[Any] = []
    service = af.static_tokens({}, consent_url="https://consent.example/{service}")
    agent = af.Agent(
        provider=af.MockProvider(script("c1")),
        model="m",
        tools=[when_tool(seen, needs={"credential": "cal"})],
        credentials=service,
        time={"zone": "Europe/Paris"},
        ports=clock_at(DAY, step=60_000),
    )
    paused = agent.run_sync("when")
    assert [r["row"] for r in paused.state["time_rows"]] == ["clock"]  # nothing dispatched
    service.grant("cal", "token-123456")
    resumed = agent.resume_sync(paused)
    clock, on_resume, call = resumed.state["time_rows"]
    assert on_resume["row"] == "clock-on-resume" and on_resume["now"] > clock["now"]
    assert call["row"] == "call" and call["dispatched_at"] > on_resume["now"]
    (time,) = seen
    assert time.now == clock["now"]  # the turn's clock, frozen across the pause


def test_without_the_option_nothing_is_filed() -> None:
    agent = af.Agent(provider=af.MockProvider(script("c1")), model="m", tools=[when_tool([])])
    result = agent.run_sync("x")
    assert "time_rows" not in result.state
    assert events_of(agent.store, result.run_id, "agentfootprint.time.read") == []


def test_a_run_may_bring_its_own_clock_and_its_replay_keeps_it() -> None:
    seen: list[Any] = []
    agent = af.Agent(
        provider=af.MockProvider(script("c1")),
        model="m",
        tools=[when_tool(seen)],
        time={"zone": "Europe/Paris"},
        ports=clock_at(DAY),
    )
    result = agent.run_sync("when", time={"zone": "Asia/Tokyo", "now": 1_600_000_000_000})
    clock = result.state["time_rows"][0]
    assert (clock["now"], clock["now_source"]) == (1_600_000_000_000, "run")
    assert (clock["zone"], clock["zone_source"]) == ("Asia/Tokyo", "run")
    assert seen[0].now == 1_600_000_000_000 and seen[0].zone == "Asia/Tokyo"
    reads = events_of(agent.store, result.run_id, "agentfootprint.time.read")
    assert [r["purpose"] for r in reads] == ["dispatch"]  # the run's now was given, not read
    later = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[when_tool([])],
        time={"zone": "Europe/Paris"},
        ports=clock_at(DAY + MONTH),
    )
    replayed = af.replay_sync(later, agent.store, result.run_id)
    assert replayed.result.state["time_rows"] == result.state["time_rows"]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"now": -1}, "unix milliseconds"),
        ({"now": 1.5}, "unix milliseconds"),
        ({"zone": "CET"}, "IANA"),
        ({"when": 1}, "must be a dict"),
        ({}, "must be a dict"),
        ("now", "must be a dict"),
    ],
)
def test_a_runs_clock_is_checked(value: Any, says: str) -> None:
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m", time=True)
    with pytest.raises(af.UsageError, match=says) as caught:
        agent.run_sync("x", time=value)
    assert caught.value.option == "time" and agent.store.run_ids() == []


def test_a_runs_clock_needs_the_option() -> None:
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m")
    with pytest.raises(af.UsageError, match="time option") as caught:
        agent.run_sync("x", time={"now": 0})
    assert caught.value.option == "time"


def test_a_resume_with_another_clock_files_it_and_keeps_the_turns() -> None:
    seen: list[Any] = []
    service = af.static_tokens({}, consent_url="https://consent.example/{service}")
    agent = af.Agent(
        provider=af.MockProvider(script("c1")),
        model="m",
        tools=[when_tool(seen, needs={"credential": "cal"})],
        credentials=service,
        time=True,
        ports=clock_at(DAY),
    )
    paused = agent.run_sync("when", time={"now": 1_600_000_000_000})
    service.grant("cal", "token-123456")
    resumed = agent.resume_sync(paused, time={"zone": "America/New_York", "now": 1_650_000_000_000})
    clock, on_resume, _ = resumed.state["time_rows"]
    assert on_resume == {
        "row": "clock-on-resume",
        "now": 1_650_000_000_000,
        "now_source": "run",
        "zone": "America/New_York",
    }
    assert (seen[0].now, seen[0].zone) == (clock["now"], None)  # the turn's clock
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[when_tool([], needs={"credential": "cal"})],
        credentials=af.static_tokens({}),
        time=True,
    )
    replayed = af.replay_sync(twin, agent.store, resumed.run_id)
    assert replayed.result.state["time_rows"] == resumed.state["time_rows"]
