"""``structure_recorders`` and ``group_translator``: the chart told at construction, the agent
as a UI group on request. Neither is recorded: an agent with both records the rows of the
agent without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from feature_support import calls, lookup, record, replays, rows

import agentfootprint as af
from agentfootprint.features import registry
from agentfootprint.features.registry import LLM_CALL_GROUP
from agentfootprint.testing.pytest_plugin import VerifiedRuns

MODES = ("dynamic", "dynamic-grouped", "classic")


class Collector:
    """Keeps everything it is told, in order."""

    def __init__(self) -> None:
        self.told: list[Any] = []

    def on_stage_added(self, stage: af.StageAdded) -> None:
        self.told.append(stage)

    def on_edge_added(self, edge: af.EdgeAdded) -> None:
        self.told.append(edge)

    def on_group(self, group: af.GroupAdded) -> None:
        self.told.append(group)

    def of(self, kind: type) -> list[Any]:
        return [item for item in self.told if isinstance(item, kind)]


class StagesOnly:
    """A recorder with the one required method."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_stage_added(self, stage: af.StageAdded) -> None:
        self.names.append(stage.name)


def tool(name: str) -> af.Tool:
    return af.define_tool(name=name, description=f"The {name}.", execute=lambda args: "ok")


def every_stage(react_mode: str) -> dict[str, Any]:
    """Options that put every stage a feature declares in the chart (``tool_choice`` is
    refused under classic: its three stages are left out there)."""
    options: dict[str, Any] = {
        "tools": [tool("lookup"), tool("other")],
        "window": {"keep_last_turns": 2, "summarize": True},
        "cache_strategy": "breakpoints",
        "inputs_layer": True,  # a feature that may pause: the resume stage
        "output_type": {"type": "object"},  # the output-retry branch
        "findings": True,  # the findings stage
        "answer_layer": True,  # the assess-answer stage
        "notice_prior_turn_evidence": True,  # the integrity checks (no stage of their own)
        "react_mode": react_mode,
    }
    if react_mode != "classic":
        options["tool_choice"] = {}
    return options


def agent(**options: Any) -> af.Agent:
    return af.Agent(provider=af.MockProvider([]), model="m", **options)


def as_described(stage: af.StageAdded) -> dict[str, Any]:
    """A told stage in the shape of a ``chart.describe()`` entry."""
    entry: dict[str, Any] = {"stage": stage.name, "kind": stage.kind}
    if stage.kind == "linear":
        entry["next"] = stage.next
    else:
        entry["branches"] = dict(stage.branches)
    if stage.description:
        entry["description"] = stage.description
    if stage.group is not None:
        entry["group"] = stage.group
    return entry


def edges_of(described: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    """Every place each described stage leads, in ``describe()`` order."""
    found: list[tuple[str, str, str | None]] = []
    for entry in described:
        if entry["kind"] == "linear":
            if entry["next"] is not None:
                found.append((entry["stage"], entry["next"], None))
        else:
            found += [(entry["stage"], t, b) for b, t in entry["branches"].items()]
    return found


# -- structure_recorders -------------------------------------------------------------------


@pytest.mark.parametrize("every", [False, True], ids=["plain", "every-stage"])
@pytest.mark.parametrize("react_mode", MODES)
def test_a_recorder_is_told_exactly_the_described_chart(react_mode: str, every: bool) -> None:
    collector = Collector()
    options = every_stage(react_mode) if every else {"react_mode": react_mode}
    made = agent(structure_recorders=[collector], **options)
    described = made.chart.describe()
    stages = collector.of(af.StageAdded)
    assert [as_described(s) for s in stages] == described
    edges = [(e.source, e.target, e.branch) for e in collector.of(af.EdgeAdded)]
    assert edges == edges_of(described)
    groups = collector.of(af.GroupAdded)
    if react_mode == "dynamic-grouped":
        grouped = tuple(e["stage"] for e in described if e.get("group") == LLM_CALL_GROUP)
        assert groups == [af.GroupAdded(name=LLM_CALL_GROUP, stages=grouped)]
        assert "call-llm" in grouped and "route" not in grouped
    else:
        assert groups == []
    if every:  # the agent holds every stage any feature declares (a new one must join it)
        declared = {spec.name for f in registry.all_features() for spec in f.stages}
        classic_less = {"tool-choice", "tool-choice-off-wire", "tool-choice-wrap-up"}
        expected = declared - classic_less if react_mode == "classic" else declared
        assert {s.name for s in stages} == expected


def test_each_stage_is_followed_by_its_edges_and_the_groups_come_last() -> None:
    collector, plain = Collector(), StagesOnly()
    made = agent(structure_recorders=[collector, plain], react_mode="dynamic-grouped")
    expected: list[Any] = []
    for entry in made.chart.describe():
        expected.append(entry["stage"])
        expected += [(entry["stage"], t) for s, t, _ in edges_of([entry])]
    expected.append(LLM_CALL_GROUP)
    told = [
        item.name if isinstance(item, af.StageAdded | af.GroupAdded) else (item.source, item.target)
        for item in collector.told
    ]
    assert told == expected
    # a recorder without the optional methods hears the stages only
    assert plain.names == [e["stage"] for e in made.chart.describe()]


def test_a_recorder_cannot_change_the_chart() -> None:
    class Vandal:
        def on_stage_added(self, stage: af.StageAdded) -> None:
            object.__setattr__(stage, "next", "nowhere")  # past the frozen dataclass
            with pytest.raises(TypeError):
                stage.branches["final"] = "nowhere"  # type: ignore[index]

        def on_edge_added(self, edge: af.EdgeAdded) -> None:
            object.__setattr__(edge, "target", "nowhere")

    options = every_stage("dynamic")
    vandalised = agent(structure_recorders=[Vandal()], **options)
    assert vandalised.chart.describe() == agent(**options).chart.describe()


class Raises:
    def __init__(self, where: str) -> None:
        self.where = where

    def on_stage_added(self, stage: af.StageAdded) -> None:
        if self.where == "stage" and stage.name == "route":
            raise KeyError("no route here")

    def on_edge_added(self, edge: af.EdgeAdded) -> None:
        if self.where == "edge":
            raise ValueError("edges are hard")

    def on_group(self, group: af.GroupAdded) -> None:
        if self.where == "group":
            raise RuntimeError("groups are harder")


@pytest.mark.parametrize(
    ("where", "error", "method"),
    [
        ("stage", KeyError, "on_stage_added"),
        ("edge", ValueError, "on_edge_added"),
        ("group", RuntimeError, "on_group"),
    ],
)
def test_a_recorder_that_raises_refuses_the_agent_and_opens_no_store(
    where: str, error: type[Exception], method: str, tmp_path: Path
) -> None:
    db = tmp_path / "log.db"
    with pytest.raises(af.UsageError) as caught:
        agent(structure_recorders=[Raises(where)], react_mode="dynamic-grouped", store=db)
    assert caught.value.option == "structure_recorders"
    assert "structure_recorders" in str(caught.value) and method in str(caught.value)
    assert isinstance(caught.value.__cause__, error)
    assert not db.exists()  # refused before any file was opened


def test_a_group_recorder_is_not_asked_without_groups() -> None:
    agent(structure_recorders=[Raises("group")], react_mode="dynamic").close()


class NoStage:
    def on_edge_added(self, edge: af.EdgeAdded) -> None: ...


class NotCallable:
    on_edge_added = 3

    def on_stage_added(self, stage: af.StageAdded) -> None: ...


class Async:
    async def on_stage_added(self, stage: af.StageAdded) -> None: ...


@pytest.mark.parametrize(
    "value",
    [
        StagesOnly(),  # a recorder, not a list of them
        "recorder",
        {"on_stage_added": print},
        [StagesOnly(), NoStage()],
        [NotCallable()],
        [Async()],
        [1],
    ],
    ids=["bare", "str", "mapping", "no-on-stage-added", "not-callable", "async", "number"],
)
def test_misconfigured_recorders_are_refused_at_construction(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        agent(structure_recorders=value)
    assert caught.value.option == "structure_recorders"
    assert "structure_recorders" in str(caught.value)


def test_the_recorders_list_is_read_once() -> None:
    recorders: list[Any] = []
    made = agent(structure_recorders=recorders)
    recorders.append(Raises("stage"))  # too late: the agent kept its own copy
    assert made.config.options["structure_recorders"] == ()


# -- group_translator ----------------------------------------------------------------------


def test_ui_group_translates_the_agents_metadata_once_and_keeps_it() -> None:
    seen: list[af.GroupMetadata] = []

    def translator(metadata: af.GroupMetadata) -> dict[str, Any]:
        seen.append(metadata)
        metadata.extra["slots"].append("not-a-stage")  # the translator's own copy
        return {"label": metadata.name}

    made = agent(group_translator=translator, name="Helper", id="helper-1", tools=[tool("lookup")])
    first = made.ui_group()
    assert first == {"label": "Helper"}
    assert made.ui_group() is first and len(seen) == 1  # cached: asked once
    (metadata,) = seen
    assert (metadata.kind, metadata.id, metadata.name, metadata.members) == (
        "Agent",
        "helper-1",
        "Helper",
        (),
    )
    stages = [e["stage"] for e in made.chart.describe()]
    assert metadata.extra == {"slots": [*stages, "not-a-stage"], "tool_names": ["lookup"]}
    assert "not-a-stage" not in made.chart.stages


def test_ui_group_is_none_without_a_translator() -> None:
    assert agent().ui_group() is None


def test_a_translator_that_raises_is_named_and_asked_again() -> None:
    answers: list[Any] = [ZeroDivisionError("no"), "group"]

    def translator(metadata: af.GroupMetadata) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    made = agent(group_translator=translator)
    with pytest.raises(af.UsageError) as caught:
        made.ui_group()
    assert caught.value.option == "group_translator"
    assert isinstance(caught.value.__cause__, ZeroDivisionError)
    assert made.ui_group() == "group" and answers == []


@pytest.mark.parametrize("value", ["translator", 3, object()])
def test_a_translator_that_is_not_callable_is_refused(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        agent(group_translator=value)
    assert caught.value.option == "group_translator"


# -- neither is recorded -------------------------------------------------------------------


def test_runs_with_recorders_and_a_translator_record_the_same_rows(
    tmp_path: Path, verified_runs: VerifiedRuns
) -> None:
    script = lambda: [*calls({"q": "a"}, {"q": "b"}), "and again"]  # noqa: E731
    observed: dict[str, Any] = {
        "structure_recorders": [Collector(), StagesOnly()],
        "group_translator": lambda metadata: metadata.id,
    }
    plain, first = record(
        script, [lookup()], react_mode="dynamic-grouped", store=tmp_path / "plain.db"
    )
    watched, second = record(
        script,
        [lookup()],
        react_mode="dynamic-grouped",
        store=tmp_path / "watched.db",
        **observed,
    )
    assert watched.ui_group() == "agent"
    again = watched.run_sync("again", continue_from=second)
    plain_again = plain.run_sync("again", continue_from=first)
    for mine, theirs in ((second, first), (again, plain_again)):
        assert rows(watched.store, mine.run_id) == rows(plain.store, theirs.run_id)
    assert len(verified_runs.results) == 4  # the plugin verified each run at its close
    for run in (second, again):
        assert af.verify_run(watched.store, run.run_id).outcome is af.Outcome.VALID_UNSIGNED
    # a twin with its own recorders replays the run with no divergence
    replays(watched, second, react_mode="dynamic-grouped", **observed)
