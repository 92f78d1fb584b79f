"""``@af.tool`` in an agent's runs: the function receives typed values, arguments its schema
refuses are taught to the model and the function is not run, the run verifies and replays
byte for byte without running a tool, and a changed hint is a ``tools`` divergence at call 0.
The docs' example (docs/tools.md, "Tools from functions") runs as written.

Every run closed here is verified by the pytest plugin as well.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest
from replay_support import assert_readable_diff, failed_replay, verified

import agentfootprint as af
from agentfootprint.testing.records import recorded_events
from agentfootprint.testing.replay import NoModel, silent_twins

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tools.md"
INVALID_KIND = "agentfootprint.validation.args_invalid"


class Cabin(enum.Enum):
    ECONOMY = "economy"
    BUSINESS = "business"


@dataclass(frozen=True)
class Seat:
    """A seat: its row and letter."""

    row: int
    letter: Literal["A", "B", "C"]


class Passenger(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(ge=0)


BOOK_DOC = """Book seats on a flight.

    Args:
        flight: The flight number.
        cabin: The cabin class.
        seats: The seats, one a passenger.
        passengers: Who flies.
    """


def booking_tools(ran: list[tuple[str, Any]], *, changed_hint: bool = False) -> list[af.Tool]:
    """``book`` (sync, with a context) and ``fare`` (async, without); ``changed_hint``: the
    same tools but ``seats`` may be null, a changed hint and nothing else."""

    def book(
        flight: str,
        cabin: Cabin,
        seats: list[Seat],
        passengers: list[Passenger],
        ctx: af.ToolContext,
    ) -> dict[str, Any]:
        ran.append(("book", (flight, cabin, seats, passengers, ctx.tool_call_id)))
        return {"booked": len(seats), "cabin": cabin.value}

    def book_nullable(
        flight: str,
        cabin: Cabin,
        seats: list[Seat] | None,
        passengers: list[Passenger],
        ctx: af.ToolContext,
    ) -> dict[str, Any]:
        return book(flight, cabin, seats or [], passengers, ctx)

    async def fare(flight: str, cabin: Cabin = Cabin.ECONOMY) -> str:
        """The fare of a flight in a cabin."""
        ran.append(("fare", (flight, cabin)))
        return f"{flight} {cabin.value}: 120 EUR"

    chosen = book_nullable if changed_hint else book
    chosen.__doc__ = BOOK_DOC
    return [af.tool(chosen, name="book"), af.tool(fare)]


GOOD = {
    "flight": "AF12",
    "cabin": "business",
    "seats": [{"row": 3, "letter": "A"}, {"row": 3, "letter": "B"}],
    "passengers": [{"name": "Ann", "age": 41}, {"name": "Bo", "age": 7}],
}
BAD = {"flight": "AF12", "cabin": "first", "seats": [{"row": "3", "letter": "D"}]}
SCRIPT = [
    af.reply(
        "Booking.",
        tool_calls=[
            af.tool_call("book", GOOD, id="good"),
            af.tool_call("book", BAD, id="bad"),
            af.tool_call("fare", {"flight": "AF12"}, id="fare"),
        ],
    ),
    "Booked two seats in business.",
]


def recorded(tmp_path: Path, **options: Any) -> tuple[af.Agent, af.RunResult, list[Any]]:
    ran: list[tuple[str, Any]] = []
    agent = af.Agent(
        provider=af.MockProvider(list(SCRIPT)),
        model="m",
        tools=booking_tools(ran),
        store=af.SqliteStore(tmp_path / "runs.db"),
        **options,
    )
    return agent, agent.run_sync("Book AF12 for Ann and Bo."), ran


def tool_results(result: af.RunResult) -> dict[str, dict[str, Any]]:
    return {m["tool_call_id"]: m for m in result.state["history"] if m["role"] == "tool"}


def test_typed_values_reach_the_function_and_invalid_calls_are_taught(tmp_path: Path) -> None:
    agent, result, ran = recorded(tmp_path)
    assert result.answer == "Booked two seats in business."
    assert [name for name, _ in ran] == ["book", "fare"]  # the bad call never ran
    flight, cabin, seats, passengers, call_id = ran[0][1]
    assert (flight, cabin, call_id) == ("AF12", Cabin.BUSINESS, "good")
    assert seats == [Seat(3, "A"), Seat(3, "B")] and all(type(s) is Seat for s in seats)
    assert [type(p) for p in passengers] == [Passenger, Passenger]
    assert passengers[1] == Passenger(name="Bo", age=7)
    assert ran[1][1] == ("AF12", Cabin.ECONOMY)  # the async tool, its default used
    results = tool_results(result)
    assert results["good"]["content"] == '{"booked":2,"cabin":"business"}'
    assert results["fare"]["content"] == "AF12 economy: 120 EUR"
    taught = results["bad"]
    assert taught["is_error"] is True
    assert "did not match its input schema, so it was not run" in taught["content"]
    for path in ("$.cabin", "$.seats[0].row", "$.seats[0].letter", "$: missing"):
        assert path in taught["content"], taught["content"]
    (invalid,) = recorded_events(agent.store, result.run_id, INVALID_KIND)
    assert invalid["tool_call_id"] == "bad" and invalid["mode"] == "enforce"
    served = af.served_at(agent.store, result.run_id, 0)["tools"]
    assert [t["name"] for t in served] == ["book", "fare"]
    assert served[0]["input_schema"] == agent.config.tools[0].input_schema
    assert served[0]["description"] == "Book seats on a flight."
    verified(agent.store, result.run_id)
    agent.close()


def test_unvalidated_calls_the_hints_cannot_take_are_the_tools_error(tmp_path: Path) -> None:
    agent, result, ran = recorded(tmp_path, tool_arg_validation="warn")
    assert [name for name, _ in ran] == ["book", "fare"]
    bad = tool_results(result)["bad"]
    assert bad["is_error"] is True
    assert bad["content"].startswith("Error: tool 'book' raised ToolArgumentError: $")
    assert len(recorded_events(agent.store, result.run_id, INVALID_KIND)) == 1
    verified(agent.store, result.run_id)
    agent.close()


def test_the_run_replays_byte_for_byte_without_running_a_tool(tmp_path: Path) -> None:
    agent, result, ran = recorded(tmp_path)
    executed: list[str] = []
    twin = af.Agent(
        provider=NoModel(),
        model="m",
        tools=silent_twins(booking_tools([]), executed),
        store=af.SqliteStore(tmp_path / "replays.db"),
    )
    replayed = af.replay_sync(twin, agent.store, result.run_id)
    assert executed == [] and replayed.calls_checked == result.calls == 2
    assert replayed.result.answer == result.answer
    assert af.same_recording(agent.store, result.run_id, twin.store, replayed.result.run_id)
    # the decorated tools themselves, in a replay: answered from the recording, never run
    again: list[Any] = []
    live = af.Agent(
        provider=NoModel(), model="m", tools=booking_tools(again), store=af.MemoryStore()
    )
    af.replay_sync(live, agent.store, result.run_id)
    assert again == [] and len(ran) == 2
    twin.close()
    agent.close()


def test_a_changed_hint_is_a_tools_divergence_at_call_0(tmp_path: Path) -> None:
    agent, result, _ = recorded(tmp_path)
    before, after = booking_tools([]), booking_tools([], changed_hint=True)
    assert before[0].description == after[0].description  # only the hint changed
    assert before[0].input_schema != after[0].input_schema
    target = af.MemoryStore()
    twin = af.Agent(provider=NoModel(), model="m", tools=silent_twins(after, []), store=target)
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin, agent.store, result.run_id)
    error = caught.value
    assert (error.call, error.kind, error.position) == (0, "tools", 0)
    assert_readable_diff(error, '"type": "array"', '"anyOf"')
    failed_replay(target, error, result.run_id)
    agent.close()


def test_an_assumed_argument_reaches_the_function_typed(tmp_path: Path) -> None:
    got: list[tuple[str, int, Cabin]] = []

    @af.tool(ask_or_assume={"seats": {"assume": 2}})
    def hold(flight: str, seats: int, cabin: Cabin) -> str:
        """Hold seats on a flight."""
        got.append((flight, seats, cabin))
        return "held"

    agent = af.Agent(
        provider=af.MockProvider(
            [
                af.reply(tool_calls=[af.tool_call("hold", {"flight": "AF1", "cabin": "economy"})]),
                "ok",
            ]
        ),
        model="m",
        tools=[hold],
        store=af.SqliteStore(tmp_path / "runs.db"),
    )
    result = agent.run_sync("Hold seats.")
    assert got == [("AF1", 2, Cabin.ECONOMY)]
    assert "seats = 2 (the default)" in tool_results(result)["call_0_0"]["content"]
    assert "seats" not in hold.input_schema["required"]
    verified(agent.store, result.run_id)
    agent.close()


def test_the_docs_example_runs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Tools from functions", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "docs/tools.md has no example under 'Tools from functions'"
    namespace: dict[str, Any] = {"__name__": "tools_md_example"}
    # as a reader runs it: without this module's postponed annotations
    exec(compile(blocks[0], "docs/tools.md", "exec", dont_inherit=True), namespace)
    assert namespace["result"].answer
